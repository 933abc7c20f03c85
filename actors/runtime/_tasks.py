"""Tasks: tool calls that a server runs in the background, followed to their end.

Two protocols, one behaviour for the host:

- **2025-11-25** (experimental core): a server that declares ``tasks.requests.tools.call``
  takes a ``tools/call`` with ``params.task`` for a tool whose ``execution.taskSupport`` is
  ``"required"`` (always as a task) or ``"optional"`` (as a task when the host opted in:
  ``RuntimeConfig.tasks_for_optional``, or ``rt.start_task``). It answers with a
  ``CreateTaskResult``; the client polls ``tasks/get`` at the server's ``pollInterval``, and once
  the task is terminal, or asks for input (``input_required``: the server's own
  ``elicitation/create`` / ``sampling/createMessage`` then reach the host's callbacks as any
  server request does), takes the outcome with ``tasks/result``. ``tasks/cancel`` ends it. The
  call's progress token stays valid until the task ends, so progress keeps arriving.
- **2026-07-28 tasks extension** (``io.modelcontextprotocol/tasks``): the client opts in on
  each ``tools/call`` (``_meta`` client capabilities ``extensions``) to a server that declares
  the extension, and the server decides: an ordinary result, or ``resultType: "task"``. The
  client polls ``tasks/get`` at ``pollIntervalMs``; the detailed task carries the result
  (``completed``), the error (``failed``) or ``inputRequests`` (``input_required``), which the
  host's callbacks answer as they answer the input rounds of any call
  (:func:`~trio_mcp.actors.runtime._mrtr.answer_input_requests`), sent with ``tasks/update``.
  Over HTTP the transport names the task in ``Mcp-Name`` (``protocol._headers``).

For the host a task is invisible by default: ``await rt.call(...)`` returns the final result
(:meth:`TaskRunner.call`); each status change arrives at its progress callback (a progress
notification whose ``message`` is the status message, ``_meta`` naming the task), as do the
server's progress notifications; the call's timeout covers the whole task, and a call that
times out or whose caller is cancelled cancels its task (``tasks/cancel``, shielded, at most
:data:`CANCEL_GRACE` seconds). A host that wants the task itself asks ``rt.start_task`` for a
:class:`TaskHandle`: it can poll, await, cancel, and resume it after a restart of the host
process (its id kept in the :class:`~trio_mcp.actors.runtime._taskstore.TaskStore`).

A dropped connection does not lose a task: the follower waits for the server's supervisor to
reconnect (within the call's time) and polls the same task id on the new connection.

All of it runs in the caller's task (and, for the progress of a 2025-11-25 task, a child of it
holding the token in the session's table): polling never sleeps inside an actor's state
transition. The status notifications a server may send (``notifications/tasks/status``,
``notifications/tasks``) are events of the runtime (:class:`TaskStatusChanged`); a follower
listens for its task's and polls at once, but never relies on them.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import attrs
import trio

from ...protocol._errors import (
    CallTimeout,
    InputRoundsExceeded,
    InvalidMessage,
    LocalProtocolError,
    McpError,
    RpcError,
    ServerDisconnected,
    ServerUnavailable,
    TaskFailed,
)
from ...protocol._methods import TASKS_EXTENSION, decode_result
from ...protocol._types import (
    CallToolResult,
    CreateTaskResult,
    DetailedTask,
    ExtCreateTaskResult,
    GetTaskResult,
    InputRequest,
    ProgressNotificationParams,
    Tool,
)
from ...protocol._versions import META_CLIENT_CAPABILITIES, Era
from ...transports._base import collapse_exception_group
from ..config._config import RuntimeConfig
from ._callbacks import HostCallbacks
from ._events import EventBus, EventSubscription, TaskStatusChanged
from ._inputs import answer_input
from ._mrtr import answer_input_requests
from ._pending import ProgressCallback
from ._session import Session
from ._taskstore import TaskRecord, TaskStore

__all__ = [
    "CANCEL_GRACE",
    "DEFAULT_POLL_INTERVAL",
    "TaskHandle",
    "TaskInfo",
    "TaskRunner",
]

logger = logging.getLogger("trio_mcp.tasks")

#: The longest a ``tasks/cancel`` sent on the way out (a timed-out or cancelled call) may take.
CANCEL_GRACE: Final = 5.0
#: Seconds between two polls when the server suggests no interval.
DEFAULT_POLL_INTERVAL: Final = 1.0
#: A server's suggested interval is kept within these bounds (seconds): a hostile one can
#: neither make the client poll in a busy loop nor stop it from polling.
MIN_POLL_INTERVAL: Final = 0.05
MAX_POLL_INTERVAL: Final = 60.0
#: The key, in the ``_meta`` of the progress the runtime makes of a status change, that names
#: the task (the specification's key for messages related to a task).
META_RELATED_TASK: Final = "io.modelcontextprotocol/related-task"

_TERMINAL: Final = frozenset({"completed", "failed", "cancelled"})
_LEGACY: Final = "legacy"
_MODERN: Final = "modern"

#: ``session_for(server)``: the server's live session, waiting (without a bound of its own:
#: the caller's deadline bounds it) until its supervisor has one; raises
#: :class:`RuntimeClosed` when the runtime is closed.
SessionFor = Callable[[str], Awaitable[Session]]
#: ``check(server, tool, result)``: the runtime's check of a result against the tool's
#: ``outputSchema`` (raises :class:`InvalidToolOutput`).
CheckOutput = Callable[[str, str, Tool, CallToolResult], Awaitable[None]]


@attrs.frozen(kw_only=True)
class TaskInfo:
    """What the server last said about one task. ``status`` is ``"working"``,
    ``"input_required"``, ``"completed"``, ``"failed"`` or ``"cancelled"`` (an open string);
    ``ttl`` and ``poll_interval`` are in seconds (``ttl`` None: kept without limit or not
    said); ``era`` is ``"legacy"`` (2025-11-25) or ``"modern"`` (the 2026-07-28 extension)."""

    server: str
    task_id: str
    status: str
    status_message: str | None = None
    created_at: str | None = None
    last_updated_at: str | None = None
    ttl: float | None = None
    poll_interval: float | None = None
    era: str = _LEGACY

    @property
    def terminal(self) -> bool:
        """Whether the task has ended (completed, failed or cancelled)."""
        return self.status in _TERMINAL


@attrs.frozen(kw_only=True)
class _Polled:
    """One answer about a task: its info, and (tasks extension) its status-specific fields."""

    info: TaskInfo
    input_requests: Mapping[str, InputRequest] | None = None
    result: Mapping[str, Any] | None = None
    error: Mapping[str, Any] | None = None


@attrs.define(eq=False)
class _Task:
    """A task being followed, in the caller's task: where it is, and what was answered."""

    server: str
    task_id: str
    era: str
    token: str | None
    #: The host's answers to the task's input requests (tasks extension), by key, and the
    #: keys the server has taken (``tasks/update`` answered).
    answers: dict[str, Mapping[str, Any]] = attrs.field(factory=dict)
    sent: set[str] = attrs.field(factory=set)
    input_rounds: int = 0
    #: Seen terminal: nothing is cancelled on the way out.
    ended: bool = False
    #: Status changes reported as progress so far (the progress value of the next one).
    reported: int = 0
    last: tuple[str, str | None] | None = None


def _seconds(milliseconds: int | None) -> float | None:
    return None if milliseconds is None else milliseconds / 1000


def _polled(server: str, era: str, answer: Any, *, path: str) -> _Polled:
    """The :class:`_Polled` of a decoded task answer; raises :class:`InvalidMessage` for a
    result that is none (or of the other era's shape)."""
    if era == _LEGACY and isinstance(answer, CreateTaskResult | GetTaskResult):
        task: Any = answer.task if isinstance(answer, CreateTaskResult) else answer
        return _Polled(
            info=TaskInfo(
                server=server,
                task_id=task.task_id,
                status=task.status,
                status_message=task.status_message,
                created_at=task.created_at,
                last_updated_at=task.last_updated_at,
                ttl=_seconds(task.ttl),
                poll_interval=_seconds(task.poll_interval),
                era=era,
            )
        )
    if era == _MODERN and isinstance(answer, ExtCreateTaskResult | DetailedTask):
        detailed = answer if isinstance(answer, DetailedTask) else None
        return _Polled(
            info=TaskInfo(
                server=server,
                task_id=answer.task_id,
                status=answer.status,
                status_message=answer.status_message,
                created_at=answer.created_at,
                last_updated_at=answer.last_updated_at,
                ttl=_seconds(answer.ttl_ms),
                poll_interval=_seconds(answer.poll_interval_ms),
                era=era,
            ),
            input_requests=detailed.input_requests if detailed is not None else None,
            result=detailed.result if detailed is not None else None,
            error=detailed.error if detailed is not None else None,
        )
    raise InvalidMessage(
        f"server {server!r} answered with a {type(answer).__name__} where a "
        f"{'2025-11-25' if era == _LEGACY else 'tasks extension'} task was expected",
        path=path,
    )


def task_mode(config: RuntimeConfig, session: Session, tool: Tool, *, wanted: bool) -> str | None:
    """How a ``tools/call`` of ``tool`` on ``session`` runs: ``"legacy"`` (a 2025-11-25
    task-augmented call), ``"modern"`` (opting into the tasks extension) or None (an ordinary
    call). ``wanted``: the host asks for a task (``rt.start_task``), which also makes an
    ``"optional"`` tool a task."""
    info = session.info
    if info is None or not (config.tasks or wanted):
        return None
    caps = info.capabilities
    if info.era is Era.MODERN:
        extensions = caps.extensions or {}
        return _MODERN if TASKS_EXTENSION in extensions else None
    if caps.tasks is None or not caps.tasks.supports_request("tools/call"):
        return None
    support = tool.execution.task_support if tool.execution is not None else None
    if support == "required" or (support == "optional" and (wanted or config.tasks_for_optional)):
        return _LEGACY
    return None


@attrs.define(eq=False)
class TaskRunner:
    """The runtime's task machinery (one per runtime; no state of its own but the store):
    creates tasks and follows them in the caller's task."""

    config: RuntimeConfig
    callbacks: HostCallbacks
    session_for: SessionFor
    bus: EventBus
    store: TaskStore

    # ------------------------------------------------------------------ invisible tasks

    async def call(
        self,
        session: Session,
        tool: Tool,
        arguments: Mapping[str, Any] | None,
        *,
        mode: str,
        timeout: float | None,
        progress: ProgressCallback | None,
        meta: Mapping[str, Any] | None = None,
    ) -> CallToolResult:
        """``tools/call`` of ``tool`` as a task (``mode``: :func:`task_mode`), followed to its
        end: the final result, as ``rt.call`` returns it. ``timeout`` covers everything; when
        it passes, or the caller is cancelled, the task is cancelled (bounded). ``meta``: the
        host's ``_meta`` for the creating request."""
        start = trio.current_time()
        deadline = math.inf if timeout is None else start + timeout
        token = _new_token()
        task: _Task | None = None
        with trio.move_on_at(deadline), collapse_exception_group():
            async with trio.open_nursery() as nursery:
                watch = _ProgressWatch(nursery, token, progress)
                await watch.follow(session)
                created = await self._create(
                    session, tool, arguments, mode=mode, token=token, meta=meta
                )
                if isinstance(created, CallToolResult):
                    nursery.cancel_scope.cancel()
                    return created
                task = _Task(
                    server=session.server, task_id=created.info.task_id, era=mode, token=token
                )
                logger.debug(
                    "%s/%s runs as task %r (%s)",
                    session.server,
                    tool.name,
                    task.task_id,
                    created.info.status,
                )
                try:
                    result = await self._follow(task, created, watch, progress)
                finally:
                    if not task.ended:
                        await self._cancel_quietly(task, "the call was abandoned")
                nursery.cancel_scope.cancel()
                return result
        if task is not None and not task.ended:
            await self._cancel_quietly(task, "the call timed out")
        waited = trio.current_time() - start
        what = f"as task {task.task_id!r} " if task is not None else ""
        raise CallTimeout(
            f"tools/call of {tool.name!r} to server {session.server!r} ran {what}and did not "
            f"finish in {waited:g} s (the call's timeout covers the whole task"
            f"{'; the task was cancelled' if task is not None else ''})",
            timeout=timeout if timeout is not None else waited,
            server=session.server,
            method="tools/call",
        )

    # ------------------------------------------------------------------ handles

    async def start(
        self,
        session: Session,
        tool: Tool,
        registered: str,
        arguments: Mapping[str, Any] | None,
        *,
        timeout: float | None,
    ) -> TaskHandle:
        """``tools/call`` of ``tool`` as a task, for a handle; its id persisted. Raises
        :class:`LocalProtocolError` when the server or the tool does not take tasks."""
        mode = task_mode(self.config, session, tool, wanted=True)
        if mode is None:
            raise LocalProtocolError(
                f"tool {registered!r} of server {session.server!r} cannot run as a task: "
                + _why_not(session, tool)
                + "; call it with rt.call"
            )
        token = _new_token()
        with trio.fail_after(math.inf if timeout is None else timeout):
            created = await self._create(session, tool, arguments, mode=mode, token=token)
        if isinstance(created, CallToolResult):
            return TaskHandle(
                server=session.server,
                task_id=None,
                tool=registered,
                runner=self,
                era=mode,
                final=created,
            )
        handle = TaskHandle(
            server=session.server,
            task_id=created.info.task_id,
            tool=registered,
            runner=self,
            era=mode,
            token=token,
            info=created.info,
            wire_name=tool.name,
        )
        await self._persist(
            TaskRecord(
                server=session.server,
                task_id=created.info.task_id,
                era=mode,
                tool=registered,
                wire_name=tool.name,
                progress_token=token,
                created_at=created.info.created_at,
            )
        )
        return handle

    async def resume(self, server: str, task_id: str) -> TaskHandle:
        """A handle on a task created before (by this process or an earlier one): what the
        store knows of it, else what the server's session says (its era)."""
        record = await trio.to_thread.run_sync(self.store.get, server, task_id)
        if record is not None:
            era = record.era
        else:
            session = await self.session_for(server)
            modern = session.info is not None and session.info.era is Era.MODERN
            era = _MODERN if modern else _LEGACY
        return TaskHandle(
            server=server,
            task_id=task_id,
            tool=record.tool if record is not None else None,
            wire_name=record.wire_name if record is not None else None,
            runner=self,
            era=era,
            token=record.progress_token if record is not None else None,
        )

    async def stored(self) -> tuple[TaskRecord, ...]:
        return await trio.to_thread.run_sync(self.store.load)

    async def _persist(self, record: TaskRecord) -> None:
        try:
            await trio.to_thread.run_sync(self.store.save, record)
        except McpError as exc:
            logger.warning(
                "task %r of server %r: its id is not kept for a restart: %s",
                record.task_id,
                record.server,
                exc,
            )

    async def _forget(self, server: str, task_id: str) -> None:
        await trio.to_thread.run_sync(self.store.remove, server, task_id)

    # ------------------------------------------------------------------ the wire

    async def _create(
        self,
        session: Session,
        tool: Tool,
        arguments: Mapping[str, Any] | None,
        *,
        mode: str,
        token: str,
        meta: Mapping[str, Any] | None = None,
    ) -> CallToolResult | _Polled:
        """The ``tools/call`` that creates the task: the task, or the ordinary result when the
        server gave one (a 2026-07-28 server decides). ``meta``: the host's ``_meta``, under
        the task's own keys."""
        params: dict[str, Any] = {"name": tool.name}
        if arguments is not None:
            params["arguments"] = dict(arguments)
        request_meta: dict[str, Any] = {**(meta or {}), "progressToken": token}
        if mode == _LEGACY:
            params["task"] = {}
        else:
            request_meta[META_CLIENT_CAPABILITIES] = {"extensions": {TASKS_EXTENSION: {}}}
        params["_meta"] = request_meta
        raw = await session.request(
            "tools/call", params, timeout=None, max_time=session.config.max_call_time
        )
        result = decode_result("tools/call", raw)
        if isinstance(result, CallToolResult):
            return result
        return _polled(session.server, mode, result, path="$.result")

    async def _get(self, task: _Task, watch: _ProgressWatch | None) -> _Polled:
        """One ``tasks/get``, on the server's current connection: a connection lost on the
        way is waited for (the caller's deadline bounds it) and the same task polled on the
        next one."""
        while True:
            session = await self.session_for(task.server)
            if watch is not None:
                await watch.follow(session)
            try:
                raw = await session.request(
                    "tasks/get", {"taskId": task.task_id}, timeout=session.config.timeout
                )
            except (ServerDisconnected, ServerUnavailable) as exc:
                self._lost(task, exc)
                continue
            polled = _polled(
                task.server, task.era, decode_result("tasks/get", raw), path="$.result"
            )
            if polled.info.task_id != task.task_id:
                raise InvalidMessage(
                    f"server {task.server!r} answered tasks/get for task {task.task_id!r} with "
                    f"task {polled.info.task_id!r}",
                    path="$.result.taskId",
                )
            return polled

    def _lost(self, task: _Task, exc: McpError) -> None:
        logger.info(
            "task %r of server %r: the connection was lost (%s); polling resumes on the next one",
            task.task_id,
            task.server,
            exc,
        )

    async def _follow(
        self,
        task: _Task,
        polled: _Polled,
        watch: _ProgressWatch | None,
        progress: ProgressCallback | None,
    ) -> CallToolResult:
        """Poll ``task`` until it ends; its final result."""
        with self.bus.subscribe(max_buffer=16) as events:
            while True:
                await self._report(task, polled, progress)
                status = polled.info.status
                if status in _TERMINAL:
                    return await self._outcome(task, polled)
                if status == "input_required":
                    if task.era == _LEGACY:
                        # the server's requests for input reach the host's callbacks while
                        # tasks/result waits (2025-11-25); it answers once the task has ended
                        result = await self._legacy_result(task)
                        if result is not None:
                            return result
                    else:
                        await self._answer_inputs(task, polled)
                await self._pause(task, polled, events)
                polled = await self._get(task, watch)

    async def _pause(self, task: _Task, polled: _Polled, events: EventSubscription) -> None:
        """Wait the server's poll interval, or less when it says the task changed."""
        interval = polled.info.poll_interval
        interval = DEFAULT_POLL_INTERVAL if interval is None else interval
        interval = min(max(interval, MIN_POLL_INTERVAL), MAX_POLL_INTERVAL)
        with trio.move_on_after(interval):
            async for event in events:
                if (
                    isinstance(event, TaskStatusChanged)
                    and event.server == task.server
                    and event.task_id == task.task_id
                ):
                    return

    async def _report(
        self, task: _Task, polled: _Polled, progress: ProgressCallback | None
    ) -> None:
        """A status (or status message) not reported yet goes to the host as progress."""
        info = polled.info
        seen = (info.status, info.status_message)
        if progress is None or seen == task.last:
            task.last = seen
            return
        task.last = seen
        task.reported += 1
        params = ProgressNotificationParams(
            progress_token=task.token or task.task_id,
            progress=task.reported,
            message=info.status_message or info.status,
            meta={META_RELATED_TASK: {"taskId": task.task_id}, "status": info.status},
        )
        try:
            answer = progress(params)
            if answer is not None:
                await answer
        except Exception:  # the host's callback: log it, the task goes on
            logger.exception("progress callback failed for task %r", task.task_id)

    async def _legacy_result(self, task: _Task) -> CallToolResult | None:
        """``tasks/result`` (2025-11-25): the task's result once it has ended (None when the
        connection was lost meanwhile: polling resumes)."""
        session = await self.session_for(task.server)
        try:
            raw = await session.request("tasks/result", {"taskId": task.task_id}, timeout=None)
        except (ServerDisconnected, ServerUnavailable) as exc:
            self._lost(task, exc)
            return None
        except RpcError as exc:
            task.ended = True
            raise TaskFailed(
                f"task {task.task_id!r} of server {task.server!r} failed: {exc}",
                task_id=task.task_id,
                status="failed",
                server=task.server,
                method="tools/call",
            ) from exc
        task.ended = True
        return _call_result(task, raw, "$.result")

    async def _outcome(self, task: _Task, polled: _Polled) -> CallToolResult:
        task.ended = True
        status = polled.info.status
        if status == "cancelled":
            raise TaskFailed(
                f"task {task.task_id!r} of server {task.server!r} was cancelled"
                + (f": {polled.info.status_message}" if polled.info.status_message else ""),
                task_id=task.task_id,
                status=status,
                server=task.server,
                method="tools/call",
            )
        if task.era == _LEGACY:
            task.ended = False  # ended for the server, but its result is still to be taken
            while True:
                result = await self._legacy_result(task)
                if result is not None:
                    return result
                await self._get(task, None)  # after the reconnect
        if status == "completed":
            if polled.result is None:
                raise InvalidMessage(
                    f"server {task.server!r} said task {task.task_id!r} completed without its "
                    "result",
                    path="$.result.result",
                )
            return _call_result(task, polled.result, "$.result.result")
        error = polled.error or {}
        code, message = error.get("code"), error.get("message")
        cause = (
            RpcError.from_error(code, message, error.get("data"))
            if isinstance(code, int) and isinstance(message, str)
            else None
        )
        raise TaskFailed(
            f"task {task.task_id!r} of server {task.server!r} failed"
            + (f": {cause}" if cause is not None else f" ({polled.info.status_message or status})"),
            task_id=task.task_id,
            status="failed",
            server=task.server,
            method="tools/call",
        ) from cause

    async def _answer_inputs(self, task: _Task, polled: _Polled) -> None:
        """The host's answers to the task's outstanding input requests (tasks extension), each
        asked once, sent with ``tasks/update`` (again after a lost connection)."""
        requests = polled.input_requests or {}
        new = {key: item for key, item in requests.items() if key not in task.answers}
        if new:
            if task.input_rounds >= self.config.max_input_rounds:
                raise InputRoundsExceeded(
                    f"server {task.server!r} still asked for input to finish task "
                    f"{task.task_id!r} after {task.input_rounds} rounds (max_input_rounds is "
                    f"{self.config.max_input_rounds}), so the task was abandoned",
                    rounds=task.input_rounds,
                    server=task.server,
                    method="tools/call",
                )
            task.input_rounds += 1
            answers = await answer_input_requests(
                new,
                answer=lambda method, params: answer_input(
                    self.callbacks, task.server, method, params
                ),
                method="tools/call",
                server=task.server,
                path="$.result.inputRequests",
            )
            task.answers.update(answers)
        unsent = {
            key: value
            for key, value in task.answers.items()
            if key in requests and key not in task.sent
        }
        if not unsent:
            return
        session = await self.session_for(task.server)
        try:
            await session.request(
                "tasks/update",
                {"taskId": task.task_id, "inputResponses": unsent},
                timeout=session.config.timeout,
            )
        except (ServerDisconnected, ServerUnavailable) as exc:
            self._lost(task, exc)
            return
        task.sent.update(unsent)

    async def cancel(self, server: str, task_id: str) -> None:
        """``tasks/cancel`` on the server's current connection (waiting for one)."""
        session = await self.session_for(server)
        await session.request("tasks/cancel", {"taskId": task_id}, timeout=session.config.timeout)

    async def _cancel_quietly(self, task: _Task, why: str) -> None:
        """``tasks/cancel`` on the way out of a call, shielded and bounded; a failure is
        logged (the server ends the task at its ``ttl`` anyway)."""
        task.ended = True
        with trio.CancelScope(shield=True), trio.move_on_after(CANCEL_GRACE) as bounded:
            try:
                await self.cancel(task.server, task.task_id)
            except McpError as exc:
                logger.warning(
                    "task %r of server %r (%s): tasks/cancel failed: %s",
                    task.task_id,
                    task.server,
                    why,
                    exc,
                )
                return
        if bounded.cancelled_caught:
            logger.warning(
                "task %r of server %r (%s): tasks/cancel got no answer in %g s",
                task.task_id,
                task.server,
                why,
                CANCEL_GRACE,
            )
        else:
            logger.info("task %r of server %r cancelled (%s)", task.task_id, task.server, why)


def _call_result(task: _Task, raw: Mapping[str, Any], path: str) -> CallToolResult:
    result = decode_result("tools/call", raw, path=path)
    if not isinstance(result, CallToolResult):
        raise InvalidMessage(
            f"server {task.server!r} gave task {task.task_id!r} a {type(result).__name__} "
            "for a result",
            path=path,
        )
    return result


def _why_not(session: Session, tool: Tool) -> str:
    info = session.info
    if info is not None and info.era is Era.MODERN:
        return f"the server does not offer the tasks extension ({TASKS_EXTENSION})"
    caps = info.capabilities if info is not None else None
    if caps is None or caps.tasks is None or not caps.tasks.supports_request("tools/call"):
        return "the server does not declare tasks for tools/call"
    support = tool.execution.task_support if tool.execution is not None else None
    return f"its execution.taskSupport is {support or 'forbidden'!r}"


def _new_token() -> str:
    return f"trio-mcp-task-{uuid.uuid4().hex}"


@attrs.define(eq=False)
class _ProgressWatch:
    """The server's progress for a task's token, on whichever connection is current: a child
    of the caller's task per connection (:meth:`Session.watch_progress`)."""

    nursery: trio.Nursery
    token: str | None
    progress: ProgressCallback | None
    _session: Session | None = None
    _scope: trio.CancelScope | None = None

    async def follow(self, session: Session) -> None:
        """Watch ``session`` (and stop watching the one before)."""
        if self.progress is None or self.token is None or session is self._session:
            await trio.lowlevel.checkpoint()
            return
        if self._scope is not None:
            self._scope.cancel()
        self._session = session
        self._scope = trio.CancelScope()
        await self.nursery.start(_watch, session, self.token, self.progress, self._scope)


async def _watch(
    session: Session,
    token: str,
    progress: ProgressCallback,
    scope: trio.CancelScope,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    with scope:
        await session.watch_progress(token, progress, task_status=task_status)


@attrs.define(eq=False)
class TaskHandle:
    """A task the host holds (``rt.start_task`` / ``rt.resume_task``): poll it
    (:meth:`status`), wait for its result (:meth:`result`), cancel it (:meth:`cancel`). Its id
    is kept in the runtime's task store until its result was taken or it was cancelled, so a
    later process can ``rt.resume_task(server, task_id)``.

    ``task_id`` is None when the server ran the call at once instead (a 2026-07-28 server
    decides): then :meth:`result` returns that result and there is nothing to cancel."""

    server: str
    task_id: str | None
    tool: str | None
    _runner: TaskRunner = attrs.field(alias="runner")
    era: str = _LEGACY
    _token: str | None = attrs.field(default=None, alias="token")
    #: What the server last said about the task (None until it was asked, after a resume).
    info: TaskInfo | None = None
    wire_name: str | None = None
    _final: CallToolResult | None = attrs.field(default=None, alias="final")
    #: Set by the runtime: checks a result against the tool's ``outputSchema``.
    check: Callable[[CallToolResult], Awaitable[None]] | None = None

    def _task(self) -> _Task:
        assert self.task_id is not None
        return _Task(server=self.server, task_id=self.task_id, era=self.era, token=self._token)

    async def status(self) -> TaskInfo:
        """Ask the server (``tasks/get``) where the task is now; waits for a reconnect when
        the connection is down. Raises :class:`RpcError` (-32602: the server does not know
        the task, or no longer)."""
        if self.task_id is None:  # the server answered at once: nothing runs
            await trio.lowlevel.checkpoint()
            return TaskInfo(server=self.server, task_id="", status="completed", era=self.era)
        polled = await self._runner._get(self._task(), None)
        self.info = polled.info
        return polled.info

    async def result(
        self, *, timeout: float | None = None, progress: ProgressCallback | None = None
    ) -> CallToolResult:
        """Follow the task to its end and return its result (checked against the tool's
        ``outputSchema``), as ``rt.call`` does; the task's id is then forgotten by the store.
        ``timeout`` (seconds, None: none) raises :class:`CallTimeout` but leaves the task
        running (wait again, or :meth:`cancel`); so does cancelling the caller. Raises
        :class:`TaskFailed` when it failed or was cancelled."""
        if self._final is not None:
            await trio.lowlevel.checkpoint()
            return self._final
        task = self._task()
        with trio.move_on_after(math.inf if timeout is None else timeout):
            with collapse_exception_group():
                async with trio.open_nursery() as nursery:
                    watch = _ProgressWatch(nursery, self._token, progress)
                    polled = await self._runner._get(task, watch)
                    self.info = polled.info
                    try:
                        result = await self._runner._follow(task, polled, watch, progress)
                    except TaskFailed:
                        await self._runner._forget(self.server, task.task_id)
                        raise
                    nursery.cancel_scope.cancel()
            if self.check is not None:
                await self.check(result)
            self._final = result
            await self._runner._forget(self.server, task.task_id)
            return result
        assert timeout is not None
        raise CallTimeout(
            f"task {task.task_id!r} of server {self.server!r} did not end in {timeout:g} s "
            "(it goes on: wait again, or cancel it)",
            timeout=timeout,
            server=self.server,
            method="tools/call",
        )

    async def cancel(self) -> None:
        """``tasks/cancel``, and forget the task's id. Raises :class:`RpcError` (-32602: the
        server does not know the task, or it has ended already)."""
        if self.task_id is None:
            await trio.lowlevel.checkpoint()
            return
        try:
            await self._runner.cancel(self.server, self.task_id)
        finally:
            await self._runner._forget(self.server, self.task_id)
