"""Lossless JSON: the values a log may hold (session-spec 1.3).

A value is lossless when it survives a JSON round trip exactly: `None`, `bool`, `int`,
finite non-negative-zero `float`, `str`, and lists and str-keyed dicts of those. NaN,
infinities and -0.0 are refused, as are tuples-as-keys, sets, bytes and arbitrary objects.
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
            the value is cyclic or nested deeper than Python's recursion limit.
    """
    try:
        return _fast_copy(value)
    except _NotJson:
        pass
    except RecursionError as exc:
        raise _reject(what, "$ is cyclic or nested too deeply") from exc
    try:
        return _copy(value, what, "$")  # the slow path names the offending part and raises
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
        if _fast_check(value):
            return
    except RecursionError as exc:
        raise _reject(what, "$ is cyclic or nested too deeply") from exc
    lossless_copy(value, what=what)  # names the offending part and raises


def _fast_check(value: object) -> bool:
    kind = type(value)
    if kind in _SCALARS:
        return True
    if kind is dict:
        for key, item in value.items():  # type: ignore[attr-defined]
            if type(key) is not str or (type(item) not in _SCALARS and not _fast_check(item)):
                return False
        return True
    if kind is list:
        items: list[object] = value  # type: ignore[assignment]
        for item in items:
            if type(item) not in _SCALARS and not _fast_check(item):
                return False
        return True
    if kind is float:
        number: float = value  # type: ignore[assignment]
        return math.isfinite(number) and (number != 0.0 or math.copysign(1.0, number) > 0)
    return False


class _NotJson(Exception):  # noqa: N818 - internal control flow, never escapes this module
    """Raised by the fast path; the slow path then finds and names the problem."""


_SCALARS = (str, int, bool, type(None))


def _fast_copy(value: object) -> JsonValue:
    """Copy without building error paths; raise `_NotJson` at the first doubt."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is dict:
        out: dict[str, Any] = {}
        for key, item in value.items():  # type: ignore[attr-defined]
            if type(key) is not str:
                raise _NotJson
            out[key] = item if type(item) in _SCALARS else _fast_copy(item)
        return out
    if kind is list or kind is tuple:
        items: list[object] | tuple[object, ...] = value  # type: ignore[assignment]
        return [item if type(item) in _SCALARS else _fast_copy(item) for item in items]
    if kind is float:
        number: float = value  # type: ignore[assignment]
        if math.isfinite(number) and (number != 0.0 or math.copysign(1.0, number) > 0):
            return number
    raise _NotJson


def _copy(value: object, what: str, path: str) -> JsonValue:
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return value
    if kind is int:
        return value
    if kind is dict:
        out: dict[str, Any] = {}
        for key, item in value.items():  # type: ignore[attr-defined]
            if type(key) is not str:
                raise _reject(what, f"{path} has a non-string key {key!r}")
            out[key] = _copy(item, what, f"{path}.{key}")
        return out
    if kind is list or kind is tuple:
        items: list[object] | tuple[object, ...] = value  # type: ignore[assignment]
        return [_copy(item, what, f"{path}[{i}]") for i, item in enumerate(items)]
    if kind is float:
        number: float = value  # type: ignore[assignment]
        if not math.isfinite(number):
            raise _reject(what, f"{path} is {number!r} (not finite)")
        if number == 0.0 and math.copysign(1.0, number) < 0:
            raise _reject(what, f"{path} is -0.0 (negative zero does not survive JSON)")
        return number
    raise _reject(what, f"{path} is a {kind.__name__}, which is not JSON")


def _reject(what: str, detail: str) -> EventRejectedError:
    return EventRejectedError(f"{what} carries non-JSON-serializable data: {detail}")


def is_safe_int(value: object) -> bool:
    """Return whether `value` is an `int` (not a bool) in the JSON safe range, >= 0."""
    return type(value) is int and 0 <= value <= MAX_SAFE_INTEGER
