"""The stdio transport, against real processes (``stdio_peer.py``) and the real clock.

Process checks read ``/proc/<pid>/stat`` and compare the start time, so a recycled pid is never
mistaken for the process under test. "Reaped" means the process is gone from /proc; "dead" also
accepts a zombie that belongs to another parent (an orphan waiting for init).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import stat
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from trio_mcp.protocol._errors import (
    ConnectError,
    FrameTooLarge,
    LocalProtocolError,
    McpTransportConfigError,
    TransportClosed,
)
from trio_mcp.protocol._framing import DEFAULT_MAX_FRAME_BYTES
from trio_mcp.transports._base import Transport, TransportInfo
from trio_mcp.transports.stdio import _launcher, _reaper
from trio_mcp.transports.stdio._stdio import (
    _READ_CHUNK,
    _STDERR_LINE_LIMIT,
    DEFAULT_ENV_ALLOWLIST,
    StdioParameters,
    StdioTransport,
    _StderrTail,
    child_environment,
    open_stdio_transport,
)

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX process groups")

HERE = Path(__file__).parent
PEER = HERE / "stdio_peer.py"
HOST = HERE / "stdio_host.py"
HAVE_PROC = Path("/proc/self/stat").exists()
needs_proc = pytest.mark.skipif(not HAVE_PROC, reason="needs /proc")
needs_launcher = pytest.mark.skipif(not _launcher.SUPPORTED, reason="launcher is Linux-only")

# Every test that starts a server runs once under the launcher and once as a direct child.
MODES = [
    pytest.param(True, id="launcher", marks=needs_launcher),
    pytest.param(False, id="direct"),
]


def peer(*peer_args: str, **overrides: Any) -> StdioParameters:
    settings: dict[str, Any] = {
        "command": sys.executable,
        "args": (str(PEER), *peer_args),
        "close_grace": 0.3,
        "term_grace": 0.3,
        "kill_grace": 3.0,
    }
    settings.update(overrides)
    return StdioParameters(**settings)


@asynccontextmanager
async def running(params: StdioParameters) -> AsyncIterator[StdioTransport]:
    with trio.fail_after(10):
        async with open_stdio_transport(params) as transport:
            yield transport


async def ask(transport: StdioTransport, command: dict[str, Any]) -> Any:
    await transport.send(json.dumps(command).encode())
    return json.loads(await transport.receive())


# --------------------------------------------------------------------------- /proc helpers


def proc_stat(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, start time) of ``pid``, or None if it does not exist."""
    try:
        data = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = data[data.rindex(")") + 2 :].split()
    return fields[0], int(fields[1]), int(fields[19])


def start_time(pid: int) -> int:
    found = proc_stat(pid)
    assert found is not None, f"process {pid} does not exist"
    return found[2]


def reaped(pid: int, started: int) -> bool:
    found = proc_stat(pid)
    return found is None or found[2] != started


def dead(pid: int, started: int) -> bool:
    found = proc_stat(pid)
    return found is None or found[2] != started or found[0] in "ZX"


async def pause(t: StdioTransport) -> None:
    """Have the peer stop reading its stdin until :func:`resume`: what is sent meanwhile stays
    in the pipe and the outbox, for as long as the test takes."""
    await t.send(b'{"peer":"pause"}')
    assert await t.receive() == b'{"paused":true}'


def resume(t: StdioTransport) -> None:
    """Have a paused peer read its stdin again."""
    os.kill(t.pid, signal.SIGUSR1)


async def wait_until(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    with trio.fail_after(timeout):
        while not predicate():  # noqa: ASYNC110 - /proc offers nothing to wait on
            await trio.sleep(0.02)


def launcher_pids() -> list[int]:
    """The shared launchers that are children of this process (at most one runs)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        info = proc_stat(int(entry))
        script = cmdline.split(b"\0")[3:4] == [os.fsencode(Path(_reaper.__file__).resolve())]
        if script and info is not None and info[1] == os.getpid() and info[0] not in "ZX":
            found.append(int(entry))
    return found


@pytest.fixture
def fresh_launcher() -> Iterator[None]:
    """A test that starts, breaks or kills the shared launcher gets one of its own."""
    _launcher.shutdown_launcher()
    yield
    _launcher.shutdown_launcher()


# --------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("bind", MODES)
async def test_round_trip(bind: bool) -> None:
    async with running(peer(bind_to_host=bind)) as t:
        for frame in (b'{"jsonrpc":"2.0","id":1,"method":"ping"}', "é ✓ 日本".encode(), b"x"):
            await t.send(frame)
            assert await t.receive() == frame
        assert isinstance(t, Transport)
        assert t.info == TransportInfo(kind="stdio", detail=f"{sys.executable} (pid {t.pid})")
        assert t.bound_to_host is bind
        stats = t.statistics()
        assert (stats.frames_sent, stats.frames_received, stats.pid) == (3, 3, t.pid)
        assert stats.bound_to_host is bind
        assert t.returncode is None


@pytest.mark.parametrize("bind", MODES)
async def test_server_runs_in_its_own_process_group(bind: bool) -> None:
    async with running(peer(bind_to_host=bind)) as t:
        ids = await ask(t, {"peer": "pid"})
        assert ids["pid"] == t.pid
        assert ids["pgid"] == t.pgid == t.statistics().pgid
        assert os.getsid(t.pid) == t.pgid == t.pid != os.getsid(0)
        if bind:  # the shared launcher, a child of this process, is the server's parent
            launcher = proc_stat(ids["ppid"])
            assert launcher is not None
            assert launcher[1] == os.getpid() != ids["ppid"]
        else:
            assert ids["ppid"] == os.getpid()


async def test_a_wake_with_nothing_to_read_waits_again(monkeypatch: pytest.MonkeyPatch) -> None:
    # The reader waits for stdout when its last read was short (the pipe is most likely
    # empty), then reads. A wake that finds the pipe empty after all (the writer's look after
    # its write took the answer meanwhile) must go back to waiting, not end the connection.
    real_wait = trio.lowlevel.wait_readable
    armed: list[int] = []  # the stdout fd, once the wake should come without data
    woken_empty = 0

    async def wait_readable(fd: Any) -> None:
        nonlocal woken_empty
        if armed and fd == armed[0]:
            armed.clear()
            woken_empty += 1
            await trio.lowlevel.checkpoint()  # woken at once: nothing on stdout yet
            return
        await real_wait(fd)

    monkeypatch.setattr(trio.lowlevel, "wait_readable", wait_readable)
    async with running(peer()) as t:
        await t.send(b'{"n":1}')
        assert await t.receive() == b'{"n":1}'
        await trio.testing.wait_all_tasks_blocked()  # the reader waits for stdout again
        assert t._stdout_fd is not None
        armed.append(t._stdout_fd)
        await t.send(b'{"n":2}')
        assert await t.receive() == b'{"n":2}'
        await t.send(b'{"n":3}')
        assert await t.receive() == b'{"n":3}'
        assert t.statistics().frames_received == 3
    assert woken_empty == 1


async def test_many_frames_keep_their_order() -> None:
    count = 3000
    received: list[bytes] = []

    async with running(peer()) as t:

        async def receive_all() -> None:
            for _ in range(count):
                received.append(await t.receive())

        async with trio.open_nursery() as nursery:
            nursery.start_soon(receive_all)
            for i in range(count):
                await t.send(b'{"n":%d}' % i)
    assert received == [b'{"n":%d}' % i for i in range(count)]


async def test_concurrent_senders_write_whole_frames() -> None:
    # Frames bigger than the pipe buffer force partial writes: the senders only queue their
    # frames, and the one writer writes each whole, so none interleave.
    senders, per_sender, size = 8, 6, 200_000
    expected = {
        (b"%02d-%02d:" % (s, i)) + bytes([97 + (s + i) % 26]) * size
        for s in range(senders)
        for i in range(per_sender)
    }
    received: set[bytes] = set()

    async with running(peer()) as t:

        async def sender(s: int) -> None:
            for i in range(per_sender):
                await t.send((b"%02d-%02d:" % (s, i)) + bytes([97 + (s + i) % 26]) * size)

        async def receiver() -> None:
            for _ in range(len(expected)):
                received.add(await t.receive())

        async with trio.open_nursery() as nursery:
            nursery.start_soon(receiver)
            for s in range(senders):
                nursery.start_soon(sender, s)
    assert received == expected


async def test_send_refuses_a_frame_with_a_newline_and_stays_usable() -> None:
    async with running(peer()) as t:
        with pytest.raises(LocalProtocolError, match="must not contain a newline"):
            await t.send(b'{"a":\n1}')
        await t.send(b"still fine")
        assert await t.receive() == b"still fine"
        assert t.statistics().frames_sent == 1


async def test_unterminated_last_line_is_delivered() -> None:
    async with running(peer()) as t:
        await t.send(b'{"peer":"partial"}')
        assert await t.receive() == b"partial"
        with pytest.raises(TransportClosed) as info:
            await t.receive()
        assert "exited with code 0" in str(info.value)


# --------------------------------------------------------------------------- environment, cwd


def test_child_environment_is_allow_list_plus_own_env() -> None:
    host = {"PATH": "/bin", "HOME": "/home/u", "GITHUB_TOKEN": "t", "LANG": "C", "OTHER": "o"}
    params = StdioParameters(command="x", env={"LANG": "C.UTF-8", "API_KEY": "k"})
    assert child_environment(params, host) == {
        "PATH": "/bin",
        "HOME": "/home/u",
        "LANG": "C.UTF-8",
        "API_KEY": "k",
    }
    narrow = StdioParameters(command="x", env_allowlist=("OTHER",))
    assert child_environment(narrow, host) == {"OTHER": "o"}


def test_default_allow_list_has_no_secret_looking_names() -> None:
    secretish = re.compile(r"TOKEN|KEY|SECRET|PASS|CRED|AUTH|PROXY|SOCK|SESSION|COOKIE")
    assert [name for name in DEFAULT_ENV_ALLOWLIST if secretish.search(name)] == []
    assert list(DEFAULT_ENV_ALLOWLIST) == sorted(DEFAULT_ENV_ALLOWLIST)
    assert {"PATH", "HOME", "USER", "LANG", "TZ", "TMPDIR", "SYSTEMROOT"} <= set(
        DEFAULT_ENV_ALLOWLIST
    )
    assert "XDG_RUNTIME_DIR" not in DEFAULT_ENV_ALLOWLIST


@needs_proc
@pytest.mark.parametrize("bind", MODES)
@pytest.mark.parametrize("lc_ctype", [None, "C"])
async def test_server_environment_is_exactly_the_allowed_one(
    bind: bool, lc_ctype: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A C locale makes Python coerce LC_CTYPE (PEP 538) in the launcher: it must not leak.
    monkeypatch.setenv("TRIO_MCP_TEST_SECRET", "hunter2")
    monkeypatch.setenv("LANG", "C")
    monkeypatch.delenv("LC_ALL", raising=False)
    if lc_ctype is None:
        monkeypatch.delenv("LC_CTYPE", raising=False)
    else:
        monkeypatch.setenv("LC_CTYPE", lc_ctype)
    params = peer(bind_to_host=bind, env={"SERVER_OWN": "1", "LANG": "C.UTF-8"})
    async with running(params) as t:
        reply = await ask(t, {"peer": "env"})
    initial = reply["initial"]
    assert initial == child_environment(params)
    assert "TRIO_MCP_TEST_SECRET" not in initial
    assert initial["PATH"] == os.environ["PATH"]
    assert initial["SERVER_OWN"] == "1"
    assert initial["LANG"] == "C.UTF-8"
    assert initial.get("LC_CTYPE") == lc_ctype


@pytest.fixture
def real_tmp_path(tmp_path: Path) -> Path:
    return tmp_path.resolve()


@pytest.mark.parametrize("bind", MODES)
async def test_cwd_is_honoured(bind: bool, real_tmp_path: Path) -> None:
    async with running(peer(bind_to_host=bind, cwd=str(real_tmp_path))) as t:
        reply = await ask(t, {"peer": "cwd"})
    assert reply == {"cwd": str(real_tmp_path)}


@pytest.mark.parametrize("bind", MODES)
async def test_missing_command_is_a_connect_error(bind: bool) -> None:
    params = StdioParameters(command="trio-mcp-no-such-command", bind_to_host=bind)
    with pytest.raises(ConnectError) as info:
        async with running(params):
            pytest.fail("the transport must not open")
    message = str(info.value)
    assert message.startswith("could not start stdio server 'trio-mcp-no-such-command': ")
    assert "[Errno 2] No such file or directory: 'trio-mcp-no-such-command'" in message
    assert isinstance(info.value.__cause__, FileNotFoundError)


@pytest.mark.parametrize("bind", MODES)
async def test_missing_cwd_is_a_connect_error(bind: bool, tmp_path: Path) -> None:
    missing = str(tmp_path / "nope")
    params = StdioParameters(command=sys.executable, cwd=missing, bind_to_host=bind)
    with pytest.raises(ConnectError) as info:
        async with running(params):
            pytest.fail("the transport must not open")
    message = str(info.value)
    assert message.startswith(f"could not start stdio server {sys.executable!r} in directory ")
    assert f"No such file or directory: {missing!r}" in message


@pytest.mark.skipif(os.geteuid() == 0, reason="root may execute anything")
@pytest.mark.parametrize("bind", MODES)
async def test_command_without_permission_is_a_connect_error(bind: bool, tmp_path: Path) -> None:
    script = tmp_path / "server.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(stat.S_IRUSR)
    with pytest.raises(ConnectError, match=r"\[Errno 13\] Permission denied"):
        async with running(StdioParameters(command=str(script), bind_to_host=bind)):
            pytest.fail("the transport must not open")


@pytest.mark.skipif(os.geteuid() != 0, reason="covered by the permission test")
@pytest.mark.parametrize("bind", MODES)
async def test_directory_as_command_is_a_connect_error(bind: bool, tmp_path: Path) -> None:
    with pytest.raises(ConnectError, match=r"\[Errno 13\] Permission denied"):
        async with running(StdioParameters(command=str(tmp_path), bind_to_host=bind)):
            pytest.fail("the transport must not open")


# --------------------------------------------------------------------------- parameters


def test_parameters_list_every_problem() -> None:
    with pytest.raises(McpTransportConfigError) as info:
        StdioParameters(
            command="",
            env={"A=B": "1", "OK": "a\0b"},
            max_frame_bytes=0,
            stderr_tail_lines=-1,
            close_grace=float("inf"),
            kill_grace=-1,
        )
    assert info.value.problems == (
        ("command", "must be a non-empty string without NUL bytes"),
        ("env['A=B']", "a name must be non-empty, without '=' or NUL"),
        ("env['OK']", "the value must be a string without NUL bytes"),
        ("max_frame_bytes", "must be a positive integer, got 0"),
        ("stderr_tail_lines", "must be an integer >= 0, got -1"),
        ("close_grace", "must be a finite number of seconds >= 0, got inf"),
        ("kill_grace", "must be a finite number of seconds >= 0, got -1"),
    )
    assert str(info.value).startswith("invalid stdio server settings: command: must be")


def test_parameters_refuse_args_given_as_one_string() -> None:
    with pytest.raises(McpTransportConfigError, match="split it into separate arguments"):
        StdioParameters(command="npx", args="-y server")


def test_parameters_freeze_and_redact() -> None:
    env = {"API_KEY": "sk-very-secret"}
    params = StdioParameters(command="npx", args=["-y", "srv"], env=env)
    env["API_KEY"] = "changed"
    assert params.args == ("-y", "srv")
    assert params.env == {"API_KEY": "sk-very-secret"}
    assert "sk-very-secret" not in repr(params)
    assert "'API_KEY': '***'" in repr(params)
    assert hash(params) == hash(StdioParameters(command="npx", args=("-y", "srv")))
    assert params.close_grace == params.term_grace == params.kill_grace == 2.0
    assert params.stderr_tail_lines == 50
    assert params.max_frame_bytes == DEFAULT_MAX_FRAME_BYTES


# --------------------------------------------------------------------------- stderr


async def test_stderr_flood_does_not_stall_stdout() -> None:
    flood = 6 * 1024 * 1024  # about 100 times the pipe buffer
    async with running(peer()) as t:
        assert await ask(t, {"peer": "flood", "bytes": flood}) == {"flooded": flood}
        await t.send(b"after the flood")
        assert await t.receive() == b"after the flood"
        await t.send(b'{"peer":"exit","code":0}')
        with pytest.raises(TransportClosed, match="exited with code 0"):
            await t.receive()
        tail = t.stderr_tail()
        stats = t.statistics()
    assert len(tail) == 50
    assert tail[-1] == "flood end"
    assert re.fullmatch(r"flood line \d{8} e{100}", tail[-2])
    assert stats.stderr_bytes >= flood
    assert stats.stderr_lines == len(tail) + int(tail[0].split()[2])


async def test_crash_reports_exit_code_and_stderr_tail() -> None:
    params = peer("--stderr", "starting", stderr_tail_lines=3)
    async with running(params) as t:
        await t.send(json.dumps({"peer": "exit", "code": 3, "stderr": ["a", "b", "boom"]}).encode())
        with pytest.raises(TransportClosed) as info:
            await t.receive()
        assert t.returncode == 3
        assert t.stderr_tail() == ("a", "b", "boom")
        assert t.statistics().stderr_lines == 4
        assert str(info.value) == (
            f"stdio server {sys.executable!r} (pid {t.pid}) exited with code 3; "
            "its last stderr lines:\n  | a\n  | b\n  | boom"
        )
        with pytest.raises(TransportClosed, match="exited with code 3"):
            await t.receive()
        with pytest.raises(TransportClosed) as late:
            await t.send(b"too late")
        assert str(late.value) == str(info.value)


@needs_proc
@pytest.mark.parametrize("bind", MODES)
async def test_killed_server_reports_the_signal_and_is_reaped(bind: bool) -> None:
    async with running(peer(bind_to_host=bind)) as t:
        started = start_time(t.pid)
        await t.send(b'{"peer":"signal","signum":9}')
        with pytest.raises(TransportClosed) as info:
            await t.receive()
        assert "was killed by signal 9 (SIGKILL); it wrote nothing to stderr" in str(info.value)
        assert t.returncode == -9
        # Its end is reported while it is a zombie still (the launcher keeps its group id
        # until this process has read the status); it is reaped soon after, without aclose().
        assert dead(t.pid, started)
        await wait_until(lambda: reaped(t.pid, started))
    assert t.statistics().signals_sent == ()


async def test_long_stderr_line_is_cut_in_the_tail() -> None:
    async with running(peer("--stderr", "x" * 10_000, "--exit-at-start", "0")) as t:
        with pytest.raises(TransportClosed, match="exited with code 0"):
            await t.receive()
    cut = 10_000 - _STDERR_LINE_LIMIT
    assert t.stderr_tail() == ("x" * _STDERR_LINE_LIMIT + f" [... {cut} more bytes cut]",)


def test_stderr_tail_cuts_long_lines_and_decodes_leniently() -> None:
    seen: list[str] = []
    tail = _StderrTail(max_lines=3, line_limit=10, on_line=seen.append)
    tail.feed(b"0123456789abcdef\r\nbad \xff\xfe byte\nwin\r\n")
    tail.feed(b"a")
    tail.feed(b"b")
    assert seen == [
        "0123456789 [... 6 more bytes cut]",
        "bad \ufffd\ufffd byt [... 1 more byte cut]",
        "win",
    ]
    tail.feed_eof()
    tail.feed_eof()
    assert seen[-1] == "ab"
    assert list(tail.lines) == seen[-3:]
    assert (tail.line_count, tail.byte_count) == (4, 37)


@given(
    text=st.lists(st.text(alphabet="ab\n", max_size=30), max_size=8).map("".join),
    cuts=st.lists(st.integers(min_value=0, max_value=300), max_size=6),
)
def test_stderr_tail_does_not_depend_on_chunking(text: str, cuts: list[int]) -> None:
    data = text.encode()
    whole = _StderrTail(max_lines=1000, line_limit=7, on_line=None)
    whole.feed(data)
    whole.feed_eof()
    pieces = _StderrTail(max_lines=1000, line_limit=7, on_line=None)
    bounds = [0, *sorted(min(c, len(data)) for c in cuts), len(data)]
    for start, stop in itertools.pairwise(bounds):
        pieces.feed(data[start:stop])
    pieces.feed_eof()
    assert list(pieces.lines) == list(whole.lines)
    expected = text.split("\n")
    if expected[-1] == "":
        expected.pop()
    assert [line.split(" [...")[0] for line in whole.lines] == [e[:7] for e in expected]


# --------------------------------------------------------------------------- oversized frames


async def test_oversized_line_is_refused_with_bounded_memory() -> None:
    size = 20 * 1024 * 1024
    async with running(peer()) as t:
        await t.send(b"before")
        await t.send(json.dumps({"peer": "big", "bytes": size}).encode())
        assert await t.receive() == b"before"
        with pytest.raises(FrameTooLarge) as info:
            await t.receive()
        assert info.value.limit == DEFAULT_MAX_FRAME_BYTES
        assert str(info.value) == (
            f"stdio server {sys.executable!r} (pid {t.pid}) sent a message (one line) longer "
            "than 16777216 bytes, so the connection was closed. If the server legitimately "
            "sends bigger messages, raise max_frame_bytes (now 16777216) in its config"
        )
        assert isinstance(info.value.__cause__, FrameTooLarge)
        stats = t.statistics()
        assert stats.stdout_peak_buffered > DEFAULT_MAX_FRAME_BYTES
        assert stats.stdout_peak_buffered <= DEFAULT_MAX_FRAME_BYTES + _READ_CHUNK
        assert stats.stdout_buffered <= _READ_CHUNK
        with pytest.raises(FrameTooLarge) as again:  # the end, raised again
            await t.receive()
        assert again.value is info.value
        given_up = "was given up after it sent a message over 16777216 bytes"
        with pytest.raises(TransportClosed, match=given_up):
            await t.send(b"more")
        with pytest.raises(TransportClosed, match=given_up):
            t.send_nowait(b"more")


async def test_custom_frame_limit() -> None:
    async with running(peer(max_frame_bytes=1000)) as t:
        await t.send(b"y" * 1000)
        assert await t.receive() == b"y" * 1000
        await t.send(b"z" * 1001)
        with pytest.raises(FrameTooLarge) as info:
            await t.receive()
        assert info.value.limit == 1000


# --------------------------------------------------------------------------- shutdown


@needs_proc
@pytest.mark.parametrize("bind", MODES)
async def test_server_exiting_on_stdin_eof_needs_no_signal(bind: bool) -> None:
    async with running(peer(bind_to_host=bind)) as t:
        started = start_time(t.pid)
    assert t.returncode == 0
    assert t.statistics().signals_sent == ()
    assert reaped(t.pid, started)


@needs_proc
@pytest.mark.parametrize("bind", MODES)
async def test_lingering_server_gets_sigterm(bind: bool) -> None:
    async with running(peer("--linger", bind_to_host=bind)) as t:
        started = start_time(t.pid)
    assert t.statistics().signals_sent == ("SIGTERM",)
    assert t.returncode == -signal.SIGTERM
    assert reaped(t.pid, started)


@needs_proc
@pytest.mark.parametrize("bind", MODES)
async def test_server_ignoring_sigterm_gets_sigkill(bind: bool) -> None:
    async with running(peer("--linger", "--ignore-sigterm", bind_to_host=bind)) as t:
        started = start_time(t.pid)
    assert t.statistics().signals_sent == ("SIGTERM", "SIGKILL")
    assert t.returncode == -signal.SIGKILL
    assert reaped(t.pid, started)


@needs_proc
@pytest.mark.parametrize("bind", MODES)
async def test_grandchild_is_killed_by_aclose(bind: bool) -> None:
    async with running(peer(bind_to_host=bind)) as t:
        grandchild = (await ask(t, {"peer": "spawn"}))["pid"]
        gc_started = start_time(grandchild)
        assert os.getpgid(grandchild) == t.pgid
        started = start_time(t.pid)
        await t.aclose()
        assert t.returncode == 0
        assert reaped(t.pid, started)
        await wait_until(lambda: dead(grandchild, gc_started))


@needs_proc
@pytest.mark.parametrize("bind", MODES)
async def test_group_dies_with_the_server(bind: bool) -> None:
    # The grandchild shares stdout: stdout only ends because the group is swept when the
    # server exits, and it is swept without any aclose().
    async with running(peer(bind_to_host=bind)) as t:
        grandchild = (await ask(t, {"peer": "spawn"}))["pid"]
        gc_started = start_time(grandchild)
        await t.send(b'{"peer":"exit","code":5}')
        with pytest.raises(TransportClosed, match="exited with code 5"):
            await t.receive()
        await wait_until(lambda: dead(grandchild, gc_started))
    assert t.statistics().signals_sent == ()


async def test_server_closing_stdout_while_running() -> None:
    async with running(peer()) as t:
        await t.send(b'{"peer":"close-stdout"}')
        with pytest.raises(TransportClosed) as info:
            await t.receive()
        assert "closed its stdout and is still running" in str(info.value)
        assert t.statistics().returncode is None
    assert t.returncode == 0
    assert t.statistics().signals_sent == ()


async def test_server_closing_stdin_fails_sends() -> None:
    async with running(peer()) as t:
        assert await ask(t, {"peer": "close-stdin"}) == {"stdin": "closed"}
        await t.send(b"nobody reads this")  # into the outbox: the writer finds the pipe closed

        def refused() -> bool:
            try:
                t.send_nowait(b"probe")
            except TransportClosed:
                return True
            return False

        await wait_until(refused)
        broken = (
            f"sending to stdio server {sys.executable!r} (pid {t.pid}) failed: it stopped "
            "reading its stdin"
        )
        with pytest.raises(TransportClosed, match=re.escape(broken)) as info:
            await t.send(b"nor this")
        assert "the messages of that write may or may not have arrived" in str(info.value)
        assert t.statistics().frames_sent == 1
    assert t.statistics().signals_sent == ("SIGTERM",)


async def test_aclose_is_idempotent_and_final() -> None:
    async with running(peer()) as t:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(t.aclose)
            nursery.start_soon(t.aclose)
        await t.aclose()
        with pytest.raises(TransportClosed, match="was closed; open a new one"):
            await t.send(b"x")
        with pytest.raises(TransportClosed, match="was closed; open a new one"):
            await t.receive()
    assert t.returncode == 0


async def test_aclose_wakes_a_blocked_receiver() -> None:
    async with running(peer()) as t:
        got: list[BaseException] = []

        async def blocked() -> None:
            try:
                await t.receive()
            except TransportClosed as exc:
                got.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(blocked)
            await trio.testing.wait_all_tasks_blocked()
            await t.aclose()
    assert len(got) == 1
    assert "was closed; open a new one" in str(got[0])


# --------------------------------------------------------------------------- cancellation


async def test_cancelled_receive_leaves_the_transport_usable() -> None:
    async with running(peer()) as t:
        with trio.move_on_after(0.05) as scope:
            await t.receive()
        assert scope.cancelled_caught
        await t.send(b"next")
        assert await t.receive() == b"next"


async def test_a_send_cancelled_while_waiting_for_room_sends_nothing() -> None:
    # The caller never writes (the writer does): a send cancelled while the outbox is full has
    # put nothing, and the transport goes on with the frames before and after it.
    async with running(peer()) as t:
        await pause(t)
        frame = b"w" * 1000
        queued = 0
        for _ in range(2):  # fill; let the writer take a batch and block; fill again
            while True:
                try:
                    t.send_nowait(frame)
                except trio.WouldBlock:
                    break
                queued += 1
            await trio.testing.wait_all_tasks_blocked()
        async with trio.open_nursery() as nursery:
            scope = trio.CancelScope()

            async def cancelled_send() -> None:
                with scope:
                    await t.send(b"c" * len(frame))  # as big as the others: no room

            nursery.start_soon(cancelled_send)
            await trio.testing.wait_all_tasks_blocked()
            scope.cancel()
        assert scope.cancelled_caught
        resume(t)
        await t.send(b"after")
        echoed = [await t.receive() for _ in range(queued + 1)]
        assert echoed == [frame] * queued + [b"after"]
    assert t.statistics().signals_sent == ()


@needs_proc
async def test_leaving_the_block_while_the_server_is_busy() -> None:
    async with running(peer("--ignore-sigterm")) as t:
        await t.send(b'{"peer":"sleep","seconds":30}')
        await wait_until(lambda: t.statistics().frames_sent == 1)  # written, not just queued
        started = start_time(t.pid)
    assert t.statistics().signals_sent == ("SIGTERM", "SIGKILL")
    assert reaped(t.pid, started)


@needs_proc
@pytest.mark.parametrize("bind", MODES)
async def test_outer_cancellation_still_shuts_down(bind: bool) -> None:
    started: int | None = None
    transport: StdioTransport | None = None
    with trio.move_on_after(0.5) as scope:
        async with open_stdio_transport(
            peer("--linger", "--ignore-sigterm", bind_to_host=bind)
        ) as t:
            transport = t
            started = start_time(t.pid)
            await trio.sleep_forever()
    assert scope.cancelled_caught
    assert transport is not None and started is not None
    assert transport.statistics().signals_sent == ("SIGTERM", "SIGKILL")
    assert transport.returncode == -signal.SIGKILL
    assert reaped(transport.pid, started)


async def test_exception_in_the_block_comes_out_unwrapped() -> None:
    transports: list[StdioTransport] = []

    async def body() -> None:
        async with running(peer()) as t:
            transports.append(t)
            await t.send(b"x")
            raise KeyError("from the body")

    with pytest.raises(KeyError, match="from the body"):
        await body()
    assert transports[0].returncode == 0


# --------------------------------------------------------------------------- host death


@needs_launcher
@needs_proc
async def test_server_and_grandchild_die_with_a_sigkilled_host() -> None:
    host = await trio.lowlevel.open_process(
        [sys.executable, str(HOST)], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL
    )
    try:
        assert host.stdout is not None
        line = b""
        with trio.fail_after(10):
            while not line.endswith(b"\n"):
                chunk = await host.stdout.receive_some(100)
                assert chunk, "the host ended before printing its pids"
                line += chunk
        server, group, grandchild = (int(n) for n in line.split())
        started = {pid: start_time(pid) for pid in (server, group, grandchild)}
        host.send_signal(signal.SIGKILL)
        assert await host.wait() == -signal.SIGKILL
        await wait_until(lambda: all(dead(pid, s) for pid, s in started.items()), timeout=10)
    finally:
        if host.returncode is None:
            host.kill()
            await host.wait()
        if host.stdout is not None:
            await host.stdout.aclose()


@needs_launcher
@needs_proc
def test_launcher_survives_the_exit_of_the_thread_that_started_it(fresh_launcher: None) -> None:
    # PR_SET_PDEATHSIG fires when the *thread* that started the launcher exits, and trio runs
    # in any thread. The launcher must tell this apart from the host's death.
    pids: list[tuple[int, int]] = []

    async def start_one() -> None:
        async with running(peer()) as t:
            pids.append((t.pid, start_time(t.pid)))

    thread = threading.Thread(target=trio.run, args=(start_one,))
    thread.start()
    thread.join()
    (launcher,) = launcher_pids()
    started = start_time(launcher)
    threading.Event().wait(0.3)  # let a (wrong) kill land
    assert not dead(launcher, started)

    async def use_it() -> None:
        async with running(peer()) as t:
            assert await ask(t, {"peer": "pid"}) == {"pid": t.pid, "pgid": t.pid, "ppid": launcher}

    trio.run(use_it)
    assert all(reaped(pid, at) for pid, at in pids)


@needs_launcher
async def test_launcher_that_dies_early_is_a_connect_error(
    fresh_launcher: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(control_fd: int, host_pid: int) -> list[str]:
        del control_fd, host_pid
        return [sys.executable, "-c", "import sys; sys.exit(3)"]

    monkeypatch.setattr(_launcher, "launcher_argv", broken)
    with pytest.raises(ConnectError) as info:
        async with running(peer()):
            pytest.fail("the transport must not open")
    assert re.fullmatch(
        rf"could not start stdio server {re.escape(repr(sys.executable))}: the launcher that "
        r"binds it to this process ended before starting it \(the shared launcher \(pid \d+\) "
        r"exited with code 3\); set bind_to_host=False to start the server directly",
        str(info.value),
    )


def test_launcher_rejects_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert _reaper.main(["1"]) == 2
    assert _reaper.main(["x", "2"]) == 2
    assert capsys.readouterr().err == "usage: _reaper.py CONTROL_FD HOST_PID\n" * 2


def test_launcher_argv_shape() -> None:
    argv = _launcher.launcher_argv(7, 42)
    assert argv[:3] == [sys.executable, "-I", "-S"]
    assert argv[3] == str(Path(_reaper.__file__).resolve())
    assert argv[4:] == ["7", "42"]
    with pytest.raises(ValueError, match=r"sys\.executable is empty"):
        _launcher.launcher_argv(7, 42, python="")
