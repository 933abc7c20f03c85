"""No tool of a server that is not READY is in any published view of the registry.

A hypothesis ``RuleBasedStateMachine`` drives a runtime (supervisors, registry, sessions) over
in-memory fake servers behind seeded chaos transports: it drops connections, changes and
re-lists tools, makes calls, asks for reconnections and moves a mock clock, in any order. The
runtime runs in a trio loop of its own thread (the machine's rules are synchronous); the
machine's clock only moves when a rule moves it, so a run is reproducible. The invariant is
checked after **every task step** of that loop by a trio Instrument
(:class:`tests.invariants.ToolsOnlyWhenReady`), and after every rule: no tool of a server that
is not READY is in the published view, every tool in it is of its server's current (READY)
generation, and the view's version never goes down.

The regression that led to it: a connection that ends in the same scheduler pass as its
``tools/list`` answer left the server's tools registered while it was reconnecting, through every
later failed attempt (see also the deterministic test at the end).
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

import trio
import trio.testing
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from tests.invariants import ToolsOnlyWhenReady
from trio_mcp.actors import (
    RetryPolicy,
    Runtime,
    RuntimeConfig,
    ServerConfig,
    ServerState,
    open_runtime,
)
from trio_mcp.actors.testing import (
    ChaosPolicy,
    FakeServer,
    FakeTool,
    chaos_transport_factory,
)
from trio_mcp.protocol import McpError

T = TypeVar("T")
SERVERS = ("a", "b")
TOOL_NAMES = ("x", "y", "z")


class TrioLoop:
    """A trio loop on a mock clock in a thread of its own, driven from this thread."""

    def __init__(self) -> None:
        self.clock = trio.testing.MockClock()
        self._ready = threading.Event()
        self._token: trio.lowlevel.TrioToken | None = None
        self._nursery: trio.Nursery | None = None
        self._stop: trio.Event | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, daemon=True)
        self._thread.start()
        self._ready.wait()

    def _main(self) -> None:
        try:
            trio.run(self._root, clock=self.clock)
        except BaseException as exc:  # reported by close()
            self._error = exc
            self._ready.set()

    async def _root(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self._ready.set()
            await self._stop.wait()
            nursery.cancel_scope.cancel()

    def run(self, fn: Callable[[], Awaitable[T]]) -> T:
        """Run ``fn()`` in the loop and wait for it, then until every task is blocked."""

        async def step() -> T:
            result = await fn()
            await trio.testing.wait_all_tasks_blocked()
            return result

        return trio.from_thread.run(step, trio_token=self._token)

    def start(self, fn: Callable[[], Awaitable[None]]) -> None:
        """Start ``fn()`` in the loop's nursery (it must not raise)."""

        async def start() -> None:
            assert self._nursery is not None
            self._nursery.start_soon(fn)
            await trio.testing.wait_all_tasks_blocked()

        trio.from_thread.run(start, trio_token=self._token)

    def close(self) -> None:
        if self._stop is not None and self._error is None:
            trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
        self._thread.join(timeout=60)
        assert not self._thread.is_alive(), "the trio loop did not stop"
        if self._error is not None:
            raise self._error


class RuntimeMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = TrioLoop()
        self.fakes: dict[str, FakeServer] = {}
        self.rt: Runtime | None = None
        self.check: ToolsOnlyWhenReady | None = None
        self.calls_started = 0
        self.calls_ended = 0
        self.version = 0
        self._close_runtime: trio.Event | None = None
        self._closed = threading.Event()

    # ------------------------------------------------------------------ set-up

    @initialize(
        seed=st.integers(0, 2**16),
        drop=st.sampled_from([0.0, 0.0, 0.1]),
        truncate=st.sampled_from([0.0, 0.05]),
        cut_after=st.one_of(st.none(), st.integers(1, 8)),
    )
    def start_runtime(self, seed: int, drop: float, truncate: float, cut_after: int | None) -> None:
        policy = ChaosPolicy(
            seed=seed,
            drop=drop,
            truncate=truncate,
            delay=(0.0, 0.05),
            disconnect_after_frames=cut_after,
        )
        servers = []
        for name in SERVERS:
            fake = FakeServer(name=name, tools=[FakeTool(t) for t in TOOL_NAMES])
            self.fakes[name] = fake
            factory = chaos_transport_factory(fake.transport_factory(), policy)
            servers.append(
                ServerConfig(name=name, transport_factory=factory, connect_timeout=2, timeout=1)
            )
        retry = RetryPolicy(
            first_connect_delays=(0.5, 0.5),
            park_probe_interval=3.0,
            reconnect_initial=0.25,
            reconnect_max=2.0,
            jitter=0.0,
        )
        config = RuntimeConfig(servers=tuple(servers), retry=retry, list_changed_debounce=0.1)
        started = threading.Event()

        async def serve() -> None:
            async with open_runtime(config) as rt:
                self.rt = rt
                self.check = ToolsOnlyWhenReady(rt)
                trio.lowlevel.add_instrument(self.check)
                self._close_runtime = trio.Event()
                started.set()
                await self._close_runtime.wait()
            if self.check is not None:
                trio.lowlevel.remove_instrument(self.check)
                self.check.check("the runtime's close")
            self._closed.set()

        self.loop.start(serve)
        assert started.wait(10)

    # ------------------------------------------------------------------ rules

    @rule(seconds=st.sampled_from([0.0, 0.05, 0.1, 0.3, 0.6, 1.0, 2.5]))
    def advance(self, seconds: float) -> None:
        async def jump() -> None:
            # in small steps, so that every timer due on the way fires in its turn
            left = seconds
            while left > 0:
                step = min(left, 0.05)
                self.loop.clock.jump(step)
                left -= step
                await trio.testing.wait_all_tasks_blocked()

        self.loop.run(jump)

    @rule(server=st.sampled_from(SERVERS))
    def drop_connection(self, server: str) -> None:
        self.loop.run(self.fakes[server].disconnect)

    @rule(server=st.sampled_from(SERVERS), tools=st.sets(st.sampled_from(TOOL_NAMES)))
    def change_tools(self, server: str, tools: set[str]) -> None:
        fake = self.fakes[server]
        fake.set_tools([FakeTool(t) for t in sorted(tools)])

        async def tell() -> None:
            await fake.emit_list_changed("tools")

        self.loop.run(tell)

    @rule(server=st.sampled_from(SERVERS), tool=st.sampled_from(TOOL_NAMES))
    def call(self, server: str, tool: str) -> None:
        rt = self.rt
        assert rt is not None
        self.calls_started += 1

        async def call() -> None:
            try:
                await rt.call(f"mcp_{server}_{tool}")
            except McpError:
                pass  # every failure is an outcome; a hang or a crash is not
            finally:
                self.calls_ended += 1

        self.loop.start(call)

    @rule(server=st.sampled_from(SERVERS))
    def reconnect(self, server: str) -> None:
        rt = self.rt
        assert rt is not None

        async def ask() -> None:
            rt.reconnect(server)

        self.loop.run(ask)

    # ------------------------------------------------------------------ invariants

    @invariant()
    def no_tool_of_a_server_that_is_not_ready(self) -> None:
        if self.check is None or self.rt is None:
            return
        rt, check = self.rt, self.check

        async def look() -> None:
            check.check("a rule")

        self.loop.run(look)
        assert check.violations == []
        statuses = rt.status()
        for tool in rt.tools().values():
            status = statuses[tool.server]
            assert status.state is ServerState.READY
            assert tool.generation == status.generation  # nothing of an older connection
        assert rt.tools_version >= self.version  # the view only moves forward
        self.version = rt.tools_version

    @precondition(lambda self: self.rt is not None)
    @invariant()
    def a_ready_server_takes_calls_or_is_withdrawing(self) -> None:
        rt = self.rt
        assert rt is not None
        for status in rt.status().values():
            if status.state is ServerState.READY:
                assert status.generation >= 1
            assert status.state is not ServerState.STOPPED

    # ------------------------------------------------------------------ the end

    def teardown(self) -> None:
        try:
            if self._close_runtime is not None:
                closing = self._close_runtime

                async def close() -> None:
                    closing.set()
                    # the runtime needs the clock to move past its calls' timeouts and the
                    # transports' closing; shutdown_grace bounds it
                    for _ in range(400):
                        if self._closed.is_set():
                            return
                        self.loop.clock.jump(0.05)
                        await trio.testing.wait_all_tasks_blocked()

                self.loop.run(close)
                assert self._closed.is_set(), "the runtime did not close"
                assert self.rt is not None and self.rt.tools() == {}
                assert self.calls_ended == self.calls_started  # no call hangs
                assert self.check is not None and self.check.violations == []
        finally:
            self.loop.close()


RuntimeMachine.TestCase.settings = settings(
    max_examples=25,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestRuntimeMachine = RuntimeMachine.TestCase


# --------------------------------------------------------------------------- the regression


async def test_a_connection_that_ends_with_its_listing_leaves_no_tool_behind(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The first connection is clean; once it is dropped, every new one is cut right after the
    # server's second frame, its tools/list answer, so the answer and the end arrive together,
    # attempt after attempt (connections 1 to 8, counting from 0). At no step may the server's
    # tools be registered unless it is READY, and while it is reconnecting the table holds none
    # of them.
    fake = FakeServer(name="s", tools=[FakeTool("t")])
    cut = ChaosPolicy(seed=0, disconnect_after_frames=2)
    factory = chaos_transport_factory(fake.transport_factory(), [None] + [cut] * 8)
    config = RuntimeConfig(
        servers=(ServerConfig(name="s", transport_factory=factory),),
        retry=RetryPolicy(reconnect_initial=1.0, jitter=0.0, reconnect_max=1.0),
    )
    async with open_runtime(config) as rt:
        await rt.wait_ready()
        assert set(rt.tools()) == {"mcp_s_t"}
        check = ToolsOnlyWhenReady(rt)
        trio.lowlevel.add_instrument(check)
        states: list[ServerState] = []
        tools_while_reconnecting: list[int] = []
        with rt.events() as events:
            await fake.disconnect()
            async for event in events:
                new = getattr(event, "new", None)
                if isinstance(new, ServerState):
                    states.append(new)
                    if new is ServerState.RECONNECTING:
                        tools_while_reconnecting.append(len(rt.tools()))
                if factory.connections == 10 and new is ServerState.READY:
                    break  # connections 1 to 8 were cut; the tenth is clean again
        trio.lowlevel.remove_instrument(check)
        assert states.count(ServerState.RECONNECTING) >= 8
        assert tools_while_reconnecting and set(tools_while_reconnecting) == {0}
        assert check.checks > 0
        assert check.violations == []
        await rt.wait_ready()
        assert set(rt.tools()) == {"mcp_s_t"}


async def test_a_relisting_that_arrives_with_the_end_of_its_connection_is_dropped(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The exact pass of the old bug: a READY server announces a tools change; its tools/list
    # answer (the connection's 4th frame: initialize, tools/list, list_changed, tools/list) and
    # the end of the connection arrive together. The re-listing belongs to a dead generation:
    # it must not be registered while the server reconnects.
    fake = FakeServer(name="s", tools=[FakeTool("t")])
    factory = chaos_transport_factory(
        fake.transport_factory(), [ChaosPolicy(seed=0, disconnect_after_frames=4)]
    )
    config = RuntimeConfig(
        servers=(ServerConfig(name="s", transport_factory=factory),),
        retry=RetryPolicy(reconnect_initial=5.0, jitter=0.0),
        list_changed_debounce=0.25,
    )
    async with open_runtime(config) as rt:
        await rt.wait_ready()
        check = ToolsOnlyWhenReady(rt)
        trio.lowlevel.add_instrument(check)
        fake.set_tools([FakeTool("t"), FakeTool("new")])
        with rt.events() as events:
            await fake.emit_list_changed("tools")
            async for event in events:
                if getattr(event, "new", None) is ServerState.RECONNECTING:
                    break
        await trio.sleep(2)  # well before the reconnection (5 s)
        assert rt.status()["s"].state is ServerState.RECONNECTING
        assert rt.tools() == {}
        await rt.wait_ready()
        trio.lowlevel.remove_instrument(check)
        assert trio.current_time() >= 5
        assert set(rt.tools()) == {"mcp_s_t", "mcp_s_new"}
        assert rt.tools()["mcp_s_new"].generation == 2
        assert check.violations == []
        assert factory.transports[0].disconnected
