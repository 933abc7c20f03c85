"""Tasks against the npm reference server ``@modelcontextprotocol/server-everything`` (stdio,
2025-11-25): its task tool ``simulate-research-query`` (``execution.taskSupport: "required"``)
appears and runs to its end through ``rt.call``: polled with ``tasks/get``, its statuses
reaching the progress callback, its result taken with ``tasks/result``; when the query is
ambiguous the server's elicitation for the task reaches the host's callback while
``tasks/result`` waits.

The tool works through four stages of one second each (real time). Without npm or the install
the tests skip (see ``support.everything_server``).
"""

from __future__ import annotations

from typing import Any

import trio

from tests.interop.support import everything_server, interop_runtime
from trio_mcp.actors import HostCallbacks
from trio_mcp.protocol import (
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    ElicitResult,
    ProgressNotificationParams,
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
