"""Tasks through the runtime, in both eras, on trio's virtual clock (exact times).

The shipped fake server plays the task server (:class:`~trio_mcp.actors.testing.FakeTask`): the
tool ``research`` takes tasks, each completes ``duration`` seconds after it was created (by the
virtual clock) with ``report <task id>`` (or fails), ``tasks/get`` says where it is (with the
fake's poll interval), and the fake records the polls, cancels and ``tasks/update`` answers.
"""

from __future__ import annotations

import math
import os
import stat
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from trio_mcp.actors.config import RetryPolicy, RuntimeConfig
from trio_mcp.actors.runtime import HostCallbacks, Runtime, TaskStatusChanged, open_runtime
from trio_mcp.actors.runtime._taskstore import TaskRecord, TaskStore
from trio_mcp.actors.testing import FakeServer, FakeTask, FakeTool, ToolContext
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

#: What the fake's tasks say in each status.
MESSAGES = {status: f"{status} on it" for status in ("working", "completed", "input_required")}
TOPIC: dict[str, Any] = {
    "topic": {
        "method": "elicitation/create",
        "params": {
            "message": "Which topic?",
            "requestedSchema": {"type": "object", "properties": {"topic": {"type": "string"}}},
        },
    }
}


def research(
    support: str | None = "required", *, duration: float = 3.0, fail: bool = False
) -> FakeTool:
    """The task tool: ``report <task id>`` after ``duration`` s, or the error of a failure."""

    def report(arguments: dict[str, Any], ctx: ToolContext) -> str:
        if fail:
            raise RpcError.from_error(-32603, "the research broke")
        return f"report {ctx.task.task_id}" if ctx.task is not None else "now"

    return FakeTool("research", task_support=support, delay=duration, handler=report)


def task_server(
    era: str = "legacy",
    *tools: FakeTool,
    duration: float = 3.0,
    fail: bool = False,
    poll_ms: int | None = 500,
    **options: Any,
) -> FakeServer:
    return FakeServer(
        name="tasks",
        era=era,
        tools=list(tools) or [research(duration=duration, fail=fail)],
        task_poll_ms=poll_ms,
        task_messages=MESSAGES,
        **options,
    )


def calls(fake: FakeServer, method: str = "tools/call") -> list[Any]:
    return [params for name, params in fake.requests if name == method]


def cancelled(fake: FakeServer) -> list[str]:
    return [task.task_id for task in fake.tasks.values() if task.cancelled_by_client]


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
    fake = task_server(era)
    seen: list[ProgressNotificationParams] = []
    async with open_runtime(config(fake, tmp_path)) as rt:
        await ready(rt)
        start = trio.current_time()
        result = await rt.call("mcp_tasks_research", {"q": "x"}, progress=seen.append)
        assert trio.current_time() - start == pytest.approx(3.0)
    assert result.text == "report t1"
    # polled every 0.5 s until the task had completed, 3 s after it was created
    polls = fake.tasks["t1"].polls
    assert [g - start for g in polls] == pytest.approx([0.5 * n for n in range(1, 7)])
    assert [p.message for p in seen] == ["working on it", "completed on it"]
    assert seen[0].meta == {
        "io.modelcontextprotocol/related-task": {"taskId": "t1"},
        "status": "working",
    }
    assert cancelled(fake) == []
    if era == "modern":
        meta = calls(fake)[0]["_meta"]
        assert meta[META_CLIENT_CAPABILITIES]["extensions"] == {TASKS_EXTENSION: {}}
    else:
        assert "task" in calls(fake)[0] and calls(fake)[0]["task"] == {}


async def test_the_client_declares_tasks_in_initialize(
    tmp_path: Path, autojump_clock: Clock
) -> None:
    fake = task_server()
    async with open_runtime(config(fake, tmp_path)) as rt:
        await ready(rt)
    init = next(params for method, params in fake.requests if method == "initialize")
    assert init is not None and init["capabilities"]["tasks"] == {}
    fake = task_server()
    async with open_runtime(config(fake, tmp_path, tasks=False)) as rt:
        await ready(rt)
    init = next(params for method, params in fake.requests if method == "initialize")
    assert init is not None and "tasks" not in init["capabilities"]


async def test_optional_and_forbidden_tools_are_ordinary_calls_unless_opted_in(
    tmp_path: Path, autojump_clock: Clock
) -> None:
    maybe = attrs.evolve(research("optional"), name="maybe")
    fake = task_server("legacy", maybe, FakeTool("never", result="now"))
    async with open_runtime(config(fake, tmp_path)) as rt:
        await ready(rt)
        assert (await rt.call("mcp_tasks_maybe")).text == "now"
        assert (await rt.call("mcp_tasks_never")).text == "now"
        with pytest.raises(LocalProtocolError, match="taskSupport is 'forbidden'"):
            await rt.start_task("mcp_tasks_never")
    assert fake.tasks == {}
    async with open_runtime(config(fake, tmp_path, tasks_for_optional=True)) as rt:
        await ready(rt)
        assert (await rt.call("mcp_tasks_maybe")).text == "report t1"


async def test_the_call_timeout_covers_the_whole_task_and_cancels_it(
    tmp_path: Path, autojump_clock: Clock
) -> None:
    fake = task_server(duration=100.0)
    async with open_runtime(config(fake, tmp_path, timeout=2.2)) as rt:
        await ready(rt)
        start = trio.current_time()
        with pytest.raises(CallTimeout, match="covers the whole task; the task was cancelled"):
            await rt.call("mcp_tasks_research")
        assert trio.current_time() - start == pytest.approx(2.2)
    assert cancelled(fake) == ["t1"]


async def test_cancelling_the_caller_cancels_the_task(
    tmp_path: Path, autojump_clock: Clock
) -> None:
    fake = task_server(duration=math.inf)  # until the test ends it: never
    async with open_runtime(config(fake, tmp_path)) as rt:
        await ready(rt)
        with trio.move_on_after(1.7):
            await rt.call("mcp_tasks_research")
        assert cancelled(fake) == ["t1"]


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_failed_task_raises_task_failed(
    era: str, tmp_path: Path, autojump_clock: Clock
) -> None:
    fake = task_server(era, fail=True, duration=1.0)
    async with open_runtime(config(fake, tmp_path)) as rt:
        await ready(rt)
        with pytest.raises(TaskFailed, match="the research broke") as caught:
            await rt.call("mcp_tasks_research")
    assert caught.value.status == "failed" and caught.value.task_id == "t1"
    assert isinstance(caught.value.__cause__, RpcError)
    assert cancelled(fake) == []


async def test_the_default_poll_interval_and_status_notifications(
    tmp_path: Path, autojump_clock: Clock
) -> None:
    fake = task_server(poll_ms=None, duration=2.5)
    async with open_runtime(config(fake, tmp_path)) as rt:
        await ready(rt)
        start = trio.current_time()
        with rt.events() as events:
            async with trio.open_nursery() as nursery:

                async def nudge() -> None:
                    await trio.sleep(2.6)
                    assert await fake.tasks["t1"].notify() == 1  # completed at 2.5

                nursery.start_soon(nudge)
                result = await rt.call("mcp_tasks_research")
            seen = [e for e in iter_ready(events) if isinstance(e, TaskStatusChanged)]
    assert result.text == "report t1"
    # every second without a suggestion; the notification at 2.6 s made it poll at once
    assert [g - start for g in fake.tasks["t1"].polls] == pytest.approx([1.0, 2.0, 2.6])
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
    fake = task_server(duration=2.0)
    seen: list[ProgressNotificationParams] = []
    async with open_runtime(config(fake, tmp_path)) as rt:
        await ready(rt)
        async with trio.open_nursery() as nursery:

            async def report() -> None:
                await trio.sleep(0.2)
                task = fake.tasks["t1"]
                assert task.progress_token == calls(fake)[0]["_meta"]["progressToken"]
                assert await task.progress(7) == 1

            nursery.start_soon(report)
            await rt.call("mcp_tasks_research", progress=seen.append)
    assert [p.progress for p in seen] == [1, 7, 2]  # status, the server's, status


async def test_modern_input_requests_are_answered_through_the_host_callbacks(
    tmp_path: Path, autojump_clock: Clock
) -> None:
    def ask(task: FakeTask) -> None:
        task.ask(TOPIC)  # input_required from the start, until tasks/update answers

    fake = task_server("modern", duration=1.0, on_task=ask)
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
    updates = calls(fake, "tasks/update")
    assert [u["inputResponses"] for u in updates] == [
        {"topic": {"action": "accept", "content": {"topic": "trio"}}}
    ]
    assert updates[0]["taskId"] == "t1"
    assert fake.tasks["t1"].responses == [updates[0]["inputResponses"]]


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_dropped_connection_does_not_lose_the_task(
    era: str, tmp_path: Path, autojump_clock: Clock
) -> None:
    fake = task_server(era, duration=5.0)
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
    assert set(polled) == {"t1"} and len(fake.tasks) == 1


async def test_a_handle_is_persisted_and_resumed_after_a_restart(
    tmp_path: Path, autojump_clock: Clock
) -> None:
    # The store's worker thread lets the virtual clock jump to the next deadline: the task
    # works until the test ends it, and is kept without a ttl, whatever the clock says.
    fake = task_server(duration=math.inf, task_ttl_ms=None)
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
        assert cancelled(fake) == []
        fake.tasks["t1"].complete()  # with the tool's own result
        result = await handle.result()
        assert result.text == "report t1"
        assert await rt.stored_tasks() == ()
    assert list(store.iterdir()) == []


async def test_a_handle_can_be_cancelled(tmp_path: Path, autojump_clock: Clock) -> None:
    fake = task_server("modern", duration=math.inf, task_ttl_ms=None)  # as above
    async with open_runtime(config(fake, tmp_path)) as rt:
        await ready(rt)
        handle = await rt.start_task("mcp_tasks_research")
        await handle.cancel()
        assert cancelled(fake) == ["t1"]
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


async def test_modern_task_requests_over_http_name_the_task_in_mcp_name(
    tmp_path: Path, autojump_clock: Clock
) -> None:
    def ask(task: FakeTask) -> None:
        if task.task_id == "t1":
            task.ask(TOPIC)

    async def elicit(server: str, params: Any) -> dict[str, Any]:
        await trio.lowlevel.checkpoint()
        return {"action": "accept", "content": {"topic": "trio"}}

    # the fake takes each request's HTTP headers and checks them as a 2026-07-28 server does
    forever = attrs.evolve(research(duration=math.inf), name="forever")
    tools = (research(duration=1.0), forever)
    fake = task_server("modern", *tools, http_headers=True, on_task=ask)
    callbacks = HostCallbacks(elicitation=elicit)
    async with open_runtime(config(fake, tmp_path), callbacks=callbacks) as rt:
        await ready(rt)
        assert (await rt.call("mcp_tasks_research")).text == "report t1"
        handle = await rt.start_task("mcp_tasks_forever")
        await handle.cancel()
    sent = [(method, headers) for method, headers in fake.headers_received if "tasks/" in method]
    assert {method for method, _ in sent} == {"tasks/get", "tasks/update", "tasks/cancel"}
    for method, headers in sent:
        assert headers["Mcp-Method"] == method
        assert headers["Mcp-Name"] == ("t2" if method == "tasks/cancel" else "t1")
