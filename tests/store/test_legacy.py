"""Legacy import on read (docs/store.md#legacy-import, cases 69-70) and the read refusals (1.5, 1.6,
68).

Each 6.7 rule is pinned on `import_legacy` directly; cases 69 and 70 and the refusals run
through every store (memory, raw JSONL, zstd JSONL), because the import belongs to every read
path and never rewrites storage. An older-format log shaped like dsh's `apps/web` fixtures
(docs/store.md#projected-fixtures, header patched with `delegationDepth`) goes through
`read_log_file`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from duraloop.errors import CorruptLogError, SessionFormatUnsupportedError
from duraloop.log import Event, Session, check_pairing
from duraloop.log._legacy import import_legacy, readable_events
from duraloop.store import JsonlStore, SessionStore, read_log_file

from ._builders import ev, meta, se, ss, te, tool_call, ts

SID = "s"


def legacy_id(seq: int, session_id: str = SID) -> str:
    return f"legacy-message:{session_id}:{seq}"


def imported(*events: Event) -> list[Event]:
    return import_legacy(list(events), session_id=SID, path=None)


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def old_result(
    seq: int, call_id: str, value: str, *, op: Any = "append", src: list[int] | None = None
) -> Event:
    data = {"turn": 1, "step": 1, "callId": call_id, "content": [text(value)], "isError": False}
    return ev("tool/result", seq, seq, data, op=op, src=src)


def case_69_log() -> list[Event]:
    """`TS U{content,source} SS A{content,provenance} TC(call-1) TR@5 TR{replace 5..5}@6 SE TE`."""
    provenance = {"provider": "mock", "model": "mock"}
    call = {"type": "tool-call", "id": "call-1", "name": "bash", "arguments": "{}"}
    return [
        ev("turn/start", 0, 0, {"turn": 1, "trigger": {"kind": "user"}}),
        ev(
            "user/message", 1, 1, {"content": [text("hi")], "source": {"kind": "user"}}, op="append"
        ),
        ss(2, 1, 1),
        ev(
            "assistant/message",
            3,
            3,
            {"turn": 1, "step": 1, "content": [call], "provenance": provenance},
            op="append",
        ),
        tool_call(4, 1, 1, "call-1"),
        old_result(5, "call-1", "ok", src=[4]),
        old_result(6, "call-1", "compacted", op={"op": "replace", "start": 5, "end": 5}, src=[5]),
        se(7, 1, 1),
        te(8, 1),
    ]


def message_id(event: Event) -> str:
    data = event.data if event.type == "user/message" else event.data["message"]
    return str(data["id"])


def test_case_69_pre_identity_messages_get_legacy_ids(store: SessionStore) -> None:
    store.backend.materialize(meta(SID), case_69_log())
    events = store.load(SID).events
    surface = [e for e in events if e.type in ("user/message", "assistant/message", "tool/result")]
    assert [message_id(e) for e in surface] == [
        legacy_id(1),
        legacy_id(3),
        legacy_id(5),
        legacy_id(5),
    ]
    assert events[0].data == {"turn": 1}
    assert events[3].data["message"] == {
        "id": legacy_id(3),
        "role": "assistant",
        "content": case_69_log()[3].data["content"],
        "source": {"provider": "mock", "model": "mock", "kind": "model"},
    }
    assert events[6].data == {
        "turn": 1,
        "step": 1,
        "message": {
            "id": legacy_id(5),
            "role": "user",
            "content": [
                {
                    "type": "tool-result",
                    "toolCallId": "call-1",
                    "content": [text("compacted")],
                    "isError": False,
                }
            ],
            "source": {"kind": "tool", "callId": "call-1"},
        },
    }
    session = Session(SID, seed=events)
    assert [m["id"] for m in session.derive_messages()] == [
        legacy_id(1),
        legacy_id(3),
        legacy_id(5),
    ]
    check_pairing(session.derive_messages())


def test_case_69_import_never_rewrites_storage(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    store.backend.materialize(meta(SID), case_69_log())
    path = store.locate(SID)
    assert path is not None
    before = Path(path).read_bytes()
    loaded = store.load(SID)
    assert Path(path).read_bytes() == before
    fresh = JsonlStore(tmp_path)  # no remembered load: the claim reads and imports again
    with fresh.open_writer(Session(SID, seed=loaded.events, header=loaded.header)) as writer:
        writer.flush()
    after = Path(path).read_bytes()
    assert after.startswith(before), "the claim compares imported events; the legacy bytes stay"
    assert [e.type for e in store.load(SID).events][-1] == "session/end-seed"


@pytest.mark.parametrize(
    ("old", "current"),
    [
        (
            {
                "kind": "error",
                "step": 2,
                "failure": {"message": "boom", "code": "AUTH", "status": 401},
            },
            {"kind": "error", "error": {"message": "boom", "code": "AUTH", "status": 401}},
        ),
        ({"kind": "aborted"}, {"kind": "aborted", "reason": {"kind": "legacy"}}),
        ({"kind": "disposed"}, {"kind": "aborted", "reason": {"kind": "disposed"}}),
        (
            {"kind": "error", "step": 1, "message": "boom"},
            {"kind": "error", "error": {"message": "boom", "code": "UNKNOWN"}},
        ),
        (
            {"kind": "error", "step": 1, "message": "boom", "code": "E1"},
            {"kind": "error", "error": {"message": "boom", "code": "E1"}},
        ),
        ({"kind": "extension-reason"}, {"kind": "extension-reason"}),
        ({"kind": "extension-reason", "detail": [1]}, {"kind": "extension-reason", "detail": [1]}),
    ],
)
def test_case_70_legacy_turn_end_reasons_are_mapped(
    store: SessionStore, old: dict[str, Any], current: dict[str, Any]
) -> None:
    store.backend.materialize(
        meta(SID), [ts(0, 1), ev("turn/end", 1, 1, {"turn": 1, "reason": old})]
    )
    for events in (store.load(SID).events, store.inspect(SID).events, store.read(SID)[1]):
        assert events[1].data == {"turn": 1, "reason": current}
    Session(SID, seed=store.load(SID).events)


@pytest.mark.parametrize(
    "reason",
    [
        {"kind": "completed"},
        {"kind": "aborted", "reason": {"kind": "user"}},
        {"kind": "error", "error": {"message": "m", "code": "c"}},
        {"kind": "max-tokens"},
        {"kind": "interrupted"},
        {"kind": "blocked"},
    ],
)
def test_current_turn_end_reasons_pass_unchanged(reason: dict[str, Any]) -> None:
    events = [ts(0, 1), ev("turn/end", 1, 1, {"turn": 1, "reason": reason})]
    assert import_legacy(events, session_id=SID, path=None) is events


@pytest.mark.parametrize(
    "reason",
    [
        {"kind": "aborted", "step": 1},
        {"kind": "disposed", "why": "x"},
        {"kind": "error", "step": 1},
        {"kind": "error", "step": 1, "failure": "boom"},
        {"kind": "error", "step": 1, "failure": {"message": "boom"}},
        {"kind": "error", "step": 1, "message": 7},
        {"kind": "error", "step": 1, "message": "m", "code": None},
        {"kind": "error", "message": "m", "extra": 1},
    ],
)
def test_malformed_legacy_turn_end_is_corruption_naming_the_seq(reason: dict[str, Any]) -> None:
    with pytest.raises(CorruptLogError, match="malformed legacy turn/end at seq 1"):
        imported(ts(0, 1), ev("turn/end", 1, 1, {"turn": 1, "reason": reason}))


@pytest.mark.parametrize(
    ("event", "match"),
    [
        (ev("request/header-delta", 0, 0, {}), 'legacy event type "request/header-delta" at seq 0'),
        (ev("mode/set", 0, 0, {"mode": "plan"}), 'legacy event type "mode/set" at seq 0'),
        (
            ev("request/header", 0, 0, {"header": {}, "reason": "fallback"}),
            "reason fallback at seq 0",
        ),
    ],
)
def test_legacy_vocabulary_is_refused_on_every_read(
    store: SessionStore, event: Event, match: str
) -> None:
    store.backend.materialize(meta(SID), [event])
    for read in (store.load, store.inspect, store.read):
        with pytest.raises(SessionFormatUnsupportedError, match=match) as caught:
            read(SID)
        path = store.backend.read(SID).path
        assert str(caught.value).endswith("" if path is None else f" (raw log: {path})")
    assert store.list()[0].damaged is not None


def test_turn_start_trigger_is_stripped() -> None:
    assert imported(ev("turn/start", 0, 0, {"turn": 3, "trigger": {"kind": "user", "rpcId": 1}}))[
        0
    ].data == {"turn": 3}


@pytest.mark.parametrize(
    "data",
    [
        {"turn": 1, "trigger": {"kind": ""}},
        {"turn": 1, "trigger": "user"},
        {"turn": 0, "trigger": {"kind": "user"}},
        {"turn": True, "trigger": {"kind": "user"}},
        {"turn": 1, "trigger": {"kind": "user"}, "extra": 1},
        {"trigger": {"kind": "user"}},
    ],
)
def test_malformed_turn_start_trigger_is_corruption_naming_the_seq(
    tmp_path: Path, data: dict[str, Any]
) -> None:
    store = JsonlStore(tmp_path)
    store.backend.materialize(meta(SID), [ts(0, 1), te(1, 1), ev("turn/start", 2, 2, data)])
    with pytest.raises(CorruptLogError, match="malformed legacy turn/start at seq 2") as caught:
        store.load(SID)
    assert caught.value.path == store.locate(SID)


def test_steering_message_with_a_message_becomes_that_user_message() -> None:
    message = {"id": "m1", "role": "user", "content": [text("steer")], "source": {"kind": "user"}}
    event = ev("steering/message", 0, 5, {"turn": 1, "message": message})
    assert imported(event) == [Event("user/message", 0, 5, message, None, "append")]


def test_steering_message_with_content_and_source_gets_a_legacy_id() -> None:
    data = {"turn": 1, "content": [text("steer")], "source": {"kind": "user"}}
    event = ev("steering/message", 4, 5, data, op="append", src=[1])
    [user] = import_legacy([*([ts(0, 1)] * 4), event][4:], session_id="abc", path=None)
    assert user == Event(
        "user/message",
        4,
        5,
        {
            "content": [text("steer")],
            "source": {"kind": "user"},
            "id": "legacy-message:abc:4",
            "role": "user",
        },
        [1],
        "append",
    )


def test_malformed_steering_message_is_corruption() -> None:
    with pytest.raises(CorruptLogError, match="malformed legacy steering/message at seq 0"):
        imported(ev("steering/message", 0, 0, {"turn": 1, "text": "x"}))


def test_pre_identity_user_message_keeps_unknown_source_kinds_and_blocks() -> None:
    data = {
        "content": [{"type": "future-block", "x": 1}],
        "source": {"kind": "future-source", "y": [2]},
    }
    [user] = imported(ev("user/message", 0, 0, data, op="append"))
    assert user.data == {**data, "id": legacy_id(0), "role": "user"}


def test_legacy_tool_result_without_is_error_and_with_extra_fields() -> None:
    data = {"turn": 1, "step": 1, "callId": "c", "content": [text("x")], "meta": {"k": 1}}
    [result] = imported(ev("tool/result", 0, 0, data, op="append"))
    assert result.data == {
        "turn": 1,
        "step": 1,
        "meta": {"k": 1},
        "message": {
            "id": legacy_id(0),
            "role": "user",
            "content": [{"type": "tool-result", "toolCallId": "c", "content": [text("x")]}],
            "source": {"kind": "tool", "callId": "c"},
        },
    }


def test_legacy_replace_takes_the_id_of_a_current_target() -> None:
    current = {
        "turn": 1,
        "step": 1,
        "message": {
            "id": "real-id",
            "role": "user",
            "content": [
                {"type": "tool-result", "toolCallId": "c", "content": [text("x")], "isError": False}
            ],
            "source": {"kind": "tool", "callId": "c"},
        },
    }
    events = imported(
        ev("tool/result", 0, 0, current, op="append"),
        old_result(1, "c", "y", op={"op": "replace", "start": 0, "end": 0}, src=[0]),
    )
    assert events[1].data["message"]["id"] == "real-id"


@pytest.mark.parametrize(
    "event",
    [
        ev(
            "assistant/message",
            0,
            0,
            {"turn": 1, "step": 1, "content": "x", "provenance": {"provider": "p"}},
            op="append",
        ),
        ev(
            "assistant/message",
            0,
            0,
            {"turn": 1, "step": 1, "content": [], "provenance": "p"},
            op="append",
        ),
        ev("tool/result", 0, 0, {"turn": 1, "step": 1, "callId": "", "content": []}, op="append"),
        ev("tool/result", 0, 0, {"turn": 1, "step": 1, "callId": "c", "content": "x"}, op="append"),
    ],
)
def test_malformed_pre_identity_messages_are_corruption(event: Event) -> None:
    with pytest.raises(CorruptLogError, match=f"malformed legacy {event.type} at seq 0"):
        imported(event)


def test_current_log_with_unknown_kinds_round_trips_unchanged(store: SessionStore) -> None:
    user = {
        "id": "u1",
        "role": "user",
        "content": [{"type": "hologram", "payload": {"a": [1, None]}}],
        "source": {"kind": "future-source", "extra": True},
    }
    log = [
        ts(0, 1),
        ev("user/message", 1, 1, user, op="append"),
        ev("turn/end", 2, 2, {"turn": 1, "reason": {"kind": "future-reason", "detail": "x"}}),
    ]
    assert readable_events(log, session_id=SID, path=None) is log
    store.backend.materialize(meta(SID), log)
    assert store.load(SID).events == log
    assert store.read(SID)[1] == log


def test_current_looking_malformed_messages_are_not_repaired() -> None:
    events = [
        ev(
            "user/message",
            0,
            0,
            {"role": "user", "content": [], "source": {"kind": "user"}},
            op="append",
        )
    ]
    assert imported(*events) == events


# --- refusal texts (docs/log.md#known-types, #the-session-header; case 68)
# -------------------------------------------


def rewrite_header(store: SessionStore, **fields: Any) -> str:
    """Replace the stored header's fields (raw JSONL only); return the log path."""
    path = store.locate(SID)
    assert path is not None
    lines = Path(path).read_bytes().split(b"\n", 1)
    header = {**msgspec.json.decode(lines[0]), **fields}
    Path(path).write_bytes(msgspec.json.encode(header) + b"\n" + lines[1])
    return path


def test_case_68_newer_version_refusal_text(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    store.backend.materialize(meta(SID), [ts(0, 1)])
    path = rewrite_header(store, version=99)
    with pytest.raises(SessionFormatUnsupportedError) as caught:
        store.load(SID)
    assert str(caught.value) == (
        f'session "{SID}" uses log format v99, but this harness reads only v0: the log was written '
        f"by a newer harness — upgrade the harness to open it (raw log: {path})"
    )


def test_case_68_older_version_refusal_text(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    store.backend.materialize(meta(SID), [ts(0, 1)])
    path = rewrite_header(store, version=-1)
    with pytest.raises(SessionFormatUnsupportedError) as caught:
        store.inspect(SID)
    assert str(caught.value) == (
        f'session "{SID}" uses log format v-1, older than the supported v0, and this build ships '
        f"no upgrade path for it (raw log: {path})"
    )


def test_case_68_unknown_type_refusal_text(store: SessionStore) -> None:
    store.backend.materialize(meta(SID), [ts(0, 1), ev("future/event", 1, 1, {})])
    path = store.backend.read(SID).path
    expected = (
        f'session "{SID}" contains event type "future/event" (seq 1) unknown to this harness and '
        "not "
        "marked ignorable; refusing to interpret the log — it was likely written by a newer harness"
    )
    if path is not None:
        expected += f" (raw log: {path})"
    for read in (store.load, store.inspect, store.read):
        with pytest.raises(SessionFormatUnsupportedError) as caught:
            read(SID)
        assert str(caught.value) == expected


def test_steering_message_is_imported_before_the_vocabulary_check(store: SessionStore) -> None:
    data = {"turn": 1, "content": [text("steer")], "source": {"kind": "user"}}
    store.backend.materialize(
        meta(SID), [ts(0, 1), ev("steering/message", 1, 1, data, op="append")]
    )
    events = store.load(SID).events
    assert events[1].type == "user/message"
    assert events[1].data["id"] == legacy_id(1)


# --- an older-format log, as dsh's apps/web fixtures are (docs/store.md#projected-fixtures)
# ---------------------


def web_fixture_lines() -> list[dict[str, Any]]:
    """Projected records (no seq/time) in the pre-identity shapes of the apps/web snapshots."""
    provenance = {"provider": "deepseek", "model": "deepseek-chat", "replayState": {"r": 1}}
    call = {"type": "tool-call", "id": "call-1", "name": "read", "arguments": '{"path":"a"}'}
    chunk = {"type": "text-delta", "index": 0, "text": "hi"}
    return [
        {
            "type": "turn/start",
            "data": {"turn": 1, "trigger": {"kind": "user", "rpcId": "{{rpcId}}"}},
        },
        {
            "type": "user/message",
            "data": {"content": [text("read a")], "source": {"kind": "user"}},
            "surfaceOp": "append",
        },
        {"type": "step/start", "data": {"turn": 1, "step": 1}},
        {"type": "assistant/chunk", "data": {"turn": 1, "step": 1, "chunk": chunk}},
        {
            "type": "assistant/message",
            "data": {"turn": 1, "step": 1, "content": [text("hi"), call], "provenance": provenance},
            "surfaceOp": "append",
        },
        {
            "type": "tool/call",
            "data": {
                "turn": 1,
                "step": 1,
                "callId": "call-1",
                "name": "read",
                "arguments": '{"path":"a"}',
            },
        },
        {
            "type": "tool/result",
            "data": {
                "turn": 1,
                "step": 1,
                "callId": "call-1",
                "content": [text("A")],
                "isError": False,
            },
            "surfaceOp": "append",
            "sourceEventSeqs": [5],
        },
        {"type": "step/end", "data": {"turn": 1, "step": 1}},
        {
            "type": "steering/message",
            "data": {"turn": 1, "content": [text("and b")], "source": {"kind": "user"}},
            "surfaceOp": "append",
        },
        {"type": "step/start", "data": {"turn": 1, "step": 2}},
        {
            "type": "assistant/message",
            "data": {"turn": 1, "step": 2, "content": [text("done")], "provenance": provenance},
            "surfaceOp": "append",
        },
        {"type": "step/end", "data": {"turn": 1, "step": 2}},
        {"type": "turn/end", "data": {"turn": 1, "reason": {"kind": "completed"}}},
    ]


def test_older_format_web_fixture_loads_derives_and_pairs(tmp_path: Path) -> None:
    # The apps/web header lacks delegationDepth; the JSONL reader refuses that (6.4), so the
    # fixture is header-patched first, as docs/store.md#projected-fixtures prescribes.
    header = {
        "type": "session",
        "version": 0,
        "id": "{{sessionId}}",
        "createdAt": 0,
        "cwd": "{{cwd}}",
    }
    path = tmp_path / "session.jsonl"
    body = b"".join(msgspec.json.encode(line) + b"\n" for line in web_fixture_lines())
    path.write_bytes(msgspec.json.encode(header) + b"\n" + body)
    with pytest.raises(CorruptLogError, match="delegationDepth"):
        read_log_file(path)
    path.write_bytes(msgspec.json.encode({**header, "delegationDepth": 0}) + b"\n" + body)
    read_header, events = read_log_file(path)
    session_id = read_header.id
    assert events[0].data == {"turn": 1}
    assert events[8].type == "user/message"
    session = Session(session_id, seed=events)
    messages = session.derive_messages()
    assert [m["id"] for m in messages] == [legacy_id(n, session_id) for n in (1, 4, 6, 8, 10)]
    assert messages[1]["source"] == {
        "provider": "deepseek",
        "model": "deepseek-chat",
        "replayState": {"r": 1},
        "kind": "model",
    }
    check_pairing(messages)
    # Through a store: the same events imported again on every read, storage unchanged.
    store = JsonlStore(tmp_path / "store")
    store.backend.materialize(read_header, _raw_events(path))
    assert store.load(session_id).events == events


def _raw_events(path: Path) -> list[Event]:
    """The projected records of `path` with seq/time restored, before any legacy import."""
    lines = path.read_bytes().split(b"\n")[1:-1]
    return [
        msgspec.convert({**msgspec.json.decode(line), "seq": seq, "time": 0}, Event)
        for seq, line in enumerate(lines)
    ]
