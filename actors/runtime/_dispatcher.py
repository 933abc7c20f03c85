"""Dispatcher: the actor that answers server requests and acts on server notifications, for one
connection generation.

It is a trio task in the session's nursery with a bounded mailbox, fed by the session's
:class:`~trio_mcp.actors.runtime._pending.PendingCalls` table with what is not an answer to one
of our calls: server requests (``roots/list``, ``sampling/createMessage``, ``elicitation/create``,
``ping``), notifications (log messages, list changes, resource updates, cancellations) and the
server's stderr lines.

Each server request is answered from the host's callbacks in a handler task of its own (a slow
callback never holds up anything else; at most :data:`MAX_INBOUND_REQUESTS` at once); the handler
sends the answer through the transport and tells the dispatcher it is done (:class:`Answered`),
so only the dispatcher's task changes its table of requests in flight. A request past the limit
is refused with an error by the dispatcher itself, if the transport's outbox takes the answer
at once, and left unanswered otherwise: a server flooding us with requests costs neither a task
nor a waiting frame per request. ``notifications/cancelled`` from the server cancels the handler
of that request (and nothing is answered). In a 2026-07-28 session (the session says so with
:class:`ModernSession`) servers send no requests: one that does is logged and left unanswered
(clients send no responses in that revision). ``notifications/*/list_changed`` goes to the
session's re-lister, log messages and stderr lines to the log and the event bus. A list change
and ``notifications/resources/updated`` first drop what they make stale from the server's result
cache (:meth:`~trio_mcp.actors.runtime._cache.CacheLease.on_notification`, the one entry point
for every path a notification takes), in the dispatcher's own task, before anything else sees
it.

When the host allows tasks (2025-11-25), the dispatcher also owns the connection's table of the
tasks the client runs for the server (:class:`~trio_mcp.actors.runtime._taskserve.ClientTasks`):
a task-augmented ``sampling/createMessage`` or ``elicitation/create`` is answered with a task at
once and its callback runs in a handler task that reports its end through the mailbox
(:class:`ClientTaskEnded`); ``tasks/get``, ``tasks/list`` and ``tasks/cancel`` are decided here
and only sent by a handler task, ``tasks/result`` waits in one; tasks whose ``ttl`` passed are
dropped between two messages.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
from collections.abc import Mapping
from typing import Any, Final, Protocol, TypeAlias

import attrs
import trio

from ...protocol._errors import InvalidMessage, McpError, RpcError, TransportError
from ...protocol._jsonrpc import (
    ErrorObject,
    ErrorResponse,
    Notification,
    Request,
    RequestId,
    Response,
    serialize,
)
from ...protocol._methods import decode_notification
from ...transports._base import StderrLine, Transport
from ._cache import CacheLease
from ._callbacks import HostCallbacks
from ._events import ListChanged, ResourceUpdated, ServerLogged, TaskStatusChanged
from ._inputs import answer_input
from ._pending import DRAIN_LIMIT
from ._taskserve import (
    TASK_METHODS,
    ClientTaskEnded,
    ClientTasks,
    TaskReply,
    run_client_task,
    status_notification,
)

__all__ = [
    "MAILBOX_SIZE",
    "MAX_INBOUND_REQUESTS",
    "Answered",
    "DispatchItem",
    "Dispatcher",
    "ModernSession",
]

#: Items waiting for the dispatcher; past this the table drops notifications (and says so).
MAILBOX_SIZE: Final = 256
#: Server requests handled at once; more are refused with an error at once (best effort).
MAX_INBOUND_REQUESTS: Final = 32

_LOG_LEVELS: Final = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}
_LIST_CHANGED: Final = {
    "notifications/tools/list_changed": "tools",
    "notifications/resources/list_changed": "resources",
    "notifications/prompts/list_changed": "prompts",
}


@attrs.frozen(kw_only=True)
class Answered:
    """A handler is done with the server's request ``request_id`` (answered or cancelled)."""

    request_id: RequestId


@attrs.frozen(kw_only=True)
class ModernSession:
    """The session speaks 2026-07-28, where servers send no requests: refuse to answer any."""


DispatchItem: TypeAlias = (
    Request | Notification | StderrLine | Answered | ModernSession | ClientTaskEnded
)


class EventPublisher(Protocol):
    def publish(self, event: Any, /) -> None: ...


class RelistSink(Protocol):
    """The session's re-lister: told (``None``) that the server's tools changed."""

    def send_nowait(self, value: None, /) -> None: ...


@attrs.define(eq=False)
class Dispatcher:
    """Build it, then ``nursery.start(dispatcher.run)``; the table reaches it through
    :attr:`inbox`."""

    server: str
    callbacks: HostCallbacks
    transport: Transport
    events: EventPublisher
    relist: RelistSink
    #: The session's lease of the server's result cache (None: results are not cached).
    cache: CacheLease | None = None
    #: The tasks the client runs for the server (None: the client runs none).
    tasks: ClientTasks | None = None
    inbox: trio.MemorySendChannel[DispatchItem] = attrs.field(init=False)
    _mailbox: trio.MemoryReceiveChannel[DispatchItem] = attrs.field(init=False)
    _inbound: dict[RequestId, trio.CancelScope] = attrs.field(factory=dict, init=False)
    _handlers: trio.Nursery | None = attrs.field(default=None, init=False)
    #: Server requests are answered (False once the session speaks 2026-07-28).
    _answers_requests: bool = attrs.field(default=True, init=False)
    _log: logging.Logger = attrs.field(init=False)
    _stderr_log: logging.Logger = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.inbox, self._mailbox = trio.open_memory_channel[DispatchItem](MAILBOX_SIZE)
        self._log = logging.getLogger(f"trio_mcp.server.{self.server}")
        self._stderr_log = logging.getLogger(f"trio_mcp.server.{self.server}.stderr")

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve the mailbox until cancelled (with the session)."""
        async with trio.open_nursery() as handlers:
            self._handlers = handlers
            task_status.started()
            mailbox = self._mailbox
            while True:
                self._handle(await self._receive())
                # what is ready now, at most DRAIN_LIMIT items as the table takes: the rest
                # after a schedule point (the next receive), so that a flood of notifications
                # holds the event loop briefly
                for _ in range(DRAIN_LIMIT - 1):
                    try:
                        item = mailbox.receive_nowait()
                    except trio.WouldBlock:
                        break
                    self._handle(item)

    async def _receive(self) -> DispatchItem:
        """The next item, dropping the client's tasks whose ``ttl`` passes meanwhile."""
        tasks = self.tasks
        while True:
            with trio.move_on_at(math.inf if tasks is None else tasks.next_expiry()):
                return await self._mailbox.receive()
            assert tasks is not None
            tasks.expire(trio.current_time())

    def _handle(self, item: DispatchItem) -> None:
        match item:
            case Request():
                self._request(item)
            case Notification():
                self._notification(item)
            case StderrLine(text=text):
                # A line of the server's own log: DEBUG here, and an event (never an error
                # signal in itself).
                self._stderr_log.debug("%s", text)
                self.events.publish(
                    ServerLogged(server=self.server, level="debug", data=text, stderr=True)
                )
            case Answered(request_id=request_id):
                self._inbound.pop(request_id, None)
            case ModernSession():
                self._answers_requests = False
            case ClientTaskEnded():
                if self.tasks is not None:
                    changed = self.tasks.ended(item)
                    if changed is not None:
                        self._notify(status_notification(changed))

    # ------------------------------------------------------------------ server requests

    def _request(self, request: Request) -> None:
        assert self._handlers is not None
        if not self._answers_requests:
            self._log.warning(
                "the server sent a %s request in a 2026-07-28 session, where servers send no "
                "requests (they ask for input in their results): ignored, not answered",
                request.method,
            )
            return
        if request.id in self._inbound:
            self._log.warning(
                "the server sent request id %r again while it is in flight; refused",
                request.id,
            )
            return
        reply: TaskReply | None = None
        if self.tasks is not None:
            if self.tasks.takes(request):
                self._start_task(request, self.tasks)
                return
            if request.method in TASK_METHODS:
                reply = self.tasks.answer(request)
                if reply.changed is not None:
                    self._notify(status_notification(reply.changed))
        if len(self._inbound) >= MAX_INBOUND_REQUESTS:
            self._refuse(request)
            return
        scope = trio.CancelScope()
        self._inbound[request.id] = scope
        self._handlers.start_soon(self._serve, request, scope, reply)

    def _start_task(self, request: Request, tasks: ClientTasks) -> None:
        """Run a task-augmented request as a task of the client (or refuse it: too many)."""
        assert self._handlers is not None
        try:
            task = tasks.create(request)
        except RpcError as exc:
            self._refuse(request, str(exc.args[0]))
            return
        runner = functools.partial(
            run_client_task,
            server=self.server,
            callbacks=self.callbacks,
            transport=self.transport,
            report=self.inbox,
        )
        self._handlers.start_soon(runner, task, request)

    async def _serve(
        self, request: Request, scope: trio.CancelScope, reply: TaskReply | None = None
    ) -> None:
        """One server request, in a task of its own: answer it from the host's callback (or
        with ``reply``, what the dispatcher decided about one of the client's tasks)."""
        try:
            with scope:
                try:
                    result = await (self._answer(request) if reply is None else reply.resolve())
                except RpcError as exc:
                    await self._send(
                        _error(request.id, exc.code, str(exc.args[0]) if exc.args else "")
                    )
                except McpError as exc:
                    await self._send(_error(request.id, -32603, str(exc)))
                except Exception as exc:  # the host's callback failed: answer, log, go on
                    self._log.exception("handling %s from the server failed", request.method)
                    await self._send(
                        _error(request.id, -32603, f"the client failed: {type(exc).__name__}")
                    )
                else:
                    await self._send(serialize(Response(id=request.id, result=result)))
            if scope.cancelled_caught:
                self._log.debug("server cancelled its %s request", request.method)
        finally:
            await self.inbox.send(Answered(request_id=request.id))

    def _refuse(self, request: Request, why: str | None = None) -> None:
        """Answer a server request past :data:`MAX_INBOUND_REQUESTS` (or one the table of the
        client's tasks has no room for: ``why``) with an error, here and now, or drop the answer
        when the transport cannot take it at once: a server that floods us with requests never
        makes us hold a task (or a frame) for each one."""
        if why is None:
            why = (
                f"too many concurrent requests from the server (the client handles "
                f"{MAX_INBOUND_REQUESTS} at once): send it again once others are answered"
            )
        frame = _error(request.id, -32603, why)
        try:
            self.transport.send_nowait(frame)
        except (trio.WouldBlock, TransportError) as exc:
            self._log.warning(
                "%s: %s %r refused, and the refusal was dropped (%s)",
                why,
                request.method,
                request.id,
                "the outbox is full" if isinstance(exc, trio.WouldBlock) else exc,
            )

    def _notify(self, frame: bytes) -> None:
        """Send a notification now if the outbox takes it (best effort: a task's status
        notification is optional, the server polls)."""
        try:
            self.transport.send_nowait(frame)
        except (trio.WouldBlock, TransportError) as exc:
            self._log.debug("a notification to the server was dropped: %r", exc)

    async def _send(self, frame: bytes) -> None:
        try:
            await self.transport.send(frame)
        except TransportError as exc:
            self._log.debug("an answer to the server was not sent: %s", exc)

    async def _answer(self, request: Request) -> Mapping[str, Any]:
        """The result for one server request, from the host's callback
        (:func:`~trio_mcp.actors.runtime._inputs.answer_input`, which the 2026-07-28 input
        rounds use too). Raises :class:`RpcError` for what the server is to be answered with an
        error: -32601 for a capability we did not declare, -32602 for params of the wrong shape
        or an elicitation mode we do not show."""
        if request.method == "ping":
            return {}
        return await answer_input(self.callbacks, self.server, request.method, request.params)

    # ------------------------------------------------------------------ notifications

    def _notification(self, notification: Notification) -> None:
        method, params = notification.method, notification.params
        if self.cache is not None:  # first: what the notification makes stale is never served
            self.cache.on_notification(method, params)
        kind = _LIST_CHANGED.get(method)
        if kind is not None:
            if kind == "tools":
                with contextlib.suppress(trio.WouldBlock):  # a re-listing is asked for already
                    self.relist.send_nowait(None)
            else:
                self.events.publish(ListChanged(server=self.server, kind=kind))
            return
        try:
            decoded = decode_notification(method, params)
        except InvalidMessage as exc:
            self._log.warning("invalid %s notification: %s", method, exc)
            return
        match method:
            case "notifications/message":
                level = getattr(decoded, "level", "info")
                data = getattr(decoded, "data", None)
                name = getattr(decoded, "logger", None)
                self._log.log(_LOG_LEVELS.get(level, logging.INFO), "%s%s", _prefix(name), data)
                self.events.publish(
                    ServerLogged(server=self.server, level=level, data=data, logger=name)
                )
            case "notifications/resources/updated":
                uri = getattr(decoded, "uri", None)
                if isinstance(uri, str):
                    self.events.publish(ResourceUpdated(server=self.server, uri=uri))
            case "notifications/tasks/status" | "notifications/tasks":
                task_id = getattr(decoded, "task_id", None)
                status = getattr(decoded, "status", None)
                if isinstance(task_id, str) and isinstance(status, str):
                    self.events.publish(
                        TaskStatusChanged(
                            server=self.server,
                            task_id=task_id,
                            status=status,
                            status_message=getattr(decoded, "status_message", None),
                        )
                    )
            case "notifications/cancelled":
                request_id = getattr(decoded, "request_id", None)
                scope = self._inbound.get(request_id) if request_id is not None else None
                if scope is not None:
                    scope.cancel()
            case _:
                self._log.debug("notification %s ignored", method)


def _error(request_id: RequestId, code: int, message: str) -> bytes:
    return serialize(ErrorResponse(id=request_id, error=ErrorObject(code=code, message=message)))


def _prefix(name: str | None) -> str:
    return f"[{name}] " if name else ""
