"""The launcher's exit report: taken the moment its line arrives, before the launcher is reaped.

Most tests swap the real launcher for a scripted one (``FAKE_LAUNCHER``): it speaks the status
protocol of :mod:`trio_mcp.transports.stdio._reaper` (``ok <pid>`` at start, then what the test
says) and is itself the "server" on stdin/stdout/stderr, so a test decides exactly when the report
is written, when stdout ends and when the launcher exits. Process checks go through ``/proc`` with
the start time, as in ``test_stdio.py``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_mcp.protocol._errors import TransportClosed
from trio_mcp.transports.stdio import _reaper
from trio_mcp.transports.stdio._stdio import StdioParameters, StdioTransport, open_stdio_transport

from .test_stdio import dead, reaped, start_time

pytestmark = [
    pytest.mark.skipif(not _reaper.SUPPORTED, reason="the launcher is Linux-only"),
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc"),
]

PEER = Path(__file__).parent / "stdio_peer.py"

# One command per stdin line:
#   report <hex>   write these bytes to the status pipe
#   close          point stdout and stderr at /dev/null (the host sees EOF on both)
#   pause <s>      sleep
#   ignore-term    ignore SIGTERM
#   exit <n>       exit with n
# At the end of stdin it exits 0. SIGUSR1 (the host's kill request) keeps its default: death.
FAKE_LAUNCHER = """
import os, signal, sys, time
status = int(sys.argv[1])
os.write(status, b"ok %d\\n" % os.getpid())
for raw in sys.stdin.buffer:
    command, _, arg = raw.strip().partition(b" ")
    if command == b"report":
        os.write(status, bytes.fromhex(arg.decode()))
    elif command == b"close":
        sys.stdout.flush()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
    elif command == b"pause":
        time.sleep(float(arg))
    elif command == b"ignore-term":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    elif command == b"exit":
        os._exit(int(arg))
os._exit(0)
"""


def fake_launcher_argv(command: str, args: Sequence[str], *, status_fd: int, **_: Any) -> list[str]:
    return [sys.executable, "-I", "-c", FAKE_LAUNCHER, str(status_fd)]


def params(**overrides: Any) -> StdioParameters:
    settings: dict[str, Any] = {
        "command": sys.executable,
        "args": (str(PEER),),
        "close_grace": 1.0,
        "term_grace": 0.3,
        "kill_grace": 3.0,
    }
    settings.update(overrides)
    return StdioParameters(**settings)


@asynccontextmanager
async def fake(monkeypatch: pytest.MonkeyPatch, **overrides: Any) -> AsyncIterator[StdioTransport]:
    monkeypatch.setattr(_reaper, "launcher_argv", fake_launcher_argv)
    with trio.fail_after(10):
        async with open_stdio_transport(params(**overrides)) as transport:
            assert transport.bound_to_host
            assert transport.pid == transport.pgid  # the fake is both launcher and server
            yield transport


async def script(t: StdioTransport, *commands: str) -> None:
    """Queue the commands in the outbox at once (the writer sends them in one write)."""
    for command in commands:
        t.send_nowait(command.encode())
    await trio.lowlevel.checkpoint()


def report(line: bytes) -> str:
    return "report " + line.hex()


def alive(pid: int, started: int) -> bool:
    return not dead(pid, started)


def ended(t: StdioTransport, what: str) -> str:
    return f"stdio server {sys.executable!r} (pid {t.pid}) {what}; it wrote nothing to stderr"


# --------------------------------------------------------------------------- the report is taken


async def test_exit_status_is_known_before_the_launcher_is_reaped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with fake(monkeypatch) as t:
        started = start_time(t.pgid)
        await script(t, report(b"exit 7\n"), "close")
        with pytest.raises(TransportClosed) as info:
            await t.receive()
        assert str(info.value) == ended(t, "exited with code 7")
        assert t.returncode == 7
        assert t.statistics().returncode == 7
        assert alive(t.pgid, started)  # the launcher is alive: it has not even exited
        with pytest.raises(TransportClosed) as late:
            await t.send(b"too late")
        assert str(late.value) == str(info.value)
    # Leaving the block closed stdin: the fake exited 0 by itself and was reaped; the reported
    # status is the server's and stays.
    assert reaped(t.pgid, started)
    assert t.returncode == 7
    assert t.statistics().signals_sent == ()


async def test_aclose_returns_only_once_the_launcher_is_reaped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with fake(monkeypatch) as t:
        started = start_time(t.pgid)
        await script(t, report(b"signal 15\n"), "close", "pause 0.3")
        with pytest.raises(TransportClosed) as info:
            await t.receive()
        assert str(info.value) == ended(t, "was killed by signal 15 (SIGTERM)")
        before = trio.current_time()
        await t.aclose()
        assert trio.current_time() - before >= 0.1  # it waited for the pausing launcher
        assert reaped(t.pgid, started)
        assert t.returncode == -15
        assert t.statistics().signals_sent == ()


async def test_launcher_lingering_after_its_report_gets_the_shutdown_signals(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Reported but never exiting: shutdown escalates as for a live server (its group leader is
    # unreaped, so the group id is still its own), and the reported status is kept.
    async with fake(monkeypatch, close_grace=0.2, term_grace=0.2) as t:
        started = start_time(t.pgid)
        await script(t, "ignore-term", report(b"exit 3\n"), "close", "pause 30")
        with pytest.raises(TransportClosed, match="exited with code 3"):
            await t.receive()
        await t.aclose()
        assert reaped(t.pgid, started)
    assert t.statistics().signals_sent == ("SIGTERM", "SIGKILL")
    assert t.returncode == 3


@pytest.mark.parametrize(
    ("commands", "code", "what"),
    [
        pytest.param(
            [report(b"ex"), "pause 0.1", report(b"it 3\n"), "close"],
            3,
            "exited with code 3",
            id="line-in-two-writes",
        ),
        pytest.param(
            [report(b"signal 9\nexit 1\n"), "close"],
            -9,
            "was killed by signal 9 (SIGKILL)",
            id="first-line-counts",
        ),
        pytest.param(
            [report(b"exit 5"), "close", "exit 0"],
            5,
            "exited with code 5",
            id="unterminated-line-at-the-end",
        ),
        pytest.param(
            [report(b"bogus 1\n"), "close", "exit 6"],
            6,
            "exited with code 6",
            id="unreadable-report-falls-back-to-the-launcher-status",
        ),
        pytest.param(
            [report(b"exit -1\n"), "close", "exit 6"],
            6,
            "exited with code 6",
            id="negative-code-is-unreadable",
        ),
        pytest.param(["close", "exit 4"], 4, "exited with code 4", id="no-report"),
    ],
)
async def test_report_forms(
    monkeypatch: pytest.MonkeyPatch, commands: list[str], code: int, what: str
) -> None:
    async with fake(monkeypatch) as t:
        await script(t, *commands)
        with pytest.raises(TransportClosed) as info:
            await t.receive()
        assert str(info.value) == ended(t, what)
        assert t.returncode == code


# --------------------------------------------------------------------------- stderr


async def test_stderr_held_open_elsewhere_delays_the_end_by_the_cap_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Something outside the group (here: this test) keeps the server's stderr open. The exit
    # status comes at once; the end waits for the last stderr lines at most 0.5 s.
    async with fake(monkeypatch) as t:
        holder = os.open(f"/proc/{t.pgid}/fd/2", os.O_WRONLY)
        try:
            await script(t, "close")
            await trio.sleep(0.05)  # stdout is at EOF, the status is not reported yet
            before = trio.current_time()
            await script(t, report(b"exit 0\n"))
            with pytest.raises(TransportClosed) as info:
                await t.receive()
            waited = trio.current_time() - before
            assert t.returncode == 0
            assert str(info.value) == ended(t, "exited with code 0")
            assert 0.3 <= waited < 2.0
        finally:
            os.close(holder)


async def test_stderr_lines_written_before_the_report_are_in_the_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with fake(monkeypatch) as t:
        stderr = os.open(f"/proc/{t.pgid}/fd/2", os.O_WRONLY)
        os.write(stderr, b"going down\n")
        os.close(stderr)
        await script(t, "close", report(b"exit 2\n"))
        with pytest.raises(TransportClosed) as info:
            await t.receive()
        assert str(info.value) == (
            f"stdio server {sys.executable!r} (pid {t.pid}) exited with code 2; "
            "its last stderr lines:\n  | going down"
        )


# --------------------------------------------------------------------------- the real launcher


async def test_real_launcher_killed_alone_reports_its_own_death() -> None:
    # No report: the status pipe just ends. The server dies with the launcher (its
    # PDEATHSIG), the launcher is reaped, the group swept, and the end says SIGKILL.
    with trio.fail_after(10):
        async with open_stdio_transport(params()) as t:
            assert t.pid != t.pgid
            server, launcher = start_time(t.pid), start_time(t.pgid)
            await t.send(json.dumps({"peer": "pid"}).encode())
            assert json.loads(await t.receive())["ppid"] == t.pgid
            os.kill(t.pgid, signal.SIGKILL)
            with pytest.raises(TransportClosed) as info:
                await t.receive()
            assert str(info.value) == ended(t, "was killed by signal 9 (SIGKILL)")
            assert t.returncode == -9
            assert reaped(t.pgid, launcher)
            with trio.fail_after(5):
                while not dead(t.pid, server):  # noqa: ASYNC110 - /proc offers nothing to wait on
                    await trio.sleep(0.02)
    assert t.statistics().signals_sent == ()


async def test_real_launcher_reports_an_exit_code() -> None:
    with trio.fail_after(10):
        async with open_stdio_transport(params()) as t:
            server = start_time(t.pid)
            await t.send(json.dumps({"peer": "exit", "code": 9, "stderr": ["bye"]}).encode())
            with pytest.raises(TransportClosed) as info:
                await t.receive()
            assert str(info.value) == (
                f"stdio server {sys.executable!r} (pid {t.pid}) exited with code 9; "
                "its last stderr lines:\n  | bye"
            )
            assert t.returncode == 9
            assert reaped(t.pid, server)  # the launcher reaped it before reporting
    assert t.statistics().signals_sent == ()


async def test_exit_report_right_behind_the_start_report_is_not_lost() -> None:
    # A server that exits at once: "ok <pid>" and "exit 4" may reach the pipe before the host
    # reads the first line; the exit report must survive the read of the start report.
    for _ in range(30):
        with trio.fail_after(10):
            async with open_stdio_transport(
                StdioParameters(command="/bin/sh", args=("-c", "exit 4"))
            ) as t:
                with pytest.raises(TransportClosed) as info:
                    await t.receive()
                assert t.returncode == 4, str(info.value)
