"""trio-mcp against a skills server of our own on the official Python SDK, over stdio and HTTP.

The server is ``servers/skills_server.py``: the SDK's ``MCPServer`` with an ``Extension`` that
serves ``skills/list``, ``skills/get`` and ``resources/directory/read``, and the skills' files
as ordinary resources. Over 2026-07-28 the SDK declares the extension in ``server/discover``,
and everything is checked, from the listing to a verified file read by the model. On the
handshake revisions the SDK (2.3) leaves ``extensions`` out of its ``initialize`` result (the
2025-11-25 schema has no such field), so the client must not use the server's skills at all:
that is checked too. (Skills on a legacy session that does declare the extension are tested
against the fake server, in ``tests/actors/test_skills.py``.)
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.interop.servers.http_process import HttpServerProcess, free_port
from tests.interop.support import CALL_BOUND, CONNECT_BOUND, INTEROP_DIR, interop_runtime
from trio_mcp.actors import AgentSurface, ApprovalRequest, ServerConfig
from trio_mcp.protocol import SKILLS_EXTENSION

pytestmark = pytest.mark.interop

SKILLS_SERVER = INTEROP_DIR / "servers" / "skills_server.py"
ERAS = pytest.mark.parametrize("era", ["legacy", "modern"])


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServerProcess]:
    port = free_port()
    logs = tmp_path_factory.mktemp("skills-http")
    server = HttpServerProcess(
        argv=[sys.executable, str(SKILLS_SERVER), "http", str(port)],
        port=port,
        log=Path(logs) / "skills.log",
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


def stdio_config(era: str) -> ServerConfig:
    return ServerConfig(
        name="sk",
        command=sys.executable,
        args=(str(SKILLS_SERVER), "stdio"),
        skills=True,
        protocol=era,  # type: ignore[arg-type]
        timeout=CALL_BOUND,
        connect_timeout=CONNECT_BOUND,
    )


def http_config(server: HttpServerProcess, era: str) -> ServerConfig:
    return ServerConfig(
        name="sk",
        url=server.url("/mcp"),
        skills=True,
        protocol=era,  # type: ignore[arg-type]
        timeout=CALL_BOUND,
        connect_timeout=CONNECT_BOUND,
    )


async def approve(request: ApprovalRequest) -> bool:
    return request.server == "sk"


async def check_skills(config: ServerConfig, era: str) -> None:
    async with interop_runtime(config) as (rt, _):
        status = rt.status()["sk"]
        assert status.era is not None and status.era.value == era
        if era == "legacy":
            assert status.capabilities is not None and status.capabilities.extensions is None
            assert rt.skill_servers() == ()
            agent = AgentSurface(rt, approve=approve)
            assert await agent.skills.refresh() == ()
            assert "activate_mcp_skill" not in agent.model_tools()
            return
        assert status.capabilities is not None and status.capabilities.extensions is not None
        assert status.capabilities.extensions[SKILLS_EXTENSION] == {"directoryRead": True}
        assert rt.skill_servers() == ("sk",)
        listing = await rt.list_skills("sk")  # two pages
        assert [s.uri for s in listing.skills] == [
            "skill://pdf/SKILL.md",
            "skill://acme/billing/refunds/SKILL.md",
        ]
        assert [(s.uri, "is not its frontmatter name" in s.reason) for s in listing.skipped] == [
            ("skill://misnamed/SKILL.md", True)
        ]
        page = await rt.read_skill_directory("sk", "skill://pdf")
        assert [(r.name, r.mime_type) for r in page.resources] == [
            ("SKILL.md", None),
            ("references", "inode/directory"),
        ]
        refunds = await rt.get_skill("sk", "skill://acme/billing/refunds/SKILL.md")
        assert refunds == listing.skills[1]

        agent = AgentSurface(rt, approve=approve)
        await agent.skills.refresh()
        activated = await agent.call_for_model("activate_mcp_skill", {"skill": "pdf"})
        assert activated.status == "ok", activated.text
        assert "Read references/FORMS.md before filling a form." in activated.text
        read = await agent.call_for_model(
            "read_mcp_skill_file", {"skill": "pdf", "path": "references/FORMS.md"}
        )
        assert read.status == "ok", read.text
        assert "Fill every field; sign at the end." in read.text
        outside: dict[str, Any] = {"skill": "pdf", "path": "../acme/billing/refunds/SKILL.md"}
        refused = await agent.call_for_model("read_mcp_skill_file", outside)
        assert refused.status == "not_found"


@ERAS
async def test_skills_over_stdio(era: str) -> None:
    await check_skills(stdio_config(era), era)


@ERAS
async def test_skills_over_http(era: str, http_server: HttpServerProcess) -> None:
    await check_skills(http_config(http_server, era), era)
