"""`GET /api/sessions/{id}/stream`: live events, and a reconnect that continues exactly."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2

from duraloop.llm import ScriptedModel
from duraloop.loop import SessionSetup, resume_session, start_session
from duraloop.store import JsonlStore
from duraloop.view import create_app

from ._support import TOKEN, serve

TURNS = 6


def _sse(lines: Iterator[str]) -> Iterator[tuple[str | None, str, dict[str, Any]]]:
    """Yield (id, event, data) of each dispatched server-sent event."""
    fields: dict[str, str] = {}
    for line in lines:
        if line == "":
            if "data" in fields:
                yield fields.get("id"), fields.get("event", "message"), json.loads(fields["data"])
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            fields[name] = value.removeprefix(" ")


def _take(
    client: httpx2.Client, path: str, headers: dict[str, str], until: Any
) -> list[dict[str, Any]]:
    """Read a stream's events until `until(events)` holds, then disconnect."""
    got: list[dict[str, Any]] = []
    with client.stream("GET", path, headers=headers) as answer:
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/event-stream")
        for event_id, kind, data in _sse(answer.iter_lines()):
            assert kind == "event" and event_id == str(data["seq"])
            got.append(data)
            if until(got):
                break
    return got


def test_a_reconnect_with_last_event_id_continues_exactly_while_another_writer_appends(
    tmp_path: Path, workspace: Path
) -> None:
    root = tmp_path / "sessions"
    script = [{"text": f"answer {i}"} for i in range(TURNS + 1)]
    writer_store = JsonlStore(root)  # another store over the same root: another writer
    loop = start_session(
        SessionSetup(store=writer_store, model=ScriptedModel(script[:1]), tools=[], cwd=workspace),
        session_id="live",
    )
    with loop:
        anyio.run(loop.run_turn, "first")
    first_turn = len(writer_store.read("live")[1])
    started = threading.Event()
    failures: list[BaseException] = []

    def write_more() -> None:
        try:
            started.wait(30)
            setup = SessionSetup(
                store=writer_store, model=ScriptedModel(script[1:]), tools=[], cwd=workspace
            )
            more, _repair = resume_session("live", setup)
            with more:
                for turn in range(TURNS):
                    anyio.run(more.run_turn, f"prompt {turn}")
        except BaseException as exc:  # reported by the test below
            failures.append(exc)

    writer = threading.Thread(target=write_more)
    writer.start()
    app = create_app(JsonlStore(root), token=TOKEN, poll_seconds=0.02)
    try:
        with serve(app) as client:
            url = f"/api/sessions/live/stream?token={TOKEN}"
            before = _take(client, url, {}, lambda got: len(got) == first_turn - 2)
            started.set()  # the writer appends while this client is away and reconnecting
            last = before[-1]["seq"]
            after = _take(
                client,
                f"/api/sessions/live/stream?token={TOKEN}&after=0",  # the header wins
                {"Last-Event-ID": str(last)},
                lambda got: got[-1]["type"] == "turn/end" and got[-1]["data"]["turn"] == TURNS + 1,
            )
    finally:
        started.set()
        writer.join(60)
    assert failures == []
    stored = writer_store.read("live")[1]
    seqs = [event["seq"] for event in before + after]
    assert seqs == list(range(len(stored)))  # none missed, none repeated
    assert [event["type"] for event in before + after] == [event.type for event in stored]
    assert after[0]["seq"] == last + 1


def test_a_stream_starts_after_the_given_seq(tmp_path: Path, workspace: Path) -> None:
    store = JsonlStore(tmp_path / "sessions")
    loop = start_session(
        SessionSetup(store=store, model=ScriptedModel([{"text": "hi"}]), tools=[], cwd=workspace),
        session_id="s",
    )
    with loop:
        anyio.run(loop.run_turn, "hello")
    total = len(store.read("s")[1])
    with serve(create_app(store, token=TOKEN)) as client:
        got = _take(
            client,
            f"/api/sessions/s/stream?token={TOKEN}&after=3",
            {},
            lambda got: got[-1]["seq"] == total - 1,
        )
    assert [event["seq"] for event in got] == list(range(4, total))
