"""trio-mcp against the npm reference server ``@modelcontextprotocol/server-everything`` (stdio).

The server (pinned in ``package.json``, installed by ``make setup``) is built on the TypeScript SDK
1.32.2 and logs to stderr. Each test spawns it (about 0.35 s) and checks as much as it can on it;
without npm or the install the tests skip (see ``support.everything_server``).
"""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.interop.support import (
    CALL_BOUND,
    CONNECT_BOUND,
    everything_server,
    interop_runtime,
    kill_mid_call,
    next_event,
)
from trio_mcp.actors import (
    Event,
    HostCallbacks,
    ResourceUpdated,
    Runtime,
    ServerLogged,
    ServerState,
    registered_name,
)
from trio_mcp.protocol import (
    BlobResourceContents,
    CallTimeout,
    CallToolResult,
    CompleteResult,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    ElicitResult,
    EmbeddedResource,
    GetPromptResult,
    ImageContent,
    InvalidParams,
    ListPromptsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ProgressNotificationParams,
    ReadResourceResult,
    ResourceLink,
    Root,
    RpcError,
    TextContent,
    TextResourceContents,
    UrlElicitationRequired,
    decode_result,
)

pytestmark = pytest.mark.interop

#: The tools every client gets (toolchain check, §6).
BASE_TOOLS = frozenset(
    {
        "echo",
        "get-annotated-message",
        "get-env",
        "get-resource-links",
        "get-resource-reference",
        "get-structured-content",
        "get-sum",
        "get-tiny-image",
        "gzip-file-as-resource",
        "toggle-simulated-logging",
        "toggle-subscriber-updates",
        "trigger-long-running-operation",
        "simulate-research-query",
    }
)
#: Registered when the client declares roots, sampling, and elicitation (form and url); the two
#: ``-async`` variants when it also declares it runs those requests as tasks (``tasks``, which
#: the runtime declares for the callbacks the host has: test_tasks_everything.py calls them).
CALLBACK_TOOLS = frozenset(
    {
        "get-roots-list",
        "trigger-elicitation-request",
        "trigger-elicitation-request-async",
        "trigger-sampling-request",
        "trigger-sampling-request-async",
        "trigger-url-elicitation",
    }
)
STATIC_DOCUMENTS = (
    "architecture",
    "extension",
    "features",
    "how-it-works",
    "instructions",
    "startup",
    "structure",
)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def names(server: str, tools: frozenset[str]) -> set[str]:
    return {registered_name(server, tool) for tool in tools}


async def call(
    rt: Runtime, name: str, arguments: Mapping[str, Any] | None = None
) -> CallToolResult:
    with trio.fail_after(CALL_BOUND):
        return await rt.call(name, arguments)


async def request(rt: Runtime, method: str, params: Mapping[str, Any] | None = None) -> Any:
    """``method`` to the server named "everything", decoded."""
    with trio.fail_after(CALL_BOUND):
        return decode_result(method, await rt.request("everything", method, params))


async def assert_registry_matches_a_fresh_listing(rt: Runtime, expected: set[str]) -> None:
    """The server sends ``tools/list_changed`` around its first ``tools/list``: once those have
    been handled (debounced re-listing), the registry must hold exactly what a fresh listing has,
    once each."""
    with trio.fail_after(CALL_BOUND):
        await trio.sleep(0.5)  # 10x the suite's list_changed debounce
        fresh = await rt.request("everything", "tools/list")
    wire_names = [tool["name"] for tool in fresh["tools"]]
    assert len(wire_names) == len(set(wire_names))
    assert {registered_name("everything", name) for name in wire_names} == expected
    assert set(rt.tools()) == expected
    assert rt.status()["everything"].tool_count == len(expected)


async def test_base_tools_content_types_progress_and_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TRIO_MCP_INTEROP_API_TOKEN", "must-not-leak")
    server = everything_server(env={"INTEROP_MARKER": "from-config"})
    async with interop_runtime(server) as (rt, _):
        status = rt.status()["everything"]
        assert status.protocol_version == "2025-11-25"
        assert (status.server_name, status.server_version) == ("mcp-servers/everything", "2.0.0")
        assert "mcp_everything_get_sum" in rt.tools()
        assert rt.tools()["mcp_everything_get_sum"].wire_name == "get-sum"
        await assert_registry_matches_a_fresh_listing(rt, names("everything", BASE_TOOLS))

        result = await call(rt, "mcp_everything_echo", {"message": "hi ✓"})
        assert result.content == (TextContent(text="Echo: hi ✓"),)
        assert result.is_error is None

        # Its stderr (where it logs in stdio mode) is drained and kept.
        assert status.stderr_tail == ("Starting default (STDIO) server...",)

        # A 300 kB line each way: framing across many pipe reads.
        big = "ü" * 150_000
        result = await call(rt, "mcp_everything_echo", {"message": big})
        assert result.text == f"Echo: {big}"

        result = await call(rt, "mcp_everything_get_sum", {"a": 2, "b": 3})
        assert result.text == "The sum of 2 and 3 is 5."

        result = await call(rt, "mcp_everything_get_tiny_image")
        assert [type(block) for block in result.content] == [TextContent, ImageContent, TextContent]
        image = result.content[1]
        assert isinstance(image, ImageContent)
        assert image.mime_type == "image/png"
        assert base64.b64decode(image.data).startswith(PNG_SIGNATURE)

        result = await call(rt, "mcp_everything_get_resource_links", {"count": 2})
        assert result.content == (
            TextContent(text="Here are 2 resource links to resources available in this server:"),
            ResourceLink(
                uri="demo://resource/dynamic/blob/1",
                name="Blob Resource 1",
                description="Resource 1: plaintext resource",
                mime_type="text/plain",
            ),
            ResourceLink(
                uri="demo://resource/dynamic/text/2",
                name="Text Resource 2",
                description="Resource 2: plaintext resource",
                mime_type="text/plain",
            ),
        )

        result = await call(rt, "mcp_everything_get_structured_content", {"location": "Chicago"})
        weather = {"temperature": 36, "conditions": "Light rain / drizzle", "humidity": 82}
        assert result.structured_content == weather
        assert json.loads(result.text) == weather

        seen: list[ProgressNotificationParams] = []
        with trio.fail_after(CALL_BOUND):
            result = await rt.call(
                "mcp_everything_trigger_long_running_operation",
                {"duration": 0.4, "steps": 4},
                progress=seen.append,
            )
        assert result.text == "Long running operation completed. Duration: 0.4 seconds, Steps: 4."
        assert [(p.progress, p.total) for p in seen] == [(1, 4), (2, 4), (3, 4), (4, 4)]

        # 50 calls in flight on the one connection: each answer reaches its own caller.
        answers: dict[int, str] = {}

        async def echo(index: int) -> None:
            answers[index] = (await call(rt, "mcp_everything_echo", {"message": f"m{index}"})).text

        async with trio.open_nursery() as nursery:
            for index in range(50):
                nursery.start_soon(echo, index)
        assert answers == {index: f"Echo: m{index}" for index in range(50)}

        unknown = await request(rt, "tools/call", {"name": "nope", "arguments": {}})
        assert isinstance(unknown, CallToolResult)
        assert (unknown.is_error, unknown.text) == (True, "MCP error -32602: Tool nope not found")

        # The child's environment: the server's own env, and none of the host's secrets.
        env = json.loads((await call(rt, "mcp_everything_get_env")).text)
        assert env["INTEROP_MARKER"] == "from-config"
        assert "TRIO_MCP_INTEROP_API_TOKEN" not in env
        assert env["PATH"] == os.environ["PATH"]


async def test_resources_templates_prompts_and_completion() -> None:
    async with interop_runtime(everything_server()) as (rt, _):
        listed = await request(rt, "resources/list")
        assert isinstance(listed, ListResourcesResult)
        assert listed.next_cursor is None
        assert [(r.uri, r.name, r.mime_type) for r in listed.resources] == [
            (f"demo://resource/static/document/{doc}.md", f"{doc}.md", "text/markdown")
            for doc in STATIC_DOCUMENTS
        ]

        templates = await request(rt, "resources/templates/list")
        assert isinstance(templates, ListResourceTemplatesResult)
        assert [(t.uri_template, t.mime_type) for t in templates.resource_templates] == [
            ("demo://resource/dynamic/text/{resourceId}", "text/plain"),
            ("demo://resource/dynamic/blob/{resourceId}", "application/octet-stream"),
        ]

        document = await request(
            rt, "resources/read", {"uri": "demo://resource/static/document/features.md"}
        )
        assert isinstance(document, ReadResourceResult)
        (contents,) = document.contents
        assert isinstance(contents, TextResourceContents)
        assert contents.mime_type == "text/markdown"
        assert contents.text.startswith("# Everything Server - Features\n")

        text = await request(rt, "resources/read", {"uri": "demo://resource/dynamic/text/3"})
        (contents,) = text.contents
        assert isinstance(contents, TextResourceContents)
        assert contents.text.startswith("Resource 3: This is a plaintext resource created at ")

        blob = await request(rt, "resources/read", {"uri": "demo://resource/dynamic/blob/3"})
        (contents,) = blob.contents
        assert isinstance(contents, BlobResourceContents)
        assert base64.b64decode(contents.blob).startswith(
            b"Resource 3: This is a base64 blob created at "
        )

        # An unknown resource: the TS SDK answers -32602 (no data.uri), not 2025-11-25's -32002.
        with trio.fail_after(CALL_BOUND), pytest.raises(InvalidParams) as info:
            await rt.request("everything", "resources/read", {"uri": "demo://nope"})
        assert info.value.code == -32602
        assert info.value.args[0] == "MCP error -32602: Resource demo://nope not found"

        prompts = await request(rt, "prompts/list")
        assert isinstance(prompts, ListPromptsResult)
        assert [p.name for p in prompts.prompts] == [
            "simple-prompt",
            "args-prompt",
            "completable-prompt",
            "resource-prompt",
        ]
        args_prompt = prompts.prompts[1]
        assert args_prompt.arguments is not None
        assert [(a.name, a.required) for a in args_prompt.arguments] == [
            ("city", True),
            ("state", False),
        ]

        got = await request(
            rt,
            "prompts/get",
            {"name": "args-prompt", "arguments": {"city": "Paris", "state": "TX"}},
        )
        assert isinstance(got, GetPromptResult)
        assert [(m.role, m.content) for m in got.messages] == [
            ("user", TextContent(text="What's weather in Paris, TX?"))
        ]
        with trio.fail_after(CALL_BOUND), pytest.raises(InvalidParams, match="at city"):
            await rt.request("everything", "prompts/get", {"name": "args-prompt"})

        embedded = await request(
            rt,
            "prompts/get",
            {"name": "resource-prompt", "arguments": {"resourceType": "Text", "resourceId": "2"}},
        )
        assert isinstance(embedded, GetPromptResult)
        block = embedded.messages[1].content
        assert isinstance(block, EmbeddedResource)
        assert block.resource.uri == "demo://resource/dynamic/text/2"

        completion = await request(
            rt,
            "completion/complete",
            {
                "ref": {"type": "ref/prompt", "name": "completable-prompt"},
                "argument": {"name": "department", "value": "En"},
            },
        )
        assert isinstance(completion, CompleteResult)
        assert completion.completion.values == ("Engineering",)
        assert (completion.completion.total, completion.completion.has_more) == (1, False)


async def test_log_levels_logging_and_resource_subscriptions() -> None:
    uri = "demo://resource/static/document/features.md"

    def server_log(event: Event) -> bool:
        return isinstance(event, ServerLogged) and not event.stderr

    # log_level: logging/setLevel "error" is sent in the handshake (the server declares logging).
    async with interop_runtime(everything_server(log_level="error")) as (rt, _):
        with rt.events() as events:
            # The server logs each (un)subscription at level info, before it answers.
            with trio.fail_after(CALL_BOUND):
                assert await rt.request("everything", "resources/subscribe", {"uri": uri}) == {}

            # The first update is sent at once, then every 5 s.
            result = await call(rt, "mcp_everything_toggle_subscriber_updates")
            assert result.text.startswith("Started")
            updated = await next_event(events, lambda e: isinstance(e, ResourceUpdated))
            assert updated == ResourceUpdated(server="everything", uri=uri)

            with trio.fail_after(CALL_BOUND):
                assert await rt.request("everything", "logging/setLevel", {"level": "debug"}) == {}
                assert await rt.request("everything", "resources/unsubscribe", {"uri": uri}) == {}
            # The first log message that arrives is the unsubscription's: at level "error" the
            # subscription's was filtered out by the server.
            logged = await next_event(events, server_log)
            assert logged == ServerLogged(
                server="everything",
                level="info",
                data=f"Received Unsubscribe Resource request: {uri} ",
            )

            # The first simulated message is sent at once, at a random level.
            result = await call(rt, "mcp_everything_toggle_simulated_logging")
            assert result.text.startswith("Started simulated, random-leveled logging")
            logged = await next_event(events, server_log)
            assert isinstance(logged, ServerLogged)
            expected = {
                "debug": "Debug-level message",
                "info": "Info-level message",
                "notice": "Notice-level message",
                "warning": "Warning-level message",
                "error": "Error-level message",
                "critical": "Critical-level message",
                "alert": "Alert level-message",
                "emergency": "Emergency-level message",
            }
            assert (logged.server, logged.data) == ("everything", expected[logged.level])

            await call(rt, "mcp_everything_toggle_simulated_logging")
            await call(rt, "mcp_everything_toggle_subscriber_updates")


async def test_host_callbacks_add_tools_and_round_trip(tmp_path: Path) -> None:
    root = Root(uri=tmp_path.as_uri(), name="interop root")
    roots_asked: list[str] = []
    sampled: list[tuple[str, CreateMessageRequestParams]] = []
    elicited: list[tuple[str, ElicitRequestFormParams | ElicitRequestURLParams]] = []

    async def list_roots(server: str) -> list[Root]:
        roots_asked.append(server)
        return [root]

    async def sampling(server: str, params: CreateMessageRequestParams) -> CreateMessageResult:
        sampled.append((server, params))
        if params.max_tokens == 1:
            raise RpcError.from_error(-1, "the user refused the sampling request")
        return CreateMessageResult(
            role="assistant",
            content=TextContent(text="sampled text"),
            model="interop-model",
            stop_reason="endTurn",
        )

    async def elicitation(
        server: str, params: ElicitRequestFormParams | ElicitRequestURLParams
    ) -> ElicitResult:
        elicited.append((server, params))
        if isinstance(params, ElicitRequestURLParams):
            return ElicitResult(action="accept")
        return ElicitResult(action="accept", content={"name": "Ann", "check": True, "integer": 7})

    callbacks = HostCallbacks(
        list_roots=list_roots,
        sampling=sampling,
        elicitation=elicitation,
        elicitation_modes=("form", "url"),
    )
    async with interop_runtime(everything_server(), callbacks=callbacks) as (rt, _):
        await assert_registry_matches_a_fresh_listing(
            rt, names("everything", BASE_TOOLS | CALLBACK_TOOLS)
        )

        result = await call(rt, "mcp_everything_get_roots_list")
        assert result.text.startswith(
            f"Current MCP Roots (1 total):\n\n1. interop root\n   URI: {root.uri}\n\n"
        )
        assert roots_asked and set(roots_asked) == {"everything"}

        result = await call(
            rt, "mcp_everything_trigger_sampling_request", {"prompt": "hello", "maxTokens": 20}
        )
        ((server, params),) = sampled
        assert server == "everything"
        assert params.max_tokens == 20
        assert params.system_prompt == "You are a helpful test server."
        assert params.temperature == 0.7
        (message,) = params.messages
        assert message.role == "user"
        assert message.content == TextContent(
            text="Resource trigger-sampling-request context: hello"
        )
        assert result.text.startswith("LLM sampling result: \n")
        assert json.loads(result.text.removeprefix("LLM sampling result: \n")) == {
            "role": "assistant",
            "content": {"type": "text", "text": "sampled text"},
            "model": "interop-model",
            "stopReason": "endTurn",
        }

        # A callback that refuses answers the server with that JSON-RPC error; the tool reports it.
        result = await call(
            rt, "mcp_everything_trigger_sampling_request", {"prompt": "no", "maxTokens": 1}
        )
        assert (result.is_error, result.text) == (
            True,
            "MCP error -1: the user refused the sampling request",
        )

        result = await call(rt, "mcp_everything_trigger_elicitation_request")
        server, form = elicited[-1]
        assert server == "everything"
        assert isinstance(form, ElicitRequestFormParams)
        assert form.message == "Please provide inputs for the following fields:"
        assert form.requested_schema["required"] == ["name"]
        texts = [block.text for block in result.content if isinstance(block, TextContent)]
        assert texts[:2] == [
            "✅ User provided the requested information!",
            "User inputs:\n- Name: Ann\n- Agreed to terms: true\n- Favorite Integer: 7",
        ]

        arguments = {"url": "https://example.com/consent", "elicitationId": "e-1"}
        result = await call(rt, "mcp_everything_trigger_url_elicitation", arguments)
        server, url = elicited[-1]
        assert isinstance(url, ElicitRequestURLParams)
        assert (url.url, url.elicitation_id, url.message) == (
            "https://example.com/consent",
            "e-1",
            "Please open the link to complete this action.",
        )
        assert result.content[0] == TextContent(
            text="✅ User completed the URL elicitation flow.\n"
            "Elicitation ID: e-1\nURL: https://example.com/consent"
        )

        # The error path: -32042 with the elicitations to complete, raised typed.
        with trio.fail_after(CALL_BOUND), pytest.raises(UrlElicitationRequired) as info:
            await rt.call(
                "mcp_everything_trigger_url_elicitation", {**arguments, "errorPath": True}
            )
        (needed,) = info.value.data["elicitations"]
        assert (needed["mode"], needed["url"]) == ("url", "https://modelcontextprotocol.io")
        assert len(elicited) == 2


async def test_sigkill_mid_call_fails_it_promptly_and_the_server_comes_back() -> None:
    async with interop_runtime(everything_server()) as (rt, groups):
        first_pid, error = await kill_mid_call(
            rt,
            "everything",
            "mcp_everything_trigger_long_running_operation",
            {"duration": 30, "steps": 300},
        )
        assert (error.server, error.sent) == ("everything", True)
        assert rt.status()["everything"].state is ServerState.RECONNECTING
        assert dict(rt.tools()) == {}

        with trio.fail_after(CONNECT_BOUND):
            await rt.wait_ready()
        status = rt.status()["everything"]
        assert (status.state, status.generation) == (ServerState.READY, 2)
        assert status.pid not in (None, first_pid)
        await assert_registry_matches_a_fresh_listing(rt, names("everything", BASE_TOOLS))
        groups.record(rt)
        dead_group = groups.seen[first_pid]
        assert not [line for line in groups.leftovers() if f"pgid {dead_group})" in line]
        result = await call(rt, "mcp_everything_echo", {"message": "back"})
        assert result.text == "Echo: back"


async def test_progress_resets_the_call_timeout_up_to_max_call_time() -> None:
    server = everything_server(timeout=0.5, progress_resets_timeout=True, max_call_time=2.0)
    async with interop_runtime(server) as (rt, _):
        # 1.2 s in all, a progress notification every 0.1 s: each one restarts the 0.5 s timer.
        started = trio.current_time()
        result = await call(
            rt, "mcp_everything_trigger_long_running_operation", {"duration": 1.2, "steps": 12}
        )
        assert result.text.endswith("Duration: 1.2 seconds, Steps: 12.")
        assert trio.current_time() - started > 1.0

        # Progress keeps coming, but max_call_time ends the call at 2 s.
        started = trio.current_time()
        with trio.fail_after(CALL_BOUND), pytest.raises(CallTimeout) as info:
            await rt.call(
                "mcp_everything_trigger_long_running_operation", {"duration": 5, "steps": 50}
            )
        assert 2.0 <= trio.current_time() - started < 3.0
        assert re.fullmatch(
            r"tools/call to server 'everything' got no answer in 2(\.\d+)? s", info.value.args[0]
        )
        result = await call(rt, "mcp_everything_echo", {"message": "still there"})
        assert result.text == "Echo: still there"
