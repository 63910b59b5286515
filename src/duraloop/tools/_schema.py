"""Clean a pydantic JSON Schema into the plain object schema a model sees."""

from __future__ import annotations

from typing import Any

from ..log import JsonObject

_SCHEMA_MAPS = frozenset({"properties", "$defs", "definitions", "patternProperties"})
_SCHEMA_LISTS = frozenset({"anyOf", "allOf", "oneOf", "prefixItems"})
_SCHEMA_VALUES = frozenset(
    {"items", "additionalProperties", "not", "contains", "propertyNames", "if", "then", "else"}
)


def clean_schema(schema: JsonObject) -> JsonObject:
    """Drop pydantic's `title` noise and make sure the root is an object schema.

    Only schema keywords are touched: a property that is *named* `title` stays, and
    `default`, `enum`, `const` and `examples` values are copied as they are.

    Args:
        schema: a JSON Schema as returned by `BaseModel.model_json_schema()`.

    Returns:
        A new schema with no `title` keywords, and `properties: {}` on an empty object root.
    """
    cleaned = _clean(schema)
    if cleaned.get("type") == "object" and "properties" not in cleaned:
        cleaned["properties"] = {}
    return cleaned


def _clean(node: JsonObject) -> JsonObject:
    out: JsonObject = {}
    for key, value in node.items():
        if key == "title" and isinstance(value, str):
            continue
        out[key] = _clean_value(key, value)
    return out


def _clean_value(key: str, value: Any) -> Any:
    if key in _SCHEMA_MAPS and isinstance(value, dict):
        return {name: _clean(sub) if isinstance(sub, dict) else sub for name, sub in value.items()}
    if key in _SCHEMA_LISTS and isinstance(value, list):
        return [_clean(sub) if isinstance(sub, dict) else sub for sub in value]
    if key in _SCHEMA_VALUES and isinstance(value, dict):
        return _clean(value)
    return value
