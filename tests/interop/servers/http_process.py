"""Start and stop the HTTP MCP servers of the interop tests as child processes on 127.0.0.1.

:class:`HttpServerProcess` runs one server (``http_server.py`` on the official Python SDK, or the
npm ``server-everything``) in its own process group, waits until its port accepts connections, and
always ends the whole group. The port is picked by binding port 0 first; the servers are told to
listen on it (server-everything listens on every interface, so the tests talk to it on 127.0.0.1
only). Its output goes to a log file, quoted when it fails to start.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

import attrs

SERVERS_DIR: Final = Path(__file__).resolve().parent
HTTP_SERVER: Final = SERVERS_DIR / "http_server.py"
INTEROP_DIR: Final = SERVERS_DIR.parent
EVERYTHING_BIN: Final = INTEROP_DIR / "node_modules" / ".bin" / "mcp-server-everything"

#: How long a server may take to listen (a loaded 2-core machine starts several at once).
START_BOUND: Final = 30.0
#: How long a server may take to exit after SIGTERM before it is SIGKILLed.
STOP_GRACE: Final = 5.0


def free_port() -> int:
    """A port that was free on 127.0.0.1 a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


@attrs.define
class HttpServerProcess:
    """One HTTP MCP server process. :meth:`launch` it, then :meth:`wait_ready`; :meth:`stop` (or
    :meth:`kill`) always ends its whole process group."""

    argv: Sequence[str]
    port: int
    log: Path
    env: Mapping[str, str] | None = None
    cwd: Path | None = None
    process: subprocess.Popen[bytes] | None = None

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def launch(self) -> None:
        """Start the process (without waiting for its port)."""
        env = dict(os.environ if self.env is None else self.env)
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                list(self.argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self.cwd,
                start_new_session=True,
            )

    def wait_ready(self, bound: float = START_BOUND) -> None:
        """Wait until the port accepts connections; raise RuntimeError (quoting the log) if the
        process exits first or ``bound`` seconds pass."""
        assert self.process is not None
        deadline = time.monotonic() + bound
        while not _accepts(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                why = (
                    f"exited with {self.process.returncode}"
                    if self.process.returncode is not None
                    else f"did not listen within {bound:g} s"
                )
                self.stop()
                raise RuntimeError(f"{self.argv} {why}; its output:\n{self.tail()}")
            time.sleep(0.05)

    def start(self) -> None:
        self.launch()
        self.wait_ready()

    def tail(self, lines: int = 30) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except FileNotFoundError:
            return "(no output)"
        return "\n".join(text.splitlines()[-lines:]) or "(no output)"

    def kill(self) -> None:
        """SIGKILL the whole process group at once (a crash), and reap it."""
        self._signal(signal.SIGKILL)
        if self.process is not None:
            self.process.wait(timeout=STOP_GRACE)

    def stop(self) -> None:
        """SIGTERM the process group, SIGKILL it after a grace period; idempotent."""
        process = self.process
        if process is None:
            return
        self._signal(signal.SIGTERM)
        try:
            process.wait(timeout=STOP_GRACE)
        except subprocess.TimeoutExpired:
            self._signal(signal.SIGKILL)
            process.wait(timeout=STOP_GRACE)
        # Whatever the group left behind goes too.
        self._signal(signal.SIGKILL)

    def _signal(self, which: signal.Signals) -> None:
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, which)


def python_http_server(mode: str, log_dir: Path, port: int | None = None) -> HttpServerProcess:
    """``http_server.py MODE PORT`` on the Python SDK (see its docstring for the modes)."""
    port = port or free_port()
    return HttpServerProcess(
        argv=[sys.executable, str(HTTP_SERVER), mode, str(port)],
        port=port,
        log=log_dir / f"python-{mode}-{port}.log",
    )


def everything_server(mode: str, node: str, log_dir: Path) -> HttpServerProcess:
    """``mcp-server-everything streamableHttp|sse`` with ``PORT`` set."""
    port = free_port()
    env = dict(os.environ)
    env["PORT"] = str(port)
    return HttpServerProcess(
        argv=[node, str(EVERYTHING_BIN), mode],
        port=port,
        log=log_dir / f"everything-{mode}-{port}.log",
        env=env,
        cwd=INTEROP_DIR,
    )
