"""The configuration keys of the network path to a URL server, in both shapes and in code:
``allow_insecure_http`` (plain ``http://`` / ``ws://`` to another machine), the TLS files
(``ca_bundle``, ``client_cert``, ``client_key``) and ``proxy``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trustme

from trio_mcp.actors.config._config import ServerConfig, TransportKind
from trio_mcp.actors.config._loader import load_echo_config, load_mcp_json, redacted_config
from trio_mcp.protocol import ConfigError, McpTransportConfigError

ENV = {"HOME": "/home/u"}


def problems_of(call: Any) -> tuple[tuple[str, str], ...]:
    with pytest.raises(ConfigError) as info:
        call()
    problems: tuple[tuple[str, str], ...] = info.value.problems
    return problems


def agentao(servers: dict[str, Any]) -> Any:
    return load_mcp_json({"mcpServers": servers}, environ=ENV)


def echo(servers: dict[str, Any]) -> Any:
    document = {"tools": {"mcp_servers": servers}, "execution": {"networkPolicy": "allow"}}
    return load_echo_config(document, environ=ENV)


# --------------------------------------------------------------------------- plain http


def insecure(name: str, url: str) -> str:
    scheme = url.partition("://")[0]
    secure = {"http": "https", "ws": "wss"}[scheme]
    return (
        f"server {name!r}: url {url!r} is plain {scheme}:// to another machine: its traffic, "
        f"headers included, is not encrypted; use {secure}://, or set allow_insecure_http: "
        "true for this server to accept that"
    )


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("http://mcp.internal/mcp", TransportKind.HTTP),
        ("http://10.0.0.7:8080/mcp", TransportKind.SSE),
        ("ws://mcp.internal/socket", TransportKind.WS),
        ("http://[2001:db8::1]/mcp", TransportKind.HTTP),
        ("http://127.example.com/mcp", TransportKind.HTTP),
        ("http://localhost.example.com/mcp", TransportKind.HTTP),
    ],
)
def test_plain_http_to_another_machine_needs_the_opt_in(url: str, kind: TransportKind) -> None:
    with pytest.raises(McpTransportConfigError) as info:
        ServerConfig(name="x", url=url, type=kind)
    assert info.value.problems == (("url", insecure("x", url)),)
    allowed = ServerConfig(name="x", url=url, type=kind, allow_insecure_http=True)
    assert allowed.allow_insecure_http is True


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("http://127.0.0.1:8080/mcp", TransportKind.HTTP),
        ("http://127.45.6.7/mcp", TransportKind.SSE),
        ("http://localhost:8080/mcp", TransportKind.HTTP),
        ("http://LOCALHOST./mcp", TransportKind.HTTP),
        ("http://[::1]:9000/mcp", TransportKind.HTTP),
        ("ws://localhost:9000/mcp", TransportKind.WS),
        ("ws://127.0.0.1/mcp", TransportKind.WS),
        ("https://mcp.example.com/mcp", TransportKind.HTTP),
        ("wss://mcp.example.com/mcp", TransportKind.WS),
    ],
)
def test_loopback_and_encrypted_urls_need_no_opt_in(url: str, kind: TransportKind) -> None:
    assert ServerConfig(name="x", url=url, type=kind).url == url


def test_both_shapes_refuse_plain_http_naming_the_key_and_take_the_opt_in() -> None:
    url = "http://mcp.internal/mcp"
    assert problems_of(lambda: agentao({"a": {"url": url}})) == (
        ("<config>: mcpServers.a.url", insecure("a", url)),
    )
    assert problems_of(lambda: echo({"a": {"url": url}})) == (
        ("<config>: tools.mcp_servers.a.url", insecure("a", url)),
    )
    for load in (agentao, echo):
        (server,) = load({"a": {"url": url, "allow_insecure_http": True}}).config.servers
        assert server.allow_insecure_http is True
        (local,) = load({"a": {"url": "http://localhost:1/mcp"}}).config.servers
        assert local.allow_insecure_http is False


def test_the_opt_in_is_a_boolean_of_url_servers() -> None:
    assert problems_of(lambda: agentao({"a": {"url": "https://h/", "allow_insecure_http": 1}})) == (
        (
            "<config>: mcpServers.a.allow_insecure_http",
            "server 'a': allow_insecure_http must be true or false, got 1",
        ),
    )
    assert problems_of(lambda: echo({"a": {"command": "x", "allow_insecure_http": True}})) == (
        (
            "<config>: tools.mcp_servers.a.allow_insecure_http",
            "server 'a': 'allow_insecure_http' applies to URL servers only; this is a 'stdio' "
            "server",
        ),
    )
    with pytest.raises(McpTransportConfigError) as info:
        ServerConfig(name="s", command="x", allow_insecure_http=True)
    assert info.value.problems == (
        ("allow_insecure_http", "server 's': allow_insecure_http applies to URL servers only"),
    )


def test_the_redacted_view_shows_the_opt_in() -> None:
    config = agentao({"a": {"url": "http://mcp.internal/mcp", "allow_insecure_http": True}})
    assert redacted_config(config.config)["servers"]["a"]["allow_insecure_http"] is True


def test_url_user_information_beside_an_authorization_header_is_refused_at_load() -> None:
    entry = {"url": "https://u:pw@h/mcp", "headers": {"Authorization": "Bearer t"}}
    assert problems_of(lambda: agentao({"a": entry})) == (
        (
            "<config>: mcpServers.a.url",
            "server 'a': url holds user:password@ and headers has an Authorization header too: "
            "give the credentials one way",
        ),
    )


# --------------------------------------------------------------------------- TLS and proxy


@pytest.fixture
def pem_files(tmp_path: Path) -> dict[str, str]:
    ca = trustme.CA()
    client = ca.issue_cert("client@example.test")
    paths = {
        "ca_bundle": tmp_path / "ca.pem",
        "client_cert": tmp_path / "client.pem",
        "client_key": tmp_path / "client-key.pem",
    }
    ca.cert_pem.write_to_path(str(paths["ca_bundle"]))
    client.cert_chain_pems[0].write_to_path(str(paths["client_cert"]))
    client.private_key_pem.write_to_path(str(paths["client_key"]))
    return {key: str(path) for key, path in paths.items()}


def test_both_shapes_read_the_tls_files_and_the_proxy(pem_files: dict[str, str]) -> None:
    entry = {
        "url": "https://mcp.corp.example/mcp",
        **pem_files,
        "proxy": "http://alice:${PROXY_PASSWORD}@proxy.corp.example:3128",
    }
    environ = {"PROXY_PASSWORD": "pr0xy"}
    for loaded in (
        load_mcp_json({"mcpServers": {"a": entry}}, environ=environ),
        load_echo_config(
            {"tools": {"mcp_servers": {"a": entry}}, "execution": {"networkPolicy": "allow"}},
            environ=environ,
        ),
    ):
        (server,) = loaded.config.servers
        assert (server.ca_bundle, server.client_cert, server.client_key) == (
            pem_files["ca_bundle"],
            pem_files["client_cert"],
            pem_files["client_key"],
        )
        assert server.proxy == "http://alice:pr0xy@proxy.corp.example:3128"
        assert "pr0xy" not in repr(server)
        assert "proxy='http://alice:***@proxy.corp.example:3128'" in repr(server)
        view = redacted_config(loaded.config)["servers"]["a"]
        assert view["proxy"] == "http://alice:***@proxy.corp.example:3128"
        assert view["ca_bundle"] == pem_files["ca_bundle"]
        assert (view["client_cert"], view["client_key"]) == (
            pem_files["client_cert"],
            pem_files["client_key"],
        )


def test_tls_files_are_checked_at_load_naming_the_key(
    pem_files: dict[str, str], tmp_path: Path
) -> None:
    missing = str(tmp_path / "nope.pem")
    assert problems_of(lambda: agentao({"a": {"url": "https://h/mcp", "ca_bundle": missing}})) == (
        ("<config>: mcpServers.a.ca_bundle", f"server 'a': ca_bundle: no such file: {missing!r}"),
    )
    key = pem_files["client_key"]
    assert problems_of(lambda: echo({"a": {"url": "https://h/mcp", "client_cert": key}})) == (
        (
            "<config>: tools.mcp_servers.a.client_cert",
            f"server 'a': client_cert: {key!r} holds no PEM certificate",
        ),
    )
    assert problems_of(lambda: agentao({"a": {"url": "https://h/mcp", "client_key": key}})) == (
        (
            "<config>: mcpServers.a.client_key",
            "server 'a': client_key: is used with client_cert only: set client_cert too",
        ),
    )


def test_tls_and_proxy_keys_belong_to_url_servers_with_the_right_scheme(
    pem_files: dict[str, str],
) -> None:
    assert problems_of(
        lambda: agentao({"a": {"command": "x", "proxy": "http://p:1", "ca_bundle": "/x"}})
    ) == (
        (
            "<config>: mcpServers.a.ca_bundle",
            "server 'a': 'ca_bundle' applies to URL servers only; this is a 'stdio' server",
        ),
        (
            "<config>: mcpServers.a.proxy",
            "server 'a': 'proxy' applies to URL servers only; this is a 'stdio' server",
        ),
    )
    url = "http://localhost:9/mcp"
    assert problems_of(
        lambda: agentao({"a": {"url": url, "ca_bundle": pem_files["ca_bundle"]}})
    ) == (
        (
            "<config>: mcpServers.a.ca_bundle",
            "server 'a': ca_bundle is only used with an https:// or wss:// URL",
        ),
    )
    assert problems_of(lambda: agentao({"a": {"url": "https://h/", "proxy": "https://p:1"}})) == (
        (
            "<config>: mcpServers.a.proxy",
            "server 'a': proxy must be an http:// URL (the proxy's own address; https:// "
            "servers are reached through it with CONNECT), got scheme 'https'",
        ),
    )
    assert problems_of(lambda: agentao({"a": {"url": "https://h/", "proxy": 3128}})) == (
        (
            "<config>: mcpServers.a.proxy",
            "server 'a': proxy must be an http:// URL (the proxy's own address; https:// "
            "servers are reached through it with CONNECT), got scheme '(none)'",
        ),
    )
    with pytest.raises(McpTransportConfigError) as info:
        ServerConfig(name="s", command="x", client_cert="/c.pem")
    assert info.value.problems == (
        ("client_cert", "server 's': client_cert applies to URL servers only"),
    )
