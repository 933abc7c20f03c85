from __future__ import annotations

import trio
import trio.testing

from trio_mcp.actors._registry import Registry, ReplaceTools, WithdrawServer
from trio_mcp.protocol import Tool


def tool(name: str, description: str | None = None) -> Tool:
    return Tool(name=name, description=description, input_schema={"type": "object"})


def replace(server: str, generation: int, *names: str) -> ReplaceTools:
    return ReplaceTools(server=server, generation=generation, tools=tuple(tool(n) for n in names))


def test_replace_registers_and_reports_the_change() -> None:
    registry = Registry()
    change = registry.apply(replace("fs", 1, "read", "write"))
    assert change is not None
    assert change.added == ("mcp_fs_read", "mcp_fs_write")
    assert change.version == registry.version == 1
    snapshot = registry.snapshot()
    assert set(snapshot) == {"mcp_fs_read", "mcp_fs_write"}
    assert snapshot["mcp_fs_read"].wire_name == "read"
    assert snapshot["mcp_fs_read"].generation == 1


def test_replace_is_atomic_per_server_and_keeps_other_servers() -> None:
    registry = Registry()
    registry.apply(replace("a", 1, "x", "y"))
    registry.apply(replace("b", 1, "z"))
    change = registry.apply(replace("a", 1, "y", "w"))
    assert change is not None
    assert (change.added, change.removed) == (("mcp_a_w",), ("mcp_a_x",))
    assert set(registry.snapshot()) == {"mcp_a_y", "mcp_a_w", "mcp_b_z"}


def test_snapshots_are_immutable_and_unchanged_by_later_replaces() -> None:
    registry = Registry()
    registry.apply(replace("a", 1, "x"))
    before = registry.snapshot()
    registry.apply(replace("a", 1, "y"))
    assert set(before) == {"mcp_a_x"}
    assert set(registry.snapshot()) == {"mcp_a_y"}


def test_a_message_from_an_older_generation_is_dropped() -> None:
    registry = Registry()
    registry.apply(replace("a", 2, "new"))
    assert registry.apply(replace("a", 1, "stale")) is None
    assert registry.apply(WithdrawServer(server="a", generation=1)) is None
    assert set(registry.snapshot()) == {"mcp_a_new"}


def test_withdraw_removes_every_tool_of_the_server() -> None:
    registry = Registry()
    registry.apply(replace("a", 1, "x", "y"))
    change = registry.apply(WithdrawServer(server="a", generation=1, reason="EOF"))
    assert change is not None and change.removed == ("mcp_a_x", "mcp_a_y")
    assert registry.snapshot() == {}
    assert registry.apply(WithdrawServer(server="a", generation=1)) is None


def test_two_tools_of_one_server_with_one_name_are_both_refused() -> None:
    registry = Registry()
    change = registry.apply(replace("s", 1, "a-b", "a_b", "ok"))
    assert change is not None
    assert set(registry.snapshot()) == {"mcp_s_ok"}
    assert {r.tool for r in change.refused} == {"a-b", "a_b"}
    assert all("all refused" in r.reason for r in change.refused)


def test_a_cross_server_clash_refuses_both_whatever_the_order() -> None:
    for order in (("a", "a_b"), ("a_b", "a")):
        registry = Registry()
        for server in order:
            registry.apply(replace(server, 1, "b_c" if server == "a" else "c"))
        assert "mcp_a_b_c" not in registry.snapshot()
        assert [r.tool for r in registry.refused_of("a")] == ["b_c"]
        assert "both refused" in registry.refused_of("a")[0].reason
        # when one leaves, the other comes back by itself
        registry.apply(WithdrawServer(server="a_b", generation=1))
        assert registry.snapshot()["mcp_a_b_c"].server == "a"


def test_a_clash_with_a_builtin_tool_is_refused() -> None:
    registry = Registry(builtin_names=frozenset({"mcp_x_read"}))
    change = registry.apply(replace("x", 1, "read", "write"))
    assert change is not None
    assert set(registry.snapshot()) == {"mcp_x_write"}
    assert [r.reason for r in change.refused] == [
        "'mcp_x_read' is the name of a built-in tool of the host"
    ]


def test_a_changed_definition_is_reported_as_changed() -> None:
    registry = Registry()
    registry.apply(ReplaceTools(server="s", generation=1, tools=(tool("t", "old"),)))
    change = registry.apply(ReplaceTools(server="s", generation=1, tools=(tool("t", "new"),)))
    assert change is not None and change.changed == ("mcp_s_t",)
    assert registry.snapshot()["mcp_s_t"].tool.description == "new"
    assert registry.apply(ReplaceTools(server="s", generation=1, tools=(tool("t", "new"),))) is None


async def test_wait_version_wakes_on_change() -> None:
    registry = Registry()
    seen: list[int] = []

    async def watch() -> None:
        seen.append(await registry.wait_version(0))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch)
        await trio.testing.wait_all_tasks_blocked()
        assert seen == []
        registry.apply(replace("s", 1, "t"))
    assert seen == [1]
