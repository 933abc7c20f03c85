"""A small HTTP/1.1 server on 127.0.0.1 inside the caller's trio run (h11 over real sockets):
what the fake OAuth world (:mod:`._oauth`) is served with, and what the project's HTTP
transport tests build their fake MCP servers on.

:func:`serve_http` hands every request to an async handler with a :class:`Reply` to answer (a
whole body, or a stream of chunks such as SSE events; or an abrupt close). It records every
request, and can be killed and restarted on the same port (:meth:`HttpServer.kill`,
:meth:`HttpServer.start`). Given an ``ssl_context`` it serves HTTPS (``base`` is then an
``https://`` URL). It is a test server: it trusts its client, and listens on loopback only.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager, suppress
from typing import Any
from urllib.parse import parse_qsl

import attrs
import h11
import trio
import trio.lowlevel

__all__ = [
    "ClientGone",
    "Handler",
    "HttpRequest",
    "HttpServer",
    "Reply",
    "send_tls_alert",
    "serve_http",
    "sse_event",
]

Handler = Callable[["HttpRequest", "Reply"], Awaitable[None]]


class ClientGone(Exception):
    """The client closed the connection while the server was writing to it."""


@attrs.define
class HttpRequest:
    """One request the server received. Header names are lower case. ``connection`` numbers the
    TCP connection it came on (1 for the server's first), to tell whether a client reused one."""

    method: str
    target: str
    headers: dict[str, str]
    body: bytes
    at: float
    connection: int = 0

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]

    @property
    def query(self) -> str:
        return self.target.split("?", 1)[1] if "?" in self.target else ""

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    def json(self) -> Any:
        return json.loads(self.body)

    def form(self) -> dict[str, str]:
        """The body as an ``application/x-www-form-urlencoded`` form."""
        return dict(parse_qsl(self.body.decode()))


def sse_event(
    data: str | None = None,
    *,
    id: str | None = None,
    event: str | None = None,
    retry: int | None = None,
) -> bytes:
    """The bytes of one SSE event (``data`` may hold several lines)."""
    lines = []
    if event is not None:
        lines.append(f"event: {event}")
    if id is not None:
        lines.append(f"id: {id}")
    if retry is not None:
        lines.append(f"retry: {retry}")
    if data is not None:
        lines.extend(f"data: {line}" for line in data.split("\n"))
    return ("\n".join(lines) + "\n\n").encode()


@attrs.define(eq=False)
class Reply:
    """The answer to one request."""

    _conn: h11.Connection
    _stream: trio.abc.Stream
    started: bool = False
    finished: bool = False
    aborted: bool = False
    _lock: trio.StrictFIFOLock = attrs.field(factory=trio.StrictFIFOLock)

    async def _send(self, event: h11.Event) -> None:
        async with self._lock:  # the handler and the test may both write
            if self.aborted:
                raise ClientGone()
            data = self._conn.send(event)
            if not data:
                return
            try:
                await self._stream.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                self.aborted = True
                raise ClientGone() from exc

    async def send(
        self, status: int, body: bytes = b"", *, headers: Iterable[tuple[str, str]] = ()
    ) -> None:
        """A whole response with a Content-Length."""
        all_headers = [*headers, ("content-length", str(len(body)))]
        await self._send(h11.Response(status_code=status, headers=all_headers))
        self.started = True
        if body:
            await self._send(h11.Data(data=body))
        await self._send(h11.EndOfMessage())
        self.finished = True

    async def json(
        self, value: Any, status: int = 200, *, headers: Iterable[tuple[str, str]] = ()
    ) -> None:
        body = json.dumps(value).encode()
        await self.send(status, body, headers=[("content-type", "application/json"), *headers])

    async def start(
        self,
        status: int = 200,
        *,
        content_type: str = "text/event-stream",
        headers: Iterable[tuple[str, str]] = (),
    ) -> None:
        """Start a chunked response (an SSE stream by default)."""
        all_headers = [("content-type", content_type), ("cache-control", "no-cache"), *headers]
        await self._send(h11.Response(status_code=status, headers=all_headers))
        self.started = True

    async def write(self, data: bytes) -> None:
        await self._send(h11.Data(data=data))

    async def event(
        self,
        data: str | None = None,
        *,
        id: str | None = None,
        event: str | None = None,
        retry: int | None = None,
    ) -> None:
        await self.write(sse_event(data, id=id, event=event, retry=retry))

    async def end(self) -> None:
        """End the response cleanly."""
        if not self.finished and not self.aborted:
            self.finished = True  # before the await: another task may end it meanwhile
            await self._send(h11.EndOfMessage())

    async def abort(self) -> None:
        """Close the connection now, in the middle of the response."""
        self.aborted = True
        await self._stream.aclose()


async def _read_request(conn: h11.Connection, stream: trio.abc.Stream) -> HttpRequest | None:
    head: h11.Request | None = None
    body: list[bytes] = []
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            conn.receive_data(bytes(await stream.receive_some(65536)))
        elif isinstance(event, h11.Request):
            head = event
        elif isinstance(event, h11.Data):
            body.append(bytes(event.data))
        elif isinstance(event, h11.EndOfMessage):
            assert head is not None
            headers: dict[str, str] = {}
            for name, value in head.headers:
                key = name.decode().lower()
                text = value.decode()
                headers[key] = f"{headers[key]}, {text}" if key in headers else text
            return HttpRequest(
                method=head.method.decode(),
                target=head.target.decode(),
                headers=headers,
                body=b"".join(body),
                at=trio.current_time(),
            )
        else:  # ConnectionClosed, PAUSED
            return None


@attrs.define(eq=False)
class HttpServer:
    """A running :func:`serve_http` server."""

    handler: Handler
    _nursery: trio.Nursery
    port: int = 0
    requests: list[HttpRequest] = attrs.field(factory=list)
    #: How many TCP connections were accepted.
    connections: int = 0
    #: Serve HTTPS with this context (server side).
    ssl_context: ssl.SSLContext | None = None
    #: TLS handshakes that failed (a client that refused our certificate, or had none).
    tls_failures: int = 0
    _scope: trio.CancelScope | None = None

    @property
    def base(self) -> str:
        scheme = "https" if self.ssl_context is not None else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    def by_method(self, method: str) -> list[HttpRequest]:
        return [r for r in self.requests if r.method == method]

    async def start(self) -> None:
        """Listen (again) on 127.0.0.1, on the same port after a restart."""
        listeners = await trio.open_tcp_listeners(self.port, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        self._scope = trio.CancelScope()
        self._nursery.start_soon(self._serve, listeners, self._scope)

    async def kill(self) -> None:
        """Stop listening and cut every open connection at once (as a crash would)."""
        if self._scope is not None:
            self._scope.cancel()
            self._scope = None
        await trio.lowlevel.checkpoint()

    async def _serve(self, listeners: list[trio.SocketListener], scope: trio.CancelScope) -> None:
        try:
            with scope:
                await trio.serve_listeners(self._connection, listeners)
        finally:
            with trio.CancelScope(shield=True):
                for listener in listeners:
                    await listener.aclose()

    async def _connection(self, raw: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER)
        self.connections += 1
        number = self.connections
        stream: trio.abc.Stream = raw
        try:
            if self.ssl_context is not None:
                secure = trio.SSLStream(raw, self.ssl_context, server_side=True)
                stream = secure
                try:
                    await secure.do_handshake()
                except trio.BrokenResourceError:
                    self.tls_failures += 1
                    await send_tls_alert(secure)
                    raise
            while True:
                request = await _read_request(conn, stream)
                if request is None:
                    return
                request.connection = number
                self.requests.append(request)
                reply = Reply(conn, stream)
                try:
                    await self.handler(request, reply)
                    if not reply.started:
                        await reply.send(500, b"the test handler gave no answer")
                    await reply.end()
                except ClientGone:
                    return
                if reply.aborted or conn.our_state is not h11.DONE:
                    return
                if conn.their_state is not h11.DONE:
                    return
                conn.start_next_cycle()
        except (trio.BrokenResourceError, trio.ClosedResourceError, h11.RemoteProtocolError):
            return
        finally:
            with trio.CancelScope(shield=True):
                await stream.aclose()


async def send_tls_alert(stream: trio.SSLStream[trio.SocketStream]) -> None:
    """Send what OpenSSL prepared when a server-side handshake failed (the alert that says why:
    a client certificate missing or refused) before the connection is closed, as OpenSSL-based
    servers do; trio drops it."""
    alert = stream._outgoing.read()  # trio keeps the TLS records it did not send there
    raw = stream.transport_stream
    with suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        if alert:
            await raw.send_all(alert)
        # Read what the client sent meanwhile before the socket is closed: closing it with
        # unread data would reset the connection, and the client could lose the alert.
        await raw.send_eof()
        with trio.move_on_after(1):
            while await raw.receive_some(65536):
                pass


@asynccontextmanager
async def serve_http(
    handler: Handler, *, ssl_context: ssl.SSLContext | None = None
) -> AsyncIterator[HttpServer]:
    """Serve ``handler`` on 127.0.0.1 (a free port) for the block; HTTPS with ``ssl_context``."""
    async with trio.open_nursery() as nursery:
        server = HttpServer(handler, nursery, ssl_context=ssl_context)
        await server.start()
        try:
            yield server
        finally:
            await server.kill()
            nursery.cancel_scope.cancel()
