"""Property tests: every wire type survives a round trip through JSON, unknown keys included.

The strategies are derived from the attrs classes themselves (field types, defaults), so a new
field or class is covered without writing a strategy by hand. Each generated object carries
random unknown keys in ``extra`` and a random ``_meta`` where the class has one.
"""

from __future__ import annotations

import json
import types
from collections.abc import Mapping
from functools import cache
from typing import Any, Literal, Union, get_args, get_origin

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_mcp.protocol import _types as t
from trio_mcp.protocol._codec import structure, unstructure, wire_name
from trio_mcp.protocol._methods import WIRE_TYPES, decode_result

_CLASSES = [v for v in WIRE_TYPES.values() if isinstance(v, type) and attrs.has(v)]

#: Every key any wire class knows. Unknown keys are drawn outside this set, so that an unknown key
#: can never change which member of an untagged union a value decodes as.
_KNOWN_KEYS = frozenset(wire_name(a) for cls in _CLASSES for a in attrs.fields(cls))

_CONTENT_TAGS = frozenset(
    a.default for cls in _CLASSES for a in attrs.fields(cls) if a.name == "type" and a.default
)
_INPUT_METHODS = frozenset(
    a.default
    for cls in (t.CreateMessageRequest, t.ElicitRequest, t.ListRootsRequest)
    for a in attrs.fields(cls)
    if a.name == "method"
)

_MAX_INT = 2**53
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-_MAX_INT, _MAX_INT)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)
json_objects = st.dictionaries(st.text(max_size=8), json_values, max_size=3)
unknown_keys = st.text(min_size=1, max_size=8).filter(lambda key: key not in _KNOWN_KEYS)
extras = st.dictionaries(unknown_keys, json_values, max_size=2)


def for_type(tp: Any) -> st.SearchStrategy[Any]:
    """A strategy for values of the (resolved) field type ``tp``."""
    if tp is Any:
        return json_values
    if tp is type(None):
        return st.none()
    if tp is str:
        return st.text(max_size=12)
    if tp is bool:
        return st.booleans()
    if tp is int:
        return st.integers(-_MAX_INT, _MAX_INT)
    if tp is float:
        return st.floats(allow_nan=False, allow_infinity=False)
    origin = get_origin(tp)
    args = get_args(tp)
    if origin is Literal:
        return st.sampled_from(args)
    if origin in (Union, types.UnionType):
        return st.one_of(*(for_type(arg) for arg in args))
    if origin is tuple:
        return st.lists(for_type(args[0]), max_size=3).map(tuple)
    if origin in (Mapping, dict):
        if args[1] is Any:
            return json_objects
        return st.dictionaries(st.text(max_size=6), for_type(args[1]), max_size=2)
    if isinstance(tp, type) and attrs.has(tp):
        return for_class(tp)
    raise TypeError(f"no strategy for {tp!r}")


@cache
def for_class(cls: type) -> st.SearchStrategy[Any]:
    """Instances of the wire class ``cls`` with random unknown keys and ``_meta``."""
    attrs.resolve_types(cls)
    fields: dict[str, st.SearchStrategy[Any]] = {}
    for field in attrs.fields(cls):
        if field.name == "extra":
            fields["extra"] = extras
        elif cls is t.UnknownContent and field.name == "type":
            fields["type"] = st.text(max_size=10).filter(lambda tag: tag not in _CONTENT_TAGS)
        elif cls is t.UnknownInputRequest and field.name == "method":
            fields["method"] = st.text(max_size=10).filter(lambda m: m not in _INPUT_METHODS)
        else:
            fields[field.name] = for_type(field.type)
    return st.builds(cls, **fields)


#: There are over a hundred wire types: each gets a third of the profile's examples.
_PER_TYPE = settings(max_examples=max(10, settings().max_examples // 3))


def _json_round_trip(value: Any) -> Any:
    return json.loads(json.dumps(value))


@pytest.mark.parametrize("name", sorted(WIRE_TYPES))
@_PER_TYPE
@given(data=st.data())
def test_every_wire_type_round_trips(name: str, data: st.DataObject) -> None:
    tp = WIRE_TYPES[name]
    obj = data.draw(for_type(tp), label="object")
    wire = _json_round_trip(unstructure(obj))
    decoded = structure(wire, tp)
    assert decoded == obj
    assert unstructure(decoded) == wire


def test_known_keys_cover_the_union_discriminators() -> None:
    # The untagged unions tell their members apart by these keys; the strategies rely on them
    # never appearing as unknown keys.
    assert {"text", "blob", "action", "roots", "role", "model", "taskId", "ttl", "ttlMs"} <= (
        _KNOWN_KEYS
    )
    assert {"_meta", "resultType", "type", "method", "mode"} <= _KNOWN_KEYS
    assert {
        "text",
        "image",
        "audio",
        "resource_link",
        "resource",
        "tool_use",
        "tool_result",
        "ref/prompt",
        "ref/resource",
    } == _CONTENT_TAGS


@given(
    result=for_class(t.CallToolResult).filter(lambda r: r.result_type in (None, "complete")),
)
def test_decode_result_of_any_complete_call_tool_result(result: t.CallToolResult) -> None:
    wire = _json_round_trip(unstructure(result))
    assert decode_result("tools/call", wire) == result


@given(
    result=for_class(t.InputRequiredResult), method=st.sampled_from(["tools/call", "prompts/get"])
)
def test_decode_result_of_any_input_required_result(
    result: t.InputRequiredResult, method: str
) -> None:
    result = attrs.evolve(result, result_type="input_required")
    wire = _json_round_trip(unstructure(result))
    if result.input_requests is None and result.request_state is None:
        return  # refused: covered by the exact tests
    assert decode_result(method, wire) == result
