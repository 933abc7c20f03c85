"""Profile trio-mcp's call hot path over stdio against the null server.

    python -m bench.hotpath [--width 1|32|256] [--calls N]
                            [--client trio-mcp|official|raw|raw-single]
                            [--sort tottime|cumulative] [--top 30] [--out FILE.prof]
                            [--cpu-timer] [--no-profile] [--steps] [--server node|python]
                            [--era legacy|modern]

Connects, warms up, then makes ``--calls`` ``tools/call`` requests (``--width`` in flight at once)
under :mod:`cProfile` and prints the top functions. ``--era modern``: the client speaks the
stateless 2026-07-28 revision (the ``_meta`` envelope in every request) instead of the
handshake ones. ``--no-profile`` runs the same load without
cProfile, for a sampling profiler started around it::

    py-spy record --format speedscope -o hot.json -- python -m bench.hotpath --no-profile

(py-spy is not a dependency of the project; install it where you like.)

``--steps`` counts, instead of profiling, how many times each task ran (trio "task steps": each
one is a pass through the scheduler) per call, by the task's function (the table's rows
"task steps per call" are the same count, by ``python -m bench --only steps_sequential,...``).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

import trio

from .clients import CLIENTS, ClientName, Era, null_stdio_target, open_connection
from .scenarios import StepCounter, _run_in_flight

__all__ = ["main"]


async def _load(
    client: ClientName,
    width: int,
    calls: int,
    server: str,
    profiler: cProfile.Profile | None,
    steps: StepCounter | None = None,
    era: Era = "legacy",
) -> None:
    target = null_stdio_target("python" if server == "python" else "node", era=era)
    async with open_connection(client, target) as conn:
        await _run_in_flight(conn, width, 500)
        if profiler is not None:
            profiler.enable()
        if steps is not None:
            trio.lowlevel.add_instrument(steps)
            steps.counting = True
        started = time.perf_counter()
        elapsed, _ = await _run_in_flight(conn, width, calls)
        if steps is not None:
            steps.counting = False
            trio.lowlevel.remove_instrument(steps)
        if profiler is not None:
            profiler.disable()
        wall = time.perf_counter() - started
    print(
        f"{client} ({era}), {width} in flight: {calls} calls in {wall:.2f} s = "
        f"{calls / elapsed:,.0f} calls/s{' (under cProfile)' if profiler is not None else ''}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.hotpath", description=__doc__)
    parser.add_argument("--client", choices=CLIENTS, default="trio-mcp")
    parser.add_argument("--width", type=int, default=1, help="calls in flight at once")
    parser.add_argument("--calls", type=int, default=10_000)
    parser.add_argument("--server", choices=("node", "python"), default="node")
    parser.add_argument(
        "--era",
        choices=("legacy", "modern"),
        default="legacy",
        help="the handshake revisions, or the stateless 2026-07-28 (default: %(default)s)",
    )
    parser.add_argument("--sort", choices=("tottime", "cumulative"), default="tottime")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--out", help="also write the raw profile here (pstats format)")
    parser.add_argument("--no-profile", action="store_true", help="no cProfile (for py-spy)")
    parser.add_argument(
        "--cpu-timer",
        action="store_true",
        help="time functions by this thread's CPU time instead of the wall clock (time spent "
        "waiting, or preempted by the server on a busy machine, is then not counted)",
    )
    parser.add_argument(
        "--steps", action="store_true", help="count task steps per call instead of profiling"
    )
    args = parser.parse_args()
    if args.steps:
        counter = StepCounter()
        trio.run(_load, args.client, args.width, args.calls, args.server, None, counter, args.era)
        total = sum(counter.steps.values())
        print(f"task steps per call: {total / args.calls:.2f}")
        for name, count in counter.steps.most_common():
            print(f"  {count / args.calls:6.2f}  {name}")
        return
    if args.no_profile:
        profiler = None
    elif args.cpu_timer:
        profiler = cProfile.Profile(time.thread_time)
    else:
        profiler = cProfile.Profile()
    trio.run(_load, args.client, args.width, args.calls, args.server, profiler, None, args.era)
    if profiler is None:
        return
    if args.out:
        profiler.dump_stats(args.out)
    stats = pstats.Stats(profiler)
    stats.strip_dirs().sort_stats(args.sort).print_stats(args.top)


if __name__ == "__main__":
    main()
