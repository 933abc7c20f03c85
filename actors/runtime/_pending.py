"""PendingCalls: the actor that owns one connection generation's table of waiting calls.

It is a trio task (:meth:`PendingCalls.run`) in the session's nursery, and the receiving end of
the connection: its mailbox is the :class:`~trio_mcp.transports._channel.ByteChannel` that the
transport was opened with, bounded in bytes. Two kinds of senders reach it there:

- the **transport**, with every frame the server sent and the transport's events
  (:class:`~trio_mcp.transports.StderrLine`, :class:`~trio_mcp.transports.RequestFailed`,
  :class:`~trio_mcp.transports.SessionExpiredNotice`, and last
  :class:`~trio_mcp.transports.ConnectionEnded`);
- **callers**, with :class:`Expect` (a request is about to be sent: here is its waiter; put
  before the frame goes out, so an answer can never overtake it) and :class:`Forget` (the caller
  stopped waiting);
- the session's **subscriber** (2026-07-28), with :class:`Listen`: a ``subscriptions/listen``
  is about to be sent; here is its :class:`Subscription`, the inbox of the task that owns the
  listen. A listen is not a call: it has no deadline, is not counted among the calls waiting
  (``outstanding``), and lasts until the server ends it or the subscriber forgets it.

Only this task changes the table: the sans-IO correlation machine
(:class:`~trio_mcp.protocol.JsonRpcConnection`), the waiters, the progress tokens and the
deadline heap. It parses each frame, resolves the waiter of an answer **synchronously** (the
caller's task is rescheduled with the result, no task in between), hands progress to the
waiting caller (whose own task runs the host's progress callback), fails a call whose deadline
passed (its caller then tells the server), and passes server requests, notifications and stderr
lines to the session's :class:`~trio_mcp.actors.runtime._dispatcher.Dispatcher` and a session
expiry to the session's control loop (or, on a transport that cannot start a new session, ends
the connection). Per wake-up it handles the items that are ready, at most
:data:`DRAIN_LIMIT` of them (the rest after a schedule point), and the deadline of the earliest
call is the deadline of the wait, so a flooding server can neither hold the event loop nor stop
a timeout from firing.

Once a listen was registered (a 2026-07-28 session), notifications are demultiplexed by their
``_meta["io.modelcontextprotocol/subscriptionId"]``: one that names an open listen goes to its
:class:`Subscription` (in order; the subscriber forwards what it asked for to the dispatcher),
one that names no open listen (a stale or made-up id) is dropped, one without an id goes to the
dispatcher as before. The listen's own end goes to its subscription too: the server's answer
(a graceful end), its ``notifications/cancelled`` naming the listen, an error answer, or the
transport losing the stream (:class:`~trio_mcp.transports.RequestFailed`).

When the connection ends (:class:`~trio_mcp.transports.ConnectionEnded`, the end of the
mailbox, or the session's nursery torn down), every waiter fails in one synchronous step with
:class:`ServerDisconnected`, each saying whether its request was sent (a request the transport
never took is safe to retry; one that may have gone out has an unknown outcome and is never
re-sent), and the supervisor is told.
"""

from __future__ import annotations

import contextlib
import heapq
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, Protocol, TypeAlias

import attrs
import outcome
import trio

from ...protocol._errors import (
    HttpStatusError,
    InvalidMessage,
    LocalProtocolError,
    McpError,
    RpcError,
    ServerDisconnected,
    TransportClosed,
)
from ...protocol._jsonrpc import (
    CANCELLED_NOTIFICATION,
    ErrorReceived,
    JsonRpcConnection,
    Notification,
    NotificationReceived,
    Request,
    RequestId,
    RequestReceived,
    ResponseReceived,
    UnexpectedResponse,
    decode_frame,
    frame_messages,
    salvage_response_ids,
)
from ...protocol._methods import decode_notification
from ...protocol._types import ProgressNotificationParams
from ...protocol._versions import META_SUBSCRIPTION_ID
from ...transports._base import (
    ConnectionEnded,
    Inbound,
    RequestFailed,
    SessionExpiredNotice,
    StderrLine,
)
from ...transports._channel import ByteChannel

__all__ = [
    "AllowBatches",
    "ConnectionLost",
    "Expect",
    "Forget",
    "Listen",
    "ListenEnded",
    "Mailbox",
    "PendingCalls",
    "PendingItem",
    "PendingStatistics",
    "ProgressCallback",
    "Subscription",
    "TimedOut",
    "Waiter",
]

logger = logging.getLogger("trio_mcp.session")

#: What the host's progress callback gets; it may be sync or async, and runs in the caller's task.
ProgressCallback: TypeAlias = Callable[[ProgressNotificationParams], Awaitable[None] | None]

#: Progress notifications kept for a caller that has not taken them yet (the oldest go first:
#: progress is cumulative, the newest says the most).
PROGRESS_BACKLOG: Final = 16
#: The table is swept for abandoned waiters when it grows past this many entries beyond twice
#: the number seen at the last sweep.
_SWEEP_SLACK: Final = 256
_INF: Final = float("inf")
#: Items the table (and the dispatcher) handle per wake-up at most (a flood waits its turn after
#: that many).
DRAIN_LIMIT: Final = 128
#: The deadline heap is compacted when it holds more than this many entries beyond twice the
#: number of waiting calls.
_HEAP_SLACK: Final = 64
#: Notifications kept for a subscription whose task has not taken them yet (past this the
#: oldest go, counted in ``Subscription.dropped``: a list change says what the one before it
#: said, and the subscriber is a task of the same session that takes them at once).
SUBSCRIPTION_BACKLOG: Final = 64


class TimedOut(Exception):
    """Internal: the table failed a waiter whose deadline passed. Never escapes the session (its
    caller turns it into a :class:`CallTimeout`)."""


# --------------------------------------------------------------------------- the waiter

#: The states of a :class:`Waiter` once it is resolved: it holds the result (``_answer``) or the
#: error (``_error``); None while the call waits.
_ANSWERED: Final = "answered"
_FAILED: Final = "failed"


class Waiter:
    """One call waiting for its answer: a one-shot result and a small queue of progress, for
    exactly one waiting task.

    The table resolves it (:meth:`resolve`, at most once, synchronously: the waiting task is
    rescheduled directly) and hands it progress (:meth:`push_progress`); the caller waits for
    both (:meth:`wait`) and runs its progress callback in its own task. ``abandoned`` is the
    caller's: set when it stopped waiting, so that the table can forget it."""

    __slots__ = (
        "_answer",
        "_error",
        "_progress",
        "_state",
        "_task",
        "abandoned",
        "method",
        "request_id",
    )

    def __init__(self, request_id: RequestId, method: str) -> None:
        self.request_id = request_id
        self.method = method
        self.abandoned = False
        self._task: trio.lowlevel.Task | None = None
        self._state: str | None = None  # then _ANSWERED or _FAILED
        #: The result, once :meth:`answer` stored it.
        self._answer: Mapping[str, Any] | None = None
        #: The error, once :meth:`fail` stored it, until the caller takes it.
        self._error: BaseException | None = None
        self._progress: deque[ProgressNotificationParams] | None = None

    @property
    def done(self) -> bool:
        return self._state is not None

    def resolve(self, result: outcome.Outcome[Mapping[str, Any]]) -> bool:
        """Store the call's outcome and wake its caller: :meth:`answer` with a value,
        :meth:`fail` with an error. The first outcome wins; returns whether this one was
        stored. Never blocks."""
        if isinstance(result, outcome.Error):
            return self.fail(result.error)
        assert isinstance(result, outcome.Value)
        return self.answer(result.value)

    def answer(self, result: Mapping[str, Any]) -> bool:
        """Store the result and wake the caller (the table's way for every answer); returns
        False when the call was resolved already."""
        if self._state is not None:
            return False
        self._answer = result
        self._state = _ANSWERED
        self._wake()
        return True

    def fail(self, error: BaseException) -> bool:
        """Store the error and wake the caller (the table's way for every call it fails: an
        error answer, a deadline, the connection's end); returns False when the call was
        resolved already. The caller takes the error: the waiter lets go of it then, so that
        the caller's traceback (which holds the waiter through the caller's frames) makes no
        cycle with it."""
        if self._state is not None:
            return False
        self._error = error
        self._state = _FAILED
        self._wake()
        return True

    def push_progress(self, params: ProgressNotificationParams) -> None:
        """Queue a progress notification for the caller (the oldest is dropped past
        :data:`PROGRESS_BACKLOG`) and wake it."""
        if self._state is not None:
            return
        if self._progress is None:
            self._progress = deque(maxlen=PROGRESS_BACKLOG)
        self._progress.append(params)
        self._wake()

    def _wake(self) -> None:
        task = self._task
        if task is not None:
            self._task = None
            trio.lowlevel.reschedule(task)

    async def wait(self, on_progress: ProgressCallback | None = None) -> Mapping[str, Any]:
        """Wait for the outcome and return the result (or raise the stored error); meanwhile
        call ``on_progress`` with each progress notification, here, in the caller's task (an
        exception it raises is logged and it is not called again).

        A checkpoint, like :meth:`trio.Event.wait`: cancelling the caller stops the wait (the
        waiter stays unresolved; the caller decides what that means)."""
        if self._state is not None:
            # a checkpoint even when answered already (the queued progress may be handled
            # without one: no callback, or a sync one)
            await trio.lowlevel.checkpoint()
        while True:
            progress = self._progress
            if progress:
                params = progress.popleft()
                if on_progress is not None:
                    on_progress = await _run_progress(on_progress, params)
                continue
            state = self._state
            if state is _ANSWERED:
                assert self._answer is not None
                return self._answer
            if state is _FAILED:
                error = self._error
                if error is None:
                    raise RuntimeError(f"the error of request {self.request_id!r} was taken")
                self._error = None  # no cycle through the waiter: error -> frames -> waiter
                try:
                    raise error
                finally:
                    del error  # nor through this frame: error -> traceback -> this frame
            if self._task is not None:
                raise RuntimeError(f"request {self.request_id!r} is already awaited by a task")
            self._task = trio.lowlevel.current_task()
            await trio.lowlevel.wait_task_rescheduled(self._abort)

    def _abort(self, raise_cancel: trio.lowlevel.RaiseCancelT) -> trio.lowlevel.Abort:
        self._task = None
        return trio.lowlevel.Abort.SUCCEEDED


async def _run_progress(
    callback: ProgressCallback, params: ProgressNotificationParams
) -> ProgressCallback | None:
    """Run the host's progress callback; None (stop calling it) when it failed."""
    try:
        result = callback(params)
        if result is not None:
            await result
    except Exception:  # the host's callback: log it and stop calling it
        logger.exception("progress callback failed; it is not called again")
        return None
    return callback


# --------------------------------------------------------------------------- subscriptions


@attrs.frozen(kw_only=True)
class ListenEnded:
    """How a ``subscriptions/listen`` stream ended (the last thing its :class:`Subscription`
    gives): ``result``, the server's answer (a graceful end, ``resultType: "complete"``);
    ``cancelled``, the server's ``notifications/cancelled`` naming the listen (how it tears a
    subscription down); ``error``, an error answer or the stream lost by the transport (an
    HTTP stream that broke) or with the connection."""

    result: Mapping[str, Any] | None = None
    cancelled: bool = False
    error: McpError | None = None


class Subscription:
    """One ``subscriptions/listen`` stream, as the table feeds it: the notifications that name
    it, in order, then how it ended (:class:`ListenEnded`), for exactly one waiting task (the
    session's subscriber).

    The table pushes into it and ends it synchronously (like a :class:`Waiter`), so a full
    inbox never blocks the table and an end is never lost: past :data:`SUBSCRIPTION_BACKLOG`
    waiting notifications the oldest is dropped (counted in ``dropped``); the end waits in a
    slot of its own, after the notifications that came before it."""

    __slots__ = ("_ended", "_queue", "_task", "dropped", "request_id")

    def __init__(self, request_id: RequestId) -> None:
        self.request_id = request_id
        self.dropped = 0
        self._queue: deque[Notification] = deque()
        self._ended: ListenEnded | None = None
        self._task: trio.lowlevel.Task | None = None

    @property
    def ended(self) -> bool:
        return self._ended is not None

    def push(self, notification: Notification) -> None:
        """Queue a notification of this stream (ignored once it ended) and wake the task."""
        if self._ended is not None:
            return
        if len(self._queue) >= SUBSCRIPTION_BACKLOG:
            self._queue.popleft()
            self.dropped += 1
        self._queue.append(notification)
        self._wake()

    def end(self, ended: ListenEnded) -> None:
        """The stream is over (the first end wins); wake the task."""
        if self._ended is None:
            self._ended = ended
            self._wake()

    def _wake(self) -> None:
        task = self._task
        if task is not None:
            self._task = None
            trio.lowlevel.reschedule(task)

    async def next(self) -> Notification | ListenEnded:
        """The next notification of the stream, or, once they are all taken, how it ended (and
        the same again on every later call). A checkpoint; cancelling it loses nothing."""
        while True:
            if self._queue or self._ended is not None:
                await trio.lowlevel.checkpoint()
                if self._queue:
                    return self._queue.popleft()
                assert self._ended is not None
                return self._ended
            if self._task is not None:
                raise RuntimeError(f"subscription {self.request_id!r} is already awaited")
            self._task = trio.lowlevel.current_task()
            await trio.lowlevel.wait_task_rescheduled(self._abort)

    def _abort(self, raise_cancel: trio.lowlevel.RaiseCancelT) -> trio.lowlevel.Abort:
        self._task = None
        return trio.lowlevel.Abort.SUCCEEDED


# --------------------------------------------------------------------------- messages


@attrs.frozen(kw_only=True)
class Expect:
    """A caller is about to send request ``request_id``: wait for its answer with ``waiter``.

    ``deadline`` (trio clock): fail it with :class:`TimedOut` then. With ``progress_token``,
    progress notifications for that token go to the waiter, and each one moves the deadline to
    ``now + reset_timeout`` (when given), never past ``hard_deadline``."""

    request_id: RequestId
    method: str
    waiter: Waiter = attrs.field(eq=False)
    deadline: float = _INF
    progress_token: int | str | None = None
    reset_timeout: float | None = None
    hard_deadline: float = _INF


@attrs.frozen(kw_only=True)
class Forget:
    """The caller of ``request_id`` stopped waiting (timed out or cancelled)."""

    request_id: RequestId


@attrs.frozen(kw_only=True)
class Listen:
    """The session's subscriber is about to send ``subscriptions/listen`` under ``request_id``
    (2026-07-28): what names it goes to ``subscription`` until it ends, or until a
    :class:`Forget` of the same id (the subscriber closed it)."""

    request_id: RequestId
    subscription: Subscription = attrs.field(eq=False)


@attrs.frozen(kw_only=True)
class AllowBatches:
    """The handshake settled a revision with JSON-RPC batches (2025-03-26): parse arrays."""


#: Everything the table's mailbox carries.
PendingItem: TypeAlias = Inbound | Expect | Forget | Listen | AllowBatches
Mailbox: TypeAlias = ByteChannel[PendingItem]


class DispatchSink(Protocol):
    """Where the table passes what is not an answer: the dispatcher's mailbox, and the
    session's control mailbox (a session expiry)."""

    def send_nowait(self, value: Any, /) -> None: ...


@attrs.frozen(kw_only=True)
class ConnectionLost:
    """The table's word to the supervisor: the connection of ``generation`` ended with
    ``error`` (every waiting call has failed already)."""

    generation: int
    error: McpError


class LossSink(Protocol):
    """Who is told that the connection ended (the supervisor's mailbox)."""

    def send_nowait(self, value: ConnectionLost, /) -> None: ...


# --------------------------------------------------------------------------- the table


@attrs.frozen(kw_only=True)
class PendingStatistics:
    """A snapshot of a session's table: calls waiting now (``outstanding``), answered and
    failed so far, frames handled, wake-ups of the table's task, and the entries of its deadline
    heap (answered calls' deadlines are dropped lazily; the heap stays below twice the calls
    waiting plus a constant). ``subscriptions`` counts the ``subscriptions/listen`` streams
    open now (2026-07-28): they are not calls, and counted in none of the others."""

    outstanding: int
    resolved_total: int
    failed_total: int
    frames_total: int
    wakeups_total: int
    deadline_entries: int
    subscriptions: int = 0


@attrs.define(eq=False)
class PendingCalls:
    """The table of one connection generation. Build it, then ``nursery.start(table.run)``;
    callers and the transport reach it through :attr:`mailbox` only."""

    server: str
    generation: int
    mailbox: Mailbox
    #: the dispatcher's mailbox (server requests, notifications, stderr lines)
    dispatch: DispatchSink
    #: the session's control mailbox (a session expiry); None when the transport cannot hold
    #: its frames for a new session (not a ResumableTransport): an expiry ends the connection
    control: DispatchSink | None
    #: told (a :class:`ConnectionLost`) when the connection ends
    lost: LossSink
    #: our requests only: server requests go to the dispatcher, which keeps track of them
    _conn: JsonRpcConnection = attrs.field(
        factory=lambda: JsonRpcConnection(track_inbound=False), init=False
    )
    _entries: dict[RequestId, Expect] = attrs.field(factory=dict, init=False)
    _tokens: dict[int | str, RequestId] = attrs.field(factory=dict, init=False)
    #: (deadline, sequence, request id): lazily cleaned (answered calls stay until they surface)
    _deadlines: list[tuple[float, int, RequestId]] = attrs.field(factory=list, init=False)
    _sequence: int = attrs.field(default=0, init=False)
    #: The calls registered during this drain, whose deadlines go into the heap at its end
    #: (a call answered in the same drain, as one made at a time is, never goes in).
    _fresh: list[Expect] = attrs.field(factory=list, init=False)
    _timer: trio.CancelScope | None = attrs.field(default=None, init=False)
    _batches: bool = attrs.field(default=False, init=False)
    _ended: McpError | None = attrs.field(default=None, init=False)
    _unsent: frozenset[RequestId] = attrs.field(default=frozenset(), init=False)
    _sweep_at: int = attrs.field(default=_SWEEP_SLACK, init=False)
    _resolved_total: int = attrs.field(default=0, init=False)
    _failed_total: int = attrs.field(default=0, init=False)
    _frames_total: int = attrs.field(default=0, init=False)
    _wakeups_total: int = attrs.field(default=0, init=False)
    #: The open subscriptions/listen streams, by their request id (2026-07-28).
    _listens: dict[RequestId, Subscription] = attrs.field(factory=dict, init=False)
    #: A listen was registered (a 2026-07-28 session): from then on notifications are
    #: demultiplexed by their subscription id (a legacy session checks this one flag).
    _demux: bool = attrs.field(default=False, init=False)
    _log: logging.Logger = attrs.field(init=False)
    #: The run's clock (``trio.current_time`` without its two layers; set by :meth:`run`).
    _clock: Callable[[], float] = attrs.field(default=trio.current_time, init=False)

    def __attrs_post_init__(self) -> None:
        self._log = logging.getLogger(f"trio_mcp.server.{self.server}")

    @property
    def armed_until(self) -> float:
        """When the table's timer will wake it at the latest (``-inf`` while it is not
        waiting). An :class:`Expect` whose deadline is no earlier can be put into the mailbox
        without waking the table (:meth:`ByteChannel.defer_nowait`): the table takes it, in
        order, when its answer arrives or when the timer fires, whichever comes first."""
        timer = self._timer
        return timer.deadline if timer is not None else -_INF

    @property
    def ended(self) -> bool:
        """Whether the connection has ended (published by the table's task, read by anyone)."""
        return self._ended is not None

    def statistics(self) -> PendingStatistics:
        """A snapshot of the counters (for tests and the bench)."""
        return PendingStatistics(
            outstanding=len(self._entries),
            resolved_total=self._resolved_total,
            failed_total=self._failed_total,
            frames_total=self._frames_total,
            wakeups_total=self._wakeups_total,
            deadline_entries=len(self._deadlines),
            subscriptions=len(self._listens),
        )

    # ------------------------------------------------------------------ the task

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve the mailbox until the connection ends. Raises the error that ended it (a
        :class:`TransportClosed`, :class:`FrameTooLarge`...), which tears the session down;
        however it ends, every waiter has failed by then."""
        self._clock = trio.lowlevel.current_clock().current_time
        task_status.started()
        try:
            while self._ended is None:
                with trio.CancelScope(deadline=self._earliest()) as timer:
                    self._timer = timer
                    while self._ended is None:
                        item = await self.mailbox.receive()  # EndOfChannel: handled below
                        self._wakeups_total += 1
                        self._handle(item)
                        self._drain()
                self._timer = None
                self._expire(trio.current_time())
        except trio.EndOfChannel:
            self._end(TransportClosed(f"the connection to server {self.server!r} ended"))
        finally:
            self._timer = None
            if self._ended is None:  # torn down from outside (the session is being stopped)
                self._end(
                    TransportClosed(f"the session with server {self.server!r} was closed"),
                    tell=False,
                )
        assert self._ended is not None
        raise self._ended

    def _drain(self) -> None:
        """Handle the items that are ready now, at most :data:`DRAIN_LIMIT` of them (what is
        left is taken after a schedule point: the next ``receive`` finds it at once, and a
        server that floods its connection holds the event loop for a bounded time), then put
        the deadlines of the calls registered and still waiting into the heap, and fail the
        calls whose deadline passed meanwhile."""
        mailbox = self.mailbox
        budget = DRAIN_LIMIT - 1  # the item that woke the table was the first
        while budget and mailbox and self._ended is None:
            self._handle(mailbox.receive_nowait())
            budget -= 1
        fresh = self._fresh
        if fresh:  # the deadlines of the calls registered in this drain
            entries = self._entries
            timer = self._timer
            for entry in fresh:
                if entries.get(entry.request_id) is entry:  # still waiting
                    self._push_deadline(entry.deadline, entry.request_id)
                elif timer is not None and entry.deadline < timer.deadline:
                    # Answered already: no heap entry, but the timer is armed by then all the
                    # same (as a superseded heap entry would), so that the next call's Expect
                    # can wait in the mailbox without waking the table (armed_until).
                    timer.deadline = entry.deadline
            fresh.clear()
        deadlines = self._deadlines
        if deadlines and deadlines[0][0] <= self._clock():
            self._expire(self._clock())

    def _handle(self, item: PendingItem) -> None:
        match item:
            case bytes():
                self._frames_total += 1
                self._handle_frame(item)
            case Expect():
                self._expect(item)
            case Forget(request_id=request_id):
                if self._forget(request_id) is None and self._listens:
                    self._drop_listen(request_id)
            case Listen():
                self._listen(item)
            case StderrLine():
                with contextlib.suppress(
                    trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError
                ):  # the server's log, best effort (the transport keeps its tail)
                    self.dispatch.send_nowait(item)
            case RequestFailed(request_id=request_id, error=error, sent=sent):
                self._request_failed(request_id, error, sent)
            case SessionExpiredNotice():
                self._session_expired(item)
            case ConnectionEnded(error=error, unsent=unsent):
                self._unsent = unsent
                self._end(error)
            case AllowBatches():
                self._batches = True

    # ------------------------------------------------------------------ callers

    def _expect(self, item: Expect) -> None:
        """Register a call. Only ever while the connection lasts: :meth:`_end` fails the
        Expects left in the mailbox and closes it, and no item is handled after it."""
        request_id = item.request_id
        try:
            self._conn.expect(request_id, item.method)
        except LocalProtocolError as exc:  # an id still in flight: a bug of ours
            item.waiter.fail(exc)
            return
        self._entries[request_id] = item  # the table's entry: the Expect itself (see _progress)
        if item.progress_token is not None:
            self._tokens[item.progress_token] = request_id
        if item.deadline != _INF:  # into the heap at the end of this drain, if still waiting
            self._fresh.append(item)
        if len(self._entries) > self._sweep_at:
            self._sweep()

    def _forget(self, request_id: RequestId) -> Expect | None:
        """Drop the call ``request_id`` from the table (its entry, its progress token, the
        machine's record, which an answer has removed already) and return its entry, if any.
        Its deadline stays in the heap until it surfaces (see :meth:`_live`)."""
        entry = self._entries.pop(request_id, None)
        if entry is None:
            return None
        if entry.progress_token is not None:
            self._tokens.pop(entry.progress_token, None)
        self._conn.forget(request_id)
        return entry

    def _sweep(self) -> None:
        """Forget waiters whose callers gave up but could not say so (a full mailbox)."""
        for request_id in [rid for rid, e in self._entries.items() if e.waiter.abandoned]:
            self._forget(request_id)
        self._sweep_at = 2 * len(self._entries) + _SWEEP_SLACK

    def _resolve(self, request_id: RequestId, result: outcome.Outcome[Mapping[str, Any]]) -> None:
        """The server answered ``request_id`` (a result or an error answer): resolve its waiter,
        if any, counted as answered."""
        entry = self._forget(request_id)
        if entry is not None:
            self._resolved_total += 1
            entry.waiter.resolve(result)
        elif self._listens:
            self._listen_answered(request_id, result)

    def _answered(self, request_id: RequestId, result: Mapping[str, Any]) -> None:
        """:meth:`_resolve` for a success answer: the waiter takes ``result`` as it is
        (:meth:`Waiter.answer`)."""
        entry = self._forget(request_id)
        if entry is not None:
            self._resolved_total += 1
            entry.waiter.answer(result)
        elif self._listens:
            self._listen_answered(request_id, outcome.Value(result))

    def _fail(self, request_id: RequestId, exc: BaseException) -> None:
        """Fail the call ``request_id`` (if any) with ``exc`` without an answer from the server
        (a deadline, a bad frame, the transport): counted as failed; a late answer is ignored."""
        entry = self._forget(request_id)
        if entry is not None:
            self._failed_total += 1
            entry.waiter.fail(exc)
        elif self._listens and isinstance(exc, McpError):
            self._end_listen(request_id, ListenEnded(error=exc))

    # ------------------------------------------------------------------ deadlines

    def _push_deadline(self, deadline: float, request_id: RequestId) -> None:
        """Add a deadline. The heap keeps superseded entries (answered calls, moved deadlines)
        until they surface or it is compacted here, which costs O(1) per call on average."""
        heap = self._deadlines
        if len(heap) > 2 * len(self._entries) + _HEAP_SLACK:
            heap[:] = [item for item in heap if self._live(item)]
            heapq.heapify(heap)
        self._sequence += 1
        heapq.heappush(heap, (deadline, self._sequence, request_id))
        timer = self._timer
        if timer is not None and deadline < timer.deadline:
            timer.deadline = deadline

    def _earliest(self) -> float:
        heap = self._deadlines
        while heap and not self._live(heap[0]):
            heapq.heappop(heap)
        return heap[0][0] if heap else _INF

    def _live(self, item: tuple[float, int, RequestId]) -> bool:
        entry = self._entries.get(item[2])
        return entry is not None and entry.deadline == item[0]

    def _expire(self, now: float) -> None:
        """Fail every call whose deadline has passed with :class:`TimedOut`."""
        heap = self._deadlines
        while heap and heap[0][0] <= now:
            deadline, _, request_id = heapq.heappop(heap)
            entry = self._entries.get(request_id)
            if entry is not None and entry.deadline == deadline:
                self._fail(request_id, TimedOut())

    # ------------------------------------------------------------------ frames

    def _handle_frame(self, frame: bytes) -> None:
        try:
            obj = decode_frame(frame)
        except InvalidMessage as exc:
            self._bad_frame(frame, exc)
            return
        answer = self._conn.take_answer(obj)
        if answer is not None:  # the commonest frame: an answer to a waiting call
            self._answered(*answer)
            return
        try:
            parsed = frame_messages(obj, frame, allow_batch=self._batches)
        except InvalidMessage as exc:
            self._bad_frame(frame, exc)
            return
        for message in parsed if isinstance(parsed, tuple) else (parsed,):
            self._handle_message(message)

    def _handle_message(self, message: Any) -> None:
        event = self._conn.receive(message)
        match event:
            case ResponseReceived(id=request_id, result=result):
                self._answered(request_id, result)
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
                self._resolve(request_id, outcome.Error(exc))
            case UnexpectedResponse():
                self._log.debug("late or unknown response ignored: %r", event)
            case RequestReceived(request=request):
                self._pass_on(request)  # the dispatcher answers it (and refuses a reused id)
            case NotificationReceived(notification=notification):
                if notification.method == "notifications/progress":
                    self._progress(notification)
                elif self._demux:
                    self._demultiplex(notification)
                else:
                    self._pass_on(notification)

    def _pass_on(self, message: Request | Notification) -> None:
        try:
            self.dispatch.send_nowait(message)
        except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
            self._log.warning(
                "the dispatcher is behind: %s from the server dropped", message.method
            )

    def _progress(self, notification: Notification) -> None:
        """Progress for a waiting call goes to its waiter (and may move its deadline). The token
        is looked up before anything is decoded: progress nobody waits for (a flood of it, say)
        costs a dict lookup; only a token that is a string or an integer is looked up (an
        unhashable one cannot raise, ``true`` and ``1.0`` are not ``1``)."""
        raw = notification.params
        token = raw.get("progressToken") if raw is not None else None
        if isinstance(token, bool) or not isinstance(token, int | str):
            return
        request_id = self._tokens.get(token)
        entry = self._entries.get(request_id) if request_id is not None else None
        if entry is None:
            return
        try:
            params = decode_notification(notification.method, raw)
        except InvalidMessage as exc:
            self._log.warning("invalid progress notification: %s", exc)
            return
        if not isinstance(params, ProgressNotificationParams):
            return
        if entry.reset_timeout is not None:
            deadline = min(trio.current_time() + entry.reset_timeout, entry.hard_deadline)
            if deadline != entry.deadline:
                # an entry is its frozen Expect: a moved deadline makes a new one
                entry = attrs.evolve(entry, deadline=deadline)
                self._entries[entry.request_id] = entry
                self._push_deadline(deadline, entry.waiter.request_id)
        entry.waiter.push_progress(params)

    def _bad_frame(self, frame: bytes, exc: InvalidMessage) -> None:
        """A frame that is not a valid JSON-RPC message: fail the calls it answers, where their
        ids can be read; the connection goes on either way."""
        self._log.warning("invalid message from the server: %s", exc)
        for request_id in salvage_response_ids(frame):
            self._fail(request_id, exc)

    # ------------------------------------------------------------------ subscriptions

    def _listen(self, item: Listen) -> None:
        """Register a listen (its answer is then expected, like a call's, but it gets no
        deadline and no entry among the calls)."""
        request_id = item.request_id
        try:
            self._conn.expect(request_id, "subscriptions/listen")
        except LocalProtocolError as exc:  # an id still in flight: a bug of ours
            item.subscription.end(ListenEnded(error=exc))
            return
        self._listens[request_id] = item.subscription
        self._demux = True

    def _drop_listen(self, request_id: RequestId) -> None:
        """The subscriber closed the listen: whatever names it from now on is dropped."""
        if self._listens.pop(request_id, None) is not None:
            self._conn.forget(request_id)

    def _end_listen(self, request_id: RequestId, ended: ListenEnded) -> None:
        subscription = self._listens.pop(request_id, None)
        if subscription is not None:
            self._conn.forget(request_id)
            subscription.end(ended)

    def _listen_answered(
        self, request_id: RequestId, result: outcome.Outcome[Mapping[str, Any]]
    ) -> None:
        """The server answered a listen: a graceful end (a result), or an error."""
        if isinstance(result, outcome.Value):
            self._end_listen(request_id, ListenEnded(result=result.value))
        elif isinstance(result, outcome.Error) and isinstance(result.error, McpError):
            self._end_listen(request_id, ListenEnded(error=result.error))  # an error answer

    def _demultiplex(self, notification: Notification) -> None:
        """A notification in a session with listens (2026-07-28): to the listen its
        ``_meta`` subscription id names; dropped when that names no open listen (or is no
        id at all); to the dispatcher when it has no subscription id. The server's
        ``notifications/cancelled`` naming a listen ends it."""
        params = notification.params
        if params is None:
            self._pass_on(notification)
            return
        if notification.method == CANCELLED_NOTIFICATION:
            cancelled = params.get("requestId")
            if _is_id(cancelled) and cancelled in self._listens:
                self._end_listen(cancelled, ListenEnded(cancelled=True))
                return
        meta = params.get("_meta")
        if not isinstance(meta, Mapping) or META_SUBSCRIPTION_ID not in meta:
            self._pass_on(notification)
            return
        subscription_id = meta[META_SUBSCRIPTION_ID]
        subscription = self._listens.get(subscription_id) if _is_id(subscription_id) else None
        if subscription is None:
            self._log.debug(
                "%s for subscription %r, which is not open, ignored",
                notification.method,
                subscription_id,
            )
            return
        subscription.push(notification)

    # ------------------------------------------------------------------ transport events

    def _request_failed(self, request_id: RequestId, error: McpError, sent: bool) -> None:
        """The transport failed one request on its own (an HTTP error status, a response stream
        lost): fail that call with it, never disguised as a JSON-RPC error."""
        entry = self._entries.get(request_id)
        if entry is None:
            if self._listens:  # the transport lost a listen's stream (an HTTP stream broke)
                self._end_listen(request_id, ListenEnded(error=error))
            return
        method = entry.waiter.method
        if isinstance(error, ServerDisconnected):
            failure: McpError = ServerDisconnected(
                f"server {self.server!r}: {error}",
                server=self.server,
                sent=sent,
                method=method,
                request_id=request_id,
            )
            failure.__cause__ = error
        elif isinstance(error, HttpStatusError):
            failure = HttpStatusError(
                f"server {self.server!r}: {error}", status=error.status, body=error.body
            )
            failure.__cause__ = error
        else:
            failure = error
        self._log.info("%s (request %r) failed: %s", method, request_id, failure)
        self._fail(request_id, failure)

    def _session_expired(self, notice: SessionExpiredNotice) -> None:
        """The server ended the HTTP session: the calls lost in flight fail as outcome unknown,
        and the session's control loop initializes a new one (or ends the connection). Without
        a control loop (the transport cannot hold its frames meanwhile) the connection ends
        here, and every waiting call fails saying why."""
        for request_id in notice.lost:
            entry = self._entries.get(request_id)
            if entry is None:
                continue
            method = entry.waiter.method
            self._fail(
                request_id,
                ServerDisconnected(
                    f"server {self.server!r} ended its session while {method} was in flight: "
                    "the outcome is unknown and the request is not re-sent",
                    server=self.server,
                    sent=True,
                    method=method,
                    request_id=request_id,
                ),
            )
        if self.control is None:
            error = TransportClosed(f"{notice.error}; reconnecting")
            error.__cause__ = notice.error
            self._end(error)
            return
        try:
            self.control.send_nowait(notice)
        except trio.WouldBlock:
            self._end(TransportClosed(f"{notice.error} (the session could not be re-initialized)"))

    # ------------------------------------------------------------------ the end

    def _end(self, error: McpError, *, tell: bool = True) -> None:
        """The connection is over: fail every waiter at once, each saying whether its request
        was sent, and tell the supervisor. Sync, once."""
        if self._ended is not None:
            return
        self._ended = error
        # What was never taken (the connection torn down from outside): its Expects' callers
        # wait too. Then callers that still send learn at once that it is over.
        waiters = [entry.waiter for entry in self._entries.values()]
        listens = list(self._listens.values())
        for item in self.mailbox.drain():
            if isinstance(item, Expect):
                waiters.append(item.waiter)
            elif isinstance(item, Listen):
                listens.append(item.subscription)
        self.mailbox.close_receiver()
        self._conn.close()
        self._entries.clear()
        self._listens.clear()
        self._tokens.clear()
        self._deadlines.clear()
        self._fail_all(waiters, error)
        for subscription in listens:
            subscription.end(ListenEnded(error=error))
        if tell:
            with contextlib.suppress(
                trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError
            ):  # a supervisor that cannot take it hears it from the session's end anyway
                self.lost.send_nowait(ConnectionLost(generation=self.generation, error=error))

    def _fail_all(self, waiters: list[Waiter], error: McpError) -> None:
        """Fail ``waiters`` with :class:`ServerDisconnected` because of ``error``, each saying
        whether its request was sent. The parts of the message that do not depend on the call
        are made once: with hundreds of calls waiting, this loop is the time until the last of
        them learns that its server is gone."""
        server = self.server
        unsent = self._unsent
        reason = _loss_reason(error)
        lead = f"server {server!r} disconnected during "
        after = (
            f" ({reason}), after the request was sent: its outcome is unknown and it is not re-sent"
        )
        before = f" ({reason}), before the request was sent: it is safe to retry"
        for waiter in waiters:
            method = waiter.method
            request_id = waiter.request_id
            sent = request_id not in unsent
            exc = ServerDisconnected(
                lead + method + (after if sent else before),
                server=server,
                sent=sent,
                method=method,
                request_id=request_id,
            )
            exc.__cause__ = error
            waiter.fail(exc)
        self._failed_total += len(waiters)


def _is_id(value: Any) -> bool:
    """Whether ``value`` can be a request id of ours (an int or a string; not ``true``)."""
    return isinstance(value, int | str) and not isinstance(value, bool)


def _loss_reason(error: McpError) -> str:
    """Why a connection ended, for the waiting calls."""
    if isinstance(error, TransportClosed):
        return str(error) or "the server closed the connection"
    return f"{type(error).__name__}: {error}"
