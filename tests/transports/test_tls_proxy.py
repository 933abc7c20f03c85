"""TLS and proxies on all three HTTP transports (Streamable HTTP, legacy HTTP+SSE, WebSocket),
configured per server, against real servers on 127.0.0.1 with certificates of a local CA
(trustme) and a tiny local proxy.

- A certificate of the configured CA (``ca_bundle``) connects; one of a CA the client does not
  trust, or one for another host name, is refused with a message naming the setting to change.
- A server that requires a client certificate accepts ``client_cert``/``client_key`` and refuses
  a client without one, clearly.
- ``proxy``: ``https://`` and ``wss://`` (and ``ws://``) go through a ``CONNECT`` tunnel, plain
  ``http://`` is forwarded; the proxy's password goes to the proxy only, and never to a log
  record, a ``repr()``, the redacted configuration or an error message.

Real sockets need the real clock: every wait is bounded."""

from __future__ import annotations

import logging
import ssl
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path

import pytest
import trio
import trio_websocket

from tests.transports.http_fake import FakeLegacySse, FakeMcpHttp, serve_http
from tests.transports.network_fakes import HttpProxy, Pki, basic, serve_websocket_tls
from trio_mcp.actors.config._backoff import RetryPolicy
from trio_mcp.actors.config._config import RuntimeConfig, ServerConfig, TransportKind
from trio_mcp.actors.config._loader import redacted_config
from trio_mcp.actors.runtime._events import ServerState
from trio_mcp.actors.runtime._runtime import Runtime, open_runtime
from trio_mcp.actors.runtime._supervisor import ServerStatus
from trio_mcp.actors.testing._fakes import FakeServer, FakeTool
from trio_mcp.protocol import McpTransportConfigError
from trio_mcp.transports._tls import tls_context
from trio_mcp.transports._websocket import WebSocketParameters, accept_websocket_transport
from trio_mcp.transports.http._http_base import HttpParameters

BOUND = 15.0
KINDS = [TransportKind.HTTP, TransportKind.SSE, TransportKind.WS]
PROXY_PASSWORD = "pr0xy-pa55"


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return Pki(tmp_path)


@asynccontextmanager
async def mcp_server(
    kind: TransportKind, ssl_context: ssl.SSLContext | None, *, host: str = "127.0.0.1"
) -> AsyncIterator[str]:
    """An MCP server of ``kind`` on 127.0.0.1 (TLS with ``ssl_context``); its URL, with
    ``host`` as the host."""
    if kind is TransportKind.WS:
        fake = FakeServer(tools=[FakeTool("echo")])

        async def handle(request: trio_websocket.WebSocketRequest) -> None:
            async with accept_websocket_transport(request) as transport:
                await fake.serve_transport(transport)

        async with trio.open_nursery() as nursery:
            if ssl_context is None:
                server = await nursery.start(
                    partial(trio_websocket.serve_websocket, handle, "127.0.0.1", 0, None)
                )
                yield f"ws://{host}:{server.port}/mcp"
            else:
                port = await serve_websocket_tls(nursery, handle, ssl_context)
                yield f"wss://{host}:{port}/mcp"
            nursery.cancel_scope.cancel()
        return
    http: FakeMcpHttp | FakeLegacySse = (
        FakeMcpHttp() if kind is TransportKind.HTTP else FakeLegacySse()
    )
    path = "/mcp" if kind is TransportKind.HTTP else "/sse"
    async with serve_http(http.handle, ssl_context=ssl_context) as served:
        yield served.base.replace("127.0.0.1", host) + path


@asynccontextmanager
async def runtime(server: ServerConfig) -> AsyncIterator[Runtime]:
    config = RuntimeConfig(servers=(server,), retry=RetryPolicy(jitter=0.0))
    async with open_runtime(config) as rt:
        yield rt


async def ready(server: ServerConfig) -> ServerStatus:
    """Connect to ``server`` and call its echo tool; its status."""
    async with runtime(server) as rt:
        with trio.fail_after(BOUND):
            statuses = await rt.wait_ready()
        status = statuses[server.name]
        assert status.state is ServerState.READY, status.last_error
        with trio.fail_after(BOUND):
            result = await rt.call(f"mcp_{server.name}_echo", {"text": "hi"})
        assert not result.is_error, result.text
    return status


async def first_failure(server: ServerConfig) -> str:
    """Connect to ``server``, which must fail; the error of the first attempt."""
    async with runtime(server) as rt:
        with trio.fail_after(BOUND):
            while (error := rt.status()[server.name].last_error) is None:  # noqa: ASYNC110
                await trio.sleep(0.01)
        assert rt.status()[server.name].state is not ServerState.READY
    return error


def config(url: str, kind: TransportKind, **options: object) -> ServerConfig:
    return ServerConfig(name="s", url=url, type=kind, connect_timeout=5.0, **options)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- server certificates


@pytest.mark.parametrize("kind", KINDS)
async def test_a_certificate_of_the_configured_ca_connects(pki: Pki, kind: TransportKind) -> None:
    async with mcp_server(kind, pki.server_context()) as url:
        assert url.startswith(("https://", "wss://"))
        await ready(config(url, kind, ca_bundle=pki.ca_bundle))


UNKNOWN_CA = (
    "the server's TLS certificate was not issued by a CA this client trusts (unable to get local "
    "issuer certificate): if the server uses a private or company CA, set ca_bundle to a PEM "
    "file with that CA's certificate"
)


@pytest.mark.parametrize("kind", KINDS)
async def test_a_certificate_of_an_unknown_ca_is_refused_naming_ca_bundle(
    pki: Pki, kind: TransportKind
) -> None:
    async with mcp_server(kind, pki.server_context()) as url:
        error = await first_failure(config(url, kind))
        assert error.startswith("ConnectError: "), error
        assert error.endswith(UNKNOWN_CA), error
        # Another CA in ca_bundle does not help either.
        other = pki.folder / "other-ca.pem"
        pki.stranger.cert_pem.write_to_path(str(other))
        error = await first_failure(config(url, kind, ca_bundle=str(other)))
        assert error.endswith(UNKNOWN_CA), error


@pytest.mark.parametrize("kind", KINDS)
async def test_a_certificate_for_another_host_is_refused_naming_the_url(
    pki: Pki, kind: TransportKind
) -> None:
    async with mcp_server(kind, pki.server_context("other.example")) as url:
        error = await first_failure(config(url, kind, ca_bundle=pki.ca_bundle))
    assert error.startswith("ConnectError: "), error
    assert error.endswith(
        "the server's TLS certificate is not valid for the host in url (IP address mismatch, "
        "certificate is not valid for '127.0.0.1'.): connect to a host name the certificate "
        "holds (ca_bundle cannot change this), or fix the server's certificate"
    ), error


@pytest.mark.parametrize("kind", KINDS)
async def test_the_host_name_localhost_is_checked_against_the_certificate_too(
    pki: Pki, kind: TransportKind
) -> None:
    async with mcp_server(kind, pki.server_context("localhost"), host="localhost") as url:
        await ready(config(url, kind, ca_bundle=pki.ca_bundle))


# --------------------------------------------------------------------------- client certificates


@pytest.mark.parametrize("kind", KINDS)
async def test_a_server_that_requires_a_client_certificate_takes_ours(
    pki: Pki, kind: TransportKind
) -> None:
    cert, key = pki.client_files()
    async with mcp_server(kind, pki.server_context(require_client_cert=True)) as url:
        await ready(config(url, kind, ca_bundle=pki.ca_bundle, client_cert=cert, client_key=key))
        # The key may be in the certificate's file too.
        both = pki.combined(cert, key)
        await ready(config(url, kind, ca_bundle=pki.ca_bundle, client_cert=both))


@pytest.mark.parametrize("kind", KINDS)
async def test_without_a_client_certificate_the_refusal_names_client_cert(
    pki: Pki, kind: TransportKind
) -> None:
    stranger_cert, stranger_key = pki.client_files("stranger", ca=pki.stranger)
    async with mcp_server(kind, pki.server_context(require_client_cert=True)) as url:
        error = await first_failure(config(url, kind, ca_bundle=pki.ca_bundle))
        assert error.startswith("ConnectError: "), error
        assert "the server refused the TLS handshake (TLSV13_ALERT_CERTIFICATE_REQUIRED)" in error
        assert error.endswith(
            "if it requires a client certificate, set client_cert (and client_key) to one it "
            "accepts"
        ), error
        error = await first_failure(
            config(
                url,
                kind,
                ca_bundle=pki.ca_bundle,
                client_cert=stranger_cert,
                client_key=stranger_key,
            )
        )
        assert "the server refused the TLS handshake (TLSV1_ALERT_UNKNOWN_CA)" in error, error
        assert "set client_cert (and client_key)" in error


# --------------------------------------------------------------------------- proxies


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("secure", [True, False], ids=["tls", "plain"])
async def test_every_transport_goes_through_the_proxy(
    pki: Pki, kind: TransportKind, secure: bool
) -> None:
    context = pki.server_context() if secure else None
    async with trio.open_nursery() as nursery:
        proxy = await HttpProxy(credentials=("alice", PROXY_PASSWORD)).start(nursery)
        async with mcp_server(kind, context) as url:
            options: dict[str, object] = {"proxy": proxy.url_with("alice", PROXY_PASSWORD)}
            if secure:
                options["ca_bundle"] = pki.ca_bundle
            await ready(config(url, kind, **options))
        nursery.cancel_scope.cancel()
    port = url.split(":")[2].split("/")[0]
    if secure or kind is TransportKind.WS:
        assert proxy.tunnels and set(proxy.tunnels) == {f"127.0.0.1:{port}"}
        assert proxy.forwarded == []
    else:  # plain HTTP is forwarded, each request by its absolute URL
        assert proxy.tunnels == []
        assert proxy.forwarded and all(
            target.startswith(f"http://127.0.0.1:{port}/") for target in proxy.forwarded
        )
    assert set(proxy.authorizations) == {basic("alice", PROXY_PASSWORD)}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("secure", [True, False], ids=["tls", "plain"])
async def test_a_wrong_proxy_password_is_refused_naming_proxy_and_never_shown(
    pki: Pki, kind: TransportKind, secure: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    for name in ("trio_mcp", "httpx", "httpcore", "trio-websocket"):
        caplog.set_level(logging.DEBUG, logger=name)
    async with trio.open_nursery() as nursery:
        proxy = await HttpProxy(credentials=("alice", "the-right-one")).start(nursery)
        async with mcp_server(kind, pki.server_context() if secure else None) as url:
            options: dict[str, object] = {"proxy": proxy.url_with("alice", PROXY_PASSWORD)}
            if secure:
                options["ca_bundle"] = pki.ca_bundle
            server = config(url, kind, **options)
            error = await first_failure(server)
        nursery.cancel_scope.cancel()
    assert proxy.refused >= 1
    # A tunnel refused (CONNECT) cannot connect; a forwarded request refused is an answer.
    forwarded = not secure and kind is not TransportKind.WS
    assert error.startswith("HttpStatusError: " if forwarded else "ConnectError: "), error
    assert "407" in error
    assert "check the user and password in proxy" in error
    assert f"alice:***@127.0.0.1:{proxy.port}" in repr(server)
    assert redacted_config(RuntimeConfig(servers=(server,)))["servers"]["s"]["proxy"] == (
        f"http://alice:***@127.0.0.1:{proxy.port}"
    )
    for shown in (error, repr(server), str(redacted_config(RuntimeConfig(servers=(server,))))):
        assert PROXY_PASSWORD not in shown
    assert caplog.records
    for record in caplog.records:
        assert PROXY_PASSWORD not in record.getMessage(), record.getMessage()
        assert PROXY_PASSWORD not in repr(vars(record))


# --------------------------------------------------------------------------- the settings


def problems_of(build: Callable[[], object]) -> tuple[tuple[str, str], ...]:
    with pytest.raises(McpTransportConfigError) as info:
        build()
    problems: tuple[tuple[str, str], ...] = info.value.problems
    return problems


def test_tls_files_are_checked_when_the_parameters_are_built(pki: Pki) -> None:
    cert, key = pki.client_files()
    missing = str(pki.folder / "missing.pem")
    for build in (HttpParameters, WebSocketParameters):
        url = "https://h/mcp" if build is HttpParameters else "wss://h/mcp"
        assert problems_of(lambda: build(url=url, ca_bundle=missing)) == (  # noqa: B023
            ("ca_bundle", f"no such file: {missing!r}"),
        )
        assert problems_of(lambda: build(url=url, client_key=key)) == (  # noqa: B023
            ("client_key", "is used with client_cert only: set client_cert too"),
        )
        params = build(url=url, ca_bundle=pki.ca_bundle, client_cert=cert, client_key=key)
        assert params.ca_bundle == pki.ca_bundle
    assert problems_of(lambda: HttpParameters(url="http://h/mcp", ca_bundle=pki.ca_bundle)) == (
        (
            "url",
            "is plain http:// to another machine: its traffic, headers included, is not "
            "encrypted; use https://, or set allow_insecure_http: true for this server to accept "
            "that",
        ),
        ("ca_bundle", "is only used with an https:// URL"),
    )
    assert problems_of(
        lambda: WebSocketParameters(
            url="wss://h/", ssl_context=ssl.create_default_context(), ca_bundle=pki.ca_bundle
        )
    ) == (("ca_bundle", "give either ssl_context or the TLS files, not both"),)


@pytest.mark.parametrize(
    ("proxy", "problem"),
    [
        (
            "https://p:3128",
            "must be an http:// URL (the proxy's own address; https:// servers "
            "are reached through it with CONNECT), got scheme 'https'",
        ),
        (
            "socks5://p:1080",
            "must be an http:// URL (the proxy's own address; https:// servers "
            "are reached through it with CONNECT), got scheme 'socks5'",
        ),
        ("http://p", "needs a port (http://host:port)"),
        ("http://:3128", "has no host"),
        (
            "http://p:3128/path",
            "must be only http://[user:password@]host:port, without a path or query",
        ),
        ("http://p:99999", "is not a valid URL (Port out of range 0-65535)"),
    ],
)
def test_a_proxy_is_an_http_url_with_host_and_port(proxy: str, problem: str) -> None:
    for build in (HttpParameters, WebSocketParameters):
        url = "https://h/mcp" if build is HttpParameters else "wss://h/mcp"
        assert problems_of(lambda: build(url=url, proxy=proxy)) == (("proxy", problem),)  # noqa: B023
    with pytest.raises(McpTransportConfigError) as info:
        ServerConfig(name="s", url="https://h/mcp", proxy=proxy)
    assert info.value.problems == (("proxy", f"server 's': proxy {problem}"),)


def test_tls_files_that_do_not_hold_what_they_should_name_their_key(pki: Pki) -> None:
    from cryptography.hazmat.primitives import serialization

    cert, key = pki.client_files()
    folder = pki.folder
    junk = folder / "junk.pem"
    junk.write_text("not PEM at all")
    encrypted = folder / "encrypted-key.pem"
    private = serialization.load_pem_private_key(Path(key).read_bytes(), None)
    encrypted.write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"pw"),
        )
    )
    _, other_key = pki.client_files("other")

    def problem(**files: str | None) -> tuple[str, str]:
        with pytest.raises(McpTransportConfigError) as info:
            tls_context(
                ca_bundle=files.get("ca_bundle"),
                client_cert=files.get("client_cert"),
                client_key=files.get("client_key"),
            )
        [found] = info.value.problems
        assert isinstance(found, tuple)
        return found

    assert problem(ca_bundle=str(junk)) == ("ca_bundle", f"{str(junk)!r} holds no PEM certificate")
    assert problem(ca_bundle=str(folder)) == (
        "ca_bundle",
        f"{str(folder)!r} is not a file: give a PEM file",
    )
    assert problem(client_cert=key) == ("client_cert", f"{key!r} holds no PEM certificate")
    assert problem(client_cert=cert) == (
        "client_cert",
        f"{cert!r} holds no PEM private key: give the key in client_key",
    )
    assert problem(client_cert=cert, client_key=str(encrypted)) == (
        "client_key",
        f"the private key in {str(encrypted)!r} is encrypted: give an unencrypted key (there is "
        "no way to give its password)",
    )
    assert problem(client_cert=cert, client_key=other_key) == (
        "client_key",
        f"the private key in {other_key!r} does not belong to client_cert",
    )
    assert tls_context(ca_bundle=None, client_cert=None, client_key=None) is None
