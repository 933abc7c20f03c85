"""OpenTelemetry: the spans of connect, list and call, and the trace context sent in ``_meta``.

Each test gives its runtime a tracer provider of its own (``RuntimeConfig.tracer_provider``) with
the SDK's in-memory exporter, so nothing here touches the global provider, which other tests
(and their exact ``_meta``) must not see."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import SpanKind, StatusCode

from trio_mcp.actors import RuntimeConfig, ServerConfig, TransportKind, open_runtime
from trio_mcp.actors.testing import FakeServer, FakeTool
from trio_mcp.protocol import CallTimeout, ServerDisconnected, ServerUnavailable, TransportClosed

from .test_session_send_paths import Around, around


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider
    provider.shutdown()


def fake() -> FakeServer:
    return FakeServer(
        name="files",
        tools=[
            FakeTool("read", result="hello"),
            FakeTool("fail", result={"content": [{"type": "text", "text": "no"}], "isError": True}),
        ],
    )


def config(server: FakeServer, provider: TracerProvider | None, **options: Any) -> RuntimeConfig:
    return RuntimeConfig(servers=(server.server_config(**options),), tracer_provider=provider)


def spans(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [span for span in exporter.get_finished_spans() if span.name == name]


def traceparent(span: ReadableSpan) -> str:
    context = span.get_span_context()
    assert context is not None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"


def all_meta(server: FakeServer) -> list[dict[str, Any]]:
    return [dict((params or {}).get("_meta") or {}) for _, params in server.requests]


def meta_of(server: FakeServer, method: str) -> list[dict[str, Any]]:
    return [dict((params or {}).get("_meta") or {}) for m, params in server.requests if m == method]


async def test_a_successful_call(
    autojump_clock: trio.testing.MockClock,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    server = fake()
    async with open_runtime(config(server, provider)) as rt:
        await rt.wait_ready()
        result = await rt.call("mcp_files_read", {"path": "a"})
    assert result.text == "hello"
    (call,) = spans(exporter, "tools/call read")
    assert call.kind is SpanKind.CLIENT
    assert dict(call.attributes or {}) == {
        "mcp.method.name": "tools/call",
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "read",
        "trio_mcp.tool": "mcp_files_read",
        "trio_mcp.server": "files",
        "trio_mcp.sent": True,
        "trio_mcp.outcome": "ok",
    }
    assert call.status.status_code is StatusCode.UNSET
    # The server got the call's own context, and nothing else of tracing.
    (sent,) = meta_of(server, "tools/call")
    assert sent == {"traceparent": traceparent(call)}


async def test_a_tool_error(
    autojump_clock: trio.testing.MockClock,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    async with open_runtime(config(fake(), provider)) as rt:
        await rt.wait_ready()
        result = await rt.call("mcp_files_fail")
    assert result.is_error
    (call,) = spans(exporter, "tools/call fail")
    attributes = dict(call.attributes or {})
    assert attributes["trio_mcp.outcome"] == "tool_error"
    assert attributes["error.type"] == "tool_error"
    assert attributes["trio_mcp.sent"] is True
    assert call.status.status_code is StatusCode.ERROR


async def test_a_timeout(
    autojump_clock: trio.testing.MockClock,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    server = fake()
    server.hang.add("tools/call")
    async with open_runtime(config(server, provider, timeout=5.0)) as rt:
        await rt.wait_ready()
        with pytest.raises(CallTimeout):
            await rt.call("mcp_files_read")
        assert trio.current_time() == 5.0
    (call,) = spans(exporter, "tools/call read")
    attributes = dict(call.attributes or {})
    assert attributes["trio_mcp.outcome"] == "timeout"
    assert attributes["error.type"] == "CallTimeout"
    assert attributes["trio_mcp.sent"] is True
    assert call.status.status_code is StatusCode.ERROR
    # and the server was told that nobody waits for the answer any more
    assert server.cancellations


async def test_a_disconnect_after_sending(
    autojump_clock: trio.testing.MockClock,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    server = fake()
    server.crash_after_calls = 0
    async with open_runtime(config(server, provider)) as rt:
        await rt.wait_ready()
        with pytest.raises(ServerDisconnected) as caught:
            await rt.call("mcp_files_read")
    assert caught.value.sent
    (call,) = spans(exporter, "tools/call read")
    attributes = dict(call.attributes or {})
    assert attributes["trio_mcp.outcome"] == "disconnected"
    assert attributes["trio_mcp.sent"] is True
    assert attributes["error.type"] == "ServerDisconnected"


async def test_a_disconnect_before_sending(
    autojump_clock: trio.testing.MockClock,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    server = fake()
    found: list[Around] = []
    transport = ServerConfig(
        name="files", type=TransportKind.CUSTOM, transport_factory=around(server, found)
    )
    async with open_runtime(RuntimeConfig(servers=(transport,), tracer_provider=provider)) as rt:
        await rt.wait_ready()
        found[0].broken = TransportClosed("the pipe broke")
        with pytest.raises(ServerDisconnected) as caught:
            await rt.call("mcp_files_read")
    assert not caught.value.sent
    (call,) = spans(exporter, "tools/call read")
    attributes = dict(call.attributes or {})
    assert attributes["trio_mcp.outcome"] == "disconnected"
    assert attributes["trio_mcp.sent"] is False
    assert attributes["error.type"] == "ServerDisconnected"


async def test_not_sent_when_the_server_is_not_ready(
    autojump_clock: trio.testing.MockClock,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    server = fake()
    async with open_runtime(config(server, provider)) as rt:
        await rt.wait_ready()
        await server.disconnect()
        await trio.sleep(0.5)  # reconnecting: the first retry is due at 1 s
        with pytest.raises(ServerUnavailable):
            await rt.call("mcp_files_read")
    (call,) = [s for s in exporter.get_finished_spans() if s.name.startswith("tools/call")]
    attributes = dict(call.attributes or {})
    assert attributes["trio_mcp.outcome"] == "unavailable"
    assert attributes["trio_mcp.sent"] is False
    assert attributes["trio_mcp.tool"] == "mcp_files_read"


async def test_connect_and_list_spans(
    autojump_clock: trio.testing.MockClock,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    server = fake()
    server.refuse_connects = 1
    async with open_runtime(config(server, provider)) as rt:
        await rt.wait_ready()
    failed, ready = spans(exporter, "mcp connect")
    assert dict(failed.attributes or {}) == {
        "trio_mcp.server": "files",
        "trio_mcp.generation": 1,
        "trio_mcp.outcome": "failed",
        "error.type": "ConnectError",
    }
    assert failed.status.status_code is StatusCode.ERROR
    assert dict(ready.attributes or {}) == {
        "trio_mcp.server": "files",
        "trio_mcp.generation": 2,
        "trio_mcp.outcome": "ready",
        "mcp.protocol.version": "2025-11-25",
        "trio_mcp.era": "legacy",
        "trio_mcp.tools": 2,
    }
    assert failed.end_time is not None and ready.start_time is not None
    assert failed.end_time <= ready.start_time  # (span times are the wall clock's)
    (listing,) = spans(exporter, "tools/list")
    assert dict(listing.attributes or {}) == {
        "mcp.method.name": "tools/list",
        "trio_mcp.server": "files",
        "trio_mcp.outcome": "ok",
        "trio_mcp.tools": 2,
        "trio_mcp.refused": 0,
    }
    # The listing is a child of the attempt, and each request of the attempt carried its
    # context: the probe, the handshake and the listing.
    assert listing.parent is not None
    assert listing.parent.span_id == ready.get_span_context().span_id  # type: ignore[union-attr]
    assert ready.parent is None  # a trace of its own
    for method in ("server/discover", "initialize"):
        assert meta_of(server, method)[-1]["traceparent"] == traceparent(ready)
    assert meta_of(server, "tools/list") == [{"traceparent": traceparent(listing)}]


async def test_the_host_span_is_the_parent_of_the_call(
    autojump_clock: trio.testing.MockClock,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    async with open_runtime(config(fake(), provider)) as rt:
        await rt.wait_ready()
        with provider.get_tracer("host").start_as_current_span("agent turn") as turn:
            await rt.call("mcp_files_read")
    (call,) = spans(exporter, "tools/call read")
    assert call.parent is not None
    assert call.parent.span_id == turn.get_span_context().span_id
    assert call.context is not None
    assert call.context.trace_id == turn.get_span_context().trace_id


async def test_a_sampled_out_call_still_passes_its_context_on(
    autojump_clock: trio.testing.MockClock, exporter: InMemorySpanExporter
) -> None:
    provider = TracerProvider(sampler=ALWAYS_OFF)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    server = fake()
    async with open_runtime(config(server, provider)) as rt:
        await rt.wait_ready()
        await rt.call("mcp_files_read")
    assert exporter.get_finished_spans() == ()
    (sent,) = meta_of(server, "tools/call")
    flags = int(sent["traceparent"].rsplit("-", 1)[1], 16)
    assert not flags & trace.TraceFlags.SAMPLED  # the flags say: not sampled


async def test_tracestate_is_sent_and_a_callers_own_context_kept(
    autojump_clock: trio.testing.MockClock,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    server = fake()
    parent = trace.SpanContext(
        trace_id=0x0AF7651916CD43DD8448EB211C80319C,
        span_id=0x00F067AA0BA902B7,
        is_remote=True,
        trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
        trace_state=trace.TraceState([("congo", "t61rcWkgMzE")]),
    )
    async with open_runtime(config(server, provider)) as rt:
        await rt.wait_ready()
        with trace.use_span(trace.NonRecordingSpan(parent)):
            await rt.call("mcp_files_read")
            await rt.request("files", "ping", {"_meta": {"traceparent": "00-caller-own-01"}})
    (sent,) = meta_of(server, "tools/call")
    assert sent["traceparent"].startswith("00-0af7651916cd43dd8448eb211c80319c-")
    assert sent["tracestate"] == "congo=t61rcWkgMzE"
    assert meta_of(server, "ping")[-1]["traceparent"] == "00-caller-own-01"


async def test_without_an_sdk_nothing_is_sent(autojump_clock: trio.testing.MockClock) -> None:
    # The global provider is the API's default here: no span is recorded, nothing is passed on.
    assert not isinstance(trace.get_tracer_provider(), TracerProvider)
    server = fake()
    async with open_runtime(config(server, None)) as rt:
        await rt.wait_ready()
        await rt.call("mcp_files_read", {"path": "a"})
    assert server.requests[-1] == ("tools/call", {"name": "read", "arguments": {"path": "a"}})
    assert not [meta for meta in all_meta(server) if "traceparent" in meta]


def test_without_opentelemetry_installed() -> None:
    # A process where ``import opentelemetry`` fails, as without the otel extra: the runtime
    # works, nothing is traced, and no request carries a trace context.
    script = textwrap.dedent(
        """
        import sys
        sys.modules["opentelemetry"] = None
        import trio
        from trio_mcp.actors import RuntimeConfig, open_runtime
        from trio_mcp.actors.runtime import _tracing
        from trio_mcp.actors.testing import FakeServer, FakeTool

        async def main():
            fake = FakeServer(name="files", tools=[FakeTool("read", result="hello")])
            async with open_runtime(RuntimeConfig(servers=(fake.server_config(),))) as rt:
                await rt.wait_ready()
                result = await rt.call("mcp_files_read")
            assert result.text == "hello"
            metas = [dict((params or {}).get("_meta") or {}) for _, params in fake.requests]
            assert metas and not [meta for meta in metas if "traceparent" in meta]
            loaded = [m for m, v in sys.modules.items() if v and m.startswith("opentelemetry")]
            print(_tracing.TRACING, loaded)

        trio.run(main)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "[]"]


def test_the_provider_is_not_part_of_the_configurations_equality(
    provider: TracerProvider,
) -> None:
    assert RuntimeConfig(tracer_provider=provider) == RuntimeConfig()
    assert "tracer_provider" not in repr(RuntimeConfig(tracer_provider=provider))
    assert attrs.evolve(RuntimeConfig(), tracer_provider=provider).tracer_provider is provider
