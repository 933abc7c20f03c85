"""The stdio transport as an actor: frames and stderr lines go up into a sink (bounded in bytes:
a full sink stops the reader, and the server blocks on its writes), frames go down through an
outbox that the writer empties in batches, and the end of the connection is the last item of
the sink, a ConnectionEnded that names the requests still in the outbox.

Against the real echo peer (``stdio_peer.py``) and the real clock: every wait is for an event
(an item, a counter, a task parked on a channel), under ``trio.fail_after``."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio
import trio.testing

from trio_mcp.protocol._errors import FrameTooLarge, LocalProtocolError, TransportClosed
from trio_mcp.transports._base import ConnectionEnded, Inbound, StderrLine
from trio_mcp.transports._channel import ITEM_OVERHEAD, ByteChannel
from trio_mcp.transports.stdio._stdio import (
    _OUTBOX_BYTES,
    StdioParameters,
    StdioTransport,
    open_stdio_transport,
)

from .test_stdio import MODES, pause, peer, resume, running, wait_until

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX pipes")

Sink = ByteChannel[Inbound]


@asynccontextmanager
async def with_sink(
    params: StdioParameters, sink: Sink, *, guard: float = 10
) -> AsyncIterator[StdioTransport]:
    with trio.fail_after(guard):
        async with open_stdio_transport(params, sink) as transport:
            yield transport


async def next_frame(sink: Sink) -> bytes:
    """The next frame of the sink (stderr lines skipped)."""
    while True:
        item = await sink.receive()
        if isinstance(item, bytes):
            return item
        assert isinstance(item, StderrLine), item


async def rest(sink: Sink) -> list[Inbound]:
    """Every item left, up to the end of the channel."""
    items: list[Inbound] = []
    while True:
        try:
            items.append(await sink.receive())
        except trio.EndOfChannel:
            return items


def without_stderr(items: list[Inbound]) -> list[Inbound]:
    return [item for item in items if not isinstance(item, StderrLine)]


# --------------------------------------------------------------------------- the sink


@pytest.mark.parametrize("bind", MODES)
async def test_frames_go_to_the_sink_and_the_end_comes_last(bind: bool) -> None:
    sink = Sink(max_bytes=1 << 20)
    async with with_sink(peer(bind_to_host=bind), sink) as t:
        await t.send(b'{"n":1}')
        t.send_nowait(b'{"n":2}')
        assert await next_frame(sink) == b'{"n":1}'
        assert await next_frame(sink) == b'{"n":2}'
        with pytest.raises(RuntimeError, match="go to the sink it was opened with"):
            await t.receive()
        await t.send(json.dumps({"peer": "exit", "code": 3, "stderr": ["a", "boom"]}).encode())
        items = await rest(sink)
        assert t.statistics().frames_received == 2
    # the stderr lines (best effort) come before the end; the end is last, and comes once
    assert [i.text for i in items if isinstance(i, StderrLine)] == ["a", "boom"]
    end = items[-1]
    assert isinstance(end, ConnectionEnded)
    assert type(end.error) is TransportClosed
    assert str(end.error) == (
        f"stdio server {sys.executable!r} (pid {t.pid}) exited with code 3; "
        "its last stderr lines:\n  | a\n  | boom"
    )
    assert end.unsent == frozenset()
    assert without_stderr(items) == [end]


async def test_a_signal_and_the_stderr_tail_are_in_the_end() -> None:
    sink = Sink()
    async with with_sink(peer("--stderr", "starting"), sink) as t:
        await t.send(b'{"peer":"signal","signum":9}')
        items = await rest(sink)
    end = items[-1]
    assert isinstance(end, ConnectionEnded)
    assert str(end.error).endswith(
        "was killed by signal 9 (SIGKILL); its last stderr lines:\n  | starting"
    )


async def test_an_oversized_frame_ends_the_connection_after_the_frames_before_it() -> None:
    sink = Sink()
    async with with_sink(peer(max_frame_bytes=1000), sink) as t:
        t.send_nowait(b"small")
        t.send_nowait(b'{"peer":"big","bytes":5000}')
        items = without_stderr(await rest(sink))
        assert items[0] == b"small"
        assert len(items) == 2
        end = items[1]
        assert isinstance(end, ConnectionEnded)
        assert isinstance(end.error, FrameTooLarge)
        assert end.error.limit == 1000
        assert "raise max_frame_bytes (now 1000)" in str(end.error)
        given_up = "was given up after it sent a message over 1000 bytes"
        with pytest.raises(TransportClosed, match=given_up):
            t.send_nowait(b"more")


async def test_without_a_sink_receive_raises_the_end_again() -> None:
    async with running(peer(max_frame_bytes=1000)) as t:
        await t.send(b'{"peer":"big","bytes":5000}')
        for _ in range(2):
            with pytest.raises(FrameTooLarge) as info:
                await t.receive()
            assert info.value.limit == 1000


async def test_stderr_lines_are_items_of_the_sink_best_effort() -> None:
    # A sink with room for one stderr line: the others are dropped and counted; the tail has
    # them all, and the end still comes once the sink has room.
    sink = Sink(max_bytes=ITEM_OVERHEAD)
    params = peer("--stderr", "one", "--stderr", "two", "--stderr", "three", "--linger")
    async with with_sink(params, sink) as t:
        await wait_until(lambda: t.statistics().stderr_lines == 3)
        stats = t.statistics()
        assert stats.stderr_lines_dropped == 2
        assert t.stderr_tail() == ("one", "two", "three")
        assert sink.receive_nowait() == StderrLine(text="one")
        await t.aclose()
    items = await rest(sink)
    assert len(items) == 1 and isinstance(items[0], ConnectionEnded)


async def test_stderr_lines_never_hold_up_frames() -> None:
    # Nobody reads the sink while the server floods stderr: the stderr lines that find no room
    # are dropped, the frames wait for room and all arrive.
    sink = Sink(max_bytes=64 * 1024)
    flood = 1024 * 1024
    async with with_sink(peer(), sink) as t:
        await t.send(json.dumps({"peer": "flood", "bytes": flood}).encode())
        await t.send(b"after the flood")
        await wait_until(lambda: t.statistics().stderr_bytes >= flood)
        assert json.loads(await next_frame(sink)) == {"flooded": flood}
        assert await next_frame(sink) == b"after the flood"
        assert t.statistics().stderr_lines_dropped > 0


@pytest.mark.parametrize("bind", MODES)
async def test_aclose_ends_the_sink_while_the_end_waits_for_room(bind: bool) -> None:
    # The sink is full (one frame); the server exits, and the reader waits for room to put the
    # end. aclose cancels that wait: the sink is closed all the same, so its receiver takes the
    # frame and then the end of the channel (there was never room for the ConnectionEnded).
    sink = Sink(max_bytes=1)
    async with with_sink(peer(bind_to_host=bind), sink) as t:
        await t.send(b"held")
        await t.send(b'{"peer":"exit","code":0}')
        await wait_until(lambda: sink.statistics().senders_waiting == 1)  # the reader's end
        await t.aclose()
        with trio.fail_after(5):
            items = await rest(sink)
        assert without_stderr(items) == [b"held"]
    assert t.returncode == 0


async def test_room_made_while_aclose_runs_still_lets_the_end_in() -> None:
    # The reader waits for room to put the end (stdout is closed; the server lingers); aclose
    # starts and waits for the server to exit. Room made meanwhile takes the end in: the
    # receiver gets the ConnectionEnded, not just the close.
    sink = Sink(max_bytes=1)
    params = peer("--linger", close_grace=30.0)
    async with with_sink(params, sink, guard=30) as t:
        await t.send(b"held")
        await t.send(b'{"peer":"close-stdout"}')
        await wait_until(lambda: sink.statistics().senders_waiting == 1)  # the reader's end
        async with trio.open_nursery() as nursery:
            nursery.start_soon(t.aclose)
            await trio.testing.wait_all_tasks_blocked()  # aclose waits for the server to exit
            with trio.fail_after(5):
                items = without_stderr(await rest(sink))
            os.kill(t.pid, signal.SIGKILL)  # let aclose finish
    assert items[0] == b"held"
    assert len(items) == 2
    end = items[1]
    assert isinstance(end, ConnectionEnded)
    assert str(end.error).endswith(
        "closed its stdout and is still running; it wrote nothing to stderr"
    )
    assert t.statistics().signals_sent == ()


# --------------------------------------------------------------------------- the reader


async def test_the_reader_yields_while_the_server_keeps_writing() -> None:
    size = 8 * 1024 * 1024
    async with running(peer()) as t:
        ran_meanwhile = 0
        done = trio.Event()

        async def other_task() -> None:
            nonlocal ran_meanwhile
            while not done.is_set():
                if t.statistics().stdout_buffered > 0:  # the big line is being read
                    ran_meanwhile += 1
                await trio.lowlevel.checkpoint()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(other_task)
            await t.send(json.dumps({"peer": "big", "bytes": size}).encode())
            assert await t.receive() == b"x" * size
            done.set()
        assert t.statistics().reader_yields > 0
        assert ran_meanwhile > 0


async def test_a_full_sink_stops_the_reader_and_nothing_is_lost() -> None:
    # Nobody reads the sink: the reader puts what fits, then waits for room; the server blocks
    # on its writes and stops reading its stdin; the outbox fills and senders wait. Once the
    # sink is read, everything arrives, in order.
    budget = 16 * 1024
    count, size = 1500, 1000
    frames = [b"%06d:" % i + b"q" * (size - 7) for i in range(count)]
    sink = Sink(max_bytes=budget)
    async with with_sink(peer(), sink, guard=30) as t:
        async with trio.open_nursery() as nursery:

            async def send_all() -> None:
                for frame in frames:
                    await t.send(frame)

            nursery.start_soon(send_all)
            await wait_until(lambda: sink.statistics().senders_waiting == 1)  # the reader
            held = sink.statistics()
            assert held.bytes <= budget
            assert t.statistics().frames_received == held.items < count
            received = [await next_frame(sink) for _ in range(count)]
        assert received == frames


# --------------------------------------------------------------------------- the outbox


@pytest.mark.parametrize("bind", MODES)
async def test_send_nowait_queues_without_a_checkpoint(bind: bool) -> None:
    async with running(peer(bind_to_host=bind)) as t:
        with trio.CancelScope() as scope:  # noqa: ASYNC100 - that no checkpoint is the point
            scope.cancel()  # a checkpoint would raise Cancelled: send_nowait has none
            t.send_nowait(b'{"n":1}', 1)
            t.send_nowait(b'{"n":2}')
        assert not scope.cancelled_caught
        assert [await t.receive(), await t.receive()] == [b'{"n":1}', b'{"n":2}']
        assert t.statistics().frames_sent == 2


async def test_the_writer_takes_every_frame_ready_in_one_write() -> None:
    async with running(peer()) as t:
        for i in range(50):
            t.send_nowait(b"frame-%d" % i, i)
        assert t.statistics().outbox_frames == 50
        received = [await t.receive() for _ in range(50)]
        assert received == [b"frame-%d" % i for i in range(50)]
        stats = t.statistics()
        assert stats.frames_sent == 50
        assert stats.write_batches < stats.frames_sent
        assert stats.outbox_frames == 0


async def test_a_full_outbox_declines_send_nowait_and_send_waits() -> None:
    async with running(peer()) as t:
        await pause(t)
        frame = b"y" * 1000
        queued = 0
        for _ in range(2):  # fill; let the writer fill the pipe and block; fill again
            while queued < 10_000:
                try:
                    t.send_nowait(frame)
                except trio.WouldBlock:
                    break
                queued += 1
            await trio.testing.wait_all_tasks_blocked()
        # the pipe and the writer's batch hold some, the outbox the rest: about its budget
        assert _OUTBOX_BYTES // len(frame) <= queued < 10_000
        assert t.statistics().outbox_frames <= _OUTBOX_BYTES // len(frame)
        last = b"z" * len(frame)  # as big as the others: no room for it
        sent = trio.Event()

        async def send_after() -> None:
            await t.send(last)
            sent.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(send_after)
            await trio.testing.wait_all_tasks_blocked()
            assert not sent.is_set()  # it waits for room, as long as the peer reads nothing
            resume(t)
        echoed = [await t.receive() for _ in range(queued + 1)]
        assert echoed == [frame] * queued + [last]


async def test_a_frame_with_a_newline_is_refused() -> None:
    async with running(peer()) as t:
        with pytest.raises(LocalProtocolError, match="must not contain a newline"):
            t.send_nowait(b'{"a":\n1}')
        with pytest.raises(LocalProtocolError, match="must not contain a newline"):
            await t.send(b'{"a":\r1}', 4)
        t.send_nowait(b"fine")
        assert await t.receive() == b"fine"


async def test_after_aclose_sends_raise() -> None:
    async with running(peer()) as t:
        await t.aclose()
        with pytest.raises(TransportClosed, match="was closed; open a new one"):
            t.send_nowait(b"x")
        with pytest.raises(TransportClosed, match="was closed; open a new one"):
            await t.send(b"x", 1)


# --------------------------------------------------------------------------- what never left


async def test_the_end_names_the_requests_still_in_the_outbox() -> None:
    sink = Sink()
    big = b"b" * (1024 * 1024)
    async with with_sink(peer("--ignore-sigterm"), sink) as t:
        await t.send(b'{"peer":"sleep","seconds":30}')  # the peer stops reading its stdin
        await t.send(big, "big")  # the writer takes it and blocks on the full pipe
        await wait_until(lambda: t.statistics().outbox_frames == 0)
        await trio.testing.wait_all_tasks_blocked()
        for request_id in (1, 2, "three"):
            await t.send(b'{"request":%d}' % len(str(request_id)), request_id)
        t.send_nowait(b'{"notification":true}')  # no id: not named
        assert t.statistics().outbox_frames == 4
    items = without_stderr(await rest(sink))
    end = items[-1]
    assert isinstance(end, ConnectionEnded)
    # "big" was taken by the writer (it may have been written in part): not unsent
    assert end.unsent == frozenset({1, 2, "three"})
    assert "was closed; open a new one" in str(end.error)
    assert t.statistics().signals_sent == ("SIGTERM", "SIGKILL")
