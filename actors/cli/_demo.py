"""``trio-mcp demo`` (and ``make demo``): the runtime against embedded demo servers.

Three demo servers run as stdio subprocesses built on trio-mcp's own fake server (no network).
The demo shows each server's state, lists the tools as a model would see them, calls some of
them, kills one server with SIGKILL and shows its tools withdrawn and registered again after the
reconnect, then shuts down and checks that no process is left behind.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Callable, Mapping
from typing import Any, TextIO

import trio

from ...protocol._types import ProgressNotificationParams
from ..config._backoff import RetryPolicy
from ..config._config import RuntimeConfig, ServerConfig
from ..runtime._events import ServerState, ServerStateChanged
from ..runtime._registry import ToolsChanged
from ..runtime._runtime import Runtime, open_runtime

__all__ = ["DEMO_SERVERS", "demo_config", "run_demo"]

DEMO_SERVERS: dict[str, dict[str, Any]] = {
    "notes": {
        "name": "demo-notes",
        "version": "1.0",
        "tools": [
            {
                "name": "add_note",
                "description": "Store a note and echo it back.",
                "kind": "echo",
                "input_schema": {
                    "type": "object",
                    "properties": {"title": {"type": "string"}, "body": {"type": "string"}},
                    "required": ["title"],
                },
            },
            {
                "name": "list-notes",
                "description": "List the stored notes.",
                "text": "1. groceries\n2. call the plumber",
                "annotations": {"readOnlyHint": True},
            },
        ],
        "resources": [
            {"uri": "notes://readme", "name": "readme", "text": "Notes are kept in memory."}
        ],
    },
    "weather": {
        "name": "demo-weather",
        "version": "2.1",
        "tools": [
            {
                "name": "forecast",
                "description": "Tomorrow's forecast for a city.",
                "text": "Sunny, 21 °C, light wind from the west.",
                "input_schema": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
            },
            {"name": "alerts", "description": "Active weather alerts.", "text": "none"},
        ],
    },
    "reports": {
        "name": "demo-reports",
        "version": "0.3",
        "tools": [
            {
                "name": "build_report",
                "description": "A slow report that sends progress notifications.",
                "text": "report ready: 3 sections",
                "delay": 0.6,
                "progress": 3,
            }
        ],
    },
}


def demo_config(*, python: str | None = None) -> RuntimeConfig:
    """The demo's runtime configuration: one stdio subprocess per demo server."""
    executable = python or sys.executable
    return RuntimeConfig(
        servers=tuple(
            ServerConfig(
                name=name,
                command=executable,
                args=("-m", "trio_mcp.actors.testing", "--spec-json", json.dumps(spec)),
                connect_timeout=30.0,
                timeout=30.0,
            )
            for name, spec in DEMO_SERVERS.items()
        ),
        retry=RetryPolicy(reconnect_initial=1.0, jitter=0.0),
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - someone else's process reuses the pid
        return True
    return True


def _table(rt: Runtime, say: Callable[[str], None]) -> None:
    say(f"  {'server':<10} {'state':<13} {'protocol':<11} {'tools':>5}  {'pid':>7}  server info")
    for name, status in rt.status().items():
        info = f"{status.server_name or '-'} {status.server_version or ''}".strip()
        say(
            f"  {name:<10} {status.state.value:<13} {status.protocol_version or '-':<11} "
            f"{status.tool_count:>5}  {status.pid or '-':>7}  {info}"
        )


def _describe_tools(rt: Runtime, say: Callable[[str], None]) -> None:
    for name, tool in sorted(rt.tools().items()):
        props = tool.tool.input_schema.get("properties")
        args = ", ".join(props) if isinstance(props, Mapping) else ""
        say(f"  {name}({args})")
        say(f"      {tool.tool.description or '(no description)'}  [server {tool.server!r}]")


async def run_demo(out: TextIO | None = None) -> int:
    """Run the demo; returns the exit status (0 when every step did what it should)."""
    stream = out or sys.stdout

    def say(line: str = "") -> None:
        print(line, file=stream, flush=True)

    config = demo_config()
    say(f"Starting {len(config.servers)} demo MCP servers as stdio subprocesses...")
    pids: set[int] = set()
    async with open_runtime(config) as rt:
        with rt.events() as events:
            statuses = await rt.wait_ready(timeout=60)
            pids.update(s.pid for s in statuses.values() if s.pid)
            say()
            say("Server states:")
            _table(rt, say)
            if any(s.state is not ServerState.READY for s in statuses.values()):
                say("some servers did not start; see the table above")
                return 1

            say()
            say(f"Tools as the model sees them ({len(rt.tools())}):")
            _describe_tools(rt, say)

            say()
            say("Calling tools:")
            result = await rt.call("mcp_notes_add_note", {"title": "demo", "body": "hello"})
            say(f"  mcp_notes_add_note -> {result.text}")
            result = await rt.call("mcp_weather_forecast", {"city": "Lisbon"})
            say(f"  mcp_weather_forecast -> {result.text}")

            def progress(update: ProgressNotificationParams) -> None:
                total = f"/{update.total:g}" if update.total is not None else ""
                say(f"    progress {update.progress:g}{total}")

            result = await rt.call("mcp_reports_build_report", {}, progress=progress)
            say(f"  mcp_reports_build_report -> {result.text}")

            victim = rt.status()["weather"]
            assert victim.pid is not None
            say()
            say(f"Killing server 'weather' (pid {victim.pid}) with SIGKILL...")
            os.kill(victim.pid, signal.SIGKILL)
            withdrawn = await _next(
                events, lambda e: isinstance(e, ToolsChanged) and bool(e.removed)
            )
            assert isinstance(withdrawn, ToolsChanged)
            say(f"  tools withdrawn at once: {', '.join(withdrawn.removed)}")
            state = await _next(
                events,
                lambda e: (
                    isinstance(e, ServerStateChanged)
                    and e.new is ServerState.RECONNECTING
                    and e.next_attempt_at is not None
                ),
            )
            assert isinstance(state, ServerStateChanged)
            assert state.next_attempt_at is not None
            wait = state.next_attempt_at - trio.current_time()
            say(f"  weather is {state.new.value}; next attempt in {wait:.1f} s")
            added = await _next(events, lambda e: isinstance(e, ToolsChanged) and bool(e.added))
            assert isinstance(added, ToolsChanged)
            say(f"  reconnected; tools registered again: {', '.join(added.added)}")
            result = await rt.call("mcp_weather_alerts")
            say(f"  mcp_weather_alerts -> {result.text}")
            pids.update(s.pid for s in rt.status().values() if s.pid)
            say()
            say("Server states:")
            _table(rt, say)
    say()
    say("Shut down.")
    with trio.move_on_after(5):
        # Polling the OS: there is no event for "a process that is not our child is gone".
        while any(_alive(pid) for pid in pids):  # noqa: ASYNC110
            await trio.sleep(0.05)
    left = sorted(pid for pid in pids if _alive(pid))
    if left:
        say(f"processes left behind: {left}")
        return 1
    say(f"All {len(pids)} server processes are gone; no process left behind.")
    return 0


async def _next(events: Any, predicate: Callable[[Any], bool], timeout: float = 30.0) -> Any:
    with trio.fail_after(timeout):
        async for event in events:
            if predicate(event):
                return event
    raise RuntimeError("the event stream ended")
