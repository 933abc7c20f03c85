"""A ``nextCursor`` over 64 KiB fails that server's listing, like the other pagination abuses
(too many pages or entries, a cursor cycle): tools/list in ``Session.list_all``, the resource and
prompt pages of the host API and the model's tools, and the CLI's listings. Nothing is sent back
to the server, and nothing of it reaches the model."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from trio_mcp.actors import AgentSurface
from trio_mcp.actors.cli._cli import _Exit, _list_all
from trio_mcp.actors.config._backoff import RetryPolicy
from trio_mcp.actors.config._config import RuntimeConfig, ServerConfig
from trio_mcp.actors.runtime._events import ServerState
from trio_mcp.actors.runtime._runtime import open_runtime
from trio_mcp.actors.runtime._session import MAX_CURSOR_BYTES, cursor_too_long
from trio_mcp.actors.testing._fakes import FakeResource, FakeServer, FakeTool
from trio_mcp.protocol._errors import McpCatalogError

Clock = trio.testing.MockClock


@attrs.define(eq=False)
class PaddedCursors(FakeServer):
    """A fake whose every ``nextCursor`` is padded to ``cursor_bytes`` UTF-8 bytes with
    ``pad``; the padding is taken off again when the cursor comes back, so a client that follows
    it gets the next page."""

    cursor_bytes: int = 0
    pad: str = "x"

    def _page(
        self, method: str, key: str, entries: Sequence[Any], params: Mapping[str, Any]
    ) -> dict[str, Any]:
        cursor = params.get("cursor")
        if isinstance(cursor, str):
            params = {**params, "cursor": cursor.split("|", 1)[0]}
        result = super()._page(method, key, entries, params)
        following = result.get("nextCursor")
        if following is not None:
            room = self.cursor_bytes - len(following) - 1
            padded = f"{following}|{self.pad * (room // len(self.pad.encode()))}"
            assert len(padded.encode()) == self.cursor_bytes
            result["nextCursor"] = padded
        return result


def config(*servers: ServerConfig, **options: Any) -> RuntimeConfig:
    return RuntimeConfig(servers=servers, retry=RetryPolicy(jitter=0.0), **options)


def listed_cursors(fake: FakeServer, method: str) -> list[Any]:
    return [(params or {}).get("cursor") for m, params in fake.requests if m == method]


def test_the_limit_counts_utf8_bytes() -> None:
    assert MAX_CURSOR_BYTES == 65_536
    assert not cursor_too_long("x" * 65_536)
    assert cursor_too_long("x" * 65_537)
    assert not cursor_too_long("\U0001f600" * 16_384)  # 65,536 bytes
    assert cursor_too_long("\U0001f600" * 16_385)
    assert cursor_too_long("\u00e9" * 40_000)  # 80,000 bytes in 40,000 characters


async def test_a_cursor_over_64_kib_fails_that_servers_tool_listing_alone(
    autojump_clock: Clock,
) -> None:
    long = PaddedCursors(
        name="long", page_size=1, cursor_bytes=65_537, tools=[FakeTool("a"), FakeTool("b")]
    )
    wide = PaddedCursors(
        name="wide",
        page_size=1,
        cursor_bytes=65_541,
        pad="\U0001f600",
        tools=[FakeTool("a"), FakeTool("b")],
    )
    good = FakeServer(name="good", tools=[FakeTool("t")])
    servers = (long.server_config(), wide.server_config(), good.server_config())
    async with open_runtime(config(*servers)) as rt:
        statuses = await rt.wait_ready(timeout=0.5)
        assert statuses["good"].state is ServerState.READY
        assert set(rt.tools()) == {"mcp_good_t"}
    for name in ("long", "wide"):
        assert statuses[name].state is not ServerState.READY
        assert f"server {name!r}: tools/list returned a nextCursor of more than 65,536 bytes" in (
            statuses[name].last_error or ""
        )
    # The cursor was never sent back.
    assert set(listed_cursors(long, "tools/list")) == {None}
    assert set(listed_cursors(wide, "tools/list")) == {None}


async def test_a_cursor_of_exactly_64_kib_is_followed(autojump_clock: Clock) -> None:
    fake = PaddedCursors(
        name="s", page_size=1, cursor_bytes=65_536, tools=[FakeTool("a"), FakeTool("b")]
    )
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        assert set(rt.tools()) == {"mcp_s_a", "mcp_s_b"}


async def test_a_cursor_over_64_kib_fails_that_servers_resource_listing(
    autojump_clock: Clock,
) -> None:
    resources = [FakeResource(f"r://{i}", f"r{i}", text="x") for i in range(2)]
    long = PaddedCursors(name="long", page_size=1, cursor_bytes=65_537, resources=resources)
    good = FakeServer(name="good", resources=resources)
    async with open_runtime(config(long.server_config(), good.server_config())) as rt:
        agent = AgentSurface(rt)
        await rt.wait_ready()
        with pytest.raises(McpCatalogError) as caught:
            await rt.list_resources("long")
        everyone = await agent.call_for_model("list_mcp_resources", {})
        one = await agent.call_for_model("list_mcp_resources", {"server": "long"})
    why = (
        "the MCP server 'long' answered resources/list with a nextCursor of more than 65,536 "
        "bytes, which this client does not follow"
    )
    assert (caught.value.kind, str(caught.value)) == ("server_error", why)
    listing = json.loads(everyone.text)
    assert [e["uri"] for e in listing["resources"]] == ["r://0", "r://1"]
    assert listing["errors"] == [{"server": "long", "kind": "server_error", "error": why}]
    assert "nextCursors" not in listing
    assert (one.status, one.text) == (
        "server_error",
        f"list_mcp_resources failed (server_error): {why}",
    )
    assert len(everyone.text) < 1_000


async def test_the_cli_listing_stops_at_a_cursor_over_64_kib(autojump_clock: Clock) -> None:
    long = PaddedCursors(
        name="long",
        page_size=1,
        cursor_bytes=65_537,
        resources=[FakeResource(f"r://{i}", f"r{i}", text="x") for i in range(2)],
    )
    async with open_runtime(config(long.server_config())) as rt:
        await rt.wait_ready()
        with pytest.raises(_Exit) as caught:
            await _list_all(rt, "long", "resources/list", "resources")
    assert str(caught.value) == (
        "server 'long': resources/list returned a nextCursor of more than 65,536 bytes"
    )
    assert set(listed_cursors(long, "resources/list")) == {None}
