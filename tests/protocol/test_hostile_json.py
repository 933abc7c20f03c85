"""Deeply nested and arbitrary JSON from a server: typed errors for that message, never a crash.

``parse_message`` refuses messages nested more than ``MAX_JSON_DEPTH`` (256) deep, whatever the
caller's stack, so that code that recurses over server JSON later (``repr``, ``==``,
``json.dumps``, cattrs) has room to do it even from a deep stack. Deeper still (100,000 levels
on one line) the JSON decoder gives up and that is an ``InvalidMessage`` too. The converter's
entry points turn a ``RecursionError`` into a typed error at their boundary.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, get_origin

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.protocol.hostile_json import (
    KINDS,
    Kind,
    answer_frame,
    as_bytes,
    at_depth,
    deep_value,
    json_texts,
    nest,
)
from trio_mcp.protocol import (
    MAX_JSON_DEPTH,
    CallToolResult,
    ErrorResponse,
    FrameTooLarge,
    InvalidMessage,
    McpError,
    NdjsonFramer,
    Notification,
    Request,
    Response,
    classify,
    decode_result,
    encode,
    parse_message,
    salvage_response_ids,
    structure,
    unstructure,
)
from trio_mcp.protocol._codec import wire_name
from trio_mcp.protocol._methods import WIRE_TYPES


def outcome(fn: Any, *args: Any) -> Any:
    """``fn(*args)``, or ``"<exception class>: <message>"`` for a typed error (an ``McpError``);
    any other exception fails the test."""
    try:
        return fn(*args)
    except McpError as exc:
        return f"{type(exc).__name__}: {exc}"


# --------------------------------------------------------------------------- the depth limit


@pytest.mark.parametrize("allow_batch", [False, True])
@pytest.mark.parametrize("stack", [0, 500])
@pytest.mark.parametrize("depth", [100_000, 990, MAX_JSON_DEPTH + 1])
@pytest.mark.parametrize("kind", KINDS)
def test_a_message_nested_too_deep_is_an_invalid_message(
    kind: Kind, depth: int, stack: int, allow_batch: bool
) -> None:
    frame = answer_frame(kind, depth)
    with pytest.raises(InvalidMessage) as info:
        at_depth(stack, parse_message, frame.encode(), allow_batch=allow_batch)
    assert info.value.path is not None
    assert info.value.path.startswith("$")
    if depth < 1000 - stack - 100:  # the decoder had room: the limit refused it, wherever called
        assert f"nested more than {MAX_JSON_DEPTH} levels deep" in str(info.value)
        assert info.value.path.startswith("$.result.structuredContent")


@pytest.mark.parametrize("stack", [0, 500])
@pytest.mark.parametrize("kind", KINDS)
def test_a_batch_nested_too_deep_is_an_invalid_message(kind: Kind, stack: int) -> None:
    batch = f'[{{"jsonrpc":"2.0","method":"a"}},{answer_frame(kind, MAX_JSON_DEPTH)}]'
    with pytest.raises(InvalidMessage) as info:
        at_depth(stack, parse_message, batch, allow_batch=True)
    assert info.value.path is not None
    assert info.value.path.startswith("$[1].result.structuredContent")
    for depth in (990, 100_000):
        with pytest.raises(InvalidMessage):
            at_depth(stack, parse_message, "[" + answer_frame(kind, depth) + "]", allow_batch=True)


@pytest.mark.parametrize(
    ("kind", "path"),
    [
        ("arrays", "$.result.structuredContent" + "[0]" * 5),
        ("objects", "$.result.structuredContent" + ".a" * 5),
        ("mixed", "$.result.structuredContent[0].a[0].a[0]"),
    ],
)
def test_the_refusal_names_where_the_deep_part_starts(kind: Kind, path: str) -> None:
    with pytest.raises(InvalidMessage) as info:
        parse_message(answer_frame(kind, 300))
    assert info.value.path == path
    assert info.value.errors == (f"nested more than 256 levels deep @ {path}",)
    assert str(info.value).startswith(
        f"message is nested more than 256 levels deep (arrays and objects, under {path}); "
        'MCP messages never need that: \'{"jsonrpc":'
    )
    odd_key = '{"jsonrpc":"2.0","method":"m","params":{"a b":' + nest("arrays", 300) + "}}"
    with pytest.raises(InvalidMessage) as info:
        parse_message(odd_key)
    assert info.value.path == '$.params["a b"]' + "[0]" * 5


@pytest.mark.parametrize("kind", KINDS)
def test_nesting_up_to_the_limit_is_read_and_walked_from_a_deep_stack(kind: Kind) -> None:
    frame = answer_frame(kind, MAX_JSON_DEPTH)
    message = at_depth(500, parse_message, frame.encode())
    assert isinstance(message, Response)
    value = message.result["structuredContent"]
    assert value == deep_value(kind, MAX_JSON_DEPTH - 2)
    # What the limit is for: code that recurses once per level has room from a deep stack.
    assert at_depth(500, lambda: json.loads(json.dumps(value)) == value)
    assert at_depth(500, repr, value).count("1") == 1
    result = at_depth(500, decode_result, "tools/call", message.result)
    assert isinstance(result, CallToolResult)
    assert result.structured_content == value
    # cattrs walks raw values a few frames per level: from a shallow stack that is fine...
    assert encode(result) == {"content": [], "structuredContent": value}
    # ... and from a deep one it is a typed error, never a RecursionError.
    encoded = outcome(at_depth, 500, encode, result)
    assert encoded in (
        {"content": [], "structuredContent": value},
        "LocalProtocolError: cannot encode CallToolResult: a value in it is nested too deeply",
    )


@pytest.mark.parametrize("padding", [0, 10_000])
@pytest.mark.parametrize("kind", KINDS)
def test_the_limit_is_exact_for_short_and_long_texts(kind: Kind, padding: int) -> None:
    # Short texts and long ones are walked in two ways: both draw the line at the same depth.
    for stack in (0, 500):
        at_limit = answer_frame(kind, MAX_JSON_DEPTH, padding=padding)
        message = at_depth(stack, parse_message, at_limit)
        assert isinstance(message, Response)
        assert message.result["structuredContent"] == deep_value(kind, MAX_JSON_DEPTH - 2)
        with pytest.raises(InvalidMessage, match="nested more than 256 levels deep"):
            at_depth(stack, parse_message, answer_frame(kind, MAX_JSON_DEPTH + 1, padding=padding))


def test_the_depth_limit_is_a_parameter() -> None:
    deep = answer_frame("arrays", 900)
    assert isinstance(parse_message(deep, max_depth=None), Response)
    shallow = answer_frame("objects", 5)
    assert isinstance(parse_message(shallow, max_depth=5), Response)
    with pytest.raises(InvalidMessage, match="nested more than 4 levels deep"):
        parse_message(shallow, max_depth=4)


def test_a_value_too_deep_to_show_is_named_by_its_kind() -> None:
    message = {"jsonrpc": deep_value("arrays", 100_000), "id": 1, "result": {}}
    with pytest.raises(InvalidMessage) as info:
        classify(message)
    assert (
        str(info.value)
        == 'invalid JSON-RPC message: "jsonrpc" must be "2.0", got an array @ $.jsonrpc'
    )


# --------------------------------------------------------------------------- the converter

_DEEP = {kind: deep_value(kind, 100_000) for kind in KINDS}


def _shapes(cls: Any, deep: Any) -> list[Any]:
    """Values to decode as ``cls``: the deep value itself, and (for a class) an object with
    the deep value in every field."""
    shapes = [deep]
    if isinstance(cls, type) and attrs.has(cls):
        shapes.append({wire_name(field): deep for field in attrs.fields(cls)})
    return shapes


#: The wire types a message is decoded as. ``InputRequests`` and ``InputResponses`` are bare
#: mappings, decoded only as fields of a class (where the class reports a wrong shape): decoded
#: on their own, an array gives cattrs' AttributeError.
_DECODED = sorted(name for name, cls in WIRE_TYPES.items() if get_origin(cls) is not Mapping)


@pytest.mark.parametrize("name", _DECODED)
def test_structure_of_deep_values_is_a_value_or_an_invalid_message(name: str) -> None:
    cls = WIRE_TYPES[name]
    for kind in KINDS:
        for shape in _shapes(cls, _DEEP[kind]):
            for stack in (0, 500):
                decoded = outcome(at_depth, stack, structure, shape, cls)
                if isinstance(decoded, str):
                    assert decoded.startswith("InvalidMessage: invalid ")
                    continue
                out = outcome(at_depth, stack, unstructure, decoded)
                if isinstance(out, str):
                    assert out.startswith("LocalProtocolError: cannot encode ")
                    assert out.endswith(": a value in it is nested too deeply")
                else:
                    assert isinstance(out, dict | list)


# --------------------------------------------------------------------------- fuzz

_Parsed = Request | Notification | Response | ErrorResponse


def _parse_outcome(data: bytes | str, allow_batch: bool) -> str:
    """``"message"``, ``"batch"`` or ``"invalid @ <path>"``: what ``parse_message`` made of
    ``data``; any other exception fails the test."""
    try:
        parsed = parse_message(data, allow_batch=allow_batch)
    except InvalidMessage as exc:
        path = exc.path
        return f"invalid @ {path}"
    if isinstance(parsed, tuple):
        assert allow_batch
        assert parsed
        assert all(isinstance(message, _Parsed) for message in parsed)
        return "batch"
    assert isinstance(parsed, _Parsed)
    return "message"


@given(st.binary())
def test_arbitrary_bytes_give_a_message_or_an_invalid_message(data: bytes) -> None:
    for allow_batch in (False, True):
        assert _parse_outcome(data, allow_batch).startswith(("message", "batch", "invalid @ $"))
    assert all(type(rid) in (int, str) for rid in salvage_response_ids(data))


@given(json_texts())
def test_arbitrary_json_gives_a_message_or_an_invalid_message(text: str) -> None:
    for allow_batch in (False, True):
        parsed = _parse_outcome(text, allow_batch)
        assert parsed.startswith(("message", "batch", "invalid @ $"))
        assert _parse_outcome(as_bytes(text), allow_batch) in (parsed, "invalid @ $")
        assert at_depth(500, _parse_outcome, text, allow_batch).startswith(parsed[:7])
    for data in (text, as_bytes(text)):
        assert all(type(rid) in (int, str) for rid in salvage_response_ids(data))
        assert all(type(rid) in (int, str) for rid in at_depth(500, salvage_response_ids, data))


def _feed(framer: NdjsonFramer, chunk: bytes) -> list[bytes]:
    """The frames ``chunk`` completes, oversized ones skipped."""
    frames: list[bytes] = []
    while True:
        try:
            frames.extend(framer.feed(chunk))
            return frames
        except FrameTooLarge as exc:
            frames.extend(exc.frames_before)
            chunk = b""


@given(st.lists(st.binary(max_size=64), max_size=8), st.integers(1, 32))
def test_the_framer_takes_arbitrary_bytes(chunks: list[bytes], limit: int) -> None:
    framer = NdjsonFramer(max_frame_bytes=limit)
    frames: list[bytes] = []
    for chunk in chunks:
        frames.extend(_feed(framer, chunk))
    last = framer.feed_eof()
    frames.extend([last] if last is not None else [])
    for frame in frames:
        assert b"\n" not in frame
        assert 0 < len(frame) <= limit
