"""``trio-mcp import``: a realistic configuration file of each client, mapped key by key, with a
warning for each key that cannot be kept, through ``main(argv)``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from trio_mcp.actors.cli._cli import main
from trio_mcp.actors.config._loader import load_mcp_json

AUTO_APPROVE = (
    "is not kept: trio-mcp asks for approval by permission rules (permissions.rules of an Echo "
    'configuration, or the host\'s), not per server entry; "trust": true runs every tool not '
    "marked destructive without asking"
)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def imported(
    capsys: pytest.CaptureFixture[str], source: Path, into: Path, *options: str
) -> dict[str, Any]:
    """Import ``source`` into ``into`` with ``--json``; the document printed."""
    code, out, err = run(capsys, "import", str(source), "--config", str(into), "--json", *options)
    assert (code, err) == (0, "")
    document: dict[str, Any] = json.loads(out)
    return document


def written(into: Path) -> dict[str, Any]:
    servers: dict[str, Any] = json.loads(into.read_text())["mcpServers"]
    # Whatever was written loads (every ${VAR} set for the check).
    load_mcp_json(
        {"mcpServers": servers},
        environ={
            "HOME": "/home/me",
            "GITHUB_TOKEN": "t",
            "GITHUB_PAT": "t",
            "BRAVE_API_KEY": "k",
            "PWD": "/w",
            "LINEAR_KEY": "k",
        },
    )
    return servers


def test_claude_desktop(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    source = tmp_path / "claude_desktop_config.json"
    source.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "filesystem": {
                        "command": "npx",
                        "args": [
                            "-y",
                            "@modelcontextprotocol/server-filesystem",
                            "/Users/me/Desktop",
                        ],
                    },
                    "brave-search": {
                        "command": "npx",
                        "args": ["-y", "@modelcontextprotocol/server-brave-search"],
                        "env": {"BRAVE_API_KEY": "BSA-real-key"},
                    },
                },
                "globalShortcut": "Ctrl+Space",
            }
        )
    )
    into = tmp_path / "mcp.json"
    document = imported(capsys, source, into)
    assert (document["source"], document["skipped"], document["warnings"]) == (
        "claude-desktop",
        [],
        [],
    )
    assert written(into) == {
        "filesystem": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop"],
        },
        "brave-search": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-brave-search"],
            "env": {"BRAVE_API_KEY": "BSA-real-key"},
        },
    }
    # What is printed never shows the key.
    assert "BSA-real-key" not in json.dumps(document)


def test_claude_code_project_file_and_user_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    source = tmp_path / ".mcp.json"
    source.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "github": {
                        "type": "http",
                        "url": "https://api.githubcopilot.com/mcp/",
                        "headers": {"Authorization": "Bearer ${GITHUB_PAT}"},
                    },
                    "events": {"type": "sse", "url": "https://mcp.example.com/sse"},
                    "db": {
                        "type": "stdio",
                        "command": "npx",
                        "args": ["-y", "@bytebase/dbhub", "--dsn", "${DB_URL:-sqlite:///x.db}"],
                        "env": {},
                        "timeout": 90000,
                    },
                }
            }
        )
    )
    into = tmp_path / "mcp.json"
    document = imported(capsys, source, into)
    assert (document["source"], document["warnings"]) == ("claude-code", [])
    assert written(into) == {
        "github": {
            "type": "http",
            "url": "https://api.githubcopilot.com/mcp/",
            "headers": {"Authorization": "Bearer ${GITHUB_PAT}"},
        },
        "events": {"type": "sse", "url": "https://mcp.example.com/sse"},
        "db": {
            "command": "npx",
            "args": ["-y", "@bytebase/dbhub", "--dsn", "${DB_URL:-sqlite:///x.db}"],
            "env": {},
            "timeout": {"request": 90.0},
        },
    }
    # ~/.claude.json: the user's servers, and those of each project (not imported).
    user = tmp_path / ".claude.json"
    user.write_text(
        json.dumps(
            {
                "numStartups": 12,
                "mcpServers": {
                    "time": {"type": "stdio", "command": "uvx", "args": ["mcp-server-time"]}
                },
                "projects": {
                    "/home/me/app": {"mcpServers": {"local-db": {"command": "db-mcp"}}},
                    "/home/me/old": {"mcpServers": {}},
                },
            }
        )
    )
    document = imported(capsys, user, tmp_path / "user.json")
    assert [item["name"] for item in document["imported"]] == ["time"]
    assert document["warnings"] == [
        "the servers of the project /home/me/app (local-db) are not imported: they belong to "
        "that project (import them into it with --scope project, from a file of their own)"
    ]


def test_vscode_with_comments_inputs_and_workspace_variables(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    workspace = tmp_path / "proj"
    source = workspace / ".vscode" / "mcp.json"
    source.parent.mkdir(parents=True)
    source.write_text(
        """{
  // Inputs are prompted on first server start
  "inputs": [
    {"type": "promptString", "id": "perplexity-key", "description": "Perplexity API Key",
     "password": true}
  ],
  "servers": {
    "Perplexity": {
      "type": "stdio",
      "command": "npx",
      "args": ["-y", "server-perplexity-ask"],
      "env": {"PERPLEXITY_API_KEY": "${input:perplexity-key}"},
      "envFile": "${workspaceFolder}/.env",
    },
    /* a remote one */
    "fetch": {"type": "http", "url": "http://localhost:3000/mcp",
              "headers": {"X-Home": "${env:HOME}"}},
    "local": {"command": "python", "args": ["${workspaceFolder}/server.py"],
              "cwd": "${workspaceFolder}", "dev": {"watch": "src/**/*.py"}},
  },
}
"""
    )
    into = tmp_path / "mcp.json"
    document = imported(capsys, source, into)
    assert document["source"] == "vscode"
    assert document["warnings"] == [
        "Perplexity: env.PERPLEXITY_API_KEY: the prompt ${input:perplexity-key} is now "
        "${PERPLEXITY_KEY}: set that variable before trio-mcp starts the server",
        "Perplexity: envFile '${workspaceFolder}/.env' is not kept: set those variables in the "
        "environment, or copy them into env",
        "local: dev is not kept: vscode only",
    ]
    root = str(workspace.resolve())
    servers = json.loads(into.read_text())["mcpServers"]
    assert servers == {
        "Perplexity": {
            "command": "npx",
            "args": ["-y", "server-perplexity-ask"],
            "env": {"PERPLEXITY_API_KEY": "${PERPLEXITY_KEY}"},
        },
        "fetch": {
            "type": "http",
            "url": "http://localhost:3000/mcp",
            "headers": {"X-Home": "${HOME}"},
        },
        "local": {"command": "python", "args": [f"{root}/server.py"], "cwd": root},
    }


def test_cursor(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    source = tmp_path / ".cursor" / "mcp.json"
    source.parent.mkdir()
    source.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "linear": {
                        "url": "https://mcp.linear.app/mcp",
                        "headers": {"Authorization": "Bearer ${env:LINEAR_KEY}"},
                    },
                    "github": {
                        "command": "docker",
                        "args": [
                            "run",
                            "-i",
                            "--rm",
                            "-e",
                            "GITHUB_TOKEN",
                            "ghcr.io/github/github-mcp-server",
                        ],
                        "env": {"GITHUB_TOKEN": "${env:GITHUB_TOKEN}"},
                        "envFile": ".env",
                    },
                    "home": {"command": "${userHome}/bin/home-mcp"},
                }
            }
        )
    )
    into = tmp_path / "mcp.json"
    document = imported(capsys, source, into)
    assert document["source"] == "cursor"
    assert document["warnings"] == [
        "github: envFile '.env' is not kept: set those variables in the environment, or copy "
        "them into env"
    ]
    assert written(into) == {
        "linear": {
            "type": "http",
            "url": "https://mcp.linear.app/mcp",
            "headers": {"Authorization": "Bearer ${LINEAR_KEY}"},
        },
        "github": {
            "command": "docker",
            "args": ["run", "-i", "--rm", "-e", "GITHUB_TOKEN", "ghcr.io/github/github-mcp-server"],
            "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}"},
        },
        "home": {"command": "${HOME}/bin/home-mcp"},
    }


def test_cline(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    source = tmp_path / "cline_mcp_settings.json"
    source.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "github.com/modelcontextprotocol/servers/tree/main/src/brave-search": {
                        "command": "node",
                        "args": ["/Users/me/MCP/brave-search/dist/index.js"],
                        "env": {"BRAVE_API_KEY": "${BRAVE_API_KEY}"},
                        "disabled": False,
                        "autoApprove": ["brave_web_search"],
                        "timeout": 120,
                    },
                    "remote": {
                        "url": "https://mcp.example.com/mcp",
                        "transportType": "streamableHttp",
                        "disabled": True,
                        "autoApprove": [],
                    },
                }
            }
        )
    )
    into = tmp_path / "mcp.json"
    document = imported(capsys, source, into)
    long = "github.com/modelcontextprotocol/servers/tree/main/src/brave-search"
    renamed = "github.com-modelcontextprotocol-servers-tree-main-src-brave-search"
    assert document["source"] == "cline"
    assert document["warnings"] == [
        f"{long!r}: renamed {renamed!r} (a server name is letters, digits, '.', '-' and '_')",
        f"{renamed}: autoApprove ['brave_web_search'] {AUTO_APPROVE}",
        f"remote: autoApprove [] {AUTO_APPROVE}",
    ]
    assert written(into) == {
        renamed: {
            "command": "node",
            "args": ["/Users/me/MCP/brave-search/dist/index.js"],
            "env": {"BRAVE_API_KEY": "${BRAVE_API_KEY}"},
            "timeout": {"request": 120.0},
        },
        "remote": {"type": "http", "url": "https://mcp.example.com/mcp", "enabled": False},
    }


def test_gemini(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    source = tmp_path / ".gemini" / "settings.json"
    source.parent.mkdir()
    source.write_text(
        json.dumps(
            {
                "theme": "GitHub",
                "mcp": {"excluded": ["experimental"]},
                "mcpServers": {
                    "pythonTools": {
                        "command": "python",
                        "args": ["-m", "my_mcp_server", "--port", "8080"],
                        "cwd": "./mcp-servers/python",
                        "env": {"DATABASE_URL": "$DB_CONNECTION_STRING"},
                        "timeout": 15000,
                        "trust": True,
                        "includeTools": ["safe_tool", "file_reader"],
                        "excludeTools": ["dangerous_tool"],
                        "description": "My Python tools",
                    },
                    "httpServer": {
                        "httpUrl": "http://localhost:3000/mcp",
                        "headers": {"Authorization": "Bearer your-api-token"},
                        "timeout": 5000,
                    },
                    "sseServer": {"url": "http://localhost:8080/sse"},
                    "broken": {"timeout": 5},
                },
            }
        )
    )
    into = tmp_path / "mcp.json"
    code, out, err = run(capsys, "import", str(source), "--config", str(into))
    assert code == 0
    assert err.splitlines() == [
        "trio-mcp: warning: mcp.excluded is not kept: trio-mcp has no list of allowed or "
        'excluded servers (set "enabled": false on a server instead)',
        "trio-mcp: warning: pythonTools: description is not kept (mcp.json has no such key)",
        "trio-mcp: skipped 'broken': it has neither a command nor a URL",
    ]
    assert out.splitlines() == [
        f"imported 3 servers from {source} (gemini) into {into}:",
        "  pythonTools  stdio  python -m my_mcp_server --port 8080",
        "  httpServer  http  http://localhost:3000/mcp",
        "  sseServer  sse  http://localhost:8080/sse",
    ]
    assert json.loads(into.read_text())["mcpServers"] == {
        "pythonTools": {
            "command": "python",
            "args": ["-m", "my_mcp_server", "--port", "8080"],
            "env": {"DATABASE_URL": "$DB_CONNECTION_STRING"},
            "cwd": "./mcp-servers/python",
            "tools_include": ["safe_tool", "file_reader"],
            "tools_exclude": ["dangerous_tool"],
            "trust": True,
            "timeout": {"request": 15.0},
        },
        "httpServer": {
            "type": "http",
            "url": "http://localhost:3000/mcp",
            "headers": {"Authorization": "Bearer your-api-token"},
            "timeout": {"request": 5.0},
        },
        "sseServer": {"type": "sse", "url": "http://localhost:8080/sse"},
    }


def test_dry_run_conflicts_and_detection(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    source = tmp_path / "some.json"
    source.write_text(json.dumps({"mcpServers": {"a": {"command": "a"}, "b": {"command": "b"}}}))
    into = tmp_path / "mcp.json"
    into.write_text(json.dumps({"mcpServers": {"a": {"command": "mine"}}}))
    code, out, err = run(capsys, "import", str(source), "--config", str(into), "--dry-run")
    assert code == 0
    assert err == (f"trio-mcp: skipped 'a': {into} has it already (--force replaces it)\n")
    assert out.splitlines() == [
        f"would import 1 server from {source} (claude-desktop) into {into}:",
        "  b  stdio  b",
    ]
    assert json.loads(into.read_text()) == {"mcpServers": {"a": {"command": "mine"}}}
    run(capsys, "import", str(source), "--config", str(into), "--force")
    assert json.loads(into.read_text())["mcpServers"] == {
        "a": {"command": "a"},
        "b": {"command": "b"},
    }
    # Nothing tells the client apart: --from must.
    unknown = tmp_path / "x.json"
    unknown.write_text("{}")
    code, _, err = run(capsys, "import", str(unknown), "--config", str(into))
    assert (code, err) == (
        2,
        f"trio-mcp: error: cannot tell which client {unknown} belongs to: pass --from "
        "(claude-desktop, claude-code, vscode, cursor, cline, gemini)\n",
    )
    # A key that cannot be kept is dropped with a warning; an entry trio-mcp cannot load is
    # skipped with the loader's reason; the others go in.
    mixed = tmp_path / "claude_desktop_config.json"
    mixed.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "ok": {"command": "ok"},
                    "odd": {"command": "x", "args": "oops"},
                    "bad": {"type": "http", "url": "ftp://files.example.com/mcp"},
                }
            }
        )
    )
    document = imported(capsys, mixed, tmp_path / "other.json")
    assert [item["name"] for item in document["imported"]] == ["ok", "odd"]
    assert document["warnings"] == ["odd: args is not kept: it must be a list, got str"]
    assert document["skipped"] == [
        {
            "name": "bad",
            "reason": "the entry of 'bad' is not valid: server 'bad': url "
            "'ftp://files.example.com/mcp' is not an absolute http or https URL for a 'http' "
            "server",
        }
    ]
