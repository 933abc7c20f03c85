"""ByteChannel: a FIFO bounded by the sum of its items' sizes, with one receiving task.

Every test synchronises on the scheduler (``wait_all_tasks_blocked``), never on time.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing

from trio_mcp.transports._channel import (
    DEFAULT_MAILBOX_BYTES,
    ITEM_OVERHEAD,
    ByteChannel,
    ByteChannelStatistics,
)


def _received_now(channel: ByteChannel[str]) -> list[str]:
    """Everything the channel holds, taken with receive_nowait."""
    out: list[str] = []
    while True:
        try:
            out.append(channel.receive_nowait())
        except trio.WouldBlock:
            return out


async def _start_sender(
    nursery: trio.Nursery, channel: ByteChannel[str], item: str, size: int, log: list[str]
) -> None:
    """Start a task that sends ``item`` (logging it once sent) and let it block."""

    async def send() -> None:
        await channel.send(item, size)
        log.append(item)

    nursery.start_soon(send)
    await trio.testing.wait_all_tasks_blocked()


# --------------------------------------------------------------------------- construction


def test_defaults() -> None:
    channel = ByteChannel[bytes]()
    assert channel.max_bytes == DEFAULT_MAILBOX_BYTES == 256 * 1024
    assert ITEM_OVERHEAD == 64
    assert len(channel) == 0
    assert not channel.closed


@pytest.mark.parametrize("value", [0, -1])
def test_max_bytes_below_one_is_refused(value: int) -> None:
    with pytest.raises(ValueError, match=rf"^max_bytes must be at least 1, got {value}$"):
        ByteChannel[bytes](max_bytes=value)


@pytest.mark.parametrize("value", [True, 1.5, "10", None])
def test_max_bytes_that_is_not_an_int_is_refused(value: object) -> None:
    with pytest.raises(TypeError, match=r"^max_bytes must be an int, got "):
        ByteChannel[bytes](max_bytes=value)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- the byte budget


def test_the_budget_counts_sizes_not_items() -> None:
    channel = ByteChannel[str](max_bytes=10)
    channel.send_nowait("a", 4)
    channel.send_nowait("b", 6)  # exactly the budget
    with pytest.raises(trio.WouldBlock):
        channel.send_nowait("c", 1)
    assert channel.statistics().bytes == 10
    assert channel.receive_nowait() == "a"
    with pytest.raises(trio.WouldBlock):
        channel.send_nowait("c", 5)  # 6 + 5 > 10
    channel.send_nowait("c", 4)
    assert _received_now(channel) == ["b", "c"]
    assert channel.statistics().bytes == 0


def test_the_default_size_is_the_item_overhead() -> None:
    channel = ByteChannel[str](max_bytes=2 * ITEM_OVERHEAD)
    channel.send_nowait("a")
    channel.send_nowait("b")
    with pytest.raises(trio.WouldBlock):
        channel.send_nowait("c")
    assert channel.statistics().bytes == 2 * ITEM_OVERHEAD


def test_an_item_bigger_than_the_budget_passes_when_the_channel_is_empty() -> None:
    channel = ByteChannel[str](max_bytes=10)
    channel.send_nowait("huge", 1000)
    assert channel.statistics().bytes == 1000
    with pytest.raises(trio.WouldBlock):  # and nothing more until it is taken
        channel.send_nowait("small", 1)
    assert channel.receive_nowait() == "huge"
    channel.send_nowait("small", 1)
    with pytest.raises(trio.WouldBlock):  # not empty: the big one waits now
        channel.send_nowait("huge", 1000)


async def test_a_big_item_waits_until_the_channel_is_empty() -> None:
    channel = ByteChannel[str](max_bytes=10)
    channel.send_nowait("a", 3)
    channel.send_nowait("b", 3)
    sent: list[str] = []
    async with trio.open_nursery() as nursery:
        await _start_sender(nursery, channel, "huge", 100, sent)
        assert sent == []
        assert channel.receive_nowait() == "a"
        await trio.testing.wait_all_tasks_blocked()
        assert sent == []  # 3 bytes still held
        assert channel.receive_nowait() == "b"
    assert sent == ["huge"]
    assert channel.receive_nowait() == "huge"


def test_fifo() -> None:
    channel = ByteChannel[int](max_bytes=1000)
    for i in range(50):
        channel.send_nowait(i, 1 + i % 7)
    assert [channel.receive_nowait() for _ in range(50)] == list(range(50))
    with pytest.raises(trio.WouldBlock):
        channel.receive_nowait()


# --------------------------------------------------------------------------- waiting senders


async def test_send_waits_for_room_and_senders_keep_their_order() -> None:
    channel = ByteChannel[str](max_bytes=2)
    channel.send_nowait("x", 1)
    channel.send_nowait("y", 1)
    sent: list[str] = []
    async with trio.open_nursery() as nursery:
        for item in "abc":
            await _start_sender(nursery, channel, item, 1, sent)
        assert sent == []
        assert channel.statistics().senders_waiting == 3
        received: list[str] = []
        while len(received) < 5:
            received.append(await channel.receive())
            await trio.testing.wait_all_tasks_blocked()
    assert received == ["x", "y", "a", "b", "c"]
    assert sent == ["a", "b", "c"]


async def test_waiting_senders_keep_their_order_when_one_wakes_without_room() -> None:
    """A, B and C wait; one item is taken, so A puts its item and wakes B, which finds no
    room. B must still go before C: a woken sender that finds no room keeps its place."""
    channel = ByteChannel[str](max_bytes=2)
    channel.send_nowait("x", 1)
    channel.send_nowait("y", 1)
    sent: list[str] = []
    async with trio.open_nursery() as nursery:
        for item in "abc":
            await _start_sender(nursery, channel, item, 1, sent)
        received = [channel.receive_nowait()]  # room for one: A's
        await trio.testing.wait_all_tasks_blocked()
        assert sent == ["a"]
        while len(received) < 5:
            received.append(channel.receive_nowait())
            await trio.testing.wait_all_tasks_blocked()
    assert received == ["x", "y", "a", "b", "c"]
    assert sent == ["a", "b", "c"]


async def test_send_nowait_refuses_while_senders_wait() -> None:
    channel = ByteChannel[str](max_bytes=3)
    channel.send_nowait("x", 2)
    sent: list[str] = []
    async with trio.open_nursery() as nursery:
        await _start_sender(nursery, channel, "big", 2, sent)  # 2 + 2 > 3: waits
        with pytest.raises(trio.WouldBlock):
            channel.send_nowait("tiny", 1)  # it would fit, but "big" was first
        assert channel.receive_nowait() == "x"
    assert sent == ["big"]
    channel.send_nowait("tiny", 1)
    assert _received_now(channel) == ["big", "tiny"]


async def test_room_is_what_send_nowait_takes_now() -> None:
    channel = ByteChannel[str](max_bytes=10)
    assert channel.room == 10
    channel.send_nowait("x", 4)
    assert channel.room == 6
    channel.send_nowait("y", 6)  # exactly what was left
    assert channel.room == 0
    sent: list[str] = []
    async with trio.open_nursery() as nursery:
        await _start_sender(nursery, channel, "big", 8, sent)
        assert channel.receive_nowait() == "x"  # 4 bytes free, but "big" still waits for 8
        assert channel.room == 0  # and nobody overtakes it
        assert channel.receive_nowait() == "y"  # "big" moves in
    assert sent == ["big"]
    assert channel.room == 2
    channel.close()
    assert channel.room == 0
    other = ByteChannel[str](max_bytes=10)
    other.close_receiver()
    assert other.room == 0


async def test_a_woken_sender_is_not_overtaken_by_a_new_one() -> None:
    """The receiver makes room and wakes the only waiting sender; a new sender that comes
    before the woken one has run must not take its place."""
    channel = ByteChannel[str](max_bytes=1)
    channel.send_nowait("x", 1)
    sent: list[str] = []
    async with trio.open_nursery() as nursery:
        await _start_sender(nursery, channel, "a", 1, sent)
        assert channel.receive_nowait() == "x"  # wakes "a" (not run yet)
        with pytest.raises(trio.WouldBlock):
            channel.send_nowait("b", 1)
    assert sent == ["a"]
    assert _received_now(channel) == ["a"]


async def test_send_with_room_is_a_checkpoint() -> None:
    channel = ByteChannel[str](max_bytes=10)
    with trio.CancelScope() as scope:
        scope.cancel()
        with pytest.raises(trio.Cancelled):
            await channel.send("a", 1)
    assert len(channel) == 0  # cancelled before it was put
    with trio.testing.assert_checkpoints():
        await channel.send("b", 1)
    assert channel.receive_nowait() == "b"


async def test_a_cancelled_waiting_send_puts_nothing_and_loses_nothing() -> None:
    channel = ByteChannel[str](max_bytes=1)
    channel.send_nowait("x", 1)
    sent: list[str] = []
    async with trio.open_nursery() as nursery:
        cancelled = trio.CancelScope()

        async def doomed() -> None:
            with cancelled:
                await channel.send("doomed", 1)
                sent.append("doomed")

        nursery.start_soon(doomed)
        await trio.testing.wait_all_tasks_blocked()
        await _start_sender(nursery, channel, "after", 1, sent)
        assert channel.statistics().senders_waiting == 2
        cancelled.cancel()
        await trio.testing.wait_all_tasks_blocked()
        assert channel.statistics().senders_waiting == 1
        assert channel.receive_nowait() == "x"
    assert sent == ["after"]
    assert _received_now(channel) == ["after"]


# --------------------------------------------------------------------------- receiving


async def test_receive_waits_for_an_item() -> None:
    channel = ByteChannel[str](max_bytes=10)
    got: list[str] = []
    async with trio.open_nursery() as nursery:

        async def receiver() -> None:
            got.append(await channel.receive())

        nursery.start_soon(receiver)
        await trio.testing.wait_all_tasks_blocked()
        assert channel.statistics().receiver_waiting
        channel.send_nowait("a", 1)
    assert got == ["a"]
    assert not channel.statistics().receiver_waiting


async def _waiting_receiver(
    nursery: trio.Nursery, channel: ByteChannel[str], got: list[str]
) -> None:
    """Start a task that receives one item into ``got``, and let it wait."""

    async def receiver() -> None:
        got.append(await channel.receive())

    nursery.start_soon(receiver)
    await trio.testing.wait_all_tasks_blocked()
    assert channel.statistics().receiver_waiting


async def test_a_deferred_item_waits_for_the_next_wake_up_and_keeps_its_place() -> None:
    channel = ByteChannel[str](max_bytes=10)
    got: list[str] = []
    async with trio.open_nursery() as nursery:
        await _waiting_receiver(nursery, channel, got)
        channel.defer_nowait("expect", 1)
        await trio.testing.wait_all_tasks_blocked()
        assert got == []  # not woken
        assert channel.statistics().receiver_waiting
        assert channel.statistics().items == 1
        channel.send_nowait("answer", 1)
    assert got == ["expect"]  # woken by the next item, it takes the deferred one first
    assert _received_now(channel) == ["answer"]


async def test_close_wakes_a_receiver_for_its_deferred_items() -> None:
    channel = ByteChannel[str](max_bytes=10)
    got: list[str] = []
    async with trio.open_nursery() as nursery:
        await _waiting_receiver(nursery, channel, got)
        channel.defer_nowait("a", 1)
        channel.close()
    assert got == ["a"]
    with pytest.raises(trio.EndOfChannel):
        channel.receive_nowait()


async def test_a_sender_that_finds_no_room_wakes_a_receiver_for_deferred_items() -> None:
    # Deferred items fill the channel: a sender waiting for room must not wait for a receiver
    # that nobody woke (a frame bigger than the budget once waited for a call's timeout).
    channel = ByteChannel[str](max_bytes=10)
    got: list[str] = []
    sent: list[str] = []
    async with trio.open_nursery() as nursery:
        await _waiting_receiver(nursery, channel, got)
        channel.defer_nowait("small", 1)
        await _start_sender(nursery, channel, "big", 50, sent)
    assert got == ["small"]
    assert sent == ["big"]
    assert _received_now(channel) == ["big"]


async def test_send_nowait_refused_for_deferred_items_wakes_the_receiver() -> None:
    channel = ByteChannel[str](max_bytes=10)
    got: list[str] = []
    async with trio.open_nursery() as nursery:
        await _waiting_receiver(nursery, channel, got)
        channel.defer_nowait("a", 8)
        with pytest.raises(trio.WouldBlock):
            channel.send_nowait("b", 8)
        with pytest.raises(trio.WouldBlock):
            channel.defer_nowait("c", 8)
    assert got == ["a"]
    channel.send_nowait("b", 8)  # room again
    assert _received_now(channel) == ["b"]


def test_defer_nowait_refuses_like_send_nowait() -> None:
    channel = ByteChannel[str](max_bytes=10)
    channel.close()
    with pytest.raises(trio.ClosedResourceError):
        channel.defer_nowait("a", 1)
    broken = ByteChannel[str](max_bytes=10)
    broken.close_receiver()
    with pytest.raises(trio.BrokenResourceError):
        broken.defer_nowait("a", 1)


async def test_receive_with_an_item_ready_is_a_checkpoint() -> None:
    channel = ByteChannel[str](max_bytes=10)
    channel.send_nowait("a", 1)
    with trio.CancelScope() as scope:
        scope.cancel()
        with pytest.raises(trio.Cancelled):
            await channel.receive()
    assert len(channel) == 1  # not taken
    with trio.testing.assert_checkpoints():
        assert await channel.receive() == "a"


async def test_a_cancelled_waiting_receive_loses_nothing() -> None:
    channel = ByteChannel[str](max_bytes=10)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(channel.receive)
        await trio.testing.wait_all_tasks_blocked()
        assert channel.statistics().receiver_waiting
        nursery.cancel_scope.cancel()
    assert not channel.statistics().receiver_waiting
    channel.send_nowait("a", 1)  # the cancelled receiver is gone: nothing is taken for it
    assert await channel.receive() == "a"


async def test_one_receiver_only() -> None:
    channel = ByteChannel[str](max_bytes=10)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(channel.receive)
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(RuntimeError, match="another task is already receiving"):
            await channel.receive()
        nursery.cancel_scope.cancel()
    channel.send_nowait("a", 1)
    assert await channel.receive() == "a"  # the channel works on


async def test_a_receiver_takes_a_waiting_senders_item_in_turn() -> None:
    channel = ByteChannel[str](max_bytes=1)
    channel.send_nowait("x", 1)
    sent: list[str] = []
    async with trio.open_nursery() as nursery:
        await _start_sender(nursery, channel, "a", 1, sent)
        assert await channel.receive() == "x"
        assert await channel.receive() == "a"
    assert sent == ["a"]


# --------------------------------------------------------------------------- close


async def test_close_lets_the_receiver_drain_then_ends() -> None:
    channel = ByteChannel[str](max_bytes=10)
    channel.send_nowait("a", 1)
    channel.send_nowait("b", 1)
    channel.close()
    assert channel.closed
    with pytest.raises(trio.ClosedResourceError, match="sending side of this channel"):
        channel.send_nowait("c", 1)
    with pytest.raises(trio.ClosedResourceError):
        await channel.send("c", 1)
    assert await channel.receive() == "a"
    assert channel.receive_nowait() == "b"
    with pytest.raises(trio.EndOfChannel):
        channel.receive_nowait()
    with pytest.raises(trio.EndOfChannel):
        await channel.receive()
    channel.close()  # idempotent
    assert channel.statistics().closed


async def test_close_wakes_a_waiting_receiver_with_the_end() -> None:
    channel = ByteChannel[str](max_bytes=10)
    async with trio.open_nursery() as nursery:

        async def receiver() -> None:
            with pytest.raises(trio.EndOfChannel):
                await channel.receive()

        nursery.start_soon(receiver)
        await trio.testing.wait_all_tasks_blocked()
        channel.close()


async def test_close_fails_waiting_senders() -> None:
    channel = ByteChannel[str](max_bytes=1)
    channel.send_nowait("x", 1)
    failures: list[type[BaseException]] = []
    async with trio.open_nursery() as nursery:

        async def sender(item: str) -> None:
            try:
                await channel.send(item, 1)
            except trio.ClosedResourceError as exc:
                failures.append(type(exc))

        for item in "ab":
            nursery.start_soon(sender, item)
        await trio.testing.wait_all_tasks_blocked()
        channel.close()
    assert failures == [trio.ClosedResourceError] * 2
    assert channel.receive_nowait() == "x"  # what was put is still received
    with pytest.raises(trio.EndOfChannel):
        channel.receive_nowait()


async def test_close_receiver_breaks_senders_and_drops_what_is_held() -> None:
    channel = ByteChannel[str](max_bytes=1)
    channel.send_nowait("x", 1)
    failures: list[type[BaseException]] = []
    async with trio.open_nursery() as nursery:

        async def sender(item: str) -> None:
            try:
                await channel.send(item, 1)
            except trio.BrokenResourceError as exc:
                failures.append(type(exc))

        for item in "ab":
            nursery.start_soon(sender, item)
        await trio.testing.wait_all_tasks_blocked()
        channel.close_receiver()
    assert failures == [trio.BrokenResourceError] * 2
    stats = channel.statistics()
    assert (stats.items, stats.bytes, stats.receiver_closed) == (0, 0, True)
    with pytest.raises(trio.BrokenResourceError, match="nobody receives"):
        channel.send_nowait("c", 1)
    with pytest.raises(trio.BrokenResourceError):
        await channel.send("c", 1)
    with pytest.raises(trio.ClosedResourceError, match="receiver was closed"):
        channel.receive_nowait()
    with pytest.raises(trio.ClosedResourceError):
        await channel.receive()
    channel.close_receiver()  # idempotent


async def test_close_receiver_wakes_a_waiting_receiver() -> None:
    channel = ByteChannel[str](max_bytes=10)
    async with trio.open_nursery() as nursery:

        async def receiver() -> None:
            with pytest.raises(trio.ClosedResourceError):
                await channel.receive()

        nursery.start_soon(receiver)
        await trio.testing.wait_all_tasks_blocked()
        channel.close_receiver()


# --------------------------------------------------------------------------- drain


async def test_drain_takes_everything_and_lets_senders_in() -> None:
    # drain() takes what is held and what the waiting senders wait to put, in order: a
    # receiver that stops learns every item it never took (stdio's unsent requests)
    channel = ByteChannel[str](max_bytes=2)
    assert channel.drain() == []
    channel.send_nowait("a", 1)
    channel.send_nowait("b", 1)
    sent: list[str] = []
    async with trio.open_nursery() as nursery:
        await _start_sender(nursery, channel, "c", 1, sent)
        await _start_sender(nursery, channel, "d", 1, sent)
        assert channel.drain() == ["a", "b", "c", "d"]
        assert channel.statistics().bytes == 0
        assert channel.statistics().senders_waiting == 0
        channel.send_nowait("e", 1)  # room again, and nobody waits ahead of it
    assert sorted(sent) == ["c", "d"]  # their sends returned (in any order): items taken
    assert _received_now(channel) == ["e"]


def test_drain_after_close_and_after_close_receiver_never_raises() -> None:
    channel = ByteChannel[str](max_bytes=10)
    channel.send_nowait("a", 1)
    channel.close()
    assert channel.drain() == ["a"]
    with pytest.raises(trio.EndOfChannel):
        channel.receive_nowait()
    other = ByteChannel[str](max_bytes=10)
    other.send_nowait("a", 1)
    other.close_receiver()
    assert other.drain() == []


# --------------------------------------------------------------------------- statistics


async def test_statistics() -> None:
    channel = ByteChannel[str](max_bytes=5)
    assert channel.statistics() == ByteChannelStatistics(
        items=0,
        bytes=0,
        max_bytes=5,
        senders_waiting=0,
        receiver_waiting=False,
        closed=False,
        receiver_closed=False,
    )
    channel.send_nowait("a", 2)
    channel.send_nowait("b", 3)
    async with trio.open_nursery() as nursery:
        await _start_sender(nursery, channel, "c", 1, [])
        stats = channel.statistics()
        assert (stats.items, stats.bytes, stats.senders_waiting) == (2, 5, 1)
        assert len(channel) == 2
        nursery.cancel_scope.cancel()
    assert channel.statistics().senders_waiting == 0
    channel.close()
    stats = channel.statistics()
    assert (stats.closed, stats.receiver_closed, stats.senders_waiting) == (True, False, 0)
