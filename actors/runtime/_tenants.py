"""Many users on one runtime: a call made for a tenant, with that tenant's own credentials.

A multi-tenant host (one runtime serving many users) says who a call is for with a
:class:`Tenant`: ``rt.call(name, args, tenant=Tenant("alice", headers={"Authorization": "Bearer
..."}))``, or ``tenant="alice"`` for a tenant whose credentials the runtime keeps (OAuth), or
``AgentSurface(rt, tenant=...)`` for every call of a user's surface. What it means, decided here:

- **Headers**: the tenant's ``headers`` go on the HTTP request of that call alone (Streamable
  HTTP: its POST, the POSTs that re-send it, the GETs that resume its answer), after the
  server's configured headers, replacing any of the same name (a tenant's ``Authorization``
  replaces the operator's; an ``X-Api-Key`` of the gateway, configured, goes along). They never
  reach another call, the transport's shared headers, a listing, or a log (a :class:`Tenant`'s
  ``repr`` shows header names only, the HTTP debug log masks their values).
- **OAuth** (a server with ``auth="oauth"``): the tenant's call goes through the tenant's own
  sign-in, not the operator's: one sign-in actor per server and tenant, made on first use,
  keeping its credential in the runtime's token store under ``CredentialKey.tenant`` (at most
  :data:`MAX_TENANT_SIGN_INS` run at once; the one used longest ago is stopped first, its
  credential stays stored). A tenant that is not signed in gets
  :class:`~trio_mcp.protocol.AuthorizationRequired` for that call alone (the server stays
  READY for everyone else); ``rt.login(server, tenant=..., prompt=...)`` signs it in. A tenant
  that gives its own ``Authorization`` header is sent with it as it is: no sign-in is used for
  its calls.
- **A tenant without credentials of its own** (no headers, a server without OAuth) is sent with
  the server's configured headers: the tenant is then only a name, seen by the call hooks and
  keeping its cached results apart.
- **Where headers cannot go**: a server over stdio, WebSocket or the legacy HTTP+SSE transport
  has no headers per request: a call for a tenant with headers (or with OAuth) fails with
  :class:`~trio_mcp.protocol.CredentialsNotCarried`, nothing sent; it is never sent as the
  operator instead.
- **Stateful HTTP sessions** (the handshake revisions): the MCP session was initialized with
  the operator's credentials, and a tenant's call carries its own on its POST within that
  session. A server that binds its session to the user who opened it may refuse such a call
  (it fails alone, with the server's status) or act as the session's user: for those, give
  each tenant a runtime (or a server entry) of its own. A 2026-07-28 server has no session:
  every request stands alone, and per-request credentials are what it expects.
- **The result cache** (2026-07-28 ``ttlMs``): a ``private`` result fetched for a tenant is
  kept under that tenant's authorization context (:func:`tenant_context`: the server's
  configured credentials, the tenant's id and its headers, hashed) and never served to another
  tenant or to the operator; a ``public`` one is shared.

Tool listings are the operator's: the tools a tenant may call are the ones the server listed
to the configured credentials.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import OrderedDict
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Final

import attrs
import trio

from ...protocol._errors import AuthorizationError, LocalProtocolError, RuntimeClosed
from ...transports._base import RequestCredentials
from ...transports.http._http_base import checked_request_headers
from ...transports.oauth._types import SignIn
from ..config._config import ServerConfig

__all__ = [
    "MAX_TENANT_SIGN_INS",
    "Tenant",
    "TenantSignIns",
    "as_tenant",
    "tenant_context",
]

#: Tenant sign-ins (one per server and tenant) that run at once in one runtime.
MAX_TENANT_SIGN_INS: Final = 256
#: A tenant id: what a store key and a message can hold safely.
_TENANT_ID: Final = re.compile(r"[A-Za-z0-9._@:+=-]{1,200}", re.ASCII)
_MAILBOX: Final = 64


def _checked_headers(value: Mapping[str, str] | None) -> Mapping[str, str]:
    headers = dict(value or {})
    try:
        checked = checked_request_headers(headers)
    except LocalProtocolError as exc:
        raise ValueError(f"a tenant's headers: {exc}") from None
    for name, _ in checked:
        folded = name.lower()
        if folded.startswith("mcp-") or folded == "dpop":
            raise ValueError(
                f"a tenant's headers: cannot send the header {name!r}: the request sets it itself"
            )
    return MappingProxyType(dict(checked))


def _checked_id(_: object, __: object, value: str) -> None:
    given: object = value
    if not isinstance(given, str) or _TENANT_ID.fullmatch(given) is None:
        raise ValueError(
            f"a tenant id is 1 to 200 ASCII letters, digits and ._@:+=- (got {value!r}); "
            'the operator\'s own credentials are the call without a tenant, not ""'
        )


@attrs.frozen(repr=False)
class Tenant:
    """Who a call is for, on a runtime serving many users: ``id`` names the tenant (1 to 200
    ASCII letters, digits and ``._@:+=-``; the key of its OAuth credentials and its cached
    results), ``headers`` are what its calls carry on their HTTP request (``Authorization:
    Bearer <the user's token>``...). Header values must be printable ASCII without CR or LF;
    ``Mcp-*`` names, ``DPoP`` and the ones the transport sets (``Accept``, ``Content-Type``,
    ``Mcp-Session-Id``...) are refused (``ValueError``). The ``repr`` names the headers, never
    their values."""

    id: str = attrs.field(validator=_checked_id)
    headers: Mapping[str, str] = attrs.field(
        factory=dict, converter=_checked_headers, kw_only=True, eq=False
    )
    #: The headers in a form that compares (values hashed: never kept twice in the clear).
    _digest: str = attrs.field(init=False, repr=False)

    @_digest.default
    def _digest_default(self) -> str:
        pairs = sorted((name.lower(), value) for name, value in self.headers.items())
        text = json.dumps(pairs, ensure_ascii=True, separators=(",", ":"))
        return hashlib.sha256(text.encode("ascii")).hexdigest()

    @property
    def has_authorization(self) -> bool:
        """Whether the tenant gives its own ``Authorization`` header (then no OAuth sign-in is
        used for its calls)."""
        return any(name.lower() == "authorization" for name in self.headers)

    def __repr__(self) -> str:
        return f"Tenant({self.id!r}, headers={sorted(self.headers)})"


def as_tenant(value: Tenant | str | None) -> Tenant | None:
    """``value`` as a :class:`Tenant` (a string is the id of a tenant without headers)."""
    if value is None or isinstance(value, Tenant):
        return value
    if isinstance(value, str):
        return Tenant(value)
    raise TypeError(f"tenant must be a Tenant, a tenant id or None, got {type(value).__name__}")


def tenant_context(base: str, tenant: Tenant) -> str:
    """The authorization context of ``tenant``'s requests to a server whose configured context
    is ``base`` (:func:`~trio_mcp.actors.runtime._cache.authorization_context`): a SHA-256 over
    both, the tenant's id and its headers, so that no two tenants (nor a tenant and the
    operator) share a private cache entry."""
    text = json.dumps(["tenant", base, tenant.id, tenant._digest], separators=(",", ":"))
    return hashlib.sha256(text.encode("ascii")).hexdigest()


# --------------------------------------------------------------------------- tenant sign-ins

#: Builds the sign-in of a server for a tenant: ``make(server, tenant)``.
SignInMaker = Callable[[ServerConfig, str], SignIn]


@attrs.define(eq=False)
class _Entry:
    sign_in: SignIn
    ready: trio.Event = attrs.field(factory=trio.Event)
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    ended: bool = False


@attrs.define(eq=False)
class _Reply:
    done: trio.Event = attrs.field(factory=trio.Event)
    entry: _Entry | None = None


@attrs.frozen
class _Want:
    server: ServerConfig
    tenant: str
    reply: _Reply


@attrs.define(eq=False)
class TenantSignIns:
    """The runtime's sign-ins for tenants: an actor owning one sign-in actor per (server,
    tenant), made on first use and run in its own nursery, at most ``limit`` at once (the one
    used longest ago is stopped to make room; its credential stays in the store). Reached
    through its mailbox (:meth:`sign_in`, in the caller's task)."""

    make: SignInMaker
    limit: int = MAX_TENANT_SIGN_INS
    _send: trio.MemorySendChannel[_Want] = attrs.field(init=False)
    _receive: trio.MemoryReceiveChannel[_Want] = attrs.field(init=False)
    #: Owned by the actor's task.
    _entries: OrderedDict[tuple[str, str], _Entry] = attrs.field(factory=OrderedDict, init=False)

    def __attrs_post_init__(self) -> None:
        self._send, self._receive = trio.open_memory_channel[_Want](_MAILBOX)

    def __len__(self) -> int:
        return len(self._entries)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The actor: answer each wish with the entry of its (server, tenant), made if need
        be, until cancelled."""
        try:
            async with trio.open_nursery() as nursery:
                task_status.started()
                async for want in self._receive:
                    want.reply.entry = self._entry(nursery, want.server, want.tenant)
                    want.reply.done.set()
        finally:
            self._receive.close()

    def _entry(self, nursery: trio.Nursery, server: ServerConfig, tenant: str) -> _Entry:
        """The live entry of (server, tenant), made now if there is none (synchronous: the
        table changes in one step)."""
        key = (server.name, tenant)
        entry = self._entries.get(key)
        if entry is not None and not entry.ended:
            self._entries.move_to_end(key)
            return entry
        self._entries.pop(key, None)
        while len(self._entries) >= max(self.limit, 1):
            _, oldest = self._entries.popitem(last=False)
            oldest.scope.cancel()
        entry = _Entry(sign_in=self.make(server, tenant))
        self._entries[key] = entry
        nursery.start_soon(self._serve, entry)
        return entry

    @staticmethod
    async def _serve(entry: _Entry) -> None:
        try:
            with entry.scope:
                async with trio.open_nursery() as nursery:
                    await nursery.start(entry.sign_in.run)
                    entry.ready.set()
        finally:
            entry.ended = True
            entry.ready.set()

    async def sign_in(self, server: ServerConfig, tenant: str) -> SignIn:
        """The running sign-in of ``tenant`` at ``server`` (in the caller's task). Raises
        :class:`RuntimeClosed` once the runtime has stopped, :class:`AuthorizationError` when
        the sign-in was stopped before it ran (to make room, or at the end)."""
        reply = _Reply()
        try:
            await self._send.send(_Want(server, tenant, reply))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise RuntimeClosed("the runtime is closed; open a new one to make calls") from None
        await reply.done.wait()
        entry = reply.entry
        assert entry is not None
        await entry.ready.wait()
        if entry.ended:
            raise AuthorizationError(
                f"the sign-in of the tenant {tenant!r} at {server.name!r} has stopped; try again",
                server=server.name,
            )
        return entry.sign_in


async def credentials_for(
    sign_ins: TenantSignIns, server: ServerConfig, tenant: Tenant
) -> RequestCredentials | None:
    """What a request of ``tenant`` to ``server`` carries: its headers, and at a server with
    OAuth (unless the tenant gives its own ``Authorization``) its own sign-in; None when it
    has nothing of its own (no headers, no OAuth): the configured headers go."""
    headers = tuple(tenant.headers.items())
    if server.oauth_settings is not None and not tenant.has_authorization:
        sign_in = await sign_ins.sign_in(server, tenant.id)
        return RequestCredentials(label=tenant.id, headers=headers, auth=sign_in.auth)
    await trio.lowlevel.checkpoint()
    if not headers:
        return None
    return RequestCredentials(label=tenant.id, headers=headers, auth=None)
