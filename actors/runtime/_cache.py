"""The result cache of a 2026-07-28 server: ``ttlMs`` and ``cacheScope``.

A 2026-07-28 server may say how long a result stays valid (``server/utilities/caching``):
``server/discover``, ``tools/list``, ``prompts/list``, ``resources/list``,
``resources/templates/list`` and ``resources/read`` results carry ``ttlMs`` (milliseconds) and
``cacheScope`` (``"public"`` or ``"private"``). What this module decides:

- **Fresh**: a result is fresh while ``now < received + ttlMs`` (trio's clock, ``received``
  being when its answer was taken); ``ttlMs`` 0, negative, absent or not an integer means
  stale at once (the result is not kept). A ``ttlMs`` past :data:`MAX_TTL` (a day) counts as a
  day: a server cannot pin a result for longer than that without being asked again.
- **What is kept**: complete results only, of the requests above, made without
  ``inputResponses`` or ``requestState``. An ``input_required`` answer, and the answer to a
  retry that carries what the host answered, are never kept (the specification forbids it;
  :func:`cache_key` refuses such params, and the session keeps only an answer its first round
  gave).
- **Key**: the method, the protocol revision and what else in the params changes the result:
  the ``cursor`` of a listing page (each page is an entry of its own; no cursor and the empty
  cursor are two pages) and the ``uri`` of a read. Params with anything else (but ``_meta``)
  are not cached at all.
- **Scope**: a ``private`` entry (or one whose ``cacheScope`` is absent or unknown: the safe
  reading) belongs to one **authorization context** and is never served to another; a
  ``public`` entry is shared by every context of the same server. The context of a configured
  server is a hash of the credentials in its configuration (:func:`authorization_context`:
  ``Authorization`` and every header whose name looks secret to the redaction rules).
  A request made for a tenant (one runtime serving many users, each call with its own
  token: :mod:`._tenants`) is kept under the tenant's context
  (:func:`~trio_mcp.actors.runtime._tenants.tenant_context`): a lease takes the context of each
  operation as an argument, and the configured one is only its default.
- **Invalidation**: ``notifications/tools/list_changed`` drops every ``tools/list`` page,
  ``prompts/list_changed`` every ``prompts/list`` page, ``resources/list_changed`` every
  ``resources/list`` and ``resources/templates/list`` page, ``resources/updated`` the reads of
  its URI, whatever their context. A request that was in flight when its entries were dropped
  does not store its answer (the answer may predate the change): each drop moves the method's
  epoch on, and a result is kept only when the epoch it was asked under is still current.
- **Bounds**: an entry of more than :data:`MAX_ENTRY_SIZE` (the size estimate of the
  registration checks: characters of text plus one per node) is not kept; past
  :data:`MAX_CACHE_SIZE` or :data:`MAX_ENTRIES` per server the entries used longest ago go.

**Where it lives.** A :class:`ResultCache` per server belongs to the server's supervisor and
lives as long as it does, so what a connection learned serves the next one (a reconnect to a
server whose ``server/discover`` and every ``tools/list`` page are fresh sends neither). The
supervisor lends it to each connection generation (:meth:`ResultCache.lend`: a
:class:`CacheLease` for that generation, handed to the new session) and takes it back when the
connection ends (:meth:`ResultCache.reclaim`). Only the lease of the generation that holds the
cache reads or writes it: the session's tasks and its callers use it synchronously (no await
inside an operation), and a caller of a dead connection that comes late changes nothing. The
supervisor's own state is not touched by anyone else, and no actor calls into another's.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Final

import attrs
import trio

from ...protocol._methods import CACHEABLE_METHODS
from ..config._config import ServerConfig
from ..config._redact import looks_secret
from ._toolcheck import json_size

__all__ = [
    "CACHEABLE_METHODS",
    "MAX_CACHE_SIZE",
    "MAX_ENTRIES",
    "MAX_ENTRY_SIZE",
    "MAX_TTL",
    "CacheKey",
    "CacheLease",
    "ResultCache",
    "authorization_context",
    "cache_key",
    "lifetime",
]

#: The requests whose complete results may be cached (2026-07-28 ``CacheableResult``).
#: The listings a ``notifications/<kind>/list_changed`` makes stale.
LISTINGS_OF: Final[Mapping[str, tuple[str, ...]]] = {
    "tools": ("tools/list",),
    "prompts": ("prompts/list",),
    "resources": ("resources/list", "resources/templates/list"),
}
_LIST_CHANGED: Final = {
    "notifications/tools/list_changed": "tools",
    "notifications/prompts/list_changed": "prompts",
    "notifications/resources/list_changed": "resources",
}
_LISTINGS: Final = frozenset(method for methods in LISTINGS_OF.values() for method in methods)
#: The longest a result is kept, whatever its ``ttlMs`` says (seconds).
MAX_TTL: Final = 24 * 60 * 60.0
#: The size estimate (:func:`~trio_mcp.actors.runtime._toolcheck.json_size`) past which a
#: result is not kept, and the total one server's entries may reach.
MAX_ENTRY_SIZE: Final = 1024 * 1024
MAX_CACHE_SIZE: Final = 8 * 1024 * 1024
#: Entries one server's cache holds at most.
MAX_ENTRIES: Final = 1024


@attrs.frozen
class CacheKey:
    """What a cached result answers: the method, the protocol revision it was asked in, and
    the cursor of a listing page or the URI of a read (``argument``; None for the first page
    and for ``server/discover``)."""

    method: str
    version: str
    argument: str | None = None


def cache_key(method: str, version: str, params: Mapping[str, Any] | None) -> CacheKey | None:
    """The key of a request whose result may be cached; None when it may not: another method,
    or params holding anything but ``_meta`` and the cursor of a listing (a string) or the URI
    of a read (``inputResponses`` or ``requestState``, say: the answer to a retry with them is
    never cached)."""
    if method not in CACHEABLE_METHODS:
        return None
    given = {name: value for name, value in (params or {}).items() if name != "_meta"}
    if method == "server/discover":
        return CacheKey(method, version) if not given else None
    if method == "resources/read":
        uri = given.get("uri")
        if len(given) != 1 or not isinstance(uri, str):
            return None
        return CacheKey(method, version, uri)
    cursor = given.get("cursor")
    if set(given) - {"cursor"} or not (cursor is None or isinstance(cursor, str)):
        return None
    return CacheKey(method, version, cursor)


def lifetime(raw: Mapping[str, Any]) -> tuple[float, bool] | None:
    """How long a result stays fresh (seconds, at most :data:`MAX_TTL`) and whether it is
    ``public``; None when it is stale at once: not a complete result, or its ``ttlMs`` is
    absent, not an integer, zero or negative. A ``cacheScope`` other than ``"public"`` (absent,
    unknown) is read as ``"private"``."""
    if raw.get("resultType", "complete") != "complete":
        return None
    ttl = raw.get("ttlMs")
    if isinstance(ttl, bool) or not isinstance(ttl, int) or ttl <= 0:
        return None
    return min(ttl / 1000, MAX_TTL), raw.get("cacheScope") == "public"


def authorization_context(config: ServerConfig) -> str:
    """The authorization context of a configured server: a SHA-256 over the credentials its
    configuration sends (``Authorization`` and every header whose name looks secret to
    :func:`~trio_mcp.actors.config._redact.looks_secret`, names compared without case), so
    that two configurations with different credentials never share a private entry. A server
    without such headers (stdio, say) has the context of no credentials."""
    credentials = sorted(
        (name.lower(), value)
        for name, value in config.headers.items()
        if name.lower() == "authorization" or looks_secret(name)
    )
    text = json.dumps(credentials, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@attrs.frozen(kw_only=True)
class _Entry:
    raw: Mapping[str, Any]
    expires_at: float
    size: int


#: Where an entry is kept: its authorization context (None: public) and its key.
_Slot = tuple[str | None, CacheKey]


@attrs.define(eq=False)
class ResultCache:
    """One server's cached results (see the module docstring). Owned by the server's
    supervisor, lent to one connection generation at a time."""

    server: str
    #: The authorization context of the server's configuration: the default of every lease.
    context: str
    _entries: OrderedDict[_Slot, _Entry] = attrs.field(factory=OrderedDict, init=False)
    _size: int = attrs.field(default=0, init=False)
    #: Per method: moved on by every drop (see :meth:`CacheLease.epoch`).
    _epochs: dict[str, int] = attrs.field(factory=dict, init=False)
    #: The generation whose lease may use the cache (None: none).
    _holder: int | None = attrs.field(default=None, init=False)

    def lend(self, generation: int) -> CacheLease:
        """The lease of ``generation``, the only one that works from now on (the supervisor,
        when it starts the connection attempt of that generation)."""
        self._holder = generation
        return CacheLease(cache=self, generation=generation)

    def reclaim(self, generation: int) -> None:
        """Take the cache back from ``generation`` (the supervisor, when that connection ends):
        its lease reads and writes nothing any more. A no-op for a generation that does not
        hold it."""
        if self._holder == generation:
            self._holder = None

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def size(self) -> int:
        """The size estimate of every entry kept."""
        return self._size

    # ------------------------------------------------------------------ for the lease

    def _fresh(self, key: CacheKey, context: str, now: float) -> Mapping[str, Any] | None:
        for slot in ((context, key), (None, key)):
            entry = self._entries.get(slot)
            if entry is None:
                continue
            if now < entry.expires_at:
                self._entries.move_to_end(slot)
                return entry.raw
            self._remove(slot)
        return None

    def _store(self, key: CacheKey, raw: Mapping[str, Any], context: str, now: float) -> bool:
        # A newer answer replaces what was kept for the key in this context and publicly.
        self._remove((context, key))
        self._remove((None, key))
        fresh = lifetime(raw)
        if fresh is None:
            return False
        ttl, public = fresh
        size = json_size(raw, limit=MAX_ENTRY_SIZE)
        if size > MAX_ENTRY_SIZE:
            return False
        slot: _Slot = (None if public else context, key)
        self._entries[slot] = _Entry(raw=raw, expires_at=now + ttl, size=size)
        self._size += size
        while self._size > MAX_CACHE_SIZE or len(self._entries) > MAX_ENTRIES:
            self._remove(next(iter(self._entries)))
        return True

    def _remove(self, slot: _Slot) -> None:
        entry = self._entries.pop(slot, None)
        if entry is not None:
            self._size -= entry.size

    def _drop(self, method: str, argument: str | None = None, *, every: bool = True) -> None:
        """Drop the entries of ``method`` (all of them, or those of ``argument``), in every
        context, and move its epoch on."""
        self._epochs[method] = self._epochs.get(method, 0) + 1
        for slot in [
            slot
            for slot in self._entries
            if slot[1].method == method and (every or slot[1].argument == argument)
        ]:
            self._remove(slot)


@attrs.define(eq=False)
class CacheLease:
    """One connection generation's use of its server's :class:`ResultCache`: the session and
    its callers read and write through it, synchronously. Once the supervisor has lent the
    cache to a newer generation or taken it back, every operation is a no-op (reads find
    nothing)."""

    cache: ResultCache
    generation: int

    @property
    def held(self) -> bool:
        """Whether this lease's generation holds the cache."""
        return self.cache._holder == self.generation

    def fresh(self, key: CacheKey, *, context: str | None = None) -> Mapping[str, Any] | None:
        """The fresh result kept for ``key`` in ``context`` (default: the configured one), a
        private one of that context or a public one; None when there is none (an entry that
        has expired is dropped on the way)."""
        if not self.held:
            return None
        context = self.cache.context if context is None else context
        return self.cache._fresh(key, context, trio.current_time())

    def epoch(self, method: str) -> int:
        """The invalidation epoch of ``method``: take it before sending a request and give it
        to :meth:`store`, which keeps nothing when entries of ``method`` were dropped
        meanwhile."""
        return self.cache._epochs.get(method, 0)

    def store(
        self,
        key: CacheKey,
        raw: Mapping[str, Any],
        *,
        epoch: int,
        context: str | None = None,
    ) -> bool:
        """Keep the complete result ``raw`` of a request made without ``inputResponses`` or
        ``requestState`` (the caller's word), received now, when its ``ttlMs`` says it is
        fresh: private under ``context`` (default: the configured one), or public. A result
        that is not fresh still replaces what was kept for ``key``. Returns whether it was
        kept. ``raw`` must not be changed afterwards."""
        if not self.held or epoch != self.epoch(key.method):
            return False
        context = self.cache.context if context is None else context
        return self.cache._store(key, raw, context, trio.current_time())

    def drop_listing(self, method: str) -> None:
        """Drop every page of the listing ``method`` (a cursor the server no longer takes)."""
        if self.held and method in _LISTINGS:
            self.cache._drop(method)

    def changed(self, kind: str) -> None:
        """``notifications/<kind>/list_changed``: drop the listings of ``kind`` (``"tools"``,
        ``"prompts"`` or ``"resources"``; anything else is ignored)."""
        if self.held:
            for method in LISTINGS_OF.get(kind, ()):
                self.cache._drop(method)

    def updated(self, uri: str) -> None:
        """``notifications/resources/updated`` for ``uri``: drop the reads of that URI."""
        if self.held:
            self.cache._drop("resources/read", uri, every=False)

    def on_notification(self, method: str, params: Mapping[str, Any] | None) -> None:
        """Drop what a change notification makes stale (any other notification changes
        nothing): the one entry point for every path a notification takes to the session."""
        kind = _LIST_CHANGED.get(method)
        if kind is not None:
            self.changed(kind)
        elif method == "notifications/resources/updated":
            uri = (params or {}).get("uri")
            if isinstance(uri, str):
                self.updated(uri)
