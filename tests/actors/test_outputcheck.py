"""structuredContent checked against the tool's outputSchema: the checker alone (reasons,
schemas that cannot be used, the bounds), then through ``rt.call`` and the agent surface."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

from trio_mcp.actors import AgentSurface
from trio_mcp.actors.config._backoff import RetryPolicy
from trio_mcp.actors.config._config import RuntimeConfig
from trio_mcp.actors.runtime._outputcheck import OutputChecker
from trio_mcp.actors.runtime._runtime import open_runtime
from trio_mcp.actors.testing._fakes import FakeServer, FakeTool
from trio_mcp.protocol import InvalidToolOutput
from trio_mcp.protocol._types import CallToolResult, TextContent, Tool

WEATHER: dict[str, Any] = {
    "type": "object",
    "properties": {
        "temperature": {"type": "number"},
        "unit": {"enum": ["C", "F"]},
    },
    "required": ["temperature", "unit"],
}


def tool(schema: Any) -> Tool:
    return Tool(name="t", input_schema={"type": "object"}, output_schema=schema)


def result(structured: Any = None, *, error: bool | None = None) -> CallToolResult:
    return CallToolResult(
        content=(TextContent(text="report"),), structured_content=structured, is_error=error
    )


async def check(schema: Any, structured: Any, **options: Any) -> tuple[str, ...]:
    """One check by a checker of its own, whose checking process (if it needs one) ends with
    the nursery it is started in, as the runtime's does."""
    async with trio.open_nursery() as nursery:
        checker = OutputChecker(offload_chars=options.pop("offload_chars", 65_536), **options)
        checker.serve_in(nursery)
        reasons = await checker.check("s", tool(schema), result(structured))
        nursery.cancel_scope.cancel()
    return reasons


async def test_a_matching_value_passes_and_a_mismatch_says_where_and_why() -> None:
    assert await check(WEATHER, {"temperature": 21.5, "unit": "C"}) == ()
    assert await check(WEATHER, {"temperature": "hot", "unit": "K"}) == (
        "$.temperature: 'hot' is not of type 'number'",
        "$.unit: 'K' is not one of ['C', 'F']",
    )
    assert await check(WEATHER, {"unit": "C"}) == ("$: 'temperature' is a required property",)


async def test_what_is_not_checked() -> None:
    checker = OutputChecker(offload_chars=65_536)
    assert await checker.check("s", tool(None), result({"anything": 1})) == ()
    # A tool error is not held to the schema.
    assert await checker.check("s", tool(WEATHER), result(None, error=True)) == ()
    assert await checker.check("s", tool(WEATHER), result({"x": 1}, error=True)) == ()


async def test_a_missing_structured_content_is_a_mismatch() -> None:
    assert await check(WEATHER, None) == (
        "the tool declares an outputSchema but its result has no structuredContent",
    )


async def test_reasons_are_few_and_short() -> None:
    schema = {"type": "object", "properties": {k: {"type": "integer"} for k in "abcde"}}
    reasons = await check(schema, dict.fromkeys("abcde", "x" * 1000))
    assert len(reasons) == 4
    assert reasons[-1] == "and more"
    assert reasons[0].startswith("$.a: 'xxxx")
    assert reasons[0].endswith("...")
    assert len(reasons[0]) == len("$.a: ") + 300 + 3


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        ([1, 2], "the tool's outputSchema is not a JSON object"),
        (
            {"type": 12},
            "the tool's outputSchema is not a valid JSON Schema: $.type: 12 is not valid under "
            "any of the given schemas",
        ),
        ({"$schema": {"not": "a string"}, "type": "object"}, "the tool's outputSchema "),
        (
            {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}},
            "the structuredContent could not be checked: ",
        ),
    ],
)
async def test_a_schema_that_cannot_be_used_is_a_reason_not_a_crash(
    schema: Any, reason: str
) -> None:
    (got,) = await check(schema, {"a": 1})
    assert got.startswith(reason)


async def test_a_schema_too_large_to_check_is_not_compiled() -> None:
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(250):
        deep = {"type": "array", "items": deep}
    (got,) = await check(deep, [])
    assert got.startswith("the tool's outputSchema is schema too large to check: ")


async def test_a_remote_ref_is_never_fetched(monkeypatch: pytest.MonkeyPatch) -> None:
    def fetch(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a schema was fetched")

    monkeypatch.setattr(urllib.request, "urlopen", fetch)
    schema = {"type": "object", "properties": {"a": {"$ref": "http://127.0.0.1:9/x.json"}}}
    (got,) = await check(schema, {"a": 1})
    assert got.startswith("the structuredContent could not be checked: ")
    assert "http://127.0.0.1:9/x.json" in got
    # A local $ref resolves.
    local = {"$defs": {"n": {"type": "number"}}, "properties": {"a": {"$ref": "#/$defs/n"}}}
    assert await check(local, {"a": 1}) == ()
    assert await check(local, {"a": "1"}) == ("$.a: '1' is not of type 'number'",)


async def test_a_schema_is_compiled_once_per_definition(monkeypatch: pytest.MonkeyPatch) -> None:
    import trio_mcp.actors.runtime._outputcheck as module

    compiled: list[Any] = []
    real = module.compile_output_schema

    def counting(schema: Any, **options: Any) -> Any:
        compiled.append(schema)
        return real(schema, **options)

    monkeypatch.setattr(module, "compile_output_schema", counting)
    checker = OutputChecker(offload_chars=65_536)
    one = tool(WEATHER)
    for _ in range(3):
        assert await checker.check("s", one, result({"temperature": 1, "unit": "F"})) == ()
    assert len(compiled) == 1
    await checker.check("s", tool(WEATHER), result({"temperature": 1, "unit": "F"}))  # re-listed
    assert len(compiled) == 2


async def test_large_values_are_checked_in_a_worker_thread() -> None:
    schema = {"type": "object", "additionalProperties": {"type": "string"}}
    big = {f"k{i}": "v" * 10 for i in range(1000)}
    assert await check(schema, big, offload_chars=100) == ()
    bad = {**big, "k5": 5}
    assert await check(schema, bad, offload_chars=100) == ("$.k5: 5 is not of type 'string'",)


async def test_patterns_are_matched_in_a_process_that_is_stopped_in_time() -> None:
    schema = {"type": "object", "properties": {"id": {"type": "string", "pattern": "^[a-z]+$"}}}
    assert await check(schema, {"id": "abc"}) == ()
    assert await check(schema, {"id": "ABC"}) == ("$.id: 'ABC' does not match '^[a-z]+$'",)
    # A pattern that backtracks for hours (and would hold the GIL all that time): the check is
    # abandoned, its process killed, and the event loop was never blocked.
    hostile = {"type": "object", "patternProperties": {"^(a+)+$": {"type": "string"}}}
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await trio.sleep(0.05)
            ticks += 1

    started = time.monotonic()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(tick)
        reasons = await check(hostile, {"a" * 64 + "!": "x"}, check_seconds=1.0)
        nursery.cancel_scope.cancel()
    assert reasons == (
        "the structuredContent could not be checked against the outputSchema within 1 s",
    )
    assert time.monotonic() - started < 10
    assert ticks >= 5  # the event loop ran all along


# --------------------------------------------------------------------------- the checking process

ID = {"type": "object", "properties": {"id": {"type": "string", "pattern": "^[a-z]+$"}}}
HOSTILE = {"type": "object", "patternProperties": {"^(a+)+$": {"type": "string"}}}
HOSTILE_VALUE = {"a" * 64 + "!": "x"}
LATE = "the structuredContent could not be checked against the outputSchema within 0.5 s"


def alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (a zombie not reaped yet counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def pid_of(checker: OutputChecker) -> int | None:
    """The checker's checking process, read anew each time."""
    return checker.worker_pid


@asynccontextmanager
async def serving(**options: Any) -> AsyncIterator[OutputChecker]:
    """A checker whose checking process runs in a nursery of the test's, which ends it."""
    async with trio.open_nursery() as nursery:
        checker = OutputChecker(offload_chars=65_536, **options)
        checker.serve_in(nursery)
        yield checker
        nursery.cancel_scope.cancel()


class CountedPopen(subprocess.Popen[bytes]):
    started = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        CountedPopen.started += 1
        super().__init__(*args, **kwargs)


async def test_checks_share_one_long_lived_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(subprocess, "Popen", CountedPopen)
    CountedPopen.started = 0
    other = {"type": "object", "patternProperties": {"^x": {"type": "integer"}}}
    async with serving() as checker:
        assert pid_of(checker) is None  # none until a schema with patterns is checked
        weather = result({"temperature": 1, "unit": "C"})
        assert await checker.check("s", tool(WEATHER), weather) == ()
        assert pid_of(checker) is None  # a schema without patterns is checked here
        assert await checker.check("s", tool(ID), result({"id": "abc"})) == ()
        pid = pid_of(checker)
        assert pid is not None
        assert alive(pid)
        assert await checker.check("s", tool(ID), result({"id": "ABC"})) == (
            "$.id: 'ABC' does not match '^[a-z]+$'",
        )
        assert await checker.check("s", tool(other), result({"xa": "1"})) == (
            "$.xa: '1' is not of type 'integer'",
        )
        assert pid_of(checker) == pid
        assert CountedPopen.started == 1  # one process started for the four checks
    # the nursery that ran it has ended: the process was killed and reaped
    assert not alive(pid)


async def test_a_hostile_pattern_costs_its_process_and_the_next_check_gets_a_fresh_one() -> None:
    async with serving(check_seconds=0.5) as checker:
        assert await checker.check("s", tool(ID), result({"id": "abc"})) == ()
        first = pid_of(checker)
        assert first is not None
        assert await checker.check("s", tool(HOSTILE), result(HOSTILE_VALUE)) == (LATE,)
        assert pid_of(checker) is None
        assert not alive(first)  # killed and reaped before the answer came
        assert await checker.check("s", tool(ID), result({"id": "ABC"})) == (
            "$.id: 'ABC' does not match '^[a-z]+$'",
        )
        second = pid_of(checker)
        assert second is not None
        assert second != first


async def test_a_check_waits_its_turn_at_most_check_seconds() -> None:
    """Checks are served one at a time: a check queued behind a hostile one is answered as not
    checkable in time once it has waited ``check_seconds``, instead of waiting on."""
    answers: dict[str, tuple[str, ...]] = {}
    async with serving(check_seconds=0.5) as checker:

        async def run(name: str, schema: Any, value: Any) -> None:
            answers[name] = await checker.check("s", tool(schema), result(value))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(run, "hostile", HOSTILE, HOSTILE_VALUE)
            await trio.testing.wait_all_tasks_blocked()  # the hostile request is sent
            nursery.start_soon(run, "queued", ID, {"id": "abc"})
        assert answers == {"hostile": (LATE,), "queued": (LATE,)}
        assert await checker.check("s", tool(ID), result({"id": "abc"})) == ()


async def test_a_process_killed_from_outside_is_replaced_for_the_next_check() -> None:
    async with serving() as checker:
        assert await checker.check("s", tool(ID), result({"id": "abc"})) == ()
        pid = pid_of(checker)
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        # wait until it has exited, without reaping it (the worker's task does that)
        await trio.to_thread.run_sync(os.waitid, os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        assert await checker.check("s", tool(ID), result({"id": "ABC"})) == (
            "$.id: 'ABC' does not match '^[a-z]+$'",
        )
        assert pid_of(checker) not in (None, pid)
        assert not alive(pid)


@pytest.mark.parametrize(
    ("script", "reason"),
    [
        (
            "import sys\nprint('\"ready\"', flush=True)\nsys.stdin.readline()\nsys.exit(3)",
            "the checking process exited with status 3",
        ),
        (
            "import sys\nprint('\"ready\"', flush=True)\nsys.stdin.readline()\n"
            "print('{\"errors\": 1}', flush=True)\nsys.stdin.readline()",
            "the checking process answered something that is not a check's answer",
        ),
        (
            "import sys\nprint('\"ready\"', flush=True)\nsys.stdin.readline()\n"
            "sys.stdout.write('x' * 100000)\nsys.stdout.flush()\nsys.stdin.readline()",
            "the checking process wrote an answer longer than 65536 bytes",
        ),
        (
            "import sys\nsys.exit(4)",
            "the checking process exited with status 4 before it was ready",
        ),
        ("print('hello')", "the checking process wrote b'hello' instead of being ready"),
    ],
)
async def test_a_process_that_ends_or_answers_garbage_costs_that_check_only(
    monkeypatch: pytest.MonkeyPatch, script: str, reason: str
) -> None:
    import trio_mcp.actors.runtime._outputcheck as module

    async with serving() as checker:
        monkeypatch.setattr(module, "_WORKER", script)
        assert await checker.check("s", tool(ID), result({"id": "abc"})) == (
            f"the structuredContent could not be checked: {reason}",
        )
        assert pid_of(checker) is None
        monkeypatch.undo()  # the next request starts a real checking process
        assert await checker.check("s", tool(ID), result({"id": "ABC"})) == (
            "$.id: 'ABC' does not match '^[a-z]+$'",
        )


async def test_a_check_that_fails_in_the_process_is_a_reason_and_the_process_goes_on() -> None:
    # a $ref that does not resolve is found only when the value reaches it
    schema = {"properties": {"id": {"pattern": "^a"}, "b": {"$ref": "#/$defs/missing"}}}
    async with serving() as checker:
        (got,) = await checker.check("s", tool(schema), result({"b": 1}))
        assert got.startswith("the structuredContent could not be checked: ")
        assert "PointerToNowhere: '/$defs/missing' does not exist" in got
        pid = pid_of(checker)
        assert await checker.check("s", tool(schema), result({"id": "abc"})) == ()
        assert pid_of(checker) == pid


# --------------------------------------------------------------------------- through the runtime


def fake_weather(structured: Any, name: str = "w") -> FakeServer:
    answer = {
        "content": [{"type": "text", "text": "It is warm."}],
        "structuredContent": structured,
    }
    return FakeServer(name=name, tools=[FakeTool("now", output_schema=WEATHER, result=answer)])


async def test_rt_call_raises_with_the_result_and_the_reasons(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = fake_weather({"temperature": "hot", "unit": "C"})
    config = RuntimeConfig(servers=(fake.server_config(),), retry=RetryPolicy(jitter=0.0))
    async with open_runtime(config) as rt:
        await rt.wait_ready()
        with pytest.raises(InvalidToolOutput) as raised:
            await rt.call("mcp_w_now")
    error = raised.value
    assert error.problems == ("$.temperature: 'hot' is not of type 'number'",)
    assert error.result.text == "It is warm."
    assert error.result.structured_content == {"temperature": "hot", "unit": "C"}
    assert (error.server, error.method) == ("w", "tools/call")
    assert str(error) == (
        "the result of mcp_w_now (w/now) does not match the tool's outputSchema: "
        "$.temperature: 'hot' is not of type 'number'"
    )


async def test_the_model_reads_a_mismatch_as_a_tool_error_with_the_reason(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = fake_weather({"temperature": "hot", "unit": "C"})
    good = fake_weather({"temperature": 21.5, "unit": "C"}, name="g")
    servers = (
        fake.server_config(trust_level="trusted"),
        good.server_config(trust_level="trusted"),
    )
    config = RuntimeConfig(servers=servers, retry=RetryPolicy(jitter=0.0))
    async with open_runtime(config) as rt:
        agent = AgentSurface(rt)
        await rt.wait_ready()
        bad = await agent.call_for_model("mcp_w_now", {})
        fine = await agent.call_for_model("mcp_g_now", {})
    assert (bad.status, bad.is_error) == ("invalid_output", True)
    assert bad.text == (
        "[the tool's result does not match its outputSchema, so it is an error: "
        "$.temperature: 'hot' is not of type 'number']\n"
        "It is warm.\n"
        "[structured content]\n" + json.dumps({"temperature": "hot", "unit": "C"}).replace(" ", "")
    )
    assert (fine.status, fine.is_error) == ("ok", False)


async def test_closing_the_runtime_ends_the_checking_process() -> None:
    schema = {"type": "object", "properties": {"id": {"type": "string", "pattern": "^[a-z]+$"}}}
    answer = {"content": [{"type": "text", "text": "id"}], "structuredContent": {"id": "abc"}}
    fake = FakeServer(name="w", tools=[FakeTool("id", output_schema=schema, result=answer)])
    config = RuntimeConfig(servers=(fake.server_config(),), retry=RetryPolicy(jitter=0.0))
    with trio.fail_after(60):
        async with open_runtime(config) as rt:
            await rt.wait_ready()
            assert pid_of(rt._outputs) is None
            assert (await rt.call("mcp_w_id")).structured_content == {"id": "abc"}
            pid = pid_of(rt._outputs)
            assert pid is not None
            assert alive(pid)
            assert (await rt.call("mcp_w_id")).structured_content == {"id": "abc"}
            assert pid_of(rt._outputs) == pid
    # the runtime's nursery has exited: the process was killed and reaped
    assert not alive(pid)
    # a check after the end reports it, and starts nothing
    late = await rt._outputs.check("w", tool(schema), result({"id": "abc"}))
    assert late == (
        "the structuredContent could not be checked: the runtime is closing (its checking "
        "process has stopped)",
    )
    assert pid_of(rt._outputs) is None
