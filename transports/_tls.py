"""What is encrypted on the way to a URL server.

- **Plain ``http://`` and ``ws://``**: traffic that anyone on the network path can read and
  change, configured headers (tokens) included. Allowed without a word only to this machine
  (a loopback address: ``127.0.0.0/8``, ``::1``, or the name ``localhost``), where it never
  crosses a network; the transports log a warning when they open such a connection. To any
  other host it needs the server's explicit ``allow_insecure_http``, and is refused otherwise
  (:func:`plaintext_problem`), at load time and when a transport's parameters are built.
"""

from __future__ import annotations

import ipaddress
import logging
from typing import Final

__all__ = [
    "PLAINTEXT_SCHEMES",
    "insecure_url_message",
    "is_loopback_host",
    "plaintext_problem",
    "warn_plaintext",
]

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
