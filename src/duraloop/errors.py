"""Every exception duraloop raises, under one root.

```
DuraloopError
├── UsageError (ValueError)             your code or configuration must change
│   ├── ApprovalError                   a paused turn waits, or a decision no call waits for
│   ├── BudgetExceededError             a session budget is spent: no turn starts
│   ├── ConfigError                     a bad option value or a missing setting
│   ├── DuplicateMessageError           an inbox message whose id is already pending
│   ├── McpServerError                  an MCP server that would not start, answer or list tools
│   └── ToolDefinitionError             a tool that cannot be registered
├── EventRejectedError (ValueError)     an append or seed that breaks a log rule
│   └── InvariantError                  a turn/step/tool relation broken (docs/log.md#invariants)
├── PairingError                        derived messages a provider would reject
│   ├── UnpairedHistoryError            closed history with unanswered calls: fork to rescue
│   └── WirePairingError                an unpaired provider payload (a duraloop bug)
├── SessionForkError                    a fork boundary or id that cannot be used
├── CompactionError                     a compaction that could not run or did not finish
├── CorruptLogError                     a stored log whose committed region is damaged
├── SessionFormatUnsupportedError       an intact log this build cannot interpret
├── StoreError                          persistence failed or was refused
│   ├── SessionNotFoundError (KeyError)
│   ├── SessionExistsError
│   ├── SessionLockedError              another process writes this session
│   ├── AppendConflictError             a batch whose first seq is not the stored next seq
│   └── WriterFencedError               this writer's lease was taken over: it writes no more
├── LlmError                            a model request failed (code + retryable)
└── ToolError                           raised by a tool body: an error result with a code
```
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._error_root import DuraloopError as DuraloopError
from ._pairing_errors import PairingError as PairingError
from ._pairing_errors import UnpairedHistoryError as UnpairedHistoryError
from ._pairing_errors import WirePairingError as WirePairingError


class UsageError(DuraloopError, ValueError):
    """Raised when the caller's code or configuration must change (a bad argument)."""


class ConfigError(UsageError):
    """Raised when an option value is invalid or a required setting is missing."""


class ApprovalError(UsageError):
    """Raised when a turn cannot go on for an approval, or a decision finds no call waiting.

    A paused turn waits until its ask is decided (`AgentLoop.decide`, `duraloop approve`); a
    decision for a call that is not waiting is refused (docs/approvals.md). Nothing is appended.
    """


class BudgetExceededError(UsageError):
    """Raised when a turn would start in a session whose session budget is spent.

    Nothing is appended (no `turn/start`); the queued prompt, if any, stays queued. Raise the
    budget (`LoopConfig.session_budget`, the CLI's `--max-*-per-session`) to go on
    (docs/loop.md#budgets). A turn budget never raises: its turn ends `blocked`.
    """


class DuplicateMessageError(UsageError):
    """Raised when a message sent to the inbox has the id of a message already pending.

    Message ids are unique across both inbox lists (docs/loop.md#the-inbox); nothing is appended.

    Args:
        message_id: the duplicate id.
        target: the list the message was sent to (`next-turn` or `next-step`).
    """

    def __init__(self, *, message_id: str, target: str) -> None:
        super().__init__(
            f"message id {message_id!r} is already pending in the inbox (sent to {target}); "
            "send a new message (a fresh id) instead of re-sending one"
        )
        self.message_id = message_id
        self.target = target


class ToolDefinitionError(UsageError):
    """Raised when a tool cannot be defined or registered (bad signature, duplicate name)."""


class McpServerError(UsageError):
    """Raised when an MCP server fails to start, to initialize or to list its tools.

    `duraloop.tools.mcp.McpServers` raises it on entry (docs/mcp.md#failures); the message is one
    line that names the server and says what to check. A server that fails later, during a
    call, gives that call an error result instead.

    Args:
        message: what went wrong, naming the server, and what to do.
        server: the server's configured name.
    """

    def __init__(self, message: str, *, server: str) -> None:
        super().__init__(message)
        self.server = server


class EventRejectedError(DuraloopError, ValueError):
    """Raised when an append or a seed event breaks a log rule; nothing is committed."""


class InvariantError(EventRejectedError):
    """Raised when an event would break a turn/step/tool relation (docs/log.md#invariants)."""


class SessionForkError(DuraloopError):
    """Raised when a fork boundary or child id cannot be used; `code` names the rule.

    Args:
        message: what was wrong and what to do.
        code: one of `INVALID_BOUNDARY`, `OPEN_TURN`, `SESSION_NOT_FOUND`,
            `SESSION_ALREADY_EXISTS`.
    """

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(f"{message} [{code}]")
        self.code = code


class CompactionError(DuraloopError):
    """Raised when a compaction cannot run or does not finish (docs/compaction.md#failures).

    A failed compaction leaves the surface unchanged (`compaction/end` records the error).
    `code`: `busy` (a compaction or turn in progress), `range` (no such span, or it would
    split a call from its result), `summary` (the summarizer failed, or its summary is not
    smaller), `changed` (history changed during the summary), `pressure` (still above the
    threshold), `cancelled` (a manual compaction was cancelled). A failed flush of the bracket
    raises the store's `StoreError` instead.
    """

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code


class CorruptLogError(DuraloopError):
    """Raised when a stored log's committed region is damaged; nothing is dropped silently.

    Args:
        message: what is damaged.
        path: the log file, when there is one.
        line: the 1-based line number of the damage, when known.
    """

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None) -> None:
        where = ""
        if line is not None:
            where = f" at line {line}" + ("" if path is None else f" of {path}")
        elif path is not None:
            where = f" (in {path})"
        super().__init__(f"{message}{where}")
        self.path = path
        self.line = line


class SessionFormatUnsupportedError(DuraloopError):
    """Raised when a log is intact but uses a format version or event type this build lacks."""


class StoreError(DuraloopError):
    """Raised when persistence fails or refuses an operation."""


class SessionNotFoundError(StoreError, KeyError):
    """Raised when a session id is not in the store.

    Args:
        session_id: the id that was looked up.
    """

    def __init__(self, session_id: str) -> None:
        super().__init__(f'session "{session_id}" not found; run `duraloop ls` to list sessions')
        self.session_id = session_id

    def __str__(self) -> str:
        return str(self.args[0])


class SessionExistsError(StoreError):
    """Raised when creating a session whose id already exists; resume it instead."""


class SessionLockedError(StoreError):
    """Raised when another live process holds the session's writer lock.

    Args:
        session_id: the locked session.
        path: the lock file.
    """

    def __init__(self, session_id: str, *, path: str) -> None:
        super().__init__(
            f'session "{session_id}" is being written by another process (lock {path}); '
            "wait for it to finish or stop it, then retry"
        )
        self.session_id = session_id
        self.path = path


class AppendConflictError(StoreError):
    """Raised when a batch's first seq is not the stored next seq (a stale or second writer)."""


class WriterFencedError(StoreError):
    """Raised when a writer's lease of a session was taken by another writer (fencing).

    The PostgreSQL store's appends verify the writer's fencing token in their transaction
    (docs/store.md#leases): a writer that stalled past its lease (a pause, a partition)
    and lost it writes nothing more, and its turn stops. The new holder has the session.

    Args:
        session_id: the session.
        token: this writer's fencing token, or None if it held no lease.
        holder: the owner holding the lease now, or None (free).
        holder_token: the token it holds, or None.
    """

    def __init__(
        self, *, session_id: str, token: int | None, holder: str | None, holder_token: int | None
    ) -> None:
        now = "is free now" if holder is None else f"is held by {holder} (token {holder_token})"
        super().__init__(
            f'session "{session_id}": this writer\'s lease (token {token}) was taken over and '
            f"{now}; nothing more was written by this writer. Resume the session to continue "
            "it, once no other writer runs it"
        )
        self.session_id = session_id
        self.token = token
        self.holder = holder
        self.holder_token = holder_token


class LlmError(DuraloopError):
    """Raised when a model request fails; `code` is stable (docs/providers.md#error-codes).

    Args:
        message: what failed.
        code: e.g. `RATE_LIMIT`, `SERVER`, `TIMEOUT`, `TRANSPORT`, `AUTH`, `SCRIPT_EXHAUSTED`.
        status: the HTTP status, when there was one.
        retryable: whether retrying the same request may succeed; defaults from `code`.
        provider_retry_after_ms: the provider's Retry-After, in milliseconds.
        request_id: the provider's request id, for support.
    """

    RETRYABLE_CODES = frozenset({"EMPTY_RESPONSE", "RATE_LIMIT", "SERVER", "TIMEOUT", "TRANSPORT"})
    """The codes retried by default (docs/providers.md#error-codes; `RetryPolicy` uses it)."""

    def __init__(
        self,
        message: str,
        *,
        code: str,
        status: int | None = None,
        retryable: bool | None = None,
        provider_retry_after_ms: int | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(f"{message} [{code}]")
        self.message = message
        self.code = code
        self.status = status
        self.retryable = code in self.RETRYABLE_CODES if retryable is None else retryable
        self.provider_retry_after_ms = provider_retry_after_ms
        self.request_id = request_id

    def failure(self) -> dict[str, object]:
        """Return the `LlmFailure` JSON of `turn/end` (docs/log.md#messages-and-content-blocks).

        Returns:
            `{message, code, status?, providerRetryAfterMs?, requestId?}`.
        """
        out: dict[str, object] = {"message": self.message, "code": self.code}
        if self.status is not None:
            out["status"] = self.status
        if self.provider_retry_after_ms is not None:
            out["providerRetryAfterMs"] = self.provider_retry_after_ms
        if self.request_id is not None:
            out["requestId"] = self.request_id
        return out

    @classmethod
    def from_failure(cls, failure: Mapping[str, Any]) -> LlmError:
        """Rebuild the error a recorded `LlmFailure` describes (the inverse of `failure()`).

        Args:
            failure: as `failure()` returns; a missing message reads `model request failed`,
                a missing code `UNKNOWN`.

        Returns:
            An `LlmError` whose `failure()` is the record; `retryable` defaults from the code.
        """
        return cls(
            str(failure.get("message", "model request failed")),
            code=str(failure.get("code", "UNKNOWN")),
            status=failure.get("status"),
            provider_retry_after_ms=failure.get("providerRetryAfterMs"),
            request_id=failure.get("requestId"),
        )


class ToolError(DuraloopError):
    """Raised by a tool body to fail with a coded error result (`tool/result.error`).

    Args:
        message: shown to the model as `Error: <message>`.
        code: a stable machine code, e.g. `FS_NOT_FOUND`, `PATH_OUTSIDE_WORKSPACE`.
    """

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


__all__ = sorted(
    name
    for name, value in dict(globals()).items()
    if isinstance(value, type) and issubclass(value, Exception) and value.__module__ == __name__
)
"""Every class above and the ones defined beside it (`_error_root`, `_pairing_errors`), which
name this module as theirs: `duraloop.errors` is the one home of every exception."""
