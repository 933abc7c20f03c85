"""HTTP proxies on the way to a URL server.

A server's ``proxy`` is an ``http://[user:password@]host:port`` URL. The HTTP transports hand it
to httpx (a ``CONNECT`` tunnel for ``https://``, a forwarded request for ``http://``); the
WebSocket transport opens a ``CONNECT`` tunnel itself (:func:`open_tunnel`), for ``ws://`` and
``wss://`` alike, and speaks TLS and the WebSocket handshake through it. User information in the
proxy URL goes out as ``Proxy-Authorization: Basic``, to the proxy only. The proxy URL is shown
only through :func:`~trio_mcp.transports._redact.redact_url` (the password as ``***``).
"""

from __future__ import annotations

import base64
from typing import Final
from urllib.parse import unquote, urlsplit

import trio

from ..protocol._errors import ConnectError
from ._redact import redact_url

__all__ = ["open_tunnel", "proxy_authorization", "proxy_problem"]

#: The most a proxy's answer to CONNECT may take, head and all, before it is given up.
_MAX_HEAD: Final = 65536


def proxy_problem(url: object) -> str | None:
    """What is wrong with a proxy URL, or None."""
    if not isinstance(url, str) or not url:
        return "must be an http://host:port URL"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"is not a valid URL ({exc})"
    if parts.scheme != "http":
        return (
            f"must be an http:// URL (the proxy's own address; https:// servers are reached "
            f"through it with CONNECT), got scheme {parts.scheme or '(none)'!r}"
        )
    if not parts.hostname:
        return "has no host"
    if port is None:
        return "needs a port (http://host:port)"
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        return "must be only http://[user:password@]host:port, without a path or query"
    return None


def proxy_authorization(url: str) -> str | None:
    """The ``Proxy-Authorization`` value for the user information of a proxy URL, or None."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return None
    pair = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}".encode()
    return "Basic " + base64.b64encode(pair).decode("ascii")


async def open_tunnel(proxy: str, host: str, port: int) -> trio.SocketStream:
    """A TCP connection to ``host:port`` through the HTTP proxy ``proxy`` (``CONNECT``).

    Raises :class:`ConnectError` naming the proxy (its password hidden) when it cannot be
    reached, refuses the tunnel (its status and reason are quoted; 407 says to check the user
    and password), or answers something that is not HTTP."""
    parts = urlsplit(proxy)
    shown = redact_url(proxy)
    host_of_proxy, port_of_proxy = parts.hostname, parts.port
    assert host_of_proxy is not None  # proxy_problem() checked it
    assert port_of_proxy is not None
    try:
        stream = await trio.open_tcp_stream(host_of_proxy, port_of_proxy)
    except OSError as exc:
        raise ConnectError(
            f"could not connect to the proxy {shown}: {exc}; check proxy in the server's settings"
        ) from exc
    try:
        await _connect(stream, proxy, shown, host, port)
    except BaseException:
        with trio.CancelScope(shield=True):
            await stream.aclose()
        raise
    return stream


async def _connect(stream: trio.SocketStream, proxy: str, shown: str, host: str, port: int) -> None:
    authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    lines = [f"CONNECT {authority} HTTP/1.1", f"Host: {authority}"]
    authorization = proxy_authorization(proxy)
    if authorization is not None:
        lines.append(f"Proxy-Authorization: {authorization}")
    try:
        await stream.send_all(("\r\n".join(lines) + "\r\n\r\n").encode("ascii"))
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = await stream.receive_some(4096)
            if not chunk:
                raise ConnectError(
                    f"the proxy {shown} closed the connection before answering CONNECT "
                    f"{authority}; check proxy in the server's settings"
                )
            head += chunk
            if len(head) > _MAX_HEAD:
                raise ConnectError(f"the proxy {shown} sent an answer head over 64 KiB")
    except (trio.BrokenResourceError, OSError) as exc:
        raise ConnectError(
            f"the connection to the proxy {shown} failed during CONNECT {authority}: {exc}"
        ) from exc
    head, _, rest = head.partition(b"\r\n\r\n")
    status_line = head.split(b"\r\n", 1)[0].decode("latin-1")
    version, _, tail = status_line.partition(" ")
    code, _, reason = tail.partition(" ")
    if not version.startswith("HTTP/1.") or not code.isdigit():
        raise ConnectError(
            f"the proxy {shown} answered CONNECT with something that is not HTTP "
            f"({status_line[:80]!r}); check proxy in the server's settings"
        )
    if int(code) == 407:
        raise ConnectError(
            f"the proxy {shown} refused CONNECT {authority} with HTTP 407 {reason}: check the "
            "user and password in proxy (http://user:password@host:port)"
        )
    if not 200 <= int(code) < 300:
        raise ConnectError(
            f"the proxy {shown} refused CONNECT {authority} with HTTP {code} {reason}; check "
            "proxy in the server's settings"
        )
    if rest:
        raise ConnectError(
            f"the proxy {shown} sent data after its answer to CONNECT {authority}, before the "
            "server could have said anything"
        )
