"""Provider-hosted MCP: remote servers exported in the shape of OpenAI's hosted MCP tool and
Anthropic's MCP connector, with the runtime's allow-lists, checked against the SDKs' types."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from anthropic.types.beta import BetaMCPToolsetParam, BetaRequestMCPServerURLDefinitionParam
from openai.types.responses.tool_param import Mcp

from trio_mcp.actors import (
    AppliedShape,
    HostedMcpRefusal,
    PermissionRule,
    RegisteredTool,
    RuntimeConfig,
    ServerConfig,
    TransportKind,
    registered_name,
    to_anthropic_mcp_servers,
    to_openai_hosted_mcp,
)
from trio_mcp.protocol import Tool, ToolAnnotations

from .test_providers import accepted

URL = "https://mcp.example.com/mcp"


def runtime(*servers: ServerConfig, **options: Any) -> RuntimeConfig:
    """A runtime configuration (the options as ``RuntimeConfig`` takes them)."""
    return RuntimeConfig(servers=servers, **options)


def listing(server: str, *tools: tuple[str, dict[str, Any]]) -> dict[str, RegisteredTool]:
    """Registered tools of ``server`` as ``rt.tools()`` gives them."""
    out = {}
    for name, hints in tools:
        tool = Tool(
            name=name,
            input_schema={"type": "object"},
            annotations=ToolAnnotations(**hints) if hints else None,
        )
        registered = registered_name(server, name)
        out[registered] = RegisteredTool(name=registered, server=server, tool=tool, generation=1)
    return out


GITHUB = ServerConfig(
    name="github",
    url=URL,
    headers={"Authorization": "Bearer ghp_secret", "X-Client": "host"},
    trust_level="trusted",
)
GITHUB_TOOLS = listing(
    "github",
    ("get_issue", {"read_only_hint": True}),
    ("create_issue", {}),
    ("delete_repo", {"destructive_hint": True}),
)


def test_openai_entries_carry_the_runtimes_decisions_and_no_secret_by_default() -> None:
    config = runtime(
        GITHUB,
        permission_rules=(PermissionRule(pattern="mcp_github_create_*", decision="deny"),),
    )
    export = to_openai_hosted_mcp(config, GITHUB_TOOLS)
    (entry,) = export.servers
    accepted(Mcp, entry)
    assert entry == {
        "type": "mcp",
        "server_label": "github",
        "server_url": URL,
        "allowed_tools": ["delete_repo", "get_issue"],
        "require_approval": {
            "always": {"tool_names": ["delete_repo"]},
            "never": {"tool_names": ["get_issue"]},
        },
        "headers": {"X-Client": "host"},
    }
    assert [note.note for note in export.notes] == [
        "the header Authorization is left out (a secret: include_secrets=True sends it)",
        "left out, the permission rules or profile deny them: create_issue",
    ]
    with_secrets = to_openai_hosted_mcp(config, GITHUB_TOOLS, include_secrets=True)
    assert with_secrets.servers[0]["headers"]["Authorization"] == "Bearer ghp_secret"


def test_an_untrusted_server_asks_for_everything_and_a_trusted_one_for_nothing() -> None:
    plain = ServerConfig(name="docs", url=URL)
    tools = listing("docs", ("search", {}), ("read", {"read_only_hint": True}))
    export = to_openai_hosted_mcp(runtime(plain), tools)
    assert export.servers[0]["require_approval"] == "always"
    trusted = ServerConfig(name="docs", url=URL, trust_level="trusted")
    export = to_openai_hosted_mcp(runtime(trusted), tools)
    assert export.servers[0]["require_approval"] == "never"
    assert export.servers[0]["allowed_tools"] == ["read", "search"]


def test_anthropic_entries_run_only_what_the_runtime_would_not_ask_about() -> None:
    config = runtime(GITHUB)
    export = to_anthropic_mcp_servers(config, GITHUB_TOOLS, include_secrets=True)
    (entry,) = export.servers
    accepted(BetaRequestMCPServerURLDefinitionParam, entry)
    assert entry == {
        "type": "url",
        "url": URL,
        "name": "github",
        "authorization_token": "ghp_secret",
        "tool_configuration": {"enabled": True, "allowed_tools": ["create_issue", "get_issue"]},
    }
    assert export.betas == ("mcp-client-2025-04-04",)
    assert [note.note for note in export.notes] == [
        "the header X-Client is left out: Anthropic's connector sends none",
        "left out, the runtime would ask before calling them and Anthropic's connector never "
        "asks: delete_repo (an 'allow' rule lets them in)",
    ]
    no_secret = to_anthropic_mcp_servers(config, GITHUB_TOOLS)
    assert "authorization_token" not in no_secret.servers[0]


def test_anthropic_toolset_shape() -> None:
    config = runtime(
        GITHUB,
        permission_rules=(PermissionRule(pattern="mcp_github_delete_repo", decision="allow"),),
    )
    export = to_anthropic_mcp_servers(config, GITHUB_TOOLS, toolset=True, tokens={"github": "t"})
    (entry,) = export.servers
    (toolset,) = export.tools
    accepted(BetaRequestMCPServerURLDefinitionParam, entry)
    accepted(BetaMCPToolsetParam, toolset)
    assert entry == {"type": "url", "url": URL, "name": "github", "authorization_token": "t"}
    assert toolset == {
        "type": "mcp_toolset",
        "mcp_server_name": "github",
        "default_config": {"enabled": False},
        "configs": {
            name: {"enabled": True} for name in ("create_issue", "delete_repo", "get_issue")
        },
    }
    assert export.betas == ("mcp-client-2025-11-20",)


@pytest.mark.parametrize(
    ("server", "reason"),
    [
        (ServerConfig(name="fs", command="npx"), "a stdio server runs on this machine"),
        (
            ServerConfig(name="ws", type=TransportKind.WS, url="wss://mcp.example.com/ws"),
            "a WebSocket server",
        ),
        (
            ServerConfig(name="plain", url="http://mcp.example.com/mcp", allow_insecure_http=True),
            "the URL is http://, not https://",
        ),
        (ServerConfig(name="local", url="https://127.0.0.1:8443/mcp"), "local or private"),
        (ServerConfig(name="lan", url="https://10.1.2.3/mcp"), "local or private"),
        (ServerConfig(name="host", url="https://localhost/mcp"), "local or private"),
        (
            ServerConfig(name="globbed", url=URL, tools_include=("get_*",)),
            "tools_include ['get_*'] has patterns the provider cannot take",
        ),
        (
            ServerConfig(name="excluding", url=URL, tools_exclude=("delete_*",)),
            "tools_exclude ['delete_*'] cannot be expressed",
        ),
    ],
)
def test_what_a_provider_cannot_reach_or_express_is_refused_with_the_reason(
    server: ServerConfig, reason: str
) -> None:
    for export in (
        to_openai_hosted_mcp(runtime(server)),
        to_anthropic_mcp_servers(runtime(server)),
    ):
        assert export.servers == () and export.betas == ()
        (refusal,) = export.refused
        assert isinstance(refusal, HostedMcpRefusal) and refusal.server == server.name
        assert reason in refusal.reason


def test_without_a_listing_only_exact_names_go_and_every_call_is_asked() -> None:
    exact = ServerConfig(name="docs", url=URL, tools_include=("search", "read"))
    config = runtime(
        exact,
        permission_rules=(PermissionRule(pattern="mcp_docs_read", decision="allow"),),
    )
    openai = to_openai_hosted_mcp(config)
    assert openai.servers[0]["allowed_tools"] == ["read", "search"]
    assert openai.servers[0]["require_approval"] == {
        "always": {"tool_names": ["search"]},
        "never": {"tool_names": ["read"]},
    }
    anthropic = to_anthropic_mcp_servers(config)
    assert anthropic.servers[0]["tool_configuration"]["allowed_tools"] == ["read"]

    everything = runtime(ServerConfig(name="docs", url=URL))
    assert to_openai_hosted_mcp(everything).servers[0] == {
        "type": "mcp",
        "server_label": "docs",
        "server_url": URL,
        "require_approval": "always",
    }
    (refusal,) = to_anthropic_mcp_servers(everything).refused
    assert "without the server's listing each tool's decision is unknown" in refusal.reason


def test_rules_and_profiles_that_need_the_listing_refuse_without_it() -> None:
    docs = ServerConfig(name="docs", url=URL)
    denying = runtime(
        docs,
        permission_rules=(
            PermissionRule(pattern="mcp_github_*", decision="deny"),  # another server's
            PermissionRule(pattern="mcp_docs_delete_*", decision="deny"),
        ),
    )
    (refusal,) = to_openai_hosted_mcp(denying).refused
    assert "the rule 'mcp_docs_delete_*' may deny some of its tools" in refusal.reason
    other = runtime(
        docs, permission_rules=(PermissionRule(pattern="mcp_github_*", decision="deny"),)
    )
    assert to_openai_hosted_mcp(other).names == ("docs",)
    gateway = runtime(docs, profile="public_gateway")
    (refusal,) = to_openai_hosted_mcp(gateway).refused
    assert "the 'public_gateway' profile denies calls" in refusal.reason


def test_anthropic_cannot_send_other_secret_headers_or_non_bearer_authorization() -> None:
    keyed = ServerConfig(name="keyed", url=URL, headers={"X-Api-Key": "k"})
    basic = ServerConfig(name="basic", url=URL, headers={"Authorization": "Basic dXNlcg=="})
    tools = listing("keyed", ("a", {})) | listing("basic", ("a", {}))
    export = to_anthropic_mcp_servers(runtime(keyed, basic), tools)
    assert [refusal.reason for refusal in export.refused] == [
        "the server needs the header X-Api-Key, which Anthropic's connector cannot send (it "
        "sends only a bearer token)",
        "the Authorization header is not a bearer token: Anthropic's connector sends only "
        "authorization_token as 'Bearer <token>'",
    ]
    openai = to_openai_hosted_mcp(runtime(keyed), tools, include_secrets=True)
    assert openai.servers[0]["headers"] == {"X-Api-Key": "k"}


def test_an_oauth_server_gets_the_token_the_host_passes_and_servers_can_be_chosen() -> None:
    oauth = ServerConfig(name="notion", url=URL, auth="oauth")
    config = runtime(oauth, GITHUB)
    tools = listing("notion", ("search", {}))
    export = to_openai_hosted_mcp(config, tools, servers=["notion"])
    assert export.names == ("notion",)
    assert "the server signs in with OAuth" in export.notes[0].note
    given = to_openai_hosted_mcp(config, tools, servers=["notion"], tokens={"notion": "at"})
    assert given.servers[0]["authorization"] == "at"
    accepted(Mcp, given.servers[0])
    with pytest.raises(ValueError, match="no server named 'nope'"):
        to_openai_hosted_mcp(config, servers=["nope"])


def test_shaped_tools_go_by_the_servers_names_and_fixed_arguments_keep_a_tool_home() -> None:
    # tool_shapes: a renamed tool is offered under the server's own name (the provider calls the
    # server as it is); a tool whose argument the host fixed is left out (the provider would let
    # the model set it).
    tools = listing("github", ("get_issue", {"read_only_hint": True}), ("create_issue", {}))
    renamed = tools["mcp_github_get_issue"]
    tools["mcp_github_get_issue"] = attrs.evolve(
        renamed,
        tool=attrs.evolve(renamed.tool, name="issue"),
        shape=AppliedShape(wire_name="get_issue"),
    )
    fixed = tools["mcp_github_create_issue"]
    tools["mcp_github_create_issue"] = attrs.evolve(
        fixed,
        shape=AppliedShape(
            wire_name="create_issue", fixed={"repo": "acme/app"}, owned=frozenset({"repo"})
        ),
    )
    export = to_openai_hosted_mcp(runtime(GITHUB), tools)
    assert export.servers[0]["allowed_tools"] == ["get_issue"]
    assert (
        "left out, tool_shapes fixes or hides some of their arguments and a provider calls the "
        "server as it is: create_issue"
    ) in [note.note for note in export.notes]
