"""The legacy HTTP+SSE transport (protocol revision 2024-11-05; deprecated since 2025-03-26).

``async with open_sse_transport(HttpParameters(url="http://host/sse")) as t:`` opens the
server's event stream and yields an :class:`SseTransport` once the server has said where to
POST; leaving the block closes the stream, which ends the session.

The wire, as both reference servers speak it:

- the client opens one SSE stream with a GET on the SSE URL (``Accept: text/event-stream``);
- the server's first event is ``endpoint``; its data is the URL to POST every client message to,
  relative to the SSE URL or absolute (the Python SDK sends ``/messages/?session_id=<hex>``, the
  TypeScript SDK ``/message?sessionId=<uuid>``). An endpoint on another origin than the SSE URL
  is refused, so that the configured headers never go to another server;
- every client message is a POST of one JSON-RPC message to that URL; the server answers 202
  (a JSON body, if a server sends one, is read as messages too);
- every server message arrives as a ``message`` event on the stream (a JSON array is a batch and
  is split into messages).

``send`` puts a frame into the outbox; the transport's pump POSTs the frames one after the
other, in order, each once the server accepted the one before. Every message of the event stream
goes up into the sink, waiting for room (a full sink stops the reading of the stream).

Rate limits: a GET or a POST answered 429 with ``Retry-After`` is sent again after that wait,
while the waits fit in ``max_retry_after`` and what is left of ``connect_timeout`` (the GET) or
of the request's time (see :mod:`trio_mcp.transports._retry`).

Failures: a POSTed request answered with an error status fails that call alone (a
:class:`~trio_mcp.transports._base.RequestFailed` with :class:`HttpStatusError`, see
:mod:`._http_base`); a 404 on the endpoint means the server forgot the session: the request
fails as never sent and the connection ends; the end of the event stream (or a server that
cannot be reached) ends the connection: there is no resumption in this transport. An event over
``max_frame_bytes`` ends the connection too (which call it belonged to cannot be told). The last
item in the sink is always a :class:`~trio_mcp.transports._base.ConnectionEnded`.

The same machinery serves the Streamable HTTP transport when it falls back to this one
(:class:`LegacyConnection`).
"""

from __future__ import annotations

import logging
from contextlib import AbstractAsyncContextManager
from typing import Final

import attrs
import httpx
import trio

from ...protocol._errors import (
    AuthorizationError,
    ConnectError,
    ConnectTimeout,
    FrameTooLarge,
    HttpStatusError,
    McpError,
    ServerDisconnected,
    TransportClosed,
)
from ...protocol._sse import SseParser
from .._base import FrameSink, TransportInfo
from .._retry import too_long_to_wait
from ._h1 import HttpResponse
from ._http_base import (
    ACCEPT_POST,
    ACCEPT_SSE,
    HttpParameters,
    HttpStatistics,
    HttpTransportBase,
    Outgoing,
    ack_timeout,
    consume,
    content_type,
    discard_body,
    display_url,
    log_request,
    map_http_errors,
    not_sent,
    open_stream,
    open_transport,
    parse_events,
    rate_limit_delay,
    read_body,
    read_excerpt,
    status_error,
)

__all__ = ["SseTransport", "open_sse_transport"]

logger = logging.getLogger("trio_mcp.transports.http")

_DEFAULT_PORTS: Final = {"http": 80, "https": 443}


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    return (url.scheme, url.host, url.port or _DEFAULT_PORTS.get(url.scheme))


@attrs.define(eq=False)
class LegacyConnection:
    """One HTTP+SSE session, run for an HTTP transport (``host``): its event stream runs in the
    host's task nursery and puts what it brings into the host's sink; :meth:`post` sends (in
    the host's pump)."""

    host: HttpTransportBase
    sse_url: httpx.URL
    endpoint: httpx.URL | None = attrs.field(default=None, init=False)
    _too_large: FrameTooLarge | None = attrs.field(default=None, init=False)

    async def open(self) -> httpx.URL:
        """Open the event stream and wait for the ``endpoint`` event; return the endpoint.

        Raises :class:`ConnectError` when the server cannot be reached, its answer is not an
        event stream, the stream ends first, or the endpoint is invalid or on another origin;
        :class:`ConnectTimeout` when no endpoint arrives within ``connect_timeout``;
        :class:`HttpStatusError` when the GET is answered with an error status (after the waits
        that a 429 with Retry-After asks for, while they fit in ``connect_timeout`` and
        ``max_retry_after``).
        """
        timeout = self.host._params.connect_timeout
        with trio.move_on_after(timeout):
            deadline = trio.current_time() + timeout
            endpoint: httpx.URL = await self.host._tasks.start(self._run_stream, deadline)
            return endpoint
        raise ConnectTimeout(
            f"the HTTP+SSE server at {display_url(self.sse_url)} sent no endpoint event within "
            f"{timeout:g} s (connect_timeout)"
        )

    async def _run_stream(
        self, deadline: float, *, task_status: trio.TaskStatus[httpx.URL]
    ) -> None:
        host = self.host
        where = display_url(self.sse_url)
        refused: ConnectError | None = None
        closing = False
        reason = "the server ended the event stream"
        waited = 0.0

        async def take(chunk: bytes) -> bool:
            nonlocal refused, closing
            for event in parse_events(parser, chunk, self._oversized):
                if event.event == "endpoint":
                    if self.endpoint is not None:
                        logger.warning("%s sent a second endpoint event; ignored", where)
                        continue
                    try:
                        self.endpoint = self._resolve(event.data)
                    except ConnectError as exc:
                        refused = exc
                        return False
                    logger.debug("%s: the endpoint is %s", where, display_url(self.endpoint))
                    task_status.started(self.endpoint)
                elif event.event == "message":
                    if event.data.strip() and not await host._deliver(event.data.encode("utf-8")):
                        closing = True
                        return False
                else:
                    logger.debug("%s: ignored an event of type %r", where, event.event)
            return self._too_large is None

        while True:
            retry_in: float | None = None
            try:
                headers = host._headers(accept=ACCEPT_SSE, version=host._protocol_version)
                log_request(f"GET {where} (HTTP+SSE)", headers)
                host._gets += 1
                with map_http_errors(f"GET {where} (HTTP+SSE)"):
                    async with open_stream(
                        host._client, "GET", self.sse_url, headers=headers
                    ) as response:
                        retry_in = await self._check_answer(response, where, waited, deadline)
                        if retry_in is None:
                            host._reached = True
                            parser = SseParser(max_event_bytes=host._params.max_frame_bytes)
                            await consume(response, take)
            except AuthorizationError as exc:
                if self.endpoint is None:
                    raise  # the connection attempt fails with it
                host._end(exc)
                return
            except McpError as exc:
                if self.endpoint is None:
                    raise
                reason = str(exc)
            if retry_in is None:
                break
            await host._wait_for_retry(f"GET {where} (HTTP+SSE)", retry_in)
            waited += retry_in
        if refused is not None:
            raise refused
        if closing:
            return
        if self.endpoint is None:
            raise ConnectError(
                f"the HTTP+SSE event stream of {where} ended before the server sent its endpoint "
                "event; is this an HTTP+SSE server?"
            )
        if self._too_large is not None:
            host._end(self._too_large)
            return
        host._end(TransportClosed(f"the HTTP+SSE connection to {where} ended: {reason}"))

    async def _check_answer(
        self, response: HttpResponse, where: str, waited: float, deadline: float
    ) -> float | None:
        """None when ``response`` opens the event stream; the seconds to wait before the next
        GET when it is a 429 whose Retry-After fits in what is left of the connect time and of
        ``max_retry_after``. Raises for any other answer."""
        if response.status_code != 200:
            body = await read_excerpt(response)
            error = status_error(f"GET {where} (HTTP+SSE)", response, body)
            delay = rate_limit_delay(response)
            if delay is None:
                raise error
            limit = self.host._retry_limit(waited, deadline)
            if delay > limit:
                raise HttpStatusError(
                    too_long_to_wait(str(error), delay, limit), status=error.status, body=error.body
                )
            return delay
        kind = content_type(response)
        if kind != "text/event-stream":
            raise ConnectError(
                f"GET {where} answered {kind or 'no content type'} instead of an event stream "
                "(text/event-stream): it is not an HTTP+SSE endpoint"
            )
        return None

    def _oversized(self, exc: FrameTooLarge) -> None:
        where = display_url(self.sse_url)
        self._too_large = FrameTooLarge(
            f"the HTTP+SSE server at {where} sent an event over {exc.limit} bytes, so the "
            f"connection was closed; if it legitimately sends bigger messages, raise "
            f"max_frame_bytes (now {exc.limit}) in its config",
            limit=exc.limit,
        )

    def _resolve(self, data: str) -> httpx.URL:
        where = display_url(self.sse_url)
        text = data.strip()
        if not text:
            raise ConnectError(f"the HTTP+SSE server at {where} sent an empty endpoint event")
        try:
            url = self.sse_url.join(text)
        except httpx.InvalidURL as exc:
            raise ConnectError(
                f"the endpoint event of the HTTP+SSE server at {where} is not a URL: {exc}"
            ) from exc
        if _origin(url) != _origin(self.sse_url):
            raise ConnectError(
                f"the HTTP+SSE server at {where} named an endpoint on another origin "
                f"({display_url(url)}); refused, so that the configured headers are not sent "
                "to another server"
            )
        return url

    async def post(self, frame: bytes, out: Outgoing) -> None:
        """POST one frame to the endpoint (see :meth:`_post_once`); a 429 with Retry-After is
        waited for and the frame POSTed again, while the waits fit in ``max_retry_after`` and,
        for a request, what is left of its time (see :class:`HttpParameters`)."""
        host = self.host
        deadline = host._request_deadline(out.method, trio.current_time()) if out.requests else None
        waited = 0.0
        while (delay := await self._post_once(frame, out, waited, deadline)) is not None:
            host._not_left.update(out.requests)  # not processed: unsent, if the connection ends
            await host._wait_for_retry(out.label, delay)
            waited += delay

    async def _post_once(
        self, frame: bytes, out: Outgoing, waited: float, deadline: float | None
    ) -> float | None:
        """POST one frame to the endpoint; the server answers 202 and sends its answer on the
        event stream.

        Never raises for the server's sake: a request refused with an error status fails alone
        (:class:`HttpStatusError`), a POST that broke fails its requests as
        :class:`ServerDisconnected` (outcome unknown), a refused notification is logged; a 404
        (the session is gone) or a server that cannot be reached ends the connection. Returns
        the seconds to wait before POSTing it again when the server answered 429 with a
        Retry-After that fits in what the frame may still wait; else None.
        """
        host = self.host
        assert self.endpoint is not None
        what = f"POST {out.label} to {display_url(self.endpoint)}"
        headers = host._headers(accept=ACCEPT_POST, json_body=True, version=host._protocol_version)
        host._posts += 1
        log_request(f"{what} (HTTP+SSE)", headers)
        departure = host._departure(out)
        try:
            with map_http_errors(what):
                async with open_stream(
                    host._client,
                    "POST",
                    self.endpoint,
                    content=frame,
                    headers=headers,
                    timeout=ack_timeout(host._params),
                    on_sending=departure.sending,
                ) as response:
                    if response.is_success:
                        await self._read_accepted(response, out)
                        return None
                    body = await read_excerpt(response)
                    error = status_error(what, response, body)
                    delay = rate_limit_delay(response)
        except ConnectError as exc:
            await host._cannot_connect(out.requests, exc)
            return None
        except AuthorizationError as exc:
            await host._not_authorized(out.requests, exc)
            return None
        except TransportClosed as exc:
            if out.requests and not departure.left:
                await host._fail(out.requests, not_sent(exc), sent=False)
            elif out.requests:
                lost = ServerDisconnected(f"{exc}: the outcome is unknown", sent=True)
                await host._fail(out.requests, lost, sent=True)
            else:
                logger.warning("%s", exc)
            return None
        except FrameTooLarge as exc:
            await host._fail(out.requests, exc, sent=True)
            return None
        if delay is not None:
            limit = host._retry_limit(waited, deadline)
            if delay <= limit:
                return delay
            too_long = too_long_to_wait(str(error), delay, limit)
            if out.requests:  # not processed: never sent, as far as its outcome goes
                refusal = HttpStatusError(too_long, status=error.status, body=error.body)
                await host._fail(out.requests, refusal, sent=False)
            else:
                logger.warning("%s", too_long)
            return None
        await self._refused(out, error)
        return None

    async def _read_accepted(self, response: HttpResponse, out: Outgoing) -> None:
        if content_type(response) != "application/json":
            await discard_body(response)  # "Accepted", or nothing
            return
        what = f"the server's answer to {out.label}"
        body = await read_body(response, self.host._params.max_frame_bytes, what)
        if body.strip():
            await self.host._deliver(body)

    async def _refused(self, out: Outgoing, error: HttpStatusError) -> None:
        host = self.host
        if error.status == 404:
            refused = ServerDisconnected(
                f"{error}; the request was refused and is safe to retry", sent=False
            )
            await host._fail(out.requests, refused, sent=False)
            host._end(
                TransportClosed(f"the server no longer knows this HTTP+SSE session ({error})")
            )
        elif out.requests:
            await host._fail(out.requests, error, sent=True)
        else:
            logger.warning("%s", error)


@attrs.define(eq=False)
class SseTransport(HttpTransportBase):
    """A connection to a legacy HTTP+SSE server. Get one from :func:`open_sse_transport`; see
    :class:`trio_mcp.transports.Transport` for the contract.

    ``send`` puts a frame into the outbox; the pump POSTs the frames in order, each once the
    server accepted the one before (202); concurrent sends are allowed. The messages of the
    event stream go up into the sink in order. Besides the contract it offers
    :meth:`set_protocol_version` (:class:`~trio_mcp.transports._base.VersionedTransport`) and
    :meth:`statistics`.
    """

    _legacy: LegacyConnection = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self._legacy = LegacyConnection(host=self, sse_url=self._params.endpoint)

    @property
    def info(self) -> TransportInfo:
        """``sse`` and the SSE URL (without query or user information)."""
        return TransportInfo(kind="sse", detail=display_url(self._params.url))

    def statistics(self) -> HttpStatistics:
        """A snapshot of counters and state (see :class:`HttpStatistics`)."""
        return HttpStatistics(
            mode="legacy",
            has_session=self._legacy.endpoint is not None,
            protocol_version=self._protocol_version,
            posts=self._posts,
            gets=self._gets,
            deletes=self._deletes,
            resumptions=0,
            frames_received=self._frames_received,
            queued=len(self._outbox),
            in_flight=0,
            waiting=0,
            held=0,
            session_expiries=0,
            get_stream="open" if self._ended is None and not self._closing else "off",
        )

    async def _send_frame(self, frame: bytes, out: Outgoing, *, now: bool) -> None:
        await self._legacy.post(frame, out)

    async def _connect(self) -> None:
        """Open the event stream and wait for the ``endpoint`` event (raises like
        :meth:`LegacyConnection.open`)."""
        await self._legacy.open()


def open_sse_transport(
    params: HttpParameters, sink: FrameSink | None = None
) -> AbstractAsyncContextManager[SseTransport]:
    """``async with open_sse_transport(params, sink) as t:`` connects to the legacy HTTP+SSE
    server at ``params.url`` and yields its :class:`SseTransport` once the server has sent its
    ``endpoint`` event.

    What the server sends, and what the transport learns on its own, goes into ``sink``;
    without one, into the transport's own inbox, read with :meth:`SseTransport.receive`.
    Raises :class:`ConnectError` when the server cannot be reached or does not speak HTTP+SSE
    there, :class:`ConnectTimeout` when no endpoint arrives within ``connect_timeout`` and
    :class:`HttpStatusError` when the GET is refused (401, 404...). Leaving the block closes the
    event stream (the end of the session), even when the block is cancelled; an exception raised
    in the block comes out as itself.
    """
    return open_transport(SseTransport, params, sink)
