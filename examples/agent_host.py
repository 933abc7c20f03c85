"""A complete trio agent host on trio-mcp: copy it, then swap in your model and your servers.

Run it with ``python examples/agent_host.py`` (``--nursery`` for the second embedding form,
``-v`` to see trio-mcp's own log). It needs no network and no API key: the MCP servers are
trio-mcp's fake server (two stdio subprocesses run from JSON specs written below, and one in the
host's own process), and the "model" is a fixed script of tool calls. What it shows:

- embedding the runtime with ``async with open_runtime(...)`` (or, with ``--nursery``, with
  ``await nursery.start(serve_runtime, ...)`` in a nursery the host already owns);
- host callbacks that answer the servers' ``roots/list`` and ``elicitation/create`` requests;
- turning ``rt.tools()`` into the tool list a model is given, rebuilt when it changes;
- routing each tool call to ``await rt.call(...)`` and turning every way a call can fail into
  an answer for the model;
- watching ``rt.events()`` in a background task: state changes, tool-set changes, server logs;
- reading a resource with ``rt.request(...)``;
- a ``finally:`` that still calls a tool while the session is being cancelled, and a shutdown
  that leaves no process behind.

It exits with status 0 when everything went as expected, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import trio

from trio_mcp.actors import (
    HostCallbacks,
    RetryPolicy,
    Runtime,
    RuntimeConfig,
    ServerConfig,
    ServerLogged,
    ServerState,
    ServerStateChanged,
    ToolsChanged,
    open_runtime,
    serve_runtime,
)
from trio_mcp.actors.testing import FakeServer, FakeTool, ToolContext
from trio_mcp.protocol import (
    CallTimeout,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    ElicitResult,
    McpError,
    ProgressNotificationParams,
    ReadResourceResult,
    Root,
    RpcError,
    RuntimeClosed,
    ServerDisconnected,
    ServerUnavailable,
    TextResourceContents,
    ToolNotFound,
    decode_result,
)


def say(line: str = "") -> None:
    print(line, flush=True)


# --------------------------------------------------------------------------- the servers
#
# Two stdio servers, each a subprocess running trio-mcp's scriptable fake server from a JSON
# spec. In your host these are your real servers: ServerConfig(name=..., command=..., args=...).

NOTES_SPEC: dict[str, Any] = {
    "name": "notes-server",
    "version": "1.4.0",
    "stderr_banner": "notes server ready",
    "tools": [
        {
            "name": "add_note",
            "description": "Store a note; answers with what was stored.",
            "kind": "echo",
            "input_schema": {
                "type": "object",
                "properties": {"title": {"type": "string"}, "body": {"type": "string"}},
                "required": ["title"],
            },
        },
        {
            "name": "search",
            "description": "Search the stored notes.",
            "text": "2 notes match: 'groceries', 'call the plumber'",
            "input_schema": {
                "type": "object",
                "properties": {"query": {"type": "string"}},
                "required": ["query"],
            },
            "annotations": {"readOnlyHint": True},
        },
        {
            "name": "archive",
            "description": "Archive a note (this stand-in always reports a tool error).",
            "text": "the archive is read-only until the nightly backup has finished",
            "is_error": True,
        },
        {
            "name": "sync",
            "description": "Sync the notes (this stand-in crashes its server, to show a drop).",
            "kind": "crash",
        },
    ],
    "resources": [
        {
            "uri": "notes://guide",
            "name": "guide",
            "mime_type": "text/plain",
            "text": "Notes are short; a title is required, a body is optional.",
        }
    ],
}

WEATHER_SPEC: dict[str, Any] = {
    "name": "weather-server",
    "version": "2.0.1",
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
        {
            "name": "climate_report",
            "description": "A slow report that sends progress notifications.",
            "text": "climate report: 3 sections, 12 charts",
            "delay": 2.0,
            "progress": 4,
        },
        {
            "name": "radar",
            "description": "Live radar images (this stand-in answers far too late).",
            "text": "radar image",
            "delay": 60.0,
        },
        {
            "name": "internal_reindex",
            "description": "Maintenance only: filtered out by tools_exclude below.",
        },
    ],
}


def stdio_server(name: str, spec: Mapping[str, Any], **options: Any) -> ServerConfig:
    """A stdio server running the fake server from ``spec`` (``options`` go to ServerConfig)."""
    return ServerConfig(
        name=name,
        command=sys.executable,
        args=("-m", "trio_mcp.actors.testing", "--spec-json", json.dumps(spec)),
        **options,
    )


# A third server runs inside the host process (a ServerConfig of type CUSTOM). It stands for a
# server that asks the host for its roots and for user input, and sends log messages: things a
# Python tool handler can do and a JSON spec cannot.


async def export_notes(arguments: dict[str, Any], ctx: ToolContext) -> Any:
    """Ask the host for its roots and the user for a format, log, and answer."""
    roots = await ctx.request("roots/list")
    folder = roots["roots"][0]["uri"]
    answer = await ctx.request(
        "elicitation/create",
        {
            "message": f"Export the notes to {folder}?",
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "format": {"type": "string", "enum": ["markdown", "pdf"]},
                    "include_archived": {"type": "boolean", "default": False},
                },
                "required": ["format"],
            },
        },
    )
    if answer["action"] != "accept":
        return {"content": [{"type": "text", "text": "the user cancelled"}], "isError": True}
    choice = answer["content"]
    await ctx.log("info", f"exported 2 notes as {choice['format']}", logger="export")
    return f"exported 2 notes to {folder} as {choice['format']}"


def open_ticket(arguments: dict[str, Any], ctx: ToolContext) -> str:
    """Refuse every ticket id with a JSON-RPC error (-32602, invalid params)."""
    raise RpcError.from_error(-32602, f"ticket {arguments.get('id')!r} does not exist")


def desk_server() -> FakeServer:
    """The in-process server: trio-mcp's fake server with Python tool handlers."""
    return FakeServer(
        name="desk",
        version="0.9",
        tools=[
            FakeTool(
                "export_notes",
                description="Export the notes to a folder the user picks.",
                handler=export_notes,
            ),
            FakeTool(
                "open_ticket",
                description="Open a support ticket by id.",
                input_schema={"type": "object", "properties": {"id": {"type": "string"}}},
                handler=open_ticket,
            ),
        ],
    )


def runtime_config() -> RuntimeConfig:
    """The servers, and the policies that apply to all of them."""
    return RuntimeConfig(
        servers=(
            stdio_server("notes", NOTES_SPEC, connect_timeout=30.0),
            stdio_server(
                "weather",
                WEATHER_SPEC,
                connect_timeout=30.0,
                # Each call may take 1.5 s; a progress notification restarts that clock, up to
                # 20 s in all.
                timeout=1.5,
                progress_resets_timeout=True,
                max_call_time=20.0,
                tools_exclude=("internal_*",),
            ),
            desk_server().server_config(),
        ),
        # Reconnect 1 s after a drop (then 2, 4 ... s, capped at 60 s); no jitter, so the
        # output is the same on every run.
        retry=RetryPolicy(reconnect_initial=1.0, jitter=0.0),
        # The host's own tools: an MCP tool mapping to one of these names is refused.
        builtin_tool_names=frozenset({"read_file", "run_shell"}),
        client_name="example-agent-host",
        client_version="1.0",
    )


# --------------------------------------------------------------------------- host callbacks
#
# A capability is declared to the servers only when its callback is given. A real host asks
# its user; this one answers by itself and prints what it did.


@attrs.define
class Observed:
    """What happened, for the final check."""

    roots_asked: int = 0
    elicitations: int = 0
    logs: list[str] = attrs.Factory(list)
    withdrawn: list[str] = attrs.Factory(list)
    stopped: set[str] = attrs.Factory(set)
    pids: set[int] = attrs.Factory(set)


def host_callbacks(observed: Observed) -> HostCallbacks:
    """Answers for roots/list and elicitation/create (so both capabilities are declared)."""
    workspace = Path.cwd().as_uri()

    async def list_roots(server: str) -> list[Root]:
        observed.roots_asked += 1
        say(f"  [host] {server!r} asked for the roots -> {workspace}")
        return [Root(uri=workspace, name="workspace")]

    async def elicit(
        server: str, params: ElicitRequestFormParams | ElicitRequestURLParams
    ) -> ElicitResult:
        observed.elicitations += 1
        if isinstance(params, ElicitRequestURLParams):
            say(f"  [host] {server!r} wants the user to open {params.url}: declined")
            return ElicitResult(action="decline")
        content = auto_answer(params.requested_schema)
        say(f"  [host] {server!r} asks the user {params.message!r} -> {content}")
        return ElicitResult(action="accept", content=content)

    return HostCallbacks(list_roots=list_roots, elicitation=elicit)


def auto_answer(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The answer a user would give to a form: each field's default, else its first choice."""
    answer: dict[str, Any] = {}
    for field, prop in schema.get("properties", {}).items():
        if "default" in prop:
            answer[field] = prop["default"]
        elif prop.get("enum"):
            answer[field] = prop["enum"][0]
    return answer


# --------------------------------------------------------------------------- events


async def watch_events(
    rt: Runtime,
    observed: Observed,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Print the runtime's events until it closes (then the stream ends by itself)."""
    with rt.events() as events:
        task_status.started()
        async for event in events:
            match event:
                case ServerStateChanged(server=server, old=old, new=new, generation=gen) if (
                    old is new
                ):
                    say(f"  [event] {server}: {new.value}, attempt of generation {gen}")
                case ServerStateChanged(server=server, old=old, new=new):
                    line = f"  [event] {server}: {old.value} -> {new.value}"
                    if event.next_attempt_at is not None:
                        wait = event.next_attempt_at - trio.current_time()
                        line += f" (next attempt in {wait:.1f} s)"
                    say(line)
                    if new is ServerState.STOPPED:
                        observed.stopped.add(server)
                case ToolsChanged(added=added, removed=removed):
                    observed.withdrawn.extend(removed)
                    change = [f"+{name}" for name in added] + [f"-{name}" for name in removed]
                    say(f"  [event] tools changed (version {event.version}): {' '.join(change)}")
                case ServerLogged(server=server, stderr=True, data=line):
                    say(f"  [event] {server} stderr: {line}")
                case ServerLogged(server=server, level=level, data=data):
                    observed.logs.append(str(data))
                    say(f"  [event] {server} log ({level}): {data}")
                case _:  # ResourceUpdated, for subscribed resources
                    say(f"  [event] {event}")


# --------------------------------------------------------------------------- the model


@attrs.frozen
class ToolCall:
    """One tool call as a model emits it, and what this script expects to come of it."""

    name: str
    arguments: dict[str, Any]
    expect: str


@attrs.frozen
class ToolOutcome:
    """What goes back to the model: a short kind (for this script's checks) and the text."""

    kind: str
    text: str

    @property
    def is_error(self) -> bool:
        """The tool result's error flag, as the model is shown it."""
        return self.kind != "ok"


#: Stands in for the LLM: the tool calls it "decides" to make, in order.
SCRIPT = (
    ToolCall("mcp_notes_add_note", {"title": "groceries", "body": "milk, eggs"}, expect="ok"),
    ToolCall("mcp_notes_search", {"query": "plumber"}, expect="ok"),
    ToolCall("mcp_weather_forecast", {"city": "Lisbon"}, expect="ok"),
    ToolCall("mcp_weather_climate_report", {}, expect="ok"),
    ToolCall("mcp_wether_forecast", {"city": "Porto"}, expect="not_found"),
    ToolCall("mcp_weather_radar", {}, expect="timeout"),
    ToolCall("mcp_notes_archive", {"title": "groceries"}, expect="tool_error"),
    ToolCall("mcp_desk_export_notes", {}, expect="ok"),
    ToolCall("mcp_desk_open_ticket", {"id": "T-404"}, expect="rpc_error"),
    ToolCall("mcp_notes_sync", {}, expect="disconnected"),
    ToolCall("mcp_notes_search", {"query": "groceries"}, expect="ok"),
)


def tools_for_model(rt: Runtime) -> list[dict[str, Any]]:
    """The tool list a model is given: name, description and JSON schema of each tool."""
    return [
        {
            "name": name,
            "description": entry.tool.description or entry.tool.display_name,
            "input_schema": dict(entry.tool.input_schema),
        }
        for name, entry in sorted(rt.tools().items())
    ]


async def model_thinks() -> None:
    """Where a real host awaits its LLM."""
    await trio.sleep(0.01)


# --------------------------------------------------------------------------- calling tools

#: How long a call may wait for a server that is reconnecting before the model is told.
MAX_WAIT_FOR_SERVER = 10.0


def show_progress(update: ProgressNotificationParams) -> None:
    total = f"/{update.total:g}" if update.total is not None else ""
    say(f"    progress {update.progress:g}{total} {update.message or ''}".rstrip())


async def run_tool_call(rt: Runtime, call: ToolCall) -> ToolOutcome:
    """Route one tool call to its server; every failure becomes an answer for the model."""
    wait_ready: float | None = None
    while True:
        try:
            result = await rt.call(
                call.name, call.arguments, progress=show_progress, wait_ready=wait_ready
            )
        except ToolNotFound:
            return ToolOutcome("not_found", f"there is no tool named {call.name!r}")
        except ServerUnavailable as exc:
            # The server is not READY: the call failed at once. If it is coming back soon,
            # wait for it once (wait_ready=); otherwise tell the model.
            due = exc.next_attempt_at
            wait = None if due is None else max(0.0, due - trio.current_time())
            if wait_ready is None and wait is not None and wait <= MAX_WAIT_FOR_SERVER:
                say(f"    {exc}: waiting for it")
                wait_ready = MAX_WAIT_FOR_SERVER
                continue
            return ToolOutcome("unavailable", f"{exc}; try again later")
        except CallTimeout as exc:
            # The server was sent notifications/cancelled for the request.
            return ToolOutcome("timeout", f"no answer within {exc.timeout:g} s")
        except ServerDisconnected as exc:
            if not exc.sent and wait_ready is None:
                # The request never left: it is safe to send it again once the server is back.
                wait_ready = MAX_WAIT_FOR_SERVER
                continue
            # Sent, then the connection dropped: it may or may not have run. Never re-send a
            # call on your own; let the model (or the user) decide.
            return ToolOutcome("disconnected", f"the server went away; outcome unknown ({exc})")
        except RpcError as exc:
            return ToolOutcome("rpc_error", f"the server refused the call ({exc.code}): {exc}")
        except McpError as exc:  # anything else trio-mcp raises (a malformed answer, ...)
            return ToolOutcome("failed", f"{type(exc).__name__}: {exc}")
        if result.is_error:
            return ToolOutcome("tool_error", result.text)
        return ToolOutcome("ok", result.text)


async def agent_turn(rt: Runtime, history: list[dict[str, Any]]) -> int:
    """Run the scripted model against the runtime; returns how many outcomes were unexpected."""
    tools = tools_for_model(rt)
    version = rt.tools_version
    say(f"The model is given {len(tools)} tools:")
    for tool in tools:
        say(f"  {tool['name']}: {tool['description']}")
    example = next(tool for tool in tools if tool["name"] == "mcp_notes_add_note")
    say(f"  one of them in full: {json.dumps(example)}")
    unexpected = 0
    for call in SCRIPT:
        await model_thinks()
        if rt.tools_version != version:  # servers came or went: give the model the new list
            tools, version = tools_for_model(rt), rt.tools_version
            say(f"(the model's tool list is rebuilt: {len(tools)} tools)")
        say(f"model -> {call.name}({json.dumps(call.arguments)})")
        outcome = await run_tool_call(rt, call)
        say(f"  <- [{outcome.kind}] {outcome.text}")
        history.append(
            {
                "role": "tool",
                "name": call.name,
                "content": outcome.text,
                "is_error": outcome.is_error,
            }
        )
        if outcome.kind != call.expect:
            say(f"  UNEXPECTED: expected {call.expect}, got {outcome.kind}")
            unexpected += 1
    return unexpected


async def read_resource(rt: Runtime, server: str, uri: str) -> str:
    """Read a resource with ``rt.request`` (resources, prompts and completions go this way)."""
    raw = await rt.request(server, "resources/read", {"uri": uri})
    result = decode_result("resources/read", raw)
    assert isinstance(result, ReadResourceResult)
    return "".join(c.text for c in result.contents if isinstance(c, TextResourceContents))


def print_status(rt: Runtime, observed: Observed) -> None:
    for name, status in rt.status().items():
        if status.pid is not None:
            observed.pids.add(status.pid)
        info = f"{status.server_name} {status.server_version}" if status.server_name else "-"
        say(
            f"  {name:<8} {status.state.value:<12} {status.transport:<7} "
            f"{status.protocol_version or '-':<11} {status.tool_count} tools  {info}"
        )


# --------------------------------------------------------------------------- embedding form 1


async def run_with_open_runtime() -> int:
    """``async with open_runtime(...)``: the runtime owns its nursery. Returns the number of
    problems found."""
    observed = Observed()
    history: list[dict[str, Any]] = []
    problems = 0
    saved = False
    say("Starting 3 MCP servers (2 stdio subprocesses, 1 in-process)...")
    async with trio.open_nursery() as nursery:
        with trio.CancelScope() as session:
            async with open_runtime(runtime_config(), callbacks=host_callbacks(observed)) as rt:
                await nursery.start(watch_events, rt, observed)
                try:
                    statuses = await rt.wait_ready(timeout=30)
                    print_status(rt, observed)
                    if any(s.state is not ServerState.READY for s in statuses.values()):
                        say("UNEXPECTED: a server did not start")
                        return 1
                    guide = await read_resource(rt, "notes", "notes://guide")
                    say(f"Resource notes://guide: {guide}")
                    problems += await agent_turn(rt, history)
                    print_status(rt, observed)
                    say("The user presses Stop while the model is thinking.")
                    session.cancel()
                    await model_thinks()  # trio.Cancelled is raised here
                finally:
                    # The session is being cancelled, yet the servers are still up: open_runtime
                    # stops them only once this block has exited. Shield the cleanup to await.
                    with trio.CancelScope(shield=True):
                        saved = await save_summary(rt, history)
        say(f"Session cancelled: {session.cancelled_caught}")
    # Leaving open_runtime stopped every server; the event stream ended, so the watcher returned.
    return problems + check_shutdown(rt, observed, saved=saved)


async def save_summary(rt: Runtime, history: list[dict[str, Any]]) -> bool:
    """Store a summary of the session as a note; whether that worked."""
    errors = sum(1 for entry in history if entry["is_error"])
    body = f"{len(history)} tool calls, {errors} failed"
    try:
        result = await rt.call(
            "mcp_notes_add_note", {"title": "session summary", "body": body}, timeout=5.0
        )
    except McpError as exc:
        say(f"Could not save the summary: {exc}")
        return False
    say(f"Saved from the finally: block, while cancelled: {result.text}")
    return not result.is_error


def check_shutdown(rt: Runtime, observed: Observed, *, saved: bool = True) -> int:
    """Check what the run should have seen and left behind; returns the number of problems."""
    left = alive(observed.pids)
    checks = [
        (saved, "the summary was saved in finally:"),
        (observed.roots_asked > 0, "a server asked for the roots"),
        (observed.elicitations > 0, "a server asked for user input"),
        (bool(observed.logs), "a server log message arrived"),
        ("mcp_notes_search" in observed.withdrawn, "notes' tools were withdrawn on the crash"),
        (observed.stopped == set(rt.status()), "every server reached STOPPED"),
        (not left, f"no server process is left (left: {left})"),
    ]
    failed = [text for ok, text in checks if not ok]
    for text in failed:
        say(f"UNEXPECTED: not true that {text}")
    if not failed:
        say(f"Shut down: every server stopped, all {len(observed.pids)} server processes gone.")
    return len(failed)


def alive(pids: set[int]) -> list[int]:
    """The processes among ``pids`` that still exist."""
    left = []
    for pid in sorted(pids):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        left.append(pid)
    return left


# --------------------------------------------------------------------------- embedding form 2

#: What the model asks for at once in the second form.
PARALLEL_CALLS = (
    ToolCall("mcp_notes_search", {"query": "plumber"}, expect="ok"),
    ToolCall("mcp_weather_forecast", {"city": "Lisbon"}, expect="ok"),
    ToolCall("mcp_weather_climate_report", {}, expect="ok"),
)


async def run_in_host_nursery() -> int:
    """``await nursery.start(serve_runtime, ...)``: the runtime runs in a nursery the host
    owns, next to the host's other tasks, until ``await rt.aclose()``. Returns the number of
    problems found."""
    observed = Observed()
    outcomes: dict[int, ToolOutcome] = {}

    async def run(rt: Runtime, index: int) -> None:
        outcomes[index] = await run_tool_call(rt, PARALLEL_CALLS[index])

    say("Starting the runtime in the host's own nursery...")
    async with trio.open_nursery() as nursery:
        # nursery.start() passes no keyword arguments: bind them with functools.partial.
        rt: Runtime = await nursery.start(
            partial(serve_runtime, runtime_config(), callbacks=host_callbacks(observed))
        )
        await nursery.start(watch_events, rt, observed)
        try:
            await rt.wait_ready(timeout=30)
            print_status(rt, observed)
            say("The model asks for 3 tools at once; the host runs them side by side:")
            async with trio.open_nursery() as parallel:
                for index in range(len(PARALLEL_CALLS)):
                    parallel.start_soon(run, rt, index)
        finally:
            with trio.CancelScope(shield=True):
                await rt.aclose()  # serve_runtime returns, so the nursery can exit
    problems = 0
    for index, call in enumerate(PARALLEL_CALLS):
        outcome = outcomes.get(index, ToolOutcome("missing", "no outcome"))
        say(f"  {call.name} <- [{outcome.kind}] {outcome.text}")
        problems += outcome.kind != call.expect
    try:
        await rt.call("mcp_weather_forecast", {"city": "Lisbon"})
    except RuntimeClosed as exc:
        say(f"A call after aclose(): RuntimeClosed: {exc}")
    else:
        say("UNEXPECTED: a call after aclose() worked")
        problems += 1
    await rt.aclose()  # a second close is a no-op
    left = alive(observed.pids)
    if left or observed.stopped != set(rt.status()):
        say(f"UNEXPECTED: processes left {left}, stopped only {sorted(observed.stopped)}")
        return problems + 1
    say(f"Shut down: every server stopped, all {len(observed.pids)} server processes gone.")
    return problems


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--nursery",
        action="store_true",
        help="embed the runtime with nursery.start(serve_runtime, ...) instead of open_runtime",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="show trio-mcp's log")
    args = parser.parse_args(argv)
    # trio-mcp logs under "trio_mcp.*"; each server's own log under "trio_mcp.server.<name>".
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    problems = trio.run(run_in_host_nursery if args.nursery else run_with_open_runtime)
    say("OK: everything went as expected." if problems == 0 else f"FAILED: {problems} problems")
    return 0 if problems == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
