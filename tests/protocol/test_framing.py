"""Tests for trio_mcp.protocol._framing: newline-delimited JSON frames."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_mcp.protocol._errors import FrameTooLarge, LocalProtocolError
from trio_mcp.protocol._framing import DEFAULT_MAX_FRAME_BYTES, NdjsonFramer, encode_frame

ERR = "FrameTooLarge"
BIG = 1 << 30


def frames_before(exc: FrameTooLarge) -> list[bytes]:
    """The frames the framer attached to a FrameTooLarge it raised."""
    frames: list[bytes] = exc.frames_before
    return frames


def too_large_message(limit: int) -> str:
    return (
        f"the server sent a frame (one line) longer than {limit} bytes; it was refused and "
        "skipped up to its newline. If the server legitimately sends bigger messages, raise "
        f"max_frame_bytes (now {limit}) in the server's config."
    )


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    """Cut ``data`` at the given offsets (duplicates give empty chunks)."""
    bounds = [0, *sorted(min(c, len(data)) for c in cuts), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


def drive(framer: NdjsonFramer, chunks: list[bytes]) -> list[bytes | str]:
    """Feed every chunk, then EOF; record frames and errors in stream order.

    After a FrameTooLarge the frames before it are recorded, then feed(b"") collects the rest
    of the chunk, as a transport that resumes after the error would do.
    """
    out: list[bytes | str] = []
    for chunk in chunks:
        data = chunk
        while True:
            try:
                out.extend(framer.feed(data))
            except FrameTooLarge as exc:
                out.extend(frames_before(exc))
                out.append(ERR)
                data = b""
            else:
                break
    last = framer.feed_eof()
    if last is not None:
        out.append(last)
    return out


# --------------------------------------------------------------------------- properties

_contents = st.one_of(
    st.binary(max_size=12).map(lambda b: b.replace(b"\n", b"")),
    st.sampled_from([b"", b" ", b"\t \x0b\x0c", b"\r", b" \r", b'{"a":1}', b"\xe2\x82\xac"]),
)


@st.composite
def ndjson_streams(draw: st.DrawFn) -> tuple[list[bytes], bytes]:
    """Complete lines (content + terminator) and an unterminated tail."""
    lines = draw(
        st.lists(
            st.tuples(_contents, st.sampled_from([b"\n", b"\r\n"])).map(lambda t: t[0] + t[1]),
            max_size=12,
        )
    )
    tail = draw(_contents) + draw(st.sampled_from([b"", b"\r"]))
    return lines, tail


def expected_frames(lines: list[bytes], tail: bytes, limit: int) -> list[bytes | str]:
    """The oracle: what framing must give, computed line by line on the whole stream."""
    out: list[bytes | str] = []
    for line in [*(line[:-1] for line in lines), tail]:
        frame = line[:-1] if line.endswith(b"\r") else line
        if len(frame) > limit:
            out.append(ERR)
        elif frame.strip(b" \t\n\r\x0b\x0c"):
            out.append(frame)
    return out


@given(stream=ndjson_streams(), data=st.data())
def test_any_split_gives_the_frames_of_the_whole_stream(
    stream: tuple[list[bytes], bytes], data: st.DataObject
) -> None:
    lines, tail = stream
    raw = b"".join(lines) + tail
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=len(raw) + 2))
    expected = expected_frames(lines, tail, BIG)
    whole = drive(NdjsonFramer(), [raw])
    assert whole == expected
    assert drive(NdjsonFramer(), split(raw, cuts)) == whole
    assert drive(NdjsonFramer(), [raw[i : i + 1] for i in range(len(raw))]) == whole


@given(stream=ndjson_streams(), limit=st.integers(1, 8), data=st.data())
def test_oversized_frames_are_refused_alike_for_any_split(
    stream: tuple[list[bytes], bytes], limit: int, data: st.DataObject
) -> None:
    lines, tail = stream
    raw = b"".join(lines) + tail
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=len(raw) + 2))
    expected = expected_frames(lines, tail, limit)
    assert drive(NdjsonFramer(max_frame_bytes=limit), [raw]) == expected
    assert drive(NdjsonFramer(max_frame_bytes=limit), split(raw, cuts)) == expected
    one_byte = [raw[i : i + 1] for i in range(len(raw))]
    assert drive(NdjsonFramer(max_frame_bytes=limit), one_byte) == expected


@given(payload=st.binary().map(lambda b: b.replace(b"\n", b"").replace(b"\r", b"")))
def test_encode_frame_round_trips(payload: bytes) -> None:
    framer = NdjsonFramer()
    expected = [payload] if payload.strip(b" \t\x0b\x0c") else []
    assert framer.feed(encode_frame(payload)) == expected
    assert framer.buffered == 0


# --------------------------------------------------------------------------- framing rules


def test_feed_returns_complete_frames_in_order_and_keeps_the_partial_one() -> None:
    framer = NdjsonFramer()
    assert framer.feed(b'{"a":1}\n{"b":2}\n{"c"') == [b'{"a":1}', b'{"b":2}']
    assert framer.buffered == 4
    assert framer.feed(b":3") == []
    assert framer.buffered == 6
    assert framer.feed(b"}\n") == [b'{"c":3}']
    assert framer.buffered == 0


def test_crlf_is_stripped_but_only_one_cr() -> None:
    framer = NdjsonFramer()
    assert framer.feed(b"a\r\nb\r\r\nc\rd\n\re\n") == [b"a", b"b\r", b"c\rd", b"\re"]


def test_crlf_split_between_chunks_is_stripped() -> None:
    framer = NdjsonFramer()
    assert framer.feed(b"abc\r") == []
    assert framer.buffered == 4
    assert framer.feed(b"\nxyz\r") == [b"abc"]
    assert framer.feed(b"\n") == [b"xyz"]


def test_blank_lines_are_skipped() -> None:
    framer = NdjsonFramer()
    assert framer.feed(b"\n\r\n  \t\n\x0b\x0c\r\n1\n \n2\n\n") == [b"1", b"2"]
    assert framer.buffered == 0


def test_bytes_are_not_interpreted() -> None:
    framer = NdjsonFramer()
    assert framer.feed(b"\xff\x00not json\n \x00 \n") == [b"\xff\x00not json", b" \x00 "]


def test_feed_empty_chunk_returns_nothing() -> None:
    framer = NdjsonFramer()
    assert framer.feed(b"") == []
    assert framer.feed(b"ab") == []
    assert framer.feed(b"") == []
    assert framer.buffered == 2


def test_feed_eof_returns_the_unterminated_last_frame_and_resets() -> None:
    framer = NdjsonFramer()
    assert framer.feed(b'{"id":1}\n{"id":2}') == [b'{"id":1}']
    assert framer.feed_eof() == b'{"id":2}'
    assert framer.buffered == 0
    assert framer.feed_eof() is None
    assert framer.feed(b"next\n") == [b"next"]


def test_feed_eof_strips_a_final_cr_and_ignores_blank_tails() -> None:
    framer = NdjsonFramer()
    framer.feed(b"last\r")
    assert framer.feed_eof() == b"last"
    framer.feed(b" \t ")
    assert framer.feed_eof() is None
    framer.feed(b"done\n")
    assert framer.feed_eof() is None


def test_max_frame_bytes_is_reported_and_validated() -> None:
    assert NdjsonFramer().max_frame_bytes == DEFAULT_MAX_FRAME_BYTES == 16 * 1024 * 1024
    assert NdjsonFramer(max_frame_bytes=10).max_frame_bytes == 10
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match="max_frame_bytes must be a positive integer"):
            NdjsonFramer(max_frame_bytes=bad)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- oversized frames


def test_a_frame_of_exactly_the_limit_is_accepted() -> None:
    framer = NdjsonFramer(max_frame_bytes=5)
    assert framer.feed(b"12345\n12345\r\n") == [b"12345", b"12345"]
    # A pending CR may be the start of CRLF: it is held, not counted.
    assert framer.feed(b"12345\r") == []
    assert framer.buffered == 6
    assert framer.feed(b"\n") == [b"12345"]


def test_oversized_complete_frame_keeps_frames_before_and_after() -> None:
    framer = NdjsonFramer(max_frame_bytes=8)
    with pytest.raises(FrameTooLarge) as info:
        framer.feed(b"one\ntwo\n" + b"x" * 9 + b"\nthree\nfo")
    assert info.value.limit == 8
    assert str(info.value) == too_large_message(8)
    assert frames_before(info.value) == [b"one", b"two"]
    assert framer.buffered == len(b"three\nfo")
    assert framer.feed(b"") == [b"three"]
    assert framer.feed(b"ur\n") == [b"four"]


def test_oversized_crlf_frame_counts_without_its_terminator() -> None:
    framer = NdjsonFramer(max_frame_bytes=3)
    with pytest.raises(FrameTooLarge) as info:
        framer.feed(b"abc\r\nabc\r\r\n")
    assert frames_before(info.value) == [b"abc"]
    assert framer.feed(b"") == []


def test_oversized_partial_frame_is_discarded_up_to_its_newline() -> None:
    framer = NdjsonFramer(max_frame_bytes=8)
    assert framer.feed(b"ok\nxxxx") == [b"ok"]
    with pytest.raises(FrameTooLarge) as info:
        framer.feed(b"xxxxx")
    assert frames_before(info.value) == []
    assert framer.buffered == 0
    assert framer.feed(b"y" * 100) == []
    assert framer.buffered == 0
    assert framer.feed(b"zz\nnext\nlast") == [b"next"]
    assert framer.feed_eof() == b"last"


def test_oversized_partial_frame_in_the_chunk_of_good_frames() -> None:
    framer = NdjsonFramer(max_frame_bytes=4)
    with pytest.raises(FrameTooLarge) as info:
        framer.feed(b"a\nb\nccccc")
    assert frames_before(info.value) == [b"a", b"b"]
    assert framer.buffered == 0
    assert framer.feed(b"c\r\nd\n") == [b"d"]


def test_several_oversized_frames_in_one_chunk_raise_one_at_a_time() -> None:
    framer = NdjsonFramer(max_frame_bytes=2)
    chunk = b"a\nxxx\nb\nyyy\nc\n"
    with pytest.raises(FrameTooLarge) as first:
        framer.feed(chunk)
    assert frames_before(first.value) == [b"a"]
    with pytest.raises(FrameTooLarge) as second:
        framer.feed(b"")
    assert frames_before(second.value) == [b"b"]
    assert framer.feed(b"") == [b"c"]


def test_oversized_blank_line_is_refused_too() -> None:
    framer = NdjsonFramer(max_frame_bytes=2)
    with pytest.raises(FrameTooLarge):
        framer.feed(b"   \nok\n")
    assert framer.feed(b"") == [b"ok"]


def test_oversized_frame_at_eof_is_reported_once() -> None:
    framer = NdjsonFramer(max_frame_bytes=3)
    with pytest.raises(FrameTooLarge):
        framer.feed(b"abcd")
    assert framer.feed_eof() is None


def test_feed_eof_refuses_while_bytes_after_an_oversized_frame_are_unframed() -> None:
    framer = NdjsonFramer(max_frame_bytes=2)
    with pytest.raises(FrameTooLarge):
        framer.feed(b"xxx\nab\ncd")
    with pytest.raises(LocalProtocolError) as info:
        framer.feed_eof()
    assert str(info.value) == (
        "feed_eof() was called while 5 bytes that followed an oversized frame are still "
        'unframed; call feed(b"") to collect their frames first, then feed_eof()'
    )
    assert framer.feed(b"") == [b"ab"]
    assert framer.feed_eof() == b"cd"


def test_20_mib_line_in_64_kib_chunks_is_refused_with_bounded_memory() -> None:
    chunk_size = 64 * 1024
    framer = NdjsonFramer()
    limit = framer.max_frame_bytes
    line = b"x" * (20 * 1024 * 1024)
    chunks = [line[i : i + chunk_size] for i in range(0, len(line), chunk_size)]
    full = limit // chunk_size  # 256 chunks fill the partial frame up to exactly the limit
    for chunk in chunks[:full]:
        assert framer.feed(chunk) == []
        assert framer.buffered <= limit
    assert framer.buffered == limit
    with pytest.raises(FrameTooLarge) as info:
        framer.feed(chunks[full])
    assert info.value.limit == DEFAULT_MAX_FRAME_BYTES
    assert frames_before(info.value) == []
    assert framer.buffered == 0
    for chunk in chunks[full + 1 :]:
        assert framer.feed(chunk) == []
        assert framer.buffered == 0
    assert framer.feed(b'\n{"jsonrpc":"2.0"}\n') == [b'{"jsonrpc":"2.0"}']


def test_long_line_in_small_chunks_is_scanned_once() -> None:
    # 8 MiB in 256-byte chunks: rescanning the partial frame on each chunk would search about
    # 128 GiB; a linear framer searches each byte once.
    framer = NdjsonFramer()
    size = 8 * 1024 * 1024
    line = b"y" * size
    for i in range(0, size, 256):
        assert framer.feed(line[i : i + 256]) == []
    assert framer.buffered == size
    assert framer.feed(b"\n") == [line]
    assert framer._scanned == size + 1


# --------------------------------------------------------------------------- encode_frame


def test_encode_frame_appends_a_newline() -> None:
    assert encode_frame(b'{"jsonrpc":"2.0","method":"ping"}') == (
        b'{"jsonrpc":"2.0","method":"ping"}\n'
    )
    assert encode_frame(b'"a\\nb"') == b'"a\\nb"\n'


@pytest.mark.parametrize("payload", [b'{"a":\n1}', b'{"a":1}\n', b'{"a":\r1}', b"\r\n"])
def test_encode_frame_rejects_embedded_newlines(payload: bytes) -> None:
    with pytest.raises(LocalProtocolError) as info:
        encode_frame(payload)
    assert str(info.value) == (
        "a framed message must not contain a newline (\\n) or carriage return (\\r) byte; "
        "serialise the JSON on one line, without indentation"
    )
