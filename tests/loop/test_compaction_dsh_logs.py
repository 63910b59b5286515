"""dsh's compacted logs are read and continued (compaction-spec 10, 11, case C50).

The log is built here in the shape of dsh's `compaction-recovery` snapshot (its seqs, its
transaction after a `CONTEXT_WINDOW_EXCEEDED` finish inside step 2, its checkpoint citing
`[CS, CY, 4]`), with our own texts. It derives what dsh's derivation does: the checkpoint,
then the retained tool pair and the answer; duraloop continues it in a new turn, and the
estimate of a shadowed message is the `shadowedTokenCount` dsh records.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from duraloop.log import (
    CompactionFold,
    Event,
    Session,
    checkpoint_message,
    estimate_message,
    is_checkpoint,
    project,
)
from duraloop.testing import assert_log_valid

from ._compaction_support import assert_pairs_for_both_providers, compacting_loop

pytestmark = pytest.mark.anyio

PROMPT = "Record the premise, run one marker through bash, then say COMPACTION RECOVERED."


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _ev(seq: int, kind: str, data: dict[str, Any], **envelope: Any) -> Event:
    return Event(seq=seq, time=0, type=kind, data=data, **envelope)


def _chunk(seq: int, step: int, chunk: dict[str, Any]) -> Event:
    return _ev(seq, "assistant/chunk", {"turn": 1, "step": step, "chunk": chunk})


def c50_log() -> list[Event]:
    """dsh's compaction-recovery shape: overflow in step 2, the prompt (seq 4) compacted."""
    prompt = {
        "content": [{"type": "text", "text": PROMPT}],
        "source": {"kind": "user"},
        "role": "user",
        "id": "m-prompt",
    }
    call = {
        "type": "tool-call",
        "id": "call_1",
        "name": "bash",
        "arguments": '{"command":"echo alpha"}',
    }
    shadowed = estimate_message(prompt)
    checkpoint = checkpoint_message(
        [{"type": "text", "text": "The user asked for one bash marker."}],
        compaction_id="cmp-1",
        source_command_id=None,
    )
    lifecycle = {"compactionId": "cmp-1", "turn": 1}
    header = {"config": {"provider": "deepseek", "model": "deepseek-chat"}, "system": "be brief"}
    return [
        _ev(0, "agent/inbox/spliced", {"target": "next-turn", "start": 0, "inserted": [prompt]}),
        _ev(1, "turn/start", {"turn": 1}),
        _ev(
            2,
            "agent/inbox/spliced",
            {"target": "next-turn", "start": 0, "removedCount": 1, "inserted": []},
        ),
        _ev(3, "step/start", {"turn": 1, "step": 1}),
        _ev(4, "user/message", prompt, surface_op="append"),
        _ev(
            5,
            "session/title",
            {"title": "Record the premise", "messageSeqs": [4], "source": {"kind": "fallback"}},
        ),
        _ev(6, "request/header", {"header": header, "reason": "initial"}),
        _ev(7, "request/context", {"provider": "deepseek", "model": "deepseek-chat"}),
        _chunk(
            8,
            1,
            {
                "type": "block-start",
                "index": 0,
                "blockType": "tool-call",
                "id": "call_1",
                "name": "bash",
            },
        ),
        _chunk(9, 1, {"type": "tool-call-delta", "index": 0, "delta": '{"command":"echo alpha"}'}),
        _chunk(10, 1, {"type": "block-end", "index": 0}),
        _chunk(11, 1, {"type": "usage", "usage": {"inputTokens": 900, "outputTokens": 10}}),
        _chunk(12, 1, {"type": "finish", "reason": {"kind": "tool-calls"}}),
        _ev(
            13,
            "assistant/message",
            {
                "turn": 1,
                "step": 1,
                "message": {
                    "id": "m-a1",
                    "role": "assistant",
                    "content": [call],
                    "source": {
                        "kind": "model",
                        "provider": "deepseek",
                        "model": "deepseek-chat",
                    },
                },
            },
            surface_op="append",
            source_event_seqs=[8, 9, 10, 11, 12],
        ),
        _ev(
            14,
            "tool/call",
            {
                "turn": 1,
                "step": 1,
                "callId": "call_1",
                "name": "bash",
                "arguments": {"command": "echo alpha"},
            },
        ),
        _ev(
            15,
            "tool/result",
            {
                "turn": 1,
                "step": 1,
                "message": {
                    "id": "m-r1",
                    "role": "user",
                    "content": [
                        {
                            "type": "tool-result",
                            "toolCallId": "call_1",
                            "content": [{"type": "text", "text": "alpha\\n[exit code: 0]"}],
                            "isError": False,
                        }
                    ],
                    "source": {"kind": "tool", "callId": "call_1"},
                },
            },
            surface_op="append",
            source_event_seqs=[14],
        ),
        _ev(16, "step/end", {"turn": 1, "step": 1}),
        _ev(17, "step/start", {"turn": 1, "step": 2}),
        _chunk(
            18,
            2,
            {
                "type": "finish",
                "reason": {
                    "kind": "error",
                    "failure": {
                        "code": "CONTEXT_WINDOW_EXCEEDED",
                        "message": "prompt is too long",
                        "retryable": False,
                    },
                },
            },
        ),
        _ev(19, "compaction/start", lifecycle),
        _ev(
            20,
            "compaction/summary",
            {
                "compactionId": "cmp-1",
                "summary": [{"type": "text", "text": "The user asked for one bash marker."}],
                "shadowedRange": {"start": 4, "end": 4},
                "shadowedSeqs": [4],
                "shadowedTokenCount": shadowed,
                "provider": "deepseek",
                "model": "deepseek-chat",
                "maxTokens": 32,
                "usage": {"inputTokens": 20, "outputTokens": 4},
            },
        ),
        _ev(
            21,
            "user/message",
            dict(checkpoint),
            surface_op={"op": "replace", "start": 4, "end": 4},
            source_event_seqs=[19, 20, 4],
        ),
        _ev(22, "compaction/end", lifecycle),
        _chunk(23, 2, {"type": "block-start", "index": 0, "blockType": "text"}),
        _chunk(24, 2, {"type": "text-delta", "index": 0, "delta": "COMPACTION RECOVERED"}),
        _chunk(25, 2, {"type": "block-end", "index": 0}),
        _chunk(26, 2, {"type": "usage", "usage": {"inputTokens": 300, "outputTokens": 3}}),
        _chunk(27, 2, {"type": "finish", "reason": {"kind": "stop"}}),
        _ev(
            28,
            "assistant/message",
            {
                "turn": 1,
                "step": 2,
                "message": {
                    "id": "m-a2",
                    "role": "assistant",
                    "content": [{"type": "text", "text": "COMPACTION RECOVERED"}],
                    "source": {
                        "kind": "model",
                        "provider": "deepseek",
                        "model": "deepseek-chat",
                    },
                },
            },
            surface_op="append",
            source_event_seqs=[23, 24, 25, 26, 27],
        ),
        _ev(29, "step/end", {"turn": 1, "step": 2}),
        _ev(30, "turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
    ]


def test_c50_a_dsh_compacted_log_derives_dsh_messages() -> None:
    events = c50_log()
    session = Session("dsh", seed=events)
    assert session.surface.nodes == [21, 13, 15, 28]
    messages = session.derive_messages()
    assert [m["id"] for m in messages[1:]] == ["m-a1", "m-r1", "m-a2"]
    assert is_checkpoint(messages[0]) and messages[0] == project(events[21])
    assert PROMPT not in str(messages)
    assert_log_valid(session)


def test_c50_the_estimate_prices_the_shadowed_message_as_dsh_recorded() -> None:
    events = c50_log()
    assert estimate_message(project(events[4])) == events[20].data["shadowedTokenCount"]
    fold = CompactionFold()
    fold.feed(events)
    assert fold.nodes == [21, 13, 15, 28] and fold.bracket is None
    assert fold.tokens() >= sum(fold.prices)


async def test_c50_duraloop_continues_a_dsh_compacted_log(tmp_path: Path) -> None:
    session = Session("dsh", seed=c50_log())
    _, model, loop = compacting_loop(
        tmp_path, [{"text": "continued"}], window=None, session=session
    )
    result = await loop.run_turn("and now?")
    assert result.kind == "completed" and result.text == "continued"
    sent = model.requests[-1].messages
    assert is_checkpoint(sent[0]) and sent[-1]["content"][0]["text"] == "and now?"
    await assert_pairs_for_both_providers(sent)
    assert_log_valid(session)
    # and compacts it again: the old checkpoint is re-summarized at the head
    compacted = await loop.compact()
    assert compacted is not None and compacted.shadowed >= 4
    assert is_checkpoint(session.derive_messages()[0])
