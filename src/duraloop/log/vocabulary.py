"""Wire names: event types, surface ops, turn-end reasons and recovery codes and texts.

A public module, like `duraloop.errors`: its whole content is public API, reached as
`duraloop.log.vocabulary`. Every dsh wire string duraloop writes is defined here once
(style rule D7). The two recovery texts are quoted verbatim from
docs/recovery.md#crash-tail-repair / docs/loop.md#unanswered-tool-results; they are
model-visible.
"""

from __future__ import annotations

from typing import Final as _Final

TURN_START: _Final = "turn/start"
TURN_END: _Final = "turn/end"
STEP_START: _Final = "step/start"
STEP_END: _Final = "step/end"
USER_MESSAGE: _Final = "user/message"
ASSISTANT_CHUNK: _Final = "assistant/chunk"
ASSISTANT_MESSAGE: _Final = "assistant/message"
TOOL_CALL: _Final = "tool/call"
TOOL_RESULT: _Final = "tool/result"
REQUEST_HEADER: _Final = "request/header"
REQUEST_CONTEXT: _Final = "request/context"
END_SEED: _Final = "session/end-seed"
TODO_WRITE: _Final = "todo/write"
LLM_RETRY: _Final = "llm/retry"
LLM_RETRY_STARTED: _Final = "llm/retry-started"
RETRY_NORMAL: _Final = "normal"
"""The `mode` of an `llm/retry` the retry policy decided (its retryable codes and limits)."""
RETRY_ALWAYS: _Final = "always"
"""The `mode` of an `llm/retry` retried whatever its code (a hook's retry, an `always` policy)."""
RETRY_ORIGIN_HOOK: _Final = "hook"
"""The `origin` (and `policyKey`) of an `llm/retry` that a `request_error` hook asked for;
its `mode` is `always` (dsh's checker knows only `normal` and `always`, and ignores `origin`)."""
INBOX_SPLICED: _Final = "agent/inbox/spliced"

# Inbox targets and the splice outcome of a discard (docs/loop.md#the-inbox). The outcome is
# dsh's wire spelling with one l; duraloop's own words spell "cancelled" with two.
INBOX_NEXT_TURN: _Final = "next-turn"
INBOX_NEXT_STEP: _Final = "next-step"
INBOX_TARGETS: _Final = (INBOX_NEXT_STEP, INBOX_NEXT_TURN)
INBOX_OUTCOME_DISCARDED: _Final = "canceled"  # dsh wire spelling

# Approvals (docs/approvals.md): dsh's events, outcomes, policies and deny texts (after
# `Error: `); a rejection's feedback is duraloop's extension.
APPROVAL_ASKED: _Final = "approval/asked"
APPROVAL_DECIDED: _Final = "approval/decided"
APPROVAL_POLICY: _Final = "approval/policy"
APPROVAL_ALLOWED_ONCE: _Final = "allowed-once"
APPROVAL_REJECTED: _Final = "rejected"
APPROVAL_CANCELLED: _Final = "cancelled"
APPROVAL_UNAVAILABLE: _Final = "unavailable"
APPROVAL_OUTCOMES: _Final = ("allowed-once", "rejected", "cancelled", "unavailable")
POLICY_ASK: _Final = "ask"
POLICY_NEVER: _Final = "never"
APPROVAL_POLICIES: _Final = (POLICY_ASK, POLICY_NEVER)
REJECTED_TEXT: _Final = 'the user rejected tool "{name}"'
REJECTED_WITH_FEEDBACK_TEXT: _Final = 'the user rejected tool "{name}" with feedback: {feedback}'
UNAVAILABLE_TEXT: _Final = 'tool "{name}" requires approval, but no approval channel is available'
# How a decided turn goes on (the viewer's approvals answer, docs/view.md#approvals): queued
# for the workers (a PostgreSQL store), or by the next `duraloop resume ID`.
CONTINUATION_QUEUED: _Final = "queued"
CONTINUATION_RESUME: _Final = "resume"

# Compaction (docs/compaction.md): dsh's events, the checkpoint's source and framing, the
# pruner's marker and the triggers.
COMPACTION_START: _Final = "compaction/start"
COMPACTION_SUMMARY: _Final = "compaction/summary"
COMPACTION_END: _Final = "compaction/end"
COMPACTION_PRUNE: _Final = "compaction/prune"
COMMAND_RUN: _Final = "command/run"
COMMAND_DONE: _Final = "command/done"
SOURCE_PLUGIN: _Final = "plugin"
COMPACT_PLUGIN: _Final = "compact"
"""The `source.plugin` of a checkpoint `user/message` (`{kind: "plugin", plugin: "compact"}`)."""
SUMMARIZER_PLUGIN: _Final = "dsh-compaction-basic"
"""The `source.plugin` of the summarizer's instruction message (sent, never logged)."""
TRIGGER_PRESSURE: _Final = "pressure"
TRIGGER_OVERFLOW: _Final = "context-overflow"
TRIGGER_MANUAL: _Final = "manual"
SUMMARY_OPEN_TAG: _Final = "<compacted-summary>"
SUMMARY_CLOSE_TAG: _Final = "</compacted-summary>"
CHECKPOINT_PREAMBLE: _Final = (
    "This is an automatically generated checkpoint condensing an earlier span of the "
    "conversation to free up context. Treat the captured context as established background "
    "and build on it without restating it. Continue the task directly from the messages that "
    "follow, without acknowledging this checkpoint."
)
"""The checkpoint's opening sentences, model-visible, quoted from dsh (compaction-spec 2.3)."""
COMPACTION_INTERRUPTED_TEXT: _Final = "interrupted: the process ended during compaction"
"""The `error` of the `compaction/end` crash repair writes for a compaction the process left
open (after `compaction/start`, before its checkpoint; docs/recovery.md#crash-tail-repair)."""
PRUNE_MARKER: _Final = "\n\n[... tool result middle pruned ...]\n\n"
"""What the pruner puts where it cut a tool result's middle (compaction-spec 6)."""
SURFACE_REPLACE: _Final = "replace"

SURFACE_TYPES: _Final = frozenset({USER_MESSAGE, ASSISTANT_MESSAGE, TOOL_RESULT})
"""The event types that carry a `surfaceOp` and produce model-visible messages."""

SURFACE_APPEND: _Final = "append"

# Content block types of a message (docs/providers.md#messages; `log/_messages.py`).
BLOCK_TEXT: _Final = "text"
BLOCK_REASONING: _Final = "reasoning"
BLOCK_IMAGE: _Final = "image"
BLOCK_TOOL_CALL: _Final = "tool-call"
BLOCK_TOOL_RESULT: _Final = "tool-result"

# Stream chunk types and finish kinds (docs/providers.md#stream-contract), logged verbatim as
# `assistant/chunk.data.chunk`.
BLOCK_START: _Final = "block-start"
TEXT_DELTA: _Final = "text-delta"
REASONING_DELTA: _Final = "reasoning-delta"
TOOL_CALL_DELTA: _Final = "tool-call-delta"
BLOCK_END: _Final = "block-end"
USAGE: _Final = "usage"
FINISH: _Final = "finish"

FINISH_STOP: _Final = "stop"
FINISH_TOOL_CALLS: _Final = "tool-calls"
FINISH_MAX_TOKENS: _Final = "max-tokens"
FINISH_ERROR: _Final = "error"
FINISH_ABORTED: _Final = "aborted"

# Turn-end reason kinds (docs/log.md#event-types).
REASON_COMPLETED: _Final = "completed"
REASON_ABORTED: _Final = "aborted"
REASON_BLOCKED: _Final = "blocked"
REASON_ERROR: _Final = "error"
REASON_MAX_TOKENS: _Final = "max-tokens"
REASON_INTERRUPTED: _Final = "interrupted"
TURN_END_REASONS: _Final = (
    REASON_COMPLETED,
    REASON_ABORTED,
    REASON_BLOCKED,
    REASON_ERROR,
    REASON_MAX_TOKENS,
    REASON_INTERRUPTED,
)

# Tool error codes (docs/scheduler.md#tool-error-codes) and their error names.
TOOL_OUTCOME_UNKNOWN: _Final = "TOOL_OUTCOME_UNKNOWN"
TOOL_NOT_STARTED: _Final = "TOOL_NOT_STARTED"
ABORTED_BEFORE_DISPATCH: _Final = "ABORTED_BEFORE_DISPATCH"
ABORTED: _Final = "ABORTED"
UNKNOWN_TOOL: _Final = "UNKNOWN_TOOL"
INVALID_ARGS: _Final = "INVALID_ARGS"
TOOL_TIMEOUT: _Final = "TOOL_TIMEOUT"
INVALID_TOOL_OUTPUT: _Final = "INVALID_TOOL_OUTPUT"
UNKNOWN: _Final = "UNKNOWN"
"""The code of a failure no other code describes (a tool's, a model's or a legacy reason's)."""

OUTCOME_UNKNOWN_ERROR: _Final = {"name": "ToolOutcomeUnknownError", "code": TOOL_OUTCOME_UNKNOWN}
NOT_STARTED_ERROR: _Final = {"name": "ToolNotStartedError", "code": TOOL_NOT_STARTED}
ABORTED_BEFORE_DISPATCH_ERROR: _Final = {"name": "AbortError", "code": ABORTED_BEFORE_DISPATCH}
ABORTED_ERROR: _Final = {"name": "AbortError", "code": ABORTED}
UNKNOWN_TOOL_ERROR: _Final = {"name": "ToolNotFoundError", "code": UNKNOWN_TOOL}
INVALID_ARGS_ERROR: _Final = {"name": "ToolArgsError", "code": INVALID_ARGS}
TOOL_TIMEOUT_ERROR: _Final = {"name": "ToolTimeoutError", "code": TOOL_TIMEOUT}
"""Error info of a call whose declared `timeout_seconds` expired.

See docs/scheduler.md#tool-error-codes.
"""
INVALID_TOOL_OUTPUT_ERROR: _Final = {"name": "ToolOutputError", "code": INVALID_TOOL_OUTPUT}
"""Error info of a result that is not lossless JSON content (docs/scheduler.md#tool-error-codes)."""
TOOL_ERROR_NAME: _Final = "ToolError"
"""The error name recorded for a `duraloop.errors.ToolError` raised by a tool body."""

# The file tools' error codes (docs/scheduler.md#tool-error-codes), recorded in `tool/result`.
PATH_OUTSIDE_WORKSPACE: _Final = "PATH_OUTSIDE_WORKSPACE"
PATH_INVALID: _Final = "PATH_INVALID"
FS_NOT_FOUND: _Final = "FS_NOT_FOUND"
FS_NOT_A_FILE: _Final = "FS_NOT_A_FILE"
FS_NOT_A_DIRECTORY: _Final = "FS_NOT_A_DIRECTORY"
FS_NOT_TEXT: _Final = "FS_NOT_TEXT"
FS_PERMISSION_DENIED: _Final = "FS_PERMISSION_DENIED"
FS_IO_ERROR: _Final = "FS_IO_ERROR"
FS_EDIT_NOT_FOUND: _Final = "FS_EDIT_NOT_FOUND"
FS_AMBIGUOUS_EDIT: _Final = "FS_AMBIGUOUS_EDIT"
FS_HARD_LINK: _Final = "FS_HARD_LINK"
FS_UNSUPPORTED: _Final = "FS_UNSUPPORTED"
GREP_INVALID_PATTERN: _Final = "GREP_INVALID_PATTERN"

# MCP tool error codes (docs/mcp.md#results), recorded in `tool/result` with the name `ToolError`.
MCP_TOOL_ERROR: _Final = "MCP_TOOL_ERROR"
"""The MCP server answered the call with `isError: true`."""
MCP_SERVER_UNAVAILABLE: _Final = "MCP_SERVER_UNAVAILABLE"
"""The MCP server died during the call, or could not be reached or restarted for it."""
MCP_PROTOCOL_ERROR: _Final = "MCP_PROTOCOL_ERROR"
"""The MCP server answered the call with a JSON-RPC error instead of a result."""

# `LlmError` codes, recorded as `LlmFailure.code`; what each means is in
# docs/providers.md#error-codes. `ABORTED` and `UNKNOWN` are above.
RATE_LIMIT: _Final = "RATE_LIMIT"
SERVER: _Final = "SERVER"
AUTH: _Final = "AUTH"
QUOTA: _Final = "QUOTA"
INVALID_REQUEST: _Final = "INVALID_REQUEST"
CONTEXT_WINDOW_EXCEEDED: _Final = "CONTEXT_WINDOW_EXCEEDED"
TIMEOUT: _Final = "TIMEOUT"
TRANSPORT: _Final = "TRANSPORT"
EMPTY_RESPONSE: _Final = "EMPTY_RESPONSE"
STREAM_CLOSED: _Final = "STREAM_CLOSED"
MALFORMED_RESPONSE: _Final = "MALFORMED_RESPONSE"
UNSUPPORTED_CONTENT: _Final = "UNSUPPORTED_CONTENT"
SCRIPT_EXHAUSTED: _Final = "SCRIPT_EXHAUSTED"
PAIRING_VIOLATION: _Final = "PAIRING_VIOLATION"
REPLAY_EXHAUSTED: _Final = "REPLAY_EXHAUSTED"
REFUSAL: _Final = "REFUSAL"
UNSUPPORTED_OPTION: _Final = "UNSUPPORTED_OPTION"
CONTENT_FILTER: _Final = "CONTENT_FILTER"
INSUFFICIENT_SYSTEM_RESOURCE: _Final = "INSUFFICIENT_SYSTEM_RESOURCE"

OUTCOME_UNKNOWN_TEXT: _Final = (
    "The tool call was interrupted after it was recorded, but no result was durably recorded. "
    "Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the "
    "operation is read-only or idempotent; if it may have side effects, first verify external "
    "state or ask the user. Do not retry blindly."
)
NOT_STARTED_TEXT: _Final = (
    "The tool call was interrupted before the Harness recorded it as started. "
    "Retry it if it is still needed."
)
ABORTED_BEFORE_DISPATCH_TEXT: _Final = "Error: tool call aborted before dispatch"
ABORTED_TEXT: _Final = "Error: tool call aborted"
ABORTED_AFTER_COMPLETION_TEXT: _Final = (
    f"{ABORTED_TEXT}, but the tool body had already run to completion: its effects happened "
    "and were not undone. The tool's own output follows."
)
"""The `ABORTED` text of a call whose body returned a success although the turn was
cancelled (a sync body that finished its side effect after Ctrl-C, a body watching the signal
that returned a value): its content blocks follow this text, so the model knows the effect
happened. `ABORTED_TEXT` alone means the body was interrupted (or never returned)."""
NOT_INTERRUPTED_TEXT: _Final = (
    "The tool call was cancelled, but its body could not be interrupted: it was still running "
    "{grace_seconds:g} seconds after the cancellation, and the loop stopped waiting for it. It may "
    "still finish, or be cut off when the process exits. Its outcome is unknown. Decide whether "
    "to retry from the tool semantics: retry only if the operation is read-only or idempotent; "
    "if it may have side effects, first verify external state or ask the user. Do not retry "
    "blindly."
)
"""The `TOOL_OUTCOME_UNKNOWN` text (a `str.format` template taking `grace_seconds`) of a call
whose synchronous body ignored cancellation past the loop's grace period: the call is answered
without waiting for it, so a cancelled turn (and a SIGTERMed process) ends in bounded time."""

RECOVERY_MESSAGE_ID_PREFIX: _Final = "interrupted-tool-result-"

# Idempotency keys and the re-run of outcome-unknown calls (docs/recovery.md#idempotency-keys).
IDEMPOTENCY_KEY_PREFIX: _Final = "dl1-"
"""The version prefix of every idempotency key (`idempotency_key`)."""
IDEMPOTENCY_KEY_ENV: _Final = "DURALOOP_IDEMPOTENCY_KEY"
"""The environment variable the built-in `bash` tool exports the call's key in."""
IDEMPOTENCY_META_KEY: _Final = "duraloop/idempotency-key"
"""The `_meta` key an MCP `tools/call` request carries the call's key in (docs/mcp.md#results)."""
RETRY_OF: _Final = "retryOf"
"""The `tool/call` data field of a re-run: the seq of the earlier `tool/call` it repeats."""
RERUN_CALL_ID_INFIX: _Final = "-rerun-"
"""A re-run's `tool/call` id is the call's id, this, and the attempt number (1, 2, ...)."""
RERUN_SUCCEEDED_TEXT: _Final = "The re-run succeeded; its output follows."
"""How the first text block of a re-run's replacement `tool/result` ends when the re-run
returned no error (`rerun_text`; the tracer reads it, docs/telemetry.md#re-runs)."""
RERUN_FAILED_TEXT: _Final = "The re-run failed too; its error follows."
"""How that text block ends when the re-run itself returned an error."""

KNOWN_EVENT_TYPES: _Final = frozenset(
    {
        "agent-preset/selected",
        "agent/inbox/spliced",
        "approval/asked",
        "approval/decided",
        "approval/policy",
        "assistant/chunk",
        "assistant/message",
        "command/done",
        "command/run",
        "compaction/end",
        "compaction/prune",
        "compaction/start",
        "compaction/summary",
        "feedback/record",
        "goal/change",
        "hook/invoked",
        "hook/result",
        "llm/retry",
        "llm/retry-started",
        "permission/preset",
        "plan/mode",
        "request/context",
        "request/header",
        "sandbox/mode",
        "schedule/change",
        "session/end-seed",
        "session/title",
        "session/title-llm-request",
        "step/end",
        "step/start",
        "subagent/descriptor",
        "team/member",
        "team/message/delivered",
        "team/message/queued",
        "team/task",
        "todo/write",
        "tool-workflow/agent-end",
        "tool-workflow/agent-start",
        "tool-workflow/run-end",
        "tool-workflow/run-start",
        "tool/call",
        "tool/code-dispatch",
        "tool/code-dispatch-start",
        "tool/result",
        "turn/end",
        "turn/start",
        "user/message",
        "web/deepseek-search-llm-request",
    }
)
"""dsh's `KNOWN_SESSION_EVENT_TYPES` (docs/log.md#known-types): types a reader must recognise."""

LEGACY_REJECTED_TYPES: _Final = frozenset({"request/header-delta", "mode/set"})

# Legacy shapes imported on read (docs/log.md#legacy-shapes, docs/store.md#legacy-import); never
# written.
STEERING_MESSAGE: _Final = "steering/message"
LEGACY_MESSAGE_ID_PREFIX: _Final = "legacy-message:"
LEGACY_ABORT_CAUSE: _Final = "legacy"

DISPOSED: _Final = "disposed"
"""The abort cause of a turn cut by `dispose()` (`{"kind": "aborted", "reason": {"kind":
"disposed"}}`), and a legacy turn-end reason kind imported as that shape."""

__all__ = sorted(
    name for name in dir() if name.isupper() and not name.startswith("_")
)  # every constant above is public (a module of names only)
