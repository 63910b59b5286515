"""The validity check of a whole log: what `duraloop check` reports and every load runs.

One function judges a log (`validate_log`); `check_log` reports it, and the stores' read,
load, list and fork paths refuse what it finds, so every command agrees on a damaged log.
Two kinds of finding: damage (envelope, message shape, surface, relational invariants,
provider pairing), which makes a log unreadable, and closed steps with unanswered tool
calls, which leave a readable log that cannot be continued (only rescued by a fork).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..errors import EventRejectedError, PairingError
from ._checkpoint import SessionCheckpoint
from ._event import Event
from ._header import SessionHeader
from ._invariants import InvariantChecker
from ._lazy_events import PrefixLoader
from ._messages import Message
from ._pairing import check_pairing
from ._pending import UnansweredStep
from ._repair import closers_of
from ._session import Session
from ._turns import TurnScan, open_turn_number, scan_turns, turn_count
from .vocabulary import END_SEED


@dataclass(frozen=True)
class LogCheckReport:
    """The result of `check_log`.

    Args:
        event_count: events in the log.
        turn_count: `turn/start` events.
        open_turn: the number of an open final turn (resume closes it), or None.
        closers_needed: how many closers crash repair would append.
        problems: what is wrong; empty when the log is valid. Damage comes first, then one
            line per entry of `unanswered`.
        unanswered: the steps closed with tool calls unanswered, in log order.
        torn_tail_bytes: the size of a torn tail a load would cut (set by a store's check).
    """

    event_count: int
    turn_count: int
    open_turn: int | None
    closers_needed: int
    problems: list[str] = field(default_factory=list)
    unanswered: list[UnansweredStep] = field(default_factory=list)
    torn_tail_bytes: int = 0

    @property
    def valid(self) -> bool:
        """Whether the log passed every check."""
        return not self.problems

    @property
    def damage(self) -> list[str]:
        """The problems that make the log unreadable (everything but `unanswered`)."""
        return self.problems[: len(self.problems) - len(self.unanswered)]

    @property
    def rescue_seq(self) -> int | None:
        """The `fork --at` seq that rescues a log with `unanswered` steps, else None.

        It keeps every event before the first damaged step's closing event; the fork child
        closes that cut with crash repair's closers.
        """
        return self.unanswered[0].rescue_seq if self.unanswered else None

    def to_json(self) -> dict[str, object]:
        """Return the report as `duraloop check --json` prints it (camelCase keys).

        Returns:
            `{"valid", "events", "turns", "openTurn", "closersNeeded", "tornTailBytes",
            "problems"}`, in that order; the CLI adds the session id and the rescue command.
        """
        return {
            "valid": self.valid,
            "events": self.event_count,
            "turns": self.turn_count,
            "openTurn": self.open_turn,
            "closersNeeded": self.closers_needed,
            "tornTailBytes": self.torn_tail_bytes,
            "problems": self.problems,
        }


def rescue_command(session_id: str, seq: int, *, store: str | None = None) -> str:
    """Return the exact command that rescues a session's history up to `seq` into a fork.

    Args:
        session_id: the damaged session; shell-quoted, and after `--` when it starts with
            `-` (it would otherwise read as an option).
        seq: the fork cut (`--at`).
        store: the `--store` value the session was opened with; None for the default store.

    Returns:
        A shell command line, e.g. `duraloop fork ID --at 24 --store sqlite:db.sqlite`.
    """
    where = "" if store is None else f" --store {shlex.quote(store)}"
    if session_id.startswith("-"):
        return f"duraloop fork --at {seq}{where} -- {shlex.quote(session_id)}"
    return f"duraloop fork {shlex.quote(session_id)} --at {seq}{where}"


def check_log(session_id: str, events: Sequence[Event]) -> LogCheckReport:
    """Check envelope, message shapes, surface, relational invariants and provider pairing.

    An open final turn is valid: the check runs on the log plus the closers crash repair
    would append, so pairing is judged on what a resumed session would send. A step closed
    with calls unanswered is a problem (`unanswered`), with its rescue command.

    Args:
        session_id: for messages.
        events: the stored log, without closers.

    Returns:
        A report; `problems` lists each failure found.
    """
    return validate_log(session_id, events)[0]


def validate_log(
    session_id: str, events: Sequence[Event], *, header: SessionHeader | None = None
) -> tuple[LogCheckReport, Session | None]:
    """Judge a stored log once and return the report and the session it seeds.

    Args:
        session_id: the session id.
        events: the stored log, without closers.
        header: the stored header, given to the returned session.

    Returns:
        The report, and a `Session` seeded with the events plus repair's closers (it ends
        with the next lifecycle's `session/end-seed`), or None when the log is damaged.
    """
    one_pass = _judge_in_one_pass(session_id, events, header)
    if one_pass is not None:
        return one_pass

    def seeded(closers: list[Event]) -> tuple[Session, Sequence[Message]]:
        session = Session(
            session_id, seed=[*events, *closers], header=header, check_invariants=True
        )
        return session, session.messages

    return _judge(session_id, events, seeded, event_count=len(events), turns_before=0)


def _judge_in_one_pass(
    session_id: str, events: Sequence[Event], header: SessionHeader | None
) -> tuple[LogCheckReport, Session | None] | None:
    """`validate_log` of a log the seed accepts, with the seed's checker as the turn scan.

    The seed's invariant checker runs the pending-call tracker over the same events that
    `scan_turns` walks, so its open turn and step, pending calls and steps closed unanswered
    are the scan's, and its closers are appended to the same session (one pass, one
    tracker). Anything the seed refuses, or a turn or step number that is equal to but not
    an `int`, returns None: the two-pass judge then gives every verdict and message.
    """
    scans: list[TurnScan] = []

    def closers(checker: InvariantChecker) -> list[Event]:
        turns = checker.next_turn - 1 + (checker.open_turn is not None)
        scan = TurnScan(
            checker.open_turn,
            checker.open_step,
            checker.requested.pending(),
            list(checker.unanswered),
            turns,
        )
        scans.append(scan)
        return [] if checker.inexact_numbers else closers_of(scan, events)

    try:
        session, added = _seeded_then_closed(session_id, events, closers, header=header)
    except (EventRejectedError, LookupError, TypeError, ValueError):
        return None  # the two-pass judge scans first: its verdict, or its exception, stands
    if session._invariants is None or session._invariants.inexact_numbers:
        return None
    return _verdict(
        session_id,
        events,
        scans[0],
        added,
        session,
        session.messages,
        event_count=len(events),
        turns_before=0,
    )


def validate_after_checkpoint(
    session_id: str,
    checkpoint: SessionCheckpoint,
    tail: Sequence[Event],
    *,
    load_prefix: PrefixLoader,
    header: SessionHeader | None = None,
) -> tuple[LogCheckReport, Session | None]:
    """Judge a log from a verified snapshot checkpoint as `validate_log` judges it whole.

    The checkpoint stands for the prefix it covers, which was valid and at a clean point
    (no turn open, no unanswered history, every message paired) when it was taken; so only
    the tail is scanned, seeded and checked, and pairing is checked on the messages after
    the checkpoint's (on all of them if the tail replaced surface nodes).

    Args:
        session_id: the session id.
        checkpoint: the verified checkpoint of the log's first `checkpoint.count` events.
        tail: the stored events after it, without closers.
        load_prefix: decodes the covered events if something reads them.
        header: the stored header.

    Returns:
        What `validate_log` returns for the whole log; the session is restored
        (`Session.restore`), its prefix not decoded.
    """

    def restored(closers: list[Event]) -> tuple[Session, Sequence[Message]]:
        session = Session.restore(
            session_id,
            checkpoint=checkpoint,
            load_prefix=load_prefix,
            tail=[*tail, *closers],
            header=header,
        )
        messages = session.messages
        if session.surface.replace_generation == checkpoint.replace_generation:
            messages = messages[checkpoint.message_count :]
        return session, messages

    return _judge(
        session_id,
        tail,
        restored,
        event_count=checkpoint.count + len(tail),
        turns_before=checkpoint.next_turn - 1,
    )


def _seeded_then_closed(
    session_id: str,
    events: Sequence[Event],
    closers: Callable[[InvariantChecker], list[Event]],
    *,
    header: SessionHeader | None,
) -> tuple[Session, list[Event]]:
    """Seed a session with `events`, then with the closers its invariant state asks for.

    The same session as `Session(session_id, seed=[*events, *closers], header=header)`
    (the seed's own steps, as `Session.restore` takes them), with the closers chosen from
    the seed's checker between the two parts.

    Returns:
        The session (ending with the next lifecycle's `session/end-seed`) and the closers.

    Raises:
        EventRejectedError: as the seed would.
    """
    session = Session(session_id, header=header)
    session._load_seed(events)
    invariants = session._invariants
    if invariants is None:  # pragma: no cover - a new session checks invariants
        raise TypeError("a judged session checks invariants")
    more = closers(invariants)
    session._load_seed(more, start=len(events))
    if not session.events or session.events[-1].type != END_SEED:
        session.append(END_SEED, {})
    session.first_live_seq = len(events) + len(more)
    return session, more


def _judge(
    session_id: str,
    events: Sequence[Event],
    build: Callable[[list[Event]], tuple[Session, Sequence[Message]]],
    *,
    event_count: int,
    turns_before: int,
) -> tuple[LogCheckReport, Session | None]:
    """Scan `events` (a whole log, or the tail after a clean point), build its session, judge.

    `build(closers)` returns the session seeded with the log plus closers and the messages
    whose pairing is not known yet; `turns_before` counts the turns before `events`.
    """
    closers: list[Event] = []
    try:
        scan = scan_turns(events)
        closers = closers_of(scan, events)
        session, unchecked = build(closers)
    except EventRejectedError as exc:
        turns = turns_before + turn_count(events)
        report = _report(events, [str(exc)], [], closers, event_count=event_count, turns=turns)
        return report, None
    return _verdict(
        session_id,
        events,
        scan,
        closers,
        session,
        unchecked,
        event_count=event_count,
        turns_before=turns_before,
    )


def _verdict(
    session_id: str,
    events: Sequence[Event],
    scan: TurnScan,
    closers: list[Event],
    session: Session,
    unchecked: Sequence[Message],
    *,
    event_count: int,
    turns_before: int,
) -> tuple[LogCheckReport, Session | None]:
    """Judge a scanned and seeded log: pairing, then the steps closed unanswered."""
    problems: list[str] = []
    unanswered = scan.unanswered
    judged: Session | None = session
    if not unanswered:
        # A step closed unanswered is what pairing would report; it is named below. A turn
        # paused on an approval ends with its step's calls partly answered: only the
        # messages before that step's assistant message must pair (docs/approvals.md).
        paused = scan.open_turn is not None and not closers  # repair keeps only a pause open
        waiting = _paused_tail(unchecked) if paused else 0
        try:
            check_pairing(unchecked[: len(unchecked) - waiting])
        except PairingError as exc:
            problems.append(f"provider pairing: {exc}")
            judged = None
        else:  # these messages pair: the loop's check need not walk them again
            generation = session.surface.replace_generation
            session.paired_messages = (len(session.messages) - waiting, generation)
    for index, step in enumerate(unanswered):
        rescue = (
            f": the session cannot be continued; rescue the history before it with "
            f"`{rescue_command(session_id, step.rescue_seq)}`"
            if index == 0
            else ""
        )
        problems.append(step.describe() + rescue)
    turns = turns_before + scan.turn_count
    return _report(
        events, problems, unanswered, closers, event_count=event_count, turns=turns
    ), judged


def _report(
    events: Sequence[Event],
    problems: list[str],
    unanswered: list[UnansweredStep],
    closers: list[Event],
    *,
    event_count: int,
    turns: int,
) -> LogCheckReport:
    return LogCheckReport(
        event_count=event_count,
        turn_count=turns,
        open_turn=open_turn_number(events),
        closers_needed=len(closers),
        problems=problems,
        unanswered=list(unanswered),
    )


def _paused_tail(messages: Sequence[Message]) -> int:
    """Return how many trailing messages belong to a paused step (its assistant message on)."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "assistant":
            return len(messages) - index
    return 0
