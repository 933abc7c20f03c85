"""The Registry: the actor that is the single writer of the tool table.

The registry is a trio task (:meth:`Registry.run`) with a bounded mailbox of frozen messages, one
closed union (:data:`RegistryMsg`): :class:`ReplaceTools` (a server's tools, already filtered and
checked) and :class:`WithdrawServer` (its connection ended, or it was stopped). Only the task
changes the table; it applies every message synchronously (so "remove this server's tools, add
the new ones" is atomic by construction), drains every ready message per wake-up, and then
publishes one immutable :class:`RegistryView` and the :class:`ToolsChanged` events. Readers take
the current view (``registry.view``) and can wait for a newer one (:meth:`Registry.wait_version`).
A :class:`WithdrawServer` is acknowledged (:class:`Withdrawn`) to whoever asked, after the view
without the server's tools is published, so a supervisor leaves ``READY`` only once no
published view holds its tools.

Every message carries the connection generation it comes from; a message from a generation older
than the newest one seen for that server is dropped, and a withdraw is a tombstone: nothing of
that generation (a slow ``tools/list`` answer from a dead connection) is registered after it.

The table itself is :class:`ToolTable`, a plain synchronous state object. Views share its
per-server dicts, which it never changes once stored (each listing builds new ones), so a view
costs a few objects whatever the number of tools and no later change alters it.

Names are decided over all servers at once, so the outcome never depends on the order in which
servers connect or list their tools: when two tools map to one registered name, *both* are
refused (and a refused tool comes back by itself when the other one goes away); a tool whose name
clashes with one of the host's built-in tools is refused.

Every refusal, whatever refused the tool (the registration checks, a name clash with another
tool, a host built-in), is logged here and only here, once, at WARNING under ``trio_mcp.registry``
with the server, the tool and the reason (the record also carries them as ``record.server`` and
``record.refusal``). A refusal that lasts is not logged again when its server lists its tools
again or reconnects, nor when the rival of a clash reconnects; it is once its server has listed
its tools without it, and it comes back.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, ItemsView, Iterator, Mapping, Sequence, ValuesView
from itertools import chain
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeAlias, TypeVar, overload

import attrs
import trio

from ...protocol._methods import _slot_setters, _stores_only
from ...protocol._types import Tool
from ._naming import registered_name

if TYPE_CHECKING:
    from ._shaping import AppliedShape

__all__ = [
    "MAILBOX_SIZE",
    "RegisteredTool",
    "Registry",
    "RegistryMsg",
    "RegistryView",
    "ReplaceTools",
    "ToolRefusal",
    "ToolTable",
    "ToolsChanged",
    "WithdrawServer",
    "Withdrawn",
]

#: Messages waiting for the registry task.
MAILBOX_SIZE: Final = 256

logger = logging.getLogger("trio_mcp.registry")
_T = TypeVar("_T")


@attrs.frozen(kw_only=True)
class RegisteredTool:
    """A tool as the model sees it: its registered name, and where it comes from.

    ``tool`` is the definition the model sees: the server's, or for a tool the configuration
    shapes (``ServerConfig.tool_shapes``) the shaped one, with ``shape`` saying how a call
    goes back to the server (:meth:`wire_arguments`)."""

    name: str
    server: str
    tool: Tool
    generation: int
    shape: AppliedShape | None = None

    @property
    def wire_name(self) -> str:
        """The server's own name for the tool (what goes into ``tools/call``)."""
        shape = self.shape
        return self.tool.name if shape is None else shape.wire_name

    @property
    def wire_tool(self) -> Tool:
        """The definition with the server's own name (what a ``tools/call`` is made of)."""
        shape = self.shape
        return self.tool if shape is None else attrs.evolve(self.tool, name=shape.wire_name)

    def wire_arguments(self, arguments: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
        """The model's ``arguments`` as the server takes them: as they are for a tool that is
        not shaped; else with the server's argument names, the fixed values of hidden
        arguments and the defaults the model left out (:meth:`AppliedShape.to_wire`)."""
        shape = self.shape
        return arguments if shape is None else shape.to_wire(arguments)


_REGISTERED_FIELDS: Final = ("name", "server", "tool", "generation", "shape")


def _registered_maker() -> Callable[[str, str, Tool, int, AppliedShape | None], RegisteredTool]:
    """``RegisteredTool(name=, server=, tool=, generation=)``, positionally and faster: a
    listing makes one per tool, and attrs' ``__init__`` of a frozen class stores each field
    through a bound ``object.__setattr__`` (twice the cost); this stores them with the slots'
    own descriptors, which is all that ``__init__`` does here (checked when the module loads,
    as for ``Tool``; if it ever does more, this is ``RegisteredTool`` itself)."""
    cls = RegisteredTool
    if not _stores_only(cls, _REGISTERED_FIELDS):  # pragma: no cover - plain today
        return lambda name, server, tool, generation, shape: cls(
            name=name, server=server, tool=tool, generation=generation, shape=shape
        )
    new = object.__new__
    s_name, s_server, s_tool, s_generation, s_shape = _slot_setters(cls, _REGISTERED_FIELDS)

    def make(
        name: str, server: str, tool: Tool, generation: int, shape: AppliedShape | None
    ) -> RegisteredTool:
        entry: RegisteredTool = new(cls)
        s_name(entry, name)
        s_server(entry, server)
        s_tool(entry, tool)
        s_generation(entry, generation)
        s_shape(entry, shape)
        return entry

    return make


_registered = _registered_maker()


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
    #: The shaped tools' mappings back to the server, by their (shaped) name.
    shapes: Mapping[str, AppliedShape] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class Withdrawn:
    """The registry's answer to a :class:`WithdrawServer` that asked for one: the published
    view no longer holds any tool of ``server`` up to ``generation``."""

    server: str
    generation: int


class WithdrawnSink(Protocol):
    """Where a :class:`Withdrawn` goes (a supervisor's mailbox)."""

    def send_nowait(self, value: Withdrawn, /) -> None: ...


@attrs.frozen(kw_only=True)
class WithdrawServer:
    """Remove every tool of ``server`` (its connection ended, or it was stopped) and refuse
    anything of ``generation`` or older from now on. ``reply_to`` gets a :class:`Withdrawn` once
    the view without them is published."""

    server: str
    generation: int
    reason: str = ""
    reply_to: WithdrawnSink | None = attrs.field(default=None, eq=False, repr=False)


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


@attrs.frozen(eq=False, repr=False)
class _TableSnapshot(Mapping[str, RegisteredTool]):
    """The tool table of several servers at one moment, as :meth:`Registry.snapshot` gives it: an
    immutable mapping, registered name -> tool, servers in name order and each server's tools in
    the order the server listed them.

    It shares the registry's per-server dicts instead of copying them: the registry never changes
    a dict once a snapshot may hold it (it builds a new one for every change), so a snapshot costs
    one small tuple whatever the number of tools, and no later change alters it. No name is in two
    parts (a name that two servers claim is registered for neither). A lookup is one ``dict.get``
    per server's dict, in turn: :meth:`get` (what the runtime's call path uses, through
    :meth:`RegistryView.get`) returns ``default`` for a missing name, ``[]`` raises ``KeyError``,
    as in a dict.
    """

    _parts: tuple[dict[str, RegisteredTool], ...]
    _size: int

    @overload
    def get(self, name: str, /) -> RegisteredTool | None: ...
    @overload
    def get(self, name: str, default: RegisteredTool | _T, /) -> RegisteredTool | _T: ...

    def get(self, name: str, default: object = None, /) -> object:
        """The tool registered as ``name``, else ``default``: a ``dict.get`` per part, without
        the ``KeyError`` that ``Mapping.get`` raises and catches for a missing name."""
        for part in self._parts:
            entry = part.get(name)
            if entry is not None:
                return entry
        return default

    def __getitem__(self, name: str) -> RegisteredTool:
        for part in self._parts:
            entry = part.get(name)
            if entry is not None:
                return entry
        raise KeyError(name)

    def __contains__(self, name: object) -> bool:
        return any(name in part for part in self._parts)

    def __iter__(self) -> Iterator[str]:
        return chain.from_iterable(self._parts)

    def __reversed__(self) -> Iterator[str]:
        return chain.from_iterable(reversed(part.keys()) for part in reversed(self._parts))

    def __len__(self) -> int:
        return self._size

    def items(self) -> ItemsView[str, RegisteredTool]:
        """(name, tool) pairs, in the mapping's order."""
        return _SnapshotItems(self)

    def values(self) -> ValuesView[RegisteredTool]:
        """The tools, in the mapping's order."""
        return _SnapshotValues(self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({dict(self.items())!r})"


class _SnapshotItems(ItemsView[str, RegisteredTool]):
    """``snapshot.items()``, iterated part by part (not by one lookup per name)."""

    _mapping: _TableSnapshot

    def __iter__(self) -> Iterator[tuple[str, RegisteredTool]]:
        return chain.from_iterable(part.items() for part in self._mapping._parts)


class _SnapshotValues(ValuesView[RegisteredTool]):
    """``snapshot.values()``, iterated part by part (not by one lookup per name)."""

    _mapping: _TableSnapshot

    def __iter__(self) -> Iterator[RegisteredTool]:
        return chain.from_iterable(part.values() for part in self._mapping._parts)


@attrs.define(eq=False)
class ToolTable:
    """The tool table: the registry task's state. Only :meth:`apply` changes it; readers take
    immutable snapshots.

    Each server's candidate dict (registered name -> entry, before cross-server collisions) is
    built new on every listing and never changed afterwards, so snapshots can share it; the
    name index ``_table`` (every registered name) is private and changed in place.
    """

    builtin_names: frozenset[str] = frozenset()
    #: server -> registered name -> candidate entry (before cross-server collisions); each dict
    #: is immutable once stored (snapshots share it)
    _candidates: dict[str, dict[str, RegisteredTool]] = attrs.field(factory=dict, init=False)
    #: server -> its registered entries (its candidates without the clashing names), for
    #: snapshots; missing when it must be computed again
    _parts: dict[str, dict[str, RegisteredTool]] = attrs.field(factory=dict, init=False)
    #: server -> the server's name of a tool -> its registered name (the last listing's tools)
    _names: dict[str, dict[str, str]] = attrs.field(factory=dict, init=False)
    #: registered name -> servers claiming it
    _claims: dict[str, set[str]] = attrs.field(factory=dict, init=False)
    _generation: dict[str, int] = attrs.field(factory=dict, init=False)
    _refused: dict[str, tuple[ToolRefusal, ...]] = attrs.field(factory=dict, init=False)
    #: registered name -> entry, for every registered tool
    _table: dict[str, RegisteredTool] = attrs.field(factory=dict, init=False)
    #: registered name -> the server that last offered it (kept after a withdrawal)
    _last_owner: dict[str, str] = attrs.field(factory=dict, init=False)
    _snapshot: Mapping[str, RegisteredTool] | None = attrs.field(default=None, init=False)
    _version: int = attrs.field(default=0, init=False)
    #: server -> the newest generation withdrawn (a tombstone: nothing of it is registered)
    _withdrawn: dict[str, int] = attrs.field(factory=dict, init=False)
    #: servers whose registered tools or refusals changed since :meth:`take_dirty`
    _dirty: set[str] = attrs.field(factory=set, init=False)
    #: whether ``_last_owner`` changed since :meth:`take_dirty`
    _owners_dirty: bool = attrs.field(default=False, init=False)

    # ------------------------------------------------------------------ reading

    @property
    def version(self) -> int:
        """Increases by one on every change of the table."""
        return self._version

    def snapshot(self) -> Mapping[str, RegisteredTool]:
        """The current table, registered name -> tool: servers in name order, each server's tools
        in the order it listed them. Immutable, and unchanged by later changes of the table.

        It shares the registry's per-server dicts, which the registry never changes once stored
        (a change builds new ones), so its cost grows with the number of servers, not of tools:
        with tools of one server it is a read-only proxy of that server's dict, with several a
        :class:`_TableSnapshot` over them. A second call with no :meth:`apply` in between returns
        the same object. Never fails."""
        if self._snapshot is None:
            parts: list[dict[str, RegisteredTool]] = []
            size = 0
            for server in sorted(self._candidates):
                part = self._parts.get(server)
                if part is None:
                    part = self._registered_part(server)
                if part:
                    parts.append(part)
                    size += len(part)
            if len(parts) > 1:
                self._snapshot = _TableSnapshot(parts=tuple(parts), size=size)
            else:  # one server (or none): its dict itself, read-only
                self._snapshot = MappingProxyType(parts[0] if parts else {})
        return self._snapshot

    def _registered_part(self, server: str) -> dict[str, RegisteredTool]:
        """The registered entries of ``server`` (its candidates without the clashing names),
        remembered until a change of the server's registered tools."""
        candidates = self._candidates[server]
        table = self._table
        part = {name: entry for name, entry in candidates.items() if table.get(name) is entry}
        if len(part) == len(candidates):
            part = candidates  # all registered: share it (and let the next listing use _relist)
        self._parts[server] = part
        return part

    def get(self, name: str) -> RegisteredTool | None:
        """The registered tool named ``name``, or None when there is none."""
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

    def generation_of(self, server: str) -> int:
        """The newest generation of ``server`` whose message was applied (-1: none)."""
        return self._generation.get(server, -1)

    def withdrawn_through(self, server: str) -> int:
        """The newest generation of ``server`` that was withdrawn (-1: none)."""
        return self._withdrawn.get(server, -1)

    def last_owners(self) -> dict[str, str]:
        """A copy of registered name -> the server that last offered it."""
        return dict(self._last_owner)

    def take_dirty(self) -> tuple[set[str], bool]:
        """The servers whose registered tools or refusals changed, and whether the last owners
        changed, since the last call (which this one forgets)."""
        dirty, owners = self._dirty, self._owners_dirty
        self._dirty = set()
        self._owners_dirty = False
        return dirty, owners

    # ------------------------------------------------------------------ writing

    def apply(self, msg: RegistryMsg) -> ToolsChanged | None:
        """Apply one message atomically. Returns the change, or None when nothing changed (or
        the message came from an older connection generation and was dropped). Never fails."""
        if msg.generation < self._generation.get(msg.server, -1):
            return None
        self._generation[msg.server] = msg.generation
        match msg:
            case ReplaceTools(server=server, generation=generation, tools=tools, refused=refused):
                if generation <= self._withdrawn.get(server, -1):
                    return None  # the tombstone of a withdrawn generation
                named, own_refusals = self._name(server, tools)
                self._refused[server] = refused + own_refusals
                self._dirty.add(server)
                return self._set_candidates(
                    server, generation, named, own_refusals + refused, msg.shapes
                )
            case WithdrawServer(server=server):
                self._withdrawn[server] = max(msg.generation, self._withdrawn.get(server, -1))
                self._refused.pop(server, None)
                self._dirty.add(server)
                return self._set_candidates(server, msg.generation, {}, ())

    def _name(
        self, server: str, tools: tuple[Tool, ...]
    ) -> tuple[dict[str, Tool], tuple[ToolRefusal, ...]]:
        """Registered name -> tool for the tools that may register, in listing order, and the
        refusals (names two of the server's tools map to, names of built-in tools)."""
        cache = self._names.get(server, {})
        builtin = self.builtin_names
        named: dict[str, Tool] = {}
        refusals: list[ToolRefusal] = []
        builtin_named: list[tuple[str, str]] = []
        missed = False
        for tool in tools:
            name = cache.get(tool.name)
            if name is None:
                name = registered_name(server, tool.name)
                missed = True
            if name in named:  # two tools, one name (rare): name them all the slow way
                return self._name_with_duplicates(server, tools)
            if name in builtin:
                if any(name == seen for _, seen in builtin_named):
                    return self._name_with_duplicates(server, tools)
                refusals.append(_builtin_refusal(server, tool, name))
                builtin_named.append((tool.name, name))
            else:
                named[name] = tool
        if missed or len(tools) != len(cache):  # keep the names of this listing's tools only
            names = {tool.name: name for name, tool in named.items()}
            names.update(builtin_named)
            self._names[server] = names
        return named, tuple(refusals)

    def _name_with_duplicates(
        self, server: str, tools: tuple[Tool, ...]
    ) -> tuple[dict[str, Tool], tuple[ToolRefusal, ...]]:
        """:meth:`_name` when two tools map to one name: both are refused; the refusals come in
        the order in which each name first appears."""
        by_name: dict[str, list[Tool]] = {}
        for tool in tools:
            by_name.setdefault(registered_name(server, tool.name), []).append(tool)
        named: dict[str, Tool] = {}
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
                refusals.append(_builtin_refusal(server, same[0], name))
            else:
                named[name] = same[0]
        self._names[server] = {tool.name: name for name, tool in named.items()}
        return named, tuple(refusals)

    def _set_candidates(
        self,
        server: str,
        generation: int,
        named: dict[str, Tool],
        refused: tuple[ToolRefusal, ...],
        shapes: Mapping[str, AppliedShape] | None = None,
    ) -> ToolsChanged | None:
        """Make ``named`` the candidates of ``server`` and bring the table up to date
        (``shapes``: the shaped tools' mappings back to the server, by tool name).

        One pass over the new candidates, and one over the old ones only when some are gone. An
        entry whose tool and generation are unchanged is kept (the same object); each tool is
        compared with its predecessor at most once."""
        old = self._candidates.get(server, {})
        if old and self._parts.get(server) is old and named.keys() == old.keys():
            return self._relist(server, generation, named, old, refused, shapes)
        claims = self._claims
        table = self._table
        candidates: dict[str, RegisteredTool] = {}
        added: list[str] = []
        removed: list[str] = []
        changed: list[str] = []
        updated = False
        all_registered = True  # every candidate of ``server`` is in the table
        touched: set[str] = set()  # other servers whose registered tools changed
        rivals: set[str] = set()  # other servers whose clash refusals now read differently
        kept = 0
        for name, tool in named.items():
            shape = shapes.get(tool.name) if shapes else None
            before = old.get(name)
            if before is None:
                entry = _registered(name, server, tool, generation, shape)
                candidates[name] = entry
                claimants = claims.get(name)
                if claimants is None:  # nobody else wants the name
                    claims[name] = {server}
                    table[name] = entry
                    self._last_owner[name] = server
                    added.append(name)
                else:  # a clash: the other server's tool (if registered) leaves the table
                    rivals |= claimants
                    claimants.add(server)
                    all_registered = False
                    other = table.pop(name, None)
                    if other is not None:
                        removed.append(name)
                        touched.add(other.server)
                continue
            kept += 1
            same_tool = (before.tool is tool or before.tool == tool) and before.shape == shape
            if same_tool and before.generation == generation:
                candidates[name] = before
                if len(claims[name]) > 1:
                    all_registered = False
                continue
            entry = _registered(name, server, tool, generation, shape)
            candidates[name] = entry
            if len(claims[name]) > 1:  # still a clash: not in the table either way
                all_registered = False
                if not same_tool:  # the rivals' refusals name this server's tool
                    rivals |= claims[name]
                continue
            table[name] = entry
            updated = True
            if not same_tool:
                changed.append(name)
        if kept < len(old):
            for name in old:
                if name in candidates:
                    continue
                claimants = claims[name]
                claimants.discard(server)
                rivals |= claimants
                if not claimants:
                    del claims[name]
                    if table.pop(name, None) is not None:
                        removed.append(name)
                elif len(claimants) == 1:  # the clash is over: the other server's tool comes back
                    (other_server,) = claimants
                    table[name] = self._candidates[other_server][name]
                    self._last_owner[name] = other_server
                    added.append(name)
                    touched.add(other_server)
        if candidates:
            self._candidates[server] = candidates
            if all_registered:
                self._parts[server] = candidates
            else:
                self._parts.pop(server, None)
        else:
            self._candidates.pop(server, None)
            self._parts.pop(server, None)
        for other_server in touched:
            self._parts.pop(other_server, None)
        self._dirty |= touched
        self._dirty |= rivals - {server}
        if added:
            self._owners_dirty = True
        self._snapshot = None  # even with no change: the server may have reordered its tools

        if not (added or removed or updated or refused):
            return None
        return self._publish(server, added, removed, changed, refused)

    def _publish(
        self,
        server: str,
        added: Sequence[str],
        removed: Sequence[str],
        changed: Sequence[str],
        refused: tuple[ToolRefusal, ...],
    ) -> ToolsChanged:
        """Count a change of the table: a new version, the event returned."""
        self._version += 1
        return ToolsChanged(
            version=self._version,
            server=server,
            added=tuple(sorted(added)),
            removed=tuple(sorted(removed)),
            changed=tuple(sorted(changed)),
            refused=refused,
        )

    def _relist(
        self,
        server: str,
        generation: int,
        named: dict[str, Tool],
        old: dict[str, RegisteredTool],
        refused: tuple[ToolRefusal, ...],
        shapes: Mapping[str, AppliedShape] | None = None,
    ) -> ToolsChanged | None:
        """:meth:`_set_candidates` when ``server`` lists the same names as last time and none of
        them clashes: no claim changes, every candidate stays registered."""
        candidates: dict[str, RegisteredTool] = {}
        changed: list[str] = []
        fresh = 0
        for name, tool in named.items():
            before = old[name]
            shape = shapes.get(tool.name) if shapes else None
            if (before.tool is tool or before.tool == tool) and before.shape == shape:
                if before.generation == generation:
                    candidates[name] = before
                    continue
            else:
                changed.append(name)
            candidates[name] = _registered(name, server, tool, generation, shape)
            fresh += 1
        self._candidates[server] = self._parts[server] = candidates
        self._snapshot = None  # even with no change: the server may have reordered its tools
        if fresh:
            self._table.update(candidates)
        elif not refused:
            return None
        return self._publish(server, (), (), changed, refused)

    def _clash_reason(self, entry: RegisteredTool) -> str:
        others = sorted(self._claims.get(entry.name, set()) - {entry.server})
        rivals = ", ".join(
            f"{self._candidates[s][entry.name].wire_name!r} of server {s!r}" for s in others
        )
        return f"maps to {entry.name!r} like tool {rivals}; both refused"


def _builtin_refusal(server: str, tool: Tool, name: str) -> ToolRefusal:
    """The refusal of ``tool``, whose registered name ``name`` is a built-in tool's."""
    return ToolRefusal(
        server=server, tool=tool.name, reason=f"{name!r} is the name of a built-in tool of the host"
    )


# --------------------------------------------------------------------------- the actor


@attrs.frozen(kw_only=True)
class RegistryView:
    """The tool table at one version, as the registry task published it. Immutable: nothing
    the registry does later changes it.

    ``tools``: registered name -> tool, servers in name order and each server's tools in the
    order it listed them. ``withdrawn``: server -> the newest generation withdrawn."""

    version: int
    tools: Mapping[str, RegisteredTool]
    _server_tools: Mapping[str, tuple[RegisteredTool, ...]]
    _refused: Mapping[str, tuple[ToolRefusal, ...]]
    _last_owner: Mapping[str, str]
    withdrawn: Mapping[str, int]
    #: server -> the newest generation the registry has applied a message of
    generations: Mapping[str, int]

    def get(self, name: str) -> RegisteredTool | None:
        """The registered tool named ``name``, or None."""
        return self.tools.get(name)

    def tools_of(self, server: str) -> tuple[RegisteredTool, ...]:
        """The registered tools of one server, in the order the server listed them."""
        return self._server_tools.get(server, ())

    def refused_of(self, server: str) -> tuple[ToolRefusal, ...]:
        """The tools of ``server`` that were refused at its last listing, with reasons."""
        return self._refused.get(server, ())

    def last_owner(self, name: str) -> str | None:
        """The server that last offered a tool under ``name``, even if it was withdrawn since
        (so a call can say "that server is reconnecting" instead of "no such tool")."""
        return self._last_owner.get(name)


_EMPTY_VIEW: Final = RegistryView(
    version=0,
    tools=MappingProxyType({}),
    server_tools=MappingProxyType({}),
    refused=MappingProxyType({}),
    last_owner=MappingProxyType({}),
    withdrawn=MappingProxyType({}),
    generations=MappingProxyType({}),
)


class EventPublisher(Protocol):
    """Where the registry's :class:`ToolsChanged` events go (the runtime's event bus)."""

    def publish(self, event: ToolsChanged, /) -> None: ...


@attrs.define(eq=False)
class Registry:
    """The registry actor. Other tasks send it messages (:meth:`send`) and read what it
    published (:attr:`view`, :meth:`wait_version`); only :meth:`run` changes the table."""

    builtin_names: frozenset[str] = frozenset()
    events: EventPublisher | None = None
    _table: ToolTable = attrs.field(init=False)
    _inbox: trio.MemorySendChannel[RegistryMsg] = attrs.field(init=False)
    _mailbox: trio.MemoryReceiveChannel[RegistryMsg] = attrs.field(init=False)
    _view: RegistryView = attrs.field(default=_EMPTY_VIEW, init=False)
    _published: trio.Event = attrs.field(factory=trio.Event, init=False)
    #: server -> its refusals that were logged and have not ended since
    _logged: dict[str, frozenset[ToolRefusal]] = attrs.field(factory=dict, init=False)

    def __attrs_post_init__(self) -> None:
        self._table = ToolTable(builtin_names=self.builtin_names)
        self._inbox, self._mailbox = trio.open_memory_channel[RegistryMsg](MAILBOX_SIZE)

    # ------------------------------------------------------------------ for other tasks

    @property
    def view(self) -> RegistryView:
        """The newest published view of the table."""
        return self._view

    async def send(self, msg: RegistryMsg) -> None:
        """Hand ``msg`` to the registry task (waiting while its mailbox is full)."""
        await self._inbox.send(msg)

    def send_nowait(self, msg: RegistryMsg) -> None:
        """Hand ``msg`` to the registry task now; ``trio.WouldBlock`` when its mailbox is
        full."""
        self._inbox.send_nowait(msg)

    async def wait_newer(self, view: RegistryView) -> RegistryView:
        """Wait until a view other than ``view`` is published (a change of the table, or only
        of the generations it has seen); return it."""
        while self._view is view:
            await self._published.wait()
        return self._view

    async def wait_version(self, after: int) -> int:
        """Wait until a view newer than version ``after`` is published; return its version."""
        while self._view.version <= after:
            await self._published.wait()
        return self._view.version

    # ------------------------------------------------------------------ the task

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Apply messages until the mailbox is closed or the task is cancelled: every ready
        message per wake-up, then one published view, the events and the acknowledgements."""
        task_status.started()
        mailbox = self._mailbox
        while True:
            try:
                batch = [await mailbox.receive()]
            except trio.EndOfChannel:
                return
            while True:
                try:
                    batch.append(mailbox.receive_nowait())
                except (trio.WouldBlock, trio.EndOfChannel):
                    break
            self._apply_batch(batch)

    def _apply_batch(self, batch: list[RegistryMsg]) -> None:
        """Apply, publish, tell. Sync: no reader sees a state between two messages of a batch
        that the view does not show."""
        changes: list[ToolsChanged] = []
        replies: list[tuple[WithdrawnSink, Withdrawn]] = []
        for msg in batch:
            change = self._table.apply(msg)
            if change is not None:
                changes.append(change)
            if isinstance(msg, WithdrawServer) and msg.reply_to is not None:
                replies.append(
                    (msg.reply_to, Withdrawn(server=msg.server, generation=msg.generation))
                )
        self._publish({msg.server for msg in batch if isinstance(msg, ReplaceTools)})
        if self.events is not None:
            for change in changes:
                self.events.publish(change)
        for reply_to, reply in replies:
            try:
                reply_to.send_nowait(reply)
            except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
                # A mailbox that is full or closed loses it; a supervisor's reply_to is a
                # one-shot waiter, which always takes it.
                continue

    def _publish(self, listed: set[str]) -> None:
        """Publish a new view if anything changed; log the new refusals of the servers that
        changed (``listed``: the servers whose own listing came in this batch)."""
        table = self._table
        dirty, owners_changed = table.take_dirty()
        old = self._view
        if not dirty and not owners_changed and table.version == old.version:
            return  # a withdrawal marks its server dirty, so nothing changed at all
        server_tools = dict(old._server_tools)
        refused = dict(old._refused)
        for server in dirty:
            server_tools[server] = table.tools_of(server)
            refused[server] = table.refused_of(server)
        for server in sorted(dirty):
            if table.withdrawn_through(server) < table.generation_of(server):
                self._log_refusals(server, refused[server], listed=server in listed)
        withdrawn = dict(old.withdrawn)
        generations = dict(old.generations)
        for server in dirty:
            through = table.withdrawn_through(server)
            if through >= 0:
                withdrawn[server] = through
            generations[server] = table.generation_of(server)
        self._view = RegistryView(
            version=table.version,
            tools=table.snapshot(),
            server_tools=MappingProxyType(server_tools),
            refused=MappingProxyType(refused),
            last_owner=MappingProxyType(table.last_owners()) if owners_changed else old._last_owner,
            withdrawn=MappingProxyType(withdrawn),
            generations=MappingProxyType(generations),
        )
        self._published.set()
        self._published = trio.Event()

    def _log_refusals(
        self, server: str, refusals: tuple[ToolRefusal, ...], *, listed: bool
    ) -> None:
        """Log the refusals of ``server`` that were not logged already. When the server's own
        listing came (``listed``), the ones it no longer has are forgotten; a change of another
        server (a rival of a clash leaving or coming back) only adds. Not called for a
        withdrawn server, whose refusals are remembered until it lists its tools again."""
        before = self._logged.get(server, frozenset())
        for refusal in refusals:
            if refusal not in before:
                what = "a tool entry" if refusal.tool is None else f"tool {refusal.tool!r}"
                logger.warning(
                    "server %r: %s refused: %s",
                    server,
                    what,
                    refusal.reason,
                    extra={"server": server, "refusal": refusal},
                )
        now = frozenset(refusals) if listed else before.union(refusals)
        if now:
            self._logged[server] = now
        else:
            self._logged.pop(server, None)
