"""Files that must never be seen half written: the token store's credentials, the runtime's task
records, the project approval store and the configuration files the command line edits.

:func:`write_atomically` writes a temporary file next to the target (created ``O_EXCL`` and
``O_NOFOLLOW``, so nothing that waits at that name is written through), gives it its mode
explicitly (whatever the umask), flushes it to disk, renames it over the target and flushes the
directory; a failure removes the temporary file and leaves the target as it was. The callers
keep what is theirs: the directory's permissions, which error to raise, whether a symbolic link
at the target is followed.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = ["sync_directory", "write_atomically"]


def write_atomically(path: Path, data: bytes, *, mode: int = 0o600) -> None:
    """Replace ``path`` with ``data`` atomically, the new file's permissions ``mode``. Raises
    ``OSError`` (the target unchanged, the temporary file removed)."""
    temporary = path.with_name(f".{path.name}.{os.urandom(8).hex()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(temporary, flags | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        try:
            os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    with contextlib.suppress(OSError):  # not every file system lets a directory be fsynced
        sync_directory(path.parent)


def sync_directory(directory: Path) -> None:
    """Flush ``directory``'s entries (a rename, a removal) to disk. Raises ``OSError``."""
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
