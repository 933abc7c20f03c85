"""The configuration keys of the network path to a URL server, in both shapes and in code:
``allow_insecure_http`` (plain ``http://`` / ``ws://`` to another machine)."""

from __future__ import annotations

from typing import Any

import pytest

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
