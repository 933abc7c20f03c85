"""A minimal raw trio JSON-RPC client over stdio: the floor the other clients are measured against.

It does what any correct multiplexing client must do and nothing more: one reader task that cuts
stdout into lines and resolves waiters by id, one lock around writes (trio streams refuse
concurrent sends), ``json`` from the standard library, no validation, no schema, no supervision.
When stdout ends every pending call fails at once with :class:`RawClientClosed`.

With ``modern=True`` it speaks the stateless 2026-07-28 revision instead of the handshake ones:
no ``initialize``; ``server/discover`` and every later request carry the request envelope
(:func:`modern_envelope`: the version, the client's capabilities, ``clientInfo``) in their
``_meta``, one dict built once per connection, as a client that speaks that revision must.
"""

from __future__ import annotations

import json
import os
import subprocess
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import trio

__all__ = [
    "MODERN",
    "RawClientClosed",
    "RawStdioClient",
    "modern_envelope",
    "open_raw_stdio_client",
]

_ENV_ALLOWLIST = ("HOME", "LANG", "LOGNAME", "PATH", "SHELL", "TERM", "USER")
#: The stateless revision the ``modern`` raw clients speak.
MODERN = "2026-07-28"


def modern_envelope(client_name: str) -> dict[str, Any]:
    """The ``_meta`` envelope of a 2026-07-28 request: the revision, the client's capabilities
    (none: the bench answers no server requests) and its ``clientInfo``; the same keys
    trio-mcp's session and the official SDK put there."""
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": client_name, "version": "0"},
    }


class RawClientClosed(Exception):
    """The server's stdout ended (it exited or was killed) while a call was pending."""


class _RawMethods(ABC):
    """The handshake and ``tools/call`` of both raw clients, over their own ``request`` and
    ``notify``; in 2026-07-28 (``envelope`` set) no handshake, and the envelope in every
    request's ``_meta``."""

    #: The ``clientInfo`` name the handshake (or the envelope) sends.
    client_name = "raw-bench"
    #: The 2026-07-28 envelope, built once; None: the handshake revisions.
    envelope: dict[str, Any] | None = None

    @abstractmethod
    async def request(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """Send one request; the raw ``result`` of its answer."""

    @abstractmethod
    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send one notification."""

    async def initialize(self) -> list[dict[str, Any]]:
        """The handshake, then ``tools/list``; returns the tools. In 2026-07-28:
        ``server/discover`` (which must offer that revision), then ``tools/list``."""
        if self.envelope is not None:
            found = await self.request("server/discover", {"_meta": self.envelope})
            if MODERN not in found.get("supportedVersions", ()):
                raise RuntimeError(f"the server does not speak {MODERN}: {found}")
            listing = await self.request("tools/list", {"_meta": self.envelope})
            modern_tools: list[dict[str, Any]] = listing["tools"]
            return modern_tools
        await self.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": self.client_name, "version": "0"},
            },
        )
        await self.notify("notifications/initialized")
        result = await self.request("tools/list")
        tools: list[dict[str, Any]] = result["tools"]
        return tools

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        """``tools/call``; the raw result."""
        if self.envelope is not None:
            return await self.request(
                "tools/call", {"name": name, "arguments": arguments, "_meta": self.envelope}
            )
        return await self.request("tools/call", {"name": name, "arguments": arguments})


class _Slot:
    __slots__ = ("event", "value")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.value: Any = None


class RawStdioClient(_RawMethods):
    """One connection: ``await client.request(method, params)`` returns the raw ``result``.

    Raises :class:`RawClientClosed` when the server goes away, and :class:`RuntimeError` with
    the server's error object when it answers with a JSON-RPC error.
    """

    def __init__(self, process: trio.Process, *, modern: bool = False) -> None:
        assert process.stdin is not None
        if modern:
            self.envelope = modern_envelope(self.client_name)
        self.process = process
        self._stdin = process.stdin
        self._lock = trio.Lock()
        self._pending: dict[int, _Slot] = {}
        self._next_id = 1
        self._closed = False

    async def request(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """Send one request and wait for its answer."""
        if self._closed:
            raise RawClientClosed("the server is gone")
        rid = self._next_id
        self._next_id += 1
        slot = _Slot()
        self._pending[rid] = slot
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        data = json.dumps(message, separators=(",", ":")).encode() + b"\n"
        try:
            async with self._lock:
                await self._stdin.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            self._pending.pop(rid, None)
            raise RawClientClosed("the server is gone") from exc
        await slot.event.wait()
        answer = slot.value
        if isinstance(answer, Exception):
            raise answer
        if "error" in answer:
            raise RuntimeError(answer["error"])
        return answer["result"]

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send one notification."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        async with self._lock:
            await self._stdin.send_all(json.dumps(message).encode() + b"\n")

    async def reader(self) -> None:
        """Read answers until stdout ends, then fail whatever is still pending."""
        stdout = self.process.stdout
        assert stdout is not None
        buffer = b""
        try:
            while chunk := await stdout.receive_some(65536):
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if not line.strip():
                        continue
                    message = json.loads(line)
                    slot = self._pending.pop(message.get("id"), None)
                    if slot is not None:
                        slot.value = message
                        slot.event.set()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            self._closed = True
            pending, self._pending = self._pending, {}
            for slot in pending.values():
                slot.value = RawClientClosed("the server's stdout ended")
                slot.event.set()


@asynccontextmanager
async def open_raw_stdio_client(
    argv: Sequence[str], *, modern: bool = False
) -> AsyncIterator[RawStdioClient]:
    """Start ``argv`` and yield a connected (not yet initialized) client; ``modern``: it speaks
    2026-07-28. Leaving closes the server's stdin, waits up to 2 s for it to exit, then kills it.

    The server gets a small environment, as the other two clients give theirs (the host's
    whole environment can slow a server's start: ``NODE_EXTRA_CA_CERTS`` costs Node.js 40 ms)."""
    process = await trio.lowlevel.open_process(
        list(argv),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={name: os.environ[name] for name in _ENV_ALLOWLIST if name in os.environ},
    )
    client = RawStdioClient(process, modern=modern)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(client.reader)
        try:
            yield client
        finally:
            with trio.CancelScope(shield=True):
                await client._stdin.aclose()
                with trio.move_on_after(2):
                    await process.wait()
                if process.returncode is None:
                    process.kill()
                    await process.wait()
            nursery.cancel_scope.cancel()
