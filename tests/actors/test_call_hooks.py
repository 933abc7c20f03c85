"""Call hooks around ``rt.call`` and ``AgentSurface.call_for_model``: order, changes to the
arguments and ``_meta``, short circuits, what they see of failures, cancellation, and a hook's
own failure. On trio's virtual clock (exact times), against the in-memory fake server."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pytest
import trio
import trio.testing

from trio_mcp.actors import (
    AgentSurface,
    CallNext,
    RetryPolicy,
    RuntimeConfig,
    ServerConfig,
    ToolCallRequest,
    TransportKind,
    open_runtime,
)
from trio_mcp.actors.testing import FakeServer, FakeTool, ToolContext
from trio_mcp.protocol import (
    CallHookFailed,
    CallToolResult,
    ServerDisconnected,
    TextContent,
    ToolExecutionError,
    TransportClosed,
)

from .test_session_send_paths import Around, around

Clock = trio.testing.MockClock


async def slow(arguments: Mapping[str, Any], ctx: ToolContext) -> str:
    await trio.sleep(math.inf)
    raise AssertionError("unreachable")


def fake() -> FakeServer:
    return FakeServer(name="s", tools=[FakeTool("echo"), FakeTool("slow", handler=slow)])


def config(server: FakeServer | ServerConfig) -> RuntimeConfig:
    entry = server.server_config() if isinstance(server, FakeServer) else server
    return RuntimeConfig(servers=(entry,), retry=RetryPolicy(jitter=0.0))


def calls_of(server: FakeServer) -> list[Mapping[str, Any]]:
    return [params or {} for method, params in server.requests if method == "tools/call"]


def text(value: str) -> CallToolResult:
    return CallToolResult(content=(TextContent(text=value),))


async def test_hooks_run_in_order_the_first_outermost(autojump_clock: Clock) -> None:
    seen: list[str] = []

    def named(label: str) -> Any:
        async def hook(call: ToolCallRequest, call_next: CallNext) -> CallToolResult:
            seen.append(f"{label} in {call.via} {call.name} {call.server}/{call.tool}")
            result = await call_next(call)
            seen.append(f"{label} out {result.text}")
            return result

        return hook

    server = fake()
    async with open_runtime(
        RuntimeConfig(servers=(server.server_config(trust_level="trusted"),)),
        hooks=[named("r1"), named("r2")],
    ) as rt:
        await rt.wait_ready()
        agent = AgentSurface(rt, hooks=[named("a1"), named("a2")])
        result = await agent.call_for_model("mcp_s_echo", {"x": 1})
    assert result.status == "ok"
    assert seen == [
        "a1 in agent mcp_s_echo s/echo",
        "a2 in agent mcp_s_echo s/echo",
        "r1 in runtime mcp_s_echo s/echo",
        "r2 in runtime mcp_s_echo s/echo",
        'r2 out {"x":1}',
        'r1 out {"x":1}',
        'a2 out {"x":1}',
        'a1 out {"x":1}',
    ]


async def test_a_refused_call_runs_no_hook(autojump_clock: Clock) -> None:
    seen: list[str] = []

    async def hook(call: ToolCallRequest, call_next: CallNext) -> CallToolResult:
        seen.append(call.name)
        return await call_next(call)

    server = fake()
    async with open_runtime(config(server)) as rt:
        await rt.wait_ready()
        result = await AgentSurface(rt, hooks=[hook]).call_for_model("mcp_s_echo", {})
    assert result.status == "refused"  # untrusted, no approve callback
    assert seen == []
    assert calls_of(server) == []


async def test_hooks_change_the_arguments_and_meta(autojump_clock: Clock) -> None:
    async def add_user(call: ToolCallRequest, call_next: CallNext) -> CallToolResult:
        assert dict(call.arguments) == {"q": "tea"}
        assert dict(call.meta) == {"trace": "t1"}
        changed = call.replace(
            arguments={**call.arguments, "user": "ada"}, meta={**call.meta, "tenant": "acme"}
        )
        return await call_next(changed)

    async def see(call: ToolCallRequest, call_next: CallNext) -> CallToolResult:
        assert dict(call.arguments) == {"q": "tea", "user": "ada"}
        return await call_next(call)

    server = fake()
    async with open_runtime(config(server), hooks=[add_user, see]) as rt:
        await rt.wait_ready()
        result = await rt.call("mcp_s_echo", {"q": "tea"}, meta={"trace": "t1"})
    assert result.text == '{"q":"tea","user":"ada"}'
    (params,) = calls_of(server)
    assert params["arguments"] == {"q": "tea", "user": "ada"}
    assert params["_meta"] == {"trace": "t1", "tenant": "acme"}


async def test_arguments_are_left_out_when_none_were_given(autojump_clock: Clock) -> None:
    async def passing(call: ToolCallRequest, call_next: CallNext) -> CallToolResult:
        assert dict(call.arguments) == {}
        return await call_next(call)

    server = fake()
    async with open_runtime(config(server), hooks=[passing]) as rt:
        await rt.wait_ready()
        await rt.call("mcp_s_echo")
    (params,) = calls_of(server)
    assert params == {"name": "echo"}


async def test_a_hook_short_circuits_with_a_result(autojump_clock: Clock) -> None:
    later: list[str] = []

    async def cached(call: ToolCallRequest, call_next: CallNext) -> CallToolResult:
        return text(f"cached {call.arguments['q']}")

    async def inner(call: ToolCallRequest, call_next: CallNext) -> CallToolResult:
        later.append(call.name)
        return await call_next(call)

    server = fake()
    async with open_runtime(
        RuntimeConfig(servers=(server.server_config(trust_level="trusted"),)),
        hooks=[cached, inner],
    ) as rt:
        await rt.wait_ready()
        result = await rt.call("mcp_s_echo", {"q": "tea"})
        model = await AgentSurface(rt).call_for_model("mcp_s_echo", {"q": "milk"})
    assert result.text == "cached tea"
    assert (model.status, model.text) == ("ok", "cached milk")
    assert later == []
    assert calls_of(server) == []


async def test_a_hook_sees_a_disconnect_after_sending(autojump_clock: Clock) -> None:
    seen: list[tuple[str, bool]] = []

    async def observe(call: ToolCallRequest, call_next: CallNext) -> CallToolResult:
        try:
            return await call_next(call)
        except ServerDisconnected as exc:
            seen.append((type(exc).__name__, exc.sent))
            raise

    server = fake()
    server.crash_after_calls = 0
    async with open_runtime(config(server), hooks=[observe]) as rt:
        await rt.wait_ready()
        with pytest.raises(ServerDisconnected) as caught:
            await rt.call("mcp_s_echo", {})
    assert caught.value.sent is True
    assert seen == [("ServerDisconnected", True)]


async def test_a_hook_sees_a_call_that_was_not_sent(autojump_clock: Clock) -> None:
    seen: list[bool] = []
    found: list[Around] = []

    async def observe(call: ToolCallRequest, call_next: CallNext) -> CallToolResult:
        try:
            return await call_next(call)
        except ServerDisconnected as exc:
            seen.append(exc.sent)
            raise

    server = fake()
    entry = ServerConfig(
        name="s", type=TransportKind.CUSTOM, transport_factory=around(server, found)
    )
    async with open_runtime(config(entry), hooks=[observe]) as rt:
        await rt.wait_ready()
        found[0].broken = TransportClosed("the pipe broke")
        with pytest.raises(ServerDisconnected) as caught:
            await rt.call("mcp_s_echo", {})
    assert caught.value.sent is False
    assert seen == [False]


async def test_a_hook_sees_a_tool_error_and_may_raise_it(autojump_clock: Clock) -> None:
    async def strict(call: ToolCallRequest, call_next: CallNext) -> CallToolResult:
        return (await call_next(call)).raise_for_error(server=call.server)

    server = FakeServer(name="s", tools=[FakeTool("bad", result={"content": [], "isError": True})])
    async with open_runtime(config(server), hooks=[strict]) as rt:
        await rt.wait_ready()
        with pytest.raises(ToolExecutionError):
            await rt.call("mcp_s_bad")


async def test_a_failing_hook_fails_that_call_alone_naming_the_hook(autojump_clock: Clock) -> None:
    async def broken(call: ToolCallRequest, call_next: CallNext) -> CallToolResult:
        if call.arguments.get("boom"):
            raise ValueError("no such user")
        return await call_next(call)

    server = fake()
    async with open_runtime(
        RuntimeConfig(servers=(server.server_config(trust_level="trusted"),)), hooks=[broken]
    ) as rt:
        await rt.wait_ready()
        with pytest.raises(CallHookFailed) as caught:
            await rt.call("mcp_s_echo", {"boom": True})
        after = await rt.call("mcp_s_echo", {"ok": True})  # the runtime goes on
        model = await AgentSurface(rt).call_for_model("mcp_s_echo", {"boom": True})
    error = caught.value
    assert error.hook.endswith("broken")
    assert isinstance(error.__cause__, ValueError)
    assert str(error).startswith(
        f"the call hook {error.hook} raised ValueError: no such user, so the call of mcp_s_echo "
        "(s/echo) failed"
    )
    assert (error.server, error.method) == ("s", "tools/call")
    assert after.text == '{"ok":true}'
    assert model.status == "hook_error"
    assert model.is_error
    assert "a call hook of the host failed" in model.text


async def test_a_hook_that_returns_no_result_fails_the_call(autojump_clock: Clock) -> None:
    class Sloppy:
        async def __call__(self, call: ToolCallRequest, call_next: CallNext) -> Any:
            await call_next(call)
            return "done"

    class Confused:
        async def __call__(self, call: ToolCallRequest, call_next: CallNext) -> Any:
            return await call_next({"name": call.name})  # type: ignore[arg-type]

    server = fake()
    async with open_runtime(config(server), hooks=[Sloppy()]) as rt:
        await rt.wait_ready()
        with pytest.raises(CallHookFailed) as sloppy:
            await rt.call("mcp_s_echo")
    async with open_runtime(config(server), hooks=[Confused()]) as rt:
        await rt.wait_ready()
        with pytest.raises(CallHookFailed) as confused:
            await rt.call("mcp_s_echo")
    assert sloppy.value.hook.endswith("Sloppy")
    assert "returned str, not a CallToolResult" in str(sloppy.value)
    assert confused.value.hook.endswith("Confused")
    assert "passed dict to call_next, not a ToolCallRequest" in str(confused.value)


async def test_an_error_a_hook_raises_on_purpose_is_kept(autojump_clock: Clock) -> None:
    async def refuse(call: ToolCallRequest, call_next: CallNext) -> CallToolResult:
        raise ToolExecutionError("quota exceeded", server=call.server)

    server = fake()
    async with open_runtime(config(server), hooks=[refuse]) as rt:
        await rt.wait_ready()
        with pytest.raises(ToolExecutionError, match="quota exceeded"):
            await rt.call("mcp_s_echo")
    assert calls_of(server) == []


async def test_cancellation_passes_through_the_hooks(autojump_clock: Clock) -> None:
    seen: list[str] = []
    caller: list[object] = []

    async def observe(call: ToolCallRequest, call_next: CallNext) -> CallToolResult:
        caller.append(trio.lowlevel.current_task())
        try:
            return await call_next(call)
        except Exception as exc:  # never Cancelled: it is no Exception
            seen.append(f"error {type(exc).__name__}")
            raise
        finally:
            seen.append(f"left at {trio.current_time() - start:g}")

    server = fake()
    async with open_runtime(config(server), hooks=[observe]) as rt:
        await rt.wait_ready()
        start = trio.current_time()
        with trio.move_on_after(3) as scope:
            await rt.call("mcp_s_slow", timeout=None)
        assert scope.cancelled_caught
        assert caller == [trio.lowlevel.current_task()]  # the hook ran in the caller's task
        await trio.sleep(0.1)
    assert seen == ["left at 3"]
    assert len(server.cancellations) == 1  # the server was told
