"""A cold encoder cache builds the same bytes as a warm one (README.md#performance).

The request encoders of both dialects keep an incremental cache (converted messages, encoded
wire messages, the checked prefix). A resumed process, a replaced history (compaction) or a
switch to another adapter starts from a cold cache and converts the whole history at once,
on a path of its own (bulk conversion, one msgspec call, the lean pairing pass). Hypothesis
builds random histories (parallel calls, error and empty results, reasoning, user text after
results, ids of every provider's shape and ones that must be mapped) and checks, for the
OpenAI, DeepSeek and Anthropic adapters: the body a fresh adapter encodes from fresh dicts
equals, byte for byte, the body an adapter encoded step by step; after the cache is
invalidated (a replaced history, edited messages with the same ids) the body equals a fresh
encode again. The lean pairing passes accept what the full passes accept (Chat Completions:
exactly; Anthropic: nothing more, and every payload the adapter builds).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from duraloop.errors import WirePairingError
from duraloop.llm import (
    AnthropicMessagesModel,
    DeepSeekChatModel,
    ModelRequest,
    OpenAIChatModel,
    ToolSchema,
)
from duraloop.llm._anthropic import _pairing as _anthropic_pairing
from duraloop.llm._chat_completions import _pairing
from duraloop.llm._chat_completions._request import RequestEncoder
from duraloop.llm._tool_ids import CHAT_COMPLETIONS_IDS
from duraloop.log._messages import Message, assistant_message, tool_result_message, user_message

TOOLS = [ToolSchema("read", "Read a file.", {"type": "object"})]
_FACTORIES: dict[str, Callable[[], Any]] = {
    "openai": lambda: OpenAIChatModel("m", api_key="sk-test"),
    "deepseek": lambda: DeepSeekChatModel("m", api_key="sk-test"),
    "anthropic": lambda: AnthropicMessagesModel("claude-test", api_key="sk-ant-test"),
}
_MODELS: dict[tuple[str, str], Any] = {
    (adapter, use): factory() for adapter, factory in _FACTORIES.items() for use in ("warm", "cold")
}


def _fresh(adapter: str, use: str = "warm") -> Any:
    """An adapter of `adapter` with a new, empty encoder (as a new process has)."""
    model = _MODELS[adapter, use]
    if isinstance(model, AnthropicMessagesModel):
        model._encoder = model._new_encoder()
    else:
        old = model._encoder
        model._encoder = RequestEncoder(
            model.model, provider=old.provider, echo=old.echo, options=old.options
        )
    return model


texts = st.text(max_size=12)
call_ids = st.one_of(
    st.from_regex(r"(call_|call_00_|toolu_01)[A-Za-z0-9]{1,12}", fullmatch=True),
    st.text(min_size=1, max_size=70),  # ids another dialect must map (spaces, length, ...)
)


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[Message], list[int]]:
    """A paired history and the lengths of its prefixes a loop would send (step ends)."""
    messages = [user_message(draw(texts))]
    ends = [1]
    used: set[str] = set()
    for _ in range(draw(st.integers(0, 6))):
        ids = draw(st.lists(call_ids.filter(lambda i: i not in used), max_size=3, unique=True))
        used.update(ids)
        blocks: list[Any] = []
        if draw(st.booleans()):
            blocks.append({"type": "reasoning", "text": draw(texts)})
        if draw(st.booleans()) or not ids:
            blocks.append({"type": "text", "text": draw(texts)})
        blocks += [
            {
                "type": "tool-call",
                "id": i,
                "name": "read",
                "arguments": draw(st.sampled_from(["{}", '{"path": "a"}', "not json"])),
            }
            for i in ids
        ]
        provider = draw(st.sampled_from(["openai", "deepseek", "anthropic"]))
        messages.append(assistant_message(blocks, provider=provider, model="m"))
        for call_id in ids:
            output = draw(st.lists(texts.map(lambda t: {"type": "text", "text": t}), max_size=2))
            messages.append(tool_result_message(call_id, output, is_error=draw(st.booleans())))
        if draw(st.booleans()):
            messages.append(user_message(draw(texts)))
        ends.append(len(messages))
    return messages, ends


def _request(messages: list[Message]) -> ModelRequest:
    return ModelRequest(messages=messages, system="sys", tools=TOOLS)


def _cold(adapter: str, messages: list[Message]) -> bytes:
    body: bytes = _fresh(adapter, "cold").encode_request(_request(copy.deepcopy(messages)))
    return body


@settings(max_examples=60, deadline=None)
@given(case=histories(), adapter=st.sampled_from(sorted(_FACTORIES)))
def test_cold_encode_equals_the_warm_encode_of_a_grown_history(
    case: tuple[list[Message], list[int]], adapter: str
) -> None:
    messages, ends = case
    model = _fresh(adapter)
    for end in ends:  # step by step, as the loop sends them
        warm = model.encode_request(_request(messages[:end]))
    assert _cold(adapter, messages) == warm


@settings(max_examples=60, deadline=None)
@given(
    case=histories(),
    adapter=st.sampled_from(sorted(_FACTORIES)),
    keep=st.integers(0, 10),
    edit=st.booleans(),
)
def test_after_an_invalidated_cache_the_body_equals_a_fresh_encode(
    case: tuple[list[Message], list[int]], adapter: str, keep: int, edit: bool
) -> None:
    messages, ends = case
    model = _fresh(adapter)
    model.encode_request(_request(messages))
    # A compaction: a summary replaces the history up to a step end.
    cut = ends[min(keep, len(ends) - 1)]
    replaced = [user_message("summary of the earlier turns"), *messages[cut:]]
    assert model.encode_request(_request(replaced)) == _cold(adapter, replaced)
    if edit:  # fresh dicts, and the summary with its id kept but its text changed
        replaced = copy.deepcopy(replaced)
        replaced[0]["content"] = [{"type": "text", "text": "another summary"}]
        assert model.encode_request(_request(replaced)) == _cold(adapter, replaced)
    # Back to the full history (a provider switch back, an undone compaction).
    assert model.encode_request(_request(messages)) == _cold(adapter, messages)


def _wire(messages: list[Message], provider: str) -> list[dict[str, Any]]:
    wire: list[dict[str, Any]] = _MODELS[provider, "cold"]._encoder.wire_messages(
        ModelRequest(messages=messages)
    )
    return wire


def _full_pass_accepts(wire: list[dict[str, Any]], provider: str) -> bool:
    try:
        _pairing._find_violation(wire, provider=provider)
    except WirePairingError:
        return False
    return True


@st.composite
def mutated_wires(draw: st.DrawFn) -> tuple[list[dict[str, Any]], str]:
    """Chat Completions wire messages of a random history, maybe broken by one mutation."""
    provider = draw(st.sampled_from(["openai", "deepseek"]))
    wire = _wire(draw(histories())[0], provider)
    mutation = draw(st.sampled_from(["none", "drop", "swap", "dup", "id", "content", "insert"]))
    if mutation != "none" and wire:
        at = draw(st.integers(0, len(wire) - 1))
        if mutation == "drop":
            del wire[at]
        elif mutation == "swap" and at + 1 < len(wire):
            wire[at], wire[at + 1] = wire[at + 1], wire[at]
        elif mutation == "dup":
            wire.insert(at, copy.deepcopy(wire[at]))
        elif mutation == "id":
            key = "tool_call_id" if wire[at].get("role") == "tool" else None
            calls = wire[at].get("tool_calls")
            bad = draw(st.one_of(st.text(max_size=50), st.none(), st.integers()))
            if key:
                wire[at][key] = bad
            elif calls:
                calls[draw(st.integers(0, len(calls) - 1))]["id"] = bad
        elif mutation == "content":
            wire[at]["content"] = None
        elif mutation == "insert":
            wire.insert(at, {"role": draw(st.sampled_from(["user", "tool", "assistant"]))})
    return wire, provider


@settings(max_examples=150, deadline=None)
@given(case=mutated_wires())
def test_the_lean_pairing_pass_accepts_exactly_what_the_full_pass_accepts(
    case: tuple[list[dict[str, Any]], str],
) -> None:
    wire, provider = case
    lean = _pairing._well_paired(wire, deepseek=provider == "deepseek")
    assert lean == _full_pass_accepts(wire, provider)


@given(call_id=st.one_of(st.text(max_size=45), st.from_regex(r"[A-Za-z0-9_.:-]{1,45}")))
def test_the_joined_id_pattern_accepts_exactly_the_chat_completions_ids(call_id: str) -> None:
    assert (_pairing._IDS.fullmatch(call_id) is not None) == CHAT_COMPLETIONS_IDS.accepts(call_id)
    pair = f"ok_1\x00{call_id}"
    assert (_pairing._IDS.fullmatch(pair) is not None) == CHAT_COMPLETIONS_IDS.accepts(call_id)


@st.composite
def mutated_anthropic_wires(draw: st.DrawFn) -> tuple[list[dict[str, Any]], bool]:
    """Anthropic wire messages of a random history, and whether one mutation may break them."""
    body = _MODELS["anthropic", "cold"].payload(ModelRequest(messages=draw(histories())[0]))
    wire: list[dict[str, Any]] = body["messages"]
    mutation = draw(st.sampled_from(["none", "drop", "swap", "dup", "id", "blocks", "orphan"]))
    if mutation == "none" or not wire:
        return wire, False
    at = draw(st.integers(0, len(wire) - 1))
    blocks = wire[at]["content"] if isinstance(wire[at]["content"], list) else []
    if mutation == "drop":
        del wire[at]
    elif mutation == "swap" and at + 1 < len(wire):
        wire[at], wire[at + 1] = wire[at + 1], wire[at]
    elif mutation == "dup":
        wire.insert(at, copy.deepcopy(wire[at]))
    elif mutation == "id" and blocks:
        block = blocks[draw(st.integers(0, len(blocks) - 1))]
        key = "tool_use_id" if block.get("type") == "tool_result" else "id"
        block[key] = draw(st.one_of(st.text(max_size=70), st.none(), st.integers()))
    elif mutation == "blocks" and len(blocks) > 1:
        blocks.reverse()
    elif mutation == "orphan":
        result = {"type": "tool_result", "tool_use_id": draw(call_ids), "content": "x"}
        wire.insert(at, {"role": "user", "content": [result]})
    return wire, True


def _anthropic_full_pass_accepts(wire: list[dict[str, Any]]) -> bool:
    try:
        _anthropic_pairing._find_violation(wire)
    except WirePairingError:
        return False
    return True


@settings(max_examples=150, deadline=None)
@given(case=mutated_anthropic_wires())
def test_the_lean_anthropic_pairing_pass_accepts_only_what_the_full_pass_accepts(
    case: tuple[list[dict[str, Any]], bool],
) -> None:
    # Only: a non-string `tool_use_id` is compared by its repr in the full pass, so the lean
    # pass may refuse (and leave to the full pass) a few odd payloads the full pass accepts.
    wire, mutated = case
    lean = _anthropic_pairing._well_paired(wire)
    assert lean <= _anthropic_full_pass_accepts(wire)
    assert lean or mutated  # every payload the adapter builds takes the lean path
