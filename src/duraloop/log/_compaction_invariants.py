"""The compaction bracket invariants: who owns a compaction, and what it may cross.

See docs/log.md#invariants (compaction-spec 3.2; dsh's compaction invariant, cases C46-C49).

A summary compaction is the bracket `compaction/start` … `compaction/summary` … checkpoint
`user/message` … `compaction/end`. Its owner (`turn`) is the open turn's number, appended
while that turn is open, or null for a standalone compaction between turns. A bracket is not
nested, holds at most one summary, keeps one `compactionId` and `sourceCommandId`, and is
never crossed by `turn/start` or `turn/end`; a successful end follows its summary; a
checkpoint names the open bracket. `session/end-seed` forgets an open bracket: it was left by
an ended process (stale), so a new one may start and the old turn may be closed. While a seed
is replayed, the turn boundaries between a stale bracket's start and the end-seed that makes
it stale are accepted (dsh's inherited repair closers); the end of a seed counts as that
end-seed, since the session appends one after it. A replayed checkpoint outside any bracket is
accepted too (a replace applies whether or not a bracket encloses it, compaction-spec 11.1; dsh's
own fixtures hold one, written without the optional compaction invariant); a live one is not.

`CompactionInvariants` is one part of `InvariantChecker`'s fold: `check` raises without
changing state, `commit` advances it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, NoReturn

from ..errors import InvariantError
from ._compaction_fold import is_checkpoint
from ._event import Event
from ._json import is_safe_int
from .vocabulary import (
    COMPACTION_END,
    COMPACTION_START,
    COMPACTION_SUMMARY,
    END_SEED,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
)

WATCHED: Final = frozenset(
    {COMPACTION_START, COMPACTION_SUMMARY, COMPACTION_END, END_SEED, USER_MESSAGE}
    | {TURN_START, TURN_END}
)
"""The event types `CompactionInvariants` checks and folds; it ignores every other type."""

_MISSING: Final[Any] = object()
"""A key absent from an event's data (dsh's `undefined`, unlike JSON null)."""


@dataclass(frozen=True, slots=True)
class OpenBracket:
    """A `compaction/start` with no `compaction/end` yet.

    Args:
        compaction_id: its `compactionId`.
        source_command_id: its `sourceCommandId`, or None when absent.
        start_seq: the seq of the `compaction/start`.
        turn: the owner: the open turn's number, or None for a standalone compaction.
        summarized: whether its `compaction/summary` was appended.
    """

    compaction_id: str
    source_command_id: str | None
    start_seq: int
    turn: Any
    summarized: bool = False


def is_checkpoint_event(event: Event) -> bool:
    """Return whether `event` is a compaction checkpoint (compaction-spec 2.3).

    A checkpoint is a replacing `user/message` (a `surfaceOp`) whose data `is_checkpoint`:
    its `source` is `{kind: "plugin", plugin: "compact", ...}`.
    """
    return (
        event.type == USER_MESSAGE
        and isinstance(event.surface_op, dict)
        and is_checkpoint(event.data)
    )


class CompactionInvariants:
    """Check the compaction brackets of a log, event by event (see the module docstring)."""

    __slots__ = ("_seed", "_seed_start", "open")

    def __init__(self) -> None:
        self.open: OpenBracket | None = None
        """The open bracket, or None."""
        self._seed: Sequence[Event] | None = None
        self._seed_start = 0

    def begin_seed(self, seed: Sequence[Event], start: int = 0) -> None:
        """Say that `seed` (its first event has seq `start`) is being replayed, until `end_seed`.

        While it is, a turn boundary crossing an open bracket is accepted when the bracket is
        stale within the seed: no `compaction/start` or `compaction/end` comes after the
        boundary before a `session/end-seed` or the end of the seed.
        """
        self._seed, self._seed_start = seed, start

    def end_seed(self) -> None:
        """End the replay `begin_seed` began: every later event is a live append."""
        self._seed = None

    def check(self, event: Event, open_turn: int | None) -> None:
        """Raise if `event` would break a bracket rule; change nothing.

        Args:
            event: the candidate event.
            open_turn: the number of the turn open before it, or None.

        Raises:
            InvariantError: with dsh's wording, e.g. "turn/end cannot cross an open
                compaction for turn 1", "compaction/start is standalone but turn 1 is open",
                "successful compaction/end requires one compaction/summary".
        """
        kind = event.type
        bracket = self.open
        if kind == TURN_START or kind == TURN_END:
            if bracket is not None and not self._stale_in_seed(event):
                owner = _owner(bracket, "compaction for turn ")
                _fail(event, f"{kind} cannot cross an open {owner}")
            return
        if kind == USER_MESSAGE:
            if is_checkpoint_event(event):
                self._check_checkpoint(event)
            return
        if kind == END_SEED:
            return
        data = event.data if isinstance(event.data, dict) else {}
        compaction_id = data.get("compactionId", _MISSING)
        source_command_id = data.get("sourceCommandId", _MISSING)
        _require_id(event, compaction_id, f"{kind} compactionId")
        if source_command_id is not _MISSING:
            _require_id(event, source_command_id, f"{kind} sourceCommandId")
        if kind == COMPACTION_START:
            if bracket is not None:
                _fail(
                    event, f"compaction/start while {_owner(bracket, 'turn ')} is still compacting"
                )
            _check_owner(event, data.get("turn", _MISSING), open_turn)
            return
        if bracket is None:
            _fail(event, f"{kind} has no matching compaction/start")
        _match(event, kind, compaction_id, source_command_id, bracket)
        if kind == COMPACTION_SUMMARY:
            _check_owner(event, bracket.turn, open_turn)
            if bracket.summarized:
                _fail(event, "compaction/summary repeated within one compaction")
            _check_shadowed(event, data)
        elif kind == COMPACTION_END:
            owner = data.get("turn", _MISSING)
            if not _same(owner, bracket.turn):
                _fail(
                    event,
                    f"compaction/end owner {_js(owner)} does not match compaction/start owner "
                    f"{_js(bracket.turn)}",
                )
            _check_owner(event, bracket.turn, open_turn)
            if "error" not in data and not bracket.summarized:
                _fail(event, "successful compaction/end requires one compaction/summary")

    def commit(self, event: Event) -> None:
        """Advance the state for an event that passed `check()`."""
        kind = event.type
        if kind == COMPACTION_START:
            data = event.data
            source = data.get("sourceCommandId")
            self.open = OpenBracket(
                data["compactionId"],
                source if isinstance(source, str) else None,
                event.seq,
                data.get("turn"),
            )
        elif kind == COMPACTION_SUMMARY and self.open is not None:
            self.open = replace(self.open, summarized=True)
        elif kind == COMPACTION_END or kind == END_SEED:
            self.open = None

    def _check_checkpoint(self, event: Event) -> None:
        source = event.data["source"]
        compaction_id = source.get("compactionId", _MISSING)
        source_command_id = source.get("sourceCommandId", _MISSING)
        _require_id(event, compaction_id, "compaction checkpoint compactionId")
        if source_command_id is not _MISSING:
            _require_id(event, source_command_id, "compaction checkpoint sourceCommandId")
        bracket = self.open
        if bracket is None:
            if self._seed is not None:
                return  # a replayed checkpoint of a producer without brackets (spec 11.1)
            _fail(event, "compaction checkpoint has no matching compaction/start")
        _match(event, "compaction checkpoint", compaction_id, source_command_id, bracket)

    def _stale_in_seed(self, event: Event) -> bool:
        seed = self._seed
        if seed is None:
            return False
        for index in range(event.seq - self._seed_start + 1, len(seed)):
            kind = seed[index].type
            if kind == END_SEED:
                return True
            if kind == COMPACTION_START or kind == COMPACTION_END:
                return False
        return True  # the session appends the end-seed right after its seed


def _fail(event: Event, detail: str) -> NoReturn:
    raise InvariantError(f"invariant violated at seq {event.seq}: {detail}")


def _js(value: object) -> str:
    """Render a value as dsh's messages do (`String(value)`)."""
    if value is _MISSING:
        return "undefined"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _owner(bracket: OpenBracket, numbered: str) -> str:
    if bracket.turn is None:
        return "standalone compaction"
    return f"{numbered}{_js(bracket.turn)}"


def _same(left: object, right: object) -> bool:
    """JavaScript's `===` on JSON values, as far as owners and seqs go (true is not 1)."""
    if isinstance(left, bool) or isinstance(right, bool):
        return left is right
    return left == right


def _require_id(event: Event, value: object, label: str) -> None:
    if not isinstance(value, str) or not value:
        _fail(event, f"{label} must be a non-empty string")


def _match(
    event: Event,
    label: str,
    compaction_id: object,
    source_command_id: object,
    bracket: OpenBracket,
) -> None:
    expected_id = bracket.compaction_id
    if compaction_id != expected_id:
        _fail(event, f"{label} id {compaction_id} does not match compaction/start id {expected_id}")
    expected = _MISSING if bracket.source_command_id is None else bracket.source_command_id
    if source_command_id != expected:
        _fail(
            event,
            f"{label} sourceCommandId {_js(source_command_id)} does not match compaction/start "
            f"sourceCommandId {_js(expected)}",
        )


def _check_owner(event: Event, owner: object, open_turn: object) -> None:
    """A numbered owner needs its turn open; a standalone one needs no turn open."""
    kind = event.type
    if owner is None:
        if open_turn is not None:
            _fail(event, f"{kind} is standalone but turn {_js(open_turn)} is open")
        return
    if open_turn is None:
        _fail(event, f"{kind} for turn {_js(owner)} appended outside any open turn")
    if not _same(owner, open_turn):
        _fail(event, f"{kind} names turn {_js(owner)} but open turn is {_js(open_turn)}")


def _check_shadowed(event: Event, data: dict[str, Any]) -> None:
    seqs = data.get("shadowedSeqs")
    if not isinstance(seqs, list) or not seqs:
        _fail(event, "compaction/summary shadowedSeqs must be non-empty")
    shadowed = data.get("shadowedRange")
    if (
        not isinstance(shadowed, dict)
        or not _same(seqs[0], shadowed.get("start", _MISSING))
        or not _same(seqs[-1], shadowed.get("end", _MISSING))
    ):
        _fail(event, "compaction/summary shadowedRange must match the first and last shadowedSeqs")
    if not is_safe_int(data.get("shadowedTokenCount")):
        _fail(event, "compaction/summary shadowedTokenCount must be a non-negative safe integer")
