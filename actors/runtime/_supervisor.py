"""ServerSupervisor: one per configured server; the state machine of DESIGN.md.

``DISABLED → CONNECTING → READY ⇄ RECONNECTING → PARKED``, plus ``NEEDS_AUTH``, ``FAILED`` and
``STOPPED``. Each connection attempt gets a fresh transport and a new generation number; a failed
attempt's transport is closed (its process group ended) before the next one starts.

- First connect: retried after 1, 2, 4, 8, 16 s (``RetryPolicy.first_connect_delays``), then
  ``PARKED`` with a probe every 5 minutes (``park_probe_interval``; None means ``FAILED``).
- After a runtime disconnect: ``RECONNECTING`` with capped, jittered exponential backoff, for as
  long as it takes; the count starts over once a connection stayed up for ``healthy_after``.

The supervisor's state is its own: other tasks read it through :meth:`status` and ask for an
early attempt with :meth:`reconnect_now` (a one-slot, coalescing mailbox).
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager
from typing import Any

import attrs
import trio

from ...protocol._errors import (
    ConnectError,
    ConnectTimeout,
    McpError,
    ServerDisconnected,
    ServerUnavailable,
)
from ...protocol._types import ServerCapabilities
from ...transports._base import Transport
from ..config._backoff import first_connect_delay, reconnect_delay
from ..config._config import RuntimeConfig, ServerConfig
from ._callbacks import HostCallbacks
from ._events import ResourceUpdated, ServerLogged, ServerState, ServerStateChanged
from ._registry import Registry, ReplaceTools, ToolRefusal, ToolsChanged, WithdrawServer
from ._session import Session

__all__ = ["ServerStatus", "ServerSupervisor"]

logger = logging.getLogger("trio_mcp.supervisor")

SETTLED = frozenset(
    {
        ServerState.READY,
        ServerState.PARKED,
        ServerState.FAILED,
        ServerState.DISABLED,
        ServerState.NEEDS_AUTH,
        ServerState.STOPPED,
    }
)


@attrs.frozen(kw_only=True)
class ServerStatus:
    """A snapshot of one server, as ``rt.status()`` reports it."""

    name: str
    state: ServerState
    transport: str
    generation: int
    protocol_version: str | None = None
    server_name: str | None = None
    server_version: str | None = None
    tool_count: int = 0
    refused_tools: tuple[ToolRefusal, ...] = ()
    #: trio clock time the current connection became ready, and how long connecting took.
    connected_at: float | None = None
    connect_time: float | None = None
    last_error: str | None = None
    next_attempt_at: float | None = None
    failures: int = 0
    #: The process id of a stdio server's current (or last) process.
    pid: int | None = None
    stderr_tail: tuple[str, ...] = ()
    #: What the server declared in its handshake (None before its first connection).
    capabilities: ServerCapabilities | None = None

    def declares(self, capability: str) -> bool:
        """Whether the server declared ``capability`` (``"tools"``, ``"resources"``,
        ``"prompts"``, ``"logging"``...) in its current (or last) handshake."""
        caps = self.capabilities
        return caps is not None and getattr(caps, capability, None) is not None


def _first_error(group: BaseExceptionGroup[Any]) -> BaseException:
    """The error that says best why a connection attempt failed: the first that is not a
    :class:`ServerDisconnected` (a request failing *because* the connection ended, such as the
    handshake's, which may come out before the transport's own error or after it), else the
    first."""
    leaves = list(_leaves(group))
    return next((e for e in leaves if not isinstance(e, ServerDisconnected)), leaves[0])


def _leaves(group: BaseExceptionGroup[Any]) -> Iterator[BaseException]:
    for error in group.exceptions:
        if isinstance(error, BaseExceptionGroup):
            yield from _leaves(error)
        else:
            yield error


@attrs.define(eq=False)
class ServerSupervisor:
    """Keeps one server connected, for the life of the runtime."""

    config: ServerConfig
    runtime: RuntimeConfig
    registry: Registry
    callbacks: HostCallbacks
    #: ``open_transport(config, on_stderr_line)``: a fresh transport for each attempt.
    open_transport: Callable[
        [ServerConfig, Callable[[str], None]], AbstractAsyncContextManager[Transport]
    ]
    publish: Callable[[Any], None]
    rng: random.Random = attrs.field(factory=random.Random)

    _state: ServerState = attrs.field(default=ServerState.CONNECTING, init=False)
    _generation: int = attrs.field(default=0, init=False)
    _session: Session | None = attrs.field(default=None, init=False)
    _transport: Transport | None = attrs.field(default=None, init=False)
    _phase: str = attrs.field(default="first", init=False)  # first | parked | runtime
    _failures: int = attrs.field(default=0, init=False)
    _ready_since: float | None = attrs.field(default=None, init=False)
    _connect_time: float | None = attrs.field(default=None, init=False)
    _next_attempt_at: float | None = attrs.field(default=None, init=False)
    _last_error: str | None = attrs.field(default=None, init=False)
    _drop_handled: bool = attrs.field(default=False, init=False)
    _changed: trio.Event = attrs.field(factory=trio.Event, init=False)
    _wake: trio.Event = attrs.field(factory=trio.Event, init=False)
    _stopping: bool = attrs.field(default=False, init=False)
    _stderr_log: logging.Logger = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._stderr_log = logging.getLogger(f"trio_mcp.server.{self.config.name}.stderr")

    # ------------------------------------------------------------------ reading

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def state(self) -> ServerState:
        return self._state

    @property
    def session(self) -> Session | None:
        return self._session

    def status(self) -> ServerStatus:
        session = self._session
        info = session.info if session is not None else None
        tail: tuple[str, ...] = ()
        stderr_tail = getattr(self._transport, "stderr_tail", None)
        if callable(stderr_tail):
            tail = tuple(stderr_tail())
        return ServerStatus(
            name=self.name,
            state=self._state,
            transport=self.config.transport_kind.value,
            generation=self._generation,
            protocol_version=info.protocol_version if info else None,
            server_name=info.server_name if info else None,
            server_version=info.server_version if info else None,
            tool_count=len(self.registry.tools_of(self.name)),
            refused_tools=self.registry.refused_of(self.name),
            connected_at=self._ready_since,
            connect_time=self._connect_time,
            last_error=self._last_error,
            next_attempt_at=self._next_attempt_at,
            failures=self._failures,
            pid=getattr(self._transport, "pid", None),
            stderr_tail=tail,
            capabilities=info.capabilities if info else None,
        )

    def ready_session(self) -> Session:
        """The live session, or :class:`ServerUnavailable` saying the state and the next
        attempt."""
        session = self._session
        if self._state is ServerState.READY and session is not None and not session.closed:
            return session
        raise self.unavailable()

    def unavailable(self) -> ServerUnavailable:
        when = ""
        if self._next_attempt_at is not None:
            delta = max(0.0, self._next_attempt_at - trio.current_time())
            when = f"; next connection attempt in {delta:.1f} s"
        why = f" ({self._last_error})" if self._last_error else ""
        return ServerUnavailable(
            f"server {self.name!r} is {self._state.value}{why}{when}",
            server=self.name,
            state=self._state.value,
            next_attempt_at=self._next_attempt_at,
        )

    async def wait_state(self, predicate: Callable[[ServerState], bool]) -> ServerState:
        """Wait until the state satisfies ``predicate``; returns it."""
        while not predicate(self._state):
            await self._changed.wait()
        return self._state

    def stop_soon(self) -> None:
        """Mark the supervisor as stopping (the runtime cancels it next): a connection that ends
        from now on is not reconnected."""
        self._stopping = True

    def reconnect_now(self) -> None:
        """Ask for a connection attempt now (a parked or reconnecting server stops waiting)."""
        self._wake.set()

    # ------------------------------------------------------------------ the loop

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Supervise until cancelled. Only expected failures (``McpError``) are retried; a bug
        in our own code propagates and crashes the runtime loudly."""
        task_status.started()
        try:
            if not (self.config.enabled and self.runtime.enabled):
                why = "disabled in the configuration"
                self._set_state(ServerState.DISABLED, reason=why)
                await trio.sleep_forever()
            if self.runtime.network_policy == "deny" and self.config.transport_kind.is_url:
                why = (
                    "skipped: execution.networkPolicy is 'deny' "
                    "(set it to 'allow' to connect URL servers)"
                )
                self._last_error = why
                logger.warning("server %r (%s) %s", self.name, self.config.transport_kind, why)
                self._set_state(ServerState.DISABLED, reason=why)
                await trio.sleep_forever()
            while True:
                await self._attempt()
                await self._wait_for_next_attempt()
        finally:
            self._stopped()

    async def _attempt(self) -> None:
        self._generation += 1
        generation = self._generation
        self._drop_handled = False
        self._next_attempt_at = None
        state = ServerState.RECONNECTING if self._phase == "runtime" else ServerState.CONNECTING
        self._set_state(state, reason=self._last_error)
        started = trio.current_time()
        deadline = started + self.config.connect_timeout
        failure: BaseException | None = None
        try:
            async with trio.open_nursery() as nursery:
                session: Session | None = None
                with trio.move_on_at(deadline):
                    session = await nursery.start(self._connection, generation)
                if session is None:
                    raise ConnectTimeout(
                        f"server {self.name!r} did not become ready within "
                        f"{self.config.connect_timeout:g} s (connect_timeout: spawn or connect, "
                        "handshake and tool listing)"
                    )
                self._on_ready(session, started)
        except* McpError as group:
            failure = _first_error(group)
        if failure is None and not self._drop_handled:
            failure = ConnectError(f"server {self.name!r}: the connection ended")
        if failure is not None:
            self._on_failure(failure)

    async def _connection(
        self, generation: int, *, task_status: trio.TaskStatus[Session] = trio.TASK_STATUS_IGNORED
    ) -> None:
        async with self.open_transport(self.config, self._stderr_line) as transport:
            self._transport = transport
            session = Session(
                config=self.config,
                runtime=self.runtime,
                generation=generation,
                transport=transport,
                callbacks=self.callbacks,
                on_lost=self._on_lost,
                on_listing=self._on_listing,
                publish=self._publish_from_session,
            )
            async with trio.open_nursery() as nursery:
                await nursery.start(session.run)
                task_status.started(session)

    async def _wait_for_next_attempt(self) -> None:
        self._wake = trio.Event()
        if self._next_attempt_at is None:
            await self._wake.wait()
        else:
            with trio.move_on_at(self._next_attempt_at):
                await self._wake.wait()

    # ------------------------------------------------------------------ transitions (sync)

    def _on_ready(self, session: Session, started: float) -> None:
        now = trio.current_time()
        if self._phase != "runtime":
            # First time ready: first-connect failures say nothing about later drops. After that
            # the count only starts over once a connection stayed up for ``healthy_after``, so a
            # server that drops right after every connect keeps backing off.
            self._failures = 0
            self._phase = "runtime"
        self._session = session
        self._ready_since = now
        self._connect_time = now - started
        self._last_error = None
        self._apply(
            ReplaceTools(
                server=self.name,
                generation=session.generation,
                tools=session.tools,
                refused=session.tool_refusals,
            )
        )
        for registered in self.registry.tools_of(self.name):
            logger.info("server %r: registered tool %s", self.name, registered.name)
        self._set_state(ServerState.READY)

    def _on_listing(
        self,
        session: Session,
        kind: str,
        entries: tuple[Any, ...],
        refused: tuple[ToolRefusal, ...],
    ) -> None:
        if kind != "tools" or session is not self._session:
            # The first listing is applied by _on_ready; resources and prompts stay in the session.
            return
        self._apply(
            ReplaceTools(
                server=self.name, generation=session.generation, tools=entries, refused=refused
            )
        )

    def _on_lost(self, session: Session, reason: str) -> None:
        """Called synchronously by the session the moment its connection ends."""
        self._apply(WithdrawServer(server=self.name, generation=session.generation, reason=reason))
        if session is not self._session:
            return  # an attempt that never became ready: _on_failure deals with it
        self._session = None
        self._drop_handled = True
        if self._stopping or trio.current_effective_deadline() == -math.inf:
            return  # we are being stopped (the runtime is closing): no reconnect to plan
        now = trio.current_time()
        if (
            self._ready_since is not None
            and now - self._ready_since >= self.runtime.retry.healthy_after
        ):
            self._failures = 0
        self._ready_since = None
        self._failures += 1
        delay = reconnect_delay(self.runtime.retry, self._failures, self.rng)
        self._last_error = reason
        self._next_attempt_at = now + delay
        logger.warning(
            "server %r disconnected (%s); reconnecting in %.1f s", self.name, reason, delay
        )
        self._set_state(ServerState.RECONNECTING, reason=reason, next_attempt_at=now + delay)

    def _on_failure(self, error: BaseException) -> None:
        if self._drop_handled:
            return
        now = trio.current_time()
        self._session = None
        self._last_error = f"{type(error).__name__}: {error}"
        self._failures += 1
        policy = self.runtime.retry
        if self._phase == "runtime":
            delay: float | None = reconnect_delay(policy, self._failures, self.rng)
            state = ServerState.RECONNECTING
        elif self._phase == "first":
            delay = first_connect_delay(policy, self._failures)
            state = ServerState.CONNECTING
            if delay is None:
                self._phase = "parked"
        if self._phase == "parked":
            delay = policy.park_probe_interval
            state = ServerState.PARKED if delay is not None else ServerState.FAILED
        self._next_attempt_at = None if delay is None else now + delay
        logger.warning(
            "server %r failed to connect: %s%s",
            self.name,
            self._last_error,
            f"; next attempt in {delay:g} s" if delay is not None else "; giving up",
        )
        self._set_state(state, reason=self._last_error, next_attempt_at=self._next_attempt_at)

    def _stopped(self) -> None:
        self._stopping = True
        session, self._session = self._session, None
        if session is not None:
            session.lose("the runtime is shutting down")
        self._apply(WithdrawServer(server=self.name, generation=self._generation, reason="stopped"))
        self._next_attempt_at = None
        self._set_state(ServerState.STOPPED)

    def _apply(self, msg: ReplaceTools | WithdrawServer) -> None:
        change: ToolsChanged | None = self.registry.apply(msg)
        if change is not None:
            self.publish(change)

    def _publish_from_session(self, event: ServerLogged | ResourceUpdated) -> None:
        self.publish(event)

    def _stderr_line(self, line: str) -> None:
        """A line the server wrote to stderr: logged at DEBUG and published as an event (stderr
        is the server's own log, never an error signal in itself)."""
        self._stderr_log.debug("%s", line)
        self.publish(ServerLogged(server=self.name, level="debug", data=line, stderr=True))

    def _set_state(
        self,
        new: ServerState,
        *,
        reason: str | None = None,
        next_attempt_at: float | None = None,
    ) -> None:
        old = self._state
        self._state = new
        if new is ServerState.READY:
            logger.info("server %r is ready (generation %d)", self.name, self._generation)
        self.publish(
            ServerStateChanged(
                server=self.name,
                old=old,
                new=new,
                generation=self._generation,
                reason=reason,
                next_attempt_at=next_attempt_at,
            )
        )
        self._changed.set()
        self._changed = trio.Event()
