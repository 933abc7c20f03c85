"""``salvage_response_ids``: the ids of the answers in a frame that ``parse_message`` refused.

A call whose answer arrives in a frame the session cannot parse (a batch on a revision without
batches, an answer glued to a truncated line, a truncated WebSocket message) would otherwise
wait for its whole timeout. The function reads only the top level of each message, never takes
a request's id, never raises, and its work is linear in the input.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from tests.protocol.hostile_json import at_depth
from trio_mcp.protocol import (
    ErrorObject,
    ErrorResponse,
    InvalidMessage,
    Message,
    Notification,
    Request,
    RequestId,
    Response,
    parse_message,
    salvage_response_ids,
    serialize,
)


def refused(data: bytes | str, *, allow_batch: bool = False) -> bool:
    try:
        parse_message(data, allow_batch=allow_batch)
    except InvalidMessage:
        return True
    return False


# --------------------------------------------------------------------------- the three cases


def test_a_batch_on_a_revision_without_batches_gives_the_ids_of_its_answers() -> None:
    frame = serialize(
        [
            Response(id=1, result={}),
            Request(id=7, method="ping"),
            ErrorResponse(id="b", error=ErrorObject(code=-32000, message="no")),
            Notification(method="notifications/progress"),
            ErrorResponse(id=None, error=ErrorObject(code=-32700, message="parse error")),
        ]
    )
    assert refused(frame)
    assert salvage_response_ids(frame) == (1, "b")


def test_an_answer_glued_to_a_truncated_line_gives_its_id() -> None:
    frame = b'{"jsonrpc":"2.0","id":3,"result":{}}{"jsonrp'
    assert refused(frame)
    assert salvage_response_ids(frame) == (3,)


def test_a_truncated_answer_gives_the_id_read_before_the_cut() -> None:
    frame = b'{"jsonrpc":"2.0","id":3,"res'
    assert refused(frame)
    assert salvage_response_ids(frame) == (3,)


def test_answers_glued_on_one_line_give_every_id_and_the_cut_one() -> None:
    frame = (
        '{"jsonrpc":"2.0","id":1,"result":{}} {"jsonrpc":"2.0","id":2,"error":'
        '{"code":1,"message":"x"}}\r{"jsonrpc":"2.0","id":3,"result":{"content":[{"ty'
    )
    assert salvage_response_ids(frame) == (1, 2, 3)


def test_a_truncated_batch_gives_the_ids_of_its_whole_items_and_of_the_cut_one() -> None:
    frame = '[{"jsonrpc":"2.0","id":1,"result":{}}, {"jsonrpc":"2.0","id":2,"result":{"a":[1,'
    assert refused(frame, allow_batch=True)
    assert salvage_response_ids(frame) == (1, 2)


def test_a_batch_with_one_bad_item_gives_every_answer() -> None:
    frame = '[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","id":2,"result":[]}]'
    assert refused(frame, allow_batch=True)
    assert salvage_response_ids(frame) == (1, 2)


def test_an_answer_that_is_invalid_further_on_gives_its_id() -> None:
    assert salvage_response_ids(b'{"jsonrpc":"2.0","id":3,"result":{"x":NaN}}') == (3,)
    assert salvage_response_ids(b'{"jsonrpc":"2.0","id":3,"result":{"x":01}}') == (3,)
    assert salvage_response_ids(b'{"jsonrpc":"2.0","id":3,"result":{"t":"\xff\xfe"}}') == (3,)
    assert salvage_response_ids('\ufeff{"jsonrpc":"2.0","id":4,"result":{}}') == (4,)
    assert salvage_response_ids(b'{"jsonrpc":"1.0","id":5,"result":{}}') == (5,)


# --------------------------------------------------------------------------- what is never taken


@pytest.mark.parametrize(
    "frame",
    [
        # An id nested in params or result is not the message's.
        '{"jsonrpc":"2.0","method":"x","params":{"id":3,"result":{}}}',
        '{"jsonrpc":"2.0","method":"x","params":{"id":3,"result":{}',
        '{"jsonrpc":"2.0","result":{"id":9},"error":{"id":9}}',
        '{"jsonrpc":"2.0","result":{"id":9,"x":[1,2',
        '[{"jsonrpc":"2.0","result":{"id":9}}]',
        # Requests and notifications, whole or cut after their method or params.
        '{"jsonrpc":"2.0","id":4,"method":"sampling/createMessage","params":{}}garbage',
        '{"jsonrpc":"2.0","id":4,"method":"sampling/createMessage","par',
        '{"jsonrpc":"2.0","id":4,"method":"sampl',
        '{"jsonrpc":"2.0","id":4,"params":{"a":',
        '[{"jsonrpc":"2.0","id":4,"method":"ping"},{"jsonrpc":"2.0","id":5,"method":"pi',
        # An id that may have been cut in the middle (12 of 123?), or that is not an id.
        '{"jsonrpc":"2.0","id":12',
        '{"jsonrpc":"2.0","id":12.5,"result":{}}',
        '{"jsonrpc":"2.0","id":true,"result":{}}',
        '{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}',
        '{"jsonrpc":"2.0","id":[3],"result":{}}',
        '{"jsonrpc":"2.0","id":3}',
        '{"jsonrpc":"2.0","id":' + "9" * 5000 + ',"result":{}}',
        # Garbage first: nothing is searched for.
        'x{"jsonrpc":"2.0","id":3,"result":{}}',
        '5 {"jsonrpc":"2.0","id":3,"result":{}}',
        "",
        "   ",
        "[]",
        "{}",
        '"id"',
    ],
)
def test_nothing_but_top_level_answer_ids_is_taken(frame: str) -> None:
    assert salvage_response_ids(frame) == ()
    assert salvage_response_ids(frame.encode("utf-8")) == ()


@pytest.mark.parametrize(
    "frame",
    [
        "[" * 100_000,
        "[" * 100_000 + "]" * 100_000,
        '{"a":' * 100_000,
        '{"a":' * 100_000 + "1" + "}" * 100_000,
        '[{"a":' * 50_000,
        '{"jsonrpc":"2.0","method":"x","params":' + "[" * 100_000,
    ],
)
def test_deep_nesting_gives_nothing_even_from_a_deep_stack(frame: str) -> None:
    assert salvage_response_ids(frame) == ()
    assert at_depth(500, salvage_response_ids, frame.encode()) == ()


def test_an_id_read_before_deep_nesting_is_kept() -> None:
    assert salvage_response_ids('{"jsonrpc":"2.0","id":3,"result":' + "[" * 100_000) == (3,)
    assert salvage_response_ids('{"jsonrpc":"2.0","id":3,"result":' + "[{" * 50_000) == (3,)
    assert salvage_response_ids('[{"jsonrpc":"2.0","id":3,"result":' + "[" * 100_000) == (3,)
    glued = '{"jsonrpc":"2.0","id":1,"result":{}}' + '{"a":' * 100_000
    assert at_depth(500, salvage_response_ids, glued) == (1,)


def test_reading_is_bounded_to_a_thousand_messages() -> None:
    answers = [Response(id=index, result={}) for index in range(1200)]
    glued = b"".join(serialize(answer) for answer in answers)
    assert salvage_response_ids(glued) == tuple(range(1000))
    assert salvage_response_ids(serialize(answers)) == tuple(range(1000))
    members = "".join(f'"k{index}":0,' for index in range(2000))
    assert salvage_response_ids('{"jsonrpc":"2.0","id":1,' + members + '"result":{') == (1,)


# --------------------------------------------------------------------------- properties

_json: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=8,
)
#: Ids as we could send them: strings without lone surrogates (not UTF-8).
_ids: st.SearchStrategy[RequestId] = st.integers() | st.text(
    st.characters(exclude_categories=["Cs"]), max_size=8
)
#: Members a message may carry besides the envelope's (never method or params).
_extras = st.dictionaries(
    st.text(max_size=6).filter(
        lambda key: key not in {"id", "method", "params", "result", "error"}
    ),
    _json,
    max_size=2,
)
_separators = st.sampled_from([(",", ":"), (", ", ": "), (" ,\n", " :\t")])


def _object_text(
    members: list[tuple[str, Any]], separators: tuple[str, str]
) -> tuple[str, dict[str, int], dict[str, int]]:
    """JSON text of an object with ``members`` in that order, where each member's key ends in
    it, and where its value ends."""
    item, key_sep = separators
    text = "{"
    key_ends: dict[str, int] = {}
    ends: dict[str, int] = {}
    for index, (key, value) in enumerate(members):
        if index:
            text += item
        text += json.dumps(key, ensure_ascii=False)
        key_ends[key] = len(text)
        text += key_sep + json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        ends[key] = len(text)
    return text + "}", key_ends, ends


@st.composite
def responses(draw: st.DrawFn) -> tuple[str, RequestId, dict[str, int]]:
    """A valid response (or error response) as text, with its members in any order."""
    rid = draw(_ids)
    if draw(st.booleans()):
        answer: tuple[str, Any] = ("result", draw(st.dictionaries(st.text(max_size=4), _json)))
    else:
        answer = ("error", {"code": draw(st.integers()), "message": draw(st.text(max_size=8))})
    members = [("jsonrpc", "2.0"), ("id", rid), answer, *draw(_extras).items()]
    members = draw(st.permutations(members))
    text, _, ends = _object_text(members, draw(_separators))
    return text, rid, ends


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, int]:
    """A request (or a notification) as text, its params maybe holding an ``id`` and a
    ``result``; and where its first ``method`` or ``params`` key ends in it (from there on the
    message is known not to be an answer)."""
    members: list[tuple[str, Any]] = [("jsonrpc", "2.0"), ("method", draw(st.text(max_size=8)))]
    if draw(st.booleans()):
        members.append(("id", draw(_ids)))
    params = draw(st.none() | st.dictionaries(st.sampled_from(["id", "result", "x"]), _json))
    if params is not None:
        members.append(("params", params))
    members = draw(st.permutations(members))
    text, key_ends, _ = _object_text(members, draw(_separators))
    return text, min(key_ends[key] for key in ("method", "params") if key in key_ends)


@given(responses(), st.data())
def test_any_cut_after_the_id_gives_the_id(
    response: tuple[str, RequestId, dict[str, int]], data: st.DataObject
) -> None:
    text, rid, ends = response
    # A number at the very end may have been cut short (12 of 123): count it from its delimiter.
    first = ends["id"] + (0 if isinstance(rid, str) else 1)
    cut = data.draw(st.integers(first, len(text)), label="cut")
    frame = text[:cut].encode("utf-8")
    if cut < len(text):
        assert refused(frame, allow_batch=True)
    assert salvage_response_ids(frame) == (rid,)


@given(responses(), st.text(), st.binary())
def test_a_whole_answer_with_any_garbage_after_it_gives_the_id_first(
    response: tuple[str, RequestId, dict[str, int]], garbage: str, raw: bytes
) -> None:
    text, rid, _ = response
    assert salvage_response_ids(text + garbage)[:1] == (rid,)
    assert salvage_response_ids(text.encode() + raw)[:1] == (rid,)


@given(requests(), st.data())
def test_a_request_never_gives_its_id(request: tuple[str, int], data: st.DataObject) -> None:
    text, known = request
    cut = data.draw(st.integers(known, len(text)), label="cut")
    assert salvage_response_ids(text[:cut]) == ()
    assert salvage_response_ids(text + '{"jsonrp') == ()


@given(st.lists(st.one_of(responses(), requests()), min_size=1, max_size=5))
def test_a_batch_gives_the_ids_of_its_answers_in_order(
    items: list[tuple[str, RequestId, dict[str, int]] | tuple[str, int]],
) -> None:
    frame = "[" + ",".join(item[0] for item in items) + "]"
    expected = tuple(item[1] for item in items if len(item) == 3)
    assert salvage_response_ids(frame) == expected
    assert salvage_response_ids(frame.encode()) == expected


@given(st.lists(st.one_of(responses(), requests()), min_size=1, max_size=4))
def test_batches_of_messages_parse_message_refuses_give_their_answers(
    items: list[tuple[str, RequestId, dict[str, int]] | tuple[str, int]],
) -> None:
    messages: list[Message] = []
    for item in items:
        parsed = parse_message(item[0])
        assert isinstance(parsed, Request | Notification | Response | ErrorResponse)
        messages.append(parsed)
    frame = serialize(messages)
    assert refused(frame, allow_batch=False)
    expected = tuple(m.id for m in messages if isinstance(m, Response | ErrorResponse))
    assert salvage_response_ids(frame) == expected


@given(st.binary())
def test_arbitrary_bytes_never_raise(data: bytes) -> None:
    ids = salvage_response_ids(data)
    assert all(type(rid) in (int, str) for rid in ids)


@given(st.text(alphabet=st.sampled_from('{}[]":,01 aeilrstdu\\\ud800\n')))
def test_arbitrary_json_like_text_never_raises(text: str) -> None:
    assume(text.strip())
    ids = salvage_response_ids(text)
    assert all(type(rid) in (int, str) for rid in ids)
    assert at_depth(300, salvage_response_ids, text) == ids
