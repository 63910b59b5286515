"""Conformance: fork, docs/cases.md#fork-cases cases 47-53, on `fork_seed` and `fork_header`.

Pins that a fork child inherits only a closed-turn prefix (so it is a valid conversation,
Law 4) and its lineage header (docs/recovery.md#fork step 6). Store-level cases (54: unknown,
stale or existing ids) belong to the store suite. Each rejection checks `SessionForkError.code`
and the spec's message fragment.
"""

from __future__ import annotations

from typing import Any

import pytest

from duraloop.errors import SessionForkError
from duraloop.log import Event, Session, SessionHeader, fork_header, fork_seed

from ._builders import (
    RAW,
    SE,
    SS,
    TC,
    TE,
    TR,
    TS,
    A,
    Spec,
    U,
    append,
    build,
    call,
    fixed_clock,
    txt,
)


def fork_child(source: Session, seed: list[Event], *, child_id: str = "child") -> Session:
    header = fork_header(source.header, child_id=child_id, seed_length=len(seed), created_at=77)
    return Session(child_id, seed=seed, header=header, clock=fixed_clock(88))


def closed_turn_specs() -> list[Spec]:
    return [
        TS(1),
        U("hello"),
        SS(1, 1),
        A(1, 1, call("c1")),
        TC(1, 1, "c1"),
        TR(1, 1, "c1"),
        SE(1, 1),
        SS(1, 2),
        A(1, 2, txt("done")),
        SE(1, 2),
        TE(1),
    ]


def test_case_47_empty_source_forks_an_empty_child() -> None:
    source = Session("src", header=SessionHeader(id="src", created_at=1, cwd="/work"))
    seed = fork_seed(source.events, session_id="src")
    assert seed == []
    child = fork_child(source, seed)
    assert [e.type for e in child.events] == ["session/end-seed"]
    assert child.header.parent_session == "src"
    assert child.header.seed_length == 0
    assert child.header.cwd == "/work"


def test_case_48_closed_turn_is_inherited_whole_plus_end_seed() -> None:
    source = Session("src", clock=fixed_clock())
    for spec in closed_turn_specs():
        append(source, spec)
    seed = fork_seed(source.events, session_id="src")
    assert seed == list(source.events)
    child = fork_child(source, seed)
    assert list(child.events[: len(seed)]) == list(source.events)
    assert child.events[len(seed)] == Event("session/end-seed", len(seed), 88, {})
    assert child.header.seed_length == len(source.events)
    with pytest.raises(AttributeError):
        child.events[0].seq = 5  # type: ignore[misc]
    assert child.derive_messages() == source.derive_messages()


def test_case_48_source_ending_in_end_seed_gets_no_second_marker() -> None:
    source = Session("src", seed=build(TS(1), TE(1)), clock=fixed_clock())
    seed = fork_seed(source.events, session_id="src")
    child = fork_child(source, seed)
    assert list(child.events) == seed
    assert child.events[-1].type == "session/end-seed"


def test_case_49_log_only_event_after_a_closed_turn_is_forkable() -> None:
    log = build(TS(1), TE(1), RAW("session/title", {"title": "t", "messageSeqs": []}))
    seed = fork_seed(log, session_id="src")
    assert seed[-1].type == "session/title"
    assert len(seed) == 3


def test_case_50_boundary_at_an_earlier_turn_end_while_a_later_turn_is_open() -> None:
    log = build(
        TS(1),
        U("first"),
        TE(1),
        TS(2),
        U("second"),
        TE(2),
        TS(3),
        U("third"),
    )
    source = Session("src", seed=log, clock=fixed_clock())
    seed = fork_seed(source.events, session_id="src", boundary=2)
    assert seed == log[:3]
    child = fork_child(source, seed)
    assert [m["content"] for m in child.derive_messages()] == [[txt("first")]]


@pytest.mark.parametrize(
    "reason",
    [
        {"kind": "completed"},
        {"kind": "aborted", "reason": {"kind": "user"}},
        {"kind": "aborted", "reason": {"kind": "disposed"}},
        {"kind": "error", "error": {"message": "boom", "code": "UNKNOWN"}},
        {"kind": "max-tokens"},
        {"kind": "interrupted"},
    ],
)
def test_case_51_every_turn_end_reason_is_a_valid_boundary(reason: dict[str, Any]) -> None:
    log = build(TS(1), RAW("turn/end", {"turn": 1, "reason": reason}), TS(2))
    assert fork_seed(log, session_id="src", boundary=1) == log[:2]


@pytest.mark.parametrize("boundary", [3, 4, 5, 6, 7])
def test_case_52_boundary_inside_an_open_turn_is_refused(boundary: int) -> None:
    # turn/start@3, step/start@4, user/message@5, assistant/message@6, tool/call@7.
    log = build(
        TS(1), TE(1), U("between"), TS(2), SS(2, 1), U("q"), A(2, 1, call("c")), TC(2, 1, "c")
    )
    with pytest.raises(SessionForkError, match="ends inside open turn 2") as caught:
        fork_seed(log, session_id="src", boundary=boundary)
    assert caught.value.code == "OPEN_TURN"


def test_case_52_default_boundary_of_an_open_source_is_refused() -> None:
    with pytest.raises(SessionForkError) as caught:
        fork_seed(build(TS(1)), session_id="src")
    assert caught.value.code == "OPEN_TURN"


def test_case_53_empty_source_with_a_boundary_does_not_exist() -> None:
    with pytest.raises(SessionForkError, match=r"\(last seq: none\)") as caught:
        fork_seed([], session_id="src", boundary=0)
    assert caught.value.code == "INVALID_BOUNDARY"


@pytest.mark.parametrize("boundary", [-1, 0.5, 2**53, True])
def test_case_53_boundary_must_be_a_non_negative_safe_integer(boundary: Any) -> None:
    with pytest.raises(SessionForkError, match="non-negative safe integer") as caught:
        fork_seed(build(TS(1), TE(1)), session_id="src", boundary=boundary)
    assert caught.value.code == "INVALID_BOUNDARY"


def test_case_53_boundary_past_the_end_does_not_exist() -> None:
    log = build(TS(1), TE(1))
    with pytest.raises(
        SessionForkError, match=r'does not exist in session "src" \(last seq: 1\)'
    ) as caught:
        fork_seed(log, session_id="src", boundary=2)
    assert caught.value.code == "INVALID_BOUNDARY"


def test_case_53_index_that_is_not_its_seq_is_refused() -> None:
    log = build(TS(1), TE(1))
    shifted = [log[0], Event("turn/end", 5, 1, log[1].data)]
    with pytest.raises(SessionForkError, match="does not match a contiguous event seq") as caught:
        fork_seed(shifted, session_id="src", boundary=1)
    assert caught.value.code == "INVALID_BOUNDARY"


def test_fork_header_keeps_lineage_and_only_cwd() -> None:
    parent = SessionHeader(
        id="parent",
        created_at=1,
        cwd="/repo",
        parent_session="grandparent",
        seed_length=3,
        origin="subagent",
        delegation_depth=2,
        agent_preset="coder",
    )
    child = fork_header(parent, child_id="kid", seed_length=11, created_at=500)
    assert child == SessionHeader(
        id="kid", created_at=500, cwd="/repo", parent_session="parent", seed_length=11
    )
    assert child.delegation_depth == 0
    assert child.origin is None
    assert child.agent_preset is None
    assert child.version == 0
