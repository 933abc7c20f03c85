"""The OAuth 2.1 sign-in of one HTTP server: :class:`Authorizer`, an actor.

Its task (:meth:`Authorizer.run`) owns the server's credential in memory and does every
exchange with the authorization server (discovery, registration, token requests, refresh).
The transports reach it through :attr:`Authorizer.auth` (an ``httpx.Auth``): that runs in the
request's task, adds the token (and a DPoP proof) and, on ``401``/``403``, sends the challenge
to the actor and waits for its answer (a token to retry with, or an error to raise). Requests
are answered one at a time, so however many requests find the token expired, one refresh
runs; across processes the store's ``lock`` does the same (after taking it the credential is
reloaded: a newer revision that another process saved is used as it is).

Two sign-ins wait for a person: a browser sign-in, through the host's prompt (host code that
may take minutes), and a device sign-in (RFC 8628), whose code the host shows and whose token
endpoint is polled until the user approves (minutes too). The actor prepares either (discovery,
registration; the PKCE verifier, ``state`` and URL, or the device code), starts the waiting in a
task of its own (a child of :meth:`Authorizer.run`: the prompt, or the device prompt and the
polling), keeps the pending sign-in in its state and goes on serving its mailbox: ``status()``,
requests that have a valid token, a logout. That task's outcome (the redirect, the token
response, or what was raised) comes back as a message; the actor checks it (for a redirect,
exchanges the code), stores the tokens and answers everyone who waits for that sign-in at once
(or fails them all). The polling task owns no state: it sends only the device code token
requests the actor would send, through the actor's HTTP client, and hands the checked token
response back; the actor stores it. One sign-in at a time: a login, or a request that needs
the sign-in, while one is pending waits for it (a second login's own prompt is not called). A
logout cancels the pending sign-in's task (its waiters get :class:`AuthorizationRequired`), and
the actor's end fails them.

The rules that need no I/O are in :mod:`trio_mcp.protocol` (``_oauth``).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, Final

import attrs
import httpx
import trio

from ...protocol import (
    DEVICE_CODE_GRANT,
    MAX_OAUTH_BODY_BYTES,
    AuthorizationError,
    AuthorizationRequired,
    AuthorizationServerMetadata,
    Challenge,
    ClientAuth,
    ConnectError,
    CredentialsRefused,
    InsufficientScope,
    McpError,
    OAuthFlowError,
    OAuthMetadataError,
    ProtectedResourceMetadata,
    TokenResponse,
    authorization_server_metadata_urls,
    authorization_url,
    bearer_challenge,
    canonical_resource,
    choose_token_auth_method,
    device_authorization_request,
    legacy_authorization_server,
    new_state,
    origin_of,
    parse_authorization_server_metadata,
    parse_device_authorization,
    parse_protected_resource_metadata,
    parse_redirect,
    parse_registration_response,
    parse_token_response,
    parse_www_authenticate,
    pkce_pair,
    protected_resource_metadata_urls,
    registration_body,
    select_scopes,
    step_up_scopes,
    token_request,
)
from ..http._http_base import HttpParameters, consume
from ._jose import DPoPKey, client_assertion
from ._types import (
    AuthorizationPrompt,
    AuthorizationRequest,
    AuthState,
    AuthStatus,
    ClientRecord,
    Credential,
    CredentialKey,
    DeviceAuthorization,
    DevicePrompt,
    Grant,
    OAuthSettings,
    TokenRecord,
    TokenStore,
)

__all__ = ["DEFAULT_REDIRECT_URI", "Authorizer", "RefreshUnreachable", "open_authorizer"]

logger = logging.getLogger("trio_mcp.oauth")

#: The redirect URI of a sign-in whose front end named none (and no ``redirect_uri`` setting).
DEFAULT_REDIRECT_URI: Final = "http://127.0.0.1/callback"
#: A token this close to its expiry (seconds) is refreshed before it is used.
EXPIRY_SKEW: Final = 30.0
#: How many times one request may be answered 401 (a refused token, a new DPoP nonce).
_MAX_UNAUTHORIZED: Final = 2
#: The longest DPoP nonce kept (a server's nonce is short; a longer one is cut, never stored whole).
_MAX_NONCE: Final = 1024
#: The longest wait between two device polls after polls that did not get through.
_MAX_DEVICE_BACKOFF: Final = 60.0
_MAILBOX: Final = 32
#: The shortest wait between two polls of a device sign-in, whatever the server says.
_MIN_DEVICE_INTERVAL: Final = 1.0


class RefreshUnreachable(ConnectError):
    """Refreshing the token failed because the authorization server could not be reached (or
    answered with a server error): the stored credential is kept, and a later attempt may
    succeed. The supervisor retries as for any connection failure."""


# --------------------------------------------------------------------------- messages


@attrs.define(eq=False)
class _Waiter:
    """A one-shot reply: set once by the actor, read by the asker."""

    done: trio.Event = attrs.field(factory=trio.Event)
    value: object = None
    error: BaseException | None = None

    def set(self, value: object) -> None:
        if not self.done.is_set():
            self.value = value
            self.done.set()

    def fail(self, error: BaseException) -> None:
        if not self.done.is_set():
            self.error = error
            self.done.set()

    def abandon(self) -> None:
        """The asker is gone (its deadline passed): a later answer is dropped, and whoever
        holds this waiter for later (a pending sign-in) may let go of it."""
        self.done.set()


@attrs.frozen(kw_only=True)
class _Grant:
    """What the auth flow puts on a request: the token and how to present it."""

    token: str | None = attrs.field(repr=False)
    token_type: str = "Bearer"
    dpop: DPoPKey | None = attrs.field(default=None, repr=False)
    #: The resource's latest DPoP nonce the actor knew of when it gave this grant.
    nonce: str | None = None


@attrs.frozen(kw_only=True)
class _Need:
    """A request is about to go out: the current token, fresh (refreshed if it ran out)."""

    reply: _Waiter


@attrs.frozen(kw_only=True)
class _Challenged:
    """The server answered ``status`` with these challenges to a request sent with ``sent``;
    ``step_ups``: how many re-authorizations for scope this request already had."""

    status: int
    challenges: tuple[Challenge, ...]
    sent: str | None = attrs.field(repr=False)
    step_ups: int
    reply: _Waiter


@attrs.frozen(kw_only=True)
class _Login:
    prompt: AuthorizationPrompt
    redirect_uri: str | None
    scopes: tuple[str, ...] | None
    reply: _Waiter


@attrs.frozen(kw_only=True)
class _LoginDevice:
    show: DevicePrompt
    scopes: tuple[str, ...] | None
    reply: _Waiter


@attrs.frozen(kw_only=True)
class _Logout:
    reply: _Waiter


@attrs.frozen(kw_only=True)
class _NonceSeen:
    """A response from the resource carried ``DPoP-Nonce``: the nonce for the next proofs to
    ``origin`` (no reply: the request that saw it goes on with it by itself)."""

    origin: str
    nonce: str


@attrs.frozen(kw_only=True)
class _PromptAnswered:
    """The host's prompt of sign-in ``number`` returned (``answer``: the URL the browser was
    redirected to, which holds the code) or raised ``error`` (no reply: the actor resolves the
    sign-in's waiters)."""

    number: int
    answer: object = attrs.field(default=None, repr=False)
    error: Exception | None = None


@attrs.frozen(kw_only=True)
class _DeviceAnswered:
    """The device sign-in ``number``'s task ended: the token endpoint's answer to a poll
    (``tokens``), or what ended it (``error``: the device code was refused or expired, the
    token endpoint failed, the host's device prompt raised). No reply: the actor stores the
    tokens and resolves the sign-in's waiters."""

    number: int
    tokens: TokenResponse | None = attrs.field(default=None, repr=False)
    error: Exception | None = None


_Message = (
    _Need
    | _Challenged
    | _Login
    | _LoginDevice
    | _Logout
    | _NonceSeen
    | _PromptAnswered
    | _DeviceAnswered
)


@attrs.frozen
class _Wait:
    """An answer that has to wait for the pending sign-in (the asker joins its waiters)."""


_WAIT: Final = _Wait()


@attrs.define(eq=False, kw_only=True)
class _Pending:
    """A sign-in waiting for the user, whose waiting runs in a task of its own: what the actor
    needs to finish it when that task's answer comes back, and who waits for it."""

    number: int
    metadata: AuthorizationServerMetadata
    credential: Credential = attrs.field(repr=False)
    record: ClientRecord = attrs.field(repr=False)
    scopes: tuple[str, ...]
    #: Cancels the sign-in's task (a logout, the actor's end).
    scope: trio.CancelScope = attrs.field(repr=False)
    #: Token requests (``_Need``, ``_Challenged``): answered with the new grant.
    for_grant: list[_Waiter] = attrs.field(factory=list, repr=False)
    #: Login callers: answered with the status.
    for_status: list[_Waiter] = attrs.field(factory=list, repr=False)

    def join(self, reply: _Waiter, *, status: bool) -> None:
        """Add ``reply`` (dropping the waiters whose askers are gone: a prompt may wait for
        hours, the requests that joined it have deadlines)."""
        self.for_grant[:] = [w for w in self.for_grant if not w.done.is_set()]
        self.for_status[:] = [w for w in self.for_status if not w.done.is_set()]
        (self.for_status if status else self.for_grant).append(reply)

    def waiters(self) -> list[_Waiter]:
        return [*self.for_grant, *self.for_status]


@attrs.define(eq=False, kw_only=True)
class _PendingSignIn(_Pending):
    """A browser sign-in: the host's prompt waits for the user (the redirect holds the code)."""

    redirect_uri: str
    resource: str
    state: str = attrs.field(repr=False)
    verifier: str = attrs.field(repr=False)


@attrs.define(eq=False, kw_only=True)
class _PendingDevice(_Pending):
    """A device sign-in (RFC 8628): its task shows the code and polls the token endpoint."""

    dpop: DPoPKey | None = attrs.field(repr=False)


@attrs.frozen(kw_only=True)
class _DevicePoll:
    """The polling of a device sign-in (RFC 8628 §3.4, §3.5), run by the sign-in's own task.

    Fixed when the actor starts that task, and it owns no state of the actor: it sends the
    same token requests the actor would send, through the actor's HTTP client (its TLS,
    proxy and timeouts; ``httpx.AsyncClient`` serves several tasks), builds each one from
    these values (a fresh client authentication each time: a ``private_key_jwt`` assertion is
    used once) and returns the first token response, checked by the sans-IO parser, for the
    actor to store. A DPoP nonce the token endpoint hands out is used for the next poll and
    told to the actor (``tell``), as a request's is."""

    server: str
    client: httpx.AsyncClient = attrs.field(repr=False)
    url: str
    device_code: str = attrs.field(repr=False)
    resource: str
    authenticate: Callable[[], ClientAuth] = attrs.field(repr=False)
    dpop: DPoPKey | None = attrs.field(repr=False)
    nonce: str | None = attrs.field(repr=False)
    clock: Callable[[], float]
    #: Seconds between polls (the server's, at least :data:`_MIN_DEVICE_INTERVAL`).
    interval: float
    #: When the device code expires (trio clock).
    expires_at: float
    hint: str

    async def run(self, tell: Callable[[_NonceSeen], None]) -> TokenResponse:
        interval, nonce = self.interval, self.nonce
        while True:
            await trio.sleep(interval)
            if trio.current_time() > self.expires_at:
                raise self._expired()
            request = token_request(
                self.url,
                DEVICE_CODE_GRANT,
                self.authenticate(),
                scopes=(),
                resource=self.resource,
                device_code=self.device_code,
            )
            headers = dict(request.headers)
            headers["Content-Type"] = "application/x-www-form-urlencoded"
            headers["Accept"] = "application/json"
            if self.dpop is not None:
                headers["DPoP"] = self.dpop.proof(method="POST", url=self.url, nonce=nonce)
            try:
                status, body, answer_headers = await _send(
                    self.client,
                    self.server,
                    "POST",
                    self.url,
                    headers=headers,
                    content=request.body(),
                )
            except (httpx.HTTPError, OSError) as exc:
                # RFC 8628 §3.5: a poll that did not get through is no answer; wait twice as
                # long and poll again (until the code expires), rather than ending the
                # sign-in the user may be finishing right now.
                interval = min(interval * 2, _MAX_DEVICE_BACKOFF)
                logger.warning(
                    "%s: the token endpoint could not be reached while waiting for the device "
                    "sign-in (%s); polling again in %g s",
                    self.server,
                    type(exc).__name__,
                    interval,
                )
                continue
            seen = answer_headers.get("dpop-nonce")
            if seen:
                nonce = seen[:_MAX_NONCE]
                tell(_NonceSeen(origin=origin_of(self.url), nonce=nonce))
            try:
                return parse_token_response(
                    status, body, now=self.clock(), what=f"the token endpoint {self.url}"
                )
            except OAuthFlowError as exc:
                if exc.error == "slow_down":
                    interval += 5.0
                elif exc.error == "expired_token":
                    raise self._expired() from exc
                elif exc.error == "access_denied":
                    raise OAuthFlowError(
                        f"the sign-in of {self.server!r} was refused: the user denied it at the "
                        f"authorization server (access_denied); to try again, run: {self.hint}",
                        server=self.server,
                        error="access_denied",
                    ) from exc
                elif not (
                    exc.error == "authorization_pending"
                    # a new DPoP nonce: the next poll carries it
                    or (exc.error == "use_dpop_nonce" and self.dpop is not None and seen)
                ):
                    exc.server = self.server
                    raise

    def _expired(self) -> OAuthFlowError:
        return OAuthFlowError(
            f"the device code of {self.server!r} expired before the sign-in was approved; to "
            f"try again, run: {self.hint}",
            server=self.server,
            error="expired_token",
        )


# --------------------------------------------------------------------------- the auth flow


class _Auth(httpx.Auth):
    """The ``httpx.Auth`` of the transports: the token on every request to the server's own
    origin (never another), and the challenges sent to the actor."""

    def __init__(self, authorizer: Authorizer) -> None:
        self._authorizer = authorizer

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        owner = self._authorizer
        if origin_of(str(request.url)) != owner._origin:
            yield request
            return
        grant = await owner._ask_grant(lambda reply: _Need(reply=reply))
        nonce = grant.nonce
        unauthorized = 0
        step_ups = 0
        while True:
            owner._apply(request, grant, nonce)
            response = yield request
            seen = response.headers.get("dpop-nonce")
            if seen:
                nonce = seen[:_MAX_NONCE]
                owner._tell(_NonceSeen(origin=owner._origin, nonce=nonce))
            status = response.status_code
            if status not in (401, 403) or request.method == "DELETE":
                # A DELETE ends a session, best effort: its refusal never starts a sign-in
                # (after a logout, the closing connection's DELETE would sign in again).
                return
            challenges = parse_www_authenticate(response.headers.get_list("www-authenticate"))
            if status == 403:
                challenge = bearer_challenge(challenges)
                if challenge is None or challenge.error != "insufficient_scope":
                    return  # a 403 about something else: the transport reports it
                step_ups += 1
            else:
                unauthorized += 1
                if unauthorized > _MAX_UNAUTHORIZED:
                    raise AuthorizationRequired(
                        f"the server {owner._server!r} keeps refusing the token it was just "
                        f"given; sign in again: {owner._hint}",
                        server=owner._server,
                        hint=owner._hint,
                    )
                if _wants_nonce(challenges) and grant.dpop is not None:
                    continue  # the nonce was noted: the same token with a new proof
            grant = await owner._ask_grant(
                _challenged_message(status, challenges, grant.token, step_ups)
            )
            nonce = nonce or grant.nonce


def _challenged_message(
    status: int, challenges: tuple[Challenge, ...], sent: str | None, step_ups: int
) -> Callable[[_Waiter], _Message]:
    def make(reply: _Waiter) -> _Message:
        return _Challenged(
            status=status, challenges=challenges, sent=sent, step_ups=step_ups, reply=reply
        )

    return make


def _wants_nonce(challenges: Sequence[Challenge]) -> bool:
    return any(c.scheme == "dpop" and c.error == "use_dpop_nonce" for c in challenges)


async def _send(
    client: httpx.AsyncClient,
    server: str,
    method: str,
    url: str,
    *,
    headers: dict[str, str],
    content: bytes | None = None,
) -> tuple[int, bytes, httpx.Headers]:
    """One request to the authorization server; the body read up to the cap."""
    request = client.build_request(method, url, headers=headers, content=content)
    response = await client.send(request, stream=True)
    chunks: list[bytes] = []
    size = 0

    async def take(chunk: bytes) -> bool:
        nonlocal size
        size += len(chunk)
        chunks.append(chunk)
        return size <= MAX_OAUTH_BODY_BYTES

    if not await consume(response, take):
        raise OAuthMetadataError(
            f"the answer of {url} is larger than {MAX_OAUTH_BODY_BYTES} bytes: refused",
            server=server,
            url=url,
        )
    return response.status_code, b"".join(chunks), response.headers


# --------------------------------------------------------------------------- the actor


class Authorizer:
    """One server's OAuth 2.1 sign-in (implements :class:`~trio_mcp.transports.oauth.SignIn`).

    ``server``: the configured name (in messages and the hint ``trio-mcp login <server>``);
    ``settings``: its ``oauth`` settings; ``store``: where credentials live; ``http``: how the
    server is reached (``http.url`` is the MCP endpoint; its TLS settings, proxy and
    ``allow_insecure_http`` apply to the authorization server too); ``prompt``: the host's
    opt-in to interactive sign-in (without it, a sign-in that needs the user raises
    :class:`AuthorizationRequired` with the hint; it is called in a task of the actor's own
    nursery, never in the actor's task); ``tenant``: the host's tenant.
    ``clock``: the wall clock of token expiry (seconds since the epoch; tests give their own).
    """

    def __init__(
        self,
        *,
        server: str,
        settings: OAuthSettings,
        store: TokenStore,
        http: HttpParameters,
        prompt: AuthorizationPrompt | None = None,
        tenant: str = "",
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._server = server
        self._settings = settings
        self._store = store
        self._http = http
        self._prompt = prompt
        self._tenant = tenant
        self._clock = clock
        self._server_url = http.url
        self._resource_key = canonical_resource(http.url)
        self._origin = origin_of(http.url)
        self._hint = f"trio-mcp login {server}"
        self._allow_http = http.allow_insecure_http
        self._send, self._receive = trio.open_memory_channel[_Message](_MAILBOX)
        self._auth = _Auth(self)
        self._client: httpx.AsyncClient | None = None
        self._running = False
        # Owned by the actor's task.
        self._credential: Credential | None = None
        self._loaded = False
        self._prm: ProtectedResourceMetadata | None = None
        self._metadata: AuthorizationServerMetadata | None = None
        self._resource: str = self._resource_key
        self._challenge_scopes: tuple[str, ...] | None = None
        self._dpop: DPoPKey | None = None
        self._nonces: dict[str, str] = {}
        #: Where the host's prompts run (each in a task of its own), while :meth:`run` runs.
        self._prompts: trio.Nursery | None = None
        #: The browser sign-in waiting for the user (at most one at a time).
        self._pending: _Pending | None = None
        self._sign_ins = 0
        #: What was last published, before the pending sign-in's note is added.
        self._reason: str | None = None
        self._shown_hint: str | None = None
        self._status = AuthStatus(server=server, state=AuthState.SIGNED_OUT)

    def __repr__(self) -> str:
        return f"<Authorizer {self._server!r} {self._status.state.value}>"

    # ------------------------------------------------------------------ SignIn

    @property
    def auth(self) -> httpx.Auth:
        return self._auth

    def status(self) -> AuthStatus:
        return self._status

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        context = self._http._ssl_context
        async with (
            httpx.AsyncClient(
                timeout=httpx.Timeout(self._http.connect_timeout),
                follow_redirects=False,
                verify=context if context is not None else True,
                proxy=self._http.proxy,
            ) as client,
            trio.open_nursery() as prompts,
        ):
            self._client = client
            self._prompts = prompts
            self._running = True
            task_status.started()
            message: _Message | None = None
            try:
                async for message in self._receive:
                    await self._handle(message)
                    message = None
            finally:
                self._running = False
                self._client = None
                self._prompts = None
                # Nobody answers any more: whoever waits (the message being handled, those
                # queued, a sender blocked on the full mailbox, the pending sign-in's waiters)
                # fails now instead of forever; the prompt's task ends with the nursery.
                self._fail_waiters(message)
                prompts.cancel_scope.cancel()

    async def login(
        self,
        prompt: AuthorizationPrompt,
        *,
        redirect_uri: str | None = None,
        scopes: Sequence[str] | None = None,
    ) -> AuthStatus:
        """See :meth:`~trio_mcp.transports.oauth.SignIn.login`. ``prompt`` runs in a task of
        the actor's nursery; while it waits for the user the actor serves everyone else. A
        login while a sign-in is pending waits for that one and returns its status (its own
        ``prompt``, ``redirect_uri`` and ``scopes`` are not used: one sign-in at a time; a
        logout cancels the pending one)."""
        result = await self._ask(
            lambda reply: _Login(
                prompt=prompt,
                redirect_uri=redirect_uri,
                scopes=tuple(scopes) if scopes is not None else None,
                reply=reply,
            )
        )
        assert isinstance(result, AuthStatus)
        return result

    async def login_device(
        self, show: DevicePrompt, *, scopes: Sequence[str] | None = None
    ) -> AuthStatus:
        """See :meth:`~trio_mcp.transports.oauth.SignIn.login_device`. ``show`` and the polling
        (at the server's interval, 5 s more after each ``slow_down``, until the code expires)
        run in a task of the actor's nursery; meanwhile the actor serves everyone else. As for
        :meth:`login`, one sign-in at a time (a pending one is joined) and a logout cancels
        it."""
        result = await self._ask(
            lambda reply: _LoginDevice(
                show=show, scopes=tuple(scopes) if scopes is not None else None, reply=reply
            )
        )
        assert isinstance(result, AuthStatus)
        return result

    async def logout(self) -> bool:
        """See :meth:`~trio_mcp.transports.oauth.SignIn.logout`; a sign-in waiting for the
        user is cancelled (its prompt's task too), and whoever waits for it gets
        :class:`AuthorizationRequired`."""
        result = await self._ask(lambda reply: _Logout(reply=reply))
        assert isinstance(result, bool)
        return result

    # ------------------------------------------------------------------ asking

    async def _ask(self, make: Callable[[_Waiter], _Message]) -> _Grant | AuthStatus | bool:
        if not self._running:
            raise AuthorizationError(
                f"the sign-in of {self._server!r} is not running (the runtime is closed?)",
                server=self._server,
            )
        reply = _Waiter()
        try:
            await self._send.send(make(reply))
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            raise AuthorizationError(
                f"the sign-in of {self._server!r} has stopped", server=self._server
            ) from None
        try:
            await reply.done.wait()
        finally:
            reply.abandon()
        if reply.error is not None:
            raise reply.error
        assert isinstance(reply.value, _Grant | AuthStatus | bool)
        return reply.value

    async def _ask_grant(self, make: Callable[[_Waiter], _Message]) -> _Grant:
        result = await self._ask(make)
        assert isinstance(result, _Grant)
        return result

    async def _handle(self, message: _Message) -> None:
        match message:
            case _NonceSeen(origin=origin, nonce=nonce):
                self._nonces[origin] = nonce
                return
            case _PromptAnswered():
                await self._finish_sign_in(message)
                return
            case _DeviceAnswered():
                await self._finish_device(message)
                return
        try:
            match message:
                case _Need(reply=reply):
                    self._answer(reply, await self._current())
                case _Challenged() as challenged:
                    self._answer(challenged.reply, await self._challenged(challenged))
                case _Login(prompt=prompt, redirect_uri=redirect_uri, scopes=scopes, reply=reply):
                    result = await self._login(prompt, redirect_uri, scopes)
                    if isinstance(result, _Wait):
                        assert self._pending is not None
                        self._pending.join(reply, status=True)
                    else:
                        reply.set(result)
                case _LoginDevice(show=show, scopes=scopes, reply=reply):
                    result = await self._login_device(show, scopes)
                    if isinstance(result, _Wait):
                        assert self._pending is not None
                        self._pending.join(reply, status=True)
                    else:
                        reply.set(result)
                case _Logout(reply=reply):
                    reply.set(await self._logout())
        except Exception as exc:  # a device prompt of the host, or the flow: this one fails
            message.reply.fail(self._failure(exc))

    def _answer(self, reply: _Waiter, result: _Grant | AuthStatus | _Wait) -> None:
        """Reply now, or (``_WAIT``) when the pending sign-in ends: with its status for a
        login, else with the new grant."""
        if isinstance(result, _Wait):
            assert self._pending is not None
            self._pending.join(reply, status=False)
        else:
            reply.set(result)

    def _failure(self, exc: Exception) -> McpError:
        """What the asker gets for ``exc``, raised while serving it (a server's answer, the
        network, the host's device prompt)."""
        if isinstance(exc, AuthorizationError):
            if isinstance(exc, AuthorizationRequired):
                self._publish(AuthState.NEEDS_AUTH, reason=str(exc), hint=exc.hint or self._hint)
            exc.server = exc.server or self._server
            return exc
        if isinstance(exc, McpError):  # RefreshUnreachable, a key the JOSE library refused
            return exc
        if isinstance(exc, httpx.HTTPError | OSError):
            return OAuthFlowError(
                f"the authorization server of {self._server!r} could not be reached "
                f"({type(exc).__name__})",
                server=self._server,
            )
        logger.warning("%s: the sign-in failed: %s", self._server, type(exc).__name__)
        failure = OAuthFlowError(
            f"the sign-in of {self._server!r} failed: {type(exc).__name__}", server=self._server
        )
        failure.__cause__ = exc
        return failure

    def _fail_waiters(self, current: _Message | None) -> None:
        """Fail the reply of ``current``, of every queued message and of the pending sign-in,
        synchronously, and close the mailbox (a later or blocked send raises, which
        :meth:`_ask` turns into the same error)."""
        pending = [] if current is None else [current]
        while True:
            try:
                pending.append(self._receive.receive_nowait())
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                break
        self._receive.close()
        waiters = [
            message.reply
            for message in pending
            if not isinstance(message, _NonceSeen | _PromptAnswered | _DeviceAnswered)
        ]
        if self._pending is not None:
            self._pending.scope.cancel()
            waiters.extend(self._pending.waiters())
            self._pending = None
        for waiter in waiters:
            waiter.fail(
                AuthorizationError(
                    f"the sign-in of {self._server!r} has stopped", server=self._server
                )
            )

    # ------------------------------------------------------------------ requests

    def _tell(self, message: _NonceSeen) -> None:
        """Send the actor a message that needs no reply; dropped when its mailbox is full (a
        nonce is a hint: the request that saw it carries it on by itself)."""
        try:
            self._send.send_nowait(message)
        except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
            return

    def _apply(self, request: httpx.Request, grant: _Grant, nonce: str | None) -> None:
        """Put ``grant`` on ``request``, with a DPoP proof bound to ``nonce`` (called in the
        request's task: reads nothing of the actor's state but what ``grant`` carries)."""
        if grant.token is None:
            request.headers.pop("authorization", None)
            return
        if grant.dpop is not None and grant.token_type == "DPoP":
            request.headers["Authorization"] = f"DPoP {grant.token}"
            request.headers["DPoP"] = grant.dpop.proof(
                method=request.method,
                url=str(request.url),
                nonce=nonce,
                access_token=grant.token,
            )
        else:
            request.headers["Authorization"] = f"Bearer {grant.token}"

    def _grant(self) -> _Grant:
        tokens = self._credential.tokens if self._credential is not None else None
        if tokens is None:
            return _Grant(token=None)
        dpop = self._dpop if tokens.token_type == "DPoP" else None
        return _Grant(
            token=tokens.access_token,
            token_type=tokens.token_type,
            dpop=dpop,
            nonce=self._nonces.get(self._origin),
        )

    def _expired(self, tokens: TokenRecord) -> bool:
        return tokens.expires_at is not None and tokens.expires_at - EXPIRY_SKEW <= self._clock()

    async def _load(self) -> None:
        """The stored credential of this server (the most recently saved, whatever issuer)."""
        if self._loaded:
            return
        found = await self._store.find(self._server, self._resource_key, self._tenant)
        usable = [c for c in found if c.tokens is not None]
        if usable:
            self._adopt(max(usable, key=lambda c: c.tokens.obtained_at if c.tokens else 0.0))
        self._loaded = True

    def _adopt(self, credential: Credential) -> None:
        self._credential = credential
        if credential.dpop_key is not None:
            self._dpop = DPoPKey.from_pem(credential.dpop_key)
        tokens = credential.tokens
        if tokens is not None:
            self._publish(AuthState.SIGNED_IN)

    async def _current(self) -> _Grant | _Wait:
        await self._load()
        credential = self._credential
        tokens = credential.tokens if credential is not None else None
        if tokens is not None and not self._expired(tokens):
            return self._grant()
        if tokens is not None and credential is not None:
            return await self._refresh(credential) or self._grant()
        if self._settings.grant is Grant.CLIENT_CREDENTIALS:
            await self._sign_in_machine(await self._discover(None))
            return self._grant()
        if self._pending is not None:
            return _WAIT  # no token until the user is back: the request goes out with it
        return _Grant(token=None)  # the server's 401 says where to sign in

    async def _challenged(self, message: _Challenged) -> _Grant | _Wait:
        challenge = bearer_challenge(message.challenges)
        if challenge is None:
            raise CredentialsRefused(
                f"the server refused the credentials (HTTP {message.status} without a Bearer "
                f"challenge): OAuth cannot help; check the headers configured for "
                f"{self._server!r} (or the user information in its URL)",
                server=self._server,
                hint=f"check the headers of {self._server} in the configuration",
            )
        held = self._credential.tokens if self._credential is not None else None
        if held is not None and message.sent is not None and held.access_token != message.sent:
            return self._grant()  # another request already got a newer token: use it
        if message.status == 401 and self._pending is not None:
            return _WAIT  # the sign-in under way gives the token
        if message.status == 403:
            return await self._step_up(challenge, message.step_ups)
        if challenge.scopes is not None:
            self._challenge_scopes = challenge.scopes
        metadata = await self._discover(challenge)
        credential = self._credential
        if (
            credential is not None
            and credential.key.issuer == metadata.issuer
            and credential.tokens is not None
            and credential.tokens.refresh_token is not None
            and message.sent is not None
        ):
            # The token was refused before its time: one refresh, then the user.
            try:
                return await self._refresh(credential, force=True) or self._grant()
            except AuthorizationRequired:
                pass
        return await self._sign_in(metadata, scopes=None)

    async def _step_up(self, challenge: Challenge, step_ups: int) -> _Grant | _Wait:
        previous = (
            self._credential.tokens.scopes if self._credential and self._credential.tokens else ()
        )
        scopes = step_up_scopes(previous or self._challenge_scopes or (), challenge.scopes)
        if step_ups > self._settings.max_step_up:
            raise InsufficientScope(
                f"the server {self._server!r} still refuses the request for lack of scope after "
                f"{self._settings.max_step_up} re-authorizations (it asks for "
                f"{' '.join(challenge.scopes or ()) or 'an unnamed scope'}): "
                f"{challenge.error_description or 'insufficient_scope'}",
                server=self._server,
                hint=self._hint,
                scopes=scopes,
            )
        if self._pending is not None:
            return _WAIT  # after the sign-in under way, the request is sent again
        metadata = await self._discover(challenge)
        if self._settings.grant is not Grant.CLIENT_CREDENTIALS and self._prompt is None:
            raise InsufficientScope(
                f"the server {self._server!r} needs a wider scope ({' '.join(scopes)}), which "
                f"takes a new sign-in: {self._hint}",
                server=self._server,
                hint=self._hint,
                scopes=scopes,
            )
        return await self._sign_in(metadata, scopes=scopes)

    async def _sign_in(
        self, metadata: AuthorizationServerMetadata, *, scopes: tuple[str, ...] | None
    ) -> _Grant | _Wait:
        if self._settings.grant is Grant.CLIENT_CREDENTIALS:
            await self._sign_in_machine(metadata, scopes)
            return self._grant()
        if self._pending is not None:
            return _WAIT
        if self._prompt is None:
            raise AuthorizationRequired(
                f"the server {self._server!r} needs a sign-in at {metadata.issuer}; to sign in, "
                f"run: {self._hint}",
                server=self._server,
                hint=self._hint,
            )
        return await self._begin_sign_in(metadata, self._prompt, None, scopes)

    # ------------------------------------------------------------------ discovery

    async def _discover(self, challenge: Challenge | None) -> AuthorizationServerMetadata:
        """The protected resource's metadata (from the challenge's URL, else the well-known
        ones), then its authorization server's; without any, the 2025-03-26 defaults."""
        urls = protected_resource_metadata_urls(
            self._server_url,
            challenge.resource_metadata if challenge is not None else None,
            allow_http=self._allow_http,
        )
        prm: ProtectedResourceMetadata | None = None
        for url in urls:
            found = await self._fetch_document(url)
            if found is not None:
                prm = parse_protected_resource_metadata(
                    found, url=url, server_url=self._server_url, allow_http=self._allow_http
                )
                break
        self._prm = prm
        if prm is None:
            issuer = origin_of(self._server_url)
            self._resource = self._resource_key
            metadata = await self._authorization_server(issuer, legacy=True)
        else:
            self._resource = prm.resource
            issuers = prm.authorization_servers
            held = self._credential.key.issuer if self._credential is not None else None
            issuer = held if held is not None and held in issuers else issuers[0]
            metadata = await self._authorization_server(issuer, legacy=False)
        self._metadata = metadata
        return metadata

    async def _authorization_server(
        self, issuer: str, *, legacy: bool
    ) -> AuthorizationServerMetadata:
        for url in authorization_server_metadata_urls(issuer):
            found = await self._fetch_document(url)
            if found is not None:
                return parse_authorization_server_metadata(
                    found, url=url, issuer=issuer, allow_http=self._allow_http
                )
        if legacy:
            return legacy_authorization_server(self._server_url)
        raise OAuthMetadataError(
            f"the authorization server {issuer} publishes no metadata (tried "
            f"{', '.join(authorization_server_metadata_urls(issuer))})",
            server=self._server,
            url=issuer,
        )

    async def _metadata_for(self, issuer: str) -> AuthorizationServerMetadata:
        if self._metadata is not None and self._metadata.issuer == issuer:
            return self._metadata
        if issuer == origin_of(self._server_url):
            metadata = await self._authorization_server(issuer, legacy=True)
        else:
            metadata = await self._authorization_server(issuer, legacy=False)
        self._metadata = metadata
        return metadata

    async def _fetch_document(self, url: str) -> bytes | None:
        """A metadata document's body, or None when it is not there (any 4xx, a redirect)."""
        try:
            status, body, _ = await self._exchange(
                "GET", url, headers={"Accept": "application/json"}
            )
        except (httpx.HTTPError, OSError) as exc:
            raise OAuthMetadataError(
                f"the metadata at {url} could not be fetched ({type(exc).__name__}); "
                "check that the server is reachable",
                server=self._server,
                url=url,
            ) from exc
        if status == 200:
            return body
        if 300 <= status < 500:
            return None
        raise OAuthMetadataError(
            f"the metadata at {url} answered {status}", server=self._server, url=url
        )

    async def _exchange(
        self, method: str, url: str, *, headers: dict[str, str], content: bytes | None = None
    ) -> tuple[int, bytes, httpx.Headers]:
        """One request to the authorization server; the body read up to the cap."""
        client = self._client
        assert client is not None
        return await _send(client, self._server, method, url, headers=headers, content=content)

    # ------------------------------------------------------------------ clients

    def _key(self, issuer: str) -> CredentialKey:
        return CredentialKey(
            server=self._server, resource=self._resource_key, issuer=issuer, tenant=self._tenant
        )

    async def _client_for(
        self, metadata: AuthorizationServerMetadata, redirect_uri: str | None
    ) -> tuple[Credential, ClientRecord]:
        """This client at ``metadata``'s issuer: the stored registration (of THAT issuer only),
        else pre-registered, else a Client ID Metadata Document, else dynamic registration."""
        key = self._key(metadata.issuer)
        stored = await self._store.load(key)
        credential = stored if stored is not None else Credential(key=key)
        settings = self._settings
        if settings.client_id:
            method = choose_token_auth_method(
                metadata.token_endpoint_auth_methods_supported,
                has_secret=settings.client_secret is not None,
                has_key=settings.private_key is not None,
                configured=settings.token_endpoint_auth_method,
            )
            return credential, ClientRecord(
                client_id=settings.client_id,
                client_secret=settings.client_secret,
                token_endpoint_auth_method=method,
                redirect_uris=(redirect_uri,) if redirect_uri else (),
                source="pre-registered",
            )
        record = credential.client
        if record is not None and self._still_usable(record, redirect_uri):
            return credential, record
        if metadata.client_id_metadata_document_supported and settings.client_metadata_url:
            return credential, ClientRecord(
                client_id=settings.client_metadata_url,
                token_endpoint_auth_method="none",
                redirect_uris=(redirect_uri,) if redirect_uri else (),
                source="cimd",
            )
        if metadata.registration_endpoint is None:
            raise OAuthFlowError(
                f"the authorization server {metadata.issuer} offers no way for this client to "
                "register (no registration_endpoint, no client ID metadata documents): set "
                f"oauth.client_id (and client_secret) for {self._server!r}",
                server=self._server,
            )
        record = await self._register(metadata, redirect_uri)
        credential = attrs.evolve(credential, client=record, tokens=None)
        if stored is None or stored.tokens is None:
            # Kept at once, so that a sign-in the user never finishes (a closed window, a
            # logout, the process ending) does not cost a registration each time. Stored
            # tokens of the client this one replaces are left until the new sign-in ends:
            # abandoning it must not sign the user out.
            await self._store.save(credential)
            credential = await self._store.load(key) or credential
        return credential, record

    def _still_usable(self, record: ClientRecord, redirect_uri: str | None) -> bool:
        if record.source == "pre-registered":
            return False  # the settings changed: no client_id any more
        if record.source == "cimd" and not self._settings.client_metadata_url:
            return False
        expires = record.client_secret_expires_at
        if expires and expires <= self._clock():
            return False
        return (
            redirect_uri is None or not record.redirect_uris or redirect_uri in record.redirect_uris
        )

    async def _register(
        self, metadata: AuthorizationServerMetadata, redirect_uri: str | None
    ) -> ClientRecord:
        assert metadata.registration_endpoint is not None
        supported = metadata.token_endpoint_auth_methods_supported
        if supported is None or "none" in supported:
            method = "none"
        elif "client_secret_basic" in supported:
            method = "client_secret_basic"
        elif "client_secret_post" in supported:
            method = "client_secret_post"
        else:
            method = supported[0] if supported else "none"
        grants = ["authorization_code", "refresh_token"]
        if self._settings.grant is Grant.CLIENT_CREDENTIALS:
            grants = ["client_credentials"]
        body = registration_body(
            client_name=self._settings.client_name,
            redirect_uris=[redirect_uri] if redirect_uri else [],
            token_endpoint_auth_method=method,
            grant_types=grants,
        )
        url = metadata.registration_endpoint
        try:
            status, answer, _ = await self._exchange(
                "POST",
                url,
                headers={"Content-Type": "application/json", "Accept": "application/json"},
                content=body,
            )
        except (httpx.HTTPError, OSError) as exc:
            raise OAuthFlowError(
                f"registering at {url} failed ({type(exc).__name__})", server=self._server
            ) from exc
        registered = parse_registration_response(status, answer, url=url)
        logger.info("%s: registered at %s", self._server, metadata.issuer)
        return ClientRecord(
            client_id=registered.client_id,
            client_secret=registered.client_secret,
            client_secret_expires_at=registered.client_secret_expires_at,
            token_endpoint_auth_method=registered.token_endpoint_auth_method or method,
            redirect_uris=(redirect_uri,) if redirect_uri else (),
            source="dynamic",
        )

    def _client_auth(
        self, record: ClientRecord, metadata: AuthorizationServerMetadata
    ) -> ClientAuth:
        method = record.token_endpoint_auth_method
        assertion = None
        if method == "private_key_jwt":
            if self._settings.private_key is None:
                raise OAuthFlowError(
                    f"private_key_jwt needs oauth.private_key for {self._server!r}",
                    server=self._server,
                )
            assertion = client_assertion(
                client_id=record.client_id,
                audience=metadata.issuer,
                private_key_pem=self._settings.private_key,
                algorithm=self._settings.signing_algorithm,
                now=self._clock(),
            )
        elif (
            method in ("client_secret_basic", "client_secret_post") and record.client_secret is None
        ):
            method = "none"
        return ClientAuth(
            client_id=record.client_id,
            method=method,
            client_secret=record.client_secret,
            assertion=assertion,
        )

    # ------------------------------------------------------------------ tokens

    def _scopes(
        self, metadata: AuthorizationServerMetadata, wanted: tuple[str, ...] | None
    ) -> tuple[str, ...]:
        if wanted is not None:
            return wanted
        return select_scopes(
            configured=self._settings.scopes,
            challenge=self._challenge_scopes,
            resource_scopes=self._prm.scopes_supported if self._prm is not None else None,
            server_scopes=metadata.scopes_supported,
            want_refresh=self._settings.grant is Grant.AUTHORIZATION_CODE,
        )

    def _dpop_key(self, credential: Credential) -> DPoPKey | None:
        if not self._settings.dpop:
            return None
        if self._dpop is None:
            self._dpop = (
                DPoPKey.from_pem(credential.dpop_key) if credential.dpop_key else DPoPKey.generate()
            )
        return self._dpop

    async def _token(
        self,
        metadata: AuthorizationServerMetadata,
        record: ClientRecord,
        grant_type: str,
        *,
        scopes: Sequence[str] = (),
        previous_refresh: str | None = None,
        dpop: DPoPKey | None = None,
        resource: str | None = None,
        **fields: str,
    ) -> TokenResponse:
        """A token request (with a DPoP proof when ``dpop``; a ``use_dpop_nonce`` answer is
        retried once with the nonce); ``resource``: the one the authorization asked for
        (default: the server's current one). Raises :class:`OAuthFlowError` (the server's
        error code) or ``httpx.HTTPError`` (it could not be reached)."""
        url = metadata.token_endpoint
        for _attempt in range(2):
            request = token_request(
                url,
                grant_type,
                self._client_auth(record, metadata),
                scopes=scopes,
                resource=resource if resource is not None else self._resource,
                **fields,
            )
            headers = dict(request.headers)
            headers["Content-Type"] = "application/x-www-form-urlencoded"
            headers["Accept"] = "application/json"
            if dpop is not None:
                headers["DPoP"] = dpop.proof(
                    method="POST", url=url, nonce=self._nonces.get(origin_of(url))
                )
            status, body, answer_headers = await self._exchange(
                "POST", url, headers=headers, content=request.body()
            )
            nonce = answer_headers.get("dpop-nonce")
            if nonce:
                self._nonces[origin_of(url)] = nonce[:_MAX_NONCE]
            try:
                return parse_token_response(
                    status,
                    body,
                    now=self._clock(),
                    requested_scopes=scopes,
                    previous_refresh_token=previous_refresh,
                    what=f"the token endpoint {url}",
                )
            except OAuthFlowError as exc:
                if exc.error == "use_dpop_nonce" and dpop is not None and nonce and _attempt == 0:
                    continue
                exc.server = self._server
                raise
        raise AssertionError("unreachable")

    async def _store_tokens(
        self,
        credential: Credential,
        record: ClientRecord,
        answer: TokenResponse,
        dpop: DPoPKey | None,
    ) -> None:
        tokens = TokenRecord(
            access_token=answer.access_token,
            token_type=answer.token_type if dpop is not None else "Bearer",
            refresh_token=answer.refresh_token,
            expires_at=answer.expires_at,
            scopes=answer.scopes,
            obtained_at=self._clock(),
        )
        updated = attrs.evolve(
            credential,
            client=record,
            tokens=tokens,
            dpop_key=dpop.to_pem() if dpop is not None else credential.dpop_key,
        )
        await self._store.save(updated)
        reloaded = await self._store.load(updated.key)
        self._credential = reloaded if reloaded is not None else updated
        self._loaded = True
        self._publish(AuthState.SIGNED_IN)

    async def _refresh(self, credential: Credential, *, force: bool = False) -> _Wait | None:
        """Refresh ``credential``'s token, once: under the store's lock, a newer revision
        saved by another process meanwhile is used as it is. ``_WAIT``: there is no refresh
        token, and the host's prompt (its opt-in) was handed a new sign-in (or one is under
        way): the asker waits for it."""
        async with self._store.lock(credential.key):
            latest = await self._store.load(credential.key)
            if (
                latest is not None
                and latest.tokens is not None
                and latest.revision > credential.revision
                and not self._expired(latest.tokens)
            ):
                self._adopt(latest)
                return None
            current = latest if latest is not None and latest.tokens is not None else credential
            tokens = current.tokens
            assert tokens is not None
            record = current.client
            if tokens.refresh_token is None or record is None:
                if self._settings.grant is Grant.CLIENT_CREDENTIALS:
                    metadata = await self._metadata_for_refresh(current)
                    await self._sign_in_machine(metadata)
                    return None
                if self._pending is not None:
                    return _WAIT
                if self._prompt is not None:
                    return await self._begin_sign_in(
                        await self._discover(None), self._prompt, None, None
                    )
                self._credential = attrs.evolve(current, tokens=None)
                raise AuthorizationRequired(
                    f"the token of {self._server!r} ran out and there is no refresh token; to "
                    f"sign in again, run: {self._hint}",
                    server=self._server,
                    hint=self._hint,
                )
            metadata = await self._metadata_for_refresh(current)
            dpop = self._dpop_key(current) if tokens.token_type == "DPoP" else None
            try:
                answer = await self._token(
                    metadata,
                    record,
                    "refresh_token",
                    refresh_token=tokens.refresh_token,
                    previous_refresh=tokens.refresh_token,
                    dpop=dpop,
                )
            except (httpx.HTTPError, OSError) as exc:
                raise RefreshUnreachable(
                    f"refreshing the token of {self._server!r} failed: {metadata.token_endpoint} "
                    f"could not be reached ({type(exc).__name__}); the stored sign-in is kept "
                    "and the refresh will be tried again"
                ) from exc
            except OAuthFlowError as exc:
                if exc.error in ("invalid_grant", "invalid_client", "unauthorized_client"):
                    # The record stays in place (the user may inspect it; login replaces it).
                    self._credential = attrs.evolve(current, tokens=None)
                    raise AuthorizationRequired(
                        f"the authorization server refused to refresh the token of "
                        f"{self._server!r} ({exc.error}); to sign in again, run: {self._hint}",
                        server=self._server,
                        hint=self._hint,
                    ) from exc
                if exc.error is None:
                    raise RefreshUnreachable(
                        f"refreshing the token of {self._server!r} failed ({exc}); the stored "
                        "sign-in is kept and the refresh will be tried again"
                    ) from exc
                raise
            await self._store_tokens(current, record, answer, dpop)
            logger.info("%s: token refreshed", self._server)
            return None

    async def _metadata_for_refresh(self, credential: Credential) -> AuthorizationServerMetadata:
        try:
            return await self._metadata_for(credential.key.issuer)
        except OAuthMetadataError as exc:
            if isinstance(exc.__cause__, httpx.HTTPError | OSError):
                raise RefreshUnreachable(
                    f"refreshing the token of {self._server!r} failed: {exc}; the stored "
                    "sign-in is kept and the refresh will be tried again"
                ) from exc
            raise

    # ------------------------------------------------------------------ grants

    async def _begin_sign_in(
        self,
        metadata: AuthorizationServerMetadata,
        prompt: AuthorizationPrompt,
        redirect_uri: str | None,
        scopes: tuple[str, ...] | None,
    ) -> _Wait:
        """Start the authorization code flow with PKCE: the client, the verifier, the state and
        the URL here; ``prompt`` (host code, which may wait minutes for the user) in a task of
        its own, whose answer comes back as :class:`_PromptAnswered`. The asker joins the
        sign-in's waiters; so does whoever asks while it is pending (one at a time)."""
        if self._pending is not None:
            return _WAIT
        redirect = redirect_uri or self._settings.redirect_uri or DEFAULT_REDIRECT_URI
        credential, record = await self._client_for(metadata, redirect)
        chosen = self._scopes(metadata, scopes)
        verifier, challenge = pkce_pair()
        state = new_state()
        url = authorization_url(
            metadata,
            client_id=record.client_id,
            redirect_uri=redirect,
            scopes=chosen,
            state=state,
            code_challenge=challenge,
            resource=self._resource,
        )
        request = AuthorizationRequest(
            server=self._server,
            url=url,
            redirect_uri=redirect,
            issuer=metadata.issuer,
            scopes=chosen,
        )
        prompts = self._prompts
        assert prompts is not None
        self._sign_ins += 1
        self._pending = _PendingSignIn(
            number=self._sign_ins,
            metadata=metadata,
            credential=credential,
            record=record,
            redirect_uri=redirect,
            scopes=chosen,
            resource=self._resource,
            state=state,
            verifier=verifier,
            scope=trio.CancelScope(),
        )
        prompts.start_soon(
            self._ask_user, self._pending.number, prompt, request, self._pending.scope
        )
        self._republish()
        logger.info("%s: a sign-in at %s waits for the user", self._server, metadata.issuer)
        return _WAIT

    async def _ask_user(
        self,
        number: int,
        prompt: AuthorizationPrompt,
        request: AuthorizationRequest,
        scope: trio.CancelScope,
    ) -> None:
        """The host's prompt, in a task of its own (a child of the actor's): its answer, or
        what it raised, goes back through the mailbox (:meth:`_answer_from_child`)."""
        await self._answer_from_child(
            scope,
            functools.partial(prompt, request),
            lambda answer, error: _PromptAnswered(number=number, answer=answer, error=error),
        )

    async def _answer_from_child(
        self,
        scope: trio.CancelScope,
        work: Callable[[], Awaitable[Any]],
        answered: Callable[[Any, Exception | None], _PromptAnswered | _DeviceAnswered],
    ) -> None:
        """Run a pending sign-in's ``work`` (the host's prompt, the device polling) in this
        child task of the actor and send its outcome back, ``answered(value, None)`` or
        ``answered(None, error)``, through the mailbox: the actor alone acts on it. Cancelled
        (a logout, the actor's end): nothing is sent, the actor has already failed the
        sign-in's waiters."""
        message: _PromptAnswered | _DeviceAnswered | None = None
        with scope:
            try:
                message = answered(await work(), None)
            except Exception as exc:  # the host's code, the token endpoint, the network
                message = answered(None, exc)
        if message is None:
            return
        try:
            await self._send.send(message)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return  # the actor has ended: it failed the waiters

    async def _finish_sign_in(self, answered: _PromptAnswered) -> None:
        """The prompt of the pending sign-in answered: check the redirect, exchange the code,
        store the tokens, then resolve every waiter at once (or fail them all)."""
        pending = self._pending
        if not isinstance(pending, _PendingSignIn) or pending.number != answered.number:
            return  # a sign-in cancelled meanwhile (a logout)
        error: McpError | None = None
        if answered.error is not None:
            error = self._prompt_failure(answered.error)
        else:
            try:
                await self._exchange_code(pending, answered.answer)
            except Exception as exc:  # the authorization server's answer, the network
                error = self._failure(exc)
        self._settle(pending, error)

    def _settle(self, pending: _Pending, error: McpError | None) -> None:
        """The pending sign-in ended: answer everyone who waited for it, at once (the new
        grant for requests, the status for logins), or fail them all with ``error``."""
        self._pending = None
        self._republish()
        if error is not None:
            for waiter in pending.waiters():
                waiter.fail(error)
            return
        grant = self._grant()
        for waiter in pending.for_grant:
            waiter.set(grant)
        for waiter in pending.for_status:
            waiter.set(self._status)

    def _prompt_failure(self, exc: Exception) -> McpError:
        if isinstance(exc, McpError):  # the front end's own error (a loopback receiver's)
            return self._failure(exc)
        logger.warning("%s: the sign-in prompt failed: %s", self._server, type(exc).__name__)
        failure = OAuthFlowError(
            f"the sign-in of {self._server!r} failed: its prompt raised {type(exc).__name__}",
            server=self._server,
        )
        failure.__cause__ = exc
        return failure

    async def _exchange_code(self, pending: _PendingSignIn, answer: object) -> None:
        if not isinstance(answer, str):
            raise OAuthFlowError(
                f"the sign-in prompt of {self._server!r} returned a {type(answer).__name__}, not "
                "the URL the browser was redirected to",
                server=self._server,
            )
        metadata = pending.metadata
        code = parse_redirect(
            answer,
            state=pending.state,
            issuer=metadata.issuer,
            iss_supported=metadata.iss_parameter_supported,
            redirect_uri=pending.redirect_uri,
        )
        stored = await self._store.load(pending.credential.key)
        credential = stored if stored is not None else pending.credential
        dpop = self._dpop_key(credential)
        try:
            tokens = await self._token(
                metadata,
                pending.record,
                "authorization_code",
                scopes=(),
                dpop=dpop,
                resource=pending.resource,
                code=code,
                code_verifier=pending.verifier,
                redirect_uri=pending.redirect_uri,
            )
        except (httpx.HTTPError, OSError) as exc:
            raise OAuthFlowError(
                f"the token endpoint {metadata.token_endpoint} could not be reached "
                f"({type(exc).__name__})",
                server=self._server,
            ) from exc
        if not tokens.scopes and pending.scopes:
            tokens = attrs.evolve(tokens, scopes=pending.scopes)
        await self._store_tokens(credential, pending.record, tokens, dpop)
        logger.info("%s: signed in at %s", self._server, metadata.issuer)

    def _cancel_sign_in(self) -> None:
        """A logout: the pending sign-in's task (the prompt, or the device flow's polling) is
        cancelled, its waiters fail."""
        pending, self._pending = self._pending, None
        if pending is None:
            return
        pending.scope.cancel()
        logger.info("%s: the sign-in waiting for the user was cancelled", self._server)
        for waiter in pending.waiters():
            waiter.fail(
                AuthorizationRequired(
                    f"the user signed out of {self._server!r} while its sign-in was waiting "
                    f"for them: the sign-in was cancelled; to sign in again, run: {self._hint}",
                    server=self._server,
                    hint=self._hint,
                )
            )

    async def _sign_in_machine(
        self, metadata: AuthorizationServerMetadata, scopes: tuple[str, ...] | None = None
    ) -> None:
        """The client credentials grant: the client's own secret or key, no user."""
        if not self._settings.client_id:
            raise OAuthFlowError(
                f"the client credentials grant needs oauth.client_id (and client_secret or "
                f"private_key) for {self._server!r}",
                server=self._server,
            )
        credential, record = await self._client_for(metadata, None)
        chosen = self._scopes(metadata, scopes)
        dpop = self._dpop_key(credential)
        try:
            tokens = await self._token(
                metadata, record, "client_credentials", scopes=chosen, dpop=dpop
            )
        except (httpx.HTTPError, OSError) as exc:
            raise RefreshUnreachable(
                f"the token endpoint {metadata.token_endpoint} could not be reached "
                f"({type(exc).__name__})"
            ) from exc
        except OAuthFlowError as exc:
            raise AuthorizationRequired(
                f"the authorization server refused this client's credentials for "
                f"{self._server!r}: {exc}; check oauth.client_id and its secret or key",
                server=self._server,
                hint=f"check the oauth settings of {self._server}",
            ) from exc
        await self._store_tokens(credential, record, tokens, dpop)

    async def _login(
        self,
        prompt: AuthorizationPrompt,
        redirect_uri: str | None,
        scopes: tuple[str, ...] | None,
    ) -> AuthStatus | _Wait:
        if self._settings.grant is not Grant.CLIENT_CREDENTIALS and self._pending is not None:
            return _WAIT  # one sign-in at a time: this login waits for the one under way
        await self._load()
        metadata = await self._discover(None)
        if self._settings.grant is Grant.CLIENT_CREDENTIALS:
            await self._sign_in_machine(metadata, scopes)
            return self._status
        return await self._begin_sign_in(metadata, prompt, redirect_uri, scopes)

    async def _login_device(
        self, show: DevicePrompt, scopes: tuple[str, ...] | None
    ) -> AuthStatus | _Wait:
        """Start the device authorization grant (RFC 8628): the client and the device code
        here; showing the code (host code) and polling the token endpoint (for minutes) in a
        task of its own, whose outcome comes back as :class:`_DeviceAnswered`. The asker
        joins the sign-in's waiters (one sign-in at a time: a pending one is joined)."""
        if self._pending is not None:
            return _WAIT
        await self._load()
        metadata = await self._discover(None)
        endpoint = metadata.device_authorization_endpoint
        if endpoint is None:
            raise OAuthFlowError(
                f"the authorization server {metadata.issuer} offers no device authorization "
                "grant: sign in with a browser instead",
                server=self._server,
            )
        credential, record = await self._client_for(metadata, None)
        chosen = self._scopes(metadata, scopes)
        request = device_authorization_request(
            endpoint, self._client_auth(record, metadata), scopes=chosen, resource=self._resource
        )
        headers = dict(request.headers)
        headers["Content-Type"] = "application/x-www-form-urlencoded"
        headers["Accept"] = "application/json"
        status, answer, _ = await self._exchange(
            "POST", endpoint, headers=headers, content=request.body()
        )
        device = parse_device_authorization(
            status, answer, url=endpoint, allow_http=self._allow_http
        )
        interval = max(device.interval, _MIN_DEVICE_INTERVAL)
        expires_at = trio.current_time() + device.expires_in
        dpop = self._dpop_key(credential)
        client, prompts = self._client, self._prompts
        assert client is not None
        assert prompts is not None
        poll = _DevicePoll(
            server=self._server,
            client=client,
            url=metadata.token_endpoint,
            device_code=device.device_code,
            resource=self._resource,
            authenticate=functools.partial(self._client_auth, record, metadata),
            dpop=dpop,
            nonce=self._nonces.get(origin_of(metadata.token_endpoint)),
            clock=self._clock,
            interval=interval,
            expires_at=expires_at,
            hint=self._hint,
        )
        shown = DeviceAuthorization(
            server=self._server,
            verification_uri=device.verification_uri,
            user_code=device.user_code,
            verification_uri_complete=device.verification_uri_complete,
            expires_at=expires_at,
            interval=interval,
        )
        self._sign_ins += 1
        pending = _PendingDevice(
            number=self._sign_ins,
            metadata=metadata,
            credential=credential,
            record=record,
            scopes=chosen,
            scope=trio.CancelScope(),
            dpop=dpop,
        )
        self._pending = pending
        prompts.start_soon(self._run_device, pending.number, show, shown, poll, pending.scope)
        self._republish()
        logger.info("%s: a device sign-in at %s waits for the user", self._server, metadata.issuer)
        return _WAIT

    async def _run_device(
        self,
        number: int,
        show: DevicePrompt,
        shown: DeviceAuthorization,
        poll: _DevicePoll,
        scope: trio.CancelScope,
    ) -> None:
        """The device sign-in's task (a child of the actor's): the host's ``show``, then the
        polling; the token response, or what ended it, goes back through the mailbox
        (:meth:`_answer_from_child`)."""

        async def work() -> TokenResponse:
            await show(shown)
            return await poll.run(self._tell)

        await self._answer_from_child(
            scope,
            work,
            lambda tokens, error: _DeviceAnswered(number=number, tokens=tokens, error=error),
        )

    async def _finish_device(self, answered: _DeviceAnswered) -> None:
        """The device sign-in's task ended: store the tokens, then resolve every waiter at
        once (or fail them all)."""
        pending = self._pending
        if not isinstance(pending, _PendingDevice) or pending.number != answered.number:
            return  # a sign-in cancelled meanwhile (a logout)
        error: McpError | None = None
        if answered.error is not None:
            error = self._failure(answered.error)
        else:
            tokens = answered.tokens
            assert tokens is not None
            if not tokens.scopes and pending.scopes:
                tokens = attrs.evolve(tokens, scopes=pending.scopes)
            try:
                stored = await self._store.load(pending.credential.key)
                credential = stored if stored is not None else pending.credential
                await self._store_tokens(credential, pending.record, tokens, pending.dpop)
                logger.info("%s: signed in at %s (device)", self._server, pending.metadata.issuer)
            except Exception as exc:  # the store
                error = self._failure(exc)
        self._settle(pending, error)

    async def _logout(self) -> bool:
        self._cancel_sign_in()
        found = await self._store.find(self._server, self._resource_key, self._tenant)
        deleted = False
        for credential in found:
            deleted = await self._store.delete(credential.key) or deleted
        deleted = deleted or self._credential is not None
        self._credential = None
        self._dpop = None
        self._loaded = True
        self._publish(AuthState.SIGNED_OUT)
        return deleted

    # ------------------------------------------------------------------ status

    def _publish(
        self, state: AuthState, *, reason: str | None = None, hint: str | None = None
    ) -> None:
        self._reason, self._shown_hint = reason, hint
        pending = self._pending
        if pending is not None:
            waiting = f"a sign-in at {pending.metadata.issuer} is waiting for the user"
            reason = waiting if reason is None else f"{reason}; {waiting}"
        credential = self._credential
        tokens = credential.tokens if credential is not None else None
        self._status = AuthStatus(
            server=self._server,
            state=state,
            issuer=credential.key.issuer if credential is not None else None,
            scopes=tokens.scopes if tokens is not None else (),
            expires_at=tokens.expires_at if tokens is not None else None,
            has_refresh_token=tokens is not None and tokens.refresh_token is not None,
            client_source=credential.client.source
            if credential is not None and credential.client is not None
            else None,
            reason=reason,
            hint=hint,
        )

    def _republish(self) -> None:
        """The status again, as it was, with (or without) the pending sign-in's note."""
        self._publish(self._status.state, reason=self._reason, hint=self._shown_hint)


@asynccontextmanager
async def open_authorizer(
    *,
    server: str,
    settings: OAuthSettings,
    store: TokenStore,
    http: HttpParameters,
    prompt: AuthorizationPrompt | None = None,
    tenant: str = "",
    clock: Callable[[], float] = time.time,
) -> AsyncIterator[Authorizer]:
    """An :class:`Authorizer` running in its own nursery for the block (the command line's
    ``login``/``logout``, scripts); cancelled when the block ends."""
    authorizer = Authorizer(
        server=server,
        settings=settings,
        store=store,
        http=http,
        prompt=prompt,
        tenant=tenant,
        clock=clock,
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(authorizer.run)
        try:
            yield authorizer
        finally:
            nursery.cancel_scope.cancel()
