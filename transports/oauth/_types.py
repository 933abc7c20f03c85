"""The shared vocabulary of OAuth 2.1 sign-in: settings, records, the store contract, and what a
sign-in front end (the command line, a host's UI, a headless test) is handed.

Secrets (access and refresh tokens, client secrets, private keys) never appear in ``repr()``: the
fields that hold them are ``repr=False``, and :func:`redact` names what is hidden.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Final, Protocol

import attrs
import httpx
import trio

__all__ = [
    "DEFAULT_CLIENT_NAME",
    "AuthState",
    "AuthStatus",
    "AuthorizationPrompt",
    "AuthorizationRequest",
    "ClientRecord",
    "Credential",
    "CredentialKey",
    "DeviceAuthorization",
    "DevicePrompt",
    "Grant",
    "OAuthSettings",
    "SignIn",
    "TokenRecord",
    "TokenStore",
]

#: The ``client_name`` sent in dynamic registration and shown in consent screens.
DEFAULT_CLIENT_NAME: Final = "trio-mcp"


class Grant(StrEnum):
    """How the client obtains tokens."""

    #: A user signs in through a browser (authorization code + PKCE), or a device code.
    AUTHORIZATION_CODE = "authorization_code"
    #: Machine to machine: the client's own credentials (secret or private key), no user.
    CLIENT_CREDENTIALS = "client_credentials"


def _frozen_mapping(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(value or {}))


@attrs.frozen(kw_only=True)
class OAuthSettings:
    """One server's OAuth settings (the ``oauth`` table of its configuration). Every field is
    optional: without any, the client discovers the authorization server, registers itself (a
    Client ID Metadata Document when ``client_metadata_url`` is given and the server supports
    it, else dynamic registration) and asks for the scopes the server names.

    - ``client_id`` / ``client_secret``: a pre-registered client (used first when given).
    - ``client_metadata_url``: the ``https://`` URL of this client's Client ID Metadata Document
      (it becomes the ``client_id`` where the server supports CIMD).
    - ``token_endpoint_auth_method``: ``client_secret_basic``, ``client_secret_post``,
      ``private_key_jwt`` or ``none``; None: the best the server offers for what we hold.
    - ``scopes``: the scopes to ask for; None: the challenge's, else the resource's
      ``scopes_supported``, else none (the rules of 2025-11-25).
    - ``grant``: :class:`Grant`.
    - ``private_key``: a PEM private key (text) for ``private_key_jwt``; ``signing_algorithm``:
      its JWS algorithm (None: RS256 for RSA keys, ES256 for P-256 keys).
    - ``dpop``: bind tokens to a key of this client (RFC 9449).
    - ``redirect_uri``: the exact redirect URI of a host's own sign-in page; None: a loopback
      ``http://127.0.0.1:<port>/callback`` chosen at sign-in.
    - ``client_name``: shown by the authorization server.
    - ``max_step_up``: how many times one request may re-authorize for a wider scope after
      ``403 insufficient_scope``.
    - ``extra``: settings this version does not know, kept so that nothing the user wrote is
      lost.
    """

    client_id: str | None = None
    client_secret: str | None = attrs.field(default=None, repr=False)
    client_metadata_url: str | None = None
    token_endpoint_auth_method: str | None = None
    scopes: tuple[str, ...] | None = None
    grant: Grant = Grant.AUTHORIZATION_CODE
    private_key: str | None = attrs.field(default=None, repr=False)
    signing_algorithm: str | None = None
    dpop: bool = False
    redirect_uri: str | None = None
    client_name: str = DEFAULT_CLIENT_NAME
    max_step_up: int = 2
    extra: Mapping[str, Any] = attrs.field(
        factory=dict, converter=_frozen_mapping, repr=False, hash=False
    )


@attrs.frozen(kw_only=True)
class CredentialKey:
    """What one stored credential belongs to: a server (its configured ``server`` name and its
    canonical ``resource`` URI) at one authorization server (``issuer``). A credential is never
    used for another issuer, and a server whose URL changed does not see the old one.
    ``tenant``: the host's tenant for multi-tenant hosts ("" for the operator's own)."""

    server: str
    resource: str
    issuer: str
    tenant: str = ""


@attrs.frozen(kw_only=True)
class ClientRecord:
    """This client as one authorization server knows it. ``source``: ``"pre-registered"``,
    ``"cimd"`` or ``"dynamic"``. ``client_secret_expires_at``: seconds since the epoch (0 or
    None: never)."""

    client_id: str
    client_secret: str | None = attrs.field(default=None, repr=False)
    client_secret_expires_at: float | None = None
    token_endpoint_auth_method: str = "none"
    redirect_uris: tuple[str, ...] = ()
    source: str = "dynamic"


@attrs.frozen(kw_only=True)
class TokenRecord:
    """Tokens from one authorization server for one resource. ``expires_at``: seconds since the
    epoch (None: the server did not say). ``token_type``: ``Bearer`` or ``DPoP``."""

    access_token: str = attrs.field(repr=False)
    token_type: str = "Bearer"
    refresh_token: str | None = attrs.field(default=None, repr=False)
    expires_at: float | None = None
    scopes: tuple[str, ...] = ()
    obtained_at: float = 0.0


@attrs.frozen(kw_only=True)
class Credential:
    """One stored credential: the client registration and the tokens for ``key``.
    ``dpop_key``: the PEM private key the tokens are bound to (DPoP), if any. ``revision``
    counts the saves (a refresh that finds a newer revision than the one it started from uses
    that one instead: another process refreshed first)."""

    key: CredentialKey
    client: ClientRecord | None = None
    tokens: TokenRecord | None = None
    dpop_key: str | None = attrs.field(default=None, repr=False)
    revision: int = 0


class TokenStore(Protocol):
    """Where credentials live. Every method is safe to call from several tasks and several
    processes at once; :meth:`lock` is the single-flight lock of one key (held while a refresh
    runs, across processes)."""

    async def load(self, key: CredentialKey) -> Credential | None:
        """The stored credential of ``key``, or None."""
        ...

    async def find(self, server: str, resource: str, tenant: str = "") -> tuple[Credential, ...]:
        """Every credential stored for ``server`` at ``resource`` (one per issuer)."""
        ...

    async def save(self, credential: Credential) -> None:
        """Store ``credential`` (replacing the one of its key, atomically)."""
        ...

    async def delete(self, key: CredentialKey) -> bool:
        """Forget ``key``'s credential; False when there was none."""
        ...

    async def list(self) -> tuple[Credential, ...]:
        """Every stored credential (for ``trio-mcp auth status``)."""
        ...

    def lock(self, key: CredentialKey) -> AbstractAsyncContextManager[None]:
        """Exclusive use of ``key``'s credential, in this process and across processes."""
        ...


@attrs.frozen(kw_only=True)
class AuthorizationRequest:
    """What a sign-in front end shows the user: open ``url`` (an ``https://`` URL, or
    ``http://`` on loopback only) in a browser; the authorization server then redirects the
    browser to ``redirect_uri`` with the answer. ``server``: the configured server name;
    ``issuer``: the authorization server; ``scopes``: what is asked for."""

    server: str
    url: str
    redirect_uri: str
    issuer: str
    scopes: tuple[str, ...] = ()


#: A sign-in front end: shows ``request.url`` to the user and returns the full URL the browser
#: was redirected to (``redirect_uri?code=...&state=...``), which the flow checks (``state``,
#: ``iss``) before it uses the code.
AuthorizationPrompt = Callable[[AuthorizationRequest], Awaitable[str]]


@attrs.frozen(kw_only=True)
class DeviceAuthorization:
    """The device authorization grant (RFC 8628): the user opens ``verification_uri`` (or
    ``verification_uri_complete``) on any device and enters ``user_code``; the flow polls until
    ``expires_at`` (trio clock)."""

    server: str
    verification_uri: str
    user_code: str
    verification_uri_complete: str | None = None
    expires_at: float = 0.0
    interval: float = 5.0


#: Shows a device code to the user; returns at once (the flow polls meanwhile).
DevicePrompt = Callable[[DeviceAuthorization], Awaitable[None]]


class AuthState(StrEnum):
    """Where a server's sign-in stands."""

    #: No credential is stored and none has been needed yet.
    SIGNED_OUT = "signed_out"
    #: A token is held (it may be refreshed when it expires).
    SIGNED_IN = "signed_in"
    #: The server needs a sign-in that only the user can do (``hint`` says how).
    NEEDS_AUTH = "needs_auth"


@attrs.frozen(kw_only=True)
class AuthStatus:
    """What may be shown of a server's sign-in: never a secret."""

    server: str
    state: AuthState
    issuer: str | None = None
    scopes: tuple[str, ...] = ()
    expires_at: float | None = None
    has_refresh_token: bool = False
    client_source: str | None = None
    reason: str | None = None
    hint: str | None = None


class SignIn(Protocol):
    """One server's sign-in: an actor (:meth:`run`, in a nursery that outlives the server's
    connections) that owns the server's credential in memory, refreshes it once however many
    requests find it expired, and is reached by the HTTP transports through :attr:`auth` and by
    the runtime and the command line through the other methods. ``Authorizer`` is the real one;
    tests may give their own."""

    @property
    def auth(self) -> httpx.Auth:
        """What the server's HTTP transports send every request through (``Authorization``,
        DPoP proofs; on ``401``/``403`` it asks the actor, which may refresh or step up). It
        raises :class:`~trio_mcp.protocol.AuthorizationRequired` (or a subclass) out of the
        request when only the user can fix things."""
        ...

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled."""
        ...

    async def login(
        self,
        prompt: AuthorizationPrompt,
        *,
        redirect_uri: str | None = None,
        scopes: Sequence[str] | None = None,
    ) -> AuthStatus:
        """Sign in interactively through ``prompt`` (authorization code + PKCE, or client
        credentials when that is the configured grant, without calling ``prompt``);
        ``redirect_uri``: the front end's (a loopback receiver's), else the settings'. Stores the
        credential. Raises :class:`~trio_mcp.protocol.AuthorizationError` subclasses."""
        ...

    async def login_device(
        self, show: DevicePrompt, *, scopes: Sequence[str] | None = None
    ) -> AuthStatus:
        """Sign in with the device authorization grant (RFC 8628); raises
        :class:`~trio_mcp.protocol.OAuthFlowError` when the authorization server offers none."""
        ...

    async def logout(self) -> bool:
        """Forget every stored credential of this server (and the one in memory); False when
        there was none."""
        ...

    def status(self) -> AuthStatus:
        """The published sign-in status (never a secret)."""
        ...
