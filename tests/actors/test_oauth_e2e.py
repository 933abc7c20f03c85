"""OAuth end to end in the runtime: the REAL sign-in (``Authorizer``) and store
(``FileTokenStore`` in a temporary directory) against the fake OAuth world
(:class:`~trio_mcp.actors.testing.FakeOAuthServer`, serving a ``FakeServer`` behind the Bearer
check) on 127.0.0.1: NEEDS_AUTH with the exact hint, ``rt.login``, refresh on expiry, a refused
and an unreachable refresh, ``rt.logout``, the host's authorization callback (sign-in while
connecting, and step-up), and a legacy HTTP+SSE server behind OAuth.

Token expiry is the Authorizer's wall clock (:class:`Clock`, moved by hand); retries are trio
time, under a mock clock that jumps once the run has been idle for a moment of real time (the
file store works in threads, which an immediate jump would not wait for)."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio
import trio.testing

from tests.transports.http_fake import FakeLegacySse
from trio_mcp.actors import (
    EventSubscription,
    HostCallbacks,
    OAuthFactories,
    RetryPolicy,
    Runtime,
    RuntimeConfig,
    ServerConfig,
    ServerState,
    ServerStateChanged,
    TransportKind,
    open_runtime,
)
from trio_mcp.actors.testing import FakeOAuthServer, FakeServer, FakeTool, headless_sign_in
from trio_mcp.protocol import AuthorizationRequired, ServerDisconnected, ServerUnavailable
from trio_mcp.transports.http import HttpParameters
from trio_mcp.transports.oauth import (
    AuthorizationPrompt,
    AuthorizationRequest,
    Authorizer,
    AuthState,
    FileTokenStore,
    OAuthSettings,
    SignIn,
    TokenStore,
)

HINT = "trio-mcp login web"
SECRETS = ("access-", "refresh-", "code-", "dynamic-secret")


class Clock:
    """The wall clock of token expiry, moved by hand."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def idle_jump_clock() -> trio.testing.MockClock:
    """Jumps to the next deadline once nothing has run for 50 ms of real time."""
    return trio.testing.MockClock(autojump_threshold=0.05)


class Prompts:
    """The host's authorization callback: approves at once (through the fake's redirect) and
    keeps every request it was given."""

    def __init__(self) -> None:
        self.requests: list[AuthorizationRequest] = []

    async def __call__(self, request: AuthorizationRequest) -> str:
        self.requests.append(request)
        return await headless_sign_in(request)


def real_sign_ins(clock: Clock) -> OAuthFactories:
    """The real Authorizer (on ``clock``) and the real file store."""

    def sign_in(
        *,
        server: str,
        settings: OAuthSettings,
        store: TokenStore,
        http: HttpParameters,
        prompt: AuthorizationPrompt | None = None,
        tenant: str = "",
    ) -> SignIn:
        return Authorizer(
            server=server,
            settings=settings,
            store=store,
            http=http,
            prompt=prompt,
            tenant=tenant,
            clock=clock,
        )

    return OAuthFactories(sign_in=sign_in, store=FileTokenStore)


def world(**knobs: object) -> FakeOAuthServer:
    return FakeOAuthServer(mcp=FakeServer(name="web", tools=[FakeTool("echo")]), **knobs)  # type: ignore[arg-type]


@asynccontextmanager
async def runtime(
    fake: FakeOAuthServer,
    tmp_path: Path,
    clock: Clock,
    *,
    authorize: AuthorizationPrompt | None = None,
    server: ServerConfig | None = None,
) -> AsyncIterator[Runtime]:
    config = RuntimeConfig(
        servers=(server or fake.server_config("web"),),
        retry=RetryPolicy(jitter=0.0, park_probe_interval=300.0),
        credentials_dir=tmp_path / "credentials",
    )
    callbacks = HostCallbacks(authorize=authorize)
    async with open_runtime(config, callbacks=callbacks, oauth=real_sign_ins(clock)) as rt:
        yield rt


def stored(tmp_path: Path) -> list[Path]:
    """The credential files (lock files aside)."""
    folder = tmp_path / "credentials"
    return sorted(folder.glob("*.json")) if folder.exists() else []


async def state_reached(rt: Runtime, events: EventSubscription, state: ServerState) -> None:
    """Wait (on an events subscription opened before the cause) for ``web`` to reach ``state``."""
    if rt.status()["web"].state is state:
        return
    with trio.fail_after(30):
        async for event in events:
            if isinstance(event, ServerStateChanged) and event.new is state:
                return


async def echo(rt: Runtime, text: str) -> str | None:
    """Call the echo tool; what it echoed (the FakeServer's echo answers the arguments as
    JSON, the legacy server's the text)."""
    answer = (await rt.call("mcp_web_echo", {"text": text})).text
    if answer is not None and answer.startswith("{"):
        echoed = json.loads(answer)["text"]
        assert isinstance(echoed, str)
        return echoed
    return answer


def grants(fake: FakeOAuthServer) -> Sequence[str]:
    return [form["grant_type"] for form in fake.token_requests]


# --------------------------------------------------------------------------- no sign-in yet


async def test_the_first_connect_is_needs_auth_at_once_with_the_exact_hint(
    idle_jump_clock: trio.testing.MockClock, tmp_path: Path, clock: Clock
) -> None:
    async with world().serve() as fake, runtime(fake, tmp_path, clock) as rt:
        report = await rt.wait_ready()
        assert report.failed == ("web",) and not report.timed_out
        assert trio.current_time() == 0.0  # settled at once: no retries, no backoff
        status = rt.status()["web"]
        reason = (
            f"AuthorizationRequired: the server 'web' needs a sign-in at {fake.issuer}; "
            f"to sign in, run: {HINT}"
        )
        assert (status.state, status.hint, status.last_error) == (
            ServerState.NEEDS_AUTH,
            HINT,
            reason,
        )
        assert status.auth is not None and status.auth.state is AuthState.NEEDS_AUTH
        assert status.next_attempt_at == 300.0
        with pytest.raises(ServerUnavailable) as caught:
            await echo(rt, "x")
        assert str(caught.value) == f"server 'web' needs a sign-in: {reason}"
        assert (caught.value.state, caught.value.hint) == ("needs_auth", HINT)
        assert trio.current_time() == 0.0  # the call failed at once
        # discovery happened, nobody was asked, nothing was registered or stored
        assert fake.authorizations == [] and fake.registrations == []
        assert stored(tmp_path) == []


async def test_login_with_a_prompt_signs_in_and_the_server_gets_ready(
    tmp_path: Path, clock: Clock
) -> None:
    prompts = Prompts()
    async with world().serve() as fake, runtime(fake, tmp_path, clock) as rt:
        await rt.wait_ready()
        status = await rt.login("web", prompt=prompts)
        assert (status.state, status.issuer, status.has_refresh_token) == (
            AuthState.SIGNED_IN,
            fake.issuer,
            True,
        )
        assert (await rt.wait_ready(timeout=10)).ready == ("web",)
        assert await echo(rt, "hello") == "hello"
        (request,) = prompts.requests
        assert (request.server, request.issuer) == ("web", fake.issuer)
        (credential,) = stored(tmp_path)
        assert stat.S_IMODE(os.stat(credential).st_mode) == 0o600
        shown = repr(rt.status()["web"])
        assert not any(secret in shown for secret in SECRETS)


# --------------------------------------------------------------------------- refresh


async def test_an_expired_token_is_refreshed_once_without_the_user_and_calls_go_on(
    tmp_path: Path, clock: Clock
) -> None:
    prompts = Prompts()
    async with world().serve() as fake, runtime(fake, tmp_path, clock, authorize=prompts) as rt:
        assert (await rt.wait_ready(timeout=10)).ready == ("web",)
        clock.now += 3600  # the token ran out
        async with trio.open_nursery() as nursery:
            for number in range(4):
                nursery.start_soon(echo, rt, f"call {number}")
        assert await echo(rt, "after") == "after"
        assert grants(fake) == ["authorization_code", "refresh_token"]
        assert len(prompts.requests) == 1  # the refresh asked nobody
        assert rt.status()["web"].state is ServerState.READY


async def test_a_refused_refresh_is_needs_auth_and_the_credential_file_stays(
    tmp_path: Path, clock: Clock
) -> None:
    async with world().serve() as fake, runtime(fake, tmp_path, clock) as rt:
        await rt.wait_ready()
        await rt.login("web", prompt=headless_sign_in)
        assert (await rt.wait_ready(timeout=10)).ready == ("web",)
        before = stored(tmp_path)
        fake.refresh_error = "invalid_grant"
        clock.now += 3600
        with rt.events() as events:
            with pytest.raises(AuthorizationRequired) as caught:
                await echo(rt, "x")
            assert caught.value.hint == HINT
            await state_reached(rt, events, ServerState.NEEDS_AUTH)
        status = rt.status()["web"]
        assert status.hint == HINT
        assert status.last_error == (
            "AuthorizationRequired: the authorization server refused to refresh the token of "
            f"'web' (invalid_grant); to sign in again, run: {HINT}"
        )
        assert stored(tmp_path) == before and len(before) == 1  # the record is left in place
        with pytest.raises(ServerUnavailable, match=f"{HINT}$"):
            await echo(rt, "y")


async def test_an_unreachable_authorization_server_during_refresh_is_retried_and_the_record_kept(
    idle_jump_clock: trio.testing.MockClock, tmp_path: Path, clock: Clock
) -> None:
    async with world().serve() as fake, runtime(fake, tmp_path, clock) as rt:
        await rt.wait_ready()
        await rt.login("web", prompt=headless_sign_in)
        assert (await rt.wait_ready()).ready == ("web",)
        before = stored(tmp_path)
        assert fake.authorization_server is not None
        await fake.authorization_server.kill()
        clock.now += 3600
        with rt.events() as events:
            with pytest.raises(ServerDisconnected, match="the stored sign-in is kept"):
                await echo(rt, "x")
            await state_reached(rt, events, ServerState.RECONNECTING)
            changes: list[ServerStateChanged] = []
            with trio.move_on_after(5):  # the attempts that follow fail the same way
                async for event in events:
                    if isinstance(event, ServerStateChanged):
                        changes.append(event)
        assert changes, "the server did not try again"
        assert all(change.new is ServerState.RECONNECTING for change in changes)
        status = rt.status()["web"]
        assert status.state is ServerState.RECONNECTING and status.hint is None
        assert status.last_error is not None
        assert status.last_error.startswith("RefreshUnreachable: refreshing the token of 'web'")
        assert stored(tmp_path) == before  # kept
        await fake.authorization_server.start()  # back, on the same port
        assert (await rt.wait_ready()).ready == ("web",)
        assert await echo(rt, "back") == "back"
        assert grants(fake)[-1] == "refresh_token"


# --------------------------------------------------------------------------- logout


async def test_logout_is_needs_auth_and_the_credential_file_is_gone(
    tmp_path: Path, clock: Clock
) -> None:
    async with world().serve() as fake, runtime(fake, tmp_path, clock) as rt:
        await rt.wait_ready()
        await rt.login("web", prompt=headless_sign_in)
        assert (await rt.wait_ready(timeout=10)).ready == ("web",)
        assert len(stored(tmp_path)) == 1
        with rt.events() as events:
            assert await rt.logout("web") is True
            await state_reached(rt, events, ServerState.NEEDS_AUTH)
        assert stored(tmp_path) == []
        status = rt.status()["web"]
        assert status.hint == HINT
        # signed out (or, once the closing connection met a 401 without a token, NEEDS_AUTH)
        assert status.auth is not None
        assert status.auth.state in (AuthState.SIGNED_OUT, AuthState.NEEDS_AUTH)
        with pytest.raises(ServerUnavailable, match=f"{HINT}$"):
            await echo(rt, "x")


async def test_logout_with_a_host_callback_does_not_sign_in_again_on_the_way_out(
    tmp_path: Path, clock: Clock
) -> None:
    prompts = Prompts()
    async with world().serve() as fake, runtime(fake, tmp_path, clock, authorize=prompts) as rt:
        assert (await rt.wait_ready(timeout=10)).ready == ("web",)
        seen = len(fake.resource_requests)
        with rt.events() as events:
            assert await rt.logout("web") is True
            await state_reached(rt, events, ServerState.NEEDS_AUTH)
        # the closing connection's DELETE went without a token and its 401 was left at that
        closing = [(r.method, r.header("authorization")) for r in fake.resource_requests[seen:]]
        assert closing == [("DELETE", None)]
        assert len(prompts.requests) == 1 and stored(tmp_path) == []
        assert rt.status()["web"].hint == HINT


# --------------------------------------------------------------------------- the host's callback


async def test_a_host_authorize_callback_signs_in_while_connecting(
    tmp_path: Path, clock: Clock
) -> None:
    prompts = Prompts()
    async with world().serve() as fake, runtime(fake, tmp_path, clock, authorize=prompts) as rt:
        assert (await rt.wait_ready(timeout=10)).ready == ("web",)  # no rt.login
        assert await echo(rt, "hi") == "hi"
        (request,) = prompts.requests
        assert (request.server, request.issuer) == ("web", fake.issuer)
        assert request.url.startswith(f"{fake.issuer}/authorize?")
        assert len(stored(tmp_path)) == 1


async def test_step_up_on_insufficient_scope_goes_through_the_host_callback(
    tmp_path: Path, clock: Clock
) -> None:
    prompts = Prompts()
    fake_world = world(
        challenge_scope="files:read", needed=frozenset({"files:write"}), needed_scope="files:write"
    )
    async with fake_world.serve() as fake, runtime(fake, tmp_path, clock, authorize=prompts) as rt:
        assert (await rt.wait_ready(timeout=10)).ready == ("web",)
        assert [request.scopes for request in prompts.requests] == [
            ("files:read",),
            ("files:read", "files:write"),
        ]
        assert [form["scope"] for form in fake.authorizations] == [
            "files:read",
            "files:read files:write",
        ]
        assert fake.challenges[-1].startswith('Bearer error="insufficient_scope"')
        status = rt.status()["web"].auth
        assert status is not None and set(status.scopes) == {"files:read", "files:write"}


# --------------------------------------------------------------------------- legacy HTTP+SSE


async def test_a_legacy_sse_server_behind_oauth_is_needs_auth_then_ready_after_login(
    tmp_path: Path, clock: Clock
) -> None:
    fake_world = FakeOAuthServer(mcp=FakeLegacySse(), prm_at="root")
    async with fake_world.serve() as fake:
        assert fake.resource_server is not None
        server = ServerConfig(
            name="web",
            type=TransportKind.SSE,
            url=f"{fake.resource_server.base}/sse",
            auth="oauth",
        )
        async with runtime(fake, tmp_path, clock, server=server) as rt:
            await rt.wait_ready(timeout=10)
            status = rt.status()["web"]
            assert (status.state, status.hint) == (ServerState.NEEDS_AUTH, HINT)
            await rt.login("web", prompt=headless_sign_in)
            assert (await rt.wait_ready(timeout=10)).ready == ("web",)
            assert await echo(rt, "old") == "old"
        gets = [r for r in fake.resource_requests if r.method == "GET"]
        assert gets[0].header("authorization") is None
        assert (gets[-1].header("authorization") or "").startswith("Bearer access-")
