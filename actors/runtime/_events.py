"""What the runtime tells the host: server states, tool-set changes, server log lines.

Events are frozen attrs classes, named in the past tense. The :class:`EventBus` fans them out to
every subscriber through a bounded channel of its own; a subscriber that does not keep up loses
events (counted in its ``dropped``), and never slows the runtime down.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from typing import Any, TypeAlias

import attrs
import trio

from ._registry import ToolRefusal, ToolsChanged

__all__ = [
    "Event",
    "EventBus",
    "EventSubscription",
    "ListChanged",
    "ResourceUpdated",
    "ServerLogged",
    "ServerState",
    "ServerStateChanged",
    "SkillSkipped",
    "SkillsChanged",
    "ToolRefusal",
    "ToolsChanged",
]


class ServerState(StrEnum):
    """Where a server's supervisor is.

    ``DISABLED → CONNECTING → READY ⇄ RECONNECTING → PARKED``, plus ``NEEDS_AUTH``, ``FAILED``,
    and ``STOPPING → STOPPED`` when the runtime closes (or the server is stopped).
    """

    DISABLED = "disabled"
    CONNECTING = "connecting"
    READY = "ready"
    RECONNECTING = "reconnecting"
    PARKED = "parked"
    NEEDS_AUTH = "needs_auth"
    FAILED = "failed"
    STOPPING = "stopping"
    STOPPED = "stopped"


@attrs.frozen(kw_only=True)
class ServerStateChanged:
    """A server moved from one state to another. ``reason`` says why (the error, for failures);
    ``next_attempt_at`` (trio clock) says when the next connection attempt is due."""

    server: str
    old: ServerState
    new: ServerState
    generation: int
    reason: str | None = None
    next_attempt_at: float | None = None
    #: The exact command that fixes the new state (NEEDS_AUTH: ``trio-mcp login NAME``).
    hint: str | None = None


@attrs.frozen(kw_only=True)
class ServerLogged:
    """A server sent a log message (``notifications/message``) or wrote a line to stderr."""

    server: str
    level: str
    data: Any
    logger: str | None = None
    stderr: bool = False


@attrs.frozen(kw_only=True)
class ListChanged:
    """A server said that its list of ``kind`` (``"resources"`` or ``"prompts"``) changed; list
    them again to see it (tool lists are re-listed by the runtime: see :class:`ToolsChanged`)."""

    server: str
    kind: str


@attrs.frozen(kw_only=True)
class ResourceUpdated:
    """A subscribed resource changed on the server."""

    server: str
    uri: str


@attrs.frozen(kw_only=True)
class SkillSkipped:
    """A skill entry of the server (``skills/list`` or ``skills/get``) broke a rule of the
    skills extension and is not used; the server's other skills are. ``reason`` says why."""

    server: str
    uri: str
    reason: str


@attrs.frozen(kw_only=True)
class SkillsChanged:
    """The server's skills were listed again (after it said its resources changed, or after
    a reconnect) and the entries of ``uris`` changed: added, removed, or another ``{uri,
    digest}`` set. The agent surface revokes the approvals of changed skills at its next
    use."""

    server: str
    uris: tuple[str, ...]


@attrs.frozen(kw_only=True)
class TaskStatusChanged:
    """A server said that one of its tasks changed status (2025-11-25
    ``notifications/tasks/status``, or the tasks extension's ``notifications/tasks``). Polling
    does not depend on it; a task followed by the runtime is polled at once when it arrives."""

    server: str
    task_id: str
    status: str
    status_message: str | None = None


Event: TypeAlias = (
    ServerStateChanged
    | ToolsChanged
    | ServerLogged
    | ResourceUpdated
    | ListChanged
    | SkillSkipped
    | SkillsChanged
    | TaskStatusChanged
)


@attrs.define(eq=False)
class EventSubscription:
    """One subscriber's view of the event stream: iterate it with ``async for``."""

    _receive: trio.MemoryReceiveChannel[Event]
    dropped: int = 0

    def __aiter__(self) -> EventSubscription:
        return self

    async def __anext__(self) -> Event:
        try:
            return await self._receive.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            raise StopAsyncIteration from None

    def receive_nowait(self) -> Event:
        """The next buffered event; raises ``trio.WouldBlock`` when there is none."""
        return self._receive.receive_nowait()


@attrs.define(eq=False)
class EventBus:
    """Fan-out of runtime events to bounded subscriber channels."""

    _subscribers: dict[EventSubscription, trio.MemorySendChannel[Event]] = attrs.field(
        factory=dict, init=False
    )
    _closed: bool = attrs.field(default=False, init=False)

    @contextmanager
    def subscribe(self, *, max_buffer: int = 1024) -> Iterator[EventSubscription]:
        """Subscribe for the duration of a ``with`` block."""
        if max_buffer <= 0 or max_buffer == math.inf:
            raise ValueError("max_buffer must be a positive, finite number")
        send, receive = trio.open_memory_channel[Event](max_buffer)
        subscription = EventSubscription(receive)
        if self._closed:
            send.close()
        else:
            self._subscribers[subscription] = send
        try:
            yield subscription
        finally:
            self._subscribers.pop(subscription, None)
            send.close()
            receive.close()

    def publish(self, event: Event) -> None:
        """Deliver ``event`` to every subscriber that has room. Never blocks."""
        for subscription, send in list(self._subscribers.items()):
            try:
                send.send_nowait(event)
            except trio.WouldBlock:
                subscription.dropped += 1
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._subscribers.pop(subscription, None)

    def close(self) -> None:
        """End every subscription (their ``async for`` loops finish)."""
        self._closed = True
        for send in self._subscribers.values():
            send.close()
        self._subscribers.clear()
