"""The direct decode of ``tools/list`` entries (``fast_tool``) and pages (``decode_result``).

``check_listing`` decodes each entry with ``fast_tool``, and with the converter when it declines.
The fast path must build an object equal to (and of the same classes as) the converter's for the
entries it takes, keep unknown keys in ``extra`` as the converter keeps them, and leave every
other entry, valid or not, to the converter so that errors and their wire paths do not change.
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


def _outcome(decode: Any, raw: Any) -> tuple[str, Any]:
    """The decoded object, or the error's type, message, path and lines."""
    try:
        return ("ok", decode(raw))
    except InvalidMessage as exc:
        return ("error", (type(exc), str(exc), exc.path, exc.errors))


def _fields(obj: Any) -> list[tuple[str, type, Any]]:
    """Every field of an attrs object, recursively, with the exact type of its value."""
    out: list[tuple[str, type, Any]] = []
    for field in attrs.fields(type(obj)):
        value = getattr(obj, field.name)
        out.append((field.name, type(value), value))
        if attrs.has(type(value)):
            out.extend((f"{field.name}.{n}", k, v) for n, k, v in _fields(value))
        elif isinstance(value, tuple):
            for index, item in enumerate(value):
                if attrs.has(type(item)):
                    out.extend((f"{field.name}[{index}].{n}", k, v) for n, k, v in _fields(item))
    return out


def _assert_same_tool(fast: t.Tool, slow: t.Tool, raw: dict[str, Any]) -> None:
    assert fast == slow
    assert type(fast) is type(slow) is t.Tool
    assert _fields(fast) == _fields(slow)
    assert repr(fast) == repr(slow)
    # the extra keys come in the entry's order, like the converter's
    assert list(fast.extra) == list(slow.extra)
    # the raw JSON objects are shared with the entry, as the converter shares them
    assert fast.input_schema is raw["inputSchema"] is slow.input_schema
    for key, name in (("outputSchema", "output_schema"), ("_meta", "meta")):
        if raw.get(key) is not None:
            assert getattr(fast, name) is raw[key] is getattr(slow, name)
    # and the result encodes back to the entry (null values aside, which encode as absent)
    assert m.encode(fast) == m.encode(slow)


# --------------------------------------------------------------------------- examples

_SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}


@pytest.mark.parametrize(
    "raw",
    [
        {"name": "t", "inputSchema": _SCHEMA},
        {"name": "t", "description": "d", "inputSchema": {}},
        {
            "name": "get",
            "title": "Get",
            "description": "Gets it.",
            "inputSchema": _SCHEMA,
            "outputSchema": {"type": "object"},
            "annotations": {
                "title": "Getter",
                "readOnlyHint": True,
                "destructiveHint": False,
                "idempotentHint": True,
                "openWorldHint": False,
            },
            "execution": {"taskSupport": "optional"},
            "icons": [
                {"src": "https://x.example/i.png", "mimeType": "image/png", "sizes": ["48x48"]},
                {"src": "data:image/svg+xml;base64,AA==", "theme": "dark"},
            ],
            "_meta": {"vendor/key": [1, {"deep": True}]},
        },
        # unknown keys everywhere: kept in extra, in order
        {
            "name": "t",
            "inputSchema": _SCHEMA,
            "zeta": 1,
            "alpha": {"nested": [1, 2]},
            "extra": "a key named extra is unknown too",
            "annotations": {"readOnlyHint": False, "vendorHint": "x", "title": None},
            "execution": {"taskSupport": None, "future": [True]},
            "icons": [{"src": "s", "vendor": {"a": 1}}],
        },
        # null for every optional key reads as absent
        {
            "name": "t",
            "inputSchema": _SCHEMA,
            "title": None,
            "description": None,
            "outputSchema": None,
            "annotations": None,
            "execution": None,
            "icons": None,
            "_meta": None,
        },
        {"name": "t", "inputSchema": _SCHEMA, "icons": [], "annotations": {}},
        {"name": "", "inputSchema": {}},
    ],
    ids=repr,
)
def test_common_entries_take_the_fast_path(raw: dict[str, Any]) -> None:
    fast = m.fast_tool(raw)
    assert fast is not None
    _assert_same_tool(fast, structure(raw, t.Tool), raw)


def test_unknown_keys_survive_the_round_trip() -> None:
    raw = {
        "name": "t",
        "inputSchema": _SCHEMA,
        "x-vendor": {"a": [1]},
        "_meta": {"k": "v"},
        "annotations": {"readOnlyHint": True, "x-hint": 1},
    }
    tool = m.fast_tool(raw)
    assert tool is not None
    assert tool.extra == {"x-vendor": {"a": [1]}}
    assert tool.meta == {"k": "v"}
    assert tool.annotations is not None and tool.annotations.extra == {"x-hint": 1}
    assert m.encode(tool) == raw


def test_every_object_gets_its_own_extra() -> None:
    raw = {"name": "t", "inputSchema": {}, "annotations": {}, "icons": [{"src": "s"}]}
    first, second = m.fast_tool(raw), m.fast_tool(raw)
    assert first is not None and second is not None
    assert first.annotations is not None and second.annotations is not None
    assert first.icons is not None and second.icons is not None
    extras = [
        first.extra,
        second.extra,
        first.annotations.extra,
        second.annotations.extra,
        first.icons[0].extra,
        second.icons[0].extra,
    ]
    assert len({id(extra) for extra in extras}) == len(extras)


@pytest.mark.parametrize(
    "raw",
    [
        # valid for the converter, but not the exact JSON types the fast path takes
        {"name": _Str("t"), "inputSchema": {}},
        {"name": "t", "inputSchema": _Dict()},
        _Dict({"name": "t", "inputSchema": {}}),
        {"name": "t", "inputSchema": {}, "description": _Str("d")},
        {"name": "t", "inputSchema": {}, "icons": ({"src": "s"},)},
        {"name": "t", "inputSchema": {}, "icons": [{"src": "s", "sizes": ("1",)}]},
        {"name": "t", "inputSchema": {}, "annotations": _Dict()},
        {"name": "t", "inputSchema": {}, "outputSchema": _Dict()},
    ],
    ids=repr,
)
def test_valid_near_misses_decline_to_the_converter(raw: Any) -> None:
    assert m.fast_tool(raw) is None
    assert isinstance(structure(raw, t.Tool), t.Tool)


@pytest.mark.parametrize(
    ("raw", "errors"),
    [
        ({"inputSchema": {}}, ("required field missing @ $.result.tools[3].name",)),
        ({"name": "t"}, ("required field missing @ $.result.tools[3].inputSchema",)),
        (
            {"name": "t", "inputSchema": []},
            ("expected an object, got an array @ $.result.tools[3].inputSchema",),
        ),
        (
            {"name": 5, "inputSchema": None},
            (
                "expected a string, got a number @ $.result.tools[3].name",
                "expected an object, got null @ $.result.tools[3].inputSchema",
            ),
        ),
        (
            {"name": "t", "inputSchema": {}, "annotations": {"readOnlyHint": "yes"}},
            ("expected true or false, got a string @ $.result.tools[3].annotations.readOnlyHint",),
        ),
        (
            {"name": "t", "inputSchema": {}, "icons": [{"src": "s"}, {"sizes": "big"}]},
            (
                "required field missing @ $.result.tools[3].icons[1].src",
                "expected an array, got a string @ $.result.tools[3].icons[1].sizes",
            ),
        ),
        (
            {"name": "t", "inputSchema": {}, "execution": {"taskSupport": 1}},
            ("expected a string, got a number @ $.result.tools[3].execution.taskSupport",),
        ),
        ("t", ("expected an object, got a string @ $.result.tools[3]",)),
    ],
    ids=repr,
)
def test_invalid_entries_keep_their_errors(raw: Any, errors: tuple[str, ...]) -> None:
    assert m.fast_tool(raw) is None
    with pytest.raises(InvalidMessage) as info:
        structure(raw, t.Tool, path="$.result.tools[3]")
    assert info.value.errors == errors
    assert info.value.path == errors[0].rpartition(" @ ")[2]


# --------------------------------------------------------------------------- tools/list pages


def test_a_common_page_takes_the_fast_path() -> None:
    raw = {"tools": [{"name": "a", "inputSchema": _SCHEMA, "x": 1}], "nextCursor": "c"}
    page = m.decode_result("tools/list", raw)
    assert page == structure(raw, t.ListToolsResult)
    assert m._fast_list_tools_result(raw) == page
    assert page.next_cursor == "c"
    assert page.tools[0].extra == {"x": 1}
    assert m.decode_result("tools/list", {"tools": []}) == t.ListToolsResult(tools=())


@pytest.mark.parametrize(
    "raw",
    [
        {"tools": [{"name": "a", "inputSchema": {}}], "_meta": {"k": 1}},
        {"tools": [{"name": "a", "inputSchema": {}}], "resultType": "complete"},
        {"tools": [{"name": "a", "inputSchema": {}}], "ttlMs": 5},
        {"tools": [{"name": "a", "inputSchema": {}}, {"name": _Str("b"), "inputSchema": {}}]},
        {"tools": [{"name": "a", "inputSchema": {}}], "nextCursor": None},
        {"tools": ({"name": "a", "inputSchema": {}},)},
    ],
    ids=repr,
)
def test_other_valid_pages_decline_to_the_converter(raw: dict[str, Any]) -> None:
    if raw.get("nextCursor", "") is None:
        assert m._fast_list_tools_result(raw) is not None  # null reads as absent: still fast
    else:
        assert m._fast_list_tools_result(raw) is None
    assert m.decode_result("tools/list", raw) == structure(raw, t.ListToolsResult)


@pytest.mark.parametrize(
    ("raw", "errors"),
    [
        (
            {"tools": [{"name": "a", "inputSchema": {}}, {"name": "b"}]},
            ("required field missing @ $.result.tools[1].inputSchema",),
        ),
        ({"tools": {}}, ("expected an array, got an object @ $.result.tools",)),
        (
            {"tools": [], "nextCursor": 3},
            ("expected a string, got a number @ $.result.nextCursor",),
        ),
        ({}, ("required field missing @ $.result.tools",)),
    ],
    ids=repr,
)
def test_invalid_pages_keep_their_errors(raw: dict[str, Any], errors: tuple[str, ...]) -> None:
    assert m._fast_list_tools_result(raw) is None
    with pytest.raises(InvalidMessage) as info:
        m.decode_result("tools/list", raw)
    assert info.value.errors == errors


# --------------------------------------------------------------------------- property
#
# Entries are the common shape, the common shape with one thing changed (a near miss), or
# free-form objects with the keys a tool may have and some it may not.

_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
_json = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=6,
)
_objects = st.dictionaries(st.text(max_size=5), _json, max_size=3)
_odd: st.SearchStrategy[Any] = (
    _scalars
    | st.lists(_scalars, max_size=2)
    | st.text().map(_Str)
    | _objects.map(_Dict)
    | st.tuples(st.text())
)
_maybe_str = st.none() | st.text()
_maybe_bool = st.none() | st.booleans()
_annotations = st.fixed_dictionaries(
    {},
    optional={
        "title": _maybe_str,
        "readOnlyHint": _maybe_bool,
        "destructiveHint": _maybe_bool,
        "idempotentHint": _maybe_bool,
        "openWorldHint": _maybe_bool,
        "vendorHint": _json,
    },
)
_execution = st.fixed_dictionaries(
    {}, optional={"taskSupport": _maybe_str | st.sampled_from(["optional"]), "x": _json}
)
_icon = st.fixed_dictionaries(
    {"src": st.text()},
    optional={
        "mimeType": _maybe_str,
        "sizes": st.none() | st.lists(st.text(max_size=5), max_size=2),
        "theme": _maybe_str,
        "x": _json,
    },
)
_common = st.fixed_dictionaries(
    {"name": st.text(), "inputSchema": _objects},
    optional={
        "title": _maybe_str,
        "description": _maybe_str,
        "outputSchema": st.none() | _objects,
        "annotations": st.none() | _annotations,
        "execution": st.none() | _execution,
        "icons": st.none() | st.lists(_icon, max_size=2),
        "_meta": st.none() | _objects,
        "vendor": _json,
        "extra": _json,
    },
)
_keys = st.sampled_from(
    [
        "name",
        "title",
        "description",
        "inputSchema",
        "outputSchema",
        "annotations",
        "execution",
        "icons",
        "_meta",
        "Name",
        "input_schema",
    ]
)


def _with(item: tuple[dict[str, Any], tuple[str, Any]]) -> dict[str, Any]:
    obj, (key, value) = item
    return {**obj, key: value}


def _without(item: tuple[dict[str, Any], str]) -> dict[str, Any]:
    obj, key = item
    return {k: v for k, v in obj.items() if k != key}


def _nested(item: tuple[dict[str, Any], str, tuple[str, Any]]) -> dict[str, Any]:
    """The entry with one key of its annotations, execution or first icon changed."""
    obj, where, (key, value) = item
    if where == "icons":
        icons = obj.get("icons") or [{"src": "s"}]
        return {**obj, "icons": [{**icons[0], key: value}, *icons[1:]]}
    inner = obj.get(where) or {}
    return {**obj, where: {**inner, key: value}}


_inner_keys = st.sampled_from(
    ["title", "readOnlyHint", "openWorldHint", "taskSupport", "src", "sizes", "mimeType"]
)
_near = st.one_of(
    st.tuples(_common, st.tuples(_keys, _odd)).map(_with),
    st.tuples(_common, _keys).map(_without),
    st.tuples(
        _common,
        st.sampled_from(["annotations", "execution", "icons"]),
        st.tuples(_inner_keys, _odd),
    ).map(_nested),
    _common.map(_Dict),
)
_free = st.dictionaries(_keys, _odd | _json, max_size=5)


@given(st.one_of(_common, _near, _near, _free, _odd))
@example({"name": "t", "inputSchema": {}, "annotations": {"readOnlyHint": 1}})
@example({"name": "t", "inputSchema": {}, "annotations": {"title": _Str("x")}})
@example({"name": "t", "inputSchema": {}, "icons": [{"src": "s", "sizes": [_Str("1")]}]})
@example({"name": "t", "inputSchema": {}, "icons": [{"src": "s", "sizes": None}]})
@example({"name": "t", "inputSchema": {}, "execution": {"taskSupport": _Str("x")}})
@example({"name": "t", "inputSchema": {}, "_meta": []})
def test_fast_path_equals_the_converter(raw: Any) -> None:
    fast = m.fast_tool(raw)  # never raises
    if fast is not None:
        _assert_same_tool(fast, structure(raw, t.Tool), raw)


@given(_common)
def test_the_common_shape_always_takes_the_fast_path(raw: dict[str, Any]) -> None:
    assert m.fast_tool(raw) is not None


@given(st.lists(st.one_of(_common, _near), max_size=4), st.none() | st.text() | st.integers())
def test_pages_decode_like_the_converter(entries: list[Any], cursor: Any) -> None:
    raw: dict[str, Any] = {"tools": entries}
    if cursor is not None:
        raw["nextCursor"] = cursor
    expected = _outcome(lambda r: structure(r, t.ListToolsResult, path="$.result"), raw)
    assert _outcome(lambda r: m.decode_result("tools/list", r), raw) == expected


# --------------------------------------------------------------------------- direct construction


def test_tools_are_built_without_attrs_init_because_it_only_stores_fields() -> None:
    assert m._stores_only(t.Tool, m._TOOL_FIELDS)
    assert m._make_tool is not m._make_tool_with_init
    values: tuple[Any, ...] = (
        "n",
        "T",
        "d",
        {"type": "object"},
        {"o": 1},
        None,
        None,
        (),
        {"k": 1},
        {"x": 2},
    )
    made = m._make_tool(*values)
    expected = t.Tool(**dict(zip(m._TOOL_FIELDS, values, strict=True)))
    assert made == expected
    assert repr(made) == repr(expected)
    assert hash(made.name) == hash(expected.name)
    assert all(getattr(made, f) is getattr(expected, f) for f in m._TOOL_FIELDS)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        made.name = "other"  # type: ignore[misc]
    assert m._make_tool_with_init(*values) == expected


@attrs.frozen(kw_only=True)
class _Validated:
    a: int = attrs.field(validator=attrs.validators.instance_of(int))


@attrs.frozen(kw_only=True, cache_hash=True)
class _CachedHash:
    a: int


@attrs.frozen(kw_only=True)
class _PostInit:
    a: int

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "a", abs(self.a))


@attrs.frozen(kw_only=True)
class _Plain:
    a: int


@pytest.mark.parametrize(
    ("cls", "plain"),
    [(_Plain, True), (_Validated, False), (_CachedHash, False), (_PostInit, False)],
)
def test_only_classes_whose_init_only_stores_are_built_directly(cls: type, plain: bool) -> None:
    assert m._stores_only(cls, ("a",)) is plain
    assert m._stores_only(cls, ("b",)) is False
