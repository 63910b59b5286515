"""Snapshots keep their messages as JSON and the model's encoded prefix (docs/store.md#snapshots).

The laws pinned here: a session restored from a snapshot derives exactly the messages a
whole-log load derives, but decodes them only if something reads them, and not on the path
from resume to the first request; a Chat Completions encoder seeded from the snapshot's
encoded prefix builds, byte for byte, the body a cold encoder builds from the decoded
messages (and checks every wire message after the prefix); an encoded prefix of another key,
count or shape, or in a damaged snapshot, is never believed.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from duraloop.errors import CorruptLogError, LlmError, ToolError, WirePairingError
from duraloop.llm import DeepSeekChatModel, ModelRequest, OpenAIChatModel, ScriptedModel
from duraloop.llm._chat_completions._request import RequestEncoder
from duraloop.llm._chunks import StreamChunk
from duraloop.log import (
    EncodedPrefix,
    LazyEvents,
    LazyMessages,
    Session,
    decode_checkpoint,
    encode_checkpoint,
)
from duraloop.log._messages import Message, assistant_message, tool_result_message, user_message
from duraloop.loop import LoopConfig, SessionSetup, resume_session, start_session
from duraloop.store import JsonlStore
from duraloop.tools import Tool, ToolContext

SNAPSHOT = "session.snapshot"
_OPENAI = OpenAIChatModel("m", api_key="sk-test")
_DEEPSEEK = DeepSeekChatModel("m", api_key="sk-test")
_COLD = {
    "openai": OpenAIChatModel("m", api_key="sk-test"),
    "deepseek": DeepSeekChatModel("m", api_key="sk-test"),
}


@pytest.fixture(autouse=True)
def _both_snapshot_reads(snapshot_read: str) -> None:
    """Every test here runs with the snapshot read streamed and read whole."""


def _fresh(model: Any) -> Any:
    """`model` with a new, empty encoder (as in a new process)."""
    old = model._encoder
    model._encoder = RequestEncoder(
        model.model, provider=old.provider, echo=old.echo, options=old.options
    )
    return model


def _request(messages: Sequence[Message]) -> ModelRequest:
    return ModelRequest(messages=messages, system="be brief")


def _cold(model: Any, messages: Sequence[Message]) -> bytes:
    """The body a fresh adapter of `model`'s route builds from decoded messages."""
    cold = _fresh(_COLD[model.provider])
    return bytes(cold.encode_request(_request(list(messages))))


class _Scripted(ScriptedModel):
    """Without the scripted model's fake token estimate, which walks the whole history (a
    real adapter reads the provider's usage instead)."""

    def _input_tokens(self, request: ModelRequest) -> int:
        return len(request.messages)


class EncodingScriptedModel:
    """A scripted model whose requests are also encoded by a real OpenAI adapter's encoder
    (as the OpenAI adapter's loop would): it gives the snapshot its encoded prefix."""

    def __init__(self, script: list[Any]) -> None:
        self._inner = _Scripted(script)
        self.provider = self._inner.provider
        self.model = self._inner.model
        self.adapter = _fresh(_OPENAI)

    def encoded_prefix(self, messages: Sequence[Message]) -> EncodedPrefix | None:
        return self.adapter.encoded_prefix(messages)  # type: ignore[no-any-return]

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        self.adapter.encode_request(request)
        async for chunk in self._inner.stream(request):
            yield chunk


def _tool(name: str) -> Tool:
    async def body(arguments: Any, context: ToolContext) -> str:
        if arguments.get("fail"):
            raise ToolError("failed on purpose", code="TEST_FAILURE")
        return f"{name} {arguments.get('i')}"

    return Tool(
        name=name,
        description=f"The {name} tool.",
        parameters={"type": "object", "properties": {"i": {"type": "integer"}}},
        validator=lambda arguments: arguments,
        body=body,
        parallel=True,
    )


TOOLS = [_tool("alpha"), _tool("beta")]


def _script(turns: Sequence[tuple[int, int, bool, bool]], start: int = 0) -> list[Any]:
    script: list[Any] = []
    for n, (steps, calls, fail, error) in enumerate(turns, start):
        for step in range(steps):
            script.append(
                {
                    "text": f"turn {n} step {step}",
                    "tool_calls": [
                        {"name": TOOLS[k % 2].name, "arguments": {"i": k, "fail": fail and k == 0}}
                        for k in range(calls)
                    ],
                }
            )
        script.append(
            {"error": {"code": "AUTH", "message": "bad key"}} if error else {"text": f"{n} done"}
        )
    return script


async def _run(
    root: Path,
    workspace: Path,
    turns: Sequence[tuple[int, int, bool, bool]],
    *,
    session_id: str | None = None,
    snapshot_every: int | None = 1,
    encoding: bool = True,
) -> str:
    script = _script(turns)
    model: Any = EncodingScriptedModel(script) if encoding else ScriptedModel(script)
    setup = SessionSetup(
        store=JsonlStore(root),
        model=model,
        tools=TOOLS,
        cwd=workspace,
        config=LoopConfig(max_steps=10, snapshot_every=snapshot_every, retry=None),
    )
    loop = start_session(setup) if session_id is None else resume_session(session_id, setup)[0]
    with loop:
        for n in range(len(turns)):
            try:
                await loop.run_turn(f"prompt {n}")
            except LlmError:
                pass
    return loop.session.id


def _snapshot_file(root: Path) -> Path:
    found = list(root.rglob(SNAPSHOT))
    assert len(found) == 1
    return found[0]


def _copy(root: Path, to: Path, *, snapshot: bool) -> Path:
    shutil.copytree(root, to)
    if not snapshot:
        for path in to.rglob(SNAPSHOT):
            path.unlink()
    return to


_turns = st.lists(
    st.tuples(st.integers(0, 3), st.integers(1, 3), st.booleans(), st.booleans()),
    min_size=1,
    max_size=3,
)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(first=_turns, later=st.lists(_turns.filter(bool), max_size=1), every=st.sampled_from([1, 5]))
def test_property_restored_messages_and_seeded_bodies_equal_a_whole_log_load(
    tmp_path_factory: pytest.TempPathFactory,
    first: list[tuple[int, int, bool, bool]],
    later: list[list[tuple[int, int, bool, bool]]],
    every: int,
) -> None:
    """Random sessions written by a loop whose model encodes (so snapshots carry the encoded
    prefix), with or without more turns after the last snapshot: the restored session's
    messages equal the whole-log load's (materialized), the resume decodes none of them, and a
    fresh adapter's first and second bodies equal a cold adapter's byte for byte."""
    tmp = tmp_path_factory.mktemp("enc")
    workspace = tmp / "ws"
    workspace.mkdir()
    root = tmp / "store"
    sid = anyio.run(lambda: _run(root, workspace, first, snapshot_every=every))
    for turns in later:  # a tail after the last snapshot
        anyio.run(partial(_run, root, workspace, turns, session_id=sid, snapshot_every=None))
    _, restored = JsonlStore(_copy(root, tmp / "a", snapshot=True)).prepare(sid)
    _, whole = JsonlStore(_copy(root, tmp / "b", snapshot=False)).prepare(sid)
    messages = restored.request_history()
    assert isinstance(messages, LazyMessages)
    model = _fresh(_OPENAI)
    body = model.encode_request(_request(messages))
    assert model._encoder.seeded
    assert not messages.materialized  # the seeded encode read the tail only
    assert not isinstance(restored.events, LazyEvents) or not restored.events.materialized
    expected = whole.derive_messages()
    assert type(expected) is list
    assert body == _cold(_OPENAI, expected)
    # The next request extends the seeded cache: still the cold bytes, still not decoded.
    extended = restored.request_history()
    assert isinstance(extended, LazyMessages)
    extended.append(user_message("one more"))
    assert model.encode_request(_request(extended)) == _cold(_OPENAI, [*expected, extended[-1]])
    assert not messages.materialized
    # Another dialect's key: not believed, encoded cold (and now decoded), the same bytes.
    deepseek = _fresh(_DEEPSEEK)
    assert deepseek.encode_request(_request(messages)) == _cold(_DEEPSEEK, expected)
    assert not deepseek._encoder.seeded
    assert messages == expected and expected == messages
    assert list(messages) == expected


def test_resume_to_a_completed_turn_decodes_neither_events_nor_messages(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    root = tmp_path / "store"
    sid = anyio.run(lambda: _run(root, workspace, [(2, 3, False, False), (1, 2, True, False)]))
    model = EncodingScriptedModel(_script([(1, 2, False, False)], start=9))
    setup = SessionSetup(store=JsonlStore(root), model=model, tools=TOOLS, cwd=workspace)
    loop, _ = resume_session(sid, setup)
    session = loop.session
    events, messages = session.events, session.messages
    assert isinstance(events, LazyEvents) and isinstance(messages, LazyMessages)
    result = anyio.run(loop.run_turn, "again")
    assert result.kind == "completed"
    assert model.adapter._encoder.seeded
    # resume, both requests, the tools, the turn's end and the snapshot at close: tail only
    loop.close()
    assert not events.materialized
    assert messages.decodes == 0
    # The snapshot written at close spliced the stored JSON with the tail: a new resume
    # derives the same messages as the whole log.
    _, again = JsonlStore(_copy(root, tmp_path / "a", snapshot=True)).prepare(sid)
    _, whole = JsonlStore(_copy(root, tmp_path / "b", snapshot=False)).prepare(sid)
    assert again.restored_from is not None
    assert again.restored_from.count == len(events)
    assert list(again.request_history()) == whole.derive_messages()
    assert messages == whole.derive_messages()  # read now: decoded once, the same values
    assert messages.decodes == 1


def test_a_model_without_encoded_prefixes_writes_none_and_resumes_cold(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    root = tmp_path / "store"
    sid = anyio.run(lambda: _run(root, workspace, [(1, 2, False, False)], encoding=False))
    _, session = JsonlStore(root).prepare(sid)
    assert session.restored_from is not None and session.restored_from.encoded == []
    messages = session.request_history()
    model = _fresh(_OPENAI)
    body = model.encode_request(_request(messages))
    assert not model._encoder.seeded
    assert body == _cold(_OPENAI, list(messages))


def _result(call_id: str, text: str) -> Message:
    return tool_result_message(call_id, [{"type": "text", "text": text}], is_error=False)


def _history(groups: int) -> list[Message]:
    """A history of `groups` steps, each with a call of an accepted id and one mapped id."""
    messages: list[Message] = [user_message("start")]
    for n in range(groups):
        ids = [f"call_{n}", f"toolu_{n}|x"]
        calls = [{"type": "tool-call", "id": i, "name": "read", "arguments": {}} for i in ids]
        text = {"type": "text", "text": f"step {n}"}
        messages.append(assistant_message([text, *calls], provider="openai", model="m"))
        messages += [_result(call_id, f"out {n}") for call_id in ids]
    done = {"type": "text", "text": "done"}
    messages.append(assistant_message([done], provider="openai", model="m"))
    return messages


def _restored(messages: list[Message], prefix: EncodedPrefix | None) -> LazyMessages:
    encodings = {} if prefix is None else {prefix.key: prefix}
    return LazyMessages(len(messages), msgspec.json.encode(messages), encodings)


def _prefix_of(messages: list[Message]) -> EncodedPrefix:
    prefix = _fresh(_OPENAI).encoded_prefix(messages)
    assert prefix is not None
    return prefix  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    "damage", ["key", "count", "not-array", "aliases-wrong", "aliases-shape", "none"]
)
def test_an_encoded_prefix_that_is_not_ours_is_not_believed(damage: str) -> None:
    messages = _history(3)
    good = _prefix_of(messages)
    assert good.meta["ids"]  # the `toolu_n|k` ids are mapped: their aliases travel with it
    changes: dict[str, dict[str, Any]] = {
        "key": {"key": "chat-completions/0/openai/never"},
        "count": {"messages": good.messages - 1},
        "not-array": {"body": b'{"role":"user"}'},
        "aliases-wrong": {"meta": {"ids": {"toolu_0|x": "call_0"}}},
        "aliases-shape": {"meta": {"ids": ["toolu_0|x"]}},
    }
    prefix = None if damage == "none" else msgspec.structs.replace(good, **changes[damage])
    restored = _restored(messages, prefix)
    restored.append(user_message("next"))
    model = _fresh(_OPENAI)
    body = model.encode_request(_request(restored))
    assert not model._encoder.seeded
    assert body == _cold(_OPENAI, [*messages, restored[-1]])


def test_a_seeded_encoder_checks_the_tail_and_reports_the_true_index() -> None:
    messages = _history(2)
    restored = _restored(messages, _prefix_of(messages))
    stray = _result("call_nobody", "stray")
    restored.append(stray)
    model = _fresh(_OPENAI)
    with pytest.raises(WirePairingError) as seeded:
        model.encode_request(_request(restored))
    with pytest.raises(WirePairingError) as cold:
        _cold(_OPENAI, [*messages, stray])
    assert seeded.value.message_index == cold.value.message_index
    assert str(seeded.value) == str(cold.value)


def test_a_seeded_encoder_maps_prefix_ids_back_and_forgets_the_seed_for_another_history() -> None:
    messages = _history(2)
    restored = _restored(messages, _prefix_of(messages))
    model = _fresh(_OPENAI)
    model.encode_request(_request(restored))
    assert model._encoder.seeded and not restored.materialized
    wire = model._encoder.ids.to_wire("toolu_1|x")
    assert wire != "toolu_1|x" and model._encoder.ids.from_wire(wire) == "toolu_1|x"
    other = _history(1)
    assert model.encode_request(_request(other)) == _cold(_OPENAI, other)
    assert not model._encoder.seeded


def test_checkpoint_sections_round_trip_and_refuse_a_bad_shape() -> None:
    session = Session("s")
    session.append("user/message", user_message("hi"), surface_op="append")
    prefix = EncodedPrefix(key="k", messages=1, body=b'[{"a":1}]', meta={"x": 1})
    checkpoint = session.checkpoint({"lastTurn": 0}, encoded=[prefix, prefix])
    assert checkpoint is not None and len(checkpoint.encoded) == 1  # one per key
    raw = encode_checkpoint(checkpoint)
    back = decode_checkpoint(b"xx" + raw, 2)
    assert isinstance(back.messages, memoryview)  # a view of the bytes, not decoded
    assert bytes(back.messages) == msgspec.json.encode(list(session.messages))
    assert back.message_count == 1 and back.loop == {"lastTurn": 0}
    assert [(e.key, e.messages, bytes(e.body), e.meta) for e in back.encoded] == [
        ("k", 1, b'[{"a":1}]', {"x": 1})
    ]
    stale = EncodedPrefix(key="old", messages=5, body=b"[]")
    assert session.checkpoint(encoded=[stale]).encoded == []  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="sections"):
        decode_checkpoint(raw + b"\n[]")
    with pytest.raises(ValueError, match="not a JSON array"):
        decode_checkpoint(raw.replace(b'\n[{"a":1}]', b'\n{"a":1}'))
    with pytest.raises(ValueError, match="newline"):
        encode_checkpoint(
            msgspec.structs.replace(
                checkpoint, encoded=[EncodedPrefix(key="k", messages=1, body=b"[\n]")]
            )
        )


def test_lazy_messages_read_like_a_list_and_encode_without_decoding() -> None:
    messages = _history(1)
    lazy = LazyMessages(len(messages), msgspec.json.encode(messages))
    tail = user_message("after")
    lazy.append(tail)
    assert lazy[len(messages) :] == [tail] and lazy[-1] is tail and lazy[:0] == []
    assert msgspec.json.decode(lazy.encoded()) == [*messages, tail]
    copy = lazy.copy()
    copy.append(user_message("only in the copy"))
    assert len(lazy) == len(messages) + 1 and len(copy) == len(lazy) + 1
    assert lazy.decodes == 0 and not copy.materialized
    assert lazy[0] == messages[0] and lazy.decodes == 1 and copy.materialized
    assert lazy == [*messages, tail] and list(reversed(lazy))[0] is tail
    assert LazyMessages(0, b"[]").encoded() == b"[]"
    broken = LazyMessages(2, b'[{"a":1}]')
    with pytest.raises(Exception, match="are 1, not 2"):
        broken[0]


@pytest.mark.parametrize("shorten", [False, True])
def test_a_damaged_line_after_the_snapshot_is_reported_as_without_it(
    tmp_path: Path, shorten: bool
) -> None:
    """The covered prefix is digested, not kept: a torn tail after it still gets the line
    number a whole-log read gives; a log shorter than the prefix ignores the snapshot."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    root = tmp_path / "store"
    sid = anyio.run(lambda: _run(root, workspace, [(1, 2, False, False)]))
    log = next(root.rglob("session.jsonl"))
    data = log.read_bytes()
    if shorten:
        log.write_bytes(data[: len(data) // 2])
    else:
        log.write_bytes(data + b'{"type": "not an event"}\n')
    reports = []
    for name, snapshot in (("a", True), ("b", False)):
        loaded, session = JsonlStore(_copy(root, tmp_path / name, snapshot=snapshot)).prepare(sid)
        cut = loaded.repair.cut
        events = list(session.events[:-1])
        reports.append((loaded.repair.truncated_bytes, cut, events, session.derive_messages()))
        if snapshot:
            expected = "ignored: the log is" if shorten else "used"
            assert loaded.snapshot.startswith(expected)
    assert reports[0] == reports[1]
    cut = reports[0][1]
    assert cut is not None and (shorten or "at line" in cut.reason)


def test_messages_left_on_disk_are_checked_when_read_back(
    tmp_path: Path, snapshot_read: str
) -> None:
    """An uncompressed snapshot's messages section is read only when decoded, and only
    believed if it is still the section digested at load time."""
    if snapshot_read != "streamed":
        pytest.skip("a small snapshot file is read whole")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    root = tmp_path / "store"
    sid = anyio.run(lambda: _run(root, workspace, [(1, 2, False, False)]))
    _, whole = JsonlStore(_copy(root, tmp_path / "b", snapshot=False)).prepare(sid)
    _, restored = JsonlStore(root).prepare(sid)
    assert restored.restored_from is not None
    assert callable(restored.restored_from.messages)  # left on disk
    path = _snapshot_file(root)
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x01  # inside the messages section
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptLogError, match="changed since the session was loaded"):
        list(restored.request_history())
    data[-3] ^= 0x01
    path.write_bytes(bytes(data))
    assert restored.derive_messages() == whole.derive_messages()
