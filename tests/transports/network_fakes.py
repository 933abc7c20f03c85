"""What the TLS and proxy tests need on 127.0.0.1: a local CA (trustme) with the files a user
would configure, and a tiny HTTP proxy (``CONNECT`` tunnels and forwarded requests) that records
what went through it and may ask for credentials."""

from __future__ import annotations

import base64
import ssl
from collections.abc import Awaitable, Callable
from contextlib import suppress
from pathlib import Path
from urllib.parse import urlsplit

import attrs
import trio
import trio_websocket
import trustme

from tests.transports.http_fake import send_tls_alert


@attrs.define(eq=False)
class Pki:
    """A local CA, a server certificate for ``127.0.0.1`` and ``localhost``, a client
    certificate, and the PEM files a configuration names (in ``folder``)."""

    folder: Path
    ca: trustme.CA = attrs.Factory(trustme.CA)
    #: A CA nobody configured: its certificates are refused.
    stranger: trustme.CA = attrs.Factory(trustme.CA)

    @property
    def ca_bundle(self) -> str:
        path = self.folder / "ca.pem"
        if not path.exists():
            self.ca.cert_pem.write_to_path(str(path))
        return str(path)

    def client_files(
        self, name: str = "client", *, ca: trustme.CA | None = None
    ) -> tuple[str, str]:
        """A client certificate and its key, as two PEM files: (client_cert, client_key)."""
        cert = (ca or self.ca).issue_cert(f"{name}@example.test")
        cert_path, key_path = self.folder / f"{name}.pem", self.folder / f"{name}-key.pem"
        cert.cert_chain_pems[0].write_to_path(str(cert_path))
        cert.private_key_pem.write_to_path(str(key_path))
        return str(cert_path), str(key_path)

    def combined(self, cert: str, key: str) -> str:
        """One PEM file holding the certificate ``cert`` and its key ``key``."""
        path = self.folder / "combined.pem"
        path.write_text(Path(cert).read_text() + Path(key).read_text())
        return str(path)

    def server_context(
        self,
        *hosts: str,
        issuer: trustme.CA | None = None,
        require_client_cert: bool = False,
    ) -> ssl.SSLContext:
        """A server-side context whose certificate names ``hosts`` (default: 127.0.0.1 and
        localhost), issued by ``issuer`` (default: our CA); with ``require_client_cert`` the
        server refuses a client without a certificate of our CA."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        (issuer or self.ca).issue_cert(*(hosts or ("127.0.0.1", "localhost"))).configure_cert(
            context
        )
        if require_client_cert:
            context.verify_mode = ssl.CERT_REQUIRED
            self.ca.configure_trust(context)
        return context


@attrs.define(eq=False)
class AlertingTlsListener(trio.abc.Listener[trio.SSLStream[trio.SocketStream]]):
    """A TLS listener that finishes each handshake before handing the connection on, and that,
    when a handshake fails, sends the client the alert saying why (as OpenSSL-based servers do;
    trio's own listener drops it)."""

    transport_listener: trio.SocketListener
    ssl_context: ssl.SSLContext
    #: Handshakes that failed.
    failures: int = 0

    async def accept(self) -> trio.SSLStream[trio.SocketStream]:
        while True:
            raw = await self.transport_listener.accept()
            stream = trio.SSLStream(raw, self.ssl_context, server_side=True)
            try:
                with trio.fail_after(5):
                    await stream.do_handshake()
            except (trio.BrokenResourceError, trio.TooSlowError):
                self.failures += 1
                await send_tls_alert(stream)
                with trio.CancelScope(shield=True):
                    await raw.aclose()
                continue
            return stream

    async def aclose(self) -> None:
        await self.transport_listener.aclose()


async def serve_websocket_tls(
    nursery: trio.Nursery,
    handler: Callable[[trio_websocket.WebSocketRequest], Awaitable[None]],
    ssl_context: ssl.SSLContext,
) -> int:
    """A trio-websocket server on 127.0.0.1 over TLS (see :class:`AlertingSSLListener`); its
    port."""
    [listener] = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port: int = listener.socket.getsockname()[1]
    tls = AlertingTlsListener(listener, ssl_context)
    # WebSocketServer serves any trio listener; its annotation names trio's two only.
    server = trio_websocket.WebSocketServer(handler, [tls])  # type: ignore[list-item]
    await nursery.start(server.run)
    return port


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@attrs.define(eq=False)
class HttpProxy:
    """An HTTP proxy on 127.0.0.1: ``CONNECT host:port`` opens a tunnel; a request with an
    absolute URL (``GET http://host:port/path``) is forwarded in origin form on a connection to
    that host (the answers are relayed as they come). With ``credentials`` it answers 407
    unless ``Proxy-Authorization`` carries them."""

    credentials: tuple[str, str] | None = None
    port: int = 0
    #: ``CONNECT`` targets, in order.
    tunnels: list[str] = attrs.Factory(list)
    #: Absolute URLs of forwarded requests, in order.
    forwarded: list[str] = attrs.Factory(list)
    #: The ``Proxy-Authorization`` of every request (None: none), in order.
    authorizations: list[str | None] = attrs.Factory(list)
    refused: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url_with(self, user: str, password: str) -> str:
        return f"http://{user}:{password}@127.0.0.1:{self.port}"

    async def start(self, nursery: trio.Nursery) -> HttpProxy:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        nursery.start_soon(trio.serve_listeners, self._client, listeners)
        return self

    async def _client(self, client: trio.SocketStream) -> None:
        async with client:
            buffer = b""
            upstream: trio.SocketStream | None = None
            upstream_target = ""
            try:
                async with trio.open_nursery() as relays:
                    while True:
                        head, buffer = await _read_head(client, buffer)
                        if head is None:
                            break
                        request_line, headers = _parse_head(head)
                        method, target, version = request_line.split(" ", 2)
                        authorization = headers.get("proxy-authorization")
                        self.authorizations.append(authorization)
                        if self.credentials is not None and authorization != basic(
                            *self.credentials
                        ):
                            self.refused += 1
                            await client.send_all(
                                b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                                b'Proxy-Authenticate: Basic realm="test"\r\n'
                                b"Content-Length: 0\r\nConnection: close\r\n\r\n"
                            )
                            break
                        if method == "CONNECT":
                            self.tunnels.append(target)
                            host, _, port = target.rpartition(":")
                            remote = await trio.open_tcp_stream(host.strip("[]"), int(port))
                            await client.send_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                            async with remote:
                                if buffer:
                                    await remote.send_all(buffer)
                                relays.start_soon(_relay, remote, client)
                                await _relay(client, remote)
                            break
                        length = int(headers.get("content-length", "0"))
                        while len(buffer) < length:
                            chunk = await client.receive_some(65536)
                            if not chunk:
                                return
                            buffer += chunk
                        body, buffer = buffer[:length], buffer[length:]
                        self.forwarded.append(target)
                        parts = urlsplit(target)
                        where = parts.netloc
                        if upstream is None or where != upstream_target:
                            if upstream is not None:
                                await upstream.aclose()
                            assert parts.hostname is not None
                            upstream = await trio.open_tcp_stream(parts.hostname, parts.port or 80)
                            upstream_target = where
                            relays.start_soon(_relay, upstream, client)
                        origin = parts.path or "/"
                        if parts.query:
                            origin += f"?{parts.query}"
                        kept = [
                            f"{name}: {value}"
                            for name, value in headers.items()
                            if name not in ("proxy-authorization", "proxy-connection")
                        ]
                        out = "\r\n".join([f"{method} {origin} {version}", *kept]) + "\r\n\r\n"
                        await upstream.send_all(out.encode("latin-1") + body)
                    relays.cancel_scope.cancel()
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                return
            finally:
                if upstream is not None:
                    with trio.CancelScope(shield=True):
                        await upstream.aclose()


async def _read_head(stream: trio.SocketStream, buffer: bytes) -> tuple[bytes | None, bytes]:
    while b"\r\n\r\n" not in buffer:
        chunk = await stream.receive_some(65536)
        if not chunk:
            return None, b""
        buffer += chunk
    head, _, rest = buffer.partition(b"\r\n\r\n")
    return head, rest


def _parse_head(head: bytes) -> tuple[str, dict[str, str]]:
    first, *lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return first, headers


async def _relay(source: trio.abc.ReceiveStream, sink: trio.abc.SendStream) -> None:
    try:
        while data := await source.receive_some(65536):
            await sink.send_all(data)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return
    finally:
        if isinstance(sink, trio.SocketStream):
            with suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                await sink.send_eof()
