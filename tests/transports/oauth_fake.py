"""A fake OAuth 2.1 world on 127.0.0.1 for the sign-in tests, on top of :func:`serve_http`.

:class:`FakeOAuth` is one scriptable object served by two servers (:func:`serve_oauth`): the
protected resource (an MCP endpoint that answers ``401`` with a configurable challenge and
``403 insufficient_scope``, its Protected Resource Metadata) and the authorization server (its
metadata as RFC 8414 or OIDC, at the root or under a path, with hostile variants; authorize,
token, registration and device endpoints). Every request is kept (``rs.requests``,
``auth.requests``) so tests count exactly what went where.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import attrs
import httpx
import trio

from tests.transports.http_fake import (
    FakeLegacySse,
    FakeMcpHttp,
    HttpRequest,
    HttpServer,
    Reply,
    serve_http,
)
from trio_mcp.transports.oauth import AuthorizationRequest

__all__ = ["FakeOAuth", "form_of", "headless_prompt", "serve_oauth"]


def form_of(request: HttpRequest) -> dict[str, str]:
    return dict(parse_qsl(request.body.decode()))


async def headless_prompt(request: AuthorizationRequest) -> str:
    """A sign-in front end without a user: the fake authorizes at once with a 302."""
    async with httpx.AsyncClient(follow_redirects=False) as client:
        response = await client.get(request.url)
    assert response.status_code == 302, response.status_code
    return response.headers["location"]


@attrs.define(eq=False)
class FakeOAuth:
    """The knobs (plain attributes, change them mid-test) and what was seen."""

    #: The MCP endpoint behind the resource checks (None: a plain 200 JSON body).
    mcp: FakeMcpHttp | FakeLegacySse | None = None
    #: ``"path"`` (/.well-known/oauth-protected-resource/mcp), ``"root"`` or None (no PRM).
    prm_at: str | None = "path"
    #: Put ``resource_metadata`` in the challenge.
    challenge_names_prm: bool = True
    #: The scope of the 401 challenge (None: no ``scope`` parameter).
    challenge_scope: str | None = None
    #: A WWW-Authenticate header to send instead of the Bearer challenge ("" : none at all).
    raw_challenge: str | None = None
    #: Scopes a token needs (else ``403 insufficient_scope`` naming ``needed_scope``).
    needed: frozenset[str] = frozenset()
    needed_scope: str = ""
    prm_scopes: list[str] | None = None
    #: The PRM's ``resource`` (None: the MCP endpoint's URL).
    prm_resource: str | None = None
    #: The authorization server's path (its issuer is ``auth.base + as_path``).
    as_path: str = ""
    #: ``"oauth"`` (RFC 8414) or ``"oidc"``.
    metadata_kind: str = "oauth"
    #: Fields replaced in (or, with the value None, removed from) the AS metadata.
    metadata_changes: dict[str, Any] = attrs.field(factory=dict)
    #: The whole AS metadata body instead (garbage, huge...).
    metadata_body: bytes | None = None
    scopes_supported: list[str] | None = None
    auth_methods: list[str] = attrs.field(factory=lambda: ["none"])
    cimd: bool = False
    #: ``"correct"``, ``"omit"`` or ``"wrong"``: the ``iss`` of the authorization redirect.
    iss: str = "correct"
    iss_supported: bool = True
    #: Seconds an access token lives (None: no expires_in).
    expires_in: int | None = 3600
    #: Give a refresh token; rotate it on refresh.
    refresh_tokens: bool = True
    rotate: bool = True
    #: Answer refresh requests with this OAuth error (``invalid_grant``...).
    refresh_error: str | None = None
    #: Answer every token request with HTTP 500.
    token_broken: bool = False
    #: Wait this long before answering a token request (trio time).
    token_delay: float = 0.0
    #: Client credentials accepted for pre-registered/basic auth.
    client_id: str = "registered-client"
    client_secret: str | None = None
    #: The prefix of the client ids dynamic registration hands out.
    client_prefix: str = "dynamic"
    #: The device grant: answer ``authorization_pending`` this many times first.
    device: bool = False
    device_pending: int = 0
    #: Token type of the issued tokens: "Bearer", or "DPoP" when a proof came.
    dpop_nonce: str | None = None
    #: The resource moved to this authorization server (its PRM names it; only its tokens
    #: are accepted).
    moved_to: FakeOAuth | None = None

    rs: HttpServer | None = None
    auth: HttpServer | None = None
    tokens: dict[str, frozenset[str]] = attrs.field(factory=dict)
    refresh: dict[str, frozenset[str]] = attrs.field(factory=dict)
    challenges: list[str] = attrs.field(factory=list)
    registrations: list[dict[str, Any]] = attrs.field(factory=list)
    authorizations: list[dict[str, str]] = attrs.field(factory=list)
    token_requests: list[dict[str, str]] = attrs.field(factory=list)
    token_headers: list[dict[str, str]] = attrs.field(factory=list)
    resource_requests: list[HttpRequest] = attrs.field(factory=list)
    _codes: dict[str, tuple[str, frozenset[str]]] = attrs.field(factory=dict)
    _counter: itertools.count[int] = attrs.field(factory=lambda: itertools.count(1))

    # ------------------------------------------------------------------ addresses

    @property
    def mcp_url(self) -> str:
        assert self.rs is not None
        return f"{self.rs.base}/mcp"

    @property
    def issuer(self) -> str:
        assert self.auth is not None
        return self.auth.base + self.as_path

    @property
    def prm_url(self) -> str:
        assert self.rs is not None
        suffix = "/mcp" if self.prm_at == "path" else ""
        return f"{self.rs.base}/.well-known/oauth-protected-resource{suffix}"

    def count(self, path: str, server: str = "auth") -> int:
        http = self.auth if server == "auth" else self.rs
        assert http is not None
        return sum(1 for r in http.requests if r.path == path)

    # ------------------------------------------------------------------ resource

    async def handle_rs(self, request: HttpRequest, reply: Reply) -> None:
        if request.method == "GET" and request.path.startswith("/.well-known/"):
            if self.prm_at is None or request.path != urlsplit(self.prm_url).path:
                await reply.send(404, b"not found")
                return
            doc: dict[str, Any] = {
                "resource": self.prm_resource
                or (self.mcp_url if self.prm_at == "path" else self.rs.base if self.rs else ""),
                "authorization_servers": [(self.moved_to or self).issuer],
            }
            if self.prm_scopes is not None:
                doc["scopes_supported"] = self.prm_scopes
            await reply.json(doc)
            return
        self.resource_requests.append(request)
        authorization = request.header("authorization") or ""
        scheme, _, token = authorization.partition(" ")
        tokens = (self.moved_to or self).tokens
        if scheme.lower() not in ("bearer", "dpop") or token not in tokens:
            await self._challenge(reply, 401)
            return
        if scheme.lower() == "dpop" and self.dpop_nonce is not None:
            proof = request.header("dpop") or ""
            if _claims(proof).get("nonce") != self.dpop_nonce:
                await reply.send(
                    401,
                    b"{}",
                    headers=[
                        ("www-authenticate", 'DPoP error="use_dpop_nonce"'),
                        ("dpop-nonce", self.dpop_nonce),
                    ],
                )
                return
        if not self.needed <= tokens[token]:
            challenge = (
                f'Bearer error="insufficient_scope", scope="{self.needed_scope}", '
                f'resource_metadata="{self.prm_url}"'
            )
            self.challenges.append(challenge)
            await reply.send(403, b"{}", headers=[("www-authenticate", challenge)])
            return
        if self.mcp is not None:
            await self.mcp.handle(request, reply)
        else:
            await reply.json({"ok": True})

    async def _challenge(self, reply: Reply, status: int) -> None:
        if self.raw_challenge is not None:
            headers = [("www-authenticate", self.raw_challenge)] if self.raw_challenge else []
            await reply.send(status, b"{}", headers=headers)
            return
        params = ['error="invalid_token"']
        if self.challenge_names_prm and self.prm_at is not None:
            params.append(f'resource_metadata="{self.prm_url}"')
        if self.challenge_scope is not None:
            params.append(f'scope="{self.challenge_scope}"')
        challenge = "Bearer " + ", ".join(params)
        self.challenges.append(challenge)
        await reply.send(status, b"{}", headers=[("www-authenticate", challenge)])

    # ------------------------------------------------------------------ authorization server

    def metadata(self) -> dict[str, Any]:
        assert self.auth is not None
        base = self.auth.base + self.as_path
        doc: dict[str, Any] = {
            "issuer": self.issuer,
            "authorization_endpoint": f"{base}/authorize",
            "token_endpoint": f"{base}/token",
            "registration_endpoint": f"{base}/register",
            "response_types_supported": ["code"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": self.auth_methods,
            "authorization_response_iss_parameter_supported": self.iss_supported,
        }
        if self.device:
            doc["device_authorization_endpoint"] = f"{base}/device"
        if self.scopes_supported is not None:
            doc["scopes_supported"] = self.scopes_supported
        if self.cimd:
            doc["client_id_metadata_document_supported"] = True
        for field, value in self.metadata_changes.items():
            if value is None:
                doc.pop(field, None)
            else:
                doc[field] = value
        return doc

    def _metadata_path(self) -> str:
        if self.metadata_kind == "oidc":
            return f"{self.as_path}/.well-known/openid-configuration"
        return f"/.well-known/oauth-authorization-server{self.as_path}"

    async def handle_as(self, request: HttpRequest, reply: Reply) -> None:
        path = request.path
        prefix = self.as_path
        if request.method == "GET" and path == self._metadata_path():
            if self.metadata_body is not None:
                await reply.send(200, self.metadata_body, headers=[("content-type", "text/json")])
            else:
                await reply.json(self.metadata())
        elif request.method == "GET" and path == f"{prefix}/authorize":
            await self._authorize(request, reply)
        elif request.method == "POST" and path == f"{prefix}/token":
            await self._token(request, reply)
        elif request.method == "POST" and path == f"{prefix}/register":
            doc = json.loads(request.body)
            self.registrations.append(doc)
            number = next(self._counter)
            answer: dict[str, Any] = {"client_id": f"{self.client_prefix}-{number}"}
            method = doc.get("token_endpoint_auth_method", "none")
            if method != "none":
                answer["client_secret"] = f"dynamic-secret-{number}"
            answer["token_endpoint_auth_method"] = method
            await reply.json(answer, status=201)
        elif request.method == "POST" and path == f"{prefix}/device":
            form = form_of(request)
            self.authorizations.append(form)
            await reply.json(
                {
                    "device_code": "device-code-1",
                    "user_code": "WDJB-MJHT",
                    "verification_uri": f"{self.auth.base if self.auth else ''}/device",
                    "expires_in": 600,
                    "interval": 5,
                }
            )
        else:
            await reply.send(404, b"not found")

    async def _authorize(self, request: HttpRequest, reply: Reply) -> None:
        query = dict(parse_qsl(request.query))
        self.authorizations.append(query)
        code = f"code-{next(self._counter)}"
        scopes = frozenset(query.get("scope", "").split())
        self._codes[code] = (query.get("code_challenge", ""), scopes)
        answer = {"code": code, "state": query.get("state", "")}
        if self.iss == "correct":
            answer["iss"] = self.issuer
        elif self.iss == "wrong":
            answer["iss"] = "https://evil.example"
        location = query["redirect_uri"] + "?" + urlencode(answer)
        await reply.send(302, b"", headers=[("location", location)])

    async def _token(self, request: HttpRequest, reply: Reply) -> None:
        form = form_of(request)
        self.token_requests.append(form)
        self.token_headers.append(dict(request.headers))
        if self.token_delay:
            await trio.sleep(self.token_delay)
        if self.token_broken:
            await reply.send(500, b"broken")
            return
        grant = form.get("grant_type")
        proof = request.header("dpop")
        if proof and self.dpop_nonce is not None and _claims(proof).get("nonce") != self.dpop_nonce:
            await reply.json(
                {"error": "use_dpop_nonce"}, status=400, headers=[("dpop-nonce", self.dpop_nonce)]
            )
            return
        if grant == "authorization_code":
            challenge, scopes = self._codes.pop(form.get("code", ""), ("", frozenset()))
            verifier = form.get("code_verifier", "")
            digest = hashlib.sha256(verifier.encode()).digest()
            if base64.urlsafe_b64encode(digest).rstrip(b"=").decode() != challenge:
                await reply.json({"error": "invalid_grant"}, status=400)
                return
        elif grant == "refresh_token":
            if self.refresh_error is not None:
                await reply.json({"error": self.refresh_error}, status=400)
                return
            old = form.get("refresh_token", "")
            if old not in self.refresh:
                await reply.json({"error": "invalid_grant"}, status=400)
                return
            scopes = self.refresh[old]
            if self.rotate:
                del self.refresh[old]
        elif grant == "client_credentials":
            if not self._client_ok(request, form):
                await reply.json({"error": "invalid_client"}, status=401)
                return
            scopes = frozenset(form.get("scope", "").split())
        elif grant == "urn:ietf:params:oauth:grant-type:device_code":
            if self.device_pending > 0:
                self.device_pending -= 1
                await reply.json({"error": "authorization_pending"}, status=400)
                return
            scopes = frozenset()
        else:
            await reply.json({"error": "unsupported_grant_type"}, status=400)
            return
        number = next(self._counter)
        token = f"access-{number}"
        self.tokens[token] = scopes
        answer: dict[str, Any] = {
            "access_token": token,
            "token_type": "DPoP" if proof else "Bearer",
            "scope": " ".join(sorted(scopes)),
        }
        if self.expires_in is not None:
            answer["expires_in"] = self.expires_in
        if (
            self.refresh_tokens
            and grant != "client_credentials"
            and (grant != "refresh_token" or self.rotate)
        ):
            refresh = f"refresh-{number}"
            self.refresh[refresh] = scopes
            answer["refresh_token"] = refresh
        await reply.json(answer)

    def _client_ok(self, request: HttpRequest, form: dict[str, str]) -> bool:
        authorization = request.header("authorization") or ""
        if authorization.startswith("Basic "):
            pair = base64.b64decode(authorization[6:]).decode()
            return pair == f"{self.client_id}:{self.client_secret}"
        if "client_assertion" in form:
            return form.get("client_id") == self.client_id
        return form.get("client_secret") == self.client_secret


def _claims(jwt: str) -> dict[str, Any]:
    try:
        payload = jwt.split(".")[1]
        return dict(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))))
    except (IndexError, ValueError):
        return {}


@asynccontextmanager
async def serve_oauth(fake: FakeOAuth | None = None) -> AsyncIterator[FakeOAuth]:
    """Serve ``fake`` (a new default one when None): the resource and the authorization server
    on two ports of 127.0.0.1 (two origins)."""
    fake = fake or FakeOAuth()
    async with serve_http(fake.handle_rs) as rs, serve_http(fake.handle_as) as auth:
        fake.rs, fake.auth = rs, auth
        yield fake
