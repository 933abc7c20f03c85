"""The fast path of ``decode_result`` for the common ``tools/call`` result (text blocks only).

The fast path must accept exactly the common shape, build an object equal to (and of the same
classes as) the converter's, and leave every other input, valid or not, to the converter so that
errors and their wire paths do not change.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from trio_mcp.protocol import _methods as m
from trio_mcp.protocol import _types as t
from trio_mcp.protocol._codec import structure
from trio_mcp.protocol._errors import InvalidMessage


class _Str(str):
    """A ``str`` subclass: the converter accepts it, the fast path must decline it."""

    def __repr__(self) -> str:
        return f"_Str({str.__repr__(self)})"


class _Dict(dict[str, Any]):
    """A ``dict`` subclass: the converter accepts it, the fast path must decline it."""

    def __repr__(self) -> str:
        return f"_Dict({dict.__repr__(self)})"


def _slow(raw: Any) -> t.CallToolResult:
    """What ``decode_result("tools/call", raw)`` gave before the fast path (for inputs without
    ``resultType`` or ``task``)."""
    return structure(raw, t.CallToolResult, path="$.result")


def _is_common_shape(raw: Any) -> bool:
    """The shape the fast path promises to take, written independently of it."""
    allowed = {"content", "isError", "resultType", "_meta"}
    if type(raw) is not dict or "content" not in raw or not set(raw) <= allowed:
        return False
    if "isError" in raw and type(raw["isError"]) is not bool:
        return False
    if "resultType" in raw and not (
        type(raw["resultType"]) is str and raw["resultType"] == "complete"
    ):
        return False
    if "_meta" in raw and type(raw["_meta"]) is not dict:
        return False
    content = raw["content"]
    return type(content) is list and all(
        type(block) is dict
        and set(block) == {"type", "text"}
        and type(block["type"]) is str
        and block["type"] == "text"
        and type(block["text"]) is str
        for block in content
    )


def _outcome(decode: Any, raw: Any) -> tuple[str, Any]:
    """The decoded object, or the error's type, message, path and lines."""
    try:
        return ("ok", decode(raw))
    except InvalidMessage as exc:
        return ("error", (type(exc), str(exc), exc.path, exc.errors))


def _assert_same_object(fast: t.CallToolResult, slow: t.CallToolResult) -> None:
    assert fast == slow
    assert type(fast) is type(slow) is t.CallToolResult
    assert attrs.asdict(fast, recurse=False) == attrs.asdict(slow, recurse=False)
    assert type(fast.extra) is type(slow.extra) is dict
    assert type(fast.is_error) is type(slow.is_error)
    assert type(fast.content) is type(slow.content) is tuple
    for got, want in zip(fast.content, slow.content, strict=True):
        assert type(got) is type(want) is t.TextContent
        assert attrs.asdict(got) == attrs.asdict(want)
        assert type(got.text) is type(want.text) is str
        assert type(got.extra) is type(want.extra) is dict
    assert repr(fast) == repr(slow)


# --------------------------------------------------------------------------- examples


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"content": []}, t.CallToolResult(content=())),
        (
            {"content": [{"type": "text", "text": "hello"}]},
            t.CallToolResult(content=(t.TextContent(text="hello"),)),
        ),
        (
            {"content": [{"text": "", "type": "text"}], "isError": False},
            t.CallToolResult(content=(t.TextContent(text=""),), is_error=False),
        ),
        (
            {
                "isError": True,
                "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "é\n☃"}],
            },
            t.CallToolResult(
                content=(t.TextContent(text="a"), t.TextContent(text="é\n☃")), is_error=True
            ),
        ),
        (
            # what a 2026-07-28 server sends: resultType, and serverInfo in _meta
            {
                "content": [{"type": "text", "text": "x"}],
                "resultType": "complete",
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "s", "version": "1"}},
            },
            t.CallToolResult(
                content=(t.TextContent(text="x"),),
                result_type="complete",
                meta={"io.modelcontextprotocol/serverInfo": {"name": "s", "version": "1"}},
            ),
        ),
    ],
)
def test_common_shapes_take_the_fast_path(raw: dict[str, Any], expected: t.CallToolResult) -> None:
    fast = m._fast_call_tool_result(raw)
    assert fast is not None
    _assert_same_object(fast, expected)
    _assert_same_object(fast, _slow(raw))
    decoded = m.decode_result("tools/call", raw)
    _assert_same_object(decoded, expected)


def test_fast_path_fields_when_is_error_absent() -> None:
    result = m.decode_result("tools/call", {"content": [{"type": "text", "text": "x"}]})
    assert result.is_error is None
    assert result.meta is None
    assert result.result_type is None
    assert result.structured_content is None
    assert result.extra == {}
    (block,) = result.content
    assert (block.type, block.text, block.annotations, block.meta, block.extra) == (
        "text",
        "x",
        None,
        None,
        {},
    )
    assert result.text == "x"
    assert result.raise_for_error() is result


def test_fast_path_gives_every_object_its_own_extra() -> None:
    raw = {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
    first = m.decode_result("tools/call", raw)
    second = m.decode_result("tools/call", raw)
    extras = [first.extra, second.extra, *(b.extra for b in (*first.content, *second.content))]
    assert len({id(extra) for extra in extras}) == len(extras)


def test_fast_path_objects_encode_like_the_input() -> None:
    raw = {"content": [{"type": "text", "text": "a"}], "isError": True}
    assert m.encode(m.decode_result("tools/call", raw)) == raw
    assert m.encode(m.decode_result("tools/call", {"content": []})) == {"content": []}


def test_fast_path_is_only_for_tools_call() -> None:
    # prompts/get has no "content" list result: the fast path must not answer for it.
    with pytest.raises(InvalidMessage) as info:
        m.decode_result("prompts/get", {"content": [{"type": "text", "text": "a"}]})
    assert info.value.errors == ("required field missing @ $.result.messages",)


_IMAGE = {"type": "image", "data": "AA==", "mimeType": "image/png"}
_TEXT = {"type": "text", "text": "a"}


@pytest.mark.parametrize(
    "raw",
    [
        {"content": [_TEXT], "resultType": _Str("complete")},
        {"content": [_TEXT], "_meta": _Dict({"k": 1})},
        {"content": [_TEXT], "structuredContent": {"n": 1}},
        {"content": [_TEXT], "structuredContent": None},
        {"content": [_TEXT], "isError": False, "vendor": 1},
        {"content": [_TEXT], "vendor": 1},
        {"content": [{**_TEXT, "annotations": {"priority": 0.5}}]},
        {"content": [{**_TEXT, "_meta": {}}]},
        {"content": [{**_TEXT, "vendor": True}]},
        {"content": [_TEXT, _IMAGE]},
        {"content": [{"type": "future", "text": "a"}]},
        {"content": [{"type": "text", "text": _Str("a")}]},
        {"content": [{"type": _Str("text"), "text": "a"}]},
        {"content": [_Dict(_TEXT)]},
        {"content": (_TEXT,)},
        _Dict({"content": [_TEXT]}),
        {"content": [_TEXT], "isError": None},
    ],
    ids=repr,
)
def test_valid_near_misses_decline_to_the_converter(raw: Any) -> None:
    assert m._fast_call_tool_result(raw) is None
    assert m.decode_result("tools/call", raw) == _slow(raw)


@pytest.mark.parametrize(
    ("raw", "path", "errors"),
    [
        (
            {"content": [{"type": "text", "text": 5}]},
            "$.result.content[0].text",
            ("expected a string, got a number @ $.result.content[0].text",),
        ),
        (
            {"content": [_TEXT], "isError": "false"},
            "$.result.isError",
            ("expected true or false, got a string @ $.result.isError",),
        ),
        (
            {"content": [_TEXT], "isError": 1},
            "$.result.isError",
            ("expected true or false, got a number @ $.result.isError",),
        ),
        (
            {"content": [_TEXT, {"type": "text"}]},
            "$.result.content[1].text",
            ("required field missing @ $.result.content[1].text",),
        ),
        (
            {"content": [{"type": "image", "text": "a"}]},
            "$.result.content[0].data",
            (
                "required field missing @ $.result.content[0].data",
                "required field missing @ $.result.content[0].mimeType",
            ),
        ),
        (
            {"content": {}},
            "$.result.content",
            ("expected an array, got an object @ $.result.content",),
        ),
        (
            {"content": [_TEXT, "text"]},
            "$.result.content[1]",
            ("expected an object, got a string @ $.result.content[1]",),
        ),
        ({"isError": False}, "$.result.content", ("required field missing @ $.result.content",)),
        ({}, "$.result.content", ("required field missing @ $.result.content",)),
    ],
    ids=repr,
)
def test_invalid_results_keep_their_errors(
    raw: dict[str, Any], path: str, errors: tuple[str, ...]
) -> None:
    assert m._fast_call_tool_result(raw) is None
    with pytest.raises(InvalidMessage) as info:
        m.decode_result("tools/call", raw)
    assert info.value.path == path
    assert info.value.errors == errors
    summary = errors[0] if len(errors) == 1 else f"{errors[0]} (and {len(errors) - 1} more)"
    assert str(info.value) == f"invalid CallToolResult: {summary}"


@pytest.mark.parametrize("raw", [None, [], "content", 3])
def test_non_objects_decline(raw: Any) -> None:
    assert m._fast_call_tool_result(raw) is None
    with pytest.raises(InvalidMessage) as info:
        m.decode_result("tools/call", raw)
    assert info.value.errors == ("expected an object @ $.result",)


# --------------------------------------------------------------------------- property
#
# Raw results are the common shape, the common shape with one thing changed (a near miss: the
# likeliest way to fool the fast path), or free-form objects with the keys a result may have.

_json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
_json_objects = st.dictionaries(st.text(max_size=3), _json_scalars, max_size=2)
_texts = st.text().map(_Str) | _json_scalars | st.lists(st.text(), max_size=2)
_kinds = st.sampled_from(["image", "audio", "future", "TEXT", ""]) | (
    st.just("text").map(_Str) | st.none() | st.integers()
)
_block_extras: st.SearchStrategy[tuple[str, Any]] = st.tuples(
    st.just("annotations"), st.fixed_dictionaries({}, optional={"priority": st.floats(0, 1)})
) | st.tuples(
    st.sampled_from(["_meta", "vendor", "Text", "mimeType"]), _json_scalars | _json_objects
)
_text_blocks = st.fixed_dictionaries({"type": st.just("text"), "text": st.text()})


def _with(item: tuple[dict[str, Any], tuple[str, Any]]) -> dict[str, Any]:
    """The object with one key added or replaced."""
    obj, (key, value) = item
    return {**obj, key: value}


def _without(item: tuple[dict[str, Any], str]) -> dict[str, Any]:
    """The object with one key removed."""
    obj, key = item
    return {k: v for k, v in obj.items() if k != key}


def _insert(item: tuple[list[Any], Any, int]) -> list[Any]:
    """The list with one more item, at an index taken modulo its new length."""
    items, extra, index = item
    index %= len(items) + 1
    return [*items[:index], extra, *items[index:]]


#: A text block with one thing wrong (or a block of another kind).
_near_blocks = st.one_of(
    st.tuples(_text_blocks, _block_extras).map(_with),
    st.tuples(_text_blocks, st.tuples(st.just("type"), _kinds)).map(_with),
    st.tuples(_text_blocks, st.tuples(st.just("text"), _texts)).map(_with),
    st.tuples(_text_blocks, st.tuples(st.just("text"), st.text().map(_Str))).map(_with),
    st.tuples(_text_blocks, st.sampled_from(["type", "text"])).map(_without),
    _text_blocks.map(_Dict),
    st.fixed_dictionaries(
        {"type": st.sampled_from(["image", "audio"]), "data": st.just("AA==")},
        optional={"mimeType": st.just("image/png")},
    ),
    _json_scalars,
)
_is_error: st.SearchStrategy[Any] = st.sampled_from([None, "false", "true", 0, 1, 1.0, []])
_result_extras: st.SearchStrategy[tuple[str, Any]] = st.one_of(
    st.tuples(st.just("isError"), _is_error),
    st.tuples(st.sampled_from(["_meta", "structuredContent"]), _json_scalars | _json_objects),
    st.tuples(st.just("resultType"), st.just("complete")),
    st.tuples(st.sampled_from(["vendor", "iserror", "content "]), _json_scalars),
)
_common_results = st.fixed_dictionaries(
    {"content": st.lists(_text_blocks, max_size=4)}, optional={"isError": st.booleans()}
)
#: The common shape with one thing wrong: an extra or wrong top-level key, one bad block among
#: good ones, no content, content not a list, a dict subclass.
_near_contents = st.fixed_dictionaries(
    {
        "content": st.tuples(
            st.lists(_text_blocks, max_size=3), _near_blocks, st.integers(0, 3)
        ).map(_insert)
    },
    optional={"isError": st.booleans()},
)
_near_results = st.one_of(
    st.tuples(_common_results, _result_extras).map(_with),
    _near_contents,
    _near_contents,
    _near_contents,
    st.tuples(_common_results, st.just("content")).map(_without),
    st.tuples(
        _common_results,
        st.tuples(
            st.just("content"),
            st.lists(_text_blocks, max_size=2).map(tuple) | _json_scalars | _json_objects,
        ),
    ).map(_with),
    _common_results.map(_Dict),
)
#: Free-form objects with the keys a tools/call result may have.
_any_results = st.fixed_dictionaries(
    {},
    optional={
        "content": st.lists(_text_blocks | _near_blocks, max_size=3) | _json_scalars,
        "isError": _is_error | st.booleans(),
        "_meta": _json_objects | _json_scalars,
        "resultType": st.just("complete") | st.just(_Str("complete")),
        "structuredContent": _json_scalars | _json_objects,
    },
)


@given(st.one_of(_common_results, _near_results, _near_results, _any_results))
@example({"content": [{"type": "text", "text": _Str("a")}]})
@example({"content": [{"type": _Str("text"), "text": "a"}]})
@example({"content": [_Dict({"type": "text", "text": "a"})]})
@example(_Dict({"content": [{"type": "text", "text": "a"}]}))
@example({"content": [{"type": "text", "text": "a", "_meta": None}]})
@example({"content": [{"type": "text", "text": "a"}], "isError": 1})
@example({"content": [{"type": "text", "text": "a"}], "isError": None})
def test_fast_path_accepts_the_common_shape_and_equals_the_converter(raw: Any) -> None:
    fast = m._fast_call_tool_result(raw)
    assert (fast is not None) == _is_common_shape(raw)
    if fast is not None:
        _assert_same_object(fast, _slow(raw))
    # Whichever way decode_result goes, it answers (or fails) exactly like the converter.
    assert _outcome(lambda r: m.decode_result("tools/call", r), raw) == _outcome(_slow, raw)


# --------------------------------------------------------------------------- direct construction


def test_blocks_and_results_are_built_without_attrs_init_because_it_only_stores_fields() -> None:
    assert m._stores_only(t.TextContent, m._TEXT_FIELDS)
    assert m._stores_only(t.CallToolResult, m._CALL_RESULT_FIELDS)  # some slots on its base
    assert m._make_text is not m._make_text_with_init
    assert m._make_call_result is not m._make_call_result_with_init
    blocks = (m._make_text("a"), m._make_text("b"))
    first, second = (
        m._make_call_result(blocks, True, "complete", {"k": 1}),
        m._make_call_result(blocks, None, None, None),
    )
    _assert_same_object(
        first,
        t.CallToolResult(
            content=(t.TextContent(text="a"), t.TextContent(text="b")),
            is_error=True,
            result_type="complete",
            meta={"k": 1},
        ),
    )
    _assert_same_object(second, m._make_call_result_with_init(blocks, None, None, None))
    assert first.extra is not second.extra  # a new dict each, as attrs' factory makes
    assert blocks[0].extra is not blocks[1].extra
    assert hash(blocks[0].text) == hash("a")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        blocks[0].text = "c"  # type: ignore[misc]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        first.is_error = False  # type: ignore[misc]
    assert m._make_text_with_init("a") == blocks[0]


class _NoSlots:
    """A base without ``__slots__``: its subclasses have a ``__dict__``."""


@attrs.frozen(kw_only=True)
class _OnDictBase(_NoSlots):
    a: int


@attrs.frozen(kw_only=True)
class _SlottedBase:
    a: int


@attrs.frozen(kw_only=True)
class _SlottedChild(_SlottedBase):
    b: int


def test_slots_of_the_bases_count_and_a_base_without_slots_declines() -> None:
    assert m._stores_only(_SlottedChild, ("a", "b"))
    assert not m._stores_only(_SlottedChild, ("b",))
    assert not m._stores_only(_OnDictBase, ("a",))
    made = object.__new__(_SlottedChild)
    for setter, value in zip(m._slot_setters(_SlottedChild, ("a", "b")), (1, 2), strict=True):
        setter(made, value)
    assert made == _SlottedChild(a=1, b=2)
