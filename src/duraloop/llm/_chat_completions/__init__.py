"""The Chat Completions dialect: its shared transport and its OpenAI and DeepSeek adapters.

Also its request bodies, stream payloads, error mapping and pairing view.

Private (style rule D3): the adapters are public as `duraloop.llm.OpenAIChatModel` and
`duraloop.llm.DeepSeekChatModel`.
"""

from ._deepseek import DeepSeekChatModel as DeepSeekChatModel
from ._openai import OpenAIChatModel as OpenAIChatModel
from ._pairing import check_chat_completions_messages as check_chat_completions_messages
from ._transport import ChatCompletionsModel as ChatCompletionsModel

__all__ = [
    "ChatCompletionsModel",
    "DeepSeekChatModel",
    "OpenAIChatModel",
    "check_chat_completions_messages",
]
