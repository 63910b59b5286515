"""The token meter and the compaction lock, folded from a session's events.

See docs/compaction.md#the-estimate and #the-lock.

`CompactionFold` reads events once, in order (`feed`), and keeps what compaction asks
before each step: the priced surface (a mirror of the surface fold with each node's estimated
tokens), the estimated size of the next request, calibrated by the provider's reported usage
(dsh's token meter, compaction-spec 4.1), and the open compaction bracket, which is the
durable lock (compaction-spec 3.1). It is pure: a snapshot stores it (`to_json`), and a
resumed loop continues it from the events after the snapshot.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._event import Event
from ._messages import project
from ._tokens import estimate_header, estimate_message, usage_total
from .vocabulary import (
    ASSISTANT_MESSAGE,
    COMPACT_PLUGIN,
    COMPACTION_END,
    COMPACTION_START,
    COMPACTION_SUMMARY,
    END_SEED,
    REQUEST_HEADER,
    SOURCE_PLUGIN,
    STEP_START,
    SURFACE_APPEND,
    SURFACE_TYPES,
    USER_MESSAGE,
)


@dataclass
class OpenCompaction:
    """A `compaction/start` with no `compaction/end` yet: the held lock.

    Args:
        compaction_id: the transaction's id.
        turn: the owning turn, or None for a standalone compaction between turns.
        source_command_id: the `/compact` command that started it, if any.
        start_seq: the seq of its `compaction/start`.
        summary_seq: the seq of its `compaction/summary`, once written.
        checkpoint_seq: the seq of its checkpoint `user/message`, once written.
    """

    compaction_id: str
    turn: int | None
    source_command_id: str | None
    start_seq: int
    summary_seq: int | None = None
    checkpoint_seq: int | None = None


def is_checkpoint(data: object) -> bool:
    """Whether a `user/message`'s data is a compaction checkpoint (its source names `compact`)."""
    if not isinstance(data, Mapping):
        return False
    source = data.get("source")
    return (
        isinstance(source, Mapping)
        and source.get("kind") == SOURCE_PLUGIN
        and source.get("plugin") == COMPACT_PLUGIN
    )


class CompactionFold:
    """The priced surface, the request estimate and the compaction lock of one session.

    Build it empty and `feed` it the log, or `from_json` a snapshot's fold and feed it the
    events after the snapshot.
    """

    __slots__ = (
        "_anchor",
        "_header",
        "_header_generation",
        "_step_start",
        "bracket",
        "fed",
        "header_price",
        "nodes",
        "prices",
        "total",
    )

    def __init__(self) -> None:
        self.fed = 0
        """How many events of the log have been fed."""
        self.nodes: list[int] = []
        """The surface's node seqs, in order (the surface fold's, mirrored)."""
        self.prices: list[int] = []
        """Each node's estimated tokens, aligned with `nodes`."""
        self.total = 0
        """The sum of `prices`: the surface's estimated tokens."""
        self.header_price = 0
        """The latest `request/header`'s estimated tokens (system prompt and tools)."""
        self.bracket: OpenCompaction | None = None
        """The open compaction of this lifecycle (the live lock), or None."""
        self._header: Any = None
        self._header_generation = 0
        self._step_start = 0
        self._anchor: tuple[int, int, int] | None = None  # (surface, baseline, generation)

    @property
    def header(self) -> Any:
        """The latest `request/header`'s header (a dict), or None before the first request."""
        return self._header

    def feed(self, events: Sequence[Event]) -> None:
        """Fold the events of `events` not fed yet (`events` is the whole log, in order)."""
        for seq in range(self.fed, len(events)):
            self._feed(events[seq])
        self.fed = max(self.fed, len(events))

    def tokens(self) -> int:
        """Return the estimated tokens of the next request: header plus surface.

        Calibrated: after an `assistant/message`, the provider's reported usage for that
        request (when it is larger than the estimate) plus the estimate of what changed on the
        surface since, while the header is the same (compaction-spec 4.1).
        """
        anchor = self._anchor
        if anchor is not None and anchor[2] == self._header_generation:
            surface, baseline, _ = anchor
            return max(0, baseline + self.total - surface)
        return self.header_price + self.total

    def _feed(self, event: Event) -> None:
        kind = event.type
        if kind in SURFACE_TYPES:
            self._surface(event)
            if kind == ASSISTANT_MESSAGE:
                self._anchor_at(event)
            elif kind == USER_MESSAGE and self.bracket is not None and is_checkpoint(event.data):
                self.bracket.checkpoint_seq = event.seq
        elif kind == STEP_START:
            self._step_start = self.total
        elif kind == REQUEST_HEADER:
            header = event.data.get("header")
            if header != self._header:
                self._header = header
                self._header_generation += 1
                self.header_price = estimate_header(header if isinstance(header, dict) else None)
        elif kind == COMPACTION_START:
            data = event.data
            turn = data.get("turn")
            command = data.get("sourceCommandId")
            self.bracket = OpenCompaction(
                compaction_id=str(data.get("compactionId")),
                turn=turn if type(turn) is int else None,
                source_command_id=command if isinstance(command, str) else None,
                start_seq=event.seq,
            )
        elif kind == COMPACTION_SUMMARY:
            if self.bracket is not None:
                self.bracket.summary_seq = event.seq
        elif kind == COMPACTION_END or kind == END_SEED:
            self.bracket = None  # closed, or stale: an orphan of an ended lifecycle

    def _surface(self, event: Event) -> None:
        price = estimate_message(project(event))
        op = event.surface_op
        if op == SURFACE_APPEND:
            self.nodes.append(event.seq)
            self.prices.append(price)
            self.total += price
            return
        if not isinstance(op, dict):  # pragma: no cover - the session refused it
            return
        start = self.nodes.index(op["start"])
        end = self.nodes.index(op["end"])
        self.total += price - sum(self.prices[start : end + 1])
        self.nodes[start : end + 1] = [event.seq]
        self.prices[start : end + 1] = [price]

    def _anchor_at(self, event: Event) -> None:
        price = self.prices[-1] if self.nodes and self.nodes[-1] == event.seq else 0
        surface = self._step_start + price
        heuristic = self.header_price + surface
        self._anchor = (
            surface,
            max(usage_total(event.data.get("usage")), heuristic),
            self._header_generation,
        )

    def to_json(self) -> dict[str, Any]:
        """Return the fold as JSON for a snapshot (the header itself is the loop's)."""
        bracket = self.bracket
        return {
            "fed": self.fed,
            "nodes": list(self.nodes),
            "prices": list(self.prices),
            "headerPrice": self.header_price,
            "stepStart": self._step_start,
            "anchor": None if self._anchor is None else list(self._anchor[:2]),
            "anchored": self._anchor is not None and self._anchor[2] == self._header_generation,
            "bracket": None
            if bracket is None
            else {
                "compactionId": bracket.compaction_id,
                "turn": bracket.turn,
                "sourceCommandId": bracket.source_command_id,
                "startSeq": bracket.start_seq,
                "summarySeq": bracket.summary_seq,
                "checkpointSeq": bracket.checkpoint_seq,
            },
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], header: Any) -> CompactionFold:
        """Rebuild a fold from `to_json`'s output and the latest header it was folded with.

        Raises:
            KeyError, TypeError, ValueError: if `data` is not such an output (a caller
                treats the snapshot's fold as unusable and folds the log instead).
        """
        fold = cls()
        fold.fed = int(data["fed"])
        fold.nodes = [int(seq) for seq in data["nodes"]]
        fold.prices = [int(price) for price in data["prices"]]
        if len(fold.nodes) != len(fold.prices):
            raise ValueError("a compaction fold's nodes and prices differ in length")
        fold.total = sum(fold.prices)
        fold.header_price = int(data["headerPrice"])
        fold._header = header
        fold._header_generation = 1 if header is not None else 0
        fold._step_start = int(data["stepStart"])
        anchor = data["anchor"]
        if anchor is not None:
            generation = fold._header_generation if data["anchored"] else -1
            fold._anchor = (int(anchor[0]), int(anchor[1]), generation)
        bracket = data["bracket"]
        if bracket is not None:
            fold.bracket = OpenCompaction(
                compaction_id=str(bracket["compactionId"]),
                turn=bracket["turn"],
                source_command_id=bracket["sourceCommandId"],
                start_seq=int(bracket["startSeq"]),
                summary_seq=bracket["summarySeq"],
                checkpoint_seq=bracket["checkpointSeq"],
            )
        return fold
