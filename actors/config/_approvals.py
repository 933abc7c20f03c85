"""Approvals of the servers that a project file adds.

A checked-in ``<project>/.trio-mcp/mcp.json`` is not trusted: a server it adds does not start
until the user has approved that entry, through the host's callback or ``trio-mcp project
approve``. An approval is bound to the entry's content: the sha256 of its canonical form (every
key, as written, ``${VAR}`` references unexpanded), so any change to the entry (another command,
an argument, an ``env`` or ``headers`` value, ``trust``...) needs a new approval, while a new
value of the user's own ``$GITHUB_TOKEN`` does not.

Approvals live in one file next to the user's ``mcp.json`` (``project-approvals.json``), keyed
by project directory and server name. It is written atomically (a temporary file in the same
directory, then a rename), created ``0600`` in a ``0700`` directory, and refused when another
user owns it or others may write to it.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import shlex
import stat
from collections.abc import Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final

import attrs

from ...protocol._errors import ConfigError
from ...transports._files import write_atomically

__all__ = [
    "APPROVALS_FILE_NAME",
    "ProjectApprovals",
    "ProjectOrigin",
    "ProjectServerApprover",
    "ProjectServerRequest",
    "StoredApproval",
    "approval_command",
    "entry_digest",
    "project_origin",
]

#: The approval store's file name, in the user's configuration directory.
APPROVALS_FILE_NAME: Final = "project-approvals.json"
_VERSION: Final = 1


def entry_digest(entry: Mapping[str, Any]) -> str:
    """``sha256:<hex>`` of the canonical form of a server entry as written (JSON with sorted
    keys and no spaces): equal for equal entries however they are laid out, different when any
    key or value differs."""
    canonical = json.dumps(entry, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def approval_command(server: str, project: str) -> str:
    """The command line that approves ``server`` of ``project``."""
    return f"trio-mcp project approve {shlex.quote(server)} --project {shlex.quote(project)}"


@attrs.frozen(kw_only=True)
class ProjectOrigin:
    """Where a server entry of a project file comes from and what it would run; the loader sets
    it as :attr:`ServerConfig.project`, and such a server does not start unless approved.

    Everything is kept *as written in the file*: ``${VAR}`` references unexpanded, so no value
    of the user's environment is ever in it, while a reference to one (a header carrying
    ``${GITHUB_TOKEN}`` to some URL) is visible; a literal value in a checked-in file is no
    secret of the user's. ``command_line`` is what it runs: for a stdio server the command and
    its arguments, shell-quoted; for a URL server the URL. ``env`` and ``headers`` are the
    ``(name, value)`` pairs it sets (``NODE_OPTIONS`` can change what a program runs)."""

    #: The project directory (absolute, symbolic links resolved).
    project: str
    #: The project's ``mcp.json``.
    file: str
    #: The approval store that holds (or will hold) its approval.
    approvals_file: str
    #: :func:`entry_digest` of the entry: what an approval is bound to.
    digest: str
    transport: str
    command_line: str = attrs.field(repr=False)
    cwd: str | None = None
    env: tuple[tuple[str, str], ...] = attrs.field(default=(), repr=False)
    headers: tuple[tuple[str, str], ...] = attrs.field(default=(), repr=False)
    trusted: bool = False

    @property
    def env_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.env)

    @property
    def header_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.headers)

    def describe(self) -> list[str]:
        """What the server would do, one fact a line, for a person deciding."""
        verb = "runs" if self.transport == "stdio" else f"connects ({self.transport}) to"
        lines = [f"{verb}: {self.command_line}"]
        if self.cwd is not None:
            lines.append(f"in: {self.cwd}")
        lines.extend(f"env: {name}={value}" for name, value in self.env)
        lines.extend(f"header: {name}: {value}" for name, value in self.headers)
        if self.trusted:
            lines.append('"trust": true: its tools run without asking unless marked destructive')
        lines.append(f"from: {self.file}")
        return lines


def project_origin(
    *,
    project: str,
    file: str,
    approvals_file: str,
    entry: Mapping[str, Any],
    transport: str,
) -> ProjectOrigin:
    """The :class:`ProjectOrigin` of a valid project ``entry`` (as read from the file)."""
    if entry.get("command") is not None:
        words = [str(entry["command"]), *(str(arg) for arg in entry.get("args") or ())]
        command_line = shlex.join(words)
    else:
        command_line = str(entry.get("url"))
    cwd = entry.get("cwd")
    return ProjectOrigin(
        project=project,
        file=file,
        approvals_file=approvals_file,
        digest=entry_digest(entry),
        transport=transport,
        command_line=command_line,
        cwd=cwd if isinstance(cwd, str) else None,
        env=_pairs(entry.get("env")),
        headers=_pairs(entry.get("headers")),
        trusted=entry.get("trust") is True or entry.get("trust_level") == "trusted",
    )


def _pairs(section: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(section, Mapping):
        return ()
    return tuple((str(name), str(value)) for name, value in section.items())


@attrs.frozen(kw_only=True)
class ProjectServerRequest:
    """What the host's ``approve_project_server`` callback is asked: may ``server``, which
    ``origin.file`` adds, start? ``changed`` is True when an earlier version of the entry was
    approved (it has changed since)."""

    server: str
    origin: ProjectOrigin
    changed: bool = False

    @property
    def project(self) -> str:
        return self.origin.project

    @property
    def command_line(self) -> str:
        return self.origin.command_line

    def describe(self) -> str:
        """The question, for a person: the server, the project and what it would run."""
        again = " (changed since it was approved)" if self.changed else ""
        head = f"The project {self.origin.project} adds the MCP server {self.server!r}{again}:"
        return "\n".join([head, *(f"  {line}" for line in self.origin.describe())])


#: The host's answer to a :class:`ProjectServerRequest`: True approves (and the approval is
#: remembered); anything else leaves the server DISABLED. May be sync or async.
ProjectServerApprover = Callable[[ProjectServerRequest], bool | Awaitable[bool]]


@attrs.frozen(kw_only=True)
class StoredApproval:
    """One approval in the store."""

    project: str
    server: str
    digest: str
    #: What the entry ran when it was approved (as :attr:`ProjectOrigin.command_line`).
    command_line: str
    #: When, in UTC (ISO 8601).
    approved_at: str


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


@attrs.frozen
class ProjectApprovals:
    """The approval store: a snapshot of the file at ``path``. Changing it gives a new snapshot
    (:meth:`approve`, :meth:`revoke`); :meth:`save` writes it."""

    path: Path
    approvals: Mapping[tuple[str, str], StoredApproval] = attrs.field(factory=dict)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> ProjectApprovals:
        """The store at ``path`` (empty when the file does not exist). Raises
        :class:`ConfigError` naming the file when it cannot be read, is not a store, or is not
        safe to trust (owned by another user, or writable by others)."""
        file = Path(path)
        try:
            with open(file, "rb") as handle:
                info = os.fstat(handle.fileno())
                raw = handle.read()
        except FileNotFoundError:
            return cls(file)
        except OSError as exc:
            raise _store_error(file, f"cannot read it: {exc.strerror or exc}") from None
        if not stat.S_ISREG(info.st_mode):
            raise _store_error(file, "it is not a regular file")
        getuid = getattr(os, "getuid", None)
        if getuid is not None and info.st_uid != getuid():
            raise _store_error(file, "another user owns it")
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise _store_error(file, f"others may write to it (chmod 600 {shlex.quote(str(file))})")
        try:
            document = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise _store_error(file, f"it is not valid JSON ({exc})") from None
        return cls(file, _parse(file, document))

    def get(self, project: str, server: str) -> StoredApproval | None:
        return self.approvals.get((project, server))

    def is_approved(self, server: str, origin: ProjectOrigin) -> bool:
        """Whether this very version of the entry (its digest) is approved."""
        stored = self.get(origin.project, server)
        return stored is not None and stored.digest == origin.digest

    def of_project(self, project: str) -> list[StoredApproval]:
        return [a for (p, _), a in sorted(self.approvals.items()) if p == project]

    def __iter__(self) -> Iterator[StoredApproval]:
        return iter([a for _, a in sorted(self.approvals.items())])

    def approve(self, server: str, origin: ProjectOrigin) -> ProjectApprovals:
        """A copy that approves this version of ``server``'s entry (replacing an earlier one)."""
        stored = StoredApproval(
            project=origin.project,
            server=server,
            digest=origin.digest,
            command_line=origin.command_line,
            approved_at=_now(),
        )
        return attrs.evolve(self, approvals={**self.approvals, (origin.project, server): stored})

    def revoke(self, project: str, server: str) -> ProjectApprovals:
        """A copy without the approval of ``server`` of ``project`` (if any)."""
        left = {key: a for key, a in self.approvals.items() if key != (project, server)}
        return attrs.evolve(self, approvals=left)

    def save(self) -> None:
        """Write the store atomically: a ``0600`` temporary file in the same directory (created
        ``0700`` if missing), flushed to disk, then renamed over the old one. Raises
        :class:`ConfigError` naming the file when that fails."""
        projects: dict[str, dict[str, dict[str, str]]] = {}
        for approval in self:
            projects.setdefault(approval.project, {})[approval.server] = {
                "digest": approval.digest,
                "command_line": approval.command_line,
                "approved_at": approval.approved_at,
            }
        text = json.dumps({"version": _VERSION, "projects": projects}, indent=2, sort_keys=True)
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            write_atomically(self.path, (text + "\n").encode("utf-8"), mode=0o600)
        except OSError as exc:
            raise _store_error(self.path, f"cannot write it: {exc.strerror or exc}") from None


def _store_error(path: Path, why: str) -> ConfigError:
    return ConfigError(
        f"the project approval store {path} cannot be used: {why}; fix or delete the file "
        "(deleting it forgets every approval: project servers are asked about again)",
        problems=((str(path), why),),
    )


def _parse(path: Path, document: Any) -> dict[tuple[str, str], StoredApproval]:
    def bad(why: str) -> ConfigError:
        return _store_error(path, why)

    if not isinstance(document, dict) or document.get("version") != _VERSION:
        raise bad(f'it is not a version {_VERSION} approval store ({{"version": {_VERSION}}})')
    projects = document.get("projects", {})
    if not isinstance(projects, dict):
        raise bad("'projects' must be an object")
    out: dict[tuple[str, str], StoredApproval] = {}
    for project, servers in projects.items():
        if not isinstance(servers, dict):
            raise bad(f"projects[{json.dumps(project)}] must be an object")
        for server, entry in servers.items():
            fields = ("digest", "command_line", "approved_at")
            if not isinstance(entry, dict) or not all(
                isinstance(entry.get(key), str) for key in fields
            ):
                raise bad(
                    f"projects[{json.dumps(project)}][{json.dumps(server)}] must be an object "
                    f"with the strings {', '.join(fields)}"
                )
            out[(project, server)] = StoredApproval(
                project=project,
                server=server,
                digest=entry["digest"],
                command_line=entry["command_line"],
                approved_at=entry["approved_at"],
            )
    return out
