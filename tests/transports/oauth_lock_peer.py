"""Another process sharing a FileTokenStore, for tests/transports/test_oauth_store.py.

Usage: ``python oauth_lock_peer.py DIRECTORY MODE NAME LOG [ROUNDS]``; the key is the tests'
``KEY``. Modes:

- ``rounds``: print ``ready``, wait for a line on stdin, then ROUNDS times: take the lock,
  append ``NAME+`` to LOG, read the counter file ``LOG.count``, write it back plus one, append
  ``NAME-``, release.
- ``hold``: take the lock, load the credential, print ``locked``, wait for a line on stdin,
  save a credential whose access token is ``from-NAME``, release, print ``released``.
- ``after``: print ``waiting``, take the lock, load the credential and print
  ``seen REVISION ACCESS_TOKEN``, release.
- ``take``: take the lock, print ``took``, release.

Each step is printed (flushed) so the test can follow without sleeping.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import trio

from trio_mcp.transports.oauth import Credential, CredentialKey, FileTokenStore, TokenRecord

KEY = CredentialKey(server="docs", resource="https://mcp.example/mcp", issuer="https://as.example")


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def append(log: Path, line: str) -> None:
    # O_APPEND: each line lands whole at the end, whoever writes.
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def bump(counter: Path) -> None:
    value = int(counter.read_text()) if counter.exists() else 0
    counter.write_text(str(value + 1))


async def main(directory: str, mode: str, name: str, log: Path, rounds: int) -> None:
    store = FileTokenStore(directory)
    if mode == "rounds":
        say("ready")
        await trio.to_thread.run_sync(sys.stdin.readline)
        for _ in range(rounds):
            async with store.lock(KEY):
                await trio.to_thread.run_sync(append, log, f"{name}+")
                await trio.to_thread.run_sync(bump, log.with_suffix(".count"))
                await trio.to_thread.run_sync(append, log, f"{name}-")
    elif mode == "hold":
        async with store.lock(KEY):
            current = await store.load(KEY) or Credential(key=KEY)
            say("locked")
            await trio.to_thread.run_sync(sys.stdin.readline)
            tokens = TokenRecord(access_token=f"from-{name}")
            await store.save(Credential(key=KEY, tokens=tokens, revision=current.revision))
        say("released")
    elif mode == "after":
        say("waiting")
        async with store.lock(KEY):
            credential = await store.load(KEY)
            assert credential is not None and credential.tokens is not None
            say(f"seen {credential.revision} {credential.tokens.access_token}")
    elif mode == "take":
        async with store.lock(KEY):
            say("took")
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    directory, mode, name, log_path, *rest = sys.argv[1:]
    trio.run(main, directory, mode, name, Path(log_path), int(rest[0]) if rest else 0)
