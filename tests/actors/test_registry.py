"""The tool table (:class:`ToolTable`, the registry task's state: apply semantics, names,
clashes, generations and tombstones, checked against a model computed from scratch) and the
:class:`Registry` actor around it (batches, published views, waiting for a view, events, and
the acknowledgement of a withdrawal)."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Reversible
from types import MappingProxyType
from typing import cast

import attrs
import pytest
import trio
import trio.testing
from hypothesis import example, given
from hypothesis import strategies as st

from trio_mcp.actors.runtime._naming import registered_name
from trio_mcp.actors.runtime._registry import (
    MAILBOX_SIZE,
    RegisteredTool,
    Registry,
    RegistryMsg,
    RegistryView,
    ReplaceTools,
    ToolRefusal,
    ToolsChanged,
    ToolTable,
    Withdrawn,
    WithdrawServer,
    _TableSnapshot,
)
from trio_mcp.protocol import Tool


def tool(name: str, description: str | None = None) -> Tool:
    return Tool(name=name, description=description, input_schema={"type": "object"})


def replace(server: str, generation: int, *names: str) -> ReplaceTools:
    return ReplaceTools(server=server, generation=generation, tools=tuple(tool(n) for n in names))


def test_replace_registers_and_reports_the_change() -> None:
    table = ToolTable()
    change = table.apply(replace("fs", 1, "read", "write"))
    assert change is not None
    assert change.added == ("mcp_fs_read", "mcp_fs_write")
    assert change.version == table.version == 1
    snapshot = table.snapshot()
    assert set(snapshot) == {"mcp_fs_read", "mcp_fs_write"}
    assert snapshot["mcp_fs_read"].wire_name == "read"
    assert snapshot["mcp_fs_read"].generation == 1


def test_replace_is_atomic_per_server_and_keeps_other_servers() -> None:
    table = ToolTable()
    table.apply(replace("a", 1, "x", "y"))
    table.apply(replace("b", 1, "z"))
    change = table.apply(replace("a", 1, "y", "w"))
    assert change is not None
    assert (change.added, change.removed) == (("mcp_a_w",), ("mcp_a_x",))
    assert set(table.snapshot()) == {"mcp_a_y", "mcp_a_w", "mcp_b_z"}


def test_snapshots_are_immutable_and_unchanged_by_later_replaces() -> None:
    table = ToolTable()
    table.apply(replace("a", 1, "x"))
    before = table.snapshot()
    table.apply(replace("a", 1, "y"))
    assert set(before) == {"mcp_a_x"}
    assert set(table.snapshot()) == {"mcp_a_y"}


def test_a_message_from_an_older_generation_is_dropped() -> None:
    table = ToolTable()
    table.apply(replace("a", 2, "new"))
    assert table.apply(replace("a", 1, "stale")) is None
    assert table.apply(WithdrawServer(server="a", generation=1)) is None
    assert set(table.snapshot()) == {"mcp_a_new"}


def test_withdraw_removes_every_tool_of_the_server() -> None:
    table = ToolTable()
    table.apply(replace("a", 1, "x", "y"))
    change = table.apply(WithdrawServer(server="a", generation=1, reason="EOF"))
    assert change is not None and change.removed == ("mcp_a_x", "mcp_a_y")
    assert table.snapshot() == {}
    assert table.apply(WithdrawServer(server="a", generation=1)) is None


def test_two_tools_of_one_server_with_one_name_are_both_refused() -> None:
    table = ToolTable()
    change = table.apply(replace("s", 1, "a-b", "a_b", "ok"))
    assert change is not None
    assert set(table.snapshot()) == {"mcp_s_ok"}
    assert {r.tool for r in change.refused} == {"a-b", "a_b"}
    assert all("all refused" in r.reason for r in change.refused)


def test_a_cross_server_clash_refuses_both_whatever_the_order() -> None:
    for order in (("a", "a_b"), ("a_b", "a")):
        table = ToolTable()
        for server in order:
            table.apply(replace(server, 1, "b_c" if server == "a" else "c"))
        assert "mcp_a_b_c" not in table.snapshot()
        assert [r.tool for r in table.refused_of("a")] == ["b_c"]
        assert "both refused" in table.refused_of("a")[0].reason
        # when one leaves, the other comes back by itself
        table.apply(WithdrawServer(server="a_b", generation=1))
        assert table.snapshot()["mcp_a_b_c"].server == "a"


def test_a_clash_with_a_builtin_tool_is_refused() -> None:
    table = ToolTable(builtin_names=frozenset({"mcp_x_read"}))
    change = table.apply(replace("x", 1, "read", "write"))
    assert change is not None
    assert set(table.snapshot()) == {"mcp_x_write"}
    assert [r.reason for r in change.refused] == [
        "'mcp_x_read' is the name of a built-in tool of the host"
    ]


def test_a_changed_definition_is_reported_as_changed() -> None:
    table = ToolTable()
    table.apply(ReplaceTools(server="s", generation=1, tools=(tool("t", "old"),)))
    change = table.apply(ReplaceTools(server="s", generation=1, tools=(tool("t", "new"),)))
    assert change is not None and change.changed == ("mcp_s_t",)
    assert table.snapshot()["mcp_s_t"].tool.description == "new"
    assert table.apply(ReplaceTools(server="s", generation=1, tools=(tool("t", "new"),))) is None


def test_a_withdrawal_is_a_tombstone_for_its_generation() -> None:
    table = ToolTable()
    table.apply(replace("a", 1, "x"))
    assert table.withdrawn_through("a") == -1
    change = table.apply(WithdrawServer(server="a", generation=1, reason="EOF"))
    assert change is not None and change.removed == ("mcp_a_x",)
    assert table.withdrawn_through("a") == 1
    # a slow tools/list answer of the dead connection: dropped, however it arrives
    assert table.apply(replace("a", 1, "late")) is None
    assert table.apply(replace("a", 0, "older")) is None
    assert table.snapshot() == {}
    assert table.tools_of("a") == ()
    # the next connection registers again
    change = table.apply(replace("a", 2, "fresh"))
    assert change is not None and change.added == ("mcp_a_fresh",)
    assert table.withdrawn_through("a") == 1
    assert table.generation_of("a") == 2


def test_a_withdrawal_ahead_of_any_listing_refuses_that_generation() -> None:
    table = ToolTable()
    assert table.apply(WithdrawServer(server="a", generation=3)) is None  # nothing to remove
    assert table.withdrawn_through("a") == 3
    assert table.apply(replace("a", 3, "x")) is None
    assert table.apply(replace("a", 2, "x")) is None
    assert table.snapshot() == {}
    assert table.apply(replace("a", 4, "x")) is not None


def test_generation_of_is_the_newest_applied() -> None:
    table = ToolTable()
    assert table.generation_of("a") == -1
    table.apply(replace("a", 2, "x"))
    assert table.generation_of("a") == 2
    table.apply(replace("a", 1, "stale"))  # dropped: the generation stays
    assert table.generation_of("a") == 2
    table.apply(WithdrawServer(server="a", generation=5))
    assert table.generation_of("a") == 5
    assert table.generation_of("b") == -1


def test_take_dirty_names_the_servers_that_changed_since_the_last_call() -> None:
    table = ToolTable()
    assert table.take_dirty() == (set(), False)
    table.apply(replace("a", 1, "b_c"))
    table.apply(replace("b", 1, "x"))
    assert table.take_dirty() == ({"a", "b"}, True)  # new names: the last owners changed
    assert table.take_dirty() == (set(), False)  # forgotten
    # a clash takes a's tool out of the table: a is dirty too, though it sent nothing
    table.apply(replace("a_b", 1, "c"))
    assert table.take_dirty() == ({"a", "a_b"}, False)
    assert table.apply(replace("b", 0, "stale")) is None
    assert table.take_dirty() == (set(), False)  # a dropped message changes nothing
    table.apply(WithdrawServer(server="a_b", generation=1))
    dirty, owners = table.take_dirty()
    assert dirty == {"a", "a_b"}  # a's tool is back
    assert owners  # and a owns its name again


# --------------------------------------------------------------------------- against a model
#
# The table keeps indexes, per-server caches and two update paths to be fast; this model
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


# A clash whose rival changes its wire name but not its registered name: the refusal of the
# other server names the new wire name (so that server is dirty too).
RIVAL_RENAMED = [
    ReplaceTools(server="a", generation=1, tools=(tool("b_x-y"),)),
    ReplaceTools(server="a_b", generation=1, tools=(tool("x-y"),)),
    ReplaceTools(server="a_b", generation=1, tools=(tool("x_y"),)),
]


@example(RIVAL_RENAMED)
@given(st.lists(a_message, max_size=25))
def test_the_table_agrees_with_a_model_computed_from_scratch(
    messages: list[ReplaceTools | WithdrawServer],
) -> None:
    table = ToolTable(builtin_names=BUILTINS)
    listings: dict[str, Listing] = {}
    generations: dict[str, int] = {}
    withdrawn: dict[str, int] = {}
    last_owner: dict[str, str] = {}
    seen_tools = {server: table.tools_of(server) for server in SERVERS}
    seen_refused = {server: table.refused_of(server) for server in SERVERS}
    seen_owners = table.last_owners()
    earlier: list[tuple[Mapping[str, RegisteredTool], list[tuple[str, RegisteredTool]]]] = []
    version = 0
    for msg in messages:
        before = model_table(listings)
        change = table.apply(msg)
        if msg.generation < generations.get(msg.server, -1):
            assert change is None
            assert table.take_dirty() == (set(), False)
            continue
        generations[msg.server] = msg.generation
        assert table.generation_of(msg.server) == msg.generation
        if isinstance(msg, ReplaceTools) and msg.generation <= withdrawn.get(msg.server, -1):
            assert change is None  # the tombstone of a withdrawn generation
            assert table.take_dirty() == (set(), False)
            continue
        if isinstance(msg, ReplaceTools):
            named, own = model_names(msg.server, msg.tools)
            listings[msg.server] = Listing(named, msg.generation, msg.refused + tuple(own))
            refused = tuple(own) + msg.refused
        else:
            listings.pop(msg.server, None)
            withdrawn[msg.server] = max(msg.generation, withdrawn.get(msg.server, -1))
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
        assert table.version == version

        snapshot = table.snapshot()
        assert snapshot is table.snapshot()
        assert list(snapshot.items()) == list(after.items())  # the same order, too
        assert list(snapshot) == list(after)
        assert list(reversed(cast("Reversible[str]", snapshot))) == list(reversed(after))
        assert list(snapshot.values()) == list(after.values())
        assert len(snapshot) == len(after)
        assert snapshot == after
        for name in {*registered_names(), *after}:
            assert table.get(name) == after.get(name)
            assert snapshot.get(name) == after.get(name)
            assert (name in snapshot) is (name in after)
            assert table.last_owner(name) == last_owner.get(name)
        for server in SERVERS:
            listing = listings.get(server)
            mine = [] if listing is None else [n for n in listing.named if n in after]
            assert table.tools_of(server) == tuple(after[n] for n in mine)
            assert table.refused_of(server) == model_refused_of(listings, server)
            assert table.withdrawn_through(server) == withdrawn.get(server, -1)
            assert table.generation_of(server) == generations.get(server, -1)
        # take_dirty names (at least) every server whose tools or refusals changed, and the
        # server of the message; the flag says whether the last owners changed
        dirty, owners_changed = table.take_dirty()
        assert msg.server in dirty
        for server in SERVERS:
            now_tools, now_refused = table.tools_of(server), table.refused_of(server)
            if server not in dirty:
                assert now_tools == seen_tools[server]
                assert now_refused == seen_refused[server]
            seen_tools[server], seen_refused[server] = now_tools, now_refused
        owners = table.last_owners()
        assert owners == last_owner
        if not owners_changed:
            assert owners == seen_owners
        seen_owners = owners
        earlier.append((snapshot, list(snapshot.items())))
        for old, items in earlier:  # no later change alters an earlier snapshot
            assert list(old.items()) == items


def registered_names() -> set[str]:
    return {registered_name(s, w) for s in SERVERS for w in WIRE_NAMES}


# --------------------------------------------------------------------------- names, cached

arbitrary_name = st.text(min_size=1, max_size=70)


@given(st.lists(st.lists(arbitrary_name, max_size=8, unique=True), min_size=1, max_size=5))
def test_cached_names_are_the_names_registered_name_gives(listings: list[list[str]]) -> None:
    table = ToolTable()
    for listing in listings:  # each listing reuses the names the earlier ones cached
        table.apply(replace("srv.1", 1, *listing))
        names = [registered_name("srv.1", wire) for wire in listing]
        count = Counter(names)
        expected = [(n, w) for n, w in zip(names, listing, strict=True) if count[n] == 1]
        assert [(n, e.wire_name) for n, e in table.snapshot().items()] == expected


# --------------------------------------------------------------------------- the pieces


def test_a_snapshot_of_several_servers_is_a_read_only_mapping() -> None:
    table = ToolTable()
    table.apply(replace("b", 1, "y"))
    table.apply(replace("a", 1, "x", "z"))
    snapshot = table.snapshot()
    assert list(snapshot) == ["mcp_a_x", "mcp_a_z", "mcp_b_y"]  # servers in name order
    assert snapshot["mcp_b_y"].server == "b"
    with pytest.raises(KeyError, match="mcp_c_q"):
        snapshot["mcp_c_q"]
    assert snapshot.get("mcp_c_q") is None
    number: object = 3
    assert number not in snapshot
    assert snapshot == {n: table.get(n) for n in ("mcp_a_x", "mcp_a_z", "mcp_b_y")}
    assert snapshot != {}
    assert repr(snapshot).startswith("_TableSnapshot({'mcp_a_x': RegisteredTool(name='mcp_a_x'")
    with pytest.raises(TypeError):
        snapshot["mcp_a_x"] = snapshot["mcp_b_y"]  # type: ignore[index]
    assert isinstance(snapshot, _TableSnapshot)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        snapshot._parts = ()  # type: ignore[misc]


def test_a_snapshot_of_one_server_is_a_proxy_of_its_dict() -> None:
    table = ToolTable()
    assert table.snapshot() == {}
    assert isinstance(table.snapshot(), MappingProxyType)
    table.apply(replace("a", 1, "x", "y"))
    snapshot = table.snapshot()
    assert isinstance(snapshot, MappingProxyType)
    assert list(snapshot) == ["mcp_a_x", "mcp_a_y"]
    table.apply(replace("a", 2, "x", "y"))  # a new generation: new entries, a new dict
    assert table.snapshot() is not snapshot
    assert {e.generation for e in snapshot.values()} == {1}
    assert {e.generation for e in table.snapshot().values()} == {2}


def test_a_relisting_of_equal_tools_keeps_the_entries_and_changes_nothing() -> None:
    table = ToolTable()
    table.apply(replace("a", 1, "x", "y"))
    first = table.snapshot()
    version = table.version
    assert table.apply(replace("a", 1, "x", "y")) is None  # equal, not identical, tools
    assert table.version == version
    assert table.snapshot() == first
    assert table.get("mcp_a_x") is first["mcp_a_x"]
    # a new order alone is no change either, but the next snapshot lists the tools in it
    assert table.apply(replace("a", 1, "y", "x")) is None
    assert table.version == version
    assert list(table.snapshot()) == ["mcp_a_y", "mcp_a_x"]
    assert list(first) == ["mcp_a_x", "mcp_a_y"]
    assert [t.name for t in table.tools_of("a")] == ["mcp_a_y", "mcp_a_x"]


def test_a_duplicate_of_a_builtin_name_is_refused_as_a_duplicate() -> None:
    table = ToolTable(builtin_names=frozenset({"mcp_s_a_b"}))
    change = table.apply(replace("s", 1, "a-b", "a_b", "ok"))
    assert change is not None
    assert [(r.tool, r.reason) for r in change.refused] == [
        ("a-b", "tools 'a-b', 'a_b' of this server all map to 'mcp_s_a_b'; all refused"),
        ("a_b", "tools 'a-b', 'a_b' of this server all map to 'mcp_s_a_b'; all refused"),
    ]
    assert set(table.snapshot()) == {"mcp_s_ok"}


def test_a_relisting_during_a_clash_keeps_both_refused() -> None:
    table = ToolTable()
    table.apply(replace("a", 1, "b_c"))
    table.apply(replace("a_b", 1, "c"))
    version = table.version
    # the same names again, one changed: the clash stands, so the table does not change
    relisted = ReplaceTools(server="a", generation=1, tools=(tool("b_c", "new"),))
    assert table.apply(relisted) is None
    assert table.version == version
    assert "mcp_a_b_c" not in table.snapshot()
    assert table.get("mcp_a_b_c") is None
    change = table.apply(WithdrawServer(server="a_b", generation=1))
    assert change is not None and change.added == ("mcp_a_b_c",)
    assert table.snapshot()["mcp_a_b_c"].tool.description == "new"


# --------------------------------------------------------------------------- the actor


@attrs.define
class Publisher:
    """A fake event bus: records each event with the view published when it came."""

    registry: Registry | None = None
    events: list[tuple[ToolsChanged, RegistryView]] = attrs.Factory(list)

    def publish(self, event: ToolsChanged) -> None:
        assert self.registry is not None
        self.events.append((event, self.registry.view))


@attrs.define
class ReplySink:
    """A fake supervisor mailbox: records each Withdrawn with the view of that moment, or
    refuses it (``refuse``: the exception it raises)."""

    registry: Registry
    refuse: type[BaseException] | None = None
    replies: list[tuple[Withdrawn, RegistryView, float]] = attrs.Factory(list)

    def send_nowait(self, value: Withdrawn) -> None:
        if self.refuse is not None:
            raise self.refuse
        self.replies.append((value, self.registry.view, trio.current_time()))


async def start_registry(
    nursery: trio.Nursery, builtin_names: frozenset[str] = frozenset()
) -> tuple[Registry, Publisher]:
    publisher = Publisher()
    registry = Registry(builtin_names=builtin_names, events=publisher)
    publisher.registry = registry
    await nursery.start(registry.run)
    return registry, publisher


async def settle() -> None:
    await trio.testing.wait_all_tasks_blocked()


async def test_the_first_view_is_empty(autojump_clock: trio.testing.MockClock) -> None:
    registry = Registry()
    view = registry.view
    assert view.version == 0
    assert dict(view.tools) == {}
    assert view.tools_of("a") == ()
    assert view.refused_of("a") == ()
    assert view.get("mcp_a_x") is None
    assert view.last_owner("mcp_a_x") is None
    assert dict(view.withdrawn) == {} and dict(view.generations) == {}


async def test_messages_ready_together_are_one_batch_and_one_view(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        registry, publisher = await start_registry(nursery)
        first = registry.view
        registry.send_nowait(replace("a", 1, "x"))
        registry.send_nowait(replace("b", 1, "y"))
        registry.send_nowait(replace("c", 1, "z"))
        assert registry.view is first  # nothing applied before the task runs
        await settle()
        view = registry.view
        assert view.version == 3
        assert list(view.tools) == ["mcp_a_x", "mcp_b_y", "mcp_c_z"]
        # one view for the batch: every event of it came with that same view
        assert [event.server for event, _ in publisher.events] == ["a", "b", "c"]
        assert [event.version for event, _ in publisher.events] == [1, 2, 3]
        assert all(seen is view for _, seen in publisher.events)
        nursery.cancel_scope.cancel()


async def test_each_wake_up_publishes_one_view(autojump_clock: trio.testing.MockClock) -> None:
    async with trio.open_nursery() as nursery:
        registry, publisher = await start_registry(nursery)
        views: list[RegistryView] = []

        async def watch() -> None:
            view = registry.view
            while True:
                view = await registry.wait_newer(view)
                views.append(view)

        nursery.start_soon(watch)
        await settle()
        await registry.send(replace("a", 1, "x"))
        await settle()
        registry.send_nowait(replace("a", 1, "x", "y"))
        registry.send_nowait(replace("b", 1, "z"))
        await settle()
        assert [v.version for v in views] == [1, 3]
        assert list(views[0].tools) == ["mcp_a_x"]
        assert list(views[1].tools) == ["mcp_a_x", "mcp_a_y", "mcp_b_z"]
        assert [seen.version for _, seen in publisher.events] == [1, 3, 3]
        nursery.cancel_scope.cancel()


async def test_views_are_immutable_and_unchanged_by_later_batches(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        registry, _ = await start_registry(nursery)
        await registry.send(replace("a", 1, "x", "y"))
        await registry.send(replace("b", 1, "z"))
        await settle()
        old = registry.view
        items = list(old.tools.items())
        await registry.send(replace("a", 2, "w"))
        await registry.send(WithdrawServer(server="b", generation=1))
        await settle()
        new = registry.view
        assert new is not old and new.version > old.version
        assert list(old.tools.items()) == items
        assert [t.name for t in old.tools_of("a")] == ["mcp_a_x", "mcp_a_y"]
        assert [t.name for t in old.tools_of("b")] == ["mcp_b_z"]
        assert dict(old.withdrawn) == {} and dict(old.generations) == {"a": 1, "b": 1}
        assert list(new.tools) == ["mcp_a_w"]
        assert dict(new.withdrawn) == {"b": 1}
        assert dict(new.generations) == {"a": 2, "b": 1}
        assert new.last_owner("mcp_b_z") == "b"  # kept after the withdrawal
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            old.version = 9  # type: ignore[misc]
        with pytest.raises(TypeError):
            old.withdrawn["a"] = 1  # type: ignore[index]
        with pytest.raises(TypeError):
            old.generations["a"] = 1  # type: ignore[index]
        with pytest.raises(TypeError):
            old.tools["mcp_q"] = old.tools["mcp_a_x"]  # type: ignore[index]
        nursery.cancel_scope.cancel()


async def test_the_view_reads_like_the_table(autojump_clock: trio.testing.MockClock) -> None:
    async with trio.open_nursery() as nursery:
        registry, _ = await start_registry(nursery, frozenset({"mcp_a_read"}))
        refused = ToolRefusal(server="a", tool="hidden", reason="filtered by the config")
        await registry.send(
            ReplaceTools(
                server="a", generation=1, tools=(tool("read"), tool("x")), refused=(refused,)
            )
        )
        await registry.send(replace("a_b", 1, "c"))
        await registry.send(replace("a", 1, "read", "x", "b_c"))
        await settle()
        view = registry.view
        assert list(view.tools) == ["mcp_a_x"]
        assert view.get("mcp_a_x") is view.tools["mcp_a_x"]
        assert [t.name for t in view.tools_of("a")] == ["mcp_a_x"]
        assert view.tools_of("a_b") == ()
        reasons = {r.tool: r.reason for r in view.refused_of("a")}
        assert reasons == {
            "read": "'mcp_a_read' is the name of a built-in tool of the host",
            "b_c": "maps to 'mcp_a_b_c' like tool 'c' of server 'a_b'; both refused",
        }
        assert [r.tool for r in view.refused_of("a_b")] == ["c"]
        assert view.last_owner("mcp_a_b_c") == "a_b"
        nursery.cancel_scope.cancel()


THIRD_JOINS = [replace("a", 1, "b_c"), replace("a_b", 1, "c"), replace("a.b", 1, "c")]
THIRD_LEAVES = [*THIRD_JOINS, WithdrawServer(server="a.b", generation=1)]


@pytest.mark.parametrize(
    ("messages", "reason"),
    [
        pytest.param(
            RIVAL_RENAMED,
            "maps to 'mcp_a_b_x_y' like tool 'x_y' of server 'a_b'; both refused",
            id="the-rival-renames-its-tool",
        ),
        pytest.param(
            THIRD_JOINS,
            "maps to 'mcp_a_b_c' like tool 'c' of server 'a.b', 'c' of server 'a_b'; both refused",
            id="a-third-server-joins-the-clash",
        ),
        pytest.param(
            THIRD_LEAVES,
            "maps to 'mcp_a_b_c' like tool 'c' of server 'a_b'; both refused",
            id="the-third-server-leaves",
        ),
    ],
)
async def test_a_refusal_in_the_view_names_the_rivals_current_tool(
    autojump_clock: trio.testing.MockClock,
    messages: list[ReplaceTools | WithdrawServer],
    reason: str,
) -> None:
    # The clash refusal of server "a" names its rivals: when they change, "a"'s refusals in
    # the published view change too (the table's refused_of("a") does).
    async with trio.open_nursery() as nursery:
        registry, _ = await start_registry(nursery)
        for msg in messages:
            await registry.send(msg)
            await settle()
        assert [r.reason for r in registry.view.refused_of("a")] == [reason]
        nursery.cancel_scope.cancel()


async def test_each_refusal_is_logged_once_with_its_reason(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="trio_mcp")

    def logged() -> list[str]:
        lines = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
        assert all(
            r.name == "trio_mcp.registry" and r.levelno == logging.WARNING
            for r in caplog.records
            if "refused" in r.getMessage()
        )
        caplog.clear()
        return lines

    checked = ToolRefusal(server="a", tool="evil", reason="possible prompt injection")
    async with trio.open_nursery() as nursery:
        registry, _ = await start_registry(nursery, frozenset({"mcp_b_help"}))
        await registry.send(attrs.evolve(replace("a", 1, "b_x", "y"), refused=(checked,)))
        await registry.send(replace("b", 1, "help", "ok"))
        await settle()
        assert logged() == [
            "server 'a': tool 'evil' refused: possible prompt injection",
            "server 'b': tool 'help' refused: 'mcp_b_help' is the name of a built-in tool of "
            "the host",
        ]
        # A clash with another server's tool: both sides, once each.
        await registry.send(replace("a_b", 1, "x"))
        await settle()
        assert sorted(logged()) == [
            "server 'a': tool 'b_x' refused: maps to 'mcp_a_b_x' like tool 'x' of server 'a_b'; "
            "both refused",
            "server 'a_b': tool 'x' refused: maps to 'mcp_a_b_x' like tool 'b_x' of server 'a'; "
            "both refused",
        ]
        # The same listing again, a reconnect (withdrawal, new generation): nothing new.
        await registry.send(attrs.evolve(replace("a", 1, "b_x", "y"), refused=(checked,)))
        await registry.send(WithdrawServer(server="b", generation=1))
        await settle()
        await registry.send(replace("b", 2, "help", "ok"))
        await settle()
        assert logged() == []
        # A refusal that ended and came back is logged again.
        await registry.send(replace("a", 1, "b_x", "y"))
        await settle()
        await registry.send(attrs.evolve(replace("a", 1, "b_x", "y"), refused=(checked,)))
        await settle()
        assert logged() == ["server 'a': tool 'evil' refused: possible prompt injection"]
        record = registry.view.refused_of("a")
        assert checked in record
        nursery.cancel_scope.cancel()


async def test_a_stale_or_tombstoned_message_publishes_no_view(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        registry, publisher = await start_registry(nursery)
        await registry.send(replace("a", 2, "x"))
        await settle()
        view = registry.view
        await registry.send(replace("a", 1, "stale"))
        await settle()
        assert registry.view is view
        await registry.send(WithdrawServer(server="a", generation=2))
        await settle()
        withdrawn = registry.view
        assert dict(withdrawn.tools) == {} and withdrawn.withdrawn == {"a": 2}
        await registry.send(replace("a", 2, "late"))  # the tombstone: never registered
        await settle()
        assert registry.view is withdrawn
        assert [e.removed for e, _ in publisher.events if e.removed] == [("mcp_a_x",)]
        nursery.cancel_scope.cancel()


async def test_wait_version_and_wait_newer(autojump_clock: trio.testing.MockClock) -> None:
    async with trio.open_nursery() as nursery:
        registry, _ = await start_registry(nursery)
        seen: list[tuple[str, int, float]] = []

        async def wait_version(after: int) -> None:
            seen.append(("version", await registry.wait_version(after), trio.current_time()))

        async def wait_newer(view: RegistryView) -> None:
            newer = await registry.wait_newer(view)
            seen.append(("newer", newer.version, trio.current_time()))

        nursery.start_soon(wait_version, 1)
        nursery.start_soon(wait_newer, registry.view)
        await trio.sleep(5)
        assert seen == []
        await registry.send(replace("a", 1, "x"))
        await settle()
        assert seen == [("newer", 1, 5.0)]  # version 1 is not newer than 1
        await trio.sleep(5)
        await registry.send(replace("b", 1, "y"))
        await settle()
        assert seen == [("newer", 1, 5.0), ("version", 2, 10.0)]
        # a view already newer: no wait at all
        assert await registry.wait_version(0) == 2
        assert (await registry.wait_newer(Registry().view)).version == 2
        nursery.cancel_scope.cancel()


async def test_wait_newer_wakes_for_a_change_of_generations_alone(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        registry, _ = await start_registry(nursery)
        await registry.send(replace("a", 1, "x"))
        await settle()
        view = registry.view
        await registry.send(replace("a", 2, "x"))  # the same tools, a new connection
        await settle()
        newer = await registry.wait_newer(view)
        assert newer.generations == {"a": 2}
        assert newer.tools["mcp_a_x"].generation == 2
        nursery.cancel_scope.cancel()


async def test_tools_changed_events_go_to_the_publisher_in_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        registry, publisher = await start_registry(nursery)
        await registry.send(replace("a", 1, "x", "y"))
        await settle()
        await registry.send(
            ReplaceTools(server="a", generation=1, tools=(tool("x", "new"), tool("z")))
        )
        await registry.send(WithdrawServer(server="a", generation=1))
        await settle()
        assert [event for event, _ in publisher.events] == [
            ToolsChanged(
                version=1,
                server="a",
                added=("mcp_a_x", "mcp_a_y"),
                removed=(),
                changed=(),
                refused=(),
            ),
            ToolsChanged(
                version=2,
                server="a",
                added=("mcp_a_z",),
                removed=("mcp_a_y",),
                changed=("mcp_a_x",),
                refused=(),
            ),
            ToolsChanged(
                version=3,
                server="a",
                added=(),
                removed=("mcp_a_x", "mcp_a_z"),
                changed=(),
                refused=(),
            ),
        ]
        nursery.cancel_scope.cancel()


async def test_a_registry_without_a_publisher_publishes_views_only(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        registry = Registry()
        await nursery.start(registry.run)
        await registry.send(replace("a", 1, "x"))
        assert await registry.wait_version(0) == 1
        nursery.cancel_scope.cancel()


async def test_withdrawn_comes_after_the_view_without_the_tools(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        registry, publisher = await start_registry(nursery)
        reply = ReplySink(registry)
        await registry.send(replace("a", 1, "x", "y"))
        await registry.send(replace("b", 1, "z"))
        await settle()
        await trio.sleep(3)
        await registry.send(WithdrawServer(server="a", generation=1, reason="EOF", reply_to=reply))
        await settle()
        assert len(reply.replies) == 1
        ack, view, at = reply.replies[0]
        assert ack == Withdrawn(server="a", generation=1)
        assert at == 3.0
        # at the moment the ack arrives, the published view holds no tool of "a"
        assert view is registry.view
        assert view.tools_of("a") == ()
        assert all(t.server != "a" for t in view.tools.values())
        assert view.withdrawn == {"a": 1}
        assert list(view.tools) == ["mcp_b_z"]
        # and the event of the withdrawal came before the ack, with the same view
        event, event_view = publisher.events[-1]
        assert event.removed == ("mcp_a_x", "mcp_a_y") and event_view is view
        nursery.cancel_scope.cancel()


async def test_withdrawn_is_sent_even_when_nothing_was_registered(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        registry, _ = await start_registry(nursery)
        reply = ReplySink(registry)
        await registry.send(WithdrawServer(server="a", generation=4, reply_to=reply))
        await settle()
        assert [ack for ack, _, _ in reply.replies] == [Withdrawn(server="a", generation=4)]
        assert reply.replies[0][1].withdrawn == {"a": 4}
        # a stale withdrawal is acknowledged too: nothing of generation 2 is in the view
        await registry.send(WithdrawServer(server="a", generation=2, reply_to=reply))
        await settle()
        assert [ack for ack, _, _ in reply.replies][-1] == Withdrawn(server="a", generation=2)
        nursery.cancel_scope.cancel()


async def test_a_withdrawal_and_a_new_listing_in_one_batch(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        registry, _ = await start_registry(nursery)
        reply = ReplySink(registry)
        await registry.send(replace("a", 1, "old"))
        await settle()
        registry.send_nowait(WithdrawServer(server="a", generation=1, reply_to=reply))
        registry.send_nowait(replace("a", 1, "late"))  # the dead connection's answer
        registry.send_nowait(replace("a", 2, "new"))
        await settle()
        ((ack, view, _),) = reply.replies
        assert ack == Withdrawn(server="a", generation=1)
        assert [(t.name, t.generation) for t in view.tools.values()] == [("mcp_a_new", 2)]
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize(
    "refusal", [trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError]
)
async def test_a_reply_to_that_refuses_does_not_break_the_registry(
    autojump_clock: trio.testing.MockClock, refusal: type[BaseException]
) -> None:
    async with trio.open_nursery() as nursery:
        registry, _ = await start_registry(nursery)
        full = ReplySink(registry, refuse=refusal)
        await registry.send(replace("a", 1, "x"))
        await registry.send(WithdrawServer(server="a", generation=1, reply_to=full))
        await settle()
        assert registry.view.tools_of("a") == ()
        # the registry goes on
        ok = ReplySink(registry)
        await registry.send(replace("b", 1, "y"))
        await registry.send(WithdrawServer(server="b", generation=1, reply_to=ok))
        await settle()
        assert [ack for ack, _, _ in ok.replies] == [Withdrawn(server="b", generation=1)]
        assert registry.view.withdrawn == {"a": 1, "b": 1}
        nursery.cancel_scope.cancel()


async def test_a_full_real_mailbox_as_reply_to(autojump_clock: trio.testing.MockClock) -> None:
    send, receive = trio.open_memory_channel[Withdrawn](1)
    send.send_nowait(Withdrawn(server="other", generation=0))
    async with trio.open_nursery() as nursery:
        registry, _ = await start_registry(nursery)
        await registry.send(replace("a", 1, "x"))
        await registry.send(WithdrawServer(server="a", generation=1, reply_to=send))
        await settle()
        assert registry.view.tools_of("a") == ()
        assert receive.receive_nowait() == Withdrawn(server="other", generation=0)
        with pytest.raises(trio.WouldBlock):
            receive.receive_nowait()  # the ack was dropped, not waited for
        await registry.send(replace("a", 2, "x"))
        assert await registry.wait_version(2) == 3
        nursery.cancel_scope.cancel()


async def test_the_mailbox_is_bounded(autojump_clock: trio.testing.MockClock) -> None:
    registry = Registry()
    for i in range(MAILBOX_SIZE):
        registry.send_nowait(replace("a", i, "x"))
    with pytest.raises(trio.WouldBlock):
        registry.send_nowait(replace("a", MAILBOX_SIZE, "x"))
    sent: list[float] = []
    async with trio.open_nursery() as nursery:

        async def sender() -> None:
            await registry.send(replace("a", MAILBOX_SIZE, "x"))
            sent.append(trio.current_time())

        nursery.start_soon(sender)
        await trio.sleep(7)
        assert sent == []
        await nursery.start(registry.run)
        await settle()
        assert sent == [7.0]
        assert registry.view.generations == {"a": MAILBOX_SIZE}
        assert registry.view.tools["mcp_a_x"].generation == MAILBOX_SIZE
        nursery.cancel_scope.cancel()


def test_registry_messages_are_one_closed_union() -> None:
    msg: RegistryMsg = replace("a", 1, "x")
    assert isinstance(msg, ReplaceTools | WithdrawServer)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        msg.generation = 2  # type: ignore[misc]
    # reply_to is no part of a message's identity
    sink = trio.open_memory_channel[Withdrawn](1)[0]
    assert WithdrawServer(server="a", generation=1, reply_to=sink) == WithdrawServer(
        server="a", generation=1
    )
