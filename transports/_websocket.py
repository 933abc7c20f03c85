"""The WebSocket transport (``type: ws``): one JSON-RPC message per WebSocket text frame.

``async with open_websocket_transport(WebSocketParameters(url="ws://host:port/mcp"), sink) as t:``
opens a TCP (or TLS, for ``wss://``) connection, performs the WebSocket handshake with the
subprotocol ``mcp`` and the configured headers, and yields a :class:`WebSocketTransport`; leaving
the block closes it with the WebSocket close handshake, bounded by ``close_timeout``.

WebSocket is not one of the transports of the MCP specification; this one follows what the
deployed WebSocket MCP peers do (the TypeScript SDK's client transport): the subprotocol
``mcp``, and each message alone in one text frame, without a line terminator.

The transport is an actor (see :mod:`trio_mcp.transports._base`): its reader task puts every
message the peer sends into the sink (a channel bounded in bytes; the reader waits while it is
full, and the peer is not read meanwhile), and its writer task sends what
:meth:`~WebSocketTransport.send` and :meth:`~WebSocketTransport.send_nowait` put into its
outbox, every frame ready at once, in order. Without a sink the transport makes an inbox of its
own and :meth:`~WebSocketTransport.receive` reads it.

Failures, all of them ours (:mod:`trio_mcp.protocol._errors`):

- connecting: a refused or unreachable address, a TLS failure, a handshake the server rejects
  (any HTTP status but 101), a server that does not accept the subprotocol ``mcp`` or answers
  something that is not a WebSocket handshake, or a connection closed during the handshake all
  raise :class:`ConnectError` naming the URL; no handshake within ``connect_timeout`` raises
  :class:`ConnectTimeout`. A handshake answered 429 with ``Retry-After`` is tried again after
  that wait, while the waits fit in ``max_retry_after`` and ``connect_timeout``;
- the end of the connection is the last item put into the sink, a
  :class:`~trio_mcp.transports._base.ConnectionEnded` whose error is a :class:`TransportClosed`
  once the peer closed the connection (the message says the close code and reason), the
  connection was lost without a close handshake (code 1006), or :meth:`~WebSocketTransport.aclose`
  closed it; or a :class:`FrameTooLarge` for a message over ``max_frame_bytes`` (the connection
  is given up, and closed with code 1009). A text frame that is not UTF-8 ends the connection
  too (the WebSocket library fails it with code 1007, as RFC 6455 says); a binary frame is put
  as it is, UTF-8 or not: a frame is bytes, and its user parses it (and refuses what is not
  JSON). ``ConnectionEnded.unsent`` holds the ids of the requests that never left the outbox;
- sending: :class:`LocalProtocolError` for a message that is not UTF-8 (text frames carry
  UTF-8), :class:`TransportClosed` once the transport was closed or the connection ended.

The server side: :func:`accept_websocket_transport` accepts a handshake received by
``trio_websocket.serve_websocket`` and runs the same transport over the connection, so that a
WebSocket MCP server (in tests: ``FakeServer.serve_transport``) can serve it.

TLS and proxies: ``wss://`` verifies the server's certificate against the default trust store,
or against ``ca_bundle``, and shows ``client_cert`` to a server that asks for one; a ``proxy``
(``http://[user:password@]host:port``) carries the connection in a ``CONNECT`` tunnel, for
``ws://`` and ``wss://`` alike. A refused certificate or proxy is a :class:`ConnectError` naming
the setting to change.

Limits: the underlying library caps a message by its length in characters, and this transport
caps it by its length in UTF-8 bytes, so memory stays bounded by about 4 x ``max_frame_bytes``
for a message of 4-byte characters. Each frame is written with its own write to the socket (the
library offers no way to write several messages at once).
"""

from __future__ import annotations

import logging
import math
import re
import ssl
import urllib.parse
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from types import MappingProxyType
from typing import Any, Final, NoReturn, TypeAlias, cast

import attrs
import h11
import trio
import trio_websocket
import wsproto.utilities

from ..protocol._errors import (
    ConnectError,
    ConnectTimeout,
    FrameTooLarge,
    LocalProtocolError,
    McpError,
    McpTransportConfigError,
    TransportClosed,
)
from ..protocol._framing import DEFAULT_MAX_FRAME_BYTES
from ..protocol._jsonrpc import RequestId
from . import _retry
from ._base import (
    ConnectionEnded,
    FrameSink,
    Inbound,
    InboxReader,
    TransportInfo,
    collapse_exception_group,
    open_inbox,
)
from ._channel import DEFAULT_MAILBOX_BYTES, ByteChannel
from ._proxy import open_tunnel, proxy_problem
from ._redact import install_log_redaction, redact_url
from ._retry import retry_after_seconds, too_long_to_wait
from ._tls import (
    TLS_KEYS,
    plaintext_problem,
    tls_context,
    tls_failure_hint,
    tls_refusal_hint,
    warn_plaintext,
)

__all__ = [
    "MCP_SUBPROTOCOL",
    "WebSocketParameters",
    "WebSocketStatistics",
    "WebSocketTransport",
    "accept_websocket_transport",
    "open_websocket_transport",
]

logger = logging.getLogger("trio_mcp.transports.websocket")

#: The WebSocket subprotocol an MCP connection is opened with (``Sec-WebSocket-Protocol``).
MCP_SUBPROTOCOL: Final = "mcp"

#: Bytes asked for per read of the socket.
_READ_CHUNK: Final = 65536
#: Headers the WebSocket handshake writes itself: a configured one would duplicate them.
_RESERVED_HEADERS: Final = frozenset(
    {
        "connection",
        "content-length",
        "host",
        "sec-websocket-accept",
        "sec-websocket-extensions",
        "sec-websocket-key",
        "sec-websocket-protocol",
        "sec-websocket-version",
        "transfer-encoding",
        "upgrade",
    }
)
_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# How trio-websocket words the close reason when a message passes its size limit.
_TOO_BIG_REASON: Final = re.compile(r"Exceeded maximum message size: (\d+) bytes")
_CLOSE_TOO_BIG: Final = 1009
_CLOSE_NORMAL: Final = 1000
_CLOSE_ABNORMAL: Final = 1006


# --------------------------------------------------------------------------- parameters


def _to_headers(value: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(value))


def _redact_headers(value: Mapping[str, str]) -> str:
    return "{" + ", ".join(f"{name!r}: '***'" for name in value) + "}"


def _bad_seconds(value: object, *, allow_zero: bool) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return True
    return not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero)


@attrs.frozen(kw_only=True)
class _Target:
    """Where a URL leads: what to connect to and what to send in the handshake."""

    host: str
    port: int
    resource: str
    secure: bool
    host_header: str
    display: str


def _parse_url(url: str) -> tuple[_Target | None, str | None]:
    """The target of ``url``, or why it is not a usable WebSocket URL."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return None, f"is not a valid URL ({exc})"
    if parts.scheme not in ("ws", "wss"):
        return None, f"must start with ws:// or wss://, got scheme {parts.scheme or '(none)'!r}"
    if parts.username is not None or parts.password is not None:
        return None, (
            "must not hold user:password@; send credentials in headers (Authorization) instead"
        )
    host = parts.hostname
    if not host:
        return None, "has no host"
    secure = parts.scheme == "wss"
    default_port = 443 if secure else 80
    port = default_port if port is None else port
    bracketed = f"[{host}]" if ":" in host else host
    host_header = bracketed if port == default_port else f"{bracketed}:{port}"
    path = parts.path or "/"
    resource = f"{path}?{parts.query}" if parts.query else path
    # The query may hold a token: it is sent, but never shown in logs or messages.
    display = f"{parts.scheme}://{host_header}{path}" + ("?..." if parts.query else "")
    target = _Target(
        host=host,
        port=port,
        resource=resource,
        secure=secure,
        host_header=host_header,
        display=display,
    )
    return target, None


@attrs.frozen(kw_only=True)
class WebSocketParameters:
    """How to reach one WebSocket MCP server.

    - ``url``: ``ws://`` or ``wss://``, with the path (and query) the server serves MCP on.
      Credentials go in ``headers``, never in the URL.
    - ``headers``: sent with the handshake request (``Authorization``, ``Origin``...). Their
      values never appear in ``repr()``, logs or error messages. The handshake's own headers
      (``Host``, ``Upgrade``, ``Sec-WebSocket-*``...) cannot be set.
    - ``max_frame_bytes``: the largest message accepted from the server, in UTF-8 bytes
      (default 16 MiB).
    - ``connect_timeout``: seconds for the TCP connection, TLS and the WebSocket handshake.
    - ``close_timeout``: seconds :meth:`WebSocketTransport.aclose` waits for the server to
      answer the close handshake before it drops the connection.
    - ``ssl_context``: for ``wss://`` (default: the system's trusted certificates).
    - ``ca_bundle``, ``client_cert``, ``client_key``: instead of ``ssl_context``, the PEM file of
      the CA certificates the server's certificate must chain to (instead of the system's), and
      the certificate (with its unencrypted key, in the same file or in ``client_key``) shown to
      a server that asks for one. ``wss://`` only; the files are loaded when the parameters are
      built.
    - ``proxy``: ``http://[user:password@]host:port`` of an HTTP proxy that carries the
      connection (``CONNECT``). ``repr()`` hides its password.
    - ``max_retry_after``: a handshake answered ``429 Too Many Requests`` with ``Retry-After``
      is tried again after the wait it asks for, as long as the waits add up to no more than
      this (seconds; 0: never wait) and fit in ``connect_timeout``; a longer wait fails the
      connection at once, saying so.
    - ``allow_insecure_http``: a plain ``ws://`` URL to another machine than this one is refused
      without it (its traffic is not encrypted); to a loopback address it is allowed anyway.
      Opening a plain ``ws://`` connection logs a warning either way.

    Raises :class:`McpTransportConfigError` listing every invalid field.
    """

    url: str
    headers: Mapping[str, str] = attrs.field(
        default=MappingProxyType({}), converter=_to_headers, repr=_redact_headers, hash=False
    )
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    connect_timeout: float = 60.0
    close_timeout: float = 2.0
    ssl_context: ssl.SSLContext | None = attrs.field(default=None, eq=False, repr=False)
    allow_insecure_http: bool = False
    ca_bundle: str | None = None
    client_cert: str | None = None
    client_key: str | None = None
    proxy: str | None = attrs.field(
        default=None, repr=lambda value: repr(None if value is None else redact_url(value))
    )
    max_retry_after: float = _retry.DEFAULT_MAX_RETRY_AFTER
    _tls: ssl.SSLContext | None = attrs.field(init=False, repr=False, eq=False, hash=False)
    _target: _Target = attrs.field(init=False, repr=False, eq=False, hash=False)

    def __attrs_post_init__(self) -> None:
        problems: list[tuple[str, str]] = []
        target: _Target | None = None
        if not isinstance(self.url, str) or not self.url:
            problems.append(("url", "must be a non-empty ws:// or wss:// URL"))
        else:
            target, why = _parse_url(self.url)
            if why is not None:
                problems.append(("url", why))
            elif target is not None and (
                plaintext := plaintext_problem(
                    "wss" if target.secure else "ws",
                    target.host,
                    allow=self.allow_insecure_http is True,
                )
            ):
                problems.append(("url", plaintext))
        flag: object = self.allow_insecure_http
        if not isinstance(flag, bool):
            problems.append(("allow_insecure_http", "must be True or False"))
        for name, value in self.headers.items():
            if not isinstance(name, str) or not _TOKEN.fullmatch(name):
                problems.append((f"headers[{name!r}]", "a header name must be an HTTP token"))
            elif name.lower() in _RESERVED_HEADERS:
                problems.append((f"headers[{name!r}]", "is set by the WebSocket handshake itself"))
            elif not isinstance(value, str) or any(c in value for c in "\r\n\0"):
                problems.append(
                    (f"headers[{name!r}]", "the value must be a string without CR, LF or NUL")
                )
        size = self.max_frame_bytes
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            problems.append(("max_frame_bytes", f"must be a positive integer, got {size!r}"))
        if _bad_seconds(self.connect_timeout, allow_zero=False):
            problems.append(
                (
                    "connect_timeout",
                    f"must be a finite number of seconds > 0, got {self.connect_timeout!r}",
                )
            )
        if _bad_seconds(self.close_timeout, allow_zero=True):
            problems.append(
                (
                    "close_timeout",
                    f"must be a finite number of seconds >= 0, got {self.close_timeout!r}",
                )
            )
        context: object = self.ssl_context
        if context is not None and not isinstance(context, ssl.SSLContext):
            problems.append(("ssl_context", "must be an ssl.SSLContext or None"))
        elif context is not None and target is not None and not target.secure:
            problems.append(("ssl_context", "is only used with a wss:// URL"))
        for key in TLS_KEYS:
            path: object = getattr(self, key)
            if path is None:
                continue
            if not isinstance(path, str) or not path:
                problems.append((key, "must be the path of a PEM file, or None"))
            elif context is not None:
                problems.append((key, "give either ssl_context or the TLS files, not both"))
            elif target is not None and not target.secure:
                problems.append((key, "is only used with a wss:// URL"))
        if self.proxy is not None and (why := proxy_problem(self.proxy)) is not None:
            problems.append(("proxy", why))
        if _bad_seconds(self.max_retry_after, allow_zero=True):
            problems.append(
                (
                    "max_retry_after",
                    f"must be a finite number of seconds >= 0, got {self.max_retry_after!r}",
                )
            )
        if problems:
            raise McpTransportConfigError(
                "invalid WebSocket server settings: "
                + "; ".join(f"{key}: {message}" for key, message in problems),
                problems=tuple(problems),
            )
        assert target is not None
        object.__setattr__(self, "_target", target)
        try:
            files = tls_context(
                ca_bundle=self.ca_bundle, client_cert=self.client_cert, client_key=self.client_key
            )
        except McpTransportConfigError as exc:
            raise McpTransportConfigError(
                f"invalid WebSocket server settings: {exc}", problems=exc.problems
            ) from None
        object.__setattr__(self, "_tls", files if files is not None else self.ssl_context)

    @property
    def display_url(self) -> str:
        """The URL as messages and logs show it: without its query (which may hold a token)."""
        return self._target.display


# --------------------------------------------------------------------------- transport


@attrs.frozen(kw_only=True)
class WebSocketStatistics:
    """A snapshot of a :class:`WebSocketTransport`.

    ``frames_sent`` / ``frames_received`` count messages (written to the connection; read from
    it, the one waiting for room in the sink included), ``bytes_sent`` / ``bytes_received`` their
    payload bytes (the WebSocket framing not included). ``write_batches``: how many times the
    writer woke up and wrote every frame that was ready; ``queued``: frames waiting in the
    outbox. ``close_code`` and ``close_reason`` say how the connection was closed, once it is
    (``None`` before).
    """

    subprotocol: str | None
    frames_sent: int
    frames_received: int
    bytes_sent: int
    bytes_received: int
    write_batches: int
    queued: int
    closed: bool
    close_code: int | None
    close_reason: str | None


#: What waits in the outbox: the message as text, the id of the request it holds, its size.
_Outgoing: TypeAlias = tuple[str, RequestId | None, int]


@attrs.define(eq=False)
class WebSocketTransport:
    """One WebSocket connection carrying MCP messages, one per text frame. Get one from
    :func:`open_websocket_transport` (client) or :func:`accept_websocket_transport` (server);
    see :class:`trio_mcp.transports.Transport` for the contract.

    Two tasks of its own run the connection: the reader puts every message the peer sends into
    the sink, in order (binary frames too, as they are: a frame is bytes, its user parses it),
    waiting while the sink is full (the peer is then not read); the writer takes every frame
    ready in the outbox and sends each as one text frame, in order. The end of the connection
    is the last item put: :class:`~trio_mcp.transports._base.ConnectionEnded`, then the sink is
    closed.
    """

    _connection: trio_websocket.WebSocketConnection
    _info: TransportInfo
    #: Who is at the other end, for messages: "WebSocket server ws://..." or "... client ...".
    _peer: str
    _sink: FrameSink
    #: The transport's own inbox, when it was opened without a sink (read by :meth:`receive`).
    _own_inbox: ByteChannel[Inbound] | None = None
    _max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    _close_timeout: float = 2.0
    #: The byte stream under the connection, closed last by :meth:`aclose` (client side).
    _stream: trio.abc.AsyncResource | None = None
    _outbox: ByteChannel[_Outgoing] = attrs.field(
        factory=lambda: ByteChannel[_Outgoing](max_bytes=DEFAULT_MAILBOX_BYTES), init=False
    )
    _inbox_reader: InboxReader | None = attrs.field(default=None, init=False)
    #: The reader and the writer run in this scope; :meth:`aclose` cancels it.
    _tasks: trio.CancelScope = attrs.field(factory=trio.CancelScope, init=False)
    _started: bool = attrs.field(default=False, init=False)
    _tasks_done: trio.Event = attrs.field(factory=trio.Event, init=False)
    _writer_done: trio.Event = attrs.field(factory=trio.Event, init=False)
    _close_done: trio.Event = attrs.field(factory=trio.Event, init=False)
    _closing: bool = attrs.field(default=False, init=False)
    #: The end of the connection, decided once (by the reader, or by :meth:`aclose`).
    _ended: ConnectionEnded | None = attrs.field(default=None, init=False)
    _sink_closed: bool = attrs.field(default=False, init=False)
    #: Requests the writer took from the outbox but could not write at all.
    _unwritten: list[RequestId] = attrs.field(factory=list, init=False)
    _close_code: int = attrs.field(default=_CLOSE_NORMAL, init=False)
    _close_text: str | None = attrs.field(default=None, init=False)
    _frames_sent: int = attrs.field(default=0, init=False)
    _frames_received: int = attrs.field(default=0, init=False)
    _bytes_sent: int = attrs.field(default=0, init=False)
    _bytes_received: int = attrs.field(default=0, init=False)
    _write_batches: int = attrs.field(default=0, init=False)

    def __attrs_post_init__(self) -> None:
        if self._own_inbox is not None:
            self._inbox_reader = InboxReader(self._own_inbox)

    # ------------------------------------------------------------------ public API

    @property
    def info(self) -> TransportInfo:
        """``ws`` and the URL (client side; without its query) or the client's address."""
        return self._info

    @property
    def subprotocol(self) -> str | None:
        """The subprotocol agreed in the handshake (``"mcp"``)."""
        return self._connection.subprotocol

    @property
    def closed(self) -> bool:
        """Whether :meth:`aclose` was called."""
        return self._closing

    def statistics(self) -> WebSocketStatistics:
        """A snapshot of counters and state (see :class:`WebSocketStatistics`). Never raises."""
        reason = self._connection.closed
        return WebSocketStatistics(
            subprotocol=self._connection.subprotocol,
            frames_sent=self._frames_sent,
            frames_received=self._frames_received,
            bytes_sent=self._bytes_sent,
            bytes_received=self._bytes_received,
            write_batches=self._write_batches,
            queued=len(self._outbox),
            closed=self._closing,
            close_code=None if reason is None else reason.code,
            close_reason=None if reason is None else reason.reason,
        )

    def send_nowait(self, frame: bytes, request_id: RequestId | None = None) -> None:
        """Put one message into the outbox now (the writer sends it as one text frame), or
        raise ``trio.WouldBlock`` when the outbox is full. ``request_id``: the id of the
        request it holds, if it is one (see ``ConnectionEnded.unsent``).

        Raises :class:`LocalProtocolError` if ``frame`` is not UTF-8, and
        :class:`TransportClosed` once the transport was closed or the connection ended.
        """
        item = self._outgoing(frame, request_id)
        try:
            self._outbox.send_nowait(item, item[2])
        except trio.ClosedResourceError:  # closed by aclose() or by the end
            raise TransportClosed(self._refusal()) from None

    async def send(self, frame: bytes, request_id: RequestId | None = None) -> None:
        """:meth:`send_nowait`, waiting for room in the outbox. Raises like it (also when the
        connection ends while waiting: the frame was not sent)."""
        item = self._outgoing(frame, request_id)
        if self._closing or self._ended is not None:
            await trio.lowlevel.checkpoint()  # a checkpoint, also when refused at once
            raise TransportClosed(self._refusal())
        try:
            await self._outbox.send(item, item[2])
        except trio.ClosedResourceError:  # closed by aclose() or by the end
            raise TransportClosed(self._refusal()) from None

    async def receive(self) -> bytes:
        """For a transport opened without a sink: the next message, in order, as bytes.

        Raises :class:`FrameTooLarge` if the peer sent a message over ``max_frame_bytes`` (the
        connection is given up), and :class:`TransportClosed` when the connection ended (the
        message says the close code and reason); both again on every later call. After
        :meth:`aclose` (also for a call already waiting), :class:`TransportClosed` saying so.
        Raises ``RuntimeError`` when the transport was opened with a sink.
        """
        if self._inbox_reader is None:
            raise RuntimeError(f"the frames of {self._peer} go to the sink it was opened with")
        if self._closing:
            await trio.lowlevel.checkpoint()
            raise TransportClosed(self._closed_message())
        try:
            return await self._inbox_reader.receive()
        except McpError:
            if self._closing:
                raise TransportClosed(self._closed_message()) from None
            raise

    async def aclose(self) -> None:
        """Close the connection: send what is already in the outbox, then the WebSocket close
        handshake, waiting at most ``close_timeout`` for both together, then close the socket;
        the sink gets the end (best effort: a full sink gets only its close). Idempotent (a
        concurrent second call waits for the first), shielded from cancellation, and never
        raises for a misbehaving peer. Frames still in the outbox when the time is up are
        dropped, and reported in ``ConnectionEnded.unsent``."""
        if self._closing:
            await self._close_done.wait()
            return
        self._closing = True
        try:
            with trio.CancelScope(shield=True):
                self._outbox.close()  # nothing more comes in; the writer sends what is there
                with trio.move_on_after(self._close_timeout) as scope:
                    if self._started:
                        await self._writer_done.wait()
                    await self._connection.aclose(self._close_code, self._close_text)
                if scope.cancelled_caught:
                    logger.info(
                        "%s did not take our last messages and the close handshake within "
                        "%g s; dropping the connection",
                        self._peer,
                        self._close_timeout,
                    )
                self._tasks.cancel()
                with trio.CancelScope() as drop:
                    # When the time ran out before the close handshake began: a close that
                    # is cancelled at once closes the connection's stream without waiting.
                    drop.cancel()
                    await self._connection.aclose(self._close_code, self._close_text)
                if self._stream is not None:
                    try:
                        await self._stream.aclose()
                    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                        logger.debug("closing the socket to %s: %s", self._peer, exc)
                if self._started:
                    await self._tasks_done.wait()
                    self._end(TransportClosed(self._closed_message()))
                    self._finish()
        finally:
            self._close_done.set()

    # ------------------------------------------------------------------ the tasks

    def _start(self, nursery: trio.Nursery) -> None:
        """Start the reader and the writer in ``nursery`` (they stop at :meth:`aclose`)."""
        self._started = True
        nursery.start_soon(self._run)

    async def _run(self) -> None:
        try:
            with self._tasks:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._write)
                    await self._read()
        finally:
            self._tasks_done.set()

    async def _read(self) -> None:
        """Put every message into the sink, in order, waiting for room; then the end, last."""
        while True:
            try:
                message = await self._connection.get_message()
            except trio_websocket.ConnectionClosed as exc:
                self._end(self._ending(exc))
                break
            frame = message.encode("utf-8") if isinstance(message, str) else bytes(message)
            size = len(frame)
            if size > self._max_frame_bytes:
                self._end(self._oversized(self._max_frame_bytes))
                break
            self._frames_received += 1
            self._bytes_received += size
            try:
                await self._sink.send(frame, size)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                gone = (
                    f"nobody receives the messages of {self._peer} any more; the connection "
                    "was given up"
                )
                self._end(TransportClosed(gone))
                break
        assert self._ended is not None
        try:
            await self._sink.send(self._ended)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            logger.debug("the sink of %s was closed before the end was put", self._peer)
        self._sink_closed = True
        self._sink.close()

    async def _write(self) -> None:
        """Send every frame of the outbox, in order, each as one text frame: wake up for the
        first, then take every frame ready without waiting again."""
        try:
            while True:
                try:
                    item = self._outbox.receive_nowait()
                except trio.WouldBlock:
                    # The outbox is empty, so receive() parks, and takes the next frame when
                    # this task resumes, with no checkpoint after: see _write_one.
                    try:
                        item = await self._outbox.receive()
                    except (trio.EndOfChannel, trio.ClosedResourceError):
                        return
                    self._write_batches += 1
                except (trio.EndOfChannel, trio.ClosedResourceError):
                    return
                if not await self._write_one(item):
                    return
        finally:
            self._writer_done.set()

    async def _write_one(self, item: _Outgoing) -> bool:
        """Send one frame; ``False`` when the connection can take no more (the reader reports
        why). There was no checkpoint since the frame left the outbox, so the end cannot have
        been decided meanwhile, and a connection found closed now means that nothing of the
        frame is written: its request goes into ``ConnectionEnded.unsent``."""
        text, request_id, size = item
        closed_before = self._connection.closed is not None
        try:
            await self._connection.send_message(text)
        except (trio_websocket.ConnectionClosed, wsproto.utilities.LocalProtocolError) as exc:
            # wsproto refuses a message before writing anything of it; the library raises
            # ConnectionClosed before writing when the connection was already closed, and
            # after a failed write otherwise (then part of the frame may be out).
            never_written = closed_before or isinstance(exc, wsproto.utilities.LocalProtocolError)
            if never_written and request_id is not None:
                self._unwritten.append(request_id)
            logger.debug("sending to %s stopped: %r", self._peer, exc)
            return False
        self._frames_sent += 1
        self._bytes_sent += size
        return True

    # ------------------------------------------------------------------ internals

    def _outgoing(self, frame: bytes, request_id: RequestId | None) -> _Outgoing:
        data = bytes(frame)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise LocalProtocolError(
                f"cannot send a message to {self._peer} that is not UTF-8 (invalid byte at "
                f"offset {exc.start}): WebSocket text frames carry UTF-8 JSON"
            ) from None
        return text, request_id, len(data)

    def _refusal(self) -> str:
        """What a send is told once the outbox takes nothing more: it was closed by
        :meth:`aclose`, or by :meth:`_end`, which decided why the connection ended."""
        if self._closing:
            return self._closed_message()
        assert self._ended is not None  # the outbox is closed only by aclose() and _end()
        error = self._ended.error
        if isinstance(error, FrameTooLarge):
            return (
                f"the connection to {self._peer} was given up after it sent a message over "
                f"{error.limit} bytes (max_frame_bytes); reconnect, or raise the limit"
            )
        return str(error)

    def _closed_message(self) -> str:
        return f"the transport to {self._peer} was closed on this side; open a new one"

    def _end(self, error: McpError) -> None:
        """Decide the end of the connection, once: why (``error``, which later sends are told
        too, see :meth:`_refusal`), and which requests never left (those still in the outbox,
        which takes no more). Synchronous."""
        if self._ended is not None:
            return
        self._outbox.close()
        unsent = {request_id for _, request_id, _ in self._outbox.drain() if request_id is not None}
        unsent.update(self._unwritten)
        self._ended = ConnectionEnded(error=error, unsent=frozenset(unsent))

    def _finish(self) -> None:
        """Put the end into the sink if the reader could not (best effort: a full sink gets
        only its close), and close the sink."""
        if self._sink_closed:
            return
        self._sink_closed = True
        assert self._ended is not None
        try:
            self._sink.send_nowait(self._ended)
        except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
            logger.debug("the sink of %s is full or closed: it gets only its close", self._peer)
        self._sink.close()

    def _ending(self, closed: trio_websocket.ConnectionClosed) -> McpError:
        """Why the connection ended: we closed it, the peer closed it, it was lost, or a
        message passed the size limit of the underlying connection."""
        if self._closing:
            return TransportClosed(self._closed_message())
        reason = closed.reason
        # trio-websocket closes its own receive side (ClosedResourceError) when a message
        # passes its limit; a close by the peer ends it from the sending side (EndOfChannel).
        local = isinstance(closed.__context__, trio.ClosedResourceError)
        if reason is not None and reason.code == _CLOSE_TOO_BIG and local:
            match = _TOO_BIG_REASON.fullmatch(reason.reason or "")
            return self._oversized(int(match.group(1)) if match else self._max_frame_bytes)
        message = self._describe(reason)
        logger.info("%s", message)
        return TransportClosed(message)

    def _describe(self, reason: trio_websocket.CloseReason | None) -> str:
        if reason is None:
            return f"the connection to {self._peer} ended"
        said = f": {reason.reason}" if reason.reason else ""
        if reason.code == _CLOSE_ABNORMAL:
            return (
                f"the connection to {self._peer} was lost without a WebSocket close handshake "
                "(code 1006): the peer went away or the network failed"
            )
        if reason.code == _CLOSE_TOO_BIG:
            return (
                f"{self._peer} closed the connection with code 1009 (message too big{said}): "
                "it refused one of our messages as too large"
            )
        if reason.code == _CLOSE_NORMAL:
            return f"{self._peer} closed the connection (code 1000, normal closure{said})"
        return f"{self._peer} closed the connection with code {reason.code} ({reason.name}{said})"

    def _oversized(self, limit: int) -> FrameTooLarge:
        logger.warning("%s sent a message over %d bytes; closing the connection", self._peer, limit)
        self._close_code = _CLOSE_TOO_BIG
        self._close_text = f"message over {limit} bytes"
        return FrameTooLarge(
            f"{self._peer} sent a message (one WebSocket message) larger than {limit} bytes, so "
            "the connection was closed. If the server legitimately sends bigger messages, raise "
            f"max_frame_bytes (now {limit}) in its config",
            limit=limit,
        )


def _new_transport(
    connection: trio_websocket.WebSocketConnection,
    info: TransportInfo,
    peer: str,
    sink: FrameSink | None,
    *,
    max_frame_bytes: int,
    close_timeout: float,
    stream: trio.abc.AsyncResource | None = None,
) -> WebSocketTransport:
    """A transport over ``connection`` whose frames go to ``sink``, or to an inbox of its own."""
    own_inbox: ByteChannel[Inbound] | None = None
    if sink is None:
        own_inbox = open_inbox()
        sink = own_inbox
    return WebSocketTransport(
        connection,
        info,
        peer,
        sink,
        own_inbox,
        max_frame_bytes=max_frame_bytes,
        close_timeout=close_timeout,
        stream=stream,
    )


# --------------------------------------------------------------------------- client side


class _WatchedStream(trio.abc.Stream):
    """A byte stream that reports its end: the first EOF or I/O failure calls ``on_end``.

    The WebSocket library waits for the handshake without noticing a connection that ends
    first; the watcher turns that into an immediate failure instead of a wait for the
    connect timeout.
    """

    def __init__(self, inner: trio.abc.Stream) -> None:
        self._inner = inner
        self.on_end: Callable[[], None] | None = None
        self.failure: BaseException | None = None

    def _ended(self, failure: BaseException | None = None) -> None:
        if failure is not None and self.failure is None:
            self.failure = failure
        if self.on_end is not None:
            on_end, self.on_end = self.on_end, None
            on_end()

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        try:
            await self._inner.send_all(data)
        except (trio.BrokenResourceError, OSError) as exc:
            self._ended(exc)
            raise

    async def wait_send_all_might_not_block(self) -> None:
        await self._inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        try:
            data = await self._inner.receive_some(max_bytes)
        except (trio.BrokenResourceError, OSError) as exc:
            self._ended(exc)
            raise
        if not data:
            self._ended()
        return data

    async def aclose(self) -> None:
        await self._inner.aclose()


def _cause(exc: BaseException | None) -> str:
    if exc is None:
        return ""
    inner = exc.__cause__ or exc.__context__
    detail = str(exc) or (str(inner) if inner is not None else "") or type(exc).__name__
    return f" ({detail})"


async def _open_stream(params: WebSocketParameters) -> trio.abc.Stream:
    """The byte stream to the server: TCP (through the proxy's tunnel, if there is one), then
    TLS for ``wss://``, its handshake done (so that a refused certificate says so)."""
    target = params._target
    try:
        if params.proxy is not None:
            stream = await open_tunnel(params.proxy, target.host, target.port)
        else:
            stream = await trio.open_tcp_stream(target.host, target.port)
    except OSError as exc:
        raise ConnectError(
            f"could not connect to WebSocket server {target.display}: {exc}. Check that the "
            "server runs and that the host and port are right"
        ) from exc
    if not target.secure:
        return stream
    context = params._tls or ssl.create_default_context()
    secure = trio.SSLStream(stream, context, server_hostname=target.host, https_compatible=True)
    try:
        await secure.do_handshake()
    except (trio.BrokenResourceError, OSError) as exc:
        with trio.CancelScope(shield=True):
            await stream.aclose()
        hint = tls_failure_hint(exc) or f"the TLS handshake failed{_cause(exc)}"
        raise ConnectError(
            f"could not connect to WebSocket server {target.display}: {hint}"
        ) from exc
    except BaseException:
        with trio.CancelScope(shield=True):
            await stream.aclose()
        raise
    return secure


class _RateLimited(Exception):
    """The server answered the handshake 429 with Retry-After: try again after ``delay``."""

    def __init__(self, delay: float, refusal: str) -> None:
        super().__init__(refusal)
        self.delay = delay
        self.refusal = refusal


async def _handshake(
    nursery: trio.Nursery, params: WebSocketParameters
) -> tuple[trio_websocket.WebSocketConnection, _WatchedStream]:
    """Connect and perform the opening handshake; the library's side of the connection runs
    in ``nursery``. A handshake answered 429 with Retry-After is tried again after the wait it
    asks for, while the waits fit in ``connect_timeout`` and ``max_retry_after``.

    Raises :class:`ConnectError` (a rejected handshake included: see
    :func:`_connect_failure`) or :class:`ConnectTimeout`.
    """
    target = params._target
    headers = [
        (name.encode("ascii"), value.encode("utf-8")) for name, value in params.headers.items()
    ]
    waited = 0.0
    with trio.move_on_after(params.connect_timeout) as deadline:
        while True:
            try:
                return await _handshake_once(nursery, params, headers)
            except _RateLimited as limited:
                left = deadline.deadline - trio.current_time()
                limit = min(params.max_retry_after - waited, left)
                if limited.delay > limit:
                    raise ConnectError(
                        too_long_to_wait(limited.refusal, limited.delay, limit)
                    ) from limited
                logger.info(
                    "WebSocket server %s is rate-limiting (HTTP 429): connecting again in %g s "
                    "(Retry-After)",
                    target.display,
                    limited.delay,
                )
                await trio.sleep(limited.delay)
                waited += limited.delay
    raise ConnectTimeout(
        f"the WebSocket handshake with {target.display} did not complete within "
        f"{params.connect_timeout:g} s (connect_timeout)"
    )


async def _run_client(
    stream: _WatchedStream,
    params: WebSocketParameters,
    headers: list[tuple[bytes, bytes]],
    *,
    task_status: trio.TaskStatus[trio_websocket.WebSocketConnection],
) -> None:
    """The library's side of one client connection: the opening handshake, then its reader,
    until the connection ends. Started (with the connection) once the handshake completed; a
    rejected or broken handshake is raised before that, so the opener gets it."""
    target = params._target
    async with trio.open_nursery() as library:
        connection = await trio_websocket.wrap_client_stream(
            library,
            # wrap_client_stream takes any trio.abc.Stream (it only reads, writes and closes
            # it); its annotation names the socket and TLS streams only.
            cast("trio.SocketStream", stream),
            target.host_header,
            target.resource,
            subprotocols=[MCP_SUBPROTOCOL],
            extra_headers=headers,
            message_queue_size=0,  # nothing is lost before an oversized message
            max_message_size=params.max_frame_bytes,
            receive_buffer_size=_READ_CHUNK,
        )
        task_status.started(connection)


async def _handshake_once(
    nursery: trio.Nursery, params: WebSocketParameters, headers: list[tuple[bytes, bytes]]
) -> tuple[trio_websocket.WebSocketConnection, _WatchedStream]:
    """One attempt of :func:`_handshake`; raises :class:`_RateLimited` for a 429 with
    Retry-After."""
    target = params._target
    stream: _WatchedStream | None = None
    connection: trio_websocket.WebSocketConnection | None = None
    try:
        stream = _WatchedStream(await _open_stream(params))
        with trio.CancelScope() as watch:
            stream.on_end = watch.cancel
            try:
                connection = await nursery.start(_run_client, stream, params, headers)
            except BaseExceptionGroup as group:
                failure = _single_failure(group)
                if failure is None:
                    raise
                _raise_handshake_failure(failure, target.display)
        stream.on_end = None
        if watch.cancelled_caught:
            connection = None
    finally:
        if connection is None and stream is not None:
            # Failed, rejected, timed out or cancelled.
            with trio.CancelScope(shield=True):
                await stream.aclose()
    if connection is None:
        failure = stream.failure if stream is not None else None
        refused = tls_refusal_hint(failure) if failure is not None else None
        if refused is not None:
            raise ConnectError(
                f"could not connect to WebSocket server {target.display}: {refused}"
            ) from failure
        what = (
            f"WebSocket server {target.display} closed the connection during the handshake"
            if failure is None
            else f"the connection to WebSocket server {target.display} failed during the "
            f"handshake{_cause(failure)}"
        )
        raise ConnectError(
            f"{what}; check that the URL is a WebSocket endpoint (and ws:// vs wss://)"
        ) from failure
    assert stream is not None
    return connection, stream


def _raise_handshake_failure(failure: BaseException, display: str) -> NoReturn:
    """Raise what a failure of the library during the handshake becomes: :class:`_RateLimited`
    for a 429 with Retry-After, else :func:`_connect_failure`'s mapping (or ``failure``)."""
    if isinstance(failure, trio_websocket.ConnectionRejected) and failure.status_code == 429:
        value = next((v for k, v in failure.headers or () if k.lower() == b"retry-after"), None)
        delay = retry_after_seconds(
            None if value is None else value.decode("latin-1"), now=_retry.wall_clock()
        )
        if delay is not None:
            raise _RateLimited(
                delay,
                f"WebSocket server {display} rejected the handshake with HTTP status 429 "
                "(Too Many Requests)",
            ) from failure
    mapped = _connect_failure(failure, display)
    if mapped is failure:
        raise failure
    raise mapped from failure


#: What the WebSocket library raises for a broken handshake (besides a rejection).
_HANDSHAKE_FAILURES: Final = (
    wsproto.utilities.ProtocolError,
    h11.ProtocolError,
    trio_websocket.HandshakeError,
    trio_websocket.ConnectionClosed,
    trio.BrokenResourceError,
    OSError,
)


def _connect_failure(exc: BaseException, display: str) -> BaseException:
    """What a failure while connecting becomes: :class:`ConnectError` naming the URL."""
    if isinstance(exc, McpError) or not isinstance(exc, Exception):
        return exc
    if isinstance(exc, trio_websocket.ConnectionRejected):
        body = (exc.body or b"")[:200].decode("utf-8", errors="replace").strip()
        said = f": {body}" if body else ""
        return ConnectError(
            f"WebSocket server {display} rejected the handshake with HTTP status "
            f"{exc.status_code}{said}. Check the URL's path and the headers (authorization), "
            f"and that the server speaks MCP over WebSocket (subprotocol {MCP_SUBPROTOCOL!r})"
        )
    if isinstance(exc, _HANDSHAKE_FAILURES):
        # The library may fail while reporting a protocol error (sending a rejection as a
        # client): the first WebSocket protocol error in the chain says what went wrong.
        cause: BaseException | None = exc
        while cause is not None and not isinstance(cause, wsproto.utilities.ProtocolError):
            cause = cause.__context__
        return ConnectError(
            f"the WebSocket handshake with {display} failed{_cause(cause or exc)}; check that "
            f"the URL is a WebSocket MCP endpoint (subprotocol {MCP_SUBPROTOCOL!r})"
        )
    return exc


def _single_failure(group: BaseExceptionGroup[Any]) -> BaseException | None:
    """The one exception a group stands for (ignoring the cancellations it caused), or None."""
    if len(group.exceptions) == 1:
        return group.exceptions[0]
    failures = [e for e in group.exceptions if not isinstance(e, trio.Cancelled)]
    return failures[0] if len(failures) == 1 else None


async def _io_nursery(
    *,
    task_status: trio.TaskStatus[tuple[trio.Nursery, trio.CancelScope]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """A nursery for a connection's I/O tasks (the library's reader, the transport's reader and
    writer) that a cancellation of the block around the transport does not reach: the close
    handshake and the last frames still go out when the block is cancelled. Its tasks end
    when the connection ends, or when the returned scope is cancelled (after
    :meth:`WebSocketTransport.aclose`, which is bounded)."""
    with collapse_exception_group(), trio.CancelScope(shield=True) as scope:
        async with trio.open_nursery() as nursery:
            task_status.started((nursery, scope))
            await trio.sleep_forever()


@asynccontextmanager
async def open_websocket_transport(
    params: WebSocketParameters, sink: FrameSink | None = None
) -> AsyncIterator[WebSocketTransport]:
    """Connect to the WebSocket MCP server described by ``params`` and yield its
    :class:`WebSocketTransport`, whose reader and writer run until the block is left.

    Every message the server sends goes into ``sink`` (waiting for room: backpressure), and last
    of all the :class:`~trio_mcp.transports._base.ConnectionEnded`, after which the sink is
    closed. Without a sink the transport makes an inbox of its own, read with
    :meth:`WebSocketTransport.receive`. Nothing is put into the sink when the connection cannot
    be opened.

    Raises :class:`ConnectError` naming the URL when the connection is refused or fails, the
    server rejects the handshake, answers something that is not a WebSocket handshake, or does
    not accept the subprotocol ``mcp``; :class:`ConnectTimeout` when the handshake takes longer
    than ``connect_timeout``. Leaving the block runs :meth:`WebSocketTransport.aclose`, even
    when the block is cancelled. An exception raised in the block comes out as itself (not
    wrapped in an :class:`ExceptionGroup`).
    """
    install_log_redaction()
    target = params._target
    warn_plaintext(logger, "wss" if target.secure else "ws", target.host, target.display)
    connected = False
    try:
        async with trio.open_nursery() as nursery:
            io, io_scope = await nursery.start(_io_nursery)
            try:
                connection, stream = await _handshake(io, params)
                transport = _new_transport(
                    connection,
                    TransportInfo(kind="ws", detail=target.display),
                    f"WebSocket server {target.display}",
                    sink,
                    max_frame_bytes=params.max_frame_bytes,
                    close_timeout=params.close_timeout,
                    stream=stream,
                )
                try:
                    if connection.subprotocol != MCP_SUBPROTOCOL:
                        raise ConnectError(
                            f"WebSocket server {target.display} accepted the connection without "
                            f"the subprotocol {MCP_SUBPROTOCOL!r} (it answered "
                            f"{connection.subprotocol!r}), so it does not speak MCP there; "
                            "check the URL's path"
                        )
                    logger.debug("connected to %s", target.display)
                    connected = True
                    transport._start(io)
                    yield transport
                finally:
                    await transport.aclose()
            finally:
                io_scope.cancel()
    except BaseExceptionGroup as group:
        failure = _single_failure(group)
        if failure is None:
            raise
        if not connected:
            mapped = _connect_failure(failure, target.display)
            if mapped is not failure:
                raise mapped from failure
        context = failure.__context__
        try:
            raise failure  # the group was only a wrapper: the finally undoes the chaining
        finally:
            failure.__context__ = context


# --------------------------------------------------------------------------- server side


def _endpoint(value: trio_websocket.Endpoint | str) -> str:
    if isinstance(value, trio_websocket.Endpoint):
        address = str(value.address)
        host = f"[{address}]" if ":" in address else address
        return f"{host}:{value.port}"
    return value


@asynccontextmanager
async def accept_websocket_transport(
    request: trio_websocket.WebSocketRequest,
    sink: FrameSink | None = None,
    *,
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    close_timeout: float = 2.0,
) -> AsyncIterator[WebSocketTransport]:
    """Server side: accept a client's WebSocket handshake for MCP and yield the connection as
    a :class:`WebSocketTransport`, whose reader and writer run until the block is left.

    For a handler of ``trio_websocket.serve_websocket``: ``async with
    accept_websocket_transport(request) as transport:`` accepts the connection with the
    subprotocol ``mcp`` (serve it with, say, ``FakeServer.serve_transport``). ``sink`` works as
    for :func:`open_websocket_transport`. Give ``serve_websocket`` a ``max_message_size`` of at
    least ``max_frame_bytes``. Leaving the block runs :meth:`WebSocketTransport.aclose`; an
    exception raised in the block comes out as itself.

    Raises :class:`ConnectError` after rejecting the handshake with HTTP 400 when the client
    did not propose the subprotocol ``mcp``, and :class:`ValueError` for a ``max_frame_bytes``
    or ``close_timeout`` that is not a positive integer or a finite number of seconds >= 0.
    """
    if isinstance(max_frame_bytes, bool) or not isinstance(max_frame_bytes, int):
        raise ValueError(f"max_frame_bytes must be a positive integer, got {max_frame_bytes!r}")
    if max_frame_bytes < 1:
        raise ValueError(f"max_frame_bytes must be a positive integer, got {max_frame_bytes!r}")
    if _bad_seconds(close_timeout, allow_zero=True):
        raise ValueError(
            f"close_timeout must be a finite number of seconds >= 0, got {close_timeout!r}"
        )
    client = _endpoint(request.remote)
    if MCP_SUBPROTOCOL not in request.proposed_subprotocols:
        proposed = ", ".join(request.proposed_subprotocols) or "none"
        await request.reject(
            400, body=f"this endpoint needs the WebSocket subprotocol {MCP_SUBPROTOCOL!r}".encode()
        )
        raise ConnectError(
            f"refused WebSocket client {client} on {request.path}: it did not propose the "
            f"subprotocol {MCP_SUBPROTOCOL!r} (proposed: {proposed})"
        )
    connection = await request.accept(subprotocol=MCP_SUBPROTOCOL)
    transport = _new_transport(
        connection,
        TransportInfo(kind="ws", detail=f"client {client} on {request.path}"),
        f"WebSocket client {client}",
        sink,
        max_frame_bytes=max_frame_bytes,
        close_timeout=close_timeout,
    )
    with collapse_exception_group():
        async with trio.open_nursery() as nursery:
            io, io_scope = await nursery.start(_io_nursery)
            try:
                transport._start(io)
                yield transport
            finally:
                await transport.aclose()
                io_scope.cancel()
