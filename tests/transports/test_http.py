"""The Streamable HTTP transport against in-process HTTP servers on 127.0.0.1 (real sockets, the
real clock: every wait is bounded), at the wire level and under the runtime.

The transport-level tests open the transport with an inbox (``open_inbox()``) as its sink and
assert the exact items that arrive in it: frames, ``RequestFailed``, ``SessionExpiredNotice``,
and ``ConnectionEnded`` last of all."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

from tests.transports.http_fake import (
    ClientGone,
    FakeMcpHttp,
    FakeStream,
    HttpRequest,
    HttpServer,
    Reply,
    ToolCall,
    serve_http,
    text_result,
)
from trio_mcp.actors import (
    RetryPolicy,
    Runtime,
    RuntimeConfig,
    ServerConfig,
    ServerState,
    TransportKind,
    open_runtime,
)
from trio_mcp.actors.runtime._runtime import open_default_transport
from trio_mcp.protocol._errors import (
    ConnectError,
    FrameTooLarge,
    HttpStatusError,
    McpTransportConfigError,
    RemoteProtocolError,
    ServerDisconnected,
    SessionExpired,
    TransportClosed,
)
from trio_mcp.protocol._jsonrpc import RequestId
from trio_mcp.transports._base import (
    ConnectionEnded,
    FrameSink,
    Inbound,
    RequestFailed,
    ResumableTransport,
    SessionExpiredNotice,
    Transport,
    VersionedTransport,
    open_inbox,
)
from trio_mcp.transports._channel import DEFAULT_MAILBOX_BYTES, ByteChannel
from trio_mcp.transports.http import _http_base
from trio_mcp.transports.http._http import HttpTransport, open_http_transport
from trio_mcp.transports.http._http_base import (
    OUTBOX_BYTES,
    HttpParameters,
    display_url,
    looks_secret_header,
    redacted_headers,
)

BOUND = 10.0
SECRET = "s3cret-t0ken"

Inbox = ByteChannel[Inbound]


# --------------------------------------------------------------------------- helpers


@asynccontextmanager
async def fake_server(**knobs: Any) -> AsyncIterator[tuple[FakeMcpHttp, HttpServer]]:
    fake = FakeMcpHttp(**knobs)
    async with serve_http(fake.handle) as server:
        yield fake, server


def params(server: HttpServer, **options: Any) -> HttpParameters:
    options.setdefault("reconnect_delay", 0.05)
    options.setdefault("connect_timeout", 5.0)
    return HttpParameters(url=server.base + "/mcp", **options)


@asynccontextmanager
async def opened(
    parameters: HttpParameters, *, inbox_bytes: int = DEFAULT_MAILBOX_BYTES
) -> AsyncIterator[tuple[HttpTransport, Inbox]]:
    """The transport, with an inbox of ``inbox_bytes`` as its sink."""
    inbox = open_inbox(inbox_bytes)
    async with open_http_transport(parameters, inbox) as t:
        yield t, inbox


def request(rid: int, method: str, params: dict[str, Any] | None = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode()


def notification(method: str, params: dict[str, Any] | None = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode()


def call(rid: int, name: str, **arguments: Any) -> bytes:
    return request(rid, "tools/call", {"name": name, "arguments": arguments})


async def take(inbox: Inbox) -> Inbound:
    """The next item of the inbox (bounded wait)."""
    with trio.fail_after(BOUND):
        return await inbox.receive()


async def take_json(inbox: Inbox) -> Any:
    """The next item, which must be a frame, decoded."""
    item = await take(inbox)
    assert isinstance(item, bytes), item
    return json.loads(item)


async def take_failed(inbox: Inbox) -> RequestFailed:
    """The next item, which must be a RequestFailed."""
    item = await take(inbox)
    assert isinstance(item, RequestFailed), item
    return item


async def take_failures(inbox: Inbox, count: int) -> dict[RequestId, RequestFailed]:
    """The next ``count`` items, which must be RequestFailed (in any order), by request id."""
    failures = [await take_failed(inbox) for _ in range(count)]
    by_id = {failure.request_id: failure for failure in failures}
    assert len(by_id) == count, failures
    return by_id


def the_rest(inbox: Inbox) -> list[Inbound]:
    """What is left in the inbox of a transport that is closed (or whose connection ended): the
    sink must be closed, and a ConnectionEnded must be its last item and its only one."""
    items: list[Inbound] = []
    while True:
        try:
            items.append(inbox.receive_nowait())
        except trio.EndOfChannel:
            break
    assert items, "the sink was closed without a ConnectionEnded"
    assert isinstance(items[-1], ConnectionEnded), items
    assert not any(isinstance(item, ConnectionEnded) for item in items[:-1]), items
    return items


def closed_cleanly(t: HttpTransport, inbox: Inbox) -> None:
    """Nothing but the end of a clean close is left in the inbox."""
    [end] = the_rest(inbox)
    assert isinstance(end, ConnectionEnded)
    assert type(end.error) is TransportClosed
    assert str(end.error) == f"the transport to {t.info.detail} was closed; open a new one"
    assert end.unsent == frozenset()


async def initialize(
    t: HttpTransport, inbox: Inbox, version: str = "2025-11-25", *, now: bool = False
) -> Any:
    """The handshake, by hand: initialize, the protocol version, notifications/initialized
    (with ``send_now`` when ``now``)."""
    send = t.send_now if now else t.send
    await send(
        request(
            1,
            "initialize",
            {
                "protocolVersion": version,
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            },
        )
    )
    answer = await take_json(inbox)
    assert answer["id"] == 1, answer
    await t.set_protocol_version(answer["result"]["protocolVersion"])
    await send(notification("notifications/initialized"))
    return answer


async def accepted_initialized(fake: FakeMcpHttp, count: int = 1) -> None:
    """Wait until the fake accepted ``count`` notifications/initialized (the pump POSTs it after
    ``send`` returned): expiring the session before would refuse it."""
    with trio.fail_after(BOUND):
        await fake.wait_until(lambda: fake.methods().count("notifications/initialized") >= count)


async def barrier(t: HttpTransport, inbox: Inbox, rid: int) -> None:
    """Send a ping and wait for its answer: the pump handled everything given before it."""
    await t.send(request(rid, "ping"))
    assert await take_json(inbox) == response(rid)


def config(server: HttpServer, **options: Any) -> RuntimeConfig:
    options.setdefault("connect_timeout", 5.0)
    options.setdefault("timeout", 5.0)
    name = options.pop("name", "h")
    server_config = ServerConfig(name=name, url=server.base + "/mcp", **options)
    return RuntimeConfig(
        servers=(server_config,),
        retry=RetryPolicy(jitter=0.0, reconnect_initial=0.1),
        list_changed_debounce=0.01,
    )


def quick_transport(cfg: ServerConfig, sink: FrameSink) -> Any:
    """The runtime's HTTP transport, with quick reconnects for tests."""
    assert cfg.url is not None
    return open_http_transport(
        HttpParameters(url=cfg.url, headers=dict(cfg.headers), reconnect_delay=0.05), sink
    )


@asynccontextmanager
async def runtime(server: HttpServer, **options: Any) -> AsyncIterator[Runtime]:
    async with open_runtime(config(server, **options), open_transport=quick_transport) as rt:
        with trio.fail_after(BOUND):
            statuses = await rt.wait_ready()
        assert statuses["h"].state is ServerState.READY, statuses["h"].last_error
        yield rt


async def eventually(predicate: Callable[[], bool]) -> None:
    """Wait until ``predicate()`` holds, polling (bounded): for state without an event of its
    own, such as a transport's counters."""
    with trio.fail_after(BOUND):
        while not predicate():  # noqa: ASYNC110 - nothing to wait on but the state itself
            await trio.sleep(0.005)


async def wait_state(rt: Runtime, state: ServerState, generation: int = 1) -> None:
    """Wait until server ``h`` is in ``state`` in connection ``generation`` or a later one."""
    with trio.fail_after(BOUND), rt.events() as events:
        while not (rt.status()["h"].state is state and rt.status()["h"].generation >= generation):
            await events.__anext__()


NOTE = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": 1}}


def response(rid: int, result: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": result if result is not None else {}}


def slow_tool() -> tuple[trio.Event, Callable[[ToolCall], Any]]:
    """A tool that answers once the returned event is set."""
    release = trio.Event()

    async def slow(call: ToolCall) -> Any:
        await release.wait()
        return text_result("slow")

    return release, slow


# --------------------------------------------------------------------------- the wire


async def test_it_has_the_contract_and_the_abilities() -> None:
    async with fake_server() as (_, server), opened(params(server)) as (t, _inbox):
        assert isinstance(t, Transport)
        assert isinstance(t, VersionedTransport)
        assert isinstance(t, ResumableTransport)
        with pytest.raises(RuntimeError, match="go to the sink it was opened with"):
            await t.receive()


async def test_every_request_carries_the_headers_the_specification_requires() -> None:
    headers = {"Authorization": f"Bearer {SECRET}", "X-Team": "blue", "accept": "text/html"}
    async with fake_server() as (fake, server):
        async with opened(params(server, headers=headers)) as (t, inbox):
            answer = await initialize(t, inbox)
            assert answer["result"]["serverInfo"] == {"name": "fake-http", "version": "1.0"}
            with trio.fail_after(BOUND):
                await fake.wait_until(lambda: len(fake.get_streams) == 1)
            await t.send(call(2, "echo", text="hi"))
            assert await take_json(inbox) == response(2, text_result("hi"))
            stats = t.statistics()
            assert (stats.mode, stats.has_session, stats.protocol_version) == (
                "streamable",
                True,
                "2025-11-25",
            )
            assert (stats.posts, stats.gets, stats.get_stream) == (3, 1, "open")
            assert (stats.frames_received, stats.queued) == (2, 0)
            assert t.info.kind == "http"
            assert t.info.detail == f"{server.base}/mcp"
        closed_cleanly(t, inbox)
        posts = server.by_method("POST")
        assert [r.json()["method"] for r in posts] == [
            "initialize",
            "notifications/initialized",
            "tools/call",
        ]
        for post in posts:
            assert post.header("accept") == "application/json, text/event-stream"
            assert post.header("content-type") == "application/json"
            assert post.header("authorization") == f"Bearer {SECRET}"
            assert post.header("x-team") == "blue"
        first, *later = posts
        assert first.header("mcp-session-id") is None
        assert first.header("mcp-protocol-version") is None
        for post in later:
            assert post.header("mcp-session-id") == "session-1"
            assert post.header("mcp-protocol-version") == "2025-11-25"
        (get,) = server.by_method("GET")
        assert get.header("accept") == "text/event-stream"
        assert get.header("mcp-session-id") == "session-1"
        assert get.header("mcp-protocol-version") == "2025-11-25"
        assert get.header("authorization") == f"Bearer {SECRET}"
        assert get.header("last-event-id") is None
        (delete,) = server.by_method("DELETE")
        assert delete.header("mcp-session-id") == "session-1"
        assert delete.header("authorization") == f"Bearer {SECRET}"
        assert fake.deleted == ["session-1"]


async def test_json_answers_work_and_a_json_batch_is_split_into_messages() -> None:
    async def handler(request: HttpRequest, reply: Reply) -> None:
        await reply.json([NOTE, response(7, {"ok": True})])

    async with serve_http(handler) as server, opened(params(server)) as (t, inbox):
        await t.send(request(7, "ping"))
        assert await take_json(inbox) == NOTE
        assert await take_json(inbox) == response(7, {"ok": True})
        assert t.statistics().frames_received == 2
    closed_cleanly(t, inbox)


async def test_sse_answers_skip_priming_events_comments_and_other_event_types() -> None:
    async def handler(request: HttpRequest, reply: Reply) -> None:
        await reply.start()
        await reply.write(b": keep-alive\n\n")
        await reply.event("", id="p1", retry=10)
        await reply.event("not for us", event="other", id="p2")
        await reply.write(b"id: p3\ndata: [" + json.dumps(NOTE).encode() + b",\ndata: ")
        await reply.write(json.dumps(response(7)).encode() + b"]\n\n")

    async with serve_http(handler) as server, opened(params(server)) as (t, inbox):
        await t.send(request(7, "ping"))
        assert await take_json(inbox) == NOTE
        assert await take_json(inbox) == response(7)
        assert t.statistics().resumptions == 0
    closed_cleanly(t, inbox)


async def test_a_long_call_never_holds_up_another() -> None:
    release, slow = slow_tool()
    async with fake_server() as (fake, server):
        fake.tools["slow"] = slow
        async with opened(params(server)) as (t, inbox):
            await initialize(t, inbox)
            await t.send(call(2, "slow"))
            await t.send(call(3, "echo", text="quick"))
            assert await take_json(inbox) == response(3, text_result("quick"))
            await eventually(lambda: t.statistics().in_flight == 1)
            release.set()
            assert await take_json(inbox) == response(2, text_result("slow"))
            await eventually(lambda: t.statistics().in_flight == 0)
        closed_cleanly(t, inbox)


async def test_a_request_waits_for_a_free_slot_beyond_max_in_flight() -> None:
    release, slow = slow_tool()
    async with fake_server() as (fake, server):
        fake.tools["slow"] = slow
        async with opened(params(server, max_in_flight=1)) as (t, inbox):
            await initialize(t, inbox)
            await t.send(call(2, "slow"))
            await t.send(call(3, "echo", text="x"))  # in the outbox: send does not wait
            with trio.fail_after(BOUND):
                await trio.testing.wait_all_tasks_blocked()
            assert fake.methods().count("tools/call") == 1
            assert (t.statistics().in_flight, t.statistics().queued) == (1, 0)  # the pump has it
            assert t.statistics().waiting == 1  # in a task of its own
            released_at = trio.current_time()
            release.set()
            answers = {(await take_json(inbox))["id"] for _ in range(2)}
            assert answers == {2, 3}
        closed_cleanly(t, inbox)
        [third] = [r for r in server.by_method("POST") if r.json().get("id") == 3]
        assert third.at >= released_at


async def test_messages_never_wait_behind_a_request_waiting_for_a_slot() -> None:
    # A notification, or the answer to a server request (which a call may be waiting for on
    # the server's side), goes out while a request waits for a free slot.
    release, slow = slow_tool()
    answer = response(99, {"roots": []})
    async with fake_server() as (fake, server):
        fake.tools["slow"] = slow
        async with opened(params(server, max_in_flight=1)) as (t, inbox):
            await initialize(t, inbox)
            await t.send(call(2, "slow"))  # holds the only slot
            with trio.fail_after(BOUND):
                await fake.wait_until(lambda: "tools/call" in fake.methods())
            await t.send(call(3, "echo", text="x"))  # waits for the slot
            await t.send(notification("notifications/roots/list_changed"))
            await t.send(json.dumps(answer).encode())
            with trio.fail_after(BOUND):
                await fake.wait_until(lambda: answer in fake.messages)
            assert fake.methods()[-2:] == ["tools/call", "notifications/roots/list_changed"]
            assert (t.statistics().in_flight, t.statistics().waiting) == (1, 1)
            release.set()
            assert {(await take_json(inbox))["id"] for _ in range(2)} == {2, 3}
        closed_cleanly(t, inbox)
        assert [m.get("id") for m in fake.messages if m.get("method") == "tools/call"] == [2, 3]


async def test_a_cancel_goes_out_past_a_waiting_request_and_frees_its_slot() -> None:
    # The slot holder times out: its cancel goes out, its stream is closed, and its slot goes
    # to the next request; a cancel for a request still waiting stops it before its POST.
    release, slow = slow_tool()
    async with fake_server() as (fake, server):
        fake.tools["slow"] = slow
        async with opened(params(server, max_in_flight=1)) as (t, inbox):
            await initialize(t, inbox)
            await t.send(call(2, "slow"))  # holds the only slot
            with trio.fail_after(BOUND):
                await fake.wait_until(lambda: "tools/call" in fake.methods())
            await t.send(call(3, "echo", text="never"))  # waits for the slot
            await t.send(call(4, "echo", text="after"))  # waits behind it
            await t.send(notification("notifications/cancelled", {"requestId": 3}))
            await t.send(notification("notifications/cancelled", {"requestId": 2}))
            assert await take_json(inbox) == response(4, text_result("after"))
            assert t.statistics().waiting == 0
            release.set()
        [end] = the_rest(inbox)  # no answer, no failure for the cancelled calls
        assert isinstance(end, ConnectionEnded)
        assert end.unsent == frozenset({3})  # it never left
        calls = [m.get("id") for m in fake.messages if m.get("method") == "tools/call"]
        assert calls == [2, 4]


async def test_an_initialize_never_waits_for_a_slot() -> None:
    release, slow = slow_tool()
    async with fake_server() as (fake, server):
        fake.tools["slow"] = slow
        async with opened(params(server, max_in_flight=1)) as (t, inbox):
            await initialize(t, inbox)
            await t.send(call(2, "slow"))  # holds the only slot
            with trio.fail_after(BOUND):
                await fake.wait_until(lambda: "tools/call" in fake.methods())
            answer = await initialize(t, inbox)  # a new session's initialize still goes out
            assert answer["result"]["protocolVersion"] == "2025-11-25"
            assert fake.initializes == 2
            release.set()
            assert (await take_json(inbox))["id"] == 2
        closed_cleanly(t, inbox)


async def test_the_pump_takes_the_next_frame_once_the_server_accepted_a_notification() -> None:
    gate = trio.Event()

    async def hook(message: dict[str, Any]) -> None:
        if message.get("method") == "notifications/roots/list_changed":
            await gate.wait()

    async with fake_server() as (fake, server), opened(params(server)) as (t, inbox):
        fake.on_message = hook
        await initialize(t, inbox)
        await t.send(notification("notifications/roots/list_changed"))
        await t.send(request(2, "ping"))
        with trio.fail_after(BOUND):
            await trio.testing.wait_all_tasks_blocked()
        assert fake.methods()[-1] == "notifications/roots/list_changed"
        assert t.statistics().queued == 1  # the ping waits in the outbox
        gate.set()
        assert await take_json(inbox) == response(2)
        assert fake.methods()[-2:] == ["notifications/roots/list_changed", "ping"]
        # A response to a server request is POSTed the same way.
        await t.send(json.dumps(response(99, {"roots": []})).encode())
        await barrier(t, inbox, 3)
        assert fake.messages[-2] == response(99, {"roots": []})
    closed_cleanly(t, inbox)


async def test_a_refused_notification_is_logged_not_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="trio_mcp.transports.http")
    async with fake_server() as (fake, server), opened(params(server)) as (t, inbox):
        fake.refuse["notifications/roots/list_changed"] = (500, b"not today")
        await initialize(t, inbox)
        await t.send(notification("notifications/roots/list_changed"))
        await barrier(t, inbox, 2)
        [record] = [r for r in caplog.records if "refused" in r.getMessage()]
        assert record.levelno == logging.WARNING
        assert record.getMessage() == (
            f"http: {server.base}/mcp: the server refused notifications/roots/list_changed: "
            f"POST notifications/roots/list_changed to {server.base}/mcp: the server answered "
            "HTTP 500 Internal Server Error: not today"
        )
    closed_cleanly(t, inbox)


async def test_an_error_status_fails_that_request_alone_with_status_and_body() -> None:
    async with fake_server() as (fake, server), opened(params(server)) as (t, inbox):
        await initialize(t, inbox)
        fake.refuse["tools/call"] = (500, b"boom\n  at line 3")
        await t.send(call(2, "echo", text="x"))
        failed = await take_failed(inbox)
        del fake.refuse["tools/call"]
        await t.send(call(3, "echo", text="still fine"))
        assert await take_json(inbox) == response(3, text_result("still fine"))
    closed_cleanly(t, inbox)
    assert (failed.request_id, failed.sent) == (2, True)
    error = failed.error
    assert isinstance(error, HttpStatusError)
    assert (error.status, error.body) == (500, "boom at line 3")
    assert str(error) == (
        f"POST tools/call to {server.base}/mcp: the server answered HTTP 500 Internal Server "
        "Error: boom at line 3"
    )


async def test_a_long_error_body_is_cut_and_a_redirect_is_not_followed() -> None:
    async def handler(request: HttpRequest, reply: Reply) -> None:
        if request.json()["method"] == "ping":
            await reply.send(307, b"", headers=[("location", "/mcp/?token=abc")])
        else:
            await reply.send(401, b"x" * 1000, headers=[("www-authenticate", "Bearer")])

    async with serve_http(handler) as server, opened(params(server)) as (t, inbox):
        await t.send(request(1, "ping"))
        await t.send(request(2, "tools/list"))
        failures = await take_failures(inbox, 2)
        assert len(server.requests) == 2
    closed_cleanly(t, inbox)
    redirect, unauthorized = failures[1].error, failures[2].error
    assert isinstance(redirect, HttpStatusError) and redirect.status == 307
    assert str(redirect) == (
        f"POST ping to {server.base}/mcp: the server answered HTTP 307 Temporary Redirect "
        f"(a redirect to {server.base}/mcp/?..., which is not followed: configure that URL "
        "instead)"
    )
    assert isinstance(unauthorized, HttpStatusError) and unauthorized.status == 401
    assert unauthorized.body == "x" * 300 + "..."


async def test_an_answer_that_is_neither_json_nor_sse_fails_the_call() -> None:
    async def handler(request: HttpRequest, reply: Reply) -> None:
        if request.json()["id"] == 1:
            await reply.send(200, b"hello", headers=[("content-type", "text/plain")])
        else:
            await reply.json(response(5))  # the answer of another request

    async with serve_http(handler) as server, opened(params(server)) as (t, inbox):
        await t.send(request(1, "ping"))
        await t.send(request(2, "ping"))
        items = [await take(inbox) for _ in range(3)]
    closed_cleanly(t, inbox)
    frames = [json.loads(item) for item in items if isinstance(item, bytes)]
    assert frames == [response(5)]
    failures = {item.request_id: item for item in items if isinstance(item, RequestFailed)}
    wrong_type = failures[1].error
    assert isinstance(wrong_type, RemoteProtocolError)
    assert str(wrong_type) == (
        f"the server answered ping at {server.base}/mcp with content type 'text/plain'; a "
        "Streamable HTTP server answers application/json or text/event-stream"
    )
    missing = failures[2]
    assert isinstance(missing.error, RemoteProtocolError) and missing.sent is True
    assert str(missing.error) == (
        f"the server's JSON answer to ping at {server.base}/mcp did not hold its response"
    )
    # The frame came up before the failure of the request it did not answer.
    assert items.index(failures[2]) > items.index(next(i for i in items if isinstance(i, bytes)))


async def test_an_oversized_answer_fails_that_call_with_frame_too_large() -> None:
    async def handler(request: HttpRequest, reply: Reply) -> None:
        rid = request.json()["id"]
        if rid == 1:
            await reply.json(response(1, {"blob": "x" * 200}))
        elif rid == 2:
            await reply.start()
            await reply.event(json.dumps(response(2, {"blob": "x" * 200})), id="e1")
        else:
            await reply.json(response(3))

    async with serve_http(handler) as server:
        async with opened(params(server, max_frame_bytes=100)) as (t, inbox):
            for rid in (1, 2, 3):
                await t.send(request(rid, "ping"))
            items = [await take(inbox) for _ in range(3)]
        closed_cleanly(t, inbox)
    assert [json.loads(item) for item in items if isinstance(item, bytes)] == [response(3)]
    errors = {item.request_id: item.error for item in items if isinstance(item, RequestFailed)}
    assert isinstance(errors[1], FrameTooLarge) and errors[1].limit == 100
    assert str(errors[1]) == (
        "the server's answer to ping is larger than 100 bytes (max_frame_bytes); if the "
        "server legitimately sends bigger messages, raise max_frame_bytes in its config"
    )
    assert isinstance(errors[2], FrameTooLarge) and errors[2].limit == 100


async def test_an_invalid_session_id_fails_the_initialize() -> None:
    async def handler(request: HttpRequest, reply: Reply) -> None:
        await reply.json(response(1), headers=[("mcp-session-id", "has space")])

    async with serve_http(handler) as server, opened(params(server)) as (t, inbox):
        await t.send(request(1, "initialize", {}))
        failed = await take_failed(inbox)
        assert t.statistics().has_session is False
    closed_cleanly(t, inbox)
    assert isinstance(failed.error, RemoteProtocolError)
    assert (failed.request_id, failed.sent) == (1, True)
    assert "gave a session id that is not visible ASCII" in str(failed.error)


async def test_without_a_sink_receive_raises_a_request_failure_once_and_goes_on() -> None:
    async with fake_server() as (fake, server), open_http_transport(params(server)) as t:
        fake.refuse["ping"] = (503, b"busy")
        with trio.fail_after(BOUND):
            await t.send(request(1, "initialize", {"protocolVersion": "2025-11-25"}))
            assert json.loads(await t.receive())["id"] == 1
            await t.send(request(2, "ping"))
            with pytest.raises(HttpStatusError) as caught:
                await t.receive()
            del fake.refuse["ping"]
            await t.send(request(3, "ping"))
            assert json.loads(await t.receive()) == response(3)
    assert str(caught.value) == (
        f"POST ping to {server.base}/mcp: the server answered HTTP 503 Service Unavailable: busy"
    )
    with pytest.raises(TransportClosed, match=r"was closed; open a new one$"):
        await t.receive()


# --------------------------------------------------------------------------- backpressure


async def test_a_full_sink_stops_the_body_readers_and_nothing_is_lost() -> None:
    notes = [{**NOTE, "params": {"level": "info", "data": n}} for n in range(10)]
    size = len(json.dumps(notes[0]))

    async def handler(request: HttpRequest, reply: Reply) -> None:
        await reply.start()
        for n, note in enumerate(notes):
            await reply.event(json.dumps(note), id=f"e{n}")
        await reply.event(json.dumps(response(1)), id="e10")

    # Room for two frames: the reader waits with the third.
    async with serve_http(handler) as server:
        async with opened(params(server), inbox_bytes=2 * size + size // 2) as (t, inbox):
            await t.send(request(1, "ping"))
            with trio.fail_after(BOUND):
                await trio.testing.wait_all_tasks_blocked()
            # Two frames in the inbox, the reader waiting with the third.
            assert (len(inbox), t.statistics().frames_received, t.statistics().in_flight) == (
                2,
                3,
                1,
            )
            got = [await take_json(inbox) for _ in range(11)]
            assert got == [*notes, response(1)]
            await eventually(lambda: t.statistics().in_flight == 0)
        closed_cleanly(t, inbox)


async def test_the_get_stream_waits_for_room_in_the_sink_too() -> None:
    async with fake_server() as (fake, server):
        size = len(json.dumps({**NOTE, "params": {"level": "info", "data": 10}}))
        async with opened(params(server), inbox_bytes=size + size // 2) as (t, inbox):
            await initialize(t, inbox)
            with trio.fail_after(BOUND):
                await fake.wait_until(lambda: len(fake.get_streams) == 1)
            for n in range(10, 15):
                await fake.push({**NOTE, "params": {"level": "info", "data": n}})
            with trio.fail_after(BOUND):
                await trio.testing.wait_all_tasks_blocked()
            assert len(inbox) == 1
            got = [(await take_json(inbox))["params"]["data"] for _ in range(5)]
            assert got == [10, 11, 12, 13, 14]
        closed_cleanly(t, inbox)


# --------------------------------------------------------------------------- the outbox


async def test_ability_calls_apply_in_order_with_the_frames() -> None:
    async def handler(request: HttpRequest, reply: Reply) -> None:
        if request.method != "POST":
            await reply.send(405)  # no GET stream, no DELETE
            return
        message = request.json()
        if "id" in message:
            await reply.json(response(message["id"]))
        else:
            await reply.send(202)

    async with serve_http(handler) as server, opened(params(server)) as (t, inbox):
        # Given one after the other without waiting for anything: the version applies from
        # the frames given after it, whatever the order in which the POSTs run.
        await t.send(request(1, "ping"))
        await t.set_protocol_version("2025-06-18")
        await t.send(request(2, "ping"))
        await t.send(notification("notifications/initialized"))
        await t.set_protocol_version("2025-11-25")
        await t.send(request(3, "ping"))
        assert {(await take_json(inbox))["id"] for _ in range(3)} == {1, 2, 3}
        assert t.protocol_version == "2025-11-25"
    closed_cleanly(t, inbox)
    versions = {
        json.dumps(r.json().get("id", r.json().get("method"))): r.header("mcp-protocol-version")
        for r in server.by_method("POST")
    }
    assert versions == {
        "1": None,
        "2": "2025-06-18",
        '"notifications/initialized"': "2025-06-18",
        "3": "2025-11-25",
    }


async def test_requests_that_never_left_are_unsent_in_the_end() -> None:
    release, slow = slow_tool()
    big = "x" * (OUTBOX_BYTES // 3)
    async with fake_server() as (fake, server):
        fake.tools["slow"] = slow
        async with opened(params(server, max_in_flight=1)) as (t, inbox):
            await initialize(t, inbox)
            await t.send(call(2, "slow"))  # takes the only slot
            t.send_nowait(call(3, "echo", text=big))  # the pump takes it; it waits for a slot
            with trio.fail_after(BOUND):
                await trio.testing.wait_all_tasks_blocked()
            assert t.statistics().queued == 0
            t.send_nowait(call(4, "echo", text=big))
            t.send_nowait(call(5, "echo", text=big))
            with pytest.raises(trio.WouldBlock):  # the outbox is bounded in bytes
                t.send_nowait(call(6, "echo", text=big))
            assert t.statistics().queued == 2
        [end] = the_rest(inbox)
        assert isinstance(end, ConnectionEnded)
        assert end.unsent == frozenset({3, 4, 5})  # 2 left: its outcome is unknown
        assert fake.methods().count("tools/call") == 1
        release.set()


# --------------------------------------------------------------------------- connection reuse


@pytest.mark.parametrize("json_response", [False, True], ids=["sse", "json"])
async def test_answers_and_accepted_posts_leave_their_connection_for_the_next_request(
    json_response: bool,
) -> None:
    # An SSE answer is read to its end once its response arrived (the server ends the stream
    # right after it), and the empty body of a 202 is read too, so one connection serves all.
    async with fake_server(json_response=json_response) as (_, server):
        async with opened(params(server)) as (t, inbox):
            # The handshake by hand, each message once the one before is done with (and
            # without the GET stream, which would take a connection of its own).
            await t.send(request(1, "initialize", {"protocolVersion": "2025-11-25"}))
            assert (await take_json(inbox))["id"] == 1
            await eventually(lambda: t.statistics().in_flight == 0)
            await t.send(notification("notifications/initialized"))
            for rid in range(2, 6):
                await t.send(call(rid, "echo", text=str(rid)))
                assert await take_json(inbox) == response(rid, text_result(str(rid)))
                await eventually(lambda: t.statistics().in_flight == 0)
        closed_cleanly(t, inbox)
        posts = server.by_method("POST")
        assert [r.json()["method"] for r in posts] == [
            "initialize",
            "notifications/initialized",
            *["tools/call"] * 4,
        ]
        assert [r.connection for r in posts] == [1] * 6
        assert server.connections == 1


async def test_a_stream_left_open_after_its_answer_is_cut_after_a_moment() -> None:
    cut = trio.Event()

    async def handler(request: HttpRequest, reply: Reply) -> None:
        rid = request.json()["id"]
        await reply.start()
        await reply.event(json.dumps(response(rid)), id=f"e{rid}")
        try:
            while True:  # never ends the stream; keep-alive comments until the client is gone
                await trio.sleep(0.01)
                await reply.write(b": ping\n\n")
        except ClientGone:
            cut.set()
            raise

    async with serve_http(handler) as server, opened(params(server)) as (t, inbox):
        await t.send(request(1, "ping"))
        assert await take_json(inbox) == response(1)
        answered = trio.current_time()
        await eventually(lambda: t.statistics().in_flight == 0)
        assert trio.current_time() - answered < 1.0
        with trio.fail_after(BOUND):
            await cut.wait()
        await t.send(request(2, "ping"))
        assert await take_json(inbox) == response(2)
        assert t.statistics().resumptions == 0
    closed_cleanly(t, inbox)
    assert [r.connection for r in server.by_method("POST")] == [1, 2]


@pytest.mark.parametrize("fallback", [True, False], ids=["fallback", "no-fallback"])
async def test_the_next_message_goes_out_once_initialize_is_answered_not_once_its_stream_ends(
    fallback: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The answer to initialize decides against the fallback, and gives the session id: the
    # pump goes on with notifications/initialized then, while the initialize stream is open.
    monkeypatch.setattr(_http_base, "_FINISH_BUDGET", 60.0)  # no cut after a moment
    initialized = trio.Event()

    async def handler(request: HttpRequest, reply: Reply) -> None:
        if request.method != "POST":
            await reply.send(405)
            return
        message = request.json()
        if message.get("method") == "initialize":
            await reply.start(headers=[("mcp-session-id", "abc")])
            await reply.event(json.dumps(response(1, {"protocolVersion": "2025-11-25"})))
            await initialized.wait()  # the stream stays open until the next message
            await reply.end()
            return
        assert request.header("mcp-session-id") == "abc"
        initialized.set()
        await reply.send(202)

    async with serve_http(handler) as server:
        async with opened(params(server, legacy_fallback=fallback)) as (t, inbox):
            await t.send(request(1, "initialize", {"protocolVersion": "2025-11-25"}))
            assert (await take_json(inbox))["id"] == 1
            await t.send(notification("notifications/initialized"))
            with trio.fail_after(BOUND):
                await initialized.wait()
        closed_cleanly(t, inbox)


async def test_more_than_a_few_kib_after_the_answer_is_not_read() -> None:
    async def handler(request: HttpRequest, reply: Reply) -> None:
        rid = request.json()["id"]
        await reply.start()
        await reply.event(json.dumps(response(rid)), id=f"e{rid}")
        for _ in range(16):  # 16 chunks of 1 KiB of comments, then the end
            await reply.write(b":" + b"x" * 1022 + b"\n")
        await reply.write(b"\n")

    async with serve_http(handler) as server, opened(params(server)) as (t, inbox):
        for rid in (1, 2):
            await t.send(request(rid, "ping"))
            assert await take_json(inbox) == response(rid)
            await eventually(lambda: t.statistics().in_flight == 0)
    closed_cleanly(t, inbox)
    assert [r.connection for r in server.by_method("POST")] == [1, 2]


async def test_a_connection_broken_after_the_answer_is_no_failure() -> None:
    async def handler(request: HttpRequest, reply: Reply) -> None:
        rid = request.json()["id"]
        await reply.start()
        await reply.event(json.dumps(response(rid)), id=f"e{rid}", retry=10)
        await reply.abort()

    async with serve_http(handler) as server, opened(params(server)) as (t, inbox):
        await t.send(request(1, "ping"))
        assert await take_json(inbox) == response(1)
        await eventually(lambda: t.statistics().in_flight == 0)
        await t.send(request(2, "ping"))
        assert await take_json(inbox) == response(2)
        stats = t.statistics()
        assert (stats.resumptions, stats.gets) == (0, 0)
    closed_cleanly(t, inbox)
    assert [r.connection for r in server.by_method("POST")] == [1, 2]


async def test_an_answer_accepted_without_a_body_reuses_the_connection() -> None:
    async def handler(request: HttpRequest, reply: Reply) -> None:
        if request.json()["id"] == 1:
            await reply.send(202)  # the answer may come on the GET stream
        else:
            await reply.json(response(2))

    async with serve_http(handler) as server, opened(params(server)) as (t, inbox):
        await t.send(request(1, "ping"))
        await eventually(lambda: len(server.requests) == 1 and t.statistics().in_flight == 0)
        await t.send(request(2, "ping"))
        assert await take_json(inbox) == response(2)
    closed_cleanly(t, inbox)
    assert [r.connection for r in server.by_method("POST")] == [1, 1]


# --------------------------------------------------------------------------- the GET stream


async def test_the_get_stream_delivers_server_messages_and_is_resumed_after_retry() -> None:
    async with fake_server(retry_ms=100) as (fake, server):
        async with opened(params(server)) as (t, inbox):
            await initialize(t, inbox)
            with trio.fail_after(BOUND):
                await fake.wait_until(lambda: len(fake.get_streams) == 1)
            await fake.push(NOTE)
            assert await take_json(inbox) == NOTE
            (stream,) = fake.get_streams
            closed_at = trio.current_time()
            await fake.close_get_streams(clean=True)
            await fake.push({**NOTE, "params": {"level": "info", "data": 2}})
            second = await take_json(inbox)
            assert second["params"]["data"] == 2
        closed_cleanly(t, inbox)
        first_get, second_get = server.by_method("GET")
        assert first_get.header("last-event-id") is None
        # The last event seen was the NOTE (the priming event came before it).
        assert second_get.header("last-event-id") == f"{stream.key}-2"
        assert second_get.header("mcp-session-id") == "session-1"
        assert second_get.at - closed_at >= 0.1


async def test_a_request_waits_for_the_first_get_stream_to_be_answered() -> None:
    # A server may send a request's messages (an elicitation, say) on the GET stream, and
    # drops what it sends before that stream is open; the GET, sent first, can reach it after
    # the next POST. So the first request after the handshake is POSTed once the GET was
    # answered (here held back by the fake until the test lets it go).
    gate = trio.Event()
    async with fake_server(get_gate=gate) as (fake, server):
        async with opened(params(server)) as (t, inbox):
            await initialize(t, inbox)
            await t.send(request(2, "tools/list"))
            with trio.fail_after(BOUND):
                await fake.wait_until(lambda: len(server.by_method("GET")) == 1)
                await trio.testing.wait_all_tasks_blocked()
            assert [r.json()["method"] for r in server.by_method("POST")] == [
                "initialize",
                "notifications/initialized",
            ]
            released = trio.current_time()
            gate.set()
            with trio.fail_after(BOUND):
                answer = await take_json(inbox)
            assert answer["id"] == 2
            (listing,) = [r for r in server.by_method("POST") if r.json().get("id") == 2]
            assert listing.at >= released
        closed_cleanly(t, inbox)


async def test_a_405_on_get_means_no_stream_and_it_is_not_retried() -> None:
    async with fake_server(get_stream=False) as (_, server):
        async with opened(params(server)) as (t, inbox):
            await initialize(t, inbox)
            await eventually(lambda: t.statistics().get_stream == "unsupported")
            await t.send(call(2, "echo", text="x"))
            assert (await take_json(inbox))["id"] == 2
            assert t.statistics().gets == 1
        closed_cleanly(t, inbox)
        assert len(server.by_method("GET")) == 1


# --------------------------------------------------------------------------- resumption


@pytest.mark.parametrize("clean", [True, False], ids=["ended", "broken"])
async def test_a_dropped_answer_stream_is_resumed_with_last_event_id_after_retry(
    clean: bool,
) -> None:
    dropped_at: list[float] = []
    streams: list[FakeStream] = []

    async def dropping(call: ToolCall) -> Any:
        assert call.stream is not None
        streams.append(call.stream)
        await call.stream.drop(clean=clean)
        dropped_at.append(trio.current_time())
        await trio.sleep(0.05)
        return text_result("after the drop")

    async with fake_server(retry_ms=150) as (fake, server):
        fake.tools["drop"] = dropping
        async with opened(params(server)) as (t, inbox):
            await initialize(t, inbox)
            await t.send(call(2, "drop"))
            assert await take_json(inbox) == response(2, text_result("after the drop"))
            assert t.statistics().resumptions == 1
        closed_cleanly(t, inbox)
        resumed = [r for r in server.by_method("GET") if r.header("last-event-id") is not None]
        (get,) = resumed
        assert get.header("last-event-id") == f"{streams[0].key}-1"  # the priming event
        assert get.header("mcp-session-id") == "session-1"
        assert get.header("mcp-protocol-version") == "2025-11-25"
        assert get.header("accept") == "text/event-stream"
        assert 0.15 <= get.at - dropped_at[0] < 1.0


async def test_a_retry_of_zero_still_leaves_a_moment_before_resuming() -> None:
    dropped_at: list[float] = []

    async def dropping(call: ToolCall) -> Any:
        assert call.stream is not None
        await call.stream.drop(clean=True)
        dropped_at.append(trio.current_time())
        return text_result("after the drop")  # kept until the client resumes

    async with fake_server(retry_ms=0) as (fake, server):
        fake.tools["drop"] = dropping
        async with opened(params(server)) as (t, inbox):
            await initialize(t, inbox)
            await t.send(call(2, "drop"))
            assert await take_json(inbox) == response(2, text_result("after the drop"))
            assert t.statistics().resumptions == 1
        closed_cleanly(t, inbox)
    (get,) = [r for r in server.by_method("GET") if r.header("last-event-id") is not None]
    assert get.at - dropped_at[0] >= 0.1  # _MIN_POLL: a server's retry: 0 is no busy loop


async def test_without_event_ids_a_dropped_stream_is_lost_with_outcome_unknown() -> None:
    async def dropping(call: ToolCall) -> Any:
        assert call.stream is not None
        await call.stream.drop()
        return text_result("never seen")

    async with fake_server(priming=False, event_ids=False) as (fake, server):
        fake.tools["drop"] = dropping
        async with opened(params(server)) as (t, inbox):
            await initialize(t, inbox)
            await t.send(call(2, "drop"))
            failed = await take_failed(inbox)
            assert t.statistics().resumptions == 0
        closed_cleanly(t, inbox)
    assert (failed.request_id, failed.sent) == (2, True)
    error = failed.error
    assert isinstance(error, ServerDisconnected) and error.sent is True
    assert str(error).startswith(f"the answer to tools/call from {server.base}/mcp was lost: ")
    assert str(error).endswith(
        ", and the server gave no event id to resume from; the outcome is unknown (the "
        "request is not re-sent)"
    )


async def test_resuming_is_given_up_on_405_and_after_max_attempts() -> None:
    async def handler(request: HttpRequest, reply: Reply) -> None:
        if request.method == "POST":
            rid = request.json()["id"]
            await reply.start()
            await reply.event("", id=f"r{rid}-0", retry=20)
        elif request.header("last-event-id") == "r1-0":
            await reply.send(405, b"no")
        else:
            await reply.start()  # resumable, but the answer never comes

    async with serve_http(handler) as server:
        async with opened(params(server, max_resume_attempts=3)) as (t, inbox):
            await t.send(request(1, "ping"))
            await t.send(request(2, "ping"))
            failures = await take_failures(inbox, 2)
        closed_cleanly(t, inbox)
    assert {rid: f.sent for rid, f in failures.items()} == {1: True, 2: True}
    assert str(failures[1].error).endswith(
        "the server ended the stream, and the server offers no resumption (GET: 405); the "
        "outcome is unknown (the request is not re-sent)"
    )
    assert str(failures[2].error).endswith(
        "the resumed stream ended; gave up after 3 attempts to resume it; the outcome is "
        "unknown (the request is not re-sent)"
    )
    gets = [r for r in server.by_method("GET") if r.header("last-event-id") == "r2-0"]
    assert len(gets) == 3


async def test_cancelling_a_call_closes_its_answer_stream() -> None:
    left = trio.Event()

    async def endless(call: ToolCall) -> Any:
        assert call.stream is not None
        while call.stream.reply is not None:
            await call.stream.send(NOTE)
            await trio.sleep(0.02)
        left.set()
        return text_result("too late")

    async with fake_server() as (fake, server):
        fake.tools["endless"] = endless
        async with opened(params(server)) as (t, inbox):
            await initialize(t, inbox)
            await t.send(call(2, "endless"))
            assert await take_json(inbox) == NOTE
            cancel = notification("notifications/cancelled", {"requestId": 2})
            await t.send(cancel)
            with trio.fail_after(BOUND):
                await left.wait()
            await eventually(lambda: t.statistics().in_flight == 0)
        items = the_rest(inbox)
        assert all(item == json.dumps(NOTE).encode() for item in items[:-1])  # no failure
        assert fake.messages[-1] == json.loads(cancel)


# --------------------------------------------------------------------------- session expiry


def expired_message(server: HttpServer) -> str:
    return (
        f"the server at {server.base}/mcp ended the session (it no longer knows our session "
        "id): initialize a new one"
    )


async def take_notice(inbox: Inbox) -> SessionExpiredNotice:
    item = await take(inbox)
    assert isinstance(item, SessionExpiredNotice), item
    return item


@pytest.mark.parametrize("status", [404, 400])
async def test_an_expired_session_is_one_notice_and_frames_are_held_until_resume(
    status: int,
) -> None:
    async with fake_server(expiry_status=status) as (fake, server):
        async with opened(params(server)) as (t, inbox):
            await initialize(t, inbox)
            await accepted_initialized(fake)
            fake.expire()
            await t.send(call(2, "echo", text="two"))
            await t.send(call(3, "echo", text="three"))
            notice = await take_notice(inbox)
            assert notice.lost == ()
            assert isinstance(notice.error, SessionExpired)
            assert str(notice.error) == expired_message(server)
            await eventually(lambda: t.statistics().held == 2)  # both refused, both held
            stats = t.statistics()
            assert (stats.has_session, stats.protocol_version, stats.session_expiries) == (
                False,
                None,
                1,
            )
            await t.send(notification("notifications/roots/list_changed"))  # held too
            await initialize(t, inbox, now=True)  # the new session's frames go past them
            assert t.statistics().held == 3
            await t.resume()
            answers = [await take_json(inbox) for _ in range(2)]
            assert sorted(a["id"] for a in answers) == [2, 3]
            assert t.statistics().held == 0
        closed_cleanly(t, inbox)  # one expiry, one notice
        assert fake.initializes == 2
        first, second = fake.issued  # numbered with the streams: whether the GET came first
        assert first == "session-1"
        posts = server.by_method("POST")
        second_init = [p for p in posts if p.json().get("method") == "initialize"][1]
        assert second_init.header("mcp-session-id") is None
        assert second_init.header("mcp-protocol-version") is None
        resent = [p for p in posts if p.json().get("id") in (2, 3)]
        assert [p.header("mcp-session-id") for p in resent] == [first, first, second, second]
        assert fake.methods().count("notifications/roots/list_changed") == 1


async def test_held_frames_are_sent_in_order_before_the_later_ones() -> None:
    async with fake_server() as (fake, server), opened(params(server)) as (t, inbox):
        await initialize(t, inbox)
        await accepted_initialized(fake)
        fake.expire()
        await t.send(notification("notifications/roots/list_changed", {"n": 1}))
        await take_notice(inbox)
        await t.send(notification("notifications/roots/list_changed", {"n": 2}))
        await initialize(t, inbox, now=True)
        await t.resume()
        await t.send(notification("notifications/roots/list_changed", {"n": 3}))
        await barrier(t, inbox, 2)
        changed = [
            m["params"]["n"]
            for m in fake.messages
            if m.get("method") == "notifications/roots/list_changed"
        ]
        assert changed == [1, 2, 3]
    closed_cleanly(t, inbox)


async def test_a_stream_lost_with_the_session_is_reported_as_lost() -> None:
    started = trio.Event()
    streams: list[FakeStream] = []

    async def slow(call: ToolCall) -> Any:
        assert call.stream is not None
        streams.append(call.stream)
        started.set()
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async with fake_server(retry_ms=20, get_stream=False) as (fake, server):
        fake.tools["slow"] = slow
        async with opened(params(server)) as (t, inbox):
            await initialize(t, inbox)
            await t.send(call(2, "slow"))
            with trio.fail_after(BOUND):
                await started.wait()
            fake.expire()
            await streams[0].drop()
            notice = await take_notice(inbox)
        closed_cleanly(t, inbox)
    assert notice.lost == (2,)
    assert isinstance(notice.error, SessionExpired) and notice.error.lost == (2,)


async def test_a_frame_waiting_for_a_slot_is_held_when_the_session_expires() -> None:
    started = trio.Event()
    streams: list[FakeStream] = []

    async def slow(call: ToolCall) -> Any:
        assert call.stream is not None
        streams.append(call.stream)
        started.set()
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async with fake_server(retry_ms=20, get_stream=False) as (fake, server):
        fake.tools["slow"] = slow
        async with opened(params(server, max_in_flight=1)) as (t, inbox):
            await initialize(t, inbox)
            await t.send(call(2, "slow"))
            with trio.fail_after(BOUND):
                await started.wait()
            await t.send(call(3, "echo", text="waited"))  # it waits for the slot
            fake.expire()
            await streams[0].drop()
            assert (await take_notice(inbox)).lost == (2,)
            await eventually(lambda: t.statistics().held == 1)
            await initialize(t, inbox, now=True)
            await t.resume()
            assert await take_json(inbox) == response(3, text_result("waited"))
        closed_cleanly(t, inbox)
    [third] = [r for r in server.by_method("POST") if r.json().get("id") == 3]
    assert third.header("mcp-session-id") == fake.issued[-1]


async def test_discard_held_fails_the_held_requests_as_never_sent_in_order_with_frames() -> None:
    # Without the GET stream, which might learn of the expiry first: then call 2 could still be
    # in flight when the discard applies (that case has a test of its own below).
    async with (
        fake_server(get_stream=False) as (fake, server),
        opened(params(server)) as (t, inbox),
    ):
        await initialize(t, inbox)
        await accepted_initialized(fake)
        fake.expire()
        await t.send(call(2, "echo", text="x"))
        await take_notice(inbox)
        await t.send(notification("notifications/roots/list_changed"))
        await t.send(call(3, "echo", text="y"))
        await t.discard_held()
        await t.send(call(4, "echo", text="z"))  # after the discard: not held, sent
        failures = [await take_failed(inbox) for _ in range(3)]
        assert t.statistics().held == 0
    closed_cleanly(t, inbox)
    assert [(f.request_id, f.sent) for f in failures] == [(2, False), (3, False), (4, True)]
    for failed in failures[:2]:
        assert isinstance(failed.error, ServerDisconnected) and failed.error.sent is False
        assert str(failed.error) == (
            f"tools/call to {server.base}/mcp was never processed: the server ended the session "
            "before it, and no new session was initialized; it is safe to retry"
        )
    # Sent without a session id, refused by the server: an ordinary failure of its own.
    assert isinstance(failures[2].error, HttpStatusError) and failures[2].error.status == 400
    assert "notifications/roots/list_changed" not in fake.methods()


@pytest.mark.parametrize("then", ["resume", "discard"])
async def test_a_late_refusal_by_the_old_session_is_re_sent_after_resume_or_fails_after_discard(
    then: str,
) -> None:
    fake = FakeMcpHttp()
    at_gate, gate = trio.Event(), trio.Event()

    async def handler(request: HttpRequest, reply: Reply) -> None:
        # Call 3's POST with the old session is answered (404) only once the gate opens.
        old = request.header("mcp-session-id") == "session-1"
        if request.method == "POST" and old and request.json().get("id") == 3:
            at_gate.set()
            await gate.wait()
        await fake.handle(request, reply)

    async with serve_http(handler) as server, opened(params(server)) as (t, inbox):
        await initialize(t, inbox)
        await accepted_initialized(fake)
        fake.expire()
        await t.send(call(3, "echo", text="late"))
        with trio.fail_after(BOUND):
            await at_gate.wait()
        await t.send(call(2, "echo", text="early"))
        await take_notice(inbox)
        if then == "resume":
            await initialize(t, inbox, now=True)
            await t.resume()
            assert await take_json(inbox) == response(2, text_result("early"))
            gate.set()
            assert await take_json(inbox) == response(3, text_result("late"))
        else:
            await t.discard_held()
            assert (await take_failed(inbox)).request_id == 2
            gate.set()
            late = await take_failed(inbox)
            assert (late.request_id, late.sent) == (3, False)
            assert isinstance(late.error, ServerDisconnected)
            assert "was never processed" in str(late.error)
    closed_cleanly(t, inbox)  # one expiry, one notice: the late refusal was not another
    sessions = [
        r.header("mcp-session-id") for r in server.by_method("POST") if r.json().get("id") == 3
    ]
    assert sessions == (["session-1", fake.issued[-1]] if then == "resume" else ["session-1"])


async def test_a_second_expiry_while_the_new_session_is_initialized_ends_the_connection() -> None:
    async with fake_server() as (fake, server), opened(params(server)) as (t, inbox):
        await initialize(t, inbox)
        await accepted_initialized(fake)
        fake.expire()
        fake.refuse["notifications/initialized"] = (404, b"Session not found")
        await t.send(call(2, "echo", text="x"))
        await take_notice(inbox)
        await initialize(t, inbox, now=True)  # its notifications/initialized is refused
        with trio.fail_after(BOUND):
            end = await take(inbox)
        with pytest.raises(TransportClosed, match=r"^the connection ended: the server at "):
            await t.send(call(3, "echo", text="y"))
        with pytest.raises(TransportClosed, match=r"^the connection ended: "):
            await t.resume()
    assert isinstance(end, ConnectionEnded)
    assert isinstance(end.error, SessionExpired)
    assert str(end.error) == (
        f"the server at {server.base}/mcp ended the new session too, while it was being "
        "initialized: the connection ends; open a new one"
    )
    assert end.unsent == frozenset({2})
    assert fake.initializes == 2


async def test_held_requests_are_unsent_when_the_transport_is_closed() -> None:
    async with fake_server() as (fake, server), opened(params(server)) as (t, inbox):
        await initialize(t, inbox)
        await accepted_initialized(fake)
        fake.expire()
        await t.send(call(2, "echo", text="x"))
        await take_notice(inbox)
        await t.send(call(3, "echo", text="y"))
        await eventually(lambda: t.statistics().held == 2)
    [end] = the_rest(inbox)
    assert isinstance(end, ConnectionEnded)
    assert end.unsent == frozenset({2, 3})


# --------------------------------------------------------------------------- reachability


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def test_a_server_that_cannot_be_reached_is_a_connect_error() -> None:
    url = f"http://127.0.0.1:{_free_port()}/mcp"
    async with opened(HttpParameters(url=url, connect_timeout=5.0)) as (t, inbox):
        await t.send(request(1, "initialize", {}))
        failed = await take_failed(inbox)
        with trio.fail_after(BOUND):
            await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(TransportClosed, match=r"^the connection ended: POST initialize"):
            await t.send(request(2, "ping"))
        items = the_rest(inbox)
    assert (failed.request_id, failed.sent) == (1, False)
    assert isinstance(failed.error, ConnectError)
    assert str(failed.error).startswith(f"POST initialize to {url} failed: could not connect")
    [end] = items
    assert isinstance(end, ConnectionEnded)
    assert end.error is failed.error
    assert end.unsent == frozenset()


async def test_each_request_of_an_unreachable_server_is_either_failed_or_unsent() -> None:
    url = f"http://127.0.0.1:{_free_port()}/mcp"
    failed: set[RequestId] = set()
    async with opened(HttpParameters(url=url, connect_timeout=5.0)) as (t, inbox):
        for rid in range(1, 6):
            t.send_nowait(request(rid, "ping"))
        while not isinstance(item := await take(inbox), ConnectionEnded):
            assert isinstance(item, RequestFailed) and item.sent is False, item
            failed.add(item.request_id)
    assert isinstance(item.error, ConnectError)
    # Whether the end stopped a POST before it could say it failed is a race: each request is
    # reported exactly once, as failed unsent or in the end's unsent.
    assert failed | item.unsent == {1, 2, 3, 4, 5}
    assert not failed & item.unsent


async def test_a_server_killed_mid_call_ends_the_connection() -> None:
    started = trio.Event()

    async def slow(call: ToolCall) -> Any:
        started.set()
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async with fake_server(retry_ms=20) as (fake, server):
        fake.tools["slow"] = slow
        async with opened(params(server)) as (t, inbox):
            await initialize(t, inbox)
            await t.send(call(2, "slow"))
            with trio.fail_after(BOUND):
                await started.wait()
            await server.kill()
            end = await take(inbox)
    assert isinstance(end, ConnectionEnded)
    assert type(end.error) is TransportClosed
    assert str(end.error).startswith(
        f"the server at {server.base}/mcp cannot be reached any more ("
    )
    assert str(end.error).endswith("); it may have stopped or restarted")
    assert end.unsent == frozenset()  # call 2 had left: its outcome is unknown


# --------------------------------------------------------------------------- closing


async def test_closing_deletes_the_session_and_a_405_is_fine(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="trio_mcp.transports.http")
    async with fake_server(delete_status=405) as (fake, server):
        async with opened(params(server)) as (t, inbox):
            await initialize(t, inbox)
        assert fake.deleted == ["session-1"]
        assert t.statistics().deletes == 1
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert warnings == [
            f"the connection to {t.info.detail} is not encrypted (plain http://); it stays on "
            "this machine (loopback)"
        ]
        await t.aclose()  # idempotent
        closed_cleanly(t, inbox)
        with pytest.raises(TransportClosed, match="was closed; open a new one"):
            await t.send(request(5, "ping"))
        with pytest.raises(TransportClosed, match="was closed; open a new one"):
            t.send_nowait(request(5, "ping"))
        with pytest.raises(TransportClosed, match="was closed; open a new one"):
            await t.set_protocol_version("2025-11-25")
    assert t.statistics().deletes == 1


async def test_a_stateless_server_gets_no_session_header_and_no_delete() -> None:
    async with fake_server(sessions=False) as (fake, server):
        async with opened(params(server)) as (t, inbox):
            await initialize(t, inbox)
            await t.send(call(2, "echo", text="x"))
            assert (await take_json(inbox))["id"] == 2
            assert t.statistics().has_session is False
        closed_cleanly(t, inbox)
        assert fake.issued == []
        assert server.by_method("DELETE") == []
        assert all(r.header("mcp-session-id") is None for r in server.requests)


# --------------------------------------------------------------------------- parameters


def test_parameters_are_validated_and_list_every_problem() -> None:
    with pytest.raises(McpTransportConfigError) as caught:
        HttpParameters(
            url="ftp://example.com/mcp",
            headers={"Bad Name": "x", "X-Ok": "line\r\nbreak"},
            max_frame_bytes=0,
            connect_timeout=-1,
            read_timeout=float("inf"),
            max_in_flight=True,
        )
    assert caught.value.problems == (
        ("url", "must be an http:// or https:// URL with a host"),
        ("headers['Bad Name']", "a header name must be an HTTP token"),
        ("headers['X-Ok']", "the value must be a string without CR/LF"),
        ("max_frame_bytes", "must be a positive integer, got 0"),
        ("max_in_flight", "must be a positive integer, got True"),
        ("connect_timeout", "must be a finite number of seconds > 0"),
        ("read_timeout", "must be a finite number of seconds > 0, or None"),
    )
    assert str(caught.value).startswith("invalid HTTP server settings: url: must be an http")


def test_header_values_never_appear_in_repr() -> None:
    p = HttpParameters(url="https://h/mcp", headers={"Authorization": SECRET, "X-Team": "blue"})
    assert SECRET not in repr(p)
    assert "headers={'Authorization': '***', 'X-Team': '***'}" in repr(p)


def test_secret_looking_headers_are_redacted_for_logs() -> None:
    headers = {
        "Authorization": "Bearer a",
        "X-Api-Key": "b",
        "Cookie": "c",
        "Mcp-Session-Id": "d",
        "X-Auth-Token": "e",
        "Accept": "text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
    }
    assert redacted_headers(headers) == {
        "Authorization": "***",
        "X-Api-Key": "***",
        "Cookie": "***",
        "Mcp-Session-Id": "***",
        "X-Auth-Token": "***",
        "Accept": "text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
    }
    assert looks_secret_header("proxy-authorization")
    assert not looks_secret_header("content-type")


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://127.0.0.1:8000/mcp", "http://127.0.0.1:8000/mcp"),
        ("https://user:pw@example.com/mcp?api_key=k", "https://example.com/mcp?..."),
        ("http://[::1]:9/x", "http://[::1]:9/x"),
        ("not a url at all\x00", "<invalid URL>"),
    ],
)
def test_display_url_hides_credentials_and_queries(url: str, shown: str) -> None:
    assert display_url(url) == shown


# --------------------------------------------------------------------------- under the runtime


async def test_the_runtime_speaks_streamable_http_through_its_default_transport(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="trio_mcp")
    headers = {"Authorization": f"Bearer {SECRET}", "X-Api-Key": SECRET}
    async with fake_server() as (fake, server):
        cfg = config(server, type=TransportKind.HTTP, headers=headers)
        async with open_default_transport(cfg.servers[0], open_inbox()) as transport:
            assert isinstance(transport, HttpTransport)
        async with open_runtime(cfg) as rt:
            with trio.fail_after(BOUND):
                await rt.wait_ready()
                status = rt.status()["h"]
                assert (status.state, status.transport, status.protocol_version) == (
                    ServerState.READY,
                    "http",
                    "2025-11-25",
                )
                assert (status.server_name, status.pid, status.tool_count) == ("fake-http", None, 1)
                result = await rt.call("mcp_h_echo", {"text": "over http"})
            assert result.text == "over http"
            assert SECRET not in repr(rt.status())
        assert all(r.header("x-api-key") == SECRET for r in server.requests)
        assert fake.deleted == ["session-1"]
    assert caplog.records, "debug logging was on"
    assert SECRET not in caplog.text
    assert "session-1" not in caplog.text


async def test_an_unreachable_server_is_retried_with_a_clear_error() -> None:
    url = f"http://127.0.0.1:{_free_port()}/mcp"
    config = RuntimeConfig(servers=(ServerConfig(name="h", url=url, connect_timeout=5.0),))
    async with open_runtime(config) as rt:
        with trio.fail_after(BOUND):
            statuses = await rt.wait_ready(timeout=0.5)
    status = statuses["h"]
    assert status.state is ServerState.CONNECTING
    assert status.last_error is not None
    # the first request is the probe (server/discover): it could not connect
    assert status.last_error.startswith(
        f"ConnectError: POST server/discover to {url} failed: could not connect ("
    )
    assert status.next_attempt_at is not None


async def test_an_http_error_fails_the_call_alone_and_the_server_stays_ready() -> None:
    async with fake_server() as (fake, server), runtime(server) as rt:
        fake.refuse["tools/call"] = (503, b"busy, try later")
        with trio.fail_after(BOUND), pytest.raises(HttpStatusError) as caught:
            await rt.call("mcp_h_echo", {"text": "x"})
        assert caught.value.status == 503
        assert str(caught.value) == (
            f"server 'h': POST tools/call to {server.base}/mcp: the server answered HTTP 503 "
            "Service Unavailable: busy, try later"
        )
        del fake.refuse["tools/call"]
        with trio.fail_after(BOUND):
            assert (await rt.call("mcp_h_echo", {"text": "y"})).text == "y"
        assert rt.status()["h"].state is ServerState.READY
        assert rt.status()["h"].generation == 1


@pytest.mark.parametrize("status", [404, 400])
async def test_an_expired_session_is_re_established_within_the_generation(status: int) -> None:
    async with fake_server(expiry_status=status) as (fake, server), runtime(server) as rt:
        fake.tools["extra"] = fake.tools["echo"]
        fake.expire()
        with trio.fail_after(BOUND):
            results = []

            async def one(text: str) -> None:
                results.append((await rt.call("mcp_h_echo", {"text": text})).text)

            async with trio.open_nursery() as nursery:
                for text in ("a", "b", "c"):
                    nursery.start_soon(one, text)
            assert sorted(results) == ["a", "b", "c"]
            while "mcp_h_extra" not in rt.tools():
                await rt.wait_tools_changed(rt.tools_version)
        assert fake.initializes == 2
        assert fake.issued[1:] == [fake.issued[-1]] and len(fake.issued) == 2
        status_now = rt.status()["h"]
        assert (status_now.state, status_now.generation) == (ServerState.READY, 1)
        assert fake.methods()[-5:].count("tools/list") == 1


async def test_a_call_lost_with_the_session_fails_as_outcome_unknown() -> None:
    started = trio.Event()
    streams: list[FakeStream] = []

    async def slow(call: ToolCall) -> Any:
        assert call.stream is not None
        streams.append(call.stream)
        started.set()
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async with fake_server(get_stream=False, retry_ms=20) as (fake, server):
        fake.tools["slow"] = slow
        async with runtime(server) as rt:
            caught: list[BaseException] = []
            failed = trio.Event()

            async def lost() -> None:
                try:
                    await rt.call("mcp_h_slow", {})
                except ServerDisconnected as exc:
                    caught.append(exc)
                finally:
                    failed.set()

            with trio.fail_after(BOUND):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(lost)
                    await started.wait()
                    fake.expire()
                    await streams[0].drop()
                    await failed.wait()  # the call ended (the asserts below say how)
                    assert (await rt.call("mcp_h_echo", {"text": "fine"})).text == "fine"
            [error] = caught
            assert isinstance(error, ServerDisconnected) and error.sent is True
            assert str(error) == (
                "server 'h' ended its session while tools/call was in flight: the outcome is "
                "unknown and the request is not re-sent"
            )
            assert fake.initializes == 2
            assert rt.status()["h"].generation == 1


async def test_a_second_expiry_while_re_initializing_reconnects_instead() -> None:
    initialized = 0
    async with fake_server() as (fake, server):

        async def hook(message: dict[str, Any]) -> None:
            nonlocal initialized
            if message.get("method") == "notifications/initialized":
                initialized += 1
                if initialized == 2:
                    fake.expire()  # the new session dies at once

        fake.on_message = hook
        async with runtime(server) as rt:
            with rt.events() as events:
                fake.expire()
                seen = []
                with trio.fail_after(BOUND):
                    with pytest.raises(ServerDisconnected) as caught:
                        await rt.call("mcp_h_echo", {"text": "x"})
                    # reconnected: READY again, in a new generation
                    while not (
                        rt.status()["h"].state is ServerState.READY
                        and rt.status()["h"].generation >= 2
                    ):
                        seen.append(await events.__anext__())
            # Refused again by the new session, held, and failed as never processed when no new
            # session could be had: safe to retry.
            assert caught.value.sent is False
            assert str(caught.value) == (
                f"server 'h': tools/call to {server.base}/mcp was never processed: the server "
                "ended the session before it, and no new session was initialized; it is safe to "
                "retry"
            )
            states = [getattr(e, "new", None) for e in seen]
            assert ServerState.RECONNECTING in states
            assert fake.initializes == 3  # the first, one re-initialize, the reconnection
            assert (await rt.call("mcp_h_echo", {"text": "again"})).text == "again"


async def test_a_failed_re_initialize_ends_the_connection_and_the_held_call_was_not_sent() -> None:
    initializes = 0
    async with fake_server() as (fake, server):

        async def hook(message: dict[str, Any]) -> None:
            nonlocal initializes
            if message.get("method") == "initialize":
                initializes += 1
                if initializes == 2:
                    fake.refuse["initialize"] = (500, b"database is down")
                else:
                    fake.refuse.pop("initialize", None)

        fake.on_message = hook
        async with runtime(server) as rt:
            fake.expire()
            with trio.fail_after(BOUND):
                with pytest.raises(ServerDisconnected) as caught:
                    await rt.call("mcp_h_echo", {"text": "x"})
                assert caught.value.sent is False
                await wait_state(rt, ServerState.READY, generation=2)
                assert (await rt.call("mcp_h_echo", {"text": "back"})).text == "back"
            assert initializes == 3


async def test_a_killed_server_fails_the_call_promptly_and_is_reconnected_when_back() -> None:
    started = trio.Event()

    async def slow(call: ToolCall) -> Any:
        started.set()
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async with fake_server() as (fake, server):
        fake.tools["slow"] = slow
        async with runtime(server) as rt:
            caught: list[ServerDisconnected] = []

            async def doomed() -> None:
                with pytest.raises(ServerDisconnected) as raised:
                    await rt.call("mcp_h_slow", {})
                caught.append(raised.value)

            with trio.fail_after(BOUND):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(doomed)
                    await started.wait()
                    await server.kill()
                # promptly: a ServerDisconnected (not the call's timeout), outcome unknown
                assert caught[0].sent is True
                assert "its outcome is unknown" in str(caught[0])
                await wait_state(rt, ServerState.RECONNECTING)  # after the withdrawal
                assert "mcp_h_slow" not in rt.tools()
                await server.start()
                await wait_state(rt, ServerState.READY, generation=2)
                assert (await rt.call("mcp_h_echo", {"text": "back"})).text == "back"


async def test_a_list_changed_on_the_get_stream_relists_the_tools() -> None:
    async with fake_server() as (fake, server), runtime(server) as rt:
        with trio.fail_after(BOUND):
            await fake.wait_until(lambda: len(fake.get_streams) == 1)
            fake.tools["extra"] = fake.tools["echo"]
            await fake.push({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            while "mcp_h_extra" not in rt.tools():
                await rt.wait_tools_changed(rt.tools_version)
