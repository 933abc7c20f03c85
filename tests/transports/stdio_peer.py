"""A tiny NDJSON peer for the stdio transport tests (stdlib only; not an MCP server).

Process-level behaviour comes from argv:

    --ignore-sigterm      SIGTERM is ignored (so only SIGKILL stops it)
    --linger              keep running after stdin ends (instead of exiting 0)
    --stderr TEXT         write TEXT as a line to stderr at start (repeatable)
    --exit-at-start CODE  exit with CODE right after the --stderr lines, reading nothing

Then every stdin line is echoed back on stdout, except JSON objects with a "peer" key, which
are commands:

    {"peer": "exit", "code": N, "stderr": [lines]}  write the lines to stderr, exit with N
    {"peer": "signal", "signum": N}                 kill itself with signal N
    {"peer": "env"}                                 reply {"env": os.environ, "initial": the
                                                    environment at exec (Linux) or null}
    {"peer": "cwd"}                                 reply {"cwd": "..."}
    {"peer": "pid"}                                 reply {"pid": .., "pgid": .., "ppid": ..}
    {"peer": "spawn"}                               start a sleeping grandchild that shares
                                                    stdout/stderr; reply {"pid": <its pid>}
    {"peer": "flood", "bytes": N}                   write N bytes of numbered stderr lines, then
                                                    the line "flood end"; reply {"flooded": N}
    {"peer": "big", "bytes": N}                     write one stdout line of N bytes ("x"...)
    {"peer": "partial"}                             write "partial" without newline, exit 0
    {"peer": "close-stdout"}                        close stdout, keep reading stdin
    {"peer": "close-stdin"}                         close stdin, reply, sleep 30 s
    {"peer": "sleep", "seconds": S}                 sleep S seconds without reading stdin
    {"peer": "pause"}                               reply {"paused": true}, then read nothing
                                                    more of stdin until it gets SIGUSR1 (a
                                                    SIGUSR1 sent after the reply is held for it)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

out = sys.stdout.buffer


def reply(obj: Any) -> None:
    out.write(json.dumps(obj, separators=(",", ":")).encode() + b"\n")
    out.flush()


def initial_environment() -> dict[str, str] | None:
    """The environment this process was started with (Python may add LC_CTYPE to os.environ)."""
    try:
        with open("/proc/self/environ", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    pairs = (item.decode().partition("=") for item in raw.split(b"\0") if item)
    return {name: value for name, _, value in pairs}


def command(msg: dict[str, Any]) -> None:
    what = msg["peer"]
    if what == "exit":
        for line in msg.get("stderr", []):
            sys.stderr.write(line + "\n")
        sys.stderr.flush()
        out.flush()
        os._exit(int(msg.get("code", 0)))
    elif what == "signal":
        os.kill(os.getpid(), int(msg["signum"]))
        time.sleep(10)
    elif what == "env":
        reply({"env": dict(os.environ), "initial": initial_environment()})
    elif what == "cwd":
        reply({"cwd": os.getcwd()})
    elif what == "pid":
        reply({"pid": os.getpid(), "pgid": os.getpgid(0), "ppid": os.getppid()})
    elif what == "spawn":
        child = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(60)"], stdin=subprocess.DEVNULL
        )
        reply({"pid": child.pid})
    elif what == "flood":
        total = int(msg["bytes"])
        written = 0
        n = 0
        while written < total:
            line = f"flood line {n:08d} " + "e" * 100 + "\n"
            sys.stderr.write(line)
            written += len(line)
            n += 1
        sys.stderr.write("flood end\n")
        sys.stderr.flush()
        reply({"flooded": total})
    elif what == "big":
        remaining = int(msg["bytes"])
        block = b"x" * (1 << 20)
        while remaining > 0:
            out.write(block[: min(remaining, len(block))])
            remaining -= len(block)
        out.write(b"\n")
        out.flush()
    elif what == "partial":
        out.write(b"partial")
        out.flush()
        os._exit(0)
    elif what == "close-stdout":
        out.flush()
        os.close(1)
    elif what == "close-stdin":
        os.close(0)
        reply({"stdin": "closed"})
        time.sleep(30)
    elif what == "sleep":
        time.sleep(float(msg["seconds"]))
    elif what == "pause":
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})  # held until taken
        reply({"paused": True})
        signal.sigwait({signal.SIGUSR1})
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1})
    else:
        reply({"error": f"unknown peer command {what!r}"})


def main(argv: list[str]) -> None:
    linger = False
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--ignore-sigterm":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        elif arg == "--linger":
            linger = True
        elif arg == "--stderr":
            i += 1
            sys.stderr.write(argv[i] + "\n")
            sys.stderr.flush()
        elif arg == "--exit-at-start":
            i += 1
            os._exit(int(argv[i]))
        else:
            raise SystemExit(f"stdio_peer: unknown argument {arg!r}")
        i += 1
    for raw in sys.stdin.buffer:
        line = raw.rstrip(b"\n")
        msg: Any = None
        if line.startswith(b"{"):
            try:
                msg = json.loads(line)
            except ValueError:
                msg = None
        if isinstance(msg, dict) and "peer" in msg:
            command(msg)
        else:
            out.write(line + b"\n")
            out.flush()
    if linger:
        while True:
            time.sleep(60)


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except BrokenPipeError:
        os._exit(3)
