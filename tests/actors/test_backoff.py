from __future__ import annotations

import random

import pytest

from trio_mcp.actors.config._backoff import RetryPolicy, first_connect_delay, reconnect_delay


def test_first_connect_waits_1_2_4_8_16_then_parks() -> None:
    policy = RetryPolicy()
    assert [first_connect_delay(policy, n) for n in range(1, 7)] == [1, 2, 4, 8, 16, None]


def test_reconnect_doubles_up_to_the_cap_without_jitter() -> None:
    policy = RetryPolicy(jitter=0.0)
    rng = random.Random(0)
    assert [reconnect_delay(policy, n, rng) for n in range(1, 9)] == [1, 2, 4, 8, 16, 32, 60, 60]
    assert reconnect_delay(policy, 10_000, rng) == 60


def test_jitter_stays_within_its_band_and_under_the_cap() -> None:
    policy = RetryPolicy(jitter=0.1)
    rng = random.Random(42)
    for n in range(1, 12):
        base = min(60.0, 2.0 ** (n - 1))
        delay = reconnect_delay(policy, n, rng)
        assert base * 0.9 <= delay <= min(60.0, base * 1.1)


def test_jitter_is_deterministic_for_a_seed() -> None:
    policy = RetryPolicy(jitter=0.5)
    first = [reconnect_delay(policy, n, random.Random(7)) for n in range(1, 5)]
    again = [reconnect_delay(policy, n, random.Random(7)) for n in range(1, 5)]
    assert first == again


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="reconnect_max must be >= 0"):
        RetryPolicy(reconnect_max=-1)
    with pytest.raises(ValueError, match="after at least one failure"):
        first_connect_delay(RetryPolicy(), 0)
