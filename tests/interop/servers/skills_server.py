"""A skills server (``io.modelcontextprotocol/skills``) on the official Python SDK (``mcp`` 2.x).

Run: ``python skills_server.py stdio`` (over stdin/stdout) or ``python skills_server.py http
PORT`` (Streamable HTTP at ``/mcp`` on 127.0.0.1). The SDK serves the extension's methods
(``skills/list``, ``skills/get``, ``resources/directory/read``) through an ``Extension`` of its
own, and the skills' files as ordinary resources. Both eras: the SDK speaks the handshake
revisions and 2026-07-28.

Skills: ``skill://pdf`` (``SKILL.md`` and ``references/FORMS.md``) and
``skill://acme/billing/refunds`` (``SKILL.md`` only); and one entry that breaks the rules
(its path does not end in its name), which the client must skip alone.
"""

from __future__ import annotations

import hashlib
import sys
from typing import Any

import anyio
import uvicorn
from mcp.server.context import ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.lowlevel import NotificationOptions
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.resources import TextResource
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp_types import PaginatedRequestParams, RequestParams
from mcp_types.jsonrpc import INVALID_PARAMS

FILES: dict[str, str] = {
    "skill://pdf/SKILL.md": (
        "---\nname: pdf\ndescription: Work with PDF files.\n---\n\n"
        "Read references/FORMS.md before filling a form.\n"
    ),
    "skill://pdf/references/FORMS.md": "Fill every field; sign at the end.\n",
    "skill://acme/billing/refunds/SKILL.md": (
        "---\nname: refunds\ndescription: Refund a customer.\n---\n\nCheck the order first.\n"
    ),
}
FRONTMATTER: dict[str, dict[str, Any]] = {
    "skill://pdf/SKILL.md": {"name": "pdf", "description": "Work with PDF files."},
    "skill://acme/billing/refunds/SKILL.md": {
        "name": "refunds",
        "description": "Refund a customer.",
    },
}


def _entry(uri: str) -> dict[str, Any]:
    directory = uri.rsplit("/", 1)[0]
    files = [
        {
            "uri": file,
            "digest": "sha256:" + hashlib.sha256(text.encode()).hexdigest(),
            "size": len(text.encode()),
        }
        for file, text in FILES.items()
        if file.startswith(directory + "/")
    ]
    return {"uri": uri, "frontmatter": FRONTMATTER[uri], "resources": files}


BROKEN: dict[str, Any] = {
    "uri": "skill://misnamed/SKILL.md",
    "frontmatter": {"name": "other", "description": "Its path does not end in its name."},
    "resources": "dynamic",
}


class GetParams(RequestParams):
    uri: str


class DirectoryParams(PaginatedRequestParams):
    uri: str


async def list_skills(ctx: ServerRequestContext[Any, Any], params: Any) -> dict[str, Any]:
    """Two pages: the first skill, then the other and the broken entry."""
    entries = [_entry(uri) for uri in FRONTMATTER] + [BROKEN]
    if params.cursor is None:
        return {"skills": entries[:1], "nextCursor": "page-2"}
    return {"skills": entries[1:]}


async def get_skill(ctx: ServerRequestContext[Any, Any], params: Any) -> dict[str, Any]:
    if params.uri not in FRONTMATTER:
        raise MCPError(INVALID_PARAMS, f"Unknown skill: {params.uri}")
    return {"skill": _entry(params.uri)}


async def read_directory(ctx: ServerRequestContext[Any, Any], params: Any) -> dict[str, Any]:
    prefix = params.uri + "/"
    children: dict[str, dict[str, Any]] = {}
    for file in FILES:
        if file.startswith(prefix):
            head, _, tail = file[len(prefix) :].partition("/")
            child = prefix + head
            entry: dict[str, Any] = {"uri": child, "name": head}
            if tail:
                entry["mimeType"] = "inode/directory"
            children[child] = entry
    if not children:
        raise MCPError(INVALID_PARAMS, f"Not a directory: {params.uri}")
    return {"resources": [children[key] for key in sorted(children)]}


class Skills(Extension):
    identifier = "io.modelcontextprotocol/skills"

    def settings(self) -> dict[str, Any]:
        return {"directoryRead": True}

    def methods(self) -> list[MethodBinding]:
        return [
            MethodBinding("skills/list", PaginatedRequestParams, list_skills),
            MethodBinding("skills/get", GetParams, get_skill),
            MethodBinding("resources/directory/read", DirectoryParams, read_directory),
        ]


server = MCPServer("interop-skills", version="1.0.0", extensions=[Skills()])
for _uri, _text in FILES.items():
    server.add_resource(
        TextResource(
            uri=_uri,
            name=_uri.rsplit("/", 1)[1],
            text=_text,
            mime_type="text/markdown" if _uri.endswith(".md") else "text/plain",
        )
    )


async def serve_stdio() -> None:
    lowlevel = server._lowlevel_server
    options = lowlevel.create_initialization_options(NotificationOptions())
    async with stdio_server() as (read_stream, write_stream):
        await lowlevel.run(read_stream, write_stream, options)


def main() -> None:
    if sys.argv[1] == "stdio":
        anyio.run(serve_stdio)
        return
    port = int(sys.argv[2])
    uvicorn.run(
        server.streamable_http_app(host="127.0.0.1"),
        host="127.0.0.1",
        port=port,
        log_level="warning",
    )


if __name__ == "__main__":
    main()
