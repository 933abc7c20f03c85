from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Reversible
from types import MappingProxyType
from typing import cast

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from trio_mcp.actors.runtime._naming import registered_name
from trio_mcp.actors.runtime._registry import (
    RegisteredTool,
    Registry,
    ReplaceTools,
    ToolRefusal,
    ToolsChanged,
    WithdrawServer,
    _TableSnapshot,
)
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


# --------------------------------------------------------------------------- against a model
#
# The registry keeps indexes, per-server caches and two update paths to be fast; this model
# computes the same table from scratch after every message, straight from the rules: each
# server's tools are named, names two of its tools share and built-in names are refused, and a
# name that two servers claim is registered for neither.

SERVERS = ("a", "a_b", "b")
WIRE_NAMES = ("b_c", "c", "x", "x-y", "x_y", "read")
BUILTINS = frozenset({"mcp_b_read", "mcp_a_x"})
FILTERED = ToolRefusal(server="?", tool="hidden", reason="filtered by the config")


@attrs.frozen
class Listing:
    named: dict[str, Tool]
    generation: int
    refused: tuple[ToolRefusal, ...]


def model_names(server: str, tools: tuple[Tool, ...]) -> tuple[dict[str, Tool], list[ToolRefusal]]:
    by_name: dict[str, list[Tool]] = {}
    for t in tools:
        by_name.setdefault(registered_name(server, t.name), []).append(t)
    named: dict[str, Tool] = {}
    refusals: list[ToolRefusal] = []
    for name, same in by_name.items():
        if len(same) > 1:
            names = ", ".join(repr(t.name) for t in same)
            reason = f"tools {names} of this server all map to {name!r}; all refused"
            refusals.extend(ToolRefusal(server=server, tool=t.name, reason=reason) for t in same)
        elif name in BUILTINS:
            reason = f"{name!r} is the name of a built-in tool of the host"
            refusals.append(ToolRefusal(server=server, tool=same[0].name, reason=reason))
        else:
            named[name] = same[0]
    return named, refusals


def model_table(listings: dict[str, Listing]) -> dict[str, RegisteredTool]:
    claims = Counter(name for listing in listings.values() for name in listing.named)
    return {
        name: RegisteredTool(name=name, server=server, tool=tool, generation=listing.generation)
        for server in sorted(listings)
        for listing in [listings[server]]
        for name, tool in listing.named.items()
        if claims[name] == 1
    }


def model_refused_of(listings: dict[str, Listing], server: str) -> tuple[ToolRefusal, ...]:
    listing = listings.get(server)
    if listing is None:
        return ()
    table = model_table(listings)
    clashes = []
    for name, tool in listing.named.items():
        if name in table:
            continue
        rivals = ", ".join(
            f"{listings[other].named[name].name!r} of server {other!r}"
            for other in sorted(listings)
            if other != server and name in listings[other].named
        )
        reason = f"maps to {name!r} like tool {rivals}; both refused"
        clashes.append(ToolRefusal(server=server, tool=tool.name, reason=reason))
    return listing.refused + tuple(clashes)


TOOL_POOL = {
    (name, description): tool(name, description)
    for name in WIRE_NAMES
    for description in (None, "one", "two")
}

a_tool = st.builds(
    lambda name, description, fresh: (
        tool(name, description) if fresh else TOOL_POOL[(name, description)]
    ),
    st.sampled_from(WIRE_NAMES),
    st.sampled_from((None, "one", "two")),
    st.booleans(),  # a new but equal object, or the very same one as last time
)
a_message = st.one_of(
    st.builds(
        ReplaceTools,
        server=st.sampled_from(SERVERS),
        generation=st.integers(0, 3),
        tools=st.lists(a_tool, max_size=6).map(tuple),
        refused=st.sampled_from(((), (FILTERED,))),
    ),
    st.builds(WithdrawServer, server=st.sampled_from(SERVERS), generation=st.integers(0, 3)),
)


@given(st.lists(a_message, max_size=25))
def test_the_registry_agrees_with_a_model_computed_from_scratch(
    messages: list[ReplaceTools | WithdrawServer],
) -> None:
    registry = Registry(builtin_names=BUILTINS)
    listings: dict[str, Listing] = {}
    generations: dict[str, int] = {}
    last_owner: dict[str, str] = {}
    earlier: list[tuple[Mapping[str, RegisteredTool], list[tuple[str, RegisteredTool]]]] = []
    version = 0
    for msg in messages:
        before = model_table(listings)
        change = registry.apply(msg)
        if msg.generation < generations.get(msg.server, -1):
            assert change is None
            continue
        generations[msg.server] = msg.generation
        if isinstance(msg, ReplaceTools):
            named, own = model_names(msg.server, msg.tools)
            listings[msg.server] = Listing(named, msg.generation, msg.refused + tuple(own))
            refused = tuple(own) + msg.refused
        else:
            listings.pop(msg.server, None)
            refused = ()
        after = model_table(listings)
        for name, entry in after.items():
            if name not in before:
                last_owner[name] = entry.server
        added = tuple(sorted(after.keys() - before.keys()))
        removed = tuple(sorted(before.keys() - after.keys()))
        both = sorted(before.keys() & after.keys())
        changed = tuple(n for n in both if before[n].tool != after[n].tool)
        updated = any(before[n] != after[n] for n in both)
        if added or removed or updated or refused:
            version += 1
            assert change == ToolsChanged(
                version=version,
                server=msg.server,
                added=added,
                removed=removed,
                changed=changed,
                refused=refused,
            )
        else:
            assert change is None
        assert registry.version == version

        snapshot = registry.snapshot()
        assert snapshot is registry.snapshot()
        assert list(snapshot.items()) == list(after.items())  # the same order, too
        assert list(snapshot) == list(after)
        assert list(reversed(cast("Reversible[str]", snapshot))) == list(reversed(after))
        assert list(snapshot.values()) == list(after.values())
        assert len(snapshot) == len(after)
        assert snapshot == after
        for name in {*registered_names(), *after}:
            assert registry.get(name) == after.get(name)
            assert snapshot.get(name) == after.get(name)
            assert (name in snapshot) is (name in after)
            assert registry.last_owner(name) == last_owner.get(name)
        for server in SERVERS:
            listing = listings.get(server)
            mine = [] if listing is None else [n for n in listing.named if n in after]
            assert registry.tools_of(server) == tuple(after[n] for n in mine)
            assert registry.refused_of(server) == model_refused_of(listings, server)
        earlier.append((snapshot, list(snapshot.items())))
        for old, items in earlier:  # no later change alters an earlier snapshot
            assert list(old.items()) == items


def registered_names() -> set[str]:
    return {registered_name(s, w) for s in SERVERS for w in WIRE_NAMES}


# --------------------------------------------------------------------------- names, cached

arbitrary_name = st.text(min_size=1, max_size=70)


@given(st.lists(st.lists(arbitrary_name, max_size=8, unique=True), min_size=1, max_size=5))
def test_cached_names_are_the_names_registered_name_gives(listings: list[list[str]]) -> None:
    registry = Registry()
    for listing in listings:  # each listing reuses the names the earlier ones cached
        registry.apply(replace("srv.1", 1, *listing))
        names = [registered_name("srv.1", wire) for wire in listing]
        count = Counter(names)
        expected = [(n, w) for n, w in zip(names, listing, strict=True) if count[n] == 1]
        assert [(n, e.wire_name) for n, e in registry.snapshot().items()] == expected


# --------------------------------------------------------------------------- the pieces


def test_a_snapshot_of_several_servers_is_a_read_only_mapping() -> None:
    registry = Registry()
    registry.apply(replace("b", 1, "y"))
    registry.apply(replace("a", 1, "x", "z"))
    snapshot = registry.snapshot()
    assert list(snapshot) == ["mcp_a_x", "mcp_a_z", "mcp_b_y"]  # servers in name order
    assert snapshot["mcp_b_y"].server == "b"
    with pytest.raises(KeyError, match="mcp_c_q"):
        snapshot["mcp_c_q"]
    assert snapshot.get("mcp_c_q") is None
    number: object = 3
    assert number not in snapshot
    assert snapshot == {n: registry.get(n) for n in ("mcp_a_x", "mcp_a_z", "mcp_b_y")}
    assert snapshot != {}
    assert repr(snapshot).startswith("_TableSnapshot({'mcp_a_x': RegisteredTool(name='mcp_a_x'")
    with pytest.raises(TypeError):
        snapshot["mcp_a_x"] = snapshot["mcp_b_y"]  # type: ignore[index]
    assert isinstance(snapshot, _TableSnapshot)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        snapshot._parts = ()  # type: ignore[misc]


def test_a_snapshot_of_one_server_is_a_proxy_of_its_dict() -> None:
    registry = Registry()
    assert registry.snapshot() == {}
    assert isinstance(registry.snapshot(), MappingProxyType)
    registry.apply(replace("a", 1, "x", "y"))
    snapshot = registry.snapshot()
    assert isinstance(snapshot, MappingProxyType)
    assert list(snapshot) == ["mcp_a_x", "mcp_a_y"]
    registry.apply(replace("a", 2, "x", "y"))  # a new generation: new entries, a new dict
    assert registry.snapshot() is not snapshot
    assert {e.generation for e in snapshot.values()} == {1}
    assert {e.generation for e in registry.snapshot().values()} == {2}


def test_a_relisting_of_equal_tools_keeps_the_entries_and_changes_nothing() -> None:
    registry = Registry()
    registry.apply(replace("a", 1, "x", "y"))
    first = registry.snapshot()
    version = registry.version
    assert registry.apply(replace("a", 1, "x", "y")) is None  # equal, not identical, tools
    assert registry.version == version
    assert registry.snapshot() == first
    assert registry.get("mcp_a_x") is first["mcp_a_x"]
    # a new order alone is no change either, but the next snapshot lists the tools in it
    assert registry.apply(replace("a", 1, "y", "x")) is None
    assert registry.version == version
    assert list(registry.snapshot()) == ["mcp_a_y", "mcp_a_x"]
    assert list(first) == ["mcp_a_x", "mcp_a_y"]
    assert [t.name for t in registry.tools_of("a")] == ["mcp_a_y", "mcp_a_x"]


def test_a_duplicate_of_a_builtin_name_is_refused_as_a_duplicate() -> None:
    registry = Registry(builtin_names=frozenset({"mcp_s_a_b"}))
    change = registry.apply(replace("s", 1, "a-b", "a_b", "ok"))
    assert change is not None
    assert [(r.tool, r.reason) for r in change.refused] == [
        ("a-b", "tools 'a-b', 'a_b' of this server all map to 'mcp_s_a_b'; all refused"),
        ("a_b", "tools 'a-b', 'a_b' of this server all map to 'mcp_s_a_b'; all refused"),
    ]
    assert set(registry.snapshot()) == {"mcp_s_ok"}


def test_a_relisting_during_a_clash_keeps_both_refused() -> None:
    registry = Registry()
    registry.apply(replace("a", 1, "b_c"))
    registry.apply(replace("a_b", 1, "c"))
    version = registry.version
    # the same names again, one changed: the clash stands, so the table does not change
    relisted = ReplaceTools(server="a", generation=1, tools=(tool("b_c", "new"),))
    assert registry.apply(relisted) is None
    assert registry.version == version
    assert "mcp_a_b_c" not in registry.snapshot()
    assert registry.get("mcp_a_b_c") is None
    change = registry.apply(WithdrawServer(server="a_b", generation=1))
    assert change is not None and change.added == ("mcp_a_b_c",)
    assert registry.snapshot()["mcp_a_b_c"].tool.description == "new"
