"""The transport contract: error mapping, exception-group collapsing, what goes up a sink
(item sizes, the inbox of a transport used on its own and its reader), and the Protocols that
mypy checks and ``isinstance`` recognises on the real transports."""

from __future__ import annotations

import errno
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio
import trio.testing

from trio_mcp.actors.testing._chaos import ChaosPolicy, open_chaos_transport
from trio_mcp.protocol._errors import (
    ConnectError,
    FrameTooLarge,
    HttpStatusError,
    SessionExpired,
    TransportClosed,
)
from trio_mcp.protocol._jsonrpc import RequestId
from trio_mcp.transports._base import (
    ConnectionEnded,
    FrameSink,
    InboxReader,
    ProcessTransport,
    RequestFailed,
    ResumableTransport,
    SessionExpiredNotice,
    StderrLine,
    Transport,
    TransportInfo,
    VersionedTransport,
    collapse_exception_group,
    item_size,
    map_transport_errors,
    open_inbox,
)
from trio_mcp.transports._channel import DEFAULT_MAILBOX_BYTES, ITEM_OVERHEAD
from trio_mcp.transports._memory import memory_transport_pair
from trio_mcp.transports.stdio._stdio import StdioParameters, open_stdio_transport

PEER = Path(__file__).parent / "stdio_peer.py"


@asynccontextmanager
async def _memory_client(sink: FrameSink) -> AsyncIterator[Transport]:
    """A transport factory: the client end of a memory pair whose frames go to ``sink``."""
    client, server = memory_transport_pair(client_sink=sink)
    try:
        yield client
    finally:
        await client.aclose()
        await server.aclose()


def test_broken_resource_becomes_transport_closed() -> None:
    original = trio.BrokenResourceError("pipe gone")
    with pytest.raises(TransportClosed) as info, map_transport_errors("sending to 'x'"):
        raise original
    assert type(info.value) is TransportClosed
    assert str(info.value) == "sending to 'x' failed: the peer closed the connection (pipe gone)"
    assert info.value.__cause__ is original


def test_broken_resource_without_text() -> None:
    with pytest.raises(TransportClosed) as info, map_transport_errors("reading"):
        raise trio.BrokenResourceError
    assert str(info.value) == "reading failed: the peer closed the connection"


def test_closed_resource_becomes_transport_closed() -> None:
    with pytest.raises(TransportClosed) as info, map_transport_errors("reading"):
        raise trio.ClosedResourceError
    assert str(info.value) == (
        "reading failed: the transport was already closed on our side; open a new one"
    )
    assert isinstance(info.value.__cause__, trio.ClosedResourceError)


def test_os_error_while_connecting_becomes_connect_error() -> None:
    original = ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")
    with pytest.raises(ConnectError) as info, map_transport_errors("connecting", connecting=True):
        raise original
    assert type(info.value) is ConnectError
    assert str(info.value) == "connecting failed: [Errno 111] Connection refused"
    assert info.value.__cause__ is original


def test_os_error_after_connecting_becomes_transport_closed() -> None:
    with pytest.raises(TransportClosed) as info, map_transport_errors("writing"):
        raise OSError(errno.EPIPE, "Broken pipe")
    assert type(info.value) is TransportClosed
    assert str(info.value) == "writing failed: [Errno 32] Broken pipe"


def test_other_errors_pass_through() -> None:
    with pytest.raises(ValueError, match=r"^mine$"), map_transport_errors("x"):
        raise ValueError("mine")


def test_collapse_single_exception_keeps_it() -> None:
    cause = KeyError("k")
    inner = ValueError("inner")
    inner.__cause__ = cause
    with pytest.raises(ValueError) as info, collapse_exception_group():
        raise ExceptionGroup("wrapper", [inner])
    assert info.value is inner
    assert info.value.__cause__ is cause
    assert info.value.__context__ is None


def test_collapse_removes_exactly_one_level() -> None:
    own = ExceptionGroup("own", [ValueError("a")])
    with pytest.raises(ExceptionGroup) as info, collapse_exception_group():
        raise ExceptionGroup("wrapper", [own])
    assert info.value is own


def test_collapse_leaves_real_groups_alone() -> None:
    group = ExceptionGroup("two", [ValueError("a"), KeyError("b")])
    with pytest.raises(ExceptionGroup) as info, collapse_exception_group():
        raise group
    assert info.value is group


async def test_collapse_around_a_nursery() -> None:
    async def fail() -> None:
        raise TransportClosed("gone")

    with pytest.raises(TransportClosed, match=r"^gone$"), collapse_exception_group():
        async with trio.open_nursery() as nursery:
            nursery.start_soon(fail)


def test_transport_info() -> None:
    info = TransportInfo(kind="stdio", detail="npx (pid 3)")
    assert str(info) == "stdio: npx (pid 3)"
    assert info == TransportInfo(kind="stdio", detail="npx (pid 3)")


# --------------------------------------------------------------------------- what goes up


def test_item_size_is_a_frames_length_and_an_overhead_for_events() -> None:
    assert item_size(b"") == 0
    assert item_size(b"x" * 1000) == 1000
    error = TransportClosed("gone")
    for event in (
        StderrLine(text="a long line " * 100),
        RequestFailed(request_id=1, error=error, sent=True),
        SessionExpiredNotice(error=error, lost=(1, 2)),
        ConnectionEnded(error=error, unsent=frozenset({3})),
    ):
        assert item_size(event) == ITEM_OVERHEAD


def test_open_inbox_is_a_byte_channel_of_the_given_budget() -> None:
    assert open_inbox().max_bytes == DEFAULT_MAILBOX_BYTES
    inbox = open_inbox(10)
    assert inbox.max_bytes == 10
    inbox.send_nowait(b"0123456789", 10)
    with pytest.raises(trio.WouldBlock):
        inbox.send_nowait(b"x", 1)


def test_connection_ended_defaults_to_nothing_unsent() -> None:
    error = TransportClosed("gone")
    assert ConnectionEnded(error=error).unsent == frozenset()
    assert SessionExpiredNotice(error=error).lost == ()


async def test_inbox_reader_returns_frames_in_order_and_skips_stderr_lines() -> None:
    inbox = open_inbox()
    reader = InboxReader(inbox)
    for item in (b"1", StderrLine(text="log"), b"2", StderrLine(text="more"), b"3"):
        inbox.send_nowait(item, item_size(item))
    assert [await reader.receive() for _ in range(3)] == [b"1", b"2", b"3"]


async def test_inbox_reader_raises_the_end_on_every_later_call() -> None:
    inbox = open_inbox()
    reader = InboxReader(inbox)
    error = FrameTooLarge("a line over 10 bytes", limit=10)
    inbox.send_nowait(b"last", 4)
    inbox.send_nowait(ConnectionEnded(error=error, unsent=frozenset({7})))
    inbox.close()
    assert await reader.receive() == b"last"
    for _ in range(3):
        with pytest.raises(FrameTooLarge) as info:
            await reader.receive()
        assert info.value is error


async def test_inbox_reader_raises_a_request_failure_once() -> None:
    inbox = open_inbox()
    reader = InboxReader(inbox)
    failed = HttpStatusError("HTTP 500", status=500, body="")
    expired = SessionExpired("the server ended the session")
    inbox.send_nowait(RequestFailed(request_id=1, error=failed, sent=True))
    inbox.send_nowait(b"after")
    inbox.send_nowait(SessionExpiredNotice(error=expired, lost=(2,)))
    inbox.send_nowait(b"later")
    with pytest.raises(HttpStatusError) as info:
        await reader.receive()
    assert info.value is failed
    assert await reader.receive() == b"after"
    with pytest.raises(SessionExpired) as expired_info:
        await reader.receive()
    assert expired_info.value is expired
    assert await reader.receive() == b"later"


async def test_inbox_reader_at_the_end_of_the_channel_without_a_word() -> None:
    inbox = open_inbox()
    reader = InboxReader(inbox)
    inbox.close()
    for _ in range(2):
        with pytest.raises(TransportClosed, match=r"^the connection ended$"):
            await reader.receive()
    other = open_inbox()
    other.close_receiver()
    with pytest.raises(TransportClosed, match=r"^the connection ended$"):
        await InboxReader(other).receive()


async def test_inbox_reader_waits_for_a_frame_and_is_a_checkpoint_at_the_end() -> None:
    inbox = open_inbox()
    reader = InboxReader(inbox)
    got: list[bytes] = []
    async with trio.open_nursery() as nursery:

        async def read() -> None:
            got.append(await reader.receive())

        nursery.start_soon(read)
        await trio.testing.wait_all_tasks_blocked()
        assert got == []
        inbox.send_nowait(b"now", 3)
    assert got == [b"now"]
    inbox.send_nowait(ConnectionEnded(error=TransportClosed("gone")))
    with pytest.raises(TransportClosed):
        await reader.receive()
    with trio.CancelScope() as scope:
        scope.cancel()
        with pytest.raises(trio.Cancelled):
            await reader.receive()


# --------------------------------------------------------------------------- the Protocols


def test_transport_protocol_is_structural() -> None:
    class Fake:
        info = TransportInfo(kind="memory", detail="test")

        def send_nowait(self, frame: bytes, request_id: RequestId | None = None) -> None:
            del frame, request_id

        async def send(self, frame: bytes, request_id: RequestId | None = None) -> None:
            del frame, request_id

        async def receive(self) -> bytes:
            return b"{}"

        async def aclose(self) -> None:
            return None

    class WithoutSendNowait:
        info = TransportInfo(kind="memory", detail="test")

        async def send(self, frame: bytes) -> None:
            del frame

        async def receive(self) -> bytes:
            return b"{}"

        async def aclose(self) -> None:
            return None

    assert isinstance(Fake(), Transport)
    assert not isinstance(Fake(), VersionedTransport | ResumableTransport | ProcessTransport)
    assert not isinstance(WithoutSendNowait(), Transport)  # the old contract
    assert not isinstance(object(), Transport)


async def test_memory_ends_are_plain_transports() -> None:
    client, server = memory_transport_pair()
    for end in (client, server):
        assert isinstance(end, Transport)
        assert not isinstance(end, VersionedTransport)
        assert not isinstance(end, ResumableTransport)
        assert not isinstance(end, ProcessTransport)


async def test_a_chaos_transport_is_a_transport() -> None:
    async with open_chaos_transport(_memory_client, ChaosPolicy(seed=1)) as chaos:
        assert isinstance(chaos, Transport)
        assert not isinstance(chaos, VersionedTransport | ResumableTransport)


@pytest.mark.skipif(sys.platform == "win32", reason="the stdio peer is a POSIX script")
async def test_the_stdio_transport_is_a_process_transport() -> None:
    params = StdioParameters(command=sys.executable, args=(str(PEER),), bind_to_host=False)
    with trio.fail_after(30):
        async with open_stdio_transport(params) as transport:
            assert isinstance(transport, Transport)
            assert isinstance(transport, ProcessTransport)
            assert not isinstance(transport, VersionedTransport | ResumableTransport)
            assert transport.pid > 0
            assert transport.stderr_tail() == ()
