"""``trio-mcp add``, ``add-json``, ``remove``, ``list``, ``get`` and ``import``: the servers of
the ``mcp.json`` files, managed from the command line.

::

    trio-mcp add NAME [--env K=V] [--cwd DIR] -- COMMAND [ARG...]   a stdio server
    trio-mcp add NAME --url URL [--header K=V] [--transport http|sse|ws]
    trio-mcp add-json NAME '{"command": ...}'
    trio-mcp remove NAME
    trio-mcp list
    trio-mcp get NAME
    trio-mcp import FILE [--from SOURCE] [--dry-run]

``--scope user`` (the default) writes the user file (``$XDG_CONFIG_HOME/trio-mcp/mcp.json``),
``--scope project`` the project's ``.trio-mcp/mcp.json`` (``--project DIR``, default the
current directory), whose servers start only once approved (``trio-mcp project approve``);
``--config FILE`` names the file instead. A file is written atomically (a temporary file in the
same directory, flushed and fsynced, then renamed over it): a crash leaves the old file or the
new one, never half of one. Its other keys, their order and its indentation are kept; a new user
file is created ``0600`` in a ``0700`` directory (it may hold secrets). Every entry is
validated as the loader would before anything is written; secrets are shown redacted.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from ...protocol._errors import ConfigError
from ...transports._files import write_atomically
from ..config._approvals import ProjectApprovals, entry_digest
from ..config._config import redact_args, redact_url, valid_server_name
from ..config._loader import (
    approvals_path,
    load_mcp_json,
    project_config_path,
    user_config_path,
)
from ..config._redact import REDACTED, redact
from ._cli import ExitCode, _columns, _Exit, _Out, _usage
from ._import import SOURCES, Source, convert, detect, read_jsonc

__all__ = ["add_manage_commands", "write_json_atomically"]

_SERVERS = "mcpServers"
_REFERENCE = "${"


def add_manage_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add ``add``, ``add-json``, ``remove``, ``list``, ``get`` and ``import``."""
    where = argparse.ArgumentParser(add_help=False)
    where.add_argument(
        "--scope",
        choices=("user", "project"),
        help="user: your own mcp.json (the default for writing); project: .trio-mcp/mcp.json "
        "of the project, whose servers start only once approved",
    )
    where.add_argument(
        "--project",
        metavar="DIR",
        help="the project directory (default: the current directory)",
    )
    replace = argparse.ArgumentParser(add_help=False)
    replace.add_argument("--force", action="store_true", help="replace a server of the same name")

    add = commands.add_parser(
        "add",
        parents=[common, where, replace],
        help="add a server: NAME -- COMMAND ARGS... (stdio), or NAME --url URL",
        description="Add a stdio server (trio-mcp add NAME -- COMMAND ARG...) or a URL server "
        "(trio-mcp add NAME --url URL). The entry is validated before it is written.",
    )
    add.usage = (
        "trio-mcp add [options] NAME -- COMMAND [ARG...]\n"
        "       trio-mcp add [options] NAME --url URL"
    )
    add.add_argument("name", metavar="NAME")
    # The command and its arguments, after "--": taken by trio-mcp's own parsing (_cli._parse),
    # since an argparse positional would stop at the options.
    add.set_defaults(takes_command=True, command_line=[])
    add.add_argument("--url", help="the server's URL (http, sse: http(s)://...; ws: ws(s)://...)")
    add.add_argument(
        "--transport",
        "-t",
        choices=("stdio", "http", "sse", "ws"),
        help="default: stdio with a command; with --url, ws for ws(s):// and http otherwise",
    )
    add.add_argument(
        "--header",
        "-H",
        action="append",
        default=[],
        metavar="K=V",
        help="an HTTP header of a URL server (repeat it); 'K: V' works too",
    )
    add.add_argument(
        "--env",
        "-e",
        action="append",
        default=[],
        metavar="K=V",
        help="an environment variable of a stdio server (repeat it); write ${VAR} to pass one "
        "of yours at start instead of writing its value into the file",
    )
    add.add_argument("--cwd", metavar="DIR", help="the stdio server's working directory")
    add.add_argument(
        "--trust",
        action="store_true",
        help='"trust": true: its tools run without asking unless marked destructive',
    )
    add.set_defaults(handler=_cmd_add)

    add_json = commands.add_parser(
        "add-json",
        parents=[common, where, replace],
        help="add a server from its JSON entry",
        description="Add a server from a JSON object: an mcp.json entry, or one in another "
        "client's shape (its keys are mapped as by trio-mcp import, with a warning for each one "
        "that cannot be kept).",
    )
    add_json.add_argument("name", metavar="NAME")
    add_json.add_argument("entry", metavar="JSON")
    add_json.set_defaults(handler=_cmd_add_json)

    remove = commands.add_parser(
        "remove", parents=[common, where], help="remove a server from its file"
    )
    remove.add_argument("name", metavar="NAME")
    remove.set_defaults(handler=_cmd_remove)

    listing = commands.add_parser(
        "list",
        parents=[common, where],
        help="the configured servers of both files (without connecting: see status)",
    )
    listing.set_defaults(handler=_cmd_list)

    get = commands.add_parser(
        "get", parents=[common, where], help="one server's entry, secrets redacted"
    )
    get.add_argument("name", metavar="NAME")
    get.set_defaults(handler=_cmd_get)

    importing = commands.add_parser(
        "import",
        parents=[common, where, replace],
        help="import the servers of another client's configuration",
        description="Import the MCP servers of a Claude Desktop, Claude Code, VS Code, Cursor, "
        "Cline or Gemini CLI configuration file. Each key is mapped where trio-mcp has an "
        "equivalent; each one that cannot be kept gets a warning, and an entry that cannot be "
        "used is skipped with its reason: the rest is imported.",
    )
    importing.add_argument("file", metavar="FILE")
    importing.add_argument(
        "--from",
        dest="source",
        choices=SOURCES,
        help="the client the file belongs to (default: told from its name and keys)",
    )
    importing.add_argument(
        "--dry-run", action="store_true", help="show what would be imported; write nothing"
    )
    importing.set_defaults(handler=_cmd_import)


# --------------------------------------------------------------------------- files


@attrs.define
class _Document:
    """An ``mcp.json`` file as read: its data (key order kept) and its layout."""

    path: Path
    scope: str
    data: dict[str, Any]
    exists: bool
    indent: int | str | None = 2

    @property
    def servers(self) -> dict[str, Any]:
        servers = self.data.get(_SERVERS)
        return servers if isinstance(servers, dict) else {}

    def with_servers(self, servers: dict[str, Any]) -> dict[str, Any]:
        """The document with ``servers`` in place of its ``mcpServers`` (same position)."""
        if _SERVERS in self.data:
            return {key: servers if key == _SERVERS else v for key, v in self.data.items()}
        return {**self.data, _SERVERS: servers}


def _indent(text: str) -> int | str | None:
    """The indentation of a JSON text: the first indented line's, or None (one line)."""
    for line in text.splitlines()[1:]:
        stripped = line.lstrip(" \t")
        if stripped and len(stripped) < len(line):
            lead = line[: len(line) - len(stripped)]
            return "\t" if lead.startswith("\t") else len(lead)
    return None if "\n" not in text.strip() else 2


def _read(path: Path, scope: str) -> _Document:
    if not path.exists():
        return _Document(path=path, scope=scope, data={_SERVERS: {}}, exists=False)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise _config(path, f"cannot be read: {exc}") from None
    if not text.strip():
        return _Document(path=path, scope=scope, data={_SERVERS: {}}, exists=True)
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise _config(path, f"is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise _config(path, "must hold a JSON object")
    if "tools" in data or "execution" in data:
        raise _usage(
            f"{path} is an Echo configuration: add its servers under tools.mcp_servers by hand "
            "(these commands write mcp.json files)"
        )
    if _SERVERS in data and not isinstance(data[_SERVERS], dict):
        raise _config(path, f"{_SERVERS} must be an object")
    return _Document(path=path, scope=scope, data=data, exists=True, indent=_indent(text))


def _config(path: Path, message: str) -> _Exit:
    return _Exit(
        ExitCode.CONFIG,
        f"{path} {message}",
        kind="config",
        details={"type": "ConfigError", "problems": [{"location": str(path), "message": message}]},
    )


def write_json_atomically(
    path: Path, document: Any, *, indent: int | str | None = 2, private: bool = False
) -> None:
    """Write ``document`` as JSON to ``path`` atomically: a temporary file in the same
    directory, flushed and fsynced, renamed over ``path`` (a symbolic link is followed: its
    target is replaced), then the directory fsynced. An existing file keeps its permissions; a
    new one is ``0600`` in a ``0700`` directory when ``private``, else ``0644`` (a project
    file, meant to be shared; the umask is not read: that would change it process-wide for a
    moment, a race with any thread creating files meanwhile)."""
    target = path.resolve() if path.is_symlink() else path
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700 if private else 0o777)
    text = json.dumps(document, indent=indent, ensure_ascii=False) + "\n"
    if target.exists():
        mode = target.stat().st_mode & 0o7777
    elif private:
        mode = 0o600
    else:
        mode = 0o644
    write_atomically(target, text.encode("utf-8"), mode=mode)


def _write(document: _Document, servers: dict[str, Any]) -> None:
    try:
        write_json_atomically(
            document.path,
            document.with_servers(servers),
            indent=document.indent,
            private=document.scope == "user",
        )
    except OSError as exc:
        raise _config(document.path, f"cannot be written: {exc}") from None


def _project_dir(args: argparse.Namespace) -> Path:
    return Path(args.project) if args.project is not None else Path.cwd()


def _target(args: argparse.Namespace) -> _Document:
    """The file a command writes: ``--config FILE``, or the file of ``--scope``."""
    if args.config is not None:
        if args.scope is not None:
            raise _usage("give --config FILE or --scope, not both")
        return _read(Path(args.config), "file")
    if args.scope == "project":
        return _read(project_config_path(_project_dir(args)), "project")
    return _read(user_config_path(), "user")


def _sources(args: argparse.Namespace) -> list[_Document]:
    """The files a command reads: ``--config FILE``, the file of ``--scope``, or both files."""
    if args.config is not None or args.scope is not None:
        return [_target(args)]
    return [
        _read(user_config_path(), "user"),
        _read(project_config_path(_project_dir(args)), "project"),
    ]


# --------------------------------------------------------------------------- entries


class _AnyVariable(Mapping[str, str]):
    """An environment in which every variable is set (to ``x`` unless it really is): an
    entry is validated for its shape, whatever of its ``${VAR}`` references is set now."""

    def __getitem__(self, key: str) -> str:
        return os.environ.get(key) or "x"

    def __iter__(self) -> Iterator[str]:
        return iter(os.environ)

    def __len__(self) -> int:
        return len(os.environ)


def _validate(name: str, entry: Mapping[str, Any]) -> list[str]:
    """The loader's problems with ``entry`` (none: it is valid), and its warnings."""
    try:
        loaded = load_mcp_json({_SERVERS: {name: entry}}, environ=_AnyVariable())
    except ConfigError as exc:
        raise _usage(
            f"the entry of {name!r} is not valid: "
            + "; ".join(message for _, message in exc.problems)
        ) from None
    return list(loaded.warnings)


def _pairs(items: Sequence[str], option: str, *, header: bool = False) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if header and (not sep or ":" in key):
            key, sep, value = item.partition(":")
            value = value.strip()
        if not sep or not key.strip():
            form = "K=V or 'K: V'" if header else "K=V"
            raise _usage(f"{option} takes {form}, got {item!r}")
        out[key.strip()] = value
    return out


def _is_reference(value: str) -> bool:
    """A value that is only a ``${VAR}`` / ``$VAR`` reference: no secret of its own."""
    text = value.strip()
    if text.startswith(_REFERENCE) and text.endswith("}") and text.count("${") == 1:
        return True
    return text.startswith("$") and text[1:].replace("_", "a").isalnum()


def redacted_entry(entry: Mapping[str, Any]) -> dict[str, Any]:
    """An entry as written, safe to print: ``env`` and ``headers`` values are ``***`` unless
    they are only a ``${VAR}`` reference, secret-looking arguments and URL passwords and query
    values are hidden, and any other key that looks secret (in ``oauth``) is ``***``."""
    out: dict[str, Any] = {}
    for key, value in entry.items():
        if key in ("env", "headers") and isinstance(value, Mapping):
            out[key] = {
                k: v if isinstance(v, str) and _is_reference(v) else REDACTED
                for k, v in value.items()
            }
        elif key == "args" and isinstance(value, list):
            out[key] = redact_args(str(item) for item in value)
        elif key in ("url", "proxy") and isinstance(value, str):
            out[key] = redact_url(value)
        else:
            out[key] = redact({key: value})[key]
    return out


def _kind(entry: Any) -> str:
    if not isinstance(entry, Mapping):
        return "?"
    if isinstance(entry.get("type"), str):
        return str(entry["type"])
    return "stdio" if "command" in entry else "http" if "url" in entry else "?"


def _target_text(entry: Any) -> str:
    shown = redacted_entry(entry) if isinstance(entry, Mapping) else {}
    if isinstance(shown.get("command"), str):
        return shlex.join([shown["command"], *map(str, shown.get("args") or ())])
    if isinstance(shown.get("url"), str):
        return str(shown["url"])
    return "(invalid entry)"


def _approval(document: _Document, name: str, entry: Any) -> str | None:
    """A project server's approval: ``approved``, ``not approved`` or ``changed``."""
    if document.scope != "project" or not isinstance(entry, Mapping):
        return None
    project = str(document.path.parent.parent.resolve())
    try:
        store = ProjectApprovals.load(approvals_path())
    except ConfigError as exc:
        raise _Exit(ExitCode.CONFIG, str(exc), kind="config") from None
    stored = store.get(project, name)
    if stored is None:
        return "not approved"
    return "approved" if stored.digest == entry_digest(entry) else "changed"


def _where(document: _Document) -> str:
    return (
        f"{document.path} ({document.scope} scope)"
        if document.scope != "file"
        else str(document.path)
    )


def _approve_hint(document: _Document, name: str) -> str:
    project = document.path.parent.parent
    return (
        f"it starts only once approved: trio-mcp project approve {shlex.quote(name)} "
        f"--project {shlex.quote(str(project))}"
    )


def _store(
    args: argparse.Namespace,
    out: _Out,
    name: str,
    entry: dict[str, Any],
    warnings: Sequence[str] = (),
) -> int:
    """Validate ``entry`` and write it as ``name`` into the target file."""
    if not valid_server_name(name):
        raise _usage(f"{name!r} is not a server name: use letters, digits, '.', '-' and '_'")
    document = _target(args)
    servers = dict(document.servers)
    replaced = name in servers
    if replaced and not args.force:
        raise _usage(
            f"a server named {name!r} is in {document.path} already: pass --force to replace "
            f"it, or remove it first (trio-mcp remove {name})"
        )
    notes = [*warnings, *_validate(name, entry)]
    if document.scope == "project":
        user = _read(user_config_path(), "user")
        if name in user.servers:
            notes.append(
                f"the user file {user.path} has a server {name!r} too: the user entry wins and "
                "this project entry is skipped"
            )
    servers[name] = entry
    _write(document, servers)
    if out.json:
        out.document(
            {
                "added": name,
                "replaced": replaced,
                "scope": document.scope,
                "file": str(document.path),
                "entry": redacted_entry(entry),
                "warnings": notes,
            }
        )
        return ExitCode.OK
    for note in notes:
        out.note(f"warning: {note}")
    verb = "replaced" if replaced else "added"
    out.line(f"{verb} {_kind(entry)} server {name!r} in {_where(document)}")
    if document.scope == "project":
        out.line(_approve_hint(document, name))
    return ExitCode.OK


# --------------------------------------------------------------------------- commands


def _cmd_add(args: argparse.Namespace, out: _Out) -> int:
    entry: dict[str, Any] = {}
    if args.url is not None:
        if args.command_line:
            raise _usage("give a command (after --) or --url, not both")
        if args.env or args.cwd:
            raise _usage(
                "--env and --cwd are for a stdio server's process; a URL server takes --header"
            )
        transport = args.transport or (
            "ws" if args.url.lower().startswith(("ws://", "wss://")) else "http"
        )
        if transport == "stdio":
            raise _usage("--transport stdio runs a command: give it after --, not --url")
        entry["type"] = transport
        entry["url"] = args.url
        if args.header:
            entry["headers"] = _pairs(args.header, "--header", header=True)
    else:
        if not args.command_line:
            raise _usage(
                "give the command after --: trio-mcp add NAME -- COMMAND [ARG...], or --url URL"
            )
        if args.transport not in (None, "stdio"):
            raise _usage(f"--transport {args.transport} needs --url URL")
        if args.header:
            raise _usage("--header is for a URL server; a stdio server takes --env")
        entry["command"] = args.command_line[0]
        if args.command_line[1:]:
            entry["args"] = list(args.command_line[1:])
        if args.env:
            entry["env"] = _pairs(args.env, "--env")
        if args.cwd is not None:
            entry["cwd"] = args.cwd
    if args.trust:
        entry["trust"] = True
    return _store(args, out, args.name, entry)


def _cmd_add_json(args: argparse.Namespace, out: _Out) -> int:
    try:
        raw = json.loads(args.entry)
    except ValueError as exc:
        raise _usage(f"the entry is not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise _usage(f"the entry must be a JSON object, got {type(raw).__name__}")
    from ._import import _Converter

    ours = {
        "type", "command", "args", "env", "cwd", "url", "headers", "auth", "oauth", "enabled",
        "trust", "timeout", "tools_include", "tools_exclude", "resources", "skills", "log_level",
        "max_frame_bytes", "progress_resets_timeout", "max_call_time", "protocol",
        "allow_insecure_http", "ca_bundle", "client_cert", "client_key", "proxy",
    }  # fmt: skip
    if set(raw) <= ours:
        return _store(args, out, args.name, raw)
    # Another client's shape: mapped as import maps it (Claude Code's, the most common).
    warnings: list[str] = []
    entry = _Converter(args.name, "claude-code", None, warnings).entry(raw)
    if entry is None:
        raise _usage("the entry has neither a command nor a URL")
    return _store(args, out, args.name, entry, warnings)


def _cmd_remove(args: argparse.Namespace, out: _Out) -> int:
    documents = [d for d in _sources(args) if args.name in d.servers]
    if not documents:
        known = sorted({n for d in _sources(args) for n in d.servers})
        raise _usage(
            f"no server named {args.name!r} in {', '.join(str(d.path) for d in _sources(args))} "
            f"(configured: {', '.join(known) or 'none'})"
        )
    if len(documents) > 1:
        raise _usage(
            f"{args.name!r} is in both the user and the project file: pass --scope user or "
            "--scope project"
        )
    (document,) = documents
    servers = {k: v for k, v in document.servers.items() if k != args.name}
    _write(document, servers)
    if out.json:
        out.document({"removed": args.name, "scope": document.scope, "file": str(document.path)})
    else:
        out.line(f"removed {args.name!r} from {_where(document)}")
    return ExitCode.OK


def _listing(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    for document in _sources(args):
        for name, entry in document.servers.items():
            notes = []
            enabled = not (isinstance(entry, Mapping) and entry.get("enabled") is False)
            if not enabled:
                notes.append("disabled")
            if isinstance(entry, Mapping) and entry.get("trust") is True:
                notes.append("trusted")
            approval = _approval(document, name, entry)
            if approval is not None:
                notes.append(approval)
            shadowed = document.scope == "project" and name in seen
            if shadowed:
                notes.append("skipped: the user file has this name")
            seen.add(name)
            rows.append(
                {
                    "name": name,
                    "scope": document.scope,
                    "file": str(document.path),
                    "type": _kind(entry),
                    "target": _target_text(entry),
                    "enabled": enabled,
                    "approval": approval,
                    "skipped": shadowed,
                    "notes": notes,
                }
            )
    return rows


def _cmd_list(args: argparse.Namespace, out: _Out) -> int:
    rows = _listing(args)
    if out.json:
        out.document({"servers": rows, "files": [str(d.path) for d in _sources(args) if d.exists]})
        return ExitCode.OK
    if not rows:
        files = " and ".join(str(d.path) for d in _sources(args))
        out.line(f"no servers in {files}; add one with: trio-mcp add NAME -- COMMAND [ARG...]")
        return ExitCode.OK
    for line in _columns(
        ("NAME", "SCOPE", "TYPE", "RUNS / CONNECTS TO", "NOTES"),
        [(r["name"], r["scope"], r["type"], r["target"], ", ".join(r["notes"])) for r in rows],
    ):
        out.line(line)
    return ExitCode.OK


def _cmd_get(args: argparse.Namespace, out: _Out) -> int:
    for document in _sources(args):
        entry = document.servers.get(args.name)
        if entry is None:
            continue
        shown = redacted_entry(entry) if isinstance(entry, Mapping) else entry
        approval = _approval(document, args.name, entry)
        if out.json:
            out.document(
                {
                    "name": args.name,
                    "scope": document.scope,
                    "file": str(document.path),
                    "type": _kind(entry),
                    "entry": shown,
                    "approval": approval,
                }
            )
            return ExitCode.OK
        out.line(f"{args.name}:")
        out.line(f"  scope: {document.scope} ({document.path})")
        out.line(f"  type: {_kind(entry)}")
        out.line(f"  {'runs' if _kind(entry) == 'stdio' else 'connects to'}: {_target_text(entry)}")
        rest = dict(shown) if isinstance(shown, Mapping) else {}
        for key, label in (("env", "env"), ("headers", "header")):
            for k, v in (rest.pop(key, None) or {}).items():
                out.line(f"  {label}: {k}={v}")
        for key in ("type", "command", "args", "url"):
            rest.pop(key, None)
        for key, value in rest.items():
            out.line(f"  {key}: {json.dumps(value, ensure_ascii=False)}")
        if approval is not None:
            out.line(f"  approval: {approval}")
            if approval != "approved":
                out.line(f"  {_approve_hint(document, args.name)}")
        return ExitCode.OK
    known = sorted({n for d in _sources(args) for n in d.servers})
    raise _usage(f"no server named {args.name!r} (configured: {', '.join(known) or 'none'})")


def _cmd_import(args: argparse.Namespace, out: _Out) -> int:
    path = Path(args.file).expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise _usage(f"cannot read {path}: {exc}") from None
    try:
        document = json.loads(read_jsonc(text))
    except ValueError as exc:
        raise _usage(f"{path} is not valid JSON: {exc}") from None
    source: Source | None = args.source or detect(path, document)
    if source is None:
        raise _usage(
            f"cannot tell which client {path} belongs to: pass --from ({', '.join(SOURCES)})"
        )
    result = convert(document, source, path)
    target = _target(args)
    servers = dict(target.servers)
    imported: list[str] = []
    skipped = [{"name": name, "reason": reason} for name, reason in result.skipped]
    warnings = list(result.warnings)
    for name, entry in result.servers.items():
        if name in servers and not args.force:
            skipped.append(
                {"name": name, "reason": f"{target.path} has it already (--force replaces it)"}
            )
            continue
        try:
            warnings += _validate(name, entry)
        except _Exit as exc:
            skipped.append({"name": name, "reason": str(exc)})
            continue
        servers[name] = entry
        imported.append(name)
    if imported and not args.dry_run:
        _write(target, servers)
    if out.json:
        out.document(
            {
                "source": source,
                "file": str(path),
                "into": str(target.path),
                "scope": target.scope,
                "dry_run": bool(args.dry_run),
                "imported": [
                    {"name": name, "entry": redacted_entry(servers[name])} for name in imported
                ],
                "skipped": skipped,
                "warnings": warnings,
            }
        )
        return ExitCode.OK
    for warning in warnings:
        out.note(f"warning: {warning}")
    for item in skipped:
        out.note(f"skipped {item['name']!r}: {item['reason']}")
    verb = "would import" if args.dry_run else "imported"
    if imported:
        out.line(
            f"{verb} {len(imported)} server{'s' * (len(imported) != 1)} from {path} ({source}) "
            f"into {_where(target)}:"
        )
        for name in imported:
            out.line(f"  {name}  {_kind(servers[name])}  {_target_text(servers[name])}")
        if target.scope == "project" and not args.dry_run:
            out.line("they start only once approved: trio-mcp project approve NAME...")
    else:
        out.line(f"nothing imported from {path} ({source})")
    return ExitCode.OK
