"""A small HTTP/1.1 client on h11, for the requests of one transport to one origin: the
*HTTP/1.1 lane* of the Streamable HTTP transport.

httpx's request path (client, auth and redirect machinery, httpcore's pool) costs most of what
an MCP call over HTTP costs the client; the transport needs little of it: one origin, no
redirects, no proxy, a body given as bytes. :class:`H1Pool` does just that, over trio streams:

- a keep-alive pool (at most ``max_connections`` open, at most ``max_keepalive`` kept idle);
  an idle connection is checked before it is reused (readable while idle means the server
  closed it, or sent something it should not have: it is dropped and another one is taken);
- TCP (``trio.open_tcp_stream``), and TLS for ``https`` (``trio.SSLStream`` with the server's
  TLS context, or the default one httpx would use, ALPN ``http/1.1``);
- requests with a bytes body (``Content-Length``) or none; responses with ``Content-Length``,
  chunked or read-until-close bodies, read chunk by chunk (:class:`H1Response`);
- a connection whose response was not read to its end, or that saw an error or a cancellation,
  is closed, never reused;
- the timeouts of :class:`httpx.Timeout` (``connect``, ``read`` between two reads, ``write``,
  ``pool``: the wait for a connection), and the exceptions httpx raises (``ConnectError``,
  ``ConnectTimeout``, ``ReadTimeout``, ``WriteTimeout``, ``PoolTimeout``, ``ReadError``,
  ``WriteError``, ``RemoteProtocolError``), so that the transport maps them as it maps httpx's.

What it does not do (the transport sends those requests through httpx): HTTP/2, proxies,
redirects (a 3xx is an answer like any other), compressed bodies (it asks for none), request
bodies that are not bytes in hand.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from typing import Final, Protocol

import attrs
import h11
import httpx
import trio

__all__ = ["H1Pool", "H1Response", "HttpResponse", "ResponseHeaders"]

#: What one read from a connection asks for.
_READ_SIZE: Final = 65536
#: The ``User-Agent`` of the lane: httpx's, so that a server sees the same client either way.
_USER_AGENT: Final = f"python-httpx/{httpx.__version__}".encode("ascii")
#: Request headers the pool sets itself, whatever the caller's headers say.
_FRAMING: Final = frozenset({b"host", b"content-length", b"transfer-encoding", b"connection"})


class HttpResponse(Protocol):
    """What the HTTP transports read of a response: :class:`httpx.Response` and
    :class:`H1Response` both are one."""

    @property
    def status_code(self) -> int: ...

    @property
    def reason_phrase(self) -> str: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    @property
    def is_success(self) -> bool: ...

    @property
    def url(self) -> httpx.URL: ...

    @property
    def is_closed(self) -> bool: ...

    def aiter_bytes(self, chunk_size: int | None = None) -> AsyncIterator[bytes]: ...

    def aclose(self) -> Awaitable[None]: ...


class ResponseHeaders(Mapping[str, str]):
    """The headers of an :class:`H1Response`: names without regard to case, a repeated header's
    values joined with ``", "`` (as :class:`httpx.Headers` gives them). ``raw``: the headers as
    received (names in lower case), for an :class:`httpx.Headers` when one is needed."""

    __slots__ = ("_values", "raw")

    def __init__(self, raw: list[tuple[bytes, bytes]]) -> None:
        self.raw = raw
        values: dict[str, str] = {}
        for name, value in raw:
            key = name.decode("latin-1")
            text = value.decode("latin-1")
            values[key] = f"{values[key]}, {text}" if key in values else text
        self._values = values

    def __getitem__(self, key: str) -> str:
        return self._values[key.lower()]

    def get(self, key: str, default: str | None = None) -> str | None:  # type: ignore[override]
        return self._values.get(key.lower(), default)

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"ResponseHeaders({sorted(self._values)})"


@attrs.define(eq=False)
class _Connection:
    """One HTTP/1.1 connection of the pool: its stream, the socket under it (to check it while
    idle) and its h11 state."""

    stream: trio.abc.Stream
    socket: trio.socket.SocketType
    state: h11.Connection = attrs.Factory(lambda: h11.Connection(h11.CLIENT))
    #: The server closed its side (h11 may still call the exchange done and reusable).
    ended: bool = False

    def dropped(self) -> bool:
        """Whether the server closed it (or sent something) while it was idle."""
        try:
            return self.socket.is_readable()
        except OSError:
            return True

    async def aclose(self) -> None:
        await trio.aclose_forcefully(self.stream)


@attrs.define(eq=False)
class H1Pool:
    """The connections of one transport to ``origin`` (``http`` or ``https``, host, port); see
    the module docstring. ``timeout``: the default of every request; ``ssl_context``: the
    server's TLS settings (None: httpx's default context, made at the first ``https``
    connection)."""

    origin: httpx.URL
    timeout: httpx.Timeout
    max_connections: int
    max_keepalive: int
    ssl_context: ssl.SSLContext | None = None
    _idle: list[_Connection] = attrs.field(factory=list, init=False)
    _slots: trio.Semaphore = attrs.field(init=False)
    _host_header: bytes = attrs.field(init=False)
    _closed: bool = attrs.field(default=False, init=False)

    def __attrs_post_init__(self) -> None:
        self._slots = trio.Semaphore(self.max_connections)
        host = self.origin.host
        if ":" in host:
            host = f"[{host}]"
        default_port = 443 if self.origin.scheme == "https" else 80
        port = self.origin.port
        self._host_header = (
            host if port is None or port == default_port else f"{host}:{port}"
        ).encode("ascii")

    @property
    def idle(self) -> int:
        """Connections kept open for the next requests."""
        return len(self._idle)

    async def send(
        self,
        method: str,
        url: httpx.URL,
        headers: httpx.Headers,
        content: bytes | None = None,
        *,
        timeout: httpx.Timeout | None = None,
        on_sending: Callable[[], None] | None = None,
    ) -> H1Response:
        """Send one request to ``url`` (of this pool's origin) and return its response once its
        head arrived, with the body not read yet: read it with :meth:`H1Response.aiter_bytes`,
        and close the response (:meth:`H1Response.aclose`) if it is not read to its end.

        ``on_sending()`` is called when the request's first bytes go to a connection: a failure
        or a cancellation before that means the server cannot have seen the request. Raises
        httpx's exceptions (see the module docstring)."""
        if self._closed:
            raise httpx.ConnectError("the HTTP/1.1 connection pool was closed")
        timeout = self.timeout if timeout is None else timeout
        target = url.raw_path
        request_headers = [(b"host", self._host_header)]
        agent = False
        for name, value in headers.raw:
            folded = name.lower()
            if folded in _FRAMING:
                continue  # the pool's own: an httpx.Request (an auth flow's) has them too
            agent = agent or folded == b"user-agent"
            request_headers.append((name, value))
        if content is not None:
            request_headers.append((b"content-length", str(len(content)).encode("ascii")))
        if not agent:
            request_headers.append((b"user-agent", _USER_AGENT))
        await self._take_slot(timeout.pool)
        connection: _Connection | None = None
        try:
            connection = await self._connection(timeout.connect)
            state = connection.state
            try:
                data = state.send(
                    h11.Request(method=method, target=target, headers=request_headers)
                )
                if content:
                    data += state.send(h11.Data(data=content))
                data += state.send(h11.EndOfMessage())
            except h11.LocalProtocolError as exc:
                raise httpx.LocalProtocolError(str(exc)) from exc
            if on_sending is not None:
                on_sending()
            await _write(connection.stream, data, timeout.write)
            event = await _next_event(connection, timeout.read)
            while not isinstance(event, h11.Response):  # 1xx: informational, skipped
                event = await _next_event(connection, timeout.read)
        except BaseException:
            if connection is not None:
                await connection.aclose()
            self._slots.release()
            raise
        return H1Response(
            pool=self,
            connection=connection,
            status_code=event.status_code,
            reason_phrase=event.reason.decode("latin-1"),
            headers=ResponseHeaders(list(event.headers)),
            url=url,
            read_timeout=timeout.read,
        )

    async def aclose(self) -> None:
        """Close the idle connections; a connection in use is closed when its response is."""
        self._closed = True
        idle, self._idle = self._idle, []
        for connection in idle:
            await connection.aclose()

    async def _take_slot(self, limit: float | None) -> None:
        slots = self._slots
        if slots.value:
            # A free slot, taken without a timer (a cancel scope costs microseconds); the
            # request's own I/O right after it is the checkpoint.
            slots.acquire_nowait()
            return
        if limit is None:
            await self._slots.acquire()
            return
        with trio.move_on_after(limit):
            await self._slots.acquire()
            return
        raise httpx.PoolTimeout(f"no connection to {self.origin} was free within {limit:g} s")

    async def _connection(self, connect_timeout: float | None) -> _Connection:
        """An idle connection still open, or a new one."""
        while self._idle:
            connection = self._idle.pop()
            if not connection.dropped():
                return connection
            await connection.aclose()
        return await self._connect(connect_timeout)

    async def _connect(self, limit: float | None) -> _Connection:
        host = self.origin.host
        port = self.origin.port or (443 if self.origin.scheme == "https" else 80)
        with trio.move_on_after(limit if limit is not None else float("inf")):
            try:
                tcp = await trio.open_tcp_stream(host, port)
            except OSError as exc:
                raise httpx.ConnectError(str(exc) or type(exc).__name__) from exc
            if self.origin.scheme != "https":
                return _Connection(stream=tcp, socket=tcp.socket)
            try:
                stream = trio.SSLStream(
                    tcp, self._tls(), server_hostname=host, https_compatible=True
                )
                await stream.do_handshake()
            except BaseException as exc:
                await trio.aclose_forcefully(tcp)
                if isinstance(exc, trio.BrokenResourceError | OSError):
                    raise httpx.ConnectError(_said(exc)) from exc
                raise
            return _Connection(stream=stream, socket=tcp.socket)
        raise httpx.ConnectTimeout(f"connecting to {self.origin} took over {limit:g} s")

    def _tls(self) -> ssl.SSLContext:
        if self.ssl_context is None:
            self.ssl_context = httpx.create_ssl_context()
        self.ssl_context.set_alpn_protocols(["http/1.1"])
        return self.ssl_context

    def _release(self, connection: _Connection | None) -> None:
        """A response ended: its connection goes back to the pool (``connection``: read to its
        end and reusable) or was closed (None)."""
        self._slots.release()
        if connection is None:
            return
        connection.state.start_next_cycle()
        if self._closed or len(self._idle) >= self.max_keepalive:
            # Closing a socket stream needs no wait: close it now, without a checkpoint.
            _close_now(connection)
            return
        self._idle.append(connection)


def _close_now(connection: _Connection) -> None:
    connection.socket.close()


def _said(exc: BaseException) -> str:
    cause = exc.__cause__ or exc
    text = str(cause)
    return f"{type(cause).__name__}: {text}" if text else type(cause).__name__


async def _write(stream: trio.abc.Stream, data: bytes, limit: float | None) -> None:
    with trio.move_on_after(limit if limit is not None else float("inf")):
        try:
            await stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            raise httpx.WriteError(_said(exc)) from exc
        return
    raise httpx.WriteTimeout(f"sending the request took over {limit:g} s")


async def _receive(stream: trio.abc.Stream, limit: float | None) -> bytes:
    with trio.move_on_after(limit if limit is not None else float("inf")):
        try:
            data = await stream.receive_some(_READ_SIZE)
            return data if type(data) is bytes else bytes(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            raise httpx.ReadError(_said(exc)) from exc
    raise httpx.ReadTimeout(f"the server sent nothing for {limit:g} s")


async def _next_event(connection: _Connection, limit: float | None) -> h11.Event:
    """The next h11 event of ``connection``'s answer head, reading when it needs data."""
    state = connection.state
    while True:
        try:
            event = state.next_event()
        except h11.RemoteProtocolError as exc:
            raise httpx.RemoteProtocolError(str(exc)) from exc
        if isinstance(event, h11.Response | h11.InformationalResponse):
            return event
        if event is not h11.NEED_DATA:
            raise httpx.RemoteProtocolError(f"the server sent {event!r} instead of an answer")
        data = await _receive(connection.stream, limit)
        if not data:
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.")
        try:
            state.receive_data(data)
        except h11.RemoteProtocolError as exc:  # pragma: no cover - h11 defers it
            raise httpx.RemoteProtocolError(str(exc)) from exc


@attrs.define(eq=False)
class H1Response:
    """The answer to a request of :meth:`H1Pool.send`: its head, and its body read chunk by
    chunk with :meth:`aiter_bytes` (once). The connection goes back to the pool when the body
    was read to its end; :meth:`aclose` before that closes the connection."""

    _pool: H1Pool = attrs.field(alias="pool")
    _connection: _Connection | None = attrs.field(alias="connection")
    status_code: int
    reason_phrase: str
    headers: ResponseHeaders
    url: httpx.URL
    _read_timeout: float | None = attrs.field(alias="read_timeout")
    _ended: bool = attrs.field(default=False, init=False)

    @property
    def is_success(self) -> bool:
        return 200 <= self.status_code < 300

    @property
    def is_closed(self) -> bool:
        return self._connection is None

    def aiter_bytes(self, chunk_size: int | None = None) -> AsyncIterator[bytes]:
        """The body's chunks as they arrive (what the reads so far gave, joined); ``chunk_size`` is
        accepted for :class:`HttpResponse` and ignored."""
        return _BodyChunks(self)

    async def aclose(self) -> None:
        """Close the response: a connection whose body was not read to its end is closed."""
        connection, self._connection = self._connection, None
        if connection is None:
            await trio.lowlevel.checkpoint()
            return
        self._pool._release(None)
        await connection.aclose()

    async def _next_chunk(self) -> bytes | None:
        """The next part of the body (what is there without waiting, or else what the next read
        brings), None past its end. The connection goes back to the pool at the end."""
        connection = self._connection
        if connection is None:
            if self._ended:
                return None
            raise httpx.StreamClosed()
        state = connection.state
        parts: list[bytes] = []
        try:
            while True:
                try:
                    event = state.next_event()
                except h11.RemoteProtocolError as exc:
                    raise httpx.RemoteProtocolError(str(exc)) from exc
                if event is h11.NEED_DATA:
                    if parts:
                        return b"".join(parts)
                    data = await _receive(connection.stream, self._read_timeout)
                    if not data:
                        connection.ended = True  # a body that ends with the connection
                    try:
                        state.receive_data(data)
                    except h11.RemoteProtocolError as exc:  # pragma: no cover - h11 defers it
                        raise httpx.RemoteProtocolError(str(exc)) from exc
                elif isinstance(event, h11.Data):
                    parts.append(bytes(event.data))
                elif isinstance(event, h11.EndOfMessage):
                    self._end(connection)
                    return b"".join(parts) if parts else None
                else:
                    raise httpx.RemoteProtocolError(
                        f"the server sent {type(event).__name__} inside an answer's body"
                    )
        except BaseException:
            await self.aclose()
            raise

    def _end(self, connection: _Connection) -> None:
        self._connection = None
        self._ended = True
        state = connection.state
        if state.our_state is h11.DONE and state.their_state is h11.DONE and not connection.ended:
            self._pool._release(connection)
        else:
            self._pool._release(None)
            _close_now(connection)


class _BodyChunks:
    """The iterator of :meth:`H1Response.aiter_bytes` (a class, not an async generator: one
    left suspended by a cancellation would be finalized by the garbage collector)."""

    __slots__ = ("_done", "_response")

    def __init__(self, response: H1Response) -> None:
        self._response = response
        self._done = False

    def __aiter__(self) -> _BodyChunks:
        return self

    async def __anext__(self) -> bytes:
        if self._done:
            raise StopAsyncIteration
        chunk = await self._response._next_chunk()
        if chunk is None:
            self._done = True
            raise StopAsyncIteration
        return chunk
