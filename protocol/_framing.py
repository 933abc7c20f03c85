"""Newline-delimited JSON framing: the stdio transport's frames (and any other byte stream's).

Each message is one line of UTF-8 JSON ended by ``\\n``; a message never contains an embedded
newline. :class:`NdjsonFramer` cuts a byte stream into those lines incrementally and without JSON
parsing: frames are bytes. :func:`encode_frame` makes a line from one serialised message.

Oversized frames
----------------
A frame longer than ``max_frame_bytes`` raises :class:`FrameTooLarge` as soon as the framer sees
that it is too long, so it never holds more than ``max_frame_bytes`` (+ 1 byte for a pending
``\\r``) of one frame. The frames that were complete in the same :meth:`NdjsonFramer.feed` call
before the oversized one are not lost: they are in the exception's ``frames_before`` attribute
(a ``list[bytes]``, in order). After the error the framer stays usable: the rest of the oversized
line is skipped up to its ``\\n`` and framing resumes with the next line. Bytes of the same chunk
that follow the oversized line are kept unscanned; ``feed(b"")`` (or the next ``feed``) frames
them. A transport that treats the error as fatal for the connection simply stops feeding.
"""

from __future__ import annotations

from typing import Final

from ._errors import FrameTooLarge, LocalProtocolError

__all__ = ["DEFAULT_MAX_FRAME_BYTES", "NdjsonFramer", "encode_frame"]

#: The default maximum size of one frame (a stdio line, an SSE line or event's data): 16 MiB.
DEFAULT_MAX_FRAME_BYTES: Final = 16 * 1024 * 1024

_LF: Final = 0x0A
_CR: Final = 0x0D


def _check_limit(value: int, name: str) -> int:
    """Return ``value`` if it is a usable size limit, else raise :class:`ValueError`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer number of bytes, got {value!r}")
    return value


class NdjsonFramer:
    """Cuts a byte stream into newline-delimited frames, incrementally.

    A line ends at ``\\n``; one ``\\r`` just before it is stripped too (servers on Windows).
    Blank lines (empty or only ASCII whitespace) are skipped. Scanning is linear: each byte is
    searched for ``\\n`` once, however the stream is split into chunks.

    Raises :class:`FrameTooLarge` (with ``limit`` and ``frames_before``, see the module
    docstring) when a line's content grows past ``max_frame_bytes``; that includes a blank line
    that long. Raises :class:`ValueError` if ``max_frame_bytes`` is not a positive integer.
    """

    __slots__ = ("_discarding", "_max", "_partial", "_pending", "_scanned")

    def __init__(self, *, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self._max = _check_limit(max_frame_bytes, "max_frame_bytes")
        # The bytes of the current unterminated line; never contains b"\n".
        self._partial = bytearray()
        # True while skipping the rest of an oversized line up to its b"\n".
        self._discarding = False
        # The unscanned rest of a chunk in which an oversized frame was refused.
        self._pending = b""
        # How many bytes were searched for b"\n" so far (for the linearity test).
        self._scanned = 0

    @property
    def buffered(self) -> int:
        """How many bytes the framer holds now: the partial frame, plus (right after a
        :class:`FrameTooLarge`) the unscanned rest of the chunk that held the oversized frame."""
        return len(self._partial) + len(self._pending)

    @property
    def max_frame_bytes(self) -> int:
        """The largest frame accepted, in bytes, not counting its line terminator."""
        return self._max

    def feed(self, data: bytes) -> list[bytes]:
        """Take the next chunk of the stream; return every frame it completes, in order.

        Frames come without their line terminator. ``feed(b"")`` frames what was left unscanned
        after a :class:`FrameTooLarge`, and returns ``[]`` otherwise.

        Raises :class:`FrameTooLarge` when a frame is longer than :attr:`max_frame_bytes`; the
        frames completed by this call before it are in the exception's ``frames_before``.
        """
        if self._pending:
            data = self._pending + data
            self._pending = b""
        elif not self._partial and not self._discarding:
            # The commonest chunk, one whole line (a server that answers one request), without
            # the loop; a line over the limit goes the long way, which refuses it.
            nl = data.find(b"\n")
            if 0 <= nl == len(data) - 1 and nl <= self._max:
                self._scanned += nl + 1
                frame = data[: nl - 1] if nl and data[nl - 1] == _CR else data[:nl]
                return [frame] if frame and not frame.isspace() else []
        frames: list[bytes] = []
        partial = self._partial
        limit = self._max
        end = len(data)
        pos = 0
        while pos < end:
            nl = data.find(b"\n", pos)
            self._scanned += (nl + 1 if nl >= 0 else end) - pos
            if self._discarding:
                if nl < 0:
                    break
                self._discarding = False
                pos = nl + 1
                continue
            if nl < 0:
                # An unterminated line: keep it, unless it is already too long. A final b"\r"
                # may still turn out to be part of a b"\r\n" terminator, so it is not counted.
                size = len(partial) + end - pos
                if size - (1 if data[end - 1] == _CR else 0) > limit:
                    partial.clear()
                    self._discarding = True
                    raise self._refuse(frames)
                partial += memoryview(data)[pos:end]
                break
            size = len(partial) + nl - pos
            if size:
                last = data[nl - 1] if nl > pos else partial[-1]
                size -= 1 if last == _CR else 0
            if size > limit:
                partial.clear()
                self._pending = data[nl + 1 :]
                raise self._refuse(frames)
            if partial:
                partial += memoryview(data)[pos:nl]
                if partial[-1] == _CR:
                    del partial[-1]
                frame = bytes(partial)
                partial.clear()
            else:
                stop = nl - 1 if nl > pos and data[nl - 1] == _CR else nl
                frame = data[pos:stop]
            if frame and not frame.isspace():
                frames.append(frame)
            pos = nl + 1
        return frames

    def feed_eof(self) -> bytes | None:
        """Say that the stream ended; return its unterminated last frame, if any, and reset.

        The end of the stream ends the last line as ``\\n`` would (a final ``\\r`` is stripped);
        a blank last line gives ``None``, as does the rest of an oversized frame (already
        reported). Raises :class:`LocalProtocolError` if bytes left unscanned by a
        :class:`FrameTooLarge` are still pending: call ``feed(b"")`` first to frame them.
        """
        if self._pending:
            raise LocalProtocolError(
                f"feed_eof() was called while {len(self._pending)} bytes that followed an "
                'oversized frame are still unframed; call feed(b"") to collect their frames '
                "first, then feed_eof()"
            )
        frame = bytes(self._partial)
        self._partial.clear()
        self._discarding = False
        if frame.endswith(b"\r"):
            frame = frame[:-1]
        if not frame or frame.isspace():
            return None
        return frame

    def _refuse(self, frames_before: list[bytes]) -> FrameTooLarge:
        exc = FrameTooLarge(
            f"the server sent a frame (one line) longer than {self._max} bytes; it was refused "
            "and skipped up to its newline. If the server legitimately sends bigger messages, "
            f"raise max_frame_bytes (now {self._max}) in the server's config.",
            limit=self._max,
        )
        exc.frames_before = frames_before
        return exc


def encode_frame(payload: bytes) -> bytes:
    """Return one serialised message as a frame: ``payload + b"\\n"``.

    Raises :class:`LocalProtocolError` if ``payload`` contains ``\\n`` or ``\\r``: a stdio
    message must not contain embedded newlines (serialise JSON without indentation; JSON
    escapes newlines inside strings).
    """
    if b"\n" in payload or b"\r" in payload:
        raise LocalProtocolError(
            "a framed message must not contain a newline (\\n) or carriage return (\\r) byte; "
            "serialise the JSON on one line, without indentation"
        )
    return payload + b"\n"
