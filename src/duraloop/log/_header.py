"""The session header: metadata kept beside the log, never inside it.

See docs/log.md#the-session-header.
"""

from __future__ import annotations

import msgspec

from ..errors import EventRejectedError
from ._json import is_safe_int

SESSION_FORMAT_VERSION = 0
"""The dsh log format version duraloop reads and writes."""


class SessionHeader(msgspec.Struct, frozen=True, omit_defaults=True, rename="camel"):
    """Session metadata (docs/log.md#the-session-header); on disk with dsh's camelCase keys.

    Args:
        id: the session id.
        created_at: creation time, epoch milliseconds.
        version: the log format version; always 0.
        cwd: the absolute working directory of the session, when it has one.
        parent_session: the id this session was forked from.
        seed_length: the number of leading events inherited from a fork seed.
        origin: `"subagent"` for subagent children, else None.
        delegation_depth: 0 for a top-level session.
        agent_preset: the agent preset id, when one was used.
    """

    id: str
    created_at: int
    version: int = SESSION_FORMAT_VERSION
    cwd: str | None = None
    parent_session: str | None = None
    seed_length: int | None = None
    origin: str | None = None
    delegation_depth: int = 0
    agent_preset: str | None = None

    def __post_init__(self) -> None:
        """Check the numeric fields (docs/log.md#the-session-header).

        Raises:
            EventRejectedError: if `created_at`, `seed_length` or `delegation_depth` is not a
                non-negative safe integer, or the id is empty.
        """
        if not isinstance(self.id, str) or not self.id:
            raise EventRejectedError("session metadata id must be a non-empty string")
        if not is_safe_int(self.created_at):
            raise EventRejectedError(
                "session metadata createdAt must be a non-negative safe integer, "
                f"got {self.created_at!r}"
            )
        if self.seed_length is not None and not is_safe_int(self.seed_length):
            raise EventRejectedError(
                "session metadata seedLength must be a non-negative safe integer, got "
                f"{self.seed_length!r}"
            )
        if not is_safe_int(self.delegation_depth):
            raise EventRejectedError(
                "session metadata delegationDepth must be a non-negative safe integer, "
                f"got {self.delegation_depth!r}"
            )
