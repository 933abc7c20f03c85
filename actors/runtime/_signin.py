"""How the runtime and the command line get a server's OAuth sign-in: through
:class:`OAuthFactories` (the sign-in actor, and the token store it keeps credentials in), so
that tests and hosts can give their own (a store in memory, a fake sign-in) and the real ones
are named in exactly one place, :data:`DEFAULT_OAUTH`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Protocol

import attrs
import trio

from ...transports.http._http_base import HttpParameters
from ...transports.oauth._authorizer import Authorizer
from ...transports.oauth._store import FileTokenStore
from ...transports.oauth._types import AuthorizationPrompt, OAuthSettings, SignIn, TokenStore

__all__ = [
    "DEFAULT_OAUTH",
    "OAuthFactories",
    "SignInFactory",
    "StoreFactory",
    "open_sign_in",
]


class SignInFactory(Protocol):
    """Builds one server's sign-in actor (the signature of ``Authorizer``): ``server`` is the
    configured name, ``http`` the server's HTTP settings (TLS, proxy) for reaching its
    authorization server, ``prompt`` the host's sign-in front end (None: the actor never asks
    anyone; it raises ``AuthorizationRequired`` with the ``trio-mcp login NAME`` hint), ``tenant``
    the host's tenant ("" for the operator's own)."""

    def __call__(
        self,
        *,
        server: str,
        settings: OAuthSettings,
        store: TokenStore,
        http: HttpParameters,
        prompt: AuthorizationPrompt | None = None,
        tenant: str = "",
    ) -> SignIn: ...


#: Opens the token store kept in a directory (``RuntimeConfig.credentials_dir``).
StoreFactory = Callable[[Path], TokenStore]


@attrs.frozen(kw_only=True)
class OAuthFactories:
    """Where the runtime and the command line get sign-ins and the token store from."""

    sign_in: SignInFactory
    store: StoreFactory


#: The real sign-in and store.
DEFAULT_OAUTH = OAuthFactories(sign_in=Authorizer, store=FileTokenStore)


@asynccontextmanager
async def open_sign_in(
    factories: OAuthFactories,
    *,
    server: str,
    settings: OAuthSettings,
    store: TokenStore,
    http: HttpParameters,
    prompt: AuthorizationPrompt | None = None,
    tenant: str = "",
) -> AsyncIterator[SignIn]:
    """A sign-in actor built by ``factories`` and running (in a nursery of its own) for the
    duration of the block: what the command line signs in with."""
    sign_in = factories.sign_in(
        server=server, settings=settings, store=store, http=http, prompt=prompt, tenant=tenant
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(sign_in.run)
        try:
            yield sign_in
        finally:
            nursery.cancel_scope.cancel()
