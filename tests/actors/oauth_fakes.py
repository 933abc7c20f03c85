"""A fake OAuth sign-in for the runtime and command-line tests: it follows the
:class:`~trio_mcp.transports.oauth.SignIn` contract, keeps its token in a
:class:`~trio_mcp.transports.oauth.TokenStore` (so a second sign-in on the same store, "another
process", sees what the first stored), and its ``auth`` sends ``Authorization: Bearer <token>``
and turns a ``401`` into :class:`~trio_mcp.protocol.AuthorizationRequired`."""

from __future__ import annotations

from collections.abc import Generator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import attrs
import httpx
import trio

from trio_mcp.actors import OAuthFactories
from trio_mcp.protocol import AuthorizationRequired, OAuthFlowError
from trio_mcp.transports.http._http_base import HttpParameters
from trio_mcp.transports.oauth import (
    AuthorizationPrompt,
    AuthorizationRequest,
    AuthState,
    AuthStatus,
    Credential,
    CredentialKey,
    DeviceAuthorization,
    DevicePrompt,
    Grant,
    OAuthSettings,
    TokenRecord,
    TokenStore,
)
from trio_mcp.transports.oauth._store import MemoryTokenStore

ISSUER = "https://as.example"


@attrs.define(eq=False)
class FakeSignIn:
    server: str
    settings: OAuthSettings
    store: TokenStore
    http: HttpParameters
    prompt: AuthorizationPrompt | None = None
    tenant: str = ""
    running: bool = False
    #: The token held in memory (loaded from the store when a request needs one).
    token: str | None = None
    requests: list[AuthorizationRequest] = attrs.field(factory=list)
    login_scopes: list[Sequence[str] | None] = attrs.field(factory=list)
    redirect_uris: list[str | None] = attrs.field(factory=list)

    @property
    def key(self) -> CredentialKey:
        return CredentialKey(
            server=self.server, resource=self.http.url, issuer=ISSUER, tenant=self.tenant
        )

    @property
    def auth(self) -> httpx.Auth:
        return _FakeAuth(self)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self.running = True
        task_status.started()
        try:
            await trio.sleep_forever()
        finally:
            self.running = False

    async def current_token(self) -> str | None:
        """The token to send: the one in memory, else the stored one (another process may have
        signed in)."""
        if self.token is None:
            stored = await self.store.load(self.key)
            if stored is not None and stored.tokens is not None:
                self.token = stored.tokens.access_token
        return self.token

    def required(self) -> AuthorizationRequired:
        return AuthorizationRequired(
            f"server {self.server!r}: nobody is signed in",
            server=self.server,
            hint=f"trio-mcp login {self.server}",
        )

    async def login(
        self,
        prompt: AuthorizationPrompt,
        *,
        redirect_uri: str | None = None,
        scopes: Sequence[str] | None = None,
    ) -> AuthStatus:
        self.login_scopes.append(scopes)
        self.redirect_uris.append(redirect_uri)
        if self.settings.grant is Grant.CLIENT_CREDENTIALS:
            return await self._signed_in("machine")
        request = AuthorizationRequest(
            server=self.server,
            url=f"{ISSUER}/authorize?client_id=c&state=st-1",
            redirect_uri=redirect_uri or self.settings.redirect_uri or "http://127.0.0.1/cb",
            issuer=ISSUER,
            scopes=tuple(scopes or ()),
        )
        self.requests.append(request)
        answer = await prompt(request)
        query = parse_qs(urlsplit(answer).query)
        if query.get("state") != ["st-1"] or "code" not in query:
            raise OAuthFlowError(
                f"server {self.server!r}: the redirect did not carry the state that was sent",
                server=self.server,
            )
        return await self._signed_in(query["code"][0])

    async def login_device(
        self, show: DevicePrompt, *, scopes: Sequence[str] | None = None
    ) -> AuthStatus:
        self.login_scopes.append(scopes)
        await show(
            DeviceAuthorization(
                server=self.server,
                verification_uri=f"{ISSUER}/device",
                user_code="WDJB-MJHT",
                verification_uri_complete=f"{ISSUER}/device?user_code=WDJB-MJHT",
                expires_at=trio.current_time() + 600,
            )
        )
        return await self._signed_in("device")

    async def _signed_in(self, code: str) -> AuthStatus:
        self.token = f"token-{code}"
        await self.store.save(
            Credential(
                key=self.key,
                tokens=TokenRecord(
                    access_token=self.token,
                    refresh_token="refresh-secret",
                    expires_at=2_000_000_000.0,
                    scopes=("files:read",),
                ),
            )
        )
        return self.status()

    async def logout(self) -> bool:
        self.token = None
        return await self.store.delete(self.key)

    def status(self) -> AuthStatus:
        if self.token is None:
            return AuthStatus(server=self.server, state=AuthState.SIGNED_OUT)
        return AuthStatus(
            server=self.server,
            state=AuthState.SIGNED_IN,
            issuer=ISSUER,
            scopes=("files:read",),
            expires_at=2_000_000_000.0,
            has_refresh_token=True,
            client_source="pre-registered",
        )


class _FakeAuth(httpx.Auth):
    def __init__(self, sign_in: FakeSignIn) -> None:
        self.sign_in = sign_in

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        raise NotImplementedError("the HTTP transports are async")

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> Any:  # an async generator (httpx's own annotation)
        token = await self.sign_in.current_token()
        if token is not None:
            request.headers["Authorization"] = f"Bearer {token}"
        response = yield request
        if response.status_code == 401:
            raise self.sign_in.required()


@attrs.define(eq=False)
class FakeOAuth:
    """``OAuthFactories`` for tests: every sign-in is a :class:`FakeSignIn` on one
    :class:`MemoryTokenStore`; ``directories`` records where the store was asked for."""

    store: MemoryTokenStore = attrs.field(factory=MemoryTokenStore)
    sign_ins: dict[str, FakeSignIn] = attrs.field(factory=dict)
    directories: list[Path] = attrs.field(factory=list)

    def factories(self) -> OAuthFactories:
        return OAuthFactories(sign_in=self.sign_in, store=self.open_store)

    def open_store(self, directory: Path) -> TokenStore:
        self.directories.append(directory)
        return self.store

    def sign_in(
        self,
        *,
        server: str,
        settings: OAuthSettings,
        store: TokenStore,
        http: HttpParameters,
        prompt: AuthorizationPrompt | None = None,
        tenant: str = "",
    ) -> FakeSignIn:
        made = FakeSignIn(
            server=server, settings=settings, store=store, http=http, prompt=prompt, tenant=tenant
        )
        self.sign_ins[server] = made
        return made
