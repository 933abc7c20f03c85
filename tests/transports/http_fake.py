"""In-process HTTP servers on 127.0.0.1 for the HTTP transport tests (trio + h11, real sockets).

- :func:`serve_http` (shipped in ``trio_mcp.actors.testing._http``, with :class:`HttpRequest`,
  :class:`Reply` and :class:`HttpServer`; imported here) runs an HTTP/1.1 server whose every
  request goes to an async handler with a :class:`Reply` to answer. It records every request,
  and can be killed and restarted on the same port; given an ``ssl_context`` it serves HTTPS.
- :class:`FakeMcpHttp` is a scriptable Streamable HTTP MCP server on top of it: sessions (404 or
  the TypeScript SDK's 400 on an unknown one), SSE or JSON answers, priming events, resumable
  streams (``Last-Event-ID``), the GET stream, DELETE; tools are async functions of the test.
  With ``era="modern"`` (or ``"dual"``, for requests that carry the 2026-07-28 envelope) it is
  a stateless 2026-07-28 server: POST only, the ``MCP-Protocol-Version`` header checked against
  ``_meta`` (-32020), the envelope (-32602) and the version (-32022) checked, errors as 400 or
  404 with a JSON-RPC body, ``server/discover``, and ``subscriptions/listen``: a long-lived SSE
  answer (:class:`HttpListen`) that acknowledges, sends keep-alive comments, carries the
  notifications the test pushes, and ends as the test says (an answer, a cut connection, a
  stream that ends without an answer).
- :class:`FakeLegacySse` is a legacy HTTP+SSE MCP server (``endpoint`` event, 202 POSTs).

Everything runs in the test's own trio run, so a test coordinates with the server through
``trio.Event``\\ s and asserts exactly what went over the wire.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Awaitable, Callable, Mapping
from contextlib import suppress
from typing import Any, Literal

import attrs
import trio
import trio.lowlevel

from trio_mcp.actors.testing._http import (
    ClientGone,
    Handler,
    HttpRequest,
    HttpServer,
    Reply,
    send_tls_alert,
    serve_http,
    sse_event,
)

__all__ = [
    "ClientGone",
    "FakeLegacySse",
    "FakeMcpHttp",
    "FakeStream",
    "Handler",
    "HttpListen",
    "HttpRequest",
    "HttpServer",
    "Reply",
    "ToolCall",
    "send_tls_alert",
    "serve_http",
    "sse_event",
    "text_result",
]

# --------------------------------------------------------------------------- the MCP fake

ToolFn = Callable[["ToolCall"], Awaitable[Any]]

SESSION_NOT_FOUND: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": None,
    "error": {"code": -32600, "message": "Session not found"},
}
NO_VALID_SESSION: dict[str, Any] = {
    "jsonrpc": "2.0",
    "error": {"code": -32000, "message": "Bad Request: No valid session ID provided"},
}


def text_result(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": False}


@attrs.define(eq=False)
class FakeStream:
    """One SSE stream of the fake (a POST's answer, or the GET stream): its events are kept, so
    a client can resume it with ``Last-Event-ID`` on another connection."""

    key: str
    retry_ms: int | None
    with_ids: bool = True
    reply: Reply | None = None
    events: list[tuple[str, str]] = attrs.field(factory=list)
    done: bool = False
    _released: trio.Event = attrs.field(factory=trio.Event)

    def _next_id(self) -> str:
        return f"{self.key}-{len(self.events) + 1}"

    async def _write(self, data: bytes) -> None:
        if self.reply is None:
            return
        try:
            await self.reply.write(data)
        except ClientGone:
            self._detach()

    def _detach(self) -> None:
        self.reply = None
        self._released.set()

    async def prime(self) -> None:
        """The priming event: an id, the retry, and empty data."""
        event_id = self._next_id()
        self.events.append((event_id, ""))
        await self._write(sse_event("", id=event_id, retry=self.retry_ms))

    async def send(self, message: Any) -> None:
        """Send (or keep, when no client is attached) one message."""
        data = json.dumps(message)
        event_id = self._next_id()
        self.events.append((event_id, data))
        await self._write(sse_event(data, id=event_id if self.with_ids else None))

    async def drop(self, *, clean: bool = False) -> None:
        """Cut the client's connection (or end it cleanly) without ending the stream."""
        reply, self.reply = self.reply, None
        if reply is not None:
            # End the response before its handler is released (it would cut it otherwise).
            with suppress(ClientGone):
                if clean:
                    await reply.end()
                else:
                    await reply.abort()
        self._released.set()

    async def finish(self) -> None:
        self.done = True
        reply, self.reply = self.reply, None
        if reply is not None and not reply.aborted:
            with suppress(ClientGone):
                await reply.end()
        self._released.set()

    async def attach(
        self,
        reply: Reply,
        after: str | None,
        *,
        prime: bool = False,
        on_attached: Callable[[], None] | None = None,
    ) -> None:
        """Serve the stream on ``reply`` (a priming event first if asked), from the event after
        ``after``, until it is done or dropped. ``on_attached`` is called once what was kept is
        replayed and new events go to ``reply`` directly."""
        index = 0
        if after is not None:
            ids = [event_id for event_id, _ in self.events]
            index = ids.index(after) + 1
        self._released.set()  # a connection attached before is released
        self._released = trio.Event()
        self.reply = None  # what is sent meanwhile is kept, and replayed below
        if prime:
            event_id = self._next_id()
            self.events.append((event_id, ""))
            index = len(self.events)
            await reply.event("", id=event_id, retry=self.retry_ms)
        while index < len(self.events):
            event_id, data = self.events[index]
            index += 1
            if data:
                await reply.write(sse_event(data, id=event_id if self.with_ids else None))
        self.reply = reply
        if on_attached is not None:
            on_attached()
        if self.done:
            await self.finish()
            return
        await self._released.wait()


@attrs.define(eq=False)
class HttpListen:
    """One ``subscriptions/listen`` the modern fake serves: what it asked for and honours, its
    stream, and how it ends. ``closed`` turns true when a write found the client gone (it
    closed the stream: how a 2026-07-28 client cancels)."""

    request_id: Any
    notifications: dict[str, Any]
    honoured: dict[str, Any]
    at: float
    reply: Reply | None = None
    #: ``"result"`` (the graceful end), ``"drop"`` (the connection is cut), ``"close"`` (the
    #: stream ends without an answer)
    how: str | None = None
    ended: trio.Event = attrs.field(factory=trio.Event)
    closed: bool = False
    comments: int = 0

    @property
    def open(self) -> bool:
        return self.reply is not None and self.how is None and not self.closed

    def tagged(self, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return {**(params or {}), "_meta": {SUBSCRIPTION_ID_KEY: self.request_id}}

    async def write(self, data: bytes) -> bool:
        if self.reply is None or self.closed:
            return False
        try:
            await self.reply.write(data)
        except ClientGone:
            self.closed = True
            return False
        return True

    async def send(self, message: Any) -> bool:
        return await self.write(sse_event(json.dumps(message)))


@attrs.define(eq=False)
class ToolCall:
    """What a fake tool gets: its arguments, the stream it answers on (``None`` for a JSON
    answer), the request id, and the fake itself."""

    name: str
    arguments: dict[str, Any]
    stream: FakeStream | None
    request_id: Any
    fake: Any


async def _echo(call: ToolCall) -> Any:
    return text_result(str(call.arguments.get("text", "")))


@attrs.define(eq=False)
class FakeMcpHttp:
    """A Streamable HTTP MCP server. Knobs are plain attributes (change them mid-test)."""

    path: str = "/mcp"
    protocol_version: str = "2025-11-25"
    json_response: bool = False
    sessions: bool = True
    priming: bool = True
    event_ids: bool = True
    retry_ms: int | None = None
    get_stream: bool = True
    #: The GET stream is answered only once this is set (a GET that reaches the server late).
    get_gate: trio.Event | None = None
    #: How an unknown session id is answered: 404 (Python SDK) or 400 (TypeScript SDK).
    expiry_status: Literal[404, 400] = 404
    delete_status: int = 200
    tools: dict[str, ToolFn] = attrs.field(factory=lambda: {"echo": _echo})
    #: ``method -> (status, body)``: answer that method's POSTs with an HTTP error.
    refuse: dict[str, tuple[int, bytes]] = attrs.field(factory=dict)
    #: Called with every POSTed JSON-RPC message (before it is answered).
    on_message: Callable[[dict[str, Any]], Awaitable[None]] | None = None
    #: ``"legacy"`` (the handshake revisions), ``"modern"`` (only the stateless 2026-07-28) or
    #: ``"dual"`` (2026-07-28 for a request whose ``_meta`` names a protocol version).
    era: Literal["legacy", "modern", "dual"] = "legacy"
    modern_versions: tuple[str, ...] = ("2026-07-28",)
    #: The first N modern requests are refused with -32022, whatever version they carry.
    unsupported_version_answers: int = 0
    #: What ``initialize`` answers (the handshake revisions; ``resources.subscribe`` lets a
    #: client send ``resources/subscribe``, which the fake accepts).
    legacy_capabilities: dict[str, Any] = attrs.field(
        factory=lambda: {"tools": {"listChanged": True}}
    )
    #: What ``server/discover`` announces (``{"tools": {"listChanged": True}}`` makes a
    #: client listen for tool changes).
    modern_capabilities: dict[str, Any] = attrs.field(factory=lambda: {"tools": {}})
    #: Seconds between the keep-alive comments of a listen's stream (None: none).
    listen_keepalive: float | None = None
    #: Filter keys a listen is not honoured for (left out of its acknowledgement).
    listen_ignores: set[str] = attrs.field(factory=set)
    listens: list[HttpListen] = attrs.field(factory=list)

    live: set[str] = attrs.field(factory=set)
    issued: list[str] = attrs.field(factory=list)
    deleted: list[str] = attrs.field(factory=list)
    messages: list[dict[str, Any]] = attrs.field(factory=list)
    streams: dict[str, FakeStream] = attrs.field(factory=dict)
    get_streams: list[FakeStream] = attrs.field(factory=list)
    _changed: trio.Event = attrs.field(factory=trio.Event)
    _counter: itertools.count[int] = attrs.field(factory=lambda: itertools.count(1))

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def wait_until(self, predicate: Callable[[], bool]) -> None:
        """Wait until ``predicate()`` holds (checked after every request the fake handles)."""
        while not predicate():
            await self._changed.wait()

    @property
    def initializes(self) -> int:
        return sum(1 for m in self.messages if m.get("method") == "initialize")

    def methods(self) -> list[str]:
        return [m["method"] for m in self.messages if "method" in m]

    def expire(self) -> None:
        """Forget every session (the next request with its id is refused)."""
        self.live.clear()

    async def push(self, message: Any) -> None:
        """Send a message on the open GET stream(s)."""
        for stream in self.get_streams:
            await stream.send(message)

    async def close_get_streams(self, *, clean: bool = True) -> None:
        """Cut the GET streams' connections; the streams go on (a client may resume them)."""
        for stream in self.get_streams:
            await stream.drop(clean=clean)

    # ------------------------------------------------------------------ HTTP

    async def handle(self, request: HttpRequest, reply: Reply) -> None:
        self._notify()
        try:
            await self._handle(request, reply)
        finally:
            self._notify()

    async def _handle(self, request: HttpRequest, reply: Reply) -> None:
        if request.path != self.path:
            await reply.send(404, b"Not Found")
        elif self.era == "modern" and request.method != "POST":
            await reply.send(405, b"Method Not Allowed", headers=[("allow", "POST")])
        elif request.method == "POST" and self._is_modern(request):
            await self._post_modern(request, reply)
        elif request.method == "POST":
            await self._post(request, reply)
        elif request.method == "GET":
            await self._get(request, reply)
        elif request.method == "DELETE":
            await self._delete(request, reply)
        else:
            await reply.send(405, b"Method Not Allowed", headers=[("allow", "GET, POST, DELETE")])

    def _session_problem(self, request: HttpRequest) -> tuple[int, Any] | None:
        if not self.sessions:
            return None
        session = request.header("mcp-session-id")
        if session is None:
            return 400, {
                "jsonrpc": "2.0",
                "id": "server-error",
                "error": {"code": -32600, "message": "Bad Request: Missing session ID"},
            }
        if session not in self.live:
            if self.expiry_status == 404:
                return 404, SESSION_NOT_FOUND
            return 400, NO_VALID_SESSION
        return None

    async def _post(self, request: HttpRequest, reply: Reply) -> None:
        accept = request.header("accept") or ""
        if "application/json" not in accept or "text/event-stream" not in accept:
            await reply.json({"error": "Not Acceptable"}, 406)
            return
        body = request.json()
        batch = isinstance(body, list)
        messages: list[dict[str, Any]] = body if batch else [body]
        initialize = any(m.get("method") == "initialize" for m in messages)
        if not initialize:
            problem = self._session_problem(request)
            if problem is not None:
                await reply.json(problem[1], problem[0])
                return
        self.messages.extend(messages)
        self._notify()
        for message in messages:
            if self.on_message is not None:
                await self.on_message(message)
            refused = self.refuse.get(message.get("method", ""))
            if refused is not None:
                await reply.send(refused[0], refused[1])
                return
        requests = [m for m in messages if "method" in m and "id" in m]
        if not requests:
            await reply.send(202)
            return
        headers: list[tuple[str, str]] = []
        if initialize and self.sessions:
            session = f"session-{next(self._counter)}"
            self.issued.append(session)
            self.live.add(session)
            headers.append(("mcp-session-id", session))
        if self.json_response:
            answers = [await self._answer(m, None) for m in requests]
            await reply.json(answers if batch else answers[0], headers=headers)
            return
        stream = FakeStream(
            key=f"s{next(self._counter)}", retry_ms=self.retry_ms, with_ids=self.event_ids
        )
        self.streams[stream.key] = stream
        await reply.start(headers=headers)
        stream.reply = reply
        if self.priming:
            await stream.prime()
        for message in requests:
            await stream.send(await self._answer(message, stream))
        await stream.finish()

    # ------------------------------------------------------------------ 2026-07-28

    def _is_modern(self, request: HttpRequest) -> bool:
        if self.era != "dual":
            return self.era == "modern"
        try:
            body = request.json()
        except ValueError:
            return False
        meta = (body.get("params") or {}).get("_meta") if isinstance(body, dict) else None
        return isinstance(meta, dict) and MODERN_VERSION_KEY in meta

    async def _post_modern(self, request: HttpRequest, reply: Reply) -> None:
        """One stateless request (or notification): checked, then answered."""
        accept = request.header("accept") or ""
        if "application/json" not in accept or "text/event-stream" not in accept:
            await reply.json({"error": "Not Acceptable"}, 406)
            return
        message = request.json()
        self.messages.append(message)
        self._notify()
        if self.on_message is not None:
            await self.on_message(message)
        if "id" not in message:
            await reply.send(202)
            return
        rid, method = message["id"], message.get("method", "")
        refused = self.refuse.get(method)
        if refused is not None:
            await reply.send(refused[0], refused[1])
            return

        async def error(status: int, code: int, text: str, data: Any = None) -> None:
            body: dict[str, Any] = {"code": code, "message": text}
            if data is not None:
                body["data"] = data
            await reply.json({"jsonrpc": "2.0", "id": rid, "error": body}, status)

        meta = (message.get("params") or {}).get("_meta")
        if not isinstance(meta, dict):
            meta = {}
        missing = [key for key in MODERN_META_KEYS if key not in meta]
        if missing:
            await error(400, -32602, f"Invalid params: missing _meta keys: {', '.join(missing)}")
            return
        version = meta[MODERN_VERSION_KEY]
        header = request.header("mcp-protocol-version")
        if header != version:
            await error(400, -32020, "MCP-Protocol-Version header does not match _meta")
            return
        if self.unsupported_version_answers > 0 or version not in self.modern_versions:
            self.unsupported_version_answers = max(0, self.unsupported_version_answers - 1)
            supported = {"supported": list(self.modern_versions), "requested": version}
            await error(400, -32022, "Unsupported protocol version", supported)
            return
        if method == "subscriptions/listen":
            await self._listen(message, reply)
            return
        if method not in ("server/discover", "tools/list", "tools/call"):
            await error(404, -32601, f"Method not found: {method}")
            return
        if self.json_response:
            await reply.json(_complete(await self._answer(message, None)))
            return
        stream = FakeStream(key=f"m{next(self._counter)}", retry_ms=None, with_ids=False)
        self.streams[stream.key] = stream
        await reply.start()
        stream.reply = reply
        await stream.send(_complete(await self._answer(message, stream)))
        await stream.finish()

    def open_listens(self) -> list[HttpListen]:
        return [listen for listen in self.listens if listen.open]

    async def push_listens(self, method: str, params: dict[str, Any] | None = None) -> int:
        """Send a notification on every open listen, tagged with its subscription id; how
        many it went on."""
        sent = 0
        for listen in self.open_listens():
            message = {"jsonrpc": "2.0", "method": method, "params": listen.tagged(params)}
            sent += await listen.send(message)
        self._notify()
        return sent

    async def end_listens(self, how: str) -> int:
        """End every open listen: ``"result"``, ``"drop"`` or ``"close"`` (see
        :class:`HttpListen`)."""
        ended = 0
        for listen in self.open_listens():
            listen.how = how
            listen.ended.set()
            ended += 1
        await trio.lowlevel.checkpoint()
        return ended

    async def _listen(self, message: dict[str, Any], reply: Reply) -> None:
        """One listen's stream: the acknowledgement, keep-alive comments, what the test pushes,
        until the test ends it or the client closes it."""
        asked = dict((message.get("params") or {}).get("notifications") or {})
        honoured = {key: value for key, value in asked.items() if key not in self.listen_ignores}
        listen = HttpListen(
            request_id=message["id"],
            notifications=asked,
            honoured=honoured,
            at=trio.current_time(),
        )
        self.listens.append(listen)
        await reply.start()
        listen.reply = reply
        acknowledgement = {"notifications": honoured}
        await listen.send(
            {
                "jsonrpc": "2.0",
                "method": "notifications/subscriptions/acknowledged",
                "params": listen.tagged(acknowledgement),
            }
        )
        self._notify()
        interval = self.listen_keepalive if self.listen_keepalive is not None else math.inf
        while listen.how is None and not listen.closed:
            with trio.move_on_after(interval):
                await listen.ended.wait()
            if listen.how is None and await listen.write(b": keep-alive\n\n"):
                listen.comments += 1
            self._notify()
        self._notify()
        if listen.how == "result":
            answer = {"jsonrpc": "2.0", "id": listen.request_id, "result": listen.tagged()}
            await listen.send(_complete(answer))
        elif listen.how == "drop":
            await reply.abort()
        listen.reply = None

    async def _answer(self, message: dict[str, Any], stream: FakeStream | None) -> dict[str, Any]:
        method, rid = message["method"], message["id"]
        params = message.get("params") or {}
        result: Any
        if method == "initialize":
            result = {
                "protocolVersion": self.protocol_version,
                "capabilities": self.legacy_capabilities,
                "serverInfo": {"name": "fake-http", "version": "1.0"},
            }
        elif method == "tools/list":
            result = {
                "tools": [
                    {"name": name, "inputSchema": {"type": "object"}} for name in sorted(self.tools)
                ]
            }
        elif method == "tools/call":
            tool = self.tools.get(params.get("name", ""))
            if tool is None:
                return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": "no"}}
            call = ToolCall(params["name"], params.get("arguments") or {}, stream, rid, self)
            result = await tool(call)
        elif method in ("ping", "resources/subscribe", "resources/unsubscribe"):
            result = {}
        elif method == "server/discover":
            result = {
                "supportedVersions": list(self.modern_versions),
                "capabilities": self.modern_capabilities,
                "_meta": {
                    "io.modelcontextprotocol/serverInfo": {"name": "fake-http", "version": "2.0"}
                },
            }
        else:
            return {
                "jsonrpc": "2.0",
                "id": rid,
                "error": {"code": -32601, "message": f"Method not found: {method}"},
            }
        return {"jsonrpc": "2.0", "id": rid, "result": result}

    async def _get(self, request: HttpRequest, reply: Reply) -> None:
        if self.get_gate is not None:
            self._notify()  # the GET is in server.requests: a test may wait for it
            await self.get_gate.wait()
        last = request.header("last-event-id")
        if last is None and not self.get_stream:
            await reply.send(405, b"Method Not Allowed", headers=[("allow", "POST")])
            return
        problem = self._session_problem(request)
        if problem is not None:
            await reply.json(problem[1], problem[0])
            return
        if last is not None:
            stream = self.streams.get(last.rsplit("-", 1)[0])
            if stream is None:
                await reply.send(404, b"unknown event id")
                return
            await reply.start()
            await stream.attach(reply, last)
            return
        stream = FakeStream(
            key=f"g{next(self._counter)}", retry_ms=self.retry_ms, with_ids=self.event_ids
        )
        self.streams[stream.key] = stream

        def attached() -> None:
            # Listed only once attached: a message pushed before would be kept, and then
            # skipped by the replay that follows the priming event.
            self.get_streams.append(stream)
            self._notify()

        await reply.start()
        await stream.attach(reply, None, prime=self.priming, on_attached=attached)

    async def _delete(self, request: HttpRequest, reply: Reply) -> None:
        session = request.header("mcp-session-id")
        if session is not None:
            self.deleted.append(session)
            self.live.discard(session)
        await reply.send(self.delete_status)


MODERN_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
SUBSCRIPTION_ID_KEY = "io.modelcontextprotocol/subscriptionId"
MODERN_META_KEYS = (MODERN_VERSION_KEY, "io.modelcontextprotocol/clientCapabilities")


def _complete(answer: dict[str, Any]) -> dict[str, Any]:
    """A 2026-07-28 answer: ``resultType`` in its result."""
    result = answer.get("result")
    if isinstance(result, dict) and "resultType" not in result:
        return {**answer, "result": {**result, "resultType": "complete"}}
    return answer


# --------------------------------------------------------------------------- legacy


@attrs.define(eq=False)
class FakeLegacySse:
    """An HTTP+SSE server. ``endpoint`` is what its endpoint event says, with ``{id}`` replaced by
    the session id (relative or absolute)."""

    sse_path: str = "/sse"
    endpoint: str = "/messages/?session_id={id}"
    #: The answer to a POST on ``sse_path`` (a Streamable HTTP client's first try).
    post_status: int = 405
    tools: dict[str, ToolFn] = attrs.field(factory=lambda: {"echo": _echo})
    refuse: dict[str, tuple[int, bytes]] = attrs.field(factory=dict)
    protocol_version: str = "2024-11-05"
    #: Events written before the endpoint event (raw SSE bytes).
    preamble: bytes = b""
    send_endpoint: bool = True
    #: Called with every POSTed JSON-RPC message before it is accepted (202).
    on_message: Callable[[Any], Awaitable[None]] | None = None

    sessions: dict[str, FakeStream] = attrs.field(factory=dict)
    messages: list[dict[str, Any]] = attrs.field(factory=list)
    _counter: itertools.count[int] = attrs.field(factory=lambda: itertools.count(1))

    def methods(self) -> list[str]:
        return [m["method"] for m in self.messages if "method" in m]

    async def end_streams(self) -> None:
        for stream in self.sessions.values():
            await stream.drop(clean=True)

    async def push(self, message: Any) -> None:
        for stream in self.sessions.values():
            await stream.send(message)

    async def handle(self, request: HttpRequest, reply: Reply) -> None:
        if request.path == self.sse_path and request.method == "GET":
            session = f"{next(self._counter):032x}"
            stream = FakeStream(key=session, retry_ms=None, with_ids=False)
            self.sessions[session] = stream
            await reply.start(content_type="text/event-stream; charset=utf-8")
            if self.preamble:
                await reply.write(self.preamble)
            if self.send_endpoint:
                endpoint = self.endpoint.format(id=session)
                await reply.write(sse_event(endpoint, event="endpoint"))
            await stream.attach(reply, None)
            return
        if request.path == self.sse_path and request.method == "POST":
            await reply.send(self.post_status, b"Method Not Allowed")
            return
        if request.method != "POST":
            await reply.send(404, b"Not Found")
            return
        wanted = ""
        for part in request.query.split("&"):
            name, _, value = part.partition("=")
            if name in ("session_id", "sessionId"):
                wanted = value
        target = self.sessions.get(wanted)
        if target is None:
            await reply.send(404, b"Could not find session")
            return
        message = request.json()
        refused = self.refuse.get(message.get("method", "") if isinstance(message, dict) else "")
        if refused is not None:
            await reply.send(refused[0], refused[1])
            return
        self.messages.append(message)
        if self.on_message is not None:
            await self.on_message(message)
        await reply.send(202, b"Accepted")
        if isinstance(message, dict) and "method" in message and "id" in message:
            await target.send(await self._answer(message))

    async def _answer(self, message: Mapping[str, Any]) -> dict[str, Any]:
        method, rid = message["method"], message["id"]
        params = message.get("params") or {}
        if method == "initialize":
            result: Any = {
                "protocolVersion": self.protocol_version,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "fake-legacy", "version": "1.0"},
            }
        elif method == "tools/list":
            result = {
                "tools": [
                    {"name": name, "inputSchema": {"type": "object"}} for name in sorted(self.tools)
                ]
            }
        elif method == "tools/call":
            tool = self.tools[params["name"]]
            call = ToolCall(params["name"], params.get("arguments") or {}, None, rid, self)
            result = await tool(call)
        else:
            return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "nope"}}
        return {"jsonrpc": "2.0", "id": rid, "result": result}
