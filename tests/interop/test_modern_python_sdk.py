"""trio-mcp speaks 2026-07-28 to the official Python SDK (``mcp`` 2.x), which offers it beside
the handshake revisions, over stdio and Streamable HTTP; and an old server (the npm reference
server, handshake revisions only) beside it still gets the handshake.

The servers are the ones of ``test_stdio_python_sdk.py`` and ``test_http_python_sdk.py``,
real child processes on 127.0.0.1 and the real clock; here nothing pins an era: the runtime
probes (``protocol: auto``) and must find 2026-07-28.

Over HTTP the SDK also checks the ``Mcp-Method`` and ``Mcp-Name`` request headers of
2026-07-28 (-32020 without them): the session sends them (``Session._request_headers``).
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Iterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from tests.interop.servers.http_process import HttpServerProcess, python_http_server
from tests.interop.support import (
    CALL_BOUND,
    everything_server,
    interop_runtime,
    next_event,
    python_server,
)
from trio_mcp.actors import (
    HostCallbacks,
    RetryPolicy,
    Runtime,
    RuntimeConfig,
    ServerConfig,
    ServerState,
    ToolsChanged,
    open_runtime,
)
from trio_mcp.protocol import (
    CallTimeout,
    Era,
    GetPromptResult,
    MethodNotFound,
    ProgressNotificationParams,
    ReadResourceResult,
    TextContent,
    TextResourceContents,
    decode_result,
)
from trio_mcp.transports.http._http import HttpTransport

pytestmark = pytest.mark.interop

MODERN = "2026-07-28"
BOUND = 20.0


# --------------------------------------------------------------------------- stdio


async def test_stdio_the_sdk_is_found_by_the_probe_and_spoken_to_in_2026() -> None:
    async with interop_runtime(python_server("py")) as (rt, _):
        status = rt.status()["py"]
        assert (status.era, status.protocol_version) == (Era.MODERN, MODERN)
        assert (status.server_name, status.server_version) == ("interop-python", "1.0.0")
        session = rt._supervisors["py"].ready_session()
        assert session.info is not None
        assert session.info.instructions == "A test server for trio-mcp's interop suite."
        assert set(rt.tools()) >= {"mcp_py_add", "mcp_py_echo", "mcp_py_fail"}
        with trio.fail_after(CALL_BOUND):
            result = await rt.call("mcp_py_add", {"a": 2, "b": 3})
        assert result.content == (TextContent(text="5"),)
        assert result.structured_content == {"result": 5}
        text = 'héllo ✓ "quoted"\nsecond line'
        with trio.fail_after(CALL_BOUND):
            assert (await rt.call("mcp_py_echo", {"text": text})).text == text
            failed = await rt.call("mcp_py_fail", {"message": "boom"})
        assert failed.is_error is True

        # progress rides on the request's _meta token, as in the handshake revisions
        seen: list[ProgressNotificationParams] = []
        with trio.fail_after(CALL_BOUND):
            counted = await rt.call("mcp_py_count_slowly", {"steps": 3}, progress=seen.append)
        assert counted.text == "counted to 3"
        assert [p.progress for p in seen] == [1, 2, 3]

        # resources and prompts: the same code paths, with the envelope
        with trio.fail_after(CALL_BOUND):
            read = await rt.read_resource("py", "interop://greeting")
            prompt = await rt.get_prompt("py", "review", {"code": "x = 1"})
            raw = await rt.request("py", "resources/read", {"uri": "interop://items/7"})
        assert read.contents == (
            TextResourceContents(
                uri="interop://greeting", mime_type="text/plain", text="Hello from the Python SDK"
            ),
        )
        assert [(m.role, m.content) for m in prompt.messages] == [
            ("user", TextContent(text="Please review this python code:\nx = 1"))
        ]
        item = decode_result("resources/read", raw)
        assert isinstance(item, ReadResourceResult)
        assert isinstance(decode_result("prompts/get", {"messages": []}), GetPromptResult)

        # a method 2026-07-28 removed: the SDK says so, typed
        with trio.fail_after(CALL_BOUND), pytest.raises(MethodNotFound):
            await rt.request("py", "ping")

        # a call that outlives its timeout is cancelled (notifications/cancelled on stdio), and
        # the connection goes on
        with trio.fail_after(CALL_BOUND), pytest.raises(CallTimeout):
            await rt.call("mcp_py_count_slowly", {"steps": 100, "delay": 0.05}, timeout=0.3)
        with trio.fail_after(CALL_BOUND):
            assert (await rt.call("mcp_py_add", {"a": 40, "b": 2})).structured_content == {
                "result": 42
            }
        assert rt.status()["py"].generation == 1


async def test_stdio_a_tool_added_at_run_time_reaches_the_registry_through_the_listen(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The SDK serves subscriptions/listen (its subscription bus): the session's listen asks
    for what its server/discover announces, and the SDK's tool change, which it sends only on
    the listens that asked for it, is listed again and registered."""
    caplog.set_level(logging.WARNING, logger="trio_mcp.server.py")
    async with interop_runtime(python_server("py")) as (rt, _):
        assert rt.status()["py"].era is Era.MODERN
        session = rt._supervisors["py"].ready_session()
        assert session.statistics().subscriptions == 1
        await assert_added_through_the_listen(rt, "stdio")
    assert [r.getMessage() for r in caplog.records] == []  # everything asked was honoured


async def assert_added_through_the_listen(rt: Runtime, name: str) -> None:
    with rt.events() as events:
        with trio.fail_after(CALL_BOUND):
            result = await rt.call("mcp_py_add_tool", {"name": f"greeter_{name}"})
        assert result.text == f"added greeter_{name}"
        change = await next_event(
            events, lambda e: isinstance(e, ToolsChanged) and e.server == "py"
        )
    assert isinstance(change, ToolsChanged)
    assert change.added == (f"mcp_py_greeter_{name}",)
    with trio.fail_after(CALL_BOUND):
        greeted = await rt.call(f"mcp_py_greeter_{name}", {"who": "Ann"})
    assert greeted.text == f"greeter_{name} greets Ann"


async def test_stdio_the_sdk_asks_for_input_in_both_eras_and_one_callback_answers() -> None:
    # The SDK's resolver tools send their question as an input_required result (a multi round
    # trip) in 2026-07-28 and as a server request in 2025-11-25; the host's one elicitation and
    # sampling callbacks answer both.
    asked: list[tuple[str, str]] = []

    async def elicit(server: str, params: Any) -> Mapping[str, Any]:
        asked.append((server, params.message))
        return {"action": "accept", "content": {"ok": server == "new"}}

    async def sample(server: str, params: Any) -> Mapping[str, Any]:
        asked.append((server, params.messages[0].content.text))
        return {
            "role": "assistant",
            "content": {"type": "text", "text": f"42, says {server}"},
            "model": "test-model",
        }

    callbacks = HostCallbacks(elicitation=elicit, sampling=sample)
    servers = (python_server("new"), python_server("old", protocol="legacy"))
    async with interop_runtime(*servers, callbacks=callbacks) as (rt, _):
        assert rt.status()["new"].protocol_version == MODERN
        assert rt.status()["old"].protocol_version == "2025-11-25"
        with trio.fail_after(CALL_BOUND):
            new = await rt.call("mcp_new_confirm", {"what": "deploy"})
            old = await rt.call("mcp_old_confirm", {"what": "deploy"})
            sampled = await rt.call("mcp_new_ask_model", {"question": "the answer?"})
        assert (new.text, old.text) == ("deploy: yes", "deploy: no")
        assert sampled.text == "42, says new"
        assert asked == [
            ("new", "may I deploy?"),
            ("old", "may I deploy?"),
            ("new", "the answer?"),
        ]


async def test_stdio_both_eras_side_by_side_and_the_era_is_remembered() -> None:
    servers = (python_server("new"), everything_server("old"))
    async with interop_runtime(*servers) as (rt, _):
        statuses = rt.status()
        assert (statuses["new"].era, statuses["new"].protocol_version) == (Era.MODERN, MODERN)
        assert (statuses["old"].era, statuses["old"].protocol_version) == (
            Era.LEGACY,
            "2025-11-25",
        )
        with trio.fail_after(CALL_BOUND):
            added = await rt.call("mcp_new_add", {"a": 1, "b": 2})
            echoed = await rt.call("mcp_old_echo", {"message": "still here"})
        assert added.structured_content == {"result": 3}
        assert "still here" in echoed.text
        # a new connection to each (its process killed): the era found before, no probe
        for name in ("new", "old"):
            pid = statuses[name].pid
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
        with trio.fail_after(CALL_BOUND + 10):
            for name in ("new", "old"):
                supervisor = rt._supervisors[name]
                while supervisor.status().generation < 2 or not supervisor.accepts_calls:
                    await supervisor.wait_changed()
        statuses = rt.status()
        assert (statuses["new"].era, statuses["old"].era) == (Era.MODERN, Era.LEGACY)


# --------------------------------------------------------------------------- Streamable HTTP


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, HttpServerProcess]]:
    logs = tmp_path_factory.mktemp("python-http-modern")
    started = {mode: python_http_server(mode, logs) for mode in ("sse", "json", "stateless")}
    try:
        for server in started.values():
            server.launch()
        for server in started.values():
            server.wait_ready()
        yield started
    finally:
        for server in started.values():
            server.stop()


#: The parameter that ``Mcp-Name`` mirrors, per method.


@asynccontextmanager
async def ready(url: str, **options: Any) -> Any:
    config = RuntimeConfig(
        servers=(
            ServerConfig(name="py", url=url, connect_timeout=BOUND, timeout=BOUND, **options),
        ),
        retry=RetryPolicy(jitter=0.0, reconnect_initial=0.2),
    )
    async with open_runtime(config) as rt:
        with trio.fail_after(BOUND):
            statuses = await rt.wait_ready()
        assert statuses["py"].state is ServerState.READY, statuses["py"].last_error
        yield rt


@pytest.mark.parametrize("mode", ["sse", "json", "stateless"])
async def test_http_the_sdk_is_spoken_to_statelessly_in_2026(
    servers: dict[str, HttpServerProcess], mode: str
) -> None:
    async with ready(servers[mode].url("/mcp")) as rt:
        status = rt.status()["py"]
        assert (status.era, status.protocol_version, status.transport) == (
            Era.MODERN,
            MODERN,
            "http",
        )
        assert (status.server_name, status.server_version) == ("interop-python-http", "1.0.0")
        with trio.fail_after(BOUND):
            result = await rt.call("mcp_py_add", {"a": 2, "b": 3})
            assert result.structured_content == {"result": 5}
            text = 'héllo ✓ "quoted"\nsecond line'
            assert (await rt.call("mcp_py_echo", {"text": text})).text == text
            seen: list[float] = []
            counted = await rt.call(
                "mcp_py_count_slowly", {"steps": 3}, progress=lambda p: seen.append(p.progress)
            )
            assert counted.text == "counted to 3"
            assert seen == ([] if mode == "json" else [1, 2, 3])
            # calls in flight at once, each its own POST
            sums: list[Any] = []

            async def one(a: int) -> None:
                sums.append((await rt.call("mcp_py_add", {"a": a, "b": 100})).structured_content)

            async with trio.open_nursery() as nursery:
                for a in range(6):
                    nursery.start_soon(one, a)
        assert sorted(s["result"] for s in sums) == [100 + a for a in range(6)]
        transport = rt._supervisors["py"].ready_session().transport
        assert isinstance(transport, HttpTransport)
        stats = transport.statistics()
        assert (stats.mode, stats.has_session, stats.gets, stats.get_stream) == (
            "stateless",
            False,
            0,
            "off",
        )


async def test_http_a_timed_out_call_is_cancelled_by_closing_its_stream(
    servers: dict[str, HttpServerProcess],
) -> None:
    async with ready(servers["sse"].url("/mcp")) as rt:
        with trio.fail_after(BOUND), pytest.raises(CallTimeout):
            await rt.call("mcp_py_slow", {"seconds": 30}, timeout=0.5)
        with trio.fail_after(BOUND):
            assert (await rt.call("mcp_py_add", {"a": 1, "b": 1})).structured_content == {
                "result": 2
            }
        assert rt.status()["py"].state is ServerState.READY


@pytest.mark.parametrize("mode", ["sse", "json", "stateless"])
async def test_http_a_tool_added_at_run_time_reaches_the_registry_through_the_listen(
    servers: dict[str, HttpServerProcess], mode: str
) -> None:
    """Over Streamable HTTP the listen is a POST whose answer is a long-lived SSE stream (also
    in the SDK's JSON mode: a listen is always a stream); the change comes on it."""
    async with ready(servers[mode].url("/mcp")) as rt:
        session = rt._supervisors["py"].ready_session()
        assert session.statistics().subscriptions == 1
        await assert_added_through_the_listen(rt, mode)
        transport = session.transport
        assert isinstance(transport, HttpTransport)
        assert transport.statistics().waiting == 0
