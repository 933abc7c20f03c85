"""The message-level transport contract that every trio-mcp transport implements.

A transport moves whole JSON-RPC messages ("frames": one serialised message, without any line
terminator) between us and one server. It knows nothing about MCP itself, and it is an actor: it
owns its I/O tasks (a reader, a writer, what else its medium needs) and its state, and is reached
only through channels:

- **Up**: everything the server sends, and everything the transport learns on its own, goes into
  one :class:`FrameSink` given when the transport is opened, a channel bounded in bytes
  (:class:`~trio_mcp.transports._channel.ByteChannel`). A frame is put as ``bytes`` (the hot
  path: no wrapper); what is not a frame is a :data:`TransportEvent`: a stderr line
  (:class:`StderrLine`), one request failed on its own (:class:`RequestFailed`: an HTTP error
  status, a response stream lost), the server ended the HTTP session
  (:class:`SessionExpiredNotice`), and last of all :class:`ConnectionEnded`, after which the
  transport closes the sink. A transport never calls its user's code: the actor that receives
  from the sink decides what each item means, in its own task.
- **Down**: :meth:`Transport.send` / :meth:`Transport.send_nowait` put a frame into the
  transport's outbox (bounded in bytes too); its writer takes every frame ready and writes them
  in one go. A frame may carry the id of the request it holds, so that at the end the transport
  can say which requests never left (``ConnectionEnded.unsent``): a call whose request was never
  written is safe to retry, one whose request may have been written has an unknown outcome.

Optional abilities are typed :class:`~typing.Protocol` classes (:class:`VersionedTransport`,
:class:`StatelessTransport`, :class:`HeaderTransport`, :class:`CredentialTransport`,
:class:`ResumableTransport`, :class:`ProcessTransport`) that mypy checks, each implemented by
the transports that have it; their methods also go through the outbox, in order with the
frames.

Without a sink (a transport used on its own, as in the tests), the transport makes its own and
:meth:`Transport.receive` reads frames from it.

Foreign exceptions (trio's resource errors, :class:`OSError`) are turned into ours by
:func:`map_transport_errors`, used at one place per I/O boundary.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Protocol, TypeAlias, runtime_checkable

import attrs
import httpx
import trio

from ..protocol._errors import ConnectError, McpError, TransportClosed
from ..protocol._jsonrpc import RequestId
from ._channel import DEFAULT_MAILBOX_BYTES, ITEM_OVERHEAD, ByteChannel

__all__ = [
    "ConnectionEnded",
    "CredentialTransport",
    "FrameSink",
    "HeaderTransport",
    "Inbound",
    "InboxReader",
    "ProcessTransport",
    "RequestCredentials",
    "RequestFailed",
    "ResumableTransport",
    "SessionExpiredNotice",
    "StatelessTransport",
    "StderrLine",
    "Transport",
    "TransportEvent",
    "TransportInfo",
    "VersionedTransport",
    "collapse_exception_group",
    "item_size",
    "map_transport_errors",
    "open_inbox",
]


@attrs.frozen(kw_only=True)
class TransportInfo:
    """What a transport is connected to: ``kind`` (``"stdio"``, ``"http"``, ...) and a short
    human-readable ``detail`` (a command and pid, a URL). Never holds secrets."""

    kind: str
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}"


# --------------------------------------------------------------------------- what goes up


@attrs.frozen(kw_only=True)
class StderrLine:
    """A line the server wrote to stderr (stdio; decoded, cut at 4096 bytes). Best effort: when
    the sink is full the line is not put (the transport's stderr tail still has it)."""

    text: str


@attrs.frozen(kw_only=True)
class RequestFailed:
    """The request ``request_id`` failed on its own with ``error`` (an HTTP error status, a POST
    that could not be sent, a response stream lost before its answer); the connection goes on.
    ``sent``: whether the request may have reached the server."""

    request_id: RequestId
    error: McpError
    sent: bool


@attrs.frozen(kw_only=True)
class SessionExpiredNotice:
    """The HTTP server ended our session. The transport now holds every frame it is given until
    it is told to :meth:`~ResumableTransport.resume` (after a new ``initialize``, sent with
    :meth:`~ResumableTransport.send_now`) or to :meth:`~ResumableTransport.discard_held`.
    ``lost``: requests whose answers were lost with the old session (outcome unknown); the
    requests the server refused with the old session id are held (never processed)."""

    error: McpError
    lost: tuple[RequestId, ...] = ()


@attrs.frozen(kw_only=True)
class ConnectionEnded:
    """The last item a transport puts: why the connection ended (``error``, a
    :class:`TransportClosed` or a :class:`FrameTooLarge` / :class:`ConnectError`...), and the
    requests that never left (``unsent``)."""

    error: McpError
    unsent: frozenset[RequestId] = frozenset()


TransportEvent: TypeAlias = StderrLine | RequestFailed | SessionExpiredNotice | ConnectionEnded
#: What a transport puts into its sink: a frame, or an event.
Inbound: TypeAlias = bytes | TransportEvent


def item_size(item: object) -> int:
    """What an item counts for in a channel bounded in bytes: a frame its length, anything
    else :data:`~trio_mcp.transports._channel.ITEM_OVERHEAD`."""
    return len(item) if isinstance(item, bytes) else ITEM_OVERHEAD


class FrameSink(Protocol):
    """Where a transport puts what goes up: the sending side of a channel bounded in bytes (a
    :class:`~trio_mcp.transports._channel.ByteChannel` of :data:`Inbound` items, or of a wider
    union that includes them: an actor's mailbox)."""

    def send_nowait(self, item: Inbound, size: int = ...) -> None:
        """Put ``item`` now; ``trio.WouldBlock`` when full."""
        ...

    async def send(self, item: Inbound, size: int = ...) -> None:
        """Put ``item``, waiting for room (backpressure)."""
        ...

    def close(self) -> None:
        """No more items (after :class:`ConnectionEnded`)."""
        ...


def open_inbox(max_bytes: int = DEFAULT_MAILBOX_BYTES) -> ByteChannel[Inbound]:
    """A channel for a transport used on its own: pass it as the sink, and read it (or call the
    transport's ``receive()``)."""
    return ByteChannel[Inbound](max_bytes=max_bytes)


@attrs.define(eq=False)
class InboxReader:
    """``receive()`` over a transport's own inbox, for a transport used without a sink of its
    user's: frames are returned in order, a :class:`ConnectionEnded` is raised as its error
    (and again on every later call), a :class:`RequestFailed` or
    :class:`SessionExpiredNotice` is raised as its error once, and stderr lines are skipped."""

    inbox: ByteChannel[Inbound]
    _ended: McpError | None = attrs.field(default=None, init=False)

    async def receive(self) -> bytes:
        while True:
            if self._ended is not None:
                await trio.lowlevel.checkpoint()
                raise self._ended
            try:
                item = await self.inbox.receive()
            except (trio.EndOfChannel, trio.ClosedResourceError):
                self._ended = TransportClosed("the connection ended")
                continue
            match item:
                case bytes():
                    return item
                case ConnectionEnded(error=error):
                    self._ended = error
                case RequestFailed(error=error) | SessionExpiredNotice(error=error):
                    raise error
                case StderrLine():
                    continue


# --------------------------------------------------------------------------- the contract


@runtime_checkable
class Transport(Protocol):
    """A connection that moves whole JSON-RPC messages (frames) to and from one server.

    Opened with a :class:`FrameSink` (see the module docstring); its I/O tasks run until
    :meth:`aclose` (or the end of the connection, reported as :class:`ConnectionEnded`).
    """

    @property
    def info(self) -> TransportInfo:
        """What this transport is connected to."""
        ...

    def send_nowait(self, frame: bytes, request_id: RequestId | None = None) -> None:
        """Put one serialised JSON-RPC message (without a line terminator) into the outbox now,
        or raise ``trio.WouldBlock`` when the outbox is full. ``request_id``: the id of the
        request it holds, if it is one. Raises :class:`TransportClosed` when the connection has
        ended or the transport was closed (nothing was sent), and :class:`LocalProtocolError`
        when the frame cannot be framed (an embedded newline on stdio)."""
        ...

    async def send(self, frame: bytes, request_id: RequestId | None = None) -> None:
        """:meth:`send_nowait`, waiting for room in the outbox."""
        ...

    async def receive(self) -> bytes:
        """For a transport opened without a sink: the next frame (see :class:`InboxReader`).
        Raises ``RuntimeError`` when the frames go to a sink."""
        ...

    async def aclose(self) -> None:
        """Close the connection and release everything it holds. Idempotent, bounded in time,
        and runs to completion even when the calling task is cancelled."""
        ...


@runtime_checkable
class VersionedTransport(Transport, Protocol):
    """A transport that carries the negotiated protocol version itself (HTTP: the
    ``MCP-Protocol-Version`` header of every request after the handshake)."""

    async def set_protocol_version(self, version: str) -> None:
        """Every frame sent after this call (in outbox order) carries ``version``."""
        ...


@runtime_checkable
class StatelessTransport(Transport, Protocol):
    """A transport whose medium has a shape of its own for the stateless revision 2026-07-28
    (Streamable HTTP: every message a POST carrying ``MCP-Protocol-Version``, no session id, no
    stream for server-initiated messages, no resumption, and a request cancelled by closing
    its response stream)."""

    async def set_stateless(self, version: str | None) -> None:
        """Every frame sent after this call (in outbox order) goes in the stateless shape of
        protocol revision ``version``; ``None`` goes back to the shape of the handshake
        revisions, before any ``initialize`` (after a probe that found a legacy server)."""
        ...


@runtime_checkable
class ResumableTransport(Transport, Protocol):
    """A transport whose server can end the session while the connection goes on (Streamable
    HTTP): after a :class:`SessionExpiredNotice` it holds frames until told what to do."""

    async def send_now(self, frame: bytes, request_id: RequestId | None = None) -> None:
        """Send ``frame`` past the held ones (the new ``initialize`` and ``initialized``)."""
        ...

    async def resume(self) -> None:
        """The new session is initialized: send the held frames, in order."""
        ...

    async def discard_held(self) -> None:
        """No new session: each held request fails as never sent (a :class:`RequestFailed`
        with ``sent=False``), held notifications are dropped."""
        ...

    async def end(self, error: McpError) -> None:
        """End the connection with ``error``, after everything put into the outbox before this
        call: the last item is ``ConnectionEnded(error, unsent)``."""
        ...


@runtime_checkable
class HeaderTransport(Transport, Protocol):
    """A transport that can send one frame with HTTP headers of its own (Streamable HTTP: the
    2026-07-28 request headers ``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name`` and
    ``Mcp-Param-*`` of :func:`~trio_mcp.protocol.request_headers`). The headers go on the
    POST of that frame alone (and on its re-sends), after the configured ones, replacing any
    of the same name."""

    def send_with_headers_nowait(
        self, frame: bytes, request_id: RequestId | None, headers: Mapping[str, str]
    ) -> None:
        """:meth:`~Transport.send_nowait` with ``headers`` on this frame's POST. Raises
        :class:`LocalProtocolError`, before anything is put into the outbox, when a header
        name is not an HTTP token or is one the transport sets itself (``Accept``,
        ``Content-Type``, ``Mcp-Session-Id``...), is given twice (ignoring case), or when a
        value is not printable ASCII (a CR or LF, say) or starts or ends with whitespace."""
        ...

    async def send_with_headers(
        self, frame: bytes, request_id: RequestId | None, headers: Mapping[str, str]
    ) -> None:
        """:meth:`send_with_headers_nowait`, waiting for room in the outbox."""
        ...


@attrs.frozen(kw_only=True, repr=False)
class RequestCredentials:
    """Who one request is sent as, on a connection shared by many users (a tenant of a
    multi-tenant host): ``headers`` go on that request's HTTP request alone (after the
    configured ones, replacing any of the same name), and ``auth`` replaces the transport's own
    ``httpx.Auth`` for it (the tenant's OAuth sign-in; None: none at all, the headers alone).
    ``label`` names it in messages (the tenant's id, never a secret). Its ``repr`` shows the
    label and the header names, never a value."""

    label: str
    headers: tuple[tuple[str, str], ...] = ()
    auth: httpx.Auth | None = None

    def __repr__(self) -> str:
        names = [name for name, _ in self.headers]
        auth = "" if self.auth is None else ", auth"
        return f"RequestCredentials({self.label!r}, headers={names}{auth})"


@runtime_checkable
class CredentialTransport(Transport, Protocol):
    """A transport that can send one request as another user (Streamable HTTP, not once it
    fell back to HTTP+SSE): with :class:`RequestCredentials` of its own, on that request's HTTP
    request alone (and on the requests that re-send it or resume its answer). An
    authorization failure of those credentials (the ``auth`` raised
    :class:`~trio_mcp.protocol.AuthorizationError`) fails that request alone, as never sent;
    the connection goes on."""

    def send_as_nowait(
        self,
        frame: bytes,
        request_id: RequestId | None,
        credentials: RequestCredentials,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """:meth:`~Transport.send_nowait` as ``credentials``, with ``headers`` (the 2026-07-28
        request headers, see :class:`HeaderTransport`) too. Raises
        :class:`LocalProtocolError`, before anything is put into the outbox, for a header that
        cannot be sent (see :meth:`HeaderTransport.send_with_headers_nowait`; a name given by
        both counts as given twice) or when the transport cannot send credentials of a request
        of its own any more (it fell back to HTTP+SSE)."""
        ...

    async def send_as(
        self,
        frame: bytes,
        request_id: RequestId | None,
        credentials: RequestCredentials,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """:meth:`send_as_nowait`, waiting for room in the outbox."""
        ...


@runtime_checkable
class ProcessTransport(Transport, Protocol):
    """A transport that runs the server as a child process (stdio)."""

    @property
    def pid(self) -> int:
        """The server's process id."""
        ...

    def stderr_tail(self) -> tuple[str, ...]:
        """The last lines the server wrote to stderr, oldest first (a snapshot)."""
        ...


@contextmanager
def map_transport_errors(what: str, *, connecting: bool = False) -> Iterator[None]:
    """Turn trio's resource errors and :class:`OSError` raised inside the block into ours.

    ``what`` says what was being done, such as ``"sending to stdio server 'npx'"``; it starts
    the error message. :class:`trio.BrokenResourceError` (the peer went away) and
    :class:`trio.ClosedResourceError` (our side was closed) become :class:`TransportClosed`.
    :class:`OSError` becomes :class:`ConnectError` while ``connecting``, else
    :class:`TransportClosed`. The original exception is chained as ``__cause__``; everything
    else (including :class:`trio.Cancelled`) passes through untouched.
    """
    try:
        yield
    except trio.BrokenResourceError as exc:
        detail = f" ({exc})" if str(exc) else ""
        raise TransportClosed(f"{what} failed: the peer closed the connection{detail}") from exc
    except trio.ClosedResourceError as exc:
        raise TransportClosed(
            f"{what} failed: the transport was already closed on our side; open a new one"
        ) from exc
    except OSError as exc:
        if connecting:
            raise ConnectError(f"{what} failed: {exc}") from exc
        raise TransportClosed(f"{what} failed: {exc}") from exc


@contextmanager
def collapse_exception_group() -> Iterator[None]:
    """Re-raise an exception group that holds exactly one exception as that exception.

    For the boundary of a transport's context manager, which runs background tasks in a
    nursery around the caller's block: an error raised in the block (say
    :class:`TransportClosed`) then reaches the caller as itself, not wrapped in an
    :class:`ExceptionGroup`. A group with several exceptions (a real concurrent failure) is
    raised unchanged. Exactly one level is removed, so a group raised by the block itself comes
    out as that group. The single exception keeps its own traceback, cause and context.
    """
    try:
        yield
    except BaseExceptionGroup as group:
        if len(group.exceptions) != 1:
            raise
        single = group.exceptions[0]
        context = single.__context__
        try:
            raise single  # the group was only a wrapper: the finally undoes the chaining
        finally:
            single.__context__ = context
