"""The Runtime: the root of trio-mcp, and the handle the host holds.

Two ways to embed it:

- ``async with open_runtime(config) as rt:`` owns its nursery. The runtime's actors keep running
  until the body has exited (service-nursery ordering), so the host's own ``finally:`` can still
  call tools while it is being cancelled.
- ``rt = await nursery.start(serve_runtime, config)`` runs in a nursery the host already owns,
  until ``await rt.aclose()``.

The runtime's root nursery holds the actors: the :class:`Registry` task and one
:class:`ServerSupervisor` task per configured server (each with its connection task, the
session's tasks and the transport's below it), and, from the first result checked against an
``outputSchema`` with regular expressions on, the :class:`PatternWorker` task that owns the
process checking them. The handle reaches them only through their
mailboxes and reads only what they published (the registry's view, each supervisor's status).
Calls run in the caller's own task: ``rt.call`` looks the name up in the registry's view, takes
the server's live session from its supervisor, and makes the request through the session's
mailbox and the transport's outbox.

Leaving stops every server: each supervisor withdraws its tools and closes its transport (every
child process group ended), all of it bounded by ``shutdown_grace``, and then the checking
process is killed and reaped; later calls raise
:class:`RuntimeClosed`; a second close is a no-op. At this public edge a single failure is never
raised as an ``ExceptionGroup``, and its cause is kept.
"""

from __future__ import annotations

import functools
import inspect
import logging
import math
import random
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    asynccontextmanager,
    contextmanager,
)
from enum import Enum
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

import attrs
import httpx
import trio

from ...protocol._errors import (
    AuthorizationRequired,
    ConfigError,
    CredentialsNotCarried,
    InvalidToolOutput,
    LocalProtocolError,
    McpError,
    McpTransportConfigError,
    RuntimeClosed,
    ServerDisconnected,
    ServerUnavailable,
    ToolNotFound,
)
from ...protocol._types import CallToolResult, SkillResourceRef
from ...transports._base import FrameSink, RequestCredentials, Transport
from ...transports._websocket import WebSocketParameters, open_websocket_transport
from ...transports.http._http import open_http_transport
from ...transports.http._http_base import HttpParameters
from ...transports.http._sse_client import open_sse_transport
from ...transports.oauth._types import (
    AuthorizationPrompt,
    AuthorizationRequest,
    AuthStatus,
    DevicePrompt,
    Grant,
    SignIn,
    TokenStore,
)
from ...transports.stdio._stdio import StdioParameters, open_stdio_transport
from ..config._approvals import (
    ProjectApprovals,
    ProjectServerApprover,
    ProjectServerRequest,
    approval_command,
)
from ..config._callpolicy import retryable
from ..config._config import RuntimeConfig, ServerConfig, TransportKind
from ..config._loader import credentials_path
from ..config._oauth import login_hint
from ..config._redact import redact, redact_text
from ._callbacks import HostCallbacks
from ._events import EventBus, EventSubscription, ServerState
from ._hooks import CallHook, ToolCallRequest, as_hooks, run_hooks
from ._instructions import ServerInstructions
from ._naming import tool_name_prefix
from ._outputcheck import OutputChecker
from ._pending import ProgressCallback
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
from ._session import Session
from ._signin import DEFAULT_OAUTH, OAuthFactories
from ._skills import McpSkill, SkillDirectoryPage, SkillFile, SkillListing, Skills
from ._skillwatch import SkillsView
from ._supervisor import (
    SETTLED,
    ServerStatus,
    ServerSupervisor,
    TransportOpener,
    TransportWrapper,
)
from ._tasks import TaskHandle, TaskRunner, task_mode
from ._taskstore import TaskRecord, TaskStore
from ._tenants import Tenant, TenantSignIns, as_tenant, credentials_for
from ._tracing import TRACING, CallSpan, start_call

__all__ = [
    "USE_DEFAULT",
    "ReadyReport",
    "Runtime",
    "RuntimeState",
    "TransportOpener",
    "TransportWrapper",
    "http_parameters",
    "open_default_transport",
    "open_runtime",
    "serve_runtime",
]

logger = logging.getLogger("trio_mcp.runtime")


class _UseDefault(Enum):
    USE_DEFAULT = "USE_DEFAULT"


#: Per-call option meaning "what the server's configuration says" (``None`` means no limit).
USE_DEFAULT: Final = _UseDefault.USE_DEFAULT


class RuntimeState(Enum):
    OPEN = "open"
    CLOSING = "closing"
    CLOSED = "closed"


def http_parameters(config: ServerConfig, *, auth: httpx.Auth | None = None) -> HttpParameters:
    """The HTTP settings of a URL server (its ``url``, ``headers``, TLS files, ``proxy`` and
    timeouts), with ``auth`` (its OAuth sign-in) for every request. What the HTTP transports
    use, and (without ``auth``) what a server's sign-in reaches its authorization server with.
    Raises :class:`McpTransportConfigError` for an invalid URL or header."""
    assert config.url is not None
    return HttpParameters(
        url=config.url,
        headers=dict(config.headers),
        max_frame_bytes=config.max_frame_bytes,
        connect_timeout=config.connect_timeout,
        allow_insecure_http=config.allow_insecure_http,
        ca_bundle=config.ca_bundle,
        client_cert=config.client_cert,
        client_key=config.client_key,
        proxy=config.proxy,
        request_timeout=config.timeout,
        auth=auth,
    )


def open_default_transport(
    config: ServerConfig,
    sink: FrameSink,
    *,
    shutdown_grace: float | None = None,
    auth: httpx.Auth | None = None,
) -> AbstractAsyncContextManager[Transport]:
    """The transport for a server's configuration (a fresh one on every call), whose frames and
    events go into ``sink``.

    stdio runs the command; ``http`` speaks Streamable HTTP to ``url`` (falling back to the legacy
    HTTP+SSE transport when the server answers the first ``initialize`` with 400, 404 or 405);
    ``sse`` speaks the legacy HTTP+SSE transport; ``ws`` speaks WebSocket (subprotocol ``mcp``);
    all three send the configured ``headers`` and use the server's TLS settings (``ca_bundle``,
    ``client_cert``, ``client_key``) and ``proxy``. A custom ``transport_factory`` is called with
    ``sink``. ``shutdown_grace``: the stdio shutdown steps (close stdin, SIGTERM, SIGKILL) share
    it. ``auth``: what every HTTP request goes through (the server's OAuth sign-in,
    :attr:`SignIn.auth <trio_mcp.transports.oauth.SignIn.auth>`). Raises
    :class:`McpTransportConfigError` for an invalid URL or header."""
    kind = config.transport_kind
    if kind is TransportKind.CUSTOM:
        assert config.transport_factory is not None
        return config.transport_factory(sink)
    if kind is TransportKind.STDIO:
        assert config.command is not None
        grace = 2.0 if shutdown_grace is None else min(2.0, shutdown_grace / 4)
        return open_stdio_transport(
            StdioParameters(
                command=config.command,
                args=config.args,
                env=dict(config.env),
                cwd=config.cwd,
                max_frame_bytes=config.max_frame_bytes,
                close_grace=grace,
                term_grace=grace,
                kill_grace=grace,
            ),
            sink,
        )
    if kind is TransportKind.HTTP or kind is TransportKind.SSE:
        params = http_parameters(config, auth=auth)
        if kind is TransportKind.SSE:
            return open_sse_transport(params, sink)
        return open_http_transport(params, sink)
    if kind is TransportKind.WS:
        assert config.url is not None
        return open_websocket_transport(
            WebSocketParameters(
                url=config.url,
                headers=dict(config.headers),
                max_frame_bytes=config.max_frame_bytes,
                connect_timeout=config.connect_timeout,
                allow_insecure_http=config.allow_insecure_http,
                ca_bundle=config.ca_bundle,
                client_cert=config.client_cert,
                client_key=config.client_key,
                proxy=config.proxy,
            ),
            sink,
        )
    raise McpTransportConfigError(f"server {config.name!r}: unknown transport {kind!r}")


def _checked_uri(uri: Any) -> str:
    if not isinstance(uri, str) or not uri:
        raise LocalProtocolError(
            f"a resource subscription needs the resource's URI (a non-empty string), got {uri!r}"
        )
    return uri


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


#: States whose servers ``rt.reconnect()`` (of every server) leaves alone.
_NOT_ASKED: Final = frozenset(
    {ServerState.READY, ServerState.DISABLED, ServerState.STOPPING, ServerState.STOPPED}
)


@attrs.frozen(eq=False, repr=False)
class ReadyReport(Mapping[str, ServerStatus]):
    """What :meth:`Runtime.wait_ready` found (or :meth:`Runtime.summary` sees now): server name
    -> :class:`ServerStatus` (a mapping), and whether the wait ran out first.

    ``timed_out`` is True when ``timeout`` passed before the wait's goal (every server settled,
    or ``min_ready`` of them READY); ``not_settled`` names the servers still on their way
    (connecting or reconnecting). ``ready`` (also ``active``) names the servers that are READY,
    ``failed`` the ones that settled otherwise (PARKED, FAILED, DISABLED, NEEDS_AUTH, STOPPED),
    and ``parked``, ``needs_auth``, ``disabled`` single those out; ``errors`` gives the last
    error of every server that has one and is not READY. ``min_ready`` is what the wait asked
    for (None: every server)."""

    statuses: Mapping[str, ServerStatus]
    timed_out: bool
    not_settled: tuple[str, ...]
    min_ready: int | None = None

    @property
    def ready(self) -> tuple[str, ...]:
        return tuple(n for n, s in self.statuses.items() if s.state is ServerState.READY)

    @property
    def active(self) -> tuple[str, ...]:
        """The servers that are READY (``ready``; OpenAI's server manager calls them active)."""
        return self.ready

    @property
    def failed(self) -> tuple[str, ...]:
        return tuple(
            n
            for n, s in self.statuses.items()
            if s.state is not ServerState.READY and s.state in SETTLED
        )

    @property
    def parked(self) -> tuple[str, ...]:
        """The servers that are PARKED (probed every ``park_probe_interval``) or FAILED."""
        return self._in(ServerState.PARKED, ServerState.FAILED)

    @property
    def needs_auth(self) -> tuple[str, ...]:
        """The servers waiting for a sign-in (``rt.login``)."""
        return self._in(ServerState.NEEDS_AUTH)

    @property
    def disabled(self) -> tuple[str, ...]:
        """The servers that are not started (``enabled=False``, a network policy, a project
        server not approved)."""
        return self._in(ServerState.DISABLED)

    @property
    def errors(self) -> Mapping[str, str]:
        """Server name -> its last error, for every server that is not READY and has one."""
        return MappingProxyType(
            {
                n: s.last_error
                for n, s in self.statuses.items()
                if s.state is not ServerState.READY and s.last_error
            }
        )

    def _in(self, *states: ServerState) -> tuple[str, ...]:
        return tuple(n for n, s in self.statuses.items() if s.state in states)

    def raise_for_failed(self) -> ReadyReport:
        """Return this report, or raise :class:`ServerUnavailable` naming every server that is
        not READY with its state and last error (a strict start, as with OpenAI's
        ``strict=True``). A wait for ``min_ready`` servers raises only when fewer are READY."""
        missing = [n for n in self.statuses if n not in self.ready]
        enough = self.min_ready is not None and len(self.ready) >= self.min_ready
        if not missing or enough:
            return self
        parts = []
        for name in missing:
            status = self.statuses[name]
            why = f": {status.last_error}" if status.last_error else ""
            parts.append(f"{name} ({status.state.value}{why})")
        wanted = "" if self.min_ready is None else f" ({self.min_ready} wanted)"
        raise ServerUnavailable(
            f"{len(self.ready)} of {len(self.statuses)} servers are ready{wanted}; not ready: "
            + "; ".join(parts),
            server=missing[0] if len(missing) == 1 else None,
            state=self.statuses[missing[0]].state.value if len(missing) == 1 else None,
        )

    def __getitem__(self, name: str) -> ServerStatus:
        return self.statuses[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.statuses)

    def __len__(self) -> int:
        return len(self.statuses)

    def __repr__(self) -> str:
        states = ", ".join(f"{n}={s.state.value}" for n, s in self.statuses.items())
        return f"ReadyReport({states}, timed_out={self.timed_out})"


@attrs.define(eq=False)
class Runtime:
    """The host's handle on the MCP servers. Built by :func:`open_runtime` or
    :func:`serve_runtime`, never directly."""

    config: RuntimeConfig
    callbacks: HostCallbacks
    _registry: Registry
    _bus: EventBus
    _supervisors: dict[str, ServerSupervisor]
    _resources: Resources
    #: The call hooks around every :meth:`call`, the first outermost (``open_runtime(hooks=)``).
    hooks: tuple[CallHook, ...] = attrs.field(default=(), kw_only=True, converter=as_hooks)
    #: The tenants' sign-ins (``rt.call(..., tenant=...)`` at an OAuth server; ``._tenants``).
    _tenant_sign_ins: TenantSignIns = attrs.field(kw_only=True, repr=False)
    _state: RuntimeState = attrs.field(default=RuntimeState.OPEN, init=False)
    _stop_requested: trio.Event = attrs.field(factory=trio.Event, init=False)
    _closed: trio.Event = attrs.field(factory=trio.Event, init=False)
    _tasks: TaskRunner = attrs.field(
        default=attrs.Factory(lambda self: self._task_runner(), takes_self=True), init=False
    )
    _outputs: OutputChecker = attrs.field(
        default=attrs.Factory(
            lambda self: OutputChecker(offload_chars=self.config.offload_chars), takes_self=True
        ),
        init=False,
    )
    _skills: Skills = attrs.field(
        default=attrs.Factory(
            lambda self: Skills(
                config=self.config, supervisors=self._supervisors, events=self._bus
            ),
            takes_self=True,
        ),
        init=False,
    )

    def _task_runner(self) -> TaskRunner:
        config = self.config
        directory = config.task_store
        if directory is None:
            directory = (config.working_dir or Path.cwd()) / ".trio-mcp" / "tasks"
        return TaskRunner(
            config=config,
            callbacks=self.callbacks,
            session_for=self._task_session,
            bus=self._bus,
            store=TaskStore(Path(directory)),
        )

    # ------------------------------------------------------------------ tools

    def tools(self, *, ready_only: bool = False) -> Mapping[str, RegisteredTool]:
        """The registered tools, registered name -> tool: an immutable snapshot (the registry's
        newest view). Only servers that are READY have tools in it.

        With ``ready_only`` also none of a server whose connection has just ended and whose
        tools are being withdrawn (for sub-agents that must not see anything that could fail as
        unavailable)."""
        tools = self._registry.view.tools
        if not ready_only:
            return tools
        return MappingProxyType(
            {
                name: tool
                for name, tool in tools.items()
                if self._supervisors[tool.server].accepts_calls
            }
        )

    @property
    def tools_version(self) -> int:
        """Increases on every change of the tool table."""
        return self._registry.view.version

    async def wait_tools_changed(self, after: int) -> int:
        """Wait until the tool table's version passes ``after``; returns the new version."""
        return await self._registry.wait_version(after)

    async def call(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | _UseDefault | None = USE_DEFAULT,
        progress: ProgressCallback | None = None,
        wait_ready: float | None = None,
        meta: Mapping[str, Any] | None = None,
        tenant: Tenant | str | None = None,
    ) -> CallToolResult:
        """Call a registered tool by its registered name (``mcp_github_create_issue``), in the
        caller's task.

        A tool error reported by the server (``isError``) is returned as data; see
        ``result.raise_for_error()``. ``progress`` is called (in this task; sync or async) with
        each progress notification of the call. ``meta`` goes with the request as its
        ``_meta``. The result of a tool that declares an ``outputSchema`` is checked against it
        first. Raises :class:`ToolNotFound`,
        :class:`ServerUnavailable` (the server is not ready: the error says its state and when
        the next attempt is due; ``wait_ready`` waits that many seconds for it first),
        :class:`CallTimeout`, :class:`ServerDisconnected` (``sent`` says whether the outcome is
        unknown), :class:`RpcError`, :class:`InvalidToolOutput` (missing or non-matching
        ``structuredContent``; it holds the ``result`` and the ``problems``),
        :class:`CallHookFailed` or :class:`RuntimeClosed`; all of them but
        :class:`ServerUnavailable` and :class:`RuntimeClosed` are :class:`CallError`.

        The runtime's call hooks (``open_runtime(hooks=...)``, :mod:`._hooks`) run around the
        request, in this task. A call that was not sent is made again as the error policy's
        ``retries`` say (``RuntimeConfig.error_policy_for``); a call that was sent never is.

        ``tenant``: who the call is for, on a runtime serving many users (a :class:`Tenant`
        with its own headers, or a tenant id): its headers go on this call's HTTP request alone,
        and at a server with OAuth the tenant's own sign-in is used (``rt.login(server,
        tenant=...)``); a tenant that is not signed in gets :class:`AuthorizationRequired` for
        this call alone. A server whose transport has no headers per request (stdio,
        WebSocket) refuses a tenant's headers with :class:`CredentialsNotCarried`
        (docs/embedding.md "Many users: per-call credentials"; :mod:`._tenants`).

        With OpenTelemetry installed, the call is a span, current in this task while it runs
        (docs/embedding.md "Tracing").
        """
        span = start_call(self.config, name) if TRACING else None
        who = None if tenant is None else as_tenant(tenant)
        try:
            try:
                tool = self._registry.view.get(name) if self._state is RuntimeState.OPEN else None
                if tool is not None and span is None and not self.hooks:
                    # the common case: what _call_once does for it, without its coroutine
                    result = await self._send_call(
                        tool, arguments, meta or None, who, timeout, progress, wait_ready
                    )
                else:
                    result = await self._call_once(
                        name,
                        arguments,
                        meta,
                        timeout=timeout,
                        progress=progress,
                        wait_ready=wait_ready,
                        span=span,
                        attempt=1,
                        tenant=who,
                    )
            except (ServerDisconnected, ServerUnavailable) as failed:
                if not retryable(failed):  # sent (its outcome is unknown), or not coming back
                    raise
                result = await self._retried(
                    failed,
                    name,
                    arguments,
                    meta,
                    timeout=timeout,
                    progress=progress,
                    span=span,
                    tenant=who,
                )
        except BaseException as exc:  # recorded on the span, raised as it is
            if span is not None:
                span.failed(exc)
                span.end()
            raise
        if span is not None:
            span.succeeded(result)
            span.end()
        return result

    async def _retried(
        self,
        failed: ServerDisconnected | ServerUnavailable,
        name: str,
        arguments: Mapping[str, Any] | None,
        meta: Mapping[str, Any] | None,
        *,
        timeout: float | _UseDefault | None,
        progress: ProgressCallback | None,
        span: CallSpan | None,
        tenant: Tenant | None,
    ) -> CallToolResult:
        """The attempts after a first one that ``failed`` retryably (not sent, see
        :func:`retryable`), while the error policy retries it (each with its own lookup, hooks
        and ``timeout``); raises the last failure when the policy says no more, or when an
        attempt fails in a way that is not retryable. (The first attempt is made by
        :meth:`call` itself, which checks its failure: a call that succeeds pays for no
        loop.)"""
        attempt = 1
        error = failed
        while True:
            policy = self.config.error_policy_for(name, error.server)
            if attempt > policy.retries:
                raise error
            delay = policy.retry_wait(attempt - 1)
            logger.info(
                "call %s was not sent (%s); retry %d of %d in %g s",
                name,
                error,
                attempt,
                policy.retries,
                delay,
            )
            await trio.sleep(delay)
            attempt += 1
            try:
                return await self._call_once(
                    name,
                    arguments,
                    meta,
                    timeout=timeout,
                    progress=progress,
                    wait_ready=policy.retry_wait_ready,
                    span=span,
                    attempt=attempt,
                    tenant=tenant,
                )
            except (ServerDisconnected, ServerUnavailable) as again:
                if not retryable(again):
                    raise
                error = again

    async def _call_once(
        self,
        name: str,
        arguments: Mapping[str, Any] | None,
        meta: Mapping[str, Any] | None,
        *,
        timeout: float | _UseDefault | None,
        progress: ProgressCallback | None,
        wait_ready: float | None,
        span: CallSpan | None,
        attempt: int,
        tenant: Tenant | None = None,
    ) -> CallToolResult:
        try:
            self._check_open()
            tool = await self.lookup(name, wait_ready=wait_ready)
        except McpError:
            await trio.lowlevel.checkpoint()  # a checkpoint, even failing at once
            raise
        if span is not None:
            span.target(tool.server, tool.wire_name)
        if not self.hooks:  # the common case: no request object, no chain
            return await self._send_call(
                tool, arguments, meta or None, tenant, timeout, progress, wait_ready
            )

        async def send(request: ToolCallRequest) -> CallToolResult:
            given = request.arguments
            return await self._send_call(
                tool,
                None if arguments is None and not given else given,
                request.meta or None,
                request.tenant,
                timeout,
                progress,
                wait_ready,
            )

        request = ToolCallRequest(
            name=name,
            server=tool.server,
            tool=tool.wire_name,
            arguments=arguments or {},
            meta=meta or {},
            attempt=attempt,
            tenant=tenant,
        )
        return await run_hooks(self.hooks, request, send)

    async def _send_call(
        self,
        tool: RegisteredTool,
        arguments: Mapping[str, Any] | None,
        meta: Mapping[str, Any] | None,
        tenant: Tenant | None,
        timeout: float | _UseDefault | None,
        progress: ProgressCallback | None,
        wait_ready: float | None,
    ) -> CallToolResult:
        """The request itself, after the hooks: the arguments, ``_meta`` and tenant they passed
        on (None: no arguments member, no ``_meta``)."""
        supervisor = self._supervisors.get(tool.server)
        try:
            if (
                supervisor is not None
                and self._state is RuntimeState.OPEN
                and (wait_ready is None or supervisor.accepts_calls)
            ):  # the common case, without the coroutine of _session_for
                session = supervisor.ready_session()
            else:
                self._check_open()
                session = await self._session_for(tool.server, wait_ready)
                supervisor = self._supervisors[tool.server]
        except McpError:
            await trio.lowlevel.checkpoint()  # a checkpoint, even failing at once
            raise
        credentials = None if tenant is None else await self._credentials(tool.server, tenant)
        limit = supervisor.config.timeout if isinstance(timeout, _UseDefault) else timeout
        debug = logger.isEnabledFor(logging.DEBUG)
        if debug:
            logger.debug(
                "call %s -> %s/%s %s",
                tool.name,
                tool.server,
                tool.wire_name,
                redact(arguments or {}),
            )
        config = self.config
        mode = task_mode(config, session, tool.tool, wanted=False) if config.tasks else None
        wire_arguments = tool.wire_arguments(arguments)  # a shaped tool: the server's names
        if mode is not None and credentials is not None:
            await trio.lowlevel.checkpoint()
            raise CredentialsNotCarried(
                f"{tool.name} ({tool.server}/{tool.wire_name}) runs as a task, whose later "
                f"requests do not carry a tenant's credentials: it was not called for the "
                f"tenant {credentials.label!r}",
                tenant=credentials.label,
                server=tool.server,
                method="tools/call",
            )
        if mode is not None:  # the server runs it as a task: followed to its end here
            result = await self._tasks.call(
                session,
                tool.wire_tool,
                wire_arguments,
                mode=mode,
                timeout=limit,
                progress=progress,
                meta=meta,
            )
        elif credentials is None:
            result = await session.call_tool(
                tool.wire_name, wire_arguments, timeout=limit, progress=progress, meta=meta
            )
        else:
            with _tenant_sign_in_hint(tool.server, credentials.label):
                result = await session.call_tool(
                    tool.wire_name,
                    wire_arguments,
                    timeout=limit,
                    progress=progress,
                    meta=meta,
                    credentials=credentials,
                )
        if debug:
            logger.debug(
                "call %s done: isError=%s %s",
                tool.name,
                bool(result.is_error),
                redact_text(result.text),
            )
        if tool.tool.output_schema is not None and not result.is_error:  # else nothing to check
            await self._check_output(tool, result)
        return result

    async def _credentials(self, server: str, tenant: Tenant) -> RequestCredentials | None:
        """What a request of ``tenant`` to ``server`` carries (``._tenants.credentials_for``)."""
        config = self._supervisor(server).config
        return await credentials_for(self._tenant_sign_ins, config, tenant)

    async def _check_output(self, tool: RegisteredTool, result: CallToolResult) -> None:
        problems = await self._outputs.check(tool.server, tool.tool, result)
        if problems:
            raise InvalidToolOutput(
                f"the result of {tool.name} ({tool.server}/{tool.wire_name}) does not match "
                f"the tool's outputSchema: {'; '.join(problems)}",
                result=result,
                problems=problems,
                server=tool.server,
                method="tools/call",
            )

    # ------------------------------------------------------------------ tasks

    async def start_task(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | _UseDefault | None = USE_DEFAULT,
        wait_ready: float | None = None,
    ) -> TaskHandle:
        """Call a registered tool as a task and return a :class:`TaskHandle` on it at once
        (its id kept in the task store, ``RuntimeConfig.task_store``, until its result was
        taken or it was cancelled): poll it, await its result, cancel it, or resume it after a
        restart of the host (:meth:`resume_task`). ``timeout`` bounds the creating call only.

        The tool's server must take tasks (2025-11-25: ``tasks.requests.tools.call`` and the
        tool's ``execution.taskSupport`` ``"optional"`` or ``"required"``; 2026-07-28: the tasks
        extension, where the server may still answer at once: the handle then has no
        ``task_id`` and holds the result). Raises :class:`LocalProtocolError` saying why not
        otherwise, and what :meth:`call` raises."""
        try:
            self._check_open()
            tool = await self.lookup(name, wait_ready=wait_ready)
            session = await self._session_for(tool.server, wait_ready)
        except McpError:
            await trio.lowlevel.checkpoint()
            raise
        server = self._supervisors[tool.server].config
        limit = server.timeout if isinstance(timeout, _UseDefault) else timeout
        handle = await self._tasks.start(
            session, tool.wire_tool, name, tool.wire_arguments(arguments), timeout=limit
        )
        handle.check = functools.partial(self._check_output, tool)
        return handle

    async def resume_task(self, server: str, task_id: str) -> TaskHandle:
        """A :class:`TaskHandle` on the task ``task_id`` of ``server``, created earlier by this
        process or an earlier one (:meth:`stored_tasks` lists the ones kept). Asks the server
        nothing yet: ``await handle.status()`` or ``await handle.result()``."""
        self._check_open()
        self._supervisor(server)
        handle = await self._tasks.resume(server, task_id)
        registered = self._registry.view.get(handle.tool) if handle.tool is not None else None
        if registered is not None and registered.server == server:
            handle.check = functools.partial(self._check_output, registered)
        return handle

    async def stored_tasks(self) -> tuple[TaskRecord, ...]:
        """The tasks whose ids the task store keeps (started with :meth:`start_task` and not
        finished or cancelled yet, by this process or an earlier one)."""
        self._check_open()
        return await self._tasks.stored()

    async def _task_session(self, server: str) -> Session:
        """The server's live session for a task, waiting for its supervisor to (re)connect."""
        self._check_open()
        return await self._session_for(server, math.inf)

    async def lookup(self, name: str, *, wait_ready: float | None = None) -> RegisteredTool:
        """The registered tool named ``name``.

        Raises :class:`ServerUnavailable` when it is not registered now because its server (the
        server that last offered it, or a server whose tools would be named with its prefix and
        that has not listed them yet) is not READY, after waiting up to ``wait_ready`` seconds
        for that server; :class:`ToolNotFound` when no server offers it."""
        tool = self._registry.view.get(name)
        if tool is None:
            for owner in self._possible_owners(name):
                supervisor = self._supervisors[owner]
                if not supervisor.accepts_calls:  # ServerUnavailable unless it gets READY
                    await self._session_for(owner, wait_ready)
                await self._registered(supervisor)  # READY: its tools are on their way
            tool = self._registry.view.get(name)
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
        try:
            self._check_open()
            session = await self._session_for(server, wait_ready)
        except McpError:
            await trio.lowlevel.checkpoint()  # a checkpoint, even failing at once
            raise
        limit = (
            self._supervisor(server).config.timeout if isinstance(timeout, _UseDefault) else timeout
        )
        return await session.request(method, params, timeout=limit)

    def _possible_owners(self, name: str) -> list[str]:
        """Servers that did offer ``name`` before, or whose tools would be named with its prefix
        (a server that has not listed its tools yet), and whose tools are not all in the
        registry's view now (or are being withdrawn: its connection ended while it is still
        READY, so that such a call fails as unavailable, not as an unknown tool)."""
        view = self._registry.view
        owner = view.last_owner(name)
        if owner is not None:
            candidates = [owner]
        else:
            candidates = [s for s in self._supervisors if name.startswith(tool_name_prefix(s))]
        return [
            s
            for s in candidates
            if s in self._supervisors
            and not (
                self._is_registered(self._supervisors[s]) and self._supervisors[s].accepts_calls
            )
        ]

    def _is_registered(self, supervisor: ServerSupervisor) -> bool:
        """Whether ``supervisor``'s server is READY and its tools of this generation are in the
        registry's view."""
        if supervisor.state is not ServerState.READY:
            return False
        status = supervisor.status()
        return self._registry.view.generations.get(supervisor.name, -1) >= status.generation

    async def _settled(self, supervisor: ServerSupervisor) -> None:
        """Wait until ``supervisor``'s server is READY with its tools registered (and its
        connection alive), or settled in another state."""
        while True:
            await supervisor.wait_state(lambda s: s in SETTLED)
            if supervisor.attempt_due and supervisor.state is not ServerState.READY:
                # asked (rt.reconnect) or due: the attempt is about to start
                await supervisor.wait_changed()
                continue
            if supervisor.state is ServerState.READY and not supervisor.accepts_calls:
                # its connection just ended: the tools are being withdrawn (the next status
                # may already be READY again, on a new connection)
                await supervisor.wait_changed()
                continue
            await self._registered(supervisor)
            return

    async def _registered(self, supervisor: ServerSupervisor) -> None:
        """Wait (briefly: one step of the registry) until a READY server's tools are in the
        view, or it is not READY any more."""
        while supervisor.state is ServerState.READY and not self._is_registered(supervisor):
            await self._registry.wait_newer(self._registry.view)

    async def _session_for(self, server: str, wait_ready: float | None) -> Session:
        supervisor = self._supervisor(server)
        if wait_ready is not None and not supervisor.accepts_calls:
            with trio.move_on_after(wait_ready):
                await self._accepting(supervisor)
        return supervisor.ready_session()

    async def _accepting(self, supervisor: ServerSupervisor) -> None:
        """Wait until ``supervisor``'s server is READY on a live connection (a server still
        READY whose connection just ended leaves READY first, then comes back). Only a
        publication of its status changes whether it accepts calls, so each one is checked."""
        while not supervisor.accepts_calls:
            await supervisor.wait_changed()

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
        self,
        server: str | None = None,
        cursor: str | None = None,
        *,
        tenant: Tenant | str | None = None,
    ) -> ResourcePage:
        """One page of ``server``'s resources (``cursor``: the ``next_cursor`` of the page
        before; it needs ``server``). ``server`` may be None when exactly one connected server
        offers resources. Raises :class:`McpCatalogError` with its ``kind``
        (``unknown_server``, ``hidden``, ``unavailable``, ``invalid``, ``server_error``...) or
        :class:`RuntimeClosed`; never returns partial data. ``tenant``: made for that tenant,
        as :meth:`call` makes a call (its results cached apart)."""
        self._check_open()
        return await self._resources.list_resources(server, cursor, tenant=as_tenant(tenant))

    async def list_resource_templates(
        self,
        server: str | None = None,
        cursor: str | None = None,
        *,
        tenant: Tenant | str | None = None,
    ) -> ResourceTemplatePage:
        """One page of ``server``'s resource templates; like :meth:`list_resources`."""
        self._check_open()
        return await self._resources.list_resource_templates(
            server, cursor, tenant=as_tenant(tenant)
        )

    async def read_resource(
        self,
        server: str | None,
        uri: str,
        *,
        limit_blobs: bool = True,
        tenant: Tenant | str | None = None,
    ) -> ResourceRead:
        """The contents of the resource ``uri`` of ``server`` (text parts and base64 blob
        parts). Raises :class:`McpCatalogError` (``not_found``; ``too_large`` for a blob over
        ``max_blob_bytes``; the kinds of :meth:`list_resources`) or :class:`RuntimeClosed`.
        ``tenant``: read for that tenant, as :meth:`list_resources`."""
        self._check_open()
        return await self._resources.read_resource(
            server, uri, limit_blobs=limit_blobs, tenant=as_tenant(tenant)
        )

    async def list_prompts(
        self,
        server: str | None = None,
        cursor: str | None = None,
        *,
        tenant: Tenant | str | None = None,
    ) -> PromptPage:
        """One page of ``server``'s prompts; like :meth:`list_resources`."""
        self._check_open()
        return await self._resources.list_prompts(server, cursor, tenant=as_tenant(tenant))

    async def get_prompt(
        self,
        server: str | None,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        tenant: Tenant | str | None = None,
    ) -> PromptRead:
        """The prompt ``name`` of ``server`` filled in with ``arguments`` (strings): its
        messages with their roles. Raises :class:`McpCatalogError` (``invalid`` when the server
        refused the name or the arguments) or :class:`RuntimeClosed`. ``tenant``: as
        :meth:`list_resources`."""
        self._check_open()
        return await self._resources.get_prompt(server, name, arguments, tenant=as_tenant(tenant))

    async def list_page(
        self,
        listing: Listing,
        server: str | None,
        cursor: str | None,
        *,
        tenant: Tenant | str | None = None,
    ) -> Page:
        """One page of ``listing`` (:data:`RESOURCES`, :data:`TEMPLATES` or :data:`PROMPTS` of
        :mod:`._resources`) of ``server``, as the typed ``list_*`` methods fetch it: the
        building block of the model's resource and prompt tools."""
        self._check_open()
        return await self._resources.list_page(listing, server, cursor, tenant=as_tenant(tenant))

    def subscribe_resource(self, server: str, uri: str) -> None:
        """Want ``notifications/resources/updated`` for the resource ``uri`` of ``server``:
        each one becomes a :class:`ResourceUpdated` event. Kept across reconnections, in both
        eras: a 2026-07-28 session asks for it in its ``subscriptions/listen``
        (``resourceSubscriptions``: the listen is opened again with the new set), a session of
        the handshake revisions sends ``resources/subscribe``; each in its own task, at once
        when the server is READY, else when it is. A server that does not offer subscriptions
        (no ``resources.subscribe``) sends no updates, and one that refuses a URI is logged
        as a warning under ``trio_mcp.server.<name>``.

        Raises :class:`ServerUnavailable` for a server that is not configured,
        :class:`LocalProtocolError` for a ``uri`` that is not a non-empty string, or
        :class:`RuntimeClosed`."""
        self._check_open()
        self._supervisor(server).subscriptions.add(_checked_uri(uri))

    def unsubscribe_resource(self, server: str, uri: str) -> None:
        """Want no more updates of ``uri`` on ``server`` (see :meth:`subscribe_resource`);
        nothing happens when it was not subscribed."""
        self._check_open()
        self._supervisor(server).subscriptions.discard(_checked_uri(uri))

    def resource_subscriptions(self, server: str) -> frozenset[str]:
        """The resource URIs of ``server`` the host subscribed to (:meth:`subscribe_resource`):
        what its sessions ask the server for, whatever the server honours."""
        return self._supervisor(server).subscriptions.uris

    def offering(self, capability: Capability) -> tuple[str, ...]:
        """The servers that are READY now and declare ``capability`` (``"resources"`` or
        ``"prompts"``; for resources, not hidden by ``resources: false``), in name order."""
        return self._resources.offering(capability)

    # ------------------------------------------------------------------ skills (see ._skills)

    def skill_servers(self) -> tuple[str, ...]:
        """The servers whose skills can be used now (``skills: true``, READY, declaring the
        skills extension and ``resources``), in name order."""
        return self._skills.servers()

    async def list_skills(self, server: str) -> SkillListing:
        """Every skill of ``server`` (all pages of ``skills/list``), each entry checked: an
        invalid one is in ``skipped`` with its reason (and a :class:`SkillSkipped` event).
        Raises :class:`McpCatalogError` or :class:`RuntimeClosed`."""
        self._check_open()
        return await self._skills.list_skills(server)

    def skill_listings(self) -> SkillsView:
        """The newest skill listing of each server whose skills were listed (by
        :meth:`list_skills`, or again by the runtime after the server said its resources
        changed, or after a reconnect), and its ``version``: an immutable snapshot."""
        return self._skills.watcher.view

    async def wait_skills_changed(self, after: int) -> int:
        """Wait until the :meth:`skill_listings` version passes ``after``; returns it."""
        return await self._skills.watcher.wait_changed(after)

    async def get_skill(self, server: str, uri: str) -> McpSkill:
        """The checked entry of the skill ``uri`` (its ``SKILL.md``) of ``server``, from
        ``skills/get``. Raises :class:`McpCatalogError` or :class:`RuntimeClosed`."""
        self._check_open()
        return await self._skills.get_skill(server, uri)

    async def read_skill_directory(
        self, server: str, uri: str, cursor: str | None = None
    ) -> SkillDirectoryPage:
        """One page of ``resources/directory/read`` of ``uri`` (servers that declared
        ``directoryRead: true`` only). Raises :class:`McpCatalogError` or
        :class:`RuntimeClosed`."""
        self._check_open()
        return await self._skills.read_directory(server, uri, cursor)

    async def read_skill_file(self, skill: McpSkill, ref: SkillResourceRef) -> SkillFile:
        """The file ``ref`` of ``skill``'s manifest, from the skill's own server, returned only
        once its size and SHA-256 digest matched the manifest. Raises
        :class:`SkillIntegrityError` (a mismatch), :class:`McpCatalogError`,
        :class:`RuntimeClosed`, or ``ValueError`` for a file the manifest does not list."""
        self._check_open()
        return await self._skills.read_file(skill, ref)

    def server_config(self, server: str) -> ServerConfig | None:
        """The configuration of ``server``, or None when no server has that name."""
        supervisor = self._supervisors.get(server)
        return supervisor.config if supervisor is not None else None

    # ------------------------------------------------------------------ status and events

    def status(self) -> Mapping[str, ServerStatus]:
        """Every configured server's state, tool count, last error and stderr tail."""
        view = self._registry.view
        return MappingProxyType({name: s.status(view) for name, s in self._supervisors.items()})

    def instructions(self, *, ready_only: bool = True) -> Mapping[str, ServerInstructions]:
        """The servers' ``instructions`` (from ``initialize`` or ``server/discover``), server
        name -> :class:`ServerInstructions`, in configuration order: screened by the injection
        scan like tool descriptions (a blocked text has ``text`` None and ``withheld`` saying
        why). Servers that gave none are left out; with ``ready_only`` (the default) so are
        servers that are not ``READY`` now."""
        out: dict[str, ServerInstructions] = {}
        for name, supervisor in self._supervisors.items():
            screened = supervisor.instructions
            if screened is None:
                continue
            if ready_only and supervisor.state is not ServerState.READY:
                continue
            out[name] = screened
        return MappingProxyType(out)

    def events(self, *, max_buffer: int = 1024) -> AbstractContextManager[EventSubscription]:
        """Subscribe to the event stream: ``with rt.events() as events: async for e in events``.

        A subscriber that falls ``max_buffer`` events behind loses events (counted in
        ``events.dropped``); the runtime never waits for it."""
        return self._bus.subscribe(max_buffer=max_buffer)

    async def wait_ready(
        self,
        *,
        timeout: float | None = None,
        servers: Iterable[str] | None = None,
        min_ready: int | None = None,
    ) -> ReadyReport:
        """Wait until every (or each named) server is READY with its tools registered, or has
        settled in a state it will not leave by itself soon (PARKED, FAILED, DISABLED,
        NEEDS_AUTH, STOPPED), at most ``timeout`` seconds. The servers connect in parallel
        from the start; this only waits.

        ``min_ready``: return as soon as that many of them are READY (the others go on
        connecting), or once every one has settled when fewer can be. ``timeout`` alone: go on
        with the servers that came up in time.

        Returns a :class:`ReadyReport` either way (a mapping of the servers' statuses: a server
        that failed to start is in it with its error); its ``timed_out`` says whether the time
        ran out first, and ``not_settled`` which servers were still on their way
        (``report.raise_for_failed()`` raises when a server is not READY). Raises
        :class:`ServerUnavailable` for a name that is not configured, ``ValueError`` for a
        ``min_ready`` that is not an integer >= 0."""
        await trio.lowlevel.checkpoint()  # a checkpoint even when every server is settled
        if min_ready is not None and (
            isinstance(min_ready, bool) or not isinstance(min_ready, int) or min_ready < 0
        ):
            raise ValueError(f"min_ready must be an integer >= 0, got {min_ready!r}")
        names = list(servers) if servers is not None else list(self._supervisors)
        watched = [self._supervisor(name) for name in names]
        with trio.move_on_after(math.inf if timeout is None else timeout) as waited:
            if min_ready is None:
                for supervisor in watched:
                    await self._settled(supervisor)
            else:
                await self._enough_ready(watched, min_ready)
        return self._report(watched, timed_out=waited.cancelled_caught, min_ready=min_ready)

    async def _enough_ready(self, watched: Sequence[ServerSupervisor], wanted: int) -> None:
        """Wait until ``wanted`` of ``watched`` are READY with their tools registered, or all
        of them have settled; each server watched by a task of this caller's nursery."""
        if wanted == 0:
            return
        done = trio.Event()
        settled: list[ServerSupervisor] = []

        async def watch(supervisor: ServerSupervisor) -> None:
            await self._settled(supervisor)
            settled.append(supervisor)
            ready = sum(1 for s in settled if self._ready_now(s))
            if ready >= wanted or len(settled) == len(watched):
                done.set()

        async with trio.open_nursery() as nursery:
            for supervisor in watched:
                nursery.start_soon(watch, supervisor)
            await done.wait()
            nursery.cancel_scope.cancel()

    def _ready_now(self, supervisor: ServerSupervisor) -> bool:
        return supervisor.accepts_calls and self._is_registered(supervisor)

    def _report(
        self, watched: Sequence[ServerSupervisor], *, timed_out: bool, min_ready: int | None
    ) -> ReadyReport:
        view = self._registry.view
        statuses = {s.name: s.status(view) for s in watched}
        not_settled = tuple(
            s.name
            for s in watched
            if statuses[s.name].state not in SETTLED
            or (statuses[s.name].state is ServerState.READY and not self._ready_now(s))
            or (statuses[s.name].state is not ServerState.READY and s.attempt_due)
        )
        return ReadyReport(
            statuses=MappingProxyType(statuses),
            timed_out=timed_out,
            not_settled=not_settled,
            min_ready=min_ready,
        )

    def summary(self) -> ReadyReport:
        """The servers as they are now, without waiting: a :class:`ReadyReport` (``active``,
        ``failed``, ``parked``, ``needs_auth``, ``disabled``, ``not_settled``, ``errors``)
        whose ``timed_out`` is False."""
        return self._report(list(self._supervisors.values()), timed_out=False, min_ready=None)

    def reconnect(self, server: str | None = None, *, failed_only: bool = False) -> tuple[str, ...]:
        """Ask for a connection attempt now: of ``server``, or of every server when None that is
        not READY, DISABLED or stopping (a parked or reconnecting server stops waiting; an
        attempt that runs is not disturbed). ``failed_only``: only servers that are FAILED or
        PARKED get one. Returns the names of the servers asked, in configuration order. Raises
        :class:`ServerUnavailable` for a name that is not configured."""
        if server is not None:
            chosen = [self._supervisor(server)]
        else:
            chosen = [s for s in self._supervisors.values() if s.state not in _NOT_ASKED]
        if failed_only:
            chosen = [s for s in chosen if s.state in (ServerState.FAILED, ServerState.PARKED)]
        for supervisor in chosen:
            supervisor.reconnect_now()
        return tuple(s.name for s in chosen)

    # ------------------------------------------------------------------ signing in

    async def login(
        self,
        server: str,
        *,
        prompt: AuthorizationPrompt | None = None,
        device: DevicePrompt | None = None,
        scopes: Sequence[str] | None = None,
        tenant: Tenant | str | None = None,
    ) -> AuthStatus:
        """Sign in to ``server`` (one with ``auth="oauth"``), then have it connect at once
        (``NEEDS_AUTH -> CONNECTING -> READY``): it returns once the server has left
        ``NEEDS_AUTH`` (``rt.wait_ready()`` then waits for the connection). Returns the
        sign-in's status (never a secret).

        ``prompt`` shows the sign-in to the user and returns the URL the browser was redirected
        to (default: ``HostCallbacks.authorize``); ``device`` signs in with the device
        authorization grant instead (RFC 8628: it shows the code, the flow polls); ``scopes``:
        what to ask for (default: the configured ones, else what the server names). A server
        whose grant is ``client_credentials`` needs neither.

        ``tenant``: sign in that tenant instead (a runtime serving many users), with its own
        sign-in and stored credential (``CredentialKey.tenant``), which its calls
        (``rt.call(..., tenant=...)``) then use; the server's connection is not touched.
        ``prompt`` (or ``device``) is required: ``HostCallbacks.authorize`` is the operator's.

        Raises :class:`ConfigError` for a server without OAuth, :class:`AuthorizationRequired`
        when a browser sign-in has no prompt to go through (its hint is the command line's
        ``trio-mcp login NAME``), the other :class:`AuthorizationError` subclasses when the
        sign-in fails, :class:`ServerUnavailable` for a name that is not configured, or
        :class:`RuntimeClosed`."""
        self._check_open()
        if tenant is not None:
            return await self._login_tenant(
                server, as_tenant(tenant), prompt=prompt, device=device, scopes=scopes
            )
        supervisor, sign_in = self._sign_in_of(server)
        if device is not None:
            status = await sign_in.login_device(device, scopes=scopes)
        else:
            ask = prompt or self.callbacks.authorize
            settings = supervisor.config.oauth_settings
            if ask is None:
                if settings is None or settings.grant is not Grant.CLIENT_CREDENTIALS:
                    await trio.lowlevel.checkpoint()
                    raise AuthorizationRequired(
                        f"server {server!r}: signing in needs the user: give rt.login a "
                        "prompt (or HostCallbacks.authorize) that shows the sign-in URL, or "
                        f"run: {login_hint(server)}",
                        server=server,
                        hint=login_hint(server),
                    )
                ask = _no_prompt
            status = await sign_in.login(ask, scopes=scopes)
        supervisor.reconnect_now()
        # Once the supervisor has taken the ask, so that a wait_ready() after this waits for
        # the new connection rather than finding the server settled in NEEDS_AUTH.
        await supervisor.wait_state(lambda state: state is not ServerState.NEEDS_AUTH)
        return status

    async def logout(self, server: str, *, tenant: Tenant | str | None = None) -> bool:
        """Forget ``server``'s stored credentials (and the ones in memory); its connection ends
        and it waits in ``NEEDS_AUTH``. False when there were none. ``tenant``: forget that
        tenant's instead (its later calls need a new sign-in; the server is not touched).
        Raises like :meth:`login`."""
        self._check_open()
        chosen = as_tenant(tenant)
        if chosen is not None:
            supervisor, _ = self._sign_in_of(server)
            tenant_sign_in = await self._tenant_sign_ins.sign_in(supervisor.config, chosen.id)
            return await tenant_sign_in.logout()
        supervisor, sign_in = self._sign_in_of(server)
        forgot = await sign_in.logout()
        await supervisor.signed_out()
        return forgot

    async def _login_tenant(
        self,
        server: str,
        tenant: Tenant | None,
        *,
        prompt: AuthorizationPrompt | None,
        device: DevicePrompt | None,
        scopes: Sequence[str] | None,
    ) -> AuthStatus:
        """:meth:`login` of a tenant: its own sign-in, the server left as it is."""
        assert tenant is not None
        supervisor, _ = self._sign_in_of(server)
        sign_in = await self._tenant_sign_ins.sign_in(supervisor.config, tenant.id)
        if device is not None:
            return await sign_in.login_device(device, scopes=scopes)
        if prompt is None:
            hint = f"rt.login({server!r}, tenant={tenant.id!r}, prompt=...)"
            raise AuthorizationRequired(
                f"server {server!r}: signing the tenant {tenant.id!r} in needs that user: give "
                f"{hint} a prompt (or device=...) that shows the sign-in to them",
                server=server,
                hint=hint,
            )
        return await sign_in.login(prompt, scopes=scopes)

    def _sign_in_of(self, server: str) -> tuple[ServerSupervisor, SignIn]:
        supervisor = self._supervisor(server)
        if supervisor.sign_in is None:
            raise ConfigError(
                f'server {server!r} does not sign in with OAuth: set "auth": "oauth" (or '
                'an "oauth" table) in its configuration'
            )
        return supervisor, supervisor.sign_in

    # ------------------------------------------------------------------ closing

    @property
    def state(self) -> RuntimeState:
        return self._state

    def _check_open(self) -> None:
        if self._state is not RuntimeState.OPEN:
            raise RuntimeClosed("the runtime is closed; open a new one to make calls")

    async def aclose(self) -> None:
        """Stop every server and wait until they are stopped (at most ``shutdown_grace``
        seconds, then what is left is cancelled). Idempotent; a second call waits for the
        first."""
        if self._state is RuntimeState.OPEN:
            self._state = RuntimeState.CLOSING
            self._stop_requested.set()
        await self._closed.wait()

    stop_all = aclose

    async def _serve(self, task_status: trio.TaskStatus[Runtime]) -> None:
        try:
            async with trio.open_nursery() as nursery:
                self._outputs.serve_in(nursery)
                await nursery.start(self._registry.run)
                await nursery.start(self._skills.watcher.run)
                await nursery.start(self._tenant_sign_ins.run)
                for supervisor in self._supervisors.values():
                    await nursery.start(supervisor.run)
                task_status.started(self)
                logger.info("runtime started with %d servers", len(self._supervisors))
                await self._stop_requested.wait()
                await self._stop_everything()
                nursery.cancel_scope.cancel()
        finally:
            self._outputs.serve_in(None)
            self._state = RuntimeState.CLOSED
            self._bus.close()
            self._closed.set()
            logger.info("runtime stopped")

    async def _stop_everything(self) -> None:
        """Every supervisor withdraws its tools and closes its transport, all at once, within
        ``shutdown_grace``."""
        grace = self.config.shutdown_grace
        with trio.move_on_after(grace) as bounded:
            for supervisor in self._supervisors.values():
                await supervisor.stop()
            for supervisor in self._supervisors.values():
                await supervisor.wait_state(lambda s: s is ServerState.STOPPED)
        if bounded.cancelled_caught:
            left = [
                s.name for s in self._supervisors.values() if s.state is not ServerState.STOPPED
            ]
            logger.warning(
                "servers %s did not stop within shutdown_grace (%g s); cancelling them",
                ", ".join(map(repr, left)),
                grace,
            )


async def _project_holds(
    config: RuntimeConfig, approve: ProjectServerApprover | None
) -> dict[str, str]:
    """The servers of a project file that must not start, each with the reason (which says how
    to approve it). An entry whose very content is in the approval store starts; for any other
    the host's ``approve`` is asked once, and a True answer is recorded in the store (so it is
    not asked again until the entry changes)."""
    holds: dict[str, str] = {}
    stores: dict[str, ProjectApprovals | None] = {}
    for server in config.servers:
        origin = server.project
        if origin is None or not (server.enabled and config.enabled):
            continue
        if config.network_policy == "deny" and server.transport_kind.is_url:
            continue  # it is skipped anyway, and says why
        if origin.approvals_file not in stores:
            stores[origin.approvals_file] = await trio.to_thread.run_sync(
                _load_approvals, origin.approvals_file
            )
        store = stores[origin.approvals_file]
        if store is not None and store.is_approved(server.name, origin):
            continue
        stored = store.get(origin.project, server.name) if store is not None else None
        request = ProjectServerRequest(
            server=server.name, origin=origin, changed=stored is not None
        )
        if approve is not None:
            answer = approve(request)
            if inspect.isawaitable(answer):
                answer = await answer
            if answer is True:
                logger.info(
                    "server %r of the project %s: approved by the host", server.name, origin.project
                )
                if store is not None:
                    store = stores[origin.approvals_file] = store.approve(server.name, origin)
                    await trio.to_thread.run_sync(_save_approvals, store)
                continue
        what = "changed since it was approved" if request.changed else "not approved"
        verb = "would run" if origin.transport == "stdio" else "would connect to"
        asked = "; the host did not approve it" if approve is not None else ""
        reason = (
            f"{what}: this server comes from the project file {origin.file} and {verb} "
            f"{origin.command_line}{asked}; to start it, approve it with: "
            f"{approval_command(server.name, origin.project)}"
        )
        logger.warning("server %r: %s", server.name, reason)
        holds[server.name] = reason
    return holds


def _load_approvals(path: str) -> ProjectApprovals | None:
    """The approval store, or None (logged) when it cannot be used: then nothing counts as
    approved, and nothing is written to it."""
    try:
        return ProjectApprovals.load(path)
    except McpError as exc:
        logger.warning("%s; project servers stay DISABLED", exc)
        return None


def _save_approvals(store: ProjectApprovals) -> None:
    try:
        store.save()
    except McpError as exc:
        logger.warning("%s; the approval holds for this run only", exc)


async def _no_prompt(request: AuthorizationRequest) -> str:
    """The prompt of a sign-in that needs none (client credentials): never called by it."""
    raise AuthorizationRequired(
        f"server {request.server!r}: this sign-in needs the user, and no prompt was given",
        server=request.server,
        hint=login_hint(request.server),
    )


def _sign_ins(
    config: RuntimeConfig, callbacks: HostCallbacks, oauth: OAuthFactories
) -> dict[str, SignIn]:
    """One sign-in per server with OAuth, all keeping their credentials in one store (built
    only when a server needs it)."""
    store: TokenStore | None = None
    sign_ins: dict[str, SignIn] = {}
    for server in config.servers:
        settings = server.oauth_settings
        if settings is None:
            continue
        if store is None:
            store = oauth.store(config.credentials_dir or credentials_path())
        sign_ins[server.name] = oauth.sign_in(
            server=server.name,
            settings=settings,
            store=store,
            http=http_parameters(server),
            prompt=callbacks.authorize,
            tenant="",
        )
    return sign_ins


def _build(
    config: RuntimeConfig,
    callbacks: HostCallbacks | None,
    open_transport: TransportOpener | None,
    rng: random.Random | None,
    holds: Mapping[str, str] | None = None,
    oauth: OAuthFactories | None = None,
    hooks: Sequence[CallHook] = (),
    wrap_transport: TransportWrapper | None = None,
) -> Runtime:
    bus = EventBus()
    registry = Registry(builtin_names=config.builtin_tool_names, events=bus)
    callbacks = callbacks or HostCallbacks()
    sign_ins = _sign_ins(config, callbacks, oauth or DEFAULT_OAUTH)

    def opener_of(server: ServerConfig) -> TransportOpener:
        base: TransportOpener
        if open_transport is not None:
            base = open_transport
        else:
            sign_in = sign_ins.get(server.name)
            base = functools.partial(
                open_default_transport,
                shutdown_grace=config.shutdown_grace,
                auth=None if sign_in is None else sign_in.auth,
            )
        return base if wrap_transport is None else wrap_transport(server, base)

    holds = holds or {}
    # one generator for the jitter of every supervisor: they all run in this thread, and a
    # Mersenne Twister is 2.5 KiB, a thirtieth of what a connected server costs
    rng = rng or random.Random()
    supervisors = {
        server.name: ServerSupervisor(
            config=server,
            runtime=config,
            registry=registry,
            callbacks=callbacks,
            open_transport=opener_of(server),
            events=bus,
            rng=rng,
            hold=holds.get(server.name),
            sign_in=sign_ins.get(server.name),
        )
        for server in config.servers
    }
    tenant_sign_ins = _tenant_sign_ins(config, oauth or DEFAULT_OAUTH)
    resources = Resources(config=config, supervisors=supervisors, tenant_sign_ins=tenant_sign_ins)
    return Runtime(
        config,
        callbacks,
        registry,
        bus,
        supervisors,
        resources,
        hooks=hooks,
        tenant_sign_ins=tenant_sign_ins,
    )


def _tenant_sign_ins(config: RuntimeConfig, oauth: OAuthFactories) -> TenantSignIns:
    """The tenants' sign-ins: each made on first use, keeping its credential in the token
    store (opened on the first, like the operator's sign-ins' store) under its tenant; a
    tenant's sign-in never asks anyone by itself (``rt.login(server, tenant=..., prompt=...)``
    does)."""
    stores: list[TokenStore] = []

    def make(server: ServerConfig, tenant: str) -> SignIn:
        settings = server.oauth_settings
        assert settings is not None
        if not stores:
            stores.append(oauth.store(config.credentials_dir or credentials_path()))
        return oauth.sign_in(
            server=server.name,
            settings=settings,
            store=stores[0],
            http=http_parameters(server),
            prompt=None,
            tenant=tenant,
        )

    return TenantSignIns(make=make)


async def serve_runtime(
    config: RuntimeConfig,
    *,
    callbacks: HostCallbacks | None = None,
    open_transport: TransportOpener | None = None,
    rng: random.Random | None = None,
    approve_project_server: ProjectServerApprover | None = None,
    oauth: OAuthFactories | None = None,
    hooks: Sequence[CallHook] = (),
    wrap_transport: TransportWrapper | None = None,
    task_status: trio.TaskStatus[Runtime] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run a runtime in a nursery the host owns: ``rt = await nursery.start(serve_runtime,
    config)``. Returns after ``await rt.aclose()`` (or when the nursery is cancelled). A single
    failure is raised as itself, never wrapped in an ``ExceptionGroup``.
    ``approve_project_server``, ``oauth``, ``hooks`` and ``wrap_transport``: as for
    :func:`open_runtime`."""
    holds = await _project_holds(config, approve_project_server)
    runtime = _build(config, callbacks, open_transport, rng, holds, oauth, hooks, wrap_transport)
    with _single_failure():
        await runtime._serve(task_status)


@asynccontextmanager
async def open_runtime(
    config: RuntimeConfig,
    *,
    callbacks: HostCallbacks | None = None,
    open_transport: TransportOpener | None = None,
    rng: random.Random | None = None,
    approve_project_server: ProjectServerApprover | None = None,
    oauth: OAuthFactories | None = None,
    hooks: Sequence[CallHook] = (),
    wrap_transport: TransportWrapper | None = None,
) -> AsyncIterator[Runtime]:
    """Run a runtime for the duration of an ``async with`` block.

    The runtime's actors are shielded from a cancellation of the block until the block has
    exited, so its ``finally:`` can still make calls; then every server is stopped (within
    ``shutdown_grace``). A single failure (of the block or of the runtime) comes out as itself,
    with its ``__cause__``, never wrapped in an ``ExceptionGroup``.

    A server that a project file adds (``ServerConfig.project``) starts only when that very
    entry is approved: in the approval store already, or by ``approve_project_server`` (sync or
    async, given a :class:`ProjectServerRequest`; True approves and is remembered), which is
    asked before the runtime starts, once per entry that is new or changed. Any other server
    stays DISABLED, its status saying how to approve it (``trio-mcp project approve``).

    A server with OAuth (``auth="oauth"``) gets a sign-in built by ``oauth``
    (:class:`OAuthFactories`; default: the real flow, keeping credentials in files under
    ``RuntimeConfig.credentials_dir``), which its supervisor runs and its HTTP transports send
    every request through.

    ``hooks``: the call hooks (:class:`CallHook`) that run around every ``rt.call``, in the
    caller's task, the first outermost (docs/embedding.md "Call hooks").

    ``wrap_transport``: called once per server with its configuration and the opener the
    runtime would use (its sign-in's ``auth`` included), returns the opener to use instead: to
    watch or alter what goes over the wire (the command line's ``-vv`` logs every frame) while
    the runtime keeps opening the transports itself.
    """
    holds = await _project_holds(config, approve_project_server)
    runtime = _build(config, callbacks, open_transport, rng, holds, oauth, hooks, wrap_transport)
    with _single_failure():
        async with trio.open_nursery() as nursery:
            await nursery.start(_shielded, runtime)
            try:
                yield runtime
            finally:
                with trio.CancelScope(shield=True):
                    await runtime.aclose()


async def _shielded(runtime: Runtime, *, task_status: trio.TaskStatus[Runtime]) -> None:
    with trio.CancelScope(shield=True):
        await runtime._serve(task_status)


@contextmanager
def _tenant_sign_in_hint(server: str, tenant: str) -> Iterator[None]:
    """A tenant's call that needs a sign-in says how to sign that tenant in (the command
    line's ``trio-mcp login`` signs in the operator only)."""
    try:
        yield
    except AuthorizationRequired as exc:
        if type(exc) is not AuthorizationRequired:
            raise
        hint = f"rt.login({server!r}, tenant={tenant!r}, prompt=...)"
        raise AuthorizationRequired(
            f"server {server!r}: the tenant {tenant!r} is not signed in (or its sign-in ran "
            f"out), so its call was not made; the server stays ready for the others. Sign the "
            f"tenant in with {hint}",
            server=server,
            hint=hint,
        ) from exc


@contextmanager
def _single_failure() -> Iterator[None]:
    """Raise a group that holds one failure (Cancelled aside) as that failure, keeping its
    traceback, cause and context; a group of several is raised as it is."""
    try:
        yield
    except BaseExceptionGroup as group:
        single = _collapse(group)
        if single is group:
            raise
        context = single.__context__
        try:
            raise single
        finally:
            single.__context__ = context
