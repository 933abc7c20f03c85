"""``python -m bench.bestof``: the best of several batches of calls, for a machine whose load moves.

    python -m bench.bestof [--client trio-mcp|official|raw|raw-single] [--era legacy|modern]
                           [--width 1] [--batches 12] [--calls N] [--server node|python]
                           [--http json|sse]

One connection to the null stdio server (with ``--http``: to the null Streamable HTTP server,
answering in JSON or SSE), a warm-up, then ``--batches`` batches of ``--calls``
``tools/call`` requests (``--width`` in flight, as the bench's rows make them); it prints one JSON
object: the lowest client CPU time per call of any batch (``cpu``, µs) and the highest rate of
any batch (``rate``, calls/s).

The bench's rows report a median over a few runs, which is what a user sees on a quiet machine.
On a machine that other work shares, a run is slowed by whatever ran meanwhile, never sped up,
so the best batch is the measure least disturbed by it: for comparing two trees of trio-mcp, or
trio-mcp with the raw client, run this for each in turn, round after round (``PYTHONPATH`` on a
copy of another tree, laid out as ``trio_mcp/``, measures that tree: see docs/performance.md
"The commands"), pinned with ``taskset -c 1`` for the one-CPU figures.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import trio

from .clients import (
    CLIENTS,
    ClientName,
    Era,
    HttpMode,
    null_http_server,
    null_stdio_target,
    open_connection,
)
from .scenarios import _run_in_flight

__all__ = ["best_of", "main"]


async def best_of(
    client: ClientName,
    *,
    era: Era = "legacy",
    width: int = 1,
    batches: int = 12,
    calls: int = 2000,
    server: str = "node",
    http: HttpMode | None = None,
) -> dict[str, Any]:
    """The best batch's client CPU per call (µs) and rate (calls/s); see the module docstring."""
    if http is not None:
        with null_http_server(http, era=era) as target:
            return await _best_of(client, target, era, width, batches, calls)
    stdio = null_stdio_target("python" if server == "python" else "node", era=era)
    return await _best_of(client, stdio, era, width, batches, calls)


async def _best_of(
    client: ClientName, target: Any, era: Era, width: int, batches: int, calls: int
) -> dict[str, Any]:
    async with open_connection(client, target) as conn:
        await _run_in_flight(conn, width, max(calls // 2, width * 50))
        best_cpu = best_wall = float("inf")
        for _ in range(batches):
            cpu_start, wall_start = time.process_time(), time.perf_counter()
            await _run_in_flight(conn, width, calls)
            best_cpu = min(best_cpu, (time.process_time() - cpu_start) / calls)
            best_wall = min(best_wall, (time.perf_counter() - wall_start) / calls)
    return {
        "client": client,
        "era": era,
        "width": width,
        "cpu": best_cpu * 1e6,
        "rate": 1 / best_wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bestof", description=__doc__)
    parser.add_argument("--client", choices=CLIENTS, default="trio-mcp")
    parser.add_argument("--era", choices=("legacy", "modern"), default="legacy")
    parser.add_argument("--width", type=int, default=1)
    parser.add_argument("--batches", type=int, default=12)
    parser.add_argument(
        "--calls", type=int, default=None, help="per batch (2000; 8000 in flight; 300 over HTTP)"
    )
    parser.add_argument("--server", choices=("node", "python"), default="node")
    parser.add_argument("--http", choices=("json", "sse"), default=None)
    args = parser.parse_args()
    if args.calls is not None:
        calls = args.calls
    elif args.http is not None:
        calls = 300
    else:
        calls = 2000 if args.width == 1 else 8000
    result = trio.run(
        lambda: best_of(
            args.client,
            era=args.era,
            width=args.width,
            batches=args.batches,
            calls=calls,
            server=args.server,
            http=args.http,
        )
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
