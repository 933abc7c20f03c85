"""``trio-mcp project``: the approvals of the servers a project file adds.

::

    trio-mcp project list [--all]             the project's servers, approved or not
    trio-mcp project approve NAME... [--yes]  show what each runs, confirm, approve
    trio-mcp project revoke NAME...           take approvals back

Each takes ``--project DIR`` (default: the current directory) and ``--json``. The project's
servers come from the Agentao layering (the user file, then ``DIR/.trio-mcp/mcp.json``), as in
``trio-mcp status``; the approvals from ``project-approvals.json`` next to the user file.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, TextIO

from ...protocol._errors import ConfigError
from ..config._approvals import ProjectApprovals, ProjectServerRequest, StoredApproval
from ..config._config import ServerConfig
from ..config._loader import LoadedConfig, approvals_path, load_agentao_config, project_config_path
from ._cli import ExitCode, _Exit, _Out, _usage

__all__ = ["add_project_commands"]

_APPROVED = "approved"
_CHANGED = "changed"
_NOT_APPROVED = "not approved"


def add_project_commands(commands: Any) -> None:
    """Add ``project`` and its subcommands to the ``trio-mcp`` subparsers ``commands``."""
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument(
        "--project",
        metavar="DIR",
        help="the project directory, the one holding .trio-mcp/mcp.json (default: the "
        "current directory)",
    )
    options.add_argument("--json", action="store_true", help="print one JSON document")
    project = commands.add_parser(
        "project",
        help="approve the servers a project's .trio-mcp/mcp.json adds",
        description="A server that a project's .trio-mcp/mcp.json adds does not start until "
        "that very entry is approved; any change to the entry needs a new approval.",
    )
    project_commands = project.add_subparsers(dest="project_command", metavar="SUBCOMMAND")
    listing = project_commands.add_parser(
        "list",
        parents=[options],
        help="the project's servers, what each runs, and whether it is approved",
    )
    listing.add_argument(
        "--all", action="store_true", help="also every approval stored, of every project"
    )
    listing.set_defaults(handler=_cmd_list)
    approve = project_commands.add_parser(
        "approve",
        parents=[options],
        help="show what a project server runs and approve it",
        description="Show the exact command line (or URL) of each named server of the "
        "project, ask for confirmation on a terminal, and record the approval.",
    )
    approve.add_argument("names", nargs="+", metavar="NAME", help="a server of the project file")
    approve.add_argument(
        "-y", "--yes", action="store_true", help="approve without asking (scripts, no terminal)"
    )
    approve.set_defaults(handler=_cmd_approve)
    revoke = project_commands.add_parser(
        "revoke",
        parents=[options],
        help="take approvals back: the servers stay disabled until approved again",
    )
    revoke.add_argument("names", nargs="+", metavar="NAME", help="an approved server")
    revoke.set_defaults(handler=_cmd_revoke)
    project.set_defaults(handler=lambda _args, _out: _help(project))


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return ExitCode.USAGE


# --------------------------------------------------------------------------- loading


def _project_dir(args: argparse.Namespace) -> Path:
    return Path(args.project) if args.project is not None else Path.cwd()


def _config_failure(exc: ConfigError) -> _Exit:
    return _Exit(
        ExitCode.CONFIG,
        str(exc),
        kind="config",
        details={
            "type": type(exc).__name__,
            "problems": [{"location": loc, "message": msg} for loc, msg in exc.problems],
        },
    )


def _load(args: argparse.Namespace, out: _Out) -> tuple[LoadedConfig, Path]:
    directory = _project_dir(args)
    if not directory.is_dir():
        raise _usage(f"no project directory {str(directory)!r}: give an existing --project DIR")
    try:
        loaded = load_agentao_config(working_dir=directory)
    except ConfigError as exc:
        raise _config_failure(exc) from None
    if not out.json:
        for warning in loaded.warnings:
            out.note(f"warning: {warning}")
    return loaded, directory


def _store(path: str | Path) -> ProjectApprovals:
    try:
        return ProjectApprovals.load(path)
    except ConfigError as exc:
        raise _config_failure(exc) from None


def _project_servers(loaded: LoadedConfig) -> list[ServerConfig]:
    return [server for server in loaded.config.servers if server.project is not None]


def _state(store: ProjectApprovals, server: ServerConfig) -> str:
    origin = server.project
    assert origin is not None
    stored = store.get(origin.project, server.name)
    if stored is None:
        return _NOT_APPROVED
    return _APPROVED if stored.digest == origin.digest else _CHANGED


def _server_json(server: ServerConfig, state: str) -> dict[str, Any]:
    origin = server.project
    assert origin is not None
    return {
        "name": server.name,
        "state": state,
        "transport": origin.transport,
        "command_line": origin.command_line,
        "cwd": origin.cwd,
        "env": dict(origin.env),
        "headers": dict(origin.headers),
        "trusted": origin.trusted,
        "digest": origin.digest,
    }


def _stored_json(approval: StoredApproval) -> dict[str, Any]:
    return {
        "project": approval.project,
        "name": approval.server,
        "command_line": approval.command_line,
        "digest": approval.digest,
        "approved_at": approval.approved_at,
    }


# --------------------------------------------------------------------------- list


def _cmd_list(args: argparse.Namespace, out: _Out) -> int:
    loaded, directory = _load(args, out)
    servers = _project_servers(loaded)
    store = _store(approvals_path())
    project = str(directory.resolve())
    rows = [(server, _state(store, server)) for server in servers]
    names = {server.name for server in servers}
    others = [a for a in store.of_project(project) if a.server not in names]
    everything = list(store) if args.all else []
    if out.json:
        document: dict[str, Any] = {
            "project": project,
            "file": str(project_config_path(directory)),
            "approvals_file": str(store.path),
            "servers": [_server_json(server, state) for server, state in rows],
            "other_approvals": [_stored_json(a) for a in others],
        }
        if args.all:
            document["all_approvals"] = [_stored_json(a) for a in everything]
        out.document(document)
        return ExitCode.OK
    if not rows:
        out.line(f"the project {project} adds no servers ({project_config_path(directory)})")
    else:
        out.line(f"the project {project} adds ({project_config_path(directory)}):")
        width = max(len(server.name) for server, _ in rows)
        for server, state in rows:
            origin = server.project
            assert origin is not None
            out.line(f"  {server.name:<{width}}  {state:<12}  {origin.describe()[0]}")
        if any(state != _APPROVED for _, state in rows):
            out.line("approve one with: trio-mcp project approve NAME (it shows all it runs first)")
    if others:
        out.line("approvals of this project for entries it no longer has:")
        for approval in others:
            out.line(f"  {approval.server}  {approval.command_line}")
    if args.all:
        out.line(f"every approval in {store.path}:")
        for approval in everything:
            out.line(
                f"  {approval.project}  {approval.server}  {approval.approved_at}  "
                f"{approval.command_line}"
            )
    return ExitCode.OK


# --------------------------------------------------------------------------- approve


def _confirm(out: _Out, question: str, stdin: TextIO) -> bool:
    """Ask ``question`` on the terminal; only ``y`` or ``yes`` approves."""
    print(f"{question} [y/N] ", end="", file=out.stderr, flush=True)
    answer = stdin.readline()
    return answer.strip().lower() in ("y", "yes")


def _cmd_approve(args: argparse.Namespace, out: _Out) -> int:
    loaded, directory = _load(args, out)
    servers = {server.name: server for server in _project_servers(loaded)}
    for name in args.names:
        if name in servers:
            continue
        file = project_config_path(directory)
        if any(server.name == name for server in loaded.config.servers):
            raise _usage(
                f"server {name!r} does not come from the project file {file}: it needs no approval"
            )
        known = ", ".join(sorted(servers)) or "none"
        raise _usage(f"the project file {file} adds no server {name!r} (it adds: {known})")
    stdin = sys.stdin
    interactive = bool(getattr(stdin, "isatty", None) and stdin.isatty())
    if not args.yes and not interactive:
        raise _usage(
            "approving needs a confirmation: run this on a terminal, or pass --yes to approve "
            "what is shown without asking"
        )
    results: list[dict[str, Any]] = []
    declined = False
    for name in dict.fromkeys(args.names):
        server = servers[name]
        origin = server.project
        assert origin is not None
        store = _store(origin.approvals_file)
        state = _state(store, server)
        request = ProjectServerRequest(server=name, origin=origin, changed=state == _CHANGED)
        if not out.json or not args.yes:
            stream = out.stderr if out.json else out.stdout
            print(request.describe(), file=stream, flush=True)
        if state == _APPROVED:
            if not out.json:
                out.line(f"{name!r} is approved already")
            results.append({**_server_json(server, state), "result": "already approved"})
            continue
        if not args.yes and not _confirm(out, f"Approve {name!r} to run this?", stdin):
            declined = True
            if not out.json:
                out.line(f"{name!r} is not approved: it stays disabled")
            results.append({**_server_json(server, state), "result": "declined"})
            continue
        try:
            store.approve(name, origin).save()
        except ConfigError as exc:
            raise _config_failure(exc) from None
        if not out.json:
            out.line(f"approved {name!r} (it starts from now on, until its entry changes)")
        results.append({**_server_json(server, _APPROVED), "result": "approved"})
    if out.json:
        out.document({"project": str(directory.resolve()), "servers": results})
    return ExitCode.FAILED if declined else ExitCode.OK


# --------------------------------------------------------------------------- revoke


def _cmd_revoke(args: argparse.Namespace, out: _Out) -> int:
    directory = _project_dir(args)
    project = str(directory.resolve())
    store = _store(approvals_path())
    stored = {a.server for a in store.of_project(project)}
    for name in args.names:
        if name not in stored:
            known = ", ".join(sorted(stored)) or "none"
            raise _usage(
                f"no approval of {name!r} is stored for the project {project} (approved: {known})"
            )
    for name in dict.fromkeys(args.names):
        store = store.revoke(project, name)
    try:
        store.save()
    except ConfigError as exc:
        raise _config_failure(exc) from None
    revoked = list(dict.fromkeys(args.names))
    if out.json:
        out.document({"project": project, "revoked": revoked})
    else:
        for name in revoked:
            out.line(f"revoked {name!r}: it stays disabled until approved again")
    return ExitCode.OK
