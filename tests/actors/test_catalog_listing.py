"""What a resource or prompt listing tells the model: a cut list says how many more there are and
how many in all (as far as the server said), and ``ui://`` resources (interfaces an MCP App gives
the host to show) are not offered unless ``catalog_ui_resources`` says so."""

from __future__ import annotations

import json
from typing import Any

import trio
import trio.testing

from trio_mcp.actors import AgentSurface
from trio_mcp.actors.agent._catalog import ModelToolResult
from trio_mcp.actors.config._backoff import RetryPolicy
from trio_mcp.actors.config._config import RuntimeConfig, ServerConfig
from trio_mcp.actors.runtime._runtime import open_runtime
from trio_mcp.actors.testing._fakes import FakeResource, FakeResourceTemplate, FakeServer

Clock = trio.testing.MockClock


def config(*servers: ServerConfig, **options: Any) -> RuntimeConfig:
    return RuntimeConfig(servers=servers, retry=RetryPolicy(jitter=0.0), **options)


def body(result: ModelToolResult) -> Any:
    assert result.status == "ok", result.text
    return json.loads(result.text)


def numbered(count: int, prefix: str = "r") -> list[FakeResource]:
    return [FakeResource(f"{prefix}://{i}", f"{prefix}{i}", text="x") for i in range(count)]


# --------------------------------------------------------------------------- cut lists


async def test_a_cut_page_says_how_many_more_and_how_many_on_the_page(
    autojump_clock: Clock,
) -> None:
    fake = FakeServer(name="big", page_size=300, resources=numbered(350))
    async with open_runtime(config(fake.server_config())) as rt:
        agent = AgentSurface(rt)
        await rt.wait_ready()
        first = body(await agent.call_for_model("list_mcp_resources", {"server": "big"}))
        rest = body(
            await agent.call_for_model(
                "list_mcp_resources", {"server": "big", "cursor": first["nextCursor"]}
            )
        )
        last = body(
            await agent.call_for_model(
                "list_mcp_resources", {"server": "big", "cursor": rest["nextCursor"]}
            )
        )
    assert len(first["resources"]) == 200
    assert first["note"] == (
        "100 more resources of this page are not shown: this answer shows 1-200 of the 300 on "
        "this page (at most 200 per answer); pass nextCursor as cursor to see them; the server "
        "has more pages after this one (it does not say how many entries)"
    )
    assert [e["uri"] for e in rest["resources"]] == [f"r://{i}" for i in range(200, 300)]
    assert rest["note"] == (
        "the server has more resources than the 300 of this page (it does not say how many): "
        "pass nextCursor as cursor to see them"
    )
    assert [e["uri"] for e in last["resources"]] == [f"r://{i}" for i in range(300, 350)]
    assert "note" not in last and "nextCursor" not in last


async def test_a_list_cut_by_the_size_budget_says_so(autojump_clock: Clock) -> None:
    wordy = [FakeResource(f"r://{i}", f"r{i}", text="x", description="d" * 290) for i in range(20)]
    fake = FakeServer(name="wordy", resources=wordy)
    async with open_runtime(config(fake.server_config(), render_budget=4_000)) as rt:
        agent = AgentSurface(rt)
        await rt.wait_ready()
        first = body(await agent.call_for_model("list_mcp_resources", {"server": "wordy"}))
        second = body(
            await agent.call_for_model(
                "list_mcp_resources", {"server": "wordy", "cursor": first["nextCursor"]}
            )
        )
    shown = len(first["resources"])
    assert 0 < shown < 20
    assert first["note"] == (
        f"{20 - shown} more resources are not shown: this answer shows 1-{shown} of 20 "
        "resources in all (as many as fit in 4,000 characters); pass nextCursor as cursor to "
        "see them"
    )
    more = len(second["resources"])
    assert second["note"] == (
        f"{20 - shown - more} more resources are not shown: this answer shows "
        f"{shown + 1}-{shown + more} of 20 resources in all (as many as fit in 4,000 "
        "characters); pass nextCursor as cursor to see them"
    )


async def test_a_cut_list_of_every_server_counts_per_server_and_in_all(
    autojump_clock: Clock,
) -> None:
    big = FakeServer(name="a", resources=numbered(250))
    paged = FakeServer(name="b", page_size=10, resources=numbered(15, "p"))
    small = FakeServer(name="c", resources=numbered(3, "s"))
    servers = (big.server_config(), paged.server_config(), small.server_config())
    async with open_runtime(config(*servers)) as rt:
        agent = AgentSurface(rt)
        await rt.wait_ready()
        listing = body(await agent.call_for_model("list_mcp_resources", {}))
    assert len(listing["resources"]) == 200
    assert set(listing["nextCursors"]) == {"a", "b", "c"}
    assert listing["note"] == (
        "63 more resources are not shown: this answer shows 200 of at least 263, at most 200 "
        "per answer ('a': 50 more of 250; 'b': 10 more of the 10 on its first page, and more "
        "pages it does not count; 'c': 3 more of 3); call again with server "
        "and that server's cursor from nextCursors to see the rest"
    )


async def test_every_server_shown_but_one_with_more_pages(autojump_clock: Clock) -> None:
    paged = FakeServer(name="b", page_size=2, resources=numbered(3, "p"))
    small = FakeServer(name="c", resources=numbered(1, "s"))
    async with open_runtime(config(paged.server_config(), small.server_config())) as rt:
        agent = AgentSurface(rt)
        await rt.wait_ready()
        listing = body(await agent.call_for_model("list_mcp_resources", {}))
    assert [e["uri"] for e in listing["resources"]] == ["p://0", "p://1", "s://0"]
    assert listing["note"] == (
        "not every resource is shown: this answer shows 3 of at least 3 ('b': all 2 of its "
        "first page shown, and more pages it does not count); call again with server "
        "and that server's cursor from nextCursors to see the rest"
    )


# --------------------------------------------------------------------------- ui:// resources


def app_server() -> FakeServer:
    return FakeServer(
        name="app",
        resources=[
            FakeResource("doc://guide", "guide", text="How to use the app."),
            FakeResource("ui://app/chart", "chart", text="<html>chart</html>"),
            FakeResource("UI://app/table", "table", text="<html>table</html>"),
        ],
        resource_templates=[
            FakeResourceTemplate("ui://app/{view}", "view"),
            FakeResourceTemplate("doc://{page}", "page"),
        ],
    )


async def test_ui_resources_are_not_offered_to_the_model(autojump_clock: Clock) -> None:
    fake = app_server()
    async with open_runtime(config(fake.server_config())) as rt:
        agent = AgentSurface(rt)
        await rt.wait_ready()
        every = body(await agent.call_for_model("list_mcp_resources", {}))
        one = body(await agent.call_for_model("list_mcp_resources", {"server": "app"}))
        templates = body(await agent.call_for_model("list_mcp_resource_templates", {}))
        read = await agent.call_for_model(
            "read_mcp_resource", {"server": "app", "uri": "ui://app/chart"}
        )
        host = await rt.list_resources("app")
    assert [e["uri"] for e in every["resources"]] == ["doc://guide"]
    assert [e["uri"] for e in one["resources"]] == ["doc://guide"]
    assert [e["uriTemplate"] for e in templates["resourceTemplates"]] == ["doc://{page}"]
    # Reading one by its URI still works, and the host's own API lists them all.
    assert read.status == "ok" and "<html>chart</html>" in read.text
    assert [r.uri for r in host.resources] == ["doc://guide", "ui://app/chart", "UI://app/table"]


async def test_the_echo_shape_hides_them_too(autojump_clock: Clock) -> None:
    fake = app_server()
    async with open_runtime(config(fake.server_config(), catalog_shape="echo")) as rt:
        agent = AgentSurface(rt)
        await rt.wait_ready()
        listed = body(await agent.call_for_model("mcp_resources", {"action": "list"}))
        templates = body(await agent.call_for_model("mcp_resources", {"action": "templates"}))
    assert [e["uri"] for e in listed["resources"]] == ["doc://guide"]
    assert [e["uriTemplate"] for e in templates["resourceTemplates"]] == ["doc://{page}"]


async def test_catalog_ui_resources_offers_them(autojump_clock: Clock) -> None:
    fake = app_server()
    async with open_runtime(config(fake.server_config(), catalog_ui_resources=True)) as rt:
        agent = AgentSurface(rt)
        await rt.wait_ready()
        every = body(await agent.call_for_model("list_mcp_resources", {}))
        templates = body(await agent.call_for_model("list_mcp_resource_templates", {}))
    assert [e["uri"] for e in every["resources"]] == [
        "doc://guide",
        "ui://app/chart",
        "UI://app/table",
    ]
    assert [e["uriTemplate"] for e in templates["resourceTemplates"]] == [
        "ui://app/{view}",
        "doc://{page}",
    ]


async def test_cut_counts_leave_hidden_ui_resources_out(autojump_clock: Clock) -> None:
    resources = numbered(205) + [FakeResource(f"ui://w/{i}", f"w{i}", text="x") for i in range(9)]
    fake = FakeServer(name="mixed", resources=resources)
    async with open_runtime(config(fake.server_config())) as rt:
        agent = AgentSurface(rt)
        await rt.wait_ready()
        first = body(await agent.call_for_model("list_mcp_resources", {"server": "mixed"}))
    assert first["note"].startswith(
        "5 more resources are not shown: this answer shows 1-200 of 205 resources in all"
    )
