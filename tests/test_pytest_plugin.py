"""trio-mcp's pytest plugin (``trio_mcp.pytest_plugin``, entry point ``pytest11: trio_mcp``), run
as a host author runs it: small test files in a fresh pytest process (pytester)."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

#: The configuration docs/testing.md asks for (pytest-trio's trio mode).
INI = """
[pytest]
trio_mode = true
addopts = -p no:anyio -p no:cacheprovider
filterwarnings = error
"""

#: The five-line disconnect test of docs/testing.md, and what the other fixtures give.
HOST_TESTS = """
import pytest
import trio
import trio.testing

from trio_mcp import ServerDisconnected, ServerState
from trio_mcp.actors.testing import ChaosPolicy, FakeServer, FakeTool


async def test_a_dropped_connection(autojump_clock, mcp_fake_server, mcp_runtime):
    mcp_fake_server.crash_after_calls = 0  # the connection drops when the call arrives
    with pytest.raises(ServerDisconnected) as dropped:
        await mcp_runtime.call("mcp_fake_echo", {"x": 1})
    assert dropped.value.sent  # it had gone out: the outcome is unknown, never re-sent


async def test_the_runtime_over_the_fake(autojump_clock, mcp_fake_server, mcp_chaos, mcp_runtime):
    assert list(mcp_runtime.tools()) == ["mcp_fake_echo"]
    result = await mcp_runtime.call("mcp_fake_echo", {"x": 1})
    assert result.text == '{"x":1}'
    assert mcp_fake_server.requests[-1] == (
        "tools/call", {"name": "echo", "arguments": {"x": 1}}
    )
    assert (mcp_chaos.connections, mcp_chaos.transports) == (1, [])  # no chaos by default
    assert trio.current_time() == 0.0


@pytest.mark.trio
async def test_marked_trio_also_works(autojump_clock, mcp_runtime):
    assert mcp_runtime.status()["fake"].state is ServerState.READY
"""

#: Overriding fixtures: another fake, chaos on the first connection, the clock under control.
OVERRIDES = """
import pytest
import trio

from trio_mcp import ServerState
from trio_mcp.actors.testing import ChaosPolicy, FakeServer, FakeTool


@pytest.fixture
def mcp_fake_server():
    return FakeServer(name="files", tools=[FakeTool("read", result="hello")])


@pytest.fixture
def mcp_chaos_policy():
    return [ChaosPolicy(disconnect_after_frames=0)]  # the first connection is cut at once


async def test_the_first_connection_is_cut(autojump_clock, mcp_chaos, mcp_runtime):
    assert mcp_chaos.connections == 2
    assert mcp_chaos.transports[0].actions[0].kind == "disconnect"
    assert trio.current_time() == 1.0  # the first retry, one second later
    assert mcp_runtime.status()["files"].state is ServerState.READY
    assert (await mcp_runtime.call("mcp_files_read")).text == "hello"
"""

#: A test file that asks for none of the fixtures.
UNRELATED = """
import sys

import trio


def test_sync(pytestconfig):
    assert pytestconfig.pluginmanager.hasplugin("trio_mcp")
    assert not [name for name in sys.modules if name.startswith("trio_mcp.actors")]


async def test_async():
    await trio.sleep(0)
    loaded = [name for name in sys.modules if name.split(".")[0] == "trio_mcp"]
    assert sorted(loaded) == ["trio_mcp", "trio_mcp.pytest_plugin"]
"""


def test_the_fixtures_give_a_runtime_over_the_fake(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_host=HOST_TESTS, test_overrides=OVERRIDES)
    result = pytester.runpytest_subprocess("-q")
    result.assert_outcomes(passed=4)


def test_the_plugin_is_inert_unless_asked(pytester: pytest.Pytester) -> None:
    # Loaded (an entry point), yet it imports nothing of trio-mcp's layers and changes nothing.
    pytester.makeini(INI)
    pytester.makepyfile(test_unrelated=UNRELATED)
    result = pytester.runpytest_subprocess("-q")
    result.assert_outcomes(passed=2)


def test_the_plugin_can_be_turned_off(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_host=HOST_TESTS)
    result = pytester.runpytest_subprocess("-q", "-p", "no:trio_mcp")
    result.assert_outcomes(errors=3)
    result.stdout.fnmatch_lines(["*fixture 'mcp_fake_server' not found*"])


def test_the_plugin_exports_its_fixtures_only(pytester: pytest.Pytester) -> None:
    import trio_mcp.pytest_plugin as plugin

    assert plugin.__all__ == sorted(plugin.__all__)
    assert all(name.startswith("mcp_") for name in plugin.__all__)
    pytester.makeini(INI)
    result = pytester.runpytest_subprocess("--fixtures")
    lines = result.stdout.lines
    start = next(i for i, line in enumerate(lines) if "from trio_mcp.pytest_plugin" in line)
    listed = {line.split()[0] for line in lines[start + 1 :] if line and not line[0].isspace()}
    assert set(plugin.__all__) <= listed
    assert {name for name in listed if name.startswith("mcp_")} == set(plugin.__all__)
