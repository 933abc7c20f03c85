"""The null MCP server in Python, for machines without Node.js (``--server python``).

Same answers as ``null_server.js``: initialize, tools/list (one tool ``echo``), tools/call at once
(never, when the arguments hold ``"hang": true``), ping, -32601 for anything else; and, like it,
with ``--modern``, the stateless 2026-07-28 revision beside them: ``server/discover``, and
every request whose ``params._meta`` names a protocol version answered in that revision (-32022
for another version than 2026-07-28, -32602 without the client's capabilities, ``resultType`` in
every result). Standard
library only; it reads what is available on stdin and writes all the answers to it at once. It is
slower than the Node.js server (about 20 µs per message), so prefer that one.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

TOOL = {
    "name": "echo",
    "description": "Answers at once.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
}
CALL_RESULT = {"content": [{"type": "text", "text": "ok"}], "isError": False}
SERVER_INFO = {"name": "bench-null", "version": "1.0.0"}

MODERN = "2026-07-28"
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
MODERN_CALL_RESULT = {**CALL_RESULT, "resultType": "complete"}
MODERN_LIST_RESULT = {
    "tools": [TOOL],
    "resultType": "complete",
    "ttlMs": 0,
    "cacheScope": "private",
}
DISCOVER_RESULT = {
    "supportedVersions": [MODERN],
    "capabilities": {"tools": {"listChanged": False}},
    "resultType": "complete",
    "ttlMs": 0,
    "cacheScope": "private",
    "_meta": {"io.modelcontextprotocol/serverInfo": SERVER_INFO},
}


def answer_modern(
    rid: Any, method: str, params: dict[str, Any], meta: Any
) -> dict[str, Any] | None:
    """A 2026-07-28 request: its answer, or None for a call that hangs."""
    if meta[META_VERSION] != MODERN:
        data = {"supported": [MODERN], "requested": str(meta[META_VERSION])}
        error = {"code": -32022, "message": "Unsupported protocol version", "data": data}
        return {"jsonrpc": "2.0", "id": rid, "error": error}
    if not isinstance(meta.get(META_CAPABILITIES), dict):
        error = {"code": -32602, "message": "Invalid params: _meta has no clientCapabilities"}
        return {"jsonrpc": "2.0", "id": rid, "error": error}
    if method == "tools/call":
        if (params.get("arguments") or {}).get("hang"):
            return None
        return {"jsonrpc": "2.0", "id": rid, "result": MODERN_CALL_RESULT}
    if method == "server/discover":
        return {"jsonrpc": "2.0", "id": rid, "result": DISCOVER_RESULT}
    if method == "tools/list":
        return {"jsonrpc": "2.0", "id": rid, "result": MODERN_LIST_RESULT}
    error = {"code": -32601, "message": f"Method not found: {method}"}
    return {"jsonrpc": "2.0", "id": rid, "error": error}


def answer(msg: Any, *, modern_too: bool = False) -> dict[str, Any] | None:
    """The answer to one message (None: none, or not yet); ``modern_too``: 2026-07-28 too
    (``--modern``)."""
    if not isinstance(msg, dict) or "id" not in msg or not isinstance(msg.get("method"), str):
        return None
    rid, method, params = msg["id"], msg["method"], msg.get("params") or {}
    meta = params.get("_meta")
    if modern_too and isinstance(meta, dict) and META_VERSION in meta:
        return answer_modern(rid, method, params, meta)
    if method == "tools/call":
        if (params.get("arguments") or {}).get("hang"):
            return None
        return {"jsonrpc": "2.0", "id": rid, "result": CALL_RESULT}
    if method == "initialize":
        result = {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": SERVER_INFO,
        }
        return {"jsonrpc": "2.0", "id": rid, "result": result}
    if method == "tools/list":
        return {"jsonrpc": "2.0", "id": rid, "result": {"tools": [TOOL]}}
    if method == "ping":
        return {"jsonrpc": "2.0", "id": rid, "result": {}}
    error = {"code": -32601, "message": f"Method not found: {method}"}
    return {"jsonrpc": "2.0", "id": rid, "error": error}


def main() -> None:
    modern_too = "--modern" in sys.argv[1:]
    stdin, stdout = sys.stdin.fileno(), sys.stdout.fileno()
    pending = b""
    while chunk := os.read(stdin, 65536):
        *lines, pending = (pending + chunk).split(b"\n")
        out = []
        for line in lines:
            if line.strip():
                reply = answer(json.loads(line), modern_too=modern_too)
                if reply is not None:
                    out.append(json.dumps(reply, separators=(",", ":")).encode() + b"\n")
        if out:
            data = b"".join(out)
            while data:
                data = data[os.write(stdout, data) :]


if __name__ == "__main__":
    main()
