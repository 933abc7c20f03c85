"""Checking a tool result's ``structuredContent`` against the tool's ``outputSchema``.

A tool that declares an ``outputSchema`` promises structured results that conform to it (the MCP
specification: servers MUST, clients SHOULD check). :class:`OutputChecker` checks each result of
such a tool, in the caller's task, before ``rt.call`` returns it; a result that breaks the
promise is never handed on as if it were fine: ``rt.call`` raises :class:`InvalidToolOutput`
(holding the result and the reasons) and the agent surface reports it to the model as a tool
error.

What counts as broken: ``structuredContent`` missing (the tool did not report an error), a value
the schema does not accept (each reason is the JSON path and the validator's message, cut to a
few hundred characters), and an ``outputSchema`` that cannot be used: too large to check (the
budget of the input checks, :class:`SchemaBudget`), not a valid JSON Schema, or a ``$ref`` that
does not resolve inside it (a schema is never fetched). A result with ``isError`` is not checked.

The validation is the ``jsonschema`` library's (2020-12 unless ``$schema`` names another draft
it knows; ``format`` is not asserted), bounded like the input checks: the schema is compiled once
per tool definition (and only when it passed the budget); a small value is checked inline, a
large one (or any value of a large schema) in a worker thread, at most :data:`MAX_THREADS` at a
time. A schema with regular expressions (``pattern``, ``patternProperties``) is checked in a
child Python process instead: a hostile pattern can backtrack for hours, and Python's ``re``
holds the GIL while it does, so only a process can be stopped. Either way a check that takes
more than :data:`CHECK_SECONDS` seconds is abandoned (the process killed) and the result
reported as not checkable in time.
"""

from __future__ import annotations

import functools
import itertools
import json
import sys
from collections.abc import Callable
from typing import Any, Final, TypeVar

import attrs
import jsonschema
import jsonschema.exceptions
import jsonschema.protocols
import jsonschema.validators
import referencing
import trio

from ...protocol._types import CallToolResult, Tool
from ._toolcheck import DEFAULT_BUDGET, SchemaBudget, inspect_schema, json_size

__all__ = ["CHECK_SECONDS", "MAX_THREADS", "OutputChecker", "compile_output_schema"]

#: How long one check in a worker thread may take before the result is reported as not
#: checkable in time.
CHECK_SECONDS: Final = 10.0
#: Worker threads checking results at once (a hostile regular expression can keep one busy).
MAX_THREADS: Final = 2
#: Reasons given for one result, and characters of each validator message.
_SHOWN: Final = 3
_MESSAGE_CHARS: Final = 300
#: Tool definitions whose compiled schema is kept.
_CACHE_SIZE: Final = 1024

_T = TypeVar("_T")

#: What the child process runs: the schema and value come as JSON on stdin, the errors go as
#: JSON ``[[path, message], ...]`` on stdout. It imports only jsonschema.
_CHILD: Final = """
import itertools, json, sys
import jsonschema.validators, referencing
data = json.load(sys.stdin)
schema = data["schema"]
cls = jsonschema.validators.validator_for(
    schema, default=jsonschema.validators.Draft202012Validator
)
validator = cls(schema, registry=referencing.Registry())
try:
    found = itertools.islice(validator.iter_errors(data["value"]), data["limit"])
    errors = [[e.json_path, e.message[:1000]] for e in found]
except Exception as exc:
    errors = [["$", "the check failed: %s: %s" % (type(exc).__name__, str(exc)[:1000])]]
json.dump(errors, sys.stdout)
"""

_NO_STRUCTURED: Final = (
    "the tool declares an outputSchema but its result has no structuredContent",
)


@attrs.frozen(kw_only=True)
class _Compiled:
    """An output schema ready to check values (``validator``), or why it cannot be used
    (``problem``); ``regex`` when checking may run its regular expressions (in a child process),
    ``large`` when the schema is large (values are checked in a worker thread)."""

    validator: jsonschema.protocols.Validator | None = None
    problem: str | None = None
    regex: bool = False
    large: bool = False


def _cut(text: str, limit: int = _MESSAGE_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."


def compile_output_schema(schema: Any, *, budget: SchemaBudget = DEFAULT_BUDGET) -> _Compiled:
    """``schema`` compiled for checking results, or the reason it cannot be used. Blocking (it
    walks the whole schema, within ``budget``); never raises for any JSON value."""
    if not isinstance(schema, dict):
        return _Compiled(problem="the tool's outputSchema is not a JSON object")
    report = inspect_schema(schema, budget=budget)
    if report.too_large is not None:
        return _Compiled(problem=f"the tool's outputSchema is {report.too_large}")
    try:
        text = json.dumps(schema)
        cls = jsonschema.validators.validator_for(
            schema, default=jsonschema.validators.Draft202012Validator
        )
        cls.check_schema(schema)
        # An empty registry: a $ref that does not resolve inside the schema (or to a draft's
        # own metaschema) is an error, never a download.
        validator = cls(schema, registry=referencing.Registry())
    except jsonschema.exceptions.SchemaError as exc:
        where = exc.json_path
        return _Compiled(
            problem=f"the tool's outputSchema is not a valid JSON Schema: {where}: "
            f"{_cut(exc.message)}"
        )
    except Exception as exc:  # the server's schema (RecursionError too): any failure is its own
        return _Compiled(
            problem=f"the tool's outputSchema cannot be used: {type(exc).__name__}: "
            f"{_cut(str(exc))}"
        )
    return _Compiled(validator=validator, regex='"pattern' in text)


def _reasons(errors: list[tuple[str, str]]) -> tuple[str, ...]:
    """At most a few ``path: message`` reasons (and "and more")."""
    reasons = [f"{path}: {_cut(message)}" for path, message in errors[:_SHOWN]]
    if len(errors) > _SHOWN:
        reasons.append("and more")
    return tuple(reasons)


def _validate(validator: jsonschema.protocols.Validator, value: Any) -> tuple[str, ...]:
    """The reasons ``value`` does not match (path: message), at most a few; empty when it does.
    Blocking; never raises (a failure of the check itself is a reason)."""
    try:
        found = itertools.islice(validator.iter_errors(value), _SHOWN + 1)
        errors = [(error.json_path, error.message) for error in found]
    except Exception as exc:  # the server's schema and value (RecursionError too): its failure
        why = f"{type(exc).__name__}: {_cut(str(exc))}"
        return (f"the structuredContent could not be checked: {why}",)
    return _reasons(errors)


@attrs.define(eq=False)
class OutputChecker:
    """Checks results against their tool's ``outputSchema`` for one runtime; keeps each tool
    definition's compiled schema (the last :data:`_CACHE_SIZE` definitions).

    ``offload_chars``: a schema or value bigger than this (in the measure of
    :func:`json_size`) is handled in a worker thread."""

    offload_chars: int
    budget: SchemaBudget = DEFAULT_BUDGET
    check_seconds: float = CHECK_SECONDS
    _compiled: dict[tuple[str, str], tuple[Tool, _Compiled]] = attrs.field(factory=dict, init=False)
    _limiter: trio.CapacityLimiter = attrs.field(
        factory=lambda: trio.CapacityLimiter(MAX_THREADS), init=False
    )

    async def check(self, server: str, tool: Tool, result: CallToolResult) -> tuple[str, ...]:
        """Why ``result`` of ``tool`` (of ``server``) breaks the tool's ``outputSchema``; empty
        when it does not (or the tool declares none, or the result is a tool error)."""
        schema = tool.output_schema
        if schema is None or result.is_error:
            return ()
        value = result.structured_content
        if value is None:
            return _NO_STRUCTURED
        compiled = await self._compile(server, tool)
        if compiled.validator is None:
            assert compiled.problem is not None
            return (compiled.problem,)
        if compiled.regex:
            checked = await self._in_child(schema, value)
        elif (
            not compiled.large and json_size(value, limit=self.offload_chars) <= self.offload_chars
        ):
            return _validate(compiled.validator, value)
        else:
            checked = await self._in_thread(functools.partial(_validate, compiled.validator, value))
        if checked is None:
            return (
                f"the structuredContent could not be checked against the outputSchema within "
                f"{self.check_seconds:g} s",
            )
        return checked

    async def _compile(self, server: str, tool: Tool) -> _Compiled:
        key = (server, tool.name)
        cached = self._compiled.get(key)
        if cached is not None and cached[0] is tool:
            return cached[1]
        schema = tool.output_schema
        compile_it = functools.partial(compile_output_schema, schema, budget=self.budget)
        if json_size(schema, limit=self.offload_chars) <= self.offload_chars:
            compiled = compile_it()
        else:  # large: compiled, and every value checked, in a worker thread
            done = await self._in_thread(compile_it)
            compiled = (
                _Compiled(
                    problem=f"the tool's outputSchema could not be compiled within "
                    f"{self.check_seconds:g} s"
                )
                if done is None
                else attrs.evolve(done, large=True)
            )
        self._compiled.pop(key, None)
        if len(self._compiled) >= _CACHE_SIZE:
            del self._compiled[next(iter(self._compiled))]
        self._compiled[key] = (tool, compiled)
        return compiled

    async def _in_child(self, schema: Any, value: Any) -> tuple[str, ...] | None:
        """``value`` checked against ``schema`` in a child Python process (killed after
        ``check_seconds``: None), at most :data:`MAX_THREADS` at a time."""
        try:
            payload = json.dumps({"schema": schema, "value": value, "limit": _SHOWN + 1})
        except (RecursionError, TypeError, ValueError) as exc:
            return (f"the structuredContent could not be checked: {type(exc).__name__}",)
        command = [sys.executable, "-I", "-c", _CHILD]
        with trio.move_on_after(self.check_seconds):
            async with self._limiter:
                done = await trio.run_process(
                    command,
                    stdin=payload.encode("utf-8", "surrogatepass"),
                    capture_stdout=True,
                    capture_stderr=True,
                    check=False,
                )
            try:
                errors = json.loads(done.stdout) if done.returncode == 0 else None
            except ValueError:
                errors = None
            if not isinstance(errors, list):
                tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:]
                return (
                    f"the structuredContent could not be checked (the checking process exited "
                    f"with {done.returncode}{': ' + _cut(tail[0]) if tail else ''})",
                )
            return _reasons([(str(path), str(message)) for path, message in errors])
        return None

    async def _in_thread(self, work: Callable[[], _T]) -> _T | None:
        """``work()`` in a worker thread, or None when it took longer than ``check_seconds``
        (the thread is left to finish on its own)."""
        with trio.move_on_after(self.check_seconds):
            return await trio.to_thread.run_sync(
                work, limiter=self._limiter, abandon_on_cancel=True
            )
        return None
