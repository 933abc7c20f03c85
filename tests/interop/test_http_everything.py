"""trio-mcp against the npm reference server ``server-everything`` (TypeScript SDK) over HTTP: its
``streamableHttp`` mode (sessions, an event store: every SSE stream starts with a priming event at
2025-11-25; an unknown session is answered 400 "No valid session ID provided") and its ``sse``
mode (the legacy HTTP+SSE transport, ``/message?sessionId=``).

The server listens on every interface; the tests talk to it on 127.0.0.1 only. It is installed by
``make setup`` (``npm ci`` in tests/interop); without node or that install the tests skip.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
import trio

from tests.interop.servers.http_process import (
    EVERYTHING_BIN,
    HttpServerProcess,
    everything_server,
)
from trio_mcp.actors import (
    RetryPolicy,
    Runtime,
    RuntimeConfig,
    ServerConfig,
    ServerState,
    TransportKind,
    open_runtime,
)
from trio_mcp.protocol import ProgressNotificationParams

pytestmark = pytest.mark.interop

BOUND = 20.0


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, HttpServerProcess]]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the server-everything interop tests need Node.js")
    if not EVERYTHING_BIN.exists():
        pytest.skip(
            "server-everything is not installed in tests/interop/node_modules: run `make setup` "
            "(it runs `npm ci` in tests/interop)"
        )
    logs = tmp_path_factory.mktemp("everything-http")
    started = {mode: everything_server(mode, node, logs) for mode in ("streamableHttp", "sse")}
    try:
        for server in started.values():
            server.launch()
        for server in started.values():
            server.wait_ready()
        yield started
    finally:
        for server in started.values():
            server.stop()


@asynccontextmanager
async def ready(
    url: str, kind: TransportKind | None = None, **options: Any
) -> AsyncIterator[Runtime]:
    options.setdefault("connect_timeout", BOUND)
    options.setdefault("timeout", BOUND)
    config = RuntimeConfig(
        servers=(ServerConfig(name="ev", url=url, type=kind, **options),),
        retry=RetryPolicy(jitter=0.0, reconnect_initial=0.2),
    )
    async with open_runtime(config) as rt:
        with trio.fail_after(BOUND):
            statuses = await rt.wait_ready()
        assert statuses["ev"].state is ServerState.READY, statuses["ev"].last_error
        yield rt


CASES = {
    "streamableHttp": ("streamableHttp", "/mcp", None, "http"),
    "sse": ("sse", "/sse", TransportKind.SSE, "sse"),
    "sse-by-fallback": ("sse", "/sse", TransportKind.HTTP, "http"),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_handshake_tools_calls_and_progress(
    servers: dict[str, HttpServerProcess], case: str
) -> None:
    mode, path, kind, transport = CASES[case]
    async with ready(servers[mode].url(path), kind) as rt:
        status = rt.status()["ev"]
        assert (status.transport, status.protocol_version) == (transport, "2025-11-25")
        assert (status.server_name, status.server_version) == ("mcp-servers/everything", "2.0.0")
        assert {"mcp_ev_echo", "mcp_ev_get_sum", "mcp_ev_trigger_long_running_operation"} <= set(
            rt.tools()
        )
        with trio.fail_after(BOUND):
            assert (await rt.call("mcp_ev_echo", {"message": "hi"})).text == "Echo: hi"
            seen: list[float] = []

            def progress(params: ProgressNotificationParams) -> None:
                seen.append(params.progress)

            result = await rt.call(
                "mcp_ev_trigger_long_running_operation",
                {"duration": 0.3, "steps": 3},
                progress=progress,
            )
            assert result.text.startswith("Long running operation completed.")
            assert seen == [1, 2, 3]
            sums = []

            async def one(a: int) -> None:
                sums.append((await rt.call("mcp_ev_get_sum", {"a": a, "b": 1})).text)

            async with trio.open_nursery() as nursery:
                for a in range(6):
                    nursery.start_soon(one, a)
            assert len(sums) == 6


async def test_a_session_ended_by_the_server_is_re_established_through_its_400(
    servers: dict[str, HttpServerProcess],
) -> None:
    server = servers["streamableHttp"]
    async with ready(server.url("/mcp")) as rt:
        ids = re.findall(r"Session initialized with ID: (\S+)", server.tail(200))
        assert ids, server.tail()
        # End our session from outside: from then on the server answers its id with 400.
        async with httpx.AsyncClient() as client:
            ended = await client.delete(server.url("/mcp"), headers={"mcp-session-id": ids[-1]})
        assert ended.status_code == 200
        with trio.fail_after(BOUND):
            assert (await rt.call("mcp_ev_echo", {"message": "still"})).text == "Echo: still"
        after = re.findall(r"Session initialized with ID: (\S+)", server.tail(200))
        assert after[-1] != ids[-1]
        status = rt.status()["ev"]
        assert (status.state, status.generation) == (ServerState.READY, 1)


async def test_closing_ends_the_session_with_delete(
    servers: dict[str, HttpServerProcess],
) -> None:
    server = servers["streamableHttp"]
    async with ready(server.url("/mcp")):
        ids = re.findall(r"Session initialized with ID: (\S+)", server.tail(200))
    ended = f"Received session termination request for session {ids[-1]}"
    with trio.fail_after(BOUND):
        while ended not in server.tail(50):  # noqa: ASYNC110 - the server's log has no event
            await trio.sleep(0.05)
