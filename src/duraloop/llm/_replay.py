"""The replay model: answer each request with the next recorded assistant message of a log.

A recorded session (ours or dsh's) is re-run against a new workspace and new tools: the
first model request gets the first recorded assistant message, the second request the
second, and so on, whatever the request holds. Each message is streamed the way an adapter
streams it (docs/providers.md#stream-contract): per block a `block-start`, one delta carrying the
whole text, reasoning or tool call (the recorded call id and raw arguments, verbatim), and a
`block-end` with the recorded block; then the recorded `usage`, if any, and a `finish`.

What counts as a recorded response (`recorded_responses`): every `assistant/message` event
in seq order, except interrupted ones (`interrupted: true`, a prefix kept after a
cancellation: no request was answered by it, docs/log.md#messages-and-content-blocks). Log events
    are used rather
than the derived messages because the derived history is what the *next* request sees: a
surface `replace` (compaction) can shadow an assistant message that nevertheless answered
a request. The finish kind is the recorded one, read from the `finish` chunk the message
cites in `sourceEventSeqs` (so a `max-tokens` step replays as `max-tokens`); when it is not
recorded (a log without chunks) it is `tool-calls` if the message has tool calls, else
`stop`. The recorded `replayState` is not replayed: it is private to the adapter that wrote
it (docs/providers.md#stream-contract), and this route is not that adapter.

Reading the log file is the caller's job (`llm/` must not import `store/`): the CLI reads
it with `duraloop.store.read_log_file` and passes the events in.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, cast

from ..errors import ConfigError, LlmError
from ..log import Event, JsonObject, Message, tool_calls_of
from ..log.vocabulary import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    BLOCK_REASONING,
    BLOCK_TEXT,
    BLOCK_TOOL_CALL,
    FINISH,
    FINISH_MAX_TOKENS,
    FINISH_STOP,
    FINISH_TOOL_CALLS,
    REPLAY_EXHAUSTED,
    USAGE,
)
from ._chunks import (
    FinishKind,
    StreamChunk,
    TokenUsage,
    block_end,
    block_start,
    finish_chunk,
    reasoning_delta,
    text_delta,
    tool_call_delta,
)
from ._model import ModelRequest

"""The `LlmError` code of a request made after every recorded response was replayed."""

PROVIDER: Final = "replay"
"""The provider route of a replay model, recorded in the sources of its messages."""

_FINISHES: Final[tuple[FinishKind, ...]] = (FINISH_STOP, FINISH_TOOL_CALLS, FINISH_MAX_TOKENS)
_STREAMED_BLOCKS: Final = frozenset({"text", "reasoning", BLOCK_TOOL_CALL, "image"})


@dataclass(frozen=True, slots=True)
class RecordedResponse:
    """One recorded answer to a model request.

    Args:
        message: the recorded assistant message; its content is replayed verbatim.
        finish: the recorded finish kind (`stop`, `tool-calls` or `max-tokens`); None
            means `tool-calls` when the message has tool calls, else `stop`.
        usage: the recorded token usage, replayed as the `usage` chunk; None sends none.
    """

    message: Message
    finish: FinishKind | None = None
    usage: TokenUsage | None = None


def recorded_responses(events: Sequence[Event]) -> list[RecordedResponse]:
    """Return the recorded answers of a session log, in seq order.

    Every `assistant/message` event counts except an interrupted one
    (docs/log.md#messages-and-content-blocks: a prefix kept after a cancellation answered no
    request). Its finish kind comes from the `finish` chunk among the `assistant/chunk` events it
    cites (`sourceEventSeqs`), when that finish is `stop`, `tool-calls` or `max-tokens`.

    Args:
        events: the whole log in seq order, as `duraloop.store.read_log_file` returns it.

    Returns:
        One `RecordedResponse` per answered request, in order (possibly empty).

    Raises:
        ConfigError: if an `assistant/message` event holds no message object.
    """
    responses: list[RecordedResponse] = []
    for event in events:
        if event.type != ASSISTANT_MESSAGE:
            continue
        data = event.data
        message = data.get("message") if isinstance(data, dict) else None
        if not isinstance(message, dict):
            raise ConfigError(
                f"the assistant/message event at seq {event.seq} holds no message object; "
                "run `duraloop check` on the log"
            )
        if data.get("interrupted") is True:
            continue
        usage = data.get("usage")
        responses.append(
            RecordedResponse(
                message=cast(Message, message),
                finish=_recorded_finish(events, event.source_event_seqs or ()),
                usage=cast(TokenUsage, usage) if isinstance(usage, dict) else None,
            )
        )
    return responses


def _recorded_finish(events: Sequence[Event], seqs: Sequence[int]) -> FinishKind | None:
    for seq in reversed(seqs):
        if not 0 <= seq < len(events) or events[seq].type != ASSISTANT_CHUNK:
            continue
        chunk = events[seq].data.get("chunk") if isinstance(events[seq].data, dict) else None
        if isinstance(chunk, dict) and chunk.get("type") == FINISH:
            reason = chunk.get("reason")
            kind = reason.get("kind") if isinstance(reason, dict) else None
            return cast(FinishKind, kind) if kind in _FINISHES else None
    return None


class ReplayModel:
    """A model that answers each request with the next recorded assistant message.

    Args:
        recorded: the answers, in request order: assistant messages or `RecordedResponse`s
            (a bare message replays with the default finish and no usage).
        name: the model id reported in the sources of the replayed messages.
        path: the log the answers were read from, named in error messages; None for an
            in-memory recording.

    Attributes:
        provider: always `replay`.
        model: `name`.
        requests: every `ModelRequest` received, in order (including one past the end).

    Raises:
        ConfigError: if an answer is not an assistant message, or holds a block that cannot
            be streamed (a type other than text, reasoning, tool-call or image, or a
            tool call without a string id, name and arguments); the message names it.
    """

    __test__ = False

    def __init__(
        self,
        recorded: Sequence[Message | RecordedResponse],
        *,
        name: str = PROVIDER,
        path: str | None = None,
    ) -> None:
        self.provider = PROVIDER
        self.model = name
        self.requests: list[ModelRequest] = []
        self._path = path
        where = path or "the recording"
        self._responses = [
            _checked(
                item if isinstance(item, RecordedResponse) else RecordedResponse(item),
                where=f"{where}: answer {number}",
            )
            for number, item in enumerate(recorded, start=1)
        ]

    @classmethod
    def from_events(
        cls, events: Sequence[Event], *, name: str = PROVIDER, path: str | None = None
    ) -> ReplayModel:
        """Build a replay model from a session log's events (see `recorded_responses`).

        Args:
            events: the whole log in seq order.
            name: the model id reported in the sources of the replayed messages.
            path: the log file, named in error messages.

        Returns:
            A model answering with the log's assistant messages in order.

        Raises:
            ConfigError: if the log records no assistant message, or one cannot be streamed.
        """
        responses = recorded_responses(events)
        if not responses:
            raise ConfigError(
                f"{path or 'the session log'} records no assistant message to replay "
                "(interrupted ones are skipped); pass the log of a session that reached a "
                "model answer"
            )
        return cls(responses, name=name, path=path)

    @property
    def recorded_count(self) -> int:
        """The number of recorded answers."""
        return len(self._responses)

    @property
    def remaining_count(self) -> int:
        """The number of recorded answers not yet replayed."""
        return max(0, len(self._responses) - len(self.requests))

    async def aclose(self) -> None:
        """Release nothing: a replay model holds no connection (the `Model` shape)."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        """Stream the next recorded assistant message.

        Args:
            request: the request; recorded in `requests`, otherwise ignored.

        Yields:
            Per block `block-start`, one delta, `block-end` (the recorded block); then the
            recorded `usage` if any, then `finish` (the recorded kind, or `tool-calls` /
            `stop`).

        Raises:
            LlmError: `REPLAY_EXHAUSTED` (not retryable) when every recorded answer has been
                replayed; the message says how many.
        """
        self.requests.append(request)
        number = len(self.requests)
        if number > len(self._responses):
            raise LlmError(
                f"replay model has no recorded assistant message left for request {number}: "
                f"all {len(self._responses)} recorded in {self._path or 'the recording'} were "
                "replayed; this session asked the model more often than the recorded one "
                "(different tool results can change the flow): continue it with another model "
                "(`duraloop resume ID PROMPT --model SPEC`)",
                code=REPLAY_EXHAUSTED,
                retryable=False,
            )
        response = self._responses[number - 1]
        for index, block in enumerate(response.message["content"]):
            for chunk in _block_chunks(index, block):
                yield chunk
        if response.usage is not None:
            yield {"type": USAGE, "usage": copy.deepcopy(response.usage)}
        finish = response.finish
        if finish is None:
            finish = FINISH_TOOL_CALLS if tool_calls_of(response.message) else FINISH_STOP
        yield finish_chunk(finish)


def _block_chunks(index: int, block: dict[str, Any]) -> list[StreamChunk]:
    kind = block["type"]
    chunks: list[StreamChunk] = [block_start(index, kind)]
    if kind == BLOCK_TEXT:
        chunks.append(text_delta(index, block["text"]))
    elif kind == BLOCK_REASONING:
        chunks.append(reasoning_delta(index, block["text"]))
    elif kind == BLOCK_TOOL_CALL:
        chunks.append(
            tool_call_delta(
                index, call_id=block["id"], name=block["name"], arguments_delta=block["arguments"]
            )
        )
    chunks.append(block_end(index, copy.deepcopy(block)))
    return chunks


def _checked(response: RecordedResponse, *, where: str) -> RecordedResponse:
    message: Any = response.message
    if not isinstance(message, dict) or message.get("role") != "assistant":
        role = message.get("role") if isinstance(message, dict) else type(message).__name__
        raise ConfigError(f"{where} is not an assistant message (role {role!r})")
    content = message.get("content")
    if not isinstance(content, list):
        raise ConfigError(f"{where} has no content list")
    for number, block in enumerate(content, start=1):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind not in _STREAMED_BLOCKS:
            raise ConfigError(
                f"{where}, block {number}: type {kind!r} cannot be replayed; a recorded "
                f"answer may hold {sorted(_STREAMED_BLOCKS)} blocks"
            )
        fields: tuple[str, ...] = {
            "text": ("text",),
            "reasoning": ("text",),
            BLOCK_TOOL_CALL: ("id", "name", "arguments"),
        }.get(kind, ())
        bad = [field for field in fields if not isinstance(block.get(field), str)]
        if bad or (kind == BLOCK_TOOL_CALL and not (block["id"] and block["name"])):
            raise ConfigError(
                f"{where}, block {number} ({kind}): {', '.join(bad) or 'id and name'} must be "
                f"{'strings' if bad else 'non-empty'}, got {_short(block)}"
            )
    if response.finish is not None and response.finish not in _FINISHES:
        raise ConfigError(
            f"{where}: finish must be one of {list(_FINISHES)}, got {response.finish!r}"
        )
    return response


def _short(value: JsonObject) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:197] + "..."
