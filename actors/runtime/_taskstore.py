"""Where the ids of the host's tasks are kept across restarts of the host process.

A task the host asked a handle for (``rt.start_task``) lives on the server for as long as the
server keeps it (its ``ttl``), which may be longer than the host process. Its id is what the host
needs to reach it again (``rt.resume_task(server, task_id)``), so it is written down with the
care a credential gets: one JSON file per task in a directory of mode ``0700``, each file mode
``0600``, written atomically (a temporary file in the same directory, flushed to disk, renamed
over the old one, the directory flushed too). A task's file is removed once its outcome was
delivered or it was cancelled.

A record holds what resuming needs and nothing of the call's content: the server's name, the
task id, the registered and wire name of the tool, the era that created it and the progress
token of the call. The file name is a digest of (server, task id), so a hostile server's task id
never becomes a path.

The store is plain blocking file I/O: the runtime runs its methods in a worker thread.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import stat
from pathlib import Path
from typing import Any, Final

import attrs

from ...protocol._errors import ConfigError
from ...transports._files import sync_directory, write_atomically

__all__ = ["TaskRecord", "TaskStore"]

logger = logging.getLogger("trio_mcp.tasks")

_VERSION: Final = 1
_SUFFIX: Final = ".task.json"
#: Records read at most from one store (a directory filled by something else is not read whole).
MAX_RECORDS: Final = 10_000


@attrs.frozen(kw_only=True)
class TaskRecord:
    """One persisted task: enough to resume it after a restart of the host process.

    ``era`` is ``"legacy"`` (a 2025-11-25 task) or ``"modern"`` (the 2026-07-28 tasks
    extension); ``tool`` is the registered name and ``wire_name`` the server's name of the tool
    (None when the task was resumed without knowing it); ``progress_token`` the token its
    progress notifications carry (2025-11-25); ``created_at`` the server's timestamp."""

    server: str
    task_id: str
    era: str
    tool: str | None = None
    wire_name: str | None = None
    progress_token: str | None = None
    created_at: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "version": _VERSION,
            "server": self.server,
            "taskId": self.task_id,
            "era": self.era,
            "tool": self.tool,
            "wireName": self.wire_name,
            "progressToken": self.progress_token,
            "createdAt": self.created_at,
        }

    @classmethod
    def from_json(cls, data: Any) -> TaskRecord | None:
        """The record in ``data``, or None when it is not one (wrong version or shape)."""
        if not isinstance(data, dict) or data.get("version") != _VERSION:
            return None
        server, task_id, era = data.get("server"), data.get("taskId"), data.get("era")
        if not (isinstance(server, str) and isinstance(task_id, str) and era in _ERAS):
            return None
        optional = {}
        for key, field in (
            ("tool", "tool"),
            ("wireName", "wire_name"),
            ("progressToken", "progress_token"),
            ("createdAt", "created_at"),
        ):
            value = data.get(key)
            if value is not None and not isinstance(value, str):
                return None
            optional[field] = value
        return cls(server=server, task_id=task_id, era=era, **optional)


_ERAS: Final = ("legacy", "modern")


def _file_name(server: str, task_id: str) -> str:
    digest = hashlib.sha256(f"{server}\0{task_id}".encode("utf-8", "surrogatepass")).hexdigest()
    return digest[:40] + _SUFFIX


@attrs.frozen
class TaskStore:
    """The directory of persisted task records (see the module docstring)."""

    directory: Path

    def _ensure_directory(self) -> None:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        mode = stat.S_IMODE(self.directory.stat().st_mode)
        if mode & 0o077:
            # created by someone else, or loosened since: tighten it, as a token store would
            os.chmod(self.directory, 0o700)

    def save(self, record: TaskRecord) -> None:
        """Write ``record`` atomically (``0600`` file in a ``0700`` directory). Raises
        :class:`ConfigError` naming the directory when that fails."""
        path = self.directory / _file_name(record.server, record.task_id)
        text = json.dumps(record.to_json(), sort_keys=True)
        try:
            self._ensure_directory()
            write_atomically(path, (text + "\n").encode("utf-8"), mode=0o600)
        except OSError as exc:
            raise self._error(f"cannot write to it: {exc.strerror or exc}") from None

    def remove(self, server: str, task_id: str) -> None:
        """Forget the task (nothing happens when it is not stored)."""
        path = self.directory / _file_name(server, task_id)
        try:
            path.unlink()
        except FileNotFoundError:
            return
        except OSError as exc:
            logger.warning("the task record %s could not be removed: %s", path, exc)
            return
        with contextlib.suppress(OSError):
            sync_directory(self.directory)

    def get(self, server: str, task_id: str) -> TaskRecord | None:
        """The stored record of the task, or None."""
        return self._read(self.directory / _file_name(server, task_id))

    def load(self) -> tuple[TaskRecord, ...]:
        """Every stored record, sorted by server and task id; a file that is not a record is
        skipped with a warning."""
        try:
            names = sorted(
                entry.name for entry in os.scandir(self.directory) if entry.name.endswith(_SUFFIX)
            )
        except FileNotFoundError:
            return ()
        except OSError as exc:
            raise self._error(f"cannot read it: {exc.strerror or exc}") from None
        records = [self._read(self.directory / name) for name in names[:MAX_RECORDS]]
        found = [record for record in records if record is not None]
        return tuple(sorted(found, key=lambda r: (r.server, r.task_id)))

    def _read(self, path: Path) -> TaskRecord | None:
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            logger.warning("the task record %s cannot be read (%s): skipped", path, exc)
            return None
        try:
            record = TaskRecord.from_json(json.loads(text))
        except ValueError:
            record = None
        if record is None:
            logger.warning("the task record %s is not a trio-mcp task record: skipped", path)
        return record

    def _error(self, why: str) -> ConfigError:
        return ConfigError(
            f"the task store {self.directory} cannot be used: {why}; fix its permissions or set "
            "RuntimeConfig(task_store=...) to another directory",
            problems=((str(self.directory), why),),
        )
