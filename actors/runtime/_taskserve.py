"""The client as the *receiver* of 2025-11-25 tasks: a server's ``sampling/createMessage`` or
``elicitation/create`` run in the background, polled by the server.

A 2025-11-25 client declares, in ``initialize``, which of the server's requests it runs as tasks
(:func:`client_tasks_capability`): ``tasks.requests.sampling.createMessage`` when the host has a
sampling callback, ``tasks.requests.elicitation.create`` when it has an elicitation callback,
with ``tasks.list`` and ``tasks.cancel``. A server may then send either request with
``params.task``: the client answers at once with a ``CreateTaskResult`` (the task ``working``)
and runs the host's callback in the background; the server follows the task with ``tasks/get``,
takes its outcome with ``tasks/result`` (which waits until the task has ended), lists tasks with
``tasks/list`` and ends one with ``tasks/cancel``; each change of status is also sent as
``notifications/tasks/status``.

Ownership follows the actor rules. The table of a connection's tasks (:class:`ClientTasks`) is
owned by the session's :class:`~trio_mcp.actors.runtime._dispatcher.Dispatcher` and changed only
in its task, by synchronous methods: it creates a task (:meth:`ClientTasks.create`), answers the
``tasks/*`` requests (:meth:`ClientTasks.answer`), takes a task's outcome from the task that ran
the callback (:class:`ClientTaskEnded`, through the dispatcher's mailbox) and drops tasks whose
``ttl`` has passed (:meth:`ClientTasks.expire`, at :meth:`ClientTasks.next_expiry`). The
callback runs in a task of its own (:func:`run_client_task`) in the dispatcher's nursery of
handlers, so the end of the connection cancels every callback still running; a ``tasks/cancel``
or the task's ``ttl`` cancels its callback alone.

Limits: at most :data:`MAX_RUNNING` callbacks run at once and :data:`MAX_KEPT` tasks are kept
(ended ones until their ``ttl``); past either a task-augmented request is refused with an error.
A server's ``ttl`` is honoured up to :data:`MAX_TTL_MS` (absent: :data:`DEFAULT_TTL_MS`); the
actual value is what the task says. A request whose capability was not declared (no callback,
tasks turned off, an elicitation mode the host does not show) or whose params are malformed is
answered as an ordinary request, as the specification asks of a receiver that does not take it.
"""

from __future__ import annotations

import datetime
import itertools
import logging
import math
import uuid
from collections.abc import Mapping
from typing import Any, Final

import attrs
import trio

from ...protocol._errors import InvalidMessage, McpError, RpcError, TransportError
from ...protocol._jsonrpc import ErrorObject, Notification, Request, Response, serialize
from ...protocol._methods import decode_params
from ...transports._base import Transport
from ..config._config import RuntimeConfig
from ._callbacks import HostCallbacks
from ._inputs import answer_input

__all__ = [
    "DEFAULT_TTL_MS",
    "MAX_KEPT",
    "MAX_RUNNING",
    "MAX_TTL_MS",
    "POLL_INTERVAL_MS",
    "TASK_METHODS",
    "ClientTask",
    "ClientTaskEnded",
    "ClientTasks",
    "TaskReply",
    "client_tasks",
    "client_tasks_capability",
    "run_client_task",
    "status_notification",
]

logger = logging.getLogger("trio_mcp.tasks")

#: The requests a server may ask the client to run as tasks, and their capability entries.
TASK_REQUESTS: Final[Mapping[str, tuple[str, str]]] = {
    "sampling/createMessage": ("sampling", "createMessage"),
    "elicitation/create": ("elicitation", "create"),
}
#: The requests about the client's tasks that the client answers.
TASK_METHODS: Final = frozenset({"tasks/get", "tasks/result", "tasks/list", "tasks/cancel"})
#: Callbacks running as tasks at once, per connection.
MAX_RUNNING: Final = 32
#: Tasks kept per connection (running, and ended ones until their ``ttl``).
MAX_KEPT: Final = 256
#: A task's lifetime when the server asks for none, and the longest it may ask for (ms).
DEFAULT_TTL_MS: Final = 300_000
MAX_TTL_MS: Final = 3_600_000
#: The polling interval the client suggests to the server (ms).
POLL_INTERVAL_MS: Final = 1_000
#: Tasks in one page of ``tasks/list``.
PAGE_SIZE: Final = 50
#: The ``_meta`` key that ties a message to its task.
RELATED_TASK: Final = "io.modelcontextprotocol/related-task"

_TERMINAL: Final = frozenset({"completed", "failed", "cancelled"})


def client_tasks_capability(callbacks: HostCallbacks) -> dict[str, Any]:
    """The ``tasks`` entry of the client capabilities in ``initialize`` (2025-11-25) when the
    host allows tasks (``RuntimeConfig.tasks``): the server's requests the host has a callback
    for may run as tasks, with ``tasks/list`` and ``tasks/cancel``. Without either callback it
    is empty (the client knows tasks, and runs none)."""
    requests: dict[str, Any] = {}
    for method, (group, name) in TASK_REQUESTS.items():
        if _callback(callbacks, method) is not None:
            requests[group] = {name: {}}
    if not requests:
        return {}
    return {"list": {}, "cancel": {}, "requests": requests}


def _callback(callbacks: HostCallbacks, method: str) -> Any:
    return callbacks.sampling if method == "sampling/createMessage" else callbacks.elicitation


def _now_iso() -> str:
    now = datetime.datetime.now(datetime.UTC)
    return now.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@attrs.frozen(kw_only=True)
class _Outcome:
    """How a task ended: the request's result, or the error it is answered with."""

    result: Mapping[str, Any] | None = None
    error: ErrorObject | None = None


@attrs.define(eq=False)
class ClientTask:
    """One task the client runs for the server (state of the dispatcher's task; the runner
    reads :attr:`params` and enters :attr:`scope`, a ``tasks/result`` handler waits on
    :attr:`done` and then reads :attr:`outcome`, which is set once, before :attr:`done`)."""

    task_id: str
    method: str
    params: Mapping[str, Any]
    seq: int
    ttl_ms: int
    #: ``trio.current_time()`` after which the task is dropped.
    expires: float
    created_at: str
    last_updated_at: str
    status: str = "working"
    status_message: str | None = None
    scope: trio.CancelScope = attrs.Factory(trio.CancelScope)
    done: trio.Event = attrs.Factory(trio.Event)
    outcome: _Outcome | None = None

    @property
    def terminal(self) -> bool:
        return self.status in _TERMINAL

    def wire(self) -> dict[str, Any]:
        """The task as ``tasks/get`` answers it (2025-11-25 ``Task``)."""
        out: dict[str, Any] = {"taskId": self.task_id, "status": self.status}
        if self.status_message is not None:
            out["statusMessage"] = self.status_message
        out["createdAt"] = self.created_at
        out["lastUpdatedAt"] = self.last_updated_at
        out["ttl"] = self.ttl_ms
        out["pollInterval"] = POLL_INTERVAL_MS
        return out

    def _end(self, status: str, outcome: _Outcome, message: str | None) -> None:
        self.status = status
        self.status_message = message
        self.last_updated_at = _now_iso()
        self.outcome = outcome
        self.done.set()

    async def reply(self) -> Mapping[str, Any]:
        """``tasks/result``: wait until the task has ended, then its result (with the task in
        ``_meta``), or raise its error."""
        await self.done.wait()
        outcome = self.outcome
        assert outcome is not None
        if outcome.error is not None:
            error = outcome.error
            raise RpcError.from_error(error.code, error.message, error.data)
        result = dict(outcome.result or {})
        meta = result.get("_meta")
        result["_meta"] = {
            **(meta if isinstance(meta, Mapping) else {}),
            RELATED_TASK: {"taskId": self.task_id},
        }
        return result


@attrs.frozen(kw_only=True)
class ClientTaskEnded:
    """The runner of task ``task_id`` is done: ``outcome`` None when its callback was cancelled
    (by ``tasks/cancel`` or the ``ttl``; the table has ended it already)."""

    task_id: str
    outcome: _Outcome | None


@attrs.frozen(kw_only=True)
class TaskReply:
    """The dispatcher's answer to a ``tasks/*`` request, decided in its task: a ``result`` or
    an ``error`` now, or (``tasks/result`` of a task still running) the task to ``wait`` for.
    ``changed``: a task whose status changed (its notification is due)."""

    result: Mapping[str, Any] | None = None
    error: RpcError | None = None
    wait: ClientTask | None = None
    changed: ClientTask | None = None

    async def resolve(self) -> Mapping[str, Any]:
        """The result to answer with (in the handler's task), or raise the error."""
        if self.error is not None:
            await trio.lowlevel.checkpoint()
            raise self.error
        if self.wait is not None:
            return await self.wait.reply()
        await trio.lowlevel.checkpoint()
        assert self.result is not None
        return self.result


def _invalid(message: str) -> TaskReply:
    return TaskReply(error=RpcError.from_error(-32602, message))


@attrs.define(eq=False)
class ClientTasks:
    """A connection's table of the tasks the client runs for the server (see the module
    docstring): every method is synchronous and called in the dispatcher's task only."""

    server: str
    callbacks: HostCallbacks
    _tasks: dict[str, ClientTask] = attrs.field(factory=dict, init=False)
    #: Tasks whose runner has not reported yet (its callback may still run).
    _running: set[str] = attrs.field(factory=set, init=False)
    _seq: itertools.count[int] = attrs.field(factory=lambda: itertools.count(1), init=False)

    def takes(self, request: Request) -> bool:
        """Whether ``request`` is one to run as a task: a task-augmented request the host
        declared (its callback, and for an elicitation its mode), with well-formed params."""
        params = request.params
        if request.method not in TASK_REQUESTS or params is None:
            return False
        if not isinstance(params.get("task"), Mapping):
            return False
        if _callback(self.callbacks, request.method) is None:
            return False
        try:
            decoded = decode_params(request.method, params)
        except InvalidMessage:
            return False  # answered as an ordinary request: with -32602, naming the path
        mode = getattr(decoded, "mode", None) or "form"
        return request.method != "elicitation/create" or mode in self.callbacks.elicitation_modes

    def create(self, request: Request) -> ClientTask:
        """A new ``working`` task for ``request`` (:meth:`takes` said yes). Raises
        :class:`RpcError` (-32603) past :data:`MAX_RUNNING` or :data:`MAX_KEPT`."""
        if len(self._running) >= MAX_RUNNING or len(self._tasks) >= MAX_KEPT:
            raise RpcError.from_error(
                -32603,
                f"too many tasks: the client runs {MAX_RUNNING} at once and keeps {MAX_KEPT}; "
                "send it again once others have ended (or without a task)",
            )
        params = request.params or {}
        task_field = params.get("task")
        asked = task_field.get("ttl") if isinstance(task_field, Mapping) else None
        ttl_ms = DEFAULT_TTL_MS
        if isinstance(asked, int) and not isinstance(asked, bool) and asked > 0:
            ttl_ms = min(asked, MAX_TTL_MS)
        now = _now_iso()
        task = ClientTask(
            task_id=str(uuid.uuid4()),
            method=request.method,
            params=params,
            seq=next(self._seq),
            ttl_ms=ttl_ms,
            expires=trio.current_time() + ttl_ms / 1000,
            created_at=now,
            last_updated_at=now,
        )
        self._tasks[task.task_id] = task
        self._running.add(task.task_id)
        logger.debug(
            "server %r: %s runs as task %r (ttl %d ms)",
            self.server,
            request.method,
            task.task_id,
            ttl_ms,
        )
        return task

    def ended(self, item: ClientTaskEnded) -> ClientTask | None:
        """Take a runner's report; the task if its status changed (completed or failed)."""
        self._running.discard(item.task_id)
        task = self._tasks.get(item.task_id)
        if task is None or task.terminal or item.outcome is None:
            return None
        if item.outcome.error is not None:
            task._end("failed", item.outcome, item.outcome.error.message)
        else:
            task._end("completed", item.outcome, None)
        return task

    def answer(self, request: Request) -> TaskReply:
        """The answer to ``tasks/get``, ``tasks/result``, ``tasks/list`` or ``tasks/cancel``
        (-32602 for an unknown task or cursor, or a cancel of an ended task)."""
        params = request.params or {}
        if request.method == "tasks/list":
            return self._list(params.get("cursor"))
        task_id = params.get("taskId")
        task = self._tasks.get(task_id) if isinstance(task_id, str) else None
        if task is None:
            return _invalid(
                f"unknown task {task_id!r}: the client has no such task (or its ttl passed)"
            )
        match request.method:
            case "tasks/get":
                return TaskReply(result=task.wire())
            case "tasks/result":
                return TaskReply(wait=task)
            case _:  # tasks/cancel
                if task.terminal:
                    return _invalid(f"task {task.task_id!r} has ended already ({task.status})")
                task.scope.cancel()
                error = ErrorObject(code=-32603, message=f"task {task.task_id!r} was cancelled")
                task._end("cancelled", _Outcome(error=error), "cancelled by the server")
                logger.debug("server %r cancelled task %r", self.server, task.task_id)
                return TaskReply(result=task.wire(), changed=task)

    def _list(self, cursor: Any) -> TaskReply:
        after = 0
        if cursor is not None:
            if not isinstance(cursor, str) or not cursor.isdigit():
                return _invalid(f"invalid tasks/list cursor {cursor!r}")
            after = int(cursor)
        tasks = [task for task in self._tasks.values() if task.seq > after]
        page = tasks[:PAGE_SIZE]
        result: dict[str, Any] = {"tasks": [task.wire() for task in page]}
        if len(tasks) > PAGE_SIZE:
            result["nextCursor"] = str(page[-1].seq)
        return TaskReply(result=result)

    def next_expiry(self) -> float:
        """When the next task's ``ttl`` passes (``math.inf``: none kept)."""
        return min((task.expires for task in self._tasks.values()), default=math.inf)

    def expire(self, now: float) -> None:
        """Drop the tasks whose ``ttl`` has passed; a running one has its callback cancelled
        and a ``tasks/result`` waiting for it answered with an error."""
        for task in [task for task in self._tasks.values() if task.expires <= now]:
            del self._tasks[task.task_id]
            if not task.terminal:
                task.scope.cancel()
                error = ErrorObject(code=-32603, message=f"task {task.task_id!r} expired")
                task._end("cancelled", _Outcome(error=error), "its ttl passed")
                logger.info(
                    "server %r: task %r (%s) was still running when its ttl of %d ms passed: "
                    "cancelled",
                    self.server,
                    task.task_id,
                    task.method,
                    task.ttl_ms,
                )


def status_notification(task: ClientTask) -> bytes:
    """``notifications/tasks/status`` for ``task``, as a frame."""
    return serialize(Notification(method="notifications/tasks/status", params=task.wire()))


async def run_client_task(
    task: ClientTask,
    request: Request,
    *,
    server: str,
    callbacks: HostCallbacks,
    transport: Transport,
    report: trio.MemorySendChannel[Any],
) -> None:
    """Answer ``request`` with the task (``CreateTaskResult``), then run the host's callback
    under the task's cancel scope and report how it ended (:class:`ClientTaskEnded`)."""
    created = serialize(Response(id=request.id, result={"task": task.wire()}))
    outcome: _Outcome | None = None
    try:
        await transport.send(created)
    except TransportError as exc:
        logger.debug("server %r: task %r was not sent: %s", server, task.task_id, exc)
        outcome = _Outcome(error=ErrorObject(code=-32603, message="the task was not delivered"))
    else:
        with task.scope:
            try:
                result = await answer_input(callbacks, server, task.method, task.params)
            except RpcError as exc:
                message = str(exc.args[0]) if exc.args else ""
                outcome = _Outcome(error=ErrorObject(code=exc.code, message=message, data=exc.data))
            except McpError as exc:
                outcome = _Outcome(error=ErrorObject(code=-32603, message=str(exc)))
            except Exception as exc:  # the host's callback failed: the task fails, we go on
                logger.exception(
                    "task %r (%s) of server %r failed", task.task_id, task.method, server
                )
                message = f"the client failed: {type(exc).__name__}"
                outcome = _Outcome(error=ErrorObject(code=-32603, message=message))
            else:
                outcome = _Outcome(result=result)
        if task.scope.cancelled_caught:
            outcome = None
    await report.send(ClientTaskEnded(task_id=task.task_id, outcome=outcome))


def client_tasks(
    runtime: RuntimeConfig, callbacks: HostCallbacks, server: str
) -> ClientTasks | None:
    """The table of a new connection's client tasks, or None when the client runs none (tasks
    turned off, or no callback that could run as one): what :func:`client_tasks_capability`
    declares."""
    if not runtime.tasks or not client_tasks_capability(callbacks):
        return None
    return ClientTasks(server=server, callbacks=callbacks)
