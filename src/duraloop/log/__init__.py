"""The session log: events, Session, surface, derived messages, repair, invariants, fork.

Pure and synchronous: no I/O and no concurrency (docs/architecture.md#layers).
"""

from .. import _lazy

if _lazy.TYPE_CHECKING:
    from ._approvals import MAX_FEEDBACK_CHARS as MAX_FEEDBACK_CHARS
    from ._approvals import PendingApproval as PendingApproval
    from ._approvals import decided_data as decided_data
    from ._approvals import effective_policy as effective_policy
    from ._approvals import pending_approval as pending_approval
    from ._approvals import policy_of as policy_of
    from ._approvals import waiting_calls as waiting_calls
    from ._check import LogCheckReport as LogCheckReport
    from ._check import check_log as check_log
    from ._check import rescue_command as rescue_command
    from ._check import validate_after_checkpoint as validate_after_checkpoint
    from ._check import validate_log as validate_log
    from ._checkpoint import EncodedPrefix as EncodedPrefix
    from ._checkpoint import SessionCheckpoint as SessionCheckpoint
    from ._checkpoint import decode_checkpoint as decode_checkpoint
    from ._checkpoint import encode_checkpoint as encode_checkpoint
    from ._compaction import balanced_cuts as balanced_cuts
    from ._compaction import check_region as check_region
    from ._compaction import checkpoint_message as checkpoint_message
    from ._compaction import compaction_lifecycle as compaction_lifecycle
    from ._compaction import protected_from as protected_from
    from ._compaction import select_range as select_range
    from ._compaction_fold import CompactionFold as CompactionFold
    from ._compaction_fold import OpenCompaction as OpenCompaction
    from ._compaction_fold import is_checkpoint as is_checkpoint
    from ._compaction_invariants import CompactionInvariants as CompactionInvariants
    from ._event import Event as Event
    from ._event import decode_event as decode_event
    from ._event import encode_event as encode_event
    from ._event import encode_events_lines as encode_events_lines
    from ._event import event_to_json as event_to_json
    from ._event import now_ms as now_ms
    from ._fork import closed_history_boundary as closed_history_boundary
    from ._fork import fork_header as fork_header
    from ._fork import fork_seed as fork_seed
    from ._header import SESSION_FORMAT_VERSION as SESSION_FORMAT_VERSION
    from ._header import SessionHeader as SessionHeader
    from ._idempotency import UnknownCall as UnknownCall
    from ._idempotency import call_origin as call_origin
    from ._idempotency import idempotency_key as idempotency_key
    from ._idempotency import outcome_unknown_calls as outcome_unknown_calls
    from ._idempotency import rerun_result_data as rerun_result_data
    from ._idempotency import rerun_text as rerun_text
    from ._invariants import InvariantChecker as InvariantChecker
    from ._json import MAX_JSON_DEPTH as MAX_JSON_DEPTH
    from ._json import JsonObject as JsonObject
    from ._json import JsonValue as JsonValue
    from ._json import is_lossless as is_lossless
    from ._json import is_safe_int as is_safe_int
    from ._json import lossless_copy as lossless_copy
    from ._json import well_formed_json as well_formed_json
    from ._lazy_events import LazyEvents as LazyEvents
    from ._lazy_events import PrefixLoader as PrefixLoader
    from ._lazy_events import same_events as same_events
    from ._lazy_messages import LazyMessages as LazyMessages
    from ._legacy import readable_events as readable_events
    from ._messages import ContentBlock as ContentBlock
    from ._messages import Message as Message
    from ._messages import ToolCallBlock as ToolCallBlock
    from ._messages import assistant_message as assistant_message
    from ._messages import new_message_id as new_message_id
    from ._messages import project as project
    from ._messages import result_call_id as result_call_id
    from ._messages import text_of as text_of
    from ._messages import tool_calls_of as tool_calls_of
    from ._messages import tool_result_message as tool_result_message
    from ._messages import user_message as user_message
    from ._pairing import ASSISTANT_CONTENT_MISSING as ASSISTANT_CONTENT_MISSING
    from ._pairing import DUPLICATE_TOOL_CALL_ID as DUPLICATE_TOOL_CALL_ID
    from ._pairing import DUPLICATE_TOOL_RESULT as DUPLICATE_TOOL_RESULT
    from ._pairing import INVALID_TOOL_CALL_ID as INVALID_TOOL_CALL_ID
    from ._pairing import TOOL_RESULT_ORDER as TOOL_RESULT_ORDER
    from ._pairing import TOOL_RESULTS_NOT_FIRST as TOOL_RESULTS_NOT_FIRST
    from ._pairing import UNANSWERED_TOOL_CALL as UNANSWERED_TOOL_CALL
    from ._pairing import UNEXPECTED_TOOL_RESULT as UNEXPECTED_TOOL_RESULT
    from ._pairing import CallGroup as CallGroup
    from ._pairing import PairingCheck as PairingCheck
    from ._pairing import check_pairing as check_pairing
    from ._pending import PendingCall as PendingCall
    from ._pending import PendingToolCalls as PendingToolCalls
    from ._pending import RecoveryResult as RecoveryResult
    from ._pending import UnansweredStep as UnansweredStep
    from ._pending import unanswered_tool_result as unanswered_tool_result
    from ._price import Price as Price
    from ._prune import PrunerConfig as PrunerConfig
    from ._prune import prune_content as prune_content
    from ._prune import prune_session as prune_session
    from ._repair import final_turn_closers as final_turn_closers
    from ._repair import interrupted_turn_closers as interrupted_turn_closers
    from ._repair import torn_compaction as torn_compaction
    from ._rerun_result import RerunCall as RerunCall
    from ._rerun_result import RerunResult as RerunResult
    from ._rerun_result import rerun_call as rerun_call
    from ._rerun_result import rerun_result as rerun_result
    from ._rerun_result import rerun_succeeded as rerun_succeeded
    from ._session import Session as Session
    from ._title import MAX_TITLE_CHARS as MAX_TITLE_CHARS
    from ._title import session_title as session_title
    from ._tokens import estimate_content as estimate_content
    from ._tokens import estimate_header as estimate_header
    from ._tokens import estimate_message as estimate_message
    from ._tokens import usage_total as usage_total
    from ._tokens import utf16_length as utf16_length
    from ._turns import last_turn_and_latest as last_turn_and_latest
    from ._turns import last_turn_boundary as last_turn_boundary
    from ._turns import last_turn_end as last_turn_end
    from ._turns import last_turn_start as last_turn_start
    from ._turns import open_turn_start as open_turn_start
    from ._turns import scan_turns as scan_turns
    from ._turns import step_start as step_start
    from ._turns import turn_count as turn_count
    from ._turns import turn_starts as turn_starts
    from ._usage import Usage as Usage
    from ._usage import UsageFold as UsageFold
    from ._usage import usage_of as usage_of
    from ._validate import check_vocabulary as check_vocabulary

__all__ = [
    "MAX_FEEDBACK_CHARS",
    "decided_data",
    "waiting_calls",
    "PendingApproval",
    "effective_policy",
    "policy_of",
    "pending_approval",
    "validate_after_checkpoint",
    "same_events",
    "encode_checkpoint",
    "decode_checkpoint",
    "SessionCheckpoint",
    "EncodedPrefix",
    "LazyMessages",
    "PrefixLoader",
    "LazyEvents",
    "ASSISTANT_CONTENT_MISSING",
    "CallGroup",
    "ContentBlock",
    "DUPLICATE_TOOL_CALL_ID",
    "DUPLICATE_TOOL_RESULT",
    "Event",
    "INVALID_TOOL_CALL_ID",
    "InvariantChecker",
    "JsonObject",
    "JsonValue",
    "LogCheckReport",
    "MAX_JSON_DEPTH",
    "Message",
    "PairingCheck",
    "PendingCall",
    "PendingToolCalls",
    "RecoveryResult",
    "SESSION_FORMAT_VERSION",
    "Session",
    "SessionHeader",
    "UnknownCall",
    "call_origin",
    "idempotency_key",
    "outcome_unknown_calls",
    "rerun_result_data",
    "rerun_text",
    "RerunCall",
    "RerunResult",
    "rerun_call",
    "rerun_result",
    "rerun_succeeded",
    "TOOL_RESULTS_NOT_FIRST",
    "TOOL_RESULT_ORDER",
    "ToolCallBlock",
    "UNANSWERED_TOOL_CALL",
    "UNEXPECTED_TOOL_RESULT",
    "UnansweredStep",
    "assistant_message",
    "check_log",
    "check_pairing",
    "check_vocabulary",
    "closed_history_boundary",
    "decode_event",
    "encode_event",
    "encode_events_lines",
    "event_to_json",
    "final_turn_closers",
    "fork_header",
    "fork_seed",
    "interrupted_turn_closers",
    "is_lossless",
    "is_safe_int",
    "last_turn_and_latest",
    "last_turn_boundary",
    "last_turn_end",
    "last_turn_start",
    "lossless_copy",
    "new_message_id",
    "project",
    "now_ms",
    "open_turn_start",
    "readable_events",
    "rescue_command",
    "result_call_id",
    "scan_turns",
    "step_start",
    "text_of",
    "tool_calls_of",
    "tool_result_message",
    "turn_count",
    "turn_starts",
    "unanswered_tool_result",
    "user_message",
    "validate_log",
    "well_formed_json",
    "balanced_cuts",
    "check_region",
    "checkpoint_message",
    "compaction_lifecycle",
    "protected_from",
    "select_range",
    "CompactionFold",
    "OpenCompaction",
    "is_checkpoint",
    "estimate_content",
    "MAX_TITLE_CHARS",
    "session_title",
    "estimate_header",
    "estimate_message",
    "usage_total",
    "utf16_length",
    "PrunerConfig",
    "prune_content",
    "prune_session",
    "CompactionInvariants",
    "torn_compaction",
    "Price",
    "Usage",
    "UsageFold",
    "usage_of",
]

if not _lazy.TYPE_CHECKING:  # PEP 562: each name's module loads on first use
    __getattr__, __dir__ = _lazy.lazy_exports(
        __name__,
        {
            "LogCheckReport": "._check",
            "check_log": "._check",
            "rescue_command": "._check",
            "validate_after_checkpoint": "._check",
            "validate_log": "._check",
            "EncodedPrefix": "._checkpoint",
            "SessionCheckpoint": "._checkpoint",
            "decode_checkpoint": "._checkpoint",
            "encode_checkpoint": "._checkpoint",
            "Event": "._event",
            "decode_event": "._event",
            "encode_event": "._event",
            "encode_events_lines": "._event",
            "event_to_json": "._event",
            "closed_history_boundary": "._fork",
            "fork_header": "._fork",
            "fork_seed": "._fork",
            "SESSION_FORMAT_VERSION": "._header",
            "SessionHeader": "._header",
            "InvariantChecker": "._invariants",
            "MAX_JSON_DEPTH": "._json",
            "JsonObject": "._json",
            "JsonValue": "._json",
            "is_lossless": "._json",
            "is_safe_int": "._json",
            "lossless_copy": "._json",
            "well_formed_json": "._json",
            "LazyEvents": "._lazy_events",
            "PrefixLoader": "._lazy_events",
            "same_events": "._lazy_events",
            "LazyMessages": "._lazy_messages",
            "readable_events": "._legacy",
            "ContentBlock": "._messages",
            "Message": "._messages",
            "ToolCallBlock": "._messages",
            "assistant_message": "._messages",
            "new_message_id": "._messages",
            "project": "._messages",
            "result_call_id": "._messages",
            "text_of": "._messages",
            "tool_calls_of": "._messages",
            "tool_result_message": "._messages",
            "user_message": "._messages",
            "ASSISTANT_CONTENT_MISSING": "._pairing",
            "DUPLICATE_TOOL_CALL_ID": "._pairing",
            "DUPLICATE_TOOL_RESULT": "._pairing",
            "INVALID_TOOL_CALL_ID": "._pairing",
            "TOOL_RESULT_ORDER": "._pairing",
            "TOOL_RESULTS_NOT_FIRST": "._pairing",
            "UNANSWERED_TOOL_CALL": "._pairing",
            "UNEXPECTED_TOOL_RESULT": "._pairing",
            "CallGroup": "._pairing",
            "PairingCheck": "._pairing",
            "check_pairing": "._pairing",
            "UnknownCall": "._idempotency",
            "call_origin": "._idempotency",
            "idempotency_key": "._idempotency",
            "outcome_unknown_calls": "._idempotency",
            "rerun_result_data": "._idempotency",
            "rerun_text": "._idempotency",
            "RerunCall": "._rerun_result",
            "RerunResult": "._rerun_result",
            "rerun_call": "._rerun_result",
            "rerun_result": "._rerun_result",
            "rerun_succeeded": "._rerun_result",
            "PendingCall": "._pending",
            "PendingToolCalls": "._pending",
            "RecoveryResult": "._pending",
            "UnansweredStep": "._pending",
            "unanswered_tool_result": "._pending",
            "balanced_cuts": "._compaction",
            "check_region": "._compaction",
            "checkpoint_message": "._compaction",
            "compaction_lifecycle": "._compaction",
            "protected_from": "._compaction",
            "select_range": "._compaction",
            "CompactionFold": "._compaction_fold",
            "OpenCompaction": "._compaction_fold",
            "is_checkpoint": "._compaction_fold",
            "MAX_TITLE_CHARS": "._title",
            "session_title": "._title",
            "estimate_content": "._tokens",
            "estimate_header": "._tokens",
            "estimate_message": "._tokens",
            "usage_total": "._tokens",
            "utf16_length": "._tokens",
            "PrunerConfig": "._prune",
            "prune_content": "._prune",
            "prune_session": "._prune",
            "CompactionInvariants": "._compaction_invariants",
            "torn_compaction": "._repair",
            "final_turn_closers": "._repair",
            "interrupted_turn_closers": "._repair",
            "Session": "._session",
            "PendingApproval": "._approvals",
            "MAX_FEEDBACK_CHARS": "._approvals",
            "decided_data": "._approvals",
            "waiting_calls": "._approvals",
            "effective_policy": "._approvals",
            "policy_of": "._approvals",
            "pending_approval": "._approvals",
            "now_ms": "._event",
            "Price": "._price",
            "Usage": "._usage",
            "UsageFold": "._usage",
            "usage_of": "._usage",
            "last_turn_and_latest": "._turns",
            "last_turn_boundary": "._turns",
            "last_turn_end": "._turns",
            "last_turn_start": "._turns",
            "open_turn_start": "._turns",
            "scan_turns": "._turns",
            "step_start": "._turns",
            "turn_count": "._turns",
            "turn_starts": "._turns",
            "check_vocabulary": "._validate",
        },
        submodules=("vocabulary",),
    )
