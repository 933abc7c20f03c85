"""Session: one connection generation to one server.

A session owns a nursery with the transport reader, the single writer, the list_changed debouncer
and one task per server request. Calls register a one-shot waiter in :class:`PendingCalls`, hand
their bytes to the writer and wait. The reader correlates each answer through the sans-IO
:class:`JsonRpcConnection` and resolves the waiter synchronously.

When the connection ends, the reader calls the supervisor's ``on_lost`` *before* anything else
happens: every waiting call fails at once with :class:`ServerDisconnected`, and the registry
withdraws the server's tools in the same step.

Transports made of many requests (HTTP) add two optional hooks, which the session uses when the
transport has them:

- ``set_request_failure_handler(callback)``: ``callback(request_id, error, sent)`` fails one call
  with a transport error of its own (an HTTP error status, a response stream lost), which is never
  disguised as a JSON-RPC error from the server;
- session expiry: ``receive()`` raises :class:`SessionExpired` once when the server ended the
  HTTP session. Without ending the connection generation the session then pauses its writer,
  re-runs ``initialize`` and ``notifications/initialized`` ahead of every queued frame, fails the
  calls lost in flight as outcome unknown, has the transport re-send what the server refused
  (``resume()``), sets the log level again and re-lists the tools. A second expiry while this is
  going on, or a failed re-initialize, ends the connection (the supervisor reconnects), and the
  refused calls then fail as never sent (``discard_held()``).
"""

from __future__ import annotations

import functools
import heapq
import itertools
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import attrs
import outcome
import trio

from ...protocol._codec import structure, unstructure
from ...protocol._errors import (
    CallTimeout,
    HttpStatusError,
    InvalidMessage,
    ListingTooLarge,
    LocalProtocolError,
    McpError,
    RemoteProtocolError,
    RpcError,
    ServerDisconnected,
    SessionExpired,
    TransportClosed,
    TransportError,
)
from ...protocol._jsonrpc import (
    ErrorReceived,
    JsonRpcConnection,
    Notification,
    NotificationReceived,
    Request,
    RequestId,
    RequestReceived,
    ResponseReceived,
    UnexpectedResponse,
    parse_message,
    serialize,
)
from ...protocol._methods import decode_notification, decode_params, decode_result
from ...protocol._types import (
    CallToolResult,
    InitializeResult,
    ProgressNotificationParams,
    Prompt,
    Resource,
    ResourceTemplate,
    ServerCapabilities,
    Tool,
)
from ...protocol._versions import LATEST_LEGACY, check_initialize_answer, features
from ...transports._base import Transport
from ..config._config import RuntimeConfig, ServerConfig
from ._callbacks import HostCallbacks
from ._events import ResourceUpdated, ServerLogged
from ._pending import PendingCalls, Waiter
from ._registry import ToolRefusal
from ._toolcheck import check_listing, json_size

__all__ = ["ProgressCallback", "Session", "SessionInfo"]

logger = logging.getLogger("trio_mcp.session")

ProgressCallback = Callable[[ProgressNotificationParams], None]

#: Frames waiting for the writer. Small: a caller waits here when the transport is slow.
OUTBOX_SIZE: Final = 64
#: Server requests handled at once; more are answered with an error at once.
MAX_INBOUND_REQUESTS: Final = 32
#: Budget for best-effort messages sent from cleanup code (cancellation notices).
CLEANUP_BUDGET: Final = 1.0
#: The deadline heap is compacted when it holds more than this many entries beyond twice the
#: number of waiting calls (entries of answered calls are dropped lazily).
_HEAP_SLACK: Final = 64
_INF: Final = float("inf")

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


@attrs.frozen(kw_only=True)
class SessionInfo:
    """What the handshake established."""

    protocol_version: str
    server_name: str
    server_version: str
    capabilities: ServerCapabilities
    instructions: str | None


@attrs.define(eq=False)
class _Call:
    """A caller's view of one outstanding request, for progress and timer resets."""

    waiter: Waiter
    progress: ProgressCallback | None
    timeout: float | None = None
    hard_deadline: float = _INF


class _TimedOut(Exception):
    """Internal: the session's timer resolved a waiter whose deadline passed. Never escapes
    :meth:`Session.request` (it becomes a :class:`CallTimeout`)."""


@attrs.define(eq=False)
class Session:
    """One connection generation. Build it, then ``await nursery.start(session.run)``."""

    config: ServerConfig
    runtime: RuntimeConfig
    generation: int
    transport: Transport
    callbacks: HostCallbacks
    #: Called once, synchronously, when the connection ends (with the reason).
    on_lost: Callable[[Session, str], None]
    #: Called synchronously with every relisted catalog (kind, entries, refusals).
    on_listing: Callable[[Session, str, tuple[Any, ...], tuple[ToolRefusal, ...]], None]
    #: Called synchronously with events for the host (logs, resource updates).
    publish: Callable[[ServerLogged | ResourceUpdated], None]

    info: SessionInfo | None = attrs.field(default=None, init=False)
    tools: tuple[Tool, ...] = attrs.field(default=(), init=False)
    tool_refusals: tuple[ToolRefusal, ...] = attrs.field(default=(), init=False)
    resources: tuple[Resource, ...] | None = attrs.field(default=None, init=False)
    resource_templates: tuple[ResourceTemplate, ...] | None = attrs.field(default=None, init=False)
    prompts: tuple[Prompt, ...] | None = attrs.field(default=None, init=False)

    _conn: JsonRpcConnection = attrs.field(factory=JsonRpcConnection, init=False)
    _pending: PendingCalls = attrs.field(init=False)
    _calls: dict[RequestId, _Call] = attrs.field(factory=dict, init=False)
    _progress_tokens: dict[int | str, RequestId] = attrs.field(factory=dict, init=False)
    _token_counter: itertools.count[int] = attrs.field(factory=itertools.count, init=False)
    _outbox_send: trio.MemorySendChannel[tuple[bytes, Waiter | None]] = attrs.field(init=False)
    _outbox_receive: trio.MemoryReceiveChannel[tuple[bytes, Waiter | None]] = attrs.field(
        init=False
    )
    _nursery: trio.Nursery | None = attrs.field(default=None, init=False)
    #: (deadline, sequence, waiter): every call's timeout, in one heap for the timer task.
    _deadlines: list[tuple[float, int, Waiter]] = attrs.field(factory=list, init=False)
    _deadline_seq: itertools.count[int] = attrs.field(factory=itertools.count, init=False)
    #: Frames handed to the writer and not written yet.
    _unwritten: int = attrs.field(default=0, init=False)
    #: The transport's ``try_send`` hook (write now if it can be done whole), if it has one.
    _try_send: Callable[[bytes], bool] | None = attrs.field(default=None, init=False)
    #: The timer task's sleep (its deadline is the earliest live call deadline), once running.
    _timer_scope: trio.CancelScope | None = attrs.field(default=None, init=False)
    _inbound: dict[RequestId, trio.CancelScope] = attrs.field(factory=dict, init=False)
    _relist_kinds: set[str] = attrs.field(factory=set, init=False)
    _relist_wanted: trio.Event = attrs.field(factory=trio.Event, init=False)
    _last_notice_at: float = attrs.field(default=0.0, init=False)
    _lost_reason: str | None = attrs.field(default=None, init=False)
    _batches: bool = attrs.field(default=False, init=False)
    _log: logging.Logger = attrs.field(init=False)
    #: Set once the first handshake and listing are done.
    _established: bool = attrs.field(default=False, init=False)
    #: Set while a new HTTP session is being initialized after the old one expired.
    _reinitializing: bool = attrs.field(default=False, init=False)
    #: Set when the writer may send; cleared while a new session is being initialized.
    _writer_open: trio.Event = attrs.field(factory=trio.Event, init=False)

    def __attrs_post_init__(self) -> None:
        self._pending = PendingCalls(self.config.name)
        self._outbox_send, self._outbox_receive = trio.open_memory_channel(OUTBOX_SIZE)
        self._log = logging.getLogger(f"trio_mcp.server.{self.config.name}")
        self._writer_open.set()
        try_send = getattr(self.transport, "try_send", None)
        self._try_send = try_send if callable(try_send) else None

    # ------------------------------------------------------------------ lifecycle

    @property
    def server(self) -> str:
        return self.config.name

    @property
    def pending(self) -> PendingCalls:
        return self._pending

    @property
    def closed(self) -> bool:
        return self._lost_reason is not None

    async def run(
        self, *, task_status: trio.TaskStatus[Session] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Handshake, first listing, then serve until the connection ends.

        ``task_status.started(self)`` is called once the server is ready to take calls. Raises
        :class:`TransportClosed` (or the protocol error that ended the connection) when the
        connection ends; returns normally only when cancelled from outside.
        """
        set_handler = getattr(self.transport, "set_request_failure_handler", None)
        if callable(set_handler):
            set_handler(self._on_request_failure)
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                await nursery.start(self._timer)
                nursery.start_soon(self._reader)
                nursery.start_soon(self._writer)
                await self._handshake()
                self._established = True
                nursery.start_soon(self._debouncer)
                task_status.started(self)
        finally:
            self.lose("session ended")

    def lose(self, reason: str) -> None:
        """The connection is gone: fail every waiting call and tell the supervisor. Sync,
        idempotent."""
        if self._lost_reason is not None:
            return
        self._lost_reason = reason
        self._conn.connection_lost()  # the pending table below fails every waiter
        self._outbox_send.close()
        self._pending.fail_all(reason)
        self.on_lost(self, reason)

    # ------------------------------------------------------------------ handshake

    def _initialize_params(self) -> dict[str, Any]:
        return {
            "protocolVersion": LATEST_LEGACY,
            "capabilities": self.callbacks.client_capabilities(),
            "clientInfo": {
                "name": self.runtime.client_name,
                "version": self.runtime.client_version or _package_version(),
            },
        }

    def _adopt(self, raw: Mapping[str, Any]) -> tuple[str, InitializeResult]:
        """Check the answer to ``initialize`` and take what it settles (sync)."""
        result = decode_result("initialize", raw)
        assert isinstance(result, InitializeResult)
        version = check_initialize_answer(LATEST_LEGACY, result.protocol_version)
        self._batches = features(version).batches
        # Transports that carry the version themselves (HTTP: the MCP-Protocol-Version header).
        set_version = getattr(self.transport, "set_protocol_version", None)
        if callable(set_version):
            set_version(version)
        self.info = SessionInfo(
            protocol_version=version,
            server_name=result.server_info.name,
            server_version=result.server_info.version,
            capabilities=result.capabilities,
            instructions=result.instructions,
        )
        return version, result

    async def _handshake(self) -> None:
        timeout = self.config.connect_timeout
        raw = await self.request("initialize", self._initialize_params(), timeout=timeout)
        version, result = self._adopt(raw)
        await self.notify("notifications/initialized")
        caps = result.capabilities
        if self.config.log_level is not None and caps.logging is not None:
            await self.request(
                "logging/setLevel", {"level": self.config.log_level}, timeout=timeout
            )
        if caps.tools is not None:
            await self._relist("tools")
        self._log.info(
            "connected: %s %s, protocol %s, %d tools",
            result.server_info.name,
            result.server_info.version,
            version,
            len(self.tools),
        )

    # ------------------------------------------------------------------ calls

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout: float | None,
        progress: ProgressCallback | None = None,
        progress_resets_timeout: bool = False,
        max_time: float | None = None,
    ) -> Mapping[str, Any]:
        """Send a request and wait for its result (the raw ``result`` object).

        Raises :class:`RpcError` (the server answered with an error), :class:`CallTimeout` (no
        answer in ``timeout`` seconds; the server is sent ``notifications/cancelled``), or
        :class:`ServerDisconnected` (its ``sent`` says whether the request had gone out).
        """
        token: int | None = None
        if progress is not None or progress_resets_timeout:
            token = next(self._token_counter)
            meta = dict(params.get("_meta") or {}) if params else {}
            meta["progressToken"] = token
            params = {**(params or {}), "_meta": meta}
        try:
            request = self._conn.start_request(method, params)
        except LocalProtocolError:
            raise ServerDisconnected(
                f"server {self.server!r} disconnected before {method} was sent: "
                f"{self._lost_reason or 'connection closed'}",
                server=self.server,
                sent=False,
            ) from None
        waiter = self._pending.add(request.id, method)
        call: _Call | None = None
        if token is not None:
            call = _Call(waiter=waiter, progress=progress)
            self._calls[request.id] = call
            self._progress_tokens[token] = request.id
        start = trio.current_time()
        try:
            try:
                frame = serialize(request)
                if not self._send_now(frame, waiter):
                    await self._queue((frame, waiter))
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                raise ServerDisconnected(
                    f"server {self.server!r} disconnected before {method} was sent: "
                    f"{self._lost_reason or 'connection closed'}",
                    server=self.server,
                    sent=False,
                ) from None
            deadline = _INF if timeout is None else start + timeout
            hard_deadline = _INF if max_time is None else start + max_time
            if call is not None:
                call.timeout = timeout if progress_resets_timeout else None
                call.hard_deadline = hard_deadline
            self._set_deadline(waiter, min(deadline, hard_deadline))
            try:
                return await waiter.wait()
            except _TimedOut:
                pass
            self._tell_abandoned(request, waiter)
            waited = trio.current_time() - start
            raise CallTimeout(
                f"{method} to server {self.server!r} got no answer in {waited:g} s",
                timeout=timeout if timeout is not None else waited,
                server=self.server,
                method=method,
                request_id=request.id,
            )
        finally:
            if token is not None:
                self._calls.pop(request.id, None)
                self._progress_tokens.pop(token, None)
            if not waiter.done:
                self._abandon(request, waiter)

    # ------------------------------------------------------------------ call deadlines

    def _set_deadline(self, waiter: Waiter, deadline: float) -> None:
        """Give a waiting call its (new) deadline: the timer task fails it then. Sync.

        One heap and one timer task per session instead of a cancel scope per call: the heap
        keeps superseded entries (answered calls, reset timers) until they surface or the heap
        is compacted, which costs O(1) per call on average."""
        waiter.deadline = deadline
        if deadline == _INF:
            return
        heap = self._deadlines
        if len(heap) > 2 * len(self._pending) + _HEAP_SLACK:
            heap[:] = [entry for entry in heap if _live(entry)]
            heapq.heapify(heap)
        heapq.heappush(heap, (deadline, next(self._deadline_seq), waiter))
        scope = self._timer_scope
        if scope is not None and deadline < scope.deadline:
            scope.deadline = deadline

    async def _timer(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Fail each waiting call whose deadline has passed (with :class:`_TimedOut`, which its
        caller turns into a :class:`CallTimeout`), then sleep until the next deadline."""
        heap = self._deadlines
        task_status.started()
        while True:
            now = trio.current_time()
            while heap:
                deadline, _, waiter = heap[0]
                if not _live(heap[0]):
                    heapq.heappop(heap)
                elif deadline <= now:
                    heapq.heappop(heap)
                    self._pending.discard(waiter.request_id)
                    waiter.resolve(outcome.Error(_TimedOut()))
                else:
                    break
            with trio.CancelScope(deadline=heap[0][0] if heap else _INF) as scope:
                self._timer_scope = scope
                await trio.sleep_forever()
            self._timer_scope = None

    def _send_now(self, frame: bytes, waiter: Waiter) -> bool:
        """On an idle connection, write the request from the caller's task, past the writer (a
        pass through the scheduler less per call). Returns whether it was written.

        Only when this is the only call waiting and nothing is queued for the writer (so the
        order of frames is kept, notifications included), and only through the transport's
        ``try_send`` (written whole at once, or not at all). Under load the writer batches."""
        try_send = self._try_send
        if (
            try_send is None
            or self._unwritten
            or len(self._pending) != 1
            or not self._writer_open.is_set()
        ):
            return False
        waiter.sent = True
        try:
            if try_send(frame):
                return True
        except TransportError:
            pass  # queued instead: the writer meets the same error and ends the connection
        waiter.sent = False
        return False

    async def _queue(self, item: tuple[bytes, Waiter | None]) -> None:
        """Hand a frame to the writer. Raises trio's Closed/BrokenResourceError once the
        connection is gone."""
        try:
            self._outbox_send.send_nowait(item)
        except trio.WouldBlock:
            self._unwritten += 1
            queued = False
            try:
                await self._outbox_send.send(item)
                queued = True
            finally:
                if not queued:
                    self._unwritten -= 1
        else:
            self._unwritten += 1

    def _abandon(self, request: Request, waiter: Waiter) -> None:
        """The caller stopped waiting (cancellation): tell the server if it heard us."""
        self._pending.discard(request.id)
        waiter.resolve(outcome.Error(trio.TooSlowError("abandoned by its caller")))
        self._tell_abandoned(request, waiter)

    def _tell_abandoned(self, request: Request, waiter: Waiter) -> None:
        """Forget a request nobody waits for; send ``notifications/cancelled`` if it went out."""
        notice = self._conn.cancel(request.id, "the client stopped waiting")
        if notice is None or not waiter.sent or request.method == "initialize":
            return
        self._send_best_effort(serialize(notice))

    def _send_best_effort(self, frame: bytes) -> None:
        try:
            self._outbox_send.send_nowait((frame, None))
            self._unwritten += 1
        except trio.WouldBlock:
            if self._nursery is not None:
                self._nursery.start_soon(self._send_later, frame)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the connection is gone; nothing to tell

    async def _send_later(self, frame: bytes) -> None:
        with trio.move_on_after(CLEANUP_BUDGET):
            try:
                await self._queue((frame, None))
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return

    async def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        """Send a notification. Raises :class:`ServerDisconnected` when the connection is gone."""
        frame = serialize(self._conn.notification(method, params))
        try:
            await self._queue((frame, None))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise ServerDisconnected(
                f"server {self.server!r} disconnected before {method} was sent",
                server=self.server,
                sent=False,
            ) from None

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None,
        *,
        timeout: float | None,
        progress: ProgressCallback | None = None,
    ) -> CallToolResult:
        """``tools/call`` with the server's own tool name; the decoded result."""
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = dict(arguments)
        raw = await self.request(
            "tools/call",
            params,
            timeout=timeout,
            progress=progress,
            progress_resets_timeout=self.config.progress_resets_timeout,
            max_time=self.config.max_call_time,
        )
        result = decode_result("tools/call", raw)
        if not isinstance(result, CallToolResult):
            raise InvalidMessage(
                f"server {self.server!r} answered tools/call with a "
                f"{type(result).__name__}, which this protocol revision does not allow",
                path="$.result",
            )
        return result

    # ------------------------------------------------------------------ listing

    async def list_all(self, method: str, key: str) -> list[Any]:
        """Every entry of a paginated listing (raw JSON objects), following ``nextCursor``.

        Raises :class:`ListingTooLarge` past the caps or on a cursor cycle.
        """
        entries: list[Any] = []
        seen: set[str] = set()
        cursor: str | None = None
        for page in itertools.count(1):
            raw = await self.request(
                method,
                {"cursor": cursor} if cursor is not None else None,
                timeout=self.config.timeout,
            )
            items = raw.get(key)
            if not isinstance(items, list):
                raise InvalidMessage(
                    f"server {self.server!r}: {method} result has no {key!r} array",
                    path=f"$.result.{key}",
                )
            entries.extend(items)
            if len(entries) > self.runtime.max_list_entries:
                raise ListingTooLarge(
                    f"server {self.server!r}: {method} returned more than "
                    f"{self.runtime.max_list_entries} entries (max_list_entries)"
                )
            cursor = raw.get("nextCursor")
            if cursor is None:
                return entries
            if not isinstance(cursor, str):
                raise InvalidMessage(
                    f"server {self.server!r}: {method} nextCursor is not a string",
                    path="$.result.nextCursor",
                )
            if cursor in seen:
                raise ListingTooLarge(
                    f"server {self.server!r}: {method} cursors go round in a circle "
                    f"(cursor {cursor[:40]!r} came back)"
                )
            if page >= self.runtime.max_list_pages:
                raise ListingTooLarge(
                    f"server {self.server!r}: {method} has more than "
                    f"{self.runtime.max_list_pages} pages (max_list_pages)"
                )
            seen.add(cursor)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _relist(self, kind: str) -> None:
        match kind:
            case "tools":
                raw = await self.list_all("tools/list", "tools")
                tools, refused = await self._check_tools(raw)
                self.tools, self.tool_refusals = tools, refused
                self.on_listing(self, "tools", tools, refused)
            case "resources":
                raw = await self.list_all("resources/list", "resources")
                self.resources = _decode_each(raw, Resource, "resources")
                self.on_listing(self, "resources", self.resources, ())
            case "prompts":
                raw = await self.list_all("prompts/list", "prompts")
                self.prompts = _decode_each(raw, Prompt, "prompts")
                self.on_listing(self, "prompts", self.prompts, ())
            case _:  # pragma: no cover - kinds are ours
                raise AssertionError(kind)

    async def _check_tools(
        self, raw: list[Any]
    ) -> tuple[tuple[Tool, ...], tuple[ToolRefusal, ...]]:
        """Apply the registration checks of :func:`check_listing` to a complete listing: the
        include/exclude filters, malformed entries, the input schema and the injection scan
        under the runtime's ``security_policy``. A bad tool is refused alone, never its server.

        A listing with more than ``offload_chars`` characters of text is checked in a worker
        thread, so a hostile listing cannot stall the event loop. Refusals and warnings are
        logged under ``trio_mcp.server.<name>``."""
        check = functools.partial(
            check_listing,
            raw,
            server=self.server,
            include=self.config.tools_include,
            exclude=self.config.tools_exclude,
            policy=self.runtime.security_policy,
        )
        limit = self.runtime.offload_chars
        if json_size(raw, limit=limit) > limit:
            checked = await trio.to_thread.run_sync(check)
        else:
            checked = check()
        for warning in checked.warnings:
            if warning.tool is None:
                self._log.warning("tools/list: %s", warning.message)
            else:
                self._log.warning("tool %r: %s", warning.tool, warning.message)
        for refusal in checked.refused:
            self._log.warning("tool %r refused: %s", refusal.tool, refusal.reason)
        return checked.tools, checked.refused

    async def _debouncer(self) -> None:
        """Re-list after list_changed notifications, once they have been quiet for a while."""
        debounce = self.runtime.list_changed_debounce
        while True:
            await self._relist_wanted.wait()
            # Debounce: each new notification moves the quiet deadline, so this is a deadline
            # that moves, not a condition an Event could signal.
            while (quiet_at := self._last_notice_at + debounce) > trio.current_time():  # noqa: ASYNC110
                await trio.sleep_until(quiet_at)
            kinds = sorted(self._relist_kinds)
            self._relist_kinds.clear()
            self._relist_wanted = trio.Event()
            for kind in kinds:
                try:
                    await self._relist(kind)
                except (RpcError, RemoteProtocolError, CallTimeout) as exc:
                    self._log.warning("re-listing %s failed: %s", kind, exc)

    def _want_relist(self, kind: str) -> None:
        self._relist_kinds.add(kind)
        self._last_notice_at = trio.current_time()
        self._relist_wanted.set()

    # ------------------------------------------------------------------ transport tasks

    async def _writer(self) -> None:
        """The only task that sends on the transport."""
        receive = self._outbox_receive
        send_many = getattr(self.transport, "send_many", None)
        async for item in receive:
            if not self._writer_open.is_set():
                await self._writer_open.wait()  # a new session is being initialized
            batch: list[bytes] = []
            taken = 0
            while True:
                taken += 1
                frame, waiter = item
                if waiter is None:
                    batch.append(frame)
                elif not waiter.done:  # else its caller gave up before it went out
                    waiter.sent = True
                    batch.append(frame)
                if send_many is None or len(batch) >= 64:
                    break
                try:
                    item = receive.receive_nowait()
                except (trio.WouldBlock, trio.EndOfChannel):
                    break
            try:
                if len(batch) == 1:
                    await self.transport.send(batch[0])
                elif batch and send_many is not None:
                    await send_many(batch)
            except TransportError as exc:
                self.lose(f"sending failed: {exc}")
                raise
            self._unwritten -= taken

    async def _reader(self) -> None:
        """Read frames until the connection ends; correlate and dispatch each message.

        A transport with ``set_frame_handler`` (stdio) hands each frame to the session from its
        own reader task, synchronously, while this task waits for the end of the connection;
        the handler is removed when this task ends, so no frame is handled after the session's
        nursery has closed. Otherwise, after each frame this task takes every frame the
        transport has ready (``receive_nowait``, when it has it) before it waits again: one
        pass through the scheduler for a batch of answers instead of one per answer."""
        set_frame_handler: Callable[..., None] | None = getattr(
            self.transport, "set_frame_handler", None
        )
        receive_nowait: Callable[[], bytes | None] | None = getattr(
            self.transport, "receive_nowait", None
        )
        try:
            if set_frame_handler is not None:
                set_frame_handler(self._on_pushed_frame, self._on_transport_end)
            while True:
                try:
                    frame = await self.transport.receive()
                except SessionExpired as exc:
                    self._on_session_expired(exc)
                    continue
                self._handle_frame(frame)
                if receive_nowait is not None:
                    while (ready := receive_nowait()) is not None:
                        self._handle_frame(ready)
        except (TransportError, RemoteProtocolError) as exc:
            self.lose(_loss_reason(exc))
            raise
        finally:
            if set_frame_handler is not None:
                set_frame_handler(None)

    def _on_transport_end(self, error: McpError) -> None:
        """The transport says, from its own task, that the connection has ended (after the last
        frame): fail every waiting call now, without waiting for this session's reader task
        to be scheduled (it then ends with the same error). Sync."""
        self.lose(_loss_reason(error))

    def _on_pushed_frame(self, frame: bytes) -> None:
        """A frame the transport hands over from its own reader task (``set_frame_handler``):
        handled at once, synchronously, like one the reader task received; ignored once the
        connection is lost."""
        if self._lost_reason is None:
            self._handle_frame(frame)

    def _handle_frame(self, frame: bytes) -> None:
        try:
            parsed = parse_message(frame, allow_batch=self._batches)
        except InvalidMessage as exc:
            self._bad_frame(frame, exc)
            return
        for message in parsed if isinstance(parsed, tuple) else (parsed,):
            try:
                self._handle_message(message)
            except RemoteProtocolError as exc:
                # e.g. a server request reusing the id of one still in flight: refuse that
                # message alone; the connection and every other call go on.
                self._log.warning("message from the server refused: %s", exc)

    def _bad_frame(self, frame: bytes, exc: InvalidMessage) -> None:
        """A frame that is not a valid JSON-RPC message: fail the call it answers, if that can
        be told; the connection goes on either way."""
        self._log.warning("invalid message from the server: %s", exc)
        try:
            obj = json.loads(frame)
        except ValueError:
            return
        request_id = obj.get("id") if isinstance(obj, dict) else None
        if isinstance(request_id, int | str) and not isinstance(request_id, bool):
            self._fail_outstanding(request_id, lambda method: exc)

    def _fail_outstanding(
        self, request_id: RequestId, error_for: Callable[[str], McpError]
    ) -> str | None:
        """Fail the call waiting for ``request_id`` with ``error_for(its method)``, once, and
        forget the request; returns the method, or None when nothing is outstanding under that
        id (answered, abandoned or failed already). Sync."""
        method = self._conn.outstanding.get(request_id)
        if method is None or not self._conn.forget(request_id):
            return None
        self._pending.resolve(request_id, outcome.Error(error_for(method)))
        return method

    def _handle_message(self, message: Any) -> None:
        event = self._conn.receive(message)
        match event:
            case ResponseReceived(id=request_id, result=result):
                self._pending.resolve(request_id, outcome.Value(result))
            case ErrorReceived(id=None, error=error):
                self._log.warning("server reported an error: %s %s", error.code, error.message)
            case ErrorReceived(id=request_id, method=method, error=error):
                assert request_id is not None
                exc = RpcError.from_error(
                    error.code,
                    error.message,
                    error.data,
                    server=self.server,
                    method=method,
                    request_id=request_id,
                )
                self._pending.resolve(request_id, outcome.Error(exc))
            case UnexpectedResponse():
                self._log.debug("late or unknown response ignored: %r", event)
            case RequestReceived(request=request):
                self._start_inbound(request)
            case NotificationReceived(notification=notification):
                self._on_notification(notification)

    # ------------------------------------------------------------------ HTTP sessions

    def _on_request_failure(self, request_id: RequestId, error: McpError, sent: bool) -> None:
        """The transport failed one request on its own (an HTTP error status, a response stream
        lost): fail that call with ``error``, never as a JSON-RPC error. Sync."""
        if isinstance(error, ServerDisconnected):
            failure: McpError = ServerDisconnected(
                f"server {self.server!r}: {error}", server=self.server, sent=sent
            )
            failure.__cause__ = error
        elif isinstance(error, HttpStatusError):
            failure = HttpStatusError(
                f"server {self.server!r}: {error}", status=error.status, body=error.body
            )
            failure.__cause__ = error
        else:
            failure = error
        method = self._fail_outstanding(request_id, lambda method: failure)
        if method is not None:
            self._log.info("%s (request %r) failed: %s", method, request_id, failure)

    def _on_session_expired(self, notice: SessionExpired) -> None:
        """The server ended the HTTP session: start initializing a new one (single flight).

        Raises :class:`TransportClosed` (which ends the connection) when that cannot be done:
        during the first handshake, while a new session is already being initialized, or when the
        transport cannot re-send what it held back."""
        resume = getattr(self.transport, "resume", None)
        if not self._established or self._reinitializing or not callable(resume):
            when = (
                "again while a new session was being initialized"
                if self._reinitializing
                else "before the session was established"
            )
            self._discard_held()
            raise TransportClosed(f"{notice} ({when}); reconnecting") from notice
        self._reinitializing = True
        self._writer_open = trio.Event()  # pause the writer: the new initialize goes first
        for request_id in notice.lost:
            self._fail_outstanding(
                request_id,
                lambda method: ServerDisconnected(
                    f"server {self.server!r} ended its session while {method} was in flight: "
                    "the outcome is unknown and the request is not re-sent",
                    server=self.server,
                    sent=True,
                ),
            )
        self._log.warning(
            "the server ended the session (%d calls lost in flight); initializing a new one",
            len(notice.lost),
        )
        assert self._nursery is not None
        self._nursery.start_soon(self._reinitialize)

    async def _reinitialize(self) -> None:
        """Initialize a new session ahead of every queued frame, let the transport re-send what
        the server refused, then restore the log level and re-list the tools."""
        timeout = self.config.connect_timeout
        try:
            raw = await self._direct_request("initialize", self._initialize_params(), timeout)
            version, result = self._adopt(raw)
            frame = serialize(self._conn.notification("notifications/initialized"))
            await self.transport.send(frame)
        except McpError as exc:
            self._discard_held()
            reason = f"the server ended the session and a new one could not be initialized: {exc}"
            self.lose(reason)
            raise TransportClosed(reason) from exc
        resume = getattr(self.transport, "resume", None)
        if callable(resume):
            resume()
        self._writer_open.set()
        self._log.info("a new session is initialized (protocol %s)", version)
        caps = result.capabilities
        try:
            if self.config.log_level is not None and caps.logging is not None:
                await self.request(
                    "logging/setLevel", {"level": self.config.log_level}, timeout=timeout
                )
            if caps.tools is not None:
                await self._relist("tools")
        except (RpcError, RemoteProtocolError, CallTimeout, TransportError) as exc:
            self._log.warning("after the new session, restoring its state failed: %s", exc)
        finally:
            self._reinitializing = False

    async def _direct_request(
        self, method: str, params: Mapping[str, Any], timeout: float
    ) -> Mapping[str, Any]:
        """Send a request straight to the transport, past the (paused) writer, and wait for its
        result. Raises like :meth:`request`."""
        request = self._conn.start_request(method, params)
        waiter = self._pending.add(request.id, method)
        waiter.sent = True
        try:
            await self.transport.send(serialize(request))
            with trio.move_on_after(timeout):
                return await waiter.wait()
            raise CallTimeout(
                f"{method} to server {self.server!r} got no answer in {timeout:g} s",
                timeout=timeout,
                server=self.server,
                method=method,
                request_id=request.id,
            )
        finally:
            if not waiter.done:
                self._pending.discard(request.id)
                self._conn.forget(request.id)

    def _discard_held(self) -> None:
        """No new session: the calls the transport held back fail as never sent."""
        discard = getattr(self.transport, "discard_held", None)
        held: tuple[RequestId, ...] = discard() if callable(discard) else ()
        for request_id in held:
            self._fail_outstanding(
                request_id,
                lambda method: ServerDisconnected(
                    f"server {self.server!r} ended its session before {method} was processed, "
                    "and no new session could be initialized: it is safe to retry",
                    server=self.server,
                    sent=False,
                ),
            )

    # ------------------------------------------------------------------ server -> client

    def _on_notification(self, notification: Notification) -> None:
        method, params = notification.method, notification.params
        try:
            decoded = decode_notification(method, params)
        except InvalidMessage as exc:
            self._log.warning("invalid %s notification: %s", method, exc)
            return
        match method:
            case "notifications/progress":
                self._on_progress(decoded)
            case "notifications/message":
                level = getattr(decoded, "level", "info")
                data = getattr(decoded, "data", None)
                name = getattr(decoded, "logger", None)
                self._log.log(_LOG_LEVELS.get(level, logging.INFO), "%s%s", _prefix(name), data)
                self.publish(ServerLogged(server=self.server, level=level, data=data, logger=name))
            case "notifications/tools/list_changed":
                self._want_relist("tools")
            case "notifications/resources/list_changed":
                self._want_relist("resources")
            case "notifications/prompts/list_changed":
                self._want_relist("prompts")
            case "notifications/resources/updated":
                uri = getattr(decoded, "uri", None)
                if isinstance(uri, str):
                    self.publish(ResourceUpdated(server=self.server, uri=uri))
            case "notifications/cancelled":
                request_id = getattr(decoded, "request_id", None)
                scope = self._inbound.get(request_id) if request_id is not None else None
                if scope is not None:
                    self._conn.inbound_cancelled(request_id)  # type: ignore[arg-type]
                    scope.cancel()
            case _:
                self._log.debug("notification %s ignored", method)

    def _on_progress(self, params: Any) -> None:
        if not isinstance(params, ProgressNotificationParams):
            return
        request_id = self._progress_tokens.get(params.progress_token)
        call = self._calls.get(request_id) if request_id is not None else None
        if call is None:
            return
        if call.timeout is not None and not call.waiter.done:
            self._set_deadline(
                call.waiter, min(trio.current_time() + call.timeout, call.hard_deadline)
            )
        if call.progress is not None:
            try:
                call.progress(params)
            except Exception:  # the host's callback: log it and stop calling it
                self._log.exception("progress callback failed; it is not called again")
                call.progress = None

    def _start_inbound(self, request: Request) -> None:
        if len(self._inbound) >= MAX_INBOUND_REQUESTS or self._nursery is None:
            self._answer_error(request.id, -32603, "too many concurrent requests from the server")
            return
        scope = trio.CancelScope()
        self._inbound[request.id] = scope
        self._nursery.start_soon(self._serve_inbound, request, scope)

    async def _serve_inbound(self, request: Request, scope: trio.CancelScope) -> None:
        answered = False
        try:
            with scope:
                result = await self._answer(request)
                answered = True
                if request.id in self._conn.inbound:
                    self._send_best_effort(serialize(self._conn.respond(request.id, result)))
        except RpcError as exc:
            self._answer_error(request.id, exc.code, str(exc.args[0]) if exc.args else "")
        except McpError as exc:
            self._answer_error(request.id, -32603, str(exc))
        except Exception as exc:  # the host's callback failed: answer, log, go on
            self._log.exception("handling %s from the server failed", request.method)
            self._answer_error(request.id, -32603, f"the client failed: {type(exc).__name__}")
        finally:
            self._inbound.pop(request.id, None)
            if not answered and scope.cancelled_caught:
                self._log.debug("server cancelled its %s request", request.method)

    def _answer_error(self, request_id: RequestId, code: int, message: str) -> None:
        if request_id in self._conn.inbound:
            self._send_best_effort(serialize(self._conn.respond_error(request_id, code, message)))

    async def _answer(self, request: Request) -> Mapping[str, Any]:
        method = request.method
        callbacks = self.callbacks
        if method == "ping":
            return {}
        handler: Callable[[], Awaitable[Any]] | None = None
        if method == "roots/list" and callbacks.list_roots is not None:
            list_roots = callbacks.list_roots

            async def handler() -> Any:
                return {"roots": [_wire(root) for root in await list_roots(self.server)]}

        elif method == "sampling/createMessage" and callbacks.sampling is not None:
            sampling, params = callbacks.sampling, decode_params(method, request.params)

            async def handler() -> Any:
                return await sampling(self.server, params)

        elif method == "elicitation/create" and callbacks.elicitation is not None:
            elicitation, params = callbacks.elicitation, decode_params(method, request.params)
            mode = getattr(params, "mode", None) or "form"
            if mode not in callbacks.elicitation_modes:
                raise RpcError.from_error(-32602, f"elicitation mode {mode!r} is not supported")

            async def handler() -> Any:
                return await elicitation(self.server, params)

        if handler is None:
            raise RpcError.from_error(-32601, f"method not found: {method}")
        answer = _wire(await handler())
        if not isinstance(answer, Mapping):
            raise RpcError.from_error(-32603, f"the client's {method} handler gave no object")
        return answer


def _loss_reason(error: McpError) -> str:
    """Why a connection ended, for the waiting calls and the supervisor."""
    if isinstance(error, TransportClosed):
        return str(error) or "the server closed the connection"
    return f"{type(error).__name__}: {error}"


def _live(entry: tuple[float, int, Waiter]) -> bool:
    """A deadline heap entry still counts: its call waits and the deadline is its current one."""
    waiter = entry[2]
    return not waiter.done and waiter.deadline == entry[0]


def _wire(value: Any) -> Any:
    return value if isinstance(value, Mapping) else unstructure(value)


def _prefix(name: str | None) -> str:
    return f"[{name}] " if name else ""


def _decode_each(raw: list[Any], cls: type[Any], key: str) -> tuple[Any, ...]:
    out = []
    for index, item in enumerate(raw):
        try:
            out.append(structure(item, cls, path=f"$.result.{key}[{index}]"))
        except InvalidMessage as exc:
            logger.warning("skipping malformed %s entry: %s", key, exc)
    return tuple(out)


def _package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("trio-mcp")
    except PackageNotFoundError:  # pragma: no cover - source tree never installed
        return "0+unknown"
