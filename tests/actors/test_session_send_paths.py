"""How a session's requests leave: the caller puts its Expect into the connection's mailbox,
then its frame into the transport's outbox, then waits. There is no faster path any more: the
caller never writes itself, the transport's writer does (batching under load).

A real :class:`Session` over a FakeServer memory connection (on trio's virtual clock) or over
the fake server as a stdio subprocess (the real clock, under ``trio.fail_after``). Some tests
put a thin transport around the fake's client end, to answer at once, to refuse, or to hold
the frames back as a full outbox does."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from trio_mcp.actors.config._config import RuntimeConfig, ServerConfig
from trio_mcp.actors.runtime._callbacks import HostCallbacks
from trio_mcp.actors.runtime._pending import ConnectionLost, PendingItem
from trio_mcp.actors.runtime._session import Listing, Relisted, Session
from trio_mcp.actors.testing._fakes import FakeServer, FakeTool
from trio_mcp.protocol import CallTimeout, ServerDisconnected
from trio_mcp.protocol._errors import HttpStatusError, McpError, SessionExpired, TransportClosed
from trio_mcp.protocol._jsonrpc import RequestId
from trio_mcp.transports._base import (
    ConnectionEnded,
    FrameSink,
    RequestFailed,
    ResumableTransport,
    SessionExpiredNotice,
    Transport,
    TransportInfo,
    item_size,
)
from trio_mcp.transports._channel import ByteChannel
from trio_mcp.transports.stdio._stdio import StdioParameters, StdioTransport, open_stdio_transport

Clock = trio.testing.MockClock
Factory = Callable[[FrameSink], AbstractAsyncContextManager[Transport]]


# --------------------------------------------------------------------------- the harness


@attrs.define
class Events:
    events: list[Any] = attrs.Factory(list)

    def publish(self, event: Any, /) -> None:
        self.events.append(event)


@attrs.define
class Supervisor:
    """The supervisor's mailbox, as the session reaches it."""

    items: list[Relisted | ConnectionLost] = attrs.Factory(list)
    #: when each item arrived (trio clock)
    at: list[float] = attrs.Factory(list)

    def send_nowait(self, value: Relisted | ConnectionLost, /) -> None:
        self.items.append(value)
        self.at.append(trio.current_time())

    async def send(self, value: Relisted | ConnectionLost, /) -> None:
        await trio.lowlevel.checkpoint()
        self.send_nowait(value)


@attrs.define
class Connection:
    session: Session
    transport: Transport
    mailbox: ByteChannel[PendingItem]
    supervisor: Supervisor
    ended: list[McpError]


@asynccontextmanager
async def open_session(
    factory: Factory, config: ServerConfig, *, mailbox_bytes: int = 256 * 1024
) -> AsyncIterator[Connection]:
    """A session over ``factory``'s transport, past its handshake; cancelled at the end."""
    mailbox = ByteChannel[PendingItem](max_bytes=mailbox_bytes)
    supervisor = Supervisor()
    ended: list[McpError] = []
    async with factory(mailbox) as transport:
        session = Session(
            config=config,
            runtime=RuntimeConfig(),
            generation=1,
            transport=transport,
            mailbox=mailbox,
            callbacks=HostCallbacks(),
            events=Events(),
            supervisor=supervisor,
        )

        async def run(*, task_status: trio.TaskStatus[Listing] = trio.TASK_STATUS_IGNORED) -> None:
            try:
                await session.run(task_status=task_status)
            except* McpError as group:  # as the supervisor takes it
                ended.extend(e for e in group.exceptions if isinstance(e, McpError))

        async with trio.open_nursery() as nursery:
            await nursery.start(run)
            yield Connection(session, transport, mailbox, supervisor, ended)
            nursery.cancel_scope.cancel()


@attrs.define(eq=False)
class Around:
    """A transport around another one. ``answer_calls``: a tools/call frame is answered at once,
    from inside send (the answer is in the mailbox before the send returns) and never reaches
    the server. ``held``: send_nowait declines and send waits for the gate, as with a full
    outbox. ``broken``: every send raises it. ``fail_lists``: a tools/list frame never reaches
    the server, the transport fails that request alone with it (as HTTP does with an error
    status)."""

    inner: Transport
    mailbox: FrameSink
    answer_calls: bool = False
    held: bool = False
    broken: TransportClosed | None = None
    fail_lists: McpError | None = None
    gate: trio.Event = attrs.Factory(trio.Event)
    declined: int = 0

    @property
    def info(self) -> TransportInfo:
        return self.inner.info

    def _answered(self, frame: bytes, request_id: RequestId | None) -> bool:
        """Answer a tools/call frame here and now (``answer_calls``), or fail a tools/list
        request (``fail_lists``); say whether it was."""
        message = json.loads(frame)
        if self.fail_lists is not None and message.get("method") == "tools/list":
            failed = RequestFailed(request_id=message["id"], error=self.fail_lists, sent=True)
            self.mailbox.send_nowait(failed, item_size(failed))
            return True
        if not (self.answer_calls and message.get("method") == "tools/call"):
            return False
        answer = {"jsonrpc": "2.0", "id": message["id"], "result": {"content": []}}
        data = json.dumps(answer).encode()
        self.mailbox.send_nowait(data, len(data))
        return True

    def send_nowait(self, frame: bytes, request_id: RequestId | None = None) -> None:
        if self.broken is not None:
            raise self.broken
        if self.held:
            self.declined += 1
            raise trio.WouldBlock
        if self._answered(frame, request_id):
            return
        try:
            self.inner.send_nowait(frame, request_id)
        except trio.WouldBlock:
            self.declined += 1
            raise

    async def send(self, frame: bytes, request_id: RequestId | None = None) -> None:
        if self.broken is not None:
            await trio.lowlevel.checkpoint()
            raise self.broken
        if self.held:
            await self.gate.wait()
        if self._answered(frame, request_id):
            await trio.lowlevel.checkpoint()
            return
        await self.inner.send(frame, request_id)

    async def receive(self) -> bytes:
        return await self.inner.receive()

    async def aclose(self) -> None:
        await self.inner.aclose()


def around(fake: FakeServer, found: list[Around], **options: Any) -> Factory:
    @asynccontextmanager
    async def factory(sink: FrameSink) -> AsyncIterator[Transport]:
        async with fake.connect(sink) as inner:
            transport = Around(inner, sink, **options)
            found.append(transport)
            yield transport

    return factory


def config(fake: FakeServer, **options: Any) -> ServerConfig:
    return ServerConfig(name=fake.name, command="unused", **options)


def fake_server(**options: Any) -> FakeServer:
    return FakeServer(name="s", tools=[FakeTool("t", result="done"), FakeTool("echo")], **options)


def tool_calls(fake: FakeServer) -> list[Any]:
    return [params for method, params in fake.requests if method == "tools/call"]


# --------------------------------------------------------------------------- order


async def test_the_handshake_frames_leave_in_order(autojump_clock: Clock) -> None:
    fake = fake_server()
    async with open_session(fake.connect, config(fake)) as conn:
        await conn.session.call_tool("t", {}, timeout=5)
    assert [m for m, _ in fake.requests] == [
        "server/discover",  # the probe, which the legacy fake refuses
        "initialize",
        "tools/list",
        "tools/call",
    ]
    assert [m for m, _ in fake.notifications] == ["notifications/initialized"]


async def test_an_answer_can_never_overtake_its_expect(autojump_clock: Clock) -> None:
    # The transport puts the answer into the mailbox from inside send_nowait, before the frame
    # even "left": the Expect must already be there, ahead of it.
    fake = fake_server()
    found: list[Around] = []
    async with open_session(around(fake, found, answer_calls=True), config(fake)) as conn:
        for _ in range(3):
            result = await conn.session.call_tool("t", {}, timeout=5)
            assert result.content == ()
        assert trio.current_time() == 0.0
        assert conn.session.statistics().outstanding == 0
    assert tool_calls(fake) == []  # answered by the transport itself


async def test_an_answer_given_while_the_caller_waited_for_room_is_not_lost(
    autojump_clock: Clock,
) -> None:
    fake = fake_server()
    found: list[Around] = []
    async with open_session(around(fake, found, answer_calls=True), config(fake)) as conn:
        found[0].held = True  # send_nowait declines: the caller waits in send
        got: list[Any] = []
        async with trio.open_nursery() as nursery:

            async def call() -> None:
                got.append(await conn.session.call_tool("t", {}, timeout=5))

            nursery.start_soon(call)
            await trio.sleep(1)
            assert got == []
            found[0].gate.set()
        assert len(got) == 1
        assert trio.current_time() == 1.0
        assert found[0].declined == 1


# --------------------------------------------------------------------------- load


async def test_many_calls_in_flight_all_arrive_and_are_answered(autojump_clock: Clock) -> None:
    fake = fake_server()
    async with open_session(fake.connect, config(fake)) as conn:
        results: dict[int, str] = {}
        async with trio.open_nursery() as nursery:

            async def call(i: int) -> None:
                result = await conn.session.call_tool("echo", {"i": i}, timeout=5)
                results[i] = result.content[0].text  # type: ignore[union-attr]

            for i in range(100):
                nursery.start_soon(call, i)
        assert results == {i: json.dumps({"i": i}, separators=(",", ":")) for i in range(100)}
        assert trio.current_time() == 0.0
    assert sorted(p["arguments"]["i"] for p in tool_calls(fake)) == list(range(100))


async def test_a_full_transport_makes_callers_wait_and_nothing_is_lost(
    autojump_clock: Clock,
) -> None:
    # The fake's inbox holds a few hundred bytes: most callers find no room, wait, and go on.
    fake = fake_server(max_bytes=300)
    found: list[Around] = []
    async with open_session(around(fake, found), config(fake)) as conn:
        results: dict[int, str] = {}

        async def call(i: int) -> None:
            result = await conn.session.call_tool("echo", {"i": i}, timeout=5)
            results[i] = result.content[0].text  # type: ignore[union-attr]

        async with trio.open_nursery() as nursery:
            for i in range(50):
                nursery.start_soon(call, i)
        assert len(results) == 50
        assert all(results[i] == json.dumps({"i": i}, separators=(",", ":")) for i in range(50))
        assert found[0].declined > 0  # some callers found the transport full and waited
        assert trio.current_time() == 0.0
        assert conn.session.statistics().outstanding == 0
    assert sorted(p["arguments"]["i"] for p in tool_calls(fake)) == list(range(50))


async def test_the_stdio_writer_batches_many_calls_in_flight() -> None:
    spec = {"name": "s", "tools": [{"name": "echo", "kind": "echo"}]}
    params = StdioParameters(
        command=sys.executable,
        args=("-m", "trio_mcp.actors.testing", "--spec-json", json.dumps(spec)),
    )
    opened: list[StdioTransport] = []

    @asynccontextmanager
    async def stdio(sink: FrameSink) -> AsyncIterator[Transport]:
        async with open_stdio_transport(params, sink) as transport:
            opened.append(transport)
            yield transport

    server = ServerConfig(name="s", command=sys.executable)
    with trio.fail_after(30):
        async with open_session(stdio, server) as conn:
            results: dict[int, str] = {}
            async with trio.open_nursery() as nursery:

                async def call(i: int) -> None:
                    result = await conn.session.call_tool("echo", {"i": i}, timeout=20)
                    results[i] = result.content[0].text  # type: ignore[union-attr]

                for i in range(200):
                    nursery.start_soon(call, i)
            assert results == {i: json.dumps({"i": i}, separators=(",", ":")) for i in range(200)}
            stats = opened[0].statistics()
            assert stats.frames_sent >= 200 + 3  # initialize, initialized, tools/list
            assert stats.write_batches < stats.frames_sent


# --------------------------------------------------------------------------- never sent


async def test_a_caller_cancelled_before_its_frame_left_is_forgotten(autojump_clock: Clock) -> None:
    fake = fake_server()
    found: list[Around] = []
    async with open_session(around(fake, found), config(fake)) as conn:
        found[0].held = True
        with trio.move_on_after(3) as scope:
            await conn.session.call_tool("t", {}, timeout=10)
        assert scope.cancelled_caught
        await trio.testing.wait_all_tasks_blocked()
        assert conn.session.statistics().outstanding == 0  # the table forgot it
        found[0].held = False
        found[0].gate.set()
        assert (await conn.session.call_tool("t", {}, timeout=10)).content
    assert len(tool_calls(fake)) == 1  # the cancelled one never reached the server
    assert fake.cancellations == []  # and it is not cancelled there: it was never sent


async def test_a_connection_ending_before_the_frame_left_says_safe_to_retry(
    autojump_clock: Clock,
) -> None:
    fake = fake_server()
    found: list[Around] = []
    async with open_session(around(fake, found), config(fake)) as conn:
        found[0].held = True
        failures: list[BaseException] = []
        async with trio.open_nursery() as nursery:

            async def call() -> None:
                try:
                    await conn.session.call_tool("t", {}, timeout=10)
                except ServerDisconnected as exc:
                    failures.append(exc)

            nursery.start_soon(call)
            await trio.sleep(1)
            await fake.disconnect()  # the connection ends while the frame waits for room
            await trio.testing.wait_all_tasks_blocked()
            found[0].gate.set()
        assert len(failures) == 1
        failure = failures[0]
        assert isinstance(failure, ServerDisconnected)
        assert failure.sent is False
        assert "before tools/call was sent" in str(failure)
        assert "safe to retry" in str(failure)
        assert trio.current_time() == 1.0
        assert len(conn.ended) == 1  # the session ended with the connection
    assert tool_calls(fake) == []


async def test_a_transport_that_refuses_the_frame_fails_the_call_at_once(
    autojump_clock: Clock,
) -> None:
    fake = fake_server()
    found: list[Around] = []
    async with open_session(around(fake, found), config(fake)) as conn:
        found[0].broken = TransportClosed("the pipe broke")
        with pytest.raises(ServerDisconnected) as info:
            await conn.session.call_tool("t", {}, timeout=10)
        assert info.value.sent is False
        assert "the pipe broke" in str(info.value)
        assert isinstance(info.value.__cause__, TransportClosed)
        assert trio.current_time() == 0.0
        await trio.testing.wait_all_tasks_blocked()
        assert conn.session.statistics().outstanding == 0
    assert fake.cancellations == []


async def test_a_call_after_the_end_arrived_fails_as_unsent_and_lets_the_table_see_it(
    autojump_clock: Clock,
) -> None:
    # The transport has put its end into the mailbox, the table has not taken it yet: a call
    # fails at once (safe to retry) and is a checkpoint, so a caller retrying in a loop that
    # never waits otherwise lets the table end the session (it once kept READY forever).
    fake = fake_server()
    async with open_session(fake.connect, config(fake)) as conn:
        conn.mailbox.send_nowait(ConnectionEnded(error=TransportClosed("cut")))
        conn.mailbox.close()
        failures = 0
        while not conn.session.closed:
            with trio.testing.assert_checkpoints(), pytest.raises(ServerDisconnected) as info:
                await conn.session.call_tool("t", {}, timeout=10)
            assert info.value.sent is False
            failures += 1
            assert failures < 5
        await trio.testing.wait_all_tasks_blocked()
        assert [str(e) for e in conn.ended] == ["cut"]
        assert conn.supervisor.items and isinstance(conn.supervisor.items[-1], ConnectionLost)
    assert tool_calls(fake) == []


# --------------------------------------------------------------------------- given up after sending


async def test_a_caller_that_gives_up_after_sending_tells_the_server(autojump_clock: Clock) -> None:
    fake = fake_server(hang={"tools/call"})
    async with open_session(fake.connect, config(fake)) as conn:
        with trio.move_on_after(3) as scope:
            await conn.session.call_tool("t", {}, timeout=10)
        assert scope.cancelled_caught
        await trio.testing.wait_all_tasks_blocked()
        assert conn.session.statistics().outstanding == 0
    (call,) = tool_calls(fake)
    assert call["name"] == "t"
    assert len(fake.cancellations) == 1
    cancelled = [p for m, p in fake.notifications if m == "notifications/cancelled"]
    assert len(cancelled) == 1
    params = cancelled[0]
    assert params is not None and params["requestId"] == fake.cancellations[0]
    assert params["reason"] == "the client stopped waiting"


async def test_a_timed_out_call_tells_the_server(autojump_clock: Clock) -> None:
    fake = fake_server(hang={"tools/call"})
    async with open_session(fake.connect, config(fake)) as conn:
        with pytest.raises(CallTimeout) as info:
            await conn.session.call_tool("t", {}, timeout=2)
        assert trio.current_time() == 2.0
        assert info.value.request_id is not None
        await trio.testing.wait_all_tasks_blocked()
        assert fake.cancellations == [info.value.request_id]


# --------------------------------------------------------------------------- session expiry


async def test_a_session_expiry_on_a_transport_that_cannot_resume_ends_the_connection(
    autojump_clock: Clock,
) -> None:
    # Only a ResumableTransport can hold its frames while a new session is initialized: on any
    # other the session has no control loop, and its table ends the connection at once, telling
    # the supervisor (which reconnects). tests/actors/test_session_expiry.py: the whole runtime.
    fake = fake_server()
    async with open_session(fake.connect, config(fake)) as conn:
        assert not isinstance(conn.transport, ResumableTransport)
        expired = SessionExpired("HTTP 404: the session is gone")
        conn.mailbox.send_nowait(SessionExpiredNotice(error=expired))
        await trio.testing.wait_all_tasks_blocked()
        assert [str(e) for e in conn.ended] == ["HTTP 404: the session is gone; reconnecting"]
        assert isinstance(conn.ended[0], TransportClosed)
        assert conn.ended[0].__cause__ is expired
        assert conn.session.closed
        assert [type(item) for item in conn.supervisor.items] == [ConnectionLost]
        with pytest.raises(ServerDisconnected):
            await conn.session.call_tool("t", {}, timeout=5)


# --------------------------------------------------------------------------- re-listing


async def test_a_relisting_the_transport_fails_leaves_the_session_up(
    autojump_clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    # On HTTP a tools/list answered 503 is a RequestFailed for that request alone: the
    # re-lister logs it and waits for the next change; it once tore the session down.
    fake = fake_server()
    found: list[Around] = []
    debounce = RuntimeConfig().list_changed_debounce
    async with open_session(around(fake, found), config(fake)) as conn:
        found[0].fail_lists = HttpStatusError("HTTP 503 Service Unavailable", status=503)
        with caplog.at_level(logging.WARNING, logger="trio_mcp.server.s"):
            await fake.emit_list_changed()
            await trio.sleep(debounce + 1)
        assert "re-listing tools failed: server 's': HTTP 503 Service Unavailable" in caplog.text
        assert conn.ended == [] and not conn.session.closed
        assert conn.supervisor.items == []
        found[0].fail_lists = None
        await fake.emit_list_changed()
        await trio.sleep(debounce + 1)
        assert [type(item) for item in conn.supervisor.items] == [Relisted]
        assert (await conn.session.call_tool("t", {}, timeout=5)).content
        assert conn.ended == []


async def test_list_changed_notifications_are_debounced(autojump_clock: Clock) -> None:
    # One re-listing once the notifications have been quiet for list_changed_debounce: each
    # new notification starts the quiet time again.
    fake = fake_server()
    debounce = RuntimeConfig().list_changed_debounce
    assert debounce == 0.25
    async with open_session(fake.connect, config(fake)) as conn:
        for at in (1.0, 1.1, 1.2):
            await trio.sleep_until(at)
            await fake.emit_list_changed()
        await trio.sleep_until(3.0)
        await fake.emit_list_changed()
        await trio.sleep_until(5.0)
        assert [type(item) for item in conn.supervisor.items] == [Relisted, Relisted]
        assert conn.supervisor.at == [pytest.approx(1.45), pytest.approx(3.25)]
    assert [m for m, _ in fake.requests].count("tools/list") == 3  # the handshake's, and two
