"""An HTTP MCP server on the official Python SDK (``mcp`` 2.x), for trio-mcp's HTTP interop tests.

Run: ``python http_server.py MODE PORT``. It listens on 127.0.0.1 only (uvicorn logs on stderr).

Modes:

- ``sse``: Streamable HTTP at ``/mcp``, responses as SSE streams, with an in-memory event store
  and a retry interval, so at 2025-11-25 every stream starts with a priming event and a broken
  stream can be resumed with ``Last-Event-ID``;
- ``json``: Streamable HTTP at ``/mcp``, responses as JSON bodies (``json_response=True``);
- ``stateless``: Streamable HTTP at ``/mcp`` without sessions (``stateless_http=True``);
- ``legacy``: the HTTP+SSE transport (``GET /sse``, then POSTs to ``/messages/?session_id=``).

Tools: ``add``; ``echo``; ``add_tool`` (registers a tool and announces the change);
``slow`` (sleeps, so a test can kill the server mid-call);
``count_slowly`` (reports progress); ``interrupt`` (closes its own SSE stream mid-call, as a
server that polls does, then answers: the client must resume the stream to get the answer).

In the stateful Streamable HTTP modes, ``POST /expire`` makes the SDK terminate every session it
holds (as an idle timeout or a restart would): from then on the SDK answers 404 to their ids.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

server = MCPServer("interop-python-http", version="1.0.0")

#: The ``retry`` (ms) the ``sse`` mode suggests to clients in its priming events.
RETRY_MS = 200


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
async def slow(seconds: float, tag: str = "") -> str:
    """Sleep ``seconds``, then say so. With a ``tag``, first log ``slow started <tag>`` on
    stderr (a test waits for that line to know that the call is being served)."""
    if tag:
        print(f"slow started {tag}", file=sys.stderr, flush=True)
    await anyio.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
async def count_slowly(steps: int, ctx: Context, delay: float = 0.02) -> str:
    """Count to ``steps``, reporting progress after each step."""
    for step in range(1, steps + 1):
        await anyio.sleep(delay)
        await ctx.report_progress(step, steps, f"step {step} of {steps}")
    return f"counted to {steps}"


@server.tool()
async def interrupt(text: str, ctx: Context) -> str:
    """Close this call's SSE stream (the client resumes it after ``retry``), then answer."""
    await ctx.close_sse_stream()
    await anyio.sleep(0.05)
    return f"resumed: {text}"


@server.tool()
async def add_tool(name: str, ctx: Context) -> str:
    """Register a tool called ``name`` (it greets) and announce the change: in 2026-07-28
    through the SDK's subscription bus (only the ``subscriptions/listen`` streams that asked
    for tool changes hear it), in the handshake revisions on the session."""

    def greet(who: str) -> str:
        return f"{name} greets {who}"

    server.add_tool(greet, name=name, description=f"Greet someone ({name}).")
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        await ctx.notify_tools_changed()
    else:
        await ctx.session.send_tool_list_changed()
    return f"added {name}"


class MemoryEventStore(EventStore):
    """Every event of every stream, kept in memory, for ``Last-Event-ID`` replays."""

    def __init__(self) -> None:
        self._events: list[tuple[str, str, object]] = []

    async def store_event(self, stream_id, message):  # type: ignore[no-untyped-def]
        event_id = f"{stream_id}.{len(self._events) + 1}"
        self._events.append((stream_id, event_id, message))
        return event_id

    async def replay_events_after(self, last_event_id, send_callback: EventCallback):  # type: ignore[no-untyped-def]
        for index, (stream_id, event_id, _) in enumerate(self._events):
            if event_id == last_event_id:
                for other_stream, other_id, message in self._events[index + 1 :]:
                    if other_stream == stream_id and message is not None:
                        await send_callback(EventMessage(message, other_id))  # type: ignore[arg-type]
                return stream_id
        return None


def with_expiry(app: Any) -> Any:
    """Wrap the SDK's ASGI app: ``POST /expire`` terminates every session the SDK holds."""

    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/expire":
            manager = server.session_manager
            transports = list(manager._server_instances.values())
            for transport in transports:
                await transport.terminate()
            body = f"terminated {len(transports)}".encode()
            headers = [(b"content-type", b"text/plain"), (b"content-length", b"%d" % len(body))]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        await app(scope, receive, send)

    return wrapped


def main() -> None:
    mode, port = sys.argv[1], int(sys.argv[2])
    if mode == "legacy":
        server.run(transport="sse", host="127.0.0.1", port=port)
        return
    options: dict[str, Any] = {}
    if mode == "sse":
        options.update(event_store=MemoryEventStore(), retry_interval=RETRY_MS)
    elif mode == "json":
        options.update(json_response=True)
    elif mode == "stateless":
        options.update(stateless_http=True)
    else:
        raise SystemExit(f"unknown mode {mode!r}: use sse, json, stateless or legacy")
    app = with_expiry(server.streamable_http_app(host="127.0.0.1", **options))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
