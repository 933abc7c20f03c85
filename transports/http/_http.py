"""The Streamable HTTP transport (protocol revisions 2025-03-26 to 2026-07-28), on httpx.

``async with open_http_transport(HttpParameters(url="http://host/mcp"), sink) as t:`` yields an
:class:`HttpTransport`; leaving the block ends the session (``DELETE``) and closes every stream.
Without a ``sink`` the transport makes its own inbox, read with ``t.receive()``.

How messages move
-----------------
- ``send`` puts a frame into the outbox; the transport's pump takes the outbox's items in order.
  Every message is a POST to the MCP endpoint with
  ``Accept: application/json, text/event-stream``, the configured headers, the session id
  (``Mcp-Session-Id``) once the server gave one, and ``MCP-Protocol-Version`` once
  :meth:`~HttpTransport.set_protocol_version` went through the outbox (after the handshake).
  The session id and the version are those of the moment the pump takes the frame. A frame
  given to :meth:`~HttpTransport.send_with_headers` carries headers of its own too (the
  2026-07-28 ``Mcp-Method``, ``Mcp-Name``, ``Mcp-Param-*``), on its POST alone.
- A POSTed *request* runs in a task of its own, so a long call never holds up another. At most
  ``max_in_flight`` requests are POSTed at once; a further one waits for a free slot in its own
  task, the waiting ones in the order the pump took them (an ``initialize``, and a frame given
  to ``send_now``, never wait). The pump itself never waits for a slot: the later items of the
  outbox (notifications, answers to server requests, ability calls; later requests join the
  queue) go on meanwhile, and a ``notifications/cancelled`` for a request still waiting stops it
  before it is POSTed. The server answers with one JSON body or with an SSE stream (events with
  empty data, such as priming events, and comments are skipped), and every message of the
  answer goes up into the sink. Once an SSE answer holds every response it was waiting for, it
  is read no further, except that its end (which the server sends right after the response) is
  waited for briefly, so that the connection serves the next request instead of being closed;
  the same goes for the empty body of a 202.
- A *notification* or a *response* is POSTed by the pump itself, which takes the next item once
  the server accepted it (202), so the server sees them in order (``notifications/initialized``
  before the next request). A refused one is logged as a warning; nobody waits for it.
- A JSON array (a 2025-03-26 batch), in a JSON body or in an event, is split into messages.
- A ``subscriptions/listen`` (2026-07-28) is a request whose answer is an SSE stream that stays
  open as long as the subscription: it is read like any answer (its notifications go up as
  frames; comment lines, the server's keep-alives, are skipped) until its response arrives or
  the stream ends. It takes no ``max_in_flight`` slot (it never waits for one, nor holds one:
  the slots are for calls), and is counted in ``statistics().in_flight`` while it lasts. Its
  HTTP connection is one of the client's pool, which holds ``max_in_flight`` + 8 connections.
  No time limit applies to it but ``read_timeout``, when one is set: set it above the
  server's keep-alive interval, or a quiet listen is cut (the session then opens it again).
  Closing it is closing its stream (a ``notifications/cancelled`` naming it, as for any
  request in the stateless shape); a stream that breaks fails it as a ``RequestFailed``.
- The first :meth:`~HttpTransport.set_protocol_version` also opens the GET stream for messages
  the server sends on its own; 405 means the server offers none. A GET stream that ends is
  reopened after the server's ``retry`` (or ``reconnect_delay``; at least 0.1 s, whatever the
  server says), with ``Last-Event-ID`` when it had event ids.

Failures of one request
-----------------------
They fail that call alone, as a :class:`~trio_mcp.transports._base.RequestFailed` in the sink,
and are never disguised as JSON-RPC errors:

- an error status answering a POSTed request: :class:`HttpStatusError` (status and an excerpt of
  the body), ``sent=True``; except a 429 with ``Retry-After``, which is waited for and the
  request POSTed again (it was not processed), while the waits fit in ``max_retry_after`` and
  what is left of the request's time; beyond that it fails at once, ``sent=False``
  (:mod:`trio_mcp.transports._retry`). Notifications and responses answered so are POSTed
  again the same way, the pump waiting meanwhile (they stay in order);
- a response stream that ends or breaks before its response: it is resumed with a GET carrying
  ``Last-Event-ID`` after the server's ``retry`` (or ``reconnect_delay``; at least 0.1 s), up
  to ``max_resume_attempts`` times in a row without progress; when that is impossible (no event
  id, 405) or fails, :class:`ServerDisconnected` with ``sent=True``: the outcome is unknown;
- an answer over ``max_frame_bytes``: :class:`FrameTooLarge`;
- a POST that failed before it started to go out on a connection (no free connection within
  ``connect_timeout``): :class:`ServerDisconnected` with ``sent=False``, safe to retry.

When the server cannot be connected to at all, the requests whose POST could not connect fail
with ``sent=False`` and the connection ends: :class:`ConnectionEnded` carries a
:class:`ConnectError` if the server never answered, else a :class:`TransportClosed`.

Session expiry
--------------
A 404 answering a request that carried our session id (or a 400 whose body says there is no
valid session, as the TypeScript SDK answers) means the server ended the session. The transport
then forgets the session id and the protocol version, stops the GET stream, and puts ONE
:class:`~trio_mcp.transports._base.SessionExpiredNotice` into the sink, whose ``lost`` holds the
ids of requests whose streams were lost with the session (outcome unknown). From then on it
holds every frame the pump takes from the outbox, and every frame the server refuses with the
old session id (the server never processed them; further refusals are held silently: one
expiry, one notice), until it is told what to do, through the outbox:

- :meth:`~HttpTransport.send_now` sends a frame past the held ones (the new ``initialize`` and
  ``notifications/initialized``: without a session id; the new session id is adopted from the
  answer to ``initialize``);
- :meth:`~HttpTransport.resume` sends the held frames, in order, and stops holding;
- :meth:`~HttpTransport.discard_held` fails each held request as never sent (a
  ``RequestFailed`` with ``sent=False``), drops the held notifications, and stops holding.

A request of an older session refused after the transport stopped holding is re-sent with the
current session after ``resume``, and fails as never processed after ``discard_held``. If the
new session expires too before ``resume`` or ``discard_held`` (while it is being initialized),
the connection ends.

The stateless shape (2026-07-28)
--------------------------------
After :meth:`~HttpTransport.set_stateless` (in outbox order) the transport speaks the shape of
the stateless revision: every message is a POST carrying ``MCP-Protocol-Version`` (the version
given) and no session id; no GET stream is opened and nothing is DELETEd on close; a response
stream that breaks before its answer is not resumed: its call fails with
:class:`ServerDisconnected`, ``sent=True`` (the outcome is unknown). A
``notifications/cancelled`` is not POSTed: the transport closes the response stream of the
request it names instead, which is how a 2026-07-28 client cancels (a request still waiting for
a slot never goes out). A 400 or 404 whose body is a JSON-RPC error (-32022 with the versions
the server supports, -32021, -32602, -32601...) is that request's error answer, put into the
sink as the server's answer; any other 400 or 404 body is an :class:`HttpStatusError`, as in the
other shapes (the session's probe reads that as "a legacy server"). ``set_stateless(None)`` goes
back to the handshake shape, as before any ``initialize``.

Fallback to HTTP+SSE
--------------------
When the first ``initialize`` POST is answered 400, 404 or 405 (the 2025-11-25
backward-compatibility rule), the transport GETs the same URL expecting an SSE stream whose first
event is ``endpoint``; if that works it speaks the legacy transport (:mod:`._sse_client`) from
then on and re-sends the ``initialize`` there, so the session does not notice. Otherwise the
``initialize`` fails with the original :class:`HttpStatusError`.

While the fallback is possible (``legacy_fallback``, and no request answered with a success
yet), the pump takes nothing after the first ``initialize`` until its answer says which
transport the server speaks: a success status lets it go on at once (the session id adopted,
before the answer's body is read), so that ``notifications/initialized`` carries the session
id; a refusal with 400, 404 or 405, once the fallback is done or failed; any other end of the
request (another status, a connection that broke), when its task ends.

Closing sends ``DELETE`` with the session id (bounded by ``close_timeout``, shielded; 405 is
fine), then closes every stream and the HTTP client. The last item in the sink is always a
:class:`~trio_mcp.transports._base.ConnectionEnded` whose ``unsent`` names the requests that
never left (still in the outbox, held, waiting for a slot, or whose POST never started to go out
on a connection).
"""

from __future__ import annotations

import logging
import re
from collections import deque
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from typing import Final, Literal

import attrs
import httpx
import trio

from ...protocol._errors import (
    AuthorizationError,
    ConnectError,
    FrameTooLarge,
    HttpStatusError,
    LocalProtocolError,
    McpError,
    RemoteProtocolError,
    ServerDisconnected,
    SessionExpired,
    TransportClosed,
)
from ...protocol._jsonrpc import CANCELLED_NOTIFICATION, RequestId
from ...protocol._sse import SseParser
from .._base import FrameSink, RequestCredentials, SessionExpiredNotice, TransportInfo
from .._retry import too_long_to_wait
from ._h1 import HttpResponse
from ._http_base import (
    ACCEPT_POST,
    ACCEPT_SSE,
    DiscardHeld,
    EndConnection,
    HttpParameters,
    HttpStatistics,
    HttpTransportBase,
    OutboxItem,
    Outgoing,
    ResumeHeld,
    SendFrame,
    SetStateless,
    ack_timeout,
    checked_request_headers,
    consume,
    content_type,
    describe_outgoing,
    discard_body,
    display_url,
    error_answer,
    excerpt,
    log_request,
    map_http_errors,
    not_sent,
    open_stream,
    open_transport,
    parse_events,
    rate_limit_delay,
    read_body,
    read_excerpt,
    read_prefix,
    status_error,
)
from ._sse_client import LegacyConnection

__all__ = ["HttpTransport", "open_http_transport"]

logger = logging.getLogger("trio_mcp.transports.http")

#: A 400 body that says the session is not valid (the TypeScript SDK: "Bad Request: No valid
#: session ID provided").
_NO_VALID_SESSION: Final = re.compile(
    r"no valid session|session not found|unknown session|invalid session|session (has )?expired",
    re.IGNORECASE,
)
#: How much of a 400 or 404 body is read in the stateless shape, where it may hold the request's
#: JSON-RPC error answer.
_ERROR_BODY_BYTES: Final = 64 * 1024
#: The least wait before a GET that reopens the stream for server-initiated messages or resumes
#: an answer's stream, whatever the server's ``retry``.
_MIN_POLL: Final = 0.1
#: How long a request waits, at most, for the first GET stream to be answered before it is
#: POSTed (see ``HttpTransport._get_settled``).
_GET_SETTLE_WAIT: Final = 2.0
#: Requests that never wait for (nor take) one of the ``max_in_flight`` slots: a new session's
#: ``initialize``, and the 2026-07-28 ``subscriptions/listen``, whose answer is a stream that
#: stays open for as long as the subscription lasts.
_SLOTLESS: Final = frozenset({"initialize", "subscriptions/listen"})

#: What follows the answer to a POSTed request: nothing more, resuming its stream, POSTing it
#: again with the current session (an older session refused it), or POSTing it again after the
#: wait a 429 asked for (``_Stream.rate_limited``).
_Next = Literal["done", "resume", "repost", "later"]


def _is_event_stream(response: HttpResponse) -> bool:
    return content_type(response) == "text/event-stream"


def _valid_session_id(value: str) -> bool:
    return bool(value) and all(0x21 <= ord(c) <= 0x7E for c in value)


@attrs.define(eq=False)
class _Stream:
    """One POSTed request (the ``seq``-th frame the pump took), from the moment the pump took
    it: its wait for a slot, its answer's SSE stream, and the GETs that resume it. The session
    id and protocol version are those of the moment the pump took the request."""

    seq: int
    frame: bytes
    out: Outgoing
    #: For the first initialize while a fallback is possible: the event the pump waits for
    #: (``_falling_back``). Set, and dropped from here, once the answer says which transport
    #: the server speaks; handed to the fallback when it is refused; set at the latest when
    #: the request's task ends.
    deciding: trio.Event | None
    ids: set[RequestId]
    session_id: str | None
    version: str | None
    #: Taken in the stateless shape of 2026-07-28 (see ``HttpTransport._stateless``).
    stateless: bool
    parser: SseParser
    #: Its place among the ``max_in_flight`` slots: ``"free"`` (an initialize or a frame sent
    #: with ``send_now``: it never waits), ``"waiting"`` (in the queue for one), ``"taken"``
    #: (it holds one until its task ends).
    slot: Literal["free", "waiting", "taken"]
    #: Set when a slot is handed to it while it waits.
    granted: trio.Event = attrs.Factory(trio.Event)
    scope: trio.CancelScope = attrs.Factory(trio.CancelScope)
    #: Events with data seen on it (all connections), to tell progress when resuming.
    events: int = 0
    #: An event over max_frame_bytes that was skipped: the call fails with it if its response
    #: does not arrive.
    too_large: FrameTooLarge | None = None
    #: When the pump took it (trio time): its time for Retry-After waits counts from there.
    taken_at: float = attrs.Factory(trio.current_time)
    #: Seconds it waited for Retry-After so far, and the last 429 (the wait it asks, the
    #: refusal) while a wait is due.
    waited: float = 0.0
    rate_limited: tuple[float, HttpStatusError] | None = None

    @property
    def method(self) -> str:
        return self.out.label


@attrs.define(eq=False)
class HttpTransport(HttpTransportBase):
    """A connection to a Streamable HTTP server. Get one from :func:`open_http_transport`; see
    the module docstring for how it behaves and :class:`trio_mcp.transports.Transport` for the
    contract.

    Concurrent ``send`` calls are allowed. Besides the contract it offers
    :meth:`set_protocol_version` (:class:`~trio_mcp.transports._base.VersionedTransport`),
    :meth:`set_stateless` (:class:`~trio_mcp.transports._base.StatelessTransport`),
    :meth:`send_with_headers` (:class:`~trio_mcp.transports._base.HeaderTransport`),
    :meth:`send_now`, :meth:`resume`, :meth:`discard_held` and :meth:`end`
    (:class:`~trio_mcp.transports._base.ResumableTransport`), :meth:`send_with_headers` and
    :meth:`send_with_headers_nowait`
    (:class:`~trio_mcp.transports._base.HeaderTransport`), :attr:`mode` and
    :meth:`statistics`.
    """

    _url: httpx.URL = attrs.field(init=False)
    _where: str = attrs.field(init=False)  # display_url(_url), for messages
    _session_id: str | None = attrs.field(default=None, init=False)
    _may_fall_back: bool = attrs.field(default=True, init=False)
    #: The first initialize's ``deciding`` event, from the moment the pump takes it until its
    #: answer says which transport the server speaks, or until the fallback is done: the pump
    #: waits for it before its next item.
    _falling_back: trio.Event | None = attrs.field(default=None, init=False)
    _legacy: LegacyConnection | None = attrs.field(default=None, init=False)
    #: Slots taken by requests (at most max_in_flight), and the requests waiting for one, in
    #: the order the pump took them: a freed slot goes to the first.
    _slots_taken: int = attrs.field(default=0, init=False)
    _slot_queue: deque[_Stream] = attrs.field(factory=deque, init=False)
    _awaiting: dict[RequestId, _Stream] = attrs.field(factory=dict, init=False)
    #: Since the session expired: frames are held until resume() or discard_held().
    _holding: bool = attrs.field(default=False, init=False)
    #: A new session is being initialized (send_now went out while holding).
    _renewing: bool = attrs.field(default=False, init=False)
    #: The frames held, each with its place in the order the pump took them.
    _held: list[tuple[int, bytes, Outgoing]] = attrs.field(factory=list, init=False)
    _taken: int = attrs.field(default=0, init=False)
    _get_scope: trio.CancelScope | None = attrs.field(default=None, init=False)
    _get_state: str = attrs.field(default="off", init=False)
    #: Set once the first GET stream was answered (open, refused, or failed). A request waits
    #: for it (at most ``_GET_SETTLE_WAIT``) before its POST: a server that sends a request's
    #: messages on the GET stream drops those sent before it is open, and the GET, though sent
    #: first, can reach the server after a POST that went on a connection already open (seen
    #: with the conformance suite's elicitation scenario: the tool's elicitation was lost).
    _get_settled: trio.Event | None = attrs.field(default=None, init=False)
    #: The requests the pump took whose tasks have not ended (waiting for a slot, or POSTed).
    _requests: set[_Stream] = attrs.field(factory=set, init=False)
    _resumptions: int = attrs.field(default=0, init=False)
    _expiries: int = attrs.field(default=0, init=False)
    #: The stateless shape of 2026-07-28 (set_stateless): POST only, no session id, no GET
    #: stream, no resumption, a cancel closes the request's stream, and a 400 or 404 whose body
    #: is a JSON-RPC error is the request's error answer. ``_protocol_version`` is its version.
    _stateless: bool = attrs.field(default=False, init=False)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self._url = self._params.endpoint
        self._where = display_url(self._url)
        self._may_fall_back = self._params.legacy_fallback

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
    def mode(self) -> Literal["streamable", "stateless", "legacy"]:
        """``"legacy"`` once the transport fell back to HTTP+SSE, ``"stateless"`` in the shape
        of 2026-07-28 (:meth:`set_stateless`), else ``"streamable"``."""
        if self._legacy is not None:
            return "legacy"
        return "stateless" if self._stateless else "streamable"

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
            queued=len(self._outbox),
            in_flight=len(self._requests) - len(self._slot_queue),
            waiting=len(self._slot_queue),
            held=len(self._held),
            session_expiries=self._expiries,
            get_stream=self._get_state,
        )

    async def set_stateless(self, version: str | None) -> None:
        """Speak the stateless shape of protocol revision ``version`` (2026-07-28) from this
        call on, in outbox order: every POST carries ``MCP-Protocol-Version: version`` and no
        session id; no stream for server-initiated messages is opened, nor is a broken response
        stream resumed (its call fails, outcome unknown); a ``notifications/cancelled`` is not
        POSTed but closes the response stream of the request it names (closing the stream is
        how a 2026-07-28 client cancels); and a 400 or 404 answer whose body is a JSON-RPC
        error is the request's error answer, not an :class:`HttpStatusError`. ``None`` goes
        back to the shape of the handshake revisions, as before any ``initialize`` (after a
        probe that found a legacy server). Raises like :meth:`send`."""
        await self._put(lambda: SetStateless(version))

    async def send_now(self, frame: bytes, request_id: RequestId | None = None) -> None:
        """Send ``frame`` past the frames held since the session expired (the new
        ``initialize`` and ``notifications/initialized``): it goes through the outbox, in order,
        but is never held, and a request never waits for a slot. Raises like :meth:`send`."""
        await self._put(lambda: SendFrame(frame, describe_outgoing(frame), now=True), len(frame))

    def send_with_headers_nowait(
        self, frame: bytes, request_id: RequestId | None, headers: Mapping[str, str]
    ) -> None:
        """:meth:`send_nowait` with ``headers`` on this frame's POST alone (and on the POSTs
        that re-send it: after a 429, or with a new session), after the configured headers and
        the transport's, replacing any of the same name
        (:class:`~trio_mcp.transports._base.HeaderTransport`: the 2026-07-28 request headers).
        A request or a notification (``request_id`` None) alike. Once the transport fell back
        to HTTP+SSE the headers are not sent (that transport has none).

        Raises :class:`LocalProtocolError` for a header that cannot be sent (see
        :func:`~trio_mcp.transports.http._http_base.checked_request_headers`): nothing is put
        into the outbox, and the transport goes on. Otherwise raises like :meth:`send_nowait`.
        """
        self._check_open()
        item = SendFrame(frame, self._with_headers(frame, headers))
        try:
            self._outbox.send_nowait(item, len(frame))
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            raise TransportClosed(self._why_closed()) from None

    async def send_with_headers(
        self, frame: bytes, request_id: RequestId | None, headers: Mapping[str, str]
    ) -> None:
        """:meth:`send_with_headers_nowait`, waiting for room in the outbox."""
        await self._put(lambda: SendFrame(frame, self._with_headers(frame, headers)), len(frame))

    @staticmethod
    def _with_headers(frame: bytes, headers: Mapping[str, str]) -> Outgoing:
        checked = checked_request_headers(headers)
        return attrs.evolve(describe_outgoing(frame), headers=checked)

    def send_as_nowait(
        self,
        frame: bytes,
        request_id: RequestId | None,
        credentials: RequestCredentials,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """:meth:`send_nowait` as ``credentials``
        (:class:`~trio_mcp.transports._base.CredentialTransport`): their headers, and
        ``headers`` (the 2026-07-28 request headers), on this frame's POST alone and on the
        POSTs that re-send it or the GETs that resume its answer; their ``auth`` instead of
        the transport's for those. An :class:`AuthorizationError` of that ``auth`` fails this
        request alone (``RequestFailed``, ``sent=False``); the connection goes on.

        Raises :class:`LocalProtocolError` (nothing put into the outbox) for a header that
        cannot be sent, a name in both, or once the transport fell back to HTTP+SSE (which has
        no headers per request: the request is never sent as the transport's own user
        instead). Otherwise raises like :meth:`send_nowait`."""
        self._check_open()
        item = SendFrame(frame, self._as(frame, credentials, headers))
        try:
            self._outbox.send_nowait(item, len(frame))
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            raise TransportClosed(self._why_closed()) from None

    async def send_as(
        self,
        frame: bytes,
        request_id: RequestId | None,
        credentials: RequestCredentials,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """:meth:`send_as_nowait`, waiting for room in the outbox."""
        await self._put(lambda: SendFrame(frame, self._as(frame, credentials, headers)), len(frame))

    def _as(
        self, frame: bytes, credentials: RequestCredentials, headers: Mapping[str, str] | None
    ) -> Outgoing:
        if self._legacy is not None:
            raise self._no_credentials()
        protocol = checked_request_headers(headers or {})
        own = checked_request_headers(dict(credentials.headers))
        taken = {name.lower() for name, _ in protocol}
        for name, _ in own:
            if name.lower() in taken:
                raise LocalProtocolError(
                    f"cannot send the header {name!r} with the credentials of "
                    f"{credentials.label!r}: the request sets it itself"
                )
        out = describe_outgoing(frame)
        return attrs.evolve(out, headers=protocol + own, credentials=credentials)

    def _no_credentials(self) -> LocalProtocolError:
        return LocalProtocolError(
            f"the server at {self._where} speaks the legacy HTTP+SSE transport, which has no "
            "headers per request: a request with credentials of its own (a tenant's) cannot "
            "be sent to it"
        )

    async def resume(self) -> None:
        """The new session is initialized: send the frames held since the old one expired, in
        order (when the pump reaches this call in the outbox), and hold no more. Raises
        :class:`TransportClosed` once the transport is closed or the connection ended."""
        await self._put(ResumeHeld)

    async def discard_held(self) -> None:
        """No new session: each held request fails as never sent (a ``RequestFailed`` with
        ``sent=False`` in the sink), held notifications are dropped, and the transport holds no
        more. Raises :class:`TransportClosed` once the transport is closed or the connection
        ended (the held requests are then in ``ConnectionEnded.unsent``)."""
        await self._put(DiscardHeld)

    async def end(self, error: McpError) -> None:
        """End the connection with ``error`` once the pump has done everything put into the
        outbox before this call (a :meth:`discard_held`'s failures come first): the last item
        in the sink is ``ConnectionEnded(error, unsent)``. Raises :class:`TransportClosed` once
        the transport is closed or the connection ended."""
        await self._put(lambda: EndConnection(error))

    # ------------------------------------------------------------------ the pump

    async def _apply(self, item: OutboxItem) -> None:
        """Apply one outbox item (in the pump), once the first initialize's answer has said
        which transport the server speaks (see ``_falling_back``)."""
        if self._falling_back is not None:
            await self._falling_back.wait()
        match item:
            case ResumeHeld():
                await self._resume_held()
            case DiscardHeld():
                await self._discard_held()
            case SetStateless(version=version):
                self._stateless = version is not None
                self._protocol_version = version
            case SendFrame(frame=frame, out=out, now=now):
                await self._send_frame(frame, out, now=now)
            case _:
                await super()._apply(item)

    async def _send_frame(self, frame: bytes, out: Outgoing, *, now: bool) -> None:
        if self._legacy is not None:
            if out.credentials is not None:  # never sent as the transport's own user instead
                await self._fail(out.requests, self._no_credentials(), sent=False)
                return
            await self._legacy.post(frame, out)
            return
        if now and self._holding:
            self._renewing = True
        self._taken += 1
        await self._dispatch(self._taken, frame, out, now=now)

    def _set_version(self, version: str) -> None:
        """Send ``version`` on every later request, and open the stream for server-initiated
        messages (Streamable HTTP) if it is not open."""
        self._protocol_version = version
        if self._legacy is None and self._get_scope is None and not self._closing:
            scope = trio.CancelScope()
            self._get_scope = scope
            if self._get_settled is None:  # the first GET only: later ones are reopenings
                self._get_settled = trio.Event()
            self._tasks.start_soon(self._run_get_stream, scope)

    async def _dispatch(
        self,
        seq: int,
        frame: bytes,
        out: Outgoing,
        *,
        now: bool = False,
    ) -> None:
        """Send one frame, the ``seq``-th the pump took (in the pump): hold it, start its
        request's task, or POST it. The pump never waits for a slot: a request waits in its own
        task, so the notifications and responses behind it go out meanwhile."""
        if self._holding and not now:
            self._hold(seq, frame, out)
            return
        if self._stateless and out.cancels and out.method == CANCELLED_NOTIFICATION:
            # 2026-07-28: closing the request's response stream is the cancellation.
            self._stop_cancelled(out)
            return
        if not out.requests:
            # A cancelled request that still waits for a slot never goes out.
            self._stop_cancelled(out, waiting_only=True)
            await self._post_message(seq, frame, out)
            return
        deciding: trio.Event | None = None
        if out.method == "initialize" and self._may_fall_back:
            # Its answer says which transport the server speaks: the next items wait for it.
            deciding = self._falling_back = trio.Event()
        # An initialize never waits for a slot: the slots may all be held by long calls of a
        # session that expired, and the new session must not wait for them. Nor does a
        # subscriptions/listen, whose stream stays open as long as the subscription: it would
        # hold a slot for good.
        slot: Literal["free", "waiting", "taken"] = "free"
        if not now and out.method not in _SLOTLESS:
            if self._slot_queue or self._slots_taken >= self._params.max_in_flight:
                slot = "waiting"
            else:
                slot, self._slots_taken = "taken", self._slots_taken + 1
        stream = _Stream(
            seq=seq,
            frame=frame,
            out=out,
            deciding=deciding,
            ids=set(out.requests),
            session_id=self._session_id,
            version=self._protocol_version,
            stateless=self._stateless,
            parser=SseParser(max_event_bytes=self._params.max_frame_bytes),
            slot=slot,
        )
        self._requests.add(stream)
        if slot == "waiting":
            self._slot_queue.append(stream)
        for request_id in out.requests:
            self._awaiting[request_id] = stream  # so that a cancel finds it, even waiting
        self._tasks.start_soon(self._post_request, stream)

    def _release_slot(self, stream: _Stream) -> None:
        """``stream`` gives up its slot or its place in the queue (synchronously): a freed slot
        goes to the first request waiting."""
        if stream.slot == "waiting":
            self._slot_queue.remove(stream)
        elif stream.slot == "taken":
            if self._slot_queue:
                first = self._slot_queue.popleft()
                first.slot = "taken"
                first.granted.set()
            else:
                self._slots_taken -= 1
        stream.slot = "free"

    def _hold_waiting(self) -> None:
        """The transport started holding frames: the requests waiting for a slot are held
        instead (their tasks stop), in the order the pump took them."""
        for stream in tuple(self._slot_queue):
            self._release_slot(stream)
            stream.ids.clear()
            stream.scope.cancel()
            self._hold(stream.seq, stream.frame, stream.out)

    def _hold(self, seq: int, frame: bytes, out: Outgoing) -> None:
        logger.debug("%s: holding %s until the new session is ready", self.info, out.label)
        self._held.append((seq, frame, out))
        self._not_left.update(out.requests)

    def _take_held(self) -> list[tuple[int, bytes, Outgoing]]:
        """The held frames, in the order the pump took them (whatever the order in which the
        server refused them), and the end of holding."""
        held, self._held = sorted(self._held, key=lambda entry: entry[0]), []
        self._holding = self._renewing = False
        return held

    async def _resume_held(self) -> None:
        held = self._take_held()
        if held:
            logger.info("%s: re-sending %d held messages", self.info, len(held))
        for seq, frame, out in held:
            await self._dispatch(seq, frame, out)

    async def _discard_held(self) -> None:
        for _, _, out in self._take_held():
            if out.requests:
                await self._fail(out.requests, self._never_processed(out), sent=False)

    def _never_processed(self, out: Outgoing) -> ServerDisconnected:
        return ServerDisconnected(
            f"{out.label} to {self.info.detail} was never processed: the server ended the "
            "session before it, and no new session was initialized; it is safe to retry",
            sent=False,
        )

    # ------------------------------------------------------------------ sending

    async def _post_message(self, seq: int, frame: bytes, out: Outgoing) -> None:
        """POST a notification or a response and wait for the server to accept it (or for the
        wait a 429 asks for, within ``max_retry_after``, and POST it again)."""
        waited = 0.0
        while True:
            session_id = self._session_id
            what = f"POST {out.label} to {self.info.detail}"
            headers = self._headers(
                accept=ACCEPT_POST,
                json_body=True,
                session_id=session_id,
                version=self._protocol_version,
                extra=out.headers,
            )
            self._posts += 1
            log_request(what, headers)
            error: HttpStatusError | None = None
            delay: float | None = None
            try:
                with map_http_errors(what):
                    async with open_stream(
                        self._client,
                        "POST",
                        self._url,
                        content=frame,
                        headers=headers,
                        timeout=ack_timeout(self._params),
                        lane=self._lane,
                    ) as response:
                        if response.is_success:
                            await discard_body(response)
                        else:
                            error = status_error(what, response, await read_excerpt(response))
                            delay = rate_limit_delay(response)
            except ConnectError as exc:
                self._end(self._unreachable(exc))
                return
            except AuthorizationError as exc:
                self._end(exc)
                return
            except TransportClosed as exc:
                logger.warning("%s: %s", self.info, exc)
            else:
                if error is not None and delay is not None:
                    limit = self._retry_limit(waited, None)
                    if delay <= limit:
                        await self._wait_for_retry(out.label, delay)
                        waited += delay
                        continue
                    error = HttpStatusError(
                        too_long_to_wait(str(error), delay, limit),
                        status=error.status,
                        body=error.body,
                    )
                if error is not None and self._is_expiry(error, session_id):
                    if await self._session_expired(session_id, held=(seq, frame, out)):
                        continue
                elif error is not None:
                    logger.warning("%s: the server refused %s: %s", self.info, out.label, error)
            self._stop_cancelled(out)
            return

    def _stop_cancelled(self, out: Outgoing, *, waiting_only: bool = False) -> None:
        """We told the server to cancel these requests: stop reading their answers. With
        ``waiting_only`` (before the cancel is POSTed), only requests still waiting for a slot
        are stopped: they never go out."""
        for request_id in out.cancels:
            stream = self._awaiting.get(request_id)
            if stream is None or (waiting_only and stream.slot != "waiting"):
                continue
            del self._awaiting[request_id]
            stream.ids.discard(request_id)
            if not stream.ids:
                if stream.slot == "waiting":
                    self._release_slot(stream)  # now: the slot must not be handed to it
                stream.scope.cancel()

    async def _post_request(self, stream: _Stream) -> None:
        """Wait for a slot if the request needs one, then POST it and read its answer
        (resuming the stream if it breaks). When it is the first initialize, its
        ``stream.deciding`` is set by :meth:`_read_answer` (a success) or by the fallback
        (see :meth:`_refused`), else here, when the task ends."""
        try:
            with stream.scope:
                if stream.slot == "waiting":
                    await stream.granted.wait()
                else:
                    await trio.lowlevel.checkpoint_if_cancelled()  # stopped before it began
                settled = self._get_settled
                if settled is not None and not settled.is_set() and stream.slot != "free":
                    with trio.move_on_after(_GET_SETTLE_WAIT):
                        await settled.wait()
                if self._holding and stream.slot == "taken":
                    # The session expired since the pump took it: held, not sent.
                    self._release_slot(stream)
                    stream.ids.clear()
                    self._hold(stream.seq, stream.frame, stream.out)
                    return
                await self._answer_request(stream.frame, stream.out, stream)
        finally:
            if stream.deciding is not None:
                self._settled(stream.deciding)
            self._requests.discard(stream)
            self._release_slot(stream)
            for request_id in stream.out.requests:
                if self._awaiting.get(request_id) is stream:
                    del self._awaiting[request_id]

    async def _answer_request(self, frame: bytes, out: Outgoing, stream: _Stream) -> None:
        departure = self._departure(out)
        while True:
            what = f"POST {out.label} to {self.info.detail}"
            headers = self._headers(
                accept=ACCEPT_POST,
                json_body=True,
                session_id=stream.session_id,
                version=stream.version,
                extra=out.headers,
            )
            self._posts += 1
            log_request(what, headers, out.credentials)
            reason = "the server ended the stream"
            step: _Next = "resume"
            try:
                with map_http_errors(what):
                    async with open_stream(
                        self._client,
                        "POST",
                        self._url,
                        content=frame,
                        headers=headers,
                        on_sending=departure.sending,
                        credentials=out.credentials,
                        lane=self._lane,
                    ) as response:
                        step = await self._read_answer(frame, out, stream, response)
            except ConnectError as exc:
                ids, stream.ids = tuple(stream.ids), set()
                await self._cannot_connect(ids, exc)
                return
            except AuthorizationError as exc:
                if out.credentials is not None:  # a tenant's sign-in: that request alone
                    await self._fail_stream(stream, exc, sent=False)
                    return
                ids, stream.ids = tuple(stream.ids), set()
                await self._not_authorized(ids, exc)
                return
            except TransportClosed as exc:
                if not departure.left:  # no free connection in time: it never went out
                    await self._fail_stream(stream, not_sent(exc), sent=False)
                    return
                reason = str(exc)
            if step == "repost":
                self._renew_stream(stream, out)
                continue
            if step == "later":
                if not await self._wait_to_repost(stream):
                    return
                departure = self._departure(out)
                continue
            if step == "resume" and stream.ids:
                if stream.stateless:
                    await self._lost(stream, f"{reason} (a 2026-07-28 stream is not resumed)")
                else:
                    await self._resume_stream(stream, reason)
            return

    async def _wait_to_repost(self, stream: _Stream) -> bool:
        """The server answered the request 429 with Retry-After (it did not process it): wait
        as asked and say True (POST it again), or fail its calls at once when the wait would
        take longer than the request may still wait (see :class:`HttpParameters`)."""
        assert stream.rate_limited is not None
        (delay, refusal), stream.rate_limited = stream.rate_limited, None
        limit = self._retry_limit(
            stream.waited, self._request_deadline(stream.out.method, stream.taken_at)
        )
        if delay > limit:
            error = HttpStatusError(
                too_long_to_wait(str(refusal), delay, limit),
                status=refusal.status,
                body=refusal.body,
            )
            await self._fail_stream(stream, error, sent=False)
            return False
        self._not_left.update(stream.ids)  # not processed: unsent, should the connection end now
        await self._wait_for_retry(stream.method, delay)
        stream.waited += delay
        return True

    def _renew_stream(self, stream: _Stream, out: Outgoing) -> None:
        """An older session refused the request after the transport stopped holding: POST it
        again, with the current session."""
        logger.debug("%s: re-sending %s with the current session", self.info, out.label)
        stream.ids = set(out.requests)
        stream.session_id = self._session_id
        stream.version = self._protocol_version
        stream.stateless = self._stateless
        stream.parser = SseParser(max_event_bytes=self._params.max_frame_bytes)
        stream.events = 0
        stream.too_large = None

    async def _read_answer(
        self, frame: bytes, out: Outgoing, stream: _Stream, response: HttpResponse
    ) -> _Next:
        """Handle the answer to a POSTed request; say what follows."""
        what = f"POST {stream.method} to {self.info.detail}"
        if not response.is_success and stream.stateless and response.status_code in (400, 404):
            return await self._refused_stateless(frame, out, stream, response)
        if not response.is_success:
            error = status_error(what, response, await read_excerpt(response))
            delay = rate_limit_delay(response)
            if delay is not None:
                stream.rate_limited = (delay, error)
                return "later"
            return await self._refused(frame, out, stream, error)
        self._reached = True
        self._may_fall_back = False
        if out.method == "initialize" and not await self._adopt_session(response, stream):
            return "done"
        if stream.deciding is not None:
            # No fallback, and the next POST carries the session id: the pump goes on now,
            # not once this answer's stream ends.
            self._settled(stream.deciding)
            stream.deciding = None
        kind = content_type(response)
        if response.status_code in (202, 204) or response.headers.get("content-length") == "0":
            # Accepted without an answer in the body: it may come on the GET stream.
            logger.debug("%s: accepted without an answer in its body", what)
            stream.ids.clear()
            await discard_body(response)
            return "done"
        if kind == "application/json":
            try:
                body = await read_body(
                    response,
                    self._params.max_frame_bytes,
                    f"the server's answer to {stream.method}",
                )
            except FrameTooLarge as exc:
                await self._fail_stream(stream, exc, sent=True)
                return "done"
            if not await self._deliver(body):
                return "done"
            if stream.ids:
                problem = RemoteProtocolError(
                    f"the server's JSON answer to {stream.method} at {self.info.detail} did "
                    "not hold its response"
                )
                await self._fail_stream(stream, problem, sent=True)
            return "done"
        if kind == "text/event-stream":
            await self._read_events(response, stream)
            return "resume" if stream.ids else "done"
        problem = RemoteProtocolError(
            f"the server answered {stream.method} at {self.info.detail} with content type "
            f"{kind or '(none)'!r}; a Streamable HTTP server answers application/json or "
            "text/event-stream"
        )
        await self._fail_stream(stream, problem, sent=True)
        return "done"

    async def _refused_stateless(
        self, frame: bytes, out: Outgoing, stream: _Stream, response: HttpResponse
    ) -> _Next:
        """A 400 or 404 answering a request in the stateless shape: a body that is a JSON-RPC
        error is the request's error answer (a 2026-07-28 server refuses a request so: -32022,
        -32021, -32602, -32601...); any other body fails the request with
        :class:`HttpStatusError`, as in the other shapes."""
        body = await read_prefix(response, _ERROR_BODY_BYTES)
        if len(out.requests) == 1:
            answer = error_answer(body, out.requests[0])
            if answer is not None:
                self._reached = True
                logger.debug(
                    "%s: HTTP %d with a JSON-RPC error answering %s",
                    self.info,
                    response.status_code,
                    stream.method,
                )
                await self._deliver(answer)
                return "done"
        what = f"POST {stream.method} to {self.info.detail}"
        return await self._refused(frame, out, stream, status_error(what, response, excerpt(body)))

    async def _fail_stream(self, stream: _Stream, error: McpError, *, sent: bool) -> None:
        """Fail every call still waiting on ``stream`` with ``error``, and forget them."""
        ids, stream.ids = tuple(stream.ids), set()
        await self._fail(ids, error, sent=sent)

    async def _adopt_session(self, response: HttpResponse, stream: _Stream) -> bool:
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
            await self._fail_stream(stream, problem, sent=True)
            return False
        self._session_id = value
        return True

    async def _refused(
        self, frame: bytes, out: Outgoing, stream: _Stream, error: HttpStatusError
    ) -> _Next:
        """A POSTed request was answered with an error status: held when it is an expiry of
        its session; the fallback to HTTP+SSE for the first initialize while a fallback is
        possible (400, 404, 405); otherwise its calls fail with ``error``."""
        if self._is_expiry(error, stream.session_id):
            stream.ids.clear()  # held, not failed: the server never processed it
            repost = await self._session_expired(stream.session_id, held=(stream.seq, frame, out))
            return "repost" if repost else "done"
        done = stream.deciding  # set for the first initialize while it may fall back
        if done is not None and self._may_fall_back and error.status in (400, 404, 405):
            # The pump waits for ``done`` (it is _falling_back): the fallback sets it.
            self._may_fall_back = False
            stream.ids.clear()
            stream.deciding = None
            self._tasks.start_soon(self._fall_back, frame, out, error, done)
            return "done"
        await self._fail_stream(stream, error, sent=True)
        return "done"

    # ------------------------------------------------------------------ reading streams

    async def _read_events(self, response: HttpResponse, stream: _Stream) -> None:
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
                await self._fail_stream(stream, stream.too_large, sent=True)
                return
            last_id = stream.parser.last_event_id
            if not last_id:
                why = f"{reason}, and the server gave no event id to resume from"
                await self._lost(stream, why)
                return
            if attempts >= params.max_resume_attempts:
                why = f"{reason}; gave up after {attempts} attempts to resume it"
                await self._lost(stream, why)
                return
            attempts += 1
            await trio.sleep(self._retry_delay(stream.parser))
            what = f"resuming the answer to {stream.method} at {self.info.detail}"
            own = stream.out.credentials  # a tenant's answer is resumed as that tenant
            headers = self._headers(
                accept=ACCEPT_SSE,
                session_id=stream.session_id,
                last_event_id=last_id,
                version=stream.version,
                extra=None if own is None else own.headers,
            )
            self._gets += 1
            self._resumptions += 1
            log_request(what, headers, own)
            delay: float | None = None
            try:
                with map_http_errors(what):
                    async with open_stream(
                        self._client,
                        "GET",
                        self._url,
                        headers=headers,
                        credentials=own,
                        lane=self._lane,
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
                        delay = rate_limit_delay(response)
            except ConnectError as exc:
                self._end(self._unreachable(exc))
                return
            except AuthorizationError as exc:
                if own is not None:
                    await self._fail_stream(stream, exc, sent=True)
                    return
                self._end(exc)
                return
            except TransportClosed as exc:
                reason = str(exc)
                continue
            if delay is not None:
                deadline = self._request_deadline(stream.out.method, stream.taken_at)
                limit = self._retry_limit(stream.waited, deadline)
                if delay <= limit:
                    attempts -= 1  # a wait asked for, not a failed attempt
                    await self._wait_for_retry(what, delay)
                    stream.waited += delay
                    continue
                error = HttpStatusError(
                    too_long_to_wait(str(error), delay, limit), status=error.status, body=error.body
                )
            if self._is_expiry(error, stream.session_id):
                lost, stream.ids = tuple(stream.ids), set()
                await self._session_expired(stream.session_id, lost=lost)
            elif error.status == 405:
                why = f"{reason}, and the server offers no resumption (GET: 405)"
                await self._lost(stream, why)
            else:
                await self._lost(stream, f"{reason}, and resuming it failed ({error})")
            return

    def _retry_delay(self, parser: SseParser) -> float:
        """Seconds to wait before a GET that reopens or resumes a stream: the server's last
        ``retry`` (else ``reconnect_delay``), never less than ``_MIN_POLL``, so that a server
        sending ``retry: 0`` gets no GETs back to back."""
        retry = parser.retry
        delay = retry / 1000 if retry is not None else self._params.reconnect_delay
        return max(delay, _MIN_POLL)

    async def _lost(self, stream: _Stream, why: str) -> None:
        error = ServerDisconnected(
            f"the answer to {stream.method} from {self.info.detail} was lost: {why}; the "
            "outcome is unknown (the request is not re-sent)",
            sent=True,
        )
        await self._fail_stream(stream, error, sent=True)

    # ------------------------------------------------------------------ the GET stream

    async def _run_get_stream(self, scope: trio.CancelScope) -> None:
        """The stream for server-initiated messages: reopened when it ends, given up on 4xx."""
        parser = SseParser(max_event_bytes=self._params.max_frame_bytes)
        failures = 0
        try:
            await self._get_stream_loop(scope, parser, failures)
        finally:
            if self._get_settled is not None:
                self._get_settled.set()

    async def _get_stream_loop(
        self, scope: trio.CancelScope, parser: SseParser, failures: int
    ) -> None:
        with scope:
            while True:
                session_id = self._session_id
                what = f"the GET stream of {self.info.detail}"
                headers = self._headers(
                    accept=ACCEPT_SSE,
                    session_id=session_id,
                    last_event_id=parser.last_event_id,
                    version=self._protocol_version,
                )
                self._gets += 1
                self._get_state = "connecting"
                log_request(f"GET {self.info.detail}", headers)
                error: HttpStatusError | None = None
                delay: float | None = None
                try:
                    with map_http_errors(what):
                        async with open_stream(
                            self._client, "GET", self._url, headers=headers, lane=self._lane
                        ) as response:
                            if self._get_settled is not None:
                                self._get_settled.set()  # answered: open or not
                            if response.status_code == 200 and _is_event_stream(response):
                                self._get_state = "open"
                                failures = 0
                                await self._read_get_events(response, parser)
                            else:
                                body = await read_excerpt(response)
                                error = status_error(f"GET {self.info.detail}", response, body)
                                delay = rate_limit_delay(response)
                except ConnectError as exc:
                    self._get_state = "failed"
                    self._end(self._unreachable(exc))
                    return
                except AuthorizationError as exc:
                    self._get_state = "failed"
                    self._end(exc)
                    return
                except TransportClosed as exc:
                    logger.debug("%s broke: %s", what, exc)
                if error is not None:
                    if self._is_expiry(error, session_id):
                        self._get_state = "off"
                        await self._session_expired(session_id)
                        return
                    if error.status < 500 and delay is None:
                        self._get_state = "unsupported"
                        level = logging.DEBUG if error.status == 405 else logging.WARNING
                        logger.log(level, "%s: no stream for server messages: %s", self.info, error)
                        return
                    failures += 1
                    if failures >= self._params.max_resume_attempts:
                        self._get_state = "failed"
                        logger.warning("%s: gave up %s: %s", self.info, what, error)
                        return
                wait = min(delay or 0.0, self._params.max_retry_after)
                await trio.sleep(max(self._retry_delay(parser), wait))

    async def _read_get_events(self, response: HttpResponse, parser: SseParser) -> None:
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

    async def _session_expired(
        self,
        session_id: str | None,
        *,
        held: tuple[int, bytes, Outgoing] | None = None,
        lost: tuple[RequestId, ...] = (),
    ) -> bool:
        """The server refused ``session_id``; ``held`` is the frame it refused (never processed),
        ``lost`` the requests whose answers were lost with it.

        The first time for the current session: forget it, hold frames, put ONE
        :class:`SessionExpiredNotice`. For an older session: fail the lost calls, and hold the
        refused frame while the transport holds frames; once it holds no more, return True (the
        caller re-sends the frame with the current session) when a new session took over, else
        fail its requests as never processed (the held frames were discarded). For the new
        session while it is being initialized: end the connection."""
        if session_id is None or session_id != self._session_id:
            if lost:
                error = ServerDisconnected(
                    f"the server at {self.info.detail} ended the session while the request was "
                    "in flight: the outcome is unknown (the request is not re-sent)",
                    sent=True,
                )
                await self._fail(lost, error, sent=True)
            if held is None:
                return False
            if self._holding:
                self._hold(*held)
                return False
            if self._session_id is not None:
                return True  # a new session took over: the caller re-sends it there
            await self._fail(held[2].requests, self._never_processed(held[2]), sent=False)
            return False
        if held is not None:
            self._hold(*held)
        if self._renewing:
            self._end(
                SessionExpired(
                    f"the server at {self.info.detail} ended the new session too, while it was "
                    "being initialized: the connection ends; open a new one",
                    lost=lost,
                )
            )
            return False
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
        self._hold_waiting()
        # The GET stream is stopped once the notice is out: this may be its own task.
        get_scope, self._get_scope, self._get_state = self._get_scope, None, "off"
        expired = SessionExpired(
            f"the server at {self.info.detail} ended the session (it no longer knows our "
            "session id): initialize a new one",
            lost=lost,
        )
        await self._emit(SessionExpiredNotice(error=expired, lost=lost))
        if get_scope is not None:
            get_scope.cancel()
        return False

    # ------------------------------------------------------------------ fallback

    async def _fall_back(
        self, frame: bytes, out: Outgoing, error: HttpStatusError, done: trio.Event
    ) -> None:
        """The first initialize was refused with 400/404/405: try HTTP+SSE at the same URL.
        The pump waits for ``done`` meanwhile."""
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
                await self._fail(out.requests, failure, sent=True)
                return
            self._legacy = legacy
            logger.info("%s: speaking the legacy HTTP+SSE transport", self.info)
            await legacy.post(frame, out)
        finally:
            self._settled(done)

    def _settled(self, done: trio.Event) -> None:
        """The transport the server speaks is known: the pump goes on."""
        if self._falling_back is done:
            self._falling_back = None
        done.set()

    # ------------------------------------------------------------------ closing

    async def _shut_down(self) -> None:
        self._stop_get_stream()
        session_id, self._session_id = self._session_id, None
        if session_id is None or self._legacy is not None:
            return
        headers = self._headers(
            accept=ACCEPT_POST, session_id=session_id, version=self._protocol_version
        )
        what = f"DELETE {self.info.detail}"
        self._deletes += 1
        log_request(what, headers)
        with trio.move_on_after(self._params.close_timeout) as timer:
            try:
                with map_http_errors(what):
                    async with open_stream(
                        self._client, "DELETE", self._url, headers=headers, lane=self._lane
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


def open_http_transport(
    params: HttpParameters, sink: FrameSink | None = None
) -> AbstractAsyncContextManager[HttpTransport]:
    """``async with open_http_transport(params, sink) as t:`` yields an :class:`HttpTransport`
    to the Streamable HTTP server at ``params.url``.

    What the server sends, and what the transport learns on its own, goes into ``sink`` (a
    channel bounded in bytes: an actor's mailbox); without one, into the transport's own inbox,
    read with :meth:`HttpTransport.receive`. Nothing is sent before the first ``send`` (the
    server is reached, or found unreachable, with the first request). Leaving the block ends the
    session (``DELETE``, bounded) and closes every stream, even when the block is cancelled; an
    exception raised in the block comes out as itself, not wrapped in an
    :class:`ExceptionGroup`.
    """
    return open_transport(HttpTransport, params, sink)
