"""The WebSocket transport against our own WebSocket MCP server, on 127.0.0.1.

No SDK ships a WebSocket MCP server, so the tests build one: a trio-websocket server whose
handler accepts the subprotocol ``mcp`` with :func:`accept_websocket_transport` and serves the
connection with ``FakeServer.serve_transport``. Raw TCP servers stand in for peers that break
the handshake or the framing, or that never read, and a TCP proxy that can be cut stands in for
a network failure.

Most tests open the transport with an inbox of their own and assert the exact items put into
it: the frames in order, then ``ConnectionEnded`` (its error and the requests never sent), then
the end of the channel.

Real sockets need the real clock: every test runs under a ``trio.fail_after`` guard, and the
few timing assertions are lower bounds with generous upper bounds.
"""

from __future__ import annotations

import base64
import hashlib
import re
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import attrs
import pytest
import trio
import trio.testing
import trio_websocket
from hypothesis import given
from hypothesis import strategies as st

from trio_mcp.actors.config._backoff import RetryPolicy
from trio_mcp.actors.config._config import RuntimeConfig, ServerConfig, TransportKind
from trio_mcp.actors.runtime._events import ServerState
from trio_mcp.actors.runtime._runtime import Runtime, open_runtime
from trio_mcp.actors.testing._fakes import FakeServer, FakeTool, ToolContext
from trio_mcp.protocol import (
    ConnectError,
    ConnectTimeout,
    FrameTooLarge,
    LocalProtocolError,
    McpError,
    McpTransportConfigError,
    ServerDisconnected,
    TransportClosed,
)
from trio_mcp.protocol._jsonrpc import RequestId
from trio_mcp.transports._base import (
    ConnectionEnded,
    Inbound,
    Transport,
    TransportInfo,
    open_inbox,
)
from trio_mcp.transports._channel import ByteChannel
from trio_mcp.transports._websocket import (
    MCP_SUBPROTOCOL,
    WebSocketParameters,
    WebSocketTransport,
    accept_websocket_transport,
    open_websocket_transport,
)

#: The absolute limit (trio clock, real time here) of every test.
GUARD = 15

Handler = Callable[[trio_websocket.WebSocketRequest], Awaitable[None]]
StreamHandler = Callable[[trio.SocketStream], Awaitable[None]]
Inbox = ByteChannel[Inbound]


# --------------------------------------------------------------------------- servers


async def serve_ws(nursery: trio.Nursery, handler: Handler, **options: Any) -> int:
    """Run a trio-websocket server on 127.0.0.1 in ``nursery``; return its port."""
    server = await nursery.start(
        partial(trio_websocket.serve_websocket, handler, "127.0.0.1", 0, None, **options)
    )
    assert isinstance(server, trio_websocket.WebSocketServer)
    return server.port


async def serve_tcp(
    nursery: trio.Nursery, handler: StreamHandler, *, receive_buffer: int | None = None
) -> int:
    """Run a raw TCP server on 127.0.0.1 in ``nursery``; return its port. ``receive_buffer``:
    the kernel's receive buffer of each connection (a small one fills up at once)."""
    sock = trio.socket.socket()
    if receive_buffer is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    await sock.bind(("127.0.0.1", 0))
    sock.listen()
    port = sock.getsockname()[1]
    assert isinstance(port, int)
    await nursery.start(trio.serve_listeners, handler, [trio.SocketListener(sock)])
    return port


@attrs.define(eq=False)
class Handshake:
    """What our server saw of one opening handshake."""

    path: str
    subprotocols: tuple[str, ...]
    headers: dict[str, str]

    @classmethod
    def of(cls, request: trio_websocket.WebSocketRequest) -> Handshake:
        return cls(
            path=request.path,
            subprotocols=request.proposed_subprotocols,
            headers={k.decode().lower(): v.decode() for k, v in request.headers},
        )


@attrs.define(eq=False)
class WsMcpServer:
    """Our WebSocket MCP server: every connection is served by ``fake``."""

    fake: FakeServer
    max_frame_bytes: int = 1 << 20
    handshakes: list[Handshake] = attrs.Factory(list)
    transports: list[WebSocketTransport] = attrs.Factory(list)
    port: int = 0

    def url(self, path: str = "/mcp") -> str:
        return f"ws://127.0.0.1:{self.port}{path}"

    async def start(self, nursery: trio.Nursery) -> WsMcpServer:
        self.port = await serve_ws(nursery, self._handle, max_message_size=self.max_frame_bytes)
        return self

    async def _handle(self, request: trio_websocket.WebSocketRequest) -> None:
        self.handshakes.append(Handshake.of(request))
        async with accept_websocket_transport(
            request, max_frame_bytes=self.max_frame_bytes
        ) as transport:
            self.transports.append(transport)
            await self.fake.serve_transport(transport)


@attrs.define(eq=False)
class Proxy:
    """A TCP proxy to ``target``; :meth:`cut` drops every connection through it at once,
    without a WebSocket close handshake (a network failure, as the client sees it)."""

    target: int
    port: int = 0
    _scopes: list[trio.CancelScope] = attrs.Factory(list)

    async def start(self, nursery: trio.Nursery) -> Proxy:
        self.port = await serve_tcp(nursery, self._handle)
        return self

    def cut(self) -> None:
        for scope in self._scopes:
            scope.cancel()
        self._scopes.clear()

    async def _handle(self, downstream: trio.SocketStream) -> None:
        with trio.CancelScope() as scope:
            self._scopes.append(scope)
            upstream = await trio.open_tcp_stream("127.0.0.1", self.target)
            async with downstream, upstream, trio.open_nursery() as nursery:
                nursery.start_soon(_pump, downstream, upstream)
                nursery.start_soon(_pump, upstream, downstream)


async def _pump(source: trio.abc.ReceiveStream, sink: trio.abc.SendStream) -> None:
    try:
        while data := await source.receive_some(65536):
            await sink.send_all(data)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return


async def read_request(stream: trio.SocketStream) -> dict[str, str]:
    """Read one HTTP request head from a raw stream; its headers, lower-cased names."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = await stream.receive_some(4096)
        if not chunk:
            break
        data += chunk
    lines = data.split(b"\r\n\r\n")[0].decode().split("\r\n")[1:]
    return {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}


def accept_token(key: str) -> str:
    digest = hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()
    return base64.b64encode(digest).decode()


async def accept_raw(stream: trio.SocketStream, subprotocol: str = "mcp") -> None:
    """Read a client's opening handshake from a raw stream and accept it with ``subprotocol``."""
    headers = await read_request(stream)
    token = accept_token(headers["sec-websocket-key"])
    await stream.send_all(
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Accept: " + token.encode() + b"\r\n"
        b"Sec-WebSocket-Protocol: " + subprotocol.encode() + b"\r\n\r\n"
    )


def raw_frame(opcode: int, payload: bytes) -> bytes:
    """One unmasked, final WebSocket frame as a server writes it (payload under 126 bytes)."""
    assert len(payload) < 126
    return bytes([0x80 | opcode, len(payload)]) + payload


async def until_closed(connection: trio_websocket.WebSocketConnection) -> None:
    """Read (and drop) what a client sends until it closes the connection."""
    try:
        while True:
            await connection.get_message()
    except trio_websocket.ConnectionClosed:
        return


def params(url: str, **options: Any) -> WebSocketParameters:
    return WebSocketParameters(url=url, **options)


# --------------------------------------------------------------------------- inbox


async def take(inbox: Inbox, count: int) -> list[Inbound]:
    """The next ``count`` items of ``inbox``, waiting for each."""
    return [await inbox.receive() for _ in range(count)]


async def rest(inbox: Inbox) -> list[Inbound]:
    """Every item left in ``inbox``, up to the end of the channel (which must come)."""
    items: list[Inbound] = []
    while True:
        try:
            items.append(await inbox.receive())
        except trio.EndOfChannel:
            return items


def end_of(item: Inbound) -> tuple[type[McpError], str, frozenset[RequestId]]:
    """A ``ConnectionEnded`` as (error type, error message, unsent ids), to compare exactly."""
    assert isinstance(item, ConnectionEnded), item
    return type(item.error), str(item.error), item.unsent


@asynccontextmanager
async def ws_with_inbox(
    url: str, *, max_bytes: int = 1 << 20, **options: Any
) -> AsyncIterator[tuple[WebSocketTransport, Inbox]]:
    """A client transport whose frames go into an inbox of the test's."""
    inbox = open_inbox(max_bytes)
    async with open_websocket_transport(params(url, **options), inbox) as t:
        yield t, inbox


# --------------------------------------------------------------------------- parameters


def test_parameters_show_the_url_without_its_query() -> None:
    assert params("ws://localhost/mcp").display_url == "ws://localhost/mcp"
    assert params("ws://localhost").display_url == "ws://localhost/"
    assert params("wss://example.com:443/x").display_url == "wss://example.com/x"
    assert params("ws://localhost:8080/x?token=s3cret").display_url == ("ws://localhost:8080/x?...")
    assert params("wss://[::1]:8443/m").display_url == "wss://[::1]:8443/m"


def test_parameters_list_every_problem_at_once() -> None:
    with pytest.raises(McpTransportConfigError) as info:
        WebSocketParameters(
            url="http://example.com/mcp",
            headers={"Bad Name": "x", "Sec-WebSocket-Protocol": "other", "X-Ok": "a\r\nb"},
            max_frame_bytes=0,
            connect_timeout=0,
            close_timeout=float("nan"),
        )
    assert info.value.problems == (
        ("url", "must start with ws:// or wss://, got scheme 'http'"),
        ("headers['Bad Name']", "a header name must be an HTTP token"),
        ("headers['Sec-WebSocket-Protocol']", "is set by the WebSocket handshake itself"),
        ("headers['X-Ok']", "the value must be a string without CR, LF or NUL"),
        ("max_frame_bytes", "must be a positive integer, got 0"),
        ("connect_timeout", "must be a finite number of seconds > 0, got 0"),
        ("close_timeout", "must be a finite number of seconds >= 0, got nan"),
    )
    assert str(info.value).startswith(
        "invalid WebSocket server settings: url: must start with ws:// or wss://"
    )


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("ws://user:pw@example.com/", "must not hold user:password@; send credentials in headers"),
        ("ws:///mcp", "has no host"),
        ("ws://example.com:99999/", "is not a valid URL (Port out of range 0-65535)"),
        ("", "must be a non-empty ws:// or wss:// URL"),
    ],
)
def test_parameters_refuse_unusable_urls(url: str, problem: str) -> None:
    with pytest.raises(McpTransportConfigError) as info:
        params(url)
    [(key, message)] = info.value.problems
    assert key == "url"
    assert message.startswith(problem)


def test_an_ssl_context_needs_a_wss_url() -> None:
    with pytest.raises(McpTransportConfigError) as info:
        params("ws://localhost/", ssl_context=ssl.create_default_context())
    assert info.value.problems == (("ssl_context", "is only used with a wss:// URL"),)


def test_header_values_never_show_in_repr() -> None:
    p = params("ws://localhost/", headers={"Authorization": "Bearer s3cret"})
    assert "s3cret" not in repr(p)
    assert "'Authorization': '***'" in repr(p)
    assert p.headers["Authorization"] == "Bearer s3cret"


@given(
    user=st.text(alphabet="abcXYZ019", min_size=1, max_size=8),
    query=st.text(alphabet="abc=&019", min_size=1, max_size=16),
    port=st.integers(min_value=1, max_value=65535),
)
def test_the_display_url_never_holds_credentials_or_the_query(
    user: str, query: str, port: int
) -> None:
    p = params(f"ws://localhost:{port}/p?{query}")
    assert query not in p.display_url.removeprefix(f"ws://localhost:{port}")
    assert p.display_url.endswith("/p?...")
    with pytest.raises(McpTransportConfigError):
        params(f"ws://{user}:{user}@example.com:{port}/p")


# --------------------------------------------------------------------------- round trips


async def echo_handler(
    request: trio_websocket.WebSocketRequest, *, seen: list[Handshake] | None = None
) -> None:
    """Accept MCP, then send back every message received."""
    if seen is not None:
        seen.append(Handshake.of(request))
    async with accept_websocket_transport(request) as transport:
        try:
            while True:
                await transport.send(await transport.receive())
        except (TransportClosed, FrameTooLarge):
            return


async def test_messages_go_both_ways_one_per_text_frame(nursery: trio.Nursery) -> None:
    seen: list[Handshake] = []
    port = await serve_ws(nursery, partial(echo_handler, seen=seen))
    url = f"ws://127.0.0.1:{port}/mcp?session=s3cret"
    display = f"ws://127.0.0.1:{port}/mcp?..."
    headers = {"Authorization": "Bearer t0ken", "X-Trace": "é"}
    with trio.fail_after(GUARD):
        async with ws_with_inbox(url, headers=headers) as (t, inbox):
            assert isinstance(t, Transport)
            assert t.info == TransportInfo(kind="ws", detail=display)
            assert t.subprotocol == MCP_SUBPROTOCOL
            t.send_nowait(b'{"jsonrpc":"2.0","method":"a"}')
            await t.send('{"text":"héllo"}'.encode(), request_id=1)
            assert await take(inbox, 2) == [
                b'{"jsonrpc":"2.0","method":"a"}',
                '{"text":"héllo"}'.encode(),
            ]
            stats = t.statistics()
            assert (stats.frames_sent, stats.frames_received) == (2, 2)
            assert stats.bytes_sent == stats.bytes_received == 30 + 17
            assert (stats.closed, stats.close_code, stats.queued) == (False, None, 0)
        assert t.statistics().closed is True
        assert t.statistics().close_code == 1000
    assert [end_of(item) for item in await rest(inbox)] == [
        (
            TransportClosed,
            f"the transport to WebSocket server {display} was closed on this side; open a new one",
            frozenset(),
        )
    ]
    [handshake] = seen
    assert handshake.path == "/mcp?session=s3cret"
    assert handshake.subprotocols == ("mcp",)
    assert handshake.headers["authorization"] == "Bearer t0ken"
    assert handshake.headers["x-trace"] == "é"


async def test_receive_reads_the_transports_own_inbox(nursery: trio.Nursery) -> None:
    port = await serve_ws(nursery, echo_handler)
    with trio.fail_after(GUARD):
        async with open_websocket_transport(params(f"ws://127.0.0.1:{port}/")) as t:
            await t.send(b'{"n":1}')
            await t.send(b'{"n":2}')
            assert await t.receive() == b'{"n":1}'
            assert await t.receive() == b'{"n":2}'
        async with ws_with_inbox(f"ws://127.0.0.1:{port}/") as (with_sink, _):
            with pytest.raises(RuntimeError, match="go to the sink it was opened with"):
                await with_sink.receive()


async def test_concurrent_sends_arrive_whole(nursery: trio.Nursery) -> None:
    port = await serve_ws(nursery, echo_handler)
    frames = {b'{"n":%d,"pad":"%s"}' % (i, b"x" * (i * 997)) for i in range(40)}
    with trio.fail_after(GUARD):
        async with ws_with_inbox(f"ws://127.0.0.1:{port}/") as (t, inbox):
            async with trio.open_nursery() as tasks:
                for frame in frames:
                    tasks.start_soon(t.send, frame)
            received = await take(inbox, len(frames))
    assert set(received) == frames
    assert len(received) == len(frames)
    assert t.statistics().frames_sent == 40


async def test_the_writer_sends_every_ready_frame_in_one_go_in_order(
    nursery: trio.Nursery,
) -> None:
    port = await serve_ws(nursery, echo_handler)
    frames = [b'{"n":%d}' % i for i in range(200)]
    with trio.fail_after(GUARD):
        async with ws_with_inbox(f"ws://127.0.0.1:{port}/") as (t, inbox):
            await trio.testing.wait_all_tasks_blocked()  # the writer waits for frames
            for number, frame in enumerate(frames):
                t.send_nowait(frame, request_id=number)  # no checkpoint in between
            assert t.statistics().queued == 200
            assert await take(inbox, 200) == frames
            stats = t.statistics()
            assert (stats.write_batches, stats.frames_sent, stats.queued) == (1, 200, 0)
            t.send_nowait(b'{"n":"after"}')
            assert await take(inbox, 1) == [b'{"n":"after"}']
            assert t.statistics().write_batches == 2


async def test_the_outbox_is_bounded_in_bytes(nursery: trio.Nursery) -> None:
    port = await serve_ws(nursery, echo_handler)
    big = b'"' + b"x" * (100 * 1024) + b'"'
    with trio.fail_after(GUARD):
        async with ws_with_inbox(f"ws://127.0.0.1:{port}/") as (t, inbox):
            await trio.testing.wait_all_tasks_blocked()
            t.send_nowait(big, request_id=1)
            t.send_nowait(big, request_id=2)
            with pytest.raises(trio.WouldBlock):
                t.send_nowait(big, request_id=3)  # 256 KiB: no room for a third
            assert t.statistics().queued == 2
            await t.send(big, request_id=3)  # waits for the writer to make room
            assert await take(inbox, 3) == [big, big, big]


async def test_binary_frames_are_put_as_they_are(nursery: trio.Nursery) -> None:
    # A frame is bytes: a binary one goes up unchanged, UTF-8 or not, and the connection goes
    # on; its user parses it (and refuses what is not JSON).
    async def handler(request: trio_websocket.WebSocketRequest) -> None:
        connection = await request.accept(subprotocol="mcp")
        await connection.send_message('{"b":"ü"}'.encode())
        await connection.send_message(b'{"b":"\xff"}')
        await connection.send_message('{"after":1}')
        await until_closed(connection)

    port = await serve_ws(nursery, handler)
    with trio.fail_after(GUARD):
        async with ws_with_inbox(f"ws://127.0.0.1:{port}/") as (t, inbox):
            assert await take(inbox, 3) == ['{"b":"ü"}'.encode(), b'{"b":"\xff"}', b'{"after":1}']
            assert t.statistics().frames_received == 3


async def test_a_text_frame_that_is_not_utf8_ends_the_connection(nursery: trio.Nursery) -> None:
    # RFC 6455 says to fail the connection (code 1007); the frames before it still go up.
    async def handler(stream: trio.SocketStream) -> None:
        await accept_raw(stream)
        await stream.send_all(
            raw_frame(0x1, b'{"n":1}') + raw_frame(0x1, b'{"x":"\xff"}') + raw_frame(0x1, b"{}")
        )
        while await stream.receive_some(4096):
            pass

    port = await serve_tcp(nursery, handler)
    url = f"ws://127.0.0.1:{port}/"
    message = (
        f"WebSocket server {url} closed the connection with code 1007 "
        "(INVALID_FRAME_PAYLOAD_DATA: 'utf-8' codec can't decode byte 0xff in position 6: "
        "invalid start byte)"
    )
    with trio.fail_after(GUARD):
        async with ws_with_inbox(url) as (t, inbox):
            [frame, end] = await take(inbox, 2)
            assert frame == b'{"n":1}'
            assert end_of(end) == (TransportClosed, message, frozenset())
            assert await rest(inbox) == []
            with pytest.raises(TransportClosed, match=re.escape(message)):
                t.send_nowait(b"{}")


async def test_a_message_that_is_not_utf8_is_refused_and_the_transport_stays_usable(
    nursery: trio.Nursery,
) -> None:
    port = await serve_ws(nursery, echo_handler)
    message = (
        f"cannot send a message to WebSocket server ws://127.0.0.1:{port}/ that is not "
        "UTF-8 (invalid byte at offset 6): WebSocket text frames carry UTF-8 JSON"
    )
    with trio.fail_after(GUARD):
        async with ws_with_inbox(f"ws://127.0.0.1:{port}/") as (t, inbox):
            with pytest.raises(LocalProtocolError) as info:
                await t.send(b'{"x":"\xff"}')
            assert str(info.value) == message
            with pytest.raises(LocalProtocolError) as info:
                t.send_nowait(b'{"x":"\xff"}', request_id=1)
            assert str(info.value) == message
            await t.send(b"{}")
            assert await take(inbox, 1) == [b"{}"]


# --------------------------------------------------------------------------- backpressure


async def test_a_full_inbox_stops_the_reader_and_loses_nothing(nursery: trio.Nursery) -> None:
    frames = [b'{"n":%02d,"pad":"%s"}' % (i, b"x" * 1007) for i in range(50)]
    assert {len(frame) for frame in frames} == {1024}
    sent = trio.Event()

    async def handler(request: trio_websocket.WebSocketRequest) -> None:
        connection = await request.accept(subprotocol="mcp")
        for frame in frames:
            await connection.send_message(frame.decode())
        sent.set()
        await until_closed(connection)

    port = await serve_ws(nursery, handler)
    with trio.fail_after(GUARD):
        async with ws_with_inbox(f"ws://127.0.0.1:{port}/", max_bytes=4096) as (t, inbox):
            await sent.wait()
            await trio.testing.wait_all_tasks_blocked()
            held = inbox.statistics()
            # Four frames fill the inbox; the reader waits with the fifth (and the library
            # holds the sixth: it reads the socket no further).
            assert (held.items, held.bytes, held.senders_waiting) == (4, 4096, 1)
            assert t.statistics().frames_received == 5
            await trio.testing.wait_all_tasks_blocked()
            assert t.statistics().frames_received == 5
            assert await take(inbox, 50) == frames
            assert t.statistics().frames_received == 50


async def test_the_end_waits_behind_the_frames_of_a_full_inbox(nursery: trio.Nursery) -> None:
    async def handler(request: trio_websocket.WebSocketRequest) -> None:
        connection = await request.accept(subprotocol="mcp")
        for n in range(10):
            await connection.send_message(f'{{"n":{n}}}')
        await connection.aclose(4000, "bye")

    port = await serve_ws(nursery, handler)
    url = f"ws://127.0.0.1:{port}/"
    with trio.fail_after(GUARD):
        async with ws_with_inbox(url, max_bytes=16) as (_, inbox):
            await trio.testing.wait_all_tasks_blocked()
            assert inbox.statistics().items == 2  # 8 + 8 bytes; the reader waits
            items = await rest(inbox)
    assert items[:10] == [b'{"n":%d}' % n for n in range(10)]
    assert [end_of(item) for item in items[10:]] == [
        (
            TransportClosed,
            f"WebSocket server {url} closed the connection with code 4000 (PRIVATE_RESERVED: bye)",
            frozenset(),
        )
    ]


async def test_the_end_is_put_even_when_nobody_reads_any_more(nursery: trio.Nursery) -> None:
    async def handler(request: trio_websocket.WebSocketRequest) -> None:
        connection = await request.accept(subprotocol="mcp")
        await connection.send_message("{}")
        await until_closed(connection)

    port = await serve_ws(nursery, handler)
    url = f"ws://127.0.0.1:{port}/"
    with trio.fail_after(GUARD):
        async with ws_with_inbox(url) as (t, inbox):
            inbox.close_receiver()
            await trio.testing.wait_all_tasks_blocked()
            with pytest.raises(TransportClosed) as info:
                await t.send(b"{}")
    assert str(info.value) == (
        f"nobody receives the messages of WebSocket server {url} any more; the connection was "
        "given up"
    )


# --------------------------------------------------------------------------- unsent requests


@attrs.define(eq=False)
class Sink:
    """A raw WebSocket server that accepts the handshake, then never reads: a client's big
    message fills the (small) socket buffers and its writer stays stuck in the middle of it.
    :meth:`cut` closes the connection without a close handshake."""

    cut_now: trio.Event = attrs.Factory(trio.Event)
    port: int = 0

    async def start(self, nursery: trio.Nursery) -> Sink:
        self.port = await serve_tcp(nursery, self._handle, receive_buffer=4096)
        return self

    def cut(self) -> None:
        self.cut_now.set()

    async def _handle(self, stream: trio.SocketStream) -> None:
        async with stream:
            await accept_raw(stream)
            await self.cut_now.wait()


#: Larger than what the client's socket and the sink's can hold together.
STUCK = b'"' + b"x" * (8 << 20) + b'"'


async def stuck_writer(t: WebSocketTransport) -> None:
    """Get ``t``'s writer stuck in the middle of request 0, then queue requests 1 and 2 and a
    notification behind it."""
    t.send_nowait(STUCK, request_id=0)
    await trio.testing.wait_all_tasks_blocked()
    t.send_nowait(b'{"id":1}', request_id=1)
    t.send_nowait(b'{"note":1}')
    await t.send(b'{"id":"two"}', request_id="two")
    assert (t.statistics().frames_sent, t.statistics().queued) == (0, 3)


async def test_a_lost_connection_reports_the_requests_that_never_left(
    nursery: trio.Nursery,
) -> None:
    sink = await Sink().start(nursery)
    url = f"ws://127.0.0.1:{sink.port}/"
    with trio.fail_after(GUARD):
        async with ws_with_inbox(url) as (t, inbox):
            await stuck_writer(t)
            sink.cut()
            # Request 0 may have been written in part: its outcome is unknown, so it is not
            # in unsent; 1 and "two" never left.
            assert [end_of(item) for item in await rest(inbox)] == [
                (
                    TransportClosed,
                    f"the connection to WebSocket server {url} was lost without a WebSocket "
                    "close handshake (code 1006): the peer went away or the network failed",
                    frozenset({1, "two"}),
                )
            ]
            assert t.statistics().queued == 0
            with pytest.raises(TransportClosed, match="code 1006"):
                await t.send(b'{"id":3}', request_id=3)


async def test_aclose_reports_the_requests_it_could_not_send_in_time(
    nursery: trio.Nursery,
) -> None:
    sink = await Sink().start(nursery)
    url = f"ws://127.0.0.1:{sink.port}/"
    with trio.fail_after(GUARD):
        async with ws_with_inbox(url, close_timeout=0.2) as (t, inbox):
            await stuck_writer(t)
            started = trio.current_time()
            await t.aclose()
            assert 0.2 <= trio.current_time() - started < 5
            assert [end_of(item) for item in await rest(inbox)] == [
                (
                    TransportClosed,
                    f"the transport to WebSocket server {url} was closed on this side; open a "
                    "new one",
                    frozenset({1, "two"}),
                )
            ]
        sink.cut()


async def test_a_request_sent_after_the_peer_closed_is_reported_unsent(
    nursery: trio.Nursery,
) -> None:
    # The reader waits with the server's second frame (the inbox is full), so the end is not
    # reported yet, but the library has already taken the server's close: the writer finds the
    # connection closed and writes nothing of request 5.
    async def handler(request: trio_websocket.WebSocketRequest) -> None:
        connection = await request.accept(subprotocol="mcp")
        await connection.send_message('{"n":1}')
        await connection.send_message('{"n":2}')
        await connection.aclose()

    port = await serve_ws(nursery, handler)
    url = f"ws://127.0.0.1:{port}/"
    with trio.fail_after(GUARD):
        async with ws_with_inbox(url, max_bytes=8) as (t, inbox):
            await trio.testing.wait_all_tasks_blocked()
            assert (inbox.statistics().items, inbox.statistics().senders_waiting) == (1, 1)
            assert t.statistics().close_code == 1000
            t.send_nowait(b'{"id":5}', request_id=5)
            await trio.testing.wait_all_tasks_blocked()
            items = await rest(inbox)
            assert t.statistics().frames_sent == 0
    assert items[:2] == [b'{"n":1}', b'{"n":2}']
    assert [end_of(item) for item in items[2:]] == [
        (
            TransportClosed,
            f"WebSocket server {url} closed the connection (code 1000, normal closure)",
            frozenset({5}),
        )
    ]


async def test_aclose_sends_what_is_in_the_outbox_first(nursery: trio.Nursery) -> None:
    received: list[str | bytes] = []
    done = trio.Event()

    async def handler(request: trio_websocket.WebSocketRequest) -> None:
        connection = await request.accept(subprotocol="mcp")
        try:
            while True:
                received.append(await connection.get_message())
        except trio_websocket.ConnectionClosed:
            done.set()

    port = await serve_ws(nursery, handler)
    with trio.fail_after(GUARD):
        async with ws_with_inbox(f"ws://127.0.0.1:{port}/") as (t, inbox):
            for n in range(20):
                t.send_nowait(b'{"n":%d}' % n, request_id=n)
        await done.wait()
    assert received == [f'{{"n":{n}}}' for n in range(20)]
    [end] = await rest(inbox)
    assert end_of(end)[2] == frozenset()


async def test_the_server_sides_close_is_bounded_when_the_client_never_reads(
    nursery: trio.Nursery,
) -> None:
    elapsed: list[float] = []
    closed = trio.Event()

    async def handler(request: trio_websocket.WebSocketRequest) -> None:
        async with accept_websocket_transport(request, close_timeout=0.2) as transport:
            transport.send_nowait(STUCK)
            await trio.testing.wait_all_tasks_blocked()  # its writer is stuck
            started = trio.current_time()
            await transport.aclose()
            elapsed.append(trio.current_time() - started)
        closed.set()

    port = await serve_ws(nursery, handler)
    client = trio.socket.socket()
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    await client.connect(("127.0.0.1", port))
    request = (
        "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        "Sec-WebSocket-Protocol: mcp\r\n\r\n"
    )
    with trio.fail_after(GUARD):
        async with trio.SocketStream(client) as stream:
            await stream.send_all(request.encode())
            await closed.wait()
            # The connection was dropped: what the socket holds, then its end.
            while await stream.receive_some(1 << 20):
                pass
    [seconds] = elapsed
    assert 0.2 <= seconds < 5


# --------------------------------------------------------------------------- sizes


async def test_an_oversized_message_is_refused_after_the_ones_before_it(
    nursery: trio.Nursery,
) -> None:
    codes: list[int | None] = []

    async def handler(request: trio_websocket.WebSocketRequest) -> None:
        connection = await request.accept(subprotocol="mcp")
        await connection.send_message('{"n":1}')
        await connection.send_message('{"n":2}')
        await connection.send_message("[" + "1," * 3000 + "1]")
        with pytest.raises(trio_websocket.ConnectionClosed) as info:
            await connection.get_message()
        codes.append(info.value.reason.code if info.value.reason else None)

    port = await serve_ws(nursery, handler)
    url = f"ws://127.0.0.1:{port}/"
    with trio.fail_after(GUARD):
        async with ws_with_inbox(url, max_frame_bytes=4096) as (t, inbox):
            [one, two, end] = await take(inbox, 3)
            assert (one, two) == (b'{"n":1}', b'{"n":2}')
            assert end_of(end) == (
                FrameTooLarge,
                f"WebSocket server {url} sent a message (one WebSocket message) larger than "
                "4096 bytes, so the connection was closed. If the server legitimately sends "
                "bigger messages, raise max_frame_bytes (now 4096) in its config",
                frozenset(),
            )
            assert isinstance(end, ConnectionEnded)
            assert isinstance(end.error, FrameTooLarge)
            assert end.error.limit == 4096
            assert await rest(inbox) == []
            with pytest.raises(TransportClosed) as closed:
                await t.send(b"{}")
            assert str(closed.value) == (
                f"the connection to WebSocket server {url} was given up after it sent a "
                "message over 4096 bytes (max_frame_bytes); reconnect, or raise the limit"
            )
        await trio.testing.wait_all_tasks_blocked()
    assert codes == [1009]


async def test_an_oversized_message_fails_receive_every_time(nursery: trio.Nursery) -> None:
    async def handler(request: trio_websocket.WebSocketRequest) -> None:
        connection = await request.accept(subprotocol="mcp")
        await connection.send_message("[" + "1," * 3000 + "1]")
        await until_closed(connection)

    port = await serve_ws(nursery, handler)
    with trio.fail_after(GUARD):
        async with open_websocket_transport(
            params(f"ws://127.0.0.1:{port}/", max_frame_bytes=4096)
        ) as t:
            with pytest.raises(FrameTooLarge) as first:
                await t.receive()
            with pytest.raises(FrameTooLarge) as again:
                await t.receive()
    assert first.value is again.value
    assert first.value.limit == 4096


async def test_the_limit_counts_utf8_bytes_not_characters(nursery: trio.Nursery) -> None:
    codes: list[int | None] = []

    async def handler(request: trio_websocket.WebSocketRequest) -> None:
        connection = await request.accept(subprotocol="mcp")
        await connection.send_message('"' + "é" * 3000 + '"')  # 3002 characters, 6002 bytes
        with pytest.raises(trio_websocket.ConnectionClosed) as info:
            await connection.get_message()
        codes.append(info.value.reason.code if info.value.reason else None)

    port = await serve_ws(nursery, handler)
    with trio.fail_after(GUARD):
        async with ws_with_inbox(f"ws://127.0.0.1:{port}/", max_frame_bytes=4096) as (_, inbox):
            [end] = await rest(inbox)
            assert isinstance(end, ConnectionEnded)
            assert isinstance(end.error, FrameTooLarge)
            assert end.error.limit == 4096
        await trio.testing.wait_all_tasks_blocked()
    assert codes == [1009]


async def test_a_server_that_refuses_our_message_as_too_big_closes_the_transport(
    nursery: trio.Nursery,
) -> None:
    port = await serve_ws(nursery, echo_handler, max_message_size=100)
    url = f"ws://127.0.0.1:{port}/"
    with trio.fail_after(GUARD):
        async with ws_with_inbox(url) as (t, inbox):
            await t.send(b'"' + b"x" * 200 + b'"', request_id=1)
            items = await rest(inbox)
    assert [end_of(item) for item in items] == [
        (
            TransportClosed,
            f"WebSocket server {url} closed the connection with code 1009 (message too big: "
            "Exceeded maximum message size: 100 bytes): it refused one of our messages as too "
            "large",
            frozenset(),  # it was sent
        )
    ]


# --------------------------------------------------------------------------- endings


@pytest.mark.parametrize(
    ("code", "reason", "expected"),
    [
        (1000, None, "closed the connection (code 1000, normal closure)"),
        (1001, "restarting", "closed the connection with code 1001 (GOING_AWAY: restarting)"),
        (4000, "bye", "closed the connection with code 4000 (PRIVATE_RESERVED: bye)"),
    ],
)
async def test_a_close_by_the_server_says_its_code_and_reason(
    nursery: trio.Nursery, code: int, reason: str | None, expected: str
) -> None:
    async def handler(request: trio_websocket.WebSocketRequest) -> None:
        connection = await request.accept(subprotocol="mcp")
        await connection.send_message('{"last":true}')
        await connection.aclose(code, reason)

    port = await serve_ws(nursery, handler)
    url = f"ws://127.0.0.1:{port}/"
    message = f"WebSocket server {url} {expected}"
    with trio.fail_after(GUARD):
        async with ws_with_inbox(url) as (t, inbox):
            [frame, *ends] = await rest(inbox)
            assert frame == b'{"last":true}'
            assert [end_of(end) for end in ends] == [(TransportClosed, message, frozenset())]
            with pytest.raises(TransportClosed) as sending:
                await t.send(b"{}")
            assert str(sending.value) == message
            assert t.statistics().close_code == code
        async with open_websocket_transport(params(url)) as t:
            assert await t.receive() == b'{"last":true}'
            with pytest.raises(TransportClosed) as info:
                await t.receive()
            assert str(info.value) == message
            with pytest.raises(TransportClosed) as again:
                await t.receive()
            assert str(again.value) == message


async def test_a_dropped_connection_ends_with_code_1006(nursery: trio.Nursery) -> None:
    server_port = await serve_ws(nursery, echo_handler)
    proxy = await Proxy(server_port).start(nursery)
    url = f"ws://127.0.0.1:{proxy.port}/"
    with trio.fail_after(GUARD):
        async with ws_with_inbox(url) as (t, inbox):
            await t.send(b"{}")
            assert await take(inbox, 1) == [b"{}"]
            await trio.testing.wait_all_tasks_blocked()
            proxy.cut()
            items = await rest(inbox)
    assert [end_of(item) for item in items] == [
        (
            TransportClosed,
            f"the connection to WebSocket server {url} was lost without a WebSocket close "
            "handshake (code 1006): the peer went away or the network failed",
            frozenset(),
        )
    ]


async def test_the_server_side_reports_the_clients_close(nursery: trio.Nursery) -> None:
    server_items: list[Inbound] = []
    served = trio.Event()

    async def handler(request: trio_websocket.WebSocketRequest) -> None:
        inbox = open_inbox()
        async with accept_websocket_transport(request, inbox) as transport:
            await transport.send(b'{"hello":1}')
            server_items.extend(await rest(inbox))
        served.set()

    port = await serve_ws(nursery, handler)
    with trio.fail_after(GUARD):
        async with ws_with_inbox(f"ws://127.0.0.1:{port}/") as (t, inbox):
            assert await take(inbox, 1) == [b'{"hello":1}']
            await t.send(b'{"bye":1}')
        await served.wait()
    [frame, end] = server_items
    assert frame == b'{"bye":1}'
    kind, message, unsent = end_of(end)
    assert (kind, unsent) == (TransportClosed, frozenset())
    assert re.fullmatch(
        r"WebSocket client 127\.0\.0\.1:\d+ closed the connection \(code 1000, normal closure\)",
        message,
    )


async def test_aclose_is_idempotent_and_ends_send_and_receive(nursery: trio.Nursery) -> None:
    port = await serve_ws(nursery, echo_handler)
    url = f"ws://127.0.0.1:{port}/"
    closed_message = (
        f"the transport to WebSocket server {url} was closed on this side; open a new one"
    )
    with trio.fail_after(GUARD):
        async with open_websocket_transport(params(url)) as t:
            errors: list[str] = []

            async def waiting_receive() -> None:
                with pytest.raises(TransportClosed) as info:
                    await t.receive()
                errors.append(str(info.value))

            async with trio.open_nursery() as inner:
                inner.start_soon(waiting_receive)
                await trio.testing.wait_all_tasks_blocked()
                await t.aclose()
                await t.aclose()
            assert errors == [closed_message]
            assert t.closed is True
            with pytest.raises(TransportClosed) as info:
                await t.receive()
            assert str(info.value) == closed_message
            with pytest.raises(TransportClosed) as info:
                await t.send(b"{}")
            assert str(info.value) == closed_message
            with pytest.raises(TransportClosed) as info:
                t.send_nowait(b"{}")
            assert str(info.value) == closed_message


async def test_a_cancelled_block_still_sends_its_last_frames_and_the_close_handshake(
    nursery: trio.Nursery,
) -> None:
    # The connection's I/O tasks outlive the cancellation of the block: the queued frame goes
    # out, and the close handshake completes at once instead of waiting for close_timeout.
    received: list[str | bytes] = []
    codes: list[int | None] = []

    async def handler(request: trio_websocket.WebSocketRequest) -> None:
        connection = await request.accept(subprotocol="mcp")
        try:
            while True:
                received.append(await connection.get_message())
        except trio_websocket.ConnectionClosed as closed:
            codes.append(closed.reason.code if closed.reason else None)

    port = await serve_ws(nursery, handler)
    url = f"ws://127.0.0.1:{port}/"
    with trio.fail_after(GUARD):
        with trio.CancelScope() as scope:
            async with ws_with_inbox(url, close_timeout=10) as (t, inbox):
                t.send_nowait(b'{"last":1}', request_id=1)
                scope.cancel()
                started = trio.current_time()
                await trio.sleep_forever()
        assert trio.current_time() - started < 10  # not the close timeout
        await trio.testing.wait_all_tasks_blocked()
    assert received == ['{"last":1}']
    assert codes == [1000]
    [end] = await rest(inbox)
    assert end_of(end)[2] == frozenset()


async def test_aclose_is_bounded_when_the_server_never_answers_the_close(
    nursery: trio.Nursery,
) -> None:
    # With message_queue_size=0 and a handler that never reads, the server's reader is stuck
    # handing over our first message, so it never sees (or answers) our close frame.
    async def handler(request: trio_websocket.WebSocketRequest) -> None:
        await request.accept(subprotocol="mcp")
        await trio.sleep_forever()

    port = await serve_ws(nursery, handler, message_queue_size=0)
    url = f"ws://127.0.0.1:{port}/"
    with trio.fail_after(GUARD):
        async with ws_with_inbox(url, close_timeout=0.3) as (t, inbox):
            await t.send(b"{}", request_id=1)
            await trio.testing.wait_all_tasks_blocked()
            started = trio.current_time()
            with trio.CancelScope() as scope:
                scope.cancel()  # aclose runs to its end even in a cancelled scope
                await t.aclose()
            elapsed = trio.current_time() - started
    assert 0.3 <= elapsed < 5
    [end] = await rest(inbox)
    assert end_of(end)[2] == frozenset()  # request 1 was written


# --------------------------------------------------------------------------- connecting


async def test_a_refused_connection_is_a_connect_error_naming_the_url() -> None:
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()  # nothing listens there any more
    with trio.fail_after(GUARD), pytest.raises(ConnectError) as info:
        async with open_websocket_transport(params(f"ws://127.0.0.1:{port}/mcp")):
            raise AssertionError("connected to nothing")
    assert str(info.value).startswith(
        f"could not connect to WebSocket server ws://127.0.0.1:{port}/mcp: "
    )
    assert isinstance(info.value.__cause__, OSError)


async def test_a_rejected_handshake_is_a_connect_error_with_the_status(
    nursery: trio.Nursery,
) -> None:
    async def handler(request: trio_websocket.WebSocketRequest) -> None:
        await request.reject(403, body=b"forbidden: bad token")

    port = await serve_ws(nursery, handler)
    url = f"ws://127.0.0.1:{port}/mcp"
    with trio.fail_after(GUARD), pytest.raises(ConnectError) as info:
        async with open_websocket_transport(params(url)):
            raise AssertionError("connected although rejected")
    assert str(info.value) == (
        f"WebSocket server {url} rejected the handshake with HTTP status 403: forbidden: bad "
        "token. Check the URL's path and the headers (authorization), and that the server "
        "speaks MCP over WebSocket (subprotocol 'mcp')"
    )
    assert isinstance(info.value.__cause__, trio_websocket.ConnectionRejected)


async def test_a_server_that_does_not_accept_the_subprotocol_is_refused(
    nursery: trio.Nursery,
) -> None:
    closed: list[int | None] = []

    async def handler(request: trio_websocket.WebSocketRequest) -> None:
        connection = await request.accept()  # no subprotocol
        await connection.send_message("{}")
        with pytest.raises(trio_websocket.ConnectionClosed):
            await connection.get_message()
        closed.append(connection.closed.code if connection.closed else None)

    port = await serve_ws(nursery, handler)
    url = f"ws://127.0.0.1:{port}/"
    inbox = open_inbox()
    with trio.fail_after(GUARD):
        with pytest.raises(ConnectError) as info:
            async with open_websocket_transport(params(url), inbox):
                raise AssertionError("connected without the subprotocol")
        await trio.testing.wait_all_tasks_blocked()
    assert str(info.value) == (
        f"WebSocket server {url} accepted the connection without the subprotocol 'mcp' (it "
        "answered None), so it does not speak MCP there; check the URL's path"
    )
    assert closed == [1000]  # closed with the close handshake
    # Nothing reached the sink of a transport that was never opened.
    assert (len(inbox), inbox.closed) == (0, False)


async def test_a_server_that_picks_another_subprotocol_fails_the_handshake(
    nursery: trio.Nursery,
) -> None:
    async def handler(stream: trio.SocketStream) -> None:
        await accept_raw(stream, subprotocol="graphql-ws")
        await stream.receive_some(1)

    port = await serve_tcp(nursery, handler)
    url = f"ws://127.0.0.1:{port}/"
    with trio.fail_after(GUARD), pytest.raises(ConnectError) as info:
        async with open_websocket_transport(params(url)):
            raise AssertionError("connected with another subprotocol")
    assert str(info.value) == (
        f"the WebSocket handshake with {url} failed (unrecognized subprotocol graphql-ws); "
        "check that the URL is a WebSocket MCP endpoint (subprotocol 'mcp')"
    )


async def test_a_plain_http_server_is_a_connect_error(nursery: trio.Nursery) -> None:
    async def handler(stream: trio.SocketStream) -> None:
        await read_request(stream)
        await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello world")
        await stream.receive_some(1)

    port = await serve_tcp(nursery, handler)
    url = f"ws://127.0.0.1:{port}/"
    with trio.fail_after(GUARD), pytest.raises(ConnectError) as info:
        async with open_websocket_transport(params(url)):
            raise AssertionError("connected to a plain HTTP server")
    assert str(info.value).startswith(
        f"WebSocket server {url} rejected the handshake with HTTP status 200: hello world."
    )


async def test_a_connection_closed_during_the_handshake_fails_at_once(
    nursery: trio.Nursery,
) -> None:
    async def handler(stream: trio.SocketStream) -> None:
        await read_request(stream)
        await stream.aclose()

    port = await serve_tcp(nursery, handler)
    url = f"ws://127.0.0.1:{port}/"
    started = trio.current_time()
    with trio.fail_after(GUARD), pytest.raises(ConnectError) as info:
        async with open_websocket_transport(params(url, connect_timeout=60)):
            raise AssertionError("connected to a closed connection")
    assert trio.current_time() - started < 10  # not the 60 s connect timeout
    assert not isinstance(info.value, ConnectTimeout)
    assert str(info.value) == (
        f"WebSocket server {url} closed the connection during the handshake; check that the "
        "URL is a WebSocket endpoint (and ws:// vs wss://)"
    )


async def test_a_silent_server_is_a_connect_timeout(nursery: trio.Nursery) -> None:
    async def handler(stream: trio.SocketStream) -> None:
        await trio.sleep_forever()

    port = await serve_tcp(nursery, handler)
    url = f"ws://127.0.0.1:{port}/"
    started = trio.current_time()
    with trio.fail_after(GUARD), pytest.raises(ConnectTimeout) as info:
        async with open_websocket_transport(params(url, connect_timeout=0.3)):
            raise AssertionError("connected to a silent server")
    assert 0.3 <= trio.current_time() - started < 5
    assert str(info.value) == (
        f"the WebSocket handshake with {url} did not complete within 0.3 s (connect_timeout)"
    )


async def test_the_server_side_refuses_a_client_without_the_mcp_subprotocol(
    nursery: trio.Nursery,
) -> None:
    refusals: list[str] = []

    async def handler(request: trio_websocket.WebSocketRequest) -> None:
        with pytest.raises(ConnectError) as info:
            async with accept_websocket_transport(request):
                raise AssertionError("accepted a client without the subprotocol")
        refusals.append(str(info.value))

    port = await serve_ws(nursery, handler)
    # A raw client: trio-websocket's own client leaves its socket open after a rejection.
    request = (
        "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        "Sec-WebSocket-Protocol: graphql-ws\r\n\r\n"
    )
    response = b""
    with trio.fail_after(GUARD):
        async with await trio.open_tcp_stream("127.0.0.1", port) as stream:
            await stream.send_all(request.encode())
            # trio-websocket keeps the connection open after a rejection: read the whole body
            while not response.endswith(b"'mcp'") and (chunk := await stream.receive_some()):
                response += chunk
        await trio.testing.wait_all_tasks_blocked()
    assert response.startswith(b"HTTP/1.1 400 ")
    assert response.endswith(b"\r\n\r\nthis endpoint needs the WebSocket subprotocol 'mcp'")
    [refusal] = refusals
    assert re.fullmatch(
        r"refused WebSocket client 127\.0\.0\.1:\d+ on /mcp: it did not propose the "
        r"subprotocol 'mcp' \(proposed: graphql-ws\)",
        refusal,
    )


async def test_an_exception_in_the_block_comes_out_as_itself(nursery: trio.Nursery) -> None:
    errors: list[BaseException] = []

    async def handler(request: trio_websocket.WebSocketRequest) -> None:
        with pytest.raises(KeyError) as info:
            async with accept_websocket_transport(request):
                raise KeyError("theirs")
        errors.append(info.value)

    port = await serve_ws(nursery, handler)
    with trio.fail_after(GUARD):
        with pytest.raises(KeyError, match="mine"):
            async with open_websocket_transport(params(f"ws://127.0.0.1:{port}/")):
                raise KeyError("mine")
        await trio.testing.wait_all_tasks_blocked()
    assert [str(error) for error in errors] == ["'theirs'"]


# --------------------------------------------------------------------------- the runtime


def ws_config(server: WsMcpServer, **options: Any) -> RuntimeConfig:
    url = server.url()
    headers = {"Authorization": "Bearer t0ken"}

    def factory(sink: Any) -> Any:
        return open_websocket_transport(WebSocketParameters(url=url, headers=headers), sink)

    ws = ServerConfig(
        name="ws", type=TransportKind.CUSTOM, transport_factory=factory, timeout=GUARD
    )
    retry = RetryPolicy(
        first_connect_delays=(0.05, 0.05), reconnect_initial=0.05, reconnect_max=0.05, jitter=0
    )
    return RuntimeConfig(servers=(ws,), retry=retry, **options)


async def registered(rt: Runtime, name: str) -> None:
    while name not in rt.tools():
        await rt.wait_tools_changed(rt.tools_version)


async def hang(arguments: Mapping[str, Any], ctx: ToolContext) -> str:
    await trio.sleep_forever()
    raise AssertionError("unreachable")


async def test_the_runtime_calls_tools_over_websocket(nursery: trio.Nursery) -> None:
    fake = FakeServer(name="ws", tools=[FakeTool("echo"), FakeTool("greet", result="hello")])
    server = await WsMcpServer(fake).start(nursery)
    with trio.fail_after(GUARD):
        async with open_runtime(ws_config(server)) as rt:
            statuses = await rt.wait_ready()
            assert statuses["ws"].state is ServerState.READY
            assert sorted(rt.tools()) == ["mcp_ws_echo", "mcp_ws_greet"]
            result = await rt.call("mcp_ws_echo", {"b": 2, "a": "é"})
            assert result.text == '{"a":"é","b":2}'
            assert (await rt.call("mcp_ws_greet")).text == "hello"
    assert [method for method, _ in fake.requests] == [
        "server/discover",  # the probe: the (legacy) fake refuses it
        "initialize",
        "tools/list",
        "tools/call",
        "tools/call",
    ]
    [handshake] = server.handshakes
    assert handshake.subprotocols == ("mcp",)
    assert handshake.headers["authorization"] == "Bearer t0ken"
    assert handshake.path == "/mcp"


async def test_a_server_that_drops_mid_call_fails_the_call_and_is_reconnected(
    nursery: trio.Nursery,
) -> None:
    fake = FakeServer(name="ws", tools=[FakeTool("t")], crash_after_calls=1)
    server = await WsMcpServer(fake).start(nursery)
    with trio.fail_after(GUARD):
        async with open_runtime(ws_config(server)) as rt:
            await rt.wait_ready()
            assert (await rt.call("mcp_ws_t")).text == "{}"
            with pytest.raises(ServerDisconnected) as info:
                await rt.call("mcp_ws_t")  # the server closes the connection instead
            assert info.value.sent is True
            await rt.wait_ready()  # the withdrawal, the reconnection, the tools registered
            assert "mcp_ws_t" in rt.tools()
            assert rt.status()["ws"].state is ServerState.READY
            assert (await rt.call("mcp_ws_t")).text == "{}"
    assert fake.served == 2
    assert len(server.handshakes) == 2


async def test_a_network_failure_mid_call_fails_the_call_and_is_reconnected(
    nursery: trio.Nursery,
) -> None:
    called = trio.Event()

    async def slow(arguments: Mapping[str, Any], ctx: ToolContext) -> str:
        called.set()
        return await hang(arguments, ctx)

    fake = FakeServer(name="ws", tools=[FakeTool("slow", handler=slow), FakeTool("t")])
    server = await WsMcpServer(fake).start(nursery)
    proxy = await Proxy(server.port).start(nursery)
    via_proxy = WsMcpServer(fake, port=proxy.port)
    with trio.fail_after(GUARD):
        async with open_runtime(ws_config(via_proxy)) as rt:
            await rt.wait_ready()

            async def cut_when_called() -> None:
                await called.wait()
                proxy.cut()

            nursery.start_soon(cut_when_called)
            with pytest.raises(ServerDisconnected) as info:
                await rt.call("mcp_ws_slow")
            assert info.value.sent is True
            assert "code 1006" in str(info.value)
            await rt.wait_ready()  # the withdrawal, the reconnection, the tools registered
            assert (await rt.call("mcp_ws_t")).text == "{}"
    assert len(server.handshakes) == 2


async def test_a_tls_failure_is_a_connect_error(nursery: trio.Nursery) -> None:
    port = await serve_ws(nursery, echo_handler)  # plain ws: the TLS handshake cannot succeed
    url = f"wss://127.0.0.1:{port}/mcp"
    with trio.fail_after(GUARD), pytest.raises(ConnectError) as info:
        async with open_websocket_transport(params(url, ssl_context=ssl.create_default_context())):
            raise AssertionError("a TLS connection to a plain server")
    assert str(info.value) == (
        f"could not connect to WebSocket server {url}: the server does not speak TLS there "
        "(WRONG_VERSION_NUMBER): check https:// or wss:// against http:// or ws:// in url"
    )
    assert isinstance(info.value.__cause__, trio.BrokenResourceError)
