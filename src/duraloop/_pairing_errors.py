"""The pairing errors (defined here to keep `duraloop.errors` small; that is their home).

Pairing rule: docs/providers.md#chat-completions-pairing, #anthropic-pairing.
"""

from __future__ import annotations

from ._error_root import DuraloopError


class PairingError(DuraloopError):
    """Raised when derived messages leave a tool call unanswered or out of order.

    Pairing rule: OpenAI ("An assistant message with 'tool_calls' must be followed by tool
    messages"), Anthropic ("tool_use ids were found without tool_result blocks").
    """

    __module__ = "duraloop.errors"


class UnpairedHistoryError(PairingError):
    """Raised before anything is written when a session's closed history has unanswered calls.

    A step closed (`step/end`) with tool calls that have no `tool/result` makes every later
    model request invalid for the provider, and crash repair closes only an open final turn,
    so the session cannot be continued. A fork cut just before that step's end keeps all the
    history before it and closes the cut with crash repair's closers.

    Args:
        session_id: the session that cannot be continued.
        turn: the turn of the first damaged step.
        step: the first damaged step.
        call_ids: its unanswered call ids, in call order.
        rescue_seq: the fork cut that rescues the history (`duraloop fork ID --at SEQ`).
        rescue: the exact rescue command.
        damaged_steps: how many closed steps have unanswered calls in all.
    """

    __module__ = "duraloop.errors"

    def __init__(
        self,
        *,
        session_id: str,
        turn: int | None,
        step: int,
        call_ids: tuple[str, ...],
        rescue_seq: int,
        rescue: str,
        damaged_steps: int = 1,
    ) -> None:
        shown = ", ".join(repr(call_id[:80]) for call_id in call_ids[:5])
        if len(call_ids) > 5:
            shown += f" and {len(call_ids) - 5} more"
        others = f" ({damaged_steps - 1} later step(s) too)" if damaged_steps > 1 else ""
        super().__init__(
            f'session "{session_id}" cannot be continued: step {step} of turn {turn} was closed '
            f"with tool call(s) {shown} unanswered{others}, so every provider would refuse its "
            f"history. Nothing was written. Rescue the history before it into a new session with "
            f"`{rescue}` (in code: fork_session(..., boundary={rescue_seq})); the original "
            "session is not changed"
        )
        self.session_id = session_id
        self.turn = turn
        self.step = step
        self.call_ids = call_ids
        self.rescue_seq = rescue_seq
        self.rescue = rescue
        self.damaged_steps = damaged_steps

    def with_rescue(self, rescue: str) -> UnpairedHistoryError:
        """Return the same error naming another rescue command (the CLI adds `--store`)."""
        return UnpairedHistoryError(
            session_id=self.session_id,
            turn=self.turn,
            step=self.step,
            call_ids=self.call_ids,
            rescue_seq=self.rescue_seq,
            rescue=rescue,
            damaged_steps=self.damaged_steps,
        )


class WirePairingError(PairingError):
    """Raised before sending when a provider payload breaks that provider's pairing rule.

    The exact wire `messages` an adapter is about to send are checked
    (docs/providers.md#chat-completions-pairing for Chat Completions, 3.2 for Anthropic Messages).
    Derived history is already checked, so a violation here means duraloop converted a valid history
    into an invalid payload: a bug in duraloop, never in the caller's code. Nothing was sent; the
    message names the call, the wire message index and the rule, and quotes the provider's own error
    text where one is documented, so a search for that text finds this error.

    Args:
        detail: what is wrong, in the payload's own terms.
        provider: the provider route whose rule is broken (`openai`, `deepseek`,
            `anthropic`, ...).
        call_id: the wire tool-call id at fault; `""` when the rule concerns no call.
        message_index: the 0-based index into the wire `messages` list of the message at
            fault (the assistant message for an unanswered call, the result's message for
            an unexpected result); -1 when no one message is at fault (two history ids
            that map to the same wire id).
        rule: the stable name of the broken rule, e.g. `UNANSWERED_TOOL_CALL`.
        provider_error: the provider's documented error text for this rule, or None.
    """

    __module__ = "duraloop.errors"

    def __init__(
        self,
        detail: str,
        *,
        provider: str,
        call_id: str,
        message_index: int,
        rule: str,
        provider_error: str | None = None,
    ) -> None:
        quoted = f' Provider error for this rule: "{provider_error}"' if provider_error else ""
        call = f"tool call {call_id!r}" if call_id else "no tool call"
        where = f" at messages[{message_index}]" if message_index >= 0 else ""
        super().__init__(
            f"duraloop bug, please report it with the session log: the {provider} request "
            f"breaks the pairing rule {rule}{where} ({call}): {detail}."
            f"{quoted} Nothing was sent and the session log is unchanged."
        )
        self.detail = detail
        self.provider = provider
        self.call_id = call_id
        self.message_index = message_index
        self.rule = rule
        self.provider_error = provider_error
