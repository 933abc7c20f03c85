"""Plain ``http://`` and ``ws://``: to this machine (loopback) they connect with a warning that
the connection is not encrypted; to any other host the transports refuse them unless
``allow_insecure_http`` is set."""

from __future__ import annotations

import logging
from functools import partial

import pytest
import trio
import trio_websocket

from tests.transports.http_fake import FakeLegacySse, FakeMcpHttp, serve_http
from trio_mcp.actors.config._config import RuntimeConfig, ServerConfig, TransportKind
from trio_mcp.actors.runtime._events import ServerState
from trio_mcp.actors.runtime._runtime import open_runtime
from trio_mcp.actors.testing._fakes import FakeServer
from trio_mcp.protocol import McpTransportConfigError
from trio_mcp.transports._tls import is_loopback_host, plaintext_problem
from trio_mcp.transports._websocket import WebSocketParameters, accept_websocket_transport
from trio_mcp.transports.http._http_base import HttpParameters

BOUND = 10.0


def refusal(scheme: str) -> str:
    secure = {"http": "https", "ws": "wss"}[scheme]
    return (
        f"is plain {scheme}:// to another machine: its traffic, headers included, is not "
        f"encrypted; use {secure}://, or set allow_insecure_http: true for this server to "
        "accept that"
    )


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.255.0.9", True),
        ("::1", True),
        ("[::1]", True),
        ("::ffff:127.0.0.1", True),
        ("localhost", True),
        ("LocalHost.", True),
        ("128.0.0.1", False),
        ("0.0.0.0", False),
        ("10.1.2.3", False),
        ("::2", False),
        ("localhost.example", False),
        ("my-localhost", False),
        ("example.com", False),
    ],
)
def test_loopback_hosts(host: str, loopback: bool) -> None:
    assert is_loopback_host(host) is loopback
    assert (plaintext_problem("http", host, allow=False) is None) is loopback
    assert plaintext_problem("https", host, allow=False) is None
    assert plaintext_problem("http", host, allow=True) is None


def test_http_parameters_refuse_plain_http_to_another_machine() -> None:
    with pytest.raises(McpTransportConfigError) as info:
        HttpParameters(url="http://mcp.example.com/mcp")
    assert info.value.problems == (("url", refusal("http")),)
    assert str(info.value) == "invalid HTTP server settings: url: " + refusal("http")
    assert HttpParameters(url="http://mcp.example.com/mcp", allow_insecure_http=True)
    assert HttpParameters(url="http://127.0.0.1:9/mcp")
    assert HttpParameters(url="https://mcp.example.com/mcp")


def test_websocket_parameters_refuse_plain_ws_to_another_machine() -> None:
    with pytest.raises(McpTransportConfigError) as info:
        WebSocketParameters(url="ws://mcp.example.com/mcp")
    assert info.value.problems == (("url", refusal("ws")),)
    assert WebSocketParameters(url="ws://mcp.example.com/mcp", allow_insecure_http=True)
    assert WebSocketParameters(url="ws://[::1]:9/mcp")
    assert WebSocketParameters(url="wss://mcp.example.com/mcp")


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "not encrypted" in r.getMessage()
    ]


@pytest.mark.parametrize("kind", [TransportKind.HTTP, TransportKind.SSE])
async def test_plain_http_to_loopback_connects_with_a_warning(
    caplog: pytest.LogCaptureFixture, kind: TransportKind
) -> None:
    caplog.set_level(logging.WARNING, logger="trio_mcp")
    fake: FakeMcpHttp | FakeLegacySse = (
        FakeMcpHttp() if kind is TransportKind.HTTP else FakeLegacySse()
    )
    path = "/mcp" if kind is TransportKind.HTTP else "/sse"
    async with serve_http(fake.handle) as server:
        url = f"http://localhost:{server.port}{path}?token=t"
        config = RuntimeConfig(servers=(ServerConfig(name="h", url=url, type=kind),))
        async with open_runtime(config) as rt:
            with trio.fail_after(BOUND):
                statuses = await rt.wait_ready()
        assert statuses["h"].state is ServerState.READY, statuses["h"].last_error
    assert warnings_of(caplog) == [
        f"the connection to http://localhost:{server.port}{path}?... is not encrypted (plain "
        "http://); it stays on this machine (loopback)"
    ]


async def test_plain_ws_to_loopback_connects_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="trio_mcp")
    fake = FakeServer()

    async def handle(request: trio_websocket.WebSocketRequest) -> None:
        async with accept_websocket_transport(request) as transport:
            await fake.serve_transport(transport)

    async with trio.open_nursery() as nursery:
        server = await nursery.start(
            partial(trio_websocket.serve_websocket, handle, "127.0.0.1", 0, None)
        )
        url = f"ws://127.0.0.1:{server.port}/mcp"
        config = RuntimeConfig(servers=(ServerConfig(name="w", url=url, type=TransportKind.WS),))
        async with open_runtime(config) as rt:
            with trio.fail_after(BOUND):
                statuses = await rt.wait_ready()
        assert statuses["w"].state is ServerState.READY, statuses["w"].last_error
        nursery.cancel_scope.cancel()
    assert warnings_of(caplog) == [
        f"the connection to {url} is not encrypted (plain ws://); it stays on this machine "
        "(loopback)"
    ]


async def test_an_allowed_plain_url_to_another_machine_warns_that_anyone_can_read_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="trio_mcp")
    # 0.0.0.0 is not a loopback address (nothing listens on port 1 of this machine): the
    # warning comes before the connection fails.
    config = RuntimeConfig(
        servers=(
            ServerConfig(
                name="h",
                url="http://0.0.0.0:1/mcp",
                allow_insecure_http=True,
                connect_timeout=5.0,
            ),
        )
    )
    async with open_runtime(config) as rt:
        with trio.fail_after(BOUND):
            await rt.wait_ready(timeout=0.5)
    assert warnings_of(caplog)[0] == (
        "the connection to http://0.0.0.0:1/mcp is not encrypted (plain http://, allowed by "
        "allow_insecure_http): anyone on the network path can read and change it, headers "
        "included"
    )
