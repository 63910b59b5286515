"""A spec-strict, incremental Server-Sent Events parser (WHATWG HTML, "event stream").

The Chat Completions adapters read the response body themselves, as raw bytes, instead of
through an SDK's SSE iterator, because the SDKs hide what duraloop must see
(docs/providers.md#chat-completions-wire, #sdks-and-transport): the literal `[DONE]` payload (a
stream that ends without it was cut), comment lines such as `: keep-alive` (transport activity, not
silence), and the exact byte where a payload stopped being JSON.

Framing follows the HTML Living Standard, section 9.2.6 "Interpreting an event stream":
the bytes are UTF-8 (invalid sequences become U+FFFD; one leading BOM is dropped); a line
ends at CRLF, LF or CR, and nothing else (not U+2028, which a JSON string may hold raw);
an empty line dispatches the pending event if its data buffer is not empty; a line that
starts with `:` is a comment; `field: value` loses one space after the colon; each `data`
line appends its value and a line feed, and the last line feed is removed at dispatch;
`event` sets the type (default `message`); `id` sets the last event id unless the value
holds U+0000; `retry` with ASCII digits only sets the reconnection time; other fields are
ignored. At the end of the stream an event not dispatched by an empty line is discarded.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from typing import Final, TypeAlias

_LINE_END: Final = re.compile(r"\r\n|\r|\n")
_BOM: Final = "\ufeff"


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One dispatched event.

    Args:
        data: the joined `data` lines (without the final newline); never empty.
        event: the event type; `message` when no `event` field was given.
        last_event_id: the last event id seen so far in the stream (`""` if none).
    """

    data: str
    event: str = "message"
    last_event_id: str = ""


@dataclass(frozen=True, slots=True)
class SseComment:
    """One comment line (`: text`); a sign of life, never an event.

    Args:
        text: the line after the colon, one leading space removed.
    """

    text: str


SseItem: TypeAlias = SseEvent | SseComment
"""What the parser reports: a dispatched event or a comment, in stream order."""


class SseParser:
    """Turn response body bytes into events and comments, one chunk of bytes at a time.

    Chunks may split anywhere, even inside a UTF-8 sequence or between the CR and LF of a
    CRLF. One parser per response.

    Attributes:
        retry_ms: the last valid `retry` field, in milliseconds, or None (reported only;
            duraloop never reconnects a model stream, its retry policy makes a new request).
    """

    __slots__ = ("_data", "_decoder", "_event", "_last_id", "_pending", "_started", "retry_ms")

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""  # text after the last complete line
        self._started = False  # whether the BOM check ran
        self._data: list[str] = []
        self._event = ""
        self._last_id = ""
        self.retry_ms: int | None = None

    def feed(self, chunk: bytes) -> list[SseItem]:
        """Parse the next bytes of the body.

        Args:
            chunk: any number of bytes, including none.

        Returns:
            The events dispatched and the comments completed by these bytes, in order.
        """
        text = self._decoder.decode(chunk)
        return self._lines(text, final=False)

    def close(self) -> list[SseItem]:
        """Finish the stream: complete a last CR-terminated line, drop an undispatched event.

        Returns:
            The events and comments completed by the end of the stream (a line ended by a
            lone CR just before the end); an event without its closing empty line is
            discarded, as the standard requires.
        """
        text = self._decoder.decode(b"", final=True)
        items = self._lines(text, final=True)
        self._pending = ""
        self._data = []
        self._event = ""
        return items

    def _lines(self, text: str, *, final: bool) -> list[SseItem]:
        if not self._started and (text or final):
            self._started = True
            if text.startswith(_BOM):
                text = text[1:]
        buffer = self._pending + text if self._pending else text
        items: list[SseItem] = []
        start = 0
        end = len(buffer)
        while start < end:
            match = _LINE_END.search(buffer, start)
            if match is None:
                break
            if match.end() == end and match.group() == "\r" and not final:
                break  # maybe the first half of a CRLF: wait for the next byte
            self._line(buffer[start : match.start()], items)
            start = match.end()
        self._pending = buffer[start:]
        return items

    def _line(self, line: str, items: list[SseItem]) -> None:
        if not line:
            if self._data:
                data = "\n".join(self._data)
                items.append(SseEvent(data, self._event or "message", self._last_id))
            self._data = []
            self._event = ""
            return
        if line[0] == ":":
            text = line[1:]
            items.append(SseComment(text[1:] if text.startswith(" ") else text))
            return
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\x00" not in value:
                self._last_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self.retry_ms = int(value)
