"""Many users on one runtime (issue 17, item 2): a call made for a tenant carries that tenant's
own credentials, on its own HTTP request only; a tenant's OAuth sign-in is its own; private
cached results stay with their tenant; a tenant that cannot be served fails alone.

The HTTP tests run against a real HTTP server on 127.0.0.1 (the fake OAuth world's protected
resource, serving a ``FakeServer`` behind its Bearer check) and read what each request carried
from ``fake.resource_requests``. Two calls are in flight at once by construction: the tool's
handler answers only once both have arrived (no sleeps)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from tests.transports.http_fake import FakeLegacySse
from trio_mcp.actors import (
    AgentSurface,
    CallNext,
    HostCallbacks,
    RetryPolicy,
    Runtime,
    RuntimeConfig,
    ServerConfig,
    ServerState,
    Tenant,
    ToolCallRequest,
    TransportKind,
    open_runtime,
)
from trio_mcp.actors.runtime._tenants import TenantSignIns, tenant_context
from trio_mcp.actors.testing import (
    FakeOAuthServer,
    FakeResource,
    FakeServer,
    FakeTool,
    headless_sign_in,
)
from trio_mcp.actors.testing._http import HttpRequest
from trio_mcp.protocol import (
    AuthorizationRequired,
    CallToolResult,
    CredentialsNotCarried,
    McpCatalogError,
)
from trio_mcp.transports.oauth import (
    AuthorizationPrompt,
    AuthState,
    AuthStatus,
    DevicePrompt,
    FileTokenStore,
    SignIn,
)

TOKENS = {"operator": "Bearer op-token", "alice": "Bearer alice-token", "bob": "Bearer bob-token"}


class Barrier:
    """The tool's handler: answers once ``parties`` calls have arrived, so that a test's calls
    are all in flight at the server at the same time."""

    def __init__(self, parties: int) -> None:
        self.parties = parties
        self.arrived: list[str] = []
        self.all_here = trio.Event()

    async def __call__(self, arguments: Mapping[str, Any], ctx: object) -> str:
        self.arrived.append(str(arguments.get("who")))
        if len(self.arrived) >= self.parties:
            self.all_here.set()
        await self.all_here.wait()
        return f"hello {arguments.get('who')}"


def world(barrier: Barrier | None = None, **fake: Any) -> FakeOAuthServer:
    tool = FakeTool("whoami", handler=barrier) if barrier is not None else FakeTool("whoami")
    server = FakeServer(
        name="docs",
        tools=[tool],
        resources=[FakeResource("memo://plan", name="plan", text="the plan")],
        **fake,
    )
    oauth = FakeOAuthServer(mcp=server)
    for token in TOKENS.values():  # tokens the resource takes without any sign-in
        oauth.tokens[token.removeprefix("Bearer ")] = frozenset()
    return oauth


def header_config(fake: FakeOAuthServer) -> ServerConfig:
    """The server as the operator configured it: its own bearer token, no OAuth."""
    return ServerConfig(
        name="docs",
        type=TransportKind.HTTP,
        url=fake.mcp_url,
        headers={"Authorization": TOKENS["operator"], "X-Gateway": "g1"},
        trust_level="trusted",
    )


def calls(fake: FakeOAuthServer) -> list[HttpRequest]:
    return [r for r in fake.resource_requests if r.body and r.json().get("method") == "tools/call"]


def who(request: HttpRequest) -> str:
    who = request.json()["params"]["arguments"]["who"]
    assert isinstance(who, str)
    return who


@asynccontextmanager
async def runtime(*servers: ServerConfig, **options: Any) -> AsyncIterator[Runtime]:
    config = RuntimeConfig(servers=servers, retry=RetryPolicy(jitter=0.0), **options.pop("rc", {}))
    async with open_runtime(config, **options) as rt:
        report = await rt.wait_ready(timeout=30)
        assert report.ready == tuple(s.name for s in servers), report.errors
        yield rt


# --------------------------------------------------------------------------- headers


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_two_tenants_at_once_each_request_carries_only_its_own_token(era: str) -> None:
    barrier = Barrier(3)
    alice = Tenant("alice", headers={"Authorization": TOKENS["alice"]})
    bob = Tenant("bob", headers={"authorization": TOKENS["bob"], "X-User": "bob"})
    answers: dict[str, str | None] = {}
    async with world(barrier, era=era).serve() as fake, runtime(header_config(fake)) as rt:

        async def call(name: str, tenant: Tenant | None) -> None:
            result = await rt.call("mcp_docs_whoami", {"who": name}, tenant=tenant)
            answers[name] = result.text

        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(call, "alice", alice)
                nursery.start_soon(call, "bob", bob)
                nursery.start_soon(call, "operator", None)
        # the shared transport did not change: the next call is the operator's again
        await rt.call("mcp_docs_whoami", {"who": "after"})
    assert sorted(barrier.arrived[:3]) == ["alice", "bob", "operator"]  # all three in flight
    assert answers == {n: f"hello {n}" for n in ("alice", "bob", "operator")}
    seen = {
        who(r): (r.header("authorization"), r.header("x-user"), r.header("x-gateway"))
        for r in calls(fake)
    }
    assert seen == {
        "alice": (TOKENS["alice"], None, "g1"),  # the configured gateway header goes along
        "bob": (TOKENS["bob"], "bob", "g1"),
        "operator": (TOKENS["operator"], None, "g1"),
        "after": (TOKENS["operator"], None, "g1"),
    }
    others = [r for r in fake.resource_requests if r not in calls(fake)]
    assert others and {r.header("authorization") for r in others} == {TOKENS["operator"]}


async def test_a_tenants_token_never_reaches_the_log_or_a_repr(
    caplog: pytest.LogCaptureFixture,
) -> None:
    alice = Tenant("alice", headers={"Authorization": TOKENS["alice"], "X-User": "alice-7"})
    caplog.set_level(logging.DEBUG, logger="trio_mcp")
    seen: list[str] = []

    async def observe(call: ToolCallRequest, call_next: CallNext) -> CallToolResult:
        seen.append(repr(call))
        return await call_next(call)

    async with world().serve() as fake, runtime(header_config(fake), hooks=[observe]) as rt:
        await rt.call("mcp_docs_whoami", {"who": "alice"}, tenant=alice)
    assert repr(alice) == "Tenant('alice', headers=['Authorization', 'X-User'])"
    assert "alice-token" not in seen[0] and "alice-7" not in seen[0]
    assert "as 'alice'" in caplog.text  # the HTTP debug log says who the POST was for
    assert "alice-token" not in caplog.text and "alice-7" not in caplog.text


async def test_a_hook_gives_each_call_its_users_token() -> None:
    """A host function that gives the headers of each call (Pydantic AI's header functions):
    a hook that sets the call's tenant from who is asking."""
    tokens = {"alice": TOKENS["alice"], "bob": TOKENS["bob"]}
    seen: list[tuple[str, str | None]] = []

    async def user_token(call: ToolCallRequest, call_next: CallNext) -> CallToolResult:
        user = call.tenant.id if call.tenant is not None else None
        seen.append((call.via, user))
        if user is None:
            return await call_next(call)
        tenant = Tenant(user, headers={"Authorization": tokens[user]})
        return await call_next(call.replace(tenant=tenant))

    async with world().serve() as fake, runtime(header_config(fake), hooks=[user_token]) as rt:
        await rt.call("mcp_docs_whoami", {"who": "alice"}, tenant="alice")
        agent = AgentSurface(rt, tenant="bob")
        result = await agent.call_for_model("mcp_docs_whoami", {"who": "bob"})
        assert result.status == "ok", result.text
        await rt.call("mcp_docs_whoami", {"who": "operator"})
    assert seen == [("runtime", "alice"), ("runtime", "bob"), ("runtime", None)]
    by_who = {who(r): r.header("authorization") for r in calls(fake)}
    assert by_who == {
        "alice": TOKENS["alice"],
        "bob": TOKENS["bob"],
        "operator": TOKENS["operator"],
    }


async def test_a_surface_hook_sees_the_surfaces_tenant_and_may_drop_it() -> None:
    seen: list[str | None] = []

    async def observe(call: ToolCallRequest, call_next: CallNext) -> CallToolResult:
        seen.append(None if call.tenant is None else call.tenant.id)
        return await call_next(call.replace(tenant=None))  # this call goes as the operator

    alice = Tenant("alice", headers={"Authorization": TOKENS["alice"]})
    async with world().serve() as fake, runtime(header_config(fake)) as rt:
        agent = AgentSurface(rt, tenant=alice, hooks=[observe])
        result = await agent.call_for_model("mcp_docs_whoami", {"who": "x"})
        assert result.status == "ok", result.text
    assert seen == ["alice"]
    assert [r.header("authorization") for r in calls(fake)] == [TOKENS["operator"]]


async def test_headers_cannot_go_over_stdio_or_memory_the_call_fails_alone(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeServer(name="mem", tools=[FakeTool("echo")])
    async with runtime(fake.server_config()) as rt:
        with pytest.raises(CredentialsNotCarried) as caught:
            await rt.call("mcp_mem_echo", {"a": 1}, tenant=Tenant("alice", headers={"X-User": "a"}))
        assert caught.value.tenant == "alice" and caught.value.server == "mem"
        assert str(caught.value) == (
            "server 'mem': tools/call for the tenant 'alice' was not sent: its transport "
            "(memory) has no headers per request; only a Streamable HTTP server takes a "
            "tenant's own credentials (call it without a tenant, or configure the server over "
            "HTTP)"
        )
        assert [m for m, _ in fake.requests].count("tools/call") == 0
        # a tenant with no credentials of its own is only a name: it goes
        assert (await rt.call("mcp_mem_echo", {"a": 2}, tenant="alice")).text == '{"a":2}'
        assert rt.status()["mem"].state is ServerState.READY


def test_a_tenant_is_checked_when_made() -> None:
    for bad in ("", "a b", "x" * 201, "é"):
        with pytest.raises(ValueError, match="a tenant id is"):
            Tenant(bad)
    with pytest.raises(ValueError, match="'Mcp-Method'"):
        Tenant("a", headers={"Mcp-Method": "tools/call"})
    with pytest.raises(ValueError, match="CR or LF"):
        Tenant("a", headers={"Authorization": "Bearer x\r\nX-Evil: 1"})
    with pytest.raises(ValueError, match="'Content-Type'"):
        Tenant("a", headers={"Content-Type": "text/plain"})
    assert Tenant("a", headers={"X": "1"}) == Tenant("a", headers={"X": "1"})
    assert Tenant("a", headers={"X": "1"}) != Tenant("a", headers={"X": "2"})


# --------------------------------------------------------------------------- OAuth per tenant


def oauth_world() -> FakeOAuthServer:
    return FakeOAuthServer(mcp=FakeServer(name="docs", tools=[FakeTool("whoami")]))


async def test_each_tenant_signs_in_on_its_own_and_one_without_fails_alone(
    tmp_path: Path,
) -> None:
    async with oauth_world().serve() as fake:
        config = fake.server_config("docs")
        callbacks = HostCallbacks(authorize=headless_sign_in)  # the operator's sign-in
        options = {"rc": {"credentials_dir": tmp_path}, "callbacks": callbacks}
        async with runtime(config, **options) as rt:
            status = await rt.login("docs", tenant="alice", prompt=headless_sign_in)
            assert status.state is AuthState.SIGNED_IN
            await rt.call("mcp_docs_whoami", {"who": "alice"}, tenant="alice")
            with pytest.raises(AuthorizationRequired) as caught:
                await rt.call("mcp_docs_whoami", {"who": "bob"}, tenant="bob")
            assert caught.value.hint == "rt.login('docs', tenant='bob', prompt=...)"
            assert str(caught.value) == (
                "server 'docs': the tenant 'bob' is not signed in (or its sign-in ran out), so "
                "its call was not made; the server stays ready for the others. Sign the tenant "
                "in with rt.login('docs', tenant='bob', prompt=...)"
            )
            assert rt.status()["docs"].state is ServerState.READY
            await rt.call("mcp_docs_whoami", {"who": "operator"})
            await rt.call("mcp_docs_whoami", {"who": "alice-again"}, tenant="alice")
            assert await rt.logout("docs", tenant="alice") is True
            with pytest.raises(AuthorizationRequired):
                await rt.call("mcp_docs_whoami", {"who": "alice-out"}, tenant="alice")
            assert rt.status()["docs"].state is ServerState.READY
            await rt.call("mcp_docs_whoami", {"who": "operator-again"})
            with pytest.raises(AuthorizationRequired, match="needs that user"):
                await rt.login("docs", tenant="carol")
    tokens = {who(r): r.header("authorization") for r in calls(fake)}
    operator, alice = tokens["operator"], tokens["alice"]
    assert operator and alice and operator != alice
    assert tokens["operator-again"] == operator and tokens["alice-again"] == alice
    # refused (401) before the tool ran, and never sent with the operator's token instead
    assert tokens["bob"] is None and tokens["alice-out"] is None
    stored = await FileTokenStore(tmp_path).list()
    assert sorted(c.key.tenant for c in stored) == [""]  # alice's was forgotten at logout


async def test_a_tenants_own_authorization_header_skips_every_sign_in(tmp_path: Path) -> None:
    async with oauth_world().serve() as fake:
        fake.tokens["host-minted"] = frozenset()
        config = fake.server_config("docs")
        options = {"rc": {"credentials_dir": tmp_path}}
        callbacks = HostCallbacks(authorize=headless_sign_in)
        async with runtime(config, callbacks=callbacks, **options) as rt:
            own = Tenant("dave", headers={"Authorization": "Bearer host-minted"})
            await rt.call("mcp_docs_whoami", {"who": "dave"}, tenant=own)
    assert [r.header("authorization") for r in calls(fake)] == ["Bearer host-minted"]
    assert sorted(c.key.tenant for c in await FileTokenStore(tmp_path).list()) == [""]


class CountingSignIn:
    """A sign-in that only counts how it was run (for the bound on tenant sign-ins)."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log

    @property
    def auth(self) -> Any:
        return None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self.log.append(f"start {self.name}")
        task_status.started()
        try:
            await trio.sleep_forever()
        finally:
            self.log.append(f"stop {self.name}")

    async def login(self, prompt: AuthorizationPrompt, **_: Any) -> AuthStatus:
        raise NotImplementedError

    async def login_device(self, show: DevicePrompt, **_: Any) -> AuthStatus:
        raise NotImplementedError

    async def logout(self) -> bool:
        raise NotImplementedError

    def status(self) -> AuthStatus:
        return AuthStatus(server=self.name, state=AuthState.SIGNED_OUT)


async def test_tenant_sign_ins_are_made_once_and_bounded(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log: list[str] = []

    def make(server: ServerConfig, tenant: str) -> SignIn:
        return CountingSignIn(f"{server.name}/{tenant}", log)

    server = ServerConfig(name="s", url="https://example.test/mcp")
    sign_ins = TenantSignIns(make=make, limit=2)
    async with trio.open_nursery() as nursery:
        await nursery.start(sign_ins.run)
        a = await sign_ins.sign_in(server, "a")
        assert await sign_ins.sign_in(server, "a") is a  # one per (server, tenant)
        await sign_ins.sign_in(server, "b")
        await sign_ins.sign_in(server, "a")  # a is now the newest
        await sign_ins.sign_in(server, "c")  # b goes to make room
        await trio.testing.wait_all_tasks_blocked()
        assert log[:2] == ["start s/a", "start s/b"]
        assert sorted(log[2:]) == ["start s/c", "stop s/b"]
        assert len(sign_ins) == 2
        nursery.cancel_scope.cancel()


# --------------------------------------------------------------------------- the result cache


def cached_fake(scope: str) -> FakeServer:
    return FakeServer(
        name="m",
        era="modern",
        resources=[FakeResource("memo://plan", name="plan", text="the plan")],
        ttl_ms={"resources/read": 60_000},
        cache_scope={"resources/read": scope},
    )


def reads(fake: FakeServer) -> int:
    return [method for method, _ in fake.requests].count("resources/read")


async def test_private_results_stay_with_their_tenant(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = cached_fake("private")
    async with runtime(fake.server_config(trust_level="trusted")) as rt:
        for reader in ("alice", "alice", "bob", None, None, "bob"):
            read = await rt.read_resource("m", "memo://plan", tenant=reader)
            assert read.contents[0].text == "the plan"  # type: ignore[union-attr]
        assert reads(fake) == 3  # one each for alice, bob and the operator
        agent = AgentSurface(rt, tenant="alice")  # the surface's resource tool reads as alice
        result = await agent.call_for_model(
            "read_mcp_resource", {"server": "m", "uri": "memo://plan"}
        )
        assert result.status == "ok" and reads(fake) == 3


async def test_public_results_are_shared(autojump_clock: trio.testing.MockClock) -> None:
    fake = cached_fake("public")
    async with runtime(fake.server_config()) as rt:
        for reader in ("alice", "bob", None):
            await rt.read_resource("m", "memo://plan", tenant=reader)
        assert reads(fake) == 1


def test_a_tenants_context_depends_on_its_id_and_headers() -> None:
    base = "0" * 64
    contexts = {
        tenant_context(base, Tenant("a")),
        tenant_context(base, Tenant("b")),
        tenant_context(base, Tenant("a", headers={"Authorization": "Bearer 1"})),
        tenant_context(base, Tenant("a", headers={"Authorization": "Bearer 2"})),
        tenant_context("1" * 64, Tenant("a")),
        base,
    }
    assert len(contexts) == 6
    assert tenant_context(base, Tenant("a")) == tenant_context(base, Tenant("a"))


async def test_a_tenants_read_over_memory_with_headers_is_refused_as_a_catalog_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = cached_fake("private")
    async with runtime(fake.server_config()) as rt:
        with pytest.raises(McpCatalogError) as caught:
            await rt.read_resource("m", "memo://plan", tenant=Tenant("a", headers={"X-U": "1"}))
        assert caught.value.kind == "invalid"
        assert isinstance(caught.value.__cause__, CredentialsNotCarried)
        assert reads(fake) == 0


async def test_a_server_that_fell_back_to_http_sse_refuses_a_tenants_headers() -> None:
    legacy = FakeOAuthServer(mcp=FakeLegacySse(), prm_at="root")
    async with legacy.serve() as fake:
        fake.tokens["op-token"] = frozenset()
        assert fake.resource_server is not None
        server = ServerConfig(
            name="old",
            type=TransportKind.HTTP,  # Streamable HTTP first, then the fallback
            url=f"{fake.resource_server.base}/sse",
            headers={"Authorization": "Bearer op-token"},
        )
        async with runtime(server) as rt:
            alice = Tenant("alice", headers={"Authorization": TOKENS["alice"]})
            with pytest.raises(CredentialsNotCarried) as caught:
                await rt.call("mcp_old_echo", {"text": "x"}, tenant=alice)
            assert "legacy HTTP+SSE transport, which has no headers per request" in str(
                caught.value
            )
            # never sent as the operator instead; the operator's own calls go on
            assert (await rt.call("mcp_old_echo", {"text": "y"})).text == "y"
    posted = [r.header("authorization") for r in fake.resource_requests if r.method == "POST"]
    assert TOKENS["alice"] not in posted and set(posted) == {"Bearer op-token"}
