"""The null MCP server in Python, for machines without Node.js (``--server python``).

Same answers as ``null_server.js``: initialize, tools/list (one tool ``echo``), tools/call at once
(never, when the arguments hold ``"hang": true``), ping, -32601 for anything else. Standard
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


def answer(msg: Any) -> dict[str, Any] | None:
    if not isinstance(msg, dict) or "id" not in msg or not isinstance(msg.get("method"), str):
        return None
    rid, method, params = msg["id"], msg["method"], msg.get("params") or {}
    if method == "tools/call":
        if (params.get("arguments") or {}).get("hang"):
            return None
        return {"jsonrpc": "2.0", "id": rid, "result": CALL_RESULT}
    if method == "initialize":
        result = {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "bench-null", "version": "1.0.0"},
        }
        return {"jsonrpc": "2.0", "id": rid, "result": result}
    if method == "tools/list":
        return {"jsonrpc": "2.0", "id": rid, "result": {"tools": [TOOL]}}
    if method == "ping":
        return {"jsonrpc": "2.0", "id": rid, "result": {}}
    error = {"code": -32601, "message": f"Method not found: {method}"}
    return {"jsonrpc": "2.0", "id": rid, "error": error}


def main() -> None:
    stdin, stdout = sys.stdin.fileno(), sys.stdout.fileno()
    pending = b""
    while chunk := os.read(stdin, 65536):
        *lines, pending = (pending + chunk).split(b"\n")
        out = []
        for line in lines:
            if line.strip():
                reply = answer(json.loads(line))
                if reply is not None:
                    out.append(json.dumps(reply, separators=(",", ":")).encode() + b"\n")
        if out:
            data = b"".join(out)
            while data:
                data = data[os.write(stdout, data) :]


if __name__ == "__main__":
    main()
