"""The conformance client's scenarios, driven against the in-memory fake server.

``make conformance`` runs the same code against the official suite's mock servers over
Streamable HTTP; these tests pin what each scenario sends, without the network or Node.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from trio_mcp.actors import ServerConfig, TransportKind
from trio_mcp.actors.testing import FakeServer, FakeTool, ToolContext
from trio_mcp.transports.oauth import Grant

from .client import (
    SCENARIOS,
    SERVER,
    ScenarioFailed,
    form_defaults,
    http_server,
    oauth_settings,
    run_scenario,
)

Clock = trio.testing.MockClock

#: The form the suite's elicitation scenario sends (SEP-1034): every field has a default.
DEFAULTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {
            "type": "string",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "description": "Verified", "default": True},
    },
    "required": [],
}

#: A JSON Schema 2020-12 inputSchema with the keywords a client must not lose.
RICH_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addr",
            "type": "object",
            "properties": {"street": {"type": "string"}},
        }
    },
    "properties": {
        "home": {"$ref": "#/$defs/address"},
        "kind": {"anyOf": [{"const": "a"}, {"const": "b"}]},
    },
    "allOf": [{"required": ["home"]}],
    "if": {"properties": {"kind": {"const": "a"}}},
    "then": {"required": ["kind"]},
    "else": {},
    "additionalProperties": False,
}


def server(fake: FakeServer) -> ServerConfig:
    return fake.server_config(name=SERVER)


# --------------------------------------------------------------------------- form defaults


def test_form_defaults_takes_every_default_of_the_requested_schema() -> None:
    assert form_defaults(DEFAULTS_SCHEMA) == {
        "name": "John Doe",
        "age": 30,
        "score": 95.5,
        "status": "active",
        "verified": True,
    }


@pytest.mark.parametrize(
    "schema",
    [{}, {"properties": []}, {"properties": {"a": "not a schema"}}, {"properties": {"a": {}}}],
)
def test_form_defaults_of_a_schema_without_usable_defaults_is_empty(
    schema: Mapping[str, Any],
) -> None:
    assert form_defaults(schema) == {}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=8,
)


@given(
    st.dictionaries(
        st.text(max_size=6),
        st.tuples(st.booleans(), json_values),
        max_size=6,
    )
)
def test_form_defaults_keeps_exactly_the_properties_with_a_default(
    fields: dict[str, tuple[bool, Any]],
) -> None:
    properties = {
        name: ({"type": "string", "default": value} if has else {"type": "string"})
        for name, (has, value) in fields.items()
    }
    expected = {name: value for name, (has, value) in fields.items() if has}
    assert form_defaults({"type": "object", "properties": properties}) == expected


# --------------------------------------------------------------------------- scenarios


def _makefile_list(name: str) -> set[str]:
    """The words of the Makefile variable ``name`` (continued lines joined)."""
    text = (Path(__file__).parents[2] / "Makefile").read_text().replace("\\\n", " ")
    match = re.search(rf"^{name}\s*:=(.*)$", text, re.MULTILINE)
    assert match is not None, name
    return set(match.group(1).split())


def test_the_client_knows_the_scenarios_make_conformance_runs() -> None:
    # Every scenario the target runs and expects to pass has its steps here; the OAuth ones
    # sign in and call test-tool (the steps of every auth/ scenario).
    runs = _makefile_list("CONFORMANCE_SCENARIOS") | _makefile_list("CONFORMANCE_MODERN")
    assert set(SCENARIOS) == runs
    assert "sep-2322-client-request-state" in runs and "http-custom-headers" in runs
    oauth = (
        _makefile_list("CONFORMANCE_OAUTH")
        | _makefile_list("CONFORMANCE_OAUTH_DRAFT")
        | _makefile_list("CONFORMANCE_OAUTH_2025_03")
        | _makefile_list("CONFORMANCE_EXTENSIONS")
    )
    assert len(oauth) == 14 + 11 + 2 + 4
    assert all(name.startswith("auth/") and name not in SCENARIOS for name in oauth)


def test_the_baseline_keeps_only_the_extensions_not_implemented() -> None:
    baseline = (Path(__file__).parent / "expected-failures.yaml").read_text()
    listed = set(re.findall(r"^  - (\S+)$", baseline, re.MULTILINE))
    assert (
        listed
        == _makefile_list("CONFORMANCE_EXTENSIONS_EXPECTED")
        == {
            "auth/enterprise-managed-authorization",
            "auth/wif-jwt-bearer",
        }
    )


def test_oauth_settings_come_from_the_suite_context() -> None:
    settings = oauth_settings(
        "auth/client-credentials-jwt",
        {"client_id": "c", "private_key_pem": "PEM", "signing_algorithm": "ES256"},
    )
    assert (settings.client_id, settings.grant, settings.token_endpoint_auth_method) == (
        "c",
        Grant.CLIENT_CREDENTIALS,
        "private_key_jwt",
    )
    assert settings.private_key == "PEM" and settings.signing_algorithm == "ES256"
    pre = oauth_settings("auth/pre-registration", {"client_id": "p", "client_secret": "s"})
    assert (pre.client_id, pre.client_secret, pre.grant) == ("p", "s", Grant.AUTHORIZATION_CODE)
    assert oauth_settings("auth/dpop-nonce", {}).dpop
    assert not oauth_settings("auth/metadata-default", {}).dpop


def test_the_suite_server_is_streamable_http() -> None:
    config = http_server("http://localhost:4242/mcp")
    assert (config.name, config.transport_kind, config.url) == (
        "conformance",
        TransportKind.HTTP,
        "http://localhost:4242/mcp",
    )


def test_an_auth_scenario_configures_the_server_with_oauth() -> None:
    config = http_server("http://localhost:4242/mcp", "auth/pre-registration", {"client_id": "p"})
    assert config.auth == "oauth"
    assert config.oauth_settings is not None and config.oauth_settings.client_id == "p"
    assert http_server("http://localhost:4242/mcp", "tools_call").oauth_settings is None


async def test_tools_call_adds_two_numbers(autojump_clock: Clock) -> None:
    fake = FakeServer(name="mock", tools=[FakeTool("add_numbers")])
    await run_scenario("tools_call", server(fake))
    # the probe first: the (legacy) fake refuses it, and the client speaks 2025-11-25
    assert [m for m, _ in fake.requests] == [
        "server/discover",
        "initialize",
        "tools/list",
        "tools/call",
    ]
    assert fake.requests[-1][1] == {"name": "add_numbers", "arguments": {"a": 2, "b": 3}}


async def test_initialize_and_unknown_scenarios_only_connect(autojump_clock: Clock) -> None:
    for scenario in ("initialize", "auth/metadata-default", ""):
        fake = FakeServer(name="mock", tools=[FakeTool("add_numbers")])
        await run_scenario(scenario, server(fake))
        assert [m for m, _ in fake.requests] == ["server/discover", "initialize", "tools/list"]
        params = fake.requests[1][1]
        assert params is not None
        assert params["protocolVersion"] == "2025-11-25"
        assert params["clientInfo"]["name"] == "trio-mcp-conformance"
        tasks: dict[str, Any] = {
            "list": {},
            "cancel": {},
            "requests": {"elicitation": {"create": {}}},
        }
        assert params["capabilities"] == {"elicitation": {"form": {}}, "tasks": tasks}


async def test_tools_call_at_2026_07_28_speaks_it_without_a_handshake(
    autojump_clock: Clock,
) -> None:
    fake = FakeServer(name="mock", era="modern", tools=[FakeTool("add_numbers")])
    await run_scenario("tools_call", server(fake), "2026-07-28")
    assert [m for m, _ in fake.requests] == [
        "server/discover",
        "subscriptions/listen",  # the server announces tool changes: listen for them
        "tools/list",
        "tools/call",
    ]
    for _, params in fake.requests:
        assert params is not None
        meta = params["_meta"]
        assert meta["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
        assert meta["io.modelcontextprotocol/clientInfo"]["name"] == "trio-mcp-conformance"
        assert meta["io.modelcontextprotocol/clientCapabilities"] == {"elicitation": {"form": {}}}


async def test_request_metadata_retries_the_refused_first_request(autojump_clock: Clock) -> None:
    # The suite's mock refuses the first request with -32022 naming 2026-07-28.
    fake = FakeServer(name="mock", era="modern", unsupported_version_answers=1)
    await run_scenario("request-metadata", server(fake), "2026-07-28")
    assert [m for m, _ in fake.requests] == [
        "server/discover",
        "server/discover",
        "subscriptions/listen",
        "tools/list",
    ]


async def test_a_2026_scenario_fails_when_the_server_was_spoken_to_in_a_handshake_revision(
    autojump_clock: Clock,
) -> None:
    fake = FakeServer(name="mock", tools=[FakeTool("add_numbers")])
    with pytest.raises(ScenarioFailed) as info:
        await run_scenario("tools_call", server(fake), "2026-07-28")
    assert (
        str(info.value) == "the suite tests 2026-07-28, and the server was spoken to in 2025-11-25"
    )


async def test_elicitation_is_accepted_with_every_default(autojump_clock: Clock) -> None:
    answers: list[Mapping[str, Any]] = []

    async def asks(arguments: Mapping[str, Any], ctx: ToolContext) -> str:
        answer = await ctx.request(
            "elicitation/create",
            {"message": "please accept with defaults", "requestedSchema": DEFAULTS_SCHEMA},
        )
        answers.append(answer)
        return json.dumps(answer)

    fake = FakeServer(
        name="mock", tools=[FakeTool("test_client_elicitation_defaults", handler=asks)]
    )
    await run_scenario("elicitation-sep1034-client-defaults", server(fake))
    assert answers == [
        {
            "action": "accept",
            "content": {
                "name": "John Doe",
                "age": 30,
                "score": 95.5,
                "status": "active",
                "verified": True,
            },
        }
    ]


async def test_a_json_schema_comes_back_as_the_server_sent_it(autojump_clock: Clock) -> None:
    echoed: list[Any] = []

    def echo(arguments: Mapping[str, Any], ctx: ToolContext) -> str:
        echoed.append(arguments["schema"])
        return "echoed"

    fake = FakeServer(
        name="mock",
        tools=[
            FakeTool("json_schema_2020_12_tool", input_schema=RICH_SCHEMA),
            FakeTool(
                "json_schema_echo",
                input_schema={
                    "type": "object",
                    "properties": {"schema": {"type": "object"}},
                    "required": ["schema"],
                },
                handler=echo,
            ),
        ],
    )
    await run_scenario("json-schema-2020-12-preservation", server(fake))
    assert echoed == [RICH_SCHEMA]


async def test_a_server_that_never_becomes_ready_fails_the_scenario(
    autojump_clock: Clock,
) -> None:
    fake = FakeServer(name="mock", refuse_connects=1)
    with pytest.raises(ScenarioFailed) as info:
        await run_scenario("tools_call", server(fake))
    assert str(info.value).startswith("the server did not become ready: FAILED (")
    assert "refused connection attempt 1" in str(info.value)
    assert len(fake.connect_times) == 1  # one attempt, no retries


async def test_a_missing_tool_fails_the_scenario(autojump_clock: Clock) -> None:
    fake = FakeServer(name="mock", tools=[FakeTool("other")])
    with pytest.raises(ScenarioFailed) as info:
        await run_scenario("tools_call", server(fake))
    assert str(info.value) == (
        "the server offers no usable tool 'add_numbers' (offered: ['other']; refused: [])"
    )


async def test_a_tool_error_fails_the_scenario(autojump_clock: Clock) -> None:
    fake = FakeServer(
        name="mock",
        tools=[FakeTool("add_numbers", result={"content": [], "isError": True})],
    )
    with pytest.raises(ScenarioFailed, match="add_numbers reported a tool error"):
        await run_scenario("tools_call", server(fake))


async def test_the_server_must_carry_the_conformance_name() -> None:
    with pytest.raises(ValueError, match="the server must be named 'conformance', not 'x'"):
        await run_scenario("tools_call", FakeServer(name="x").server_config())
