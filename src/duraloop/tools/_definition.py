"""Tool definitions: the `Tool` record and the `@tool` decorator.

See docs/scheduler.md#tool-definitions.

A tool is described to the model by `name`, `description` and a JSON Schema `parameters`;
everything else stays on this side: the argument validator, the body, the parallel-safe
classifier and the optional timeout. `@tool` builds all of it from a typed function.
"""

from __future__ import annotations

import functools
import inspect
import math
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeAlias, get_type_hints, overload

from pydantic import BaseModel, PydanticUserError

from ..errors import ToolDefinitionError
from ..log import JsonObject, JsonValue
from ._arguments import argument_model
from ._blocking import run_blocking
from ._context import ToolContext
from ._docstring import parse_docstring
from ._outcome import MIN_MAX_OUTPUT_BYTES
from ._schema import clean_schema

ToolBody: TypeAlias = Callable[[Any, ToolContext], Awaitable[object]]
"""An async callable `(validated_args, ctx) -> value` that runs the tool."""

ParallelClassifier: TypeAlias = Callable[[Any], object]
"""A pure, synchronous `(validated_args) -> True` that declares one call parallel-safe."""

ApprovalClassifier: TypeAlias = Callable[[Any], object]
"""A synchronous `(validated_args) -> bool` deciding whether one call asks for approval."""

_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True)
class Tool:
    """One tool: its model-facing schema plus the code that validates and runs a call.

    Build one with `@tool`, or directly when the arguments are not described by a function.

    Args:
        name: the name the model calls, 1-64 characters of `A-Z a-z 0-9 _ -`.
        description: what the tool does, shown to the model.
        parameters: the JSON Schema of the arguments object (a plain object schema).
        validator: turns the parsed JSON arguments into the value the body receives;
            raises `ValueError` (e.g. `pydantic.ValidationError`) on invalid arguments.
        body: async `(validated_args, ctx) -> value`; see `ToolPipeline.dispatch` for how
            the value becomes content.
        parallel: True for a parallel-safe tool, False for an exclusive one, or a
            classifier called with the validated args; only an exact `True` from it makes
            the call parallel-safe (docs/scheduler.md#tool-definitions).
        timeout_seconds: a limit on the body in seconds, or None for none. An async body is
            cancelled at its next await; a sync body running in a thread is not abandoned,
            and the timeout is reported when it returns.
        watches_signal: True when the body watches `ctx.signal` and settles itself on
            cancellation (like `bash`, which terminates its process group); an async one
            still running `ctx.cancel_grace_seconds` after the signal is cancelled at its
            next await. False (the default): when the turn is cancelled, an async body is
            cancelled at its next await and the call gets an `ABORTED` result. A sync body
            in its thread cannot be interrupted either way: it gets the grace period to
            return, and a success it returns is reported `ABORTED` with its output (the
            effect happened); past the grace period its call is answered
            `TOOL_OUTCOME_UNKNOWN` and the loop stops waiting for it.
        max_output_bytes: the cap on this tool's result content in bytes; None (the
            default) uses the loop's `LoopConfig.max_tool_output_bytes` (256 KB). Longer
            output is cut and ends with `[truncated: <n> more bytes of output]`.
        requires_approval: True when every call asks a person first, or a classifier called
            with the validated args; anything but an exact `False` from it (a raise, a
            non-bool) asks: fail closed (docs/approvals.md#which-calls-ask).
        idempotent: True declares that running a call twice with the same arguments and
            `ctx.idempotency_key` has the effect of running it once; then, and only then, a
            `TOOL_OUTCOME_UNKNOWN` call of the tool may be re-run by an explicit
            `duraloop resume --retry-unknown`, never automatically
            (docs/recovery.md#re-running-outcome-unknown-calls).

    Raises:
        ToolDefinitionError: if the name, parameters, parallel, timeout, output cap or
            idempotent flag is invalid.
    """

    name: str
    description: str
    parameters: JsonObject
    validator: Callable[[JsonValue], Any]
    body: ToolBody
    parallel: bool | ParallelClassifier = False
    timeout_seconds: float | None = None
    watches_signal: bool = False
    max_output_bytes: int | None = None
    requires_approval: bool | ApprovalClassifier = False
    idempotent: bool = False

    def __post_init__(self) -> None:
        if not _NAME_PATTERN.match(self.name):
            raise ToolDefinitionError(
                f"tool name {self.name!r} is invalid: use 1-64 characters of A-Z, a-z, 0-9, _ or -"
            )
        if self.parameters.get("type") != "object":
            raise ToolDefinitionError(
                f'tool "{self.name}" parameters must be a JSON Schema with "type": "object", '
                f"got {self.parameters.get('type')!r}"
            )
        for option in ("parallel", "requires_approval"):
            value = getattr(self, option)
            if not isinstance(value, bool) and not callable(value):
                raise ToolDefinitionError(
                    f'tool "{self.name}" {option} must be a bool or a callable, '
                    f"got {type(value).__name__}"
                )
        if self.timeout_seconds is not None and not (
            math.isfinite(self.timeout_seconds) and self.timeout_seconds > 0
        ):
            raise ToolDefinitionError(
                f'tool "{self.name}" timeout_seconds must be > 0 and finite, '
                f"got {self.timeout_seconds!r}"
            )
        if type(self.idempotent) is not bool:
            raise ToolDefinitionError(
                f'tool "{self.name}" idempotent must be True or False, '
                f"got {type(self.idempotent).__name__}"
            )
        cap = self.max_output_bytes
        if cap is not None and (type(cap) is not int or cap < MIN_MAX_OUTPUT_BYTES):
            raise ToolDefinitionError(
                f'tool "{self.name}" max_output_bytes must be an integer >= '
                f"{MIN_MAX_OUTPUT_BYTES} or None, got {cap!r}"
            )

    def schema(self) -> JsonObject:
        """Return the model-facing schema.

        Returns:
            `{"name": str, "description": str, "parameters": JSON Schema object}`.
        """
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    def is_parallel(self, arguments: JsonValue) -> bool:
        """Classify one call as parallel-safe (True) or exclusive (False); never raises.

        Only `parallel=True`, or a classifier returning exactly `True` for the validated
        arguments, is parallel-safe. Invalid arguments, a raising classifier or any other
        return value means exclusive (docs/scheduler.md#tool-definitions).

        Args:
            arguments: the parsed JSON arguments of the call.

        Returns:
            Whether the call may run alongside other parallel-safe calls.
        """
        if isinstance(self.parallel, bool):
            return self.parallel
        try:
            verdict = self.parallel(self.validator(arguments))
        # a failing classifier means exclusive (docs/scheduler.md#tool-definitions)
        except Exception:  # noqa: BLE001
            return False
        return verdict is True


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    parallel: bool | ParallelClassifier = False,
    timeout_seconds: float | None = None,
    watches_signal: bool = False,
    max_output_bytes: int | None = None,
    requires_approval: bool | ApprovalClassifier = False,
    idempotent: bool = False,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    parallel: bool | ParallelClassifier = False,
    timeout_seconds: float | None = None,
    watches_signal: bool = False,
    max_output_bytes: int | None = None,
    requires_approval: bool | ApprovalClassifier = False,
    idempotent: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Turn a typed function (sync or async) into a `Tool`.

    The arguments are the function's annotated parameters, or the fields of its single
    parameter when that is a pydantic `BaseModel` subclass. A parameter annotated
    `ToolContext` is injected and hidden from the model. The description defaults to the
    docstring's first paragraph, and parameter descriptions come from its `Args:` section.
    A sync function runs in a daemon thread of its own: it cannot be interrupted, so after
    cancellation it gets `ToolContext.cancel_grace_seconds` to return, and if it is still
    running then its call is answered `TOOL_OUTCOME_UNKNOWN` without it (`_blocking.py`).

    Args:
        fn: the function, when used as bare `@tool`.
        name: the tool name; defaults to the function's `__name__`.
        description: the model-facing description; defaults to the docstring.
        parallel: see `Tool`; a classifier receives the validated argument model.
        timeout_seconds: see `Tool`.
        watches_signal: see `Tool`.
        max_output_bytes: see `Tool`.
        requires_approval: see `Tool`; a classifier receives the validated argument model.
        idempotent: see `Tool`.

    Returns:
        The `Tool` (bare `@tool`), or a decorator producing it.

    Raises:
        ToolDefinitionError: if the function cannot describe a tool (`*args`, `**kwargs`,
            a missing annotation, an unsupported type, no description); the message names
            the function and the fix.
    """
    # Annotations naming classes local to the caller (e.g. a model defined in a function,
    # with `from __future__ import annotations`) resolve against the caller's locals.
    frame = inspect.currentframe()
    caller = frame.f_back if frame is not None else None
    local_names = dict(caller.f_locals) if caller is not None else {}
    del frame, caller

    def decorate(function: Callable[..., Any]) -> Tool:
        return _build_tool(
            function,
            local_names=local_names,
            name=name,
            description=description,
            parallel=parallel,
            timeout_seconds=timeout_seconds,
            watches_signal=watches_signal,
            max_output_bytes=max_output_bytes,
            requires_approval=requires_approval,
            idempotent=idempotent,
        )

    if fn is not None:
        return decorate(fn)
    return decorate


def _build_tool(
    fn: Callable[..., Any],
    *,
    local_names: dict[str, Any],
    name: str | None,
    description: str | None,
    parallel: bool | ParallelClassifier,
    timeout_seconds: float | None,
    watches_signal: bool,
    max_output_bytes: int | None,
    requires_approval: bool | ApprovalClassifier,
    idempotent: bool,
) -> Tool:
    label = getattr(fn, "__qualname__", repr(fn))
    if not callable(fn):
        raise ToolDefinitionError(f"@tool needs a function, got {type(fn).__name__}")
    if inspect.isasyncgenfunction(fn) or inspect.isgeneratorfunction(fn):
        raise ToolDefinitionError(f"tool function {label} is a generator; return a value instead")
    try:
        signature = inspect.signature(fn)
        hints = get_type_hints(fn, localns=local_names, include_extras=True)
    except (NameError, TypeError, ValueError) as exc:
        raise ToolDefinitionError(
            f"tool function {label} has annotations that cannot be resolved: {exc}"
        ) from exc
    doc = parse_docstring(inspect.getdoc(fn))
    tool_description = description if description is not None else doc.summary
    if not tool_description:
        raise ToolDefinitionError(
            f"tool function {label} has no description: add a docstring or pass description="
        )

    context_param: inspect.Parameter | None = None
    params: list[inspect.Parameter] = []
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolDefinitionError(
                f"tool function {label} takes *{param.name}: declare each argument "
                "as a named, annotated parameter"
            )
        if param.name not in hints:
            raise ToolDefinitionError(
                f"tool function {label} parameter {param.name!r} has no type annotation: "
                "annotate it so the argument schema can be built"
            )
        if hints[param.name] is ToolContext:
            if context_param is not None:
                raise ToolDefinitionError(
                    f"tool function {label} declares ToolContext twice "
                    f"({context_param.name!r} and {param.name!r}); keep one"
                )
            context_param = param
            continue
        params.append(param)

    model, field_names = argument_model(fn, label, params, hints, doc.args)
    try:
        parameters = clean_schema(model.model_json_schema())
    except PydanticUserError as exc:
        raise ToolDefinitionError(
            f"tool function {label} has arguments without a JSON Schema: {exc}"
        ) from exc

    def validator(arguments: JsonValue) -> BaseModel:
        if not isinstance(arguments, dict):
            raise ValueError(
                f"arguments must be a JSON object, got {type(arguments).__name__} "
                f"{_preview(arguments)}"
            )
        return model.model_validate(arguments)

    model_param = params[0] if field_names is None else None
    is_async = inspect.iscoroutinefunction(fn)
    positional_only = [
        p.name for p in signature.parameters.values() if p.kind is p.POSITIONAL_ONLY
    ]  # in signature order, computed once, not per call

    async def body(args: Any, ctx: ToolContext) -> object:
        values: dict[str, object] = {}
        if model_param is not None:
            values[model_param.name] = args
        else:
            names = field_names or {}
            for param in params:
                values[param.name] = getattr(args, names[param.name])
        if context_param is not None:
            values[context_param.name] = ctx
        positional = [values.pop(name) for name in positional_only if name in values]
        if is_async:
            result: object = await fn(*positional, **values)
            return result
        call = functools.partial(fn, *positional, **values)
        return await run_blocking(
            call,
            signal=ctx.signal,
            grace_seconds=ctx.cancel_grace_seconds,
            name=f"duraloop tool {ctx.tool_name} ({ctx.call_id})",
        )

    return Tool(
        name=name if name is not None else fn.__name__,
        description=tool_description,
        parameters=parameters,
        validator=validator,
        body=body,
        parallel=parallel,
        timeout_seconds=timeout_seconds,
        watches_signal=watches_signal,
        max_output_bytes=max_output_bytes,
        requires_approval=requires_approval,
        idempotent=idempotent,
    )


def _preview(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:77]}..."
