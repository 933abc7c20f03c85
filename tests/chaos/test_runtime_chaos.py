"""The runtime under seeded chaos: whatever the link does, every call ends, and nothing hangs.

Each example runs its own ``trio.run`` on a fresh virtual clock (so hypothesis can drive it),
with the fake server behind a chaos transport that drops, duplicates, garbles, truncates and
delays frames and cuts the link after some number of frames.
"""

from __future__ import annotations

from typing import Any

import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.invariants import ToolsOnlyWhenReady
from trio_mcp.actors import RetryPolicy, RuntimeConfig, ServerConfig, open_runtime
from trio_mcp.actors.testing import ChaosPolicy, FakeServer, FakeTool, chaos_transport_factory
from trio_mcp.protocol import (
    CallTimeout,
    InvalidMessage,
    RpcError,
    ServerDisconnected,
    ServerUnavailable,
    ToolNotFound,
)

ALLOWED = (
    CallTimeout,
    ServerDisconnected,
    RpcError,
    InvalidMessage,
    ServerUnavailable,
    ToolNotFound,
)


def run_scenario(policy: ChaosPolicy, calls: int) -> dict[str, int]:
    outcomes: dict[str, int] = {}

    async def scenario() -> None:
        fake = FakeServer(name="s", tools=[FakeTool("echo")])
        server = ServerConfig(
            name="s",
            transport_factory=chaos_transport_factory(fake.transport_factory(), policy),
            connect_timeout=5,
            timeout=2,
        )
        retry = RetryPolicy(jitter=0.0, reconnect_max=4, first_connect_delays=(1, 1, 1))
        with trio.fail_after(10_000):  # a hang would be an instant failure under autojump
            async with open_runtime(RuntimeConfig(servers=(server,), retry=retry)) as rt:
                invariant = ToolsOnlyWhenReady(rt)
                trio.lowlevel.add_instrument(invariant)
                await rt.wait_ready(timeout=30)
                for n in range(calls):
                    try:
                        result = await rt.call("mcp_s_echo", {"n": n}, wait_ready=10)
                    except ALLOWED as exc:
                        kind = type(exc).__name__
                    else:
                        kind = "result"
                        assert result.text == f'{{"n":{n}}}'
                    outcomes[kind] = outcomes.get(kind, 0) + 1
                # every call has ended, and none is left in the table of the live connection
                await trio.testing.wait_all_tasks_blocked()
                supervisor = rt._supervisors["s"]
                if supervisor.accepts_calls:
                    assert supervisor.ready_session().statistics().outstanding == 0
            trio.lowlevel.remove_instrument(invariant)
            # leaving the runtime closed every connection and withdrew every tool
            assert fake.connections == 0
            assert rt.tools() == {}
            assert invariant.checks > 0
            assert invariant.violations == []

    trio.run(scenario, clock=trio.testing.MockClock(autojump_threshold=0))
    return outcomes


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    drop=st.sampled_from([0.0, 0.05, 0.3]),
    duplicate=st.sampled_from([0.0, 0.2]),
    garble=st.sampled_from([0.0, 0.05, 0.3]),
    truncate=st.sampled_from([0.0, 0.1]),
    disconnect=st.one_of(st.none(), st.integers(1, 40)),
    both_ways=st.booleans(),
)
def test_every_call_ends_whatever_the_link_does(
    seed: int,
    drop: float,
    duplicate: float,
    garble: float,
    truncate: float,
    disconnect: int | None,
    both_ways: bool,
) -> None:
    policy = ChaosPolicy(
        seed=seed,
        drop=drop,
        duplicate=duplicate,
        garble=garble,
        truncate=truncate,
        delay=(0.0, 0.5),
        disconnect_after_frames=disconnect,
        directions=frozenset({"send", "receive"} if both_ways else {"receive"}),
    )
    outcomes = run_scenario(policy, calls=12)
    assert sum(outcomes.values()) == 12


def test_a_clean_link_answers_every_call() -> None:
    assert run_scenario(ChaosPolicy(seed=1, delay=(0.0, 1.0)), calls=20) == {"result": 20}


def test_duplicated_answers_are_harmless() -> None:
    assert run_scenario(ChaosPolicy(seed=3, duplicate=1.0), calls=10) == {"result": 10}


def test_a_link_cut_every_few_frames_still_serves_calls_between_cuts() -> None:
    outcomes: dict[str, Any] = run_scenario(
        ChaosPolicy(seed=5, disconnect_after_frames=12), calls=15
    )
    assert outcomes.get("result", 0) > 0
    assert set(outcomes) <= {"result", "ServerDisconnected", "ServerUnavailable"}
