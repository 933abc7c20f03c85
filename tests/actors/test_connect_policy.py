"""The connect policy for many servers: wait for all, for the first N, or go on with those that
came up within a bound; reconnect the failed ones only; the summary of active, failed and parked
servers. On trio's virtual clock (exact times), against in-memory fake servers."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from trio_mcp.actors import RetryPolicy, Runtime, RuntimeConfig, ServerConfig, open_runtime
from trio_mcp.actors.testing import FakeServer, FakeTool
from trio_mcp.protocol import ServerUnavailable

Clock = trio.testing.MockClock


def fleet() -> tuple[FakeServer, FakeServer, FakeServer]:
    """``fast`` is ready at once, ``slow`` after 5 s, ``bad`` never (parked after its first
    connect's retries: 1 + 2 + 4 + 8 + 16 = 31 s)."""
    fast = FakeServer(name="fast", tools=[FakeTool("a")])
    slow = FakeServer(name="slow", tools=[FakeTool("b")], respond_after={"initialize": 5.0})
    bad = FakeServer(name="bad", tools=[FakeTool("c")], refuse_connects=100)
    return fast, slow, bad


def config(*servers: FakeServer, **options: Any) -> RuntimeConfig:
    extra: tuple[ServerConfig, ...] = options.pop("extra", ())
    return RuntimeConfig(
        servers=(*(s.server_config() for s in servers), *extra),
        retry=RetryPolicy(jitter=0.0),
        **options,
    )


async def waited(rt: Runtime, **options: Any) -> tuple[float, Any]:
    start = trio.current_time()
    report = await rt.wait_ready(**options)
    return trio.current_time() - start, report


async def test_wait_for_the_first_n_ready(autojump_clock: Clock) -> None:
    async with open_runtime(config(*fleet())) as rt:
        took, first = await waited(rt, min_ready=1)
        assert (took, first.ready, first.timed_out, first.min_ready) == (0.0, ("fast",), False, 1)
        assert set(first.not_settled) == {"slow", "bad"}
        took, two = await waited(rt, min_ready=2)
        assert (took, two.ready, two.timed_out) == (5.0, ("fast", "slow"), False)
        assert two.raise_for_failed() is two  # two were wanted, two are ready
        assert sorted(rt.tools()) == ["mcp_fast_a", "mcp_slow_b"]


async def test_go_on_with_those_that_came_up_in_time(autojump_clock: Clock) -> None:
    async with open_runtime(config(*fleet())) as rt:
        took, report = await waited(rt, timeout=10, min_ready=3)
        assert (took, report.ready, report.timed_out) == (10.0, ("fast", "slow"), True)
        assert report.not_settled == ("bad",)
        with pytest.raises(ServerUnavailable) as caught:
            report.raise_for_failed()
    assert str(caught.value).startswith("2 of 3 servers are ready (3 wanted); not ready: bad")
    assert caught.value.server == "bad"


async def test_wait_for_all_and_the_summary(autojump_clock: Clock) -> None:
    disabled = ServerConfig(name="off", command="unused", enabled=False)
    async with open_runtime(config(*fleet(), extra=(disabled,))) as rt:
        now = rt.summary()
        assert (now.timed_out, now.disabled) == (False, ("off",))
        took, report = await waited(rt)  # every server settles: READY, PARKED, DISABLED
        assert took == 31.0
        assert not report.timed_out
        assert report.active == report.ready == ("fast", "slow")
        assert report.failed == ("bad", "off")
        assert report.parked == ("bad",)
        assert report.needs_auth == ()
        assert report.errors["bad"].startswith("ConnectError: fake server 'bad' refused")
        summary = rt.summary()
        assert (summary.active, summary.parked, summary.disabled) == (
            ("fast", "slow"),
            ("bad",),
            ("off",),
        )
        assert summary.not_settled == ()
        with pytest.raises(ServerUnavailable, match=r"2 of 4 servers are ready; not ready: bad"):
            summary.raise_for_failed()


async def test_more_wanted_than_can_be_ready_returns_once_all_settled(
    autojump_clock: Clock,
) -> None:
    async with open_runtime(config(*fleet())) as rt:
        took, report = await waited(rt, min_ready=3)
        assert (took, report.ready, report.timed_out) == (31.0, ("fast", "slow"), False)
        took, none = await waited(rt, min_ready=0)
        assert (took, none.timed_out) == (0.0, False)
        with pytest.raises(ValueError, match="min_ready must be an integer >= 0, got -1"):
            await rt.wait_ready(min_ready=-1)


async def test_reconnect_the_failed_servers_only(autojump_clock: Clock) -> None:
    fast, slow, bad = fleet()
    async with open_runtime(config(fast, slow, bad)) as rt:
        await rt.wait_ready()
        assert rt.summary().parked == ("bad",)
        before = {s.name: len(s.connect_times) for s in (fast, slow, bad)}
        bad.refuse_connects = 0  # it is fixed
        start = trio.current_time()
        assert rt.reconnect("fast", failed_only=True) == ()
        assert rt.reconnect(failed_only=True) == ("bad",)
        report = await rt.wait_ready(servers=["bad"])
        assert report.ready == ("bad",)
        assert trio.current_time() == start  # at once, not at the next probe (300 s)
        after = {s.name: len(s.connect_times) for s in (fast, slow, bad)}
        assert after == {**before, "bad": before["bad"] + 1}
        assert rt.reconnect() == ()  # everything is READY: nothing to ask
        with pytest.raises(ServerUnavailable, match="no server named 'nope'"):
            rt.reconnect("nope")
