"""The tool-error policy: its values and where they come from (code, both file shapes), what
``call_for_model`` does with each kind of failure, and the retries of calls that were not sent
(never of one that was), on trio's virtual clock with exact times."""

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
    ErrorPolicy,
    ErrorRule,
    RetryPolicy,
    RuntimeConfig,
    ServerConfig,
    ToolCallRequest,
    TransportKind,
    load_echo_config,
    load_mcp_json,
    open_runtime,
    parse_error_rules,
    redacted_config,
)
from trio_mcp.actors.testing import FakeServer, FakeTool, ToolContext
from trio_mcp.protocol import (
    CallTimeout,
    CallToolResult,
    ConfigError,
    ServerDisconnected,
    ServerUnavailable,
    ToolExecutionError,
    TransportClosed,
)

from .test_session_send_paths import Around, around

Clock = trio.testing.MockClock


async def slow(arguments: Mapping[str, Any], ctx: ToolContext) -> str:
    await trio.sleep(math.inf)
    raise AssertionError("unreachable")


def fake() -> FakeServer:
    return FakeServer(
        name="s",
        tools=[
            FakeTool("echo"),
            FakeTool("slow", handler=slow),
            FakeTool("bad", result={"content": [{"type": "text", "text": "no"}], "isError": True}),
        ],
    )


def config(*servers: ServerConfig, **options: Any) -> RuntimeConfig:
    return RuntimeConfig(servers=servers, retry=RetryPolicy(jitter=0.0), **options)


def calls_of(server: FakeServer) -> int:
    return sum(1 for method, _ in server.requests if method == "tools/call")


# --------------------------------------------------------------------------- the values


def test_only_a_call_not_sent_is_retried() -> None:
    with pytest.raises(ConfigError) as caught:
        ErrorPolicy(timeout="retry", retries=11, retry_delay=-1)  # type: ignore[arg-type]
    assert caught.value.problems == (
        (
            "timeout",
            "must be 'model' or 'raise', got 'retry' (only a call that was not sent is "
            "retried: use retries)",
        ),
        ("retries", "must be an integer from 0 to 10, got 11"),
        ("retry_delay", "must be a finite number of seconds >= 0, got -1"),
    )
    policy = ErrorPolicy(retries=4, retry_delay=0.5, retry_max_delay=3.0)
    assert [policy.retry_wait(n) for n in range(4)] == [0.5, 1.0, 2.0, 3.0]


def test_a_rule_wins_over_the_server_which_wins_over_the_runtime() -> None:
    server_policy = ErrorPolicy(timeout="raise")
    rule_policy = ErrorPolicy(retries=2)
    runtime_policy = ErrorPolicy(tool_error="raise")
    conf = RuntimeConfig(
        servers=(
            ServerConfig(name="gh", command="x", error_policy=server_policy),
            ServerConfig(name="fs", command="x"),
        ),
        error_policy=runtime_policy,
        error_rules=[ErrorRule(pattern="mcp_gh_get_*", policy=rule_policy)],
    )
    assert conf.error_policy_for("mcp_gh_get_issue", "gh") is rule_policy
    assert conf.error_policy_for("mcp_gh_create_issue", "gh") is server_policy
    assert conf.error_policy_for("mcp_fs_read", "fs") is runtime_policy
    assert conf.error_policy_for("mcp_fs_read", None) is runtime_policy
    assert RuntimeConfig().error_policy == ErrorPolicy()
    with pytest.raises(ConfigError, match="error_rules must hold ErrorRule objects"):
        RuntimeConfig(error_rules=[{"tool": "x"}])  # type: ignore[list-item]
    with pytest.raises(ConfigError, match="error_policy must be an ErrorPolicy, got dict"):
        ServerConfig(name="a", command="x", error_policy={"retries": 1})  # type: ignore[arg-type]


def test_the_echo_shape_sets_the_policy_the_rules_and_a_servers_own() -> None:
    loaded = load_echo_config(
        {
            "tools": {
                "mcpErrorPolicy": {"timeout": "raise"},
                "mcpErrorRules": [{"tool": "mcp_fs_read_*", "retries": 2, "retry_delay": 1}],
                "mcp_servers": {
                    "fs": {"command": "x", "error_policy": {"unknown_outcome": "raise"}}
                },
            }
        }
    )
    conf = loaded.config
    assert conf.error_policy == ErrorPolicy(timeout="raise")
    assert conf.error_rules == (
        ErrorRule(pattern="mcp_fs_read_*", policy=ErrorPolicy(retries=2, retry_delay=1.0)),
    )
    assert conf.server("fs").error_policy == ErrorPolicy(unknown_outcome="raise")
    view = redacted_config(conf)
    assert view["error_policy"]["timeout"] == "raise"
    assert view["error_rules"][0]["tool"] == "mcp_fs_read_*"
    assert view["error_rules"][0]["retries"] == 2
    assert view["servers"]["fs"]["error_policy"]["unknown_outcome"] == "raise"


def test_bad_policies_in_files_are_reported_all_at_once() -> None:
    with pytest.raises(ConfigError) as caught:
        load_mcp_json(
            {"mcpServers": {"a": {"command": "x", "error_policy": {"timeout": "retry", "x": 1}}}}
        )
    assert [where for where, _ in caught.value.problems] == [
        "<config>: mcpServers.a.error_policy.x",
        "<config>: mcpServers.a.error_policy.timeout",
    ]
    with pytest.raises(ConfigError) as caught:
        load_echo_config(
            {"tools": {"mcpErrorPolicy": 3, "mcpErrorRules": [{"retries": True}, "x"]}}
        )
    assert caught.value.problems == (
        ("<config>: tools.mcpErrorPolicy", "expected an object, got a number"),
        (
            "<config>: tools.mcpErrorRules[0].tool",
            "expected a non-empty glob such as 'mcp_github_*'",
        ),
        (
            "<config>: tools.mcpErrorRules[0].retries",
            "must be an integer from 0 to 10, got True",
        ),
        ("<config>: tools.mcpErrorRules[1]", "expected an object, got a string"),
    )
    assert parse_error_rules([{"tool": "mcp_*", "not_sent": "raise"}]) == (
        ErrorRule(pattern="mcp_*", policy=ErrorPolicy(not_sent="raise")),
    )


# --------------------------------------------------------------------------- model or raise


async def test_by_default_the_model_reads_every_failure(autojump_clock: Clock) -> None:
    server = fake()
    server.crash_after_calls = 2
    async with open_runtime(config(server.server_config(trust_level="trusted"))) as rt:
        await rt.wait_ready()
        agent = AgentSurface(rt)
        bad = await agent.call_for_model("mcp_s_bad")
        late = await agent.call_for_model("mcp_s_slow", timeout=2)
        gone = await agent.call_for_model("mcp_s_echo")
    assert [bad.status, late.status, gone.status] == ["tool_error", "timeout", "disconnected"]


async def test_raise_gives_the_host_each_kind_of_failure(autojump_clock: Clock) -> None:
    everything = ErrorPolicy(
        tool_error="raise", timeout="raise", unknown_outcome="raise", not_sent="raise"
    )
    server = fake()
    server.crash_after_calls = 2
    entry = server.server_config(trust_level="trusted", error_policy=everything)
    async with open_runtime(config(entry)) as rt:
        await rt.wait_ready()
        agent = AgentSurface(rt)
        with pytest.raises(ToolExecutionError, match="no") as tool_error:
            await agent.call_for_model("mcp_s_bad")
        with pytest.raises(CallTimeout):
            await agent.call_for_model("mcp_s_slow", timeout=2)
        with pytest.raises(ServerDisconnected) as unknown:
            await agent.call_for_model("mcp_s_echo")
        with pytest.raises(ServerUnavailable):
            await agent.call_for_model("mcp_s_echo")  # reconnecting: not sent
    assert tool_error.value.server == "s"
    assert unknown.value.sent is True


async def test_a_rule_picks_the_tools_that_raise(autojump_clock: Clock) -> None:
    server = fake()
    rules = [ErrorRule(pattern="mcp_s_b*", policy=ErrorPolicy(tool_error="raise"))]
    async with open_runtime(
        config(server.server_config(trust_level="trusted"), error_rules=rules)
    ) as rt:
        await rt.wait_ready()
        agent = AgentSurface(rt)
        with pytest.raises(ToolExecutionError):
            await agent.call_for_model("mcp_s_bad")
        echoed = await agent.call_for_model("mcp_s_echo", {"a": 1})
    assert echoed.status == "ok"


# --------------------------------------------------------------------------- retries


async def test_a_call_not_sent_is_retried_once_the_server_is_back(autojump_clock: Clock) -> None:
    attempts: list[tuple[int, float, str]] = []
    found: list[Around] = []

    async def observe(call: ToolCallRequest, call_next: CallNext) -> CallToolResult:
        try:
            result = await call_next(call)
        except ServerDisconnected as exc:
            attempts.append((call.attempt, trio.current_time() - start, f"sent={exc.sent}"))
            await server.disconnect()  # the broken pipe ends the connection
            raise
        attempts.append((call.attempt, trio.current_time() - start, "ok"))
        return result

    server = fake()
    policy = ErrorPolicy(retries=2, retry_delay=0.25, retry_wait_ready=5)
    entry = ServerConfig(
        name="s",
        type=TransportKind.CUSTOM,
        transport_factory=around(server, found),
        error_policy=policy,
    )
    async with open_runtime(config(entry), hooks=[observe]) as rt:
        await rt.wait_ready()
        start = trio.current_time()
        found[0].broken = TransportClosed("the pipe broke")
        result = await rt.call("mcp_s_echo", {"n": 1})
        done = trio.current_time() - start
    assert result.text == '{"n":1}'
    # The first attempt fails at once, unsent; the retry waits 0.25 s, then for the
    # reconnection, which the supervisor makes 1 s after the drop.
    assert attempts == [(1, 0.0, "sent=False"), (2, 1.0, "ok")]
    assert done == 1.0
    assert calls_of(server) == 1


async def test_retries_are_bounded_with_a_backoff(autojump_clock: Clock) -> None:
    server = fake()
    policy = ErrorPolicy(retries=3, retry_delay=0.5, retry_max_delay=0.75, retry_wait_ready=0)
    async with open_runtime(config(server.server_config(error_policy=policy))) as rt:
        await rt.wait_ready()
        server.refuse_connects = 100  # it does not come back
        await server.disconnect()
        while "mcp_s_echo" in rt.tools():
            await rt.wait_tools_changed(rt.tools_version)
        start = trio.current_time()
        with pytest.raises(ServerUnavailable) as caught:
            await rt.call("mcp_s_echo")
        waited = trio.current_time() - start
    assert caught.value.state == "reconnecting"
    assert waited == 0.5 + 0.75 + 0.75  # three retries, the waits capped at 0.75 s
    assert calls_of(server) == 0


async def test_a_call_whose_outcome_is_unknown_is_never_retried(autojump_clock: Clock) -> None:
    server = fake()
    server.crash_after_calls = 0
    policy = ErrorPolicy(retries=5, retry_wait_ready=30)
    async with open_runtime(config(server.server_config(error_policy=policy))) as rt:
        await rt.wait_ready()
        start = trio.current_time()
        with pytest.raises(ServerDisconnected) as caught:
            await rt.call("mcp_s_echo")
        assert trio.current_time() == start
    assert caught.value.sent is True
    assert calls_of(server) == 1


async def test_timeouts_and_tool_errors_are_never_retried(autojump_clock: Clock) -> None:
    server = fake()
    policy = ErrorPolicy(retries=5)
    async with open_runtime(config(server.server_config(error_policy=policy))) as rt:
        await rt.wait_ready()
        with pytest.raises(CallTimeout):
            await rt.call("mcp_s_slow", timeout=2)
        bad = await rt.call("mcp_s_bad")
    assert bad.is_error
    assert calls_of(server) == 2


async def test_a_server_not_on_its_way_back_is_not_retried(autojump_clock: Clock) -> None:
    server = fake()
    server.refuse_connects = 100
    policy = ErrorPolicy(retries=5)
    retry = RetryPolicy(first_connect_delays=(), park_probe_interval=None)
    conf = RuntimeConfig(servers=(server.server_config(error_policy=policy),), retry=retry)
    async with open_runtime(conf) as rt:
        await rt.wait_ready()
        start = trio.current_time()
        with pytest.raises(ServerUnavailable) as caught:
            await rt.call("mcp_s_echo")
        assert trio.current_time() == start
    assert caught.value.state == "failed"
