"""A server that answers 429 with Retry-After: the request (it was not processed) is sent again
after the wait it asks for, within a bound: ``max_retry_after`` and what is left of the
request's own time, whichever is smaller; a longer wait fails it at once, saying so.

The exact times are asserted under ``autojump_clock`` against a scripted server behind
httpx's ``MockTransport`` (no sockets, so the clock may jump); a few tests run the same against
real servers on 127.0.0.1 with the real clock (lower bounds only)."""

from __future__ import annotations

import email.utils
import json
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import attrs
import httpx
import pytest
import trio
import trio.testing
import trio_websocket

from tests.transports.http_fake import FakeMcpHttp, HttpRequest, Reply, serve_http
from trio_mcp.actors.config._backoff import RetryPolicy
from trio_mcp.actors.config._config import RuntimeConfig, ServerConfig, TransportKind
from trio_mcp.actors.runtime._events import ServerState
from trio_mcp.actors.runtime._runtime import open_runtime
from trio_mcp.actors.testing._fakes import FakeServer, FakeTool
from trio_mcp.protocol import ConnectError, HttpStatusError
from trio_mcp.transports import _retry
from trio_mcp.transports._base import ConnectionEnded, Inbound, RequestFailed, open_inbox
from trio_mcp.transports._channel import ByteChannel
from trio_mcp.transports._retry import retry_after_seconds, too_long_to_wait
from trio_mcp.transports._websocket import (
    WebSocketParameters,
    accept_websocket_transport,
    open_websocket_transport,
)
from trio_mcp.transports.http import _http_base
from trio_mcp.transports.http._http import open_http_transport
from trio_mcp.transports.http._http_base import HttpParameters
from trio_mcp.transports.http._sse_client import open_sse_transport

#: The time of day while a test runs (the HTTP-date form of Retry-After is counted from it).
NOW = 1_700_000_000.0
URL = "https://mcp.test/mcp"

Inbox = ByteChannel[Inbound]


# --------------------------------------------------------------------------- Retry-After


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("7", 7.0),
        (" 120 ", 120.0),
        ("0", 0.0),
        (email.utils.formatdate(NOW + 5, usegmt=True), 5.0),
        (email.utils.formatdate(NOW + 5).replace("+0000", "-0000"), 5.0),
        (email.utils.formatdate(NOW - 30, usegmt=True), 0.0),
        ("9" * 40, math.inf),
        ("-3", None),
        ("1.5", None),
        ("soon", None),
        ("", None),
        (None, None),
    ],
)
def test_retry_after_takes_seconds_and_http_dates(value: str | None, seconds: float | None) -> None:
    assert retry_after_seconds(value, now=NOW) == seconds


# --------------------------------------------------------------------------- a scripted server


@attrs.define(eq=False)
class Scripted:
    """A Streamable HTTP (and HTTP+SSE) MCP server behind httpx's MockTransport. ``answers``:
    ``method -> [(status, headers), ...]``, answered (in order) before that method is served."""

    answers: dict[str, list[tuple[int, dict[str, str]]]] = attrs.Factory(dict)
    #: (trio time, HTTP method, JSON-RPC method or None) of every request.
    seen: list[tuple[float, str, str | None]] = attrs.Factory(list)
    legacy: bool = False
    _events: tuple[trio.MemorySendChannel[bytes], trio.MemoryReceiveChannel[bytes]] = attrs.Factory(
        lambda: trio.open_memory_channel[bytes](16)
    )

    def times(self, method: str) -> list[float]:
        return [at for at, _, name in self.seen if name == method]

    def _scripted(self, name: str) -> httpx.Response | None:
        queue = self.answers.get(name)
        if queue:
            status, headers = queue.pop(0)
            return httpx.Response(status, headers=headers, text="slow down")
        return None

    async def handle(self, request: httpx.Request) -> httpx.Response:
        trace = request.extensions.get("trace")
        if trace is not None:  # what httpcore says when the request starts to go out
            await trace("http11.send_request_headers.started", {})
        body = await request.aread()
        message = json.loads(body) if body else None
        name = message.get("method") if isinstance(message, dict) else None
        self.seen.append((trio.current_time(), request.method, name))
        if request.method == "GET" and self.legacy:
            scripted = self._scripted("GET")
            if scripted is not None:
                return scripted
            return httpx.Response(
                200, headers={"content-type": "text/event-stream"}, content=self._sse()
            )
        if request.method != "POST":
            return httpx.Response(405 if request.method == "GET" else 200)
        assert isinstance(message, dict)
        scripted = self._scripted(name or "")
        if scripted is not None:
            return scripted
        if "id" not in message:
            return httpx.Response(202)
        answer = {"jsonrpc": "2.0", "id": message["id"], "result": _result(name)}
        if self.legacy:
            await self._events[0].send(f"data: {json.dumps(answer)}\n\n".encode())
            return httpx.Response(202)
        return httpx.Response(200, json=answer)

    async def _sse(self) -> AsyncIterator[bytes]:
        yield b"event: endpoint\ndata: /messages?session=1\n\n"
        async for event in self._events[1]:
            yield event


def _result(method: str | None) -> dict[str, Any]:
    if method == "initialize":
        return {
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "scripted", "version": "1"},
        }
    if method == "tools/list":
        return {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
    if method == "tools/call":
        return {"content": [{"type": "text", "text": "done"}]}
    return {}


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> Scripted:
    """The scripted server, which every HTTP transport of the test reaches; the time of day is
    ``NOW`` (plus trio's clock)."""
    server = Scripted()

    def client(params: HttpParameters) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(server.handle))

    monkeypatch.setattr(_http_base, "make_client", client)
    monkeypatch.setattr(_retry, "wall_clock", lambda: NOW + trio.current_time())
    return server


def params(**options: Any) -> HttpParameters:
    options.setdefault("connect_timeout", 30.0)
    return HttpParameters(url=options.pop("url", URL), **options)


def frame(rid: int | None, method: str, params: dict[str, Any] | None = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params or {}}
    if rid is not None:
        message["id"] = rid
    return json.dumps(message).encode()


async def answer(inbox: Inbox) -> Any:
    item = await inbox.receive()
    assert isinstance(item, bytes), item
    return json.loads(item)


async def failure(inbox: Inbox) -> RequestFailed:
    item = await inbox.receive()
    assert isinstance(item, RequestFailed), item
    return item


def rest(inbox: Inbox) -> list[Inbound]:
    """What is left in the inbox of a closed transport."""
    items: list[Inbound] = []
    while True:
        try:
            items.append(inbox.receive_nowait())
        except trio.EndOfChannel:
            return items


def retry(seconds: float | str) -> tuple[int, dict[str, str]]:
    return 429, {"retry-after": str(seconds)}


@asynccontextmanager
async def http(parameters: HttpParameters) -> AsyncIterator[tuple[Any, Inbox]]:
    inbox = open_inbox()
    async with open_http_transport(parameters, inbox) as transport:
        yield transport, inbox


# --------------------------------------------------------------------------- Streamable HTTP


async def test_an_initialize_answered_429_is_sent_again_after_retry_after(
    scripted: Scripted, autojump_clock: trio.testing.MockClock
) -> None:
    scripted.answers["initialize"] = [retry(3), retry(4)]
    async with http(params()) as (t, inbox):
        start = trio.current_time()
        await t.send(frame(1, "initialize"))
        assert (await answer(inbox))["id"] == 1
        assert scripted.times("initialize") == [start, start + 3, start + 7]
        assert trio.current_time() == start + 7


async def test_a_call_answered_429_with_an_http_date_waits_until_that_date(
    scripted: Scripted, autojump_clock: trio.testing.MockClock
) -> None:
    async with http(params()) as (t, inbox):
        await t.send(frame(1, "initialize"))
        await answer(inbox)
        start = trio.current_time()
        date = email.utils.formatdate(NOW + start + 5, usegmt=True)
        scripted.answers["tools/call"] = [(429, {"retry-after": date})]
        await t.send(frame(2, "tools/call", {"name": "echo"}))
        assert (await answer(inbox))["result"]["content"][0]["text"] == "done"
        assert scripted.times("tools/call") == [start, start + 5]


async def test_a_wait_over_max_retry_after_fails_the_call_at_once_as_not_processed(
    scripted: Scripted, autojump_clock: trio.testing.MockClock
) -> None:
    async with http(params()) as (t, inbox):
        await t.send(frame(1, "initialize"))
        await answer(inbox)
        start = trio.current_time()
        scripted.answers["tools/call"] = [retry(120)]
        await t.send(frame(2, "tools/call", {"name": "echo"}))
        failed = await failure(inbox)
        assert trio.current_time() == start
    assert (failed.request_id, failed.sent) == (2, False)
    assert isinstance(failed.error, HttpStatusError)
    assert failed.error.status == 429
    assert str(failed.error) == (
        f"POST tools/call to {URL}: the server answered HTTP 429 Too Many Requests: slow down; "
        "it asked to retry after 120 s (Retry-After), more than this request may still wait "
        "(60 s: max_retry_after, or what is left of its timeout); the request was not "
        "processed: try again later"
    )
    assert scripted.times("tools/call") == [start]


async def test_the_waits_of_one_request_add_up_to_max_retry_after(
    scripted: Scripted, autojump_clock: trio.testing.MockClock
) -> None:
    async with http(params(max_retry_after=50.0)) as (t, inbox):
        await t.send(frame(1, "initialize"))
        await answer(inbox)
        start = trio.current_time()
        scripted.answers["tools/call"] = [retry(30), retry(30)]
        await t.send(frame(2, "tools/call", {"name": "echo"}))
        failed = await failure(inbox)
        assert trio.current_time() == start + 30
    assert "more than this request may still wait (20 s: max_retry_after" in str(failed.error)
    assert scripted.times("tools/call") == [start, start + 30]


async def test_a_wait_longer_than_what_is_left_of_the_call_fails_it_at_once(
    scripted: Scripted, autojump_clock: trio.testing.MockClock
) -> None:
    async with http(params(request_timeout=10.0)) as (t, inbox):
        await t.send(frame(1, "initialize"))
        await answer(inbox)
        start = trio.current_time()
        scripted.answers["tools/call"] = [retry(4), retry(7)]
        await t.send(frame(2, "tools/call", {"name": "echo"}))
        failed = await failure(inbox)
        assert trio.current_time() == start + 4
    assert "it asked to retry after 7 s (Retry-After), more than this request may still wait " in (
        str(failed.error)
    )
    assert "(6 s: max_retry_after, or what is left of its timeout)" in str(failed.error)


async def test_an_initialize_waits_within_connect_timeout(
    scripted: Scripted, autojump_clock: trio.testing.MockClock
) -> None:
    scripted.answers["initialize"] = [retry(25)]
    async with http(params(connect_timeout=20.0)) as (t, inbox):
        await t.send(frame(1, "initialize"))
        failed = await failure(inbox)
    assert "more than this request may still wait (20 s" in str(failed.error)


async def test_a_429_without_retry_after_fails_at_once(
    scripted: Scripted, autojump_clock: trio.testing.MockClock
) -> None:
    async with http(params()) as (t, inbox):
        await t.send(frame(1, "initialize"))
        await answer(inbox)
        scripted.answers["tools/call"] = [(429, {}), (429, {"retry-after": "later"})]
        start = trio.current_time()
        await t.send(frame(2, "tools/call", {"name": "echo"}))
        await t.send(frame(3, "tools/call", {"name": "echo"}))
        failures = {f.request_id: f for f in [await failure(inbox), await failure(inbox)]}
        assert trio.current_time() == start
    for failed in failures.values():
        assert isinstance(failed.error, HttpStatusError)
        assert failed.error.status == 429
        assert str(failed.error).endswith(
            "the server answered HTTP 429 Too Many Requests: slow down"
        )


async def test_a_notification_answered_429_is_posted_again_and_the_next_frames_wait(
    scripted: Scripted, autojump_clock: trio.testing.MockClock
) -> None:
    async with http(params()) as (t, inbox):
        await t.send(frame(1, "initialize"))
        await answer(inbox)
        start = trio.current_time()
        scripted.answers["notifications/initialized"] = [retry(2)]
        await t.send(frame(None, "notifications/initialized"))
        await t.send(frame(2, "ping"))
        assert (await answer(inbox))["id"] == 2
    assert scripted.times("notifications/initialized") == [start, start + 2]
    assert scripted.times("ping") == [start + 2]


async def test_a_call_cancelled_while_it_waits_is_never_sent_again(
    scripted: Scripted, autojump_clock: trio.testing.MockClock
) -> None:
    async with http(params()) as (t, inbox):
        await t.send(frame(1, "initialize"))
        await answer(inbox)
        start = trio.current_time()
        scripted.answers["tools/call"] = [retry(10)]
        await t.send(frame(2, "tools/call", {"name": "echo"}))
        await trio.sleep(3)
        await t.send(frame(None, "notifications/cancelled", {"requestId": 2}))
        await t.send(frame(3, "ping"))
        assert (await answer(inbox))["id"] == 3
        await trio.sleep(20)
    assert scripted.times("tools/call") == [start]
    [end] = rest(inbox)
    assert isinstance(end, ConnectionEnded)
    assert end.unsent == frozenset({2})  # it was never processed


# --------------------------------------------------------------------------- HTTP+SSE


async def test_legacy_http_sse_waits_for_retry_after_on_connect_and_on_posts(
    scripted: Scripted, autojump_clock: trio.testing.MockClock
) -> None:
    scripted.legacy = True
    scripted.answers["GET"] = [retry(2)]
    scripted.answers["tools/call"] = [retry(5)]
    inbox = open_inbox()
    start = trio.current_time()
    async with open_sse_transport(params(url="https://mcp.test/sse"), inbox) as t:
        assert trio.current_time() == start + 2
        await t.send(frame(1, "initialize"))
        assert (await answer(inbox))["id"] == 1
        await t.send(frame(2, "tools/call", {"name": "echo"}))
        assert (await answer(inbox))["id"] == 2
    gets = [at for at, verb, _ in scripted.seen if verb == "GET"]
    assert gets == [start, start + 2]
    assert scripted.times("tools/call") == [start + 2, start + 7]


async def test_legacy_http_sse_refuses_a_connect_wait_over_connect_timeout(
    scripted: Scripted, autojump_clock: trio.testing.MockClock
) -> None:
    scripted.legacy = True
    scripted.answers["GET"] = [retry(40)]
    start = trio.current_time()
    with pytest.raises(HttpStatusError) as info:
        async with open_sse_transport(params(url="https://mcp.test/sse"), open_inbox()):
            raise AssertionError("connected")
    assert trio.current_time() == start
    assert str(info.value) == too_long_to_wait(
        "GET https://mcp.test/sse (HTTP+SSE): the server answered HTTP 429 Too Many Requests: "
        "slow down",
        40,
        30,
    )


# --------------------------------------------------------------------------- real servers


async def test_the_runtime_waits_for_retry_after_over_real_http() -> None:
    fake = FakeMcpHttp()
    refused: list[float] = []

    async def handle(request: HttpRequest, reply: Reply) -> None:
        if request.method == "POST" and b'"tools/call"' in request.body and not refused:
            refused.append(trio.current_time())
            await reply.send(429, b"slow down", headers=[("retry-after", "1")])
            return
        await fake.handle(request, reply)

    async with serve_http(handle) as server:
        config = RuntimeConfig(
            servers=(ServerConfig(name="h", url=server.base + "/mcp", connect_timeout=5.0),)
        )
        async with open_runtime(config) as rt:
            with trio.fail_after(10):
                await rt.wait_ready()
                result = await rt.call("mcp_h_echo", {"text": "after a wait"})
        assert result.text == "after a wait"
    calls = [r.at for r in server.requests if b'"tools/call"' in r.body]
    assert len(calls) == 2
    assert calls[1] - calls[0] >= 1.0


async def test_a_websocket_handshake_answered_429_is_tried_again_after_retry_after() -> None:
    fake = FakeServer(tools=[FakeTool("echo")])
    handshakes: list[float] = []

    async def handle(request: trio_websocket.WebSocketRequest) -> None:
        handshakes.append(trio.current_time())
        if len(handshakes) == 1:
            await request.reject(429, extra_headers=[(b"Retry-After", b"1")], body=b"busy")
            return
        async with accept_websocket_transport(request) as transport:
            await fake.serve_transport(transport)

    async with trio.open_nursery() as nursery:
        server = await nursery.start(
            partial(trio_websocket.serve_websocket, handle, "127.0.0.1", 0, None)
        )
        url = f"ws://127.0.0.1:{server.port}/mcp"
        config = RuntimeConfig(
            servers=(ServerConfig(name="w", url=url, type=TransportKind.WS, connect_timeout=5.0),),
            retry=RetryPolicy(jitter=0.0),
        )
        async with open_runtime(config) as rt:
            with trio.fail_after(10):
                statuses = await rt.wait_ready()
        assert statuses["w"].state is ServerState.READY, statuses["w"].last_error
        assert statuses["w"].failures == 0
        assert len(handshakes) == 2
        assert handshakes[1] - handshakes[0] >= 1.0

        handshakes.clear()
        with trio.fail_after(10), pytest.raises(ConnectError) as info:
            async with open_websocket_transport(
                WebSocketParameters(url=url, max_retry_after=0.5, connect_timeout=5.0)
            ):
                raise AssertionError("connected")
        assert len(handshakes) == 1
        nursery.cancel_scope.cancel()
    assert str(info.value) == (
        f"WebSocket server {url} rejected the handshake with HTTP status 429 (Too Many "
        "Requests); it asked to retry after 1 s (Retry-After), more than this request may "
        "still wait (0.5 s: max_retry_after, or what is left of its timeout); the request was "
        "not processed: try again later"
    )
