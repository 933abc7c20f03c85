"""Tasks against the npm reference server ``@modelcontextprotocol/server-everything`` (stdio,
2025-11-25): its task tool ``simulate-research-query`` (``execution.taskSupport: "required"``)
appears and runs to its end through ``rt.call``: polled with ``tasks/get``, its statuses
reaching the progress callback, its result taken with ``tasks/result``; when the query is
ambiguous the server's elicitation for the task reaches the host's callback while
``tasks/result`` waits.

The tool works through four stages of one second each (real time). Without npm or the install
the tests skip (see ``support.everything_server``).

The other way round, the client runs tasks for the server: with the host's sampling and
elicitation callbacks the client declares ``tasks.requests.sampling.createMessage`` and
``tasks.requests.elicitation.create``, so the server registers ``trigger-sampling-request-async``
and ``trigger-elicitation-request-async``; each sends its request with ``params.task``, gets a
task back, polls the client's ``tasks/get`` every second and takes the outcome with
``tasks/result``.
"""

from __future__ import annotations

import json
from typing import Any

import trio

from tests.interop.support import CONNECT_BOUND, everything_server, interop_runtime
from trio_mcp.actors import HostCallbacks, Runtime
from trio_mcp.protocol import (
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    ElicitResult,
    ProgressNotificationParams,
    TextContent,
)

TOOL = "mcp_everything_simulate-research-query".replace("-", "_")
#: The four stages take four seconds; generous for a loaded machine.
TASK_BOUND = 30.0


async def test_the_research_task_appears_and_completes_through_rt_call() -> None:
    seen: list[ProgressNotificationParams] = []
    server = everything_server(timeout=TASK_BOUND)
    async with interop_runtime(server) as (rt, _):
        tool = rt.tools()[TOOL]
        assert tool.tool.execution is not None
        assert tool.tool.execution.task_support == "required"
        with trio.fail_after(TASK_BOUND + 5):
            result = await rt.call(TOOL, {"topic": "trio"}, progress=seen.append)
    assert not result.is_error
    assert result.text.startswith("# Research Report: trio")
    messages = [p.message for p in seen]
    assert "Gathering sources..." in messages and "Generating report..." in messages
    assert all(p.meta is not None and p.meta["status"] == "working" for p in seen[:-1])


async def test_an_ambiguous_query_asks_the_host_while_the_task_waits() -> None:
    asked: list[str] = []

    async def elicitation(
        server: str, params: ElicitRequestFormParams | ElicitRequestURLParams
    ) -> ElicitResult:
        assert isinstance(params, ElicitRequestFormParams)
        asked.append(params.message)
        content: dict[str, Any] = {"interpretation": "programming"}
        return ElicitResult(action="accept", content=content)

    server = everything_server(timeout=TASK_BOUND)
    callbacks = HostCallbacks(elicitation=elicitation)
    async with interop_runtime(server, callbacks=callbacks) as (rt, _):
        with trio.fail_after(TASK_BOUND + 5):
            result = await rt.call(TOOL, {"topic": "python", "ambiguous": True})
    assert len(asked) == 1 and "python" in asked[0]
    assert "Research Report: python (programming)" in result.text


SAMPLING_TOOL = "mcp_everything_trigger_sampling_request_async"
ELICITATION_TOOL = "mcp_everything_trigger_elicitation_request_async"


async def tool_appears(rt: Runtime, name: str) -> None:
    """Wait (bounded) until ``name`` is registered: the server adds its conditional tools
    after ``notifications/initialized`` and says so with ``tools/list_changed``."""
    with trio.fail_after(CONNECT_BOUND):
        version = rt.tools_version
        while name not in rt.tools():
            version = await rt.wait_tools_changed(version)


async def test_the_client_runs_the_servers_sampling_request_as_a_task() -> None:
    sampled: list[CreateMessageRequestParams] = []

    async def sampling(server: str, params: CreateMessageRequestParams) -> CreateMessageResult:
        sampled.append(params)
        await trio.sleep(0.2)  # the host's model takes a moment: the server polls meanwhile
        return CreateMessageResult(
            role="assistant", content=TextContent(text="sampled in a task"), model="interop"
        )

    server = everything_server(timeout=TASK_BOUND)
    async with interop_runtime(server, callbacks=HostCallbacks(sampling=sampling)) as (rt, _):
        await tool_appears(rt, SAMPLING_TOOL)
        assert ELICITATION_TOOL not in rt.tools()  # no elicitation callback: not declared
        with trio.fail_after(TASK_BOUND + 5):
            result = await rt.call(SAMPLING_TOOL, {"prompt": "hello", "maxTokens": 7})
    ((params,),) = [sampled]
    assert params.max_tokens == 7 and params.task is not None and params.task.ttl == 300_000
    text = result.text
    assert text.startswith("[COMPLETED] Async sampling completed!"), text
    assert "Poll 1: completed" in text
    payload = json.loads(text.split("**Result:**\n", 1)[1])
    assert payload["content"] == {"type": "text", "text": "sampled in a task"}
    assert payload["_meta"]["io.modelcontextprotocol/related-task"]["taskId"] in text


async def test_the_client_runs_the_servers_elicitation_as_a_task() -> None:
    asked: list[str] = []

    async def elicitation(
        server: str, params: ElicitRequestFormParams | ElicitRequestURLParams
    ) -> ElicitResult:
        asked.append(params.message)
        content: dict[str, Any] = {"name": "Ann", "favoriteColor": "Blue", "agreeToTerms": True}
        return ElicitResult(action="accept", content=content)

    server = everything_server(timeout=TASK_BOUND)
    callbacks = HostCallbacks(elicitation=elicitation)
    async with interop_runtime(server, callbacks=callbacks) as (rt, _):
        await tool_appears(rt, ELICITATION_TOOL)
        with trio.fail_after(TASK_BOUND + 5):
            result = await rt.call(ELICITATION_TOOL)
    assert asked == ["Please provide inputs for the following fields (async task demo):"]
    text = result.text
    assert "[COMPLETED] User provided the requested information!" in text, text
    assert "- Name: Ann\n- Favorite Color: Blue\n- Agreed to terms: true" in text
