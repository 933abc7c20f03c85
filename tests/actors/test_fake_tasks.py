"""The shipped fake server's tasks (:class:`FakeTask`) as a host's tests use them: the
2025-11-25 ``input_required`` round (the fake's requests reach the host's callbacks while
``tasks/result`` waits), and what it answers on the wire (-32601 for a required task not asked
for, ``tasks/list``, a failed task's error, the task's progress)."""

from __future__ import annotations

import json
import math
from typing import Any

import trio
import trio.testing

from trio_mcp.actors.config import RetryPolicy, RuntimeConfig
from trio_mcp.actors.runtime import HostCallbacks, open_runtime
from trio_mcp.actors.testing import FakeServer, FakeTask, FakeTool

Clock = trio.testing.MockClock
QUESTION: dict[str, Any] = {
    "method": "elicitation/create",
    "params": {"message": "Go on?", "requestedSchema": {"type": "object", "properties": {}}},
}


async def test_a_legacy_task_asks_the_host_while_tasks_result_waits(autojump_clock: Clock) -> None:
    def ask(task: FakeTask) -> None:
        task.ask({"go": QUESTION})

    fake = FakeServer(
        name="s", tools=[FakeTool("job", task_support="required", delay=2.0)], on_task=ask
    )
    asked: list[tuple[float, Any]] = []

    async def elicit(server: str, params: Any) -> dict[str, Any]:
        asked.append((trio.current_time(), params.meta))
        await trio.sleep(0.5)
        return {"action": "accept", "content": {}}

    config = RuntimeConfig(servers=(fake.server_config(),), retry=RetryPolicy(jitter=0.0))
    async with open_runtime(config, callbacks=HostCallbacks(elicitation=elicit)) as rt:
        await rt.wait_ready(timeout=10)
        start = trio.current_time()
        result = await rt.call("mcp_s_job", {"n": 1})
        took = trio.current_time() - start
    task = fake.tasks["t1"]
    assert json.loads(result.text) == {"n": 1}  # the tool's echo, once it had worked 2 s
    assert took == 2.0 and task.status == "completed"
    # the task was input_required from its creation: tasks/result at once, which asked
    ((at, meta),) = asked
    assert at - start == 0.0
    assert meta == {"io.modelcontextprotocol/related-task": {"taskId": "t1"}}
    assert task.responses == [{"go": {"action": "accept", "content": {}}}]


async def test_the_fakes_task_answers_on_the_wire(autojump_clock: Clock) -> None:
    fake = FakeServer(
        tools=[FakeTool("job", task_support="required", delay=math.inf)], task_poll_ms=None
    )
    ids = iter(range(1, 100))

    async def ask(client: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
        request = {"jsonrpc": "2.0", "id": next(ids), "method": method, "params": params}
        await client.send(json.dumps(request).encode())
        answer: dict[str, Any] = json.loads(await client.receive())
        return answer

    async with fake.connect() as client:
        init = await ask(client, "initialize", {"protocolVersion": "2025-11-25"})
        tasks_caps = init["result"]["capabilities"]["tasks"]
        assert tasks_caps == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
        plain = await ask(client, "tools/call", {"name": "job"})
        assert plain["error"]["code"] == -32601
        call = {"name": "job", "task": {}, "_meta": {"progressToken": "p"}}
        created = (await ask(client, "tools/call", call))["result"]["task"]
        assert (created["taskId"], created["status"], created["ttl"]) == ("t1", "working", 60_000)
        assert "pollInterval" not in created
        task = fake.tasks["t1"]
        assert await task.progress(1, 2, "half") == 1
        progress = json.loads(await client.receive())
        assert progress["params"] == {
            "progressToken": "p",
            "progress": 1,
            "total": 2,
            "message": "half",
        }
        task.fail(-32000, "out of paper")
        got = (await ask(client, "tasks/get", {"taskId": "t1"}))["result"]
        assert (got["status"], got["statusMessage"]) == ("failed", "out of paper")
        error = (await ask(client, "tasks/result", {"taskId": "t1"}))["error"]
        assert error == {"code": -32000, "message": "out of paper"}
        listed = (await ask(client, "tasks/list", {}))["result"]["tasks"]
        assert [entry["taskId"] for entry in listed] == ["t1"]
        again = await ask(client, "tasks/cancel", {"taskId": "t1"})
        assert again["error"]["code"] == -32602
