"""A variable that is set but empty (DESIGN.md "Configuration"): it counts as unset in
``headers`` and ``url`` (no request goes out with ``Bearer ``), becomes ``""`` with a warning in
``args``, and is passed on as it is in ``env``; ``${VAR:-default}`` takes the default in all four
places."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from trio_mcp.actors.config._loader import load_echo_config, load_mcp_json
from trio_mcp.protocol import ConfigError, McpTransportConfigError

ENV = {"EMPTY": "", "TOKEN": "tok-1"}
SOURCE = "<config>"


def load(entry: dict[str, Any]) -> Any:
    return load_mcp_json({"mcpServers": {"s": entry}}, environ=ENV)


def problems(entry: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    with pytest.raises(ConfigError) as info:
        load(entry)
    assert isinstance(info.value, McpTransportConfigError)  # headers and url are transport keys
    found: tuple[tuple[str, str], ...] = info.value.problems
    return found


def empty_unset(reference: str, name: str) -> str:
    return (
        f"server 's': {reference} is set but empty, which counts as unset here (an empty "
        f"value is never sent): set it, or give a default with ${{{name}:-default}}"
    )


@pytest.mark.parametrize("reference", ["${EMPTY}", "$EMPTY"])
def test_an_empty_variable_in_a_header_is_an_error(reference: str) -> None:
    entry = {"url": "https://h.example/mcp", "headers": {"Authorization": f"Bearer {reference}"}}
    assert problems(entry) == (
        (f"{SOURCE}: mcpServers.s.headers.Authorization", empty_unset(reference, "EMPTY")),
    )


@pytest.mark.parametrize("reference", ["${EMPTY}", "$EMPTY"])
def test_an_empty_variable_in_the_url_is_an_error(reference: str) -> None:
    entry = {"url": f"https://h.example/mcp?key={reference}"}
    assert problems(entry) == ((f"{SOURCE}: mcpServers.s.url", empty_unset(reference, "EMPTY")),)


def test_an_empty_default_chain_names_the_last_variable() -> None:
    entry = {"url": "https://h.example/mcp", "headers": {"X-Key": "${EMPTY:-${EMPTY}}"}}
    assert problems(entry) == (
        (f"{SOURCE}: mcpServers.s.headers.X-Key", empty_unset("${EMPTY}", "EMPTY")),
    )


def test_a_default_replaces_an_empty_variable_in_headers_and_url() -> None:
    (server,) = load(
        {
            "url": "https://${EMPTY:-h.example}/mcp",
            "headers": {"Authorization": "Bearer ${EMPTY:-${TOKEN}}"},
        }
    ).config.servers
    assert server.url == "https://h.example/mcp"
    assert server.headers == {"Authorization": "Bearer tok-1"}


def test_an_explicitly_empty_default_is_taken_at_its_word() -> None:
    (server,) = load(
        {"url": "https://h.example/mcp", "headers": {"X-Trace": "${EMPTY:-}"}}
    ).config.servers
    assert server.headers == {"X-Trace": ""}


@pytest.mark.parametrize("reference", ["${EMPTY}", "$EMPTY"])
def test_an_empty_variable_in_args_becomes_empty_with_a_warning(
    reference: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="trio_mcp.config"):
        loaded = load({"command": "srv", "args": ["--dir", reference, f"--name={reference}"]})
    (server,) = loaded.config.servers
    assert server.args == ("--dir", "", "--name=")

    def warning(index: int) -> str:
        return (
            f"{SOURCE}: mcpServers.s.args[{index}]: server 's': {reference} is set but empty: "
            "the argument gets '' in its place (set the variable, or give a default with "
            "${EMPTY:-default})"
        )

    assert loaded.warnings == (warning(1), warning(2))
    assert [r.getMessage() for r in caplog.records] == [warning(1), warning(2)]


def test_a_default_replaces_an_empty_variable_in_args_without_a_warning() -> None:
    loaded = load({"command": "srv", "args": ["${EMPTY:-fallback}", "${EMPTY:-}"]})
    assert loaded.config.servers[0].args == ("fallback", "")
    assert loaded.warnings == ()


def test_an_empty_variable_in_env_is_passed_on_as_it_is() -> None:
    loaded = load({"command": "srv", "env": {"A": "${EMPTY}", "B": "$EMPTY", "C": "${EMPTY:-d}"}})
    assert loaded.config.servers[0].env == {"A": "", "B": "", "C": "d"}
    assert loaded.warnings == ()


def test_the_echo_shape_follows_the_same_rules() -> None:
    document = {
        "tools": {
            "mcp_servers": {
                "s": {"url": "https://h.example/mcp", "headers": {"Authorization": "Bearer $EMPTY"}}
            }
        }
    }
    with pytest.raises(McpTransportConfigError) as info:
        load_echo_config(document, environ=ENV)
    assert info.value.problems == (
        (f"{SOURCE}: tools.mcp_servers.s.headers.Authorization", empty_unset("$EMPTY", "EMPTY")),
    )


def test_one_warning_per_variable_and_argument() -> None:
    loaded = load({"command": "srv", "args": ["${EMPTY}:${EMPTY}"]})
    assert loaded.config.servers[0].args == (":",)
    assert len(loaded.warnings) == 1
