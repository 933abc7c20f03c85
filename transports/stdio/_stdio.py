"""The stdio transport: one MCP server as a child process, NDJSON over its stdin and stdout.

``async with open_stdio_transport(StdioParameters(command="npx", args=(...))) as t:`` starts the
server and yields a :class:`StdioTransport`; leaving the block shuts the server down.

Process model
-------------
- Every server runs in its own session and process group (``start_new_session=True``), so it
  never receives the host's terminal signals and can be signalled as a whole, grandchildren
  included.
- Its environment is an allow-list of the host's variables (:data:`DEFAULT_ENV_ALLOWLIST`) plus
  the server's own ``env``; nothing else of the host leaks (no tokens, keys, proxies with
  credentials). ``cwd`` sets its working directory.
- On Linux the server is started by the host's shared launcher (:mod:`._reaper`, one small
  process per host process, started on first use; a start through it costs about what a plain
  spawn does), which kills the whole group when the host dies, even by SIGKILL, and reaps the
  server. Elsewhere, or with ``bind_to_host=False``, the server is the direct child of the host
  and is cleaned up by an orderly shutdown only.
- stderr is always drained (a server blocked on a full stderr pipe stops answering); the last
  lines are kept for :meth:`StdioTransport.stderr_tail` and, best effort, put into the sink as
  :class:`~trio_mcp.transports.StderrLine` items.
- When the server exits, what is left of its process group is SIGKILLed: the group lives as long
  as the server. (Under the launcher this happens before the server, the group leader, is
  reaped, so the group id cannot have been recycled; for a direct child it happens right after
  reaping.)
- Limits: a process that leaves the group (``setsid``, daemonising) escapes, as with every
  process-group design. Orphaned grandchildren are reaped by init; in a container whose PID 1 is
  the host itself, run the host under an init (``docker run --init``, tini).

Shutdown (:meth:`StdioTransport.aclose`, also run when the block is left): close stdin, wait up
to ``close_grace``; SIGTERM the group, wait up to ``term_grace``; SIGKILL the group, wait up to
``kill_grace``; the server is reaped (it is a zombie of nobody). The whole sequence is shielded
from cancellation and bounded by the three graces plus 0.5 s to collect the last stderr lines.
"""

from __future__ import annotations

import logging
import math
import os
import signal
import subprocess
import sys
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from types import MappingProxyType
from typing import Any, Final, Literal, Protocol, TypeAlias

import attrs
import trio

from ...protocol._errors import (
    ConnectError,
    FrameTooLarge,
    LocalProtocolError,
    McpError,
    McpTransportConfigError,
    TransportClosed,
)
from ...protocol._framing import DEFAULT_MAX_FRAME_BYTES, NdjsonFramer, encode_frame
from ...protocol._jsonrpc import RequestId
from .._base import (
    ConnectionEnded,
    FrameSink,
    Inbound,
    InboxReader,
    StderrLine,
    TransportInfo,
    collapse_exception_group,
    map_transport_errors,
    open_inbox,
)
from .._channel import ByteChannel
from . import _launcher
from ._launcher import LaunchedServer

__all__ = [
    "DEFAULT_ENV_ALLOWLIST",
    "StdioParameters",
    "StdioStatistics",
    "StdioTransport",
    "child_environment",
    "open_stdio_transport",
]

logger = logging.getLogger("trio_mcp.transports.stdio")

#: The host variables a stdio server inherits by default (when set in the host). They locate
#: programs and the user, and set the locale, time zone and temporary directory. The Windows
#: names are harmless elsewhere. Deliberately absent: anything secret-looking (``*_TOKEN``,
#: ``*_KEY``, ``*_SECRET``, ``*PASSWORD*``), proxy settings (their URLs may hold credentials),
#: ``SSH_AUTH_SOCK`` and ``XDG_RUNTIME_DIR`` (they lead to the user's agents, keyring and session
#: bus), and interpreter settings such as ``PYTHONPATH`` or ``NODE_OPTIONS``. A server that needs
#: one of them gets it through its own ``env`` (``${VAR}`` expansion in the config) or a longer
#: ``env_allowlist``.
DEFAULT_ENV_ALLOWLIST: Final[tuple[str, ...]] = (
    "APPDATA",
    "COMSPEC",
    "HOME",
    "HOMEDRIVE",
    "HOMEPATH",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "LOCALAPPDATA",
    "LOGNAME",
    "PATH",
    "PATHEXT",
    "PROCESSOR_ARCHITECTURE",
    "PROGRAMFILES",
    "SHELL",
    "SYSTEMDRIVE",
    "SYSTEMROOT",
    "TEMP",
    "TERM",
    "TMP",
    "TMPDIR",
    "TZ",
    "USER",
    "USERNAME",
    "USERPROFILE",
    "WINDIR",
)

#: Bytes asked for per read of stdout and stderr.
_READ_CHUNK: Final = 65536
#: After a look for an answer right after a write finds stdout empty, the writer skips the
#: next looks: 2 writes, then 4, 8, ... up to this many, until a look finds an answer.
_LOOKS_SKIPPED_MAX: Final = 64
#: Bytes of frames waiting for the writer; past this, ``send`` waits (``send_nowait`` refuses).
_OUTBOX_BYTES: Final = 256 * 1024
#: The most frames, and about the most bytes, the writer puts into one write.
_WRITE_BATCH_FRAMES: Final = 64
_WRITE_BATCH_BYTES: Final = 1024 * 1024
#: A stderr line longer than this many bytes is cut (for the tail and the sink).
_STDERR_LINE_LIMIT: Final = 4096
#: How many stderr lines a :class:`TransportClosed` message quotes.
_STDERR_LINES_IN_MESSAGE: Final = 10
# After stdout ends: how long to wait for the exit status and the last stderr lines, so that
# the TransportClosed message can say why the server went away.
_END_REPORT_WAIT: Final = 0.5


# --------------------------------------------------------------------------- pipe I/O

#: trio's Unix pipe stream (absent on Windows, where the plain stream methods are used).
_FdStream: Any = getattr(trio.lowlevel, "FdStream", None)


def _write_now(fd: int, data: bytes) -> int:
    """One write of ``data`` to the Unix pipe ``fd``, without waiting: how much of it the pipe
    took (all of it, most of the time; 0 when it is full). Raises
    ``trio.BrokenResourceError`` when the write fails."""
    try:
        return os.write(fd, data)
    except BlockingIOError:
        return 0
    except OSError as exc:
        raise trio.BrokenResourceError(str(exc)) from exc


async def _write_rest(fd: int, data: bytes, sent: int) -> None:
    """Write what is left of ``data`` after its first ``sent`` bytes (:func:`_write_now`) to the
    Unix pipe ``fd``, waiting while the pipe is full. Raises ``trio.BrokenResourceError`` when
    a write fails."""
    view = memoryview(data)
    try:
        while sent < len(data):
            try:
                sent += os.write(fd, view[sent:])
            except BlockingIOError:
                await trio.lowlevel.wait_writable(fd)
    except OSError as exc:
        raise trio.BrokenResourceError(str(exc)) from exc
    finally:
        view.release()


async def _read_some(
    stream: trio.abc.ReceiveStream, max_bytes: int, *, wait_first: bool = False
) -> tuple[bytes, bool]:
    """``stream.receive_some(max_bytes)``, minus the schedule point before the first read on a
    Unix pipe; also says whether the read had to wait (and so gave the event loop away).
    ``wait_first``: the pipe is most likely empty (the last read did not fill its buffer), so
    wait until it is readable before trying (a read that fails costs an exception)."""
    if _FdStream is None or not isinstance(stream, _FdStream):
        return bytes(await stream.receive_some(max_bytes)), True
    fd = stream.fileno()
    if wait_first:
        await trio.lowlevel.wait_readable(fd)
        waited = True
    else:
        await trio.lowlevel.checkpoint_if_cancelled()
        waited = False
    while True:
        try:
            return os.read(fd, max_bytes), waited
        except BlockingIOError:
            await trio.lowlevel.wait_readable(fd)
            waited = True
        except OSError as exc:
            raise trio.BrokenResourceError(str(exc)) from exc


# --------------------------------------------------------------------------- parameters


def _to_args(value: Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, str | bytes):
        raise McpTransportConfigError(
            f"stdio args must be a list of strings, not one string ({value!r}); "
            "split it into separate arguments"
        )
    return tuple(value)


def _to_env(value: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(value))


def _redact_env(value: Mapping[str, str]) -> str:
    return "{" + ", ".join(f"{name!r}: '***'" for name in value) + "}"


def _bad_string(value: object) -> bool:
    return not isinstance(value, str) or "\0" in value


@attrs.frozen(kw_only=True)
class StdioParameters:
    """How to start and stop one stdio server.

    - ``command`` and ``args``: the program (looked up on the server's ``PATH``) and its
      arguments, passed as they are (no shell).
    - ``env``: the server's own variables, added on top of the allowed host variables (and
      winning over them). Their values never appear in ``repr()`` or logs.
    - ``cwd``: its working directory (default: the host's).
    - ``env_allowlist``: the host variables it may inherit (:data:`DEFAULT_ENV_ALLOWLIST`).
    - ``max_frame_bytes``: the largest message accepted from it (default 16 MiB).
    - ``stderr_tail_lines``: how many stderr lines :meth:`StdioTransport.stderr_tail` keeps.
    - ``close_grace``, ``term_grace``, ``kill_grace``: seconds to wait after closing stdin, after
      SIGTERM and after SIGKILL (see :meth:`StdioTransport.aclose`).
    - ``bind_to_host``: on Linux, start the server through the launcher that kills its whole
      process group when the host process dies (even by SIGKILL). Ignored elsewhere.

    Raises :class:`McpTransportConfigError` listing every invalid field.
    """

    command: str
    args: tuple[str, ...] = attrs.field(default=(), converter=_to_args)
    env: Mapping[str, str] = attrs.field(
        default=MappingProxyType({}), converter=_to_env, repr=_redact_env, hash=False
    )
    cwd: str | None = None
    env_allowlist: tuple[str, ...] = attrs.field(default=DEFAULT_ENV_ALLOWLIST, converter=_to_args)
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    stderr_tail_lines: int = 50
    close_grace: float = 2.0
    term_grace: float = 2.0
    kill_grace: float = 2.0
    bind_to_host: bool = True

    def __attrs_post_init__(self) -> None:
        problems = self._problems()
        if problems:
            raise McpTransportConfigError(
                "invalid stdio server settings: " + "; ".join(f"{k}: {m}" for k, m in problems),
                problems=problems,
            )

    def _problems(self) -> tuple[tuple[str, str], ...]:
        problems: list[tuple[str, str]] = []
        if _bad_string(self.command) or not self.command:
            problems.append(("command", "must be a non-empty string without NUL bytes"))
        for i, arg in enumerate(self.args):
            if _bad_string(arg):
                problems.append((f"args[{i}]", "must be a string without NUL bytes"))
        for name, value in self.env.items():
            if _bad_string(name) or not name or "=" in name:
                problems.append((f"env[{name!r}]", "a name must be non-empty, without '=' or NUL"))
            elif _bad_string(value):
                problems.append((f"env[{name!r}]", "the value must be a string without NUL bytes"))
        for i, name in enumerate(self.env_allowlist):
            if _bad_string(name) or not name or "=" in name:
                problems.append((f"env_allowlist[{i}]", "must be a variable name"))
        if self.cwd is not None and (_bad_string(self.cwd) or not self.cwd):
            problems.append(("cwd", "must be a non-empty path or None"))
        size = self.max_frame_bytes
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            problems.append(("max_frame_bytes", f"must be a positive integer, got {size!r}"))
        lines = self.stderr_tail_lines
        if isinstance(lines, bool) or not isinstance(lines, int) or lines < 0:
            problems.append(("stderr_tail_lines", f"must be an integer >= 0, got {lines!r}"))
        for name in ("close_grace", "term_grace", "kill_grace"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or value < 0
            ):
                problems.append((name, f"must be a finite number of seconds >= 0, got {value!r}"))
        return tuple(problems)


def child_environment(
    params: StdioParameters, host_env: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Return the environment a server started with ``params`` gets.

    That is every variable of ``host_env`` (default: :data:`os.environ`) named in
    ``params.env_allowlist``, then ``params.env`` on top. Never fails.
    """
    source = os.environ if host_env is None else host_env
    env = {name: source[name] for name in params.env_allowlist if name in source}
    env.update(params.env)
    return env


# --------------------------------------------------------------------------- stderr tail


class _StderrTail:
    """Cuts stderr into lines, keeps the last ones, hands each one to a callback. Sync."""

    def __init__(
        self, *, max_lines: int, line_limit: int, on_line: Callable[[str], None] | None = None
    ) -> None:
        self.lines: deque[str] = deque(maxlen=max_lines)
        self.line_count = 0
        self.byte_count = 0
        self._line_limit = line_limit
        self.on_line = on_line
        self._partial = bytearray()
        self._dropped = 0

    def feed(self, data: bytes) -> None:
        """Take the next chunk of stderr; emit every line it completes."""
        self.byte_count += len(data)
        start = 0
        while (nl := data.find(b"\n", start)) >= 0:
            self._keep(data, start, nl - 1 if nl > start and data[nl - 1] == 0x0D else nl)
            self._emit()
            start = nl + 1
        self._keep(data, start, len(data))

    def feed_eof(self) -> None:
        """Emit the unterminated last line, if any. Idempotent."""
        if self._partial or self._dropped:
            self._emit()

    def _keep(self, data: bytes, start: int, stop: int) -> None:
        room = max(0, self._line_limit - len(self._partial))
        take = min(room, stop - start)
        self._partial += data[start : start + take]
        self._dropped += stop - start - take

    def _emit(self) -> None:
        text = self._partial.decode("utf-8", errors="replace").removesuffix("\r")
        if self._dropped:
            text += f" [... {self._dropped} more byte{'' if self._dropped == 1 else 's'} cut]"
        self._partial.clear()
        self._dropped = 0
        self.lines.append(text)
        self.line_count += 1
        if self.on_line is not None:
            self.on_line(text)


# --------------------------------------------------------------------------- transport


@attrs.frozen(kw_only=True)
class StdioStatistics:
    """A snapshot of a :class:`StdioTransport`.

    ``pid`` is the server's process, ``pgid`` its process group (the server leads it: the same
    number). ``frames_sent`` counts frames written, in ``write_batches`` writes (the
    writer takes every frame ready, so under load a write carries many); ``outbox_frames`` the
    frames waiting for the writer. ``frames_received`` counts frames put into the sink.
    ``stdout_buffered`` is what the framer holds now; ``stdout_peak_buffered`` the most it could
    have held at once (partial frame + one read), which stays below ``max_frame_bytes`` + one
    read (64 KiB) however long a line is. ``reader_yields`` counts the times the reader gave the
    event loop away while the server kept writing. ``looks_after_write`` counts the times the
    writer looked at stdout right after a write, while the reader waited for it, and
    ``reads_after_write`` the looks that found an answer there (on one CPU the server answers
    inside the write; see :meth:`StdioTransport._read_after_write`).
    ``stderr_lines_dropped`` counts stderr lines not put into a full sink (the tail keeps
    them). ``signals_sent`` lists the shutdown signals sent to the group, in order (empty when
    the server exited on its own).
    """

    pid: int
    pgid: int
    bound_to_host: bool
    returncode: int | None
    frames_sent: int
    write_batches: int
    outbox_frames: int
    frames_received: int
    stdout_buffered: int
    stdout_peak_buffered: int
    reader_yields: int
    looks_after_write: int
    reads_after_write: int
    stderr_lines: int
    stderr_bytes: int
    stderr_lines_dropped: int
    signals_sent: tuple[str, ...]


def _describe_returncode(code: int) -> str:
    if code >= 0:
        return f"exited with code {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = "unknown signal"
    return f"was killed by signal {-code} ({name})"


def _check_frame(frame: bytes) -> None:
    """Raise :class:`LocalProtocolError` for a frame that stdio cannot carry (see
    :func:`~trio_mcp.protocol._framing.encode_frame`)."""
    if b"\n" in frame or b"\r" in frame:
        encode_frame(frame)  # raises, with the message


#: What the writer takes from the outbox: a frame and the id of the request it holds.
_OutFrame: TypeAlias = tuple[bytes, RequestId | None]


def _outbox() -> ByteChannel[_OutFrame]:
    return ByteChannel[_OutFrame](max_bytes=_OUTBOX_BYTES)


@attrs.define(eq=False)
class StdioTransport:
    """A running stdio server. Get one from :func:`open_stdio_transport`; see
    :class:`trio_mcp.transports.Transport` for the contract.

    Its tasks: the **reader** (stdout -> framer -> the sink, in order, waiting while the sink is
    full so that the server blocks on its writes), the **writer** (the outbox -> stdin: every
    frame ready in one write), the **stderr drain** (lines into the tail and, best effort, into
    the sink) and the **waiter** (the exit status, the reaping, the sweep of the group). The
    reader never holds the event loop for long: when the server keeps writing, it yields after
    every read that did not have to wait.

    The connection ends when stdout ends and the exit status and the last stderr lines are
    known (or half a second later): :class:`ConnectionEnded` says why, with the requests still
    in the outbox as ``unsent``. A write that failed half-way leaves the outcome of its frames
    unknown, and later sends are refused.
    """

    _params: StdioParameters
    _process: _ServerProcess
    _stdin: trio.abc.SendStream
    _stdout: trio.abc.ReceiveStream
    _stderr: trio.abc.ReceiveStream
    _status: trio.abc.ReceiveStream | None
    _sink: FrameSink
    _framer: NdjsonFramer
    _stderr_tail: _StderrTail
    _own_inbox: ByteChannel[Inbound] | None = None
    _outbox: ByteChannel[_OutFrame] = attrs.Factory(_outbox)
    _inbox_reader: InboxReader | None = None
    _exited: trio.Event = attrs.Factory(trio.Event)
    _stderr_done: trio.Event = attrs.Factory(trio.Event)
    _close_done: trio.Event = attrs.Factory(trio.Event)
    _reader_scope: trio.CancelScope = attrs.Factory(trio.CancelScope)
    _writer_scope: trio.CancelScope = attrs.Factory(trio.CancelScope)
    _waiter_scope: trio.CancelScope = attrs.Factory(lambda: trio.CancelScope(shield=True))
    _stderr_scope: trio.CancelScope = attrs.Factory(lambda: trio.CancelScope(shield=True))
    _closing: bool = False
    #: stdin's descriptor when it is a Unix pipe (written directly), else None
    _stdin_fd: int | None = attrs.field(init=False, default=None)
    _returncode: int | None = None
    _send_refused: str | None = None
    _frame_error: FrameTooLarge | None = None
    _end_message: str | None = None
    _frames_sent: int = 0
    _write_batches: int = 0
    _frames_received: int = 0
    _peak_buffered: int = 0
    _reader_yields: int = 0
    #: stdout's descriptor when it is a Unix pipe (read directly), else None
    _stdout_fd: int | None = attrs.field(init=False, default=None)
    #: the sink, when it is a ByteChannel (whose free room the writer can see), else None
    _sink_channel: ByteChannel[Any] | None = attrs.field(init=False, default=None)
    #: the reader waits for stdout to become readable and holds no frame
    _reader_waiting: bool = False
    _looks_after_write: int = 0
    _reads_after_write: int = 0
    #: looks after a write that found stdout empty, in a row; writes left before the next look
    _empty_looks: int = 0
    _looks_skipped: int = 0
    _stderr_dropped: int = 0
    #: stdout has ended and the reader has put every frame into the sink.
    _stdout_ended: bool = False
    #: Set once ``_end_message`` is known after stdout ended with the exit status.
    _end_known: trio.Event = attrs.Factory(trio.Event)
    #: The end is settled: the sink has the ConnectionEnded item, or the reader waits for room
    #: to put it (and closes the sink either way), or the sink is closed.
    _end_told: bool = False
    _signals_sent: list[str] = attrs.Factory(list)

    def __attrs_post_init__(self) -> None:
        if self._own_inbox is not None:
            self._inbox_reader = InboxReader(self._own_inbox)
        if _FdStream is not None and isinstance(self._stdin, _FdStream):
            self._stdin_fd = self._stdin.fileno()
        if _FdStream is not None and isinstance(self._stdout, _FdStream):
            self._stdout_fd = self._stdout.fileno()
        if isinstance(self._sink, ByteChannel):
            self._sink_channel = self._sink

    # ------------------------------------------------------------------ public API

    @property
    def info(self) -> TransportInfo:
        """``stdio`` and the command with the server's pid."""
        return TransportInfo(
            kind="stdio", detail=f"{self._params.command} (pid {self._process.pid})"
        )

    @property
    def pid(self) -> int:
        """The server's process id (not the launcher's)."""
        return self._process.pid

    @property
    def pgid(self) -> int:
        """The id of the server's process group (the server leads its own group: its pid)."""
        return self._process.pid

    @property
    def bound_to_host(self) -> bool:
        """True when the server runs under the launcher that kills it if the host dies."""
        return self._status is not None

    @property
    def returncode(self) -> int | None:
        """The server's exit status once it has exited and been reaped, else ``None``.

        Negative for a signal (``-9``: killed by SIGKILL), as in :mod:`subprocess`.
        """
        return self._returncode

    def stderr_tail(self) -> tuple[str, ...]:
        """The last ``stderr_tail_lines`` lines the server wrote to stderr, oldest first."""
        return tuple(self._stderr_tail.lines)

    def statistics(self) -> StdioStatistics:
        """A snapshot of counters and state (see :class:`StdioStatistics`)."""
        return StdioStatistics(
            pid=self._process.pid,
            pgid=self._process.pid,
            bound_to_host=self.bound_to_host,
            returncode=self._returncode,
            frames_sent=self._frames_sent,
            write_batches=self._write_batches,
            outbox_frames=len(self._outbox),
            frames_received=self._frames_received,
            stdout_buffered=self._framer.buffered,
            stdout_peak_buffered=self._peak_buffered,
            reader_yields=self._reader_yields,
            looks_after_write=self._looks_after_write,
            reads_after_write=self._reads_after_write,
            stderr_lines=self._stderr_tail.line_count,
            stderr_bytes=self._stderr_tail.byte_count,
            stderr_lines_dropped=self._stderr_dropped,
            signals_sent=tuple(self._signals_sent),
        )

    def send_nowait(self, frame: bytes, request_id: RequestId | None = None) -> None:
        """Put one message (``frame``, without newline) into the outbox now, or raise
        ``trio.WouldBlock`` when it is full. Raises :class:`LocalProtocolError` if ``frame``
        contains a newline, and :class:`TransportClosed` if the transport is closed, the server
        exited or stopped reading its stdin, or a write failed half-way."""
        self._check_can_send()
        _check_frame(frame)
        try:
            self._outbox.send_nowait((frame, request_id), len(frame))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise TransportClosed(self._refusal()) from None

    async def send(self, frame: bytes, request_id: RequestId | None = None) -> None:
        """:meth:`send_nowait`, waiting while the outbox is full."""
        try:
            self._check_can_send()
            _check_frame(frame)
        except (TransportClosed, LocalProtocolError):
            await trio.lowlevel.checkpoint()
            raise
        try:
            await self._outbox.send((frame, request_id), len(frame))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise TransportClosed(self._refusal()) from None

    async def receive(self) -> bytes:
        """Return the next message from the server's stdout, in order (only for a transport
        opened without a sink).

        Raises :class:`FrameTooLarge` if the server wrote a line longer than
        ``max_frame_bytes`` (the transport is unusable afterwards), and
        :class:`TransportClosed` when stdout ended (the message gives the exit code or signal
        and the last stderr lines), after that, or after :meth:`aclose`.
        """
        if self._inbox_reader is None:
            raise RuntimeError("this transport's frames go to the sink it was opened with")
        if self._closing:
            await trio.lowlevel.checkpoint()
            raise TransportClosed(self._closed_message())
        try:
            return await self._inbox_reader.receive()
        except TransportClosed:
            if self._closing:
                raise TransportClosed(self._closed_message()) from None
            raise

    async def aclose(self) -> None:
        """Shut the server down and release everything. Idempotent; a concurrent second call
        waits for the first.

        Steps: close stdin; wait up to ``close_grace`` for the server to exit; SIGTERM its
        process group and wait up to ``term_grace``; SIGKILL the group and wait up to
        ``kill_grace``; reap it. Shielded from cancellation and bounded by the three graces (plus
        0.5 s to collect the last stderr lines). Never raises for a misbehaving server: it logs
        each escalation step, and an error if the server survived SIGKILL. The sink gets a
        :class:`ConnectionEnded` (when it has room and the connection had not ended already)
        and is closed.
        """
        if self._closing:
            await self._close_done.wait()
            return
        self._closing = True
        try:
            with trio.CancelScope(shield=True):
                self._writer_scope.cancel()
                self._end_now(TransportClosed(self._closed_message()), force=True)
                await self._shut_down()
        finally:
            self._reader_scope.cancel()
            self._waiter_scope.cancel()
            self._stderr_scope.cancel()
            self._close_done.set()

    # ------------------------------------------------------------------ internals

    @property
    def _name(self) -> str:
        return f"stdio server {self._params.command!r} (pid {self._process.pid})"

    def _check_can_send(self) -> None:
        if self._closing or self._end_told or self._send_refused is not None:
            raise TransportClosed(self._refusal())
        if self._exited.is_set():
            raise TransportClosed(self._describe_end())

    def _refusal(self) -> str:
        if self._closing:
            return self._closed_message()
        if self._send_refused is not None:
            return self._send_refused
        return self._end_message or f"the connection to {self._name} ended"

    def _closed_message(self) -> str:
        return f"the transport to {self._name} was closed; open a new one"

    def _end_error(self) -> McpError:
        if self._frame_error is not None:
            return self._frame_error
        if self._end_message is not None:
            return TransportClosed(self._end_message)
        return TransportClosed(f"the connection to {self._name} ended")

    def _describe_end(self) -> str:
        if self._returncode is None:
            what = "closed its stdout and is still running"
        else:
            what = _describe_returncode(self._returncode)
        tail = list(self._stderr_tail.lines)[-_STDERR_LINES_IN_MESSAGE:]
        if tail:
            lines = "\n".join(f"  | {line}" for line in tail)
            return f"{self._name} {what}; its last stderr lines:\n{lines}"
        return f"{self._name} {what}; it wrote nothing to stderr"

    def _ended_item(self, error: McpError) -> ConnectionEnded:
        """The end, with the requests the writer never took (they never left). Closes the
        outbox: from now on nothing more is written."""
        unsent = frozenset(rid for _, rid in self._outbox.drain() if rid is not None)
        self._outbox.close()
        return ConnectionEnded(error=error, unsent=unsent)

    def _end_now(self, error: McpError, *, force: bool = False) -> None:
        """Put :class:`ConnectionEnded` into the sink now and close it, if the sink has room;
        a full sink leaves it to the reader, which waits for room (without ``force`` this is
        called only once stdout has ended: the reader has put every frame). With ``force``
        (closing) the sink is closed either way, also on a reader still putting frames; a
        reader already waiting to put the end keeps waiting until :meth:`aclose` cancels it,
        and closes the sink then (:meth:`_end_waiting`). Sync, once."""
        if self._end_told:
            return
        try:
            self._sink.send_nowait(self._ended_item(error))
        except trio.WouldBlock:
            if not force:
                return
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # nobody receives any more
        self._end_told = True
        self._sink.close()

    async def _end_waiting(self) -> None:
        """The reader's last act: put the end into the sink, waiting for room, and close it.

        The sink is closed however the wait ends: :meth:`aclose` leaves the end to this wait
        (room made meanwhile still lets the end in) and then cancels it, and a receiver must
        see the end of the channel then, without the item there was no room for."""
        if self._end_told:
            return
        item = self._ended_item(self._end_error())
        self._end_told = True
        try:
            await self._sink.send(item)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # nobody receives any more
        finally:
            self._sink.close()

    async def _shut_down(self) -> None:
        params = self._params
        await self._stdin.aclose()
        if await self._exit_within(params.close_grace):
            return await self._collect_stderr()
        self._escalate("SIGTERM", f"within {params.close_grace:g} s after its stdin was closed")
        self._signal_group("SIGTERM")
        if await self._exit_within(params.term_grace):
            return await self._collect_stderr()
        self._escalate("SIGKILL", f"within {params.term_grace:g} s after SIGTERM")
        # Under the shared launcher too: the launcher reaps the server and tells its status.
        self._signal_group("SIGKILL")
        exited = await self._exit_within(params.kill_grace)
        if exited:
            return await self._collect_stderr()
        logger.error(
            "%s is still running %g s after SIGKILL; giving up on it (it cannot be reaped now)",
            self._name,
            params.kill_grace,
        )
        return None

    async def _exit_within(self, seconds: float) -> bool:
        # True once the server has exited AND been reaped: the exit status can be known before
        # the launcher has reaped it (see _run_waiter). Checked without a checkpoint before any
        # signal is sent, so the group is only signalled while its leader is unreaped.
        with trio.move_on_after(seconds):
            await self._exited.wait()
            await self._process.wait()
        return self._exited.is_set() and self._process.returncode is not None

    async def _collect_stderr(self) -> None:
        with trio.move_on_after(_END_REPORT_WAIT):
            await self._stderr_done.wait()

    def _escalate(self, signal_name: str, reason: str) -> None:
        logger.warning(
            "%s did not exit %s; sending %s to its process group %d",
            self._name,
            reason,
            signal_name,
            self._process.pid,
        )

    def _signal_group(self, name: Literal["SIGTERM", "SIGKILL"]) -> None:
        """Send SIGTERM or SIGKILL to the server's process group, and note it. The group cannot
        have been recycled: its leader is not reaped yet. On Windows (no process groups, and
        always a direct child) the process is killed at either step: terminating a process
        there is killing it."""
        self._signals_sent.append(name)
        if sys.platform == "win32":
            self._process.kill()
            return
        try:
            os.killpg(self._process.pid, signal.Signals[name])
        except ProcessLookupError:
            logger.debug("process group %d is already gone", self._process.pid)

    def _sweep_group(self) -> None:
        """Kill what is left of the group after the server exited (its own children)."""
        if sys.platform == "win32":
            return
        try:
            os.killpg(self._process.pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        logger.info("killed what was left of process group %d of %s", self._process.pid, self._name)

    # ------------------------------------------------------------------ background tasks

    async def _run_writer(self) -> None:
        """The outbox -> stdin: every frame ready in one write (up to a batch limit). A write
        that fails ends the writing: the frames left in the outbox are unsent at the end."""
        outbox = self._outbox
        with self._writer_scope:
            while True:
                try:
                    frame, _ = await outbox.receive()
                except (trio.EndOfChannel, trio.ClosedResourceError):
                    return
                if outbox:  # more frames are ready: one write for as many as a batch takes
                    batch = [frame]
                    size = len(frame)
                    while outbox and len(batch) < _WRITE_BATCH_FRAMES and size < _WRITE_BATCH_BYTES:
                        frame, _ = outbox.receive_nowait()
                        batch.append(frame)
                        size += len(frame)
                    batch.append(b"")
                    data = b"\n".join(batch)
                    count = len(batch) - 1
                else:  # one call at a time: the frame alone
                    data = frame + b"\n"
                    count = 1
                fd = self._stdin_fd
                try:
                    if fd is None:  # not a Unix pipe
                        await self._stdin.send_all(data)
                    else:
                        # The receive was this turn's checkpoint, so no schedule point before
                        # the write (trio's FdStream.send_all has one): it goes out at once,
                        # whole most of the time.
                        sent = _write_now(fd, data)
                        if sent < len(data):
                            await _write_rest(fd, data, sent)
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                    self._send_refused = (
                        f"sending to {self._name} failed: it stopped reading its stdin ({exc}); "
                        "the messages of that write may or may not have arrived"
                    )
                    logger.info("%s", self._send_refused)
                    return
                self._frames_sent += count
                self._write_batches += 1
                if self._reader_waiting:
                    self._read_after_write()

    def _read_after_write(self) -> None:
        """Right after a write, while the reader waits for stdout: take the answer if it is
        already there. On one CPU the server runs inside our write (the kernel switches to it
        as the write wakes it) and has answered by the time the write returns; its frames go
        up now, instead of after another pass through the event loop to wake the reader. Sync.

        Frames keep their order: the reader holds none while it waits (it reads the next
        bytes of the stream whenever it wakes), and the read takes no more than the sink has
        room for, so every frame goes in without waiting. A look that finds stdout empty (the
        server runs on another CPU and answers later) makes the next looks rarer: the writer
        skips 2 writes, then 4, up to :data:`_LOOKS_SKIPPED_MAX`, until a look finds an answer.
        """
        fd = self._stdout_fd
        sink = self._sink_channel
        if fd is None or sink is None or self._frame_error is not None:
            return
        if self._looks_skipped:
            self._looks_skipped -= 1
            return
        framer = self._framer
        buffered = framer.buffered
        # No more than the sink takes now, and never so much that a frame could grow past
        # max_frame_bytes: the framer cannot refuse it (an oversized frame is the reader's).
        size = min(sink.room, framer.max_frame_bytes, _READ_CHUNK + buffered) - buffered
        if size <= 0:
            return
        self._looks_after_write += 1
        try:
            data = os.read(fd, size)
        except OSError:  # empty (BlockingIOError), or a failure the reader meets too
            self._empty_looks = min(self._empty_looks + 1, _LOOKS_SKIPPED_MAX.bit_length() - 1)
            self._looks_skipped = min(1 << self._empty_looks, _LOOKS_SKIPPED_MAX)
            return
        if not data:  # the end of stdout: the reader wakes for it and ends the connection
            return
        self._empty_looks = 0
        self._reads_after_write += 1
        self._peak_buffered = max(self._peak_buffered, buffered + len(data))
        for frame in framer.feed(data):
            sink.send_nowait(frame, len(frame))
            self._frames_received += 1

    async def _run_reader(self) -> None:
        """stdout -> framer -> the sink; at the end, say why the connection ended."""
        try:
            with self._reader_scope:
                try:
                    await self._pump_stdout()
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return  # the sink was closed: nobody receives any more
                except TransportClosed as exc:
                    self._end_message = str(exc)
                await self._end_waiting()
        finally:
            with trio.CancelScope(shield=True):
                await self._stdout.aclose()

    async def _put(self, frame: bytes) -> None:
        """One frame into the sink, waiting for room when it is full."""
        try:
            self._sink.send_nowait(frame, len(frame))
        except trio.WouldBlock:
            await self._sink.send(frame, len(frame))
        self._frames_received += 1

    async def _pump_stdout(self) -> None:
        framer = self._framer
        waited = True  # whether the reader gave the event loop away since its last read
        short = False  # whether the last read left room in its buffer (the pipe is empty)
        while True:
            if not waited and not short:
                # The server keeps writing: let every other task run before the next read.
                self._reader_yields += 1
                await trio.lowlevel.checkpoint()
            self._reader_waiting = True  # the writer may take what comes meanwhile
            try:
                data, waited = await _read_some(self._stdout, _READ_CHUNK, wait_first=short)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                with map_transport_errors(f"reading from {self._name}"):
                    raise
            finally:
                self._reader_waiting = False
            if not data:
                break
            short = len(data) < _READ_CHUNK
            self._peak_buffered = max(self._peak_buffered, framer.buffered + len(data))
            try:
                frames = framer.feed(data)
            except FrameTooLarge as exc:
                for frame in exc.frames_before:
                    await self._put(frame)
                self._refuse_after_oversized_frame(exc)
                return
            sink = self._sink
            for frame in frames:  # self._put(frame), inline: the hot path
                try:
                    sink.send_nowait(frame, len(frame))
                except trio.WouldBlock:
                    await sink.send(frame, len(frame))
                self._frames_received += 1
        last = framer.feed_eof()
        if last is not None:
            await self._put(last)
        logger.debug("%s closed its stdout", self._name)
        self._stdout_ended = True
        self._finish_if_ready()
        if self._end_message is None:
            # Wait a little for the exit status and the last stderr lines, so that the end can
            # say why; whichever task learns the last of them ends the connection at once.
            with trio.move_on_after(_END_REPORT_WAIT):
                await self._end_known.wait()
        if self._end_message is None:  # the server closed its stdout but goes on (or its group)
            self._end_message = self._describe_end()

    def _finish_if_ready(self) -> None:
        """End the connection now if stdout has ended and the exit status and the last stderr
        lines are known (called by each of the three tasks that learn one of them). Sync."""
        if (
            self._stdout_ended
            and self._end_message is None
            and self._exited.is_set()
            and self._stderr_done.is_set()
        ):
            self._end_message = self._describe_end()
            self._end_known.set()
            self._end_now(TransportClosed(self._end_message))

    def _refuse_after_oversized_frame(self, exc: FrameTooLarge) -> None:
        logger.warning(
            "%s sent a frame over %d bytes; closing the connection", self._name, exc.limit
        )
        error = FrameTooLarge(
            f"{self._name} sent a message (one line) longer than {exc.limit} bytes, so the "
            "connection was closed. If the server legitimately sends bigger messages, raise "
            f"max_frame_bytes (now {exc.limit}) in its config",
            limit=exc.limit,
        )
        error.__cause__ = exc
        self._frame_error = error
        message = (
            f"the connection to {self._name} was given up after it sent a message over "
            f"{exc.limit} bytes (max_frame_bytes); reconnect, or raise the limit"
        )
        self._end_message = message
        if self._send_refused is None:
            self._send_refused = message

    def _stderr_line(self, text: str) -> None:
        """A stderr line: into the sink if it has room now (stderr is the server's log, never
        worth slowing the server down for; the tail keeps every line)."""
        if self._end_told:
            return
        try:
            self._sink.send_nowait(StderrLine(text=text))
        except trio.WouldBlock:
            self._stderr_dropped += 1
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass

    async def _run_stderr(self) -> None:
        """Drain stderr for as long as any process of the group holds it open."""
        try:
            with self._stderr_scope:
                while True:
                    try:
                        data = bytes(await self._stderr.receive_some(_READ_CHUNK))
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        break
                    if not data:
                        break
                    self._stderr_tail.feed(data)
                self._stderr_tail.feed_eof()
        finally:
            self._stderr_done.set()
            self._finish_if_ready()
            with trio.CancelScope(shield=True):
                await self._stderr.aclose()

    async def _run_waiter(self) -> None:
        """Learn the server's exit status, publish it, reap, and kill the group's leftovers.

        Under the shared launcher the status is published the moment the launcher's report
        arrives: the launcher has swept the group by then (while the server, the group leader,
        was still its unreaped zombie) and reaps the server once the report is read; waiting
        for that (:meth:`_exit_within` does too) comes afterwards, so nothing waits for it
        before the end is known. A direct child, or a server whose launcher ended without
        reporting, is reaped first, then the group is swept and the status published.
        """
        try:
            with self._waiter_scope:
                reported = await self._read_final_status()
                if reported is not None:
                    self._publish_exit(reported)
                    # The launcher sweeps the group (and so kills itself) right after reporting.
                    await self._process.wait()
                    return
                code = await self._process.wait()
                # Sweep the group here: nothing did (a launcher sweeps it while it is alive).
                self._sweep_group()
                self._publish_exit(code)
        finally:
            if self._status is not None:
                with trio.CancelScope(shield=True):
                    await self._status.aclose()

    def _publish_exit(self, code: int) -> None:
        """Make the exit status known: ``returncode``, the log, and ``_exited``."""
        self._returncode = code
        logger.info("%s %s", self._name, _describe_returncode(code))
        self._exited.set()
        self._finish_if_ready()

    async def _read_final_status(self) -> int | None:
        """The server's exit status reported by the launcher, as soon as its line arrives.

        Returns ``exit <code>`` as ``code`` and ``signal <n>`` as ``-n``. Returns None without
        a launcher, and when the status pipe ends without a readable report (the launcher died
        before it could report) or fails to read. Waits as long as the server runs.
        """
        if self._status is None:
            return None
        try:
            kind, value = await _read_report(self._status)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return None
        if kind == b"exit" and value.isdigit():
            return int(value)
        if kind == b"signal" and value.isdigit():
            return -int(value)
        return None


# --------------------------------------------------------------------------- spawning


class _ServerProcess(Protocol):
    """What the transport needs of the server's process: :class:`trio.Process` for a direct
    child, :class:`._launcher.LaunchedServer` for a server started by the shared launcher.
    ``pid`` is also the server's process group id."""

    @property
    def pid(self) -> int: ...
    @property
    def returncode(self) -> int | None: ...
    async def wait(self) -> int: ...
    def kill(self) -> None: ...


@attrs.frozen(kw_only=True)
class _Spawned:
    process: _ServerProcess
    stdin: trio.abc.SendStream
    stdout: trio.abc.ReceiveStream
    stderr: trio.abc.ReceiveStream
    #: The launcher's status pipe (None for a direct child).
    status: trio.abc.ReceiveStream | None


def _spawn_error(params: StdioParameters, exc: OSError) -> ConnectError:
    where = f" in directory {params.cwd!r}" if params.cwd is not None else ""
    also = ", and that the directory exists" if params.cwd is not None else ""
    return ConnectError(
        f"could not start stdio server {params.command!r}{where}: {exc}. Check that the command "
        "is installed, executable and on the server's PATH (PATH comes from the environment "
        f"allow-list or the server's env){also}"
    )


async def _spawn(params: StdioParameters) -> _Spawned:
    """Start the server (through the shared launcher where possible); raise ConnectError if it
    fails."""
    env = child_environment(params)
    if params.bind_to_host and _launcher.SUPPORTED:
        if sys.executable:
            return await _spawn_bound(params, env)
        logger.warning("sys.executable is empty: %r starts without the launcher", params.command)
    argv = [params.command, *params.args]
    try:
        if sys.platform == "win32":
            process = await trio.lowlevel.open_process(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                cwd=params.cwd,
                creationflags=subprocess.CREATE_NEW_PROCESS_GROUP,
            )
        else:
            process = await trio.lowlevel.open_process(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                cwd=params.cwd,
                start_new_session=True,
            )
    except OSError as exc:
        raise _spawn_error(params, exc) from exc
    logger.info("started %r: pid %d, process group %d", params.command, process.pid, process.pid)
    assert process.stdin is not None
    assert process.stdout is not None
    assert process.stderr is not None
    return _Spawned(
        process=process,
        stdin=process.stdin,
        stdout=process.stdout,
        stderr=process.stderr,
        status=None,
    )


async def _spawn_bound(params: StdioParameters, env: Mapping[str, str]) -> _Spawned:
    """Have the shared launcher start the server (see :mod:`._reaper`)."""
    try:
        launch = await _launcher.launch([params.command, *params.args], env, params.cwd)
    except OSError as exc:
        raise ConnectError(
            f"could not start stdio server {params.command!r}: the launcher that binds it to "
            f"this process could not be started or reached ({exc}); set bind_to_host=False to "
            "start the server directly"
        ) from exc
    process = launch.process
    started = False
    try:
        await _await_launch(params, launch)
        started = True
    finally:
        launch.start.close()
        if not started:
            await _abort_launch(
                process, (launch.stdin, launch.stdout, launch.stderr, launch.status), params
            )
    logger.info(
        "started %r: pid %d, process group %d (bound to this host process)",
        params.command,
        process.pid,
        process.pid,
    )
    return _Spawned(
        process=process,
        stdin=launch.stdin,
        stdout=launch.stdout,
        stderr=launch.stderr,
        status=launch.status,
    )


async def _read_report(status: trio.abc.ReceiveStream) -> tuple[bytes, bytes]:
    """Read the launcher's report line (``exit 0``, ``err 2``...) as ``(kind, value)``;
    ``(b"", b"")`` if the pipe ended first. The launcher writes one line on a status pipe, then
    closes it; anything after the first line is ignored. Raises trio's
    Broken/ClosedResourceError when the pipe cannot be read."""
    said = b""
    while b"\n" not in said:
        chunk, _ = await _read_some(status, 64)
        if not chunk:
            break
        said += chunk
    kind, _, value = said.partition(b"\n")[0].partition(b" ")
    return kind, value


async def _await_launch(params: StdioParameters, launch: _launcher.Launch) -> None:
    """Wait until the server has exec'd (sets ``launch.process.pid``); raise ConnectError
    saying why it could not start.

    The start pipe brings the server's pid, then ``err <errno>`` if its exec failed, and ends
    at the exec. If it ends empty the launcher did not fork: its status pipe says why."""
    said = b""
    while True:
        chunk, _ = await _read_some(launch.start, 256)
        if not chunk:
            break
        said += chunk
    pid, _, failure = said.partition(b"\n")
    if pid.isdigit():
        launch.process.pid = int(pid)
        kind, _, value = failure.rstrip(b"\n").partition(b" ")
    else:
        kind, value = await _read_report(launch.status)
    if not kind and launch.process.pid:
        return
    code, _, where = value.partition(b" ")
    if kind == b"err" and code.isdigit():
        number = int(code)
        filename = params.cwd if where == b"cwd" else params.command
        error = OSError(number, os.strerror(number), filename)
        raise _spawn_error(params, error) from error
    why = await launch.launcher_end()
    raise ConnectError(
        f"could not start stdio server {params.command!r}: the launcher that binds it to this "
        f"process ended before starting it ({why}); set bind_to_host=False to start the server "
        "directly"
    )


async def _abort_launch(
    process: LaunchedServer, streams: Iterable[trio.abc.AsyncResource], params: StdioParameters
) -> None:
    """Kill and reap a half-started server group, shielded and bounded by ``kill_grace``.

    A server whose start was not reported yet is SIGKILLed by the launcher when it sees the
    reap pipe closed."""
    with trio.CancelScope(shield=True):
        process.kill()
        if process.pid > 0:
            with trio.move_on_after(params.kill_grace):
                await process.wait()
        process.close()
        for stream in streams:
            await stream.aclose()


def _release(process: _ServerProcess) -> None:
    """Let go of the launcher's last pipe to the server (see :meth:`LaunchedServer.close`)."""
    if isinstance(process, LaunchedServer):
        process.close()


# --------------------------------------------------------------------------- entry point


@asynccontextmanager
async def open_stdio_transport(
    params: StdioParameters, sink: FrameSink | None = None
) -> AsyncIterator[StdioTransport]:
    """Start the server described by ``params`` and yield its :class:`StdioTransport`, whose
    frames go into ``sink`` (or, without one, into an inbox of its own that
    :meth:`StdioTransport.receive` reads).

    Raises :class:`ConnectError` (naming the command and the OS error) if the server cannot be
    started: command not found, not executable, ``cwd`` missing. Leaving the block runs
    :meth:`StdioTransport.aclose`, even when the block is cancelled, so no process of the
    server's group survives it. An exception raised in the block comes out as itself (not
    wrapped in an :class:`ExceptionGroup`).
    """
    with collapse_exception_group():
        spawned = await _spawn(params)
        own_inbox = None
        if sink is None:
            own_inbox = open_inbox()
            sink = own_inbox
        tail = _StderrTail(max_lines=params.stderr_tail_lines, line_limit=_STDERR_LINE_LIMIT)
        transport = StdioTransport(
            params=params,
            process=spawned.process,
            stdin=spawned.stdin,
            stdout=spawned.stdout,
            stderr=spawned.stderr,
            status=spawned.status,
            sink=sink,
            framer=NdjsonFramer(max_frame_bytes=params.max_frame_bytes),
            stderr_tail=tail,
            own_inbox=own_inbox,
        )
        tail.on_line = transport._stderr_line
        try:
            async with trio.open_nursery() as nursery:
                try:
                    nursery.start_soon(transport._run_waiter)
                    nursery.start_soon(transport._run_stderr)
                    nursery.start_soon(transport._run_reader)
                    nursery.start_soon(transport._run_writer)
                    yield transport
                finally:
                    await transport.aclose()
        finally:
            _release(spawned.process)
