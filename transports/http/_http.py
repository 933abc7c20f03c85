"""The Streamable HTTP transport (protocol revisions 2025-03-26 to 2025-11-25), on httpx.

``async with open_http_transport(HttpParameters(url="http://host/mcp")) as t:`` yields an
:class:`HttpTransport`; leaving the block ends the session (``DELETE``) and closes every stream.

How messages move
-----------------
- Every message we send is a POST to the MCP endpoint with
  ``Accept: application/json, text/event-stream``, the configured headers, the session id
  (``Mcp-Session-Id``) once the server gave one, and ``MCP-Protocol-Version`` once the session
  has called :meth:`HttpTransport.set_protocol_version` (after the handshake).
- A POSTed *request* runs in a task of its own, so a long call never holds up another:
  :meth:`~HttpTransport.send` returns as soon as the task has it (waiting only when
  ``max_in_flight`` answers are already awaited). The server answers with one JSON body or with
  an SSE stream (events with empty data, such as priming events, and comments are skipped), and
  every message of the answer goes to the one receive queue. Once an SSE answer holds every
  response it was waiting for, it is read no further, except that its end (which the server
  sends right after the response) is waited for briefly, so that the connection serves the next
  request instead of being closed; the same goes for the empty body of a 202.
- A *notification* or a *response* is POSTed in ``send`` itself, which returns once the server
  accepted it (202), so the server sees them in order (``notifications/initialized`` before the
  first request). A refused one is logged as a warning; nobody waits for it.
- A JSON array (a 2025-03-26 batch), in a JSON body or in an event, is split into messages.
- :meth:`~HttpTransport.set_protocol_version` also opens the GET stream for messages the server
  sends on its own; 405 means the server offers none. A GET stream that ends is reopened after
  the server's ``retry`` (or ``reconnect_delay``), with ``Last-Event-ID`` when it had event ids.

Failures of one request
-----------------------
They fail that call alone, through the handler the session registers with
:meth:`~HttpTransport.set_request_failure_handler`, and are never disguised as JSON-RPC errors:

- an error status answering a POSTed request: :class:`HttpStatusError` (status and an excerpt of
  the body);
- a response stream that ends or breaks before its response: it is resumed with a GET carrying
  ``Last-Event-ID`` after the server's ``retry`` (or ``reconnect_delay``), up to
  ``max_resume_attempts`` times in a row without progress; when that is impossible (no event
  id, 405) or fails, :class:`ServerDisconnected` with ``sent=True``: the outcome is unknown;
- an answer over ``max_frame_bytes``: :class:`FrameTooLarge`.

When the server cannot be connected to at all, the connection ends: ``receive()`` raises
:class:`ConnectError` if the server never answered, else :class:`TransportClosed` (and the
requests that could not be sent fail with ``sent=False``).

Session expiry
--------------
A 404 answering a request that carried our session id (or a 400 whose body says there is no
valid session, as the TypeScript SDK answers) means the server ended the session. The transport
then forgets the session id, holds back every frame the server refused that way (the server never
processed them) and every frame sent after it (except the new ``initialize`` and
``notifications/initialized``), and raises :class:`SessionExpired` once from ``receive()``,
carrying the ids of requests whose streams were lost with the session (outcome unknown). Further
refusals of the old session are held back silently: one expiry, one notice. The session
initializes a new session, then calls :meth:`~HttpTransport.resume` to have the held frames sent
again (or :meth:`~HttpTransport.discard_held` when it gives up).

Fallback to HTTP+SSE
--------------------
When the first ``initialize`` POST is answered 400, 404 or 405 (the 2025-11-25
backward-compatibility rule), the transport GETs the same URL expecting an SSE stream whose first
event is ``endpoint``; if that works it speaks the legacy transport (:mod:`._sse_client`) from
then on and re-sends the ``initialize`` there, so the session does not notice. Otherwise the
``initialize`` fails with the original :class:`HttpStatusError`.

Closing sends ``DELETE`` with the session id (bounded by ``close_timeout``, shielded; 405 is
fine), then closes every stream and the HTTP client.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Final, Literal

import attrs
import httpx
import trio

from ...protocol._errors import (
    ConnectError,
    FrameTooLarge,
    HttpStatusError,
    McpError,
    RemoteProtocolError,
    ServerDisconnected,
    SessionExpired,
    TransportClosed,
)
from ...protocol._jsonrpc import RequestId
from ...protocol._sse import SseParser
from .._base import TransportInfo, collapse_exception_group
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
    describe_outgoing,
    discard_body,
    display_url,
    host_tasks,
    log_request,
    make_client,
    map_http_errors,
    open_stream,
    parse_events,
    read_body,
    read_excerpt,
    status_error,
)
from ._sse_client import LegacyConnection

__all__ = ["HttpTransport", "open_http_transport"]

logger = logging.getLogger("trio_mcp.transports.http")

#: Frames that go out even while the transport holds frames back after a session expired: they
#: establish the new session.
_NEVER_HELD: Final = frozenset({"initialize", "notifications/initialized"})
#: A 400 body that says the session is not valid (the TypeScript SDK: "Bad Request: No valid
#: session ID provided").
_NO_VALID_SESSION: Final = re.compile(
    r"no valid session|session not found|unknown session|invalid session|session (has )?expired",
    re.IGNORECASE,
)
#: The least wait between two GETs of the stream for server-initiated messages.
_MIN_POLL: Final = 0.1


def _is_event_stream(response: httpx.Response) -> bool:
    return content_type(response) == "text/event-stream"


def _valid_session_id(value: str) -> bool:
    return bool(value) and all(0x21 <= ord(c) <= 0x7E for c in value)


@attrs.define(eq=False)
class _Stream:
    """The answer to one POSTed request: its SSE stream and the GETs that resume it."""

    ids: set[RequestId]
    method: str
    session_id: str | None
    parser: SseParser
    scope: trio.CancelScope = attrs.Factory(trio.CancelScope)
    #: Events with data seen on it (all connections), to tell progress when resuming.
    events: int = 0
    #: An event over max_frame_bytes that was skipped: the call fails with it if its response
    #: does not arrive.
    too_large: FrameTooLarge | None = None


@attrs.define(eq=False)
class HttpTransport(HttpTransportBase):
    """A connection to a Streamable HTTP server. Get one from :func:`open_http_transport`; see
    the module docstring for how it behaves and :class:`trio_mcp.transports.Transport` for the
    contract.

    Concurrent ``send`` calls are allowed. Besides the contract it offers
    :meth:`set_protocol_version`, :meth:`set_request_failure_handler`, :meth:`resume`,
    :meth:`discard_held` and :meth:`statistics`.
    """

    _url: httpx.URL = attrs.field(init=False)
    _where: str = attrs.field(init=False)  # display_url(_url), for messages
    _session_id: str | None = attrs.field(default=None, init=False)
    _may_fall_back: bool = attrs.field(default=True, init=False)
    _falling_back: trio.Event | None = attrs.field(default=None, init=False)
    _legacy: LegacyConnection | None = attrs.field(default=None, init=False)
    _slots: trio.Semaphore = attrs.field(init=False)
    _awaiting: dict[RequestId, _Stream] = attrs.field(factory=dict, init=False)
    _holding: bool = attrs.field(default=False, init=False)
    _held: list[tuple[bytes, Outgoing]] = attrs.field(factory=list, init=False)
    _notice: SessionExpired | None = attrs.field(default=None, init=False)
    _get_scope: trio.CancelScope | None = attrs.field(default=None, init=False)
    _get_state: str = attrs.field(default="off", init=False)
    _in_flight: int = attrs.field(default=0, init=False)
    _resumptions: int = attrs.field(default=0, init=False)
    _expiries: int = attrs.field(default=0, init=False)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self._url = httpx.URL(self._params.url)
        self._where = display_url(self._url)
        self._may_fall_back = self._params.legacy_fallback
        self._slots = trio.Semaphore(self._params.max_in_flight)

    # ------------------------------------------------------------------ public API

    @property
    def info(self) -> TransportInfo:
        """``http`` and the URL (without query or user information); ``(legacy HTTP+SSE)`` is
        added once the transport fell back to that transport."""
        detail = self._where
        if self._legacy is not None:
            detail += " (legacy HTTP+SSE)"
        return TransportInfo(kind="http", detail=detail)

    @property
    def mode(self) -> Literal["streamable", "legacy"]:
        """``"legacy"`` once the transport fell back to HTTP+SSE, else ``"streamable"``."""
        return "legacy" if self._legacy is not None else "streamable"

    def statistics(self) -> HttpStatistics:
        """A snapshot of counters and state (see :class:`HttpStatistics`)."""
        return HttpStatistics(
            mode=self.mode,
            has_session=self._session_id is not None,
            protocol_version=self._protocol_version,
            posts=self._posts,
            gets=self._gets,
            deletes=self._deletes,
            resumptions=self._resumptions,
            frames_received=self._frames_received,
            in_flight=self._in_flight,
            held=len(self._held),
            session_expiries=self._expiries,
            get_stream=self._get_state,
        )

    def set_protocol_version(self, version: str) -> None:
        """The handshake settled on ``version``: send it as ``MCP-Protocol-Version`` on every
        later request, and open the stream for server-initiated messages (Streamable HTTP)."""
        self._protocol_version = version
        if self._legacy is None and self._get_scope is None and not self._closing:
            scope = trio.CancelScope()
            self._get_scope = scope
            self._tasks.start_soon(self._run_get_stream, scope)

    async def send(self, frame: bytes) -> None:
        """Send one message (``frame``).

        A request goes out in a task of its own: this returns once that task has it (after
        waiting for a free slot when ``max_in_flight`` answers are awaited). A notification or a
        response is POSTed here, and this returns once the server accepted it (or refused it:
        that is logged). Raises :class:`TransportClosed` once the transport is closed or the
        connection ended (or the server cannot be reached: then the connection ends too),
        :class:`LocalProtocolError` when ``frame`` is not a JSON-RPC message.
        """
        self._check_open()
        out = describe_outgoing(frame)
        if self._falling_back is not None:
            await self._falling_back.wait()
            self._check_open()
        if self._legacy is not None:
            await self._legacy.post(frame, out)
            return
        if self._holding and out.method not in _NEVER_HELD:
            logger.debug("%s: holding %s until the new session is ready", self.info, out.label)
            self._held.append((frame, out))
            return
        await self._dispatch(frame, out)

    def resume(self) -> None:
        """The new session is ready: send the frames held back since the old one expired, in
        order, and take new frames again. Never blocks or raises."""
        held, self._held = self._held, []
        self._holding = False
        if held and not self._closing:
            logger.info("%s: re-sending %d held messages", self.info, len(held))
            self._tasks.start_soon(self._resend, held)

    def discard_held(self) -> tuple[RequestId, ...]:
        """Drop the frames held back since the session expired (no new session will come);
        return the ids of the requests among them, which the server never processed."""
        held, self._held = self._held, []
        return tuple(request_id for _, out in held for request_id in out.requests)

    # ------------------------------------------------------------------ sending

    async def _dispatch(self, frame: bytes, out: Outgoing) -> None:
        if out.requests:
            # An initialize never waits for a slot: the slots may all be held by long calls of
            # a session that expired, and the new session must not wait for them.
            slot = out.method != "initialize"
            if slot:
                await self._slots.acquire()
            try:
                self._check_open()
            except TransportClosed:
                if slot:
                    self._slots.release()
                raise
            # The session of the moment the frame was handed over, not of when the task runs.
            self._tasks.start_soon(self._post_request, frame, out, self._session_id, slot)
        else:
            await self._post_message(frame, out)

    async def _resend(self, held: list[tuple[bytes, Outgoing]]) -> None:
        for frame, out in held:
            if self._holding:  # the new session expired too: hold them for the next one
                self._held.append((frame, out))
                continue
            try:
                await self._dispatch(frame, out)
            except TransportClosed:
                self._fail(out.requests, self._not_sent(out), sent=False)

    def _not_sent(self, out: Outgoing) -> ServerDisconnected:
        return ServerDisconnected(
            f"{out.label} to {self.info.detail} was never sent: the connection ended first",
            sent=False,
        )

    async def _post_message(self, frame: bytes, out: Outgoing) -> None:
        """POST a notification or a response and wait for the server to accept it."""
        session_id = self._session_id
        what = f"POST {out.label} to {self.info.detail}"
        headers = self._headers(accept=ACCEPT_POST, json_body=True, session_id=session_id)
        self._posts += 1
        log_request(what, headers)
        error: HttpStatusError | None = None
        try:
            with map_http_errors(what):
                async with open_stream(
                    self._client,
                    "POST",
                    self._url,
                    content=frame,
                    headers=headers,
                    timeout=ack_timeout(self._params),
                ) as response:
                    if response.is_success:
                        await discard_body(response)
                    else:
                        error = status_error(what, response, await read_excerpt(response))
        except ConnectError as exc:
            fatal = self._unreachable(exc)
            self._end(fatal)
            raise TransportClosed(str(fatal)) from exc
        except TransportClosed as exc:
            logger.warning("%s: %s", self.info, exc)
        else:
            if error is not None and self._is_expiry(error, session_id):
                self._session_expired(session_id, held=(frame, out))
            elif error is not None:
                logger.warning("%s: the server refused %s: %s", self.info, out.label, error)
        self._stop_cancelled(out)

    def _stop_cancelled(self, out: Outgoing) -> None:
        """We told the server to cancel these requests: stop reading their answers."""
        for request_id in out.cancels:
            stream = self._awaiting.pop(request_id, None)
            if stream is not None:
                stream.ids.discard(request_id)
                if not stream.ids:
                    stream.scope.cancel()

    async def _post_request(
        self, frame: bytes, out: Outgoing, session_id: str | None, slot: bool
    ) -> None:
        """POST a request and read its answer (resuming the stream if it breaks); ``slot`` says
        whether it holds one of the ``max_in_flight`` slots."""
        stream = _Stream(
            ids=set(out.requests),
            method=out.label,
            session_id=session_id,
            parser=SseParser(max_event_bytes=self._params.max_frame_bytes),
        )
        for request_id in out.requests:
            self._awaiting[request_id] = stream
        self._in_flight += 1
        try:
            with stream.scope:
                await self._answer_request(frame, out, stream)
        finally:
            self._in_flight -= 1
            if slot:
                self._slots.release()
            for request_id in out.requests:
                if self._awaiting.get(request_id) is stream:
                    del self._awaiting[request_id]

    async def _answer_request(self, frame: bytes, out: Outgoing, stream: _Stream) -> None:
        what = f"POST {out.label} to {self.info.detail}"
        headers = self._headers(accept=ACCEPT_POST, json_body=True, session_id=stream.session_id)
        self._posts += 1
        log_request(what, headers)
        reason = "the server ended the stream"
        try:
            with map_http_errors(what):
                async with open_stream(
                    self._client, "POST", self._url, content=frame, headers=headers
                ) as response:
                    if not await self._read_answer(frame, out, stream, response):
                        return
        except ConnectError as exc:
            self._fail_stream(stream, self._unreachable_for_call(exc), sent=False)
            self._end(self._unreachable(exc))
            return
        except TransportClosed as exc:
            reason = str(exc)
        if stream.ids:
            await self._resume_stream(stream, reason)

    def _unreachable_for_call(self, exc: ConnectError) -> McpError:
        if not self._reached:
            return exc
        return ServerDisconnected(f"{exc}; the request was not sent", sent=False)

    async def _read_answer(
        self, frame: bytes, out: Outgoing, stream: _Stream, response: httpx.Response
    ) -> bool:
        """Handle the answer to a POSTed request. Returns True when its stream must be resumed
        (it ended before every response arrived)."""
        what = f"POST {stream.method} to {self.info.detail}"
        if not response.is_success:
            error = status_error(what, response, await read_excerpt(response))
            self._refused(frame, out, stream, error)
            return False
        self._reached = True
        self._may_fall_back = False
        if out.method == "initialize" and not self._adopt_session(response, stream):
            return False
        kind = content_type(response)
        if response.status_code in (202, 204) or response.headers.get("content-length") == "0":
            # Accepted without an answer in the body: it may come on the GET stream.
            logger.debug("%s: accepted without an answer in its body", what)
            stream.ids.clear()
            await discard_body(response)
            return False
        if kind == "application/json":
            try:
                body = await read_body(
                    response,
                    self._params.max_frame_bytes,
                    f"the server's answer to {stream.method}",
                )
            except FrameTooLarge as exc:
                self._fail_stream(stream, exc, sent=True)
                return False
            await self._deliver(body)
            if stream.ids:
                problem = RemoteProtocolError(
                    f"the server's JSON answer to {stream.method} at {self.info.detail} did "
                    "not hold its response"
                )
                self._fail_stream(stream, problem, sent=True)
            return False
        if kind == "text/event-stream":
            await self._read_events(response, stream)
            return bool(stream.ids)
        problem = RemoteProtocolError(
            f"the server answered {stream.method} at {self.info.detail} with content type "
            f"{kind or '(none)'!r}; a Streamable HTTP server answers application/json or "
            "text/event-stream"
        )
        self._fail_stream(stream, problem, sent=True)
        return False

    def _fail_stream(self, stream: _Stream, error: McpError, *, sent: bool) -> None:
        """Fail every call still waiting on ``stream`` with ``error``, and forget them."""
        self._fail(stream.ids, error, sent=sent)
        stream.ids.clear()

    def _adopt_session(self, response: httpx.Response, stream: _Stream) -> bool:
        """Take the session id from the answer to ``initialize``; False when it is invalid."""
        value = response.headers.get("mcp-session-id")
        if value is None:
            self._session_id = None
            return True
        if not _valid_session_id(value):
            problem = RemoteProtocolError(
                f"the server at {self.info.detail} gave a session id that is not visible ASCII "
                "(0x21-0x7E); the specification does not allow it"
            )
            self._fail_stream(stream, problem, sent=True)
            return False
        self._session_id = value
        return True

    def _refused(
        self, frame: bytes, out: Outgoing, stream: _Stream, error: HttpStatusError
    ) -> None:
        """A POSTed request was answered with an error status."""
        if self._is_expiry(error, stream.session_id):
            stream.ids.clear()  # held, not failed: the server never processed it
            self._session_expired(stream.session_id, held=(frame, out))
            return
        if out.method == "initialize" and self._may_fall_back and error.status in (400, 404, 405):
            self._may_fall_back = False
            stream.ids.clear()
            self._falling_back = trio.Event()
            self._tasks.start_soon(self._fall_back, frame, out, error, self._falling_back)
            return
        self._fail_stream(stream, error, sent=True)

    # ------------------------------------------------------------------ reading streams

    async def _read_events(self, response: httpx.Response, stream: _Stream) -> None:
        """Deliver the events of one connection of ``stream`` until its responses arrived or the
        connection ends. httpx's errors pass through (the caller maps them)."""
        parser = stream.parser

        async def take(chunk: bytes) -> bool:
            for event in parse_events(parser, chunk, lambda exc: self._skip(stream, exc)):
                if event.event != "message":
                    logger.debug("%s: ignored an event of type %r", self.info, event.event)
                    continue
                if not event.data.strip():
                    continue  # a priming event: only its id matters
                stream.events += 1
                if not await self._deliver(event.data.encode("utf-8")):
                    return False
            return bool(stream.ids)

        try:
            # Once the responses arrived, the end of the stream (which the server sends right
            # after them) is waited for briefly, so that the connection is reused.
            await consume(response, take, finish=True)
        finally:
            parser.feed_eof()

    def _skip(self, stream: _Stream, exc: FrameTooLarge) -> None:
        logger.warning("%s: skipped an event of %s: %s", self.info, stream.method, exc)
        stream.too_large = exc

    def _response_arrived(self, request_id: RequestId) -> None:
        stream = self._awaiting.pop(request_id, None)
        if stream is not None:
            stream.ids.discard(request_id)

    async def _resume_stream(self, stream: _Stream, reason: str) -> None:
        """Resume ``stream`` with GET + ``Last-Event-ID`` until its responses arrive, or fail
        its calls as outcome unknown."""
        params = self._params
        attempts = 0
        while stream.ids:
            if stream.too_large is not None:
                self._fail(stream.ids, stream.too_large, sent=True)
                return
            last_id = stream.parser.last_event_id
            if not last_id:
                self._lost(stream, f"{reason}, and the server gave no event id to resume from")
                return
            if attempts >= params.max_resume_attempts:
                self._lost(stream, f"{reason}; gave up after {attempts} attempts to resume it")
                return
            attempts += 1
            retry = stream.parser.retry
            await trio.sleep(retry / 1000 if retry is not None else params.reconnect_delay)
            what = f"resuming the answer to {stream.method} at {self.info.detail}"
            headers = self._headers(
                accept=ACCEPT_SSE, session_id=stream.session_id, last_event_id=last_id
            )
            self._gets += 1
            self._resumptions += 1
            log_request(what, headers)
            try:
                with map_http_errors(what):
                    async with open_stream(
                        self._client, "GET", self._url, headers=headers
                    ) as response:
                        if response.status_code == 200 and _is_event_stream(response):
                            before = stream.events
                            await self._read_events(response, stream)
                            if stream.events > before:
                                attempts = 0
                            reason = "the resumed stream ended"
                            continue
                        body = await read_excerpt(response)
                        error = status_error(what, response, body)
            except ConnectError as exc:
                self._end(self._unreachable(exc))
                return
            except TransportClosed as exc:
                reason = str(exc)
                continue
            if self._is_expiry(error, stream.session_id):
                lost = tuple(stream.ids)
                stream.ids.clear()
                self._session_expired(stream.session_id, lost=lost)
            elif error.status == 405:
                self._lost(stream, f"{reason}, and the server offers no resumption (GET: 405)")
            else:
                self._lost(stream, f"{reason}, and resuming it failed ({error})")
            return

    def _lost(self, stream: _Stream, why: str) -> None:
        error = ServerDisconnected(
            f"the answer to {stream.method} from {self.info.detail} was lost: {why}; the "
            "outcome is unknown (the request is not re-sent)",
            sent=True,
        )
        self._fail_stream(stream, error, sent=True)

    # ------------------------------------------------------------------ the GET stream

    async def _run_get_stream(self, scope: trio.CancelScope) -> None:
        """The stream for server-initiated messages: reopened when it ends, given up on 4xx."""
        parser = SseParser(max_event_bytes=self._params.max_frame_bytes)
        failures = 0
        with scope:
            while True:
                session_id = self._session_id
                what = f"the GET stream of {self.info.detail}"
                headers = self._headers(
                    accept=ACCEPT_SSE, session_id=session_id, last_event_id=parser.last_event_id
                )
                self._gets += 1
                self._get_state = "connecting"
                log_request(f"GET {self.info.detail}", headers)
                error: HttpStatusError | None = None
                try:
                    with map_http_errors(what):
                        async with open_stream(
                            self._client, "GET", self._url, headers=headers
                        ) as response:
                            if response.status_code == 200 and _is_event_stream(response):
                                self._get_state = "open"
                                failures = 0
                                await self._read_get_events(response, parser)
                            else:
                                body = await read_excerpt(response)
                                error = status_error(f"GET {self.info.detail}", response, body)
                except ConnectError as exc:
                    self._get_state = "failed"
                    self._end(self._unreachable(exc))
                    return
                except TransportClosed as exc:
                    logger.debug("%s broke: %s", what, exc)
                if error is not None:
                    if self._is_expiry(error, session_id):
                        self._get_state = "off"
                        self._session_expired(session_id)
                        return
                    if error.status < 500:
                        self._get_state = "unsupported"
                        level = logging.DEBUG if error.status == 405 else logging.WARNING
                        logger.log(level, "%s: no stream for server messages: %s", self.info, error)
                        return
                    failures += 1
                    if failures >= self._params.max_resume_attempts:
                        self._get_state = "failed"
                        logger.warning("%s: gave up %s: %s", self.info, what, error)
                        return
                retry = parser.retry
                delay = retry / 1000 if retry is not None else self._params.reconnect_delay
                await trio.sleep(max(delay, _MIN_POLL))

    async def _read_get_events(self, response: httpx.Response, parser: SseParser) -> None:
        def oversized(exc: FrameTooLarge) -> None:
            logger.warning("%s: skipped an event of the GET stream: %s", self.info, exc)

        async def take(chunk: bytes) -> bool:
            for event in parse_events(parser, chunk, oversized):
                if (
                    event.event == "message"
                    and event.data.strip()
                    and not await self._deliver(event.data.encode("utf-8"))
                ):
                    return False
            return True

        try:
            await consume(response, take)
        finally:
            parser.feed_eof()

    def _stop_get_stream(self) -> None:
        if self._get_scope is not None:
            self._get_scope.cancel()
            self._get_scope = None
        self._get_state = "off"

    # ------------------------------------------------------------------ session expiry

    @staticmethod
    def _is_expiry(error: HttpStatusError, session_id: str | None) -> bool:
        if session_id is None:
            return False
        return error.status == 404 or (
            error.status == 400 and _NO_VALID_SESSION.search(error.body) is not None
        )

    def _session_expired(
        self,
        session_id: str | None,
        *,
        held: tuple[bytes, Outgoing] | None = None,
        lost: tuple[RequestId, ...] = (),
    ) -> None:
        """The server refused ``session_id``. The first time for the current session: forget it,
        hold frames back, tell the session. For an older session: just hold (or re-send) the
        refused frame, and fail the lost calls."""
        if session_id is None or session_id != self._session_id:
            if held is not None:
                if self._holding:
                    self._held.append(held)
                elif not self._closing:
                    self._tasks.start_soon(self._resend, [held])
            if lost:
                error = ServerDisconnected(
                    f"the server at {self.info.detail} ended the session while the request was "
                    "in flight: the outcome is unknown (the request is not re-sent)",
                    sent=True,
                )
                self._fail(lost, error, sent=True)
            return
        self._expiries += 1
        logger.warning(
            "%s: the server ended our session; holding messages back until a new one is "
            "initialized (%d calls lost in flight)",
            self.info,
            len(lost),
        )
        self._session_id = None
        self._protocol_version = None
        self._holding = True
        self._stop_get_stream()
        if held is not None:
            self._held.append(held)
        self._notice = SessionExpired(
            f"the server at {self.info.detail} ended the session (it no longer knows our "
            "session id): initialize a new one",
            lost=lost,
        )
        self._wake()

    def _take_notice(self) -> McpError | None:
        notice, self._notice = self._notice, None
        return notice

    # ------------------------------------------------------------------ fallback

    async def _fall_back(
        self, frame: bytes, out: Outgoing, error: HttpStatusError, done: trio.Event
    ) -> None:
        """The first initialize was refused with 400/404/405: try HTTP+SSE at the same URL.
        Sends wait for ``done`` meanwhile."""
        try:
            legacy = LegacyConnection(host=self, sse_url=self._url)
            logger.info(
                "%s refused initialize (HTTP %d); trying the legacy HTTP+SSE transport there",
                self.info,
                error.status,
            )
            try:
                await legacy.open()
            except McpError as exc:
                failure = HttpStatusError(
                    f"{error} (and it is no legacy HTTP+SSE server either: {exc})",
                    status=error.status,
                    body=error.body,
                )
                self._fail(out.requests, failure, sent=True)
                return
            self._legacy = legacy
            logger.info("%s: speaking the legacy HTTP+SSE transport", self.info)
            await legacy.post(frame, out)
        finally:
            self._falling_back = None
            done.set()

    # ------------------------------------------------------------------ closing

    async def _shut_down(self) -> None:
        self._stop_get_stream()
        session_id, self._session_id = self._session_id, None
        if session_id is None or self._legacy is not None:
            return
        headers = self._headers(accept=ACCEPT_POST, session_id=session_id)
        what = f"DELETE {self.info.detail}"
        self._deletes += 1
        log_request(what, headers)
        with trio.move_on_after(self._params.close_timeout) as timer:
            try:
                with map_http_errors(what):
                    async with open_stream(
                        self._client, "DELETE", self._url, headers=headers
                    ) as response:
                        status = response.status_code
            except McpError as exc:
                logger.debug("%s failed: %s", what, exc)
                return
            if 200 <= status < 300 or status in (404, 405):
                logger.debug("%s: HTTP %d", what, status)
            else:
                logger.warning("%s: the server answered HTTP %d", what, status)
        if timer.cancelled_caught:
            logger.warning("%s got no answer within %g s", what, self._params.close_timeout)


@asynccontextmanager
async def open_http_transport(params: HttpParameters) -> AsyncIterator[HttpTransport]:
    """Yield an :class:`HttpTransport` to the Streamable HTTP server at ``params.url``.

    Nothing is sent before the first ``send`` (the server is reached, or found unreachable, with
    the first request: see :meth:`HttpTransport.receive`). Leaving the block ends the session
    (``DELETE``, bounded) and closes every stream, even when the block is cancelled; an exception
    raised in the block comes out as itself, not wrapped in an :class:`ExceptionGroup`.
    """
    with collapse_exception_group():
        client = make_client(params)
        transport: HttpTransport | None = None
        try:
            async with trio.open_nursery() as nursery:
                scope = trio.CancelScope()
                tasks: trio.Nursery = await nursery.start(host_tasks, scope)
                transport = HttpTransport(
                    params=params, client=client, tasks=tasks, tasks_scope=scope
                )
                try:
                    yield transport
                finally:
                    await transport.aclose()
        finally:
            if transport is None:
                with trio.CancelScope(shield=True), trio.move_on_after(1.0):
                    await client.aclose()
