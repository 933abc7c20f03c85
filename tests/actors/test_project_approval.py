"""Servers that a project file adds do not start until that very entry is approved: by the
approval store (``trio-mcp project approve``) or by the host's ``approve_project_server``
callback; the approval is bound to the entry's content and reset when it changes."""

from __future__ import annotations

import json
import logging
import os
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from trio_mcp.actors.config._approvals import (
    ProjectApprovals,
    ProjectOrigin,
    ProjectServerRequest,
    entry_digest,
)
from trio_mcp.actors.config._backoff import RetryPolicy
from trio_mcp.actors.config._config import RuntimeConfig, ServerConfig
from trio_mcp.actors.config._loader import load_agentao_config, redacted_config
from trio_mcp.actors.runtime._events import ServerState
from trio_mcp.actors.runtime._runtime import open_runtime, serve_runtime
from trio_mcp.actors.testing._fakes import FakeServer, FakeTool
from trio_mcp.protocol import ConfigError

Clock = trio.testing.MockClock


@attrs.define
class Project:
    """A project directory, an approval store, and project servers backed by fakes."""

    root: Path
    store: Path

    def origin(self, entry: dict[str, Any]) -> ProjectOrigin:
        return ProjectOrigin(
            project=str(self.root),
            file=str(self.root / ".trio-mcp" / "mcp.json"),
            approvals_file=str(self.store),
            digest=entry_digest(entry),
            transport="stdio",
            command_line=" ".join([entry["command"], *entry.get("args", ())]),
        )

    def server(self, fake: FakeServer, entry: dict[str, Any]) -> ServerConfig:
        return attrs.evolve(fake.server_config(), project=self.origin(entry))


@pytest.fixture
def project(tmp_path: Path) -> Project:
    root = tmp_path / "proj"
    root.mkdir()
    return Project(root=root, store=tmp_path / "config" / "trio-mcp" / "project-approvals.json")


ENTRY: dict[str, Any] = {"command": "docs-server", "args": ["--root", "."]}


def config(*servers: ServerConfig) -> RuntimeConfig:
    return RuntimeConfig(servers=servers, retry=RetryPolicy(jitter=0.0))


def approver(
    answer: Any, asked: list[ProjectServerRequest]
) -> Callable[[ProjectServerRequest], Any]:
    def approve(request: ProjectServerRequest) -> Any:
        asked.append(request)
        return answer

    return approve


# --------------------------------------------------------------------------- the runtime


async def test_an_unapproved_project_server_stays_disabled_and_is_never_started(
    autojump_clock: Clock, project: Project, caplog: pytest.LogCaptureFixture
) -> None:
    docs = FakeServer(name="docs", tools=[FakeTool("search")])
    mine = FakeServer(name="mine", tools=[FakeTool("t")])
    with caplog.at_level(logging.WARNING, logger="trio_mcp.runtime"):
        async with open_runtime(config(mine.server_config(), project.server(docs, ENTRY))) as rt:
            statuses = await rt.wait_ready()
            assert statuses["mine"].state is ServerState.READY  # the user's own server runs
            status = statuses["docs"]
            assert status.state is ServerState.DISABLED
            assert sorted(rt.tools()) == ["mcp_mine_t"]
    assert docs.connect_times == []  # never started
    reason = (
        f"not approved: this server comes from the project file {project.root}/.trio-mcp/"
        f"mcp.json and would run docs-server --root .; to start it, approve it with: "
        f"trio-mcp project approve docs --project {project.root}"
    )
    assert status.last_error == reason
    assert [r.getMessage() for r in caplog.records] == [f"server 'docs': {reason}"]
    assert not project.store.exists()


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_the_host_approves_once_and_the_approval_is_remembered(
    autojump_clock: Clock, project: Project, asynchronous: bool
) -> None:
    docs = FakeServer(name="docs", tools=[FakeTool("search")])
    server = project.server(docs, ENTRY)
    asked: list[ProjectServerRequest] = []
    sync = approver(True, asked)

    async def approve_async(request: ProjectServerRequest) -> bool:
        await trio.lowlevel.checkpoint()
        result: bool = sync(request)
        return result

    approve: Callable[[ProjectServerRequest], bool | Awaitable[bool]] = (
        approve_async if asynchronous else sync
    )
    async with open_runtime(config(server), approve_project_server=approve) as rt:
        assert (await rt.wait_ready())["docs"].state is ServerState.READY
    assert [(r.server, r.project, r.command_line, r.changed) for r in asked] == [
        ("docs", str(project.root), "docs-server --root .", False)
    ]
    assert asked[0].describe() == (
        f"The project {project.root} adds the MCP server 'docs':\n"
        "  runs: docs-server --root .\n"
        f"  from: {project.root}/.trio-mcp/mcp.json"
    )
    # Remembered in the store, which only the user may read and write.
    stored = ProjectApprovals.load(project.store).get(str(project.root), "docs")
    assert stored is not None and stored.digest == entry_digest(ENTRY)
    assert stat.S_IMODE(project.store.stat().st_mode) == 0o600
    assert stat.S_IMODE(project.store.parent.stat().st_mode) == 0o700
    assert os.listdir(project.store.parent) == [project.store.name]  # no temporary file left
    # Next time it starts without asking; with no callback at all, too.
    async with open_runtime(config(server), approve_project_server=approve) as rt:
        assert (await rt.wait_ready())["docs"].state is ServerState.READY
    async with open_runtime(config(server)) as rt:
        assert (await rt.wait_ready())["docs"].state is ServerState.READY
    assert len(asked) == 1


@pytest.mark.parametrize("answer", [False, None, "yes", 1])
async def test_anything_but_true_leaves_the_server_disabled(
    autojump_clock: Clock, project: Project, answer: Any
) -> None:
    docs = FakeServer(name="docs", tools=[FakeTool("search")])
    asked: list[ProjectServerRequest] = []
    async with open_runtime(
        config(project.server(docs, ENTRY)), approve_project_server=approver(answer, asked)
    ) as rt:
        status = (await rt.wait_ready())["docs"]
    assert status.state is ServerState.DISABLED
    assert status.last_error is not None
    assert "; the host did not approve it; to start it, approve it with: trio-mcp project " in (
        status.last_error
    )
    assert docs.connect_times == []
    assert len(asked) == 1
    assert not project.store.exists()


async def test_a_changed_entry_needs_a_new_approval(
    autojump_clock: Clock, project: Project
) -> None:
    docs = FakeServer(name="docs", tools=[FakeTool("search")])
    ProjectApprovals.load(project.store).approve("docs", project.origin(ENTRY)).save()
    changed = {**ENTRY, "args": ["--root", "/", "--exfiltrate"]}
    async with open_runtime(config(project.server(docs, changed))) as rt:
        status = (await rt.wait_ready())["docs"]
    assert status.state is ServerState.DISABLED
    assert status.last_error is not None
    assert status.last_error.startswith(
        "changed since it was approved: this server comes from the project file "
    )
    assert "would run docs-server --root / --exfiltrate;" in status.last_error
    asked: list[ProjectServerRequest] = []
    async with open_runtime(
        config(project.server(docs, changed)), approve_project_server=approver(True, asked)
    ) as rt:
        assert (await rt.wait_ready())["docs"].state is ServerState.READY
    assert [r.changed for r in asked] == [True]
    assert "(changed since it was approved)" in asked[0].describe()


async def test_serve_runtime_holds_it_too_and_a_reconnect_does_not_start_it(
    autojump_clock: Clock, project: Project
) -> None:
    docs = FakeServer(name="docs", tools=[FakeTool("search")])
    async with trio.open_nursery() as nursery:
        rt = await nursery.start(serve_runtime, config(project.server(docs, ENTRY)))
        await rt.wait_ready()
        rt.reconnect("docs")
        await trio.sleep(10)
        status = rt.status()["docs"]
        await rt.aclose()
    assert status.state is ServerState.DISABLED
    assert status.last_error is not None and "trio-mcp project approve docs" in status.last_error
    assert docs.connect_times == []


async def test_an_unusable_store_approves_nothing_and_is_not_overwritten(
    autojump_clock: Clock, project: Project, caplog: pytest.LogCaptureFixture
) -> None:
    project.store.parent.mkdir(parents=True)
    project.store.write_text("not json")
    project.store.chmod(0o600)
    docs = FakeServer(name="docs", tools=[FakeTool("search")])
    with caplog.at_level(logging.WARNING, logger="trio_mcp.runtime"):
        async with open_runtime(config(project.server(docs, ENTRY))) as rt:
            assert (await rt.wait_ready())["docs"].state is ServerState.DISABLED
        # The host may still approve it, for this run.
        async with open_runtime(
            config(project.server(docs, ENTRY)), approve_project_server=approver(True, [])
        ) as rt:
            assert (await rt.wait_ready())["docs"].state is ServerState.READY
    assert project.store.read_text() == "not json"
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0].startswith(
        f"the project approval store {project.store} cannot be used: it is not valid JSON"
    )
    assert messages[0].endswith("; project servers stay DISABLED")


async def test_servers_of_the_user_and_of_code_are_never_asked_about(
    autojump_clock: Clock,
) -> None:
    mine = FakeServer(name="mine", tools=[FakeTool("t")])
    asked: list[ProjectServerRequest] = []
    async with open_runtime(
        config(mine.server_config()), approve_project_server=approver(False, asked)
    ) as rt:
        assert (await rt.wait_ready())["mine"].state is ServerState.READY
    assert asked == []


# --------------------------------------------------------------------------- the store


def test_the_store_is_refused_when_others_may_write_to_it(project: Project) -> None:
    ProjectApprovals.load(project.store).approve("docs", project.origin(ENTRY)).save()
    project.store.chmod(0o666)
    with pytest.raises(ConfigError) as info:
        ProjectApprovals.load(project.store)
    assert str(info.value) == (
        f"the project approval store {project.store} cannot be used: others may write to it "
        f"(chmod 600 {project.store}); fix or delete the file (deleting it forgets every "
        "approval: project servers are asked about again)"
    )


@pytest.mark.parametrize(
    ("document", "why"),
    [
        ([], 'it is not a version 1 approval store ({"version": 1})'),
        ({"version": 2}, 'it is not a version 1 approval store ({"version": 1})'),
        ({"version": 1, "projects": []}, "'projects' must be an object"),
        (
            {"version": 1, "projects": {"/p": {"a": {"digest": "x"}}}},
            'projects["/p"]["a"] must be an object with the strings digest, command_line, '
            "approved_at",
        ),
    ],
)
def test_a_malformed_store_is_refused(project: Project, document: Any, why: str) -> None:
    project.store.parent.mkdir(parents=True)
    project.store.write_text(json.dumps(document))
    with pytest.raises(ConfigError) as info:
        ProjectApprovals.load(project.store)
    assert info.value.problems == ((str(project.store), why),)


def test_approve_and_revoke_round_trip(project: Project) -> None:
    store = ProjectApprovals.load(project.store)
    assert list(store) == []
    origin = project.origin(ENTRY)
    store.approve("docs", origin).approve("web", origin).save()
    loaded = ProjectApprovals.load(project.store)
    assert [(a.project, a.server, a.command_line) for a in loaded] == [
        (str(project.root), "docs", "docs-server --root ."),
        (str(project.root), "web", "docs-server --root ."),
    ]
    assert loaded.is_approved("docs", origin)
    assert not loaded.is_approved("docs", attrs.evolve(origin, digest="sha256:other"))
    loaded.revoke(str(project.root), "docs").save()
    assert [a.server for a in ProjectApprovals.load(project.store)] == ["web"]


# --------------------------------------------------------------------------- the loader


def write(path: Path, value: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


def test_the_loader_marks_project_entries_with_their_origin(tmp_path: Path) -> None:
    xdg = tmp_path / "xdg"
    work = tmp_path / "work"
    write(xdg / "trio-mcp" / "mcp.json", {"mcpServers": {"mine": {"command": "m"}}})
    docs: dict[str, Any] = {
        "command": "npx",
        "args": ["-y", "docs server", "--token", "${DOCS_TOKEN}"],
        "env": {"NODE_OPTIONS": "--max-old-space-size=99", "KEY": "${KEY}"},
        "cwd": "/srv",
        "trust": True,
    }
    web = {"url": "https://h.example/mcp?k=${KEY}", "headers": {"Authorization": "Bearer x"}}
    project_file = write(
        work / ".trio-mcp" / "mcp.json", {"mcpServers": {"docs": docs, "web": web}}
    )
    environ = {"XDG_CONFIG_HOME": str(xdg), "DOCS_TOKEN": "tok-secret", "KEY": "k-secret"}
    loaded = load_agentao_config(working_dir=work, environ=environ)
    by_name = {s.name: s for s in loaded.config.servers}
    assert by_name["mine"].project is None
    origin = by_name["docs"].project
    assert origin == ProjectOrigin(
        project=str(work.resolve()),
        file=str(project_file),
        approvals_file=str(xdg / "trio-mcp" / "project-approvals.json"),
        digest=entry_digest(docs),
        transport="stdio",
        # As written: the user's secrets are never shown, a reference to one is.
        command_line="npx -y 'docs server' --token '${DOCS_TOKEN}'",
        cwd="/srv",
        env=(("NODE_OPTIONS", "--max-old-space-size=99"), ("KEY", "${KEY}")),
        trusted=True,
    )
    assert origin.describe() == [
        "runs: npx -y 'docs server' --token '${DOCS_TOKEN}'",
        "in: /srv",
        "env: NODE_OPTIONS=--max-old-space-size=99",
        "env: KEY=${KEY}",
        '"trust": true: its tools run without asking unless marked destructive',
        f"from: {project_file}",
    ]
    web_origin = by_name["web"].project
    assert web_origin is not None
    assert web_origin.describe()[:2] == [
        "connects (http) to: https://h.example/mcp?k=${KEY}",
        "header: Authorization: Bearer x",
    ]
    assert "tok-secret" not in repr(by_name["docs"])
    assert "max-old-space" not in repr(by_name["docs"])  # values stay out of logs
    # Nothing of the user's environment is in what is shown.
    assert "tok-secret" not in "\n".join(origin.describe())
    assert "k-secret" not in "\n".join(origin.describe() + web_origin.describe())
    assert redacted_config(loaded.config)["servers"]["docs"]["project_file"] == str(project_file)
    assert "project_file" not in redacted_config(loaded.config)["servers"]["mine"]
    # The user's token changing changes nothing; the entry changing does.
    again = load_agentao_config(working_dir=work, environ={**environ, "DOCS_TOKEN": "rotated"})
    assert {s.name: s.project for s in again.config.servers}["docs"] == origin
    write(project_file, {"mcpServers": {"docs": {**docs, "env": {**docs["env"], "KEY": "k"}}}})
    changed = load_agentao_config(working_dir=work, environ=environ)
    changed_origin = {s.name: s.project for s in changed.config.servers}["docs"]
    assert changed_origin is not None and changed_origin.digest != origin.digest


def test_the_digest_ignores_layout_but_not_content() -> None:
    assert entry_digest({"command": "a", "args": ["b"]}) == entry_digest(
        json.loads('{ "args" : ["b"], "command":"a" }')
    )
    assert entry_digest({"command": "a", "args": ["b"]}) != entry_digest(
        {"command": "a", "args": ["b"], "trust": True}
    )
    assert entry_digest({"command": "a"}).startswith("sha256:")
