"""The runtime against the in-memory fake server, on trio's virtual clock (exact times)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any

import pytest
import trio
import trio.testing

from trio_mcp.actors.config._backoff import RetryPolicy
from trio_mcp.actors.config._config import RuntimeConfig, ServerConfig
from trio_mcp.actors.runtime._callbacks import HostCallbacks
from trio_mcp.actors.runtime._events import (
    EventBus,
    ResourceUpdated,
    ServerLogged,
    ServerState,
    ServerStateChanged,
)
from trio_mcp.actors.runtime._registry import MAILBOX_SIZE as REGISTRY_MAILBOX_SIZE
from trio_mcp.actors.runtime._registry import Registry, ReplaceTools, ToolsChanged
from trio_mcp.actors.runtime._runtime import (
    Runtime,
    RuntimeState,
    open_default_transport,
    open_runtime,
    serve_runtime,
)
from trio_mcp.actors.runtime._session import Listing, Relisted
from trio_mcp.actors.runtime._supervisor import MAILBOX_SIZE, ConnectionClosed, ServerSupervisor
from trio_mcp.actors.testing._fakes import FakeServer, FakeTool, ToolContext
from trio_mcp.protocol import (
    CallTimeout,
    InvalidMessage,
    MethodNotFound,
    ProgressNotificationParams,
    RuntimeClosed,
    ServerDisconnected,
    ServerUnavailable,
    Tool,
    ToolNotFound,
)

# Every test runs on trio's virtual clock (autojump): times are exact and nothing waits.
Clock = trio.testing.MockClock


def config(*servers: ServerConfig, **options: Any) -> RuntimeConfig:
    options.setdefault("retry", RetryPolicy(jitter=0.0))
    return RuntimeConfig(servers=servers, **options)


async def connection_ended(rt: Runtime, server: str) -> None:
    """Wait until the table of ``server``'s session has taken the end of its connection (its
    supervisor stops accepting calls), step by step."""
    supervisor = rt._supervisors[server]
    while supervisor.accepts_calls:
        await trio.lowlevel.checkpoint()


async def registered(rt: Runtime, name: str) -> None:
    """Wait until ``name`` is in the tool table."""
    while name not in rt.tools():
        await rt.wait_tools_changed(rt.tools_version)


async def hang(arguments: Mapping[str, Any], ctx: ToolContext) -> str:
    await trio.sleep_forever()
    raise AssertionError("unreachable")


# --------------------------------------------------------------------------- connecting


async def test_first_connect_is_retried_after_1_2_4_8_16_s_then_parked(
    autojump_clock: Clock,
) -> None:
    fake = FakeServer(name="s", refuse_connects=1000, tools=[FakeTool("t")])
    async with open_runtime(config(fake.server_config())) as rt:
        statuses = await rt.wait_ready()
        assert trio.current_time() == 31
        assert fake.connect_times == [0, 1, 3, 7, 15, 31]
        status = statuses["s"]
        assert status.state is ServerState.PARKED
        assert status.next_attempt_at == 331
        assert status.last_error is not None
        assert "refused connection attempt 6" in status.last_error
        await trio.sleep_until(331.5)
        assert fake.connect_times[-1] == 331
        assert rt.status()["s"].next_attempt_at == 631


async def test_servers_lost_together_are_not_reconnected_in_lockstep(
    autojump_clock: Clock,
) -> None:
    # Every supervisor draws its jitter from the runtime's one generator: servers lost at the
    # same moment (a network blip, a host waking up) come back at different moments.
    fakes = [FakeServer(name=f"s{i}", tools=[FakeTool("t")]) for i in range(4)]
    retry = RetryPolicy(jitter=0.5)
    async with open_runtime(config(*(f.server_config() for f in fakes), retry=retry)) as rt:
        await rt.wait_ready()
        for fake in fakes:
            await fake.disconnect()
        await trio.sleep(10)
        assert all(rt.status()[f.name].state is ServerState.READY for f in fakes)
    assert all(f.connect_times[0] == 0 for f in fakes)
    again = {f.connect_times[1] for f in fakes}
    assert len(again) == 4
    assert all(0.5 <= t <= 1.5 for t in again)


async def test_a_parked_server_comes_back_on_its_probe(autojump_clock: Clock) -> None:
    fake = FakeServer(name="s", refuse_connects=6, tools=[FakeTool("t")])
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        assert rt.status()["s"].state is ServerState.PARKED
        await rt.wait_tools_changed(0)
        assert trio.current_time() == 331
        assert rt.status()["s"].state is ServerState.READY
        assert set(rt.tools()) == {"mcp_s_t"}


async def test_parking_can_be_turned_off(autojump_clock: Clock) -> None:
    fake = FakeServer(name="s", refuse_connects=1000)
    retry = RetryPolicy(jitter=0.0, park_probe_interval=None)
    async with open_runtime(config(fake.server_config(), retry=retry)) as rt:
        statuses = await rt.wait_ready()
        assert statuses["s"].state is ServerState.FAILED
        assert statuses["s"].next_attempt_at is None
        rt.reconnect("s")  # an operator can still ask for an attempt
        await trio.testing.wait_all_tasks_blocked()
        assert len(fake.connect_times) == 7


async def test_a_server_that_fails_to_start_is_never_silent(
    autojump_clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="trio_mcp")
    good = FakeServer(name="good", tools=[FakeTool("t")])
    bad = FakeServer(name="bad", initialize_error=(-32603, "database is down"))
    async with open_runtime(config(good.server_config(), bad.server_config())) as rt:
        with rt.events() as events:
            statuses = await rt.wait_ready(timeout=0.5)
            assert statuses["good"].state is ServerState.READY
            assert statuses["bad"].state is ServerState.CONNECTING
            assert statuses["bad"].last_error is not None
            assert "database is down" in statuses["bad"].last_error
            seen = []
            while True:
                try:
                    seen.append(events.receive_nowait())
                except trio.WouldBlock:
                    break
    failures = [e for e in seen if isinstance(e, ServerStateChanged) and e.server == "bad"]
    assert any("database is down" in (e.reason or "") for e in failures)
    assert any("database is down" in r.getMessage() for r in caplog.records)


async def test_a_connect_timeout_closes_the_attempt_and_retries(autojump_clock: Clock) -> None:
    fake = FakeServer(name="s", hang={"initialize"})
    server = fake.server_config(connect_timeout=5)
    async with open_runtime(config(server)) as rt:
        await trio.sleep(7)
        status = rt.status()["s"]
        assert status.last_error is not None
        assert "did not become ready within 5 s" in status.last_error
        assert fake.connect_times == [0, 6]
        assert fake.connections == 1  # the timed-out connection was closed


async def test_protocol_versions_are_negotiated_and_unknown_ones_refused(
    autojump_clock: Clock,
) -> None:
    old = FakeServer(name="old", initialize_version="2024-11-05", tools=[FakeTool("t")])
    odd = FakeServer(name="odd", initialize_version="2099-01-01")
    async with open_runtime(config(old.server_config(), odd.server_config())) as rt:
        statuses = await rt.wait_ready(timeout=0.5)
        assert statuses["old"].protocol_version == "2024-11-05"
        assert statuses["old"].state is ServerState.READY
        error = statuses["odd"].last_error or ""
        assert "UnsupportedVersion" in error
        assert "'2099-01-01'" in error
        assert "'2025-11-25'" in error
    assert [method for method, _ in old.requests[:2]] == ["server/discover", "initialize"]
    _, params = old.requests[1]  # after the probe, which a legacy server refused
    assert params is not None
    assert params["protocolVersion"] == "2025-11-25"
    assert params["clientInfo"]["name"] == "trio-mcp"
    assert ("notifications/initialized", None) in old.notifications


# --------------------------------------------------------------------------- calls


async def test_a_call_returns_the_decoded_result(autojump_clock: Clock) -> None:
    fake = FakeServer(name="s", tools=[FakeTool("echo")])
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        result = await rt.call("mcp_s_echo", {"b": 2, "a": 1})
        assert result.text == '{"a":1,"b":2}'
        assert result.is_error in (None, False)
        assert ("tools/call", {"name": "echo", "arguments": {"b": 2, "a": 1}}) in fake.requests


async def test_unknown_tools_and_unready_servers_fail_fast(autojump_clock: Clock) -> None:
    fake = FakeServer(name="s", refuse_connects=3)
    async with open_runtime(config(fake.server_config())) as rt:
        await trio.sleep(0.5)
        # failing at once is still a checkpoint (trio's rule): a caller retrying in a loop lets
        # the runtime's actors run
        with trio.testing.assert_checkpoints(), pytest.raises(ToolNotFound, match="mcp_t_x"):
            await rt.call("mcp_t_x")
        with trio.testing.assert_checkpoints(), pytest.raises(ServerUnavailable) as info:
            await rt.request("s", "ping")
        assert "server 's' is connecting" in str(info.value)
        assert "next connection attempt in 0.5 s" in str(info.value)
        assert info.value.next_attempt_at == 1
        assert trio.current_time() == 0.5
        with pytest.raises(ServerUnavailable, match="configured: s"):
            await rt.request("nope", "ping")
        # a bounded wait for the server instead of failing fast
        assert await rt.request("s", "ping", wait_ready=10) == {}
        assert trio.current_time() == 7


async def test_a_call_pending_on_a_server_that_dies_fails_at_once(
    autojump_clock: Clock, nursery: trio.Nursery
) -> None:
    fake = FakeServer(name="s", tools=[FakeTool("slow", handler=hang), FakeTool("t")])
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()

        async def kill() -> None:
            await trio.sleep(5)
            await fake.disconnect()

        nursery.start_soon(kill)
        with pytest.raises(ServerDisconnected) as info:
            await rt.call("mcp_s_slow", timeout=100)
        assert trio.current_time() == 5
        assert info.value.sent is True
        assert "outcome is unknown" in str(info.value)
        # withdrawn by the registry before the clock moves on, and only then RECONNECTING
        await trio.testing.wait_all_tasks_blocked()
        assert trio.current_time() == 5
        assert "mcp_s_slow" not in rt.tools()
        assert rt.status()["s"].state is ServerState.RECONNECTING


async def test_a_call_that_may_wait_rides_out_a_connection_that_just_ended(
    autojump_clock: Clock,
) -> None:
    # The connection has ended, the server is still READY (its tools not withdrawn yet): a call
    # with wait_ready waits for the next connection instead of failing (it once raised
    # ToolNotFound, the tool being withdrawn while it waited for the registry).
    fake = FakeServer(name="s", tools=[FakeTool("t")])
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        await trio.sleep(10)
        await fake.disconnect()
        await connection_ended(rt, "s")
        assert rt.status()["s"].state is ServerState.READY
        assert "mcp_s_t" in rt.tools()
        result = await rt.call("mcp_s_t", {"k": 1}, wait_ready=10)
        assert result.text == '{"k":1}'
        assert fake.connect_times == [0, 11]
        assert trio.current_time() == 11
        # without waiting, the same moment says what is going on
        await fake.disconnect()
        await connection_ended(rt, "s")
        with pytest.raises(ServerUnavailable, match="server 's' is reconnecting"):
            await rt.call("mcp_s_t")


async def test_three_drops_in_a_row_are_recovered_with_backoff(autojump_clock: Clock) -> None:
    fake = FakeServer(name="s", tools=[FakeTool("t")])
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        for drop_at in (10, 20, 30):
            await trio.sleep_until(drop_at)
            await fake.disconnect()
            await trio.testing.wait_all_tasks_blocked()
            assert rt.tools() == {}
        await registered(rt, "mcp_s_t")
        assert fake.connect_times == [0, 11, 22, 34]
        assert (await rt.call("mcp_s_t")).text == "{}"
        # a connection that stayed up past healthy_after (60 s) resets the backoff
        await trio.sleep_until(200)
        await fake.disconnect()
        await trio.testing.wait_all_tasks_blocked()
        await registered(rt, "mcp_s_t")
        assert fake.connect_times[-1] == 201


# --------------------------------------------------------------------------- a full mailbox


def _ask_to_reconnect(rt: Runtime) -> None:
    """A host asking for a connection attempt over and over."""
    for _ in range(2 * MAILBOX_SIZE):
        rt.reconnect("s")


def _stuff_the_mailbox(rt: Runtime) -> None:
    """Fill the supervisor's mailbox with a word it ignores (a long-gone connection's end)."""
    inbox = rt._supervisors["s"].inbox
    with contextlib.suppress(trio.WouldBlock):
        while True:
            inbox.send_nowait(ConnectionClosed(generation=0))


@pytest.mark.parametrize(
    ("flood", "back_after"), [(_ask_to_reconnect, 0.0), (_stuff_the_mailbox, 1.0)]
)
async def test_a_full_mailbox_never_holds_a_server_ready_after_its_connection_ended(
    autojump_clock: Clock, flood: Callable[[Runtime], None], back_after: float
) -> None:
    # The word that a server's tools are withdrawn once went into the supervisor's mailbox with
    # send_nowait and was lost when the mailbox was full, and the supervisor's fallback (a look
    # at the registry every 0.25 s) was put off by every message arriving sooner: a host that
    # kept asking for reconnections kept the server READY, refusing every call, not reconnecting.
    # Flooded on every scheduler pass, the server leaves READY the moment its connection ends,
    # every time, and comes back on time: at once when the flood asks for it, else after the
    # backoff (1 s: each connection was up for longer than healthy_after).
    fake = FakeServer(name="s", tools=[FakeTool("t")])
    async with open_runtime(config(fake.server_config())) as rt, trio.open_nursery() as nursery:
        await rt.wait_ready()
        supervisor = rt._supervisors["s"]
        seen: list[tuple[ServerState, int, float]] = []
        expected: list[tuple[ServerState, int, float]] = []
        with rt.events() as events:

            async def record() -> None:
                async for event in events:
                    if isinstance(event, ServerStateChanged):
                        seen.append((event.new, event.generation, trio.current_time()))

            nursery.start_soon(record)
            for generation in range(1, 9):
                drop_at = 100.0 * generation
                await trio.sleep_until(drop_at)
                await fake.disconnect()
                for _ in range(1000):  # every pass (the clock stands still), until it left READY
                    if supervisor.state is not ServerState.READY:
                        break
                    flood(rt)
                    await trio.lowlevel.checkpoint()
                for _ in range(1000):  # until it is READY again (a few changes, or passes)
                    if (
                        supervisor.state is ServerState.READY
                        and supervisor.status().generation == generation + 1
                    ):
                        break
                    if back_after == 0.0:
                        flood(rt)
                        await trio.lowlevel.checkpoint()
                    else:
                        await supervisor.wait_changed()
                back_at = drop_at + back_after
                expected += [
                    (ServerState.RECONNECTING, generation, drop_at),
                    (ServerState.RECONNECTING, generation + 1, back_at),
                    (ServerState.READY, generation + 1, back_at),
                ]
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
        assert seen == expected
        assert fake.connect_times == [0.0] + [100.0 * g + back_after for g in range(1, 9)]


async def test_asking_to_reconnect_in_a_loop_puts_one_wake_up_in_the_mailbox(
    autojump_clock: Clock,
) -> None:
    fake = FakeServer(name="s", tools=[FakeTool("t")])
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        inbox = rt._supervisors["s"].inbox
        for _ in range(10 * MAILBOX_SIZE):
            rt.reconnect("s")
        # The first ask went to the supervisor waiting on its mailbox; the others are that ask.
        assert inbox.statistics().current_buffer_used == 0
        await trio.testing.wait_all_tasks_blocked()
        for _ in range(10 * MAILBOX_SIZE):  # taken: the next ask wakes it again, once
            rt.reconnect("s")
        assert inbox.statistics().current_buffer_used == 0
        await trio.testing.wait_all_tasks_blocked()
        assert fake.connect_times == [0.0]  # READY: an ask does nothing


async def test_an_ask_to_reconnect_is_not_lost_when_the_mailbox_is_full(
    autojump_clock: Clock,
) -> None:
    # The first attempt is refused; the next is due after 1 s. An ask at 0.5 s, while the
    # mailbox is full, still brings it forward.
    fake = FakeServer(name="s", tools=[FakeTool("t")], refuse_connects=1)
    async with open_runtime(config(fake.server_config())) as rt:
        await trio.sleep(0.5)
        _stuff_the_mailbox(rt)
        rt.reconnect("s")
        await rt.wait_ready()
        assert fake.connect_times == [0.0, 0.5]


async def test_a_full_registry_mailbox_gets_a_supervisors_messages_in_order_from_one_task(
    autojump_clock: Clock,
) -> None:
    # The registry is stalled with a full mailbox while a server connects, re-lists its tools
    # three times and drops. Each message the registry could not take used to get a task of
    # its own, racing the others (a listing could land after the withdrawal, or an old one
    # after a new one). Now one task at a time waits for room, the rest queue behind it, and a
    # newer message (a listing, or the withdrawal) supersedes a listing still queued.
    fake = FakeServer(name="s", tools=[FakeTool("t0")])
    changes: list[ToolsChanged] = []

    class Recorder:
        def publish(self, event: ToolsChanged) -> None:
            if event.server == "s":
                changes.append(event)

    registry = Registry(events=Recorder())
    for generation in range(REGISTRY_MAILBOX_SIZE):  # nothing to register: no change
        registry.send_nowait(ReplaceTools(server="other", generation=generation, tools=()))
    supervisor = ServerSupervisor(
        config=fake.server_config(),
        runtime=config(),
        registry=registry,
        callbacks=HostCallbacks(),
        open_transport=open_default_transport,
        events=EventBus(),
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(supervisor.run)
        await supervisor.wait_state(lambda state: state is ServerState.READY)
        tasks = supervisor._tasks
        assert tasks is not None
        most = len(tasks.child_tasks)  # the connection task and one delivery task
        for n in range(1, 4):
            fake.set_tools([FakeTool(f"t{n}")])
            await fake.emit_list_changed()
            await trio.sleep(1)  # the re-listing is debounced (0.25 s), then handled
            most = max(most, len(tasks.child_tasks))
        await fake.disconnect()
        await trio.sleep(1)  # the supervisor takes the end of the connection
        most = max(most, len(tasks.child_tasks))
        assert supervisor.state is ServerState.READY  # until the registry says so
        assert not supervisor.accepts_calls
        nursery.start_soon(registry.run)
        await supervisor.wait_state(lambda state: state is ServerState.RECONNECTING)
        await supervisor.wait_state(lambda state: state is ServerState.READY)
        await trio.testing.wait_all_tasks_blocked()  # the registry has taken its listing
        nursery.cancel_scope.cancel()
    # the connection task, one delivery task, the withdrawal's confirmation
    assert most <= 3
    assert [(c.added, c.removed) for c in changes] == [
        (("mcp_s_t0",), ()),  # generation 1's first listing, which the delivery task held
        ((), ("mcp_s_t0",)),  # its withdrawal, after it (the three re-listings superseded)
        (("mcp_s_t3",), ()),  # generation 2
    ]


async def test_a_timeout_sends_notifications_cancelled(autojump_clock: Clock) -> None:
    fake = FakeServer(name="s", tools=[FakeTool("slow", handler=hang), FakeTool("t")])
    async with open_runtime(config(fake.server_config(timeout=3))) as rt:
        await rt.wait_ready()
        with pytest.raises(CallTimeout) as info:
            await rt.call("mcp_s_slow")
        assert trio.current_time() == 3
        assert "got no answer in 3 s" in str(info.value)
        await trio.testing.wait_all_tasks_blocked()
        assert fake.cancellations == [info.value.request_id]
        # the connection is fine afterwards
        assert (await rt.call("mcp_s_t")).text == "{}"


async def test_a_shorter_timeout_fires_first_whatever_the_order_of_the_calls(
    autojump_clock: Clock,
) -> None:
    # One timer per session serves every call's deadline: a call with an earlier deadline made
    # while a later one waits must still fail at its own time, and the later one at its own.
    fake = FakeServer(name="s", tools=[FakeTool("slow", handler=hang)])
    async with open_runtime(config(fake.server_config(timeout=50))) as rt:
        await rt.wait_ready()
        failed_at: dict[str, float] = {}

        async def call(label: str, timeout: float | None) -> None:
            options: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
            with pytest.raises(CallTimeout) as info:
                await rt.call("mcp_s_slow", **options)
            failed_at[label] = trio.current_time()
            assert info.value.timeout == (50 if timeout is None else timeout)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(call, "default", None)
            await trio.sleep(1)
            nursery.start_soon(call, "short", 2.5)
            await trio.sleep(1)
            nursery.start_soon(call, "shorter", 0.5)
        assert failed_at == {"shorter": 2.5, "short": 3.5, "default": 50}
        await trio.testing.wait_all_tasks_blocked()
        assert len(fake.cancellations) == 3


async def test_answered_calls_do_not_pile_up_in_the_deadline_heap(autojump_clock: Clock) -> None:
    # Deadlines of answered calls are dropped lazily; the heap is compacted as it grows, so
    # thousands of quick calls with a 120 s timeout leave a bounded heap behind.
    fake = FakeServer(name="s", tools=[FakeTool("t")])
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        for _ in range(2000):
            await rt.call("mcp_s_t")
        table = rt._supervisor("s").ready_session().statistics()
        assert table.outstanding == 0
        # and the probe (server/discover, refused), initialize, tools/list
        assert table.resolved_total == 2000 + 3
        assert table.deadline_entries <= 2 * table.outstanding + 65
        assert trio.current_time() < 1  # the quick calls took no virtual time


async def test_a_cancelled_caller_cancels_the_request_on_the_server(autojump_clock: Clock) -> None:
    fake = FakeServer(name="s", tools=[FakeTool("slow", handler=hang)])
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        with trio.move_on_after(2):
            await rt.call("mcp_s_slow")
        await trio.testing.wait_all_tasks_blocked()
        assert len(fake.cancellations) == 1


async def test_progress_reaches_the_caller_and_can_extend_the_timer(autojump_clock: Clock) -> None:
    async def work(arguments: Mapping[str, Any], ctx: ToolContext) -> str:
        for step in range(1, 4):
            await trio.sleep(2)
            await ctx.progress(step, total=3, message=f"step {step}")
        return "done"

    fake = FakeServer(name="s", tools=[FakeTool("work", handler=work)])
    server = fake.server_config(timeout=3, progress_resets_timeout=True, max_call_time=100)
    async with open_runtime(config(server)) as rt:
        await rt.wait_ready()
        seen: list[ProgressNotificationParams] = []
        result = await rt.call("mcp_s_work", progress=seen.append)
        assert result.text == "done"
        assert trio.current_time() == 6  # 6 s in all, past the 3 s timeout, thanks to progress
        assert [(p.progress, p.total, p.message) for p in seen] == [
            (1, 3, "step 1"),
            (2, 3, "step 2"),
            (3, 3, "step 3"),
        ]


async def test_the_absolute_cap_bounds_a_call_that_keeps_reporting_progress(
    autojump_clock: Clock,
) -> None:
    async def chatty(arguments: Mapping[str, Any], ctx: ToolContext) -> str:
        while True:
            await trio.sleep(1)
            await ctx.progress(1)

    fake = FakeServer(name="s", tools=[FakeTool("chatty", handler=chatty)])
    server = fake.server_config(timeout=3, progress_resets_timeout=True, max_call_time=10)
    async with open_runtime(config(server)) as rt:
        await rt.wait_ready()
        with pytest.raises(CallTimeout):
            await rt.call("mcp_s_chatty")
        assert trio.current_time() == 10


# --------------------------------------------------------------------------- listing


async def test_list_changed_is_debounced_and_replaces_the_tools_atomically(
    autojump_clock: Clock,
) -> None:
    fake = FakeServer(name="s", tools=[FakeTool("a")])
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        with rt.events() as events:
            fake.set_tools([FakeTool("b"), FakeTool("c")])
            for at in (5.0, 5.1, 5.2):
                await trio.sleep_until(at)
                await fake.emit_list_changed()
            version = await rt.wait_tools_changed(rt.tools_version)
            assert trio.current_time() == pytest.approx(5.45)
            change = events.receive_nowait()
            assert isinstance(change, ToolsChanged)
            assert (change.added, change.removed, change.version) == (
                ("mcp_s_b", "mcp_s_c"),
                ("mcp_s_a",),
                version,
            )
        assert set(rt.tools()) == {"mcp_s_b", "mcp_s_c"}
        assert [m for m, _ in fake.requests].count("tools/list") == 2


async def test_a_late_listing_from_a_dead_connection_is_dropped(autojump_clock: Clock) -> None:
    fake = FakeServer(name="s", tools=[FakeTool("live")])
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        supervisor = rt._supervisors["s"]
        await fake.disconnect()
        await trio.testing.wait_all_tasks_blocked()
        await registered(rt, "mcp_s_live")  # withdrawn, then registered again
        assert rt.tools()["mcp_s_live"].generation == 2
        version = rt.tools_version
        stale = Listing(tools=(Tool(name="stale", input_schema={"type": "object"}),), refused=())
        # A re-listing of the dead connection reaches the supervisor, and a message of its
        # generation reaches the registry: both are dropped.
        await supervisor.inbox.send(Relisted(generation=1, listing=stale))
        await rt._registry.send(ReplaceTools(server="s", generation=1, tools=stale.tools))
        await trio.testing.wait_all_tasks_blocked()
        assert set(rt.tools()) == {"mcp_s_live"}
        assert rt.tools_version == version


async def test_pages_are_followed_and_filters_applied(autojump_clock: Clock) -> None:
    fake = FakeServer(name="s", page_size=2, tools=[FakeTool(f"t{i}") for i in range(5)])
    server = fake.server_config(tools_include=("t*",), tools_exclude=("t3",))
    async with open_runtime(config(server)) as rt:
        await rt.wait_ready()
        assert set(rt.tools()) == {"mcp_s_t0", "mcp_s_t1", "mcp_s_t2", "mcp_s_t4"}
        assert [m for m, _ in fake.requests].count("tools/list") == 3


async def test_a_cursor_cycle_fails_that_server_alone(autojump_clock: Clock) -> None:
    looping = FakeServer(
        name="loop", page_size=1, cursor_cycle=True, tools=[FakeTool("a"), FakeTool("b")]
    )
    good = FakeServer(name="good", tools=[FakeTool("t")])
    async with open_runtime(config(looping.server_config(), good.server_config())) as rt:
        statuses = await rt.wait_ready(timeout=0.5)
        assert statuses["good"].state is ServerState.READY
        assert "cursors go round in a circle" in (statuses["loop"].last_error or "")
        assert set(rt.tools()) == {"mcp_good_t"}


async def test_too_many_tools_fail_that_server_alone(autojump_clock: Clock) -> None:
    big = FakeServer(name="big", tools=[FakeTool(f"t{i}") for i in range(30)])
    async with open_runtime(config(big.server_config(), max_list_entries=20)) as rt:
        statuses = await rt.wait_ready(timeout=0.5)
        assert "more than 20 entries (max_list_entries)" in (statuses["big"].last_error or "")


async def test_a_malformed_tool_is_refused_alone(autojump_clock: Clock) -> None:
    fake = FakeServer(
        name="s",
        tools=[
            FakeTool("ok"),
            {"name": "bad", "inputSchema": []},
            {"description": "no name"},
            {"name": "bare"},
        ],
    )
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        assert set(rt.tools()) == {"mcp_s_ok", "mcp_s_bare"}
        refused = rt.status()["s"].refused_tools
        assert [r.tool for r in refused] == ["bad", None]
        assert refused[0].reason == (
            "malformed tool entry: invalid Tool: expected an object, got an array "
            "@ $.tools[1].inputSchema"
        )


# --------------------------------------------------------------------------- server requests


async def test_ping_is_answered_and_undeclared_capabilities_get_32601(
    autojump_clock: Clock,
) -> None:
    answers: dict[str, Any] = {}

    async def probe(arguments: Mapping[str, Any], ctx: ToolContext) -> str:
        answers["ping"] = await ctx.request("ping")
        try:
            await ctx.request("roots/list")
        except MethodNotFound as exc:
            answers["roots"] = exc.code
        return "ok"

    fake = FakeServer(name="s", tools=[FakeTool("probe", handler=probe)])
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        await rt.call("mcp_s_probe")
    assert answers == {"ping": {}, "roots": -32601}
    assert fake.requests[1][0] == "initialize"  # after the probe
    assert fake.requests[1][1] is not None
    assert fake.requests[1][1]["capabilities"] == {"tasks": {}}  # tasks: RuntimeConfig.tasks


async def test_host_callbacks_answer_roots_sampling_and_elicitation(autojump_clock: Clock) -> None:
    answers: dict[str, Any] = {}

    async def probe(arguments: Mapping[str, Any], ctx: ToolContext) -> str:
        answers["roots"] = await ctx.request("roots/list")
        answers["sampling"] = await ctx.request(
            "sampling/createMessage",
            {
                "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
                "maxTokens": 10,
            },
        )
        answers["elicitation"] = await ctx.request(
            "elicitation/create",
            {"message": "name?", "requestedSchema": {"type": "object", "properties": {}}},
        )
        return "ok"

    async def roots(server: str) -> list[dict[str, Any]]:
        return [{"uri": "file:///work", "name": server}]

    async def sample(server: str, params: Any) -> dict[str, Any]:
        return {"role": "assistant", "content": {"type": "text", "text": "hello"}, "model": "m"}

    async def elicit(server: str, params: Any) -> dict[str, Any]:
        return {"action": "accept", "content": {"name": params.message}}

    callbacks = HostCallbacks(list_roots=roots, sampling=sample, elicitation=elicit)
    fake = FakeServer(name="s", tools=[FakeTool("probe", handler=probe)])
    async with open_runtime(config(fake.server_config()), callbacks=callbacks) as rt:
        await rt.wait_ready()
        await rt.call("mcp_s_probe")
    assert answers["roots"] == {"roots": [{"uri": "file:///work", "name": "s"}]}
    assert answers["sampling"]["content"]["text"] == "hello"
    assert answers["elicitation"] == {"action": "accept", "content": {"name": "name?"}}
    assert fake.requests[1][0] == "initialize"  # after the probe
    init = fake.requests[1][1]
    assert init is not None
    assert init["capabilities"] == {
        "roots": {"listChanged": False},
        "sampling": {},
        "elicitation": {"form": {}},
        # with sampling and elicitation callbacks, the client runs both as tasks when asked
        "tasks": {
            "list": {},
            "cancel": {},
            "requests": {"sampling": {"createMessage": {}}, "elicitation": {"create": {}}},
        },
    }


async def test_server_logs_reach_the_host_log_and_the_events(
    autojump_clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    async def chatty(arguments: Mapping[str, Any], ctx: ToolContext) -> str:
        await ctx.log("warning", {"disk": "almost full"}, logger="storage")
        return "ok"

    caplog.set_level(logging.DEBUG, logger="trio_mcp.server.s")
    fake = FakeServer(name="s", tools=[FakeTool("chatty", handler=chatty)])
    async with open_runtime(config(fake.server_config(log_level="info"))) as rt:
        await rt.wait_ready()
        with rt.events() as events:
            await rt.call("mcp_s_chatty")
            # the log message went out before the answer; the dispatcher publishes it in its own
            # task, at the same virtual instant
            await trio.testing.wait_all_tasks_blocked()
            event = events.receive_nowait()
    assert event == ServerLogged(
        server="s", level="warning", data={"disk": "almost full"}, logger="storage"
    )
    assert fake.log_levels == ["info"]
    record = next(
        r for r in caplog.records if r.name == "trio_mcp.server.s" and "disk" in r.getMessage()
    )
    assert record.levelno == logging.WARNING


async def test_resource_subscriptions_and_updates(autojump_clock: Clock) -> None:
    fake = FakeServer(name="s", resources=[{"uri": "file:///a", "name": "a"}])
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        assert await rt.request("s", "resources/subscribe", {"uri": "file:///a"}) == {}
        assert fake.subscriptions == {"file:///a"}
        with rt.events() as events:
            await fake.notify_resource_updated("file:///a")
            await trio.testing.wait_all_tasks_blocked()
            assert events.receive_nowait() == ResourceUpdated(server="s", uri="file:///a")


# --------------------------------------------------------------------------- bad frames


class _Inject:
    """A sink in front of the session's mailbox that, once armed, slips extra frames in before
    the next frame the server sends."""

    def __init__(self, sink: Any, frames: list[bytes]) -> None:
        self.sink, self.frames = sink, frames

    def _slip_in(self, item: object) -> None:
        if self.frames and isinstance(item, bytes):
            for frame in self.frames:
                self.sink.send_nowait(frame, len(frame))
            self.frames.clear()

    def send_nowait(self, item: Any, size: int = 64) -> None:
        self._slip_in(item)
        self.sink.send_nowait(item, size)

    async def send(self, item: Any, size: int = 64) -> None:
        self._slip_in(item)
        await self.sink.send(item, size)

    def close(self) -> None:
        self.sink.close()


async def test_a_malformed_frame_fails_only_the_call_it_answers(autojump_clock: Clock) -> None:
    fake = FakeServer(name="s", tools=[FakeTool("t")])
    injected: list[bytes] = []

    def factory(sink: Any) -> Any:
        return fake.connect(_Inject(sink, injected))

    server = ServerConfig(name="s", transport_factory=factory)
    async with open_runtime(config(server)) as rt:
        await rt.wait_ready()
        injected.extend([b"}{ not json", b'{"jsonrpc":"2.0","id":4,"result":"not an object"}'])
        with pytest.raises(InvalidMessage, match=r"\$\.result"):
            # request id 4 (after server/discover, initialize, tools/list): its answer was the
            # malformed frame
            await rt.call("mcp_s_t")
        started = trio.current_time()
        assert (await rt.call("mcp_s_t")).text == "{}"
        assert trio.current_time() == started


# --------------------------------------------------------------------------- embedding


async def test_closing_withdraws_everything_and_later_calls_raise_runtime_closed(
    autojump_clock: Clock,
) -> None:
    fake = FakeServer(name="s", tools=[FakeTool("t")])
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        assert rt.tools()
    assert rt.state is RuntimeState.CLOSED
    assert rt.tools() == {}
    assert rt.status()["s"].state is ServerState.STOPPED
    assert fake.connections == 0
    with pytest.raises(RuntimeClosed):
        await rt.call("mcp_s_t")
    await rt.aclose()  # a second close is a no-op


async def test_the_hosts_finally_can_still_call_while_being_cancelled(
    autojump_clock: Clock,
) -> None:
    fake = FakeServer(name="s", tools=[FakeTool("t")])
    results: list[str] = []
    with trio.move_on_after(10):
        async with open_runtime(config(fake.server_config())) as rt:
            await rt.wait_ready()
            try:
                await trio.sleep_forever()
            finally:
                with trio.CancelScope(shield=True):
                    results.append((await rt.call("mcp_s_t", {"x": 1})).text)
    assert results == ['{"x":1}']
    assert rt.state is RuntimeState.CLOSED


async def test_an_error_in_the_body_comes_out_alone(autojump_clock: Clock) -> None:
    fake = FakeServer(name="s", tools=[FakeTool("t")])
    with pytest.raises(KeyError):
        async with open_runtime(config(fake.server_config())):
            raise KeyError("mine")


async def test_serve_runtime_in_the_hosts_own_nursery(
    autojump_clock: Clock, nursery: trio.Nursery
) -> None:
    fake = FakeServer(name="s", tools=[FakeTool("t")])
    rt: Runtime = await nursery.start(serve_runtime, config(fake.server_config()))
    await rt.wait_ready()
    assert (await rt.call("mcp_s_t")).text == "{}"
    await rt.aclose()
    assert rt.state is RuntimeState.CLOSED
    assert fake.connections == 0


async def test_ready_only_tools_and_disabled_servers(autojump_clock: Clock) -> None:
    on = FakeServer(name="on", tools=[FakeTool("t")])
    off = FakeServer(name="off", tools=[FakeTool("t")])
    servers = (on.server_config(), off.server_config(enabled=False))
    async with open_runtime(config(*servers)) as rt:
        statuses = await rt.wait_ready()
        assert statuses["off"].state is ServerState.DISABLED
        assert off.connect_times == []
        assert set(rt.tools(ready_only=True)) == {"mcp_on_t"}


async def test_the_master_switch_connects_nothing(autojump_clock: Clock) -> None:
    fake = FakeServer(name="s", tools=[FakeTool("t")])
    async with open_runtime(config(fake.server_config(), enabled=False)) as rt:
        statuses = await rt.wait_ready()
        assert statuses["s"].state is ServerState.DISABLED
        assert fake.connect_times == []


async def test_a_call_before_the_first_listing_says_the_server_is_not_ready(
    autojump_clock: Clock,
) -> None:
    fake = FakeServer(name="slow-start", refuse_connects=2, tools=[FakeTool("t")])
    async with open_runtime(config(fake.server_config())) as rt:
        with pytest.raises(ServerUnavailable, match="server 'slow-start' is connecting"):
            await rt.call("mcp_slow_start_t")
        result = await rt.call("mcp_slow_start_t", {"k": 1}, wait_ready=10)
        assert result.text == '{"k":1}'
        assert trio.current_time() == 3  # retries after 1 and 2 s
        with pytest.raises(ToolNotFound):
            await rt.call("mcp_other_t")


async def test_a_server_request_reusing_an_id_in_flight_is_refused_alone(
    autojump_clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeServer(name="s", tools=[FakeTool("t")])
    release = trio.Event()
    asked: list[str] = []

    async def list_roots(server: str) -> list[Any]:
        asked.append(server)
        await release.wait()
        return []

    injected: list[bytes] = []

    def factory(sink: Any) -> Any:
        return fake.connect(_Inject(sink, injected))

    server = ServerConfig(name="s", transport_factory=factory)
    callbacks = HostCallbacks(list_roots=list_roots)
    async with open_runtime(config(server), callbacks=callbacks) as rt:
        await rt.wait_ready()
        frame = b'{"jsonrpc":"2.0","id":"x1","method":"roots/list"}'
        injected.extend([frame, frame])  # the same id again while the first is in flight
        assert (await rt.call("mcp_s_t")).text == "{}"
        await trio.testing.wait_all_tasks_blocked()
        assert asked == ["s"]  # the second one was refused alone
        assert "sent request id 'x1' again while it is in flight" in caplog.text
        release.set()
        assert (await rt.call("mcp_s_t")).text == "{}"  # the connection goes on
        assert rt.status()["s"].generation == 1


def test_an_attempt_fails_with_the_transport_error_not_the_request_it_broke() -> None:
    # The handshake's request and the transport's reader both fail when a server dies while
    # connecting; which comes out first is up to the scheduler, the status says the cause.
    from trio_mcp.actors.runtime._supervisor import _first_error
    from trio_mcp.protocol import TransportClosed

    broken = ServerDisconnected("initialize failed: the server went away", server="s", sent=True)
    cause = TransportClosed("stdio server 'x' exited with code 3")
    assert _first_error(ExceptionGroup("", [broken, ExceptionGroup("", [cause])])) is cause
    assert _first_error(ExceptionGroup("", [ExceptionGroup("", [cause]), broken])) is cause
    assert _first_error(ExceptionGroup("", [broken])) is broken
