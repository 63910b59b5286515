"""The scheduler's trusted appends write what the checked path writes, and refuse what it refuses.

`commit_result` and `append_call` hand a `tool/call` or `tool/result` to
`Session.append_lossless` when the values in it that came from elsewhere (call id, name,
argument text, the outcome's content, error and meta) are lossless JSON; otherwise to
`Session.append`, which checks everything. The property: over random calls and outcomes,
lossless or not (NaN, -0.0, tuples, sets, bytes, lone surrogates, non-string keys, deep
nesting), a session fed by the scheduler and one whose every append is the checked
`append(copy=False)` end with equal logs and raise equal errors. The public `append` itself
still refuses every non-lossless payload (a non-loop caller cannot skip the check).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from duraloop.errors import EventRejectedError
from duraloop.log import Event, JsonValue, Session, assistant_message
from duraloop.log._json import MAX_JSON_DEPTH
from duraloop.tools import ToolOutcome
from duraloop.tools._request import ToolCallRequest
from duraloop.tools._scheduler_events import append_call, append_skipped_pair, commit_result


class CheckedSession(Session):
    """A session whose trusted append is the fully checked one (the reference path)."""

    def append_lossless(
        self,
        type: str,
        data: JsonValue,
        *,
        surface_op: str | None = None,
        source_event_seqs: Any = None,
    ) -> Event:
        return self.append(
            type, data, surface_op=surface_op, source_event_seqs=source_event_seqs, copy=False
        )


def _open(session_type: type[Session]) -> Session:
    session = session_type("s", clock=lambda: 1_700_000_000_000)
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    block = {"type": "tool-call", "id": "c1", "name": "echo", "arguments": "{}"}
    message = assistant_message([block], provider="test", model="test")
    session.append(
        "assistant/message", {"turn": 1, "step": 1, "message": message}, surface_op="append"
    )
    return session


texts = st.text(st.characters(exclude_categories=()), max_size=6)  # lone surrogates too
leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),  # NaN, infinities, -0.0
    texts,
    st.just(b"x"),
    st.just(frozenset({1})),
)


def _nested(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=3),
        st.tuples(children),
        st.dictionaries(texts, children, max_size=3),
        st.dictionaries(st.integers(), children, max_size=1),  # a non-string key
    )


values = st.recursive(leaves, _nested, max_leaves=8)
blocks = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": texts}),
    st.dictionaries(texts, values, max_size=3),
    values,
)
contents = st.one_of(st.lists(blocks, max_size=3), values)
calls = st.builds(
    ToolCallRequest,
    call_id=st.one_of(st.just("c1"), texts, values),
    name=st.one_of(st.just("echo"), texts, values),
    raw_arguments=st.one_of(st.just("{}"), texts, values),
    arguments=st.just({}),
    turn=st.one_of(st.just(1), st.just(True), values),
    step=st.just(1),
)
outcomes = st.builds(
    ToolOutcome,
    is_error=st.one_of(st.booleans(), st.just(0), values),
    content=contents,
    error=st.one_of(st.none(), st.dictionaries(texts, values, max_size=2), values),
    meta=st.one_of(st.none(), values),
)


def _run(session_type: type[Session], call: ToolCallRequest, outcome: ToolOutcome) -> Any:
    session = _open(session_type)
    try:
        call_seq = append_call(session, call)
        commit_result(session, call, outcome, call_seq=call_seq)
    except Exception as exc:  # the error itself is compared
        failure: object = (type(exc), str(exc))
    else:
        failure = None
    # Message ids are fresh UUIDs: compare everything else.
    events = [
        (e.type, e.seq, _without_id(e.data), e.source_event_seqs, e.surface_op)
        for e in session.events
    ]
    return failure, events


def _without_id(data: Any) -> Any:
    message = data.get("message") if isinstance(data, dict) else None
    if isinstance(message, dict) and "id" in message:
        return {**data, "message": {**message, "id": "-"}}
    return data


@settings(max_examples=400, deadline=None)
@given(calls, outcomes)
def test_the_trusted_path_writes_and_refuses_what_the_checked_path_does(
    call: ToolCallRequest, outcome: ToolOutcome
) -> None:
    fast = _run(Session, call, outcome)
    checked = _run(CheckedSession, call, outcome)
    assert repr(fast) == repr(checked)  # repr: NaN != NaN, and a refused log stays comparable


def test_a_lossless_result_takes_the_trusted_path_and_a_nan_the_checked_one() -> None:
    used: list[str] = []

    class Recording(Session):
        def append_lossless(self, type: str, data: JsonValue, **kwargs: Any) -> Event:
            used.append(f"lossless {type}")
            return super().append_lossless(type, data, **kwargs)

        def append(self, type: str, data: JsonValue, **kwargs: Any) -> Event:
            used.append(f"checked {type}")
            return super().append(type, data, **kwargs)

    session = _open(Recording)
    used.clear()
    call = ToolCallRequest("c1", "echo", "{}", {}, turn=1, step=1)
    seq = append_call(session, call)
    commit_result(session, call, ToolOutcome.ok("fine"), call_seq=seq)
    assert used == ["lossless tool/call", "lossless tool/result"]
    used.clear()
    with pytest.raises(EventRejectedError, match="not lossless JSON|NaN|nan"):
        commit_result(session, call, ToolOutcome.ok("x", meta={"v": float("nan")}), call_seq=seq)
    assert used == ["checked tool/result"]


def test_the_skipped_pair_and_deep_content_match_the_checked_path() -> None:
    call = ToolCallRequest("c1", "echo", "{}", {}, turn=1, step=1)
    for session_type in (Session, CheckedSession):
        session = _open(session_type)
        append_skipped_pair(session, call)
        assert [e.type for e in session.events][-2:] == ["tool/call", "tool/result"]
    deep: Any = "x"
    for _ in range(MAX_JSON_DEPTH):
        deep = [deep]
    outcome = ToolOutcome(is_error=False, content=[{"type": "json", "value": deep}])
    assert repr(_run(Session, call, outcome)) == repr(_run(CheckedSession, call, outcome))
    assert _run(Session, call, outcome)[0] is not None, "nested past MAX_JSON_DEPTH: refused"


def test_the_public_append_still_refuses_what_is_not_lossless_json() -> None:
    session = _open(Session)
    for bad in (float("nan"), -0.0, {1: "x"}, b"x", "\ud83d"):
        with pytest.raises(EventRejectedError):
            session.append(
                "tool/call",
                {"turn": 1, "step": 1, "callId": "c1", "name": "echo", "arguments": bad},
                copy=False,
            )
    assert [e.type for e in session.events][-1] == "assistant/message"
