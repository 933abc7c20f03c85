"""The ``oauth`` table of a server's configuration: the rules its values follow, shared by
:class:`~trio_mcp.actors.config.ServerConfig` (which checks the :class:`OAuthSettings` a host
builds in code) and the loaders (which read the table, with ``${VAR}`` expansion and the key
path of every problem).

Secrets (``client_secret``, ``private_key``) never appear in a message or in
:func:`oauth_view`: the settings' ``repr()`` hides them, and the view shows ``***``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

from ...protocol._errors import ConfigError
from ...transports._tls import is_loopback_host
from ...transports.oauth._types import Grant, OAuthSettings
from ._redact import REDACTED

__all__ = [
    "CREDENTIALS_DIR_NAME",
    "MAX_PRIVATE_KEY_BYTES",
    "MAX_STEP_UP_LIMIT",
    "OAUTH_KEYS",
    "SIGNING_ALGORITHMS",
    "TOKEN_ENDPOINT_AUTH_METHODS",
    "login_hint",
    "oauth_problems",
    "oauth_view",
    "read_private_key_file",
    "redirect_uri_problem",
    "scope_problem",
]

#: The credentials directory's name next to the user's ``mcp.json``.
CREDENTIALS_DIR_NAME: Final = "credentials"
#: How the client authenticates at the token endpoint.
TOKEN_ENDPOINT_AUTH_METHODS: Final = (
    "client_secret_basic",
    "client_secret_post",
    "private_key_jwt",
    "none",
)
#: The JWS algorithms ``private_key_jwt`` assertions may be signed with.
SIGNING_ALGORITHMS: Final = (
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "ES512",
    "EdDSA",
)
#: ``max_step_up`` may not exceed this (each step up is a new authorization).
MAX_STEP_UP_LIMIT: Final = 10
#: A private key file bigger than this is not a key.
MAX_PRIVATE_KEY_BYTES: Final = 64 * 1024
#: The keys of the ``oauth`` table; any other is kept in ``extra`` with a warning.
OAUTH_KEYS: Final = frozenset(
    {
        "client_id",
        "client_secret",
        "client_metadata_url",
        "token_endpoint_auth_method",
        "scopes",
        "grant",
        "private_key",
        "private_key_file",
        "signing_algorithm",
        "dpop",
        "redirect_uri",
        "client_name",
        "max_step_up",
    }
)
_GRANTS: Final = tuple(grant.value for grant in Grant)


def login_hint(server: str) -> str:
    """The exact command that signs in to ``server``."""
    return f"trio-mcp login {server}"


def scope_problem(scope: Any) -> str | None:
    """What is wrong with one scope token (RFC 6749 §3.3: printable ASCII without space, ``"``
    or ``\\``), or None."""
    if not isinstance(scope, str) or not scope:
        return f"a scope must be a non-empty string, got {scope!r}"
    bad = [c for c in scope if not (0x21 <= ord(c) <= 0x7E) or c in '"\\']
    if bad:
        return f"the scope {scope!r} holds {bad[0]!r}, which a scope may not contain"
    return None


def redirect_uri_problem(uri: Any) -> str | None:
    """What is wrong with a configured redirect URI, or None: it must be an absolute
    ``https://`` URL, or ``http://`` on a loopback host, without a fragment (it is used exactly
    as written, so it must match the registered one character for character)."""
    if not isinstance(uri, str) or not uri:
        return f"must be an absolute URL, got {uri!r}"
    try:
        parts = urlsplit(uri)
        host = parts.hostname or ""
    except ValueError:
        return f"{uri!r} is not a URL"
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not host:
        return f"{uri!r} is not an absolute http(s) URL"
    if scheme == "http" and not is_loopback_host(host):
        return (
            f"{uri!r} is plain http:// to another machine: a redirect URI must be https://, "
            "or http:// on loopback (127.0.0.1, [::1] or localhost)"
        )
    if parts.fragment or uri.endswith("#"):
        return f"{uri!r} has a fragment (#...), which a redirect URI may not have"
    return None


def _https_url_problem(url: Any) -> str | None:
    if not isinstance(url, str) or not url:
        return f"must be an https:// URL, got {url!r}"
    try:
        parts = urlsplit(url)
    except ValueError:
        return f"{url!r} is not a URL"
    if parts.scheme.lower() != "https" or not parts.hostname or parts.path in ("", "/"):
        return f"{url!r} must be an https:// URL with a path (the Client ID Metadata Document)"
    if parts.fragment:
        return f"{url!r} has a fragment (#...), which a client ID may not have"
    return None


def oauth_problems(settings: OAuthSettings) -> list[tuple[str, str]]:
    """Every problem of ``settings`` as ``(key, message)`` pairs (the key of the ``oauth``
    table at fault). Never fails, whatever the fields hold (hosts build settings from untyped
    code too); never quotes a secret."""
    found: list[tuple[str, str]] = []
    for key in ("client_id", "client_name", "signing_algorithm", "token_endpoint_auth_method"):
        value: Any = getattr(settings, key)
        if value is not None and (not isinstance(value, str) or not value or "\0" in value):
            found.append((key, f"must be a non-empty string, got {value!r}"))
    for key in ("client_secret", "private_key"):
        value = getattr(settings, key)
        if value is not None and (not isinstance(value, str) or not value):
            found.append((key, "must be a non-empty string"))
    method: Any = settings.token_endpoint_auth_method
    if isinstance(method, str) and method and method not in TOKEN_ENDPOINT_AUTH_METHODS:
        found.append(
            (
                "token_endpoint_auth_method",
                f"must be one of {', '.join(TOKEN_ENDPOINT_AUTH_METHODS)}, got {method!r}",
            )
        )
    elif method == "private_key_jwt" and settings.private_key is None:
        found.append(
            (
                "token_endpoint_auth_method",
                "private_key_jwt needs a private key: set private_key or private_key_file",
            )
        )
    elif method in ("client_secret_basic", "client_secret_post") and not settings.client_secret:
        found.append(
            (
                "token_endpoint_auth_method",
                f"{method} needs client_secret: set it (or use ${{VAR}})",
            )
        )
    if settings.client_secret is not None and settings.client_id is None:
        found.append(("client_secret", "a client_secret needs the client_id it belongs to"))
    algorithm: Any = settings.signing_algorithm
    if isinstance(algorithm, str) and algorithm and algorithm not in SIGNING_ALGORITHMS:
        found.append(
            (
                "signing_algorithm",
                f"must be one of {', '.join(SIGNING_ALGORITHMS)}, got {algorithm!r}",
            )
        )
    key_text: Any = settings.private_key
    if isinstance(key_text, str) and key_text and not _looks_like_pem_key(key_text):
        found.append(
            (
                "private_key",
                "is not a PEM private key (-----BEGIN ... PRIVATE KEY----- ... -----END ...)",
            )
        )
    if settings.client_metadata_url is not None:
        problem = _https_url_problem(settings.client_metadata_url)
        if problem is not None:
            found.append(("client_metadata_url", problem))
    scopes: Any = settings.scopes
    if scopes is not None:
        if not isinstance(scopes, tuple):
            found.append(("scopes", f"must be a tuple of scopes, got {scopes!r}"))
        else:
            found.extend(
                ("scopes", problem)
                for problem in (scope_problem(scope) for scope in scopes)
                if problem is not None
            )
    grant: Any = settings.grant
    if grant not in _GRANTS:
        found.append(("grant", f"must be one of {', '.join(_GRANTS)}, got {grant!r}"))
    dpop: Any = settings.dpop
    if not isinstance(dpop, bool):
        found.append(("dpop", f"must be true or false, got {dpop!r}"))
    if settings.redirect_uri is not None:
        problem = redirect_uri_problem(settings.redirect_uri)
        if problem is not None:
            found.append(("redirect_uri", problem))
    steps: Any = settings.max_step_up
    if isinstance(steps, bool) or not isinstance(steps, int) or not 0 <= steps <= MAX_STEP_UP_LIMIT:
        found.append(
            ("max_step_up", f"must be an integer from 0 to {MAX_STEP_UP_LIMIT}, got {steps!r}")
        )
    return found


def _looks_like_pem_key(text: str) -> bool:
    body = text.strip()
    return (
        body.startswith("-----BEGIN ")
        and "PRIVATE KEY-----" in body.splitlines()[0]
        and body.endswith("-----")
        and "-----END " in body
    )


def read_private_key_file(path: str | os.PathLike[str]) -> str:
    """The PEM text of a private key file. Raises :class:`ConfigError` naming the file (never
    quoting it) when it cannot be read, is too big, is not UTF-8 text or not a PEM private
    key."""
    file = Path(path)
    try:
        with file.open("rb") as handle:
            raw = handle.read(MAX_PRIVATE_KEY_BYTES + 1)
    except OSError as exc:
        raise ConfigError(
            f"cannot read the private key file {str(file)!r}: {exc.strerror or exc}"
        ) from None
    if len(raw) > MAX_PRIVATE_KEY_BYTES:
        raise ConfigError(
            f"the private key file {str(file)!r} is bigger than {MAX_PRIVATE_KEY_BYTES} bytes: "
            "it is not a private key"
        )
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ConfigError(
            f"the private key file {str(file)!r} is not text: give a PEM private key "
            "(convert a DER key with openssl pkey -inform DER)"
        ) from None
    if not _looks_like_pem_key(text):
        raise ConfigError(
            f"the private key file {str(file)!r} is not a PEM private key "
            "(-----BEGIN ... PRIVATE KEY----- ... -----END ...)"
        )
    return text


def oauth_view(settings: OAuthSettings) -> dict[str, Any]:
    """A JSON-ready view of ``settings`` that is safe to print: ``client_secret`` and
    ``private_key`` are ``***`` when set; ``extra`` lists the unknown keys kept."""
    return {
        "client_id": settings.client_id,
        "client_secret": None if settings.client_secret is None else REDACTED,
        "client_metadata_url": settings.client_metadata_url,
        "token_endpoint_auth_method": settings.token_endpoint_auth_method,
        "scopes": None if settings.scopes is None else list(settings.scopes),
        "grant": str(settings.grant),
        "private_key": None if settings.private_key is None else REDACTED,
        "signing_algorithm": settings.signing_algorithm,
        "dpop": settings.dpop,
        "redirect_uri": settings.redirect_uri,
        "client_name": settings.client_name,
        "max_step_up": settings.max_step_up,
        "extra": sorted(settings.extra) if isinstance(settings.extra, Mapping) else [],
    }
