"""The transport contract helpers: error mapping and exception-group collapsing."""

from __future__ import annotations

import errno

import pytest
import trio

from trio_mcp.protocol._errors import ConnectError, TransportClosed
from trio_mcp.transports._base import (
    Transport,
    TransportInfo,
    collapse_exception_group,
    map_transport_errors,
)


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


def test_transport_protocol_is_structural() -> None:
    class Fake:
        info = TransportInfo(kind="memory", detail="test")

        async def send(self, frame: bytes) -> None:
            del frame

        async def receive(self) -> bytes:
            return b"{}"

        async def aclose(self) -> None:
            return None

    assert isinstance(Fake(), Transport)
    assert not isinstance(object(), Transport)
