"""A minimal raw trio + httpx Streamable HTTP client: the floor for the HTTP rows.

It does what any correct client of a Streamable HTTP server must do and nothing more: one
``httpx.AsyncClient`` (keep-alive, a pool large enough for every call in flight), one POST per
message with the session id the server gave, a JSON body read with ``json`` or an SSE body cut
into events and the first ``message`` event's data parsed. No validation, no schema, no GET
stream, no resumption, no supervision.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any

import httpx

__all__ = ["RawHttpClient", "RawHttpError", "open_raw_http_client"]

_ACCEPT = "application/json, text/event-stream"


class RawHttpError(Exception):
    """The server answered with an error status, a body without a response, or a JSON-RPC
    error (the message says which)."""


class RawHttpClient:
    """One session: ``await client.request(method, params)`` returns the raw ``result``.

    Raises :class:`RawHttpError` for an error status, an answer without a response or a JSON-RPC
    error, and ``httpx`` errors when the server cannot be reached."""

    def __init__(self, http: httpx.AsyncClient, url: str) -> None:
        self._http = http
        self._url = url
        self._headers = {"accept": _ACCEPT, "content-type": "application/json"}
        self._next_id = 1

    async def _post(self, message: dict[str, Any]) -> httpx.Response:
        body = json.dumps(message, separators=(",", ":")).encode()
        response = await self._http.post(self._url, content=body, headers=self._headers)
        if response.status_code >= 400:
            raise RawHttpError(f"{message.get('method')}: HTTP {response.status_code}")
        return response

    async def request(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """POST one request and return its result."""
        rid = self._next_id
        self._next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        response = await self._post(message)
        session = response.headers.get("mcp-session-id")
        if session is not None:
            self._headers["mcp-session-id"] = session
        answer = _decode(response)
        if "error" in answer:
            raise RawHttpError(f"{method}: {answer['error']}")
        return answer["result"]

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """POST one notification (the server answers 202)."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self._post(message)

    async def initialize(self) -> list[dict[str, Any]]:
        """The handshake, then ``tools/list``; returns the tools."""
        result = await self.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw-bench", "version": "0"},
            },
        )
        self._headers["mcp-protocol-version"] = result["protocolVersion"]
        await self.notify("notifications/initialized")
        listing = await self.request("tools/list")
        tools: list[dict[str, Any]] = listing["tools"]
        return tools

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        """``tools/call``; the raw result."""
        return await self.request("tools/call", {"name": name, "arguments": arguments})

    async def close(self) -> None:
        """End the session (DELETE); a server that is gone is fine."""
        if "mcp-session-id" in self._headers:
            with suppress(httpx.HTTPError):
                await self._http.delete(self._url, headers=self._headers)


def _decode(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC response in a JSON body or in the first ``message`` event of an SSE body."""
    kind = response.headers.get("content-type", "")
    if kind.startswith("application/json"):
        answer: dict[str, Any] = json.loads(response.content)
        return answer
    if kind.startswith("text/event-stream"):
        for event in response.text.split("\n\n"):
            data = [line[5:].lstrip() for line in event.split("\n") if line.startswith("data:")]
            event_type = next(
                (line[6:].strip() for line in event.split("\n") if line.startswith("event:")),
                "message",
            )
            if data and event_type == "message" and any(data):
                found: dict[str, Any] = json.loads("\n".join(data))
                return found
    raise RawHttpError(f"no response in a {kind or 'untyped'} answer")


@asynccontextmanager
async def open_raw_http_client(url: str, *, connections: int = 64) -> AsyncIterator[RawHttpClient]:
    """A client for the MCP endpoint ``url`` (not yet initialized), with up to ``connections``
    keep-alive connections. Leaving ends the session and closes the connections."""
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    async with httpx.AsyncClient(limits=limits, timeout=30.0) as http:
        client = RawHttpClient(http, url)
        try:
            yield client
        finally:
            await client.close()
