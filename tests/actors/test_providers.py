"""Provider round trips, checked against the providers' own SDK types (openai, anthropic: test
dependencies, never a request): the tool definitions exported, the model's calls read from the
SDKs' response objects, and the tool-result messages written back."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from anthropic.types import Message, MessageParam, ToolParam
from openai.types.chat import (
    ChatCompletionMessage,
    ChatCompletionMessageParam,
    ChatCompletionToolParam,
)
from openai.types.responses import (
    FunctionToolParam,
    ResponseFunctionToolCall,
    ResponseInputItemParam,
    ResponseOutputMessage,
)
from pydantic import TypeAdapter, ValidationError

from trio_mcp.actors import AgentSurface, RuntimeConfig, open_runtime
from trio_mcp.actors.agent._catalog import ModelToolResult
from trio_mcp.actors.agent._export import to_anthropic_tools, to_openai_tools
from trio_mcp.actors.agent._providers import (
    ProviderToolCall,
    ToolRound,
    anthropic_tool_calls,
    anthropic_tool_result,
    openai_chat_image_message,
    openai_chat_tool_calls,
    openai_responses_tool_calls,
    openai_responses_tool_output,
    run_anthropic_tool_calls,
    run_openai_chat_tool_calls,
    run_openai_responses_tool_calls,
)
from trio_mcp.actors.agent._render import MediaPart, TextPart
from trio_mcp.actors.config._backoff import RetryPolicy
from trio_mcp.actors.runtime._registry import RegisteredTool
from trio_mcp.actors.testing._fakes import FakeServer, FakeTool

from .test_strict import reference_tools

Clock = trio.testing.MockClock

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\nfake image").decode()
SVG = base64.b64encode(b"<svg/>").decode()
WAV = base64.b64encode(b"RIFF....WAVE").decode()


def materialized(value: Any) -> Any:
    """A value validated by pydantic, with its lazy iterables (``Iterable[...]`` fields of the
    SDKs' TypedDicts) consumed, which validates their items."""
    if isinstance(value, Mapping):
        return {key: materialized(item) for key, item in value.items()}
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, list | tuple | Iterator) or hasattr(value, "__next__"):
        return [materialized(item) for item in value]
    return value


def accepted(kind: Any, value: Mapping[str, Any]) -> None:
    """``value`` is valid as the SDK type ``kind``, and nothing of it was dropped or changed."""
    assert materialized(TypeAdapter(kind).validate_python(value)) == value


# --------------------------------------------------------------------------- the definitions


@pytest.mark.parametrize("strict", [False, True])
def test_the_exported_reference_tools_are_the_sdks_tool_params(strict: bool) -> None:
    tools = {
        name: RegisteredTool(name=name, server="s", tool=tool, generation=1)
        for name, tool in reference_tools().items()
    }
    chat = to_openai_tools(tools, strict=strict)
    responses = to_openai_tools(tools, strict=strict, api="responses")
    anthropic = to_anthropic_tools(tools)
    assert len(chat.tools) == len(responses.tools) == len(anthropic.tools) == 29
    for tool in chat.tools:
        accepted(ChatCompletionToolParam, tool)
    for tool in responses.tools:
        accepted(FunctionToolParam, tool)
    for tool in anthropic.tools:
        accepted(ToolParam, tool)


# --------------------------------------------------------------------------- reading calls


def test_openai_chat_calls_from_the_sdks_message() -> None:
    message = ChatCompletionMessage.model_validate(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "mcp_s_echo", "arguments": '{"text": "hi"}'},
                },
                {"id": "call_2", "type": "function", "function": {"name": "t", "arguments": ""}},
                {"id": "call_3", "type": "function", "function": {"name": "t", "arguments": "{"}},
                {"id": "call_4", "type": "function", "function": {"name": "t", "arguments": "[1]"}},
                {"id": "call_5", "type": "custom", "custom": {"name": "grep", "input": "x"}},
            ],
        }
    )
    calls = openai_chat_tool_calls(message)
    assert calls == openai_chat_tool_calls(message.model_dump())
    assert calls == (
        ProviderToolCall(
            api="openai-chat", id="call_1", name="mcp_s_echo", arguments={"text": "hi"}
        ),
        ProviderToolCall(api="openai-chat", id="call_2", name="t", arguments={}),
        ProviderToolCall(
            api="openai-chat",
            id="call_3",
            name="t",
            arguments=None,
            problem="the arguments are not valid JSON (Expecting property name enclosed in double "
            "quotes at character 1)",
        ),
        ProviderToolCall(
            api="openai-chat",
            id="call_4",
            name="t",
            arguments=None,
            problem="the arguments must be a JSON object, got list",
        ),
        ProviderToolCall(
            api="openai-chat",
            id="call_5",
            name="grep",
            arguments=None,
            problem="a 'custom' tool call; only function tools are offered",
        ),
    )
    assert openai_chat_tool_calls({"role": "assistant", "content": "no tools"}) == ()


def test_openai_responses_calls_from_the_sdks_output_items() -> None:
    output = [
        ResponseOutputMessage.model_validate(
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "Let me look.", "annotations": []}],
            }
        ),
        ResponseFunctionToolCall.model_validate(
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_9",
                "name": "mcp_s_echo",
                "arguments": '{"text": "hi"}',
            }
        ),
    ]
    expected = (
        ProviderToolCall(
            api="openai-responses", id="call_9", name="mcp_s_echo", arguments={"text": "hi"}
        ),
    )
    assert openai_responses_tool_calls(output) == expected
    assert openai_responses_tool_calls({"output": [item.model_dump() for item in output]}) == (
        expected
    )


def test_anthropic_calls_from_the_sdks_message() -> None:
    message = Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude",
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
            "content": [
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_1", "name": "mcp_s_echo", "input": {"a": 1}},
                {"type": "tool_use", "id": "toolu_2", "name": "mcp_s_echo", "input": {}},
            ],
        }
    )
    calls = anthropic_tool_calls(message)
    assert (
        calls == anthropic_tool_calls(message.content) == anthropic_tool_calls(message.model_dump())
    )
    assert calls == (
        ProviderToolCall(api="anthropic", id="toolu_1", name="mcp_s_echo", arguments={"a": 1}),
        ProviderToolCall(api="anthropic", id="toolu_2", name="mcp_s_echo", arguments={}),
    )


def test_something_else_than_a_message_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="an Anthropic message: expected the provider SDK's"):
        anthropic_tool_calls(42)


# --------------------------------------------------------------------------- whole rounds


SCHEMA = {
    "type": "object",
    "properties": {"text": {"type": "string"}, "limit": {"type": "integer"}},
    "required": ["text"],
}
PICTURE = {
    "content": [
        {"type": "text", "text": "a chart"},
        {"type": "image", "data": PNG, "mimeType": "image/png"},
        {"type": "image", "data": SVG, "mimeType": "image/svg+xml"},
        {"type": "audio", "data": WAV, "mimeType": "audio/wav"},
    ]
}


def fake() -> FakeServer:
    return FakeServer(
        name="s",
        tools=[
            FakeTool("echo", description="Echo.", input_schema=SCHEMA),
            FakeTool("chart", description="Draw.", result=PICTURE),
            FakeTool("broken", description="Fails.", result={"content": [], "isError": True}),
        ],
    )


def config(server: FakeServer, tmp_path: Path) -> RuntimeConfig:
    return RuntimeConfig(
        servers=(server.server_config(trust_level="trusted"),),
        retry=RetryPolicy(jitter=0.0),
        working_dir=tmp_path,
    )


def chat_message(*calls: tuple[str, str, str]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": id_, "type": "function", "function": {"name": name, "arguments": arguments}}
            for id_, name, arguments in calls
        ],
    }


async def test_an_openai_chat_round_trip(autojump_clock: Clock, tmp_path: Path) -> None:
    server = fake()
    async with open_runtime(config(server, tmp_path)) as rt:
        agent = AgentSurface(rt)
        await rt.wait_ready(timeout=10)
        round_ = await run_openai_chat_tool_calls(
            agent,
            ChatCompletionMessage.model_validate(
                chat_message(
                    ("c1", "mcp_s_echo", '{"text": "hi", "limit": null}'),
                    ("c2", "mcp_s_chart", "{}"),
                    ("c3", "mcp_s_echo", '"hi"'),
                )
            ),
        )
    # The strict-mode null for "limit" was dropped; the bad arguments never reached the server.
    assert [p for m, p in server.requests if m == "tools/call"] == [
        {"name": "echo", "arguments": {"text": "hi"}},
        {"name": "chart", "arguments": {}},
    ]
    assert [r.status for r in round_.results] == ["ok", "ok", "invalid"]
    tool_1, tool_2, tool_3, images = round_.messages
    assert tool_1 == {"role": "tool", "tool_call_id": "c1", "content": '{"text":"hi"}'}
    assert tool_2 == {"role": "tool", "tool_call_id": "c2", "content": round_.results[1].text}
    assert round_.results[1].text.startswith("a chart\n[image content[1]: image/png, ")
    assert tool_3 == {
        "role": "tool",
        "tool_call_id": "c3",
        "content": "The call to mcp_s_echo failed (invalid: the call was not valid): the "
        "arguments must be a JSON object, got str",
    }
    # A tool message takes text only: the PNG comes after the tool messages, the SVG and the
    # audio clip stay notes in the text.
    assert images == {
        "role": "user",
        "content": [
            {"type": "text", "text": "The image of the result of mcp_s_chart (tool call c2):"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
        ],
    }
    for message in round_.messages:
        accepted(ChatCompletionMessageParam, message)


async def test_an_openai_responses_round_trip(autojump_clock: Clock, tmp_path: Path) -> None:
    async with open_runtime(config(fake(), tmp_path)) as rt:
        agent = AgentSurface(rt)
        await rt.wait_ready(timeout=10)
        output = [
            {"type": "function_call", "call_id": "c1", "name": "mcp_s_chart", "arguments": "{}"},
            {"type": "function_call", "call_id": "c2", "name": "mcp_s_broken", "arguments": ""},
        ]
        round_ = await run_openai_responses_tool_calls(agent, {"output": output})
        text_only = await run_openai_responses_tool_calls(agent, output, images=False)
    chart, broken = round_.messages
    saved = round_.results[0].rendered
    assert saved is not None
    svg, wav = (f for f in saved.saved_files if f.mime_type != "image/png")
    assert chart == {
        "type": "function_call_output",
        "call_id": "c1",
        "output": [
            {"type": "input_text", "text": "a chart"},
            {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}", "detail": "auto"},
            {
                "type": "input_text",
                "text": f"[image: image/svg+xml, saved to {svg.path}; not shown to the model: "
                "image/svg+xml is not an image type the model takes]\n"
                f"[audio: audio/wav, saved to {wav.path}; not shown to the model: audio is not "
                "taken in a tool result]",
            },
        ],
    }
    assert broken == {
        "type": "function_call_output",
        "call_id": "c2",
        "output": "[the tool reported an error]",
    }
    assert text_only.messages[0]["output"] == round_.results[0].text
    for item in (*round_.messages, *text_only.messages):
        accepted(ResponseInputItemParam, item)


async def test_an_anthropic_round_trip(autojump_clock: Clock, tmp_path: Path) -> None:
    async with open_runtime(config(fake(), tmp_path)) as rt:
        agent = AgentSurface(rt)
        await rt.wait_ready(timeout=10)
        content = [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "t1", "name": "mcp_s_chart", "input": {}},
            {"type": "tool_use", "id": "t2", "name": "mcp_s_broken", "input": {}},
            {"type": "tool_use", "id": "t3", "name": "mcp_s_nope", "input": {}},
        ]
        round_ = await run_anthropic_tool_calls(agent, {"role": "assistant", "content": content})
        none = await run_anthropic_tool_calls(agent, [{"type": "text", "text": "done"}])
    assert none == ToolRound()
    ((message),) = round_.messages
    assert message["role"] == "user"
    chart, broken, missing = message["content"]
    assert chart["type"] == "tool_result"
    assert chart["tool_use_id"] == "t1"
    assert "is_error" not in chart
    assert chart["content"][:2] == [
        {"type": "text", "text": "a chart"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
    ]
    assert chart["content"][2]["type"] == "text"
    assert broken == {
        "type": "tool_result",
        "tool_use_id": "t2",
        "content": "[the tool reported an error]",
        "is_error": True,
    }
    assert missing["is_error"] is True
    assert missing["content"] == (
        "The call to mcp_s_nope failed (not_found: the tool was not found): there is no tool "
        "named 'mcp_s_nope'; use one of the tools offered"
    )
    assert [r.status for r in round_.results] == ["ok", "tool_error", "not_found"]
    accepted(MessageParam, message)


def test_images_over_the_limit_or_switched_off_stay_notes() -> None:
    result = ModelToolResult(
        name="mcp_s_chart",
        text="a chart\n[image content[1]: image/jpg, 9 bytes, not saved (no output directory)]",
        parts=(TextPart(text="a chart"), MediaPart(kind="image", mime_type="image/jpg", data=PNG)),
        is_error=False,
        status="ok",
    )
    shown = anthropic_tool_result("t1", result)
    assert shown["content"][1]["source"]["media_type"] == "image/jpeg"
    too_big = anthropic_tool_result("t1", result, max_image_chars=10)
    assert too_big["content"] == result.text
    assert anthropic_tool_result("t1", result, images=False)["content"] == result.text
    assert openai_responses_tool_output("c1", result, max_image_chars=10)["output"] == result.text
    assert openai_chat_image_message([("c1", result)], max_image_chars=10) is None
    accepted(MessageParam, {"role": "user", "content": [shown]})
    # The check has teeth: an image type the SDK does not list is refused.
    svg = {**shown["content"][1], "source": {**shown["content"][1]["source"]}}
    svg["source"]["media_type"] = "image/svg+xml"
    with pytest.raises(ValidationError):
        accepted(MessageParam, {"role": "user", "content": [{**shown, "content": [svg]}]})


async def test_a_closed_runtime_answers_every_call(autojump_clock: Clock, tmp_path: Path) -> None:
    async with open_runtime(config(fake(), tmp_path)) as rt:
        agent = AgentSurface(rt)
        await rt.wait_ready(timeout=10)
    round_ = await run_openai_chat_tool_calls(
        agent, chat_message(("c1", "mcp_s_echo", json.dumps({"text": "hi", "limit": None})))
    )
    assert [r.status for r in round_.results] == ["closed"]
    assert round_.messages[0]["content"] == (
        "The call to mcp_s_echo failed (closed: the MCP runtime is closed): the MCP runtime is "
        "closed; the call was not made"
    )
