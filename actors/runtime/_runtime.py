"""The Runtime: the root of trio-mcp, and the handle the host holds.

Two ways to embed it:

- ``async with open_runtime(config) as rt:`` owns its nursery. The runtime's actors keep running
  until the body has exited (service-nursery ordering), so the host's own ``finally:`` can still
  call tools while it is being cancelled.
- ``rt = await nursery.start(serve_runtime, config)`` runs in a nursery the host already owns,
  until ``await rt.aclose()``.

Either way, leaving stops every server: the tools are withdrawn, every transport is closed and
every child process group ended; later calls raise :class:`RuntimeClosed`; a second close is a
no-op. At this public edge a single failure is never raised as an ``ExceptionGroup``.
"""

from __future__ import annotations

import logging
import random
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, AbstractContextManager, asynccontextmanager
from enum import Enum
from types import MappingProxyType
from typing import Any, Final

import attrs
import trio

from ...protocol._errors import (
    McpTransportConfigError,
    RuntimeClosed,
    ServerUnavailable,
    ToolNotFound,
)
from ...protocol._types import CallToolResult
from ...transports._base import Transport
from ...transports._websocket import WebSocketParameters, open_websocket_transport
from ...transports.http._http import open_http_transport
from ...transports.http._http_base import HttpParameters
from ...transports.http._sse_client import open_sse_transport
from ...transports.stdio._stdio import StdioParameters, open_stdio_transport
from ..config._config import RuntimeConfig, ServerConfig, TransportKind
from ..config._redact import redact, redact_text
from ._callbacks import HostCallbacks
from ._events import EventBus, EventSubscription, ServerState
from ._naming import tool_name_prefix
from ._registry import RegisteredTool, Registry
from ._resources import (
    Capability,
    Listing,
    Page,
    PromptPage,
    PromptRead,
    ResourcePage,
    ResourceRead,
    Resources,
    ResourceTemplatePage,
)
from ._session import ProgressCallback, Session
from ._supervisor import SETTLED, ServerStatus, ServerSupervisor

__all__ = ["USE_DEFAULT", "Runtime", "RuntimeState", "open_runtime", "serve_runtime"]

logger = logging.getLogger("trio_mcp.runtime")


#: ``open_transport(config, on_stderr_line)``: a fresh transport for one connection attempt.
TransportOpener = Callable[
    [ServerConfig, Callable[[str], None]], AbstractAsyncContextManager[Transport]
]


class _UseDefault(Enum):
    USE_DEFAULT = "USE_DEFAULT"


#: Per-call option meaning "what the server's configuration says" (``None`` means no limit).
USE_DEFAULT: Final = _UseDefault.USE_DEFAULT


class RuntimeState(Enum):
    OPEN = "open"
    CLOSING = "closing"
    CLOSED = "closed"


def open_default_transport(
    config: ServerConfig, on_stderr_line: Callable[[str], None] | None = None
) -> AbstractAsyncContextManager[Transport]:
    """The transport for a server's configuration (a fresh one on every call).

    stdio runs the command; ``http`` speaks Streamable HTTP to ``url`` (falling back to the legacy
    HTTP+SSE transport when the server answers the first ``initialize`` with 400, 404 or 405);
    ``sse`` speaks the legacy HTTP+SSE transport; ``ws`` speaks WebSocket (subprotocol ``mcp``);
    all three send the configured ``headers``. A custom ``transport_factory`` is called as it is.
    ``on_stderr_line`` gets every line a stdio server writes to stderr. Raises
    :class:`McpTransportConfigError` for an invalid URL or header."""
    kind = config.transport_kind
    if kind is TransportKind.CUSTOM:
        assert config.transport_factory is not None
        return config.transport_factory()
    if kind is TransportKind.STDIO:
        assert config.command is not None
        return open_stdio_transport(
            StdioParameters(
                command=config.command,
                args=config.args,
                env=dict(config.env),
                cwd=config.cwd,
                max_frame_bytes=config.max_frame_bytes,
                on_stderr_line=on_stderr_line,
            )
        )
    if kind is TransportKind.HTTP or kind is TransportKind.SSE:
        assert config.url is not None
        params = HttpParameters(
            url=config.url,
            headers=dict(config.headers),
            max_frame_bytes=config.max_frame_bytes,
            connect_timeout=config.connect_timeout,
        )
        if kind is TransportKind.SSE:
            return open_sse_transport(params)
        return open_http_transport(params)
    if kind is TransportKind.WS:
        assert config.url is not None
        return open_websocket_transport(
            WebSocketParameters(
                url=config.url,
                headers=dict(config.headers),
                max_frame_bytes=config.max_frame_bytes,
                connect_timeout=config.connect_timeout,
            )
        )
    raise McpTransportConfigError(f"server {config.name!r}: unknown transport {kind!r}")


def _collapse(group: BaseExceptionGroup[Any]) -> BaseException:
    """The single failure inside nested groups, or the group itself when there are several."""
    leaves: list[BaseException] = []

    def walk(exc: BaseException) -> None:
        if isinstance(exc, BaseExceptionGroup):
            for sub in exc.exceptions:
                walk(sub)
        else:
            leaves.append(exc)

    walk(group)
    failures = [e for e in leaves if not isinstance(e, trio.Cancelled)]
    if len(failures) == 1:
        return failures[0]
    if not failures and leaves:
        return leaves[0]
    return group


@attrs.define(eq=False)
class Runtime:
    """The host's handle on the MCP servers. Built by :func:`open_runtime` or
    :func:`serve_runtime`, never directly."""

    config: RuntimeConfig
    callbacks: HostCallbacks
    registry: Registry
    _bus: EventBus
    _supervisors: dict[str, ServerSupervisor]
    _resources: Resources
    _state: RuntimeState = attrs.field(default=RuntimeState.OPEN, init=False)
    _scope: trio.CancelScope = attrs.field(factory=trio.CancelScope, init=False)
    _closed: trio.Event = attrs.field(factory=trio.Event, init=False)

    # ------------------------------------------------------------------ tools

    def tools(self, *, ready_only: bool = False) -> Mapping[str, RegisteredTool]:
        """The registered tools, registered name -> tool: an immutable snapshot.

        With ``ready_only`` only the tools of servers that are READY at this moment (for
        sub-agents that must not see anything that could fail as unavailable)."""
        snapshot = self.registry.snapshot()
        if not ready_only:
            return snapshot
        return MappingProxyType(
            {
                name: tool
                for name, tool in snapshot.items()
                if self._supervisors[tool.server].state is ServerState.READY
            }
        )

    @property
    def tools_version(self) -> int:
        """Increases on every change of the tool table."""
        return self.registry.version

    async def wait_tools_changed(self, after: int) -> int:
        """Wait until the tool table's version passes ``after``; returns the new version."""
        return await self.registry.wait_version(after)

    async def call(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | _UseDefault | None = USE_DEFAULT,
        progress: ProgressCallback | None = None,
        wait_ready: float | None = None,
    ) -> CallToolResult:
        """Call a registered tool by its registered name (``mcp_github_create_issue``).

        A tool error reported by the server (``isError``) is returned as data; see
        ``result.raise_for_error()``. Raises :class:`ToolNotFound`, :class:`ServerUnavailable`
        (the server is not ready: the error says its state and when the next attempt is due;
        ``wait_ready`` waits that many seconds for it first), :class:`CallTimeout`,
        :class:`ServerDisconnected` (``sent`` says whether the outcome is unknown),
        :class:`RpcError` or :class:`RuntimeClosed`.
        """
        self._check_open()
        tool = await self.lookup(name, wait_ready=wait_ready)
        session = await self._session_for(tool.server, wait_ready)
        server = self._supervisors[tool.server].config
        limit = server.timeout if isinstance(timeout, _UseDefault) else timeout
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug(
                "call %s -> %s/%s %s", name, tool.server, tool.wire_name, redact(arguments or {})
            )
        result = await session.call_tool(
            tool.wire_name, arguments, timeout=limit, progress=progress
        )
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug(
                "call %s done: isError=%s %s",
                name,
                bool(result.is_error),
                redact_text(result.text),
            )
        return result

    async def lookup(self, name: str, *, wait_ready: float | None = None) -> RegisteredTool:
        """The registered tool named ``name``.

        Raises :class:`ServerUnavailable` when it is not registered now because its server (the
        server that last offered it, or a server whose tools would be named with its prefix and
        that has not listed them yet) is not READY, after waiting up to ``wait_ready`` seconds
        for that server; :class:`ToolNotFound` when no server offers it."""
        tool = self.registry.get(name)
        if tool is None:
            for owner in self._possible_owners(name):
                await self._session_for(owner, wait_ready)
            tool = self.registry.get(name)
        if tool is None:
            raise ToolNotFound(
                f"no tool named {name!r} is registered; rt.tools() lists the current ones",
                method="tools/call",
            )
        return tool

    async def request(
        self,
        server: str,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout: float | _UseDefault | None = USE_DEFAULT,
        wait_ready: float | None = None,
    ) -> Mapping[str, Any]:
        """Send any request to one server and return the raw result (``resources/read``,
        ``prompts/get``, ``completion/complete``...). Decode it with
        ``trio_mcp.protocol.decode_result(method, result)``."""
        self._check_open()
        session = await self._session_for(server, wait_ready)
        limit = (
            self._supervisor(server).config.timeout if isinstance(timeout, _UseDefault) else timeout
        )
        return await session.request(method, params, timeout=limit)

    def _possible_owners(self, name: str) -> list[str]:
        """Servers that are not ready and did offer ``name`` before, or whose tools would be
        named with its prefix (a server that has not listed its tools yet)."""
        owner = self.registry.last_owner(name)
        if owner is not None:
            candidates = [owner]
        else:
            candidates = [s for s in self._supervisors if name.startswith(tool_name_prefix(s))]
        return [
            s
            for s in candidates
            if s in self._supervisors and self._supervisors[s].state is not ServerState.READY
        ]

    async def _session_for(self, server: str, wait_ready: float | None) -> Session:
        supervisor = self._supervisor(server)
        if wait_ready is not None and supervisor.state is not ServerState.READY:
            with trio.move_on_after(wait_ready):
                await supervisor.wait_state(lambda s: s is ServerState.READY)
        return supervisor.ready_session()

    def _supervisor(self, server: str) -> ServerSupervisor:
        try:
            return self._supervisors[server]
        except KeyError:
            known = ", ".join(sorted(self._supervisors)) or "none"
            raise ServerUnavailable(
                f"no server named {server!r} is configured (configured: {known})", server=server
            ) from None

    # ------------------------------------------------------------------ resources and prompts

    async def list_resources(
        self, server: str | None = None, cursor: str | None = None
    ) -> ResourcePage:
        """One page of ``server``'s resources (``cursor``: the ``next_cursor`` of the page
        before; it needs ``server``). ``server`` may be None when exactly one connected server
        offers resources. Raises :class:`McpCatalogError` with its ``kind``
        (``unknown_server``, ``hidden``, ``unavailable``, ``invalid``, ``server_error``...) or
        :class:`RuntimeClosed`; never returns partial data."""
        self._check_open()
        return await self._resources.list_resources(server, cursor)

    async def list_resource_templates(
        self, server: str | None = None, cursor: str | None = None
    ) -> ResourceTemplatePage:
        """One page of ``server``'s resource templates; like :meth:`list_resources`."""
        self._check_open()
        return await self._resources.list_resource_templates(server, cursor)

    async def read_resource(
        self, server: str | None, uri: str, *, limit_blobs: bool = True
    ) -> ResourceRead:
        """The contents of the resource ``uri`` of ``server`` (text parts and base64 blob
        parts). Raises :class:`McpCatalogError` (``not_found``; ``too_large`` for a blob over
        ``max_blob_bytes``; the kinds of :meth:`list_resources`) or :class:`RuntimeClosed`."""
        self._check_open()
        return await self._resources.read_resource(server, uri, limit_blobs=limit_blobs)

    async def list_prompts(
        self, server: str | None = None, cursor: str | None = None
    ) -> PromptPage:
        """One page of ``server``'s prompts; like :meth:`list_resources`."""
        self._check_open()
        return await self._resources.list_prompts(server, cursor)

    async def get_prompt(
        self, server: str | None, name: str, arguments: Mapping[str, str] | None = None
    ) -> PromptRead:
        """The prompt ``name`` of ``server`` filled in with ``arguments`` (strings): its
        messages with their roles. Raises :class:`McpCatalogError` (``invalid`` when the server
        refused the name or the arguments) or :class:`RuntimeClosed`."""
        self._check_open()
        return await self._resources.get_prompt(server, name, arguments)

    async def list_page(self, listing: Listing, server: str | None, cursor: str | None) -> Page:
        """One page of ``listing`` (:data:`RESOURCES`, :data:`TEMPLATES` or :data:`PROMPTS` of
        :mod:`._resources`) of ``server``, as the typed ``list_*`` methods fetch it: the
        building block of the model's resource and prompt tools."""
        self._check_open()
        return await self._resources.list_page(listing, server, cursor)

    def offering(self, capability: Capability) -> tuple[str, ...]:
        """The servers that are READY now and declare ``capability`` (``"resources"`` or
        ``"prompts"``; for resources, not hidden by ``resources: false``), in name order."""
        return self._resources.offering(capability)

    def server_config(self, server: str) -> ServerConfig | None:
        """The configuration of ``server``, or None when no server has that name."""
        supervisor = self._supervisors.get(server)
        return supervisor.config if supervisor is not None else None

    # ------------------------------------------------------------------ status and events

    def status(self) -> Mapping[str, ServerStatus]:
        """Every configured server's state, tool count, last error and stderr tail."""
        return MappingProxyType({name: s.status() for name, s in self._supervisors.items()})

    def events(self, *, max_buffer: int = 1024) -> AbstractContextManager[EventSubscription]:
        """Subscribe to the event stream: ``with rt.events() as events: async for e in events``.

        A subscriber that falls ``max_buffer`` events behind loses events (counted in
        ``events.dropped``); the runtime never waits for it."""
        return self._bus.subscribe(max_buffer=max_buffer)

    async def wait_ready(
        self, *, timeout: float | None = None, servers: Iterable[str] | None = None
    ) -> Mapping[str, ServerStatus]:
        """Wait until every (or each named) server is READY or has settled in a state it will
        not leave by itself soon (PARKED, FAILED, DISABLED, NEEDS_AUTH, STOPPED), at most
        ``timeout`` seconds. Returns their statuses either way: a server that failed to start
        is in the answer with its error."""
        names = list(servers) if servers is not None else list(self._supervisors)
        watched = [self._supervisor(name) for name in names]
        with trio.move_on_after(float("inf") if timeout is None else timeout):
            for supervisor in watched:
                await supervisor.wait_state(lambda s: s in SETTLED)
        return MappingProxyType({s.name: s.status() for s in watched})

    def reconnect(self, server: str) -> None:
        """Ask a server's supervisor to try connecting now (a parked server stops waiting)."""
        self._supervisor(server).reconnect_now()

    # ------------------------------------------------------------------ closing

    @property
    def state(self) -> RuntimeState:
        return self._state

    def _check_open(self) -> None:
        if self._state is not RuntimeState.OPEN:
            raise RuntimeClosed("the runtime is closed; open a new one to make calls")

    async def aclose(self) -> None:
        """Stop every server and wait until they are stopped. Idempotent."""
        if self._state is RuntimeState.OPEN:
            self._state = RuntimeState.CLOSING
            for supervisor in self._supervisors.values():
                supervisor.stop_soon()
            self._scope.cancel()
        await self._closed.wait()

    stop_all = aclose

    async def _serve(self, task_status: trio.TaskStatus[Runtime]) -> None:
        try:
            with self._scope:
                async with trio.open_nursery() as nursery:
                    for supervisor in self._supervisors.values():
                        await nursery.start(supervisor.run)
                    task_status.started(self)
                    logger.info("runtime started with %d servers", len(self._supervisors))
        finally:
            self._state = RuntimeState.CLOSED
            self._bus.close()
            self._closed.set()
            logger.info("runtime stopped")


def _build(
    config: RuntimeConfig,
    callbacks: HostCallbacks | None,
    open_transport: TransportOpener | None,
    rng: random.Random | None,
) -> Runtime:
    bus = EventBus()
    registry = Registry(builtin_names=config.builtin_tool_names)
    callbacks = callbacks or HostCallbacks()
    supervisors = {
        server.name: ServerSupervisor(
            config=server,
            runtime=config,
            registry=registry,
            callbacks=callbacks,
            open_transport=open_transport or open_default_transport,
            publish=bus.publish,
            rng=rng or random.Random(),
        )
        for server in config.servers
    }
    resources = Resources(config=config, supervisors=supervisors)
    return Runtime(config, callbacks, registry, bus, supervisors, resources)


async def serve_runtime(
    config: RuntimeConfig,
    *,
    callbacks: HostCallbacks | None = None,
    open_transport: TransportOpener | None = None,
    rng: random.Random | None = None,
    task_status: trio.TaskStatus[Runtime] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run a runtime in a nursery the host owns: ``rt = await nursery.start(serve_runtime,
    config)``. Returns after ``await rt.aclose()`` (or when the nursery is cancelled)."""
    runtime = _build(config, callbacks, open_transport, rng)
    await runtime._serve(task_status)


@asynccontextmanager
async def open_runtime(
    config: RuntimeConfig,
    *,
    callbacks: HostCallbacks | None = None,
    open_transport: TransportOpener | None = None,
    rng: random.Random | None = None,
) -> AsyncIterator[Runtime]:
    """Run a runtime for the duration of an ``async with`` block.

    The runtime's actors are shielded from a cancellation of the block until the block has
    exited, so its ``finally:`` can still make calls; then every server is stopped.
    """
    runtime = _build(config, callbacks, open_transport, rng)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(_shielded, runtime)
            try:
                yield runtime
            finally:
                with trio.CancelScope(shield=True):
                    await runtime.aclose()
    except BaseExceptionGroup as group:
        raise _collapse(group) from None


async def _shielded(runtime: Runtime, *, task_status: trio.TaskStatus[Runtime]) -> None:
    with trio.CancelScope(shield=True):
        await runtime._serve(task_status)
