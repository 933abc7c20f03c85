"""The bench's 2026-07-28 clients and servers say what the other clients say.

The raw clients are the floor the modern rows of ``make bench`` measure trio-mcp against, so
they must put the same envelope on the wire: no ``initialize``, ``server/discover`` first, the
``_meta`` envelope in every request and, over HTTP, the headers that mirror its body. The HTTP
client is driven through httpx's ``MockTransport`` (an in-process server, no socket); the stdio
clients through a tiny Python server that records every line it reads.

``bench`` is not installed; :mod:`tests.bench_loader` loads it from its folder.
"""

# ruff: noqa: E402  (the bench's modules are imported once load_bench has made them importable)

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from tests.bench_loader import load_bench

load_bench()

from bench import null_server
from bench.raw_client import MODERN, modern_envelope, open_raw_stdio_client
from bench.raw_http_client import RawHttpClient, header_value
from bench.raw_single_client import open_raw_single_stdio_client
from bench.run import ROWS
from bench.worker import MODERN_SCENARIOS, select

META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
TOOL = {"name": "echo", "inputSchema": {"type": "object"}}
CALL_RESULT = {"content": [{"type": "text", "text": "ok"}], "resultType": "complete"}


def _result(method: str) -> dict[str, Any]:
    if method == "server/discover":
        return {"supportedVersions": [MODERN], "capabilities": {"tools": {}}}
    if method == "tools/list":
        return {"tools": [TOOL]}
    return CALL_RESULT


def _envelope_of(frame: dict[str, Any], client_name: str) -> None:
    assert frame["params"]["_meta"] == {
        META_VERSION: MODERN,
        META_CAPABILITIES: {},
        META_CLIENT_INFO: {"name": client_name, "version": "0"},
    }


async def test_the_modern_raw_http_client_sends_the_envelope_and_the_headers() -> None:
    seen: list[httpx.Request] = []

    def serve(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.method != "POST":
            return httpx.Response(405)
        message = json.loads(request.content)
        answer = {"jsonrpc": "2.0", "id": message["id"], "result": _result(message["method"])}
        return httpx.Response(200, json=answer)

    async with httpx.AsyncClient(transport=httpx.MockTransport(serve)) as http:
        client = RawHttpClient(http, "http://127.0.0.1:1/mcp", modern=True)
        assert [tool["name"] for tool in await client.initialize()] == ["echo"]
        assert await client.call_tool("echo", {"text": "hi"}) == CALL_RESULT
        await client.close()

    frames = [json.loads(request.content) for request in seen]
    assert [frame["method"] for frame in frames] == ["server/discover", "tools/list", "tools/call"]
    for request, frame in zip(seen, frames, strict=True):
        _envelope_of(frame, "raw-bench")
        assert request.headers["mcp-protocol-version"] == MODERN
        assert request.headers["mcp-method"] == frame["method"]
        assert "mcp-session-id" not in request.headers
    assert "mcp-name" not in seen[0].headers
    assert seen[2].headers["mcp-name"] == "echo"
    assert frames[2]["params"]["arguments"] == {"text": "hi"}


def test_a_header_value_is_plain_when_it_can_be_and_base64_otherwise() -> None:
    assert header_value("echo") == "echo"
    assert header_value("héllo") == "=?base64?aMOpbGxv?="
    assert header_value(" padded") == "=?base64?IHBhZGRlZA==?="


#: A stdio server that appends every line it reads to the file named by its first argument and
#: answers each request at once.
_RECORDER = """
import json, sys
log = open(sys.argv[1], "a")
for line in sys.stdin:
    log.write(line)
    log.flush()
    message = json.loads(line)
    method = message["method"]
    if method == "server/discover":
        result = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}}
    elif method == "tools/list":
        result = {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
    else:
        result = {"content": [], "resultType": "complete"}
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
"""


@pytest.mark.parametrize("single", [False, True], ids=["raw", "raw-single"])
async def test_the_modern_raw_stdio_clients_send_the_envelope(tmp_path: Path, single: bool) -> None:
    log = tmp_path / "frames.jsonl"
    argv = [sys.executable, "-c", _RECORDER, str(log)]
    opener = open_raw_single_stdio_client if single else open_raw_stdio_client
    with trio.fail_after(20):
        async with opener(argv, modern=True) as client:
            assert [tool["name"] for tool in await client.initialize()] == ["echo"]
            await client.call_tool("echo", {"text": "hi"})
    frames = [json.loads(line) for line in log.read_text().splitlines()]
    assert [frame["method"] for frame in frames] == ["server/discover", "tools/list", "tools/call"]
    for frame in frames:
        _envelope_of(frame, "raw-single-bench" if single else "raw-bench")
    assert frames[2]["params"]["name"] == "echo"


def test_the_null_server_answers_each_era_in_its_own_shape() -> None:
    envelope = modern_envelope("test")
    call = {"name": "echo", "arguments": {"text": "hi"}}
    legacy = null_server.answer({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call})
    assert legacy == {"jsonrpc": "2.0", "id": 1, "result": null_server.CALL_RESULT}
    request = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {**call, "_meta": envelope},
    }
    # without --modern: a server of the handshake revisions, which ignores the envelope
    assert null_server.answer(request) == {**legacy, "id": 2}
    modern = null_server.answer(request, modern_too=True)
    assert modern is not None
    assert modern["result"]["resultType"] == "complete"
    discover = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "server/discover",
        "params": {"_meta": envelope},
    }
    unknown = null_server.answer(discover)
    assert unknown is not None
    assert unknown["error"]["code"] == -32601
    found = null_server.answer(discover, modern_too=True)
    assert found is not None
    assert found["result"]["supportedVersions"] == [MODERN]
    wrong = {**envelope, META_VERSION: "2099-01-01"}
    refused = null_server.answer(
        {"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": {"_meta": wrong}},
        modern_too=True,
    )
    assert refused is not None
    assert refused["error"]["code"] == -32022
    assert refused["error"]["data"]["supported"] == [MODERN]


def test_every_modern_scenario_has_the_rows_of_its_legacy_namesake() -> None:
    assert select("modern_*") == ([f"modern_{name}" for name in MODERN_SCENARIOS], [])
    for name in MODERN_SCENARIOS:
        legacy = [(spec.key, spec.metric) for spec in ROWS if spec.scenario == name]
        modern = [(spec.key, spec.metric) for spec in ROWS if spec.scenario == f"modern_{name}"]
        assert modern == legacy != []
        assert {spec.section for spec in ROWS if spec.scenario == f"modern_{name}"} == {
            f"{spec.section} (2026-07-28)" for spec in ROWS if spec.scenario == name
        }
