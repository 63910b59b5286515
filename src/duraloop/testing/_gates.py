"""Gates: deterministic ordering for concurrent tool bodies and pipeline stages (style rule D20).

A test decides the order in which concurrent work proceeds by releasing gates by key
(usually a call id), never by sleeping. Gated code calls `await gates.wait(key)`; the test
awaits `gates.wait_entered(key)` to know it is blocked there, then `gates.release(key)`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import anyio

from ..log import JsonValue
from ..tools import Tool, ToolContext


@dataclass
class _Gate:
    entered: anyio.Event = field(default_factory=anyio.Event)
    released: anyio.Event = field(default_factory=anyio.Event)
    error: BaseException | None = None


class Gates:
    """A set of gates keyed by string; each gate is passed once, after its release.

    Attributes:
        entered: keys in the order code reached their gate.
        passed: keys in the order code went through their gate (after release).
    """

    __test__ = False

    def __init__(self) -> None:
        self._gates: dict[str, _Gate] = {}
        self.entered: list[str] = []
        self.passed: list[str] = []

    def _gate(self, key: str) -> _Gate:
        gate = self._gates.get(key)
        if gate is None:
            gate = self._gates[key] = _Gate()
        return gate

    async def wait(self, key: str) -> None:
        """Block at gate `key` until it is released (called by the gated code).

        Raises:
            BaseException: the `error` passed to `release`, if any.
        """
        gate = self._gate(key)
        self.entered.append(key)
        gate.entered.set()
        await gate.released.wait()
        if gate.error is not None:
            raise gate.error
        self.passed.append(key)

    async def wait_entered(self, *keys: str) -> None:
        """Wait until code has reached every gate in `keys`."""
        for key in keys:
            await self._gate(key).entered.wait()

    def is_entered(self, key: str) -> bool:
        """Return whether code has reached gate `key`."""
        return key in self._gates and self._gates[key].entered.is_set()

    def release(self, *keys: str, error: BaseException | None = None) -> None:
        """Open the gates `keys`; with `error`, the gated code raises it instead of passing."""
        for key in keys:
            gate = self._gate(key)
            gate.error = error
            gate.released.set()


def _any_object(arguments: JsonValue) -> Any:
    if not isinstance(arguments, dict):
        raise ValueError(f"arguments must be a JSON object, got {type(arguments).__name__}")
    return arguments


def gated_tool(name: str, gates: Gates, *, parallel: bool = True) -> Tool:
    """Return a tool whose body waits at the gate named after its call id.

    The body returns `"<name> <call id> done"`. It accepts any JSON object as arguments.

    Args:
        name: the tool name.
        gates: where the body waits; the key is the call id.
        parallel: whether calls are parallel-safe (True) or exclusive (False).

    Returns:
        The tool.
    """

    async def body(args: Any, ctx: ToolContext) -> str:
        await gates.wait(ctx.call_id)
        return f"{name} {ctx.call_id} done"

    return Tool(
        name=name,
        description=f"A gated test tool ({'parallel-safe' if parallel else 'exclusive'}).",
        parameters={"type": "object", "properties": {}},
        validator=_any_object,
        body=body,
        parallel=parallel,
    )
