"""An incremental parser for server-sent event streams (``text/event-stream``).

It follows the WHATWG HTML "event stream interpretation" rules: UTF-8 with invalid bytes replaced
by U+FFFD and one leading byte order mark dropped; CRLF, LF and CR line ends (also when a CRLF is
split between two chunks); comment lines; the ``event``, ``data``, ``id`` and ``retry`` fields;
dispatch on an empty line. Events are returned, not delivered to callbacks, and nothing is
filtered out: an event whose data is ``""`` (an MCP "priming" event that carries only an ``id``)
is returned like any other.

Lines are split on bytes, before decoding. That is equivalent to decoding first, because the
bytes of CR, LF and ``:`` never occur inside a multi-byte UTF-8 sequence (a decoder ends a broken
sequence at them); each complete line, field name and value is then decoded as a whole, so a
character split across chunks decodes right, and the size limits count exact bytes.

Oversized events
----------------
When one line, or the data of the event being built, grows past ``max_event_bytes``,
:class:`FrameTooLarge` is raised at once, and the parser skips everything up to the next empty
line (the event boundary). At that boundary the last event ID is updated as for any boundary, but
no event is dispatched. The events that were complete in the same :meth:`SseParser.feed` call
before the error are in the exception's ``events_before`` attribute (a ``list[SseEvent]``, in
order). Bytes of the same chunk after the line at fault are kept unscanned; ``feed(b"")`` (or the
next ``feed``) parses them.
"""

from __future__ import annotations

import contextlib
from typing import Final

import attrs

from ._errors import FrameTooLarge
from ._framing import DEFAULT_MAX_FRAME_BYTES, _check_limit

__all__ = ["SseEvent", "SseParser"]

_LF: Final = 0x0A
_CR: Final = 0x0D
_COLON: Final = 0x3A
_BOM: Final = b"\xef\xbb\xbf"


@attrs.frozen(kw_only=True)
class SseEvent:
    """One dispatched server-sent event.

    ``event`` is the event type (``"message"`` when the stream gave none); ``data`` the data
    lines joined by ``"\\n"``; ``id`` the last event ID in force when the event was dispatched
    (``None`` when there is none); ``retry`` the reconnection time in milliseconds last set by
    the stream, if any.
    """

    event: str = "message"
    data: str = ""
    id: str | None = None
    retry: int | None = None


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


class SseParser:
    """Parses a server-sent event stream fed to it in chunks of bytes.

    Time is linear in the stream's length however it is split. Memory is bounded by
    ``max_event_bytes`` for the partial line plus the pending event's data (plus the current
    chunk). Raises :class:`FrameTooLarge` (with ``limit`` and ``events_before``, see the module
    docstring) when a line or an event's data is longer than ``max_event_bytes``, and
    :class:`ValueError` if ``max_event_bytes`` is not a positive integer.

    One parser can read successive streams of one event source (reconnections): after
    :meth:`feed_eof` it starts a new stream and keeps :attr:`last_event_id`, :attr:`retry` and
    :attr:`comments`.
    """

    __slots__ = (
        "_at_start",
        "_comments",
        "_data_len",
        "_data_parts",
        "_discard_event",
        "_discard_line",
        "_event_type",
        "_id_buffer",
        "_last_event_id",
        "_line_len",
        "_line_parts",
        "_max",
        "_pending",
        "_retry",
        "_skip_lf",
    )

    def __init__(self, *, max_event_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self._max = _check_limit(max_event_bytes, "max_event_bytes")
        # Line state.
        self._line_parts: list[bytes] = []  # the current unterminated line, in pieces
        self._line_len = 0
        self._skip_lf = False  # the last chunk ended with CR: a leading LF ends no line
        self._at_start = True  # the next line is the stream's first: drop a leading BOM
        self._discard_line = False  # skipping the rest of an oversized line
        self._discard_event = False  # skipping lines up to the next empty line
        self._pending = b""  # the unscanned rest of a chunk after a FrameTooLarge
        # Event state.
        self._data_parts: list[str] = []
        self._data_len = 0  # the byte length of the data as it would be dispatched
        self._event_type = ""
        self._id_buffer = ""
        # Event source state: survives feed_eof().
        self._last_event_id = ""
        self._retry: int | None = None
        self._comments = 0

    @property
    def last_event_id(self) -> str:
        """The last event ID string, set at each event boundary; ``""`` when there is none.

        Send it as ``Last-Event-ID`` when resuming the stream.
        """
        return self._last_event_id

    @property
    def retry(self) -> int | None:
        """The reconnection time in milliseconds last set by a ``retry`` field, if any."""
        return self._retry

    @property
    def comments(self) -> int:
        """How many comment lines (such as keep-alive pings) were seen."""
        return self._comments

    def feed(self, data: bytes) -> list[SseEvent]:
        """Take the next chunk of the stream; return every event it completes, in order.

        ``feed(b"")`` parses what was left unscanned after a :class:`FrameTooLarge`, and returns
        ``[]`` otherwise. Raises :class:`FrameTooLarge` when a line or an event's data is longer
        than ``max_event_bytes``; the events completed by this call before it are in the
        exception's ``events_before``.
        """
        if self._pending:
            data = self._pending + data
            self._pending = b""
        events: list[SseEvent] = []
        if not data:
            return events
        if self._skip_lf:
            self._skip_lf = False
            if data[0] == _LF:
                data = data[1:]
                if not data:
                    return events
        offset = 0
        for piece in data.splitlines(keepends=True):
            offset += len(piece)
            last = piece[-1]
            if last != _LF and last != _CR:
                # Only the final piece can lack a line end.
                self._add_partial(piece, events)
                break
            cut = 2 if last == _LF and piece.endswith(b"\r\n") else 1
            try:
                self._end_line(piece[:-cut], events)
            except FrameTooLarge:
                self._pending = data[offset:]
                # A CR that ended the chunk may be the first half of a CRLF.
                self._skip_lf = not self._pending and last == _CR
                raise
        self._skip_lf = data[-1] == _CR
        return events

    def feed_eof(self) -> list[SseEvent]:
        """Say that the stream ended, and make the parser ready for a new stream.

        Returns the events completed by bytes still left unscanned after a
        :class:`FrameTooLarge` (usually ``[]``). An incomplete event at the end of the stream is
        discarded, as WHATWG requires. Resets the line and event state (an ``id`` of the
        discarded event does not count) and keeps :attr:`last_event_id`, :attr:`retry` and
        :attr:`comments`. Raises :class:`FrameTooLarge` only if those unscanned bytes hold
        another oversized line or event; call :meth:`feed_eof` again after handling it.
        """
        events = self.feed(b"") if self._pending else []
        self._line_parts.clear()
        self._line_len = 0
        self._skip_lf = False
        self._at_start = True
        self._discard_line = False
        self._discard_event = False
        self._data_parts.clear()
        self._data_len = 0
        self._event_type = ""
        self._id_buffer = self._last_event_id
        return events

    # ------------------------------------------------------------------ lines

    def _add_partial(self, piece: bytes, events: list[SseEvent]) -> None:
        """Keep an unterminated piece of the current line (it has no CR or LF)."""
        if self._discard_line:
            return
        if self._discard_event:
            # The line is not empty, so it is not the boundary: skip all of it.
            self._discard_line = True
            return
        size = self._line_len + len(piece)
        if size > self._max:
            self._line_parts.clear()
            self._line_len = 0
            self._discard_line = True
            self._start_discarding_event()
            raise self._refuse(events)
        self._line_parts.append(piece)
        self._line_len = size

    def _end_line(self, content: bytes, events: list[SseEvent]) -> None:
        """Handle a line end; ``content`` is the line's bytes in this chunk (no terminator)."""
        if self._discard_line:
            # Part of this line was seen before, so it is not empty: not a boundary.
            self._discard_line = False
            return
        if self._discard_event:
            # Skipping an oversized event: only an empty line (the boundary) matters. A line
            # with earlier parts was already marked by _add_partial.
            if not content:
                self._discard_event = False
                self._boundary()
            return
        if self._line_parts:
            if self._line_len + len(content) > self._max:
                self._line_parts.clear()
                self._line_len = 0
                self._start_discarding_event()
                raise self._refuse(events)
            self._line_parts.append(content)
            line = b"".join(self._line_parts)
            self._line_parts.clear()
            self._line_len = 0
        else:
            if len(content) > self._max:
                self._start_discarding_event()
                raise self._refuse(events)
            line = content
        if self._at_start:
            self._at_start = False
            if line.startswith(_BOM):
                line = line[len(_BOM) :]
        self._process_line(line, events)

    def _process_line(self, line: bytes, events: list[SseEvent]) -> None:
        if not line:
            event = self._boundary()
            if event is not None:
                events.append(event)
            return
        if line[0] == _COLON:
            self._comments += 1
            return
        colon = line.find(b":")
        if colon < 0:
            field, value = line, b""
        else:
            field = line[:colon]
            start = colon + 2 if line[colon + 1 : colon + 2] == b" " else colon + 1
            value = line[start:]
        if field == b"data":
            size = self._data_len + len(value) + (1 if self._data_parts else 0)
            if size > self._max:
                self._start_discarding_event()
                raise self._refuse(events)
            self._data_parts.append(_decode(value))
            self._data_len = size
        elif field == b"event":
            self._event_type = _decode(value)
        elif field == b"id" and b"\x00" not in value:
            self._id_buffer = _decode(value)
        elif field == b"retry" and value.isdigit():
            # bytes.isdigit() is true only for ASCII digits. A value too long for int() (over
            # sys.get_int_max_str_digits() digits: millions of years) is ignored as malformed.
            with contextlib.suppress(ValueError):
                self._retry = int(value)
        # Any other field, and an id with NUL or a retry that is not all digits, is ignored.

    # ------------------------------------------------------------------ events

    def _boundary(self) -> SseEvent | None:
        """An empty line: update the last event ID, and build the event if there is data."""
        self._last_event_id = self._id_buffer
        event = None
        if self._data_parts:
            event = SseEvent(
                event=self._event_type or "message",
                data="\n".join(self._data_parts),
                id=self._last_event_id or None,
                retry=self._retry,
            )
        self._data_parts.clear()
        self._data_len = 0
        self._event_type = ""
        return event

    def _start_discarding_event(self) -> None:
        self._discard_event = True
        self._at_start = False
        self._data_parts.clear()
        self._data_len = 0

    def _refuse(self, events_before: list[SseEvent]) -> FrameTooLarge:
        exc = FrameTooLarge(
            f"the server sent an SSE line or event data longer than {self._max} bytes; the "
            "event was refused and skipped up to the next blank line. If the server "
            "legitimately sends bigger messages, raise max_frame_bytes "
            f"(now {self._max}) in the server's config.",
            limit=self._max,
        )
        exc.events_before = events_before
        return exc
