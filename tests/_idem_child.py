"""A child process for the idempotency-key process test (run as a script).

    python tests/_idem_child.py PHASE STORE_DIR WORKSPACE

- `run`: start session `idem` on a JSONL store and run a turn whose one call `c1` is to the
  idempotent tool `charge`; its body appends `ctx.idempotency_key` to `WORKSPACE/keys`,
  prints `BODY <key>` and blocks until the parent SIGKILLs the process.
- `retry`: resume the session and `retry_unknown_calls(continue_with_model=False)`; the body
  appends its key again and returns; prints `RERUN <tool/call seq> <tool/result seq>`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio

from duraloop.llm import ScriptedModel
from duraloop.loop import SessionSetup, resume_session, start_session
from duraloop.store import JsonlStore
from duraloop.tools import ToolContext, tool

SESSION = "idem"
_block = False


@tool(idempotent=True)
async def charge(ctx: ToolContext, cents: int) -> str:
    """Charge a card (records its idempotency key).

    Args:
        cents: the amount.
    """
    with (ctx.cwd / "keys").open("a", encoding="utf-8") as file:
        file.write(ctx.idempotency_key + "\n")
    print(f"BODY {ctx.idempotency_key}", flush=True)
    if _block:
        await anyio.sleep_forever()
    return f"charged {cents}"


async def main(phase: str, store_dir: str, workspace: str) -> None:
    global _block
    script: list[dict[str, Any]] = [
        {"text": "", "tool_calls": [{"id": "c1", "name": "charge", "arguments": {"cents": 5}}]},
        {"text": "never reached"},
    ]
    setup = SessionSetup(
        store=JsonlStore(Path(store_dir)),
        model=ScriptedModel(script if phase == "run" else []),
        tools=[charge],
        cwd=Path(workspace),
    )
    if phase == "run":
        _block = True
        loop = start_session(setup, session_id=SESSION)
        with loop:
            await loop.run_turn("pay")
        raise SystemExit("the blocking body returned")
    loop, _ = resume_session(SESSION, setup)
    with loop:
        report = await loop.retry_unknown_calls(continue_with_model=False)
    (rerun,) = report.reruns
    print(f"RERUN {rerun.call_seq} {rerun.result_seq}", flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3])
