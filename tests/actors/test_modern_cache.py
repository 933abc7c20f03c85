"""The result cache of 2026-07-28 servers (``ttlMs`` / ``cacheScope``) and the -32020 retry,
against the in-memory fake on trio's virtual clock (exact times).

The fake puts ``ttlMs`` and ``cacheScope`` on its modern results (``ttl_ms`` / ``cache_scope``:
0 and ``"private"`` unless told otherwise); every request it receives is in ``fake.requests``,
so a test counts what the client asked for.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
import trio
import trio.testing

from trio_mcp.actors.config._backoff import RetryPolicy
from trio_mcp.actors.config._config import RuntimeConfig, ServerConfig, TransportKind
from trio_mcp.actors.runtime._cache import (
    MAX_ENTRY_SIZE,
    MAX_TTL,
    CacheKey,
    ResultCache,
    authorization_context,
    cache_key,
    lifetime,
)
from trio_mcp.actors.runtime._events import ServerState
from trio_mcp.actors.runtime._runtime import Runtime, open_runtime
from trio_mcp.actors.testing._fakes import (
    FakePrompt,
    FakeResource,
    FakeServer,
    FakeTool,
)
from trio_mcp.protocol import CallTimeout, Era, HeaderMismatch, McpCatalogError, RpcError

Clock = trio.testing.MockClock

MODERN = "2026-07-28"
MINUTE = 60_000  # ms
EPS = 2**-10  # a time step that adds up exactly in binary floating point


def config(*servers: ServerConfig, **options: Any) -> RuntimeConfig:
    options.setdefault("retry", RetryPolicy(jitter=0.0))
    return RuntimeConfig(servers=servers, **options)


def methods(fake: FakeServer) -> list[str]:
    """The requests the fake got, but its ``subscriptions/listen``: a session opens one on each
    connection whatever the cache holds (the listen is not a result that can be cached)."""
    return [method for method, _ in fake.requests if method != "subscriptions/listen"]


def catalog(**options: Any) -> FakeServer:
    """A modern fake with a little of everything."""
    return FakeServer(
        name="m",
        era="modern",
        tools=[FakeTool("t")],
        resources=[FakeResource("doc://a", "a", text="A"), FakeResource("doc://b", "b", text="B")],
        prompts=[FakePrompt("p")],
        **options,
    )


async def reconnected(rt: Runtime, server: str, generation: int) -> None:
    """Wait until ``server`` is READY with a connection of ``generation``, and the registry
    has its tools."""
    while True:
        status = rt.status()[server]
        if status.state is ServerState.READY and status.generation == generation:
            await trio.testing.wait_all_tasks_blocked()
            return
        await rt._supervisors[server].wait_changed()


# --------------------------------------------------------------------------- the rules, alone


def test_the_key_is_the_method_the_revision_and_what_changes_the_result() -> None:
    assert cache_key("server/discover", MODERN, None) == CacheKey("server/discover", MODERN)
    assert cache_key("tools/list", MODERN, {"_meta": {"x": 1}}) == CacheKey("tools/list", MODERN)
    # no cursor and the empty cursor are two pages
    first = cache_key("tools/list", MODERN, None)
    empty = cache_key("tools/list", MODERN, {"cursor": ""})
    assert first is not None and empty is not None and first != empty
    assert cache_key("resources/read", MODERN, {"uri": "doc://a"}) == CacheKey(
        "resources/read", MODERN, "doc://a"
    )
    # a retry with what the host answered is never cached; nor is anything unknown
    assert cache_key("resources/read", MODERN, {"uri": "doc://a", "requestState": "s"}) is None
    assert cache_key("resources/read", MODERN, {"uri": "doc://a", "inputResponses": {}}) is None
    assert cache_key("prompts/list", MODERN, {"cursor": "c", "filter": "x"}) is None
    assert cache_key("resources/read", MODERN, {}) is None
    assert cache_key("tools/list", MODERN, {"cursor": 3}) is None
    assert cache_key("tools/call", MODERN, {"name": "t"}) is None
    assert cache_key("prompts/get", MODERN, {"name": "p"}) is None


def test_only_a_positive_integer_ttl_makes_a_result_fresh() -> None:
    assert lifetime({"ttlMs": 1500}) == (1.5, False)
    assert lifetime({"ttlMs": 1500, "cacheScope": "public"}) == (1.5, True)
    assert lifetime({"ttlMs": 1500, "cacheScope": "private"}) == (1.5, False)
    assert lifetime({"ttlMs": 1500, "cacheScope": "shared?"}) == (1.5, False)  # unknown: private
    assert lifetime({"ttlMs": 1500, "resultType": "complete"}) == (1.5, False)
    for ttl in (0, -1, None, "1000", 1000.0, True):
        assert lifetime({"ttlMs": ttl}) is None, ttl
    assert lifetime({}) is None
    assert lifetime({"ttlMs": 1500, "resultType": "input_required"}) is None
    assert lifetime({"ttlMs": 10**15}) == (MAX_TTL, False)


def test_the_authorization_context_is_the_credentials_alone() -> None:
    def server(**headers: str) -> ServerConfig:
        return ServerConfig(
            name="s", type=TransportKind.HTTP, url="https://x.test/mcp", headers=headers
        )

    alice = authorization_context(server(Authorization="Bearer alice", X_Trace="1"))
    assert alice == authorization_context(server(authorization="Bearer alice", X_Trace="2"))
    assert alice != authorization_context(server(Authorization="Bearer bob"))
    # a header the redaction rules take for a secret is a credential too
    keyed = authorization_context(server(**{"X-Api-Key": "k1"}))
    assert keyed != authorization_context(server(**{"X-Api-Key": "k2"}))
    assert keyed != authorization_context(server())
    assert authorization_context(server()) == authorization_context(
        ServerConfig(name="s", command="srv")
    )
    assert len(alice) == 64 and "alice" not in alice


async def test_private_entries_never_cross_authorization_contexts_public_ones_do() -> None:
    def server(token: str) -> ServerConfig:
        return ServerConfig(
            name="s",
            type=TransportKind.HTTP,
            url="https://x.test/mcp",
            headers={"Authorization": f"Bearer {token}"},
        )

    alice, bob = authorization_context(server("alice")), authorization_context(server("bob"))
    cache = ResultCache(server="s", context=alice)
    lease = cache.lend(1)
    private = CacheKey("resources/read", MODERN, "doc://mine")
    public = CacheKey("resources/read", MODERN, "doc://all")
    mine = {"contents": [], "ttlMs": MINUTE, "cacheScope": "private"}
    everyone = {"contents": [], "ttlMs": MINUTE, "cacheScope": "public"}
    unsaid = {"contents": [], "ttlMs": MINUTE}  # no cacheScope: taken as private
    unsaid_key = CacheKey("resources/read", MODERN, "doc://unsaid")
    assert lease.store(private, mine, epoch=lease.epoch("resources/read"))
    assert lease.store(public, everyone, epoch=lease.epoch("resources/read"))
    assert lease.store(unsaid_key, unsaid, epoch=lease.epoch("resources/read"))
    # the configured context (alice's) sees all three
    assert lease.fresh(private) is mine
    assert lease.fresh(public) is everyone
    assert lease.fresh(unsaid_key) is unsaid
    # another authorization context of the same server: only the public one
    assert lease.fresh(private, context=bob) is None
    assert lease.fresh(unsaid_key, context=bob) is None
    assert lease.fresh(public, context=bob) is everyone
    # bob's own private entry does not reach alice either
    theirs = {"contents": [{"uri": "doc://mine", "text": "bob"}], "ttlMs": MINUTE}
    assert lease.store(private, theirs, epoch=lease.epoch("resources/read"), context=bob)
    assert lease.fresh(private, context=bob) is theirs
    assert lease.fresh(private) is mine


async def test_a_lease_works_only_while_its_generation_holds_the_cache() -> None:
    cache = ResultCache(server="s", context="c")
    old = cache.lend(1)
    key = CacheKey("tools/list", MODERN)
    page = {"tools": [], "ttlMs": MINUTE}
    assert old.store(key, page, epoch=0)
    new = cache.lend(2)
    assert old.fresh(key) is None  # the supervisor lent it to the next connection
    assert not old.store(key, {"tools": [], "ttlMs": MINUTE}, epoch=0)
    assert new.fresh(key) is page  # what the last connection learned serves this one
    cache.reclaim(1)  # not the holder: nothing changes
    assert new.held
    cache.reclaim(2)
    assert (new.fresh(key), new.held) == (None, False)
    assert len(cache) == 1


async def test_an_answer_to_a_request_sent_before_a_change_is_not_kept() -> None:
    cache = ResultCache(server="s", context="c")
    lease = cache.lend(1)
    key = CacheKey("prompts/list", MODERN)
    epoch = lease.epoch("prompts/list")  # the request goes out...
    lease.changed("prompts")  # ...the server says its prompts changed...
    assert not lease.store(key, {"prompts": [], "ttlMs": MINUTE}, epoch=epoch)  # ...the answer
    assert lease.fresh(key) is None
    assert lease.store(key, {"prompts": [], "ttlMs": MINUTE}, epoch=lease.epoch("prompts/list"))


async def test_the_cache_is_bounded() -> None:
    cache = ResultCache(server="s", context="c")
    lease = cache.lend(1)
    big = {"contents": [{"uri": "doc://big", "text": "x" * MAX_ENTRY_SIZE}], "ttlMs": MINUTE}
    assert not lease.store(CacheKey("resources/read", MODERN, "doc://big"), big, epoch=0)
    assert len(cache) == 0
    part = {"contents": [{"uri": "u", "text": "x" * (MAX_ENTRY_SIZE // 2)}], "ttlMs": MINUTE}
    for index in range(40):  # 40 halves of an entry's maximum: past the 8-entry budget
        assert lease.store(CacheKey("resources/read", MODERN, f"doc://{index}"), part, epoch=0)
    assert len(cache) < 40 and cache.size <= 8 * MAX_ENTRY_SIZE
    assert lease.fresh(CacheKey("resources/read", MODERN, "doc://39")) is part
    assert lease.fresh(CacheKey("resources/read", MODERN, "doc://0")) is None  # oldest went


# --------------------------------------------------------------------------- freshness


async def test_a_fresh_listing_is_served_until_received_plus_ttl_exactly(
    autojump_clock: Clock,
) -> None:
    fake = catalog(ttl_ms={"resources/list": 2000})
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        await trio.sleep(5)
        first = await rt.list_resources("m")
        received = trio.current_time()
        assert received == 5
        assert methods(fake).count("resources/list") == 1
        await trio.sleep_until(received + 2.0 - 0.001)  # fresh: no request
        again = await rt.list_resources("m")
        assert again == first
        assert methods(fake).count("resources/list") == 1
        await trio.sleep_until(received + 2.0)  # now < received + ttl no more: stale
        await rt.list_resources("m")
        assert methods(fake).count("resources/list") == 2
        received = trio.current_time()
        await rt.list_resources("m")  # the new answer is fresh for 2 s again
        assert methods(fake).count("resources/list") == 2
        await trio.sleep_until(received + 2.0)
        await rt.list_resources("m")
        assert methods(fake).count("resources/list") == 3


@pytest.mark.parametrize("ttl", [0, -5, None])
async def test_a_zero_negative_absent_or_malformed_ttl_is_stale_at_once(
    autojump_clock: Clock, ttl: Any
) -> None:
    fake = catalog(ttl_ms=dict.fromkeys(("resources/list", "prompts/list", "resources/read"), ttl))
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        for _ in range(3):
            await rt.list_resources("m")
            await rt.list_prompts("m")
            await rt.read_resource("m", "doc://a")
    for method in ("resources/list", "prompts/list", "resources/read"):
        assert methods(fake).count(method) == 3, method


async def test_every_cacheable_kind_is_served_from_the_cache(autojump_clock: Clock) -> None:
    cached = ("resources/list", "resources/templates/list", "prompts/list", "resources/read")
    fake = catalog(ttl_ms=dict.fromkeys(cached, MINUTE))
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        for _ in range(3):
            assert [r.uri for r in (await rt.list_resources("m")).resources] == [
                "doc://a",
                "doc://b",
            ]
            await rt.list_resource_templates("m")
            assert [p.name for p in (await rt.list_prompts("m")).prompts] == ["p"]
            assert (await rt.read_resource("m", "doc://a")).text == "A"
            assert (await rt.read_resource("m", "doc://b")).text == "B"
            await rt.get_prompt("m", "p")  # prompts/get is never cached
    for method in cached[:-1]:
        assert methods(fake).count(method) == 1, method
    assert methods(fake).count("resources/read") == 2  # one per URI
    assert methods(fake).count("prompts/get") == 3


async def test_caching_can_be_turned_off(autojump_clock: Clock) -> None:
    fake = catalog(ttl_ms={"resources/read": MINUTE, "tools/list": MINUTE})
    async with open_runtime(config(fake.server_config(), cache_results=False)) as rt:
        await rt.wait_ready()
        await rt.read_resource("m", "doc://a")
        await rt.read_resource("m", "doc://a")
        assert rt._supervisors["m"]._cache is None
    assert methods(fake).count("resources/read") == 2


async def test_a_legacy_server_is_never_cached_even_when_it_sends_a_ttl(
    autojump_clock: Clock,
) -> None:
    listing = {"resources": [{"uri": "doc://a", "name": "a"}], "ttlMs": MINUTE}
    fake = FakeServer(
        name="l",
        resources=[FakeResource("doc://a", "a", text="A")],
        results={"resources/list": listing},
    )
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        await rt.list_resources("l")
        await rt.list_resources("l")
    assert methods(fake).count("resources/list") == 2


# --------------------------------------------------------------------------- input rounds


async def test_results_that_went_through_input_rounds_are_never_cached(
    autojump_clock: Clock,
) -> None:
    def read(params: Mapping[str, Any]) -> Mapping[str, Any]:
        uri = params["uri"]
        if uri == "doc://plain":  # a first-round answer: cached
            return {"contents": [{"uri": uri, "text": "plain"}], "ttlMs": MINUTE}
        if "requestState" not in params:  # an interim answer, with a ttl it must not have
            return {
                "resultType": "input_required",
                "requestState": "busy",
                "ttlMs": MINUTE,
                "cacheScope": "public",
            }
        assert params["requestState"] == "busy"
        return {
            "resultType": "complete",
            "contents": [{"uri": uri, "text": "after a round"}],
            "ttlMs": MINUTE,
            "cacheScope": "public",
        }

    fake = catalog(results={"resources/read": read})
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        for _ in range(2):
            assert (await rt.read_resource("m", "doc://slow")).text == "after a round"
            assert (await rt.read_resource("m", "doc://plain")).text == "plain"
    reads = [p for m, p in fake.requests if m == "resources/read"]
    slow = [p for p in reads if p is not None and p["uri"] == "doc://slow"]
    plain = [p for p in reads if p is not None and p["uri"] == "doc://plain"]
    assert ["requestState" in p for p in slow] == [False, True, False, True]  # never cached
    assert len(plain) == 1


# --------------------------------------------------------------------------- invalidation


async def test_change_notifications_drop_the_fresh_entries_they_concern(
    autojump_clock: Clock,
) -> None:
    cached = ("resources/list", "resources/templates/list", "prompts/list", "resources/read")
    fake = catalog(ttl_ms=dict.fromkeys(cached, MINUTE))

    async def everything(rt: Runtime) -> None:
        await rt.list_resources("m")
        await rt.list_resource_templates("m")
        await rt.list_prompts("m")
        await rt.read_resource("m", "doc://a")
        await rt.read_resource("m", "doc://b")

    def counts() -> dict[str, int]:
        reads = [p["uri"] for m, p in fake.requests if m == "resources/read" and p is not None]
        out = {method: methods(fake).count(method) for method in cached[:-1]}
        out.update({uri: reads.count(uri) for uri in ("doc://a", "doc://b")})
        return out

    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        await everything(rt)
        await everything(rt)
        assert set(counts().values()) == {1}
        await fake.emit_list_changed("prompts")
        await trio.testing.wait_all_tasks_blocked()
        await everything(rt)
        assert counts() == {
            "resources/list": 1,
            "resources/templates/list": 1,
            "prompts/list": 2,
            "doc://a": 1,
            "doc://b": 1,
        }
        await fake.emit_list_changed("resources")
        await fake.notify("notifications/resources/updated", {"uri": "doc://b"})
        await trio.testing.wait_all_tasks_blocked()
        await everything(rt)
        assert counts() == {
            "resources/list": 2,
            "resources/templates/list": 2,
            "prompts/list": 2,
            "doc://a": 1,  # another URI's update leaves it fresh
            "doc://b": 2,
        }
        assert trio.current_time() == 0


async def test_a_tools_change_drops_the_cached_listing_before_a_reconnect_uses_it(
    autojump_clock: Clock,
) -> None:
    fake = catalog(ttl_ms={"server/discover": MINUTE, "tools/list": MINUTE})
    runtime = config(fake.server_config(), list_changed_debounce=5.0)
    async with open_runtime(runtime) as rt:
        await rt.wait_ready()
        fake.set_tools([FakeTool("t"), FakeTool("u")])
        await fake.emit_list_changed("tools")
        await trio.testing.wait_all_tasks_blocked()
        fake.requests.clear()
        await fake.disconnect()  # within the debounce: the re-lister never ran
        await reconnected(rt, "m", 2)
        assert sorted(rt.tools()) == ["mcp_m_t", "mcp_m_u"]
    # discover is still fresh; the tool listing was dropped by the notification
    assert methods(fake) == ["tools/list"]


# --------------------------------------------------------------------------- reconnects


async def test_a_reconnect_with_a_fresh_discover_and_listing_sends_neither(
    autojump_clock: Clock,
) -> None:
    fake = FakeServer(
        name="m",
        era="modern",
        tools=[FakeTool("t"), FakeTool("u"), FakeTool("v")],
        page_size=2,
        ttl_ms={"server/discover": MINUTE, "tools/list": MINUTE},
    )
    # every reconnect after 1 s (the failure count starts over at each drop)
    retry = RetryPolicy(jitter=0.0, healthy_after=0.0)
    async with open_runtime(config(fake.server_config(), retry=retry)) as rt:
        await rt.wait_ready()
        assert methods(fake) == ["server/discover", "tools/list", "tools/list"]
        fake.requests.clear()
        await trio.sleep(10)
        await fake.disconnect()
        await reconnected(rt, "m", 2)
        assert fake.connect_times == [0, 11]  # the reconnect after 1 s
        assert methods(fake) == []  # discover and both pages came from the cache
        assert sorted(rt.tools()) == ["mcp_m_t", "mcp_m_u", "mcp_m_v"]
        status = rt.status()["m"]
        assert (status.era, status.protocol_version, status.tool_count) == (Era.MODERN, MODERN, 3)
        assert (await rt.call("mcp_m_u", {"x": 1})).text == '{"x":1}'
        assert methods(fake) == ["tools/call"]
        fake.requests.clear()
        # received at 0, fresh for 60 s: just before 60 still fresh
        await trio.sleep_until(60 - EPS - 1)
        await fake.disconnect()
        await reconnected(rt, "m", 3)
        assert fake.connect_times[-1] == 60 - EPS
        assert methods(fake) == []
        await fake.disconnect()
        await reconnected(rt, "m", 4)
        received = fake.connect_times[-1]
        assert received == 61 - EPS
        assert methods(fake) == ["server/discover", "tools/list", "tools/list"]  # stale
        fake.requests.clear()
        # received anew: stale at exactly received + 60 s
        await trio.sleep_until(received + 60 - 1)
        await fake.disconnect()
        await reconnected(rt, "m", 5)
        assert fake.connect_times[-1] == received + 60
        assert methods(fake) == ["server/discover", "tools/list", "tools/list"]


async def test_a_reconnect_lists_again_what_is_not_fresh(autojump_clock: Clock) -> None:
    fake = catalog(ttl_ms={"server/discover": MINUTE})  # the tool listing: ttlMs 0
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        fake.requests.clear()
        await fake.disconnect()
        await reconnected(rt, "m", 2)
    assert methods(fake) == ["tools/list"]


async def test_a_refused_cursor_after_a_cached_page_drops_the_listing_and_starts_again(
    autojump_clock: Clock,
) -> None:
    state = {"epoch": 1}

    def tools(params: Mapping[str, Any]) -> Mapping[str, Any]:
        epoch = state["epoch"]
        cursor = params.get("cursor")
        if cursor is None:  # the first page: fresh for a minute
            return {
                "tools": [{"name": f"first{epoch}", "inputSchema": {"type": "object"}}],
                "nextCursor": f"e{epoch}",
                "ttlMs": MINUTE,
            }
        if cursor != f"e{epoch}":
            raise RpcError(f"Invalid cursor {cursor!r}", code=-32602)
        return {"tools": [{"name": f"second{epoch}", "inputSchema": {"type": "object"}}]}

    fake = FakeServer(
        name="m",
        era="modern",
        results={"tools/list": tools},
        ttl_ms={"server/discover": MINUTE},
    )
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        assert sorted(rt.tools()) == ["mcp_m_first1", "mcp_m_second1"]
        state["epoch"] = 2  # the server's cursors change
        fake.requests.clear()
        await fake.disconnect()
        await reconnected(rt, "m", 2)
        assert sorted(rt.tools()) == ["mcp_m_first2", "mcp_m_second2"]
    pages = [(p or {}).get("cursor") for m, p in fake.requests if m == "tools/list"]
    # page one from the cache, its cursor refused, then every page from the server
    assert pages == ["e1", None, "e2"]


async def test_a_refused_cursor_of_the_host_drops_the_cached_pages(
    autojump_clock: Clock,
) -> None:
    fake = FakeServer(
        name="m",
        era="modern",
        resources=[FakeResource(f"doc://{n}", str(n)) for n in range(3)],
        page_size=2,
        ttl_ms={"resources/list": MINUTE},
    )
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        first = await rt.list_resources("m")
        assert first.next_cursor is not None
        await rt.list_resources("m", first.next_cursor)
        await rt.list_resources("m")
        assert methods(fake).count("resources/list") == 2  # both pages cached
        with pytest.raises(McpCatalogError) as info:
            await rt.list_resources("m", "not a cursor of this server")
        assert info.value.kind == "invalid"
        assert "list again from the first page, without a cursor" in str(info.value)
        await rt.list_resources("m")
        await rt.list_resources("m", first.next_cursor)
        assert methods(fake).count("resources/list") == 5  # the refusal dropped both pages


# --------------------------------------------------------------------------- -32020


def regional(header: str) -> FakeTool:
    schema = {
        "type": "object",
        "properties": {"region": {"type": "string", "x-mcp-header": header}},
    }
    return FakeTool("t", input_schema=schema)


async def test_a_header_mismatch_lists_the_tools_again_and_retries_once(
    autojump_clock: Clock,
) -> None:
    fake = FakeServer(name="m", era="modern", http_headers=True, tools=[regional("Region")])
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        assert (await rt.call("mcp_m_t", {"region": "eu"})).text == '{"region":"eu"}'
        assert fake.headers_received[-1][1]["Mcp-Param-Region"] == "eu"
        # The server now mirrors the argument under another name, and says nothing.
        fake.set_tools([regional("Zone")])
        fake.requests.clear()
        fake.headers_received.clear()
        assert (await rt.call("mcp_m_t", {"region": "us"})).text == '{"region":"us"}'
        assert methods(fake) == ["tools/call", "tools/list", "tools/call"]
        sent = [headers for _, headers in fake.headers_received]
        assert sent[0].get("Mcp-Param-Region") == "us" and "Mcp-Param-Zone" not in sent[0]
        assert sent[2].get("Mcp-Param-Zone") == "us" and "Mcp-Param-Region" not in sent[2]
        # the registry has the new listing, and the next call is right the first time
        schema = rt.tools()["mcp_m_t"].tool.input_schema
        assert schema["properties"]["region"]["x-mcp-header"] == "Zone"
        fake.requests.clear()
        await rt.call("mcp_m_t", {"region": "ap"})
        assert methods(fake) == ["tools/call"]
        assert trio.current_time() == 0


async def test_a_newly_mirrored_argument_is_found_by_the_retry(autojump_clock: Clock) -> None:
    fake = FakeServer(name="m", era="modern", http_headers=True, tools=[FakeTool("t")])
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        fake.set_tools([regional("Region")])
        fake.requests.clear()
        assert (await rt.call("mcp_m_t", {"region": "eu"})).text == '{"region":"eu"}'
    assert methods(fake) == ["tools/call", "tools/list", "tools/call"]
    assert fake.headers_received[-1][1]["Mcp-Param-Region"] == "eu"


async def test_a_second_header_mismatch_is_the_error(autojump_clock: Clock) -> None:
    fake = FakeServer(
        name="m",
        era="modern",
        http_headers=True,
        tools=[regional("Region")],
        errors={"tools/call": (-32020, "Header mismatch: Mcp-Param-Region")},
    )
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        fake.requests.clear()
        with pytest.raises(HeaderMismatch) as info:
            await rt.call("mcp_m_t", {"region": "eu"})
        assert rt.status()["m"].state is ServerState.READY
    assert methods(fake) == ["tools/call", "tools/list", "tools/call"]
    message = str(info.value)
    assert "again after its tools were listed anew" in message
    assert "Mcp-Param-Region" in message
    assert isinstance(info.value.__cause__, HeaderMismatch)


async def test_calls_that_get_a_header_mismatch_together_share_one_listing(
    autojump_clock: Clock,
) -> None:
    fake = FakeServer(
        name="m",
        era="modern",
        http_headers=True,
        tools=[regional("Region")],
        respond_after={"tools/list": 1},
    )
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        fake.set_tools([regional("Zone")])
        fake.requests.clear()
        async with trio.open_nursery() as nursery:
            for region in ("eu", "us", "ap"):
                nursery.start_soon(rt.call, "mcp_m_t", {"region": region})
        assert trio.current_time() == 2  # the first listing at connect, then the shared one
    assert methods(fake).count("tools/list") == 1
    assert methods(fake).count("tools/call") == 6


async def test_without_http_headers_a_header_mismatch_is_not_retried(
    autojump_clock: Clock,
) -> None:
    fake = FakeServer(
        name="m",
        era="modern",
        tools=[regional("Region")],
        errors={"tools/call": (-32020, "Header mismatch")},
    )
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        fake.requests.clear()
        with pytest.raises(HeaderMismatch):
            await rt.call("mcp_m_t", {"region": "eu"})
    assert methods(fake) == ["tools/call"]


async def test_the_retry_after_a_header_mismatch_gets_what_is_left_of_the_calls_time(
    autojump_clock: Clock,
) -> None:
    # The call has 10 s: -32020 after 5 s, the tools listed in 3 s, the retry gets 2 s.
    fake = FakeServer(
        name="m",
        era="modern",
        http_headers=True,
        tools=[regional("Region")],
        respond_after={"tools/call": 5, "tools/list": 3},
    )
    async with open_runtime(config(fake.server_config(timeout=10))) as rt:
        await rt.wait_ready()
        start = trio.current_time()
        fake.set_tools([regional("Zone")])
        with pytest.raises(CallTimeout) as info:
            await rt.call("mcp_m_t", {"region": "eu"})
        assert trio.current_time() - start == 10
        assert info.value.timeout == 2
        # A listing that takes the rest of the time: the call is not sent again.
        fake.set_tools([regional("Region")])
        fake.respond_after["tools/list"] = 6
        fake.requests.clear()
        start = trio.current_time()
        with pytest.raises(CallTimeout) as spent:
            await rt.call("mcp_m_t", {"region": "eu"})
        assert trio.current_time() - start == 11
        assert "its time ran out while the tools were listed again" in str(spent.value)
        assert isinstance(spent.value.__cause__, HeaderMismatch)
    assert methods(fake) == ["tools/call", "tools/list"]


async def test_a_notification_drops_exactly_what_it_concerns() -> None:
    cache = ResultCache(server="s", context="c")
    lease = cache.lend(1)
    page = {"x": [], "ttlMs": MINUTE}
    keys = {
        method: CacheKey(method, MODERN)
        for method in ("tools/list", "prompts/list", "resources/list", "resources/templates/list")
    }
    reads = {uri: CacheKey("resources/read", MODERN, uri) for uri in ("doc://a", "doc://b")}
    discover = CacheKey("server/discover", MODERN)

    def fill() -> None:
        for key in (*keys.values(), *reads.values(), discover):
            lease.store(key, page, epoch=lease.epoch(key.method))

    def kept() -> set[str]:
        found = {m for m, key in keys.items() if lease.fresh(key) is not None}
        found |= {u for u, key in reads.items() if lease.fresh(key) is not None}
        return found | ({"discover"} if lease.fresh(discover) is not None else set())

    everything = {*keys, *reads, "discover"}
    fill()
    lease.on_notification("notifications/message", {"level": "info", "data": "x"})
    lease.on_notification("notifications/resources/updated", {"uri": 3})
    assert kept() == everything
    for method, params, gone in (
        ("notifications/tools/list_changed", None, {"tools/list"}),
        ("notifications/prompts/list_changed", {}, {"prompts/list"}),
        (
            "notifications/resources/list_changed",
            None,
            {"resources/list", "resources/templates/list"},
        ),
        ("notifications/resources/updated", {"uri": "doc://b"}, {"doc://b"}),
    ):
        fill()
        lease.on_notification(method, params)
        assert kept() == everything - gone, method
