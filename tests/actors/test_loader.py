"""Loading the Echo and Agentao configuration shapes: validation, layering, ${VAR} expansion,
the network policy, and the redacted view."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_mcp.actors.config._config import RuntimeConfig, ServerConfig, TransportKind
from trio_mcp.actors.config._loader import (
    LoadedConfig,
    expand_variables,
    load_agentao_config,
    load_config,
    load_echo_config,
    load_mcp_json,
    project_config_path,
    redacted_config,
    user_config_path,
)
from trio_mcp.protocol import ConfigError, McpTransportConfigError

ENV = {"HOME": "/home/u", "TOKEN": "tok-1", "EMPTY": "", "REGION": "eu"}


def write(path: Path, value: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(value if isinstance(value, str) else json.dumps(value), encoding="utf-8")
    return path


def problems_of(call: Any) -> tuple[tuple[str, str], ...]:
    with pytest.raises(ConfigError) as info:
        call()
    problems: tuple[tuple[str, str], ...] = info.value.problems
    return problems


def agentao(servers: dict[str, Any], **options: Any) -> LoadedConfig:
    return load_mcp_json({"mcpServers": servers}, environ=options.pop("environ", ENV), **options)


def one(servers: dict[str, Any]) -> ServerConfig:
    (server,) = agentao(servers).config.servers
    return server


# --------------------------------------------------------------------------- the Echo shape

ECHO: dict[str, Any] = {
    "agent": {"name": "echo"},  # the host's own keys: ignored
    "tools": {
        "profile": "default",
        "mcp": {"enabled": True},
        "mcp_servers": {
            "filesystem": {
                "command": "npx",
                "args": ["-y", "@modelcontextprotocol/server-filesystem", "${HOME}/code"],
                "env": {"API_KEY": "${TOKEN}", "PORT": 8080},
                "cwd": "/srv",
                "enabled": True,
                "tools_include": ["read_file", "write_file"],
                "tools_exclude": ["dangerous_tool"],
            },
            "web-search": {
                "url": "http://localhost:8080/mcp",
                "headers": {"Authorization": "Bearer ${TOKEN}"},
                "auth": "oauth",
                "trust_level": "trusted",
                "connect_timeout": 10,
                "timeout": 30.5,
            },
        },
    },
}


def test_echo_dict_loads_every_key_with_echo_defaults() -> None:
    loaded = load_echo_config(ECHO, environ=ENV)
    assert loaded.shape == "echo"
    assert loaded.sources == ()
    config = loaded.config
    assert (config.enabled, config.network_policy, config.security_policy) == (
        True,
        "deny",
        "block",
    )
    fs, web = config.servers
    assert fs == ServerConfig(
        name="filesystem",
        command="npx",
        args=("-y", "@modelcontextprotocol/server-filesystem", "/home/u/code"),
        env={"API_KEY": "tok-1", "PORT": "8080"},
        cwd="/srv",
        tools_include=("read_file", "write_file"),
        tools_exclude=("dangerous_tool",),
    )
    assert (fs.connect_timeout, fs.timeout, fs.trust_level) == (60.0, 120.0, "untrusted")
    assert web == ServerConfig(
        name="web-search",
        url="http://localhost:8080/mcp",
        headers={"Authorization": "Bearer tok-1"},
        auth="oauth",
        trust_level="trusted",
        connect_timeout=10.0,
        timeout=30.5,
    )
    assert web.transport_kind is TransportKind.HTTP
    # Echo's default network policy is deny: the URL server will be skipped, and we say so.
    assert loaded.warnings == (
        "server 'web-search' is a URL server (http) and execution.networkPolicy is 'deny': it "
        "will be skipped (set networkPolicy to 'allow' to connect it)",
    )


def test_echo_yaml_and_json_files_load_the_same(tmp_path: Path) -> None:
    yaml_text = """
tools:
  mcp:
    enabled: true
  mcpSecurityPolicy: warn
  mcp_servers:
    filesystem:
      command: "npx"
      args: ["-y", "@modelcontextprotocol/server-filesystem", "/path/to/dir"]
      enabled: true
    web-search:
      url: "http://localhost:8080/mcp"
      headers:
        Authorization: "Bearer ${TOKEN}"
      enabled: true
execution:
  networkPolicy: allow
"""
    from_yaml = load_echo_config(write(tmp_path / "echo.yaml", yaml_text), environ=ENV)
    data = {
        "tools": {
            "mcp": {"enabled": True},
            "mcpSecurityPolicy": "warn",
            "mcp_servers": {
                "filesystem": {
                    "command": "npx",
                    "args": ["-y", "@modelcontextprotocol/server-filesystem", "/path/to/dir"],
                    "enabled": True,
                },
                "web-search": {
                    "url": "http://localhost:8080/mcp",
                    "headers": {"Authorization": "Bearer ${TOKEN}"},
                    "enabled": True,
                },
            },
        },
        "execution": {"networkPolicy": "allow"},
    }
    from_json = load_echo_config(write(tmp_path / "echo.json", data), environ=ENV)
    assert from_yaml.config == from_json.config
    assert from_yaml.sources == (str(tmp_path / "echo.yaml"),)
    assert from_yaml.config.security_policy == "warn"
    assert from_yaml.config.network_policy == "allow"
    assert from_yaml.warnings == ()


def test_echo_master_switch_off_connects_nothing() -> None:
    data = {"tools": {"mcp": {"enabled": False}, "mcp_servers": {"a": {"command": "x"}}}}
    loaded = load_echo_config(data, environ=ENV)
    assert loaded.config.enabled is False
    assert [s.name for s in loaded.config.servers] == ["a"]
    assert loaded.warnings == (
        "tools.mcp.enabled is false: none of the 1 configured servers will be connected",
    )


def test_echo_empty_document_has_no_servers() -> None:
    loaded = load_echo_config({}, environ=ENV)
    assert loaded.config.servers == ()
    assert loaded.config.network_policy == "deny"


def test_echo_call_timeout_null_means_no_limit() -> None:
    data = {"tools": {"mcp_servers": {"a": {"command": "x", "timeout": None}}}}
    (server,) = load_echo_config(data, environ=ENV).config.servers
    assert server.timeout is None


def test_echo_policies_and_switches_are_validated() -> None:
    data = {
        "tools": {
            "mcp": {"enabled": "yes please", "extra": 1},
            "mcpSecurityPolicy": "ignore",
            "mcp_servers": {"a": {"command": "x", "trust_level": "high", "trust": True}},
        },
        "execution": {"networkPolicy": "open"},
    }
    assert problems_of(lambda: load_echo_config(data, environ=ENV)) == (
        ("<config>: tools.mcp.enabled", "must be true or false, got 'yes please'"),
        ("<config>: tools.mcpSecurityPolicy", "must be 'block' or 'warn', got 'ignore'"),
        ("<config>: execution.networkPolicy", "must be 'deny' or 'allow', got 'open'"),
        (
            "<config>: tools.mcp_servers.a.trust",
            "server 'a': unknown key 'trust' (known keys: allow_insecure_http, args, auth, "
            "ca_bundle, client_cert, client_key, command, connect_timeout, cwd, enabled, env, "
            "error_policy, headers, log_level, max_call_time, max_frame_bytes, oauth, "
            "progress_resets_timeout, protocol, proxy, resources, skills, timeout, tools, "
            "tools_exclude, tools_include, trust_level, type, url)",
        ),
        (
            "<config>: tools.mcp_servers.a.trust_level",
            "server 'a': trust_level must be 'untrusted' or 'trusted', got 'high'",
        ),
    )


def test_echo_unknown_key_in_tools_mcp_is_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="trio_mcp.config"):
        loaded = load_echo_config({"tools": {"mcp": {"enabled": True, "mode": 2}}}, environ=ENV)
    assert loaded.warnings == ("<config>: tools.mcp.mode: unknown key, ignored",)
    assert [r.getMessage() for r in caplog.records] == list(loaded.warnings)


def test_yaml_without_pyyaml_says_to_install_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path / "echo.yml", "tools: {}\n")
    monkeypatch.setitem(sys.modules, "yaml", None)  # import yaml -> ImportError
    assert problems_of(lambda: load_echo_config(path)) == (
        (
            f"{path}: (top level)",
            "reading YAML needs PyYAML: install trio-mcp[yaml] (pip install 'trio-mcp[yaml]'), "
            "or write the configuration as JSON",
        ),
    )


def test_yaml_syntax_errors_and_duplicate_keys_are_located(tmp_path: Path) -> None:
    broken = write(tmp_path / "broken.yaml", "tools:\n  mcp_servers: [\n")
    ((where, message),) = problems_of(lambda: load_echo_config(broken))
    assert where.startswith(f"{broken}: line 3 column 1")
    assert message.startswith("invalid YAML: ")
    twice = write(
        tmp_path / "twice.yaml",
        "tools:\n  mcp_servers:\n    a: {command: x}\n    a: {command: y}\n",
    )
    assert problems_of(lambda: load_echo_config(twice)) == (
        (
            f"{twice}: tools.mcp_servers.a",
            "the key 'a' appears more than once in tools.mcp_servers (keep only one)",
        ),
    )


# --------------------------------------------------------------------------- the Agentao shape


def test_agentao_document_from_the_seed() -> None:
    loaded = load_mcp_json(
        {
            "mcpServers": {
                "filesystem": {
                    "command": "npx",
                    "args": ["-y", "@modelcontextprotocol/server-filesystem", "/path/to/code"],
                    "env": {},
                    "trust": False,
                    "timeout": 60,
                },
                "github": {
                    "command": "npx",
                    "args": ["-y", "@modelcontextprotocol/server-github"],
                    "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}"},
                },
                "analytics-sse": {
                    "url": "https://mcp.your-company.com/sse",
                    "type": "sse",
                    "headers": {"Authorization": "Bearer ${ANALYTICS_TOKEN}"},
                    "timeout": 30,
                },
            }
        },
        environ={"GITHUB_TOKEN": "ghp-1", "ANALYTICS_TOKEN": "an-2"},
    )
    assert loaded.shape == "agentao"
    config = loaded.config
    assert config.network_policy == "allow"
    fs, gh, sse = config.servers
    # A plain number bounds start-up only: calls have no limit unless "request" says so.
    assert (fs.connect_timeout, fs.timeout, fs.trust_level) == (60.0, None, "untrusted")
    assert (gh.connect_timeout, gh.timeout) == (60.0, None)
    assert gh.env == {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp-1"}
    assert sse.transport_kind is TransportKind.SSE
    assert sse.headers == {"Authorization": "Bearer an-2"}
    assert sse.connect_timeout == 30.0
    assert loaded.warnings == ()


@pytest.mark.parametrize(
    ("timeout", "connect", "call"),
    [
        (None, 60.0, None),
        (15, 15.0, None),
        ({"startup": 5, "request": 30}, 5.0, 30.0),
        ({"request": 2.5}, 60.0, 2.5),
        ({"startup": 7}, 7.0, None),
        ({}, 60.0, None),
    ],
)
def test_agentao_timeout(timeout: Any, connect: float, call: float | None) -> None:
    entry: dict[str, Any] = {"command": "x"}
    if timeout is not None:
        entry["timeout"] = timeout
    server = one({"a": entry})
    assert (server.connect_timeout, server.timeout) == (connect, call)


@pytest.mark.parametrize(
    ("timeout", "key", "message"),
    [
        (True, "timeout", "timeout must be a number of seconds, got true"),
        (0, "timeout", "timeout must be a finite number of seconds > 0, got 0"),
        (-3, "timeout", "timeout must be a finite number of seconds > 0, got -3"),
        (float("inf"), "timeout", "timeout must be a finite number of seconds > 0, got inf"),
        (float("nan"), "timeout", "timeout must be a finite number of seconds > 0, got nan"),
        ("60", "timeout", "timeout must be a number of seconds, got '60'"),
        (
            {"startup": False},
            "timeout.startup",
            "timeout.startup must be a number of seconds, got false",
        ),
        (
            {"request": 0},
            "timeout.request",
            "timeout.request must be a finite number of seconds > 0, got 0",
        ),
        (
            {"connect": 5},
            "timeout.connect",
            "unknown key 'connect' in timeout (use 'startup' and 'request')",
        ),
    ],
)
def test_agentao_bad_timeouts(timeout: Any, key: str, message: str) -> None:
    assert problems_of(lambda: agentao({"a": {"command": "x", "timeout": timeout}})) == (
        (f"<config>: mcpServers.a.{key}", f"server 'a': {message}"),
    )


def test_infinite_timeouts_in_a_json_file_are_refused(tmp_path: Path) -> None:
    path = write(
        tmp_path / "mcp.json",
        '{"mcpServers": {"a": {"command": "x", "timeout": Infinity},'
        ' "b": {"command": "x", "timeout": {"request": NaN}}}}',
    )
    assert problems_of(lambda: load_mcp_json(path)) == (
        (
            f"{path}: mcpServers.a.timeout",
            "server 'a': timeout must be a finite number of seconds > 0, got inf",
        ),
        (
            f"{path}: mcpServers.b.timeout.request",
            "server 'b': timeout.request must be a finite number of seconds > 0, got nan",
        ),
    )


def test_agentao_trust_resources_and_skills() -> None:
    server = one({"a": {"command": "x", "trust": True, "resources": False, "skills": True}})
    assert (server.trust_level, server.resources, server.skills) == ("trusted", False, True)
    defaults = one({"a": {"command": "x"}})
    assert (defaults.trust_level, defaults.resources, defaults.skills) == (
        "untrusted",
        True,
        False,
    )
    assert problems_of(
        lambda: agentao({"a": {"command": "x", "trust": "yes", "skills": 1, "resources": None}})
    ) == (
        ("<config>: mcpServers.a.trust", "server 'a': trust must be true or false, got 'yes'"),
        (
            "<config>: mcpServers.a.resources",
            "server 'a': resources must be true or false, got null",
        ),
        ("<config>: mcpServers.a.skills", "server 'a': skills must be true or false, got 1"),
    )


@pytest.mark.parametrize(
    ("given", "kind"),
    [
        ("stdio", TransportKind.STDIO),
        ("http", TransportKind.HTTP),
        ("streamable-http", TransportKind.HTTP),
        ("streamable_http", TransportKind.HTTP),
        ("sse", TransportKind.SSE),
        ("ws", TransportKind.WS),
    ],
)
def test_type_and_its_aliases(given: str, kind: TransportKind) -> None:
    entry: dict[str, Any] = {"type": given}
    if kind is TransportKind.STDIO:
        entry["command"] = "x"
    else:
        entry["url"] = "wss://h/ws" if kind is TransportKind.WS else "https://h/mcp"
    assert one({"a": entry}).transport_kind is kind


def test_type_is_inferred() -> None:
    assert one({"a": {"command": "x"}}).transport_kind is TransportKind.STDIO
    assert one({"a": {"url": "https://h/mcp"}}).transport_kind is TransportKind.HTTP


def test_unknown_type_fails_closed_naming_server_and_key() -> None:
    with pytest.raises(McpTransportConfigError) as info:
        agentao({"remote": {"url": "https://h/x", "type": "grpc"}})
    assert info.value.problems == (
        (
            "<config>: mcpServers.remote.type",
            "server 'remote': unknown type 'grpc'; use 'stdio', 'http' (or 'streamable-http', "
            "'streamable_http'), 'sse' or 'ws'",
        ),
    )
    assert str(info.value) == (
        "invalid MCP configuration (1 problem):\n"
        "  <config>: mcpServers.remote.type: server 'remote': unknown type 'grpc'; use 'stdio', "
        "'http' (or 'streamable-http', 'streamable_http'), 'sse' or 'ws'"
    )


def test_missing_required_key_fails_closed() -> None:
    with pytest.raises(McpTransportConfigError) as info:
        agentao({"a": {"type": "sse", "command": "x"}, "b": {"type": "stdio", "url": "http://h"}})
    assert info.value.problems == (
        ("<config>: mcpServers.a.url", "server 'a': type 'sse' needs 'url' (it has 'command')"),
        (
            "<config>: mcpServers.b.command",
            "server 'b': type 'stdio' needs 'command' (it has 'url')",
        ),
    )


def test_url_and_command_exactly_one() -> None:
    with pytest.raises(McpTransportConfigError) as info:
        agentao({"both": {"command": "x", "url": "http://h"}, "neither": {"args": ["a"]}})
    assert info.value.problems == (
        (
            "<config>: mcpServers.both",
            "server 'both': give exactly one of 'command' (stdio) and 'url' (HTTP, SSE or "
            "WebSocket); it has both",
        ),
        (
            "<config>: mcpServers.neither",
            "server 'neither': give exactly one of 'command' (stdio) and 'url' (HTTP, SSE or "
            "WebSocket); it has neither",
        ),
    )


def test_keys_of_the_other_transport_are_refused() -> None:
    assert problems_of(
        lambda: agentao(
            {
                "s": {"command": "x", "headers": {"A": "b"}},
                "u": {"url": "https://h", "env": {"A": "b"}, "cwd": "/tmp"},
            }
        )
    ) == (
        (
            "<config>: mcpServers.s.headers",
            "server 's': 'headers' applies to URL servers only; this is a 'stdio' server",
        ),
        (
            "<config>: mcpServers.u.env",
            "server 'u': 'env' applies to stdio servers only; this is a 'http' server",
        ),
        (
            "<config>: mcpServers.u.cwd",
            "server 'u': 'cwd' applies to stdio servers only; this is a 'http' server",
        ),
    )


def test_urls_must_match_their_transport() -> None:
    assert problems_of(
        lambda: agentao(
            {
                "a": {"url": "ws://h/socket"},
                "b": {"url": "https://h", "type": "ws"},
                "c": {"url": "localhost:8080/mcp"},
            }
        )
    ) == (
        (
            "<config>: mcpServers.a.url",
            "server 'a': url 'ws://h/socket' is not an absolute http or https URL for a 'http' "
            'server (set "type": "ws" for a WebSocket server)',
        ),
        (
            "<config>: mcpServers.b.url",
            "server 'b': url 'https://h' is not an absolute ws or wss URL for a 'ws' server",
        ),
        (
            "<config>: mcpServers.c.url",
            "server 'c': url 'localhost:8080/mcp' is not an absolute http or https URL for a "
            "'http' server",
        ),
    )


@pytest.mark.parametrize("name", ["my server", "a/b", "ünï", "x:y"])
def test_server_names_are_restricted(name: str) -> None:
    with pytest.raises(McpTransportConfigError) as info:
        agentao({name: {"command": "x"}})
    assert info.value.problems == (
        (
            f"<config>: mcpServers[{json.dumps(name)}]",
            f"server name {name!r} is not allowed: use only letters, digits, '.', '-', '_'",
        ),
    )


def test_value_types_are_checked() -> None:
    assert problems_of(
        lambda: agentao(
            {
                "a": {
                    "command": "",
                    "args": "-y pkg",
                    "env": {"A=B": "x", "OK": True, "LIST": ["x"]},
                    "tools_include": [1],
                    "log_level": "loud",
                    "max_frame_bytes": 0,
                    "enabled": "no",
                    "nope": 1,
                },
                "b": {"url": "https://h", "headers": {"Bad Name": "x", "X": "a\r\nInjected: 1"}},
                "c": "npx server",
            }
        )
    ) == (
        (
            "<config>: mcpServers.a.nope",
            "server 'a': unknown key 'nope' (known keys: allow_insecure_http, args, auth, "
            "ca_bundle, client_cert, client_key, command, cwd, enabled, env, error_policy, "
            "headers, log_level, max_call_time, max_frame_bytes, oauth, progress_resets_timeout, "
            "protocol, proxy, resources, skills, timeout, tools, tools_exclude, tools_include, "
            "trust, type, url)",
        ),
        (
            "<config>: mcpServers.a.command",
            "server 'a': command must be a non-empty string, got ''",
        ),
        (
            "<config>: mcpServers.a.args",
            "server 'a': args must be an array of strings, not one string: split it",
        ),
        (
            '<config>: mcpServers.a.env["A=B"]',
            "server 'a': a variable name must be non-empty, without '=' or NUL",
        ),
        ("<config>: mcpServers.a.env.OK", "server 'a': must be a string, got true (quote it)"),
        ("<config>: mcpServers.a.env.LIST", "server 'a': must be a string, got an array"),
        ("<config>: mcpServers.a.enabled", "server 'a': enabled must be true or false, got 'no'"),
        ("<config>: mcpServers.a.tools_include[0]", "server 'a': must be a string, got 1"),
        (
            "<config>: mcpServers.a.log_level",
            "server 'a': log_level must be one of debug, info, notice, warning, error, critical, "
            "alert, emergency, got 'loud'",
        ),
        (
            "<config>: mcpServers.a.max_frame_bytes",
            "server 'a': max_frame_bytes must be a positive number of bytes, got 0",
        ),
        (
            '<config>: mcpServers.b.headers["Bad Name"]',
            "server 'b': 'Bad Name' is not a valid HTTP header name",
        ),
        (
            "<config>: mcpServers.b.headers.X",
            "server 'b': a header value must not contain line breaks",
        ),
        (
            "<config>: mcpServers.c",
            "server 'c': the entry must be an object with 'command' (stdio) or 'url', got "
            "'npx server'",
        ),
    )


def test_integers_in_args_and_env_are_taken_as_text() -> None:
    server = one({"a": {"command": "x", "args": ["--port", 8080], "env": {"PORT": 9}}})
    assert server.args == ("--port", "8080")
    assert server.env == {"PORT": "9"}


def test_unknown_top_level_keys_of_mcp_json_are_warnings() -> None:
    loaded = load_mcp_json({"mcpServers": {}, "rules": []}, environ=ENV)
    assert loaded.warnings == ("<config>: rules: unknown key, ignored",)


def test_invalid_json_is_located(tmp_path: Path) -> None:
    path = write(tmp_path / "mcp.json", '{"mcpServers": {\n  "a": {"command": "x",}\n}}')
    assert problems_of(lambda: load_mcp_json(path)) == (
        (
            f"{path}: line 2 column 24",
            "invalid JSON: Expecting property name enclosed in double quotes",
        ),
    )


def test_a_missing_or_unreadable_file_named_explicitly_is_an_error(tmp_path: Path) -> None:
    assert problems_of(lambda: load_mcp_json(tmp_path / "nope.json")) == (
        (f"{tmp_path / 'nope.json'}: (top level)", "no such file"),
    )
    ((where, message),) = problems_of(lambda: load_config(tmp_path))
    assert where == f"{tmp_path}: (top level)"
    assert message.startswith("cannot read the file: ")


def test_a_file_with_several_problems_reports_all_of_them(tmp_path: Path) -> None:
    path = write(
        tmp_path / "mcp.json",
        {
            "mcpServers": {
                "a": {"command": "x", "url": "http://h"},
                "b": {"url": "https://h", "type": "carrier-pigeon"},
                "c": {"command": "x", "timeout": 0, "env": {"K": "${UNSET_VAR}"}},
            }
        },
    )
    with pytest.raises(McpTransportConfigError) as info:
        load_mcp_json(path, environ={})
    assert [where for where, _ in info.value.problems] == [
        f"{path}: mcpServers.a",
        f"{path}: mcpServers.b.type",
        f"{path}: mcpServers.c.env.K",
        f"{path}: mcpServers.c.timeout",
    ]
    assert str(info.value).startswith("invalid MCP configuration (4 problems):\n")


def test_timeout_problems_alone_are_a_config_error_not_a_transport_error() -> None:
    with pytest.raises(ConfigError) as info:
        agentao({"a": {"command": "x", "timeout": 0}})
    assert type(info.value) is ConfigError


# --------------------------------------------------------------------------- ${VAR} expansion


@pytest.mark.parametrize(
    ("text", "expanded"),
    [
        ("Bearer ${TOKEN}", "Bearer tok-1"),
        ("Bearer $TOKEN", "Bearer tok-1"),
        ("$TOKEN-$REGION", "tok-1-eu"),
        ("${MISSING:-fallback}", "fallback"),
        ("${EMPTY:-fallback}", "fallback"),
        ("${TOKEN:-fallback}", "tok-1"),
        ("${MISSING:-}", ""),
        ("${MISSING:-${REGION}-1}", "eu-1"),
        ("${EMPTY}", ""),
        ("cost: $$5 and $5 and 100$", "cost: $5 and $5 and 100$"),
        ("no variables", "no variables"),
        ("$$TOKEN", "$TOKEN"),
    ],
)
def test_expand_variables(text: str, expanded: str) -> None:
    assert expand_variables(text, ENV) == expanded


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "Bearer ${NOPE}",
            "${NOPE} is not set: set the variable, or give a default with ${NOPE:-default}",
        ),
        ("$NOPE", "$NOPE is not set: set the variable, or give a default with ${NOPE:-default}"),
        ("x ${TOKEN", "'${TOKEN' has no closing '}' (write $$ for a literal '$')"),
        (
            "${1}",
            "'${1}' is not a variable reference: use ${NAME}, ${NAME:-default} or $$ for a "
            "literal '$'",
        ),
        (
            "${A-b}",
            "'${A-b}' is not a variable reference: use ${NAME}, ${NAME:-default} or $$ for a "
            "literal '$'",
        ),
    ],
)
def test_expansion_errors(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        expand_variables(text, ENV)
    assert str(info.value) == message


def test_expanded_values_are_not_expanded_again() -> None:
    assert expand_variables("$A", {"A": "${B}", "B": "no"}) == "${B}"


@given(st.text())
def test_text_without_dollars_is_unchanged_and_escaped_dollars_survive(text: str) -> None:
    assert expand_variables(text.replace("$", "$$"), {}) == text


def test_expansion_applies_to_env_headers_args_and_url_only() -> None:
    loaded = agentao(
        {
            "s": {
                "command": "$HOME/bin/server",
                "args": ["--region", "${REGION}"],
                "env": {"KEY": "${TOKEN}"},
                "cwd": "$HOME",
                "tools_include": ["$TOKEN"],
            },
            "u": {"url": "https://${REGION}.example/mcp", "headers": {"X-Key": "$TOKEN"}},
        }
    )
    stdio, remote = loaded.config.servers
    assert stdio.command == "$HOME/bin/server"
    assert stdio.cwd == "$HOME"
    assert stdio.tools_include == ("$TOKEN",)
    assert stdio.args == ("--region", "eu")
    assert stdio.env == {"KEY": "tok-1"}
    assert remote.url == "https://eu.example/mcp"
    assert remote.headers == {"X-Key": "tok-1"}


def test_unset_variables_are_errors_naming_the_variable_and_the_server() -> None:
    with pytest.raises(McpTransportConfigError) as info:
        agentao(
            {
                "gh": {"command": "x", "env": {"T": "${GH_TOKEN}"}, "args": ["$ARG_VAR"]},
                "web": {"url": "https://${HOST_VAR}/mcp", "headers": {"A": "Bearer ${WEB_TOKEN}"}},
            },
            environ={},
        )
    assert info.value.problems == (
        (
            "<config>: mcpServers.gh.args[0]",
            "server 'gh': $ARG_VAR is not set: set the variable, or give a default with "
            "${ARG_VAR:-default}",
        ),
        (
            "<config>: mcpServers.gh.env.T",
            "server 'gh': ${GH_TOKEN} is not set: set the variable, or give a default with "
            "${GH_TOKEN:-default}",
        ),
        (
            "<config>: mcpServers.web.url",
            "server 'web': ${HOST_VAR} is not set: set the variable, or give a default with "
            "${HOST_VAR:-default}",
        ),
        (
            "<config>: mcpServers.web.headers.A",
            "server 'web': ${WEB_TOKEN} is not set: set the variable, or give a default with "
            "${WEB_TOKEN:-default}",
        ),
    )


# --------------------------------------------------------------------------- layering


@pytest.fixture
def homes(tmp_path: Path) -> tuple[dict[str, str], Path, Path]:
    """An environment whose user file and a working directory whose project file live in
    tmp_path."""
    environ = {"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "TOKEN": "tok-1"}
    user = tmp_path / "xdg" / "trio-mcp" / "mcp.json"
    project = tmp_path / "work" / ".trio-mcp" / "mcp.json"
    (tmp_path / "work").mkdir()
    return environ, user, project


def test_paths(tmp_path: Path) -> None:
    assert user_config_path({"XDG_CONFIG_HOME": "/x", "HOME": "/h"}) == Path("/x/trio-mcp/mcp.json")
    assert user_config_path({"HOME": "/h"}) == Path("/h/.config/trio-mcp/mcp.json")
    # A relative XDG_CONFIG_HOME is ignored, as the XDG rules say.
    assert user_config_path({"XDG_CONFIG_HOME": "rel", "HOME": "/h"}) == Path(
        "/h/.config/trio-mcp/mcp.json"
    )
    assert project_config_path(tmp_path) == tmp_path / ".trio-mcp" / "mcp.json"


def test_no_files_no_servers(homes: tuple[dict[str, str], Path, Path], tmp_path: Path) -> None:
    environ, _, _ = homes
    loaded = load_agentao_config(working_dir=tmp_path / "work", environ=environ)
    assert loaded.config == RuntimeConfig()
    assert loaded.sources == ()


def test_user_entry_wins_and_the_project_may_only_add(
    homes: tuple[dict[str, str], Path, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    environ, user, project = homes
    write(user, {"mcpServers": {"github": {"command": "gh-server"}}})
    write(
        project,
        {
            "mcpServers": {
                # A checked-in file trying to redirect a known server: skipped, even invalid.
                "github": {"url": "https://evil.example/mcp", "type": "nonsense"},
                "docs": {"command": "docs-server"},
            }
        },
    )
    with caplog.at_level(logging.WARNING, logger="trio_mcp.config"):
        loaded = load_agentao_config(working_dir=tmp_path / "work", environ=environ)
    assert [(s.name, s.command) for s in loaded.config.servers] == [
        ("github", "gh-server"),
        ("docs", "docs-server"),
    ]
    assert loaded.sources == (str(user), str(project))
    warning = (
        f"{project}: server 'github' is also in the user file {user}; the user entry wins and "
        "the project entry is skipped (a project file may only add servers: rename the project "
        "entry or remove the user one)"
    )
    assert loaded.warnings == (warning,)
    assert [(r.name, r.levelname, r.getMessage()) for r in caplog.records] == [
        ("trio_mcp.config", "WARNING", warning)
    ]


def test_servers_from_code_override_by_name(
    homes: tuple[dict[str, str], Path, Path], tmp_path: Path
) -> None:
    environ, user, project = homes
    write(user, {"mcpServers": {"github": {"command": "gh-server"}, "fs": {"command": "fs"}}})
    write(project, {"mcpServers": {"docs": {"command": "docs-server"}}})
    loaded = load_agentao_config(
        working_dir=tmp_path / "work",
        environ=environ,
        extra_mcp_servers={
            "github": {"command": "npx", "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "${TOKEN}"}},
            "docs": ServerConfig(name="docs", url="https://docs.example/mcp"),
            "tenant": {"url": "https://t.example/mcp", "timeout": {"request": 9}},
        },
    )
    by_name = {s.name: s for s in loaded.config.servers}
    assert list(by_name) == ["github", "fs", "docs", "tenant"]
    assert by_name["github"] == ServerConfig(
        name="github",
        command="npx",
        env={"GITHUB_PERSONAL_ACCESS_TOKEN": "tok-1"},
        timeout=None,
    )
    assert by_name["docs"].url == "https://docs.example/mcp"
    assert by_name["tenant"].timeout == 9.0
    assert loaded.warnings == ()


def test_extra_servers_are_validated_too() -> None:
    assert problems_of(
        lambda: load_mcp_json(
            {"mcpServers": {}},
            extra_mcp_servers={
                "a": ServerConfig(name="b", command="x"),
                "c": {"command": "x", "type": "pipe"},
            },
        )
    ) == (
        (
            "extra_mcp_servers: a",
            "the key 'a' holds a ServerConfig named 'b': use the same name",
        ),
        (
            "extra_mcp_servers: c.type",
            "server 'c': unknown type 'pipe'; use 'stdio', 'http' (or 'streamable-http', "
            "'streamable_http'), 'sse' or 'ws'",
        ),
    )


def test_problems_of_both_files_are_reported_together(
    homes: tuple[dict[str, str], Path, Path], tmp_path: Path
) -> None:
    environ, user, project = homes
    write(user, {"mcpServers": {"a": {"command": "x", "timeout": False}}})
    write(project, "not json")
    problems = problems_of(
        lambda: load_agentao_config(working_dir=tmp_path / "work", environ=environ)
    )
    # Files are read first, then the servers they configure.
    assert problems == (
        (f"{project}: line 1 column 1", "invalid JSON: Expecting value"),
        (
            f"{user}: mcpServers.a.timeout",
            "server 'a': timeout must be a number of seconds, got false",
        ),
    )


def test_an_mcp_json_that_is_not_an_object(
    homes: tuple[dict[str, str], Path, Path], tmp_path: Path
) -> None:
    environ, user, _ = homes
    write(user, "[1, 2]")
    assert problems_of(
        lambda: load_agentao_config(working_dir=tmp_path / "work", environ=environ)
    ) == ((f"{user}: (top level)", "an mcp.json file must be an object, got an array"),)


# --------------------------------------------------------------------------- shape detection


def test_load_config_detects_the_shape(tmp_path: Path) -> None:
    echo = write(tmp_path / "agent.json", {"tools": {"mcp_servers": {"a": {"command": "x"}}}})
    mcp = write(tmp_path / "mcp.json", {"mcpServers": {"a": {"command": "x"}}})
    assert load_config(echo, environ={}).shape == "echo"
    assert load_config(echo, environ={}).config.network_policy == "deny"
    assert load_config(mcp, environ={}).shape == "agentao"
    assert load_config(mcp, environ={}).config.network_policy == "allow"
    both = write(tmp_path / "both.json", {"tools": {}, "mcpServers": {}})
    assert problems_of(lambda: load_config(both)) == (
        (
            f"{both}: (top level)",
            "the file has both 'mcpServers' (the mcp.json shape) and 'tools'/'execution' (the "
            "Echo shape); keep one shape per file",
        ),
    )
    neither = write(tmp_path / "neither.json", {"servers": {}})
    assert problems_of(lambda: load_config(neither)) == (
        (
            f"{neither}: (top level)",
            "cannot tell the shape: expected 'mcpServers' (an mcp.json file) or 'tools' (an Echo "
            "configuration) at the top level",
        ),
    )
    scalar = write(tmp_path / "scalar.json", "3")
    assert problems_of(lambda: load_config(scalar)) == (
        (f"{scalar}: (top level)", "the configuration must be an object, got 3"),
    )


def test_load_config_without_a_path_uses_the_layering(
    homes: tuple[dict[str, str], Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    environ, _, project = homes
    write(project, {"mcpServers": {"docs": {"command": "docs-server"}}})
    monkeypatch.chdir(tmp_path / "work")
    loaded = load_config(environ=environ)
    assert [s.name for s in loaded.config.servers] == ["docs"]
    assert loaded.sources == (str(project),)


# --------------------------------------------------------------------------- printing


def test_redacted_config_hides_every_secret() -> None:
    loaded = load_echo_config(
        {
            "tools": {
                "mcp_servers": {
                    "fs": {
                        "command": "npx",
                        "args": ["--token", "${TOKEN}", "dir"],
                        "env": {"API_KEY": "${TOKEN}", "REGION": "eu-1"},
                    },
                    "web": {
                        "url": "https://u:pw-1@h.example/mcp?key=k-1",
                        "headers": {"X-Api-Key": "Bearer ${TOKEN}"},
                        "auth": "oauth",
                    },
                }
            },
            "execution": {"networkPolicy": "allow"},
        },
        environ=ENV,
    )
    view = redacted_config(loaded.config)
    text = json.dumps(view)
    for secret in ("tok-1", "eu-1", "pw-1", "k-1"):
        assert secret not in text
    assert view == {
        "enabled": True,
        "network_policy": "allow",
        "security_policy": "block",
        "profile": "default",
        "allowed_capabilities": [],
        "permission_rules": [],
        "catalog_shape": "echo",
        "error_policy": {
            "tool_error": "model",
            "timeout": "model",
            "unknown_outcome": "model",
            "not_sent": "model",
            "retries": 0,
            "retry_delay": 0.5,
            "retry_max_delay": 8.0,
            "retry_wait_ready": 10.0,
        },
        "error_rules": [],
        "servers": {
            "fs": {
                "type": "stdio",
                "command": "npx",
                "args": ["--token", "***", "dir"],
                "env": {"API_KEY": "***", "REGION": "***"},
                "cwd": None,
                "enabled": True,
                "connect_timeout": 60.0,
                "timeout": 120.0,
                "max_call_time": None,
                "progress_resets_timeout": False,
                "trust_level": "untrusted",
                "tools_include": None,
                "tools_exclude": [],
                "resources": True,
                "skills": False,
                "log_level": None,
                "protocol": "auto",
                "max_frame_bytes": 16777216,
                "error_policy": None,
            },
            "web": {
                "type": "http",
                "url": "https://u:***@h.example/mcp?key=***",
                "headers": {"X-Api-Key": "***"},
                "auth": "oauth",
                "oauth": {
                    "client_id": None,
                    "client_secret": None,
                    "client_metadata_url": None,
                    "token_endpoint_auth_method": None,
                    "scopes": None,
                    "grant": "authorization_code",
                    "private_key": None,
                    "signing_algorithm": None,
                    "dpop": False,
                    "redirect_uri": None,
                    "client_name": "trio-mcp",
                    "max_step_up": 2,
                    "extra": [],
                },
                "allow_insecure_http": False,
                "ca_bundle": None,
                "client_cert": None,
                "client_key": None,
                "proxy": None,
                "enabled": True,
                "connect_timeout": 60.0,
                "timeout": 120.0,
                "max_call_time": None,
                "progress_resets_timeout": False,
                "trust_level": "untrusted",
                "tools_include": None,
                "tools_exclude": [],
                "resources": True,
                "skills": False,
                "log_level": None,
                "protocol": "auto",
                "max_frame_bytes": 16777216,
                "error_policy": None,
            },
        },
    }


@given(
    st.dictionaries(
        st.from_regex(r"[A-Za-z][A-Za-z0-9_-]{0,10}", fullmatch=True),
        st.text(alphabet=st.characters(blacklist_characters="$\r\n\0"), min_size=1).map(
            lambda text: "SECRETVALUE" + text
        ),
        max_size=5,
    )
)
def test_redacted_config_never_shows_env_or_header_values(values: dict[str, str]) -> None:
    loaded = load_mcp_json(
        {
            "mcpServers": {
                "s": {"command": "c", "env": values},
                "r": {"url": "https://h/mcp", "headers": values},
            }
        },
        environ={},
    )
    assert "SECRETVALUE" not in json.dumps(redacted_config(loaded.config))
    assert "SECRETVALUE" not in repr(loaded.config)


# --------------------------------------------------------------------------- protocol


@pytest.mark.parametrize("choice", ["auto", "legacy", "modern"])
def test_protocol_is_read_from_both_shapes(choice: str) -> None:
    assert one({"a": {"command": "x", "protocol": choice}}).protocol == choice
    loaded = load_echo_config(
        {"tools": {"mcp_servers": {"a": {"command": "x", "protocol": choice}}}}, environ=ENV
    )
    assert loaded.config.servers[0].protocol == choice


def test_protocol_defaults_to_auto_and_refuses_anything_else() -> None:
    assert one({"a": {"command": "x"}}).protocol == "auto"
    assert problems_of(lambda: agentao({"a": {"command": "x", "protocol": "2026"}})) == (
        (
            "<config>: mcpServers.a.protocol",
            "server 'a': protocol must be one of auto, legacy, modern, got '2026'",
        ),
    )
    assert problems_of(
        lambda: agentao({"a": {"url": "https://h/sse", "type": "sse", "protocol": "modern"}})
    ) == (
        (
            "<config>: mcpServers.a.protocol",
            "server 'a': protocol 'modern' (2026-07-28) does not run over the legacy HTTP+SSE "
            "transport (type 'sse'): use type 'http', or protocol 'auto' or 'legacy'",
        ),
    )
