"""The Dispatcher alone: server requests answered from the host's callbacks, each in a handler
task of its own, at most MAX_INBOUND_REQUESTS at once (more are refused at once, without a task
of their own), handlers cancelled by the server's ``notifications/cancelled``, and the JSON-RPC
error codes of the answers.

The dispatcher is driven through its mailbox, as the table drives it; the transport is a fake
outbox that records the frames it takes, or is full (``send_nowait`` declines, ``send`` waits
for the gate).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from trio_mcp.actors.runtime._callbacks import HostCallbacks
from trio_mcp.actors.runtime._dispatcher import MAX_INBOUND_REQUESTS, Dispatcher, ModernSession
from trio_mcp.protocol._jsonrpc import Notification, Request, RequestId
from trio_mcp.protocol._types import Root
from trio_mcp.transports._base import TransportInfo

# --------------------------------------------------------------------------- the harness


@attrs.define(eq=False)
class Outbox:
    """The transport as the dispatcher reaches it. ``full``: send_nowait declines and send
    waits for the gate (``waiting`` counts the tasks waiting there)."""

    frames: list[dict[str, Any]] = attrs.Factory(list)
    full: bool = False
    waiting: int = 0
    gate: trio.Event = attrs.Factory(trio.Event)

    @property
    def info(self) -> TransportInfo:
        raise NotImplementedError

    def send_nowait(self, frame: bytes, request_id: RequestId | None = None) -> None:
        if self.full:
            raise trio.WouldBlock
        self.frames.append(json.loads(frame))

    async def send(self, frame: bytes, request_id: RequestId | None = None) -> None:
        if self.full:
            self.waiting += 1
            try:
                await self.gate.wait()
            finally:
                self.waiting -= 1
        else:
            await trio.lowlevel.checkpoint()
        self.frames.append(json.loads(frame))

    async def receive(self) -> bytes:
        raise NotImplementedError

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


@attrs.define
class Recorder:
    """The event bus and the re-lister, as the dispatcher reaches them."""

    items: list[Any] = attrs.Factory(list)

    def publish(self, event: Any, /) -> None:
        self.items.append(event)

    def send_nowait(self, value: None, /) -> None:
        self.items.append(value)


async def start(
    nursery: trio.Nursery, outbox: Outbox, callbacks: HostCallbacks | None = None
) -> Dispatcher:
    dispatcher = Dispatcher(
        server="s",
        callbacks=callbacks or HostCallbacks(),
        transport=outbox,
        events=Recorder(),
        relist=Recorder(),
    )
    await nursery.start(dispatcher.run)
    return dispatcher


def tasks_under(task: trio.lowlevel.Task) -> int:
    """How many tasks there are in ``task``'s tree (itself included)."""
    return 1 + sum(
        tasks_under(child) for nursery in task.child_nurseries for child in nursery.child_tasks
    )


def errors(frames: Sequence[dict[str, Any]]) -> list[tuple[RequestId, int]]:
    return [(f["id"], f["error"]["code"]) for f in frames if "error" in f]


def results(frames: Sequence[dict[str, Any]]) -> dict[RequestId, Any]:
    return {f["id"]: f["result"] for f in frames if "result" in f}


def cancelled(request_id: RequestId) -> Notification:
    return Notification(method="notifications/cancelled", params={"requestId": request_id})


# --------------------------------------------------------------------------- answers


async def test_server_requests_are_answered_from_the_callbacks() -> None:
    async def roots(server: str) -> list[Root]:
        await trio.lowlevel.checkpoint()
        return [Root(uri="file:///work", name=server)]

    outbox = Outbox()
    async with trio.open_nursery() as nursery:
        dispatcher = await start(nursery, outbox, HostCallbacks(list_roots=roots))
        await dispatcher.inbox.send(Request(id=1, method="ping"))
        await dispatcher.inbox.send(Request(id="r", method="roots/list"))
        await dispatcher.inbox.send(Request(id=3, method="sampling/createMessage"))
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    assert results(outbox.frames) == {1: {}, "r": {"roots": [{"uri": "file:///work", "name": "s"}]}}
    assert errors(outbox.frames) == [(3, -32601)]  # no sampling callback: not declared


async def test_a_modern_session_answers_no_server_request(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def roots(server: str) -> list[Root]:
        raise AssertionError("not asked in a 2026-07-28 session")

    outbox = Outbox()
    async with trio.open_nursery() as nursery:
        dispatcher = await start(nursery, outbox, HostCallbacks(list_roots=roots))
        await dispatcher.inbox.send(Request(id=1, method="ping"))
        await trio.testing.wait_all_tasks_blocked()
        await dispatcher.inbox.send(ModernSession())
        await dispatcher.inbox.send(Request(id=2, method="roots/list"))
        await dispatcher.inbox.send(Request(id=3, method="ping"))
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    assert results(outbox.frames) == {1: {}}  # before the session said it is modern
    assert errors(outbox.frames) == []
    assert "sent a roots/list request in a 2026-07-28 session" in caplog.text


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("sampling/createMessage", {"messages": "not a list", "maxTokens": 10}),
        ("sampling/createMessage", {"messages": []}),  # maxTokens is required
        ("elicitation/create", {"message": 5, "requestedSchema": {"type": "object"}}),
    ],
)
async def test_invalid_params_of_a_server_request_are_answered_32602(
    method: str, params: dict[str, Any]
) -> None:
    called: list[str] = []

    async def sample(server: str, params: Any) -> dict[str, Any]:
        called.append("sampling")
        return {}

    async def elicit(server: str, params: Any) -> dict[str, Any]:
        called.append("elicitation")
        return {}

    outbox = Outbox()
    callbacks = HostCallbacks(sampling=sample, elicitation=elicit)
    async with trio.open_nursery() as nursery:
        dispatcher = await start(nursery, outbox, callbacks)
        await dispatcher.inbox.send(Request(id=1, method=method, params=params))
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    assert errors(outbox.frames) == [(1, -32602)]  # invalid params, not an internal error
    (answer,) = outbox.frames
    assert answer["error"]["message"].startswith(f"invalid {method} params: ")
    assert "$.params" in answer["error"]["message"]
    assert called == []


# --------------------------------------------------------------------------- too many at once


async def test_requests_past_the_limit_are_answered_with_an_error_at_once() -> None:
    release = trio.Event()

    async def roots(server: str) -> list[Root]:
        await release.wait()
        return []

    outbox = Outbox()
    async with trio.open_nursery() as nursery:
        dispatcher = await start(nursery, outbox, HostCallbacks(list_roots=roots))
        for i in range(MAX_INBOUND_REQUESTS):
            await dispatcher.inbox.send(Request(id=i, method="roots/list"))
        await trio.testing.wait_all_tasks_blocked()
        assert outbox.frames == []  # all in their handlers
        for i in range(5):
            await dispatcher.inbox.send(Request(id=f"p{i}", method="ping"))
        await trio.testing.wait_all_tasks_blocked()
        assert errors(outbox.frames) == [(f"p{i}", -32603) for i in range(5)]
        message = outbox.frames[0]["error"]["message"]
        assert "too many concurrent requests from the server" in message
        release.set()
        await trio.testing.wait_all_tasks_blocked()
        assert results(outbox.frames) == {i: {"roots": []} for i in range(MAX_INBOUND_REQUESTS)}
        await dispatcher.inbox.send(Request(id="again", method="ping"))  # room again
        await trio.testing.wait_all_tasks_blocked()
        assert results(outbox.frames)["again"] == {}
        nursery.cancel_scope.cancel()


async def test_a_flood_of_requests_with_a_full_outbox_holds_no_task_per_request(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Each refusal once waited in a task of its own for room in the outbox: 5,000 pings left
    # 5,000 tasks. Now it is sent if the outbox takes it at once, and dropped otherwise.
    outbox = Outbox(full=True)
    async with trio.open_nursery() as nursery:
        dispatcher = await start(nursery, outbox)
        for i in range(MAX_INBOUND_REQUESTS):
            await dispatcher.inbox.send(Request(id=i, method="ping"))
        await trio.testing.wait_all_tasks_blocked()
        assert outbox.waiting == MAX_INBOUND_REQUESTS  # the handlers wait for room
        root = trio.lowlevel.current_root_task()
        assert root is not None
        before = tasks_under(root)
        with caplog.at_level(logging.WARNING, logger="trio_mcp.server.s"):
            for i in range(5000):
                await dispatcher.inbox.send(Request(id=f"p{i}", method="ping"))
            await trio.testing.wait_all_tasks_blocked()
        assert tasks_under(root) == before
        assert outbox.waiting == MAX_INBOUND_REQUESTS
        assert "ping 'p4999' refused, and the refusal was dropped (the outbox is full)" in (
            caplog.text
        )
        outbox.full = False
        outbox.gate.set()
        await trio.testing.wait_all_tasks_blocked()
        assert results(outbox.frames) == {i: {} for i in range(MAX_INBOUND_REQUESTS)}
        assert errors(outbox.frames) == []
        nursery.cancel_scope.cancel()


# --------------------------------------------------------------------------- cancelled


async def test_the_servers_cancellation_cancels_the_handler_and_nothing_is_answered() -> None:
    started: list[RequestId] = []
    ended: list[str] = []

    async def roots(server: str) -> list[Root]:
        started.append(len(started))
        if len(started) == 1:
            try:
                await trio.sleep_forever()
            finally:
                ended.append("cancelled")
        return []

    outbox = Outbox()
    async with trio.open_nursery() as nursery:
        dispatcher = await start(nursery, outbox, HostCallbacks(list_roots=roots))
        await dispatcher.inbox.send(Request(id=9, method="roots/list"))
        await trio.testing.wait_all_tasks_blocked()
        await dispatcher.inbox.send(cancelled(404))  # an unknown id: nothing happens
        await trio.testing.wait_all_tasks_blocked()
        assert ended == []
        await dispatcher.inbox.send(cancelled(9))
        await trio.testing.wait_all_tasks_blocked()
        assert ended == ["cancelled"]
        assert outbox.frames == []  # a cancelled request is never answered
        # its slot is free: the same id is a new request now, and answered
        await dispatcher.inbox.send(Request(id=9, method="roots/list"))
        await trio.testing.wait_all_tasks_blocked()
        assert outbox.frames == [{"jsonrpc": "2.0", "id": 9, "result": {"roots": []}}]
        nursery.cancel_scope.cancel()
