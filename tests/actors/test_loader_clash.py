"""A project file cannot knock out a user server's tools: a project entry whose tools could be
registered under the same names as those of a user (or host) server is skipped, with a warning,
comparing the names as the registry will see them (after sanitising)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_mcp.actors.config._config import ServerConfig
from trio_mcp.actors.config._loader import load_agentao_config
from trio_mcp.actors.config._naming import server_names_may_clash
from trio_mcp.actors.runtime._naming import registered_name


def write(path: Path, value: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


@pytest.fixture
def layout(tmp_path: Path) -> tuple[dict[str, str], Path, Path, Path]:
    environ = {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    work = tmp_path / "work"
    work.mkdir()
    user = tmp_path / "xdg" / "trio-mcp" / "mcp.json"
    project = work / ".trio-mcp" / "mcp.json"
    return environ, work, user, project


def clash_warning(project: Path, name: str, other: str, where: str) -> str:
    return (
        f"{project}: server {name!r} is skipped: its tools could be registered under the same "
        f"names as those of the server {other!r} of {where}, and tools whose names clash are "
        "all refused; the project entry gives way (rename it)"
    )


@pytest.mark.parametrize(
    ("user_name", "project_name"),
    [
        ("git_hub", "git.hub"),  # the same name after sanitising
        ("git-hub", "git_hub"),
        ("git_hub", "git"),  # git's tool hub_x and git_hub's tool x are both mcp_git_hub_x
        ("git", "git-hub"),
    ],
)
def test_a_project_entry_that_could_clash_with_a_user_server_is_skipped(
    layout: tuple[dict[str, str], Path, Path, Path], user_name: str, project_name: str
) -> None:
    environ, work, user, project = layout
    write(user, {"mcpServers": {user_name: {"command": "user-server"}}})
    write(
        project,
        {"mcpServers": {project_name: {"command": "project-server"}, "docs": {"command": "d"}}},
    )
    loaded = load_agentao_config(working_dir=work, environ=environ)
    assert [(s.name, s.command) for s in loaded.config.servers] == [
        (user_name, "user-server"),
        ("docs", "d"),
    ]
    assert loaded.warnings[0] == clash_warning(
        project, project_name, user_name, f"the user file {user}"
    )


def test_names_that_cannot_clash_are_both_kept(
    layout: tuple[dict[str, str], Path, Path, Path],
) -> None:
    environ, work, user, project = layout
    write(user, {"mcpServers": {"gitlab": {"command": "a"}}})
    write(project, {"mcpServers": {"git": {"command": "b"}}})
    loaded = load_agentao_config(working_dir=work, environ=environ)
    assert [s.name for s in loaded.config.servers] == ["gitlab", "git"]
    assert not [w for w in loaded.warnings if "skipped" in w]


def test_servers_from_code_are_protected_too(
    layout: tuple[dict[str, str], Path, Path, Path],
) -> None:
    environ, work, _, project = layout
    write(project, {"mcpServers": {"git.hub": {"command": "b"}, "docs": {"command": "d"}}})
    loaded = load_agentao_config(
        working_dir=work,
        environ=environ,
        extra_mcp_servers={
            "git_hub": ServerConfig(name="git_hub", command="a"),
            # The same name: the host's entry replaces the project's, as before.
            "docs": ServerConfig(name="docs", command="host-docs"),
        },
    )
    assert [(s.name, s.command) for s in loaded.config.servers] == [
        ("docs", "host-docs"),
        ("git_hub", "a"),
    ]
    assert loaded.warnings == (
        clash_warning(project, "git.hub", "git_hub", "the host's extra_mcp_servers"),
    )


_SERVER = st.from_regex(r"[A-Za-z0-9._-]{1,70}", fullmatch=True)
_TOOL = st.text(alphabet=st.sampled_from("ab_-.é1"), min_size=1, max_size=70)


@given(_SERVER, _SERVER, _TOOL, _TOOL)
def test_servers_whose_tools_share_a_name_are_said_to_clash(
    first: str, second: str, tool_a: str, tool_b: str
) -> None:
    if registered_name(first, tool_a) == registered_name(second, tool_b):
        assert server_names_may_clash(first, second)


@given(st.from_regex(r"[A-Za-z0-9._-]{1,40}", fullmatch=True))
def test_the_clashes_the_loader_avoids_are_real(server: str) -> None:
    # A server named like another one's sanitised name plus "_x" (the prefix case), or the
    # sanitised name itself, does produce the other's tool names.
    plain = server.replace(".", "_").replace("-", "_")
    assert server_names_may_clash(server, plain + "_x")
    assert registered_name(server, "x_y") == registered_name(plain + "_x", "y")
    assert server_names_may_clash(server, plain)
    assert registered_name(server, "y") == registered_name(plain, "y")
