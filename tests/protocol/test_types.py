"""Exact decoding of hand-written messages of each revision, and the errors of bad ones."""

from __future__ import annotations

from typing import Any

import pytest

from trio_mcp.protocol import _types as t
from trio_mcp.protocol._codec import structure, unstructure
from trio_mcp.protocol._errors import InvalidMessage, ToolExecutionError
from trio_mcp.protocol._methods import WIRE_TYPES, decode_notification, decode_params, decode_result


def _round_trips(wire: dict[str, Any], obj: Any) -> None:
    assert unstructure(obj) == wire


def _invalid(wire: Any, name: str, path: str = "$.result") -> InvalidMessage:
    with pytest.raises(InvalidMessage) as info:
        structure(wire, WIRE_TYPES[name], path=path)
    return info.value


# --------------------------------------------------------------------------- 2024-11-05


def test_2024_initialize_result() -> None:
    wire = {
        "protocolVersion": "2024-11-05",
        "capabilities": {
            "logging": {},
            "prompts": {"listChanged": True},
            "resources": {"subscribe": True, "listChanged": False},
            "tools": {},
            "experimental": {"x.example/feature": {"on": 1}},
        },
        "serverInfo": {"name": "files", "version": "1.2.0"},
        "instructions": "Read before you write.",
    }
    result = decode_result("initialize", wire)
    assert result == t.InitializeResult(
        protocol_version="2024-11-05",
        capabilities=t.ServerCapabilities(
            logging={},
            prompts=t.PromptsCapability(list_changed=True),
            resources=t.ResourcesCapability(subscribe=True, list_changed=False),
            tools=t.ToolsCapability(),
            experimental={"x.example/feature": {"on": 1}},
        ),
        server_info=t.Implementation(name="files", version="1.2.0"),
        instructions="Read before you write.",
    )
    _round_trips(wire, result)


def test_2024_initialize_request_params_encode_exactly() -> None:
    params = t.InitializeRequestParams(
        protocol_version="2024-11-05",
        capabilities=t.ClientCapabilities(
            roots=t.RootsCapability(list_changed=True), sampling=t.SamplingCapability()
        ),
        client_info=t.Implementation(name="trio-mcp", version="0.1"),
    )
    assert unstructure(params) == {
        "protocolVersion": "2024-11-05",
        "capabilities": {"roots": {"listChanged": True}, "sampling": {}},
        "clientInfo": {"name": "trio-mcp", "version": "0.1"},
    }


def test_2024_call_tool_result_with_image_and_embedded_resource() -> None:
    wire = {
        "content": [
            {
                "type": "text",
                "text": "Here is the chart",
                "annotations": {"audience": ["user"], "priority": 0.5},
            },
            {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
            {
                "type": "resource",
                "resource": {
                    "uri": "file:///data.csv",
                    "mimeType": "text/csv",
                    "text": "a,b\n1,2\n",
                },
            },
        ],
        "isError": False,
    }
    result = decode_result("tools/call", wire)
    assert result == t.CallToolResult(
        content=(
            t.TextContent(
                text="Here is the chart",
                annotations=t.Annotations(audience=("user",), priority=0.5),
            ),
            t.ImageContent(data="iVBORw0KGgo=", mime_type="image/png"),
            t.EmbeddedResource(
                resource=t.TextResourceContents(
                    uri="file:///data.csv", mime_type="text/csv", text="a,b\n1,2\n"
                )
            ),
        ),
        is_error=False,
    )
    assert result.text == "Here is the chart"
    assert result.raise_for_error() is result
    _round_trips(wire, result)


def test_2024_prompt_and_completion_reference() -> None:
    prompts = decode_result(
        "prompts/list",
        {
            "prompts": [{"name": "review", "arguments": [{"name": "code", "required": True}]}],
            "nextCursor": "p2",
        },
    )
    assert prompts == t.ListPromptsResult(
        prompts=(
            t.Prompt(name="review", arguments=(t.PromptArgument(name="code", required=True),)),
        ),
        next_cursor="p2",
    )
    params = decode_params(
        "completion/complete",
        {
            "ref": {"type": "ref/resource", "uri": "file:///{path}"},
            "argument": {"name": "path", "value": "sr"},
        },
    )
    assert params == t.CompleteRequestParams(
        ref=t.ResourceTemplateReference(uri="file:///{path}"),
        argument=t.CompletionArgument(name="path", value="sr"),
    )
    assert WIRE_TYPES["ResourceReference"] is t.ResourceTemplateReference


def test_2024_sampling_request_and_result() -> None:
    params = decode_params(
        "sampling/createMessage",
        {
            "messages": [
                {"role": "user", "content": {"type": "text", "text": "Capital of France?"}}
            ],
            "modelPreferences": {"hints": [{"name": "sonnet"}], "speedPriority": 0.2},
            "includeContext": "thisServer",
            "maxTokens": 50,
            "stopSequences": ["\n\n"],
            "metadata": {"trace": "abc"},
        },
    )
    assert params == t.CreateMessageRequestParams(
        messages=(
            t.SamplingMessage(role="user", content=t.TextContent(text="Capital of France?")),
        ),
        model_preferences=t.ModelPreferences(
            hints=(t.ModelHint(name="sonnet"),), speed_priority=0.2
        ),
        include_context="thisServer",
        max_tokens=50,
        stop_sequences=("\n\n",),
        metadata={"trace": "abc"},
    )
    answer = t.CreateMessageResult(
        role="assistant", content=t.TextContent(text="Paris"), model="m-1", stop_reason="endTurn"
    )
    assert unstructure(answer) == {
        "role": "assistant",
        "content": {"type": "text", "text": "Paris"},
        "model": "m-1",
        "stopReason": "endTurn",
    }


def test_2024_resource_read_text_and_blob() -> None:
    wire = {
        "contents": [
            {"uri": "file:///a.txt", "text": "hello"},
            {"uri": "file:///a.bin", "mimeType": "application/octet-stream", "blob": "AAE="},
        ]
    }
    result = decode_result("resources/read", wire)
    assert result == t.ReadResourceResult(
        contents=(
            t.TextResourceContents(uri="file:///a.txt", text="hello"),
            t.BlobResourceContents(
                uri="file:///a.bin", mime_type="application/octet-stream", blob="AAE="
            ),
        )
    )
    _round_trips(wire, result)


def test_2024_logging_progress_and_cancellation_notifications() -> None:
    assert decode_notification(
        "notifications/message", {"level": "warning", "logger": "db", "data": {"slow": True}}
    ) == t.LoggingMessageNotificationParams(level="warning", logger="db", data={"slow": True})
    assert decode_notification("notifications/message", {"level": "info", "data": None}) == (
        t.LoggingMessageNotificationParams(level="info", data=None)
    )
    assert unstructure(t.LoggingMessageNotificationParams(level="info", data=None)) == {
        "level": "info",
        "data": None,
    }
    assert decode_notification(
        "notifications/progress", {"progressToken": "tok", "progress": 3, "total": 10}
    ) == t.ProgressNotificationParams(progress_token="tok", progress=3, total=10)
    assert decode_notification(
        "notifications/cancelled", {"requestId": 7, "reason": "user hit stop"}
    ) == t.CancelledNotificationParams(request_id=7, reason="user hit stop")


# --------------------------------------------------------------------------- 2025-03-26


def test_2025_03_tool_annotations_audio_and_progress_message() -> None:
    tools = decode_result(
        "tools/list",
        {
            "tools": [
                {
                    "name": "rm",
                    "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
                    "annotations": {
                        "title": "Remove file",
                        "destructiveHint": True,
                        "readOnlyHint": False,
                    },
                }
            ]
        },
    )
    (tool,) = tools.tools
    assert tool.annotations == t.ToolAnnotations(
        title="Remove file", destructive_hint=True, read_only_hint=False
    )
    assert tool.display_name == "Remove file"
    result = decode_result(
        "tools/call", {"content": [{"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"}]}
    )
    assert result.content == (t.AudioContent(data="UklGRg==", mime_type="audio/wav"),)
    progress = decode_notification(
        "notifications/progress", {"progressToken": 1, "progress": 0.5, "message": "halfway"}
    )
    assert progress == t.ProgressNotificationParams(
        progress_token=1, progress=0.5, message="halfway"
    )


# --------------------------------------------------------------------------- 2025-06-18


def test_2025_06_structured_content_resource_link_and_titles() -> None:
    wire = {
        "content": [
            {"type": "text", "text": '{"temp": 21}'},
            {
                "type": "resource_link",
                "uri": "file:///report.md",
                "name": "report",
                "title": "Weather report",
                "mimeType": "text/markdown",
                "size": 2048,
                "annotations": {"lastModified": "2025-06-18T10:00:00Z"},
            },
        ],
        "structuredContent": {"temp": 21},
        "_meta": {"example.com/trace": "t-1"},
    }
    result = decode_result("tools/call", wire)
    assert result == t.CallToolResult(
        content=(
            t.TextContent(text='{"temp": 21}'),
            t.ResourceLink(
                uri="file:///report.md",
                name="report",
                title="Weather report",
                mime_type="text/markdown",
                size=2048,
                annotations=t.Annotations(last_modified="2025-06-18T10:00:00Z"),
            ),
        ),
        structured_content={"temp": 21},
        meta={"example.com/trace": "t-1"},
    )
    link = result.content[1]
    assert isinstance(link, t.Resource)
    assert link.display_name == "Weather report"
    _round_trips(wire, result)


def test_2025_06_tool_with_output_schema_and_title() -> None:
    tool = structure(
        {
            "name": "weather",
            "title": "Weather",
            "inputSchema": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
            "outputSchema": {"type": "object", "properties": {"temp": {"type": "number"}}},
        },
        t.Tool,
    )
    assert tool.output_schema == {"type": "object", "properties": {"temp": {"type": "number"}}}
    assert tool.input_schema["required"] == ["city"]
    assert tool.display_name == "Weather"
    assert structure({"name": "x", "inputSchema": {}}, t.Tool).display_name == "x"


def test_2025_06_form_elicitation_without_mode() -> None:
    wire = {
        "message": "Your GitHub login?",
        "requestedSchema": {
            "type": "object",
            "properties": {"login": {"type": "string"}},
            "required": ["login"],
        },
    }
    params = decode_params("elicitation/create", wire)
    assert params == t.ElicitRequestFormParams(
        message="Your GitHub login?",
        requested_schema={
            "type": "object",
            "properties": {"login": {"type": "string"}},
            "required": ["login"],
        },
    )
    _round_trips(wire, params)
    answer = t.ElicitResult(action="accept", content={"login": "octocat", "age": 30, "tags": ["a"]})
    assert unstructure(answer) == {
        "action": "accept",
        "content": {"login": "octocat", "age": 30, "tags": ["a"]},
    }


def test_2025_06_completion_context() -> None:
    params = decode_params(
        "completion/complete",
        {
            "ref": {"type": "ref/prompt", "name": "review", "title": "Review"},
            "argument": {"name": "lang", "value": "py"},
            "context": {"arguments": {"repo": "trio"}},
        },
    )
    assert params.ref == t.PromptReference(name="review", title="Review")
    assert params.context == t.CompletionContext(arguments={"repo": "trio"})
    result = decode_result(
        "completion/complete", {"completion": {"values": ["python"], "total": 1, "hasMore": False}}
    )
    assert result == t.CompleteResult(
        completion=t.Completion(values=("python",), total=1, has_more=False)
    )


# --------------------------------------------------------------------------- 2025-11-25


def test_2025_11_icons_and_implementation_fields() -> None:
    wire = {
        "protocolVersion": "2025-11-25",
        "capabilities": {"tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}},
        "serverInfo": {
            "name": "srv",
            "title": "Server",
            "version": "2.0",
            "description": "Does things",
            "websiteUrl": "https://srv.example",
            "icons": [
                {
                    "src": "https://srv.example/i.png",
                    "mimeType": "image/png",
                    "sizes": ["48x48"],
                    "theme": "dark",
                }
            ],
        },
    }
    result = decode_result("initialize", wire)
    assert result.server_info == t.Implementation(
        name="srv",
        title="Server",
        version="2.0",
        description="Does things",
        website_url="https://srv.example",
        icons=(
            t.Icon(
                src="https://srv.example/i.png",
                mime_type="image/png",
                sizes=("48x48",),
                theme="dark",
            ),
        ),
    )
    tasks = result.capabilities.tasks
    assert tasks is not None
    assert tasks.supports_request("tools/call")
    assert not tasks.supports_request("sampling/createMessage")
    assert not t.TasksCapability(requests={"tools": {"call": True}}).supports_request("tools/call")
    _round_trips(wire, result)


def test_2025_11_url_elicitation_and_completion_notice() -> None:
    wire = {
        "mode": "url",
        "message": "Sign in to continue",
        "url": "https://auth.example/start?x=1",
        "elicitationId": "e-42",
    }
    params = decode_params("elicitation/create", wire)
    assert params == t.ElicitRequestURLParams(
        message="Sign in to continue", url="https://auth.example/start?x=1", elicitation_id="e-42"
    )
    _round_trips(wire, params)
    assert decode_notification("notifications/elicitation/complete", {"elicitationId": "e-42"}) == (
        t.ElicitationCompleteNotificationParams(elicitation_id="e-42")
    )
    data = structure({"elicitations": [wire]}, t.UrlElicitationRequiredData)
    assert data.elicitations == (params,)


def test_2025_11_task_augmented_tool_call() -> None:
    params = t.CallToolRequestParams(
        name="render", arguments={"scene": 1}, task=t.TaskMetadata(ttl=60000)
    )
    assert unstructure(params) == {
        "name": "render",
        "arguments": {"scene": 1},
        "task": {"ttl": 60000},
    }
    created = decode_result(
        "tools/call",
        {
            "task": {
                "taskId": "t-1",
                "status": "working",
                "createdAt": "2025-11-25T10:00:00Z",
                "lastUpdatedAt": "2025-11-25T10:00:00Z",
                "ttl": None,
                "pollInterval": 500,
            },
            "_meta": {"io.modelcontextprotocol/model-immediate-response": "Working on it"},
        },
    )
    assert created == t.CreateTaskResult(
        task=t.Task(
            task_id="t-1",
            status="working",
            created_at="2025-11-25T10:00:00Z",
            last_updated_at="2025-11-25T10:00:00Z",
            ttl=None,
            poll_interval=500,
        ),
        meta={"io.modelcontextprotocol/model-immediate-response": "Working on it"},
    )
    # ttl is required but nullable: null is written, not dropped.
    assert unstructure(created.task)["ttl"] is None


def test_2025_11_task_polling_shapes() -> None:
    task_fields = {
        "taskId": "t-1",
        "status": "input_required",
        "statusMessage": "needs a login",
        "createdAt": "a",
        "lastUpdatedAt": "b",
        "ttl": 30000,
    }
    assert decode_result("tasks/get", task_fields) == t.GetTaskResult(
        task_id="t-1",
        status="input_required",
        status_message="needs a login",
        created_at="a",
        last_updated_at="b",
        ttl=30000,
    )
    assert isinstance(
        decode_result("tasks/cancel", {**task_fields, "status": "cancelled"}), t.CancelTaskResult
    )
    listed = decode_result("tasks/list", {"tasks": [task_fields], "nextCursor": "n"})
    assert listed.tasks[0].status_message == "needs a login"
    assert listed.next_cursor == "n"
    payload = decode_result("tasks/result", {"content": [], "isError": False})
    assert payload == t.GetTaskPayloadResult(extra={"content": [], "isError": False})
    assert decode_notification(
        "notifications/tasks/status", task_fields
    ) == t.TaskStatusNotificationParams(
        task_id="t-1",
        status="input_required",
        status_message="needs a login",
        created_at="a",
        last_updated_at="b",
        ttl=30000,
    )
    error = _invalid({k: v for k, v in task_fields.items() if k != "ttl"}, "GetTaskResult")
    assert error.path == "$.result.ttl"
    assert str(error) == "invalid GetTaskResult: required field missing @ $.result.ttl"


def test_2025_11_cancel_without_request_id_and_sampling_with_tools() -> None:
    assert decode_notification(
        "notifications/cancelled", {"reason": "task"}
    ) == t.CancelledNotificationParams(reason="task")
    params = decode_params(
        "sampling/createMessage",
        {
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
                {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": "c1",
                            "name": "weather",
                            "input": {"city": "Paris"},
                        }
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "toolUseId": "c1",
                            "content": [{"type": "text", "text": "18C"}],
                            "structuredContent": {"c": 18},
                        }
                    ],
                },
            ],
            "maxTokens": 100,
            "tools": [{"name": "weather", "inputSchema": {"type": "object"}}],
            "toolChoice": {"mode": "auto"},
        },
    )
    assert params.messages[1].content == (
        t.ToolUseContent(id="c1", name="weather", input={"city": "Paris"}),
    )
    assert params.messages[2].content == (
        t.ToolResultContent(
            tool_use_id="c1", content=(t.TextContent(text="18C"),), structured_content={"c": 18}
        ),
    )
    assert params.tools == (t.Tool(name="weather", input_schema={"type": "object"}),)
    assert params.tool_choice == t.ToolChoice(mode="auto")


# --------------------------------------------------------------------------- 2026-07-28


def test_2026_discover_result() -> None:
    wire = {
        "resultType": "complete",
        "supportedVersions": ["2026-07-28", "2025-11-25"],
        "capabilities": {
            "tools": {"listChanged": True},
            "extensions": {"io.modelcontextprotocol/skills": {"directoryRead": True}},
        },
        "ttlMs": 60000,
        "cacheScope": "public",
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "srv", "version": "3"}},
    }
    result = decode_result("server/discover", wire)
    assert result == t.DiscoverResult(
        result_type="complete",
        supported_versions=("2026-07-28", "2025-11-25"),
        capabilities=t.ServerCapabilities(
            tools=t.ToolsCapability(list_changed=True),
            extensions={"io.modelcontextprotocol/skills": {"directoryRead": True}},
        ),
        ttl_ms=60000,
        cache_scope="public",
        meta={"io.modelcontextprotocol/serverInfo": {"name": "srv", "version": "3"}},
    )
    _round_trips(wire, result)


def test_2026_cacheable_list_and_any_structured_content() -> None:
    listed = decode_result(
        "tools/list",
        {
            "resultType": "complete",
            "tools": [],
            "ttlMs": 0,
            "cacheScope": "private",
            "nextCursor": "",
        },
    )
    assert listed == t.ListToolsResult(
        result_type="complete", tools=(), ttl_ms=0, cache_scope="private", next_cursor=""
    )
    called = decode_result(
        "tools/call", {"resultType": "complete", "content": [], "structuredContent": [1, "two"]}
    )
    assert called.structured_content == [1, "two"]


def test_2026_input_required_result() -> None:
    wire = {
        "resultType": "input_required",
        "inputRequests": {
            "login": {
                "method": "elicitation/create",
                "params": {"mode": "url", "message": "Sign in", "url": "https://auth.example"},
            },
            "ask": {
                "method": "sampling/createMessage",
                "params": {
                    "messages": [{"role": "user", "content": {"type": "text", "text": "2+2?"}}],
                    "maxTokens": 5,
                },
            },
            "where": {"method": "roots/list"},
        },
        "requestState": "opaque-blob",
    }
    result = decode_result("resources/read", wire)
    assert result == t.InputRequiredResult(
        result_type="input_required",
        input_requests={
            "login": t.ElicitRequest(
                params=t.ElicitRequestURLParams(message="Sign in", url="https://auth.example")
            ),
            "ask": t.CreateMessageRequest(
                params=t.CreateMessageRequestParams(
                    messages=(t.SamplingMessage(role="user", content=t.TextContent(text="2+2?")),),
                    max_tokens=5,
                )
            ),
            "where": t.ListRootsRequest(),
        },
        request_state="opaque-blob",
    )
    _round_trips(wire, result)


def test_2026_retry_with_input_responses_encodes_exactly() -> None:
    params = t.CallToolRequestParams(
        name="deploy",
        input_responses={
            "login": t.ElicitResult(action="accept"),
            "ask": t.CreateMessageResult(
                role="assistant", content=t.TextContent(text="4"), model="m"
            ),
            "where": t.ListRootsResult(roots=(t.Root(uri="file:///src", name="src"),)),
        },
        request_state="opaque-blob",
        meta={
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        },
    )
    wire = unstructure(params)
    assert wire == {
        "name": "deploy",
        "inputResponses": {
            "login": {"action": "accept"},
            "ask": {"role": "assistant", "content": {"type": "text", "text": "4"}, "model": "m"},
            "where": {"roots": [{"uri": "file:///src", "name": "src"}]},
        },
        "requestState": "opaque-blob",
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        },
    }
    assert decode_params("tools/call", wire) == params


def test_2026_unknown_input_request_is_kept() -> None:
    result = decode_result(
        "prompts/get",
        {
            "resultType": "input_required",
            "inputRequests": {"k": {"method": "x/new", "params": {"a": 1}}},
        },
    )
    assert result.input_requests == {
        "k": t.UnknownInputRequest(method="x/new", extra={"params": {"a": 1}})
    }


def test_2026_subscriptions() -> None:
    params = t.SubscriptionsListenRequestParams(
        notifications=t.SubscriptionFilter(
            tools_list_changed=True, resource_subscriptions=("file:///a",)
        ),
    )
    assert unstructure(params) == {
        "notifications": {"toolsListChanged": True, "resourceSubscriptions": ["file:///a"]}
    }
    ack = decode_notification(
        "notifications/subscriptions/acknowledged",
        {
            "_meta": {"io.modelcontextprotocol/subscriptionId": 9},
            "notifications": {"toolsListChanged": True},
        },
    )
    assert ack == t.SubscriptionsAcknowledgedNotificationParams(
        notifications=t.SubscriptionFilter(tools_list_changed=True),
        meta={"io.modelcontextprotocol/subscriptionId": 9},
    )
    ended = decode_result(
        "subscriptions/listen",
        {"resultType": "complete", "_meta": {"io.modelcontextprotocol/subscriptionId": "L1"}},
    )
    assert ended.subscription_id == "L1"
    assert t.SubscriptionsListenResult().subscription_id is None


def test_2026_tasks_extension_shapes() -> None:
    created = decode_result(
        "tools/call",
        {
            "resultType": "task",
            "taskId": "786",
            "status": "working",
            "createdAt": "a",
            "lastUpdatedAt": "b",
            "ttlMs": None,
            "pollIntervalMs": 5000,
        },
    )
    assert created == t.ExtCreateTaskResult(
        result_type="task",
        task_id="786",
        status="working",
        created_at="a",
        last_updated_at="b",
        ttl_ms=None,
        poll_interval_ms=5000,
    )
    assert unstructure(created)["ttlMs"] is None
    polled = decode_result(
        "tasks/get",
        {
            "resultType": "complete",
            "taskId": "786",
            "status": "completed",
            "createdAt": "a",
            "lastUpdatedAt": "c",
            "ttlMs": 60000,
            "result": {"content": [{"type": "text", "text": "done"}]},
        },
    )
    assert polled == t.DetailedTask(
        result_type="complete",
        task_id="786",
        status="completed",
        created_at="a",
        last_updated_at="c",
        ttl_ms=60000,
        result={"content": [{"type": "text", "text": "done"}]},
    )
    assert decode_result("tools/call", polled.result) == t.CallToolResult(
        content=(t.TextContent(text="done"),)
    )
    assert decode_result("tasks/cancel", {"resultType": "complete"}) == t.EmptyResult(
        result_type="complete"
    )
    update = t.UpdateTaskRequestParams(
        task_id="786", input_responses={"k": t.ElicitResult(action="decline")}
    )
    assert unstructure(update) == {"taskId": "786", "inputResponses": {"k": {"action": "decline"}}}
    note = decode_notification(
        "notifications/tasks",
        {
            "taskId": "786",
            "status": "input_required",
            "createdAt": "a",
            "lastUpdatedAt": "b",
            "ttlMs": 1,
            "inputRequests": {"k": {"method": "roots/list"}},
        },
    )
    assert note.input_requests == {"k": t.ListRootsRequest()}


def test_2026_url_elicitation_has_no_id() -> None:
    params = decode_params(
        "elicitation/create", {"mode": "url", "message": "Pay", "url": "https://pay.example"}
    )
    assert params == t.ElicitRequestURLParams(message="Pay", url="https://pay.example")
    assert unstructure(params) == {"mode": "url", "message": "Pay", "url": "https://pay.example"}


def test_2026_error_data() -> None:
    data = structure(
        {"supported": ["2026-07-28"], "requested": "2027-01-01"}, t.UnsupportedProtocolVersionData
    )
    assert data == t.UnsupportedProtocolVersionData(
        supported=("2026-07-28",), requested="2027-01-01"
    )
    needed = structure(
        {"requiredCapabilities": {"elicitation": {"url": {}}}},
        t.MissingRequiredClientCapabilityData,
    )
    assert needed.required_capabilities == t.ClientCapabilities(
        elicitation=t.ElicitationCapability(url={})
    )


# --------------------------------------------------------------------------- skills extension


def test_skills_entries() -> None:
    wire: dict[str, Any] = {
        "resultType": "complete",
        "skills": [
            {
                "uri": "skill://acme/refunds/SKILL.md",
                "frontmatter": {
                    "name": "refunds",
                    "description": "Process refunds",
                    "license": "MIT",
                },
                "resources": [
                    {
                        "uri": "skill://acme/refunds/SKILL.md",
                        "digest": "sha256:" + "ab" * 32,
                        "size": 120,
                    }
                ],
            },
            {
                "uri": "skill://live/SKILL.md",
                "frontmatter": {"name": "live", "description": "d"},
                "resources": "dynamic",
            },
            {"uri": "skill://old/SKILL.md", "frontmatter": {"name": "old", "description": "d"}},
        ],
        "ttlMs": 1000,
        "cacheScope": "private",
    }
    result = decode_result("skills/list", wire)
    fixed, dynamic, missing = result.skills
    assert fixed.resources == (
        t.SkillResourceRef(
            uri="skill://acme/refunds/SKILL.md", digest="sha256:" + "ab" * 32, size=120
        ),
    )
    assert (fixed.is_dynamic, fixed.has_valid_resources) == (False, True)
    assert (dynamic.is_dynamic, dynamic.has_valid_resources) == (True, True)
    assert (missing.is_dynamic, missing.has_valid_resources) == (False, False)
    assert not structure(
        {"uri": "u", "frontmatter": {}, "resources": "static"}, t.SkillEntry
    ).has_valid_resources
    _round_trips(wire, result)
    got = decode_result("skills/get", {"skill": wire["skills"][1]})
    assert got == t.SkillsGetResult(skill=dynamic)
    error = _invalid(
        {"skills": [{"uri": "u", "frontmatter": {}, "resources": 3}]}, "SkillsListResult"
    )
    assert error.path == "$.result.skills[0].resources"
    assert error.errors == (
        'expected an array of resources or "dynamic", got a number @ $.result.skills[0].resources',
    )
    listing = decode_result(
        "resources/directory/read",
        {
            "resources": [{"uri": "skill://a/refs", "name": "refs", "mimeType": "inode/directory"}],
            "nextCursor": "2",
        },
    )
    assert listing.resources[0].mime_type == "inode/directory"


# --------------------------------------------------------------------------- forward compatibility


def test_unknown_content_type_survives_a_round_trip() -> None:
    wire = {
        "content": [
            {"type": "hologram", "frames": [1, 2], "_meta": {"v": 1}},
            {"type": "text", "text": "ok", "futureField": True},
        ],
        "futureTopLevel": {"x": 1},
    }
    result = decode_result("tools/call", wire)
    assert result.content == (
        t.UnknownContent(type="hologram", extra={"frames": [1, 2], "_meta": {"v": 1}}),
        t.TextContent(text="ok", extra={"futureField": True}),
    )
    assert result.extra == {"futureTopLevel": {"x": 1}}
    _round_trips(wire, result)


def test_unknown_sampling_content_type_is_kept() -> None:
    message = structure(
        {"role": "assistant", "content": {"type": "thinking", "text": "hm"}}, t.SamplingMessage
    )
    assert message.content == t.UnknownContent(type="thinking", extra={"text": "hm"})


def test_open_strings_accept_new_values() -> None:
    assert decode_params("logging/setLevel", {"level": "trace"}) == t.SetLevelRequestParams(
        level="trace"
    )
    result = structure(
        {
            "role": "assistant",
            "content": {"type": "text", "text": "x"},
            "model": "m",
            "stopReason": "refusal",
        },
        t.CreateMessageResult,
    )
    assert result.stop_reason == "refusal"
    assert structure({"taskSupport": "sometimes"}, t.ToolExecution).task_support == "sometimes"


# --------------------------------------------------------------------------- errors


def test_bad_input_schema_names_its_path() -> None:
    tools: list[dict[str, Any]] = [
        {"name": f"t{i}", "inputSchema": {"type": "object"}} for i in range(5)
    ]
    tools[3]["inputSchema"] = []
    error = _invalid({"tools": tools}, "ListToolsResult")
    assert error.path == "$.result.tools[3].inputSchema"
    assert str(error) == (
        "invalid ListToolsResult: expected an object, got an array @ $.result.tools[3].inputSchema"
    )
    assert error.errors == ("expected an object, got an array @ $.result.tools[3].inputSchema",)


@pytest.mark.parametrize(
    ("wire", "name", "path", "message"),
    [
        (
            {"completion": {"values": [], "total": "5"}},
            "CompleteResult",
            "$.result.completion.total",
            "expected an integer, got a string",
        ),
        (
            {"completion": {"values": [], "hasMore": 1}},
            "CompleteResult",
            "$.result.completion.hasMore",
            "expected true or false, got a number",
        ),
        (
            {"completion": {"values": [3]}},
            "CompleteResult",
            "$.result.completion.values[0]",
            "expected a string, got a number",
        ),
        (
            {"resources": [{"uri": "u", "name": "n", "size": True}]},
            "ListResourcesResult",
            "$.result.resources[0].size",
            "expected an integer, got a boolean",
        ),
        (
            {"content": [{"type": "text"}]},
            "CallToolResult",
            "$.result.content[0].text",
            "required field missing",
        ),
        (
            {"content": {"type": "text", "text": "x"}},
            "CallToolResult",
            "$.result.content",
            "expected an array, got an object",
        ),
        (
            {"content": [{"text": "x"}]},
            "CallToolResult",
            "$.result.content[0].type",
            "required field missing",
        ),
        (
            {"content": [{"type": "resource", "resource": {"uri": "u"}}]},
            "CallToolResult",
            "$.result.content[0].resource",
            "resource contents need a 'text' or a 'blob' field",
        ),
        (
            {"messages": [{"role": "system", "content": {"type": "text", "text": "x"}}]},
            "GetPromptResult",
            "$.result.messages[0].role",
            "system not in literal typing.Literal['user', 'assistant']",
        ),
        (
            {"action": "maybe"},
            "ElicitResult",
            "$.result.action",
            "maybe not in literal typing.Literal['accept', 'decline', 'cancel']",
        ),
        (
            {"mode": "voice", "message": "m", "requestedSchema": {}},
            "ElicitRequestParams",
            "$.result.mode",
            "voice not in literal typing.Literal['form']",
        ),
        (
            {"ref": {"type": "ref/tool", "name": "x"}, "argument": {"name": "a", "value": "b"}},
            "CompleteRequestParams",
            "$.result.ref",
            "unknown type 'ref/tool' (expected one of: ref/prompt, ref/resource)",
        ),
        (
            {"k": {"nothing": 1}},
            "InputResponses",
            "$.result['k']",
            "an input response must be an elicitation result (action), a roots list (roots)"
            " or a sampling result (role, content, model)",
        ),
        (
            {"progressToken": True, "progress": 1},
            "ProgressNotificationParams",
            "$.result.progressToken",
            "expected a string or an integer, got a boolean",
        ),
        (
            {
                "protocolVersion": "x",
                "capabilities": {"tools": []},
                "serverInfo": {"name": "s", "version": "1"},
            },
            "InitializeResult",
            "$.result.capabilities.tools",
            "expected an object, got an array",
        ),
    ],
)
def test_wrong_shapes_are_refused_with_their_path(
    wire: Any, name: str, path: str, message: str
) -> None:
    error = _invalid(wire, name)
    assert error.path == path
    assert error.errors == (f"{message} @ {path}",)


def test_all_problems_are_reported() -> None:
    error = _invalid(
        {"tools": [{"name": 1, "inputSchema": {}}, {"inputSchema": 2}]}, "ListToolsResult"
    )
    assert error.errors == (
        "expected a string, got a number @ $.result.tools[0].name",
        "required field missing @ $.result.tools[1].name",
        "expected an object, got a number @ $.result.tools[1].inputSchema",
    )
    assert str(error) == (
        "invalid ListToolsResult: expected a string, got a number"
        " @ $.result.tools[0].name (and 2 more)"
    )


# --------------------------------------------------------------------------- helpers


def test_raise_for_error() -> None:
    failed = t.CallToolResult(
        content=(
            t.TextContent(text="disk full"),
            t.ImageContent(data="", mime_type="image/png"),
            t.TextContent(text="retry later"),
        ),
        is_error=True,
    )
    with pytest.raises(ToolExecutionError) as info:
        failed.raise_for_error(server="fs", request_id=4)
    assert str(info.value) == "disk full\nretry later"
    assert (info.value.server, info.value.method, info.value.request_id) == ("fs", "tools/call", 4)
    with pytest.raises(
        ToolExecutionError,
        match=r"^the tool reported an error \(isError\) without any text content$",
    ):
        t.CallToolResult(content=(), is_error=True).raise_for_error()
    ok = t.CallToolResult(content=(), is_error=False)
    assert ok.raise_for_error() is ok


def test_error_codes() -> None:
    assert {code.name: int(code) for code in t.ErrorCode} == {
        "PARSE_ERROR": -32700,
        "INVALID_REQUEST": -32600,
        "METHOD_NOT_FOUND": -32601,
        "INVALID_PARAMS": -32602,
        "INTERNAL_ERROR": -32603,
        "RESOURCE_NOT_FOUND": -32002,
        "HEADER_MISMATCH": -32020,
        "MISSING_REQUIRED_CLIENT_CAPABILITY": -32021,
        "UNSUPPORTED_PROTOCOL_VERSION": -32022,
        "URL_ELICITATION_REQUIRED": -32042,
    }
    assert t.ErrorCode(-32602) is t.ErrorCode.INVALID_PARAMS


def test_display_names() -> None:
    assert (
        t.Tool(name="n", input_schema={}, annotations=t.ToolAnnotations(title="A")).display_name
        == "A"
    )
    assert (
        t.Tool(
            name="n", input_schema={}, title="T", annotations=t.ToolAnnotations(title="A")
        ).display_name
        == "T"
    )
    assert t.Prompt(name="p").display_name == "p"
    assert t.Prompt(name="p", title="P").display_name == "P"
    assert t.ResourceTemplate(uri_template="x://{a}", name="r", title="R").display_name == "R"


def test_all_is_sorted_and_complete() -> None:
    assert t.__all__ == sorted(t.__all__)
    public = {name for name in vars(t) if not name.startswith("_") and name[0].isupper()}
    assert public - {"Any", "Literal", "Mapping", "IntEnum", "ToolExecutionError"} == set(t.__all__)
