"""JSON-RPC envelopes, parsing, serialising, id allocation and the correlation machine."""

from __future__ import annotations

import json
from types import MappingProxyType
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    rule,
)

from trio_mcp.protocol._errors import (
    InvalidMessage,
    LocalProtocolError,
    RemoteProtocolError,
)
from trio_mcp.protocol._jsonrpc import (
    CANCELLED_NOTIFICATION,
    ConnectionStatistics,
    ErrorObject,
    ErrorReceived,
    ErrorResponse,
    IdAllocator,
    JsonRpcConnection,
    Message,
    Notification,
    NotificationReceived,
    Request,
    RequestFailed,
    RequestId,
    RequestReceived,
    Response,
    ResponseReceived,
    UnexpectedResponse,
    cancel_notification,
    classify,
    encode_json,
    encode_message,
    parse_message,
    serialize,
    serialize_request,
)

# --------------------------------------------------------------------------- classify


def test_classify_request() -> None:
    msg = classify({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"cursor": "x"}})
    assert msg == Request(id=1, method="tools/list", params={"cursor": "x"})
    assert type(msg) is Request


def test_classify_request_string_id_no_params() -> None:
    assert classify({"jsonrpc": "2.0", "id": "abc", "method": "ping"}) == Request(
        id="abc", method="ping", params=None
    )


def test_classify_notification() -> None:
    msg = classify({"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert msg == Notification(method="notifications/initialized", params=None)
    assert type(msg) is Notification


def test_classify_response() -> None:
    msg = classify({"result": {"tools": []}, "jsonrpc": "2.0", "id": 7})
    assert msg == Response(id=7, result={"tools": []})


def test_classify_error_response_with_data() -> None:
    msg = classify(
        {
            "jsonrpc": "2.0",
            "id": 3,
            "error": {"code": -32602, "message": "bad", "data": {"uri": "x"}},
        }
    )
    assert msg == ErrorResponse(
        id=3, error=ErrorObject(code=-32602, message="bad", data={"uri": "x"}, has_data=True)
    )


def test_classify_error_response_data_null_vs_absent() -> None:
    null = classify({"jsonrpc": "2.0", "id": 1, "error": {"code": 1, "message": "m", "data": None}})
    absent = classify({"jsonrpc": "2.0", "id": 1, "error": {"code": 1, "message": "m"}})
    assert isinstance(null, ErrorResponse)
    assert isinstance(absent, ErrorResponse)
    assert null.error.data is None
    assert null.error.has_data is True
    assert absent.error.data is None
    assert absent.error.has_data is False
    assert null != absent
    assert encode_message(null)["error"] == {"code": 1, "message": "m", "data": None}
    assert encode_message(absent)["error"] == {"code": 1, "message": "m"}


@pytest.mark.parametrize("envelope", [{"id": None}, {}])
def test_classify_error_response_without_id(envelope: dict[str, Any]) -> None:
    msg = classify({"jsonrpc": "2.0", **envelope, "error": {"code": -32700, "message": "parse"}})
    assert msg == ErrorResponse(id=None, error=ErrorObject(code=-32700, message="parse"))


def test_classify_ignores_unknown_top_level_keys() -> None:
    assert classify({"jsonrpc": "2.0", "method": "x", "extra": [1], "_meta": {}}) == Notification(
        method="x"
    )


def test_error_object_has_data_default() -> None:
    assert ErrorObject(code=1, message="m").has_data is False
    assert ErrorObject(code=1, message="m", data=0).has_data is True
    assert ErrorObject(code=1, message="m", data=None, has_data=True).has_data is True


@pytest.mark.parametrize(
    ("obj", "path", "problem"),
    [
        ([], "$", "expected a JSON-RPC message object, got an array"),
        ("x", "$", "expected a JSON-RPC message object, got a string"),
        (None, "$", "expected a JSON-RPC message object, got null"),
        ({"id": 1, "method": "m"}, "$.jsonrpc", '"jsonrpc": "2.0" is missing'),
        (
            {"jsonrpc": "1.0", "id": 1, "method": "m"},
            "$.jsonrpc",
            '"jsonrpc" must be "2.0", got \'1.0\'',
        ),
        ({"jsonrpc": 2.0, "method": "m"}, "$.jsonrpc", '"jsonrpc" must be "2.0", got 2.0'),
        (
            {"jsonrpc": "2.0", "method": 5},
            "$.method",
            "method must be a string, got a number",
        ),
        (
            {"jsonrpc": "2.0", "id": 1.5, "method": "m"},
            "$.id",
            "an id must be a string or an integer, got a number",
        ),
        (
            {"jsonrpc": "2.0", "id": True, "method": "m"},
            "$.id",
            "an id must be a string or an integer, got a boolean",
        ),
        (
            {"jsonrpc": "2.0", "id": None, "method": "m"},
            "$.id",
            "an id must be a string or an integer, got null",
        ),
        (
            {"jsonrpc": "2.0", "id": [1], "result": {}},
            "$.id",
            "an id must be a string or an integer, got an array",
        ),
        (
            {"jsonrpc": "2.0", "id": None, "result": {}},
            "$.id",
            "an id must be a string or an integer, got null",
        ),
        (
            {"jsonrpc": "2.0", "result": {}},
            "$.id",
            "a response must carry the id of its request",
        ),
        (
            {"jsonrpc": "2.0", "id": 1, "method": "m", "params": [1, 2]},
            "$.params",
            "params must be an object (MCP never passes params by position), got an array",
        ),
        (
            {"jsonrpc": "2.0", "method": "m", "params": None},
            "$.params",
            "params must be an object (MCP never passes params by position), got null",
        ),
        (
            {"jsonrpc": "2.0", "id": 1, "result": [1]},
            "$.result",
            "result must be an object, got an array",
        ),
        (
            {"jsonrpc": "2.0", "id": 1, "result": None},
            "$.result",
            "result must be an object, got null",
        ),
        (
            {"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1, "message": "m"}},
            "$",
            "a response cannot carry both 'result' and 'error'",
        ),
        (
            {"jsonrpc": "2.0", "id": 1, "method": "m", "result": {}},
            "$.result",
            "a message with a method cannot also carry 'result'",
        ),
        (
            {"jsonrpc": "2.0", "method": "m", "error": {}},
            "$.error",
            "a message with a method cannot also carry 'error'",
        ),
        (
            {"jsonrpc": "2.0", "id": 1, "error": "boom"},
            "$.error",
            "error must be an object, got a string",
        ),
        (
            {"jsonrpc": "2.0", "id": 1, "error": {"code": "x", "message": "m"}},
            "$.error.code",
            "error.code must be an integer, got a string",
        ),
        (
            {"jsonrpc": "2.0", "id": 1, "error": {"code": -32600.0, "message": "m"}},
            "$.error.code",
            "error.code must be an integer, got a number",
        ),
        (
            {"jsonrpc": "2.0", "id": 1, "error": {"code": True, "message": "m"}},
            "$.error.code",
            "error.code must be an integer, got a boolean",
        ),
        (
            {"jsonrpc": "2.0", "id": 1, "error": {"message": "m"}},
            "$.error.code",
            "error.code must be an integer, got nothing",
        ),
        (
            {"jsonrpc": "2.0", "id": 1, "error": {"code": 1, "message": None}},
            "$.error.message",
            "error.message must be a string, got null",
        ),
        (
            {"jsonrpc": "2.0", "id": 1, "error": {"code": 1}},
            "$.error.message",
            "error.message must be a string, got nothing",
        ),
        (
            {"jsonrpc": "2.0", "id": {}, "error": {"code": 1, "message": "m"}},
            "$.id",
            "an id must be a string or an integer, got an object",
        ),
        (
            {"jsonrpc": "2.0", "id": 1},
            "$",
            "not a JSON-RPC message: it has no method, result or error",
        ),
    ],
)
def test_classify_invalid(obj: Any, path: str, problem: str) -> None:
    with pytest.raises(InvalidMessage) as info:
        classify(obj)
    assert info.value.path == path
    assert str(info.value) == f"invalid JSON-RPC message: {problem} @ {path}"
    assert info.value.errors == (f"{problem} @ {path}",)
    assert isinstance(info.value, RemoteProtocolError)


def test_classify_path_prefix() -> None:
    with pytest.raises(InvalidMessage) as info:
        classify({"jsonrpc": "2.0", "id": 1, "error": {"code": 1}}, path="$[4]")
    assert info.value.path == "$[4].error.message"


def test_classify_long_jsonrpc_value_is_shortened() -> None:
    with pytest.raises(InvalidMessage) as info:
        classify({"jsonrpc": "x" * 100, "method": "m"})
    assert str(info.value) == (
        'invalid JSON-RPC message: "jsonrpc" must be "2.0", got \'' + "x" * 36 + "... @ $.jsonrpc"
    )


# --------------------------------------------------------------------------- parse_message


def test_parse_bytes_and_str() -> None:
    raw = '{"jsonrpc":"2.0","id":1,"result":{"text":"héllo ✓"}}'
    expected = Response(id=1, result={"text": "héllo ✓"})
    assert parse_message(raw) == expected
    assert parse_message(raw.encode()) == expected


def test_parse_invalid_utf8() -> None:
    with pytest.raises(InvalidMessage) as info:
        parse_message(b'{"jsonrpc":"2.0","method":"\xff"}')
    assert info.value.path == "$"
    assert str(info.value) == (
        'message is not valid UTF-8 (byte 27): \'{"jsonrpc":"2.0","method":"\ufffd"}\''
    )


def test_parse_invalid_json() -> None:
    with pytest.raises(InvalidMessage) as info:
        parse_message(b"{not json")
    assert info.value.path == "$"
    assert str(info.value) == (
        "message is not valid JSON (Expecting property name enclosed in double quotes: "
        "line 1 column 2 (char 1)): '{not json'"
    )


def test_parse_invalid_json_excerpt_is_bounded() -> None:
    data = "[" + "1," * 500
    with pytest.raises(InvalidMessage) as info:
        parse_message(data)
    excerpt = str(info.value).split("): ", 1)[1]
    assert excerpt == repr(data[:80]) + "..."


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_parse_rejects_nan_and_infinity(constant: str) -> None:
    with pytest.raises(InvalidMessage) as info:
        parse_message(f'{{"jsonrpc":"2.0","id":1,"result":{{"x":{constant}}}}}')
    assert info.value.path == "$"
    assert f"({constant} is not valid JSON)" in str(info.value)


def test_parse_deep_nesting_is_invalid_not_a_crash() -> None:
    with pytest.raises(InvalidMessage) as info:
        parse_message("[" * 100_000 + "]" * 100_000)
    assert info.value.path == "$"
    assert str(info.value).startswith("message is nested too deeply to parse: '[[[[")


def test_parse_batch_refused_by_default() -> None:
    with pytest.raises(InvalidMessage) as info:
        parse_message('[{"jsonrpc":"2.0","method":"a"}]')
    assert info.value.path == "$"
    assert str(info.value) == (
        "got a JSON array (a batch): batches are only valid in protocol version 2025-03-26: "
        '\'[{"jsonrpc":"2.0","method":"a"}]\''
    )


def test_parse_batch_allowed() -> None:
    raw = (
        '[{"jsonrpc":"2.0","method":"a"},{"jsonrpc":"2.0","id":2,"result":{}},'
        '{"jsonrpc":"2.0","id":"r","method":"ping"}]'
    )
    assert parse_message(raw, allow_batch=True) == (
        Notification(method="a"),
        Response(id=2, result={}),
        Request(id="r", method="ping"),
    )


def test_parse_single_message_when_batches_allowed() -> None:
    assert parse_message('{"jsonrpc":"2.0","method":"a"}', allow_batch=True) == Notification(
        method="a"
    )


def test_parse_empty_batch() -> None:
    with pytest.raises(InvalidMessage) as info:
        parse_message("[]", allow_batch=True)
    assert info.value.path == "$"
    assert str(info.value) == "got an empty batch: a batch must hold at least one message"


def test_parse_batch_item_path() -> None:
    raw = (
        '[{"jsonrpc":"2.0","method":"a"},{"jsonrpc":"2.0","id":2,"result":{}},'
        '{"jsonrpc":"2.0","method":1}]'
    )
    with pytest.raises(InvalidMessage) as info:
        parse_message(raw, allow_batch=True)
    assert info.value.path == "$[2].method"


# --------------------------------------------------------------------------- encode / serialize


def test_serialize_request_exact_bytes() -> None:
    out = serialize(Request(id=1, method="tools/call", params={"name": "echo", "arguments": {}}))
    assert (
        out
        == b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}'
    )


def test_serialize_each_kind() -> None:
    assert (
        serialize(Request(id="a", method="ping")) == b'{"jsonrpc":"2.0","id":"a","method":"ping"}'
    )
    assert serialize(Notification(method="n", params={"x": [1, 2]})) == (
        b'{"jsonrpc":"2.0","method":"n","params":{"x":[1,2]}}'
    )
    assert serialize(Response(id=2, result={})) == b'{"jsonrpc":"2.0","id":2,"result":{}}'
    assert (
        serialize(ErrorResponse(id=None, error=ErrorObject(code=-32700, message="Parse error")))
        == b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}'
    )
    assert (
        serialize(ErrorResponse(id=4, error=ErrorObject(code=-1, message="no", data=[1])))
        == b'{"jsonrpc":"2.0","id":4,"error":{"code":-1,"message":"no","data":[1]}}'
    )


def test_serialize_non_ascii_is_utf8_and_no_newline() -> None:
    out = serialize(Notification(method="n", params={"t": "é\n✓"}))
    assert out == '{"jsonrpc":"2.0","method":"n","params":{"t":"é\\n✓"}}'.encode()
    assert b"\n" not in out


def test_serialize_mappings_and_tuples() -> None:
    params = MappingProxyType({"a": MappingProxyType({"b": (1, 2)})})
    assert serialize(Request(id=1, method="m", params=params)) == (
        b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":{"b":[1,2]}}}'
    )
    assert encode_message(Request(id=1, method="m", params=params))["params"] == {
        "a": MappingProxyType({"b": (1, 2)})
    }
    assert type(encode_message(Request(id=1, method="m", params=params))["params"]) is dict


def test_serialize_batch() -> None:
    out = serialize([Notification(method="a"), Request(id=1, method="b")])
    assert out == b'[{"jsonrpc":"2.0","method":"a"},{"jsonrpc":"2.0","id":1,"method":"b"}]'


def test_serialize_empty_batch() -> None:
    with pytest.raises(LocalProtocolError, match=r"^cannot send an empty batch$"):
        serialize([])


def test_serialize_nan_is_refused() -> None:
    with pytest.raises(LocalProtocolError) as info:
        serialize(Response(id=1, result={"x": float("nan")}))
    assert str(info.value) == (
        "cannot serialise the message to JSON: Out of range float values are not JSON compliant"
    )


def test_serialize_unknown_object_is_refused() -> None:
    with pytest.raises(LocalProtocolError) as info:
        serialize(Response(id=1, result={"x": object()}))
    assert (
        str(info.value) == "cannot serialise the message to JSON: object is not JSON serialisable"
    )


def test_serialize_a_value_that_contains_itself_is_refused() -> None:
    looped: dict[str, Any] = {"a": 1}
    looped["self"] = looped
    with pytest.raises(LocalProtocolError) as info:
        serialize(Response(id=1, result=looped))
    assert str(info.value) == (
        "cannot serialise the message to JSON: a value in it contains itself, or it is "
        "nested too deeply"
    )


def test_serialize_too_deep_nesting_is_refused_not_a_crash() -> None:
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(LocalProtocolError, match=r"nested too deeply$"):
        serialize(Response(id=1, result={"deep": deep}))
    # the shared encoder is unharmed by the failure
    assert serialize(Response(id=2, result={"a": [1]})) == (
        b'{"jsonrpc":"2.0","id":2,"result":{"a":[1]}}'
    )


def test_serialize_same_bytes_as_the_standard_encoder() -> None:
    result = {"text": "é ☃ \n \u2028 \x00", "n": [1, -2.5, 10**30, None, True], "t": (1, 2)}
    expected = json.dumps(
        {"jsonrpc": "2.0", "id": 7, "result": result},
        ensure_ascii=False,
        allow_nan=False,
        separators=(",", ":"),
    ).encode("utf-8")
    assert serialize(Response(id=7, result=result)) == expected


def test_parse_a_byte_order_mark_is_invalid_as_json_loads_says() -> None:
    with pytest.raises(InvalidMessage) as info:
        parse_message("\ufeff" + '{"jsonrpc":"2.0","method":"m"}')
    assert info.value.path == "$"
    assert str(info.value).startswith(
        "message is not valid JSON (Unexpected UTF-8 BOM (decode using utf-8-sig): "
        "line 1 column 1 (char 0)): "
    )


def test_parse_the_shared_decoder_keeps_no_state_between_frames() -> None:
    with pytest.raises(InvalidMessage):
        parse_message(b'{"jsonrpc":"2.0","id":1,"result":{"x":NaN}}')
    with pytest.raises(InvalidMessage):
        parse_message(b'{"jsonrpc":"2.0","id":1,"result":')
    assert parse_message(b'{"jsonrpc":"2.0","id":1,"result":{"x":1.5}}') == Response(
        id=1, result={"x": 1.5}
    )


def test_encode_puts_jsonrpc_first() -> None:
    msgs: list[Message] = [
        Request(id=1, method="m"),
        Notification(method="m"),
        Response(id=1, result={}),
        ErrorResponse(id=1, error=ErrorObject(code=1, message="m")),
    ]
    for msg in msgs:
        assert next(iter(encode_message(msg))) == "jsonrpc"


def test_encode_refuses_non_messages() -> None:
    with pytest.raises(LocalProtocolError, match=r"^cannot encode \{'a': 1\}: not a JSON-RPC"):
        encode_message({"a": 1})  # type: ignore[arg-type]


# --------------------------------------------------------------------------- round trips

_json_leaf = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
_json = st.recursive(
    _json_leaf,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=10,
)
_objects = st.dictionaries(st.text(max_size=5), _json, max_size=4)
_ids = st.integers() | st.text(max_size=8)


@given(
    _ids, st.text(max_size=12), st.none() | _objects.filter(lambda p: "_meta" not in p), _objects
)
def test_serialize_request_with_an_encoded_meta_equals_the_merged_params(
    request_id: RequestId, method: str, params: dict[str, Any] | None, meta: dict[str, Any]
) -> None:
    # a 2026-07-28 session encodes its envelope once and puts it in as the params' last member
    merged = {**(params or {}), "_meta": meta}
    assert serialize_request(request_id, method, params, meta=encode_json(meta)) == serialize(
        Request(id=request_id, method=method, params=merged)
    )


def test_serialize_request_refuses_an_encoded_meta_beside_params_meta() -> None:
    with pytest.raises(LocalProtocolError, match="params hold a _meta of their own"):
        serialize_request(1, "tools/call", {"_meta": {}}, meta=b"{}")


def test_encode_json_refuses_what_is_not_json() -> None:
    assert encode_json({"a": ["é", 1.5, None]}) == '{"a":["é",1.5,null]}'.encode()
    with pytest.raises(LocalProtocolError, match="cannot serialise the message to JSON"):
        encode_json({"a": float("nan")})


_errors = st.builds(
    lambda code, message, data, has: ErrorObject(
        code=code, message=message, data=data if has else None, has_data=has
    ),
    st.integers(),
    st.text(),
    _json,
    st.booleans(),
)
_messages: st.SearchStrategy[Message] = st.one_of(
    st.builds(Request, id=_ids, method=st.text(), params=st.none() | _objects),
    st.builds(Notification, method=st.text(), params=st.none() | _objects),
    st.builds(Response, id=_ids, result=_objects),
    st.builds(ErrorResponse, id=st.none() | _ids, error=_errors),
)


@given(_messages)
def test_round_trip_one(msg: Message) -> None:
    data = serialize(msg)
    assert parse_message(data) == msg
    assert json.loads(data) == encode_message(msg)
    assert classify(encode_message(msg)) == msg


@given(st.lists(_messages, min_size=1, max_size=5))
def test_round_trip_batch(msgs: list[Message]) -> None:
    assert parse_message(serialize(msgs), allow_batch=True) == tuple(msgs)


@given(st.binary(max_size=200))
def test_parse_arbitrary_bytes_only_raises_invalid_message(data: bytes) -> None:
    path: str | None = "$"
    try:
        parse_message(data, allow_batch=True)
    except InvalidMessage as exc:
        path = exc.path
    assert path is not None
    assert path.startswith("$")


@given(_json)
def test_classify_arbitrary_json_only_raises_invalid_message(value: Any) -> None:
    try:
        msg = classify(value)
    except InvalidMessage as exc:
        path = exc.path
    else:
        assert isinstance(msg, Request | Notification | Response | ErrorResponse)
        path = "$"
    assert path is not None
    assert path.startswith("$")


# --------------------------------------------------------------------------- ids


def test_id_allocator() -> None:
    ids = IdAllocator()
    assert [ids.next() for _ in range(3)] == [1, 2, 3]
    ids.advance_past(2)
    assert ids.next() == 4
    ids.advance_past(10)
    ids.advance_past("20")
    assert ids.next() == 11
    assert repr(ids) == "<IdAllocator next=12>"


# --------------------------------------------------------------------------- the connection


def test_request_response_cycle() -> None:
    conn = JsonRpcConnection()
    req = conn.start_request("tools/list", {"cursor": "c"})
    assert req == Request(id=1, method="tools/list", params={"cursor": "c"})
    assert dict(conn.outstanding) == {1: "tools/list"}
    event = conn.receive(Response(id=1, result={"tools": []}))
    assert event == ResponseReceived(id=1, method="tools/list", result={"tools": []})
    assert dict(conn.outstanding) == {}
    assert conn.statistics() == ConnectionStatistics(
        outstanding=0, inbound_in_flight=0, sent_total=1, received_total=1
    )


def test_ids_increase_and_are_never_reused() -> None:
    conn = JsonRpcConnection()
    first = conn.start_request("a")
    conn.receive(Response(id=first.id, result={}))
    assert [conn.start_request("b").id for _ in range(3)] == [2, 3, 4]


def test_error_received() -> None:
    conn = JsonRpcConnection()
    conn.start_request("resources/read", {"uri": "x"})
    error = ErrorObject(code=-32002, message="not found", data={"uri": "x"})
    assert conn.receive(ErrorResponse(id=1, error=error)) == ErrorReceived(
        id=1, method="resources/read", error=error
    )
    assert not conn.outstanding


def test_error_with_null_id() -> None:
    conn = JsonRpcConnection()
    conn.start_request("a")
    error = ErrorObject(code=-32700, message="Parse error")
    assert conn.receive(ErrorResponse(id=None, error=error)) == ErrorReceived(
        id=None, method=None, error=error
    )
    assert dict(conn.outstanding) == {1: "a"}


def test_unexpected_responses() -> None:
    conn = JsonRpcConnection()
    conn.start_request("a")
    bogus = Response(id=99, result={})
    assert conn.receive(bogus) == UnexpectedResponse(message=bogus)
    string_id = Response(id="1", result={})  # "1" is not 1
    assert conn.receive(string_id) == UnexpectedResponse(message=string_id)
    bogus_error = ErrorResponse(id=5, error=ErrorObject(code=1, message="m"))
    assert conn.receive(bogus_error) == UnexpectedResponse(message=bogus_error)
    assert dict(conn.outstanding) == {1: "a"}


def test_duplicate_response_is_unexpected() -> None:
    conn = JsonRpcConnection()
    conn.start_request("a")
    conn.receive(Response(id=1, result={}))
    again = Response(id=1, result={"x": 1})
    assert conn.receive(again) == UnexpectedResponse(message=again)


def test_given_ids() -> None:
    conn = JsonRpcConnection()
    assert conn.start_request("a", id="x").id == "x"
    assert conn.start_request("b", id=5).id == 5
    assert conn.start_request("c").id == 6  # the allocator never hands out 5
    with pytest.raises(LocalProtocolError) as info:
        conn.start_request("d", id="x")
    assert str(info.value) == (
        "request id 'x' is still in flight (a); choose another id or let the connection "
        "allocate one"
    )
    assert dict(conn.outstanding) == {"x": "a", 5: "b", 6: "c"}


@pytest.mark.parametrize("bad", [True, 1.0, None, [1]])
def test_given_id_must_be_str_or_int(bad: Any) -> None:
    conn = JsonRpcConnection()
    if bad is None:
        assert conn.start_request("a", id=bad).id == 1
        return
    with pytest.raises(LocalProtocolError) as info:
        conn.start_request("a", id=bad)
    assert str(info.value) == f"a request id is a string or an integer, not {bad!r}"


def test_expect_records_a_request_built_elsewhere() -> None:
    conn = JsonRpcConnection()
    conn.expect(5, "tools/call")
    conn.expect("x", "tools/list")
    assert dict(conn.outstanding) == {5: "tools/call", "x": "tools/list"}
    assert conn.statistics().sent_total == 2
    assert conn.start_request("ping").id == 1  # expect leaves the allocator alone
    with pytest.raises(LocalProtocolError) as info:
        conn.expect(5, "again")
    assert str(info.value) == (
        "request id 5 is still in flight (tools/call); ids of requests in flight must differ"
    )
    with pytest.raises(LocalProtocolError) as info:
        conn.expect(True, "a")
    assert str(info.value) == "a request id is a string or an integer, not True"
    assert conn.receive(Response(id=5, result={})) == ResponseReceived(
        id=5, method="tools/call", result={}
    )
    conn.close()
    with pytest.raises(LocalProtocolError) as info:
        conn.expect(6, "tools/call")
    assert str(info.value) == (
        "cannot expect an answer to tools/call: the connection was lost; open a new connection"
    )


def test_notification_builds_only() -> None:
    conn = JsonRpcConnection()
    assert conn.notification("notifications/initialized") == Notification(
        method="notifications/initialized"
    )
    assert conn.notification("n", {"a": 1}) == Notification(method="n", params={"a": 1})
    assert not conn.outstanding
    assert conn.statistics().sent_total == 2


def test_cancel() -> None:
    conn = JsonRpcConnection()
    conn.start_request("tools/call")
    conn.start_request("tools/call")
    assert conn.cancel(1, "timed out after 5 s") == Notification(
        method=CANCELLED_NOTIFICATION, params={"requestId": 1, "reason": "timed out after 5 s"}
    )
    assert conn.cancel(2) == Notification(method="notifications/cancelled", params={"requestId": 2})
    assert conn.cancel(1) is None
    assert conn.cancel(42) is None
    late = Response(id=1, result={})
    assert conn.receive(late) == UnexpectedResponse(message=late)


def test_cancel_notification_is_pure() -> None:
    assert cancel_notification(3, "tools/call", "the client stopped waiting") == Notification(
        method=CANCELLED_NOTIFICATION,
        params={"requestId": 3, "reason": "the client stopped waiting"},
    )
    assert cancel_notification("a", "tools/list") == Notification(
        method=CANCELLED_NOTIFICATION, params={"requestId": "a"}
    )
    assert cancel_notification(1, "initialize", "timeout") is None  # never cancelled


def test_cancel_initialize_forgets_without_a_notification() -> None:
    conn = JsonRpcConnection()
    conn.start_request("initialize", {"protocolVersion": "2025-11-25"})
    assert conn.cancel(1, "timeout") is None
    assert not conn.outstanding


def test_forget() -> None:
    conn = JsonRpcConnection()
    conn.start_request("tools/call")
    sent = conn.statistics().sent_total
    assert conn.forget(1) is True
    assert conn.forget(1) is False
    assert not conn.outstanding
    assert conn.statistics().sent_total == sent


def test_server_request_and_answers() -> None:
    conn = JsonRpcConnection()
    ping = Request(id="s1", method="ping")
    roots = Request(id=7, method="roots/list")
    assert conn.receive(ping) == RequestReceived(request=ping)
    assert conn.receive(roots) == RequestReceived(request=roots)
    assert dict(conn.inbound) == {"s1": "ping", 7: "roots/list"}
    assert conn.respond("s1", {}) == Response(id="s1", result={})
    assert conn.respond_error(7, -32601, "roots not supported") == ErrorResponse(
        id=7, error=ErrorObject(code=-32601, message="roots not supported")
    )
    assert not conn.inbound
    with pytest.raises(LocalProtocolError) as info:
        conn.respond("s1", {})
    assert str(info.value) == (
        "cannot answer request 's1': the server has no such request in flight (never "
        "received, already answered, or cancelled by the server)"
    )
    assert conn.statistics() == ConnectionStatistics(
        outstanding=0, inbound_in_flight=0, sent_total=2, received_total=2
    )


def test_respond_error_with_data() -> None:
    conn = JsonRpcConnection()
    conn.receive(Request(id=1, method="elicitation/create"))
    assert conn.respond_error(1, -32602, "bad mode", {"mode": "url"}) == ErrorResponse(
        id=1,
        error=ErrorObject(code=-32602, message="bad mode", data={"mode": "url"}, has_data=True),
    )


def test_respond_to_unknown_request() -> None:
    conn = JsonRpcConnection()
    with pytest.raises(LocalProtocolError, match=r"^cannot answer request 3: "):
        conn.respond_error(3, 1, "m")


def test_inbound_cancelled() -> None:
    conn = JsonRpcConnection()
    conn.receive(Request(id=1, method="sampling/createMessage"))
    assert conn.inbound_cancelled(1) is True
    assert conn.inbound_cancelled(1) is False
    assert conn.inbound_cancelled("nope") is False
    with pytest.raises(LocalProtocolError):
        conn.respond(1, {})


def test_a_machine_that_does_not_track_inbound_requests() -> None:
    # Whoever answers the server keeps track of its requests: the machine records none, checks
    # no reused id, and builds no answer.
    conn = JsonRpcConnection(track_inbound=False)
    conn.start_request("tools/call")
    ping = Request(id=1, method="ping")
    assert conn.receive(ping) == RequestReceived(request=ping)
    assert conn.receive(ping) == RequestReceived(request=ping)  # the same id again: passed on
    assert not conn.inbound
    assert conn.statistics().inbound_in_flight == 0
    assert conn.inbound_cancelled(1) is False
    with pytest.raises(LocalProtocolError) as info:
        conn.respond(1, {})
    assert str(info.value) == (
        "cannot answer request 1: this connection does not track server requests "
        "(track_inbound=False); build the Response or ErrorResponse directly"
    )
    with pytest.raises(LocalProtocolError, match="track_inbound=False"):
        conn.respond_error(1, -32601, "no")
    # our own requests are correlated as ever
    assert conn.receive(Response(id=1, result={})) == ResponseReceived(
        id=1, method="tools/call", result={}
    )


def test_duplicate_inbound_request_id() -> None:
    conn = JsonRpcConnection()
    conn.receive(Request(id=1, method="ping"))
    with pytest.raises(RemoteProtocolError) as info:
        conn.receive(Request(id=1, method="roots/list"))
    assert info.value.path == "$.id"
    assert str(info.value) == (
        "the server sent request 1 (roots/list) while its request with the same id (ping) is "
        "still unanswered"
    )
    assert dict(conn.inbound) == {1: "ping"}
    conn.respond(1, {})
    assert conn.receive(Request(id=1, method="roots/list")) == RequestReceived(
        request=Request(id=1, method="roots/list")
    )


def test_server_ids_do_not_clash_with_ours() -> None:
    conn = JsonRpcConnection()
    conn.start_request("tools/call")
    assert conn.receive(Request(id=1, method="ping")) == RequestReceived(
        request=Request(id=1, method="ping")
    )
    assert conn.receive(Response(id=1, result={})) == ResponseReceived(
        id=1, method="tools/call", result={}
    )
    assert conn.respond(1, {}) == Response(id=1, result={})


def test_notification_received() -> None:
    conn = JsonRpcConnection()
    note = Notification(method="notifications/tools/list_changed")
    assert conn.receive(note) == NotificationReceived(notification=note)


def test_receive_refuses_non_messages() -> None:
    conn = JsonRpcConnection()
    with pytest.raises(LocalProtocolError, match=r"^cannot receive 5: not a JSON-RPC message$"):
        conn.receive(5)  # type: ignore[arg-type]


def test_close_ends_the_machine_without_listing_the_requests() -> None:
    conn = JsonRpcConnection()
    conn.start_request("initialize")
    conn.receive(Request(id=1, method="ping"))
    conn.close()
    assert conn.closed
    assert conn.statistics() == ConnectionStatistics(
        outstanding=0, inbound_in_flight=0, sent_total=1, received_total=1
    )
    assert conn.connection_lost() == []
    conn.close()  # idempotent
    assert conn.closed


def test_connection_lost() -> None:
    conn = JsonRpcConnection()
    conn.start_request("initialize")
    conn.start_request("tools/list")
    conn.start_request("tools/call", id="mine")
    conn.receive(Response(id=2, result={}))
    conn.receive(Request(id=1, method="ping"))
    assert conn.connection_lost() == [
        RequestFailed(id=1, method="initialize"),
        RequestFailed(id="mine", method="tools/call"),
    ]
    assert conn.closed
    assert conn.statistics() == ConnectionStatistics(
        outstanding=0, inbound_in_flight=0, sent_total=3, received_total=2
    )
    assert conn.connection_lost() == []
    assert conn.cancel(1) is None
    assert conn.forget(1) is False
    assert conn.inbound_cancelled(1) is False


@pytest.mark.parametrize(
    ("action", "message"),
    [
        pytest.param(
            lambda c: c.start_request("tools/list"), "cannot start a tools/list request", id="req"
        ),
        pytest.param(lambda c: c.notification("n"), "cannot send a n notification", id="note"),
        pytest.param(
            lambda c: c.receive(Response(id=1, result={})), "cannot receive messages", id="recv"
        ),
        pytest.param(lambda c: c.respond(1, {}), "cannot answer request 1", id="respond"),
        pytest.param(
            lambda c: c.respond_error(1, 1, "m"), "cannot answer request 1", id="respond_error"
        ),
    ],
)
def test_closed_is_sticky(action: Any, message: str) -> None:
    conn = JsonRpcConnection()
    conn.receive(Request(id=1, method="ping"))
    conn.connection_lost()
    with pytest.raises(LocalProtocolError) as info:
        action(conn)
    assert str(info.value) == f"{message}: the connection was lost; open a new connection"


def test_outstanding_is_a_read_only_live_view() -> None:
    conn = JsonRpcConnection()
    view = conn.outstanding
    conn.start_request("a")
    assert dict(view) == {1: "a"}
    with pytest.raises(TypeError):
        view[2] = "b"  # type: ignore[index]


def test_repr() -> None:
    conn = JsonRpcConnection()
    conn.start_request("a")
    assert repr(conn) == "<JsonRpcConnection open outstanding=1 inbound=0>"
    conn.connection_lost()
    assert repr(conn) == "<JsonRpcConnection closed outstanding=0 inbound=0>"


def test_events_are_frozen() -> None:
    event = RequestFailed(id=1, method="m")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        event.id = 2  # type: ignore[misc]


# --------------------------------------------------------------------------- stateful


class ConnectionMachine(RuleBasedStateMachine):
    """Every request id is outstanding until exactly one of: answered, cancelled, forgotten,
    failed by connection_lost. Nothing is accepted after the connection is lost."""

    requests = Bundle("requests")

    @initialize()
    def setup(self) -> None:
        self.conn = JsonRpcConnection()
        self.model: dict[RequestId, str] = {}
        self.resolved: set[RequestId] = set()
        self.closed = False
        self.sent = 0
        self.received = 0

    @rule(target=requests, method=st.sampled_from(["tools/call", "tools/list", "initialize"]))
    def send_request(self, method: str) -> RequestId:
        if self.closed:
            with pytest.raises(LocalProtocolError):
                self.conn.start_request(method)
            return -1
        req = self.conn.start_request(method)
        assert req.id not in self.model
        assert req.id not in self.resolved
        self.model[req.id] = method
        self.sent += 1
        return req.id

    @rule(rid=consumes(requests), error=st.booleans())
    def deliver_answer(self, rid: RequestId, error: bool) -> None:
        msg: Response | ErrorResponse
        if error:
            msg = ErrorResponse(id=rid, error=ErrorObject(code=-32603, message="x"))
        else:
            msg = Response(id=rid, result={})
        if self.closed:
            with pytest.raises(LocalProtocolError):
                self.conn.receive(msg)
            return
        event = self.conn.receive(msg)
        self.received += 1
        if rid in self.model:
            method = self.model.pop(rid)
            self.resolved.add(rid)
            if error:
                assert event == ErrorReceived(id=rid, method=method, error=msg.error)  # type: ignore[union-attr]
            else:
                assert event == ResponseReceived(id=rid, method=method, result={})
        else:
            assert event == UnexpectedResponse(message=msg)

    @rule(rid=requests)
    def deliver_duplicate(self, rid: RequestId) -> None:
        if self.closed or rid in self.model:
            return
        msg = Response(id=rid, result={"again": True})
        assert self.conn.receive(msg) == UnexpectedResponse(message=msg)
        self.received += 1

    @rule(rid=consumes(requests), reason=st.none() | st.text(max_size=5))
    def cancel(self, rid: RequestId, reason: str | None) -> None:
        note = self.conn.cancel(rid, reason)
        method = self.model.pop(rid, None)
        if method is None or method == "initialize":
            assert note is None
        else:
            self.sent += 1
            assert note is not None
            assert note.method == "notifications/cancelled"
            assert note.params is not None
            assert note.params["requestId"] == rid
        if method is not None:
            self.resolved.add(rid)

    @rule(rid=consumes(requests))
    def forget(self, rid: RequestId) -> None:
        assert self.conn.forget(rid) is (rid in self.model)
        if self.model.pop(rid, None) is not None:
            self.resolved.add(rid)

    @rule()
    def connection_lost(self) -> None:
        failed = self.conn.connection_lost()
        assert failed == [RequestFailed(id=k, method=v) for k, v in self.model.items()]
        self.resolved.update(self.model)
        self.model.clear()
        self.closed = True

    @invariant()
    def matches_model(self) -> None:
        assert dict(self.conn.outstanding) == self.model
        assert self.conn.closed is self.closed
        assert self.conn.statistics() == ConnectionStatistics(
            outstanding=len(self.model),
            inbound_in_flight=0,
            sent_total=self.sent,
            received_total=self.received,
        )


TestConnectionMachine = ConnectionMachine.TestCase
