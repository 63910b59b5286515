"""The Session's append contract: Laws 1-3 and Law 9 at the single write path.

Seqs are contiguous (Law 2); an append commits before observers run and an observer can
neither un-commit it nor append re-entrantly; a validator veto or a rejected event leaves the
log, surface and derived messages exactly as they were (Law 9); derived messages are kept
incrementally, which is pinned by counting projections, not by timing.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

import duraloop.log._session as session_module
from conformance._builders import SE, SS, TE, TS, A, U, append, fixed_clock, txt
from duraloop.errors import EventRejectedError
from duraloop.log import Event, Session


def user(text: str) -> dict[str, Any]:
    return {"id": f"u-{text}", "role": "user", "content": [txt(text)], "source": {"kind": "user"}}


def test_append_assigns_contiguous_seqs_and_clock_time() -> None:
    # header, then three events; time may step back  # the wall clock may step backwards; nothing
    # is enforced
    times = iter([0, 10, 5, 30])
    session = Session("s", check_invariants=False, clock=lambda: next(times))
    events = [session.append(f"x/{i}", {"i": i}) for i in range(3)]
    assert [e.seq for e in events] == [0, 1, 2]
    assert [e.time for e in events] == [10, 5, 30]
    assert session.seq == 3
    assert list(session.events) == events


def test_seed_with_a_gap_is_rejected() -> None:
    with pytest.raises(EventRejectedError, match="contiguous from 0"):
        Session("s", seed=[Event("x/a", 0, 0, {}), Event("x/b", 2, 0, {})])


def test_observer_sees_each_committed_event_after_commit() -> None:
    session = Session("s", check_invariants=False, clock=fixed_clock())
    seen: list[tuple[int, int]] = []
    session.observe(lambda event: seen.append((event.seq, session.seq)))
    session.append("x/a", {})
    session.append("x/b", {})
    assert seen == [(0, 1), (1, 2)]  # the event is already in the log when observed


def test_observer_unsubscribe_stops_notifications() -> None:
    session = Session("s", check_invariants=False, clock=fixed_clock())
    seen: list[int] = []
    remove = session.observe(lambda event: seen.append(event.seq))
    session.append("x/a", {})
    remove()
    remove()  # idempotent
    session.append("x/b", {})
    assert seen == [0]


def test_reentrant_append_from_an_observer_is_refused_and_the_log_is_unchanged() -> None:
    session = Session("s", check_invariants=False, clock=fixed_clock())
    refused: list[Exception] = []

    def observer(event: Event) -> None:
        try:
            session.append("x/nested", {})
        except EventRejectedError as exc:
            refused.append(exc)

    session.observe(observer)
    session.append("x/a", {})
    assert len(refused) == 1
    assert "re-entrant append" in str(refused[0])
    assert [e.type for e in session.events] == ["x/a"]
    session.append("x/b", {})  # the session is usable afterwards
    assert [e.type for e in session.events] == ["x/a", "x/b"]


def test_observer_exception_is_contained_and_does_not_uncommit(
    caplog: pytest.LogCaptureFixture,
) -> None:
    session = Session("obs", check_invariants=False, clock=fixed_clock())
    later: list[int] = []

    def broken(event: Event) -> None:
        raise RuntimeError("observer bug")

    session.observe(broken)
    session.observe(lambda event: later.append(event.seq))
    with caplog.at_level(logging.ERROR, logger="duraloop.log._session"):
        event = session.append("x/a", {"k": 1})
    assert session.events[-1] == event
    assert later == [0]  # the other observers still ran
    assert "observer failed on seq 0" in caplog.text


@pytest.mark.parametrize("error", [EventRejectedError("vetoed"), RuntimeError("vetoed")])
def test_validator_veto_leaves_log_surface_and_messages_unchanged(error: Exception) -> None:
    session = Session("s", clock=fixed_clock())
    append(session, U("first"))
    seen: list[int] = []
    session.observe(lambda event: seen.append(event.seq))

    def veto(event: Event) -> None:
        if event.type == "user/message":
            raise error

    remove = session.add_validator(veto)
    before, nodes, messages = (
        list(session.events),
        list(session.surface.nodes),
        session.derive_messages(),
    )
    with pytest.raises(type(error), match="vetoed"):
        append(session, U("second"))
    assert list(session.events) == before
    assert session.surface.nodes == nodes
    assert session.derive_messages() == messages
    assert seen == []
    remove()
    assert append(session, U("second")).seq == 1
    assert [m["id"] for m in session.derive_messages()] == ["user-first", "user-second"]


def test_seed_events_do_not_run_validators_but_end_seed_does() -> None:
    # Validators are added after construction, so only later appends can be vetoed.
    session = Session(
        "s", seed=[Event("x/a", 0, 0, {})], check_invariants=False, clock=fixed_clock()
    )
    assert [e.type for e in session.events] == ["x/a", "session/end-seed"]


def test_rejected_invariant_leaves_messages_unchanged() -> None:
    session = Session("s", clock=fixed_clock())
    append(session, U("a"))
    with pytest.raises(EventRejectedError):
        append(session, A(1, 1, txt("no turn open")))
    assert session.surface.nodes == [0]
    assert len(session.derive_messages()) == 1


def test_derived_messages_are_incremental(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = session_module.project

    def counting(event: Event) -> Any:
        calls.append(event.seq)
        return real(event)

    monkeypatch.setattr(session_module, "project", counting)
    session = Session("s", check_invariants=False, clock=fixed_clock())
    count = 200
    for i in range(count):
        session.append("user/message", user(str(i)), surface_op="append")
        session.derive_messages()
    assert len(calls) == count  # one projection per append, never a rescan
    assert calls == list(range(count))
    assert len(session.derive_messages()) == count


def test_non_surface_appends_project_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(session_module, "project", lambda event: calls.append(event.seq))
    session = Session("s", clock=fixed_clock())
    for spec in (TS(1), SS(1, 1), SE(1, 1), TE(1)):
        append(session, spec)
    assert calls == []


def test_surface_replace_rebuilds_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    session = Session("s", check_invariants=False, clock=fixed_clock())
    for text in ("a", "b", "c"):
        session.append("user/message", user(text), surface_op="append")
    calls: list[int] = []
    real = session_module.project

    def counting(event: Event) -> Any:
        calls.append(event.seq)
        return real(event)

    monkeypatch.setattr(session_module, "project", counting)
    session.append(
        "user/message",
        user("summary"),
        surface_op={"op": "replace", "start": 0, "end": 1},
        source_event_seqs=[0, 1],
    )
    assert sorted(calls) == [2, 3]  # a rebuild over the new surface
    assert [m["id"] for m in session.derive_messages()] == ["u-summary", "u-c"]
    assert len(session.events) == 4  # Law 1: the shadowed events stay


def test_derive_messages_returns_a_fresh_list() -> None:
    session = Session("s", check_invariants=False, clock=fixed_clock())
    session.append("user/message", user("a"), surface_op="append")
    first = session.derive_messages()
    first.clear()
    assert len(session.derive_messages()) == 1
    assert session.messages[0]["id"] == "u-a"


def test_default_header_is_synthesized_from_the_clock() -> None:
    session = Session("hdr", clock=fixed_clock(1234))
    assert session.header.id == "hdr"
    assert session.header.created_at == 1234
    assert session.header.version == 0


def test_legacy_vocabulary_is_rejected_on_append() -> None:
    session = Session("s", check_invariants=False, clock=fixed_clock())
    with pytest.raises(EventRejectedError, match="legacy"):
        session.append("request/header-delta", {})
    with pytest.raises(EventRejectedError, match="fallback"):
        session.append("request/header", {"header": {}, "reason": "fallback"})
    assert session.seq == 0
