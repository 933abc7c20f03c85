"""One measurement in a fresh interpreter: ``python -m bench.worker SCENARIO CLIENT PLAN_JSON``.

Each (scenario, client) pair runs in its own process, so that no client pays for what another one
imported, allocated or left to the garbage collector. Prints one JSON object: the result.
"""

from __future__ import annotations

import json
import sys
from functools import partial
from typing import Any

import trio

from . import scenarios
from .clients import CLIENTS, ClientName, null_stdio_target
from .scenarios import Plan

__all__ = ["SCENARIOS", "run_one"]

#: Scenario name -> whether it needs a server (a transport target).
SCENARIOS: dict[str, bool] = {
    "sequential": True,
    "in_flight_32": True,
    "in_flight_256": True,
    "fleet_start": True,
    "death": True,
    "restart": True,
    "memory": True,
    "registry": False,
    "import": False,
}


def run_one(scenario: str, client: ClientName, plan: Plan, server: str) -> dict[str, Any]:
    """Run one scenario for one client in this process; returns its result."""
    if scenario == "registry":
        return scenarios.registry_costs(client, plan)
    if scenario == "import":
        return scenarios.import_time(client, plan)
    target = null_stdio_target("python" if server == "python" else "node")
    match scenario:
        case "sequential":
            fn = partial(scenarios.sequential, client, target, plan)
        case "in_flight_32":
            fn = partial(scenarios.in_flight, client, target, plan, 32)
        case "in_flight_256":
            fn = partial(scenarios.in_flight, client, target, plan, 256)
        case "fleet_start":
            fn = partial(scenarios.fleet_start, client, target, plan)
        case "death":
            fn = partial(scenarios.death_to_failure, client, target, plan)
        case "restart":
            fn = partial(scenarios.restart_to_registered, client, target, plan)
        case "memory":
            fn = partial(scenarios.fleet_memory, client, target, plan)
        case _:
            raise SystemExit(f"unknown scenario {scenario!r}; choose from {', '.join(SCENARIOS)}")
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
