"""``trio-mcp -vv``: every JSON-RPC frame to and from each server, logged redacted.

The command line opens its runtime with ``wrap_transport=frame_tap``: each server's transports
are still opened by the runtime's own opener (with the server's OAuth sign-in), and the frames
the server sends are seen on their way into the transport's sink, the frames we send on their
way into the transport.
Each is logged at DEBUG under ``trio_mcp.frames`` as ``SERVER --> {...}`` (sent) or ``SERVER
<-- {...}`` (received), after :func:`~trio_mcp.actors.config.redact` (the value of every key
that looks secret is ``***``, long strings are cut; a string that holds JSON, such as a tool's
text output, is redacted the same way).
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from ...transports._base import FrameSink, Inbound, Transport
from ..config._config import ServerConfig
from ..config._redact import redact, redact_text
from ..runtime._supervisor import TransportOpener

__all__ = ["FRAMES_LOGGER", "describe_frame", "frame_tap"]

#: The logger the frames go to (DEBUG).
FRAMES_LOGGER = "trio_mcp.frames"
_log = logging.getLogger(FRAMES_LOGGER)
#: Methods of a transport that take a frame to send (the optional abilities included).
_SENDS = frozenset(
    {"send", "send_nowait", "send_now", "send_with_headers", "send_with_headers_nowait"}
)


def describe_frame(frame: bytes) -> str:
    """One frame as one line of redacted JSON (or a note when it is not JSON)."""
    try:
        value = json.loads(frame)
    except (ValueError, RecursionError):
        return f"({len(frame)} bytes, not JSON)"
    return json.dumps(_texts(redact(value)), ensure_ascii=False, separators=(",", ":"))


def _texts(value: Any) -> Any:
    """``value`` with each string that holds JSON (a tool's text output, say) redacted as
    :func:`~trio_mcp.actors.config.redact_text` does."""
    if isinstance(value, dict):
        return {key: _texts(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_texts(item) for item in value]
    if isinstance(value, str) and value.lstrip()[:1] in ("{", "["):
        return redact_text(value)
    return value


def _emit(server: str, arrow: str, frame: bytes) -> None:
    if _log.isEnabledFor(logging.DEBUG):
        _log.debug("%s %s %s", server, arrow, describe_frame(frame))


class _SinkTap:
    """A transport's sink that logs each frame on its way up."""

    def __init__(self, sink: FrameSink, server: str) -> None:
        self._sink = sink
        self._server = server

    def send_nowait(self, item: Inbound, *args: Any, **kwargs: Any) -> None:
        self._sink.send_nowait(item, *args, **kwargs)
        if isinstance(item, bytes):  # logged once put: a full sink raises and it is put again
            _emit(self._server, "<--", item)

    async def send(self, item: Inbound, *args: Any, **kwargs: Any) -> None:
        if isinstance(item, bytes):
            _emit(self._server, "<--", item)
        await self._sink.send(item, *args, **kwargs)

    def close(self) -> None:
        self._sink.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sink, name)


def _forward(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    """A method of the tapped transport that calls ``name`` of the inner one."""
    logs = name in _SENDS
    if inspect.iscoroutinefunction(method):

        async def forward_async(self: Any, *args: Any, **kwargs: Any) -> Any:
            if logs and args and isinstance(args[0], bytes):
                _emit(self._server, "-->", args[0])
            return await getattr(self._inner, name)(*args, **kwargs)

        return forward_async

    def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = getattr(self._inner, name)(*args, **kwargs)
        if logs and args and isinstance(args[0], bytes):  # logged once taken (WouldBlock)
            _emit(self._server, "-->", args[0])
        return result

    return forward


def _reader(name: str) -> Callable[[Any], Any]:
    def read(self: Any) -> Any:
        return getattr(self._inner, name)

    return read


def _tap_class(inner: Transport) -> type:
    """A class with every public member of ``inner``'s, forwarding to it: the optional
    abilities (the ``typing.Protocol`` checks of the session) stay what they are."""
    namespace: dict[str, Any] = {}
    for name in dir(type(inner)):
        if name.startswith("_"):
            continue
        value = getattr(inner, name, None)
        if callable(value):
            namespace[name] = _forward(name, value)
        else:
            namespace[name] = property(_reader(name))
    return type(f"Tapped{type(inner).__name__}", (), namespace)


def _tapped(inner: Transport, server: str) -> Transport:
    tapped: Any = _tap_class(inner)()
    tapped._inner = inner
    tapped._server = server
    result: Transport = tapped
    return result


def frame_tap(server: ServerConfig, inner: TransportOpener) -> TransportOpener:
    """The ``wrap_transport`` of ``open_runtime`` for ``-vv``: ``inner`` (the runtime's own
    opener for ``server``, its sign-in included) with every frame logged on its way."""

    @asynccontextmanager
    async def opener(config: ServerConfig, sink: FrameSink) -> AsyncIterator[Transport]:
        async with inner(config, _SinkTap(sink, config.name)) as transport:
            yield _tapped(transport, config.name)

    return opener
