"""Session: one connection generation to one server.

A :class:`Session` is two things. For callers (``rt.call`` in the host's task, the catalog, the
session's own tasks) it is the handle through which a request is made: the caller allocates the
request id, puts an :class:`~trio_mcp.actors.runtime._pending.Expect` into the connection's
mailbox, puts the frame into the transport's outbox, and waits on its waiter. For the connection
it is the task (:meth:`Session.run`) whose nursery holds the connection's actors:

- :class:`~trio_mcp.actors.runtime._pending.PendingCalls`: the table of waiting calls, the
  receiving end of the transport;
- :class:`~trio_mcp.actors.runtime._dispatcher.Dispatcher`: server requests and notifications;
- the **re-lister**: after ``notifications/tools/list_changed``, once the notifications have been
  quiet for ``list_changed_debounce``, lists every page again, applies the checks, and sends the
  result to the supervisor (:class:`Relisted`), which has the registry replace the server's tools;
- the **control loop**: for Streamable HTTP, a new session when the server ended the old one
  (:class:`~trio_mcp.transports.SessionExpiredNotice`, passed on by the table), made in a task
  of its own: ``initialize`` again ahead of the frames the transport holds, then let it send
  them, restore the log level and list the tools again; the calls lost in flight have already
  failed as outcome unknown. An expiry before the first handshake is done, a second expiry
  during that, or a failed re-initialize ends the connection (the supervisor reconnects), and
  the held calls fail as never sent. A transport that passes an expiry up but cannot hold its
  frames (not a :class:`~trio_mcp.transports.ResumableTransport`: one built around the HTTP
  transport, such as the chaos transport) has no control loop: the table ends the connection
  at its first expiry;
- the **subscriber** (:class:`~trio_mcp.actors.runtime._subscriptions.Subscriber`): in
  2026-07-28, the ``subscriptions/listen`` request through which the server sends its change
  notifications (opened before the first listing; what it receives goes to the dispatcher, as
  a legacy server's notifications do); in the handshake revisions, the host's resource
  subscriptions (``resources/subscribe``). Only when the server's capabilities give it
  something to do;
- the session task itself: the era detection and the handshake (see below) and the first tool
  listing, after which it starts the re-lister; its nursery then holds the actors above until
  the connection ends.

**Which revision.** A server speaks the handshake revisions (2024-11-05 to 2025-11-25,
"legacy") or the stateless 2026-07-28 ("modern"), or both. Unless the supervisor hands the
session the era it found before (or the configuration forces one: ``protocol``), the first
request is the probe: ``server/discover`` with 2026-07-28 in its ``_meta`` (and, over HTTP, in
the transport's stateless shape), given :data:`PROBE_TIMEOUT` seconds at most (half of
``connect_timeout`` if that is less). A ``DiscoverResult`` means modern, and the version is
chosen from its ``supportedVersions``; a modern error (-32020 to -32099, such as -32022 with the
versions the server supports) means modern too: the request is made again with a version both
sides speak, and there is no fallback. Anything else (another error, an answer that is not a
``DiscoverResult``, an HTTP error status, no answer in time) means legacy: ``initialize`` and
``notifications/initialized`` as the handshake revisions have it (over HTTP, in the
transport's handshake shape again, with its fallback to HTTP+SSE). A legacy handshake that a
server refuses with -32022 naming 2026-07-28 (a modern server that started too slowly to answer
the probe in time) switches to modern.

A modern session puts the request envelope into every request's ``_meta`` (the version, the
client's capabilities in that revision's shape, ``clientInfo``, the log level when one is
configured, the progress token), sends no ``initialize``, ``notifications/initialized``,
``logging/setLevel`` or ``ping``, and answers no server request. A -32022 answer to any request
makes it again once, under a new id, with a version both sides speak (the session switches to
it); -32021 is a :class:`~trio_mcp.protocol.MissingClientCapability` naming what the server
needs. A ``tools/call``, ``resources/read`` or ``prompts/get`` the server answers with
``resultType: "input_required"`` goes through the input rounds (:func:`with_input_rounds`): the
host's callbacks answer, and the request is made again with the answers.

When the connection ends, the table fails every waiting call at once and tells the supervisor;
the table's error tears down the session's nursery, and :meth:`Session.run` raises it.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, Final, Protocol, TypeVar

import attrs
import trio

from ...protocol._errors import (
    CallTimeout,
    CredentialsNotCarried,
    HeaderMismatch,
    HttpStatusError,
    InvalidMessage,
    InvalidParams,
    ListingTooLarge,
    LocalProtocolError,
    McpError,
    RemoteProtocolError,
    RpcError,
    ServerDisconnected,
    TransportClosed,
    TransportError,
    UnsupportedProtocolVersion,
    UnsupportedVersion,
)
from ...protocol._headers import ParamHeaders, param_headers, request_headers
from ...protocol._jsonrpc import (
    Notification,
    Request,
    RequestId,
    cancel_notification,
    encode_json,
    serialize,
    serialize_request,
)
from ...protocol._methods import INPUT_REQUIRED_METHODS, SKILLS_EXTENSION, decode_result
from ...protocol._types import (
    CallToolResult,
    DiscoverResult,
    InitializeResult,
    InputRequiredResult,
    ServerCapabilities,
    Tool,
)
from ...protocol._versions import (
    LATEST_LEGACY,
    LATEST_MODERN,
    LEGACY_VERSIONS,
    META_CLIENT_CAPABILITIES,
    META_PROGRESS_TOKEN,
    META_SERVER_INFO,
    MODERN_VERSIONS,
    Era,
    build_request_meta,
    check_initialize_answer,
    choose_modern_version,
    features,
    is_modern_error,
)
from ...transports._base import (
    CredentialTransport,
    HeaderTransport,
    RequestCredentials,
    ResumableTransport,
    SessionExpiredNotice,
    StatelessTransport,
    Transport,
    VersionedTransport,
)
from ...transports._channel import ITEM_OVERHEAD
from ..config._config import RuntimeConfig, ServerConfig
from ._cache import CacheKey, CacheLease, cache_key
from ._callbacks import HostCallbacks
from ._dispatcher import Dispatcher, DispatchItem, EventPublisher, ModernSession
from ._inputs import answer_input
from ._mrtr import with_input_rounds
from ._pending import (
    AllowBatches,
    ConnectionLost,
    Expect,
    Forget,
    Listen,
    Mailbox,
    PendingCalls,
    PendingStatistics,
    ProgressCallback,
    Subscription,
    TimedOut,
    Waiter,
)
from ._registry import ToolRefusal
from ._shaping import AppliedShape, ShapedListing, shape_listing
from ._subscriptions import LISTEN, ResourceSubscriptions, Subscriber, listen_filter, subscribes
from ._taskserve import client_tasks, client_tasks_capability
from ._toolcheck import ListingCheck, check_listing, json_size
from ._tracing import TRACING, listing_span, with_trace_context

__all__ = ["PROBE_TIMEOUT", "Listing", "ProgressCallback", "Relisted", "Session", "SessionInfo"]

_INF: Final = float("inf")
_T = TypeVar("_T")
#: The longest wait for the answer to the probe (``server/discover``) before the server is
#: taken for a legacy one (half of ``connect_timeout`` when that is less). Short: a legacy
#: server that never answers unknown requests costs this on every first connection (the
#: supervisor remembers the era afterwards); a modern server too slow to answer in time is
#: still found, by its answer to ``initialize``.
PROBE_TIMEOUT: Final = 5.0
#: What an answer to the probe can be, besides a ``DiscoverResult`` or a modern error, that
#: says "a legacy server": an error it answered, no answer in time, an HTTP error status, an
#: answer that is not a ``DiscoverResult``.
_LEGACY_VERDICTS: Final = (RpcError, CallTimeout, HttpStatusError, RemoteProtocolError)
#: What a request the session makes on its own (a re-listing, the log level after a new HTTP
#: session) can fail with without ending the connection: the server's error answer, a bad
#: answer, a timeout, or the transport failing that request alone (on HTTP an error status is
#: a RequestFailed for that one request). The end of the connection itself reaches the session
#: through its table, which tears it down.
_REQUEST_FAILURES: Final = (RpcError, RemoteProtocolError, CallTimeout, TransportError)

#: The longest ``nextCursor`` a listing may hand back (UTF-8 bytes): an opaque position needs no
#: more, and a longer one would be sent back to the server, and shown to the model, page after page.
MAX_CURSOR_BYTES: Final = 64 * 1024


def cursor_too_long(cursor: str) -> bool:
    """Whether ``cursor`` is over :data:`MAX_CURSOR_BYTES` in UTF-8."""
    return len(cursor) > MAX_CURSOR_BYTES or (
        len(cursor) * 4 > MAX_CURSOR_BYTES
        and len(cursor.encode("utf-8", "surrogatepass")) > MAX_CURSOR_BYTES
    )


@attrs.frozen(kw_only=True)
class SessionInfo:
    """What the handshake (legacy) or ``server/discover`` (modern) established: the revision
    and its era, the server's identity (self-reported), capabilities and instructions."""

    protocol_version: str
    server_name: str
    server_version: str
    capabilities: ServerCapabilities
    instructions: str | None
    era: Era


@attrs.frozen(kw_only=True)
class Listing:
    """A checked tool listing: the tools that may register, and the ones refused (with
    reasons)."""

    tools: tuple[Tool, ...]
    refused: tuple[ToolRefusal, ...]
    #: The shaped tools' mappings back to the server, by their shaped name (see
    #: :mod:`~trio_mcp.actors.runtime._shaping`); empty without shaping rules.
    shapes: Mapping[str, AppliedShape] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class Relisted:
    """The session's word to the supervisor: the server's tools of ``generation`` were listed
    again (after a change notification, or after a new HTTP session)."""

    generation: int
    listing: Listing


class SupervisorSink(Protocol):
    """The supervisor's mailbox, as the session reaches it."""

    def send_nowait(self, value: Relisted | ConnectionLost, /) -> None: ...

    async def send(self, value: Relisted | ConnectionLost, /) -> None: ...


@attrs.define(eq=False)
class Session:
    """One connection generation. Build it, then ``listing = await nursery.start(session.run)``
    (the handshake and the first listing); callers use :meth:`request` and :meth:`call_tool`."""

    config: ServerConfig
    runtime: RuntimeConfig
    generation: int
    transport: Transport
    #: the connection's mailbox: the transport's sink, read by the session's table
    mailbox: Mailbox
    callbacks: HostCallbacks
    events: EventPublisher
    supervisor: SupervisorSink
    #: The era to speak without probing (the supervisor's memory of this server, or the
    #: configuration's ``protocol``); None: probe. With MODERN, ``start_version`` is the
    #: revision to ask for first (None: the newest).
    start_era: Era | None = None
    start_version: str | None = None
    #: The server's result cache, lent to this generation by the supervisor (None: results
    #: are not cached). Used in a modern session only (see :meth:`through_cache`).
    cache: CacheLease | None = None
    #: The resource URIs the host wants updates for (the supervisor's, across connections);
    #: None: a set of the session's own, empty.
    subscriptions: ResourceSubscriptions | None = None

    #: what the handshake established (set by the session's task, once, before it is ready)
    info: SessionInfo | None = attrs.field(default=None, init=False)
    _ids: itertools.count[int] = attrs.field(factory=lambda: itertools.count(1), init=False)
    _relist_send: trio.MemorySendChannel[None] = attrs.field(init=False)
    _relist_receive: trio.MemoryReceiveChannel[None] = attrs.field(init=False)
    _control_send: trio.MemorySendChannel[SessionExpiredNotice] = attrs.field(init=False)
    _control_receive: trio.MemoryReceiveChannel[SessionExpiredNotice] = attrs.field(init=False)
    _log: logging.Logger = attrs.field(init=False)
    _table: PendingCalls | None = attrs.field(default=None, init=False)
    #: The run's clock (``trio.current_time`` without its two layers; set by :meth:`run`).
    _clock: Callable[[], float] = attrs.field(default=trio.current_time, init=False)
    #: The first handshake is done (set by the session's task).
    _established: bool = attrs.field(default=False, init=False)
    #: A new HTTP session is being initialized (set and cleared by the control loop's task).
    _renewing: bool = attrs.field(default=False, init=False)
    #: The 2026-07-28 revision in use and the ``_meta`` envelope of its requests; both None in
    #: a legacy session (so a legacy request checks one attribute, and pays for nothing else).
    _version: str | None = attrs.field(default=None, init=False)
    _envelope: dict[str, Any] | None = attrs.field(default=None, init=False)
    #: The envelope encoded once (the JSON of ``_envelope``), for the requests that carry it alone.
    _envelope_json: bytes | None = attrs.field(default=None, init=False)
    #: The transport's abilities used by a modern session (None: it has not got them).
    _stateless: StatelessTransport | None = attrs.field(default=None, init=False)
    _headed: HeaderTransport | None = attrs.field(default=None, init=False)
    #: The transport, when it can send a request as a tenant (None: it cannot).
    _carrier: CredentialTransport | None = attrs.field(default=None, init=False)
    #: The tools of the last listing whose arguments go into ``Mcp-Param-*`` headers (2026-07-28
    #: over HTTP), by the server's tool name.
    _param_headers: Mapping[str, ParamHeaders] = attrs.field(factory=dict, init=False)
    _dispatch: trio.MemorySendChannel[DispatchItem] | None = attrs.field(default=None, init=False)
    #: Set while the tools are listed again after a -32020 answer (concurrent calls that got
    #: one wait for that listing instead of making their own).
    _header_relisting: trio.Event | None = attrs.field(default=None, init=False)
    #: The session's nursery (set by its task) and its subscription task, once started.
    _nursery: trio.Nursery | None = attrs.field(default=None, init=False)
    _subscriber: Subscriber | None = attrs.field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        # One slot each: a re-listing or a new session asked for while one is pending is the
        # same request (the re-lister debounces; a second expiry ends the connection).
        self._relist_send, self._relist_receive = trio.open_memory_channel[None](1)
        self._control_send, self._control_receive = trio.open_memory_channel[SessionExpiredNotice](
            1
        )
        self._log = logging.getLogger(f"trio_mcp.server.{self.config.name}")

    @property
    def server(self) -> str:
        return self.config.name

    @property
    def closed(self) -> bool:
        """Whether the connection has ended (its table failed every waiting call already; the
        supervisor hears of it a step later)."""
        table = self._table
        return table is not None and table.ended

    def statistics(self) -> PendingStatistics:
        """A snapshot of the session's table of waiting calls (for tests and the bench)."""
        assert self._table is not None, "the session has not started"
        return self._table.statistics()

    # ------------------------------------------------------------------ the task

    async def run(
        self, *, task_status: trio.TaskStatus[Listing] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Start the connection's actors, make the handshake and the first listing
        (``task_status.started(listing)``), then serve until the connection ends. Raises the
        error that ended it (a :class:`TransportClosed`, a protocol error...); returns only when
        cancelled from outside."""
        dispatcher = Dispatcher(
            server=self.server,
            callbacks=self.callbacks,
            transport=self.transport,
            events=self.events,
            relist=self._relist_send,
            cache=self.cache,
            tasks=client_tasks(self.runtime, self.callbacks, self.server),
        )
        # Only a transport that holds its frames meanwhile can have a new HTTP session made
        # for it; on any other the table ends the connection at the first expiry.
        transport = self.transport
        resumable = transport if isinstance(transport, ResumableTransport) else None
        table = PendingCalls(
            server=self.server,
            generation=self.generation,
            mailbox=self.mailbox,
            dispatch=dispatcher.inbox,
            control=None if resumable is None else self._control_send,
            lost=self.supervisor,
        )
        self._table = table
        self._clock = trio.lowlevel.current_clock().current_time
        self._dispatch = dispatcher.inbox
        if isinstance(transport, StatelessTransport):
            self._stateless = transport
        if isinstance(transport, HeaderTransport):
            self._headed = transport
        if isinstance(transport, CredentialTransport):
            self._carrier = transport
        async with trio.open_nursery() as nursery:
            await nursery.start(table.run)
            await nursery.start(dispatcher.run)
            if resumable is not None:
                nursery.start_soon(self._control, nursery, resumable)
            self._nursery = nursery
            listing = await self._handshake()
            self._established = True
            nursery.start_soon(self._relister)
            await self._start_subscriber()
            task_status.started(listing)

    async def _control(self, nursery: trio.Nursery, transport: ResumableTransport) -> None:
        """The session's control loop (only on a :class:`ResumableTransport`: on any other the
        table ends the connection at the first expiry): an HTTP session expiry starts a new
        session (in a task of its own, so that a second expiry meanwhile is seen at once), or
        ends the connection when the first handshake is not done yet or a new session is being
        initialized."""
        async for notice in self._control_receive:
            if self._established and not self._renewing:
                self._renewing = True
                nursery.start_soon(self._new_http_session, transport, notice)
                continue
            when = (
                "before the first handshake was done"
                if not self._established
                else "again while a new session was being initialized"
            )
            await self._give_up(transport, notice, f"{notice.error} ({when}); reconnecting")

    async def _give_up(
        self, transport: ResumableTransport, notice: SessionExpiredNotice, reason: str
    ) -> None:
        """End the connection after an HTTP session expiry that cannot be answered with a new
        session: the held calls fail as never sent, then the transport ends the connection (in
        that order, through its outbox), and the table fails what is left and raises."""
        error = TransportClosed(reason)
        error.__cause__ = notice.error
        await transport.discard_held()
        await transport.end(error)

    # ------------------------------------------------------------------ handshake

    def _client_info(self) -> dict[str, Any]:
        return {
            "name": self.runtime.client_name,
            "version": self.runtime.client_version or _package_version(),
        }

    def _initialize_params(self) -> dict[str, Any]:
        capabilities = self.callbacks.client_capabilities()
        if self.runtime.tasks:
            capabilities["tasks"] = client_tasks_capability(self.callbacks)
        return {
            "protocolVersion": LATEST_LEGACY,
            "capabilities": self._with_extensions(capabilities),
            "clientInfo": self._client_info(),
        }

    def _with_extensions(self, capabilities: dict[str, Any]) -> dict[str, Any]:
        """``capabilities`` with the extensions this server's configuration turns on
        (``skills: true``: ``io.modelcontextprotocol/skills``), under ``extensions``."""
        if self.config.skills:
            extensions = dict(capabilities.get("extensions") or {})
            extensions[SKILLS_EXTENSION] = {}
            capabilities = {**capabilities, "extensions": extensions}
        return capabilities

    async def _adopt(self, raw: Mapping[str, Any]) -> tuple[str, InitializeResult]:
        """Check the answer to ``initialize`` and take what it settles."""
        result = decode_result("initialize", raw)
        assert isinstance(result, InitializeResult)
        version = check_initialize_answer(LATEST_LEGACY, result.protocol_version)
        self.info = SessionInfo(
            protocol_version=version,
            server_name=result.server_info.name,
            server_version=result.server_info.version,
            capabilities=result.capabilities,
            instructions=result.instructions,
            era=Era.LEGACY,
        )
        if features(version).batches:
            await self.mailbox.send(AllowBatches())
        if isinstance(self.transport, VersionedTransport):
            await self.transport.set_protocol_version(version)
        return version, result

    async def _handshake(self) -> Listing:
        """Find out which era the server speaks (unless told), then the handshake of that era
        and the first tool listing."""
        if self.start_era is not Era.LEGACY:
            found = await self._discover(probe=self.start_era is None, version=self.start_version)
            if found is not None:
                return await self._modern_ready(found)
        return await self._legacy_handshake()

    async def _legacy_handshake(self) -> Listing:
        timeout = self.config.connect_timeout
        try:
            raw = await self.request("initialize", self._initialize_params(), timeout=timeout)
        except UnsupportedProtocolVersion as exc:
            version = choose_modern_version(_supported(exc))
            if version is None or self.config.protocol == "legacy":
                raise self._initialize_refused(exc, version) from exc
            # A modern server that was too slow to answer the probe in time.
            self._log.info(
                "the server refused initialize naming the versions it supports (%s): speaking %s",
                ", ".join(map(str, _supported(exc))),
                version,
            )
            found = await self._discover(probe=False, version=version)
            assert found is not None  # not a probe: a failure raises
            return await self._modern_ready(found)
        version, result = await self._adopt(raw)
        await self.notify("notifications/initialized")
        caps = result.capabilities
        if self.config.log_level is not None and caps.logging is not None:
            await self.request(
                "logging/setLevel", {"level": self.config.log_level}, timeout=timeout
            )
        listing = Listing(tools=(), refused=())
        if caps.tools is not None:
            listing = await self.list_tools()
        self._log.info(
            "connected: %s %s, protocol %s, %d tools",
            result.server_info.name,
            result.server_info.version,
            version,
            len(listing.tools),
        )
        return listing

    def _initialize_refused(
        self, exc: UnsupportedProtocolVersion, modern: str | None
    ) -> UnsupportedProtocolVersion:
        """The error for an ``initialize`` the server refused with -32022: it names both sides'
        versions, and what to change when the configuration forces the handshake revisions."""
        theirs = ", ".join(map(str, _supported(exc))) or "none it would name"
        advice = (
            f"; it speaks {modern} without a handshake: set this server's protocol to 'auto' "
            "or 'modern'"
            if modern is not None
            else ""
        )
        return UnsupportedProtocolVersion(
            f"server {self.server!r} refused initialize with {LATEST_LEGACY}: it supports "
            f"{theirs}, and trio-mcp speaks {', '.join(LEGACY_VERSIONS)} through initialize"
            f"{advice}",
            code=exc.code,
            data=exc.data,
            server=self.server,
            method="initialize",
            request_id=exc.request_id,
        )

    # ------------------------------------------------------------------ 2026-07-28

    def _probe_timeout(self) -> float:
        return min(PROBE_TIMEOUT, self.config.connect_timeout / 2)

    async def _speak_modern(self, version: str | None) -> None:
        """From now on, requests are of the 2026-07-28 revision ``version`` (None: legacy again,
        without an envelope). Sync but for the transport's shape, which follows in outbox
        order (before any frame sent after this)."""
        if version is None:
            self._version = self._envelope = self._envelope_json = None
        else:
            self._version = version
            self._envelope = build_request_meta(
                version,
                client_capabilities=self._with_extensions(self.callbacks.modern_capabilities()),
                client_info=self._client_info(),
                log_level=self.config.log_level,
            )
            self._envelope_json = encode_json(self._envelope)
            if self.info is not None and self.info.protocol_version != version:
                self.info = attrs.evolve(self.info, protocol_version=version)
        if self._stateless is not None:
            await self._stateless.set_stateless(version)

    async def _discover(self, *, probe: bool, version: str | None) -> DiscoverResult | None:
        """``server/discover`` with ``version`` (or the newest modern revision): its result,
        once the session speaks a revision both sides support. As the probe (``probe``), an
        answer that does not come from a modern server (see :data:`_LEGACY_VERDICTS`) gives
        None, the session speaking the handshake revisions again; otherwise it raises, as does
        a modern server with no revision in common."""
        await self._speak_modern(version or LATEST_MODERN)
        timeout = self._probe_timeout() if probe else self.config.connect_timeout
        retried = False
        while True:
            # Not a probe: a fresh result of an earlier connection answers without a request.
            cached = None if probe else self._fresh_result("server/discover", None)
            ticket = self._ticket("server/discover", None)
            try:
                # A probe that gets no answer is not cancelled on stdio: a legacy server may
                # not take a notification before initialize. Over HTTP, closing the stream is.
                raw = cached
                if raw is None:
                    raw = await self._send_request(
                        "server/discover",
                        None,
                        timeout=timeout,
                        cancel=not probe or self._stateless is not None,
                    )
                result = decode_result("server/discover", raw)
            except UnsupportedProtocolVersion as exc:
                if retried:
                    raise self._version_refused(exc) from exc
                retried = True
                await self._renegotiate(exc)
                continue
            except _LEGACY_VERDICTS as exc:
                if not probe or (isinstance(exc, RpcError) and is_modern_error(exc.code)):
                    raise
                await self._legacy_verdict(exc)
                return None
            if not isinstance(result, DiscoverResult):
                raise InvalidMessage(
                    f"server {self.server!r} answered server/discover with a "
                    f"{type(result).__name__}",
                    path="$.result",
                )
            chosen = choose_modern_version(result.supported_versions)
            if chosen is None:
                assert self._version is not None
                raise UnsupportedVersion(
                    f"server {self.server!r} supports {_listed(result.supported_versions)}, "
                    f"and trio-mcp speaks {', '.join(MODERN_VERSIONS)} without a handshake: no "
                    "version in common (a newer trio-mcp may speak it)",
                    requested=self._version,
                    answered=", ".join(map(str, result.supported_versions)),
                )
            if cached is None:
                self._keep(ticket, raw)
            if chosen != self._version:
                await self._speak_modern(chosen)
            return result

    async def _legacy_verdict(self, why: McpError) -> None:
        """The probe found no modern server: speak the handshake revisions."""
        self._log.info(
            "server/discover got %s: not a 2026-07-28 server; using initialize",
            _verdict_reason(why),
        )
        await self._speak_modern(None)

    async def _modern_ready(self, result: DiscoverResult) -> Listing:
        """Take what ``server/discover`` said, then list the tools (a modern session)."""
        version = self._version
        assert version is not None
        name, server_version = _server_identity(result)
        self.info = SessionInfo(
            protocol_version=version,
            server_name=name,
            server_version=server_version,
            capabilities=result.capabilities,
            instructions=result.instructions,
            era=Era.MODERN,
        )
        assert self._dispatch is not None
        await self._dispatch.send(ModernSession())
        await self._start_subscriber()  # the listen goes out before the listing
        listing = Listing(tools=(), refused=())
        if result.capabilities.tools is not None:
            listing = await self.list_tools(cached=True)
        self._log.info(
            "connected: %s %s, protocol %s (no handshake), %d tools",
            name,
            server_version,
            version,
            len(listing.tools),
        )
        return listing

    async def _renegotiate(self, exc: UnsupportedProtocolVersion) -> None:
        """The server refused the version of a request (-32022): speak a version it listed
        that trio-mcp speaks too, or raise :class:`UnsupportedProtocolVersion` naming both
        sides' versions."""
        version = choose_modern_version(_supported(exc))
        if version is None:
            raise self._version_refused(exc) from exc
        if version != self._version:
            self._log.info(
                "the server does not support %s; switching to %s", self._version, version
            )
        await self._speak_modern(version)

    def _version_refused(self, exc: UnsupportedProtocolVersion) -> UnsupportedProtocolVersion:
        requested = exc.data.get("requested") if isinstance(exc.data, Mapping) else None
        return UnsupportedProtocolVersion(
            f"server {self.server!r} does not support protocol version "
            f"{requested or self._version} (it supports {_listed(_supported(exc))}), and "
            f"trio-mcp speaks {', '.join(MODERN_VERSIONS)} without a handshake: no version in "
            "common",
            code=exc.code,
            data=exc.data,
            server=self.server,
            method=exc.method,
            request_id=exc.request_id,
        )

    def _request_headers(self, method: str, params: Mapping[str, Any] | None) -> dict[str, str]:
        """The HTTP headers of one 2026-07-28 request (``MCP-Protocol-Version``, ``Mcp-Method``,
        ``Mcp-Name`` and a tool's ``Mcp-Param-*``: :func:`request_headers`), handed to the
        :class:`HeaderTransport` with the frame. Only called in a modern session over one.
        Raises :class:`LocalProtocolError` for an argument its header cannot carry (nothing is
        sent)."""
        assert self._version is not None
        mirrored = None
        if method == "tools/call" and params is not None:
            name = params.get("name")
            mirrored = self._param_headers.get(name) if isinstance(name, str) else None
        return request_headers(method, params, version=self._version, param_headers=mirrored)

    async def _new_http_session(
        self, transport: ResumableTransport, notice: SessionExpiredNotice
    ) -> None:
        """The server ended the HTTP session: initialize a new one ahead of every held frame,
        let the transport send them, restore the log level and list the tools again. Ends the
        connection (through the transport) when that cannot be done."""
        try:
            await self._renew(transport, notice)
        finally:
            self._renewing = False

    async def _renew(self, transport: ResumableTransport, notice: SessionExpiredNotice) -> None:
        self._log.warning(
            "the server ended the session (%d calls lost in flight); initializing a new one",
            len(notice.lost),
        )
        timeout = self.config.connect_timeout
        try:
            raw = await self.request(
                "initialize", self._initialize_params(), timeout=timeout, now=True
            )
            version, result = await self._adopt(raw)
            frame = serialize(Notification(method="notifications/initialized"))
            await transport.send_now(frame)
        except McpError as exc:
            reason = f"the server ended the session and a new one could not be initialized: {exc}"
            await self._give_up(transport, notice, reason)
            return
        await transport.resume()
        self._log.info("a new session is initialized (protocol %s)", version)
        if self._subscriber is not None:  # the new session has no resource subscriptions
            self._subscriber.renewed()
        caps = result.capabilities
        try:
            if self.config.log_level is not None and caps.logging is not None:
                await self.request(
                    "logging/setLevel", {"level": self.config.log_level}, timeout=timeout
                )
            if caps.tools is not None:
                listing = await self.list_tools()
                await self.supervisor.send(Relisted(generation=self.generation, listing=listing))
        except _REQUEST_FAILURES as exc:
            self._log.warning("after the new session, restoring its state failed: %s", exc)

    # ------------------------------------------------------------------ calls

    def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout: float | None,
        progress: ProgressCallback | None = None,
        progress_resets_timeout: bool = False,
        max_time: float | None = None,
        now: bool = False,
        credentials: RequestCredentials | None = None,
    ) -> Coroutine[Any, Any, Mapping[str, Any]]:
        """Send a request and wait for its result (the raw ``result`` object), in the caller's
        task: ``await session.request(...)``.

        Raises :class:`RpcError` (the server answered with an error), :class:`CallTimeout` (no
        answer in ``timeout`` seconds, or ``max_time`` in all; the server is told to cancel:
        ``notifications/cancelled``, or over 2026-07-28 HTTP its response stream is closed),
        or :class:`ServerDisconnected` (its ``sent`` says whether the request had gone out).
        ``progress`` is called (in this task) with each progress notification; with
        ``progress_resets_timeout`` each one gives the call ``timeout`` more seconds, never
        past ``max_time``. ``now`` (for a new HTTP session, on a :class:`ResumableTransport`
        only): the frame goes past the ones the transport holds.

        In a modern session the request carries the ``_meta`` envelope; a -32022 answer makes
        it once more, under a new id, with a version both sides speak (or raises
        :class:`UnsupportedProtocolVersion` naming both sides' versions), and a result that
        asks for input goes through the input rounds (:meth:`_modern_request`). A legacy
        request pays for none of it: the era is decided once per session, and this returns the
        one coroutine that does the work.

        ``credentials``: the request (and each of its rounds and re-sends) goes as a tenant
        (:class:`~trio_mcp.transports.CredentialTransport`); raises
        :class:`CredentialsNotCarried` (nothing sent) when the transport cannot."""
        if self._envelope is None:
            return self._send_request(
                method,
                params,
                timeout=timeout,
                progress=progress,
                progress_resets_timeout=progress_resets_timeout,
                max_time=max_time,
                now=now,
                credentials=credentials,
            )
        return self._modern_request(
            method,
            params,
            timeout=timeout,
            progress=progress,
            progress_resets_timeout=progress_resets_timeout,
            max_time=max_time,
            credentials=credentials,
        )

    async def _modern_request(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        *,
        timeout: float | None,
        progress: ProgressCallback | None,
        progress_resets_timeout: bool,
        max_time: float | None,
        credentials: RequestCredentials | None = None,
    ) -> Mapping[str, Any]:
        """A request of a modern session (see :meth:`request`). ``tools/call``,
        ``resources/read`` and ``prompts/get`` go through the input rounds
        (:meth:`_with_rounds`)."""
        if method not in INPUT_REQUIRED_METHODS:
            raw = await self._versioned(
                method,
                params,
                timeout=timeout,
                progress=progress,
                progress_resets_timeout=progress_resets_timeout,
                max_time=max_time,
                credentials=credentials,
            )
            assert not isinstance(raw, InputRequiredResult)  # only those methods may ask
            return raw
        final, _ = await self._with_rounds(
            method,
            params,
            timeout=timeout,
            progress=progress,
            progress_resets_timeout=progress_resets_timeout,
            max_time=max_time,
            credentials=credentials,
        )
        return final

    async def _with_rounds(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        *,
        timeout: float | None,
        progress: ProgressCallback | None,
        progress_resets_timeout: bool,
        max_time: float | None,
        credentials: RequestCredentials | None = None,
    ) -> tuple[Mapping[str, Any], bool]:
        """A ``tools/call``, ``resources/read`` or ``prompts/get`` of a modern session through
        the input rounds (:func:`with_input_rounds`): its final result, and whether the server
        gave it to the request as first sent (no ``input_required`` answer on the way: only
        such a result may be cached). ``timeout`` covers every round and the host's answers,
        unless progress resets it (then each round gets ``timeout`` of quiet, and ``max_time``
        caps the whole)."""
        start = self._clock()
        hard = None if max_time is None else start + max_time
        if progress_resets_timeout or timeout is None:
            deadline = hard
        else:
            deadline = start + timeout if hard is None else min(start + timeout, hard)

        def send(
            round_params: Mapping[str, Any], left: float | None
        ) -> Coroutine[Any, Any, Mapping[str, Any] | InputRequiredResult]:
            # _versioned's coroutine itself: a round adds no coroutine layer of its own
            return self._versioned(
                method,
                round_params,
                timeout=timeout if progress_resets_timeout else left,
                progress=progress,
                progress_resets_timeout=progress_resets_timeout,
                max_time=left,
                credentials=credentials,
            )

        # The first round goes straight out: a call answered at once (nearly every call) pays
        # nothing for the rounds.
        first = await send(params or {}, None if deadline is None else deadline - start)
        if not isinstance(first, InputRequiredResult):
            return first, True
        final: Mapping[str, Any] = await with_input_rounds(
            send,
            method,
            params or {},
            answer=functools.partial(answer_input, self.callbacks, self.server),
            max_rounds=self.runtime.max_input_rounds,
            server=self.server,
            deadline=deadline,
            first=first,
            start=start,
        )
        return final, False

    async def _versioned(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        *,
        timeout: float | None,
        progress: ProgressCallback | None,
        progress_resets_timeout: bool,
        max_time: float | None,
        credentials: RequestCredentials | None = None,
    ) -> Mapping[str, Any] | InputRequiredResult:
        """One modern request: once more, under a new id, with a version both sides speak
        when the server refuses the version (-32022), and after a ``tools/call`` over HTTP gets
        -32020 (:meth:`_after_header_mismatch`). The raw result, or the decoded
        :class:`InputRequiredResult` when the server asks for input."""
        start = self._clock()
        try:
            raw = await self._send_request(
                method,
                params,
                timeout=timeout,
                progress=progress,
                progress_resets_timeout=progress_resets_timeout,
                max_time=max_time,
                credentials=credentials,
            )
        except UnsupportedProtocolVersion as exc:
            await self._renegotiate(exc)
            try:
                raw = await self._send_request(
                    method,
                    params,
                    timeout=timeout,
                    progress=progress,
                    progress_resets_timeout=progress_resets_timeout,
                    max_time=max_time,
                    credentials=credentials,
                )
            except UnsupportedProtocolVersion as again:
                raise self._version_refused(again) from again
        except HeaderMismatch as exc:
            if method != "tools/call" or self._headed is None:
                raise
            raw = await self._after_header_mismatch(
                exc,
                params,
                start=start,
                timeout=timeout,
                progress=progress,
                progress_resets_timeout=progress_resets_timeout,
                max_time=max_time,
                credentials=credentials,
            )
        if raw.get("resultType") == "input_required" and method in INPUT_REQUIRED_METHODS:
            result = decode_result(method, raw)
            assert isinstance(result, InputRequiredResult)
            return result
        return raw

    async def _send_request(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        *,
        timeout: float | None,
        progress: ProgressCallback | None = None,
        progress_resets_timeout: bool = False,
        max_time: float | None = None,
        now: bool = False,
        cancel: bool = True,
        credentials: RequestCredentials | None = None,
    ) -> Mapping[str, Any]:
        """Send one request under a new id and wait for its answer (see :meth:`request`); in a
        modern session with the ``_meta`` envelope. ``cancel``: tell the server when nobody
        waits for the answer any more (not for a probe on stdio). ``credentials``: sent as a
        tenant (see :meth:`request`)."""
        if credentials is not None and self._carrier is None:
            await trio.lowlevel.checkpoint()
            raise self._not_carried(method, credentials)
        request_id = next(self._ids)
        token: int | None = None
        if progress is not None or progress_resets_timeout:
            token = request_id
        if TRACING:  # the current span's trace context, in _meta
            params = with_trace_context(self.runtime, params)
        envelope = self._envelope
        if envelope is not None and token is None and not (params and "_meta" in params):
            # the commonest modern request: its _meta is the envelope, encoded once
            frame = serialize_request(request_id, method, params, meta=self._envelope_json)
        else:
            if envelope is not None or token is not None:
                params = _with_meta(params, envelope, token)
            frame = serialize_request(request_id, method, params)
        headers = (
            None
            if envelope is None or self._headed is None
            else self._request_headers(method, params)
        )
        waiter = Waiter(request_id, method)
        start = self._clock()
        hard_deadline = _INF if max_time is None else start + max_time
        deadline = min(_INF if timeout is None else start + timeout, hard_deadline)
        expect = Expect(
            request_id=request_id,
            method=method,
            waiter=waiter,
            deadline=deadline,
            progress_token=token,
            reset_timeout=timeout if progress_resets_timeout else None,
            hard_deadline=hard_deadline,
        )
        table = self._table
        assert table is not None, "the session has not started"
        try:
            try:
                if deadline >= table.armed_until:  # the table takes it by then: no wake-up
                    self.mailbox.defer_nowait(expect, ITEM_OVERHEAD)
                else:
                    self.mailbox.send_nowait(expect, ITEM_OVERHEAD)
            except trio.WouldBlock:
                await self.mailbox.send(expect, ITEM_OVERHEAD)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            # a checkpoint even when failing at once (trio's rule): a caller that retries in a
            # loop must let the table see the end of the connection, and the supervisor act
            await trio.lowlevel.checkpoint()
            raise self._not_sent(method, "the connection has ended") from None
        sent = False
        try:
            try:
                if credentials is None and headers is None and not now:
                    # the common case, without a coroutine of its own: room in the outbox
                    try:
                        self.transport.send_nowait(frame, request_id)
                    except trio.WouldBlock:
                        await self.transport.send(frame, request_id)
                elif credentials is None:
                    await self._send(frame, request_id, now=now, headers=headers)
                else:
                    await self._send_as(frame, request_id, method, credentials, headers)
            except TransportClosed as exc:
                await trio.lowlevel.checkpoint()
                raise self._not_sent(method, str(exc)) from exc
            sent = True
            try:
                return await waiter.wait(progress)
            except TimedOut:
                pass
            if cancel:
                self._tell_cancelled(request_id, method)
            waited = trio.current_time() - start
            raise CallTimeout(
                f"{method} to server {self.server!r} got no answer in {waited:g} s",
                timeout=timeout if timeout is not None else waited,
                server=self.server,
                method=method,
                request_id=request_id,
            )
        finally:
            if not waiter.done:  # failed to send, or the caller was cancelled
                waiter.abandoned = True
                with contextlib.suppress(
                    trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError
                ):
                    self.mailbox.send_nowait(Forget(request_id=request_id))
                if sent and cancel:
                    self._tell_cancelled(request_id, method)

    async def _send(
        self, frame: bytes, request_id: int, *, now: bool, headers: Mapping[str, str] | None
    ) -> None:
        transport = self.transport
        if now:  # only the control loop's new HTTP session asks, on a transport that can
            assert isinstance(transport, ResumableTransport), "now=True needs send_now"
            await transport.send_now(frame, request_id)
            return
        if headers is not None and self._headed is not None:
            try:
                self._headed.send_with_headers_nowait(frame, request_id, headers)
            except trio.WouldBlock:
                await self._headed.send_with_headers(frame, request_id, headers)
            return
        try:
            transport.send_nowait(frame, request_id)
        except trio.WouldBlock:
            await transport.send(frame, request_id)

    async def _send_as(
        self,
        frame: bytes,
        request_id: int,
        method: str,
        credentials: RequestCredentials,
        headers: Mapping[str, str] | None,
    ) -> None:
        """Put a tenant's request into the transport's outbox. A header the transport cannot
        send raises :class:`LocalProtocolError` (nothing sent), as does a transport that fell
        back to HTTP+SSE meanwhile: then as :class:`CredentialsNotCarried`."""
        carrier = self._carrier
        assert carrier is not None
        try:
            try:
                carrier.send_as_nowait(frame, request_id, credentials, headers)
            except trio.WouldBlock:
                await carrier.send_as(frame, request_id, credentials, headers)
        except LocalProtocolError as exc:
            raise self._not_carried(method, credentials, str(exc)) from exc

    def _not_carried(
        self, method: str, credentials: RequestCredentials, why: str | None = None
    ) -> CredentialsNotCarried:
        why = why or f"its transport ({self.transport.info.kind}) has no headers per request"
        return CredentialsNotCarried(
            f"server {self.server!r}: {method} for the tenant {credentials.label!r} was not "
            f"sent: {why}; only a Streamable HTTP server takes a tenant's own credentials "
            "(call it without a tenant, or configure the server over HTTP)",
            tenant=credentials.label,
            server=self.server,
            method=method,
        )

    def _not_sent(self, method: str, why: str) -> ServerDisconnected:
        return ServerDisconnected(
            f"server {self.server!r} disconnected before {method} was sent ({why}): it is safe "
            "to retry",
            server=self.server,
            sent=False,
            method=method,
        )

    def _tell_cancelled(self, request_id: RequestId, method: str) -> None:
        """Tell the server that nobody waits for ``request_id`` any more (best effort: not when
        the outbox is full or the connection has ended; never for ``initialize``)."""
        notice = cancel_notification(request_id, method, "the client stopped waiting")
        if notice is None:
            return
        with contextlib.suppress(trio.WouldBlock, TransportError, LocalProtocolError):
            self.transport.send_nowait(serialize(notice))

    async def watch_progress(
        self,
        token: int | str,
        progress: ProgressCallback,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Call ``progress`` (in this task) with every progress notification that carries
        ``token``, until cancelled or the connection ends: for a request the server answered
        already but goes on reporting on (a 2025-11-25 task keeps its ``tools/call``'s token
        until it ends). ``task_status.started()`` once the table routes the token here, so
        nothing sent after that is missed. The table holds it as a call that is never
        answered, under an id of its own that no request uses."""
        request_id = next(self._ids)
        waiter = Waiter(request_id, "notifications/progress")
        expect = Expect(
            request_id=request_id,
            method="notifications/progress",
            waiter=waiter,
            progress_token=token,
        )
        try:
            await self.mailbox.send(expect, ITEM_OVERHEAD)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            task_status.started()
            await trio.lowlevel.checkpoint()
            return
        task_status.started()
        try:
            await waiter.wait(progress)
        except McpError:  # the connection ended: the table failed every waiter
            return
        finally:
            if not waiter.done:
                waiter.abandoned = True
                with contextlib.suppress(
                    trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError
                ):
                    self.mailbox.send_nowait(Forget(request_id=request_id))

    async def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        """Send a notification. Raises :class:`ServerDisconnected` when the connection is gone."""
        frame = serialize(Notification(method=method, params=params))
        try:
            await self.transport.send(frame)
        except TransportClosed as exc:
            raise self._not_sent(method, str(exc)) from exc

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None,
        *,
        timeout: float | None,
        progress: ProgressCallback | None = None,
        meta: Mapping[str, Any] | None = None,
        credentials: RequestCredentials | None = None,
    ) -> CallToolResult:
        """``tools/call`` with the server's own tool name (and ``meta`` as its ``_meta``, when
        given); the decoded result. ``credentials``: made as a tenant (see :meth:`request`)."""
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = dict(arguments)
        if meta:
            params["_meta"] = dict(meta)
        config = self.config
        # what self.request returns, without its layer: the era is decided once per session
        send = self._send_request if self._envelope is None else self._modern_request
        raw = await send(
            "tools/call",
            params,
            timeout=timeout,
            progress=progress,
            progress_resets_timeout=config.progress_resets_timeout,
            max_time=config.max_call_time,
            credentials=credentials,
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

    async def list_all(self, method: str, key: str, *, cached: bool = False) -> list[Any]:
        """Every entry of a paginated listing (raw JSON objects), following ``nextCursor``.

        In a modern session every page fetched is kept in the server's cache when its
        ``ttlMs`` says it is fresh, and with ``cached`` the pages still fresh there are taken
        from it (each page on its own). A cursor the server refuses (-32602) after a page from
        the cache drops every page of the listing, and the listing starts again without a
        cursor, every page from the server.

        Raises :class:`ListingTooLarge` past the caps, on a cursor over 64 KiB
        (:data:`MAX_CURSOR_BYTES`) or on a cursor cycle.
        """
        entries: list[Any] = []
        seen: set[str] = set()
        cursor: str | None = None
        page = 0
        from_cache = False
        check = functools.partial(_page_of, self.server, method, key)
        while True:
            page += 1
            try:
                raw, hit = await self.through_cache(
                    method,
                    {"cursor": cursor} if cursor is not None else None,
                    timeout=self.config.timeout,
                    check=check,
                    use_cached=cached,
                )
            except InvalidParams:
                if cursor is None or not from_cache or self.cache is None:
                    raise
                self._log.info(
                    "%s: the server refused the cursor of a page from the cache; listing "
                    "every page again",
                    method,
                )
                self.cache.drop_listing(method)
                entries, seen, cursor, page = [], set(), None, 0
                from_cache = cached = False
                continue
            from_cache = from_cache or hit
            entries.extend(raw[key])
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
            if cursor_too_long(cursor):
                raise ListingTooLarge(
                    f"server {self.server!r}: {method} returned a nextCursor of more than "
                    f"{MAX_CURSOR_BYTES:,} bytes ({cursor[:40]!r}...)"
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

    async def list_tools(self, *, cached: bool = False) -> Listing:
        """Every page of ``tools/list``, with the registration checks applied; ``cached``: the
        pages still fresh in the server's cache come from there (see :meth:`list_all`)."""
        with listing_span(self.runtime, self.server, "tools/list") as span:
            raw = await self.list_all("tools/list", "tools", cached=cached)
            listing = await self._check_tools(raw)
            if span is not None:
                span.listed(len(listing.tools), len(listing.refused))
        return listing

    async def _check_tools(self, raw: list[Any]) -> Listing:
        """Apply the registration checks of :func:`check_listing` to a complete listing: the
        include/exclude filters, malformed entries, the input schema and the injection scan
        under the runtime's ``security_policy``. A bad tool is refused alone, never its server.

        A listing with more than ``offload_chars`` characters of text is checked in a worker
        thread, so a hostile listing cannot stall the event loop. Warnings are logged under
        ``trio_mcp.server.<name>``; refusals are logged by the registry, once each."""
        shaped = None
        listed = raw
        if self.config.tool_shapes:  # the filters go first, over the server's own names
            shaped = shape_listing(
                raw,
                self.config.tool_shapes,
                server=self.server,
                include=self.config.tools_include,
                exclude=self.config.tools_exclude,
            )
            raw = list(shaped.entries)
        check = functools.partial(
            check_listing,
            raw,
            server=self.server,
            include=self.config.tools_include if shaped is None else None,
            exclude=self.config.tools_exclude if shaped is None else (),
            policy=self.runtime.security_policy,
            nesting_bounded=True,  # every entry comes from a frame parse_message bounded
            # 2026-07-28 over HTTP: a tool whose x-mcp-header annotations are invalid is dropped
            check_param_headers=self._envelope is not None and self._headed is not None,
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
        if shaped is None:
            self._param_headers = checked.param_headers
            return Listing(tools=checked.tools, refused=checked.refused)
        return self._shaped(listed, shaped, checked)

    def _shaped(self, listed: list[Any], shaped: ShapedListing, checked: ListingCheck) -> Listing:
        """The listing of a server with shaping rules: refusals named by the server's tool
        names (and the shaped name), the shapes of the accepted tools, and the ``Mcp-Param-*``
        arguments of each by the server's names (read from the server's own schema)."""
        shapes = shaped.shapes
        refused = list(shaped.refused)
        for refusal in checked.refused:
            applied = shapes.get(refusal.tool) if refusal.tool is not None else None
            if applied is not None and applied.wire_name != refusal.tool:
                refusal = attrs.evolve(
                    refusal,
                    tool=applied.wire_name,
                    reason=f"(shaped as {refusal.tool!r}) {refusal.reason}",
                )
            refused.append(refusal)
        tools: list[Tool] = []
        mirrored: dict[str, ParamHeaders] = {}
        headed = self._envelope is not None and self._headed is not None
        originals: dict[Any, Any] | None = None
        for tool in checked.tools:
            applied = shapes.get(tool.name)
            if applied is None:
                found = checked.param_headers.get(tool.name)
                if found:
                    mirrored[tool.name] = found
            elif headed:
                # The server reads the headers of its own arguments: from its own schema.
                if originals is None:
                    originals = {
                        entry.get("name"): entry.get("inputSchema")
                        for entry in listed
                        if isinstance(entry, dict)
                    }
                schema = originals.get(applied.wire_name)
                own = param_headers(schema) if isinstance(schema, Mapping) else None
                if isinstance(own, str):
                    refused.append(
                        ToolRefusal(server=self.server, tool=applied.wire_name, reason=own)
                    )
                    continue
                if own:
                    mirrored[applied.wire_name] = own
            tools.append(tool)
        self._param_headers = mirrored
        kept = {tool.name for tool in tools}
        return Listing(
            tools=tuple(tools),
            refused=tuple(refused),
            shapes={name: applied for name, applied in shapes.items() if name in kept},
        )

    # ------------------------------------------------------------------ the result cache

    async def through_cache(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        *,
        timeout: float | None,
        check: Callable[[Mapping[str, Any]], _T],
        use_cached: bool = True,
        credentials: RequestCredentials | None = None,
        context: str | None = None,
    ) -> tuple[_T, bool]:
        """A request through the server's result cache (2026-07-28; see
        :mod:`~trio_mcp.actors.runtime._cache`): ``check(raw)`` of the result kept for it
        while fresh (``use_cached``), else of the server's answer, which is kept when its
        ``ttlMs`` says it is fresh, it is complete and the server asked for no input on the
        way; and whether it came from the cache. ``check`` validates the result (raising what
        a bad one deserves) and gives the value: a result that fails it is not kept.

        In a legacy session, without a cache, or for a request whose result is not cached (a
        method other than ``server/discover``, the listings and ``resources/read``), this is
        the plain :meth:`request`.

        ``credentials``: the request goes as a tenant (see :meth:`request`); ``context``: the
        authorization context its private results are kept under and read from (a tenant's:
        :func:`~trio_mcp.actors.runtime._tenants.tenant_context`; None: the configured one)."""
        ticket = self._ticket(method, params)
        if ticket is None:
            raw = await self.request(method, params, timeout=timeout, credentials=credentials)
            return check(raw), False
        lease = self.cache
        assert lease is not None
        if use_cached:
            kept = lease.fresh(ticket[0], context=context)
            if kept is not None:
                await trio.lowlevel.checkpoint()
                return check(kept), True
        raw, first_round = await self._first_round(
            method, params, timeout=timeout, credentials=credentials
        )
        value = check(raw)
        if first_round:
            self._keep(ticket, raw, context)
        return value, False

    def forget_listing(self, method: str) -> None:
        """Drop every cached page of the listing ``method`` (the server refused a cursor)."""
        if self.cache is not None:
            self.cache.drop_listing(method)

    def _ticket(self, method: str, params: Mapping[str, Any] | None) -> tuple[CacheKey, int] | None:
        """The key, and the invalidation epoch now, under which the result of this request may
        be kept; None when it may not be (a legacy session, no cache, a request whose result
        is not cached). Taken before the request is sent."""
        lease, version = self.cache, self._version
        if lease is None or version is None:
            return None
        key = cache_key(method, version, params)
        return None if key is None else (key, lease.epoch(method))

    def _fresh_result(
        self, method: str, params: Mapping[str, Any] | None
    ) -> Mapping[str, Any] | None:
        """The fresh result kept for this request, or None."""
        ticket = self._ticket(method, params)
        if ticket is None or self.cache is None:
            return None
        return self.cache.fresh(ticket[0])

    def _keep(
        self,
        ticket: tuple[CacheKey, int] | None,
        raw: Mapping[str, Any],
        context: str | None = None,
    ) -> None:
        """Keep the complete, checked result of a request made under ``ticket`` (private
        results under ``context``; None: the configured one)."""
        if ticket is not None and self.cache is not None:
            self.cache.store(ticket[0], raw, epoch=ticket[1], context=context)

    async def _first_round(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        *,
        timeout: float | None,
        credentials: RequestCredentials | None = None,
    ) -> tuple[Mapping[str, Any], bool]:
        """A modern request's final result, and whether the server gave it to the request
        as first sent (see :meth:`_with_rounds`). Like :meth:`request` otherwise, without
        progress."""
        if method not in INPUT_REQUIRED_METHODS:
            raw = await self.request(method, params, timeout=timeout, credentials=credentials)
            return raw, True
        return await self._with_rounds(
            method,
            params,
            timeout=timeout,
            progress=None,
            progress_resets_timeout=False,
            max_time=None,
            credentials=credentials,
        )

    # ------------------------------------------------------------------ -32020

    async def _after_header_mismatch(
        self,
        exc: HeaderMismatch,
        params: Mapping[str, Any] | None,
        *,
        start: float,
        timeout: float | None,
        progress: ProgressCallback | None,
        progress_resets_timeout: bool,
        max_time: float | None,
        credentials: RequestCredentials | None = None,
    ) -> Mapping[str, Any]:
        """A ``tools/call`` sent with its HTTP headers got -32020 (``HeaderMismatch``): the
        tool's ``x-mcp-header`` annotations may have changed since the tools were listed (an
        argument mirrored under another name, or newly mirrored; the client cannot tell which
        header the server found wrong). List the tools again from the server, which updates
        the headers the arguments go into and has the registry take the new listing, then
        make the call once more, under a new id, within what is left of its time (``start``:
        when it was first sent). A second -32020 is the error; a listing that fails gives the
        first -32020, caused by that failure."""
        name = (params or {}).get("name")
        self._log.info(
            "tools/call %r: the server found a header wrong (-32020); listing the tools again "
            "and making the call once more",
            name,
        )
        await self._relist_for_headers(exc)
        elapsed = trio.current_time() - start
        left = None if timeout is None or progress_resets_timeout else timeout - elapsed
        left_max = None if max_time is None else max_time - elapsed
        if any(t is not None and t <= 0 for t in (left, left_max)):
            await trio.lowlevel.checkpoint()
            raise CallTimeout(
                f"tools/call {name!r} to server {self.server!r} got -32020 (header mismatch), "
                f"and its time ran out while the tools were listed again ({elapsed:g} s)",
                timeout=timeout if timeout is not None else elapsed,
                server=self.server,
                method="tools/call",
                request_id=exc.request_id,
            ) from exc
        try:
            return await self._send_request(
                "tools/call",
                params,
                timeout=timeout if left is None else left,
                progress=progress,
                progress_resets_timeout=progress_resets_timeout,
                max_time=left_max,
                credentials=credentials,
            )
        except HeaderMismatch as again:
            detail = again.args[0] if again.args else ""
            raise HeaderMismatch(
                f"server {self.server!r} refused tools/call {name!r} with -32020 (header "
                f"mismatch) again after its tools were listed anew: {detail}",
                code=again.code,
                data=again.data,
                server=self.server,
                method="tools/call",
                request_id=again.request_id,
            ) from again

    async def _relist_for_headers(self, exc: HeaderMismatch) -> None:
        """List the tools again from the server after a -32020 and hand the listing to the
        supervisor; calls that got one meanwhile wait for the same listing."""
        pending = self._header_relisting
        if pending is not None:
            await pending.wait()
            return
        done = self._header_relisting = trio.Event()
        try:
            self.forget_listing("tools/list")
            listing = await self.list_tools()
        except McpError as failure:
            raise exc from failure
        finally:
            self._header_relisting = None
            done.set()
        await self.supervisor.send(Relisted(generation=self.generation, listing=listing))

    async def _relister(self) -> None:
        """List the tools again after list_changed notifications, once they have been quiet
        for ``list_changed_debounce`` seconds, and send the result to the supervisor."""
        debounce = self.runtime.list_changed_debounce
        async for _ in self._relist_receive:
            if self.cache is not None:  # whichever path the word came by
                self.cache.changed("tools")
            quiet = False
            while not quiet:  # each new notification starts the quiet time again
                with trio.move_on_after(debounce) as wait:
                    await self._relist_receive.receive()
                quiet = wait.cancelled_caught
            try:
                listing = await self.list_tools()
            except _REQUEST_FAILURES as exc:
                self._log.warning("re-listing tools failed: %s", exc)
                continue
            await self.supervisor.send(Relisted(generation=self.generation, listing=listing))

    # ------------------------------------------------------------------ subscriptions

    async def _start_subscriber(self) -> None:
        """Start the session's subscription task, once, when the server's capabilities give
        it something to do: a change it announces or resource subscriptions (2026-07-28:
        returns once its listen went out, so that nothing the server changes after the
        listing can be missed), resource subscriptions (the handshake revisions)."""
        nursery, session_info = self._nursery, self.info
        if self._subscriber is not None or nursery is None or session_info is None:
            return
        caps = session_info.capabilities
        if session_info.era is Era.MODERN:
            needed = subscribes(caps) or listen_filter(caps, frozenset()) is not None
        else:
            needed = subscribes(caps)
        if not needed:
            return
        interest = self.subscriptions or ResourceSubscriptions()
        self._subscriber = Subscriber(session=self, interest=interest)
        await nursery.start(self._subscriber.run)

    async def _open_listen(self, notifications: Mapping[str, Any]) -> Subscription:
        """Send ``subscriptions/listen`` asking for ``notifications``, with the request
        envelope (and its HTTP headers): the :class:`Subscription` that the table feeds with
        what names it. Its id is registered with the table first, like a call's, but it is no
        call: no deadline, no waiter. Raises :class:`ServerDisconnected` when the connection
        has ended (nothing was sent)."""
        request_id = next(self._ids)
        params = _with_meta({"notifications": dict(notifications)}, self._envelope, None)
        frame = serialize(Request(id=request_id, method=LISTEN, params=params))
        headers = None if self._headed is None else self._request_headers(LISTEN, params)
        subscription = Subscription(request_id)
        try:
            await self.mailbox.send(
                Listen(request_id=request_id, subscription=subscription), ITEM_OVERHEAD
            )
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            await trio.lowlevel.checkpoint()
            raise self._not_sent(LISTEN, "the connection has ended") from None
        sent = False
        try:
            await self._send(frame, request_id, now=False, headers=headers)
            sent = True
        except TransportClosed as exc:
            raise self._not_sent(LISTEN, str(exc)) from exc
        finally:
            if not sent:
                self._forget_listen(request_id, tell=False)
        return subscription

    def _forget_listen(self, request_id: RequestId, *, tell: bool = True) -> None:
        """Stop taking what names the listen ``request_id`` and (``tell``) tell the server,
        best effort, without waiting: for a subscriber that is cancelled."""
        with contextlib.suppress(
            trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError
        ):
            self.mailbox.send_nowait(Forget(request_id=request_id))
        if tell:
            self._tell_cancelled(request_id, LISTEN)

    async def _close_listen(self, request_id: RequestId) -> None:
        """Close the listen ``request_id``: ``notifications/cancelled`` naming it (over 2026-07-28
        HTTP the transport closes its stream instead), waiting for room in the outbox."""
        self._forget_listen(request_id, tell=False)
        notice = cancel_notification(request_id, LISTEN, "the client closed the subscription")
        assert notice is not None
        frame = serialize(notice)
        with contextlib.suppress(TransportError):
            try:
                self.transport.send_nowait(frame)
            except trio.WouldBlock:
                await self.transport.send(frame)

    def _forward(self, notification: Notification) -> None:
        """Hand a notification received on a listen to the dispatcher, which acts on it as on
        a legacy server's (the re-lister, the host's events)."""
        assert self._dispatch is not None
        try:
            self._dispatch.send_nowait(notification)
        except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
            self._log.warning(
                "the dispatcher is behind: %s from the server dropped", notification.method
            )


@functools.cache
def _package_version() -> str:
    """trio-mcp's version, read once (the package metadata is parsed on every read)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("trio-mcp")
    except PackageNotFoundError:  # pragma: no cover - source tree never installed
        return "0+unknown"


def _with_meta(
    params: Mapping[str, Any] | None, envelope: Mapping[str, Any] | None, token: int | None
) -> dict[str, Any]:
    """``params`` with the 2026-07-28 envelope and the progress token merged into its
    ``_meta`` (they win over what the caller put there, but for the ``extensions`` of the
    caller's client capabilities, which are added to the envelope's: a request opts into an
    extension that way, such as the tasks extension on one ``tools/call``); new objects, the
    caller's untouched."""
    meta = dict((params or {}).get("_meta") or {})
    if envelope is not None and not meta:  # nothing of the caller's to merge
        meta = dict(envelope)
    elif envelope is not None:
        asked = meta.get(META_CLIENT_CAPABILITIES)
        meta.update(envelope)
        extensions = asked.get("extensions") if isinstance(asked, Mapping) else None
        if isinstance(extensions, Mapping) and extensions:
            capabilities = dict(meta.get(META_CLIENT_CAPABILITIES) or {})
            capabilities["extensions"] = {**(capabilities.get("extensions") or {}), **extensions}
            meta[META_CLIENT_CAPABILITIES] = capabilities
    if token is not None:
        meta[META_PROGRESS_TOKEN] = token
    return {**(params or {}), "_meta": meta}


def _page_of(server: str, method: str, key: str, raw: Mapping[str, Any]) -> Mapping[str, Any]:
    """``raw``, a page of the listing ``method`` whose entries are under ``key``; raises
    :class:`InvalidMessage` when that is not an array."""
    if not isinstance(raw.get(key), list):
        raise InvalidMessage(
            f"server {server!r}: {method} result has no {key!r} array",
            path=f"$.result.{key}",
        )
    return raw


def _supported(exc: RpcError) -> Sequence[Any]:
    """The ``data.supported`` of a -32022 answer (empty when absent or not a list)."""
    supported = exc.data.get("supported") if isinstance(exc.data, Mapping) else None
    return supported if isinstance(supported, list | tuple) else ()


def _listed(versions: Sequence[Any]) -> str:
    return ", ".join(map(str, versions)) if versions else "none it would name"


def _server_identity(result: DiscoverResult) -> tuple[str, str]:
    """The server's name and version from a ``DiscoverResult``: its
    ``_meta["io.modelcontextprotocol/serverInfo"]`` (where 2026-07-28 puts it), else a
    ``serverInfo`` beside the result's fields (as some servers send it); ``""`` for what is
    missing. Self-reported: for display only."""
    info = (result.meta or {}).get(META_SERVER_INFO)
    if not isinstance(info, Mapping):
        info = result.extra.get("serverInfo")
    if not isinstance(info, Mapping):
        return "", ""
    name, version = info.get("name"), info.get("version")
    return (name if isinstance(name, str) else "", version if isinstance(version, str) else "")


def _verdict_reason(error: McpError) -> str:
    if isinstance(error, CallTimeout):
        return f"no answer in {error.timeout:g} s"
    if isinstance(error, RpcError):
        return f"error {error.code} ({error.args[0] if error.args else ''})"
    return f"{type(error).__name__}: {error}"
