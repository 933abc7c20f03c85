"""trio-mcp against the official Python SDK (``mcp`` 2.x) over HTTP: Streamable HTTP with SSE
answers (and an event store: priming events, resumption), with JSON answers, stateless, and the
legacy HTTP+SSE transport (configured, and reached by falling back from Streamable HTTP).

The servers are ``servers/http_server.py`` child processes on 127.0.0.1, started once for the
module (in parallel: importing ``mcp`` is slow) from a sync fixture, and always ended.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from tests.interop.servers.http_process import HttpServerProcess, python_http_server
from tests.interop.support import CALL_BOUND
from trio_mcp.actors import (
    RetryPolicy,
    Runtime,
    RuntimeConfig,
    ServerConfig,
    ServerState,
    TransportKind,
    open_runtime,
)
from trio_mcp.protocol import (
    CallToolResult,
    ProgressNotificationParams,
    ServerDisconnected,
    TextContent,
)
from trio_mcp.protocol._errors import HttpStatusError

pytestmark = pytest.mark.interop

BOUND = 20.0
TOOLS = {"add", "add_tool", "count_slowly", "echo", "interrupt", "slow"}


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, HttpServerProcess]]:
    logs = tmp_path_factory.mktemp("python-http")
    started = {
        mode: python_http_server(mode, logs) for mode in ("sse", "json", "stateless", "legacy")
    }
    try:
        for server in started.values():
            server.launch()
        for server in started.values():
            server.wait_ready()
        yield started
    finally:
        for server in started.values():
            server.stop()


def server_config(url: str, kind: TransportKind | None = None, **options: Any) -> ServerConfig:
    """The SDK's HTTP server speaks both eras; these tests are about the handshake revisions
    and their transport (sessions, resumption, the GET stream, HTTP+SSE), so they pin them
    (``test_modern_python_sdk.py`` speaks 2026-07-28 to the same servers)."""
    options.setdefault("connect_timeout", BOUND)
    options.setdefault("timeout", BOUND)
    options.setdefault("protocol", "legacy")
    return ServerConfig(name="py", url=url, type=kind, **options)


@asynccontextmanager
async def ready(config: ServerConfig) -> AsyncIterator[Runtime]:
    runtime_config = RuntimeConfig(
        servers=(config,), retry=RetryPolicy(jitter=0.0, reconnect_initial=0.2)
    )
    async with open_runtime(runtime_config) as rt:
        with trio.fail_after(BOUND):
            statuses = await rt.wait_ready()
        status = statuses["py"]
        assert status.state is ServerState.READY, status.last_error
        yield rt


# The four modes, and the legacy server reached through the fallback rule.
CASES = {
    "sse": ("sse", "/mcp", None, "http"),
    "json": ("json", "/mcp", None, "http"),
    "stateless": ("stateless", "/mcp", None, "http"),
    "legacy": ("legacy", "/sse", TransportKind.SSE, "sse"),
    "legacy-by-fallback": ("legacy", "/sse", TransportKind.HTTP, "http"),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_handshake_tools_calls_and_progress(
    servers: dict[str, HttpServerProcess], case: str
) -> None:
    mode, path, kind, transport = CASES[case]
    async with ready(server_config(servers[mode].url(path), kind)) as rt:
        status = rt.status()["py"]
        assert (status.transport, status.protocol_version) == (transport, "2025-11-25")
        assert (status.server_name, status.server_version) == ("interop-python-http", "1.0.0")
        assert set(rt.tools()) == {f"mcp_py_{name}" for name in TOOLS}
        with trio.fail_after(BOUND):
            result = await rt.call("mcp_py_add", {"a": 2, "b": 3})
            assert result.content == (TextContent(text="5"),)
            assert result.structured_content == {"result": 5}
            text = 'héllo ✓ "quoted"\nsecond line'
            assert (await rt.call("mcp_py_echo", {"text": text})).text == text
            seen: list[float] = []

            def progress(params: ProgressNotificationParams) -> None:
                seen.append(params.progress)

            counted = await rt.call("mcp_py_count_slowly", {"steps": 3}, progress=progress)
            assert counted.text == "counted to 3"
            # JSON answers carry no notifications: the progress goes nowhere.
            assert seen == ([] if mode == "json" else [1, 2, 3])
            # Calls in flight at once, each on its own HTTP request.
            results: list[CallToolResult] = []

            async def one(a: int) -> None:
                results.append(await rt.call("mcp_py_add", {"a": a, "b": 100}))

            async with trio.open_nursery() as nursery:
                for a in range(8):
                    nursery.start_soon(one, a)
            assert sorted(
                r.structured_content["result"] for r in results if r.structured_content
            ) == [100 + a for a in range(8)]


async def test_a_stream_the_server_closes_mid_call_is_resumed(
    servers: dict[str, HttpServerProcess],
) -> None:
    async with ready(server_config(servers["sse"].url("/mcp"))) as rt:
        with trio.fail_after(BOUND):
            started = trio.current_time()
            result = await rt.call("mcp_py_interrupt", {"text": "after the gap"})
            elapsed = trio.current_time() - started
        assert result.text == "resumed: after the gap"
        assert elapsed >= 0.2  # the server's retry (200 ms) was waited before resuming


async def _expire(server: HttpServerProcess) -> str:
    async with httpx.AsyncClient() as client:
        answer = await client.post(server.url("/expire"))
    answer.raise_for_status()
    return answer.text


@pytest.mark.parametrize("mode", ["sse", "json"])
async def test_an_expired_session_is_re_established_without_losing_an_unsent_call(
    servers: dict[str, HttpServerProcess], mode: str
) -> None:
    server = servers[mode]
    async with ready(server_config(server.url("/mcp"))) as rt:
        with trio.fail_after(BOUND):
            assert (await _expire(server)).startswith("terminated ")
            # Refused with 404 (never processed), held, re-sent on the new session.
            assert (await rt.call("mcp_py_add", {"a": 1, "b": 2})).structured_content == {
                "result": 3
            }
            assert (await rt.call("mcp_py_echo", {"text": "again"})).text == "again"
        status = rt.status()["py"]
        assert (status.state, status.generation) == (ServerState.READY, 1)


@pytest.mark.parametrize("mode", ["sse", "json"])
async def test_a_call_in_flight_when_the_session_ends_fails_alone(
    servers: dict[str, HttpServerProcess], mode: str
) -> None:
    server = servers[mode]
    async with ready(server_config(server.url("/mcp"))) as rt:
        caught: list[BaseException] = []

        tag = f"in-flight-{mode}-{os.getpid()}"

        async def in_flight() -> None:
            try:
                await rt.call("mcp_py_slow", {"seconds": 5, "tag": tag})
            except (ServerDisconnected, HttpStatusError) as exc:
                caught.append(exc)

        with trio.fail_after(BOUND):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(in_flight)
                # the server is serving the call (its log has no event to wait on: polled)
                while f"slow started {tag}" not in server.tail(50):  # noqa: ASYNC110
                    await trio.sleep(0.02)
                await _expire(server)
            [error] = caught
            if mode == "sse":
                # Its stream closed; resuming it is refused with 404: the outcome is unknown.
                assert isinstance(error, ServerDisconnected) and error.sent is True
                assert "outcome is unknown" in str(error)
            else:
                # The SDK answers the POST itself: 500 "Session terminated before the request
                # completed".
                assert isinstance(error, HttpStatusError) and error.status == 500
                assert "Session terminated before the request completed" in error.body
            assert (await rt.call("mcp_py_echo", {"text": "next"})).text == "next"
        assert rt.status()["py"].generation == 1


@pytest.fixture
def killable(tmp_path: Path) -> Iterator[HttpServerProcess]:
    server = python_http_server("sse", tmp_path)
    try:
        server.start()
        yield server
    finally:
        server.stop()


async def test_a_killed_server_fails_the_call_promptly_and_is_reconnected_when_back(
    killable: HttpServerProcess,
) -> None:
    async with ready(server_config(killable.url("/mcp"))) as rt:
        caught: list[ServerDisconnected] = []
        failed = trio.Event()
        tag = f"killed-{os.getpid()}"

        async def doomed() -> None:
            with pytest.raises(ServerDisconnected) as raised:
                await rt.call("mcp_py_slow", {"seconds": 30, "tag": tag})
            caught.append(raised.value)
            failed.set()

        with trio.fail_after(BOUND), rt.events() as events:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(doomed)
                # the server is serving the call (its log has no event to wait on: polled)
                while f"slow started {tag}" not in killable.tail(50):  # noqa: ASYNC110
                    await trio.sleep(0.02)
                killable.kill()
                # promptly: a ServerDisconnected, not the call's own 30 s (or its 20 s timeout)
                with trio.fail_after(CALL_BOUND):
                    await failed.wait()
            assert caught[0].sent is True
            async for event in events:  # the tools withdrawn, then RECONNECTING
                if getattr(event, "new", None) is ServerState.RECONNECTING:
                    break
            assert rt.tools() == {}
            await trio.to_thread.run_sync(killable.start)
            while rt.status()["py"].state is not ServerState.READY:
                await events.__anext__()
            status = rt.status()["py"]
            assert status.generation >= 2
            assert (await rt.call("mcp_py_add", {"a": 20, "b": 22})).structured_content == {
                "result": 42
            }


@pytest.mark.parametrize("mode", ["sse", "json"])
async def test_closing_ends_the_session_with_delete(
    servers: dict[str, HttpServerProcess], mode: str
) -> None:
    server = servers[mode]
    with trio.fail_after(BOUND):
        await _expire(server)  # no session is left from earlier tests
        async with ready(server_config(server.url("/mcp"))):
            pass
        # Had the DELETE not ended it, the session would still be there to terminate.
        assert await _expire(server) == "terminated 0"
