"""``subscriptions/listen`` over Streamable HTTP (2026-07-28), against the in-process fake on
127.0.0.1 (real sockets, the real clock, bounded waits).

The listen is a POST whose answer is an SSE stream that stays open: its keep-alive comments are
skipped, its notifications go up as frames, it takes none of the ``max_in_flight`` slots of the
calls, and it is closed by closing its stream. A stream that breaks, ends without an answer or
is ended by the server's answer is opened again. And the handshake revisions' resource
subscriptions, repeated for a new HTTP session.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from tests.transports.http_fake import FakeMcpHttp, HttpServer, ToolCall, serve_http, text_result
from trio_mcp.actors import (
    ResourceUpdated,
    RetryPolicy,
    Runtime,
    RuntimeConfig,
    ServerConfig,
    ServerState,
    open_runtime,
)
from trio_mcp.actors.runtime import _subscriptions
from trio_mcp.transports import FrameSink
from trio_mcp.transports.http._http import HttpTransport, open_http_transport
from trio_mcp.transports.http._http_base import HttpParameters

BOUND = 10.0
LISTENING = {"tools": {"listChanged": True}, "resources": {"subscribe": True}}


@pytest.fixture(autouse=True)
def quick_reopen(monkeypatch: pytest.MonkeyPatch) -> None:
    """Open an ended listen again after 0.05 s, not 1 s (the tests wait on the real clock)."""
    monkeypatch.setattr(_subscriptions, "LISTEN_RETRY_INITIAL", 0.05)


@asynccontextmanager
async def listening_runtime(
    **knobs: Any,
) -> AsyncIterator[tuple[FakeMcpHttp, HttpServer, Runtime, list[HttpTransport]]]:
    """A modern fake that announces changes (keep-alives every 0.02 s), and a runtime whose
    HTTP transport has one call slot."""
    knobs.setdefault("modern_capabilities", LISTENING)
    knobs.setdefault("listen_keepalive", 0.02)
    fake = FakeMcpHttp(era="modern", **knobs)
    transports: list[HttpTransport] = []

    @asynccontextmanager
    async def one_slot(cfg: ServerConfig, sink: FrameSink) -> AsyncIterator[HttpTransport]:
        assert cfg.url is not None
        params = HttpParameters(url=cfg.url, max_in_flight=1, connect_timeout=5)
        async with open_http_transport(params, sink) as transport:
            transports.append(transport)
            yield transport

    async with serve_http(fake.handle) as server:
        config = RuntimeConfig(
            servers=(ServerConfig(name="h", url=server.base + "/mcp", timeout=5.0),),
            retry=RetryPolicy(jitter=0.0, reconnect_initial=0.1),
            list_changed_debounce=0.01,
        )
        async with open_runtime(config, open_transport=one_slot) as rt:
            with trio.fail_after(BOUND):
                statuses = await rt.wait_ready()
            assert statuses["h"].state is ServerState.READY, statuses["h"].last_error
            yield fake, server, rt, transports


async def until(fake: FakeMcpHttp, predicate: Callable[[], bool]) -> None:
    with trio.fail_after(BOUND):
        await fake.wait_until(predicate)


async def test_a_listen_stream_stays_open_beside_the_calls_and_takes_no_slot() -> None:
    async with listening_runtime() as (fake, server, rt, transports):
        await until(fake, lambda: len(fake.listens) == 1 and fake.listens[0].comments >= 3)
        (listen,) = fake.listens
        assert listen.notifications == {"toolsListChanged": True}
        (post,) = [r for r in server.requests if r.json().get("method") == "subscriptions/listen"]
        assert post.header("mcp-method") == "subscriptions/listen"
        assert post.header("mcp-protocol-version") == "2026-07-28"
        # the keep-alive comments went by unseen; one slot, and calls do not wait for the
        # listen's (two at once: the second waits for the first, not for the listen)
        (transport,) = transports
        async with trio.open_nursery() as nursery:
            for text in ("one", "two"):
                nursery.start_soon(rt.call, "mcp_h_echo", {"text": text})
        with trio.fail_after(BOUND):
            assert (await rt.call("mcp_h_echo", {"text": "three"})).text == "three"
        # (had the listen taken the one slot, those calls would have waited for good)
        stats = transport.statistics()
        assert stats.waiting == 0
        assert stats.in_flight >= 1  # the listen is in flight, slot or not
        assert listen.open

        # a tool change, on the listen's stream
        async def added(call: ToolCall) -> Any:
            return text_result("added")

        fake.tools["added"] = added
        version = rt.tools_version
        assert await fake.push_listens("notifications/tools/list_changed") == 1
        with trio.fail_after(BOUND):
            await rt.wait_tools_changed(version)
        assert "mcp_h_added" in rt.tools()
        assert (await rt.call("mcp_h_added")).text == "added"
        # closing the runtime closes the listen's stream
        await rt.aclose()
        await until(fake, lambda: listen.closed)


@pytest.mark.parametrize("how", ["drop", "close", "result"])
async def test_a_listen_stream_that_ends_is_opened_again(how: str) -> None:
    async with listening_runtime() as (fake, _, rt, _transports):
        await until(fake, lambda: len(fake.open_listens()) == 1)
        listings = fake.methods().count("tools/list")
        assert await fake.end_listens(how) == 1
        await until(fake, lambda: len(fake.listens) == 2 and len(fake.open_listens()) == 1)
        first, second = fake.listens
        assert second.at - first.at >= 0.05  # after the back-off, not in a loop
        # changes while no listen was open were not sent: the tools are listed again
        await until(fake, lambda: fake.methods().count("tools/list") == listings + 1)
        assert rt.status()["h"].state is ServerState.READY
        assert rt.status()["h"].generation == 1
    assert "notifications/cancelled" not in fake.methods()


async def test_a_new_resource_set_opens_a_new_stream_and_closes_the_old_one() -> None:
    async with listening_runtime() as (fake, _, rt, _transports):
        await until(fake, lambda: len(fake.open_listens()) == 1)
        (first,) = fake.listens
        rt.subscribe_resource("h", "doc://a")
        await until(fake, lambda: len(fake.listens) == 2 and first.closed)
        second = fake.listens[1]
        assert second.notifications == {
            "toolsListChanged": True,
            "resourceSubscriptions": ["doc://a"],
        }
        assert fake.open_listens() == [second]
        with rt.events() as events:
            updated = {"uri": "doc://a"}
            assert await fake.push_listens("notifications/resources/updated", updated) == 1
            with trio.fail_after(BOUND):
                event = await events.__anext__()
            assert event == ResourceUpdated(server="h", uri="doc://a")
    # closing a stream is how a 2026-07-28 client cancels: nothing was POSTed for it
    assert "notifications/cancelled" not in fake.methods()


async def test_a_legacy_session_subscribes_again_after_a_new_http_session() -> None:
    """The handshake revisions: the host's resource subscriptions are resources/subscribe
    requests, which a new HTTP session (the server forgot the old one) must repeat."""
    capabilities = {"tools": {}, "resources": {"subscribe": True}}
    fake = FakeMcpHttp(legacy_capabilities=capabilities, get_stream=False)

    def subscribed() -> list[str | None]:
        """The session id each resources/subscribe came with."""
        return [
            request.header("mcp-session-id")
            for request in server.requests
            if request.method == "POST" and request.json().get("method") == "resources/subscribe"
        ]

    async with serve_http(fake.handle) as server:
        config = RuntimeConfig(
            servers=(
                ServerConfig(name="h", url=server.base + "/mcp", timeout=5.0, protocol="legacy"),
            ),
            retry=RetryPolicy(jitter=0.0, reconnect_initial=0.1),
        )
        async with open_runtime(config) as rt:
            with trio.fail_after(BOUND):
                await rt.wait_ready()
            rt.subscribe_resource("h", "doc://a")
            await until(fake, lambda: len(subscribed()) == 1)
            fake.expire()
            with trio.fail_after(BOUND):
                assert (await rt.call("mcp_h_echo", {"text": "x"})).text == "x"
            await until(fake, lambda: len(subscribed()) == 2)
            assert subscribed() == fake.issued  # once with each session
            assert rt.status()["h"].generation == 1  # one connection: a new HTTP session
