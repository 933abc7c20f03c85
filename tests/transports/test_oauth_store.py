"""The token stores: the TokenStore contract (every store), then what the file store adds
(permissions, atomic replace, hashed names, corrupt files, locks across processes)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import trio
import trio.testing

from trio_mcp.transports.oauth import (
    ClientRecord,
    Credential,
    CredentialKey,
    MemoryTokenStore,
    TokenRecord,
    TokenStore,
)

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
