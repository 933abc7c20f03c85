"""The seeded chaos transport: each kind of chaos, determinism by seed, disconnects (which end
the connection with ConnectionEnded in the sink), send_nowait, and the factories.

A chaos transport is opened with :func:`open_chaos_transport` over a factory that takes a sink;
here mostly the client end of a memory pair, whose server end the test drives."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from trio_mcp.actors import RuntimeConfig, ServerConfig, ServerState, TransportKind, open_runtime
from trio_mcp.actors.testing._chaos import (
    ChaosAction,
    ChaosPolicy,
    ChaosStatistics,
    ChaosTransport,
    ChaosTransportFactory,
    chaos_transport_factory,
    open_chaos_transport,
)
from trio_mcp.actors.testing._fakes import FakeServer, FakeTool
from trio_mcp.protocol._errors import ConnectError, TransportClosed
from trio_mcp.transports._base import (
    ConnectionEnded,
    FrameSink,
    Inbound,
    InboxReader,
    ProcessTransport,
    StderrLine,
    Transport,
    TransportInfo,
    open_inbox,
)
from trio_mcp.transports._channel import ByteChannel
from trio_mcp.transports._memory import MemoryTransport, memory_transport_pair
from trio_mcp.transports.stdio._stdio import StdioParameters, open_stdio_transport

FRAMES = [json.dumps({"jsonrpc": "2.0", "id": i, "result": {"n": i}}).encode() for i in range(40)]


@attrs.define
class MemoryFactory:
    """A transport factory: the client end of a memory pair whose frames go to the sink it is
    given. The server end of the last connection is :attr:`server`."""

    max_bytes: int = 1 << 20
    server: MemoryTransport | None = None
    client: MemoryTransport | None = None

    @asynccontextmanager
    async def __call__(self, sink: FrameSink) -> AsyncIterator[Transport]:
        client, server = memory_transport_pair(max_bytes=self.max_bytes, client_sink=sink)
        self.client, self.server = client, server
        try:
            yield client
        finally:
            await client.aclose()


@asynccontextmanager
async def chaos_pair(
    sink: FrameSink | None = None, max_bytes: int = 1 << 20, **policy: Any
) -> AsyncIterator[tuple[ChaosTransport, MemoryTransport]]:
    """(chaos-wrapped client end, plain server end)."""
    factory = MemoryFactory(max_bytes=max_bytes)
    async with open_chaos_transport(factory, ChaosPolicy(**policy), sink) as chaos:
        assert factory.server is not None
        yield chaos, factory.server


async def receive_all(
    chaos: ChaosTransport, server: MemoryTransport, frames: list[bytes]
) -> list[bytes]:
    """Send ``frames`` from the server, close it, and collect what the chaos end delivers."""
    for frame in frames:
        await server.send(frame)
    await server.aclose()
    got: list[bytes] = []
    while True:
        try:
            got.append(await chaos.receive())
        except TransportClosed:
            return got


def is_json(frame: bytes) -> bool:
    try:
        json.loads(frame)
    except ValueError:
        return False
    return True


# --------------------------------------------------------------------------- the policy


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"drop": 1.5}, r"ChaosPolicy.drop must be a probability in \[0, 1\], got 1.5"),
        ({"garble": -0.1}, r"ChaosPolicy.garble must be a probability"),
        ({"duplicate": float("nan")}, r"ChaosPolicy.duplicate must be a probability"),
        ({"truncate": True}, r"ChaosPolicy.truncate must be a probability"),
        ({"delay": (2.0, 1.0)}, r"ChaosPolicy.delay must satisfy 0 <= low <= high"),
        ({"delay": (-1.0, 1.0)}, r"ChaosPolicy.delay must satisfy 0 <= low <= high"),
        ({"delay": (1.0,)}, r"ChaosPolicy.delay must be a \(low, high\) pair"),
        ({"delay": (0.0, float("inf"))}, r"ChaosPolicy.delay bounds must be finite"),
        ({"disconnect_after_frames": -1}, r"disconnect_after_frames must be an integer >= 0"),
        ({"directions": frozenset()}, r"directions must be a non-empty frozenset"),
        ({"directions": {"sideways"}}, r"directions must be a non-empty frozenset"),
    ],
)
def test_policy_validation(options: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ChaosPolicy(**options)  # type: ignore[arg-type]


def test_policy_defaults_and_direction_conversion() -> None:
    policy = ChaosPolicy()
    assert policy.directions == frozenset({"receive"})
    assert (policy.seed, policy.drop, policy.delay, policy.disconnect_after_frames) == (
        0,
        0.0,
        None,
        None,
    )
    both = ChaosPolicy(directions={"send", "receive"})
    assert both.directions == frozenset({"send", "receive"})


# --------------------------------------------------------------------------- kinds of chaos


async def test_no_chaos_passes_frames_through_untouched() -> None:
    async with chaos_pair() as (chaos, server):
        assert isinstance(chaos, Transport)
        assert await receive_all(chaos, server, FRAMES[:5]) == FRAMES[:5]
        assert chaos.actions == []
        assert chaos.statistics() == ChaosStatistics(
            sent=0,
            received=5,
            delayed=0,
            dropped=0,
            truncated=0,
            garbled=0,
            duplicated=0,
            disconnected=False,
        )


async def test_drop_loses_frames() -> None:
    async with chaos_pair(drop=1.0) as (chaos, server):
        assert await receive_all(chaos, server, FRAMES[:3]) == []
        assert chaos.actions == [
            ChaosAction(index=0, direction="receive", kind="drop"),
            ChaosAction(index=1, direction="receive", kind="drop"),
            ChaosAction(index=2, direction="receive", kind="drop"),
        ]


async def test_duplicate_delivers_each_frame_twice() -> None:
    async with chaos_pair(duplicate=1.0) as (chaos, server):
        got = await receive_all(chaos, server, FRAMES[:2])
        assert got == [FRAMES[0], FRAMES[0], FRAMES[1], FRAMES[1]]
        assert [a.kind for a in chaos.actions] == ["duplicate", "duplicate"]
        assert chaos.statistics().received == 2


async def test_garble_makes_every_frame_invalid_json() -> None:
    async with chaos_pair(garble=1.0, seed=5) as (chaos, server):
        got = await receive_all(chaos, server, FRAMES)
        assert len(got) == len(FRAMES)
        assert not any(is_json(frame) for frame in got)
        for action, before, after in zip(chaos.actions, FRAMES, got, strict=True):
            assert action.kind == "garble"
            offset = int(action.value or 0)
            assert len(after) == len(before)
            assert after[:offset] == before[:offset]
            assert after[offset + 1 :] == before[offset + 1 :]
            assert after[offset] < 0x20


async def test_truncate_cuts_every_frame_short() -> None:
    async with chaos_pair(truncate=1.0, seed=9) as (chaos, server):
        got = await receive_all(chaos, server, FRAMES)
        for action, before, after in zip(chaos.actions, FRAMES, got, strict=True):
            assert action.kind == "truncate"
            assert action.value == len(after)
            assert 1 <= len(after) < len(before)
            assert before.startswith(after)
            assert not is_json(after)


async def test_delay_holds_each_frame_back_by_the_recorded_time(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with chaos_pair(delay=(1.0, 3.0), seed=1) as (chaos, server):
        for frame in FRAMES[:3]:
            await server.send(frame)
        arrivals = []
        for frame in FRAMES[:3]:
            assert await chaos.receive() == frame  # in order
            arrivals.append(trio.current_time())
        delays = [a.value for a in chaos.actions]
        assert [a.kind for a in chaos.actions] == ["delay"] * 3
        assert all(d is not None and 1.0 <= d <= 3.0 for d in delays)
        expected = []
        total = 0.0
        for delay in delays:
            assert delay is not None
            total += delay
            expected.append(total)
        assert arrivals == pytest.approx(expected)
        assert chaos.statistics().delayed == 3


async def test_send_direction_chaos_changes_what_the_peer_gets() -> None:
    policy: dict[str, Any] = {"duplicate": 1.0, "directions": frozenset({"send"})}
    async with chaos_pair(**policy) as (chaos, server):
        await chaos.send(b"a", request_id=1)
        await server.send(b"b")
        assert await chaos.receive() == b"b"  # receive is not a chaos direction here
        assert [await server.receive(), await server.receive()] == [b"a", b"a"]
        assert chaos.actions == [ChaosAction(index=0, direction="send", kind="duplicate")]
        assert chaos.statistics().sent == 1
        assert chaos.statistics().received == 0


async def test_drop_on_send_never_reaches_the_peer() -> None:
    async with chaos_pair(drop=1.0, directions=frozenset({"send"})) as (chaos, server):
        await chaos.send(b"lost")
        await chaos.send(b"lost too")
        assert server.statistics().buffered == 0
        assert chaos.actions == [
            ChaosAction(index=0, direction="send", kind="drop"),
            ChaosAction(index=1, direction="send", kind="drop"),
        ]


async def test_events_other_than_frames_pass_the_pump_untouched() -> None:
    sink = open_inbox()
    upstream: list[FrameSink] = []

    @asynccontextmanager
    async def factory(inner_sink: FrameSink) -> AsyncIterator[Transport]:
        upstream.append(inner_sink)
        client, _server = memory_transport_pair(client_sink=inner_sink)
        yield client

    async with open_chaos_transport(factory, ChaosPolicy(drop=1.0), sink) as chaos:
        line = StderrLine(text="the server's log")
        await upstream[0].send(line)
        await trio.testing.wait_all_tasks_blocked()
        assert sink.receive_nowait() == line  # never dropped: chaos is for frames
        assert chaos.actions == []


# --------------------------------------------------------------------------- send_nowait


async def test_send_nowait_without_send_chaos_goes_straight_through() -> None:
    async with chaos_pair(max_bytes=4, drop=1.0) as (chaos, server):
        chaos.send_nowait(b"abcd")
        with pytest.raises(trio.WouldBlock):  # the peer's channel is full
            chaos.send_nowait(b"e")
        assert await server.receive() == b"abcd"
        assert chaos.actions == []


async def test_send_nowait_declines_when_a_send_delay_applies(
    autojump_clock: trio.testing.MockClock,
) -> None:
    policy: dict[str, Any] = {"delay": (2.0, 2.0), "directions": frozenset({"send"})}
    async with chaos_pair(**policy) as (chaos, server):
        with pytest.raises(trio.WouldBlock):
            chaos.send_nowait(b"x")
        assert chaos.actions == []  # no fate drawn: send() carries the frame
        assert chaos.statistics().sent == 0
        await chaos.send(b"x")  # the delay holds the caller back
        assert trio.current_time() == 2.0
        assert await server.receive() == b"x"
        assert chaos.actions == [ChaosAction(index=0, direction="send", kind="delay", value=2.0)]


async def test_send_nowait_leaves_frames_with_send_chaos_to_send() -> None:
    # with chaos on sends, every frame draws its fate in send(), exactly once; send_nowait()
    # declines, and a session then sends the frame with send()
    policy: dict[str, Any] = {"duplicate": 1.0, "directions": frozenset({"send"})}
    async with chaos_pair(**policy) as (chaos, server):
        with pytest.raises(trio.WouldBlock):
            chaos.send_nowait(b"x", request_id=3)
        assert chaos.statistics().sent == 0 and chaos.actions == []
        await chaos.send(b"x", request_id=3)
        assert [server.statistics().buffered, chaos.statistics().sent] == [2, 1]
        assert [await server.receive(), await server.receive()] == [b"x", b"x"]


async def test_a_declined_send_nowait_draws_no_fate() -> None:
    """The fate of a frame depends on its index only: a send_nowait that declines (a full
    inner outbox) and the send() that carries the frame afterwards are one frame."""
    policy: dict[str, Any] = {"garble": 0.5, "seed": 3, "directions": frozenset({"send"})}
    async with chaos_pair(max_bytes=len(FRAMES[0]), **policy) as (chaos, server):
        await chaos.send(FRAMES[0])
        with pytest.raises(trio.WouldBlock):
            chaos.send_nowait(FRAMES[1])
        async with trio.open_nursery() as nursery:
            nursery.start_soon(chaos.send, FRAMES[1])
            await trio.testing.wait_all_tasks_blocked()
            await server.receive()
        await server.receive()
        assert chaos.statistics().sent == 2
        assert {a.index for a in chaos.actions} <= {0, 1}


# --------------------------------------------------------------------------- determinism


MIXED = {"drop": 0.2, "duplicate": 0.2, "garble": 0.2, "truncate": 0.2, "delay": (0.0, 0.5)}


async def run_mixed(seed: int, *, interleave_sends: bool) -> tuple[list[ChaosAction], list[bytes]]:
    """Receive FRAMES through a mixed policy (optionally sending before every receive) until
    nothing more arrives; the receive-direction actions and the frames delivered."""
    policy = ChaosPolicy(seed=seed, directions=frozenset({"send", "receive"}), **MIXED)  # type: ignore[arg-type]
    factory = MemoryFactory()
    async with open_chaos_transport(factory, policy) as chaos:
        assert factory.server is not None
        for frame in FRAMES:
            await factory.server.send(frame)
        got: list[bytes] = []
        with trio.move_on_after(1000):
            while True:
                if interleave_sends:
                    await chaos.send(b"{}")
                got.append(await chaos.receive())
        return [a for a in chaos.actions if a.direction == "receive"], got


async def test_same_seed_same_fates(autojump_clock: trio.testing.MockClock) -> None:
    first = await run_mixed(42, interleave_sends=False)
    second = await run_mixed(42, interleave_sends=False)
    assert first == second
    kinds = {a.kind for a in first[0]}
    assert kinds == {"delay", "drop", "duplicate", "garble", "truncate"}


async def test_another_seed_other_fates(autojump_clock: trio.testing.MockClock) -> None:
    assert (await run_mixed(1, interleave_sends=False)) != (
        await run_mixed(2, interleave_sends=False)
    )


async def test_received_frames_fates_do_not_depend_on_sends(
    autojump_clock: trio.testing.MockClock,
) -> None:
    quiet = await run_mixed(7, interleave_sends=False)
    chatty = await run_mixed(7, interleave_sends=True)
    assert quiet == chatty


@given(
    frame=st.dictionaries(
        st.text(max_size=5), st.integers() | st.text(max_size=20), min_size=1
    ).map(
        lambda d: json.dumps({"jsonrpc": "2.0", "id": 1, "result": d}, ensure_ascii=False).encode()
    ),
    seed=st.integers(min_value=0, max_value=2**32),
    truncate=st.booleans(),
)
def test_damaged_frames_are_never_valid_json(frame: bytes, seed: int, truncate: bool) -> None:
    policy = ChaosPolicy(seed=seed, garble=1.0, truncate=1.0 if truncate else 0.0)

    async def scenario() -> bytes:
        factory = MemoryFactory()
        async with open_chaos_transport(factory, policy) as chaos:
            assert factory.server is not None
            await factory.server.send(frame)
            return await chaos.receive()

    damaged = trio.run(scenario)
    assert damaged != frame
    assert not is_json(damaged)


# --------------------------------------------------------------------------- disconnects

DISCONNECTED_2 = (
    "cannot receive: the chaos transport disconnected after 2 frames (disconnect_after_frames)"
)


async def test_disconnect_after_frames_delivers_n_then_closes() -> None:
    async with chaos_pair(disconnect_after_frames=2) as (chaos, server):
        await server.send(FRAMES[0])
        assert await chaos.receive() == FRAMES[0]
        assert chaos.statistics().disconnected is False
        for frame in FRAMES[1:4]:  # all at once: the ones after the second never arrive
            server.send_nowait(frame)
        assert await chaos.receive() == FRAMES[1]
        await trio.testing.wait_all_tasks_blocked()
        assert chaos.disconnected
        for _ in range(2):
            with pytest.raises(TransportClosed) as info:
                await chaos.receive()
            assert str(info.value) == DISCONNECTED_2
        with pytest.raises(TransportClosed, match="disconnected after 2 frames"):
            await chaos.send(b"{}")
        with pytest.raises(TransportClosed, match="disconnected after 2 frames"):
            chaos.send_nowait(b"{}")
        # The peer sees the connection end.
        with pytest.raises(TransportClosed, match="the peer closed the connection"):
            await server.send(b"more")
        assert chaos.actions == [
            ChaosAction(index=2, direction="receive", kind="disconnect", value=2)
        ]
        assert chaos.statistics().disconnected


async def test_the_disconnect_arrives_in_the_sink_as_connection_ended() -> None:
    sink = ByteChannel[Inbound](max_bytes=1 << 20)
    async with chaos_pair(sink, disconnect_after_frames=2) as (chaos, server):
        for frame in FRAMES[:4]:
            server.send_nowait(frame)
        await trio.testing.wait_all_tasks_blocked()
        assert sink.receive_nowait() == FRAMES[0]
        assert sink.receive_nowait() == FRAMES[1]
        end = sink.receive_nowait()
        assert isinstance(end, ConnectionEnded)
        assert type(end.error) is TransportClosed
        assert str(end.error) == DISCONNECTED_2
        assert end.unsent == frozenset()
        with pytest.raises(trio.EndOfChannel):  # nothing after the end
            sink.receive_nowait()
        with pytest.raises(RuntimeError, match="go to the sink"):
            await chaos.receive()


async def test_an_inner_end_keeps_its_unsent_ids() -> None:
    sink = open_inbox()
    inner_sink: list[FrameSink] = []

    @asynccontextmanager
    async def factory(given: FrameSink) -> AsyncIterator[Transport]:
        inner_sink.append(given)
        client, _server = memory_transport_pair(client_sink=given)
        yield client

    async with open_chaos_transport(factory, ChaosPolicy(duplicate=1.0), sink):
        why = TransportClosed("the server exited")
        await inner_sink[0].send(b"last")
        await inner_sink[0].send(ConnectionEnded(error=why, unsent=frozenset({4, 5})))
        await trio.testing.wait_all_tasks_blocked()
        assert [sink.receive_nowait(), sink.receive_nowait()] == [b"last", b"last"]
        assert sink.receive_nowait() == ConnectionEnded(error=why, unsent=frozenset({4, 5}))
        with pytest.raises(trio.EndOfChannel):  # the end is the last item, and comes once
            sink.receive_nowait()


async def test_the_end_of_the_inner_connection_reaches_the_reader() -> None:
    async with chaos_pair() as (chaos, server):
        await server.send(b"x")
        await server.aclose()
        assert await chaos.receive() == b"x"
        with pytest.raises(TransportClosed, match="the peer closed the connection"):
            await chaos.receive()


async def test_disconnect_counts_dropped_frames_and_both_directions() -> None:
    policy: dict[str, Any] = {
        "drop": 1.0,
        "disconnect_after_frames": 3,
        "directions": frozenset({"send", "receive"}),
    }
    async with chaos_pair(**policy) as (chaos, server):
        await chaos.send(b"out-1")
        await chaos.send(b"out-2")
        await server.send(b"in")
        with pytest.raises(TransportClosed):
            await chaos.receive()  # the dropped frame is the third; then the link is cut
        assert [(a.index, a.direction, a.kind) for a in chaos.actions] == [
            (0, "send", "drop"),
            (1, "send", "drop"),
            (0, "receive", "drop"),
            (3, "receive", "disconnect"),
        ]


async def test_disconnect_after_zero_frames_fails_the_first_operation() -> None:
    async with chaos_pair(disconnect_after_frames=0) as (chaos, _server):
        with pytest.raises(TransportClosed, match="disconnected after 0 frames"):
            await chaos.send(b"{}")
        assert chaos.actions == [ChaosAction(index=0, direction="send", kind="disconnect", value=0)]


async def test_disconnect_after_zero_frames_lets_no_frame_in() -> None:
    async with chaos_pair(disconnect_after_frames=0) as (chaos, server):
        await server.send(FRAMES[0])
        with pytest.raises(TransportClosed, match="disconnected after 0 frames"):
            await chaos.receive()
        assert chaos.statistics().received == 0


async def test_a_receive_waiting_when_the_link_is_cut_says_why() -> None:
    policy: dict[str, Any] = {"disconnect_after_frames": 1, "directions": frozenset({"send"})}
    async with chaos_pair(**policy) as (chaos, server):
        errors: list[str] = []

        async def reader() -> None:
            try:
                await chaos.receive()
            except TransportClosed as exc:
                errors.append(str(exc))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(reader)
            await trio.testing.wait_all_tasks_blocked()
            await chaos.send(b"{}")
        assert errors == [
            "cannot receive: the chaos transport disconnected after 1 frames "
            "(disconnect_after_frames)"
        ]
        assert await server.receive() == b"{}"


async def test_a_disconnect_on_the_send_side_closes_the_inner_transport_too() -> None:
    policy: dict[str, Any] = {"disconnect_after_frames": 1, "directions": frozenset({"send"})}
    async with chaos_pair(**policy) as (chaos, server):
        await chaos.send(b"{}")
        assert chaos.disconnected
        await trio.testing.wait_all_tasks_blocked()
        assert await server.receive() == b"{}"
        # the peer sees the connection end, as after a disconnect on the receive side
        with pytest.raises(TransportClosed, match="the peer closed the connection"):
            await server.send(b"more")


async def test_aclose_closes_the_inner_transport_and_is_idempotent() -> None:
    async with chaos_pair(duplicate=1.0) as (chaos, server):
        await server.send(b"x")
        assert await chaos.receive() == b"x"
        await trio.testing.wait_all_tasks_blocked()  # the pump has put the duplicate
        await chaos.aclose()
        await chaos.aclose()
        assert await chaos.receive() == b"x"  # the duplicate was already delivered
        with pytest.raises(TransportClosed, match="the chaos transport was closed on this side"):
            await chaos.receive()
        with pytest.raises(TransportClosed, match="closed on this side"):
            await chaos.send(b"y")
        with pytest.raises(TransportClosed, match="the peer closed the connection"):
            await server.send(b"y")


async def test_info_names_the_seed() -> None:
    async with chaos_pair(seed=11) as (chaos, _server):
        assert chaos.info == TransportInfo(
            kind="memory", detail="client end of memory pair (chaos seed 11)"
        )
        assert not isinstance(chaos, ProcessTransport)  # no pid: no process behind it


# --------------------------------------------------------------------------- factories


def test_factory_argument_checks() -> None:
    fake = FakeServer()
    with pytest.raises(TypeError, match="got an item 'x'"):
        chaos_transport_factory(fake.transport_factory(), [None, "x"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="takes a ChaosPolicy or a sequence"):
        chaos_transport_factory(fake.transport_factory(), 3)  # type: ignore[arg-type]


INITIALIZE = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"},
        },
    }
).encode()


async def exchange(factory: ChaosTransportFactory, frames: int) -> list[bytes]:
    """One connection: send INITIALIZE, read ``frames`` frames from the sink."""
    sink = open_inbox()
    reader = InboxReader(sink)
    async with factory(sink) as transport:
        await transport.send(INITIALIZE)
        return [await reader.receive() for _ in range(frames)]


async def test_factory_with_one_policy_wraps_every_connection() -> None:
    fake = FakeServer()
    factory = chaos_transport_factory(fake.transport_factory(), ChaosPolicy(duplicate=1.0))
    assert isinstance(factory, ChaosTransportFactory)
    for _ in range(2):
        first, second = await exchange(factory, 2)
        assert first == second
        assert json.loads(first)["result"]["protocolVersion"] == "2025-06-18"
    assert factory.connections == 2
    assert [t.policy.seed for t in factory.transports] == [0, 1]  # a fresh seed per connection
    assert fake.served == 2


async def test_factory_with_a_sequence_breaks_the_first_connections_only() -> None:
    fake = FakeServer()
    factory = chaos_transport_factory(
        fake.transport_factory(), [ChaosPolicy(disconnect_after_frames=1), None]
    )
    sink = open_inbox()
    reader = InboxReader(sink)
    async with factory(sink) as transport:
        assert isinstance(transport, ChaosTransport)
        await transport.send(INITIALIZE)
        assert json.loads(await reader.receive())["id"] == 1
        with pytest.raises(TransportClosed, match="disconnected after 1 frames"):
            await reader.receive()
    for _ in range(2):  # the second connection has no chaos, and so has every later one
        sink = open_inbox()
        async with factory(sink) as transport:
            assert not isinstance(transport, ChaosTransport)
            await transport.send(INITIALIZE)
            assert json.loads(await InboxReader(sink).receive())["id"] == 1
    assert factory.connections == 3
    assert [t.disconnected for t in factory.transports] == [True]


async def test_factory_with_a_sequence_then_a_policy_for_the_rest() -> None:
    factory = ChaosTransportFactory(
        MemoryFactory(), (None, ChaosPolicy(seed=5)), ChaosPolicy(seed=100, drop=1.0)
    )
    for _ in range(4):
        async with factory(open_inbox()):
            pass
    assert [t.policy.seed for t in factory.transports] == [5, 100, 101]
    assert factory.connections == 4


async def test_factory_passes_connect_errors_through() -> None:
    fake = FakeServer(refuse_connects=1)
    factory = chaos_transport_factory(fake.transport_factory(), ChaosPolicy())
    with pytest.raises(ConnectError, match="refused connection attempt 1"):
        async with factory(open_inbox()):
            pass  # pragma: no cover
    assert factory.transports == []
    assert factory.connections == 1


async def test_factory_accepts_any_transport_factory() -> None:
    opened: list[str] = []

    @asynccontextmanager
    async def plain(sink: FrameSink) -> AsyncIterator[Transport]:
        client, server = memory_transport_pair(client_sink=sink)
        await server.send(b"hello")
        opened.append("open")
        yield client
        opened.append("closed")

    factory = chaos_transport_factory(plain, ChaosPolicy(duplicate=1.0))
    sink = open_inbox()
    async with factory(sink):
        reader = InboxReader(sink)
        assert [await reader.receive(), await reader.receive()] == [b"hello", b"hello"]
    assert opened == ["open", "closed"]


# --------------------------------------------------------------------------- in a runtime


async def test_a_runtime_reports_no_pid_for_an_in_memory_server_behind_chaos(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The chaos transport said pid 0 for a transport without a process, and the runtime
    # reported that as the server's pid.
    fake = FakeServer(name="s", tools=[FakeTool("t")])
    server = ServerConfig(
        name="s",
        type=TransportKind.CUSTOM,
        transport_factory=chaos_transport_factory(fake.transport_factory(), ChaosPolicy(seed=1)),
    )
    async with open_runtime(RuntimeConfig(servers=(server,))) as rt:
        await rt.wait_ready()
        status = rt.status()["s"]
        assert status.state is ServerState.READY
        assert (status.pid, status.stderr_tail) == (None, ())


@pytest.mark.skipif(sys.platform == "win32", reason="the fake's stdio mode is POSIX-only here")
async def test_a_runtime_reports_the_pid_of_a_stdio_server_behind_chaos() -> None:
    spec = {"name": "proc", "tools": [{"name": "echo", "kind": "echo"}]}
    params = StdioParameters(
        command=sys.executable,
        args=("-m", "trio_mcp.actors.testing", "--spec-json", json.dumps(spec)),
    )

    def stdio(sink: FrameSink) -> AbstractAsyncContextManager[Transport]:
        return open_stdio_transport(params, sink)

    factory = chaos_transport_factory(stdio, ChaosPolicy(seed=1))
    server = ServerConfig(
        name="proc", type=TransportKind.CUSTOM, transport_factory=factory, connect_timeout=20
    )
    with trio.fail_after(60):
        async with open_runtime(RuntimeConfig(servers=(server,))) as rt:
            await rt.wait_ready()
            (chaos,) = factory.transports
            assert isinstance(chaos, ProcessTransport)
            assert chaos.pid > 0
            assert rt.status()["proc"].pid == chaos.pid
