"""The 2026-07-28 HTTP request headers (``protocol/_headers.py``): the value encoding, the
``x-mcp-header`` annotations of a tool, and the headers of one message.

The expected values come from the specification's tables
(``basic/transports/streamable-http.mdx``, "Value Encoding") and from the conformance suite's
client scenarios ``http-standard-headers``, ``http-custom-headers``,
``http-invalid-tool-headers`` and ``json-schema-ref-no-deref`` (their tool listings and
arguments are copied below; their checks are mirrored by :func:`_suite_accepts`)."""

from __future__ import annotations

import base64
import re
import string
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from trio_mcp.protocol import (
    MAX_SAFE_INTEGER,
    LocalProtocolError,
    ParamHeader,
    decode_header_value,
    encode_header_value,
    param_headers,
    request_headers,
)

VERSION = "2026-07-28"
TCHARS = "!#$%&'*+-.^_`|~" + string.ascii_letters + string.digits


def schema(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


def headers_of(input_schema: Any) -> tuple[ParamHeader, ...]:
    found = param_headers(input_schema)
    assert not isinstance(found, str), found
    return found


def problem_of(input_schema: Any) -> str:
    found = param_headers(input_schema)
    assert isinstance(found, str), found
    return found


# --------------------------------------------------------------------------- value encoding


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        # The specification's table of encoding examples, verbatim.
        ("us-west1", "us-west1"),
        ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
        (" padded ", "=?base64?IHBhZGRlZCA=?="),
        ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
        ("=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
        # And around the edges.
        ("", ""),
        ("us west 1", "us west 1"),
        ("a\tb", "=?base64?YQli?="),  # a tab is always encoded (the suite expects it)
        ("\tindented", "=?base64?CWluZGVudGVk?="),
        ("x\x7f", "=?base64?eH8=?="),
        ("=?base64?", "=?base64?"),  # only a whole sentinel is ambiguous
        ("=?base64?=", "=?base64?PT9iYXNlNjQ/PQ==?="),
        ("?=", "?="),
    ],
)
def test_strings_are_sent_plain_or_as_the_base64_sentinel(value: str, encoded: str) -> None:
    assert encode_header_value(value) == encoded
    assert decode_header_value(encoded) == value


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (True, "true"),
        (False, "false"),
        (0, "0"),
        (42, "42"),
        (-7, "-7"),
        (MAX_SAFE_INTEGER, "9007199254740991"),
        (-MAX_SAFE_INTEGER, "-9007199254740991"),
        (None, None),
    ],
)
def test_integers_and_booleans_are_sent_as_json_writes_them(
    value: int | bool | None, encoded: str | None
) -> None:
    assert encode_header_value(value) == encoded


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (MAX_SAFE_INTEGER + 1, "2**53 - 1"),
        (-MAX_SAFE_INTEGER - 1, "2**53 - 1"),
        (1.5, "a number cannot go into an HTTP header"),
        ([1], "an array cannot"),
        ({"a": 1}, "an object cannot"),
        ("\ud800", "lone surrogate"),
    ],
)
def test_what_a_header_cannot_carry_is_refused_with_a_reason(value: Any, said: str) -> None:
    with pytest.raises(LocalProtocolError, match=re.escape(said)):
        encode_header_value(value)


def test_decoding_a_broken_sentinel_gives_none() -> None:
    assert decode_header_value("=?base64?not base64!?=") is None
    assert decode_header_value("=?base64?" + base64.b64encode(b"\xff").decode() + "?=") is None
    assert decode_header_value("plain") == "plain"


def _is_plain_header_value(text: str) -> bool:
    return (
        all(0x20 <= ord(c) <= 0x7E for c in text)
        and not text.startswith(" ")
        and not text.endswith(" ")
    )


@given(st.text())
@example("=?base64?literal?=")
@example(" ")
@example("\r\n")
def test_any_string_round_trips_through_a_valid_header_value(value: str) -> None:
    encoded = encode_header_value(value)
    assert encoded is not None
    assert _is_plain_header_value(encoded)
    assert decode_header_value(encoded) == value


@given(st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E)))
def test_plain_ascii_is_sent_as_it_is_unless_it_is_ambiguous(value: str) -> None:
    ambiguous = (
        value.startswith(" ")
        or value.endswith(" ")
        or (value.startswith("=?base64?") and value.endswith("?="))
    )
    assert (encode_header_value(value) == value) is not ambiguous


@given(st.integers(min_value=-MAX_SAFE_INTEGER, max_value=MAX_SAFE_INTEGER))
def test_safe_integers_are_decimal(value: int) -> None:
    assert encode_header_value(value) == str(value)


@given(st.integers(min_value=1), st.sampled_from([1, -1]))
def test_unsafe_integers_are_refused(beyond: int, sign: int) -> None:
    with pytest.raises(LocalProtocolError):
        encode_header_value(sign * (MAX_SAFE_INTEGER + beyond))


# --------------------------------------------------------------------------- annotations


def test_the_specifications_example_tool_mirrors_its_region() -> None:
    found = headers_of(
        {
            "type": "object",
            "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "query": {"type": "string"},
            },
            "required": ["region", "query"],
        }
    )
    assert found == (
        ParamHeader(
            name="Region", header="Mcp-Param-Region", path=("region",), kinds=frozenset({"string"})
        ),
    )


def test_nested_properties_reachable_through_properties_alone_are_valid() -> None:
    found = headers_of(
        schema(
            region={"type": "string", "x-mcp-header": "Region"},
            options={
                "type": "object",
                "properties": {"limit": {"type": "integer", "x-mcp-header": "Limit"}},
            },
            flag={"type": ["boolean", "null"], "x-mcp-header": "Flag"},
        )
    )
    assert [(h.header, h.path, h.kinds) for h in found] == [
        ("Mcp-Param-Region", ("region",), frozenset({"string"})),
        ("Mcp-Param-Limit", ("options", "limit"), frozenset({"integer"})),
        ("Mcp-Param-Flag", ("flag",), frozenset({"boolean"})),
    ]


def test_a_schema_without_annotations_has_no_param_headers() -> None:
    assert headers_of({"type": "object"}) == ()
    assert headers_of(None) == ()
    assert headers_of(True) == ()
    # An "x-mcp-header" key in data is no annotation; a property may be named so.
    assert (
        headers_of(
            schema(
                a={"type": "object", "default": {"x-mcp-header": "A"}},
                b={"type": "string", "enum": [{"x-mcp-header": "B"}], "const": {"x-mcp-header": 1}},
                **{"x-mcp-header": {"type": "string"}},
            )
            | {"examples": [{"x-mcp-header": "C"}]}
        )
        == ()
    )


@pytest.mark.parametrize(
    ("where", "input_schema"),
    [
        ("items", schema(a={"type": "array", "items": {"type": "string", "x-mcp-header": "A"}})),
        (
            "prefixItems",
            schema(a={"type": "array", "prefixItems": [{"type": "string", "x-mcp-header": "A"}]}),
        ),
        ("oneOf", schema(a={"oneOf": [{"type": "string", "x-mcp-header": "A"}]})),
        ("anyOf", schema(a={"anyOf": [{"type": "string", "x-mcp-header": "A"}]})),
        ("allOf", schema(a={"allOf": [{"type": "string", "x-mcp-header": "A"}]})),
        ("not", schema(a={"not": {"type": "string", "x-mcp-header": "A"}})),
        ("if", schema(a={"if": {"type": "string", "x-mcp-header": "A"}})),
        ("then", schema(a={"then": {"type": "string", "x-mcp-header": "A"}})),
        ("else", schema(a={"else": {"type": "string", "x-mcp-header": "A"}})),
        (
            "$defs",
            {
                "type": "object",
                "$defs": {"id": {"type": "string", "x-mcp-header": "Id"}},
                "properties": {"id": {"$ref": "#/$defs/id"}},
            },
        ),
        ("definitions", {"definitions": {"id": {"type": "string", "x-mcp-header": "Id"}}}),
        (
            "additionalProperties",
            {"type": "object", "additionalProperties": {"type": "string", "x-mcp-header": "A"}},
        ),
        (
            "patternProperties",
            {
                "type": "object",
                "patternProperties": {"^a": {"type": "string", "x-mcp-header": "A"}},
            },
        ),
        (
            "dependentSchemas",
            {"dependentSchemas": {"a": {"properties": {"b": {"x-mcp-header": "B"}}}}},
        ),
        ("an unknown keyword", {"x-vendor": {"type": "string", "x-mcp-header": "A"}}),
        (
            "properties under items",
            schema(
                rows={
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"id": {"type": "string", "x-mcp-header": "Id"}},
                    },
                }
            ),
        ),
    ],
)
def test_an_annotation_not_reachable_through_properties_alone_is_invalid(
    where: str, input_schema: dict[str, Any]
) -> None:
    assert "reachable from the root" in problem_of(input_schema), where


def test_an_annotation_on_the_root_is_invalid() -> None:
    assert "on the root" in problem_of({"type": "string", "x-mcp-header": "Root"})


@pytest.mark.parametrize(
    ("prop", "said"),
    [
        ({"type": "number"}, "of type number"),
        ({"type": "object"}, "of type object"),
        ({"type": "array", "items": {}}, "of type array"),
        ({"type": "null"}, "of type null"),
        ({"type": ["string", "number"]}, "of type number or string"),
        ({}, "declares no 'type'"),
        ({"$ref": "#/$defs/x"}, "declares no 'type'"),
        ({"type": 3}, "not a type name"),
        ({"type": []}, "declares no 'type'"),
    ],
)
def test_an_annotation_on_a_property_that_is_not_a_primitive_is_invalid(
    prop: dict[str, Any], said: str
) -> None:
    assert said in problem_of(schema(a={**prop, "x-mcp-header": "A"}))


@given(st.text(alphabet=TCHARS, min_size=1, max_size=40))
def test_every_http_token_is_a_valid_name(name: str) -> None:
    [found] = headers_of(schema(a={"type": "string", "x-mcp-header": name}))
    assert found.header == "Mcp-Param-" + name


@given(
    st.text(alphabet=TCHARS, max_size=10),
    st.characters().filter(lambda c: c not in TCHARS),
    st.text(alphabet=TCHARS, max_size=10),
)
def test_a_name_with_any_other_character_is_invalid(before: str, bad: str, after: str) -> None:
    assert "HTTP token" in problem_of(
        schema(a={"type": "string", "x-mcp-header": before + bad + after})
    )


@pytest.mark.parametrize("name", [1, None, True, ["A"], {"A": 1}])
def test_a_name_that_is_not_a_string_is_invalid(name: Any) -> None:
    assert "must be a string" in problem_of(schema(a={"type": "string", "x-mcp-header": name}))


def test_names_must_be_unique_ignoring_case_anywhere_in_the_schema() -> None:
    said = problem_of(
        schema(
            a={"type": "string", "x-mcp-header": "Tenant"},
            o={"type": "object", "properties": {"b": {"type": "string", "x-mcp-header": "TENANT"}}},
        )
    )
    assert "$.properties.a.x-mcp-header has the same header name" in said


def test_the_walk_is_bounded_and_does_not_recurse() -> None:
    deep: dict[str, Any] = {"type": "string", "x-mcp-header": "Deep"}
    for _ in range(50_000):
        deep = {"type": "object", "properties": {"p": deep}}
    [found] = headers_of(deep)
    assert len(found.path) == 50_000
    wide = schema(**{f"p{i}": {"type": "object"} for i in range(20)})
    assert "too large to check" in str(param_headers(wide, max_nodes=10))


# --------------------------------------------------------------------------- one message


def test_every_message_carries_the_version_and_its_method() -> None:
    assert request_headers("tools/list", {}, version=VERSION) == {
        "MCP-Protocol-Version": VERSION,
        "Mcp-Method": "tools/list",
    }
    # Notifications too (the revision leaves them open; SEP-2243 asked for Mcp-Method).
    assert request_headers("notifications/cancelled", None, version=VERSION) == {
        "MCP-Protocol-Version": VERSION,
        "Mcp-Method": "notifications/cancelled",
    }


@pytest.mark.parametrize(
    ("method", "params", "name"),
    [
        ("tools/call", {"name": "get_weather"}, "get_weather"),
        ("prompts/get", {"name": "code_review"}, "code_review"),
        ("resources/read", {"uri": "file:///projects/myapp/config.json"}, None),
        ("tasks/get", {"taskId": "786512e2"}, "786512e2"),
        ("tasks/update", {"taskId": "786512e2", "inputResponses": {}}, "786512e2"),
        ("tasks/cancel", {"taskId": "786512e2"}, "786512e2"),
        ("tools/call", {"name": "wetter_prüfen"}, "=?base64?d2V0dGVyX3Byw7xmZW4=?="),
    ],
)
def test_mcp_name_mirrors_what_the_request_acts_on(
    method: str, params: dict[str, Any], name: str | None
) -> None:
    expected = name if name is not None else params["uri"]
    assert request_headers(method, params, version=VERSION)["Mcp-Name"] == expected


@pytest.mark.parametrize("method", ["tools/call", "prompts/get", "resources/read", "tasks/get"])
def test_a_missing_mcp_name_source_is_our_mistake(method: str) -> None:
    with pytest.raises(LocalProtocolError, match=r"needs params\.\w+ \(a string\)"):
        request_headers(method, {}, version=VERSION)
    with pytest.raises(LocalProtocolError):
        request_headers(method, None, version=VERSION)


def test_the_version_header_must_equal_the_meta_version() -> None:
    meta = {"io.modelcontextprotocol/protocolVersion": VERSION}
    assert request_headers("tools/list", {"_meta": meta}, version=VERSION)
    with pytest.raises(LocalProtocolError, match="must be equal"):
        request_headers("tools/list", {"_meta": meta}, version="2099-01-01")


def test_param_headers_mirror_present_arguments_and_omit_absent_or_null_ones() -> None:
    found = headers_of(
        schema(
            region={"type": "string", "x-mcp-header": "Region"},
            limit={"type": "integer", "x-mcp-header": "Limit"},
            verbose={"type": "boolean", "x-mcp-header": "Verbose"},
            options={
                "type": "object",
                "properties": {"tenant": {"type": "string", "x-mcp-header": "Tenant"}},
            },
        )
    )
    params = {"name": "q", "arguments": {"region": "eu", "limit": 3.0, "verbose": None}}
    assert request_headers("tools/call", params, version=VERSION, param_headers=found) == {
        "MCP-Protocol-Version": VERSION,
        "Mcp-Method": "tools/call",
        "Mcp-Name": "q",
        "Mcp-Param-Region": "eu",
        "Mcp-Param-Limit": "3",  # 3.0 is an integer in JSON Schema
    }
    nested = {"name": "q", "arguments": {"options": {"tenant": "acme"}}}
    headers = request_headers("tools/call", nested, version=VERSION, param_headers=found)
    assert headers["Mcp-Param-Tenant"] == "acme"
    # Not there: an intermediate value that is not an object, no arguments at all.
    odd = {"name": "q", "arguments": {"options": "acme"}}
    assert "Mcp-Param-Tenant" not in request_headers(
        "tools/call", odd, version=VERSION, param_headers=found
    )
    bare = request_headers("tools/call", {"name": "q"}, version=VERSION, param_headers=found)
    assert not any(name.startswith("Mcp-Param-") for name in bare)


@pytest.mark.parametrize(
    ("kind", "value"),
    [
        ("string", 3),
        ("string", {"a": 1}),
        ("integer", "3"),
        ("integer", 3.5),
        ("integer", True),
        ("integer", MAX_SAFE_INTEGER + 1),
        ("integer", float(2**60)),
        ("boolean", "true"),
        ("boolean", 1),
    ],
)
def test_an_argument_that_does_not_fit_its_property_refuses_the_call(kind: str, value: Any) -> None:
    found = headers_of(schema(arg={"type": kind, "x-mcp-header": "Arg"}))
    params = {"name": "tool", "arguments": {"arg": value}}
    with pytest.raises(LocalProtocolError, match=r"'tool'.*'arg'.*Mcp-Param-Arg"):
        request_headers("tools/call", params, version=VERSION, param_headers=found)


def test_param_headers_are_only_for_tools_call() -> None:
    found = headers_of(schema(a={"type": "string", "x-mcp-header": "A"}))
    params = {"name": "p", "arguments": {"a": "x"}}
    assert "Mcp-Param-A" not in request_headers(
        "prompts/get", params, version=VERSION, param_headers=found
    )


# --------------------------------------------------------------------------- the suite's scenarios


def _needs_base64(value: str) -> bool:
    """The conformance suite's ``needsBase64Encoding`` (http-custom-headers.ts)."""
    return any(ord(c) < 0x20 or ord(c) > 0x7E for c in value) or value != value.strip()


def _suite_accepts(raw: str | None, body: str) -> bool:
    """The suite's ``validateEncodedHeader`` for a string value (numbers compared as numbers)."""
    if raw is None:
        return False
    match = re.fullmatch(r"=\?base64\?(.*)\?=", raw)
    if _needs_base64(body) and match is None:
        return False
    decoded = base64.b64decode(match.group(1)).decode() if match else raw
    return decoded == body


CUSTOM_TOOL: dict[str, Any] = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "priority": {"type": "integer", "x-mcp-header": "Priority"},
        "verbose": {"type": "boolean", "x-mcp-header": "Verbose"},
        "debug": {"type": "boolean", "x-mcp-header": "Debug"},
        "empty_val": {"type": "string", "x-mcp-header": "EmptyVal"},
        "method_val": {"type": "string", "x-mcp-header": "Method"},
        "float_val": {"type": "number"},
        "non_ascii_val": {"type": "string", "x-mcp-header": "NonAscii"},
        "whitespace_val": {"type": "string", "x-mcp-header": "Whitespace"},
        "leading_space_val": {"type": "string", "x-mcp-header": "LeadingSpace"},
        "trailing_space_val": {"type": "string", "x-mcp-header": "TrailingSpace"},
        "internal_space_val": {"type": "string", "x-mcp-header": "InternalSpace"},
        "control_char_val": {"type": "string", "x-mcp-header": "ControlChar"},
        "crlf_val": {"type": "string", "x-mcp-header": "CrLf"},
        "tab_val": {"type": "string", "x-mcp-header": "Tab"},
        "query": {"type": "string"},
    },
    "required": ["region", "priority", "query"],
}
CUSTOM_ARGUMENTS: dict[str, Any] = {
    "region": "us-west1",
    "priority": 42,
    "verbose": False,
    "debug": True,
    "empty_val": "",
    "method_val": "test-method",
    "float_val": 3.14159,
    "non_ascii_val": "Hello, 世界",
    "whitespace_val": " padded ",
    "leading_space_val": " us-west1",
    "trailing_space_val": "us-west1 ",
    "internal_space_val": "us west 1",
    "control_char_val": "line1\nline2",
    "crlf_val": "line1\r\nline2",
    "tab_val": "\tindented",
    "query": "SELECT * FROM users",
}


def test_http_custom_headers_scenario() -> None:
    found = headers_of(CUSTOM_TOOL)
    params = {"name": "test_custom_headers", "arguments": CUSTOM_ARGUMENTS}
    headers = request_headers("tools/call", params, version=VERSION, param_headers=found)
    assert headers == {
        "MCP-Protocol-Version": VERSION,
        "Mcp-Method": "tools/call",
        "Mcp-Name": "test_custom_headers",
        "Mcp-Param-Region": "us-west1",
        "Mcp-Param-Priority": "42",
        "Mcp-Param-Verbose": "false",
        "Mcp-Param-Debug": "true",
        "Mcp-Param-EmptyVal": "",
        "Mcp-Param-Method": "test-method",
        "Mcp-Param-NonAscii": "=?base64?SGVsbG8sIOS4lueVjA==?=",
        "Mcp-Param-Whitespace": "=?base64?IHBhZGRlZCA=?=",
        "Mcp-Param-LeadingSpace": "=?base64?IHVzLXdlc3Qx?=",
        "Mcp-Param-TrailingSpace": "=?base64?dXMtd2VzdDEg?=",
        "Mcp-Param-InternalSpace": "us west 1",
        "Mcp-Param-ControlChar": "=?base64?bGluZTEKbGluZTI=?=",
        "Mcp-Param-CrLf": "=?base64?bGluZTENCmxpbmUy?=",
        "Mcp-Param-Tab": "=?base64?CWluZGVudGVk?=",
    }
    # What the scenario checks, header by header ("Method" gives Mcp-Param-Method, not a
    # second Mcp-Method; the unannotated query and float_val are not mirrored).
    as_text = {True: "true", False: "false"}
    for header in found:
        value = CUSTOM_ARGUMENTS[header.path[0]]
        body = as_text[value] if isinstance(value, bool) else str(value)
        assert _suite_accepts(headers.get(header.header), body), header.header
    assert "Mcp-Param-Query" not in headers
    assert "Mcp-Param-FloatVal" not in headers


def test_http_custom_headers_null_scenario() -> None:
    found = headers_of(
        schema(
            region={"type": "string", "x-mcp-header": "Region"},
            priority={"type": "integer", "x-mcp-header": "Priority"},
            verbose={"type": "boolean", "x-mcp-header": "Verbose"},
            query={"type": "string"},
        )
    )
    params = {
        "name": "test_custom_headers_null",
        "arguments": {"region": "us-east1", "priority": 1, "verbose": None, "query": "SELECT 1"},
    }
    headers = request_headers("tools/call", params, version=VERSION, param_headers=found)
    assert headers["Mcp-Param-Region"] == "us-east1"
    assert headers["Mcp-Param-Priority"] == "1"
    assert "Mcp-Param-Verbose" not in headers


#: http-invalid-tool-headers: each invalid tool's inputSchema properties, and what it breaks.
INVALID_TOOLS: dict[str, tuple[dict[str, Any], str]] = {
    "invalid_empty_header": ({"value": {"type": "string", "x-mcp-header": ""}}, "empty"),
    "invalid_object_header": ({"data": {"type": "object", "x-mcp-header": "Data"}}, "object"),
    "invalid_array_header": (
        {"items": {"type": "array", "items": {"type": "string"}, "x-mcp-header": "Items"}},
        "array",
    ),
    "invalid_null_header": ({"nil": {"type": "null", "x-mcp-header": "Nil"}}, "null"),
    "invalid_duplicate_same_case": (
        {
            "field1": {"type": "string", "x-mcp-header": "Region"},
            "field2": {"type": "string", "x-mcp-header": "Region"},
        },
        "same header name",
    ),
    "invalid_duplicate_diff_case": (
        {
            "field1": {"type": "string", "x-mcp-header": "MyField"},
            "field2": {"type": "string", "x-mcp-header": "myfield"},
        },
        "same header name",
    ),
    "invalid_space_in_name": ({"value": {"type": "string", "x-mcp-header": "My Region"}}, "' '"),
    "invalid_colon_in_name": (
        {"value": {"type": "string", "x-mcp-header": "Region:Primary"}},
        "':'",
    ),
    "invalid_non_ascii_name": ({"value": {"type": "string", "x-mcp-header": "Région"}}, "'é'"),
    "invalid_control_char_name": (
        {"value": {"type": "string", "x-mcp-header": "Region\t1"}},
        "control character",
    ),
}


@pytest.mark.parametrize("tool", sorted(INVALID_TOOLS))
def test_http_invalid_tool_headers_scenario(tool: str) -> None:
    properties, said = INVALID_TOOLS[tool]
    assert said in problem_of({"type": "object", "properties": properties})


def test_http_invalid_tool_headers_keeps_the_valid_tool() -> None:
    [found] = headers_of(
        {
            "type": "object",
            "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
            "required": ["region"],
        }
    )
    assert found.header == "Mcp-Param-Region"


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("initialize", {}),
        ("notifications/initialized", None),
        ("server/discover", {}),
        ("tools/list", {}),
        ("tools/call", {"name": "test_headers", "arguments": {}}),
        ("tools/call", {"name": "my-hyphenated-tool", "arguments": {}}),
        ("resources/list", {}),
        ("resources/read", {"uri": "file:///path/to/file%20name.txt"}),
        ("resources/read", {"uri": "https://example.com/resource?id=123"}),
        ("prompts/list", {}),
        ("prompts/get", {"name": "test_prompt"}),
    ],
)
def test_http_standard_headers_scenario(method: str, params: dict[str, Any] | None) -> None:
    headers = request_headers(method, params, version=VERSION)
    assert headers["Mcp-Method"] == method  # compared case-sensitively by the suite
    if method in ("tools/call", "prompts/get"):
        assert params is not None
        assert headers["Mcp-Name"] == params["name"]
    elif method == "resources/read":
        assert params is not None
        assert headers["Mcp-Name"] == params["uri"]  # plain ASCII: sent as it is
    else:
        assert "Mcp-Name" not in headers


def test_json_schema_ref_no_deref_scenario_mirrors_nothing_and_follows_no_ref() -> None:
    lookup_user = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {"userId": {"type": "string", "pattern": "^[a-z0-9-]+$"}},
        "properties": {
            "id": {"$ref": "#/$defs/userId"},
            "profile": {"$ref": "http://127.0.0.1:9/canary/profile-schema.json"},
        },
        "required": ["id"],
    }
    assert headers_of(lookup_user) == ()  # pure: no I/O is possible here


def test_mappings_that_are_not_dicts_are_read_too() -> None:
    """The quick look for an annotation takes plain JSON only; anything else is walked."""
    region = MappingProxyType({"type": "string", "x-mcp-header": "Region"})
    found = headers_of(MappingProxyType({"type": "object", "properties": {"region": region}}))
    assert [h.header for h in found] == ["Mcp-Param-Region"]
    found = headers_of({"type": "object", "properties": {"region": region}})
    assert [h.header for h in found] == ["Mcp-Param-Region"]
    nested = {"type": "object", "allOf": ({"properties": {"a": dict(region)}},)}
    assert "reachable from the root" in problem_of(nested)
