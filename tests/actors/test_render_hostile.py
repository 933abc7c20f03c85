"""Rendering (and logging) a result whose content is deeply nested JSON never raises.

A server decides what its text blocks say: a text of 100,000 ``[`` is not JSON the renderer may
read, and structured content nested up to the protocol's limit is shown even from a deep stack.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.protocol.hostile_json import KINDS, Kind, at_depth, deep_value, nest
from trio_mcp.actors.agent._render import render_result, renders_inline
from trio_mcp.actors.config._redact import redact_text
from trio_mcp.protocol import MAX_JSON_DEPTH
from trio_mcp.protocol._types import (
    CallToolResult,
    EmbeddedResource,
    TextContent,
    TextResourceContents,
)

#: The deepest structured content a parsed message can carry (the message and its result are
#: two levels of MAX_JSON_DEPTH).
DEEPEST = MAX_JSON_DEPTH - 2


def _render(result: CallToolResult, stack: int = 0) -> str:
    rendered = at_depth(stack, render_result, result, server="s", budget=10_000_000)
    text = rendered.text
    assert isinstance(text, str)
    return text


@pytest.mark.parametrize("stack", [0, 500])
@pytest.mark.parametrize("depth", [1000, 100_000])
@pytest.mark.parametrize("kind", KINDS)
def test_a_text_block_of_deep_json_is_shown_as_text(kind: Kind, depth: int, stack: int) -> None:
    text = nest(kind, depth)
    # Structured content long enough for the renderer to compare the text with it.
    structured = {"padding": "x" * len(text)}
    result = CallToolResult(content=(TextContent(text=text),), structured_content=structured)
    compact = json.dumps(structured, separators=(",", ":"))
    assert _render(result, stack) == f"{text}\n[structured content]\n{compact}"


@pytest.mark.parametrize("stack", [0, 500])
@pytest.mark.parametrize("kind", KINDS)
def test_structured_content_as_deep_as_a_message_allows_is_shown(kind: Kind, stack: int) -> None:
    value = deep_value(kind, DEEPEST)
    result = CallToolResult(content=(), structured_content=value)
    compact = nest(kind, DEEPEST)
    assert _render(result, stack) == f"[structured content]\n{compact}"
    assert at_depth(stack, renders_inline, result, budget=20_000, limit=100_000)


@pytest.mark.parametrize("kind", KINDS)
def test_a_text_that_says_the_same_deep_value_replaces_the_structured_content(kind: Kind) -> None:
    text = nest(kind, DEEPEST)
    result = CallToolResult(
        content=(TextContent(text=text),), structured_content=deep_value(kind, DEEPEST)
    )
    assert _render(result, 500) == text


@pytest.mark.parametrize("kind", KINDS)
def test_structured_content_too_deep_to_write_is_left_out_with_a_note(kind: Kind) -> None:
    result = CallToolResult(
        content=(TextContent(text="done"),), structured_content=deep_value(kind, 100_000)
    )
    for stack in (0, 500):
        assert _render(result, stack) == "done\n[structured content left out: nested too deeply]"
    assert not renders_inline(result, budget=20_000, limit=100_000)


def test_an_embedded_resource_of_deep_json_is_shown_as_text() -> None:
    text = nest("mixed", 100_000)
    block = EmbeddedResource(
        resource=TextResourceContents(uri="file:///deep.json", text=text, mime_type="text/json")
    )
    result = CallToolResult(content=(block,), structured_content={"padding": "x" * len(text)})
    rendered = _render(result, 500)
    assert rendered.startswith(f"[resource content[0]: <file:///deep.json> (text/json)]\n{text}\n")


@pytest.mark.parametrize("stack", [0, 500])
@pytest.mark.parametrize("kind", KINDS)
def test_logging_a_deep_json_text_cuts_it_without_reading_it(kind: Kind, stack: int) -> None:
    text = nest(kind, 100_000)
    logged = at_depth(stack, redact_text, text)
    assert logged == f"{text[:200]}... ({len(text)} characters)"


def test_logging_a_json_text_still_redacts_it() -> None:
    value: Any = {"token": "s3cret", "deep": deep_value("arrays", 20)}
    assert json.loads(redact_text(json.dumps(value))) == {
        "token": "***",
        "deep": deep_value("arrays", 7, "..."),
    }
