"""``python -m bench.timeline``: where the time of one call goes, seen from the kernel.

    python -m bench.timeline [--cpus 1,0] [--seconds 0.5] [--rounds 3] CLIENT [CLIENT ...]

Each client calls the null stdio server one call at a time, the client on CPU ``C`` and the
server on CPU ``S`` (``--cpus C,S``, which must be apart), while ``perf record`` traces the two
processes' ``read`` and ``write`` system calls, their system-call exits and their context
switches for ``--seconds``. Each call's cycle is then cut where one side hands over to the other:

- ``client: woken -> write``: from the client's wake-up (its first system call returning after
  it went to sleep: the answer is readable) to its write of the next request. Everything the
  client does for a call is in here: each pass of trio's scheduler, each task step, the decode
  of the answer and the encode of the request. The one part the client decides.
- ``client: write``: the write itself, which wakes the server on its CPU.
- ``server: woken``: from the client's write returning to the server's read returning it.
- ``server: read -> write``: the server's own work.
- ``client: woken by the answer``: from the server's write starting to the client's wake-up.
- ``client: after its write``: from its write returning to its going to sleep (off the cycle
  when the server is apart: it overlaps the three segments before).

Clients take turns, one recording each per round, the order turning every round; it prints the
median of each segment over every cycle recorded, per client. Tracing slows every system call
down (each one is recorded), so the segments are longer than untraced; compare clients, not
absolute figures. Needs ``perf`` and the right to trace other processes' system calls (root, or
``kernel.perf_event_paranoid`` at most 1 and read access to the kernel's tracing events).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Final, Literal, NamedTuple

import trio

from .clients import CLIENTS, ClientName, null_stdio_target, open_connection
from .paired import parse_cpus
from .scenarios import _run_in_flight

__all__ = ["SEGMENTS", "Event", "main", "parse_perf_script", "segments"]

#: What ``perf record`` traces: the two system calls of a call, every system call's exit (the
#: first one after a sleep is the wake-up) and the switches away from the CPU.
EVENTS: Final = (
    "syscalls:sys_enter_write,syscalls:sys_exit_write,syscalls:sys_exit_read,"
    "raw_syscalls:sys_exit,sched:sched_switch"
)

#: The segments of a cycle, in the order they are printed.
SEGMENTS: Final = (
    "client: woken -> write",
    "client: write",
    "server: woken",
    "server: read -> write",
    "client: woken by the answer",
    "cycle",
    "client: after its write",
)

Kind = Literal["write", "written", "read", "exit", "asleep"]


class Event(NamedTuple):
    """One traced event: ``time`` in microseconds, the thread, what happened; ``read``
    carries the bytes read (the read's return value)."""

    time: float
    tid: int
    kind: Kind
    value: int = 0


_LINE: Final = re.compile(r"\s*\S.*?\s+(\d+)\s+(\d+\.\d+):\s+(\S+):\s*(.*)")


def parse_perf_script(lines: Iterable[str]) -> list[Event]:
    """The events of ``perf script -F comm,tid,time,event,trace`` output, in its order (which
    is the time order); lines of other events are skipped."""
    events: list[Event] = []
    for line in lines:
        match = _LINE.fullmatch(line.rstrip("\n"))
        if match is None:
            continue
        tid, time, name, trace = int(match[1]), float(match[2]) * 1e6, match[3], match[4]
        if name == "syscalls:sys_enter_write":
            events.append(Event(time, tid, "write"))
        elif name == "syscalls:sys_exit_write":
            events.append(Event(time, tid, "written"))
        elif name == "syscalls:sys_exit_read":
            value = int(trace.rsplit(None, 1)[-1], 16)  # a failed read: a negative errno
            events.append(Event(time, tid, "read", value - (1 << 64) if value >> 63 else value))
        elif name == "raw_syscalls:sys_exit":
            events.append(Event(time, tid, "exit"))
        elif name == "sched:sched_switch" and " prev_state=S " in f" {trace} ":
            events.append(Event(time, tid, "asleep"))
    return events


def segments(events: Iterable[Event], client: int, server: int) -> dict[str, list[float]]:
    """Each complete cycle's segments (see the module docstring), in microseconds, from the
    events of the client's thread ``client`` and the server's thread ``server``. A cycle runs
    from one wake-up of the client to the next; one that misses a step (the client woke for
    something else, or the server answered before the client's write returned, as on one
    CPU) is left out."""
    found: dict[str, list[float]] = {name: [] for name in SEGMENTS}
    cycle: dict[str, float] = {}
    asleep = False
    for event in events:
        if event.tid == client:
            if event.kind == "asleep":
                asleep = True
                if "written" in cycle and "asleep" not in cycle:
                    cycle["asleep"] = event.time
            elif event.kind in ("exit", "read", "written") and asleep:
                asleep = False  # the first exit after a sleep: woken
                if cycle.keys() >= {"woke", "write", "written", "server read", "server write"}:
                    _add(found, cycle, event.time)
                cycle = {"woke": event.time}
            elif event.kind == "write" and "woke" in cycle and "write" not in cycle:
                cycle["write"] = event.time
            elif event.kind == "written" and "write" in cycle and "written" not in cycle:
                cycle["written"] = event.time
        elif event.tid == server:
            if event.kind == "read" and event.value > 0 and "written" in cycle:
                cycle.setdefault("server read", event.time)
            elif event.kind == "write" and "server read" in cycle:
                cycle.setdefault("server write", event.time)
    return found


def _add(found: dict[str, list[float]], cycle: dict[str, float], woke_again: float) -> None:
    found["client: woken -> write"].append(cycle["write"] - cycle["woke"])
    found["client: write"].append(cycle["written"] - cycle["write"])
    found["server: woken"].append(cycle["server read"] - cycle["written"])
    found["server: read -> write"].append(cycle["server write"] - cycle["server read"])
    found["client: woken by the answer"].append(woke_again - cycle["server write"])
    found["cycle"].append(woke_again - cycle["woke"])
    if "asleep" in cycle:
        found["client: after its write"].append(cycle["asleep"] - cycle["written"])


async def record(client: ClientName, cpus: tuple[int, int], seconds: float, out: Path) -> int:
    """Run ``client`` one call at a time while ``perf record`` traces it and its server for
    ``seconds`` into ``out``; returns the server's pid (the client's thread is this process)."""
    everywhere = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpus[1]})
    async with open_connection(client, null_stdio_target("node")) as conn:
        os.sched_setaffinity(0, {cpus[0]})
        await _run_in_flight(conn, 1, 2000)  # warm-up
        server: int = conn.server_pid()
        os.sched_setaffinity(0, everywhere)  # perf itself runs where the kernel puts it
        command = ["perf", "record", "-q", "-e", EVENTS, "-p", f"{os.getpid()},{server}"]
        perf = await trio.lowlevel.open_process(
            [*command, "-o", str(out), "--", "sleep", str(seconds)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        os.sched_setaffinity(0, {cpus[0]})
        while perf.poll() is None:
            await _run_in_flight(conn, 1, 200)
        assert perf.stderr is not None
        problem = (await perf.stderr.receive_some(65536)).decode(errors="replace").strip()
        await perf.stderr.aclose()
        await perf.wait()
    os.sched_setaffinity(0, everywhere)
    if perf.returncode != 0:
        raise SystemExit(f"perf record failed ({perf.returncode}): {problem}")
    return server


def _read_back(out: Path) -> list[Event]:
    if not out.exists():
        raise SystemExit(f"perf record wrote no {out.name}: was anything traced?")
    done = subprocess.run(
        ["perf", "script", "-i", str(out), "-F", "comm,tid,time,event,trace"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"perf script failed: {done.stderr.strip()}")
    return parse_perf_script(done.stdout.splitlines())


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.timeline", description=__doc__)
    parser.add_argument("clients", nargs="+", choices=CLIENTS, metavar="CLIENT")
    parser.add_argument("--cpus", default="1,0", help="C,S: the client on CPU C, the server on S")
    parser.add_argument("--seconds", type=float, default=0.5, help="traced per recording")
    parser.add_argument("--rounds", type=int, default=3, help="recordings per client")
    args = parser.parse_args(argv)
    try:
        cpus = parse_cpus(args.cpus)
    except ValueError as exc:
        parser.error(str(exc))
    if len(set(args.clients)) < len(args.clients):
        parser.error("name each client once")
    if cpus[0] == cpus[1]:
        parser.error("--cpus: the client and the server must be on different CPUs")
    if shutil.which("perf") is None:
        raise SystemExit("perf is not on PATH: install it (linux-tools / linux-perf)")
    found: dict[str, dict[str, list[float]]] = {
        name: {segment: [] for segment in SEGMENTS} for name in args.clients
    }
    with tempfile.TemporaryDirectory() as folder:
        for i in range(args.rounds):
            order = args.clients if i % 2 == 0 else args.clients[::-1]
            for name in order:
                out = Path(folder) / f"{name}.data"
                server = trio.run(record, name, cpus, args.seconds, out)
                for segment, values in segments(_read_back(out), os.getpid(), server).items():
                    found[name][segment].extend(values)
    print(
        f"one call at a time, client on CPU {cpus[0]}, server on CPU {cpus[1]}, traced "
        f"({args.rounds} x {args.seconds:g} s each); medians in us"
    )
    print(f"  {'':30s}" + "".join(f"{name:>12s}" for name in args.clients))
    for segment in SEGMENTS:
        cells = [found[name][segment] for name in args.clients]
        print(
            f"  {segment:30s}"
            + "".join(f"{statistics.median(c):12.1f}" if c else f"{'-':>12s}" for c in cells)
        )
    print(f"  {'cycles':30s}" + "".join(f"{len(found[n]['cycle']):12d}" for n in args.clients))


if __name__ == "__main__":
    main()
