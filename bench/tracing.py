"""What tracing costs a call: ``rt.call`` with OpenTelemetry absent, present without an SDK, and
recording spans, and the guard that is all the absent case pays.

    python -m bench.tracing [--calls N] [--rounds R]

Each mode runs in a process of its own (``absent`` blocks ``import opentelemetry``, as an
install without the ``otel`` extra; ``api``: the API alone, no tracer provider set; ``sdk``: an
SDK ``TracerProvider`` with no exporter, so every span is recorded): ``--rounds`` rounds of
``--calls`` sequential calls to the in-memory fake server after a warm-up, and the median
microseconds per call. The whole-call figures move by several percent from run to run on a busy
machine, so each process also times its tracing hooks alone with :mod:`timeit`: ``absent``, the
guard (the two checks ``Runtime.call`` and each request's send make); ``api`` and ``sdk``, the
call's span and the trace context put into its request. Not part of ``make bench``: run it by
hand.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import timeit
from typing import Any

__all__ = ["main"]

MODES = ("absent", "api", "sdk")


def _measure(mode: str, calls: int, rounds: int) -> dict[str, Any]:
    """One mode, in this process (``python -m bench.tracing --child MODE``)."""
    if mode == "absent":
        sys.modules["opentelemetry"] = None  # type: ignore[assignment]
    import trio

    from trio_mcp.actors import RuntimeConfig, open_runtime
    from trio_mcp.actors.runtime import _tracing
    from trio_mcp.actors.testing import FakeServer, FakeTool

    provider = None
    if mode == "sdk":
        from opentelemetry.sdk.trace import TracerProvider

        provider = TracerProvider()  # spans recorded, then dropped: no exporter
    fake = FakeServer(name="null", tools=[FakeTool("echo", result="ok")])
    config = RuntimeConfig(servers=(fake.server_config(),), tracer_provider=provider)
    per_call: list[float] = []

    async def run() -> None:
        async with open_runtime(config) as rt:
            await rt.wait_ready()
            for _ in range(max(calls // 10, 100)):
                await rt.call("mcp_null_echo")
            for _ in range(rounds):
                started = time.perf_counter()
                for _ in range(calls):
                    await rt.call("mcp_null_echo")
                per_call.append((time.perf_counter() - started) / calls * 1e6)

    trio.run(run)
    found: dict[str, Any] = {"mode": mode, "tracing": _tracing.TRACING, "us_per_call": per_call}
    # What one call's tracing hooks cost alone, the call itself aside (best of 5, in ns).
    if mode == "absent":
        # The two checks of the disabled path, as they are written in Runtime.call and in
        # Session._send_request (module globals, bound at import).
        scope: dict[str, Any] = {"TRACING": _tracing.TRACING, "start_call": None}
        statement = "span = start_call(config, name) if TRACING else None\nif TRACING: pass"
        loops = 2_000_000
    else:
        from trio_mcp.protocol import CallToolResult

        scope = {
            "start_call": _tracing.start_call,
            "with_trace_context": _tracing.with_trace_context,
            "result": CallToolResult(content=[]),
        }
        # A call's span (made current, given its target and outcome, ended) and the trace
        # context put into its request's _meta; without an SDK the span is None.
        statement = (
            "span = start_call(config, name)\n"
            "params = with_trace_context({'name': 't', 'arguments': {}})\n"
            "if span is not None:\n"
            "    span.target('s', 't'); span.succeeded(result); span.end()"
        )
        loops = 20_000
    scope |= {"config": config, "name": "mcp_null_echo"}
    best = min(timeit.repeat(statement, globals=scope, number=loops, repeat=5))
    found["hooks_ns"] = best / loops * 1e9
    return found


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.tracing", description=__doc__)
    parser.add_argument("--calls", type=int, default=5_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(_measure(args.child, args.calls, args.rounds)))
        return
    results = []
    for mode in MODES:
        child = ["--child", mode, "--calls", str(args.calls), "--rounds", str(args.rounds)]
        done = subprocess.run(
            [sys.executable, "-m", "bench.tracing", *child],
            capture_output=True,
            text=True,
            check=True,
        )
        results.append(json.loads(done.stdout))
    base = statistics.median(results[0]["us_per_call"])
    print(f"rt.call to the in-memory fake, {args.calls} calls x {args.rounds} rounds (median),")
    print("and the tracing hooks of one call timed alone:")
    for found in results:
        median = statistics.median(found["us_per_call"])
        print(
            f"  {found['mode']:<7} tracing={found['tracing']!s:<5} {median:8.2f} us/call "
            f"({(median / base - 1) * 100:+5.1f} %)   hooks {found['hooks_ns']:9.1f} ns/call"
        )


if __name__ == "__main__":
    main()
