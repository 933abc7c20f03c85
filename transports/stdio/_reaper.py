"""The shared launcher: one small process per host that starts every stdio server (Linux).

Why a launcher
--------------
A stdio server must not outlive the host process, even when the host is SIGKILLed, and neither
must anything it started (``npx`` -> ``node``, ``sh -c`` -> the real server, ``uv run`` ->
``python``). ``prctl(PR_SET_PDEATHSIG)`` covers only a direct child, and it is tied to the
parent *thread*, not process: trio starts processes from worker threads that exit after a few
idle seconds. So the host starts this stdlib-only script once (``python -I -S``, in a session of
its own; the host side is :mod:`._launcher`), and asks it to start each server::

    python -I -S _reaper.py CONTROL_FD HOST_PID

It:

1. sets ``PR_SET_PDEATHSIG=SIGTERM`` on itself and checks ``getppid()``: once the host is gone
   (this process was re-parented) or the control socket has ended, it SIGKILLs the process group
   of every server still running and exits. A SIGTERM, SIGINT or SIGHUP while the host lives (a
   host thread exiting, a stray ``kill``) changes nothing.
2. takes requests on ``CONTROL_FD``, a ``SOCK_SEQPACKET`` socket from the host, one message per
   request: the server's argv, environment and working directory (:mod:`marshal`), and seven
   file descriptors (``SCM_RIGHTS``): the server's stdin, stdout and stderr, the write ends of
   the *status* pipe, of the *reap* socket (a stream socket pair) and of the *start* pipe, and
   the host's working directory. A request too big for one message comes in an eighth
   descriptor (a memfd).
3. forks a child for the server and goes back to its loop at once: it never waits for a child
   (on a busy machine each such wait is a turn at the CPU, one server after the other). The
   child writes its pid to the start pipe, takes the server's stdin, stdout and stderr, resets
   the signal mask and the dispositions Python ignores, sets ``PR_SET_PDEATHSIG=SIGKILL`` (the
   server dies with this process), enters the working directory, starts a new session (so a
   process group of its own; last, because a new session is a new scheduling group that may
   wait its turn) and execs the command, looked up on the server's own ``PATH`` as
   :mod:`subprocess` does. The start pipe closes on exec: the host reads the pid, then its end
   (started) or ``err <errno>`` (``err <errno> cwd`` when the working directory is the
   problem). If the fork itself fails, ``err <errno>`` goes to the status pipe instead.
4. when the server exits, SIGKILLs what is left of its process group while the server is still an
   unreaped zombie (so the group id cannot have been reused), then writes ``exit <code>`` or
   ``signal <number>`` to the status pipe (and closes it) and to the reap socket. It reaps the
   server once the host has shut down its side of the reap socket, which the host does once it
   has read the line there, then closes the reap socket: that end tells the host the server is
   reaped. Until then the group id stays reserved, so the host may signal the group as long as
   it has not read the exit status.
5. when the host ends its side of the reap socket while the server runs (it gave up on it),
   SIGKILLs the server's group, and reaps the server once it has exited.

Each report is one line ending in ``\\n``. Every descriptor this process holds is close-on-exec:
a server inherits its three standard streams and nothing else.

Limits: a process that leaves the group (``setsid``, a daemon double fork) escapes, as with every
process-group design. If this process is SIGKILLed on its own, the servers die with it
(``PR_SET_PDEATHSIG``) and the host, seeing their reap sockets end, SIGKILLs what is left of
their groups. The servers inherit this process's resource limits and umask, which are the
host's at the time it started this process. Only Linux has ``PR_SET_PDEATHSIG``; elsewhere the
stdio transport starts the server directly.
"""

from __future__ import annotations

import marshal
import os
import sys

# Start-up time matters here (the first server waits for it): no typing, no enum, no socket.py.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import _socket
    import select
    import signal
    from collections.abc import Sequence
    from types import FrameType
    from typing import Any
else:
    import _socket
    import select

    try:
        import _signal as signal  # the C module; `signal` would import enum (about 5 ms)
    except ImportError:  # another interpreter
        import signal

__all__ = ["MAX_MESSAGE", "main"]

#: The largest request sent inline, in bytes; a bigger one comes in a memfd.
MAX_MESSAGE = 32768

_PR_SET_PDEATHSIG = 1
# stdin, stdout, stderr, status, reap, start, working directory; then the optional memfd.
_FDS = 7
_RECEIVE_FDS = _FDS + 1
_INT = 4  # bytes per descriptor in SCM_RIGHTS data
_EXEC_FAILED = 127
_USAGE = "usage: _reaper.py CONTROL_FD HOST_PID\n"


# libc through ctypes (for prctl), loaded by _set_pdeathsig: ctypes takes about 2 ms to import.
_libc: Any = None


def _set_pdeathsig(sig: int) -> None:
    """Ask the kernel to send ``sig`` to this process when its parent dies. Raises OSError."""
    global _libc
    import ctypes

    _libc = ctypes.CDLL(None, use_errno=True)
    if _libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_PDEATHSIG) failed: {os.strerror(err)}")


def _write(fd: int, data: bytes) -> bool:
    """Write one short report line (shorter than PIPE_BUF: all or nothing); False if the reader
    is gone. Best effort: a host that is gone cannot listen."""
    try:
        os.write(fd, data)
    except OSError:
        return False
    return True


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        return


def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        return


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        return


def _waitpid(pid: int) -> None:
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:  # pragma: no cover - only this process reaps its children
        return


def _on_signal(signum: int, frame: FrameType | None) -> None:
    """Nothing: the wakeup fd wakes the main loop, which checks what changed."""


def _candidates(command: bytes, env: dict[bytes, bytes]) -> list[bytes]:
    """Where to look for ``command``, as :mod:`subprocess` does: as it is when it holds a
    ``/``, else in each directory of the server's ``PATH`` (the default path when unset)."""
    if b"/" in command:
        return [command]
    path = env.get(b"PATH")
    if path is None:
        path = os.fsencode(os.defpath)
    return [os.path.join(directory, command) for directory in path.split(b":")]


def _fork_exec(
    argv: list[bytes],
    env: dict[bytes, bytes],
    stdio: tuple[int, int, int],
    start: int,
    home: int,
    cwd: bytes | None,
) -> int:
    """Fork a child that starts ``argv`` in a new session; return its pid at once.

    The child writes ``<pid>\\n`` to ``start`` first, then ``err <errno>\\n`` (``err <errno>
    cwd\\n``) if it cannot exec; ``start`` closes on exec. The command is looked up as
    :mod:`subprocess` does."""
    candidates = _candidates(argv[0], env)
    launcher = os.getpid()
    pid = os.fork()
    if pid:
        return pid
    try:  # the child
        os.write(start, b"%d\n" % os.getpid())
        for target, fd in enumerate(stdio):
            os.dup2(fd, target)
        for sig in _IGNORED_BY_PYTHON:
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, ())
        _libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)  # dies with the launcher
        if os.getppid() != launcher:
            os._exit(_EXEC_FAILED)
        try:
            os.fchdir(home)
            if cwd is not None:
                os.chdir(cwd)
        except OSError as exc:
            os.write(start, b"err %d cwd\n" % (exc.errno or 0))
            os._exit(_EXEC_FAILED)
        # Last: a new session is a new scheduling group (autogroup), which on a busy machine
        # waits its turn; everything above ran in this process's own, mostly idle, group.
        os.setsid()
        first: OSError | None = None
        last: OSError | None = None
        for path in candidates:
            try:
                os.execve(path, argv, env)
            except OSError as exc:
                if first is None and exc.errno not in (2, 20):  # ENOENT, ENOTDIR: look further
                    first = exc
                last = exc
        failure = first or last
        os.write(start, b"err %d\n" % ((failure.errno if failure else 0) or 2))
    except BaseException:  # anything else in the child: report it, and never return
        os.write(start, b"err 22\n")
    finally:
        os._exit(_EXEC_FAILED)


if sys.platform == "win32":  # never run there, but the module must stay importable
    _HANDLED: tuple[int, ...] = ()
    _IGNORED_BY_PYTHON: tuple[int, ...] = ()
else:
    _HANDLED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD)
    # Python ignores SIGPIPE and SIGXFSZ; an ignored disposition would survive exec (a handled
    # one does not).
    _IGNORED_BY_PYTHON = (signal.SIGPIPE, signal.SIGXFSZ)


class _Server:
    """One server this process started and has not reaped yet. ``status`` and ``reap`` are -1
    once closed."""

    __slots__ = ("exited", "pid", "reap", "status")

    def __init__(self, pid: int, status: int, reap: int) -> None:
        self.pid = pid
        self.status = status
        self.reap = reap
        self.exited = False


class _Launcher:
    """The loop: requests in, servers started, exits reported and reaped (module docstring)."""

    def __init__(self, control_fd: int, host_pid: int) -> None:
        self.host = host_pid
        self.control = _socket.socket(fileno=control_fd)
        self.control.setblocking(False)
        self.servers: dict[int, _Server] = {}  # by pid, until reaped
        self.by_reap: dict[int, _Server] = {}  # by reap socket, while the host holds its end
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        self.poller = select.poll()
        self.poller.register(self.control.fileno(), select.POLLIN)
        self.poller.register(self.wake_r, select.POLLIN)

    def run(self) -> int:
        signal.set_wakeup_fd(self.wake_w, warn_on_full_buffer=False)
        for sig in _HANDLED:
            signal.signal(sig, _on_signal)
        _set_pdeathsig(signal.SIGTERM)
        os.chdir("/")  # hold no directory of the host's
        while os.getppid() == self.host:
            child_exited = False
            for fd, _ in self.poller.poll():
                if fd == self.wake_r:
                    child_exited |= self._drain_wakeups()
                elif fd == self.control.fileno():
                    if not self._receive():
                        return self._host_gone()
                elif fd in self.by_reap:
                    self._host_done(self.by_reap[fd])
            if child_exited:
                self._collect_exits()
        return self._host_gone()

    def _drain_wakeups(self) -> bool:
        """Empty the wakeup pipe (one byte per signal); whether a SIGCHLD came."""
        child_exited = False
        try:
            while chunk := os.read(self.wake_r, 256):
                child_exited |= signal.SIGCHLD in chunk
        except BlockingIOError:
            pass
        return child_exited

    def _host_gone(self) -> int:
        """The host died (or closed the control socket): take every running server down."""
        for server in self.servers.values():
            if not server.exited:
                _killpg(server.pid)
                _kill(server.pid)  # one still starting may not lead its group yet
        return 0

    # ------------------------------------------------------------------ requests

    def _receive(self) -> bool:
        """Start the server of every waiting request; False once the host is gone."""
        while True:
            try:
                data, ancillary, flags, _ = self.control.recvmsg(
                    MAX_MESSAGE,
                    _socket.CMSG_SPACE(_RECEIVE_FDS * _INT),
                    _socket.MSG_CMSG_CLOEXEC | _socket.MSG_DONTWAIT,
                )
            except BlockingIOError:
                return True
            except OSError:
                return False
            fds = [
                int.from_bytes(payload[i : i + _INT], sys.byteorder, signed=True)
                for level, kind, payload in ancillary
                if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS
                for i in range(0, len(payload) - len(payload) % _INT, _INT)
            ]
            if not data and not fds:
                return False  # end of the stream: the host closed it
            self._request(data, fds, flags)

    def _request(self, data: bytes, fds: list[int], flags: int) -> None:
        truncated = flags & (_socket.MSG_TRUNC | _socket.MSG_CTRUNC)
        try:
            if truncated or len(fds) not in (_FDS, _FDS + 1):
                raise ValueError("malformed request")
            if len(fds) > _FDS:
                data = os.pread(fds[_FDS], os.fstat(fds[_FDS]).st_size, 0)
            argv, env, cwd = marshal.loads(data)
        except (ValueError, EOFError, TypeError, OSError):
            if len(fds) > 3:
                _write(fds[3], b"err 22\n")  # EINVAL
            for fd in fds:
                _close(fd)
            return
        stdin, stdout, stderr, status, reap, start, home = fds[:_FDS]
        for fd in (status, reap):  # never block here on a host that does not read
            os.set_blocking(fd, False)
        pid = 0
        try:
            pid = _fork_exec(argv, env, (stdin, stdout, stderr), start, home, cwd)
        except OSError as exc:  # fork failed: out of processes or memory
            _write(status, b"err %d\n" % (exc.errno or 0))
        finally:
            for fd in (stdin, stdout, stderr, *fds[_FDS - 2 :]):
                _close(fd)
        if not pid:
            _close(status)
            _close(reap)
            return
        server = _Server(pid, status, reap)
        self.servers[pid] = server
        self.by_reap[reap] = server
        self.poller.register(reap, select.POLLIN)  # the host is done with it: end or close

    # ------------------------------------------------------------------ exits

    def _collect_exits(self) -> None:
        """Report every server that exited since the last look, after sweeping its group."""
        for server in list(self.servers.values()):
            if server.exited:
                continue
            try:
                info = os.waitid(os.P_PID, server.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:  # pragma: no cover - only this process reaps them
                info = None
            if info is None:
                continue
            server.exited = True
            _killpg(server.pid)  # the server is a zombie still: the group id is its own
            if info.si_code == os.CLD_EXITED:
                line = b"exit %d\n" % info.si_status
            else:
                line = b"signal %d\n" % info.si_status
            _write(server.status, line)
            _close(server.status)
            server.status = -1
            if server.reap < 0 or not _write(server.reap, line):
                self._reap(server)
            # Else hold the zombie (and the group id) until the host says it read the line.

    def _host_done(self, server: _Server) -> None:
        """The host ended or closed its side of the reap socket: it has read the exit status,
        or it gave up on the server."""
        if server.exited:
            self._reap(server)
            return
        self._close_reap(server)
        _killpg(server.pid)  # it still runs and nobody wants it: reaped once it has exited
        _kill(server.pid)

    def _reap(self, server: _Server) -> None:
        """Reap the server, then close the reap socket: its end tells the host."""
        _waitpid(server.pid)
        del self.servers[server.pid]
        self._close_reap(server)
        if server.status >= 0:
            _close(server.status)

    def _close_reap(self, server: _Server) -> None:
        if server.reap >= 0:
            self.poller.unregister(server.reap)
            del self.by_reap[server.reap]
            _close(server.reap)
            server.reap = -1


def main(argv: Sequence[str]) -> int:
    """Run the launcher with ``argv`` (``sys.argv[1:]``); see the module docstring.

    Returns 0 once the host is gone, 2 on bad arguments."""
    if len(argv) != 2 or not all(arg.isdigit() for arg in argv):
        sys.stderr.write(_USAGE)
        return 2
    control_fd, host_pid = int(argv[0]), int(argv[1])
    os.set_inheritable(control_fd, False)
    for fd in (0, 1, 2):  # keep them taken, so that no descriptor received later lands there
        try:
            os.fstat(fd)
        except OSError:
            os.open(os.devnull, os.O_RDWR)  # the lowest free descriptor: this one
    return _Launcher(control_fd, host_pid).run()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
