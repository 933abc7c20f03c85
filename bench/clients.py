"""The clients under test, behind one small interface, and the servers they talk to.

A *target* says how to reach a null server: :class:`StdioTarget` (a command each client starts)
or :class:`HttpTarget` (a Streamable HTTP endpoint of a null server the benchmark started, see
:func:`null_http_server`). A *client* is one of
:data:`CLIENTS`: ``trio-mcp``, ``official`` (the ``mcp`` SDK's ``Client``, run under trio),
``raw`` (:mod:`bench.raw_client`: a reader task and an event per call, the multiplexing floor)
and ``raw-single`` (:mod:`bench.raw_single_client`: stdio only, one call at a time, the caller
reads its own answer; the floor for sequential calls). For each pair, :func:`open_connection`
yields a :class:`Connection` that is connected, initialized and has listed the server's tools:

- ``await conn.call()`` makes one ``tools/call`` and checks the answer;
- ``await conn.call_hang()`` makes one call the server never answers (it fails only when the
  connection dies);
- ``await conn.call_with(arguments, timeout=None)`` makes one call with other arguments (the
  flood server's ``{"flood": N}``); with ``timeout`` (seconds) the client's own call timeout,
  which raises whatever the client raises on a timeout;
- ``conn.server_pid()`` is the server process's pid (found by the unique tag on its command line).

A target's ``era`` says which revisions every client speaks to it: ``"legacy"`` (the default:
the ``initialize`` handshake, 2025-06-18 for the raw clients, the newest handshake revision for
the others) or ``"modern"`` (the stateless 2026-07-28: trio-mcp with
``ServerConfig(protocol="modern")``, the official client with ``mode="auto"``, which finds
2026-07-28 through ``server/discover`` (checked), the raw clients with ``modern=True``). The null
servers speak 2026-07-28 only when the target is modern (``--modern``).

trio-mcp's connection also has ``await conn.wait_tools_again()``: it returns once its supervisor
has reconnected a server that died and registered its tools again (the other clients have no
such thing: the restart scenario reconnects them the way a host has to).

:func:`open_fleet` connects many servers at once and returns once every one has listed its tools;
:func:`open_pair` connects two (trio-mcp: one runtime with two servers).

trio-mcp and the official SDK are imported only by the openers that need them, so a worker
measuring one client never pays for importing another (the memory rows rely on it). trio-mcp is
used through its public API only (``trio_mcp.actors``: ``open_runtime``, ``RuntimeConfig``,
``ServerConfig``, ``RetryPolicy``; ``rt.call``, ``rt.wait_ready``, ``rt.tools``, ``rt.status``),
so that :mod:`bench.compare` can measure trees whose internal layout differs.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from functools import partial
from pathlib import Path
from typing import Any, Final, Literal, Protocol

import attrs
import trio

from .raw_client import MODERN, RawStdioClient, open_raw_stdio_client
from .raw_http_client import RawHttpClient, open_raw_http_client
from .raw_single_client import RawSingleStdioClient, open_raw_single_stdio_client

__all__ = [
    "CLIENTS",
    "GIVE_UP_AFTER",
    "MODERN",
    "ClientName",
    "Connection",
    "Era",
    "FloodKind",
    "HttpMode",
    "HttpTarget",
    "StdioTarget",
    "Target",
    "TrioMcpConnection",
    "find_pid",
    "flood_line_bytes",
    "flood_stdio_target",
    "null_http_server",
    "null_stdio_target",
    "open_connection",
    "open_fleet",
    "open_pair",
]

ClientName = Literal["trio-mcp", "official", "raw", "raw-single"]
CLIENTS: Final[tuple[ClientName, ...]] = ("trio-mcp", "official", "raw", "raw-single")

HERE: Final = Path(__file__).resolve().parent
TOOL: Final = "echo"
ARGUMENTS: Final[dict[str, Any]] = {"text": "hi"}
HANG_ARGUMENTS: Final[dict[str, Any]] = {"text": "hi", "hang": True}
#: How long a death or restart measurement waits before it calls the client hung (seconds).
GIVE_UP_AFTER: Final = 5.0

#: Which revisions the clients speak to a target (see the module's docstring).
Era = Literal["legacy", "modern"]


@attrs.frozen(kw_only=True)
class StdioTarget:
    """A null server started as a subprocess: ``argv`` plus a unique ``--tag=`` per start, so
    the benchmark can find the server's pid whichever client started it; ``era``: the
    revisions the clients speak to it."""

    argv: tuple[str, ...]
    kind: str
    era: Era = "legacy"

    def tagged(self) -> tuple[str, ...]:
        return (*self.argv, f"--tag={secrets.token_hex(8)}")


def null_stdio_target(
    kind: Literal["node", "python"] = "node", *, era: Era = "legacy"
) -> StdioTarget:
    """The null stdio server: Node.js (``null_server.js``) or the Python fallback, spoken to
    in ``era``. For ``"modern"`` it is started with ``--modern`` (it then speaks both eras);
    otherwise it speaks the handshake revisions only, as before 2026-07-28, so that trio-mcp's
    default (``protocol: auto``, which probes with ``server/discover``) falls back to
    ``initialize`` in the legacy rows as it always did."""
    flags = ("--modern",) if era == "modern" else ()
    if kind == "node":
        node = shutil.which("node")
        if node is None:
            raise SystemExit("node is not on PATH: install Node.js, or run with --server python")
        argv = (node, str(HERE / "null_server.js"), *flags)
        return StdioTarget(argv=argv, kind="node", era=era)
    argv = (sys.executable, str(HERE / "null_server.py"), *flags)
    return StdioTarget(argv=argv, kind="python", era=era)


FloodKind = Literal["message", "progress"]


def flood_stdio_target(kind: FloodKind = "message") -> StdioTarget:
    """The flooding stdio server (``flood_server.js``, Node.js): it answers like the null server,
    and a call with ``{"flood": N}`` makes it write N notifications of ``kind`` without pause."""
    node = shutil.which("node")
    if node is None:
        raise SystemExit("node is not on PATH: the flood rows need Node.js")
    return StdioTarget(argv=(node, str(HERE / "flood_server.js"), f"--kind={kind}"), kind="flood")


def flood_line_bytes(kind: FloodKind = "message") -> int:
    """The length of each of ``flood_server.js``'s notification lines (they are all alike)."""
    if kind == "progress":
        line = (
            '{"jsonrpc":"2.0","method":"notifications/progress","params":'
            '{"progressToken":"flood","progress":1000000}}\n'
        )
    else:
        line = (
            '{"jsonrpc":"2.0","method":"notifications/message","params":'
            '{"level":"info","logger":"flood","data":"flood 1000000"}}\n'
        )
    return len(line.encode())


HttpMode = Literal["json", "sse"]


@attrs.frozen(kw_only=True)
class HttpTarget:
    """A running null Streamable HTTP server: its MCP endpoint ``url`` (on 127.0.0.1), whether
    it answers with JSON bodies or SSE streams (``mode``), its process id, and the revisions
    the clients speak to it (``era``)."""

    url: str
    mode: HttpMode
    pid: int
    era: Era = "legacy"


Target = StdioTarget | HttpTarget


@contextmanager
def null_http_server(mode: HttpMode, *, era: Era = "legacy") -> Iterator[HttpTarget]:
    """Start ``null_http_server.js`` (Node.js) in ``mode`` on a free port of 127.0.0.1 and yield
    its target (spoken to in ``era``; ``"modern"`` starts it with ``--modern``, see
    :func:`null_stdio_target`); leaving stops it. Raises :class:`SystemExit` when
    ``node`` is not on ``PATH`` and :class:`RuntimeError` when the server does not report its
    port."""
    node = shutil.which("node")
    if node is None:
        raise SystemExit("node is not on PATH: the Streamable HTTP rows need Node.js")
    process = subprocess.Popen(
        [
            node,
            str(HERE / "null_http_server.js"),
            f"--mode={mode}",
            *(("--modern",) if era == "modern" else ()),
            f"--tag={secrets.token_hex(8)}",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        if not line.isdigit():
            process.kill()
            _, err = process.communicate(timeout=5)
            raise RuntimeError(
                f"the null HTTP server did not report its port: {line!r} {err.decode()[-500:]!r}"
            )
        yield HttpTarget(
            url=f"http://127.0.0.1:{int(line)}/mcp", mode=mode, pid=process.pid, era=era
        )
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for pipe in (process.stdin, process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()


def _locate(target: Target) -> tuple[tuple[str, ...], Callable[[], int]]:
    """For a stdio target: a tagged argv and how to find its process; for an HTTP target: no
    argv and the running server's pid."""
    if isinstance(target, HttpTarget):
        return (), lambda: target.pid
    argv = target.tagged()
    return argv, partial(find_pid, argv)


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
    async def call_with(
        self, arguments: dict[str, Any], *, timeout: float | None = None
    ) -> None: ...
    def server_pid(self) -> int: ...


# --------------------------------------------------------------------------- trio-mcp


def _trio_mcp_config(
    argvs: Sequence[tuple[str, ...]],
    *,
    url: str | None = None,
    restart_at_once: bool = False,
    names: Sequence[str] | None = None,
    era: Era = "legacy",
) -> Any:
    from trio_mcp.actors import RetryPolicy, RuntimeConfig, ServerConfig

    # ``protocol`` only when modern: trees from before it (bench.compare) still run the rest.
    options: dict[str, Any] = {"protocol": "modern"} if era == "modern" else {}
    servers: tuple[Any, ...]
    if url is not None:
        servers = (ServerConfig(name="null0", url=url, connect_timeout=30, timeout=30, **options),)
    else:
        servers = tuple(
            ServerConfig(
                name=names[index] if names is not None else f"null{index}",
                command=argv[0],
                args=argv[1:],
                connect_timeout=30,
                timeout=30,
                **options,
            )
            for index, argv in enumerate(argvs)
        )
    if not restart_at_once:
        return RuntimeConfig(servers=servers)
    # Reconnect at once after a drop (no backoff), so the restart row measures the mechanism.
    return RuntimeConfig(servers=servers, retry=RetryPolicy(reconnect_initial=0.0, jitter=0.0))


class TrioMcpConnection:
    """One server of a runtime (by default ``null0``, whose tool is registered as
    ``mcp_null0_echo``)."""

    def __init__(self, runtime: Any, locate: Callable[[], int], server: str = "null0") -> None:
        self.rt = runtime
        self.locate = locate
        self.server = server
        self.name = f"mcp_{server}_{TOOL}"

    async def call(self) -> None:
        result = await self.rt.call(self.name, ARGUMENTS)
        if result.is_error:
            raise AssertionError(f"the tool failed: {result}")

    async def call_hang(self) -> None:
        await self.rt.call(self.name, HANG_ARGUMENTS)

    async def call_with(self, arguments: dict[str, Any], *, timeout: float | None = None) -> None:
        if timeout is None:
            await self.rt.call(self.name, arguments)
        else:
            await self.rt.call(self.name, arguments, timeout=timeout)

    def server_pid(self) -> int:
        return self.locate()

    def _usable(self) -> bool:
        return (
            self.name in self.rt.tools()
            and getattr(self.rt.status()[self.server].state, "name", None) == "READY"
        )

    async def wait_tools_again(self) -> None:
        """First the withdrawal (the drop), then the new registration by the new connection.

        Waits with ``rt.wait_tools_changed`` where the runtime has it; otherwise it looks at
        ``rt.tools()`` and ``rt.status()`` every millisecond."""
        wait_changed = getattr(self.rt, "wait_tools_changed", None)

        async def changed() -> None:
            if wait_changed is not None:
                await wait_changed(self.rt.tools_version)
            else:
                await trio.sleep(0.001)

        while self.name in self.rt.tools():
            await changed()
        while not self._usable():
            await changed()


async def _trio_mcp_ready(
    rt: Any, names: Sequence[str], timeout: float, era: Era = "legacy"
) -> None:
    """Wait until the runtime's servers are ready and ``names`` are registered tools, and check
    that every server is spoken to in ``era`` (2026-07-28 or not)."""
    await rt.wait_ready(timeout=timeout)
    tools = rt.tools()
    missing = [name for name in names if name not in tools]
    if missing:
        raise RuntimeError(f"trio-mcp did not register {missing}: {dict(rt.status())}")
    spoken = {
        name: getattr(status, "protocol_version", None) for name, status in rt.status().items()
    }
    if any((version == MODERN) != (era == "modern") for version in spoken.values()):
        raise RuntimeError(f"trio-mcp was to speak {era} revisions, but speaks {spoken}")


@asynccontextmanager
async def _open_trio_mcp(
    target: Target, *, restart_at_once: bool = False
) -> AsyncIterator[TrioMcpConnection]:
    from trio_mcp.actors import open_runtime

    argv, locate = _locate(target)
    url = target.url if isinstance(target, HttpTarget) else None
    config = _trio_mcp_config([argv], url=url, restart_at_once=restart_at_once, era=target.era)
    async with open_runtime(config) as rt:
        await _trio_mcp_ready(rt, [f"mcp_null0_{TOOL}"], 30, target.era)
        yield TrioMcpConnection(rt, locate)


# --------------------------------------------------------------------------- official SDK


class OfficialConnection:
    """An entered ``mcp.Client``."""

    def __init__(self, client: Any, locate: Callable[[], int]) -> None:
        self.client = client
        self.locate = locate

    async def call(self) -> None:
        result = await self.client.call_tool(TOOL, ARGUMENTS)
        if result.is_error:
            raise AssertionError(f"the tool failed: {result}")

    async def call_hang(self) -> None:
        await self.client.call_tool(TOOL, HANG_ARGUMENTS)

    async def call_with(self, arguments: dict[str, Any], *, timeout: float | None = None) -> None:
        await self.client.call_tool(TOOL, arguments, read_timeout_seconds=timeout)

    def server_pid(self) -> int:
        return self.locate()


@asynccontextmanager
async def _open_official(target: Target) -> AsyncIterator[OfficialConnection]:
    from mcp import Client, StdioServerParameters

    argv, locate = _locate(target)
    server: Any
    if isinstance(target, HttpTarget):
        server = target.url
    else:
        server = StdioServerParameters(command=argv[0], args=list(argv[1:]))
    # 2026-07-28: "auto" probes with server/discover, which the null servers answer.
    async with Client(server, mode="auto" if target.era == "modern" else "legacy") as client:
        if target.era == "modern" and client.protocol_version != MODERN:
            spoken = client.protocol_version
            raise RuntimeError(f"the official client speaks {spoken}, not {MODERN}")
        tools = await client.list_tools()
        if [tool.name for tool in tools.tools] != [TOOL]:
            raise RuntimeError(f"unexpected tools: {tools}")
        yield OfficialConnection(client, locate)


# --------------------------------------------------------------------------- raw client


class RawConnection:
    """An initialized :class:`RawStdioClient`, :class:`RawHttpClient` or
    :class:`RawSingleStdioClient`. The raw clients have no call timeout of their own:
    ``call_with(..., timeout=)`` is a ``trio.fail_after`` around the call, what a host would
    write (it raises :class:`trio.TooSlowError`)."""

    def __init__(
        self,
        client: RawStdioClient | RawHttpClient | RawSingleStdioClient,
        locate: Callable[[], int],
    ) -> None:
        self.client = client
        self.locate = locate

    async def call(self) -> None:
        result = await self.client.call_tool(TOOL, ARGUMENTS)
        if result.get("isError"):
            raise AssertionError(f"the tool failed: {result}")

    async def call_hang(self) -> None:
        await self.client.call_tool(TOOL, HANG_ARGUMENTS)

    async def call_with(self, arguments: dict[str, Any], *, timeout: float | None = None) -> None:
        if timeout is None:
            await self.client.call_tool(TOOL, arguments)
            return
        with trio.fail_after(timeout):
            await self.client.call_tool(TOOL, arguments)

    def server_pid(self) -> int:
        return self.locate()


@asynccontextmanager
async def _open_raw(target: Target) -> AsyncIterator[RawConnection]:
    argv, locate = _locate(target)
    modern = target.era == "modern"
    if isinstance(target, HttpTarget):
        async with open_raw_http_client(target.url, modern=modern) as http_client:
            tools = await http_client.initialize()
            if [tool["name"] for tool in tools] != [TOOL]:
                raise RuntimeError(f"unexpected tools: {tools}")
            yield RawConnection(http_client, locate)
        return
    async with open_raw_stdio_client(argv, modern=modern) as client:
        tools = await client.initialize()
        if [tool["name"] for tool in tools] != [TOOL]:
            raise RuntimeError(f"unexpected tools: {tools}")
        yield RawConnection(client, locate)


@asynccontextmanager
async def _open_raw_single(target: Target) -> AsyncIterator[RawConnection]:
    if isinstance(target, HttpTarget):
        raise ValueError("raw-single is a stdio client; it has no HTTP variant")
    argv, locate = _locate(target)
    async with open_raw_single_stdio_client(argv, modern=target.era == "modern") as client:
        tools = await client.initialize()
        if [tool["name"] for tool in tools] != [TOOL]:
            raise RuntimeError(f"unexpected tools: {tools}")
        yield RawConnection(client, locate)


# --------------------------------------------------------------------------- entry points


def open_connection(client: ClientName, target: Target, *, restart_at_once: bool = False) -> Any:
    """An async context manager yielding a ready :class:`Connection` of ``client`` to
    ``target``. ``restart_at_once``: trio-mcp reconnects a dead server without its backoff
    (the default waits about 1 s first). Raises :class:`ValueError` for an unknown client."""
    if client == "trio-mcp":
        return _open_trio_mcp(target, restart_at_once=restart_at_once)
    if client == "official":
        return _open_official(target)
    if client == "raw":
        return _open_raw(target)
    if client == "raw-single":
        return _open_raw_single(target)
    raise ValueError(f"unknown client {client!r}; choose from {', '.join(CLIENTS)}")


@asynccontextmanager
async def open_pair(
    client: ClientName, first: StdioTarget, second: StdioTarget
) -> AsyncIterator[tuple[Connection, Connection]]:
    """Connect two stdio servers in one trio run and yield a connection to each. trio-mcp: one
    runtime with the two servers ``null0`` and ``flood``; the others: two connections. Raises
    :class:`ValueError` for ``raw-single`` (it cannot wait on two servers at once)."""
    if client == "trio-mcp":
        from trio_mcp.actors import open_runtime

        (argv0, locate0), (argv1, locate1) = _locate(first), _locate(second)
        config = _trio_mcp_config([argv0, argv1], names=["null0", "flood"])
        async with open_runtime(config) as rt:
            await _trio_mcp_ready(rt, [f"mcp_null0_{TOOL}", f"mcp_flood_{TOOL}"], 30)
            yield TrioMcpConnection(rt, locate0), TrioMcpConnection(rt, locate1, "flood")
        return
    if client == "raw-single":
        raise ValueError("raw-single makes one call at a time on one connection")
    async with open_connection(client, first) as a, open_connection(client, second) as b:
        yield a, b


@asynccontextmanager
async def open_fleet(client: ClientName, target: StdioTarget, count: int) -> AsyncIterator[int]:
    """Connect ``count`` servers at once; enter once every one has listed its tools (yields
    how many tools are usable). Leaving disconnects them all."""
    if client == "trio-mcp":
        from trio_mcp.actors import open_runtime

        config = _trio_mcp_config([target.tagged() for _ in range(count)], era=target.era)
        async with open_runtime(config) as rt:
            await rt.wait_ready(timeout=60)
            tools = len(rt.tools())
            if tools != count:
                raise RuntimeError(f"trio-mcp registered {tools} tools of {count}")
            yield tools
        return

    opener = {"official": _open_official, "raw": _open_raw, "raw-single": _open_raw_single}[client]
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
