"""ServerSupervisor: one actor per configured server; the state machine of DESIGN.md.

``DISABLED → CONNECTING → READY ⇄ RECONNECTING → PARKED``, plus ``NEEDS_AUTH``, ``FAILED``, and
``STOPPING → STOPPED``. The supervisor is a trio task (:meth:`ServerSupervisor.run`) and the only
writer of its state: everything it learns arrives as a message in its bounded mailbox (one
closed union, :data:`SupervisorMsg`), and each message is applied synchronously. It publishes an
immutable :class:`ServerStatus` on every change; other tasks read that, and the live session
handle while the server is ``READY``.

Each connection attempt is a **connection task** in the supervisor's nursery with a fresh
transport and a new generation number: it opens the transport (its sink is a new mailbox for
the session's table), runs the session's handshake and first listing within
``connect_timeout``, says :class:`AttemptReady`, and lives as long as the connection. The
session's table says :class:`~trio_mcp.actors.runtime._pending.ConnectionLost` the moment the
connection ends (the connection task says it too, as a fallback, with the error that ended its
session); once the transport is closed (no orphan process) the connection task says
:class:`ConnectionClosed`. The next attempt starts only after that.

- First connect: retried after 1, 2, 4, 8, 16 s (``RetryPolicy.first_connect_delays``), then
  ``PARKED`` with a probe every 5 minutes (``park_probe_interval``; None means ``FAILED``).
- After a runtime disconnect: ``RECONNECTING`` with capped, jittered exponential backoff, for as
  long as it takes; the count starts over once a connection stayed up for ``healthy_after``.

The registry never holds a tool of a server that is not ``READY``: the supervisor has the
registry replace the server's tools only while it is ``READY`` (and after publishing it), and
when it leaves ``READY`` it first has them withdrawn and waits until the registry says so before
it publishes the new state. The registry's acknowledgement resolves a one-shot waiter, and a task
of the supervisor's nursery that waits on it puts
:class:`~trio_mcp.actors.runtime._registry.Withdrawn` in the mailbox with a blocking send: a full
mailbox delays the word, never loses it. A withdrawal is a tombstone for its generation, so
nothing of a dead connection comes back.

**The era of the server.** The supervisor remembers which era the server spoke (the
session's :class:`SessionInfo` in :class:`AttemptReady` says it) and hands it to the next
session, which then skips the probe (legacy: ``initialize`` at once; modern: ``server/discover``
with the revision that worked, without a fallback). An attempt with a remembered era that fails
before it is ready, unless the server could not be reached at all (the server may have been
replaced by one of the other era), clears the memory: the attempt after it probes again. A
server whose configuration fixes the era (``protocol``: ``legacy`` or ``modern``) is never
probed, and a legacy HTTP+SSE server (type ``sse``) always speaks the handshake revisions.

**The result cache.** The supervisor owns the server's
:class:`~trio_mcp.actors.runtime._cache.ResultCache` (unless ``cache_results`` is off), which
lives as long as it does: what one connection learned with a ``ttlMs`` serves the next one (a
reconnect to a modern server whose ``server/discover`` and ``tools/list`` are still fresh sends
neither). It lends the cache to each connection attempt (:meth:`ResultCache.lend`, in
:meth:`_start_attempt`: the lease goes to the new session) and takes it back the moment the
connection ends (``ConnectionLost`` or ``ConnectionClosed``), so that only the live generation
reads or writes it, synchronously, and nothing crosses between actors.

**Signing in.** A server with OAuth (``auth="oauth"``) has a sign-in actor
(:class:`~trio_mcp.transports.oauth.SignIn`), which the supervisor runs in its own nursery
(it outlives the connections; its ``auth`` goes with every HTTP request of the server). A
connection attempt, or a live connection, that ends with
:class:`~trio_mcp.protocol.AuthorizationRequired` (or a subclass) moves the server to
``NEEDS_AUTH`` at once: no retries and no backoff; the reason and the hint (the exact command
that fixes it, ``trio-mcp login NAME``) are in the status, the event and ``last_error``, and
calls fail at once with a :class:`ServerUnavailable` ending with the hint. A ``NEEDS_AUTH``
server re-checks once per ``park_probe_interval`` (a credential that ``trio-mcp login`` stored
from another process is found), quietly: it stays ``NEEDS_AUTH`` meanwhile and only an attempt
that gets READY changes its state. A host's ask (``rt.login`` asks once it has signed in)
connects at once: ``NEEDS_AUTH -> CONNECTING -> READY``. :class:`SignedOut` (``rt.logout``)
ends the connection and moves the server to ``NEEDS_AUTH``.

A host asking for a connection attempt (:meth:`ServerSupervisor.reconnect_now`) sets a flag that
the supervisor takes after each batch of messages; at most one :class:`ReconnectNow` (a wake-up)
is in the mailbox at a time, so no number of asks can fill it.

Stopping (:class:`Stop`, when the runtime closes): ``STOPPING``, the connection task is
cancelled (it closes its transport, bounded), the tools are withdrawn; ``STOPPED`` once both are
done, and the task returns.
"""

from __future__ import annotations

import logging
import math
import random
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager
from typing import Any, Final, TypeAlias

import attrs
import trio

from ...protocol._errors import (
    AuthorizationRequired,
    ConnectError,
    ConnectTimeout,
    CredentialsRefused,
    McpError,
    ServerDisconnected,
    ServerUnavailable,
)
from ...protocol._types import ServerCapabilities
from ...protocol._versions import Era
from ...transports._base import FrameSink, ProcessTransport, Transport
from ...transports._channel import ByteChannel
from ...transports.oauth._types import AuthStatus, SignIn
from ..config._backoff import first_connect_delay, reconnect_delay
from ..config._config import RuntimeConfig, ServerConfig, TransportKind
from ..config._oauth import login_hint
from ._cache import CacheLease, ResultCache, authorization_context
from ._callbacks import HostCallbacks
from ._dispatcher import EventPublisher
from ._events import ServerState, ServerStateChanged
from ._instructions import ServerInstructions, screen_instructions
from ._pending import ConnectionLost, PendingItem
from ._registry import Registry, RegistryView, ReplaceTools, ToolRefusal, Withdrawn, WithdrawServer
from ._session import Listing, Relisted, Session, SessionInfo
from ._subscriptions import ResourceSubscriptions
from ._tracing import ConnectSpan, parent_of, start_connect

__all__ = [
    "MAILBOX_SIZE",
    "SETTLED",
    "AttemptReady",
    "AttemptStarted",
    "ConnectionClosed",
    "Delivered",
    "ReconnectNow",
    "ServerStatus",
    "ServerSupervisor",
    "SignedOut",
    "Stop",
    "SupervisorMsg",
    "TransportOpener",
    "TransportWrapper",
]

logger = logging.getLogger("trio_mcp.supervisor")

#: Messages waiting for a supervisor.
MAILBOX_SIZE: Final = 64

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

#: ``open_transport(config, sink)``: a fresh transport for one connection attempt, whose frames
#: and events go into ``sink``.
TransportOpener: TypeAlias = Callable[
    [ServerConfig, FrameSink], AbstractAsyncContextManager[Transport]
]
#: Takes a server's configuration and the opener the runtime would use for it, and gives the
#: opener to use instead (``open_runtime(wrap_transport=...)``).
TransportWrapper: TypeAlias = Callable[[ServerConfig, TransportOpener], TransportOpener]


# --------------------------------------------------------------------------- messages


@attrs.frozen(kw_only=True)
class AttemptStarted:
    """The connection task of ``generation`` has its transport; ``process`` is that transport
    when it runs the server as a child process (for the status: pid, stderr), else None."""

    generation: int
    process: ProcessTransport | None = attrs.field(eq=False)


@attrs.frozen(kw_only=True)
class AttemptReady:
    """The handshake and first listing of ``generation`` are done."""

    generation: int
    session: Session = attrs.field(eq=False)
    listing: Listing
    connect_time: float


@attrs.frozen(kw_only=True)
class ConnectionClosed:
    """The connection task of ``generation`` has ended and its transport is closed."""

    generation: int


@attrs.frozen(kw_only=True)
class ReconnectNow:
    """Wakes the supervisor to take the host's ask for a connection attempt (the ask itself is
    a flag: see :meth:`ServerSupervisor.reconnect_now`)."""


@attrs.frozen(kw_only=True)
class Delivered:
    """The supervisor's delivery task has handed its message to the registry's mailbox."""


@attrs.frozen(kw_only=True)
class Stop:
    """The runtime is closing: stop for good."""


@attrs.frozen(kw_only=True)
class SignedOut:
    """The server's credentials were forgotten (``rt.logout``): end the connection and wait in
    ``NEEDS_AUTH``."""


SupervisorMsg: TypeAlias = (
    AttemptStarted
    | AttemptReady
    | ConnectionLost
    | ConnectionClosed
    | Relisted
    | Withdrawn
    | ReconnectNow
    | Delivered
    | Stop
    | SignedOut
)


# --------------------------------------------------------------------------- the status


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
    #: The era of ``protocol_version``: the handshake revisions, or the stateless 2026-07-28.
    era: Era | None = None
    #: The server's OAuth sign-in (never a secret); None for a server without OAuth.
    auth: AuthStatus | None = None
    #: The exact command that fixes the state (NEEDS_AUTH: ``trio-mcp login NAME``), else None.
    hint: str | None = None
    #: The server's ``instructions`` of its current (or last) connection, screened by the
    #: injection scan (``text`` None and ``withheld`` set when blocked); None: it gave none.
    instructions: ServerInstructions | None = None

    def declares(self, capability: str) -> bool:
        """Whether the server declared ``capability`` (``"tools"``, ``"resources"``,
        ``"prompts"``, ``"logging"``...) in its current (or last) handshake."""
        caps = self.capabilities
        return caps is not None and getattr(caps, capability, None) is not None


def _first_error(group: BaseExceptionGroup[Any]) -> BaseException:
    """The error that says best why a connection attempt failed: the first that is not a
    :class:`ServerDisconnected` (a request failing *because* the connection ended, such as the
    handshake's), else the first."""
    leaves = list(_leaves(group))
    return next((e for e in leaves if not isinstance(e, ServerDisconnected)), leaves[0])


def _leaves(group: BaseExceptionGroup[Any]) -> Iterator[BaseException]:
    for error in group.exceptions:
        if isinstance(error, BaseExceptionGroup):
            yield from _leaves(error)
        else:
            yield error


# --------------------------------------------------------------------------- the actor


@attrs.define(eq=False)
class ServerSupervisor:
    """Keeps one server connected, for the life of the runtime. Other tasks send it messages
    (:meth:`reconnect_now`, :meth:`stop`) and read what it published (:meth:`status`,
    :meth:`ready_session`, :meth:`wait_state`)."""

    config: ServerConfig
    runtime: RuntimeConfig
    registry: Registry
    callbacks: HostCallbacks
    open_transport: TransportOpener
    events: EventPublisher
    rng: random.Random = attrs.field(factory=random.Random)
    #: Why the server must not start although it is enabled (a project server the user has not
    #: approved: the reason says how to approve it). It stays DISABLED with this as its error.
    hold: str | None = None
    #: The resource URIs the host wants updates for on this server (``rt.subscribe_resource``),
    #: handed to every session: each one subscribes to them in its era.
    subscriptions: ResourceSubscriptions = attrs.field(factory=ResourceSubscriptions)
    #: The server's OAuth sign-in (``auth="oauth"``), run in the supervisor's nursery; None: no
    #: OAuth.
    sign_in: SignIn | None = None

    inbox: trio.MemorySendChannel[SupervisorMsg] = attrs.field(init=False)
    _mailbox: trio.MemoryReceiveChannel[SupervisorMsg] = attrs.field(init=False)
    #: The supervisor's nursery: its connection tasks and its helpers (a withdrawal's
    #: confirmation, the delivery of a message the registry's full mailbox did not take).
    _tasks: trio.Nursery | None = attrs.field(default=None, init=False)

    # The state; only the supervisor's task changes it.
    _state: ServerState = attrs.field(default=ServerState.CONNECTING, init=False)
    _generation: int = attrs.field(default=0, init=False)
    _phase: str = attrs.field(default="first", init=False)  # first | parked | runtime
    _failures: int = attrs.field(default=0, init=False)
    _session: Session | None = attrs.field(default=None, init=False)
    _info: SessionInfo | None = attrs.field(default=None, init=False)
    #: The screened instructions of the current (or last) connection (None: none given).
    _instructions: ServerInstructions | None = attrs.field(default=None, init=False)
    #: The transport of the current (or last) connection when it is a child process's (the
    #: typed check, a runtime-checkable Protocol's, is made once per connection).
    _process: ProcessTransport | None = attrs.field(default=None, init=False)
    _ready_since: float | None = attrs.field(default=None, init=False)
    _connect_time: float | None = attrs.field(default=None, init=False)
    _next_attempt_at: float | None = attrs.field(default=None, init=False)
    _last_error: str | None = attrs.field(default=None, init=False)
    #: The generation whose connection task runs (None: none runs).
    _running: int | None = attrs.field(default=None, init=False)
    _running_scope: trio.CancelScope | None = attrs.field(default=None, init=False)
    #: The newest generation whose end was handled (a second word of it is ignored).
    _ended: int = attrs.field(default=0, init=False)
    #: The generation being withdrawn (one at a time), and the reason.
    _withdrawing: int | None = attrs.field(default=None, init=False)
    _withdraw_reason: str = attrs.field(default="", init=False)
    _stopping: bool = attrs.field(default=False, init=False)
    _finished: bool = attrs.field(default=False, init=False)
    #: The era the server spoke last (and, modern, its revision): handed to the next session,
    #: which then does not probe. None: probe.
    _era: Era | None = attrs.field(default=None, init=False)
    _era_version: str | None = attrs.field(default=None, init=False)
    #: The running attempt was handed the remembered era (so its failure clears the memory).
    _attempt_remembers: bool = attrs.field(default=False, init=False)
    #: The host asked for a connection attempt that the supervisor has not taken yet. Part of
    #: the mailbox rather than of the state: :meth:`reconnect_now` sets it (and sends at most
    #: one :class:`ReconnectNow` to wake the supervisor), the supervisor's task clears it.
    _reconnect_asked: bool = attrs.field(default=False, init=False)
    #: Messages for the registry behind the one a delivery task is handing over (its mailbox
    #: was full), in order; None while none is being handed over. A later message supersedes a
    #: queued ReplaceTools (it is of the same generation or a newer one), so at most one
    #: WithdrawServer and one ReplaceTools wait here.
    _outbox: deque[ReplaceTools | WithdrawServer] | None = attrs.field(default=None, init=False)
    #: The server's result cache, lent to the running connection (None: not cached).
    _cache: ResultCache | None = attrs.field(default=None, init=False)
    #: NEEDS_AUTH: the command that fixes it (None in every other state).
    _hint: str | None = attrs.field(default=None, init=False)
    #: The next attempt from NEEDS_AUTH is the periodic re-check: it leaves the state alone
    #: unless it gets READY. False once the host asked.
    _quiet_probe: bool = attrs.field(default=False, init=False)
    #: The host asked for an attempt (a login) while one ran or the last connection's tools
    #: were being withdrawn: if that ends in NEEDS_AUTH, the next attempt is due at once (the
    #: ask may have come after what ran was refused). Taken by whatever ends the wait.
    _asked_during_probe: bool = attrs.field(default=False, init=False)
    #: Why the running connection is being ended (signed out): its end is a NEEDS_AUTH.
    _auth_override: AuthorizationRequired | None = attrs.field(default=None, init=False)
    #: The authorization failure that ended a READY connection whose tools are being withdrawn.
    _withdraw_auth: AuthorizationRequired | None = attrs.field(default=None, init=False)
    #: The OpenTelemetry span of the running attempt until it is ready or has failed (None:
    #: none, or not traced).
    _attempt: ConnectSpan | None = attrs.field(default=None, init=False)

    # What other tasks read: replaced (never changed) on every change.
    _published: ServerStatus = attrs.field(init=False)
    _changed: trio.Event = attrs.field(factory=trio.Event, init=False)

    def __attrs_post_init__(self) -> None:
        self.inbox, self._mailbox = trio.open_memory_channel[SupervisorMsg](MAILBOX_SIZE)
        self._published = self._snapshot()
        if self.runtime.cache_results:
            self._cache = ResultCache(server=self.name, context=authorization_context(self.config))

    # ------------------------------------------------------------------ for other tasks

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def state(self) -> ServerState:
        """The published state."""
        return self._published.state

    @property
    def instructions(self) -> ServerInstructions | None:
        """The published, screened instructions (None: the server gave none)."""
        return self._published.instructions

    def status(self, view: RegistryView | None = None) -> ServerStatus:
        """The published status, with the tool counts of the registry's ``view`` and the current
        stderr tail of a stdio server."""
        status = self._published
        view = view if view is not None else self.registry.view
        changes: dict[str, Any] = {
            "tool_count": len(view.tools_of(self.name)),
            "refused_tools": view.refused_of(self.name),
        }
        process = self._process
        if process is not None:
            changes["stderr_tail"] = process.stderr_tail()
        if self.sign_in is not None:
            changes["auth"] = self.sign_in.status()
        return attrs.evolve(status, **changes)

    def ready_session(self) -> Session:
        """The live session, or :class:`ServerUnavailable` saying the state and the next
        attempt."""
        session = self._session
        if session is not None and self.accepts_calls:
            return session
        raise self.unavailable()

    @property
    def accepts_calls(self) -> bool:
        """READY, and its connection has not ended (its tools are not being withdrawn, and its
        session's table has not said that the connection is over)."""
        session = self._session
        return (
            self._published.state is ServerState.READY
            and self._withdrawing is None
            and session is not None
            and not session.closed
        )

    @property
    def attempt_due(self) -> bool:
        """A connection attempt was asked for (:meth:`reconnect_now`) or is due, and has not
        started yet: the published state (PARKED, FAILED...) is about to change."""
        if self._reconnect_asked:
            return True
        due = self._next_attempt_at
        # An ended connection whose transport is still closing does not hold the next attempt
        # back for long: it starts once the transport is closed.
        idle = self._running is None or self._running <= self._ended
        return idle and due is not None and due <= trio.current_time()

    def unavailable(self) -> ServerUnavailable:
        status = self._published
        if status.state is ServerState.NEEDS_AUTH:
            # The message ends with the command that fixes it.
            return ServerUnavailable(
                f"server {self.name!r} needs a sign-in: {status.last_error}",
                server=self.name,
                state=status.state.value,
                hint=status.hint,
            )
        state = status.state.value
        why = f" ({status.last_error})" if status.last_error else ""
        if status.state is ServerState.READY:  # its connection just ended
            state = "reconnecting"
            why = (
                f" ({self._withdraw_reason})"
                if self._withdraw_reason
                else " (its connection ended)"
            )
        when = ""
        if status.next_attempt_at is not None:
            delta = max(0.0, status.next_attempt_at - trio.current_time())
            when = f"; next connection attempt in {delta:.1f} s"
        return ServerUnavailable(
            f"server {self.name!r} is {state}{why}{when}",
            server=self.name,
            state=state,
            next_attempt_at=status.next_attempt_at,
        )

    async def wait_state(self, predicate: Callable[[ServerState], bool]) -> ServerState:
        """Wait until the published state satisfies ``predicate``; returns it."""
        while not predicate(self._published.state):
            await self._changed.wait()
        return self._published.state

    async def wait_changed(self) -> None:
        """Wait for the next publication of the status (whatever the state)."""
        await self._changed.wait()

    def reconnect_now(self) -> None:
        """Ask for a connection attempt now (a parked or reconnecting server stops waiting).
        Coalesced: an ask while one is pending is the same ask, so asking in a loop never fills
        the mailbox. Never lost: the supervisor takes the ask after its next batch of messages,
        and a mailbox too full for the wake-up wakes it anyway."""
        if self._reconnect_asked:
            return
        self._reconnect_asked = True
        try:
            self.inbox.send_nowait(ReconnectNow())
        except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
            return

    async def signed_out(self) -> None:
        """Say that the server's credentials were forgotten: the connection ends and the
        server waits in NEEDS_AUTH."""
        try:
            await self.inbox.send(SignedOut())
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return

    async def stop(self) -> None:
        """Ask the supervisor to stop for good (it returns once stopped)."""
        try:
            await self.inbox.send(Stop())
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return

    # ------------------------------------------------------------------ the task

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Supervise until stopped. Only expected failures (``McpError``) of a connection are
        handled; a bug in our own code propagates and crashes the runtime loudly."""
        async with trio.open_nursery() as tasks:
            self._tasks = tasks
            if self.sign_in is not None:
                await tasks.start(self.sign_in.run)  # it outlives the connections
            task_status.started()
            self._begin()
            mailbox = self._mailbox
            while not self._finished:
                with trio.move_on_at(self._wake_at()):
                    self._handle(await mailbox.receive())
                    while not self._finished:
                        try:
                            msg = mailbox.receive_nowait()
                        except trio.WouldBlock:
                            break
                        self._handle(msg)
                    if self._reconnect_asked:
                        self._reconnect_asked = False
                        self._reconnect()
                    continue
                self._start_attempt()
            # Stopped: what is left in the nursery is a waiter whose word nobody reads now.
            tasks.cancel_scope.cancel()

    def _wake_at(self) -> float:
        """When the next attempt is due: never while one runs, and ``_next_attempt_at`` is None
        while the tools are being withdrawn (the backoff is decided after that) and once
        stopping."""
        if self._running is not None or self._next_attempt_at is None:
            return math.inf
        return self._next_attempt_at

    # ------------------------------------------------------------------ transitions (sync)

    def _begin(self) -> None:
        if not (self.config.enabled and self.runtime.enabled):
            self._set_state(ServerState.DISABLED, reason="disabled in the configuration")
            return
        if self.runtime.network_policy == "deny" and self.config.transport_kind.is_url:
            why = (
                "skipped: execution.networkPolicy is 'deny' "
                "(set it to 'allow' to connect URL servers)"
            )
            self._last_error = why
            logger.warning("server %r (%s) %s", self.name, self.config.transport_kind, why)
            self._set_state(ServerState.DISABLED, reason=why)
            return
        if self.hold is not None:
            self._last_error = self.hold
            self._set_state(ServerState.DISABLED, reason=self.hold)
            return
        self._next_attempt_at = trio.current_time()

    def _handle(self, msg: SupervisorMsg) -> None:
        match msg:
            case AttemptStarted(generation=generation, process=process):
                if generation == self._generation:
                    self._process = process
            case AttemptReady():
                self._ready(msg)
            case ConnectionLost(generation=generation, error=error):
                self._reclaim(generation)
                self._lost(generation, error)
            case ConnectionClosed(generation=generation):
                self._reclaim(generation)
                self._closed(generation)
            case Relisted(generation=generation, listing=listing):
                if (
                    generation == self._generation
                    and self._state is ServerState.READY
                    and self._withdrawing is None
                ):
                    self._replace(generation, listing)
            case Withdrawn(generation=generation):
                # One withdrawal at a time, confirmed once: the word is always the awaited one.
                assert generation == self._withdrawing, (generation, self._withdrawing)
                self._withdrawn(generation)
            case ReconnectNow():
                pass  # a wake-up: the ask is taken after the batch
            case Delivered():
                self._deliver_next()
            case Stop():
                self._stop()
            case SignedOut():
                self._signed_out()

    def _reconnect(self) -> None:
        """The host's ask: the next attempt is due now, unless one runs, the tools of the last
        connection are being withdrawn (the backoff is decided after that), the server is
        disabled, or the supervisor is stopping."""
        if self._state is ServerState.NEEDS_AUTH:
            self._quiet_probe = False
        if (self._running is not None or self._withdrawing is not None) and not self._stopping:
            # What runs (or ends) may still be refused for want of the sign-in the host has just
            # made: then go again at once rather than at the re-check.
            self._asked_during_probe = True
        if (
            self._running is None
            and self._withdrawing is None
            and not self._stopping
            and self._state is not ServerState.DISABLED
        ):
            self._next_attempt_at = trio.current_time()

    def _start_attempt(self) -> None:
        assert self._tasks is not None
        self._generation += 1
        self._next_attempt_at = None
        self._process = None
        scope = trio.CancelScope()
        self._running = self._generation
        self._running_scope = scope
        state = ServerState.RECONNECTING if self._phase == "runtime" else ServerState.CONNECTING
        if self._state is ServerState.NEEDS_AUTH and self._quiet_probe:
            self._publish()  # the re-check: NEEDS_AUTH until it gets READY
        else:
            self._hint = None
            self._set_state(state, reason=self._last_error)
        era, version = self._start_era()
        lease = None if self._cache is None else self._cache.lend(self._generation)
        self._attempt = start_connect(self.runtime, self.name, self._generation)
        with parent_of(self._attempt):  # the attempt's task and its requests: in its span
            self._tasks.start_soon(self._connection, self._generation, scope, era, version, lease)

    def _reclaim(self, generation: int) -> None:
        """The connection of ``generation`` has ended: its lease of the cache stops working."""
        if self._cache is not None:
            self._cache.reclaim(generation)

    def _start_era(self) -> tuple[Era | None, str | None]:
        """The era (and modern revision) the next session speaks without probing: what the
        configuration forces, else what the server spoke last; (None, None): probe."""
        self._attempt_remembers = False
        choice = self.config.protocol
        if choice == "legacy" or self.config.transport_kind is TransportKind.SSE:
            return Era.LEGACY, None
        remembered = self._era_version if self._era is Era.MODERN else None
        if choice == "modern":
            return Era.MODERN, remembered
        if self._era is not None:
            self._attempt_remembers = True
        return self._era, remembered

    def _ready(self, msg: AttemptReady) -> None:
        if msg.generation != self._generation or msg.generation <= self._ended or self._stopping:
            return  # the attempt has failed (or ended) already, or we are stopping
        now = trio.current_time()
        if self._phase != "runtime":
            # First time ready: first-connect failures say nothing about later drops. After that
            # the count only starts over once a connection stayed up for ``healthy_after``, so a
            # server that drops right after every connect keeps backing off.
            self._failures = 0
            self._phase = "runtime"
        self._session = msg.session
        self._info = info = msg.session.info
        self._screen_instructions(info)
        if self._attempt is not None:
            self._attempt.ready(info, len(msg.listing.tools))
            self._attempt = None
        if info is not None and self.config.protocol == "auto":
            self._era = info.era
            self._era_version = info.protocol_version
        self._ready_since = now
        self._connect_time = msg.connect_time
        self._last_error = None
        self._hint = None
        self._quiet_probe = self._asked_during_probe = False
        self._set_state(ServerState.READY)
        self._replace(msg.generation, msg.listing)
        if logger.isEnabledFor(logging.DEBUG):
            for tool in msg.listing.tools:
                logger.debug("server %r: offers tool %s", self.name, tool.name)

    def _screen_instructions(self, info: SessionInfo | None) -> None:
        """Screen the connection's instructions (the injection scan, as for tool descriptions);
        a text that is withheld or warned about is logged once per connection that sends it."""
        text = info.instructions if info is not None else None
        if not text:
            self._instructions = None
            return
        screened = screen_instructions(self.name, text, policy=self.runtime.security_policy)
        self._instructions = screened
        if screened.withheld is not None:
            logger.warning(
                "server %r: its instructions are withheld: %s", self.name, screened.withheld
            )
        for warning in screened.warnings:
            logger.warning("server %r: instructions: %s", self.name, warning)

    def _replace(self, generation: int, listing: Listing) -> None:
        self._to_registry(
            ReplaceTools(
                server=self.name,
                generation=generation,
                tools=listing.tools,
                refused=listing.refused,
                shapes=listing.shapes,
            )
        )

    def _lost(self, generation: int, error: McpError) -> None:
        """The connection of ``generation`` ended (the first word of it counts)."""
        if generation != self._generation or generation <= self._ended:
            return
        self._ended = generation
        if self._attempt is not None:  # it ended before it was ready
            self._attempt.failed(error)
            self._attempt = None
        auth = self._auth_override or (error if isinstance(error, AuthorizationRequired) else None)
        self._auth_override = None
        reason = _describe(error if auth is None else auth)
        if self._session is not None:  # it was READY: withdraw first, then say so
            self._session = None
            self._withdraw_auth = auth
            self._withdraw(generation, reason)
            return
        if self._stopping:
            return
        if auth is not None:
            self._needs_auth(auth)
            return
        if self._attempt_remembers and (
            not isinstance(error, ConnectError) or isinstance(error, ConnectTimeout)
        ):
            assert self._era is not None
            logger.info(
                "server %r: the attempt that spoke the %s protocol it spoke before failed; "
                "the next attempt finds out again",
                self.name,
                self._era.value,
            )
            self._era = self._era_version = None
        if self._state is ServerState.NEEDS_AUTH and self._quiet_probe:
            # The re-check could not tell (the server is unreachable): only a READY changes
            # the state, so it stays NEEDS_AUTH, with its reason and hint, and checks again.
            logger.info("server %r: the sign-in re-check failed: %s", self.name, reason)
            interval = self.runtime.retry.park_probe_interval
            self._next_attempt_at = None if interval is None else trio.current_time() + interval
            self._publish()
            return
        self._failed(reason)

    def _withdraw(self, generation: int, reason: str) -> None:
        """Have the registry withdraw the tools up to ``generation``; :class:`Withdrawn` comes
        back once no published view holds them."""
        assert self._tasks is not None
        self._withdrawing = generation
        self._withdraw_reason = reason
        acknowledged = _Acknowledgement()
        self._tasks.start_soon(self._confirm_withdrawal, generation, acknowledged)
        self._to_registry(
            WithdrawServer(
                server=self.name, generation=generation, reason=reason, reply_to=acknowledged
            )
        )

    def _withdrawn(self, generation: int) -> None:
        """The registry's view holds no tool of ``generation`` any more: publish what the
        supervisor knew since the connection ended."""
        self._withdrawing = None
        reason = self._withdraw_reason
        self._withdraw_reason = ""
        if self._stopping:
            self._maybe_stopped()
            return
        auth, self._withdraw_auth = self._withdraw_auth, None
        if auth is not None:
            self._ready_since = None
            self._needs_auth(auth)
            return
        self._asked_during_probe = False  # an ask during the withdrawal: the backoff decides
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
        self._set_state(ServerState.RECONNECTING, reason=reason)

    def _failed(self, reason: str) -> None:
        """A connection attempt failed before it was ready."""
        self._asked_during_probe = False  # an ask while it ran: the backoff decides
        now = trio.current_time()
        self._last_error = reason
        self._failures += 1
        policy = self.runtime.retry
        delay: float | None
        if self._phase == "runtime":
            delay = reconnect_delay(policy, self._failures, self.rng)
            state = ServerState.RECONNECTING
        else:
            delay = first_connect_delay(policy, self._failures) if self._phase == "first" else None
            state = ServerState.CONNECTING
            if delay is None:
                self._phase = "parked"
                delay = policy.park_probe_interval
                state = ServerState.PARKED if delay is not None else ServerState.FAILED
        self._next_attempt_at = None if delay is None else now + delay
        logger.warning(
            "server %r failed to connect: %s%s",
            self.name,
            reason,
            f"; next attempt in {delay:g} s" if delay is not None else "; giving up",
        )
        self._set_state(state, reason=reason)

    def _needs_auth(self, error: AuthorizationRequired) -> None:
        """A connection (or an attempt) ended because only the user can sign in: NEEDS_AUTH at
        once, no retries; the next attempt is the re-check one ``park_probe_interval`` later
        (or at once, when the host asked during a re-check)."""
        now = trio.current_time()
        hint = error.hint or (
            None if isinstance(error, CredentialsRefused) else login_hint(self.name)
        )
        reason = _describe(error)
        if hint and not reason.endswith(hint):
            reason = f"{reason}; to sign in, run: {hint}"
        self._last_error = reason
        self._hint = hint
        self._failures = 0
        if self._asked_during_probe:
            self._asked_during_probe = self._quiet_probe = False
            self._next_attempt_at = now
        else:
            interval = self.runtime.retry.park_probe_interval
            self._quiet_probe = True
            self._next_attempt_at = None if interval is None else now + interval
        logger.warning("server %r needs a sign-in: %s", self.name, reason)
        if self._state is ServerState.NEEDS_AUTH:
            self._publish()  # a re-check found nothing new: no state change to announce
        else:
            self._set_state(ServerState.NEEDS_AUTH, reason=reason)

    def _signed_out(self) -> None:
        """The credentials were forgotten: end the connection (its end is a NEEDS_AUTH), or go
        to NEEDS_AUTH now."""
        if self._stopping or self._state is ServerState.DISABLED:
            return
        error = AuthorizationRequired(
            f"server {self.name!r}: signed out (its credentials were forgotten)",
            server=self.name,
            hint=login_hint(self.name),
        )
        if self._running is not None and self._running > self._ended:
            # The connection (or attempt) is live: its end is the NEEDS_AUTH. One that has
            # ended already (its transport still closing) is not waited for: its end was
            # handled, and an override left for it would be taken by a later connection.
            assert self._running_scope is not None
            self._auth_override = error
            self._running_scope.cancel()
        elif self._withdrawing is not None:
            self._withdraw_auth = error
        else:
            self._needs_auth(error)

    def _closed(self, generation: int) -> None:
        """The connection task of ``generation`` is over and its transport closed."""
        if generation == self._running:
            self._running = None
            self._running_scope = None
        if generation > self._ended:  # cancelled (stopping) before it could say how it ended
            self._lost(generation, ConnectError(f"server {self.name!r}: the connection ended"))
        if (
            self._asked_during_probe
            and self._running is None
            and self._state is ServerState.NEEDS_AUTH
            and not self._stopping
        ):
            # The host asked (a login) after the attempt had failed but before its transport
            # was closed: the attempt it asked for is due now.
            self._asked_during_probe = self._quiet_probe = False
            self._next_attempt_at = trio.current_time()
        if self._stopping:
            self._maybe_stopped()

    def _stop(self) -> None:
        """Stop for good: cancel the connection, withdraw the tools; a READY server stays
        READY (accepting no call) until the registry has withdrawn them, then STOPPING until
        the transport is closed, then STOPPED."""
        if self._stopping:
            return
        self._stopping = True
        self._next_attempt_at = None
        if self._running_scope is not None:
            self._running_scope.cancel()
        if self._withdrawing is None:
            self._session = None
            self._withdraw(self._generation, "stopped")
        self._maybe_stopped()

    def _maybe_stopped(self) -> None:
        if not self._stopping or self._withdrawing is not None:
            return  # a READY server leaves READY only once its tools are withdrawn
        if self._running is None:
            self._set_state(ServerState.STOPPED)
            self._finished = True
        elif self._state is not ServerState.STOPPING:
            self._set_state(ServerState.STOPPING)

    def _to_registry(self, msg: ReplaceTools | WithdrawServer) -> None:
        """Hand ``msg`` to the registry, in order: now, or (its mailbox full) from one delivery
        task at a time, the messages after it waiting in ``_outbox``."""
        outbox = self._outbox
        if outbox is None:
            if not self._send_or_deliver(msg):
                self._outbox = deque()
            return
        if outbox and isinstance(outbox[-1], ReplaceTools):
            # What is queued is of this generation or an older one: the listing waiting there is
            # superseded. A withdrawal never is; the supervisor asks for another one only after
            # the registry has taken this one, so the queue is at most a withdrawal and a listing.
            outbox.pop()
        outbox.append(msg)

    def _deliver_next(self) -> None:
        """The delivery task is done: the queued messages go on, in order."""
        outbox = self._outbox
        assert outbox is not None
        while outbox:
            if not self._send_or_deliver(outbox.popleft()):
                return  # the registry's mailbox is full again: the rest waits behind it
        self._outbox = None

    def _send_or_deliver(self, msg: ReplaceTools | WithdrawServer) -> bool:
        """Put ``msg`` in the registry's mailbox now (True), or start the delivery task that
        waits for room and then says :class:`Delivered` (False)."""
        try:
            self.registry.send_nowait(msg)
        except trio.WouldBlock:
            assert self._tasks is not None
            self._tasks.start_soon(self._deliver, msg)
            return False
        return True

    def _snapshot(self) -> ServerStatus:
        info = self._info
        process = self._process
        return ServerStatus(
            name=self.name,
            state=self._state,
            transport=self.config.transport_kind.value,
            generation=self._generation,
            protocol_version=info.protocol_version if info else None,
            server_name=info.server_name if info else None,
            server_version=info.server_version if info else None,
            connected_at=self._ready_since,
            connect_time=self._connect_time,
            last_error=self._last_error,
            next_attempt_at=self._next_attempt_at,
            failures=self._failures,
            pid=process.pid if process is not None else None,
            capabilities=info.capabilities if info else None,
            era=info.era if info else None,
            hint=self._hint if self._state is ServerState.NEEDS_AUTH else None,
            instructions=self._instructions,
        )

    def _set_state(self, new: ServerState, *, reason: str | None = None) -> None:
        old = self._state
        self._state = new
        if new is ServerState.READY:
            logger.info("server %r is ready (generation %d)", self.name, self._generation)
        self._published = self._snapshot()
        self.events.publish(
            ServerStateChanged(
                server=self.name,
                old=old,
                new=new,
                generation=self._generation,
                reason=reason,
                next_attempt_at=self._next_attempt_at,
                hint=self._hint if new is ServerState.NEEDS_AUTH else None,
            )
        )
        self._changed.set()
        self._changed = trio.Event()

    def _publish(self) -> None:
        """Publish the status without a change of state (no event)."""
        self._published = self._snapshot()
        self._changed.set()
        self._changed = trio.Event()

    # ------------------------------------------------------------------ helper tasks

    async def _deliver(self, msg: ReplaceTools | WithdrawServer) -> None:
        """Wait for room in the registry's mailbox for ``msg``, then tell the supervisor."""
        await self.registry.send(msg)
        await self.inbox.send(Delivered())

    async def _confirm_withdrawal(self, generation: int, acknowledged: _Acknowledgement) -> None:
        """Once the registry has acknowledged the withdrawal of ``generation``, say so in the
        mailbox, waiting for room: the word the supervisor waits for to leave ``READY`` is
        never dropped."""
        await acknowledged.done.wait()
        await self.inbox.send(Withdrawn(server=self.name, generation=generation))

    # ------------------------------------------------------------------ the connection task

    async def _connection(
        self,
        generation: int,
        scope: trio.CancelScope,
        era: Era | None,
        version: str | None,
        cache: CacheLease | None,
    ) -> None:
        """One connection attempt and, once ready, the connection itself; the session speaks
        ``era`` (and ``version``) without probing, or probes (None), and uses the server's
        result cache through ``cache`` (None: none). Tells the supervisor
        everything through its mailbox; the last word is :class:`ConnectionClosed`, sent once
        the transport is closed."""
        inbox = self.inbox
        started = trio.current_time()
        ready = False
        try:
            with scope, trio.CancelScope(deadline=started + self.config.connect_timeout) as first:
                try:
                    mailbox = ByteChannel[PendingItem](max_bytes=self.runtime.mailbox_bytes)
                    async with self.open_transport(self.config, mailbox) as transport:
                        process = transport if isinstance(transport, ProcessTransport) else None
                        await inbox.send(AttemptStarted(generation=generation, process=process))
                        session = Session(
                            config=self.config,
                            runtime=self.runtime,
                            generation=generation,
                            transport=transport,
                            mailbox=mailbox,
                            callbacks=self.callbacks,
                            events=self.events,
                            supervisor=inbox,
                            start_era=era,
                            start_version=version,
                            cache=cache,
                            subscriptions=self.subscriptions,
                        )
                        error: BaseException
                        try:
                            async with trio.open_nursery() as nursery:
                                listing = await nursery.start(session.run)
                                first.deadline = math.inf
                                ready = True
                                await inbox.send(
                                    AttemptReady(
                                        generation=generation,
                                        session=session,
                                        listing=listing,
                                        connect_time=trio.current_time() - started,
                                    )
                                )
                            error = ConnectError(f"server {self.name!r}: the session ended")
                        except* McpError as group:
                            error = _first_error(group)
                        # Before the transport is closed (which may take its graces).
                        await inbox.send(
                            ConnectionLost(generation=generation, error=_as_mcp(error))
                        )
                except* McpError as group:  # opening (or closing) the transport failed
                    await inbox.send(
                        ConnectionLost(generation=generation, error=_as_mcp(_first_error(group)))
                    )
            if first.cancelled_caught and not ready:
                await inbox.send(
                    ConnectionLost(
                        generation=generation,
                        error=ConnectTimeout(
                            f"server {self.name!r} did not become ready within "
                            f"{self.config.connect_timeout:g} s (connect_timeout: spawn or "
                            "connect, handshake and tool listing)"
                        ),
                    )
                )
        finally:
            try:
                inbox.send_nowait(ConnectionClosed(generation=generation))
            except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
                with trio.CancelScope(shield=True):
                    await inbox.send(ConnectionClosed(generation=generation))


@attrs.define(eq=False)
class _Acknowledgement:
    """The ``reply_to`` of a supervisor's :class:`WithdrawServer`: a one-shot waiter that the
    registry resolves, synchronously in its own task, once its published view holds none of
    the withdrawn tools."""

    done: trio.Event = attrs.field(factory=trio.Event)

    def send_nowait(self, value: Withdrawn, /) -> None:
        self.done.set()


def _as_mcp(error: BaseException) -> McpError:
    return error if isinstance(error, McpError) else ConnectError(str(error))


def _describe(error: McpError) -> str:
    return f"{type(error).__name__}: {error}"
