"""``trio-mcp import``: other clients' MCP server configurations in trio-mcp's ``mcp.json`` shape.

Each source keeps its servers in a JSON file of its own:

============== ================================================ ===============================
source         file                                             servers under
============== ================================================ ===============================
claude-desktop ``claude_desktop_config.json``                   ``mcpServers``
claude-code    ``.mcp.json``, ``~/.claude.json``                ``mcpServers`` (and, in
                                                                ``~/.claude.json``,
                                                                ``projects.<dir>.mcpServers``)
vscode         ``.vscode/mcp.json``, ``settings.json``          ``servers``, ``mcp.servers``
cursor         ``.cursor/mcp.json``, ``~/.cursor/mcp.json``     ``mcpServers``
cline          ``cline_mcp_settings.json``                      ``mcpServers``
gemini         ``.gemini/settings.json``                        ``mcpServers``
============== ================================================ ===============================

:func:`convert` maps every key it can (``command``, ``args``, ``env``, ``cwd``, ``url``,
``httpUrl``, ``headers``, ``type``/``transportType``, ``disabled``, ``includeTools``,
``excludeTools``, ``trust``, ``timeout`` in the source's unit...) and gives one warning for each
it cannot keep (``autoApprove``, ``envFile``, VS Code ``${input:...}`` prompts...), instead of
refusing the file. VS Code and Cursor variables become trio-mcp's: ``${env:NAME}`` is
``${NAME}``, ``${workspaceFolder}`` the folder holding ``.vscode``/``.cursor``, ``${userHome}``
``${HOME}``, ``${input:id}`` a variable ``${ID}`` the user sets (with a warning). VS Code and
Cursor files may have comments and trailing commas (JSONC): :func:`read_jsonc` reads them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Literal

import attrs

__all__ = ["SOURCES", "ImportResult", "Source", "convert", "detect", "read_jsonc"]

Source = Literal["claude-desktop", "claude-code", "vscode", "cursor", "cline", "gemini"]
SOURCES: Final[tuple[Source, ...]] = (
    "claude-desktop",
    "claude-code",
    "vscode",
    "cursor",
    "cline",
    "gemini",
)
#: The unit of each source's ``timeout`` (a per-request limit in all of them).
_TIMEOUT_UNIT: Final[Mapping[Source, float]] = {
    "claude-code": 1000.0,  # milliseconds
    "gemini": 1000.0,  # milliseconds
    "cline": 1.0,  # seconds
}
_TYPES: Final[Mapping[str, str]] = {
    "stdio": "stdio",
    "local": "stdio",
    "http": "http",
    "streamable-http": "http",
    "streamable_http": "http",
    "streamablehttp": "http",
    "sse": "sse",
    "ws": "ws",
    "websocket": "ws",
}
_VARIABLE = re.compile(r"\$\{([A-Za-z]+):([^}]*)\}|\$\{(workspaceFolder|userHome|pathSeparator)\}")
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@attrs.define
class ImportResult:
    """What :func:`convert` made of a file: the ``servers`` (name to entry in trio-mcp's
    shape, in the file's order), one warning per key or value it could not keep, and the
    entries it could not use at all (``skipped``: name and why)."""

    source: Source
    servers: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    warnings: list[str] = attrs.field(factory=list)
    skipped: list[tuple[str, str]] = attrs.field(factory=list)


# --------------------------------------------------------------------------- reading


def read_jsonc(text: str) -> str:
    """``text`` with ``//`` and ``/* */`` comments and trailing commas removed (outside
    strings), so that :func:`json.loads` reads VS Code's and Cursor's files."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        elif char == ",":
            j = i + 1
            while j < n and text[j].isspace():
                j += 1
            if j < n and text[j] in "}]":
                i += 1  # a trailing comma
            else:
                out.append(char)
                i += 1
        else:
            out.append(char)
            i += 1
    return "".join(out)


def detect(path: Path, document: Any) -> Source | None:
    """The source a file comes from, told by its name, then by its keys; None when neither
    tells (then ``--from`` must)."""
    name = path.name.lower()
    parent = path.parent.name.lower()
    by_name: dict[str, Source] = {
        "claude_desktop_config.json": "claude-desktop",
        ".mcp.json": "claude-code",
        ".claude.json": "claude-code",
        "cline_mcp_settings.json": "cline",
    }
    if name in by_name:
        return by_name[name]
    if parent == ".vscode" or (name == "settings.json" and parent in ("user", "code")):
        return "vscode"
    if parent == ".cursor":
        return "cursor"
    if parent == ".gemini":
        return "gemini"
    if not isinstance(document, Mapping):
        return None
    if isinstance(document.get("servers"), Mapping) or isinstance(
        (document.get("mcp") or {}).get("servers")
        if isinstance(document.get("mcp"), Mapping)
        else None,
        Mapping,
    ):
        return "vscode"
    if "projects" in document:
        return "claude-code"
    entries = document.get("mcpServers")
    if not isinstance(entries, Mapping):
        return None
    keys = {key for entry in entries.values() if isinstance(entry, Mapping) for key in entry}
    if keys & {"httpUrl", "includeTools", "excludeTools", "trust"}:
        return "gemini"
    if keys & {"autoApprove", "alwaysAllow", "transportType"}:
        return "cline"
    if "type" in keys:
        return "claude-code"
    return "claude-desktop" if keys else None


# --------------------------------------------------------------------------- converting


def _entries(document: Any, source: Source, result: ImportResult) -> Mapping[str, Any]:
    if not isinstance(document, Mapping):
        return {}
    if source == "vscode":
        servers = document.get("servers")
        mcp = document.get("mcp")
        if not isinstance(servers, Mapping) and isinstance(mcp, Mapping):
            servers = mcp.get("servers")
        return servers if isinstance(servers, Mapping) else {}
    if source == "claude-code" and isinstance(document.get("projects"), Mapping):
        for folder, settings in document["projects"].items():
            servers = settings.get("mcpServers") if isinstance(settings, Mapping) else None
            if isinstance(servers, Mapping) and servers:
                result.warnings.append(
                    f"the servers of the project {folder} ({', '.join(servers)}) are not "
                    "imported: they belong to that project (import them into it with --scope "
                    "project, from a file of their own)"
                )
    if source == "gemini" and isinstance(document.get("mcp"), Mapping):
        for key in ("allowed", "excluded"):
            if document["mcp"].get(key):
                result.warnings.append(
                    f"mcp.{key} is not kept: trio-mcp has no list of allowed or excluded "
                    'servers (set "enabled": false on a server instead)'
                )
    entries = document.get("mcpServers")
    return entries if isinstance(entries, Mapping) else {}


def convert(document: Any, source: Source, path: Path | None = None) -> ImportResult:
    """The servers of ``document`` (read from ``path``, whose folder gives
    ``${workspaceFolder}``) as trio-mcp ``mcp.json`` entries (see the module docstring)."""
    result = ImportResult(source=source)
    workspace = None
    if path is not None and path.parent.name in (".vscode", ".cursor"):
        workspace = str(path.parent.parent.resolve())
    entries = _entries(document, source, result)
    if not entries:
        result.warnings.append(f"no MCP servers found (read as {source})")
    for raw_name, raw in entries.items():
        name = _NAME_UNSAFE.sub("-", str(raw_name)).strip("-")
        if not name:
            result.skipped.append((str(raw_name), "its name has no letter or digit to keep"))
            continue
        if name != raw_name:
            result.warnings.append(
                f"{raw_name!r}: renamed {name!r} (a server name is letters, digits, '.', '-' "
                "and '_')"
            )
        if name in result.servers:
            result.skipped.append((str(raw_name), f"a server named {name!r} is imported already"))
            continue
        if not isinstance(raw, Mapping):
            result.skipped.append((str(raw_name), "its entry is not an object"))
            continue
        entry = _Converter(name, source, workspace, result.warnings).entry(raw)
        if entry is None:
            result.skipped.append((name, "it has neither a command nor a URL"))
            continue
        result.servers[name] = entry
    return result


@attrs.define
class _Converter:
    name: str
    source: Source
    workspace: str | None
    warnings: list[str]

    def warn(self, text: str) -> None:
        self.warnings.append(f"{self.name}: {text}")

    def entry(self, raw: Mapping[str, Any]) -> dict[str, Any] | None:
        entry: dict[str, Any] = {}
        kind = self.kind(raw)
        url = raw.get("httpUrl") if self.source == "gemini" and "httpUrl" in raw else None
        if url is not None:
            kind = "http"
        elif isinstance(raw.get("url"), str) or isinstance(raw.get("serverUrl"), str):
            url = raw.get("url", raw.get("serverUrl"))
            if kind is None:
                # Gemini reads a bare "url" as the legacy SSE endpoint; the others as
                # Streamable HTTP (trio-mcp's http falls back to SSE when the server is one).
                kind = "sse" if self.source == "gemini" else "http"
        if isinstance(raw.get("command"), str) and raw["command"]:
            if url is not None:
                self.warn("has both a command and a URL: the command is kept")
                url = None
            kind = "stdio"
            entry["command"] = self.text(raw["command"], "command")
            args = raw.get("args")
            if isinstance(args, list):
                entry["args"] = [self.text(str(arg), "args") for arg in args]
            elif args is not None:
                self.warn(f"args is not kept: it must be a list, got {type(args).__name__}")
            if isinstance(raw.get("env"), Mapping):
                entry["env"] = {
                    str(k): self.text(str(v), f"env.{k}") for k, v in raw["env"].items()
                }
            if isinstance(raw.get("cwd"), str):
                entry["cwd"] = self.text(raw["cwd"], "cwd")
        elif url is not None:
            if kind == "stdio":
                kind = "http"
            entry["type"] = kind or "http"
            entry["url"] = self.text(str(url), "url")
            if isinstance(raw.get("headers"), Mapping):
                entry["headers"] = {
                    str(k): self.text(str(v), f"headers.{k}") for k, v in raw["headers"].items()
                }
        else:
            return None
        self.behaviour(raw, entry)
        return entry

    def kind(self, raw: Mapping[str, Any]) -> str | None:
        value = raw.get("type", raw.get("transportType"))
        if value is None:
            return None
        kind = _TYPES.get(str(value).lower())
        if kind is None:
            self.warn(f"type {value!r} is not one trio-mcp knows: told from the entry instead")
        return kind

    def behaviour(self, raw: Mapping[str, Any], entry: dict[str, Any]) -> None:
        if raw.get("disabled") is True:
            entry["enabled"] = False
        if raw.get("enabled") is False:
            entry["enabled"] = False
        for theirs, ours in (("includeTools", "tools_include"), ("excludeTools", "tools_exclude")):
            value = raw.get(theirs)
            if isinstance(value, list) and all(isinstance(item, str) for item in value):
                entry[ours] = list(value)
            elif value is not None:
                self.warn(f"{theirs} is not kept: it must be a list of tool names")
        if raw.get("trust") is True:
            entry["trust"] = True
        if "timeout" in raw:
            self.timeout(raw["timeout"], entry)
        handled = {
            "command",
            "args",
            "env",
            "cwd",
            "url",
            "httpUrl",
            "serverUrl",
            "headers",
            "type",
            "transportType",
            "disabled",
            "enabled",
            "includeTools",
            "excludeTools",
            "trust",
            "timeout",
        }
        for key, value in raw.items():
            if key in handled:
                continue
            self.warn(self.lost(key, value, entry))

    def timeout(self, value: Any, entry: dict[str, Any]) -> None:
        unit = _TIMEOUT_UNIT.get(self.source)
        if unit is None:
            self.warn(f"timeout {value!r} is not kept: {self.source} gives it no documented unit")
            return
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            self.warn(f"timeout {value!r} is not kept: not a positive number")
            return
        seconds = value / unit
        if not math.isfinite(seconds):
            self.warn(f"timeout {value!r} is not kept: not finite")
            return
        entry["timeout"] = {"request": seconds}

    def lost(self, key: str, value: Any, entry: dict[str, Any]) -> str:
        """The warning for a key that cannot be kept: what it was and what to do instead."""
        if key in ("autoApprove", "alwaysAllow"):
            return (
                f"{key} {value!r} is not kept: trio-mcp asks for approval by permission rules "
                "(permissions.rules of an Echo configuration, or the host's), not per server "
                'entry; "trust": true runs every tool not marked destructive without asking'
            )
        if key == "envFile":
            return (
                f"envFile {value!r} is not kept: set those variables in the environment, or "
                "copy them into env"
            )
        if key in ("oauth", "authProviderType"):
            return (
                f'{key} is not kept as written: for an OAuth server set "auth": "oauth" '
                "(or an oauth table: docs/auth.md), then run trio-mcp login NAME"
            )
        if key == "description":
            return "description is not kept (mcp.json has no such key)"
        if key in ("dev", "sandbox", "sandboxEnabled", "extensionName", "networkTimeout"):
            return f"{key} is not kept: {self.source} only"
        return f"{key} is not kept: trio-mcp has no such setting"

    def text(self, value: str, where: str) -> str:
        """A value with the source's variables made trio-mcp's (``${NAME}``)."""

        def replace(match: re.Match[str]) -> str:
            scheme, argument, bare = match.group(1), match.group(2), match.group(3)
            if bare == "workspaceFolder":
                if self.workspace is not None:
                    return self.workspace.replace("$", "$$")
                self.warn(f"{where}: ${{workspaceFolder}} is now ${{PWD}} (the current directory)")
                return "${PWD}"
            if bare == "userHome":
                return "${HOME}"
            if bare == "pathSeparator":
                return "/"
            if scheme == "env":
                return f"${{{argument}}}"
            if scheme == "input":
                variable = re.sub(r"[^A-Za-z0-9_]", "_", argument).upper() or "INPUT"
                self.warn(
                    f"{where}: the prompt ${{input:{argument}}} is now ${{{variable}}}: set "
                    f"that variable before trio-mcp starts the server"
                )
                return f"${{{variable}}}"
            self.warn(f"{where}: ${{{scheme}:{argument}}} is kept as it is")
            return match.group(0)

        return _VARIABLE.sub(replace, value)
