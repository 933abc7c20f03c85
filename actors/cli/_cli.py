"""The ``trio-mcp`` command line.

Commands (``docs/cli.md`` has the details and the ``--json`` shapes)::

    trio-mcp status [--watch]                  every server's state, in a table
    trio-mcp tools                             the registered tools
    trio-mcp call NAME [--arg K=V] [--args JSON] [--yes] [--save DIR]
                                               call a tool (registered name or server/tool)
    trio-mcp resources [SERVER]                list resources and resource templates
    trio-mcp read SERVER URI                   read one resource
    trio-mcp prompts [SERVER]                  list prompts
    trio-mcp prompt SERVER NAME --args JSON    render one prompt
    trio-mcp config check [FILE]               validate; a summary per server (--json: all)
    trio-mcp add|add-json|remove|list|get      manage the servers of the mcp.json files
    trio-mcp import FILE [--from SOURCE]       import another client's MCP servers
    trio-mcp project list|approve|revoke       approve the servers a project file adds
    trio-mcp login NAME [--no-browser|--device] sign in to an OAuth server
    trio-mcp logout NAME                       forget its stored credentials
    trio-mcp auth status                       who is signed in where (never a secret)
    trio-mcp demo                              the runtime against embedded demo servers

Every command takes ``--config FILE`` (an Echo YAML/JSON file or an ``mcp.json``; without it,
the user file and the current directory's project file), ``--json`` (one JSON document on
stdout, errors included) and ``-v``/``-vv``, before or after the command. The exit code tells
the outcome apart: see :class:`ExitCode`.
"""

from __future__ import annotations

import argparse
import contextvars
import io
import itertools
import json
import logging
import math
import os
import re
import shlex
import shutil
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from enum import IntEnum
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, TextIO

import attrs
import trio

from ...protocol._errors import (
    ConfigError,
    InvalidToolOutput,
    McpError,
    MethodNotFound,
    ServerUnavailable,
)
from ...protocol._methods import decode_result, encode
from ...protocol._types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    GetPromptResult,
    ImageContent,
    ReadResourceResult,
    ResourceLink,
    TextContent,
    TextResourceContents,
)
from ..agent._risk import ApprovalRequest, Decision
from ..agent._surface import AgentSurface
from ..config._backoff import RetryPolicy
from ..config._config import RuntimeConfig, ServerConfig
from ..config._loader import (
    LoadedConfig,
    load_config,
    project_config_path,
    redacted_config,
    user_config_path,
)
from ..runtime._callbacks import HostCallbacks
from ..runtime._events import ServerState, ServerStateChanged
from ..runtime._naming import registered_name
from ..runtime._registry import RegisteredTool, ToolsChanged
from ..runtime._runtime import ReadyReport, Runtime, open_runtime
from ..runtime._session import MAX_CURSOR_BYTES, cursor_too_long
from ..runtime._signin import DEFAULT_OAUTH, OAuthFactories
from ..runtime._supervisor import ServerStatus
from ._interactive import (
    ArgumentProblem,
    ProgressBar,
    SavedContent,
    TerminalElicitation,
    call_arguments,
    parse_assignments,
    save_contents,
)

__all__ = ["ExitCode", "build_parser", "main"]


class ExitCode(IntEnum):
    """What the ``trio-mcp`` process exit status means."""

    #: Everything asked for was done.
    OK = 0
    #: The demo saw a step fail, or an approval was declined at the prompt.
    FAILED = 1
    #: The command line is wrong: an unknown option, ``--args`` that is not a JSON object, a
    #: server or tool name that the configuration does not have.
    USAGE = 2
    #: The configuration cannot be read or is invalid.
    CONFIG = 3
    #: A server that the command needs is not ready (it failed to start or to connect).
    UNAVAILABLE = 4
    #: The call ran and failed: the tool reported an error (``isError``), the server answered
    #: with a JSON-RPC error, the call timed out, or the connection dropped during it.
    CALL_FAILED = 5
    #: The call was not made: a permission rule or the profile denies it, or it needed an
    #: approval that was not given.
    REFUSED = 6
    #: The OAuth sign-in failed: the authorization server refused it or broke a step, a
    #: metadata document was unusable, or no redirect came back in time.
    AUTH_FAILED = 7
    #: Stopped by Ctrl-C while connecting or calling (``status --watch`` ends with 0).
    INTERRUPTED = 130


#: The loggers whose warnings the command line shows in its own output instead (refused tools:
#: in the status table, the tools listing, or the error of a call of one).
_QUIET_LOGGERS = ("trio_mcp.config", "trio_mcp.supervisor", "trio_mcp.runtime", "trio_mcp.registry")
#: With ``-v`` the registry's line per refused tool gives way to a summary per server.
_SUMMARISED_LOGGERS = ("trio_mcp.registry",)
#: How verbose this run is (``-v`` 1, ``-vv`` 2: the JSON-RPC frames too).
_VERBOSITY: contextvars.ContextVar[int] = contextvars.ContextVar(
    "trio_mcp_cli_verbosity", default=0
)
_cli_log = logging.getLogger("trio_mcp.cli")
#: Terminal control: move the cursor up N lines to column 0, clear a line, clear below.
_UP = "\x1b[{}F"
_CLEAR_LINE = "\x1b[2K"
_CLEAR_BELOW = "\x1b[J"
_HOME_CLEAR = "\x1b[H\x1b[2J"
#: ``status --watch`` redraws in place: cursor home, each line cleared to its end, then the
#: rest of the screen cleared (no blank frame between two tables: no flicker).
_HOME = "\x1b[H"
_CLEAR_EOL = "\x1b[K"
_SPINNER = "|/-\\"
#: How many stderr lines the status table quotes for a server that is not ready.
_STDERR_LINES = 5
#: The table's cut of the error of a server whose whole error follows the table.
_ERROR_CELL = 60
_NOT_SETTLED = frozenset({ServerState.CONNECTING, ServerState.RECONNECTING})
_UNSAFE = re.compile(r"[^A-Za-z0-9_]")
#: A registered name cut for length keeps this many characters of ``mcp_<server>_<tool>``.
_KEPT_PREFIX = len(registered_name("x", "y" * 80)) - 9


def _version() -> str:
    try:
        return version("trio-mcp")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0+unknown"


# --------------------------------------------------------------------------- failures


class _Exit(Exception):
    """Ends a command with an exit code and a message (JSON: ``{"error": {...}}``)."""

    def __init__(
        self, code: ExitCode, message: str, *, kind: str, details: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.kind = kind
        self.details = dict(details or {})


def _usage(message: str) -> _Exit:
    return _Exit(ExitCode.USAGE, message, kind="usage")


def _error_type(exc: BaseException) -> str:
    return type(exc).__name__


@attrs.define
class _Out:
    """Where a command writes: plain text, or one JSON document (``--json``)."""

    json: bool
    stdout: TextIO
    stderr: TextIO
    #: Where an approval is read from (``trio-mcp call`` asks when a rule says ``ask``).
    stdin: TextIO = attrs.field(factory=lambda: sys.stdin)

    @property
    def tty(self) -> bool:
        isatty = getattr(self.stdout, "isatty", None)
        return bool(isatty and isatty())

    def line(self, text: str = "") -> None:
        print(text, file=self.stdout, flush=True)

    def note(self, text: str) -> None:
        print(f"trio-mcp: {text}", file=self.stderr, flush=True)

    def document(self, value: Any) -> None:
        print(json.dumps(value, indent=2, ensure_ascii=False), file=self.stdout, flush=True)

    def json_line(self, value: Any) -> None:
        print(json.dumps(value, ensure_ascii=False), file=self.stdout, flush=True)

    def failure(self, exc: _Exit) -> None:
        if self.json:
            self.document(
                {"error": {"kind": exc.kind, "message": str(exc), **exc.details}},
            )
        else:
            self.note(f"error: {exc}")


# --------------------------------------------------------------------------- the parser


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``trio-mcp`` (every command and option). Never fails."""
    parser = argparse.ArgumentParser(
        prog="trio-mcp",
        description="trio-mcp: the MCP client runtime for trio agent hosts.",
        epilog="Exit codes: 0 ok, 1 demo failed or approval declined, 2 usage error, "
        "3 configuration error, 4 server unavailable, 5 the call failed (tool error, JSON-RPC "
        "error, timeout), 6 the call was refused (permission rules, approval), 7 the sign-in "
        "failed, 130 interrupted.",
    )
    parser.add_argument("--version", action="version", version=f"trio-mcp {_version()}")
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="log more: -v info and a summary of each server's tools, -vv debug and every "
        "JSON-RPC frame (redacted); before or after the command",
    )
    parser.add_argument(
        "--config", dest="global_config", metavar="FILE", help="as --config after the command"
    )
    parser.add_argument(
        "--json", dest="global_json", action="store_true", help="as --json after the command"
    )

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-v",
        "--verbose",
        action="count",
        dest="verbose_after",
        default=0,
        help="log more (-v info, -vv debug and the JSON-RPC frames)",
    )
    common.add_argument(
        "--config",
        metavar="FILE",
        help="an Echo configuration (YAML or JSON) or an mcp.json file (default: the user "
        "file, then .trio-mcp/mcp.json in the current directory)",
    )
    common.add_argument("--json", action="store_true", help="print one JSON document")
    connecting = argparse.ArgumentParser(add_help=False, parents=[common])
    connecting.add_argument(
        "--wait",
        type=_seconds,
        metavar="SECONDS",
        help="wait at most this long for the servers to connect (default: each server's "
        "connect_timeout)",
    )

    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    status = commands.add_parser(
        "status",
        parents=[connecting],
        help="connect to every server and show its state",
        description="Connect to every configured server in parallel and show a table: state, "
        "transport, protocol revision, tools, connect time, last error, stderr tail.",
    )
    status.add_argument(
        "--watch",
        action="store_true",
        help="keep running and show every change (Ctrl-C to stop); servers reconnect as usual",
    )
    status.set_defaults(handler=_cmd_status)

    tools = commands.add_parser(
        "tools", parents=[connecting], help="list the tools as the model sees them"
    )
    tools.set_defaults(handler=_cmd_tools)

    call = commands.add_parser(
        "call",
        parents=[connecting],
        help="call a tool",
        description="Call a tool by its registered name (mcp_fs_read_file) or as SERVER/TOOL "
        "with the server's own tool name.",
    )
    call.add_argument("name", metavar="NAME", help="registered name, or SERVER/TOOL")
    call.add_argument("--args", default="{}", metavar="JSON", help="the arguments, a JSON object")
    call.add_argument(
        "--arg",
        action="append",
        default=[],
        dest="arg_values",
        metavar="KEY=VALUE",
        help="one argument (repeat it); VALUE is parsed as JSON when it parses (5, true, "
        '[1], {"a": 1}, "quoted"), else taken as a string; KEY is taken literally; applied '
        "over --args",
    )
    call.add_argument(
        "--answer",
        action="append",
        default=[],
        dest="answers",
        metavar="FIELD=VALUE",
        help="an answer to the server's elicitation form (repeat it), used without asking; "
        "VALUE as for --arg. Without a terminal, a form these do not fill is cancelled",
    )
    call.add_argument(
        "--save",
        metavar="DIR",
        help="write images, audio and binary resources of the result to files in DIR "
        "(created if missing; an existing file is never replaced)",
    )
    call.add_argument(
        "--yes",
        action="store_true",
        help="approve the call where a permission rule says 'ask' or the tool is marked "
        "destructive, without asking (default: ask on the terminal; refuse without one)",
    )
    call.set_defaults(handler=_cmd_call)

    resources = commands.add_parser(
        "resources", parents=[connecting], help="list resources and resource templates"
    )
    resources.add_argument("server", nargs="?", help="only this server")
    resources.set_defaults(handler=_cmd_resources)

    read = commands.add_parser("read", parents=[connecting], help="read one resource")
    read.add_argument("server")
    read.add_argument("uri")
    read.set_defaults(handler=_cmd_read)

    prompts = commands.add_parser("prompts", parents=[connecting], help="list prompts")
    prompts.add_argument("server", nargs="?", help="only this server")
    prompts.set_defaults(handler=_cmd_prompts)

    prompt = commands.add_parser("prompt", parents=[connecting], help="render one prompt")
    prompt.add_argument("server")
    prompt.add_argument("name")
    prompt.add_argument(
        "--args", default="{}", metavar="JSON", help="the arguments, a JSON object of strings"
    )
    prompt.set_defaults(handler=_cmd_prompt)

    config = commands.add_parser("config", help="work with the configuration")
    config_commands = config.add_subparsers(dest="config_command", metavar="SUBCOMMAND")
    check = config_commands.add_parser(
        "check",
        parents=[common],
        help="validate and print the merged configuration (secrets redacted)",
    )
    check.add_argument("file", nargs="?", metavar="FILE", help="the file to check")
    check.set_defaults(handler=_cmd_config_check)
    config.set_defaults(handler=lambda _args, _out: _config_help(config))

    from ._manage import add_manage_commands  # imported here: it imports this module

    add_manage_commands(commands, common)

    from ._project import add_project_commands  # imported here: it imports this module

    add_project_commands(commands)

    from ._auth import add_auth_commands  # imported here: it imports this module

    add_auth_commands(commands, common)

    demo = commands.add_parser(
        "demo",
        parents=[common],
        help="run the runtime against embedded demo servers (stdio subprocesses, no network)",
    )
    demo.set_defaults(handler=_cmd_demo)
    return parser


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds > 0: {text!r}")
    return value


def _config_help(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return ExitCode.USAGE


# --------------------------------------------------------------------------- entry point


def main(argv: Sequence[str] | None = None, *, oauth: OAuthFactories | None = None) -> int:
    """Run the command line; returns the process exit code (:class:`ExitCode`). Usage errors
    found by the argument parser exit with status 2 through ``SystemExit``. ``oauth``: the
    sign-in and token store of servers with OAuth (default: the runtime's own)."""
    from ._auth import OAUTH_FACTORIES

    token = OAUTH_FACTORIES.set(oauth or DEFAULT_OAUTH)
    try:
        return _main(argv)
    finally:
        OAUTH_FACTORIES.reset(token)


def _global_options(args: argparse.Namespace) -> str | None:
    """Merge the options given before the command into those after it; what is wrong with
    them, or None."""
    args.verbose += getattr(args, "verbose_after", 0)
    if args.global_config is not None:
        if not hasattr(args, "config"):
            return f"`trio-mcp {args.command}` does not take --config"
        if args.config is not None and args.config != args.global_config:
            return "give --config once: before or after the command"
        args.config = args.global_config
    if args.global_json:
        if not hasattr(args, "json"):
            return f"`trio-mcp {args.command}` does not take --json"
        args.json = True
    return None


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line parsed; for a command that runs a command of its own (``add NAME --
    COMMAND ARG...``), what follows ``--`` is its ``command_line``, options and all."""
    words = list(sys.argv[1:] if argv is None else argv)
    head, tail = words, []
    if "--" in words:
        cut = words.index("--")
        head, tail = words[:cut], words[cut + 1 :]
    args, extras = parser.parse_known_args(head)
    if not getattr(args, "takes_command", False):
        return parser.parse_args(words)
    options = [word for word in extras if word.startswith("-")]
    if options:
        parser.error(
            f"unrecognized arguments: {' '.join(options)} (put the server's command and its "
            "arguments after --)"
        )
    args.command_line = [*extras, *tail]
    return args


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = _parse(parser, argv)
    problem = _global_options(args)
    levels = (logging.WARNING, logging.INFO, logging.DEBUG)
    logging.basicConfig(
        level=levels[min(args.verbose, 2)], format="  [%(levelname)s %(name)s] %(message)s"
    )
    handler: Callable[[argparse.Namespace, _Out], int] | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stdout)
        return ExitCode.OK
    out = _Out(json=bool(getattr(args, "json", False)), stdout=sys.stdout, stderr=sys.stderr)
    if problem is not None:
        out.failure(_usage(problem))
        return ExitCode.USAGE
    quiet: tuple[str, ...] = _QUIET_LOGGERS if args.verbose == 0 else _SUMMARISED_LOGGERS
    if args.verbose >= 2:
        quiet = ()
    saved = {name: logging.getLogger(name).level for name in quiet}
    # The command shows states, errors and configuration warnings itself; with -v, a summary
    # of each server's tools instead of the registry's line per refused tool.
    for name in quiet:
        logging.getLogger(name).setLevel(logging.ERROR)
    token = _VERBOSITY.set(args.verbose)
    try:
        return int(handler(args, out))
    except _Exit as exc:
        out.failure(exc)
        return exc.code
    except KeyboardInterrupt:  # outside the main thread, or before trio started
        out.failure(_Exit(ExitCode.INTERRUPTED, "interrupted", kind="interrupted"))
        return ExitCode.INTERRUPTED
    except BrokenPipeError:
        # The reader went away (``trio-mcp tools | head``): stop quietly, and keep Python from
        # complaining again when it flushes stdout at exit.
        _silence_stdout()
        return ExitCode.FAILED
    finally:
        _VERBOSITY.reset(token)
        for name, level in saved.items():
            logging.getLogger(name).setLevel(level)


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        pass  # not a real file (tests capture stdout): nothing to silence


# --------------------------------------------------------------------------- configuration


def _load(args: argparse.Namespace, out: _Out, path: str | None = None) -> LoadedConfig:
    """The configuration the command runs on; its warnings go to stderr (plain output)."""
    try:
        loaded = load_config(path if path is not None else args.config)
    except ConfigError as exc:
        raise _Exit(
            ExitCode.CONFIG,
            str(exc),
            kind="config",
            details={
                "type": _error_type(exc),
                "problems": [{"location": loc, "message": msg} for loc, msg in exc.problems],
            },
        ) from None
    if not out.json:
        for warning in loaded.warnings:
            out.note(f"warning: {warning}")
    return loaded


def _nothing_configured(loaded: LoadedConfig) -> str:
    if loaded.sources:
        return f"no MCP servers are configured in {', '.join(loaded.sources)}"
    return (
        f"no MCP servers are configured (no {user_config_path()} and no "
        f"{project_config_path()}; pass --config FILE)"
    )


def _server_named(loaded: LoadedConfig, name: str) -> ServerConfig:
    try:
        return loaded.config.server(name)
    except KeyError:
        known = ", ".join(s.name for s in loaded.config.servers) or "none"
        raise _usage(f"no server named {name!r} is configured (configured: {known})") from None


def _one_shot(config: RuntimeConfig, names: Iterable[str] | None = None) -> RuntimeConfig:
    """``config`` for a command that connects once: no retries (a failed server settles at
    once as FAILED, with its error), optionally only the servers ``names``."""
    servers = config.servers
    if names is not None:
        wanted = set(names)
        servers = tuple(s for s in servers if s.name in wanted)
    return attrs.evolve(
        config,
        servers=servers,
        retry=RetryPolicy(first_connect_delays=(), park_probe_interval=None),
    )


@asynccontextmanager
async def _connected(
    config: RuntimeConfig,
    wait: float | None,
    out: _Out | None = None,
    *,
    callbacks: HostCallbacks | None = None,
) -> AsyncIterator[tuple[Runtime, Mapping[str, ServerStatus]]]:
    """Open a runtime and wait until every server is ready or settled (at most ``wait``
    seconds: a server still connecting then says so in its error); with ``out`` on a terminal,
    show a live progress line per server meanwhile. ``-v`` logs a summary per server, ``-vv``
    every JSON-RPC frame."""
    from ._auth import OAUTH_FACTORIES
    from ._frames import frame_tap

    oauth = OAUTH_FACTORIES.get()
    async with AsyncExitStack() as stack:
        tap = frame_tap if _VERBOSITY.get() >= 2 else None
        rt = await stack.enter_async_context(
            open_runtime(config, callbacks=callbacks, oauth=oauth, wrap_transport=tap)
        )
        started = trio.current_time()
        if out is not None and out.tty and not out.json and config.servers:
            async with trio.open_nursery() as nursery:
                progress = _Progress(rt, out, started)
                nursery.start_soon(progress.run)
                report = await rt.wait_ready(timeout=wait)
                nursery.cancel_scope.cancel()
            progress.erase()
        else:
            report = await rt.wait_ready(timeout=wait)
        statuses = _wait_ran_out(report, wait)
        if _VERBOSITY.get() >= 1:
            for status in statuses.values():
                _cli_log.info("%s", _registrations(status))
        yield rt, statuses


def _wait_ran_out(report: ReadyReport, wait: float | None) -> Mapping[str, ServerStatus]:
    """The statuses, where a server still connecting when ``--wait`` ran out says so."""
    if wait is None or not report.timed_out:
        return report
    out = dict(report)
    for name in report.not_settled:
        status = report[name]
        if status.state in _NOT_SETTLED:
            why = (
                f"--wait {wait:g}: the wait ran out after {wait:g} s while it was still connecting"
            )
            if status.last_error:
                why += f" (last error: {status.last_error})"
            out[name] = attrs.evolve(status, last_error=why)
    return out


def _registrations(status: ServerStatus) -> str:
    """``-v``: one line per server instead of one per tool."""
    refused = status.refused_tools
    text = f"server {status.name!r}: {status.state.value}, {status.tool_count} tools registered"
    if refused:
        names = ", ".join(str(r.tool) if r.tool is not None else "(an entry)" for r in refused)
        text += f", {len(refused)} refused ({names})"
    return text


@attrs.define
class _Progress:
    """Live per-server progress lines while connecting (a terminal only)."""

    rt: Runtime
    out: _Out
    started: float
    drawn: int = 0
    #: When each server was first seen settled (its clock stops there).
    settled_at: dict[str, float] = attrs.field(factory=dict)

    async def run(self) -> None:
        for tick in itertools.count():
            self.draw(tick)
            await trio.sleep(0.1)

    def draw(self, tick: int) -> None:
        statuses = self.rt.status()
        width = max(len(name) for name in statuses)
        now = trio.current_time()
        parts: list[str] = []
        if self.drawn:
            parts.append(_UP.format(self.drawn))
        for name, status in statuses.items():
            settled = status.state not in _NOT_SETTLED
            mark = (
                "*"
                if status.state is ServerState.READY
                else ("x" if settled else _SPINNER[tick % len(_SPINNER)])
            )
            if settled:
                self.settled_at.setdefault(name, now)
            elapsed = (
                status.connect_time
                if status.connect_time is not None
                else self.settled_at.get(name, now) - self.started
            )
            extra = f"  {status.tool_count} tools" if status.state is ServerState.READY else ""
            parts.append(
                f"{_CLEAR_LINE}  {mark} {name:<{width}}  {status.state.value:<12} "
                f"{elapsed:6.1f} s{extra}\n"
            )
        self.drawn = len(statuses)
        self.out.stdout.write("".join(parts))
        self.out.stdout.flush()

    def erase(self) -> None:
        if self.drawn:
            self.out.stdout.write(_UP.format(self.drawn) + _CLEAR_BELOW)
            self.out.stdout.flush()
            self.drawn = 0


def _unavailable(statuses: Mapping[str, ServerStatus]) -> list[dict[str, Any]]:
    """The servers that should be ready and are not (DISABLED ones are left out)."""
    return [
        {"server": s.name, "state": s.state.value, "error": s.last_error}
        for s in statuses.values()
        if s.state not in (ServerState.READY, ServerState.DISABLED)
    ]


def _report_unavailable(out: _Out, unavailable: list[dict[str, Any]]) -> None:
    if out.json:
        return
    for item in unavailable:
        why = f": {_one_line(item['error'])}" if item["error"] else ""
        out.note(f"server {item['server']!r} ({item['state']}){why}")


def _one_line(text: str) -> str:
    """``text`` on one line: an error that quotes stderr lines keeps them, ``|``-separated."""
    return " ".join(text.split())


def _require_ready(status: ServerStatus) -> None:
    if status.state is not ServerState.READY:
        why = f": {status.last_error}" if status.last_error else ""
        raise _Exit(
            ExitCode.UNAVAILABLE,
            f"server {status.name!r} is {status.state.value}{why}",
            kind="unavailable",
            details={"server": status.name, "state": status.state.value},
        )


def _arguments(text: str, *, strings: bool = False) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise _usage(f"--args is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise _usage(f"--args must be a JSON object, got {type(value).__name__}")
    if strings:
        wrong = sorted(key for key, item in value.items() if not isinstance(item, str))
        if wrong:
            raise _usage(f"prompt arguments must be strings; not: {', '.join(wrong)}")
    return value


def _failed_call(exc: McpError) -> _Exit:
    """A call's failure: an unavailable server (4), anything else the server or the
    connection did (5)."""
    details = {"type": _error_type(exc)}
    if isinstance(exc, ServerUnavailable):
        return _Exit(ExitCode.UNAVAILABLE, str(exc), kind="unavailable", details=details)
    return _Exit(ExitCode.CALL_FAILED, str(exc), kind="call", details=details)


def _run(
    async_fn: Callable[[], Awaitable[int]],
    *,
    stop_signals: tuple[signal.Signals, ...] = (signal.SIGINT,),
    stopped: ExitCode = ExitCode.INTERRUPTED,
) -> int:
    """Run a command under trio. One of ``stop_signals`` (Ctrl-C) cancels it cleanly (servers
    stopped, no process left) and ends it with ``stopped``: INTERRUPTED reports an error, OK
    ends quietly (``status --watch``). Outside the main thread signals are left alone."""

    async def guarded() -> int:
        interrupted = False
        result = int(ExitCode.OK)
        failure: BaseException | None = None
        with trio.open_signal_receiver(*stop_signals) as signals:
            async with trio.open_nursery() as nursery:

                async def wait_for_signal() -> None:
                    nonlocal interrupted
                    async for _ in signals:
                        interrupted = True
                        nursery.cancel_scope.cancel()
                        return

                nursery.start_soon(wait_for_signal)
                try:
                    result = await async_fn()
                except trio.Cancelled:
                    raise
                except BaseException as exc:  # re-raised below, outside the nursery's group
                    failure = exc
                nursery.cancel_scope.cancel()
        if failure is not None:
            raise failure
        if interrupted and stopped is ExitCode.INTERRUPTED:
            raise _Exit(ExitCode.INTERRUPTED, "interrupted", kind="interrupted")
        return stopped if interrupted else result

    if threading.current_thread() is not threading.main_thread():
        return trio.run(async_fn)
    return trio.run(guarded)


# --------------------------------------------------------------------------- status


def _status_json(status: ServerStatus) -> dict[str, Any]:
    from ._auth import auth_status_json

    return {
        "name": status.name,
        "state": status.state.value,
        "transport": status.transport,
        "protocol_version": status.protocol_version,
        "server_name": status.server_name,
        "server_version": status.server_version,
        "tool_count": status.tool_count,
        "refused_tools": [
            {"tool": refusal.tool, "reason": refusal.reason} for refusal in status.refused_tools
        ],
        "connect_time": None if status.connect_time is None else round(status.connect_time, 3),
        "last_error": status.last_error,
        "failures": status.failures,
        "pid": status.pid,
        "stderr_tail": list(status.stderr_tail),
        "hint": status.hint,
        "auth": auth_status_json(status.auth),
    }


def _width(out: _Out) -> int | None:
    """The terminal's width when writing to one (tables are cut to fit), else None."""
    return shutil.get_terminal_size((120, 24)).columns if out.tty else None


def _cut(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: max(width - 3, 0)] + "..."


def _status_table(statuses: Mapping[str, ServerStatus], width: int | None = None) -> list[str]:
    """The status table; the error column is cut to ``width`` characters of line when given
    (a terminal), else left whole."""
    headers = ("SERVER", "STATE", "TRANSPORT", "PROTOCOL", "TOOLS", "CONNECT", "LAST ERROR")
    rows = [
        (
            s.name,
            s.state.value,
            s.transport,
            s.protocol_version or "-",
            str(s.tool_count),
            "-" if s.connect_time is None else f"{s.connect_time:.2f} s",
            s.last_error or "-",
        )
        for s in statuses.values()
    ]
    widths = [max(len(row[i]) for row in [headers, *rows]) for i in range(len(headers) - 1)]
    right = {4, 5}
    detailed = {
        s.name
        for s in statuses.values()
        if s.state not in (ServerState.READY, ServerState.DISABLED)
    }

    def render(row: Sequence[str]) -> str:
        cells = [
            cell.rjust(w) if i in right else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=False))
        ]
        head = "  ".join(cells)
        last = _one_line(row[-1])
        if row[0] in detailed:  # its whole error is on its own line below the table
            last = _cut(last, _ERROR_CELL)
        if width is not None:
            last = _cut(last, max(width - len(head) - 2, 20))
        return f"{head}  {last}"

    lines = [render(headers), *(render(row) for row in rows)]
    notes: list[str] = []
    for s in statuses.values():
        if s.name in detailed:
            error = _one_line(s.last_error or s.state.value)
            tail = [line for line in s.stderr_tail[-_STDERR_LINES:] if line not in error]
            if tail:
                error += " (stderr: " + " | ".join(_one_line(line) for line in tail) + ")"
            notes.append(f"{s.name}: {error}")
        notes.extend(
            f"{s.name}: tool {refusal.tool!r} refused: {_one_line(refusal.reason)}"
            for refusal in s.refused_tools
        )
    return [*lines, *([""] if notes else []), *notes]


def _cmd_status(args: argparse.Namespace, out: _Out) -> int:
    loaded = _load(args, out)
    if args.watch:
        return _run(
            lambda: _watch(loaded, out),
            stop_signals=(signal.SIGINT, signal.SIGTERM),
            stopped=ExitCode.OK,
        )
    if not loaded.config.servers:
        if out.json:
            out.document({"servers": [], "sources": list(loaded.sources), "warnings": []})
        else:
            out.line(_nothing_configured(loaded))
        return ExitCode.OK

    async def status() -> int:
        async with _connected(_one_shot(loaded.config), args.wait, out) as (_rt, statuses):
            unavailable = _unavailable(statuses)
            if out.json:
                out.document(
                    {
                        "servers": [_status_json(s) for s in statuses.values()],
                        "sources": list(loaded.sources),
                        "warnings": list(loaded.warnings),
                    }
                )
            else:
                for line in _status_table(statuses, _width(out)):
                    out.line(line)
        return ExitCode.UNAVAILABLE if unavailable else ExitCode.OK

    return _run(status)


async def _watch(loaded: LoadedConfig, out: _Out) -> int:
    """``status --watch``: redraw the table on a terminal, else one line per change, until
    SIGINT or SIGTERM (see :func:`_run`). Servers reconnect with the configuration's own retry
    policy."""
    from ._auth import OAUTH_FACTORIES

    async with open_runtime(loaded.config, oauth=OAUTH_FACTORIES.get()) as rt:
        await _watch_loop(rt, loaded, out)
    return ExitCode.OK


async def _watch_loop(rt: Runtime, loaded: LoadedConfig, out: _Out) -> None:
    redraw = out.tty and not out.json
    started = time.monotonic()
    with rt.events() as events:
        if not redraw:
            for status in rt.status().values():
                _watch_line(out, started, status.name, event="status", state=status.state.value)
        else:
            out.stdout.write(_HOME_CLEAR)  # once: the screen starts empty
        while True:
            if redraw:
                _redraw(out, loaded, rt.status())
            with trio.move_on_after(1.0):  # on a terminal: redraw at least every second
                event = await anext(events, None)
                if event is None:
                    return  # the runtime closed
                if not redraw:
                    _watch_event(out, started, event)


def _redraw(out: _Out, loaded: LoadedConfig, statuses: Mapping[str, ServerStatus]) -> None:
    """One frame of ``status --watch`` on a terminal, written at once over the last one."""
    lines = [
        f"trio-mcp status --watch: {len(loaded.config.servers)} servers (Ctrl-C to stop)",
        "",
        *_status_table(statuses, _width(out)),
    ]
    out.stdout.write(_HOME + "".join(f"{line}{_CLEAR_EOL}\n" for line in lines) + _CLEAR_BELOW)
    out.stdout.flush()


def _watch_line(out: _Out, started: float, server: str, **fields: Any) -> None:
    elapsed = round(time.monotonic() - started, 3)
    if out.json:
        out.json_line({"time": elapsed, "server": server, **fields})
        return
    text = " ".join(
        f"{key}={' '.join(str(value).split())}"
        for key, value in fields.items()
        if value is not None and key != "event"
    )
    out.line(f"[{elapsed:8.3f}] {server}: {fields.get('event', '')} {text}")


def _watch_event(out: _Out, started: float, event: Any) -> None:
    if isinstance(event, ServerStateChanged):
        retry_in = None
        if event.next_attempt_at is not None:
            retry_in = round(max(0.0, event.next_attempt_at - trio.current_time()), 3)
        _watch_line(
            out,
            started,
            event.server,
            event="state",
            old=event.old.value,
            state=event.new.value,
            retry_in=retry_in,
            reason=event.reason,
        )
    elif isinstance(event, ToolsChanged):
        _watch_line(
            out,
            started,
            event.server,
            event="tools",
            added=",".join(event.added) or None,
            removed=",".join(event.removed) or None,
            changed=",".join(event.changed) or None,
        )


# --------------------------------------------------------------------------- tools and calls


def _tool_json(tool: RegisteredTool) -> dict[str, Any]:
    annotations = tool.tool.annotations
    return {
        "name": tool.name,
        "server": tool.server,
        "tool": tool.wire_name,
        "title": tool.tool.title,
        "description": tool.tool.description,
        "input_schema": dict(tool.tool.input_schema),
        "annotations": None if annotations is None else encode(annotations),
    }


def _cmd_tools(args: argparse.Namespace, out: _Out) -> int:
    loaded = _load(args, out)

    async def tools() -> int:
        async with _connected(_one_shot(loaded.config), args.wait) as (rt, statuses):
            listed = sorted(rt.tools().values(), key=lambda t: t.name)
            refused = [
                {"server": s.name, "tool": r.tool, "reason": r.reason}
                for s in statuses.values()
                for r in s.refused_tools
            ]
            unavailable = _unavailable(statuses)
            if out.json:
                out.document(
                    {
                        "tools": [_tool_json(t) for t in listed],
                        "refused": refused,
                        "unavailable": unavailable,
                        "warnings": list(loaded.warnings),
                    }
                )
            else:
                if not loaded.config.servers:
                    out.note(_nothing_configured(loaded))
                width = max((len(t.name) for t in listed), default=0)
                source_width = max((len(f"{t.server}/{t.wire_name}") for t in listed), default=0)
                for t in listed:
                    description = (t.tool.description or "").strip().splitlines()
                    out.line(
                        f"{t.name:<{width}}  {t.server + '/' + t.wire_name:<{source_width}}  "
                        f"{_cut(description[0], 80) if description else ''}".rstrip()
                    )
                for item in refused:
                    out.note(f"{item['server']}/{item['tool']}: refused: {item['reason']}")
                _report_unavailable(out, unavailable)
        return ExitCode.UNAVAILABLE if unavailable else ExitCode.OK

    return _run(tools)


def _candidates(config: RuntimeConfig, name: str) -> list[str]:
    """The servers that may own the registered ``name`` (it starts with ``mcp_<server>_``, as
    :func:`registered_name` builds it, up to the length a long name keeps), or every server
    when none matches."""
    matching = [
        s.name
        for s in config.servers
        if name.startswith(_UNSAFE.sub("_", f"mcp_{s.name}_")[:_KEPT_PREFIX])
    ]
    return matching or [s.name for s in config.servers]


def _describe_block(block: Any, saved: SavedContent | None = None) -> str:
    if saved is not None:
        kind = "binary resource" if isinstance(block, EmbeddedResource) else block.type
        return f"[{kind}: {saved.mime_type or 'data'}, {saved.size:,} bytes saved to {saved.path}]"
    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, ImageContent | AudioContent):
        return (
            f"[{block.type}: {block.mime_type}, {len(block.data)} base64 characters; --save DIR "
            "writes it to a file]"
        )
    if isinstance(block, ResourceLink):
        return f"[resource link: {block.uri}]"
    if isinstance(block, EmbeddedResource):
        contents = block.resource
        if isinstance(contents, TextResourceContents):
            return f"[resource {contents.uri}]\n{contents.text}"
        return f"[resource {contents.uri}: binary, {len(contents.blob)} base64 characters]"
    kind = getattr(block, "type", type(block).__name__)
    return f"[{kind} content]"


def _print_result(
    out: _Out, result: CallToolResult, saved: Mapping[int, SavedContent] | None = None
) -> None:
    for index, block in enumerate(result.content):
        out.line(_describe_block(block, (saved or {}).get(index)))
    if result.structured_content is not None and not result.content:
        out.line(json.dumps(result.structured_content, indent=2, ensure_ascii=False))


def _cmd_call(args: argparse.Namespace, out: _Out) -> int:
    try:
        arguments = call_arguments(args.args, args.arg_values)
        answers = parse_assignments(args.answers, "--answer")
    except ArgumentProblem as exc:
        raise _usage(str(exc)) from None
    save = None if args.save is None else Path(args.save)
    if save is not None and save.exists() and not save.is_dir():
        raise _usage(f"--save {args.save}: not a directory")
    loaded = _load(args, out)
    name: str = args.name
    server_name: str | None = None
    wire_name = ""
    if "/" in name:
        server_name, _, wire_name = name.partition("/")
        _server_named(loaded, server_name)
        names = [server_name]
    else:
        if not loaded.config.servers:
            raise _usage(_nothing_configured(loaded))
        names = _candidates(loaded.config, name)

    elicitation = TerminalElicitation(stdin=out.stdin, stderr=out.stderr, answers=answers)
    callbacks = HostCallbacks(elicitation=elicitation)

    async def call() -> int:
        async with _connected(_one_shot(loaded.config, names), args.wait, callbacks=callbacks) as (
            rt,
            statuses,
        ):
            tool = _find_tool(rt, statuses, name, server_name, wire_name)
            approver = _TerminalApproval(out, yes=bool(args.yes))
            decision = await AgentSurface(rt, approve=approver).authorize(tool, arguments)
            if decision.outcome != "allow":
                raise _refused(tool, decision, approver)
            bar = ProgressBar(out.stdout, tool.name) if out.tty and not out.json else None
            elicitation.progress = bar
            try:
                result = await _call_with_progress(rt, tool.name, arguments, bar)
            except InvalidToolOutput as exc:
                if not out.json:
                    _print_result(out, exc.result)
                raise _Exit(
                    ExitCode.CALL_FAILED,
                    str(exc),
                    kind="invalid_output",
                    details={"problems": list(exc.problems), "result": encode(exc.result)},
                ) from None
            except McpError as exc:
                raise _failed_call(exc) from None
            saved: dict[int, SavedContent] = {}
            if save is not None:
                try:
                    saved, problems = save_contents(result, save, tool.wire_name)
                except OSError as exc:
                    raise _Exit(
                        ExitCode.FAILED, f"--save {args.save}: {exc}", kind="save"
                    ) from None
                for problem in problems:
                    out.note(f"warning: {problem}")
            if out.json:
                document = {
                    "tool": tool.name,
                    "server": tool.server,
                    "server_tool": tool.wire_name,
                    "is_error": bool(result.is_error),
                    "text": result.text,
                    "result": encode(result),
                }
                if save is not None:
                    document["saved"] = [attrs.asdict(item) for item in saved.values()]
                if elicitation.asked:
                    document["elicitations"] = elicitation.asked
                out.document(document)
            else:
                _print_result(out, result, saved)
            for refusal in elicitation.refusals:
                out.note(
                    f"the server {refusal.server!r} asked for input ({refusal.message!r}; "
                    f"unanswered: {', '.join(refusal.missing)}) and there is no terminal to ask "
                    "on, so the form was cancelled: give the answers with --answer FIELD=VALUE "
                    "(repeat it), or run the command on a terminal"
                )
            if result.is_error:
                if not out.json:
                    out.note(f"the tool {tool.name!r} reported an error (isError)")
                return ExitCode.CALL_FAILED
            if elicitation.refusals:
                return ExitCode.REFUSED
        return ExitCode.OK

    return _run(call)


async def _call_with_progress(
    rt: Runtime, name: str, arguments: Mapping[str, Any], bar: ProgressBar | None
) -> CallToolResult:
    """``rt.call``, with ``bar`` drawn meanwhile (a terminal) and erased at the end."""
    if bar is None:
        return await rt.call(name, arguments)
    result: CallToolResult | None = None
    failure: McpError | None = None
    async with trio.open_nursery() as nursery:
        nursery.start_soon(bar.run)
        try:
            result = await rt.call(name, arguments, progress=bar.update)
        except McpError as exc:  # raised below, outside the nursery (not in a group)
            failure = exc
        finally:
            nursery.cancel_scope.cancel()
            bar.erase()
    if failure is not None:
        raise failure
    assert result is not None
    return result


@attrs.define
class _TerminalApproval:
    """The approval callback of ``trio-mcp call``: the same gate as a host's, answered here.

    The command line names the tool and its arguments, so it is the user's approval of what a
    host would ask about only because the server is not trusted. Where a permission rule says
    ``ask``, or the tool is marked destructive (``dangerous``), it asks on the terminal (``y``
    approves), or approves with ``--yes``; without a terminal it refuses and says why."""

    out: _Out
    yes: bool
    #: Set when an approval was needed and there was no terminal to ask on.
    no_terminal: ApprovalRequest | None = None

    async def __call__(self, request: ApprovalRequest) -> bool:
        if request.rule is None and request.risk != "dangerous":
            return True
        if self.yes:
            return True
        isatty = getattr(self.out.stdin, "isatty", None)
        if not (isatty and isatty()):
            self.no_terminal = request
            return False
        why = (
            f"the rule {request.rule.pattern!r} asks"
            if request.rule is not None
            else "the tool is marked destructive"
        )
        arguments = json.dumps(dict(request.arguments), ensure_ascii=False)
        self.out.stderr.write(
            f"trio-mcp: call {request.registered_name} ({request.server}/{request.tool}, risk "
            f"{request.risk}) with {_cut(arguments, 500)}? {why}. [y/N] "
        )
        self.out.stderr.flush()
        answer = await trio.to_thread.run_sync(self.out.stdin.readline, abandon_on_cancel=True)
        return answer.strip().lower() in ("y", "yes")


def _refused(tool: RegisteredTool, decision: Decision, approver: _TerminalApproval) -> _Exit:
    """The failure of a call the permission decision did not allow."""
    details: dict[str, Any] = {
        "tool": tool.name,
        "decision": decision.outcome,
        "rule": None if decision.rule is None else decision.rule.pattern,
    }
    if approver.no_terminal is not None:
        asked = approver.no_terminal
        why = (
            f"the permission rule {asked.rule.pattern!r} asks for approval"
            if asked.rule is not None
            else "the tool is marked destructive (dangerous), so it needs approval"
        )
        message = (
            f"the call to {tool.name} was refused: {why}, and there is no terminal to ask on; "
            f"pass --yes to approve it"
            + (
                ", or change that rule in the configuration's permissions.rules"
                if asked.rule is not None
                else ""
            )
        )
        return _Exit(ExitCode.REFUSED, message, kind="refused", details=details)
    message = f"the call to {tool.name} was refused and not sent: {decision.reason}"
    if decision.rule is not None and decision.rule.decision == "deny":
        message += " (permissions.rules in the configuration)"
    return _Exit(ExitCode.REFUSED, message, kind="refused", details=details)


def _find_tool(
    rt: Runtime,
    statuses: Mapping[str, ServerStatus],
    name: str,
    server: str | None,
    wire_name: str,
) -> RegisteredTool:
    tools = rt.tools()
    if server is not None:
        _require_ready(statuses[server])
        for tool in tools.values():
            if tool.server == server and tool.wire_name == wire_name:
                return tool
        for refusal in statuses[server].refused_tools:
            if refusal.tool == wire_name:
                raise _usage(
                    f"server {server!r}: the tool {wire_name!r} was refused: {refusal.reason}"
                )
        offered = sorted(t.wire_name for t in tools.values() if t.server == server)
        raise _usage(
            f"server {server!r} has no tool {wire_name!r} "
            f"(its tools: {', '.join(offered) or 'none'})"
        )
    if name in tools:
        return tools[name]
    down = [s for s in statuses.values() if s.state is not ServerState.READY]
    if down:
        states = ", ".join(f"{s.name} ({s.state.value})" for s in down)
        raise _Exit(
            ExitCode.UNAVAILABLE,
            f"no tool named {name!r} is registered, and these servers are not ready: {states}",
            kind="unavailable",
        )
    raise _usage(f"no tool named {name!r} is registered; `trio-mcp tools` lists them")


# --------------------------------------------------------------------------- resources, prompts


async def _list_all(rt: Runtime, server: str, method: str, key: str) -> list[dict[str, Any]]:
    """Every entry of a paginated listing; a server without the method gives none."""
    entries: list[dict[str, Any]] = []
    cursor: str | None = None
    for _ in range(rt.config.max_list_pages):
        params = {"cursor": cursor} if cursor is not None else None
        try:
            result = await rt.request(server, method, params)
        except MethodNotFound:
            return entries
        page = decode_result(method, result)
        entries.extend(encode(item) for item in getattr(page, key))
        cursor = page.next_cursor
        if cursor is None:
            return entries
        if cursor_too_long(cursor):
            raise _Exit(
                ExitCode.CALL_FAILED,
                f"server {server!r}: {method} returned a nextCursor of more than "
                f"{MAX_CURSOR_BYTES:,} bytes",
                kind="call",
            )
    raise _Exit(
        ExitCode.CALL_FAILED,
        f"server {server!r}: {method} did not end after {rt.config.max_list_pages} pages",
        kind="call",
    )


def _listing_servers(loaded: LoadedConfig, server: str | None, *, resources: bool) -> list[str]:
    if server is not None:
        config = _server_named(loaded, server)
        if resources and not config.resources:
            raise _usage(
                f"server {server!r} has resources turned off in its configuration "
                '("resources": false)'
            )
        return [server]
    return [s.name for s in loaded.config.servers if s.resources or not resources]


def _cmd_resources(args: argparse.Namespace, out: _Out) -> int:
    loaded = _load(args, out)
    names = _listing_servers(loaded, args.server, resources=True)

    async def resources() -> int:
        found: list[dict[str, Any]] = []
        templates: list[dict[str, Any]] = []
        async with _connected(_one_shot(loaded.config, names), args.wait) as (rt, statuses):
            unavailable = _unavailable(statuses)
            if args.server is not None:
                _require_ready(statuses[args.server])
            for name, status in statuses.items():
                if status.state is not ServerState.READY:
                    continue
                try:
                    listed = await _list_all(rt, name, "resources/list", "resources")
                    shapes = await _list_all(
                        rt, name, "resources/templates/list", "resource_templates"
                    )
                except McpError as exc:
                    unavailable.append(
                        {"server": name, "state": status.state.value, "error": str(exc)}
                    )
                    continue
                found.extend({"server": name, **item} for item in listed)
                templates.extend({"server": name, **item} for item in shapes)
        if out.json:
            out.document(
                {
                    "resources": found,
                    "resource_templates": templates,
                    "unavailable": unavailable,
                    "warnings": list(loaded.warnings),
                }
            )
        else:
            if found:
                for line in _columns(
                    ("SERVER", "URI", "NAME", "TYPE", "DESCRIPTION"),
                    [
                        (
                            i["server"],
                            i["uri"],
                            i.get("name"),
                            i.get("mimeType"),
                            i.get("description"),
                        )
                        for i in found
                    ],
                    _width(out),
                ):
                    out.line(line)
            if templates:
                if found:
                    out.line()
                for line in _columns(
                    ("SERVER", "URI TEMPLATE", "NAME", "TYPE", "DESCRIPTION"),
                    [
                        (
                            i["server"],
                            i["uriTemplate"],
                            i.get("name"),
                            i.get("mimeType"),
                            i.get("description"),
                        )
                        for i in templates
                    ],
                    _width(out),
                ):
                    out.line(line)
            if not found and not templates and not unavailable:
                out.note("no resources")
            _report_unavailable(out, unavailable)
        return ExitCode.UNAVAILABLE if unavailable else ExitCode.OK

    return _run(resources)


def _columns(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], width: int | None = None
) -> list[str]:
    """``rows`` under ``headers``, aligned in columns (``-`` for an empty cell; a column empty
    in every row is left out). Cells are cut at 80 characters; the last column also to the
    terminal's ``width`` when given."""
    keep = [i for i in range(len(headers)) if any(row[i] for row in rows)]
    table = [[headers[i] for i in keep]]
    table += [[_cut(str(row[i]), 80) if row[i] else "-" for i in keep] for row in rows]
    widths = [max(len(line[c]) for line in table) for c in range(len(keep) - 1)]
    lines = []
    for line in table:
        head = "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=False))
        last = line[-1]
        if width is not None and head:
            last = _cut(last, max(width - len(head) - 2, 20))
        lines.append(f"{head}  {last}".rstrip() if head else last)
    return lines


def _cmd_read(args: argparse.Namespace, out: _Out) -> int:
    loaded = _load(args, out)
    names = _listing_servers(loaded, args.server, resources=True)

    async def read() -> int:
        async with _connected(_one_shot(loaded.config, names), args.wait) as (rt, statuses):
            _require_ready(statuses[args.server])
            try:
                raw = await rt.request(args.server, "resources/read", {"uri": args.uri})
                result = decode_result("resources/read", raw)
            except McpError as exc:
                raise _failed_call(exc) from None
        if not isinstance(result, ReadResourceResult):
            raise _Exit(
                ExitCode.CALL_FAILED,
                f"server {args.server!r} answered resources/read with a "
                f"{type(result).__name__} (more input needed), which the command line cannot "
                "provide",
                kind="call",
            )
        if out.json:
            out.document(
                {
                    "server": args.server,
                    "uri": args.uri,
                    "contents": [encode(part) for part in result.contents],
                }
            )
        else:
            for part in result.contents:
                if isinstance(part, BlobResourceContents):
                    out.line(
                        f"[{part.uri}: binary {part.mime_type or 'data'}, "
                        f"{len(part.blob)} base64 characters; --json shows them]"
                    )
                else:
                    out.line(part.text)
        return ExitCode.OK

    return _run(read)


def _cmd_prompts(args: argparse.Namespace, out: _Out) -> int:
    loaded = _load(args, out)
    names = _listing_servers(loaded, args.server, resources=False)

    async def prompts() -> int:
        found: list[dict[str, Any]] = []
        async with _connected(_one_shot(loaded.config, names), args.wait) as (rt, statuses):
            unavailable = _unavailable(statuses)
            if args.server is not None:
                _require_ready(statuses[args.server])
            for name, status in statuses.items():
                if status.state is not ServerState.READY:
                    continue
                try:
                    listed = await _list_all(rt, name, "prompts/list", "prompts")
                except McpError as exc:
                    unavailable.append(
                        {"server": name, "state": status.state.value, "error": str(exc)}
                    )
                    continue
                found.extend({"server": name, **item} for item in listed)
        if out.json:
            out.document(
                {"prompts": found, "unavailable": unavailable, "warnings": list(loaded.warnings)}
            )
        else:
            rows = []
            for item in found:
                arguments = ", ".join(
                    a["name"] + ("*" if a.get("required") else "")
                    for a in item.get("arguments") or ()
                )
                rows.append(
                    (item["server"], f"{item['name']}({arguments})", item.get("description"))
                )
            if rows:
                for line in _columns(("SERVER", "PROMPT", "DESCRIPTION"), rows, _width(out)):
                    out.line(line)
            if not found and not unavailable:
                out.note("no prompts")
            _report_unavailable(out, unavailable)
        return ExitCode.UNAVAILABLE if unavailable else ExitCode.OK

    return _run(prompts)


def _cmd_prompt(args: argparse.Namespace, out: _Out) -> int:
    arguments = _arguments(args.args, strings=True)
    loaded = _load(args, out)
    _server_named(loaded, args.server)

    async def prompt() -> int:
        async with _connected(_one_shot(loaded.config, [args.server]), args.wait) as (
            rt,
            statuses,
        ):
            _require_ready(statuses[args.server])
            params: dict[str, Any] = {"name": args.name}
            if arguments:
                params["arguments"] = arguments
            try:
                raw = await rt.request(args.server, "prompts/get", params)
                result = decode_result("prompts/get", raw)
            except McpError as exc:
                raise _failed_call(exc) from None
        if not isinstance(result, GetPromptResult):
            raise _Exit(
                ExitCode.CALL_FAILED,
                f"server {args.server!r} answered prompts/get with a {type(result).__name__} "
                "(more input needed), which the command line cannot provide",
                kind="call",
            )
        if out.json:
            out.document({"server": args.server, "name": args.name, "result": encode(result)})
        else:
            if result.description:
                out.line(f"# {result.description}")
            for message in result.messages:
                out.line(f"[{message.role}] {_describe_block(message.content)}")
        return ExitCode.OK

    return _run(prompt)


# --------------------------------------------------------------------------- config, demo


def _cmd_config_check(args: argparse.Namespace, out: _Out) -> int:
    if args.file is not None and args.config is not None and args.file != args.config:
        raise _usage("give the file once: as FILE or as --config FILE")
    try:
        loaded = _load(args, out, args.file)
    except _Exit as exc:
        if out.json:
            out.document(
                {"valid": False, "error": {"kind": exc.kind, "message": str(exc), **exc.details}}
            )
            return exc.code
        raise
    view = redacted_config(loaded.config)
    commands = [_command_check(server) for server in loaded.config.servers if server.command]
    if out.json:
        out.document(
            {
                "valid": True,
                "shape": loaded.shape,
                "sources": list(loaded.sources),
                "warnings": list(loaded.warnings),
                "commands": commands,
                "config": view,
            }
        )
        return ExitCode.OK
    count = len(loaded.config.servers)
    where = ", ".join(loaded.sources) or "no configuration file found"
    out.line(
        f"configuration is valid ({loaded.shape} shape, {count} server"
        f"{'s' * (count != 1)}; read from: {where})"
    )
    rows = [_summary_row(server) for server in loaded.config.servers]
    if rows:
        for line in _columns(("SERVER", "TYPE", "RUNS / CONNECTS TO", "NOTES"), rows):
            out.line(f"  {line}")
    for check in commands:
        if check["found"] is None:
            out.note(
                f"warning: server {check['server']!r}: the command {check['command']!r} is not "
                f"found (searched {check['searched']}): install it, or give its full path"
            )
    return ExitCode.OK


def _summary_row(server: ServerConfig) -> tuple[str, str, str, str]:
    """One server in ``config check``'s summary (secrets redacted)."""
    from ..config._config import redact_args, redact_url

    if server.command is not None:
        target = shlex.join([server.command, *redact_args(server.args)])
    elif server.url is not None:
        target = redact_url(server.url)
    else:
        target = "(in code)"
    notes = []
    if not server.enabled:
        notes.append("disabled")
    if server.trust_level == "trusted":
        notes.append("trusted")
    if server.oauth_settings is not None:
        notes.append("oauth")
    if server.project is not None:
        notes.append("from the project file: needs approval (trio-mcp project list)")
    return server.name, server.transport_kind.value, _cut(target, 70), ", ".join(notes)


def _command_check(server: ServerConfig) -> dict[str, Any]:
    """Whether a stdio server's command can be found: on its own ``PATH`` (its ``env``'s, else
    this process's), or as a path (relative to its ``cwd``)."""
    command = server.command or ""
    path = server.env.get("PATH", os.environ.get("PATH", os.defpath))
    if os.sep in command or (os.altsep and os.altsep in command):
        base = Path(server.cwd) if server.cwd else Path.cwd()
        candidate = base / command
        found = shutil.which(str(candidate), path="")
        searched = str(candidate)
    else:
        found = shutil.which(command, path=path)
        searched = "PATH"
    return {"server": server.name, "command": command, "found": found, "searched": searched}


def _cmd_demo(args: argparse.Namespace, out: _Out) -> int:
    from ._demo import run_demo

    if not out.json:
        return _run(run_demo)
    buffer = io.StringIO()
    code = _run(lambda: run_demo(buffer))
    out.document({"exit_code": code, "output": buffer.getvalue().splitlines()})
    return code


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
