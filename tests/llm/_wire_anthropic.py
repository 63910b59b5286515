"""A wire-level Anthropic Messages server on 127.0.0.1 for adapter tests.

See docs/providers.md#offline-testing.

`POST /v1/messages` records the request and answers with the next scripted reply: an SSE
stream (`event:` + `data:` lines, as the API sends them) or an HTTP error with Anthropic's
envelope `{"type": "error", "error": {type, message}}`. Faults are scripted per reply: a
stream that ends early (no `message_stop`), an `event: error` frame, a data line that is
not JSON, a stall (the server stops writing until the test ends), and a connection reset
(RST, before or during the body).

Every request is validated by `request_violations`, an independent reading of the API's
rules (docs/providers.md#anthropic-pairing, plus the thinking and empty-text rules of the API's own
400s), not duraloop's pairing views. A violation is recorded, answered with a 400 like the real
API's, and fails the test in the fixture's teardown unless the test takes it with
`take_violations()`.
"""

from __future__ import annotations

import json
import re
import socket
import struct
import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ._wire_window import anthropic_overflow_error, request_tokens

Event = dict[str, Any]

_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_THINKING = ("thinking", "redacted_thinking")


@dataclass
class RecordedRequest:
    """One request the server received."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    raw: bytes


@dataclass
class Reply:
    """One scripted reply: SSE `actions` after a 200, or an error `body` with `status`.

    Actions: `("event", dict)` writes one event; `("raw", bytes)` writes bytes verbatim;
    `("stall", None)` stops writing until the server stops; `("reset", None)` resets the
    connection (also before any byte when it comes first and `reset_early` is set).
    """

    status: int = 200
    actions: list[tuple[str, Any]] = field(default_factory=list)
    body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    reset_early: bool = False
    echo_credentials: bool = False
    """A fault: answer `status` with an error whose message echoes the request's
    `x-api-key` and `authorization` headers (as a misbehaving proxy does), unvalidated."""


# --- event builders (shapes from the streaming docs' examples) ---------------------------


def message_start(
    *,
    input_tokens: int = 10,
    output_tokens: int = 1,
    cache_read: int | None = None,
    cache_creation: int | None = None,
    message_id: str = "msg_wire_1",
    model: str = "claude-test",
) -> Event:
    """Build a `message_start` event."""
    usage: dict[str, Any] = {"input_tokens": input_tokens, "output_tokens": output_tokens}
    if cache_read is not None:
        usage["cache_read_input_tokens"] = cache_read
    if cache_creation is not None:
        usage["cache_creation_input_tokens"] = cache_creation
    message: dict[str, Any] = {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    return {"type": "message_start", "message": message}


def text_block(index: int, *parts: str) -> list[Event]:
    """Build a text block: start, one `text_delta` per part, stop."""
    start = {
        "type": "content_block_start",
        "index": index,
        "content_block": {"type": "text", "text": ""},
    }
    deltas = [
        {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": p}}
        for p in parts
    ]
    return [start, *deltas, {"type": "content_block_stop", "index": index}]


def thinking_block(index: int, *parts: str, signature: str) -> list[Event]:
    """Build a thinking block: start, `thinking_delta`s, one `signature_delta`, stop."""
    start = {
        "type": "content_block_start",
        "index": index,
        "content_block": {"type": "thinking", "thinking": ""},
    }
    deltas = [
        {
            "type": "content_block_delta",
            "index": index,
            "delta": {"type": "thinking_delta", "thinking": p},
        }
        for p in parts
    ]
    sig = {
        "type": "content_block_delta",
        "index": index,
        "delta": {"type": "signature_delta", "signature": signature},
    }
    return [start, *deltas, sig, {"type": "content_block_stop", "index": index}]


def redacted_block(index: int, data: str) -> list[Event]:
    """Build a `redacted_thinking` block (start with its opaque data, then stop)."""
    start = {
        "type": "content_block_start",
        "index": index,
        "content_block": {"type": "redacted_thinking", "data": data},
    }
    return [start, {"type": "content_block_stop", "index": index}]


def tool_block(index: int, call_id: str, name: str, *partial_json: str) -> list[Event]:
    """Build a tool_use block: start with `input: {}`, `input_json_delta`s, stop."""
    start = {
        "type": "content_block_start",
        "index": index,
        "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}},
    }
    deltas = [
        {
            "type": "content_block_delta",
            "index": index,
            "delta": {"type": "input_json_delta", "partial_json": p},
        }
        for p in partial_json
    ]
    return [start, *deltas, {"type": "content_block_stop", "index": index}]


def message_end(stop_reason: str | None, *, output_tokens: int = 5) -> list[Event]:
    """Build the closing `message_delta` and `message_stop` events."""
    delta = {
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason, "stop_sequence": None},
        "usage": {"output_tokens": output_tokens},
    }
    return [delta, {"type": "message_stop"}]


def text_reply(text: str) -> list[Event]:
    """A whole `end_turn` response with one text block."""
    return [message_start(), *text_block(0, text), *message_end("end_turn")]


def tool_reply(*calls: tuple[str, str, str], text: str | None = None) -> list[Event]:
    """A whole `tool_use` response: optional text, then one tool_use per `(id, name, json)`."""
    events = [message_start()]
    index = 0
    if text is not None:
        events += text_block(0, text)
        index = 1
    for offset, (call_id, name, arguments) in enumerate(calls):
        events += tool_block(index + offset, call_id, name, "", arguments)
    return [*events, *message_end("tool_use")]


def message_events(message: Mapping[str, Any]) -> list[Event]:
    """Stream a non-streaming Message JSON the way the API streams it (one delta per block)."""
    start = message_start(
        message_id=message.get("id", "msg_wire_1"), model=message.get("model", "claude-test")
    )
    events = [start]
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            events += text_block(index, block["text"])
        elif block["type"] == "tool_use":
            events += tool_block(index, block["id"], block["name"], json.dumps(block["input"]))
        elif block["type"] == "thinking":
            events += thinking_block(index, block["thinking"], signature=block["signature"])
        else:
            raise ValueError(f"no stream form for block type {block['type']!r}")
    return [*events, *message_end(message.get("stop_reason"))]


def error_frame(error_type: str, message: str) -> Event:
    """The data of an `event: error` frame."""
    return {"type": "error", "error": {"type": error_type, "message": message}}


def sse(events: list[Event]) -> str:
    """Render events as the API's SSE text (`event:` and `data:` lines)."""
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)


def parse_sse(text: str) -> list[Event]:
    """Parse SSE text into the data objects of its events (ping included)."""
    events: list[Event] = []
    for frame in text.strip().split("\n\n"):
        data = [line[5:].strip() for line in frame.splitlines() if line.startswith("data:")]
        if data:
            events.append(json.loads("\n".join(data)))
    return events


# --- the validator ------------------------------------------------------------------------


def _blocks(message: Mapping[str, Any]) -> list[Any]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return content if isinstance(content, list) else []


def request_violations(body: Mapping[str, Any]) -> list[str]:
    """Return every rule of the Messages API that `body` breaks (empty when valid).

    Rules: `model` a string, `max_tokens` a positive int, `stream` true; `messages` a list
    of user/assistant messages with non-empty content and no empty text; each `tool_use`
    answered by a `tool_result` with its id in the immediately next message, a user message
    that starts with those results, one each; no other `tool_result`; ids match
    `^[a-zA-Z0-9_-]+$`, at most 64; thinking blocks only lead an assistant message and are
    never its last block; with `thinking` on: `budget_tokens` in [1024, max_tokens), no
    `temperature`, and the first assistant message after the last user turn starts with a
    thinking block (when one follows it).
    """
    found: list[str] = []
    if not isinstance(body.get("model"), str) or not body["model"]:
        found.append("model must be a non-empty string")
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or max_tokens < 1:
        found.append("max_tokens: Field required (a positive integer)")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return [*found, "messages: at least one message is required"]
    pending: list[str] = []
    for n, message in enumerate(messages):
        role = message.get("role")
        blocks = _blocks(message)
        if role not in ("user", "assistant"):
            found.append(f"messages.{n}.role: unexpected role {role!r}")
        if not blocks:
            found.append(f"messages.{n}: all messages must have non-empty content")
        for k, block in enumerate(blocks):
            if block.get("type") == "text" and not str(block.get("text", "")).strip():
                found.append(
                    f"messages.{n}.content.{k}.text: text content blocks must contain "
                    "non-whitespace text"
                )
        leading = 0
        while leading < len(blocks) and blocks[leading].get("type") == "tool_result":
            leading += 1
        answered = [str(b.get("tool_use_id")) for b in blocks[:leading]]
        if pending:
            if (
                role != "user"
                or sorted(answered) != sorted(pending)
                or len(answered) != len(set(answered))
            ):
                found.append(
                    f"messages.{n - 1}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(pending)}"
                )
        elif answered:
            found.append(
                f"messages.{n}.content.0: unexpected `tool_use_id` found in `tool_result` "
                f"blocks: {answered[0]}"
            )
        for k, block in enumerate(blocks[leading:], start=leading):
            if block.get("type") == "tool_result":
                found.append(f"messages.{n}.content.{k}: tool_result after other content")
        for call_id in answered:
            if not _ID.fullmatch(call_id):
                found.append(
                    f"messages.{n}: tool_use_id {call_id!r} does not match ^[a-zA-Z0-9_-]+$"
                )
        pending = []
        if role == "assistant":
            types = [b.get("type") for b in blocks]
            lead = 0
            while lead < len(types) and types[lead] in _THINKING:
                lead += 1
            if any(t in _THINKING for t in types[lead:]):
                found.append(
                    f"messages.{n}.content.0: If an assistant message contains any thinking blocks,"
                    " the first block must be thinking or redacted_thinking"
                )
            if types and types[-1] in _THINKING:
                found.append(
                    f"messages.{n}: The final block in an assistant message cannot be `thinking`"
                )
            for block in blocks:
                if block.get("type") == "tool_use":
                    call_id = str(block.get("id"))
                    if not _ID.fullmatch(call_id):
                        found.append(
                            f"messages.{n}: tool_use id {call_id!r} does not match ^[a-zA-Z0-9_-]+$"
                        )
                    if not isinstance(block.get("input"), dict):
                        found.append(f"messages.{n}: tool_use input must be an object")
                    pending.append(call_id)
    if pending:
        found.append(
            f"messages.{len(messages) - 1}: `tool_use` ids were found without `tool_result` blocks "
            f"immediately after: {', '.join(pending)}"
        )
    found += _thinking_violations(body, messages)
    return found


def _thinking_violations(body: Mapping[str, Any], messages: list[Any]) -> list[str]:
    thinking = body.get("thinking")
    if thinking is None:
        return []
    found: list[str] = []
    budget = thinking.get("budget_tokens") if isinstance(thinking, dict) else None
    max_tokens = body.get("max_tokens")
    if (
        not isinstance(budget, int)
        or budget < 1024
        or (isinstance(max_tokens, int) and budget >= max_tokens)
    ):
        found.append("thinking.budget_tokens: must be >= 1024 and less than max_tokens")
    if "temperature" in body:
        found.append("temperature may only be set to 1 when thinking is enabled")
    turn_start = max(
        (
            n
            for n, m in enumerate(messages)
            if m.get("role") == "user"
            and not any(b.get("type") == "tool_result" for b in _blocks(m))
        ),
        default=-1,
    )
    if turn_start + 1 < len(messages):
        first = _blocks(messages[turn_start + 1])
        if not first or first[0].get("type") not in _THINKING:
            found.append(
                f"messages.{turn_start + 1}.content.0.type: Expected `thinking` or "
                "`redacted_thinking`. "
                "When `thinking` is enabled, a final `assistant` message must start with a "
                "thinking block"
            )
    return found


# --- the server ---------------------------------------------------------------------------


class AnthropicWireServer:
    """A threaded HTTP server replying with scripted Messages responses; validates requests.

    Args:
        context_window: refuse a valid request longer than this many tokens (the server's
            own count, `request_tokens`) with Anthropic's 400 "prompt is too long"; None for
            no limit.
        responder: builds the events of a reply from a request body when no reply is queued
            (long scripted sessions); None answers an unqueued request with a 500.
    """

    def __init__(
        self,
        *,
        context_window: int | None = None,
        responder: Callable[[dict[str, Any]], list[Event]] | None = None,
    ) -> None:
        self.context_window = context_window
        self.responder = responder
        self.overflows = 0
        self.requests: list[RecordedRequest] = []
        self.violations: list[str] = []
        self._replies: deque[Reply] = deque()
        self._release = threading.Event()
        self._count = 0
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", "0")))
                body = json.loads(raw or b"{}")
                with server._lock:
                    server._count += 1
                    request_id = f"req_wire_{server._count}"
                    server.requests.append(
                        RecordedRequest(
                            self.path, {k.lower(): v for k, v in self.headers.items()}, body, raw
                        )
                    )
                    if server._replies and server._replies[0].echo_credentials:
                        status = server._replies.popleft().status
                        heard = "; ".join(
                            f"{name}: {self.headers[name]}"
                            for name in ("x-api-key", "authorization")
                            if name in self.headers
                        )
                        message = f"invalid credentials ({heard})"
                        reply = Reply(status, body=_envelope("authentication_error", message))
                    else:
                        reply = server._next_reply(self.path, body)
                server._answer(self, reply, request_id)

            def finish(self) -> None:
                try:
                    super().finish()
                except (OSError, ValueError):
                    pass  # the test reset the connection

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def _next_reply(self, path: str, body: Any) -> Reply:
        """Validate a request (recording violations) and pick its reply; call under the lock."""
        problems = request_violations(body) if path == "/v1/messages" else [f"unknown path {path}"]
        self.violations.extend(problems)
        if problems:
            return Reply(400, body=_envelope("invalid_request_error", problems[0]))
        window = self.context_window
        tokens = request_tokens(body) if window is not None else 0
        if window is not None and tokens > window:
            self.overflows += 1
            return Reply(400, body=anthropic_overflow_error(tokens, window))
        if self._replies:
            return self._replies.popleft()
        if self.responder is not None:
            return Reply(actions=[("event", e) for e in self.responder(body)])
        return Reply(500, body=_envelope("api_error", "wire server: no reply queued"))

    def _answer(self, handler: BaseHTTPRequestHandler, reply: Reply, request_id: str) -> None:
        try:
            if reply.reset_early:
                _reset(handler)
                return
            if reply.body is not None:
                payload = json.dumps(reply.body).encode()
                handler.send_response(reply.status)
                handler.send_header("content-type", "application/json")
                handler.send_header("content-length", str(len(payload)))
                handler.send_header("request-id", request_id)
                for key, value in reply.headers.items():
                    handler.send_header(key, value)
                handler.end_headers()
                handler.wfile.write(payload)
                return
            handler.send_response(reply.status)
            handler.send_header("content-type", "text/event-stream")
            handler.send_header("request-id", request_id)
            handler.end_headers()
            for kind, value in reply.actions:
                if kind == "event":
                    handler.wfile.write(sse([value]).encode())
                elif kind == "raw":
                    handler.wfile.write(value)
                elif kind == "stall":
                    handler.wfile.flush()
                    self._release.wait()
                    return
                elif kind == "reset":
                    handler.wfile.flush()
                    _reset(handler)
                    return
                handler.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            return  # the client gave up (a stall that timed out)

    @property
    def base_url(self) -> str:
        """The API root to pass as the adapter's `base_url`."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def queue(self, reply: Reply) -> None:
        """Queue a reply for the next request."""
        self._replies.append(reply)

    def queue_events(self, events: list[Event]) -> None:
        """Queue a 200 SSE reply writing `events` in order (end it early to cut the stream)."""
        self.queue(Reply(actions=[("event", e) for e in events]))

    def queue_error(
        self, status: int, error_type: str, message: str, *, headers: dict[str, str] | None = None
    ) -> None:
        """Queue an HTTP error with Anthropic's error envelope."""
        self.queue(Reply(status, body=_envelope(error_type, message), headers=headers or {}))

    def take_violations(self) -> list[str]:
        """Return and clear the violations recorded so far (for tests that expect them)."""
        found, self.violations = self.violations, []
        return found

    def start(self) -> None:
        """Serve in a background thread."""
        self._thread.start()

    def stop(self) -> None:
        """Release stalled replies, stop serving and close the socket."""
        self._release.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    @classmethod
    @contextmanager
    def running(cls) -> Iterator[AnthropicWireServer]:
        """Run a server for the duration of the block; fail on recorded violations."""
        server = cls()
        server.start()
        try:
            yield server
        finally:
            server.stop()
        assert server.violations == [], f"the wire server rejected requests: {server.violations}"


def _envelope(error_type: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type, "message": message}}


def _reset(handler: BaseHTTPRequestHandler) -> None:
    connection: socket.socket = handler.connection
    connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    handler.rfile.close()  # its file object holds a reference that would delay the close
    connection.close()
