"""Recovery histories through every adapter: the exact payload is paired (Law 4,
docs/providers.md#pairing-rules, #error-tool-results).

Each scenario is a session log in the conformance notation of
docs/cases.md#log-and-persistence-cases, built the way the loop and crash repair write it: parallel
calls answered in model order, error results, a turn cancelled before dispatch, a max-tokens message
whose calls were dropped, a crash closed by repair (`TOOL_OUTCOME_UNKNOWN` and `TOOL_NOT_STARTED`),
a fork mid-history, and a session that moves from DeepSeek ids to Anthropic ids and to ids neither
dialect accepts. The log derives the history (so the scenario is what a real request would carry);
every adapter (`OpenAIChatModel`, `DeepSeekChatModel` with each effort, `AnthropicMessagesModel`
with and without thinking) turns it into its body, and the dialect's pre-send checker must accept
that body. The body `encode_request` would send must equal `payload`, and the wire call ids must be
the history's ids mapped by `wire_tool_id`, none dropped or added. Nothing is sent: the clients
point at a closed loopback port and are closed after use.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Protocol

import pytest

from conformance._builders import (
    SE,
    SS,
    TC,
    TE,
    TR,
    TS,
    A,
    Spec,
    U,
    build,
    call,
    txt,
)
from duraloop.llm import (
    ModelRequest,
    ToolSchema,
    check_anthropic_messages,
    check_chat_completions_messages,
)
from duraloop.llm._anthropic import AnthropicMessagesModel
from duraloop.llm._chat_completions import DeepSeekChatModel, OpenAIChatModel
from duraloop.llm._tool_ids import ANTHROPIC_IDS, CHAT_COMPLETIONS_IDS, ToolIdRule, wire_tool_id
from duraloop.log import (
    Message,
    Session,
    check_pairing,
    fork_seed,
    interrupted_turn_closers,
    text_of,
    tool_calls_of,
)
from duraloop.log.vocabulary import (
    ABORTED_BEFORE_DISPATCH_ERROR,
    ABORTED_BEFORE_DISPATCH_TEXT,
    NOT_STARTED_TEXT,
    OUTCOME_UNKNOWN_TEXT,
)

pytestmark = pytest.mark.anyio

CLOSED_PORT = "http://127.0.0.1:9"  # discard port: never contacted, payloads are built only
TOOLS = (ToolSchema("bash", "Run a shell command.", {"type": "object", "properties": {}}),)


class Adapter(Protocol):
    provider: str

    def payload(self, request: ModelRequest) -> dict[str, Any]: ...

    def encode_request(self, request: ModelRequest) -> bytes: ...

    async def aclose(self) -> None: ...


ADAPTERS: dict[str, Callable[[], Any]] = {
    "openai": lambda: OpenAIChatModel("gpt-test", api_key="sk-test", base_url=CLOSED_PORT),
    "deepseek-default": lambda: DeepSeekChatModel(
        "deepseek-chat", api_key="sk-test", base_url=CLOSED_PORT
    ),
    "deepseek-off": lambda: DeepSeekChatModel(
        "deepseek-chat", api_key="sk-test", base_url=CLOSED_PORT, reasoning_effort="off"
    ),
    "deepseek-high": lambda: DeepSeekChatModel(
        "deepseek-chat", api_key="sk-test", base_url=CLOSED_PORT, reasoning_effort="high"
    ),
    "anthropic": lambda: AnthropicMessagesModel(
        "claude-test", api_key="sk-ant-test", base_url=CLOSED_PORT
    ),
    "anthropic-thinking": lambda: AnthropicMessagesModel(
        "claude-test", api_key="sk-ant-test", base_url=CLOSED_PORT, reasoning_effort="high"
    ),
}


def reasoning(text: str) -> dict[str, Any]:
    return {"type": "reasoning", "text": text}


def answered_step(
    turn: int, step: int, *ids: str, prompt: str | None = None, errors: tuple[str, ...] = ()
) -> list[Spec]:
    """A step whose calls all ran, results committed in model order."""
    specs = [SS(turn, step)] + ([U(prompt)] if prompt else [])
    specs.append(A(turn, step, txt("let me look"), *map(call, ids)))
    specs += [TC(turn, step, i) for i in ids]
    for i in ids:
        failed = i in errors
        text = f"Error: {i} failed" if failed else f"output of {i}"
        specs.append(TR(turn, step, i, text, is_error=failed))
    return [*specs, SE(turn, step)]


def final_step(turn: int, step: int, text: str = "done") -> list[Spec]:
    return [SS(turn, step), A(turn, step, txt(text)), SE(turn, step)]


def turn_with_calls(turn: int, prompt: str, *ids: str) -> list[Spec]:
    return [TS(turn), *answered_step(turn, 1, *ids, prompt=prompt), *final_step(turn, 2), TE(turn)]


def derived(specs: list[Spec]) -> list[Message]:
    return Session("s", seed=build(*specs)).derive_messages()


def append_all(session: Session, specs: list[Spec]) -> None:
    for spec in specs:
        sources = spec.sources
        if spec.cite_call is not None:  # a result cites its latest tool/call, as the loop does
            sources = [
                e.seq
                for e in session.events
                if e.type == "tool/call" and e.data.get("callId") == spec.cite_call
            ][-1:]
        session.append(spec.type, spec.data, surface_op=spec.surface_op, source_event_seqs=sources)


def parallel_calls() -> list[Message]:
    return derived(turn_with_calls(1, "list three dirs", "call_a", "call_b", "call_c"))


def error_results() -> list[Message]:
    specs = [TS(1), *answered_step(1, 1, "call_ok", "call_bad", prompt="try", errors=("call_bad",))]
    specs += [SS(1, 2), A(1, 2, call("call_empty")), TC(1, 2, "call_empty")]
    specs += [TR(1, 2, "call_empty", "", is_error=True), SE(1, 2), *final_step(1, 3), TE(1)]
    return derived(specs)


def cancelled_before_dispatch() -> list[Message]:
    specs = [TS(1), SS(1, 1), U("do two things")]
    specs.append(A(1, 1, txt("on it"), call("call_1"), call("call_2")))
    for i in ("call_1", "call_2"):
        error = dict(ABORTED_BEFORE_DISPATCH_ERROR)
        specs += [
            TC(1, 1, i),
            TR(1, 1, i, ABORTED_BEFORE_DISPATCH_TEXT, is_error=True, error=error),
        ]
    specs += [SE(1, 1), TE(1, "aborted", reason={"kind": "user"})]
    specs += [TS(2), SS(2, 1), U("never mind, say hi"), A(2, 1, txt("hi")), SE(2, 1), TE(2)]
    return derived(specs)


def cancelled_mid_stream() -> list[Message]:
    # A user cancellation mid-stream keeps the delivered text only
    # (docs/providers.md#error-tool-results (c)).
    specs = [TS(1), SS(1, 1), U("long answer"), A(1, 1, reasoning("hmm"), txt("The first part"))]
    specs += [SE(1, 1), TE(1, "aborted", reason={"kind": "user"})]
    return derived([*specs, *turn_with_calls(2, "go on", "call_x")])


def max_tokens_calls_dropped() -> list[Message]:
    # The assembler dropped the truncated calls: the stored message holds text only.
    specs = [TS(1), SS(1, 1), U("write a lot"), A(1, 1, txt("a very long")), SE(1, 1)]
    specs.append(TE(1, "max-tokens"))
    return derived([*specs, *turn_with_calls(2, "continue", "call_y")])


def crash_repaired() -> list[Message]:
    calls = (call("call_done"), call("call_started"), call("call_queued"))
    specs = [TS(1), SS(1, 1), U("three calls"), A(1, 1, *calls)]
    specs += [TC(1, 1, "call_done"), TR(1, 1, "call_done"), TC(1, 1, "call_started")]
    events = build(*specs)  # the process died here: call_started ran, call_queued did not
    session = Session("s", seed=[*events, *interrupted_turn_closers(events)])
    append_all(session, [TS(2), SS(2, 1), U("resume"), A(2, 1, txt("resumed")), SE(2, 1), TE(2)])
    messages = session.derive_messages()
    results = [m["content"][0] for m in messages if m["source"]["kind"] == "tool"]
    assert [r["content"][0]["text"] for r in results[1:]] == [
        OUTCOME_UNKNOWN_TEXT,
        NOT_STARTED_TEXT,
    ]
    assert [r["isError"] for r in results[1:]] == [True, True]
    return messages


def forked_mid_history() -> list[Message]:
    turn_1 = turn_with_calls(1, "first", "call_p1", "call_p2")
    parent = build(*turn_1, *turn_with_calls(2, "second", "call_q1"))
    child = Session("child", seed=fork_seed(parent, session_id="parent", boundary=len(turn_1) - 1))
    append_all(child, turn_with_calls(2, "another way", "call_r1", "call_r2"))
    messages = child.derive_messages()
    calls = [b["id"] for m in messages if m["role"] == "assistant" for b in tool_calls_of(m)]
    assert calls == ["call_p1", "call_p2", "call_r1", "call_r2"]  # the parent's turn 2 is gone
    return messages


DEEPSEEK_IDS = ("call_00_AbCdEfGhIjKlMnOpQrStUvWx", "call_01_YzAbCdEfGhIjKlMnOpQrStUv")
ANTHROPIC_STYLE_IDS = ("toolu_01A09q90qw90lq917835lq9", "toolu_01" + "B" * 50)
FOREIGN_IDS = ("call_9|fc_67890abcdef", "call.with.dots:1", "x" * 70, "two words")
"""Ids no provider issued this way: a Responses composite, dots, too long, a space."""


def providers_mixed() -> list[Message]:
    specs = [TS(1), SS(1, 1), U("on deepseek")]
    specs.append(A(1, 1, reasoning("I should list"), *map(call, DEEPSEEK_IDS)))
    specs += [TC(1, 1, i) for i in DEEPSEEK_IDS] + [TR(1, 1, i) for i in DEEPSEEK_IDS]
    specs += [SE(1, 1), *final_step(1, 2), TE(1)]
    specs += turn_with_calls(2, "now on anthropic", *ANTHROPIC_STYLE_IDS)
    specs += turn_with_calls(3, "ids from elsewhere", *FOREIGN_IDS)
    return derived(specs)


SCENARIOS: dict[str, Callable[[], list[Message]]] = {
    "parallel-calls": parallel_calls,
    "error-results": error_results,
    "cancelled-before-dispatch": cancelled_before_dispatch,
    "cancelled-mid-stream": cancelled_mid_stream,
    "max-tokens-calls-dropped": max_tokens_calls_dropped,
    "crash-repaired": crash_repaired,
    "forked-mid-history": forked_mid_history,
    "providers-mixed": providers_mixed,
}


def wire_call_ids(body: dict[str, Any], *, anthropic: bool) -> list[str]:
    ids: list[str] = []
    for message in body["messages"]:
        if message["role"] != "assistant":
            continue
        if anthropic:
            content = message["content"]
            blocks = content if isinstance(content, list) else []
            ids += [b["id"] for b in blocks if b.get("type") == "tool_use"]
        else:
            ids += [c["id"] for c in message.get("tool_calls") or ()]
    return ids


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_scenario_history_is_paired(scenario: str) -> None:
    messages = SCENARIOS[scenario]()
    check_pairing(messages)
    assert any(m["role"] == "assistant" for m in messages)


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
async def test_scenario_payload_passes_the_pre_send_check(scenario: str, adapter: str) -> None:
    messages = SCENARIOS[scenario]()
    model: Adapter = ADAPTERS[adapter]()
    try:
        request = ModelRequest(messages=messages, system="You are terse.", tools=TOOLS)
        body = model.payload(request)
        anthropic = model.provider == "anthropic"
        if anthropic:
            check_anthropic_messages(body["messages"])
        else:
            check_chat_completions_messages(body["messages"], provider=model.provider)
        assert json.loads(model.encode_request(request)) == body
        rule: ToolIdRule = ANTHROPIC_IDS if anthropic else CHAT_COMPLETIONS_IDS
        history_ids = [
            block["id"] for m in messages if m["role"] == "assistant" for block in tool_calls_of(m)
        ]
        assert wire_call_ids(body, anthropic=anthropic) == [
            wire_tool_id(i, rule) for i in history_ids
        ]
    finally:
        await model.aclose()


def test_mixed_history_needs_mapping_in_both_dialects() -> None:
    # Otherwise the id assertions above would pass with ids sent unchanged.
    ids = [*DEEPSEEK_IDS, *ANTHROPIC_STYLE_IDS, *FOREIGN_IDS]
    for rule in (CHAT_COMPLETIONS_IDS, ANTHROPIC_IDS):
        changed = [i for i in ids if wire_tool_id(i, rule) != i]
        assert changed, rule.name
    assert wire_tool_id("call.with.dots:1", CHAT_COMPLETIONS_IDS) == "call.with.dots:1"
    assert wire_tool_id("call.with.dots:1", ANTHROPIC_IDS) != "call.with.dots:1"
    assert wire_tool_id(ANTHROPIC_STYLE_IDS[1], ANTHROPIC_IDS) == ANTHROPIC_STYLE_IDS[1]
    assert wire_tool_id(ANTHROPIC_STYLE_IDS[1], CHAT_COMPLETIONS_IDS) != ANTHROPIC_STYLE_IDS[1]


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
async def test_payload_of_a_grown_history_is_checked_and_matches(adapter: str) -> None:
    # The encoders reuse the converted prefix of the previous request; the body of the grown
    # history must still pass the check and equal a from-scratch payload.
    messages = providers_mixed()
    cut = next(i for i, m in enumerate(messages) if text_of(m) == "ids from elsewhere")
    model: Adapter = ADAPTERS[adapter]()
    try:
        model.encode_request(ModelRequest(messages=messages[:cut], tools=TOOLS))
        request = ModelRequest(messages=messages, tools=TOOLS)
        body = json.loads(model.encode_request(request))
        if model.provider == "anthropic":
            check_anthropic_messages(body["messages"])
        else:
            check_chat_completions_messages(body["messages"], provider=model.provider)
        assert body == model.payload(request)
    finally:
        await model.aclose()
