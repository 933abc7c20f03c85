"""``python -m bench.hops``: what one hop between tasks costs a call, on this machine.

    python -m bench.hops [--cpus C,S] [--pairs 60] [--calls 500]

trio-mcp's call path crosses two memory channels the raw client does not: the transport's reader
hands the answer to the session's pending-call table (a task of its own, which wakes the caller),
and the caller hands its request to the transport's writer (a task of its own, which writes it).
This measures the price of each hop apart from everything else trio-mcp does: one client, the raw
client's way of calling (one reader task, an event per call, ``json``), with either hop switched
on batch by batch against the same null stdio server:

- ``table``: the reader sends each answer over a memory channel to a table task, which wakes the
  caller; without it the reader wakes the caller itself (as ``bench/raw_client.py`` does);
- ``writer``: the caller sends each request over a memory channel to a writer task, which writes
  it at once (as trio-mcp's writer does); without it the caller writes under a lock (as
  ``bench/raw_client.py`` does: trio's lock and ``send_all`` each pass through the scheduler
  before the write, so the hop takes the place of those two passes).

Each pair runs a batch plain and a batch with the hop, in turn (the order turning every pair),
and the difference of their wall times per call is the hop's cost. It prints the median over the
pairs, with a 95% confidence interval (:func:`bench.paired.median_interval`). ``--cpus C,S`` pins
the client to CPU ``C`` and the server to CPU ``S`` (``1,1``: one CPU; ``1,0``: apart).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
from collections.abc import Sequence
from typing import Any

import trio

from .clients import ARGUMENTS, TOOL, null_stdio_target
from .paired import median_interval, parse_cpus
from .scenarios import _run_in_flight

__all__ = ["HopClient", "main"]


class HopClient:
    """A raw client with the runtime's two hops as switches (see the module docstring)."""

    def __init__(self, process: trio.Process) -> None:
        assert process.stdin is not None
        assert process.stdout is not None
        self.process = process
        self.through_table = False
        self.through_writer = False
        self._stdin = process.stdin
        self._lock = trio.Lock()
        self._next_id = 1
        self._pending: dict[int, list[Any]] = {}  # id -> [event, answer]
        # One call at a time: each channel holds one item at most (a bounded mailbox, as the
        # runtime's; a second item would be a bug here, and send_nowait would say so).
        self._table_in, self._table_out = trio.open_memory_channel[dict[str, Any]](1)
        self._writer_in, self._writer_out = trio.open_memory_channel[bytes](1)

    async def request(self, method: str, params: dict[str, Any] | None = None) -> Any:
        rid = self._next_id
        self._next_id += 1
        waiter: list[Any] = [trio.Event(), None]
        self._pending[rid] = waiter
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        data = json.dumps(message, separators=(",", ":")).encode() + b"\n"
        if self.through_writer:
            self._writer_in.send_nowait(data)
        else:
            async with self._lock:
                await self._stdin.send_all(data)
        await waiter[0].wait()
        return waiter[1]["result"]

    async def call(self) -> None:
        """One ``tools/call`` of the null server's tool, as every bench connection makes it."""
        await self.request("tools/call", {"name": TOOL, "arguments": ARGUMENTS})

    def _resolve(self, answer: dict[str, Any]) -> None:
        waiter = self._pending.pop(answer["id"])
        waiter[1] = answer
        waiter[0].set()

    async def reader(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        buffer = b""
        while chunk := await stdout.receive_some(65536):
            *lines, buffer = (buffer + chunk).split(b"\n")
            for line in lines:
                if line.strip():
                    answer = json.loads(line)
                    if self.through_table:
                        self._table_in.send_nowait(answer)
                    else:
                        self._resolve(answer)

    async def table(self) -> None:
        async for answer in self._table_out:
            self._resolve(answer)

    async def writer(self) -> None:
        # As trio-mcp's writer does: the receive was this turn's pass through the scheduler,
        # so the write goes out at once (trio's send_all would pass through it again first).
        fd = self._stdin.fileno()
        async for data in self._writer_out:
            sent = os.write(fd, data)  # a line of ~100 bytes into an empty pipe: all of it
            if sent < len(data):
                await self._stdin.send_all(data[sent:])


async def _batch(client: HopClient, calls: int) -> float:
    elapsed, _ = await _run_in_flight(client, 1, calls)
    return elapsed / calls


async def measure(
    hop: str, pairs: int, calls: int, cpus: tuple[int, int] | None
) -> tuple[list[float], list[float]]:
    """The plain batches' wall times per call, and each pair's extra wall time per call with
    ``hop`` (``"table"`` or ``"writer"``) switched on; seconds."""
    argv = null_stdio_target("node").tagged()
    if cpus is not None:
        os.sched_setaffinity(0, {cpus[1]})
    process = await trio.lowlevel.open_process(
        list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    if cpus is not None:
        os.sched_setaffinity(0, {cpus[0]})
    client = HopClient(process)
    plain: list[float] = []
    extra: list[float] = []
    async with trio.open_nursery() as nursery:
        for task in (client.reader, client.table, client.writer):
            nursery.start_soon(task)
        await client.request(
            "initialize",
            {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "hops"}},
        )
        await _batch(client, calls)  # warm-up
        for i in range(pairs):
            walls = {}
            for on in (False, True) if i % 2 == 0 else (True, False):
                setattr(client, f"through_{hop}", on)
                walls[on] = await _batch(client, calls)
            plain.append(walls[False])
            extra.append(walls[True] - walls[False])
        setattr(client, f"through_{hop}", False)
        await client._stdin.aclose()
        await process.wait()
        nursery.cancel_scope.cancel()
    return plain, extra


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.hops", description=__doc__)
    parser.add_argument("--cpus", default=None, help="C,S: the client on CPU C, the server on S")
    parser.add_argument("--pairs", type=int, default=60)
    parser.add_argument("--calls", type=int, default=500, help="per batch")
    args = parser.parse_args(argv)
    cpus: tuple[int, int] | None = None
    if args.cpus is not None:
        try:
            cpus = parse_cpus(args.cpus)
        except ValueError as exc:
            parser.error(str(exc))
    where = "unpinned" if cpus is None else f"client on CPU {cpus[0]}, server on CPU {cpus[1]}"
    print(f"{args.pairs} pairs of {args.calls} calls, {where}")
    for hop in ("table", "writer"):
        plain, extra = trio.run(measure, hop, args.pairs, args.calls, cpus)
        low, high = median_interval(extra)
        print(
            f"  through a {hop} task: {statistics.median(extra) * 1e6:+.2f} us/call "
            f"(95% CI {low * 1e6:+.2f} to {high * 1e6:+.2f}), "
            f"on {statistics.median(plain) * 1e6:.1f} us/call without"
        )


if __name__ == "__main__":
    main()
