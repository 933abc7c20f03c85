"""The 2026-07-28 session and era detection, against the in-memory fake, on trio's virtual
clock (exact times).

The fake speaks the handshake revisions (``era="legacy"``, its default), only 2026-07-28
(``"modern"``), or both (``"dual"``: each connection speaks the era of its first request).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from trio_mcp.actors.config._backoff import RetryPolicy
from trio_mcp.actors.config._config import RuntimeConfig, ServerConfig
from trio_mcp.actors.runtime._callbacks import HostCallbacks
from trio_mcp.actors.runtime._events import ServerLogged, ServerState
from trio_mcp.actors.runtime._runtime import Runtime, open_runtime
from trio_mcp.actors.runtime._session import PROBE_TIMEOUT
from trio_mcp.actors.testing._fakes import FakeResource, FakeServer, FakeTool, ToolContext
from trio_mcp.protocol import (
    ElicitResult,
    Era,
    InputRequestFailed,
    InputRoundsExceeded,
    McpCatalogError,
    MissingClientCapability,
    ProgressNotificationParams,
    Root,
    UnsupportedProtocolVersion,
)
from trio_mcp.transports import FrameSink, HeaderTransport, MemoryTransport, TransportInfo

Clock = trio.testing.MockClock

MODERN = "2026-07-28"
PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
LOG_LEVEL = "io.modelcontextprotocol/logLevel"


def config(*servers: ServerConfig, **options: Any) -> RuntimeConfig:
    options.setdefault("retry", RetryPolicy(jitter=0.0))
    return RuntimeConfig(servers=servers, **options)


def methods(fake: FakeServer) -> list[str]:
    return [method for method, _ in fake.requests]


def meta_of(params: Mapping[str, Any] | None) -> Mapping[str, Any]:
    assert params is not None
    meta = params["_meta"]
    assert isinstance(meta, Mapping)
    return meta


async def reconnected(rt: Runtime, server: str, generation: int) -> None:
    """Wait until ``server`` is READY with a connection of ``generation``."""
    while True:
        status = rt.status()[server]
        if status.state is ServerState.READY and status.generation == generation:
            return
        await rt._supervisors[server].wait_changed()


# --------------------------------------------------------------------------- modern sessions


async def test_a_modern_server_is_found_by_the_probe_and_spoken_to_without_a_handshake(
    autojump_clock: Clock,
) -> None:
    fake = FakeServer(
        name="m",
        version="2.0",
        era="modern",
        instructions="be nice",
        tools=[FakeTool("echo")],
    )
    async with open_runtime(config(fake.server_config())) as rt:
        status = (await rt.wait_ready())["m"]
        assert status.state is ServerState.READY
        assert (status.protocol_version, status.era) == (MODERN, Era.MODERN)
        assert (status.server_name, status.server_version) == ("m", "2.0")
        assert status.declares("tools")
        session = rt._supervisors["m"].ready_session()
        assert session.info is not None
        assert session.info.instructions == "be nice"
        assert trio.current_time() == 0
        result = await rt.call("mcp_m_echo", {"x": 1})
        assert result.text == '{"x":1}'
    # the listen for the server's changes goes out before the first listing
    assert methods(fake) == ["server/discover", "subscriptions/listen", "tools/list", "tools/call"]
    assert fake.notifications == []  # no notifications/initialized
    for _, params in fake.requests:
        meta = meta_of(params)
        assert meta[PROTOCOL_VERSION] == MODERN
        assert meta[CAPABILITIES] == {}
        assert meta[CLIENT_INFO]["name"] == "trio-mcp"
        assert LOG_LEVEL not in meta  # no log level configured: the server sends no logs
    assert fake.requests[-1][1] == {
        "name": "echo",
        "arguments": {"x": 1},
        "_meta": fake.requests[-1][1]["_meta"],  # type: ignore[index]
    }


async def test_modern_requests_carry_the_log_level_and_the_2026_capabilities(
    autojump_clock: Clock,
) -> None:
    async def roots(server: str) -> list[Root]:
        return [Root(uri="file:///w")]

    async def elicit(server: str, params: Any) -> ElicitResult:
        return ElicitResult(action="decline")

    async def slow(arguments: dict[str, Any], ctx: ToolContext) -> str:
        await ctx.progress(1, 2)
        await ctx.log("debug", "below the level")
        await ctx.log("warning", "at the level")
        await ctx.progress(2, 2)
        return "done"

    fake = FakeServer(name="m", era="modern", tools=[FakeTool("slow", handler=slow)])
    callbacks = HostCallbacks(list_roots=roots, elicitation=elicit, elicitation_modes=("form",))
    seen: list[ProgressNotificationParams] = []
    async with open_runtime(
        config(fake.server_config(log_level="warning")), callbacks=callbacks
    ) as rt:
        await rt.wait_ready()
        with rt.events() as events:
            result = await rt.call("mcp_m_slow", progress=seen.append)
            assert result.text == "done"
            await trio.testing.wait_all_tasks_blocked()
            logged: list[Any] = []
            with contextlib.suppress(trio.WouldBlock):
                while True:
                    event = events.receive_nowait()
                    if isinstance(event, ServerLogged):
                        logged.append(event.data)
        assert logged == ["at the level"]
    assert [p.progress for p in seen] == [1, 2]
    assert "logging/setLevel" not in methods(fake)
    call = meta_of(fake.requests[-1][1])
    assert call[LOG_LEVEL] == "warning"
    # request ids: discover 1, subscriptions/listen 2, tools/list 3, this call 4
    assert call["progressToken"] == 4
    assert call[CAPABILITIES] == {"roots": {}, "elicitation": {"form": {}}}


async def test_a_dual_server_is_spoken_to_in_2026(autojump_clock: Clock) -> None:
    fake = FakeServer(name="d", era="dual", tools=[FakeTool("t")])
    async with open_runtime(config(fake.server_config())) as rt:
        status = (await rt.wait_ready())["d"]
        assert (status.protocol_version, status.era) == (MODERN, Era.MODERN)
    assert methods(fake) == ["server/discover", "subscriptions/listen", "tools/list"]


async def test_a_legacy_server_refusing_the_probe_gets_the_handshake(autojump_clock: Clock) -> None:
    fake = FakeServer(name="l", tools=[FakeTool("t")])
    async with open_runtime(config(fake.server_config())) as rt:
        status = (await rt.wait_ready())["l"]
        assert (status.protocol_version, status.era) == ("2025-11-25", Era.LEGACY)
        assert trio.current_time() == 0
    assert methods(fake) == ["server/discover", "initialize", "tools/list"]
    # the handshake and everything after it are legacy: no envelope
    assert "_meta" not in (fake.requests[1][1] or {})
    assert fake.requests[2][1] is None
    assert [m for m, _ in fake.notifications] == ["notifications/initialized"]


async def test_a_legacy_server_that_never_answers_the_probe_falls_back_in_bounded_time(
    autojump_clock: Clock,
) -> None:
    fake = FakeServer(name="l", tools=[FakeTool("t")], hang={"server/discover"})
    async with open_runtime(config(fake.server_config())) as rt:
        status = (await rt.wait_ready())["l"]
        assert status.era is Era.LEGACY
        assert trio.current_time() == PROBE_TIMEOUT == 5
    assert methods(fake) == ["server/discover", "initialize", "tools/list"]
    # a legacy server may not take a notification before initialize: the probe is not cancelled
    assert fake.cancellations == []


async def test_the_probe_takes_at_most_half_of_a_short_connect_timeout(
    autojump_clock: Clock,
) -> None:
    fake = FakeServer(name="l", tools=[FakeTool("t")], hang={"server/discover"})
    async with open_runtime(config(fake.server_config(connect_timeout=4))) as rt:
        status = (await rt.wait_ready())["l"]
        assert status.state is ServerState.READY
        assert trio.current_time() == 2


async def test_a_modern_server_too_slow_for_the_probe_is_found_by_its_answer_to_initialize(
    autojump_clock: Clock,
) -> None:
    # The first request fixes the connection's era (as the Python SDK does): the late probe
    # makes it modern, and initialize is refused with -32022 naming 2026-07-28.
    fake = FakeServer(name="m", era="dual", respond_after={"server/discover": 8})
    async with open_runtime(config(fake.server_config())) as rt:
        status = (await rt.wait_ready())["m"]
        assert (status.era, status.protocol_version) == (Era.MODERN, MODERN)
        # the probe gave up at 5; initialize was refused at once; discover again took 8
        assert trio.current_time() == 13
    assert methods(fake) == [
        "server/discover",
        "initialize",
        "server/discover",
        "subscriptions/listen",
        "tools/list",
    ]


async def test_a_32022_answer_to_the_probe_is_retried_with_a_listed_version_never_legacy(
    autojump_clock: Clock,
) -> None:
    fake = FakeServer(name="m", era="dual", unsupported_version_answers=1)
    async with open_runtime(config(fake.server_config())) as rt:
        status = (await rt.wait_ready())["m"]
        assert status.era is Era.MODERN
    assert methods(fake) == [
        "server/discover",
        "server/discover",
        "subscriptions/listen",
        "tools/list",
    ]


async def test_a_modern_server_with_no_version_in_common_fails_without_falling_back(
    autojump_clock: Clock,
) -> None:
    fake = FakeServer(name="m", era="dual", modern_versions=("2099-01-01",))
    retry = RetryPolicy(first_connect_delays=(), park_probe_interval=None)
    async with open_runtime(config(fake.server_config(), retry=retry)) as rt:
        status = (await rt.wait_ready())["m"]
        assert status.state is ServerState.FAILED
        error = status.last_error or ""
        assert "UnsupportedProtocolVersion" in error
        assert "2099-01-01" in error and MODERN in error
    # no version to retry with: no second discover, and never initialize
    assert methods(fake) == ["server/discover"]


async def test_a_discover_result_listing_no_common_version_fails(autojump_clock: Clock) -> None:
    # The server takes the request's version, but its discover result lists only another one.
    listing = {
        "resultType": "complete",
        "supportedVersions": ["2099-01-01"],
        "capabilities": {"tools": {}},
    }
    fake = FakeServer(name="m", era="modern", results={"server/discover": listing})
    retry = RetryPolicy(first_connect_delays=(), park_probe_interval=None)
    async with open_runtime(config(fake.server_config(), retry=retry)) as rt:
        status = (await rt.wait_ready())["m"]
        assert status.state is ServerState.FAILED
        error = status.last_error or ""
        assert "UnsupportedVersion" in error
        assert "supports 2099-01-01, and trio-mcp speaks 2026-07-28" in error
    assert methods(fake) == ["server/discover"]  # modern: never initialize


async def test_the_discover_result_chooses_the_newest_version_both_speak(
    autojump_clock: Clock,
) -> None:
    fake = FakeServer(name="m", era="modern", modern_versions=("2099-01-01", MODERN))
    async with open_runtime(config(fake.server_config())) as rt:
        status = (await rt.wait_ready())["m"]
        assert status.protocol_version == MODERN


async def test_a_32022_answer_to_a_call_makes_it_again_once_under_a_new_id(
    autojump_clock: Clock,
) -> None:
    fake = FakeServer(name="m", era="modern", tools=[FakeTool("t")])
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        fake.unsupported_version_answers = 1
        assert (await rt.call("mcp_m_t", {"a": 1})).text == '{"a":1}'
        assert methods(fake)[-2:] == ["tools/call", "tools/call"]
        fake.unsupported_version_answers = 2
        with pytest.raises(UnsupportedProtocolVersion) as info:
            await rt.call("mcp_m_t")
        message = str(info.value)
        assert "does not support protocol version 2026-07-28" in message
        assert "it supports 2026-07-28" in message and "trio-mcp speaks 2026-07-28" in message
        assert rt.status()["m"].state is ServerState.READY  # one call failed, not the server


async def test_a_32021_answer_names_the_capabilities_the_server_needs(
    autojump_clock: Clock,
) -> None:
    async def needs_sampling(arguments: dict[str, Any], ctx: ToolContext) -> str:
        raise MissingClientCapability(
            "sampling required", code=-32021, data={"requiredCapabilities": {"sampling": {}}}
        )

    fake = FakeServer(name="m", era="modern", tools=[FakeTool("t", handler=needs_sampling)])
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        with pytest.raises(MissingClientCapability) as info:
            await rt.call("mcp_m_t")
    assert info.value.required_capabilities == ("sampling",)
    assert "needs the client capabilities sampling" in str(info.value)
    assert "a sampling callback (HostCallbacks)" in str(info.value)


ASKING: Mapping[str, Any] = {
    "resultType": "input_required",
    "inputRequests": {
        "ok": {
            "method": "elicitation/create",
            "params": {"message": "sure?", "requestedSchema": {"type": "object"}},
        }
    },
    "requestState": "s-1",
}


async def test_a_server_asking_for_input_gets_the_hosts_answer_on_a_retry(
    autojump_clock: Clock,
) -> None:
    # The MRTR loop wired into the session: the tool asks for an elicitation, the host's one
    # callback answers, and the call is made again (a new id) with the answer and the state.
    asked: list[Any] = []

    async def elicit(server: str, params: Any) -> Mapping[str, Any]:
        asked.append((server, params.message))
        return {"action": "accept", "content": {"ok": True}}

    def tool(arguments: Mapping[str, Any], ctx: ToolContext) -> Any:
        responses = ctx.params.get("inputResponses")
        if responses is None:
            return ASKING
        assert ctx.params.get("requestState") == "s-1"
        return f"answered {responses['ok']['content']['ok']} as request {ctx.request_id}"

    fake = FakeServer(name="m", era="modern", tools=[FakeTool("t", handler=tool)])
    callbacks = HostCallbacks(elicitation=elicit)
    async with open_runtime(config(fake.server_config()), callbacks=callbacks) as rt:
        await rt.wait_ready()
        result = await rt.call("mcp_m_t")
        assert result.text.startswith("answered True as request ")
        assert asked == [("m", "sure?")]


async def test_input_the_host_cannot_give_fails_the_call_and_endless_rounds_are_cut(
    autojump_clock: Clock,
) -> None:
    fake = FakeServer(
        name="m",
        era="modern",
        tools=[FakeTool("t", result=ASKING)],
        resources=[FakeResource("doc://a", "a", text="x")],
        prompts=[],
        capabilities={"tools": {}, "resources": {}, "prompts": {}},
        results={"resources/read": ASKING, "prompts/get": ASKING},
    )
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        # no elicitation callback: the capability is not declared, the call is abandoned
        with pytest.raises(InputRequestFailed) as info:
            await rt.call("mcp_m_t")
        assert info.value.capability == "elicitation"
        assert (info.value.server, info.value.method) == ("m", "tools/call")
        # resources/read and prompts/get: the resource API's own error, saying the same
        with pytest.raises(McpCatalogError, match="elicitation") as read:
            await rt.read_resource("m", "doc://a")
        assert read.value.kind == "invalid"
        with pytest.raises(McpCatalogError, match="elicitation"):
            await rt.get_prompt("m", "p")
        assert rt.status()["m"].state is ServerState.READY

    async def accept(server: str, params: Any) -> Mapping[str, Any]:
        return {"action": "accept", "content": {}}

    runtime = config(fake.server_config(), max_input_rounds=3)
    async with open_runtime(runtime, callbacks=HostCallbacks(elicitation=accept)) as rt:
        await rt.wait_ready()
        with pytest.raises(InputRoundsExceeded) as rounds:
            await rt.call("mcp_m_t")
        assert rounds.value.rounds == 3


async def test_an_unknown_result_type_is_an_invalid_answer(autojump_clock: Clock) -> None:
    fake = FakeServer(name="m", era="modern", tools=[FakeTool("t", result={"resultType": "odd"})])
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        with pytest.raises(Exception, match=r"unknown resultType 'odd'"):
            await rt.call("mcp_m_t")


async def test_resource_reads_in_a_modern_session_carry_the_envelope(
    autojump_clock: Clock,
) -> None:
    fake = FakeServer(name="m", era="modern", resources=[FakeResource("doc://a", "a", text="hi")])
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        read = await rt.read_resource("m", "doc://a")
        assert read.contents[0].text == "hi"  # type: ignore[union-attr]
        page = await rt.list_resources("m")
        assert [r.uri for r in page.resources] == ["doc://a"]
        with pytest.raises(McpCatalogError) as info:
            await rt.read_resource("m", "doc://missing")
        assert info.value.kind == "not_found"
    for method, params in fake.requests:
        assert meta_of(params)[PROTOCOL_VERSION] == MODERN, method


# --------------------------------------------------------------------------- era memory


async def test_the_era_is_remembered_and_the_next_connection_skips_the_probe(
    autojump_clock: Clock,
) -> None:
    legacy = FakeServer(name="l", tools=[FakeTool("t")])
    modern = FakeServer(name="m", era="dual", tools=[FakeTool("t")])
    async with open_runtime(config(legacy.server_config(), modern.server_config())) as rt:
        await rt.wait_ready()
        assert methods(legacy) == ["server/discover", "initialize", "tools/list"]
        assert methods(modern) == ["server/discover", "subscriptions/listen", "tools/list"]
        legacy.requests.clear()
        modern.requests.clear()
        await legacy.disconnect()
        await modern.disconnect()
        await reconnected(rt, "l", 2)
        await reconnected(rt, "m", 2)
        assert rt.status()["l"].era is Era.LEGACY
        assert rt.status()["m"].era is Era.MODERN
    # legacy: initialize at once; modern: discover (its capabilities), no legacy fallback
    assert methods(legacy) == ["initialize", "tools/list"]
    assert methods(modern) == ["server/discover", "subscriptions/listen", "tools/list"]


async def test_a_remembered_era_that_fails_is_forgotten_and_the_next_attempt_probes(
    autojump_clock: Clock,
) -> None:
    fake = FakeServer(name="s", era="modern", tools=[FakeTool("t")])
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        assert rt.status()["s"].era is Era.MODERN
        # The server is replaced by a legacy one: discover (no probe now) is refused, the
        # attempt fails, and the one after it probes again and speaks the handshake.
        fake.era = "legacy"
        fake.requests.clear()
        await fake.disconnect()
        await reconnected(rt, "s", 3)
        status = rt.status()["s"]
        assert status.era is Era.LEGACY
        assert fake.connect_times == [0, 1, 3]  # reconnect after 1 s, then after 2 s more
    assert methods(fake) == [
        "server/discover",  # generation 2, remembered modern: refused, the attempt fails
        "server/discover",  # generation 3: the probe
        "initialize",
        "tools/list",
    ]


async def test_a_remembered_legacy_server_now_modern_is_spoken_to_in_2026_at_once(
    autojump_clock: Clock,
) -> None:
    fake = FakeServer(name="s", tools=[FakeTool("t")])
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        fake.era = "modern"
        fake.requests.clear()
        await fake.disconnect()
        await reconnected(rt, "s", 2)
        assert rt.status()["s"].era is Era.MODERN
    # initialize (remembered legacy) is refused with -32022 naming 2026-07-28: switch
    assert methods(fake) == ["initialize", "server/discover", "subscriptions/listen", "tools/list"]


async def test_a_forced_era_is_never_probed(autojump_clock: Clock) -> None:
    dual = FakeServer(name="d", era="dual", tools=[FakeTool("t")])
    legacy = FakeServer(name="l", tools=[FakeTool("t")])
    retry = RetryPolicy(first_connect_delays=(), park_probe_interval=None)
    servers = (
        dual.server_config(protocol="legacy"),
        legacy.server_config(protocol="modern"),
    )
    async with open_runtime(config(*servers, retry=retry)) as rt:
        statuses = await rt.wait_ready()
        assert (statuses["d"].era, statuses["d"].protocol_version) == (Era.LEGACY, "2025-11-25")
        assert statuses["l"].state is ServerState.FAILED
        assert "MethodNotFound" in (statuses["l"].last_error or "")
    assert methods(dual) == ["initialize", "tools/list"]
    assert methods(legacy) == ["server/discover"]  # modern only: no fallback


async def test_forced_legacy_names_both_sides_when_the_server_speaks_only_2026(
    autojump_clock: Clock,
) -> None:
    fake = FakeServer(name="m", era="modern")
    retry = RetryPolicy(first_connect_delays=(), park_probe_interval=None)
    async with open_runtime(config(fake.server_config(protocol="legacy"), retry=retry)) as rt:
        status = (await rt.wait_ready())["m"]
        assert status.state is ServerState.FAILED
        error = status.last_error or ""
        assert "refused initialize with 2025-11-25: it supports 2026-07-28" in error
        assert "set this server's protocol to 'auto' or 'modern'" in error


async def test_a_legacy_and_a_modern_server_side_by_side(autojump_clock: Clock) -> None:
    legacy = FakeServer(name="old", tools=[FakeTool("t")])
    modern = FakeServer(name="new", era="modern", tools=[FakeTool("t")])
    async with open_runtime(config(legacy.server_config(), modern.server_config())) as rt:
        statuses = await rt.wait_ready()
        assert statuses["old"].protocol_version == "2025-11-25"
        assert statuses["new"].protocol_version == MODERN
        async with trio.open_nursery() as nursery:
            for name in ("mcp_old_t", "mcp_new_t") * 5:
                nursery.start_soon(rt.call, name, {"n": name})
    assert methods(legacy).count("tools/call") == 5
    assert methods(modern).count("tools/call") == 5
    assert all("_meta" not in (p or {}) for m, p in legacy.requests if m == "tools/call")
    assert all(
        meta_of(p)[PROTOCOL_VERSION] == MODERN for m, p in modern.requests if m == "tools/call"
    )


# --------------------------------------------------------------------------- the headers hook


@attrs.define(eq=False)
class _Headed:
    """A memory transport that takes per-request headers (a :class:`HeaderTransport`)."""

    inner: MemoryTransport
    sent: list[tuple[str, dict[str, str]]] = attrs.Factory(list)

    @property
    def info(self) -> TransportInfo:
        return self.inner.info

    def send_nowait(self, frame: bytes, request_id: Any = None) -> None:
        self.inner.send_nowait(frame, request_id)

    async def send(self, frame: bytes, request_id: Any = None) -> None:
        await self.inner.send(frame, request_id)

    def send_with_headers_nowait(
        self, frame: bytes, request_id: Any, headers: Mapping[str, str]
    ) -> None:
        self.inner.send_nowait(frame, request_id)
        self.sent.append((json.loads(frame)["method"], dict(headers)))

    async def send_with_headers(
        self, frame: bytes, request_id: Any, headers: Mapping[str, str]
    ) -> None:
        await self.inner.send(frame, request_id)
        self.sent.append((json.loads(frame)["method"], dict(headers)))

    async def receive(self) -> bytes:
        return await self.inner.receive()

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_modern_requests_go_with_their_headers_to_a_transport_that_takes_them(
    autojump_clock: Clock,
) -> None:
    legacy = FakeServer(name="old", tools=[FakeTool("t")])
    modern = FakeServer(name="new", era="modern", tools=[FakeTool("t")])
    transports: dict[str, _Headed] = {}

    def headed(fake: FakeServer) -> Any:
        @asynccontextmanager
        async def factory(sink: FrameSink) -> AsyncIterator[_Headed]:
            async with fake.connect(sink) as inner:
                transport = _Headed(inner)
                assert isinstance(transport, HeaderTransport)
                transports[fake.name] = transport
                yield transport

        return factory

    servers = (
        ServerConfig(name="old", transport_factory=headed(legacy)),
        ServerConfig(name="new", transport_factory=headed(modern)),
    )
    async with open_runtime(config(*servers)) as rt:
        await rt.wait_ready()
        await rt.call("mcp_new_t")
        await rt.call("mcp_old_t")
    version = {"MCP-Protocol-Version": MODERN}

    def headers(method: str, **more: str) -> tuple[str, dict[str, str]]:
        return method, {**version, "Mcp-Method": method, **more}

    assert transports["new"].sent == [
        headers("server/discover"),
        headers("subscriptions/listen"),
        headers("tools/list"),
        headers("tools/call", **{"Mcp-Name": "t"}),
    ]
    # the legacy server's probe had them; its legacy requests have none (the plain path)
    assert transports["old"].sent == [headers("server/discover")]
    assert methods(legacy) == ["server/discover", "initialize", "tools/list", "tools/call"]
