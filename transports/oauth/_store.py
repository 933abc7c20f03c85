"""Token stores: where credentials live between runs.

- :class:`MemoryTokenStore`: in this process only (tests, embedded hosts that keep nothing).

Every store follows the :class:`~trio_mcp.transports.oauth.TokenStore` contract. The stored
``revision`` counts saves: :meth:`save` stores one more than the larger of the stored revision
and the saved credential's, so a process that loaded revision N, took :meth:`lock` and saved
leaves N + 1, and one that finds more than it started from after taking the lock knows that
another refreshed first.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import attrs
import trio

from ._types import Credential, CredentialKey

__all__ = ["MemoryTokenStore"]


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
