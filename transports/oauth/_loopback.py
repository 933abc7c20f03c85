"""The loopback redirect receiver of a command-line sign-in (RFC 8252 §7.3): an HTTP listener on
``127.0.0.1`` with a port of the system's choosing, which takes the one redirect the browser is
sent to after the user has signed in, answers it with a short page, and hands the full redirect
URL to the flow (which checks ``state`` and ``iss`` before it uses the code).

It accepts only ``GET`` of the exact path, one such request, each request bounded in size and
time; anything else is answered with an error and does not count. No value of the request is
ever written back to the browser or to a log (the code is a secret).
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Final

import attrs
import trio

from ...protocol._errors import AuthorizationError

__all__ = [
    "DEFAULT_REDIRECT_PATH",
    "LOOPBACK_TIMEOUT",
    "LoopbackReceiver",
    "open_loopback_receiver",
]

#: The path of the redirect URI.
DEFAULT_REDIRECT_PATH: Final = "/callback"
#: How long the user has to finish signing in, by default.
LOOPBACK_TIMEOUT: Final = 300.0
#: A request (line and headers) bigger than this is refused.
MAX_REQUEST_BYTES: Final = 16 * 1024
#: How long one browser connection may take to send its request.
REQUEST_TIMEOUT: Final = 10.0

_DONE_PAGE: Final = (
    b"<!doctype html><html><head><meta charset='utf-8'><title>trio-mcp</title></head>"
    b"<body><p>The sign-in is done: you can close this tab and go back to the terminal.</p>"
    b"</body></html>"
)
_ERROR_PAGE: Final = (
    b"<!doctype html><html><head><meta charset='utf-8'><title>trio-mcp</title></head>"
    b"<body><p>The authorization server reported an error: go back to the terminal to see it."
    b"</p></body></html>"
)


@attrs.define(eq=False)
class LoopbackReceiver:
    """The receiver of one sign-in: give :attr:`redirect_uri` to the flow, then
    :meth:`wait` for the redirect."""

    redirect_uri: str
    timeout: float
    _path: str
    _received: trio.Event = attrs.field(factory=trio.Event, init=False)
    _url: str | None = attrs.field(default=None, init=False, repr=False)  # holds the code

    async def wait(self) -> str:
        """The full URL the browser was redirected to (``redirect_uri?code=...&state=...``).
        Raises :class:`AuthorizationError` when none arrives within ``timeout`` seconds."""
        with trio.move_on_after(self.timeout):
            await self._received.wait()
        if self._url is None:
            raise AuthorizationError(
                f"no sign-in redirect arrived at {self.redirect_uri} within {self.timeout:g} s: "
                "finish signing in in the browser, or sign in with --no-browser (paste the URL "
                "the browser ends at) or --device"
            )
        return self._url

    async def serve(self, listener: trio.SocketListener) -> None:
        """Answer connections for as long as the receiver is open (after the redirect, a
        request for the path is refused: one redirect only)."""
        async with trio.open_nursery() as nursery:
            while True:
                stream = await listener.accept()
                nursery.start_soon(self._answer, stream)

    async def _answer(self, stream: trio.SocketStream) -> None:
        async with stream:
            with trio.move_on_after(REQUEST_TIMEOUT):
                try:
                    head = await _read_head(stream)
                    if head is None:
                        await _reply(stream, 431, "Request Header Fields Too Large", b"")
                        await _drain(stream)
                        return
                    await self._handle(stream, head)
                    await _drain(stream)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return

    async def _handle(self, stream: trio.SocketStream, head: bytes) -> None:
        line = head.split(b"\r\n", 1)[0]
        parts = line.split(b" ")
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
            await _reply(stream, 400, "Bad Request", b"")
            return
        method, target = parts[0], parts[1].decode("ascii", "replace")
        path, _, query = target.partition("?")
        if path != self._path:
            await _reply(stream, 404, "Not Found", b"")
            return
        if method != b"GET":
            await _reply(stream, 405, "Method Not Allowed", b"")
            return
        if self._url is not None:  # one redirect only
            await _reply(stream, 409, "Conflict", b"")
            return
        self._url = f"{self.redirect_uri}?{query}" if query else self.redirect_uri
        failed = any(pair.split("=", 1)[0] == "error" for pair in query.split("&"))
        self._received.set()
        await _reply(stream, 200, "OK", _ERROR_PAGE if failed else _DONE_PAGE)


async def _read_head(stream: trio.SocketStream) -> bytes | None:
    """The request line and headers (up to the blank line), or None when they are too big."""
    data = bytearray()
    while b"\r\n\r\n" not in data:
        chunk = await stream.receive_some(4096)
        if not chunk:
            break
        data += chunk
        if len(data) > MAX_REQUEST_BYTES:
            return None
    return bytes(data)


async def _drain(stream: trio.SocketStream) -> None:
    """Say that the answer is complete, and read (a bounded amount of) what the browser still
    sends, so that closing does not reset the connection before it has read the answer."""
    await stream.send_eof()
    left = 4 * MAX_REQUEST_BYTES
    while left > 0:
        chunk = await stream.receive_some(4096)
        if not chunk:
            return
        left -= len(chunk)


async def _reply(stream: trio.SocketStream, status: int, reason: str, body: bytes) -> None:
    head = (
        f"HTTP/1.1 {status} {reason}\r\n"
        "Content-Type: text/html; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Cache-Control: no-store\r\n"
        "Referrer-Policy: no-referrer\r\n"
        "Connection: close\r\n\r\n"
    ).encode("ascii")
    await stream.send_all(head + body)


@asynccontextmanager
async def open_loopback_receiver(
    *,
    path: str = DEFAULT_REDIRECT_PATH,
    host: str = "127.0.0.1",
    port: int = 0,
    timeout: float = LOOPBACK_TIMEOUT,
) -> AsyncIterator[LoopbackReceiver]:
    """Listen on ``host`` (loopback) at ``port`` (0: one the system picks) for the redirect
    to ``path``, for the duration of the block. Yields the :class:`LoopbackReceiver`, whose
    ``redirect_uri`` is ``http://127.0.0.1:<port><path>``. Raises :class:`AuthorizationError`
    when the port cannot be listened on."""
    if not path.startswith("/") or not math.isfinite(timeout) or timeout <= 0:
        raise ValueError("path must start with '/' and timeout be a finite number > 0")
    try:
        listeners = await trio.open_tcp_listeners(port, host=host)
    except OSError as exc:
        raise AuthorizationError(
            f"cannot listen on {host}:{port} for the sign-in redirect: {exc.strerror or exc}"
        ) from None
    listener = listeners[0]
    for extra in listeners[1:]:
        await extra.aclose()
    bound = listener.socket.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    receiver = LoopbackReceiver(
        redirect_uri=f"http://{shown}:{bound}{path}", timeout=timeout, path=path
    )
    async with listener, trio.open_nursery() as nursery:
        nursery.start_soon(receiver.serve, listener)
        try:
            yield receiver
        finally:
            nursery.cancel_scope.cancel()
