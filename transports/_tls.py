"""What is encrypted on the way to a URL server, and whom the client trusts there.

- **Plain ``http://`` and ``ws://``**: traffic that anyone on the network path can read and
  change, configured headers (tokens) included. Allowed without a word only to this machine
  (a loopback address: ``127.0.0.0/8``, ``::1``, or the name ``localhost``), where it never
  crosses a network; the transports log a warning when they open such a connection. To any
  other host it needs the server's explicit ``allow_insecure_http``, and is refused otherwise
  (:func:`plaintext_problem`), at load time and when a transport's parameters are built.
- **TLS settings** of one server (:func:`tls_context`): ``ca_bundle``, a PEM file of the CA
  certificates the server's certificate must chain to (instead of the default trust store: a
  private or company CA); ``client_cert`` and ``client_key``, the PEM certificate and private key
  the client shows a server that asks for one (mutual TLS). A file that is missing or does not
  hold what it should is a :class:`McpTransportConfigError` naming the key.
- **TLS failures** (:func:`tls_failure_hint`): a certificate refused by the client, or a
  handshake refused by the server, is described with the setting to change (``ca_bundle``, the
  host in ``url``, ``client_cert``).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import ssl
from collections.abc import Callable
from typing import Final

from ..protocol._errors import McpTransportConfigError

__all__ = [
    "PLAINTEXT_SCHEMES",
    "TLS_KEYS",
    "insecure_url_message",
    "is_loopback_host",
    "plaintext_problem",
    "tls_context",
    "tls_failure_hint",
    "tls_refusal_hint",
    "warn_plaintext",
]

#: The per-server TLS settings.
TLS_KEYS: Final = ("ca_bundle", "client_cert", "client_key")

#: The unencrypted URL schemes, with their encrypted counterparts.
PLAINTEXT_SCHEMES: Final = {"http": "https", "ws": "wss"}


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` (a URL's host, IPv6 without brackets) is this machine: an address of
    ``127.0.0.0/8`` or ``::1`` (also IPv4-mapped), or the name ``localhost`` (any case, with or
    without a trailing dot). Other names are not, even if they resolve to a loopback address."""
    name = host.strip("[]").lower()
    if name.rstrip(".") == "localhost":
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def insecure_url_message(scheme: str) -> str:
    """What is wrong with a plain ``scheme`` URL to another machine, and the key that allows it
    (the message goes on after the URL it is about)."""
    secure = PLAINTEXT_SCHEMES.get(scheme, "https")
    return (
        f"is plain {scheme}:// to another machine: its traffic, headers included, is not "
        f"encrypted; use {secure}://, or set allow_insecure_http: true for this server to "
        "accept that"
    )


def plaintext_problem(scheme: str, host: str, *, allow: bool) -> str | None:
    """The problem of a URL with ``scheme`` and ``host`` (see :func:`insecure_url_message`), or
    None: an encrypted scheme, a loopback host, or ``allow``."""
    scheme = scheme.lower()
    if scheme not in PLAINTEXT_SCHEMES or allow or not host or is_loopback_host(host):
        return None
    return insecure_url_message(scheme)


def warn_plaintext(logger: logging.Logger, scheme: str, host: str, where: str) -> None:
    """Log the warning for a connection about to be opened to ``where`` (a URL to show) when
    ``scheme`` is not encrypted: it stays on this machine (loopback), or it was allowed by
    ``allow_insecure_http``."""
    scheme = scheme.lower()
    if scheme not in PLAINTEXT_SCHEMES:
        return
    if is_loopback_host(host):
        logger.warning(
            "the connection to %s is not encrypted (plain %s://); it stays on this machine "
            "(loopback)",
            where,
            scheme,
        )
    else:
        logger.warning(
            "the connection to %s is not encrypted (plain %s://, allowed by "
            "allow_insecure_http): anyone on the network path can read and change it, headers "
            "included",
            where,
            scheme,
        )


# --------------------------------------------------------------------------- TLS settings


def _no_password() -> str:
    # Never let OpenSSL prompt on the terminal for the password of an encrypted key.
    return ""


def _read_text(path: str, key: str) -> str:
    """The text of the file ``path`` given as ``key``; raises the problem when it cannot be
    read."""
    if not os.path.exists(path):
        raise _problem(key, f"no such file: {path!r}")
    if not os.path.isfile(path):
        raise _problem(key, f"{path!r} is not a file: give a PEM file")
    try:
        with open(path, "rb") as file:
            return file.read().decode("utf-8", "replace")
    except OSError as exc:
        raise _problem(key, f"cannot read {path!r}: {exc.strerror or exc}") from None


def _problem(key: str, message: str) -> McpTransportConfigError:
    return McpTransportConfigError(f"{key}: {message}", problems=((key, message),))


def tls_context(
    *,
    ca_bundle: str | None,
    client_cert: str | None,
    client_key: str | None,
    base: Callable[[], ssl.SSLContext] = ssl.create_default_context,
) -> ssl.SSLContext | None:
    """The TLS context of one server's settings, or None when none is set (the transport's
    default applies). With ``ca_bundle`` the server's certificate must chain to one of the CA
    certificates in that PEM file (the default trust store is not used); without it ``base()``
    gives the trust store. ``client_cert`` (with the key in the same file, or in ``client_key``)
    is shown to a server that asks for a client certificate.

    Raises :class:`McpTransportConfigError` naming the key at fault: a missing or unreadable
    file, no CA certificate in ``ca_bundle``, no certificate in ``client_cert``, no private key,
    an encrypted key (there is no way to give its password), a key that does not belong to the
    certificate, ``client_key`` without ``client_cert``."""
    if ca_bundle is None and client_cert is None and client_key is None:
        return None
    if client_key is not None and client_cert is None:
        raise _problem("client_key", "is used with client_cert only: set client_cert too")
    if ca_bundle is not None:
        text = _read_text(ca_bundle, "ca_bundle")
        if "-----BEGIN CERTIFICATE-----" not in text:
            raise _problem("ca_bundle", f"{ca_bundle!r} holds no PEM certificate")
        try:
            context = ssl.create_default_context(cafile=ca_bundle)
        except (ssl.SSLError, OSError) as exc:
            raise _problem(
                "ca_bundle", f"cannot load the CA certificates of {ca_bundle!r}: {exc}"
            ) from None
    else:
        context = base()
    if client_cert is not None:
        _load_client_certificate(context, client_cert, client_key)
    return context


def _load_client_certificate(context: ssl.SSLContext, cert: str, key: str | None) -> None:
    cert_text = _read_text(cert, "client_cert")
    key_name, key_path = ("client_key", key) if key is not None else ("client_cert", cert)
    key_text = _read_text(key_path, key_name) if key is not None else cert_text
    if "-----BEGIN CERTIFICATE-----" not in cert_text:
        raise _problem("client_cert", f"{cert!r} holds no PEM certificate")
    if "PRIVATE KEY-----" not in key_text:
        where = "give the key in client_key" if key is None else "give a PEM private key"
        raise _problem(key_name, f"{key_path!r} holds no PEM private key: {where}")
    if "ENCRYPTED" in key_text:
        raise _problem(
            key_name,
            f"the private key in {key_path!r} is encrypted: give an unencrypted key (there is "
            "no way to give its password)",
        )
    try:
        context.load_cert_chain(cert, key, password=_no_password)
    except ssl.SSLError as exc:
        if exc.reason == "KEY_VALUES_MISMATCH":
            raise _problem(
                key_name, f"the private key in {key_path!r} does not belong to client_cert"
            ) from None
        raise _problem("client_cert", f"cannot load {cert!r} with its key: {exc}") from None
    except OSError as exc:
        raise _problem("client_cert", f"cannot load {cert!r}: {exc}") from None


# --------------------------------------------------------------------------- TLS failures

#: OpenSSL's verification codes (``X509_V_ERR_*``) that mean an unknown issuer.
_UNKNOWN_ISSUER: Final = frozenset({2, 18, 19, 20, 21})
_HOSTNAME_MISMATCH: Final = frozenset({62, 64})
#: What a server's TLS alert means when the handshake fails at its end: it wanted a client
#: certificate (or did not accept the one it got).
_CLIENT_CERT_ALERTS: Final = frozenset(
    {
        "TLSV13_ALERT_CERTIFICATE_REQUIRED",
        "SSLV3_ALERT_BAD_CERTIFICATE",
        "SSLV3_ALERT_CERTIFICATE_UNKNOWN",
        "TLSV1_ALERT_UNKNOWN_CA",
        "TLSV1_ALERT_ACCESS_DENIED",
        "SSLV3_ALERT_HANDSHAKE_FAILURE",
        "SSLV3_ALERT_CERTIFICATE_EXPIRED",
    }
)


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and its causes and contexts, each once (groups: their members too)."""
    seen: list[BaseException] = []
    todo = [exc]
    while todo:
        current = todo.pop()
        if any(current is known for known in seen) or len(seen) > 50:
            continue
        seen.append(current)
        if isinstance(current, BaseExceptionGroup):
            todo.extend(current.exceptions)
        for linked in (current.__cause__, current.__context__):
            if linked is not None:
                todo.append(linked)
    return seen


def tls_failure_hint(exc: BaseException) -> str | None:
    """What went wrong in a TLS handshake that ``exc`` (or one of its causes) reports, with the
    setting to change; None when no TLS failure is in the chain."""
    chain = _chain(exc)
    for error in chain:
        if isinstance(error, ssl.SSLCertVerificationError):
            said = error.verify_message or str(error)
            code = error.verify_code
            if code in _HOSTNAME_MISMATCH:
                return (
                    f"the server's TLS certificate is not valid for the host in url ({said}): "
                    "connect to a host name the certificate holds (ca_bundle cannot change "
                    "this), or fix the server's certificate"
                )
            if code in _UNKNOWN_ISSUER:
                return (
                    f"the server's TLS certificate was not issued by a CA this client trusts "
                    f"({said}): if the server uses a private or company CA, set ca_bundle to a "
                    "PEM file with that CA's certificate"
                )
            return (
                f"the server's TLS certificate was refused ({said}): fix the server's "
                "certificate, or set ca_bundle to the CA that issued it"
            )
    for error in chain:
        if isinstance(error, ssl.SSLError):
            reason = error.reason or ""
            if reason in _CLIENT_CERT_ALERTS:
                return (
                    f"the server refused the TLS handshake ({reason}): if it requires a client "
                    "certificate, set client_cert (and client_key) to one it accepts"
                )
            if reason == "WRONG_VERSION_NUMBER":
                return (
                    "the server does not speak TLS there (WRONG_VERSION_NUMBER): check "
                    "https:// or wss:// against http:// or ws:// in url"
                )
            return f"the TLS handshake failed ({reason or error})"
    return None


def tls_refusal_hint(exc: BaseException) -> str | None:
    """Like :func:`tls_failure_hint`, for a failure after the connection seemed open: only a
    server's refusal of the handshake for want of an acceptable client certificate (which TLS
    1.3 reports on the first read); None for anything else."""
    for error in _chain(exc):
        if isinstance(error, ssl.SSLError) and (error.reason or "") in _CLIENT_CERT_ALERTS:
            return tls_failure_hint(error)
    return None
