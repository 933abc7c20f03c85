"""The Registry: the single writer of the tool table.

The registry is a passive actor: its mailbox is :meth:`Registry.apply`, a synchronous call that
takes one message (``ReplaceTools`` or ``WithdrawServer``) and applies it whole. Trio is
cooperative, so a synchronous call is atomic: no reader can see a server half replaced, and the
session that loses its connection withdraws the server's tools in the same step in which it fails
the server's pending calls (a channel hop would put a checkpoint between the two).

Every message carries the connection generation it comes from; a message from a generation older
than the newest one seen for that server is dropped, so a slow ``tools/list`` answer from a dead
connection can never overwrite the tools of the live one.

Names are decided here, over all servers at once, so the outcome never depends on the order in
which servers connect or list their tools: when two tools map to one registered name, *both* are
refused (and a refused tool comes back by itself when the other one goes away); a tool whose name
clashes with one of the host's built-in tools is refused.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import TypeAlias

import attrs
import trio

from ..protocol._types import Tool
from ._naming import registered_name

__all__ = [
    "RegisteredTool",
    "Registry",
    "RegistryMsg",
    "ReplaceTools",
    "ToolRefusal",
    "ToolsChanged",
    "WithdrawServer",
]


@attrs.frozen(kw_only=True)
class RegisteredTool:
    """A tool as the model sees it: its registered name, and where it comes from."""

    name: str
    server: str
    tool: Tool
    generation: int

    @property
    def wire_name(self) -> str:
        """The server's own name for the tool (what goes into ``tools/call``)."""
        return self.tool.name


@attrs.frozen(kw_only=True)
class ToolRefusal:
    """A tool that was not registered, and why."""

    server: str
    tool: str | None
    reason: str


@attrs.frozen(kw_only=True)
class ReplaceTools:
    """Replace every tool of ``server`` with ``tools`` (already filtered and checked)."""

    server: str
    generation: int
    tools: tuple[Tool, ...]
    refused: tuple[ToolRefusal, ...] = ()


@attrs.frozen(kw_only=True)
class WithdrawServer:
    """Remove every tool of ``server`` (its connection ended, or it was stopped)."""

    server: str
    generation: int
    reason: str = ""


RegistryMsg: TypeAlias = ReplaceTools | WithdrawServer


@attrs.frozen(kw_only=True)
class ToolsChanged:
    """The tool table changed (an event, published on the runtime's event stream)."""

    version: int
    server: str
    added: tuple[str, ...]
    removed: tuple[str, ...]
    #: registered names whose definition (description, schema, annotations...) changed
    changed: tuple[str, ...]
    refused: tuple[ToolRefusal, ...]


@attrs.define(eq=False)
class Registry:
    """The tool table. Only :meth:`apply` changes it; readers take immutable snapshots."""

    builtin_names: frozenset[str] = frozenset()
    #: server -> registered name -> candidate entry (before cross-server collisions)
    _candidates: dict[str, dict[str, RegisteredTool]] = attrs.field(factory=dict, init=False)
    #: registered name -> servers claiming it
    _claims: dict[str, set[str]] = attrs.field(factory=dict, init=False)
    _generation: dict[str, int] = attrs.field(factory=dict, init=False)
    _refused: dict[str, tuple[ToolRefusal, ...]] = attrs.field(factory=dict, init=False)
    _table: dict[str, RegisteredTool] = attrs.field(factory=dict, init=False)
    #: registered name -> the server that last offered it (kept after a withdrawal)
    _last_owner: dict[str, str] = attrs.field(factory=dict, init=False)
    _snapshot: Mapping[str, RegisteredTool] | None = attrs.field(default=None, init=False)
    _version: int = attrs.field(default=0, init=False)
    _changed: trio.Event = attrs.field(factory=trio.Event, init=False)

    # ------------------------------------------------------------------ reading

    @property
    def version(self) -> int:
        """Increases by one on every change of the table."""
        return self._version

    def snapshot(self) -> Mapping[str, RegisteredTool]:
        """The current table, registered name -> tool. Immutable; cheap when nothing changed."""
        if self._snapshot is None:
            self._snapshot = MappingProxyType(dict(self._table))
        return self._snapshot

    def get(self, name: str) -> RegisteredTool | None:
        return self._table.get(name)

    def last_owner(self, name: str) -> str | None:
        """The server that last offered a tool under ``name``, even if it was withdrawn since
        (so a call can say "that server is reconnecting" instead of "no such tool")."""
        return self._last_owner.get(name)

    def tools_of(self, server: str) -> tuple[RegisteredTool, ...]:
        """The registered tools of one server, in the order the server listed them."""
        return tuple(t for t in self._candidates.get(server, {}).values() if t.name in self._table)

    def refused_of(self, server: str) -> tuple[ToolRefusal, ...]:
        """The tools of ``server`` that were refused at its last listing, with reasons."""
        mine = self._refused.get(server, ())
        clashes = tuple(
            ToolRefusal(
                server=server,
                tool=entry.wire_name,
                reason=self._clash_reason(entry),
            )
            for name, entry in self._candidates.get(server, {}).items()
            if name not in self._table and name not in self.builtin_names
        )
        return mine + clashes

    async def wait_version(self, after: int) -> int:
        """Wait until the table's version is greater than ``after``; return the new version."""
        while self._version <= after:
            await self._changed.wait()
        return self._version

    # ------------------------------------------------------------------ writing

    def apply(self, msg: RegistryMsg) -> ToolsChanged | None:
        """Apply one message atomically. Returns the change, or None when nothing changed (or
        the message came from an older connection generation and was dropped)."""
        if msg.generation < self._generation.get(msg.server, -1):
            return None
        self._generation[msg.server] = msg.generation
        match msg:
            case ReplaceTools(server=server, generation=generation, tools=tools, refused=refused):
                candidates, own_refusals = self._name(server, generation, tools)
                self._refused[server] = refused + own_refusals
                return self._set_candidates(server, candidates, own_refusals + refused)
            case WithdrawServer(server=server):
                self._refused.pop(server, None)
                return self._set_candidates(server, {}, ())

    def _name(
        self, server: str, generation: int, tools: Iterable[Tool]
    ) -> tuple[dict[str, RegisteredTool], tuple[ToolRefusal, ...]]:
        by_name: dict[str, list[Tool]] = {}
        for tool in tools:
            by_name.setdefault(registered_name(server, tool.name), []).append(tool)
        candidates: dict[str, RegisteredTool] = {}
        refusals: list[ToolRefusal] = []
        for name, same in by_name.items():
            if len(same) > 1:
                names = ", ".join(repr(t.name) for t in same)
                refusals.extend(
                    ToolRefusal(
                        server=server,
                        tool=t.name,
                        reason=f"tools {names} of this server all map to {name!r}; all refused",
                    )
                    for t in same
                )
            elif name in self.builtin_names:
                refusals.append(
                    ToolRefusal(
                        server=server,
                        tool=same[0].name,
                        reason=f"{name!r} is the name of a built-in tool of the host",
                    )
                )
            else:
                candidates[name] = RegisteredTool(
                    name=name, server=server, tool=same[0], generation=generation
                )
        return candidates, tuple(refusals)

    def _set_candidates(
        self,
        server: str,
        candidates: dict[str, RegisteredTool],
        refused: tuple[ToolRefusal, ...],
    ) -> ToolsChanged | None:
        old = self._candidates.pop(server, {})
        if candidates:
            self._candidates[server] = candidates
        for name in old.keys() - candidates.keys():
            claimants = self._claims[name]
            claimants.discard(server)
            if not claimants:
                del self._claims[name]
        for name in candidates.keys() - old.keys():
            self._claims.setdefault(name, set()).add(server)

        added: list[str] = []
        removed: list[str] = []
        changed: list[str] = []
        updated = False
        for name in old.keys() | candidates.keys():
            claimants = self._claims.get(name, set())
            before = self._table.get(name)
            after = self._candidates[next(iter(claimants))][name] if len(claimants) == 1 else None
            if after is None:
                if before is not None:
                    del self._table[name]
                    removed.append(name)
            elif before is None:
                self._table[name] = after
                self._last_owner[name] = after.server
                added.append(name)
            elif before.tool != after.tool:
                self._table[name] = after
                changed.append(name)
                updated = True
            elif before.generation != after.generation:
                self._table[name] = after
                updated = True
        if not (added or removed or updated or refused):
            return None
        self._version += 1
        self._snapshot = None
        self._changed.set()
        self._changed = trio.Event()
        return ToolsChanged(
            version=self._version,
            server=server,
            added=tuple(sorted(added)),
            removed=tuple(sorted(removed)),
            changed=tuple(sorted(changed)),
            refused=refused,
        )

    def _clash_reason(self, entry: RegisteredTool) -> str:
        others = sorted(self._claims.get(entry.name, set()) - {entry.server})
        rivals = ", ".join(
            f"{self._candidates[s][entry.name].wire_name!r} of server {s!r}" for s in others
        )
        return f"maps to {entry.name!r} like tool {rivals}; both refused"
