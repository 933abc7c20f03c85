"""The stdio launcher: ties a server's whole process group to the life of the host (Linux).

Why a launcher
--------------
``prctl(PR_SET_PDEATHSIG)`` makes the kernel signal a process when its parent dies, but it only
covers the direct child: a server started through a wrapper (``npx`` -> ``node``, ``sh -c`` ->
the real server, ``uv run`` -> ``python``) leaves the real server alive when the host is
SIGKILLed. Worse, the signal is tied to the parent *thread*, and trio starts processes from a
worker thread that exits after a few idle seconds: a plain ``PDEATHSIG=SIGKILL`` in the child
would kill every server a few seconds after it started.

So the direct child of the host is this small stdlib-only script (no trio, started with
``python -I -S``, so it costs one bare interpreter start). Run as::

    python -I -S _reaper.py STATUS_FD HOST_PID LC_CTYPE_SPEC -- COMMAND [ARG...]

it is the leader of the server's process group (the host starts it with
``start_new_session=True``) and:

1. sets ``PR_SET_PDEATHSIG=SIGTERM`` on itself. Its handler for SIGTERM/SIGINT/SIGHUP checks
   ``getppid()``: if the host is gone (we were re-parented), it SIGKILLs the whole group,
   grandchildren included. If the host is alive, the signal was either a worker thread of the
   host exiting, or the host's orderly ``killpg(SIGTERM)`` which the server got too: ignored.
2. forks and execs ``COMMAND`` in the same process group, with the default signal dispositions
   and ``PR_SET_PDEATHSIG=SIGKILL`` relative to the launcher (so the server also dies if the
   launcher is killed alone). The server inherits stdin, stdout and stderr directly: nothing is
   relayed or copied. The launcher then points its own copies at ``/dev/null`` so that a server
   closing its stdout is seen as EOF by the host.
3. reports on ``STATUS_FD`` (a pipe to the host, closed on exec in the server): ``ok <pid>`` once
   the exec succeeded, or ``err <errno>`` if it failed (then exits 127); and, when the server
   exits and has been reaped, ``exit <code>`` or ``signal <number>``. Each report is one line
   ending in ``\\n``; the host takes the exit status from that line as soon as it arrives, without
   waiting for the launcher to be reaped. A launcher killed before it could report (SIGKILLed
   directly, say) only closes the pipe: the host then goes by the launcher's own exit status.
4. after the server exited, SIGKILLs what is left of the group (the server's own children), which
   kills the launcher too. It does so while it is still alive, so the group id cannot have been
   reused by an unrelated process.
5. on :data:`KILL_REQUEST` (SIGUSR1), the host's SIGKILL step, it SIGKILLs the server, reaps it,
   reports ``signal 9`` and sweeps the group as in 4. Had the host SIGKILLed the group directly,
   the server, whose parent would die with it, would be left to init as a zombie.

``LC_CTYPE_SPEC`` is ``-`` when the server's environment has no ``LC_CTYPE`` and ``=<value>``
when it has one: Python's C-locale coercion (PEP 538) may set ``LC_CTYPE`` in the launcher, and the
launcher restores the environment the host asked for before exec.

Limits: a process that leaves the group (``setsid``, a daemon double fork) escapes, as with every
process-group design. Only Linux has ``PR_SET_PDEATHSIG``; elsewhere the stdio transport starts
the server directly (see :data:`SUPPORTED`).
"""

from __future__ import annotations

import os
import sys

# Start-up time matters here (the launcher runs before every server): no typing, no enum.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
    from collections.abc import Sequence
    from types import FrameType
else:
    try:
        import _signal as signal  # the C module; `signal` would import enum (about 5 ms)
    except ImportError:  # another interpreter
        import signal

__all__ = ["KILL_REQUEST", "SUPPORTED", "launcher_argv", "main"]

#: True where the launcher works (Linux: it needs ``prctl(PR_SET_PDEATHSIG)``).
SUPPORTED: bool = sys.platform.startswith("linux")

_PR_SET_PDEATHSIG = 1
if sys.platform == "win32":  # never used there, but the module must stay importable
    KILL_REQUEST = signal.SIGTERM
    _FORWARDED: tuple[signal.Signals, ...] = ()
else:
    #: Sent by the host to the launcher instead of SIGKILLing the group (module docstring, 5).
    KILL_REQUEST = signal.SIGUSR1
    _FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_HANDLED = (*_FORWARDED, KILL_REQUEST)
# Python ignores these at start-up; an ignored disposition would survive exec into the server.
_RESET_TO_DEFAULT = tuple(
    getattr(signal, name) for name in ("SIGPIPE", "SIGXFZ", "SIGXFSZ") if hasattr(signal, name)
)
_EXEC_FAILED = 127


def launcher_argv(
    command: str,
    args: Sequence[str],
    *,
    status_fd: int,
    host_pid: int,
    lc_ctype: str | None,
    python: str = sys.executable,
) -> list[str]:
    """Return the argv that runs ``command args...`` under the launcher.

    ``status_fd`` is the write end of the status pipe (pass it in ``pass_fds``), ``host_pid`` the
    pid of the process that spawns the launcher (its parent), ``lc_ctype`` the server's
    ``LC_CTYPE`` (``None`` when unset). Raises :class:`ValueError` when ``python`` is empty
    (an embedded interpreter without ``sys.executable``).
    """
    if not python:
        raise ValueError("no Python interpreter to run the launcher with (sys.executable is empty)")
    spec = "-" if lc_ctype is None else "=" + lc_ctype
    script = os.path.abspath(__file__)
    return [python, "-I", "-S", script, str(status_fd), str(host_pid), spec, "--", command, *args]


def _set_pdeathsig(sig: int) -> None:
    """Ask the kernel to send ``sig`` to this process when its parent dies. Raises OSError."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_PDEATHSIG) failed: {os.strerror(err)}")


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data) :]


def _report(status_fd: int, data: bytes) -> None:
    """Tell the host about the server; best effort: a host that is gone cannot listen."""
    try:
        _write_all(status_fd, data)
    except OSError:
        return


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 4096):
        chunks.append(chunk)
    return b"".join(chunks)


def _exec_server(command: list[str], env: dict[str, str], error_fd: int, launcher: int) -> None:
    """In the forked child: reset signals, bind to the launcher, exec. Never returns."""
    try:
        for sig in (*_HANDLED, *_RESET_TO_DEFAULT):
            signal.signal(sig, signal.SIG_DFL)
        _set_pdeathsig(signal.SIGKILL)
        if os.getppid() != launcher:  # the launcher died before prctl took effect
            os._exit(_EXEC_FAILED)
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        os.execvpe(command[0], command, env)
    except OSError as exc:
        _write_all(error_fd, str(exc.errno or 0).encode())
    finally:
        os._exit(_EXEC_FAILED)


def main(argv: Sequence[str]) -> int:
    """Run the launcher with ``argv`` (``sys.argv[1:]``); see the module docstring.

    Returns the exit code (127 when the command could not be started, 2 on bad arguments).
    After the server started it ends by SIGKILLing its own process group instead of returning.
    """
    if len(argv) < 5 or argv[3] != "--":
        sys.stderr.write("usage: _reaper.py STATUS_FD HOST_PID LC_CTYPE_SPEC -- COMMAND [ARG...]\n")
        return 2
    status_fd, host_pid, spec = int(argv[0]), int(argv[1]), argv[2]
    command = list(argv[4:])
    os.set_inheritable(status_fd, False)

    env = dict(os.environ)
    if spec == "-":
        env.pop("LC_CTYPE", None)
    else:
        env["LC_CTYPE"] = spec[1:]

    child = 0

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if os.getppid() != host_pid:  # the host died: take the whole group down with it
            os.killpg(0, signal.SIGKILL)
        # Otherwise the host is alive: a host thread exited, or the host signalled the whole
        # group (the server got the signal too and decides for itself).

    def on_kill_request(signum: int, frame: FrameType | None) -> None:
        # The host's SIGKILL step: kill the server first so that we reap it ourselves (a
        # server killed together with us would be left to init as a zombie), then sweep.
        if child:
            os.kill(child, signal.SIGKILL)

    signal.pthread_sigmask(signal.SIG_BLOCK, _HANDLED)
    for sig in _FORWARDED:
        signal.signal(sig, on_signal)
    signal.signal(KILL_REQUEST, on_kill_request)
    try:
        _set_pdeathsig(signal.SIGTERM)
    except OSError as exc:
        _report(status_fd, b"err %d\n" % (exc.errno or 0))
        return _EXEC_FAILED
    if os.getppid() != host_pid:  # the host died before prctl took effect
        os.killpg(0, signal.SIGKILL)

    error_r, error_w = os.pipe()  # both ends close on exec
    launcher = os.getpid()
    pid = os.fork()
    if pid == 0:
        os.close(error_r)
        _exec_server(command, env, error_w, launcher)
    os.close(error_w)
    failure = _read_all(error_r)
    os.close(error_r)
    if failure:
        os.waitpid(pid, 0)
        _report(status_fd, b"err " + failure + b"\n")
        return _EXEC_FAILED
    _report(status_fd, b"ok %d\n" % pid)

    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    child = pid
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _HANDLED)

    # Wait without reaping, so that on_kill_request never signals a recycled pid; then reap.
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
    signal.pthread_sigmask(signal.SIG_BLOCK, (KILL_REQUEST,))
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        _report(status_fd, b"signal %d\n" % os.WTERMSIG(status))
    else:
        _report(status_fd, b"exit %d\n" % os.WEXITSTATUS(status))
    # A pipe write wakes the host as a "sync" wakeup: the kernel may queue the host behind us on
    # this CPU until our own teardown (after the killpg below, about 1 ms) is over. Give the CPU
    # away once so that the host learns the exit status at once.
    os.sched_yield()
    os.killpg(0, signal.SIGKILL)  # sweep the server's leftovers (and ourselves)
    return 0  # pragma: no cover - killpg above does not return


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
