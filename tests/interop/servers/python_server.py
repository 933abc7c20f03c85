"""A stdio MCP server on the official Python SDK (``mcp`` 2.x), for the interop tests.

Run: ``python python_server.py`` (newline-delimited JSON-RPC on stdin/stdout, logs on stderr).

What it offers:

- tools ``add`` (structured int result), ``echo`` (structured str result), ``fail`` (raises, so
  the SDK answers with an ``isError`` result), ``count_slowly`` (reports progress through the SDK's
  context after each step) and ``add_tool`` (registers a new tool at run time and sends
  ``notifications/tools/list_changed``, which the server declares in its capabilities: in the
  handshake revisions on the connection; in 2026-07-28 through the SDK's subscription bus, which
  delivers it only on the ``subscriptions/listen`` streams that asked for tool changes);
- a resource ``interop://greeting`` and a resource template ``interop://items/{item_id}``;
- a prompt ``review`` with a required and an optional argument;
- tools ``confirm`` (asks the user through an elicitation) and ``ask_model`` (asks the client's
  model through sampling), written with the SDK's resolvers: it sends the question as a server
  request in the handshake revisions and as an ``input_required`` result (a multi round trip)
  in 2026-07-28, so one tool exercises both eras.

The SDK derives the capabilities from what is registered; ``tools.listChanged`` is declared by
passing :class:`NotificationOptions` to the low-level server, which ``MCPServer.run`` does not do.
"""

from __future__ import annotations

import json
from typing import Annotated

import anyio
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.resolve import Elicit, Resolve, Sample
from mcp.server.stdio import stdio_server
from mcp_types import CreateMessageResult, SamplingMessage, TextContent
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel

server = MCPServer(
    "interop-python",
    version="1.0.0",
    instructions="A test server for trio-mcp's interop suite.",
)


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
def fail(message: str) -> str:
    """Always fail with ``message`` (a ToolError: the SDK answers with an isError result)."""
    raise ToolError(message)


@server.tool()
async def count_slowly(steps: int, ctx: Context, delay: float = 0.02) -> str:
    """Count to ``steps``, sleeping ``delay`` seconds and reporting progress after each step."""
    for step in range(1, steps + 1):
        await anyio.sleep(delay)
        await ctx.report_progress(step, steps, f"step {step} of {steps}")
    return f"counted to {steps}"


@server.tool()
async def add_tool(name: str, ctx: Context) -> str:
    """Register a tool called ``name`` (it greets) and announce the change to the client."""

    def greet(who: str) -> str:
        return f"{name} greets {who}"

    server.add_tool(greet, name=name, description=f"Greet someone ({name}).")
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        # 2026-07-28: only on the subscriptions/listen streams that asked for it
        await ctx.notify_tools_changed()
    else:
        await ctx.session.send_tool_list_changed()
    return f"added {name}"


@server.resource("interop://greeting", name="greeting", mime_type="text/plain")
def greeting() -> str:
    """A fixed greeting."""
    return "Hello from the Python SDK"


@server.resource("interop://items/{item_id}", name="item", mime_type="application/json")
def item(item_id: str) -> str:
    """One item, as JSON."""
    return json.dumps({"id": item_id, "label": f"item {item_id}"})


@server.prompt()
def review(code: str, language: str = "python") -> str:
    """Ask for a review of ``code``."""
    return f"Please review this {language} code:\n{code}"


class Consent(BaseModel):
    """What ``confirm`` asks the user."""

    ok: bool


def _ask_consent(what: str) -> Elicit[Consent]:
    return Elicit(f"may I {what}?", Consent)


@server.tool()
def confirm(what: str, consent: Annotated[Consent, Resolve(_ask_consent)]) -> str:
    """Ask the user whether ``what`` may be done; say what they answered."""
    return f"{what}: {'yes' if consent.ok else 'no'}"


def _ask_model(question: str) -> Sample:
    message = SamplingMessage(role="user", content=TextContent(type="text", text=question))
    return Sample([message], max_tokens=50)


@server.tool()
def ask_model(question: str, answer: Annotated[CreateMessageResult, Resolve(_ask_model)]) -> str:
    """Ask the client's model ``question``; return its answer's text."""
    content = answer.content
    return content.text if isinstance(content, TextContent) else repr(content)


async def main() -> None:
    lowlevel = server._lowlevel_server
    options = lowlevel.create_initialization_options(NotificationOptions(tools_changed=True))
    async with stdio_server() as (read_stream, write_stream):
        await lowlevel.run(read_stream, write_stream, options)


if __name__ == "__main__":
    anyio.run(main)
