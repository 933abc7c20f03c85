"""Streamable HTTP in the stateless shape of 2026-07-28, and era detection over HTTP, against the
in-process fakes on 127.0.0.1 (real sockets, the real clock, bounded waits).

The transport alone (``set_stateless``): POST only, ``MCP-Protocol-Version`` on every POST, no
session id, no GET stream, no DELETE, no resumption; a 400/404 with a JSON-RPC body is the
request's error answer; a cancel closes the request's stream instead of being POSTed. Then the
runtime: the probe, both eras, the -32022 retry, cancellation by closing the stream.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from tests.transports.http_fake import (
    FakeLegacySse,
    FakeMcpHttp,
    HttpRequest,
    HttpServer,
    Reply,
    ToolCall,
    serve_http,
    text_result,
)
from trio_mcp.actors import (
    RetryPolicy,
    Runtime,
    RuntimeConfig,
    ServerConfig,
    ServerState,
    open_runtime,
)
from trio_mcp.protocol import CallTimeout, Era
from trio_mcp.protocol._errors import HttpStatusError, ServerDisconnected
from trio_mcp.transports._base import (
    ConnectionEnded,
    HeaderTransport,
    Inbound,
    RequestFailed,
    StatelessTransport,
    open_inbox,
)
from trio_mcp.transports._channel import ByteChannel
from trio_mcp.transports.http._http import HttpTransport, open_http_transport
from trio_mcp.transports.http._http_base import HttpParameters

BOUND = 10.0
MODERN = "2026-07-28"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
}

Inbox = ByteChannel[Inbound]


def request(rid: int, method: str, params: dict[str, Any] | None = None) -> bytes:
    body = {**(params or {}), "_meta": ENVELOPE}
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": body}).encode()


def cancel(rid: int) -> bytes:
    return json.dumps(
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid}}
    ).encode()


async def take(inbox: Inbox) -> Inbound:
    with trio.fail_after(BOUND):
        return await inbox.receive()


async def take_json(inbox: Inbox) -> Any:
    item = await take(inbox)
    assert isinstance(item, bytes), item
    return json.loads(item)


@asynccontextmanager
async def fake_server(**knobs: Any) -> AsyncIterator[tuple[FakeMcpHttp, HttpServer]]:
    fake = FakeMcpHttp(**knobs)
    async with serve_http(fake.handle) as server:
        yield fake, server


@asynccontextmanager
async def stateless(server: HttpServer) -> AsyncIterator[tuple[HttpTransport, Inbox]]:
    """The transport, in the stateless shape of 2026-07-28 from the start."""
    inbox = open_inbox()
    params = HttpParameters(url=server.base + "/mcp", reconnect_delay=0.05, connect_timeout=5)
    async with open_http_transport(params, inbox) as t:
        assert isinstance(t, StatelessTransport)
        await t.set_stateless(MODERN)
        yield t, inbox


# --------------------------------------------------------------------------- the transport


async def test_every_post_carries_the_version_and_nothing_of_a_session() -> None:
    async with fake_server(era="modern") as (fake, server):
        async with stateless(server) as (t, inbox):
            await t.send(request(1, "server/discover"))
            discovered = await take_json(inbox)
            assert t.mode == "stateless"  # applied in outbox order, before the request
            assert discovered["result"]["supportedVersions"] == [MODERN]
            await t.send(request(2, "tools/call", {"name": "echo", "arguments": {"text": "hi"}}))
            called = await take_json(inbox)
            assert called["result"]["content"] == [{"type": "text", "text": "hi"}]
            stats = t.statistics()
            assert (stats.mode, stats.has_session, stats.protocol_version) == (
                "stateless",
                False,
                MODERN,
            )
            assert stats.get_stream == "off"
        assert [r.method for r in server.requests] == ["POST", "POST"]  # no GET, no DELETE
        for sent in server.requests:
            assert sent.header("mcp-protocol-version") == MODERN
            assert sent.header("mcp-session-id") is None
            assert sent.header("accept") == "application/json, text/event-stream"
    assert fake.methods() == ["server/discover", "tools/call"]


async def test_a_request_sent_with_headers_carries_them_on_its_post() -> None:
    async with fake_server(era="modern") as (_, server):
        async with stateless(server) as (t, inbox):
            assert isinstance(t, HeaderTransport)
            extra = {"Mcp-Method": "server/discover", "MCP-Protocol-Version": MODERN}
            await t.send_with_headers(request(1, "server/discover"), 1, extra)
            assert (await take_json(inbox))["id"] == 1
            await t.send(request(2, "server/discover"))
            assert (await take_json(inbox))["id"] == 2
        first, second = server.requests
        assert first.header("mcp-method") == "server/discover"
        assert first.header("mcp-protocol-version") == MODERN  # one value, not two
        assert second.header("mcp-method") is None


async def test_a_400_or_404_with_a_json_rpc_body_is_the_requests_error_answer() -> None:
    async with (
        fake_server(era="modern", modern_versions=("2099-01-01",)) as (_, server),
        stateless(server) as (t, inbox),
    ):
        await t.send(request(7, "server/discover"))
        refused = await take_json(inbox)
        assert refused["id"] == 7
        assert refused["error"]["code"] == -32022
        assert refused["error"]["data"] == {"supported": ["2099-01-01"], "requested": MODERN}


async def test_an_unknown_method_404_and_a_null_id_error_body_answer_the_request() -> None:
    async def null_id(request: HttpRequest, reply: Reply) -> None:
        await reply.json(
            {"jsonrpc": "2.0", "id": None, "error": {"code": -32020, "message": "no header"}}, 400
        )

    async with fake_server(era="modern") as (_, server), stateless(server) as (t, inbox):
        await t.send(request(3, "nope/nothing"))
        unknown = await take_json(inbox)
        assert (unknown["id"], unknown["error"]["code"]) == (3, -32601)
    async with serve_http(null_id) as server, stateless(server) as (t, inbox):
        await t.send(request(4, "tools/list"))
        answer = await take_json(inbox)
        assert answer == {
            "jsonrpc": "2.0",
            "id": 4,
            "error": {"code": -32020, "message": "no header"},
        }


async def test_a_400_whose_body_is_no_json_rpc_error_fails_the_request_with_its_status() -> None:
    async def plain(request: HttpRequest, reply: Reply) -> None:
        await reply.send(400, b"Bad Request: no session")

    async with serve_http(plain) as server, stateless(server) as (t, inbox):
        await t.send(request(5, "server/discover"))
        failed = await take(inbox)
        assert isinstance(failed, RequestFailed)
        assert failed.request_id == 5
        assert isinstance(failed.error, HttpStatusError)
        assert failed.error.status == 400
        assert "Bad Request: no session" in str(failed.error)


async def test_a_broken_stream_is_not_resumed_its_outcome_is_unknown() -> None:
    async def breaks(call: ToolCall) -> Any:
        assert call.stream is not None
        await call.stream.send({"jsonrpc": "2.0", "method": "notifications/message"})
        await call.stream.drop()
        await trio.sleep_forever()

    async with fake_server(era="modern", tools={"breaks": breaks}) as (_, server):
        async with stateless(server) as (t, inbox):
            await t.send(request(1, "tools/call", {"name": "breaks"}))
            assert (await take_json(inbox))["method"] == "notifications/message"
            failed = await take(inbox)
            assert isinstance(failed, RequestFailed)
            assert isinstance(failed.error, ServerDisconnected)
            assert failed.sent is True
            assert "a 2026-07-28 stream is not resumed" in str(failed.error)
            assert "the outcome is unknown" in str(failed.error)
            assert t.statistics().resumptions == 0
        assert [r.method for r in server.requests] == ["POST"]


async def test_a_cancel_closes_the_requests_stream_and_is_not_posted() -> None:
    gone = trio.Event()

    async def waits(call: ToolCall) -> Any:
        assert call.stream is not None
        # keep writing until the write finds the client gone
        while call.stream.reply is not None:
            await call.stream.send({"jsonrpc": "2.0", "method": "notifications/progress"})
            await trio.sleep(0.01)
        gone.set()
        await trio.sleep_forever()

    async with fake_server(era="modern", tools={"waits": waits}) as (fake, server):
        async with stateless(server) as (t, inbox):
            await t.send(request(1, "tools/call", {"name": "waits"}))
            assert (await take_json(inbox))["method"] == "notifications/progress"
            await t.send(cancel(1))
            with trio.fail_after(BOUND):
                await gone.wait()
            await t.send(request(2, "server/discover"))
            while (answer := await take_json(inbox)).get("id") != 2:
                assert answer["method"] == "notifications/progress"
        assert "notifications/cancelled" not in fake.methods()
        assert [r.method for r in server.requests] == ["POST", "POST"]


async def test_set_stateless_none_goes_back_to_the_handshake_shape() -> None:
    async with fake_server() as (fake, server):  # a legacy Streamable HTTP server
        async with stateless(server) as (t, inbox):
            await t.send(request(1, "server/discover"))
            # it wants a session: its 400 body is a JSON-RPC error, the probe's answer
            refused = await take_json(inbox)
            assert (refused["id"], refused["error"]["code"]) == (1, -32600)
            await t.set_stateless(None)
            init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {}}
            await t.send(
                json.dumps(
                    {"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": init}
                ).encode()
            )
            assert (await take_json(inbox))["id"] == 2
            assert t.mode == "streamable"
            assert t.statistics().has_session
        probe, initialize = server.by_method("POST")[:2]
        assert probe.header("mcp-protocol-version") == MODERN
        assert initialize.header("mcp-protocol-version") is None
    assert fake.initializes == 1


# --------------------------------------------------------------------------- the runtime


def config(server: HttpServer, path: str = "/mcp", **options: Any) -> RuntimeConfig:
    options.setdefault("connect_timeout", 5.0)
    options.setdefault("timeout", 5.0)
    return RuntimeConfig(
        servers=(ServerConfig(name="h", url=server.base + path, **options),),
        retry=RetryPolicy(jitter=0.0, reconnect_initial=0.1),
    )


@asynccontextmanager
async def runtime(config: RuntimeConfig) -> AsyncIterator[Runtime]:
    async with open_runtime(config) as rt:
        with trio.fail_after(BOUND):
            statuses = await rt.wait_ready()
        assert statuses["h"].state is ServerState.READY, statuses["h"].last_error
        yield rt


async def test_a_modern_http_server_is_spoken_to_statelessly() -> None:
    async with fake_server(era="modern") as (fake, server):
        async with runtime(config(server)) as rt:
            status = rt.status()["h"]
            assert (status.era, status.protocol_version) == (Era.MODERN, MODERN)
            assert (status.server_name, status.server_version) == ("fake-http", "2.0")
            result = await rt.call("mcp_h_echo", {"text": "hé"})
            assert result.text == "hé"
        assert {r.method for r in server.requests} == {"POST"}
        for sent in server.requests:
            assert sent.header("mcp-protocol-version") == MODERN
            assert sent.json()["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == (
                MODERN
            )
    assert fake.methods() == ["server/discover", "tools/list", "tools/call"]


async def test_a_dual_http_server_answers_the_probe_and_is_spoken_to_in_2026() -> None:
    async with fake_server(era="dual") as (fake, server), runtime(config(server)) as rt:
        assert rt.status()["h"].era is Era.MODERN
    assert "initialize" not in fake.methods()


async def test_a_legacy_streamable_server_gets_the_handshake_after_the_probe() -> None:
    async with fake_server() as (fake, server):
        async with runtime(config(server)) as rt:
            status = rt.status()["h"]
            assert (status.era, status.protocol_version) == (Era.LEGACY, "2025-11-25")
            assert (await rt.call("mcp_h_echo", {"text": "x"})).text == "x"
        probe = server.requests[0]
        assert probe.json()["method"] == "server/discover"
        assert probe.header("mcp-protocol-version") == MODERN
        init = next(r for r in server.requests if r.body and r.json().get("method") == "initialize")
        assert init.header("mcp-protocol-version") is None
        assert init.header("mcp-session-id") is None
    assert fake.methods()[:2] == ["initialize", "notifications/initialized"]  # the probe failed
    assert fake.deleted  # a legacy session is ended on close


async def test_a_legacy_http_sse_server_gets_the_probe_then_the_fallback() -> None:
    fake = FakeLegacySse()
    async with serve_http(fake.handle) as server:
        async with runtime(config(server, path="/sse")) as rt:
            status = rt.status()["h"]
            assert (status.era, status.protocol_version) == (Era.LEGACY, "2024-11-05")
            assert (await rt.call("mcp_h_echo", {"text": "old"})).text == "old"
        posts = [r for r in server.requests if r.method == "POST" and r.path == "/sse"]
        assert [r.json()["method"] for r in posts] == ["server/discover", "initialize"]


async def test_a_32022_refusal_over_http_is_retried_with_a_supported_version() -> None:
    async with fake_server(era="modern", unsupported_version_answers=1) as (fake, server):
        async with runtime(config(server)) as rt:
            assert rt.status()["h"].era is Era.MODERN
        statuses = [r.header("mcp-protocol-version") for r in server.requests]
        assert statuses == [MODERN] * len(server.requests)
    assert fake.methods()[:2] == ["server/discover", "server/discover"]


async def test_a_timed_out_call_closes_its_stream_and_posts_no_cancel() -> None:
    gone = trio.Event()

    async def waits(call: ToolCall) -> Any:
        assert call.stream is not None
        while call.stream.reply is not None:
            await call.stream.send({"jsonrpc": "2.0", "method": "notifications/message"})
            await trio.sleep(0.01)
        gone.set()
        return text_result("too late")

    async with (
        fake_server(era="modern", tools={"waits": waits}) as (fake, server),
        runtime(config(server, timeout=0.2)) as rt,
    ):
        with pytest.raises(CallTimeout):
            await rt.call("mcp_h_waits")
        with trio.fail_after(BOUND):
            await gone.wait()
        assert rt.status()["h"].state is ServerState.READY
    assert "notifications/cancelled" not in fake.methods()
    assert [m for m in fake.methods() if m.startswith("notifications/")] == []


async def test_a_forced_legacy_http_server_is_not_probed() -> None:
    async with fake_server() as (fake, server), runtime(config(server, protocol="legacy")):
        pass
    assert fake.methods()[0] == "initialize"
    assert all(
        r.body and r.json().get("method") != "server/discover" for r in server.requests if r.body
    )


async def test_the_connection_ends_with_the_transport_closed_cleanly() -> None:
    async with fake_server(era="modern") as (_, server):
        inbox = open_inbox()
        params = HttpParameters(url=server.base + "/mcp", connect_timeout=5)
        async with open_http_transport(params, inbox) as t:
            await t.set_stateless(MODERN)
        [end] = [inbox.receive_nowait()]
        assert isinstance(end, ConnectionEnded)
