"""Tasks through the runtime, in both eras, on trio's virtual clock (exact times).

The fake server plays a task server with :class:`TaskScript`: a ``tools/call`` creates a task
that completes ``duration`` seconds later (by the virtual clock), ``tasks/get`` says where it is
(with the script's poll interval), ``tasks/result`` / the detailed task give its result, and
``tasks/cancel`` / ``tasks/update`` are recorded.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from trio_mcp.actors.config import RetryPolicy, RuntimeConfig
from trio_mcp.actors.runtime import HostCallbacks, Runtime, TaskStatusChanged, open_runtime
from trio_mcp.actors.runtime._taskstore import TaskRecord, TaskStore
from trio_mcp.actors.testing import FakeServer
from trio_mcp.protocol import (
    CallTimeout,
    ElicitRequestFormParams,
    LocalProtocolError,
    ProgressNotificationParams,
    RpcError,
    TaskFailed,
)
from trio_mcp.protocol._methods import TASKS_EXTENSION
from trio_mcp.protocol._versions import META_CLIENT_CAPABILITIES

Clock = trio.testing.MockClock

LEGACY_CAPS: dict[str, Any] = {
    "tools": {},
    "tasks": {"cancel": {}, "requests": {"tools": {"call": {}}}},
}
MODERN_CAPS: dict[str, Any] = {"tools": {}, "extensions": {TASKS_EXTENSION: {}}}


def tool(name: str, support: str | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "inputSchema": {"type": "object"}}
    if support is not None:
        entry["execution"] = {"taskSupport": support}
    return entry


@attrs.define
class TaskScript:
    """The server side of tasks (see the module docstring)."""

    era: str = "legacy"
    duration: float = 3.0
    poll_ms: int | None = 500
    #: the status while working ("input_required" asks for an elicitation, modern)
    asking: bool = False
    fail: bool = False
    created: dict[str, float] = attrs.field(factory=dict)
    cancelled: list[str] = attrs.field(factory=list)
    updates: list[dict[str, Any]] = attrs.field(factory=list)
    gets: list[float] = attrs.field(factory=list)
    calls: list[Mapping[str, Any]] = attrs.field(factory=list)

    def status(self, task_id: str) -> str:
        if task_id in self.cancelled:
            return "cancelled"
        if self.asking and not self.updates:
            return "input_required"
        done = trio.current_time() >= self.created[task_id] + self.duration
        if not done:
            return "working"
        return "failed" if self.fail else "completed"

    def fields(self, task_id: str) -> dict[str, Any]:
        status = self.status(task_id)
        out: dict[str, Any] = {
            "taskId": task_id,
            "status": status,
            "statusMessage": f"{status} on it",
            "createdAt": "2026-01-01T00:00:00Z",
            "lastUpdatedAt": "2026-01-01T00:00:00Z",
        }
        if self.era == "legacy":
            out["ttl"] = 60_000
            if self.poll_ms is not None:
                out["pollInterval"] = self.poll_ms
        else:
            out["ttlMs"] = 60_000
            if self.poll_ms is not None:
                out["pollIntervalMs"] = self.poll_ms
        return out

    def call(self, params: Mapping[str, Any]) -> dict[str, Any]:
        self.calls.append(params)
        task_id = f"t{len(self.created) + 1}"
        self.created[task_id] = trio.current_time()
        if self.era == "legacy":
            assert params.get("task") == {}
            return {"task": self.fields(task_id)}
        return {**self.fields(task_id), "resultType": "task"}

    def get(self, params: dict[str, Any]) -> dict[str, Any]:
        task_id = params["taskId"]
        if task_id not in self.created:
            raise RpcError.from_error(-32602, f"unknown task {task_id}")
        self.gets.append(trio.current_time())
        out = self.fields(task_id)
        if self.era == "modern":
            if out["status"] == "completed":
                out["result"] = {"content": [{"type": "text", "text": f"report {task_id}"}]}
            elif out["status"] == "failed":
                out["error"] = {"code": -32603, "message": "the research broke"}
            elif out["status"] == "input_required":
                out["inputRequests"] = {
                    "topic": {
                        "method": "elicitation/create",
                        "params": {
                            "message": "Which topic?",
                            "requestedSchema": {
                                "type": "object",
                                "properties": {"topic": {"type": "string"}},
                            },
                        },
                    }
                }
        return out

    def result(self, params: dict[str, Any]) -> dict[str, Any]:
        task_id = params["taskId"]
        if self.fail:
            raise RpcError.from_error(-32603, "the research broke")
        return {"content": [{"type": "text", "text": f"report {task_id}"}]}

    def cancel(self, params: dict[str, Any]) -> dict[str, Any]:
        self.cancelled.append(params["taskId"])
        return self.fields(params["taskId"]) if self.era == "legacy" else {}

    def update(self, params: dict[str, Any]) -> dict[str, Any]:
        self.updates.append(params)
        return {}

    def server(self, *tools: dict[str, Any], **options: Any) -> FakeServer:
        results: dict[str, Any] = {
            "tools/call": self.call,
            "tasks/get": self.get,
            "tasks/cancel": self.cancel,
        }
        if self.era == "legacy":
            results["tasks/result"] = self.result
        else:
            results["tasks/update"] = self.update
        return FakeServer(
            name="tasks",
            era=self.era,
            tools=list(tools) or [tool("research", "required")],
            capabilities=LEGACY_CAPS if self.era == "legacy" else MODERN_CAPS,
            results=results,
            **options,
        )


def config(fake: FakeServer, tmp_path: Path, **options: Any) -> RuntimeConfig:
    server = fake.server_config(timeout=options.pop("timeout", 120.0))
    return RuntimeConfig(
        servers=(server,),
        retry=RetryPolicy(jitter=0.0),
        task_store=tmp_path / "tasks",
        **options,
    )


async def ready(rt: Runtime) -> None:
    report = await rt.wait_ready(timeout=10)
    assert report.ready == ("tasks",)


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_task_is_invisible_to_rt_call(
    era: str, tmp_path: Path, autojump_clock: Clock
) -> None:
    script = TaskScript(era=era)
    fake = script.server()
    seen: list[ProgressNotificationParams] = []
    async with open_runtime(config(fake, tmp_path)) as rt:
        await ready(rt)
        start = trio.current_time()
        result = await rt.call("mcp_tasks_research", {"q": "x"}, progress=seen.append)
        assert trio.current_time() - start == pytest.approx(3.0)
    assert result.text == "report t1"
    # polled every 0.5 s until the task had completed, 3 s after it was created
    assert [g - start for g in script.gets] == pytest.approx([0.5 * n for n in range(1, 7)])
    assert [p.message for p in seen] == ["working on it", "completed on it"]
    assert seen[0].meta == {
        "io.modelcontextprotocol/related-task": {"taskId": "t1"},
        "status": "working",
    }
    assert script.cancelled == []
    if era == "modern":
        meta = script.calls[0]["_meta"]
        assert meta[META_CLIENT_CAPABILITIES]["extensions"] == {TASKS_EXTENSION: {}}
    else:
        assert "task" in script.calls[0]


async def test_the_client_declares_tasks_in_initialize(
    tmp_path: Path, autojump_clock: Clock
) -> None:
    script = TaskScript()
    fake = script.server()
    async with open_runtime(config(fake, tmp_path)) as rt:
        await ready(rt)
    init = next(params for method, params in fake.requests if method == "initialize")
    assert init is not None and init["capabilities"]["tasks"] == {}
    fake = TaskScript().server()
    async with open_runtime(config(fake, tmp_path, tasks=False)) as rt:
        await ready(rt)
    init = next(params for method, params in fake.requests if method == "initialize")
    assert init is not None and "tasks" not in init["capabilities"]


async def test_optional_and_forbidden_tools_are_ordinary_calls_unless_opted_in(
    tmp_path: Path, autojump_clock: Clock
) -> None:
    script = TaskScript()
    fake = script.server(tool("maybe", "optional"), tool("never", None))
    fake.results["tools/call"] = lambda params: (
        script.call(params) if "task" in params else {"content": [{"type": "text", "text": "now"}]}
    )
    async with open_runtime(config(fake, tmp_path)) as rt:
        await ready(rt)
        assert (await rt.call("mcp_tasks_maybe")).text == "now"
        assert (await rt.call("mcp_tasks_never")).text == "now"
        with pytest.raises(LocalProtocolError, match="taskSupport is 'forbidden'"):
            await rt.start_task("mcp_tasks_never")
    assert script.created == {}
    async with open_runtime(config(fake, tmp_path, tasks_for_optional=True)) as rt:
        await ready(rt)
        assert (await rt.call("mcp_tasks_maybe")).text == "report t1"


async def test_the_call_timeout_covers_the_whole_task_and_cancels_it(
    tmp_path: Path, autojump_clock: Clock
) -> None:
    script = TaskScript(duration=100.0)
    fake = script.server()
    async with open_runtime(config(fake, tmp_path, timeout=2.2)) as rt:
        await ready(rt)
        start = trio.current_time()
        with pytest.raises(CallTimeout, match="covers the whole task; the task was cancelled"):
            await rt.call("mcp_tasks_research")
        assert trio.current_time() - start == pytest.approx(2.2)
    assert script.cancelled == ["t1"]


async def test_cancelling_the_caller_cancels_the_task(
    tmp_path: Path, autojump_clock: Clock
) -> None:
    script = TaskScript(duration=100.0)
    fake = script.server()
    async with open_runtime(config(fake, tmp_path)) as rt:
        await ready(rt)
        with trio.move_on_after(1.7):
            await rt.call("mcp_tasks_research")
        assert script.cancelled == ["t1"]


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_failed_task_raises_task_failed(
    era: str, tmp_path: Path, autojump_clock: Clock
) -> None:
    script = TaskScript(era=era, fail=True, duration=1.0)
    fake = script.server()
    async with open_runtime(config(fake, tmp_path)) as rt:
        await ready(rt)
        with pytest.raises(TaskFailed, match="the research broke") as caught:
            await rt.call("mcp_tasks_research")
    assert caught.value.status == "failed" and caught.value.task_id == "t1"
    assert isinstance(caught.value.__cause__, RpcError)
    assert script.cancelled == []


async def test_the_default_poll_interval_and_status_notifications(
    tmp_path: Path, autojump_clock: Clock
) -> None:
    script = TaskScript(poll_ms=None, duration=2.5)
    fake = script.server()
    async with open_runtime(config(fake, tmp_path)) as rt:
        await ready(rt)
        start = trio.current_time()
        with rt.events() as events:
            async with trio.open_nursery() as nursery:

                async def nudge() -> None:
                    await trio.sleep(2.6)
                    await fake.notify(
                        "notifications/tasks/status", {**script.fields("t1"), "status": "completed"}
                    )

                nursery.start_soon(nudge)
                result = await rt.call("mcp_tasks_research")
            seen = [e for e in iter_ready(events) if isinstance(e, TaskStatusChanged)]
    assert result.text == "report t1"
    # every second without a suggestion; the notification at 2.6 s made it poll at once
    assert [g - start for g in script.gets] == pytest.approx([1.0, 2.0, 2.6])
    assert seen == [
        TaskStatusChanged(
            server="tasks", task_id="t1", status="completed", status_message="completed on it"
        )
    ]


def iter_ready(events: Any) -> list[Any]:
    out = []
    while True:
        try:
            out.append(events.receive_nowait())
        except trio.WouldBlock:
            return out


async def test_legacy_progress_of_the_task_reaches_the_caller(
    tmp_path: Path, autojump_clock: Clock
) -> None:
    script = TaskScript(duration=2.0)
    fake = script.server()
    seen: list[ProgressNotificationParams] = []
    async with open_runtime(config(fake, tmp_path)) as rt:
        await ready(rt)
        async with trio.open_nursery() as nursery:

            async def report() -> None:
                await trio.sleep(0.2)
                token = script.calls[0]["_meta"]["progressToken"]
                await fake.notify("notifications/progress", {"progressToken": token, "progress": 7})

            nursery.start_soon(report)
            await rt.call("mcp_tasks_research", progress=seen.append)
    assert [p.progress for p in seen] == [1, 7, 2]  # status, the server's, status


async def test_modern_input_requests_are_answered_through_the_host_callbacks(
    tmp_path: Path, autojump_clock: Clock
) -> None:
    script = TaskScript(era="modern", asking=True, duration=1.0)
    fake = script.server()
    asked: list[str] = []

    async def elicit(server: str, params: Any) -> dict[str, Any]:
        assert isinstance(params, ElicitRequestFormParams)
        asked.append(params.message)
        return {"action": "accept", "content": {"topic": "trio"}}

    callbacks = HostCallbacks(elicitation=elicit)
    async with open_runtime(config(fake, tmp_path), callbacks=callbacks) as rt:
        await ready(rt)
        result = await rt.call("mcp_tasks_research")
    assert result.text == "report t1"
    assert asked == ["Which topic?"]
    assert [u["inputResponses"] for u in script.updates] == [
        {"topic": {"action": "accept", "content": {"topic": "trio"}}}
    ]
    assert script.updates[0]["taskId"] == "t1"


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_dropped_connection_does_not_lose_the_task(
    era: str, tmp_path: Path, autojump_clock: Clock
) -> None:
    script = TaskScript(era=era, duration=5.0)
    fake = script.server()
    async with open_runtime(config(fake, tmp_path)) as rt:
        await ready(rt)
        async with trio.open_nursery() as nursery:

            async def drop() -> None:
                await trio.sleep(1.2)
                assert await fake.disconnect() == 1

            nursery.start_soon(drop)
            result = await rt.call("mcp_tasks_research")
    assert result.text == "report t1"
    assert fake.served == 2  # reconnected once
    polled = [(p or {}).get("taskId") for method, p in fake.requests if method == "tasks/get"]
    assert set(polled) == {"t1"} and len(script.created) == 1


async def test_a_handle_is_persisted_and_resumed_after_a_restart(
    tmp_path: Path, autojump_clock: Clock
) -> None:
    script = TaskScript(duration=10.0)
    fake = script.server()
    store = tmp_path / "tasks"
    async with open_runtime(config(fake, tmp_path)) as rt:
        await ready(rt)
        handle = await rt.start_task("mcp_tasks_research", {"q": 1})
        assert handle.task_id == "t1"
        assert (await handle.status()).status == "working"
        stored = await rt.stored_tasks()
    assert [r.task_id for r in stored] == ["t1"]
    assert stat.S_IMODE(store.stat().st_mode) == 0o700
    files = list(store.iterdir())
    assert len(files) == 1 and stat.S_IMODE(files[0].stat().st_mode) == 0o600
    # a new process: the record is all it has
    async with open_runtime(config(fake, tmp_path)) as rt:
        await ready(rt)
        (record,) = await rt.stored_tasks()
        handle = await rt.resume_task(record.server, record.task_id)
        assert handle.tool == "mcp_tasks_research"
        with pytest.raises(CallTimeout, match="it goes on"):
            await handle.result(timeout=1.0)
        assert script.cancelled == []
        result = await handle.result()
        assert result.text == "report t1"
        assert await rt.stored_tasks() == ()
    assert list(store.iterdir()) == []


async def test_a_handle_can_be_cancelled(tmp_path: Path, autojump_clock: Clock) -> None:
    script = TaskScript(duration=10.0, era="modern")
    fake = script.server()
    async with open_runtime(config(fake, tmp_path)) as rt:
        await ready(rt)
        handle = await rt.start_task("mcp_tasks_research")
        await handle.cancel()
        assert script.cancelled == ["t1"]
        assert await rt.stored_tasks() == ()
        with pytest.raises(TaskFailed, match="was cancelled"):
            await handle.result()


def test_the_store_writes_atomically_and_skips_what_is_not_a_record(tmp_path: Path) -> None:
    store = TaskStore(tmp_path / "t")
    (tmp_path / "t").mkdir(mode=0o755)
    record = TaskRecord(server="s", task_id="../../etc/passwd", era="legacy", tool="x")
    store.save(record)
    assert stat.S_IMODE((tmp_path / "t").stat().st_mode) == 0o700  # tightened
    (name,) = os.listdir(tmp_path / "t")
    assert "/" not in name and name.endswith(".task.json")
    (tmp_path / "t" / "junk.task.json").write_text("{not json")
    assert store.load() == (record,)
    assert store.get("s", "../../etc/passwd") == record
    store.remove("s", "../../etc/passwd")
    store.remove("s", "../../etc/passwd")
    assert store.load() == ()
