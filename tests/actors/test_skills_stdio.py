"""The fake skills server as a real stdio subprocess (``python -m trio_mcp.actors.testing``),
driven through the agent surface on the real clock: what a host's own tests can do."""

from __future__ import annotations

import base64
import json
import sys
from typing import Any

import pytest
import trio

from trio_mcp.actors import AgentSurface, ApprovalRequest, RuntimeConfig, ServerConfig
from trio_mcp.actors.runtime._runtime import open_runtime
from trio_mcp.actors.testing import FakeServer, FakeSkill
from trio_mcp.protocol import ConfigError

SPEC: dict[str, Any] = {
    "name": "skilled",
    "era": "modern",
    "skills": [
        {
            "name": "pdf",
            "description": "Work with PDF files.",
            "body": "Read references/FORMS.md first.",
            "frontmatter": {"license": "MIT", "metadata": {"version": "1.2"}},
            "files": {
                "references/FORMS.md": "Fill the form.",
                "logo.png": {"base64": base64.b64encode(b"\x89PNG\x00").decode()},
            },
        },
        {"name": "reports", "description": "Daily reports.", "prefix": "acme", "dynamic": True},
        {"raw": {"uri": "skill://broken/SKILL.md"}},
    ],
    "skills_directory_read": True,
}


def test_the_spec_builds_the_same_skills_as_the_python_api() -> None:
    fake = FakeServer.from_spec(SPEC)
    pdf, reports, raw = fake.skills
    assert pdf == FakeSkill(
        "pdf",
        "Work with PDF files.",
        body="Read references/FORMS.md first.",
        frontmatter={"license": "MIT", "metadata": {"version": "1.2"}},
        files={"references/FORMS.md": "Fill the form.", "logo.png": b"\x89PNG\x00"},
    )
    assert isinstance(reports, FakeSkill) and reports.uri == "skill://acme/reports/SKILL.md"
    assert reports.dynamic and raw == {"uri": "skill://broken/SKILL.md"}
    assert fake.skills_directory_read


def test_a_bad_skill_spec_names_every_problem() -> None:
    spec = {
        "skills": [{"name": 3, "files": {"a": 1}, "colour": "red"}, "x"],
        "skill_file_overrides": {"skill://pdf/SKILL.md": {"base64": "!!"}},
        "skills_directory_read": "yes",
    }
    with pytest.raises(ConfigError) as info:
        FakeServer.from_spec(spec)
    assert [path for path, _ in info.value.problems] == [
        "$.skills[0].colour",
        "$.skills[0].name",
        "$.skills[0].description",
        "$.skills[0].files.a",
        "$.skills[1]",
        "$.skills_directory_read",
        "$.skill_file_overrides.skill://pdf/SKILL.md.base64",
    ]


async def test_a_skill_is_activated_and_read_through_the_agent_surface_over_stdio() -> None:
    asked: list[ApprovalRequest] = []

    async def approve(request: ApprovalRequest) -> bool:
        asked.append(request)
        return True

    server = ServerConfig(
        name="skilled",
        command=sys.executable,
        args=("-m", "trio_mcp.actors.testing", "--spec-json", json.dumps(SPEC)),
        skills=True,
        connect_timeout=20,
        timeout=20,
    )
    with trio.fail_after(60):
        async with open_runtime(RuntimeConfig(servers=(server,))) as rt:
            await rt.wait_ready()
            assert rt.skill_servers() == ("skilled",)
            agent = AgentSurface(rt, approve=approve)
            catalogue = await agent.skills.refresh()
            assert [entry.id for entry in catalogue] == [
                "mcp:skilled:skill://acme/reports/SKILL.md",
                "mcp:skilled:skill://pdf/SKILL.md",
            ]
            assert [s.uri for s in agent.skills.skipped] == ["skill://broken/SKILL.md"]
            result = await agent.call_for_model("activate_mcp_skill", {"skill": "pdf"})
            assert result.status == "ok", result.text
            assert '<mcp-skill server="skilled" uri="skill://pdf/SKILL.md">' in result.text
            assert "Read references/FORMS.md first." in result.text
            assert [(a.server, a.arguments["files"]) for a in asked] == [("skilled", 3)]
            forms = await agent.call_for_model(
                "read_mcp_skill_file", {"skill": "pdf", "path": "references/FORMS.md"}
            )
            assert forms.status == "ok" and "Fill the form." in forms.text
            logo = await agent.call_for_model(
                "read_mcp_skill_file", {"skill": "pdf", "path": "logo.png"}
            )
            assert "5 bytes of binary content, verified" in logo.text
            page = await rt.read_skill_directory("skilled", "skill://pdf")
            assert [r.uri for r in page.resources] == [
                "skill://pdf/SKILL.md",
                "skill://pdf/logo.png",
                "skill://pdf/references",
            ]
