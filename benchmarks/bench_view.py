"""The viewer on a 100k-event session: the summary and the first pages, time and peak memory.

A ~100k-event session (turns of: a prompt; a step with reasoning, text, 2 parallel tool
calls and their results; a final text step) is written once to a JSONL store (not timed).
Then a real viewer (`duraloop.view.create_app` under uvicorn, on a loopback port) is asked,
as the session page asks it, for the summary (cold: the log is read and folded), then the
first page of messages and of events (warm: the log read for the summary is reused). Each
case runs in a fresh app, `--runs` times; the peak memory is measured in a separate run
under tracemalloc (which slows Python down), next to the peak of a bare `store.scan` (the
read the viewer makes) of the same log: the viewer's extra is what it adds to that copy.

    /work/venv/bin/python benchmarks/bench_view.py [--runs 3] [--events 100000]
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import _scenario as sc
import httpx2
import uvicorn

from duraloop.log import Session, assistant_message, tool_result_message, user_message
from duraloop.store import JsonlStore, SessionStore
from duraloop.view import create_app

TOKEN = "bench-token"
SESSION = "big"
TARGET_SECONDS = 2.0
"""Issue 16: a 100k-event session's page is usable in under 2 s."""


def build(store: SessionStore, events: int) -> int:
    """Write a session of about `events` events; return how many it has."""
    session = Session(SESSION)
    writer = store.open_writer(session)
    turn = 0
    while len(session.events) < events:
        turn += 1
        _turn(session, turn)
        if turn % 50 == 0:
            writer.flush()
    writer.close()
    return len(session.events)


def _turn(session: Session, turn: int) -> None:
    add = session.append
    add("turn/start", {"turn": turn})
    add("user/message", user_message(f"prompt {turn}: " + "x" * 200), surface_op="append")
    add("step/start", {"turn": turn, "step": 1})
    calls = [
        {"type": "tool-call", "id": f"c{turn}-{i}", "name": "noop", "arguments": "{}"}
        for i in (1, 2)
    ]
    content = [
        {"type": "reasoning", "text": "thinking " * 20},
        {"type": "text", "text": "calling two tools " * 5},
        *calls,
    ]
    message = assistant_message(content, provider="bench", model="bench")
    usage = {"inputTokens": 1000, "outputTokens": 50}
    add(
        "assistant/message",
        {"turn": turn, "step": 1, "message": message, "usage": usage},
        surface_op="append",
    )
    for call in calls:
        data = {"turn": turn, "step": 1, "callId": call["id"], "name": "noop", "arguments": "{}"}
        add("tool/call", data)
    for call in calls:
        result = tool_result_message(
            str(call["id"]), [{"type": "text", "text": "ok " * 50}], is_error=False
        )
        add("tool/result", {"turn": turn, "step": 1, "message": result}, surface_op="append")
    add("step/end", {"turn": turn, "step": 1})
    add("step/start", {"turn": turn, "step": 2})
    final = assistant_message([{"type": "text", "text": "done " * 20}], provider="b", model="b")
    add(
        "assistant/message",
        {"turn": turn, "step": 2, "message": final, "usage": usage},
        surface_op="append",
    )
    add("step/end", {"turn": turn, "step": 2})
    add("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


@contextmanager
def served(store: SessionStore) -> Iterator[httpx2.Client]:
    """A fresh viewer over `store` on a free loopback port, and a client of it."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    server = uvicorn.Server(
        uvicorn.Config(create_app(store, token=TOKEN), log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    try:
        with httpx2.Client(base_url=base, headers={"X-Duraloop-Token": TOKEN}, timeout=120) as c:
            yield c
    finally:
        server.should_exit = True
        thread.join()
        sock.close()


def _timed(call: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    value = call()
    return time.perf_counter() - start, value


def page_load(client: httpx2.Client) -> dict[str, float]:
    """What the session page asks first: the summary, then the first messages and events.

    Each time is until the answer's last byte arrived; parsing it (the browser's
    `JSON.parse`) is timed apart, as `parse`, since here it shares the server's interpreter.
    """
    base = f"/api/sessions/{SESSION}"
    summary_s, summary = _timed(lambda: client.get(base).content)
    messages_s, messages = _timed(lambda: client.get(f"{base}/messages").content)
    events_s, events = _timed(lambda: client.get(f"{base}/events").content)
    parse_s, parsed = _timed(lambda: [json.loads(body) for body in (summary, messages, events)])
    assert parsed[0]["events"] > 0 and len(parsed[1]["items"]) == len(parsed[2]["events"]) == 500
    return {
        "summary": summary_s,
        "messages": messages_s,
        "events": events_s,
        "total": summary_s + messages_s + events_s,
        "parse": parse_s,
        "summary_mib": len(summary) / 2**20,
    }


def peak_mib(call: Callable[[], Any]) -> float:
    """Peak traced memory of `call()`, in MiB."""
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def main(argv: Sequence[str] | None = None) -> list[sc.Figure]:
    """Run the benchmark, print its tables, return its figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--events", type=int, default=100_000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        store = JsonlStore(Path(tmp) / "sessions")
        count = build(store, args.events)
        size = Path(str(store.locate(SESSION))).stat().st_size
        runs = []
        for _ in range(args.runs):
            with served(JsonlStore(Path(tmp) / "sessions")) as client:
                runs.append(page_load(client))
        bare = peak_mib(lambda: JsonlStore(Path(tmp) / "sessions").scan(SESSION))

        def viewed() -> None:
            with served(JsonlStore(Path(tmp) / "sessions")) as client:
                page_load(client)

        viewer = peak_mib(viewed)
    print(
        f"view: {count:,} events, log {size / 2**20:.1f} MiB, {args.runs} runs; the summary "
        f"is {runs[0]['summary_mib']:.1f} MiB of JSON"
    )
    rows = [
        [name, sc.median_of([run[name] * 1000 for run in runs]) + " ms"]
        for name in ("summary", "messages", "events", "total", "parse")
    ]
    print(sc.table(["phase", "time (median, min-max)"], rows))
    print(
        f"peak memory (tracemalloc): viewer {viewer:.0f} MiB; a bare store.scan of the log "
        f"{bare:.0f} MiB"
    )
    total = sorted(run["total"] for run in runs)[len(runs) // 2]
    return [
        sc.Figure(
            "view",
            "100k-event summary + first pages",
            f"{total:.2f} s",
            "< 2 s",
            total < TARGET_SECONDS,
        ),
    ]


if __name__ == "__main__":
    figures = main(sys.argv[1:])
    print(sc.figures_table(figures))
