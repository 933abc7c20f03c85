from __future__ import annotations

import outcome
import pytest
import trio
import trio.testing

from trio_mcp.actors.runtime._pending import PendingCalls
from trio_mcp.protocol import RpcError, ServerDisconnected


async def test_resolve_wakes_the_waiter_once() -> None:
    table = PendingCalls("s")
    waiter = table.add(1, "tools/call")
    assert table.resolve(1, outcome.Value({"ok": True}))
    assert not table.resolve(1, outcome.Value({"late": True}))
    assert await waiter.wait() == {"ok": True}
    assert table.statistics().outstanding == 0


async def test_fail_all_fails_every_waiter_at_once_and_says_whether_it_was_sent() -> None:
    table = PendingCalls("s")
    sent, unsent = table.add(1, "tools/call"), table.add(2, "tools/list")
    sent.sent = True
    results: dict[int, BaseException] = {}

    async def wait(n: int, waiter: object) -> None:
        with pytest.raises(ServerDisconnected) as info:
            await waiter.wait()  # type: ignore[attr-defined]
        results[n] = info.value

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait, 1, sent)
        nursery.start_soon(wait, 2, unsent)
        await trio.testing.wait_all_tasks_blocked()
        assert table.fail_all("EOF") == 2
    first, second = results[1], results[2]
    assert isinstance(first, ServerDisconnected) and first.sent
    assert "outcome is unknown" in str(first)
    assert isinstance(second, ServerDisconnected) and not second.sent
    assert "safe to retry" in str(second)
    assert table.closed


def test_a_closed_table_refuses_new_waiters_as_not_sent() -> None:
    table = PendingCalls("s")
    table.fail_all("gone")
    with pytest.raises(ServerDisconnected, match="before tools/call was sent: gone") as info:
        table.add(3, "tools/call")
    assert info.value.sent is False


async def test_errors_are_delivered_to_the_caller() -> None:
    table = PendingCalls("s")
    waiter = table.add("a", "m")
    table.resolve("a", outcome.Error(RpcError.from_error(-32602, "bad", method="m")))
    with pytest.raises(RpcError, match="bad"):
        await waiter.wait()


def test_discard_forgets_a_waiter() -> None:
    table = PendingCalls("s")
    table.add(1, "m")
    assert table.discard(1) is not None
    assert not table.resolve(1, outcome.Value({}))
    assert len(table) == 0
