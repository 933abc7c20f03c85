from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_mcp.actors.cli._cli import ExitCode, _Out, _watch_loop, main
from trio_mcp.actors.config._config import RuntimeConfig
from trio_mcp.actors.config._loader import LoadedConfig
from trio_mcp.actors.runtime._runtime import open_runtime
from trio_mcp.actors.testing._fakes import FakeServer, FakeTool


def test_version_flag_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("trio-mcp ")
    assert out.split()[1][0].isdigit()


def test_no_arguments_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    assert "usage: trio-mcp" in capsys.readouterr().out


def test_unknown_option_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--bogus"])
    assert exited.value.code == 2
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err


def test_console_script_runs() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "trio_mcp.actors.cli", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "trio-mcp" in done.stdout


# --------------------------------------------------------------------------- without servers


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def write_json(path: Path, value: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


def test_exit_codes_are_documented_values() -> None:
    assert [(code.name, int(code)) for code in ExitCode] == [
        ("OK", 0),
        ("FAILED", 1),
        ("USAGE", 2),
        ("CONFIG", 3),
        ("UNAVAILABLE", 4),
        ("CALL_FAILED", 5),
        ("REFUSED", 6),
        ("AUTH_FAILED", 7),
        ("INTERRUPTED", 130),
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            "{nope",
            "--args is not valid JSON: Expecting property name enclosed in double quotes: "
            "line 1 column 2 (char 1)",
        ),
        ("[1, 2]", "--args must be a JSON object, got list"),
    ],
)
def test_call_with_bad_arguments_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], args: str, message: str
) -> None:
    code, out, err = run(capsys, "call", "mcp_x_y", "--args", args)
    assert (code, out, err) == (2, "", f"trio-mcp: error: {message}\n")
    code, out, err = run(capsys, "call", "mcp_x_y", "--args", args, "--json")
    assert (code, err) == (2, "")
    assert json.loads(out) == {"error": {"kind": "usage", "message": message}}


def test_prompt_arguments_must_be_strings(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "prompt", "s", "p", "--args", '{"n": 1, "ok": "x", "b": true}')
    assert (code, err) == (2, "trio-mcp: error: prompt arguments must be strings; not: b, n\n")


def test_wait_must_be_a_positive_number(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["status", "--wait", "0"])
    assert exited.value.code == 2
    assert "argument --wait: must be a finite number of seconds > 0: '0'" in capsys.readouterr().err


def test_config_without_a_subcommand_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "config")
    assert (code, out) == (2, "")
    assert "usage: trio-mcp config" in err


def test_a_missing_config_file_is_a_config_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    missing = tmp_path / "missing.json"
    code, out, err = run(capsys, "status", "--config", str(missing))
    assert (code, out) == (3, "")
    assert err == (
        "trio-mcp: error: invalid MCP configuration (1 problem):\n"
        f"  {missing}: (top level): no such file\n"
    )
    code, out, _ = run(capsys, "tools", "--config", str(missing), "--json")
    assert code == 3
    assert json.loads(out) == {
        "error": {
            "kind": "config",
            "message": f"invalid MCP configuration (1 problem):\n  {missing}: (top level): "
            "no such file",
            "type": "ConfigError",
            "problems": [{"location": f"{missing}: (top level)", "message": "no such file"}],
        }
    }


def test_config_check_prints_the_merged_config_redacted(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLI_TEST_TOKEN", "very-secret-token")
    path = write_json(
        tmp_path / "mcp.json",
        {
            "mcpServers": {
                "gh": {"command": "npx", "env": {"GITHUB_TOKEN": "${CLI_TEST_TOKEN}"}},
                "web": {"url": "https://h.example/mcp", "headers": {"X-Key": "$CLI_TEST_TOKEN"}},
            },
            "rules": [],
        },
    )
    code, out, err = run(capsys, "config", "check", str(path))
    assert code == 0
    assert "very-secret-token" not in out + err
    # A short summary by default: one line per server (--json has the whole merged view).
    assert out.splitlines() == [
        f"configuration is valid (agentao shape, 2 servers; read from: {path})",
        "  SERVER  TYPE   RUNS / CONNECTS TO",
        "  gh      stdio  npx",
        "  web     http   https://h.example/mcp",
    ]
    assert err.splitlines()[0] == f"trio-mcp: warning: {path}: rules: unknown key, ignored"

    code, out, err = run(capsys, "config", "check", "--config", str(path), "--json")
    assert (code, err) == (0, "")
    document = json.loads(out)
    assert set(document) == {"valid", "shape", "sources", "warnings", "commands", "config"}
    assert document["config"]["servers"]["gh"]["env"] == {"GITHUB_TOKEN": "***"}
    assert document["config"]["servers"]["web"]["headers"] == {"X-Key": "***"}
    assert [(c["server"], c["command"]) for c in document["commands"]] == [("gh", "npx")]
    assert (document["valid"], document["shape"], document["sources"]) == (
        True,
        "agentao",
        [str(path)],
    )
    assert document["warnings"] == [f"{path}: rules: unknown key, ignored"]
    assert document["config"]["network_policy"] == "allow"
    assert "very-secret-token" not in out


def test_config_check_reports_every_problem(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = write_json(
        tmp_path / "mcp.json",
        {"mcpServers": {"a": {"command": "x", "url": "http://h"}, "b": {"type": "grpc"}}},
    )
    code, out, err = run(capsys, "config", "check", str(path))
    assert (code, out) == (3, "")
    assert err.splitlines() == [
        "trio-mcp: error: invalid MCP configuration (3 problems):",
        f"  {path}: mcpServers.a: server 'a': give exactly one of 'command' (stdio) and 'url' "
        "(HTTP, SSE or WebSocket); it has both",
        f"  {path}: mcpServers.b.type: server 'b': unknown type 'grpc'; use 'stdio', 'http' (or "
        "'streamable-http', 'streamable_http'), 'sse' or 'ws'",
        f"  {path}: mcpServers.b: server 'b': give exactly one of 'command' (stdio) and 'url' "
        "(HTTP, SSE or WebSocket); it has neither",
    ]
    code, out, _ = run(capsys, "config", "check", str(path), "--json")
    document = json.loads(out)
    assert code == 3
    assert document["valid"] is False
    assert document["error"]["kind"] == "config"
    assert document["error"]["type"] == "McpTransportConfigError"
    assert [p["location"] for p in document["error"]["problems"]] == [
        f"{path}: mcpServers.a",
        f"{path}: mcpServers.b.type",
        f"{path}: mcpServers.b",
    ]


def test_config_check_file_given_twice_differently(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run(capsys, "config", "check", "a.json", "--config", "b.json")
    assert (code, err) == (2, "trio-mcp: error: give the file once: as FILE or as --config FILE\n")


def test_nothing_configured(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "status")
    assert (code, err) == (0, "")
    assert out == (
        f"no MCP servers are configured (no {tmp_path / 'xdg' / 'trio-mcp' / 'mcp.json'} and no "
        f"{tmp_path / '.trio-mcp' / 'mcp.json'}; pass --config FILE)\n"
    )
    code, out, _ = run(capsys, "status", "--json")
    assert (code, json.loads(out)) == (0, {"servers": [], "sources": [], "warnings": []})
    code, _, err = run(capsys, "call", "mcp_x_y")
    assert code == 2
    assert err.startswith("trio-mcp: error: no MCP servers are configured")


# --------------------------------------------------------------------------- --watch on a terminal


class _Terminal(io.StringIO):
    """A terminal that tells a waiting test when something was drawn (``written``)."""

    def __init__(self) -> None:
        super().__init__()
        self.written = trio.Event()

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.written.set()
        return super().write(text)


async def test_watch_redraws_the_table_on_a_terminal() -> None:
    fake = FakeServer(name="notes", tools=[FakeTool(name="add")])
    loaded = LoadedConfig(
        config=RuntimeConfig(servers=(fake.server_config("notes"),)), shape="agentao"
    )
    terminal = _Terminal()
    out = _Out(json=False, stdout=terminal, stderr=io.StringIO())

    def screen() -> str:
        # The last frame: drawn from the cursor's home, each line cleared to its end.
        frame = terminal.getvalue().rpartition("\x1b[H")[2]
        return frame.replace("\x1b[K", "").replace("\x1b[J", "")

    with trio.fail_after(10):
        async with open_runtime(loaded.config) as rt, trio.open_nursery() as nursery:
            nursery.start_soon(_watch_loop, rt, loaded, out)
            await rt.wait_ready()
            # Each drawing wakes the test, which looks at what was drawn.
            while " ready " not in screen():
                terminal.written = trio.Event()
                await terminal.written.wait()
            nursery.cancel_scope.cancel()
    lines = screen().splitlines()
    assert lines[:2] == ["trio-mcp status --watch: 1 servers (Ctrl-C to stop)", ""]
    assert lines[2].split()[:3] == ["SERVER", "STATE", "TRANSPORT"]
    assert lines[3].split() == [
        "notes",
        "ready",
        "custom",
        "2025-11-25",
        "1",
        lines[3].split()[5],
        "s",
        "-",
    ]
    # The screen is cleared once; every redraw then writes over the last one (cursor home,
    # each line cleared to its end, the rest of the screen cleared): no blank frame, no flicker.
    text = terminal.getvalue()
    assert text.startswith("\x1b[H\x1b[2J\x1b[H")
    assert text.count("\x1b[2J") == 1
    frames = text.split("\x1b[H")[2:]
    assert frames
    assert all(frame.endswith("\x1b[J") for frame in frames)
    assert all(line.endswith("\x1b[K") for line in frames[-1].splitlines()[:-1])
