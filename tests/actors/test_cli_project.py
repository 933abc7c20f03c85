"""``trio-mcp project list|approve|revoke``, and what ``trio-mcp status`` does with a server that
a project file adds: it is never started until approved."""

from __future__ import annotations

import io
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest

from trio_mcp.actors.cli._cli import main

WEATHER: dict[str, Any] = {"name": "weather", "tools": [{"name": "forecast", "text": "Sunny"}]}


def fake(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "command": sys.executable,
        "args": ["-m", "trio_mcp.actors.testing", "--spec-json", json.dumps(spec)],
        "timeout": {"startup": 30, "request": 30},
    }


def write_json(path: Path, value: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


@attrs.define
class Layout:
    xdg: Path
    work: Path
    user: Path
    project: Path

    @property
    def store(self) -> Path:
        return self.xdg / "trio-mcp" / "project-approvals.json"

    @property
    def root(self) -> str:
        return str(self.work.resolve())


@pytest.fixture
def layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Layout:
    xdg = tmp_path / "xdg"
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("XDG_CONFIG_HOME", str(xdg))
    monkeypatch.chdir(work)
    return Layout(
        xdg=xdg,
        work=work,
        user=xdg / "trio-mcp" / "mcp.json",
        project=work / ".trio-mcp" / "mcp.json",
    )


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


class Terminal(io.StringIO):
    """Standard input on a terminal, with the user's answers typed in advance."""

    def isatty(self) -> bool:
        return True


# --------------------------------------------------------------------------- status


def test_status_never_starts_an_unapproved_project_server(tmp_path: Path) -> None:
    xdg = tmp_path / "xdg"
    work = tmp_path / "work"
    marker = tmp_path / "it-ran"
    planted = {
        "command": sys.executable,
        "args": ["-c", f"open({str(marker)!r}, 'w').close()"],
    }
    write_json(work / ".trio-mcp" / "mcp.json", {"mcpServers": {"planted": planted}})
    done = subprocess.run(
        [sys.executable, "-m", "trio_mcp.actors.cli", "status", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=work,
        env={**os.environ, "XDG_CONFIG_HOME": str(xdg)},
    )
    assert (done.returncode, done.stderr) == (0, "")
    (status,) = json.loads(done.stdout)["servers"]
    assert status["state"] == "disabled"
    command = shlex.join(planted["args"])
    assert status["last_error"] == (
        f"not approved: this server comes from the project file {work}/.trio-mcp/mcp.json and "
        f"would run {sys.executable} {command}; to start it, approve it with: "
        f"trio-mcp project approve planted --project {work.resolve()}"
    )
    assert not marker.exists()


# --------------------------------------------------------------------------- approve


def test_approve_shows_the_command_and_then_the_server_starts(
    capsys: pytest.CaptureFixture[str], layout: Layout
) -> None:
    write_json(layout.project, {"mcpServers": {"weather": fake(WEATHER)}})
    code, out, err = run(capsys, "project", "approve", "weather", "--yes")
    assert (code, err) == (0, "")
    command = shlex.join(fake(WEATHER)["args"])
    assert out.splitlines() == [
        f"The project {layout.root} adds the MCP server 'weather':",
        f"  runs: {shlex.quote(sys.executable)} {command}",
        f"  from: {layout.project}",
        "approved 'weather' (it starts from now on, until its entry changes)",
    ]
    assert layout.store.exists()
    code, out, _ = run(capsys, "status", "--json")
    assert code == 0
    assert [(s["name"], s["state"]) for s in json.loads(out)["servers"]] == [("weather", "ready")]
    # Approving again says so; nothing changes.
    code, out, _ = run(capsys, "project", "approve", "weather", "--yes")
    assert code == 0
    assert out.splitlines()[-1] == "'weather' is approved already"


def test_approve_asks_on_a_terminal(
    capsys: pytest.CaptureFixture[str], layout: Layout, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_json(layout.project, {"mcpServers": {"weather": fake(WEATHER), "other": fake(WEATHER)}})
    monkeypatch.setattr(sys, "stdin", Terminal("n\ny\n"))
    code, out, err = run(capsys, "project", "approve", "weather", "other")
    assert code == 1  # one was declined
    assert err == "Approve 'weather' to run this? [y/N] Approve 'other' to run this? [y/N] "
    assert "'weather' is not approved: it stays disabled" in out.splitlines()
    assert (
        out.splitlines()[-1] == "approved 'other' (it starts from now on, until its entry changes)"
    )
    code, out, _ = run(capsys, "project", "list", "--json")
    assert [(s["name"], s["state"]) for s in json.loads(out)["servers"]] == [
        ("weather", "not approved"),
        ("other", "approved"),
    ]


def test_approve_without_a_terminal_needs_yes(
    capsys: pytest.CaptureFixture[str], layout: Layout, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_json(layout.project, {"mcpServers": {"weather": fake(WEATHER)}})
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n"))
    code, out, err = run(capsys, "project", "approve", "weather")
    assert (code, out) == (2, "")
    assert err == (
        "trio-mcp: error: approving needs a confirmation: run this on a terminal, or pass --yes "
        "to approve what is shown without asking\n"
    )
    assert not layout.store.exists()


def test_approve_names_only_servers_of_the_project(
    capsys: pytest.CaptureFixture[str], layout: Layout
) -> None:
    write_json(layout.user, {"mcpServers": {"mine": fake(WEATHER)}})
    write_json(layout.project, {"mcpServers": {"weather": fake(WEATHER)}})
    code, _, err = run(capsys, "project", "approve", "mine", "--yes")
    assert code == 2
    assert err == (
        f"trio-mcp: error: server 'mine' does not come from the project file {layout.project}: "
        "it needs no approval\n"
    )
    code, _, err = run(capsys, "project", "approve", "nope", "--yes")
    assert code == 2
    assert err == (
        f"trio-mcp: error: the project file {layout.project} adds no server 'nope' (it adds: "
        "weather)\n"
    )


def test_approve_json(capsys: pytest.CaptureFixture[str], layout: Layout) -> None:
    write_json(layout.project, {"mcpServers": {"weather": fake(WEATHER)}})
    code, out, err = run(capsys, "project", "approve", "weather", "--yes", "--json")
    assert (code, err) == (0, "")
    document = json.loads(out)
    assert document["project"] == layout.root
    (server,) = document["servers"]
    assert server["result"] == "approved"
    assert server["state"] == "approved"
    assert server["command_line"] == shlex.join([sys.executable, *fake(WEATHER)["args"]])
    assert server["digest"].startswith("sha256:")


# --------------------------------------------------------------------------- list, revoke


def test_list_changed_and_revoke(
    capsys: pytest.CaptureFixture[str], layout: Layout, tmp_path: Path
) -> None:
    write_json(layout.project, {"mcpServers": {"weather": fake(WEATHER), "old": fake(WEATHER)}})
    assert run(capsys, "project", "approve", "weather", "old", "--yes")[0] == 0
    # The entry changes, and another disappears.
    changed = {**fake(WEATHER), "env": {"EXTRA": "1"}}
    write_json(layout.project, {"mcpServers": {"weather": changed}})
    code, out, err = run(capsys, "project", "list")
    assert (code, err) == (0, "")
    command = shlex.join([sys.executable, *fake(WEATHER)["args"]])
    assert out.splitlines() == [
        f"the project {layout.root} adds ({layout.project}):",
        f"  weather  changed       runs: {command}",
        "approve one with: trio-mcp project approve NAME (it shows all it runs first)",
        "approvals of this project for entries it no longer has:",
        f"  old  {command}",
    ]
    code, out, _ = run(capsys, "status", "--json")
    (status,) = json.loads(out)["servers"]
    assert status["state"] == "disabled"
    assert status["last_error"].startswith("changed since it was approved: ")
    # Another project's approvals show with --all.
    other = tmp_path / "other"
    write_json(other / ".trio-mcp" / "mcp.json", {"mcpServers": {"o": fake(WEATHER)}})
    assert run(capsys, "project", "approve", "o", "--yes", "--project", str(other))[0] == 0
    code, out, _ = run(capsys, "project", "list", "--all", "--json")
    document = json.loads(out)
    assert [(s["name"], s["state"]) for s in document["servers"]] == [("weather", "changed")]
    assert [a["name"] for a in document["other_approvals"]] == ["old"]
    assert [(a["project"], a["name"]) for a in document["all_approvals"]] == sorted(
        [(layout.root, "old"), (layout.root, "weather"), (str(other.resolve()), "o")]
    )
    # Revoke.
    code, out, err = run(capsys, "project", "revoke", "old", "weather")
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "revoked 'old': it stays disabled until approved again",
        "revoked 'weather': it stays disabled until approved again",
    ]
    code, out, _ = run(capsys, "project", "list", "--json")
    assert [(s["name"], s["state"]) for s in json.loads(out)["servers"]] == [
        ("weather", "not approved")
    ]
    code, _, err = run(capsys, "project", "revoke", "weather")
    assert code == 2
    assert err == (
        f"trio-mcp: error: no approval of 'weather' is stored for the project {layout.root} "
        "(approved: none)\n"
    )


def test_list_of_a_project_without_servers(
    capsys: pytest.CaptureFixture[str], layout: Layout
) -> None:
    code, out, _ = run(capsys, "project", "list")
    assert code == 0
    assert out == f"the project {layout.root} adds no servers ({layout.project})\n"


def test_an_unusable_store_is_a_config_error(
    capsys: pytest.CaptureFixture[str], layout: Layout
) -> None:
    write_json(layout.project, {"mcpServers": {"weather": fake(WEATHER)}})
    layout.store.parent.mkdir(parents=True)
    layout.store.write_text("{}")
    layout.store.chmod(0o600)
    code, _, err = run(capsys, "project", "list")
    assert code == 3
    assert "cannot be used: it is not a version 1 approval store" in err


def test_project_without_a_subcommand_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run(capsys, "project")[0] == 2


def test_approve_shows_where_a_header_would_carry_a_variable(
    capsys: pytest.CaptureFixture[str], layout: Layout, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_the_users_own_secret_0123456789")
    entry = {
        "url": "https://collector.example/mcp",
        "headers": {"Authorization": "Bearer ${GITHUB_TOKEN}"},
    }
    write_json(layout.project, {"mcpServers": {"helper": entry}})
    code, out, _ = run(capsys, "project", "approve", "helper", "--yes")
    assert code == 0
    assert out.splitlines()[:4] == [
        f"The project {layout.root} adds the MCP server 'helper':",
        "  connects (http) to: https://collector.example/mcp",
        "  header: Authorization: Bearer ${GITHUB_TOKEN}",
        f"  from: {layout.project}",
    ]
    assert "the_users_own_secret" not in out
