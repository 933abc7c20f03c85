"""Tests for trio_mcp.protocol._sse: the incremental server-sent events parser."""

from __future__ import annotations

import itertools
import re

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_mcp.protocol._errors import FrameTooLarge
from trio_mcp.protocol._framing import DEFAULT_MAX_FRAME_BYTES
from trio_mcp.protocol._sse import SseEvent, SseParser

ERR = "FrameTooLarge"
BIG = 1 << 30
Item = SseEvent | str


def events_before(exc: FrameTooLarge) -> list[SseEvent]:
    """The events the parser attached to a FrameTooLarge it raised."""
    events: list[SseEvent] = exc.events_before
    return events


def too_large_message(limit: int) -> str:
    return (
        f"the server sent an SSE line or event data longer than {limit} bytes; the event was "
        "refused and skipped up to the next blank line. If the server legitimately sends "
        f"bigger messages, raise max_frame_bytes (now {limit}) in the server's config."
    )


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    """Cut ``data`` at the given offsets (duplicates give empty chunks)."""
    bounds = [0, *sorted(min(c, len(data)) for c in cuts), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


@attrs.frozen
class Outcome:
    items: list[Item]
    last_event_id: str
    retry: int | None
    comments: int


def drive(parser: SseParser, chunks: list[bytes]) -> Outcome:
    """Feed every chunk, then EOF; record events and errors in stream order.

    After a FrameTooLarge the events before it are recorded, then feed(b"") (or feed_eof())
    parses the rest of the chunk, as a transport that resumes after the error would do.
    """
    items: list[Item] = []
    for chunk in chunks:
        data = chunk
        while True:
            try:
                items.extend(parser.feed(data))
            except FrameTooLarge as exc:
                items.extend(events_before(exc))
                items.append(ERR)
                data = b""
            else:
                break
    while True:
        try:
            items.extend(parser.feed_eof())
        except FrameTooLarge as exc:
            items.extend(events_before(exc))
            items.append(ERR)
        else:
            break
    return Outcome(items, parser.last_event_id, parser.retry, parser.comments)


def parse_all(stream: bytes, **kwargs: int) -> list[SseEvent]:
    """Parse a whole stream at once (EOF included); raise on an oversized event."""
    parser = SseParser(**kwargs)
    return parser.feed(stream) + parser.feed_eof()


# --------------------------------------------------------------------------- the model

_text = st.text(st.characters(codec="utf-8", exclude_characters="\r\n"), max_size=6)
_ascii_digits = frozenset("0123456789")
# (kind, value, separator between the colon and the value)
_lines = st.one_of(
    st.tuples(st.just("data"), _text, st.sampled_from(["", " "])),
    st.tuples(st.sampled_from(["data", "event", "id"]), _text, st.sampled_from(["", " "])),
    st.tuples(st.just("id"), st.just("1\x002"), st.just(" ")),
    st.tuples(
        st.just("retry"),
        st.one_of(st.integers(0, 10**9).map(str), _text),
        st.sampled_from(["", " "]),
    ),
    st.tuples(st.just("comment"), _text, st.just("")),
    st.tuples(st.sampled_from(["foo", "Data", "data ", "ids", "\ufeffdata"]), _text, st.just(" ")),
    st.tuples(st.just("bare"), st.sampled_from(["data", "event", "id", "retry", "x"]), st.just("")),
)
Line = tuple[str, str, str]


def render(line: Line) -> str:
    kind, value, sep = line
    if kind == "comment":
        return ":" + value
    if kind == "bare":
        return value
    return f"{kind}:{sep}{value}"


@attrs.define
class Model:
    """The WHATWG rules applied to structured lines (not to text), as an oracle."""

    events: list[Item] = attrs.Factory(list)
    data: list[str] | None = None
    event_type: str = ""
    id_buffer: str = ""
    last_event_id: str = ""
    retry: int | None = None
    comments: int = 0

    def line(self, line: Line) -> None:
        kind, value, sep = line
        if kind == "comment":
            self.comments += 1
            return
        if kind == "bare":
            kind, value = value, ""
        else:
            value = (sep + value)[1:] if (sep + value).startswith(" ") else sep + value
        if kind == "data":
            self.data = [*(self.data or []), value]
        elif kind == "event":
            self.event_type = value
        elif kind == "id" and "\x00" not in value:
            self.id_buffer = value
        elif kind == "retry" and value and set(value) <= _ascii_digits:
            self.retry = int(value)

    def boundary(self) -> None:
        self.last_event_id = self.id_buffer
        if self.data is not None:
            self.events.append(
                SseEvent(
                    event=self.event_type or "message",
                    data="\n".join(self.data),
                    id=self.last_event_id or None,
                    retry=self.retry,
                )
            )
        self.data = None
        self.event_type = ""


@st.composite
def sse_streams(draw: st.DrawFn) -> tuple[bytes, Outcome]:
    """A serialised event stream with random line ends, and what parsing it must give."""
    blocks = draw(st.lists(st.lists(_lines, max_size=5), max_size=5))
    trailing = draw(st.lists(_lines, max_size=3))
    unterminated = bool(trailing) and draw(st.booleans())
    model = Model()
    texts: list[str] = []
    for block in blocks:
        for line in block:
            model.line(line)
            texts.append(render(line))
        model.boundary()
        texts.append("")
    for index, line in enumerate(trailing):
        if not (unterminated and index == len(trailing) - 1):
            model.line(line)
        texts.append(render(line))
    # A stream that starts with the field name "\ufeffdata" needs a real BOM before it.
    bom = draw(st.booleans()) or (bool(texts) and texts[0].startswith("\ufeff"))
    out = "\ufeff" if bom else ""
    previous_end = ""
    for index, text in enumerate(texts):
        if unterminated and index == len(texts) - 1:
            out += text
            break
        end = draw(st.sampled_from(["\n", "\r\n", "\r"]))
        if not text and previous_end == "\r" and end == "\n":
            end = "\r"  # "\r" + "\n" would be one line end, not two
        out += text + end
        previous_end = end
    outcome = Outcome(model.events, model.last_event_id, model.retry, model.comments)
    return out.encode("utf-8"), outcome


@given(stream=sse_streams(), data=st.data())
def test_any_split_gives_the_events_of_the_whole_stream(
    stream: tuple[bytes, Outcome], data: st.DataObject
) -> None:
    raw, expected = stream
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=len(raw) + 2))
    assert drive(SseParser(), [raw]) == expected
    assert drive(SseParser(), split(raw, cuts)) == expected
    assert drive(SseParser(), [raw[i : i + 1] for i in range(len(raw))]) == expected


# --------------------------------------------------------------------------- differential


def reference_parse(stream: bytes, limit: int) -> Outcome:
    """A whole-stream, non-incremental reading of the WHATWG rules, with the size limit."""
    *lines, tail = re.split(rb"\r\n|\r|\n", stream)
    model = Model()
    data_sizes: list[int] = []  # the byte size of each data value of the pending event
    discarding = False
    first = True
    for raw in lines:
        if discarding:
            if not raw:
                discarding = False
                model.boundary()
            continue
        if len(raw) > limit:
            model.events.append(ERR)
            discarding, first, model.data, data_sizes = True, False, None, []
            continue
        if first and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        first = False
        if not raw:
            model.boundary()
            data_sizes = []
            continue
        field, colon, value = raw.partition(b":")
        if not field and colon:
            model.line(("comment", value.decode("utf-8", "replace"), ""))
            continue
        if field == b"data":
            data_sizes.append(len(value) - (1 if value.startswith(b" ") else 0))
            if sum(data_sizes) + len(data_sizes) - 1 > limit:
                model.events.append(ERR)
                discarding, model.data, data_sizes = True, None, []
                continue
        if field in (b"data", b"event", b"id", b"retry"):
            model.line((field.decode(), value.decode("utf-8", "replace"), ""))
    if not discarding and len(tail) > limit:
        model.events.append(ERR)
    return Outcome(model.events, model.last_event_id, model.retry, model.comments)


_heads = st.sampled_from(
    [b"data:", b"data: ", b"data", b"event: ", b"id: ", b"id", b"retry: ", b":", b"", b"x"]
)
_bodies = st.lists(
    st.sampled_from(
        [
            b":",
            b" ",
            b"x",
            b"7",
            b"\x00",
            b"\xef\xbb\xbf",
            b"\xe2\x82",
            b"\xac",
            b"\xff",
            b"\xc3",
            b"\xa9",
            b"\xf0\x9f\x98\x80",
            b"yyyyyyyyyyyy",
        ]
    ),
    max_size=3,
).map(b"".join)
_ends = st.sampled_from([b"\n", b"\r\n", b"\r"])
_raw_lines = st.tuples(_heads, _bodies, _ends).map(b"".join)
# Arbitrary bytes shaped like an event stream: any head, body and line end, empty lines
# (boundaries), an optional BOM and an optional unterminated tail.
_raw_streams = st.tuples(
    st.sampled_from([b"", b"\xef\xbb\xbf", b"\xef\xbb"]),
    st.lists(st.one_of(_raw_lines, _ends), max_size=20).map(b"".join),
    st.tuples(_heads, _bodies).map(b"".join),
).map(b"".join)


@given(raw=_raw_streams, data=st.data())
def test_arbitrary_bytes_parse_like_the_whole_stream_decoded_at_once(
    raw: bytes, data: st.DataObject
) -> None:
    # Splitting lines on bytes, then decoding each, equals decoding first, then splitting.
    *byte_lines, _ = re.split(rb"\r\n|\r|\n", raw)
    text = raw.decode("utf-8", "replace")
    *text_lines, _ = re.split("\r\n|\r|\n", text.removeprefix("\ufeff"))
    if byte_lines:
        byte_lines[0] = byte_lines[0].removeprefix(b"\xef\xbb\xbf")
    assert [line.decode("utf-8", "replace") for line in byte_lines] == text_lines

    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=len(raw) + 2))
    expected = reference_parse(raw, BIG)
    assert drive(SseParser(), [raw]) == expected
    assert drive(SseParser(), split(raw, cuts)) == expected
    assert drive(SseParser(), [raw[i : i + 1] for i in range(len(raw))]) == expected


@given(raw=_raw_streams, limit=st.integers(1, 24), data=st.data())
def test_oversized_events_are_refused_alike_for_any_split(
    raw: bytes, limit: int, data: st.DataObject
) -> None:
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=len(raw) + 2))
    expected = reference_parse(raw, limit)
    assert drive(SseParser(max_event_bytes=limit), [raw]) == expected
    assert drive(SseParser(max_event_bytes=limit), split(raw, cuts)) == expected
    one_byte = [raw[i : i + 1] for i in range(len(raw))]
    assert drive(SseParser(max_event_bytes=limit), one_byte) == expected


# --------------------------------------------------------------------------- line ends


@pytest.mark.parametrize("end", [b"\n", b"\r\n", b"\r"])
def test_each_line_end_kind(end: bytes) -> None:
    stream = end.join([b"event: e", b"data: a", b"data: b", b"", b"data: c", b"", b""])
    assert parse_all(stream) == [
        SseEvent(event="e", data="a\nb"),
        SseEvent(data="c"),
    ]


def test_mixed_line_ends() -> None:
    assert parse_all(b"data: a\rdata: b\r\ndata: c\n\r\n") == [SseEvent(data="a\nb\nc")]


def test_cr_then_lf_in_the_next_chunk_is_one_line_end() -> None:
    parser = SseParser()
    assert parser.feed(b"data: a\r") == []
    # Were the LF a second line end, the empty line would dispatch "a" alone.
    assert parser.feed(b"\ndata: b\r") == []
    assert parser.feed(b"\n\r") == [SseEvent(data="a\nb")]
    assert parser.feed(b"\n") == []


def test_cr_cr_is_two_line_ends() -> None:
    assert parse_all(b"data: a\r\rdata: b\r\r") == [SseEvent(data="a"), SseEvent(data="b")]


# --------------------------------------------------------------------------- decoding and BOM


def test_a_character_split_across_chunks_decodes_right() -> None:
    parser = SseParser()
    stream = "data: €😀é\n\n".encode()
    events = [event for i in range(len(stream)) for event in parser.feed(stream[i : i + 1])]
    assert events == [SseEvent(data="€😀é")]


def test_invalid_utf8_becomes_replacement_characters() -> None:
    assert parse_all(b"data: a\xffb\xe2\x82\ndata: \xed\xa0\x80\n\n") == [
        SseEvent(data="a\ufffdb\ufffd\n\ufffd\ufffd\ufffd")
    ]


def test_leading_bom_is_dropped() -> None:
    assert parse_all(b"\xef\xbb\xbfdata: a\n\n") == [SseEvent(data="a")]


def test_leading_bom_split_across_chunks_is_dropped() -> None:
    parser = SseParser()
    assert parser.feed(b"\xef") == []
    assert parser.feed(b"\xbb") == []
    assert parser.feed(b"\xbfdata: a\n\n") == [SseEvent(data="a")]


def test_only_one_leading_bom_is_dropped() -> None:
    # The second BOM belongs to the field name "\ufeffdata", which is ignored.
    assert parse_all(b"\xef\xbb\xbf\xef\xbb\xbfdata: a\n\ndata: b\n\n") == [SseEvent(data="b")]


def test_a_later_bom_is_kept() -> None:
    assert parse_all(b"data: \xef\xbb\xbfx\n\n") == [SseEvent(data="\ufeffx")]
    # At the start of the second line it is part of the field name.
    assert parse_all(b"\n\xef\xbb\xbfdata: a\n\ndata: \xef\xbb\xbf\n\n") == [
        SseEvent(data="\ufeff")
    ]


def test_a_new_stream_after_eof_may_start_with_a_bom_again() -> None:
    parser = SseParser()
    assert parser.feed(b"\xef\xbb\xbfdata: a\n\n") == [SseEvent(data="a")]
    assert parser.feed_eof() == []
    assert parser.feed(b"\xef\xbb\xbfdata: b\n\n") == [SseEvent(data="b")]


# --------------------------------------------------------------------------- fields


def test_comments_are_counted_and_ignored() -> None:
    parser = SseParser()
    assert parser.feed(b": ping - 2026-11-29\n:\n:data: no\ndata: a\n\n") == [SseEvent(data="a")]
    assert parser.comments == 3
    assert parser.feed(b": keep-alive\n\n") == []
    assert parser.comments == 4


def test_multi_line_data_is_joined_with_newlines() -> None:
    assert parse_all(b"data: a\ndata:\ndata: b\ndata: \n\n") == [SseEvent(data="a\n\nb\n")]


def test_only_one_space_after_the_colon_is_removed() -> None:
    assert parse_all(b"data:a\n\ndata: a\n\ndata:  a\n\ndata:\ta\n\n") == [
        SseEvent(data="a"),
        SseEvent(data="a"),
        SseEvent(data=" a"),
        SseEvent(data="\ta"),
    ]


def test_a_colon_in_the_value_is_kept() -> None:
    assert parse_all(b'data: {"a":"b:c"}\n\n') == [SseEvent(data='{"a":"b:c"}')]


def test_a_field_without_colon_has_an_empty_value() -> None:
    assert parse_all(b"data\ndata\n\nevent\ndata: x\n\nid: 1\nid\ndata: y\n\n") == [
        SseEvent(data="\n"),
        SseEvent(data="x"),
        SseEvent(data="y"),
    ]


def test_unknown_fields_are_ignored() -> None:
    assert parse_all(b"foo: bar\nData: no\ndata : no\ndata: x\n\n") == [SseEvent(data="x")]


def test_event_type_is_used_once_then_reset() -> None:
    assert parse_all(b"event: a\ndata: 1\n\ndata: 2\n\nevent: b\n\ndata: 3\n\n") == [
        SseEvent(event="a", data="1"),
        SseEvent(event="message", data="2"),
        SseEvent(event="message", data="3"),
    ]


def test_an_empty_event_type_means_message() -> None:
    assert parse_all(b"event: a\nevent:\ndata: x\n\n") == [SseEvent(event="message", data="x")]


def test_empty_data_is_dispatched() -> None:
    # An MCP server's priming event: an id and empty data.
    assert parse_all(b"id: abc\nretry: 3000\ndata:\n\n") == [
        SseEvent(event="message", data="", id="abc", retry=3000)
    ]
    assert parse_all(b"data\n\n") == [SseEvent(data="")]


def test_no_data_no_event() -> None:
    parser = SseParser()
    assert parser.feed(b"event: a\nid: 5\n\n\n\n") == []
    assert parser.last_event_id == "5"


def test_the_last_event_id_persists_across_events() -> None:
    parser = SseParser()
    assert parser.feed(b"id: 7\ndata: a\n\ndata: b\n\n") == [
        SseEvent(data="a", id="7"),
        SseEvent(data="b", id="7"),
    ]
    assert parser.last_event_id == "7"
    assert parser.feed(b"id\ndata: c\n\n") == [SseEvent(data="c", id=None)]
    assert parser.last_event_id == ""


def test_the_last_event_id_is_set_at_the_boundary() -> None:
    parser = SseParser()
    assert parser.feed(b"id: 1\ndata: a\n") == []
    assert parser.last_event_id == ""
    assert parser.feed(b"\n") == [SseEvent(data="a", id="1")]
    assert parser.last_event_id == "1"


def test_an_id_with_nul_is_ignored() -> None:
    parser = SseParser()
    assert parser.feed(b"id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n") == [
        SseEvent(data="a", id="1"),
        SseEvent(data="b", id="1"),
    ]
    assert parser.last_event_id == "1"


def test_retry_takes_ascii_digits_only() -> None:
    parser = SseParser()
    assert parser.retry is None
    assert parser.feed(b"retry: 1500\ndata: a\n\n") == [SseEvent(data="a", retry=1500)]
    for bad in (b"15x", b"-1", b" 15", b"", b"1.5", "\u0663".encode(), b"+1"):
        parser.feed(b"retry: " + bad + b"\n")
        assert parser.retry == 1500, bad
    assert parser.feed(b"retry:0042\ndata: b\n\n") == [SseEvent(data="b", retry=42)]


def test_retry_too_long_for_an_integer_is_ignored() -> None:
    parser = SseParser()
    parser.feed(b"retry: 5\nretry: " + b"9" * 10_000 + b"\n")
    assert parser.retry == 5


# --------------------------------------------------------------------------- end of stream


def test_an_incomplete_event_at_eof_is_discarded() -> None:
    parser = SseParser()
    assert parser.feed(b"id: 3\ndata: a\n") == []
    assert parser.feed_eof() == []
    assert parser.last_event_id == ""
    # Nothing of the discarded event leaks into the next stream.
    assert parser.feed(b"data: b\n\n") == [SseEvent(data="b")]


def test_an_unterminated_last_line_is_discarded() -> None:
    parser = SseParser()
    assert parser.feed(b"data: a\n\ndata: b") == [SseEvent(data="a")]
    assert parser.feed_eof() == []
    assert parser.feed(b"\n\n") == []


def test_eof_keeps_the_event_source_state() -> None:
    parser = SseParser()
    parser.feed(b": hi\nid: 9\nretry: 100\ndata: a\n\nid: 10\nevent: x\n")
    assert parser.feed_eof() == []
    assert (parser.last_event_id, parser.retry, parser.comments) == ("9", 100, 1)
    assert parser.feed(b"data: b\n\n") == [SseEvent(data="b", id="9", retry=100)]


def test_eof_resets_a_pending_cr() -> None:
    parser = SseParser()
    parser.feed(b"data: a\n\r")
    parser.feed_eof()
    # The LF starts a new stream; it is a line end, not the second half of a CRLF.
    assert parser.feed(b"\ndata: b\n\n") == [SseEvent(data="b")]


# --------------------------------------------------------------------------- size limit


def test_max_event_bytes_is_validated() -> None:
    for bad in (0, -5, False, "10"):
        with pytest.raises(ValueError, match="max_event_bytes must be a positive integer"):
            SseParser(max_event_bytes=bad)  # type: ignore[arg-type]


def test_a_line_of_exactly_the_limit_is_accepted() -> None:
    assert parse_all(b"data:12345\n\n", max_event_bytes=10) == [SseEvent(data="12345")]
    assert parse_all(b"data:1234\ndata:\n\n", max_event_bytes=10) == [SseEvent(data="1234\n")]


def test_an_oversized_line_is_refused_and_its_event_skipped() -> None:
    parser = SseParser(max_event_bytes=10)
    with pytest.raises(FrameTooLarge) as info:
        parser.feed(b"data: ok\n\nid: 1\ndata: 123456789\nid: 2\ndata: more\n\ndata: next\n\n")
    assert info.value.limit == 10
    assert str(info.value) == too_large_message(10)
    assert events_before(info.value) == [SseEvent(data="ok")]
    assert parser.feed(b"") == [SseEvent(data="next", id="1")]
    assert parser.last_event_id == "1"


def test_an_oversized_partial_line_is_discarded_to_the_event_boundary() -> None:
    parser = SseParser(max_event_bytes=10)
    assert parser.feed(b"data: a\n\ndata: 1234") == [SseEvent(data="a")]
    with pytest.raises(FrameTooLarge) as info:
        parser.feed(b"5")
    assert events_before(info.value) == []
    assert parser.feed(b"x" * 100) == []
    assert parser.feed(b"\r") == []
    assert parser.feed(b"\ndata: c\n") == []
    assert parser.feed(b"\n") == []
    assert parser.feed(b"data: d\n\n") == [SseEvent(data="d")]


def test_oversized_data_over_several_lines_is_refused() -> None:
    parser = SseParser(max_event_bytes=10)
    with pytest.raises(FrameTooLarge) as info:
        parser.feed(b"data: 1234\ndata: 5678\ndata: 9\ndata: x\n\ndata: y\n\n")
    assert events_before(info.value) == []
    assert parser.feed(b"") == [SseEvent(data="y")]


def test_feed_eof_parses_what_an_error_left_unscanned() -> None:
    parser = SseParser(max_event_bytes=8)
    with pytest.raises(FrameTooLarge):
        parser.feed(b"data: long\n\ndata: a\n\ndata: b")
    assert parser.feed_eof() == [SseEvent(data="a")]


def test_a_big_event_in_small_chunks_is_parsed_in_linear_time() -> None:
    # 4 MiB of data in 64-byte chunks: re-copying the partial line on each chunk would move
    # about 128 GiB; a linear parser touches each byte a few times.
    parser = SseParser()
    payload = "z" * (4 * 1024 * 1024)
    stream = b"data: " + payload.encode() + b"\ndata: " + b"\xe2\x82\xac" * 1000 + b"\n\n"
    events = []
    for i in range(0, len(stream), 64):
        events.extend(parser.feed(stream[i : i + 64]))
    assert events == [SseEvent(data=payload + "\n" + "€" * 1000)]


def test_default_limit_and_event_defaults() -> None:
    assert DEFAULT_MAX_FRAME_BYTES == 16 * 1024 * 1024
    assert SseEvent() == SseEvent(event="message", data="", id=None, retry=None)
