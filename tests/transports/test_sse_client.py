"""The legacy HTTP+SSE transport, and the Streamable HTTP transport's fallback to it, against
in-process servers on 127.0.0.1 (real sockets, the real clock: every wait is bounded).

The transport-level tests open the transport with an inbox (``open_inbox()``) as its sink and
assert the exact items that arrive in it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

from tests.transports.http_fake import (
    FakeLegacySse,
    HttpRequest,
    HttpServer,
    Reply,
    ToolCall,
    serve_http,
    sse_event,
    text_result,
)
from tests.transports.test_http import (
    BOUND,
    NOTE,
    SECRET,
    Inbox,
    request,
    response,
    take,
    take_failed,
    take_json,
    the_rest,
)
from trio_mcp.actors import (
    RetryPolicy,
    RuntimeConfig,
    ServerConfig,
    ServerState,
    TransportKind,
    open_runtime,
)
from trio_mcp.actors.runtime._runtime import open_default_transport
from trio_mcp.protocol._errors import (
    ConnectError,
    ConnectTimeout,
    FrameTooLarge,
    HttpStatusError,
    ServerDisconnected,
    TransportClosed,
)
from trio_mcp.transports._base import (
    ConnectionEnded,
    ResumableTransport,
    Transport,
    VersionedTransport,
    open_inbox,
)
from trio_mcp.transports._channel import DEFAULT_MAILBOX_BYTES
from trio_mcp.transports.http._http import HttpTransport, open_http_transport
from trio_mcp.transports.http._http_base import HttpParameters
from trio_mcp.transports.http._sse_client import SseTransport, open_sse_transport


@asynccontextmanager
async def legacy_server(**knobs: Any) -> AsyncIterator[tuple[FakeLegacySse, HttpServer]]:
    fake = FakeLegacySse(**knobs)
    async with serve_http(fake.handle) as server:
        yield fake, server


def params(server: HttpServer, path: str = "/sse", **options: Any) -> HttpParameters:
    options.setdefault("connect_timeout", 5.0)
    return HttpParameters(url=server.base + path, **options)


@asynccontextmanager
async def opened(
    parameters: HttpParameters, *, inbox_bytes: int = DEFAULT_MAILBOX_BYTES
) -> AsyncIterator[tuple[SseTransport, Inbox]]:
    """The HTTP+SSE transport, with an inbox of ``inbox_bytes`` as its sink."""
    inbox = open_inbox(inbox_bytes)
    async with open_sse_transport(parameters, inbox) as t:
        yield t, inbox


@asynccontextmanager
async def opened_http(parameters: HttpParameters) -> AsyncIterator[tuple[HttpTransport, Inbox]]:
    """The Streamable HTTP transport (which may fall back), with an inbox as its sink."""
    inbox = open_inbox()
    async with open_http_transport(parameters, inbox) as t:
        yield t, inbox


def closed_cleanly(t: SseTransport | HttpTransport, inbox: Inbox) -> None:
    [end] = the_rest(inbox)
    assert isinstance(end, ConnectionEnded)
    assert type(end.error) is TransportClosed
    assert str(end.error) == f"the transport to {t.info.detail} was closed; open a new one"
    assert end.unsent == frozenset()


INITIALIZE = request(
    1,
    "initialize",
    {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    },
)
INITIALIZED = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()


# --------------------------------------------------------------------------- the wire


async def test_it_has_the_contract_and_the_version_ability_only() -> None:
    async with legacy_server() as (_, server), opened(params(server)) as (t, _inbox):
        assert isinstance(t, Transport)
        assert isinstance(t, VersionedTransport)
        assert not isinstance(t, ResumableTransport)
        with pytest.raises(RuntimeError, match="go to the sink it was opened with"):
            await t.receive()


@pytest.mark.parametrize(
    "endpoint",
    [
        "/messages/?session_id={id}",  # the Python SDK
        "/message?sessionId={id}",  # the TypeScript SDK
        "messages/?session_id={id}",  # relative to the SSE URL
        "http://127.0.0.1:{port}/messages/?session_id={id}",  # absolute, same origin
    ],
    ids=["python", "typescript", "relative", "absolute"],
)
async def test_the_endpoint_event_is_followed_in_every_spelling(endpoint: str) -> None:
    fake = FakeLegacySse()
    async with serve_http(fake.handle) as server:
        fake.endpoint = endpoint.replace("{port}", str(server.port))
        headers = {"Authorization": f"Bearer {SECRET}"}
        async with opened(params(server, headers=headers)) as (t, inbox):
            assert t.info.kind == "sse"
            assert t.info.detail == f"{server.base}/sse"
            await t.send(INITIALIZE)
            answer = await take_json(inbox)
            assert answer["result"]["serverInfo"]["name"] == "fake-legacy"
            await t.set_protocol_version("2024-11-05")
            await t.send(INITIALIZED)
            await t.send(request(2, "tools/call", {"name": "echo", "arguments": {"text": "hi"}}))
            assert await take_json(inbox) == response(2, text_result("hi"))
            stats = t.statistics()
            assert (stats.mode, stats.posts, stats.gets, stats.frames_received) == (
                "legacy",
                3,
                1,
                2,
            )
        closed_cleanly(t, inbox)
        (get,) = server.by_method("GET")
        assert get.path == "/sse"
        assert get.header("accept") == "text/event-stream"
        assert get.header("authorization") == f"Bearer {SECRET}"
        posts = server.by_method("POST")
        assert len(posts) == 3
        (session,) = fake.sessions
        for post in posts:
            assert post.path in ("/messages/", "/message")
            assert session in post.query
            assert post.header("content-type") == "application/json"
            assert post.header("authorization") == f"Bearer {SECRET}"
        assert posts[0].header("mcp-protocol-version") is None
        assert posts[1].header("mcp-protocol-version") == "2024-11-05"
        assert posts[2].header("mcp-protocol-version") == "2024-11-05"
        assert fake.methods() == ["initialize", "notifications/initialized", "tools/call"]


async def test_posts_share_one_connection_beside_the_event_stream() -> None:
    # The server's 202 "Accepted" body is read, so the connection serves the next POST.
    async with legacy_server() as (_, server), opened(params(server)) as (t, inbox):
        await t.send(INITIALIZE)
        assert (await take_json(inbox))["id"] == 1
        for rid in (2, 3, 4):
            await t.send(request(rid, "ping"))
            assert (await take_json(inbox))["id"] == rid
    closed_cleanly(t, inbox)
    (get,) = server.by_method("GET")
    assert get.connection == 1
    assert [post.connection for post in server.by_method("POST")] == [2, 2, 2, 2]
    assert server.connections == 2


async def test_the_pump_posts_each_frame_once_the_one_before_was_accepted() -> None:
    gate = trio.Event()

    async def hook(message: Any) -> None:
        if message.get("id") == 2:
            await gate.wait()

    async with (
        legacy_server(on_message=hook) as (fake, server),
        opened(params(server)) as (
            t,
            inbox,
        ),
    ):
        await t.send(request(2, "ping"))
        await t.send(request(3, "ping"))
        with trio.fail_after(BOUND):
            await trio.testing.wait_all_tasks_blocked()
        assert [m["id"] for m in fake.messages] == [2]
        assert t.statistics().queued == 1
        gate.set()
        assert [(await take_json(inbox))["id"] for _ in range(2)] == [2, 3]
    closed_cleanly(t, inbox)


async def test_messages_before_the_endpoint_and_batches_are_delivered() -> None:
    note = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": 0}}
    preamble = sse_event(json.dumps(note)) + b": a comment\n\n" + sse_event("x", event="other")
    async with (
        legacy_server(preamble=preamble) as (fake, server),
        opened(params(server)) as (t, inbox),
    ):
        assert await take_json(inbox) == note
        await fake.push([note, response(9)])
        assert await take_json(inbox) == note
        assert await take_json(inbox) == response(9)
    closed_cleanly(t, inbox)


async def test_a_full_sink_stops_reading_the_event_stream_and_nothing_is_lost() -> None:
    notes = [{**NOTE, "params": {"level": "info", "data": n}} for n in range(10)]
    size = len(json.dumps(notes[0]))
    async with (
        legacy_server() as (fake, server),
        opened(params(server), inbox_bytes=2 * size + size // 2) as (t, inbox),
    ):
        for note in notes:
            await fake.push(note)
        with trio.fail_after(BOUND):
            await trio.testing.wait_all_tasks_blocked()
        # Two frames in the inbox, the reader waiting with the third.
        assert (len(inbox), t.statistics().frames_received) == (2, 3)
        assert [await take_json(inbox) for _ in range(10)] == notes
    closed_cleanly(t, inbox)


async def test_an_endpoint_on_another_origin_is_refused() -> None:
    async with legacy_server(endpoint="http://example.com/messages/?session_id={id}") as (
        _,
        server,
    ):
        with trio.fail_after(BOUND), pytest.raises(ConnectError) as caught:
            async with open_sse_transport(params(server)):
                raise AssertionError("unreachable")
    assert str(caught.value) == (
        f"the HTTP+SSE server at {server.base}/sse named an endpoint on another origin "
        "(http://example.com/messages/?...); refused, so that the configured headers are not "
        "sent to another server"
    )


async def test_an_sse_url_that_is_not_an_event_stream_is_refused() -> None:
    async def handler(request: HttpRequest, reply: Reply) -> None:
        if request.path == "/json":
            await reply.json({"hello": 1})
        elif request.path == "/ends":
            await reply.start()
        else:
            await reply.send(401, b"who are you?")

    async with serve_http(handler) as server:
        with trio.fail_after(BOUND):
            with pytest.raises(HttpStatusError) as refused:
                async with open_sse_transport(params(server, "/sse")):
                    raise AssertionError("unreachable")
            with pytest.raises(ConnectError) as not_sse:
                async with open_sse_transport(params(server, "/json")):
                    raise AssertionError("unreachable")
            with pytest.raises(ConnectError) as ended:
                async with open_sse_transport(params(server, "/ends")):
                    raise AssertionError("unreachable")
    assert refused.value.status == 401
    assert str(refused.value) == (
        f"GET {server.base}/sse (HTTP+SSE): the server answered HTTP 401 Unauthorized: who are you?"
    )
    assert str(not_sse.value) == (
        f"GET {server.base}/json answered application/json instead of an event stream "
        "(text/event-stream): it is not an HTTP+SSE endpoint"
    )
    assert str(ended.value) == (
        f"the HTTP+SSE event stream of {server.base}/ends ended before the server sent its "
        "endpoint event; is this an HTTP+SSE server?"
    )


async def test_no_endpoint_within_connect_timeout_is_a_connect_timeout() -> None:
    async with legacy_server(send_endpoint=False) as (_, server):
        with trio.fail_after(BOUND), pytest.raises(ConnectTimeout) as caught:
            async with open_sse_transport(params(server, connect_timeout=0.2)):
                raise AssertionError("unreachable")
    assert str(caught.value) == (
        f"the HTTP+SSE server at {server.base}/sse sent no endpoint event within 0.2 s "
        "(connect_timeout)"
    )


async def test_a_refused_request_fails_alone_and_a_404_ends_the_session() -> None:
    async with legacy_server() as (fake, server), opened(params(server)) as (t, inbox):
        fake.refuse["tools/list"] = (500, b"broken")
        await t.send(request(2, "tools/list"))
        await t.send(INITIALIZE)
        failed = await take_failed(inbox)  # the pump POSTs in order: 2 failed first
        assert (failed.request_id, failed.sent) == (2, True)
        assert isinstance(failed.error, HttpStatusError) and failed.error.status == 500
        assert str(failed.error) == (
            f"POST tools/list to {server.base}/messages/?...: the server answered HTTP "
            "500 Internal Server Error: broken"
        )
        assert (await take_json(inbox))["id"] == 1
        fake.sessions.clear()  # the server forgets the session
        await t.send(request(3, "ping"))
        refused = await take_failed(inbox)
        end = await take(inbox)
        with pytest.raises(TransportClosed, match=r"^the connection ended: the server no"):
            await t.send(request(4, "ping"))
    assert (refused.request_id, refused.sent) == (3, False)
    assert isinstance(refused.error, ServerDisconnected) and refused.error.sent is False
    assert isinstance(end, ConnectionEnded)
    assert str(end.error).startswith(
        "the server no longer knows this HTTP+SSE session (POST ping to "
    )
    assert end.unsent == frozenset()
    assert the_rest_is_empty(inbox)


def the_rest_is_empty(inbox: Inbox) -> bool:
    """The inbox is closed and empty (its ConnectionEnded was taken already)."""
    try:
        inbox.receive_nowait()
    except trio.EndOfChannel:
        return True
    return False


async def test_the_end_of_the_event_stream_ends_the_connection() -> None:
    async with legacy_server() as (fake, server), opened(params(server)) as (t, inbox):
        await fake.push(response(5))
        await fake.end_streams()
        assert await take_json(inbox) == response(5)  # what came first is kept
        end = await take(inbox)
        with pytest.raises(TransportClosed, match=r"^the connection ended: "):
            await t.send(request(6, "ping"))
        assert t.statistics().get_stream == "off"
    assert isinstance(end, ConnectionEnded)
    assert str(end.error) == (
        f"the HTTP+SSE connection to {server.base}/sse ended: the server ended the event stream"
    )
    assert end.unsent == frozenset()
    assert the_rest_is_empty(inbox)


async def test_an_oversized_event_ends_the_connection() -> None:
    async with (
        legacy_server() as (fake, server),
        opened(params(server, max_frame_bytes=200)) as (_, inbox),
    ):
        await fake.push(response(5, {"blob": "x" * 300}))
        end = await take(inbox)
    assert isinstance(end, ConnectionEnded)
    assert isinstance(end.error, FrameTooLarge) and end.error.limit == 200
    assert str(end.error).startswith(
        f"the HTTP+SSE server at {server.base}/sse sent an event over 200 bytes"
    )
    assert the_rest_is_empty(inbox)


async def test_without_a_sink_receive_raises_the_end_of_the_connection() -> None:
    async with legacy_server() as (fake, server), open_sse_transport(params(server)) as t:
        with trio.fail_after(BOUND):
            await fake.push(response(5))
            await fake.end_streams()
            assert json.loads(await t.receive()) == response(5)
            for _ in range(2):  # and again on every later call
                with pytest.raises(TransportClosed, match=r"^the HTTP\+SSE connection to "):
                    await t.receive()


async def test_requests_still_in_the_outbox_are_unsent_in_the_end() -> None:
    gate = trio.Event()

    async def hook(message: Any) -> None:
        if message.get("id") == 2:
            await gate.wait()  # never accepted before the close

    async with legacy_server(on_message=hook) as (_fake, server):
        async with opened(params(server)) as (t, inbox):
            await t.send(request(2, "ping"))
            await t.send(request(3, "ping"))
            await t.send(request(4, "ping"))
            with trio.fail_after(BOUND):
                await trio.testing.wait_all_tasks_blocked()
        [end] = the_rest(inbox)
        assert isinstance(end, ConnectionEnded)
        assert end.unsent == frozenset({3, 4})  # 2 left: its outcome is unknown
        gate.set()


# --------------------------------------------------------------------------- fallback


@pytest.mark.parametrize("status", [400, 404, 405])
async def test_streamable_http_falls_back_to_http_sse_on_400_404_405(status: int) -> None:
    async with legacy_server(
        sse_path="/mcp", post_status=status, endpoint="/message?sessionId={id}"
    ) as (
        fake,
        server,
    ):
        async with opened_http(params(server, "/mcp")) as (t, inbox):
            await t.send(INITIALIZE)
            await t.send(INITIALIZED)  # the pump waits for the fallback
            answer = await take_json(inbox)
            assert answer["result"]["serverInfo"]["name"] == "fake-legacy"
            await t.set_protocol_version("2024-11-05")
            await t.send(request(2, "tools/call", {"name": "echo", "arguments": {"text": "x"}}))
            assert await take_json(inbox) == response(2, text_result("x"))
            assert t.mode == "legacy"
            assert t.statistics().mode == "legacy"
            assert t.info.detail == f"{server.base}/mcp (legacy HTTP+SSE)"
        closed_cleanly(t, inbox)
        first, *_ = server.requests
        assert (first.method, first.path) == ("POST", "/mcp")
        assert [(r.method, r.path) for r in server.requests[1:3]] == [
            ("GET", "/mcp"),
            ("POST", "/message"),
        ]
        assert fake.methods() == ["initialize", "notifications/initialized", "tools/call"]
        assert server.by_method("DELETE") == []


async def test_a_failed_fallback_fails_the_initialize_with_the_original_status() -> None:
    async def handler(request: HttpRequest, reply: Reply) -> None:
        if request.method == "POST":
            await reply.send(404, b"no MCP here")
        else:
            await reply.send(404, b"nothing here either")

    async with serve_http(handler) as server, opened_http(params(server, "/mcp")) as (t, inbox):
        await t.send(INITIALIZE)
        failed = await take_failed(inbox)
        assert t.mode == "streamable"
    closed_cleanly(t, inbox)
    assert (failed.request_id, failed.sent) == (1, True)
    assert isinstance(failed.error, HttpStatusError) and failed.error.status == 404
    assert str(failed.error) == (
        f"POST initialize to {server.base}/mcp: the server answered HTTP 404 Not Found: no "
        f"MCP here (and it is no legacy HTTP+SSE server either: GET {server.base}/mcp "
        "(HTTP+SSE): the server answered HTTP 404 Not Found: nothing here either)"
    )


async def test_no_fallback_when_it_is_turned_off_or_after_the_first_initialize() -> None:
    async with legacy_server(sse_path="/mcp") as (_, server):
        async with opened_http(params(server, "/mcp", legacy_fallback=False)) as (t, inbox):
            await t.send(INITIALIZE)
            failed = await take_failed(inbox)
        closed_cleanly(t, inbox)
        assert isinstance(failed.error, HttpStatusError)
        assert failed.error.status == 405
        assert server.by_method("GET") == []


# --------------------------------------------------------------------------- under the runtime


async def test_the_runtime_speaks_http_sse_with_type_sse_and_by_fallback() -> None:
    async def slow_echo(call: ToolCall) -> Any:
        await trio.sleep(0.01)
        return text_result(f"legacy {call.arguments['text']}")

    async with legacy_server(sse_path="/mcp") as (fake, server):
        fake.tools["echo"] = slow_echo
        direct = ServerConfig(name="direct", type=TransportKind.SSE, url=f"{server.base}/mcp")
        fallback = ServerConfig(name="fallback", url=f"{server.base}/mcp")
        async with open_default_transport(direct, open_inbox()) as transport:
            assert isinstance(transport, SseTransport)
        config = RuntimeConfig(
            servers=(direct, fallback), retry=RetryPolicy(jitter=0.0, reconnect_initial=0.1)
        )
        async with open_runtime(config) as rt:
            with trio.fail_after(BOUND):
                statuses = await rt.wait_ready()
                assert {name: s.state for name, s in statuses.items()} == {
                    "direct": ServerState.READY,
                    "fallback": ServerState.READY,
                }
                assert statuses["direct"].transport == "sse"
                assert statuses["fallback"].transport == "http"
                assert statuses["direct"].protocol_version == "2024-11-05"
                for name in ("direct", "fallback"):
                    result = await rt.call(f"mcp_{name}_echo", {"text": name})
                    assert result.text == f"legacy {name}"
                with rt.events() as events:
                    await fake.end_streams()  # the server ends every session
                    while any(s.state is ServerState.READY for s in rt.status().values()):
                        await events.__anext__()
                    while not all(s.state is ServerState.READY for s in rt.status().values()):
                        await events.__anext__()
                assert {s.generation for s in rt.status().values()} == {2}
