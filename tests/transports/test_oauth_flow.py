"""The Authorizer against the fake OAuth world (``FakeOAuthServer``) on 127.0.0.1:
discovery, registration, the authorization code flow, the issuer and state rules, step-up,
refresh (one per expiry), client credentials, DPoP, the device grant, logout and status.

Requests go through a plain httpx client whose ``auth`` is the Authorizer's (the HTTP
transports' own tests are in test_http_oauth.py)."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import httpx
import pytest
import trio
import trio.testing

from trio_mcp.actors.testing import FakeOAuthServer, headless_sign_in
from trio_mcp.protocol import (
    AuthorizationError,
    AuthorizationRequired,
    CredentialsRefused,
    InsufficientScope,
    OAuthFlowError,
    OAuthMetadataError,
)
from trio_mcp.transports.http import HttpParameters
from trio_mcp.transports.oauth import (
    AuthorizationPrompt,
    AuthorizationRequest,
    Authorizer,
    AuthState,
    Credential,
    CredentialKey,
    DeviceAuthorization,
    DPoPKey,
    FileTokenStore,
    Grant,
    MemoryTokenStore,
    OAuthSettings,
    RefreshUnreachable,
    TokenRecord,
    TokenStore,
    open_authorizer,
)


class Clock:
    """The wall clock of token expiry, moved by hand."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@asynccontextmanager
async def authorizer(
    fake: FakeOAuthServer,
    *,
    settings: OAuthSettings | None = None,
    prompt: AuthorizationPrompt | None = headless_sign_in,
    store: TokenStore | None = None,
    clock: Clock | None = None,
) -> AsyncIterator[Authorizer]:
    signer = Authorizer(
        server="srv",
        settings=settings or OAuthSettings(),
        store=store if store is not None else MemoryTokenStore(),
        http=HttpParameters(url=fake.mcp_url),
        prompt=prompt,
        clock=clock or Clock(),
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(signer.run)
        yield signer
        nursery.cancel_scope.cancel()


async def post(signer: Authorizer, url: str, body: bytes = b'{"x": 1}') -> httpx.Response:
    async with httpx.AsyncClient(auth=signer.auth) as client:
        return await client.post(url, content=body)


# --------------------------------------------------------------------------- sign-in


async def test_a_401_discovers_registers_and_signs_in_through_the_prompt() -> None:
    async with FakeOAuthServer(challenge_scope="mcp:read").serve() as fake:
        async with authorizer(fake) as signer:
            response = await post(signer, fake.mcp_url)
            again = await post(signer, fake.mcp_url)
        assert (response.status_code, again.status_code) == (200, 200)
        # PRM from the challenge, RFC 8414 metadata, one registration, one authorization
        assert fake.count("/.well-known/oauth-protected-resource/mcp", "resource") == 1
        assert fake.count("/.well-known/oauth-authorization-server") == 1
        (registration,) = fake.registrations
        assert registration["application_type"] == "native"
        assert registration["grant_types"] == ["authorization_code", "refresh_token"]
        assert registration["token_endpoint_auth_method"] == "none"
        (authorize,) = fake.authorizations
        assert authorize["code_challenge_method"] == "S256"
        assert authorize["resource"] == fake.mcp_url
        assert authorize["scope"] == "mcp:read"
        assert authorize["client_id"] == "dynamic-1"
        (token,) = fake.token_requests
        assert token["grant_type"] == "authorization_code"
        assert token["resource"] == fake.mcp_url
        # the first request went without a token, then twice with it
        sent = [r.header("authorization") for r in fake.resource_requests]
        assert sent[0] is None and sent[1] == sent[2] is not None
        assert sent[1] is not None and sent[1].startswith("Bearer access-")
        status = signer.status()
        assert (status.state, status.issuer, status.scopes) == (
            AuthState.SIGNED_IN,
            fake.issuer,
            ("mcp:read",),
        )
        assert "access-" not in repr(status) and "refresh-" not in repr(status)


async def test_the_request_body_is_sent_again_after_the_401() -> None:
    async with FakeOAuthServer().serve() as fake, authorizer(fake) as signer:
        await post(signer, fake.mcp_url, b'{"jsonrpc": "2.0", "id": 7}')
        first, second = fake.resource_requests
        assert first.body == second.body == b'{"jsonrpc": "2.0", "id": 7}'


async def test_without_a_prompt_a_sign_in_is_required_with_the_command() -> None:
    async with FakeOAuthServer().serve() as fake, authorizer(fake, prompt=None) as signer:
        with pytest.raises(AuthorizationRequired) as caught:
            await post(signer, fake.mcp_url)
        assert caught.value.hint == "trio-mcp login srv"
        assert str(caught.value).endswith("; to sign in, run: trio-mcp login srv")
        status = signer.status()
        assert (status.state, status.hint) == (AuthState.NEEDS_AUTH, "trio-mcp login srv")
        assert fake.count("/authorize") == 0 and fake.registrations == []


@pytest.mark.parametrize("challenge", ["", 'Basic realm="x"'])
async def test_a_401_without_a_bearer_challenge_is_refused_credentials(challenge: str) -> None:
    async with FakeOAuthServer(raw_challenge=challenge).serve() as fake, authorizer(fake) as signer:
        with pytest.raises(CredentialsRefused) as caught:
            await post(signer, fake.mcp_url)
    assert "the server refused the credentials" in str(caught.value)
    assert "headers" in str(caught.value)
    assert fake.count("/.well-known/oauth-authorization-server") == 0


async def test_without_a_challenge_url_the_path_then_the_root_prm_is_tried() -> None:
    fake = FakeOAuthServer(prm_at="root", challenge_names_prm=False)
    async with fake.serve(), authorizer(fake) as signer:
        assert (await post(signer, fake.mcp_url)).status_code == 200
        assert fake.resource_server is not None
        paths = [r.path for r in fake.resource_server.requests if r.method == "GET"]
        assert paths == [
            "/.well-known/oauth-protected-resource/mcp",
            "/.well-known/oauth-protected-resource",
        ]
        # the root PRM names the origin as its resource: that is what is asked for
        assert fake.authorizations[0]["resource"] == fake.resource_server.base


async def test_oidc_metadata_under_a_path_is_found_in_the_2025_11_25_order() -> None:
    fake = FakeOAuthServer(as_path="/tenant1", metadata_kind="oidc")
    async with fake.serve(), authorizer(fake) as signer:
        assert (await post(signer, fake.mcp_url)).status_code == 200
        assert fake.authorization_server is not None
        assert [r.path for r in fake.authorization_server.requests if r.method == "GET"][:3] == [
            "/.well-known/oauth-authorization-server/tenant1",
            "/.well-known/openid-configuration/tenant1",
            "/tenant1/.well-known/openid-configuration",
        ]


async def test_without_prm_the_2025_03_26_defaults_apply() -> None:
    fake = FakeOAuthServer(prm_at=None, iss="omit")
    async with fake.serve():
        # The resource server is also the authorization server in that revision.
        assert fake.resource_server is not None and fake.authorization_server is not None
        fake.resource_server.handler, rs_handler = _both(fake), fake.resource_server.handler
        async with authorizer(fake) as signer:
            assert (await post(signer, fake.mcp_url)).status_code == 200
        assert rs_handler is not None
        assert [r.path for r in fake.resource_server.requests if r.method == "POST"][:3] == [
            "/mcp",
            "/register",
            "/token",
        ]


def _both(fake: FakeOAuthServer) -> Any:
    """The resource and a metadata-less authorization server on one origin."""

    async def handle(request: Any, reply: Any) -> None:
        if request.path in ("/authorize", "/token", "/register"):
            await fake.handle_authorization(request, reply)
        else:
            await fake.handle_resource(request, reply)

    return handle


# --------------------------------------------------------------------------- hostile documents


@pytest.mark.parametrize(
    ("changes", "body", "words"),
    [
        ({"issuer": "https://attacker.example"}, None, "names the issuer"),
        ({"token_endpoint": "https://evil.example/token"}, None, "another origin"),
        ({"authorization_endpoint": "http://example.com/authorize"}, None, "plain http://"),
        ({"code_challenge_methods_supported": None}, None, "PKCE S256"),
        ({"code_challenge_methods_supported": ["plain"]}, None, "PKCE S256"),
        ({"token_endpoint": 42}, None, "is not a string"),
        ({}, b"<html>not json</html>", "is not JSON"),
        ({}, b"[1, 2]", "not a JSON object"),
        ({}, b'{"a": "' + b"x" * 300_000 + b'"}', "larger than"),
    ],
)
async def test_hostile_metadata_is_refused_before_any_credential_is_sent(
    changes: dict[str, Any], body: bytes | None, words: str
) -> None:
    fake = FakeOAuthServer(metadata_changes=changes, metadata_body=body)
    async with fake.serve(), authorizer(fake) as signer:
        with pytest.raises(OAuthMetadataError, match=words):
            await post(signer, fake.mcp_url)
        assert fake.registrations == [] and fake.authorizations == []
        assert fake.token_requests == []
        # the runtime goes on: the next request asks again (and fails the same way)
        fake.metadata_changes, fake.metadata_body = {}, None
        assert (await post(signer, fake.mcp_url)).status_code == 200


async def test_a_prm_about_another_resource_is_refused() -> None:
    fake = FakeOAuthServer(prm_resource="https://evil.example/mcp")
    async with fake.serve(), authorizer(fake) as signer:
        with pytest.raises(OAuthMetadataError, match="not this server"):
            await post(signer, fake.mcp_url)
        assert fake.authorizations == []


# --------------------------------------------------------------------------- redirect checks


@pytest.mark.parametrize(
    ("iss", "supported", "ok"),
    [
        ("correct", True, True),
        ("omit", False, True),
        ("omit", True, False),
        ("wrong", True, False),
        ("wrong", False, False),
    ],
)
async def test_the_iss_of_the_redirect_follows_rfc_9207(
    iss: Literal["correct", "omit", "wrong"], supported: bool, ok: bool
) -> None:
    fake = FakeOAuthServer(iss=iss, iss_supported=supported)
    async with fake.serve(), authorizer(fake) as signer:
        if ok:
            assert (await post(signer, fake.mcp_url)).status_code == 200
        else:
            with pytest.raises(OAuthFlowError, match="iss"):
                await post(signer, fake.mcp_url)
            assert fake.token_requests == []


async def test_a_redirect_with_another_state_is_refused() -> None:
    async def forged(request: AuthorizationRequest) -> str:
        answer = await headless_sign_in(request)
        return answer.replace("state=", "state=x")

    async with FakeOAuthServer().serve() as fake, authorizer(fake, prompt=forged) as signer:
        with pytest.raises(OAuthFlowError, match="state") as caught:
            await post(signer, fake.mcp_url)
        assert caught.value.error == "state_mismatch"
        assert fake.token_requests == []
        assert "code-" not in str(caught.value)


async def test_a_prompt_that_fails_fails_the_sign_in_not_the_actor() -> None:
    async def broken(request: AuthorizationRequest) -> str:
        raise RuntimeError("the window was closed")

    async with FakeOAuthServer().serve() as fake, authorizer(fake, prompt=broken) as signer:
        with pytest.raises(OAuthFlowError, match="RuntimeError") as caught:
            await post(signer, fake.mcp_url)
        assert isinstance(caught.value.__cause__, RuntimeError)
        assert signer.status().state is AuthState.SIGNED_OUT
        status = await signer.login(headless_sign_in, redirect_uri="http://127.0.0.1:9/cb")
        assert status.state is AuthState.SIGNED_IN


# --------------------------------------------------------------------------- registration


async def test_pre_registered_credentials_use_basic_auth_without_registering() -> None:
    fake = FakeOAuthServer(
        auth_methods=["client_secret_basic"], metadata_changes={"registration_endpoint": None}
    )
    settings = OAuthSettings(client_id="pre", client_secret="s3cret")
    async with fake.serve(), authorizer(fake, settings=settings) as signer:
        assert (await post(signer, fake.mcp_url)).status_code == 200
        assert fake.registrations == []
        assert fake.authorizations[0]["client_id"] == "pre"
        (headers,) = fake.token_headers
        assert headers["authorization"].startswith("Basic ")
        assert "client_secret" not in fake.token_requests[0]


async def test_client_secret_post_sends_the_secret_in_the_form() -> None:
    fake = FakeOAuthServer(auth_methods=["client_secret_post"])
    async with fake.serve(), authorizer(fake) as signer:
        assert (await post(signer, fake.mcp_url)).status_code == 200
        assert fake.registrations[0]["token_endpoint_auth_method"] == "client_secret_post"
        assert fake.token_requests[0]["client_secret"] == "dynamic-secret-1"
        assert "authorization" not in fake.token_headers[0]


async def test_a_client_id_metadata_document_is_used_where_supported() -> None:
    fake = FakeOAuthServer(cimd=True)
    settings = OAuthSettings(client_metadata_url="https://client.example/meta.json")
    async with fake.serve(), authorizer(fake, settings=settings) as signer:
        assert (await post(signer, fake.mcp_url)).status_code == 200
        assert fake.registrations == []
        assert fake.authorizations[0]["client_id"] == "https://client.example/meta.json"


async def test_a_new_authorization_server_gets_a_new_registration() -> None:
    store = MemoryTokenStore()
    async with (
        FakeOAuthServer().serve() as fake,
        FakeOAuthServer(client_prefix="second").serve() as other,
    ):
        async with authorizer(fake, store=store) as signer:
            assert (await post(signer, fake.mcp_url)).status_code == 200
            fake.moved_to = other  # the resource now trusts another authorization server
            assert (await post(signer, fake.mcp_url)).status_code == 200
        assert fake.count("/register") == 1 and other.count("/register") == 1
        # the first server's client id never went to the second one
        assert [a["client_id"] for a in other.authorizations] == ["second-1"]
        assert [t["client_id"] for t in other.token_requests] == ["second-1"]
        assert fake.authorizations[0]["client_id"] == "dynamic-1"
        issuers = sorted(c.key.issuer for c in await store.list())
        assert issuers == sorted([fake.issuer, other.issuer])


# --------------------------------------------------------------------------- scopes


async def test_offline_access_is_asked_for_only_when_the_server_lists_it() -> None:
    for listed, expected in ((["mcp", "offline_access"], "mcp offline_access"), (["mcp"], "mcp")):
        fake = FakeOAuthServer(prm_scopes=["mcp"], scopes_supported=listed)
        async with fake.serve(), authorizer(fake) as signer:
            await post(signer, fake.mcp_url)
        assert fake.authorizations[0]["scope"] == expected


async def test_no_scope_is_sent_when_nobody_names_one() -> None:
    async with FakeOAuthServer().serve() as fake, authorizer(fake) as signer:
        await post(signer, fake.mcp_url)
    assert "scope" not in fake.authorizations[0]


async def test_a_403_insufficient_scope_reauthorizes_with_the_union() -> None:
    fake = FakeOAuthServer(
        challenge_scope="read", needed=frozenset({"read", "write"}), needed_scope="write"
    )
    async with fake.serve(), authorizer(fake) as signer:
        assert (await post(signer, fake.mcp_url)).status_code == 200
        assert [a.get("scope") for a in fake.authorizations] == ["read", "read write"]
        assert signer.status().scopes == ("read", "write")


async def test_step_up_stops_after_max_step_up_with_insufficient_scope() -> None:
    fake = FakeOAuthServer(needed=frozenset({"admin"}), needed_scope="admin")
    async with fake.serve(), authorizer(fake, settings=OAuthSettings(max_step_up=2)) as signer:
        # the server grants "admin" at the authorization server but the resource never
        # accepts it: make it need a scope nobody gets
        fake.needed = frozenset({"never"})
        with pytest.raises(InsufficientScope) as caught:
            await post(signer, fake.mcp_url)
        assert len(fake.authorizations) == 3  # the sign-in and two step-ups
        assert caught.value.hint == "trio-mcp login srv"
        assert caught.value.scopes == ("admin",)


async def test_without_a_prompt_step_up_is_insufficient_scope_at_once() -> None:
    fake = FakeOAuthServer(needed=frozenset({"admin"}), needed_scope="admin")
    store = MemoryTokenStore()
    async with fake.serve():
        async with authorizer(fake, store=store) as signer:
            fake.needed = frozenset()
            await post(signer, fake.mcp_url)
        fake.needed = frozenset({"admin"})
        async with authorizer(fake, store=store, prompt=None) as signer:
            with pytest.raises(InsufficientScope, match="takes a new sign-in"):
                await post(signer, fake.mcp_url)
        assert len(fake.authorizations) == 1


# --------------------------------------------------------------------------- refresh


async def _signed_in(fake: FakeOAuthServer, store: TokenStore, clock: Clock) -> None:
    async with authorizer(fake, store=store, clock=clock) as signer:
        assert (await post(signer, fake.mcp_url)).status_code == 200


async def test_two_tasks_finding_the_token_expired_refresh_once() -> None:
    store, clock = MemoryTokenStore(), Clock()
    fake = FakeOAuthServer(token_delay=0.05)
    async with fake.serve():
        await _signed_in(fake, store, clock)
        clock.now += 3600
        async with authorizer(fake, store=store, clock=clock, prompt=None) as signer:
            results: list[int] = []

            async def one() -> None:
                results.append((await post(signer, fake.mcp_url)).status_code)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(one)
                nursery.start_soon(one)
        assert results == [200, 200]
        grants = [t["grant_type"] for t in fake.token_requests]
        assert grants == ["authorization_code", "refresh_token"]
        assert fake.token_requests[1]["resource"] == fake.mcp_url


async def test_a_refresh_token_is_kept_when_not_rotated_and_replaced_when_rotated() -> None:
    for rotate in (False, True):
        store, clock = MemoryTokenStore(), Clock()
        fake = FakeOAuthServer(rotate=rotate)
        async with fake.serve():
            await _signed_in(fake, store, clock)
            (before,) = await store.list()
            clock.now += 3600
            await _signed_in(fake, store, clock)
            (after,) = await store.list()
        assert before.tokens is not None and after.tokens is not None
        assert after.tokens.access_token != before.tokens.access_token
        kept = after.tokens.refresh_token == before.tokens.refresh_token
        assert kept is not rotate
        assert after.revision > before.revision


async def test_invalid_grant_on_refresh_needs_auth_and_leaves_the_record() -> None:
    store, clock = MemoryTokenStore(), Clock()
    fake = FakeOAuthServer()
    async with fake.serve():
        await _signed_in(fake, store, clock)
        fake.refresh_error = "invalid_grant"
        clock.now += 3600
        async with authorizer(fake, store=store, clock=clock, prompt=None) as signer:
            with pytest.raises(AuthorizationRequired, match="invalid_grant") as caught:
                await post(signer, fake.mcp_url)
            assert signer.status().state is AuthState.NEEDS_AUTH
    assert caught.value.hint == "trio-mcp login srv"
    (kept,) = await store.list()
    assert kept.tokens is not None and kept.tokens.refresh_token is not None


async def test_an_unreachable_authorization_server_on_refresh_keeps_the_record() -> None:
    store, clock = MemoryTokenStore(), Clock()
    fake = FakeOAuthServer()
    async with fake.serve():
        await _signed_in(fake, store, clock)
        (before,) = await store.list()
        fake.token_broken = True
        clock.now += 3600
        async with authorizer(fake, store=store, clock=clock, prompt=None) as signer:
            with pytest.raises(RefreshUnreachable, match="the stored sign-in is kept"):
                await post(signer, fake.mcp_url)
            assert fake.authorization_server is not None
            await fake.authorization_server.kill()
            with pytest.raises(RefreshUnreachable, match="could not be reached"):
                await post(signer, fake.mcp_url)
    assert await store.list() == (before,)


async def test_a_newer_revision_saved_meanwhile_is_used_instead_of_refreshing() -> None:
    store, clock = MemoryTokenStore(), Clock()
    fake = FakeOAuthServer()
    async with fake.serve():
        await _signed_in(fake, store, clock)
        async with authorizer(fake, store=store, clock=clock, prompt=None) as signer:
            await post(signer, fake.mcp_url)  # loads the credential
            (held,) = await store.list()
            assert held.tokens is not None
            # another process refreshed and saved a newer revision
            fake.tokens["access-other"] = frozenset()
            newer = TokenRecord(access_token="access-other", expires_at=clock.now + 7200)
            await store.save(
                Credential(key=held.key, client=held.client, tokens=newer, revision=held.revision)
            )
            clock.now += 3600
            response = await post(signer, fake.mcp_url)
        assert response.status_code == 200
        assert [t["grant_type"] for t in fake.token_requests] == ["authorization_code"]
        assert fake.resource_requests[-1].header("authorization") == "Bearer access-other"


# --------------------------------------------------------------------------- machine to machine


async def test_client_credentials_sign_in_on_their_own_with_basic_auth() -> None:
    fake = FakeOAuthServer(auth_methods=["client_secret_basic"], client_secret="s3cret")
    settings = OAuthSettings(
        client_id="registered-client", client_secret="s3cret", grant=Grant.CLIENT_CREDENTIALS
    )
    async with fake.serve(), authorizer(fake, settings=settings, prompt=None) as signer:
        assert (await post(signer, fake.mcp_url)).status_code == 200
        assert [t["grant_type"] for t in fake.token_requests] == ["client_credentials"]
        assert fake.token_headers[0]["authorization"].startswith("Basic ")
        assert fake.authorizations == []
        # the first request already carried the token (no 401 round trip)
        assert fake.resource_requests[0].header("authorization") is not None


async def test_client_credentials_with_private_key_jwt() -> None:
    key = DPoPKey.generate().to_pem()
    fake = FakeOAuthServer(auth_methods=["private_key_jwt"])
    settings = OAuthSettings(
        client_id="registered-client", private_key=key, grant=Grant.CLIENT_CREDENTIALS
    )
    async with fake.serve(), authorizer(fake, settings=settings, prompt=None) as signer:
        assert (await post(signer, fake.mcp_url)).status_code == 200
        form = fake.token_requests[0]
        assert form["client_assertion_type"].endswith("jwt-bearer")
        assert form["client_assertion"].count(".") == 2


async def test_dpop_binds_the_token_and_answers_nonces_at_both_servers() -> None:
    fake = FakeOAuthServer(dpop_nonce="n-1")
    async with fake.serve(), authorizer(fake, settings=OAuthSettings(dpop=True)) as signer:
        assert (await post(signer, fake.mcp_url)).status_code == 200
        # the token request was sent twice (use_dpop_nonce), both times with a proof
        assert len(fake.token_requests) == 2
        assert all("dpop" in headers for headers in fake.token_headers)
        last = fake.resource_requests[-1]
        assert (last.header("authorization") or "").startswith("DPoP ")
        assert last.header("dpop") is not None
        (stored,) = await signer._store.list()
        assert stored.dpop_key is not None and "PRIVATE" not in repr(stored)
        # The actor learned the resource's nonce from that exchange: the next request's proof
        # carries it, so the resource answers at once (one request, no use_dpop_nonce round).
        before = len(fake.resource_requests)
        assert (await post(signer, fake.mcp_url)).status_code == 200
        assert len(fake.resource_requests) == before + 1


# --------------------------------------------------------------------------- device, logout


async def test_the_device_grant_polls_until_approved(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeOAuthServer(device=True, device_pending=2)
    shown: list[DeviceAuthorization] = []

    async def show(device: DeviceAuthorization) -> None:
        shown.append(device)

    async with fake.serve(), authorizer(fake) as signer:
        start = trio.current_time()
        status = await signer.login_device(show)
        took = trio.current_time() - start
    assert status.state is AuthState.SIGNED_IN
    assert shown[0].user_code == "WDJB-MJHT" and shown[0].interval == 5.0
    assert [t["grant_type"] for t in fake.token_requests] == [
        "urn:ietf:params:oauth:grant-type:device_code"
    ] * 3
    assert 15.0 <= took < 16.0  # three polls, 5 s apart
    assert fake.authorizations[0]["resource"] == fake.mcp_url


async def test_the_device_grant_needs_a_server_that_offers_it() -> None:
    async with FakeOAuthServer().serve() as fake, authorizer(fake) as signer:
        with pytest.raises(OAuthFlowError, match="no device authorization"):
            await signer.login_device(_ignore)


async def _ignore(device: DeviceAuthorization) -> None:
    await trio.lowlevel.checkpoint()


async def test_logout_forgets_every_credential_of_the_server() -> None:
    store = MemoryTokenStore()
    async with (
        FakeOAuthServer().serve() as fake,
        open_authorizer(
            server="srv",
            settings=OAuthSettings(),
            store=store,
            http=HttpParameters(url=fake.mcp_url),
        ) as signer,
    ):
        status = await signer.login(headless_sign_in, redirect_uri="http://127.0.0.1:5/cb")
        assert status.state is AuthState.SIGNED_IN
        assert fake.authorizations[0]["redirect_uri"] == "http://127.0.0.1:5/cb"
        assert await signer.logout() is True
        assert signer.status().state is AuthState.SIGNED_OUT
        assert await store.list() == ()
        assert await signer.logout() is False


async def test_a_stored_credential_of_another_server_is_never_used() -> None:
    store = MemoryTokenStore()
    async with FakeOAuthServer().serve() as fake:
        key = CredentialKey(server="other", resource=fake.mcp_url, issuer=fake.issuer)
        fake.tokens["access-theirs"] = frozenset()
        await store.save(Credential(key=key, tokens=TokenRecord(access_token="access-theirs")))
        async with authorizer(fake, store=store, prompt=None) as signer:
            with pytest.raises(AuthorizationRequired):
                await post(signer, fake.mcp_url)
        assert fake.resource_requests[0].header("authorization") is None


async def test_no_token_goes_to_another_origin() -> None:
    async with FakeOAuthServer().serve() as fake, authorizer(fake) as signer:
        await post(signer, fake.mcp_url)
        assert fake.authorization_server is not None
        await post(signer, f"{fake.authorization_server.base}/elsewhere")
        assert fake.authorization_server.requests[-1].header("authorization") is None


async def test_errors_and_status_hold_no_secret() -> None:
    fake = FakeOAuthServer(refresh_error="invalid_grant")
    store, clock = MemoryTokenStore(), Clock()
    async with fake.serve():
        await _signed_in(fake, store, clock)
        clock.now += 3600
        async with authorizer(fake, store=store, clock=clock, prompt=None) as signer:
            with pytest.raises(AuthorizationRequired) as caught:
                await post(signer, fake.mcp_url)
            shown = f"{caught.value} {signer.status()!r} {signer!r}"
    assert "access-" not in shown and "refresh-" not in shown and "code-" not in shown


async def test_two_processes_sharing_a_store_refresh_once(tmp_path: Any) -> None:
    # Signed in by this process; then two processes, whose clocks say the token ran out, send
    # a request at the same time: one refreshes under the store's lock, the other finds the
    # newer revision (however they interleave), so the token endpoint sees one refresh.
    store = FileTokenStore(tmp_path)
    fake = FakeOAuthServer(token_delay=0.2)
    async with fake.serve():
        async with authorizer(fake, store=store) as signer:
            assert (await post(signer, fake.mcp_url)).status_code == 200
        peer = Path(__file__).with_name("oauth_refresher.py")
        outputs: list[bytes] = []

        async def run() -> None:
            done = await trio.run_process(
                [sys.executable, str(peer), str(tmp_path), fake.mcp_url, "3600"],
                capture_stdout=True,
                env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
            )
            outputs.append(done.stdout.strip())

        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(run)
                nursery.start_soon(run)
    assert outputs == [b"200", b"200"]
    assert [t["grant_type"] for t in fake.token_requests] == [
        "authorization_code",
        "refresh_token",
    ]


# --------------------------------------------------------------------------- the prompt's task


class Held:
    """A host prompt that waits for the user (``release``) in the task it was given, then
    answers as a browser would; it records that task, each request and how it ended."""

    def __init__(self, *, fails: bool = False) -> None:
        self.entered = trio.Event()
        self.release = trio.Event()
        self.fails = fails
        self.requests: list[AuthorizationRequest] = []
        self.tasks: list[trio.lowlevel.Task] = []
        self.ended: list[str] = []

    async def __call__(self, request: AuthorizationRequest) -> str:
        self.requests.append(request)
        self.tasks.append(trio.lowlevel.current_task())
        self.entered.set()
        try:
            await self.release.wait()
        except trio.Cancelled:
            self.ended.append("cancelled")
            raise
        if self.fails:
            self.ended.append("raised")
            raise RuntimeError("the window was closed")
        self.ended.append("answered")
        return await headless_sign_in(request)


@asynccontextmanager
async def running(
    fake: FakeOAuthServer,
    *,
    prompt: AuthorizationPrompt | None = None,
    store: TokenStore | None = None,
    deadline: float = 20,
) -> AsyncIterator[tuple[Authorizer, trio.lowlevel.Task, trio.Nursery]]:
    """An Authorizer, the task that runs it (its actor task), and a nursery for callers (the
    actor is stopped once they are all done); all within ``deadline`` seconds."""
    signer = Authorizer(
        server="srv",
        settings=OAuthSettings(),
        store=store if store is not None else MemoryTokenStore(),
        http=HttpParameters(url=fake.mcp_url),
        prompt=prompt,
        clock=Clock(),
    )
    with trio.fail_after(deadline):
        async with trio.open_nursery() as actor:
            await actor.start(signer.run)
            (task,) = actor.child_tasks
            async with trio.open_nursery() as callers:
                yield signer, task, callers
            actor.cancel_scope.cancel()


def waiting(signer: Authorizer) -> tuple[int, int]:
    """How many token requests and logins wait for the pending sign-in."""
    pending = signer._pending
    assert pending is not None
    return len(pending.for_grant), len(pending.for_status)


async def test_the_prompt_runs_in_a_child_task_while_the_actor_serves_status_and_requests() -> None:
    held = Held()
    results: list[Any] = []

    async def login() -> None:
        results.append(await signer.login(held, redirect_uri="http://127.0.0.1:7/cb"))

    async with FakeOAuthServer().serve() as fake, running(fake) as (signer, actor, callers):
        first = await signer.login(headless_sign_in)
        assert first.state is AuthState.SIGNED_IN
        callers.start_soon(login)
        await held.entered.wait()
        # The host's prompt is not run by the actor's task: by a task the actor started.
        (prompted,) = held.tasks
        assert prompted is not actor
        assert prompted.parent_nursery is not None
        assert prompted.parent_nursery.parent_task is actor
        # While the user takes their time, the actor answers: the status says a sign-in waits
        # (the held token is still the one used), and a request goes out with that token.
        status = signer.status()
        assert (status.state, status.issuer) == (AuthState.SIGNED_IN, fake.issuer)
        assert status.reason == f"a sign-in at {fake.issuer} is waiting for the user"
        response = await post(signer, fake.mcp_url)
        assert response.status_code == 200
        used = fake.resource_requests[-1].header("authorization")
        assert used is not None and used.startswith("Bearer access-")
        assert results == [] and held.ended == []
        # nothing of the sign-in's secrets shows
        url = held.requests[0].url
        state = httpx.URL(url).params["state"]
        assert state not in repr(signer._pending) and state not in repr(signer.status())
        held.release.set()
    (second,) = results
    assert (second.state, second.reason) == (AuthState.SIGNED_IN, None)
    assert signer.status().reason is None
    assert [t["grant_type"] for t in fake.token_requests] == ["authorization_code"] * 2
    assert fake.token_requests[1]["redirect_uri"] == "http://127.0.0.1:7/cb"
    assert held.ended == ["answered"]


async def test_requests_that_need_the_sign_in_wait_for_the_one_prompt() -> None:
    # The host opted in: the first request's 401 starts the sign-in; a request that comes
    # while the prompt waits, without a token, waits for it (nothing sent to the server),
    # and both go out with the new token once the user is back.
    held = Held()
    codes: list[int] = []

    async def one() -> None:
        codes.append((await post(signer, fake.mcp_url)).status_code)

    async with (
        FakeOAuthServer().serve() as fake,
        running(fake, prompt=held) as (signer, _, callers),
    ):
        callers.start_soon(one)
        await held.entered.wait()
        callers.start_soon(one)
        await trio.testing.wait_all_tasks_blocked()
        assert waiting(signer) == (2, 0)
        assert len(fake.resource_requests) == 1  # the first one's, refused with 401
        assert signer.status().state is AuthState.SIGNED_OUT
        held.release.set()
    assert codes == [200, 200]
    assert len(held.requests) == 1 and len(fake.token_requests) == 1
    tokens = {r.header("authorization") for r in fake.resource_requests[1:]}
    assert len(tokens) == 1 and None not in tokens


async def test_a_logout_cancels_the_pending_prompt_and_fails_its_waiters() -> None:
    held = Held()
    outcomes: list[str] = []

    async def ask(what: str, call: Any) -> None:
        try:
            await call()
        except AuthorizationRequired as exc:
            outcomes.append(f"{what}: {type(exc).__name__}: {exc}")

    async with FakeOAuthServer().serve() as fake, running(fake) as (signer, _, callers):
        callers.start_soon(ask, "login", lambda: signer.login(held))
        await held.entered.wait()
        callers.start_soon(ask, "request", lambda: post(signer, fake.mcp_url))
        await trio.testing.wait_all_tasks_blocked()
        assert waiting(signer) == (1, 1)
        # the registration was stored when it was made (no tokens yet): logout forgets it
        assert await signer.logout() is True
        await trio.testing.wait_all_tasks_blocked()
        assert held.ended == ["cancelled"]
        status = signer.status()
        assert (status.state, status.reason) == (AuthState.SIGNED_OUT, None)
        assert signer._pending is None
        # the actor goes on: a new sign-in works
        again = await signer.login(headless_sign_in)
        assert again.state is AuthState.SIGNED_IN
    signed_out = (
        "AuthorizationRequired: the user signed out of 'srv' while its sign-in was waiting for "
        "them: the sign-in was cancelled; to sign in again, run: trio-mcp login srv"
    )
    assert sorted(outcomes) == [f"login: {signed_out}", f"request: {signed_out}"]
    assert [t["grant_type"] for t in fake.token_requests] == ["authorization_code"]


async def test_a_second_login_while_one_is_pending_joins_it() -> None:
    held, other = Held(), Held()
    results: list[Any] = []

    async def login(prompt: AuthorizationPrompt) -> None:
        results.append(await signer.login(prompt))

    async with FakeOAuthServer().serve() as fake, running(fake) as (signer, _, callers):
        callers.start_soon(login, held)
        await held.entered.wait()
        callers.start_soon(login, other)
        await trio.testing.wait_all_tasks_blocked()
        assert waiting(signer) == (0, 2)
        held.release.set()
    assert [r.state for r in results] == [AuthState.SIGNED_IN] * 2
    assert other.requests == []  # one sign-in, one prompt: the second one was never called
    assert len(fake.authorizations) == len(fake.token_requests) == 1


async def test_a_prompt_that_raises_fails_its_sign_in_and_every_waiter_not_the_actor() -> None:
    held = Held(fails=True)
    errors: list[OAuthFlowError] = []

    async def ask(call: Any) -> None:
        try:
            await call()
        except OAuthFlowError as exc:
            errors.append(exc)

    async with FakeOAuthServer().serve() as fake, running(fake) as (signer, _, callers):
        callers.start_soon(ask, lambda: signer.login(held))
        await held.entered.wait()
        callers.start_soon(ask, lambda: post(signer, fake.mcp_url))
        await trio.testing.wait_all_tasks_blocked()
        assert waiting(signer) == (1, 1)
        held.release.set()
        await trio.testing.wait_all_tasks_blocked()
        assert len(errors) == 2
        assert signer.status().state is AuthState.SIGNED_OUT
        assert signer.status().reason is None
        assert (await signer.login(headless_sign_in)).state is AuthState.SIGNED_IN
    for error in errors:
        assert str(error) == "the sign-in of 'srv' failed: its prompt raised RuntimeError"
        assert isinstance(error.__cause__, RuntimeError)
    assert fake.token_requests[0]["grant_type"] == "authorization_code"
    assert len(fake.token_requests) == 1


async def test_a_prompt_that_answers_no_url_fails_the_sign_in() -> None:
    async def wrong(request: AuthorizationRequest) -> str:
        await trio.lowlevel.checkpoint()
        return None  # type: ignore[return-value]

    async with FakeOAuthServer().serve() as fake, running(fake) as (signer, _, _callers):
        with pytest.raises(OAuthFlowError, match="returned a NoneType, not the URL"):
            await signer.login(wrong)
        assert signer._pending is None
    assert fake.token_requests == []


async def test_what_waits_for_the_sign_in_fails_when_it_stops_instead_of_waiting_forever() -> None:
    # A login whose user never comes back, a request waiting for it: the sign-in's task is
    # cancelled (the runtime closes); both callers, in tasks of their own, get an error, and
    # the prompt's task is cancelled with the actor.
    held = Held()
    outcomes: list[str] = []

    async def ask(what: str, call: Any) -> None:
        try:
            await call()
        except AuthorizationError as exc:
            outcomes.append(f"{what}: {exc}")

    with trio.fail_after(10):
        async with FakeOAuthServer().serve() as fake, trio.open_nursery() as callers:
            signer = Authorizer(
                server="srv",
                settings=OAuthSettings(),
                store=MemoryTokenStore(),
                http=HttpParameters(url=fake.mcp_url),
            )
            async with trio.open_nursery() as actor:
                await actor.start(signer.run)
                callers.start_soon(ask, "login", lambda: signer.login(held))
                await held.entered.wait()
                callers.start_soon(ask, "request", lambda: post(signer, fake.mcp_url))
                await trio.testing.wait_all_tasks_blocked()
                assert waiting(signer) == (1, 1)
                actor.cancel_scope.cancel()
    assert sorted(outcomes) == [
        "login: the sign-in of 'srv' has stopped",
        "request: the sign-in of 'srv' has stopped",
    ]
    assert held.ended == ["cancelled"]
    with pytest.raises(AuthorizationError, match="not running"):
        await signer.logout()


async def test_a_registration_is_kept_when_the_user_never_finishes_the_sign_in() -> None:
    # The first sign-in registers the client, then its user never comes back (the caller
    # gives up, the process ends): the registration is in the store already, and the next
    # sign-in (another process, the same store) uses it instead of registering again.
    store = MemoryTokenStore()
    held = Held()
    async with FakeOAuthServer().serve() as fake:
        async with running(fake, store=store) as (signer, _, callers):
            callers.start_soon(signer.login, held)
            await held.entered.wait()
            (kept,) = await store.list()
            assert kept.client is not None and kept.tokens is None
            assert (kept.client.client_id, kept.client.source) == ("dynamic-1", "dynamic")
            callers.cancel_scope.cancel()
        assert held.ended == ["cancelled"]
        async with running(fake, store=store) as (signer, _, _callers):
            status = await signer.login(headless_sign_in)
            assert (status.state, status.client_source) == (AuthState.SIGNED_IN, "dynamic")
    assert fake.count("/register") == 1
    assert httpx.URL(held.requests[0].url).params["client_id"] == "dynamic-1"
    assert [a["client_id"] for a in fake.authorizations] == ["dynamic-1"]
    assert [t["client_id"] for t in fake.token_requests] == ["dynamic-1"]


async def test_an_abandoned_sign_in_with_a_new_registration_keeps_the_stored_sign_in() -> None:
    # Signed in; a new sign-in at another redirect URI needs a new registration; the user
    # never finishes it: the stored tokens (and their client) are still there, unchanged.
    store = MemoryTokenStore()
    held = Held()
    async with (
        FakeOAuthServer().serve() as fake,
        running(fake, store=store) as (signer, _, callers),
    ):
        await signer.login(headless_sign_in, redirect_uri="http://127.0.0.1:5/cb")
        (before,) = await store.list()
        callers.start_soon(lambda: signer.login(held, redirect_uri="http://127.0.0.1:6/cb"))
        await held.entered.wait()
        assert httpx.URL(held.requests[0].url).params["client_id"] != "dynamic-1"
        assert await store.list() == (before,)
        callers.cancel_scope.cancel()
    assert before.client is not None and before.client.client_id == "dynamic-1"
    assert before.tokens is not None
    assert fake.count("/register") == 2


# --------------------------------------------------------------------------- the device flow's task


class Shown:
    """A host device prompt: records each device authorization, the task that showed it, and
    returns at once (or raises, with ``fails``)."""

    def __init__(self, *, fails: bool = False) -> None:
        self.entered = trio.Event()
        self.fails = fails
        self.devices: list[DeviceAuthorization] = []
        self.tasks: list[trio.lowlevel.Task] = []

    async def __call__(self, device: DeviceAuthorization) -> None:
        self.devices.append(device)
        self.tasks.append(trio.lowlevel.current_task())
        self.entered.set()
        await trio.lowlevel.checkpoint()
        if self.fails:
            raise RuntimeError("the screen is off")


def device_polls(fake: FakeOAuthServer, errors: Sequence[str] = ()) -> list[float]:
    """Answer the device code token requests with these OAuth ``errors`` in turn, then as the
    fake does (``authorization_pending`` ``device_pending`` times, then a token); returns the
    list that gets the trio time of each of those requests."""
    assert fake.authorization_server is not None
    server, inner = fake.authorization_server, fake.authorization_server.handler
    queue, times = list(errors), []

    async def handle(request: Any, reply: Any) -> None:
        if request.method == "POST" and request.path == "/token":
            form = request.form()
            if form.get("grant_type") == "urn:ietf:params:oauth:grant-type:device_code":
                times.append(trio.current_time())
                if queue:
                    fake.token_requests.append(form)
                    await reply.json({"error": queue.pop(0)}, status=400)
                    return
        await inner(request, reply)

    server.handler = handle
    return times


DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"


async def test_while_the_device_flow_polls_status_and_a_valid_token_are_served_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeOAuthServer(device=True, device_pending=2)
    shown = Shown()
    results: list[Any] = []

    async def login_device() -> None:
        results.append(await signer.login_device(shown))

    async with fake.serve(), running(fake, deadline=600) as (signer, actor, callers):
        assert (await signer.login(headless_sign_in)).state is AuthState.SIGNED_IN
        polls = device_polls(fake)
        start = trio.current_time()
        callers.start_soon(login_device)
        await shown.entered.wait()
        # The host's device prompt and the polling run in a task the actor started.
        (showing,) = shown.tasks
        assert showing is not actor
        assert showing.parent_nursery is not None
        assert showing.parent_nursery.parent_task is actor
        # While the device flow waits for the user, the actor answers at once: the status
        # (which says a sign-in waits) and a request with the token it holds.
        status = signer.status()
        assert (status.state, status.issuer) == (AuthState.SIGNED_IN, fake.issuer)
        assert status.reason == f"a sign-in at {fake.issuer} is waiting for the user"
        assert (await post(signer, fake.mcp_url)).status_code == 200
        assert trio.current_time() == start
        assert polls == [] and results == []
    # three polls, 5 s apart (two authorization_pending, then the token)
    assert polls == [start + 5, start + 10, start + 15]
    (status,) = results
    assert (status.state, status.reason) == (AuthState.SIGNED_IN, None)
    assert [t["grant_type"] for t in fake.token_requests] == ["authorization_code"] + [
        DEVICE_GRANT
    ] * 3
    assert shown.devices[0].expires_at == start + 600


async def test_a_logout_cancels_the_device_polling(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeOAuthServer(device=True, device_pending=10_000)
    shown = Shown()
    outcomes: list[str] = []

    async def login_device() -> None:
        try:
            await signer.login_device(shown)
        except AuthorizationRequired as exc:
            outcomes.append(f"{trio.current_time() - start}: {exc}")

    async with fake.serve(), running(fake, deadline=600) as (signer, _, callers):
        polls = device_polls(fake)
        start = trio.current_time()
        callers.start_soon(login_device)
        await shown.entered.wait()
        await trio.sleep(12)
        assert await signer.logout() is True  # the registration the device flow made
        assert trio.current_time() == start + 12
        assert signer._pending is None
        status = signer.status()
        assert (status.state, status.reason) == (AuthState.SIGNED_OUT, None)
        await trio.sleep(60)
    assert polls == [start + 5, start + 10]  # none after the logout
    assert outcomes == [
        "12.0: the user signed out of 'srv' while its sign-in was waiting for them: the "
        "sign-in was cancelled; to sign in again, run: trio-mcp login srv"
    ]


async def test_slow_down_adds_5_s_to_the_interval_and_requests_wait_for_the_device_flow(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeOAuthServer(device=True)
    shown = Shown()
    codes: list[tuple[int, float]] = []

    async def request() -> None:
        response = await post(signer, fake.mcp_url)
        codes.append((response.status_code, trio.current_time() - start))

    async with fake.serve(), running(fake, deadline=600) as (signer, _, callers):
        polls = device_polls(fake, ["slow_down", "authorization_pending", "slow_down"])
        start = trio.current_time()
        callers.start_soon(signer.login_device, shown)
        await shown.entered.wait()
        # no token yet: a request waits for the device sign-in (nothing sent without it)
        callers.start_soon(request)
        await trio.testing.wait_all_tasks_blocked()
        assert waiting(signer) == (1, 1)
        assert fake.resource_requests == []
    # 5 s, then 10 s after the slow_down, 10 s again, then 15 s after the second slow_down
    assert [t - start for t in polls] == [5.0, 15.0, 25.0, 40.0]
    assert codes == [(200, 40.0)]
    assert signer.status().state is AuthState.SIGNED_IN


@pytest.mark.parametrize(
    ("errors", "pending", "code", "message", "last_poll"),
    [
        (
            ["authorization_pending", "access_denied"],
            0,
            "access_denied",
            "the sign-in of 'srv' was refused: the user denied it at the authorization server "
            "(access_denied); to try again, run: trio-mcp login srv",
            10.0,
        ),
        (
            ["expired_token"],
            0,
            "expired_token",
            "the device code of 'srv' expired before the sign-in was approved; to try again, "
            "run: trio-mcp login srv",
            5.0,
        ),
        (
            [],
            10_000,
            "expired_token",
            "the device code of 'srv' expired before the sign-in was approved; to try again, "
            "run: trio-mcp login srv",
            600.0,
        ),
    ],
)
async def test_a_refused_or_expired_device_code_fails_the_login_not_the_actor(
    autojump_clock: trio.testing.MockClock,
    errors: list[str],
    pending: int,
    code: str,
    message: str,
    last_poll: float,
) -> None:
    fake = FakeOAuthServer(device=True, device_pending=pending)
    async with fake.serve(), running(fake, deadline=3600) as (signer, _, _callers):
        polls = device_polls(fake, errors)
        start = trio.current_time()
        with pytest.raises(OAuthFlowError) as caught:
            await signer.login_device(Shown())
        assert (caught.value.error, str(caught.value)) == (code, message)
        assert polls[-1] - start == last_poll
        assert trio.current_time() - start == last_poll + (5 if pending else 0)
        assert signer._pending is None
        assert signer.status().state is AuthState.SIGNED_OUT
        # the actor goes on: a browser sign-in works
        assert (await signer.login(headless_sign_in)).state is AuthState.SIGNED_IN


async def test_the_actors_end_fails_the_device_login_and_stops_the_polling(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeOAuthServer(device=True, device_pending=10_000)
    shown = Shown()
    outcomes: list[str] = []

    async def login_device() -> None:
        try:
            await signer.login_device(shown)
        except AuthorizationError as exc:
            outcomes.append(str(exc))

    async with fake.serve(), trio.open_nursery() as callers:
        polls = device_polls(fake)
        signer = Authorizer(
            server="srv",
            settings=OAuthSettings(),
            store=MemoryTokenStore(),
            http=HttpParameters(url=fake.mcp_url),
        )
        start = trio.current_time()
        async with trio.open_nursery() as actor:
            await actor.start(signer.run)
            callers.start_soon(login_device)
            await shown.entered.wait()
            await trio.sleep(7)
            actor.cancel_scope.cancel()
        await trio.sleep(60)
    assert outcomes == ["the sign-in of 'srv' has stopped"]
    assert polls == [start + 5]


async def test_a_device_prompt_that_raises_fails_the_login_and_nothing_is_polled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeOAuthServer(device=True)
    async with fake.serve(), running(fake, deadline=600) as (signer, _, _callers):
        polls = device_polls(fake)
        with pytest.raises(OAuthFlowError) as caught:
            await signer.login_device(Shown(fails=True))
        assert str(caught.value) == "the sign-in of 'srv' failed: RuntimeError"
        assert isinstance(caught.value.__cause__, RuntimeError)
        await trio.sleep(60)
        assert polls == [] and signer._pending is None


async def test_a_device_poll_that_does_not_get_through_backs_off_and_polls_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # RFC 8628 §3.5: the token endpoint drops two polls (the connection closes without an
    # answer): the interval doubles each time (5 -> 10 -> 20 s) and the sign-in goes on.
    fake = FakeOAuthServer(device=True)
    times: list[float] = []
    drops = [True, True]
    async with fake.serve(), authorizer(fake) as signer:
        assert fake.authorization_server is not None
        server, inner = fake.authorization_server, fake.authorization_server.handler

        async def handle(request: Any, reply: Any) -> None:
            polled = request.method == "POST" and request.path == "/token"
            if polled and request.form().get("grant_type") == DEVICE_GRANT:
                times.append(trio.current_time())
                if drops:
                    drops.pop()
                    await reply.abort()
                    return
            await inner(request, reply)

        server.handler = handle
        start = trio.current_time()
        status = await signer.login_device(Shown())
    assert status.state is AuthState.SIGNED_IN
    assert [t - start for t in times] == [5.0, 15.0, 35.0]
