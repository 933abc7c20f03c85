"""A server with OAuth in the runtime: its sign-in runs under its supervisor, a connection that
needs a sign-in parks it in NEEDS_AUTH with the command that fixes it, calls fail at once,
``rt.login`` / ``rt.logout``, the periodic re-check, and the sign-in's ``auth`` on every HTTP
request of the server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import pytest
import trio
import trio.testing

from tests.actors.oauth_fakes import FakeOAuth, FakeSignIn
from tests.transports.http_fake import FakeMcpHttp, HttpRequest, Reply, serve_http
from trio_mcp.actors import (
    HostCallbacks,
    RetryPolicy,
    RuntimeConfig,
    ServerConfig,
    ServerState,
    ServerStateChanged,
    open_runtime,
)
from trio_mcp.actors.runtime import TransportOpener
from trio_mcp.actors.testing import FakeServer, FakeTool
from trio_mcp.protocol import (
    AuthorizationRequired,
    ConfigError,
    CredentialsRefused,
    ServerUnavailable,
)
from trio_mcp.transports import Transport
from trio_mcp.transports._base import FrameSink
from trio_mcp.transports.oauth import (
    AuthorizationRequest,
    AuthState,
    DeviceAuthorization,
    Grant,
    OAuthSettings,
)

URL = "https://mcp.example/mcp"
HINT = "trio-mcp login web"
NEEDS_AUTH_ERROR = (
    "AuthorizationRequired: server 'web': nobody is signed in; to sign in, run: trio-mcp login web"
)


def web(**options: object) -> ServerConfig:
    return ServerConfig(name="web", url=URL, auth="oauth", **options)  # type: ignore[arg-type]


def config(*servers: ServerConfig, probe: float | None = 300.0) -> RuntimeConfig:
    return RuntimeConfig(
        servers=servers or (web(),),
        retry=RetryPolicy(jitter=0.0, park_probe_interval=probe),
        credentials_dir=Path("/nowhere/credentials"),
    )


class Opener:
    """Reaches the in-memory ``fake`` for every server; an attempt of a server whose sign-in has
    no token fails as its ``auth`` would on a 401. Records each attempt's time."""

    def __init__(self, fake: FakeServer, oauth: FakeOAuth) -> None:
        self.fake = fake
        self.oauth = oauth
        self.attempts: list[float] = []

    def __call__(
        self, server: ServerConfig, sink: FrameSink
    ) -> AbstractAsyncContextManager[Transport]:
        return self.open(server, sink)

    @asynccontextmanager
    async def open(self, server: ServerConfig, sink: FrameSink) -> AsyncIterator[Transport]:
        self.attempts.append(trio.current_time())
        sign_in = self.oauth.sign_ins.get(server.name)
        if sign_in is not None and await sign_in.current_token() is None:
            raise sign_in.required()
        async with self.fake.connect(sink) as transport:
            yield transport


def redirect(request: AuthorizationRequest) -> str:
    return f"{request.redirect_uri}?code=abc&state=st-1"


async def approve(request: AuthorizationRequest) -> str:
    return redirect(request)


@pytest.fixture
def fake() -> FakeServer:
    return FakeServer(name="web", tools=[FakeTool("t")])


async def test_a_first_connect_that_needs_a_sign_in_is_needs_auth_at_once_without_retries(
    autojump_clock: trio.testing.MockClock, fake: FakeServer
) -> None:
    oauth = FakeOAuth()
    opener = Opener(fake, oauth)
    async with open_runtime(config(), open_transport=opener, oauth=oauth.factories()) as rt:
        with rt.events() as events:
            report = await rt.wait_ready()
            assert not report.timed_out and report.failed == ("web",)
            assert trio.current_time() == 0.0  # settled at once: no retries, no backoff
            status = rt.status()["web"]
            assert status.state is ServerState.NEEDS_AUTH
            assert status.last_error == NEEDS_AUTH_ERROR
            assert status.hint == HINT
            assert status.next_attempt_at == 300.0
            assert status.auth is not None and status.auth.state is AuthState.SIGNED_OUT
            with pytest.raises(ServerUnavailable) as caught:
                await rt.request("web", "tools/list")
            assert str(caught.value) == (
                "server 'web' needs a sign-in: AuthorizationRequired: server 'web': nobody is "
                "signed in; to sign in, run: trio-mcp login web"
            )
            assert str(caught.value).endswith(HINT)
            assert (caught.value.state, caught.value.hint) == ("needs_auth", HINT)
            with pytest.raises(ServerUnavailable, match=r"trio-mcp login web$"):
                await rt.call("mcp_web_t")
            await trio.sleep(299)
            assert opener.attempts == [0.0]
            changes = [e for e in drain(events) if isinstance(e, ServerStateChanged)]
        *before, change = changes  # the attempt's start may come before the subscription
        assert [(c.new, c.hint) for c in before] in ([], [(ServerState.CONNECTING, None)])
        assert (change.old, change.new) == (ServerState.CONNECTING, ServerState.NEEDS_AUTH)
        assert (change.reason, change.hint, change.next_attempt_at) == (
            NEEDS_AUTH_ERROR,
            HINT,
            300.0,
        )
    # the store was asked for once, at the configured directory; the sign-in ran until the end
    assert oauth.directories == [Path("/nowhere/credentials")]
    assert oauth.sign_ins["web"].running is False


def drain(events: object) -> list[object]:
    out: list[object] = []
    while True:
        try:
            out.append(events.receive_nowait())  # type: ignore[attr-defined]
        except trio.WouldBlock:
            return out


async def test_needs_auth_rechecks_once_per_probe_interval_quietly_and_finds_a_new_credential(
    autojump_clock: trio.testing.MockClock, fake: FakeServer
) -> None:
    oauth = FakeOAuth()
    opener = Opener(fake, oauth)
    async with open_runtime(config(), open_transport=opener, oauth=oauth.factories()) as rt:
        await rt.wait_ready()
        with rt.events() as events:
            await trio.sleep(650)
            assert opener.attempts == [0.0, 300.0, 600.0]
            # the re-checks changed nothing that is announced: still NEEDS_AUTH, same reason
            assert drain(events) == []
            status = rt.status()["web"]
            assert (status.state, status.generation, status.next_attempt_at) == (
                ServerState.NEEDS_AUTH,
                3,
                900.0,
            )
            # another process signs in: the same store, another sign-in
            ours = oauth.sign_ins["web"]
            other = FakeSignIn(
                server="web", settings=OAuthSettings(), store=oauth.store, http=ours.http
            )
            await other.login(approve)
            assert ours.token is None  # the runtime's finds it at its next re-check
            with trio.fail_after(1000):
                async for event in events:
                    if isinstance(event, ServerStateChanged) and event.new is ServerState.READY:
                        break
            assert trio.current_time() == 900.0
            assert opener.attempts == [0.0, 300.0, 600.0, 900.0]
        assert rt.status()["web"].hint is None
        assert not (await rt.call("mcp_web_t")).is_error


async def test_login_signs_in_through_the_prompt_and_connects_at_once(
    autojump_clock: trio.testing.MockClock, fake: FakeServer
) -> None:
    oauth = FakeOAuth()
    opener = Opener(fake, oauth)
    async with open_runtime(config(), open_transport=opener, oauth=oauth.factories()) as rt:
        await rt.wait_ready()
        await trio.sleep(10)
        with rt.events() as events:
            status = await rt.login("web", prompt=approve, scopes=["files:read"])
            assert status.state is AuthState.SIGNED_IN
            assert "token-abc" not in repr(status) and "refresh-secret" not in repr(status)
            report = await rt.wait_ready()
            assert report.ready == ("web",)
            assert opener.attempts == [0.0, 10.0]  # at once, not at the re-check
            changes = [(e.old, e.new) for e in drain(events) if isinstance(e, ServerStateChanged)]
        assert changes == [
            (ServerState.NEEDS_AUTH, ServerState.CONNECTING),
            (ServerState.CONNECTING, ServerState.READY),
        ]
        sign_in = oauth.sign_ins["web"]
        assert sign_in.login_scopes == [["files:read"]]
        assert rt.status()["web"].auth == sign_in.status()
        assert not (await rt.call("mcp_web_t")).is_error


class _Refusing:
    """A transport whose every send fails as the server's ``auth`` would on a 401: the session
    fails with ``error`` after the transport opened (as over HTTP, where the first POST is
    refused); everything else is the inner transport's."""

    def __init__(self, inner: Transport, error: AuthorizationRequired) -> None:
        self._inner = inner
        self._error = error

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)

    def send_nowait(self, frame: bytes, request_id: object = None) -> None:
        raise self._error

    async def send(self, frame: bytes, request_id: object = None) -> None:
        await trio.lowlevel.checkpoint()
        raise self._error


async def test_a_login_while_the_refused_transport_is_still_closing_connects_once_it_closed(
    autojump_clock: trio.testing.MockClock, fake: FakeServer
) -> None:
    # NEEDS_AUTH is published when the attempt fails, before its transport has closed (an
    # HTTP transport takes its close grace); a login in that window must not be lost: the
    # attempt it asks for starts as soon as the transport is closed, not at the re-check.
    oauth = FakeOAuth()
    attempts: list[float] = []

    @asynccontextmanager
    async def slow_to_close(server: ServerConfig, sink: FrameSink) -> AsyncIterator[Transport]:
        attempts.append(trio.current_time())
        sign_in = oauth.sign_ins[server.name]
        refused = await sign_in.current_token() is None
        async with fake.connect(sink) as transport:
            try:
                yield _Refusing(transport, sign_in.required()) if refused else transport  # type: ignore[misc]
            finally:
                if refused:
                    with trio.CancelScope(shield=True):
                        await trio.sleep(2)  # the close grace

    async with open_runtime(config(), open_transport=slow_to_close, oauth=oauth.factories()) as rt:
        assert (await rt.wait_ready())["web"].state is ServerState.NEEDS_AUTH
        assert trio.current_time() == 0.0  # published before the transport closed
        await rt.login("web", prompt=approve)
        assert (await rt.wait_ready()).ready == ("web",)
        assert attempts == [0.0, 2.0]  # at once after the close, not at the re-check (300)


async def test_login_without_a_prompt_uses_the_hosts_callback_which_the_sign_in_gets_too(
    autojump_clock: trio.testing.MockClock, fake: FakeServer
) -> None:
    shown: list[str] = []

    async def authorize(request: AuthorizationRequest) -> str:
        shown.append(request.url)
        return redirect(request)

    oauth = FakeOAuth()
    callbacks = HostCallbacks(authorize=authorize)
    async with open_runtime(
        config(), callbacks=callbacks, open_transport=Opener(fake, oauth), oauth=oauth.factories()
    ) as rt:
        await rt.wait_ready()
        assert oauth.sign_ins["web"].prompt is authorize
        await rt.login("web")
        assert shown == ["https://as.example/authorize?client_id=c&state=st-1"]
        assert (await rt.wait_ready()).ready == ("web",)


async def test_login_with_nobody_to_ask_says_what_to_run(
    autojump_clock: trio.testing.MockClock, fake: FakeServer
) -> None:
    oauth = FakeOAuth()
    async with open_runtime(
        config(), open_transport=Opener(fake, oauth), oauth=oauth.factories()
    ) as rt:
        await rt.wait_ready()
        with pytest.raises(AuthorizationRequired) as caught:
            await rt.login("web")
        assert caught.value.hint == HINT and str(caught.value).endswith(HINT)
        assert oauth.sign_ins["web"].requests == []


async def test_client_credentials_need_no_prompt(
    autojump_clock: trio.testing.MockClock, fake: FakeServer
) -> None:
    oauth = FakeOAuth()
    server = web(oauth=OAuthSettings(grant=Grant.CLIENT_CREDENTIALS, client_id="m"))
    async with open_runtime(
        config(server), open_transport=Opener(fake, oauth), oauth=oauth.factories()
    ) as rt:
        await rt.wait_ready()
        status = await rt.login("web")
        assert status.state is AuthState.SIGNED_IN
        assert (await rt.wait_ready()).ready == ("web",)


async def test_device_login_shows_the_code(
    autojump_clock: trio.testing.MockClock, fake: FakeServer
) -> None:
    shown: list[DeviceAuthorization] = []

    async def show(device: DeviceAuthorization) -> None:
        shown.append(device)

    oauth = FakeOAuth()
    async with open_runtime(
        config(), open_transport=Opener(fake, oauth), oauth=oauth.factories()
    ) as rt:
        await rt.wait_ready()
        await rt.login("web", device=show)
        assert [d.user_code for d in shown] == ["WDJB-MJHT"]
        assert (await rt.wait_ready()).ready == ("web",)


async def test_logout_ends_the_connection_and_waits_in_needs_auth(
    autojump_clock: trio.testing.MockClock, fake: FakeServer
) -> None:
    oauth = FakeOAuth()
    opener = Opener(fake, oauth)
    async with open_runtime(config(), open_transport=opener, oauth=oauth.factories()) as rt:
        await rt.wait_ready()
        await rt.login("web", prompt=approve)
        assert (await rt.wait_ready()).ready == ("web",)
        await trio.sleep(5)
        assert await rt.logout("web") is True
        await rt._supervisor("web").wait_state(lambda s: s is ServerState.NEEDS_AUTH)
        status = rt.status()["web"]
        assert status.last_error == (
            "AuthorizationRequired: server 'web': signed out (its credentials were forgotten); "
            "to sign in, run: trio-mcp login web"
        )
        assert status.next_attempt_at == 305.0
        assert rt.tools() == {}
        with pytest.raises(ServerUnavailable, match=r"trio-mcp login web$"):
            await rt.call("mcp_web_t")
        assert await rt.logout("web") is False  # nothing stored any more


async def test_a_reconnect_that_needs_a_sign_in_is_needs_auth_without_backoff(
    autojump_clock: trio.testing.MockClock, fake: FakeServer
) -> None:
    oauth = FakeOAuth()
    opener = Opener(fake, oauth)
    async with open_runtime(config(), open_transport=opener, oauth=oauth.factories()) as rt:
        await rt.wait_ready()
        await rt.login("web", prompt=approve)
        await rt.wait_ready()
        await trio.sleep(100)
        # the token is refused now (another process logged out), and the connection drops
        sign_in = oauth.sign_ins["web"]
        sign_in.token = None
        await oauth.store.delete(sign_in.key)
        with rt.events() as events:
            assert await fake.disconnect() == 1
            await rt._supervisor("web").wait_state(lambda s: s is ServerState.NEEDS_AUTH)
            changes = [(e.old, e.new) for e in drain(events) if isinstance(e, ServerStateChanged)]
        assert changes == [
            (ServerState.READY, ServerState.RECONNECTING),
            (ServerState.RECONNECTING, ServerState.RECONNECTING),
            (ServerState.RECONNECTING, ServerState.NEEDS_AUTH),
        ]
        status = rt.status()["web"]
        assert status.hint == HINT
        assert status.next_attempt_at is not None
        assert status.next_attempt_at - trio.current_time() == 300.0
        attempts = len(opener.attempts)
        await trio.sleep(299)
        assert len(opener.attempts) == attempts  # no retries until the re-check


async def test_without_a_probe_interval_needs_auth_waits_for_the_host(
    autojump_clock: trio.testing.MockClock, fake: FakeServer
) -> None:
    oauth = FakeOAuth()
    opener = Opener(fake, oauth)
    async with open_runtime(
        config(probe=None), open_transport=opener, oauth=oauth.factories()
    ) as rt:
        await rt.wait_ready()
        assert rt.status()["web"].next_attempt_at is None
        await trio.sleep(10_000)
        assert opener.attempts == [0.0]


async def test_credentials_refused_is_needs_auth_without_a_login_hint(
    autojump_clock: trio.testing.MockClock, fake: FakeServer
) -> None:
    @asynccontextmanager
    async def refused(server: ServerConfig, sink: FrameSink) -> AsyncIterator[Transport]:
        if server.name != "plain":
            async with fake.connect(sink) as transport:
                yield transport
            return
        raise CredentialsRefused(
            "server 'plain': the server refused the credentials (HTTP 401 without a Bearer "
            "challenge): check the Authorization value in headers",
            server="plain",
        )

    plain = ServerConfig(name="plain", url=URL, headers={"Authorization": "Bearer x"})
    async with open_runtime(config(plain), open_transport=refused) as rt:
        await rt.wait_ready()
        status = rt.status()["plain"]
        assert status.state is ServerState.NEEDS_AUTH
        assert status.hint is None and status.auth is None
        assert status.last_error is not None and status.last_error.endswith("in headers")


async def test_login_refuses_a_server_without_oauth(
    autojump_clock: trio.testing.MockClock, fake: FakeServer
) -> None:
    async with open_runtime(RuntimeConfig(servers=(fake.server_config(),))) as rt:
        await rt.wait_ready()
        with pytest.raises(ConfigError, match="does not sign in with OAuth"):
            await rt.login("web", prompt=approve)
        assert rt.status()["web"].auth is None


async def test_the_sign_in_authorizes_every_http_request_of_the_server() -> None:
    fake = FakeMcpHttp()
    seen: list[str | None] = []

    async def guarded(request: HttpRequest, reply: Reply) -> None:
        seen.append(request.header("authorization"))
        if request.header("authorization") != "Bearer token-abc":
            await reply.send(401, b"", headers=[("www-authenticate", 'Bearer realm="mcp"')])
            return
        await fake.handle(request, reply)

    oauth = FakeOAuth()
    with trio.fail_after(20):
        async with serve_http(guarded) as server:
            local = ServerConfig(
                name="web", url=server.base + "/mcp", auth="oauth", connect_timeout=5
            )
            async with open_runtime(config(local), oauth=oauth.factories()) as rt:
                report = await rt.wait_ready()
                assert report["web"].state is ServerState.NEEDS_AUTH
                assert report["web"].last_error == NEEDS_AUTH_ERROR
                assert seen == [None]  # one request, refused, and no retry
                await rt.login("web", prompt=approve)
                assert (await rt.wait_ready()).ready == ("web",)
                assert (await rt.call("mcp_web_echo", {"text": "hi"})).text
    assert set(seen[1:]) == {"Bearer token-abc"}


async def test_wrap_transport_wraps_the_runtimes_own_opener_with_the_sign_in() -> None:
    # The command line's -vv logs frames through wrap_transport: the wrapped opener is the
    # runtime's own, so the server's requests still go through its one sign-in (no second one).
    fake = FakeMcpHttp()
    seen: list[str | None] = []
    wrapped: list[str] = []

    async def guarded(request: HttpRequest, reply: Reply) -> None:
        seen.append(request.header("authorization"))
        if request.header("authorization") != "Bearer token-abc":
            await reply.send(401, b"", headers=[("www-authenticate", 'Bearer realm="mcp"')])
            return
        await fake.handle(request, reply)

    def wrap(server: ServerConfig, inner: TransportOpener) -> TransportOpener:
        @asynccontextmanager
        async def opener(config: ServerConfig, sink: FrameSink) -> AsyncIterator[Transport]:
            wrapped.append(config.name)
            async with inner(config, sink) as transport:
                yield transport

        return opener

    oauth = FakeOAuth()
    with trio.fail_after(20):
        async with serve_http(guarded) as server:
            local = ServerConfig(
                name="web", url=server.base + "/mcp", auth="oauth", connect_timeout=5
            )
            async with open_runtime(
                config(local), oauth=oauth.factories(), wrap_transport=wrap
            ) as rt:
                assert (await rt.wait_ready())["web"].state is ServerState.NEEDS_AUTH
                await rt.login("web", prompt=approve)
                assert (await rt.wait_ready()).ready == ("web",)
                assert (await rt.call("mcp_web_echo", {"text": "hi"})).text
    assert wrapped == ["web", "web"]
    assert seen[0] is None and set(seen[1:]) == {"Bearer token-abc"}
    assert list(oauth.sign_ins) == ["web"]  # one sign-in, the runtime's


async def test_a_login_during_an_attempt_that_then_needs_a_sign_in_connects_at_once(
    autojump_clock: trio.testing.MockClock, fake: FakeServer
) -> None:
    # The attempt started before the sign-in stored its token and is refused after it (a slow
    # 401). rt.login returned while the server was CONNECTING; its ask must not be dropped: the
    # server connects as soon as the refused attempt is over, not at the re-check (300 s).
    oauth = FakeOAuth()
    attempts: list[float] = []

    @asynccontextmanager
    async def slow_refusal(server: ServerConfig, sink: FrameSink) -> AsyncIterator[Transport]:
        attempts.append(trio.current_time())
        sign_in = oauth.sign_ins[server.name]
        if await sign_in.current_token() is None:
            await trio.sleep(5)  # the refusal takes its time to come back
            raise sign_in.required()
        async with fake.connect(sink) as transport:
            yield transport

    async with open_runtime(config(), open_transport=slow_refusal, oauth=oauth.factories()) as rt:
        await trio.sleep(1)
        assert rt.status()["web"].state is ServerState.CONNECTING
        await rt.login("web", prompt=approve)
        assert trio.current_time() == 1.0
        report = await rt.wait_ready()
        assert report.ready == ("web",)
        assert attempts == [0.0, 5.0]


async def test_a_logout_while_the_ended_connection_is_still_closing_is_needs_auth_at_once(
    autojump_clock: trio.testing.MockClock, fake: FakeServer
) -> None:
    # The connection dropped and its transport takes 2 s to close; a logout in that window
    # ends in NEEDS_AUTH at once (no attempt that is bound to be refused), and its "signed out"
    # is not left behind to turn a later connection's ordinary drop into a NEEDS_AUTH.
    oauth = FakeOAuth()
    attempts: list[float] = []

    @asynccontextmanager
    async def slow_to_close(server: ServerConfig, sink: FrameSink) -> AsyncIterator[Transport]:
        attempts.append(trio.current_time())
        sign_in = oauth.sign_ins[server.name]
        if await sign_in.current_token() is None:
            raise sign_in.required()
        async with fake.connect(sink) as transport:
            try:
                yield transport
            finally:
                with trio.CancelScope(shield=True):
                    await trio.sleep(2)  # the close grace

    async with open_runtime(config(), open_transport=slow_to_close, oauth=oauth.factories()) as rt:
        await rt.wait_ready()
        await rt.login("web", prompt=approve)
        assert (await rt.wait_ready()).ready == ("web",)
        await trio.sleep(10)
        supervisor = rt._supervisor("web")
        assert await fake.disconnect() == 1
        await supervisor.wait_state(lambda s: s is not ServerState.READY)
        assert rt.status()["web"].state is ServerState.RECONNECTING
        await trio.sleep(0.5)  # the transport is still closing
        left = trio.current_time()
        assert await rt.logout("web") is True
        await supervisor.wait_state(lambda s: s is ServerState.NEEDS_AUTH)
        assert trio.current_time() == left
        status = rt.status()["web"]
        assert status.last_error is not None and "signed out" in status.last_error
        await trio.sleep(60)
        assert len(attempts) == 2  # no attempt after the logout
        # signed in again, a later drop is an ordinary reconnect, not a NEEDS_AUTH
        await rt.login("web", prompt=approve)
        assert (await rt.wait_ready()).ready == ("web",)
        assert await fake.disconnect() == 1
        await supervisor.wait_state(lambda s: s is not ServerState.READY)
        assert rt.status()["web"].state is ServerState.RECONNECTING
        assert (await rt.wait_ready()).ready == ("web",)


async def test_a_re_check_that_cannot_reach_the_server_stays_quietly_in_needs_auth(
    autojump_clock: trio.testing.MockClock, fake: FakeServer
) -> None:
    # "only an attempt that gets READY changes its state": a re-check that finds the server
    # unreachable leaves it NEEDS_AUTH (with its hint) and re-checks again an interval later.
    from trio_mcp.protocol import ConnectError

    oauth = FakeOAuth()
    attempts: list[float] = []

    @asynccontextmanager
    async def down_after_first(server: ServerConfig, sink: FrameSink) -> AsyncIterator[Transport]:
        attempts.append(trio.current_time())
        if len(attempts) > 1:
            raise ConnectError("server 'web': connection refused")
        raise oauth.sign_ins[server.name].required()
        yield  # type: ignore[unreachable]

    async with open_runtime(
        config(), open_transport=down_after_first, oauth=oauth.factories()
    ) as rt:
        await rt.wait_ready()
        with rt.events() as events:
            await trio.sleep(650)
            assert [e for e in drain(events) if isinstance(e, ServerStateChanged)] == []
        status = rt.status()["web"]
        assert (status.state, status.hint, status.next_attempt_at) == (
            ServerState.NEEDS_AUTH,
            HINT,
            900.0,
        )
        assert attempts == [0.0, 300.0, 600.0]
