"""OpenTelemetry for the runtime (docs/embedding.md "Tracing"): spans for connection attempts,
tool listings and tool calls, and the W3C trace context in each request's ``_meta``.

OpenTelemetry is optional (the ``otel`` extra). It is imported once, here, guarded: without it
:data:`TRACING` is False and each hook on the call path is one check of that flag.

Every span is made in the task that does the work, with no callback into another actor: a call's
in the caller's task (:meth:`Runtime.call`), a connection attempt's in the supervisor's task (it
starts the span, makes it the parent of the attempt's task, and ends it when that attempt's
word, ready or lost, reaches its mailbox), a listing's in the task that lists. While a span is
the current one, every request sent from that task carries its context as ``traceparent`` (and
``tracestate``) in ``params._meta``: the keys the MCP specification reserves for OpenTelemetry
(2026-07-28, "General fields: _meta"; SEP-414), allowed in ``_meta`` in every revision.
``baggage`` is never sent: it is the host's data, not the server's business.

The spans follow the OpenTelemetry semantic conventions for MCP where they have a name
(``mcp.method.name``, ``gen_ai.tool.name``, ``gen_ai.operation.name``, ``mcp.protocol.version``,
``error.type``) and use ``trio_mcp.*`` for the rest: ``trio_mcp.server``, ``trio_mcp.tool`` (the
registered name), ``trio_mcp.outcome`` and ``trio_mcp.sent``.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

import trio

from ...protocol._errors import (
    AuthorizationRequired,
    CallTimeout,
    ConnectTimeout,
    InvalidToolOutput,
    McpError,
    RpcError,
    RuntimeClosed,
    ServerDisconnected,
    ServerUnavailable,
    ToolNotFound,
)

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer, TracerProvider

    from ...protocol._types import CallToolResult
    from ..config._config import RuntimeConfig
    from ._session import SessionInfo

#: Whether OpenTelemetry (its API) can be imported: decided once, when this module is.
TRACING: bool
try:
    from opentelemetry import context as _context
    from opentelemetry import trace as _trace
    from opentelemetry.trace import (
        NoOpTracerProvider,
        ProxyTracerProvider,
        SpanKind,
        Status,
        StatusCode,
    )
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError:  # the otel extra is not installed: nothing is traced, nothing is sent
    TRACING = False
else:
    # The API's global provider, read directly on the call path (see _may_record); an API
    # without it (none since 1.0) is taken as not installed rather than failing every call.
    TRACING = hasattr(_trace, "_TRACER_PROVIDER")
    _PROPAGATOR: Final = TraceContextTextMapPropagator()

SCOPE: Final = "trio_mcp"

# Attribute keys: the semantic conventions' where they have one.
METHOD: Final = "mcp.method.name"
OPERATION: Final = "gen_ai.operation.name"
TOOL_NAME: Final = "gen_ai.tool.name"
PROTOCOL_VERSION: Final = "mcp.protocol.version"
ERROR_TYPE: Final = "error.type"
SERVER: Final = "trio_mcp.server"
TOOL: Final = "trio_mcp.tool"
OUTCOME: Final = "trio_mcp.outcome"
SENT: Final = "trio_mcp.sent"
GENERATION: Final = "trio_mcp.generation"
ERA: Final = "trio_mcp.era"
TOOLS: Final = "trio_mcp.tools"
REFUSED: Final = "trio_mcp.refused"

#: The longest status description (an error's message) a span keeps.
_DESCRIPTION_CHARS: Final = 500

_tracers: weakref.WeakKeyDictionary[TracerProvider, Tracer] = weakref.WeakKeyDictionary()
_global_tracer: Tracer | None = None


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("trio-mcp")
    except PackageNotFoundError:  # pragma: no cover - source tree never installed
        return "0+unknown"


def _tracer(config: RuntimeConfig) -> Tracer:
    """The tracer of ``config.tracer_provider``, or of the global provider (a proxy that follows
    ``opentelemetry.trace.set_tracer_provider`` even when it is called later); made once."""
    global _global_tracer
    provider = config.tracer_provider
    if provider is None:
        if _global_tracer is None:
            _global_tracer = _trace.get_tracer(SCOPE, _version())
        return _global_tracer
    tracer = _tracers.get(provider)
    if tracer is None:
        tracer = _tracers[provider] = provider.get_tracer(SCOPE, _version())
    return tracer


#: The environment names a global tracer provider for the API to load (read once: the API reads
#: it when a tracer is first asked for, before any span).
_ENV_PROVIDER: Final = "OTEL_PYTHON_TRACER_PROVIDER" in os.environ


def _may_record(config: RuntimeConfig | None) -> bool:
    """Whether a span could be recorded or passed on at all: the runtime was given a tracer
    provider, or one (an SDK's) is set globally. Without one the API's tracers make nothing but
    invalid spans, so the call path skips them: a span, or even asking the API for its
    provider (it reads the environment each time until one is set), costs microseconds per
    request. ``_TRACER_PROVIDER`` is the API's global (set once by ``set_tracer_provider``);
    read directly, the check is one attribute lookup."""
    if config is not None and config.tracer_provider is not None:
        return True
    provider = _trace._TRACER_PROVIDER
    if provider is None:
        return _ENV_PROVIDER
    return not isinstance(provider, ProxyTracerProvider | NoOpTracerProvider)


def _live(span: Span) -> bool:
    """Whether a span is worth keeping: recorded, or with a context to pass on (sampled out)."""
    return span.is_recording() or span.get_span_context().is_valid


def _error_attributes(span: Span, exc: BaseException, outcome: str) -> None:
    span.set_attribute(OUTCOME, outcome)
    if isinstance(exc, trio.Cancelled):
        return  # the caller gave up: not an error of the call
    span.set_attribute(ERROR_TYPE, type(exc).__qualname__)
    span.set_status(Status(StatusCode.ERROR, str(exc)[:_DESCRIPTION_CHARS]))


# ---------------------------------------------------------------------------- the trace context


def with_trace_context(
    config: RuntimeConfig, params: Mapping[str, Any] | None
) -> Mapping[str, Any] | None:
    """``params`` with the current span's W3C trace context in its ``_meta``
    (``traceparent``, and ``tracestate`` when there is one): a new object, the caller's
    untouched. Unchanged when no tracer provider is configured (``config.tracer_provider`` or a
    global one: see :func:`_may_record`), when there is no valid current span, and for keys the
    caller set."""
    if not _may_record(config) or not _trace.get_current_span().get_span_context().is_valid:
        return params  # nothing to pass on (checked first: cheaper than the propagator)
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    if not carrier:
        return params
    meta = (params or {}).get("_meta")
    meta = dict(meta) if isinstance(meta, Mapping) else {}
    for key, value in carrier.items():
        meta.setdefault(key, value)
    return {**(params or {}), "_meta": meta}


# ---------------------------------------------------------------------------- calls


class CallSpan:
    """The span of one :meth:`Runtime.call`, current in the caller's task until :meth:`end`."""

    __slots__ = ("_span", "_token")

    def __init__(self, span: Span) -> None:
        self._span = span
        self._token = _context.attach(_trace.set_span_in_context(span))

    def target(self, server: str, tool: str) -> None:
        """The call's tool was found: ``tool`` (the server's name for it) on ``server``."""
        span = self._span
        span.update_name(f"tools/call {tool}")
        span.set_attributes({SERVER: server, TOOL_NAME: tool})

    def succeeded(self, result: CallToolResult) -> None:
        span = self._span
        if result.is_error:
            span.set_attributes({SENT: True, OUTCOME: "tool_error", ERROR_TYPE: "tool_error"})
            span.set_status(Status(StatusCode.ERROR, "the tool reported an error (isError)"))
        else:
            span.set_attributes({SENT: True, OUTCOME: "ok"})

    def failed(self, exc: BaseException) -> None:
        span = self._span
        sent = _call_sent(exc)
        if sent is not None:
            span.set_attribute(SENT, sent)
        _error_attributes(span, exc, _call_outcome(exc))

    def end(self) -> None:
        _context.detach(self._token)
        self._span.end()


def start_call(config: RuntimeConfig, name: str) -> CallSpan | None:
    """A span for a call of the registered tool ``name``, made current in this task; None when
    nothing would be recorded or passed on (no SDK configured)."""
    if not _may_record(config):
        return None
    span = _tracer(config).start_span(
        "tools/call",
        kind=SpanKind.CLIENT,
        attributes={METHOD: "tools/call", OPERATION: "execute_tool", TOOL: name},
    )
    return CallSpan(span) if _live(span) else None


def _call_outcome(exc: BaseException) -> str:
    match exc:
        case trio.Cancelled():
            return "cancelled"
        case ToolNotFound():
            return "not_found"
        case ServerUnavailable():
            return "unavailable"
        case RuntimeClosed():
            return "closed"
        case CallTimeout():
            return "timeout"
        case ServerDisconnected():
            return "disconnected"
        case InvalidToolOutput():
            return "invalid_output"
        case RpcError():
            return "rpc_error"
        case _:
            return "error"


def _call_sent(exc: BaseException) -> bool | None:
    """Whether the request had gone out, when the failure says so (None: it does not)."""
    match exc:
        case ServerDisconnected():
            return exc.sent
        case ToolNotFound() | ServerUnavailable() | RuntimeClosed():
            return False
        case CallTimeout() | RpcError() | InvalidToolOutput():
            return True
        case _:
            return None


# ---------------------------------------------------------------------------- connections


class ConnectSpan:
    """The span of one connection attempt: started by the supervisor, the parent of the
    attempt's task (see :meth:`parent_of`), ended by the supervisor's task when the attempt's
    word reaches it."""

    __slots__ = ("_span",)

    def __init__(self, span: Span) -> None:
        self._span = span

    @contextmanager
    def parent_of(self) -> Iterator[None]:
        """Make the span current for what is started inside (a trio task copies the context of
        the task that starts it), and only for that."""
        token = _context.attach(_trace.set_span_in_context(self._span))
        try:
            yield
        finally:
            _context.detach(token)

    def ready(self, info: SessionInfo | None, tools: int) -> None:
        span = self._span
        span.set_attribute(OUTCOME, "ready")
        if info is not None:
            span.set_attribute(PROTOCOL_VERSION, info.protocol_version)
            span.set_attribute(ERA, info.era.value)
        span.set_attribute(TOOLS, tools)
        span.end()

    def failed(self, error: McpError) -> None:
        match error:
            case ConnectTimeout():
                outcome = "timeout"
            case AuthorizationRequired():
                outcome = "needs_auth"
            case _:
                outcome = "failed"
        _error_attributes(self._span, error, outcome)
        self._span.end()


def start_connect(config: RuntimeConfig, server: str, generation: int) -> ConnectSpan | None:
    """A span for connection attempt ``generation`` of ``server`` (not made current); None when
    OpenTelemetry is not installed or nothing would be recorded."""
    if not TRACING or not _may_record(config):
        return None
    span = _tracer(config).start_span(
        "mcp connect",
        kind=SpanKind.CLIENT,
        attributes={SERVER: server, GENERATION: generation},
        context=_context.Context(),  # a trace of its own, not the host's current one
    )
    return ConnectSpan(span) if _live(span) else None


@contextmanager
def parent_of(attempt: ConnectSpan | None) -> Iterator[None]:
    """:meth:`ConnectSpan.parent_of`, or nothing without a span."""
    if attempt is None:
        yield
        return
    with attempt.parent_of():
        yield


# ---------------------------------------------------------------------------- listings


@contextmanager
def listing_span(config: RuntimeConfig, server: str, method: str) -> Iterator[ListingSpan | None]:
    """A span for one whole listing (every page of ``method``), current in this task while it
    runs; None (and nothing done) without OpenTelemetry or an SDK."""
    if not TRACING or not _may_record(config):
        yield None
        return
    span = _tracer(config).start_span(
        method, kind=SpanKind.CLIENT, attributes={METHOD: method, SERVER: server}
    )
    if not _live(span):
        yield None
        return
    token = _context.attach(_trace.set_span_in_context(span))
    try:
        yield ListingSpan(span)
    except BaseException as exc:
        _error_attributes(span, exc, "cancelled" if isinstance(exc, trio.Cancelled) else "error")
        raise
    finally:
        _context.detach(token)
        span.end()


class ListingSpan:
    __slots__ = ("_span",)

    def __init__(self, span: Span) -> None:
        self._span = span

    def listed(self, tools: int, refused: int) -> None:
        self._span.set_attribute(OUTCOME, "ok")
        self._span.set_attribute(TOOLS, tools)
        self._span.set_attribute(REFUSED, refused)
