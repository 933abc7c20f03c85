"""Helpers of the interop suite: real MCP servers over stdio, real processes, the real clock.

Servers:

- the official Python SDK (``mcp`` 2.x) running ``servers/python_server.py`` under this
  interpreter (``mcp`` is a test dependency, so it is always there);
- the npm reference server ``@modelcontextprotocol/server-everything``, pinned in
  ``package.json`` / ``package-lock.json`` and installed by ``make setup`` (``npm ci``). When npm
  or that install is missing, its tests skip and say why.

:func:`interop_runtime` opens a runtime on some servers, waits (bounded) until every one is READY
and, when the block ends normally, checks that no process of any server generation it recorded is
left: neither the server's pid nor anything in its process group (read from ``/proc``).
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

import attrs
import pytest
import trio

from trio_mcp.actors import (
    Event,
    EventSubscription,
    HostCallbacks,
    RetryPolicy,
    Runtime,
    RuntimeConfig,
    ServerConfig,
    ServerState,
    open_runtime,
)
from trio_mcp.protocol import ServerDisconnected

__all__ = [
    "CALL_BOUND",
    "CONNECT_BOUND",
    "EVERYTHING_BIN",
    "PYTHON_SERVER",
    "ProcessGroups",
    "everything_server",
    "interop_runtime",
    "kill_mid_call",
    "next_event",
    "python_server",
]

INTEROP_DIR: Final = Path(__file__).resolve().parent
PYTHON_SERVER: Final = INTEROP_DIR / "servers" / "python_server.py"
EVERYTHING_BIN: Final = INTEROP_DIR / "node_modules" / ".bin" / "mcp-server-everything"

#: Bounds on waits (real clock, a loaded 2-core machine): they only fire when something hangs.
CONNECT_BOUND: Final = 20.0
CALL_BOUND: Final = 10.0

_PROC: Final = Path("/proc")


# --------------------------------------------------------------------------- server configs


def python_server(name: str = "py", **options: Any) -> ServerConfig:
    """The Python SDK test server over stdio, run by this interpreter."""
    options.setdefault("timeout", CALL_BOUND)
    options.setdefault("connect_timeout", CONNECT_BOUND)
    return ServerConfig(name=name, command=sys.executable, args=(str(PYTHON_SERVER),), **options)


def everything_server(name: str = "everything", **options: Any) -> ServerConfig:
    """server-everything over stdio (``node .../mcp-server-everything stdio``).

    Skips the calling test, with the reason, when npm, node or the npm install is missing.
    """
    node = shutil.which("node")
    if shutil.which("npm") is None or node is None:
        pytest.skip(
            "npm/node is not installed: the server-everything interop tests need Node.js and "
            "npm (then `make setup` installs the pinned server with `npm ci`)"
        )
    if not EVERYTHING_BIN.exists():
        pytest.skip(
            "server-everything is not installed in tests/interop/node_modules: run `make setup` "
            "(it runs `npm ci` in tests/interop)"
        )
    options.setdefault("timeout", CALL_BOUND)
    options.setdefault("connect_timeout", CONNECT_BOUND)
    return ServerConfig(name=name, command=node, args=(str(EVERYTHING_BIN), "stdio"), **options)


# --------------------------------------------------------------------------- processes


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, process group) of ``pid`` from ``/proc/<pid>/stat``, or None when it is gone."""
    try:
        raw = (_PROC / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
    fields = raw[raw.rindex(")") + 2 :].split()
    return fields[0], int(fields[2])


def _cmdline(pid: int) -> str:
    try:
        raw = (_PROC / str(pid) / "cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return "?"
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()


@attrs.define
class ProcessGroups:
    """The server processes a test has seen (pid -> process group), to check that none is left."""

    seen: dict[int, int] = attrs.field(factory=dict)

    def record(self, rt: Runtime) -> None:
        """Remember the current process (and its group) of every server that has one."""
        for status in rt.status().values():
            if status.pid is None:
                continue
            stat = _stat(status.pid)
            if stat is None:
                raise AssertionError(
                    f"server {status.name!r}: its process {status.pid} is already gone"
                )
            self.seen[status.pid] = stat[1]

    def leftovers(self) -> list[str]:
        """Every live process (zombies included) that is one of the seen servers or in one of
        their process groups, described as ``pid (state, pgid): cmdline``."""
        groups = set(self.seen.values())
        found = []
        for entry in _PROC.iterdir():
            if not entry.name.isdigit():
                continue
            pid = int(entry.name)
            stat = _stat(pid)
            if stat is None:
                continue
            state, pgid = stat
            if pid in self.seen or pgid in groups:
                found.append(f"{pid} ({state}, pgid {pgid}): {_cmdline(pid)}")
        return found


def _have_proc() -> bool:
    return (_PROC / "self" / "stat").exists()


# --------------------------------------------------------------------------- the runtime


def _describe(rt: Runtime) -> str:
    lines = []
    for status in rt.status().values():
        lines.append(f"{status.name}: {status.state.value}, last error {status.last_error!r}")
        lines.extend(f"    stderr: {line}" for line in status.stderr_tail[-10:])
    return "\n".join(lines)


@asynccontextmanager
async def interop_runtime(
    *servers: ServerConfig, callbacks: HostCallbacks | None = None, **options: Any
) -> AsyncIterator[tuple[Runtime, ProcessGroups]]:
    """Open a runtime on ``servers`` and wait (at most :data:`CONNECT_BOUND` s) until every one
    is READY; yields the runtime and the :class:`ProcessGroups` it recorded.

    Fails the test, quoting each server's state, last error and stderr tail, when a server does
    not become ready; after a normal exit, fails it when any recorded server process or process
    group member is still alive. Options go to :class:`RuntimeConfig` (quick reconnects, a short
    list_changed debounce and no first-connect retries by default).
    """
    options.setdefault(
        "retry", RetryPolicy(jitter=0.0, reconnect_initial=0.2, first_connect_delays=())
    )
    options.setdefault("list_changed_debounce", 0.05)
    config = RuntimeConfig(servers=servers, **options)
    groups = ProcessGroups()
    async with open_runtime(config, callbacks=callbacks) as rt:
        with trio.fail_after(CONNECT_BOUND + 5):
            statuses = await rt.wait_ready(timeout=CONNECT_BOUND)
        if any(status.state is not ServerState.READY for status in statuses.values()):
            pytest.fail(f"a server did not become ready:\n{_describe(rt)}")
        if _have_proc():
            groups.record(rt)
        yield rt, groups
        if _have_proc():
            groups.record(rt)
    left = groups.leftovers()
    assert left == [], f"server processes left after the runtime closed: {left}"
    assert all(s.state is ServerState.STOPPED for s in rt.status().values())


async def next_event(
    events: EventSubscription, predicate: Callable[[Event], bool], *, bound: float = CALL_BOUND
) -> Event:
    """The next event that satisfies ``predicate``, within ``bound`` seconds (else TooSlowError)."""
    with trio.fail_after(bound):
        async for event in events:
            if predicate(event):
                return event
    raise AssertionError("the runtime's event stream ended before the awaited event")


async def kill_mid_call(
    rt: Runtime, server: str, tool: str, arguments: dict[str, Any]
) -> tuple[int, ServerDisconnected]:
    """Start a long call of ``tool`` that reports progress, SIGKILL the server once the first
    progress arrives, and return the killed pid and the error the call failed with, which must
    come promptly: a ServerDisconnected at the end of stdout, not a call timeout (the call's
    timeout is far longer than the bound here). Returns once the server's tools are withdrawn
    and it is RECONNECTING."""
    first_pid = rt.status()[server].pid
    assert first_pid is not None
    started, failed = trio.Event(), trio.Event()
    failure: list[ServerDisconnected] = []

    async def long_call() -> None:
        try:
            await rt.call(tool, arguments, progress=lambda _: started.set())
        except ServerDisconnected as exc:
            failure.append(exc)
            failed.set()

    with rt.events() as events:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(long_call)
            with trio.fail_after(CALL_BOUND):
                await started.wait()
            os.kill(first_pid, signal.SIGKILL)
            with trio.fail_after(CALL_BOUND):  # EOF on stdout, not the call's timeout
                await failed.wait()
        with trio.fail_after(CALL_BOUND):
            async for event in events:  # the tools withdrawn, then RECONNECTING
                if getattr(event, "new", None) is ServerState.RECONNECTING:
                    break
    (error,) = failure
    return first_pid, error
