"""Token stores: where credentials live between runs.

- :class:`MemoryTokenStore`: in this process only (tests, embedded hosts that keep nothing).

Every store follows the :class:`~trio_mcp.transports.oauth.TokenStore` contract. The stored
``revision`` counts saves: :meth:`save` stores one more than the larger of the stored revision
and the saved credential's, so a process that loaded revision N, took :meth:`lock` and saved
leaves N + 1, and one that finds more than it started from after taking the lock knows that
another refreshed first.

- :class:`FileTokenStore`: one JSON file per credential in a directory of its own (the layout,
  permissions, atomic replace and cross-process lock are described on the class).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import re
import stat
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, Final, TypeVar

import attrs
import trio

from ...protocol._codec import structure, unstructure
from ...protocol._errors import (
    AuthorizationError,
    AuthorizationRequired,
    ConfigError,
    InvalidMessage,
)
from .._files import sync_directory, write_atomically
from ._types import Credential, CredentialKey

__all__ = ["FORMAT_VERSION", "FileTokenStore", "MemoryTokenStore"]

logger = logging.getLogger("trio_mcp.transports.oauth")

T = TypeVar("T")


def _sort_key(key: CredentialKey) -> tuple[str, str, str, str]:
    return (key.tenant, key.server, key.resource, key.issuer)


def _next_revision(stored: Credential | None, credential: Credential) -> int:
    return max(stored.revision if stored is not None else 0, credential.revision) + 1


class _KeyLocks:
    """One trio lock per credential key, dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[CredentialKey, tuple[trio.Lock, int]] = {}

    @asynccontextmanager
    async def hold(self, key: CredentialKey) -> AsyncIterator[None]:
        lock, users = self._locks.get(key, (None, 0))
        if lock is None:
            lock = trio.Lock()
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)


class MemoryTokenStore:
    """Credentials kept in this process's memory; gone when it exits. :meth:`lock` is a trio
    lock per key (this process has no one to share it with)."""

    def __init__(self) -> None:
        self._credentials: dict[CredentialKey, Credential] = {}
        self._locks = _KeyLocks()

    def __repr__(self) -> str:
        return f"MemoryTokenStore(credentials={len(self._credentials)})"

    async def load(self, key: CredentialKey) -> Credential | None:
        await trio.lowlevel.checkpoint()
        return self._credentials.get(key)

    async def find(self, server: str, resource: str, tenant: str = "") -> tuple[Credential, ...]:
        await trio.lowlevel.checkpoint()
        return tuple(
            self._credentials[key]
            for key in sorted(self._credentials, key=_sort_key)
            if key.server == server and key.resource == resource and key.tenant == tenant
        )

    async def save(self, credential: Credential) -> None:
        await trio.lowlevel.checkpoint()
        stored = self._credentials.get(credential.key)
        self._credentials[credential.key] = attrs.evolve(
            credential, revision=_next_revision(stored, credential)
        )

    async def delete(self, key: CredentialKey) -> bool:
        await trio.lowlevel.checkpoint()
        return self._credentials.pop(key, None) is not None

    async def list(self) -> tuple[Credential, ...]:
        await trio.lowlevel.checkpoint()
        return tuple(self._credentials[key] for key in sorted(self._credentials, key=_sort_key))

    def lock(self, key: CredentialKey) -> AbstractAsyncContextManager[None]:
        return self._locks.hold(key)


# --------------------------------------------------------------------------- the file store

#: The ``format`` of the files :class:`FileTokenStore` writes; it reads this one only.
FORMAT_VERSION: Final = 1

#: A credential file is a few kilobytes; anything larger is not one of ours.
MAX_FILE_BYTES: Final = 1 << 20

_NAME = re.compile(r"^(?P<group>[0-9a-f]{64})\.(?P<key>[0-9a-f]{64})\.json$")
_DIRECTORY_MODE: Final = 0o700
_FILE_MODE: Final = 0o600
#: How often a waiter retries a lock another process holds (seconds, doubling up to the max).
_LOCK_POLL: Final = 0.002
_LOCK_POLL_MAX: Final = 0.05


def _digest(fields: dict[str, str]) -> str:
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _group_digest(server: str, resource: str, tenant: str) -> str:
    return _digest({"server": server, "resource": resource, "tenant": tenant})


def file_name(key: CredentialKey) -> str:
    """The file name of ``key``'s credential: ``<group>.<key>.json``, where ``key`` is the
    SHA-256 of a canonical JSON of the key's four fields and ``group`` that of all but the
    issuer (so :meth:`FileTokenStore.find` reads only that server's files). Nothing the key
    holds ever reaches the file system as a name."""
    group = _group_digest(key.server, key.resource, key.tenant)
    whole = _digest(
        {
            "server": key.server,
            "resource": key.resource,
            "issuer": key.issuer,
            "tenant": key.tenant,
        }
    )
    return f"{group}.{whole}.json"


class _Unreadable(Exception):
    """A credential file that cannot be used (internal: becomes a typed error or a warning)."""


class FileTokenStore:
    """Credentials in ``directory``, one JSON file each.

    - **Names**: ``<sha256>.<sha256>.json`` (:func:`file_name`): a server named ``../../x``
      is only hashed, never a path.
    - **Permissions**: the directory is created ``0700``; an existing one that others may
      read or enter is tightened to ``0700`` when this user owns it, and refused with a
      :class:`ConfigError` saying what to run otherwise. Files are created ``0600`` (never
      briefly wider) and never followed through a symbolic link.
    - **Atomic replace**: a save writes a temporary file in the same directory, flushes and
      fsyncs it, renames it over the old one and fsyncs the directory: a crash leaves either
      the old file or the new one, never half of either.
    - **Format**: ``{"format": 1, "key": ..., "revision": ..., "client": ..., "tokens": ...,
      "dpopKey": ...}``.
    - **Damage**: :meth:`load` of a file that is corrupt, unreadable, too large, of another
      format or holding another key raises :class:`AuthorizationRequired` naming the file
      (the server needs a new sign-in, which replaces the file; nothing else is affected);
      :meth:`find` and :meth:`list` leave such a file out with a warning.
    - **Lock**: :meth:`lock` is a trio lock per key in this process plus ``flock`` on
      ``<name>.lock`` across processes, taken without blocking and retried, so that waiting is
      cancellable and a cancelled waiter never leaves a lock held.

    Every file operation runs in a worker thread, off the event loop.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self._directory = Path(directory)
        self._locks = _KeyLocks()
        self._ready = False

    @property
    def directory(self) -> Path:
        return self._directory

    def __repr__(self) -> str:
        return f"FileTokenStore({str(self._directory)!r})"

    def path_of(self, key: CredentialKey) -> Path:
        """Where ``key``'s credential lives (whether or not it exists)."""
        return self._directory / file_name(key)

    # ----------------------------------------------------------------------- the contract

    async def load(self, key: CredentialKey) -> Credential | None:
        path = self.path_of(key)
        try:
            return await self._run(self._read, path, key)
        except _Unreadable as exc:
            raise AuthorizationRequired(
                f"the stored credential of server {key.server!r} in {path} cannot be used: "
                f"{exc}; sign in again (trio-mcp login {key.server}) to replace it, or delete "
                "the file",
                server=key.server,
                hint=f"trio-mcp login {key.server}",
            ) from None

    async def find(self, server: str, resource: str, tenant: str = "") -> tuple[Credential, ...]:
        prefix = _group_digest(server, resource, tenant) + "."
        return await self._run(self._read_all, prefix)

    async def save(self, credential: Credential) -> None:
        await self._run(self._write, credential)

    async def delete(self, key: CredentialKey) -> bool:
        return await self._run(self._remove, self.path_of(key))

    async def list(self) -> tuple[Credential, ...]:
        return await self._run(self._read_all, "")

    def lock(self, key: CredentialKey) -> AbstractAsyncContextManager[None]:
        return self._hold(key)

    # ----------------------------------------------------------------------- locking

    @asynccontextmanager
    async def _hold(self, key: CredentialKey) -> AsyncIterator[None]:
        async with self._locks.hold(key):
            path = self.path_of(key).with_suffix(".lock")
            fd = await self._run(self._open_lock_file, path)
            try:
                delay = _LOCK_POLL
                # Never a blocking flock: a thread stuck in one cannot be cancelled, and an
                # abandoned one would take the lock later with nobody to release it.
                while not await trio.to_thread.run_sync(_try_flock, fd):
                    await trio.sleep(delay)
                    delay = min(delay * 2, _LOCK_POLL_MAX)
                yield
            finally:
                # Closing the descriptor releases the flock (one syscall, never blocks).
                os.close(fd)

    def _open_lock_file(self, path: Path) -> int:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, _FILE_MODE)
        except OSError as exc:
            raise AuthorizationError(
                f"cannot open the lock file {path}: {exc.strerror or exc}"
            ) from exc
        return fd

    # ----------------------------------------------------------------------- the worker side

    async def _run(self, function: Callable[..., T], *args: Any) -> T:
        return await trio.to_thread.run_sync(self._in_directory, function, *args)

    def _in_directory(self, function: Callable[..., T], *args: Any) -> T:
        if not self._ready:
            self._prepare_directory()
            self._ready = True
        return function(*args)

    def _prepare_directory(self) -> None:
        directory = self._directory
        try:
            directory.mkdir(mode=_DIRECTORY_MODE, parents=True, exist_ok=True)
            info = directory.stat()
        except OSError as exc:
            raise ConfigError(
                f"cannot create the token directory {directory}: {exc.strerror or exc}"
            ) from exc
        if not stat.S_ISDIR(info.st_mode):
            raise ConfigError(f"the token directory {directory} is not a directory")
        if info.st_uid != os.getuid():
            raise ConfigError(
                f"the token directory {directory} belongs to another user (uid {info.st_uid}): "
                "use a directory of your own"
            )
        if info.st_mode & 0o077:
            try:
                os.chmod(directory, _DIRECTORY_MODE)
            except OSError as exc:
                raise ConfigError(
                    f"the token directory {directory} may be read by other users "
                    f"(mode {stat.S_IMODE(info.st_mode):o}) and could not be tightened: "
                    f"run chmod 700 {directory}"
                ) from exc
            logger.warning(
                "token directory %s was readable by other users (mode %o): now 0700",
                directory,
                stat.S_IMODE(info.st_mode),
            )

    def _read(self, path: Path, key: CredentialKey | None) -> Credential | None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _Unreadable("it is a symbolic link, which is never followed") from None
            raise _Unreadable(f"it cannot be read ({exc.strerror or exc})") from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise _Unreadable("it is not a regular file")
            if info.st_size > MAX_FILE_BYTES:
                raise _Unreadable(f"it is larger than {MAX_FILE_BYTES} bytes")
            if info.st_mode & 0o077 and info.st_uid == os.getuid():
                os.fchmod(fd, _FILE_MODE)
                logger.warning("credential file %s was readable by other users: now 0600", path)
            data = b""
            while len(data) <= MAX_FILE_BYTES:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                data += chunk
        except OSError as exc:
            raise _Unreadable(f"it cannot be read ({exc.strerror or exc})") from None
        finally:
            os.close(fd)
        if len(data) > MAX_FILE_BYTES:
            raise _Unreadable(f"it is larger than {MAX_FILE_BYTES} bytes")
        return self._decode(data, path, key)

    def _decode(self, data: bytes, path: Path, key: CredentialKey | None) -> Credential:
        # Messages name what is wrong and where, never a value: the file holds secrets.
        try:
            document = json.loads(data)
        except (ValueError, UnicodeDecodeError):
            raise _Unreadable("it is not JSON") from None
        if not isinstance(document, dict):
            raise _Unreadable("it is not a JSON object")
        version = document.pop("format", None)
        if version != FORMAT_VERSION:
            if isinstance(version, int) and not isinstance(version, bool):
                raise _Unreadable(
                    f"it has format {version}; this trio-mcp reads format {FORMAT_VERSION}"
                )
            raise _Unreadable("it has no valid format field")
        try:
            credential = structure(document, Credential)
        except InvalidMessage as exc:
            raise _Unreadable(str(exc).replace("invalid Credential: ", "", 1)) from None
        if path.name != file_name(credential.key) or (key is not None and credential.key != key):
            raise _Unreadable("it holds the credential of another key (was it moved?)")
        return credential

    def _read_all(self, prefix: str) -> tuple[Credential, ...]:
        try:
            names = sorted(os.listdir(self._directory))
        except OSError as exc:
            raise AuthorizationError(
                f"cannot list the token directory {self._directory}: {exc.strerror or exc}"
            ) from exc
        found: list[Credential] = []
        for name in names:
            if not name.startswith(prefix) or _NAME.match(name) is None:
                continue
            path = self._directory / name
            try:
                credential = self._read(path, None)
            except _Unreadable as exc:
                logger.warning("credential file %s left out: %s", path, exc)
                continue
            if credential is not None:
                found.append(credential)
        found.sort(key=lambda c: _sort_key(c.key))
        return tuple(found)

    def _write(self, credential: Credential) -> None:
        path = self.path_of(credential.key)
        try:
            stored = self._read(path, credential.key)
        except _Unreadable as exc:
            logger.warning("credential file %s is replaced: %s", path, exc)
            stored = None
        saved = attrs.evolve(credential, revision=_next_revision(stored, credential))
        body = json.dumps(
            {"format": FORMAT_VERSION, **unstructure(saved)}, indent=1, ensure_ascii=False
        ).encode("utf-8")
        try:
            write_atomically(path, body, mode=_FILE_MODE)
        except OSError as exc:
            raise AuthorizationError(
                f"cannot save the credential of server {credential.key.server!r} to {path}: "
                f"{exc.strerror or exc}; the previous one (if any) is unchanged",
                server=credential.key.server,
            ) from exc

    def _remove(self, path: Path) -> bool:
        try:
            path.unlink()
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise AuthorizationError(
                f"cannot delete the credential file {path}: {exc.strerror or exc}"
            ) from exc
        with contextlib.suppress(OSError):
            sync_directory(self._directory)
        return True


def _try_flock(fd: int) -> bool:
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True
