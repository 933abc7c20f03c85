"""A hostile server's bytes are that server's problem: deep nesting, answers in batches or glued to
garbage, and a flood of notifications, over a real stdio subprocess (tests/actors/hostile_server.py)
next to a well-behaved in-memory server.

These run on the real clock (a real subprocess); they wait for events, never for durations, and
assert orders of events instead of times.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_mcp.actors import (
    RuntimeConfig,
    ServerConfig,
    ServerLogged,
    ServerState,
    open_runtime,
)
from trio_mcp.actors.testing import FakeServer, FakeTool
from trio_mcp.protocol import CallTimeout, InvalidMessage

HOSTILE = Path(__file__).with_name("hostile_server.py")


def hostile(*args: str, **options: Any) -> ServerConfig:
    settings: dict[str, Any] = {"connect_timeout": 30, "timeout": 30, **options}
    return ServerConfig(name="bad", command=sys.executable, args=(str(HOSTILE), *args), **settings)


async def test_a_line_nested_100000_deep_is_that_servers_bad_frame_only() -> None:
    quiet = FakeServer(name="quiet", tools=[FakeTool("t")])
    config = RuntimeConfig(servers=(hostile(), quiet.server_config()))
    with trio.fail_after(60):
        async with open_runtime(config) as rt:
            report = await rt.wait_ready()
            assert report.ready == ("bad", "quiet")
            # the deep line is refused alone; the answer after it still arrives
            assert (await rt.call("mcp_bad_deep")).text == "ok"
            assert (await rt.call("mcp_bad_go")).text == "ok"
            assert (await rt.call("mcp_quiet_t")).text == "{}"
            assert rt.status()["bad"].generation == 1  # the connection never dropped


@pytest.mark.parametrize(
    ("tool", "why"),
    [
        ("batch", "array"),  # an answer inside a batch, which 2025-11-25 does not allow
        ("glued", "JSON"),  # an answer glued to the start of another message
        ("cut", "JSON"),  # an answer cut short after its id
    ],
)
async def test_an_answer_whose_id_can_be_read_fails_its_call_at_once(tool: str, why: str) -> None:
    with trio.fail_after(60):
        async with open_runtime(RuntimeConfig(servers=(hostile(timeout=3600),))) as rt:
            await rt.wait_ready()
            # no waiting for the one-hour timeout: the call fails as a protocol error as soon
            # as its broken answer arrives, and the connection goes on
            with pytest.raises(InvalidMessage, match=why):
                await rt.call(f"mcp_bad_{tool}")
            assert (await rt.call("mcp_bad_go")).text == "ok"
            assert rt.status()["bad"].generation == 1


async def test_a_flood_of_notifications_starves_nobody() -> None:
    # The flooding server writes 10^6 notifications as fast as it can (the client parses them
    # much more slowly than they come), then a last log message "flood end". Meanwhile a call to
    # another server is answered, and a 1 s timeout on the flooding server fires at 1 s: both
    # long before the flood is over.
    quiet = FakeServer(name="quiet", tools=[FakeTool("t")])
    config = RuntimeConfig(servers=(hostile("--flood", "1000000"), quiet.server_config()))
    order: list[str] = []
    flood_over = trio.Event()
    with trio.fail_after(600):
        async with open_runtime(config) as rt, trio.open_nursery() as nursery:
            await rt.wait_ready()

            async def watch(
                *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
            ) -> None:
                with rt.events(max_buffer=64) as events:
                    task_status.started()  # subscribed before the flood starts
                    async for event in events:
                        if isinstance(event, ServerLogged) and event.data == "flood end":
                            order.append("flood end")
                            flood_over.set()
                            return

            await nursery.start(watch)
            assert (await rt.call("mcp_bad_flood")).text == "ok"
            for _ in range(20):
                assert (await rt.call("mcp_quiet_t")).text == "{}"
            order.append("quiet calls answered")
            started = trio.current_time()
            with pytest.raises(CallTimeout):
                await rt.call("mcp_bad_slow", timeout=1)
            waited = trio.current_time() - started
            order.append("timeout fired")
            assert waited >= 1
            await flood_over.wait()
            assert rt.status()["bad"].state is ServerState.READY
    assert order == ["quiet calls answered", "timeout fired", "flood end"]
