"""OAuth 2.1 for MCP's HTTP transports: every rule that needs no I/O.

The flow (``trio_mcp.transports.oauth``) fetches documents and sends requests; this module
decides what to fetch, checks what came back and builds what goes out:

- ``WWW-Authenticate`` (RFC 7235 / RFC 6750 / RFC 9449): :func:`parse_www_authenticate`,
  :func:`bearer_challenge`;
- the resource (RFC 8707, RFC 9728): :func:`canonical_resource`,
  :func:`protected_resource_metadata_urls`, :func:`parse_protected_resource_metadata`;
- the authorization server (RFC 8414, OpenID Connect Discovery, the 2025-03-26 fallbacks):
  :func:`authorization_server_metadata_urls`, :func:`parse_authorization_server_metadata`,
  :func:`legacy_authorization_server`;
- scopes: :func:`select_scopes`, :func:`step_up_scopes`;
- the authorization code flow: :func:`pkce_pair`, :func:`new_state`,
  :func:`authorization_url`, :func:`parse_redirect` (``state`` and RFC 9207 ``iss``);
- the token endpoint: :func:`token_request` (authorization code, refresh, client
  credentials, device code; client authentication), :func:`parse_token_response`;
- registration (RFC 7591): :func:`registration_body`, :func:`parse_registration_response`;
- the device grant (RFC 8628): :func:`parse_device_authorization`.

Every parser takes untrusted bytes and raises only :class:`OAuthMetadataError` or
:class:`OAuthFlowError`. No secret (token, code, verifier, client secret) ever appears in an
exception message.
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import json
import re
import secrets
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import attrs

from ._errors import OAuthFlowError, OAuthMetadataError

__all__ = [
    "CLIENT_ASSERTION_TYPE_JWT",
    "DEVICE_CODE_GRANT",
    "MAX_OAUTH_BODY_BYTES",
    "AuthorizationServerMetadata",
    "Challenge",
    "ClientAuth",
    "DeviceAuthorizationResponse",
    "ProtectedResourceMetadata",
    "RegistrationResponse",
    "TokenRequest",
    "TokenResponse",
    "authorization_server_metadata_urls",
    "authorization_url",
    "bearer_challenge",
    "canonical_resource",
    "choose_token_auth_method",
    "device_authorization_request",
    "is_loopback_host",
    "legacy_authorization_server",
    "new_state",
    "origin_of",
    "parse_authorization_server_metadata",
    "parse_device_authorization",
    "parse_protected_resource_metadata",
    "parse_redirect",
    "parse_registration_response",
    "parse_token_response",
    "parse_www_authenticate",
    "pkce_pair",
    "protected_resource_metadata_urls",
    "registration_body",
    "select_scopes",
    "step_up_scopes",
    "token_request",
]

#: The largest metadata document, token or registration answer read from a server.
MAX_OAUTH_BODY_BYTES: Final = 256 * 1024
#: RFC 7523's ``client_assertion_type`` for ``private_key_jwt``.
CLIENT_ASSERTION_TYPE_JWT: Final = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
#: RFC 8628's grant type.
DEVICE_CODE_GRANT: Final = "urn:ietf:params:oauth:grant-type:device_code"

_PRM_WELL_KNOWN: Final = "/.well-known/oauth-protected-resource"
_AS_WELL_KNOWN: Final = "/.well-known/oauth-authorization-server"
_OIDC_WELL_KNOWN: Final = "/.well-known/openid-configuration"
_SHOWN_CHARS: Final = 200


def _shown(value: object) -> str:
    """A server-provided value as it may appear in a message: printable, cut short."""
    text = "".join(ch if ch.isprintable() else "?" for ch in str(value))
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "..."


# --------------------------------------------------------------------------- URLs


def is_loopback_host(host: str) -> bool:
    """``localhost`` (and its subdomains) or a loopback IP address."""
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of ``url``, lower case, the default port left out."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    default = {"http": 80, "https": 443}.get(scheme)
    return f"{scheme}://{host}" + (f":{port}" if port is not None and port != default else "")


def _check_url(url: object, *, what: str, doc: str | None, allow_http: bool) -> str:
    """A URL from a document or a challenge: ``https``, or ``http`` on loopback (or anywhere
    with ``allow_http``); no user information, no fragment."""
    if not isinstance(url, str) or not url:
        raise OAuthMetadataError(f"{what} is not a URL: {_shown(url)!r}", url=doc)
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise OAuthMetadataError(f"{what} is not a valid URL: {_shown(url)!r}", url=doc) from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        raise OAuthMetadataError(f"{what} must be an https:// URL, not {_shown(url)!r}", url=doc)
    if scheme == "http" and not allow_http and not is_loopback_host(parts.hostname):
        raise OAuthMetadataError(
            f"{what} is a plain http:// URL to another machine ({_shown(url)!r}): refused, "
            "since credentials would travel unencrypted (only loopback may use http://)",
            url=doc,
        )
    if parts.username is not None or parts.password is not None:
        raise OAuthMetadataError(f"{what} carries user information: refused", url=doc)
    if parts.fragment:
        raise OAuthMetadataError(f"{what} has a fragment: {_shown(url)!r}", url=doc)
    return url


def canonical_resource(url: str) -> str:
    """The canonical URI of an MCP server (RFC 8707, the ``resource`` parameter): scheme and
    host in lower case, no default port, no fragment, no trailing slash on the path."""
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    return origin_of(url) + path + (f"?{parts.query}" if parts.query else "")


def _path_prefix(prefix: str, path: str) -> bool:
    prefix = prefix.rstrip("/")
    return path.rstrip("/") == prefix or path.startswith(prefix + "/")


def _well_known(url: str, suffix: str) -> str:
    """``origin + suffix + path`` (the RFC 8414 / RFC 9728 insertion)."""
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    return origin_of(url) + suffix + path


# --------------------------------------------------------------------------- WWW-Authenticate


@attrs.frozen
class Challenge:
    """One challenge of a ``WWW-Authenticate`` header: its scheme (lower case) and its
    parameters (names in lower case; values unquoted)."""

    scheme: str
    params: Mapping[str, str] = attrs.field(factory=dict)

    @property
    def resource_metadata(self) -> str | None:
        return self.params.get("resource_metadata") or None

    @property
    def scopes(self) -> tuple[str, ...] | None:
        """The ``scope`` parameter's scopes; None when it is absent."""
        value = self.params.get("scope")
        return None if value is None else tuple(value.split())

    @property
    def error(self) -> str | None:
        return self.params.get("error") or None

    @property
    def error_description(self) -> str | None:
        return self.params.get("error_description") or None


_TOKEN_RE: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_TOKEN68_RE: Final = re.compile(r"[A-Za-z0-9\-._~+/]+=*")


def _skip_ws(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t":
        i += 1
    return i


def _quoted(text: str, i: int) -> tuple[str, int]:
    """The quoted string starting at ``text[i] == '"'``; returns (value, index after it)."""
    out: list[str] = []
    i += 1
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            out.append(text[i + 1])
            i += 2
            continue
        if ch == '"':
            return "".join(out), i + 1
        out.append(ch)
        i += 1
    return "".join(out), i  # unterminated: take the rest


def _parse_one_header(text: str) -> list[tuple[str, dict[str, str]]]:
    challenges: list[tuple[str, dict[str, str]]] = []
    current: dict[str, str] | None = None
    i = 0
    n = len(text)
    while i < n:
        i = _skip_ws(text, i)
        if i >= n:
            break
        if text[i] == ",":
            i += 1
            continue
        match = _TOKEN_RE.match(text, i)
        if match is None:
            # Garbage: skip to the next comma.
            comma = text.find(",", i)
            i = n if comma < 0 else comma + 1
            continue
        name = match.group(0)
        j = _skip_ws(text, match.end())
        if j < n and text[j] == "=" and current is not None:
            # auth-param: name = token / quoted-string
            j = _skip_ws(text, j + 1)
            if j < n and text[j] == '"':
                value, j = _quoted(text, j)
            else:
                value_match = _TOKEN_RE.match(text, j)
                value = value_match.group(0) if value_match else ""
                j = value_match.end() if value_match else j
            current.setdefault(name.lower(), value)
            i = j
            continue
        # A new challenge: the scheme, then maybe a token68 or the first parameter.
        current = {}
        challenges.append((name.lower(), current))
        i = j
        token68 = _TOKEN68_RE.match(text, i)
        if token68 is not None and token68.group(0).endswith("="):
            after = _skip_ws(text, token68.end())
            if after >= n or text[after] == ",":
                i = after  # a token68 credential-like value ("Basic abc=="): no parameters
    return challenges


def parse_www_authenticate(values: Iterable[str]) -> tuple[Challenge, ...]:
    """Every challenge of the ``WWW-Authenticate`` header fields ``values`` (RFC 7235: several
    challenges per field, several fields). Never raises: what cannot be parsed is skipped."""
    found: list[Challenge] = []
    for value in values:
        found.extend(
            Challenge(scheme, params) for scheme, params in _parse_one_header(value[:16384])
        )
    return tuple(found)


def bearer_challenge(challenges: Iterable[Challenge]) -> Challenge | None:
    """The first ``Bearer`` or ``DPoP`` challenge (the ones OAuth answers), or None."""
    for challenge in challenges:
        if challenge.scheme in ("bearer", "dpop"):
            return challenge
    return None


# --------------------------------------------------------------------------- documents


def _json_object(body: bytes, *, what: str, url: str | None) -> Mapping[str, Any]:
    if len(body) > MAX_OAUTH_BODY_BYTES:
        raise OAuthMetadataError(
            f"{what} is larger than {MAX_OAUTH_BODY_BYTES} bytes: refused", url=url
        )
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        raise OAuthMetadataError(f"{what} is not JSON", url=url) from None
    if not isinstance(value, dict):
        raise OAuthMetadataError(f"{what} is not a JSON object", url=url)
    return value


def _opt_str(doc: Mapping[str, Any], field: str, *, what: str, url: str | None) -> str | None:
    value = doc.get(field)
    if value is None:
        return None
    if not isinstance(value, str):
        raise OAuthMetadataError(f"{what}: {field} is not a string", url=url)
    return value


def _str_list(
    doc: Mapping[str, Any], field: str, *, what: str, url: str | None
) -> tuple[str, ...] | None:
    value = doc.get(field)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise OAuthMetadataError(f"{what}: {field} is not a list of strings", url=url)
    return tuple(value)


@attrs.frozen(kw_only=True)
class ProtectedResourceMetadata:
    """What a Protected Resource Metadata document (RFC 9728) says: the ``resource`` (as
    the document gives it; it is the ``resource`` parameter of the requests), the
    authorization servers (issuers), the scopes the resource knows."""

    url: str
    resource: str
    authorization_servers: tuple[str, ...]
    scopes_supported: tuple[str, ...] | None = None


def protected_resource_metadata_urls(
    server_url: str, challenge_url: str | None = None, *, allow_http: bool = False
) -> tuple[str, ...]:
    """Where to look for the server's Protected Resource Metadata, in order: the challenge's
    ``resource_metadata`` when given (alone: the server named it), else the path-based
    well-known URL, then the root one. Raises :class:`OAuthMetadataError` for a challenge URL
    that is not ``https`` (``http`` only on loopback)."""
    if challenge_url:
        return (
            _check_url(challenge_url, what="resource_metadata", doc=None, allow_http=allow_http),
        )
    path = urlsplit(server_url).path.rstrip("/")
    root = origin_of(server_url) + _PRM_WELL_KNOWN
    if path:
        return (root + path, root)
    return (root,)


def parse_protected_resource_metadata(
    body: bytes, *, url: str, server_url: str, allow_http: bool = False
) -> ProtectedResourceMetadata:
    """Check a Protected Resource Metadata document for ``server_url``: its ``resource`` must be
    the server's canonical URI or a prefix of it on the same origin (RFC 9728 §3.3: a document
    about another resource must not be used); at least one authorization server."""
    what = f"the protected resource metadata at {url}"
    doc = _json_object(body, what=what, url=url)
    resource = _opt_str(doc, "resource", what=what, url=url)
    if not resource:
        raise OAuthMetadataError(f"{what} has no resource", url=url)
    _check_url(resource, what=f"{what}: resource", doc=url, allow_http=allow_http)
    mine = canonical_resource(server_url)
    theirs = canonical_resource(resource)
    if origin_of(theirs) != origin_of(mine) or not _path_prefix(
        urlsplit(theirs).path, urlsplit(mine).path
    ):
        raise OAuthMetadataError(
            f"{what} describes the resource {_shown(resource)!r}, not this server ({mine}): "
            "refused (a document about another resource must not be used to sign in)",
            url=url,
        )
    servers = _str_list(doc, "authorization_servers", what=what, url=url) or ()
    if not servers:
        raise OAuthMetadataError(f"{what} names no authorization_servers", url=url)
    for issuer in servers:
        _check_url(issuer, what=f"{what}: authorization server", doc=url, allow_http=allow_http)
    scopes = _str_list(doc, "scopes_supported", what=what, url=url)
    return ProtectedResourceMetadata(
        url=url, resource=resource, authorization_servers=servers, scopes_supported=scopes
    )


@attrs.frozen(kw_only=True)
class AuthorizationServerMetadata:
    """An authorization server, as its metadata (RFC 8414 / OIDC) describes it, checked.
    ``legacy``: built from the 2025-03-26 defaults (no document was found)."""

    issuer: str
    authorization_endpoint: str | None
    token_endpoint: str
    registration_endpoint: str | None = None
    device_authorization_endpoint: str | None = None
    scopes_supported: tuple[str, ...] | None = None
    grant_types_supported: tuple[str, ...] | None = None
    token_endpoint_auth_methods_supported: tuple[str, ...] | None = None
    token_endpoint_auth_signing_alg_values_supported: tuple[str, ...] | None = None
    code_challenge_methods_supported: tuple[str, ...] | None = None
    iss_parameter_supported: bool = False
    client_id_metadata_document_supported: bool = False
    dpop_signing_alg_values_supported: tuple[str, ...] | None = None
    url: str | None = None
    legacy: bool = False


def authorization_server_metadata_urls(issuer: str) -> tuple[str, ...]:
    """Where to look for an issuer's metadata, in the order of MCP 2025-11-25: with a path
    ``/t``: ``/.well-known/oauth-authorization-server/t``, ``/.well-known/openid-configuration/t``,
    ``/t/.well-known/openid-configuration``; without one: the RFC 8414 then the OIDC URL."""
    path = urlsplit(issuer).path.rstrip("/")
    origin = origin_of(issuer)
    if path:
        return (
            origin + _AS_WELL_KNOWN + path,
            origin + _OIDC_WELL_KNOWN + path,
            origin + path + _OIDC_WELL_KNOWN,
        )
    return (origin + _AS_WELL_KNOWN, origin + _OIDC_WELL_KNOWN)


def _endpoint(
    doc: Mapping[str, Any],
    field: str,
    *,
    issuer: str,
    url: str | None,
    allow_http: bool,
    required: bool,
) -> str | None:
    what = f"the authorization server metadata at {url}"
    value = _opt_str(doc, field, what=what, url=url)
    if value is None:
        if required:
            raise OAuthMetadataError(f"{what} has no {field}", url=url)
        return None
    _check_url(value, what=f"{what}: {field}", doc=url, allow_http=allow_http)
    if origin_of(value) != origin_of(issuer):
        raise OAuthMetadataError(
            f"{what}: {field} {_shown(value)!r} is on another origin than the issuer "
            f"{_shown(issuer)!r}: refused before any credential is sent there",
            url=url,
        )
    return value


def parse_authorization_server_metadata(
    body: bytes, *, url: str, issuer: str, allow_http: bool = False
) -> AuthorizationServerMetadata:
    """Check an authorization server's metadata fetched from a URL built from ``issuer``:
    ``issuer`` identical (string comparison, RFC 8414 §3.3); PKCE ``S256`` advertised (MCP:
    refuse a server that does not say so); endpoints ``https`` (``http`` only on loopback) and
    on the issuer's origin."""
    what = f"the authorization server metadata at {url}"
    doc = _json_object(body, what=what, url=url)
    said = _opt_str(doc, "issuer", what=what, url=url)
    if said != issuer:
        raise OAuthMetadataError(
            f"{what} names the issuer {_shown(said)!r}, not {_shown(issuer)!r} that it was "
            "fetched for: refused (RFC 8414 §3.3)",
            url=url,
        )
    methods = _str_list(doc, "code_challenge_methods_supported", what=what, url=url)
    if methods is None or "S256" not in methods:
        raise OAuthMetadataError(
            f"{what} does not advertise PKCE S256 (code_challenge_methods_supported): "
            "refused, since MCP requires PKCE",
            url=url,
        )
    iss_supported = doc.get("authorization_response_iss_parameter_supported", False)
    cimd = doc.get("client_id_metadata_document_supported", False)

    def ep(field: str, required: bool = False) -> str | None:
        return _endpoint(
            doc, field, issuer=issuer, url=url, allow_http=allow_http, required=required
        )

    token = ep("token_endpoint", True)
    assert token is not None
    return AuthorizationServerMetadata(
        issuer=issuer,
        authorization_endpoint=ep("authorization_endpoint"),
        token_endpoint=token,
        registration_endpoint=ep("registration_endpoint"),
        device_authorization_endpoint=ep("device_authorization_endpoint"),
        scopes_supported=_str_list(doc, "scopes_supported", what=what, url=url),
        grant_types_supported=_str_list(doc, "grant_types_supported", what=what, url=url),
        token_endpoint_auth_methods_supported=_str_list(
            doc, "token_endpoint_auth_methods_supported", what=what, url=url
        ),
        token_endpoint_auth_signing_alg_values_supported=_str_list(
            doc, "token_endpoint_auth_signing_alg_values_supported", what=what, url=url
        ),
        code_challenge_methods_supported=methods,
        iss_parameter_supported=iss_supported is True,
        client_id_metadata_document_supported=cimd is True,
        dpop_signing_alg_values_supported=_str_list(
            doc, "dpop_signing_alg_values_supported", what=what, url=url
        ),
        url=url,
    )


def legacy_authorization_server(server_url: str) -> AuthorizationServerMetadata:
    """MCP 2025-03-26's defaults when the server has no metadata at all: the authorization
    server is the MCP server's origin, with ``/authorize``, ``/token`` and ``/register``."""
    origin = origin_of(server_url)
    return AuthorizationServerMetadata(
        issuer=origin,
        authorization_endpoint=origin + "/authorize",
        token_endpoint=origin + "/token",
        registration_endpoint=origin + "/register",
        code_challenge_methods_supported=("S256",),
        legacy=True,
    )


# --------------------------------------------------------------------------- scopes


def _union(*groups: Iterable[str]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for group in groups:
        for scope in group:
            if scope:
                seen.setdefault(scope, None)
    return tuple(seen)


def select_scopes(
    *,
    configured: Sequence[str] | None,
    challenge: Sequence[str] | None,
    resource_scopes: Sequence[str] | None,
    server_scopes: Sequence[str] | None,
    want_refresh: bool = True,
) -> tuple[str, ...]:
    """The scopes of a first authorization (MCP 2025-11-25): the configured ones, else the
    challenge's, else every scope the resource lists, else none (``scope`` omitted); plus
    ``offline_access`` when the authorization server lists it (and a refresh token is
    wanted), never otherwise."""
    if configured is not None:
        chosen = tuple(configured)
    elif challenge is not None:
        chosen = tuple(challenge)
    elif resource_scopes is not None:
        chosen = tuple(resource_scopes)
    else:
        chosen = ()
    if want_refresh and server_scopes is not None and "offline_access" in server_scopes and chosen:
        chosen = _union(chosen, ("offline_access",))
    return _union(chosen)


def step_up_scopes(previous: Sequence[str], challenged: Sequence[str] | None) -> tuple[str, ...]:
    """The scopes of a re-authorization after ``403 insufficient_scope``: the union of the
    ones asked for before and the challenged ones (MCP 2026-07-28)."""
    return _union(previous, challenged or ())


# --------------------------------------------------------------------------- authorization


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def pkce_pair() -> tuple[str, str]:
    """A PKCE (RFC 7636) ``code_verifier`` (43 characters of 32 random bytes) and its ``S256``
    ``code_challenge``."""
    verifier = _b64url(secrets.token_bytes(32))
    return verifier, _b64url(hashlib.sha256(verifier.encode("ascii")).digest())


def new_state() -> str:
    """An unguessable ``state`` value."""
    return _b64url(secrets.token_bytes(24))


def authorization_url(
    metadata: AuthorizationServerMetadata,
    *,
    client_id: str,
    redirect_uri: str,
    scopes: Sequence[str],
    state: str,
    code_challenge: str,
    resource: str,
) -> str:
    """The URL the user opens: the authorization endpoint with ``response_type=code``, PKCE
    ``S256``, ``state``, ``resource`` (RFC 8707) and ``scope`` (left out when empty)."""
    endpoint = metadata.authorization_endpoint
    if endpoint is None:
        raise OAuthMetadataError(
            f"the authorization server {metadata.issuer} has no authorization_endpoint",
            url=metadata.url,
        )
    params = [
        ("response_type", "code"),
        ("client_id", client_id),
        ("redirect_uri", redirect_uri),
        ("state", state),
        ("code_challenge", code_challenge),
        ("code_challenge_method", "S256"),
        ("resource", resource),
    ]
    if scopes:
        params.append(("scope", " ".join(scopes)))
    parts = urlsplit(endpoint)
    query = (parts.query + "&" if parts.query else "") + urlencode(params)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, ""))


def parse_redirect(
    url: str, *, state: str, issuer: str, iss_supported: bool, redirect_uri: str | None = None
) -> str:
    """The authorization code from the URL the browser was sent back to, after the checks:
    the ``iss`` parameter first (RFC 9207: when present it must be ``issuer`` exactly, also
    in an error answer; absent while the server advertises it: refused), then ``state``, then
    an ``error`` answer. ``redirect_uri``: when given, the answer must come back to exactly
    that address. Raises :class:`OAuthFlowError`."""
    if not isinstance(url, str):
        raise OAuthFlowError("the redirect answer is not a URL")
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        raise OAuthFlowError("the redirect answer is not a valid URL") from None
    if redirect_uri is not None and parts.scheme:
        expected = urlsplit(redirect_uri)
        if (parts.scheme.lower(), parts.netloc.lower(), parts.path) != (
            expected.scheme.lower(),
            expected.netloc.lower(),
            expected.path,
        ):
            raise OAuthFlowError(
                "the redirect answer did not come back to the redirect URI this sign-in "
                f"registered ({_shown(redirect_uri)}): refused"
            )
    query = parts.query or (url if "=" in url and not parts.scheme else "")
    params: dict[str, list[str]] = {}
    for name, value in parse_qsl(query, keep_blank_values=True):
        params.setdefault(name, []).append(value)
    if any(len(values) > 1 for values in params.values()):
        raise OAuthFlowError("the redirect answer repeats a parameter: refused")
    got = {name: values[0] for name, values in params.items()}
    iss = got.get("iss")
    if iss is not None and iss != issuer:
        raise OAuthFlowError(
            f"the redirect answer comes from the issuer {_shown(iss)!r}, not {issuer!r} that "
            "this sign-in started with: refused (RFC 9207; a mix-up attack?)",
            error="iss_mismatch",
        )
    if iss is None and iss_supported:
        raise OAuthFlowError(
            f"the redirect answer has no iss although {issuer} says it sends one: refused "
            "(RFC 9207)",
            error="iss_missing",
        )
    if got.get("state") != state:
        raise OAuthFlowError(
            "the redirect answer's state does not match this sign-in's: refused (an answer "
            "to another sign-in, or a forged one); sign in again",
            error="state_mismatch",
        )
    error = got.get("error")
    if error is not None:
        description = got.get("error_description")
        raise OAuthFlowError(
            f"the authorization server refused the sign-in: {_shown(error)}"
            + (f" ({_shown(description)})" if description else ""),
            error=_shown(error),
        )
    code = got.get("code")
    if not code:
        raise OAuthFlowError("the redirect answer has no authorization code")
    return code


# --------------------------------------------------------------------------- token endpoint


@attrs.frozen(kw_only=True)
class ClientAuth:
    """How the client authenticates at the token endpoint: ``method`` is
    ``client_secret_basic``, ``client_secret_post``, ``private_key_jwt`` or ``none``;
    ``assertion``: the signed JWT of ``private_key_jwt`` (made by the caller)."""

    client_id: str
    method: str = "none"
    client_secret: str | None = attrs.field(default=None, repr=False)
    assertion: str | None = attrs.field(default=None, repr=False)


@attrs.frozen(kw_only=True)
class TokenRequest:
    """A form POST to the token (or device authorization) endpoint. ``form`` and ``headers``
    hold secrets: never log them."""

    url: str
    form: tuple[tuple[str, str], ...] = attrs.field(repr=False)
    headers: tuple[tuple[str, str], ...] = attrs.field(default=(), repr=False)

    def body(self) -> bytes:
        return urlencode(self.form).encode("ascii")


def choose_token_auth_method(
    supported: Sequence[str] | None,
    *,
    has_secret: bool,
    has_key: bool = False,
    configured: str | None = None,
) -> str:
    """The token endpoint authentication for what the client holds: the configured method,
    else ``private_key_jwt`` with a key, else with a secret ``client_secret_basic`` (the
    default of RFC 8414 when the server lists none) or ``client_secret_post``, else
    ``none``."""
    if configured:
        return configured
    offered = tuple(supported) if supported is not None else ("client_secret_basic",)
    if has_key and "private_key_jwt" in offered:
        return "private_key_jwt"
    if has_secret:
        if "client_secret_basic" in offered:
            return "client_secret_basic"
        if "client_secret_post" in offered:
            return "client_secret_post"
        return "client_secret_basic" if supported is None else offered[0]
    return "none"


def token_request(
    url: str,
    grant_type: str,
    client: ClientAuth,
    *,
    code: str | None = None,
    code_verifier: str | None = None,
    redirect_uri: str | None = None,
    refresh_token: str | None = None,
    device_code: str | None = None,
    scopes: Sequence[str] | None = None,
    resource: str | None = None,
) -> TokenRequest:
    """The token request of ``grant_type`` (``authorization_code``, ``refresh_token``,
    ``client_credentials`` or the device code grant), with ``resource`` (RFC 8707) and the
    client's authentication."""
    form: list[tuple[str, str]] = [("grant_type", grant_type)]
    if grant_type == "authorization_code":
        if not code or not code_verifier or not redirect_uri:
            raise ValueError("an authorization_code request needs code, verifier, redirect_uri")
        form += [("code", code), ("code_verifier", code_verifier), ("redirect_uri", redirect_uri)]
    elif grant_type == "refresh_token":
        if not refresh_token:
            raise ValueError("a refresh_token request needs the refresh token")
        form.append(("refresh_token", refresh_token))
    elif grant_type == DEVICE_CODE_GRANT:
        if not device_code:
            raise ValueError("a device code request needs the device code")
        form.append(("device_code", device_code))
    elif grant_type != "client_credentials":
        raise ValueError(f"unknown grant type {grant_type!r}")
    if scopes:
        form.append(("scope", " ".join(scopes)))
    if resource:
        form.append(("resource", resource))
    headers = _authenticate(form, client)
    return TokenRequest(url=url, form=tuple(form), headers=tuple(headers))


def _authenticate(form: list[tuple[str, str]], client: ClientAuth) -> list[tuple[str, str]]:
    """Add ``client``'s authentication to ``form``; return the headers it needs."""
    headers: list[tuple[str, str]] = []
    if client.method == "client_secret_basic":
        if client.client_secret is None:
            raise ValueError("client_secret_basic needs a client secret")
        # RFC 6749 §2.3.1: both are form-urlencoded before the Basic encoding.
        pair = f"{_form_escape(client.client_id)}:{_form_escape(client.client_secret)}"
        headers.append(("Authorization", "Basic " + base64.b64encode(pair.encode()).decode()))
    elif client.method == "client_secret_post":
        if client.client_secret is None:
            raise ValueError("client_secret_post needs a client secret")
        form += [("client_id", client.client_id), ("client_secret", client.client_secret)]
    elif client.method == "private_key_jwt":
        if client.assertion is None:
            raise ValueError("private_key_jwt needs a client assertion")
        form += [
            ("client_id", client.client_id),
            ("client_assertion_type", CLIENT_ASSERTION_TYPE_JWT),
            ("client_assertion", client.assertion),
        ]
    else:
        form.append(("client_id", client.client_id))
    return headers


def device_authorization_request(
    url: str, client: ClientAuth, *, scopes: Sequence[str] = (), resource: str | None = None
) -> TokenRequest:
    """The device authorization request (RFC 8628 §3.1), with ``resource`` and the client's
    authentication."""
    form: list[tuple[str, str]] = []
    if scopes:
        form.append(("scope", " ".join(scopes)))
    if resource:
        form.append(("resource", resource))
    headers = _authenticate(form, client)
    return TokenRequest(url=url, form=tuple(form), headers=tuple(headers))


def _form_escape(value: str) -> str:
    return urlencode({"": value})[1:]


@attrs.frozen(kw_only=True)
class TokenResponse:
    """A token endpoint's answer, checked. ``expires_at``: ``now + expires_in`` (None when the
    server said nothing); ``refresh_token``: the new one, else the one the caller kept (a
    refresh that does not rotate keeps it); ``scopes``: the granted ones (the requested ones
    when the server did not say)."""

    access_token: str = attrs.field(repr=False)
    token_type: str
    expires_at: float | None
    refresh_token: str | None = attrs.field(repr=False)
    scopes: tuple[str, ...]


def _oauth_error(status: int, body: bytes, what: str) -> OAuthFlowError:
    error: str | None = None
    description: str | None = None
    try:
        doc = json.loads(body[:MAX_OAUTH_BODY_BYTES])
    except (ValueError, RecursionError):
        doc = None
    if isinstance(doc, dict):
        if isinstance(doc.get("error"), str):
            error = _shown(doc["error"])
        if isinstance(doc.get("error_description"), str):
            description = _shown(doc["error_description"])
    message = f"{what} answered {status}"
    if error:
        message += f": {error}"
    if description:
        message += f" ({description})"
    return OAuthFlowError(message, error=error)


def parse_token_response(
    status: int,
    body: bytes,
    *,
    now: float,
    requested_scopes: Sequence[str] = (),
    previous_refresh_token: str | None = None,
    what: str = "the token endpoint",
) -> TokenResponse:
    """Check a token endpoint's answer. A non-2xx answer raises :class:`OAuthFlowError` with
    the OAuth ``error`` code (``invalid_grant``, ``use_dpop_nonce``...); a 2xx answer that is
    not a usable token raises :class:`OAuthFlowError` too."""
    if not 200 <= status < 300:
        raise _oauth_error(status, body, what)
    try:
        doc = _json_object(body, what=f"the answer of {what}", url=None)
    except OAuthMetadataError as exc:
        raise OAuthFlowError(str(exc)) from None
    token = doc.get("access_token")
    if not isinstance(token, str) or not token:
        raise OAuthFlowError(f"the answer of {what} has no access_token")
    token_type = doc.get("token_type", "Bearer")
    if not isinstance(token_type, str) or token_type.lower() not in ("bearer", "dpop"):
        raise OAuthFlowError(
            f"the answer of {what} has the token_type {_shown(token_type)!r}; only Bearer and "
            "DPoP are supported"
        )
    expires_in = doc.get("expires_in")
    expires_at: float | None = None
    if expires_in is not None:
        if isinstance(expires_in, str) and expires_in.isdigit():
            expires_in = int(expires_in)
        if isinstance(expires_in, bool) or not isinstance(expires_in, int | float):
            raise OAuthFlowError(f"the answer of {what} has an expires_in that is not a number")
        if expires_in == expires_in and expires_in not in (float("inf"), float("-inf")):
            expires_at = now + max(0.0, float(expires_in))
    refresh = doc.get("refresh_token")
    if refresh is not None and (not isinstance(refresh, str) or not refresh):
        raise OAuthFlowError(f"the answer of {what} has a refresh_token that is not a string")
    scope = doc.get("scope")
    if scope is not None and not isinstance(scope, str):
        raise OAuthFlowError(f"the answer of {what} has a scope that is not a string")
    return TokenResponse(
        access_token=token,
        token_type="DPoP" if token_type.lower() == "dpop" else "Bearer",
        expires_at=expires_at,
        refresh_token=refresh if refresh is not None else previous_refresh_token,
        scopes=tuple(scope.split()) if scope is not None else tuple(requested_scopes),
    )


# --------------------------------------------------------------------------- registration


def registration_body(
    *,
    client_name: str,
    redirect_uris: Sequence[str],
    token_endpoint_auth_method: str,
    scopes: Sequence[str] = (),
    grant_types: Sequence[str] = ("authorization_code", "refresh_token"),
    application_type: str = "native",
) -> bytes:
    """The JSON body of a dynamic client registration (RFC 7591), with ``application_type``
    (MCP 2026-07-28: ``native`` for a command line or a desktop host) and ``refresh_token``
    among the grant types."""
    doc: dict[str, Any] = {
        "client_name": client_name,
        "redirect_uris": list(redirect_uris),
        "grant_types": list(grant_types),
        "response_types": ["code"],
        "token_endpoint_auth_method": token_endpoint_auth_method,
        "application_type": application_type,
    }
    if scopes:
        doc["scope"] = " ".join(scopes)
    return json.dumps(doc).encode()


@attrs.frozen(kw_only=True)
class RegistrationResponse:
    """A dynamic registration's answer."""

    client_id: str
    client_secret: str | None = attrs.field(default=None, repr=False)
    client_secret_expires_at: float | None = None
    token_endpoint_auth_method: str | None = None


def parse_registration_response(status: int, body: bytes, *, url: str) -> RegistrationResponse:
    """Check a registration endpoint's answer; raises :class:`OAuthFlowError` for an error
    answer and :class:`OAuthMetadataError` for an unusable one."""
    if not 200 <= status < 300:
        raise _oauth_error(status, body, f"the registration endpoint {url}")
    what = f"the registration answer of {url}"
    doc = _json_object(body, what=what, url=url)
    client_id = _opt_str(doc, "client_id", what=what, url=url)
    if not client_id:
        raise OAuthMetadataError(f"{what} has no client_id", url=url)
    secret = _opt_str(doc, "client_secret", what=what, url=url)
    expires = doc.get("client_secret_expires_at")
    if expires is not None and (isinstance(expires, bool) or not isinstance(expires, int | float)):
        raise OAuthMetadataError(f"{what}: client_secret_expires_at is not a number", url=url)
    return RegistrationResponse(
        client_id=client_id,
        client_secret=secret or None,
        client_secret_expires_at=float(expires) if expires else None,
        token_endpoint_auth_method=_opt_str(doc, "token_endpoint_auth_method", what=what, url=url),
    )


# --------------------------------------------------------------------------- device grant


@attrs.frozen(kw_only=True)
class DeviceAuthorizationResponse:
    """A device authorization answer (RFC 8628 §3.2). ``expires_in`` and ``interval`` are
    seconds."""

    device_code: str = attrs.field(repr=False)
    user_code: str
    verification_uri: str
    verification_uri_complete: str | None
    expires_in: float
    interval: float


def parse_device_authorization(
    status: int, body: bytes, *, url: str, allow_http: bool = False
) -> DeviceAuthorizationResponse:
    """Check a device authorization endpoint's answer: the codes, a verification URI that is
    ``https`` (``http`` on loopback only), the times."""
    if not 200 <= status < 300:
        raise _oauth_error(status, body, f"the device authorization endpoint {url}")
    what = f"the device authorization answer of {url}"
    doc = _json_object(body, what=what, url=url)
    device_code = _opt_str(doc, "device_code", what=what, url=url)
    user_code = _opt_str(doc, "user_code", what=what, url=url)
    uri = _opt_str(doc, "verification_uri", what=what, url=url)
    if not device_code or not user_code or not uri:
        raise OAuthMetadataError(
            f"{what} lacks device_code, user_code or verification_uri", url=url
        )
    _check_url(uri, what=f"{what}: verification_uri", doc=url, allow_http=allow_http)
    complete = _opt_str(doc, "verification_uri_complete", what=what, url=url)
    if complete is not None:
        _check_url(
            complete, what=f"{what}: verification_uri_complete", doc=url, allow_http=allow_http
        )
    expires_in = doc.get("expires_in", 600)
    interval = doc.get("interval", 5)
    for name, value in (("expires_in", expires_in), ("interval", interval)):
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1e7:
            raise OAuthMetadataError(f"{what}: {name} is not a number of seconds", url=url)
    return DeviceAuthorizationResponse(
        device_code=device_code,
        user_code=_shown(user_code),
        verification_uri=uri,
        verification_uri_complete=complete,
        expires_in=float(expires_in),
        interval=max(1.0, float(interval)),
    )
