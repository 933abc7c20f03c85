"""Time ``OutputChecker.check``: one small result against a small ``outputSchema``, with a
``pattern`` (checked in the checking process) and without (checked inline).

    python -m bench.outputcheck [--checks 200]

Prints, for each schema, the first check (for the pattern schema that starts the checking
process) and the median, minimum and maximum of the next ``--checks`` checks, in ms. It runs
against whichever tree is imported (``PYTHONPATH`` as for ``bench.worker``); a checker without
``serve_in`` (before the long-lived checking process) is used without one.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import trio

from trio_mcp.actors.runtime._outputcheck import OutputChecker
from trio_mcp.protocol._types import CallToolResult, TextContent, Tool

__all__ = ["main"]

PATTERN = {
    "type": "object",
    "properties": {"id": {"type": "string", "pattern": "^[a-z]+$"}},
    "required": ["id"],
}
PLAIN = {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}


async def _time(checker: OutputChecker, schema: dict[str, Any], checks: int) -> str:
    tool = Tool(name="t", input_schema={"type": "object"}, output_schema=schema)
    result = CallToolResult(content=(TextContent(text="x"),), structured_content={"id": "abc"})
    times: list[float] = []
    for _ in range(checks + 1):
        started = time.perf_counter()
        assert await checker.check("s", tool, result) == ()
        times.append((time.perf_counter() - started) * 1000)
    first, rest = times[0], times[1:]
    return (
        f"first {first:.2f} ms, then median {statistics.median(rest):.3f} ms "
        f"(min {min(rest):.3f}, max {max(rest):.3f}) over {checks}"
    )


async def _main(checks: int) -> None:
    checker = OutputChecker(offload_chars=65_536)
    async with trio.open_nursery() as nursery:
        if hasattr(checker, "serve_in"):
            checker.serve_in(nursery)
        print("pattern:", await _time(checker, PATTERN, checks))
        print("plain:  ", await _time(checker, PLAIN, checks))
        nursery.cancel_scope.cancel()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.outputcheck")
    parser.add_argument("--checks", type=int, default=200)
    args = parser.parse_args()
    trio.run(_main, args.checks)


if __name__ == "__main__":
    main()
