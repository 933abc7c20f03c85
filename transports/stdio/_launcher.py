"""The host side of the shared launcher (:mod:`._reaper`): one launcher process per host process,
started on first use, that starts every stdio server bound to the host.

:func:`launch` hands the launcher one server to start and returns a :class:`Launch`: the host's
ends of the server's stdin, stdout and stderr, the start pipe (the server's pid, then whether it
could exec), the status pipe (``exit <code>`` or ``signal <n>``: the stdio transport reads it)
and a :class:`LaunchedServer`, which stands in for :class:`trio.Process`: ``pid``,
``returncode``, ``wait()``, ``kill()``.

The launcher is the servers' parent, not the host: it sweeps and reaps them. It reports each
exit on the server's *reap socket* too; :meth:`LaunchedServer.wait` reads that line, then shuts
down its side of the socket, which lets the launcher reap the server, and returns once the
launcher has closed the socket (the server is reaped). Until the line is read the server's group
id stays reserved, so the host may signal the group (``killpg``) as long as ``returncode`` is
None.

The launcher lives as long as this process (a host that forks gets a launcher of its own in the
child); it ends when the host ends, however the host ends. One that dies early is reaped and
replaced at the next :func:`launch`; the servers it started are then SIGKILLed by their
:meth:`LaunchedServer.wait`, which sees their reap socket end without a report.
"""

from __future__ import annotations

import array
import atexit
import contextlib
import marshal
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Final

import attrs
import trio

from . import _reaper

__all__ = [
    "SUPPORTED",
    "Launch",
    "LaunchedServer",
    "launch",
    "launcher_argv",
    "shutdown_launcher",
    "start_launcher",
]

#: True where the shared launcher works (Linux: it needs ``prctl(PR_SET_PDEATHSIG)``).
SUPPORTED: Final[bool] = sys.platform.startswith("linux")

_SCRIPT: Final = str(Path(_reaper.__file__).resolve())


def launcher_argv(control_fd: int, host_pid: int, python: str = sys.executable) -> list[str]:
    """The command line of the launcher process. Raises :class:`ValueError` when ``python`` is
    empty (an embedded interpreter without ``sys.executable``)."""
    if not python:
        raise ValueError("no Python interpreter to run the launcher with (sys.executable is empty)")
    return [python, "-I", "-S", _SCRIPT, str(control_fd), str(host_pid)]


class _Launcher:
    """The running launcher process and the host's end of its control socket."""

    def __init__(self) -> None:
        self.owner = os.getpid()
        host_end, launcher_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.process = subprocess.Popen(
                launcher_argv(launcher_end.fileno(), self.owner),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                pass_fds=(launcher_end.fileno(),),
                start_new_session=True,
                env={},
            )
        except BaseException:
            host_end.close()
            raise
        finally:
            launcher_end.close()
        host_end.setblocking(False)
        self.control = host_end

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        """Whether the launcher runs (reaps it when it has ended). Never blocks."""
        return self.process.poll() is None

    async def describe_end(self) -> str:
        """Why a request went unanswered: how the launcher ended (waits for that up to 1 s)."""
        try:
            code = await trio.to_thread.run_sync(partial(self.process.wait, timeout=1.0))
        except subprocess.TimeoutExpired:
            return f"the shared launcher (pid {self.pid}) closed the request unanswered"
        if code < 0:
            return f"the shared launcher (pid {self.pid}) was killed by signal {-code}"
        return f"the shared launcher (pid {self.pid}) exited with code {code}"

    async def send(self, data: bytes, fds: Sequence[int]) -> None:
        """Send one request (one message); waits while the socket is full. Raises OSError when
        the launcher is gone."""
        ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))]
        await trio.lowlevel.checkpoint_if_cancelled()
        while True:
            try:
                self.control.sendmsg([data], ancillary)
            except BlockingIOError:
                # Several tasks may wait here at once, and trio allows one waiter per fd: each
                # waits on a descriptor of its own for the same socket.
                fd = os.dup(self.control.fileno())
                try:
                    await trio.lowlevel.wait_writable(fd)
                finally:
                    trio.lowlevel.notify_closing(fd)
                    os.close(fd)
            else:
                return


_lock = threading.Lock()
_current: _Launcher | None = None
# Launchers given up on that may not have exited yet; polled (reaped) by every launch.
_retired: list[subprocess.Popen[bytes]] = []
# In a forked child: the parent's launchers.
_inherited: list[subprocess.Popen[bytes]] = []


def _shared() -> _Launcher:
    """The launcher of this process, started (or restarted) if needed."""
    global _current
    with _lock:
        _retired[:] = [process for process in _retired if process.poll() is None]
        current = _current
        if current is not None and current.owner == os.getpid() and current.alive():
            return current
        if current is not None and current.owner == os.getpid():
            _retire_locked(current)
        elif current is not None:  # a fork of the host that missed the at-fork hook
            current.control.close()
            _inherited.append(current.process)
        _current = _Launcher()
        return _current


def _retire(launcher: _Launcher) -> None:
    """Stop using ``launcher`` (it ended, or its socket failed); the next launch starts another."""
    with _lock:
        _retire_locked(launcher)


def _retire_locked(launcher: _Launcher) -> None:
    global _current
    if _current is launcher:
        _current = None
    launcher.control.close()  # a launcher that still runs takes this as the host's end
    _retired.append(launcher.process)  # reaped by a later _shared() once it has ended


def start_launcher() -> None:
    """Start the shared launcher now if it does not run yet (on Linux; a no-op elsewhere), so
    that the first stdio server does not wait for its start-up (about 10 ms of CPU, once per
    process). Never waits for the launcher to be ready. Raises OSError if it cannot be
    started."""
    if SUPPORTED and sys.executable:
        _shared()


def shutdown_launcher(grace: float | None = None) -> None:
    """End the shared launcher of this process, if there is one, and reap it: every server it
    still runs is SIGKILLed with its group. The next :func:`launch` starts a new launcher.

    For tests, and for a host that wants no helper process left while it runs no stdio server;
    it also runs when the interpreter exits (``atexit``, with ``grace`` 5 s), so that the
    launcher is gone, and reaped, before the host is. Blocks until the launcher has exited (it
    exits at once); with ``grace``, a launcher still running that many seconds later (stopped,
    say) is SIGKILLed."""
    global _current
    with _lock:
        current, _current = _current, None
        if current is not None and current.owner == os.getpid():
            _retire_locked(current)
        elif current is not None:
            current.control.close()
            _inherited.append(current.process)
        for process in _retired:
            try:
                process.wait(grace)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        _retired.clear()


atexit.register(shutdown_launcher, 5.0)


def _forget_after_fork() -> None:
    """In a forked child: the parent's launcher is not ours (its servers die with the parent).
    Close the child's copy of its socket; keep the handles (not our children: never waited for,
    and never collected either, which would warn that they still run)."""
    global _current, _lock
    _lock = threading.Lock()
    if _current is not None:
        _current.control.close()
        _inherited.append(_current.process)
    _current = None
    _inherited.extend(_retired)
    _retired.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


class LaunchedServer:
    """A server started by the shared launcher, in place of :class:`trio.Process`.

    ``pid`` is the server's (and, as it leads its own process group, the group's) id, 0 until the
    launcher has said it started. ``returncode`` is ``None`` until :meth:`wait` has read the exit
    status, negative for a signal; from then on the launcher may reap the server, so nothing
    signals the group any more.
    """

    def __init__(self, reap: socket.socket) -> None:
        self.pid = 0
        self.returncode: int | None = None
        self._reap: socket.socket | None = reap
        self._line = b""
        self._lock = trio.Lock()

    async def wait(self) -> int:
        """Wait for the server to exit and be reaped; return its exit status.

        If the launcher died first (the reap socket ended without a report), the server's group
        has nobody to sweep it: this SIGKILLs the group and returns ``-SIGKILL``."""
        async with self._lock:
            if self.returncode is None:
                self.returncode = await self._read_exit()
            while self._reap is not None:  # tell the launcher to reap, then wait until it has
                with contextlib.suppress(OSError):
                    self._reap.shutdown(socket.SHUT_WR)
                if not await self._receive():
                    self.close()
        return self.returncode

    def kill(self) -> None:
        """SIGKILL the server's process group (the launcher reaps the server). A no-op once the
        exit status is known."""
        self._signal(signal.SIGKILL)

    def close(self) -> None:
        """Release the reap socket: if the server still runs, the launcher SIGKILLs its group.
        Idempotent; never waits."""
        if self._reap is not None:
            reap, self._reap = self._reap, None
            trio.lowlevel.notify_closing(reap)
            reap.close()

    def _signal(self, signum: int) -> None:
        if self.returncode is None and self.pid > 0:
            try:
                os.killpg(self.pid, signum)
            except ProcessLookupError:
                return

    async def _receive(self) -> bytes:
        """The next bytes from the reap socket; b"" at its end (or once closed)."""
        while self._reap is not None:
            try:
                return self._reap.recv(64)
            except BlockingIOError:
                try:
                    await trio.lowlevel.wait_readable(self._reap)
                except trio.ClosedResourceError:  # close() from another task
                    return b""
            except OSError:
                return b""
        return b""

    async def _read_exit(self) -> int:
        while not self._line.endswith(b"\n"):
            chunk = await self._receive()
            if not chunk:
                break
            self._line += chunk
        kind, _, value = self._line.rstrip(b"\n").partition(b" ")
        if kind == b"exit" and value.isdigit():
            return int(value)
        if kind == b"signal" and value.isdigit():
            return -int(value)
        self.close()
        self._signal(signal.SIGKILL)  # the launcher is gone: sweep the group ourselves
        return -signal.SIGKILL


@attrs.frozen(kw_only=True)
class Launch:
    """What :func:`launch` returns: the host's ends of one server's pipes."""

    process: LaunchedServer
    stdin: trio.lowlevel.FdStream
    stdout: trio.lowlevel.FdStream
    stderr: trio.lowlevel.FdStream
    status: trio.lowlevel.FdStream
    #: The start pipe: the server's ``<pid>``, then ``err <errno>`` if it could not exec; it
    #: ends when the server has exec'd (or gave up).
    start: trio.lowlevel.FdStream
    #: Says why the launcher left a request unanswered (it ended, and how).
    launcher_end: Callable[[], Awaitable[str]]


def _encode(argv: Sequence[str], env: Mapping[str, str], cwd: str | None) -> bytes:
    return marshal.dumps(
        (
            [os.fsencode(arg) for arg in argv],
            {os.fsencode(name): os.fsencode(value) for name, value in env.items()},
            None if cwd is None else os.fsencode(cwd),
        )
    )


async def launch(argv: Sequence[str], env: Mapping[str, str], cwd: str | None) -> Launch:
    """Hand ``argv`` (with exactly ``env``, in ``cwd`` or the host's working directory) to the
    shared launcher, starting the launcher first if needed. Does not wait for the server to
    start: read the start pipe (see :class:`Launch`); if it ends empty, the status pipe says
    ``err <errno>`` (the launcher could not fork) or nothing (the launcher is gone).

    Raises :class:`OSError` when the launcher cannot be started or reached."""
    payload = _encode(argv, env, cwd)
    kept: list[int] = []  # the host's ends
    reap: socket.socket | None = None
    sent: list[int] = []  # the launcher's ends; closed here once sent
    try:
        read_end, write_end = os.pipe()  # stdin
        kept.append(write_end)
        sent.append(read_end)
        for _ in range(3):  # stdout, stderr, status
            read_end, write_end = os.pipe()
            kept.append(read_end)
            sent.append(write_end)
        host_end, launcher_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        reap = host_end
        sent.append(launcher_end.detach())
        read_end, write_end = os.pipe()  # start
        kept.append(read_end)
        sent.append(write_end)
        sent.append(os.open(".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC))
        if len(payload) > _reaper.MAX_MESSAGE:
            memfd = os.memfd_create("trio-mcp-launch", os.MFD_CLOEXEC)
            sent.append(memfd)
            view = memoryview(payload)
            while view:
                view = view[os.write(memfd, view) :]
            payload = b""
        launcher = _shared()
        try:
            await launcher.send(payload, sent)
        except OSError:
            # It ended since the last look: start another one, once.
            _retire(launcher)
            launcher = _shared()
            await launcher.send(payload, sent)
    except BaseException:
        for fd in kept:
            os.close(fd)
        if reap is not None:
            reap.close()
        raise
    finally:
        for fd in sent:
            os.close(fd)
    stdin, stdout, stderr, status, start = kept
    assert reap is not None
    reap.setblocking(False)
    return Launch(
        process=LaunchedServer(reap),
        stdin=trio.lowlevel.FdStream(stdin),
        stdout=trio.lowlevel.FdStream(stdout),
        stderr=trio.lowlevel.FdStream(stderr),
        status=trio.lowlevel.FdStream(status),
        start=trio.lowlevel.FdStream(start),
        launcher_end=launcher.describe_end,
    )
