"""Load a :class:`RuntimeConfig` from the configuration shapes hosts have today.

Two shapes, one typed result:

- **The Echo shape** (a dict, a YAML file or a JSON file): ``tools.mcp.enabled`` (the master
  switch), ``tools.mcp_servers.<name>``, ``tools.mcpSecurityPolicy``, ``tools.profile``,
  ``tools.allow`` (capabilities such as ``mcp.call``), ``permissions.rules`` and
  ``execution.networkPolicy`` (``"deny"`` by default in this shape: URL servers are skipped).
  The resource and prompt tools take the Echo shape (``mcp_resources`` / ``mcp_prompts``).
- **The Agentao shape** (``mcp.json`` with ``mcpServers.<name>``), layered: the user file
  (``$XDG_CONFIG_HOME/trio-mcp/mcp.json``, default ``~/.config/trio-mcp/mcp.json``), then the
  project file (``<working_dir>/.trio-mcp/mcp.json``), which may only *add* names: a name that
  the user file has is skipped with a warning, so a checked-in project file cannot redirect a
  known server. Servers the host passes in code (``extra_mcp_servers``) override by name.

Validation happens here, at load time, and fails closed: every problem of every file is
collected and raised at once as one :class:`ConfigError` (or :class:`McpTransportConfigError`
when a problem concerns how a server is reached), each problem naming the file and the key path.
``${VAR}``, ``$VAR`` and ``${VAR:-default}`` expand in ``env`` and ``headers`` values, in
``args`` and in ``url``; an unset variable without a default is an error, so a literal
``${VAR}`` never reaches a server. A variable that is set but empty counts as unset in
``headers`` and ``url`` (no request goes out with ``Bearer ``), becomes ``""`` with a warning in
``args``, and is passed on as it is in ``env``. ``$$`` is a literal ``$``.

Loading returns a :class:`LoadedConfig`: the config plus the warnings (also logged under
``trio_mcp.config``). :func:`redacted_config` is the printable form, with secrets hidden.
"""

from __future__ import annotations

import difflib
import json
import logging
import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias

import attrs

from ...protocol._errors import ConfigError, McpTransportConfigError
from ...transports._tls import TLS_KEYS, tls_context
from ...transports.oauth._types import Grant, OAuthSettings
from ._approvals import APPROVALS_FILE_NAME, project_origin
from ._callpolicy import ErrorPolicy, parse_error_policy, parse_error_rules
from ._config import (
    DEFAULT_CALL_TIMEOUT,
    DEFAULT_CONNECT_TIMEOUT,
    NETWORK_POLICIES,
    PROTOCOL_CHOICES,
    SECURITY_POLICIES,
    RuntimeConfig,
    ServerConfig,
    TransportKind,
    exactly_one_problem,
    redact_args,
    redact_url,
    valid_server_name,
)
from ._naming import server_names_may_clash
from ._oauth import (
    CREDENTIALS_DIR_NAME,
    OAUTH_KEYS,
    oauth_problems,
    oauth_view,
    read_private_key_file,
)
from ._policy import PROFILES, PermissionRule, parse_rules
from ._redact import REDACTED
from ._shaping import parse_tool_shapes, shape_view

__all__ = [
    "CONFIG_FILE_NAME",
    "PROJECT_CONFIG_DIR",
    "USER_CONFIG_DIR",
    "ConfigShape",
    "ExtraServers",
    "LoadedConfig",
    "approvals_path",
    "credentials_path",
    "expand_variables",
    "load_agentao_config",
    "load_config",
    "load_echo_config",
    "load_mcp_json",
    "project_config_path",
    "redacted_config",
    "user_config_path",
]

logger = logging.getLogger("trio_mcp.config")

#: The Agentao-shape file name, in the user and the project directory.
CONFIG_FILE_NAME: Final = "mcp.json"
#: The user directory's name under ``$XDG_CONFIG_HOME`` (default ``~/.config``).
USER_CONFIG_DIR: Final = "trio-mcp"
#: The project directory's name under the working directory.
PROJECT_CONFIG_DIR: Final = ".trio-mcp"

ConfigShape = Literal["echo", "agentao"]
#: What the host may pass in code: a ServerConfig, or an entry in the Agentao shape.
ExtraServers: TypeAlias = Mapping[str, ServerConfig | Mapping[str, Any]]

_TYPES: Final[Mapping[str, TransportKind]] = {
    "stdio": TransportKind.STDIO,
    "http": TransportKind.HTTP,
    "streamable-http": TransportKind.HTTP,
    "streamable_http": TransportKind.HTTP,
    "sse": TransportKind.SSE,
    "ws": TransportKind.WS,
}
_TYPE_HELP: Final = "use 'stdio', 'http' (or 'streamable-http', 'streamable_http'), 'sse' or 'ws'"
_SCHEMES: Final[Mapping[TransportKind, tuple[str, ...]]] = {
    TransportKind.HTTP: ("http", "https"),
    TransportKind.SSE: ("http", "https"),
    TransportKind.WS: ("ws", "wss"),
}
_LOG_LEVELS: Final = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
_STDIO_KEYS: Final = ("command", "args", "env", "cwd")
_URL_KEYS: Final = (
    "url",
    "headers",
    "auth",
    "oauth",
    "allow_insecure_http",
    "ca_bundle",
    "client_cert",
    "client_key",
    "proxy",
)
#: Keys whose problems are transport problems (McpTransportConfigError).
#: (The ``oauth`` table's problems are configuration problems: ConfigError.)
_TRANSPORT_KEYS: Final = frozenset({"", "name", "type", *_STDIO_KEYS, *_URL_KEYS}) - {"oauth"}
_COMMON_KEYS: Final = frozenset(
    {
        "type",
        *_STDIO_KEYS,
        *_URL_KEYS,
        "enabled",
        "tools_include",
        "tools_exclude",
        "resources",
        "skills",
        "log_level",
        "max_frame_bytes",
        "progress_resets_timeout",
        "max_call_time",
        "protocol",
        "tools",
        "error_policy",
    }
)
_SHAPE_KEYS: Final[Mapping[ConfigShape, frozenset[str]]] = {
    "echo": _COMMON_KEYS | {"trust_level", "connect_timeout", "timeout"},
    "agentao": _COMMON_KEYS | {"trust", "timeout"},
}
_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
#: What a variable that is set but empty means where it is expanded: ``keep`` (``env``: the
#: child gets the empty value, as the host has it), ``unset`` (``headers``, ``url``: an error
#: unless a default is given, so no request goes out with ``Bearer ``), ``warn`` (``args``:
#: ``""`` in its place, with a warning).
_EmptyRule: TypeAlias = Literal["keep", "unset", "warn"]
_EMPTY_RULES: Final[Mapping[str, _EmptyRule]] = {
    "env": "keep",
    "headers": "unset",
    "url": "unset",
    "args": "warn",
    "oauth": "unset",
}
_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


# --------------------------------------------------------------------------- results


@attrs.frozen(kw_only=True)
class LoadedConfig:
    """A loaded configuration: the typed ``config``, which ``shape`` it was read from, the
    files read (``sources``, in order) and the ``warnings`` (skipped project entries, URL
    servers the network policy skips, ignored keys...), which were also logged under
    ``trio_mcp.config``."""

    config: RuntimeConfig
    shape: ConfigShape
    sources: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


# --------------------------------------------------------------------------- paths


def user_config_path(environ: Mapping[str, str] | None = None) -> Path:
    """The user's ``mcp.json``: ``$XDG_CONFIG_HOME/trio-mcp/mcp.json``, or
    ``~/.config/trio-mcp/mcp.json`` when ``XDG_CONFIG_HOME`` is unset, empty or relative (the
    XDG rule). ``environ`` defaults to ``os.environ``. Never fails."""
    env = os.environ if environ is None else environ
    xdg = env.get("XDG_CONFIG_HOME")
    if xdg and Path(xdg).is_absolute():
        base = Path(xdg)
    else:
        home = env.get("HOME")
        base = (Path(home) if home else Path.home()) / ".config"
    return base / USER_CONFIG_DIR / CONFIG_FILE_NAME


def approvals_path(environ: Mapping[str, str] | None = None) -> Path:
    """The project approval store: ``project-approvals.json`` next to the user's ``mcp.json``
    (:func:`user_config_path`). Never fails."""
    return user_config_path(environ).parent / APPROVALS_FILE_NAME


def credentials_path(environ: Mapping[str, str] | None = None) -> Path:
    """Where OAuth credentials live by default: ``credentials/`` next to the user's
    ``mcp.json`` (:func:`user_config_path`: ``$XDG_CONFIG_HOME/trio-mcp/credentials``, or
    ``~/.config/trio-mcp/credentials``). ``RuntimeConfig.credentials_dir`` overrides it. Never
    fails."""
    return user_config_path(environ).parent / CREDENTIALS_DIR_NAME


def project_config_path(working_dir: str | os.PathLike[str] | None = None) -> Path:
    """The project's ``mcp.json``: ``<working_dir>/.trio-mcp/mcp.json`` (default: the current
    directory). Never fails."""
    base = Path.cwd() if working_dir is None else Path(working_dir)
    return base / PROJECT_CONFIG_DIR / CONFIG_FILE_NAME


# --------------------------------------------------------------------------- ${VAR} expansion


def _expand(text: str, environ: Mapping[str, str]) -> tuple[str, list[str], list[str]]:
    """``text`` with ``$VAR``, ``${VAR}`` and ``${VAR:-default}`` expanded and ``$$`` made a
    literal ``$``; plus one message per problem (an unset variable, bad syntax), and the
    references (``${VAR}`` or ``$VAR``, as written) to variables that are set but empty and
    were expanded to ``""`` without a default (where that counts as unset is the caller's
    rule)."""
    out: list[str] = []
    problems: list[str] = []
    empty: list[str] = []
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char != "$":
            out.append(char)
            i += 1
            continue
        following = text[i + 1 : i + 2]
        if following == "$":
            out.append("$")
            i += 2
        elif following == "{":
            end, depth, j = -1, 1, i + 2
            while j < n:
                if text.startswith("${", j):
                    depth += 1
                    j += 2
                    continue
                if text[j] == "}":
                    depth -= 1
                    if depth == 0:
                        end = j
                        break
                j += 1
            if end < 0:
                problems.append(f"'{text[i:]}' has no closing '}}' (write $$ for a literal '$')")
                return "".join(out), problems, empty
            inner = text[i + 2 : end]
            name, sep, default = inner.partition(":-")
            if not _VAR_NAME.fullmatch(name):
                problems.append(
                    f"'${{{inner}}}' is not a variable reference: use ${{NAME}}, "
                    "${NAME:-default} or $$ for a literal '$'"
                )
            else:
                value = environ.get(name)
                if value == "" and not sep:
                    empty.append(f"${{{name}}}")
                if value is None or (sep and value == ""):
                    if sep:
                        value, nested, nested_empty = _expand(default, environ)
                        problems.extend(nested)
                        empty.extend(nested_empty)
                    else:
                        problems.append(
                            f"${{{name}}} is not set: set the variable, or give a default with "
                            f"${{{name}:-default}}"
                        )
                        value = ""
                out.append(value)
            i = end + 1
        elif match := _VAR_NAME.match(text, i + 1):
            name = match.group()
            value = environ.get(name)
            if value is None:
                problems.append(
                    f"${name} is not set: set the variable, or give a default with "
                    f"${{{name}:-default}}"
                )
                value = ""
            elif value == "":
                empty.append(f"${name}")
            out.append(value)
            i = match.end()
        else:
            out.append("$")  # a '$' before anything else ('$5', '$ ', a trailing '$') stays
            i += 1
    return "".join(out), problems, empty


def expand_variables(text: str, environ: Mapping[str, str] | None = None) -> str:
    """Expand ``$VAR``, ``${VAR}`` and ``${VAR:-default}`` (the default is used when the
    variable is unset or empty, and is itself expanded) in ``text``; ``$$`` is a literal ``$``,
    and a ``$`` before anything that is not a name or ``{`` stays as it is. ``environ``
    defaults to ``os.environ``; expanded values are not expanded again.

    Raises :class:`ConfigError` naming every unset variable (without a default) and every
    malformed ``${...}``."""
    value, problems, _ = _expand(text, os.environ if environ is None else environ)
    if problems:
        raise ConfigError(
            "; ".join(problems), problems=tuple(("", problem) for problem in problems)
        )
    return value


# --------------------------------------------------------------------------- reading files


class _Obj(dict[str, Any]):
    """A JSON/YAML object that remembers the keys it saw more than once."""

    duplicates: list[str]

    def __init__(self, pairs: list[tuple[Any, Any]]) -> None:
        super().__init__()
        self.duplicates = []
        for key, value in pairs:
            if key in self:
                self.duplicates.append(str(key))
            self[key] = value


def _yaml_loader() -> Any:
    import yaml

    class Loader(yaml.SafeLoader):  # type: ignore[misc]
        pass

    def construct_mapping(loader: Any, node: Any) -> _Obj:
        loader.flatten_mapping(node)
        pairs = [
            (loader.construct_object(k, deep=True), loader.construct_object(v, deep=True))
            for k, v in node.value
        ]
        return _Obj(pairs)

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    return yaml, Loader


class _Unread:
    """What :meth:`_Reader.read_file` gives for a file it could not (or need not) read."""

    def __repr__(self) -> str:
        return "UNREAD"


_UNREAD: Final = _Unread()


def _is_yaml(path: Path) -> bool:
    return path.suffix.lower() in (".yaml", ".yml")


# --------------------------------------------------------------------------- the reader


def _key_path(base: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{base}[{key}]"
    if _PLAIN_KEY.fullmatch(key):
        return f"{base}.{key}" if base else key
    return f"{base}[{json.dumps(key)}]"


@attrs.define
class _Entry:
    """A server entry before it is read: where it comes from."""

    name: Any
    value: Any
    source: str
    path: str


@attrs.define
class _Reader:
    """Reads configuration data, collecting every problem (with file and key path) and every
    warning instead of stopping at the first."""

    environ: Mapping[str, str]
    problems: list[tuple[str, str, bool]] = attrs.field(factory=list)
    warnings: list[str] = attrs.field(factory=list)
    sources: list[str] = attrs.field(factory=list)

    # -------------------------------------------------------------- bookkeeping

    def problem(self, source: str, path: str, message: str, *, transport: bool = False) -> None:
        where = f"{source}: {path}" if path else f"{source}: (top level)"
        self.problems.append((where, message, transport))

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    def finish(
        self, servers: Mapping[str, ServerConfig], shape: ConfigShape, **options: Any
    ) -> LoadedConfig:
        if self.problems:
            count = len(self.problems)
            lines = [f"  {where}: {message}" for where, message, _ in self.problems]
            error = (
                McpTransportConfigError
                if any(transport for _, _, transport in self.problems)
                else ConfigError
            )
            raise error(
                "\n".join(
                    [f"invalid MCP configuration ({count} problem{'s' * (count != 1)}):", *lines]
                ),
                problems=tuple((where, message) for where, message, _ in self.problems),
            )
        config = RuntimeConfig(servers=tuple(servers.values()), **options)
        for warning in self.warnings:
            logger.warning("%s", warning)
        return LoadedConfig(
            config=config, shape=shape, sources=tuple(self.sources), warnings=tuple(self.warnings)
        )

    # -------------------------------------------------------------- files

    def read_file(self, path: Path, *, required: bool) -> Any:
        """The parsed contents of ``path`` (JSON, or YAML for .yaml/.yml); ``_UNREAD`` when
        it is absent (a problem if ``required``) or cannot be read or parsed (a problem)."""
        source = str(path)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            if required:
                self.problem(source, "", "no such file")
            return _UNREAD
        except OSError as exc:
            self.problem(source, "", f"cannot read the file: {exc.strerror or exc}")
            return _UNREAD
        self.sources.append(source)
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            self.problem(source, "", f"not UTF-8 text (byte {exc.start})")
            return _UNREAD
        if _is_yaml(path):
            return self.parse_yaml(text, source)
        return self.parse_json(text, source)

    def parse_json(self, text: str, source: str) -> Any:
        try:
            return json.loads(text, object_pairs_hook=_Obj)
        except json.JSONDecodeError as exc:
            self.problem(
                source, f"line {exc.lineno} column {exc.colno}", f"invalid JSON: {exc.msg}"
            )
            return _UNREAD

    def parse_yaml(self, text: str, source: str) -> Any:
        try:
            yaml, loader = _yaml_loader()
        except ImportError:
            self.problem(
                source,
                "",
                "reading YAML needs PyYAML: install trio-mcp[yaml] (pip install "
                "'trio-mcp[yaml]'), or write the configuration as JSON",
            )
            return _UNREAD
        try:
            return yaml.load(text, Loader=loader)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"line {mark.line + 1} column {mark.column + 1}" if mark else ""
            what = getattr(exc, "problem", None) or str(exc)
            self.problem(source, where, f"invalid YAML: {what}")
            return _UNREAD

    def mapping(self, value: Any, source: str, path: str, what: str) -> Mapping[str, Any] | None:
        """``value`` if it is an object (its duplicate and non-string keys reported), None if it
        is null; anything else is a problem (and None)."""
        if value is None:
            return None
        if not isinstance(value, Mapping):
            self.problem(source, path, f"{what} must be an object, got {_show(value)}")
            return None
        for key in getattr(value, "duplicates", ()):
            self.problem(
                source,
                _key_path(path, key),
                f"the key {key!r} appears more than once in {what} (keep only one)",
            )
        for key in value:
            if not isinstance(key, str):
                self.problem(source, path, f"{what} has a key that is not a string: {key!r}")
        return {key: item for key, item in value.items() if isinstance(key, str)}

    def choice(
        self,
        section: Mapping[str, Any],
        key: str,
        allowed: tuple[str, ...],
        default: str,
        source: str,
        path: str,
    ) -> str:
        """``section[key]`` when it is one of ``allowed``; ``default`` when absent or null."""
        value = section.get(key)
        if value is None:
            return default
        if not isinstance(value, str) or value not in allowed:
            options = " or ".join(repr(option) for option in allowed)
            self.problem(source, _key_path(path, key), f"must be {options}, got {_show(value)}")
            return default
        return value

    def boolean(
        self, section: Mapping[str, Any], key: str, default: bool, source: str, path: str
    ) -> bool:
        """``section[key]`` when it is true or false; ``default`` when absent."""
        value = section.get(key, default)
        if not isinstance(value, bool):
            self.problem(source, _key_path(path, key), f"must be true or false, got {_show(value)}")
            return default
        return value

    def capabilities(self, value: Any, source: str, path: str) -> frozenset[str]:
        """A list of capability names (such as ``mcp.call``); absent or null is empty."""
        if value is None:
            return frozenset()
        if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
            self.problem(
                source,
                path,
                f"must be a list of capability names such as 'mcp.call', got {_show(value)}",
            )
            return frozenset()
        return frozenset(value)

    def rules(self, value: Any, source: str, path: str) -> tuple[PermissionRule, ...]:
        """Permission rules ``[{"tool": "<glob>", "action": "allow|deny|ask"}]``; absent or
        null is none. Each bad entry is a problem."""
        if value is None:
            return ()
        if not isinstance(value, list):
            self.problem(source, path, f"must be a list of rules, got {_show(value)}")
            return ()
        try:
            return parse_rules(value, source=path)
        except ConfigError as exc:
            for where, message in exc.problems:
                self.problem(source, where, message)
            return ()

    def error_settings(self, tools: Mapping[str, Any], source: str) -> dict[str, Any]:
        """The Echo shape's ``tools.mcpErrorPolicy`` (an error policy object) and
        ``tools.mcpErrorRules`` (``[{"tool": "<glob>", ...policy keys}]``) as options."""
        options: dict[str, Any] = {}
        if tools.get("mcpErrorPolicy") is not None:
            policy, problems = parse_error_policy(
                tools["mcpErrorPolicy"], source="tools.mcpErrorPolicy"
            )
            for where, message in problems:
                self.problem(source, where, message)
            if policy is not None:
                options["error_policy"] = policy
        rules = tools.get("mcpErrorRules")
        if rules is None:
            return options
        if not isinstance(rules, list):
            self.problem(source, "tools.mcpErrorRules", f"must be a list, got {_show(rules)}")
            return options
        try:
            options["error_rules"] = parse_error_rules(rules, source="tools.mcpErrorRules")
        except ConfigError as exc:
            for where, message in exc.problems:
                self.problem(source, where, message)
        return options

    def unknown_keys(
        self, section: Mapping[str, Any], known: frozenset[str], source: str, path: str
    ) -> None:
        """Warn about keys this loader does not read (sections that other programs share)."""
        for key in section:
            if key not in known:
                self.warn(
                    f"{source}: {_key_path(path, key)}: unknown key, ignored{_nearest(key, known)}"
                )

    # -------------------------------------------------------------- servers

    def server(self, entry: _Entry, shape: ConfigShape) -> ServerConfig | None:
        """Read one server entry; None (with problems recorded) when it is invalid."""
        return _ServerReader(self, entry, shape).read()


def _nearest(key: Any, known: frozenset[str]) -> str:
    """``; did you mean 'command'?`` for a misspelt key (the closest known one, by
    :func:`difflib.get_close_matches`), else ``""``."""
    close = difflib.get_close_matches(str(key), sorted(known), n=1, cutoff=0.7)
    return f"; did you mean {close[0]!r}?" if close else ""


def _show(value: Any) -> str:
    """A short description of a configuration value for an error message (never its whole
    text: it may be long)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "an array"
    text = repr(value)
    if len(text) <= 60:
        return text
    return text[:56] + ("...'" if isinstance(value, str) else "...")


@attrs.define
class _ServerReader:
    """Reads one server entry in one shape into a :class:`ServerConfig`."""

    reader: _Reader
    entry: _Entry
    shape: ConfigShape
    name: str = attrs.field(init=False, default="")
    data: Mapping[str, Any] = attrs.field(init=False, factory=dict)

    def bad(self, keys: tuple[str | int, ...], message: str) -> None:
        path = self.entry.path
        for key in keys:
            path = _key_path(path, key)
        first = keys[0] if keys else ""
        self.reader.problem(
            self.entry.source,
            path,
            f"server {self.name!r}: {message}",
            transport=first in _TRANSPORT_KEYS,
        )

    def note(self, keys: tuple[str | int, ...], message: str) -> None:
        """A warning about the value at ``keys`` of this entry."""
        path = self.entry.path
        for key in keys:
            path = _key_path(path, key)
        self.reader.warn(f"{self.entry.source}: {path}: server {self.name!r}: {message}")

    def empty_variables(self, keys: tuple[str | int, ...], references: list[str]) -> bool:
        """Apply the rule of ``keys[0]`` to variables that were set but empty; False when that
        makes the value an error."""
        rule = _EMPTY_RULES.get(str(keys[0]), "keep")
        for reference in dict.fromkeys(references):
            name = reference.strip("${}")
            if rule == "unset":
                self.bad(
                    keys,
                    f"{reference} is set but empty, which counts as unset here (an empty value "
                    f"is never sent): set it, or give a default with ${{{name}:-default}}",
                )
            elif rule == "warn":
                self.note(
                    keys,
                    f"{reference} is set but empty: the argument gets '' in its place (set the "
                    f"variable, or give a default with ${{{name}:-default}})",
                )
        return not (references and rule == "unset")

    # -------------------------------------------------------------- values

    def string(self, key: str) -> str | None:
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, str) or not value or "\0" in value:
            self.bad((key,), f"{key} must be a non-empty string, got {_show(value)}")
            return None
        return value

    def text(self, value: Any, keys: tuple[str | int, ...], *, expand: bool) -> str | None:
        """A string, ``${VAR}``-expanded when ``expand`` (then integers are taken as their
        decimal text: ``PORT: 8080`` in YAML). None (with problems recorded) when it is wrong
        or names an unset variable."""
        if expand and isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str):
            hint = " (quote it)" if isinstance(value, bool | float) else ""
            self.bad(keys, f"must be a string, got {_show(value)}{hint}")
            return None
        text: str = value
        if expand:
            text, problems, empty = _expand(text, self.reader.environ)
            for problem in problems:
                self.bad(keys, problem)
            if problems or not self.empty_variables(keys, empty):
                return None
        if "\0" in text:
            self.bad(keys, "must not contain NUL characters")
            return None
        return text

    def strings(self, key: str, *, expand: bool) -> tuple[str, ...] | None:
        value = self.data.get(key)
        if value is None:
            return None
        if isinstance(value, str):  # not quoted back: an argument string may hold a secret
            self.bad((key,), f"{key} must be an array of strings, not one string: split it")
            return None
        if not isinstance(value, list | tuple):
            self.bad((key,), f"{key} must be an array of strings, got {_show(value)}")
            return None
        items = [self.text(item, (key, index), expand=expand) for index, item in enumerate(value)]
        return tuple(item for item in items if item is not None)

    def text_map(self, key: str) -> dict[str, str]:
        section = self.reader.mapping(
            self.data.get(key),
            self.entry.source,
            _key_path(self.entry.path, key),
            f"server {self.name!r}: {key}",
        )
        if section is None:
            return {}
        out: dict[str, str] = {}
        for name, raw in section.items():
            if key == "env" and (not name or "=" in name or "\0" in name):
                self.bad((key, name), "a variable name must be non-empty, without '=' or NUL")
                continue
            if key == "headers" and not _HEADER_NAME.fullmatch(name):
                self.bad((key, name), f"{name!r} is not a valid HTTP header name")
                continue
            value = self.text(raw, (key, name), expand=True)
            if value is None:
                continue
            if key == "headers" and ("\r" in value or "\n" in value):
                self.bad((key, name), "a header value must not contain line breaks")
                continue
            out[name] = value
        return out

    def flag(self, key: str, default: bool) -> bool:
        value = self.data.get(key, default)
        if not isinstance(value, bool):
            self.bad((key,), f"{key} must be true or false, got {_show(value)}")
            return default
        return value

    def seconds(
        self, value: Any, keys: tuple[str | int, ...], *, allow_none: bool
    ) -> float | Literal[False] | None:
        """A timeout: a finite number of seconds > 0 (``None`` where allowed). ``False`` when
        it is invalid (a problem was recorded)."""
        if value is None and allow_none:
            return None
        label = ".".join(str(key) for key in keys)
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.bad(keys, f"{label} must be a number of seconds, got {_show(value)}")
            return False
        if not math.isfinite(value) or value <= 0:
            self.bad(keys, f"{label} must be a finite number of seconds > 0, got {_show(value)}")
            return False
        return float(value)

    # -------------------------------------------------------------- the entry

    def read(self) -> ServerConfig | None:
        entry = self.entry
        before = len(self.reader.problems)
        self.name = entry.name if isinstance(entry.name, str) else str(entry.name)
        if not isinstance(entry.name, str) or not valid_server_name(entry.name):
            # Reported, and the entry is still read: every problem of a file at once.
            self.reader.problem(
                entry.source,
                entry.path,
                f"server name {entry.name!r} is not allowed: use only letters, digits, "
                "'.', '-', '_'",
                transport=True,
            )
        if not isinstance(entry.value, Mapping):
            self.reader.problem(
                entry.source,
                entry.path,
                f"server {self.name!r}: the entry must be an object with 'command' (stdio) or "
                f"'url', got {_show(entry.value)}",
                transport=True,
            )
            return None
        data = self.reader.mapping(entry.value, entry.source, entry.path, f"server {self.name!r}")
        assert data is not None
        self.data = data
        known = _SHAPE_KEYS[self.shape]
        for key in data:
            if key not in known:
                self.bad(
                    (key,),
                    f"unknown key {key!r}{_nearest(key, known)} (known keys: "
                    f"{', '.join(sorted(known))})",
                )
        options = self.transport() | self.behaviour()
        if len(self.reader.problems) > before:
            return None
        try:
            return ServerConfig(name=self.name, **options)
        except McpTransportConfigError as exc:  # a rule the checks above do not cover
            for key, message in exc.problems or (("", str(exc)),):
                self.reader.problem(
                    entry.source,
                    _key_path(entry.path, key) if key else entry.path,
                    message,
                    transport=True,
                )
            return None

    def transport(self) -> dict[str, Any]:
        data = self.data
        options: dict[str, Any] = {}
        kind: TransportKind | None = None
        raw_type = data.get("type")
        if raw_type is not None:
            if isinstance(raw_type, str) and raw_type in _TYPES:
                kind = options["type"] = _TYPES[raw_type]
            else:
                self.bad(("type",), f"unknown type {_show(raw_type)}; {_TYPE_HELP}")
        has_command, has_url = data.get("command") is not None, data.get("url") is not None
        both_or_neither = exactly_one_problem(self.name, has_url=has_url, has_command=has_command)
        if both_or_neither is not None:
            self.reader.problem(self.entry.source, self.entry.path, both_or_neither, transport=True)
        inferred = kind or (TransportKind.STDIO if has_command else TransportKind.HTTP)
        if raw_type is not None and kind is not None and both_or_neither is None:
            if kind is TransportKind.STDIO and not has_command:
                self.bad(("command",), "type 'stdio' needs 'command' (it has 'url')")
            elif kind is not TransportKind.STDIO and not has_url:
                self.bad(("url",), f"type {kind.value!r} needs 'url' (it has 'command')")
        if both_or_neither is None:
            wrong = _URL_KEYS if inferred is TransportKind.STDIO else _STDIO_KEYS
            for key in wrong:
                if key in data and key not in ("command", "url"):
                    applies = "URL" if inferred is TransportKind.STDIO else "stdio"
                    self.bad(
                        (key,),
                        f"{key!r} applies to {applies} servers only; this is a "
                        f"{inferred.value!r} server",
                    )
        if (command := self.string("command")) is not None:
            options["command"] = command
        if (args := self.strings("args", expand=True)) is not None:
            options["args"] = args
        if "env" in data:
            options["env"] = self.text_map("env")
        if (cwd := self.string("cwd")) is not None:
            options["cwd"] = cwd
        if "url" in data and data["url"] is not None:
            url = self.text(data["url"], ("url",), expand=True)
            if url is not None:
                options["url"] = url
                self.check_url(url, inferred)
        if "headers" in data:
            options["headers"] = self.text_map("headers")
        auth = data.get("auth")
        if auth is not None:
            if auth != "oauth":
                self.bad(("auth",), f"auth must be 'oauth' (or absent), got {_show(auth)}")
            else:
                options["auth"] = auth
        if data.get("oauth") is not None and inferred is not TransportKind.STDIO:
            options |= self.oauth(data["oauth"])
        options |= self.network(inferred, options.get("url"))
        return options

    def oauth(self, raw: Any) -> dict[str, Any]:
        """The ``oauth`` table: :class:`OAuthSettings` (its presence implies ``auth:
        "oauth"``). ``client_id``, ``client_secret``, ``private_key`` and ``private_key_file``
        are ``${VAR}``-expanded; ``private_key_file`` is read now. Unknown keys are kept in
        ``extra``, with a warning."""
        section = self.reader.mapping(
            raw,
            self.entry.source,
            _key_path(self.entry.path, "oauth"),
            f"server {self.name!r}: oauth",
        )
        if section is None:
            return {}
        before = len(self.reader.problems)
        values: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in section.items():
            if key not in OAUTH_KEYS:
                self.note(
                    ("oauth", key),
                    f"unknown key {key!r} in oauth, kept but not used by this version (known "
                    f"keys: {', '.join(sorted(OAUTH_KEYS))})",
                )
                extra[key] = value
        for key, expand in (
            ("client_id", True),
            ("client_secret", True),
            ("client_metadata_url", False),
            ("token_endpoint_auth_method", False),
            ("signing_algorithm", False),
            ("redirect_uri", False),
            ("client_name", False),
            ("private_key", True),
        ):
            if section.get(key) is not None:
                text = self.text(section[key], ("oauth", key), expand=expand)
                if text is not None:
                    values[key] = text
        if section.get("scopes") is not None:
            scopes = self.scopes(section["scopes"])
            if scopes is not None:
                values["scopes"] = scopes
        grant = section.get("grant")
        if grant is not None:
            choices = tuple(g.value for g in Grant)
            if grant not in choices:
                self.bad(
                    ("oauth", "grant"),
                    f"must be {' or '.join(map(repr, choices))}, got {_show(grant)}",
                )
            else:
                values["grant"] = Grant(grant)
        if "dpop" in section:
            dpop = section["dpop"]
            if not isinstance(dpop, bool):
                self.bad(("oauth", "dpop"), f"must be true or false, got {_show(dpop)}")
            else:
                values["dpop"] = dpop
        steps = section.get("max_step_up")
        if steps is not None:
            if isinstance(steps, bool) or not isinstance(steps, int):
                self.bad(("oauth", "max_step_up"), f"must be an integer, got {_show(steps)}")
            else:
                values["max_step_up"] = steps
        if section.get("private_key_file") is not None:
            if section.get("private_key") is not None:
                self.bad(
                    ("oauth", "private_key_file"),
                    "give the private key once: private_key or private_key_file",
                )
            else:
                key_text = self.private_key_file(section["private_key_file"])
                if key_text is not None:
                    values["private_key"] = key_text
        if len(self.reader.problems) > before:
            return {}
        settings = OAuthSettings(**values, extra=extra)
        for key, message in oauth_problems(settings):
            self.bad(("oauth", key), message)
        return {"oauth": settings}

    def scopes(self, value: Any) -> tuple[str, ...] | None:
        """``scopes``: a list of scopes, or one string of scopes separated by spaces."""
        if isinstance(value, str):
            return tuple(value.split())
        if not isinstance(value, list | tuple):
            self.bad(
                ("oauth", "scopes"),
                f"must be a list of scopes or one space-separated string, got {_show(value)}",
            )
            return None
        items = [
            self.text(item, ("oauth", "scopes", i), expand=False) for i, item in enumerate(value)
        ]
        if any(item is None for item in items):
            return None
        return tuple(item for item in items if item is not None)

    def private_key_file(self, value: Any) -> str | None:
        """The PEM text of ``private_key_file`` (``${VAR}`` and ``~`` expanded; a relative
        path is relative to the configuration file's directory)."""
        path = self.text(value, ("oauth", "private_key_file"), expand=True)
        if path is None:
            return None
        file = Path(path).expanduser()
        source = Path(self.entry.source)
        if not file.is_absolute() and source.is_file():
            file = source.parent / file
        try:
            return read_private_key_file(file)
        except ConfigError as exc:
            self.bad(("oauth", "private_key_file"), str(exc))
            return None

    def network(self, kind: TransportKind, url: str | None) -> dict[str, Any]:
        """The settings of the network path to a URL server: ``allow_insecure_http``, the TLS
        files (checked here, for an ``https://`` or ``wss://`` server: they must load) and
        ``proxy`` (``${VAR}`` expanded, like ``url``)."""
        options: dict[str, Any] = {}
        if "allow_insecure_http" in self.data:
            options["allow_insecure_http"] = self.flag("allow_insecure_http", False)
        before = len(self.reader.problems)
        for key in TLS_KEYS:
            if (path := self.string(key)) is not None:
                options[key] = path
        if self.data.get("proxy") is not None:
            proxy = self.text(self.data["proxy"], ("proxy",), expand=True)
            if proxy is not None:
                options["proxy"] = proxy
        secure = kind.is_url and (url or "").lower().startswith(("https://", "wss://"))
        if secure and len(self.reader.problems) == before and any(k in options for k in TLS_KEYS):
            try:
                tls_context(
                    ca_bundle=options.get("ca_bundle"),
                    client_cert=options.get("client_cert"),
                    client_key=options.get("client_key"),
                )
            except McpTransportConfigError as exc:
                for key, message in exc.problems:
                    self.bad((key,), f"{key}: {message}")
        return options

    def check_url(self, url: str, kind: TransportKind) -> None:
        schemes = _SCHEMES.get(kind)
        if schemes is None:
            return
        scheme, sep, rest = url.partition("://")
        host = rest.split("/", 1)[0].rpartition("@")[2]
        if not sep or scheme.lower() not in schemes or not host:
            hint = ""
            if kind is not TransportKind.WS and scheme.lower() in ("ws", "wss"):
                hint = ' (set "type": "ws" for a WebSocket server)'
            self.bad(
                ("url",),
                f"url {redact_url(url)!r} is not an absolute {' or '.join(schemes)} URL for a "
                f"{kind.value!r} server{hint}",
            )

    def behaviour(self) -> dict[str, Any]:
        data = self.data
        options: dict[str, Any] = {"enabled": self.flag("enabled", True)}
        if self.shape == "echo":
            trust = data.get("trust_level", "untrusted")
            if trust not in ("untrusted", "trusted"):
                self.bad(
                    ("trust_level",),
                    f"trust_level must be 'untrusted' or 'trusted', got {_show(trust)}",
                )
            else:
                options["trust_level"] = trust
            connect = self.seconds(
                data.get("connect_timeout", DEFAULT_CONNECT_TIMEOUT),
                ("connect_timeout",),
                allow_none=False,
            )
            if connect is not False:
                options["connect_timeout"] = connect
            call = self.seconds(
                data.get("timeout", DEFAULT_CALL_TIMEOUT), ("timeout",), allow_none=True
            )
            if call is not False:
                options["timeout"] = call
        else:
            options["trust_level"] = "trusted" if self.flag("trust", False) else "untrusted"
            options |= self.agentao_timeout(data.get("timeout"))
        for key in ("tools_include", "tools_exclude"):
            names = self.strings(key, expand=False)
            if names is not None:
                options[key] = names
        if data.get("tools") is not None:
            shapes, shape_problems = parse_tool_shapes(data["tools"])
            for keys, message in shape_problems:
                self.bad(keys, message)
            options["tool_shapes"] = shapes
        options["resources"] = self.flag("resources", True)
        options["skills"] = self.flag("skills", False)
        options["progress_resets_timeout"] = self.flag("progress_resets_timeout", False)
        max_call = self.seconds(data.get("max_call_time"), ("max_call_time",), allow_none=True)
        if max_call is not False:
            options["max_call_time"] = max_call
        level = data.get("log_level")
        if level is not None:
            if level not in _LOG_LEVELS:
                self.bad(
                    ("log_level",),
                    f"log_level must be one of {', '.join(_LOG_LEVELS)}, got {_show(level)}",
                )
            else:
                options["log_level"] = level
        protocol = data.get("protocol")
        if protocol is not None:
            if protocol not in PROTOCOL_CHOICES:
                self.bad(
                    ("protocol",),
                    f"protocol must be one of {', '.join(PROTOCOL_CHOICES)}, got {_show(protocol)}",
                )
            else:
                options["protocol"] = protocol
        size = data.get("max_frame_bytes")
        if size is not None:
            if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
                self.bad(
                    ("max_frame_bytes",),
                    f"max_frame_bytes must be a positive number of bytes, got {_show(size)}",
                )
            else:
                options["max_frame_bytes"] = size
        if data.get("error_policy") is not None:
            policy, problems = parse_error_policy(data["error_policy"], source="error_policy")
            for where, message in problems:
                self.bad(tuple(where.split(".")), message)
            if policy is not None:
                options["error_policy"] = policy
        return options

    def agentao_timeout(self, value: Any) -> dict[str, Any]:
        """Agentao's ``timeout``: a number bounds start-up only (connect_timeout; calls have no
        limit); ``{"startup": s, "request": s}`` bounds either or both."""
        options: dict[str, Any] = {"timeout": None}
        if value is None:
            return options
        if isinstance(value, Mapping):
            section = self.reader.mapping(
                value,
                self.entry.source,
                _key_path(self.entry.path, "timeout"),
                f"server {self.name!r}: timeout",
            )
            assert section is not None
            for key in section:
                if key not in ("startup", "request"):
                    self.bad(
                        ("timeout", key),
                        f"unknown key {key!r} in timeout (use 'startup' and 'request')",
                    )
            if "startup" in section:
                startup = self.seconds(section["startup"], ("timeout", "startup"), allow_none=False)
                if startup is not False:
                    options["connect_timeout"] = startup
            if "request" in section:
                request = self.seconds(section["request"], ("timeout", "request"), allow_none=True)
                if request is not False:
                    options["timeout"] = request
            return options
        startup = self.seconds(value, ("timeout",), allow_none=False)
        if startup is not False:
            options["connect_timeout"] = startup
        return options


# --------------------------------------------------------------------------- the shapes


def _environ(environ: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if environ is None else environ


def _echo(
    reader: _Reader, data: Any, source: str
) -> tuple[dict[str, ServerConfig], dict[str, Any]]:
    """The servers and runtime options of an Echo-shape document."""
    servers: dict[str, ServerConfig] = {}
    options: dict[str, Any] = {"network_policy": "deny"}
    if data is None or data is _UNREAD:
        data = {}  # an empty YAML file; or a file that could not be read (a problem already)
    root = reader.mapping(data, source, "", "the configuration")
    if root is None:
        return servers, options
    tools = reader.mapping(root.get("tools"), source, "tools", "tools") or {}
    mcp = reader.mapping(tools.get("mcp"), source, "tools.mcp", "tools.mcp") or {}
    reader.unknown_keys(mcp, frozenset({"enabled"}), source, "tools.mcp")
    options["enabled"] = reader.boolean(mcp, "enabled", True, source, "tools.mcp")
    options["security_policy"] = reader.choice(
        tools, "mcpSecurityPolicy", SECURITY_POLICIES, "block", source, "tools"
    )
    options["profile"] = reader.choice(tools, "profile", PROFILES, "default", source, "tools")
    options["allowed_capabilities"] = reader.capabilities(tools.get("allow"), source, "tools.allow")
    options |= reader.error_settings(tools, source)
    permissions = (
        reader.mapping(root.get("permissions"), source, "permissions", "permissions") or {}
    )
    options["permission_rules"] = reader.rules(
        permissions.get("rules"), source, "permissions.rules"
    )
    options["catalog_shape"] = "echo"
    execution = reader.mapping(root.get("execution"), source, "execution", "execution") or {}
    options["network_policy"] = reader.choice(
        execution, "networkPolicy", NETWORK_POLICIES, "deny", source, "execution"
    )
    entries = reader.mapping(
        tools.get("mcp_servers"), source, "tools.mcp_servers", "tools.mcp_servers"
    )
    for name, value in (entries or {}).items():
        entry = _Entry(name, value, source, _key_path("tools.mcp_servers", name))
        server = reader.server(entry, "echo")
        if server is not None:
            servers[name] = server
    return servers, options


def _agentao_entries(reader: _Reader, data: Any, source: str) -> dict[str, _Entry]:
    """The raw server entries of one Agentao-shape document, by name."""
    root = reader.mapping(data, source, "", "an mcp.json file")
    if root is None:
        if data is None:
            reader.problem(source, "", "an mcp.json file must be an object with 'mcpServers'")
        return {}
    reader.unknown_keys(root, frozenset({"mcpServers"}), source, "")
    entries = reader.mapping(root.get("mcpServers"), source, "mcpServers", "mcpServers") or {}
    return {
        name: _Entry(name, value, source, _key_path("mcpServers", name))
        for name, value in entries.items()
    }


def _extra_entries(reader: _Reader, extra: ExtraServers | None) -> dict[str, _Entry | ServerConfig]:
    out: dict[str, _Entry | ServerConfig] = {}
    if not extra:
        return out
    given: object = extra  # hosts call this from untyped code too
    if not isinstance(given, Mapping):
        reader.problem(
            "extra_mcp_servers", "", f"must be a mapping of name to server, got {_show(extra)}"
        )
        return out
    for name, value in extra.items():
        if isinstance(value, ServerConfig):
            if value.name != name:
                reader.problem(
                    "extra_mcp_servers",
                    _key_path("", str(name)),
                    f"the key {name!r} holds a ServerConfig named {value.name!r}: "
                    "use the same name",
                    transport=True,
                )
                continue
            out[name] = value
        else:
            out[str(name)] = _Entry(name, value, "extra_mcp_servers", _key_path("", str(name)))
    return out


def _resolve(
    reader: _Reader, entries: Mapping[str, _Entry | ServerConfig], shape: ConfigShape
) -> dict[str, ServerConfig]:
    servers: dict[str, ServerConfig] = {}
    for name, entry in entries.items():
        server = entry if isinstance(entry, ServerConfig) else reader.server(entry, shape)
        if server is not None:
            servers[name] = server
    return servers


def _override(reader: _Reader, entries: dict[str, Any], extra: ExtraServers | None) -> None:
    for name, value in _extra_entries(reader, extra).items():
        if name in entries:
            logger.info("server %r: the host's extra_mcp_servers entry overrides the file's", name)
        entries[name] = value


def _network_warnings(reader: _Reader, config: Mapping[str, ServerConfig], policy: str) -> None:
    if policy != "deny":
        return
    for server in config.values():
        if server.enabled and server.transport_kind.is_url:
            reader.warn(
                f"server {server.name!r} is a URL server ({server.transport_kind.value}) and "
                "execution.networkPolicy is 'deny': it will be skipped (set networkPolicy to "
                "'allow' to connect it)"
            )


def load_echo_config(
    source: Mapping[str, Any] | str | os.PathLike[str],
    *,
    environ: Mapping[str, str] | None = None,
    extra_mcp_servers: ExtraServers | None = None,
) -> LoadedConfig:
    """Load the Echo shape from a dict, or from a YAML (``.yaml``/``.yml``, needs the
    ``trio-mcp[yaml]`` extra) or JSON file.

    Reads ``tools.mcp.enabled`` (default true), ``tools.mcp_servers``,
    ``tools.mcpSecurityPolicy`` (default ``"block"``), ``tools.profile`` (``default``,
    ``public_gateway`` or ``daemon``), ``tools.allow`` (capability names; ``mcp.call`` lets MCP
    tools through the two restrictive profiles), ``permissions.rules`` (``[{"tool": "<glob>",
    "action": "allow|deny|ask"}]``, first match wins) and ``execution.networkPolicy`` (default
    ``"deny"``: URL servers are skipped, with a warning here and a DISABLED status saying why);
    every other key of the document belongs to the host and is ignored. ``extra_mcp_servers``
    (ServerConfig objects, or entries in the Agentao shape) override by name. ``environ``
    (default ``os.environ``) supplies ``${VAR}`` values.

    Raises :class:`ConfigError` (:class:`McpTransportConfigError` when a server's transport
    settings are at fault) listing every problem with the file and key path.
    """
    reader = _Reader(_environ(environ))
    data, label = _source(reader, source)
    return _load_echo(reader, data, label, extra_mcp_servers)


def _source(reader: _Reader, source: Mapping[str, Any] | str | os.PathLike[str]) -> tuple[Any, str]:
    """The document and its label (the file name, or ``<config>`` for a dict)."""
    if isinstance(source, Mapping):
        return source, "<config>"
    path = Path(source)
    return reader.read_file(path, required=True), str(path)


def _load_echo(reader: _Reader, data: Any, label: str, extra: ExtraServers | None) -> LoadedConfig:
    servers, options = _echo(reader, data, label)
    entries: dict[str, Any] = dict(servers)
    _override(reader, entries, extra)
    servers = _resolve(reader, entries, "agentao")
    if options["enabled"]:
        _network_warnings(reader, servers, options["network_policy"])
    elif servers:
        reader.warn(
            f"tools.mcp.enabled is false: none of the {len(servers)} configured servers will be "
            "connected"
        )
    return reader.finish(servers, "echo", **options)


def _load_mcp_json(
    reader: _Reader, data: Any, label: str, extra: ExtraServers | None
) -> LoadedConfig:
    entries: dict[str, Any] = {}
    if data is not _UNREAD:
        entries.update(_agentao_entries(reader, data, label))
    _override(reader, entries, extra)
    return reader.finish(_resolve(reader, entries, "agentao"), "agentao")


def load_mcp_json(
    source: Mapping[str, Any] | str | os.PathLike[str],
    *,
    environ: Mapping[str, str] | None = None,
    extra_mcp_servers: ExtraServers | None = None,
) -> LoadedConfig:
    """Load one Agentao-shape document (``{"mcpServers": {...}}``) from a dict or a file, with
    no layering. Network policy ``"allow"`` (that shape has no such key). Raises like
    :func:`load_echo_config`."""
    reader = _Reader(_environ(environ))
    data, label = _source(reader, source)
    return _load_mcp_json(reader, data, label, extra_mcp_servers)


def load_agentao_config(
    *,
    working_dir: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
    extra_mcp_servers: ExtraServers | None = None,
    user_file: str | os.PathLike[str] | None = None,
    project_file: str | os.PathLike[str] | None = None,
) -> LoadedConfig:
    """Load the Agentao shape with its layering.

    1. The user file (``user_file``, default :func:`user_config_path`), if it exists.
    2. The project file (``project_file``, default :func:`project_config_path` of
       ``working_dir``), if it exists. It may only add names: an entry whose name the user
       file also has is skipped, with a warning (a checked-in project file must not redirect a
       known server), and so is an entry whose tools could be registered under the same names
       as those of a user server or of a server in ``extra_mcp_servers`` (compared after name
       sanitising: ``git.hub`` beside ``git_hub``), which would knock those tools out.
    3. ``extra_mcp_servers`` from the host's code (ServerConfig objects, or entries in this
       shape) override by name.

    Only the entries that are used are validated (a skipped project entry is not read). Missing
    files are fine; an unreadable or invalid one is an error. Network policy ``"allow"``.
    Raises like :func:`load_echo_config`, with the problems of both files at once.
    """
    env = _environ(environ)
    reader = _Reader(env)
    user_path = Path(user_file) if user_file is not None else user_config_path(env)
    project_path = (
        Path(project_file) if project_file is not None else project_config_path(working_dir)
    )
    entries: dict[str, Any] = {}
    user_data = reader.read_file(user_path, required=False)
    if user_data is not _UNREAD:
        entries.update(_agentao_entries(reader, user_data, str(user_path)))
    project_data = reader.read_file(project_path, required=False)
    if project_data is not _UNREAD:
        protected = dict.fromkeys(entries, f"the user file {user_path}")
        if isinstance(extra_mcp_servers, Mapping):
            for name in extra_mcp_servers:
                protected.setdefault(str(name), "the host's extra_mcp_servers")
        for name, entry in _agentao_entries(reader, project_data, str(project_path)).items():
            if name in entries:
                reader.warn(
                    f"{project_path}: server {name!r} is also in the user file {user_path}; "
                    "the user entry wins and the project entry is skipped (a project file may "
                    "only add servers: rename the project entry or remove the user one)"
                )
                continue
            if _clashes_with_protected(reader, project_path, name, protected):
                continue
            entries[name] = entry
    _override(reader, entries, extra_mcp_servers)
    servers = _resolve(reader, entries, "agentao")
    approvals_file = user_path.parent / APPROVALS_FILE_NAME
    for name, server in servers.items():
        entry = entries[name]
        if isinstance(entry, _Entry) and entry.source == str(project_path):
            origin = project_origin(
                project=_project_root(project_path),
                file=str(project_path),
                approvals_file=str(approvals_file),
                entry=entry.value,
                transport=server.transport_kind.value,
            )
            servers[name] = attrs.evolve(server, project=origin)
    return reader.finish(servers, "agentao")


def _project_root(project_file: Path) -> str:
    """The project directory of a project file: the directory holding ``.trio-mcp``
    (symbolic links resolved up to there, so one project is one key however it is reached),
    else the file's own directory."""
    folder = project_file.parent
    if folder.name == PROJECT_CONFIG_DIR:
        folder = folder.parent
    return str(folder.resolve())


def _clashes_with_protected(
    reader: _Reader, project_path: Path, name: str, protected: Mapping[str, str]
) -> bool:
    """Whether the project entry ``name`` is skipped (with a warning) because its tools could
    be registered under the names of a user or host server's tools: the registry refuses every
    tool of a clash, so the project entry would knock those out. A host entry of the very same
    name is no clash: it replaces the project entry."""
    for other, where in protected.items():
        if other != name and server_names_may_clash(name, other):
            reader.warn(
                f"{project_path}: server {name!r} is skipped: its tools could be registered "
                f"under the same names as those of the server {other!r} of {where}, and tools "
                "whose names clash are all refused; the project entry gives way (rename it)"
            )
            return True
    return False


def _detect_shape(reader: _Reader, data: Any, source: str) -> ConfigShape | None:
    if data is _UNREAD:
        return None
    if not isinstance(data, Mapping):
        reader.problem(source, "", f"the configuration must be an object, got {_show(data)}")
        return None
    agentao = "mcpServers" in data
    echo = "tools" in data or "execution" in data
    if agentao and echo:
        reader.problem(
            source,
            "",
            "the file has both 'mcpServers' (the mcp.json shape) and 'tools'/'execution' (the "
            "Echo shape); keep one shape per file",
        )
        return None
    if not agentao and not echo:
        reader.problem(
            source,
            "",
            "cannot tell the shape: expected 'mcpServers' (an mcp.json file) or 'tools' (an "
            "Echo configuration) at the top level",
        )
        return None
    return "agentao" if agentao else "echo"


def load_config(
    path: str | os.PathLike[str] | None = None,
    *,
    working_dir: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
    extra_mcp_servers: ExtraServers | None = None,
) -> LoadedConfig:
    """What the command line loads: the file at ``path`` (its shape told by its top-level keys:
    ``mcpServers`` for an mcp.json file, ``tools``/``execution`` for an Echo configuration), or,
    without a path, the Agentao layering of :func:`load_agentao_config` (user file, then the
    project file of ``working_dir``).

    Raises :class:`ConfigError` when the file is missing, unreadable, of neither or both shapes,
    or invalid (every problem at once)."""
    if path is None:
        return load_agentao_config(
            working_dir=working_dir, environ=environ, extra_mcp_servers=extra_mcp_servers
        )
    reader = _Reader(_environ(environ))
    file = Path(path)
    data = reader.read_file(file, required=True)
    shape = _detect_shape(reader, data, str(file))
    if shape is None:
        return reader.finish({}, "agentao")  # raises: the problems are recorded
    if shape == "echo":
        return _load_echo(reader, data, str(file), extra_mcp_servers)
    return _load_mcp_json(reader, data, str(file), extra_mcp_servers)


# --------------------------------------------------------------------------- printing


def redacted_config(config: RuntimeConfig) -> dict[str, Any]:
    """A JSON-ready view of ``config`` that is safe to print or log: every ``env`` and
    ``headers`` value is ``***``, and so are secret-looking arguments, URL passwords and URL
    query values. Servers appear with every setting, defaults included. Never fails."""
    servers: dict[str, Any] = {}
    for server in config.servers:
        kind = server.transport_kind
        view: dict[str, Any] = {"type": kind.value}
        if kind is TransportKind.STDIO:
            view["command"] = server.command
            view["args"] = redact_args(server.args)
            view["env"] = dict.fromkeys(server.env, REDACTED)
            view["cwd"] = server.cwd
        elif kind.is_url:
            view["url"] = None if server.url is None else redact_url(server.url)
            view["headers"] = dict.fromkeys(server.headers, REDACTED)
            view["auth"] = server.auth
            settings = server.oauth_settings
            view["oauth"] = None if settings is None else oauth_view(settings)
            view["allow_insecure_http"] = server.allow_insecure_http
            view["ca_bundle"] = server.ca_bundle
            view["client_cert"] = server.client_cert
            view["client_key"] = server.client_key
            view["proxy"] = None if server.proxy is None else redact_url(server.proxy)
        view |= {
            "enabled": server.enabled,
            "connect_timeout": server.connect_timeout,
            "timeout": server.timeout,
            "max_call_time": server.max_call_time,
            "progress_resets_timeout": server.progress_resets_timeout,
            "trust_level": server.trust_level,
            "tools_include": None if server.tools_include is None else list(server.tools_include),
            "tools_exclude": list(server.tools_exclude),
            "resources": server.resources,
            "skills": server.skills,
            "log_level": server.log_level,
            "protocol": server.protocol,
            "max_frame_bytes": server.max_frame_bytes,
            "error_policy": _policy_view(server.error_policy),
        }
        if server.tool_shapes:
            view["tools"] = shape_view(server.tool_shapes)
        if server.project is not None:
            view["project_file"] = server.project.file
        servers[server.name] = view
    return {
        "enabled": config.enabled,
        "network_policy": config.network_policy,
        "security_policy": config.security_policy,
        "profile": config.profile,
        "allowed_capabilities": sorted(config.allowed_capabilities),
        "permission_rules": [
            {"tool": rule.pattern, "action": rule.decision} for rule in config.permission_rules
        ],
        "catalog_shape": config.catalog_shape,
        "error_policy": _policy_view(config.error_policy),
        "error_rules": [
            {"tool": rule.pattern, **(_policy_view(rule.policy) or {})}
            for rule in config.error_rules
        ],
        "servers": servers,
    }


def _policy_view(policy: ErrorPolicy | None) -> dict[str, Any] | None:
    return None if policy is None else attrs.asdict(policy)
