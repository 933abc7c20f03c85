"""Sampling through a real model: the ready samplers against the providers' own SDKs (openai,
anthropic: test dependencies), whose async clients run under trio here over a fake HTTP
transport (no network). Each request the SDK sends is checked against the SDK's request type."""

from __future__ import annotations

import base64
import functools
import json
from collections.abc import Callable
from typing import Any

import httpx2
import pytest
import trio
import trio.testing
from anthropic import AsyncAnthropic
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from openai import AsyncOpenAI
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming

from trio_mcp.actors import (
    AnthropicSampler,
    HostCallbacks,
    OpenAISampler,
    RuntimeConfig,
    SamplingApproval,
    SamplingBudget,
    SamplingModel,
    SamplingRefused,
    SamplingUsage,
    choose_model,
    open_runtime,
)
from trio_mcp.actors.testing import FakeServer, FakeTool, ToolContext
from trio_mcp.protocol import (
    CreateMessageRequestParams,
    CreateMessageResult,
    InputRequestFailed,
    ModelHint,
    ModelPreferences,
    RpcError,
    TextContent,
    ToolUseContent,
)
from trio_mcp.protocol._methods import decode_params

from .test_providers import accepted

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\nfake image").decode()
WAV = base64.b64encode(b"RIFF....WAVE").decode()

Handler = Callable[[dict[str, Any]], dict[str, Any]]


def params(**wire: Any) -> CreateMessageRequestParams:
    """Sampling params decoded from their wire shape, as the runtime decodes a server's."""
    body: dict[str, Any] = {
        "messages": [{"role": "user", "content": {"type": "text", "text": "Sum up"}}],
        "maxTokens": 100,
    }
    body.update(wire)
    decoded = decode_params("sampling/createMessage", body)
    assert isinstance(decoded, CreateMessageRequestParams)
    return decoded


class Provider:
    """A fake provider endpoint behind the SDK's HTTP client: records each request body and
    answers with ``reply(body)``."""

    def __init__(self, reply: Handler) -> None:
        self.reply = reply
        self.bodies: list[dict[str, Any]] = []
        self.paths: list[str] = []

    async def __call__(self, request: httpx2.Request) -> httpx2.Response:
        await trio.lowlevel.checkpoint()
        body = json.loads(request.content)
        self.bodies.append(body)
        self.paths.append(request.url.path)
        return httpx2.Response(200, json=self.reply(body))

    def http(self) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(transport=httpx2.MockTransport(self))

    def openai(self) -> AsyncOpenAI:
        return AsyncOpenAI(api_key="sk-test", max_retries=0, http_client=self.http())

    def anthropic(self) -> AsyncAnthropic:
        return AsyncAnthropic(api_key="sk-test", max_retries=0, http_client=self.http())


def completion(message: dict[str, Any], finish: str = "stop", **usage: int) -> Handler:
    def reply(body: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [
                {"index": 0, "finish_reason": finish, "message": {"role": "assistant", **message}}
            ],
            "usage": {
                "prompt_tokens": usage.get("prompt", 10),
                "completion_tokens": usage.get("completion", 5),
                "total_tokens": usage.get("prompt", 10) + usage.get("completion", 5),
            },
        }

    return reply


def claude(content: list[dict[str, Any]], stop: str = "end_turn", **usage: int) -> Handler:
    def reply(body: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {
                "input_tokens": usage.get("input", 12),
                "output_tokens": usage.get("output", 3),
            },
        }

    return reply


# --------------------------------------------------------------------------- the model choice


MODELS = (
    SamplingModel(name="gpt-4.1-mini", cost=0.9, speed=0.9, intelligence=0.4),
    SamplingModel(name="gpt-4.1", cost=0.3, speed=0.5, intelligence=0.8),
    SamplingModel(name="o3", cost=0.1, speed=0.2, intelligence=1.0),
)


def prefs(*hints: str, **priorities: float) -> ModelPreferences:
    return ModelPreferences(
        hints=tuple(ModelHint(name=hint) for hint in hints) or None,
        cost_priority=priorities.get("cost"),
        speed_priority=priorities.get("speed"),
        intelligence_priority=priorities.get("intelligence"),
    )


def test_no_preferences_take_the_hosts_first_model() -> None:
    assert choose_model(None, MODELS).name == "gpt-4.1-mini"
    assert choose_model(prefs(), MODELS).name == "gpt-4.1-mini"


def test_the_first_hint_that_matches_an_allowed_model_picks_it() -> None:
    # "claude" matches nothing the host allows; "4.1" matches two: the first in the host's order
    assert choose_model(prefs("claude-3-sonnet", "4.1"), MODELS).name == "gpt-4.1-mini"
    assert choose_model(prefs("O3"), MODELS).name == "o3"  # case-insensitive substring


def test_the_priorities_break_the_tie_among_the_hinted_models() -> None:
    assert choose_model(prefs("4.1", intelligence=1.0), MODELS).name == "gpt-4.1"
    assert choose_model(prefs(intelligence=1.0), MODELS).name == "o3"
    assert choose_model(prefs(cost=0.8, intelligence=0.2), MODELS).name == "gpt-4.1-mini"
    # a hint nothing matches leaves every model to the priorities
    assert choose_model(prefs("gemini", intelligence=0.9), MODELS).name == "o3"


def test_a_model_never_outside_the_hosts_list_and_bad_lists_are_errors() -> None:
    assert choose_model(prefs("gpt-5"), ["gpt-4.1"]).name == "gpt-4.1"
    with pytest.raises(ValueError, match="at least one model"):
        OpenAISampler(client=None, models=[])
    with pytest.raises(ValueError, match="different names"):
        choose_model(None, ["a", "a"])
    with pytest.raises(ValueError, match="between 0 and 1"):
        SamplingModel(name="x", cost=2)
    with pytest.raises(ValueError, match="0 or more"):
        SamplingBudget(max_requests=-1)


# --------------------------------------------------------------------------- OpenAI


async def test_openai_maps_every_part_of_the_request_and_reads_the_answer() -> None:
    provider = Provider(completion({"content": "a short summary"}, prompt=30, completion=7))
    sampler = OpenAISampler(client=provider.openai(), models=MODELS)
    request = params(
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is in these?"},
                    {"type": "image", "data": PNG, "mimeType": "image/png"},
                    {"type": "audio", "data": WAV, "mimeType": "audio/wav"},
                ],
            },
            {"role": "assistant", "content": {"type": "text", "text": "A chart and a tone."}},
            {"role": "user", "content": {"type": "text", "text": "Sum up"}},
        ],
        systemPrompt="Be brief.",
        temperature=0.2,
        stopSequences=["END"],
        maxTokens=64,
        modelPreferences={"hints": [{"name": "o3"}]},
        metadata={"trace": "x"},
    )
    result = await sampler("docs", request)
    assert result == CreateMessageResult(
        role="assistant",
        content=TextContent(text="a short summary"),
        model="o3",
        stop_reason="endTurn",
    )
    (body,) = provider.bodies
    assert provider.paths == ["/v1/chat/completions"]
    accepted(CompletionCreateParamsNonStreaming, body)
    assert body == {
        "model": "o3",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is in these?"},
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
                    {"type": "input_audio", "input_audio": {"data": WAV, "format": "wav"}},
                ],
            },
            {"role": "assistant", "content": "A chart and a tone."},
            {"role": "user", "content": "Sum up"},
        ],
        "max_completion_tokens": 64,
        "temperature": 0.2,
        "stop": ["END"],
    }  # metadata is provider-specific: never sent
    assert sampler.usage() == {"docs": SamplingUsage(requests=1, input_tokens=30, output_tokens=7)}


async def test_openai_tool_use_goes_out_as_functions_and_comes_back_as_tool_use() -> None:
    answer = {
        "content": None,
        "tool_calls": [
            {
                "id": "call_9",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
            }
        ],
    }
    provider = Provider(completion(answer, finish="tool_calls"))
    sampler = OpenAISampler(client=provider.openai(), models=["gpt-4.1"])
    tool = {
        "name": "get.weather",
        "description": "The weather.",
        "inputSchema": {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {"city": {"type": "string"}},
        },
    }
    request = params(
        messages=[
            {"role": "user", "content": {"type": "text", "text": "Weather in Oslo and Rome?"}},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Rome first."},
                    {
                        "type": "tool_use",
                        "id": "call_1",
                        "name": "get.weather",
                        "input": {"city": "Rome"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "toolUseId": "call_1",
                        "content": [
                            {"type": "text", "text": "sunny"},
                            {"type": "image", "data": PNG, "mimeType": "image/png"},
                        ],
                    }
                ],
            },
        ],
        tools=[tool],
        toolChoice={"mode": "required"},
    )
    result = await sampler("weather", request)
    assert result.content == (
        ToolUseContent(id="call_9", name="get.weather", input={"city": "Oslo"}),
    )
    assert result.stop_reason == "toolUse"
    (body,) = provider.bodies
    accepted(CompletionCreateParamsNonStreaming, body)
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "The weather.",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ]
    assert body["tool_choice"] == "required"
    assert body["messages"][1:] == [
        {
            "role": "assistant",
            "content": "Rome first.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}
            ],
        },
    ]


async def test_openai_a_tool_error_says_so_and_max_tokens_can_use_the_old_name() -> None:
    provider = Provider(completion({"content": "ok"}, finish="length"))
    sampler = OpenAISampler(
        client=provider.openai(), models=["local-llm"], max_tokens_key="max_tokens"
    )
    request = params(
        messages=[
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "c1", "name": "f", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "toolUseId": "c1",
                        "content": [],
                        "structuredContent": {"code": 7},
                        "isError": True,
                    }
                ],
            },
        ],
    )
    result = await sampler("s", request)
    assert result.stop_reason == "maxTokens"
    (body,) = provider.bodies
    accepted(CompletionCreateParamsNonStreaming, body)
    assert body["max_tokens"] == 100 and "max_completion_tokens" not in body
    assert body["messages"][1] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": 'Error: {"code": 7}',
    }


async def test_openai_refuses_what_it_cannot_take_without_a_request() -> None:
    provider = Provider(completion({"content": "never"}))
    sampler = OpenAISampler(client=provider.openai(), models=["gpt-4.1"])
    ogg = params(
        messages=[
            {"role": "user", "content": {"type": "audio", "data": WAV, "mimeType": "audio/ogg"}}
        ]
    )
    with pytest.raises(SamplingRefused) as info:
        await sampler("s", ogg)
    assert info.value.reason == "unsupported" and info.value.code == -32602
    assert "WAV and MP3 audio, not audio/ogg" in str(info.value)
    clash = params(
        tools=[
            {"name": "a.b", "inputSchema": {"type": "object"}},
            {"name": "a_b", "inputSchema": {"type": "object"}},
        ]
    )
    with pytest.raises(SamplingRefused, match="would both be sent as 'a_b'"):
        await sampler("s", clash)
    assert provider.bodies == []
    assert sampler.usage()["s"] == SamplingUsage(refused=2)


async def test_a_provider_answer_with_bad_tool_arguments_is_an_error_to_the_server() -> None:
    answer = {
        "content": None,
        "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": "[1, 2]"}}
        ],
    }
    sampler = OpenAISampler(client=Provider(completion(answer)).openai(), models=["m"])
    with pytest.raises(Exception, match="not a JSON object") as info:
        await sampler("s", params(tools=[{"name": "f", "inputSchema": {"type": "object"}}]))
    assert getattr(info.value, "code", None) == -32603


async def test_the_sdks_own_http_client_runs_under_trio_over_a_socket() -> None:
    """No fake transport: the SDK's default client (httpx2, its trio backend) reaches a server
    on 127.0.0.1 from trio."""
    reply = json.dumps(completion({"content": "over a socket"})({"model": "m"})).encode()

    async def serve(stream: trio.SocketStream) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            data += await stream.receive_some(65536)
        head, _, body = data.partition(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        while len(body) < length:
            body += await stream.receive_some(65536)
        await stream.send_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(reply), reply)
        )
        await stream.aclose()

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            functools.partial(trio.serve_tcp, serve, 0, host="127.0.0.1")
        )
        port = listeners[0].socket.getsockname()[1]
        client = AsyncOpenAI(
            api_key="sk-test", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0
        )
        sampler = OpenAISampler(client=client, models=["m"])
        result = await sampler("s", params())
        await client.close()
        nursery.cancel_scope.cancel()
    assert result.content == TextContent(text="over a socket")


# --------------------------------------------------------------------------- Anthropic


async def test_anthropic_maps_the_request_and_reads_text_and_tool_use() -> None:
    content: list[dict[str, Any]] = [
        {"type": "thinking", "thinking": "hmm", "signature": "sig"},
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {"city": "Oslo"}},
    ]
    provider = Provider(claude(content, stop="tool_use", input=40, output=9))
    sampler = AnthropicSampler(
        client=provider.anthropic(), models=["claude-haiku-4-5", "claude-sonnet-4-5"]
    )
    request = params(
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Weather?"},
                    {"type": "image", "data": PNG, "mimeType": "image/png"},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "get.weather",
                        "input": {"city": "Rome"},
                    }
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "toolUseId": "toolu_1",
                        "content": [{"type": "text", "text": "rain"}],
                        "isError": True,
                    }
                ],
            },
        ],
        systemPrompt="Be brief.",
        temperature=0.5,
        stopSequences=["END"],
        tools=[{"name": "get.weather", "inputSchema": {"type": "object"}}],
        toolChoice={"mode": "required"},
        modelPreferences={"hints": [{"name": "sonnet"}]},
    )
    result = await sampler("weather", request)
    assert result == CreateMessageResult(
        role="assistant",
        content=(
            TextContent(text="Checking."),
            ToolUseContent(id="toolu_2", name="get.weather", input={"city": "Oslo"}),
        ),
        model="claude-sonnet-4-5",
        stop_reason="toolUse",
    )
    (body,) = provider.bodies
    assert provider.paths == ["/v1/messages"]
    accepted(MessageCreateParamsNonStreaming, body)
    assert body == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 100,
        "system": "Be brief.",
        "stop_sequences": ["END"],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Weather?"},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                    },
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "get_weather",
                        "input": {"city": "Rome"},
                    }
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": [{"type": "text", "text": "rain"}],
                        "is_error": True,
                    }
                ],
            },
        ],
        "tools": [
            {
                "name": "get_weather",
                "description": "get.weather",
                "input_schema": {"type": "object", "properties": {}},
            }
        ],
        "tool_choice": {"type": "any"},
    }
    assert sampler.usage()["weather"].tokens == 49


async def test_anthropic_takes_no_audio() -> None:
    provider = Provider(claude([{"type": "text", "text": "never"}]))
    sampler = AnthropicSampler(client=provider.anthropic(), models=["claude-haiku-4-5"])
    audio = params(
        messages=[
            {"role": "user", "content": {"type": "audio", "data": WAV, "mimeType": "audio/wav"}}
        ]
    )
    with pytest.raises(SamplingRefused, match="Anthropic's Messages API takes no audio"):
        await sampler("s", audio)
    assert provider.bodies == []


# --------------------------------------------------------------------------- budget, approval


async def test_the_request_budget_refuses_the_server_past_it_and_resets() -> None:
    provider = Provider(claude([{"type": "text", "text": "ok"}]))
    sampler = AnthropicSampler(
        client=provider.anthropic(),
        models=["claude-haiku-4-5"],
        budget=SamplingBudget(max_requests=2),
        server_budgets={"vip": SamplingBudget()},
    )
    await sampler("docs", params())
    await sampler("docs", params())
    with pytest.raises(SamplingRefused) as info:
        await sampler("docs", params())
    assert info.value.reason == "budget" and info.value.code == -1
    assert str(info.value) == (
        "JSON-RPC error -1 from 'docs' to sampling/createMessage: the sampling budget of server "
        "'docs' is used up: 2 request(s) allowed, 2 made, 0 under way (the host sets it with "
        "SamplingBudget and resets it with reset_usage)"
    )
    for _ in range(3):  # another server has its own budget
        await sampler("vip", params())
    assert len(provider.bodies) == 5
    assert sampler.usage()["docs"] == SamplingUsage(
        requests=2, input_tokens=24, output_tokens=6, refused=1
    )
    sampler.reset_usage("docs")
    await sampler("docs", params())
    assert sampler.usage()["docs"].requests == 1


async def test_the_token_budget_counts_what_was_used_and_reserves_what_runs(
    autojump_clock: trio.testing.MockClock,
) -> None:
    release = trio.Event()

    class Slow(Provider):
        async def __call__(self, request: httpx2.Request) -> httpx2.Response:
            await release.wait()
            return await super().__call__(request)

    provider = Slow(completion({"content": "ok"}, prompt=20, completion=10))
    sampler = OpenAISampler(
        client=provider.openai(), models=["m"], budget=SamplingBudget(max_tokens=300)
    )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(sampler, "s", params(maxTokens=200))
        await trio.testing.wait_all_tasks_blocked()
        # 200 reserved by the request under way: 150 more would go past 300
        with pytest.raises(SamplingRefused, match="0 used, 200 reserved by requests under way"):
            await sampler("s", params(maxTokens=150))
        release.set()
    assert sampler.usage()["s"].tokens == 30
    await sampler("s", params(maxTokens=270))  # 30 used + 270 = 300: fits
    with pytest.raises(SamplingRefused, match="60 used, 0 reserved"):
        await sampler("s", params(maxTokens=241))


async def test_the_hosts_approval_sees_the_request_and_a_no_refuses_it() -> None:
    seen: list[SamplingApproval] = []

    async def approve(request: SamplingApproval) -> bool:
        seen.append(request)
        return request.params.system_prompt != "exfiltrate"

    provider = Provider(completion({"content": "fine"}))
    sampler = OpenAISampler(
        client=provider.openai(),
        models=["gpt-4.1"],
        approve=approve,
        budget=SamplingBudget(max_requests=5),
    )
    await sampler("docs", params(systemPrompt="summarise"))
    with pytest.raises(SamplingRefused) as info:
        await sampler("docs", params(systemPrompt="exfiltrate"))
    assert info.value.reason == "declined" and info.value.code == -1
    assert "the user declined the sampling request of 'docs'" in str(info.value)
    assert len(provider.bodies) == 1
    assert [(a.server, a.model, a.usage.requests, a.budget.max_requests) for a in seen] == [
        ("docs", "gpt-4.1", 0, 5),
        ("docs", "gpt-4.1", 1, 5),
    ]


async def test_include_context_is_ignored_unless_the_host_gives_context() -> None:
    provider = Provider(completion({"content": "ok"}))
    plain = OpenAISampler(client=provider.openai(), models=["m"])
    await plain("s", params(includeContext="allServers", systemPrompt="Base."))
    assert provider.bodies[-1]["messages"][0] == {"role": "system", "content": "Base."}
    assert plain.sampling_capabilities == {"tools": {}}

    asked: list[tuple[str, str]] = []

    async def context(server: str, include: str) -> str:
        asked.append((server, include))
        return "The user is reading README.md."

    with_context = OpenAISampler(
        client=provider.openai(), models=["m"], context=context, tools=False
    )
    assert with_context.sampling_capabilities == {"context": {}}
    await with_context("s", params(includeContext="thisServer", systemPrompt="Base."))
    assert provider.bodies[-1]["messages"][0] == {
        "role": "system",
        "content": "Base.\n\nThe user is reading README.md.",
    }
    await with_context("s", params(includeContext="none"))
    assert asked == [("s", "thisServer")]
    with pytest.raises(SamplingRefused, match="tools=False"):
        await with_context("s", params(tools=[{"name": "f", "inputSchema": {"type": "object"}}]))


def test_host_callbacks_declare_what_the_sampler_takes() -> None:
    sampler = OpenAISampler(client=None, models=["m"])
    assert HostCallbacks(sampling=sampler).client_capabilities() == {"sampling": {"tools": {}}}
    assert HostCallbacks(sampling=sampler).modern_capabilities() == {"sampling": {"tools": {}}}
    explicit = HostCallbacks(sampling=sampler, sampling_capabilities={})
    assert explicit.client_capabilities() == {"sampling": {}}


# --------------------------------------------------------------------------- through the runtime


async def asks_with_tools(arguments: dict[str, Any], ctx: ToolContext) -> str:
    answer = await ctx.request(
        "sampling/createMessage",
        {
            "messages": [{"role": "user", "content": {"type": "text", "text": "Oslo weather?"}}],
            "maxTokens": 50,
            "tools": [{"name": "get.weather", "inputSchema": {"type": "object"}}],
        },
    )
    (call,) = answer["content"]
    return f"{answer['stopReason']} {call['name']} {call['input']}"


async def test_a_legacy_servers_request_reaches_the_provider_and_refusals_reach_the_server() -> (
    None
):
    answer = {
        "content": None,
        "tool_calls": [
            {
                "id": "c",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
            }
        ],
    }
    provider = Provider(completion(answer, finish="tool_calls"))
    sampler = OpenAISampler(
        client=provider.openai(), models=["gpt-4.1"], budget=SamplingBudget(max_requests=1)
    )
    fake = FakeServer(name="asker", tools=[FakeTool("ask", handler=asks_with_tools)])
    async with open_runtime(
        RuntimeConfig(servers=(fake.server_config(),)), callbacks=HostCallbacks(sampling=sampler)
    ) as rt:
        await rt.wait_ready(timeout=30)
        first = await rt.call("mcp_asker_ask")
        assert first.text == "toolUse get.weather {'city': 'Oslo'}"
        # over budget: the server gets the error (this fake server passes it on as its own)
        with pytest.raises(RpcError) as info:
            await rt.call("mcp_asker_ask")
    assert info.value.code == -1
    assert "the sampling budget of server 'asker' is used up" in str(info.value)
    initialize = next(params for method, params in fake.requests if method == "initialize")
    assert initialize is not None and initialize["capabilities"]["sampling"] == {"tools": {}}
    assert len(provider.bodies) == 1


async def test_a_2026_server_gets_the_same_answer_through_the_input_rounds() -> None:
    provider = Provider(claude([{"type": "text", "text": "a summary"}]))
    sampler = AnthropicSampler(
        client=provider.anthropic(),
        models=["claude-haiku-4-5"],
        budget=SamplingBudget(max_tokens=60),
    )

    def asks(arguments: dict[str, Any], ctx: ToolContext) -> Any:
        responses = (ctx.params or {}).get("inputResponses")
        if responses is None:
            return {
                "resultType": "input_required",
                "inputRequests": {
                    "s": {
                        "method": "sampling/createMessage",
                        "params": {
                            "messages": [
                                {"role": "user", "content": {"type": "text", "text": "Sum up"}}
                            ],
                            "maxTokens": arguments.get("max", 50),
                        },
                    }
                },
            }
        return responses["s"]["content"]["text"]

    fake = FakeServer(name="modern", era="modern", tools=[FakeTool("ask", handler=asks)])
    async with open_runtime(
        RuntimeConfig(servers=(fake.server_config(),)), callbacks=HostCallbacks(sampling=sampler)
    ) as rt:
        await rt.wait_ready(timeout=30)
        assert (await rt.call("mcp_modern_ask")).text == "a summary"
        with pytest.raises(InputRequestFailed) as info:
            await rt.call("mcp_modern_ask", {"max": 50})  # 15 used + 50 > 60
    assert isinstance(info.value.__cause__, SamplingRefused)
    assert info.value.__cause__.reason == "budget"
    assert len(provider.bodies) == 1
