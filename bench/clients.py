"""The clients under test, behind one small interface, and the servers they talk to.

A *target* says how to reach a null server (today :class:`StdioTarget`; a Streamable HTTP target
adds a class here and one branch per client in :func:`open_connection`). A *client* is one of
:data:`CLIENTS`: ``trio-mcp``, ``official`` (the ``mcp`` SDK's ``Client``, run under trio) and
``raw`` (:mod:`bench.raw_client`). For each pair, :func:`open_connection` yields a
:class:`Connection` that is connected, initialized and has listed the server's tools:

- ``await conn.call()`` makes one ``tools/call`` and checks the answer;
- ``await conn.call_hang()`` makes one call the server never answers (it fails only when the
  connection dies);
- ``conn.server_pid()`` is the server process's pid (found by the unique tag on its command line).

trio-mcp's connection also has ``await conn.wait_tools_again()``: it returns once its supervisor
has reconnected a server that died and registered its tools again (the other two clients have no
such thing: the restart scenario reconnects them the way a host has to).

:func:`open_fleet` connects many servers at once and returns once every one has listed its tools.

trio-mcp and the official SDK are imported only by the openers that need them, so a worker
measuring one client never pays for importing another (the memory rows rely on it).
"""

from __future__ import annotations

import os
import secrets
import shutil
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final, Literal, Protocol

import attrs
import trio

from .raw_client import RawStdioClient, open_raw_stdio_client

__all__ = [
    "CLIENTS",
    "GIVE_UP_AFTER",
    "ClientName",
    "Connection",
    "StdioTarget",
    "TrioMcpConnection",
    "find_pid",
    "null_stdio_target",
    "open_connection",
    "open_fleet",
]

ClientName = Literal["trio-mcp", "official", "raw"]
CLIENTS: Final[tuple[ClientName, ...]] = ("trio-mcp", "official", "raw")

HERE: Final = Path(__file__).resolve().parent
TOOL: Final = "echo"
ARGUMENTS: Final[dict[str, Any]] = {"text": "hi"}
HANG_ARGUMENTS: Final[dict[str, Any]] = {"text": "hi", "hang": True}
#: How long a death or restart measurement waits before it calls the client hung (seconds).
GIVE_UP_AFTER: Final = 5.0


@attrs.frozen(kw_only=True)
class StdioTarget:
    """A null server started as a subprocess: ``argv`` plus a unique ``--tag=`` per start, so
    the benchmark can find the server's pid whichever client started it."""

    argv: tuple[str, ...]
    kind: str

    def tagged(self) -> tuple[str, ...]:
        return (*self.argv, f"--tag={secrets.token_hex(8)}")


def null_stdio_target(kind: Literal["node", "python"] = "node") -> StdioTarget:
    """The null stdio server: Node.js (``null_server.js``) or the Python fallback."""
    if kind == "node":
        node = shutil.which("node")
        if node is None:
            raise SystemExit("node is not on PATH: install Node.js, or run with --server python")
        return StdioTarget(argv=(node, str(HERE / "null_server.js")), kind="node")
    return StdioTarget(argv=(sys.executable, str(HERE / "null_server.py")), kind="python")


def find_pid(argv: Sequence[str]) -> int:
    """The pid of the process whose command line is exactly ``argv`` (tagged, so unique)."""
    wanted = "\0".join(argv).encode() + b"\0"
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if f.read() == wanted:
                    return int(entry)
        except OSError:
            continue
    raise LookupError(f"no process runs {' '.join(argv)!r}")


class Connection(Protocol):
    """One connected client, ready to call the null server's tool."""

    async def call(self) -> None: ...
    async def call_hang(self) -> None: ...
    def server_pid(self) -> int: ...


# --------------------------------------------------------------------------- trio-mcp


def _trio_mcp_config(argvs: Sequence[tuple[str, ...]], *, restart_at_once: bool = False) -> Any:
    from trio_mcp.actors import RetryPolicy, RuntimeConfig, ServerConfig

    servers = tuple(
        ServerConfig(
            name=f"null{index}",
            command=argv[0],
            args=argv[1:],
            connect_timeout=30,
            timeout=30,
        )
        for index, argv in enumerate(argvs)
    )
    if not restart_at_once:
        return RuntimeConfig(servers=servers)
    # Reconnect at once after a drop (no backoff), so the restart row measures the mechanism.
    return RuntimeConfig(servers=servers, retry=RetryPolicy(reconnect_initial=0.0, jitter=0.0))


class TrioMcpConnection:
    """A runtime with one server, ``null0``; its tool is registered as ``mcp_null0_echo``."""

    def __init__(self, runtime: Any, argv: tuple[str, ...]) -> None:
        self.rt = runtime
        self.argv = argv
        self.name = "mcp_null0_echo"

    async def call(self) -> None:
        result = await self.rt.call(self.name, ARGUMENTS)
        if result.is_error:
            raise AssertionError(f"the tool failed: {result}")

    async def call_hang(self) -> None:
        await self.rt.call(self.name, HANG_ARGUMENTS)

    def server_pid(self) -> int:
        return find_pid(self.argv)

    async def wait_tools_again(self) -> None:
        from trio_mcp.actors import ServerState

        # First the withdrawal (the drop), then the new registration by the new connection.
        while self.rt.registry.get(self.name) is not None:
            await self.rt.wait_tools_changed(self.rt.tools_version)
        while (
            self.rt.registry.get(self.name) is None
            or self.rt.status()["null0"].state is not ServerState.READY
        ):
            await self.rt.wait_tools_changed(self.rt.tools_version)


@asynccontextmanager
async def _open_trio_mcp(
    target: StdioTarget, *, restart_at_once: bool = False
) -> AsyncIterator[TrioMcpConnection]:
    from trio_mcp.actors import open_runtime

    argv = target.tagged()
    async with open_runtime(_trio_mcp_config([argv], restart_at_once=restart_at_once)) as rt:
        await rt.wait_ready(timeout=30)
        if rt.registry.get("mcp_null0_echo") is None:
            raise RuntimeError(f"trio-mcp did not register the tool: {rt.status()}")
        yield TrioMcpConnection(rt, argv)


# --------------------------------------------------------------------------- official SDK


class OfficialConnection:
    """An entered ``mcp.Client``."""

    def __init__(self, client: Any, argv: tuple[str, ...]) -> None:
        self.client = client
        self.argv = argv

    async def call(self) -> None:
        result = await self.client.call_tool(TOOL, ARGUMENTS)
        if result.is_error:
            raise AssertionError(f"the tool failed: {result}")

    async def call_hang(self) -> None:
        await self.client.call_tool(TOOL, HANG_ARGUMENTS)

    def server_pid(self) -> int:
        return find_pid(self.argv)


@asynccontextmanager
async def _open_official(target: StdioTarget) -> AsyncIterator[OfficialConnection]:
    from mcp import Client, StdioServerParameters

    argv = target.tagged()
    params = StdioServerParameters(command=argv[0], args=list(argv[1:]))
    async with Client(params, mode="legacy") as client:
        tools = await client.list_tools()
        if [tool.name for tool in tools.tools] != [TOOL]:
            raise RuntimeError(f"unexpected tools: {tools}")
        yield OfficialConnection(client, argv)


# --------------------------------------------------------------------------- raw client


class RawConnection:
    """An initialized :class:`RawStdioClient`."""

    def __init__(self, client: RawStdioClient, argv: tuple[str, ...]) -> None:
        self.client = client
        self.argv = argv

    async def call(self) -> None:
        result = await self.client.call_tool(TOOL, ARGUMENTS)
        if result.get("isError"):
            raise AssertionError(f"the tool failed: {result}")

    async def call_hang(self) -> None:
        await self.client.call_tool(TOOL, HANG_ARGUMENTS)

    def server_pid(self) -> int:
        return find_pid(self.argv)


@asynccontextmanager
async def _open_raw(target: StdioTarget) -> AsyncIterator[RawConnection]:
    argv = target.tagged()
    async with open_raw_stdio_client(argv) as client:
        tools = await client.initialize()
        if [tool["name"] for tool in tools] != [TOOL]:
            raise RuntimeError(f"unexpected tools: {tools}")
        yield RawConnection(client, argv)


# --------------------------------------------------------------------------- entry points


def open_connection(
    client: ClientName, target: StdioTarget, *, restart_at_once: bool = False
) -> Any:
    """An async context manager yielding a ready :class:`Connection` of ``client`` to
    ``target``. ``restart_at_once``: trio-mcp reconnects a dead server without its backoff
    (the default waits about 1 s first). Raises :class:`ValueError` for an unknown client."""
    if client == "trio-mcp":
        return _open_trio_mcp(target, restart_at_once=restart_at_once)
    if client == "official":
        return _open_official(target)
    if client == "raw":
        return _open_raw(target)
    raise ValueError(f"unknown client {client!r}; choose from {', '.join(CLIENTS)}")


@asynccontextmanager
async def open_fleet(client: ClientName, target: StdioTarget, count: int) -> AsyncIterator[int]:
    """Connect ``count`` servers at once; enter once every one has listed its tools (yields
    how many tools are usable). Leaving disconnects them all."""
    if client == "trio-mcp":
        from trio_mcp.actors import open_runtime

        config = _trio_mcp_config([target.tagged() for _ in range(count)])
        async with open_runtime(config) as rt:
            await rt.wait_ready(timeout=60)
            tools = len(rt.tools())
            if tools != count:
                raise RuntimeError(f"trio-mcp registered {tools} tools of {count}")
            yield tools
        return

    opener = _open_official if client == "official" else _open_raw
    ready = 0
    all_ready = trio.Event()
    release = trio.Event()

    async def one() -> None:
        nonlocal ready
        async with opener(target):
            ready += 1
            if ready == count:
                all_ready.set()
            await release.wait()

    async with trio.open_nursery() as nursery:
        for _ in range(count):
            nursery.start_soon(one)
        await all_ready.wait()
        try:
            yield ready
        finally:
            release.set()
