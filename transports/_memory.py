"""In-memory transports: two connected message-level ends over channels bounded in bytes.

:func:`memory_transport_pair` gives a client end and a server end. What one end sends goes into
the other end's sink, whole and in order; nothing is serialised or framed. Each end's sink is a
:class:`~trio_mcp.transports._channel.ByteChannel` (its own, or the one given for the client end:
a session's mailbox), so a sender waits when its peer does not keep up, as it would on a pipe.
A memory end has no I/O task of its own: sending *is* putting into the peer's channel.

Closing semantics, for both ends alike:

- after ``a.aclose()``, ``b`` first gets every frame ``a`` had already sent, then a
  :class:`~trio_mcp.transports._base.ConnectionEnded` (``b.receive()`` raises
  :class:`TransportClosed`); ``b.send()`` raises :class:`TransportClosed` at once;
- ``a.send()`` and ``a.receive()`` raise :class:`TransportClosed` after ``a.aclose()``,
  including a ``receive`` that was already waiting in another task;
- ``aclose()`` is idempotent and never blocks.
"""

from __future__ import annotations

import contextlib

import attrs
import trio

from ..protocol._errors import TransportClosed
from ..protocol._jsonrpc import RequestId
from ._base import ConnectionEnded, FrameSink, Inbound, InboxReader, TransportInfo, open_inbox
from ._channel import DEFAULT_MAILBOX_BYTES, ByteChannel

__all__ = ["MemoryTransport", "MemoryTransportStatistics", "memory_transport_pair"]


@attrs.frozen(kw_only=True)
class MemoryTransportStatistics:
    """A snapshot of one end of a memory pair.

    ``sent``: frames this end handed to its peer; ``received``: frames this end returned from
    :meth:`MemoryTransport.receive`; ``buffered``: items waiting in this end's own inbox (0 when
    its frames go to a sink of its user's); ``closed``: whether this end was closed with
    :meth:`MemoryTransport.aclose`.
    """

    sent: int
    received: int
    buffered: int
    closed: bool


@attrs.define(eq=False)
class MemoryTransport:
    """One end of an in-memory, message-level connection. Build pairs with
    :func:`memory_transport_pair`; see :class:`~trio_mcp.transports.Transport` for the
    contract. ``send`` and ``receive`` move whole frames (any bytes: nothing is parsed)."""

    _sink: FrameSink
    _info: TransportInfo
    _own_inbox: ByteChannel[Inbound] | None = None
    _peer: MemoryTransport | None = attrs.field(default=None, init=False)
    _closed: bool = attrs.field(default=False, init=False)
    _sent: int = attrs.field(default=0, init=False)
    _received: int = attrs.field(default=0, init=False)
    _reader: InboxReader | None = attrs.field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        if self._own_inbox is not None:
            self._reader = InboxReader(self._own_inbox)

    @property
    def info(self) -> TransportInfo:
        """``kind="memory"`` and which end of which pair this is."""
        return self._info

    @property
    def closed(self) -> bool:
        """Whether :meth:`aclose` was called on this end."""
        return self._closed

    def statistics(self) -> MemoryTransportStatistics:
        """A snapshot of the counters. Never raises."""
        inbox = self._own_inbox
        return MemoryTransportStatistics(
            sent=self._sent,
            received=self._received,
            buffered=len(inbox) if inbox is not None else 0,
            closed=self._closed,
        )

    def _check(self) -> MemoryTransport:
        if self._closed:
            raise self._closed_here("send")
        peer = self._peer
        if peer is None or peer._closed:
            raise self._closed_there("send")
        return peer

    def send_nowait(self, frame: bytes, request_id: RequestId | None = None) -> None:
        """Hand one frame to the peer now if its channel has room, else ``trio.WouldBlock``.
        Raises :class:`TransportClosed` once either end is closed."""
        peer = self._check()
        data = bytes(frame)
        try:
            peer._sink.send_nowait(data, len(data))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise self._closed_there("send") from None
        self._sent += 1

    async def send(self, frame: bytes, request_id: RequestId | None = None) -> None:
        """Hand one frame to the peer, waiting while the peer's channel is full. Raises
        :class:`TransportClosed` when either end is closed before the frame was taken in (the
        frame was not sent); a send whose frame was taken in returns, even if an end closed
        before it resumed."""
        try:
            peer = self._check()
        except TransportClosed:
            await trio.lowlevel.checkpoint()
            raise
        data = bytes(frame)
        try:
            await peer._sink.send(data, len(data))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            if self._closed:  # closed here while this send waited for room
                raise self._closed_here("send") from None
            raise self._closed_there("send") from None
        self._sent += 1

    async def receive(self) -> bytes:
        """Return the next frame from the peer, waiting for one (only for an end opened without
        a sink). Raises :class:`TransportClosed` when this end was closed (also while waiting),
        or when the peer was closed and every frame it had sent was already received."""
        if self._reader is None:
            raise RuntimeError("this end's frames go to the sink it was opened with")
        if self._closed:
            await trio.lowlevel.checkpoint()
            raise self._closed_here("receive")
        try:
            frame = await self._reader.receive()
        except TransportClosed:
            if self._closed:
                raise self._closed_here("receive") from None
            raise
        self._received += 1
        return frame

    async def aclose(self) -> None:
        """Close this end: the peer gets the frames already sent, then the end. Idempotent; the
        closing itself is synchronous, so it happens even when the caller is cancelled."""
        if not self._closed:
            self._closed = True
            self._end(self, self._closed_here("use"))
            peer = self._peer
            if peer is not None and not peer._closed:  # else the peer has ended its own sink
                self._end(peer, peer._closed_there("receive"))
        await trio.lowlevel.checkpoint()

    @staticmethod
    def _end(end: MemoryTransport, error: TransportClosed) -> None:
        """Put the end of the connection into ``end``'s sink (best effort: a full sink gets the
        close alone, which its receiver sees as the end) and close it."""
        with contextlib.suppress(
            trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError
        ):
            end._sink.send_nowait(ConnectionEnded(error=error))
        end._sink.close()

    def _closed_there(self, action: str) -> TransportClosed:
        return TransportClosed(
            f"cannot {action} on {self._info.detail}: the peer closed the connection"
        )

    def _closed_here(self, action: str) -> TransportClosed:
        return TransportClosed(
            f"cannot {action} on {self._info.detail}: it was closed on this side; "
            "open a new connection"
        )


def memory_transport_pair(
    *,
    max_bytes: int = DEFAULT_MAILBOX_BYTES,
    label: str = "memory pair",
    client_sink: FrameSink | None = None,
) -> tuple[MemoryTransport, MemoryTransport]:
    """Two connected in-memory transports: ``(client_end, server_end)``.

    What the server end sends goes into ``client_sink`` when it is given (a session's mailbox),
    else into the client end's own inbox (read it with ``client_end.receive()``); the server end
    always has its own inbox of ``max_bytes``. ``label`` names the pair in
    :attr:`MemoryTransport.info` and in error messages.

    Raises like :class:`~trio_mcp.transports._channel.ByteChannel` when ``max_bytes`` is not an
    integer >= 1: :class:`TypeError` for a non-integer, :class:`ValueError` below 1.
    """
    client_inbox: ByteChannel[Inbound] | None = None
    if client_sink is None:
        client_inbox = open_inbox(max_bytes)
        sink: FrameSink = client_inbox
    else:
        sink = client_sink
    server_inbox = open_inbox(max_bytes)
    client = MemoryTransport(
        sink,
        TransportInfo(kind="memory", detail=f"client end of {label}"),
        client_inbox,
    )
    server = MemoryTransport(
        server_inbox,
        TransportInfo(kind="memory", detail=f"server end of {label}"),
        server_inbox,
    )
    client._peer = server
    server._peer = client
    return client, server
