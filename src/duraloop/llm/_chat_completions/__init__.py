"""The Chat Completions dialect: its shared transport and its OpenAI and DeepSeek adapters.

Also its request bodies, stream payloads, error mapping and pairing view.

Private (style rule D3): the adapters are public as `duraloop.llm.OpenAIChatModel` and
`duraloop.llm.DeepSeekChatModel`.
"""

from ... import _lazy

if _lazy.TYPE_CHECKING:
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

if not _lazy.TYPE_CHECKING:  # PEP 562: each name's module loads on first use
    __getattr__, __dir__ = _lazy.lazy_exports(
        __name__,
        {
            "DeepSeekChatModel": "._deepseek",
            "OpenAIChatModel": "._openai",
            "check_chat_completions_messages": "._pairing",
            "ChatCompletionsModel": "._transport",
        },
    )
