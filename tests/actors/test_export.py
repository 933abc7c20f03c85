from __future__ import annotations

from typing import Any

import pytest

from trio_mcp.actors.agent._export import (
    ExportAdjustment,
    ExportRefusal,
    ProviderLimits,
    StrictRules,
    to_anthropic_tools,
    to_openai_tools,
)
from trio_mcp.actors.runtime._registry import RegisteredTool
from trio_mcp.protocol._types import Tool

SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string", "description": "Where."}},
    "required": ["path"],
}


def _reg(
    name: str,
    *,
    schema: Any = None,
    description: str | None = "Reads a file.",
    title: str | None = None,
    server: str = "fs",
    wire: str = "read_file",
) -> RegisteredTool:
    tool = Tool(
        name=wire,
        title=title,
        description=description,
        input_schema=SCHEMA if schema is None else schema,
    )
    return RegisteredTool(name=name, server=server, tool=tool, generation=1)


def _tools(*entries: RegisteredTool) -> dict[str, RegisteredTool]:
    return {entry.name: entry for entry in entries}


def test_openai_chat_shape() -> None:
    result = to_openai_tools(_tools(_reg("mcp_fs_read_file")))
    assert result.provider == "OpenAI"
    assert result.tools == (
        {
            "type": "function",
            "function": {
                "name": "mcp_fs_read_file",
                "description": "Reads a file.",
                "parameters": SCHEMA,
            },
        },
    )
    assert (result.refused, result.adjusted) == ((), ())
    assert result.names == ("mcp_fs_read_file",)


def test_openai_responses_shape_always_says_strict() -> None:
    result = to_openai_tools(_tools(_reg("mcp_fs_read_file")), api="responses")
    assert result.tools == (
        {
            "type": "function",
            "name": "mcp_fs_read_file",
            "description": "Reads a file.",
            "parameters": SCHEMA,
            "strict": False,
        },
    )


def test_anthropic_shape() -> None:
    result = to_anthropic_tools(_tools(_reg("mcp_fs_read_file")))
    assert result.provider == "Anthropic"
    assert result.tools == (
        {"name": "mcp_fs_read_file", "description": "Reads a file.", "input_schema": SCHEMA},
    )


def test_tools_are_sorted_and_schemas_are_copies() -> None:
    tools = _tools(_reg("mcp_b"), _reg("mcp_a"))
    result = to_anthropic_tools(tools)
    assert result.names == ("mcp_a", "mcp_b")
    result.tools[0]["input_schema"]["properties"]["path"]["description"] = "changed"
    assert SCHEMA["properties"]["path"]["description"] == "Where."  # type: ignore[index]


def test_a_name_the_provider_rejects_is_reported_not_sent() -> None:
    long = "mcp_" + "x" * 61
    tools = _tools(_reg("mcp.fs.read"), _reg(long), _reg("mcp_ok"))
    for result in (to_openai_tools(tools), to_anthropic_tools(tools)):
        assert result.names == ("mcp_ok",)
        assert [r.name for r in result.refused] == ["mcp.fs.read", long]
        assert result.refused[0] == ExportRefusal(
            name="mcp.fs.read",
            server="fs",
            tool="read_file",
            reason=f"the name 'mcp.fs.read' does not match {result.provider}'s rule "
            "^[a-zA-Z0-9_-]{1,64}$",
        )


@pytest.mark.parametrize("keyword", ["anyOf", "oneOf", "allOf"])
def test_top_level_combinators_are_refused_by_both(keyword: str) -> None:
    schema = {"type": "object", keyword: [{"required": ["a"]}, {"required": ["b"]}]}
    tools = _tools(_reg("mcp_x", schema=schema))
    for result in (to_openai_tools(tools), to_anthropic_tools(tools)):
        assert result.tools == ()
        assert result.refused[0].reason == (
            f"{result.provider} does not accept {keyword!r} at the top of an input schema (it "
            "must be a plain object schema)"
        )


def test_openai_also_refuses_top_level_enum_and_not() -> None:
    tools = _tools(_reg("mcp_x", schema={"type": "object", "not": {"required": ["a"]}}))
    assert to_openai_tools(tools).names == ()
    assert to_anthropic_tools(tools).names == ("mcp_x",)


def test_an_invalid_schema_is_refused() -> None:
    tools = _tools(
        _reg("mcp_list", schema={"type": "array", "items": {}}),
        _reg("mcp_tags", schema={"type": "object", "properties": {"t": {"type": "array"}}}),
    )
    result = to_anthropic_tools(tools)
    assert [(r.name, r.reason) for r in result.refused] == [
        (
            "mcp_list",
            "invalid input schema: $.type: the top level of an input schema must be of type "
            "'object', got \"array\"",
        ),
        (
            "mcp_tags",
            "invalid input schema: $.properties.t: an array schema must say what its items are "
            "('items')",
        ),
    ]


def test_schemas_are_lowered_to_what_providers_take() -> None:
    tools = _tools(
        _reg("mcp_empty", schema={}),
        _reg(
            "mcp_untyped",
            schema={
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "properties": {"a": {"type": "string"}},
            },
        ),
    )
    openai = to_openai_tools(tools)
    assert [tool["function"]["parameters"] for tool in openai.tools] == [
        {"type": "object", "properties": {}},
        {"type": "object", "properties": {"a": {"type": "string"}}},
    ]
    assert openai.adjusted == (
        ExportAdjustment(name="mcp_untyped", change="top-level type set to object"),
    )
    anthropic = to_anthropic_tools(tools)
    assert [tool["input_schema"] for tool in anthropic.tools] == [
        {"type": "object"},
        {"type": "object", "properties": {"a": {"type": "string"}}},
    ]


def test_a_long_description_is_cut_for_openai_or_refused_on_request() -> None:
    text = "d" * 2100
    tools = _tools(_reg("mcp_long", description=text))
    result = to_openai_tools(tools)
    assert result.tools[0]["function"]["description"] == "d" * 1023 + "\u2026"
    assert result.adjusted == (
        ExportAdjustment(
            name="mcp_long",
            change="description cut from 2,100 to 1,024 characters (OpenAI's limit)",
        ),
    )
    refused = to_openai_tools(tools, description_overflow="refuse")
    assert refused.refused[0].reason == (
        "the description has 2,100 characters; OpenAI takes at most 1,024"
    )
    assert to_anthropic_tools(tools).tools[0]["description"] == text


def test_a_tool_without_description_uses_its_title() -> None:
    tools = _tools(
        _reg("mcp_a", description=None, title="Read a file"), _reg("mcp_b", description=None)
    )
    result = to_anthropic_tools(tools)
    assert result.tools[0]["description"] == "Read a file"
    assert "description" not in result.tools[1]


def test_openai_takes_at_most_128_tools() -> None:
    tools = _tools(*(_reg(f"mcp_t{i:03}") for i in range(130)))
    result = to_openai_tools(tools)
    assert len(result.tools) == 128
    assert [r.name for r in result.refused] == ["mcp_t128", "mcp_t129"]
    assert result.refused[0].reason == (
        "OpenAI takes at most 128 tools per request; this one is past the limit (in name order)"
    )
    assert len(to_anthropic_tools(tools).tools) == 130


STRICT_OK: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "opts": {
            "type": "object",
            "properties": {"deep": {"type": ["boolean", "null"]}},
            "required": ["deep"],
            "additionalProperties": False,
        },
    },
    "required": ["path", "opts"],
    "additionalProperties": False,
}


OPTS_NULLABLE = {
    "anyOf": [STRICT_OK["properties"]["opts"], {"type": "null"}],
}


@pytest.mark.parametrize(
    ("schema", "sent", "change"),
    [
        (STRICT_OK, STRICT_OK, None),
        (
            {**STRICT_OK, "required": ["path"]},
            {**STRICT_OK, "properties": {**STRICT_OK["properties"], "opts": OPTS_NULLABLE}},
            "strict mode: 1 optional property made required and nullable (null means left out)",
        ),
        ({**STRICT_OK, "additionalProperties": True}, STRICT_OK, None),
        (
            {
                **STRICT_OK,
                "properties": {
                    **STRICT_OK["properties"],
                    "path": {"type": "string", "minLength": 1},
                },
            },
            {
                **STRICT_OK,
                "properties": {
                    **STRICT_OK["properties"],
                    "path": {"type": "string", "description": "(minLength: 1)"},
                },
            },
            "strict mode: moved into descriptions: minLength",
        ),
        (
            {**STRICT_OK, "properties": {**STRICT_OK["properties"], "tags": {"type": "object"}}},
            None,
            "sent without strict mode: $.properties.tags is an object with arbitrary keys, "
            "which strict mode cannot express",
        ),
    ],
)
def test_strict_mode_rewrites_what_it_can_express(
    schema: Any, sent: Any, change: str | None
) -> None:
    tools = _tools(_reg("mcp_x", schema=schema))
    result = to_openai_tools(tools, strict=True)
    function = result.tools[0]["function"]
    assert function["strict"] is (sent is not None)
    assert function["parameters"] == (schema if sent is None else sent)
    expected = () if change is None else (ExportAdjustment(name="mcp_x", change=change),)
    assert result.adjusted == expected
    responses = to_openai_tools(tools, strict=True, api="responses")
    assert responses.tools[0]["strict"] is (sent is not None)
    assert responses.tools[0]["parameters"] == function["parameters"]


def test_strict_rules_bound_depth() -> None:
    rules = StrictRules(max_depth=1)
    result = to_openai_tools(
        _tools(_reg("mcp_x", schema=STRICT_OK)), strict=True, strict_rules=rules
    )
    assert result.adjusted == (
        ExportAdjustment(
            name="mcp_x", change="sent without strict mode: nested deeper than 1 levels"
        ),
    )


def test_limits_are_configurable() -> None:
    short = ProviderLimits(provider="Tiny", max_description=10, max_tools=1)
    result = to_anthropic_tools(_tools(_reg("mcp_a"), _reg("mcp_b")), limits=short)
    assert result.provider == "Tiny"
    assert result.tools == (
        {"name": "mcp_a", "description": "Reads a f\u2026", "input_schema": SCHEMA},
    )
    assert [r.name for r in result.refused] == ["mcp_b"]


def test_an_unknown_openai_api_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown OpenAI API 'assistants'"):
        to_openai_tools({}, api="assistants")  # type: ignore[arg-type]
