"""An HTTP session the server ends, on a transport that cannot start a new one.

Only a :class:`~trio_mcp.transports.ResumableTransport` (Streamable HTTP itself) can hold its
frames while the session initializes a new HTTP session. A transport built around one passes
the :class:`~trio_mcp.transports.SessionExpiredNotice` up without being resumable: the chaos
transport of ``trio_mcp.actors.testing`` does, and so may a host's own ``transport_factory``.
There the expiry ends the connection: the waiting calls fail at once saying why, and the
supervisor reconnects.

The real Streamable HTTP transport against the in-process fake HTTP server on 127.0.0.1 (real
sockets, the real clock: every wait is bounded, none is a sleep)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import pytest
import trio

from tests.transports.http_fake import FakeMcpHttp, HttpServer, serve_http
from trio_mcp.actors import (
    RetryPolicy,
    RuntimeConfig,
    ServerConfig,
    ServerState,
    TransportKind,
    open_runtime,
)
from trio_mcp.actors.testing import ChaosPolicy, ChaosTransportFactory, chaos_transport_factory
from trio_mcp.protocol import ServerDisconnected
from trio_mcp.transports._base import FrameSink, ResumableTransport, Transport
from trio_mcp.transports.http._http import open_http_transport
from trio_mcp.transports.http._http_base import HttpParameters

BOUND = 10.0


@asynccontextmanager
async def fake_http() -> AsyncIterator[tuple[FakeMcpHttp, HttpServer]]:
    fake = FakeMcpHttp()
    async with serve_http(fake.handle) as server:
        yield fake, server


def http_behind_chaos(server: HttpServer) -> tuple[ServerConfig, ChaosTransportFactory]:
    """Server ``h``: Streamable HTTP behind a chaos transport that mistreats nothing."""

    def http(sink: FrameSink) -> AbstractAsyncContextManager[Transport]:
        parameters = HttpParameters(url=server.base + "/mcp", reconnect_delay=0.05)
        return open_http_transport(parameters, sink)

    factory = chaos_transport_factory(http, ChaosPolicy())
    config = ServerConfig(
        name="h",
        type=TransportKind.CUSTOM,
        transport_factory=factory,
        connect_timeout=5.0,
        timeout=5.0,
    )
    return config, factory


async def test_an_expiry_on_a_transport_that_cannot_resume_fails_the_call_and_reconnects() -> None:
    async with fake_http() as (fake, server):
        server_config, factory = http_behind_chaos(server)
        config = RuntimeConfig(
            servers=(server_config,), retry=RetryPolicy(jitter=0.0, reconnect_initial=0.1)
        )
        async with open_runtime(config) as rt:
            with trio.fail_after(BOUND):
                await rt.wait_ready()
            status = rt.status()["h"]
            assert (status.state, status.generation) == (ServerState.READY, 1)
            assert not isinstance(factory.transports[0], ResumableTransport)
            fake.expire()
            # The POST with the old session id is refused (404): the HTTP transport holds the
            # call and says the session ended; the chaos transport cannot hold it for a new
            # session, so the connection ends, and the call fails at once, saying why.
            with trio.fail_after(BOUND), pytest.raises(ServerDisconnected) as caught:
                await rt.call("mcp_h_echo", {"text": "x"})
            message = str(caught.value)
            assert message.startswith("server 'h' disconnected during tools/call (")
            assert "ended the session (it no longer knows our session id)" in message
            assert "reconnecting" in message
            assert caught.value.server == "h"
            with trio.fail_after(BOUND), rt.events() as events:
                # the call failed the moment the table ended; the supervisor hears it next
                while not (
                    rt.status()["h"].state is ServerState.READY and rt.status()["h"].generation >= 2
                ):
                    await events.__anext__()
            status = rt.status()["h"]
            assert (status.state, status.generation) == (ServerState.READY, 2)
            with trio.fail_after(BOUND):
                assert (await rt.call("mcp_h_echo", {"text": "y"})).text == "y"
        assert fake.initializes == 2  # one per connection: no new session within the first
