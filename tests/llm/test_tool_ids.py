"""Tool-call id mapping (docs/providers.md#tool-call-ids, #anthropic-pairing): valid, stable,
reversible, provider-portable.

A session moves between providers (DeepSeek -> Anthropic -> DeepSeek) while durable history
keeps each provider's own ids, so the mapping must be a pure function of the id: valid for
the target rule, unchanged when already valid, the same in every process, and distinct for
distinct ids. Hypothesis checks these over arbitrary strings (unicode, control characters,
empty, very long); the pinned examples were computed with `sha256sum` in a shell.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from duraloop.errors import ConfigError, WirePairingError
from duraloop.llm._tool_ids import (
    ANTHROPIC_IDS,
    CHAT_COMPLETIONS_IDS,
    ToolIdMap,
    ToolIdRule,
    wire_tool_id,
)

RULES = [CHAT_COMPLETIONS_IDS, ANTHROPIC_IDS]
rules = st.sampled_from(RULES)
any_ids = st.text(max_size=120)
both_valid_ids = st.from_regex(r"\A[A-Za-z0-9_-]{1,40}\Z")
chat_valid_ids = st.from_regex(r"\A[A-Za-z0-9_.:-]{1,40}\Z")
anthropic_valid_ids = st.from_regex(r"\A[A-Za-z0-9_-]{1,64}\Z")


def _valid(call_id: str, rule: ToolIdRule) -> bool:
    # An independent statement of each rule, not `rule.accepts`.
    if rule is CHAT_COMPLETIONS_IDS:
        return re.fullmatch(r"[A-Za-z0-9_.:-]{1,40}", call_id) is not None
    return re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", call_id) is not None


@given(any_ids, rules)
def test_wire_tool_id_is_always_valid_for_its_rule(call_id: str, rule: ToolIdRule) -> None:
    assert _valid(wire_tool_id(call_id, rule), rule)


@given(any_ids)
def test_mapped_ids_are_valid_for_both_rules(call_id: str) -> None:
    # An id a rule accepts is sent unchanged (":" under Chat Completions); any id a rule
    # rewrites comes out valid for the other rule too, so it needs no second mapping.
    for rule in RULES:
        wire = wire_tool_id(call_id, rule)
        if wire == call_id:
            continue
        assert _valid(wire, CHAT_COMPLETIONS_IDS)
        assert _valid(wire, ANTHROPIC_IDS)


@given(chat_valid_ids)
def test_wire_tool_id_keeps_chat_completions_ids_unchanged(call_id: str) -> None:
    assert wire_tool_id(call_id, CHAT_COMPLETIONS_IDS) == call_id


@given(anthropic_valid_ids)
def test_wire_tool_id_keeps_anthropic_ids_unchanged(call_id: str) -> None:
    assert wire_tool_id(call_id, ANTHROPIC_IDS) == call_id


@given(any_ids, rules)
def test_wire_tool_id_is_idempotent(call_id: str, rule: ToolIdRule) -> None:
    wire = wire_tool_id(call_id, rule)
    assert wire_tool_id(wire, rule) == wire


@given(st.sets(any_ids, max_size=40), rules)
def test_wire_tool_id_is_injective_on_generated_sets(ids: set[str], rule: ToolIdRule) -> None:
    assert len({wire_tool_id(call_id, rule) for call_id in ids}) == len(ids)


@given(st.sets(st.text(alphabet="ab|. ", min_size=30, max_size=45), max_size=40), rules)
def test_ids_sharing_a_long_prefix_stay_distinct(ids: set[str], rule: ToolIdRule) -> None:
    # The sanitised prefixes collide here (same 23 leading characters, `|`/`.`/space -> `_`);
    # only the hash suffix keeps them apart.
    assert len({wire_tool_id(call_id, rule) for call_id in ids}) == len(ids)


@given(both_valid_ids)
def test_ids_valid_for_both_rules_survive_openai_anthropic_openai(call_id: str) -> None:
    to_anthropic = wire_tool_id(wire_tool_id(call_id, CHAT_COMPLETIONS_IDS), ANTHROPIC_IDS)
    assert wire_tool_id(to_anthropic, CHAT_COMPLETIONS_IDS) == call_id


@given(st.lists(any_ids, max_size=20), rules)
def test_tool_id_map_round_trips_every_id(ids: list[str], rule: ToolIdRule) -> None:
    mapping = ToolIdMap(rule)
    wires = [mapping.to_wire(call_id) for call_id in ids]
    assert [mapping.from_wire(wire) for wire in wires] == ids
    assert [mapping.to_wire(call_id) for call_id in ids] == wires  # a call and its result match


def test_tool_id_map_returns_unknown_wire_ids_unchanged() -> None:
    mapping = ToolIdMap(ANTHROPIC_IDS)
    mapping.to_wire("call.1")
    assert mapping.from_wire("toolu_never_sent") == "toolu_never_sent"


def test_tool_id_map_refuses_two_ids_with_one_wire_id() -> None:
    mapping = ToolIdMap(ANTHROPIC_IDS)
    mapped = mapping.to_wire("call|1")
    with pytest.raises(WirePairingError) as caught:
        mapping.to_wire(mapped)  # already valid, so sent as is: the same wire id as call|1
    assert caught.value.rule == "TOOL_ID_COLLISION"
    assert caught.value.call_id == mapped
    assert "'call|1'" in str(caught.value)
    assert mapping.from_wire(mapped) == "call|1"  # the first pair is kept


def test_wire_tool_id_matches_the_documented_form() -> None:
    # sha256("call|abc") = 4d6d34598a819281..., sha256("call_1\n") = 47fd91742a709f87...
    assert wire_tool_id("call|abc", CHAT_COMPLETIONS_IDS) == "call_abc_4d6d34598a819281"
    assert wire_tool_id("call|abc", ANTHROPIC_IDS) == "call_abc_4d6d34598a819281"
    assert wire_tool_id("call_1\n", ANTHROPIC_IDS) == "call_1__47fd91742a709f87"


def test_wire_tool_id_keeps_the_prefix_to_the_chat_completions_length() -> None:
    # sha256 of "toolu_01A09q90qw90lq917835lq9 " (trailing space) = 52018453c7cb2e58...
    call_id = "toolu_01A09q90qw90lq917835lq9 "
    assert wire_tool_id(call_id, ANTHROPIC_IDS) == "toolu_01A09q90qw90lq917_52018453c7cb2e58"
    assert len(wire_tool_id(call_id, ANTHROPIC_IDS)) == 40


def test_a_trailing_newline_does_not_pass_as_valid() -> None:
    assert not CHAT_COMPLETIONS_IDS.accepts("call_1\n")
    assert not ANTHROPIC_IDS.accepts("call_1\n")
    assert not ANTHROPIC_IDS.accepts("")
    assert not ANTHROPIC_IDS.accepts("a" * 65)
    assert ANTHROPIC_IDS.accepts("a" * 64)
    assert not CHAT_COMPLETIONS_IDS.accepts("a" * 41)
    assert CHAT_COMPLETIONS_IDS.accepts("call.1:x")
    assert not ANTHROPIC_IDS.accepts("call.1:x")


def test_wire_tool_id_handles_a_lone_surrogate() -> None:
    wire = wire_tool_id("call_\ud83d", ANTHROPIC_IDS)
    assert _valid(wire, ANTHROPIC_IDS)
    assert wire != wire_tool_id("call_\ud83e", ANTHROPIC_IDS)


def test_wire_tool_id_is_the_same_in_another_process() -> None:
    ids = ["call|abc", "", "x" * 90, "toolu_é ok", "call_1"]
    script = (
        "import sys, json\n"
        "from duraloop.llm._tool_ids import ANTHROPIC_IDS, CHAT_COMPLETIONS_IDS, wire_tool_id\n"
        "ids = json.loads(sys.argv[1])\n"
        "print(json.dumps([[wire_tool_id(i, r) for r in (CHAT_COMPLETIONS_IDS, ANTHROPIC_IDS)]"
        " for i in ids]))\n"
    )
    here = [[wire_tool_id(i, r) for r in RULES] for i in ids]
    for seed in ("1", "2"):
        out = subprocess.run(
            [sys.executable, "-c", script, json.dumps(ids)],
            check=True,
            capture_output=True,
            text=True,
            env={"PYTHONHASHSEED": seed},
        )
        assert json.loads(out.stdout) == here


@pytest.mark.parametrize(
    ("max_length", "pattern"),
    [(16, r"[a-z0-9_-]+"), (40, r"[a-z]+"), (64, r"[A-Za-z0-9-]+")],
)
def test_tool_id_rule_refuses_rules_mapped_ids_cannot_meet(max_length: int, pattern: str) -> None:
    with pytest.raises(ConfigError, match=r"ToolIdRule\."):
        ToolIdRule(max_length=max_length, pattern=re.compile(pattern))
