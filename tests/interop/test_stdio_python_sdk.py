"""trio-mcp against the official Python SDK (``mcp`` 2.x, ``MCPServer``) over stdio.

The server is ``servers/python_server.py``, a real child process, on the real clock. Each test
spawns it once (about 0.8 s: importing ``mcp`` is slow) and checks as much as it can on it.
The SDK speaks both eras; these tests pin the handshake revisions (``protocol="legacy"``), and
``test_modern_python_sdk.py`` speaks 2026-07-28 to the same server.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

from tests.interop.support import (
    CALL_BOUND,
    CONNECT_BOUND,
    interop_runtime,
    kill_mid_call,
    next_event,
    python_server,
)
from trio_mcp.actors import ServerState, ToolsChanged
from trio_mcp.protocol import (
    CallTimeout,
    CallToolResult,
    GetPromptResult,
    ListPromptsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    MethodNotFound,
    ProgressNotificationParams,
    PromptArgument,
    ReadResourceResult,
    ServerUnavailable,
    TextContent,
    TextResourceContents,
    ToolExecutionError,
    ToolNotFound,
    decode_result,
)

pytestmark = pytest.mark.interop

BASE_TOOLS = {"add", "add_tool", "ask_model", "confirm", "count_slowly", "echo", "fail"}


async def test_handshake_tools_and_results() -> None:
    async with interop_runtime(python_server("py", protocol="legacy")) as (rt, _):
        status = rt.status()["py"]
        assert status.state is ServerState.READY
        assert status.protocol_version == "2025-11-25"
        assert (status.server_name, status.server_version) == ("interop-python", "1.0.0")
        assert status.transport == "stdio"
        assert status.tool_count == len(BASE_TOOLS)
        assert status.refused_tools == ()
        tools = rt.tools()
        assert set(tools) == {f"mcp_py_{name}" for name in BASE_TOOLS}
        add = tools["mcp_py_add"]
        assert (add.server, add.wire_name, add.generation) == ("py", "add", 1)
        assert add.tool.input_schema["required"] == ["a", "b"]

        with trio.fail_after(CALL_BOUND):
            result = await rt.call("mcp_py_add", {"a": 2, "b": 3})
        assert result.content == (TextContent(text="5"),)
        assert result.structured_content == {"result": 5}
        assert result.is_error is False

        text = 'héllo ✓ "quoted"\nsecond line'
        with trio.fail_after(CALL_BOUND):
            result = await rt.call("mcp_py_echo", {"text": text})
        assert result.text == text
        assert result.structured_content == {"result": text}

        # A 300 kB line each way (framing across many pipe reads), twice in the answer.
        big = "ü" * 150_000
        with trio.fail_after(CALL_BOUND):
            result = await rt.call("mcp_py_echo", {"text": big})
        assert (result.text, result.structured_content) == (big, {"result": big})

        # 20 calls in flight on the one connection: each answer reaches its own caller.
        sums: dict[int, Any] = {}

        async def add_one(index: int) -> None:
            with trio.fail_after(CALL_BOUND):
                sums[index] = (await rt.call("mcp_py_add", {"a": index, "b": 1})).structured_content

        async with trio.open_nursery() as nursery:
            for index in range(20):
                nursery.start_soon(add_one, index)
        assert sums == {index: {"result": index + 1} for index in range(20)}

        # A tool that raises ToolError: an isError result, data for the model.
        with trio.fail_after(CALL_BOUND):
            result = await rt.call("mcp_py_fail", {"message": "boom"})
        assert result.is_error is True
        assert result.text == "Error executing tool fail: boom"
        with pytest.raises(ToolExecutionError, match=r"^Error executing tool fail: boom$"):
            result.raise_for_error(server="py")

        # Arguments the SDK's validation refuses: also an isError result.
        with trio.fail_after(CALL_BOUND):
            result = await rt.call("mcp_py_add", {"a": "two", "b": 3})
        assert result.is_error is True
        assert "validation error" in result.text

        # An unknown name: refused locally; sent anyway, the SDK answers with isError.
        with pytest.raises(ToolNotFound, match="no tool named 'mcp_py_nope' is registered"):
            await rt.call("mcp_py_nope")
        with trio.fail_after(CALL_BOUND):
            raw = await rt.request("py", "tools/call", {"name": "nope", "arguments": {}})
        unknown = decode_result("tools/call", raw)
        assert isinstance(unknown, CallToolResult)
        assert unknown.is_error is True
        assert unknown.text == "Unknown tool: nope"

        # A method the server does not have: the JSON-RPC error, typed.
        with trio.fail_after(CALL_BOUND), pytest.raises(MethodNotFound) as info:
            await rt.request("py", "bogus/method")
        assert info.value.code == -32601


async def test_progress_reaches_the_callback_in_order_and_a_timeout_cancels() -> None:
    async with interop_runtime(python_server("py", protocol="legacy")) as (rt, _):
        seen: list[ProgressNotificationParams] = []
        with trio.fail_after(CALL_BOUND):
            result = await rt.call("mcp_py_count_slowly", {"steps": 5}, progress=seen.append)
        assert result.text == "counted to 5"
        assert [(p.progress, p.total, p.message) for p in seen] == [
            (step, 5, f"step {step} of 5") for step in range(1, 6)
        ]
        assert len({p.progress_token for p in seen}) == 1

        # A call that outlives its timeout: CallTimeout, notifications/cancelled goes to the SDK,
        # and the connection stays healthy for the next call.
        with trio.fail_after(CALL_BOUND), pytest.raises(CallTimeout) as timed_out:
            await rt.call("mcp_py_count_slowly", {"steps": 100, "delay": 0.05}, timeout=0.3)
        assert timed_out.value.timeout == 0.3
        with trio.fail_after(CALL_BOUND):
            result = await rt.call("mcp_py_add", {"a": 40, "b": 2})
        assert result.structured_content == {"result": 42}
        assert rt.status()["py"].generation == 1


async def test_resources_templates_and_prompts() -> None:
    async with interop_runtime(python_server("py", protocol="legacy")) as (rt, _):
        with trio.fail_after(CALL_BOUND):
            listed = decode_result("resources/list", await rt.request("py", "resources/list"))
            templates = decode_result(
                "resources/templates/list", await rt.request("py", "resources/templates/list")
            )
            read = decode_result(
                "resources/read",
                await rt.request("py", "resources/read", {"uri": "interop://greeting"}),
            )
            item = decode_result(
                "resources/read",
                await rt.request("py", "resources/read", {"uri": "interop://items/42"}),
            )
            prompts = decode_result("prompts/list", await rt.request("py", "prompts/list"))
            prompt = decode_result(
                "prompts/get",
                await rt.request(
                    "py", "prompts/get", {"name": "review", "arguments": {"code": "x = 1"}}
                ),
            )
        assert isinstance(listed, ListResourcesResult)
        assert [(r.uri, r.name, r.mime_type) for r in listed.resources] == [
            ("interop://greeting", "greeting", "text/plain")
        ]
        assert isinstance(templates, ListResourceTemplatesResult)
        assert [(t.uri_template, t.name) for t in templates.resource_templates] == [
            ("interop://items/{item_id}", "item")
        ]
        assert isinstance(read, ReadResourceResult)
        assert read.contents == (
            TextResourceContents(
                uri="interop://greeting", mime_type="text/plain", text="Hello from the Python SDK"
            ),
        )
        assert isinstance(item, ReadResourceResult)
        assert item.contents == (
            TextResourceContents(
                uri="interop://items/42",
                mime_type="application/json",
                text='{"id": "42", "label": "item 42"}',
            ),
        )
        assert isinstance(prompts, ListPromptsResult)
        assert [p.name for p in prompts.prompts] == ["review"]
        assert prompts.prompts[0].arguments == (
            PromptArgument(name="code", required=True),
            PromptArgument(name="language", required=False),
        )
        assert isinstance(prompt, GetPromptResult)
        assert [(m.role, m.content) for m in prompt.messages] == [
            ("user", TextContent(text="Please review this python code:\nx = 1"))
        ]


async def test_list_changed_reregisters_the_tools() -> None:
    async with interop_runtime(python_server("py", protocol="legacy")) as (rt, _):
        assert rt.status()["py"].tool_count == len(BASE_TOOLS)
        with rt.events() as events:
            with trio.fail_after(CALL_BOUND):
                result = await rt.call("mcp_py_add_tool", {"name": "greeter"})
            assert result.text == "added greeter"
            change = await next_event(
                events, lambda e: isinstance(e, ToolsChanged) and e.server == "py"
            )
        assert isinstance(change, ToolsChanged)
        assert (change.added, change.removed, change.changed) == (("mcp_py_greeter",), (), ())
        assert set(rt.tools()) == {f"mcp_py_{name}" for name in BASE_TOOLS | {"greeter"}}
        assert rt.status()["py"].tool_count == len(BASE_TOOLS) + 1
        with trio.fail_after(CALL_BOUND):
            result = await rt.call("mcp_py_greeter", {"who": "Ann"})
        assert result.text == "greeter greets Ann"


async def test_sigkill_mid_call_fails_it_promptly_and_the_server_comes_back() -> None:
    async with interop_runtime(python_server("py", protocol="legacy")) as (rt, groups):
        first_pid, error = await kill_mid_call(
            rt, "py", "mcp_py_count_slowly", {"steps": 200, "delay": 0.05}
        )
        assert error.server == "py"
        assert error.sent is True
        assert "its outcome is unknown and it is not re-sent" in str(error)
        # Withdrawn in the same step: nothing of the dead connection is offered any more.
        assert rt.status()["py"].state is ServerState.RECONNECTING
        assert dict(rt.tools()) == {}
        with pytest.raises(ServerUnavailable, match=r"^server 'py' is reconnecting"):
            await rt.call("mcp_py_echo", {"text": "too early"})

        with trio.fail_after(CONNECT_BOUND):
            await rt.wait_ready()
        status = rt.status()["py"]
        assert (status.state, status.generation) == (ServerState.READY, 2)
        assert status.pid not in (None, first_pid)
        assert set(rt.tools()) == {f"mcp_py_{name}" for name in BASE_TOOLS}
        assert {tool.generation for tool in rt.tools().values()} == {2}
        groups.record(rt)
        # The killed generation's process group is gone already.
        dead_group = groups.seen[first_pid]
        assert not [line for line in groups.leftovers() if f"pgid {dead_group})" in line]
        with trio.fail_after(CALL_BOUND):
            result = await rt.call("mcp_py_echo", {"text": "back"})
        assert result.text == "back"
