"""The typed configuration of a runtime and of each server.

These classes are what the runtime runs on. They validate themselves when built (fail closed,
with :class:`McpTransportConfigError` naming the server and every key at fault). Loading them
from the Echo and Agentao configuration shapes, with ``${VAR}`` expansion and every problem of a
file reported at once, is :mod:`trio_mcp.actors.config._loader`'s job.

Secrets stay out of logs: the ``repr()`` of a :class:`ServerConfig` shows the names of its
``env`` variables and ``headers`` but never their values, and hides secret-looking arguments,
URL passwords and URL query values (:func:`redact_url`, :func:`redact_args`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import attrs

from ...protocol._errors import ConfigError, McpTransportConfigError
from ...protocol._framing import DEFAULT_MAX_FRAME_BYTES
from ...transports._proxy import proxy_problem
from ...transports._tls import TLS_KEYS, plaintext_problem
from ...transports.oauth._types import OAuthSettings
from ._approvals import ProjectOrigin
from ._backoff import RetryPolicy
from ._callpolicy import ErrorPolicy, ErrorRule, as_error_rules
from ._oauth import oauth_problems
from ._policy import DEFAULT_RENDER_BUDGET, MAX_BLOB_BYTES, PROFILES, PermissionRule, Profile
from ._redact import REDACTED, looks_secret
from ._shaping import ToolShape, tool_shape_problems

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

    from ...transports._base import FrameSink, Transport

__all__ = [
    "CATALOG_SHAPES",
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_CATALOG_LIST_CAP",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_OFFLOAD_CHARS",
    "NETWORK_POLICIES",
    "PROTOCOL_CHOICES",
    "SECURITY_POLICIES",
    "SERVER_NAME_PATTERN",
    "CatalogShape",
    "NetworkPolicy",
    "ProtocolChoice",
    "RuntimeConfig",
    "SecurityPolicy",
    "ServerConfig",
    "TransportKind",
    "exactly_one_problem",
    "redact_args",
    "redact_url",
    "valid_server_name",
]

#: Server names allow only ASCII letters, digits, ``.``, ``-`` and ``_``.
SERVER_NAME_PATTERN: Final = re.compile(r"^[A-Za-z0-9._-]+$")


def valid_server_name(name: str) -> bool:
    """Server names allow only ASCII letters, digits, ``.``, ``-`` and ``_``."""
    return bool(SERVER_NAME_PATTERN.fullmatch(name))


DEFAULT_CONNECT_TIMEOUT: Final = 60.0
DEFAULT_CALL_TIMEOUT: Final = 120.0

NetworkPolicy = Literal["deny", "allow"]
SecurityPolicy = Literal["block", "warn"]
#: The shape of the resource and prompt tools offered to the model: ``"echo"``
#: (``mcp_resources`` / ``mcp_prompts`` with an ``action``) or ``"agentao"``
#: (``list_mcp_resources``, ``list_mcp_resource_templates``, ``read_mcp_resource``,
#: ``list_mcp_prompts``, ``get_mcp_prompt``).
CatalogShape = Literal["echo", "agentao"]
#: The values ``RuntimeConfig.catalog_shape`` accepts (besides None).
CATALOG_SHAPES: Final[tuple[CatalogShape, ...]] = ("echo", "agentao")
#: Entries one resource or prompt listing shows the model by default.
DEFAULT_CATALOG_LIST_CAP: Final = 200
#: Listings and results with more characters than this are checked or rendered in a worker
#: thread by default; smaller ones inline.
DEFAULT_OFFLOAD_CHARS: Final = 65_536
#: The values ``RuntimeConfig.network_policy`` accepts.
NETWORK_POLICIES: Final[tuple[NetworkPolicy, ...]] = ("deny", "allow")
#: The values ``RuntimeConfig.security_policy`` accepts.
SECURITY_POLICIES: Final[tuple[SecurityPolicy, ...]] = ("block", "warn")
#: Which protocol revisions to speak with a server: ``"auto"`` (probe with ``server/discover``
#: and fall back to ``initialize``, remembering what the server spoke), ``"legacy"`` (the
#: handshake revisions 2024-11-05 to 2025-11-25, no probe) or ``"modern"`` (2026-07-28 only,
#: no fallback).
ProtocolChoice = Literal["auto", "legacy", "modern"]
#: The values ``ServerConfig.protocol`` accepts.
PROTOCOL_CHOICES: Final[tuple[ProtocolChoice, ...]] = ("auto", "legacy", "modern")
_TRUST_LEVELS: Final = ("untrusted", "trusted")
_AUTH_MODES: Final = ("oauth",)

#: ``factory(sink)``: a fresh transport whose frames and events go into ``sink`` (see
#: :class:`trio_mcp.transports.FrameSink`).
TransportFactory = Callable[["FrameSink"], AbstractAsyncContextManager["Transport"]]


class TransportKind(StrEnum):
    """How the runtime reaches a server."""

    STDIO = "stdio"
    HTTP = "http"
    SSE = "sse"
    WS = "ws"
    #: A transport the host builds itself (in-memory servers, tests): ``transport_factory``.
    CUSTOM = "custom"

    @property
    def is_url(self) -> bool:
        """Whether the transport goes over the network to a ``url`` (HTTP, SSE, WebSocket):
        what ``network_policy = "deny"`` skips."""
        return self in (TransportKind.HTTP, TransportKind.SSE, TransportKind.WS)


# --------------------------------------------------------------------------- redaction

#: ``--name=value`` (or ``-n=value``).
_OPTION_WITH_VALUE = re.compile(r"^(--?[A-Za-z0-9][A-Za-z0-9_.-]*)=(.*)$", re.DOTALL)
#: ``NAME=value``, as in ``docker run -e GITHUB_TOKEN=...`` or ``env TOKEN=... cmd``.
_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_.-]*)=(.*)$", re.DOTALL)
#: ``Header-Name: value``, as in ``curl -H "Authorization: Bearer ..."``.
_HEADER_LINE = re.compile(r"^([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*(.*)$", re.DOTALL)
#: ``Bearer <credentials>`` and the other HTTP authentication schemes.
_AUTH_SCHEME = re.compile(r"^(Bearer|Basic|Token|Digest)[ \t]+\S.*$", re.IGNORECASE | re.DOTALL)
#: Credentials recognisable by their shape alone: GitHub, GitLab, OpenAI/Anthropic, Slack, AWS
#: and Google keys, and JSON Web Tokens.
_TOKEN_SHAPE = re.compile(
    r"^(gh[pousr]_|github_pat_|glpat-|sk-|xox[abposr]-|AKIA|AIza|eyJ)[A-Za-z0-9_+/=.-]{16,}$"
)


def redact_url(url: str) -> str:
    """``url`` safe to print: a password in it and the values of its query parameters become
    ``***`` (query strings often carry API keys). Never fails: text that does not parse as a URL
    is returned with everything after ``?`` hidden."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if parts.password is not None:
            user, _, host = netloc.rpartition("@")
            netloc = f"{user.partition(':')[0]}:{REDACTED}@{host}"
        query = parts.query
        if query:
            pairs = parse_qsl(query, keep_blank_values=True)
            query = urlencode([(key, REDACTED) for key, _ in pairs], safe="*")
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    except ValueError:
        head, sep, _ = url.partition("?")
        return f"{head}?{REDACTED}" if sep else head


def _hidden(value: str) -> str:
    """The value of a secret-looking option: ``***``, or ``""`` when it is empty (an empty
    value hides nothing, and seeing that it is empty helps)."""
    return REDACTED if value else ""


def _redact_value(value: str) -> str:
    """An argument that no option name says anything about, safe to print: hidden when its own
    shape says it is a secret (``NAME=value`` or ``Header: value`` with a secret-looking name,
    ``Bearer ...``, a well-known token format), URLs through :func:`redact_url`, anything else
    as it is."""
    if (match := _ASSIGNMENT.match(value)) and looks_secret(match.group(1)):
        return f"{match.group(1)}={_hidden(match.group(2))}"
    if (match := _HEADER_LINE.match(value)) and looks_secret(match.group(1)):
        return f"{match.group(1)}: {_hidden(match.group(2))}"
    if match := _AUTH_SCHEME.match(value):
        return f"{match.group(1)} {REDACTED}"
    if _TOKEN_SHAPE.match(value):
        return REDACTED
    if "://" in value:
        return redact_url(value)
    return value


def _is_option(arg: str) -> bool:
    """Whether ``arg`` reads as an option rather than as the value of the one before it:
    ``--anything``, or a one-letter ``-x``."""
    return arg.startswith("--") or (len(arg) == 2 and arg[0] == "-" and arg[1] != "-")


def redact_args(args: Iterable[str]) -> list[str]:
    """Command-line arguments safe to print, one for one.

    An option whose *name* looks secret keeps its name and hides its value: ``--api-key=***``,
    or ``--api-key ***`` when the value is the next argument (unless that argument is itself an
    option: ``--no-auth --verbose``). An option with a harmless name is left alone whatever its
    value says (``--mode=secret``). Any other argument, and the value of a harmless option, is
    hidden when its own shape says it is a secret (``TOKEN=...``, ``Authorization: ...``,
    ``Bearer ...``, ``ghp_...``, ``sk-...``, a JSON Web Token...); URLs go through
    :func:`redact_url`. A short option (``-k VALUE``) says nothing about its value, so such a
    value is hidden only by its own shape."""
    out: list[str] = []
    value_of_secret = False
    for arg in args:
        if value_of_secret and not _is_option(arg):
            out.append(_hidden(arg))
            value_of_secret = False
            continue
        value_of_secret = False
        if match := _OPTION_WITH_VALUE.match(arg):
            name, value = match.groups()
            shown = _hidden(value) if looks_secret(name) else _redact_value(value)
            out.append(f"{name}={shown}")
        elif arg.startswith("-") and len(arg) > 1:
            out.append(arg)
            value_of_secret = looks_secret(arg)
        else:
            out.append(_redact_value(arg))
    return out


def _mapping_repr(value: Mapping[str, str]) -> str:
    return "{" + ", ".join(f"{name!r}: {REDACTED!r}" for name in value) + "}"


def _args_repr(value: tuple[str, ...]) -> str:
    return repr(tuple(redact_args(value)))


def _url_repr(value: str | None) -> str:
    return repr(None if value is None else redact_url(value))


# --------------------------------------------------------------------------- servers


def _timeout_problem(key: str, value: Any, *, allow_none: bool) -> str | None:
    """What is wrong with a timeout value, or None: a bool, a non-number, a value <= 0, an
    infinite value or NaN are refused."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"{key} must be a number of seconds, got {value!r}"
    if not math.isfinite(value) or value <= 0:
        return f"{key} must be a finite number of seconds > 0, got {value!r}"
    return None


def exactly_one_problem(server: str, *, has_url: bool, has_command: bool) -> str | None:
    """The message for a server with both or neither of ``url`` and ``command`` (else None)."""
    if has_url != has_command:
        return None
    return (
        f"server {server!r}: give exactly one of 'command' (stdio) and 'url' "
        f"(HTTP, SSE or WebSocket); it has {'both' if has_url else 'neither'}"
    )


def _check_error_policy(value: object) -> None:
    if value is not None and not isinstance(value, ErrorPolicy):
        raise ConfigError(f"error_policy must be an ErrorPolicy, got {type(value).__name__}")


@attrs.frozen(kw_only=True)
class ServerConfig:
    """One MCP server: how to reach it and how to treat it.

    Built directly by hosts (``extra_mcp_servers``, tests) or by the loaders. Raises
    :class:`McpTransportConfigError` listing every problem (``problems`` holds ``(key,
    message)`` pairs): a name outside ``[A-Za-z0-9._-]``, both or neither of ``url`` and
    ``command``, a ``type`` without the key it needs, a timeout that is not a finite number of
    seconds > 0, an unknown ``trust_level`` or ``auth``.
    """

    name: str
    type: TransportKind | None = None
    # stdio
    command: str | None = None
    args: tuple[str, ...] = attrs.field(default=(), repr=_args_repr)
    env: Mapping[str, str] = attrs.field(factory=dict, repr=_mapping_repr)
    cwd: str | None = None
    # URL transports
    url: str | None = attrs.field(default=None, repr=_url_repr)
    headers: Mapping[str, str] = attrs.field(factory=dict, repr=_mapping_repr)
    #: ``"oauth"``: sign in with OAuth 2.1 (HTTP and SSE servers only); None: no sign-in.
    #: Giving ``oauth`` implies it.
    auth: str | None = None
    #: The OAuth settings (the ``oauth`` table); None with ``auth="oauth"``: the defaults
    #: (discovery, registration, the scopes the server names). See :attr:`oauth_settings`.
    oauth: OAuthSettings | None = None
    #: A plain ``http://`` / ``ws://`` URL to another machine is refused without it (loopback
    #: URLs need no opt-in).
    allow_insecure_http: bool = False
    #: PEM file of the CA certificates the server's certificate must chain to (instead of the
    #: default trust store); ``https://`` / ``wss://`` only.
    ca_bundle: str | None = None
    #: PEM certificate (and key, unless ``client_key`` is given) shown to a server that asks for
    #: a client certificate (mutual TLS).
    client_cert: str | None = None
    client_key: str | None = None
    #: ``http://[user:password@]host:port`` of an HTTP proxy to reach the server through.
    proxy: str | None = attrs.field(default=None, repr=_url_repr)
    # a transport the host builds (type CUSTOM)
    transport_factory: TransportFactory | None = attrs.field(default=None, eq=False, repr=False)

    enabled: bool = True
    #: Set by the loader for an entry of a project file (``<project>/.trio-mcp/mcp.json``):
    #: where it comes from and what it runs. Such a server does not start until that very entry
    #: is approved (``trio-mcp project approve``, or the host's ``approve_project_server``).
    project: ProjectOrigin | None = None
    #: Spawn or connect plus the handshake and the first tool listing.
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    #: Each call; None for no limit.
    timeout: float | None = DEFAULT_CALL_TIMEOUT
    #: A progress notification restarts the call's timer, up to ``max_call_time`` in all.
    progress_resets_timeout: bool = False
    max_call_time: float | None = None
    trust_level: Literal["untrusted", "trusted"] = "untrusted"
    tools_include: tuple[str, ...] | None = None
    tools_exclude: tuple[str, ...] = ()
    #: Sent with logging/setLevel after the handshake when the server declares logging
    #: (legacy), or in every request's ``_meta`` (2026-07-28).
    log_level: str | None = None
    #: Which protocol revisions to speak (see :data:`ProtocolChoice`); ``"auto"`` finds out.
    protocol: ProtocolChoice = "auto"
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    resources: bool = True
    skills: bool = False
    #: How the server's tools look to the model: the server's tool name -> :class:`ToolShape`
    #: (rename the tool or its arguments, hide arguments with fixed values, set defaults,
    #: rewrite descriptions). Applied before the registration checks; calls are mapped back.
    tool_shapes: Mapping[str, ToolShape] = attrs.field(factory=dict)
    #: What becomes of this server's calls that fail (tool errors, timeouts, unknown outcomes,
    #: calls not sent, and their retries); None: the runtime's ``error_policy``. A matching
    #: rule of ``RuntimeConfig.error_rules`` goes first.
    error_policy: ErrorPolicy | None = attrs.field(
        default=None, validator=lambda _i, _a, value: _check_error_policy(value)
    )

    def __attrs_post_init__(self) -> None:
        if self.oauth is not None and self.auth is None:
            object.__setattr__(self, "auth", "oauth")  # the table is the switch
        problems = self.problems()
        if problems:
            error = (
                ConfigError
                if all(key.startswith(("oauth.", "tools")) for key, _ in problems)
                else McpTransportConfigError
            )
            raise error("; ".join(message for _, message in problems), problems=problems)

    @property
    def oauth_settings(self) -> OAuthSettings | None:
        """The server's OAuth settings when it signs in with OAuth (``auth="oauth"``): the
        ``oauth`` table, or the defaults; None for a server without OAuth."""
        if self.auth != "oauth":
            return None
        return self.oauth if self.oauth is not None else OAuthSettings()

    def problems(self) -> tuple[tuple[str, str], ...]:
        """Every problem of this configuration as ``(key, message)`` pairs (the key is the
        field at fault, ``""`` for the entry as a whole). Never fails."""
        if not isinstance(self.name, str) or not valid_server_name(self.name):
            return (
                (
                    "name",
                    f"server name {self.name!r} is not allowed: use only letters, digits, "
                    "'.', '-', '_'",
                ),
            )
        name = self.name
        found: list[tuple[str, str]] = []
        kind = self.transport_kind
        if kind is TransportKind.CUSTOM:
            if self.transport_factory is None:
                found.append(("type", f"server {name!r}: type 'custom' needs a transport_factory"))
        elif both_or_neither := exactly_one_problem(
            name, has_url=self.url is not None, has_command=self.command is not None
        ):
            found.append(("", both_or_neither))
        elif kind is TransportKind.STDIO and self.command is None:
            found.append(("command", f"server {name!r}: type 'stdio' needs 'command'"))
        elif kind is not TransportKind.STDIO and self.url is None:
            found.append(("url", f"server {name!r}: type {kind.value!r} needs 'url'"))
        for key, allow_none in (
            ("connect_timeout", False),
            ("timeout", True),
            ("max_call_time", True),
        ):
            problem = _timeout_problem(key, getattr(self, key), allow_none=allow_none)
            if problem is not None:
                found.append((key, f"server {name!r}: {problem}"))
        size = self.max_frame_bytes
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            found.append(
                ("max_frame_bytes", f"server {name!r}: max_frame_bytes must be > 0, got {size!r}")
            )
        if self.protocol not in PROTOCOL_CHOICES:
            found.append(
                (
                    "protocol",
                    f"server {name!r}: protocol must be 'auto', 'legacy' or 'modern', "
                    f"got {self.protocol!r}",
                )
            )
        elif self.protocol == "modern" and kind is TransportKind.SSE:
            found.append(
                (
                    "protocol",
                    f"server {name!r}: protocol 'modern' (2026-07-28) does not run over the "
                    "legacy HTTP+SSE transport (type 'sse'): use type 'http', or protocol "
                    "'auto' or 'legacy'",
                )
            )
        if self.tool_shapes:
            found.extend(
                (key, f"server {name!r}: {message}")
                for key, message in tool_shape_problems(self.tool_shapes)
            )
        if self.trust_level not in _TRUST_LEVELS:
            found.append(
                (
                    "trust_level",
                    f"server {name!r}: trust_level must be 'untrusted' or 'trusted', "
                    f"got {self.trust_level!r}",
                )
            )
        if self.auth is not None:
            if self.auth not in _AUTH_MODES:
                found.append(
                    (
                        "auth",
                        f"server {name!r}: auth must be 'oauth' (or absent), got {self.auth!r}",
                    )
                )
            elif not kind.is_url:
                found.append(
                    (
                        "auth",
                        f"server {name!r}: auth applies to URL servers only, "
                        f"not to a {kind.value!r} server",
                    )
                )
            elif kind is TransportKind.WS:
                found.append(
                    (
                        "auth",
                        f"server {name!r}: auth 'oauth' is not available for a WebSocket server "
                        "(type 'ws'): OAuth sign-in goes over the HTTP transports ('http', "
                        "'sse'); send a WebSocket server's credentials in headers",
                    )
                )
        found.extend(self._oauth_problems())
        found.extend(self._network_problems(kind))
        return tuple(found)

    def _oauth_problems(self) -> list[tuple[str, str]]:
        settings: object = self.oauth
        if settings is None:
            return []
        if not isinstance(settings, OAuthSettings):
            return [
                (
                    "oauth",
                    f"server {self.name!r}: oauth must be an OAuthSettings, "
                    f"got {type(settings).__name__}",
                )
            ]
        return [
            (f"oauth.{key}", f"server {self.name!r}: oauth.{key} {message}")
            for key, message in oauth_problems(settings)
        ]

    def _network_problems(self, kind: TransportKind) -> list[tuple[str, str]]:
        """The problems of the settings of the network path to a URL server: the opt-in for
        plain ``http://`` / ``ws://`` to another machine, credentials given twice."""
        name = self.name
        found: list[tuple[str, str]] = []
        flag: object = self.allow_insecure_http  # hosts build configs from untyped code too
        if not isinstance(flag, bool):
            found.append(
                (
                    "allow_insecure_http",
                    f"server {name!r}: allow_insecure_http must be True or False",
                )
            )
        if not kind.is_url:
            for key in ("allow_insecure_http", *TLS_KEYS, "proxy"):
                if getattr(self, key):
                    found.append((key, f"server {name!r}: {key} applies to URL servers only"))
            return found
        for key in TLS_KEYS:
            path: object = getattr(self, key)
            if path is not None and (not isinstance(path, str) or not path):
                found.append((key, f"server {name!r}: {key} must be the path of a PEM file"))
        if self.client_key is not None and self.client_cert is None:
            found.append(
                (
                    "client_key",
                    f"server {name!r}: client_key is used with client_cert only: set client_cert "
                    "too",
                )
            )
        if self.proxy is not None and (why := proxy_problem(self.proxy)) is not None:
            found.append(("proxy", f"server {name!r}: proxy {why}"))
        if not isinstance(self.url, str):
            return found
        try:
            parts = urlsplit(self.url)
            host = parts.hostname or ""
        except ValueError:
            return found  # not a URL: the loader and the transport say so
        plaintext = plaintext_problem(parts.scheme, host, allow=self.allow_insecure_http is True)
        if plaintext is not None:
            found.append(("url", f"server {name!r}: url {redact_url(self.url)!r} {plaintext}"))
        if parts.scheme.lower() in ("http", "ws"):
            for key in TLS_KEYS:
                if getattr(self, key) is not None:
                    found.append(
                        (key, f"server {name!r}: {key} is only used with an https:// or wss:// URL")
                    )
        if (parts.username or parts.password) and any(
            name.lower() == "authorization" for name in self.headers
        ):
            found.append(
                (
                    "url",
                    f"server {self.name!r}: url holds user:password@ and headers has an "
                    "Authorization header too: give the credentials one way",
                )
            )
        return found

    @property
    def transport_kind(self) -> TransportKind:
        """The transport: given, or inferred (``command`` -> stdio, bare ``url`` -> HTTP)."""
        if self.type is not None:
            return self.type
        if self.transport_factory is not None:
            return TransportKind.CUSTOM
        return TransportKind.STDIO if self.command is not None else TransportKind.HTTP


@attrs.frozen(kw_only=True)
class RuntimeConfig:
    """Everything a runtime needs: the servers and the policies that apply to all of them.

    Raises :class:`McpTransportConfigError` when two servers share a name, and
    :class:`ConfigError` for a ``network_policy``, ``security_policy``, ``profile`` or
    ``catalog_shape`` outside the allowed values, a permission rule that is not a
    :class:`PermissionRule`, or a size setting out of range (``render_budget`` under 200,
    ``max_blob_bytes`` or ``catalog_list_cap`` under 1, ``offload_chars`` negative).
    """

    servers: tuple[ServerConfig, ...] = ()
    #: The master switch: False connects nothing.
    enabled: bool = True
    #: ``"deny"`` skips every URL server (HTTP, SSE, WebSocket): it stays DISABLED and its status
    #: says why. The default here is ``"allow"``; the Echo loader applies Echo's own default
    #: (``"deny"``) when the file does not set ``execution.networkPolicy``.
    network_policy: NetworkPolicy = "allow"
    #: What the injection scan does with a suspicious tool: refuse it (``"block"``) or only log.
    security_policy: SecurityPolicy = "block"
    retry: RetryPolicy = attrs.field(factory=RetryPolicy)
    #: Quiet time after a list_changed notification before re-listing.
    list_changed_debounce: float = 0.25
    #: Caps on a paginated listing: a server over them fails alone, with a clear error.
    max_list_pages: int = 100
    max_list_entries: int = 10_000
    #: Rounds of input a 2026-07-28 server may ask for to finish one call (``input_required``
    #: answers to a ``tools/call``, ``resources/read`` or ``prompts/get``); past them the call
    #: fails with ``InputRoundsExceeded``. 0 answers none.
    max_input_rounds: int = 8
    #: Keep the results a 2026-07-28 server says are fresh for a while (``ttlMs``:
    #: ``server/discover``, the tool, prompt, resource and template listings, resource reads)
    #: and answer from them until they expire or a change notification makes them stale; a
    #: reconnect then does not list again what is still fresh. Off: every request goes to the
    #: server. Legacy servers send no ``ttlMs``: nothing of theirs is kept either way.
    cache_results: bool = True
    #: Names of the host's own tools: an MCP tool mapping to one of them is refused.
    builtin_tool_names: frozenset[str] = frozenset()
    client_name: str = "trio-mcp"
    client_version: str | None = None
    #: Closing the runtime (every server withdrawn and its transport closed, child processes
    #: ended) takes at most this many seconds; what is left then is cancelled. stdio servers
    #: share it out between closing stdin, SIGTERM and SIGKILL.
    shutdown_grace: float = 10.0
    #: The budget, in bytes, of each connection's mailbox (frames from the server waiting for
    #: the session's table); a server that sends more waits (backpressure).
    mailbox_bytes: int = 256 * 1024

    # --- the model-facing surface (``AgentSurface.call_for_model``, ``AgentSurface.model_tools``)
    #: Permission rules over registered names (globs), first match wins.
    permission_rules: tuple[PermissionRule, ...] = attrs.field(default=(), converter=tuple)
    #: The host's profile: ``public_gateway`` and ``daemon`` deny the ``mcp.call`` capability
    #: unless it is in ``allowed_capabilities`` or an ``allow`` rule names the tool.
    profile: Profile = "default"
    allowed_capabilities: frozenset[str] = attrs.field(default=frozenset(), converter=frozenset)
    #: Binary tool outputs are saved under ``<working_dir>/.trio-mcp/tool-outputs/``; None means
    #: the current directory when the runtime starts.
    working_dir: Path | None = None
    #: Where the OAuth credentials of the servers with ``auth="oauth"`` are stored (one file per
    #: credential, mode 0600 in a 0700 directory); None: ``credentials/`` next to the user's
    #: ``mcp.json`` (``$XDG_CONFIG_HOME/trio-mcp/credentials``, see
    #: :func:`~trio_mcp.actors.config.credentials_path`).
    credentials_dir: Path | None = None
    #: Characters of text one rendered result gives the model (what is cut is said).
    render_budget: int = DEFAULT_RENDER_BUDGET
    #: Blobs bigger than this (bytes) are reported, never decoded.
    max_blob_bytes: int = MAX_BLOB_BYTES
    #: True shows a result's ``structuredContent`` to the model even when its text blocks
    #: already carry all of it (by default such a copy, ``{"result": x}`` or ``{"content":
    #: text}`` of the text, is left out so the model does not read the output twice).
    render_structured_always: bool = False
    #: The resource and prompt tools ``AgentSurface.model_tools()`` offers by default (None: none).
    catalog_shape: CatalogShape | None = "agentao"
    #: Entries one resource or prompt listing shows the model; the rest are counted and can be
    #: reached with the returned cursor.
    catalog_list_cap: int = DEFAULT_CATALOG_LIST_CAP
    #: Offer ``ui://`` resources and resource templates (interfaces an MCP App gives the host to
    #: show, not data for the model) in the model's resource listings. Off: they are left out.
    catalog_ui_resources: bool = False
    #: Tool listings and results with more characters of text than this are checked and rendered
    #: in a worker thread, so a hostile server cannot stall the event loop; smaller ones are
    #: handled inline. 0 sends everything to a thread.
    offload_chars: int = DEFAULT_OFFLOAD_CHARS
    #: Tasks (long-running tool calls the server runs in the background; docs/embedding.md
    #: "Tasks"): declare the client ``tasks`` capability (2025-11-25), opt into the tasks
    #: extension on every ``tools/call`` of a server that offers it (2026-07-28: the server
    #: decides), and call a tool whose ``execution.taskSupport`` is ``"required"`` as a task.
    #: ``rt.call`` follows the task to its end either way. Off: none of it (a tool that
    #: requires a task then fails as the server answers a plain call).
    tasks: bool = True
    #: Also call tools whose ``execution.taskSupport`` is ``"optional"`` as tasks (2025-11-25).
    tasks_for_optional: bool = False
    #: The directory (created ``0700``) where the ids of the tasks the host holds a handle for
    #: (``rt.start_task``) are kept, one ``0600`` file each, to resume them after a restart;
    #: None: ``<working_dir>/.trio-mcp/tasks``.
    task_store: Path | None = None
    #: OpenTelemetry (docs/embedding.md "Tracing"): the ``TracerProvider`` the runtime's spans
    #: go to; None: the global one (``opentelemetry.trace.set_tracer_provider``). Unused when
    #: OpenTelemetry is not installed. Not part of the configuration's equality.
    tracer_provider: TracerProvider | None = attrs.field(default=None, eq=False, repr=False)
    #: What becomes of failed calls (docs/embedding.md "Failed calls: the error policy"): the
    #: policy of every server that has none of its own...
    error_policy: ErrorPolicy = attrs.field(
        factory=ErrorPolicy, validator=lambda _i, _a, value: _check_error_policy(value)
    )
    #: ...and rules over registered names (globs), first match wins, before any server's.
    error_rules: tuple[ErrorRule, ...] = attrs.field(default=(), converter=as_error_rules)

    def __attrs_post_init__(self) -> None:
        if self.network_policy not in NETWORK_POLICIES:
            raise ConfigError(
                f"network_policy must be 'deny' or 'allow', got {self.network_policy!r}"
            )
        if self.security_policy not in SECURITY_POLICIES:
            raise ConfigError(
                f"security_policy must be 'block' or 'warn', got {self.security_policy!r}"
            )
        if self.profile not in PROFILES:
            raise ConfigError(
                f"profile must be one of {', '.join(map(repr, PROFILES))}, got {self.profile!r}"
            )
        if self.catalog_shape is not None and self.catalog_shape not in CATALOG_SHAPES:
            raise ConfigError(
                f"catalog_shape must be 'echo', 'agentao' or None, got {self.catalog_shape!r}"
            )
        for rule in self.permission_rules:
            if not isinstance(rule, PermissionRule):
                raise ConfigError(
                    f"permission_rules must hold PermissionRule objects (parse configuration "
                    f"entries with parse_rules()), got {rule!r}"
                )
        problem = _timeout_problem("shutdown_grace", self.shutdown_grace, allow_none=False)
        if problem is not None:
            raise ConfigError(problem)
        for key, minimum in (
            ("render_budget", 200),
            ("max_blob_bytes", 1),
            ("catalog_list_cap", 1),
            ("offload_chars", 0),
            ("mailbox_bytes", 1024),
            ("max_input_rounds", 0),
        ):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ConfigError(f"{key} must be an integer >= {minimum}, got {value!r}")
        for error_rule in self.error_rules:
            if not isinstance(error_rule, ErrorRule):
                raise ConfigError(
                    f"error_rules must hold ErrorRule objects (parse configuration entries "
                    f"with parse_error_rules()), got {error_rule!r}"
                )
        seen: set[str] = set()
        for server in self.servers:
            if server.name in seen:
                raise McpTransportConfigError(f"server {server.name!r} is configured twice")
            seen.add(server.name)

    def error_policy_for(self, name: str, server: str | None) -> ErrorPolicy:
        """The error policy of a call of the registered name ``name`` on ``server`` (None when
        not known): the first matching ``error_rules`` entry, else the server's
        ``error_policy``, else the runtime's."""
        for rule in self.error_rules:
            if rule.matches(name):
                return rule.policy
        for config in self.servers:
            if config.name == server and config.error_policy is not None:
                return config.error_policy
        return self.error_policy

    def server(self, name: str) -> ServerConfig:
        """The server called ``name``; raises ``KeyError`` when there is none."""
        for server in self.servers:
            if server.name == name:
                return server
        raise KeyError(name)

    @classmethod
    def from_servers(
        cls, servers: Mapping[str, ServerConfig] | Iterable[ServerConfig], **options: Any
    ) -> RuntimeConfig:
        """Build from a mapping ``name -> ServerConfig`` (or an iterable of them)."""
        items = servers.values() if isinstance(servers, Mapping) else servers
        return cls(servers=tuple(items), **options)
