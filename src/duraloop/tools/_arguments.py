"""The pydantic model that validates a `@tool` function's arguments.

See docs/scheduler.md#tool-definitions.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pydantic
from pydantic import BaseModel, ConfigDict, Field, PydanticUserError

from ..errors import ToolDefinitionError


def argument_model(
    fn: Callable[..., Any],
    label: str,
    params: list[inspect.Parameter],
    hints: dict[str, Any],
    arg_docs: dict[str, str],
) -> tuple[type[BaseModel], dict[str, str] | None]:
    """Build (or pick) the pydantic model that validates the arguments.

    Returns:
        `(model, field_names)`: `field_names` maps each parameter to its model field, or is
        None when the single parameter is itself the model.

    Raises:
        ToolDefinitionError: if pydantic cannot build a model for the annotations.
    """
    if len(params) == 1:
        annotation = hints[params[0].name]
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            return annotation, None
    fields: dict[str, Any] = {}
    field_names: dict[str, str] = {}
    for param in params:
        default = ... if param.default is inspect.Parameter.empty else param.default
        field_name = param.name
        alias = None
        if param.name.startswith("_") or hasattr(BaseModel, param.name):
            field_name, alias = f"arg_{param.name.lstrip('_')}_", param.name
        field_names[param.name] = field_name
        info = Field(default, alias=alias, description=arg_docs.get(param.name))
        fields[field_name] = (hints[param.name], info)
    model_name = "".join(part.title() for part in fn.__name__.split("_")) + "Arguments"
    try:
        model: type[BaseModel] = pydantic.create_model(
            model_name,
            __config__=ConfigDict(extra="forbid", protected_namespaces=()),
            **fields,
        )
    except (PydanticUserError, TypeError, NameError) as exc:
        raise ToolDefinitionError(
            f"tool function {label} has an argument type pydantic cannot validate: {exc}"
        ) from exc
    return model, field_names
