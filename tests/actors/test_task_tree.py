"""The shape of the runtime, read from the live task tree (DESIGN.md "Actors", and the drawing in
docs/architecture.md), and the task each actor's state changes in.

Under the runtime's root: one registry task and one supervisor task per configured server, all
siblings in the runtime's nursery. Under a supervisor that is READY (and settled): one connection
task (one connection generation), holding the session's task (with its pending-call table, its
dispatcher and its re-lister as tasks of their own; a Streamable HTTP session has its control loop
too; a session with subscriptions, its subscriber: every 2026-07-28 session whose server
announces changes, a legacy one whose server offers resource subscriptions) and, for a stdio
server, the transport's I/O tasks (reader, writer, stderr drain and exit waiter); an in-memory
fake's end has no I/O task, and the fake serves it in the connection task's scope. Nothing else.

After a stdio server is killed with SIGKILL and comes back (generation 2, a new pid), the tree
holds exactly one generation's tasks again, and wrappers around each actor's state-changing
methods (the registry's table and publication, the supervisor's transitions, the pending-call
table's handling and its waiters, the dispatcher's handling) record that each of them ran only
in its actor's own task, across both generations and the shutdown.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from tests.actors.oauth_fakes import FakeOAuth
from trio_mcp.actors import RetryPolicy, RuntimeConfig, ServerConfig, ServerState, open_runtime
from trio_mcp.actors.runtime._dispatcher import Dispatcher
from trio_mcp.actors.runtime._outputcheck import PatternWorker
from trio_mcp.actors.runtime._pending import PendingCalls, Subscription, Waiter
from trio_mcp.actors.runtime._registry import Registry, ToolTable
from trio_mcp.actors.runtime._subscriptions import Subscriber
from trio_mcp.actors.runtime._supervisor import ServerSupervisor
from trio_mcp.actors.testing import FakeResource, FakeServer, FakeTool

HOSTILE = Path(__file__).with_name("hostile_server.py")

RUNTIME = "trio_mcp.actors.runtime."
SUPERVISOR = RUNTIME + "_supervisor.ServerSupervisor"
STDIO = "trio_mcp.transports.stdio._stdio.StdioTransport."


def short(task: trio.lowlevel.Task) -> str:
    """``Registry.run``, ``StdioTransport._run_reader``... for a task of the runtime."""
    return ".".join(task.name.split(".")[-2:])


def children(task: trio.lowlevel.Task) -> list[trio.lowlevel.Task]:
    return [child for nursery in task.child_nurseries for child in nursery.child_tasks]


def descendants(task: trio.lowlevel.Task) -> Iterator[trio.lowlevel.Task]:
    for child in children(task):
        yield child
        yield from descendants(child)


def find(root: trio.lowlevel.Task | None, name: str) -> list[trio.lowlevel.Task]:
    assert root is not None
    return [task for task in descendants(root) if short(task) == name]


def shape(task: trio.lowlevel.Task) -> Counter[str]:
    """The tasks below ``task``, by name, in a Counter."""
    return Counter(short(child) for child in descendants(task))


def stdio_server() -> ServerConfig:
    return ServerConfig(
        name="proc",
        command=sys.executable,
        args=(str(HOSTILE),),
        connect_timeout=30,
        timeout=30,
    )


SESSION_TASKS = Counter(
    {
        "ServerSupervisor._connection": 1,
        "Session.run": 1,
        "PendingCalls.run": 1,
        "Dispatcher.run": 1,
        "Session._relister": 1,
    }
)
STDIO_TASKS = Counter(
    {
        "StdioTransport._run_reader": 1,
        "StdioTransport._run_writer": 1,
        "StdioTransport._run_stderr": 1,
        "StdioTransport._run_waiter": 1,
    }
)


async def test_the_live_task_tree_has_the_shape_of_the_design() -> None:
    memory = FakeServer(name="mem", tools=[FakeTool("t")])
    config = RuntimeConfig(servers=(stdio_server(), memory.server_config()))
    with trio.fail_after(60):
        async with open_runtime(config) as rt:
            await rt.wait_ready()
            root = trio.lowlevel.current_root_task()
            (registry,) = find(root, "Registry.run")
            supervisors = find(root, "ServerSupervisor.run")
            assert len(supervisors) == 2
            # the registry and the supervisors are siblings in the runtime's nursery
            assert registry.parent_nursery is supervisors[0].parent_nursery
            assert supervisors[0].parent_nursery is supervisors[1].parent_nursery
            by_server = {_server_of(s): s for s in supervisors}
            assert set(by_server) == {"proc", "mem"}

            # a stdio server: the session's actors and the transport's four I/O tasks, all
            # under the one connection task of its generation
            assert shape(by_server["proc"]) == SESSION_TASKS + STDIO_TASKS
            (connection,) = children(by_server["proc"])
            assert short(connection) == "ServerSupervisor._connection"
            session_tasks = {short(t) for t in children(connection)}
            assert "Session.run" in session_tasks
            (session,) = find(connection, "Session.run")
            assert {short(t) for t in children(session)} == {
                "PendingCalls.run",
                "Dispatcher.run",
                "Session._relister",
            }
            # an in-memory server: the same session actors; the fake serves its end in the
            # connection task's scope, and a memory end has no I/O task of its own
            mem = shape(by_server["mem"])
            assert mem - Counter({"FakeServer.serve_transport": 1}) == SESSION_TASKS
            # one pending-call table per session, in all
            assert len(find(root, "PendingCalls.run")) == 2
            assert (await rt.call("mcp_proc_go")).text == "ok"


def _server_of(supervisor_task: trio.lowlevel.Task) -> str:
    """The server of a supervisor task (the supervisor object is the bound ``self``)."""
    frame = supervisor_task.coro.cr_frame
    assert frame is not None
    return str(frame.f_locals["self"].name)


#: State-changing methods of each actor, and the one task allowed to run them.
OWNERS = {
    (ToolTable, "apply"): "Registry.run",
    (Registry, "_publish"): "Registry.run",
    (ServerSupervisor, "_set_state"): "ServerSupervisor.run",
    (ServerSupervisor, "_handle"): "ServerSupervisor.run",
    (PendingCalls, "_handle"): "PendingCalls.run",
    (PendingCalls, "_end"): "PendingCalls.run",
    (Waiter, "resolve"): "PendingCalls.run",
    (Waiter, "answer"): "PendingCalls.run",
    (Dispatcher, "_handle"): "Dispatcher.run",
}
#: Methods the run below need not reach: a waiter is resolved with an outcome only for a
#: failure or an error answer (answers go through Waiter.answer), and it has neither.
NOT_ALWAYS_RUN = {"Waiter.resolve"}


async def test_the_shape_comes_back_after_a_sigkill_and_each_actor_runs_in_its_own_task(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runs: Counter[tuple[str, str]] = Counter()

    def watch(cls: type, name: str) -> None:
        original = getattr(cls, name)

        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            runs[(f"{cls.__name__}.{name}", short(trio.lowlevel.current_task()))] += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(cls, name, wrapper)

    for cls, name in OWNERS:
        watch(cls, name)
    retry = RetryPolicy(reconnect_initial=0.05, jitter=0.0)
    config = RuntimeConfig(servers=(stdio_server(),), retry=retry)
    with trio.fail_after(60):
        async with open_runtime(config) as rt:
            await rt.wait_ready()
            pid = rt.status()["proc"].pid
            assert pid is not None
            with rt.events() as events:
                os.kill(pid, signal.SIGKILL)
                async for event in events:
                    if getattr(event, "new", None) is ServerState.READY:
                        break
            await rt.wait_ready()
            root = trio.lowlevel.current_root_task()
            (supervisor,) = find(root, "ServerSupervisor.run")
            # exactly one generation's tasks: the dead connection's are all gone
            assert shape(supervisor) == SESSION_TASKS + STDIO_TASKS
            assert rt.status()["proc"].generation == 2
            assert rt.status()["proc"].pid != pid
            assert (await rt.call("mcp_proc_go")).text == "ok"
    # every state change of every actor, across both generations and the shutdown, ran in
    # the actor's own task
    expected = {f"{cls.__name__}.{name}": owner for (cls, name), owner in OWNERS.items()}
    seen = {method for method, _ in runs}
    assert set(expected) - NOT_ALWAYS_RUN <= seen <= set(expected)
    wrong = {(method, task): n for (method, task), n in runs.items() if task != expected[method]}
    assert wrong == {}


async def test_the_checking_process_task_appears_with_the_first_schema_with_patterns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Results checked against an outputSchema with regular expressions are checked in a
    process owned by one task, ``PatternWorker.run``, in the runtime's nursery (a sibling of the
    registry); it is started by the first such check, never before, and only that task starts,
    uses and stops the process."""
    runs: Counter[tuple[str, str]] = Counter()
    for name in ("_start", "_check", "_stop"):
        original = getattr(PatternWorker, name)

        def wrapper(*args: Any, __original: Any = original, __name: str = name) -> Any:
            runs[(__name, short(trio.lowlevel.current_task()))] += 1
            return __original(*args)

        monkeypatch.setattr(PatternWorker, name, wrapper)
    plain = {"type": "object", "properties": {"id": {"type": "string"}}}
    patterned = {"type": "object", "properties": {"id": {"type": "string", "pattern": "^a"}}}
    answer = {"content": [], "structuredContent": {"id": "abc"}}
    memory = FakeServer(
        name="mem",
        tools=[
            FakeTool("plain", output_schema=plain, result=answer),
            FakeTool("patterned", output_schema=patterned, result=answer),
        ],
    )
    config = RuntimeConfig(servers=(memory.server_config(),))
    with trio.fail_after(60):
        async with open_runtime(config) as rt:
            await rt.wait_ready()
            root = trio.lowlevel.current_root_task()
            await rt.call("mcp_mem_plain")
            assert find(root, "PatternWorker.run") == []
            await rt.call("mcp_mem_patterned")
            (worker,) = find(root, "PatternWorker.run")
            (registry,) = find(root, "Registry.run")
            assert worker.parent_nursery is registry.parent_nursery
            assert children(worker) == []
            await rt.call("mcp_mem_patterned")
            assert len(find(root, "PatternWorker.run")) == 1
    assert {task for _, task in runs} == {"PatternWorker.run"}
    assert runs[("_start", "PatternWorker.run")] == 1
    assert runs[("_check", "PatternWorker.run")] == 2


async def test_a_modern_session_has_its_subscriber_and_a_legacy_one_only_for_resources(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A 2026-07-28 session whose server announces changes has one more task under its session
    task: ``Subscriber.run``, which owns its ``subscriptions/listen`` (with
    ``Subscriber._watch_interest`` below it when the server offers resource subscriptions:
    it wakes the subscriber when the host's resource set changes). A legacy session has one
    only when the server offers resource subscriptions; the subscriber's notifications reach
    the dispatcher, which alone acts on them (and the table alone feeds the subscriber)."""
    runs: Counter[tuple[str, str]] = Counter()
    owners = {
        (Subscription, "push"): "PendingCalls.run",
        (Subscription, "end"): "PendingCalls.run",
        (Subscriber, "_received"): "Subscriber.run",
        (Dispatcher, "_handle"): "Dispatcher.run",
    }
    for cls, name in owners:
        original = getattr(cls, name)

        def wrapper(*args: Any, __original: Any = original, __key: str = name, **kw: Any) -> Any:
            runs[(__key, short(trio.lowlevel.current_task()))] += 1
            return __original(*args, **kw)

        monkeypatch.setattr(cls, name, wrapper)
    modern = FakeServer(name="new", era="modern", tools=[FakeTool("t")])
    resources = FakeServer(
        name="res", era="modern", resources=[FakeResource("doc://a", "a")], tools=[FakeTool("t")]
    )
    legacy = FakeServer(name="old", resources=[FakeResource("doc://a", "a")])
    config = RuntimeConfig(
        servers=(modern.server_config(), resources.server_config(), legacy.server_config())
    )
    with trio.fail_after(60):
        async with open_runtime(config) as rt:
            await rt.wait_ready()
            root = trio.lowlevel.current_root_task()
            by_server = {_server_of(s): s for s in find(root, "ServerSupervisor.run")}
            subscriber = Counter({"Subscriber.run": 1})
            watcher = Counter({"Subscriber._watch_interest": 1})
            # the fake serves the open listen in a request task of its own, beside its end
            fake = Counter({"FakeServer.serve_transport": 1, "FakeServer._serve_request": 1})
            assert shape(by_server["new"]) == SESSION_TASKS + subscriber + fake
            assert shape(by_server["res"]) == SESSION_TASKS + subscriber + watcher + fake
            legacy_fake = Counter({"FakeServer.serve_transport": 1})
            assert shape(by_server["old"]) == SESSION_TASKS + subscriber + watcher + legacy_fake
            for name in ("new", "res", "old"):
                (session,) = find(by_server[name], "Session.run")
                (task,) = find(session, "Subscriber.run")
                assert task.parent_nursery is find(session, "Dispatcher.run")[0].parent_nursery
            # what the listens hear, and their ends, run through the owners' tasks only
            await modern.emit_list_changed()
            await modern.end_listens()
            await trio.testing.wait_all_tasks_blocked()
    expected = {name: owner for (_, name), owner in owners.items()}
    assert {name for name, _ in runs} == set(expected)
    assert {(name, task) for name, task in runs if task != expected[name]} == set()


async def test_a_servers_sign_in_runs_under_its_supervisor_beside_its_connection() -> None:
    """A server with OAuth: its sign-in actor is a task of its supervisor's nursery, a sibling
    of the connection task (it outlives connections), and the only task beyond the session's
    actors; a server without OAuth has none."""
    memory = FakeServer(name="mem", tools=[FakeTool("t")])
    oauth = FakeOAuth()

    @asynccontextmanager
    async def to_memory(server: ServerConfig, sink: Any) -> Any:
        async with memory.connect(sink) as transport:
            yield transport

    web = ServerConfig(name="web", url="https://mcp.example/mcp", auth="oauth")
    plain = ServerConfig(name="plain", url="https://other.example/mcp")
    config = RuntimeConfig(servers=(web, plain))
    with trio.fail_after(60):
        async with open_runtime(config, open_transport=to_memory, oauth=oauth.factories()) as rt:
            await rt.wait_ready()
            root = trio.lowlevel.current_root_task()
            by_server = {_server_of(s): s for s in find(root, "ServerSupervisor.run")}
            assert {short(t) for t in children(by_server["web"])} == {
                "FakeSignIn.run",
                "ServerSupervisor._connection",
            }
            assert (
                shape(by_server["web"])
                - Counter({"FakeSignIn.run": 1, "FakeServer.serve_transport": 1})
                == SESSION_TASKS
            )
            assert "FakeSignIn.run" not in shape(by_server["plain"])
            assert len(find(root, "FakeSignIn.run")) == 1
