"""The Anthropic Messages dialect: adapter, request bodies, stream events, errors, pairing view.

Private (style rule D3): the adapter is public as `duraloop.llm.AnthropicMessagesModel`.
"""

from ... import _lazy

if _lazy.TYPE_CHECKING:
    from ._model import AnthropicMessagesModel as AnthropicMessagesModel
    from ._pairing import check_anthropic_messages as check_anthropic_messages

__all__ = ["AnthropicMessagesModel", "check_anthropic_messages"]

if not _lazy.TYPE_CHECKING:  # PEP 562: each name's module loads on first use
    __getattr__, __dir__ = _lazy.lazy_exports(
        __name__,
        {
            "AnthropicMessagesModel": "._model",
            "check_anthropic_messages": "._pairing",
        },
    )
