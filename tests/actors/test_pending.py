"""PendingCalls and its Waiter.

The :class:`Waiter` alone: resolved once, a bounded progress queue that keeps the newest, and
``wait()`` running the caller's progress callback in the caller's task. The
:class:`PendingCalls` actor driven through its mailbox (a ByteChannel) with fake dispatch,
control and loss sinks, the way a session and a transport drive it: answers, errors, deadlines
(exact times under ``autojump_clock``), transport events, the end of the connection, bad frames
and floods.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs
import outcome
import pytest
import trio
import trio.testing

from trio_mcp.actors.runtime import _pending
from trio_mcp.actors.runtime._pending import (
    DRAIN_LIMIT,
    PROGRESS_BACKLOG,
    AllowBatches,
    ConnectionLost,
    Expect,
    Forget,
    Mailbox,
    PendingCalls,
    PendingItem,
    PendingStatistics,
    TimedOut,
    Waiter,
)
from trio_mcp.protocol import (
    InvalidMessage,
    InvalidParams,
    MethodNotFound,
    RpcError,
    ServerDisconnected,
)
from trio_mcp.protocol._errors import (
    FrameTooLarge,
    HttpStatusError,
    LocalProtocolError,
    McpError,
    SessionExpired,
    TransportClosed,
)
from trio_mcp.protocol._jsonrpc import Notification, Request, RequestId
from trio_mcp.protocol._methods import decode_notification
from trio_mcp.protocol._types import ProgressNotificationParams
from trio_mcp.transports._base import (
    ConnectionEnded,
    RequestFailed,
    SessionExpiredNotice,
    StderrLine,
    item_size,
)
from trio_mcp.transports._channel import ByteChannel

INF = float("inf")


# --------------------------------------------------------------------------- frames


def frame(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def answer(request_id: RequestId, result: Mapping[str, Any] | None = None) -> bytes:
    return frame({"jsonrpc": "2.0", "id": request_id, "result": dict(result or {})})


def error(request_id: RequestId | None, code: int, message: str, data: Any = None) -> bytes:
    body: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        body["data"] = data
    return frame({"jsonrpc": "2.0", "id": request_id, "error": body})


def progress(token: int | str, value: float, total: float | None = None) -> bytes:
    params: dict[str, Any] = {"progressToken": token, "progress": value}
    if total is not None:
        params["total"] = total
    return frame({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})


def params(value: float, token: int | str = 1) -> ProgressNotificationParams:
    return ProgressNotificationParams(progress_token=token, progress=value)


# --------------------------------------------------------------------------- the harness


@attrs.define
class Sink:
    """A fake mailbox of another actor: records what it is sent, or refuses it."""

    items: list[Any] = attrs.Factory(list)
    refuse: type[BaseException] | None = None
    on_item: Callable[[Any], None] | None = None

    def send_nowait(self, value: Any, /) -> None:
        if self.refuse is not None:
            raise self.refuse
        if self.on_item is not None:
            self.on_item(value)
        self.items.append(value)


@attrs.define
class Finished:
    """How one call ended: its outcome and the trio time it ended at."""

    result: outcome.Outcome[Mapping[str, Any]]
    at: float


@attrs.define
class Harness:
    """One PendingCalls table with its mailbox and fake sinks, run in a nursery."""

    nursery: trio.Nursery
    mailbox: Mailbox
    table: PendingCalls
    dispatch: Sink
    control: Sink
    lost: Sink
    ended: list[BaseException] = attrs.Factory(list)
    ended_at: list[float] = attrs.Factory(list)
    finished: dict[RequestId, Finished] = attrs.Factory(dict)

    async def _run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            await self.table.run(task_status=task_status)
        except McpError as exc:
            self.ended.append(exc)
            self.ended_at.append(trio.current_time())

    def put(self, item: PendingItem) -> None:
        self.mailbox.send_nowait(item, item_size(item))

    def call(
        self,
        request_id: RequestId,
        method: str = "tools/call",
        *,
        on_progress: Callable[[ProgressNotificationParams], Awaitable[None] | None] | None = None,
        defer: bool = False,
        **expect: Any,
    ) -> Waiter:
        """What a session's caller does: an Expect into the mailbox, then wait (in a task of
        its own, recording how the call ended). ``defer``: as a session does, without waking
        the table when its timer is set no later than the call's deadline."""
        waiter = Waiter(request_id, method)
        item = Expect(request_id=request_id, method=method, waiter=waiter, **expect)
        if defer and item.deadline >= self.table.armed_until:
            self.mailbox.defer_nowait(item, item_size(item))
        else:
            self.put(item)

        async def wait() -> None:
            result = await outcome.acapture(waiter.wait, on_progress)
            self.finished[request_id] = Finished(result=result, at=trio.current_time())

        self.nursery.start_soon(wait)
        return waiter

    def value(self, request_id: RequestId) -> Mapping[str, Any]:
        return self.finished[request_id].result.unwrap()

    def failure(self, request_id: RequestId) -> BaseException:
        result = self.finished[request_id].result
        assert isinstance(result, outcome.Error), result
        return result.error

    def stats(self) -> PendingStatistics:
        return self.table.statistics()


async def start(
    nursery: trio.Nursery,
    *,
    max_bytes: int = 64 * 1024,
    generation: int = 3,
    resumable: bool = True,
) -> Harness:
    """A table in ``nursery``; ``resumable=False``: without a control mailbox, as a session
    builds it for a transport that cannot hold its frames for a new HTTP session."""
    mailbox: Mailbox = ByteChannel[PendingItem](max_bytes=max_bytes)
    dispatch, control, lost = Sink(), Sink(), Sink()
    table = PendingCalls(
        server="s",
        generation=generation,
        mailbox=mailbox,
        dispatch=dispatch,
        control=control if resumable else None,
        lost=lost,
    )
    harness = Harness(nursery, mailbox, table, dispatch, control, lost)
    await nursery.start(harness._run)
    return harness


async def settle() -> None:
    await trio.testing.wait_all_tasks_blocked()


# --------------------------------------------------------------------------- the Waiter


async def test_a_waiter_is_resolved_once() -> None:
    waiter = Waiter(1, "tools/call")
    assert (waiter.request_id, waiter.method, waiter.done, waiter.abandoned) == (
        1,
        "tools/call",
        False,
        False,
    )
    assert waiter.resolve(outcome.Value({"ok": True}))
    assert waiter.done
    assert not waiter.resolve(outcome.Value({"late": True}))
    assert not waiter.resolve(outcome.Error(TransportClosed("late")))
    assert await waiter.wait() == {"ok": True}


async def test_resolve_wakes_the_waiting_task_with_the_outcome() -> None:
    waiter = Waiter(1, "m")
    got: list[Mapping[str, Any]] = []
    async with trio.open_nursery() as nursery:

        async def wait() -> None:
            got.append(await waiter.wait())

        nursery.start_soon(wait)
        await settle()
        assert got == []
        waiter.resolve(outcome.Value({"n": 1}))
    assert got == [{"n": 1}]


async def test_a_stored_error_is_raised_to_the_caller() -> None:
    waiter = Waiter("a", "m")
    failure = RpcError.from_error(-32602, "bad", method="m")
    waiter.resolve(outcome.Error(failure))
    with pytest.raises(InvalidParams) as info:
        await waiter.wait()
    assert info.value is failure


async def test_a_failed_waiter_raises_that_error_and_takes_nothing_after_it() -> None:
    waiter = Waiter(3, "tools/call")
    failure = ServerDisconnected("gone", server="s", sent=True)
    assert waiter.fail(failure)
    assert waiter.done
    assert not waiter.fail(TransportClosed("late"))
    assert not waiter.answer({"late": True})
    assert not waiter.resolve(outcome.Value({"late": True}))
    with pytest.raises(ServerDisconnected) as info:
        await waiter.wait()
    assert info.value is failure
    with pytest.raises(RuntimeError, match="the error of request 3 was taken"):
        await waiter.wait()


async def test_a_failed_wait_leaves_no_cycle_for_the_garbage_collector() -> None:
    # The caller's traceback holds its frames, and they hold the waiter: a waiter that kept
    # the error would make a cycle that only the cyclic collector frees (trio #1770).
    freed: list[str] = []

    class Gone(Exception):
        def __del__(self) -> None:
            freed.append("gone")

    async def call(fail: Callable[[Waiter, Gone], object]) -> None:
        waiter = Waiter(1, "tools/call")
        fail(waiter, Gone())
        with contextlib.suppress(Gone):
            await waiter.wait()

    gc.disable()
    try:
        await call(Waiter.fail)
        assert freed == ["gone"]
        await call(lambda waiter, error: waiter.resolve(outcome.Error(error)))  # an error answer
        assert freed == ["gone", "gone"]
    finally:
        gc.enable()


async def test_wait_is_a_checkpoint_even_when_resolved() -> None:
    waiter = Waiter(1, "m")
    waiter.resolve(outcome.Value({}))
    with trio.testing.assert_checkpoints():
        await waiter.wait()


@pytest.mark.parametrize("callback", ["none", "sync"])
async def test_wait_is_a_checkpoint_when_resolved_with_progress_queued(callback: str) -> None:
    # the queued progress is handled without waiting (no callback, or a sync one): wait() is
    # still a checkpoint, as its docstring promises
    waiter = Waiter(1, "m")
    waiter.push_progress(params(1))
    waiter.push_progress(params(2))
    waiter.resolve(outcome.Value({"ok": True}))
    seen: list[float] = []
    on_progress = (lambda p: seen.append(p.progress)) if callback == "sync" else None
    with trio.testing.assert_checkpoints():
        assert await waiter.wait(on_progress) == {"ok": True}
    assert seen == ([1.0, 2.0] if callback == "sync" else [])


async def test_a_cancelled_wait_leaves_the_waiter_unresolved_and_waitable(
    autojump_clock: trio.testing.MockClock,
) -> None:
    waiter = Waiter(1, "m")
    with trio.move_on_after(1) as scope:
        await waiter.wait()
    assert scope.cancelled_caught
    assert trio.current_time() == 1.0
    assert not waiter.done
    waiter.resolve(outcome.Value({"ok": 1}))
    assert await waiter.wait() == {"ok": 1}


async def test_only_one_task_may_wait() -> None:
    waiter = Waiter(7, "m")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter.wait)
        await settle()
        with pytest.raises(RuntimeError, match="request 7 is already awaited by a task"):
            await waiter.wait()
        waiter.resolve(outcome.Value({}))


async def test_progress_is_kept_up_to_the_backlog_and_the_newest_win() -> None:
    assert PROGRESS_BACKLOG == 16
    waiter = Waiter(1, "m")
    for i in range(PROGRESS_BACKLOG + 5):
        waiter.push_progress(params(i))
    waiter.resolve(outcome.Value({"done": True}))
    waiter.push_progress(params(999))  # after the outcome: ignored
    seen: list[float] = []
    assert await waiter.wait(lambda p: seen.append(p.progress)) == {"done": True}
    assert seen == [float(i) for i in range(5, PROGRESS_BACKLOG + 5)]


async def test_progress_without_a_callback_is_dropped() -> None:
    waiter = Waiter(1, "m")
    waiter.push_progress(params(1))
    waiter.resolve(outcome.Value({}))
    assert await waiter.wait() == {}


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_progress_callbacks_run_in_the_callers_task(kind: str) -> None:
    waiter = Waiter(1, "m")
    calls: list[tuple[float, trio.lowlevel.Task]] = []

    def sync_callback(p: ProgressNotificationParams) -> None:
        calls.append((p.progress, trio.lowlevel.current_task()))

    async def async_callback(p: ProgressNotificationParams) -> None:
        await trio.lowlevel.checkpoint()  # awaited: it may wait
        calls.append((p.progress, trio.lowlevel.current_task()))

    callback = sync_callback if kind == "sync" else async_callback
    callers: list[trio.lowlevel.Task] = []
    async with trio.open_nursery() as nursery:

        async def wait() -> None:
            callers.append(trio.lowlevel.current_task())
            assert await waiter.wait(callback) == {"done": True}

        nursery.start_soon(wait)
        await settle()
        waiter.push_progress(params(1))
        waiter.push_progress(params(2))
        await settle()
        assert [value for value, _ in calls] == [1, 2]
        waiter.push_progress(params(3))
        waiter.resolve(outcome.Value({"done": True}))  # the progress before it still runs
    assert [value for value, _ in calls] == [1, 2, 3]
    assert {task for _, task in calls} == {callers[0]}


async def test_a_failing_progress_callback_is_logged_and_not_called_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    waiter = Waiter(1, "m")
    called: list[float] = []

    def callback(p: ProgressNotificationParams) -> None:
        called.append(p.progress)
        raise ValueError("host bug")

    for value in (1, 2, 3):
        waiter.push_progress(params(value))
    waiter.resolve(outcome.Value({"ok": True}))
    with caplog.at_level(logging.ERROR, logger="trio_mcp.session"):
        assert await waiter.wait(callback) == {"ok": True}
    assert called == [1]
    assert "progress callback failed; it is not called again" in caplog.text


async def test_a_failing_async_progress_callback_is_dropped_too() -> None:
    waiter = Waiter(1, "m")
    called: list[float] = []

    async def callback(p: ProgressNotificationParams) -> None:
        called.append(p.progress)
        raise KeyError("host bug")

    waiter.push_progress(params(1))
    waiter.push_progress(params(2))
    waiter.resolve(outcome.Value({}))
    assert await waiter.wait(callback) == {}
    assert called == [1]


# --------------------------------------------------------------------------- answers


async def test_an_expect_then_its_answer_resolves_the_call() -> None:
    async with trio.open_nursery() as nursery:
        h = await start(nursery)
        h.call(1)
        h.call(2, "tools/list")
        await settle()
        assert h.stats().outstanding == 2
        h.put(answer(2, {"tools": []}))
        h.put(answer(1, {"ok": True}))
        await settle()
        assert h.value(1) == {"ok": True}
        assert h.value(2) == {"tools": []}
        stats = h.stats()
        assert (stats.outstanding, stats.resolved_total, stats.failed_total) == (0, 2, 0)
        assert stats.frames_total == 2
        nursery.cancel_scope.cancel()


async def test_an_answer_can_follow_its_expect_in_the_same_batch() -> None:
    async with trio.open_nursery() as nursery:
        h = await start(nursery)
        h.call("abc")
        h.put(answer("abc", {"ok": 1}))  # both in the mailbox before the table wakes
        await settle()
        assert h.value("abc") == {"ok": 1}
        nursery.cancel_scope.cancel()


async def test_a_late_or_unknown_answer_is_ignored() -> None:
    async with trio.open_nursery() as nursery:
        h = await start(nursery)
        h.put(answer(99))
        h.call(1)
        h.put(answer(1, {"first": True}))
        h.put(answer(1, {"again": True}))
        await settle()
        assert h.value(1) == {"first": True}
        assert h.ended == []
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize(
    ("code", "kind"), [(-32602, InvalidParams), (-32601, MethodNotFound), (-1, RpcError)]
)
async def test_an_error_answer_is_the_most_specific_rpc_error(
    code: int, kind: type[RpcError]
) -> None:
    async with trio.open_nursery() as nursery:
        h = await start(nursery)
        h.call(5, "tools/call")
        h.put(error(5, code, "no good", data={"why": "x"}))
        await settle()
        failure = h.failure(5)
        assert type(failure) is kind
        assert isinstance(failure, RpcError)
        assert (failure.code, failure.data) == (code, {"why": "x"})
        assert (failure.server, failure.method, failure.request_id) == ("s", "tools/call", 5)
        assert h.stats().outstanding == 0
        nursery.cancel_scope.cancel()


async def test_an_error_without_an_id_fails_no_call(caplog: pytest.LogCaptureFixture) -> None:
    async with trio.open_nursery() as nursery:
        h = await start(nursery)
        h.call(1)
        with caplog.at_level(logging.WARNING, logger="trio_mcp.server.s"):
            h.put(error(None, -32700, "parse error"))
            await settle()
        assert 1 not in h.finished
        assert "server reported an error: -32700 parse error" in caplog.text
        nursery.cancel_scope.cancel()


async def test_a_second_expect_for_an_id_in_flight_fails_that_caller() -> None:
    async with trio.open_nursery() as nursery:
        h = await start(nursery)
        first = h.call(1)
        second = Waiter(1, "again")
        h.put(Expect(request_id=1, method="again", waiter=second))
        await settle()
        assert second.done
        with pytest.raises(LocalProtocolError, match="still in flight"):
            await second.wait()
        assert not first.done
        h.put(answer(1))
        await settle()
        assert h.value(1) == {}
        nursery.cancel_scope.cancel()


async def test_forget_drops_the_call(autojump_clock: trio.testing.MockClock) -> None:
    async with trio.open_nursery() as nursery:
        h = await start(nursery)
        waiter = h.call(1, deadline=10)
        h.call(2)
        await settle()
        h.put(Forget(request_id=1))
        h.put(Forget(request_id=404))  # unknown: nothing happens
        await settle()
        assert h.stats().outstanding == 1
        h.put(answer(1, {"late": True}))  # nobody waits for it any more
        h.put(answer(2))
        await settle()
        await trio.sleep(20)  # and its deadline is gone with it
        assert not waiter.done
        assert 1 not in h.finished and h.value(2) == {}
        nursery.cancel_scope.cancel()


async def test_abandoned_waiters_are_swept_when_the_table_grows() -> None:
    async with trio.open_nursery() as nursery:
        h = await start(nursery, max_bytes=1 << 20)
        for i in range(300):
            waiter = Waiter(i, "m")
            waiter.abandoned = i < 200  # callers that gave up without a Forget
            h.put(Expect(request_id=i, method="m", waiter=waiter))
        await settle()
        # the sweep ran when the 257th came in: the 200 abandoned ones are gone
        assert h.stats().outstanding == 100
        nursery.cancel_scope.cancel()


async def test_each_finished_call_is_counted_once(autojump_clock: trio.testing.MockClock) -> None:
    async with trio.open_nursery() as nursery:
        h = await start(nursery)
        h.call(1)
        h.call(2)
        h.call(3, deadline=1)
        h.call(4)
        h.call(5)
        h.put(answer(1))
        h.put(error(2, -32601, "nope"))
        h.put(RequestFailed(request_id=4, error=HttpStatusError("500", status=500), sent=True))
        h.put(b'{"jsonrpc":"2.0","id":5,"res')
        await trio.sleep(2)
        assert len(h.finished) == 5
        stats = h.stats()
        assert stats.outstanding == 0
        assert stats.resolved_total + stats.failed_total == 5
        assert stats.resolved_total == 2  # the two answers
        nursery.cancel_scope.cancel()


# --------------------------------------------------------------------------- deadlines


async def test_a_call_times_out_at_its_deadline(autojump_clock: trio.testing.MockClock) -> None:
    async with trio.open_nursery() as nursery:
        h = await start(nursery)
        h.call(1, deadline=10.0)
        h.call(2, deadline=25.0)
        h.call(3)  # no deadline
        await trio.sleep(30)
        assert isinstance(h.failure(1), TimedOut)
        assert isinstance(h.failure(2), TimedOut)
        assert (h.finished[1].at, h.finished[2].at) == (10.0, 25.0)
        assert 3 not in h.finished
        stats = h.stats()
        assert (stats.outstanding, stats.failed_total) == (1, 2)
        h.put(answer(1, {"late": True}))  # after its timeout: ignored
        await settle()
        assert isinstance(h.failure(1), TimedOut)
        nursery.cancel_scope.cancel()


async def test_an_earlier_deadline_shortens_the_wait(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        h = await start(nursery)
        h.call(1, deadline=100.0)
        await trio.sleep(1)  # the table now waits until 100
        h.call(2, deadline=5.0)
        await trio.sleep(10)
        assert h.finished[2].at == 5.0
        assert 1 not in h.finished
        await trio.sleep(100)
        assert h.finished[1].at == 100.0
        nursery.cancel_scope.cancel()


async def test_an_expect_put_without_a_wake_up_still_times_out_at_its_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        h = await start(nursery)
        assert h.table.armed_until == INF  # nothing to time: any deadline can wait
        h.call(1, deadline=10.0, defer=True)  # a wake-up: the timer must be set
        await settle()
        assert h.table.armed_until == 10.0
        wakeups = h.stats().wakeups_total
        h.call(2, deadline=25.0, defer=True)  # no earlier than the timer: no wake-up
        h.call(3, defer=True)
        await settle()
        assert h.stats().wakeups_total == wakeups
        assert len(h.mailbox) == 2
        await trio.sleep(30)
        # the timer (10) took them in; each one timed out at its own deadline
        assert (h.finished[1].at, h.finished[2].at) == (10.0, 25.0)
        assert 3 not in h.finished
        assert h.stats().outstanding == 1
        nursery.cancel_scope.cancel()


async def test_sequential_calls_wake_the_table_once_each(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The Expect of a call waits in the mailbox for its answer: one wake-up per call.
    async with trio.open_nursery() as nursery:
        h = await start(nursery)
        h.call(0, deadline=100.0, defer=True)
        h.put(answer(0))
        await settle()
        before = h.stats().wakeups_total
        for i in range(1, 11):
            h.call(i, deadline=100.0 + i, defer=True)
            await settle()
            h.put(answer(i, {"n": i}))
            await settle()
            assert h.value(i) == {"n": i}
        assert h.stats().wakeups_total - before == 10
        # each call was answered in the drain that registered it: no deadline went into the
        # heap, yet the timer stayed armed (else the Expects could not have waited unwoken)
        assert h.stats().deadline_entries == 0
        nursery.cancel_scope.cancel()


async def test_a_call_still_waiting_after_the_drain_has_its_deadline_kept(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        h = await start(nursery)
        h.call(1, deadline=5.0, defer=True)
        h.call(2, deadline=7.0)  # wakes the table: both are registered in one drain
        await settle()
        assert h.stats().deadline_entries == 2
        h.put(answer(1, {"n": 1}))
        await trio.sleep(10)
        assert h.value(1) == {"n": 1}
        assert isinstance(h.failure(2), TimedOut)
        assert h.finished[2].at == 7.0
        nursery.cancel_scope.cancel()


async def test_an_answer_before_the_deadline_wins(autojump_clock: trio.testing.MockClock) -> None:
    async with trio.open_nursery() as nursery:
        h = await start(nursery)
        h.call(1, deadline=10.0)
        await trio.sleep(9.5)
        h.put(answer(1, {"ok": True}))
        await trio.sleep(5)
        assert h.value(1) == {"ok": True}
        assert h.finished[1].at == 9.5
        nursery.cancel_scope.cancel()


async def test_progress_moves_the_deadline_up_to_the_hard_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        h = await start(nursery)
        seen: list[tuple[float, float]] = []
        h.call(
            1,
            deadline=10.0,
            progress_token="tok",
            reset_timeout=10.0,
            hard_deadline=25.0,
            on_progress=lambda p: seen.append((trio.current_time(), p.progress)),
        )
        await trio.sleep(8)
        h.put(progress("tok", 1))  # the deadline moves to 18
        await trio.sleep(9)  # t = 17
        assert 1 not in h.finished
        h.put(progress("tok", 2))  # 27, capped at 25
        await trio.sleep(7)  # t = 24
        assert 1 not in h.finished
        await trio.sleep(5)
        assert isinstance(h.failure(1), TimedOut)
        assert h.finished[1].at == 25.0
        assert seen == [(8.0, 1), (17.0, 2)]
        nursery.cancel_scope.cancel()


async def test_progress_without_reset_timeout_does_not_move_the_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        h = await start(nursery)
        seen: list[float] = []
        h.call(1, deadline=10.0, progress_token=1, on_progress=lambda p: seen.append(p.progress))
        for i in range(1, 9):
            await trio.sleep(1)
            h.put(progress(1, i, total=8))
        await trio.sleep(10)
        assert h.finished[1].at == 10.0
        assert isinstance(h.failure(1), TimedOut)
        assert seen == [float(i) for i in range(1, 9)]
        nursery.cancel_scope.cancel()


async def test_progress_for_an_unknown_token_or_invalid_is_dropped(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        h = await start(nursery)
        seen: list[float] = []
        h.call(1, progress_token=1, on_progress=lambda p: seen.append(p.progress))
        h.put(progress("other", 5))
        h.put(frame({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"x": 1}}))
        h.put(progress(1, 7))
        await settle()
        assert seen == [7]
        assert h.dispatch.items == []  # progress never goes to the dispatcher
        nursery.cancel_scope.cancel()


async def test_progress_is_decoded_only_when_someone_waits_for_its_token(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    decode = decode_notification
    decoded: list[Any] = []

    def counting(method: str, params: Any) -> Any:
        decoded.append(params)
        return decode(method, params)

    monkeypatch.setattr(_pending, "decode_notification", counting)
    async with trio.open_nursery() as nursery:
        h = await start(nursery)
        seen: list[float] = []
        h.call(1, progress_token=1, on_progress=lambda p: seen.append(p.progress))
        with caplog.at_level(logging.WARNING, logger="trio_mcp.server.s"):
            for _ in range(100):
                h.put(progress("nobody", 5))
            for token in (True, 1.0, [1], {"a": 1}, None):  # not a string or an integer
                h.put(
                    frame(
                        {
                            "jsonrpc": "2.0",
                            "method": "notifications/progress",
                            "params": {"progressToken": token, "progress": "bad"},
                        }
                    )
                )
            await settle()
            assert decoded == []  # nobody waits for them: never decoded, and no warning
            assert caplog.text == ""
            # invalid progress for a token someone waits for: a warning, as ever
            bad = {"progressToken": 1, "progress": "not a number"}
            h.put(frame({"jsonrpc": "2.0", "method": "notifications/progress", "params": bad}))
            h.put(progress(1, 7))
            await settle()
        assert seen == [7]
        assert len(decoded) == 2
        assert "invalid progress notification" in caplog.text
        assert h.ended == []
        nursery.cancel_scope.cancel()


async def test_a_flooding_server_cannot_hold_off_a_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        h = await start(nursery)
        h.call(1, deadline=5.0)

        async def flood() -> None:
            while True:
                await h.mailbox.send(frame({"jsonrpc": "2.0", "method": "notifications/x"}))
                await trio.sleep(0.25)

        nursery.start_soon(flood)
        await trio.sleep(6)
        assert h.finished[1].at == 5.0
        assert isinstance(h.failure(1), TimedOut)
        nursery.cancel_scope.cancel()


async def test_the_deadline_heap_stays_bounded_after_many_answered_calls(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        h = await start(nursery)
        for i in range(2000):
            h.call(i, deadline=1000.0 + i)
            await settle()
            h.put(answer(i))
            await settle()
            # compacted when a push finds more than 2 x calls waiting + 64 entries
            assert h.stats().deadline_entries <= 2 * (h.stats().outstanding + 1) + 64 + 1
        stats = h.stats()
        assert (stats.outstanding, stats.resolved_total) == (0, 2000)
        # and progress that keeps moving one call's deadline does not grow it either
        h.call("long", deadline=10.0, progress_token="long", reset_timeout=10.0)
        for i in range(500):
            h.put(progress("long", i))
            await trio.sleep(1)
        assert h.stats().deadline_entries <= 2 * (1 + 1) + 64 + 1
        assert "long" not in h.finished
        nursery.cancel_scope.cancel()


# --------------------------------------------------------------------------- transport events


async def test_a_request_failure_fails_that_call_with_the_transports_error() -> None:
    async with trio.open_nursery() as nursery:
        h = await start(nursery)
        for i in (1, 2, 3, 4):
            h.call(i)
        disconnected = ServerDisconnected("the response stream was lost", sent=True)
        status = HttpStatusError("HTTP 503 Service Unavailable", status=503, body="busy")
        other = FrameTooLarge("an SSE event over 10 bytes", limit=10)
        h.put(RequestFailed(request_id=1, error=disconnected, sent=False))
        h.put(RequestFailed(request_id=2, error=status, sent=True))
        h.put(RequestFailed(request_id=3, error=other, sent=True))
        h.put(RequestFailed(request_id=404, error=other, sent=True))  # unknown: ignored
        await settle()

        first = h.failure(1)
        assert isinstance(first, ServerDisconnected)
        assert first.sent is False  # the transport's word, not the error's
        assert str(first) == "server 's': the response stream was lost"
        assert first.server == "s"
        assert first.__cause__ is disconnected

        second = h.failure(2)
        assert type(second) is HttpStatusError
        assert (second.status, second.body) == (503, "busy")
        assert str(second) == "server 's': HTTP 503 Service Unavailable"
        assert second.__cause__ is status

        assert h.failure(3) is other
        assert 4 not in h.finished
        assert h.stats().outstanding == 1
        h.put(answer(4))  # the connection goes on
        await settle()
        assert h.value(4) == {}
        assert h.ended == []
        nursery.cancel_scope.cancel()


async def test_a_session_expiry_fails_the_lost_calls_and_goes_to_control() -> None:
    async with trio.open_nursery() as nursery:
        h = await start(nursery)
        for i in (1, 2, 3):
            h.call(i, "tools/call")
        notice = SessionExpiredNotice(error=SessionExpired("session gone"), lost=(1, 3, 404))
        h.put(notice)
        await settle()
        for i in (1, 3):
            failure = h.failure(i)
            assert isinstance(failure, ServerDisconnected)
            assert failure.sent is True
            assert "ended its session while tools/call was in flight" in str(failure)
            assert "outcome is unknown" in str(failure)
        assert 2 not in h.finished
        assert h.control.items == [notice]
        assert h.dispatch.items == [] and h.lost.items == []
        h.put(answer(2))
        await settle()
        assert h.value(2) == {}
        nursery.cancel_scope.cancel()


async def test_a_session_expiry_that_control_cannot_take_ends_the_connection() -> None:
    async with trio.open_nursery() as nursery:
        h = await start(nursery)
        h.control.refuse = trio.WouldBlock  # a new session is being made already
        h.call(1)
        h.put(SessionExpiredNotice(error=SessionExpired("session gone")))
        await settle()
        assert len(h.ended) == 1
        assert isinstance(h.ended[0], TransportClosed)
        assert str(h.ended[0]) == "session gone (the session could not be re-initialized)"
        assert isinstance(h.failure(1), ServerDisconnected)
        assert [type(m) for m in h.lost.items] == [ConnectionLost]


async def test_a_session_expiry_without_control_ends_the_connection_saying_why() -> None:
    # The transport passed the expiry up but cannot hold its frames for a new session: every
    # waiting call fails at once with the expiry as the reason, and the supervisor is told.
    async with trio.open_nursery() as nursery:
        h = await start(nursery, resumable=False)
        h.call(1)
        h.call(2)
        expired = SessionExpired("the server ended the session")
        h.put(SessionExpiredNotice(error=expired, lost=(1,)))
        await settle()
        assert [str(e) for e in h.ended] == ["the server ended the session; reconnecting"]
        assert isinstance(h.ended[0], TransportClosed)
        assert h.ended[0].__cause__ is expired
        lost = h.failure(1)  # lost in flight: failed first, as with a control loop
        assert isinstance(lost, ServerDisconnected)
        assert "ended its session while tools/call was in flight" in str(lost)
        held = h.failure(2)
        assert isinstance(held, ServerDisconnected)
        assert str(held).startswith(
            "server 's' disconnected during tools/call (the server ended the session; "
            "reconnecting), "
        )
        assert h.control.items == []
        assert [type(m) for m in h.lost.items] == [ConnectionLost]
        assert h.lost.items[0].error is h.ended[0]


async def test_stderr_lines_go_to_the_dispatcher_best_effort() -> None:
    async with trio.open_nursery() as nursery:
        h = await start(nursery)
        h.put(StderrLine(text="one"))
        await settle()
        h.dispatch.refuse = trio.WouldBlock
        h.put(StderrLine(text="dropped"))
        await settle()
        h.dispatch.refuse = None
        h.put(StderrLine(text="two"))
        await settle()
        assert h.dispatch.items == [StderrLine(text="one"), StderrLine(text="two")]
        assert h.ended == []
        nursery.cancel_scope.cancel()


# --------------------------------------------------------------------------- the end


async def test_connection_ended_fails_every_waiter_in_one_step(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        h = await start(nursery, generation=7)
        waiters = {i: h.call(i, "tools/call", deadline=100.0) for i in (1, 2, 3, 4)}
        waiters[5] = h.call(5, "tools/list", progress_token=5)
        await trio.sleep(2)
        done_when_told: list[bool] = []
        h.lost.on_item = lambda _: done_when_told.extend(w.done for w in waiters.values())
        why = TransportClosed("the server exited with code 1")
        h.put(ConnectionEnded(error=why, unsent=frozenset({2, 4, 404})))
        await settle()

        assert h.ended == [why]
        assert h.ended_at == [2.0]
        assert done_when_told == [True] * 5  # every call had failed when the loss was told
        assert h.lost.items == [ConnectionLost(generation=7, error=why)]
        for i in (1, 2, 3, 4, 5):
            failure = h.failure(i)
            assert isinstance(failure, ServerDisconnected)
            assert failure.sent is (i not in (2, 4))
            assert failure.server == "s"
            assert failure.__cause__ is why
            assert h.finished[i].at == 2.0
        assert "disconnected during tools/call (the server exited with code 1), after" in str(
            h.failure(1)
        )
        assert "before the request was sent: it is safe to retry" in str(h.failure(2))
        assert h.stats().outstanding == 0
        assert h.stats().failed_total == 5
        # the mailbox is closed: a sender learns it at once
        with pytest.raises(trio.BrokenResourceError):
            h.mailbox.send_nowait(answer(1), 10)


async def test_a_connection_ended_by_another_error_names_it() -> None:
    async with trio.open_nursery() as nursery:
        h = await start(nursery)
        h.call(1, "tools/call")
        why = FrameTooLarge("a line over 10 bytes", limit=10)
        h.put(ConnectionEnded(error=why))
        await settle()
        assert h.ended == [why]
        failure = h.failure(1)
        assert isinstance(failure, ServerDisconnected) and failure.sent
        assert "(FrameTooLarge: a line over 10 bytes)" in str(failure)


async def test_items_behind_the_end_are_not_handled() -> None:
    async with trio.open_nursery() as nursery:
        h = await start(nursery)
        h.call(1)
        h.put(ConnectionEnded(error=TransportClosed("gone")))
        h.put(answer(1))  # cannot come after the end from a transport; dropped anyway
        await settle()
        assert isinstance(h.failure(1), ServerDisconnected)


async def test_the_end_of_the_mailbox_ends_the_connection_the_same_way(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        h = await start(nursery, generation=2)
        h.call(1, "tools/call")
        h.call(2, "ping")
        await trio.sleep(3)
        h.mailbox.close()
        await settle()
        assert len(h.ended) == 1
        why = h.ended[0]
        assert type(why) is TransportClosed
        assert str(why) == "the connection to server 's' ended"
        assert h.lost.items == [ConnectionLost(generation=2, error=why)]
        for i in (1, 2):
            failure = h.failure(i)
            assert isinstance(failure, ServerDisconnected) and failure.sent
            assert failure.__cause__ is why
            assert h.finished[i].at == 3.0


async def test_a_full_loss_sink_does_not_stop_the_end() -> None:
    async with trio.open_nursery() as nursery:
        h = await start(nursery)
        h.lost.refuse = trio.WouldBlock
        h.call(1)
        h.put(ConnectionEnded(error=TransportClosed("gone")))
        await settle()
        assert isinstance(h.failure(1), ServerDisconnected)
        assert len(h.ended) == 1


async def test_a_table_torn_down_fails_the_expects_it_never_took(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as outer:
        async with trio.open_nursery() as nursery:
            h = await start(nursery)
            h.nursery = outer
            h.call(1, deadline=50.0, defer=True)
            await settle()
            h.call(2, deadline=60.0, defer=True)  # waits in the mailbox, not taken yet
            await settle()
            assert len(h.mailbox) == 1
            nursery.cancel_scope.cancel()
        await settle()
        for i in (1, 2):
            failure = h.failure(i)
            assert isinstance(failure, ServerDisconnected)
            assert h.finished[i].at == 0.0
        assert h.stats().failed_total == 2


async def test_cancelling_the_table_fails_every_waiter_without_telling_the_loss(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as outer:
        waiters: list[Waiter] = []
        async with trio.open_nursery() as nursery:
            h = await start(nursery)
            # the callers wait outside the table's nursery (as a session's callers do)
            h.nursery = outer
            waiters = [h.call(i) for i in (1, 2, 3)]
            await trio.sleep(4)
            nursery.cancel_scope.cancel()
        await settle()
        assert h.ended == []  # run() raised Cancelled, not an error
        assert h.lost.items == []
        for i in (1, 2, 3):
            failure = h.failure(i)
            assert isinstance(failure, ServerDisconnected)
            assert failure.sent is True
            assert "the session with server 's' was closed" in str(failure)
            assert h.finished[i].at == 4.0
        assert all(w.done for w in waiters)
        with pytest.raises(trio.BrokenResourceError):
            h.mailbox.send_nowait(answer(1), 10)


# --------------------------------------------------------------------------- bad frames


async def test_a_bad_frame_fails_only_the_calls_whose_ids_can_be_read(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with trio.open_nursery() as nursery:
        h = await start(nursery)
        for i in range(1, 8):
            h.call(i)
        with caplog.at_level(logging.WARNING, logger="trio_mcp.server.s"):
            # a batch before the handshake allowed batches
            h.put(b'[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","id":2,"result":{}}]')
            h.put(b'{"jsonrpc":"2.0","id":3,"result":{}}{"jsonrp')  # glued
            h.put(b'{"jsonrpc":"2.0","id":4,"res')  # truncated
            h.put(b'{"jsonrpc":"2.0","method":"x","params":{"id":5}')  # no answer's id
            h.put(b"\xff\xfe garbage")
            h.put(b'{"jsonrpc":"2.0","id":99,"res')  # an id nobody waits for
            await settle()
        for i in (1, 2, 3, 4):
            assert isinstance(h.failure(i), InvalidMessage)
        assert not any(i in h.finished for i in (5, 6, 7))
        assert "invalid message from the server" in caplog.text
        h.put(answer(5))  # the connection goes on
        await settle()
        assert h.value(5) == {}
        assert h.ended == [] and h.lost.items == []
        assert h.stats().outstanding == 2
        nursery.cancel_scope.cancel()


async def test_allow_batches_makes_batches_parse() -> None:
    async with trio.open_nursery() as nursery:
        h = await start(nursery)
        h.call(1)
        h.call(2)
        h.put(AllowBatches())
        h.put(
            frame(
                [
                    {"jsonrpc": "2.0", "id": 1, "result": {"n": 1}},
                    {"jsonrpc": "2.0", "id": 2, "error": {"code": -32601, "message": "no"}},
                    {"jsonrpc": "2.0", "method": "notifications/message", "params": {}},
                ]
            )
        )
        await settle()
        assert h.value(1) == {"n": 1}
        assert isinstance(h.failure(2), MethodNotFound)
        assert h.dispatch.items == [Notification(method="notifications/message", params={})]
        nursery.cancel_scope.cancel()


# --------------------------------------------------------------------------- the dispatcher


async def test_server_requests_and_notifications_go_to_dispatch() -> None:
    async with trio.open_nursery() as nursery:
        h = await start(nursery)
        h.put(frame({"jsonrpc": "2.0", "id": "srv-1", "method": "ping"}))
        h.put(
            frame(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/tools/list_changed",
                }
            )
        )
        h.put(
            frame(
                {
                    "jsonrpc": "2.0",
                    "id": 7,
                    "method": "roots/list",
                    "params": {"_meta": {}},
                }
            )
        )
        await settle()
        assert h.dispatch.items == [
            Request(id="srv-1", method="ping"),
            Notification(method="notifications/tools/list_changed"),
            Request(id=7, method="roots/list", params={"_meta": {}}),
        ]
        # a server request with the id of one of our calls is no answer to it
        h.call(8)
        h.put(frame({"jsonrpc": "2.0", "id": 8, "method": "ping"}))
        await settle()
        assert 8 not in h.finished
        assert h.dispatch.items[-1] == Request(id=8, method="ping")
        nursery.cancel_scope.cancel()


async def test_a_full_dispatcher_drops_with_a_warning_and_the_table_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with trio.open_nursery() as nursery:
        h = await start(nursery)
        h.dispatch.refuse = trio.WouldBlock
        h.call(1)
        with caplog.at_level(logging.WARNING, logger="trio_mcp.server.s"):
            h.put(frame({"jsonrpc": "2.0", "method": "notifications/message", "params": {}}))
            h.put(answer(1))
            await settle()
        assert "the dispatcher is behind: notifications/message from the server dropped" in (
            caplog.text
        )
        assert h.value(1) == {}
        nursery.cancel_scope.cancel()


# --------------------------------------------------------------------------- floods


async def test_a_flood_is_handled_in_bounded_batches_and_others_get_to_run() -> None:
    size = 100
    budget = 1000
    count = 2000
    notice = frame({"jsonrpc": "2.0", "method": "notifications/x", "params": {"p": "x" * 38}})
    assert len(notice) == size
    async with trio.open_nursery() as nursery:
        h = await start(nursery, max_bytes=budget)
        per_wakeup: dict[int, int] = {}
        h.dispatch.on_item = lambda _: per_wakeup.__setitem__(
            h.stats().wakeups_total, per_wakeup.get(h.stats().wakeups_total, 0) + 1
        )
        produced = trio.Event()
        ticks: list[int] = []

        async def producer() -> None:
            for _ in range(count):
                await h.mailbox.send(notice, size)  # the mailbox stays full
            produced.set()

        async def other_task() -> None:
            while not produced.is_set():
                ticks.append(h.stats().frames_total)
                await trio.lowlevel.checkpoint()

        nursery.start_soon(producer)
        nursery.start_soon(other_task)
        await produced.wait()
        await settle()
        assert h.stats().frames_total == count
        assert len(h.dispatch.items) == count
        # every wake-up took at most what the mailbox could hold
        assert max(per_wakeup.values()) <= budget // size
        assert h.stats().wakeups_total >= count // (budget // size)
        # and another task ran again and again while the flood went on
        assert len([t for t in ticks if 0 < t < count]) > 10
        nursery.cancel_scope.cancel()


async def test_a_full_mailbox_is_taken_at_most_drain_limit_items_per_wake_up() -> None:
    # The mailbox holds far more than DRAIN_LIMIT items: the table takes them in bounded
    # steps, and another task runs between two steps.
    count = DRAIN_LIMIT * 4 + 10
    notice = frame({"jsonrpc": "2.0", "method": "notifications/x"})
    async with trio.open_nursery() as nursery:
        h = await start(nursery, max_bytes=count * len(notice) + 1024)
        per_wakeup: dict[int, int] = {}
        h.dispatch.on_item = lambda _: per_wakeup.__setitem__(
            h.stats().wakeups_total, per_wakeup.get(h.stats().wakeups_total, 0) + 1
        )
        seen: list[int] = []

        async def other_task() -> None:
            while h.stats().frames_total < count:
                seen.append(h.stats().frames_total)
                await trio.lowlevel.checkpoint()

        for _ in range(count):
            h.mailbox.defer_nowait(notice, len(notice))  # all there before the table wakes
        nursery.start_soon(other_task)
        h.put(AllowBatches())  # the wake-up
        await settle()
        assert h.stats().frames_total == count
        assert sorted(per_wakeup.values(), reverse=True)[:4] == [DRAIN_LIMIT] * 4
        # the other task ran while the table was part-way, between its wake-ups (counted as
        # looks, not distinct values: trio orders each batch of runnable tasks at random, so
        # the other task may see the same step twice, before one wake-up and after the next)
        assert len([n for n in seen if 0 < n < count]) >= 3
        nursery.cancel_scope.cancel()


async def test_answers_in_a_flood_all_arrive() -> None:
    async with trio.open_nursery() as nursery:
        h = await start(nursery, max_bytes=512)
        for i in range(500):
            h.call(i)
            await settle()

        async def producer() -> None:
            for i in reversed(range(500)):
                data = answer(i, {"i": i})
                await h.mailbox.send(data, len(data))

        nursery.start_soon(producer)
        await settle()
        assert all(h.value(i) == {"i": i} for i in range(500))
        assert h.stats().outstanding == 0
        nursery.cancel_scope.cancel()
