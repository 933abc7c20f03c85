"""In-memory transports: two connected message-level ends on bounded trio memory channels.

:func:`memory_transport_pair` gives a client end and a server end. What one end sends, the other
receives, whole and in order; nothing is serialised or framed. Each direction is a bounded
channel (``max_buffer`` frames), so a sender waits when its peer does not keep up, as it would on
a real pipe.

Closing semantics, for both ends alike:

- after ``a.aclose()``, ``b.receive()`` first returns every frame ``a`` had already sent, then
  raises :class:`TransportClosed`; ``b.send()`` raises :class:`TransportClosed` at once (frames
  that ``b`` had sent but ``a`` had not received are discarded);
- ``a.send()`` and ``a.receive()`` raise :class:`TransportClosed` after ``a.aclose()``,
  including a ``receive`` that was already waiting in another task;
- ``aclose()`` is idempotent and never blocks.
"""

from __future__ import annotations

import attrs
import trio

from ..protocol._errors import TransportClosed
from ._base import TransportInfo

__all__ = ["MemoryTransport", "MemoryTransportStatistics", "memory_transport_pair"]


@attrs.frozen(kw_only=True)
class MemoryTransportStatistics:
    """A snapshot of one end of a memory pair.

    ``sent``: frames this end handed to its peer; ``received``: frames this end returned from
    :meth:`MemoryTransport.receive`; ``buffered``: frames the peer sent that wait to be received
    here; ``closed``: whether this end was closed with :meth:`MemoryTransport.aclose`.
    """

    sent: int
    received: int
    buffered: int
    closed: bool


@attrs.define(eq=False)
class MemoryTransport:
    """One end of an in-memory, message-level connection. Build pairs with
    :func:`memory_transport_pair`.

    It implements the :class:`~trio_mcp.transports.Transport` contract: ``send`` and
    ``receive`` move whole frames (any bytes: nothing is parsed), and raise
    :class:`TransportClosed` once either end is closed (see the module docstring for the exact
    order). Concurrent ``send`` calls are allowed.
    """

    _outgoing: trio.MemorySendChannel[bytes]
    _incoming: trio.MemoryReceiveChannel[bytes]
    _info: TransportInfo
    _closed: bool = attrs.field(default=False, init=False)
    _sent: int = attrs.field(default=0, init=False)
    _received: int = attrs.field(default=0, init=False)

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
        return MemoryTransportStatistics(
            sent=self._sent,
            received=self._received,
            buffered=self._incoming.statistics().current_buffer_used,
            closed=self._closed,
        )

    async def send(self, frame: bytes) -> None:
        """Hand one frame to the peer, waiting while the peer's buffer is full.

        Raises :class:`TransportClosed` when this end was closed, or when the peer was closed
        (before or while waiting).
        """
        if self._closed:
            await trio.lowlevel.checkpoint()
            raise self._closed_here("send")
        try:
            await self._outgoing.send(bytes(frame))
        except trio.BrokenResourceError:
            raise self._closed_there("send") from None
        except trio.ClosedResourceError:
            raise self._closed_here("send") from None
        self._sent += 1

    def try_send(self, frame: bytes) -> bool:
        """Hand one frame to the peer now if its buffer has room; returns whether it did. Never
        yields to the scheduler. Raises like :meth:`send`."""
        if self._closed:
            raise self._closed_here("send")
        try:
            self._outgoing.send_nowait(bytes(frame))
        except trio.WouldBlock:
            return False
        except trio.BrokenResourceError:
            raise self._closed_there("send") from None
        except trio.ClosedResourceError:
            raise self._closed_here("send") from None
        self._sent += 1
        return True

    async def receive(self) -> bytes:
        """Return the next frame from the peer, waiting for one.

        Raises :class:`TransportClosed` when this end was closed (also while waiting), or when
        the peer was closed and every frame it had sent was already received.
        """
        if self._closed:
            await trio.lowlevel.checkpoint()
            raise self._closed_here("receive")
        try:
            frame = await self._incoming.receive()
        except trio.EndOfChannel:
            raise self._closed_there("receive") from None
        except trio.ClosedResourceError:
            raise self._closed_here("receive") from None
        self._received += 1
        return frame

    def receive_nowait(self) -> bytes | None:
        """The next frame if one is buffered now, else None (also once the connection has
        ended: :meth:`receive` then raises). Never yields to the scheduler."""
        if self._closed:
            return None
        try:
            frame = self._incoming.receive_nowait()
        except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
            return None
        self._received += 1
        return frame

    async def aclose(self) -> None:
        """Close this end: the peer sees end-of-stream after the frames already sent. Idempotent;
        the closing itself is synchronous, so it happens even when the caller is cancelled."""
        if not self._closed:
            self._closed = True
            self._outgoing.close()
            self._incoming.close()
        await trio.lowlevel.checkpoint()

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
    *, max_buffer: int = 64, label: str = "memory pair"
) -> tuple[MemoryTransport, MemoryTransport]:
    """Two connected in-memory transports: ``(client_end, server_end)``.

    Each direction buffers up to ``max_buffer`` frames (0: every ``send`` waits for the matching
    ``receive``). ``label`` names the pair in :attr:`MemoryTransport.info` and in error messages.

    Raises :class:`ValueError` when ``max_buffer`` is not an integer >= 0.
    """
    if isinstance(max_buffer, bool) or not isinstance(max_buffer, int) or max_buffer < 0:
        raise ValueError(f"max_buffer must be an integer >= 0 (frames), got {max_buffer!r}")
    to_server_send, to_server_receive = trio.open_memory_channel[bytes](max_buffer)
    to_client_send, to_client_receive = trio.open_memory_channel[bytes](max_buffer)
    client = MemoryTransport(
        to_server_send,
        to_client_receive,
        TransportInfo(kind="memory", detail=f"client end of {label}"),
    )
    server = MemoryTransport(
        to_client_send,
        to_server_receive,
        TransportInfo(kind="memory", detail=f"server end of {label}"),
    )
    return client, server
