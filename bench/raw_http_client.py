"""A minimal raw trio + httpx Streamable HTTP client: the floor for the HTTP rows.

It does what any correct client of a Streamable HTTP server must do and nothing more: one
``httpx.AsyncClient`` (keep-alive, a pool large enough for every call in flight), one POST per
message with the session id the server gave, a JSON body read with ``json`` or an SSE body cut
into events and the first ``message`` event's data parsed. No validation, no schema, no GET
stream, no resumption, no supervision.

With ``modern=True`` it speaks the stateless 2026-07-28 revision: no ``initialize``, no session
(no ``Mcp-Session-Id``, no DELETE); every request carries the envelope in its ``_meta`` (the
dict of :func:`~bench.raw_client.modern_envelope`, built once) and the headers that mirror its
body: ``MCP-Protocol-Version``, ``Mcp-Method`` and, on ``tools/call``, ``Mcp-Name``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any

import httpx

from .raw_client import MODERN, modern_envelope

__all__ = ["RawHttpClient", "RawHttpError", "header_value", "open_raw_http_client"]

_ACCEPT = "application/json, text/event-stream"


class RawHttpError(Exception):
    """The server answered with an error status, a body without a response, or a JSON-RPC
    error (the message says which)."""


class RawHttpClient:
    """One session: ``await client.request(method, params)`` returns the raw ``result``.

    Raises :class:`RawHttpError` for an error status, an answer without a response or a JSON-RPC
    error, and ``httpx`` errors when the server cannot be reached."""

    client_name = "raw-bench"

    def __init__(self, http: httpx.AsyncClient, url: str, *, modern: bool = False) -> None:
        self._http = http
        self._url = url
        self._headers = {"accept": _ACCEPT, "content-type": "application/json"}
        self._next_id = 1
        #: The 2026-07-28 envelope, built once; None: the handshake revisions.
        self.envelope: dict[str, Any] | None = None
        if modern:
            self.envelope = modern_envelope(self.client_name)
            self._headers["mcp-protocol-version"] = MODERN

    async def _post(
        self, message: dict[str, Any], headers: dict[str, str] | None = None
    ) -> httpx.Response:
        body = json.dumps(message, separators=(",", ":")).encode()
        response = await self._http.post(
            self._url, content=body, headers=self._headers if headers is None else headers
        )
        if response.status_code >= 400:
            raise RawHttpError(f"{message.get('method')}: HTTP {response.status_code}")
        return response

    def _modern_headers(self, method: str, params: dict[str, Any] | None) -> dict[str, str]:
        """The headers of one 2026-07-28 request: the fixed ones, ``Mcp-Method`` and, on
        ``tools/call``, ``Mcp-Name``."""
        headers = {**self._headers, "mcp-method": method}
        if method == "tools/call" and params is not None:
            headers["mcp-name"] = header_value(params["name"])
        return headers

    async def request(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """POST one request and return its result (in 2026-07-28 with the envelope in its
        ``_meta``, unless ``params`` has a ``_meta`` already, and the mirrored headers)."""
        rid = self._next_id
        self._next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        headers = None
        if self.envelope is not None:
            if params is None:
                params = {"_meta": self.envelope}
            elif "_meta" not in params:
                params = {**params, "_meta": self.envelope}
            headers = self._modern_headers(method, params)
        if params is not None:
            message["params"] = params
        response = await self._post(message, headers)
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
        """The handshake, then ``tools/list``; returns the tools. In 2026-07-28:
        ``server/discover`` (which must offer that revision), then ``tools/list``."""
        if self.envelope is not None:
            found = await self.request("server/discover")
            if MODERN not in found.get("supportedVersions", ()):
                raise RawHttpError(f"the server does not speak {MODERN}: {found}")
            modern_listing = await self.request("tools/list")
            modern_tools: list[dict[str, Any]] = modern_listing["tools"]
            return modern_tools
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
        if self.envelope is not None:
            return await self.request(
                "tools/call", {"name": name, "arguments": arguments, "_meta": self.envelope}
            )
        return await self.request("tools/call", {"name": name, "arguments": arguments})

    async def close(self) -> None:
        """End the session (DELETE); a server that is gone is fine."""
        if "mcp-session-id" in self._headers:
            with suppress(httpx.HTTPError):
                await self._http.delete(self._url, headers=self._headers)


def header_value(value: str) -> str:
    """``value`` as a 2026-07-28 header carries it: as it is when it is printable ASCII without
    a space at either end, else ``=?base64?{Base64(UTF-8)}?=``."""
    plain = value.isascii() and value.isprintable() and "=?" not in value
    if plain and value == value.strip(" "):
        return value
    return f"=?base64?{base64.b64encode(value.encode()).decode()}?="


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
async def open_raw_http_client(
    url: str, *, connections: int = 64, modern: bool = False
) -> AsyncIterator[RawHttpClient]:
    """A client for the MCP endpoint ``url`` (not yet initialized), with up to ``connections``
    keep-alive connections; ``modern``: it speaks 2026-07-28. Leaving ends the session (if
    there is one) and closes the connections."""
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    async with httpx.AsyncClient(limits=limits, timeout=30.0) as http:
        client = RawHttpClient(http, url, modern=modern)
        try:
            yield client
        finally:
            await client.close()
