"""The skill watcher: a server's skills listed again when the server says they may have changed.

The skills extension defines no notification of its own; a server's skills are resources, so
``notifications/resources/list_changed`` (a legacy server's notification, or the 2026-07-28
subscription event, which the session's subscriber hands to the same dispatcher) says that
they may have changed, and so does a new connection (the server may have changed while it was
away). The dispatcher publishes both on the event bus (:class:`ListChanged`,
:class:`ServerStateChanged`); this actor listens there, so the session and the supervisor
need nothing of it.

:class:`SkillWatcher` is a task (``nursery.start(watcher.run)``) that owns the newest listing
of each server (:class:`SkillsView`, an immutable snapshot replaced whole). Its mailbox takes
two messages: a server's skills may have changed (from its bus reader), and a listing was
made (from the host's ``rt.list_skills``, or from the watcher's own re-listers). Each listing
carries a ticket taken when its request started; a listing older than the one held is dropped,
so a slow listing never overwrites a newer one. A server whose skills were never listed is
not listed because of a change (nothing is fetched unless the host uses skills); one that was
is listed again by its re-lister task, once the changes have been quiet for
``list_changed_debounce`` seconds, as the tools are. A re-listing that fails is logged, and the
listing held stays. Each new listing whose entries differ is published as
:class:`SkillsChanged`; the agent surface reads the snapshot at its next use and revokes
every approval whose ``{uri, digest}`` set changed.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Final, TypeAlias

import attrs
import trio

from ...protocol._errors import McpCatalogError
from ._events import (
    EventBus,
    EventSubscription,
    ListChanged,
    ServerState,
    ServerStateChanged,
    SkillsChanged,
)

if TYPE_CHECKING:
    from ._skills import SkillListing

__all__ = ["SkillWatcher", "SkillsView"]

#: Messages waiting for the watcher; the host's listings wait for room, the bus reader too.
MAILBOX_SIZE: Final = 64
#: Events buffered for the watcher's bus reader (it loses none it keeps up with; when it
#: loses some, every server listed before is listed again).
BUS_BUFFER: Final = 256


@attrs.frozen(kw_only=True)
class SkillsView:
    """The newest listing of each server whose skills were listed (``listings``), and a
    ``version`` that increases with every new listing held."""

    version: int = 0
    listings: Mapping[str, SkillListing] = attrs.field(factory=lambda: MappingProxyType({}))


@attrs.frozen(kw_only=True)
class _MayHaveChanged:
    """The skills of ``server`` (None: of every server, events were lost) may have changed."""

    server: str | None


@attrs.frozen(kw_only=True)
class _Listed:
    server: str
    listing: SkillListing


_Message: TypeAlias = _MayHaveChanged | _Listed


def _files(listing: SkillListing) -> dict[str, object]:
    """What an approval is bound to, per skill URI: its ``{uri, digest}`` set (a dynamic
    skill: its whole entry, which is all there is to compare)."""
    return {skill.uri: skill.entry if skill.dynamic else skill.digests for skill in listing.skills}


@attrs.define(eq=False)
class SkillWatcher:
    """Built by the runtime's :class:`~trio_mcp.actors.runtime._skills.Skills`; started in the
    runtime's nursery."""

    events: EventBus
    #: The servers whose configuration turns skills on (only those are listened for).
    servers: tuple[str, ...]
    debounce: float
    #: Lists a server's skills and records the listing here (``Skills.list_skills``).
    relist: Callable[[str], Awaitable[SkillListing]]
    _view: SkillsView = attrs.field(factory=SkillsView, init=False)
    _send: trio.MemorySendChannel[_Message] = attrs.field(init=False)
    _receive: trio.MemoryReceiveChannel[_Message] = attrs.field(init=False)
    _pokes: dict[str, trio.MemorySendChannel[None]] = attrs.field(factory=dict, init=False)
    _changed: trio.Event = attrs.field(factory=trio.Event, init=False)

    def __attrs_post_init__(self) -> None:
        self._send, self._receive = trio.open_memory_channel[_Message](MAILBOX_SIZE)

    @property
    def view(self) -> SkillsView:
        """The newest snapshot."""
        return self._view

    async def wait_changed(self, after: int) -> int:
        """Wait until the snapshot's version passes ``after``; returns the new version."""
        while self._view.version <= after:
            await self._changed.wait()
        return self._view.version

    async def record(self, server: str, listing: SkillListing) -> None:
        """Hand the watcher a listing of ``server`` (whoever made it). Dropped when the
        watcher has stopped (the runtime is closing)."""
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await self._send.send(_Listed(server=server, listing=listing))

    # ------------------------------------------------------------------ the task

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            with self.events.subscribe(max_buffer=BUS_BUFFER) as subscription:
                nursery.start_soon(self._read_bus, subscription, self._send.clone())
                for server in self.servers:
                    poke, pokes = trio.open_memory_channel[None](1)
                    self._pokes[server] = poke
                    nursery.start_soon(self._relister, server, pokes)
                task_status.started()
                async with self._receive:
                    async for message in self._receive:
                        self._apply(message)

    def _apply(self, message: _Message) -> None:
        """One message, synchronously: a change pokes the re-lister of each server that was
        listed before; a listing newer than the one held replaces it."""
        match message:
            case _MayHaveChanged(server=server):
                for name in self._view.listings if server is None else (server,):
                    poke = self._pokes.get(name)
                    if poke is not None and name in self._view.listings:
                        with contextlib.suppress(trio.WouldBlock):  # one is pending already
                            poke.send_nowait(None)
            case _Listed(server=server, listing=listing):
                held = self._view.listings.get(server)
                if held is not None and held.ticket >= listing.ticket:
                    return
                listings = dict(self._view.listings)
                listings[server] = listing
                self._view = SkillsView(
                    version=self._view.version + 1, listings=MappingProxyType(listings)
                )
                self._changed.set()
                self._changed = trio.Event()
                before = {} if held is None else _files(held)
                after = _files(listing)
                changed = sorted(
                    uri for uri in before.keys() | after.keys() if before.get(uri) != after.get(uri)
                )
                if held is not None and changed:
                    self.events.publish(SkillsChanged(server=server, uris=tuple(changed)))

    async def _read_bus(
        self, subscription: EventSubscription, send: trio.MemorySendChannel[_Message]
    ) -> None:
        lost = 0
        async with send:
            async for event in subscription:
                if subscription.dropped > lost:
                    lost = subscription.dropped
                    await send.send(_MayHaveChanged(server=None))
                match event:
                    case ListChanged(server=server, kind="resources"):
                        await send.send(_MayHaveChanged(server=server))
                    case ServerStateChanged(server=server, new=ServerState.READY, old=old) if (
                        old is not ServerState.READY
                    ):
                        await send.send(_MayHaveChanged(server=server))

    async def _relister(self, server: str, pokes: trio.MemoryReceiveChannel[None]) -> None:
        """List ``server``'s skills again once the changes have been quiet for ``debounce``
        seconds (each new change starts the quiet time again)."""
        log = logging.getLogger(f"trio_mcp.server.{server}")
        async for _ in pokes:
            quiet = False
            while not quiet:
                with trio.move_on_after(self.debounce) as wait:
                    await pokes.receive()
                quiet = wait.cancelled_caught
            try:
                await self.relist(server)
            except McpCatalogError as exc:
                log.warning("listing the skills again failed: %s", exc)
