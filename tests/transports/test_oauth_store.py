"""The token stores: the TokenStore contract (every store), then what the file store adds
(permissions, atomic replace, hashed names, corrupt files, locks across processes)."""

from __future__ import annotations

import functools
import json
import logging
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from trio_mcp.protocol import AuthorizationError, AuthorizationRequired, ConfigError
from trio_mcp.transports.oauth import (
    ClientRecord,
    Credential,
    CredentialKey,
    FileTokenStore,
    MemoryTokenStore,
    TokenRecord,
    TokenStore,
)
from trio_mcp.transports.oauth._store import FORMAT_VERSION, file_name

SECRET = "s3cr3t-value-never-shown"

KEY = CredentialKey(server="docs", resource="https://mcp.example/mcp", issuer="https://as.example")


def credential(key: CredentialKey = KEY, *, access: str = SECRET, revision: int = 0) -> Credential:
    return Credential(
        key=key,
        client=ClientRecord(
            client_id="client-1",
            client_secret=SECRET + "-client",
            client_secret_expires_at=0,
            token_endpoint_auth_method="client_secret_basic",
            redirect_uris=("http://127.0.0.1:3000/callback",),
            source="dynamic",
        ),
        tokens=TokenRecord(
            access_token=access,
            token_type="Bearer",
            refresh_token=SECRET + "-refresh",
            expires_at=1_700_000_000.5,
            scopes=("read", "write"),
            obtained_at=1_699_999_000.0,
        ),
        dpop_key=SECRET + "-dpop",
        revision=revision,
    )


StoreFactory = Callable[[Path], TokenStore]

STORES: dict[str, StoreFactory] = {
    "memory": lambda _path: MemoryTokenStore(),
    "file": FileTokenStore,
}


@pytest.fixture(params=sorted(STORES))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> TokenStore:
    return STORES[request.param](tmp_path / "tokens")


# --------------------------------------------------------------------------- the contract


async def test_save_then_load_round_trips_every_field(store: TokenStore) -> None:
    assert await store.load(KEY) is None
    saved = credential()
    await store.save(saved)
    loaded = await store.load(KEY)
    assert loaded is not None
    assert loaded.key == saved.key
    assert loaded.client == saved.client
    assert loaded.tokens == saved.tokens
    assert loaded.dpop_key == saved.dpop_key
    assert loaded.revision == 1


async def test_a_credential_without_client_or_tokens_round_trips(store: TokenStore) -> None:
    await store.save(Credential(key=KEY))
    assert await store.load(KEY) == Credential(key=KEY, revision=1)


async def test_every_save_increments_the_revision(store: TokenStore) -> None:
    await store.save(credential())
    first = await store.load(KEY)
    assert first is not None and first.revision == 1
    # Saving what was loaded (revision 1) leaves revision 2.
    await store.save(first)
    second = await store.load(KEY)
    assert second is not None and second.revision == 2
    # A save from an older copy (revision 0) still moves the revision forward.
    await store.save(credential(access="other"))
    third = await store.load(KEY)
    assert third is not None and third.revision == 3
    assert third.tokens is not None and third.tokens.access_token == "other"


async def test_find_returns_one_credential_per_issuer_of_that_server_and_resource(
    store: TokenStore,
) -> None:
    keys = [
        KEY,
        CredentialKey(server="docs", resource=KEY.resource, issuer="https://other-as.example"),
        CredentialKey(server="docs", resource="https://moved.example/mcp", issuer=KEY.issuer),
        CredentialKey(server="mail", resource=KEY.resource, issuer=KEY.issuer),
        CredentialKey(server="docs", resource=KEY.resource, issuer=KEY.issuer, tenant="acme"),
    ]
    for key in keys:
        await store.save(credential(key))
    found = await store.find("docs", KEY.resource)
    assert [c.key for c in found] == [KEY, keys[1]]
    tenant = await store.find("docs", KEY.resource, tenant="acme")
    assert [c.key for c in tenant] == [keys[4]]
    assert await store.find("nobody", KEY.resource) == ()
    assert {c.key for c in await store.list()} == set(keys)


async def test_delete_forgets_one_key_only(store: TokenStore) -> None:
    other = CredentialKey(server="mail", resource=KEY.resource, issuer=KEY.issuer)
    await store.save(credential())
    await store.save(credential(other))
    assert await store.delete(KEY) is True
    assert await store.delete(KEY) is False
    assert await store.load(KEY) is None
    assert await store.load(other) is not None
    assert [c.key for c in await store.list()] == [other]


async def test_lock_excludes_other_tasks_of_the_same_key_only(store: TokenStore) -> None:
    other = CredentialKey(server="mail", resource=KEY.resource, issuer=KEY.issuer)
    log: list[str] = []
    first_holds = trio.Event()
    release_first = trio.Event()

    async def first() -> None:
        async with store.lock(KEY):
            log.append("first in")
            first_holds.set()
            await release_first.wait()
            log.append("first out")

    async def second() -> None:
        await first_holds.wait()
        async with store.lock(KEY):
            log.append("second in")

    async def other_key() -> None:
        await first_holds.wait()
        async with store.lock(other):
            log.append("other key in")
        release_first.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(first)
        nursery.start_soon(second)
        nursery.start_soon(other_key)
    assert log == ["first in", "other key in", "first out", "second in"]


async def test_a_cancelled_waiter_leaves_the_lock_usable(store: TokenStore) -> None:
    holding = trio.Event()
    release = trio.Event()

    async def holder() -> None:
        async with store.lock(KEY):
            holding.set()
            await release.wait()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(holder)
        await holding.wait()
        scope = trio.CancelScope()

        async def waiter() -> None:
            with scope:
                async with store.lock(KEY):
                    pytest.fail("the lock was held by the other task")

        nursery.start_soon(waiter)
        await trio.testing.wait_all_tasks_blocked()
        scope.cancel()
        await trio.testing.wait_all_tasks_blocked()
        assert scope.cancelled_caught
        release.set()
    with trio.fail_after(5):
        async with store.lock(KEY):
            pass


async def test_the_store_and_its_records_never_show_a_secret(store: TokenStore) -> None:
    await store.save(credential())
    loaded = await store.load(KEY)
    texts = [repr(store), str(store), repr(loaded), repr(await store.list())]
    assert all(SECRET not in text for text in texts)


# --------------------------------------------------------------------------- the file store

OTHER = CredentialKey(server="mail", resource=KEY.resource, issuer=KEY.issuer)
PEER = Path(__file__).with_name("oauth_lock_peer.py")


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def make_directory(path: Path, mode: int) -> None:
    path.mkdir(mode=mode)
    os.chmod(path, mode)  # exactly, whatever the umask


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    return tmp_path / "tokens"


@pytest.fixture
def no_umask() -> Any:
    """umask 0: every permission the store gets comes from its own explicit modes."""
    previous = os.umask(0)
    yield
    os.umask(previous)


async def test_the_directory_is_0700_and_files_0600_even_without_a_umask(
    directory: Path, no_umask: None
) -> None:
    store = FileTokenStore(directory / "nested")
    await store.save(credential())
    async with store.lock(KEY):
        pass
    assert mode_of(directory / "nested") == 0o700
    names = sorted(os.listdir(directory / "nested"))
    assert names == [file_name(KEY), file_name(KEY).removesuffix(".json") + ".lock"]
    for name in names:
        assert mode_of(directory / "nested" / name) == 0o600


async def test_a_wider_directory_of_ours_is_tightened(
    directory: Path, caplog: pytest.LogCaptureFixture
) -> None:
    make_directory(directory, 0o755)
    with caplog.at_level(logging.WARNING):
        await FileTokenStore(directory).save(credential())
    assert mode_of(directory) == 0o700
    assert "readable by other users (mode 755): now 0700" in caplog.text


async def test_a_wider_directory_that_cannot_be_tightened_is_refused(
    directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_directory(directory, 0o777)

    def refuse(*_: Any) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "chmod", refuse)
    with pytest.raises(ConfigError, match=rf"mode 777.*run chmod 700 {directory}$"):
        await FileTokenStore(directory).load(KEY)


async def test_a_directory_of_another_user_is_refused(
    directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_directory(directory, 0o700)
    monkeypatch.setattr(os, "getuid", lambda: os.stat(directory).st_uid + 1)
    with pytest.raises(ConfigError, match="belongs to another user"):
        await FileTokenStore(directory).list()


async def test_a_file_in_place_of_the_directory_is_refused(directory: Path) -> None:
    _corrupt_path(directory)
    with pytest.raises(ConfigError, match="token directory"):
        await FileTokenStore(directory).list()


async def test_a_wider_credential_file_is_tightened_when_read(directory: Path) -> None:
    store = FileTokenStore(directory)
    await store.save(credential())
    os.chmod(store.path_of(KEY), 0o644)
    assert await store.load(KEY) is not None
    assert mode_of(store.path_of(KEY)) == 0o600


async def test_the_file_is_versioned_json_holding_everything(directory: Path) -> None:
    store = FileTokenStore(directory)
    await store.save(credential())
    document = json.loads(store.path_of(KEY).read_text())
    assert document["format"] == FORMAT_VERSION == 1
    assert document["key"] == {
        "server": "docs",
        "resource": KEY.resource,
        "issuer": KEY.issuer,
        "tenant": "",
    }
    assert document["revision"] == 1
    assert document["client"]["clientSecret"] == SECRET + "-client"
    assert document["tokens"]["accessToken"] == SECRET
    assert document["tokens"]["refreshToken"] == SECRET + "-refresh"
    assert document["dpopKey"] == SECRET + "-dpop"


async def test_a_failed_rename_leaves_the_old_file_intact(
    directory: Path, monkeypatch: pytest.MonkeyPatch, no_umask: None
) -> None:
    store = FileTokenStore(directory)
    await store.save(credential(access="old-token"))
    before = store.path_of(KEY).read_bytes()
    temporary_modes: list[int] = []

    def crash(source: Any, _target: Any) -> None:
        temporary_modes.append(mode_of(Path(source)))
        # What the new file holds is complete before the rename.
        assert json.loads(Path(source).read_text())["tokens"]["accessToken"] == SECRET
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(AuthorizationError, match="No space left on device") as info:
        await store.save(credential(access=SECRET))
    monkeypatch.undo()
    assert SECRET not in str(info.value)
    assert "is unchanged" in str(info.value)
    assert temporary_modes == [0o600]
    assert store.path_of(KEY).read_bytes() == before
    # No temporary file is left behind.
    assert sorted(os.listdir(directory)) == [file_name(KEY)]
    loaded = await store.load(KEY)
    assert loaded is not None and loaded.tokens is not None
    assert loaded.tokens.access_token == "old-token" and loaded.revision == 1


async def test_names_are_hashes_so_no_key_escapes_the_directory(tmp_path: Path) -> None:
    directory = tmp_path / "a" / "tokens"
    store = FileTokenStore(directory)
    hostile = CredentialKey(
        server="../../x",
        resource="/../../etc/passwd",
        issuer="https://as.example/../..\\..\\",
        tenant="../\x00/",
    )
    await store.save(credential(hostile))
    assert tree(tmp_path) == ["a", "a/tokens", f"a/tokens/{file_name(hostile)}"]
    assert file_name(hostile).count("/") == 0
    loaded = await store.load(hostile)
    assert loaded is not None and loaded.key == hostile
    # A name that looks like another key's fields is hashed like any other.
    assert file_name(CredentialKey(server="docs", resource="", issuer="")) != file_name(
        CredentialKey(server="", resource="docs", issuer="")
    )


def _corrupt_path(path: Path) -> None:
    path.write_text("")


def _corrupt(path: Path, how: str) -> None:
    good = json.loads(path.read_text())
    if how == "not json":
        path.write_text('{"tokens": {"accessToken": "' + SECRET)
    elif how == "not an object":
        path.write_text(json.dumps([SECRET]))
    elif how == "no format":
        del good["format"]
        path.write_text(json.dumps(good))
    elif how == "newer format":
        good["format"] = 2
        path.write_text(json.dumps(good))
    elif how == "wrong type":
        good["tokens"]["accessToken"] = 12345
        good["tokens"]["scopes"] = SECRET
        path.write_text(json.dumps(good))
    elif how == "another key":
        good["key"]["server"] = "mail"
        path.write_text(json.dumps(good))
    elif how == "too large":
        path.write_text(" " * (1 << 20) + json.dumps(good))
    elif how == "a symbolic link":
        target = path.with_name("elsewhere")
        path.rename(target)
        path.symlink_to(target)
    elif how == "a directory":
        path.unlink()
        path.mkdir()
    else:
        raise AssertionError(how)


CORRUPTIONS = {
    "not json": "is not JSON",
    "not an object": "is not a JSON object",
    "no format": "has no valid format field",
    "newer format": "has format 2; this trio-mcp reads format 1",
    "wrong type": r"expected a string, got a number @ \$\.tokens\.accessToken",
    "another key": "holds the credential of another key",
    "too large": "larger than 1048576 bytes",
    "a symbolic link": "symbolic link, which is never followed",
    "a directory": "not a regular file",
}


@pytest.mark.parametrize("how", sorted(CORRUPTIONS))
async def test_a_damaged_file_is_a_typed_error_for_its_key_alone(
    directory: Path, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = FileTokenStore(directory)
    await store.save(credential())
    await store.save(credential(OTHER))
    path = store.path_of(KEY)
    _corrupt(path, how)
    with pytest.raises(AuthorizationRequired, match=CORRUPTIONS[how]) as info:
        await store.load(KEY)
    error = info.value
    assert str(path) in str(error)
    assert error.server == "docs" and error.hint == "trio-mcp login docs"
    assert SECRET not in str(error)
    # The other credential is untouched; find and list leave the damaged one out, saying so.
    assert await store.load(OTHER) is not None
    with caplog.at_level(logging.WARNING):
        assert await store.find("docs", KEY.resource) == ()
        assert [c.key for c in await store.list()] == [OTHER]
    assert f"credential file {path} left out" in caplog.text
    assert SECRET not in caplog.text
    # Signing in again replaces it.
    if how != "a directory":
        await store.save(credential(access="fresh"))
        loaded = await store.load(KEY)
        assert loaded is not None and loaded.tokens is not None
        assert loaded.tokens.access_token == "fresh" and loaded.revision == 1


async def test_stray_files_in_the_directory_are_ignored(directory: Path) -> None:
    store = FileTokenStore(directory)
    await store.save(credential())
    (directory / "notes.json").write_text("{}")
    (directory / f".{file_name(KEY)}.0123.tmp").write_text("half")
    assert [c.key for c in await store.list()] == [KEY]


async def test_two_stores_on_one_directory_exclude_each_other(directory: Path) -> None:
    # flock belongs to the open file: two stores of one process exclude each other too.
    first, second = FileTokenStore(directory), FileTokenStore(directory)
    log: list[str] = []
    holding = trio.Event()
    release = trio.Event()

    async def hold() -> None:
        async with first.lock(KEY):
            log.append("first in")
            holding.set()
            await release.wait()
            log.append("first out")

    async def wait() -> None:
        await holding.wait()
        async with second.lock(KEY):
            log.append("second in")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(hold)
        nursery.start_soon(wait)
        await holding.wait()
        await trio.testing.wait_all_tasks_blocked()
        release.set()
    assert log == ["first in", "first out", "second in"]


async def test_no_error_or_repr_of_the_file_store_shows_a_secret(
    directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FileTokenStore(directory)
    await store.save(credential())
    texts = [repr(store), repr(await store.load(KEY)), repr(await store.list())]

    def fail(*_: Any, **__: Any) -> Any:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(AuthorizationError) as saving:
        await store.save(credential())
    monkeypatch.setattr(os, "open", fail)
    with pytest.raises(AuthorizationRequired) as loading:
        await store.load(KEY)
    with pytest.raises(AuthorizationError) as locking:
        async with store.lock(KEY):
            pass
    monkeypatch.undo()
    texts += [str(saving.value), str(loading.value), str(locking.value)]
    assert all(SECRET not in text for text in texts)


# --------------------------------------------------------------------------- other processes


class Peer:
    """A process running tests/transports/oauth_lock_peer.py, followed line by line."""

    def __init__(self, process: trio.Process) -> None:
        self.process = process
        self._buffer = b""

    @classmethod
    async def start(cls, nursery: trio.Nursery, *args: str) -> Peer:
        process: trio.Process = await nursery.start(
            functools.partial(
                trio.run_process,
                [sys.executable, str(PEER), *args],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                check=True,
            )
        )
        return cls(process)

    async def line(self) -> str:
        assert self.process.stdout is not None
        while b"\n" not in self._buffer:
            chunk = await self.process.stdout.receive_some()
            if not chunk:
                raise AssertionError(f"the peer ended early: {self._buffer!r}")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode()

    async def send(self, line: str) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send_all(line.encode() + b"\n")


async def test_two_processes_never_hold_the_lock_at_once(directory: Path, tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    rounds = 100
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            peers = [
                await Peer.start(nursery, str(directory), "rounds", name, str(log), str(rounds))
                for name in ("A", "B")
            ]
            for peer in peers:
                assert await peer.line() == "ready"
            # Both start their rounds together, so that they contend.
            for peer in peers:
                await peer.send("go")
    lines = log.read_text().split()
    assert len(lines) == 4 * rounds
    # Exclusion: every "X+" is followed at once by its own "X-"; nobody got in between.
    for enter, leave in zip(lines[::2], lines[1::2], strict=True):
        assert enter.endswith("+") and leave == enter[:-1] + "-"
    # Each read-modify-write of the counter saw the one before it.
    assert int(log.with_suffix(".count").read_text()) == 2 * rounds


async def test_a_process_that_takes_the_lock_after_another_sees_its_newer_revision(
    directory: Path, tmp_path: Path
) -> None:
    store = FileTokenStore(directory)
    await store.save(credential(access="original"))
    log = str(tmp_path / "unused")
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            holder = await Peer.start(nursery, str(directory), "hold", "A", log)
            assert await holder.line() == "locked"
            waiter = await Peer.start(nursery, str(directory), "after", "B", log)
            assert await waiter.line() == "waiting"
            # A saves only now, still holding the lock: had B got in before, it would have
            # seen revision 1 ("original").
            await holder.send("go")
            assert await holder.line() == "released"
            assert await waiter.line() == "seen 2 from-A"
    loaded = await store.load(KEY)
    assert loaded is not None and loaded.revision == 2


async def test_a_cancelled_wait_for_another_process_never_leaves_the_lock_held(
    directory: Path, tmp_path: Path
) -> None:
    store = FileTokenStore(directory)
    await store.save(credential())
    log = str(tmp_path / "unused")
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            holder = await Peer.start(nursery, str(directory), "hold", "A", log)
            assert await holder.line() == "locked"
            scope = trio.CancelScope()

            async def wait_for_lock() -> None:
                with scope:
                    async with store.lock(KEY):
                        pytest.fail("the lock was taken while another process held it")

            nursery.start_soon(wait_for_lock)
            await trio.testing.wait_all_tasks_blocked()
            scope.cancel()
            await holder.send("go")
            assert await holder.line() == "released"
            # Had the cancelled wait left a lock behind, this process would wait forever.
            taker = await Peer.start(nursery, str(directory), "take", "C", log)
            assert await taker.line() == "took"
        assert scope.cancelled_caught
    async with store.lock(KEY):
        pass
