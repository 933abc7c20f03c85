"""The HTTP/1.1 lane of the Streamable HTTP transport (transports/http/_h1.py and the Lane of
_http_base.py) against real servers on 127.0.0.1: keep-alive reuse, a connection the server
closed while idle, chunked and close-delimited bodies, a cancellation in the middle of a body,
the timeouts (under the autojump clock: the servers run in the test's trio run), TLS with a
local CA, the proxies that keep a transport on httpx, and an auth flow retried after 401."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
import trio.testing

from tests.transports.http_fake import FakeMcpHttp, HttpRequest, Reply, serve_http
from tests.transports.network_fakes import Pki
from trio_mcp.transports._tls import tls_context, tls_failure_hint
from trio_mcp.transports.http._h1 import H1Pool, H1Response
from trio_mcp.transports.http._http import open_http_transport
from trio_mcp.transports.http._http_base import (
    HttpParameters,
    Lane,
    make_client,
    make_lane,
    open_stream,
)

TIMEOUT = httpx.Timeout(connect=5.0, read=5.0, write=5.0, pool=5.0)


#: Makes a pool for the test (``pools(base, **options)``); see :func:`pools`.
MakePool = Callable[..., H1Pool]


@pytest.fixture
async def pools() -> AsyncIterator[MakePool]:
    """Pools for one test, closed when it ends (their idle connections with them)."""
    made: list[H1Pool] = []

    def make(base: str, **options: object) -> H1Pool:
        settings: dict[str, object] = {
            "max_connections": 4,
            "max_keepalive": 2,
            "timeout": TIMEOUT,
        }
        settings.update(options)
        pool = H1Pool(origin=httpx.URL(base), **settings)  # type: ignore[arg-type]
        made.append(pool)
        return pool

    try:
        yield make
    finally:
        for pool in made:
            await pool.aclose()


async def read_all(response: H1Response) -> bytes:
    return b"".join([chunk async for chunk in response.aiter_bytes()])


async def get(pool: H1Pool, base: str, path: str = "/x", **options: object) -> bytes:
    response = await pool.send("GET", httpx.URL(base + path), httpx.Headers(), **options)  # type: ignore[arg-type]
    assert response.status_code == 200
    return await read_all(response)


async def hello(request: HttpRequest, reply: Reply) -> None:
    await reply.send(200, b"hello " + request.path.encode())


@asynccontextmanager
async def raw_server(
    handle: Callable[[trio.SocketStream], Awaitable[None]],
) -> AsyncIterator[str]:
    """A TCP server on 127.0.0.1 that hands each connection to ``handle`` (which writes the
    HTTP bytes itself); its base URL."""
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, handle, 0, host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        yield f"http://127.0.0.1:{port}"
        nursery.cancel_scope.cancel()


async def read_head(stream: trio.SocketStream) -> None:
    """Read one request (head only: the tests send none with a body) from ``stream``."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = await stream.receive_some(4096)
        assert chunk, "the client closed the connection before its request"
        data += chunk


async def test_a_connection_is_kept_alive_and_reused(pools: MakePool) -> None:
    async with serve_http(hello) as server:
        pool = pools(server.base)
        assert await get(pool, server.base, "/a") == b"hello /a"
        assert await get(pool, server.base, "/b") == b"hello /b"
        assert [r.connection for r in server.requests] == [1, 1]
        assert server.requests[0].headers["host"] == f"127.0.0.1:{server.port}"
        assert server.requests[0].headers["user-agent"] == f"python-httpx/{httpx.__version__}"
        assert pool.idle == 1
        await pool.aclose()
        assert pool.idle == 0


async def test_an_idle_connection_the_server_closed_is_dropped_and_a_new_one_taken(
    pools: MakePool,
) -> None:
    connections = 0

    async def answer_once_then_close(stream: trio.SocketStream) -> None:
        nonlocal connections
        connections += 1
        number = connections
        await read_head(stream)
        body = f"connection {number}".encode()
        # Keep-alive as far as the client can tell, then closed while idle.
        await stream.send_all(
            b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        await stream.aclose()

    async with raw_server(answer_once_then_close) as base:
        pool = pools(base)
        assert await get(pool, base) == b"connection 1"
        assert pool.idle == 1
        # The server's close has reached the idle connection (no sleep: its socket is readable).
        await trio.lowlevel.wait_readable(pool._idle[0].socket)
        assert await get(pool, base) == b"connection 2"
        assert connections == 2


async def test_a_chunked_body_comes_chunk_by_chunk_and_the_connection_is_reused(
    pools: MakePool,
) -> None:
    go_on = trio.Event()

    async def chunked(request: HttpRequest, reply: Reply) -> None:
        if request.path == "/again":
            await reply.send(200, b"again")
            return
        await reply.start(content_type="text/plain")
        await reply.write(b"first ")
        await go_on.wait()
        await reply.write(b"second")
        await reply.end()

    async with serve_http(chunked) as server:
        pool = pools(server.base)
        response = await pool.send("GET", httpx.URL(server.base + "/"), httpx.Headers())
        assert response.headers["Transfer-Encoding"] == "chunked"
        chunks = response.aiter_bytes()
        assert await chunks.__anext__() == b"first "  # before the rest exists
        go_on.set()
        assert [chunk async for chunk in chunks] == [b"second"]
        assert response.is_closed
        assert await get(pool, server.base, "/again") == b"again"
        assert [r.connection for r in server.requests] == [1, 1]


async def test_a_body_that_ends_with_the_connection_is_read_and_the_connection_not_kept(
    pools: MakePool,
) -> None:
    async def until_close(stream: trio.SocketStream) -> None:
        await read_head(stream)
        await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\npart one, ")
        await stream.send_all(b"part two")
        await stream.aclose()

    async with raw_server(until_close) as base:
        pool = pools(base)
        assert await get(pool, base) == b"part one, part two"
        assert pool.idle == 0


async def test_a_cancellation_in_the_middle_of_a_body_closes_the_connection(
    pools: MakePool,
) -> None:
    async def endless(request: HttpRequest, reply: Reply) -> None:
        if request.path == "/next":
            await reply.send(200, b"next")
            return
        await reply.start(content_type="text/plain")
        await reply.write(b"start")
        await trio.sleep_forever()

    async with serve_http(endless) as server:
        pool = pools(server.base)
        response = await pool.send("GET", httpx.URL(server.base + "/"), httpx.Headers())
        chunks = response.aiter_bytes()
        assert await chunks.__anext__() == b"start"
        with trio.CancelScope() as scope:
            scope.cancel()
            await chunks.__anext__()
        assert scope.cancelled_caught
        assert response.is_closed
        assert pool.idle == 0
        assert await get(pool, server.base, "/next") == b"next"
        assert [r.connection for r in server.requests] == [1, 2]


async def test_a_silent_server_is_a_read_timeout_after_exactly_read_seconds(
    autojump_clock: trio.testing.MockClock, pools: MakePool
) -> None:
    async def slow(request: HttpRequest, reply: Reply) -> None:
        await trio.sleep(60)
        await reply.send(200, b"late")

    async with serve_http(slow) as server:
        pool = pools(server.base)
        start = trio.current_time()
        with pytest.raises(httpx.ReadTimeout):
            await pool.send(
                "GET",
                httpx.URL(server.base + "/"),
                httpx.Headers(),
                timeout=httpx.Timeout(5.0, read=7.5),
            )
        assert trio.current_time() - start == 7.5
        assert pool.idle == 0


async def test_a_busy_pool_is_a_pool_timeout_and_frees_its_slot(
    autojump_clock: trio.testing.MockClock, pools: MakePool
) -> None:
    release = trio.Event()

    async def held(request: HttpRequest, reply: Reply) -> None:
        await reply.start(content_type="text/plain")
        await release.wait()
        await reply.end()

    async with serve_http(held) as server:
        pool = pools(server.base, max_connections=1)
        first = await pool.send("GET", httpx.URL(server.base + "/"), httpx.Headers())
        start = trio.current_time()
        with pytest.raises(httpx.PoolTimeout):
            await pool.send("GET", httpx.URL(server.base + "/"), httpx.Headers())
        assert trio.current_time() - start == TIMEOUT.pool
        release.set()
        assert await read_all(first) == b""
        second = await pool.send("GET", httpx.URL(server.base + "/"), httpx.Headers())
        release.set()
        assert await read_all(second) == b""
        assert [r.connection for r in server.requests] == [1, 1]


async def test_a_port_nobody_listens_on_is_a_connect_error_before_anything_is_sent(
    pools: MakePool,
) -> None:
    async with raw_server(read_head) as base:
        pass  # the port is free again
    sent: list[bool] = []
    pool = pools(base)
    with pytest.raises(httpx.ConnectError):
        await pool.send(
            "GET", httpx.URL(base + "/"), httpx.Headers(), on_sending=lambda: sent.append(True)
        )
    assert sent == []


async def test_a_garbled_answer_is_a_remote_protocol_error(pools: MakePool) -> None:
    async def garbled(stream: trio.SocketStream) -> None:
        await read_head(stream)
        await stream.send_all(b"this is not HTTP\r\n\r\n")

    async with raw_server(garbled) as base:
        sent: list[bool] = []
        with pytest.raises(httpx.RemoteProtocolError):
            await pools(base).send(
                "GET", httpx.URL(base + "/"), httpx.Headers(), on_sending=lambda: sent.append(True)
            )
        assert sent == [True]


async def test_tls_with_the_configured_ca(pki: Pki, pools: MakePool) -> None:
    async with serve_http(hello, ssl_context=pki.server_context()) as server:
        context = tls_context(ca_bundle=pki.ca_bundle, client_cert=None, client_key=None)
        pool = pools(server.base, ssl_context=context)
        assert await get(pool, server.base, "/tls") == b"hello /tls"
        assert await get(pool, server.base, "/tls") == b"hello /tls"
        assert [r.connection for r in server.requests] == [1, 1]
        # Without the CA, the default trust store refuses the certificate, and says so.
        with pytest.raises(httpx.ConnectError) as caught:
            await get(pools(server.base), server.base)
        hint = tls_failure_hint(caught.value)
        assert hint is not None and "set ca_bundle" in hint, hint


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return Pki(tmp_path)


@pytest.fixture
def no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    return monkeypatch


def lane_of(url: str, **options: object) -> Lane | None:
    params = HttpParameters(url=url, **options)  # type: ignore[arg-type]
    return make_lane(params, make_client(params))


async def test_a_proxy_from_the_config_or_the_environment_keeps_httpx(
    no_proxy_env: pytest.MonkeyPatch,
) -> None:
    url = "http://127.0.0.1:8000/mcp"
    assert lane_of(url) is not None
    assert lane_of(url, proxy="http://127.0.0.1:3128") is None
    no_proxy_env.setenv("HTTP_PROXY", "http://127.0.0.1:3128")
    assert lane_of(url) is None
    assert lane_of("https://127.0.0.1:8443/mcp") is not None  # HTTP_PROXY is for http:// only
    no_proxy_env.setenv("NO_PROXY", "127.0.0.1")
    assert lane_of(url) is not None
    no_proxy_env.delenv("NO_PROXY")
    no_proxy_env.setenv("ALL_PROXY", "http://127.0.0.1:3128")
    assert lane_of("https://127.0.0.1:8443/mcp") is None


class Renewing(httpx.Auth):
    """Sends an old token, and a new one after a 401 (the way the OAuth sign-in answers)."""

    def __init__(self) -> None:
        self.statuses: list[int] = []

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        request.headers["Authorization"] = "Bearer old"
        response = yield request
        self.statuses.append(response.status_code)
        if response.status_code == 401:
            assert response.headers.get_list("www-authenticate") == ['Bearer error="invalid_token"']
            request.headers["Authorization"] = "Bearer new"
            response = yield request
            self.statuses.append(response.status_code)


async def test_an_auth_flow_retries_after_401_through_the_lane(
    no_proxy_env: pytest.MonkeyPatch,
) -> None:
    async def guarded(request: HttpRequest, reply: Reply) -> None:
        if request.headers.get("authorization") != "Bearer new":
            await reply.send(
                401, b"sign in", headers=[("www-authenticate", 'Bearer error="invalid_token"')]
            )
            return
        await reply.json({"echo": json.loads(request.body)})

    async with serve_http(guarded) as server:
        auth = Renewing()
        params = HttpParameters(url=server.base + "/mcp", auth=auth)
        client = make_client(params)
        lane = make_lane(params, client)
        assert lane is not None and lane.auth is auth
        sent: list[bool] = []
        async with open_stream(
            client,
            "POST",
            params.endpoint,
            headers=httpx.Headers({"content-type": "application/json"}),
            content=b'{"a":1}',
            on_sending=lambda: sent.append(True),
            lane=lane,
        ) as response:
            assert isinstance(response, H1Response)
            assert response.status_code == 200
            assert await read_all(response) == b'{"echo": {"a": 1}}'
        assert auth.statuses == [401, 200]
        assert [r.headers["authorization"] for r in server.requests] == ["Bearer old", "Bearer new"]
        assert [r.body for r in server.requests] == [b'{"a":1}', b'{"a":1}']
        assert [r.connection for r in server.requests] == [1, 1]  # the 401's body was read
        assert sent == [True, True]
        await lane.pool.aclose()
        await client.aclose()


async def test_an_auth_that_reads_bodies_goes_through_httpx() -> None:
    class ReadsBodies(httpx.Auth):
        requires_response_body = True

    assert Lane.serves(None)
    assert Lane.serves(Renewing())
    assert not Lane.serves(ReadsBodies())


async def test_the_streamable_http_transport_takes_the_lane(
    no_proxy_env: pytest.MonkeyPatch,
) -> None:
    through_lane: list[str] = []
    send = H1Pool.send

    async def counted(pool: H1Pool, method: str, *args: Any, **options: Any) -> H1Response:
        through_lane.append(method)
        return await send(pool, method, *args, **options)

    no_proxy_env.setattr(H1Pool, "send", counted)
    fake = FakeMcpHttp()
    async with serve_http(fake.handle) as server:
        params = HttpParameters(url=server.base + "/mcp")
        async with open_http_transport(params) as transport:
            await transport.send(
                b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":'
                b'"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}'
            )
            with trio.fail_after(10):
                answer = json.loads(await transport.receive())
            assert answer["id"] == 1 and "result" in answer
        assert through_lane[0] == "POST"
        assert len(through_lane) == len(server.requests)
