"""``python -m bench.paired``: two clients, or two trees, measured batch against batch.

    python -m bench.paired [--era legacy|modern] [--width 1] [--pairs 60] [--calls 1000]
                           [--cpu N] [--repo DIR] [--json FILE] A B

A and B are each ``CLIENT`` or ``CLIENT@TREE``: a client of the bench (``trio-mcp``, ``raw``,
``raw-single``, ``official``) and, for trio-mcp, the source tree to import it from (``TREE`` as in
:mod:`bench.compare`: a directory or a git revision of ``--repo``; without it, this checkout).

Both are started at once, each in its own interpreter with its own null stdio server, and warmed
up. Then they take turns: A runs a batch of ``--calls`` ``tools/call`` requests (``--width`` in
flight) while B waits, then B runs one while A waits, and so on for ``--pairs`` pairs, the order
turning every pair (AB, BA, AB, ...). A batch takes a fraction of a second, so the two batches of
a pair see the same machine: what another process, the CPU's clock or the hypervisor does to the
machine's speed moves both, and their ratio stays. On a shared virtual machine the rate of one
client moves by 2x from one minute to the next; the ratio of a pair moves far less, which is what
makes a target like "0.95 of the raw client" decidable there.

``--cpu N`` pins both workers, and the servers they start, to CPU ``N`` (the one-CPU figures).
``--cpus C,S`` pins each worker to CPU ``C`` and the server it starts to CPU ``S``: with ``C`` and
``S`` apart, every call crosses CPUs, and the machine's idle CPU must be woken for every answer.
Without either the kernel places them, and moves them: a batch may run with client and server on
one CPU (as fast as pinned) or apart, so the rate of a batch mixes the two.

It prints the median over the pairs of A's rate divided by B's, with a distribution-free 95%
confidence interval of that median (order statistics of the binomial distribution), the quartiles,
and each side's median wall time and client CPU time per call.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any, Final

import trio

from .clients import CLIENTS, ClientName, Era, null_stdio_target, open_connection
from .compare import prepare
from .run import ROOT
from .scenarios import _run_in_flight

__all__ = ["Side", "main", "median_interval", "parse_cpus", "serve"]

#: A worker reads one byte per command: run a batch, or end.
_GO: Final = b"g"
_QUIT: Final = b"q"
#: How long a worker may take to start and warm up, or to run one batch.
_WORKER_TIMEOUT: Final = 120.0


def median_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """A distribution-free confidence interval of the median of ``values``: the order
    statistics ``x_(k)`` and ``x_(n-k+1)`` with ``k`` the largest rank such that fewer than
    ``k`` of ``n`` fair coin flips come up heads with probability at most ``(1-confidence)/2``.
    With fewer than 6 values no such ``k`` exists and the interval is the whole range."""
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        raise ValueError("no values")
    tail = (1 - confidence) / 2
    below = 0.0  # P(Binomial(n, 1/2) < k), growing with k
    k = 0
    while k < n // 2:
        below_next = below + math.comb(n, k) / 2**n
        if below_next > tail:
            break
        below = below_next
        k += 1
    if k == 0:
        return ordered[0], ordered[-1]
    return ordered[k - 1], ordered[n - k]


def parse_cpus(text: str) -> tuple[int, int]:
    """``--cpus C,S``: (the client's CPU, the server's CPU). Raises :class:`ValueError` with
    what to write instead."""
    client_cpu, comma, server_cpu = text.partition(",")
    if not (comma and client_cpu.isdigit() and server_cpu.isdigit()):
        raise ValueError(f"--cpus {text!r}: say C,S, two CPU numbers")
    return int(client_cpu), int(server_cpu)


# --------------------------------------------------------------------------- the worker


async def serve(
    client: ClientName, era: Era, width: int, calls: int, cpus: tuple[int, int] | None = None
) -> None:
    """The worker: connect, warm up, say ``ready``, then one batch per ``g`` read on stdin,
    each answered with one JSON line (``wall`` and ``cpu``: seconds per call), until ``q``
    or the end of stdin. ``cpus``: (this process's CPU, the server's CPU); the server inherits
    the CPU this process is on when the connection starts it."""
    commands = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
    if cpus is not None:
        os.sched_setaffinity(0, {cpus[1]})
    async with open_connection(client, null_stdio_target("node", era=era)) as conn:
        if cpus is not None:
            os.sched_setaffinity(0, {cpus[0]})
        await _run_in_flight(conn, width, max(calls, width * 50))
        _reply(b"ready\n")
        while (command := await commands.receive_some(1)) == _GO:
            cpu_start, wall_start = time.process_time(), time.perf_counter()
            await _run_in_flight(conn, width, calls)
            wall = (time.perf_counter() - wall_start) / calls
            cpu = (time.process_time() - cpu_start) / calls
            _reply(json.dumps({"wall": wall, "cpu": cpu}).encode() + b"\n")
        if command not in (_QUIT, b""):
            raise SystemExit(f"bench.paired worker: unknown command {command!r}")
    await commands.aclose()


def _reply(line: bytes) -> None:
    # A line of a few dozen bytes to a pipe the driver drains after every command: it never
    # fills, so this never blocks the event loop.
    os.write(sys.stdout.fileno(), line)


# --------------------------------------------------------------------------- the driver


class Side:
    """One of the two measured: a worker process and the batches it ran."""

    def __init__(self, spec: str, client: ClientName, env: dict[str, str], argv: list[str]):
        self.spec = spec
        self.client = client
        self.walls: list[float] = []
        self.cpus: list[float] = []
        self.process = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )

    def _line(self) -> bytes:
        stdout: IO[bytes] | None = self.process.stdout
        assert stdout is not None
        line = stdout.readline()
        if not line:
            code = self.process.wait(timeout=_WORKER_TIMEOUT)
            raise SystemExit(f"{self.spec}: the worker ended (exit status {code}); see above")
        return line

    def _send(self, command: bytes) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        stdin.write(command)
        stdin.flush()

    def wait_ready(self) -> None:
        line = self._line()
        if line != b"ready\n":
            raise SystemExit(f"{self.spec}: the worker said {line!r} instead of ready")

    def batch(self) -> float:
        """Run one batch; its wall time per call (s)."""
        self._send(_GO)
        result = json.loads(self._line())
        self.walls.append(result["wall"])
        self.cpus.append(result["cpu"])
        return float(result["wall"])

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                self._send(_QUIT)
                self.process.wait(timeout=_WORKER_TIMEOUT)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()


def _side(
    spec: str, args: argparse.Namespace, workdir: Path, index: int
) -> tuple[str, ClientName, dict[str, str]]:
    client, at, tree = spec.partition("@")
    if client not in CLIENTS:
        raise SystemExit(f"{spec}: unknown client {client!r}; one of {', '.join(CLIENTS)}")
    env = dict(os.environ)
    if at:
        if client != "trio-mcp":
            raise SystemExit(f"{spec}: only trio-mcp is imported from a tree")
        env = prepare(f"{spec}={tree}", Path(args.repo), workdir, index).env()
    return spec, client, env


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.paired", description=__doc__)
    parser.add_argument("a", metavar="A", nargs="?", help="CLIENT or CLIENT@TREE: the numerator")
    parser.add_argument("b", metavar="B", nargs="?", help="CLIENT or CLIENT@TREE: the denominator")
    parser.add_argument("--era", choices=("legacy", "modern"), default="legacy")
    parser.add_argument("--width", type=int, default=1)
    parser.add_argument("--pairs", type=int, default=60)
    parser.add_argument("--calls", type=int, default=1000, help="per batch")
    parser.add_argument("--cpu", type=int, default=None, help="pin both sides to this CPU")
    parser.add_argument(
        "--cpus", default=None, help="C,S: pin each client to CPU C and its server to CPU S"
    )
    parser.add_argument("--repo", default=str(ROOT), help="the repository of TREE revisions")
    parser.add_argument("--json", default=None, help="also write every batch to this file")
    parser.add_argument("--serve", choices=CLIENTS, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    cpus: tuple[int, int] | None = None
    if args.cpu is not None and args.cpus is not None:
        parser.error("--cpu and --cpus: one or the other")
    if args.cpu is not None:
        cpus = (args.cpu, args.cpu)
    elif args.cpus is not None:
        try:
            cpus = parse_cpus(args.cpus)
        except ValueError as exc:
            parser.error(str(exc))
    if args.serve is not None:
        trio.run(serve, args.serve, args.era, args.width, args.calls, cpus)
        return
    if args.a is None or args.b is None:
        parser.error("name the two sides, A and B")
    if args.pairs < 1 or args.calls < 1 or args.width < 1:
        raise SystemExit("--pairs, --calls and --width must be at least 1")
    with tempfile.TemporaryDirectory(prefix="bench-paired-") as workdir:
        specs = [_side(spec, args, Path(workdir), i) for i, spec in enumerate((args.a, args.b))]
        sides = []
        try:
            for spec, client, env in specs:
                worker = [sys.executable, "-m", "bench.paired", "--serve", client]
                worker += ["--era", args.era, "--width", str(args.width)]
                worker += ["--calls", str(args.calls)]
                if cpus is not None:
                    worker += ["--cpus", f"{cpus[0]},{cpus[1]}"]
                sides.append(Side(spec, client, env, worker))
            for side in sides:
                side.wait_ready()
            ratios = []
            for i in range(args.pairs):
                first, second = (sides[0], sides[1]) if i % 2 == 0 else (sides[1], sides[0])
                first.batch()
                second.batch()
                ratios.append(sides[1].walls[-1] / sides[0].walls[-1])
        finally:
            for side in sides:
                side.close()
    summary = _summary(args, cpus, sides, ratios)
    print(_report(summary))
    if args.json is not None:
        Path(args.json).write_text(json.dumps(summary, indent=1) + "\n")


def _summary(
    args: argparse.Namespace, cpus: tuple[int, int] | None, sides: list[Side], ratios: list[float]
) -> dict[str, Any]:
    low, high = median_interval(ratios)
    quartiles = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    return {
        "a": args.a,
        "b": args.b,
        "era": args.era,
        "width": args.width,
        "calls": args.calls,
        "cpus": None if cpus is None else list(cpus),
        "pairs": len(ratios),
        "ratio_median": statistics.median(ratios),
        "ratio_ci95": [low, high],
        "ratio_quartiles": [quartiles[0], quartiles[2]],
        "sides": {
            side.spec: {
                "wall_us": statistics.median(side.walls) * 1e6,
                "cpu_us": statistics.median(side.cpus) * 1e6,
                "walls_us": [w * 1e6 for w in side.walls],
                "cpus_us": [c * 1e6 for c in side.cpus],
            }
            for side in sides
        },
        "ratios": ratios,
    }


def _report(summary: dict[str, Any]) -> str:
    low, high = summary["ratio_ci95"]
    q1, q3 = summary["ratio_quartiles"]
    cpus = summary["cpus"]
    if cpus is None:
        pinned = "unpinned"
    elif cpus[0] == cpus[1]:
        pinned = f"client and server on CPU {cpus[0]}"
    else:
        pinned = f"client on CPU {cpus[0]}, server on CPU {cpus[1]}"
    lines = [
        f"{summary['a']} / {summary['b']}: {summary['era']}, width {summary['width']}, "
        f"{summary['pairs']} pairs of {summary['calls']} calls, {pinned}",
        f"  rate ratio: median {summary['ratio_median']:.3f}  95% CI [{low:.3f}, {high:.3f}]  "
        f"quartiles [{q1:.3f}, {q3:.3f}]",
    ]
    for spec, side in summary["sides"].items():
        lines.append(
            f"  {spec}: median {side['wall_us']:.1f} us/call wall, "
            f"{side['cpu_us']:.1f} us/call client CPU"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
