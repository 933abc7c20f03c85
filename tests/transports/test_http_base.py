"""The response-body helpers the HTTP transports share (:func:`consume`, :func:`discard_body`),
against an in-process HTTP server on 127.0.0.1 (real sockets, the real clock: every wait is
bounded). Whether a body is read to its end decides whether its connection serves the next
request: closing a response before its end closes the connection."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import attrs
import httpx
import pytest
import trio

from tests.transports.http_fake import ClientGone, HttpRequest, HttpServer, Reply, serve_http
from trio_mcp.transports.http._h1 import HttpResponse
from trio_mcp.transports.http._http_base import consume, discard_body, open_stream

BOUND = 10.0


@attrs.define(eq=False)
class Bodies:
    """A server whose answer's body depends on the path; ``gone`` is set once a client left an
    ``/endless`` body."""

    gone: trio.Event = attrs.field(factory=trio.Event)

    async def handle(self, request: HttpRequest, reply: Reply) -> None:
        if request.path == "/empty":
            await reply.send(202)
        elif request.path == "/accepted":
            await reply.send(202, b"Accepted")
        else:
            await reply.start(content_type="text/plain")
            await reply.write(b"first")
            if request.path == "/big":
                for _ in range(5):
                    await reply.write(b"x" * 1024)
            elif request.path == "/broken":
                await reply.abort()
            elif request.path == "/endless":
                try:
                    while True:
                        await trio.sleep(0.01)
                        await reply.write(b".")
                except ClientGone:
                    self.gone.set()
                    raise
            else:
                await reply.write(b"rest")  # then the end


@asynccontextmanager
async def serving() -> AsyncIterator[tuple[httpx.AsyncClient, HttpServer, Bodies]]:
    bodies = Bodies()
    async with serve_http(bodies.handle) as server, httpx.AsyncClient() as client:
        yield client, server, bodies


def get(
    client: httpx.AsyncClient, server: HttpServer, path: str
) -> AbstractAsyncContextManager[HttpResponse]:
    return open_stream(client, "GET", httpx.URL(server.base + path), headers=httpx.Headers())


def connections(server: HttpServer) -> list[int]:
    return [request.connection for request in server.requests]


async def test_discard_body_reads_a_short_body_to_its_end_and_the_connection_is_reused() -> None:
    async with serving() as (client, server, _):
        with trio.fail_after(BOUND):
            for path in ("/empty", "/accepted", "/stream", "/empty"):
                async with get(client, server, path) as response:
                    assert await discard_body(response) is True
                    assert response.is_closed
        assert connections(server) == [1, 1, 1, 1]


@pytest.mark.parametrize("path", ["/big", "/endless", "/broken"])
async def test_discard_body_cuts_a_long_an_endless_or_a_broken_body_without_raising(
    path: str,
) -> None:
    async with serving() as (client, server, bodies):
        with trio.fail_after(BOUND):
            async with get(client, server, path) as response:
                started = trio.current_time()
                assert await discard_body(response) is False
                assert trio.current_time() - started < 1.0  # a moment, never the whole body
                assert response.is_closed
            if path == "/endless":
                await bodies.gone.wait()  # the connection was closed
            async with get(client, server, "/empty") as response:
                assert await discard_body(response) is True
        assert connections(server) == [1, 2]


async def test_discard_body_passes_a_cancellation_through_and_closes_the_response() -> None:
    async with serving() as (client, server, bodies):
        with trio.fail_after(BOUND):
            async with get(client, server, "/endless") as response:
                with trio.move_on_after(0.01) as scope:
                    await discard_body(response)
                assert scope.cancelled_caught
                assert response.is_closed
            await bodies.gone.wait()


@pytest.mark.parametrize("finish", [True, False])
async def test_consume_with_finish_reads_the_rest_after_take_stopped(finish: bool) -> None:
    seen: list[bytes] = []

    async def take(chunk: bytes) -> bool:
        seen.append(chunk)
        return False

    async with serving() as (client, server, _):
        with trio.fail_after(BOUND):
            async with get(client, server, "/stream") as response:
                assert await consume(response, take, finish=finish) is False
                assert response.is_closed
            async with get(client, server, "/empty") as response:
                assert await discard_body(response) is True
        assert len(seen) == 1 and b"first".startswith(seen[0])
        # Without finish, the response is closed before its end, and so is its connection.
        assert connections(server) == ([1, 1] if finish else [1, 2])


async def test_consume_reads_a_whole_body_and_leaves_the_connection() -> None:
    seen: list[bytes] = []

    async def take(chunk: bytes) -> bool:
        seen.append(chunk)
        return True

    async with serving() as (client, server, _):
        with trio.fail_after(BOUND):
            for _ in range(2):
                async with get(client, server, "/stream") as response:
                    assert await consume(response, take) is True
                    assert response.is_closed
        assert b"".join(seen) == b"firstrest" * 2
        assert connections(server) == [1, 1]


async def test_open_stream_says_when_a_request_starts_to_go_out_and_only_then() -> None:
    went_out: list[str] = []
    async with serving() as (_, server, bodies):
        # One connection at most: a second request waits for it, and gives up after 0.05 s.
        limits = httpx.Limits(max_connections=1)
        timeout = httpx.Timeout(5.0, pool=0.05)
        async with httpx.AsyncClient(limits=limits, timeout=timeout) as client:
            with trio.fail_after(BOUND):
                endless = open_stream(
                    client,
                    "GET",
                    httpx.URL(server.base + "/endless"),
                    headers=httpx.Headers(),
                    on_sending=lambda: went_out.append("endless"),
                )
                async with endless:
                    assert went_out == ["endless"]
                    with pytest.raises(httpx.PoolTimeout):
                        async with open_stream(
                            client,
                            "GET",
                            httpx.URL(server.base + "/empty"),
                            headers=httpx.Headers(),
                            on_sending=lambda: went_out.append("no room"),
                        ):
                            raise AssertionError("unreachable")
                await bodies.gone.wait()
    assert went_out == ["endless"]
    unreachable = httpx.URL(f"http://127.0.0.1:{server.port}/empty")  # the server is gone
    async with httpx.AsyncClient() as client:
        with trio.fail_after(BOUND), pytest.raises(httpx.ConnectError):
            async with open_stream(
                client,
                "GET",
                unreachable,
                headers=httpx.Headers(),
                on_sending=lambda: went_out.append("unreachable"),
            ):
                raise AssertionError("unreachable")
    assert went_out == ["endless"]
