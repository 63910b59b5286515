"""Bounds on the untrusted strings the API returns (docs/view.md#sizes)."""

from __future__ import annotations

from typing import Any, Final

from duraloop.log import Event, event_to_json

MAX_EVENT_STRING_CHARS: Final = 100_000
"""Most characters of one string of an event the API returns; the rest is cut, marked."""
MAX_ARGUMENTS_CHARS: Final = 20_000
"""Most characters of a pending ask's arguments."""


def cut(text: str, limit: int = MAX_EVENT_STRING_CHARS) -> str:
    """Return `text`, cut past `limit` characters and marked `…[cut N chars]`.

    Args:
        text: untrusted text.
        limit: the most characters kept.

    Returns:
        The text unchanged when it fits, else its first `limit` characters and the marker.
    """
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…[cut {len(text) - limit} chars]"


def cut_json(value: Any, limit: int = MAX_EVENT_STRING_CHARS) -> Any:
    """Return a JSON value with every string in it cut as `cut` does (keys too)."""
    if isinstance(value, str):
        return cut(value, limit)
    if isinstance(value, list):
        return [cut_json(item, limit) for item in value]
    if isinstance(value, dict):
        return {cut(str(key), limit): cut_json(item, limit) for key, item in value.items()}
    return value


def event_json(event: Event) -> dict[str, Any]:
    """Return an event as stored (dsh key names), each string cut (docs/view.md#sizes)."""
    result: dict[str, Any] = cut_json(event_to_json(event))
    return result
