"""Large catalogues: ``AgentSurface(rt, tool_search=ToolSearch(...))`` offers a small list (the
tools always loaded, the ones found so far, and ``search_mcp_tools``); a search returns the
matching tools' full definitions and loads them for the next turn."""

from __future__ import annotations

import json

import pytest
from trio.testing import MockClock

from trio_mcp.actors import AgentSurface, RuntimeConfig, ToolSearch, open_runtime
from trio_mcp.actors.agent import SEARCH_TOOL_NAME
from trio_mcp.actors.testing import FakeServer, FakeTool

ISSUES = FakeServer(
    name="gh",
    tools=[
        FakeTool("create_issue", description="Create an issue in a repository. Needs a title."),
        FakeTool("list_issues", description="List the open issues of a repository."),
        FakeTool("merge_pull", description="Merge a pull request."),
    ],
)
FILES = FakeServer(
    name="fs",
    tools=[FakeTool("read_file", description="Read a file. Text only."), FakeTool("stat")],
)


async def test_the_model_sees_an_index_searches_and_gets_the_tools_next_turn(
    autojump_clock: MockClock,
) -> None:
    config = RuntimeConfig(servers=(ISSUES.server_config(), FILES.server_config()))
    async with open_runtime(config) as rt:
        await rt.wait_ready(timeout=10)
        agent = AgentSurface(rt, tool_search=ToolSearch(always=["mcp_fs_*"]))
        first = agent.export_tools("anthropic", shape=None)
        assert first.names == ("mcp_fs_read_file", "mcp_fs_stat", SEARCH_TOOL_NAME)
        index = first.tools[2]["description"]
        assert "3 more tools are available but not loaded" in index
        assert "- mcp_gh_create_issue: Create an issue in a repository.\n" in index
        assert index.endswith("- mcp_gh_merge_pull: Merge a pull request.")

        found = await agent.call_for_model(SEARCH_TOOL_NAME, {"query": "open issues", "limit": 2})
        assert found.status == "ok"
        note, body = found.text.split("\n", 1)
        assert note == "2 tools found; they can be called now."
        tools = json.loads(body)["tools"]
        assert [t["name"] for t in tools] == ["mcp_gh_list_issues", "mcp_gh_create_issue"]
        assert tools[0]["input_schema"] == {"type": "object"}
        assert agent.tool_search is not None
        assert agent.tool_search.loaded == {"mcp_gh_list_issues", "mcp_gh_create_issue"}

        second = agent.model_tools(shape=None)
        assert list(second) == [
            "mcp_fs_read_file",
            "mcp_fs_stat",
            "mcp_gh_create_issue",
            "mcp_gh_list_issues",
            SEARCH_TOOL_NAME,
        ]
        assert "1 more tools" in second[SEARCH_TOOL_NAME].description

        # A deferred tool called by its name from the index is called, and loaded.
        merged = await agent.call_for_model("mcp_gh_merge_pull", {})
        assert merged.status == "refused"  # no approve callback: the gate still decides
        assert SEARCH_TOOL_NAME not in agent.model_tools(shape=None)  # nothing left deferred
        agent.tool_search.reset()
        assert len(agent.model_tools(shape=None)) == 3


async def test_the_index_can_list_only_servers_and_a_search_can_find_nothing(
    autojump_clock: MockClock,
) -> None:
    config = RuntimeConfig(servers=(ISSUES.server_config(), FILES.server_config()))
    async with open_runtime(config) as rt:
        await rt.wait_ready(timeout=10)
        agent = AgentSurface(rt, tool_search=ToolSearch(index="none"))
        (search,) = agent.model_tools(shape=None).values()
        assert search.description.endswith("Servers: fs (2), gh (3).")
        index = agent.tool_index().splitlines()  # for the system prompt instead
        assert index[0] == "- mcp_fs_read_file: Read a file."
        assert index[1] == "- mcp_fs_stat: stat"  # no description: the display name
        assert len(index) == 5
        assert AgentSurface(rt).tool_index() == ""
        nothing = await agent.call_for_model(SEARCH_TOOL_NAME, {"query": "weather"})
        assert nothing.text.startswith("No tool matches")
        assert json.loads(nothing.text.split("\n", 1)[1]) == {"tools": []}
        exact = await agent.call_for_model(SEARCH_TOOL_NAME, {"query": "mcp_fs_stat"})
        assert json.loads(exact.text.split("\n", 1)[1])["tools"][0]["name"] == "mcp_fs_stat"
        bad = await agent.call_for_model(SEARCH_TOOL_NAME, {"query": " "})
        assert (bad.is_error, bad.status) == (True, "invalid")
        bad = await agent.call_for_model(SEARCH_TOOL_NAME, {"query": "x", "limit": "2"})
        assert bad.text == "'limit' must be an integer"


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown index"):
        ToolSearch(index="all")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_results must be from 1 to 20"):
        ToolSearch(max_results=0)
