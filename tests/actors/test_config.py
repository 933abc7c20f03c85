"""The typed configuration: ServerConfig and RuntimeConfig validate themselves and keep secrets
out of their repr."""

from __future__ import annotations

import math
from typing import Any

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from trio_mcp.actors.config._backoff import RetryPolicy
from trio_mcp.actors.config._config import (
    DEFAULT_CALL_TIMEOUT,
    DEFAULT_CONNECT_TIMEOUT,
    RuntimeConfig,
    ServerConfig,
    TransportKind,
    redact_args,
    redact_url,
)
from trio_mcp.actors.runtime._callbacks import HostCallbacks
from trio_mcp.actors.runtime._events import ServerState, ServerStateChanged
from trio_mcp.actors.runtime._registry import Registry
from trio_mcp.actors.runtime._runtime import open_runtime
from trio_mcp.actors.runtime._supervisor import ServerSupervisor
from trio_mcp.protocol import ConfigError, ConnectError, McpTransportConfigError, ServerUnavailable


def test_defaults() -> None:
    server = ServerConfig(name="fs", command="npx")
    assert server.transport_kind is TransportKind.STDIO
    assert server.connect_timeout == DEFAULT_CONNECT_TIMEOUT == 60.0
    assert server.timeout == DEFAULT_CALL_TIMEOUT == 120.0
    assert server.trust_level == "untrusted"
    assert server.auth is None
    config = RuntimeConfig(servers=(server,))
    # Programmatic configs allow URL servers; the Echo loader applies Echo's "deny" default.
    assert config.network_policy == "allow"
    assert config.security_policy == "block"
    assert config.enabled is True


@pytest.mark.parametrize(
    ("kind", "is_url"),
    [
        (TransportKind.STDIO, False),
        (TransportKind.HTTP, True),
        (TransportKind.SSE, True),
        (TransportKind.WS, True),
        (TransportKind.CUSTOM, False),
    ],
)
def test_transport_kind_is_url(kind: TransportKind, is_url: bool) -> None:
    assert kind.is_url is is_url


def test_both_url_and_command_is_refused() -> None:
    with pytest.raises(McpTransportConfigError) as info:
        ServerConfig(name="x", command="a", url="http://h/mcp")
    message = (
        "server 'x': give exactly one of 'command' (stdio) and 'url' (HTTP, SSE or WebSocket); "
        "it has both"
    )
    assert str(info.value) == message
    assert info.value.problems == (("", message),)


def test_neither_url_nor_command_is_refused() -> None:
    with pytest.raises(McpTransportConfigError, match=r"; it has neither$"):
        ServerConfig(name="x")


def test_type_without_its_key_is_refused() -> None:
    with pytest.raises(McpTransportConfigError) as info:
        ServerConfig(name="x", type=TransportKind.SSE, command="a")
    assert info.value.problems == (("url", "server 'x': type 'sse' needs 'url'"),)
    with pytest.raises(McpTransportConfigError) as info:
        ServerConfig(name="x", type=TransportKind.STDIO, url="http://h")
    assert info.value.problems == (("command", "server 'x': type 'stdio' needs 'command'"),)


def test_custom_needs_a_factory() -> None:
    with pytest.raises(McpTransportConfigError, match="type 'custom' needs a transport_factory"):
        ServerConfig(name="x", type=TransportKind.CUSTOM)


@pytest.mark.parametrize("name", ["my server", "héllo", "a/b", "", "x:y"])
def test_server_names_are_restricted(name: str) -> None:
    with pytest.raises(McpTransportConfigError) as info:
        ServerConfig(name=name, command="a")
    assert str(info.value) == (
        f"server name {name!r} is not allowed: use only letters, digits, '.', '-', '_'"
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (True, "timeout must be a number of seconds, got True"),
        ("30", "timeout must be a number of seconds, got '30'"),
        (0, "timeout must be a finite number of seconds > 0, got 0"),
        (-1.5, "timeout must be a finite number of seconds > 0, got -1.5"),
        (math.inf, "timeout must be a finite number of seconds > 0, got inf"),
        (math.nan, "timeout must be a finite number of seconds > 0, got nan"),
    ],
)
def test_bad_timeouts_are_refused(value: object, message: str) -> None:
    with pytest.raises(McpTransportConfigError) as info:
        ServerConfig(name="x", command="a", timeout=value)  # type: ignore[arg-type]
    assert info.value.problems == (("timeout", f"server 'x': {message}"),)


def test_no_call_timeout_is_allowed_but_a_connect_timeout_is_required() -> None:
    assert ServerConfig(name="x", command="a", timeout=None).timeout is None
    with pytest.raises(McpTransportConfigError, match="connect_timeout must be a number"):
        ServerConfig(name="x", command="a", connect_timeout=None)  # type: ignore[arg-type]


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(McpTransportConfigError) as info:
        ServerConfig(
            name="x",
            command="a",
            connect_timeout=0,
            timeout=True,
            trust_level="sometimes",  # type: ignore[arg-type]
            auth="oauth",
        )
    assert [key for key, _ in info.value.problems] == [
        "connect_timeout",
        "timeout",
        "trust_level",
        "auth",
    ]
    assert info.value.problems[3] == (
        "auth",
        "server 'x': auth applies to URL servers only, not to a 'stdio' server",
    )
    assert str(info.value).count("server 'x':") == 4


def test_auth_values() -> None:
    assert ServerConfig(name="x", url="https://h/mcp", auth="oauth").auth == "oauth"
    with pytest.raises(McpTransportConfigError) as info:
        ServerConfig(name="x", url="https://h/mcp", auth="basic")
    assert info.value.problems == (
        ("auth", "server 'x': auth must be 'oauth' (or absent), got 'basic'"),
    )


def test_policies_are_checked() -> None:
    assert RuntimeConfig(network_policy="deny").network_policy == "deny"
    with pytest.raises(
        ConfigError, match=r"^network_policy must be 'deny' or 'allow', got 'open'$"
    ):
        RuntimeConfig(network_policy="open")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"^security_policy must be 'block' or 'warn', got 'x'$"):
        RuntimeConfig(security_policy="x")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (True, "shutdown_grace must be a number of seconds, got True"),
        ("10", "shutdown_grace must be a number of seconds, got '10'"),
        (None, "shutdown_grace must be a number of seconds, got None"),
        (0, "shutdown_grace must be a finite number of seconds > 0, got 0"),
        (math.inf, "shutdown_grace must be a finite number of seconds > 0, got inf"),
        (math.nan, "shutdown_grace must be a finite number of seconds > 0, got nan"),
    ],
)
def test_a_bad_shutdown_grace_is_refused_like_a_timeout(value: object, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        RuntimeConfig(shutdown_grace=value)  # type: ignore[arg-type]
    assert str(info.value) == message
    assert RuntimeConfig(shutdown_grace=0.5).shutdown_grace == 0.5


def test_a_name_used_twice_is_refused() -> None:
    with pytest.raises(McpTransportConfigError, match="server 'a' is configured twice"):
        RuntimeConfig(
            servers=(ServerConfig(name="a", command="x"), ServerConfig(name="a", url="https://h"))
        )


# --------------------------------------------------------------------------- redaction


def test_repr_hides_secrets() -> None:
    server = ServerConfig(
        name="gh",
        command="npx",
        args=("--token", "tok-123", "--api-key=key-456", "--verbose", "https://u:pw-789@h/x?k=q-1"),
        env={"GITHUB_TOKEN": "ghp-secret", "REGION": "eu-west-1"},
    )
    text = repr(server)
    for secret in ("tok-123", "key-456", "pw-789", "q-1", "ghp-secret", "eu-west-1"):
        assert secret not in text
    assert "'GITHUB_TOKEN': '***'" in text
    assert "'--api-key=***'" in text
    remote = ServerConfig(
        name="r", url="https://h/mcp?api_key=abc123", headers={"Authorization": "Bearer zzz"}
    )
    assert "abc123" not in repr(remote)
    assert "zzz" not in repr(remote)
    assert "url='https://h/mcp?api_key=***'" in repr(remote)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://h.example/mcp", "https://h.example/mcp"),
        ("https://user:pw@h.example:8443/mcp", "https://user:***@h.example:8443/mcp"),
        ("https://h/mcp?key=1&mode=x", "https://h/mcp?key=***&mode=***"),
        ("http://[::1/mcp?token=x", "http://[::1/mcp?***"),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_redact_args() -> None:
    assert redact_args(["-y", "pkg", "--password", "p", "--secret=s", "--port", "8080"]) == [
        "-y",
        "pkg",
        "--password",
        "***",
        "--secret=***",
        "--port",
        "8080",
    ]


@given(
    st.dictionaries(
        st.from_regex(r"[A-Za-z][A-Za-z0-9_-]{0,10}", fullmatch=True),
        st.text(min_size=1).map(lambda t: "SECRETVALUE" + t),
        max_size=5,
    )
)
def test_repr_never_shows_env_or_header_values(values: dict[str, str]) -> None:
    stdio = ServerConfig(name="s", command="c", env=values)
    remote = ServerConfig(name="r", url="https://h/mcp", headers=values)
    assert "SECRETVALUE" not in repr(stdio)
    assert "SECRETVALUE" not in repr(remote)


# --------------------------------------------------------------------------- the network policy

SKIPPED = "skipped: execution.networkPolicy is 'deny' (set it to 'allow' to connect URL servers)"


class _Published:
    def __init__(self) -> None:
        self.events: list[object] = []

    def publish(self, event: object) -> None:
        self.events.append(event)


async def test_deny_disables_a_url_server_and_says_why() -> None:
    events = _Published()
    published = events.events

    def no_transport(config: ServerConfig, sink: Any) -> Any:
        raise AssertionError(f"{config.name} must not be connected")

    supervisor = ServerSupervisor(
        config=ServerConfig(name="web", url="https://h.example/mcp"),
        runtime=RuntimeConfig(network_policy="deny"),
        registry=Registry(),
        callbacks=HostCallbacks(),
        open_transport=no_transport,
        events=events,
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(supervisor.run)
        await supervisor.wait_state(lambda state: state is ServerState.DISABLED)
        status = supervisor.status()
        with pytest.raises(ServerUnavailable) as info:
            supervisor.ready_session()
        nursery.cancel_scope.cancel()
    assert published[0] == ServerStateChanged(
        server="web",
        old=ServerState.CONNECTING,
        new=ServerState.DISABLED,
        generation=0,
        reason=SKIPPED,
    )
    assert (status.state, status.transport, status.last_error) == (
        ServerState.DISABLED,
        "http",
        SKIPPED,
    )
    assert str(info.value) == f"server 'web' is disabled ({SKIPPED})"


async def test_deny_skips_url_servers_only_and_allow_connects_them() -> None:
    attempts: list[str] = []

    def record(config: ServerConfig, sink: Any) -> Any:
        attempts.append(config.name)
        raise ConnectError(f"test: no network for {config.name}")

    servers = (
        ServerConfig(name="web", url="https://h.example/mcp"),
        ServerConfig(name="events", url="https://h.example/sse", type=TransportKind.SSE),
        ServerConfig(name="socket", url="wss://h.example/ws", type=TransportKind.WS),
        ServerConfig(name="local", command="local-server"),
    )
    no_retry = RetryPolicy(first_connect_delays=(), park_probe_interval=None)
    for policy, expected_attempts in (
        ("deny", ["local"]),
        ("allow", ["web", "events", "socket", "local"]),
    ):
        attempts.clear()
        config = RuntimeConfig(servers=servers, network_policy=policy, retry=no_retry)  # type: ignore[arg-type]
        with trio.fail_after(10):
            async with open_runtime(config, open_transport=record) as rt:
                statuses = await rt.wait_ready()
        assert sorted(attempts) == sorted(expected_attempts)
        states = {name: status.state for name, status in statuses.items()}
        if policy == "deny":
            assert states == {
                "web": ServerState.DISABLED,
                "events": ServerState.DISABLED,
                "socket": ServerState.DISABLED,
                "local": ServerState.FAILED,
            }
            assert {statuses[n].last_error for n in ("web", "events", "socket")} == {SKIPPED}
        else:
            assert set(states.values()) == {ServerState.FAILED}
