"""The pending-call table and ``subscriptions/listen`` (2026-07-28): the table demultiplexes by
the ``_meta`` subscription id, hands a listen's notifications and its end to its
:class:`Subscription`, and never counts a listen as a call.

The table is driven through its mailbox with the harness of ``test_pending``.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from tests.actors.test_pending import answer, error, frame, settle, start
from trio_mcp.actors.runtime._pending import (
    SUBSCRIPTION_BACKLOG,
    Forget,
    Listen,
    ListenEnded,
    Subscription,
)
from trio_mcp.protocol import MethodNotFound, ServerDisconnected
from trio_mcp.protocol._errors import TransportClosed
from trio_mcp.protocol._jsonrpc import Notification
from trio_mcp.transports._base import ConnectionEnded, RequestFailed

SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"


def notice(method: str, subscription: Any = None, **params: Any) -> bytes:
    if subscription is not None:
        params["_meta"] = {SUBSCRIPTION_ID: subscription}
    return frame({"jsonrpc": "2.0", "method": method, "params": params})


def taken(subscription: Subscription) -> list[Notification | ListenEnded]:
    """What the subscription holds now, without waiting."""
    items: list[Notification | ListenEnded] = []
    while subscription._queue:
        items.append(subscription._queue.popleft())
    if subscription._ended is not None:
        items.append(subscription._ended)
    return items


async def test_a_listen_gets_what_names_it_and_is_not_a_call() -> None:
    async with trio.open_nursery() as nursery:
        h = await start(nursery)
        listen = Subscription(7)
        h.put(Listen(request_id=7, subscription=listen))
        h.call(8)
        h.put(notice("notifications/subscriptions/acknowledged", 7, notifications={}))
        h.put(notice("notifications/tools/list_changed", 7))
        h.put(notice("notifications/tools/list_changed", 99))  # no such listen: dropped
        h.put(notice("notifications/tools/list_changed", "7"))  # not its id: dropped
        h.put(notice("notifications/tools/list_changed", True))  # not an id: dropped
        h.put(notice("notifications/tools/list_changed"))  # no id: the dispatcher's
        await settle()
        assert [getattr(item, "method", None) for item in taken(listen)] == [
            "notifications/subscriptions/acknowledged",
            "notifications/tools/list_changed",
        ]
        assert [item.method for item in h.dispatch.items] == ["notifications/tools/list_changed"]
        stats = h.stats()
        assert (stats.outstanding, stats.subscriptions, stats.deadline_entries) == (1, 1, 0)
        h.put(answer(8))
        await settle()
        stats = h.stats()
        assert (stats.outstanding, stats.resolved_total, stats.subscriptions) == (0, 1, 1)
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize(
    ("end", "expected"),
    [
        (answer(7, {"resultType": "complete"}), "result"),
        (error(7, -32601, "Method not found"), "error"),
        (
            frame(
                {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}
            ),
            "cancelled",
        ),
        (
            RequestFailed(request_id=7, error=ServerDisconnected("the stream broke"), sent=True),
            "lost",
        ),
    ],
)
async def test_the_listen_ends_by_its_answer_an_error_a_cancel_or_a_lost_stream(
    end: Any, expected: str
) -> None:
    async with trio.open_nursery() as nursery:
        h = await start(nursery)
        listen = Subscription(7)
        h.put(Listen(request_id=7, subscription=listen))
        h.put(notice("notifications/tools/list_changed", 7))
        h.put(end)
        h.put(notice("notifications/tools/list_changed", 7))  # after its end: dropped
        await settle()
        first, ended = taken(listen)
        assert isinstance(first, Notification)
        assert isinstance(ended, ListenEnded)
        match expected:
            case "result":
                assert ended.result == {"resultType": "complete"}
            case "error":
                assert isinstance(ended.error, MethodNotFound)
            case "cancelled":
                assert ended.cancelled
            case "lost":
                assert isinstance(ended.error, ServerDisconnected)
        assert h.dispatch.items == []  # the cancel was the listen's, not the dispatcher's
        assert (h.stats().subscriptions, h.stats().resolved_total, h.stats().failed_total) == (
            0,
            0,
            0,
        )
        nursery.cancel_scope.cancel()


async def test_a_forgotten_listen_hears_nothing_more_and_its_late_answer_is_ignored() -> None:
    async with trio.open_nursery() as nursery:
        h = await start(nursery)
        listen = Subscription(7)
        h.put(Listen(request_id=7, subscription=listen))
        h.put(Forget(request_id=7))
        h.put(notice("notifications/tools/list_changed", 7))
        h.put(answer(7))
        await settle()
        assert taken(listen) == []
        assert h.dispatch.items == []
        assert h.stats().subscriptions == 0
        assert h.ended == []  # the connection goes on
        nursery.cancel_scope.cancel()


async def test_the_end_of_the_connection_ends_every_listen() -> None:
    async with trio.open_nursery() as nursery:
        h = await start(nursery)
        listen, late = Subscription(7), Subscription(9)
        h.put(Listen(request_id=7, subscription=listen))
        await settle()
        h.mailbox.defer_nowait(Listen(request_id=9, subscription=late))  # never taken
        h.put(ConnectionEnded(error=TransportClosed("gone"), unsent=frozenset()))
        await settle()
        for subscription in (listen, late):
            (ended,) = taken(subscription)
            assert isinstance(ended, ListenEnded)
            assert isinstance(ended.error, TransportClosed)
        assert len(h.ended) == 1


async def test_a_legacy_table_passes_tagged_notifications_on() -> None:
    async with trio.open_nursery() as nursery:
        h = await start(nursery)
        h.put(notice("notifications/tools/list_changed", 7))
        h.put(
            frame(
                {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}
            )
        )
        await settle()
        assert [item.method for item in h.dispatch.items] == [
            "notifications/tools/list_changed",
            "notifications/cancelled",
        ]
        nursery.cancel_scope.cancel()


async def test_a_subscription_keeps_the_newest_notifications_and_its_end() -> None:
    listen = Subscription(1)
    for n in range(SUBSCRIPTION_BACKLOG + 3):
        listen.push(Notification(method="notifications/resources/updated", params={"n": n}))
    listen.end(ListenEnded(cancelled=True))
    listen.end(ListenEnded(result={}))  # the first end wins
    listen.push(Notification(method="late"))  # after the end: ignored
    assert listen.dropped == 3
    got = []
    for _ in range(SUBSCRIPTION_BACKLOG + 1):
        got.append(await listen.next())
    numbers = [(item.params or {})["n"] for item in got[:-1] if isinstance(item, Notification)]
    assert numbers == list(range(3, SUBSCRIPTION_BACKLOG + 3))
    assert got[-1] == ListenEnded(cancelled=True)
    assert await listen.next() == ListenEnded(cancelled=True)


async def test_next_waits_for_the_table_and_is_a_checkpoint() -> None:
    listen = Subscription(1)
    got: list[Any] = []
    async with trio.open_nursery() as nursery:

        async def wait() -> None:
            got.append(await listen.next())

        nursery.start_soon(wait)
        await settle()
        assert got == []
        listen.push(Notification(method="m"))
    assert got == [Notification(method="m")]
    listen.end(ListenEnded())
    with trio.testing.assert_checkpoints():
        await listen.next()
