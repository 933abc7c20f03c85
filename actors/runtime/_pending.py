"""PendingCalls: request id -> one-shot waiter, for one connection generation.

Every operation is synchronous, so the table can be failed as a whole from a cancelled
``finally:`` (when the connection ends, every waiting call learns it at once), and a reply that
arrives after its caller gave up resolves nothing and harms nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs
import outcome
import trio

from ...protocol._errors import ServerDisconnected
from ...protocol._jsonrpc import RequestId

__all__ = ["PendingCalls", "PendingStatistics", "Waiter"]

_INF = float("inf")


@attrs.define(eq=False)
class Waiter:
    """One call waiting for its answer. Resolved at most once; awaited by exactly one task.

    Resolving reschedules the waiting task directly (no :class:`trio.Event` and no parking lot:
    this is on every call's path)."""

    request_id: RequestId
    method: str
    #: Set by the writer just before the request's bytes go to the transport: from then on a lost
    #: connection leaves the outcome unknown.
    sent: bool = False
    #: When the call times out (``trio.current_time()`` clock); kept by the session's timer.
    deadline: float = _INF
    _task: trio.lowlevel.Task | None = attrs.field(default=None, init=False)
    _result: outcome.Outcome[Mapping[str, Any]] | None = attrs.field(default=None, init=False)

    @property
    def done(self) -> bool:
        return self._result is not None

    def resolve(self, result: outcome.Outcome[Mapping[str, Any]]) -> bool:
        """Store the call's outcome and wake its caller. The first outcome wins; returns whether
        this one was stored. Never blocks."""
        if self._result is not None:
            return False
        self._result = result
        task = self._task
        if task is not None:
            self._task = None
            trio.lowlevel.reschedule(task)
        return True

    async def wait(self) -> Mapping[str, Any]:
        """Wait for the outcome and return the result (or raise the stored error).

        A checkpoint, like :meth:`trio.Event.wait`: cancelling the caller stops the wait (the
        waiter stays unresolved; the caller decides what that means)."""
        if self._result is None:
            if self._task is not None:
                raise RuntimeError(f"request {self.request_id!r} is already awaited by a task")
            self._task = trio.lowlevel.current_task()
            await trio.lowlevel.wait_task_rescheduled(self._abort)
        else:
            await trio.lowlevel.checkpoint()
        assert self._result is not None
        return self._result.unwrap()

    def _abort(self, raise_cancel: trio.lowlevel.RaiseCancelT) -> trio.lowlevel.Abort:
        self._task = None
        return trio.lowlevel.Abort.SUCCEEDED


@attrs.frozen(kw_only=True)
class PendingStatistics:
    outstanding: int
    resolved_total: int
    failed_total: int


@attrs.define(eq=False)
class PendingCalls:
    """The waiters of one connection generation."""

    server: str
    _waiters: dict[RequestId, Waiter] = attrs.field(factory=dict, init=False)
    _closed_reason: str | None = attrs.field(default=None, init=False)
    _resolved_total: int = attrs.field(default=0, init=False)
    _failed_total: int = attrs.field(default=0, init=False)

    @property
    def closed(self) -> bool:
        return self._closed_reason is not None

    def add(self, request_id: RequestId, method: str) -> Waiter:
        """Register a waiter for a request about to be sent.

        Raises :class:`ServerDisconnected` (``sent=False``: safe to retry) when the connection has
        already ended.
        """
        if self._closed_reason is not None:
            raise ServerDisconnected(
                f"server {self.server!r} disconnected before {method} was sent: "
                f"{self._closed_reason}",
                server=self.server,
                sent=False,
            )
        waiter = Waiter(request_id, method)
        self._waiters[request_id] = waiter
        return waiter

    def resolve(self, request_id: RequestId, result: outcome.Outcome[Mapping[str, Any]]) -> bool:
        """Resolve the waiter of ``request_id``; False when nobody waits for it any more."""
        waiter = self._waiters.pop(request_id, None)
        if waiter is None:
            return False
        self._resolved_total += 1
        return waiter.resolve(result)

    def discard(self, request_id: RequestId) -> Waiter | None:
        """Forget a waiter whose caller gave up (timeout or cancellation)."""
        return self._waiters.pop(request_id, None)

    def fail_all(
        self, reason: str, *, error: Callable[[Waiter], BaseException] | None = None
    ) -> int:
        """The connection ended: fail every waiter at once and refuse new ones.

        Each waiter gets ``error(waiter)`` or, by default, :class:`ServerDisconnected` saying
        whether its request had been sent. Idempotent; returns how many waiters were failed.
        """
        if self._closed_reason is None:
            self._closed_reason = reason
        waiters = list(self._waiters.values())
        self._waiters.clear()
        for waiter in waiters:
            exc = error(waiter) if error is not None else self._disconnected(waiter, reason)
            waiter.resolve(outcome.Error(exc))
        self._failed_total += len(waiters)
        return len(waiters)

    def _disconnected(self, waiter: Waiter, reason: str) -> ServerDisconnected:
        if waiter.sent:
            what = "after the request was sent: its outcome is unknown and it is not re-sent"
        else:
            what = "before the request was sent: it is safe to retry"
        return ServerDisconnected(
            f"server {self.server!r} disconnected during {waiter.method} ({reason}), {what}",
            server=self.server,
            sent=waiter.sent,
        )

    def __len__(self) -> int:
        return len(self._waiters)

    def statistics(self) -> PendingStatistics:
        return PendingStatistics(
            outstanding=len(self._waiters),
            resolved_total=self._resolved_total,
            failed_total=self._failed_total,
        )
