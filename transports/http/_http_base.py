"""What the two HTTP transports share: their parameters, header and URL hygiene, the mapping of
httpx's exceptions, the machinery of a message-level transport over HTTP requests, and the
opener that runs one (:func:`open_transport`).

:class:`HttpParameters` configures both the Streamable HTTP transport (:mod:`._http`) and the
legacy HTTP+SSE transport (:mod:`._sse_client`). Over HTTP, one connection to a server is many
HTTP requests; both transports are actors in the manner of the contract
(:mod:`trio_mcp.transports._base`):

- **Down**: ``send`` / ``send_nowait`` put a frame into the transport's outbox (a
  :class:`~trio_mcp.transports._channel.ByteChannel`, bounded in bytes), and so do the ability
  methods (``set_protocol_version``; for Streamable HTTP ``send_now``, ``resume``,
  ``discard_held``, ``end`` and ``send_with_headers``), so that they apply in order with the
  frames. One task of the
  transport, the *pump*, takes the outbox's items in order and applies each: it POSTs a frame
  itself (HTTP+SSE: every frame; Streamable HTTP: notifications and responses), or starts a
  task for it (a Streamable HTTP request, which may wait there for a free slot).
- **Up**: whatever the server sends (a JSON body, each event of an SSE stream; a JSON array split
  into one frame per message) is put into the transport's sink, waiting for room: a full sink
  stops the tasks that read response bodies, so the server is slowed down (backpressure). What
  the transport learns on its own goes there too, as events: a request that failed on its own
  (:class:`~trio_mcp.transports._base.RequestFailed`: an error status answering a POSTed
  request, a POST that could not be sent, a response stream that broke before its response), the
  end of the server's session (:class:`~trio_mcp.transports._base.SessionExpiredNotice`), and
  last of all :class:`~trio_mcp.transports._base.ConnectionEnded`, after which the sink is
  closed. The transport never calls its user's code.

Secrets: configured header values never appear in ``repr()``, logs or error messages (headers
whose names look secret are logged as ``***``), nor do the session id, the query string or the
user information of a URL (see :func:`display_url`). User information in the configured URL
goes out as an ``Authorization: Basic`` header, never in a request's URL, and the logs of httpx
and httpcore go through the filter of :mod:`trio_mcp.transports._redact`, installed when a
transport opens.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import math
import re
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from types import MappingProxyType
from typing import Any, Final, TypeAlias, TypeVar

import attrs
import httpx
import trio

from ...protocol._errors import (
    AuthorizationError,
    ConnectError,
    ConnectTimeout,
    FrameTooLarge,
    HttpStatusError,
    InvalidMessage,
    LocalProtocolError,
    McpError,
    McpTransportConfigError,
    ServerDisconnected,
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
from .. import _retry
from .._base import (
    ConnectionEnded,
    FrameSink,
    InboxReader,
    RequestCredentials,
    RequestFailed,
    TransportEvent,
    TransportInfo,
    collapse_exception_group,
    open_inbox,
)
from .._channel import DEFAULT_MAILBOX_BYTES, ITEM_OVERHEAD, ByteChannel
from .._proxy import proxy_problem
from .._redact import install_log_redaction, redact_url
from .._tls import (
    TLS_KEYS,
    plaintext_problem,
    tls_context,
    tls_failure_hint,
    tls_refusal_hint,
    warn_plaintext,
)
from ._h1 import H1Pool, HttpResponse

__all__ = [
    "HttpParameters",
    "HttpStatistics",
    "display_url",
    "redacted_headers",
]

logger = logging.getLogger("trio_mcp.transports.http")

#: The ``Accept`` header of every POST (the specification requires both types).
ACCEPT_POST: Final = "application/json, text/event-stream"
#: The ``Accept`` header of every GET (an SSE stream).
ACCEPT_SSE: Final = "text/event-stream"
#: The budget of a transport's outbox: frames (and ability calls) given to it and not yet taken
#: by its pump. When it is full, ``send`` waits and ``send_nowait`` raises ``trio.WouldBlock``.
OUTBOX_BYTES: Final = DEFAULT_MAILBOX_BYTES
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

_SECRET_HEADER = re.compile(
    r"auth|cookie|token|secret|passw|api[-_]?key|apikey|key|credential|private|session|signature",
    re.IGNORECASE,
)
_FORBIDDEN_IN_HEADER = re.compile(r"[\r\n\x00]")
#: A header name (RFC 9110 token; matched whole: ``$`` would let a final newline through), and
#: a header value of one frame's own headers: printable ASCII and tabs, without whitespace at
#: either end.
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", re.ASCII)
_HEADER_VALUE = re.compile(r"(?:[\x21-\x7e](?:[\t\x20-\x7e]*[\x21-\x7e])?)?", re.ASCII)
#: Headers the transport sets itself (lower case): a frame's own headers may not replace them.
_TRANSPORT_HEADERS: Final = frozenset(
    {
        "accept",
        "connection",
        "content-length",
        "content-type",
        "host",
        "last-event-id",
        "mcp-session-id",
        "transfer-encoding",
    }
)


# --------------------------------------------------------------------------- hygiene


def looks_secret_header(name: str) -> bool:
    """Whether a header's name suggests that its value is a secret (``Authorization``,
    ``X-Api-Key``, ``Cookie``, ``Mcp-Session-Id``...)."""
    return bool(_SECRET_HEADER.search(name))


def checked_request_headers(headers: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """``headers`` for one frame's POST, checked and copied (the caller may change its mapping
    afterwards). Raises :class:`LocalProtocolError` naming the header when a name is not an HTTP
    token, is one the transport sets itself (``Accept``, ``Content-Type``, ``Mcp-Session-Id``,
    ``Last-Event-ID``...), or comes twice ignoring case, or when a value is not a string of
    printable ASCII and tabs without whitespace at either end (a CR or LF would split the
    request; a value with non-ASCII text must be encoded first: see
    :func:`~trio_mcp.protocol.encode_header_value`). The value is never quoted (it may be a
    secret)."""
    checked: list[tuple[str, str]] = []
    seen: set[str] = set()
    for name, value in headers.items():
        if not isinstance(name, str) or _HEADER_NAME.fullmatch(name) is None:
            raise LocalProtocolError(
                f"cannot send the header {name!r}: a header name is an HTTP token (ASCII "
                "letters, digits and !#$%&'*+-.^_`|~)"
            )
        folded = name.lower()
        if folded in _TRANSPORT_HEADERS:
            raise LocalProtocolError(
                f"cannot send the header {name!r} with one message: the transport sets it itself"
            )
        if folded in seen:
            raise LocalProtocolError(
                f"cannot send the header {name!r}: it is given twice (names ignore case)"
            )
        if not isinstance(value, str) or _HEADER_VALUE.fullmatch(value) is None:
            raise LocalProtocolError(
                f"cannot send the header {name!r}: its value must be printable ASCII (tabs "
                "allowed inside) without whitespace at either end, and no CR or LF; encode it "
                "first (=?base64?...?=)"
            )
        seen.add(folded)
        checked.append((name, value))
    return tuple(checked)


def redacted_headers(headers: Mapping[str, str] | httpx.Headers) -> dict[str, str]:
    """A copy of ``headers`` that is safe to log: values of secret-looking headers are ``***``."""
    return {name: "***" if looks_secret_header(name) else value for name, value in headers.items()}


def log_request(
    what: str, headers: httpx.Headers, credentials: RequestCredentials | None = None
) -> None:
    """Log at debug level that ``what`` is sent with ``headers`` (redacted; the values of a
    request's own credentials always, whatever their names); the redacted copy is made only
    when debug logging is on."""
    if logger.isEnabledFor(logging.DEBUG):
        shown = redacted_headers(headers)
        if credentials is not None:
            own = {name.lower() for name, _ in credentials.headers}
            shown = {name: "***" if name.lower() in own else v for name, v in shown.items()}
            what = f"{what} as {credentials.label!r}"
        logger.debug("%s (headers %s)", what, shown)


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


def content_type(response: HttpResponse) -> str:
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


class _SendingTrace:
    """httpcore's ``trace`` extension, reduced to one event: the request's headers start to be
    written (HTTP/1.1 or HTTP/2)."""

    __slots__ = ("_on_sending",)

    def __init__(self, on_sending: Callable[[], None]) -> None:
        self._on_sending = on_sending

    async def __call__(self, name: str, info: Mapping[str, Any]) -> None:
        if name.endswith(".send_request_headers.started"):
            self._on_sending()


@asynccontextmanager
async def open_stream(
    client: httpx.AsyncClient,
    method: str,
    url: httpx.URL,
    *,
    headers: httpx.Headers,
    content: bytes | None = None,
    timeout: httpx.Timeout | None = None,
    on_sending: Callable[[], None] | None = None,
    credentials: RequestCredentials | None = None,
    lane: Lane | None = None,
) -> AsyncIterator[HttpResponse]:
    """Send one request and yield its response with the body not read yet (``client.stream``,
    made safe against cancellation: see :class:`_Body` and :func:`consume`). The response is
    closed when the block ends, shielded from cancellation. ``credentials``: its ``auth``
    replaces the client's for this request (their headers are in ``headers`` already).

    ``lane``: the transport's HTTP/1.1 lane (see :class:`Lane`); the request goes through it
    rather than through ``client`` when its auth allows (:meth:`Lane.serves`).

    ``on_sending()`` is called (synchronously) when the request starts to go out on a
    connection: before that, a failure (no connection, no free one in the pool) or a
    cancellation means the server cannot have seen it."""
    response: HttpResponse
    auth = None if lane is None else lane.auth if credentials is None else credentials.auth
    if lane is not None and lane.serves(auth):
        response = await lane.send(
            method, url, headers, content, timeout=timeout, on_sending=on_sending, auth=auth
        )
    else:
        response = await _send_through_httpx(
            client, method, url, headers, content, timeout, on_sending, credentials
        )
    try:
        yield response
    finally:
        if not response.is_closed:  # usually it is: reading a body to its end closes it
            with trio.CancelScope(shield=True, deadline=trio.current_time() + _UNWIND_BUDGET):
                await response.aclose()


async def _send_through_httpx(
    client: httpx.AsyncClient,
    method: str,
    url: httpx.URL,
    headers: httpx.Headers,
    content: bytes | None,
    timeout: httpx.Timeout | None,
    on_sending: Callable[[], None] | None,
    credentials: RequestCredentials | None,
) -> httpx.Response:
    request = client.build_request(
        method,
        url,
        headers=headers,
        content=content,
        timeout=timeout if timeout is not None else httpx.USE_CLIENT_DEFAULT,
    )
    if content is not None:
        request.stream = _Body(content)
    if on_sending is not None:
        request.extensions["trace"] = _SendingTrace(on_sending)
    if credentials is None:
        return await client.send(request, stream=True)
    return await client.send(request, stream=True, auth=credentials.auth)


@attrs.define(eq=False)
class Lane:
    """The HTTP/1.1 lane of a Streamable HTTP transport: its requests go through ``pool`` (a
    small client on h11, :mod:`._h1`) instead of httpx's client, whose request path costs most
    of what a call costs the client. ``auth``: the transport's own (``HttpParameters.auth``),
    driven here as httpx's client drives it (:meth:`send`).

    A transport has one only when :func:`make_lane` says the pool can serve every request as
    httpx would (no proxy, the transport's own client); a request whose auth needs the bodies
    goes through httpx all the same (:meth:`serves`)."""

    pool: H1Pool
    auth: httpx.Auth | None

    @staticmethod
    def serves(auth: httpx.Auth | None) -> bool:
        """Whether a request with ``auth`` may go through the lane: its flow reads the status
        and headers of the answers only."""
        return auth is None or not (auth.requires_request_body or auth.requires_response_body)

    async def send(
        self,
        method: str,
        url: httpx.URL,
        headers: httpx.Headers,
        content: bytes | None,
        *,
        timeout: httpx.Timeout | None,
        on_sending: Callable[[], None] | None,
        auth: httpx.Auth | None,
    ) -> HttpResponse:
        """Send one request through the pool and return its response (body not read), after
        the requests its ``auth`` flow asked for (a 401 answered with a new token...): each
        answer the flow asks to retry is closed, and the flow is given an ``httpx.Response``
        with the status and headers of each answer (what flows read). The flow's errors (an
        :class:`AuthorizationError`) pass through."""
        pool = self.pool
        if auth is None:
            return await pool.send(
                method, url, headers, content, timeout=timeout, on_sending=on_sending
            )
        flow = auth.async_auth_flow(httpx.Request(method, url, headers=headers, content=content))
        try:
            request = await flow.__anext__()
            while True:
                body = request.content if request.content or content is not None else None
                response = await pool.send(
                    request.method,
                    request.url,
                    request.headers,
                    body,
                    timeout=timeout,
                    on_sending=on_sending,
                )
                try:
                    seen = httpx.Response(
                        response.status_code, headers=response.headers.raw, request=request
                    )
                    request = await flow.asend(seen)
                except StopAsyncIteration:
                    return response
                except BaseException:
                    with trio.CancelScope(shield=True):
                        await response.aclose()
                    raise
                # The flow sends the request again: this answer is done with.
                await discard_body(response)
        finally:
            with trio.CancelScope(shield=True):
                await flow.aclose()


@attrs.define(eq=False)
class Departure:
    """Whether the POST of requests started to go out on a connection (:meth:`sending` is its
    ``on_sending``, see :func:`open_stream`): before that, a failure (no connection, no free
    one in the pool) or a cancellation means the server cannot have seen them. Their ids leave
    ``not_left`` (the transport's: the requests reported unsent if the connection ends) then.
    Made by :meth:`HttpTransportBase._departure`."""

    not_left: set[RequestId]
    requests: tuple[RequestId, ...]
    left: bool = False

    def sending(self) -> None:
        """The request's headers start to be written: from now on it may have been seen."""
        self.left = True
        self.not_left.difference_update(self.requests)


def not_sent(error: McpError) -> ServerDisconnected:
    """The failure of a request that ``error`` stopped before it went out: safe to retry."""
    return ServerDisconnected(f"{error}; the request was not sent", sent=False)


async def consume(
    response: HttpResponse, take: Callable[[bytes], Awaitable[bool]], *, finish: bool = False
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


async def discard_body(response: HttpResponse) -> bool:
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


async def _close_body(response: HttpResponse, chunks: AsyncIterator[bytes], ended: bool) -> None:
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


async def read_excerpt(response: HttpResponse) -> str:
    """Read at most a few KiB of ``response``'s body and return :func:`excerpt` of it. A body
    that cannot be read gives ``""``."""
    return excerpt(await read_prefix(response, _EXCERPT_BYTES))


async def read_prefix(response: HttpResponse, limit: int) -> bytes:
    """At most the first ``limit`` bytes of ``response``'s body (what could be read of it:
    ``b""`` when nothing could). Never raises but for a cancellation."""
    data = bytearray()

    async def take(chunk: bytes) -> bool:
        data.extend(chunk)
        return len(data) < limit

    with contextlib.suppress(httpx.HTTPError):
        await consume(response, take)
    return bytes(data[:limit])


def error_answer(body: bytes, request_id: RequestId) -> bytes | None:
    """The frame of a JSON-RPC error answer to ``request_id`` held in an HTTP error body (a
    2026-07-28 server answers a request it refuses with 400 or 404 and the JSON-RPC error in
    the body), or ``None`` when the body is not one: not JSON, not an object, no ``error``
    object with an integer ``code`` and a string ``message``, or a ``result`` beside it. The
    answer is for the request that was POSTed, whatever ``id`` the body names (a server that
    refuses a request before it reads its id answers ``null``). Never raises."""
    try:
        value = json.loads(body.decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    if type(value) is not dict or "result" in value or value.get("jsonrpc") != "2.0":
        return None
    error = value.get("error")
    if type(error) is not dict:
        return None
    code, message = error.get("code"), error.get("message")
    if type(code) is not int or type(message) is not str:
        return None
    return _item_frame({"jsonrpc": "2.0", "id": request_id, "error": error})


async def read_body(response: HttpResponse, limit: int, what: str) -> bytes:
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


def rate_limit_delay(response: HttpResponse) -> float | None:
    """For a 429 answer, the seconds its ``Retry-After`` asks to wait; None for any other
    answer, or a 429 without a usable ``Retry-After``."""
    if response.status_code != 429:
        return None
    return _retry.retry_after_seconds(response.headers.get("retry-after"), now=_retry.wall_clock())


def status_error(what: str, response: HttpResponse, body: str) -> HttpStatusError:
    """The :class:`HttpStatusError` for a response whose status is not a success: it says
    ``what`` was refused, the status, where a redirect points (redirects are not followed), and
    quotes ``body`` (an excerpt)."""
    status = response.status_code
    phrase = response.reason_phrase or httpx.codes.get_reason_phrase(status)
    message = f"{what}: the server answered HTTP {status}" + (f" {phrase}" if phrase else "")
    if status == 407:
        message += " (from the proxy: check the user and password in proxy)"
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
    except httpx.ProxyError as exc:
        raise ConnectError(f"{what} failed: {_proxy_refusal(exc)}") from exc
    except httpx.ConnectError as exc:
        hint = tls_failure_hint(exc)
        if hint is not None:
            raise ConnectError(f"{what} failed: {hint}") from exc
        raise ConnectError(f"{what} failed: could not connect ({_describe(exc)})") from exc
    except httpx.TimeoutException as exc:
        raise TransportClosed(f"{what} failed: {type(exc).__name__} (timed out)") from exc
    except httpx.HTTPError as exc:
        # TLS 1.3: a server that refuses our certificate says so after our side of the
        # handshake is done, so it surfaces on the first read; the request was never processed.
        hint = tls_refusal_hint(exc)
        if hint is not None:
            raise ConnectError(f"{what} failed: {hint}") from exc
        raise TransportClosed(f"{what} failed: {_describe(exc)}") from exc


def _proxy_refusal(exc: httpx.ProxyError) -> str:
    said = str(exc) or type(exc).__name__
    if said.startswith("407"):
        return (
            f"the proxy refused the tunnel ({said}): check the user and password in proxy "
            "(http://user:password@host:port)"
        )
    return f"the proxy refused the tunnel ({said}): check proxy in the server's settings"


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# --------------------------------------------------------------------------- parameters


def _to_headers(value: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(value))


def _redact_repr(value: Mapping[str, str]) -> str:
    return "{" + ", ".join(f"{name!r}: '***'" for name in value) + "}"


def _url_repr(value: str | None) -> str:
    return repr(redact_url(value)) if isinstance(value, str) else repr(value)


def _basic_authorization(url: httpx.URL) -> str | None:
    """The ``Authorization: Basic`` value for the user information of ``url`` (None without)."""
    if not url.username and not url.password:
        return None
    pair = f"{url.username}:{url.password}".encode()
    return "Basic " + base64.b64encode(pair).decode("ascii")


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
      ``https``. User information in it (``https://user:password@host/mcp``) is sent as an
      ``Authorization: Basic`` header, never as part of the URL, so that no log of a request
      carries it; ``repr()`` hides the password and the values of the query string.
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
      gave no ``retry`` field (Streamable HTTP waits at least 0.1 s, whatever either says);
      ``max_resume_attempts``: how many attempts in a row may fail to
      bring anything new before a call whose stream broke is given up (outcome unknown).
    - ``max_in_flight``: requests whose answers may be awaited at once (each holds an HTTP
      connection). A further request waits for a free slot after the transport took it from
      the outbox (``send`` does not wait for it); notifications and responses never wait for
      one, nor do the requests and ability calls behind them.
    - ``legacy_fallback``: when the first ``initialize`` POST is answered 400, 404 or 405, try
      the legacy HTTP+SSE transport at the same URL (the specification's
      backward-compatibility rule).
    - ``allow_insecure_http``: a plain ``http://`` URL to another machine than this one is
      refused without it (its traffic is not encrypted); to a loopback address it is allowed
      anyway. Opening a plain ``http://`` connection logs a warning either way.
    - ``ca_bundle``: a PEM file of the CA certificates the server's certificate must chain to,
      instead of the default trust store (certifi's, as httpx has it); ``client_cert`` and
      ``client_key``: the PEM certificate (and its unencrypted key, in the same file or in
      ``client_key``) shown to a server that asks for one (mutual TLS). ``https://`` only; the
      files are loaded when the parameters are built.
    - ``max_retry_after``: a request answered ``429 Too Many Requests`` with ``Retry-After``
      (it was not processed) is sent again after the wait the server asks for, as long as the
      waits of that request add up to no more than this (seconds; 0: never wait) and to no more
      than what is left of its own time: ``connect_timeout`` for ``initialize``,
      ``request_timeout`` (when given) for the other requests, counted from the moment the
      transport took the request. A longer wait fails the request at once, saying so.
    - ``request_timeout``: the caller's timeout for one request (the runtime passes the
      server's call timeout), used only to bound those waits.
    - ``proxy``: ``http://[user:password@]host:port`` of an HTTP proxy every request goes
      through (a ``CONNECT`` tunnel for ``https://``); without it, httpx's environment variables
      (``HTTPS_PROXY``, ``NO_PROXY``...) apply. ``repr()`` hides its password.
    - ``auth``: what every request goes through before it is sent (the server's OAuth sign-in,
      :attr:`trio_mcp.transports.oauth.SignIn.auth`: it adds the ``Authorization`` header and
      answers ``401``/``403`` challenges); None: only ``headers``.

    Raises :class:`McpTransportConfigError` listing every invalid field.
    """

    url: str = attrs.field(repr=_url_repr)
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
    allow_insecure_http: bool = False
    ca_bundle: str | None = None
    client_cert: str | None = None
    client_key: str | None = None
    proxy: str | None = attrs.field(default=None, repr=_url_repr)
    max_retry_after: float = _retry.DEFAULT_MAX_RETRY_AFTER
    request_timeout: float | None = None
    auth: httpx.Auth | None = attrs.field(default=None, repr=False, eq=False, hash=False)
    _ssl_context: ssl.SSLContext | None = attrs.field(init=False, repr=False, eq=False, hash=False)
    #: ``url`` without its user information: what requests go to.
    _endpoint: httpx.URL = attrs.field(init=False, repr=False, eq=False, hash=False)
    #: ``headers``, plus the ``Authorization`` made of the URL's user information.
    _request_headers: Mapping[str, str] = attrs.field(init=False, repr=False, eq=False, hash=False)

    def __attrs_post_init__(self) -> None:
        problems = self._problems()
        if problems:
            raise McpTransportConfigError(
                "invalid HTTP server settings: " + "; ".join(f"{k}: {m}" for k, m in problems),
                problems=problems,
            )
        try:
            context = tls_context(
                ca_bundle=self.ca_bundle,
                client_cert=self.client_cert,
                client_key=self.client_key,
                base=httpx.create_ssl_context,
            )
        except McpTransportConfigError as exc:
            raise McpTransportConfigError(
                f"invalid HTTP server settings: {exc}", problems=exc.problems
            ) from None
        object.__setattr__(self, "_ssl_context", context)
        url = httpx.URL(self.url)
        headers = dict(self.headers)
        basic = _basic_authorization(url)
        if basic is not None:
            headers["Authorization"] = basic
            url = url.copy_with(username=None, password=None)
        object.__setattr__(self, "_endpoint", url)
        object.__setattr__(self, "_request_headers", MappingProxyType(headers))

    @property
    def endpoint(self) -> httpx.URL:
        """The URL requests go to: ``url`` without user information."""
        return self._endpoint

    @property
    def request_headers(self) -> Mapping[str, str]:
        """The headers every request carries: ``headers``, plus ``Authorization: Basic`` for
        user information in ``url``."""
        return self._request_headers

    def _problems(self) -> tuple[tuple[str, str], ...]:
        problems: list[tuple[str, str]] = []
        try:
            parsed = httpx.URL(self.url) if isinstance(self.url, str) else None
        except httpx.InvalidURL:
            parsed = None
        if parsed is None or parsed.scheme not in ("http", "https") or not parsed.host:
            problems.append(("url", "must be an http:// or https:// URL with a host"))
        elif plaintext := plaintext_problem(
            parsed.scheme, parsed.host, allow=self.allow_insecure_http is True
        ):
            problems.append(("url", plaintext))
        if (
            parsed is not None
            and (parsed.username or parsed.password)
            and any(
                isinstance(name, str) and name.lower() == "authorization" for name in self.headers
            )
        ):
            problems.append(
                (
                    "url",
                    "holds user:password@ and headers has an Authorization header too: give "
                    "the credentials one way",
                )
            )
        for name, value in self.headers.items():
            if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
                problems.append((f"headers[{name!r}]", "a header name must be an HTTP token"))
            elif not isinstance(value, str) or _FORBIDDEN_IN_HEADER.search(value):
                problems.append((f"headers[{name!r}]", "the value must be a string without CR/LF"))
        flag: object = self.allow_insecure_http
        if not isinstance(flag, bool):
            problems.append(("allow_insecure_http", "must be True or False"))
        for key in TLS_KEYS:
            path: object = getattr(self, key)
            if path is not None and (not isinstance(path, str) or not path):
                problems.append((key, "must be the path of a PEM file, or None"))
            elif path is not None and parsed is not None and parsed.scheme == "http":
                problems.append((key, "is only used with an https:// URL"))
        if self.proxy is not None and (why := proxy_problem(self.proxy)) is not None:
            problems.append(("proxy", why))
        for name in ("max_frame_bytes", "max_resume_attempts", "max_in_flight"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                problems.append((name, f"must be a positive integer, got {value!r}"))
        for name in ("connect_timeout", "ack_timeout", "close_timeout", "reconnect_delay"):
            if not _seconds(getattr(self, name)):
                problems.append((name, "must be a finite number of seconds > 0"))
        if not _seconds(self.read_timeout, allow_none=True):
            problems.append(("read_timeout", "must be a finite number of seconds > 0, or None"))
        if not _seconds(self.request_timeout, allow_none=True):
            problems.append(("request_timeout", "must be a finite number of seconds > 0, or None"))
        wait: object = self.max_retry_after
        if isinstance(wait, bool) or not isinstance(wait, int | float) or not 0 <= wait < math.inf:
            problems.append(("max_retry_after", "must be a finite number of seconds >= 0"))
        return tuple(problems)


def make_client(params: HttpParameters) -> httpx.AsyncClient:
    """The one httpx client of a transport: no redirects followed (a redirect is reported as an
    error naming its target, so that configured headers never go to another address); the
    server's TLS settings and proxy."""
    timeout = httpx.Timeout(
        connect=params.connect_timeout,
        read=params.read_timeout,
        write=params.connect_timeout,
        pool=params.connect_timeout,
    )
    limits = httpx.Limits(max_connections=params.max_in_flight + 8, max_keepalive_connections=8)
    context = params._ssl_context
    return httpx.AsyncClient(
        timeout=timeout,
        limits=limits,
        follow_redirects=False,
        verify=context if context is not None else True,
        proxy=params.proxy,
        auth=params.auth,
    )


#: :func:`make_client` itself: :func:`open_transport` gives a transport an HTTP/1.1 lane only
#: when the client is one it made (tests replace ``make_client`` to inject httpx transports).
_OWN_MAKE_CLIENT: Final = make_client


def make_lane(params: HttpParameters, client: httpx.AsyncClient) -> Lane | None:
    """The HTTP/1.1 lane of a transport whose httpx client is ``client`` (made by
    :func:`make_client`), or None when httpx must carry the requests: a proxy applies to the
    endpoint, configured (``proxy``) or from the environment (``HTTP_PROXY``, ``HTTPS_PROXY``,
    ``ALL_PROXY`` and ``NO_PROXY``, as httpx reads them: the client is asked which of its
    transports serves the URL)."""
    endpoint = params.endpoint
    if endpoint.scheme not in ("http", "https"):
        return None
    if client._transport_for_url(endpoint) is not client._transport:
        return None  # a proxy's
    timeout = client.timeout
    pool = H1Pool(
        origin=endpoint,
        timeout=timeout,
        max_connections=params.max_in_flight + 8,
        max_keepalive=8,
        ssl_context=params._ssl_context,
    )
    return Lane(pool=pool, auth=params.auth)


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
    (``None`` for a response), and the request ids that its ``notifications/cancelled`` cancel.
    ``headers``: the HTTP headers of this frame's POST alone, checked
    (:func:`checked_request_headers`; ``send_with_headers``), or None (every other frame: no
    allocation). ``credentials``: who the frame is sent as (``send_as``; their headers are in
    ``headers`` too), or None: the transport's own."""

    requests: tuple[RequestId, ...]
    method: str | None
    cancels: tuple[RequestId, ...] = ()
    headers: tuple[tuple[str, str], ...] | None = attrs.field(default=None, repr=False)
    credentials: RequestCredentials | None = None

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


# --------------------------------------------------------------------------- the outbox


@attrs.frozen
class SendFrame:
    """A frame to send; ``now``: past the frames held since the session expired
    (``send_now``)."""

    frame: bytes
    out: Outgoing
    now: bool = False


@attrs.frozen
class SetVersion:
    """Every later request carries ``version`` as ``MCP-Protocol-Version``."""

    version: str


@attrs.frozen
class SetStateless:
    """From now on, the stateless shape of 2026-07-28 with ``version`` (``None``: the shape of
    the handshake revisions again)."""

    version: str | None


@attrs.frozen
class ResumeHeld:
    """Send the frames held since the session expired, in order."""


@attrs.frozen
class DiscardHeld:
    """Fail the held requests as never sent; drop the held notifications."""


@attrs.frozen
class EndConnection:
    """End the connection with ``error``, after everything the outbox held before it."""

    error: McpError


#: What goes into a transport's outbox, in the order its user gave it.
OutboxItem: TypeAlias = (
    SendFrame | SetVersion | SetStateless | ResumeHeld | DiscardHeld | EndConnection
)


# --------------------------------------------------------------------------- statistics


@attrs.frozen(kw_only=True)
class HttpStatistics:
    """A snapshot of an HTTP transport.

    ``mode`` is ``"streamable"`` (Streamable HTTP), ``"stateless"`` (its 2026-07-28 shape) or
    ``"legacy"`` (HTTP+SSE, configured or fallen back to). ``has_session`` says whether the
    server gave a session id (the id itself is never shown); ``protocol_version`` is what the
    ``MCP-Protocol-Version`` header carries.
    ``posts``, ``gets`` and ``deletes`` count HTTP requests by method; ``resumptions`` the GETs
    that resumed a broken stream with ``Last-Event-ID``; ``frames_received`` the messages taken
    up from the server (the last may still wait for room in the sink); ``queued`` the items
    waiting in the outbox; ``in_flight`` the requests whose answers are awaited now;
    ``waiting`` the requests taken from the outbox that wait for a free slot (at most
    ``max_in_flight`` are in flight); ``held`` the frames held back since the session expired;
    ``session_expiries`` how often the server ended our session; ``get_stream`` the state of
    the stream for server-initiated messages (``"off"``, ``"connecting"``, ``"open"``,
    ``"unsupported"``, ``"failed"``).
    """

    mode: str
    has_session: bool
    protocol_version: str | None
    posts: int
    gets: int
    deletes: int
    resumptions: int
    frames_received: int
    queued: int
    in_flight: int
    waiting: int
    held: int
    session_expiries: int
    get_stream: str


# --------------------------------------------------------------------------- the base


@attrs.define(eq=False)
class HttpTransportBase:
    """The machinery the HTTP transports share: the outbox and its pump, what goes up into the
    sink (frames and events), the request headers, the end of the connection and the orderly
    close. Not a transport by itself: a subclass says what each outbox item does
    (:meth:`_send_frame`), and is run by :meth:`_host` in a nursery of its opener.

    The end of the connection (:meth:`_end`, or :meth:`aclose`) stops every task of the
    transport first; then, with nobody else putting anything, :class:`ConnectionEnded` goes into
    the sink, and the sink is closed. So it is the last item, and ``unsent`` is exact: the
    requests still in the outbox, and those the transport took but never sent (held, waiting
    for a free slot, or cancelled before their POST started to go out on a connection).
    """

    _params: HttpParameters
    _client: httpx.AsyncClient
    _given_sink: FrameSink | None = attrs.field(default=None, alias="sink")
    #: The HTTP/1.1 lane its requests go through (see :class:`Lane`), or None: httpx's client.
    _lane: Lane | None = attrs.field(default=None, alias="lane")
    _sink: FrameSink = attrs.field(init=False)
    _reader: InboxReader | None = attrs.field(default=None, init=False)
    _outbox: ByteChannel[OutboxItem] = attrs.field(init=False)
    _tasks: trio.Nursery = attrs.field(init=False)
    _tasks_scope: trio.CancelScope = attrs.field(factory=trio.CancelScope, init=False)
    _tasks_done: trio.Event = attrs.field(factory=trio.Event, init=False)
    _end_wait: trio.CancelScope = attrs.field(factory=trio.CancelScope, init=False)
    _host_done: trio.Event = attrs.field(factory=trio.Event, init=False)
    _protocol_version: str | None = attrs.field(default=None, init=False)
    #: Why the connection ended on its own (the first reason wins).
    _ended: McpError | None = attrs.field(default=None, init=False)
    _end_put: bool = attrs.field(default=False, init=False)
    #: Ids of requests the pump took from the outbox that have not left: held, waiting for a
    #: slot, or whose POST has not started to go out on a connection (or could not connect,
    #: until that is reported).
    _not_left: set[RequestId] = attrs.field(factory=set, init=False)
    _unsent: frozenset[RequestId] | None = attrs.field(default=None, init=False)
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
        self._outbox = ByteChannel[OutboxItem](max_bytes=OUTBOX_BYTES)
        if self._given_sink is None:
            inbox = open_inbox()
            self._sink = inbox
            self._reader = InboxReader(inbox)
        else:
            self._sink = self._given_sink

    # ------------------------------------------------------------------ the contract

    @property
    def info(self) -> TransportInfo:
        """What this transport is connected to (overridden)."""
        raise NotImplementedError  # pragma: no cover - every transport overrides it

    @property
    def protocol_version(self) -> str | None:
        """The version sent as ``MCP-Protocol-Version``, once the pump applied
        :meth:`set_protocol_version`."""
        return self._protocol_version

    def send_nowait(self, frame: bytes, request_id: RequestId | None = None) -> None:
        """Put one message (``frame``) into the outbox now, or raise ``trio.WouldBlock`` when
        it is full.

        ``request_id`` is accepted for the contract: the transport reads the ids of the requests
        a frame holds from the frame itself (it parses every frame to route it). Raises
        :class:`TransportClosed` once the transport is closed or the connection ended (nothing
        was sent), :class:`LocalProtocolError` when ``frame`` is not a JSON-RPC message.
        """
        self._check_open()
        item = SendFrame(frame, describe_outgoing(frame))
        try:
            self._outbox.send_nowait(item, len(frame))
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            raise TransportClosed(self._why_closed()) from None

    async def send(self, frame: bytes, request_id: RequestId | None = None) -> None:
        """:meth:`send_nowait`, waiting for room in the outbox. Returns once the frame is in the
        outbox: what the server made of it comes up through the sink."""
        await self._put(lambda: SendFrame(frame, describe_outgoing(frame)), len(frame))

    async def set_protocol_version(self, version: str) -> None:
        """The handshake settled on ``version``: every request that the pump starts after this
        call (in outbox order) carries it as ``MCP-Protocol-Version``. Raises like
        :meth:`send`."""
        await self._put(lambda: SetVersion(version))

    async def receive(self) -> bytes:
        """For a transport opened without a sink: the next message the server sent, on any
        stream, in arrival order (see :class:`~trio_mcp.transports._base.InboxReader`: a
        :class:`RequestFailed` or :class:`SessionExpiredNotice` is raised once as its error,
        :class:`ConnectionEnded` as its error from then on). Raises :class:`TransportClosed` at
        once after :meth:`aclose`, and ``RuntimeError`` when the frames go to a sink."""
        if self._reader is None:
            raise RuntimeError("this transport's frames go to the sink it was opened with")
        if self._closing:
            await trio.lowlevel.checkpoint()
            raise TransportClosed(self._closed_message())
        return await self._reader.receive()

    async def aclose(self) -> None:
        """Close the connection: stop every stream and request in flight, end the session when
        the transport has one, close the HTTP client, then put :class:`ConnectionEnded` into the
        sink (if it has room; the connection did not end before) and close it. Idempotent (a
        concurrent second call waits for the first), shielded from cancellation and bounded in
        time; never raises for a misbehaving server."""
        if self._closing:
            await self._close_done.wait()
            return
        self._closing = True
        self._outbox.close()
        try:
            with trio.CancelScope(shield=True):
                self._tasks_scope.cancel()
                await self._tasks_done.wait()
                await self._shut_down()
                with trio.move_on_after(_CLIENT_CLOSE_BUDGET):
                    if self._lane is not None:
                        await self._lane.pool.aclose()
                    await self._client.aclose()
                self._end_wait.cancel()
                await self._host_done.wait()
                if not self._end_put:
                    with contextlib.suppress(
                        trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError
                    ):
                        self._sink.send_nowait(self._ending(), ITEM_OVERHEAD)
                self._sink.close()
        finally:
            self._close_done.set()

    # ------------------------------------------------------------------ the actor

    async def _host(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the transport's tasks (the pump, and whatever it starts) until the connection
        ends or is closed; after an end of its own, put :class:`ConnectionEnded` (waiting for
        room, until :meth:`aclose` cuts the wait) and close the sink."""
        try:
            try:
                with self._tasks_scope:
                    async with trio.open_nursery() as tasks:
                        self._tasks = tasks
                        tasks.start_soon(self._pump)
                        task_status.started()
                        await trio.sleep_forever()
            finally:
                self._tasks_done.set()
            if not self._closing:
                with self._end_wait:
                    try:
                        await self._sink.send(self._ending(), ITEM_OVERHEAD)
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        logger.debug("%s: nobody receives the end of the connection", self.info)
                    self._end_put = True
                    self._sink.close()
        finally:
            self._host_done.set()

    async def _pump(self) -> None:
        """Take the outbox's items in order and apply each (start the POSTs)."""
        outbox = self._outbox
        while True:
            try:
                item = await outbox.receive()
            except (trio.EndOfChannel, trio.ClosedResourceError):
                return
            if isinstance(item, SendFrame):
                self._not_left.update(item.out.requests)
            await self._apply(item)

    async def _apply(self, item: OutboxItem) -> None:
        """Apply one outbox item (in the pump). Extended by the Streamable HTTP transport."""
        match item:
            case SendFrame(frame=frame, out=out, now=now):
                await self._send_frame(frame, out, now=now)
            case SetVersion(version=version):
                self._set_version(version)
            case EndConnection(error=error):
                self._end(error)
            case ResumeHeld() | DiscardHeld():
                raise AssertionError(f"{type(self).__name__} never holds frames")
            case SetStateless():
                raise AssertionError(f"{type(self).__name__} has no stateless shape")

    async def _send_frame(self, frame: bytes, out: Outgoing, *, now: bool) -> None:
        """Send one frame (in the pump; overridden)."""
        raise NotImplementedError  # pragma: no cover - every transport overrides it

    def _set_version(self, version: str) -> None:
        """Apply a protocol version (in the pump)."""
        self._protocol_version = version

    async def _put(self, make: Callable[[], OutboxItem], size: int = ITEM_OVERHEAD) -> None:
        """Put ``make()`` into the outbox, waiting for room; made after the open check, so that
        a closed transport says so before a frame is parsed."""
        try:
            self._check_open()
            item = make()
        except McpError:
            await trio.lowlevel.checkpoint()
            raise
        try:
            await self._outbox.send(item, size)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            raise TransportClosed(self._why_closed()) from None

    # ------------------------------------------------------------------ for subclasses

    async def _connect(self) -> None:
        """What the transport does once its tasks run, before :func:`open_transport` hands it
        to its user (nothing here; HTTP+SSE waits for its ``endpoint`` event). What it raises
        comes out of the opener's ``async with``, after the transport is closed."""

    async def _shut_down(self) -> None:
        """Transport-specific closing (the DELETE of a session). Shielded by the caller."""

    def _response_arrived(self, request_id: RequestId) -> None:
        """A response to ``request_id`` was put into the sink (overridden)."""

    def _closed_message(self) -> str:
        return f"the transport to {self.info.detail} was closed; open a new one"

    def _why_closed(self) -> str:
        if self._closing:
            return self._closed_message()
        return f"the connection ended: {self._ended}"

    def _check_open(self) -> None:
        if self._closing:
            raise TransportClosed(self._closed_message())
        if self._ended is not None:
            raise TransportClosed(f"the connection ended: {self._ended}")

    def _headers(
        self,
        *,
        accept: str,
        json_body: bool = False,
        session_id: str | None = None,
        last_event_id: str | None = None,
        version: str | None = None,
        extra: tuple[tuple[str, str], ...] | None = None,
    ) -> httpx.Headers:
        """The headers of one HTTP request: the configured ones, then the transport's, then
        ``extra`` (one frame's own, :attr:`Outgoing.headers`), each replacing any of the same
        name before it."""
        headers = httpx.Headers(dict(self._params.request_headers))
        headers["Accept"] = accept
        if json_body:
            headers["Content-Type"] = "application/json"
        if version is not None:
            headers["MCP-Protocol-Version"] = version
        if session_id is not None:
            headers["Mcp-Session-Id"] = session_id
        if last_event_id:
            headers["Last-Event-ID"] = last_event_id
        if extra is not None:
            for name, value in extra:
                headers[name] = value
        return headers

    async def _deliver(self, data: bytes) -> bool:
        """Put what the server sent (split into messages) into the sink, waiting for room.
        Returns False when nobody receives any more (the connection then ends)."""
        for frame, answered in split_incoming(data):
            self._frames_received += 1  # before: its receiver may run before this task goes on
            try:
                await self._sink.send(frame, len(frame))
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._sink_gone()
                return False
            if answered is not None:
                self._response_arrived(answered)
        return True

    async def _emit(self, event: TransportEvent) -> bool:
        """Put ``event`` into the sink, waiting for room; False when nobody receives any more."""
        try:
            await self._sink.send(event, ITEM_OVERHEAD)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self._sink_gone()
            return False
        return True

    def _sink_gone(self) -> None:
        self._end(TransportClosed(f"nobody receives from the transport to {self.info.detail}"))

    def _end(self, error: McpError) -> None:
        """The connection is over (the first reason wins): stop taking frames, stop every task;
        :meth:`_host` then puts :class:`ConnectionEnded` with ``error`` into the sink. Sync;
        the calling task is cancelled at its next checkpoint, so it says what it has to say
        (a :class:`RequestFailed`) before it calls this."""
        if self._ended is not None or self._closing:
            return
        logger.warning("%s: the connection ended: %s", self.info, error)
        self._ended = error
        self._outbox.close()
        self._tasks_scope.cancel()

    def _ending(self) -> ConnectionEnded:
        error = self._ended or TransportClosed(self._closed_message())
        return ConnectionEnded(error=error, unsent=self._final_unsent())

    def _final_unsent(self) -> frozenset[RequestId]:
        """The requests that never left, once every task stopped: computed once."""
        if self._unsent is None:
            ids = set(self._not_left)
            for item in self._outbox.drain():
                if isinstance(item, SendFrame):
                    ids.update(item.out.requests)
            self._unsent = frozenset(ids)
        return self._unsent

    async def _fail(self, ids: Iterable[RequestId], error: McpError, sent: bool) -> None:
        """Fail the requests ``ids`` alone: a :class:`RequestFailed` each, into the sink."""
        for request_id in tuple(ids):
            logger.info("%s: request %r failed: %s", self.info, request_id, error)
            if not await self._emit(RequestFailed(request_id=request_id, error=error, sent=sent)):
                return
            self._not_left.discard(request_id)

    def _request_deadline(self, method: str | None, taken_at: float) -> float | None:
        """When the time of a request taken at ``taken_at`` runs out (to bound the waits for
        ``Retry-After``): ``connect_timeout`` after for ``initialize``, ``request_timeout``
        after for another request (None: no limit)."""
        params = self._params
        budget = params.connect_timeout if method == "initialize" else params.request_timeout
        return None if budget is None else taken_at + budget

    def _retry_limit(self, waited: float, deadline: float | None) -> float:
        """The longest wait for ``Retry-After`` that a request may still make: what is left of
        ``max_retry_after`` after ``waited``, and of its time until ``deadline``."""
        limit = self._params.max_retry_after - waited
        if deadline is not None:
            limit = min(limit, deadline - trio.current_time())
        return limit

    async def _wait_for_retry(self, what: str, delay: float) -> None:
        logger.info(
            "%s: the server is rate-limiting (HTTP 429): %s again in %g s (Retry-After)",
            self.info,
            what,
            delay,
        )
        await trio.sleep(delay)

    def _departure(self, out: Outgoing) -> Departure:
        """Watch whether the POST of ``out`` goes out (see :class:`Departure`)."""
        return Departure(self._not_left, out.requests)

    async def _cannot_connect(self, ids: Iterable[RequestId], error: ConnectError) -> None:
        """A POST of the requests ``ids`` could not connect: they fail as never sent, and the
        connection ends (the server cannot be reached)."""
        ids = tuple(ids)
        self._not_left.update(ids)  # if the end comes first, they are unsent
        await self._fail(ids, self._unreachable_for_call(error), sent=False)
        self._end(self._unreachable(error))

    async def _not_authorized(self, ids: Iterable[RequestId], error: AuthorizationError) -> None:
        """The server refused the POST of the requests ``ids`` for want of a sign-in that only
        the user (or the configuration) can give (the auth flow raised ``error``): they fail
        with it as never processed, and the connection ends with it (the supervisor puts the
        server in NEEDS_AUTH)."""
        ids = tuple(ids)
        self._not_left.update(ids)
        await self._fail(ids, error, sent=False)
        self._end(error)

    def _unreachable_for_call(self, error: ConnectError) -> McpError:
        if not self._reached:
            return error
        return not_sent(error)

    def _unreachable(self, error: TransportError) -> McpError:
        """The error that ends the connection when the server cannot be connected to."""
        if not self._reached:
            return error
        return TransportClosed(
            f"the server at {self.info.detail} cannot be reached any more ({error}); it may have "
            "stopped or restarted"
        )


_Transport = TypeVar("_Transport", bound=HttpTransportBase)


@asynccontextmanager
async def open_transport(
    cls: type[_Transport], params: HttpParameters, sink: FrameSink | None
) -> AsyncIterator[_Transport]:
    """Run a transport of class ``cls`` in a nursery of its own and yield it once it is
    connected (:meth:`HttpTransportBase._connect`); leaving the block closes it
    (:meth:`HttpTransportBase.aclose`), even when the block is cancelled. An exception raised in
    the block, or by connecting, comes out as itself, not wrapped in an
    :class:`ExceptionGroup`. The HTTP client is closed in any case (by ``aclose``, or here,
    bounded, when the transport never ran)."""
    install_log_redaction()
    endpoint = params.endpoint
    warn_plaintext(logger, endpoint.scheme, endpoint.host, display_url(endpoint))
    with collapse_exception_group():
        client = make_client(params)
        # A client made elsewhere (a test's httpx.MockTransport) serves every request itself.
        lane = make_lane(params, client) if make_client is _OWN_MAKE_CLIENT else None
        started = False
        try:
            async with trio.open_nursery() as nursery:
                transport = cls(params=params, client=client, sink=sink, lane=lane)
                await nursery.start(transport._host)
                started = True
                try:
                    await transport._connect()
                    yield transport
                finally:
                    await transport.aclose()
        finally:
            if not started:
                with trio.CancelScope(shield=True), trio.move_on_after(_CLIENT_CLOSE_BUDGET):
                    await client.aclose()
