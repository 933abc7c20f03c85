"""When a supervisor tries again: a pure function of the policy, the attempt and a random source.

First connect (the server has never been ready in this runtime): retry after 1, 2, 4, 8 and 16 s,
then park and probe every 5 minutes. After a runtime disconnect: retry after 1, 2, 4 ... s, capped
at 60 s, with jitter, for as long as it takes; the count starts again once the server has stayed
ready for a healthy period.
"""

from __future__ import annotations

import random

import attrs

__all__ = ["RetryPolicy", "first_connect_delay", "reconnect_delay"]


def _non_negative(_: object, attribute: attrs.Attribute[float], value: float) -> None:
    if value < 0:
        raise ValueError(f"{attribute.name} must be >= 0, got {value!r}")


@attrs.frozen(kw_only=True)
class RetryPolicy:
    """How a server is retried. Times are seconds on the trio clock."""

    #: Waits before the retries of a first connect; when they are used up the server is PARKED.
    first_connect_delays: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0, 16.0)
    #: How often a PARKED server is probed; None parks it for good (state FAILED).
    park_probe_interval: float | None = 300.0
    #: Reconnect after a runtime disconnect: initial * factor**n, capped at maximum.
    reconnect_initial: float = attrs.field(default=1.0, validator=_non_negative)
    reconnect_factor: float = attrs.field(default=2.0, validator=_non_negative)
    reconnect_max: float = attrs.field(default=60.0, validator=_non_negative)
    #: Each reconnect wait is multiplied by a random factor in [1 - jitter, 1 + jitter].
    jitter: float = attrs.field(default=0.1, validator=_non_negative)
    #: A connection that stayed ready this long resets the reconnect count.
    healthy_after: float = attrs.field(default=60.0, validator=_non_negative)


def first_connect_delay(policy: RetryPolicy, failures: int) -> float | None:
    """The wait before the next first-connect attempt after ``failures`` failed attempts, or
    None when the retries are used up (the server is then parked)."""
    if failures < 1:
        raise ValueError("first_connect_delay() is asked after at least one failure")
    if failures > len(policy.first_connect_delays):
        return None
    return policy.first_connect_delays[failures - 1]


def reconnect_delay(policy: RetryPolicy, failures: int, rng: random.Random) -> float:
    """The wait before reconnect attempt number ``failures`` (1 for the first) after a drop."""
    if failures < 1:
        raise ValueError("reconnect_delay() is asked after at least one failure")
    exponent = min(failures - 1, 64)
    base = min(policy.reconnect_max, policy.reconnect_initial * policy.reconnect_factor**exponent)
    if policy.jitter:
        base *= rng.uniform(1.0 - policy.jitter, 1.0 + policy.jitter)
        base = min(base, policy.reconnect_max)
    return max(0.0, base)
