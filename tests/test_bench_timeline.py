"""``bench.timeline``: the cycle of a call cut from a ``perf script`` trace.

The segments are checked on a made-up trace, in ``perf script``'s own format, with exact times;
the end-to-end run needs ``perf`` and the right to trace, which a test machine may not give, so
only its refusals are run here.
"""

from __future__ import annotations

import subprocess
import sys

from tests.bench_loader import ROOT, load_bench

load_bench()

from bench.timeline import SEGMENTS, Event, parse_perf_script, segments  # noqa: E402

CLIENT, SERVER = 4100, 4200


def _line(comm: str, tid: int, micros: int, event: str, trace: str) -> str:
    return f"{comm:>16s} {tid:>5d} {micros / 1e6:.6f}: {event}: {trace}"


def _asleep(comm: str, tid: int, micros: int) -> str:
    return _line(
        comm,
        tid,
        micros,
        "sched:sched_switch",
        f"prev_comm={comm} prev_pid={tid} prev_prio=120 prev_state=S ==> next_comm=swapper/1 "
        "next_pid=0 next_prio=120",
    )


def _exit(comm: str, tid: int, micros: int) -> str:
    return _line(comm, tid, micros, "raw_syscalls:sys_exit", "NR 232 = 1")


def _write(comm: str, tid: int, micros: int, took: int) -> list[str]:
    return [
        _line(
            comm, tid, micros, "syscalls:sys_enter_write", "fd: 0x00000009, buf: 0x1, count: 0x65"
        ),
        _line(comm, tid, micros + took, "syscalls:sys_exit_write", "0x65"),
    ]


def _read(comm: str, tid: int, micros: int, value: str) -> str:
    return _line(comm, tid, micros, "syscalls:sys_exit_read", value)


def _cycle(start: int) -> list[str]:
    """One call, the client woken at ``start``: 40 us to its write (10 us long), the server
    woken 20 us later, 6 us of its work, the client woken 30 us after the server's write began
    (so the next cycle starts at start + 106); the client asleep 5 us after its write."""
    return [
        _exit("python", CLIENT, start),  # woken: the answer is readable
        _read("python", CLIENT, start + 3, "0x5f"),
        _read("python", CLIENT, start + 8, "0xfffffffffffffff5"),  # EAGAIN
        *_write("python", CLIENT, start + 40, 10),
        _asleep("python", CLIENT, start + 55),
        _exit("node", SERVER, start + 68),
        _read("node", SERVER, start + 70, "0x65"),
        *_write("node", SERVER, start + 76, 9),
        _asleep("node", SERVER, start + 90),
    ]


def test_each_segment_of_each_complete_cycle() -> None:
    lines = [_asleep("python", CLIENT, 900)]
    for start in (1000, 1106, 1212):
        lines += _cycle(start)
    lines.append(_exit("python", CLIENT, 1318))  # ends the third cycle
    lines.append("some header line perf prints")
    found = segments(parse_perf_script(lines), CLIENT, SERVER)
    assert list(found) == list(SEGMENTS)
    expected = {
        "client: woken -> write": 40.0,
        "client: write": 10.0,
        "server: woken": 20.0,
        "server: read -> write": 6.0,
        "client: woken by the answer": 30.0,
        "cycle": 106.0,
        "client: after its write": 5.0,
    }
    for name, value in expected.items():
        assert [round(v, 3) for v in found[name]] == [value] * 3, name


def test_a_cycle_missing_a_step_is_left_out() -> None:
    # The server answers before the client's write returns (as on one CPU): no cycle.
    lines = [_asleep("python", CLIENT, 900), _exit("python", CLIENT, 1000)]
    lines += [
        _line("python", CLIENT, 1040, "syscalls:sys_enter_write", "fd: 0x9, buf: 0x1, count: 0x65"),
        _read("node", SERVER, 1045, "0x65"),
        *_write("node", SERVER, 1047, 2),
        _line("python", CLIENT, 1060, "syscalls:sys_exit_write", "0x65"),
        _asleep("python", CLIENT, 1065),
        _exit("python", CLIENT, 1100),
    ]
    assert all(
        values == [] for values in segments(parse_perf_script(lines), CLIENT, SERVER).values()
    )


def test_reads_carry_their_value_and_a_failed_one_is_negative() -> None:
    events = parse_perf_script(
        [_read("node", SERVER, 5, "0x65"), _read("node", SERVER, 6, "0xfffffffffffffff5")]
    )
    assert events == [Event(5.0, SERVER, "read", 101), Event(6.0, SERVER, "read", -11)]


def test_the_client_and_the_server_must_be_apart_and_each_client_named_once() -> None:
    for extra in (["--cpus", "1,1", "raw"], ["raw", "raw"], ["--cpus", "1", "raw"]):
        command = [sys.executable, "-m", "bench.timeline", *extra]
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert done.returncode == 2, (extra, done.stderr)
