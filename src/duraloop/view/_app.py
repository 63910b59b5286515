"""`create_app`: the viewer's Starlette application over one store (docs/view.md#api)."""

from __future__ import annotations

import bisect
import json
import threading
from collections.abc import Awaitable, Callable, Mapping
from importlib.resources import files
from typing import Any, TypeAlias

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from duraloop.errors import (
    ApprovalError,
    CorruptLogError,
    SessionFormatUnsupportedError,
    SessionLockedError,
    SessionNotFoundError,
    UsageError,
)
from duraloop.log import MAX_FEEDBACK_CHARS, Price, SessionHeader, pending_approval
from duraloop.log import vocabulary as v
from duraloop.store import SessionStore

from ._cut import event_json
from ._guard import Guard
from ._items import iter_items, turn_start_before
from ._json import JsonAnswer
from ._reader import Loaded, StoreReader
from ._stream import event_stream
from ._summary import build_summary, damaged_summary, session_rows

Decide: TypeAlias = Callable[[str, str, bool, str | None], Awaitable[str | None]]
"""`(session_id, call_id, allow, feedback)`: records a decision (docs/view.md#approvals).

It returns how the turn goes on: `vocabulary.CONTINUATION_QUEUED` when it queued the turn's
continuation for the workers, else `CONTINUATION_RESUME` (or None: the same).
"""
Handler: TypeAlias = Callable[[Request], Awaitable[Response]]

DEFAULT_LIMIT = 500
MAX_LIMIT = 2000
_STATIC = files("duraloop.view") / "static"


class _RefusalError(Exception):
    """An API answer other than 200: its status and message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _error(status: int, message: str) -> JsonAnswer:
    return JsonAnswer({"error": message}, status_code=status)


def _int_param(request: Request, name: str, default: int, *, low: int, high: int) -> int:
    text = request.query_params.get(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise _RefusalError(400, f"{name} must be an integer, got {text[:40]!r}") from None
    if not low <= value <= high:
        raise _RefusalError(400, f"{name} must be between {low} and {high}, got {value}")
    return value


def create_app(
    store: SessionStore,
    *,
    token: str,
    decide: Decide | None = None,
    poll_seconds: float = 0.2,
    prices: Mapping[str, Price] | None = None,
) -> Starlette:
    """Return the viewer's web application over `store` (docs/view.md#api).

    Args:
        store: the sessions served (read only, except through `decide`).
        token: the server's secret; every `/api` request must carry it
            (docs/view.md#security).
        decide: records an approval decision as `duraloop approve/deny` do; None: the
            approvals route answers 405.
        poll_seconds: how often a live stream looks for new events, in seconds.
        prices: the price table for each turn's cost (None: costs are null).

    Returns:
        The Starlette app (serve it with uvicorn on a loopback address). Its
        `state.stopping` (a `threading.Event`) ends every live stream within `poll_seconds`
        once set: set it when the server stops (`duraloop view` does on Ctrl-C/SIGTERM), so
        the shutdown does not wait on them.

    Raises:
        UsageError: if the token is empty or `poll_seconds` is not positive.
    """
    if not token:
        raise UsageError("create_app needs a non-empty token (secrets.token_urlsafe(24))")
    if not poll_seconds > 0:
        raise UsageError(f"poll_seconds must be positive, got {poll_seconds!r}")
    reader = StoreReader(store)
    stopping = threading.Event()
    price_table = dict(prices or {})

    async def guarded(
        request: Request, handler: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        try:
            return await handler(request)
        except _RefusalError as refusal:
            return _error(refusal.status, str(refusal))
        except SessionNotFoundError as exc:
            return _error(404, str(exc))
        except SessionLockedError as exc:  # another process writes the session
            return _error(409, str(exc))
        except UsageError as exc:  # an id the store refuses, or a decision that cannot be made
            return _error(409 if isinstance(exc, ApprovalError) else 400, str(exc))

    def api(
        handler: Callable[[Request], Awaitable[Response]],
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            return await guarded(request, handler)

        return endpoint

    async def sessions(request: Request) -> Response:
        summaries = await reader.summaries()
        return JsonAnswer({"sessions": session_rows(summaries)})

    async def children_of(session_id: str) -> list[str]:
        headers = await reader.call(store.backend.list_headers)
        return sorted(
            header.id
            for header in headers
            if isinstance(header, SessionHeader) and header.parent_session == session_id
        )

    async def loaded(session_id: str) -> Loaded:
        if not await reader.call(lambda: store.exists(session_id)):
            raise SessionNotFoundError(session_id)
        return await reader.load(session_id)

    async def summary(request: Request) -> Response:
        session_id = request.path_params["id"]
        try:
            log = await loaded(session_id)
        except (CorruptLogError, SessionFormatUnsupportedError) as exc:
            return JsonAnswer(damaged_summary(None, session_id, str(exc)))
        body = log.derived.get("summary")
        if body is None:  # folded off the event loop (a 100k-event log takes a second)
            built = await reader.call(
                lambda: build_summary(log.header, log.events, children=[], prices=price_table)
            )
            body = log.derived["summary"] = built
        return JsonAnswer({**body, "children": await children_of(session_id)})

    async def events(request: Request) -> Response:
        log = await _readable(request.path_params["id"])
        after, limit = _page(request)
        start = bisect.bisect_right(log.events, after, key=lambda event: event.seq)
        page = log.events[start : start + limit]
        more = start + limit < len(log.events)
        return JsonAnswer(
            {
                "events": [event_json(event) for event in page],
                "next": page[-1].seq if more and page else None,
            }
        )

    async def messages(request: Request) -> Response:
        log = await _readable(request.path_params["id"])
        after, limit = _page(request)
        items: list[dict[str, Any]] = []
        more = False
        first = bisect.bisect_right(log.events, after, key=lambda event: event.seq)
        for item in iter_items(log.events, turn_start_before(log.events, first)):
            if item["seq"] <= after:
                continue
            if len(items) == limit:
                more = True
                break
            items.append(item)
        return JsonAnswer({"items": items, "next": items[-1]["seq"] if more else None})

    async def stream(request: Request) -> Response:
        session_id = request.path_params["id"]
        await loaded(session_id)  # 404 before the stream starts
        after = _int_param(request, "after", -1, low=-1, high=2**53)
        last = request.headers.get("last-event-id")
        if last is not None:
            try:
                after = int(last)
            except ValueError:
                raise _RefusalError(
                    400, f"Last-Event-ID must be a seq, got {last[:40]!r}"
                ) from None
        return event_stream(
            reader, session_id, after=after, poll_seconds=poll_seconds, stopping=stopping
        )

    async def approve(request: Request) -> Response:
        if decide is None:
            return _error(405, "this server records no decisions (started without a decider)")
        session_id = request.path_params["id"]
        call_id = request.path_params["call_id"]
        allow, feedback = await _decision(request)
        log = await loaded(session_id)
        pending = pending_approval(log.events)
        if pending is None:
            raise ApprovalError(f'session "{session_id}" is not paused: no call waits for approval')
        if pending.call_id != call_id:
            raise ApprovalError(
                f'call "{call_id[:200]}" does not wait for approval in session "{session_id}"; '
                f'"{pending.call_id}" does'
            )
        if pending.decided:
            raise ApprovalError(
                f'the call "{call_id}" of session "{session_id}" is already decided '
                f"({pending.outcome})"
            )
        try:
            continuation = await decide(session_id, call_id, allow, feedback)
        finally:
            reader.forget(session_id)
        if continuation != v.CONTINUATION_QUEUED:
            continuation = v.CONTINUATION_RESUME
        return JsonAnswer({"ok": True, "continuation": continuation})

    async def _readable(session_id: str) -> Loaded:
        try:
            return await loaded(session_id)
        except (CorruptLogError, SessionFormatUnsupportedError) as exc:
            raise _RefusalError(409, f"the log cannot be read: {exc}") from None

    routes = [
        Route("/", _page_file("index.html")),
        Route("/s/{id:path}", _page_file("session.html")),
        Route("/api/sessions", api(sessions)),
        Route("/api/sessions/{id}", api(summary)),
        Route("/api/sessions/{id}/events", api(events)),
        Route("/api/sessions/{id}/messages", api(messages)),
        Route("/api/sessions/{id}/stream", api(stream)),
        Route("/api/sessions/{id}/approvals/{call_id}", api(approve), methods=["POST"]),
        Mount("/static", StaticFiles(directory=str(_STATIC)), name="static"),
    ]
    app = Starlette(routes=routes)
    app.state.stopping = stopping
    app.add_middleware(Guard, token=token)
    return app


def _page(request: Request) -> tuple[int, int]:
    after = _int_param(request, "after", -1, low=-1, high=2**53)
    limit = _int_param(request, "limit", DEFAULT_LIMIT, low=1, high=MAX_LIMIT)
    return after, limit


async def _decision(request: Request) -> tuple[bool, str | None]:
    try:
        body = json.loads(await request.body())
    except (ValueError, UnicodeDecodeError):
        raise _RefusalError(
            400, 'the body must be JSON: {"allow": true|false, "feedback": ...}'
        ) from None
    if not isinstance(body, dict) or not isinstance(body.get("allow"), bool):
        raise _RefusalError(400, 'the body must be {"allow": true|false, "feedback": text or null}')
    feedback = body.get("feedback")
    if feedback is not None and not isinstance(feedback, str):
        raise _RefusalError(400, "feedback must be text or null")
    if feedback is not None and len(feedback) > MAX_FEEDBACK_CHARS:
        raise _RefusalError(
            400, f"feedback is {len(feedback):,} characters; at most {MAX_FEEDBACK_CHARS:,}"
        )
    return body["allow"], feedback if feedback and feedback.strip() else None


def _page_file(name: str) -> Handler:
    async def page(request: Request) -> Response:
        return FileResponse(str(_STATIC / name), media_type="text/html; charset=utf-8")

    return page
