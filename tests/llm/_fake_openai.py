"""A real Chat Completions server on 127.0.0.1 for offline adapter tests (llm-spec 5.4).

It speaks just enough of the protocol: `POST /v1/chat/completions` records the request JSON
and replies with the next queued reply, either an SSE stream of chunk objects (optionally
without the closing `[DONE]`) or an HTTP error with a JSON body. A real socket, not a mock,
so the SDK's own transport, SSE decoding and retry settings are exercised.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class RecordedRequest:
    """One request the server received."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    raw: bytes


@dataclass
class _Reply:
    status: int
    events: list[dict[str, Any]] = field(default_factory=list)
    done: bool = True
    body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)


def chunk_event(
    *,
    content: str | None = None,
    reasoning: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    finish_reason: str | None = None,
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
        "model": "gpt-test",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def usage_event(
    prompt_tokens: int, completion_tokens: int, *, cached_tokens: int | None = None
) -> dict[str, Any]:
    """Build the trailing `choices: []` usage chunk."""
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if cached_tokens is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
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


class FakeOpenAIServer:
    """A threaded HTTP server replying with queued Chat Completions responses."""

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self._replies: deque[_Reply] = deque()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                raw = self.rfile.read(length)
                server.requests.append(
                    RecordedRequest(
                        self.path,
                        {k.lower(): v for k, v in self.headers.items()},
                        json.loads(raw or b"{}"),
                        raw,
                    )
                )
                reply = (
                    server._replies.popleft()
                    if server._replies
                    else _Reply(500, body={"error": {"message": "fake server: no reply queued"}})
                )
                if reply.body is not None:
                    payload = json.dumps(reply.body).encode()
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(payload)))
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                self.send_response(reply.status)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
                for event in reply.events:
                    self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                    self.wfile.flush()
                if reply.done:
                    self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def base_url(self) -> str:
        """The `/v1` root to pass as the SDK's base URL."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def queue_sse(self, events: list[dict[str, Any]], *, done: bool = True) -> None:
        """Queue a 200 SSE reply; `done=False` ends the body without `[DONE]`."""
        self._replies.append(_Reply(200, events=events, done=done))

    def queue_error(
        self,
        status: int,
        message: str,
        *,
        error_type: str = "error",
        headers: dict[str, str] | None = None,
    ) -> None:
        """Queue an HTTP error reply with an OpenAI-style `{"error": {...}}` body."""
        body = {"error": {"message": message, "type": error_type, "code": None}}
        self._replies.append(_Reply(status, body=body, headers=headers or {}))

    def start(self) -> None:
        """Serve in a background thread."""
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()
