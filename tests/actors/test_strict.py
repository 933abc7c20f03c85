"""OpenAI strict mode: the schema rewrite (to_strict_schema) and the way back
(drop_omitted_nulls), on hand-written schemas and on the reference servers' real ones."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from trio_mcp.actors.agent._catalog import catalog_tool_definitions
from trio_mcp.actors.agent._export import to_openai_tools
from trio_mcp.actors.agent._strict import (
    StrictRules,
    drop_omitted_nulls,
    to_strict_schema,
)
from trio_mcp.actors.runtime._registry import RegisteredTool
from trio_mcp.protocol._types import Tool

REFERENCE = Path(__file__).resolve().parent / "reference_tool_schemas.json"

#: What strict mode takes (OpenAI's "Supported schemas"), for the structural check below.
SUPPORTED = {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "anyOf",
    "description",
    "title",
    "$ref",
    "$defs",
    "pattern",
    "format",
    "multipleOf",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minItems",
    "maxItems",
}


def assert_strict(node: Any, path: str = "$") -> None:
    """Every rule of strict mode, checked independently of the converter."""
    assert isinstance(node, Mapping), path
    assert set(node) <= SUPPORTED, f"{path}: {sorted(set(node) - SUPPORTED)}"
    if "$ref" in node:
        assert set(node) == {"$ref"}, f"{path}: keywords beside $ref"
        return
    assert "type" in node or "anyOf" in node, f"{path}: no type"
    types = node.get("type")
    types = [types] if isinstance(types, str) else (types or [])
    if "object" in types:
        assert node["additionalProperties"] is False, path
        assert node["required"] == list(node["properties"]), path
        for key, sub in node["properties"].items():
            assert_strict(sub, f"{path}.properties.{key}")
    if "array" in types:
        assert_strict(node["items"], f"{path}.items")
    for i, branch in enumerate(node.get("anyOf", ())):
        assert_strict(branch, f"{path}.anyOf[{i}]")
    for key, sub in node.get("$defs", {}).items():
        assert_strict(sub, f"{path}.$defs.{key}")


def strict(schema: Mapping[str, Any], rules: StrictRules | None = None) -> dict[str, Any]:
    conversion = to_strict_schema(schema) if rules is None else to_strict_schema(schema, rules)
    assert conversion.problem is None, conversion.problem
    assert conversion.schema is not None
    assert_strict(conversion.schema)
    jsonschema.Draft202012Validator.check_schema(conversion.schema)
    return conversion.schema


def test_optional_properties_become_required_and_nullable() -> None:
    schema = {
        "type": "object",
        "title": "count_slowlyArguments",
        "properties": {
            "steps": {"title": "Steps", "type": "integer"},
            "delay": {"default": 0.02, "title": "Delay", "type": "number"},
            "mode": {"type": "string", "enum": ["fast", "slow"], "description": "How."},
            "label": {"type": ["string", "null"]},
        },
        "required": ["steps"],
    }
    before = copy.deepcopy(schema)
    conversion = to_strict_schema(schema)
    assert conversion.schema == {
        "type": "object",
        "title": "count_slowlyArguments",
        "properties": {
            "steps": {"title": "Steps", "type": "integer"},
            "delay": {
                "title": "Delay",
                "type": ["number", "null"],
                "description": "(default: 0.02)",
            },
            "mode": {
                "anyOf": [{"type": "string", "enum": ["fast", "slow"]}, {"type": "null"}],
                "description": "How.",
            },
            "label": {"type": ["string", "null"]},  # took null already: left as it is
        },
        "required": ["steps", "delay", "mode", "label"],
        "additionalProperties": False,
    }
    assert conversion.changes == (
        "2 optional properties made required and nullable (null means left out)",
        "moved into descriptions: default",
    )
    assert schema == before


def test_nested_objects_arrays_and_type_less_enums() -> None:
    schema = {
        "type": "object",
        "properties": {
            "edits": {
                "type": "array",
                "minItems": 1,
                "uniqueItems": True,
                "items": {
                    "type": "object",
                    "properties": {
                        "old": {"type": "string", "minLength": 1},
                        "new": {"type": "string"},
                        "kind": {"enum": ["a", "b"]},
                    },
                    "required": ["old", "new", "kind"],
                    "additionalProperties": True,
                },
            },
            "when": {"type": "string", "format": "date-time"},
            "site": {"type": "string", "format": "uri", "description": "Where."},
            "x-vendor": {"const": 3},
        },
        "required": ["edits", "when", "site", "x-vendor"],
        "x-order": 1,
    }
    out = strict(schema)
    assert out["properties"]["edits"] == {
        "type": "array",
        "minItems": 1,
        "items": {
            "type": "object",
            "properties": {
                "old": {"type": "string", "description": "(minLength: 1)"},
                "new": {"type": "string"},
                "kind": {"enum": ["a", "b"], "type": "string"},
            },
            "required": ["old", "new", "kind"],
            "additionalProperties": False,
        },
        "description": "(uniqueItems: true)",
    }
    assert out["properties"]["when"] == {"type": "string", "format": "date-time"}
    assert out["properties"]["site"] == {"type": "string", "description": 'Where. (format: "uri")'}
    assert out["properties"]["x-vendor"] == {"const": 3, "type": "integer"}
    assert "x-order" not in out
    assert to_strict_schema(schema).changes == (
        "moved into descriptions: format, minLength, uniqueItems",
        "dropped: 'x-order'",
    )


def test_definitions_references_and_combinators() -> None:
    schema = {
        "type": "object",
        "definitions": {
            "Point": {
                "type": "object",
                "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                "required": ["x"],
            },
        },
        "properties": {
            "at": {"$ref": "#/definitions/Point"},
            "to": {"$ref": "#/definitions/Point", "description": "The end."},
            "shape": {"oneOf": [{"type": "string"}, {"$ref": "#/definitions/Point"}]},
            "both": {
                "allOf": [
                    {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                    {"properties": {"b": {"type": "integer"}}},
                ]
            },
        },
        "required": ["at", "to", "shape", "both"],
    }
    out = strict(schema)
    point = {
        "type": "object",
        "properties": {"x": {"type": "number"}, "y": {"type": ["number", "null"]}},
        "required": ["x", "y"],
        "additionalProperties": False,
    }
    assert out["$defs"] == {"Point": point}
    assert out["properties"]["at"] == {"$ref": "#/$defs/Point"}
    assert out["properties"]["to"] == {**point, "description": "The end."}  # inlined
    assert out["properties"]["shape"] == {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/Point"}]}
    assert out["properties"]["both"] == {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": ["integer", "null"]}},
        "required": ["a", "b"],
        "additionalProperties": False,
    }
    assert to_strict_schema(schema).changes == (
        # Point.y, in $defs and in the inlined copy, and both.b
        "3 optional properties made required and nullable (null means left out)",
        "$ref with other keywords inlined",
        "allOf merged",
        "definitions moved to $defs",
        "oneOf read as anyOf",
    )


def test_a_recursive_schema_keeps_its_reference() -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "children": {"type": "array", "items": {"$ref": "#"}},
        },
        "required": ["name", "children"],
    }
    assert strict(schema)["properties"]["children"] == {"type": "array", "items": {"$ref": "#"}}


@pytest.mark.parametrize(
    ("prop", "problem"),
    [
        (
            {},
            "$.properties.p has no type, so it accepts any value, which strict mode cannot express",
        ),
        (True, "$.properties.p accepts any value, which strict mode cannot express"),
        (
            {"type": "object"},
            "$.properties.p is an object with arbitrary keys, which strict mode cannot express",
        ),
        (
            {"type": "object", "additionalProperties": {"type": "string"}},
            "$.properties.p is an object with arbitrary keys, which strict mode cannot express",
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "string"}},
                "additionalProperties": {"type": "string"},
            },
            "$.properties.p takes extra keys of a given schema (additionalProperties), which "
            "strict mode cannot express",
        ),
        (
            {"type": "string", "not": {"const": ""}},
            "$.properties.p uses 'not', which strict mode cannot express",
        ),
        (
            {"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "string"}},
            "$.properties.p uses 'prefixItems', which strict mode cannot express",
        ),
        (
            {"$ref": "https://example.com/schema.json"},
            "$.properties.p.$ref 'https://example.com/schema.json' is not a reference strict "
            "mode takes",
        ),
        ({"$ref": "#/$defs/Missing"}, "$.properties.p.$ref '#/$defs/Missing' points at nothing"),
        (
            {"allOf": [{"type": "string"}, {"type": "integer"}]},
            "$.properties.p.allOf: entries disagree on 'type'",
        ),
    ],
)
def test_what_strict_mode_cannot_express_is_reported(prop: Any, problem: str) -> None:
    conversion = to_strict_schema({"type": "object", "properties": {"p": prop}, "required": ["p"]})
    assert (conversion.schema, conversion.problem) == (None, problem)
    assert conversion.summary == problem


def nested(levels: int) -> dict[str, Any]:
    if levels == 1:
        return {"type": "string"}
    return {"type": "object", "properties": {"a": nested(levels - 1)}, "required": ["a"]}


def test_the_documented_limits() -> None:
    assert to_strict_schema(nested(10)).schema is not None
    assert to_strict_schema(nested(11)).problem == "nested deeper than 10 levels"
    many = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(5001)}}
    assert to_strict_schema(many).problem == "more than 5,000 properties"
    enums = {
        "type": "object",
        "properties": {f"e{i}": {"enum": list(range(100))} for i in range(11)},
    }
    assert to_strict_schema(enums).problem == "more than 1,000 enum values"
    wide = {"type": "object", "properties": {"e": {"enum": [f"{i:060}" for i in range(251)]}}}
    assert to_strict_schema(wide).problem == (
        "$.properties.e.enum: an enum of more than 250 values has 15,060 characters (at most "
        "15,000)"
    )
    names = {
        "type": "object",
        "properties": {"n" * 1000 + str(i): {"type": "string"} for i in range(121)},
    }
    assert to_strict_schema(names).problem == (
        "more than 120,000 characters of property names, definition names, enum and const values"
    )
    assert to_strict_schema(nested(3), StrictRules(max_depth=2)).problem == (
        "nested deeper than 2 levels"
    )


# --------------------------------------------------------------------------- the way back

SCHEMA = {
    "type": "object",
    "$defs": {"Opt": {"type": "object", "properties": {"deep": {"type": "boolean"}}}},
    "properties": {
        "path": {"type": "string"},
        "limit": {"type": "integer"},
        "label": {"type": ["string", "null"]},
        "opts": {"$ref": "#/$defs/Opt"},
        "rows": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"k": {"type": "string"}, "v": {}, "w": {"description": "Any."}},
            },
        },
        "either": {"anyOf": [{"type": "object", "properties": {"z": {"type": "number"}}}]},
    },
    "required": ["path"],
}


def test_nulls_that_mean_left_out_are_dropped_and_no_others() -> None:
    arguments = {
        "path": None,  # required: the server says what is wrong
        "limit": None,  # optional, does not take null: left out
        "label": None,  # takes null: meant
        "opts": {"deep": None},
        "rows": [{"k": None, "v": None, "w": None}, {"k": "a", "v": 1}],
        "either": {"z": None},
        "extra": None,  # not in the schema: the server decides
    }
    before = copy.deepcopy(arguments)
    assert drop_omitted_nulls(SCHEMA, arguments) == {
        "path": None,
        "label": None,
        "opts": {},
        "rows": [{"v": None, "w": None}, {"k": "a", "v": 1}],  # any value takes null
        "either": {},
        "extra": None,
    }
    assert arguments == before


def test_dropping_survives_deep_values_and_recursive_schemas() -> None:
    schema = {"type": "object", "properties": {"c": {"type": "array", "items": {"$ref": "#"}}}}
    value: dict[str, Any] = {"c": []}
    for _ in range(5000):
        value = {"c": [value]}
    assert drop_omitted_nulls(schema, value) == value  # too deep to walk: returned as it is
    assert drop_omitted_nulls(schema, {"c": [{"c": None}]}) == {"c": [{}]}


# --------------------------------------------------------------------------- real schemas


def reference_tools() -> dict[str, Tool]:
    """The reference servers' tools (tests/actors/reference_tool_schemas.json) and the
    runtime's own resource and prompt tools: the catalogue of the figure in the docs."""
    listed = json.loads(REFERENCE.read_text(encoding="utf-8"))["tools"]
    tools = {
        name: Tool(name=name, input_schema=entry["inputSchema"], description="A tool.")
        for name, entry in listed.items()
    }
    for tool in catalog_tool_definitions("agentao"):
        tools[tool.name] = tool
    return tools


def test_the_reference_catalogue_goes_strict_but_for_one_map() -> None:
    """29 tools: 24 of server-everything and the Python SDK, 5 resource and prompt tools. The
    conservative check that came before this rewrite sent 1 of them strict."""
    tools = reference_tools()
    registered = {
        name: RegisteredTool(name=name, server="s", tool=tool, generation=1)
        for name, tool in tools.items()
    }
    result = to_openai_tools(registered, strict=True)
    strict_names = [t["function"]["name"] for t in result.tools if t["function"]["strict"]]
    assert (len(tools), len(strict_names)) == (29, 28)
    assert sorted(set(tools) - set(strict_names)) == ["get_mcp_prompt"]
    assert [a.change for a in result.adjusted if a.name == "get_mcp_prompt"] == [
        "sent without strict mode: $.properties.arguments is an object with arbitrary keys, "
        "which strict mode cannot express"
    ]
    for tool in result.tools:
        if tool["function"]["strict"]:
            assert_strict(tool["function"]["parameters"])


def all_nulls(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Arguments in which the model, in strict mode, left out every property it could."""
    out: dict[str, Any] = {}
    for key, sub in schema["properties"].items():
        example = {"string": "x", "number": 1, "integer": 1, "boolean": True}
        types = sub.get("type") if "anyOf" not in sub else sub["anyOf"][0].get("type")
        first = types[0] if isinstance(types, list) else types
        if isinstance(types, list) or "anyOf" in sub:
            out[key] = None
        elif "enum" in sub:
            out[key] = sub["enum"][0]
        else:
            out[key] = example[first]
    return out


def test_left_out_arguments_of_the_reference_tools_go_back_valid() -> None:
    for name, tool in reference_tools().items():
        conversion = to_strict_schema(
            {k: v for k, v in tool.input_schema.items() if k != "$schema"}
        )
        if conversion.schema is None:
            continue
        sent = all_nulls(conversion.schema)
        jsonschema.validate(sent, conversion.schema)
        back = drop_omitted_nulls(tool.input_schema, sent)
        assert None not in back.values(), name
        original = {k: v for k, v in tool.input_schema.items() if k != "$schema"}
        jsonschema.validate(back, original)
