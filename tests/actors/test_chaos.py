"""The seeded chaos transport: each kind of chaos, determinism by seed, disconnects, factories."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from trio_mcp.actors.testing._chaos import (
    ChaosAction,
    ChaosPolicy,
    ChaosStatistics,
    ChaosTransport,
    ChaosTransportFactory,
    chaos_transport_factory,
)
from trio_mcp.actors.testing._fakes import FakeServer
from trio_mcp.protocol._errors import TransportClosed
from trio_mcp.transports._base import Transport, TransportInfo
from trio_mcp.transports._memory import MemoryTransport, memory_transport_pair

FRAMES = [json.dumps({"jsonrpc": "2.0", "id": i, "result": {"n": i}}).encode() for i in range(40)]


def chaos_pair(**policy: object) -> tuple[ChaosTransport, MemoryTransport]:
    """(chaos-wrapped client end, plain server end)."""
    client, server = memory_transport_pair(max_buffer=100)
    return ChaosTransport(client, ChaosPolicy(**policy)), server  # type: ignore[arg-type]


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
    chaos, server = chaos_pair()
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
    chaos, server = chaos_pair(drop=1.0)
    assert await receive_all(chaos, server, FRAMES[:3]) == []
    assert chaos.actions == [
        ChaosAction(index=0, direction="receive", kind="drop"),
        ChaosAction(index=1, direction="receive", kind="drop"),
        ChaosAction(index=2, direction="receive", kind="drop"),
    ]


async def test_duplicate_delivers_each_frame_twice() -> None:
    chaos, server = chaos_pair(duplicate=1.0)
    got = await receive_all(chaos, server, FRAMES[:2])
    assert got == [FRAMES[0], FRAMES[0], FRAMES[1], FRAMES[1]]
    assert [a.kind for a in chaos.actions] == ["duplicate", "duplicate"]
    assert chaos.statistics().received == 2


async def test_garble_makes_every_frame_invalid_json() -> None:
    chaos, server = chaos_pair(garble=1.0, seed=5)
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
    chaos, server = chaos_pair(truncate=1.0, seed=9)
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
    chaos, server = chaos_pair(delay=(1.0, 3.0), seed=1)
    for frame in FRAMES[:3]:
        await server.send(frame)
    arrivals = []
    for _ in range(3):
        await chaos.receive()
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


async def test_send_direction_chaos_changes_what_the_peer_gets() -> None:
    client, server = memory_transport_pair()
    chaos = ChaosTransport(client, ChaosPolicy(duplicate=1.0, directions=frozenset({"send"})))
    await chaos.send(b"a")
    await server.send(b"b")
    assert await chaos.receive() == b"b"  # receive is not a chaos direction here
    assert [await server.receive(), await server.receive()] == [b"a", b"a"]
    assert chaos.actions == [ChaosAction(index=0, direction="send", kind="duplicate")]
    assert chaos.statistics().sent == 1
    assert chaos.statistics().received == 0


async def test_drop_on_send_never_reaches_the_peer() -> None:
    client, server = memory_transport_pair()
    chaos = ChaosTransport(client, ChaosPolicy(drop=1.0, directions=frozenset({"send"})))
    await chaos.send(b"lost")
    assert server.statistics().buffered == 0
    assert chaos.actions == [ChaosAction(index=0, direction="send", kind="drop")]


# --------------------------------------------------------------------------- determinism


MIXED = {"drop": 0.2, "duplicate": 0.2, "garble": 0.2, "truncate": 0.2, "delay": (0.0, 0.5)}


async def run_mixed(seed: int, *, interleave_sends: bool) -> tuple[list[ChaosAction], list[bytes]]:
    """Receive FRAMES through a mixed policy (optionally sending before every receive) until
    nothing more arrives; the receive-direction actions and the frames delivered."""
    client, server = memory_transport_pair(max_buffer=1000)
    policy = ChaosPolicy(seed=seed, directions=frozenset({"send", "receive"}), **MIXED)  # type: ignore[arg-type]
    chaos = ChaosTransport(client, policy)
    for frame in FRAMES:
        await server.send(frame)
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
        client, server = memory_transport_pair()
        await server.send(frame)
        return await ChaosTransport(client, policy).receive()

    damaged = trio.run(scenario)
    assert damaged != frame
    assert not is_json(damaged)


# --------------------------------------------------------------------------- disconnects


async def test_disconnect_after_frames_delivers_n_then_closes() -> None:
    chaos, server = chaos_pair(disconnect_after_frames=2)
    for frame in FRAMES[:4]:
        await server.send(frame)
    assert await chaos.receive() == FRAMES[0]
    assert chaos.statistics().disconnected is False
    assert await chaos.receive() == FRAMES[1]
    assert chaos.disconnected
    with pytest.raises(TransportClosed) as info:
        await chaos.receive()
    assert str(info.value) == (
        "cannot receive: the chaos transport disconnected after 2 frames (disconnect_after_frames)"
    )
    with pytest.raises(TransportClosed, match="disconnected after 2 frames"):
        await chaos.send(b"{}")
    # The peer sees the connection end.
    with pytest.raises(TransportClosed, match="the peer closed the connection"):
        await server.send(b"more")
    assert chaos.actions == [ChaosAction(index=2, direction="receive", kind="disconnect", value=2)]
    assert chaos.statistics().disconnected


async def test_disconnect_counts_dropped_frames_and_both_directions() -> None:
    client, server = memory_transport_pair()
    policy = ChaosPolicy(
        drop=1.0, disconnect_after_frames=3, directions=frozenset({"send", "receive"})
    )
    chaos = ChaosTransport(client, policy)
    await server.send(b"in")
    await chaos.send(b"out-1")
    await chaos.send(b"out-2")
    with pytest.raises(TransportClosed):
        await chaos.receive()  # the dropped frame is the third; then the link is cut
    assert [(a.index, a.direction, a.kind) for a in chaos.actions] == [
        (0, "send", "drop"),
        (1, "send", "drop"),
        (0, "receive", "drop"),
        (3, "receive", "disconnect"),
    ]


async def test_disconnect_after_zero_frames_fails_the_first_operation() -> None:
    chaos, _server = chaos_pair(disconnect_after_frames=0)
    with pytest.raises(TransportClosed, match="disconnected after 0 frames"):
        await chaos.send(b"{}")
    assert chaos.actions == [ChaosAction(index=0, direction="send", kind="disconnect", value=0)]


async def test_a_receive_waiting_when_the_link_is_cut_says_why() -> None:
    client, server = memory_transport_pair()
    policy = ChaosPolicy(disconnect_after_frames=1, directions=frozenset({"send"}))
    chaos = ChaosTransport(client, policy)
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
        "cannot receive: the chaos transport disconnected after 1 frames (disconnect_after_frames)"
    ]
    assert await server.receive() == b"{}"


async def test_aclose_closes_the_inner_transport_and_is_idempotent() -> None:
    chaos, server = chaos_pair(duplicate=1.0)
    await server.send(b"x")
    assert await chaos.receive() == b"x"
    await chaos.aclose()
    await chaos.aclose()
    with pytest.raises(TransportClosed, match="the chaos transport was closed on this side"):
        await chaos.receive()  # the queued duplicate is discarded too
    with pytest.raises(TransportClosed, match="the peer closed the connection"):
        await server.send(b"y")


async def test_info_names_the_seed() -> None:
    chaos, _server = chaos_pair(seed=11)
    assert chaos.info == TransportInfo(
        kind="memory", detail="client end of memory pair (chaos seed 11)"
    )
    assert chaos.stderr_tail is None


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


async def test_factory_with_one_policy_wraps_every_connection() -> None:
    fake = FakeServer()
    factory = chaos_transport_factory(fake.transport_factory(), ChaosPolicy(duplicate=1.0))
    assert isinstance(factory, ChaosTransportFactory)
    for _ in range(2):
        async with factory() as transport:
            await transport.send(INITIALIZE)
            first, second = await transport.receive(), await transport.receive()
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
    async with factory() as transport:
        await transport.send(INITIALIZE)
        assert json.loads(await transport.receive())["id"] == 1
        with pytest.raises(TransportClosed, match="disconnected after 1 frames"):
            await transport.receive()
    for _ in range(2):  # the second connection has no chaos, and so has every later one
        async with factory() as transport:
            assert not isinstance(transport, ChaosTransport)
            await transport.send(INITIALIZE)
            assert json.loads(await transport.receive())["id"] == 1
    assert factory.connections == 3
    assert [t.disconnected for t in factory.transports] == [True]


async def test_factory_passes_connect_errors_through() -> None:
    fake = FakeServer(refuse_connects=1)
    factory = chaos_transport_factory(fake.transport_factory(), ChaosPolicy())
    with pytest.raises(Exception, match="refused connection attempt 1") as info:
        async with factory():
            pass  # pragma: no cover
    assert type(info.value).__name__ == "ConnectError"
    assert factory.transports == []


async def test_factory_accepts_any_transport_factory() -> None:
    opened: list[str] = []

    @asynccontextmanager
    async def plain() -> AsyncIterator[Transport]:
        client, server = memory_transport_pair()
        await server.send(b"hello")
        opened.append("open")
        yield client
        opened.append("closed")

    factory = chaos_transport_factory(plain, ChaosPolicy(duplicate=1.0))
    async with factory() as transport:
        assert [await transport.receive(), await transport.receive()] == [b"hello", b"hello"]
    assert opened == ["open", "closed"]
