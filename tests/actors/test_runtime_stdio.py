"""The runtime with real stdio subprocesses (the fake server's stdio mode), on the real clock."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_mcp.actors import (
    RetryPolicy,
    RuntimeConfig,
    ServerConfig,
    ServerLogged,
    ServerState,
    open_runtime,
)
from trio_mcp.protocol import ServerDisconnected

SPEC: dict[str, Any] = {
    "name": "proc",
    "stderr_banner": "proc server starting",
    "tools": [
        {"name": "echo", "kind": "echo"},
        {"name": "die", "kind": "crash", "exit_code": 3},
        {"name": "noisy", "kind": "stderr", "bytes": 2_000_000},
    ],
}


def server(**options: Any) -> ServerConfig:
    return ServerConfig(
        name="proc",
        command=sys.executable,
        args=("-m", "trio_mcp.actors.testing", "--spec-json", json.dumps(SPEC)),
        connect_timeout=20,
        timeout=20,
        **options,
    )


def alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


async def test_a_crash_fails_the_call_and_the_server_comes_back() -> None:
    config = RuntimeConfig(servers=(server(),), retry=RetryPolicy(reconnect_initial=0.1, jitter=0))
    with trio.fail_after(60):
        async with open_runtime(config) as rt:
            await rt.wait_ready()
            first = rt.status()["proc"].pid
            assert first is not None
            with pytest.raises(ServerDisconnected) as info:
                await rt.call("mcp_proc_die")
            assert info.value.sent is True
            assert "exited with code 3" in str(info.value)
            assert "proc server starting" in str(info.value)  # the stderr tail
            while not (
                rt.status()["proc"].state is ServerState.READY
                and rt.status()["proc"].generation == 2
                and "mcp_proc_echo" in rt.tools()
            ):
                await rt.wait_tools_changed(rt.tools_version)
            second = rt.status()["proc"].pid
            assert second is not None
            assert second != first
            assert not alive(first)
            assert (await rt.call("mcp_proc_echo", {"a": 1})).text == '{"a":1}'
        assert not alive(second)


async def test_stderr_is_drained_published_and_kept_for_status() -> None:
    with trio.fail_after(60):
        async with open_runtime(RuntimeConfig(servers=(server(),))) as rt:
            with rt.events(max_buffer=16) as events:
                await rt.wait_ready()
                # 2 MB on stderr cannot stall the connection, and a slow subscriber only
                # loses events: the call still returns
                result = await rt.call("mcp_proc_noisy")
                assert result.text
                assert (await rt.call("mcp_proc_echo", {})).text == "{}"
                stderr_events = []
                while True:
                    try:
                        event = events.receive_nowait()
                    except trio.WouldBlock:
                        break
                    if isinstance(event, ServerLogged) and event.stderr:
                        stderr_events.append(event)
                assert stderr_events
                assert events.dropped > 0
            tail = rt.status()["proc"].stderr_tail
            assert tail
            assert len(tail) <= 50


async def test_the_server_gets_the_allow_listed_environment_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TRIO_MCP_TEST_SECRET", "do-not-leak")
    with trio.fail_after(60):
        async with open_runtime(RuntimeConfig(servers=(server(env={"MINE": "1"}),))) as rt:
            await rt.wait_ready()
            pid = rt.status()["proc"].pid
            assert pid is not None
            environ = (await trio.Path(f"/proc/{pid}/environ").read_bytes()).split(b"\0")
            assert b"TRIO_MCP_TEST_SECRET=do-not-leak" not in environ
            assert b"MINE=1" in environ
            assert any(line.startswith(b"PATH=") for line in environ)
            assert os.environ["TRIO_MCP_TEST_SECRET"] == "do-not-leak"
