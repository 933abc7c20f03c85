"""The measurements. Each one runs one client against one target and returns medians.

Every timed scenario warms up first, then repeats ``plan.reps`` times; the medians of the
repetitions are reported. A repetition that hangs (a client that never fails its pending calls)
counts as ``None`` and shows as ``-`` in the table.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import signal
import subprocess
import sys
import threading
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import trio

from .clients import (
    GIVE_UP_AFTER,
    HANG_ARGUMENTS,
    ClientName,
    Connection,
    FloodKind,
    StdioTarget,
    Target,
    TrioMcpConnection,
    flood_line_bytes,
    flood_stdio_target,
    null_stdio_target,
    open_connection,
    open_fleet,
    open_pair,
)
from .stats import median, percentile

__all__ = [
    "STARVED",
    "Plan",
    "StepCounter",
    "Watchdog",
    "death_to_failure",
    "fleet_memory",
    "fleet_start",
    "flood_quiet",
    "flood_timeout",
    "import_time",
    "in_flight",
    "registry_costs",
    "restart_to_registered",
    "sequential",
    "task_steps",
]

#: The value of a flood measurement that did not finish within ``Plan.flood_cap`` seconds.
STARVED = "starved"


@attrs.frozen(kw_only=True)
class Plan:
    """How much to measure. :meth:`quick` is for a smoke run."""

    reps: int = 5
    warmup_calls: int = 300
    sequential_calls: int = 2000
    in_flight_calls: int = 4000
    fleet_size: int = 20
    fleet_reps: int = 3
    death_pending: int = 32
    #: The second SIGKILL row: this many calls pending.
    death_pending_many: int = 256
    death_reps: int = 5
    restart_reps: int = 5
    registry_tools: int = 10_000
    registry_reps: int = 5
    import_reps: int = 5
    #: The Streamable HTTP rows: fewer calls (an HTTP call costs several times a stdio one).
    http_reps: int = 3
    http_warmup_calls: int = 100
    http_calls: int = 800
    #: Task steps per call: calls counted (after a warm-up of ``warmup_calls``).
    steps_calls: int = 4000
    #: The flood rows: notifications the flooding server writes (0: without end, until the
    #: measurement is over), sequential calls to the quiet server with and without the flood,
    #: 1 s timeouts to the flooding server during the flood, the notification (``message`` or
    #: ``progress``), and how long a flood measurement may take before it is reported as
    #: starved (seconds).
    flood_count: int = 0
    flood_calls: int = 1000
    flood_timeout_reps: int = 3
    flood_kind: str = "message"
    flood_cap: float = 30.0

    @classmethod
    def quick(cls) -> Plan:
        return cls(
            reps=2,
            warmup_calls=50,
            sequential_calls=300,
            in_flight_calls=600,
            fleet_size=5,
            fleet_reps=1,
            death_reps=2,
            restart_reps=2,
            registry_tools=1000,
            registry_reps=2,
            import_reps=2,
            http_reps=2,
            http_warmup_calls=20,
            http_calls=120,
            steps_calls=1000,
            flood_calls=300,
            flood_timeout_reps=1,
            flood_cap=10.0,
        )

    def for_http(self) -> Plan:
        """This plan with the HTTP sizes in the places :func:`sequential` and
        :func:`in_flight` read."""
        return attrs.evolve(
            self,
            reps=self.http_reps,
            warmup_calls=self.http_warmup_calls,
            sequential_calls=self.http_calls,
            in_flight_calls=self.http_calls,
        )


Result = dict[str, Any]


# --------------------------------------------------------------------------- throughput


async def _warm_up(conn: Connection, calls: int) -> None:
    for _ in range(calls):
        await conn.call()


async def sequential(client: ClientName, target: Target, plan: Plan) -> Result:
    """One call at a time: calls/s, p50 and p99 latency (ms), and this process's CPU time per
    call (µs: less sensitive than wall time to other load on the machine)."""
    rates, p50s, p99s, cpus = [], [], [], []
    async with open_connection(client, target) as conn:
        await _warm_up(conn, plan.warmup_calls)
        for _ in range(plan.reps):
            latencies = []
            clock = time.perf_counter
            cpu = time.process_time()
            started = clock()
            for _ in range(plan.sequential_calls):
                before = clock()
                await conn.call()
                latencies.append(clock() - before)
            elapsed = clock() - started
            cpus.append((time.process_time() - cpu) / plan.sequential_calls * 1e6)
            rates.append(plan.sequential_calls / elapsed)
            p50s.append(percentile(latencies, 50) * 1000)
            p99s.append(percentile(latencies, 99) * 1000)
    return {"rate": median(rates), "p50": median(p50s), "p99": median(p99s), "cpu": median(cpus)}


async def in_flight(client: ClientName, target: Target, plan: Plan, width: int) -> Result:
    """``width`` calls in flight on one connection (``width`` tasks calling in a loop):
    calls/s, p50 and p99 latency (ms), CPU time per call (µs)."""
    rates, p50s, p99s, cpus = [], [], [], []
    async with open_connection(client, target) as conn:
        await _run_in_flight(conn, width, plan.warmup_calls * 2)
        for _ in range(plan.reps):
            cpu = time.process_time()
            elapsed, latencies = await _run_in_flight(conn, width, plan.in_flight_calls)
            cpus.append((time.process_time() - cpu) / plan.in_flight_calls * 1e6)
            rates.append(plan.in_flight_calls / elapsed)
            p50s.append(percentile(latencies, 50) * 1000)
            p99s.append(percentile(latencies, 99) * 1000)
    return {"rate": median(rates), "p50": median(p50s), "p99": median(p99s), "cpu": median(cpus)}


async def _run_in_flight(conn: Connection, width: int, total: int) -> tuple[float, list[float]]:
    latencies: list[float] = []
    remaining = total
    clock = time.perf_counter

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            before = clock()
            await conn.call()
            latencies.append(clock() - before)

    started = clock()
    async with trio.open_nursery() as nursery:
        for _ in range(width):
            nursery.start_soon(worker)
    return clock() - started, latencies


# --------------------------------------------------------------------------- task steps


class StepCounter(trio.abc.Instrument):
    """Counts task steps (passes through trio's scheduler) by the task's function name while
    ``counting`` is set."""

    def __init__(self) -> None:
        self.counting = False
        self.steps: Counter[str] = Counter()

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if self.counting:
            self.steps[task.name.rsplit(".", 1)[-1]] += 1


async def task_steps(client: ClientName, target: Target, plan: Plan, width: int) -> Result:
    """Task steps per call with ``width`` calls in flight (``width`` tasks calling in a loop;
    1: sequential), every task of the run counted: ``steps``, and per task function
    ``by_task`` (in the JSON only)."""
    counter = StepCounter()
    async with open_connection(client, target) as conn:
        await _run_in_flight(conn, width, plan.warmup_calls)
        trio.lowlevel.add_instrument(counter)
        counter.counting = True
        try:
            await _run_in_flight(conn, width, plan.steps_calls)
        finally:
            counter.counting = False
            trio.lowlevel.remove_instrument(counter)
    calls = plan.steps_calls
    result: dict[str, Any] = {"steps": sum(counter.steps.values()) / calls}
    result["by_task"] = {name: n / calls for name, n in counter.steps.most_common()}
    return result


# --------------------------------------------------------------------------- lifecycle


async def fleet_start(client: ClientName, target: StdioTarget, plan: Plan) -> Result:
    """Start ``fleet_size`` stdio servers at once until every one's tools are usable (ms)."""
    async with open_fleet(client, target, 2):  # warm-up: lazy imports, first spawns
        pass
    times: list[float | None] = []
    for _ in range(plan.fleet_reps):
        started = time.perf_counter()
        with trio.fail_after(60):
            async with open_fleet(client, target, plan.fleet_size):
                times.append((time.perf_counter() - started) * 1000)
    return {"start": median(times)}


async def death_to_failure(
    client: ClientName, target: StdioTarget, plan: Plan, pending: int | None = None
) -> Result:
    """``pending`` (default ``death_pending``) calls are pending when the server is SIGKILLed:
    time until the last one has failed (ms); ``None`` when they are still pending after
    ``GIVE_UP_AFTER`` seconds."""
    count = plan.death_pending if pending is None else pending
    times: list[float | None] = []
    for _ in range(plan.death_reps + 1):  # the first one is a warm-up
        async with open_connection(client, target) as conn:
            times.append(await _death_once(conn, count))
    return {"death": median(times[1:])}


async def _death_once(conn: Connection, pending: int) -> float | None:
    failed: list[float] = []
    all_failed = trio.Event()
    unexpected: list[BaseException] = []

    async def hang() -> None:
        try:
            await conn.call_hang()
        except Exception:
            failed.append(time.perf_counter())
            if len(failed) == pending:
                all_failed.set()
        else:
            unexpected.append(AssertionError("a call the server never answers returned"))

    async with trio.open_nursery() as nursery:
        for _ in range(pending):
            nursery.start_soon(hang)
        await trio.sleep(0.05)
        await conn.call()  # answered after the server has read every pending call before it
        await trio.sleep(0.05)
        killed = _kill(conn)
        with trio.move_on_after(GIVE_UP_AFTER):
            await all_failed.wait()
        nursery.cancel_scope.cancel()
    if unexpected:
        raise unexpected[0]
    if len(failed) < pending:
        return None
    return (max(failed) - killed) * 1000


async def restart_to_registered(client: ClientName, target: StdioTarget, plan: Plan) -> Result:
    """SIGKILL the server: time until its tools are usable again on a new connection (ms).

    trio-mcp's supervisor reconnects by itself (its backoff is set to 0 here). For the other two
    the benchmark does what a host has to: notice the death when a call fails, then connect
    again and list the tools (without waiting for the dead connection's cleanup)."""
    times: list[float | None] = []
    if client == "trio-mcp":
        async with open_connection(client, target, restart_at_once=True) as conn:
            assert isinstance(conn, TrioMcpConnection)
            for _ in range(plan.restart_reps + 1):  # the first one is a warm-up
                await conn.call()
                killed = _kill(conn)
                with trio.move_on_after(GIVE_UP_AFTER) as scope:
                    await conn.wait_tools_again()
                times.append(None if scope.cancelled_caught else _since(killed))
                if scope.cancelled_caught:
                    break
                await conn.call()
        return {"restart": median(times[1:])}
    for _ in range(plan.restart_reps + 1):
        async with open_connection(client, target) as conn:
            await conn.call()
            killed = _kill(conn)
            noticed = False
            with trio.move_on_after(GIVE_UP_AFTER):
                try:
                    await conn.call()
                except Exception:
                    noticed = True
                else:
                    raise AssertionError("a call succeeded on a dead connection")
            if not noticed:
                times.append(None)
                continue
            async with open_connection(client, target) as fresh:
                times.append(_since(killed))
                await fresh.call()
    return {"restart": median(times[1:])}


def _kill(conn: Connection) -> float:
    pid = conn.server_pid()
    killed = time.perf_counter()
    os.kill(pid, signal.SIGKILL)
    return killed


def _since(started: float) -> float:
    return (time.perf_counter() - started) * 1000


# --------------------------------------------------------------------------- flood


class Watchdog:
    """Ends a worker whose trio run is starved, with what it measured so far.

    A flood can keep a client's event loop from ever running its timers again, so a trio
    cancel scope cannot end the measurement; this thread can (the busy loop still lets other
    threads take the GIL). ``arm(seconds, keys)``: when still armed after ``seconds``, the keys
    of ``result`` not measured yet are set to :data:`STARVED`, ``result`` is printed as the
    worker's JSON line, the processes in ``pids`` (the servers) are killed and the process exits
    (``os._exit``: the trio run cannot be unwound). ``disarm()`` stops it."""

    def __init__(self) -> None:
        self.result: dict[str, Any] = {}
        self.pids: list[int] = []
        self._lock = threading.Lock()
        self._armed: threading.Event | None = None

    def arm(self, seconds: float, keys: Sequence[str]) -> None:
        armed = threading.Event()
        with self._lock:
            self._armed = armed
        thread = threading.Thread(
            target=self._watch, args=(armed, seconds, tuple(keys)), daemon=True
        )
        thread.start()

    def disarm(self) -> None:
        with self._lock:
            if self._armed is not None:
                self._armed.set()
                self._armed = None

    def _watch(self, armed: threading.Event, seconds: float, keys: tuple[str, ...]) -> None:
        if armed.wait(seconds):
            return
        with self._lock:
            if armed.is_set():
                return
            for key in keys:
                self.result.setdefault(key, STARVED)
            print(json.dumps(self.result), flush=True)
            for pid in self.pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            os._exit(0)


def _written(pid: int) -> int | None:
    """Bytes the process has written so far (``wchar`` of ``/proc/<pid>/io``)."""
    try:
        with open(f"/proc/{pid}/io") as f:
            for line in f:
                if line.startswith("wchar:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


class _Flood:
    """The flooding server's side of a measurement: start the flood, then say how many
    notifications it has written since, and whether it has written them all."""

    def __init__(self, conn: Connection, plan: Plan) -> None:
        self.conn = conn
        self.count = plan.flood_count
        kind: FloodKind = "progress" if plan.flood_kind == "progress" else "message"
        self.line = flood_line_bytes(kind)
        self.pid = conn.server_pid()
        self.before: int | None = None

    async def start(self) -> None:
        self.before = _written(self.pid)
        await self.conn.call_with({"flood": self.count})
        self.started = time.perf_counter()

    def report(self, result: dict[str, Any]) -> None:
        """``flood_rate``: notifications written (so read by the client, give or take a pipe's
        worth) per second since the start; ``flood_over``: 1 when a flood of ``flood_count``
        was all written before this report (the last part of the measurement was not under
        the flood), else 0."""
        now = _written(self.pid)
        if now is None or self.before is None:
            return
        sent = (now - self.before) / self.line
        result["flood_rate"] = sent / (time.perf_counter() - self.started)
        result["flood_over"] = int(0 < self.count <= sent)


async def _latencies(conn: Connection, calls: int, into: list[float]) -> None:
    clock = time.perf_counter
    for _ in range(calls):
        before = clock()
        await conn.call()
        into.append(clock() - before)


def _flood_targets(plan: Plan) -> tuple[StdioTarget, StdioTarget]:
    kind: FloodKind = "progress" if plan.flood_kind == "progress" else "message"
    return null_stdio_target("node"), flood_stdio_target(kind)


async def flood_quiet(client: ClientName, plan: Plan, watchdog: Watchdog) -> Result:
    """Two servers, the null server (quiet) and ``flood_server.js``: ``flood_calls``
    sequential calls to the quiet server, p50 and p99 (ms), before (``quiet_p50``,
    ``quiet_p99``) and while the other server writes notifications without pause
    (``flood_p50``, ``flood_p99``; :data:`STARVED` when the calls are not done within
    ``flood_cap`` seconds, with ``flood_done_calls`` saying how many were). Also
    ``flood_rate`` and ``flood_over`` (see :meth:`_Flood.report`)."""
    result = watchdog.result
    quiet_target, flood_target = _flood_targets(plan)
    async with open_pair(client, quiet_target, flood_target) as (quiet, flooding):
        flood = _Flood(flooding, plan)
        watchdog.pids = [quiet.server_pid(), flood.pid]
        await _warm_up(quiet, plan.warmup_calls)
        calm: list[float] = []
        await _latencies(quiet, plan.flood_calls, calm)
        result["quiet_p50"] = percentile(calm, 50) * 1000
        result["quiet_p99"] = percentile(calm, 99) * 1000
        await flood.start()
        watchdog.arm(plan.flood_cap + 5, ["flood_p50", "flood_p99"])
        flooded: list[float] = []
        with trio.move_on_after(plan.flood_cap) as scope:
            await _latencies(quiet, plan.flood_calls, flooded)
        flood.report(result)
        if scope.cancelled_caught:
            result["flood_p50"] = result["flood_p99"] = STARVED
            result["flood_done_calls"] = len(flooded)
        else:
            result["flood_p50"] = percentile(flooded, 50) * 1000
            result["flood_p99"] = percentile(flooded, 99) * 1000
        watchdog.disarm()
        watchdog.arm(plan.flood_cap, [])  # leaving may be starved too
    watchdog.disarm()
    return result


async def flood_timeout(client: ClientName, plan: Plan, watchdog: Watchdog) -> Result:
    """A call with a 1 s timeout to a server that never answers it: the trio clock from the
    call to the raise of the client's timeout error (s), once before the server floods
    (``timeout_quiet``) and, median of ``flood_timeout_reps``, while it writes notifications
    without pause (``timeout_flood``; :data:`STARVED` when it has
    not raised within ``flood_cap`` seconds). ``timeout_error`` names what was raised."""
    result = watchdog.result
    quiet_target, flood_target = _flood_targets(plan)
    async with open_pair(client, quiet_target, flood_target) as (quiet, flooding):
        flood = _Flood(flooding, plan)
        watchdog.pids = [quiet.server_pid(), flood.pid]
        await _warm_up(quiet, 20)
        errors: set[str] = set()

        async def timed_out() -> float:
            started = trio.current_time()
            try:
                await flooding.call_with(HANG_ARGUMENTS, timeout=1.0)
            except Exception as exc:
                errors.add(type(exc).__name__)
                return trio.current_time() - started
            raise AssertionError("a call the server never answers returned")

        result["timeout_quiet"] = await timed_out()
        await flood.start()
        watchdog.arm(plan.flood_cap + 5, ["timeout_flood"])
        times: list[float | None] = []
        with trio.move_on_after(plan.flood_cap) as scope:
            for _ in range(plan.flood_timeout_reps):
                times.append(await timed_out())
        flood.report(result)
        result["timeout_flood"] = STARVED if scope.cancelled_caught else median(times)
        result["timeout_error"] = ", ".join(sorted(errors))
        watchdog.disarm()
        watchdog.arm(plan.flood_cap, [])  # leaving may be starved too
    watchdog.disarm()
    return result


# --------------------------------------------------------------------------- memory


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def fleet_memory(client: ClientName, target: StdioTarget, plan: Plan) -> Result:
    """Memory of this process per connected server (KiB), over ``fleet_size`` servers: the
    Python heap (tracemalloc) and the resident set (RSS; the servers' own processes are not
    counted)."""
    count = plan.fleet_size
    async with open_fleet(client, target, 2):  # warm-up: lazy imports, caches
        pass
    gc.collect()
    rss_before = _rss_bytes()
    async with open_fleet(client, target, count):
        gc.collect()
        rss = (_rss_bytes() - rss_before) / count / 1024
    gc.collect()
    tracemalloc.start()
    try:
        heap_before = tracemalloc.get_traced_memory()[0]
        async with open_fleet(client, target, count):
            gc.collect()
            heap = (tracemalloc.get_traced_memory()[0] - heap_before) / count / 1024
    finally:
        tracemalloc.stop()
    return {"heap": heap, "rss": rss}


# --------------------------------------------------------------------------- registry


def _time_each(fn: Callable[[], Any], reps: int) -> float | None:
    times = []
    for _ in range(reps + 1):  # the first one is a warm-up
        gc.collect()  # no collection of an earlier step's garbage inside the timed one
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return median(times[1:])


def _raw_tools(count: int, generation: int) -> list[dict[str, Any]]:
    return [
        {
            "name": f"tool_{index}",
            "description": f"Tool number {index}, listing {generation}.",
            "inputSchema": {
                "type": "object",
                "properties": {"text": {"type": "string"}, "count": {"type": "integer"}},
                "required": ["text"],
            },
        }
        for index in range(count)
    ]


def registry_costs(client: ClientName, plan: Plan) -> Result:
    """The tool table with ``registry_tools`` tools of one server (ms):

    - ``decode``: a ``tools/list`` result's entries decoded into tool objects and registered
      (what a listing costs after the JSON is parsed; trio-mcp decodes each entry as its
      ``check_listing`` does, without the checks);
    - ``replace``: every registered tool replaced by a changed one (decoded already);
    - ``snapshot``: the first snapshot of the table after that change; ``snapshot_cached``:
      a second one.

    trio-mcp: its ``Registry``. official: the SDK's ``ClientSessionGroup`` aggregation fed by a
    stand-in session (it has no replace: disconnect + connect; its ``tools`` is the live dict, not
    a snapshot, so a host copies it). raw: a plain ``dict`` keyed by prefixed name."""
    if client == "trio-mcp":
        return _registry_trio_mcp(plan)
    if client == "official":
        return trio.run(_registry_official, plan)
    return _registry_raw(plan)


def _registry_trio_mcp(plan: Plan) -> Result:
    from trio_mcp.actors.runtime._registry import (  # not public: the internals
        Registry,
        ReplaceTools,
    )
    from trio_mcp.protocol import Tool, structure
    from trio_mcp.protocol._methods import fast_tool  # not public: check_listing's decoder

    count, reps = plan.registry_tools, plan.registry_reps
    raw = [_raw_tools(count, g) for g in range(2)]
    # Each step applies one message as the registry actor does, without its mailbox: to the
    # table, publishing the new view (what its task does per batch).
    registry = Registry()
    generation = 0

    def decode_and_register() -> None:
        nonlocal generation
        generation += 1
        # Each entry decoded as check_listing decodes it in the runtime: fast_tool, and the
        # converter for an entry it declines (none here).
        tools = tuple(
            fast_tool(entry) or structure(entry, Tool, path=f"$.tools[{index}]")
            for index, entry in enumerate(raw[0])
        )
        registry._apply_batch([ReplaceTools(server="s", generation=generation, tools=tools)])

    decode = _time_each(decode_and_register, reps)
    decoded = [tuple(structure(item, Tool) for item in listing) for listing in raw]

    def replace() -> None:
        nonlocal generation
        generation += 1
        tools = decoded[generation % 2]
        registry._apply_batch([ReplaceTools(server="s", generation=generation, tools=tools)])

    replace_ms = _time_each(replace, reps)
    snapshots, cached = [], []
    for _ in range(reps + 1):
        replace()
        gc.collect()
        started = time.perf_counter()
        table = registry.view.tools
        middle = time.perf_counter()
        _ = registry.view.tools
        done = time.perf_counter()
        assert len(table) == count
        del table  # freeing it is not part of the next snapshot's time
        snapshots.append((middle - started) * 1000)
        cached.append((done - middle) * 1000)
    return {
        "decode": decode,
        "replace": replace_ms,
        "snapshot": median(snapshots[1:]),
        "snapshot_cached": median(cached[1:]),
    }


async def _registry_official(plan: Plan) -> Result:
    from mcp import ClientSessionGroup
    from mcp.types import Implementation, ListToolsResult, Tool

    count, reps = plan.registry_tools, plan.registry_reps
    raw = [_raw_tools(count, g) for g in range(2)]

    class StandIn:
        """Answers the group's three listings from memory."""

        def __init__(self, tools: list[Any]) -> None:
            self.tools = tools

        async def list_prompts(self) -> Any:
            return _Listing(prompts=[])

        async def list_resources(self) -> Any:
            return _Listing(resources=[])

        async def list_tools(self) -> Any:
            return _Listing(tools=self.tools)

    info = Implementation(name="s", version="1")
    group = ClientSessionGroup()
    current: list[StandIn | None] = [None]

    async def swap(tools: list[Any]) -> None:
        if current[0] is not None:
            await group.disconnect_from_server(current[0])  # type: ignore[arg-type]
        session = StandIn(tools)
        await group.connect_with_session(info, session)  # type: ignore[arg-type]
        current[0] = session

    async def timed(fn: Callable[[], Any]) -> float | None:
        times = []
        for _ in range(reps + 1):
            gc.collect()
            started = time.perf_counter()
            await fn()
            times.append((time.perf_counter() - started) * 1000)
        return median(times[1:])

    async def decode_and_register() -> None:
        await swap(list(ListToolsResult.model_validate({"tools": raw[0]}).tools))

    decode = await timed(decode_and_register)
    decoded = [[Tool.model_validate(item) for item in listing] for listing in raw]
    flip = [0]

    async def replace() -> None:
        flip[0] += 1
        await swap(decoded[flip[0] % 2])

    replace_ms = await timed(replace)
    snapshots, cached = [], []
    for _ in range(reps + 1):
        await replace()
        gc.collect()
        started = time.perf_counter()
        table = dict(group.tools)
        middle = time.perf_counter()
        dict(group.tools)
        done = time.perf_counter()
        assert len(table) == count
        del table  # freeing it is not part of the next snapshot's time
        snapshots.append((middle - started) * 1000)
        cached.append((done - middle) * 1000)
    return {
        "decode": decode,
        "replace": replace_ms,
        "snapshot": median(snapshots[1:]),
        "snapshot_cached": median(cached[1:]),
    }


class _Listing:
    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


def _registry_raw(plan: Plan) -> Result:
    count, reps = plan.registry_tools, plan.registry_reps
    raw = [_raw_tools(count, g) for g in range(2)]
    table: dict[str, Any] = {}
    flip = 0

    def register(tools: list[dict[str, Any]]) -> None:
        nonlocal table
        table = {f"mcp_s_{tool['name']}": tool for tool in tools}

    decode = _time_each(lambda: register(raw[0]), reps)

    def replace() -> None:
        nonlocal flip
        flip += 1
        register(raw[flip % 2])

    replace_ms = _time_each(replace, reps)
    snapshots = []
    for _ in range(reps + 1):
        replace()
        gc.collect()
        started = time.perf_counter()
        snapshot = dict(table)
        snapshots.append((time.perf_counter() - started) * 1000)
        assert len(snapshot) == count
        del snapshot  # freeing it is not part of the next snapshot's time
    return {
        "decode": decode,
        "replace": replace_ms,
        "snapshot": median(snapshots[1:]),
        "snapshot_cached": median(snapshots[1:]),
    }


# --------------------------------------------------------------------------- import time

_IMPORTS = {
    "trio-mcp": "import trio_mcp.actors",
    "official": "from mcp import Client",
    "raw": "import json, trio",
}


def import_time(client: ClientName, plan: Plan) -> Result:
    """Time to import the client in a fresh interpreter (ms), interpreter start not counted."""
    code = (
        f"import time; t = time.perf_counter(); {_IMPORTS[client]}; print(time.perf_counter() - t)"
    )
    times: list[float | None] = []
    for _ in range(plan.import_reps + 1):  # the first one warms the file cache
        out = subprocess.run(
            [sys.executable, "-c", code], check=True, capture_output=True, text=True
        ).stdout
        times.append(float(out) * 1000)
    return {"import": median(times[1:])}
