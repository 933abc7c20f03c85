"""The in-memory transport pair: delivery, closing semantics (ConnectionEnded into the peer's
sink), the byte budget of each end's channel, a client end whose frames go to a given sink, the
InboxReader semantics of ``receive()``, and counters."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from trio_mcp.protocol._errors import TransportClosed
from trio_mcp.transports._base import ConnectionEnded, Inbound, Transport, TransportInfo
from trio_mcp.transports._channel import ByteChannel
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


async def test_a_full_channel_makes_the_sender_wait_until_the_peer_receives(
    autojump_clock: trio.testing.MockClock,
) -> None:
    client, server = memory_transport_pair(max_bytes=2)
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


async def test_the_budget_is_in_bytes_and_one_big_frame_always_passes() -> None:
    client, server = memory_transport_pair(max_bytes=10)
    client.send_nowait(b"x" * 100)  # bigger than the budget, but the channel is empty
    with pytest.raises(trio.WouldBlock):
        client.send_nowait(b"y")
    assert await server.receive() == b"x" * 100
    client.send_nowait(b"a" * 6)
    client.send_nowait(b"b" * 4)
    with pytest.raises(trio.WouldBlock):
        client.send_nowait(b"c")
    assert await server.receive() == b"a" * 6
    client.send_nowait(b"c")
    assert [await server.receive(), await server.receive()] == [b"b" * 4, b"c"]


async def test_a_sender_blocked_on_a_full_channel_fails_when_the_peer_closes() -> None:
    client, server = memory_transport_pair(max_bytes=1)
    client.send_nowait(b"1")
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
    assert client.statistics().sent == 1


async def test_a_sender_blocked_on_a_full_channel_fails_when_its_own_end_closes() -> None:
    client, server = memory_transport_pair(max_bytes=1)
    client.send_nowait(b"1")
    failures: list[str] = []

    async def sender() -> None:
        try:
            await client.send(b"stuck")
        except TransportClosed as exc:
            failures.append(str(exc))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(sender)
        await trio.testing.wait_all_tasks_blocked()
        await client.aclose()
    # It was this end that closed, so the error says so (as for a send after the close).
    assert failures == [
        "cannot send on client end of memory pair: it was closed on this side; "
        "open a new connection"
    ]
    # The peer's channel was full: it gets the frame already sent, then the end.
    assert await server.receive() == b"1"
    with pytest.raises(TransportClosed, match="the connection ended"):
        await server.receive()


async def test_a_send_whose_frame_was_taken_returns_though_its_end_closed_meanwhile() -> None:
    # TransportClosed from send means the frame was not sent (safe to retry). A frame taken in
    # while its send waited was sent, even when the end closes before the send resumes.
    sink = ByteChannel[Inbound](max_bytes=1)
    _client, server = memory_transport_pair(client_sink=sink)
    server.send_nowait(b"1")
    outcomes: list[object] = []

    async def sender() -> None:
        try:
            await server.send(b"2")
        except TransportClosed as exc:
            outcomes.append(exc)
        else:
            outcomes.append("sent")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(sender)
        await trio.testing.wait_all_tasks_blocked()
        assert sink.receive_nowait() == b"1"  # room: the waiting frame goes in
        await server.aclose()  # before the sender resumes
    assert outcomes == ["sent"]
    assert server.statistics().sent == 2
    assert sink.receive_nowait() == b"2"
    with pytest.raises(trio.EndOfChannel):  # the sink was full: the close alone
        sink.receive_nowait()


async def test_statistics_count_frames() -> None:
    client, server = memory_transport_pair()
    assert client.statistics() == MemoryTransportStatistics(
        sent=0, received=0, buffered=0, closed=False
    )
    await client.send(b"a")
    client.send_nowait(b"b")
    await server.send(b"c")
    assert await server.receive() == b"a"
    assert client.statistics() == MemoryTransportStatistics(
        sent=2, received=0, buffered=1, closed=False
    )
    assert server.statistics() == MemoryTransportStatistics(
        sent=1, received=1, buffered=1, closed=False
    )
    # A failed send is not counted; the end is an item in the peer's inbox.
    await server.aclose()
    with pytest.raises(TransportClosed):
        await client.send(b"d")
    with pytest.raises(TransportClosed):
        client.send_nowait(b"d")
    assert client.statistics() == MemoryTransportStatistics(
        sent=2, received=0, buffered=2, closed=False
    )


@pytest.mark.parametrize(
    ("bad", "error", "message"),
    [
        (0, ValueError, "max_bytes must be at least 1, got 0"),
        (-1, ValueError, "max_bytes must be at least 1, got -1"),
        (1.5, TypeError, "max_bytes must be an int, got 1.5"),
        (True, TypeError, "max_bytes must be an int, got True"),
        ("8", TypeError, "max_bytes must be an int, got '8'"),
    ],
)
def test_max_bytes_must_be_a_positive_integer(
    bad: object, error: type[Exception], message: str
) -> None:
    # As the channels it sizes say (ByteChannel checks it), with or without a client sink.
    for client_sink in (None, ByteChannel[Inbound]()):
        with pytest.raises(error) as info:
            memory_transport_pair(max_bytes=bad, client_sink=client_sink)  # type: ignore[arg-type]
        assert str(info.value) == message


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


# --------------------------------------------------------------------------- send_nowait


def test_send_nowait_hands_a_frame_over_while_there_is_room() -> None:
    client, server = memory_transport_pair(max_bytes=6)
    client.send_nowait(b"one")
    client.send_nowait(b"two", request_id=2)
    with pytest.raises(trio.WouldBlock):  # the peer's channel is full: nothing handed over
        client.send_nowait(b"three")
    assert client.statistics().sent == 2
    assert server.statistics().buffered == 2


async def test_send_nowait_raises_like_send_once_either_end_is_closed() -> None:
    client, server = memory_transport_pair()
    await server.aclose()
    with pytest.raises(TransportClosed, match="the peer closed the connection"):
        client.send_nowait(b"x")
    await client.aclose()
    with pytest.raises(TransportClosed, match="it was closed on this side"):
        client.send_nowait(b"x")


# --------------------------------------------------------------------------- the client's sink


async def test_the_client_ends_frames_go_to_the_given_sink_then_the_end() -> None:
    sink = ByteChannel[Inbound](max_bytes=1000)
    client, server = memory_transport_pair(client_sink=sink, label="s")
    await server.send(b"one")
    server.send_nowait(b"two")
    assert client.statistics().buffered == 0  # nothing in an inbox of its own
    with pytest.raises(RuntimeError, match="go to the sink it was opened with"):
        await client.receive()
    assert sink.receive_nowait() == b"one"
    assert sink.receive_nowait() == b"two"
    assert sink.statistics().bytes == 0
    await server.aclose()
    end = sink.receive_nowait()
    assert isinstance(end, ConnectionEnded)
    assert isinstance(end.error, TransportClosed)
    assert str(end.error) == "cannot receive on client end of s: the peer closed the connection"
    assert end.unsent == frozenset()
    with pytest.raises(trio.EndOfChannel):
        sink.receive_nowait()


async def test_closing_the_client_end_ends_its_own_sink_too() -> None:
    sink = ByteChannel[Inbound](max_bytes=1000)
    client, server = memory_transport_pair(client_sink=sink)
    await server.send(b"one")
    await client.aclose()
    assert sink.receive_nowait() == b"one"
    end = sink.receive_nowait()
    assert isinstance(end, ConnectionEnded)
    assert "it was closed on this side" in str(end.error)
    with pytest.raises(trio.EndOfChannel):
        sink.receive_nowait()
    # The server end sees the end as well.
    with pytest.raises(TransportClosed, match="the peer closed the connection"):
        await server.receive()


async def test_a_full_sink_gets_the_close_alone() -> None:
    sink = ByteChannel[Inbound](max_bytes=3)
    client, server = memory_transport_pair(client_sink=sink)
    server.send_nowait(b"abc")
    await server.aclose()  # no room for the ConnectionEnded: the sink is closed all the same
    assert sink.receive_nowait() == b"abc"
    with pytest.raises(trio.EndOfChannel):
        sink.receive_nowait()
    with pytest.raises(TransportClosed):
        client.send_nowait(b"x")


async def test_a_server_end_waits_while_the_clients_sink_is_full() -> None:
    sink = ByteChannel[Inbound](max_bytes=4)
    _client, server = memory_transport_pair(client_sink=sink)
    server.send_nowait(b"full")
    sent: list[bytes] = []
    async with trio.open_nursery() as nursery:

        async def sender() -> None:
            await server.send(b"next")
            sent.append(b"next")

        nursery.start_soon(sender)
        await trio.testing.wait_all_tasks_blocked()
        assert sent == []
        assert sink.receive_nowait() == b"full"
    assert sent == [b"next"]
    assert sink.receive_nowait() == b"next"


# --------------------------------------------------------------------------- receive()


async def test_receive_raises_the_end_again_on_every_later_call() -> None:
    client, server = memory_transport_pair()
    await client.send(b"last")
    await client.aclose()
    assert await server.receive() == b"last"
    for _ in range(3):
        with pytest.raises(TransportClosed, match="the peer closed the connection"):
            await server.receive()
    assert server.statistics().received == 1
    await server.aclose()
    with pytest.raises(TransportClosed, match="it was closed on this side"):
        await server.receive()
