"""Skills that change on the server (re-listed, approvals revoked) and the gate that holds
shell-like tools and cross-server reads while a skill is active."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio
import trio.testing

from trio_mcp.actors import (
    AgentSurface,
    ApprovalRequest,
    PermissionRule,
    RiskLevel,
    SkillGate,
    SkillsChanged,
)
from trio_mcp.actors.config._backoff import RetryPolicy
from trio_mcp.actors.config._config import RuntimeConfig, ServerConfig
from trio_mcp.actors.runtime._runtime import Runtime, open_runtime
from trio_mcp.actors.testing import FakeResource, FakeServer, FakeSkill, FakeTool

Clock = trio.testing.MockClock
ERAS = pytest.mark.parametrize("era", ["legacy", "modern"])
PDF = FakeSkill("pdf", "Work with PDF files.", files={"FORMS.md": "Fill it."})
PDF_ID = "mcp:docs:skill://pdf/SKILL.md"


def config(*servers: ServerConfig, **options: Any) -> RuntimeConfig:
    return RuntimeConfig(servers=servers, retry=RetryPolicy(jitter=0.0), **options)


class Approver:
    def __init__(self, answer: bool = True) -> None:
        self.answer = answer
        self.asked: list[ApprovalRequest] = []

    async def __call__(self, request: ApprovalRequest) -> bool:
        self.asked.append(request)
        return self.answer


def docs_server(**options: Any) -> FakeServer:
    """The skills server ``docs`` (a helper: ``skills`` goes through an attrs converter that
    mypy cannot type)."""
    options.setdefault("skills", [PDF])
    return FakeServer(name="docs", **options)


def skill_lists(server: FakeServer) -> int:
    return sum(method == "skills/list" for method, _ in server.requests)


async def activated(rt: Runtime, approver: Approver, **options: Any) -> AgentSurface:
    await rt.wait_ready()
    agent = AgentSurface(rt, approve=approver, **options)
    await agent.skills.refresh()
    result = await agent.call_for_model("activate_mcp_skill", {"skill": "pdf"})
    assert result.status == "ok", result.text
    return agent


# --------------------------------------------------------------------------- re-listing


@ERAS
async def test_a_resource_list_change_relists_debounced_and_revokes_the_approval(
    era: str, autojump_clock: Clock
) -> None:
    server = docs_server(era=era)
    async with open_runtime(config(server.server_config(skills=True))) as rt:
        approver = Approver()
        agent = await activated(rt, approver)
        assert agent.skills.approved("docs", "skill://pdf/SKILL.md")
        version = rt.skill_listings().version
        with rt.events() as events:
            server.set_skills([attrs.evolve(PDF, files={"FORMS.md": "Changed."})])
            start = trio.current_time()
            for _ in range(3):  # each change starts the quiet time again: one listing
                assert await server.emit_list_changed("resources") == 1
                await trio.sleep(0.1)
            await rt.wait_skills_changed(version)
            assert trio.current_time() - start == pytest.approx(0.2 + 0.25)
            assert skill_lists(server) == 2
            (event,) = [e for e in _drain(events) if isinstance(e, SkillsChanged)]
        assert event == SkillsChanged(server="docs", uris=("skill://pdf/SKILL.md",))
        # the agent surface sees the new set at its next use
        assert not agent.skills.approved("docs", "skill://pdf/SKILL.md")
        held = agent.skills.held("docs", "skill://pdf/SKILL.md")
        assert held is not None and held.files[1].size == len("Changed.")
        read = await agent.call_for_model(
            "read_mcp_skill_file", {"skill": "pdf", "path": "FORMS.md"}
        )
        assert "activate the skill" in read.text
        again = await agent.call_for_model("activate_mcp_skill", {"skill": "pdf"})
        assert again.status == "ok"
        assert [a.changed for a in approver.asked] == [(), ("resources",)]


@ERAS
async def test_unchanged_or_never_listed_skills_keep_their_approval(
    era: str, autojump_clock: Clock
) -> None:
    server = docs_server(era=era)
    async with open_runtime(config(server.server_config(skills=True))) as rt:
        await rt.wait_ready()
        await server.emit_list_changed("resources")
        await trio.sleep(1)
        assert skill_lists(server) == 0  # nothing is fetched unless the host uses skills
        agent = await activated(rt, Approver())
        version = rt.skill_listings().version
        with rt.events() as events:
            await server.emit_list_changed("resources")
            assert await rt.wait_skills_changed(version) == version + 1
            assert not [e for e in _drain(events) if isinstance(e, SkillsChanged)]
        assert agent.skills.approved("docs", "skill://pdf/SKILL.md")


async def test_a_reconnect_relists_the_skills(autojump_clock: Clock) -> None:
    server = docs_server()
    async with open_runtime(config(server.server_config(skills=True))) as rt:
        agent = await activated(rt, Approver())
        version = rt.skill_listings().version
        server.set_skills([attrs.evolve(PDF, body="New steps.")])
        await server.disconnect()
        await rt.wait_skills_changed(version)
        assert rt.status()["docs"].generation == 2
        assert not agent.skills.approved("docs", "skill://pdf/SKILL.md")


def _drain(events: Any) -> list[Any]:
    out = []
    while True:
        try:
            out.append(events.receive_nowait())
        except trio.WouldBlock:
            return out


# --------------------------------------------------------------------------- the gate


def gate_servers() -> tuple[FakeServer, FakeServer]:
    docs = docs_server(resources=[FakeResource("note://docs/a", "a", text="A")])
    other = FakeServer(
        name="other",
        tools=[FakeTool("run", result="ran"), FakeTool("peek", annotations={"readOnlyHint": True})],
        resources=[FakeResource("note://other/b", "b", text="B")],
    )
    return docs, other


async def test_an_active_skill_makes_shell_like_tools_and_cross_server_reads_ask(
    autojump_clock: Clock,
) -> None:
    docs, other = gate_servers()
    rules = (
        PermissionRule(pattern="mcp_other_*", decision="allow"),
        PermissionRule(pattern="mcp_docs_*", decision="deny"),
    )
    servers = (docs.server_config(skills=True), other.server_config(trust_level="trusted"))
    async with open_runtime(config(*servers, permission_rules=rules)) as rt:
        await rt.wait_ready()
        approver = Approver()
        agent = AgentSurface(rt, approve=approver, skill_gate=SkillGate(tools=("run_shell_*",)))
        assert (await agent.call_for_model("mcp_other_run")).status == "ok"
        assert await agent.authorize_host_tool("run_shell_command") is None
        assert approver.asked == []
        await agent.skills.refresh()
        await agent.call_for_model("activate_mcp_skill", {"skill": "pdf"})
        assert [s.id for s in agent.skills.active()] == [PDF_ID]
        approver.asked.clear()
        # allowed by a rule on a trusted server, and still asked: a skill is active
        assert (await agent.call_for_model("mcp_other_run")).status == "ok"
        (asked,) = approver.asked
        assert asked.skills == (PDF_ID,) and asked.registered_name == "mcp_other_run"
        assert "the MCP skill 'pdf' of the MCP server 'docs' is active" in asked.reason
        # a read-only tool is not shell-like; a denial stays a denial, unasked
        assert (await agent.call_for_model("mcp_other_peek")).status == "ok"
        assert len(approver.asked) == 1
        # reads: the skill's own server freely, another server only with the user
        own = await agent.call_for_model(
            "read_mcp_resource", {"server": "docs", "uri": "note://docs/a"}
        )
        assert own.status == "ok" and len(approver.asked) == 1
        approver.answer = False
        cross = await agent.call_for_model(
            "read_mcp_resource", {"server": "other", "uri": "note://other/b"}
        )
        assert cross.status == "refused"
        assert "reads from the MCP server 'other', not from 'docs'" in approver.asked[-1].reason
        # the host's own shell, by name
        decision = await agent.authorize_host_tool("run_shell_command", {"cmd": "ls"})
        assert decision is not None and decision.outcome == "deny"
        assert approver.asked[-1].arguments == {"cmd": "ls"} and approver.asked[-1].skills
        assert await agent.authorize_host_tool("search_web") is None
        approver.answer = True
        dangerous = await agent.authorize_host_tool("search_web", risk=RiskLevel.DANGEROUS)
        assert dangerous is not None and dangerous.outcome == "allow"
        # deactivating lifts it
        assert agent.skills.deactivate() == (PDF_ID,)
        count = len(approver.asked)
        assert await agent.authorize_host_tool("run_shell_command") is None
        assert (await agent.call_for_model("mcp_other_run")).status == "ok"
        assert len(approver.asked) == count
        read = await agent.call_for_model(
            "read_mcp_skill_file", {"skill": "pdf", "path": "FORMS.md"}
        )
        assert "activate the skill" in read.text


async def test_without_a_callback_the_gate_denies_and_closing_the_runtime_lifts_it(
    autojump_clock: Clock,
) -> None:
    docs, other = gate_servers()
    servers = (docs.server_config(skills=True), other.server_config(trust_level="trusted"))
    async with open_runtime(config(*servers)) as rt:
        agent = await activated(rt, Approver())
        agent.approve = None
        refused = await agent.call_for_model("mcp_other_run")
        assert refused.status == "refused" and "no approval callback" in refused.text
    assert agent.skills.active() == ()
    assert await agent.authorize_host_tool("run_shell_command", risk=RiskLevel.DANGEROUS) is None
