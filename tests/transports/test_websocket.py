"""The WebSocket transport against our own WebSocket MCP server, on 127.0.0.1.

No SDK ships a WebSocket MCP server, so the tests build one: a trio-websocket server whose
handler accepts the subprotocol ``mcp`` with :func:`accept_websocket_transport` and serves the
connection with ``FakeServer.serve_transport``. Raw TCP servers stand in for peers that break
the handshake, and a TCP proxy that can be cut stands in for a network failure.

Real sockets need the real clock: every test runs under a ``trio.fail_after`` guard, and the
few timing assertions are lower bounds with generous upper bounds.
"""

from __future__ import annotations

import base64
import hashlib
import re
import ssl
from collections.abc import Awaitable, Callable, Mapping
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
    McpTransportConfigError,
    ServerDisconnected,
    TransportClosed,
)
from trio_mcp.transports._base import Transport, TransportInfo
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


# --------------------------------------------------------------------------- servers


async def serve_ws(nursery: trio.Nursery, handler: Handler, **options: Any) -> int:
    """Run a trio-websocket server on 127.0.0.1 in ``nursery``; return its port."""
    server = await nursery.start(
        partial(trio_websocket.serve_websocket, handler, "127.0.0.1", 0, None, **options)
    )
    assert isinstance(server, trio_websocket.WebSocketServer)
    return server.port


async def serve_tcp(nursery: trio.Nursery, handler: StreamHandler) -> int:
    """Run a raw TCP server on 127.0.0.1 in ``nursery``; return its port."""
    listeners = await nursery.start(partial(trio.serve_tcp, handler, 0, host="127.0.0.1"))
    port = listeners[0].socket.getsockname()[1]
    assert isinstance(port, int)
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
        transport = await accept_websocket_transport(request, max_frame_bytes=self.max_frame_bytes)
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


def params(url: str, **options: Any) -> WebSocketParameters:
    return WebSocketParameters(url=url, **options)


# --------------------------------------------------------------------------- parameters


def test_parameters_show_the_url_without_its_query() -> None:
    assert params("ws://example.com/mcp").display_url == "ws://example.com/mcp"
    assert params("ws://example.com").display_url == "ws://example.com/"
    assert params("wss://example.com:443/x").display_url == "wss://example.com/x"
    assert params("ws://example.com:8080/x?token=s3cret").display_url == (
        "ws://example.com:8080/x?..."
    )
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
        params("ws://example.com/", ssl_context=ssl.create_default_context())
    assert info.value.problems == (("ssl_context", "is only used with a wss:// URL"),)


def test_header_values_never_show_in_repr() -> None:
    p = params("ws://example.com/", headers={"Authorization": "Bearer s3cret"})
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
    p = params(f"ws://example.com:{port}/p?{query}")
    assert query not in p.display_url.removeprefix(f"ws://example.com:{port}")
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
    transport = await accept_websocket_transport(request)
    try:
        while True:
            await transport.send(await transport.receive())
    except (TransportClosed, FrameTooLarge):
        return
    finally:
        await transport.aclose()


async def test_messages_go_both_ways_one_per_text_frame(nursery: trio.Nursery) -> None:
    seen: list[Handshake] = []
    port = await serve_ws(nursery, partial(echo_handler, seen=seen))
    url = f"ws://127.0.0.1:{port}/mcp?session=s3cret"
    headers = {"Authorization": "Bearer t0ken", "X-Trace": "é"}
    with trio.fail_after(GUARD):
        async with open_websocket_transport(params(url, headers=headers)) as t:
            assert isinstance(t, Transport)
            assert t.info == TransportInfo(kind="ws", detail=f"ws://127.0.0.1:{port}/mcp?...")
            assert t.subprotocol == MCP_SUBPROTOCOL
            await t.send(b'{"jsonrpc":"2.0","method":"a"}')
            await t.send('{"text":"héllo"}'.encode())
            assert await t.receive() == b'{"jsonrpc":"2.0","method":"a"}'
            assert await t.receive() == '{"text":"héllo"}'.encode()
            stats = t.statistics()
            assert (stats.frames_sent, stats.frames_received) == (2, 2)
            assert stats.bytes_sent == stats.bytes_received == 30 + 17
            assert (stats.closed, stats.close_code) == (False, None)
        assert t.statistics().closed is True
        assert t.statistics().close_code == 1000
    [handshake] = seen
    assert handshake.path == "/mcp?session=s3cret"
    assert handshake.subprotocols == ("mcp",)
    assert handshake.headers["authorization"] == "Bearer t0ken"
    assert handshake.headers["x-trace"] == "é"


async def test_concurrent_sends_arrive_whole(nursery: trio.Nursery) -> None:
    port = await serve_ws(nursery, echo_handler)
    frames = {b'{"n":%d,"pad":"%s"}' % (i, b"x" * (i * 997)) for i in range(40)}
    with trio.fail_after(GUARD):
        async with open_websocket_transport(params(f"ws://127.0.0.1:{port}/")) as t:
            received: set[bytes] = set()

            async def receive_all() -> None:
                for _ in frames:
                    received.add(await t.receive())

            async with trio.open_nursery() as tasks:
                tasks.start_soon(receive_all)
                for frame in frames:
                    tasks.start_soon(t.send, frame)
    assert received == frames
    assert t.statistics().frames_sent == 40


async def test_binary_frames_are_accepted_as_utf8_json(nursery: trio.Nursery) -> None:
    async def handler(request: trio_websocket.WebSocketRequest) -> None:
        connection = await request.accept(subprotocol="mcp")
        await connection.send_message('{"b":"ü"}'.encode())
        await connection.get_message()

    port = await serve_ws(nursery, handler)
    with trio.fail_after(GUARD):
        async with open_websocket_transport(params(f"ws://127.0.0.1:{port}/")) as t:
            assert await t.receive() == '{"b":"ü"}'.encode()


async def test_a_message_that_is_not_utf8_is_refused_and_the_transport_stays_usable(
    nursery: trio.Nursery,
) -> None:
    port = await serve_ws(nursery, echo_handler)
    with trio.fail_after(GUARD):
        async with open_websocket_transport(params(f"ws://127.0.0.1:{port}/")) as t:
            with pytest.raises(LocalProtocolError) as info:
                await t.send(b'{"x":"\xff"}')
            assert str(info.value) == (
                f"cannot send a message to WebSocket server ws://127.0.0.1:{port}/ that is not "
                "UTF-8 (invalid byte at offset 6): WebSocket text frames carry UTF-8 JSON"
            )
            await t.send(b"{}")
            assert await t.receive() == b"{}"


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
        async with open_websocket_transport(params(url, max_frame_bytes=4096)) as t:
            assert await t.receive() == b'{"n":1}'
            assert await t.receive() == b'{"n":2}'
            with pytest.raises(FrameTooLarge) as info:
                await t.receive()
            assert info.value.limit == 4096
            assert str(info.value) == (
                f"WebSocket server {url} sent a message (one WebSocket message) larger than "
                "4096 bytes, so the connection was closed. If the server legitimately sends "
                "bigger messages, raise max_frame_bytes (now 4096) in its config"
            )
            with pytest.raises(TransportClosed) as closed:
                await t.receive()
            assert str(closed.value) == (
                f"the connection to WebSocket server {url} was given up after it sent a "
                "message over 4096 bytes (max_frame_bytes); reconnect, or raise the limit"
            )
            with pytest.raises(TransportClosed):
                await t.send(b"{}")
        await trio.testing.wait_all_tasks_blocked()
    assert codes == [1009]


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
        async with open_websocket_transport(
            params(f"ws://127.0.0.1:{port}/", max_frame_bytes=4096)
        ) as t:
            with pytest.raises(FrameTooLarge) as info:
                await t.receive()
            assert info.value.limit == 4096
        await trio.testing.wait_all_tasks_blocked()
    assert codes == [1009]


async def test_a_server_that_refuses_our_message_as_too_big_closes_the_transport(
    nursery: trio.Nursery,
) -> None:
    port = await serve_ws(nursery, echo_handler, max_message_size=100)
    url = f"ws://127.0.0.1:{port}/"
    with trio.fail_after(GUARD):
        async with open_websocket_transport(params(url)) as t:
            await t.send(b'"' + b"x" * 200 + b'"')
            with pytest.raises(TransportClosed) as info:
                await t.receive()
    assert not isinstance(info.value, FrameTooLarge)
    assert str(info.value) == (
        f"WebSocket server {url} closed the connection with code 1009 (message too big: "
        "Exceeded maximum message size: 100 bytes): it refused one of our messages as too large"
    )


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
    with trio.fail_after(GUARD):
        async with open_websocket_transport(params(url)) as t:
            assert await t.receive() == b'{"last":true}'
            with pytest.raises(TransportClosed) as info:
                await t.receive()
            assert str(info.value) == f"WebSocket server {url} {expected}"
            with pytest.raises(TransportClosed) as again:
                await t.receive()
            assert str(again.value) == str(info.value)
            with pytest.raises(TransportClosed) as sending:
                await t.send(b"{}")
            assert str(sending.value) == f"WebSocket server {url} {expected}"
            assert t.statistics().close_code == code


async def test_a_dropped_connection_ends_receive_with_transport_closed(
    nursery: trio.Nursery,
) -> None:
    server_port = await serve_ws(nursery, echo_handler)
    proxy = await Proxy(server_port).start(nursery)
    url = f"ws://127.0.0.1:{proxy.port}/"
    with trio.fail_after(GUARD):
        async with open_websocket_transport(params(url)) as t:
            await t.send(b"{}")
            assert await t.receive() == b"{}"

            async def cut_soon() -> None:
                await trio.testing.wait_all_tasks_blocked()
                proxy.cut()

            nursery.start_soon(cut_soon)
            with pytest.raises(TransportClosed) as info:
                await t.receive()
    assert str(info.value) == (
        f"the connection to WebSocket server {url} was lost without a WebSocket close "
        "handshake (code 1006): the peer went away or the network failed"
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


async def test_aclose_is_bounded_when_the_server_never_answers_the_close(
    nursery: trio.Nursery,
) -> None:
    # With message_queue_size=0 and a handler that never reads, the server's reader is stuck
    # handing over our first message, so it never sees (or answers) our close frame.
    async def handler(request: trio_websocket.WebSocketRequest) -> None:
        await request.accept(subprotocol="mcp")
        await trio.sleep_forever()

    port = await serve_ws(nursery, handler, message_queue_size=0)
    with trio.fail_after(GUARD):
        async with open_websocket_transport(
            params(f"ws://127.0.0.1:{port}/", close_timeout=0.3)
        ) as t:
            await t.send(b"{}")
            started = trio.current_time()
            with trio.CancelScope() as scope:
                scope.cancel()  # aclose runs to its end even in a cancelled scope
                await t.aclose()
            elapsed = trio.current_time() - started
    assert 0.3 <= elapsed < 5


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
        with pytest.raises(trio_websocket.ConnectionClosed):
            await connection.get_message()
        closed.append(connection.closed.code if connection.closed else None)

    port = await serve_ws(nursery, handler)
    url = f"ws://127.0.0.1:{port}/"
    with trio.fail_after(GUARD):
        with pytest.raises(ConnectError) as info:
            async with open_websocket_transport(params(url)):
                raise AssertionError("connected without the subprotocol")
        await trio.testing.wait_all_tasks_blocked()
    assert str(info.value) == (
        f"WebSocket server {url} accepted the connection without the subprotocol 'mcp' (it "
        "answered None), so it does not speak MCP there; check the URL's path"
    )
    assert closed == [1000]  # closed with the close handshake


async def test_a_server_that_picks_another_subprotocol_fails_the_handshake(
    nursery: trio.Nursery,
) -> None:
    async def handler(stream: trio.SocketStream) -> None:
        headers = await read_request(stream)
        token = accept_token(headers["sec-websocket-key"])
        await stream.send_all(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Accept: " + token.encode() + b"\r\n"
            b"Sec-WebSocket-Protocol: graphql-ws\r\n\r\n"
        )
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
            await accept_websocket_transport(request)
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
    port = await serve_ws(nursery, echo_handler)
    with trio.fail_after(GUARD), pytest.raises(KeyError, match="mine"):
        async with open_websocket_transport(params(f"ws://127.0.0.1:{port}/")):
            raise KeyError("mine")


# --------------------------------------------------------------------------- the runtime


def ws_config(server: WsMcpServer, **options: Any) -> RuntimeConfig:
    url = server.url()
    headers = {"Authorization": "Bearer t0ken"}

    def factory() -> Any:
        return open_websocket_transport(WebSocketParameters(url=url, headers=headers))

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
            await registered(rt, "mcp_ws_t")
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
            await registered(rt, "mcp_ws_t")
            assert (await rt.call("mcp_ws_t")).text == "{}"
    assert len(server.handshakes) == 2


async def test_a_tls_failure_is_a_connect_error(nursery: trio.Nursery) -> None:
    port = await serve_ws(nursery, echo_handler)  # plain ws: the TLS handshake cannot succeed
    url = f"wss://127.0.0.1:{port}/mcp"
    with trio.fail_after(GUARD), pytest.raises(ConnectError) as info:
        async with open_websocket_transport(params(url, ssl_context=ssl.create_default_context())):
            raise AssertionError("a TLS connection to a plain server")
    assert str(info.value).startswith(
        f"the connection to WebSocket server {url} failed during the handshake ("
    )
    assert str(info.value).endswith(
        "; check that the URL is a WebSocket endpoint (and ws:// vs wss://)"
    )
    assert isinstance(info.value.__cause__, trio.BrokenResourceError)
