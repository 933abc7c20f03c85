"""JOSE for OAuth: the ``private_key_jwt`` client assertion (RFC 7523) and DPoP proofs
(RFC 9449).

Signing is cryptography and is never written here: PyJWT (with ``cryptography``) signs and
this module only builds the claims and headers. Both are an optional extra, imported when a
JWT feature is first used; without them the feature raises :class:`ConfigError` saying
``pip install 'trio-mcp[jwt]'``.

No message raised here ever holds a key, a token or a signature.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
from collections.abc import Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit, urlunsplit

from ...protocol._errors import ConfigError, OAuthFlowError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes

__all__ = [
    "CLIENT_ASSERTION_TYPE",
    "INSTALL_HINT",
    "DPoPKey",
    "client_assertion",
    "jwk_thumbprint",
]

#: ``client_assertion_type`` of a token request authenticated with ``private_key_jwt``.
CLIENT_ASSERTION_TYPE: Final = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

#: What to run when the JWT extra is missing.
INSTALL_HINT: Final = "pip install 'trio-mcp[jwt]'"

_DPOP_ALGORITHM: Final = "ES256"

#: The JWS algorithms a key of each type may sign with (RFC 7518, RFC 8037).
_RSA_ALGORITHMS: Final = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"})
_EC_ALGORITHMS: Final = {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}

#: RFC 7638 section 3.2: the required members of each key type, the only ones hashed.
_THUMBPRINT_MEMBERS: Final = {"EC": ("crv", "kty", "x", "y"), "RSA": ("e", "kty", "n")}
_THUMBPRINT_MEMBERS_OKP: Final = ("crv", "kty", "x")


def _require_jwt(feature: str) -> ModuleType:
    try:
        import cryptography  # noqa: F401
        import jwt
    except ImportError as exc:
        raise ConfigError(
            f"{feature} needs PyJWT with cryptography, which is not installed: run {INSTALL_HINT}"
        ) from exc
    return jwt


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _load_private_key(pem: str, what: str) -> PrivateKeyTypes:
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    if not isinstance(pem, str) or not pem.strip():
        raise ConfigError(f"{what} is empty: give a PEM private key (-----BEGIN PRIVATE KEY-----)")
    try:
        return load_pem_private_key(pem.encode("utf-8"), password=None)
    # The library's own message or a chained traceback could quote the key: neither is kept.
    except TypeError:
        raise ConfigError(
            f"{what} does not parse: it is encrypted (give an unencrypted PEM key)"
        ) from None
    except ValueError:
        raise ConfigError(
            f"{what} does not parse: it is not a PEM private key (-----BEGIN PRIVATE KEY-----)"
        ) from None
    except UnsupportedAlgorithm:
        raise ConfigError(
            f"{what} does not parse: its key type is not supported (use RSA, EC or Ed25519)"
        ) from None


def _algorithms_for(key: PrivateKeyTypes) -> tuple[str, frozenset[str]]:
    """The default algorithm of ``key`` and every algorithm it may sign with."""
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    if isinstance(key, rsa.RSAPrivateKey):
        return "RS256", _RSA_ALGORITHMS
    if isinstance(key, ec.EllipticCurvePrivateKey):
        algorithm = _EC_ALGORITHMS.get(key.curve.name)
        if algorithm is None:
            raise ConfigError(
                f"the private key is on the curve {key.curve.name}, which JWS cannot sign with: "
                "use P-256, P-384 or P-521"
            )
        return algorithm, frozenset({algorithm})
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return "EdDSA", frozenset({"EdDSA"})
    raise ConfigError(
        f"the private key is a {type(key).__name__.removeprefix('_')}, which this client cannot "
        "sign with: use an RSA, EC (P-256, P-384, P-521) or Ed25519 key"
    )


def client_assertion(
    *,
    client_id: str,
    audience: str,
    private_key_pem: str,
    algorithm: str | None = None,
    now: float | None = None,
    lifetime: float = 60.0,
) -> str:
    """A client authentication JWT (RFC 7523 section 2.2, ``private_key_jwt``): ``iss`` and
    ``sub`` are ``client_id``, ``aud`` is ``audience`` (the authorization server's issuer or
    token endpoint), ``iat`` is ``now`` (seconds since the epoch; None: the wall clock), ``exp``
    is ``lifetime`` seconds later, ``jti`` is random. ``algorithm``: None picks the key's
    (RS256 for RSA, ES256/ES384/ES512 for EC P-256/P-384/P-521, EdDSA for Ed25519).

    Raises :class:`ConfigError` when PyJWT is not installed, the key does not parse, or the
    algorithm does not fit the key; the message never holds the key."""
    jwt = _require_jwt("private_key_jwt")
    if not client_id:
        raise ConfigError("private_key_jwt needs a client_id")
    if not audience:
        raise ConfigError("private_key_jwt needs an audience (the authorization server)")
    if not lifetime > 0:
        raise ConfigError(f"a client assertion's lifetime must be positive, not {lifetime!r}")
    key = _load_private_key(private_key_pem, "the private_key_jwt private key")
    default, allowed = _algorithms_for(key)
    chosen = algorithm or default
    if chosen not in allowed:
        raise ConfigError(
            f"the signing algorithm {chosen!r} does not fit the private key: use "
            f"{' or '.join(sorted(allowed))} (or leave signing_algorithm out)"
        )
    issued = int(time.time() if now is None else now)
    claims: dict[str, Any] = {
        "iss": client_id,
        "sub": client_id,
        "aud": audience,
        "iat": issued,
        "exp": issued + max(1, int(lifetime)),
        "jti": secrets.token_urlsafe(24),
    }
    try:
        token: str = jwt.encode(claims, key, algorithm=chosen, headers={"typ": "JWT"})
    except (jwt.PyJWTError, ValueError, TypeError, NotImplementedError) as exc:
        raise ConfigError(
            f"signing the client assertion with {chosen} failed: {type(exc).__name__}"
        ) from None
    return token


def jwk_thumbprint(jwk: Mapping[str, Any]) -> str:
    """The RFC 7638 thumbprint of a public JWK: the base64url SHA-256 of its required members
    (and only those), in lexicographic order, as JSON without whitespace."""
    kty = jwk.get("kty")
    members = _THUMBPRINT_MEMBERS_OKP if kty == "OKP" else _THUMBPRINT_MEMBERS.get(str(kty))
    if members is None:
        raise ConfigError(f"cannot take the thumbprint of a JWK of type {kty!r}")
    missing = [name for name in members if not isinstance(jwk.get(name), str)]
    if missing:
        raise ConfigError(f"the JWK lacks {', '.join(missing)}: cannot take its thumbprint")
    canonical = json.dumps(
        {name: jwk[name] for name in members}, separators=(",", ":"), sort_keys=True
    )
    return _b64url(hashlib.sha256(canonical.encode("utf-8")).digest())


def _htu(url: str) -> str:
    """RFC 9449 ``htu``: the request's URI without query and fragment (nor user information:
    a password in a URL never travels in a proof)."""
    parts = urlsplit(url)
    if not parts.scheme or not parts.netloc:
        raise ConfigError("a DPoP proof needs an absolute URL (scheme and host)")
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


class DPoPKey:
    """The key that DPoP-bound tokens are bound to (RFC 9449): an EC P-256 private key, signing
    with ES256. ``repr()`` shows its public thumbprint only."""

    __slots__ = ("_key",)

    def __init__(self, key: Any) -> None:
        from cryptography.hazmat.primitives.asymmetric import ec

        if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name != "secp256r1":
            raise ConfigError("a DPoP key must be an EC P-256 private key (ES256)")
        self._key = key

    @classmethod
    def generate(cls) -> DPoPKey:
        """A new random P-256 key."""
        _require_jwt("DPoP")
        from cryptography.hazmat.primitives.asymmetric import ec

        return cls(ec.generate_private_key(ec.SECP256R1()))

    @classmethod
    def from_pem(cls, pem: str) -> DPoPKey:
        """The key of a PEM text (as :meth:`to_pem` writes it)."""
        _require_jwt("DPoP")
        return cls(_load_private_key(pem, "the DPoP key"))

    def to_pem(self) -> str:
        """The private key as unencrypted PKCS #8 PEM (for the token store)."""
        from cryptography.hazmat.primitives import serialization

        return self._key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode("ascii")

    def public_jwk(self) -> dict[str, str]:
        """The public key as a JWK (``kty``, ``crv``, ``x``, ``y``; never ``d``)."""
        numbers = self._key.public_key().public_numbers()
        return {
            "kty": "EC",
            "crv": "P-256",
            "x": _b64url(numbers.x.to_bytes(32, "big")),
            "y": _b64url(numbers.y.to_bytes(32, "big")),
        }

    def thumbprint(self) -> str:
        """RFC 7638 thumbprint of :meth:`public_jwk` (the ``jkt`` of bound tokens)."""
        return jwk_thumbprint(self.public_jwk())

    def proof(
        self,
        *,
        method: str,
        url: str,
        nonce: str | None = None,
        access_token: str | None = None,
        now: float | None = None,
    ) -> str:
        """A DPoP proof JWT for one request (RFC 9449 section 4.2): header ``typ`` dpop+jwt,
        ``alg`` ES256, ``jwk`` the public key; claims ``jti`` (random), ``htm`` ``method``,
        ``htu`` ``url`` without query and fragment, ``iat`` ``now`` (None: the wall clock),
        ``nonce`` when the server gave one, ``ath`` (the base64url SHA-256 of
        ``access_token``) when the proof goes with a token."""
        jwt = _require_jwt("DPoP")
        if not method:
            raise ConfigError("a DPoP proof needs the request's method")
        claims: dict[str, Any] = {
            "jti": secrets.token_urlsafe(24),
            "htm": method,
            "htu": _htu(url),
            "iat": int(time.time() if now is None else now),
        }
        if nonce is not None:
            claims["nonce"] = nonce
        if access_token is not None:
            if not access_token.isascii():
                raise OAuthFlowError(
                    "the access token is not ASCII (RFC 6749 section A.12): cannot bind a DPoP "
                    "proof to it; sign in again"
                )
            claims["ath"] = _b64url(hashlib.sha256(access_token.encode("ascii")).digest())
        headers = {"typ": "dpop+jwt", "jwk": self.public_jwk()}
        token: str = jwt.encode(claims, self._key, algorithm=_DPOP_ALGORITHM, headers=headers)
        return token

    def __repr__(self) -> str:
        return f"DPoPKey(thumbprint={self.thumbprint()!r})"
