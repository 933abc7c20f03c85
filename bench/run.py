"""``python -m bench``: run every measurement for every client and print one table.

    python -m bench [--quick] [--only NAME|PATTERN,...] [--clients trio-mcp,official,raw,raw-single]
                    [--server node|python] [--json FILE] [--markdown]

Each (scenario, client) pair runs in a fresh interpreter (:mod:`bench.worker`); the clients of
one scenario run one after the other, so a change in the machine's load hits all of them alike.
The table has one row per metric, the four clients side by side (``n/a`` where a client cannot
run a scenario), and the ratios trio-mcp / official, trio-mcp / raw and trio-mcp / raw-single
(the ``better`` column says whether a ratio above 1 is good).
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
from .stats import Better, Cell, Row, format_table
from .worker import MODERN_PREFIX, MODERN_SCENARIOS, SCENARIOS, select, supports

__all__ = ["ROWS", "machine_description", "main", "run_worker"]

ROOT: Final = Path(__file__).resolve().parent.parent
#: A worker that has not answered after this long is stopped (its cell shows ``-``). The flood
#: scenarios end themselves well before (their watchdog), so this is for the unforeseen.
WORKER_TIMEOUT: Final = 900.0
#: The result of a (scenario, client) pair the client cannot run.
NOT_APPLICABLE: Final = {"n/a": True}


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

_LEGACY_ROWS: Final[tuple[RowSpec, ...]] = (
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
    RowSpec(
        "steps_sequential", "steps", "stdio", "task steps per call, sequential", "steps", "lower"
    ),
    RowSpec("in_flight_32", "rate", "stdio", "32 in flight", "calls/s", "higher"),
    RowSpec("in_flight_32", "p50", "stdio", "32 in flight p50", "ms", "lower"),
    RowSpec("in_flight_32", "p99", "stdio", "32 in flight p99", "ms", "lower"),
    RowSpec("in_flight_32", "cpu", "stdio", "32 in flight client CPU/call", "µs", "lower"),
    RowSpec("in_flight_256", "rate", "stdio", "256 in flight", "calls/s", "higher"),
    RowSpec("in_flight_256", "p50", "stdio", "256 in flight p50", "ms", "lower"),
    RowSpec("in_flight_256", "p99", "stdio", "256 in flight p99", "ms", "lower"),
    RowSpec(
        "steps_in_flight_32",
        "steps",
        "stdio",
        "task steps per call, 32 in flight",
        "steps",
        "lower",
    ),
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
    RowSpec("death", "death", "stdio", "SIGKILL -> last of 32 pending calls failed", "ms", "lower"),
    RowSpec(
        "death_256", "death", "stdio", "SIGKILL -> last of 256 pending calls failed", "ms", "lower"
    ),
    RowSpec("restart", "restart", "stdio", "SIGKILL -> tools usable again", "ms", "lower"),
    RowSpec(
        "flood_quiet", "quiet_p50", "flood", "quiet server, sequential p50, no flood", "ms", "lower"
    ),
    RowSpec(
        "flood_quiet",
        "flood_p50",
        "flood",
        "quiet server, sequential p50, during flood",
        "ms",
        "lower",
    ),
    RowSpec(
        "flood_quiet", "quiet_p99", "flood", "quiet server, sequential p99, no flood", "ms", "lower"
    ),
    RowSpec(
        "flood_quiet",
        "flood_p99",
        "flood",
        "quiet server, sequential p99, during flood",
        "ms",
        "lower",
    ),
    RowSpec(
        "flood_timeout",
        "timeout_quiet",
        "flood",
        "1 s call timeout raised after, no flood",
        "s",
        "lower",
    ),
    RowSpec(
        "flood_timeout",
        "timeout_flood",
        "flood",
        "1 s call timeout to the flooding server raised after",
        "s",
        "lower",
    ),
    RowSpec("memory", "heap", "stdio", "Python heap per connected server", "KiB", "lower"),
    RowSpec("memory", "rss", "stdio", "RSS per connected server", "KiB", "lower"),
    RowSpec("registry", "decode", "registry", "decode + register N tools", "ms", "lower"),
    RowSpec("registry", "replace", "registry", "replace N tools", "ms", "lower"),
    RowSpec("registry", "snapshot", "registry", "snapshot after a change", "ms", "lower"),
    RowSpec("registry", "snapshot_cached", "registry", "snapshot, unchanged", "ms", "lower"),
    RowSpec("import", "import", "import", "import time", "ms", "lower"),
)

#: The last legacy scenario of a block, after which the block's 2026-07-28 rows come.
_MODERN_AFTER: Final = {"steps_in_flight_32": "stdio", "http_sse_in_flight_32": "HTTP JSON"}
#: What a 2026-07-28 row's section adds to its legacy one's.
MODERN_SECTION: Final = " (2026-07-28)"


def _with_modern_rows(rows: Sequence[RowSpec]) -> tuple[RowSpec, ...]:
    """``rows`` with the rows of the ``modern_`` scenarios: each legacy row of a scenario in
    :data:`MODERN_SCENARIOS` again, for ``modern_`` + its scenario, in the section
    ``"<section> (2026-07-28)"``; a section's modern rows follow the block of legacy rows
    :data:`_MODERN_AFTER` names."""
    out: list[RowSpec] = []
    for index, spec in enumerate(rows):
        out.append(spec)
        block_ends = index + 1 == len(rows) or rows[index + 1].scenario != spec.scenario
        section = _MODERN_AFTER.get(spec.scenario)
        if section is None or not block_ends:
            continue
        out.extend(
            attrs.evolve(
                legacy,
                scenario=MODERN_PREFIX + legacy.scenario,
                section=legacy.section + MODERN_SECTION,
            )
            for legacy in rows
            if legacy.section == section and legacy.scenario in MODERN_SCENARIOS
        )
    return tuple(out)


ROWS: Final[tuple[RowSpec, ...]] = _with_modern_rows(_LEGACY_ROWS)


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


def run_worker(
    scenario: str,
    client: str,
    plan: Plan,
    server: str,
    *,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """One ``bench.worker`` run in a fresh interpreter; its result, or ``{}`` when it failed
    (its stderr is printed). ``env``: the environment (default: this one's)."""
    command = [
        sys.executable,
        "-m",
        "bench.worker",
        scenario,
        client,
        json.dumps(attrs.asdict(plan)),
        server,
    ]
    try:
        done = subprocess.run(
            command,
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
            env=None if env is None else dict(env),
            timeout=WORKER_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        print(f"  {scenario} / {client}: no answer after {WORKER_TIMEOUT:.0f} s", file=sys.stderr)
        return {}
    if done.returncode != 0:
        print(f"  {scenario} / {client} failed:\n{done.stderr[-3000:]}", file=sys.stderr)
        return {}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def measure(
    scenarios: Sequence[str], clients: Sequence[str], plan: Plan, server: str
) -> dict[str, dict[str, dict[str, Any]]]:
    """scenario -> client -> result, printing progress on stderr. A pair the client cannot
    run is not run; its result is :data:`NOT_APPLICABLE`."""
    results: dict[str, dict[str, dict[str, Any]]] = {}
    for scenario in scenarios:
        for client in clients:
            if not supports(scenario, client):
                results.setdefault(scenario, {})[client] = dict(NOT_APPLICABLE)
                continue
            started = time.perf_counter()
            print(f"  {scenario:<22} {client:<10}", end="", file=sys.stderr, flush=True)
            result = run_worker(scenario, client, plan, server)
            results.setdefault(scenario, {})[client] = result
            print(f" {time.perf_counter() - started:5.1f} s", file=sys.stderr)
    return results


def _cell(result: Mapping[str, Any], key: str) -> Cell:
    if result.get("n/a"):
        return "n/a"
    value = result.get(key)
    return value if isinstance(value, int | float | str) else None


def notes(results: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> list[str]:
    """What the table's cells do not say: flood measurements whose flood ended before they
    did, and how many calls a starved one made."""
    out = []
    for scenario in ("flood_quiet", "flood_timeout"):
        for client, result in results.get(scenario, {}).items():
            if result.get("flood_over"):
                out.append(
                    f"{scenario} / {client}: the flood ended before the measurement did "
                    "(raise flood_count)"
                )
            if "flood_done_calls" in result:
                out.append(
                    f"{scenario} / {client}: starved, {result['flood_done_calls']} calls done "
                    "within the cap"
                )
            if result.get("flood_rate"):
                out.append(
                    f"{scenario} / {client}: the client read {result['flood_rate']:,.0f} "
                    "notifications/s during the flood"
                )
    return out


def build_rows(results: Mapping[str, Mapping[str, Mapping[str, Any]]], plan: Plan) -> list[Row]:
    """The table's rows for the scenarios that ran; ``N`` in a label is the plan's size."""
    rows = []
    for spec in ROWS:
        if spec.scenario not in results:
            continue
        size = plan.registry_tools if spec.section == "registry" else plan.fleet_size
        values = {
            client: _cell(result, spec.key) for client, result in results[spec.scenario].items()
        }
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
        "--only",
        help="comma-separated scenarios or shell patterns ('modern_*': the 2026-07-28 rows) "
        f"(default: all): {', '.join(SCENARIOS)}",
    )
    parser.add_argument("--clients", default=",".join(CLIENTS), help="comma-separated clients")
    parser.add_argument("--server", choices=("node", "python"), default="node")
    parser.add_argument("--json", help="also write the machine, plan and results here")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args(argv)

    scenarios, unknown = select(args.only) if args.only else (list(SCENARIOS), [])
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
    for note in notes(results):
        print(note)
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
