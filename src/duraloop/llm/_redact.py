"""Secret redaction at the provider adapters' boundary: nothing a provider says leaks a key.

A provider (or a proxy in front of it) may echo the request's `Authorization`/`x-api-key`
header in an error body, and a base URL may carry credentials (`http://user:pw@host/v1`)
that the adapters' own messages name. Every failure leaving an adapter passes through ONE
`SecretRedactor`, which knows the configured secrets: `redacted_stream` wraps the adapter's
stream, replaces each secret with `[redacted]` in every exception of the chain it raises
(`LlmError` message and request id, the SDK's and the transport's exception texts) and in a
`finish` chunk's failure. So the `LlmFailure` the loop logs (`assistant/chunk`,
`llm/retry`, `turn/end`), the exception a caller sees and what the CLI prints all hold the
secret's placeholder, never the secret. Model output (text, reasoning, tool calls) is not
rewritten.

The secrets: the API key; the base URL's user-info (`user:pw`, raw and percent-decoded),
its password alone, and the Basic token the HTTP client sends for it (base64 of
`user:pw`). A secret shorter than 4 characters is not searched for in text (no real key is
that short, and every `k` in a message would go); the base URL's credentials are still
redacted as a whole (`user:pw`).
"""

from __future__ import annotations

import base64
import re
from collections.abc import AsyncIterator, Iterable
from contextlib import aclosing
from typing import Final
from urllib.parse import unquote, urlsplit

from ..errors import LlmError
from ..log.vocabulary import FINISH
from ._chunks import StreamChunk

REDACTED: Final = "[redacted]"
MIN_SECRET_CHARS: Final = 4
_MAX_CHAIN: Final = 16


def url_secrets(url: str) -> list[str]:
    """Return the credentials a URL carries, in every form an HTTP client may send them.

    Args:
        url: a base URL, e.g. `http://user:pw@host/v1`.

    Returns:
        The user-info (`user:pw`) raw and percent-decoded, the password raw and decoded,
        and the base64 Basic token of the decoded user-info; empty without credentials.
    """
    netloc = urlsplit(url).netloc
    if "@" not in netloc:
        return []
    userinfo = netloc.rpartition("@")[0]
    found: list[str] = []
    for info in dict.fromkeys((userinfo, unquote(userinfo))):
        found.append(info)
        user, colon, password = info.partition(":")
        if colon:
            found.append(password)
        found.append(base64.b64encode(info.encode("utf-8", "surrogatepass")).decode("ascii"))
    return found


class SecretRedactor:
    """Replace configured secrets in text with `[redacted]`.

    Args:
        secrets: the API key and any other configured secret (empty strings are ignored).
        base_url: the adapter's base URL; its credentials are secrets too.
    """

    def __init__(self, secrets: Iterable[str], *, base_url: str | None = None) -> None:
        found = [s for s in secrets if len(s) >= MIN_SECRET_CHARS]
        if base_url is not None:
            credentials = url_secrets(base_url)
            found += [s for s in credentials if len(s) >= MIN_SECRET_CHARS or ":" in s]
        unique = sorted(set(found), key=len, reverse=True)  # a longer secret is replaced whole
        self._pattern = re.compile("|".join(map(re.escape, unique))) if unique else None

    def text(self, value: str) -> str:
        """Return `value` with every secret replaced by `[redacted]`.

        Args:
            value: any text.

        Returns:
            The text, unchanged when it holds no secret.
        """
        if self._pattern is None:
            return value
        return self._pattern.sub(REDACTED, value)

    def scrub(self, exc: BaseException) -> None:
        """Redact, in place, the text of `exc` and of every exception it was raised from.

        An `LlmError` gets its `message`, `request_id` and text redacted; any other
        exception its string arguments and a string `message` attribute (the SDKs' errors
        keep one). The chain is followed through `__cause__` and `__context__`.

        Args:
            exc: the exception about to leave an adapter.
        """
        current: BaseException | None = exc
        seen: set[int] = set()
        while current is not None and id(current) not in seen and len(seen) < _MAX_CHAIN:
            seen.add(id(current))
            current.args = tuple(
                self.text(arg) if isinstance(arg, str) else arg for arg in current.args
            )
            if isinstance(current, LlmError) and current.request_id is not None:
                current.request_id = self.text(current.request_id)
            fields = getattr(current, "__dict__", {})  # the SDKs' errors keep a `message`
            if isinstance(fields.get("message"), str):
                fields["message"] = self.text(fields["message"])
            current = current.__cause__ or current.__context__

    def chunk(self, chunk: StreamChunk) -> StreamChunk:
        """Return `chunk` with a `finish` failure's message and request id redacted.

        Args:
            chunk: any stream chunk; only a `finish` with a failure can change.

        Returns:
            The same chunk, or a copy with the failure's text redacted.
        """
        if chunk["type"] != FINISH or self._pattern is None:
            return chunk
        failure = chunk["reason"].get("failure")
        if not failure:
            return chunk
        clean = {
            key: self.text(value) if isinstance(value, str) else value
            for key, value in failure.items()
        }
        if clean == failure:
            return chunk
        return {**chunk, "reason": {**chunk["reason"], "failure": clean}}


async def redacted_stream(
    chunks: AsyncIterator[StreamChunk], redactor: SecretRedactor
) -> AsyncIterator[StreamChunk]:
    """Yield an adapter's chunks, redacting secrets from failures on their way out.

    Args:
        chunks: the adapter's own stream (an async generator; closed when this one is).
        redactor: the adapter's redactor.

    Yields:
        The chunks, a `finish` failure redacted.

    Raises:
        Exception: whatever the adapter raised, its text (and its chain's) redacted.
    """
    async with aclosing(chunks) as stream:  # type: ignore[type-var]
        try:
            async for chunk in stream:
                yield redactor.chunk(chunk)
        except Exception as exc:
            redactor.scrub(exc)
            raise
