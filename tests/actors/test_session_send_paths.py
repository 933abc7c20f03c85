"""How a session's frames reach the transport: written by the caller itself on an idle
connection (``try_send``), or by the writer task, which batches, under load. Either way the
frames keep their order. On trio's virtual clock against the in-memory fake."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from trio_mcp.actors.config._backoff import RetryPolicy
from trio_mcp.actors.config._config import RuntimeConfig, ServerConfig, TransportKind
from trio_mcp.actors.runtime._runtime import open_runtime
from trio_mcp.actors.testing._fakes import FakeServer, FakeTool
from trio_mcp.protocol import ServerDisconnected, TransportClosed
from trio_mcp.transports._base import TransportInfo
from trio_mcp.transports._memory import MemoryTransport

Clock = trio.testing.MockClock


@attrs.define(eq=False)
class Recording:
    """A transport around the fake's memory transport that records which path each frame took:
    ``("direct", method)`` through ``try_send``, ``("writer", method)`` through send/send_many."""

    inner: MemoryTransport
    log: list[tuple[str, str]]
    refuse_direct: bool = False
    fail_direct: bool = False

    @property
    def info(self) -> TransportInfo:
        return self.inner.info

    def _note(self, path: str, frame: bytes) -> None:
        message = json.loads(frame)
        self.log.append((path, message.get("method", "response")))

    def try_send(self, frame: bytes) -> bool:
        if self.fail_direct:
            raise TransportClosed("the pipe broke")
        if self.refuse_direct:
            return False
        sent = self.inner.try_send(frame)
        if sent:
            self._note("direct", frame)
        return sent

    async def send(self, frame: bytes) -> None:
        if self.fail_direct:
            await trio.lowlevel.checkpoint()
            raise TransportClosed("the pipe broke")
        self._note("writer", frame)
        await self.inner.send(frame)

    async def send_many(self, frames: list[bytes]) -> None:
        for frame in frames:
            await self.send(frame)

    async def receive(self) -> bytes:
        return await self.inner.receive()

    async def aclose(self) -> None:
        await self.inner.aclose()


def recorded(fake: FakeServer, log: list[tuple[str, str]], **flags: bool) -> ServerConfig:
    @asynccontextmanager
    async def factory() -> AsyncIterator[Recording]:
        async with fake.connect() as inner:
            yield Recording(inner, log, **flags)

    return ServerConfig(name=fake.name, type=TransportKind.CUSTOM, transport_factory=factory)


def config(*servers: ServerConfig, **options: Any) -> RuntimeConfig:
    return RuntimeConfig(servers=servers, retry=RetryPolicy(jitter=0.0), **options)


async def test_an_idle_connection_writes_from_the_caller(autojump_clock: Clock) -> None:
    fake = FakeServer(name="s", tools=[FakeTool("t")])
    log: list[tuple[str, str]] = []
    async with open_runtime(config(recorded(fake, log))) as rt:
        await rt.wait_ready()
        for _ in range(3):
            assert (await rt.call("mcp_s_t")).text == "{}"
    # initialize goes out alone (direct); the initialized notification through the writer, and
    # tools/list, made while that notification was still queued, behind it.
    assert log[:3] == [
        ("direct", "initialize"),
        ("writer", "notifications/initialized"),
        ("writer", "tools/list"),
    ]
    assert log[3:] == [("direct", "tools/call")] * 3
    assert [method for method, _ in fake.requests] == ["initialize", "tools/list"] + [
        "tools/call"
    ] * 3


async def test_calls_in_flight_go_through_the_writer(autojump_clock: Clock) -> None:
    fake = FakeServer(name="s", tools=[FakeTool("t")])
    log: list[tuple[str, str]] = []
    async with open_runtime(config(recorded(fake, log))) as rt:
        await rt.wait_ready()
        log.clear()
        fake.requests.clear()
        async with trio.open_nursery() as nursery:
            for i in range(8):
                nursery.start_soon(rt.call, "mcp_s_t", {"i": i})
    # The first call finds the connection idle; the other seven find a call in flight.
    assert log == [("direct", "tools/call")] + [("writer", "tools/call")] * 7
    assert sorted(params["arguments"]["i"] for _, params in fake.requests if params) == list(
        range(8)
    )


async def test_a_transport_that_declines_leaves_every_frame_to_the_writer(
    autojump_clock: Clock,
) -> None:
    fake = FakeServer(name="s", tools=[FakeTool("t")])
    log: list[tuple[str, str]] = []
    async with open_runtime(config(recorded(fake, log, refuse_direct=True))) as rt:
        await rt.wait_ready()
        assert (await rt.call("mcp_s_t")).text == "{}"
    assert {path for path, _ in log} == {"writer"}
    assert log[-1] == ("writer", "tools/call")


async def test_a_failing_direct_write_ends_the_connection_like_the_writer(
    autojump_clock: Clock,
) -> None:
    # try_send raising means nothing was written: the frame is queued, the writer meets the
    # same error, the connection ends and the call fails at once.
    fake = FakeServer(name="s", tools=[FakeTool("t")])
    log: list[tuple[str, str]] = []
    broken: list[Recording] = []

    @asynccontextmanager
    async def factory() -> AsyncIterator[Recording]:
        async with fake.connect() as inner:
            transport = Recording(inner, log)
            broken.append(transport)
            yield transport

    server = ServerConfig(name="s", type=TransportKind.CUSTOM, transport_factory=factory)
    async with open_runtime(config(server)) as rt:
        await rt.wait_ready()
        broken[0].fail_direct = True
        with pytest.raises(ServerDisconnected) as info:
            await rt.call("mcp_s_t")
        assert trio.current_time() == 0
        assert "the pipe broke" in str(info.value)
        assert "mcp_s_t" not in rt.tools()
