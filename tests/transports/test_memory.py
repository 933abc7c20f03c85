"""The in-memory transport pair: delivery, closing semantics, buffering and counters."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from trio_mcp.protocol._errors import TransportClosed
from trio_mcp.transports._base import Transport, TransportInfo
from trio_mcp.transports._memory import (
    MemoryTransport,
    MemoryTransportStatistics,
    memory_transport_pair,
)


async def test_frames_cross_in_both_directions_in_order() -> None:
    client, server = memory_transport_pair()
    await client.send(b'{"a":1}')
    await client.send(b'{"a":2}')
    await server.send(b'{"b":1}')
    assert await server.receive() == b'{"a":1}'
    assert await server.receive() == b'{"a":2}'
    assert await client.receive() == b'{"b":1}'


async def test_it_implements_the_transport_protocol() -> None:
    client, server = memory_transport_pair(label="pair 7")
    assert isinstance(client, Transport)
    assert isinstance(server, Transport)
    assert client.info == TransportInfo(kind="memory", detail="client end of pair 7")
    assert server.info == TransportInfo(kind="memory", detail="server end of pair 7")


async def test_bytes_like_frames_are_copied_to_bytes() -> None:
    client, server = memory_transport_pair()
    frame = bytearray(b"abc")
    await client.send(frame)  # type: ignore[arg-type]
    frame[0] = ord("z")
    received = await server.receive()
    assert received == b"abc"
    assert type(received) is bytes


async def test_closing_one_end_delivers_what_was_sent_then_ends_the_peer() -> None:
    client, server = memory_transport_pair()
    await client.send(b"one")
    await client.send(b"two")
    await client.aclose()
    assert await server.receive() == b"one"
    assert await server.receive() == b"two"
    with pytest.raises(TransportClosed) as info:
        await server.receive()
    assert str(info.value) == (
        "cannot receive on server end of memory pair: the peer closed the connection"
    )
    with pytest.raises(TransportClosed) as info:
        await server.send(b"late")
    assert str(info.value) == (
        "cannot send on server end of memory pair: the peer closed the connection"
    )


async def test_a_closed_end_refuses_its_own_operations() -> None:
    client, _server = memory_transport_pair()
    await client.aclose()
    with pytest.raises(TransportClosed) as info:
        await client.send(b"x")
    assert str(info.value) == (
        "cannot send on client end of memory pair: it was closed on this side; "
        "open a new connection"
    )
    with pytest.raises(TransportClosed) as info:
        await client.receive()
    assert "cannot receive on client end of memory pair: it was closed on this side" in str(
        info.value
    )


async def test_aclose_is_idempotent() -> None:
    client, server = memory_transport_pair()
    await client.aclose()
    await client.aclose()
    assert client.closed
    assert not server.closed
    assert client.statistics().closed is True


async def test_closing_wakes_a_receive_waiting_on_the_same_end() -> None:
    client, _server = memory_transport_pair()
    outcome: list[str] = []

    async def reader() -> None:
        try:
            await client.receive()
        except TransportClosed as exc:
            outcome.append(str(exc))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(reader)
        await trio.testing.wait_all_tasks_blocked()
        await client.aclose()
    assert outcome == [
        "cannot receive on client end of memory pair: it was closed on this side; "
        "open a new connection"
    ]


async def test_closing_wakes_a_receive_waiting_on_the_peer() -> None:
    client, server = memory_transport_pair()
    outcome: list[type[BaseException]] = []

    async def reader() -> None:
        with pytest.raises(TransportClosed) as info:
            await server.receive()
        outcome.append(info.type)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(reader)
        await trio.testing.wait_all_tasks_blocked()
        await client.aclose()
    assert outcome == [TransportClosed]


async def test_a_full_buffer_makes_the_sender_wait_until_the_peer_receives(
    autojump_clock: trio.testing.MockClock,
) -> None:
    client, server = memory_transport_pair(max_buffer=2)
    await client.send(b"1")
    await client.send(b"2")
    sent_at: list[float] = []

    async def third() -> None:
        await client.send(b"3")
        sent_at.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(third)
        await trio.sleep(5)
        assert sent_at == []
        assert server.statistics().buffered == 2
        assert await server.receive() == b"1"
    assert sent_at == [5.0]
    assert [await server.receive(), await server.receive()] == [b"2", b"3"]


async def test_a_sender_blocked_on_a_full_buffer_fails_when_the_peer_closes() -> None:
    client, server = memory_transport_pair(max_buffer=0)
    failures: list[str] = []

    async def sender() -> None:
        try:
            await client.send(b"stuck")
        except TransportClosed as exc:
            failures.append(str(exc))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(sender)
        await trio.testing.wait_all_tasks_blocked()
        await server.aclose()
    assert failures == ["cannot send on client end of memory pair: the peer closed the connection"]


async def test_statistics_count_frames() -> None:
    client, server = memory_transport_pair()
    assert client.statistics() == MemoryTransportStatistics(
        sent=0, received=0, buffered=0, closed=False
    )
    await client.send(b"a")
    await client.send(b"b")
    await server.send(b"c")
    assert await server.receive() == b"a"
    assert client.statistics() == MemoryTransportStatistics(
        sent=2, received=0, buffered=1, closed=False
    )
    assert server.statistics() == MemoryTransportStatistics(
        sent=1, received=1, buffered=1, closed=False
    )
    # A failed send is not counted.
    await server.aclose()
    with pytest.raises(TransportClosed):
        await client.send(b"d")
    assert client.statistics().sent == 2


@pytest.mark.parametrize("bad", [-1, 1.5, True, "8"])
def test_max_buffer_must_be_a_non_negative_integer(bad: object) -> None:
    with pytest.raises(ValueError, match=r"max_buffer must be an integer >= 0 \(frames\), got"):
        memory_transport_pair(max_buffer=bad)  # type: ignore[arg-type]


async def test_operations_are_checkpoints_even_when_closed() -> None:
    client, _server = memory_transport_pair()
    await client.aclose()
    with trio.CancelScope() as scope:
        scope.cancel()
        with pytest.raises(trio.Cancelled):
            await client.send(b"x")
        with pytest.raises(trio.Cancelled):
            await client.receive()


def test_memory_transport_is_the_type_of_both_ends() -> None:
    client, server = memory_transport_pair()
    assert type(client) is MemoryTransport
    assert type(server) is MemoryTransport


# --------------------------------------------------------------------------- the session's hooks


def test_try_send_hands_a_frame_over_while_there_is_room() -> None:
    client, server = memory_transport_pair(max_buffer=2)
    assert client.try_send(b"one") is True
    assert client.try_send(b"two") is True
    assert client.try_send(b"three") is False  # the peer's buffer is full: nothing handed over
    assert server.receive_nowait() == b"one"
    assert client.try_send(b"three") is True
    assert [server.receive_nowait(), server.receive_nowait()] == [b"two", b"three"]
    assert server.receive_nowait() is None
    assert client.statistics().sent == 3
    assert server.statistics().received == 3


async def test_try_send_raises_like_send_once_either_end_is_closed() -> None:
    client, server = memory_transport_pair()
    await server.aclose()
    with pytest.raises(TransportClosed, match="the peer closed the connection"):
        client.try_send(b"x")
    await client.aclose()
    with pytest.raises(TransportClosed, match="it was closed on this side"):
        client.try_send(b"x")


async def test_receive_nowait_says_none_at_the_end_and_receive_says_why() -> None:
    client, server = memory_transport_pair()
    await client.send(b"last")
    await client.aclose()
    assert server.receive_nowait() == b"last"
    assert server.receive_nowait() is None
    with pytest.raises(TransportClosed, match="the peer closed the connection"):
        await server.receive()
    await server.aclose()
    assert server.receive_nowait() is None
