"""The conversation items of `GET /api/sessions/{id}/messages` (docs/view.md#messages).

A human view: it reads the append-origin surface events, never the folded surface (a surface
replace, e.g. a compaction, would erase text the person saw; session-spec "Human transcripts
must NOT read the surface").
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from duraloop.log import Event, result_call_id
from duraloop.log import vocabulary as v

from ._cut import cut
from ._timeline import error_json

_MAX_NAME_CHARS = 200


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(blocks: object, block_type: str) -> str:
    items = blocks if isinstance(blocks, list) else []
    return "".join(
        str(block.get("text", ""))
        for block in items
        if isinstance(block, dict) and block.get("type") == block_type
    )


def _item(event: Event, kind: str, turn: int | None, step: int | None) -> dict[str, Any]:
    return {
        "seq": event.seq,
        "kind": kind,
        "turn": turn,
        "step": step,
        "time": event.time,
        "text": "",
        "reasoning": None,
        "tool_calls": None,
        "call_id": None,
        "is_error": False,
        "code": None,
        "reason": None,
        "error": None,
    }


def turn_start_before(events: Sequence[Event], index: int) -> int:
    """Return the index of the `turn/start` at or before `index` (0 if there is none).

    Items read from there know their turn and step (`iter_items(events, start)`).
    """
    index = min(index, len(events) - 1)
    while index > 0 and events[index].type != v.TURN_START:
        index -= 1
    return max(index, 0)


def iter_items(events: Sequence[Event], start: int = 0) -> Iterator[dict[str, Any]]:
    """Yield the conversation items of a log in seq order (docs/view.md#messages).

    Args:
        events: the log as stored.
        start: the index to read from: 0, or a `turn/start`'s (`turn_start_before`).

    Yields:
        One Item per prompt, assistant message, tool result, turn start and end, and failed
        model attempt (`step_failed`: an error `finish` chunk), every string cut.
    """
    turn: int | None = None
    step: int | None = None
    for index in range(start, len(events)):
        event = events[index]
        kind = event.type
        data = _dict(event.data)
        if kind == v.TURN_START:
            turn = data.get("turn") if isinstance(data.get("turn"), int) else None
            step = None
            yield _item(event, "turn_start", turn, None)
        elif kind == v.STEP_START:
            step = data.get("step") if isinstance(data.get("step"), int) else None
        elif kind == v.TURN_END:
            item = _item(event, "turn_end", turn, None)
            reason = _dict(data.get("reason"))
            kind_text = reason.get("kind")
            item["reason"] = cut(kind_text, _MAX_NAME_CHARS) if isinstance(kind_text, str) else None
            item["error"] = error_json(reason.get("error"))
            turn = step = None
            yield item
        elif event.surface_op != v.SURFACE_APPEND and kind in v.SURFACE_TYPES:
            continue
        elif kind == v.USER_MESSAGE:
            item = _item(event, "user", turn, step)
            item["text"] = cut(_text(data.get("content"), v.BLOCK_TEXT))
            source = _dict(data.get("source")).get("kind")
            item["reason"] = None if source in (None, "user") else cut(str(source), _MAX_NAME_CHARS)
            yield item
        elif kind == v.ASSISTANT_MESSAGE:
            yield _assistant(event, data, turn, step)
        elif kind == v.TOOL_RESULT:
            yield _result(event, data, turn, step)
        elif kind == v.ASSISTANT_CHUNK:
            chunk = _dict(data.get("chunk"))
            reason = _dict(chunk.get("reason"))
            if chunk.get("type") == v.FINISH and reason.get("kind") == v.FINISH_ERROR:
                item = _item(event, "step_failed", turn, step)
                item["error"] = error_json(reason.get("failure"))
                item["is_error"] = True
                item["code"] = (item["error"] or {}).get("code")
                yield item


def _assistant(
    event: Event, data: dict[str, Any], turn: int | None, step: int | None
) -> dict[str, Any]:
    item = _item(event, "assistant", turn, step)
    content = _dict(data.get("message")).get("content")
    item["text"] = cut(_text(content, v.BLOCK_TEXT))
    reasoning = _text(content, v.BLOCK_REASONING)
    item["reasoning"] = cut(reasoning) if reasoning else None
    calls = [
        {
            "call_id": cut(str(block.get("id", "")), _MAX_NAME_CHARS),
            "name": cut(str(block.get("name", "")), _MAX_NAME_CHARS),
            "arguments": cut(str(block.get("arguments", ""))),
        }
        for block in (content if isinstance(content, list) else [])
        if isinstance(block, dict) and block.get("type") == v.BLOCK_TOOL_CALL
    ]
    item["tool_calls"] = calls or None
    item["reason"] = "interrupted" if data.get("interrupted") is True else None
    return item


def _result(
    event: Event, data: dict[str, Any], turn: int | None, step: int | None
) -> dict[str, Any]:
    item = _item(event, "tool_result", turn, step)
    message = _dict(data.get("message"))
    call_id = result_call_id(message)
    item["call_id"] = cut(call_id, _MAX_NAME_CHARS) if isinstance(call_id, str) else None
    content = message.get("content")
    first = _dict(content[0]) if isinstance(content, list) and content else {}
    item["is_error"] = first.get("isError") is True
    parts = first.get("content") if "content" in first else content
    item["text"] = cut(_text(parts, v.BLOCK_TEXT))
    error = error_json(data.get("error"))
    item["error"] = error
    item["code"] = error["code"] if error is not None else None
    return item
