"""The client as the receiver of 2025-11-25 tasks, through the runtime, on trio's virtual clock.

The fake server's tool ``drive`` plays the server's side: its handler sends task-augmented
``sampling/createMessage`` / ``elicitation/create`` requests to the client, then ``tasks/get``,
``tasks/result``, ``tasks/list`` and ``tasks/cancel``, and records what it was answered and
when; the host's callbacks take the time they are told to.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import pytest
import trio
import trio.testing

from trio_mcp.actors.config import RetryPolicy, RuntimeConfig
from trio_mcp.actors.runtime import HostCallbacks, open_runtime
from trio_mcp.actors.runtime._taskserve import MAX_RUNNING, PAGE_SIZE
from trio_mcp.actors.testing import FakeServer, FakeTool, ToolContext
from trio_mcp.protocol import (
    CreateMessageRequestParams,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    RpcError,
    ServerDisconnected,
)

Clock = trio.testing.MockClock
RELATED = "io.modelcontextprotocol/related-task"

SAMPLE: dict[str, Any] = {
    "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
    "maxTokens": 10,
}
FORM: dict[str, Any] = {
    "message": "Your name?",
    "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
}
ANSWER: dict[str, Any] = {
    "role": "assistant",
    "content": {"type": "text", "text": "sampled"},
    "model": "m",
}

Script = Callable[[ToolContext, list[Any]], Awaitable[None]]


def as_task(params: Mapping[str, Any], ttl: int | None = 60_000) -> dict[str, Any]:
    return {**params, "task": {} if ttl is None else {"ttl": ttl}}


async def asked(ctx: ToolContext, method: str, params: Mapping[str, Any] | None) -> Any:
    """The client's answer to one request: its result, or ``(code, message)`` of its error."""
    try:
        return dict(await ctx.request(method, params))
    except RpcError as exc:
        return (exc.code, exc.args[0])


async def drive(
    script: Script, callbacks: HostCallbacks, **options: Any
) -> tuple[list[Any], FakeServer]:
    """Run ``script`` as the fake's tool handler (called once through ``rt.call``); returns
    what it recorded (times relative to the call's start) and the fake."""
    log: list[Any] = []

    async def handler(arguments: dict[str, Any], ctx: ToolContext) -> str:
        await script(ctx, log)
        return "driven"

    fake = FakeServer(name="s", tools=[FakeTool("drive", handler=handler)])
    config = RuntimeConfig(
        servers=(fake.server_config(),), retry=RetryPolicy(jitter=0.0), **options
    )
    async with open_runtime(config, callbacks=callbacks) as rt:
        await rt.wait_ready(timeout=10)
        start = trio.current_time()
        log.append(start)
        result = await rt.call("mcp_s_drive")
        assert result.text == "driven"
    return log[1:], fake


def since(log: list[Any]) -> float:
    start: float = log[0]
    return trio.current_time() - start


def statuses(fake: FakeServer) -> list[tuple[str, str | None]]:
    return [
        (params["status"], params.get("statusMessage"))
        for method, params in fake.notifications
        if method == "notifications/tasks/status" and params is not None
    ]


def slow_sampling(seconds: float, ended: list[float] | None = None) -> HostCallbacks:
    async def sampling(server: str, params: CreateMessageRequestParams) -> dict[str, Any]:
        finished = False
        try:
            await trio.sleep(seconds)
            finished = True
        finally:
            if ended is not None and not finished:
                ended.append(trio.current_time())
        return ANSWER

    async def elicitation(
        server: str, params: ElicitRequestFormParams | ElicitRequestURLParams
    ) -> dict[str, Any]:
        await trio.sleep(seconds)
        if params.message == "refuse":
            raise RpcError.from_error(-1, "the user closed the dialog")
        return {"action": "accept", "content": {"name": "Ann"}}

    return HostCallbacks(sampling=sampling, elicitation=elicitation)


# --------------------------------------------------------------------------- the capability


@pytest.mark.parametrize(
    ("callbacks", "expected"),
    [
        (HostCallbacks(), {}),
        (
            slow_sampling(0),
            {
                "list": {},
                "cancel": {},
                "requests": {"sampling": {"createMessage": {}}, "elicitation": {"create": {}}},
            },
        ),
    ],
)
async def test_the_capability_names_the_requests_the_host_can_run_as_tasks(
    callbacks: HostCallbacks, expected: dict[str, Any], autojump_clock: Clock
) -> None:
    async def nothing(ctx: ToolContext, log: list[Any]) -> None:
        await trio.lowlevel.checkpoint()

    _, fake = await drive(nothing, callbacks)
    init = next(params for method, params in fake.requests if method == "initialize")
    assert init is not None and init["capabilities"]["tasks"] == expected
    sampling_only = HostCallbacks(sampling=callbacks.sampling) if callbacks.sampling else None
    if sampling_only is not None:
        _, fake = await drive(nothing, sampling_only)
        init = next(params for method, params in fake.requests if method == "initialize")
        assert init is not None
        assert init["capabilities"]["tasks"]["requests"] == {"sampling": {"createMessage": {}}}


# --------------------------------------------------------------------------- a task's life


async def test_a_sampling_task_is_answered_at_once_and_runs_in_the_background(
    autojump_clock: Clock,
) -> None:
    async def script(ctx: ToolContext, log: list[Any]) -> None:
        created = await asked(ctx, "sampling/createMessage", as_task(SAMPLE))
        log.append(("created", since(log), created))
        task_id = created["task"]["taskId"]
        await trio.sleep(1.0)
        for method in ("tasks/get", "tasks/result", "tasks/get"):
            answer = await asked(ctx, method, {"taskId": task_id})
            log.append((method, since(log), answer))
        listed = await asked(ctx, "tasks/list", {})
        log.append(("list", since(log), [task["taskId"] for task in listed["tasks"]]))

    log, fake = await drive(script, slow_sampling(2.5))
    (_, at, created), (_, got_at, got), (_, result_at, result), (_, _, done), list_entry = log
    task = created["task"]
    task_id = task["taskId"]
    assert at == 0.0
    assert (task["status"], task["ttl"], task["pollInterval"]) == ("working", 60_000, 1_000)
    assert task["createdAt"].endswith("Z") and task["lastUpdatedAt"] == task["createdAt"]
    assert (got_at, got["status"], got["taskId"]) == (1.0, "working", task_id)
    # tasks/result waited for the host's callback, 2.5 s after the request
    assert result_at == 2.5
    assert result == {**ANSWER, "_meta": {RELATED: {"taskId": task_id}}}
    assert done["status"] == "completed"
    assert list_entry == ("list", 2.5, [task_id])
    assert statuses(fake) == [("completed", None)]


async def test_a_failing_elicitation_task_fails_with_the_callbacks_error(
    autojump_clock: Clock,
) -> None:
    async def script(ctx: ToolContext, log: list[Any]) -> None:
        created = await asked(ctx, "elicitation/create", as_task({**FORM, "message": "refuse"}))
        task_id = created["task"]["taskId"]
        log.append(await asked(ctx, "tasks/result", {"taskId": task_id}))
        got = await asked(ctx, "tasks/get", {"taskId": task_id})
        log.append((since(log), got))

    log, fake = await drive(script, slow_sampling(1.5))
    error, (at, got) = log
    assert error == (-1, "the user closed the dialog")
    assert (at, got["status"], got["statusMessage"]) == (
        1.5,
        "failed",
        "the user closed the dialog",
    )
    assert statuses(fake) == [("failed", "the user closed the dialog")]


async def test_an_elicitation_task_completes_with_the_users_answer(autojump_clock: Clock) -> None:
    async def script(ctx: ToolContext, log: list[Any]) -> None:
        created = await asked(ctx, "elicitation/create", as_task(FORM, ttl=None))
        assert created["task"]["ttl"] == 300_000  # the client's default
        log.append(await asked(ctx, "tasks/result", {"taskId": created["task"]["taskId"]}))

    (result,), _ = await drive(script, slow_sampling(0.5))
    assert result["action"] == "accept" and result["content"] == {"name": "Ann"}


async def test_tasks_cancel_cancels_the_callback(autojump_clock: Clock) -> None:
    ended: list[float] = []

    async def script(ctx: ToolContext, log: list[Any]) -> None:
        created = await asked(ctx, "sampling/createMessage", as_task(SAMPLE))
        task_id = created["task"]["taskId"]
        await trio.sleep(0.5)
        log.append(trio.current_time())
        log.append(await asked(ctx, "tasks/cancel", {"taskId": task_id}))
        log.append(await asked(ctx, "tasks/cancel", {"taskId": task_id}))
        log.append(await asked(ctx, "tasks/result", {"taskId": task_id}))
        log.append(await asked(ctx, "tasks/get", {"taskId": "nope"}))

    log, fake = await drive(script, slow_sampling(10.0, ended))
    cancelled_at, cancelled, again, result, unknown = log
    assert (cancelled["status"], cancelled["statusMessage"]) == (
        "cancelled",
        "cancelled by the server",
    )
    assert again[0] == -32602 and "has ended already (cancelled)" in again[1]
    assert result[0] == -32603 and "was cancelled" in result[1]
    assert unknown[0] == -32602 and "unknown task 'nope'" in unknown[1]
    assert ended == [cancelled_at]  # the host's callback, cancelled at that moment
    assert statuses(fake) == [("cancelled", "cancelled by the server")]


# --------------------------------------------------------------------------- ttl and limits


async def test_an_ended_task_is_dropped_when_its_ttl_passes(autojump_clock: Clock) -> None:
    async def script(ctx: ToolContext, log: list[Any]) -> None:
        created = await asked(ctx, "sampling/createMessage", as_task(SAMPLE, ttl=3_000))
        task_id = created["task"]["taskId"]
        await trio.sleep(2.9)
        log.append((await asked(ctx, "tasks/get", {"taskId": task_id}))["status"])
        await trio.sleep(0.2)
        log.append(await asked(ctx, "tasks/result", {"taskId": task_id}))

    (status, gone), _ = await drive(script, slow_sampling(1.0))
    assert status == "completed"
    assert gone[0] == -32602 and "its ttl passed" in gone[1]


async def test_a_task_still_running_at_its_ttl_is_cancelled(autojump_clock: Clock) -> None:
    ended: list[float] = []

    async def script(ctx: ToolContext, log: list[Any]) -> None:
        created = await asked(ctx, "sampling/createMessage", as_task(SAMPLE, ttl=2_000))
        log.append(await asked(ctx, "tasks/result", {"taskId": created["task"]["taskId"]}))
        log.append(since(log))
        log.append(trio.current_time())

    (error, at, now), fake = await drive(script, slow_sampling(10.0, ended))
    assert error[0] == -32603 and "expired" in error[1]
    assert at == 2.0 and ended == [now]
    assert statuses(fake) == []  # the task is gone: nothing to poll


async def test_tasks_list_pages_and_a_bad_cursor_is_refused(autojump_clock: Clock) -> None:
    async def script(ctx: ToolContext, log: list[Any]) -> None:
        ids = []
        for _ in range(PAGE_SIZE + 1):
            created = await asked(ctx, "sampling/createMessage", as_task(SAMPLE))
            ids.append(created["task"]["taskId"])
        first = await asked(ctx, "tasks/list", None)
        second = await asked(ctx, "tasks/list", {"cursor": first["nextCursor"]})
        log.append(ids)
        log.append([task["taskId"] for task in first["tasks"] + second["tasks"]])
        log.append("nextCursor" in second)
        log.append(await asked(ctx, "tasks/list", {"cursor": "x"}))

    (ids, listed, more, bad), _ = await drive(script, slow_sampling(0.0))
    assert listed == ids and not more
    assert bad[0] == -32602


async def test_past_the_running_limit_a_task_is_refused(autojump_clock: Clock) -> None:
    async def script(ctx: ToolContext, log: list[Any]) -> None:
        for _ in range(MAX_RUNNING + 1):
            log.append(await asked(ctx, "sampling/createMessage", as_task(SAMPLE)))

    log, _ = await drive(script, slow_sampling(5.0))
    assert all("task" in answer for answer in log[:MAX_RUNNING])
    code, message = log[MAX_RUNNING]
    assert code == -32603 and message.startswith("too many tasks")


# --------------------------------------------------------------------------- not as a task


async def test_without_the_capability_a_task_augmented_request_is_answered_as_usual(
    autojump_clock: Clock,
) -> None:
    async def script(ctx: ToolContext, log: list[Any]) -> None:
        log.append(await asked(ctx, "sampling/createMessage", as_task(SAMPLE)))
        log.append(await asked(ctx, "tasks/get", {"taskId": "t"}))

    (answer, get), _ = await drive(script, slow_sampling(0.5), tasks=False)
    assert answer == ANSWER
    assert get[0] == -32601


async def test_an_undeclared_request_with_a_task_is_refused_as_usual(
    autojump_clock: Clock,
) -> None:
    async def sampling(server: str, params: CreateMessageRequestParams) -> dict[str, Any]:
        await trio.lowlevel.checkpoint()
        return ANSWER

    async def script(ctx: ToolContext, log: list[Any]) -> None:
        log.append(await asked(ctx, "elicitation/create", as_task(FORM)))
        url = {"mode": "url", "message": "m", "url": "https://x.test", "elicitationId": "e"}
        log.append(await asked(ctx, "elicitation/create", as_task(url)))
        log.append(await asked(ctx, "sampling/createMessage", as_task({"maxTokens": 1})))

    (elicit, url, malformed), _ = await drive(script, HostCallbacks(sampling=sampling))
    assert elicit[0] == -32601 and url[0] == -32601
    assert malformed[0] == -32602


# --------------------------------------------------------------------------- the connection


async def test_the_end_of_the_connection_cancels_running_callbacks(
    autojump_clock: Clock,
) -> None:
    ended: list[float] = []
    fake_box: list[FakeServer] = []

    async def script(ctx: ToolContext, log: list[Any]) -> None:
        await asked(ctx, "sampling/createMessage", as_task(SAMPLE))
        await trio.sleep(1.0)
        log.append(trio.current_time())
        await fake_box[0].disconnect()

    async def handler(arguments: dict[str, Any], ctx: ToolContext) -> str:
        await script(ctx, log)
        return "driven"

    log: list[Any] = []
    fake = FakeServer(name="s", tools=[FakeTool("drive", handler=handler)])
    fake_box.append(fake)
    config = RuntimeConfig(servers=(fake.server_config(),), retry=RetryPolicy(jitter=0.0))
    async with open_runtime(config, callbacks=slow_sampling(10.0, ended)) as rt:
        await rt.wait_ready(timeout=10)
        with pytest.raises(ServerDisconnected):
            await rt.call("mcp_s_drive")
    assert ended == log
