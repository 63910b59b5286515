"""duraloop.llm: the model seam (stream chunks, assembler, errors, adapters)."""

from .. import _lazy

if _lazy.TYPE_CHECKING:
    from ._activity import note_stream_activity as note_stream_activity
    from ._activity import watching_stream_activity as watching_stream_activity
    from ._anthropic import AnthropicMessagesModel as AnthropicMessagesModel
    from ._anthropic import check_anthropic_messages as check_anthropic_messages
    from ._assembler import BlockAssembler as BlockAssembler
    from ._chat_completions import DeepSeekChatModel as DeepSeekChatModel
    from ._chat_completions import OpenAIChatModel as OpenAIChatModel
    from ._chat_completions import (
        check_chat_completions_messages as check_chat_completions_messages,
    )
    from ._chunks import BlockEndChunk as BlockEndChunk
    from ._chunks import BlockStartChunk as BlockStartChunk
    from ._chunks import FinishChunk as FinishChunk
    from ._chunks import FinishReason as FinishReason
    from ._chunks import ReasoningDeltaChunk as ReasoningDeltaChunk
    from ._chunks import StreamChunk as StreamChunk
    from ._chunks import TextDeltaChunk as TextDeltaChunk
    from ._chunks import TokenUsage as TokenUsage
    from ._chunks import ToolCallDeltaChunk as ToolCallDeltaChunk
    from ._chunks import UsageChunk as UsageChunk
    from ._chunks import block_end as block_end
    from ._chunks import block_start as block_start
    from ._chunks import finish_chunk as finish_chunk
    from ._chunks import reasoning_delta as reasoning_delta
    from ._chunks import text_delta as text_delta
    from ._chunks import tool_call_delta as tool_call_delta
    from ._chunks import usage_chunk as usage_chunk
    from ._errors import code_for_status as code_for_status
    from ._errors import is_context_window_exceeded as is_context_window_exceeded
    from ._errors import is_quota_exceeded as is_quota_exceeded
    from ._errors import parse_retry_after_ms as parse_retry_after_ms
    from ._failure import failure_from_exception as failure_from_exception
    from ._failure import turn_failure as turn_failure
    from ._failure import unknown_failure as unknown_failure
    from ._model import COMPACTION_PURPOSE as COMPACTION_PURPOSE
    from ._model import Model as Model
    from ._model import ModelRequest as ModelRequest
    from ._model import ToolSchema as ToolSchema
    from ._model import stream_chunks as stream_chunks
    from ._model_spec import PROVIDERS as PROVIDERS
    from ._model_spec import SPEC_FORMS as SPEC_FORMS
    from ._model_spec import ProviderSettings as ProviderSettings
    from ._model_spec import parse_model_spec as parse_model_spec
    from ._model_spec import setting_problem as setting_problem
    from ._model_spec import spec_problem as spec_problem
    from ._replay import RecordedResponse as RecordedResponse
    from ._replay import ReplayModel as ReplayModel
    from ._retry import RetryPolicy as RetryPolicy
    from ._scripted import ScriptedModel as ScriptedModel
    from ._tool_ids import ANTHROPIC_IDS as ANTHROPIC_IDS
    from ._tool_ids import CHAT_COMPLETIONS_IDS as CHAT_COMPLETIONS_IDS
    from ._tool_ids import ToolIdMap as ToolIdMap
    from ._tool_ids import ToolIdRule as ToolIdRule
    from ._tool_ids import wire_tool_id as wire_tool_id
    from ._windows import context_window_of as context_window_of

__all__ = [
    "ANTHROPIC_IDS",
    "AnthropicMessagesModel",
    "BlockAssembler",
    "BlockEndChunk",
    "BlockStartChunk",
    "CHAT_COMPLETIONS_IDS",
    "COMPACTION_PURPOSE",
    "DeepSeekChatModel",
    "FinishChunk",
    "FinishReason",
    "Model",
    "ModelRequest",
    "OpenAIChatModel",
    "PROVIDERS",
    "ProviderSettings",
    "ReasoningDeltaChunk",
    "RecordedResponse",
    "ReplayModel",
    "RetryPolicy",
    "SPEC_FORMS",
    "ScriptedModel",
    "StreamChunk",
    "TextDeltaChunk",
    "TokenUsage",
    "ToolCallDeltaChunk",
    "ToolIdMap",
    "ToolIdRule",
    "ToolSchema",
    "UsageChunk",
    "block_end",
    "block_start",
    "check_anthropic_messages",
    "check_chat_completions_messages",
    "code_for_status",
    "context_window_of",
    "failure_from_exception",
    "finish_chunk",
    "is_context_window_exceeded",
    "is_quota_exceeded",
    "note_stream_activity",
    "parse_model_spec",
    "parse_retry_after_ms",
    "reasoning_delta",
    "setting_problem",
    "spec_problem",
    "stream_chunks",
    "text_delta",
    "tool_call_delta",
    "turn_failure",
    "unknown_failure",
    "usage_chunk",
    "watching_stream_activity",
    "wire_tool_id",
]

if not _lazy.TYPE_CHECKING:  # PEP 562: each name's module loads on first use
    __getattr__, __dir__ = _lazy.lazy_exports(
        __name__,
        {
            "note_stream_activity": "._activity",
            "watching_stream_activity": "._activity",
            "AnthropicMessagesModel": "._anthropic",
            "check_anthropic_messages": "._anthropic",
            "BlockAssembler": "._assembler",
            "DeepSeekChatModel": "._chat_completions",
            "OpenAIChatModel": "._chat_completions",
            "check_chat_completions_messages": "._chat_completions",
            "BlockEndChunk": "._chunks",
            "BlockStartChunk": "._chunks",
            "FinishChunk": "._chunks",
            "FinishReason": "._chunks",
            "ReasoningDeltaChunk": "._chunks",
            "StreamChunk": "._chunks",
            "TextDeltaChunk": "._chunks",
            "TokenUsage": "._chunks",
            "ToolCallDeltaChunk": "._chunks",
            "UsageChunk": "._chunks",
            "block_end": "._chunks",
            "block_start": "._chunks",
            "finish_chunk": "._chunks",
            "reasoning_delta": "._chunks",
            "text_delta": "._chunks",
            "tool_call_delta": "._chunks",
            "usage_chunk": "._chunks",
            "code_for_status": "._errors",
            "is_context_window_exceeded": "._errors",
            "is_quota_exceeded": "._errors",
            "parse_retry_after_ms": "._errors",
            "failure_from_exception": "._failure",
            "turn_failure": "._failure",
            "unknown_failure": "._failure",
            "COMPACTION_PURPOSE": "._model",
            "Model": "._model",
            "ModelRequest": "._model",
            "ToolSchema": "._model",
            "stream_chunks": "._model",
            "PROVIDERS": "._model_spec",
            "SPEC_FORMS": "._model_spec",
            "ProviderSettings": "._model_spec",
            "parse_model_spec": "._model_spec",
            "setting_problem": "._model_spec",
            "spec_problem": "._model_spec",
            "RecordedResponse": "._replay",
            "ReplayModel": "._replay",
            "RetryPolicy": "._retry",
            "ScriptedModel": "._scripted",
            "ANTHROPIC_IDS": "._tool_ids",
            "CHAT_COMPLETIONS_IDS": "._tool_ids",
            "ToolIdMap": "._tool_ids",
            "ToolIdRule": "._tool_ids",
            "wire_tool_id": "._tool_ids",
            "context_window_of": "._windows",
        },
    )
