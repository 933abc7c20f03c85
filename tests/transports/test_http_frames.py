"""``split_incoming`` (a server's HTTP body or SSE event data, cut into frames) never raises,
whatever the bytes; and ``describe_outgoing`` reads our own frames, however deep."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.protocol.hostile_json import KINDS, Kind, answer_frame, as_bytes, at_depth, json_texts
from trio_mcp.protocol import (
    MAX_JSON_DEPTH,
    InvalidMessage,
    LocalProtocolError,
    Notification,
    Request,
    Response,
    parse_message,
    serialize,
)
from trio_mcp.transports.http._http_base import Outgoing, describe_outgoing, split_incoming


def _check_frames(data: bytes, frames: list[tuple[bytes, int | str | None]]) -> None:
    """What ``split_incoming`` promises for any input: at least one frame, each bytes with an
    id or None, and each frame one that ``parse_message`` decides on with nothing but
    ``InvalidMessage``."""
    assert frames
    for frame, rid in frames:
        assert isinstance(frame, bytes)
        assert rid is None or type(rid) in (int, str)
        for allow_batch in (False, True):
            try:
                parse_message(frame, allow_batch=allow_batch)
            except InvalidMessage:
                continue


def test_a_batch_item_with_a_lone_surrogate_is_cut_into_an_ascii_frame() -> None:
    data = (
        b'[{"jsonrpc":"2.0","id":1,"result":{"t":"\\ud800 \xc3\xa9"}},'
        b'{"jsonrpc":"2.0","id":2,"result":{}}]'
    )
    frames = split_incoming(data)
    assert frames == [
        (b'{"jsonrpc":"2.0","id":1,"result":{"t":"\\ud800 \\u00e9"}}', 1),
        (b'{"jsonrpc":"2.0","id":2,"result":{}}', 2),
    ]
    first = parse_message(frames[0][0])
    assert first == Response(id=1, result={"t": "\ud800 \u00e9"})


@pytest.mark.parametrize(
    "data",
    [
        b'["\xed\xa0\x80"]',  # a surrogate written in UTF-8 bytes: not UTF-8
        b'\xff[{"jsonrpc":"2.0","id":1,"result":{}}]',
        '[{"jsonrpc":"2.0","id":1,"result":{}}]'.encode("utf-16"),
        b'\xef\xbb\xbf[{"jsonrpc":"2.0","id":1,"result":{}}]',  # a BOM, as parse_message refuses
        b"[" * 100_000 + b"]" * 100_000,
        b'[{"a":' * 50_000,
        b'{"jsonrpc":"2.0","id":1,"result":' + b"[" * 100_000,
        b"[" + b"9" * 5000 + b"]",
    ],
)
def test_what_cannot_be_cut_is_passed_on_whole(data: bytes) -> None:
    assert split_incoming(data) == [(data, None)]
    assert at_depth(500, split_incoming, data) == [(data, None)]


@pytest.mark.parametrize("kind", KINDS)
def test_deep_batches_are_cut_or_passed_on_from_any_stack(kind: Kind) -> None:
    for depth in (MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1, 900):
        item = answer_frame(kind, depth).encode()
        data = b"[" + item + b"]"
        for stack in (0, 500):
            frames = at_depth(stack, split_incoming, data)
            assert frames in ([(item, 1)], [(data, None)])
            _check_frames(data, frames)


@given(st.binary())
def test_arbitrary_bytes_never_raise(data: bytes) -> None:
    frames = split_incoming(data)
    _check_frames(data, frames)


@given(json_texts())
def test_arbitrary_json_never_raises(text: str) -> None:
    data = as_bytes(text)
    frames = split_incoming(data)
    _check_frames(data, frames)
    assert at_depth(500, split_incoming, data) in (frames, [(data, None)])


def test_our_own_deep_frames_are_described() -> None:
    arguments = json.loads("[" * 600 + "]" * 600)
    frame = serialize(Request(id=7, method="tools/call", params={"arguments": arguments}))
    assert describe_outgoing(frame) == Outgoing(requests=(7,), method="tools/call")
    cancel = serialize(Notification(method="notifications/cancelled", params={"requestId": 7}))
    assert describe_outgoing(cancel) == Outgoing(
        requests=(), method="notifications/cancelled", cancels=(7,)
    )
    with pytest.raises(LocalProtocolError, match="not JSON-RPC"):
        describe_outgoing(b"[" * 100_000)
