"""The trio-mcp client for the official MCP conformance suite (``make conformance``).

The suite's runner starts a mock MCP server for one scenario, then runs this script with the
server's URL as the last argument and the scenario in ``MCP_CONFORMANCE_SCENARIO`` (and the
protocol revision in ``MCP_CONFORMANCE_PROTOCOL_VERSION``). The script opens a runtime with one
Streamable HTTP server at that URL, does what the scenario expects, and exits 0 when that worked;
the suite judges what reached its server. The runtime finds out which revision the mock server
speaks (it probes with ``server/discover``), as it would for any host.

It is built only on trio-mcp's public API (``trio_mcp.actors``, ``trio_mcp.protocol`` and
``trio_mcp.transports.oauth``), as a host would be: for the ``auth/*`` scenarios the server is
configured with OAuth (``ServerConfig.oauth``), the host's ``authorize`` callback approves the
sign-in without a user, and the runtime's own sign-in keeps the credentials in memory.
:func:`run_scenario` takes any :class:`ServerConfig`, so the tests in this folder drive the same
code against the in-memory fake server.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final

import httpx
import trio

from trio_mcp.actors import (
    HostCallbacks,
    OAuthFactories,
    RetryPolicy,
    Runtime,
    RuntimeConfig,
    ServerConfig,
    ServerState,
    TransportKind,
    open_runtime,
)
from trio_mcp.protocol import (
    MODERN_VERSIONS,
    CallToolResult,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    ElicitResult,
    McpError,
)
from trio_mcp.transports.oauth import (
    AuthorizationRequest,
    Authorizer,
    Grant,
    MemoryTokenStore,
    OAuthSettings,
)

__all__ = [
    "SCENARIOS",
    "ScenarioFailed",
    "form_defaults",
    "headless_sign_in",
    "http_server",
    "main",
    "oauth_settings",
    "run_scenario",
]

logger = logging.getLogger("trio_mcp.conformance")

#: The server's name in the runtime (its tools are ``mcp_conformance_<tool>``).
SERVER: Final = "conformance"
#: How long one step (connecting, one call) may take; the suite's own limit is 30 s.
STEP_TIMEOUT: Final = 20.0


class ScenarioFailed(Exception):
    """What the scenario expects could not be done; the message says which step failed."""


# --------------------------------------------------------------------------- elicitation


def form_defaults(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The answer to a form elicitation that accepts every default: each property of the
    requested (flat object) schema that declares a ``default`` gets it. Properties without one
    are left out. Never raises: a schema that is not the shape expected gives ``{}``."""
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return {}
    return {
        name: prop["default"]
        for name, prop in properties.items()
        if isinstance(name, str) and isinstance(prop, Mapping) and "default" in prop
    }


async def accept_defaults(
    server: str, params: ElicitRequestFormParams | ElicitRequestURLParams
) -> ElicitResult:
    """The host's elicitation callback: accept a form with its defaults; decline a URL."""
    if isinstance(params, ElicitRequestURLParams):
        return ElicitResult(action="decline")
    content = form_defaults(params.requested_schema)
    logger.info("elicitation from %s: accepting with the defaults %s", server, content)
    return ElicitResult(action="accept", content=content)


# --------------------------------------------------------------------------- scenarios


def _plain(value: Any) -> Any:
    """A deep copy of a decoded JSON value as plain dicts and lists (mappings may be
    read-only views), so it can be sent back verbatim."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def _tool_name(rt: Runtime, wire_name: str) -> str:
    """The registered name of the server's tool ``wire_name``."""
    for name, entry in rt.tools().items():
        if entry.server == SERVER and entry.wire_name == wire_name:
            return name
    offered = sorted(entry.wire_name for entry in rt.tools().values())
    refused = rt.status()[SERVER].refused_tools
    raise ScenarioFailed(
        f"the server offers no usable tool {wire_name!r} (offered: {offered}; refused: "
        f"{list(refused)})"
    )


async def _call(rt: Runtime, wire_name: str, arguments: Mapping[str, Any]) -> CallToolResult:
    result = await rt.call(_tool_name(rt, wire_name), arguments, timeout=STEP_TIMEOUT)
    logger.info("%s answered: %s", wire_name, result.text)
    if result.is_error:
        raise ScenarioFailed(f"{wire_name} reported a tool error: {result.text}")
    return result


async def connect_only(rt: Runtime) -> None:
    """``initialize`` and the others without steps of their own: the handshake and the
    first tool listing, which :func:`run_scenario` has already waited for."""
    await trio.lowlevel.checkpoint()


async def tools_call(rt: Runtime) -> None:
    """``tools_call``: ``add_numbers`` with two numbers."""
    await _call(rt, "add_numbers", {"a": 2, "b": 3})


async def elicitation_defaults(rt: Runtime) -> None:
    """``elicitation-sep1034-client-defaults``: the tool asks for a form; the callback
    accepts it with every default filled in."""
    await _call(rt, "test_client_elicitation_defaults", {})


async def sse_retry(rt: Runtime) -> None:
    """``sse-retry``: the server closes the call's SSE stream early; the transport reconnects
    with GET after the server's ``retry`` time and receives the answer there."""
    await _call(rt, "test_reconnection", {})


async def json_schema_preservation(rt: Runtime) -> None:
    """``json-schema-2020-12-preservation``: send the focal tool's ``inputSchema``, as the
    runtime holds it, back through ``json_schema_echo``."""
    focal = rt.tools()[_tool_name(rt, "json_schema_2020_12_tool")]
    await _call(rt, "json_schema_echo", {"schema": _plain(focal.tool.input_schema)})


async def request_state(rt: Runtime) -> None:
    """``sep-2322-client-request-state`` (2026-07-28 multi round-trip requests): each MRTR tool
    the server offers answers ``input_required`` (an elicitation, a ``requestState``, or
    both); the runtime answers through the elicitation callback and calls again under a new
    id, echoing the state byte for byte."""
    offered = {entry.wire_name for entry in rt.tools().values() if entry.server == SERVER}
    called = [name for name in _MRTR_TOOLS if name in offered]
    if not called:
        raise ScenarioFailed(f"the server offers none of {list(_MRTR_TOOLS)}")
    for name in called:
        await _call(rt, name, {})


_MRTR_TOOLS: Final = (
    "test_mrtr_echo_state",
    "test_mrtr_no_state",
    "test_mrtr_state_only",
    "test_mrtr_unrelated",
    "test_mrtr_no_result_type",
)


async def standard_headers(rt: Runtime) -> None:
    """``http-standard-headers``: every method that carries ``Mcp-Name`` once (tools/call,
    resources/read, prompts/get), besides the listings; the checks are on the headers."""
    offered = {entry.wire_name for entry in rt.tools().values() if entry.server == SERVER}
    for name in ("test_headers", "my-hyphenated-tool"):
        if name in offered:
            await _call(rt, name, {})
    page = await rt.list_resources(SERVER)
    for resource in page.resources:
        await rt.read_resource(SERVER, resource.uri)
    prompts = await rt.list_prompts(SERVER)
    for prompt in prompts.prompts:
        await rt.get_prompt(SERVER, prompt.name)


async def custom_headers(rt: Runtime) -> None:
    """``http-custom-headers``: the calls the suite lists in ``MCP_CONFORMANCE_CONTEXT``
    (``toolCalls``), in order and with their arguments as given; the arguments of parameters
    annotated ``x-mcp-header`` go into ``Mcp-Param-*`` headers."""
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    calls = context.get("toolCalls") if isinstance(context, Mapping) else None
    if not isinstance(calls, list) or not calls:
        raise ScenarioFailed("MCP_CONFORMANCE_CONTEXT has no toolCalls")
    for call in calls:
        await _call(rt, call["name"], call.get("arguments") or {})


async def invalid_tool_headers(rt: Runtime) -> None:
    """``http-invalid-tool-headers``: the tools whose ``x-mcp-header`` annotations are invalid
    were dropped from the listing (never called); the valid one is called."""
    await _call(rt, "valid_tool", {"region": "us-west1"})


async def auth_tool(rt: Runtime) -> None:
    """The ``auth/*`` scenarios: once signed in (the listing went through), call
    ``test-tool`` (the scope step-up scenarios refuse it for want of scope at first)."""
    offered = {entry.wire_name for entry in rt.tools().values() if entry.server == SERVER}
    if "test-tool" in offered:
        await _call(rt, "test-tool", {})


# --------------------------------------------------------------------------- signing in

#: The redirect URI of the headless sign-in (nothing listens there: the answer is read from
#: the authorization endpoint's redirect, which is never followed).
REDIRECT_URI: Final = "http://localhost:3000/callback"
#: The Client ID Metadata Document URL the suite's ``auth/basic-cimd`` expects.
CIMD_URL: Final = "https://conformance-test.local/client-metadata.json"


async def headless_sign_in(request: AuthorizationRequest) -> str:
    """A sign-in front end without a user: GET the authorization URL with redirects off (the
    suite's authorization server approves at once) and return where it redirects to."""
    async with httpx.AsyncClient(follow_redirects=False, timeout=STEP_TIMEOUT) as client:
        response = await client.get(request.url)
    location = response.headers.get("location")
    if not response.is_redirect or not location:
        raise ScenarioFailed(
            f"the authorization endpoint answered {response.status_code} without a redirect"
        )
    return str(response.url.join(location))


def oauth_settings(scenario: str, context: Mapping[str, Any]) -> OAuthSettings:
    """The ``oauth`` settings of a scenario: the pre-registered client of
    ``MCP_CONFORMANCE_CONTEXT`` when it has one (pre-registration, client credentials with a
    secret or a private key), DPoP for the DPoP scenarios, and this client's metadata
    document URL for the servers that support them."""
    client_id = context.get("client_id")
    secret = context.get("client_secret")
    key = context.get("private_key_pem")
    machine = scenario.startswith("auth/client-credentials")
    return OAuthSettings(
        client_id=client_id if isinstance(client_id, str) else None,
        client_secret=secret if isinstance(secret, str) else None,
        private_key=key if isinstance(key, str) else None,
        signing_algorithm=context.get("signing_algorithm") if key else None,
        token_endpoint_auth_method="private_key_jwt" if machine and key else None,
        grant=Grant.CLIENT_CREDENTIALS if machine else Grant.AUTHORIZATION_CODE,
        client_metadata_url=CIMD_URL,
        dpop=scenario.startswith("auth/dpop"),
        redirect_uri=REDIRECT_URI,
    )


#: The host's callbacks: elicitations accepted with their defaults; a server's sign-in goes
#: through :func:`headless_sign_in` (the host's opt-in: a sign-in may start while connecting).
CALLBACKS: Final = HostCallbacks(elicitation=accept_defaults, authorize=headless_sign_in)
#: The real sign-in, its credentials in memory (each scenario signs in afresh).
OAUTH: Final = OAuthFactories(sign_in=Authorizer, store=lambda _directory: MemoryTokenStore())

Scenario = Callable[[Runtime], Awaitable[None]]

#: What this client does per scenario; any other scenario only connects.
SCENARIOS: Final[Mapping[str, Scenario]] = {
    "initialize": connect_only,
    "tools_call": tools_call,
    "elicitation-sep1034-client-defaults": elicitation_defaults,
    "sse-retry": sse_retry,
    "json-schema-2020-12-preservation": json_schema_preservation,
    "request-metadata": connect_only,
    "sep-2322-client-request-state": request_state,
    "http-standard-headers": standard_headers,
    "http-custom-headers": custom_headers,
    "http-invalid-tool-headers": invalid_tool_headers,
    "json-schema-ref-no-deref": connect_only,
}


async def run_scenario(scenario: str, server: ServerConfig, version: str = "") -> None:
    """Run ``scenario`` against ``server`` (whose name must be :data:`SERVER`). The runtime
    finds out which revision the server speaks (``protocol: auto``); ``version`` is the one
    the suite tests (``MCP_CONFORMANCE_PROTOCOL_VERSION``): when it is 2026-07-28 the server
    must have been found speaking it.

    Raises :class:`ScenarioFailed` when the server does not become ready (or in another
    revision than the suite's 2026-07-28) or a step fails, and lets :class:`McpError` (a failed
    call) through.
    """
    if server.name != SERVER:
        raise ValueError(f"the server must be named {SERVER!r}, not {server.name!r}")
    config = RuntimeConfig(
        servers=(server,),
        # One attempt: the suite judges the first connection, and a retry would blur it.
        retry=RetryPolicy(first_connect_delays=(), park_probe_interval=None),
        client_name="trio-mcp-conformance",
    )
    steps = SCENARIOS.get(scenario, auth_tool if scenario.startswith("auth/") else connect_only)
    async with open_runtime(config, callbacks=CALLBACKS, oauth=OAUTH) as rt:
        status = (await rt.wait_ready(timeout=STEP_TIMEOUT))[SERVER]
        if status.state is not ServerState.READY:
            raise ScenarioFailed(
                f"the server did not become ready: {status.state.name} ({status.last_error})"
            )
        logger.info("ready (protocol %s); tools: %s", status.protocol_version, sorted(rt.tools()))
        if version in MODERN_VERSIONS and status.protocol_version != version:
            raise ScenarioFailed(
                f"the suite tests {version}, and the server was spoken to in "
                f"{status.protocol_version}"
            )
        await steps(rt)


def http_server(
    url: str, scenario: str = "", context: Mapping[str, Any] | None = None
) -> ServerConfig:
    """The suite's mock server: Streamable HTTP at ``url``; for an ``auth/*`` scenario with
    OAuth, its settings from the scenario and the suite's context (see :func:`oauth_settings`)."""
    oauth = oauth_settings(scenario, context or {}) if scenario.startswith("auth/") else None
    return ServerConfig(
        name=SERVER, type=TransportKind.HTTP, url=url, connect_timeout=STEP_TIMEOUT, oauth=oauth
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the scenario named by ``MCP_CONFORMANCE_SCENARIO`` against the URL given as the last
    argument. Returns the exit status: 0 on success, 1 when the scenario failed, 2 when the
    command line is wrong."""
    args = list(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(name)s %(levelname)s %(message)s"
    )
    if not args:
        print("usage: client.py <server URL> (set MCP_CONFORMANCE_SCENARIO)", file=sys.stderr)
        return 2
    url = args[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    version = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION", "")
    context = os.environ.get("MCP_CONFORMANCE_CONTEXT")
    logger.info(
        "scenario %r, protocol version %r, url %s%s",
        scenario,
        version,
        url,
        f", context keys {sorted(json.loads(context))}" if context else "",
    )
    parsed = json.loads(context) if context else {}
    server = http_server(url, scenario, parsed if isinstance(parsed, Mapping) else {})
    try:
        trio.run(run_scenario, scenario, server, version)
    except (ScenarioFailed, McpError) as exc:
        print(
            f"conformance scenario {scenario!r} failed: {type(exc).__name__}: {exc}",
            file=sys.stderr,
        )
        return 1
    print(f"conformance scenario {scenario!r}: done", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
