"""The staged tool pipeline (docs/scheduler.md#pipeline-stages, #tool-error-codes): every expected
failure is an error result.

Each stage is driven directly, the way the scheduler drives it, and each test asserts the
exact content and error info the scheduler would commit: denials and hook failures carry
no code, coded failures carry `{name, code}`, and cancellation replaces only successes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from duraloop.errors import ToolError
from duraloop.log.vocabulary import (
    ABORTED_AFTER_COMPLETION_TEXT,
    ABORTED_BEFORE_DISPATCH_ERROR,
    ABORTED_BEFORE_DISPATCH_TEXT,
    ABORTED_ERROR,
    ABORTED_TEXT,
    INVALID_ARGS_ERROR,
    TOOL_TIMEOUT_ERROR,
    UNKNOWN_TOOL_ERROR,
)
from duraloop.tools._context import ToolContext
from duraloop.tools._definition import tool
from duraloop.tools._hooks import Deny, ToolHooks
from duraloop.tools._outcome import ToolOutcome
from duraloop.tools._pipeline import Prepared, ToolPipeline
from duraloop.tools._registry import ToolRegistry
from duraloop.tools._request import ToolCallRequest, parse_tool_arguments
from duraloop.tools._signal import CancelSignal

invocations: list[str] = []


@tool
def echo(text: str) -> str:
    """Echo the text."""
    invocations.append(text)
    return text


@tool
async def fail(code: str | None = None) -> str:
    """Fail on purpose."""
    if code is not None:
        raise ToolError("it broke", code=code)
    raise KeyError("missing")


@tool
def structured(ctx: ToolContext) -> dict[str, Any]:
    """Return JSON."""
    return {"cwd": str(ctx.cwd), "items": [1, 2.5, None]}


@tool
def nothing() -> None:
    """Return nothing."""


@tool
def not_json() -> object:
    """Return a non-JSON value."""
    return {"x": {1, 2}}


@tool(timeout_seconds=0.05)
async def slow() -> str:
    """Sleep past the timeout."""
    await anyio.sleep(10)  # simulates work that outlives its timeout
    return "finished"


def _call(name: str, raw: str = "{}", call_id: str = "c1") -> ToolCallRequest:
    return ToolCallRequest(
        call_id=call_id,
        name=name,
        raw_arguments=raw,
        arguments=parse_tool_arguments(raw),
        turn=1,
        step=1,
    )


@pytest.fixture
def pipeline(tmp_path: Path) -> ToolPipeline:
    invocations.clear()
    registry = ToolRegistry([echo, fail, structured, nothing, not_json, slow])
    return ToolPipeline(registry, cwd=tmp_path, session_id="s1")


async def _run(pipeline: ToolPipeline, call: ToolCallRequest, signal: CancelSignal) -> ToolOutcome:
    prepared = await pipeline.prepare(call, signal)
    if prepared.kind == "final-result":
        assert prepared.outcome is not None
        return prepared.outcome
    outcome = prepared.outcome
    if prepared.kind == "dispatch":
        outcome = await pipeline.dispatch(call, signal)
    assert outcome is not None
    return await pipeline.finalize(call, outcome, signal)


@pytest.mark.anyio
async def test_pipeline_success_returns_text_block(pipeline: ToolPipeline) -> None:
    outcome = await _run(pipeline, _call("echo", '{"text": "hi"}'), CancelSignal())
    assert outcome == ToolOutcome(is_error=False, content=[{"type": "text", "text": "hi"}])
    assert invocations == ["hi"]


@pytest.mark.anyio
async def test_pipeline_json_and_none_returns_become_text(
    pipeline: ToolPipeline, real_tmp_path: Path
) -> None:
    result = await _run(pipeline, _call("structured"), CancelSignal())
    assert json.loads(result.text) == {"cwd": str(pipeline.cwd), "items": [1, 2.5, None]}
    assert pipeline.cwd == real_tmp_path
    assert (await _run(pipeline, _call("nothing"), CancelSignal())).text == "ok"


@pytest.mark.anyio
async def test_pipeline_non_json_return_is_invalid_tool_output(pipeline: ToolPipeline) -> None:
    outcome = await _run(pipeline, _call("not_json"), CancelSignal())
    assert outcome.is_error
    assert outcome.error == {"name": "ToolOutputError", "code": "INVALID_TOOL_OUTPUT"}


@pytest.mark.anyio
async def test_pipeline_unknown_tool_is_unknown_tool_error(pipeline: ToolPipeline) -> None:
    outcome = await _run(pipeline, _call("nope"), CancelSignal())
    assert outcome.text == 'Error: unknown tool "nope"'
    assert outcome.error == UNKNOWN_TOOL_ERROR
    assert pipeline.is_parallel(_call("nope")) is False


@pytest.mark.anyio
@pytest.mark.parametrize("raw", ['{"text": 5}', "{not json", '{"text": "a", "extra": 1}', "[]"])
async def test_pipeline_invalid_arguments_are_invalid_args_and_body_not_run(
    pipeline: ToolPipeline, raw: str
) -> None:
    outcome = await _run(pipeline, _call("echo", raw), CancelSignal())
    assert outcome.is_error
    assert outcome.error == INVALID_ARGS_ERROR
    assert outcome.text.startswith('Error: invalid arguments for tool "echo": ')
    assert invocations == []


@pytest.mark.anyio
async def test_pipeline_tool_error_code_passes_through(pipeline: ToolPipeline) -> None:
    outcome = await _run(pipeline, _call("fail", '{"code": "FS_NOT_FOUND"}'), CancelSignal())
    assert outcome.text == "Error: it broke"
    assert outcome.error == {"name": "ToolError", "code": "FS_NOT_FOUND"}


@pytest.mark.anyio
async def test_pipeline_generic_exception_is_error_without_code(pipeline: ToolPipeline) -> None:
    outcome = await _run(pipeline, _call("fail"), CancelSignal())
    assert outcome.is_error
    assert outcome.text == "Error: KeyError: 'missing'"
    assert outcome.error is None


@pytest.mark.anyio
async def test_pipeline_timeout_is_tool_timeout(pipeline: ToolPipeline) -> None:
    outcome = await _run(pipeline, _call("slow"), CancelSignal())
    assert outcome.text == "Error: tool call timed out after 50ms"
    assert outcome.error == TOOL_TIMEOUT_ERROR


@pytest.mark.anyio
async def test_prepare_deny_is_post_result_without_code_and_post_hooks_run(
    tmp_path: Path,
) -> None:
    seen: list[str] = []

    def post(call: ToolCallRequest, outcome: ToolOutcome) -> None:
        seen.append(outcome.text)

    hooks = ToolHooks(pre_execute=[lambda call: Deny("not allowed here")], post_execute=[post])
    pipeline = ToolPipeline(ToolRegistry([echo]), hooks=hooks, cwd=tmp_path, session_id="s")
    call = _call("echo", '{"text": "x"}')
    prepared = await pipeline.prepare(call, CancelSignal())
    assert prepared == Prepared("post-result", ToolOutcome.failure("not allowed here"))
    assert prepared.outcome is not None and prepared.outcome.error is None
    outcome = await _run(pipeline, call, CancelSignal())
    assert outcome.text == "Error: not allowed here"
    assert seen == ["Error: not allowed here"]


@pytest.mark.anyio
async def test_prepare_hook_exception_is_final_result_bypassing_post(tmp_path: Path) -> None:
    post_calls: list[str] = []

    async def explode(call: ToolCallRequest) -> None:
        raise RuntimeError("policy store down")

    hooks = ToolHooks(
        pre_execute=[explode], post_execute=[lambda call, outcome: post_calls.append("x")]
    )
    pipeline = ToolPipeline(ToolRegistry([echo]), hooks=hooks, cwd=tmp_path, session_id="s")
    prepared = await pipeline.prepare(_call("echo", '{"text": "x"}'), CancelSignal())
    assert prepared.kind == "final-result"
    assert prepared.outcome == ToolOutcome.failure("policy store down")
    await _run(pipeline, _call("echo", '{"text": "x"}'), CancelSignal())
    assert post_calls == []
    assert invocations == []


@pytest.mark.anyio
async def test_prepare_hooks_run_in_order_and_first_deny_wins(tmp_path: Path) -> None:
    order: list[str] = []

    def allow(call: ToolCallRequest) -> None:
        order.append("allow")

    async def deny(call: ToolCallRequest) -> Deny:
        order.append("deny")
        return Deny("no")

    def never(call: ToolCallRequest) -> None:
        order.append("never")

    hooks = ToolHooks(pre_execute=[allow, deny, never])
    pipeline = ToolPipeline(ToolRegistry([echo]), hooks=hooks, cwd=tmp_path, session_id="s")
    prepared = await pipeline.prepare(_call("echo"), CancelSignal())
    assert prepared.kind == "post-result"
    assert order == ["allow", "deny"]


@pytest.mark.anyio
async def test_finalize_post_hooks_replace_in_order(pipeline: ToolPipeline) -> None:
    async def shout(call: ToolCallRequest, outcome: ToolOutcome) -> ToolOutcome:
        return ToolOutcome.ok(outcome.text.upper())

    def keep(call: ToolCallRequest, outcome: ToolOutcome) -> None:
        return None

    pipeline.hooks.post_execute.extend([shout, keep, lambda c, o: ToolOutcome.ok(o.text + "!")])
    outcome = await _run(pipeline, _call("echo", '{"text": "hi"}'), CancelSignal())
    assert outcome.text == "HI!"
    assert outcome.is_error is False


@pytest.mark.anyio
async def test_finalize_post_hook_exception_is_error_and_stops_chain(
    pipeline: ToolPipeline,
) -> None:
    later: list[str] = []

    def boom(call: ToolCallRequest, outcome: ToolOutcome) -> None:
        raise ValueError("audit failed")

    pipeline.hooks.post_execute.extend([boom, lambda c, o: later.append("ran")])
    outcome = await _run(pipeline, _call("echo", '{"text": "hi"}'), CancelSignal())
    assert outcome == ToolOutcome.failure("audit failed")
    assert later == []
    assert invocations == ["hi"]


@pytest.mark.anyio
async def test_abort_before_prepare_is_final_aborted_before_dispatch(
    pipeline: ToolPipeline,
) -> None:
    signal = CancelSignal()
    signal.cancel()
    prepared = await pipeline.prepare(_call("echo", '{"text": "x"}'), signal)
    assert prepared.kind == "final-result"
    assert prepared.outcome is not None
    assert prepared.outcome.text == ABORTED_BEFORE_DISPATCH_TEXT
    assert prepared.outcome.error == ABORTED_BEFORE_DISPATCH_ERROR


@pytest.mark.anyio
async def test_abort_during_pre_hook_is_post_aborted_before_dispatch(tmp_path: Path) -> None:
    signal = CancelSignal()
    hooks = ToolHooks(pre_execute=[lambda call: signal.cancel()])
    pipeline = ToolPipeline(ToolRegistry([echo]), hooks=hooks, cwd=tmp_path, session_id="s")
    prepared = await pipeline.prepare(_call("echo", '{"text": "x"}'), signal)
    assert prepared.kind == "post-result"
    assert prepared.outcome is not None
    assert prepared.outcome.error == ABORTED_BEFORE_DISPATCH_ERROR


@pytest.mark.anyio
async def test_dispatch_after_abort_does_not_invoke_body(pipeline: ToolPipeline) -> None:
    signal = CancelSignal()
    signal.cancel()
    outcome = await pipeline.dispatch(_call("echo", '{"text": "x"}'), signal)
    assert outcome.error == ABORTED_BEFORE_DISPATCH_ERROR
    assert invocations == []


@pytest.mark.anyio
async def test_sync_body_finishing_after_cancel_is_aborted_saying_it_completed_with_output(
    tmp_path: Path,
) -> None:
    signal = CancelSignal()
    effect = tmp_path / "effect.txt"

    @tool
    def writes() -> str:
        """Finish a side effect after the turn was cancelled."""
        signal.cancel()
        effect.write_text("written")
        return "wrote effect.txt"

    pipeline = ToolPipeline(ToolRegistry([writes]), cwd=tmp_path, session_id="s")
    outcome = await _run(pipeline, _call("writes"), signal)
    assert effect.read_text() == "written"
    assert outcome.error == ABORTED_ERROR
    assert outcome.is_error
    assert outcome.content == [
        {"type": "text", "text": f"{ABORTED_AFTER_COMPLETION_TEXT}\nwrote effect.txt"}
    ]
    assert outcome.text.startswith(ABORTED_TEXT)
    assert "run to completion" in outcome.text


@pytest.mark.anyio
async def test_watching_body_returning_a_value_after_cancel_keeps_its_output(
    tmp_path: Path,
) -> None:
    signal = CancelSignal()

    @tool(watches_signal=True)
    async def watcher(ctx: ToolContext) -> ToolOutcome:
        """Notice the cancel and return what was done."""
        signal.cancel()
        await ctx.signal.wait()
        return ToolOutcome.ok(
            [
                {"type": "text", "text": "stopped after 3 of 10 items"},
                {"type": "text", "text": "items 1-3 sent"},
            ]
        )

    pipeline = ToolPipeline(ToolRegistry([watcher]), cwd=tmp_path, session_id="s")
    outcome = await _run(pipeline, _call("watcher"), signal)
    assert outcome.error == ABORTED_ERROR
    assert outcome.content == [
        {"type": "text", "text": f"{ABORTED_AFTER_COMPLETION_TEXT}\nstopped after 3 of 10 items"},
        {"type": "text", "text": "items 1-3 sent"},
    ]


@pytest.mark.anyio
async def test_async_body_cancelled_at_an_await_is_plain_aborted(tmp_path: Path) -> None:
    signal = CancelSignal()

    @tool
    async def waits() -> str:
        """Wait until cancelled at the await."""
        signal.cancel()
        await anyio.sleep(10)  # simulates work the cancel interrupts
        return "never"

    pipeline = ToolPipeline(ToolRegistry([waits]), cwd=tmp_path, session_id="s")
    outcome = await _run(pipeline, _call("waits"), signal)
    assert outcome.text == ABORTED_TEXT
    assert outcome.error == ABORTED_ERROR


@pytest.mark.anyio
async def test_abort_keeps_error_outcomes(pipeline: ToolPipeline) -> None:
    signal = CancelSignal()
    outcome = await pipeline.dispatch(_call("fail", '{"code": "X"}'), signal)
    signal.cancel()
    final = await pipeline.finalize(_call("fail"), outcome, signal)
    assert final.error == {"name": "ToolError", "code": "X"}


@pytest.mark.anyio
async def test_finalize_after_abort_replaces_hook_success_by_invocation(
    pipeline: ToolPipeline,
) -> None:
    pipeline.hooks.post_execute.append(lambda c, o: ToolOutcome.ok("forced"))
    signal = CancelSignal()
    signal.cancel()
    denied = await pipeline.finalize(_call("echo"), ToolOutcome.failure("denied"), signal)
    assert denied.error == ABORTED_BEFORE_DISPATCH_ERROR
    live = CancelSignal()
    dispatched = await pipeline.dispatch(_call("echo", '{"text": "x"}', call_id="c2"), live)
    live.cancel()
    after_body = await pipeline.finalize(_call("echo", call_id="c2"), dispatched, live)
    assert after_body.error == ABORTED_ERROR
    # The body had returned "forced"'s input: the hook's success is carried, said completed.
    assert after_body.text == f"{ABORTED_AFTER_COMPLETION_TEXT}\nforced"


@pytest.mark.anyio
async def test_finalize_non_json_content_is_invalid_tool_output(pipeline: ToolPipeline) -> None:
    bad = ToolOutcome(is_error=False, content=[{"type": "text", "text": float("nan")}])
    outcome = await pipeline.finalize(_call("echo"), bad, CancelSignal())
    assert outcome.error == {"name": "ToolOutputError", "code": "INVALID_TOOL_OUTPUT"}


@pytest.mark.anyio
async def test_pipeline_subclass_can_inject_dispatch_fault(tmp_path: Path) -> None:
    class Faulty(ToolPipeline):
        async def dispatch(self, call: ToolCallRequest, signal: CancelSignal) -> ToolOutcome:
            raise RuntimeError("injected")

    pipeline = Faulty(ToolRegistry([echo]), cwd=tmp_path, session_id="s")
    with pytest.raises(RuntimeError, match="injected"):
        await _run(pipeline, _call("echo", '{"text": "x"}'), CancelSignal())


@pytest.mark.anyio
async def test_body_sees_context(tmp_path: Path, real_tmp_path: Path) -> None:
    seen: list[ToolContext] = []

    @tool
    async def look(ctx: ToolContext) -> str:
        """Look."""
        seen.append(ctx)
        return "ok"

    signal = CancelSignal()
    pipeline = ToolPipeline(ToolRegistry([look]), cwd=tmp_path / ".", session_id="s7")
    await _run(pipeline, _call("look", call_id="k1"), signal)
    assert seen == [
        ToolContext(
            cwd=real_tmp_path,
            signal=signal,
            call_id="k1",
            tool_name="look",
            session_id="s7",
        )
    ]


@tool
def lone_surrogate(structured: bool = False) -> object:
    """Return text holding a lone UTF-16 surrogate (as json.loads of `"a\\ud800b"` gives)."""
    return {"text": "a\ud800b"} if structured else "a\ud800b"


@pytest.mark.anyio
async def test_pipeline_replaces_lone_surrogates_in_tool_output(tmp_path: Path) -> None:
    pipeline = ToolPipeline(ToolRegistry([lone_surrogate]), cwd=tmp_path, session_id="s1")
    text = await _run(pipeline, _call("lone_surrogate"), CancelSignal())
    assert text == ToolOutcome(is_error=False, content=[{"type": "text", "text": "a\ufffdb"}])
    structured = await _run(
        pipeline, _call("lone_surrogate", '{"structured": true}'), CancelSignal()
    )
    assert json.loads(structured.text) == {"text": "a\ufffdb"}


@pytest.mark.anyio
async def test_pipeline_logs_a_raising_body_with_its_traceback_at_debug(
    pipeline: ToolPipeline, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("DEBUG", logger="duraloop.tools._pipeline"):
        outcome = await _run(pipeline, _call("fail"), CancelSignal())
    assert outcome.text == "Error: KeyError: 'missing'"
    (record,) = [r for r in caplog.records if "raised" in r.getMessage()]
    assert record.levelname == "DEBUG"
    assert record.exc_info is not None and record.exc_info[0] is KeyError


@pytest.mark.anyio
async def test_a_cancel_settles_only_the_bodies_of_its_own_signal(tmp_path: Path) -> None:
    # One listener per signal settles its running bodies (tools/_bodies.py): two signals
    # sharing a pipeline, cancelling one interrupts its body only; a signal cancelled from
    # another thread interrupts its body on the loop.
    started = anyio.Event()

    @tool
    async def waits(tag: str) -> str:
        """Wait until cancelled, or until released."""
        started.set()
        await anyio.sleep(0.3)  # simulates work: done unless cancelled
        return f"done {tag}"

    pipeline = ToolPipeline(ToolRegistry([waits]), cwd=tmp_path, session_id="s")
    first, second = CancelSignal(), CancelSignal()
    outcomes: dict[str, ToolOutcome] = {}

    async def run(tag: str, signal: CancelSignal) -> None:
        call = _call("waits", json.dumps({"tag": tag}), call_id=tag)
        outcomes[tag] = await pipeline.dispatch(call, signal)

    async with anyio.create_task_group() as group:
        group.start_soon(run, "a", first)
        group.start_soon(run, "b", second)
        await started.wait()
        await anyio.to_thread.run_sync(first.cancel)  # from another thread
    assert outcomes["a"].error == ABORTED_ERROR
    assert (outcomes["b"].is_error, outcomes["b"].text) == (False, "done b")
