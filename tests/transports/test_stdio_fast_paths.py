"""The stdio transport's hooks for the session's hot path: ``try_send`` (a whole frame written
now, or nothing written at all) and ``receive_nowait`` (frames read already, without waiting),
and the byte bound of the queue of frames read but not yet received.

Against the real echo peer (``stdio_peer.py``) and the real clock."""

from __future__ import annotations

import os
import re
import sys

import pytest
import trio

from trio_mcp.protocol._errors import FrameTooLarge, LocalProtocolError, TransportClosed
from trio_mcp.transports.stdio._stdio import _QUEUE_BYTES

from .test_stdio import MODES, ask, peer, running

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX pipes")

PIPE_BUF = os.pathconf("/", "PC_PIPE_BUF") if hasattr(os, "pathconf") else 4096


@pytest.mark.parametrize("bind", MODES)
async def test_a_small_frame_is_written_at_once_without_a_checkpoint(bind: bool) -> None:
    async with running(peer(bind_to_host=bind)) as t:
        with trio.CancelScope() as scope:  # noqa: ASYNC100 - that no checkpoint is the point
            scope.cancel()  # a checkpoint would raise Cancelled: try_send has none
            assert t.try_send(b'{"n":1}') is True
            assert t.try_send(b'{"n":2}') is True
        assert not scope.cancelled_caught
        assert [await t.receive(), await t.receive()] == [b'{"n":1}', b'{"n":2}']
        assert t.statistics().frames_sent == 2


async def test_a_frame_longer_than_pipe_buf_is_left_to_send() -> None:
    async with running(peer()) as t:
        fits = b"x" * (PIPE_BUF - 1)  # with its newline: PIPE_BUF bytes, written atomically
        too_big = fits + b"x"
        assert t.try_send(fits) is True
        assert t.try_send(too_big) is False
        assert t.statistics().frames_sent == 1
        await t.send(too_big)
        assert await t.receive() == fits
        assert await t.receive() == too_big


async def test_a_full_pipe_writes_nothing_and_send_still_works() -> None:
    async with running(peer()) as t:
        await t.send(b'{"peer":"sleep","seconds":1}')  # the peer stops reading stdin for 1 s
        frame = b"y" * 1000
        written = 0
        while written < 10_000 and t.try_send(frame):  # fills the pipe, whole frames only
            written += 1
        assert 0 < written < 10_000  # a pipe holds 64 KiB on Linux
        assert t.statistics().frames_sent == written + 1
        await t.send(b"after")  # waits until the peer reads again
        echoed = [await t.receive() for _ in range(written + 1)]
        assert echoed == [frame] * written + [b"after"]


async def test_while_a_send_holds_the_lock_try_send_declines() -> None:
    async with running(peer()) as t:
        await t.send(b'{"peer":"sleep","seconds":0.5}')
        async with trio.open_nursery() as nursery:
            nursery.start_soon(t.send, b"z" * (1024 * 1024))  # blocks on the full pipe
            await trio.sleep(0.1)
            assert t.try_send(b"small") is False  # it would overtake the half-sent frame
        assert await t.receive() == b"z" * (1024 * 1024)


async def test_a_frame_with_a_newline_is_refused() -> None:
    async with running(peer()) as t:
        with pytest.raises(LocalProtocolError, match="must not contain a newline"):
            t.try_send(b'{"a":\n1}')
        assert t.try_send(b"fine") is True
        assert await t.receive() == b"fine"


async def test_a_closed_stdin_fails_like_send_and_refuses_later_sends() -> None:
    async with running(peer()) as t:
        assert await ask(t, {"peer": "close-stdin"}) == {"stdin": "closed"}
        broken = f"sending to stdio server {sys.executable!r} (pid {t.pid}) failed: the peer "
        with pytest.raises(TransportClosed, match=re.escape(broken)):
            t.try_send(b"nobody reads this")
        with pytest.raises(TransportClosed, match=re.escape(broken)):
            await t.send(b"nor this")


async def test_after_aclose_try_send_raises() -> None:
    async with running(peer()) as t:
        await t.aclose()
        with pytest.raises(TransportClosed, match="was closed; open a new one"):
            t.try_send(b"x")


async def test_unread_frames_are_bounded_in_bytes_and_then_drained_in_order() -> None:
    # Nobody receives: the reader queues about _QUEUE_BYTES of echoed frames, then stops reading
    # stdout (the peer then blocks on its writes, and stops reading its stdin). Everything
    # arrives in order once received.
    count, size = 1500, 1000
    frames = [b"%06d:" % i + b"q" * (size - 7) for i in range(count)]
    async with running(peer()) as t:
        async with trio.open_nursery() as nursery:

            async def send_all() -> None:
                for frame in frames:
                    await t.send(frame)

            nursery.start_soon(send_all)
            with trio.fail_after(5):
                while t.statistics().frames_queued * size < _QUEUE_BYTES:  # noqa: ASYNC110
                    await trio.sleep(0.01)
            await trio.sleep(0.3)  # the reader had every chance to read more
            queued = t.statistics().frames_queued
            assert _QUEUE_BYTES <= queued * size <= _QUEUE_BYTES + 64 * 1024 + size
            assert queued < count
            received = [await t.receive() for _ in range(3)]
            while (frame := t.receive_nowait()) is not None:
                received.append(frame)
            while len(received) < count:
                received.append(await t.receive())
        assert received == frames
        assert t.receive_nowait() is None


# --------------------------------------------------------------------------- the frame handler


async def test_a_frame_handler_gets_every_frame_in_order_from_the_reader_task() -> None:
    handled: list[tuple[bytes, bool]] = []
    async with running(peer()) as t:
        await t.send(b"queued-1")
        await t.send(b"queued-2")
        while t.statistics().frames_queued < 2:  # noqa: ASYNC110 - nothing to wait on
            await trio.sleep(0.01)
        me = trio.lowlevel.current_task()

        def handler(frame: bytes) -> None:
            handled.append((frame, trio.lowlevel.current_task() is me))

        t.set_frame_handler(handler)
        # What was queued is handed over at once, here, in this task.
        assert handled == [(b"queued-1", True), (b"queued-2", True)]
        for i in range(50):
            assert t.try_send(b"pushed-%d" % i)
        with trio.fail_after(5):
            while len(handled) < 52:  # noqa: ASYNC110 - the handler is all there is
                await trio.sleep(0.01)
        assert [frame for frame, _ in handled[2:]] == [b"pushed-%d" % i for i in range(50)]
        assert not any(here for _, here in handled[2:])  # called from the reader task
        assert t.statistics().frames_received == 52
        assert t.receive_nowait() is None
        t.set_frame_handler(None)  # back to the queue
        await t.send(b"queued-again")
        assert await t.receive() == b"queued-again"
        assert len(handled) == 52


async def test_with_a_frame_handler_receive_reports_the_end_after_the_last_frame() -> None:
    handled: list[bytes] = []
    ends: list[tuple[BaseException, list[bytes]]] = []
    async with running(peer()) as t:
        t.set_frame_handler(handled.append, lambda error: ends.append((error, list(handled))))
        await t.send(b"before")
        await t.send(b'{"peer":"exit","code":3,"stderr":["bye"]}')
        with pytest.raises(TransportClosed) as info:
            await t.receive()
        assert handled == [b"before"]
        assert "exited with code 3" in str(info.value)
        assert "| bye" in str(info.value)
        # The end handler was told once, after the last frame, with the same message; and
        # before receive() reported it (it runs in the transport's own task).
        assert len(ends) == 1
        error, seen = ends[0]
        assert isinstance(error, TransportClosed)
        assert str(error) == str(info.value)
        assert seen == [b"before"]


async def test_with_a_frame_handler_an_oversized_frame_still_ends_receive() -> None:
    handled: list[bytes] = []
    ends: list[BaseException] = []
    async with running(peer(max_frame_bytes=1000)) as t:
        t.set_frame_handler(handled.append, ends.append)
        await t.send(b"small")
        await t.send(b'{"peer":"big","bytes":5000}')
        with pytest.raises(FrameTooLarge) as info:
            await t.receive()
        assert info.value.limit == 1000
        assert handled == [b"small"]
        assert ends == [info.value]  # the end handler got the very same error


async def test_an_exception_in_the_frame_handler_comes_out_of_the_transport() -> None:
    def handler(frame: bytes) -> None:
        raise ValueError(f"bad frame {frame!r}")

    async def use() -> None:
        async with running(peer()) as t:
            t.set_frame_handler(handler)
            await t.send(b"boom")
            await trio.sleep_forever()

    with pytest.raises(ValueError, match="bad frame b'boom'"):
        await use()


async def test_the_end_handler_is_not_called_once_the_handlers_are_removed() -> None:
    ends: list[BaseException] = []
    async with running(peer()) as t:
        t.set_frame_handler(lambda frame: None, ends.append)
        t.set_frame_handler(None)
        await t.send(b'{"peer":"exit","code":0}')
        with pytest.raises(TransportClosed, match="exited with code 0"):
            await t.receive()
    assert ends == []
