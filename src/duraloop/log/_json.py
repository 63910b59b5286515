r"""Lossless JSON: the values a log may hold (docs/log.md#lossless-json).

A value is lossless when it survives a JSON round trip exactly: `None`, `bool`, `int`,
finite non-negative-zero `float`, `str`, and lists and str-keyed dicts of those. NaN,
infinities and -0.0 are refused, as are tuples-as-keys, sets, bytes and arbitrary objects.
A string (value or key) must be encodable as UTF-8: one holding a lone UTF-16 surrogate
(which a JSON `\ud83d` escape decodes to) is refused. Text that arrives from outside (model
output, tool output) is made well-formed first with `well_formed_text`/`well_formed_json`.
An ASCII string costs one `isascii()`.
"""

from __future__ import annotations

import math
from typing import Any, TypeAlias

from ..errors import EventRejectedError

JsonValue: TypeAlias = Any
"""A lossless JSON value (see the module docstring). `Any` because JSON is recursive."""

JsonObject: TypeAlias = dict[str, Any]
"""A JSON object with string keys."""

MAX_SAFE_INTEGER = 2**53 - 1

MAX_JSON_DEPTH = 256
"""How deep an event's JSON may nest: containers counted, the `data` value itself depth 1.

The one limit for writer and readers (D13): `Session.append` refuses deeper data, and the
stores read a record nested deeper (its line is one level more, the event envelope) as
damaged, never reaching Python's recursion limit in any decoder, check or copy along the
way. 256 keeps every recursive walk (two frames a level at most) far below the interpreter's
default limit of 1000 whatever the caller's stack; dsh's own logs nest a few levels.
"""


def lossless_copy(value: object, *, what: str) -> JsonValue:
    """Check that `value` is lossless JSON and return a detached copy of it.

    Tuples are accepted and become lists. The check and the copy are one pass.

    Args:
        value: any Python value.
        what: names the value in the error message, e.g. `session event "tool/call"`.

    Returns:
        A deep copy made of dicts, lists, str, int, float, bool and None.

    Raises:
        EventRejectedError: if any part is not lossless JSON (the message gives its path), or
            the value is cyclic or nests deeper than `MAX_JSON_DEPTH`.
    """
    try:
        return _fast_copy(value, 1)
    except _NotJson:
        pass
    except RecursionError as exc:
        raise _reject(what, "$ is cyclic or nested too deeply") from exc
    try:
        return _copy(value, what, "$", 1)  # the slow path names the offending part and raises
    except RecursionError as exc:
        raise _reject(what, "$ is cyclic or nested too deeply") from exc


def check_lossless(value: object, *, what: str) -> None:
    """Check that `value` is lossless JSON without copying it.

    Args:
        value: any Python value.
        what: names the value in the error message.

    Raises:
        EventRejectedError: like `lossless_copy`.
    """
    try:
        if _fast_check(value, 1):
            return
    except RecursionError as exc:
        raise _reject(what, "$ is cyclic or nested too deeply") from exc
    lossless_copy(value, what=what)  # names the offending part and raises


def is_lossless(value: object, *, depth: int = 1) -> bool:
    """Return whether `value` is lossless JSON (what `check_lossless` accepts), without raising.

    Args:
        value: any Python value.
        depth: the nesting depth `value` sits at inside an event's data (the data itself is
            1), so `MAX_JSON_DEPTH` counts as it would for the whole payload.

    Returns:
        True when `check_lossless` would accept the data holding `value` at that depth, as far
        as `value` goes; False when it would refuse it (then call it to learn why).
    """
    try:
        return _fast_check(value, depth)
    except RecursionError:
        return False


def well_formed_text(text: str) -> str:
    r"""Return `text` with each lone UTF-16 surrogate replaced by U+FFFD.

    Valid surrogate pairs are joined into their character. Text that is already well formed
    is returned as is, after one `isascii()` (and, for non-ASCII text, one UTF-8 encode).

    Args:
        text: any string, e.g. model or tool output decoded from JSON with `\ud83d` escapes.

    Returns:
        A string that can be encoded as UTF-8.
    """
    if text.isascii() or _utf8_ok(text):
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def well_formed_json(value: JsonValue) -> JsonValue:
    """Return a JSON value whose strings (values and keys) pass `well_formed_text`.

    Containers are rebuilt only when one of their strings changed; anything that is not a
    str, list or dict is returned unchanged.

    Args:
        value: a JSON value, e.g. a stream chunk or a tool result.

    Returns:
        `value` itself when every string is well formed, else a repaired copy.
    """
    kind = type(value)
    if kind is str:
        return well_formed_text(value)
    if kind is dict:
        mapping: dict[Any, Any] = value
        repaired: dict[Any, Any] = {}
        changed = False
        for key, item in mapping.items():
            new_key = well_formed_text(key) if type(key) is str else key
            new_item = well_formed_json(item)
            changed = changed or new_key is not key or new_item is not item
            repaired[new_key] = new_item
        return repaired if changed else value
    if kind is list or kind is tuple:
        items: list[Any] | tuple[Any, ...] = value
        fixed = [well_formed_json(item) for item in items]
        if all(a is b for a, b in zip(items, fixed, strict=True)):
            return value
        return fixed if kind is list else tuple(fixed)
    return value


def _utf8_ok(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _fast_check(value: object, depth: int) -> bool:
    kind = type(value)
    if kind is str:
        return value.isascii() or _utf8_ok(value)  # type: ignore[attr-defined, arg-type]
    if kind in _SCALARS:
        return True
    if kind is dict:
        if depth > MAX_JSON_DEPTH:
            return False
        for key, item in value.items():  # type: ignore[attr-defined]
            if type(key) is not str or not (key.isascii() or _utf8_ok(key)):
                return False
            item_kind = type(item)
            if item_kind is str:
                if not (item.isascii() or _utf8_ok(item)):
                    return False
            elif item_kind not in _SCALARS and not _fast_check(item, depth + 1):
                return False
        return True
    if kind is list:
        if depth > MAX_JSON_DEPTH:
            return False
        items: list[object] = value  # type: ignore[assignment]
        for item in items:
            item_kind = type(item)
            if item_kind is str:
                if not (item.isascii() or _utf8_ok(item)):  # type: ignore[attr-defined, arg-type]
                    return False
            elif item_kind not in _SCALARS and not _fast_check(item, depth + 1):
                return False
        return True
    if kind is float:
        number: float = value  # type: ignore[assignment]
        return math.isfinite(number) and (number != 0.0 or math.copysign(1.0, number) > 0)
    return False


class _NotJson(Exception):  # noqa: N818 - internal control flow, never escapes this module
    """Raised by the fast path; the slow path then finds and names the problem."""


_CONTAINERS = (dict, list, tuple)
_SCALARS = (int, bool, type(None))
"""The scalars that need no check; a str is checked for UTF-8 (`isascii()` first)."""


def _fast_copy(value: object, depth: int) -> JsonValue:
    """Copy without building error paths; raise `_NotJson` at the first doubt."""
    kind = type(value)
    if kind is str:
        if value.isascii() or _utf8_ok(value):  # type: ignore[attr-defined, arg-type]
            return value
        raise _NotJson
    if kind in _SCALARS:
        return value
    if kind in _CONTAINERS and depth > MAX_JSON_DEPTH:
        raise _NotJson
    if kind is dict:
        out: dict[str, Any] = {}
        for key, item in value.items():  # type: ignore[attr-defined]
            if type(key) is not str or not (key.isascii() or _utf8_ok(key)):
                raise _NotJson
            out[key] = item if type(item) in _SCALARS else _fast_copy(item, depth + 1)
        return out
    if kind is list or kind is tuple:
        items: list[object] | tuple[object, ...] = value  # type: ignore[assignment]
        return [item if type(item) in _SCALARS else _fast_copy(item, depth + 1) for item in items]
    if kind is float:
        number: float = value  # type: ignore[assignment]
        if math.isfinite(number) and (number != 0.0 or math.copysign(1.0, number) > 0):
            return number
    raise _NotJson


def _copy(value: object, what: str, path: str, depth: int) -> JsonValue:
    kind = type(value)
    if kind is str:
        text: str = value  # type: ignore[assignment]
        if not (text.isascii() or _utf8_ok(text)):
            raise _reject(what, f"{path} is a string {_surrogate_detail(text)}")
        return value
    if kind is bool or value is None:
        return value
    if kind is int:
        return value
    if kind in _CONTAINERS and depth > MAX_JSON_DEPTH:
        where = path if len(path) <= 120 else f"{path[:60]}...{path[-40:]}"
        raise _reject(
            what, f"{where} is cyclic or nests deeper than {MAX_JSON_DEPTH} levels (MAX_JSON_DEPTH)"
        )
    if kind is dict:
        out: dict[str, Any] = {}
        for key, item in value.items():  # type: ignore[attr-defined]
            if type(key) is not str:
                raise _reject(what, f"{path} has a non-string key {key!r}")
            if not (key.isascii() or _utf8_ok(key)):
                raise _reject(what, f"{path} has a key {key!r} {_surrogate_detail(key)}")
            out[key] = _copy(item, what, f"{path}.{key}", depth + 1)
        return out
    if kind is list or kind is tuple:
        items: list[object] | tuple[object, ...] = value  # type: ignore[assignment]
        return [_copy(item, what, f"{path}[{i}]", depth + 1) for i, item in enumerate(items)]
    if kind is float:
        number: float = value  # type: ignore[assignment]
        if not math.isfinite(number):
            raise _reject(what, f"{path} is {number!r} (not finite)")
        if number == 0.0 and math.copysign(1.0, number) < 0:
            raise _reject(what, f"{path} is -0.0 (negative zero does not survive JSON)")
        return number
    raise _reject(what, f"{path} is a {kind.__name__}, which is not JSON")


def _surrogate_detail(text: str) -> str:
    position = next(i for i, ch in enumerate(text) if "\ud800" <= ch <= "\udfff")
    return (
        f"with a lone UTF-16 surrogate {text[position]!r} at index {position}, which cannot "
        "be encoded as UTF-8; replace it (e.g. with U+FFFD)"
    )


def _reject(what: str, detail: str) -> EventRejectedError:
    return EventRejectedError(f"{what} carries non-JSON-serializable data: {detail}")


def is_safe_int(value: object) -> bool:
    """Return whether `value` is an `int` (not a bool) in the JSON safe range, >= 0."""
    return type(value) is int and 0 <= value <= MAX_SAFE_INTEGER
