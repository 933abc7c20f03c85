"""A memory channel bounded in bytes, with one receiver: the mailbox of an actor that takes
frames from a transport.

trio's memory channels are bounded in items; a transport that hands frames up must be bounded in
bytes instead (64 frames of 16 MiB are a gigabyte). :class:`ByteChannel` holds items with a size
each and refuses new ones while the sizes it holds reach ``max_bytes``; an item bigger than the
whole budget is still taken when the channel is empty, so one large frame always gets through.

It has exactly one receiving task at a time (an actor's mailbox) and any number of senders.
Everything the receiving actor gets, it gets through :meth:`receive` (which waits) and
:meth:`receive_nowait` (which never yields): an actor drains every ready item per wake-up with
the second.

Ends, in the manner of trio's channels:

- :meth:`close` (the sending side is done): further sends raise ``trio.ClosedResourceError``; the
  receiver takes what is left, then gets ``trio.EndOfChannel``;
- :meth:`close_receiver` (nobody will receive): what is held is dropped, senders (also those
  waiting for room) get ``trio.BrokenResourceError``, the receiver ``trio.ClosedResourceError``.

Nothing here awaits inside a change of the channel's state: a send that finds room puts its item
and wakes the receiver synchronously.
"""

from __future__ import annotations

from collections import deque
from typing import Final, Generic, TypeVar

import attrs
import outcome
import trio

__all__ = ["DEFAULT_MAILBOX_BYTES", "ITEM_OVERHEAD", "ByteChannel", "ByteChannelStatistics"]

T = TypeVar("T")

#: The default budget of a mailbox that takes frames (256 KiB).
DEFAULT_MAILBOX_BYTES: Final = 256 * 1024
#: What an item that is not a frame counts for (a message between actors, an event).
ITEM_OVERHEAD: Final = 64


@attrs.frozen(kw_only=True)
class ByteChannelStatistics:
    """A snapshot: ``items`` and ``bytes`` held, ``max_bytes``, senders waiting for room, whether
    a receiver waits, and whether either side is closed."""

    items: int
    bytes: int
    max_bytes: int
    senders_waiting: int
    receiver_waiting: bool
    closed: bool
    receiver_closed: bool


@attrs.define(eq=False)
class _Sender(Generic[T]):
    """A sender waiting for room, with its item."""

    task: trio.lowlevel.Task
    item: T
    size: int


@attrs.define(eq=False)
class ByteChannel(Generic[T]):
    """A FIFO of items, bounded by the sum of their sizes. See the module docstring.

    ``size`` (default :data:`ITEM_OVERHEAD`) is what an item counts for; a frame counts its
    length. Senders that find no room wait in line with their items: when the receiver takes
    items, the waiting senders' items move into the channel in their order, as far as they fit
    (as trio's memory channels hand items over), so nobody overtakes anybody.
    """

    max_bytes: int = DEFAULT_MAILBOX_BYTES
    _items: deque[tuple[T, int]] = attrs.field(factory=deque, init=False)
    _held: int = attrs.field(default=0, init=False)
    _receiver: trio.lowlevel.Task | None = attrs.field(default=None, init=False)
    _receiving: bool = attrs.field(default=False, init=False)
    _senders: deque[_Sender[T]] = attrs.field(factory=deque, init=False)
    _closed: bool = attrs.field(default=False, init=False)
    _receiver_closed: bool = attrs.field(default=False, init=False)

    def __attrs_post_init__(self) -> None:
        if isinstance(self.max_bytes, bool) or not isinstance(self.max_bytes, int):
            raise TypeError(f"max_bytes must be an int, got {self.max_bytes!r}")
        if self.max_bytes < 1:
            raise ValueError(f"max_bytes must be at least 1, got {self.max_bytes}")

    # ------------------------------------------------------------------ sending

    def _has_room(self, size: int) -> bool:
        return not self._items or self._held + size <= self.max_bytes

    @property
    def room(self) -> int:
        """How many bytes of items :meth:`send_nowait` takes now, at least: 0 while senders
        wait for room or after either side was closed."""
        if self._senders or self._closed or self._receiver_closed:
            return 0
        return self.max_bytes - self._held

    def send_nowait(self, item: T, size: int = ITEM_OVERHEAD) -> None:
        """Put ``item`` now, or raise ``trio.WouldBlock`` when the channel is full (another
        sender waiting for room counts as full: items keep their order). Raises
        ``trio.ClosedResourceError`` after :meth:`close` and ``trio.BrokenResourceError`` after
        :meth:`close_receiver`."""
        self.defer_nowait(item, size)
        if self._receiver is not None:
            self._wake()

    def defer_nowait(self, item: T, size: int = ITEM_OVERHEAD) -> None:
        """:meth:`send_nowait` without waking the receiver: the item waits, in its place, until
        the receiver takes items again for another reason (the next item sent, the end, or a
        timer of its own). For an item that only matters once something else arrives, which
        saves the receiver a wake-up of its own. Raises like :meth:`send_nowait`."""
        if self._closed or self._receiver_closed:
            self._check_send()  # raises
        if self._senders or not self._has_room(size):
            # Full, so it holds items: maybe deferred ones the receiver was not woken for.
            self._wake()
            raise trio.WouldBlock
        self._items.append((item, size))
        self._held += size

    async def send(self, item: T, size: int = ITEM_OVERHEAD) -> None:
        """Put ``item``, waiting for room in line with the other waiting senders. A
        checkpoint. Raises like :meth:`send_nowait` (also when an end comes while waiting:
        then the item was not put)."""
        await trio.lowlevel.checkpoint_if_cancelled()
        try:
            self.send_nowait(item, size)
        except trio.WouldBlock:  # it woke the receiver for the items held
            pass
        else:
            await trio.lowlevel.cancel_shielded_checkpoint()
            return
        sender = _Sender(task=trio.lowlevel.current_task(), item=item, size=size)
        self._senders.append(sender)

        def abort(_: trio.lowlevel.RaiseCancelT) -> trio.lowlevel.Abort:
            self._senders.remove(sender)
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)

    def _check_send(self) -> None:
        if self._closed:
            raise trio.ClosedResourceError("the sending side of this channel was closed")
        if self._receiver_closed:
            raise trio.BrokenResourceError("nobody receives from this channel any more")

    def _wake(self) -> None:
        """Reschedule the receiver, if one waits: there is an item or an end for it."""
        task = self._receiver
        if task is not None:
            self._receiver = None
            trio.lowlevel.reschedule(task)

    def _admit(self) -> None:
        """Move the waiting senders' items in, in order, as far as they fit."""
        senders = self._senders
        while senders and self._has_room(senders[0].size):
            sender = senders.popleft()
            self._items.append((sender.item, sender.size))
            self._held += sender.size
            trio.lowlevel.reschedule(sender.task)

    def _refuse_senders(
        self, error: type[trio.ClosedResourceError | trio.BrokenResourceError]
    ) -> None:
        senders, self._senders = self._senders, deque()
        for sender in senders:
            trio.lowlevel.reschedule(
                sender.task, outcome.Error(error("the channel was closed while this send waited"))
            )

    def close(self) -> None:
        """No more items: the receiver gets what is held, then ``trio.EndOfChannel``. Senders
        still waiting for room get ``trio.ClosedResourceError`` (their items were not put).
        Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._refuse_senders(trio.ClosedResourceError)
        self._wake()

    # ------------------------------------------------------------------ receiving

    def receive_nowait(self) -> T:
        """The next item, now. Raises ``trio.WouldBlock`` when there is none yet,
        ``trio.EndOfChannel`` once the channel is closed and empty, and
        ``trio.ClosedResourceError`` after :meth:`close_receiver`."""
        if self._receiver_closed:
            raise trio.ClosedResourceError("this channel's receiver was closed")
        if self._items:
            item, size = self._items.popleft()
            self._held -= size
            if self._senders:
                self._admit()
            return item
        if self._closed:
            raise trio.EndOfChannel
        raise trio.WouldBlock

    async def receive(self) -> T:
        """The next item, waiting for one. A checkpoint. Raises like :meth:`receive_nowait`
        (never ``trio.WouldBlock``); ``RuntimeError`` if another task is receiving."""
        if self._receiving:
            raise RuntimeError("another task is already receiving from this channel")
        if self._items or self._closed or self._receiver_closed:  # no need to wait
            await trio.lowlevel.checkpoint_if_cancelled()
            item = self.receive_nowait()
            await trio.lowlevel.cancel_shielded_checkpoint()
            return item
        # Parking is the checkpoint: trio delivers a pending cancellation to a task as it
        # parks (through _abort_receive), so there is no checkpoint_if_cancelled first.
        self._receiving = True
        try:
            self._receiver = trio.lowlevel.current_task()
            await trio.lowlevel.wait_task_rescheduled(self._abort_receive)
        finally:
            self._receiving = False
        return self.receive_nowait()  # woken: an item, the end, or the receiver closed

    def _abort_receive(self, _: trio.lowlevel.RaiseCancelT) -> trio.lowlevel.Abort:
        self._receiver = None
        return trio.lowlevel.Abort.SUCCEEDED

    def close_receiver(self) -> None:
        """Nobody will receive: drop what is held; senders (also waiting ones) get
        ``trio.BrokenResourceError``. Idempotent."""
        self._receiver_closed = True
        self._items.clear()
        self._held = 0
        self._refuse_senders(trio.BrokenResourceError)
        self._wake()

    def drain(self) -> list[T]:
        """Take every item held now and every item of a sender waiting for room (those sends
        return: their items are taken), in order, without waiting: for a receiver that stops
        and must know what it never took. Never raises."""
        items = [item for item, _ in self._items]
        self._items.clear()
        self._held = 0
        senders, self._senders = self._senders, deque()
        for sender in senders:
            items.append(sender.item)
            trio.lowlevel.reschedule(sender.task)
        return items

    # ------------------------------------------------------------------ reading

    def __len__(self) -> int:
        return len(self._items)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def statistics(self) -> ByteChannelStatistics:
        """A snapshot of the channel."""
        return ByteChannelStatistics(
            items=len(self._items),
            bytes=self._held,
            max_bytes=self.max_bytes,
            senders_waiting=len(self._senders),
            receiver_waiting=self._receiver is not None,
            closed=self._closed,
            receiver_closed=self._receiver_closed,
        )
