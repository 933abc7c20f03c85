"""``python -m bench``: run every measurement for every client and print one table.

    python -m bench [--quick] [--only NAME,...] [--clients trio-mcp,official,raw]
                    [--server node|python] [--json FILE] [--markdown]

Each (scenario, client) pair runs in a fresh interpreter (:mod:`bench.worker`); the clients of
one scenario run one after the other, so a change in the machine's load hits all three alike.
The table has one row per metric, the three clients side by side, and the ratios trio-mcp /
official and trio-mcp / raw (the ``better`` column says whether a ratio above 1 is good).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import attrs

from .clients import CLIENTS
from .scenarios import Plan
from .stats import Better, Row, format_table
from .worker import SCENARIOS

__all__ = ["ROWS", "machine_description", "main"]

ROOT: Final = Path(__file__).resolve().parent.parent


@attrs.frozen
class RowSpec:
    """Where a table row comes from: a scenario's result key."""

    scenario: str
    key: str
    section: str
    metric: str
    unit: str
    better: Better


#: The four rows of a throughput scenario: result key, label suffix, unit, better.
_THROUGHPUT: Final[tuple[tuple[str, str, str, Better], ...]] = (
    ("rate", "", "calls/s", "higher"),
    ("p50", " p50", "ms", "lower"),
    ("p99", " p99", "ms", "lower"),
    ("cpu", " client CPU/call", "µs", "lower"),
)

ROWS: Final[tuple[RowSpec, ...]] = (
    RowSpec("sequential", "rate", "stdio", "sequential tools/call", "calls/s", "higher"),
    RowSpec("sequential", "p50", "stdio", "sequential p50", "ms", "lower"),
    RowSpec("sequential", "p99", "stdio", "sequential p99", "ms", "lower"),
    RowSpec("sequential", "cpu", "stdio", "sequential client CPU/call", "µs", "lower"),
    RowSpec(
        "sequential_one_cpu", "rate", "stdio", "sequential, all on one CPU", "calls/s", "higher"
    ),
    RowSpec("sequential_one_cpu", "p50", "stdio", "sequential, one CPU, p50", "ms", "lower"),
    RowSpec(
        "sequential_one_cpu", "cpu", "stdio", "sequential, one CPU, client CPU/call", "µs", "lower"
    ),
    RowSpec("in_flight_32", "rate", "stdio", "32 in flight", "calls/s", "higher"),
    RowSpec("in_flight_32", "p50", "stdio", "32 in flight p50", "ms", "lower"),
    RowSpec("in_flight_32", "p99", "stdio", "32 in flight p99", "ms", "lower"),
    RowSpec("in_flight_32", "cpu", "stdio", "32 in flight client CPU/call", "µs", "lower"),
    RowSpec("in_flight_256", "rate", "stdio", "256 in flight", "calls/s", "higher"),
    RowSpec("in_flight_256", "p50", "stdio", "256 in flight p50", "ms", "lower"),
    RowSpec("in_flight_256", "p99", "stdio", "256 in flight p99", "ms", "lower"),
    *(
        RowSpec(
            f"http_{mode}_{shape}",
            key,
            f"HTTP {mode.upper()}",
            f"{name if key == 'rate' else short}{suffix}",
            unit,
            better,
        )
        for mode in ("json", "sse")
        for shape, name, short in (
            ("sequential", "sequential tools/call", "sequential"),
            ("in_flight_32", "32 in flight", "32 in flight"),
        )
        for key, suffix, unit, better in _THROUGHPUT
    ),
    RowSpec("fleet_start", "start", "stdio", "start N servers, all tools usable", "ms", "lower"),
    RowSpec("death", "death", "stdio", "SIGKILL -> last pending call failed", "ms", "lower"),
    RowSpec("restart", "restart", "stdio", "SIGKILL -> tools usable again", "ms", "lower"),
    RowSpec("memory", "heap", "stdio", "Python heap per connected server", "KiB", "lower"),
    RowSpec("memory", "rss", "stdio", "RSS per connected server", "KiB", "lower"),
    RowSpec("registry", "decode", "registry", "decode + register N tools", "ms", "lower"),
    RowSpec("registry", "replace", "registry", "replace N tools", "ms", "lower"),
    RowSpec("registry", "snapshot", "registry", "snapshot after a change", "ms", "lower"),
    RowSpec("registry", "snapshot_cached", "registry", "snapshot, unchanged", "ms", "lower"),
    RowSpec("import", "import", "import", "import time", "ms", "lower"),
)


def machine_description() -> dict[str, Any]:
    """What the numbers were measured on: cores, CPU model, Python, Node, load average."""
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        node = subprocess.run(
            ["node", "--version"], capture_output=True, text=True, check=False
        ).stdout.strip()
    except OSError:
        node = "not found"
    return {
        "cores": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "node": node,
        "platform": platform.platform(),
        "load_average": os.getloadavg(),
    }


def _run_worker(scenario: str, client: str, plan: Plan, server: str) -> dict[str, Any]:
    command = [
        sys.executable,
        "-m",
        "bench.worker",
        scenario,
        client,
        json.dumps(attrs.asdict(plan)),
        server,
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        print(f"  {scenario} / {client} failed:\n{done.stderr[-3000:]}", file=sys.stderr)
        return {}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def measure(
    scenarios: Sequence[str], clients: Sequence[str], plan: Plan, server: str
) -> dict[str, dict[str, dict[str, Any]]]:
    """scenario -> client -> result, printing progress on stderr."""
    results: dict[str, dict[str, dict[str, Any]]] = {}
    for scenario in scenarios:
        for client in clients:
            started = time.perf_counter()
            print(f"  {scenario:<22} {client:<9}", end="", file=sys.stderr, flush=True)
            result = _run_worker(scenario, client, plan, server)
            results.setdefault(scenario, {})[client] = result
            print(f" {time.perf_counter() - started:5.1f} s", file=sys.stderr)
    return results


def build_rows(results: Mapping[str, Mapping[str, Mapping[str, Any]]], plan: Plan) -> list[Row]:
    """The table's rows for the scenarios that ran; ``N`` in a label is the plan's size."""
    rows = []
    for spec in ROWS:
        if spec.scenario not in results:
            continue
        size = plan.registry_tools if spec.section == "registry" else plan.fleet_size
        values = {client: result.get(spec.key) for client, result in results[spec.scenario].items()}
        rows.append(
            Row(
                section=spec.section,
                metric=spec.metric.replace(" N ", f" {size:,} "),
                unit=spec.unit,
                better=spec.better,
                values=values,
            )
        )
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    parser.add_argument(
        "--only", help=f"comma-separated scenarios (default: all): {', '.join(SCENARIOS)}"
    )
    parser.add_argument("--clients", default=",".join(CLIENTS), help="comma-separated clients")
    parser.add_argument("--server", choices=("node", "python"), default="node")
    parser.add_argument("--json", help="also write the machine, plan and results here")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args(argv)

    scenarios = args.only.split(",") if args.only else list(SCENARIOS)
    unknown = [s for s in scenarios if s not in SCENARIOS]
    if unknown:
        parser.error(
            f"unknown scenario(s) {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}"
        )
    clients = args.clients.split(",")
    if any(c not in CLIENTS for c in clients):
        parser.error(f"--clients takes names from {', '.join(CLIENTS)}")
    plan = Plan.quick() if args.quick else Plan()

    machine = machine_description()
    print(
        f"machine: {machine['cores']} cores, {machine['cpu']}, Python {machine['python']}, "
        f"Node {machine['node']}; load average {machine['load_average'][0]:.2f}",
        file=sys.stderr,
    )
    started = time.perf_counter()
    results = measure(scenarios, clients, plan, args.server)
    elapsed = time.perf_counter() - started
    load_after = os.getloadavg()[0]
    rows = build_rows(results, plan)
    print()
    print(format_table(rows, markdown=args.markdown))
    print()
    print(
        f"{elapsed:.0f} s; load average before {machine['load_average'][0]:.2f}, after "
        f"{load_after:.2f} (on a machine busy with other work the rates drop and vary; "
        "compare the CPU/call rows)"
    )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "machine": machine,
                    "load_average_after": load_after,
                    "plan": attrs.asdict(plan),
                    "server": args.server,
                    "results": results,
                },
                indent=2,
            )
            + "\n"
        )
