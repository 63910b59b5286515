"""style rule D11/D13: one exception tree under `DuraloopError`, every class documented.

Callers catch `DuraloopError` to catch everything duraloop raises, so every exception class
in `duraloop.errors` must derive from it; the control-flow signal `TurnCancelled` is the
deliberate exception. The class docstrings say when each is raised.
"""

from __future__ import annotations

import inspect

import pytest

import duraloop.errors as errors
from duraloop.errors import CorruptLogError, DuraloopError

ERROR_CLASSES = [
    obj
    for _, obj in sorted(vars(errors).items())
    if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == errors.__name__
]


def test_errors_module_defines_exceptions() -> None:
    assert DuraloopError in ERROR_CLASSES
    assert len(ERROR_CLASSES) >= 10


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda c: c.__name__)
def test_error_derives_from_duraloop_error(cls: type[BaseException]) -> None:
    assert issubclass(cls, DuraloopError)


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda c: c.__name__)
def test_error_docstring_says_when_it_is_raised(cls: type[BaseException]) -> None:
    doc = inspect.getdoc(cls) or ""
    assert doc, f"{cls.__name__} has no docstring"
    assert "Raised" in doc.splitlines()[0], f"{cls.__name__}: {doc.splitlines()[0]!r}"


def test_errors_all_lists_every_error() -> None:
    assert sorted(errors.__all__) == sorted(c.__name__ for c in ERROR_CLASSES)


def test_turn_cancelled_is_a_signal_not_an_error() -> None:
    from duraloop.tools._signal import TurnCancelled

    assert not issubclass(TurnCancelled, DuraloopError)


def test_corrupt_log_error_names_its_file_in_parentheses_without_a_line() -> None:
    assert str(CorruptLogError("damaged; nothing was changed", path="/s/x.jsonl")) == (
        "damaged; nothing was changed (in /s/x.jsonl)"
    )
    assert str(CorruptLogError("bad event", path="p", line=2)) == "bad event at line 2 of p"
