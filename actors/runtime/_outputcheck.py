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
time, abandoned after :data:`CHECK_SECONDS`.

Regular expressions. A schema with ``pattern`` or ``patternProperties`` is checked in a
separate Python process instead: a hostile pattern can backtrack for hours, and Python's ``re``
holds the GIL while it does, so only a process can be stopped. That process is long-lived: the
:class:`PatternWorker` actor, a trio task started in the runtime's nursery on the first such
check (a runtime that never sees one never starts it), owns it and is reached only through its
bounded mailbox. Each request (the schema's JSON text, the value, how many errors to report) is
one JSON line on the process's stdin, its answer one JSON line on its stdout; the process keeps
the compiled validators by schema text (the last :data:`_WORKER_CACHE`), so a check costs a
pipe round trip, not a Python start and a ``jsonschema`` import. Requests are served one at a
time, in order:

- a check that takes more than ``check_seconds`` is abandoned: the process is killed (SIGKILL),
  the result reported as not checkable in time, and the next request starts a fresh process;
- a request that waited more than ``check_seconds`` for its turn (behind a hostile check) is
  answered the same way without running, so no caller waits much more than twice
  ``check_seconds`` (plus, for the request that starts the process, at most
  :data:`START_SECONDS` for it to start);
- a process that has ended, or answers something that is not an answer, costs the check at hand
  a reason that says so; the next request starts a fresh process (one that ended while idle, say
  killed from outside, is replaced before the request is sent);
- when the runtime stops, the task is cancelled: the requests still waiting are answered that
  the runtime is closing, and the process is killed and reaped before the runtime's nursery
  exits.

No orphan: the process runs in a session (process group) of its own, exits when its stdin ends
(the host closed it or died), and arms a timer of ``check_seconds`` plus one second around each
check whose default action (SIGALRM) ends it even if the host is gone mid-check.
"""

from __future__ import annotations

import functools
import itertools
import json
import subprocess
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar

import attrs
import trio

from ...protocol._types import CallToolResult, Tool
from ._toolcheck import DEFAULT_BUDGET, SchemaBudget, inspect_schema, json_size

if TYPE_CHECKING:
    import jsonschema.protocols

__all__ = [
    "CHECK_SECONDS",
    "MAX_THREADS",
    "START_SECONDS",
    "OutputChecker",
    "PatternCheck",
    "PatternWorker",
    "compile_output_schema",
]

#: How long one check (in a worker thread or in the checking process) may take before the
#: result is reported as not checkable in time.
CHECK_SECONDS: Final = 10.0
#: Worker threads checking results at once (a large value or schema keeps one busy).
MAX_THREADS: Final = 2
#: How long the checking process may take to start (Python started, ``jsonschema`` imported).
START_SECONDS: Final = 30.0
#: Requests waiting for the checking process's task.
MAILBOX_SIZE: Final = 64
#: Reasons given for one result, and characters of each validator message.
_SHOWN: Final = 3
_MESSAGE_CHARS: Final = 300
#: Tool definitions whose compiled schema is kept.
_CACHE_SIZE: Final = 1024
#: Compiled validators the checking process keeps (by schema text).
_WORKER_CACHE: Final = 256
#: The longest answer line the checking process may write (a few short messages).
_ANSWER_BYTES: Final = 65_536
#: The timer the checking process arms around a check is never longer than this.
_LONGEST_ALARM: Final = 86_400.0

_T = TypeVar("_T")

#: What the checking process runs: it says it is ready, then for each request line
#: ``{"schema": <the schema's JSON text>, "value": ..., "limit": n, "seconds": s}`` on stdin it
#: writes one answer line on stdout: ``[[path, message], ...]`` (at most ``limit`` errors), or
#: ``{"failed": "Type: message"}`` when the check itself raised. It exits when stdin ends. A timer
#: (SIGALRM, whose default action ends the process) is armed for ``seconds`` + 1 around each
#: check. It imports only jsonschema (and what the standard library needs).
_WORKER: Final = """
import itertools, json, signal, sys
import jsonschema.validators, referencing
default = jsonschema.validators.Draft202012Validator
alarm = getattr(signal, "setitimer", None)
cache = {}
out = sys.stdout
out.write('"ready"\\n')
out.flush()
for line in sys.stdin.buffer:
    try:
        request = json.loads(line)
        text = request["schema"]
        validator = cache.get(text)
        if validator is None:
            schema = json.loads(text)
            cls = jsonschema.validators.validator_for(schema, default=default)
            validator = cls(schema, registry=referencing.Registry())
            if len(cache) >= MAX_CACHED:
                del cache[next(iter(cache))]
            cache[text] = validator
        if alarm is not None:
            alarm(signal.ITIMER_REAL, request["seconds"] + 1.0)
        try:
            found = itertools.islice(validator.iter_errors(request["value"]), request["limit"])
            answer = [[e.json_path, e.message[:1000]] for e in found]
        finally:
            if alarm is not None:
                alarm(signal.ITIMER_REAL, 0)
    except Exception as exc:
        answer = {"failed": "%s: %s" % (type(exc).__name__, str(exc)[:1000])}
    out.write(json.dumps(answer) + "\\n")
    out.flush()
"""

_NO_STRUCTURED: Final = (
    "the tool declares an outputSchema but its result has no structuredContent",
)
_CLOSED: Final = (
    "the structuredContent could not be checked: the runtime is closing (its checking process "
    "has stopped)",
)


@attrs.frozen(kw_only=True)
class _Compiled:
    """An output schema ready to check values (``validator``), or why it cannot be used
    (``problem``); ``regex_text`` (the schema's JSON text, itself JSON-encoded as a string) when
    checking may run its regular expressions (in the checking process), ``large`` when the schema
    is large (values are checked in a worker thread)."""

    validator: jsonschema.protocols.Validator | None = None
    problem: str | None = None
    regex_text: str | None = None
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
    # Imported on first use: jsonschema costs about 45 ms of import time, which a host whose
    # tools declare no outputSchema never needs to pay.
    import jsonschema.exceptions
    import jsonschema.validators
    import referencing

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
    regex_text = json.dumps(text) if '"pattern' in text else None
    return _Compiled(validator=validator, regex_text=regex_text)


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


def _late(check_seconds: float) -> tuple[str, ...]:
    return (
        f"the structuredContent could not be checked against the outputSchema within "
        f"{check_seconds:g} s",
    )


# --------------------------------------------------------------------------- the checking process


class _Reply:
    """One check's answer: resolved once, synchronously, by the :class:`PatternWorker` task;
    waited for by the one caller. ``abandoned`` is the caller's: set once it stopped waiting,
    so the worker does not run a check nobody waits for."""

    __slots__ = ("_answer", "_done", "abandoned")

    def __init__(self) -> None:
        self._done = trio.Event()
        self._answer: tuple[str, ...] = ()
        self.abandoned = False

    def resolve(self, answer: tuple[str, ...]) -> None:
        """Store the answer and wake the caller; the first answer wins. Never blocks."""
        if not self._done.is_set():
            self._answer = answer
            self._done.set()

    async def wait(self) -> tuple[str, ...]:
        try:
            await self._done.wait()
        finally:
            self.abandoned = True
        return self._answer


@attrs.frozen(kw_only=True)
class PatternCheck:
    """The one message of :class:`PatternWorker`: check ``value`` (JSON text) against the schema
    (``schema``: its JSON text, JSON-encoded as a string), answer into ``reply``. ``queued_at``:
    when it was sent (trio time), for the bound on waiting."""

    schema: str
    value: str
    queued_at: float
    reply: _Reply = attrs.field(eq=False)


@attrs.define(eq=False)
class _Child:
    """The checking process and what has been read of its stdout."""

    process: trio.Process
    buffer: bytearray = attrs.field(factory=bytearray)


def _ended(code: int | None) -> str:
    if code is None:
        return "ended"
    if code < 0:
        return f"ended by signal {-code}"
    return f"exited with status {code}"


@attrs.define(eq=False)
class PatternWorker:
    """The actor that owns the checking process (module docstring, "Regular expressions").
    Other tasks call :meth:`check`, which sends a :class:`PatternCheck` to its bounded mailbox
    and waits for the answer; only :meth:`run` touches the process. ``pid`` is the running
    process's id (None when there is none), for diagnostics and tests."""

    check_seconds: float = CHECK_SECONDS
    start_seconds: float = START_SECONDS
    _inbox: trio.MemorySendChannel[PatternCheck] = attrs.field(init=False)
    _mailbox: trio.MemoryReceiveChannel[PatternCheck] = attrs.field(init=False)
    _child: _Child | None = attrs.field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        self._inbox, self._mailbox = trio.open_memory_channel[PatternCheck](MAILBOX_SIZE)

    @property
    def pid(self) -> int | None:
        child = self._child
        return None if child is None else child.process.pid

    # ------------------------------------------------------------------ for other tasks

    async def check(self, schema: str, value: str) -> tuple[str, ...]:
        """Why ``value`` (JSON text) does not match ``schema`` (its JSON text, JSON-encoded as a
        string), or why it could not be checked; empty when it matches."""
        reply = _Reply()
        request = PatternCheck(
            schema=schema, value=value, queued_at=trio.current_time(), reply=reply
        )
        try:
            await self._inbox.send(request)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return _CLOSED
        return await reply.wait()

    # ------------------------------------------------------------------ the task

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve requests one at a time until cancelled (the runtime stopping); then answer the
        waiting ones that the runtime is closing, and kill and reap the process."""
        task_status.started()
        try:
            async for request in self._mailbox:
                reply = request.reply
                try:
                    if reply.abandoned:
                        continue
                    if trio.current_time() - request.queued_at > self.check_seconds:
                        reply.resolve(_late(self.check_seconds))
                        continue
                    reply.resolve(await self._check(request))
                finally:
                    reply.resolve(_CLOSED)  # cancelled mid-check: answered all the same
        finally:
            self._close_mailbox()
            await self._stop()

    def _close_mailbox(self) -> None:
        """Answer every request still waiting, then close the mailbox (later senders are told
        at once). Sync: nothing can be sent in between."""
        while True:
            try:
                request = self._mailbox.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                break
            request.reply.resolve(_CLOSED)
        self._mailbox.close()

    async def _check(self, request: PatternCheck) -> tuple[str, ...]:
        child = self._child
        if child is not None and child.process.returncode is not None:
            await self._stop()  # it ended while idle (killed from outside): a fresh one
        if self._child is None:
            problem = await self._start()
            if problem is not None:
                return (f"the structuredContent could not be checked: {problem}",)
        child = self._child
        assert child is not None
        seconds = min(self.check_seconds, _LONGEST_ALARM)
        line = (
            f'{{"schema":{request.schema},"value":{request.value},"limit":{_SHOWN + 1},'
            f'"seconds":{seconds!r}}}\n'
        ).encode("ascii")
        answer: bytes | str
        with trio.move_on_after(self.check_seconds) as timer:
            answer = await self._exchange(child, line)
        if timer.cancelled_caught:
            await self._stop()
            return _late(self.check_seconds)
        if isinstance(answer, bytes):
            reasons = _parse_answer(answer)
            if reasons is not None:
                return reasons
            answer = "answered something that is not a check's answer"
        code = await self._stop()
        if not answer:
            answer = _ended(code)
        return (f"the structuredContent could not be checked: the checking process {answer}",)

    async def _exchange(self, child: _Child, line: bytes) -> bytes | str:
        """Send ``line``, read one answer line: the line, or "" when the process has ended
        (its stdout or stdin closed), or what is wrong with what it wrote."""
        stdin = child.process.stdin
        assert stdin is not None
        try:
            await stdin.send_all(line)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return ""
        return await _read_line(child)

    async def _start(self) -> str | None:
        """Start the checking process and wait until it is ready; None, or what went wrong."""
        command = [sys.executable, "-I", "-c", _WORKER.replace("MAX_CACHED", str(_WORKER_CACHE))]
        options: dict[str, Any]
        if sys.platform == "win32":
            options = {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}
        else:
            options = {"start_new_session": True}  # a process group of its own
        try:
            process = await trio.lowlevel.open_process(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                **options,
            )
        except OSError as exc:
            return f"the checking process could not be started: {type(exc).__name__}: {exc}"
        child = self._child = _Child(process=process)
        ready: bytes | str = ""
        with trio.move_on_after(self.start_seconds) as timer:
            ready = await _read_line(child)
        if ready == b'"ready"':
            return None
        code = await self._stop()
        if timer.cancelled_caught:
            return f"the checking process did not start within {self.start_seconds:g} s"
        if isinstance(ready, bytes):
            return f"the checking process wrote {_cut(repr(ready), 80)} instead of being ready"
        return f"the checking process {ready or _ended(code)} before it was ready"

    async def _stop(self) -> int | None:
        """Kill and reap the process, if there is one; its exit status."""
        child, self._child = self._child, None
        if child is None:
            return None
        process = child.process
        if process.returncode is None:
            process.kill()
        with trio.CancelScope(shield=True):  # SIGKILL: the wait is short
            for stream in (process.stdin, process.stdout):
                if stream is not None:
                    await stream.aclose()
            await process.wait()
        return process.returncode


async def _read_line(child: _Child) -> bytes | str:
    """The next line of the process's stdout (without its end): bytes; or "" at the end of the
    stream, or what is wrong (a line too long)."""
    stdout = child.process.stdout
    assert stdout is not None
    buffer = child.buffer
    searched = 0
    while True:
        end = buffer.find(b"\n", searched)
        if end >= 0:
            line = bytes(buffer[:end])
            del buffer[: end + 1]
            return line
        if len(buffer) > _ANSWER_BYTES:
            return f"wrote an answer longer than {_ANSWER_BYTES} bytes"
        searched = len(buffer)
        try:
            chunk = await stdout.receive_some(_ANSWER_BYTES)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return ""
        if not chunk:
            return ""
        buffer += chunk


def _parse_answer(line: bytes) -> tuple[str, ...] | None:
    """The reasons in an answer line, or None when it is not an answer."""
    try:
        answer = json.loads(line)
    except ValueError:
        return None
    if isinstance(answer, dict) and isinstance(answer.get("failed"), str):
        return (f"the structuredContent could not be checked: {_cut(answer['failed'])}",)
    if not isinstance(answer, list):
        return None
    errors: list[tuple[str, str]] = []
    for error in answer:
        if not (
            isinstance(error, list)
            and len(error) == 2
            and isinstance(error[0], str)
            and isinstance(error[1], str)
        ):
            return None
        errors.append((error[0], error[1]))
    return _reasons(errors)


# --------------------------------------------------------------------------- the checker


@attrs.define(eq=False)
class OutputChecker:
    """Checks results against their tool's ``outputSchema`` for one runtime; keeps each tool
    definition's compiled schema (the last :data:`_CACHE_SIZE` definitions).

    ``offload_chars``: a schema or value bigger than this (in the measure of
    :func:`json_size`) is handled in a worker thread. The :class:`PatternWorker` for schemas
    with regular expressions is started in the nursery given to :meth:`serve_in`, on the first
    such check."""

    offload_chars: int
    budget: SchemaBudget = DEFAULT_BUDGET
    check_seconds: float = CHECK_SECONDS
    _compiled: dict[tuple[str, str], tuple[Tool, _Compiled]] = attrs.field(factory=dict, init=False)
    _limiter: trio.CapacityLimiter = attrs.field(
        factory=lambda: trio.CapacityLimiter(MAX_THREADS), init=False
    )
    _nursery: trio.Nursery | None = attrs.field(default=None, init=False)
    _patterns: PatternWorker | None = attrs.field(default=None, init=False)

    def serve_in(self, nursery: trio.Nursery | None) -> None:
        """Start the checking process's task in ``nursery`` when it is first needed (the
        runtime's root nursery, whose end ends it); None once that nursery is closing for good:
        later checks of schemas with regular expressions report that the runtime is closed."""
        self._nursery = nursery
        if nursery is None:
            self._patterns = None

    @property
    def worker_pid(self) -> int | None:
        """The checking process's id, while there is one (for diagnostics and tests)."""
        return None if self._patterns is None else self._patterns.pid

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
        small = json_size(value, limit=self.offload_chars) <= self.offload_chars
        if compiled.regex_text is not None:
            return await self._in_worker(compiled.regex_text, value, small=small)
        if not compiled.large and small:
            return _validate(compiled.validator, value)
        checked = await self._in_thread(functools.partial(_validate, compiled.validator, value))
        return _late(self.check_seconds) if checked is None else checked

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

    async def _in_worker(self, schema: str, value: Any, *, small: bool) -> tuple[str, ...]:
        """``value`` checked against ``schema`` (its JSON text, JSON-encoded) by the checking
        process (module docstring); a large value is encoded in a worker thread."""
        encode = functools.partial(_encode, value)
        if small:
            text = encode()
        else:
            encoded = await self._in_thread(encode)
            if encoded is None:
                return _late(self.check_seconds)
            text = encoded
        if isinstance(text, tuple):
            return text
        worker = self._patterns
        if worker is None:
            nursery = self._nursery
            if nursery is None:
                return _CLOSED
            worker = self._patterns = PatternWorker(check_seconds=self.check_seconds)
            nursery.start_soon(worker.run)
        return await worker.check(schema, text)

    async def _in_thread(self, work: Callable[[], _T]) -> _T | None:
        """``work()`` in a worker thread, or None when it took longer than ``check_seconds``
        (the thread is left to finish on its own)."""
        with trio.move_on_after(self.check_seconds):
            return await trio.to_thread.run_sync(
                work, limiter=self._limiter, abandon_on_cancel=True
            )
        return None


def _encode(value: Any) -> str | tuple[str, ...]:
    """``value`` as one line of ASCII JSON, or the reason it cannot be."""
    try:
        return json.dumps(value, separators=(",", ":"))
    except (RecursionError, TypeError, ValueError) as exc:
        return (f"the structuredContent could not be checked: {type(exc).__name__}",)
