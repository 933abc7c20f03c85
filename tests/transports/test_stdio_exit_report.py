"""The launcher's exit report: taken the moment its line arrives, before the server is reaped.

Most tests swap the shared launcher for a scripted one (``FAKE_LAUNCHER``): it takes one request
of :mod:`trio_mcp.transports.stdio._launcher` and, instead of starting a server, is the "server"
itself on the request's stdin, stdout and stderr (it leads its own process group, as a server
does). It writes its pid on the start pipe and closes it, then what the test says, on the status
pipe or the reap socket, so a test decides exactly when the report is written, when stdout ends,
when the reap is confirmed and when the "server" exits. Process checks go through ``/proc`` with
the start time, as in ``test_stdio.py``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_mcp.protocol._errors import TransportClosed
from trio_mcp.transports.stdio import _launcher
from trio_mcp.transports.stdio._stdio import StdioParameters, StdioTransport, open_stdio_transport

from .test_stdio import dead, fresh_launcher, launcher_pids, reaped, start_time, wait_until

pytestmark = [
    pytest.mark.skipif(not _launcher.SUPPORTED, reason="the launcher is Linux-only"),
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc"),
]
__all__ = ["fresh_launcher"]  # a fixture, used by name

PEER = Path(__file__).parent / "stdio_peer.py"

# It takes one request, says on the start pipe that it started (its own pid), then runs one
# command per stdin line:
#   report <hex>   write these bytes to the status pipe
#   end-status     close the status pipe
#   reap <hex>     write these bytes to the reap socket
#   confirm        wait for the host to end its side of the reap socket, then close it (as the
#                  real launcher does once it has reaped the server), and go on
#   close          point stdout and stderr at /dev/null (the host sees EOF on both)
#   pause <s>      sleep
#   ignore-term    ignore SIGTERM
#   exit <n>       exit with n
# At the end of stdin it waits for the host to end its side of the reap socket (as the real
# launcher does before it reaps), then exits 0. SIGKILL (the host's kill step) kills it.
FAKE_LAUNCHER = """
import array, os, signal, socket, sys, time
control = socket.socket(fileno=int(sys.argv[1]))
data, ancillary, _, _ = control.recvmsg(65536, socket.CMSG_SPACE(8 * 4))
fds = array.array("i")
fds.frombytes(ancillary[0][2])
for target, fd in enumerate(fds[:3]):
    os.dup2(fd, target)
status, reap, start = fds[3], socket.socket(fileno=fds[4]), fds[5]
os.write(start, b"%d\\n" % os.getpid())  # then the start pipe ends: "it has exec'd"
for fd in (*fds[:3], *fds[5:]):
    os.close(fd)
for raw in sys.stdin.buffer:
    command, _, arg = raw.strip().partition(b" ")
    if command == b"report":
        os.write(status, bytes.fromhex(arg.decode()))
    elif command == b"end-status":
        os.close(status)
    elif command == b"reap":
        reap.sendall(bytes.fromhex(arg.decode()))
    elif command == b"confirm":
        reap.recv(1)
        reap.close()
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
if reap.fileno() >= 0:
    reap.recv(1)
os._exit(0)
"""


def fake_launcher_argv(control_fd: int, host_pid: int) -> list[str]:
    del host_pid
    return [sys.executable, "-I", "-c", FAKE_LAUNCHER, str(control_fd)]


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
    _launcher.shutdown_launcher()
    monkeypatch.setattr(_launcher, "launcher_argv", fake_launcher_argv)
    try:
        with trio.fail_after(10):
            async with open_stdio_transport(params(**overrides)) as transport:
                assert transport.bound_to_host
                assert launcher_pids() == []  # the "launcher" is the fake, and the server
                assert transport.pid == transport.pgid
                yield transport
    finally:
        _launcher.shutdown_launcher()


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


def reap(line: bytes) -> str:
    return "reap " + line.hex()


# --------------------------------------------------------------------------- the report is taken


async def test_exit_status_is_known_before_the_server_is_reaped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with fake(monkeypatch) as t:
        started = start_time(t.pgid)
        await script(t, report(b"exit 7\n"), "close", reap(b"exit 7\n"))
        with pytest.raises(TransportClosed) as info:
            await t.receive()
        assert str(info.value) == ended(t, "exited with code 7")
        assert t.returncode == 7
        assert t.statistics().returncode == 7
        assert alive(t.pgid, started)  # the "server" has not even exited
        with pytest.raises(TransportClosed) as late:
            await t.send(b"too late")
        assert str(late.value) == str(info.value)
    # Leaving the block closed stdin: the fake saw the reap confirmed and exited 0; the
    # reported status is the server's and stays.
    assert dead(t.pgid, started)
    assert t.returncode == 7
    assert t.statistics().signals_sent == ()


async def test_aclose_returns_only_once_the_reap_is_confirmed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with fake(monkeypatch) as t:
        started = start_time(t.pgid)
        await script(t, report(b"signal 15\n"), "close", reap(b"signal 15\n"), "pause 0.3")
        with pytest.raises(TransportClosed) as info:
            await t.receive()
        assert str(info.value) == ended(t, "was killed by signal 15 (SIGTERM)")
        before = trio.current_time()
        await t.aclose()
        assert trio.current_time() - before >= 0.1  # it waited for the pausing fake
        await wait_until(lambda: dead(t.pgid, started))  # it exits after confirming
        assert t.returncode == -15
        assert t.statistics().signals_sent == ()


async def test_server_lingering_after_its_report_gets_the_shutdown_signals(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Reported, but the reap is never confirmed: shutdown escalates as for a live server (the
    # group id is still its own), and the reported status is kept.
    async with fake(monkeypatch, close_grace=0.2, term_grace=0.2) as t:
        started = start_time(t.pgid)
        await script(t, "ignore-term", report(b"exit 3\n"), "close", "pause 30")
        with pytest.raises(TransportClosed, match="exited with code 3"):
            await t.receive()
        await t.aclose()
        await wait_until(lambda: dead(t.pgid, started))  # killed by the SIGKILL step
    assert t.statistics().signals_sent == ("SIGTERM", "SIGKILL")
    assert t.returncode == 3


@pytest.mark.parametrize(
    ("commands", "code", "what"),
    [
        pytest.param(
            [report(b"ex"), "pause 0.1", report(b"it 3\n"), "close", reap(b"exit 3\n")],
            3,
            "exited with code 3",
            id="line-in-two-writes",
        ),
        pytest.param(
            [report(b"signal 9\nexit 1\n"), "close", reap(b"signal 9\n")],
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
            [report(b"bogus 1\n"), "close", reap(b"exit 6\n"), "confirm"],
            6,
            "exited with code 6",
            id="unreadable-report-falls-back-to-the-reap-socket",
        ),
        pytest.param(
            [report(b"exit -1\n"), "close", reap(b"exit 6\n"), "confirm"],
            6,
            "exited with code 6",
            id="negative-code-is-unreadable",
        ),
        pytest.param(
            ["close", "end-status", reap(b"exit 4\n"), "confirm"],
            4,
            "exited with code 4",
            id="no-report",
        ),
        pytest.param(
            ["close", "exit 0"],
            -9,
            "was killed by signal 9 (SIGKILL)",
            id="launcher-gone-without-any-report",
        ),
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
    assert t.statistics().signals_sent == ()


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
            await wait_until(lambda: t._stdout_ended)  # the status is not reported yet
            before = trio.current_time()
            await script(t, report(b"exit 0\n"), reap(b"exit 0\n"))
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
        await script(t, "close", report(b"exit 2\n"), reap(b"exit 2\n"))
        with pytest.raises(TransportClosed) as info:
            await t.receive()
        assert str(info.value) == (
            f"stdio server {sys.executable!r} (pid {t.pid}) exited with code 2; "
            "its last stderr lines:\n  | going down"
        )


# --------------------------------------------------------------------------- the real launcher


async def test_real_launcher_killed_alone_takes_its_servers_down(fresh_launcher: None) -> None:
    # No report: the status pipe and the reap socket just end. This process SIGKILLs the
    # server's group itself (nobody else would), and the end says SIGKILL.
    with trio.fail_after(10):
        async with open_stdio_transport(params()) as t:
            server = start_time(t.pid)
            grandchild = (await ask(t, {"peer": "spawn"}))["pid"]
            grandchild_started = start_time(grandchild)
            (launcher,) = launcher_pids()
            launcher_started = start_time(launcher)
            os.kill(launcher, signal.SIGKILL)
            with pytest.raises(TransportClosed) as info:
                await t.receive()
            assert str(info.value) == ended(t, "was killed by signal 9 (SIGKILL)")
            assert t.returncode == -9
            with trio.fail_after(5):
                while not (dead(t.pid, server) and dead(grandchild, grandchild_started)):  # noqa: ASYNC110
                    await trio.sleep(0.02)
    assert t.statistics().signals_sent == ()
    # The next server gets a new launcher; the dead one is reaped on the way.
    async with open_stdio_transport(params()) as t2:
        assert launcher_pids() != [launcher]
        assert reaped(launcher, launcher_started)
        await t2.send(b"still works")
        assert await t2.receive() == b"still works"


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
    assert reaped(t.pid, server)  # leaving the block waited for the launcher to reap it
    assert t.statistics().signals_sent == ()


async def test_exit_report_of_a_server_that_exits_at_once_is_not_lost() -> None:
    # A server that exits at once: its exit report may reach the status pipe before the host
    # has read the start pipe; it must be there for the transport all the same.
    for _ in range(30):
        with trio.fail_after(10):
            async with open_stdio_transport(
                StdioParameters(command="/bin/sh", args=("-c", "exit 4"))
            ) as t:
                with pytest.raises(TransportClosed) as info:
                    await t.receive()
                assert t.returncode == 4, str(info.value)


async def ask(t: StdioTransport, command: dict[str, Any]) -> Any:
    await t.send(json.dumps(command).encode())
    return json.loads(await t.receive())
