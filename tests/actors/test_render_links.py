"""Saved tool outputs never follow a symbolic link: a checked-in project that ships
``.trio-mcp`` or ``.trio-mcp/tool-outputs`` as a link, or plants one at a file's name, gets
nothing written outside the working directory, and the result says what was not saved and why."""

from __future__ import annotations

import base64
import hashlib
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from trio_mcp.actors import AgentSurface
from trio_mcp.actors.agent._render import (
    MediaPart,
    SkippedBlob,
    output_base_for,
    output_dir_for,
    render_result,
)
from trio_mcp.actors.config._backoff import RetryPolicy
from trio_mcp.actors.config._config import RuntimeConfig
from trio_mcp.actors.runtime._runtime import open_runtime
from trio_mcp.actors.testing._fakes import FakeServer, FakeTool
from trio_mcp.protocol._types import CallToolResult, ImageContent, TextContent

PNG = b"\x89PNG\r\n\x1a\n planted"
PNG_B64 = base64.b64encode(PNG).decode()
NAME = hashlib.sha256(PNG).hexdigest()[:32] + ".png"


def image(working_dir: Path) -> Any:
    return render_result(
        CallToolResult(content=(ImageContent(data=PNG_B64, mime_type="image/png"),)),
        server="s",
        output_dir=output_dir_for(working_dir),
        output_base=working_dir,
    )


def link_refusal(path: Path) -> str:
    return (
        f"not saved: {path} is a symbolic link, and tool outputs are never written through one "
        "(a checked-in project could point it anywhere): remove the link, or give the surface "
        "another output_dir"
    )


def everything_under(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def test_a_symlinked_trio_mcp_directory_is_refused(tmp_path: Path) -> None:
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    (work / ".trio-mcp").symlink_to(elsewhere, target_is_directory=True)
    rendered = image(work)
    why = link_refusal(work / ".trio-mcp")
    assert rendered.text == f"[image content[0]: image/png, {len(PNG)} bytes, {why}]"
    assert rendered.skipped_blobs == (
        SkippedBlob(origin="content[0]", mime_type="image/png", size=len(PNG), reason=why),
    )
    assert rendered.saved_files == ()
    # The output is not lost for a model that takes images: the part still carries it.
    assert rendered.parts == (MediaPart(kind="image", mime_type="image/png", data=PNG_B64),)
    assert everything_under(elsewhere) == []


def test_a_symlinked_tool_outputs_directory_is_refused(tmp_path: Path) -> None:
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    (work / ".trio-mcp").mkdir(parents=True)
    elsewhere.mkdir()
    (work / ".trio-mcp" / "tool-outputs").symlink_to(elsewhere, target_is_directory=True)
    rendered = image(work)
    assert rendered.skipped_blobs[0].reason == link_refusal(work / ".trio-mcp" / "tool-outputs")
    assert everything_under(elsewhere) == []


def test_a_dangling_link_is_refused_and_its_target_not_created(tmp_path: Path) -> None:
    work, target = tmp_path / "work", tmp_path / "nowhere" / "outputs"
    work.mkdir()
    (work / ".trio-mcp").symlink_to(target)
    rendered = image(work)
    assert rendered.skipped_blobs[0].reason == link_refusal(work / ".trio-mcp")
    assert not (tmp_path / "nowhere").exists()
    (work / ".trio-mcp").unlink()
    (work / ".trio-mcp").mkdir()
    (work / ".trio-mcp" / "tool-outputs").symlink_to(target)
    rendered = image(work)
    assert rendered.skipped_blobs[0].reason == link_refusal(work / ".trio-mcp" / "tool-outputs")
    assert not (tmp_path / "nowhere").exists()


def test_a_link_planted_at_the_file_name_is_never_written_through(tmp_path: Path) -> None:
    work = tmp_path / "work"
    out = output_dir_for(work)
    out.mkdir(parents=True)
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"the user's own file")
    (out / NAME).symlink_to(victim)
    rendered = image(work)
    (saved,) = rendered.saved_files
    assert saved.path.parent == out and saved.path.name != NAME
    assert saved.path.read_bytes() == PNG
    assert stat.S_ISREG(os.lstat(saved.path).st_mode)
    assert victim.read_bytes() == b"the user's own file"
    assert rendered.text == (
        f"[image content[0]: image/png, {len(PNG)} bytes, saved to {saved.path}]"
    )


def test_a_dangling_link_at_the_file_name_does_not_create_its_target(tmp_path: Path) -> None:
    work = tmp_path / "work"
    out = output_dir_for(work)
    out.mkdir(parents=True)
    (out / NAME).symlink_to(tmp_path / "created-through-the-link")
    rendered = image(work)
    (saved,) = rendered.saved_files
    assert saved.path.read_bytes() == PNG and saved.path.name != NAME
    assert not (tmp_path / "created-through-the-link").exists()


def test_a_planted_file_of_the_same_size_is_not_taken_for_the_output(tmp_path: Path) -> None:
    work = tmp_path / "work"
    out = output_dir_for(work)
    out.mkdir(parents=True)
    (out / NAME).write_bytes(b"X" * len(PNG))
    (saved,) = image(work).saved_files
    assert saved.path.name != NAME and saved.path.read_bytes() == PNG
    again = image(work).saved_files[0]  # and again: never the planted file
    assert again.path.name != NAME and again.path.read_bytes() == PNG


def test_a_link_swapped_in_during_the_walk_is_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once ``.trio-mcp`` is open, replacing it with a link changes nothing: the rest of the
    walk and the file go through the open directory."""
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    real_mkdir = os.mkdir

    def swapping_mkdir(path: Any, mode: int = 0o777, *, dir_fd: int | None = None) -> None:
        real_mkdir(path, mode, dir_fd=dir_fd)
        if path == "tool-outputs":
            (work / ".trio-mcp").rename(work / "moved")
            (work / ".trio-mcp").symlink_to(elsewhere, target_is_directory=True)

    monkeypatch.setattr(os, "mkdir", swapping_mkdir)
    (saved,) = image(work).saved_files
    assert (work / "moved" / "tool-outputs" / NAME).read_bytes() == PNG
    assert everything_under(elsewhere) == []
    assert saved.path == output_dir_for(work) / NAME


def test_a_cut_result_says_its_full_text_was_not_saved_and_why(tmp_path: Path) -> None:
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    (work / ".trio-mcp").symlink_to(elsewhere, target_is_directory=True)
    rendered = render_result(
        CallToolResult(content=(TextContent(text="y" * 500),)),
        server="s",
        budget=200,
        output_dir=output_dir_for(work),
        output_base=work,
    )
    assert rendered.truncated is not None and rendered.truncated.full_text is None
    assert rendered.truncated.full_text_error == link_refusal(work / ".trio-mcp")
    assert rendered.text.endswith(
        "[... 300 more characters cut (content[0] was cut short; the full output was "
        f"{link_refusal(work / '.trio-mcp')})]"
    )
    assert everything_under(elsewhere) == []


def test_the_output_base_is_the_working_dir_for_the_default_directory(tmp_path: Path) -> None:
    assert output_base_for(output_dir_for(tmp_path), tmp_path) == tmp_path
    assert output_base_for(tmp_path / "a" / "b", tmp_path) == tmp_path
    assert output_base_for(Path("/srv/outputs"), tmp_path) == Path("/srv")
    assert output_base_for(tmp_path / ".." / "x", tmp_path) == tmp_path / ".."
    assert output_base_for(tmp_path, tmp_path) == tmp_path.parent


def test_a_host_chosen_output_dir_may_sit_under_a_link(tmp_path: Path) -> None:
    """The host's own choice is trusted down to the directory it named; only that last
    component must be a real directory."""
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "alias").symlink_to(real, target_is_directory=True)
    out = tmp_path / "alias" / "outputs"
    rendered = render_result(
        CallToolResult(content=(ImageContent(data=PNG_B64, mime_type="image/png"),)),
        server="s",
        output_dir=out,
    )
    assert rendered.saved_files[0].path == out / NAME
    assert (real / "outputs" / NAME).read_bytes() == PNG
    (tmp_path / "linked").symlink_to(real, target_is_directory=True)
    refused = render_result(
        CallToolResult(content=(ImageContent(data=PNG_B64, mime_type="image/png"),)),
        server="s",
        output_dir=tmp_path / "linked",
    )
    assert refused.skipped_blobs[0].reason == link_refusal(tmp_path / "linked")


async def test_the_surface_refuses_a_project_that_ships_the_output_dir_as_a_link(
    tmp_path: Path,
) -> None:
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    (work / ".trio-mcp").symlink_to(elsewhere, target_is_directory=True)
    picture = {"content": [{"type": "image", "data": PNG_B64, "mimeType": "image/png"}]}
    fake = FakeServer(name="s", tools=[FakeTool("draw", result=picture)])
    config = RuntimeConfig(
        servers=(fake.server_config(trust_level="trusted"),),
        working_dir=work,
        retry=RetryPolicy(jitter=0.0),
    )
    async with open_runtime(config) as rt:
        agent = AgentSurface(rt)
        await rt.wait_ready(timeout=10)
        result = await agent.call_for_model("mcp_s_draw", {})
    assert (result.status, result.is_error) == ("ok", False)
    assert result.text == (
        f"[image content[0]: image/png, {len(PNG)} bytes, {link_refusal(work / '.trio-mcp')}]"
    )
    assert everything_under(elsewhere) == []
