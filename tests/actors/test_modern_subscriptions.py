"""Subscriptions (2026-07-28 ``subscriptions/listen``, and the host's resource subscriptions in
both eras), against the in-memory fake server on trio's virtual clock (exact times).

A modern session opens one listen, before its first listing, asking for what the server's
capabilities announce; the server's change notifications arrive tagged with the listen's id
and feed the same debounced re-listing as a legacy server's. The listen is not a call: no
timeout, no place among the calls waiting. It is opened again after the server ends it (with
a back-off), with the new set when the host's resource subscriptions change, and by every new
connection's session.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

import pytest
import trio
import trio.testing

from trio_mcp.actors.config._backoff import RetryPolicy
from trio_mcp.actors.config._config import RuntimeConfig, ServerConfig
from trio_mcp.actors.runtime._events import (
    ListChanged,
    ResourceUpdated,
    ServerState,
    ToolsChanged,
)
from trio_mcp.actors.runtime._runtime import Runtime, open_runtime
from trio_mcp.actors.runtime._subscriptions import LISTEN_RETRY_INITIAL, LISTEN_RETRY_MAX
from trio_mcp.actors.testing._fakes import FakePrompt, FakeResource, FakeServer, FakeTool
from trio_mcp.protocol import LocalProtocolError, ServerDisconnected, ServerUnavailable

Clock = trio.testing.MockClock

SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
DEBOUNCE = 0.25  # RuntimeConfig.list_changed_debounce, the default


def config(*servers: ServerConfig, **options: Any) -> RuntimeConfig:
    options.setdefault("retry", RetryPolicy(jitter=0.0))
    return RuntimeConfig(servers=servers, **options)


def methods(fake: FakeServer) -> list[str]:
    return [method for method, _ in fake.requests]


def listings(fake: FakeServer) -> int:
    return methods(fake).count("tools/list")


def modern(**options: Any) -> FakeServer:
    options.setdefault("tools", [FakeTool("a")])
    return FakeServer(name="m", era="modern", **options)


def drain(events: Any) -> list[Any]:
    """The events received so far."""
    seen = []
    while True:
        try:
            seen.append(events.receive_nowait())
        except trio.WouldBlock:
            return seen


async def reconnected(rt: Runtime, server: str, generation: int) -> None:
    while True:
        status = rt.status()[server]
        if status.state is ServerState.READY and status.generation == generation:
            return
        await rt._supervisors[server].wait_changed()


def warnings_of(caplog: pytest.LogCaptureFixture, server: str) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == f"trio_mcp.server.{server}" and record.levelno == logging.WARNING
    ]


# --------------------------------------------------------------------------- the listen


async def test_the_listen_asks_for_what_the_server_announces_before_the_first_listing(
    autojump_clock: Clock,
) -> None:
    fake = modern(prompts=[FakePrompt("p")], resources=[FakeResource("doc://a", "a")])
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        (listen,) = fake.listens
        assert listen.notifications == {
            "toolsListChanged": True,
            "promptsListChanged": True,
            "resourcesListChanged": True,
        }  # no resourceSubscriptions: the host subscribed to nothing
        assert (listen.connection, listen.at) == (1, 0)
        assert methods(fake) == ["server/discover", "subscriptions/listen", "tools/list"]
        assert fake.open_listens == {1: (listen.request_id,)}
        # the listen carries the request envelope like any request
        params = dict(fake.requests[1][1] or {})
        assert params["_meta"]["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
        # it is not a call: nothing waits among the calls, and it never times out
        session = rt._supervisors["m"].ready_session()
        stats = session.statistics()
        assert (stats.outstanding, stats.subscriptions) == (0, 1)
        await trio.sleep(10 * 3600)
        assert fake.open_listens == {1: (listen.request_id,)}
        assert fake.cancellations == []
        assert (await rt.call("mcp_m_a", {})).text == "{}"
        stats = session.statistics()
        # answered: discover, tools/list, tools/call; the listen is in none of the counts
        assert (stats.outstanding, stats.resolved_total, stats.subscriptions) == (0, 3, 1)


async def test_a_tool_change_reaches_the_registry_through_the_listen_once_per_debounce(
    autojump_clock: Clock,
) -> None:
    fake = modern()
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        with rt.events() as events:
            fake.set_tools([FakeTool("b"), FakeTool("c")])
            for at in (5.0, 5.1, 5.2):
                await trio.sleep_until(at)
                assert await fake.emit_list_changed() == 1  # on the listen, tagged with its id
            version = await rt.wait_tools_changed(rt.tools_version)
            assert trio.current_time() == pytest.approx(5.2 + DEBOUNCE)
            (change,) = drain(events)
            assert isinstance(change, ToolsChanged)
            assert (change.added, change.removed, change.version) == (
                ("mcp_m_b", "mcp_m_c"),
                ("mcp_m_a",),
                version,
            )
            assert set(rt.tools()) == {"mcp_m_b", "mcp_m_c"}
            assert listings(fake) == 2  # the first listing and one re-listing for the burst
            await trio.sleep(60)
            assert listings(fake) == 2
            # the next change, the next window
            fake.set_tools([FakeTool("d")])
            await trio.sleep_until(100)
            await fake.emit_list_changed()
            await rt.wait_tools_changed(version)
            assert trio.current_time() == pytest.approx(100 + DEBOUNCE)
            assert set(rt.tools()) == {"mcp_m_d"}
            assert listings(fake) == 3


async def test_prompt_and_resource_list_changes_become_host_events(autojump_clock: Clock) -> None:
    fake = modern(prompts=[FakePrompt("p")], resources=[FakeResource("doc://a", "a")])
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        with rt.events() as events:
            await fake.emit_list_changed("prompts")
            await fake.emit_list_changed("resources")
            await trio.testing.wait_all_tasks_blocked()
            assert drain(events) == [
                ListChanged(server="m", kind="prompts"),
                ListChanged(server="m", kind="resources"),
            ]
        assert listings(fake) == 1


async def test_notifications_for_an_unknown_subscription_are_ignored(
    autojump_clock: Clock,
) -> None:
    fake = modern(prompts=[FakePrompt("p")])
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        (listen,) = fake.listens
        with rt.events() as events:
            for stale in (999, str(listen.request_id), True, None, [listen.request_id]):
                tagged = {"_meta": {SUBSCRIPTION_ID: stale}}
                await fake.notify("notifications/tools/list_changed", tagged)
                await fake.notify("notifications/prompts/list_changed", tagged)
            await trio.sleep(10)
            assert listings(fake) == 1
            assert drain(events) == []
            # a change without any subscription id is taken as one (a lenient reading: the
            # revision sends none outside a listen)
            await fake.notify("notifications/tools/list_changed")
            await trio.sleep(10)
            assert listings(fake) == 2


async def test_a_notification_the_listen_did_not_ask_for_is_dropped(
    autojump_clock: Clock,
) -> None:
    fake = modern(resources=[FakeResource("doc://a", "a"), FakeResource("doc://b", "b")])
    async with open_runtime(config(fake.server_config())) as rt:
        rt.subscribe_resource("m", "doc://a")
        await rt.wait_ready()
        listen = fake.listens[-1]
        assert listen.notifications["resourceSubscriptions"] == ["doc://a"]
        tag = {"_meta": {SUBSCRIPTION_ID: listen.request_id}}
        with rt.events() as events:
            await fake.notify("notifications/resources/updated", {"uri": "doc://b", **tag})
            await fake.notify("notifications/resources/updated", {"uri": "doc://a", **tag})
            await fake.notify("notifications/message", {"level": "error", "data": "x", **tag})
            await trio.testing.wait_all_tasks_blocked()
            assert drain(events) == [ResourceUpdated(server="m", uri="doc://a")]


async def test_what_the_server_does_not_honour_is_logged(
    autojump_clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    fake = modern(
        prompts=[FakePrompt("p")],
        resources=[FakeResource("doc://a", "a"), FakeResource("doc://b", "b")],
        listen_ignores={"promptsListChanged", "doc://b"},
    )
    caplog.set_level(logging.WARNING)
    async with open_runtime(config(fake.server_config())) as rt:
        rt.subscribe_resource("m", "doc://a")
        rt.subscribe_resource("m", "doc://b")
        await rt.wait_ready()
        await trio.testing.wait_all_tasks_blocked()
        assert fake.listens[-1].notifications["resourceSubscriptions"] == ["doc://a", "doc://b"]
        assert warnings_of(caplog, "m") == [
            "the server did not honour part of subscriptions/listen: promptsListChanged, "
            "resourceSubscriptions doc://b; those changes are not seen on this connection"
        ]
        with rt.events() as events:
            assert await fake.emit_list_changed("prompts") == 0
            assert await fake.notify_resource_updated("doc://b") == 0
            assert await fake.notify_resource_updated("doc://a") == 1
            await trio.testing.wait_all_tasks_blocked()
            assert drain(events) == [ResourceUpdated(server="m", uri="doc://a")]


# --------------------------------------------------------------------------- its lifetime


async def test_a_listen_the_server_ends_is_opened_again_after_a_bounded_back_off(
    autojump_clock: Clock,
) -> None:
    fake = modern()
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        with rt.events() as events:
            # graceful end (the listen's answer) at 10: open again 1 s later, and list the
            # tools again once acknowledged (a change meanwhile was not notified)
            await trio.sleep_until(10)
            assert await fake.end_listens("result") == 1
            await trio.sleep_until(15)
            assert [listen.at for listen in fake.listens] == [0, 10 + LISTEN_RETRY_INITIAL]
            assert listings(fake) == 2
            # ended again soon: the wait doubles (2 s), then 4 s (a cancellation this time)
            await trio.sleep_until(20)
            await fake.end_listens("result")
            await trio.sleep_until(30)
            await fake.end_listens("cancelled")
            await trio.sleep_until(40)
            assert [listen.at for listen in fake.listens] == [0, 11, 22, 34]
            # a listen that lasted LISTEN_RETRY_MAX starts the count again
            await trio.sleep_until(34 + LISTEN_RETRY_MAX)
            await fake.end_listens("result")
            await trio.sleep_until(80)
            assert fake.listens[-1].at == 34 + LISTEN_RETRY_MAX + LISTEN_RETRY_INITIAL
            assert len(fake.open_listens[1]) == 1
            assert fake.cancellations == []  # the client never cancelled an ended listen
            assert listings(fake) == 5
            assert not [e for e in drain(events) if isinstance(e, ToolsChanged)]  # same tools
        assert rt.status()["m"].generation == 1  # all on one connection


async def test_only_the_listen_after_an_end_fetches_again(autojump_clock: Clock) -> None:
    fake = modern(resources=[FakeResource("doc://a", "a")])
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        with rt.events() as events:
            await fake.end_listens()
            await trio.sleep(LISTEN_RETRY_INITIAL + 1)
            assert len(fake.listens) == 2
            assert listings(fake) == 2  # the tools listed again
            assert ListChanged(server="m", kind="resources") in drain(events)
            # a new set replaces the listen with no gap: nothing to fetch again
            rt.subscribe_resource("m", "doc://a")
            await trio.sleep(1)
            assert len(fake.listens) == 3
            assert listings(fake) == 2
            assert drain(events) == []


async def test_each_new_connection_opens_its_own_listen(autojump_clock: Clock) -> None:
    fake = modern()
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        await trio.sleep_until(5)
        await fake.disconnect()  # a server that restarts: it holds no subscription state
        await reconnected(rt, "m", 2)
        assert [(listen.connection, listen.at) for listen in fake.listens] == [(1, 0), (2, 6)]
        (second,) = fake.open_listens[2]
        assert second == fake.listens[1].request_id
        fake.set_tools([FakeTool("z")])
        await fake.emit_list_changed()
        await rt.wait_tools_changed(rt.tools_version)
        assert set(rt.tools()) == {"mcp_m_z"}


async def test_a_server_that_does_not_serve_the_listen_is_not_asked_again(
    autojump_clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    fake = modern(errors={"subscriptions/listen": (-32601, "Method not found")})
    caplog.set_level(logging.WARNING)
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        await trio.sleep(3600)
        assert methods(fake).count("subscriptions/listen") == 1
        (warning,) = warnings_of(caplog, "m")
        assert warning.startswith("the server does not serve subscriptions/listen")
        assert rt._supervisors["m"].ready_session().statistics().subscriptions == 0


async def test_a_listen_refused_for_another_reason_is_tried_again_with_back_off(
    autojump_clock: Clock,
) -> None:
    fake = modern(errors={"subscriptions/listen": (-32603, "busy")})
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        # refused at 0, then tried at 1, 3, 7, 15 (the wait doubles from 1 s)
        for before, count in ((0.99, 1), (2.99, 2), (6.99, 3), (14.99, 4), (30.99, 5)):
            await trio.sleep_until(before)
            assert methods(fake).count("subscriptions/listen") == count, before
            await trio.sleep_until(before + 0.02)
            assert methods(fake).count("subscriptions/listen") == count + 1, before
        assert listings(fake) == 1  # no listen was ever acknowledged: nothing to refetch


async def test_a_server_that_announces_nothing_gets_no_listen(autojump_clock: Clock) -> None:
    fake = modern(capabilities={"tools": {}})
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        await trio.sleep(10)
        assert methods(fake) == ["server/discover", "tools/list"]
        # subscribing to a resource of a server without resources.subscribe asks for nothing
        rt.subscribe_resource("m", "doc://a")
        await trio.sleep(10)
        assert fake.listens == []


# --------------------------------------------------------------------------- resource subscriptions


async def test_subscribing_opens_the_listen_again_with_the_new_set_before_closing_the_old(
    autojump_clock: Clock,
) -> None:
    fake = modern(resources=[FakeResource("doc://a", "a"), FakeResource("doc://b", "b")])
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        (first,) = fake.listens
        assert "resourceSubscriptions" not in first.notifications
        with rt.events() as events:
            await trio.sleep_until(5)
            rt.subscribe_resource("m", "doc://a")
            rt.subscribe_resource("m", "doc://a")  # once is enough
            await trio.testing.wait_all_tasks_blocked()
            second = fake.listens[-1]
            assert second.notifications == {
                "toolsListChanged": True,
                "resourcesListChanged": True,
                "resourceSubscriptions": ["doc://a"],
            }
            assert second.at == 5
            # make before break: the old listen was cancelled after the new one went out
            assert fake.cancellations == [first.request_id]
            assert methods(fake)[-1] == "subscriptions/listen"
            assert fake.open_listens == {1: (second.request_id,)}
            assert fake.subscriptions == {"doc://a"}
            assert rt.resource_subscriptions("m") == {"doc://a"}
            assert await fake.notify_resource_updated("doc://a") == 1
            assert await fake.notify_resource_updated("doc://b") == 0
            await trio.testing.wait_all_tasks_blocked()
            assert drain(events) == [ResourceUpdated(server="m", uri="doc://a")]

            rt.subscribe_resource("m", "doc://b")
            await trio.testing.wait_all_tasks_blocked()
            assert fake.listens[-1].notifications["resourceSubscriptions"] == [
                "doc://a",
                "doc://b",
            ]
            rt.unsubscribe_resource("m", "doc://a")
            rt.unsubscribe_resource("m", "doc://b")
            rt.unsubscribe_resource("m", "doc://c")  # never subscribed: nothing happens
            await trio.testing.wait_all_tasks_blocked()
            assert "resourceSubscriptions" not in fake.listens[-1].notifications
            assert len(fake.listens) <= 5
            assert len(fake.open_listens[1]) == 1
            assert fake.subscriptions == frozenset()
            assert await fake.notify_resource_updated("doc://a") == 0
        assert listings(fake) == 1  # a new set is no reason to list the tools again


async def test_resource_subscriptions_made_before_the_server_is_ready_are_in_its_first_listen(
    autojump_clock: Clock,
) -> None:
    fake = modern(resources=[FakeResource("doc://a", "a")], respond_after={"server/discover": 1})
    async with open_runtime(config(fake.server_config())) as rt:
        rt.subscribe_resource("m", "doc://a")
        await rt.wait_ready()
        (listen,) = fake.listens
        assert listen.notifications["resourceSubscriptions"] == ["doc://a"]
        # and every later connection asks for them too
        await fake.disconnect()
        await reconnected(rt, "m", 2)
        assert fake.listens[-1].notifications["resourceSubscriptions"] == ["doc://a"]
        assert fake.listens[-1].connection == 2


async def test_the_subscription_calls_check_their_arguments(autojump_clock: Clock) -> None:
    fake = modern()
    async with open_runtime(config(fake.server_config())) as rt:
        with pytest.raises(ServerUnavailable, match="no server named 'x'"):
            rt.subscribe_resource("x", "doc://a")
        for bad in ("", None, 3):
            with pytest.raises(LocalProtocolError, match="non-empty string"):
                rt.subscribe_resource("m", bad)  # type: ignore[arg-type]
        assert rt.resource_subscriptions("m") == frozenset()


# --------------------------------------------------------------------------- legacy sessions


async def test_a_legacy_session_has_no_listen_and_hears_changes_as_before(
    autojump_clock: Clock,
) -> None:
    fake = FakeServer(name="l", tools=[FakeTool("a")])
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        assert methods(fake) == ["server/discover", "initialize", "tools/list"]
        fake.set_tools([FakeTool("b")])
        await trio.sleep_until(5)
        await fake.emit_list_changed()
        await rt.wait_tools_changed(rt.tools_version)
        assert trio.current_time() == pytest.approx(5 + DEBOUNCE)
        assert set(rt.tools()) == {"mcp_l_b"}
        assert fake.listens == []
        assert rt._supervisors["l"].ready_session().statistics().subscriptions == 0


async def test_a_legacy_session_subscribes_to_the_hosts_resources_on_every_connection(
    autojump_clock: Clock,
) -> None:
    fake = FakeServer(
        name="l", resources=[FakeResource("doc://a", "a"), FakeResource("doc://b", "b")]
    )
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        with rt.events() as events:
            rt.subscribe_resource("l", "doc://a")
            await trio.testing.wait_all_tasks_blocked()
            assert fake.subscriptions == {"doc://a"}
            assert await fake.notify_resource_updated("doc://a") == 1
            await trio.testing.wait_all_tasks_blocked()
            assert drain(events) == [ResourceUpdated(server="l", uri="doc://a")]

            await fake.disconnect()
            await reconnected(rt, "l", 2)
            await trio.testing.wait_all_tasks_blocked()
            assert fake.subscriptions == {"doc://a"}  # the new connection subscribed again

            rt.unsubscribe_resource("l", "doc://a")
            rt.subscribe_resource("l", "doc://b")
            await trio.testing.wait_all_tasks_blocked()
            assert fake.subscriptions == {"doc://b"}
        subscribing = [
            (method, dict(params or {}).get("uri"))
            for method, params in fake.requests
            if method.startswith("resources/")
        ]
        assert subscribing == [
            ("resources/subscribe", "doc://a"),
            ("resources/subscribe", "doc://a"),  # the second connection
            ("resources/subscribe", "doc://b"),  # what is added first, then what is removed
            ("resources/unsubscribe", "doc://a"),
        ]
        assert fake.listens == []


async def test_a_legacy_refusal_is_logged_and_tried_again_on_the_next_change(
    autojump_clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeServer(
        name="l",
        resources=[FakeResource("doc://a", "a")],
        errors={"resources/subscribe": (-32602, "no such resource")},
    )
    caplog.set_level(logging.WARNING)
    async with open_runtime(config(fake.server_config())) as rt:
        await rt.wait_ready()
        rt.subscribe_resource("l", "doc://a")
        await trio.testing.wait_all_tasks_blocked()
        (warning,) = warnings_of(caplog, "l")
        assert warning.startswith("resources/subscribe doc://a failed:")
        assert "no such resource" in warning
        del fake.errors["resources/subscribe"]
        rt.subscribe_resource("l", "doc://b")
        await trio.testing.wait_all_tasks_blocked()
        assert fake.subscriptions == {"doc://a", "doc://b"}


async def test_a_restarted_stdio_server_gets_a_new_listen_from_the_new_session() -> None:
    """Over a real stdio child (the fake's stdio mode, the real clock): the server dies, the
    supervisor starts a new one, and the new connection's session opens its own listen (the
    new process knows nothing of the old one's)."""
    spec = {
        "name": "new",
        "era": "modern",
        "tools": [{"name": "echo", "kind": "echo"}, {"name": "die", "kind": "crash"}],
    }
    server = ServerConfig(
        name="new",
        command=sys.executable,
        args=("-m", "trio_mcp.actors.testing", "--spec-json", json.dumps(spec)),
        connect_timeout=20,
        timeout=20,
    )
    retry = RetryPolicy(jitter=0.0, reconnect_initial=0.05)
    with trio.fail_after(60):
        async with open_runtime(RuntimeConfig(servers=(server,), retry=retry)) as rt:
            await rt.wait_ready()
            first = rt._supervisors["new"].ready_session()
            assert first.statistics().subscriptions == 1
            with pytest.raises(ServerDisconnected):
                await rt.call("mcp_new_die")
            assert (await rt.call("mcp_new_echo", {}, wait_ready=20)).text == "{}"
            second = rt._supervisors["new"].ready_session()
            assert second is not first
            assert rt.status()["new"].generation == 2
            assert second.statistics().subscriptions == 1
