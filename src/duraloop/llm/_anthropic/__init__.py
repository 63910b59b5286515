"""The Anthropic Messages dialect: adapter, request bodies, stream events, errors, pairing view.

Private (style rule D3): the adapter is public as `duraloop.llm.AnthropicMessagesModel`.
"""

from ._model import AnthropicMessagesModel as AnthropicMessagesModel
from ._pairing import check_anthropic_messages as check_anthropic_messages

__all__ = ["AnthropicMessagesModel", "check_anthropic_messages"]
