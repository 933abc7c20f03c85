"""The stdio writer takes an answer that is already on stdout right after its write.

On one CPU the kernel switches to the server as our write wakes it, and the server has answered
by the time the write returns. The writer then reads that answer itself, while the reader waits,
instead of leaving it to another pass through the event loop for the reader. These tests make
the server answer "inside the write" on any machine: the write is wrapped so that it returns
only once stdout is readable (a blocking ``select``, as the kernel's switch to the server
blocks us). Against the real echo peer (``stdio_peer.py``).
"""

from __future__ import annotations

import json
import select
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest
import trio
import trio.testing

from trio_mcp.transports._base import ConnectionEnded, Inbound, StderrLine
from trio_mcp.transports._channel import ByteChannel
from trio_mcp.transports.stdio import _stdio
from trio_mcp.transports.stdio._stdio import StdioTransport, open_stdio_transport

from .test_stdio import peer

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX pipes")

Sink = ByteChannel[Inbound]

#: A line the peer takes without writing anything back.
QUIET = json.dumps({"peer": "sleep", "seconds": 0}).encode()


class AnswerInsideWrite:
    """Wraps the transport's write to the pipe: with ``on`` set, a write returns only once the
    server's stdout has something to read (the answer, or its end)."""

    def __init__(self, real: Callable[[int, bytes], int]) -> None:
        self.real = real
        self.on = False
        self.stdout_fd: int | None = None

    def __call__(self, fd: int, data: bytes) -> int:
        sent = self.real(fd, data)
        if self.on:
            assert self.stdout_fd is not None
            # Deliberately blocks the event loop, as the kernel's switch to the server does.
            readable, _, _ = select.select([self.stdout_fd], [], [], 10)
            assert readable, "the peer did not answer within 10 s"
        return sent


@pytest.fixture
def inside_write(monkeypatch: pytest.MonkeyPatch) -> AnswerInsideWrite:
    wrapper = AnswerInsideWrite(_stdio._write_now)
    monkeypatch.setattr(_stdio, "_write_now", wrapper)
    return wrapper


@asynccontextmanager
async def transport(
    sink: Sink, wrapper: AnswerInsideWrite, **overrides: object
) -> AsyncIterator[StdioTransport]:
    with trio.fail_after(10):
        async with open_stdio_transport(peer(**overrides), sink) as t:
            wrapper.stdout_fd = t._stdout_fd
            await trio.testing.wait_all_tasks_blocked()  # the reader waits for stdout
            yield t


async def frames(sink: Sink, count: int) -> list[bytes]:
    """The next ``count`` frames of the sink (stderr lines skipped)."""
    got: list[bytes] = []
    while len(got) < count:
        item = await sink.receive()
        if isinstance(item, bytes):
            got.append(item)
        else:
            assert isinstance(item, StderrLine), item
    return got


async def test_an_answer_there_after_the_write_goes_up_from_the_writer(
    inside_write: AnswerInsideWrite,
) -> None:
    sink = Sink()
    async with transport(sink, inside_write) as t:
        inside_write.on = True
        t.send_nowait(b'{"n":1}')
        assert await frames(sink, 1) == [b'{"n":1}']
        stats = t.statistics()
        assert (stats.looks_after_write, stats.reads_after_write) == (1, 1)
        assert stats.frames_received == 1
        t.send_nowait(b'{"n":2}')
        assert await frames(sink, 1) == [b'{"n":2}']
        assert t.statistics().reads_after_write == 2


async def test_a_line_begun_by_the_writer_is_ended_by_the_reader_in_order(
    inside_write: AnswerInsideWrite,
) -> None:
    # 300 KiB in one line: the writer takes the first chunk, the reader the rest (the peer
    # writes more as the pipe empties); the echo of the next line comes after it, whole.
    size = 300 * 1024
    sink = Sink(max_bytes=1024 * 1024)
    async with transport(sink, inside_write) as t:
        inside_write.on = True
        t.send_nowait(json.dumps({"peer": "big", "bytes": size}).encode())
        await trio.testing.wait_all_tasks_blocked()
        assert t.statistics().write_batches == 1
        inside_write.on = False
        t.send_nowait(b'{"after":true}')
        assert await frames(sink, 2) == [b"x" * size, b'{"after":true}']
        stats = t.statistics()
        # the first write's look took the line's first chunk; the second write's look may have
        # found more of it on its way
        assert stats.reads_after_write >= 1
        assert stats.frames_received == 2


async def test_no_look_while_the_sink_has_no_room(inside_write: AnswerInsideWrite) -> None:
    sink = Sink(max_bytes=100)
    sink.send_nowait(b"x" * 100, 100)  # full: the reader will have to wait for room
    async with transport(sink, inside_write) as t:
        inside_write.on = True
        t.send_nowait(b'{"n":1}')
        await trio.testing.wait_all_tasks_blocked()
        stats = t.statistics()
        assert (stats.looks_after_write, stats.frames_received) == (0, 0)
        assert await sink.receive() == b"x" * 100  # room: the reader puts the answer
        assert await frames(sink, 1) == [b'{"n":1}']
        assert t.statistics().reads_after_write == 0


async def test_looks_that_find_nothing_back_off_until_one_finds_an_answer(
    inside_write: AnswerInsideWrite,
) -> None:
    sink = Sink()
    async with transport(sink, inside_write) as t:

        async def write(frame: bytes) -> None:
            sent = t.statistics().frames_sent
            t.send_nowait(frame)
            await trio.testing.wait_all_tasks_blocked()
            assert t.statistics().frames_sent == sent + 1  # a write of its own

        # Nothing comes back: a look after write 1, then 2 writes skipped, a look after write
        # 4, 4 skipped, after 9, 8 skipped, after 18, 16 skipped, the next after write 35.
        looked_after = []
        for n in range(1, 35):
            looks = t.statistics().looks_after_write
            await write(QUIET)
            if t.statistics().looks_after_write > looks:
                looked_after.append(n)
        assert looked_after == [1, 4, 9, 18]
        assert t.statistics().reads_after_write == 0
        inside_write.on = True  # write 35 is looked after, and its answer is there
        await write(b'{"n":35}')
        assert await frames(sink, 1) == [b'{"n":35}']
        stats = t.statistics()
        assert (stats.looks_after_write, stats.reads_after_write) == (5, 1)
        inside_write.on = False
        await write(QUIET)  # found one: the next write is looked after again
        assert t.statistics().looks_after_write == 6


async def test_the_end_of_stdout_is_left_to_the_reader(inside_write: AnswerInsideWrite) -> None:
    # The peer writes "partial" without a newline and exits: the writer takes the partial
    # line, the reader meets the end, frames the last line and ends the connection.
    sink = Sink()
    async with transport(sink, inside_write) as t:
        inside_write.on = True
        t.send_nowait(json.dumps({"peer": "partial"}).encode())
        assert await frames(sink, 1) == [b"partial"]
        while not isinstance(item := await sink.receive(), ConnectionEnded):
            assert isinstance(item, StderrLine), item
        assert t.statistics().reads_after_write == 1
