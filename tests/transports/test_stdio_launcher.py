"""The shared launcher (``_reaper.py`` run by ``_launcher.py``): every guarantee of the stdio
transport with one launcher process per host.

Process checks go through ``/proc`` with the start time, as in ``test_stdio.py``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_mcp.protocol._errors import ConnectError, TransportClosed
from trio_mcp.transports.stdio import _launcher
from trio_mcp.transports.stdio._stdio import StdioParameters, open_stdio_transport

from .test_stdio import (
    MODES,
    ask,
    dead,
    fresh_launcher,
    launcher_pids,
    peer,
    proc_stat,
    real_tmp_path,
    reaped,
    running,
    start_time,
    wait_until,
)

pytestmark = [
    pytest.mark.skipif(not _launcher.SUPPORTED, reason="the launcher is Linux-only"),
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc"),
]
__all__ = ["fresh_launcher", "real_tmp_path"]  # fixtures, used by name

HERE = Path(__file__).parent
HOST = HERE / "stdio_host.py"


def children_of(pid: int) -> list[int]:
    """Every process whose parent is ``pid`` (zombies included)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            info = proc_stat(int(entry))
            if info is not None and info[1] == pid:
                found.append(int(entry))
    return found


def the_launcher() -> int:
    (launcher,) = launcher_pids()
    return launcher


def tagged(tag: str) -> list[int]:
    """The processes whose command line holds ``tag``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if tag.encode() in cmdline.split(b"\0"):
                found.append(int(entry))
    return found


# --------------------------------------------------------------------------- many servers


async def test_many_servers_at_once_each_in_its_own_group_and_all_reaped() -> None:
    count = 30
    seen: dict[int, dict[str, int]] = {}
    started: dict[int, int] = {}

    async def one(index: int) -> None:
        async with running(peer()) as t:
            ids = await ask(t, {"peer": "pid"})
            seen[index] = ids
            started[t.pid] = start_time(t.pid)
            await t.send(b"hello %d" % index)
            assert await t.receive() == b"hello %d" % index

    async with trio.open_nursery() as nursery:
        for index in range(count):
            nursery.start_soon(one, index)
    launcher = the_launcher()
    assert len({ids["pid"] for ids in seen.values()}) == count
    for ids in seen.values():
        assert ids["pgid"] == ids["pid"]  # its own group
        assert ids["ppid"] == launcher
    assert all(reaped(pid, at) for pid, at in started.items())  # aclose waited for the reaping
    assert children_of(launcher) == []  # no zombie left with the launcher


async def test_exit_code_and_signal_are_told_apart() -> None:
    # 137 is what a shell reports for SIGKILL; here it is a real exit code.
    async with running(StdioParameters(command="/bin/sh", args=("-c", "exit 137"))) as t:
        with pytest.raises(TransportClosed, match="exited with code 137"):
            await t.receive()
    assert t.returncode == 137
    async with running(StdioParameters(command="/bin/sh", args=("-c", "kill -9 $$"))) as t:
        with pytest.raises(TransportClosed, match=r"was killed by signal 9 \(SIGKILL\)"):
            await t.receive()
    assert t.returncode == -9


# --------------------------------------------------------------------------- host death


@pytest.mark.parametrize("count", [1, 8])
async def test_every_group_dies_with_a_sigkilled_host(count: int) -> None:
    host = await trio.lowlevel.open_process(
        [sys.executable, str(HOST), str(count)], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL
    )
    try:
        assert host.stdout is not None
        text = b""
        with trio.fail_after(20):
            while text.count(b"\n") < count:
                chunk = await host.stdout.receive_some(1000)
                assert chunk, "the host ended before printing its pids"
                text += chunk
        pids = {int(n) for line in text.splitlines() for n in line.split()}
        assert len(pids) == 2 * count  # a server (its own group) and a grandchild each
        launchers = [pid for pid in children_of(host.pid) if pid not in pids]
        started = {pid: start_time(pid) for pid in (*pids, *launchers)}
        host.send_signal(signal.SIGKILL)
        assert await host.wait() == -signal.SIGKILL
        await wait_until(lambda: all(dead(pid, at) for pid, at in started.items()), timeout=10)
    finally:
        if host.returncode is None:
            host.kill()
            await host.wait()
        if host.stdout is not None:
            await host.stdout.aclose()


def test_launcher_ignores_termination_signals_while_the_host_lives() -> None:
    async def parent_of_a_server() -> int:
        async with running(peer()) as t:
            ppid: int = (await ask(t, {"peer": "pid"}))["ppid"]
            return ppid

    launcher = trio.run(parent_of_a_server)
    started = start_time(launcher)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        os.kill(launcher, sig)
    assert trio.run(parent_of_a_server) == launcher
    assert start_time(launcher) == started


IGNORING_SIGCHLD_HOST = """
import json, signal, sys, trio
from trio_mcp.transports.stdio._stdio import StdioParameters, open_stdio_transport
signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the launcher inherits this disposition

async def main():
    parents, ends = [], []
    for code in range(3):
        params = StdioParameters(command=sys.executable, args=(sys.argv[1],))
        async with open_stdio_transport(params) as t:
            await t.send(b'{"peer":"pid"}')
            parents.append(json.loads(await t.receive())["ppid"])
            await t.send(b'{"peer":"exit","code":%d}' % code)
            try:
                await t.receive()
            except Exception as exc:
                said = str(exc)
        ends.append([t.returncode, said.split("; ")[0], t.statistics().signals_sent])
    print(json.dumps([parents, ends]))

trio.run(main)
"""


def test_host_ignoring_sigchld_keeps_one_working_launcher() -> None:
    # The launcher inherits SIGCHLD ignored, and must collect its servers' exit statuses all
    # the same (it handles SIGCHLD itself).
    done = subprocess.run(
        [sys.executable, "-c", IGNORING_SIGCHLD_HOST, str(HERE / "stdio_peer.py")],
        capture_output=True,
        timeout=30,
        check=True,
    )
    parents, ends = json.loads(done.stdout)
    assert len(parents) == 3
    assert len(set(parents)) == 1, parents
    assert len(ends) == 3
    for code, (returncode, said, sent) in enumerate(ends):
        assert returncode == code
        assert said.endswith(f"exited with code {code}")
        assert sent == []  # no escalation: the exit was collected at once


# --------------------------------------------------------------------------- what a server gets


async def test_large_request_goes_through(tmp_path: Path) -> None:
    # More than one socket message can carry (one string may hold at most 128 KiB).
    big = {f"BIG{i}": str(i) * 100_000 for i in range(4)}
    async with running(peer(env=big, cwd=str(tmp_path))) as t:
        reply = await ask(t, {"peer": "env"})
    assert {name: reply["initial"][name] for name in big} == big


async def test_relative_cwd_and_the_hosts_current_directory(
    real_tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tmp_path = real_tmp_path
    (tmp_path / "sub").mkdir()
    real = str(tmp_path)
    monkeypatch.chdir(tmp_path)  # after the launcher started: it must follow the host
    async with running(peer(cwd="sub")) as t:
        assert await ask(t, {"peer": "cwd"}) == {"cwd": os.path.join(real, "sub")}
    async with running(peer()) as t:
        assert await ask(t, {"peer": "cwd"}) == {"cwd": real}


async def test_command_is_looked_up_on_the_servers_path(tmp_path: Path) -> None:
    script = tmp_path / "my-null-server"
    script.write_text("#!/bin/sh\necho found\n")
    script.chmod(0o755)
    async with running(StdioParameters(command="my-null-server", env={"PATH": str(tmp_path)})) as t:
        assert await t.receive() == b"found"
    async with running(StdioParameters(command="./my-null-server", cwd=str(tmp_path))) as t:
        assert await t.receive() == b"found"


@pytest.mark.parametrize("bind", MODES)
async def test_path_lookup_skips_what_cannot_run_as_subprocess_does(
    bind: bool, tmp_path: Path
) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    (first / "srv").write_text("#!/bin/sh\necho first\n")  # no execute bit: not even for root
    (second / "srv").write_text("#!/bin/sh\necho second\n")
    (second / "srv").chmod(0o755)
    path = f"{tmp_path / 'none'}:{first}:{second}"
    async with running(StdioParameters(command="srv", env={"PATH": path}, bind_to_host=bind)) as t:
        assert await t.receive() == b"second"
    # Nothing runnable: the first error that was not "not found" is the one reported.
    only_first = StdioParameters(command="srv", env={"PATH": str(first)}, bind_to_host=bind)
    with pytest.raises(ConnectError, match=r"\[Errno 13\] Permission denied: 'srv'"):
        async with running(only_first):
            pytest.fail("the transport must not open")


async def test_server_gets_default_signals_and_only_its_standard_streams() -> None:
    show = "import os; print(sorted(os.listdir('/proc/self/fd')))"
    async with running(StdioParameters(command=sys.executable, args=("-c", show))) as t:
        # Python's own listing of the directory holds one descriptor: 3.
        assert await t.receive() == b"['0', '1', '2', '3']"

    # The signal mask and the ignored signals are those a server started by subprocess gets:
    # nothing blocked, Python's own SIGPIPE and SIGXFSZ back to default, and what the host
    # itself had ignored when it started still ignored, as across any exec (make, for one,
    # starts its commands with signals 32 and 33 ignored). Those two belong to the C library
    # (no program can handle, ignore or block them through it) and are left out.
    def masks(status: bytes) -> dict[str, int]:
        found = {}
        for line in status.decode().splitlines():
            name, _, mask = line.partition(":\t")
            found[name] = int(mask, 16) & ~(0b11 << 31)
        return found

    argv = ("grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status")
    async with running(StdioParameters(command=argv[0], args=argv[1:])) as t:
        launched = masks(b"\n".join([await t.receive(), await t.receive()]))
    direct = masks((await trio.run_process(argv, capture_stdout=True)).stdout)
    assert launched == direct
    assert launched["SigBlk"] == 0
    assert not launched["SigIgn"] & (1 << (signal.SIGPIPE - 1) | 1 << (signal.SIGXFSZ - 1))


# --------------------------------------------------------------------------- giving up


async def test_server_given_up_by_the_host_is_killed_and_reaped() -> None:
    tag = f"--tag-{os.getpid()}-given-up"
    launch = await _launcher.launch(
        [sys.executable, "-c", "import time; time.sleep(60)", tag], dict(os.environ), None
    )
    said = b""
    while not said.endswith(b"\n"):
        said += await launch.start.receive_some(64)
    pid = int(said)
    started = start_time(pid)
    # Close the host's side of everything without a word: the launcher takes the end of the
    # reap socket as "nobody wants it".
    launch.process.close()
    for stream in (launch.stdin, launch.stdout, launch.stderr, launch.status, launch.start):
        await stream.aclose()
    await wait_until(lambda: reaped(pid, started))
    assert children_of(the_launcher()) == []


async def test_start_cancelled_after_the_request_leaves_nothing_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tag = f"--tag-{os.getpid()}-cancelled"
    real_launch = _launcher.launch

    async def launch_then_cancel(*args: Any) -> _launcher.Launch:
        launch = await real_launch(*args)
        scope.cancel()  # the server starts, but the host stops waiting for "ok"
        return launch

    monkeypatch.setattr(_launcher, "launch", launch_then_cancel)
    params = StdioParameters(command=sys.executable, args=("-c", "input()", tag))
    with trio.CancelScope() as scope:
        async with open_stdio_transport(params):
            pytest.fail("the transport must not open")
    assert scope.cancelled_caught
    await wait_until(lambda: tagged(tag) == [])
    await wait_until(lambda: children_of(the_launcher()) == [])


# --------------------------------------------------------------------------- fork


def test_forked_host_gets_a_launcher_of_its_own() -> None:
    async def start_one() -> tuple[int, int]:
        async with running(peer()) as t:
            ids = await ask(t, {"peer": "pid"})
            return ids["ppid"], t.pid

    parent_launcher, _ = trio.run(start_one)
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the forked child
        try:
            launcher, _ = trio.run(start_one)
            own = proc_stat(launcher)
            os.write(write_end, json.dumps([launcher, own[1] if own else None]).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as report:
        child_launcher, its_parent = json.loads(report.read())
    assert os.waitpid(child, 0)[1] == 0
    assert child_launcher != parent_launcher
    assert its_parent == child
    assert launcher_pids() == [parent_launcher]


def test_launcher_started_ahead_is_the_one_servers_get(fresh_launcher: None) -> None:
    assert launcher_pids() == []
    _launcher.start_launcher()
    (launcher,) = launcher_pids()
    _launcher.start_launcher()  # already running: the same one
    assert launcher_pids() == [launcher]

    async def parent_of_a_server() -> int:
        async with running(peer()) as t:
            ppid: int = (await ask(t, {"peer": "pid"}))["ppid"]
            return ppid

    assert trio.run(parent_of_a_server) == launcher


async def test_transport_over_a_new_launcher_after_shutdown(fresh_launcher: None) -> None:
    async with running(peer()) as t:
        first = (await ask(t, {"peer": "pid"}))["ppid"]
    _launcher.shutdown_launcher()
    assert launcher_pids() == []
    async with running(peer()) as t:
        second = (await ask(t, {"peer": "pid"}))["ppid"]
    assert first != second


_EXIT_SCRIPT = """
import sys
from trio_mcp.transports.stdio import _launcher
_launcher.start_launcher()
print(_launcher._current.pid, flush=True)
"""


def test_the_launcher_is_reaped_before_the_host_exits() -> None:
    # A host that leaves without shutting the launcher down: the exit hook ends and reaps it,
    # so the host leaves no process behind and Python has nothing to warn about at exit.
    done = subprocess.run(
        [sys.executable, "-X", "dev", "-c", _EXIT_SCRIPT],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    launcher = int(done.stdout)
    assert proc_stat(launcher) is None  # gone, and reaped by the host, not by init later
    assert "ResourceWarning" not in done.stderr, done.stderr


def test_a_launcher_that_does_not_end_is_killed_after_the_grace(fresh_launcher: None) -> None:
    _launcher.start_launcher()
    (launcher,) = launcher_pids()
    os.kill(launcher, signal.SIGSTOP)  # it cannot see its socket end
    _launcher.shutdown_launcher(grace=0.05)
    assert proc_stat(launcher) is None
    assert launcher_pids() == []
