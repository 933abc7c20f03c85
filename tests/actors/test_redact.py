from __future__ import annotations

import logging
from typing import Any

import pytest
import trio.testing

from trio_mcp.actors import RuntimeConfig, open_runtime
from trio_mcp.actors.config._redact import REDACTED, redact
from trio_mcp.actors.testing import FakeServer, FakeTool


def test_secret_keys_are_masked_at_any_depth() -> None:
    value = {
        "query": "weather",
        "api_key": "sk-123",
        "nested": {"Authorization": "Bearer x", "items": [{"password": "p", "ok": 1}]},
        "githubToken": "ghp_1",
    }
    assert redact(value) == {
        "query": "weather",
        "api_key": REDACTED,
        "nested": {"Authorization": REDACTED, "items": [{"password": REDACTED, "ok": 1}]},
        "githubToken": REDACTED,
    }


def test_long_strings_and_big_lists_are_cut() -> None:
    assert redact("x" * 300) == "x" * 200 + "... (300 characters)"
    out = redact(list(range(60)))
    assert out[:3] == [0, 1, 2]
    assert out[-1] == "... 10 more"


def test_deep_structures_are_bounded() -> None:
    deep: Any = "bottom"
    for _ in range(20):
        deep = {"a": deep}
    text = repr(redact(deep))
    assert "bottom" not in text
    assert "..." in text


async def test_calls_are_logged_at_debug_without_secrets(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="trio_mcp.runtime")
    fake = FakeServer(name="s", tools=[FakeTool("login")])
    async with open_runtime(RuntimeConfig(servers=(fake.server_config(),))) as rt:
        await rt.wait_ready()
        await rt.call("mcp_s_login", {"user": "ann", "password": "hunter2"})
    text = "\n".join(r.getMessage() for r in caplog.records if r.name == "trio_mcp.runtime")
    assert "call mcp_s_login -> s/login {'user': 'ann', 'password': '***'}" in text
    assert "hunter2" not in text.replace("'***'", "")
    assert 'call mcp_s_login done: isError=False {"password":"***","user":"ann"}' in text
