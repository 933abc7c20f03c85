"""The ``oauth`` table of a server (both shapes, and ServerConfig built in code), and where
credentials live by default."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from trio_mcp.actors.config import (
    ServerConfig,
    TransportKind,
    credentials_path,
    load_echo_config,
    load_mcp_json,
    redacted_config,
)
from trio_mcp.protocol import ConfigError, McpTransportConfigError
from trio_mcp.transports.oauth import Grant, OAuthSettings

ENV = {"SECRET": "s3cr3t-value", "EMPTY": "", "KEYS": "keys"}


def pem_key() -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


def mcp_json(entry: dict[str, Any], **kwargs: Any) -> Any:
    return load_mcp_json({"mcpServers": {"web": entry}}, environ=ENV, **kwargs)


def problems_of(entry: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(ConfigError) as caught:
        mcp_json(entry)
    return dict(caught.value.problems)


def test_every_key_of_the_table_reaches_the_settings() -> None:
    key = pem_key()
    loaded = mcp_json(
        {
            "url": "https://mcp.example/mcp",
            "auth": "oauth",
            "oauth": {
                "client_id": "cid",
                "client_secret": "${SECRET}",
                "client_metadata_url": "https://app.example/client.json",
                "token_endpoint_auth_method": "private_key_jwt",
                "scopes": "files:read  files:write",
                "grant": "client_credentials",
                "private_key": key,
                "signing_algorithm": "ES256",
                "dpop": True,
                "redirect_uri": "http://127.0.0.1:8765/callback",
                "client_name": "My agent",
                "max_step_up": 3,
            },
        }
    )
    server = loaded.config.server("web")
    assert server.auth == "oauth"
    assert server.oauth_settings == OAuthSettings(
        client_id="cid",
        client_secret="s3cr3t-value",
        client_metadata_url="https://app.example/client.json",
        token_endpoint_auth_method="private_key_jwt",
        scopes=("files:read", "files:write"),
        grant=Grant.CLIENT_CREDENTIALS,
        private_key=key,
        signing_algorithm="ES256",
        dpop=True,
        redirect_uri="http://127.0.0.1:8765/callback",
        client_name="My agent",
        max_step_up=3,
    )
    assert loaded.warnings == ()
    # never a secret in the printable view or in a repr
    text = json.dumps(redacted_config(loaded.config)) + repr(server) + repr(loaded)
    assert "s3cr3t-value" not in text and "PRIVATE KEY" not in text
    view = redacted_config(loaded.config)["servers"]["web"]["oauth"]
    assert view["client_secret"] == "***" and view["private_key"] == "***"
    assert view["scopes"] == ["files:read", "files:write"]


def test_the_echo_shape_reads_the_same_table_and_scopes_may_be_a_list() -> None:
    loaded = load_echo_config(
        {
            "tools": {
                "mcp_servers": {
                    "web": {
                        "url": "https://mcp.example/mcp",
                        "oauth": {"client_id": "cid", "scopes": ["a", "b:c"]},
                    }
                }
            },
            "execution": {"networkPolicy": "allow"},
        },
        environ=ENV,
    )
    server = loaded.config.server("web")
    assert server.auth == "oauth"  # the table implies it, without a warning
    assert loaded.warnings == ()
    assert server.oauth_settings == OAuthSettings(client_id="cid", scopes=("a", "b:c"))


def test_auth_oauth_alone_gives_the_default_settings_and_no_auth_gives_none() -> None:
    loaded = load_mcp_json(
        {
            "mcpServers": {
                "a": {"url": "https://a.example/mcp", "auth": "oauth"},
                "b": {"url": "https://b.example/mcp"},
            }
        }
    )
    assert loaded.config.server("a").oauth_settings == OAuthSettings()
    assert loaded.config.server("b").oauth_settings is None
    assert redacted_config(loaded.config)["servers"]["b"]["oauth"] is None


def test_unknown_keys_warn_and_are_kept_in_extra() -> None:
    loaded = mcp_json(
        {"url": "https://mcp.example/mcp", "oauth": {"client_id": "c", "audience": "x"}}
    )
    settings = loaded.config.server("web").oauth_settings
    assert settings is not None and dict(settings.extra) == {"audience": "x"}
    (warning,) = loaded.warnings
    assert warning.startswith("<config>: mcpServers.web.oauth.audience: server 'web': unknown key")
    assert "kept but not used" in warning


def test_every_bad_value_is_reported_at_once_with_its_key_path() -> None:
    found = problems_of(
        {
            "url": "https://mcp.example/mcp",
            "oauth": {
                "client_id": True,
                "client_metadata_url": "http://app.example/client.json",
                "token_endpoint_auth_method": "magic",
                "scopes": 7,
                "grant": "password",
                "dpop": "yes",
                "redirect_uri": "http://app.example/callback",
                "signing_algorithm": "HS256",
                "max_step_up": True,
            },
        }
    )
    where = "<config>: mcpServers.web.oauth."
    assert set(found) == {
        where + key
        for key in (
            "client_id",
            "scopes",
            "grant",
            "dpop",
            "max_step_up",
        )
    }
    assert found[where + "grant"].endswith(
        "must be 'authorization_code' or 'client_credentials', got 'password'"
    )
    # the type errors stop the entry before the semantic checks: those come once types are right
    found = problems_of(
        {
            "url": "https://mcp.example/mcp",
            "oauth": {
                "client_metadata_url": "http://app.example/client.json",
                "token_endpoint_auth_method": "magic",
                "redirect_uri": "http://app.example/callback",
                "signing_algorithm": "HS256",
                "max_step_up": 11,
                "scopes": ["ok", 'bad"scope'],
            },
        }
    )
    assert set(found) == {
        where + key
        for key in (
            "client_metadata_url",
            "token_endpoint_auth_method",
            "redirect_uri",
            "signing_algorithm",
            "max_step_up",
            "scopes",
        )
    }
    assert "http:// on loopback" in found[where + "redirect_uri"]
    assert found[where + "max_step_up"].endswith("must be an integer from 0 to 10, got 11")


def test_a_problem_of_the_table_is_a_config_error_not_a_transport_error() -> None:
    with pytest.raises(ConfigError) as caught:
        mcp_json({"url": "https://mcp.example/mcp", "oauth": {"grant": "password"}})
    assert not isinstance(caught.value, McpTransportConfigError)


def test_client_secret_expands_and_an_unset_or_empty_variable_is_an_error() -> None:
    found = problems_of(
        {"url": "https://mcp.example/mcp", "oauth": {"client_id": "c", "client_secret": "${NOPE}"}}
    )
    assert "${NOPE} is not set" in found["<config>: mcpServers.web.oauth.client_secret"]
    found = problems_of(
        {"url": "https://mcp.example/mcp", "oauth": {"client_id": "c", "client_secret": "${EMPTY}"}}
    )
    assert "set but empty" in found["<config>: mcpServers.web.oauth.client_secret"]


def test_the_method_needs_the_material_it_signs_with() -> None:
    found = problems_of(
        {
            "url": "https://mcp.example/mcp",
            "oauth": {"client_id": "c", "token_endpoint_auth_method": "client_secret_basic"},
        }
    )
    assert found == {
        "<config>: mcpServers.web.oauth.token_endpoint_auth_method": "server 'web': "
        "client_secret_basic needs client_secret: set it (or use ${VAR})"
    }
    found = problems_of(
        {
            "url": "https://mcp.example/mcp",
            "oauth": {"client_id": "c", "token_endpoint_auth_method": "private_key_jwt"},
        }
    )
    assert "private_key_jwt needs a private key" in "".join(found.values())


def test_private_key_file_is_read_at_load_relative_to_the_file(tmp_path: Path) -> None:
    key = pem_key()
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "client.pem").write_text(key)
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "web": {
                        "url": "https://mcp.example/mcp",
                        "oauth": {"client_id": "c", "private_key_file": "${KEYS}/client.pem"},
                    }
                }
            }
        )
    )
    settings = load_mcp_json(config, environ=ENV).config.server("web").oauth_settings
    assert settings is not None and settings.private_key == key


def test_a_missing_or_bad_private_key_file_names_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.pem"
    found = problems_of(
        {"url": "https://mcp.example/mcp", "oauth": {"private_key_file": str(missing)}}
    )
    message = found["<config>: mcpServers.web.oauth.private_key_file"]
    assert str(missing) in message and "cannot read the private key file" in message
    junk = tmp_path / "junk.pem"
    junk.write_text("not a key at all")
    found = problems_of(
        {"url": "https://mcp.example/mcp", "oauth": {"private_key_file": str(junk)}}
    )
    message = found["<config>: mcpServers.web.oauth.private_key_file"]
    assert str(junk) in message and "is not a PEM private key" in message
    assert "not a key at all" not in message
    found = problems_of(
        {
            "url": "https://mcp.example/mcp",
            "oauth": {"private_key_file": str(junk), "private_key": pem_key()},
        }
    )
    assert "give the private key once" in found["<config>: mcpServers.web.oauth.private_key_file"]


def test_oauth_on_a_websocket_server_is_refused_with_what_to_do_instead() -> None:
    found = problems_of({"type": "ws", "url": "wss://mcp.example/ws", "auth": "oauth"})
    (message,) = found.values()
    assert message == (
        "server 'web': auth 'oauth' is not available for a WebSocket server (type 'ws'): OAuth "
        "sign-in goes over the HTTP transports ('http', 'sse'); send a WebSocket server's "
        "credentials in headers"
    )


def test_oauth_on_a_stdio_server_is_refused() -> None:
    found = problems_of({"command": "srv", "oauth": {"client_id": "c"}})
    assert found == {
        "<config>: mcpServers.web.oauth": "server 'web': 'oauth' applies to URL servers only; "
        "this is a 'stdio' server"
    }


def test_server_config_in_code_checks_the_settings_and_the_table_implies_auth() -> None:
    server = ServerConfig(name="w", url="https://x.example/mcp", oauth=OAuthSettings(dpop=True))
    assert server.auth == "oauth" and server.oauth_settings == OAuthSettings(dpop=True)
    with pytest.raises(ConfigError) as caught:
        ServerConfig(
            name="w",
            url="https://x.example/mcp",
            oauth=OAuthSettings(client_id="c", client_secret="hush-1", redirect_uri="ftp://x"),
        )
    assert caught.value.problems == (
        (
            "oauth.redirect_uri",
            "server 'w': oauth.redirect_uri 'ftp://x' is not an absolute http(s) URL",
        ),
    )
    assert "hush-1" not in str(caught.value)
    with pytest.raises(McpTransportConfigError) as refused:
        ServerConfig(name="w", url="wss://x.example/ws", type=TransportKind.WS, auth="oauth")
    assert refused.value.problems[0][0] == "auth"


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"XDG_CONFIG_HOME": "/xdg", "HOME": "/home/u"}, "/xdg/trio-mcp/credentials"),
        ({"XDG_CONFIG_HOME": "rel", "HOME": "/home/u"}, "/home/u/.config/trio-mcp/credentials"),
        ({"XDG_CONFIG_HOME": "", "HOME": "/home/u"}, "/home/u/.config/trio-mcp/credentials"),
        ({"HOME": "/home/u"}, "/home/u/.config/trio-mcp/credentials"),
    ],
)
def test_credentials_live_next_to_the_users_mcp_json(
    environ: dict[str, str], expected: str
) -> None:
    assert credentials_path(environ) == Path(expected)
