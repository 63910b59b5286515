"""The view's request checks and response headers (docs/view.md#security).

- every request's `Host` must name this server (DNS rebinding): the address it was reached
  on, `localhost` or `127.0.0.1`, with its port;
- every `/api/*` request carries the server's token, in `X-Duraloop-Token` or (for
  EventSource, which cannot set headers) the `token` query parameter;
- a state-changing request (any method but GET/HEAD) needs the header form and an `Origin`
  equal to the server's own;
- every response gets the CSP and the other headers below; `/api` answers are not cached.
"""

from __future__ import annotations

import json
import secrets
from typing import Final
from urllib.parse import parse_qs

from starlette.types import ASGIApp, Message, Receive, Scope, Send

TOKEN_HEADER: Final = "x-duraloop-token"
CSP: Final = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)
_SECURITY_HEADERS: Final = (
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
)
_LOOPBACK_NAMES: Final = ("localhost", "127.0.0.1", "[::1]")


def allowed_hosts(scope: Scope) -> set[str]:
    """Return the `Host` values that name this server for a request's connection."""
    server = scope.get("server")
    if not server:
        return set()
    host, port = str(server[0]), server[1]
    names = {*_LOOPBACK_NAMES, f"[{host}]" if ":" in host else host}
    hosts = {f"{name}:{port}" for name in names}
    if port == 80:
        hosts |= names
    return hosts


class Guard:
    """ASGI middleware enforcing the checks of the module docstring.

    Args:
        app: the application behind it.
        token: the server's secret.
    """

    def __init__(self, app: ASGIApp, *, token: str) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse a request that fails a check (403 JSON), else serve it with the headers."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {
            key.decode("latin-1"): value.decode("latin-1") for key, value in scope["headers"]
        }
        path: str = scope["path"]
        problem = self._problem(scope, headers, path)
        if problem is not None:
            await _forbidden(send, problem)
            return
        api = path.startswith("/api/") or path == "/api"

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                extra = list(_SECURITY_HEADERS)
                if api:
                    extra.append((b"cache-control", b"no-store"))
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_headers)

    def _problem(self, scope: Scope, headers: dict[str, str], path: str) -> str | None:
        host = headers.get("host", "")
        if host not in allowed_hosts(scope):
            return "the Host header does not name this server (open the URL duraloop printed)"
        if not (path.startswith("/api/") or path == "/api"):
            return None
        given = headers.get(TOKEN_HEADER)
        safe_method = scope["method"] in ("GET", "HEAD")
        if given is None and safe_method:
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            given = (query.get("token") or [None])[0]
        if given is None or not secrets.compare_digest(given.encode(), self.token.encode()):
            where = "header" if not safe_method else "header or ?token="
            return f"missing or wrong token (the {where} of the URL duraloop printed)"
        if not safe_method and headers.get("origin") != f"http://{host}":
            return "a change needs a same-origin request (the Origin header of this server)"
        return None


async def _forbidden(send: Send, problem: str) -> None:
    body = json.dumps({"error": problem}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 403,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"cache-control", b"no-store"),
                *_SECURITY_HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
