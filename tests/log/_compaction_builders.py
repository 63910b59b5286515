"""Builders of compaction events in the notation of compaction-spec (CS, CY, CE, CK, CP).

They return `conformance._builders.Spec`s, so `build(...)` and `append(session, ...)` take them.
"""

from __future__ import annotations

from typing import Any

from conformance._builders import RAW, Spec, txt
from duraloop.log.vocabulary import (
    CHECKPOINT_PREAMBLE,
    COMPACT_PLUGIN,
    COMPACTION_END,
    COMPACTION_PRUNE,
    COMPACTION_START,
    COMPACTION_SUMMARY,
    SOURCE_PLUGIN,
    SUMMARY_CLOSE_TAG,
    SUMMARY_OPEN_TAG,
    SURFACE_REPLACE,
    USER_MESSAGE,
)

ID = "test-compaction"


def _ids(compaction_id: str, command: str | None) -> dict[str, Any]:
    ids: dict[str, Any] = {"compactionId": compaction_id}
    if command is not None:
        ids["sourceCommandId"] = command
    return ids


def CS(turn: int | None, *, cid: str = ID, command: str | None = None) -> Spec:  # noqa: N802
    return RAW(COMPACTION_START, {**_ids(cid, command), "turn": turn})


def CY(  # noqa: N802
    seqs: list[int],
    *,
    cid: str = ID,
    command: str | None = None,
    **extra: Any,
) -> Spec:
    data = {
        **_ids(cid, command),
        "summary": [txt("small checkpoint")],
        "shadowedRange": {"start": seqs[0], "end": seqs[-1]} if seqs else {"start": 0, "end": 0},
        "shadowedSeqs": seqs,
        "shadowedTokenCount": 12,
        "provider": "summary-provider",
        "model": "summary-model",
        **extra,
    }
    return RAW(COMPACTION_SUMMARY, data)


def CE(  # noqa: N802
    turn: int | None, *, cid: str = ID, command: str | None = None, error: str | None = None
) -> Spec:
    data = {**_ids(cid, command), "turn": turn}
    if error is not None:
        data["error"] = error
    return RAW(COMPACTION_END, data)


def CK(  # noqa: N802
    start: int,
    end: int,
    sources: list[int],
    *,
    cid: str = ID,
    command: str | None = None,
) -> Spec:
    """The checkpoint `user/message` replacing the surface span start..end."""
    source = {"kind": SOURCE_PLUGIN, "plugin": COMPACT_PLUGIN, **_ids(cid, command)}
    message = {
        "content": [
            txt(f"{CHECKPOINT_PREAMBLE}\n\n{SUMMARY_OPEN_TAG}"),
            txt("small checkpoint"),
            txt(SUMMARY_CLOSE_TAG),
        ],
        "source": source,
        "role": "user",
        "id": f"checkpoint-{cid}",
    }
    op = {"op": SURFACE_REPLACE, "start": start, "end": end}
    return Spec(USER_MESSAGE, message, op, sources)


def CP(seq: int) -> Spec:  # noqa: N802
    data = {
        "shadowedRange": {"start": seq, "end": seq},
        "shadowedSeqs": [seq],
        "shadowedTokenCount": 9,
    }
    return RAW(COMPACTION_PRUNE, data)
