"""The method tables and the decode/encode functions of ``_methods``."""

from __future__ import annotations

import contextlib
from typing import Any

import attrs
import pytest

from trio_mcp.protocol import _methods as m
from trio_mcp.protocol import _types as t
from trio_mcp.protocol._codec import structure
from trio_mcp.protocol._errors import InvalidMessage, LocalProtocolError

_ALL_TABLES = {
    "CLIENT_REQUESTS": (m.CLIENT_REQUESTS, m.Direction.CLIENT_TO_SERVER, True),
    "SERVER_REQUESTS": (m.SERVER_REQUESTS, m.Direction.SERVER_TO_CLIENT, True),
    "SERVER_NOTIFICATIONS": (m.SERVER_NOTIFICATIONS, m.Direction.SERVER_TO_CLIENT, False),
    "CLIENT_NOTIFICATIONS": (m.CLIENT_NOTIFICATIONS, m.Direction.CLIENT_TO_SERVER, False),
}


# --------------------------------------------------------------------------- tables


def test_table_contents() -> None:
    assert set(m.CLIENT_REQUESTS) == {
        "initialize",
        "ping",
        "server/discover",
        "tools/list",
        "tools/call",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "resources/subscribe",
        "resources/unsubscribe",
        "prompts/list",
        "prompts/get",
        "completion/complete",
        "logging/setLevel",
        "tasks/get",
        "tasks/result",
        "tasks/list",
        "tasks/cancel",
        "tasks/update",
        "subscriptions/listen",
        "skills/list",
        "skills/get",
        "resources/directory/read",
    }
    assert set(m.SERVER_REQUESTS) == {
        "ping",
        "roots/list",
        "sampling/createMessage",
        "elicitation/create",
        "tasks/get",
        "tasks/result",
        "tasks/list",
        "tasks/cancel",
    }
    assert set(m.SERVER_NOTIFICATIONS) == {
        "notifications/cancelled",
        "notifications/progress",
        "notifications/message",
        "notifications/resources/updated",
        "notifications/resources/list_changed",
        "notifications/tools/list_changed",
        "notifications/prompts/list_changed",
        "notifications/elicitation/complete",
        "notifications/tasks/status",
        "notifications/tasks",
        "notifications/subscriptions/acknowledged",
    }
    assert set(m.CLIENT_NOTIFICATIONS) == {
        "notifications/initialized",
        "notifications/cancelled",
        "notifications/progress",
        "notifications/roots/list_changed",
        "notifications/tasks/status",
    }


@pytest.mark.parametrize("name", sorted(_ALL_TABLES))
def test_every_spec_is_consistent(name: str) -> None:
    table, direction, is_request = _ALL_TABLES[name]
    for method, spec in table.items():
        assert spec.method == method
        assert spec.direction is direction
        assert spec.since in m.REVISIONS
        assert spec.until is None or m.REVISIONS.index(spec.since) <= m.REVISIONS.index(spec.until)
        assert spec.params is not None
        assert (spec.result is not None) is is_request
        assert spec.extension in (None, m.TASKS_EXTENSION, m.SKILLS_EXTENSION)


@pytest.mark.parametrize("name", sorted(_ALL_TABLES))
def test_every_spec_type_has_a_decoder(name: str) -> None:
    # structure() turns a missing decoder (a bug in our types) into TypeError; a shape
    # problem is an InvalidMessage. Decoding {} must never hit the former.
    table, _, _ = _ALL_TABLES[name]
    for spec in table.values():
        for form in (spec.params, spec.result):
            if form is None:
                continue
            with contextlib.suppress(InvalidMessage):
                structure({}, form)


@pytest.mark.parametrize(
    ("method", "version", "available"),
    [
        ("initialize", "2024-11-05", True),
        ("initialize", "2025-11-25", True),
        ("initialize", "2026-07-28", False),
        ("ping", "2026-07-28", False),
        ("server/discover", "2025-11-25", False),
        ("server/discover", "2026-07-28", True),
        ("tools/call", "2024-11-05", True),
        ("tools/call", "2026-07-28", True),
        ("tools/call", "2027-01-01", True),
        ("logging/setLevel", "2026-07-28", False),
        ("resources/subscribe", "2025-11-25", True),
        ("resources/subscribe", "2026-07-28", False),
        ("subscriptions/listen", "2025-11-25", False),
        ("tasks/get", "2025-06-18", False),
        ("tasks/get", "2025-11-25", True),
        ("tasks/get", "2026-07-28", True),
        ("tasks/list", "2025-11-25", True),
        ("tasks/list", "2026-07-28", False),
        ("tasks/result", "2026-07-28", False),
        ("tasks/update", "2025-11-25", False),
        ("tasks/update", "2026-07-28", True),
    ],
)
def test_client_request_availability(method: str, version: str, available: bool) -> None:
    assert m.CLIENT_REQUESTS[method].available_in(version) is available


def test_server_side_availability() -> None:
    elicit = m.SERVER_REQUESTS["elicitation/create"]
    assert [elicit.available_in(v) for v in m.REVISIONS] == [False, False, True, True, False]
    assert m.SERVER_NOTIFICATIONS["notifications/tasks"].extension == m.TASKS_EXTENSION
    assert m.SERVER_NOTIFICATIONS["notifications/elicitation/complete"].available_in("2025-11-25")
    assert not m.CLIENT_NOTIFICATIONS["notifications/initialized"].available_in("2026-07-28")
    assert m.CLIENT_NOTIFICATIONS["notifications/cancelled"].available_in("2026-07-28")
    assert m.CLIENT_REQUESTS["skills/get"].extension == m.SKILLS_EXTENSION


def test_method_spec_refuses_unknown_revisions() -> None:
    with pytest.raises(ValueError, match=r"^since='2025-01-01' is not a known revision: "):
        m.MethodSpec(
            method="x",
            params=t.RequestParams,
            result=t.EmptyResult,
            direction=m.Direction.CLIENT_TO_SERVER,
            since="2025-01-01",
        )
    with pytest.raises(ValueError, match=r"^until='later' is not a known revision: "):
        m.MethodSpec(
            method="x",
            params=t.RequestParams,
            result=None,
            direction=m.Direction.CLIENT_TO_SERVER,
            since="2024-11-05",
            until="later",
        )


def test_request_spec() -> None:
    assert m.request_spec("tasks/get") is m.CLIENT_REQUESTS["tasks/get"]
    assert m.request_spec("roots/list") is m.SERVER_REQUESTS["roots/list"]
    with pytest.raises(LocalProtocolError, match=r"^no wire type for method 'tools/run'$"):
        m.request_spec("tools/run")


# --------------------------------------------------------------------------- decode_params


@pytest.mark.parametrize(
    ("method", "params", "expected"),
    [
        ("tools/list", None, t.PaginatedRequestParams()),
        ("tools/list", {"cursor": "c2"}, t.PaginatedRequestParams(cursor="c2")),
        ("ping", None, t.RequestParams()),
        ("roots/list", {"_meta": {"progressToken": 3}}, t.RequestParams(meta={"progressToken": 3})),
        (
            "tools/call",
            {"name": "echo", "arguments": {"text": "hi"}},
            t.CallToolRequestParams(name="echo", arguments={"text": "hi"}),
        ),
        ("resources/subscribe", {"uri": "file:///a"}, t.SubscribeRequestParams(uri="file:///a")),
        ("resources/read", {"uri": "file:///a"}, t.ReadResourceRequestParams(uri="file:///a")),
        ("tasks/result", {"taskId": "t1"}, t.TaskRequestParams(task_id="t1")),
        (
            "prompts/get",
            {"name": "review", "arguments": {"lang": "py"}},
            t.GetPromptRequestParams(name="review", arguments={"lang": "py"}),
        ),
        (
            "elicitation/create",
            {"mode": "form", "message": "Name?", "requestedSchema": {"type": "object"}},
            t.ElicitRequestFormParams(
                mode="form", message="Name?", requested_schema={"type": "object"}
            ),
        ),
        (
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "c", "version": "1"},
            },
            t.InitializeRequestParams(
                protocol_version="2025-06-18",
                capabilities=t.ClientCapabilities(),
                client_info=t.Implementation(name="c", version="1"),
            ),
        ),
    ],
)
def test_decode_params(method: str, params: dict[str, Any] | None, expected: Any) -> None:
    assert m.decode_params(method, params) == expected


def test_decode_params_errors() -> None:
    with pytest.raises(LocalProtocolError, match=r"^no wire type for method 'bogus/method'$"):
        m.decode_params("bogus/method", {})
    with pytest.raises(InvalidMessage) as info:
        m.decode_params("tools/call", None)
    assert info.value.path == "$.params.name"
    with pytest.raises(InvalidMessage) as info:
        m.decode_params("tools/call", {"name": "x", "arguments": ["a"]}, path="$[1].params")
    assert info.value.path == "$[1].params.arguments"
    assert str(info.value) == (
        "invalid CallToolRequestParams: expected an object, got an array @ $[1].params.arguments"
    )
    with pytest.raises(InvalidMessage) as info:
        m.decode_params("ping", [])  # type: ignore[arg-type]
    assert info.value.errors == ("expected an object, got an array @ $.params",)


# --------------------------------------------------------------------------- decode_notification


def test_decode_notification() -> None:
    assert m.decode_notification("notifications/tools/list_changed", None) == t.NotificationParams()
    assert m.decode_notification(
        "notifications/resources/updated", {"uri": "file:///a", "_meta": {"k": 1}}
    ) == t.ResourceUpdatedNotificationParams(uri="file:///a", meta={"k": 1})
    assert m.decode_notification("notifications/initialized", {}) == t.NotificationParams()


def test_unknown_notifications_pass_through_raw() -> None:
    raw = {"anything": [1, 2]}
    assert m.decode_notification("notifications/future/thing", raw) is raw
    assert m.decode_notification("notifications/future/thing", None) == {}


def test_decode_notification_errors() -> None:
    with pytest.raises(InvalidMessage) as info:
        m.decode_notification("notifications/progress", {"progressToken": 1, "progress": "half"})
    assert info.value.path == "$.params.progress"
    assert info.value.errors == ("expected a number, got a string @ $.params.progress",)


# --------------------------------------------------------------------------- decode_result


def test_complete_results() -> None:
    assert m.decode_result("ping", {}) == t.EmptyResult()
    assert m.decode_result("tools/call", {"content": []}) == t.CallToolResult(content=())
    assert m.decode_result("tools/call", {"resultType": "complete", "content": []}) == (
        t.CallToolResult(result_type="complete", content=())
    )
    assert m.decode_result("roots/list", {"roots": []}) == t.ListRootsResult(roots=())


@pytest.mark.parametrize("method", sorted(m.INPUT_REQUIRED_METHODS))
def test_input_required_for_mrtr_methods(method: str) -> None:
    result = m.decode_result(method, {"resultType": "input_required", "requestState": "s"})
    assert result == t.InputRequiredResult(result_type="input_required", request_state="s")


@pytest.mark.parametrize("method", sorted(set(m.CLIENT_REQUESTS) - m.INPUT_REQUIRED_METHODS))
def test_input_required_refused_elsewhere(method: str) -> None:
    with pytest.raises(InvalidMessage) as info:
        m.decode_result(method, {"resultType": "input_required", "requestState": "s"})
    assert info.value.path == "$.result.resultType"
    assert str(info.value) == (
        f"invalid {method} result: resultType 'input_required' is only allowed for tools/call,"
        " resources/read and prompts/get @ $.result.resultType"
    )


def test_input_required_needs_requests_or_state() -> None:
    with pytest.raises(InvalidMessage) as info:
        m.decode_result("prompts/get", {"resultType": "input_required", "inputRequests": None})
    assert info.value.path == "$.result"
    assert info.value.errors == (
        "an input_required result needs inputRequests or requestState @ $.result",
    )


def test_task_result_type() -> None:
    wire = {
        "resultType": "task",
        "taskId": "t",
        "status": "working",
        "createdAt": "a",
        "lastUpdatedAt": "a",
        "ttlMs": 1000,
    }
    assert m.decode_result("tools/call", wire) == t.ExtCreateTaskResult(
        result_type="task",
        task_id="t",
        status="working",
        created_at="a",
        last_updated_at="a",
        ttl_ms=1000,
    )
    with pytest.raises(InvalidMessage) as info:
        m.decode_result("resources/read", wire)
    assert info.value.path == "$.result.resultType"
    assert info.value.errors == (
        "resultType 'task' is only allowed for tools/call (tasks extension) @ $.result.resultType",
    )
    with pytest.raises(InvalidMessage) as info:
        m.decode_result("tools/call", {"resultType": "task", "taskId": "t"})
    assert info.value.path == "$.result.status"


def test_unknown_or_malformed_result_type() -> None:
    with pytest.raises(InvalidMessage) as info:
        m.decode_result("tools/list", {"resultType": "partial", "tools": []}, path="$[0].result")
    assert info.value.path == "$[0].result.resultType"
    assert str(info.value) == (
        "invalid tools/list result: unknown resultType 'partial' (expected 'complete',"
        " 'input_required' or 'task') @ $[0].result.resultType"
    )
    with pytest.raises(InvalidMessage) as info:
        m.decode_result("tools/list", {"resultType": 1, "tools": []})
    assert info.value.errors == ("resultType must be a string @ $.result.resultType",)
    with pytest.raises(InvalidMessage) as info:
        m.decode_result("tools/list", [])  # type: ignore[arg-type]
    assert info.value.errors == ("expected an object @ $.result",)
    with pytest.raises(LocalProtocolError, match=r"^no wire type for method 'x/y'$"):
        m.decode_result("x/y", {})


def test_legacy_task_answer_to_tools_call() -> None:
    task = {"taskId": "t", "status": "working", "createdAt": "a", "lastUpdatedAt": "a", "ttl": 5}
    assert m.decode_result("tools/call", {"task": task}) == t.CreateTaskResult(
        task=t.Task(task_id="t", status="working", created_at="a", last_updated_at="a", ttl=5)
    )
    # Only without resultType and without content: anything else is a CallToolResult.
    with_content = m.decode_result("tools/call", {"task": task, "content": []})
    assert with_content == t.CallToolResult(content=(), extra={"task": task})
    with pytest.raises(InvalidMessage) as info:
        m.decode_result("tools/call", {"resultType": "complete", "task": task})
    assert info.value.path == "$.result.content"
    # Other methods never sniff a task.
    with pytest.raises(InvalidMessage) as info:
        m.decode_result("prompts/get", {"task": task})
    assert info.value.path == "$.result.messages"


def test_task_methods_decode_both_eras() -> None:
    legacy = {"taskId": "t", "status": "cancelled", "createdAt": "a", "lastUpdatedAt": "b"}
    assert isinstance(m.decode_result("tasks/get", {**legacy, "ttl": None}), t.GetTaskResult)
    assert isinstance(m.decode_result("tasks/cancel", {**legacy, "ttl": None}), t.CancelTaskResult)
    modern = {**legacy, "resultType": "complete", "ttlMs": None}
    assert isinstance(m.decode_result("tasks/get", modern), t.DetailedTask)
    assert m.decode_result("tasks/cancel", {"resultType": "complete"}) == t.EmptyResult(
        result_type="complete"
    )
    assert m.decode_result("tasks/update", {}) == t.EmptyResult()
    with pytest.raises(InvalidMessage) as info:
        m.decode_result("tasks/get", legacy)
    assert info.value.path == "$.result.ttlMs"


# --------------------------------------------------------------------------- encode


def test_encode() -> None:
    params = t.CallToolRequestParams(
        name="echo", arguments={"text": "hi"}, meta={"progressToken": 1}, extra={"x-vendor": True}
    )
    assert m.encode(params) == {
        "name": "echo",
        "arguments": {"text": "hi"},
        "_meta": {"progressToken": 1},
        "x-vendor": True,
    }
    assert m.encode(t.EmptyResult()) == {}
    with pytest.raises(TypeError, match=r"^str does not encode to a JSON object$"):
        m.encode("text")


# --------------------------------------------------------------------------- WIRE_TYPES


def test_wire_types_lists_every_class_under_its_name() -> None:
    classes = {name: getattr(t, name) for name in t.__all__ if attrs.has(getattr(t, name))}
    assert {name: m.WIRE_TYPES[name] for name in classes} == classes
    assert m.WIRE_TYPES["ContentBlock"] == t.ContentBlock
    assert m.WIRE_TYPES["SamplingMessageContentBlock"] == t.SamplingContent
    assert m.WIRE_TYPES["ResourceReference"] is t.ResourceTemplateReference
    assert list(m.WIRE_TYPES) == sorted(m.WIRE_TYPES)
    assert set(m.WIRE_TYPES) - set(classes) == {
        "ContentBlock",
        "ElicitRequestParams",
        "InputRequest",
        "InputRequests",
        "InputResponse",
        "InputResponses",
        "ResourceContents",
        "ResourceReference",
        "SamplingMessageContentBlock",
    }


def test_wire_types_decode_maps_of_input_requests() -> None:
    decoded = structure(
        {
            "a": {"method": "roots/list"},
            "b": {
                "method": "elicitation/create",
                "params": {"mode": "url", "message": "m", "url": "https://x.example"},
            },
        },
        m.WIRE_TYPES["InputRequests"],
    )
    assert decoded == {
        "a": t.ListRootsRequest(),
        "b": t.ElicitRequest(params=t.ElicitRequestURLParams(message="m", url="https://x.example")),
    }


def test_a_task_augmented_sampling_or_elicitation_answer_is_a_task() -> None:
    task = {
        "task": {
            "taskId": "t1",
            "status": "working",
            "createdAt": "2025-11-25T10:00:00Z",
            "lastUpdatedAt": "2025-11-25T10:00:00Z",
            "ttl": None,
        }
    }
    for method in ("sampling/createMessage", "elicitation/create", "tools/call"):
        assert isinstance(m.decode_result(method, task), t.CreateTaskResult)
