"""A seeded chaos transport: deterministic frame loss, duplication, corruption, delay, disconnect.

:class:`ChaosTransport` wraps any :class:`~trio_mcp.transports.Transport` and, following a
:class:`ChaosPolicy`, mistreats the frames that pass through it in the chosen directions
(``"receive"``: frames the client receives from the server; ``"send"``: frames the client sends).

Determinism: the fate of a frame depends only on the policy's seed, the direction and the frame's
index in that direction (0, 1, 2...). Each direction draws from its own random source, derived
from ``random.Random(policy.seed)``, and every frame consumes the same number of draws whatever
happens to it. So the same seed and the same traffic give the same :attr:`ChaosTransport.actions`,
whatever trio's scheduler does with the order in which concurrent senders and the reader run.

What happens to one frame, in this order (``delay`` applies to every frame when it is set; the
others each happen with their own probability, drawn independently):

1. ``delay``: wait a uniform random time in ``[lo, hi]`` seconds (``trio.sleep``: free under
   ``autojump_clock``) before handling the frame. Frames stay in order: a delayed received
   frame holds back the ones after it, and a delayed send holds back its caller.
2. ``drop``: the frame is lost (nothing else happens to it).
3. ``truncate``: the frame is cut to a random shorter length (at least 1 byte when it has 2 or
   more), so a JSON object is no longer complete.
4. ``garble``: one byte is replaced by an ASCII control byte, which is invalid anywhere in JSON
   text, so the frame is no longer valid JSON.
5. ``duplicate``: the (possibly damaged) frame is delivered twice.

``disconnect_after_frames=n`` counts the frames of the chaos directions (dropped ones included);
right after the n-th is handled the inner transport is closed, and from then on ``send`` and
``receive`` raise :class:`TransportClosed` (``n=0``: at the first operation).
"""

from __future__ import annotations

import contextlib
import math
import random
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from typing import Any, Final, Literal

import attrs
import trio

from ...protocol._errors import McpError, TransportClosed
from ...protocol._jsonrpc import RequestId
from ...transports._base import (
    ConnectionEnded,
    FrameSink,
    Inbound,
    InboxReader,
    ProcessTransport,
    Transport,
    TransportInfo,
    item_size,
    open_inbox,
)
from ...transports._channel import ByteChannel
from ..config._config import TransportFactory

__all__ = [
    "ChaosAction",
    "ChaosPolicy",
    "ChaosStatistics",
    "ChaosTransport",
    "ChaosTransportFactory",
    "TransportFactory",
    "chaos_transport_factory",
    "open_chaos_transport",
]

#: The two directions a policy can apply to.
_DIRECTIONS: Final = frozenset({"send", "receive"})

#: Bytes that are invalid anywhere in JSON text: control characters other than whitespace.
_INVALID_JSON_BYTES: Final = bytes([b for b in range(0x20) if b not in (0x09, 0x0A, 0x0D)])

ActionKind = Literal["delay", "drop", "truncate", "garble", "duplicate", "disconnect"]


def _probability(_: object, attribute: attrs.Attribute[float], value: float) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0.0 <= value <= 1.0
    ):
        raise ValueError(
            f"ChaosPolicy.{attribute.name} must be a probability in [0, 1], got {value!r}"
        )


def _delay(_: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, tuple) or len(value) != 2:
        raise ValueError(f"ChaosPolicy.delay must be a (low, high) pair of seconds, got {value!r}")
    low, high = value
    for bound in value:
        if (
            isinstance(bound, bool)
            or not isinstance(bound, int | float)
            or not math.isfinite(bound)
        ):
            raise ValueError(f"ChaosPolicy.delay bounds must be finite numbers, got {value!r}")
    if not 0 <= low <= high:
        raise ValueError(f"ChaosPolicy.delay must satisfy 0 <= low <= high, got {value!r}")


def _frames(_: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(
            f"ChaosPolicy.disconnect_after_frames must be an integer >= 0 or None, got {value!r}"
        )


def _direction_set(value: Iterable[str]) -> frozenset[str]:
    return frozenset(value)


def _directions(_: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, frozenset) or not value or not value <= _DIRECTIONS:
        raise ValueError(
            "ChaosPolicy.directions must be a non-empty frozenset of 'send' and 'receive', "
            f"got {value!r}"
        )


@attrs.frozen(kw_only=True)
class ChaosPolicy:
    """What a :class:`ChaosTransport` does to frames. Probabilities are per frame.

    Construction raises :class:`ValueError` for a probability outside ``[0, 1]``, a ``delay``
    that is not ``(low, high)`` with ``0 <= low <= high``, a negative
    ``disconnect_after_frames``, or ``directions`` that is empty or names something other than
    ``"send"`` and ``"receive"``.
    """

    seed: int = 0
    drop: float = attrs.field(default=0.0, validator=_probability)
    duplicate: float = attrs.field(default=0.0, validator=_probability)
    garble: float = attrs.field(default=0.0, validator=_probability)
    truncate: float = attrs.field(default=0.0, validator=_probability)
    delay: tuple[float, float] | None = attrs.field(default=None, validator=_delay)
    disconnect_after_frames: int | None = attrs.field(default=None, validator=_frames)
    directions: frozenset[str] = attrs.field(
        default=frozenset({"receive"}), converter=_direction_set, validator=_directions
    )


@attrs.frozen(kw_only=True)
class ChaosAction:
    """One thing a :class:`ChaosTransport` did.

    ``index`` is the frame's index in its ``direction`` (from 0); for ``"disconnect"`` it is the
    number of frames seen, and ``direction`` that of the operation that cut the link. ``value``
    depends on ``kind``:
    the seconds waited for ``"delay"``, the length kept for ``"truncate"``, the offset of the
    replaced byte for ``"garble"``, the number of frames seen for ``"disconnect"``, and ``None``
    for ``"drop"`` and ``"duplicate"``.
    """

    index: int
    direction: str
    kind: ActionKind
    value: float | None = None


@attrs.frozen(kw_only=True)
class ChaosStatistics:
    """Counts for one :class:`ChaosTransport`: frames seen per direction and actions per kind."""

    sent: int
    received: int
    delayed: int
    dropped: int
    truncated: int
    garbled: int
    duplicated: int
    disconnected: bool


@attrs.frozen
class _Fate:
    delay: float | None
    drop: bool
    truncate: float | None  # where to cut, as a fraction, when the frame is truncated
    garble: float | None  # where to replace a byte, as a fraction, when the frame is garbled
    garble_byte: int
    duplicate: bool


def _rng_per_direction(seed: int) -> dict[str, random.Random]:
    master = random.Random(seed)
    return {
        "receive": random.Random(master.getrandbits(64)),
        "send": random.Random(master.getrandbits(64)),
    }


@attrs.define(eq=False)
class ChaosTransport:
    """A :class:`~trio_mcp.transports.Transport` that mistreats frames of ``inner`` following
    ``policy`` (see the module docstring), and records what it did in :attr:`actions`. Open one
    with :func:`open_chaos_transport` (or through :func:`chaos_transport_factory`).

    Received frames come from the inner transport into the chaos transport's own channel, and
    its **pump** task (one of its I/O tasks) hands each survivor, in order, to the sink it was
    opened with; sent frames are mistreated in the sender's task (a delayed send holds back its
    caller, and :meth:`send_nowait` then declines with ``trio.WouldBlock``). A chaos disconnect
    closes the inner transport and ends the connection with a :class:`TransportClosed` that says
    so; sends raise it after that.

    It is a :class:`~trio_mcp.transports.ProcessTransport` (a ``pid``, a ``stderr_tail()``)
    exactly when the inner transport is one, so a runtime reports the pid of a stdio server
    behind it, and none for an in-memory one.
    """

    inner: Transport
    policy: ChaosPolicy
    _sink: FrameSink
    _upstream: ByteChannel[Inbound]
    _own_inbox: ByteChannel[Inbound] | None = None
    #: Everything done so far, in the order it was done.
    actions: list[ChaosAction] = attrs.field(factory=list, init=False)
    _rngs: dict[str, random.Random] = attrs.field(init=False)
    _counts: dict[str, int] = attrs.field(factory=lambda: {"send": 0, "receive": 0}, init=False)
    _seen: int = attrs.field(default=0, init=False)
    _disconnected: bool = attrs.field(default=False, init=False)
    _closed: bool = attrs.field(default=False, init=False)
    _ended: bool = attrs.field(default=False, init=False)
    _reader: InboxReader | None = attrs.field(default=None, init=False)
    #: The nursery of the chaos transport's own tasks (the pump, closing the inner transport).
    _tasks: trio.Nursery | None = attrs.field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        self._rngs = _rng_per_direction(self.policy.seed)
        if self._own_inbox is not None:
            self._reader = InboxReader(self._own_inbox)

    @property
    def info(self) -> TransportInfo:
        """The inner transport's kind, with the chaos seed in the detail."""
        inner = self.inner.info
        return TransportInfo(
            kind=inner.kind, detail=f"{inner.detail} (chaos seed {self.policy.seed})"
        )

    @property
    def disconnected(self) -> bool:
        """Whether ``disconnect_after_frames`` has closed the inner transport."""
        return self._disconnected

    def statistics(self) -> ChaosStatistics:
        """A snapshot of the counters. Never raises."""
        kinds = [action.kind for action in self.actions]
        return ChaosStatistics(
            sent=self._counts["send"],
            received=self._counts["receive"],
            delayed=kinds.count("delay"),
            dropped=kinds.count("drop"),
            truncated=kinds.count("truncate"),
            garbled=kinds.count("garble"),
            duplicated=kinds.count("duplicate"),
            disconnected=self._disconnected,
        )

    # ------------------------------------------------------------------ the contract

    def send_nowait(self, frame: bytes, request_id: RequestId | None = None) -> None:
        """Send ``frame`` through the inner transport now (no chaos on sends), or raise
        ``trio.WouldBlock`` when the inner outbox is full or chaos applies to sends (then
        :meth:`send` carries it)."""
        self._check_usable("send")
        if "send" not in self.policy.directions:
            with self._translate("send"):
                self.inner.send_nowait(frame, request_id)
            return
        # With chaos on sends every frame goes through send(): a fate is drawn once per frame
        # there, whether the inner outbox has room or not, so runs stay reproducible.
        raise trio.WouldBlock

    async def send(self, frame: bytes, request_id: RequestId | None = None) -> None:
        """Send ``frame`` through the inner transport, unless chaos decides otherwise.

        Raises :class:`TransportClosed` like the inner transport, after :meth:`aclose` and after a
        chaos disconnect.
        """
        try:
            self._check_usable("send")
        except TransportClosed:
            await trio.lowlevel.checkpoint()
            raise
        if "send" not in self.policy.directions:
            with self._translate("send"):
                await self.inner.send(frame, request_id)
            return
        index, fate = self._next_fate("send")
        try:
            if fate.delay is not None:
                self._record(index, "send", "delay", fate.delay)
                await trio.sleep(fate.delay)
            for copy in self._mangle(index, "send", frame, fate):
                with self._translate("send"):
                    await self.inner.send(copy, request_id)
        finally:
            self._after_frame("send")

    async def receive(self) -> bytes:
        """The next frame that survives chaos (only for a transport opened without a sink).
        Raises :class:`TransportClosed` like the inner transport, after :meth:`aclose` and after
        a chaos disconnect."""
        if self._reader is None:
            raise RuntimeError("this transport's frames go to the sink it was opened with")
        return await self._reader.receive()

    async def aclose(self) -> None:
        """Close the inner transport, and end the connection for the sink. Idempotent."""
        self._closed = True
        self._end(TransportClosed("the chaos transport was closed on this side"))
        await self.inner.aclose()

    # ------------------------------------------------------------------ the pump

    async def _pump(self) -> None:
        """The inner transport's items -> chaos -> the sink, in order."""
        upstream = self._upstream
        while True:
            try:
                item = await upstream.receive()
            except (trio.EndOfChannel, trio.ClosedResourceError):
                self._end(TransportClosed("the connection ended"))
                return
            if isinstance(item, ConnectionEnded):
                error = item.error
                if self._disconnected:
                    exc = self._disconnect_error("receive")
                    exc.__cause__ = error
                    error = exc
                await self._put(ConnectionEnded(error=error, unsent=item.unsent))
                self._ended = True
                self._sink.close()
                return
            if not isinstance(item, bytes) or "receive" not in self.policy.directions:
                await self._put(item)
                continue
            if self._limit_reached():  # disconnect_after_frames=0: not even the first frame
                self._disconnect("receive")
            if self._disconnected:
                continue  # the inner transport is being closed: nothing more gets through
            index, fate = self._next_fate("receive")
            if fate.delay is not None:
                self._record(index, "receive", "delay", fate.delay)
                await trio.sleep(fate.delay)
            for frame in self._mangle(index, "receive", item, fate):
                await self._put(frame)
            self._after_frame("receive")

    async def _put(self, item: Inbound) -> None:
        if self._ended:
            return
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await self._sink.send(item, item_size(item))

    def _end(self, error: McpError) -> None:
        """Put the end into the sink (when it has room) and close it. Sync, once."""
        if self._ended:
            return
        self._ended = True
        with contextlib.suppress(
            trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError
        ):
            self._sink.send_nowait(ConnectionEnded(error=error))
        self._sink.close()

    # ------------------------------------------------------------------ internals

    def _next_fate(self, direction: str) -> tuple[int, _Fate]:
        """Draw the fate of the next frame of ``direction``: always eight draws per frame."""
        index = self._counts[direction]
        self._counts[direction] = index + 1
        rng = self._rngs[direction]
        policy = self.policy
        delay_u = rng.random()
        drop_hit = rng.random()
        truncate_hit, truncate_u = rng.random(), rng.random()
        garble_hit, garble_u, garble_b = rng.random(), rng.random(), rng.random()
        duplicate_hit = rng.random()
        delay: float | None = None
        if policy.delay is not None:
            low, high = policy.delay
            delay = low + (high - low) * delay_u
        return index, _Fate(
            delay=delay,
            drop=drop_hit < policy.drop,
            truncate=truncate_u if truncate_hit < policy.truncate else None,
            garble=garble_u if garble_hit < policy.garble else None,
            garble_byte=_INVALID_JSON_BYTES[int(garble_b * len(_INVALID_JSON_BYTES))],
            duplicate=duplicate_hit < policy.duplicate,
        )

    def _mangle(self, index: int, direction: str, frame: bytes, fate: _Fate) -> list[bytes]:
        """Carry out a fate (but its delay); return the frames to deliver (none, one, two)."""
        if fate.drop:
            self._record(index, direction, "drop")
            return []
        if fate.truncate is not None:
            keep = 1 + int(fate.truncate * (len(frame) - 1)) if len(frame) >= 2 else 0
            frame = frame[:keep]
            self._record(index, direction, "truncate", keep)
        if fate.garble is not None:
            offset = int(fate.garble * len(frame))
            frame = frame[:offset] + bytes([fate.garble_byte]) + frame[offset + 1 :]
            self._record(index, direction, "garble", offset)
        if fate.duplicate:
            self._record(index, direction, "duplicate")
            return [frame, frame]
        return [frame]

    def _record(
        self, index: int, direction: str, kind: ActionKind, value: float | None = None
    ) -> None:
        self.actions.append(ChaosAction(index=index, direction=direction, kind=kind, value=value))

    def _limit_reached(self) -> bool:
        limit = self.policy.disconnect_after_frames
        return limit is not None and self._seen >= limit and not self._disconnected

    def _after_frame(self, direction: str) -> None:
        self._seen += 1
        if self._limit_reached():
            self._disconnect(direction)

    def _check_usable(self, direction: str) -> None:
        if self._limit_reached() and not self._closed:
            self._disconnect(direction)
        if self._closed:
            raise TransportClosed(
                f"cannot {direction}: the chaos transport was closed on this side; "
                "open a new connection"
            )
        if self._disconnected:
            raise self._disconnect_error(direction)

    def _disconnect(self, direction: str) -> None:
        """Cut the link: from now on nothing gets through, the end says why, and the inner
        transport is closed (by a task of the chaos transport's own). Sync."""
        self._disconnected = True
        self._record(self._seen, direction, "disconnect", self._seen)
        self._end(self._disconnect_error("receive"))
        if self._tasks is not None:
            self._tasks.start_soon(self._close_inner)

    async def _close_inner(self) -> None:
        with trio.CancelScope(shield=True):
            await self.inner.aclose()

    def _disconnect_error(self, direction: str) -> TransportClosed:
        return TransportClosed(
            f"cannot {direction}: the chaos transport disconnected after "
            f"{self.policy.disconnect_after_frames} frames (disconnect_after_frames)"
        )

    @contextmanager
    def _translate(self, direction: str) -> Iterator[None]:
        """A failure of the inner transport caused by our own disconnect says so."""
        try:
            yield
        except TransportClosed as exc:
            if self._disconnected and not self._closed:
                raise self._disconnect_error(direction) from exc
            raise


@attrs.define(eq=False)
class _ChaosProcessTransport(ChaosTransport):
    """A :class:`ChaosTransport` over a child process's transport (stdio), and so a
    :class:`ProcessTransport` itself: the inner transport's pid and stderr tail."""

    _process: ProcessTransport = attrs.field(kw_only=True)

    @property
    def pid(self) -> int:
        """The server's process id."""
        return self._process.pid

    def stderr_tail(self) -> tuple[str, ...]:
        """The last lines the server wrote to stderr, oldest first."""
        return self._process.stderr_tail()


@asynccontextmanager
async def open_chaos_transport(
    factory: TransportFactory, policy: ChaosPolicy, sink: FrameSink | None = None
) -> AsyncIterator[ChaosTransport]:
    """Open ``factory``'s transport behind a :class:`ChaosTransport` following ``policy``, whose
    surviving frames go into ``sink`` (or, without one, to its own inbox, read with
    ``receive()``). Leaving the block closes both."""
    upstream = open_inbox()
    own = None
    if sink is None:
        own = open_inbox()
        sink = own
    async with factory(upstream) as inner, trio.open_nursery() as nursery:
        chaos = (
            _ChaosProcessTransport(inner, policy, sink, upstream, own, process=inner)
            if isinstance(inner, ProcessTransport)
            else ChaosTransport(inner, policy, sink, upstream, own)
        )
        chaos._tasks = nursery
        nursery.start_soon(chaos._pump)
        try:
            yield chaos
        finally:
            with trio.CancelScope(shield=True):
                await chaos.aclose()
            nursery.cancel_scope.cancel()


@attrs.define(eq=False)
class ChaosTransportFactory:
    """A transport factory that wraps the transports of ``factory`` in
    :class:`ChaosTransport`. Call it with the sink of a connection to get an async context
    manager, as ``ServerConfig(type=TransportKind.CUSTOM, transport_factory=...)`` does.

    Connection number ``n`` (from 0) gets ``policies[n]`` (``None``: no chaos); the connections
    past the end of ``policies`` get ``then`` with its seed plus 0, 1, 2... (a fresh but
    reproducible seed each, so a fate that breaks the handshake does not repeat forever). Every
    wrapper made is kept in :attr:`transports`, in order, so a test can read each one's
    :attr:`ChaosTransport.actions`. Build it with :func:`chaos_transport_factory`.
    """

    factory: TransportFactory
    policies: tuple[ChaosPolicy | None, ...] = ()
    then: ChaosPolicy | None = None
    #: The chaos wrappers made so far, one per connection that got a policy.
    transports: list[ChaosTransport] = attrs.field(factory=list, init=False)
    #: How many connections were opened so far, with and without chaos.
    connections: int = attrs.field(default=0, init=False)

    def __call__(self, sink: FrameSink) -> AbstractAsyncContextManager[Transport]:
        """One connection: an async context manager yielding the (wrapped) transport."""
        return self._open(sink)

    @asynccontextmanager
    async def _open(self, sink: FrameSink) -> AsyncIterator[Transport]:
        number = self.connections
        self.connections += 1
        if number < len(self.policies):
            policy = self.policies[number]
        elif self.then is not None:
            # Each repeated connection gets its own seed, so one unlucky fate (the handshake
            # lost) does not repeat forever; still deterministic.
            policy = attrs.evolve(self.then, seed=self.then.seed + number - len(self.policies))
        else:
            policy = None
        if policy is None:
            async with self.factory(sink) as inner:
                yield inner
            return
        async with open_chaos_transport(self.factory, policy, sink) as chaos:
            self.transports.append(chaos)
            yield chaos


def chaos_transport_factory(
    factory: TransportFactory,
    policy: ChaosPolicy | Sequence[ChaosPolicy | None],
) -> ChaosTransportFactory:
    """Wrap a transport factory (a callable taking a sink and returning an async context
    manager that yields a transport) so that its transports go through a
    :class:`ChaosTransport`.

    A single ``policy`` applies to every connection: connection ``n`` (from 0) uses it with
    seed ``policy.seed + n``, so runs are reproducible while each reconnection meets new fates.
    A sequence gives one policy per connection
    in turn, ``None`` meaning no chaos, and the connections beyond it get none: use that to
    break the first connections and then let the runtime recover. Raises :class:`TypeError`
    when ``policy`` is neither.
    """
    if isinstance(policy, ChaosPolicy):
        return ChaosTransportFactory(factory, (), policy)
    if not isinstance(policy, Sequence):
        raise TypeError(
            "chaos_transport_factory() takes a ChaosPolicy or a sequence of ChaosPolicy or None, "
            f"got {policy!r}"
        )
    items = tuple(policy)
    for item in items:
        if item is not None and not isinstance(item, ChaosPolicy):
            raise TypeError(
                "chaos_transport_factory() takes a ChaosPolicy or a sequence of ChaosPolicy or "
                f"None, got an item {item!r}"
            )
    return ChaosTransportFactory(factory, items, None)
