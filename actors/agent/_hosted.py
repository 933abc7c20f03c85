"""Provider-hosted MCP: a remote server's configuration in the shape of a model provider's own
MCP connector, for servers the host wants the provider to call (the provider connects to the
server and calls its tools itself; trio-mcp makes no call).

- :func:`to_openai_hosted_mcp`: OpenAI's hosted MCP tool (Responses API ``tools`` entries
  ``{"type": "mcp", "server_label", "server_url", "headers", "allowed_tools",
  "require_approval"}``);
- :func:`to_anthropic_mcp_servers`: Anthropic's MCP connector (Messages ``mcp_servers`` entries
  ``{"type": "url", "url", "name", "authorization_token", "tool_configuration": {"enabled",
  "allowed_tools"}}``, beta ``mcp-client-2025-04-04``; or, with ``toolset=True``, the entries of
  ``mcp-client-2025-11-20`` with their ``mcp_toolset`` tools).

The allow-lists are the runtime's: the tools the runtime registered for the server (its
``tools_include`` / ``tools_exclude``, the schema and injection checks, the name clashes), and
each tool's permission decision (the rules, the profile, the trust level and the tool's
annotations, as :func:`~._risk.decide` makes it for a call): ``deny`` leaves the tool out,
``ask`` makes OpenAI ask the host (``require_approval``) and leaves the tool out for Anthropic
(whose connector never asks), ``allow`` lets it run. That needs the server's tool listing
(``rt.tools()``). Without it only what the configuration says exactly is used, and where the
decision is not known the strict reading is taken (see each function); what cannot be said in
the provider's shape refuses the server, with the reason.

Refused always: stdio and in-process servers (the provider cannot start them), WebSocket ones
(the connectors speak Streamable HTTP and SSE), ``http://`` URLs and hosts the provider cannot
reach (loopback, private, link-local addresses, ``localhost``), servers that need a private CA
or a client certificate, and servers of a project file. Secrets (header values whose names look
secret: ``Authorization``, ``X-Api-Key``, ``*-Token``...) are left out unless the host asks with
``include_secrets=True``; an OAuth server's access token goes only where the host passes it
(``tokens={name: token}``).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from typing import Any, Final, Literal
from urllib.parse import urlsplit

import attrs

from ..config._config import RuntimeConfig, ServerConfig, TransportKind
from ..config._redact import looks_secret
from ..runtime._naming import registered_name
from ..runtime._registry import RegisteredTool
from ._risk import RiskLevel, assess, decide

__all__ = [
    "HostedMcpExport",
    "HostedMcpNote",
    "HostedMcpRefusal",
    "to_anthropic_mcp_servers",
    "to_openai_hosted_mcp",
]

#: The beta header of each Anthropic connector shape.
ANTHROPIC_BETA: Final = "mcp-client-2025-04-04"
ANTHROPIC_TOOLSET_BETA: Final = "mcp-client-2025-11-20"
_GLOB: Final = frozenset("*?[")


@attrs.frozen(kw_only=True)
class HostedMcpRefusal:
    """A server left out of the export, and why."""

    server: str
    reason: str


@attrs.frozen(kw_only=True)
class HostedMcpNote:
    """Something of a server's configuration or policy the export could not carry, or carried
    differently (a header left out, the approvals the provider asks for...)."""

    server: str
    note: str


@attrs.frozen(kw_only=True)
class HostedMcpExport:
    """The export for one provider. ``servers``: the entries, in the servers' order (OpenAI:
    Responses ``tools`` entries; Anthropic: ``mcp_servers`` entries), plain JSON-ready dicts.
    ``tools``: Anthropic's ``mcp_toolset`` tools (``toolset=True``; else empty). ``betas``: the
    Anthropic beta the entries need. ``names``: the servers exported."""

    provider: Literal["OpenAI", "Anthropic"]
    servers: tuple[dict[str, Any], ...] = ()
    tools: tuple[dict[str, Any], ...] = ()
    betas: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    refused: tuple[HostedMcpRefusal, ...] = ()
    notes: tuple[HostedMcpNote, ...] = ()


class _Refused(Exception):
    """One server cannot be exported: the reason."""


@attrs.define(kw_only=True)
class _Plan:
    """What one server's export holds, before the provider's shape."""

    server: ServerConfig
    #: The tools the provider may call (the server's names), or None: every tool.
    allowed: tuple[str, ...] | None
    #: Of those, the tools the runtime would ask about, or None: all of them (unknown).
    ask: tuple[str, ...] | None
    headers: dict[str, str]
    token: str | None
    notes: list[str]


def to_openai_hosted_mcp(
    config: RuntimeConfig,
    tools: Mapping[str, RegisteredTool] | None = None,
    *,
    servers: Iterable[str] | None = None,
    include_secrets: bool = False,
    tokens: Mapping[str, str] | None = None,
) -> HostedMcpExport:
    """OpenAI's hosted MCP tools (Responses API) for the servers of ``config`` (or those named
    in ``servers``), with the runtime's allow-lists from ``tools`` (``rt.tools()``).

    Each entry: ``server_label`` (the server's name), ``server_url``, ``allowed_tools`` (the
    server's own tool names, omitted when every tool is allowed), ``require_approval``
    (``"never"``, ``"always"``, or ``{"always": {"tool_names"}, "never": {"tool_names"}}`` as
    the runtime would decide: OpenAI then answers with ``mcp_approval_request`` items the host
    answers with ``mcp_approval_response``), ``headers`` (the configuration's; secret ones only
    with ``include_secrets``), ``authorization`` (``tokens[name]``, an OAuth access token).

    Without the server's listing in ``tools``: ``allowed_tools`` is ``tools_include`` when it
    names tools exactly, and every tool needs approval (their annotations are unknown); a glob
    in ``tools_include``, any ``tools_exclude``, a ``deny`` rule that may match the server's
    tools, or a profile that denies calls refuses the server (say it with the listing)."""
    export = _Export("OpenAI")
    for server in _chosen(config, servers):
        try:
            plan = _plan(server, config, tools, include_secrets, tokens, provider="OpenAI")
            entry = _openai_entry(plan)
        except _Refused as exc:
            export.refused.append(HostedMcpRefusal(server=server.name, reason=str(exc)))
            continue
        export.add(server.name, entry, plan.notes)
    return export.result()


def to_anthropic_mcp_servers(
    config: RuntimeConfig,
    tools: Mapping[str, RegisteredTool] | None = None,
    *,
    servers: Iterable[str] | None = None,
    include_secrets: bool = False,
    tokens: Mapping[str, str] | None = None,
    toolset: bool = False,
) -> HostedMcpExport:
    """Anthropic's MCP connector entries (``mcp_servers`` of a Messages request) for the servers
    of ``config`` (or those named in ``servers``), with the runtime's allow-lists from ``tools``
    (``rt.tools()``).

    Each entry: ``type: "url"``, ``url``, ``name``, ``authorization_token`` (``tokens[name]``,
    or with ``include_secrets`` the bearer token of the configuration's ``Authorization``
    header), and ``tool_configuration: {"enabled": true, "allowed_tools": [...]}``. The
    connector never asks before a call, so a tool the runtime would ask about is left out (an
    ``allow`` rule lets it in), and a server none of whose tools may run is refused. The
    connector sends no header but the bearer token: a server whose configuration sends another
    secret-looking header is refused; other headers are left out (noted).

    ``toolset=True`` gives the newer shape (beta ``mcp-client-2025-11-20``): entries without
    ``tool_configuration``, and in ``tools`` one ``mcp_toolset`` per server whose
    ``default_config`` disables every tool and whose ``configs`` enable the allowed ones.

    Without the server's listing in ``tools``, only tools named exactly in ``tools_include``
    and allowed by an ``allow`` rule can be exported (the others' annotations are unknown, so
    the runtime would ask); otherwise the server is refused (say it with the listing)."""
    export = _Export("Anthropic")
    export.betas = (ANTHROPIC_TOOLSET_BETA if toolset else ANTHROPIC_BETA,)
    for server in _chosen(config, servers):
        try:
            plan = _plan(server, config, tools, include_secrets, tokens, provider="Anthropic")
            entry, toolset_entry = _anthropic_entry(plan, toolset)
        except _Refused as exc:
            export.refused.append(HostedMcpRefusal(server=server.name, reason=str(exc)))
            continue
        export.add(server.name, entry, plan.notes)
        if toolset_entry is not None:
            export.tools.append(toolset_entry)
    return export.result()


@attrs.define
class _Export:
    provider: Literal["OpenAI", "Anthropic"]
    servers: list[dict[str, Any]] = attrs.Factory(list)
    tools: list[dict[str, Any]] = attrs.Factory(list)
    betas: tuple[str, ...] = ()
    names: list[str] = attrs.Factory(list)
    refused: list[HostedMcpRefusal] = attrs.Factory(list)
    notes: list[HostedMcpNote] = attrs.Factory(list)

    def add(self, name: str, entry: dict[str, Any], notes: Iterable[str]) -> None:
        self.servers.append(entry)
        self.names.append(name)
        self.notes.extend(HostedMcpNote(server=name, note=note) for note in notes)

    def result(self) -> HostedMcpExport:
        return HostedMcpExport(
            provider=self.provider,
            servers=tuple(self.servers),
            tools=tuple(self.tools),
            betas=self.betas if self.servers else (),
            names=tuple(self.names),
            refused=tuple(self.refused),
            notes=tuple(self.notes),
        )


def _chosen(config: RuntimeConfig, names: Iterable[str] | None) -> list[ServerConfig]:
    if names is None:
        return list(config.servers)
    wanted = list(names)
    known = {server.name: server for server in config.servers}
    missing = [name for name in wanted if name not in known]
    if missing:
        raise ValueError(f"no server named {', '.join(map(repr, missing))} in the configuration")
    return [known[name] for name in wanted]


# --------------------------------------------------------------------------- the plan


def _plan(
    server: ServerConfig,
    config: RuntimeConfig,
    tools: Mapping[str, RegisteredTool] | None,
    include_secrets: bool,
    tokens: Mapping[str, str] | None,
    *,
    provider: str,
) -> _Plan:
    _check_reachable(server, provider)
    notes: list[str] = []
    if server.proxy:
        notes.append("the provider connects directly: the configured proxy is not used")
    token = (tokens or {}).get(server.name)
    if server.oauth_settings is not None and token is None:
        notes.append(
            "the server signs in with OAuth: the provider gets no token unless the host passes "
            f"one (tokens={{{server.name!r}: access_token}})"
        )
    headers: dict[str, str] = {}
    for key, value in server.headers.items():
        if looks_secret(key) and not include_secrets:
            notes.append(f"the header {key} is left out (a secret: include_secrets=True sends it)")
            continue
        headers[key] = value
    own = {name: entry for name, entry in (tools or {}).items() if entry.server == server.name}
    if own:
        allowed, ask, denied, shaped = _decided(server, config, own)
        if denied:
            notes.append(
                f"left out, the permission rules or profile deny them: {', '.join(denied)}"
            )
        if shaped:
            notes.append(
                "left out, tool_shapes fixes or hides some of their arguments and a provider "
                f"calls the server as it is: {', '.join(shaped)}"
            )
        if not allowed:
            raise _Refused("every tool of the server is denied by the permission rules or profile")
        return _Plan(
            server=server, allowed=allowed, ask=ask, headers=headers, token=token, notes=notes
        )
    if tools is not None:
        notes.append(
            "no tool of the server is registered (is it READY?): the allow-list comes from its "
            "configuration alone"
        )
    named, unknown_or_ask, refused = _configured(server, config)
    if refused:
        notes.append(f"left out, the permission rules deny them: {', '.join(refused)}")
    return _Plan(
        server=server, allowed=named, ask=unknown_or_ask, headers=headers, token=token, notes=notes
    )


def _check_reachable(server: ServerConfig, provider: str) -> None:
    kind = server.transport_kind
    if kind is TransportKind.STDIO:
        raise _Refused(
            "a stdio server runs on this machine: the provider cannot start it (only remote "
            "HTTP servers can be provider-hosted)"
        )
    if kind is TransportKind.CUSTOM or server.url is None:
        raise _Refused("an in-process server (type 'custom'): the provider cannot reach it")
    if kind is TransportKind.WS:
        raise _Refused(
            f"a WebSocket server: {provider}'s connector speaks Streamable HTTP and SSE only"
        )
    if server.project is not None:
        raise _Refused(
            "the server comes from a project file, whose approval is the runtime's: export "
            "servers of the user's own configuration"
        )
    parts = urlsplit(server.url)
    if parts.scheme != "https":
        raise _Refused(
            f"the URL is {parts.scheme}://, not https://: the provider would send the headers "
            "and tokens in clear; serve the server over https"
        )
    host = (parts.hostname or "").lower()
    if _unreachable(host):
        raise _Refused(
            f"the host {host!r} is local or private: the provider connects from its own "
            "network and cannot reach it"
        )
    if server.ca_bundle:
        raise _Refused(
            "the server's certificate chains to a private CA (ca_bundle): the provider checks "
            "it against public roots only"
        )
    if server.client_cert:
        raise _Refused(
            "the server wants a client certificate (client_cert): the provider cannot show it"
        )


def _unreachable(host: str) -> bool:
    if not host or host == "localhost" or host.endswith((".localhost", ".local", ".internal")):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return not address.is_global


def _decided(
    server: ServerConfig, config: RuntimeConfig, own: Mapping[str, RegisteredTool]
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """The server's registered tools, by the runtime's permission decision: (allowed to run,
    of which asked, denied, left out because ``tool_shapes`` fixes or hides some of their
    arguments), each as the server's tool names, sorted."""
    trusted = server.trust_level == "trusted"
    allowed: list[str] = []
    ask: list[str] = []
    denied: list[str] = []
    shaped: list[str] = []
    for registered, entry in own.items():
        decision = decide(
            registered,
            config.permission_rules,
            profile=config.profile,
            risk=assess(entry.tool, trusted=trusted),
            trusted=trusted,
            allowed_capabilities=config.allowed_capabilities,
        )
        name = entry.wire_name  # the provider calls the server itself, by its own names
        shape = entry.shape
        if decision.outcome == "deny":
            denied.append(name)
            continue
        if shape is not None and (shape.fixed or shape.owned - set(shape.renamed.values())):
            # The provider would let the model set what the host fixed or hid.
            shaped.append(name)
            continue
        allowed.append(name)
        if decision.outcome == "ask":
            ask.append(name)
    return (
        tuple(sorted(allowed)),
        tuple(sorted(ask)),
        tuple(sorted(denied)),
        tuple(sorted(shaped)),
    )


def _configured(
    server: ServerConfig, config: RuntimeConfig
) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None, tuple[str, ...]]:
    """Without a listing: the tools ``tools_include`` names exactly (None: every tool), those
    of them the runtime would ask about (None: unknown, every tool) and those a rule denies.
    Each named tool is decided as a destructive one (its annotations are unknown), so only an
    ``allow`` rule lets it run without asking. Raises :class:`_Refused` for what cannot be said
    without a listing."""
    say = "pass the server's registered tools (rt.tools()) so the export lists them"
    if server.tools_exclude:
        raise _Refused(
            f"tools_exclude {list(server.tools_exclude)} cannot be expressed: the providers "
            f"take a list of allowed tools; {say}, or name the allowed tools in tools_include"
        )
    include = server.tools_include
    if include is None:
        if config.profile != "default" and "mcp.call" not in config.allowed_capabilities:
            raise _Refused(
                f"the {config.profile!r} profile denies calls unless a rule allows the tool; {say}"
            )
        prefix = registered_name(server.name, "")
        for rule in config.permission_rules:
            if rule.decision == "deny" and _may_match(rule.pattern, prefix):
                raise _Refused(f"the rule {rule.pattern!r} may deny some of its tools; {say}")
        return None, None, ()
    if any(_GLOB & set(pattern) for pattern in include):
        raise _Refused(
            f"tools_include {list(include)} has patterns the provider cannot take; {say}, or "
            "name the tools exactly"
        )
    allowed: list[str] = []
    ask: list[str] = []
    denied: list[str] = []
    for name in include:
        decision = decide(
            registered_name(server.name, name),
            config.permission_rules,
            profile=config.profile,
            risk=RiskLevel.DANGEROUS,
            allowed_capabilities=config.allowed_capabilities,
        )
        if decision.outcome == "deny":
            denied.append(name)
            continue
        allowed.append(name)
        if decision.outcome == "ask":
            ask.append(name)
    if not allowed:
        raise _Refused("every tool named in tools_include is denied by the permission rules")
    return tuple(sorted(allowed)), tuple(sorted(ask)), tuple(sorted(denied))


def _may_match(pattern: str, prefix: str) -> bool:
    """Whether the glob ``pattern`` may match a name starting with ``prefix`` (its literal
    head agrees with the prefix as far as both go)."""
    head = pattern
    for index, char in enumerate(pattern):
        if char in _GLOB:
            head = pattern[:index]
            break
    else:
        return pattern.startswith(prefix)
    return head.startswith(prefix) or prefix.startswith(head)


# --------------------------------------------------------------------------- the shapes


def _openai_entry(plan: _Plan) -> dict[str, Any]:
    server = plan.server
    entry: dict[str, Any] = {
        "type": "mcp",
        "server_label": server.name,
        "server_url": server.url,
    }
    if plan.allowed is not None:
        entry["allowed_tools"] = list(plan.allowed)
    if plan.ask is None:
        entry["require_approval"] = "always"
        plan.notes.append(
            "every call needs the host's approval: without the server's listing its tools' "
            "annotations are unknown"
        )
    elif not plan.ask:
        entry["require_approval"] = "never"
    elif plan.allowed is not None and set(plan.ask) == set(plan.allowed):
        entry["require_approval"] = "always"
    else:
        never = [name for name in plan.allowed or () if name not in plan.ask]
        entry["require_approval"] = {
            "always": {"tool_names": list(plan.ask)},
            "never": {"tool_names": never},
        }
    if plan.headers:
        entry["headers"] = dict(plan.headers)
    if plan.token is not None:
        entry["authorization"] = plan.token
    return entry


def _anthropic_entry(plan: _Plan, toolset: bool) -> tuple[dict[str, Any], dict[str, Any] | None]:
    server = plan.server
    token = plan.token
    for key, value in server.headers.items():
        if key.lower() == "authorization":
            scheme, _, credentials = value.partition(" ")
            if scheme.lower() != "bearer" or not credentials.strip():
                raise _Refused(
                    "the Authorization header is not a bearer token: Anthropic's connector "
                    "sends only authorization_token as 'Bearer <token>'"
                )
            if key in plan.headers and token is None:
                token = credentials.strip()
        elif looks_secret(key):
            raise _Refused(
                f"the server needs the header {key}, which Anthropic's connector cannot send "
                "(it sends only a bearer token)"
            )
        elif key in plan.headers:
            plan.notes.append(f"the header {key} is left out: Anthropic's connector sends none")
    if plan.ask is None:
        raise _Refused(
            "Anthropic's connector runs tools without asking, and without the server's listing "
            "each tool's decision is unknown: pass the server's registered tools (rt.tools()), "
            "or name its tools in tools_include and allow them with a rule"
        )
    runnable = [name for name in plan.allowed or () if name not in plan.ask]
    if plan.ask:
        plan.notes.append(
            "left out, the runtime would ask before calling them and Anthropic's connector "
            f"never asks: {', '.join(plan.ask)} (an 'allow' rule lets them in)"
        )
    if not runnable:
        raise _Refused(
            "every tool of the server needs approval, and Anthropic's connector never asks "
            "(allow tools with a permission rule to export them)"
        )
    entry: dict[str, Any] = {"type": "url", "url": server.url, "name": server.name}
    if token is not None:
        entry["authorization_token"] = token
    if toolset:
        return entry, {
            "type": "mcp_toolset",
            "mcp_server_name": server.name,
            "default_config": {"enabled": False},
            "configs": {name: {"enabled": True} for name in runnable},
        }
    entry["tool_configuration"] = {"enabled": True, "allowed_tools": runnable}
    return entry, None
