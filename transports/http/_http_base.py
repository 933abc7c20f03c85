"""What the two HTTP transports share: their parameters, header and URL hygiene, the mapping of
httpx's exceptions, and the machinery of a message-level transport over HTTP requests.

:class:`HttpParameters` configures both the Streamable HTTP transport (:mod:`._http`) and the
legacy HTTP+SSE transport (:mod:`._sse_client`). Over HTTP, one connection to a server is many
HTTP requests; whatever the server sends back (JSON bodies, the events of SSE streams) goes into
one bounded queue that :meth:`HttpTransportBase.receive` reads, in the order it arrived.

Per-request failures (an error status answering a POSTed request, a POST that could not be sent,
a response stream that broke before its response) fail *that* request, not the connection: the
transport reports them to the handler that its user registers with
:meth:`HttpTransportBase.set_request_failure_handler`. A user that registers none gets the first
such failure as the end of the connection instead, so a failure is never silent.

Secrets: configured header values never appear in ``repr()``, logs or error messages (headers
whose names look secret are logged as ``***``), nor do the session id, the query string or the
user information of a URL (see :func:`display_url`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from types import MappingProxyType
from typing import Any, Final, TypeAlias

import attrs
import httpx
import trio

from ...protocol._errors import (
    ConnectError,
    ConnectTimeout,
    FrameTooLarge,
    HttpStatusError,
    InvalidMessage,
    LocalProtocolError,
    McpError,
    McpTransportConfigError,
    TransportClosed,
    TransportError,
)
from ...protocol._framing import DEFAULT_MAX_FRAME_BYTES
from ...protocol._jsonrpc import (
    CANCELLED_NOTIFICATION,
    Notification,
    Request,
    RequestId,
    parse_message,
)
from ...protocol._sse import SseEvent, SseParser
from .._base import TransportInfo

__all__ = [
    "HttpParameters",
    "HttpStatistics",
    "RequestFailureHandler",
    "display_url",
    "redacted_headers",
]

logger = logging.getLogger("trio_mcp.transports.http")

#: The ``Accept`` header of every POST (the specification requires both types).
ACCEPT_POST: Final = "application/json, text/event-stream"
#: The ``Accept`` header of every GET (an SSE stream).
ACCEPT_SSE: Final = "text/event-stream"
#: Frames (and wake-up marks) waiting for ``receive()``. When full, the tasks reading response
#: bodies stop reading, so the server is slowed down (backpressure).
INBOX_SIZE: Final = 16
#: How much of an error answer's body is read, and how much of it an error message quotes.
_EXCERPT_BYTES: Final = 4096
_EXCERPT_CHARS: Final = 300
#: A bound on closing the HTTP client (its pooled connections).
_CLIENT_CLOSE_BUDGET: Final = 1.0
#: A bound on closing one response (and unwinding httpx's iterators over its body).
_UNWIND_BUDGET: Final = 1.0
#: When a response body is no longer needed (the answers it carried arrived, or it is the empty
#: body of a 202), its rest is read for at most this long and at most ``_EXCERPT_BYTES``, so that
#: a body that ends there leaves its connection to the pool: closing a response before its end
#: closes the connection, and the next request pays for a new one.
_FINISH_BUDGET: Final = 0.05

#: ``callback(request_id, error, sent)``: the request ``request_id`` failed with ``error``;
#: ``sent`` says whether it may have reached the server. Synchronous; must not block.
RequestFailureHandler: TypeAlias = Callable[[RequestId, McpError, bool], None]

_SECRET_HEADER = re.compile(
    r"auth|cookie|token|secret|passw|api[-_]?key|apikey|key|credential|private|session|signature",
    re.IGNORECASE,
)
_FORBIDDEN_IN_HEADER = re.compile(r"[\r\n\x00]")
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


# --------------------------------------------------------------------------- hygiene


def looks_secret_header(name: str) -> bool:
    """Whether a header's name suggests that its value is a secret (``Authorization``,
    ``X-Api-Key``, ``Cookie``, ``Mcp-Session-Id``...)."""
    return bool(_SECRET_HEADER.search(name))


def redacted_headers(headers: Mapping[str, str] | httpx.Headers) -> dict[str, str]:
    """A copy of ``headers`` that is safe to log: values of secret-looking headers are ``***``."""
    return {name: "***" if looks_secret_header(name) else value for name, value in headers.items()}


def log_request(what: str, headers: httpx.Headers) -> None:
    """Log at debug level that ``what`` is sent with ``headers`` (redacted); the redacted copy is
    made only when debug logging is on."""
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug("%s (headers %s)", what, redacted_headers(headers))


def display_url(url: httpx.URL | str) -> str:
    """``url`` without what may be secret: ``scheme://host[:port]/path``, with ``?...`` standing
    for a query string and no user information. Never raises."""
    try:
        parsed = url if isinstance(url, httpx.URL) else httpx.URL(url)
    except (httpx.InvalidURL, TypeError):
        return "<invalid URL>"
    host = parsed.host
    if ":" in host:
        host = f"[{host}]"
    port = f":{parsed.port}" if parsed.port is not None else ""
    query = "?..." if parsed.query else ""
    return f"{parsed.scheme}://{host}{port}{parsed.path}{query}"


def excerpt(data: bytes) -> str:
    """The start of a response body for an error message: decoded, whitespace collapsed, cut."""
    text = " ".join(data.decode("utf-8", "replace").split())
    if len(text) > _EXCERPT_CHARS:
        return text[:_EXCERPT_CHARS] + "..."
    return text


def content_type(response: httpx.Response) -> str:
    """The media type of a response (``text/event-stream``), lower case, without parameters."""
    value: str = response.headers.get("content-type", "")
    return value.split(";")[0].strip().lower()


class _Body(httpx.AsyncByteStream):
    """A request body whose iterator is not an async generator: httpx's own body is one, and an
    upload cut short by a cancellation would leave it to the garbage collector (which trio
    reports as a ResourceWarning)."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def __aiter__(self) -> AsyncIterator[bytes]:
        return _OneChunk(self._data)


class _OneChunk:
    def __init__(self, data: bytes) -> None:
        self._data: bytes | None = data

    def __aiter__(self) -> _OneChunk:
        return self

    async def __anext__(self) -> bytes:
        if self._data is None:
            raise StopAsyncIteration
        data, self._data = self._data, None
        return data


@asynccontextmanager
async def open_stream(
    client: httpx.AsyncClient,
    method: str,
    url: httpx.URL,
    *,
    headers: httpx.Headers,
    content: bytes | None = None,
    timeout: httpx.Timeout | None = None,
) -> AsyncIterator[httpx.Response]:
    """Send one request and yield its response with the body not read yet (``client.stream``,
    made safe against cancellation: see :class:`_Body` and :func:`consume`). The response is
    closed when the block ends, shielded from cancellation."""
    request = client.build_request(
        method,
        url,
        headers=headers,
        content=content,
        timeout=timeout if timeout is not None else httpx.USE_CLIENT_DEFAULT,
    )
    if content is not None:
        request.stream = _Body(content)
    response = await client.send(request, stream=True)
    try:
        yield response
    finally:
        if not response.is_closed:  # usually it is: reading a body to its end closes it
            with trio.CancelScope(shield=True, deadline=trio.current_time() + _UNWIND_BUDGET):
                await response.aclose()


async def consume(
    response: httpx.Response, take: Callable[[bytes], Awaitable[bool]], *, finish: bool = False
) -> bool:
    """Pass each chunk of ``response``'s body to ``take`` until it returns False or the body
    ends; return False when ``take`` stopped it. httpx's errors (and ``take``'s) pass through.

    ``finish``: when ``take`` stops the loop, the rest of the body is read and dropped as
    :func:`discard_body` does (briefly, never raising), so that the connection can be reused.

    However the loop ends (``take`` stopped it, raised, or the task was cancelled), the response
    is closed and httpx's chain of async generators is driven to its end, shielded and bounded:
    left suspended, they would be finalized by the garbage collector, which trio reports.
    """
    chunks = response.aiter_bytes()
    ended = False
    try:
        async for chunk in chunks:
            if not await take(chunk):
                if finish:
                    ended = await _read_rest(chunks)
                return False
        ended = True
        return True
    finally:
        await _close_body(response, chunks, ended)


async def discard_body(response: httpx.Response) -> bool:
    """Read and drop the body of a response whose content is not needed (the empty body of a
    202, the rest of an SSE stream after its answers), then close the response.

    Reads for at most ``_FINISH_BUDGET`` seconds and at most ``_EXCERPT_BYTES`` bytes: a body
    that ends within them leaves its connection to the pool for the next request; one that does
    not is cut (its connection is closed, as closing an unread response does). Returns whether
    the body ended. Never raises but for a cancellation: httpx's errors mean the body did not
    end.
    """
    chunks = response.aiter_bytes()
    ended = False
    try:
        ended = await _read_rest(chunks)
        return ended
    finally:
        await _close_body(response, chunks, ended)


async def _read_rest(chunks: AsyncIterator[bytes]) -> bool:
    """Drop what is left of a body (see :func:`discard_body`); True when it ended."""
    left = _EXCERPT_BYTES
    with (
        trio.move_on_after(_FINISH_BUDGET),
        contextlib.suppress(httpx.HTTPError, httpx.StreamError),
    ):
        async for chunk in chunks:
            left -= len(chunk)
            if left < 0:
                return False
        return True
    return False


async def _close_body(response: httpx.Response, chunks: AsyncIterator[bytes], ended: bool) -> None:
    """Close ``response`` and drive ``chunks`` (its body's iterator) to its end, shielded and
    bounded (see :func:`consume`). ``ended``: ``chunks`` was iterated to its end, so httpx has
    closed the response already and nothing is left to do (the common case, kept cheap)."""
    if ended and response.is_closed:
        return
    with trio.CancelScope(shield=True, deadline=trio.current_time() + _UNWIND_BUDGET):
        await response.aclose()
        # What httpx had buffered still comes out; then the closed stream raises.
        with contextlib.suppress(StopAsyncIteration, httpx.HTTPError, httpx.StreamError):
            while True:
                await chunks.__anext__()


async def read_excerpt(response: httpx.Response) -> str:
    """Read at most a few KiB of ``response``'s body and return :func:`excerpt` of it. A body
    that cannot be read gives ``""``."""
    data = bytearray()

    async def take(chunk: bytes) -> bool:
        data.extend(chunk)
        return len(data) < _EXCERPT_BYTES

    with contextlib.suppress(httpx.HTTPError):
        await consume(response, take)
    return excerpt(bytes(data[:_EXCERPT_BYTES]))


async def read_body(response: httpx.Response, limit: int, what: str) -> bytes:
    """Read ``response``'s whole body, refusing one over ``limit`` bytes.

    Raises :class:`FrameTooLarge` (saying ``what`` the body is) when the body, or its announced
    length, is over ``limit``; httpx's errors pass through.
    """
    announced = response.headers.get("content-length", "")
    if announced.isdigit() and int(announced) > limit:
        raise _too_large(what, limit)
    parts: list[bytes] = []
    size = 0

    async def take(chunk: bytes) -> bool:
        nonlocal size
        size += len(chunk)
        if size > limit:
            return False
        parts.append(chunk)
        return True

    if not await consume(response, take):
        raise _too_large(what, limit)
    return b"".join(parts)


def _too_large(what: str, limit: int) -> FrameTooLarge:
    return FrameTooLarge(
        f"{what} is larger than {limit} bytes (max_frame_bytes); if the server legitimately "
        "sends bigger messages, raise max_frame_bytes in its config",
        limit=limit,
    )


def status_error(what: str, response: httpx.Response, body: str) -> HttpStatusError:
    """The :class:`HttpStatusError` for a response whose status is not a success: it says
    ``what`` was refused, the status, where a redirect points (redirects are not followed), and
    quotes ``body`` (an excerpt)."""
    status = response.status_code
    phrase = response.reason_phrase or httpx.codes.get_reason_phrase(status)
    message = f"{what}: the server answered HTTP {status}" + (f" {phrase}" if phrase else "")
    location = response.headers.get("location")
    if 300 <= status < 400 and location:
        try:
            target = display_url(response.url.join(location))
        except httpx.InvalidURL:
            target = "<invalid URL>"
        message += f" (a redirect to {target}, which is not followed: configure that URL instead)"
    if body:
        message += f": {body}"
    return HttpStatusError(message, status=status, body=body)


@contextmanager
def map_http_errors(what: str) -> Iterator[None]:
    """Turn httpx's exceptions raised inside the block into ours, once, with the cause chained.

    ``what`` says what was being done (``"POST tools/call to http://host/mcp"``) and starts the
    message. A failure to connect (the request never left) becomes :class:`ConnectTimeout` or
    :class:`ConnectError`; any other transport failure (timeouts, a connection that broke, a
    malformed HTTP answer) becomes :class:`TransportClosed`. Everything else, including
    :class:`trio.Cancelled`, passes through untouched.
    """
    try:
        yield
    except httpx.ConnectTimeout as exc:
        raise ConnectTimeout(f"{what} failed: connecting timed out") from exc
    except httpx.ConnectError as exc:
        raise ConnectError(f"{what} failed: could not connect ({_describe(exc)})") from exc
    except httpx.TimeoutException as exc:
        raise TransportClosed(f"{what} failed: {type(exc).__name__} (timed out)") from exc
    except httpx.HTTPError as exc:
        raise TransportClosed(f"{what} failed: {_describe(exc)}") from exc


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# --------------------------------------------------------------------------- parameters


def _to_headers(value: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(value))


def _redact_repr(value: Mapping[str, str]) -> str:
    return "{" + ", ".join(f"{name!r}: '***'" for name in value) + "}"


def _seconds(value: object, *, allow_none: bool = False) -> bool:
    """Whether ``value`` is a valid number of seconds (> 0, finite)."""
    if value is None:
        return allow_none
    return (
        not isinstance(value, bool)
        and isinstance(value, int | float)
        and math.isfinite(value)
        and value > 0
    )


@attrs.frozen(kw_only=True)
class HttpParameters:
    """How to reach one server over HTTP (Streamable HTTP, or the legacy HTTP+SSE transport).

    - ``url``: the MCP endpoint (Streamable HTTP) or the SSE endpoint (HTTP+SSE); ``http`` or
      ``https``.
    - ``headers``: sent with every HTTP request (``Authorization``, API keys...). Their values
      never appear in ``repr()`` or logs.
    - ``max_frame_bytes``: the largest message (JSON body or SSE event) accepted from the server.
    - ``connect_timeout``: seconds to open a TCP (and TLS) connection; for HTTP+SSE also the
      wait for the ``endpoint`` event.
    - ``ack_timeout``: seconds to wait for the server to accept a notification or a response we
      POST (it answers 202 at once when it is healthy).
    - ``read_timeout``: seconds a response stream may stay silent; ``None`` (the default) leaves
      waiting to the call's own timeout, since a long tool call may be silent for long.
    - ``close_timeout``: the bound on the ``DELETE`` that ends the session on close.
    - ``reconnect_delay``: seconds to wait before resuming a broken SSE stream when the server
      gave no ``retry`` field; ``max_resume_attempts``: how many attempts in a row may fail to
      bring anything new before a call whose stream broke is given up (outcome unknown).
    - ``max_in_flight``: requests whose answers may be awaited at once (each holds an HTTP
      connection); a further ``send`` waits for a free slot.
    - ``legacy_fallback``: when the first ``initialize`` POST is answered 400, 404 or 405, try
      the legacy HTTP+SSE transport at the same URL (the specification's
      backward-compatibility rule).

    Raises :class:`McpTransportConfigError` listing every invalid field.
    """

    url: str
    headers: Mapping[str, str] = attrs.field(
        default=MappingProxyType({}), converter=_to_headers, repr=_redact_repr, hash=False
    )
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    connect_timeout: float = 30.0
    ack_timeout: float = 30.0
    read_timeout: float | None = None
    close_timeout: float = 2.0
    reconnect_delay: float = 0.5
    max_resume_attempts: int = 5
    max_in_flight: int = 64
    legacy_fallback: bool = True

    def __attrs_post_init__(self) -> None:
        problems = self._problems()
        if problems:
            raise McpTransportConfigError(
                "invalid HTTP server settings: " + "; ".join(f"{k}: {m}" for k, m in problems),
                problems=problems,
            )

    def _problems(self) -> tuple[tuple[str, str], ...]:
        problems: list[tuple[str, str]] = []
        try:
            parsed = httpx.URL(self.url) if isinstance(self.url, str) else None
        except httpx.InvalidURL:
            parsed = None
        if parsed is None or parsed.scheme not in ("http", "https") or not parsed.host:
            problems.append(("url", "must be an http:// or https:// URL with a host"))
        for name, value in self.headers.items():
            if not isinstance(name, str) or not _TOKEN.match(name):
                problems.append((f"headers[{name!r}]", "a header name must be an HTTP token"))
            elif not isinstance(value, str) or _FORBIDDEN_IN_HEADER.search(value):
                problems.append((f"headers[{name!r}]", "the value must be a string without CR/LF"))
        for name in ("max_frame_bytes", "max_resume_attempts", "max_in_flight"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                problems.append((name, f"must be a positive integer, got {value!r}"))
        for name in ("connect_timeout", "ack_timeout", "close_timeout", "reconnect_delay"):
            if not _seconds(getattr(self, name)):
                problems.append((name, "must be a finite number of seconds > 0"))
        if not _seconds(self.read_timeout, allow_none=True):
            problems.append(("read_timeout", "must be a finite number of seconds > 0, or None"))
        return tuple(problems)


def make_client(params: HttpParameters) -> httpx.AsyncClient:
    """The one httpx client of a transport: no redirects followed (a redirect is reported as an
    error naming its target, so that configured headers never go to another address)."""
    timeout = httpx.Timeout(
        connect=params.connect_timeout,
        read=params.read_timeout,
        write=params.connect_timeout,
        pool=params.connect_timeout,
    )
    limits = httpx.Limits(max_connections=params.max_in_flight + 8, max_keepalive_connections=8)
    return httpx.AsyncClient(timeout=timeout, limits=limits, follow_redirects=False)


def ack_timeout(params: HttpParameters) -> httpx.Timeout:
    """The timeouts of a POST whose answer is an acknowledgement (202), not a result."""
    return httpx.Timeout(
        connect=params.connect_timeout,
        read=params.ack_timeout,
        write=params.connect_timeout,
        pool=params.connect_timeout,
    )


# --------------------------------------------------------------------------- frames


@attrs.frozen(kw_only=True)
class Outgoing:
    """What a frame we send holds: the ids of its requests, the method of its first message
    (``None`` for a response), and the request ids that its ``notifications/cancelled`` cancel."""

    requests: tuple[RequestId, ...]
    method: str | None
    cancels: tuple[RequestId, ...] = ()

    @property
    def label(self) -> str:
        """A short name for logs and messages: the method, or ``"a response"``."""
        return self.method if self.method is not None else "a response"


def describe_outgoing(frame: bytes) -> Outgoing:
    """Say what a frame we are about to send is. Raises :class:`LocalProtocolError` when it is not
    a JSON-RPC message (a bug on our side)."""
    try:
        # Our own frame: the depth limit is for what servers send.
        parsed = parse_message(frame, allow_batch=True, max_depth=None)
    except InvalidMessage as exc:
        raise LocalProtocolError(f"cannot send a frame that is not JSON-RPC: {exc}") from None
    messages = parsed if isinstance(parsed, tuple) else (parsed,)
    requests: list[RequestId] = []
    cancels: list[RequestId] = []
    method: str | None = None
    for index, message in enumerate(messages):
        if isinstance(message, Request):
            requests.append(message.id)
        if isinstance(message, Request | Notification) and index == 0:
            method = message.method
        if isinstance(message, Notification) and message.method == CANCELLED_NOTIFICATION:
            target = (message.params or {}).get("requestId")
            if isinstance(target, int | str) and not isinstance(target, bool):
                cancels.append(target)
    return Outgoing(requests=tuple(requests), method=method, cancels=tuple(cancels))


_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
#: For an item with a lone surrogate (``"\\ud800"`` is valid JSON, but not encodable as UTF-8).
_dumps_ascii = json.JSONEncoder(separators=(",", ":")).encode


def _item_frame(item: Any) -> bytes:
    try:
        return _dumps(item).encode("utf-8")
    except UnicodeEncodeError:
        return _dumps_ascii(item).encode("ascii")


def split_incoming(data: bytes) -> list[tuple[bytes, RequestId | None]]:
    """Cut what the server sent (a JSON body, an SSE event's data) into frames, one message each.

    A JSON array (a 2025-03-26 batch) gives one frame per item. Each frame comes with the id it
    answers when it is a response, else ``None``. Data that is not UTF-8 JSON, or that cannot be
    cut (nested too deeply for the stack here), is passed on as one frame (the session reports
    it). Never raises, whatever the bytes.
    """
    try:
        value = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return [(data, None)]
    if type(value) is list and value:
        try:
            return [(_item_frame(item), _answered_id(item)) for item in value]
        except RecursionError:
            return [(data, None)]
    return [(data, _answered_id(value))]


def _answered_id(value: Any) -> RequestId | None:
    if type(value) is not dict or "method" in value:
        return None
    if "result" not in value and "error" not in value:
        return None
    rid = value.get("id")
    if isinstance(rid, int | str) and not isinstance(rid, bool):
        return rid
    return None


def parse_events(
    parser: SseParser, chunk: bytes, on_oversized: Callable[[FrameTooLarge], None]
) -> list[SseEvent]:
    """Feed ``chunk`` to ``parser`` and return the events it completes. An oversized event is
    skipped (the parser resynchronises at the next event) and reported to ``on_oversized``."""
    events: list[SseEvent] = []
    data = chunk
    while True:
        try:
            events.extend(parser.feed(data))
            return events
        except FrameTooLarge as exc:
            events.extend(exc.events_before)
            on_oversized(exc)
            data = b""


# --------------------------------------------------------------------------- statistics


@attrs.frozen(kw_only=True)
class HttpStatistics:
    """A snapshot of an HTTP transport.

    ``mode`` is ``"streamable"`` (Streamable HTTP) or ``"legacy"`` (HTTP+SSE, configured or
    fallen back to). ``has_session`` says whether the server gave a session id (the id itself is
    never shown); ``protocol_version`` is what the ``MCP-Protocol-Version`` header carries.
    ``posts``, ``gets`` and ``deletes`` count HTTP requests by method; ``resumptions`` the GETs
    that resumed a broken stream with ``Last-Event-ID``; ``frames_received`` the messages
    returned by ``receive()``; ``in_flight`` the requests whose answers are awaited now;
    ``held`` the frames held back since the session expired; ``session_expiries`` how often the
    server ended our session; ``get_stream`` the state of the stream for server-initiated
    messages (``"off"``, ``"connecting"``, ``"open"``, ``"unsupported"``, ``"failed"``).
    """

    mode: str
    has_session: bool
    protocol_version: str | None
    posts: int
    gets: int
    deletes: int
    resumptions: int
    frames_received: int
    in_flight: int
    held: int
    session_expiries: int
    get_stream: str


# --------------------------------------------------------------------------- the base


async def host_tasks(
    scope: trio.CancelScope, *, task_status: trio.TaskStatus[trio.Nursery]
) -> None:
    """Run a nursery for a transport's background tasks until ``scope`` is cancelled."""
    with scope:
        async with trio.open_nursery() as nursery:
            task_status.started(nursery)
            await trio.sleep_forever()


@attrs.define(eq=False)
class HttpTransportBase:
    """The machinery the HTTP transports share: the receive queue, the failure reporting, the
    request headers and the orderly close. Not a transport by itself."""

    _params: HttpParameters
    _client: httpx.AsyncClient
    _tasks: trio.Nursery
    _tasks_scope: trio.CancelScope
    _inbox_send: trio.MemorySendChannel[bytes | None] = attrs.field(init=False)
    _inbox_recv: trio.MemoryReceiveChannel[bytes | None] = attrs.field(init=False)
    _failure_handler: RequestFailureHandler | None = attrs.field(default=None, init=False)
    _protocol_version: str | None = attrs.field(default=None, init=False)
    _fatal: McpError | None = attrs.field(default=None, init=False)
    #: Whether the server has answered anything yet: before that, failing to reach it is a
    #: ConnectError, afterwards it means the server went away.
    _reached: bool = attrs.field(default=False, init=False)
    _closing: bool = attrs.field(default=False, init=False)
    _close_done: trio.Event = attrs.field(factory=trio.Event, init=False)
    _posts: int = attrs.field(default=0, init=False)
    _gets: int = attrs.field(default=0, init=False)
    _deletes: int = attrs.field(default=0, init=False)
    _frames_received: int = attrs.field(default=0, init=False)

    def __attrs_post_init__(self) -> None:
        self._inbox_send, self._inbox_recv = trio.open_memory_channel[bytes | None](INBOX_SIZE)

    # ------------------------------------------------------------------ the contract

    @property
    def info(self) -> TransportInfo:
        """What this transport is connected to (overridden)."""
        raise NotImplementedError  # pragma: no cover - every transport overrides it

    @property
    def protocol_version(self) -> str | None:
        """The version sent as ``MCP-Protocol-Version``, once the session has set it."""
        return self._protocol_version

    def set_protocol_version(self, version: str) -> None:
        """The handshake settled on ``version``: send it as ``MCP-Protocol-Version`` on every
        later request."""
        self._protocol_version = version

    def set_request_failure_handler(self, handler: RequestFailureHandler | None) -> None:
        """Register ``handler(request_id, error, sent)``, called synchronously when one request
        fails on its own (an error status, a POST that could not be sent, a response stream that
        broke before its response). Without a handler such a failure ends the connection."""
        self._failure_handler = handler

    async def receive(self) -> bytes:
        """Return the next message the server sent, on any stream, in arrival order.

        Raises :class:`TransportClosed` after :meth:`aclose` or once the connection ended (the
        message says why: the server cannot be reached any more, its event stream ended...), and
        :class:`ConnectError` when the server could not be reached at all. Messages that arrived
        before the end are returned first. The Streamable HTTP transport raises
        :class:`SessionExpired` (a :class:`TransportClosed`) once when the server ended the
        session, and goes on afterwards; the HTTP+SSE transport ends with
        :class:`FrameTooLarge` when the server sent an event over ``max_frame_bytes``.
        """
        while True:
            if self._closing:
                raise TransportClosed(self._closed_message())
            notice = self._take_notice()
            if notice is not None:
                raise notice
            try:
                item = self._inbox_recv.receive_nowait()
            except trio.WouldBlock:
                if self._fatal is not None:
                    raise self._fatal from None
                try:
                    item = await self._inbox_recv.receive()
                except (trio.ClosedResourceError, trio.EndOfChannel):
                    raise TransportClosed(self._closed_message()) from None
            except (trio.ClosedResourceError, trio.EndOfChannel):
                raise TransportClosed(self._closed_message()) from None
            if item is not None:
                self._frames_received += 1
                return item

    async def aclose(self) -> None:
        """Close the connection: stop every stream and request in flight, end the session when
        the transport has one, close the HTTP client. Idempotent (a concurrent second call waits
        for the first), shielded from cancellation and bounded in time; never raises for a
        misbehaving server."""
        if self._closing:
            await self._close_done.wait()
            return
        self._closing = True
        self._inbox_recv.close()
        try:
            with trio.CancelScope(shield=True):
                self._tasks_scope.cancel()
                await self._shut_down()
                with trio.move_on_after(_CLIENT_CLOSE_BUDGET):
                    await self._client.aclose()
        finally:
            self._close_done.set()

    # ------------------------------------------------------------------ for subclasses

    async def _shut_down(self) -> None:
        """Transport-specific closing (the DELETE of a session). Shielded by the caller."""

    def _take_notice(self) -> McpError | None:
        """An error ``receive()`` raises before any queued frame (overridden)."""
        return None

    def _response_arrived(self, request_id: RequestId) -> None:
        """A response to ``request_id`` was queued (overridden)."""

    def _closed_message(self) -> str:
        return f"the transport to {self.info.detail} was closed; open a new one"

    def _check_open(self) -> None:
        if self._closing:
            raise TransportClosed(self._closed_message())
        if self._fatal is not None:
            raise TransportClosed(f"the connection ended: {self._fatal}")

    def _headers(
        self,
        *,
        accept: str,
        json_body: bool = False,
        session_id: str | None = None,
        last_event_id: str | None = None,
    ) -> httpx.Headers:
        headers = httpx.Headers(dict(self._params.headers))
        headers["Accept"] = accept
        if json_body:
            headers["Content-Type"] = "application/json"
        if self._protocol_version is not None:
            headers["MCP-Protocol-Version"] = self._protocol_version
        if session_id is not None:
            headers["Mcp-Session-Id"] = session_id
        if last_event_id:
            headers["Last-Event-ID"] = last_event_id
        return headers

    async def _deliver(self, data: bytes) -> bool:
        """Queue what the server sent (split into messages) for ``receive()``. Returns False when
        nobody receives any more (the transport is closing)."""
        for frame, answered in split_incoming(data):
            try:
                await self._inbox_send.send(frame)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return False
            if answered is not None:
                self._response_arrived(answered)
        return True

    def _wake(self) -> None:
        """Wake a ``receive()`` that waits, so that it sees a notice or the end."""
        # A full queue wakes it anyway; a closed one has nobody to wake.
        with contextlib.suppress(
            trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError
        ):
            self._inbox_send.send_nowait(None)

    def _end(self, error: McpError) -> None:
        """The connection is over (the first reason wins): ``receive()`` raises ``error`` once the
        frames queued before it are taken."""
        if self._fatal is None and not self._closing:
            logger.warning("%s: the connection ended: %s", self.info, error)
            self._fatal = error
            self._wake()

    def _fail(
        self, ids: tuple[RequestId, ...] | set[RequestId], error: McpError, sent: bool
    ) -> None:
        """Fail the requests ``ids`` alone (through the failure handler)."""
        for request_id in tuple(ids):
            logger.info("%s: request %r failed: %s", self.info, request_id, error)
            if self._failure_handler is None:
                self._end(
                    TransportClosed(
                        f"{error} (the transport's user takes no per-request failures, so the "
                        "connection ends)"
                    )
                )
                return
            self._failure_handler(request_id, error, sent)

    def _unreachable(self, error: TransportError) -> McpError:
        """The error that ends the connection when the server cannot be connected to."""
        if not self._reached:
            return error
        return TransportClosed(
            f"the server at {self.info.detail} cannot be reached any more ({error}); it may have "
            "stopped or restarted"
        )
