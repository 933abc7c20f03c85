"""JOSE: the private_key_jwt client assertion (RFC 7523) and DPoP proofs (RFC 9449), each
checked by verifying the signature with PyJWT and the public key, then every claim and header."""

from __future__ import annotations

import base64
import hashlib
import json
import sys
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes

from trio_mcp.protocol import ConfigError, OAuthFlowError
from trio_mcp.transports.oauth import (
    CLIENT_ASSERTION_TYPE,
    DPoPKey,
    client_assertion,
    jwk_thumbprint,
)

NOW = 1_700_000_000.0
TOKEN_URL = "https://as.example/token"


def pem(key: PrivateKeyTypes, *, password: bytes | None = None) -> str:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password)
        if password
        else serialization.NoEncryption()
    )
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
    ).decode("ascii")


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


@pytest.fixture(scope="module")
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def header_of(token: str) -> dict[str, Any]:
    header: dict[str, Any] = jwt.get_unverified_header(token)
    return header


# --------------------------------------------------------------------------- client assertion


def test_the_assertion_type_is_rfc_7523s() -> None:
    assert CLIENT_ASSERTION_TYPE == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"


def test_an_rsa_assertion_is_rs256_with_every_claim(rsa_key: rsa.RSAPrivateKey) -> None:
    token = client_assertion(
        client_id="client-1", audience=TOKEN_URL, private_key_pem=pem(rsa_key), now=NOW
    )
    assert header_of(token) == {"alg": "RS256", "typ": "JWT"}
    claims = jwt.decode(
        token,
        rsa_key.public_key(),
        algorithms=["RS256"],
        audience=TOKEN_URL,
        options={"verify_exp": False, "verify_iat": False},
    )
    assert set(claims) == {"iss", "sub", "aud", "iat", "exp", "jti"}
    assert claims["iss"] == claims["sub"] == "client-1"
    assert claims["aud"] == TOKEN_URL
    assert claims["iat"] == 1_700_000_000
    assert claims["exp"] == 1_700_000_060
    assert len(claims["jti"]) >= 16


def test_every_assertion_has_its_own_jti(rsa_key: rsa.RSAPrivateKey) -> None:
    key = pem(rsa_key)
    jtis = {
        jwt.decode(
            client_assertion(client_id="c", audience=TOKEN_URL, private_key_pem=key),
            options={"verify_signature": False},
        )["jti"]
        for _ in range(5)
    }
    assert len(jtis) == 5


def test_without_now_the_wall_clock_dates_the_assertion(rsa_key: rsa.RSAPrivateKey) -> None:
    token = client_assertion(
        client_id="c", audience=TOKEN_URL, private_key_pem=pem(rsa_key), lifetime=300
    )
    # Verified with the default checks: iat is not in the future, exp not in the past.
    claims = jwt.decode(token, rsa_key.public_key(), algorithms=["RS256"], audience=TOKEN_URL)
    assert claims["exp"] - claims["iat"] == 300


def test_an_explicit_rsa_algorithm_is_used(rsa_key: rsa.RSAPrivateKey) -> None:
    token = client_assertion(
        client_id="c",
        audience=TOKEN_URL,
        private_key_pem=pem(rsa_key),
        algorithm="PS384",
        now=NOW,
    )
    assert header_of(token)["alg"] == "PS384"
    jwt.decode(
        token,
        rsa_key.public_key(),
        algorithms=["PS384"],
        audience=TOKEN_URL,
        options={"verify_exp": False, "verify_iat": False},
    )


@pytest.mark.parametrize(
    ("curve", "algorithm"),
    [(ec.SECP256R1(), "ES256"), (ec.SECP384R1(), "ES384"), (ec.SECP521R1(), "ES512")],
)
def test_an_ec_key_signs_with_its_curves_algorithm(curve: ec.EllipticCurve, algorithm: str) -> None:
    key = ec.generate_private_key(curve)
    token = client_assertion(client_id="c", audience=TOKEN_URL, private_key_pem=pem(key), now=NOW)
    assert header_of(token)["alg"] == algorithm
    claims = jwt.decode(
        token,
        key.public_key(),
        algorithms=[algorithm],
        audience=TOKEN_URL,
        options={"verify_exp": False, "verify_iat": False},
    )
    assert claims["iss"] == "c"


def test_an_ed25519_key_signs_with_eddsa() -> None:
    key = ed25519.Ed25519PrivateKey.generate()
    token = client_assertion(client_id="c", audience=TOKEN_URL, private_key_pem=pem(key), now=NOW)
    assert header_of(token)["alg"] == "EdDSA"
    claims = jwt.decode(
        token,
        key.public_key(),
        algorithms=["EdDSA"],
        audience=TOKEN_URL,
        options={"verify_exp": False, "verify_iat": False},
    )
    assert claims["sub"] == "c"


def test_an_algorithm_that_does_not_fit_the_key_is_refused(rsa_key: rsa.RSAPrivateKey) -> None:
    key_pem = pem(rsa_key)
    with pytest.raises(ConfigError, match=r"'ES256' does not fit the private key") as info:
        client_assertion(
            client_id="c", audience=TOKEN_URL, private_key_pem=key_pem, algorithm="ES256"
        )
    assert key_pem not in str(info.value)
    p256 = pem(ec.generate_private_key(ec.SECP256R1()))
    for algorithm in ("ES384", "RS256", "HS256", "none"):
        with pytest.raises(ConfigError, match="use ES256"):
            client_assertion(
                client_id="c", audience=TOKEN_URL, private_key_pem=p256, algorithm=algorithm
            )


def _body_of(key_pem: str) -> str:
    """A line of the key's base64 body: what a careless message would quote."""
    return key_pem.splitlines()[1]


@pytest.mark.parametrize(
    ("make_pem", "message"),
    [
        (lambda: "", "is empty"),
        (lambda: "not a key at all", "is not a PEM private key"),
        (
            lambda: pem(ec.generate_private_key(ec.SECP256R1())).replace("A", "B", 3)[:200],
            "is not a PEM private key",
        ),
        (
            lambda: pem(ec.generate_private_key(ec.SECP256R1()), password=b"pw"),
            "is encrypted",
        ),
        (lambda: pem(ec.generate_private_key(ec.SECP256K1())), "curve secp256k1"),
        (lambda: pem(ed448.Ed448PrivateKey.generate()), "Ed448PrivateKey"),
    ],
    ids=["empty", "text", "truncated", "encrypted", "secp256k1", "ed448"],
)
def test_a_key_that_does_not_parse_or_fit_is_a_config_error_without_the_key(
    make_pem: Any, message: str
) -> None:
    key_pem = make_pem()
    with pytest.raises(ConfigError, match=message) as info:
        client_assertion(client_id="c", audience=TOKEN_URL, private_key_pem=key_pem)
    text = str(info.value)
    if key_pem.count("\n") > 1:
        assert _body_of(key_pem) not in text
    # No chained library error that might quote the input either.
    error = info.value
    assert error.__cause__ is None
    assert error.__context__ is None or error.__suppress_context__


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"client_id": ""}, "needs a client_id"),
        ({"audience": ""}, "needs an audience"),
        ({"lifetime": 0.0}, "lifetime must be positive"),
    ],
)
def test_missing_claims_are_refused(
    rsa_key: rsa.RSAPrivateKey, fields: dict[str, Any], message: str
) -> None:
    arguments: dict[str, Any] = {
        "client_id": "c",
        "audience": TOKEN_URL,
        "private_key_pem": pem(rsa_key),
        **fields,
    }
    with pytest.raises(ConfigError, match=message):
        client_assertion(**arguments)


def test_without_pyjwt_a_jwt_feature_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, rsa_key: rsa.RSAPrivateKey
) -> None:
    monkeypatch.setitem(sys.modules, "jwt", None)
    with pytest.raises(ConfigError, match=r"private_key_jwt needs PyJWT .*trio-mcp\[jwt\]"):
        client_assertion(client_id="c", audience=TOKEN_URL, private_key_pem=pem(rsa_key))
    with pytest.raises(ConfigError, match=r"DPoP needs PyJWT .*pip install 'trio-mcp\[jwt\]'"):
        DPoPKey.generate()


# --------------------------------------------------------------------------- thumbprints


def test_the_thumbprint_of_rfc_7638s_example() -> None:
    # RFC 7638 section 3.1; alg and kid are not required members and are left out of the hash.
    jwk = {
        "kty": "RSA",
        "n": (
            "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1"
            "L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4"
            "QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbO"
            "pbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csF"
            "Cur-kEgU8awapJzKnqDKgw"
        ),
        "e": "AQAB",
        "alg": "RS256",
        "kid": "2011-04-29",
    }
    assert jwk_thumbprint(jwk) == "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"


def test_a_jwk_that_cannot_be_thumbprinted_is_refused() -> None:
    with pytest.raises(ConfigError, match="of type 'oct'"):
        jwk_thumbprint({"kty": "oct", "k": "secret"})
    with pytest.raises(ConfigError, match="lacks y"):
        jwk_thumbprint({"kty": "EC", "crv": "P-256", "x": "abc"})


# --------------------------------------------------------------------------- DPoP


def test_a_dpop_key_is_p256_and_shows_public_members_only() -> None:
    key = DPoPKey.generate()
    jwk = key.public_jwk()
    assert set(jwk) == {"kty", "crv", "x", "y"}
    assert jwk["kty"] == "EC" and jwk["crv"] == "P-256"
    # The public key the JWK describes is the key's: PyJWT reads it back.
    public = jwt.algorithms.ECAlgorithm.from_jwk(json.dumps(jwk))
    assert isinstance(public, ec.EllipticCurvePublicKey)
    private = serialization.load_pem_private_key(key.to_pem().encode(), password=None)
    assert isinstance(private, ec.EllipticCurvePrivateKey)
    assert public.public_numbers() == private.public_key().public_numbers()


def test_the_thumbprint_is_the_canonical_ec_jwk_hashed() -> None:
    key = DPoPKey.generate()
    jwk = key.public_jwk()
    # RFC 7638 section 3.2, written out by hand: crv, kty, x, y in that order, no whitespace.
    canonical = f'{{"crv":"P-256","kty":"EC","x":"{jwk["x"]}","y":"{jwk["y"]}"}}'
    assert key.thumbprint() == b64url(hashlib.sha256(canonical.encode()).digest())


def test_a_dpop_key_survives_pem() -> None:
    key = DPoPKey.generate()
    again = DPoPKey.from_pem(key.to_pem())
    assert again.public_jwk() == key.public_jwk()
    assert again.thumbprint() == key.thumbprint()


def test_a_dpop_key_of_another_type_is_refused(rsa_key: rsa.RSAPrivateKey) -> None:
    with pytest.raises(ConfigError, match="EC P-256"):
        DPoPKey.from_pem(pem(rsa_key))
    with pytest.raises(ConfigError, match="EC P-256"):
        DPoPKey.from_pem(pem(ec.generate_private_key(ec.SECP384R1())))
    with pytest.raises(ConfigError, match="is not a PEM private key"):
        DPoPKey.from_pem("garbage")


def test_the_repr_of_a_dpop_key_shows_its_thumbprint_only() -> None:
    key = DPoPKey.generate()
    text = repr(key)
    assert text == f"DPoPKey(thumbprint={key.thumbprint()!r})"
    assert _body_of(key.to_pem()) not in text


def _verify_proof(key: DPoPKey, proof: str) -> tuple[dict[str, Any], dict[str, Any]]:
    header = header_of(proof)
    public = jwt.algorithms.ECAlgorithm.from_jwk(json.dumps(header["jwk"]))
    claims: dict[str, Any] = jwt.decode(
        proof,
        public,  # type: ignore[arg-type]
        algorithms=["ES256"],
        options={"verify_iat": False},
    )
    return header, claims


def test_a_proof_carries_every_header_and_claim_of_rfc_9449() -> None:
    key = DPoPKey.generate()
    proof = key.proof(
        method="POST",
        url="https://mcp.example:8443/mcp/v1?session=abc#frag",
        nonce="server-nonce-1",
        access_token="the-access-token",
        now=NOW,
    )
    header, claims = _verify_proof(key, proof)
    assert header == {"typ": "dpop+jwt", "alg": "ES256", "jwk": key.public_jwk()}
    assert set(claims) == {"jti", "htm", "htu", "iat", "nonce", "ath"}
    assert claims["htm"] == "POST"
    assert claims["htu"] == "https://mcp.example:8443/mcp/v1"
    assert claims["iat"] == 1_700_000_000
    assert claims["nonce"] == "server-nonce-1"
    assert claims["ath"] == b64url(hashlib.sha256(b"the-access-token").digest())
    assert len(claims["jti"]) >= 16


def test_a_proof_without_nonce_or_token_has_neither_claim() -> None:
    key = DPoPKey.generate()
    first = key.proof(method="GET", url="https://as.example/token", now=NOW)
    second = key.proof(method="GET", url="https://as.example/token", now=NOW)
    _, claims = _verify_proof(key, first)
    assert set(claims) == {"jti", "htm", "htu", "iat"}
    assert claims["htu"] == "https://as.example/token"
    assert claims["jti"] != _verify_proof(key, second)[1]["jti"]


def test_a_proofs_htu_never_carries_user_information() -> None:
    key = DPoPKey.generate()
    proof = key.proof(method="POST", url="https://user:p4ss@mcp.example/mcp?x=1", now=NOW)
    assert _verify_proof(key, proof)[1]["htu"] == "https://mcp.example/mcp"


def test_a_proof_is_refused_for_a_relative_url_or_non_ascii_token() -> None:
    key = DPoPKey.generate()
    with pytest.raises(ConfigError, match="absolute URL"):
        key.proof(method="GET", url="/mcp")
    with pytest.raises(ConfigError, match="method"):
        key.proof(method="", url="https://mcp.example/mcp")
    with pytest.raises(OAuthFlowError, match="not ASCII") as info:
        key.proof(method="GET", url="https://mcp.example/mcp", access_token="tök-secret")
    assert "tök-secret" not in str(info.value)
