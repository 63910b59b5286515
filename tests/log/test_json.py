"""Law 2: all data is lossless JSON (docs/log.md#lossless-json), checked and copied in one pass.

Each refused value is one that would silently change in a JSON round trip (NaN, infinities,
-0.0, non-string keys, sets, bytes, cycles). Tests go through `Session.append`, the path every
writer takes, and assert the log is unchanged after a refusal (Law 9).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import Any

import pytest

from duraloop.errors import EventRejectedError
from duraloop.log import Session, lossless_copy
from duraloop.log._json import well_formed_json, well_formed_text

_cycle: list[Any] = []
_cycle.append(_cycle)


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        (math.nan, "not finite"),
        (math.inf, "not finite"),
        (-math.inf, "not finite"),
        (-0.0, "negative zero"),
        ({1: "x"}, "non-string key"),
        ({("a",): "x"}, "non-string key"),
        ({1, 2}, "set"),
        (b"bytes", "bytes"),
        (bytearray(b"x"), "bytearray"),
        (object(), "object"),
        (OrderedDict(a=1), "OrderedDict"),
        (_cycle, "cyclic"),
    ],
)
def test_append_non_lossless_data_is_rejected_and_nothing_is_committed(
    value: Any, fragment: str
) -> None:
    session = Session("json", check_invariants=False)
    session.append("x/ok", {"fine": 1})
    with pytest.raises(EventRejectedError, match="non-JSON-serializable") as caught:
        session.append("x/bad", {"nested": [1, {"value": value}]})
    assert fragment in str(caught.value)
    assert [e.type for e in session.events] == ["x/ok"]
    assert session.seq == 1


def test_error_names_the_path_of_the_bad_value() -> None:
    with pytest.raises(EventRejectedError, match=r"\$\.a\[1\]\.b is nan"):
        lossless_copy({"a": [0, {"b": math.nan}]}, what="test")


def test_append_accepts_zero_integers_floats_and_unicode() -> None:
    session = Session("json", check_invariants=False)
    data = {"zero": 0.0, "int": 2**60, "float": 1.5, "text": "héllo ✓", "none": None, "flag": False}
    event = session.append("x/ok", data)
    assert event.data == data
    assert type(event.data["int"]) is int


def test_append_turns_tuples_into_lists() -> None:
    session = Session("json", check_invariants=False)
    event = session.append("x/ok", {"pair": (1, (2, 3))})
    assert event.data == {"pair": [1, [2, 3]]}
    assert type(event.data["pair"]) is list


def test_append_copies_data_so_later_caller_mutation_does_not_change_the_log() -> None:
    session = Session("json", check_invariants=False)
    data: dict[str, Any] = {"items": [1, 2], "inner": {"k": "v"}}
    event = session.append("x/ok", data)
    data["items"].append(3)
    data["inner"]["k"] = "changed"
    data["new"] = True
    assert session.events[0].data == {"items": [1, 2], "inner": {"k": "v"}}
    assert event.data is not data


def test_append_copies_surface_op_and_source_event_seqs() -> None:
    session = Session("json", check_invariants=False)
    session.append(
        "user/message",
        {"id": "u", "role": "user", "content": [], "source": {"kind": "user"}},
        surface_op="append",
    )
    sources = [0]
    op = {"op": "replace", "start": 0, "end": 0}
    event = session.append(
        "user/message",
        {"id": "v", "role": "user", "content": [], "source": {"kind": "user"}},
        surface_op=op,
        source_event_seqs=sources,
    )
    sources.append(99)
    op["start"] = 42
    assert event.source_event_seqs == [0]
    assert event.surface_op == {"op": "replace", "start": 0, "end": 0}


def test_non_lossless_surface_op_is_rejected() -> None:
    session = Session("json", check_invariants=False)
    with pytest.raises(EventRejectedError, match="non-JSON-serializable"):
        session.append(
            "user/message",
            {"id": "u", "role": "user", "content": [], "source": {"kind": "user"}},
            surface_op={"op": "replace", "start": math.nan, "end": 0},
        )
    assert session.seq == 0


# A JSON `\ud83d` escape decodes to a lone surrogate, which no UTF-8 log can hold: refused
# at append with the path, never at flush (user trial).
@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"text": "ok \ud83d"}, r"\$\.text"),
        ({"items": ["a", "a\ud800b"]}, r"\$\.items\[1\]"),
        ({"k\udc00": 1}, r"\$ has a key"),
    ],
)
@pytest.mark.parametrize("copy", [True, False])
def test_append_refuses_a_lone_surrogate_and_names_its_path(
    data: dict[str, Any], path: str, copy: bool
) -> None:
    session = Session("json", check_invariants=False)
    with pytest.raises(EventRejectedError, match=path + r".*lone UTF-16 surrogate.*UTF-8"):
        session.append("x/bad", data, copy=copy)
    assert session.events == []


def test_append_accepts_non_ascii_and_astral_text() -> None:
    session = Session("json", check_invariants=False)
    assert session.append("x/ok", {"text": "é ✓ 😀"}, copy=False).data == {"text": "é ✓ 😀"}


def test_well_formed_text_replaces_lone_surrogates_and_keeps_pairs() -> None:
    assert well_formed_text("ok \ud83d") == "ok \ufffd"
    assert well_formed_text("\ud83d\ude00") == "😀"
    plain = "plain ✓"
    assert well_formed_text(plain) is plain
    value = {"a": ["x", {"b": "y"}]}
    assert well_formed_json(value) is value
    assert well_formed_json({"k\ud800": ["a\udc00"]}) == {"k\ufffd": ["a\ufffd"]}
