"""A scriptable fake MCP server, for tests of trio-mcp and of the hosts that embed it.

:class:`FakeServer` speaks the *server* role of MCP over any
:class:`~trio_mcp.transports.Transport`, in the era its ``era`` says:

- ``"legacy"`` (the default): the handshake revisions (2024-11-05 to 2025-11-25). It answers
  ``initialize`` with the client's revision when that is a handshake revision, else with
  ``2025-11-25``, and ``server/discover`` (2026-07-28) with "method not found", like every
  server that predates it.
- ``"modern"``: only the stateless 2026-07-28. It answers ``server/discover``, checks the
  ``_meta`` envelope of every request (-32602 when a required key is missing, -32022 with the
  versions it supports for a version it does not), puts ``resultType`` in every result, and
  refuses ``initialize`` with -32022 (as a modern-only server names what it supports). It
  serves ``subscriptions/listen``: it acknowledges what it honours (everything asked, less
  ``listen_ignores``), sends its change notifications only on the listens that asked for them
  (tagged with the listen's id in ``_meta["io.modelcontextprotocol/subscriptionId"]``), and
  ends them on demand (:meth:`FakeServer.end_listens`).
- ``"dual"``: both; each connection speaks the era of its first request (``initialize``: the
  handshake revisions; anything else: 2026-07-28), as the official Python SDK's servers do.

A modern connection puts ``ttlMs`` and ``cacheScope`` on its cacheable results (discover, the
listings, reads: 0 and ``"private"`` unless ``ttl_ms`` / ``cache_scope`` say otherwise). With
``http_headers`` the client end takes each request's HTTP headers (a
:class:`~trio_mcp.transports.HeaderTransport`) and a modern connection checks them as a
2026-07-28 Streamable HTTP server does, against its own tools' ``x-mcp-header`` annotations:
-32020 (``HeaderMismatch``) for a wrong or missing one.

Two ways to run it:

- **In memory** (fast, exact under ``autojump_clock``): ``fake.transport_factory()`` is a
  callable taking the sink of the client end (a session's mailbox, where the frames the fake
  sends go); each call returns an async context manager that records the attempt, then either
  raises :class:`ConnectError` (the first ``refuse_connects`` attempts) or yields the client end
  of a fresh :func:`memory_transport_pair` and serves the server end in a task of its own nursery
  for as long as the ``async with`` block runs. No nursery has to be handed to the fake.
  ``fake.server_config()`` wraps that in a ``ServerConfig(type=CUSTOM)``.
- **As a stdio subprocess**: ``python -m trio_mcp.actors.testing --spec FILE`` (or
  ``--spec-json TEXT``) serves the JSON spec described in :meth:`FakeServer.from_spec` as
  newline-delimited JSON on stdin/stdout, and exits with status 0 when stdin reaches EOF.

Everything the fake receives is recorded (:attr:`FakeServer.requests`,
:attr:`FakeServer.notifications`, :attr:`FakeServer.cancellations`,
:attr:`FakeServer.connect_times`...), so a test can assert exactly what the client did.
"""

from __future__ import annotations

import argparse
import base64
import functools
import inspect
import json
import os
import string
import sys
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Final, Protocol, TypeAlias

import attrs
import trio

from ...protocol._errors import (
    ConfigError,
    ConnectError,
    FrameTooLarge,
    InvalidMessage,
    LocalProtocolError,
    RpcError,
    TransportClosed,
)
from ...protocol._framing import DEFAULT_MAX_FRAME_BYTES, NdjsonFramer, encode_frame
from ...protocol._headers import HEADER_PARAM_PREFIX, param_headers, request_headers
from ...protocol._jsonrpc import (
    CANCELLED_NOTIFICATION,
    ErrorObject,
    ErrorResponse,
    IdAllocator,
    Message,
    Notification,
    Request,
    RequestId,
    Response,
    classify,
    serialize,
)
from ...protocol._methods import CACHEABLE_METHODS, SKILLS_EXTENSION, TASKS_EXTENSION, encode
from ...protocol._types import CallToolResult, ToolAnnotations
from ...protocol._versions import (
    LATEST_LEGACY,
    LEGACY_VERSIONS,
    LOG_LEVELS,
    META_CLIENT_CAPABILITIES,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    META_SERVER_INFO,
    META_SUBSCRIPTION_ID,
    MODERN_VERSIONS,
)
from ...transports._base import (
    FrameSink,
    TransportInfo,
    collapse_exception_group,
    map_transport_errors,
)
from ...transports._memory import MemoryTransport, memory_transport_pair
from ..config._config import ServerConfig, TransportFactory, TransportKind
from ._fakeskills import (
    FakeSkill,
    SkillEntryLike,
    get_skill,
    read_directory,
    skill_entries,
    skill_file,
    spec_file_map,
    spec_skill,
)
from ._faketasks import TASK_METHODS, FakeTask, task_call
from ._faketasks import answer as answer_task

__all__ = [
    "FakeHeaderTransport",
    "FakePrompt",
    "FakeResource",
    "FakeResourceTemplate",
    "FakeServer",
    "FakeSkill",
    "FakeTask",
    "FakeTool",
    "ToolContext",
]

#: What a tool handler (or a tool's canned ``result``) may give: a :class:`CallToolResult`, a raw
#: result object (``{"content": [...], "isError": true}``), or a string (one text block).
ToolResultLike: TypeAlias = CallToolResult | Mapping[str, Any] | str

#: A tool handler: ``handler(arguments, ctx)``, sync or async, returning a
#: :data:`ToolResultLike`.
ToolHandler: TypeAlias = Callable[
    [dict[str, Any], "ToolContext"], ToolResultLike | Awaitable[ToolResultLike]
]

_LIST_KINDS: Final = ("tools", "resources", "prompts")
_PAGED: Final = {
    "tools/list": ("tools", "tools"),
    "resources/list": ("resources", "resources"),
    "resources/templates/list": ("resource_templates", "resourceTemplates"),
    "prompts/list": ("prompts", "prompts"),
}
_MAX_COMPLETIONS: Final = 100
#: The eras a fake can speak (see the module docstring).
_ERAS: Final = ("legacy", "modern", "dual")
#: Methods of the handshake revisions that 2026-07-28 removed: "method not found" there.
_REMOVED_IN_MODERN: Final = frozenset(
    {"ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"}
)
#: The ``_meta`` keys every 2026-07-28 request must carry.
_REQUIRED_META: Final = (META_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES)
#: What :attr:`FakeServer.results` may hold for a method: a raw result, or a function of the
#: request's params giving one (raising :class:`RpcError` to answer with an error).
CannedResult: TypeAlias = Mapping[str, Any] | Callable[[Mapping[str, Any]], Mapping[str, Any]]
#: The flags of a ``subscriptions/listen`` filter, by the list they are about.
_LISTEN_FLAGS: Final = {
    "tools": "toolsListChanged",
    "prompts": "promptsListChanged",
    "resources": "resourcesListChanged",
}
_LISTEN_URIS: Final = "resourceSubscriptions"
#: The skills extension's methods whose 2026-07-28 results carry ``ttlMs`` and ``cacheScope``.
_SKILL_CACHEABLE: Final = frozenset({"skills/list", "skills/get"})


# --------------------------------------------------------------------------- catalog entries


@attrs.frozen
class FakeTool:
    """A tool of the fake server.

    The call is answered by ``handler(arguments, ctx)`` (sync or async; see
    :class:`ToolContext`) when given, else with the canned ``result``, else with a text block
    holding the arguments as compact JSON with sorted keys (an echo). A handler or result may
    be a :class:`CallToolResult`, a raw result ``dict`` or a ``str`` (one text block). A handler
    that raises :class:`RpcError` makes the call a JSON-RPC error with its code; any other
    exception makes it a tool error (``isError: true`` with ``"<Type>: <message>"``). ``delay``
    seconds pass (``trio.sleep``) before the handler runs.

    ``task_support`` (``"optional"`` or ``"required"``; listed as ``execution.taskSupport``)
    makes a task-augmented call of the tool a task (:class:`FakeTask`): it works ``delay``
    seconds (``math.inf``: until the test ends it), then completes with the tool's result.
    """

    name: str
    description: str | None = None
    input_schema: Mapping[str, Any] = attrs.field(factory=lambda: {"type": "object"})
    handler: ToolHandler | None = attrs.field(default=None, eq=False, repr=False)
    result: ToolResultLike | None = None
    annotations: Mapping[str, Any] | ToolAnnotations | None = None
    title: str | None = None
    output_schema: Mapping[str, Any] | None = None
    delay: float = 0.0
    task_support: str | None = None

    def to_wire(self) -> dict[str, Any]:
        """The tool as ``tools/list`` lists it."""
        out: dict[str, Any] = {"name": self.name}
        if self.title is not None:
            out["title"] = self.title
        if self.description is not None:
            out["description"] = self.description
        out["inputSchema"] = dict(self.input_schema)
        if self.output_schema is not None:
            out["outputSchema"] = dict(self.output_schema)
        if isinstance(self.annotations, ToolAnnotations):
            out["annotations"] = encode(self.annotations)
        elif self.annotations is not None:
            out["annotations"] = dict(self.annotations)
        if self.task_support is not None:
            out["execution"] = {"taskSupport": self.task_support}
        return out


@attrs.frozen
class FakeResource:
    """A resource: ``resources/read`` returns ``text``, or ``blob`` (bytes, sent base64), or an
    empty text when neither is given. Giving both raises :class:`ValueError`."""

    uri: str
    name: str
    text: str | None = None
    blob: bytes | None = None
    mime_type: str | None = None
    description: str | None = None

    def __attrs_post_init__(self) -> None:
        if self.text is not None and self.blob is not None:
            raise ValueError(f"FakeResource {self.uri!r}: give text or blob, not both")

    def to_wire(self) -> dict[str, Any]:
        """The resource as ``resources/list`` lists it."""
        out: dict[str, Any] = {"uri": self.uri, "name": self.name}
        if self.description is not None:
            out["description"] = self.description
        if self.mime_type is not None:
            out["mimeType"] = self.mime_type
        return out

    def contents(self) -> dict[str, Any]:
        """The resource's contents as ``resources/read`` returns them."""
        out: dict[str, Any] = {"uri": self.uri}
        if self.mime_type is not None:
            out["mimeType"] = self.mime_type
        if self.blob is not None:
            out["blob"] = base64.b64encode(self.blob).decode("ascii")
        else:
            out["text"] = self.text if self.text is not None else ""
        return out


@attrs.frozen
class FakeResourceTemplate:
    """A resource template, listed by ``resources/templates/list``."""

    uri_template: str
    name: str
    description: str | None = None
    mime_type: str | None = None

    def to_wire(self) -> dict[str, Any]:
        """The template as ``resources/templates/list`` lists it."""
        out: dict[str, Any] = {"uriTemplate": self.uri_template, "name": self.name}
        if self.description is not None:
            out["description"] = self.description
        if self.mime_type is not None:
            out["mimeType"] = self.mime_type
        return out


@attrs.frozen
class FakePrompt:
    """A prompt.

    ``arguments``: each a name (a required argument) or a raw ``PromptArgument`` object.
    ``messages``: each a ``(role, text)`` pair, whose text has ``${argument}`` placeholders
    filled in from the request's arguments (``string.Template.safe_substitute``), or a raw
    ``PromptMessage`` object sent as it is. ``prompts/get`` without a required argument is
    answered with error -32602.
    """

    name: str
    arguments: Sequence[str | Mapping[str, Any]] = ()
    messages: Sequence[tuple[str, str] | Mapping[str, Any]] = ()
    description: str | None = None

    def argument_objects(self) -> list[dict[str, Any]]:
        """The arguments as ``PromptArgument`` objects."""
        return [
            {"name": arg, "required": True} if isinstance(arg, str) else dict(arg)
            for arg in self.arguments
        ]

    def to_wire(self) -> dict[str, Any]:
        """The prompt as ``prompts/list`` lists it."""
        out: dict[str, Any] = {"name": self.name}
        if self.description is not None:
            out["description"] = self.description
        if self.arguments:
            out["arguments"] = self.argument_objects()
        return out

    def render(self, arguments: Mapping[str, str]) -> list[dict[str, Any]]:
        """The messages for ``arguments``."""
        out: list[dict[str, Any]] = []
        for message in self.messages:
            if isinstance(message, Mapping):
                out.append(dict(message))
            else:
                role, text = message
                filled = string.Template(text).safe_substitute(arguments)
                out.append({"role": role, "content": {"type": "text", "text": filled}})
        return out


ToolEntry: TypeAlias = FakeTool | Mapping[str, Any]
ResourceEntry: TypeAlias = FakeResource | Mapping[str, Any]
TemplateEntry: TypeAlias = FakeResourceTemplate | Mapping[str, Any]
PromptEntry: TypeAlias = FakePrompt | Mapping[str, Any]


def _wire_of(entry: Any) -> dict[str, Any]:
    return dict(entry) if isinstance(entry, Mapping) else dict(entry.to_wire())


def _tool_list(tools: Iterable[ToolEntry]) -> list[ToolEntry]:
    return list(tools)


def _resource_list(resources: Iterable[ResourceEntry]) -> list[ResourceEntry]:
    return list(resources)


def _template_list(templates: Iterable[TemplateEntry]) -> list[TemplateEntry]:
    return list(templates)


def _prompt_list(prompts: Iterable[PromptEntry]) -> list[PromptEntry]:
    return list(prompts)


def _float_map(values: Mapping[str, float]) -> dict[str, float]:
    return dict(values)


def _str_set(values: Iterable[str]) -> set[str]:
    return set(values)


def _error_map(values: Mapping[str, tuple[int, str]]) -> dict[str, tuple[int, str]]:
    return dict(values)


def _result_map(values: Mapping[str, CannedResult]) -> dict[str, CannedResult]:
    return dict(values)


def _any_map(values: Mapping[str, Any]) -> dict[str, Any]:
    return dict(values)


def _text_map(values: Mapping[str, str]) -> dict[str, str]:
    return dict(values)


def _str_tuple(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(values)


def _completion_map(values: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    return {key: list(items) for key, items in values.items()}


# --------------------------------------------------------------------------- connections


@attrs.define(eq=False)
class _Reply:
    """The client's answer to one server->client request."""

    done: trio.Event = attrs.Factory(trio.Event)
    result: Mapping[str, Any] | None = None
    error: ErrorObject | None = None


class ServerEnd(Protocol):
    """What the fake needs of its end of a connection: the server end of a memory pair, or its
    own stdio streams."""

    async def send(self, frame: bytes) -> None: ...

    async def receive(self) -> bytes: ...

    async def aclose(self) -> None: ...


@attrs.frozen(kw_only=True)
class ListenSeen:
    """A ``subscriptions/listen`` the fake received: on which connection, its id (the
    subscription id), the ``notifications`` it asked for, and when (trio time)."""

    connection: int
    request_id: RequestId
    notifications: Mapping[str, Any]
    at: float


@attrs.define(eq=False)
class _Listen:
    """One ``subscriptions/listen`` the fake serves: what it honours, and how it is to end."""

    request_id: RequestId
    honoured: dict[str, Any]
    acknowledged: bool = False
    #: ``"result"`` (answer it) or ``"cancelled"`` (send notifications/cancelled naming it)
    how: str | None = None
    ended: trio.Event = attrs.Factory(trio.Event)

    def notices(self, kind: str) -> bool:
        return self.acknowledged and self.honoured.get(_LISTEN_FLAGS[kind]) is True

    def watches(self, uri: str) -> bool:
        return self.acknowledged and uri in self.honoured.get(_LISTEN_URIS, ())


@attrs.define(eq=False)
class _Connection:
    """What the fake knows about one client connection."""

    transport: ServerEnd
    number: int
    nursery: trio.Nursery | None = None
    handling: dict[RequestId, tuple[trio.CancelScope, ToolContext]] = attrs.Factory(dict)
    replies: dict[RequestId, _Reply] = attrs.Factory(dict)
    ids: IdAllocator = attrs.Factory(IdAllocator)
    subscriptions: set[str] = attrs.Factory(set)
    #: The open subscriptions/listen requests (2026-07-28), by id.
    listens: dict[RequestId, _Listen] = attrs.Factory(dict)
    log_level: str | None = None
    protocol_version: str | None = None
    #: The era this connection speaks: decided by its first request (see FakeServer.era).
    era: str | None = None
    tool_calls: int = 0
    closed: bool = False
    #: With ``http_headers``: the headers the client end sent with each request, by request id
    #: (taken when the request is read).
    headers: dict[RequestId, Mapping[str, str]] | None = None

    async def send(self, message: Message) -> bool:
        """Send one message; False (nothing raised) when the client is gone."""
        if self.closed:
            await trio.lowlevel.checkpoint()
            return False
        try:
            await self.transport.send(serialize(message))
        except TransportClosed:
            return False
        return True

    async def close(self) -> None:
        self.closed = True
        with trio.CancelScope(shield=True):
            await self.transport.aclose()


@attrs.define(eq=False)
class FakeHeaderTransport:
    """The client end of an in-memory connection to a fake with ``http_headers``: a
    :class:`~trio_mcp.transports.HeaderTransport`, as Streamable HTTP is. The headers of a
    frame sent with :meth:`send_with_headers` reach the fake with the frame (by its request
    id); a frame sent with :meth:`send` has none."""

    inner: MemoryTransport
    _headers: dict[RequestId, Mapping[str, str]] = attrs.field(repr=False)

    @property
    def info(self) -> TransportInfo:
        return self.inner.info

    def send_nowait(self, frame: bytes, request_id: RequestId | None = None) -> None:
        self.inner.send_nowait(frame, request_id)

    async def send(self, frame: bytes, request_id: RequestId | None = None) -> None:
        await self.inner.send(frame, request_id)

    def send_with_headers_nowait(
        self, frame: bytes, request_id: RequestId | None, headers: Mapping[str, str]
    ) -> None:
        self._put(request_id, headers)
        try:
            self.inner.send_nowait(frame, request_id)
        except BaseException:
            self._take(request_id)
            raise

    async def send_with_headers(
        self, frame: bytes, request_id: RequestId | None, headers: Mapping[str, str]
    ) -> None:
        self._put(request_id, headers)
        try:
            await self.inner.send(frame, request_id)
        except BaseException:
            self._take(request_id)
            raise

    async def receive(self) -> bytes:
        return await self.inner.receive()

    async def aclose(self) -> None:
        await self.inner.aclose()

    def _put(self, request_id: RequestId | None, headers: Mapping[str, str]) -> None:
        if request_id is not None:  # before the frame: the fake reads them with it
            self._headers[request_id] = dict(headers)

    def _take(self, request_id: RequestId | None) -> None:
        if request_id is not None:
            self._headers.pop(request_id, None)


@attrs.define(eq=False)
class ToolContext:
    """What a tool handler gets besides its arguments: the request, and ways to talk back.

    ``progress_token`` is the ``_meta.progressToken`` of the request (``None`` without one).
    :attr:`cancelled` turns true when the client sends ``notifications/cancelled`` for this
    request; the handler's task is cancelled at the same moment.
    """

    server: FakeServer
    tool: str
    request_id: RequestId
    progress_token: int | str | None
    meta: Mapping[str, Any] | None
    #: Which connection the request came on (1 for the first connection the fake served).
    connection: int
    _conn: _Connection = attrs.field(repr=False)
    #: The request's ``params`` as received (a 2026-07-28 retry's ``inputResponses`` and
    #: ``requestState`` are there, for a handler that asks for input and reads the answers).
    params: Mapping[str, Any] = attrs.field(factory=dict)
    #: The HTTP headers the request came with (a fake with ``http_headers``; else None).
    headers: Mapping[str, str] | None = None
    #: The task this call runs as (a task-augmented call of a tool with ``task_support``).
    task: FakeTask | None = None
    _cancelled: bool = attrs.field(default=False, init=False)

    @property
    def cancelled(self) -> bool:
        """Whether the client sent ``notifications/cancelled`` for this request."""
        return self._cancelled

    async def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> bool:
        """Send ``notifications/progress`` for this request. Returns False (sending nothing)
        when the request carried no progress token or the client is gone."""
        if self.progress_token is None:
            await trio.lowlevel.checkpoint()
            return False
        params: dict[str, Any] = {"progressToken": self.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        return await self._conn.send(Notification(method="notifications/progress", params=params))

    async def log(self, level: str, data: Any, logger: str | None = None) -> bool:
        """Send ``notifications/message``, unless ``level`` is below the level the client set
        with ``logging/setLevel``. Returns whether it was sent. Raises :class:`ValueError` for a
        level that is not one of the MCP log levels."""
        if level not in LOG_LEVELS:
            raise ValueError(f"unknown log level {level!r}; use one of {', '.join(LOG_LEVELS)}")
        floor = self._conn.log_level
        if self._conn.era == "modern":
            # 2026-07-28: only with the request's own log level, and never below it.
            floor = (self.meta or {}).get(META_LOG_LEVEL)
            if floor not in LOG_LEVELS:
                await trio.lowlevel.checkpoint()
                return False
        if floor in LOG_LEVELS and LOG_LEVELS.index(level) < LOG_LEVELS.index(floor):
            await trio.lowlevel.checkpoint()
            return False
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        return await self._conn.send(Notification(method="notifications/message", params=params))

    async def notify(self, method: str, params: Mapping[str, Any] | None = None) -> bool:
        """Send any notification on this request's connection; whether it was sent."""
        return await self._conn.send(Notification(method=method, params=params))

    async def request(
        self, method: str, params: Mapping[str, Any] | None = None
    ) -> Mapping[str, Any]:
        """Send a request to the client (``roots/list``, ``sampling/createMessage``,
        ``elicitation/create``...) and return its result object.

        Raises :class:`RpcError` (the most specific subclass for the code) when the client
        answers with an error, and :class:`TransportClosed` when the connection is gone. If the
        handler is cancelled while waiting, the client is sent ``notifications/cancelled``.
        On a 2026-07-28 connection, where servers send no requests, raises
        :class:`RuntimeError` (the call is answered as a tool error).
        """
        conn = self._conn
        if conn.era == "modern":
            raise RuntimeError(
                f"fake server {self.server.name!r} cannot send {method}: a 2026-07-28 server "
                "sends no requests (return an input_required result instead)"
            )
        request_id = conn.ids.next()
        reply = _Reply()
        conn.replies[request_id] = reply
        sent = False
        try:
            sent = await conn.send(Request(id=request_id, method=method, params=params))
            if not sent:
                raise TransportClosed(
                    f"fake server {self.server.name!r} cannot send {method}: the client is gone"
                )
            await reply.done.wait()
        finally:
            conn.replies.pop(request_id, None)
            if sent and not reply.done.is_set() and conn.nursery is not None and not conn.closed:
                notice = Notification(
                    method=CANCELLED_NOTIFICATION,
                    params={"requestId": request_id, "reason": "the tool call was cancelled"},
                )
                conn.nursery.start_soon(conn.send, notice)
        if reply.error is not None:
            error = reply.error
            raise RpcError.from_error(error.code, error.message, error.data, method=method)
        assert reply.result is not None
        return reply.result

    async def crash(self, exit_code: int = 1) -> None:
        """Crash the server: as a stdio subprocess the process exits at once with
        ``exit_code`` (nothing is answered or flushed); in memory the connection is dropped
        (like ``crash_after_calls``) and this handler is cancelled."""
        if self.server.exit_process_on_crash:
            os._exit(exit_code)
        await self._conn.close()
        await trio.sleep_forever()


# --------------------------------------------------------------------------- the server


def _error(code: int, message: str, data: Any = None) -> RpcError:
    return RpcError.from_error(code, message, data)


def _params_dict(params: Mapping[str, Any] | None) -> dict[str, Any]:
    return dict(params) if params is not None else {}


@attrs.define(eq=False)
class FakeServer:
    """A scriptable MCP server (server role, handshake revisions) for tests.

    Catalog: ``tools`` (:class:`FakeTool`, or a raw ``dict`` listed verbatim, which lets a test
    list malformed tools; calling a raw entry by its name gets the echo answer), ``resources``,
    ``resource_templates``, ``prompts`` (each also accepting raw ``dict`` entries) and
    ``completions`` (argument name -> values; ``completion/complete`` answers those starting
    with the typed value). ``page_size`` splits every listing into pages with opaque
    ``nextCursor`` values; ``cursor_cycle`` makes the last page point back to the first (to
    test cycle detection). Capabilities are ``capabilities`` when given, else derived from the
    catalog (tools and logging always).

    Era: ``era`` (``"legacy"``, ``"modern"`` or ``"dual"``; see the module docstring) and
    ``modern_versions`` (what a modern connection supports, and lists in ``server/discover``
    and in its -32022 answers); ``unsupported_version_answers`` answers the first N modern
    requests -32022 whatever version they carry (as the conformance suite's request-metadata
    scenario does), to test a client's retry. A tool handler or canned result may give a raw
    result with its own ``resultType`` (``"input_required"``...), sent as it is. ``ttl_ms`` and
    ``cache_scope`` (method -> value) set the ``ttlMs`` / ``cacheScope`` of modern results, and
    ``http_headers`` has each request's HTTP headers reach the fake and checked (-32020).

    Scripted failures: ``refuse_connects`` (the first N connection attempts raise
    :class:`ConnectError`), ``respond_after`` (method -> seconds before answering), ``hang``
    (methods never answered), ``initialize_version`` (force the answered revision),
    ``initialize_error`` and ``errors`` (method -> ``(code, message)`` answered instead),
    ``results`` (method -> a raw result answered instead, as it is, or a function of the
    request's params giving one),
    ``crash_after_calls`` (a connection is dropped, unanswered, when its ``tools/call`` number
    N + 1 arrives), ``list_changed_after_calls`` (after every N answered calls the fake sends
    ``notifications/tools/list_changed``), and :meth:`disconnect`. ``listen_ignores``: filter
    keys (``"promptsListChanged"``...) and resource URIs a 2026-07-28 ``subscriptions/listen``
    is not honoured for (left out of the acknowledgement, never notified).

    Tasks: a tool with ``task_support`` makes the fake a task server in its era (2025-11-25
    ``tasks``, or the 2026-07-28 tasks extension): see :class:`FakeTask`. ``task_ttl_ms`` and
    ``task_poll_ms`` are what its tasks say of their ``ttl`` and polling interval,
    ``task_messages`` their status messages; ``on_task`` sees each new one; the tasks are in
    :attr:`tasks`.

    Records (read them in assertions): :attr:`connect_times`, :attr:`requests`,
    :attr:`notifications`, :attr:`cancellations`, :attr:`log_levels`,
    :attr:`invalid_frames`, :attr:`connections` (live), :attr:`served` (total),
    :attr:`listens`, :attr:`open_listens` and :attr:`tasks`.
    """

    name: str = "fake"
    version: str = "1.0.0"
    tools: list[ToolEntry] = attrs.field(factory=list, converter=_tool_list)
    resources: list[ResourceEntry] = attrs.field(factory=list, converter=_resource_list)
    resource_templates: list[TemplateEntry] = attrs.field(factory=list, converter=_template_list)
    prompts: list[PromptEntry] = attrs.field(factory=list, converter=_prompt_list)
    completions: dict[str, list[str]] = attrs.field(factory=dict, converter=_completion_map)
    instructions: str | None = None
    capabilities: Mapping[str, Any] | None = None
    page_size: int | None = None
    cursor_cycle: bool = False
    refuse_connects: int = 0
    respond_after: dict[str, float] = attrs.field(factory=dict, converter=_float_map)
    hang: set[str] = attrs.field(factory=set, converter=_str_set)
    initialize_version: str | None = None
    initialize_error: tuple[int, str] | None = None
    errors: dict[str, tuple[int, str]] = attrs.field(factory=dict, converter=_error_map)
    crash_after_calls: int | None = None
    list_changed_after_calls: int | None = None
    #: ``method -> result``: answer that method with this raw result, as it is, or with what
    #: a function of the request's params gives (it may raise :class:`RpcError`).
    results: dict[str, CannedResult] = attrs.field(factory=dict, converter=_result_map)
    era: str = "legacy"
    #: ``method -> ttlMs`` of its 2026-07-28 results (any JSON value, to test bad ones; None
    #: leaves the key out); a method not named gets 0. Only for a result without a ``ttlMs`` of
    #: its own, and never on an ``input_required`` one.
    ttl_ms: dict[str, Any] = attrs.field(factory=dict, converter=_any_map)
    #: ``method -> cacheScope`` of its 2026-07-28 results (None leaves the key out); a method
    #: not named gets ``"private"``.
    cache_scope: dict[str, Any] = attrs.field(factory=dict, converter=_any_map)
    #: The client end takes each request's HTTP headers (:class:`FakeHeaderTransport`), and a
    #: modern connection checks them like a 2026-07-28 Streamable HTTP server (-32020).
    http_headers: bool = False
    modern_versions: tuple[str, ...] = attrs.field(default=MODERN_VERSIONS, converter=_str_tuple)
    unsupported_version_answers: int = 0
    listen_ignores: set[str] = attrs.field(factory=set, converter=_str_set)
    #: Skills (``io.modelcontextprotocol/skills``, declared with ``resources`` when there are
    #: any): :class:`FakeSkill` entries, or raw entries listed verbatim (malformed ones...).
    #: ``skills_directory_read`` declares and serves ``resources/directory/read``;
    #: ``skill_file_overrides`` (URI -> bytes) is what ``resources/read`` serves for those
    #: skill files instead of their content (a server whose files do not match its manifest).
    skills: list[SkillEntryLike] = attrs.field(factory=list, converter=list)
    skills_directory_read: bool = False
    skill_file_overrides: dict[str, bytes] = attrs.field(factory=dict, converter=dict)
    #: The ``ttl`` (ms; None: unlimited) and suggested polling interval (ms; None: not said) of
    #: the fake's tasks.
    task_ttl_ms: int | None = 60_000
    task_poll_ms: int | None = 500
    #: ``status -> message``: the status message a task has in that status unless it is
    #: given one (``{"working": "on it"}``).
    task_messages: dict[str, str] = attrs.field(factory=dict, converter=_text_map)
    #: Called (synchronously) with each new task before it is answered: drive it from there
    #: (``task.ask(...)``, ``task.working("...")``).
    on_task: Callable[[FakeTask], None] | None = attrs.field(default=None, eq=False, repr=False)
    #: Bytes buffered toward the fake by each in-memory connection (the client end's frames go
    #: into the sink it was opened with: a session's mailbox).
    max_bytes: int = 256 * 1024
    #: Set by the stdio entry point: :meth:`ToolContext.crash` exits the process.
    exit_process_on_crash: bool = False

    #: ``trio.current_time()`` of every connection attempt, refused ones included.
    connect_times: list[float] = attrs.field(factory=list, init=False)
    #: ``(method, params)`` of every request received, on every connection, in order.
    requests: list[tuple[str, Mapping[str, Any] | None]] = attrs.field(factory=list, init=False)
    #: ``(method, params)`` of every notification received.
    notifications: list[tuple[str, Mapping[str, Any] | None]] = attrs.field(
        factory=list, init=False
    )
    #: The ``requestId`` of every ``notifications/cancelled`` received.
    cancellations: list[RequestId] = attrs.field(factory=list, init=False)
    #: Every level set with ``logging/setLevel``.
    log_levels: list[str] = attrs.field(factory=list, init=False)
    #: Frames that were not JSON or not JSON-RPC (each was answered with an error).
    invalid_frames: list[bytes] = attrs.field(factory=list, init=False)
    #: How many connections were served so far (refused attempts not included).
    served: int = attrs.field(default=0, init=False)
    #: With ``http_headers``: ``(method, headers)`` of every request received, in order.
    headers_received: list[tuple[str, dict[str, str]]] = attrs.field(factory=list, init=False)
    #: Every ``subscriptions/listen`` received, in order.
    listens: list[ListenSeen] = attrs.field(factory=list, init=False)
    #: The tasks made so far, by id (``t1``, ``t2``...), across connections.
    tasks: dict[str, FakeTask] = attrs.field(factory=dict, init=False)

    _live: list[_Connection] = attrs.field(factory=list, init=False)
    _calls_answered: int = attrs.field(default=0, init=False)

    def __attrs_post_init__(self) -> None:
        if self.era not in _ERAS:
            raise ValueError(f"FakeServer.era must be one of {', '.join(_ERAS)}, got {self.era!r}")
        for key, minimum in (
            ("refuse_connects", 0),
            ("max_bytes", 1),
            ("unsupported_version_answers", 0),
        ):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ValueError(f"FakeServer.{key} must be an integer >= {minimum}, got {value!r}")
        for key in ("page_size", "crash_after_calls", "list_changed_after_calls"):
            value = getattr(self, key)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise ValueError(f"FakeServer.{key} must be an integer >= 1 or None, got {value!r}")

    # ------------------------------------------------------------------ catalog

    def set_tools(self, tools: Iterable[ToolEntry]) -> None:
        """Replace the tool list (``tools/list`` answers it from now on). Nothing is sent: call
        :meth:`emit_list_changed` to tell the clients."""
        self.tools = list(tools)

    def set_resources(self, resources: Iterable[ResourceEntry]) -> None:
        """Replace the resource list; see :meth:`set_tools`."""
        self.resources = list(resources)

    def set_prompts(self, prompts: Iterable[PromptEntry]) -> None:
        """Replace the prompt list; see :meth:`set_tools`."""
        self.prompts = list(prompts)

    def set_skills(self, skills: Iterable[SkillEntryLike]) -> None:
        """Replace the skills (``skills/list``, ``skills/get`` and the files answer from now
        on); nothing is sent."""
        self.skills = list(skills)

    @property
    def connections(self) -> int:
        """How many connections are live now."""
        return len(self._live)

    @property
    def subscriptions(self) -> frozenset[str]:
        """The resource URIs some live connection is subscribed to (``resources/subscribe``,
        or an open ``subscriptions/listen`` that honours them)."""
        uris = {uri for conn in self._live for uri in conn.subscriptions}
        for conn in self._live:
            for listen in conn.listens.values():
                uris.update(listen.honoured.get(_LISTEN_URIS, ()))
        return frozenset(uris)

    @property
    def open_listens(self) -> dict[int, tuple[RequestId, ...]]:
        """The ``subscriptions/listen`` requests open now, by connection number."""
        return {conn.number: tuple(conn.listens) for conn in self._live if conn.listens}

    # ------------------------------------------------------------------ pushing to clients

    async def notify(self, method: str, params: Mapping[str, Any] | None = None) -> int:
        """Send a notification on every live connection; returns on how many it was sent."""
        sent = 0
        for conn in list(self._live):
            sent += await conn.send(Notification(method=method, params=params))
        return sent

    async def emit_list_changed(self, kind: str = "tools") -> int:
        """Send ``notifications/<kind>/list_changed`` on every live connection (``kind`` is
        ``"tools"``, ``"resources"`` or ``"prompts"``; anything else raises
        :class:`ValueError`); on a 2026-07-28 connection, on each acknowledged listen that
        honours that kind, with its subscription id. Returns how many were sent."""
        if kind not in _LIST_KINDS:
            raise ValueError(f"kind must be one of {', '.join(_LIST_KINDS)}, got {kind!r}")
        method = f"notifications/{kind}/list_changed"
        sent = 0
        for conn in list(self._live):
            if conn.era != "modern":
                sent += await conn.send(Notification(method=method))
                continue
            for listen in list(conn.listens.values()):
                if listen.notices(kind):
                    sent += await conn.send(Notification(method=method, params=_tagged(listen)))
        return sent

    async def notify_resource_updated(self, uri: str) -> int:
        """Send ``notifications/resources/updated`` for ``uri`` on every live connection that
        subscribed to it (on a 2026-07-28 connection, on each acknowledged listen that
        honours it, with its subscription id); returns how many were sent."""
        method = "notifications/resources/updated"
        sent = 0
        for conn in list(self._live):
            if uri in conn.subscriptions:
                sent += await conn.send(Notification(method=method, params={"uri": uri}))
            for listen in list(conn.listens.values()):
                if listen.watches(uri):
                    params = {"uri": uri, **_tagged(listen)}
                    sent += await conn.send(Notification(method=method, params=params))
        return sent

    async def end_listens(self, how: str = "result") -> int:
        """End every open ``subscriptions/listen`` from the server side: ``"result"``
        answers it (``resultType: "complete"``, the graceful end), ``"cancelled"`` sends
        ``notifications/cancelled`` naming it and no answer. Returns how many were ended
        (the answers go out from the listens' own tasks, a moment later)."""
        if how not in ("result", "cancelled"):
            raise ValueError(f"how must be 'result' or 'cancelled', got {how!r}")
        ended = 0
        for conn in self._live:
            for listen in conn.listens.values():
                if listen.how is None:
                    listen.how = how
                    listen.ended.set()
                    ended += 1
        await trio.lowlevel.checkpoint()
        return ended

    async def disconnect(self) -> int:
        """Close every live connection from the server side (the clients see their transport
        close; what they had already been sent is still delivered). Returns how many were
        closed; :attr:`connections` is 0 afterwards."""
        live, self._live = self._live, []
        for conn in live:
            await conn.close()
        return len(live)

    # ------------------------------------------------------------------ connecting

    def transport_factory(self) -> TransportFactory:
        """A callable taking the sink of the client end; each call is one connection attempt
        (see :meth:`connect`, or :meth:`connect_with_headers` when ``http_headers`` is set).
        This is what ``ServerConfig(type=TransportKind.CUSTOM, transport_factory=...)``
        takes."""
        return self.connect_with_headers if self.http_headers else self.connect

    def server_config(self, name: str | None = None, **options: Any) -> ServerConfig:
        """A ``ServerConfig`` that reaches this fake in memory; ``options`` are passed on
        (``timeout=...``, ``connect_timeout=...``). The name defaults to the fake's name."""
        return ServerConfig(
            name=self.name if name is None else name,
            type=TransportKind.CUSTOM,
            transport_factory=self.transport_factory(),
            **options,
        )

    @asynccontextmanager
    async def connect(self, sink: FrameSink | None = None) -> AsyncIterator[MemoryTransport]:
        """One connection attempt, as an async context manager yielding the client end (whose
        frames go into ``sink``; without one, read them with its ``receive()``).

        The attempt's time is recorded in :attr:`connect_times`. The first ``refuse_connects``
        attempts raise :class:`ConnectError`. Otherwise the server end is served in a
        background task until the client end is closed, the block exits, or :meth:`disconnect`
        is called; leaving the block closes the client end and stops that task. An exception
        raised in the block comes out as itself, never wrapped in an exception group.
        """
        async with self._connect(sink, None) as client:
            yield client

    @asynccontextmanager
    async def connect_with_headers(
        self, sink: FrameSink | None = None
    ) -> AsyncIterator[FakeHeaderTransport]:
        """:meth:`connect`, the client end taking each request's HTTP headers (a
        :class:`FakeHeaderTransport`): the fake records them (:attr:`headers_received`) and a
        modern connection checks them."""
        headers: dict[RequestId, Mapping[str, str]] = {}
        async with self._connect(sink, headers) as client:
            yield FakeHeaderTransport(client, headers)

    @asynccontextmanager
    async def _connect(
        self, sink: FrameSink | None, headers: dict[RequestId, Mapping[str, str]] | None
    ) -> AsyncIterator[MemoryTransport]:
        self.connect_times.append(trio.current_time())
        attempt = len(self.connect_times)
        if attempt <= self.refuse_connects:
            await trio.lowlevel.checkpoint()
            raise ConnectError(
                f"fake server {self.name!r} refused connection attempt {attempt} "
                f"(refuse_connects={self.refuse_connects})"
            )
        client, server = memory_transport_pair(
            max_bytes=self.max_bytes,
            label=f"fake server {self.name!r} connection {attempt}",
            client_sink=sink,
        )
        with collapse_exception_group():
            async with trio.open_nursery() as nursery:
                nursery.start_soon(functools.partial(self.serve_transport, server, headers=headers))
                try:
                    yield client
                finally:
                    # Shielded: a Cancelled from this checkpoint would replace (and lose) an
                    # exception that is leaving the block.
                    with trio.CancelScope(shield=True):
                        await client.aclose()
                    nursery.cancel_scope.cancel()

    async def serve_transport(
        self,
        transport: ServerEnd,
        *,
        headers: dict[RequestId, Mapping[str, str]] | None = None,
    ) -> None:
        """Serve one client connection over ``transport`` until it closes (the client closed
        it, or :meth:`disconnect`). Returns normally then; the transport is closed on the way
        out. Bugs in tool handlers' result types are answered as JSON-RPC errors. ``headers``:
        where the client end puts each request's HTTP headers (see
        :meth:`connect_with_headers`)."""
        self.served += 1
        conn = _Connection(transport=transport, number=self.served, headers=headers)
        self._live.append(conn)
        try:
            async with trio.open_nursery() as nursery:
                conn.nursery = nursery
                await self._read(conn)
                conn.closed = True  # nothing more is sent; the handlers still running stop
                nursery.cancel_scope.cancel()
        finally:
            if conn in self._live:
                self._live.remove(conn)
            await conn.close()

    # ------------------------------------------------------------------ reading

    async def _read(self, conn: _Connection) -> None:
        while not conn.closed:
            try:
                frame = await conn.transport.receive()
            except TransportClosed:
                return
            await self._on_frame(conn, frame)

    async def _on_frame(self, conn: _Connection, frame: bytes) -> None:
        try:
            obj = json.loads(frame)
        except (ValueError, RecursionError):
            self.invalid_frames.append(frame)
            await conn.send(_error_response(None, -32700, "Parse error: the message is not JSON"))
            return
        try:
            message = classify(obj)
        except InvalidMessage as exc:
            self.invalid_frames.append(frame)
            raw_id = obj.get("id") if isinstance(obj, dict) else None
            valid = isinstance(raw_id, int | str) and not isinstance(raw_id, bool)
            request_id = raw_id if valid else None
            await conn.send(_error_response(request_id, -32600, f"Invalid Request: {exc}"))
            return
        if isinstance(message, Request):
            await self._on_request(conn, message)
        elif isinstance(message, Notification):
            self._on_notification(conn, message)
        elif message.id is not None:  # the client answers one of our requests
            reply = conn.replies.get(message.id)
            if reply is not None and not reply.done.is_set():
                if isinstance(message, Response):
                    reply.result = message.result
                else:
                    reply.error = message.error
                reply.done.set()

    async def _on_request(self, conn: _Connection, request: Request) -> None:
        self.requests.append((request.method, request.params))
        self._connection_era(conn, request.method)  # the first request read decides
        sent_headers: Mapping[str, str] | None = None
        if conn.headers is not None:
            sent_headers = conn.headers.pop(request.id, {})
            self.headers_received.append((request.method, dict(sent_headers)))
        if request.id in conn.handling:
            await conn.send(
                _error_response(
                    request.id, -32600, f"request id {request.id!r} is already in flight"
                )
            )
            return
        if request.method == "tools/call":
            conn.tool_calls += 1
            if self.crash_after_calls is not None and conn.tool_calls > self.crash_after_calls:
                await conn.close()  # the reader stops; nothing is answered
                return
        params = request.params or {}
        meta = params.get("_meta")
        meta = meta if isinstance(meta, Mapping) else None
        token = meta.get("progressToken") if meta is not None else None
        name = params.get("name")
        ctx = ToolContext(
            server=self,
            tool=name if isinstance(name, str) else "",
            request_id=request.id,
            progress_token=token if isinstance(token, int | str) else None,
            meta=meta,
            connection=conn.number,
            conn=conn,
            params=params,
            headers=sent_headers,
        )
        scope = trio.CancelScope()
        conn.handling[request.id] = (scope, ctx)
        assert conn.nursery is not None
        conn.nursery.start_soon(self._serve_request, conn, request, scope, ctx)

    def _on_notification(self, conn: _Connection, notification: Notification) -> None:
        self.notifications.append((notification.method, notification.params))
        if notification.method != CANCELLED_NOTIFICATION:
            return
        request_id = (notification.params or {}).get("requestId")
        if not isinstance(request_id, int | str):
            return
        self.cancellations.append(request_id)
        handling = conn.handling.get(request_id)
        if handling is not None:
            scope, ctx = handling
            ctx._cancelled = True
            scope.cancel()

    # ------------------------------------------------------------------ answering

    async def _serve_request(
        self, conn: _Connection, request: Request, scope: trio.CancelScope, ctx: ToolContext
    ) -> None:
        answer: Message | None = None
        try:
            with scope:
                try:
                    result = await self._answer(conn, request, ctx)
                except RpcError as exc:
                    message = str(exc.args[0]) if exc.args else ""
                    answer = _error_response(request.id, exc.code, message, exc.data)
                else:
                    answer = Response(id=request.id, result=result)
        finally:
            conn.handling.pop(request.id, None)
        if answer is None:  # cancelled by the client, or the connection ended
            return
        await conn.send(answer)
        if request.method == "tools/call" and isinstance(answer, Response):
            self._calls_answered += 1
            every = self.list_changed_after_calls
            if every and self._calls_answered % every == 0:
                await self.emit_list_changed("tools")

    async def _answer(
        self, conn: _Connection, request: Request, ctx: ToolContext
    ) -> Mapping[str, Any]:
        method = request.method
        if method in self.hang:
            await trio.sleep_forever()
        delay = self.respond_after.get(method)
        if delay:
            await trio.sleep(delay)
        else:
            await trio.lowlevel.checkpoint()
        params = _params_dict(request.params)
        if self._connection_era(conn, method) == "modern":
            if method == "initialize":
                raise _error(
                    -32022,
                    "this connection speaks the stateless 2026-07-28 protocol: no initialize",
                    {
                        "supported": list(self.modern_versions),
                        "requested": params.get("protocolVersion"),
                    },
                )
            self._check_envelope(conn, method, params)
            if ctx.headers is not None:
                self._check_headers(method, params, ctx.headers)
            result = await self._answer_modern(conn, request, ctx, params)
            if "resultType" not in result:
                result = {**result, "resultType": "complete"}
            if (method in CACHEABLE_METHODS or method in _SKILL_CACHEABLE) and result[
                "resultType"
            ] == "complete":
                result = self._cacheable(method, result)
            return result
        return await self._answer_legacy(conn, request, ctx, params)

    def _connection_era(self, conn: _Connection, method: str) -> str:
        """The era of ``conn``: decided by its first request when the fake is dual."""
        if conn.era is None:
            if self.era == "dual":
                conn.era = "legacy" if method == "initialize" else "modern"
            else:
                conn.era = self.era
        return conn.era

    def _check_envelope(self, conn: _Connection, method: str, params: Mapping[str, Any]) -> None:
        """A 2026-07-28 request must carry the envelope, with a version the fake supports."""
        meta = params.get("_meta")
        missing = [
            key for key in _REQUIRED_META if not isinstance(meta, Mapping) or key not in meta
        ]
        if missing:
            raise _error(
                -32602,
                f"Invalid params: {method} is missing the _meta keys {', '.join(missing)}",
            )
        assert isinstance(meta, Mapping)
        version = meta[META_PROTOCOL_VERSION]
        refuse = self.unsupported_version_answers > 0
        if refuse:
            self.unsupported_version_answers -= 1
        if refuse or version not in self.modern_versions:
            raise _error(
                -32022,
                "Unsupported protocol version",
                {"supported": list(self.modern_versions), "requested": str(version)},
            )
        conn.protocol_version = version

    async def _answer_modern(
        self, conn: _Connection, request: Request, ctx: ToolContext, params: dict[str, Any]
    ) -> dict[str, Any]:
        method = request.method
        if method in self.errors:
            raise _error(*self.errors[method])
        if method in self.results:
            return self._canned(method, params)
        if method == "server/discover":
            result: dict[str, Any] = {
                "supportedVersions": list(self.modern_versions),
                "capabilities": self._capabilities("modern"),
                "_meta": {META_SERVER_INFO: {"name": self.name, "version": self.version}},
            }
            if self.instructions is not None:
                result["instructions"] = self.instructions
            return result
        if method in _REMOVED_IN_MODERN:
            raise _error(-32601, f"Method not found: {method} (removed in 2026-07-28)")
        if method == "subscriptions/listen":
            return await self._listen(conn, request, params)
        return await self._answer_common(conn, request, ctx, params)

    def _canned(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """The result :attr:`results` gives for ``method``."""
        canned = self.results[method]
        return dict(canned(params) if callable(canned) else canned)

    def _cacheable(self, method: str, result: dict[str, Any]) -> dict[str, Any]:
        """A complete modern result of a cacheable method with its ``ttlMs`` and
        ``cacheScope`` (those it has of its own are kept)."""
        out = dict(result)
        for key, values, default in (
            ("ttlMs", self.ttl_ms, 0),
            ("cacheScope", self.cache_scope, "private"),
        ):
            if key in out:
                continue
            value = values.get(method, default)
            if value is not None:
                out[key] = value
        return out

    def _check_headers(
        self, method: str, params: Mapping[str, Any], sent: Mapping[str, str]
    ) -> None:
        """A 2026-07-28 Streamable HTTP server's check of a request's headers against its
        body: ``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name`` and, for ``tools/call``,
        the ``Mcp-Param-*`` the tool's annotations (in the fake's catalog now) ask for, no more
        and no fewer. -32020 for a header that is wrong or missing."""
        mirrored: tuple[Any, ...] = ()
        if method == "tools/call":
            tool = self._find_tool(str(params.get("name")))
            schema = (
                tool.get("inputSchema")
                if isinstance(tool, Mapping)
                else tool.input_schema
                if tool is not None
                else None
            )
            found = param_headers(schema)
            mirrored = found if isinstance(found, tuple) else ()
        meta = params.get("_meta")
        version = meta.get(META_PROTOCOL_VERSION) if isinstance(meta, Mapping) else None
        try:
            expected = request_headers(method, params, version=str(version), param_headers=mirrored)
        except LocalProtocolError as exc:
            raise _error(-32020, f"Header mismatch: {exc}") from None
        given = {name.lower(): value for name, value in sent.items()}
        for name, value in expected.items():
            if given.get(name.lower()) != value:
                raise _error(
                    -32020,
                    f"Header mismatch: {name} is {given.get(name.lower())!r}, expected {value!r}",
                )
        wanted = {name.lower() for name in expected}
        prefix = HEADER_PARAM_PREFIX.lower()
        for name in given:
            if name.startswith(prefix) and name not in wanted:
                raise _error(-32020, f"Header mismatch: {name} matches no annotated argument")

    async def _listen(
        self, conn: _Connection, request: Request, params: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Serve one ``subscriptions/listen`` until the client cancels it (its task is then
        cancelled) or :meth:`end_listens`."""
        asked = params.get("notifications")
        if not isinstance(asked, Mapping):
            raise _error(-32602, "Invalid params: subscriptions/listen needs 'notifications'")
        self.listens.append(
            ListenSeen(
                connection=conn.number,
                request_id=request.id,
                notifications=dict(asked),
                at=trio.current_time(),
            )
        )
        ignores = self.listen_ignores
        honoured: dict[str, Any] = {
            flag: True
            for flag in _LISTEN_FLAGS.values()
            if asked.get(flag) is True and flag not in ignores
        }
        uris = asked.get(_LISTEN_URIS)
        if isinstance(uris, list) and _LISTEN_URIS not in ignores:
            kept = [uri for uri in uris if isinstance(uri, str) and uri not in ignores]
            if kept:
                honoured[_LISTEN_URIS] = kept
        listen = _Listen(request_id=request.id, honoured=honoured)
        conn.listens[request.id] = listen
        try:
            acknowledgement = {**_tagged(listen), "notifications": honoured}
            # acknowledged from the moment its acknowledgement is on its way: what is sent on
            # the connection after it goes after it
            listen.acknowledged = True
            await conn.send(
                Notification(
                    method="notifications/subscriptions/acknowledged", params=acknowledgement
                )
            )
            await listen.ended.wait()
        finally:
            conn.listens.pop(request.id, None)
        if listen.how == "cancelled":
            notice = Notification(
                method=CANCELLED_NOTIFICATION,
                params={"requestId": request.id, "reason": "the server ended the subscription"},
            )
            await conn.send(notice)
            conn.handling[request.id][0].cancel()  # no answer
            await trio.sleep_forever()
        return _tagged(listen)

    async def _answer_legacy(
        self, conn: _Connection, request: Request, ctx: ToolContext, params: dict[str, Any]
    ) -> dict[str, Any]:
        method = request.method
        if method == "initialize" and self.initialize_error is not None:
            raise _error(*self.initialize_error)
        if method in self.errors:
            raise _error(*self.errors[method])
        if method in self.results:
            return self._canned(method, params)
        match method:
            case "initialize":
                return self._initialize(conn, params)
            case "ping":
                return {}
            case "resources/subscribe" | "resources/unsubscribe":
                uri = params.get("uri")
                if not isinstance(uri, str):
                    raise _error(-32602, f"{method} needs a string 'uri'")
                if method == "resources/subscribe":
                    conn.subscriptions.add(uri)
                else:
                    conn.subscriptions.discard(uri)
                return {}
            case "logging/setLevel":
                level = params.get("level")
                if level not in LOG_LEVELS:
                    raise _error(-32602, f"unknown log level {level!r}")
                assert isinstance(level, str)
                conn.log_level = level
                self.log_levels.append(level)
                return {}
        return await self._answer_common(conn, request, ctx, params)

    async def _answer_common(
        self, conn: _Connection, request: Request, ctx: ToolContext, params: dict[str, Any]
    ) -> dict[str, Any]:
        """The methods both eras share."""
        method = request.method
        if method in _PAGED:
            attribute, key = _PAGED[method]
            return self._page(method, key, getattr(self, attribute), params)
        if method in TASK_METHODS and self._task_tools():
            return await answer_task(self, conn.era or "legacy", method, params, ctx)
        match method:
            case "tools/call":
                return await self._call_tool(params, ctx, conn.era or "legacy")
            case "resources/read":
                return self._read_resource(params)
            case "prompts/get":
                return self._get_prompt(params)
            case "completion/complete":
                return self._complete(params)
            case "skills/list" if self.skills:
                return self._page(method, "skills", skill_entries(self.skills), params)
            case "skills/get" if self.skills:
                return get_skill(self.skills, params)
            case "resources/directory/read" if self.skills and self.skills_directory_read:
                return read_directory(self.skills, params)
        raise _error(-32601, f"Method not found: {method}")

    def _initialize(self, conn: _Connection, params: Mapping[str, Any]) -> dict[str, Any]:
        requested = params.get("protocolVersion")
        if self.initialize_version is not None:
            version = self.initialize_version
        elif isinstance(requested, str) and requested in LEGACY_VERSIONS:
            version = requested
        else:
            version = LATEST_LEGACY
        conn.protocol_version = version
        result: dict[str, Any] = {
            "protocolVersion": version,
            "capabilities": self._capabilities("legacy"),
            "serverInfo": {"name": self.name, "version": self.version},
        }
        if self.instructions is not None:
            result["instructions"] = self.instructions
        return result

    def _capabilities(self, era: str) -> dict[str, Any]:
        if self.capabilities is not None:
            return dict(self.capabilities)
        caps: dict[str, Any] = {"tools": {"listChanged": True}, "logging": {}}
        if self.resources or self.resource_templates:
            caps["resources"] = {"subscribe": True, "listChanged": True}
        if self.prompts:
            caps["prompts"] = {"listChanged": True}
        if self.completions:
            caps["completions"] = {}
        if self.skills:
            caps.setdefault("resources", {"subscribe": True, "listChanged": True})
            settings = {"directoryRead": True} if self.skills_directory_read else {}
            caps["extensions"] = {SKILLS_EXTENSION: settings}
        if self._task_tools():
            if era == "modern":
                caps["extensions"] = {**caps.get("extensions", {}), TASKS_EXTENSION: {}}
            else:
                caps["tasks"] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
        return caps

    def _task_tools(self) -> bool:
        """Whether some tool takes tasks (the fake is then a task server)."""
        return any(isinstance(tool, FakeTool) and tool.task_support for tool in self.tools)

    def _page(
        self, method: str, key: str, entries: Sequence[Any], params: Mapping[str, Any]
    ) -> dict[str, Any]:
        cursor = params.get("cursor")
        start = 0 if cursor is None else _decode_cursor(method, cursor)
        if start > len(entries):
            raise _error(-32602, f"Invalid cursor for {method}: {cursor!r}")
        end = len(entries) if self.page_size is None else start + self.page_size
        result: dict[str, Any] = {key: [_wire_of(entry) for entry in entries[start:end]]}
        if end < len(entries):
            result["nextCursor"] = _encode_cursor(method, end)
        elif self.cursor_cycle:
            result["nextCursor"] = _encode_cursor(method, 0)
        return result

    def _find_tool(self, name: str) -> ToolEntry | None:
        for tool in self.tools:
            tool_name = tool.get("name") if isinstance(tool, Mapping) else tool.name
            if tool_name == name:
                return tool
        return None

    async def _call_tool(
        self, params: Mapping[str, Any], ctx: ToolContext, era: str = "legacy"
    ) -> dict[str, Any]:
        name = params.get("name")
        if not isinstance(name, str):
            raise _error(-32602, "tools/call needs a string 'name'")
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, Mapping):
            raise _error(-32602, f"tools/call arguments must be an object, got {arguments!r}")
        tool = self._find_tool(name)
        if tool is None:
            raise _error(-32602, f"Unknown tool: {name}")
        if isinstance(tool, Mapping):
            return _tool_result(_echo(arguments))
        if tool.task_support is not None or "task" in params:
            body = functools.partial(self._run_tool, tool, dict(arguments), ctx)
            created = task_call(self, tool, params, era, ctx, body)
            if created is not None:
                return created
        if tool.delay:
            await trio.sleep(tool.delay)
        return await self._run_tool(tool, arguments, ctx)

    async def _run_tool(
        self, tool: FakeTool, arguments: Mapping[str, Any], ctx: ToolContext
    ) -> dict[str, Any]:
        """The tool's result: its handler's, its canned one, or the echo."""
        if tool.handler is None:
            return _tool_result(_echo(arguments) if tool.result is None else tool.result)
        try:
            value = tool.handler(dict(arguments), ctx)
            if inspect.isawaitable(value):
                value = await value
        except RpcError:
            raise
        except Exception as exc:
            return {"content": [_text(f"{type(exc).__name__}: {exc}")], "isError": True}
        return _tool_result(value)

    def _read_resource(self, params: Mapping[str, Any]) -> dict[str, Any]:
        uri = params.get("uri")
        if not isinstance(uri, str):
            raise _error(-32602, "resources/read needs a string 'uri'")
        if self.skills:
            contents = skill_file(self.skills, self.skill_file_overrides, uri)
            if contents is not None:
                return {"contents": [contents]}
        for resource in self.resources:
            if isinstance(resource, FakeResource) and resource.uri == uri:
                return {"contents": [resource.contents()]}
            if isinstance(resource, Mapping) and resource.get("uri") == uri:
                return {"contents": [{"uri": uri, "text": ""}]}
        raise _error(-32002, f"Resource not found: {uri}", {"uri": uri})

    def _get_prompt(self, params: Mapping[str, Any]) -> dict[str, Any]:
        name = params.get("name")
        arguments = params.get("arguments") or {}
        if not isinstance(arguments, Mapping):
            raise _error(-32602, f"prompts/get arguments must be an object, got {arguments!r}")
        for prompt in self.prompts:
            if isinstance(prompt, Mapping):
                if prompt.get("name") == name:
                    return {"messages": []}
                continue
            if prompt.name != name:
                continue
            for arg in prompt.argument_objects():
                if arg.get("required") and arg.get("name") not in arguments:
                    raise _error(-32602, f"Missing required argument: {arg.get('name')}")
            result: dict[str, Any] = {"messages": prompt.render(arguments)}
            if prompt.description is not None:
                result["description"] = prompt.description
            return result
        raise _error(-32602, f"Unknown prompt: {name}")

    def _complete(self, params: Mapping[str, Any]) -> dict[str, Any]:
        argument = params.get("argument")
        if not isinstance(argument, Mapping) or not isinstance(argument.get("name"), str):
            raise _error(-32602, "completion/complete needs an 'argument' with a 'name'")
        prefix = argument.get("value")
        prefix = prefix if isinstance(prefix, str) else ""
        matches = [v for v in self.completions.get(argument["name"], []) if v.startswith(prefix)]
        return {
            "completion": {
                "values": matches[:_MAX_COMPLETIONS],
                "total": len(matches),
                "hasMore": len(matches) > _MAX_COMPLETIONS,
            }
        }

    # ------------------------------------------------------------------ the JSON spec

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> FakeServer:
        """Build a fake from a declarative JSON spec (what ``--spec`` reads).

        Top-level keys (all optional): ``name``, ``version``, ``instructions``,
        ``stderr_banner`` (ignored here; printed to stderr by the subprocess at start),
        ``page_size``, ``cursor_cycle``, ``initialize_version``, ``initialize_error``
        (``[code, message]``), ``respond_after`` (``{method: seconds}``), ``hang``
        (``[method...]``), ``errors`` (``{method: [code, message]}``), ``crash_after_calls``,
        ``list_changed_after_calls``, ``era`` (``"legacy"``, ``"modern"`` or ``"dual"``),
        ``capabilities``, ``completions`` (``{argument: [values]}``), ``tools``, ``resources``,
        ``resource_templates``, ``prompts``, ``skills`` (see :func:`spec_skill`: each as
        :class:`FakeSkill` takes it, file contents as text or ``{"base64": "..."}``),
        ``skills_directory_read`` and ``skill_file_overrides`` (``{uri: content}``).

        A tool is ``{"raw": {...}}`` (listed verbatim) or an object with ``name`` and optional
        ``description``, ``title``, ``input_schema``, ``output_schema``, ``annotations``,
        ``delay`` (seconds), ``progress`` (steps: one progress notification per step, the delay
        spread over the steps) and a ``kind``:

        - ``"text"`` (the default): answers ``text`` (default ``""``), with ``is_error`` and
          ``structured`` (``structuredContent``) when given;
        - ``"echo"``: answers the arguments as compact JSON text with sorted keys;
        - ``"crash"``: the process exits with ``exit_code`` (default 1) without answering (in
          memory: the connection drops);
        - ``"stderr"``: writes ``bytes`` (default 65536) bytes of text lines to stderr, then
          answers how many it wrote.

        A resource is ``{"uri", "name", "text"?, "mime_type"?, "description"?}``, a template
        ``{"uri_template", "name", "description"?, "mime_type"?}``, a prompt ``{"name",
        "description"?, "arguments"?: [name or object], "messages"?: [[role, text] or
        object]}``; any of them may be ``{"raw": {...}}``.

        Raises :class:`ConfigError` naming the path of every problem (``$.tools[2].kind``):
        unknown keys, wrong types, unknown tool kinds.
        """
        problems: list[tuple[str, str]] = []
        fake = _SpecReader(problems).server(spec)
        if problems or fake is None:
            lines = "; ".join(f"{path}: {message}" for path, message in problems)
            raise ConfigError(f"invalid fake server spec: {lines}", problems=tuple(problems))
        return fake


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _tagged(listen: _Listen) -> dict[str, Any]:
    """The ``_meta`` that ties a message to a listen: its subscription id."""
    return {"_meta": {META_SUBSCRIPTION_ID: listen.request_id}}


def _echo(arguments: Mapping[str, Any]) -> str:
    return json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _tool_result(value: Any) -> dict[str, Any]:
    if isinstance(value, CallToolResult):
        return encode(value)
    if isinstance(value, str):
        return {"content": [_text(value)]}
    if isinstance(value, Mapping):
        return dict(value)
    raise _error(
        -32603,
        f"the fake tool's handler returned {type(value).__name__}; return a CallToolResult, "
        "a result dict or a str",
    )


def _error_response(
    request_id: RequestId | None, code: int, message: str, data: Any = None
) -> ErrorResponse:
    return ErrorResponse(id=request_id, error=ErrorObject(code=code, message=message, data=data))


def _encode_cursor(method: str, offset: int) -> str:
    return base64.urlsafe_b64encode(f"{method}#{offset}".encode()).decode("ascii")


def _decode_cursor(method: str, cursor: Any) -> int:
    try:
        text = base64.urlsafe_b64decode(cursor.encode("ascii")).decode()
        kind, _, offset = text.rpartition("#")
        if kind != method:
            raise ValueError(kind)
        return int(offset)
    except (AttributeError, ValueError, UnicodeError):
        raise _error(-32602, f"Invalid cursor for {method}: {cursor!r}") from None


# --------------------------------------------------------------------------- spec reading

_SERVER_KEYS: Final = frozenset(
    [
        "name",
        "version",
        "instructions",
        "stderr_banner",
        "page_size",
        "cursor_cycle",
        "initialize_version",
        "initialize_error",
        "respond_after",
        "hang",
        "errors",
        "crash_after_calls",
        "list_changed_after_calls",
        "era",
        "capabilities",
        "completions",
        "tools",
        "resources",
        "resource_templates",
        "prompts",
        "skills",
        "skills_directory_read",
        "skill_file_overrides",
    ]
)
_TOOL_KEYS: Final = frozenset(
    [
        "name",
        "description",
        "title",
        "input_schema",
        "output_schema",
        "annotations",
        "delay",
        "progress",
        "kind",
        "text",
        "is_error",
        "structured",
        "exit_code",
        "bytes",
    ]
)
_TOOL_KINDS: Final = ("text", "echo", "crash", "stderr")
_RESOURCE_KEYS: Final = frozenset({"uri", "name", "text", "mime_type", "description"})
_TEMPLATE_KEYS: Final = frozenset({"uri_template", "name", "description", "mime_type"})
_PROMPT_KEYS: Final = frozenset({"name", "description", "arguments", "messages"})


@attrs.define
class _SpecReader:
    """Reads a spec, collecting every problem with its path instead of stopping at the first."""

    problems: list[tuple[str, str]]

    def _problem(self, path: str, message: str) -> None:
        self.problems.append((path, message))

    def _keys(self, obj: Mapping[str, Any], allowed: frozenset[str], path: str) -> None:
        for key in sorted(set(obj) - allowed):
            self._problem(f"{path}.{key}", f"unknown key (allowed: {', '.join(sorted(allowed))})")

    def _typed(
        self, obj: Mapping[str, Any], key: str, kinds: tuple[type, ...], path: str, what: str
    ) -> Any:
        """``obj[key]`` if it is one of ``kinds`` (``bool`` only when listed), else ``None``
        (absent or ``null``, or wrong: then a problem is recorded)."""
        value = obj.get(key)
        if value is None:
            return None
        if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
            self._problem(f"{path}.{key}", f"must be {what}, got {value!r}")
            return None
        return value

    def _seconds(self, obj: Mapping[str, Any], key: str, path: str) -> float:
        value = self._typed(obj, key, (int, float), path, "a number of seconds")
        if value is not None and value < 0:
            self._problem(f"{path}.{key}", f"must be >= 0, got {value!r}")
            return 0.0
        return float(value or 0.0)

    def _count(self, obj: Mapping[str, Any], key: str, path: str) -> int | None:
        value = self._typed(obj, key, (int,), path, "an integer")
        if value is not None and value < 0:
            self._problem(f"{path}.{key}", f"must be >= 0, got {value!r}")
            return None
        return None if value is None else int(value)

    def _error_pair(self, value: Any, path: str) -> tuple[int, str] | None:
        if (
            isinstance(value, list)
            and len(value) == 2
            and isinstance(value[0], int)
            and not isinstance(value[0], bool)
            and isinstance(value[1], str)
        ):
            return (value[0], value[1])
        self._problem(path, f"must be [code, message], got {value!r}")
        return None

    def _list(self, spec: Mapping[str, Any], key: str, path: str) -> list[Any]:
        value = self._typed(spec, key, (list,), path, "an array")
        return value if value is not None else []

    def server(self, spec: Any) -> FakeServer | None:
        if not isinstance(spec, Mapping):
            self._problem("$", f"a spec must be a JSON object, got {spec!r}")
            return None
        self._keys(spec, _SERVER_KEYS, "$")
        options: dict[str, Any] = {}
        for key in ("name", "version", "instructions", "initialize_version"):
            value = self._typed(spec, key, (str,), "$", "a string")
            if value is not None:
                options[key] = value
        self._typed(spec, "stderr_banner", (str,), "$", "a string")
        era = self._typed(spec, "era", (str,), "$", "a string")
        if era is not None and era not in _ERAS:
            self._problem("$.era", f"must be one of {', '.join(_ERAS)}, got {era!r}")
        elif era is not None:
            options["era"] = era
        if (cycle := self._typed(spec, "cursor_cycle", (bool,), "$", "true or false")) is not None:
            options["cursor_cycle"] = cycle
        for key in ("page_size", "crash_after_calls", "list_changed_after_calls"):
            count = self._count(spec, key, "$")
            if count is not None:
                options[key] = count
        if options.get("page_size") == 0:
            self._problem("$.page_size", "must be >= 1")
        if "initialize_error" in spec:
            options["initialize_error"] = self._error_pair(
                spec["initialize_error"], "$.initialize_error"
            )
        respond_after = self._typed(spec, "respond_after", (Mapping,), "$", "an object")
        if respond_after is not None:
            options["respond_after"] = {
                method: self._seconds(respond_after, method, "$.respond_after")
                for method in respond_after
            }
        hang = self._list(spec, "hang", "$")
        for index, method in enumerate(hang):
            if not isinstance(method, str):
                self._problem(f"$.hang[{index}]", f"must be a method name, got {method!r}")
        options["hang"] = {m for m in hang if isinstance(m, str)}
        errors = self._typed(spec, "errors", (Mapping,), "$", "an object")
        if errors is not None:
            pairs = {m: self._error_pair(v, f"$.errors.{m}") for m, v in errors.items()}
            options["errors"] = {m: p for m, p in pairs.items() if p is not None}
        caps = self._typed(spec, "capabilities", (Mapping,), "$", "an object")
        if caps is not None:
            options["capabilities"] = caps
        completions = self._typed(spec, "completions", (Mapping,), "$", "an object")
        if completions is not None:
            for arg, values in completions.items():
                if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                    self._problem(f"$.completions.{arg}", "must be an array of strings")
            options["completions"] = {a: v for a, v in completions.items() if isinstance(v, list)}
        options["tools"] = [
            t
            for i, item in enumerate(self._list(spec, "tools", "$"))
            if (t := self.tool(item, f"$.tools[{i}]")) is not None
        ]
        options["resources"] = [
            r
            for i, item in enumerate(self._list(spec, "resources", "$"))
            if (r := self.resource(item, f"$.resources[{i}]")) is not None
        ]
        options["resource_templates"] = [
            rt
            for i, item in enumerate(self._list(spec, "resource_templates", "$"))
            if (rt := self.template(item, f"$.resource_templates[{i}]")) is not None
        ]
        options["prompts"] = [
            p
            for i, item in enumerate(self._list(spec, "prompts", "$"))
            if (p := self.prompt(item, f"$.prompts[{i}]")) is not None
        ]
        self.skills(spec, options)
        if self.problems:
            return None
        return FakeServer(**options)

    def skills(self, spec: Mapping[str, Any], options: dict[str, Any]) -> None:
        """The skills keys of ``spec`` into ``options`` (see :func:`spec_skill`)."""
        options["skills"] = [
            s
            for i, item in enumerate(self._list(spec, "skills", "$"))
            if (s := spec_skill(item, f"$.skills[{i}]", self._problem)) is not None
        ]
        read = self._typed(spec, "skills_directory_read", (bool,), "$", "true or false")
        if read is not None:
            options["skills_directory_read"] = read
        if "skill_file_overrides" in spec:
            options["skill_file_overrides"] = spec_file_map(
                spec["skill_file_overrides"], "$.skill_file_overrides", self._problem
            )

    def _raw(self, item: Any, path: str) -> Mapping[str, Any] | None:
        if set(item) != {"raw"}:
            self._problem(path, "a 'raw' entry has no other keys")
            return None
        raw = item["raw"]
        if not isinstance(raw, Mapping):
            self._problem(f"{path}.raw", f"must be an object, got {raw!r}")
            return None
        return raw

    def _named(self, item: Any, path: str, allowed: frozenset[str]) -> str | None:
        if not isinstance(item, Mapping):
            self._problem(path, f"must be an object, got {item!r}")
            return None
        self._keys(item, allowed, path)
        name = item.get("name")
        if not isinstance(name, str):
            self._problem(f"{path}.name", f"must be a string, got {name!r}")
            return None
        return name

    def tool(self, item: Any, path: str) -> ToolEntry | None:
        if isinstance(item, Mapping) and "raw" in item:
            return self._raw(item, path)
        name = self._named(item, path, _TOOL_KEYS)
        if name is None:
            return None
        kind = item.get("kind", "text")
        if kind not in _TOOL_KINDS:
            self._problem(f"{path}.kind", f"unknown tool kind {kind!r} (use one of {_TOOL_KINDS})")
            return None
        schema = self._typed(item, "input_schema", (Mapping,), path, "an object")
        output = self._typed(item, "output_schema", (Mapping,), path, "an object")
        annotations = self._typed(item, "annotations", (Mapping,), path, "an object")
        text = self._typed(item, "text", (str,), path, "a string")
        is_error = self._typed(item, "is_error", (bool,), path, "true or false")
        structured = item.get("structured")
        delay = self._seconds(item, "delay", path)
        steps = self._count(item, "progress", path) or 0
        exit_code = self._count(item, "exit_code", path)
        size = self._count(item, "bytes", path)
        return FakeTool(
            name,
            description=self._typed(item, "description", (str,), path, "a string"),
            input_schema=schema if schema is not None else {"type": "object"},
            handler=_spec_handler(
                kind=kind,
                text=text or "",
                is_error=bool(is_error),
                structured=structured,
                delay=delay,
                steps=steps,
                exit_code=1 if exit_code is None else exit_code,
                size=65536 if size is None else size,
            ),
            annotations=annotations,
            title=self._typed(item, "title", (str,), path, "a string"),
            output_schema=output,
        )

    def resource(self, item: Any, path: str) -> ResourceEntry | None:
        if isinstance(item, Mapping) and "raw" in item:
            return self._raw(item, path)
        name = self._named(item, path, _RESOURCE_KEYS)
        uri = self._typed(item, "uri", (str,), path, "a string") if name is not None else None
        if name is None or uri is None:
            if name is not None:
                self._problem(f"{path}.uri", "is required")
            return None
        return FakeResource(
            uri,
            name,
            text=self._typed(item, "text", (str,), path, "a string"),
            mime_type=self._typed(item, "mime_type", (str,), path, "a string"),
            description=self._typed(item, "description", (str,), path, "a string"),
        )

    def template(self, item: Any, path: str) -> TemplateEntry | None:
        if isinstance(item, Mapping) and "raw" in item:
            return self._raw(item, path)
        name = self._named(item, path, _TEMPLATE_KEYS)
        if name is None:
            return None
        uri_template = self._typed(item, "uri_template", (str,), path, "a string")
        if uri_template is None:
            self._problem(f"{path}.uri_template", "is required")
            return None
        return FakeResourceTemplate(
            uri_template,
            name,
            description=self._typed(item, "description", (str,), path, "a string"),
            mime_type=self._typed(item, "mime_type", (str,), path, "a string"),
        )

    def prompt(self, item: Any, path: str) -> PromptEntry | None:
        if isinstance(item, Mapping) and "raw" in item:
            return self._raw(item, path)
        name = self._named(item, path, _PROMPT_KEYS)
        if name is None:
            return None
        arguments = self._list(item, "arguments", path)
        for index, arg in enumerate(arguments):
            if not isinstance(arg, str | Mapping):
                self._problem(f"{path}.arguments[{index}]", "must be a name or an object")
        messages: list[tuple[str, str] | Mapping[str, Any]] = []
        for index, message in enumerate(self._list(item, "messages", path)):
            if isinstance(message, Mapping):
                messages.append(message)
            elif (
                isinstance(message, list)
                and len(message) == 2
                and all(isinstance(part, str) for part in message)
            ):
                messages.append((message[0], message[1]))
            else:
                self._problem(
                    f"{path}.messages[{index}]", "must be [role, text] or a PromptMessage object"
                )
        return FakePrompt(
            name,
            arguments=tuple(a for a in arguments if isinstance(a, str | Mapping)),
            messages=tuple(messages),
            description=self._typed(item, "description", (str,), path, "a string"),
        )


def _spec_handler(
    *,
    kind: str,
    text: str,
    is_error: bool,
    structured: Any,
    delay: float,
    steps: int,
    exit_code: int,
    size: int,
) -> ToolHandler:
    async def handler(arguments: dict[str, Any], ctx: ToolContext) -> ToolResultLike:
        if steps:
            for step in range(1, steps + 1):
                await trio.sleep(delay / steps)
                await ctx.progress(step, total=steps, message=f"step {step} of {steps}")
        elif delay:
            await trio.sleep(delay)
        if kind == "crash":
            await ctx.crash(exit_code)
        if kind == "stderr":
            written = await _flood_stderr(size)
            return f"wrote {written} bytes to stderr"
        if kind == "echo":
            return _echo(arguments)
        result: dict[str, Any] = {"content": [_text(text)]}
        if is_error:
            result["isError"] = True
        if structured is not None:
            result["structuredContent"] = structured
        return result

    return handler


async def _flood_stderr(size: int) -> int:
    """Write ``size`` bytes of 80-byte text lines to file descriptor 2, in a worker thread (a
    full pipe blocks only this tool call; cancelling the call abandons the thread)."""
    line = b"x" * 79 + b"\n"
    data = (line * (size // len(line) + 1))[:size]

    def write_all() -> int:
        view = memoryview(data)
        while view:
            written = os.write(2, view)
            view = view[written:]
        return len(data)

    return await trio.to_thread.run_sync(write_all, abandon_on_cancel=True)


# --------------------------------------------------------------------------- stdio mode


@attrs.define(eq=False)
class _StdioServerTransport:
    """The server's side of the stdio transport: NDJSON frames on two file streams."""

    _stdin: trio.abc.ReceiveStream
    _stdout: trio.abc.SendStream
    _framer: NdjsonFramer
    _frames: deque[bytes] = attrs.Factory(deque)
    _send_lock: trio.StrictFIFOLock = attrs.Factory(trio.StrictFIFOLock)
    _eof: bool = False
    _closed: bool = False

    @property
    def info(self) -> TransportInfo:
        return TransportInfo(kind="stdio", detail=f"fake server, pid {os.getpid()}")

    async def send(self, frame: bytes) -> None:
        async with self._send_lock:
            with map_transport_errors("writing to stdout"):
                await self._stdout.send_all(encode_frame(frame))

    async def receive(self) -> bytes:
        while not self._frames:
            if self._closed:
                await trio.lowlevel.checkpoint()
                raise TransportClosed("the fake server's stdio transport was closed")
            if self._eof:
                await trio.lowlevel.checkpoint()
                raise TransportClosed("stdin reached end of file")
            with map_transport_errors("reading stdin"):
                data = await self._stdin.receive_some(65536)
            if data:
                self._feed(bytes(data))
                continue
            self._eof = True
            self._feed(b"")
            last = self._framer.feed_eof()
            if last is not None:
                self._frames.append(last)
        return self._frames.popleft()

    def _feed(self, data: bytes) -> None:
        while True:
            try:
                self._frames.extend(self._framer.feed(data))
                return
            except FrameTooLarge as exc:
                self._frames.extend(getattr(exc, "frames_before", ()))
                os.write(2, f"fake server: frame skipped: {exc}\n".encode())
                data = b""

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            with trio.CancelScope(shield=True):
                await self._stdin.aclose()
                await self._stdout.aclose()
        await trio.lowlevel.checkpoint()


async def _serve_stdio(fake: FakeServer, banner: str | None) -> None:
    if banner:
        os.write(2, banner.encode() + b"\n")
    transport = _StdioServerTransport(
        trio.lowlevel.FdStream(os.dup(0)),
        trio.lowlevel.FdStream(os.dup(1)),
        NdjsonFramer(max_frame_bytes=DEFAULT_MAX_FRAME_BYTES),
    )
    await fake.serve_transport(transport)


def _load_spec(args: argparse.Namespace) -> Any:
    if args.spec_json is not None:
        return json.loads(args.spec_json)
    with open(args.spec, encoding="utf-8") as file:
        return json.load(file)


def main(argv: Sequence[str] | None = None) -> int:
    """Serve a fake MCP server on stdin/stdout: ``python -m trio_mcp.actors.testing --spec
    FILE`` or ``--spec-json TEXT`` (see :meth:`FakeServer.from_spec` for the format).

    Returns 0 when stdin reaches end of file, 2 (with a message on stderr) when the spec cannot
    be read or is invalid.
    """
    parser = argparse.ArgumentParser(
        prog="python -m trio_mcp.actors.testing",
        description="A scriptable fake MCP server speaking newline-delimited JSON on stdio.",
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--spec", help="path of a JSON spec file")
    source.add_argument("--spec-json", help="the JSON spec itself")
    args = parser.parse_args(argv)
    try:
        spec = _load_spec(args) if (args.spec or args.spec_json) else {}
        fake = FakeServer.from_spec(spec)
    except (OSError, ValueError, ConfigError) as exc:
        print(f"fake server: cannot use the spec: {exc}", file=sys.stderr)
        return 2
    fake.exit_process_on_crash = True
    banner = spec.get("stderr_banner") if isinstance(spec, Mapping) else None
    trio.run(_serve_stdio, fake, banner)
    return 0
