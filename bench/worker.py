"""One measurement in a fresh interpreter: ``python -m bench.worker SCENARIO CLIENT PLAN_JSON``.

Each (scenario, client) pair runs in its own process, so that no client pays for what another one
imported, allocated or left to the garbage collector. Prints one JSON object: the result.

A scenario named ``modern_X`` is the scenario ``X`` (one of :data:`MODERN_SCENARIOS`) with every
client speaking the stateless 2026-07-28 revision to the same null server (see
:mod:`bench.clients`, ``era``).
"""

from __future__ import annotations

import fnmatch
import json
import os
import sys
from functools import partial
from typing import Any, Final

import trio

from . import scenarios
from .clients import CLIENTS, ClientName, Era, HttpMode, null_http_server, null_stdio_target
from .scenarios import Plan

__all__ = ["MODERN_PREFIX", "MODERN_SCENARIOS", "SCENARIOS", "run_one", "select", "supports"]

#: The scenarios that also run in 2026-07-28, as ``modern_`` + the name: the call path's
#: throughput over stdio and over HTTP with JSON answers.
MODERN_SCENARIOS: Final = (
    "sequential",
    "sequential_one_cpu",
    "in_flight_32",
    "http_json_sequential",
    "http_json_in_flight_32",
)
MODERN_PREFIX: Final = "modern_"

#: Scenario name -> whether it needs a server (a transport target). A modern scenario comes
#: right after its legacy one, so that a whole run measures the two back to back.
SCENARIOS: dict[str, bool] = {
    "sequential": True,
    "modern_sequential": True,
    "sequential_one_cpu": True,
    "modern_sequential_one_cpu": True,
    "in_flight_32": True,
    "modern_in_flight_32": True,
    "in_flight_256": True,
    "steps_sequential": True,
    "steps_in_flight_32": True,
    "fleet_start": True,
    "death": True,
    "death_256": True,
    "restart": True,
    "flood_quiet": True,
    "flood_timeout": True,
    "memory": True,
    "registry": False,
    "import": False,
    "http_json_sequential": True,
    "modern_http_json_sequential": True,
    "http_json_in_flight_32": True,
    "modern_http_json_in_flight_32": True,
    "http_sse_sequential": True,
    "http_sse_in_flight_32": True,
}

#: The scenarios ``raw-single`` can run: one call at a time on one stdio connection.
_RAW_SINGLE: Final = frozenset({"sequential", "sequential_one_cpu", "steps_sequential"})


def select(spec: str) -> tuple[list[str], list[str]]:
    """The scenarios a comma-separated ``--only`` names, in its order, each once: a name, or a
    shell pattern (``modern_*``, ``*in_flight*``) standing for every scenario it matches, in
    :data:`SCENARIOS` order. Returns them and the items that name or match none."""
    chosen: list[str] = []
    unknown: list[str] = []
    for item in filter(None, (part.strip() for part in spec.split(","))):
        matched = fnmatch.filter(SCENARIOS, item) if any(c in item for c in "*?[") else None
        if matched is None:
            matched = [item] if item in SCENARIOS else []
        if not matched:
            unknown.append(item)
        chosen.extend(name for name in matched if name not in chosen)
    return chosen, unknown


def supports(scenario: str, client: str) -> bool:
    """Whether ``client`` can be measured in ``scenario`` (the table says ``n/a`` otherwise)."""
    if client == "raw-single":
        return scenario.removeprefix(MODERN_PREFIX) in _RAW_SINGLE
    return True


def run_one(scenario: str, client: ClientName, plan: Plan, server: str) -> dict[str, Any]:
    """Run one scenario for one client in this process; returns its result."""
    if not supports(scenario, client):
        raise SystemExit(f"{client} cannot run {scenario}")
    era: Era = "legacy"
    if scenario.startswith(MODERN_PREFIX):
        era, scenario = "modern", scenario.removeprefix(MODERN_PREFIX)
        if scenario not in MODERN_SCENARIOS:
            raise SystemExit(
                f"unknown scenario {MODERN_PREFIX}{scenario}; the modern ones are "
                f"{', '.join(MODERN_PREFIX + name for name in MODERN_SCENARIOS)}"
            )
    if scenario == "registry":
        return scenarios.registry_costs(client, plan)
    if scenario == "import":
        return scenarios.import_time(client, plan)
    if scenario.startswith("http_"):
        return _run_http(scenario, client, plan, era)
    if scenario.startswith("flood_"):
        return _run_flood(scenario, client, plan)
    target = null_stdio_target("python" if server == "python" else "node", era=era)
    match scenario:
        case "sequential":
            fn = partial(scenarios.sequential, client, target, plan)
        case "sequential_one_cpu":
            _pin_to_one_cpu()
            fn = partial(scenarios.sequential, client, target, plan)
        case "in_flight_32":
            fn = partial(scenarios.in_flight, client, target, plan, 32)
        case "in_flight_256":
            fn = partial(scenarios.in_flight, client, target, plan, 256)
        case "steps_sequential":
            fn = partial(scenarios.task_steps, client, target, plan, 1)
        case "steps_in_flight_32":
            fn = partial(scenarios.task_steps, client, target, plan, 32)
        case "fleet_start":
            fn = partial(scenarios.fleet_start, client, target, plan)
        case "death":
            fn = partial(scenarios.death_to_failure, client, target, plan)
        case "death_256":
            fn = partial(scenarios.death_to_failure, client, target, plan, plan.death_pending_many)
        case "restart":
            fn = partial(scenarios.restart_to_registered, client, target, plan)
        case "memory":
            fn = partial(scenarios.fleet_memory, client, target, plan)
        case _:
            raise SystemExit(f"unknown scenario {scenario!r}; choose from {', '.join(SCENARIOS)}")
    result: dict[str, Any] = trio.run(fn)
    return result


def _pin_to_one_cpu() -> None:
    """Run this process, and the servers it starts (they inherit it), on one CPU.

    One call at a time is mostly the time it takes one process to wake the other: on this kind
    of VM a wake-up across CPUs costs about 100 µs, one on the same CPU a few µs, and which one a
    run gets is up to the kernel's placement, which changes from run to run (the unpinned
    sequential rates move by 3x). Pinned, the row measures the clients' own work."""
    if not hasattr(os, "sched_setaffinity"):
        raise SystemExit("sequential_one_cpu needs os.sched_setaffinity (Linux)")
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


def _run_flood(scenario: str, client: ClientName, plan: Plan) -> dict[str, Any]:
    """``flood_quiet`` / ``flood_timeout``: always against the Node.js servers, under a
    :class:`~bench.scenarios.Watchdog` that reports a starved run instead of hanging."""
    watchdog = scenarios.Watchdog()
    if scenario == "flood_quiet":
        fn = partial(scenarios.flood_quiet, client, plan, watchdog)
    elif scenario == "flood_timeout":
        fn = partial(scenarios.flood_timeout, client, plan, watchdog)
    else:
        raise SystemExit(f"unknown scenario {scenario!r}; choose from {', '.join(SCENARIOS)}")
    result: dict[str, Any] = trio.run(fn)
    return result


def _run_http(scenario: str, client: ClientName, plan: Plan, era: Era = "legacy") -> dict[str, Any]:
    """``http_{json,sse}_{sequential,in_flight_32}``: against a null HTTP server started here
    (Node.js, whatever ``--server`` says), with the plan's HTTP sizes, spoken to in ``era``."""
    _, mode_name, shape = scenario.split("_", 2)
    if mode_name not in ("json", "sse") or shape not in ("sequential", "in_flight_32"):
        raise SystemExit(f"unknown scenario {scenario!r}; choose from {', '.join(SCENARIOS)}")
    mode: HttpMode = "json" if mode_name == "json" else "sse"
    http_plan = plan.for_http()
    with null_http_server(mode, era=era) as target:
        if shape == "sequential":
            fn = partial(scenarios.sequential, client, target, http_plan)
        else:
            fn = partial(scenarios.in_flight, client, target, http_plan, 32)
        result: dict[str, Any] = trio.run(fn)
    return result


def main() -> None:
    scenario, client, plan_json, server = sys.argv[1:5]
    if client not in CLIENTS:
        raise SystemExit(f"unknown client {client!r}; choose from {', '.join(CLIENTS)}")
    plan = Plan(**json.loads(plan_json))
    print(json.dumps(run_one(scenario, client, plan, server)))


if __name__ == "__main__":
    main()
