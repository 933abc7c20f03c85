"""Subscriptions: the server's change notifications, in both eras.

Two things live here:

- :class:`ResourceSubscriptions`: the resource URIs the host wants updates for, on one server
  (``rt.subscribe_resource`` / ``rt.unsubscribe_resource``). It outlives connections: each
  session of the server reads it, and waits for it to change. The host's call replaces its
  immutable set and wakes the sessions, synchronously; nothing else writes it.
- :class:`Subscriber`: a session's task (``Subscriber.run``, in the session's nursery) that
  owns what the session receives without asking for it each time.

  In a **2026-07-28** session it owns the ``subscriptions/listen`` request. The listen asks
  for what the server's ``server/discover`` capabilities offer (``toolsListChanged``,
  ``promptsListChanged``, ``resourcesListChanged`` for each ``listChanged``;
  ``resourceSubscriptions``, the host's URIs, when ``resources.subscribe``), and is opened
  before the first tool listing, so that no change falls between the listing and the
  subscription. The table hands it what names the listen (:class:`Subscription`): the
  server's ``notifications/subscriptions/acknowledged`` (compared with what was asked; what
  the server did not honour is logged as a warning), then the notifications, which it
  forwards to the session's dispatcher: a tool list change feeds the same debounced
  re-listing and atomic replace as in the handshake revisions, a resource update or another
  list change becomes the same host event. A notification of a kind it did not ask for (or
  of a resource it did not subscribe to) is dropped.

  The listen is not a call: no timeout, no entry among the calls waiting. When the host's
  resource set changes, a new listen is opened with the new set and the old one is closed
  right after it (make before break). When the server ends the listen (its answer, or its
  ``notifications/cancelled`` naming the listen), or the transport loses its stream (an HTTP
  stream that broke), it is opened again after a back-off (:data:`LISTEN_RETRY_INITIAL`
  seconds, doubling up to :data:`LISTEN_RETRY_MAX`; back to the start after a listen that
  lasted that long), and once the server acknowledges it again, what may have changed
  meanwhile counts as changed: the dispatcher is handed a notification for each kind it
  honours, as if the server had sent it (the tools are listed again; the host gets
  ``ListChanged`` and ``ResourceUpdated``). A server that answers the
  listen with -32601 (it does not serve it) is not asked again on that connection. Closing a
  listen is ``notifications/cancelled`` naming it: on stdio the server reads it; over HTTP
  the transport closes the listen's stream instead (which is how 2026-07-28 cancels). A new
  connection (a restarted stdio server, say) has a new session, which opens its own listen.

  In a **legacy** session it exists only when the server offers ``resources.subscribe``: it
  sends ``resources/subscribe`` for each URI the host added and ``resources/unsubscribe``
  for each it removed, and subscribes again after a new HTTP session (the server forgot).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

import attrs
import trio

from ...protocol._errors import (
    InvalidMessage,
    McpError,
    MethodNotFound,
    ServerDisconnected,
    UnsupportedProtocolVersion,
)
from ...protocol._jsonrpc import Notification
from ...protocol._methods import decode_notification
from ...protocol._types import ServerCapabilities, SubscriptionFilter
from ...protocol._versions import Era
from ._pending import ListenEnded, Subscription

if TYPE_CHECKING:
    from ._session import Session

__all__ = [
    "LISTEN_RETRY_INITIAL",
    "LISTEN_RETRY_MAX",
    "ResourceSubscriptions",
    "Subscriber",
    "listen_filter",
    "subscribes",
    "unhonoured",
]

#: Seconds before a listen the server ended (or whose stream was lost) is opened again, the
#: first time; each time again in a row doubles it, up to :data:`LISTEN_RETRY_MAX`. A listen
#: that stayed open that long starts the count again.
LISTEN_RETRY_INITIAL: Final = 1.0
LISTEN_RETRY_MAX: Final = 30.0

LISTEN: Final = "subscriptions/listen"
ACKNOWLEDGED: Final = "notifications/subscriptions/acknowledged"
_RESOURCES: Final = "resourceSubscriptions"
#: The flags of a listen's ``notifications`` filter, their field in ``SubscriptionFilter``, and
#: the notification each one asks for.
_FLAGS: Final = (
    ("toolsListChanged", "tools_list_changed", "notifications/tools/list_changed"),
    ("promptsListChanged", "prompts_list_changed", "notifications/prompts/list_changed"),
    ("resourcesListChanged", "resources_list_changed", "notifications/resources/list_changed"),
)
#: Which filter key a forwarded notification needs.
_ASKED_BY: Final = {
    **{method: key for key, _, method in _FLAGS},
    "notifications/resources/updated": _RESOURCES,
}


# --------------------------------------------------------------------------- the host's URIs


@attrs.define(eq=False)
class ResourceSubscriptions:
    """The resource URIs the host wants updates for, on one server, across its connections.

    Its writer is the host's ``rt.subscribe_resource`` / ``rt.unsubscribe_resource``, which
    replace the immutable :attr:`uris` synchronously and wake the readers; readers (each
    session's subscriber) read :attr:`uris` and :attr:`version` and wait for a newer version
    with :meth:`wait_changed`."""

    _uris: frozenset[str] = attrs.field(default=frozenset(), init=False)
    _version: int = attrs.field(default=0, init=False)
    _changed: trio.Event = attrs.field(factory=trio.Event, init=False)

    @property
    def uris(self) -> frozenset[str]:
        return self._uris

    @property
    def version(self) -> int:
        """Increases on every change of :attr:`uris`."""
        return self._version

    def add(self, uri: str) -> bool:
        """Want updates of ``uri``; whether that changed anything."""
        return self._replace(self._uris | {uri})

    def discard(self, uri: str) -> bool:
        """Want no more updates of ``uri``; whether that changed anything."""
        return self._replace(self._uris - {uri})

    def _replace(self, uris: frozenset[str]) -> bool:
        if uris == self._uris:
            return False
        self._uris = uris
        self._version += 1
        self._changed.set()
        self._changed = trio.Event()
        return True

    async def wait_changed(self, after: int) -> None:
        """Wait until :attr:`version` passes ``after`` (a checkpoint even when it has)."""
        while self._version <= after:
            await self._changed.wait()
        await trio.lowlevel.checkpoint()


# --------------------------------------------------------------------------- pure helpers


def subscribes(capabilities: ServerCapabilities) -> bool:
    """Whether the server offers resource subscriptions (``resources.subscribe``)."""
    resources = capabilities.resources
    return resources is not None and resources.subscribe is True


def listen_filter(capabilities: ServerCapabilities, uris: frozenset[str]) -> dict[str, Any] | None:
    """The ``notifications`` filter of a listen: each list change the server's capabilities
    announce, and ``uris`` when it offers resource subscriptions. None: nothing to ask for
    (no listen)."""
    asked: dict[str, Any] = {}
    if capabilities.tools is not None and capabilities.tools.list_changed is True:
        asked["toolsListChanged"] = True
    if capabilities.prompts is not None and capabilities.prompts.list_changed is True:
        asked["promptsListChanged"] = True
    if capabilities.resources is not None and capabilities.resources.list_changed is True:
        asked["resourcesListChanged"] = True
    if uris and subscribes(capabilities):
        asked[_RESOURCES] = sorted(uris)
    return asked or None


def unhonoured(asked: Mapping[str, Any], acknowledged: SubscriptionFilter) -> list[str]:
    """What ``asked`` holds that the server's acknowledgement leaves out: filter keys, and
    ``resourceSubscriptions <uri>`` for each resource."""
    missing = [
        key for key, field, _ in _FLAGS if key in asked and getattr(acknowledged, field) is not True
    ]
    honoured = set(acknowledged.resource_subscriptions or ())
    missing.extend(
        f"{_RESOURCES} {uri}" for uri in asked.get(_RESOURCES, ()) if uri not in honoured
    )
    return missing


def _honoured(asked: Mapping[str, Any], acknowledged: SubscriptionFilter | None) -> dict[str, Any]:
    """The part of ``asked`` the server acknowledged (all of it, without a valid
    acknowledgement)."""
    if acknowledged is None:
        return dict(asked)
    missing = set(unhonoured(asked, acknowledged))
    honoured = {key: value for key, value in asked.items() if key not in missing}
    if _RESOURCES in asked:
        uris = [uri for uri in asked[_RESOURCES] if f"{_RESOURCES} {uri}" not in missing]
        if uris:
            honoured[_RESOURCES] = uris
        else:
            honoured.pop(_RESOURCES, None)
    return honoured


def _wanted(notification: Notification, asked: Mapping[str, Any]) -> bool:
    """Whether a notification on a listen is of a kind (and a resource) the listen asked for."""
    key = _ASKED_BY.get(notification.method)
    if key is None or key not in asked:
        return False
    if key != _RESOURCES:
        return True
    uri = (notification.params or {}).get("uri")
    return isinstance(uri, str) and uri in asked[_RESOURCES]


# --------------------------------------------------------------------------- the task


@attrs.define(eq=False)
class _Open:
    """The listen open now: its subscription, what it asked for, and since when it was
    acknowledged (None: not yet)."""

    subscription: Subscription
    asked: Mapping[str, Any]
    acknowledged_at: float | None = None


@attrs.define(eq=False)
class Subscriber:
    """A session's subscription task. Build it, then ``nursery.start_soon(subscriber.run)``
    once the session knows its era and the server's capabilities (see the module
    docstring)."""

    session: Session
    interest: ResourceSubscriptions
    #: The listen open now (2026-07-28).
    _open: _Open | None = attrs.field(default=None, init=False)
    #: While the task waits for the listen or a back-off (2026-07-28), or for the host's
    #: URIs (legacy): cancelled when the host's URIs change, or (legacy) after a new HTTP
    #: session, so that the task acts at once.
    _waiting: trio.CancelScope | None = attrs.field(default=None, init=False)
    #: The URIs the server has been asked to keep us subscribed to (legacy).
    _applied: set[str] = attrs.field(factory=set, init=False)
    #: A new HTTP session forgot the subscriptions (legacy): subscribe to every URI again.
    _renewed: bool = attrs.field(default=False, init=False)
    #: A listen ended (2026-07-28): once the next one is acknowledged, fetch again what may
    #: have changed while none was open.
    _refetch: bool = attrs.field(default=False, init=False)

    @property
    def _capabilities(self) -> ServerCapabilities:
        info = self.session.info
        assert info is not None, "the subscriber starts once the era is known"
        return info.capabilities

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve the session's subscriptions until the connection ends (or the session is
        cancelled). Started (``nursery.start``) once the first listen went out (2026-07-28),
        so that the session's first listing follows it on the wire; at once in a legacy
        session."""
        async with trio.open_nursery() as nursery:
            if subscribes(self._capabilities):
                nursery.start_soon(self._watch_interest)
            if self.session.info is not None and self.session.info.era is Era.MODERN:
                await self._listen_loop(task_status)
            else:
                task_status.started()
                await self._subscribe_loop()
            nursery.cancel_scope.cancel()

    async def _watch_interest(self) -> None:
        """Wake the task when the host's URIs change."""
        seen = self.interest.version
        while True:
            await self.interest.wait_changed(seen)
            seen = self.interest.version
            if self._waiting is not None:
                self._waiting.cancel()

    def renewed(self) -> None:
        """A new HTTP session (legacy) forgot every subscription: subscribe again."""
        self._renewed = True
        if self._waiting is not None:
            self._waiting.cancel()

    async def _wait(self, seconds: float, version: int) -> None:
        """Wait ``seconds`` (inf: until woken), or less when the host's URIs change (or
        changed since ``version``) or a new HTTP session begins."""
        scope = self._waiting = trio.CancelScope(deadline=trio.current_time() + seconds)
        if self.interest.version != version or self._renewed:
            scope.cancel()
        try:
            with scope:
                await trio.sleep_forever()
        finally:
            self._waiting = None

    # ------------------------------------------------------------------ 2026-07-28

    async def _listen_loop(self, task_status: trio.TaskStatus[None]) -> None:
        delay = LISTEN_RETRY_INITIAL
        renegotiated = False
        started = False
        try:
            while True:
                version = self.interest.version
                asked = listen_filter(self._capabilities, self.interest.uris)
                if asked is None:  # nothing to ask for (no URIs, or the host removed them)
                    await self._close_open()
                    if not started:
                        started = True
                        task_status.started()
                    await self._wait(float("inf"), version)
                    continue
                try:
                    subscription = await self.session._open_listen(asked)
                except ServerDisconnected:
                    return  # the connection ended: the table is tearing the session down
                finally:
                    if not started:
                        started = True
                        task_status.started()
                previous, current = self._open, _Open(subscription=subscription, asked=asked)
                self._open = current
                if previous is not None:  # make before break: the new one went out first
                    await self.session._close_listen(previous.subscription.request_id)
                ended = await self._follow(current, version)
                if ended is None:  # the host's URIs changed: open a new listen at once
                    continue
                self._open = None
                if self.session.closed:
                    return
                error = ended.error
                if isinstance(error, UnsupportedProtocolVersion) and not renegotiated:
                    renegotiated = True
                    try:
                        await self.session._renegotiate(error)
                    except UnsupportedProtocolVersion as exc:
                        self._log_warning("subscriptions/listen: %s; not listening", exc)
                        return
                    continue
                if isinstance(error, MethodNotFound):
                    self._log_warning(
                        "the server does not serve subscriptions/listen (%s), although its "
                        "capabilities announce changes: its tool, prompt and resource changes "
                        "are not seen on this connection (rt.reconnect() lists them again)",
                        error,
                    )
                    return
                renegotiated = False
                lasted = (
                    trio.current_time() - current.acknowledged_at
                    if current.acknowledged_at is not None
                    else 0.0
                )
                if lasted >= LISTEN_RETRY_MAX:
                    delay = LISTEN_RETRY_INITIAL
                self._refetch = True
                self._log_end(ended, delay)
                await self._wait(delay, version)
                delay = min(delay * 2, LISTEN_RETRY_MAX)
        finally:
            if self._open is not None:  # cancelled (the session ends): tell the server
                self.session._forget_listen(self._open.subscription.request_id)
                self._open = None

    async def _close_open(self) -> None:
        current, self._open = self._open, None
        if current is not None:
            await self.session._close_listen(current.subscription.request_id)

    async def _follow(self, current: _Open, version: int) -> ListenEnded | None:
        """Take what the listen receives until it ends (its end), or until the host's URIs
        change (None: the listen stays open, for the caller to replace)."""
        scope = self._waiting = trio.CancelScope()
        if self.interest.version != version:
            scope.cancel()
        try:
            with scope:
                while True:
                    item = await current.subscription.next()
                    if isinstance(item, ListenEnded):
                        return item
                    self._received(current, item)
        finally:
            self._waiting = None
        return None

    def _received(self, current: _Open, notification: Notification) -> None:
        if notification.method == ACKNOWLEDGED:
            if current.acknowledged_at is None:
                current.acknowledged_at = trio.current_time()
                self._acknowledged(current, notification)
            return
        if not _wanted(notification, current.asked):
            self.session._log.debug(
                "%s on subscription %r, which did not ask for it: ignored",
                notification.method,
                current.subscription.request_id,
            )
            return
        self.session._forward(notification)

    def _acknowledged(self, current: _Open, notification: Notification) -> None:
        """Compare the acknowledgement with what was asked; after a listen that ended,
        refetch what the server honours (changes while no listen was open were not sent)."""
        acknowledged: SubscriptionFilter | None = None
        try:
            decoded = decode_notification(ACKNOWLEDGED, notification.params)
            acknowledged = decoded.notifications
        except InvalidMessage as exc:
            self._log_warning(
                "invalid %s: %s (taken as honouring everything asked)", ACKNOWLEDGED, exc
            )
        if acknowledged is not None:
            missing = unhonoured(current.asked, acknowledged)
            if missing:
                self._log_warning(
                    "the server did not honour part of subscriptions/listen: %s; those "
                    "changes are not seen on this connection",
                    ", ".join(missing),
                )
        if self._refetch:
            self._refetch = False
            self._fetch_again(_honoured(current.asked, acknowledged))

    def _fetch_again(self, honoured: Mapping[str, Any]) -> None:
        """Treat everything the listen honours as changed: hand the dispatcher the
        notifications the server would have sent (one path for what the server says and what
        the session infers: the re-lister lists the tools again, the host gets its events)."""
        for key, _, method in _FLAGS:
            if key in honoured:
                self.session._forward(Notification(method=method))
        for uri in honoured.get(_RESOURCES, ()):
            self.session._forward(
                Notification(method="notifications/resources/updated", params={"uri": uri})
            )

    def _log_end(self, ended: ListenEnded, delay: float) -> None:
        error = ended.error
        if isinstance(error, ServerDisconnected):  # its stream broke (HTTP)
            self._log_warning(
                "the stream of subscriptions/listen was lost; opening it again in %g s (%s)",
                delay,
                error,
            )
            return
        if error is not None:
            self._log_warning(
                "subscriptions/listen ended: %s; opening it again in %g s", error, delay
            )
            return
        how = "cancelled it" if ended.cancelled else "ended it"
        self.session._log.info(
            "the server %s (subscriptions/listen); opening it again in %g s", how, delay
        )

    def _log_warning(self, message: str, *args: Any) -> None:
        self.session._log.warning(message, *args)

    # ------------------------------------------------------------------ legacy

    async def _subscribe_loop(self) -> None:
        """``resources/subscribe`` and ``resources/unsubscribe`` as the host's URIs change,
        until the connection ends."""
        with contextlib.suppress(ServerDisconnected):
            await self._keep_subscribed()

    async def _keep_subscribed(self) -> None:
        while True:
            version = self.interest.version
            if self._renewed:
                self._renewed = False
                self._applied.clear()
            wanted = self.interest.uris
            for uri in sorted(wanted - self._applied):
                if await self._ask("resources/subscribe", uri):
                    self._applied.add(uri)
            for uri in sorted(self._applied - wanted):
                self._applied.discard(uri)
                await self._ask("resources/unsubscribe", uri)
            await self._wait(float("inf"), version)

    async def _ask(self, method: str, uri: str) -> bool:
        """One subscribe or unsubscribe; whether the server took it (a failure is logged)."""
        session = self.session
        try:
            await session.request(method, {"uri": uri}, timeout=session.config.timeout)
        except ServerDisconnected:
            raise  # the connection ended: the subscriptions end with it
        except McpError as exc:
            self._log_warning("%s %s failed: %s", method, uri, exc)
            return False
        return True
