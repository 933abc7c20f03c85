"""The legacy HTTP+SSE transport, and the Streamable HTTP transport's fallback to it, against
in-process servers on 127.0.0.1 (real sockets, the real clock: every wait is bounded)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

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
    SECRET,
    eventually,
    record_failures,
    request,
    response,
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
from trio_mcp.transports.http._http import open_http_transport
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


async def receive_json(transport: SseTransport) -> Any:
    return json.loads(await transport.receive())


INITIALIZE = request(
    1,
    "initialize",
    {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    },
)


# --------------------------------------------------------------------------- the wire


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
        async with open_sse_transport(params(server, headers=headers)) as t:
            assert t.info.kind == "sse"
            assert t.info.detail == f"{server.base}/sse"
            with trio.fail_after(BOUND):
                await t.send(INITIALIZE)
                answer = await receive_json(t)
                assert answer["result"]["serverInfo"]["name"] == "fake-legacy"
                t.set_protocol_version("2024-11-05")
                await t.send(
                    json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
                )
                await t.send(
                    request(2, "tools/call", {"name": "echo", "arguments": {"text": "hi"}})
                )
                assert await receive_json(t) == response(2, text_result("hi"))
            stats = t.statistics()
            assert (stats.mode, stats.posts, stats.gets, stats.frames_received) == (
                "legacy",
                3,
                1,
                2,
            )
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
        assert posts[2].header("mcp-protocol-version") == "2024-11-05"
        assert fake.methods() == ["initialize", "notifications/initialized", "tools/call"]


async def test_posts_share_one_connection_beside_the_event_stream() -> None:
    # The server's 202 "Accepted" body is read, so the connection serves the next POST.
    async with legacy_server() as (_, server), open_sse_transport(params(server)) as t:
        with trio.fail_after(BOUND):
            await t.send(INITIALIZE)
            assert (await receive_json(t))["id"] == 1
            for rid in (2, 3, 4):
                await t.send(request(rid, "ping"))
                assert (await receive_json(t))["id"] == rid
    (get,) = server.by_method("GET")
    assert get.connection == 1
    assert [post.connection for post in server.by_method("POST")] == [2, 2, 2, 2]
    assert server.connections == 2


async def test_messages_before_the_endpoint_and_batches_are_delivered() -> None:
    note = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": 0}}
    preamble = sse_event(json.dumps(note)) + b": a comment\n\n" + sse_event("x", event="other")
    async with (
        legacy_server(preamble=preamble) as (fake, server),
        open_sse_transport(params(server)) as t,
    ):
        with trio.fail_after(BOUND):
            assert await receive_json(t) == note
            await fake.push([note, response(9)])
            assert await receive_json(t) == note
            assert await receive_json(t) == response(9)


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
    async with legacy_server() as (fake, server):
        async with open_sse_transport(params(server)) as t:
            failures = record_failures(t)
            with trio.fail_after(BOUND):
                fake.refuse["tools/list"] = (500, b"broken")
                await t.send(request(2, "tools/list"))
                await t.send(INITIALIZE)
                assert (await receive_json(t))["id"] == 1
                [(rid, error, sent)] = failures
                assert (rid, sent) == (2, True)
                assert isinstance(error, HttpStatusError) and error.status == 500
                assert str(error) == (
                    f"POST tools/list to {server.base}/messages/?...: the server answered HTTP "
                    "500 Internal Server Error: broken"
                )
                fake.sessions.clear()  # the server forgets the session
                await t.send(request(3, "ping"))
                with pytest.raises(TransportClosed) as caught:
                    await t.receive()
        assert str(caught.value).startswith(
            "the server no longer knows this HTTP+SSE session (POST ping to "
        )
        rid, error, sent = failures[1]
        assert (rid, sent) == (3, False)
        assert isinstance(error, ServerDisconnected) and error.sent is False


async def test_the_end_of_the_event_stream_ends_the_connection() -> None:
    async with legacy_server() as (fake, server), open_sse_transport(params(server)) as t:
        with trio.fail_after(BOUND):
            await fake.push(response(5))
            await fake.end_streams()
            assert await receive_json(t) == response(5)  # what came first is kept
            with pytest.raises(TransportClosed) as caught:
                await t.receive()
        assert str(caught.value) == (
            f"the HTTP+SSE connection to {server.base}/sse ended: the server ended the event stream"
        )
        with pytest.raises(TransportClosed, match=r"^the connection ended: "):
            await t.send(request(6, "ping"))


async def test_an_oversized_event_ends_the_connection() -> None:
    async with legacy_server() as (fake, server):
        async with open_sse_transport(params(server, max_frame_bytes=200)) as t:
            with trio.fail_after(BOUND):
                await fake.push(response(5, {"blob": "x" * 300}))
                with pytest.raises(FrameTooLarge) as caught:
                    await t.receive()
        assert caught.value.limit == 200
        assert str(caught.value).startswith(
            f"the HTTP+SSE server at {server.base}/sse sent an event over 200 bytes"
        )


# --------------------------------------------------------------------------- fallback


@pytest.mark.parametrize("status", [400, 404, 405])
async def test_streamable_http_falls_back_to_http_sse_on_400_404_405(status: int) -> None:
    async with legacy_server(
        sse_path="/mcp", post_status=status, endpoint="/message?sessionId={id}"
    ) as (
        fake,
        server,
    ):
        async with open_http_transport(params(server, "/mcp")) as t:
            failures = record_failures(t)
            with trio.fail_after(BOUND):
                await t.send(INITIALIZE)
                answer = json.loads(await t.receive())
                assert answer["result"]["serverInfo"]["name"] == "fake-legacy"
                t.set_protocol_version("2024-11-05")
                await t.send(request(2, "tools/call", {"name": "echo", "arguments": {"text": "x"}}))
                assert json.loads(await t.receive()) == response(2, text_result("x"))
            assert failures == []
            assert t.mode == "legacy"
            assert t.statistics().mode == "legacy"
            assert t.info.detail == f"{server.base}/mcp (legacy HTTP+SSE)"
        first, *_ = server.requests
        assert (first.method, first.path) == ("POST", "/mcp")
        assert [(r.method, r.path) for r in server.requests[1:3]] == [
            ("GET", "/mcp"),
            ("POST", "/message"),
        ]
        assert fake.methods() == ["initialize", "tools/call"]
        assert server.by_method("DELETE") == []


async def test_a_failed_fallback_fails_the_initialize_with_the_original_status() -> None:
    async def handler(request: HttpRequest, reply: Reply) -> None:
        if request.method == "POST":
            await reply.send(404, b"no MCP here")
        else:
            await reply.send(404, b"nothing here either")

    async with serve_http(handler) as server, open_http_transport(params(server, "/mcp")) as t:
        failures = record_failures(t)
        with trio.fail_after(BOUND):
            await t.send(INITIALIZE)
            await eventually(lambda: len(failures) == 1)
        [(rid, error, sent)] = failures
        assert (rid, sent) == (1, True)
        assert isinstance(error, HttpStatusError) and error.status == 404
        assert str(error) == (
            f"POST initialize to {server.base}/mcp: the server answered HTTP 404 Not Found: no "
            f"MCP here (and it is no legacy HTTP+SSE server either: GET {server.base}/mcp "
            "(HTTP+SSE): the server answered HTTP 404 Not Found: nothing here either)"
        )
        assert t.mode == "streamable"


async def test_no_fallback_when_it_is_turned_off_or_after_the_first_initialize() -> None:
    async with legacy_server(sse_path="/mcp") as (_, server):
        async with open_http_transport(params(server, "/mcp", legacy_fallback=False)) as t:
            failures = record_failures(t)
            with trio.fail_after(BOUND):
                await t.send(INITIALIZE)
                await eventually(lambda: len(failures) == 1)
            assert isinstance(failures[0][1], HttpStatusError)
            assert failures[0][1].status == 405
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
        async with open_default_transport(direct) as transport:
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
