"""Both eras over real stdio subprocesses (the fake server's stdio mode), on the real clock:
a modern-only server, a dual one and a legacy one, side by side in one runtime."""

from __future__ import annotations

import json
import sys

import pytest
import trio

from trio_mcp.actors import RuntimeConfig, ServerConfig, ServerState, open_runtime
from trio_mcp.protocol import Era, ServerDisconnected


def server(name: str, era: str) -> ServerConfig:
    spec = {
        "name": name,
        "era": era,
        "tools": [{"name": "echo", "kind": "echo"}, {"name": "die", "kind": "crash"}],
    }
    return ServerConfig(
        name=name,
        command=sys.executable,
        args=("-m", "trio_mcp.actors.testing", "--spec-json", json.dumps(spec)),
        connect_timeout=20,
        timeout=20,
    )


async def test_each_era_over_stdio_side_by_side() -> None:
    servers = (server("new", "modern"), server("both", "dual"), server("old", "legacy"))
    with trio.fail_after(60):
        async with open_runtime(RuntimeConfig(servers=servers)) as rt:
            statuses = await rt.wait_ready()
            expected = {
                "new": (Era.MODERN, "2026-07-28"),
                "both": (Era.MODERN, "2026-07-28"),
                "old": (Era.LEGACY, "2025-11-25"),
            }
            for name, (era, version) in expected.items():
                status = statuses[name]
                assert status.state is ServerState.READY, status.last_error
                assert (status.era, status.protocol_version) == (era, version)
            for name in expected:
                result = await rt.call(f"mcp_{name}_echo", {"who": name})
                assert result.text == json.dumps({"who": name}, separators=(",", ":"))


async def test_a_modern_server_that_dies_mid_call_fails_the_call_and_comes_back() -> None:
    with trio.fail_after(60):
        async with open_runtime(RuntimeConfig(servers=(server("new", "modern"),))) as rt:
            await rt.wait_ready()
            with pytest.raises(ServerDisconnected) as info:
                await rt.call("mcp_new_die")
            assert info.value.sent is True
            result = await rt.call("mcp_new_echo", {}, wait_ready=20)
            assert result.text == "{}"
            status = rt.status()["new"]
            assert (status.generation, status.era) == (2, Era.MODERN)
