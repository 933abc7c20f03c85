"""The fake server's tasks: tool calls it runs in the background, in both eras, driven by time
or by the test.

A :class:`~trio_mcp.actors.testing.FakeTool` with ``task_support`` (``"optional"`` or
``"required"``) makes the fake a task server: it declares ``tasks`` (2025-11-25:
``tasks.list``, ``tasks.cancel``, ``tasks.requests.tools.call``) or the tasks extension
(2026-07-28: ``io.modelcontextprotocol/tasks``), and answers a task-augmented ``tools/call``
(2025-11-25: ``params.task``; 2026-07-28: a call that opts into the extension) with a task
instead of the result. A call of a ``"required"`` tool that is not task-augmented is refused
with -32601, as is a task-augmented call of a tool without task support.

Each task is a :class:`FakeTask` in :attr:`FakeServer.tasks` (ids ``t1``, ``t2``... in order of
creation), kept across connections, so a client that reconnects finds it again. It works for the
tool's ``delay`` seconds (by trio's clock), then completes with the tool's ordinary result
(handler, canned ``result`` or echo), which a handler raising :class:`RpcError` turns into a
failed task. A test drives it by hand instead (give the tool ``delay=math.inf`` to keep it
working until then): :meth:`FakeTask.complete`, :meth:`FakeTask.fail`, :meth:`FakeTask.ask`
(``input_required`` with input requests), :meth:`FakeTask.working` (a status message, or back
to work), :meth:`FakeTask.progress` and :meth:`FakeTask.notify` (the status notification).

What it answers: ``tasks/get`` (2025-11-25: the task's fields; 2026-07-28: the detailed task,
with ``inputRequests``, ``result`` or ``error``), ``tasks/result`` (2025-11-25: waits until the
task has ended, sending the task's input requests to the client as requests of its own meanwhile,
then the result with the task in ``_meta``, or its error), ``tasks/cancel`` (-32602 for a task
that has ended), ``tasks/update`` (2026-07-28: the client's answers, taken once every request
is answered) and ``tasks/list`` (2025-11-25). A task whose ``ttl`` (:attr:`FakeServer.task_ttl_ms`)
has passed is unknown (-32602). Timestamps are trio's clock from ``2026-01-01T00:00:00Z``, so
they are exact under ``autojump_clock``.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

import attrs
import trio

from ...protocol._errors import RpcError
from ...protocol._jsonrpc import Notification
from ...protocol._methods import TASKS_EXTENSION, encode
from ...protocol._types import CallToolResult
from ...protocol._versions import META_CLIENT_CAPABILITIES

if TYPE_CHECKING:
    from ._fakes import FakeServer, ToolContext

__all__ = ["TASK_METHODS", "FakeTask"]

#: The requests about tasks that the fake answers (when it has task tools).
TASK_METHODS: Final = frozenset(
    {"tasks/get", "tasks/result", "tasks/cancel", "tasks/list", "tasks/update"}
)
RELATED_TASK: Final = "io.modelcontextprotocol/related-task"
_TERMINAL: Final = frozenset({"completed", "failed", "cancelled"})
_EPOCH: Final = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)

#: The tool's ordinary result, run when a task has worked its time.
Body = Callable[[], Awaitable[dict[str, Any]]]


def _stamp(seconds: float) -> str:
    moment = _EPOCH + datetime.timedelta(seconds=seconds)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _as_result(value: CallToolResult | Mapping[str, Any] | str) -> dict[str, Any]:
    if isinstance(value, CallToolResult):
        return encode(value)
    if isinstance(value, str):
        return {"content": [{"type": "text", "text": value}]}
    return dict(value)


def _unknown(task_id: Any) -> RpcError:
    return RpcError.from_error(-32602, f"Failed to retrieve task: Task not found ({task_id!r})")


@attrs.define(eq=False)
class FakeTask:
    """One task of the fake (see the module docstring). Read its state in assertions
    (:attr:`status`, :attr:`responses`, :attr:`cancelled_by_client`...); drive it with the
    methods."""

    task_id: str
    tool: str
    arguments: Mapping[str, Any]
    #: ``"legacy"`` (2025-11-25) or ``"modern"`` (the tasks extension): the era it was made in.
    era: str
    #: The ``progressToken`` of the call that made it (its progress goes there).
    progress_token: int | str | None
    #: trio time when it completes by itself (``math.inf``: when the test says).
    ends_at: float
    created: float
    ttl_ms: int | None
    poll_ms: int | None
    _server: FakeServer = attrs.field(repr=False)
    _body: Body | None = attrs.field(default=None, repr=False)
    status: str = "working"
    status_message: str | None = None
    last_updated: float = 0.0
    #: The final result (completed; or failed with ``isError``), raw.
    result: dict[str, Any] | None = None
    #: The JSON-RPC error object of a failed task.
    error: dict[str, Any] | None = None
    #: Input requests outstanding (``input_required``), by key.
    input_requests: dict[str, Any] | None = None
    #: The client's answers to input requests, by key, in the order they came.
    responses: list[dict[str, Any]] = attrs.field(factory=list)
    #: The client sent ``tasks/cancel``.
    cancelled_by_client: bool = False
    #: trio time of each ``tasks/get`` about it.
    polls: list[float] = attrs.field(factory=list)
    _changed: trio.Event = attrs.field(factory=trio.Event, repr=False)

    @property
    def terminal(self) -> bool:
        """Whether it has ended (completed, failed or cancelled)."""
        return self.status in _TERMINAL

    # ------------------------------------------------------------------ driving it

    def complete(self, result: CallToolResult | Mapping[str, Any] | str | None = None) -> None:
        """Complete it with ``result`` (None: the tool's own result, taken at the next
        question about the task)."""
        if result is None:
            self.ends_at = trio.current_time()
            self.working(self.status_message)
            return
        self.result = _as_result(result)
        failed = self.era == "legacy" and self.result.get("isError") is True
        self._set("failed" if failed else "completed", None)

    def fail(self, code: int = -32603, message: str = "the task failed") -> None:
        """Fail it with a JSON-RPC error (2025-11-25: what ``tasks/result`` answers)."""
        self.error = {"code": code, "message": message}
        self._set("failed", message)

    def ask(self, requests: Mapping[str, Mapping[str, Any]]) -> None:
        """Ask the client for input: ``input_required`` with ``requests`` (key ->
        ``{"method": "elicitation/create" | "sampling/createMessage" | "roots/list",
        "params": {...}}``). 2026-07-28: they are in ``tasks/get`` until ``tasks/update``
        answers them; 2025-11-25: the fake sends them to the client while its ``tasks/result``
        waits. Either way the task goes back to work once all are answered."""
        self.input_requests = {key: dict(value) for key, value in requests.items()}
        self._set("input_required", self.status_message)

    def working(self, message: str | None = None) -> None:
        """Back to (or still) ``working``, with ``message`` as the status message."""
        self._set("working", message)

    async def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> int:
        """``notifications/progress`` with the token of the call that made the task, on every
        live connection (0 when that call had none); how many were sent."""
        if self.progress_token is None:
            await trio.lowlevel.checkpoint()
            return 0
        params: dict[str, Any] = {"progressToken": self.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        return await self._server.notify("notifications/progress", params)

    async def notify(self) -> int:
        """The task's status notification on every live connection (its status now: completed
        if it has worked its time): 2025-11-25 ``notifications/tasks/status`` (its fields) on a
        legacy one, ``notifications/tasks`` (the detailed task) on a 2026-07-28 one; how many
        were sent."""
        await self._settle()
        sent = 0
        for conn in list(self._server._live):
            if conn.era == "modern":
                message = Notification(method="notifications/tasks", params=self.detailed())
            else:
                message = Notification(method="notifications/tasks/status", params=self.fields())
            sent += await conn.send(message)
        return sent

    def _set(self, status: str, message: str | None) -> None:
        self.status = status
        self.status_message = message or self._server.task_messages.get(status)
        self.last_updated = trio.current_time()
        changed, self._changed = self._changed, trio.Event()
        changed.set()

    # ------------------------------------------------------------------ answering

    def fields(self) -> dict[str, Any]:
        """The task as the 2025-11-25 ``Task`` (flat), or the extension's fields."""
        out: dict[str, Any] = {"taskId": self.task_id, "status": self.status}
        if self.status_message is not None:
            out["statusMessage"] = self.status_message
        out["createdAt"] = _stamp(self.created)
        out["lastUpdatedAt"] = _stamp(self.last_updated)
        if self.era == "legacy":
            out["ttl"] = self.ttl_ms
            if self.poll_ms is not None:
                out["pollInterval"] = self.poll_ms
        else:
            out["ttlMs"] = self.ttl_ms
            if self.poll_ms is not None:
                out["pollIntervalMs"] = self.poll_ms
        return out

    def detailed(self) -> dict[str, Any]:
        """The extension's detailed task: the fields and what its status carries."""
        out = self.fields()
        if self.status == "input_required" and self.input_requests:
            out["inputRequests"] = dict(self.input_requests)
        elif self.status == "completed" and self.result is not None:
            out["result"] = dict(self.result)
        elif self.status == "failed" and self.error is not None:
            out["error"] = dict(self.error)
        return out

    async def _settle(self) -> None:
        """Complete it with the tool's result once it has worked its time."""
        if self.status != "working" or trio.current_time() < self.ends_at:
            await trio.lowlevel.checkpoint()
            return
        body, self._body = self._body, None
        if body is None:  # another request is running it: its end is a change
            await self._changed.wait()
            return
        result: dict[str, Any] | None = None
        try:
            result = await body()
        except RpcError as exc:
            self.fail(exc.code, str(exc.args[0]) if exc.args else "")
        finally:
            if result is None and self.status == "working":
                # cancelled meanwhile: the next question runs it again (waiters look again)
                self._body = body
                self._set("working", self.status_message)
        if result is not None:
            self.complete(result)

    def _expired(self) -> bool:
        return self.ttl_ms is not None and trio.current_time() > self.created + self.ttl_ms / 1000


def task_call(
    server: FakeServer,
    tool: Any,
    params: Mapping[str, Any],
    era: str,
    ctx: ToolContext,
    body: Body,
) -> dict[str, Any] | None:
    """The answer to a ``tools/call`` of a tool with ``task_support``: a new task (None: the
    call runs as an ordinary one). Raises -32601 for a required task not asked for, or a task
    asked of a tool that takes none."""
    support = getattr(tool, "task_support", None)
    if era == "legacy":
        asked = isinstance(params.get("task"), Mapping)
    else:
        meta = params.get("_meta")
        caps = meta.get(META_CLIENT_CAPABILITIES) if isinstance(meta, Mapping) else None
        extensions = caps.get("extensions") if isinstance(caps, Mapping) else None
        asked = isinstance(extensions, Mapping) and TASKS_EXTENSION in extensions
    if support not in ("optional", "required"):
        if asked and era == "legacy":
            raise RpcError.from_error(-32601, f"tool {ctx.tool!r} cannot run as a task")
        return None
    if not asked:
        if support == "required":
            raise RpcError.from_error(
                -32601, f"Task augmentation required for tools/call of {ctx.tool!r}"
            )
        return None
    now = trio.current_time()
    arguments = params.get("arguments")
    task = FakeTask(
        task_id=f"t{len(server.tasks) + 1}",
        tool=ctx.tool,
        arguments=dict(arguments) if isinstance(arguments, Mapping) else {},
        era=era,
        progress_token=ctx.progress_token,
        ends_at=now + tool.delay,
        created=now,
        last_updated=now,
        ttl_ms=server.task_ttl_ms,
        poll_ms=server.task_poll_ms,
        server=server,
        body=body,
    )
    task.status_message = server.task_messages.get("working")
    server.tasks[task.task_id] = task
    ctx.task = task
    if server.on_task is not None:
        server.on_task(task)
    if era == "legacy":
        return {"task": task.fields()}
    return {**task.fields(), "resultType": "task"}


async def answer(
    server: FakeServer, era: str, method: str, params: Mapping[str, Any], ctx: ToolContext
) -> dict[str, Any]:
    """The answer to one of :data:`TASK_METHODS` (-32601 for one the era does not have)."""
    if method == "tasks/list" and era == "legacy":
        kept = [one for one in server.tasks.values() if not one._expired()]
        for one in kept:
            await one._settle()
        return {"tasks": [one.fields() for one in kept]}
    legacy_only = method in ("tasks/result", "tasks/list")
    if (legacy_only and era != "legacy") or (method == "tasks/update" and era != "modern"):
        raise RpcError.from_error(-32601, f"Method not found: {method}")
    task_id = params.get("taskId")
    task = server.tasks.get(task_id) if isinstance(task_id, str) else None
    if task is None or task._expired():
        raise _unknown(task_id)
    await task._settle()
    match method:
        case "tasks/get":
            task.polls.append(trio.current_time())
            return task.detailed() if era == "modern" else task.fields()
        case "tasks/cancel":
            if task.terminal:
                raise RpcError.from_error(
                    -32602, f"Cannot cancel task {task.task_id!r}: it is {task.status} already"
                )
            task.cancelled_by_client = True
            task._set("cancelled", "cancelled by the client")
            return task.fields() if era == "legacy" else {}
        case "tasks/update":
            return _update(task, params)
        case _:  # tasks/result, 2025-11-25
            return await _result(task, ctx)


def _update(task: FakeTask, params: Mapping[str, Any]) -> dict[str, Any]:
    responses = params.get("inputResponses")
    if not isinstance(responses, Mapping):
        raise RpcError.from_error(-32602, "Invalid params: tasks/update needs 'inputResponses'")
    task.responses.append(dict(responses))
    outstanding = task.input_requests or {}
    answered = {key for batch in task.responses for key in batch}
    if task.status == "input_required" and outstanding.keys() <= answered:
        task.input_requests = None
        task.working(task.status_message)
    return {}


async def _result(task: FakeTask, ctx: ToolContext) -> dict[str, Any]:
    """``tasks/result``: wait for the end, asking for the task's input meanwhile."""
    while True:
        await task._settle()
        if task.terminal:
            break
        if task.status == "input_required" and task.input_requests:
            related = {RELATED_TASK: {"taskId": task.task_id}}
            for key, request in list(task.input_requests.items()):
                params = dict(request.get("params") or {})
                params["_meta"] = {**(params.get("_meta") or {}), **related}
                answer = await ctx.request(str(request.get("method")), params)
                task.responses.append({key: dict(answer)})
            task.input_requests = None
            task.working(task.status_message)
            continue
        with trio.move_on_at(task.ends_at if task.status == "working" else math.inf):
            await task._changed.wait()
    if task.error is not None:
        raise RpcError.from_error(task.error["code"], task.error["message"])
    if task.status == "cancelled":
        raise RpcError.from_error(-32603, f"task {task.task_id!r} was cancelled")
    result = dict(task.result or {})
    result["_meta"] = {**(result.get("_meta") or {}), RELATED_TASK: {"taskId": task.task_id}}
    return result
