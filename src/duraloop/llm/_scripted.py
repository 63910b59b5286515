"""The scripted model: the embedded default model, driven by a list of canned responses.

Each `stream()` call consumes one response and streams it the way a real provider does:
a reasoning block, a text block split at word boundaries, one block per tool call with its
arguments split across deltas, then `usage` and `finish`. It needs no key and no network,
so `duraloop demo`, the tests and the benchmarks all run on it.

A response is a JSON object:
`{"text"?, "reasoning"?, "tool_calls"?: [{"id"?, "name", "arguments"}], "finish"?,
"error"?: {"code", "message"}, "delay_ms"?}`; `error.code` is an `LlmError` code
(`LLM_ERROR_CODES` or `HTTP_<status>`), so the retry policy treats it as a provider's.
A string `arguments` is sent raw (a script may send malformed JSON on purpose); an object
is JSON-encoded compactly. A missing call id becomes `call_<n>`, unique within the script.

The reported `usage` is an estimate, not a tokenizer's count: `inputTokens` is the
characters of the whole prompt (system prompt, message text, reasoning, tool-call names and
arguments, tool-result text) divided by 4, kept incrementally across requests;
`outputTokens` is the response's characters divided by 4.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import anyio

from ..errors import ConfigError, LlmError
from ..log import JsonValue, Message
from ..log.vocabulary import (
    BLOCK_REASONING,
    BLOCK_TEXT,
    BLOCK_TOOL_CALL,
    BLOCK_TOOL_RESULT,
    FINISH_MAX_TOKENS,
    FINISH_STOP,
    FINISH_TOOL_CALLS,
    SCRIPT_EXHAUSTED,
)
from ._chunks import (
    FinishKind,
    StreamChunk,
    block_end,
    block_start,
    finish_chunk,
    reasoning_delta,
    text_delta,
    tool_call_delta,
    usage_chunk,
)
from ._errors import LLM_ERROR_CODES, is_llm_error_code
from ._model import ModelRequest
from ._windows import checked_context_window

_KEYS: Final = frozenset({"text", "reasoning", "tool_calls", "finish", "error", "delay_ms"})
_FINISHES: Final = (FINISH_STOP, FINISH_TOOL_CALLS, FINISH_MAX_TOKENS)
_PIECES: Final = 4
_CHARS_PER_TOKEN: Final = 4


@dataclass(frozen=True, slots=True)
class _Call:
    call_id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class _Response:
    text: str
    reasoning: str
    calls: tuple[_Call, ...]
    finish: FinishKind
    error: tuple[str, str] | None
    delay_ms: int


class ScriptedModel:
    """A model that replays a script of responses, one per model request.

    Args:
        responses: the script: one response object per expected model request.
        name: the model id reported in assistant message sources.
        path: the script file, named in error messages; None for an in-memory script.
        context_window: the context window to report, in tokens (`context_window_of`);
            None (the default) for none. A plain attribute: a test may set it later.

    Attributes:
        provider: always `scripted`.
        model: `name`.
        context_window: as given.
        requests: every `ModelRequest` received, in order (including one past the end).

    Raises:
        ConfigError: if a response is malformed, or its `error.code` is not an `LlmError`
            code, or `context_window` is not None or an integer >= 1; the message names
            the response and field (and lists the valid codes).
    """

    __test__ = False

    def __init__(
        self,
        responses: Sequence[Mapping[str, JsonValue]],
        *,
        name: str = "scripted",
        path: str | None = None,
        context_window: int | None = None,
    ) -> None:
        self.provider = "scripted"
        self.model = name
        self.context_window = checked_context_window(context_window, what="scripted model's")
        self.requests: list[ModelRequest] = []
        self._path = path
        self._responses = _parse_script(responses, where=path or "the scripted model's script")
        self._counted: list[Message] = []  # the previous request's history, in order
        self._counted_chars = 0  # the character estimate of `_counted`

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> ScriptedModel:
        """Load a script from a JSON file whose top level is a list of responses.

        Args:
            path: the script file.

        Returns:
            A model named after the file stem.

        Raises:
            ConfigError: if the file cannot be read, is not JSON, or a response is malformed.
        """
        file = Path(path)
        try:
            raw = json.loads(file.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"cannot read model script {file}: {exc.strerror}") from exc
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ConfigError(f"model script {file} is not valid JSON: {exc}") from exc
        if not isinstance(raw, list):
            raise ConfigError(
                f"model script {file} must hold a JSON list of responses, "
                f"got a {type(raw).__name__}"
            )
        return cls(raw, name=file.stem, path=str(file))

    @property
    def remaining_count(self) -> int:
        """The number of responses not yet consumed."""
        return len(self._responses) - len(self.requests)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        """Stream the next scripted response.

        Args:
            request: the request; recorded in `requests`.

        Yields:
            Reasoning, text and tool-call blocks, then `usage`, then `finish`.

        Raises:
            LlmError: `SCRIPT_EXHAUSTED` when no response is left; the response's own
                code when it carries an `error` (after its text has streamed).
        """
        self.requests.append(request)
        number = len(self.requests)
        if number > len(self._responses):
            where = self._path or "the script"
            raise LlmError(
                f"scripted model has no response left for request {number} "
                f"(the script has {len(self._responses)} responses); add responses to {where}",
                code=SCRIPT_EXHAUSTED,
            )
        response = self._responses[number - 1]
        if response.delay_ms > 0:
            await anyio.sleep(response.delay_ms / 1000)
        index = 0
        if response.reasoning:
            yield block_start(index, "reasoning")
            for piece in _split_words(response.reasoning):
                yield reasoning_delta(index, piece)
            yield block_end(index, {"type": BLOCK_REASONING, "text": response.reasoning})
            index += 1
        if response.text:
            yield block_start(index, "text")
            for piece in _split_words(response.text):
                yield text_delta(index, piece)
            if response.error is None:
                yield block_end(index, {"type": BLOCK_TEXT, "text": response.text})
            index += 1
        if response.error is not None:
            code, message = response.error
            raise LlmError(message, code=code)
        for call in response.calls:
            yield block_start(index, BLOCK_TOOL_CALL)
            yield tool_call_delta(index, call_id=call.call_id, name=call.name, arguments_delta="")
            for piece in _split_even(call.arguments):
                yield tool_call_delta(
                    index, call_id=call.call_id, name=call.name, arguments_delta=piece
                )
            block = {
                "type": BLOCK_TOOL_CALL,
                "id": call.call_id,
                "name": call.name,
                "arguments": call.arguments,
            }
            yield block_end(index, block)
            index += 1
        output_chars = len(response.text) + len(response.reasoning)
        output_chars += sum(len(call.arguments) + len(call.name) for call in response.calls)
        yield usage_chunk(
            input_tokens=self._input_tokens(request),
            output_tokens=output_chars // _CHARS_PER_TOKEN,
            reasoning_tokens=(
                len(response.reasoning) // _CHARS_PER_TOKEN if response.reasoning else None
            ),
        )
        yield finish_chunk(response.finish)

    def _input_tokens(self, request: ModelRequest) -> int:
        """Estimate the prompt's input tokens: its characters / 4, O(new messages) per request.

        The figure stands in for the count a real provider reports for the whole prompt:
        the characters of the system prompt plus every message's text, reasoning, tool-call
        name and arguments and tool-result text, divided by 4. The history's total is kept
        from the previous request: when the new history starts with the same messages (one
        list comparison, which compares identical items by pointer in C), only the new
        messages are counted; any other change (a fork, a replaced surface) recounts the
        whole history once.
        """
        messages = request.messages
        counted = self._counted
        count = len(counted)
        prefix = messages[:count]
        if type(prefix) is not list:
            prefix = list(prefix)
        if len(prefix) == count and prefix == counted:
            tail = messages[count:]
            counted.extend(tail)
            self._counted_chars += sum(map(_message_chars, tail))
        else:
            self._counted = list(messages)
            self._counted_chars = sum(map(_message_chars, messages))
        return (len(request.system or "") + self._counted_chars) // _CHARS_PER_TOKEN


def _message_chars(message: Mapping[str, JsonValue]) -> int:
    total = 0
    for block in message.get("content", ()):
        kind = block.get("type")
        if kind in (BLOCK_TEXT, BLOCK_REASONING):
            total += len(block.get("text", ""))
        elif kind == BLOCK_TOOL_CALL:
            total += len(block.get("arguments", "")) + len(block.get("name", ""))
        elif kind == BLOCK_TOOL_RESULT:
            total += _message_chars(block)
    return total


def _split_words(text: str) -> list[str]:
    """Split `text` into up to `_PIECES` pieces, each cut just after a space."""
    length = len(text)
    pieces: list[str] = []
    start = 0
    for part in range(1, _PIECES):
        cut = text.find(" ", max(start, length * part // _PIECES))
        if cut == -1:
            break
        cut += 1
        if cut >= length:
            break
        pieces.append(text[start:cut])
        start = cut
    pieces.append(text[start:])
    return pieces


def _split_even(text: str) -> list[str]:
    """Split `text` into up to 3 pieces of similar length (at least one, maybe empty)."""
    step = max(1, -(-len(text) // 3))
    return [text[i : i + step] for i in range(0, len(text), step)] or [""]


def _parse_script(responses: Sequence[Mapping[str, JsonValue]], *, where: str) -> list[_Response]:
    if isinstance(responses, (str, bytes)) or not isinstance(responses, Sequence):
        raise ConfigError(f"{where} must be a list of responses, got {type(responses).__name__}")
    explicit_ids = {
        call.get("id")
        for response in responses
        if isinstance(response, Mapping) and isinstance(response.get("tool_calls"), list)
        for call in response["tool_calls"]
        if isinstance(call, Mapping)
    }
    counter = 0

    def fresh_id() -> str:
        nonlocal counter
        while True:
            counter += 1
            candidate = f"call_{counter}"
            if candidate not in explicit_ids:
                return candidate

    parsed: list[_Response] = []
    for number, response in enumerate(responses, start=1):
        parsed.append(_parse_response(response, fresh_id, where=f"{where}: response {number}"))
    return parsed


def _parse_response(raw: object, fresh_id: Callable[[], str], *, where: str) -> _Response:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where} must be a JSON object, got {type(raw).__name__}")
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        raise ConfigError(f"{where} has unknown keys {unknown}; allowed keys are {sorted(_KEYS)}")
    text = _string(raw, "text", where)
    reasoning = _string(raw, "reasoning", where)
    raw_calls = raw.get("tool_calls", [])
    if not isinstance(raw_calls, list):
        raise ConfigError(f"{where}: tool_calls must be a list, got {type(raw_calls).__name__}")
    calls = tuple(
        _parse_call(c, fresh_id, where=f"{where}, tool call {i}")
        for i, c in enumerate(raw_calls, start=1)
    )
    finish = raw.get("finish", FINISH_TOOL_CALLS if calls else FINISH_STOP)
    if finish not in _FINISHES:
        raise ConfigError(f"{where}: finish must be one of {list(_FINISHES)}, got {finish!r}")
    error = raw.get("error")
    parsed_error: tuple[str, str] | None = None
    if error is not None:
        if not (
            isinstance(error, Mapping)
            and isinstance(error.get("code"), str)
            and isinstance(error.get("message"), str)
            and error["code"]
            and error["message"]
        ):
            raise ConfigError(
                f'{where}: error must be {{"code": str, "message": str}} with non-empty '
                f"values, got {error!r}"
            )
        if not is_llm_error_code(error["code"]):
            raise ConfigError(
                f"{where}: error code {error['code']!r} is not an LlmError code (no "
                f"retry policy would ever retry it); use one of {', '.join(LLM_ERROR_CODES)}, "
                "or HTTP_<status> (e.g. HTTP_404)"
            )
        parsed_error = (error["code"], error["message"])
    delay_ms = raw.get("delay_ms", 0)
    if type(delay_ms) is not int or delay_ms < 0:
        raise ConfigError(f"{where}: delay_ms must be an integer >= 0, got {delay_ms!r}")
    return _Response(text, reasoning, calls, finish, parsed_error, delay_ms)


def _parse_call(raw: object, fresh_id: Callable[[], str], *, where: str) -> _Call:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where} must be a JSON object, got {type(raw).__name__}")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{where}: name must be a non-empty string, got {name!r}")
    if "arguments" not in raw:
        raise ConfigError(f"{where} ({name}): arguments is missing (use {{}} for none)")
    arguments = raw["arguments"]
    if not isinstance(arguments, str):
        try:
            arguments = json.dumps(arguments, separators=(",", ":"), ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{where} ({name}): arguments are not JSON: {exc}") from exc
    call_id = raw.get("id")
    if call_id is None:
        call_id = fresh_id()
    if not isinstance(call_id, str) or not call_id:
        raise ConfigError(f"{where} ({name}): id must be a non-empty string, got {call_id!r}")
    return _Call(call_id, name, arguments)


def _string(raw: Mapping[str, object], key: str, where: str) -> str:
    value = raw.get(key, "")
    if not isinstance(value, str):
        raise ConfigError(f"{where}: {key} must be a string, got {type(value).__name__}")
    return value
