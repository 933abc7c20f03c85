"""``trio-mcp add``, ``add-json``, ``remove``, ``list``, ``get`` and ``config check``'s
checks, through ``main(argv)``, on files in a temporary user and project directory."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from trio_mcp.actors.cli._cli import main
from trio_mcp.actors.config._loader import load_agentao_config


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user directory (XDG_CONFIG_HOME) and a project directory (the current one)."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    project = tmp_path / "app"
    project.mkdir()
    monkeypatch.chdir(project)
    return tmp_path


def user_file(home: Path) -> Path:
    return home / "xdg" / "trio-mcp" / "mcp.json"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_add_a_stdio_server_and_read_it_back(
    capsys: pytest.CaptureFixture[str], home: Path
) -> None:
    code, out, err = run(
        capsys,
        "add",
        "notes",
        "--env",
        "NOTES_TOKEN=s3cret",
        "-e",
        "HOME_DIR=${HOME}",
        "--",
        "npx",
        "-y",
        "@acme/notes",
        "--api-key",
        "abc123",
    )
    path = user_file(home)
    assert (code, err) == (0, "")
    assert out == f"added stdio server 'notes' in {path} (user scope)\n"
    assert json.loads(path.read_text()) == {
        "mcpServers": {
            "notes": {
                "command": "npx",
                "args": ["-y", "@acme/notes", "--api-key", "abc123"],
                "env": {"NOTES_TOKEN": "s3cret", "HOME_DIR": "${HOME}"},
            }
        }
    }
    # A new user file may hold secrets: 0600 in a 0700 directory.
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    # The loader reads what was written.
    assert load_agentao_config().config.server("notes").args[-1] == "abc123"

    code, out, err = run(capsys, "get", "notes")
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "notes:",
        f"  scope: user ({path})",
        "  type: stdio",
        "  runs: npx -y @acme/notes --api-key '***'",
        "  env: NOTES_TOKEN=***",
        "  env: HOME_DIR=${HOME}",
    ]
    code, out, _ = run(capsys, "get", "notes", "--json")
    assert json.loads(out) == {
        "name": "notes",
        "scope": "user",
        "file": str(path),
        "type": "stdio",
        "entry": {
            "command": "npx",
            "args": ["-y", "@acme/notes", "--api-key", "***"],
            "env": {"NOTES_TOKEN": "***", "HOME_DIR": "${HOME}"},
        },
        "approval": None,
    }
    assert "s3cret" not in out and "abc123" not in out


def test_add_a_url_server_in_the_project_needs_approval(
    capsys: pytest.CaptureFixture[str], home: Path
) -> None:
    code, out, err = run(
        capsys,
        "add",
        "--scope",
        "project",
        "docs",
        "--url",
        "https://mcp.example.com/mcp?key=k1",
        "--header",
        "Authorization: Bearer ${DOCS_TOKEN}",
        "-H",
        "X-Team=core",
    )
    project = home / "app"
    path = project / ".trio-mcp" / "mcp.json"
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        f"added http server 'docs' in {path} (project scope)",
        f"it starts only once approved: trio-mcp project approve docs --project {project}",
    ]
    assert json.loads(path.read_text())["mcpServers"]["docs"] == {
        "type": "http",
        "url": "https://mcp.example.com/mcp?key=k1",
        "headers": {"Authorization": "Bearer ${DOCS_TOKEN}", "X-Team": "core"},
    }
    run(capsys, "add", "ws", "--url", "wss://live.example.com/mcp")
    code, out, _ = run(capsys, "list")
    assert out.splitlines() == [
        "NAME  SCOPE    TYPE  RUNS / CONNECTS TO                   NOTES",
        "ws    user     ws    wss://live.example.com/mcp           -",
        "docs  project  http  https://mcp.example.com/mcp?key=***  not approved",
    ]
    code, out, _ = run(capsys, "list", "--json")
    rows = json.loads(out)["servers"]
    assert [(r["name"], r["scope"], r["approval"]) for r in rows] == [
        ("ws", "user", None),
        ("docs", "project", "not approved"),
    ]


def test_an_existing_name_needs_force_and_other_keys_and_layout_are_kept(
    capsys: pytest.CaptureFixture[str], home: Path, tmp_path: Path
) -> None:
    path = tmp_path / "shared.json"
    path.write_text(
        '{\n    "$schema": "https://example.com/mcp.schema.json",\n    "mcpServers": {\n'
        '        "a": {"command": "a-server"}\n    },\n    "editor": {"theme": "dark"}\n}\n'
    )
    os.chmod(path, 0o640)
    code, _, err = run(capsys, "add", "a", "--config", str(path), "--", "b-server")
    assert (code, err) == (
        2,
        f"trio-mcp: error: a server named 'a' is in {path} already: pass --force to replace it, "
        "or remove it first (trio-mcp remove a)\n",
    )
    code, out, _ = run(capsys, "add", "a", "--config", str(path), "--force", "--", "b-server")
    assert (code, out) == (0, f"replaced stdio server 'a' in {path}\n")
    run(capsys, "add", "--config", str(path), "c", "--", "c-server")
    # Key order, the other keys and the 4-space indentation stay; so do the permissions.
    assert path.read_text() == (
        '{\n    "$schema": "https://example.com/mcp.schema.json",\n    "mcpServers": {\n'
        '        "a": {\n            "command": "b-server"\n        },\n'
        '        "c": {\n            "command": "c-server"\n        }\n    },\n'
        '    "editor": {\n        "theme": "dark"\n    }\n}\n'
    )
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    code, out, _ = run(capsys, "remove", "a", "--config", str(path))
    assert (code, out) == (0, f"removed 'a' from {path}\n")
    assert list(json.loads(path.read_text())["mcpServers"]) == ["c"]


def test_a_symbolic_link_is_followed(
    capsys: pytest.CaptureFixture[str], home: Path, tmp_path: Path
) -> None:
    real = tmp_path / "dotfiles" / "mcp.json"
    real.parent.mkdir()
    real.write_text('{"mcpServers": {}}')
    link = user_file(home)
    link.parent.mkdir(parents=True)
    link.symlink_to(real)
    assert run(capsys, "add", "x", "--", "x-server")[0] == 0
    assert link.is_symlink()
    assert json.loads(real.read_text()) == {"mcpServers": {"x": {"command": "x-server"}}}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["add", "bad name", "--", "x"],
            "'bad name' is not a server name: use letters, digits, '.', '-' and '_'",
        ),
        (
            ["add", "x"],
            "give the command after --: trio-mcp add NAME -- COMMAND [ARG...], or --url URL",
        ),
        (
            ["add", "x", "--url", "https://h/mcp", "--", "cmd"],
            "give a command (after --) or --url, not both",
        ),
        (
            ["add", "x", "--url", "https://h/mcp", "--env", "A=1"],
            "--env and --cwd are for a stdio server's process; a URL server takes --header",
        ),
        (
            ["add", "x", "--header", "A=1", "--", "cmd"],
            "--header is for a URL server; a stdio server takes --env",
        ),
        (
            ["add", "x", "--url", "ftp://h/mcp"],
            "the entry of 'x' is not valid: server 'x': url "
            "'ftp://h/mcp' is not an absolute http or https URL for a 'http' server",
        ),
        (["add", "x", "--env", "NOVALUE", "--", "cmd"], "--env takes K=V, got 'NOVALUE'"),
        (["add-json", "x", "[1]"], "the entry must be a JSON object, got list"),
        (["remove", "ghost"], None),
        (["get", "ghost"], "no server named 'ghost' (configured: none)"),
    ],
)
def test_bad_input_is_a_usage_error_and_writes_nothing(
    capsys: pytest.CaptureFixture[str], home: Path, argv: list[str], message: str | None
) -> None:
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, "")
    if message is not None:
        assert err == f"trio-mcp: error: {message}\n"
    assert not user_file(home).exists()


def test_add_json_takes_ours_or_another_clients_shape(
    capsys: pytest.CaptureFixture[str], home: Path
) -> None:
    entry = {"command": "uvx", "args": ["mcp-server-time"], "timeout": {"request": 30}}
    code, out, _ = run(capsys, "add-json", "time", json.dumps(entry))
    assert code == 0
    code, out, err = run(
        capsys,
        "add-json",
        "sentry",
        json.dumps(
            {
                "type": "http",
                "url": "https://mcp.sentry.dev/mcp",
                "headers": {"Authorization": "Bearer ${SENTRY_TOKEN}"},
                "alwaysAllow": ["search"],
            }
        ),
        "--json",
    )
    assert (code, err) == (0, "")
    document = json.loads(out)
    assert document["warnings"] == [
        "sentry: alwaysAllow ['search'] is not kept: trio-mcp asks for approval by permission "
        "rules (permissions.rules of an Echo configuration, or the host's), not per server "
        'entry; "trust": true runs every tool not marked destructive without asking'
    ]
    assert json.loads(user_file(home).read_text())["mcpServers"] == {
        "time": entry,
        "sentry": {
            "type": "http",
            "url": "https://mcp.sentry.dev/mcp",
            "headers": {"Authorization": "Bearer ${SENTRY_TOKEN}"},
        },
    }


def test_remove_asks_for_the_scope_when_both_files_have_the_name(
    capsys: pytest.CaptureFixture[str], home: Path
) -> None:
    run(capsys, "add", "x", "--", "user-x")
    code, _, err = run(capsys, "add", "x", "--scope", "project", "--", "project-x")
    assert code == 0
    assert err == (
        f"trio-mcp: warning: the user file {user_file(home)} has a server 'x' too: the user "
        "entry wins and this project entry is skipped\n"
    )
    code, out, _ = run(capsys, "list")
    assert out.splitlines()[2].endswith("not approved, skipped: the user file has this name")
    code, _, err = run(capsys, "remove", "x")
    assert (code, err) == (
        2,
        "trio-mcp: error: 'x' is in both the user and the project file: pass --scope user or "
        "--scope project\n",
    )
    assert run(capsys, "remove", "x", "--scope", "project")[0] == 0
    assert run(capsys, "remove", "x")[0] == 0


def test_config_check_finds_missing_commands_and_misspelt_keys(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "mcp.json"
    missing = "surely-not-installed-mcp-server"
    path.write_text(
        json.dumps(
            {"mcpServers": {"a": {"command": missing}, "b": {"command": "sh", "trsut": True}}}
        )
    )
    code, _, err = run(capsys, "config", "check", str(path))
    assert code == 3
    assert "server 'b': unknown key 'trsut'; did you mean 'trust'? (known keys: " in err
    path.write_text(json.dumps({"mcpServers": {"a": {"command": missing}, "b": {"command": "sh"}}}))
    code, out, err = run(capsys, "config", "check", str(path))
    assert code == 0
    assert out.splitlines()[1:] == [
        "  SERVER  TYPE   RUNS / CONNECTS TO",
        f"  a       stdio  {missing}",
        "  b       stdio  sh",
    ]
    assert err == (
        f"trio-mcp: warning: server 'a': the command '{missing}' is not found (searched PATH): "
        "install it, or give its full path\n"
    )
    code, out, _ = run(capsys, "config", "check", str(path), "--json")
    commands = json.loads(out)["commands"]
    assert [(c["server"], c["found"] is None) for c in commands] == [("a", True), ("b", False)]
