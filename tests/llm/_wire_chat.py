"""A wire-level Chat Completions server on 127.0.0.1, scripted per test.

See docs/providers.md#offline-testing.

`POST /v1/chat/completions` (or `/chat/completions`) records the request and answers with
the next scripted reply: an SSE stream of frames (chunk objects, comments, raw bytes, a
stall), ended by `[DONE]`, by a clean close without it, or by a connection reset; an HTTP
error with a provider-style body; or a reset before any response. A real socket, not a
mock, so the SDK's transport and duraloop's SSE reader are the ones users get.

Every request is validated, independently of duraloop's own pairing views, against the
Chat Completions pairing rule (docs/providers.md#chat-completions-pairing) and, for the DeepSeek
dialect, the thinking mode rules (3.3): a request that breaks one is recorded in `violations` and
answered with the provider's 400, and `stop()` fails the test unless the test took the violations.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from ._wire_window import chat_overflow_error, request_tokens

Dialect = Literal["openai", "deepseek"]
MAX_TOOL_CALL_ID = 40  # OpenAI: "string too long. Expected a string with maximum length 40"
OPENAI_ASSISTANT_KEYS = frozenset(
    {"role", "content", "tool_calls", "name", "refusal", "audio", "function_call"}
)


@dataclass
class RecordedRequest:
    """One request the server received."""

    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes


@dataclass(frozen=True)
class Violation:
    """One rule a received request broke."""

    request: int
    message_index: int
    rule: str
    detail: str


@dataclass(frozen=True)
class Comment:
    """An SSE comment line, e.g. `: keep-alive`."""

    text: str = "keep-alive"


@dataclass(frozen=True)
class Raw:
    """Bytes written verbatim (malformed payloads, odd framing)."""

    data: bytes


@dataclass(frozen=True)
class Pause:
    """Wait this many seconds before the next frame (a slow provider)."""

    seconds: float


@dataclass(frozen=True)
class Stall:
    """Stop writing until the server stops (the client's idle timeout must fire)."""


Frame = dict[str, Any] | Comment | Raw | Pause | Stall


@dataclass
class _Sse:
    frames: list[Frame]
    done: bool
    end: Literal["close", "reset"]
    headers: dict[str, str]


@dataclass
class _Http:
    status: int
    body: bytes
    content_type: str
    headers: dict[str, str]


@dataclass
class _Reset:
    pass


@dataclass
class _EchoCredentials:
    status: int


_Reply = _Sse | _Http | _Reset | _EchoCredentials


def chunk_event(
    *,
    content: str | None = None,
    reasoning: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    finish_reason: str | None = None,
    model: str = "gpt-test",
) -> dict[str, Any]:
    """Build one `chat.completion.chunk` with a single choice."""
    delta: dict[str, Any] = {}
    if content is not None:
        delta["content"] = content
    if reasoning is not None:
        delta["reasoning_content"] = reasoning
    if tool_calls is not None:
        delta["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def usage_event(
    prompt_tokens: int,
    completion_tokens: int,
    *,
    cached_tokens: int | None = None,
    reasoning_tokens: int | None = None,
) -> dict[str, Any]:
    """Build the trailing `choices: []` usage chunk."""
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if cached_tokens is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
    if reasoning_tokens is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "gpt-test",
        "choices": [],
        "usage": usage,
    }


def tool_delta(
    index: int, *, call_id: str | None = None, name: str | None = None, arguments: str = ""
) -> dict[str, Any]:
    """Build one `delta.tool_calls[]` item."""
    function: dict[str, Any] = {"arguments": arguments}
    if name is not None:
        function["name"] = name
    item: dict[str, Any] = {"index": index, "function": function}
    if call_id is not None:
        item["id"] = call_id
        item["type"] = "function"
    return item


def validate_chat_request(
    body: Any, *, dialect: Dialect, streamed_reasoning: Mapping[str, str] | None = None
) -> list[tuple[int, str, str]]:
    """Check one Chat Completions request body; return `(message index, rule, detail)`s.

    Rules: docs/providers.md#chat-completions-pairing (an assistant message with `tool_calls` is
        followed by one `tool`
    message per call id, in call order, before any other message; a `tool` message answers
    a call of the assistant message just before its run, once; call ids are strings of at
    most 40 characters; tool content is a non-empty string); for `deepseek`, 3.3 (assistant
    `content` is always a string; in thinking mode an assistant message with tool calls
    carries `reasoning_content`, equal byte for byte to what this server streamed for those
    calls); for `openai`, no DeepSeek-only fields. Index -1 is the body itself.
    """
    found: list[tuple[int, str, str]] = []
    if not isinstance(body, dict):
        return [(-1, "body", f"the body is {type(body).__name__}, not an object")]
    if not isinstance(body.get("model"), str) or not body["model"]:
        found.append((-1, "body", "model is not a non-empty string"))
    if body.get("stream") is not True or body.get("stream_options") != {"include_usage": True}:
        found.append((-1, "body", "stream must be true with stream_options.include_usage"))
    thinking = body.get("thinking")
    if dialect == "deepseek":
        if thinking is not None and thinking not in ({"type": "enabled"}, {"type": "disabled"}):
            found.append((-1, "body", f"thinking is {thinking!r}"))
        effort = body.get("reasoning_effort")
        if effort is not None and (
            effort not in ("low", "high", "max") or thinking == {"type": "disabled"}
        ):
            found.append((-1, "body", f"reasoning_effort {effort!r} with thinking {thinking!r}"))
        if "max_completion_tokens" in body:
            found.append((-1, "body", "DeepSeek takes max_tokens, not max_completion_tokens"))
    elif "thinking" in body:
        found.append((-1, "body", "Unrecognized request argument supplied: thinking"))
    thinking_on = dialect == "deepseek" and thinking != {"type": "disabled"}
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return [*found, (-1, "body", "messages is not a non-empty list")]
    pending: list[str] = []
    answered = 0
    for index, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role == "tool":
            call_id = message.get("tool_call_id")
            content = message.get("content")
            if answered < len(pending) and call_id == pending[answered]:
                answered += 1
            elif call_id in pending:
                found.append(
                    (
                        index,
                        "3.1 order",
                        f"tool message for {call_id!r} out of call order or repeated",
                    )
                )
            else:
                found.append(
                    (
                        index,
                        "3.1 unexpected tool",
                        "Messages with role 'tool' must be a response to a preceding message "
                        f"with 'tool_calls' (tool_call_id {call_id!r})",
                    )
                )
            if not isinstance(content, str) or not content:
                found.append((index, "tool content", f"tool content is {content!r}"))
            continue
        if answered < len(pending):
            found.append(
                (
                    index,
                    "3.1 unanswered",
                    "An assistant message with 'tool_calls' must be followed by tool messages "
                    f"responding to each 'tool_call_id': missing {pending[answered:]!r}",
                )
            )
        pending, answered = [], 0
        if role not in ("system", "developer", "user", "assistant"):
            found.append((index, "role", f"role {role!r}"))
            continue
        if role != "assistant":
            if not isinstance(message.get("content"), str):
                found.append((index, "content", f"{role} content is {message.get('content')!r}"))
            continue
        calls = message.get("tool_calls") or []
        for call in calls:
            call_id = call.get("id")
            function = call.get("function") or {}
            if not isinstance(call_id, str) or not 0 < len(call_id) <= MAX_TOOL_CALL_ID:
                found.append((index, "tool call id", f"id {call_id!r} is not 1-40 characters"))
            elif call_id in pending:
                found.append((index, "tool call id", f"duplicate id {call_id!r}"))
            if call.get("type") != "function" or not isinstance(function.get("arguments"), str):
                found.append((index, "tool call", f"malformed call {call!r}"))
            if not isinstance(function.get("name"), str) or not function["name"]:
                found.append((index, "tool call", f"call {call_id!r} has no name"))
            pending.append(str(call_id))
        content = message.get("content")
        if dialect == "deepseek":
            if not isinstance(content, str):
                found.append(
                    (
                        index,
                        "3.3 content",
                        f"content is {content!r}: content or tool_calls must be set",
                    )
                )
            reasoning = message.get("reasoning_content")
            if thinking_on and calls and not isinstance(reasoning, str):
                found.append(
                    (
                        index,
                        "3.3 reasoning",
                        "The reasoning_content in the thinking "
                        "mode must be passed back to the API.",
                    )
                )
            for call_id in pending:
                streamed = (streamed_reasoning or {}).get(call_id)
                if streamed is not None and reasoning != streamed:
                    found.append(
                        (
                            index,
                            "3.3 reasoning echo",
                            f"reasoning_content {reasoning!r} differs from the "
                            f"streamed {streamed!r}",
                        )
                    )
                    break
        else:
            extra = set(message) - OPENAI_ASSISTANT_KEYS
            if extra:
                found.append((index, "openai fields", f"unexpected assistant keys {sorted(extra)}"))
            if content is None and not calls:
                found.append((index, "content", "assistant content is null without tool_calls"))
    if answered < len(pending):
        found.append(
            (len(messages) - 1, "3.1 unanswered", f"missing {pending[answered:]!r} at the end")
        )
    return found


class WireChatServer:
    """A threaded HTTP server replying with scripted Chat Completions responses.

    Args:
        dialect: `openai` or `deepseek`: which provider's rules requests are validated
            against and whose error body shape is used.
        context_window: refuse a valid request longer than this many tokens (the server's
            own count, `request_tokens`) with the provider's 400 `context_length_exceeded`;
            None for no limit.
        responder: builds the SSE frames of a reply from a request body when no reply is
            queued (long scripted sessions); None answers an unqueued request with a 500.
    """

    def __init__(
        self,
        dialect: Dialect = "openai",
        *,
        context_window: int | None = None,
        responder: Callable[[Any], Sequence[Frame]] | None = None,
    ) -> None:
        self.dialect: Dialect = dialect
        self.context_window = context_window
        self.responder = responder
        self.overflows = 0
        self.requests: list[RecordedRequest] = []
        self.violations: list[Violation] = []
        self.streamed_reasoning: dict[str, str] = {}
        self._replies: deque[_Reply] = deque()
        self._lock = threading.Lock()
        self._release = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                try:
                    server._serve(self)
                except OSError:
                    return  # the client went away (a cancelled or timed-out read)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._started = False

    @property
    def base_url(self) -> str:
        """The `/v1` root to pass as an adapter's base URL."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def queue_sse(
        self,
        frames: Sequence[Frame],
        *,
        done: bool = True,
        end: Literal["close", "reset"] = "close",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Queue a 200 SSE reply.

        Args:
            frames: chunk objects (sent as `data:` events), comments, raw bytes, stalls.
            done: whether `data: [DONE]` follows the frames.
            end: `close` ends the body cleanly; `reset` aborts the connection (RST).
            headers: extra response headers (e.g. `x-request-id`).
        """
        self._replies.append(_Sse(list(frames), done, end, dict(headers or {})))

    def queue_error(
        self,
        status: int,
        message: str,
        *,
        error_type: str = "invalid_request_error",
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Queue an HTTP error with a `{"error": {message, type, param, code}}` body."""
        body = {"error": {"message": message, "type": error_type, "param": None, "code": code}}
        self.queue_body(status, json.dumps(body).encode(), headers=headers)

    def queue_body(
        self,
        status: int,
        body: bytes,
        *,
        content_type: str = "application/json",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Queue a reply with exactly this status, body and content type."""
        self._replies.append(_Http(status, body, content_type, dict(headers or {})))

    def queue_echo_credentials(self, status: int) -> None:
        """Queue a fault: an HTTP error whose message echoes the request's `authorization`.

        A misbehaving provider or proxy does this; the request is answered without being
        validated (a Basic header from a base URL's credentials is echoed as it came).
        """
        self._replies.append(_EchoCredentials(status))

    def queue_reset(self) -> None:
        """Queue a connection reset before any response byte."""
        self._replies.append(_Reset())

    def take_violations(self) -> list[Violation]:
        """Return the violations so far and forget them (for tests that expect some)."""
        with self._lock:
            taken, self.violations = self.violations, []
        return taken

    def start(self) -> None:
        """Serve in a background thread."""
        self._thread.start()
        self._started = True

    def stop(self) -> None:
        """Release stalls, stop serving, close the socket; fail on any recorded violation.

        Raises:
            AssertionError: if a request broke a rule and the test did not take it.
        """
        self._release.set()
        if self._started:
            self._httpd.shutdown()
            self._thread.join()
        self._httpd.server_close()
        if self.violations:
            lines = "\n".join(f"  {v}" for v in self.violations)
            raise AssertionError(f"the wire server received invalid requests:\n{lines}")

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("content-length", "0"))
        raw = handler.rfile.read(length)
        try:
            body: Any = json.loads(raw or b"null")
        except ValueError:
            body = None
        with self._lock:
            number = len(self.requests)
            self.requests.append(
                RecordedRequest(
                    handler.path, {k.lower(): v for k, v in handler.headers.items()}, body, raw
                )
            )
            reply: _Reply | None = None
            found: list[tuple[int, str, str]] = []
            if self._replies and isinstance(self._replies[0], _EchoCredentials):
                status = self._replies.popleft().status  # type: ignore[union-attr]
                heard = handler.headers.get("authorization", "")
                echo = self._error_body(f"Incorrect API key provided: Authorization: {heard}")
                reply = _Http(status, echo, "application/json", {})
            else:
                found = self._violations_of(handler, body)
                self.violations += [Violation(number, i, rule, detail) for i, rule, detail in found]
                if not found:
                    reply = self._reply_to(body)
        if found:
            self._write_http(
                handler, _Http(400, self._error_body(found[0][2]), "application/json", {})
            )
        elif reply is None:
            body_bytes = self._error_body("wire server: no reply queued")
            self._write_http(handler, _Http(500, body_bytes, "application/json", {}))
        elif isinstance(reply, _Http):
            self._write_http(handler, reply)
        elif isinstance(reply, _Reset):
            _reset(handler)
        elif isinstance(reply, _Sse):
            self._write_sse(handler, reply)

    def _reply_to(self, body: Any) -> _Reply | None:
        """The reply to a valid request: an overflow, the queued one, or the responder's."""
        window = self.context_window
        tokens = request_tokens(body) if window is not None else 0
        if window is not None and tokens > window:
            self.overflows += 1
            error = json.dumps(chat_overflow_error(tokens, window)).encode()
            return _Http(400, error, "application/json", {})
        if self._replies:
            return self._replies.popleft()
        if self.responder is not None:
            return _Sse(list(self.responder(body)), True, "close", {})
        return None

    def _violations_of(
        self, handler: BaseHTTPRequestHandler, body: Any
    ) -> list[tuple[int, str, str]]:
        found = validate_chat_request(
            body, dialect=self.dialect, streamed_reasoning=self.streamed_reasoning
        )
        if not handler.headers.get("authorization", "").startswith("Bearer "):
            found.append((-1, "auth", "no bearer authorization header"))
        if handler.path not in ("/v1/chat/completions", "/chat/completions"):
            found.append((-1, "path", f"unexpected path {handler.path}"))
        return found

    def _error_body(self, message: str) -> bytes:
        error = {"message": message, "type": "invalid_request_error", "param": None, "code": None}
        return json.dumps({"error": error}).encode()

    def _write_http(self, handler: BaseHTTPRequestHandler, reply: _Http) -> None:
        handler.send_response(reply.status)
        handler.send_header("content-type", reply.content_type)
        handler.send_header("content-length", str(len(reply.body)))
        for key, value in reply.headers.items():
            handler.send_header(key, value)
        handler.end_headers()
        handler.wfile.write(reply.body)

    def _write_sse(self, handler: BaseHTTPRequestHandler, reply: _Sse) -> None:
        self._remember_reasoning(reply.frames)
        handler.send_response(200)
        handler.send_header("content-type", "text/event-stream; charset=utf-8")
        for key, value in reply.headers.items():
            handler.send_header(key, value)
        handler.end_headers()
        for frame in reply.frames:
            if isinstance(frame, Stall):
                handler.wfile.flush()
                self._release.wait(timeout=60)
                return
            if isinstance(frame, Pause):
                handler.wfile.flush()
                self._release.wait(timeout=frame.seconds)
                continue
            if isinstance(frame, Comment):
                data = f": {frame.text}\n\n".encode()
            elif isinstance(frame, Raw):
                data = frame.data
            else:
                data = f"data: {json.dumps(frame, ensure_ascii=False)}\n\n".encode()
            handler.wfile.write(data)
            handler.wfile.flush()
        if reply.done:
            handler.wfile.write(b"data: [DONE]\n\n")
        handler.wfile.flush()
        if reply.end == "reset":
            _reset(handler)

    def _remember_reasoning(self, frames: Sequence[Frame]) -> None:
        """Record, per streamed tool-call id, the reasoning streamed in the same reply."""
        reasoning: list[str] = []
        ids: list[str] = []
        for frame in frames:
            if not isinstance(frame, dict):
                continue
            for choice in frame.get("choices", []):
                delta = choice.get("delta", {})
                if isinstance(delta.get("reasoning_content"), str):
                    reasoning.append(delta["reasoning_content"])
                ids += [c["id"] for c in delta.get("tool_calls", []) if c.get("id")]
        if not reasoning:
            return
        with self._lock:
            for call_id in ids:
                self.streamed_reasoning[call_id] = "".join(reasoning)


def _reset(handler: BaseHTTPRequestHandler) -> None:
    """Abort the connection with a TCP RST (SO_LINGER 0), not a clean FIN."""
    connection = handler.connection
    connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    handler.rfile.close()
    connection.close()
