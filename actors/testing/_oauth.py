"""A fake OAuth 2.1 world on 127.0.0.1, for tests of sign-in: :class:`FakeOAuthServer`.

Two HTTP servers on two ports of loopback (two origins, as in real life): the **protected
resource**, an MCP endpoint (``/mcp``) that answers ``401`` with a Bearer challenge until a
request carries a token it issued (and ``403 insufficient_scope`` when the token lacks the
``needed`` scopes), with its Protected Resource Metadata (RFC 9728); and the **authorization
server**: its metadata (RFC 8414, or OIDC), ``/authorize`` (approves at once: a ``302`` to the
redirect URI with the code, ``state`` and ``iss``), ``/token`` (authorization code with PKCE,
refresh with or without rotation, client credentials, the device code; ``invalid_grant`` on
demand), dynamic registration (RFC 7591) and the device authorization endpoint (RFC 8628).

Behind the Bearer check it serves a :class:`~trio_mcp.actors.testing.FakeServer` over
Streamable HTTP (JSON answers; ``initialize`` opens a session), or any object with an
``async handle(request, reply)``. Every knob is a plain attribute a test may change mid-test,
and everything the two servers received is kept (``resource_requests``, ``authorizations``,
``token_requests``...), so a test asserts exactly what went where::

    async with FakeOAuthServer(mcp=FakeServer(tools=[FakeTool("echo")])).serve() as world:
        config = RuntimeConfig(servers=(world.server_config("docs"),), ...)
        async with open_runtime(config, callbacks=HostCallbacks(authorize=headless_sign_in)):
            ...

:func:`headless_sign_in` is a sign-in front end without a user (the browser's part: it opens
the authorization URL and returns where it was redirected).
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal, Protocol
from urllib.parse import parse_qsl, urlencode, urlsplit

import attrs
import httpx
import trio

from ...protocol._errors import TransportClosed
from ...protocol._jsonrpc import RequestId
from ...transports._memory import MemoryTransport, memory_transport_pair
from ...transports.oauth._types import AuthorizationRequest
from ..config._config import ServerConfig, TransportKind
from ._fakes import FakeServer
from ._http import HttpRequest, HttpServer, Reply, serve_http

__all__ = ["FakeOAuthServer", "McpEndpoint", "headless_sign_in"]

#: A request body the fake MCP endpoint reads at most.
_MAX_BODY = 1024 * 1024


async def headless_sign_in(request: AuthorizationRequest) -> str:
    """A sign-in front end without a user (an ``AuthorizationPrompt``): opens the authorization
    URL without following its redirect and returns where it points (``redirect_uri?code=...``),
    as a browser would after the user approved. Raises :class:`RuntimeError` when the
    authorization endpoint does not redirect."""
    async with httpx.AsyncClient(follow_redirects=False) as client:
        response = await client.get(request.url)
    location = response.headers.get("location")
    if not response.is_redirect or not location:
        raise RuntimeError(
            f"the authorization endpoint answered {response.status_code} without a redirect"
        )
    return str(response.url.join(location))


class McpEndpoint(Protocol):
    """What the protected resource serves once a request is authorized."""

    async def handle(self, request: HttpRequest, reply: Reply) -> None: ...


@attrs.define(eq=False)
class FakeOAuthServer:
    """The knobs (plain attributes: change them mid-test), the two servers once serving
    (:meth:`serve`), and what they received."""

    #: What the MCP endpoint serves behind the Bearer check: a :class:`FakeServer` (over
    #: Streamable HTTP), any :class:`McpEndpoint`, or None (a plain ``200 {"ok": true}``).
    mcp: FakeServer | McpEndpoint | None = None
    #: ``"path"`` (``/.well-known/oauth-protected-resource/mcp``), ``"root"`` or None (no PRM:
    #: a 2025-03-26 server, whose authorization server is its own origin).
    prm_at: Literal["path", "root"] | None = "path"
    #: Put ``resource_metadata`` in the challenge.
    challenge_names_prm: bool = True
    #: The ``scope`` of the 401 challenge (None: no ``scope`` parameter).
    challenge_scope: str | None = None
    #: A ``WWW-Authenticate`` header to send instead of the Bearer challenge ("": none).
    raw_challenge: str | None = None
    #: Scopes a token needs (else ``403 insufficient_scope`` naming ``needed_scope``).
    needed: frozenset[str] = frozenset()
    needed_scope: str = ""
    #: The PRM's ``scopes_supported`` (None: left out).
    prm_scopes: list[str] | None = None
    #: The PRM's ``resource`` (None: the MCP endpoint's URL).
    prm_resource: str | None = None
    #: The authorization server's path (its issuer is its origin plus this).
    as_path: str = ""
    #: ``"oauth"`` (RFC 8414) or ``"oidc"``: where the metadata is published.
    metadata_kind: Literal["oauth", "oidc"] = "oauth"
    #: Fields replaced in (or, with the value None, removed from) the metadata.
    metadata_changes: dict[str, Any] = attrs.field(factory=dict)
    #: The whole metadata body instead (garbage, a huge one...).
    metadata_body: bytes | None = None
    scopes_supported: list[str] | None = None
    #: ``token_endpoint_auth_methods_supported``.
    auth_methods: list[str] = attrs.field(factory=lambda: ["none"])
    #: Advertise Client ID Metadata Documents.
    cimd: bool = False
    #: The ``iss`` of the authorization redirect: ``"correct"``, ``"omit"`` or ``"wrong"``.
    iss: Literal["correct", "omit", "wrong"] = "correct"
    iss_supported: bool = True
    #: Seconds an access token lives (None: no ``expires_in``). The fake itself accepts a token
    #: until :meth:`revoke_access_tokens`: expiry is the client's clock.
    expires_in: int | None = 3600
    #: Hand out refresh tokens; rotate them on refresh (the old one is then refused).
    refresh_tokens: bool = True
    rotate: bool = True
    #: Answer refresh requests with this OAuth error (``"invalid_grant"``...).
    refresh_error: str | None = None
    #: Answer every token request with HTTP 500.
    token_broken: bool = False
    #: Wait this long (trio time) before answering a token request.
    token_delay: float = 0.0
    #: The pre-registered client (``client_credentials``, ``client_secret_basic``/``post``,
    #: ``private_key_jwt`` by its ``client_id``).
    client_id: str = "registered-client"
    client_secret: str | None = None
    #: The prefix of the client ids dynamic registration hands out.
    client_prefix: str = "dynamic"
    #: Offer the device grant; answer ``authorization_pending`` this many times first.
    device: bool = False
    device_pending: int = 0
    #: Ask DPoP clients for this nonce (``use_dpop_nonce``) at both servers.
    dpop_nonce: str | None = None
    #: The resource moved to this authorization server (its PRM names it; only its tokens
    #: are accepted).
    moved_to: FakeOAuthServer | None = None

    #: The two servers while :meth:`serve` runs (kill and restart them to test an outage).
    resource_server: HttpServer | None = None
    authorization_server: HttpServer | None = None
    #: Access tokens issued (token -> scopes) and live refresh tokens.
    tokens: dict[str, frozenset[str]] = attrs.field(factory=dict)
    refresh: dict[str, frozenset[str]] = attrs.field(factory=dict)
    #: What was received: the challenges sent, registration bodies, authorization (and device)
    #: requests' parameters, token requests' forms and headers, the MCP endpoint's requests.
    challenges: list[str] = attrs.field(factory=list)
    registrations: list[dict[str, Any]] = attrs.field(factory=list)
    authorizations: list[dict[str, str]] = attrs.field(factory=list)
    token_requests: list[dict[str, str]] = attrs.field(factory=list)
    token_headers: list[dict[str, str]] = attrs.field(factory=list)
    resource_requests: list[HttpRequest] = attrs.field(factory=list)
    _codes: dict[str, tuple[str, frozenset[str]]] = attrs.field(factory=dict)
    _counter: itertools.count[int] = attrs.field(factory=lambda: itertools.count(1))
    _endpoint: McpEndpoint | None = None

    # ------------------------------------------------------------------ serving

    @asynccontextmanager
    async def serve(self) -> AsyncIterator[FakeOAuthServer]:
        """Serve both servers on 127.0.0.1 (ports the system picks) for the block."""
        async with (
            serve_http(self.handle_resource) as resource,
            serve_http(self.handle_authorization) as authorization,
            trio.open_nursery() as nursery,
        ):
            self.resource_server, self.authorization_server = resource, authorization
            if isinstance(self.mcp, FakeServer):
                self._endpoint = _FakeServerEndpoint(self.mcp, nursery)
            else:
                self._endpoint = self.mcp
            try:
                yield self
            finally:
                nursery.cancel_scope.cancel()

    def server_config(self, name: str = "fake", **options: Any) -> ServerConfig:
        """A ``ServerConfig`` for the MCP endpoint with ``auth="oauth"``; ``options`` are passed
        on (``oauth=OAuthSettings(...)``, ``timeout=...``)."""
        options.setdefault("auth", "oauth")
        return ServerConfig(name=name, type=TransportKind.HTTP, url=self.mcp_url, **options)

    def revoke_access_tokens(self) -> None:
        """Forget every access token issued (the next request is refused with ``401``, as for a
        token revoked or expired at the server); refresh tokens still work."""
        self.tokens.clear()

    # ------------------------------------------------------------------ addresses

    @property
    def mcp_url(self) -> str:
        return f"{_running(self.resource_server).base}/mcp"

    @property
    def issuer(self) -> str:
        return _running(self.authorization_server).base + self.as_path

    @property
    def prm_url(self) -> str:
        suffix = "/mcp" if self.prm_at == "path" else ""
        return f"{_running(self.resource_server).base}/.well-known/oauth-protected-resource{suffix}"

    def count(
        self, path: str, server: Literal["authorization", "resource"] = "authorization"
    ) -> int:
        """How many requests for ``path`` one of the servers received."""
        http = self.authorization_server if server == "authorization" else self.resource_server
        return sum(1 for r in _running(http).requests if r.path == path)

    # ------------------------------------------------------------------ the resource

    async def handle_resource(self, request: HttpRequest, reply: Reply) -> None:
        """The protected resource's handler."""
        if request.method == "GET" and request.path.startswith("/.well-known/"):
            await self._prm(request, reply)
            return
        self.resource_requests.append(request)
        scheme, _, token = (request.header("authorization") or "").partition(" ")
        tokens = (self.moved_to or self).tokens
        if scheme.lower() not in ("bearer", "dpop") or token not in tokens:
            await self._challenge(reply)
            return
        nonce = self.dpop_nonce
        if scheme.lower() == "dpop" and nonce is not None and _nonce_of(request) != nonce:
            await reply.send(
                401,
                b"{}",
                headers=[
                    ("www-authenticate", 'DPoP error="use_dpop_nonce"'),
                    ("dpop-nonce", nonce),
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
        if self._endpoint is not None:
            await self._endpoint.handle(request, reply)
        else:
            await reply.json({"ok": True})

    async def _prm(self, request: HttpRequest, reply: Reply) -> None:
        if self.prm_at is None or request.path != urlsplit(self.prm_url).path:
            await reply.send(404, b"not found")
            return
        base = _running(self.resource_server).base
        doc: dict[str, Any] = {
            "resource": self.prm_resource or (self.mcp_url if self.prm_at == "path" else base),
            "authorization_servers": [(self.moved_to or self).issuer],
        }
        if self.prm_scopes is not None:
            doc["scopes_supported"] = self.prm_scopes
        await reply.json(doc)

    async def _challenge(self, reply: Reply) -> None:
        if self.raw_challenge is not None:
            headers = [("www-authenticate", self.raw_challenge)] if self.raw_challenge else []
            await reply.send(401, b"{}", headers=headers)
            return
        params = ['error="invalid_token"']
        if self.challenge_names_prm and self.prm_at is not None:
            params.append(f'resource_metadata="{self.prm_url}"')
        if self.challenge_scope is not None:
            params.append(f'scope="{self.challenge_scope}"')
        challenge = "Bearer " + ", ".join(params)
        self.challenges.append(challenge)
        await reply.send(401, b"{}", headers=[("www-authenticate", challenge)])

    # ------------------------------------------------------------------ the authorization server

    def metadata(self) -> dict[str, Any]:
        """The authorization server's metadata document (with :attr:`metadata_changes`)."""
        base = self.issuer
        doc: dict[str, Any] = {
            "issuer": base,
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

    async def handle_authorization(self, request: HttpRequest, reply: Reply) -> None:
        """The authorization server's handler."""
        path, prefix = request.path, self.as_path
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
            await self._register(request, reply)
        elif request.method == "POST" and path == f"{prefix}/device":
            self.authorizations.append(request.form())
            await reply.json(
                {
                    "device_code": "device-code-1",
                    "user_code": "WDJB-MJHT",
                    "verification_uri": f"{self.issuer}/device",
                    "expires_in": 600,
                    "interval": 5,
                }
            )
        else:
            await reply.send(404, b"not found")

    async def _register(self, request: HttpRequest, reply: Reply) -> None:
        doc = json.loads(request.body)
        self.registrations.append(doc)
        number = next(self._counter)
        answer: dict[str, Any] = {"client_id": f"{self.client_prefix}-{number}"}
        method = doc.get("token_endpoint_auth_method", "none")
        if method != "none":
            answer["client_secret"] = f"dynamic-secret-{number}"
        answer["token_endpoint_auth_method"] = method
        await reply.json(answer, status=201)

    async def _authorize(self, request: HttpRequest, reply: Reply) -> None:
        query = dict(parse_qsl(request.query))
        self.authorizations.append(query)
        code = f"code-{next(self._counter)}"
        self._codes[code] = (
            query.get("code_challenge", ""),
            frozenset(query.get("scope", "").split()),
        )
        answer = {"code": code, "state": query.get("state", "")}
        if self.iss == "correct":
            answer["iss"] = self.issuer
        elif self.iss == "wrong":
            answer["iss"] = "https://evil.example"
        location = query.get("redirect_uri", "") + "?" + urlencode(answer)
        await reply.send(302, b"", headers=[("location", location)])

    async def _token(self, request: HttpRequest, reply: Reply) -> None:
        form = request.form()
        self.token_requests.append(form)
        self.token_headers.append(dict(request.headers))
        if self.token_delay:
            await trio.sleep(self.token_delay)
        if self.token_broken:
            await reply.send(500, b"broken")
            return
        grant = form.get("grant_type")
        proof = request.header("dpop")
        if proof and self.dpop_nonce is not None and _nonce_of(request) != self.dpop_nonce:
            await reply.json(
                {"error": "use_dpop_nonce"}, status=400, headers=[("dpop-nonce", self.dpop_nonce)]
            )
            return
        scopes = await self._granted(grant, request, form, reply)
        if scopes is None:
            return  # refused (answered)
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

    async def _granted(
        self, grant: str | None, request: HttpRequest, form: dict[str, str], reply: Reply
    ) -> frozenset[str] | None:
        """The scopes of the token ``form`` asks for, or None when it was refused (answered)."""
        scopes: frozenset[str] = frozenset()
        error: str | None = None
        if grant == "authorization_code":
            challenge, scopes = self._codes.pop(form.get("code", ""), ("", frozenset()))
            digest = hashlib.sha256(form.get("code_verifier", "").encode()).digest()
            if base64.urlsafe_b64encode(digest).rstrip(b"=").decode() != challenge:
                error = "invalid_grant"
        elif grant == "refresh_token":
            old = form.get("refresh_token", "")
            if self.refresh_error is not None:
                error = self.refresh_error
            elif old not in self.refresh:
                error = "invalid_grant"
            else:
                scopes = self.refresh[old]
                if self.rotate:
                    del self.refresh[old]
        elif grant == "client_credentials":
            if not self._client_ok(request, form):
                await reply.json({"error": "invalid_client"}, status=401)
                return None
            scopes = frozenset(form.get("scope", "").split())
        elif grant == "urn:ietf:params:oauth:grant-type:device_code":
            if self.device_pending > 0:
                self.device_pending -= 1
                error = "authorization_pending"
        else:
            error = "unsupported_grant_type"
        if error is not None:
            await reply.json({"error": error}, status=400)
            return None
        return scopes

    def _client_ok(self, request: HttpRequest, form: dict[str, str]) -> bool:
        authorization = request.header("authorization") or ""
        if authorization.startswith("Basic "):
            pair = base64.b64decode(authorization[6:]).decode()
            return pair == f"{self.client_id}:{self.client_secret}"
        if "client_assertion" in form:
            return form.get("client_id") == self.client_id
        return form.get("client_secret") == self.client_secret


def _running(server: HttpServer | None) -> HttpServer:
    if server is None:
        raise RuntimeError("the fake OAuth world is not serving: use `async with fake.serve()`")
    return server


def _nonce_of(request: HttpRequest) -> Any:
    """The ``nonce`` claim of the request's DPoP proof, unverified (all the fake reads of it)."""
    try:
        payload = (request.header("dpop") or "").split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError, TypeError):
        return None
    return claims.get("nonce") if isinstance(claims, dict) else None


# --------------------------------------------------------------------------- FakeServer over HTTP


@attrs.define(eq=False)
class _Session:
    """One connection to the fake server: the client end, and the POSTs waiting for answers."""

    client: MemoryTransport
    waiting: dict[RequestId, trio.MemorySendChannel[bytes]] = attrs.field(factory=dict)


@attrs.define(eq=False)
class _FakeServerEndpoint:
    """A :class:`FakeServer` served over Streamable HTTP, answers as JSON: ``initialize`` opens
    a session (``Mcp-Session-Id``), requests without one go to a connection of their own
    (2026-07-28 requests are stateless), ``DELETE`` ends a session. What the fake sends besides
    the answers (notifications, requests to the client) is dropped: there is no GET stream."""

    server: FakeServer
    nursery: trio.Nursery
    sessions: dict[str, _Session] = attrs.field(factory=dict)
    _stateless: _Session | None = None
    _counter: itertools.count[int] = attrs.field(factory=lambda: itertools.count(1))

    async def handle(self, request: HttpRequest, reply: Reply) -> None:
        session_id = request.header("mcp-session-id")
        if request.method == "DELETE" and session_id in self.sessions:
            await self.sessions.pop(session_id).client.aclose()
            await reply.send(200)
            return
        if request.method != "POST":
            await reply.send(405, b"Method Not Allowed", headers=[("allow", "POST, DELETE")])
            return
        try:
            message = json.loads(request.body) if len(request.body) <= _MAX_BODY else None
        except ValueError:
            message = None
        if not isinstance(message, dict):
            await reply.json(_error(None, -32700, "Parse error"), status=400)
            return
        headers: list[tuple[str, str]] = []
        if session_id is not None:
            session = self.sessions.get(session_id)
            if session is None:
                await reply.json(_error(message.get("id"), -32600, "Session not found"), 404)
                return
        elif message.get("method") == "initialize":
            session_id = f"{next(self._counter):032x}"
            session = self.sessions[session_id] = self._connect()
            headers.append(("mcp-session-id", session_id))
        else:
            if self._stateless is None:
                self._stateless = self._connect()
            session = self._stateless
        request_id = message.get("id")
        if "method" not in message or not isinstance(request_id, int | str):
            # a notification, or the client's answer to a request of the server
            await session.client.send(request.body)
            await reply.send(202)
            return
        send, receive = trio.open_memory_channel[bytes](1)
        session.waiting[request_id] = send
        try:
            await session.client.send(request.body, request_id)
            answer = await receive.receive()
        finally:
            session.waiting.pop(request_id, None)
        await reply.send(200, answer, headers=[("content-type", "application/json"), *headers])

    def _connect(self) -> _Session:
        client, server_end = memory_transport_pair(label=f"fake server {self.server.name!r}")
        session = _Session(client)
        self.nursery.start_soon(self.server.serve_transport, server_end)
        self.nursery.start_soon(self._read, session)
        return session

    async def _read(self, session: _Session) -> None:
        """Hand each answer to the POST waiting for it."""
        async for frame in _frames(session.client):
            try:
                message = json.loads(frame)
            except ValueError:
                continue
            request_id = message.get("id") if isinstance(message, dict) else None
            if isinstance(request_id, int | str) and "method" not in message:
                waiter = session.waiting.pop(request_id, None)
                if waiter is not None:
                    waiter.send_nowait(frame)


async def _frames(client: MemoryTransport) -> AsyncIterator[bytes]:
    while True:
        try:
            yield await client.receive()
        except TransportClosed:
            return


def _error(request_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
