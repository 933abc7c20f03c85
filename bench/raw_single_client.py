"""A raw trio JSON-RPC client over stdio with no reader task: the floor for one call at a time.

The caller writes its request and then reads the server's stdout itself until its answer
arrives; nothing else runs. It can make one call at a time only (a second caller would read the
first one's answer), so it has no lock, no table of waiters and no task of its own. It talks to
the pipes with ``os.write`` / ``os.read`` on their non-blocking descriptors and waits in trio
only when a pipe is full or empty, so a call costs one scheduler pass: the caller's, woken when
the answer is readable. Messages that are not the answer (notifications) are skipped. When
stdout ends the pending call fails with :class:`~bench.raw_client.RawClientClosed`.
``modern=True``: it speaks 2026-07-28, as :mod:`bench.raw_client` does.

Compare :mod:`bench.raw_client`, the multiplexing floor (a reader task and an event per call).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import trio

from .raw_client import _ENV_ALLOWLIST, RawClientClosed, _RawMethods, modern_envelope

__all__ = ["RawSingleStdioClient", "open_raw_single_stdio_client"]


class RawSingleStdioClient(_RawMethods):
    """One connection, one call at a time: ``await client.request(method, params)`` returns the
    raw ``result``. Raises :class:`RawClientClosed` when the server goes away,
    :class:`RuntimeError` with the server's error object when it answers with an error, and
    :class:`trio.BusyResourceError` when a second call starts while one is running."""

    client_name = "raw-single-bench"

    def __init__(self, process: trio.Process, *, modern: bool = False) -> None:
        if modern:
            self.envelope = modern_envelope(self.client_name)
        # On Unix trio's process pipes are FdStreams: non-blocking descriptors.
        assert isinstance(process.stdin, trio.lowlevel.FdStream)
        assert isinstance(process.stdout, trio.lowlevel.FdStream)
        self.process = process
        self._in = process.stdin.fileno()
        self._out = process.stdout.fileno()
        self._buffer = b""
        self._next_id = 1
        self._busy = False

    async def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self._in, view) :]
            except BlockingIOError:
                await trio.lowlevel.wait_writable(self._in)
            except OSError as exc:
                raise RawClientClosed("the server is gone") from exc

    async def _read_answer(self, rid: int) -> dict[str, Any]:
        while True:
            while (newline := self._buffer.find(b"\n")) >= 0:
                line, self._buffer = self._buffer[:newline], self._buffer[newline + 1 :]
                if not line.strip():
                    continue
                message: dict[str, Any] = json.loads(line)
                if message.get("id") == rid:
                    return message
            try:
                chunk = os.read(self._out, 65536)
            except BlockingIOError:
                await trio.lowlevel.wait_readable(self._out)
                continue
            except OSError as exc:
                raise RawClientClosed("the server's stdout failed") from exc
            if not chunk:
                raise RawClientClosed("the server's stdout ended")
            self._buffer += chunk

    async def request(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """Send one request and read until its answer."""
        if self._busy:
            raise trio.BusyResourceError("RawSingleStdioClient makes one call at a time")
        self._busy = True
        try:
            rid = self._next_id
            self._next_id += 1
            message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
            if params is not None:
                message["params"] = params
            await self._write(json.dumps(message, separators=(",", ":")).encode() + b"\n")
            answer = await self._read_answer(rid)
        finally:
            self._busy = False
        if "error" in answer:
            raise RuntimeError(answer["error"])
        return answer["result"]

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send one notification."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self._write(json.dumps(message).encode() + b"\n")


@asynccontextmanager
async def open_raw_single_stdio_client(
    argv: Sequence[str], *, modern: bool = False
) -> AsyncIterator[RawSingleStdioClient]:
    """Start ``argv`` and yield a connected (not yet initialized) client; ``modern``: it speaks
    2026-07-28. Leaving closes the server's stdin, waits up to 2 s for it to exit, then kills
    it."""
    process = await trio.lowlevel.open_process(
        list(argv),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={name: os.environ[name] for name in _ENV_ALLOWLIST if name in os.environ},
    )
    try:
        yield RawSingleStdioClient(process, modern=modern)
    finally:
        with trio.CancelScope(shield=True):
            assert process.stdin is not None
            assert process.stdout is not None
            await process.stdin.aclose()
            with trio.move_on_after(2):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()
            await process.stdout.aclose()
