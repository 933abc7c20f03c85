"""The sans-IO OAuth rules (protocol/_oauth.py): challenges, discovery URLs, metadata checks,
scopes, PKCE, the redirect's state and iss rules, token and registration requests and answers.
The parsers are fed garbage (hypothesis): they raise only the typed errors."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_mcp.protocol import (
    ClientAuth,
    OAuthFlowError,
    OAuthMetadataError,
    authorization_server_metadata_urls,
    authorization_url,
    bearer_challenge,
    canonical_resource,
    choose_token_auth_method,
    legacy_authorization_server,
    new_state,
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

ISSUER = "https://as.example/tenant1"


def metadata(**changes: Any) -> bytes:
    doc: dict[str, Any] = {
        "issuer": ISSUER,
        "authorization_endpoint": "https://as.example/tenant1/authorize",
        "token_endpoint": "https://as.example/tenant1/token",
        "code_challenge_methods_supported": ["S256"],
    }
    for field, value in changes.items():
        if value is None:
            doc.pop(field, None)
        else:
            doc[field] = value
    return json.dumps(doc).encode()


# --------------------------------------------------------------------------- challenges


def test_several_challenges_per_header_and_several_headers() -> None:
    found = parse_www_authenticate(
        [
            'Basic realm="x", Bearer resource_metadata="https://r/.well-known/x", '
            'scope="a b", error="insufficient_scope", error_description="need \\"b\\""',
            'DPoP algs="ES256", error="use_dpop_nonce"',
        ]
    )
    assert [c.scheme for c in found] == ["basic", "bearer", "dpop"]
    bearer = bearer_challenge(found)
    assert bearer is not None
    assert bearer.resource_metadata == "https://r/.well-known/x"
    assert bearer.scopes == ("a", "b")
    assert (bearer.error, bearer.error_description) == ("insufficient_scope", 'need "b"')
    assert found[2].error == "use_dpop_nonce"


def test_a_token68_challenge_and_no_bearer() -> None:
    found = parse_www_authenticate(["Negotiate abc==, Basic"])
    assert [c.scheme for c in found] == ["negotiate", "basic"]
    assert bearer_challenge(found) is None
    assert parse_www_authenticate([]) == ()


@given(st.lists(st.text(max_size=200), max_size=3))
def test_the_challenge_parser_never_raises(values: list[str]) -> None:
    for challenge in parse_www_authenticate(values):
        assert challenge.scheme == challenge.scheme.lower()


# --------------------------------------------------------------------------- discovery


def test_canonical_resource() -> None:
    assert canonical_resource("HTTPS://Example.COM:443/mcp/#frag") == "https://example.com/mcp"
    assert canonical_resource("http://127.0.0.1:8080/") == "http://127.0.0.1:8080"


def test_prm_urls_challenge_first_else_path_then_root() -> None:
    assert protected_resource_metadata_urls("https://r.example/public/mcp") == (
        "https://r.example/.well-known/oauth-protected-resource/public/mcp",
        "https://r.example/.well-known/oauth-protected-resource",
    )
    assert protected_resource_metadata_urls("https://r.example/", "https://r.example/m.json") == (
        "https://r.example/m.json",
    )
    with pytest.raises(OAuthMetadataError, match="plain http"):
        protected_resource_metadata_urls("https://r.example/mcp", "http://r.example/m.json")


def test_as_metadata_urls_in_the_2025_11_25_order() -> None:
    assert authorization_server_metadata_urls(ISSUER) == (
        "https://as.example/.well-known/oauth-authorization-server/tenant1",
        "https://as.example/.well-known/openid-configuration/tenant1",
        "https://as.example/tenant1/.well-known/openid-configuration",
    )
    assert authorization_server_metadata_urls("https://as.example") == (
        "https://as.example/.well-known/oauth-authorization-server",
        "https://as.example/.well-known/openid-configuration",
    )


def test_prm_resource_must_be_this_server_or_a_prefix_of_it() -> None:
    body = json.dumps({"resource": "https://r.example", "authorization_servers": [ISSUER]}).encode()
    prm = parse_protected_resource_metadata(
        body, url="https://r.example/x", server_url="https://r.example/mcp"
    )
    assert prm.authorization_servers == (ISSUER,)
    for resource in (
        "https://evil.example/mcp",
        "https://r.example/other",
        "https://r.example/mcpx",
    ):
        hostile = json.dumps({"resource": resource, "authorization_servers": [ISSUER]}).encode()
        with pytest.raises(OAuthMetadataError, match="not this server"):
            parse_protected_resource_metadata(
                hostile, url="https://r.example/x", server_url="https://r.example/mcp"
            )


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"issuer": "https://as.example/tenant1/"}, "names the issuer"),
        ({"issuer": None}, "names the issuer"),
        ({"code_challenge_methods_supported": None}, "PKCE S256"),
        ({"token_endpoint": "https://other.example/token"}, "another origin"),
        ({"token_endpoint": "http://as.example/token"}, "another origin|plain http"),
        ({"authorization_endpoint": "javascript:alert(1)"}, "https://"),
        ({"token_endpoint": None}, "no token_endpoint"),
        ({"scopes_supported": "a b"}, "not a list of strings"),
    ],
)
def test_hostile_as_metadata_is_refused(changes: dict[str, Any], words: str) -> None:
    with pytest.raises(OAuthMetadataError, match=words):
        parse_authorization_server_metadata(metadata(**changes), url="u", issuer=ISSUER)


def test_http_endpoints_only_on_loopback() -> None:
    loopback = "http://127.0.0.1:9"
    body = json.dumps(
        {
            "issuer": loopback,
            "token_endpoint": f"{loopback}/token",
            "code_challenge_methods_supported": ["S256"],
            "authorization_response_iss_parameter_supported": True,
        }
    ).encode()
    parsed = parse_authorization_server_metadata(body, url="u", issuer=loopback)
    assert parsed.iss_parameter_supported and parsed.authorization_endpoint is None
    remote = body.replace(b"127.0.0.1:9", b"as.example")
    with pytest.raises(OAuthMetadataError, match="plain http"):
        parse_authorization_server_metadata(remote, url="u", issuer="http://as.example")
    assert parse_authorization_server_metadata(
        remote, url="u", issuer="http://as.example", allow_http=True
    ).token_endpoint == ("http://as.example/token")


def test_the_2025_03_26_defaults() -> None:
    legacy = legacy_authorization_server("https://r.example/v1/mcp")
    assert (legacy.issuer, legacy.authorization_endpoint, legacy.token_endpoint) == (
        "https://r.example",
        "https://r.example/authorize",
        "https://r.example/token",
    )
    assert legacy.registration_endpoint == "https://r.example/register" and legacy.legacy


@given(st.binary(max_size=300))
def test_metadata_parsers_raise_only_typed_errors(body: bytes) -> None:
    for parse in (
        lambda: parse_authorization_server_metadata(body, url="u", issuer=ISSUER),
        lambda: parse_protected_resource_metadata(body, url="u", server_url="https://r/mcp"),
        lambda: parse_registration_response(201, body, url="u"),
        lambda: parse_device_authorization(200, body, url="u"),
    ):
        with contextlib.suppress(OAuthMetadataError):
            parse()


@given(st.integers(100, 599), st.binary(max_size=300))
def test_the_token_parser_raises_only_flow_errors(status: int, body: bytes) -> None:
    with contextlib.suppress(OAuthFlowError):
        parse_token_response(status, body, now=0.0)


# --------------------------------------------------------------------------- scopes


def test_scope_selection_order_and_offline_access() -> None:
    pick = select_scopes
    assert pick(configured=None, challenge=("a",), resource_scopes=("b",), server_scopes=None) == (
        "a",
    )
    assert pick(
        configured=None, challenge=None, resource_scopes=("b", "c"), server_scopes=None
    ) == (
        "b",
        "c",
    )
    assert pick(configured=None, challenge=None, resource_scopes=None, server_scopes=None) == ()
    assert pick(
        configured=None, challenge=("a",), resource_scopes=None, server_scopes=("offline_access",)
    ) == ("a", "offline_access")
    assert pick(configured=("x",), challenge=("a",), resource_scopes=None, server_scopes=None) == (
        "x",
    )
    assert step_up_scopes(("a", "b"), ("b", "c")) == ("a", "b", "c")


# --------------------------------------------------------------------------- authorization


def test_pkce_and_the_authorization_url() -> None:
    verifier, challenge = pkce_pair()
    assert 43 <= len(verifier) <= 128
    digest = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=")
    assert challenge == digest.decode()
    assert new_state() != new_state()
    server = parse_authorization_server_metadata(metadata(), url="u", issuer=ISSUER)
    url = authorization_url(
        server,
        client_id="c",
        redirect_uri="http://127.0.0.1:5/cb",
        scopes=(),
        state="s",
        code_challenge=challenge,
        resource="https://r.example/mcp",
    )
    query = parse_qs(urlsplit(url).query)
    assert query["code_challenge_method"] == ["S256"] and query["resource"] == [
        "https://r.example/mcp"
    ]
    assert "scope" not in query and query["response_type"] == ["code"]


@pytest.mark.parametrize(
    ("answer", "supported", "error"),
    [
        (f"http://127.0.0.1:5/cb?code=c&state=s&iss={ISSUER}", True, None),
        ("http://127.0.0.1:5/cb?code=c&state=s", False, None),
        ("http://127.0.0.1:5/cb?code=c&state=s", True, "iss_missing"),
        ("http://127.0.0.1:5/cb?code=c&state=s&iss=https://evil.example", True, "iss_mismatch"),
        ("http://127.0.0.1:5/cb?code=c&state=s&iss=https://evil.example", False, "iss_mismatch"),
        (f"http://127.0.0.1:5/cb?code=c&state=s&iss={ISSUER}/", True, "iss_mismatch"),
        (
            "http://127.0.0.1:5/cb?error=access_denied&state=s&iss=https://evil.example",
            False,
            "iss_mismatch",
        ),
        ("http://127.0.0.1:5/cb?error=access_denied&state=s", False, "access_denied"),
        ("http://127.0.0.1:5/cb?code=c&state=t", False, "state_mismatch"),
        ("http://127.0.0.1:5/cb?code=c&code=d&state=s", False, None),
        ("http://evil.example/cb?code=c&state=s", False, None),
    ],
)
def test_the_redirect_answer(answer: str, supported: bool, error: str | None) -> None:
    if error is None and "evil.example/cb" not in answer and "code=d" not in answer:
        assert (
            parse_redirect(
                answer,
                state="s",
                issuer=ISSUER,
                iss_supported=supported,
                redirect_uri="http://127.0.0.1:5/cb",
            )
            == "c"
        )
        return
    with pytest.raises(OAuthFlowError) as caught:
        parse_redirect(
            answer,
            state="s",
            issuer=ISSUER,
            iss_supported=supported,
            redirect_uri="http://127.0.0.1:5/cb",
        )
    if error is not None:
        assert caught.value.error == error
    assert "code=c" not in str(caught.value)


@given(st.text(max_size=300))
def test_the_redirect_parser_raises_only_flow_errors(answer: str) -> None:
    with contextlib.suppress(OAuthFlowError):
        parse_redirect(answer, state="s", issuer=ISSUER, iss_supported=True)


# --------------------------------------------------------------------------- token endpoint


def test_client_authentication_methods() -> None:
    def form(method: str, **kw: Any) -> tuple[dict[str, str], dict[str, str]]:
        request = token_request(
            "https://as/token",
            "refresh_token",
            ClientAuth(client_id="c i", method=method, **kw),
            refresh_token="r",
            resource="https://r/mcp",
        )
        return dict(request.form), dict(request.headers)

    body, headers = form("client_secret_basic", client_secret="s:x")
    assert headers["Authorization"] == "Basic " + base64.b64encode(b"c+i:s%3Ax").decode()
    assert "client_secret" not in body and body["resource"] == "https://r/mcp"
    body, headers = form("client_secret_post", client_secret="s")
    assert (body["client_id"], body["client_secret"], headers) == ("c i", "s", {})
    body, _ = form("none")
    assert body["client_id"] == "c i" and "client_secret" not in body
    body, _ = form("private_key_jwt", assertion="a.b.c")
    assert body["client_assertion"] == "a.b.c"
    assert body["client_assertion_type"].endswith(":jwt-bearer")
    assert "s:x" not in repr(token_request("u", "client_credentials", ClientAuth(client_id="c")))


def test_choosing_the_token_endpoint_auth_method() -> None:
    assert choose_token_auth_method(["client_secret_post"], has_secret=True) == "client_secret_post"
    assert choose_token_auth_method(None, has_secret=True) == "client_secret_basic"
    assert choose_token_auth_method(["none"], has_secret=False) == "none"
    assert (
        choose_token_auth_method(["private_key_jwt"], has_secret=False, has_key=True)
        == "private_key_jwt"
    )


def test_token_answers() -> None:
    answer = parse_token_response(
        200,
        b'{"access_token": "t", "token_type": "bearer", "expires_in": 60}',
        now=100.0,
        requested_scopes=("a",),
        previous_refresh_token="old",
    )
    assert (answer.expires_at, answer.refresh_token, answer.scopes, answer.token_type) == (
        160.0,
        "old",
        ("a",),
        "Bearer",
    )
    with pytest.raises(OAuthFlowError) as caught:
        parse_token_response(400, b'{"error": "invalid_grant"}', now=0.0)
    assert caught.value.error == "invalid_grant"
    with pytest.raises(OAuthFlowError, match="token_type"):
        parse_token_response(200, b'{"access_token": "t", "token_type": "mac"}', now=0.0)
    assert "secret-token" not in repr(
        parse_token_response(200, b'{"access_token": "secret-token"}', now=0.0)
    )


def test_registration_request_and_answer() -> None:
    body = json.loads(
        registration_body(
            client_name="trio-mcp",
            redirect_uris=["http://127.0.0.1:5/cb"],
            token_endpoint_auth_method="none",
        )
    )
    assert body["application_type"] == "native"
    assert body["grant_types"] == ["authorization_code", "refresh_token"]
    answer = parse_registration_response(201, b'{"client_id": "c", "client_secret": "s"}', url="u")
    assert (answer.client_id, answer.client_secret) == ("c", "s") and "'s'" not in repr(answer)
    with pytest.raises(OAuthFlowError, match="invalid_redirect_uri"):
        parse_registration_response(400, b'{"error": "invalid_redirect_uri"}', url="u")


def test_device_authorization_answer() -> None:
    answer = parse_device_authorization(
        200,
        b'{"device_code": "d", "user_code": "U", "verification_uri": "https://as/device"}',
        url="u",
    )
    assert (answer.interval, answer.expires_in, answer.user_code) == (5.0, 600.0, "U")
    with pytest.raises(OAuthMetadataError, match="https://"):
        parse_device_authorization(
            200,
            b'{"device_code": "d", "user_code": "U", "verification_uri": "file:///etc"}',
            url="u",
        )
