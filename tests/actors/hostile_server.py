"""A scripted MCP server over stdio (stdlib only) that answers the handshake and then misbehaves
on request: each tool's name says what it does to the answer of its call.

    go       answers normally ({"content": [{"type": "text", "text": "ok"}]})
    deep     first writes one line nested 100,000 deep, then answers normally
    batch    answers inside a JSON array (a batch, which 2025-11-25 does not allow)
    glued    answers with a truncated second message glued to the same line
    cut      answers with the line cut short after the id (`{"jsonrpc":"2.0","id":N,"res`)
    slow     never answers
    flood    answers, then writes notifications/progress without pause (--flood N of them,
             default forever), then a notifications/message "flood end"

Run: ``python hostile_server.py [--flood N]``; it writes "hostile server starting" to stderr.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

TOOLS = ("go", "deep", "batch", "glued", "cut", "slow", "flood")

_lock = threading.Lock()
out = sys.stdout.buffer


def write(data: bytes) -> None:
    with _lock:
        out.write(data)
        out.flush()


def send(message: dict[str, Any]) -> None:
    write(json.dumps(message, separators=(",", ":")).encode() + b"\n")


def flood(count: int) -> None:
    progress = (
        b'{"jsonrpc":"2.0","method":"notifications/progress",'
        b'"params":{"progressToken":"nobody","progress":1}}\n'
    )
    block = progress * 200
    sent = 0
    while count <= 0 or sent < count:
        write(block)
        sent += 200
    send(
        {
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": {"level": "info", "data": "flood end"},
        }
    )


def answer(request_id: Any, tool: str, flood_count: int) -> None:
    ok = {
        "jsonrpc": "2.0",
        "id": request_id,
        "result": {"content": [{"type": "text", "text": "ok"}]},
    }
    line = json.dumps(ok, separators=(",", ":")).encode()
    if tool == "go":
        write(line + b"\n")
    elif tool == "deep":
        write(b"[" * 100_000 + b"]" * 100_000 + b"\n")
        write(line + b"\n")
    elif tool == "batch":
        write(b"[" + line + b"]\n")
    elif tool == "glued":
        write(line + b'{"jsonrp\n')
    elif tool == "cut":
        write(f'{{"jsonrpc":"2.0","id":{json.dumps(request_id)},"res'.encode() + b"\n")
    elif tool == "flood":
        write(line + b"\n")
        threading.Thread(target=flood, args=(flood_count,), daemon=True).start()
    # "slow": never answered


def main(argv: list[str]) -> None:
    flood_count = int(argv[argv.index("--flood") + 1]) if "--flood" in argv else 0
    sys.stderr.write("hostile server starting\n")
    sys.stderr.flush()
    for raw in sys.stdin.buffer:
        message = json.loads(raw)
        method, request_id = message.get("method"), message.get("id")
        if method == "initialize":
            send(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "result": {
                        "protocolVersion": message["params"]["protocolVersion"],
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "hostile", "version": "1"},
                    },
                }
            )
        elif method == "tools/list":
            tools = [{"name": name, "inputSchema": {"type": "object"}} for name in TOOLS]
            send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": tools}})
        elif method == "tools/call":
            answer(request_id, message["params"]["name"], flood_count)
        elif request_id is not None:
            send({"jsonrpc": "2.0", "id": request_id, "result": {}})


if __name__ == "__main__":
    main(sys.argv[1:])
