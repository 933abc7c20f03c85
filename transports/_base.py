"""The message-level transport contract that every trio-mcp transport implements.

A transport moves whole JSON-RPC messages ("frames": one serialised message, without any line
terminator) between us and one server. It knows nothing about MCP itself. stdio is the first
implementation; memory, Streamable HTTP and WebSocket follow the same contract:

- :meth:`Transport.send` writes one frame;
- :meth:`Transport.receive` returns the next frame, raises :class:`TransportClosed` once the peer
  is gone and :class:`FrameTooLarge` for an oversized frame;
- :meth:`Transport.aclose` is idempotent; afterwards ``send`` and ``receive`` raise
  :class:`TransportClosed`;
- :attr:`Transport.info` says what the transport is connected to, for status output and logs.

Foreign exceptions (trio's resource errors, :class:`OSError`) are turned into ours by
:func:`map_transport_errors`, used at one place per I/O boundary.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol, runtime_checkable

import attrs
import trio

from ..protocol._errors import ConnectError, TransportClosed

__all__ = [
    "Transport",
    "TransportInfo",
    "collapse_exception_group",
    "map_transport_errors",
]


@attrs.frozen(kw_only=True)
class TransportInfo:
    """What a transport is connected to: ``kind`` (``"stdio"``, ``"http"``, ...) and a short
    human-readable ``detail`` (a command and pid, a URL). Never holds secrets."""

    kind: str
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}"


@runtime_checkable
class Transport(Protocol):
    """A connection that moves whole JSON-RPC messages (frames) to and from one server.

    Optional hooks a transport may also offer; the session uses each one when it is there:

    - ``async send_many(frames: list[bytes])``: send several frames in one write (stdio);
    - ``try_send(frame: bytes) -> bool``: write one frame now, whole, without yielding, or
      write nothing and return False (stdio: up to ``PIPE_BUF`` bytes; memory). On an idle
      connection the session writes a request from the caller's task this way, past its writer
      task; raising means nothing was written;
    - ``receive_nowait() -> bytes | None``: the next frame if one is ready now, else None (also
      at the end, which ``receive`` then reports); the session's reader drains ready frames
      with it before it waits again;
    - ``set_frame_handler(handler)``: the transport calls ``handler(frame)`` synchronously from
      its own reader task for every frame, instead of queueing it for ``receive`` (which then
      only reports the end); the session then handles each answer without a task switch
      (stdio);
    - ``set_protocol_version(version: str)``: the handshake settled the revision (HTTP sends it
      in the ``MCP-Protocol-Version`` header from then on);
    - ``set_request_failure_handler(callback)``: ``callback(request_id, error, sent)`` fails one
      call with a transport error of its own (HTTP status, lost response stream);
    - ``resume()`` / ``discard_held()``: after :class:`SessionExpired`, re-send (or give up) the
      requests the server refused with the old HTTP session.
    """

    @property
    def info(self) -> TransportInfo:
        """What this transport is connected to."""
        ...

    async def send(self, frame: bytes) -> None:
        """Send one serialised JSON-RPC message (without a line terminator).

        Concurrent calls are allowed and are written one after the other, whole. Raises
        :class:`TransportClosed` if the transport or the peer is closed, and
        :class:`LocalProtocolError` if the frame cannot be framed (an embedded newline on
        stdio).
        """
        ...

    async def receive(self) -> bytes:
        """Return the next message from the server.

        Raises :class:`TransportClosed` when the peer is gone (the message says why, if known)
        or after :meth:`aclose`, and :class:`FrameTooLarge` when the server sent a message
        bigger than the configured maximum (the connection is unusable afterwards).
        """
        ...

    async def aclose(self) -> None:
        """Close the connection and release everything it holds. Idempotent, bounded in time,
        and runs to completion even when the calling task is cancelled."""
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
