"""MCP skills for the model: a catalogue, and two tools to activate a skill and read its files.

The host refreshes the catalogue when it builds its system prompt (``await
agent.skills.refresh()``: one ``skills/list`` per server whose skills can be used, nothing
else fetched) and gives the model :meth:`SkillShelf.prompt_text` (each skill's name,
description and origin server, grouped by server, with its id). Then the model has two tools:

- ``activate_mcp_skill(skill)``: needs the user's approval, once, through the surface's
  ``approve`` callback (it names the server and the number of files). The approval is bound
  to the skill's ``{uri, digest}`` set: when the server lists other files or other digests, it
  is revoked and asked again (a ``"dynamic"`` skill, which has no digests, is asked every
  time). Then the ``SKILL.md`` is fetched, checked against its manifest entry (size, sha256)
  and against the entry's frontmatter, and given to the model inside
  ``<mcp-skill server="..." uri="...">``, tagged as the server's text.
- ``read_mcp_skill_file(skill, path, offset, limit)``: a file of an activated skill, named by
  its path in the skill's directory (or its URI); only files of the held manifest, only from
  the skill's own server, each checked against its size and digest before anything of it is
  used; text in pages of at most 30,000 characters.

A file (or ``SKILL.md``) that does not match is never shown: the entry is fetched again with
``skills/get``, and the model is told what happened (the approval is revoked when the entry
changed). The skill's ``allowed-tools`` grants nothing: every tool keeps its permissions.
Nothing a skill holds is executed by trio-mcp. Skill text from a server that is not
``trusted`` goes through the same injection scan as resource text, with the same
data-not-instructions banner.

The shelf follows the runtime's listings (``rt.skill_listings()``: the runtime lists a
server's skills again when it says its resources changed, or after a reconnect) at its next
use, synchronously, and revokes every approval whose ``{uri, digest}`` set changed.

While a skill is active (its ``SKILL.md`` was given to the model; until :meth:`SkillShelf.
deactivate` or the runtime closes), :meth:`SkillShelf.gate_reason` holds the calls that
:class:`SkillGate` names (shell-like tools, reads from other servers): the agent surface asks
the user about each, whatever a rule, trust or an earlier approval says, and a denial stays one.

Identity is ``(server, uri)`` everywhere; the model names a skill by its id
``mcp:<server>:<uri>``, or by its name when no other skill has it. Skills with the same name
(from two servers, or two paths of one server) are all shown, each labelled with its server and
path: none hides another.
"""

from __future__ import annotations

import fnmatch
import logging
from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs
import trio

from ...protocol._errors import McpCatalogError
from ...protocol._skills import check_frontmatter, resolve_skill_file
from ...protocol._types import CallToolResult, SkillResourceRef, TextContent, Tool
from ..runtime._runtime import Runtime, RuntimeState
from ..runtime._skills import McpSkill, SkillFile, SkillIntegrityError, SkippedSkill
from ._catalog import Catalog, ModelToolResult, _schema, _tool
from ._render import TextPart
from ._risk import ApprovalCallback, ApprovalRequest, Decision, RiskLevel, decide

__all__ = [
    "ACTIVATE_SKILL_TOOL",
    "READ_SKILL_FILE_TOOL",
    "SKILL_TOOL_NAMES",
    "SkillCatalogEntry",
    "SkillGate",
    "SkillShelf",
]

logger = logging.getLogger("trio_mcp.agent")

ACTIVATE_SKILL_TOOL: Final = "activate_mcp_skill"
READ_SKILL_FILE_TOOL: Final = "read_mcp_skill_file"
SKILL_TOOL_NAMES: Final = frozenset({ACTIVATE_SKILL_TOOL, READ_SKILL_FILE_TOOL})
#: The most characters one read of a skill file gives the model.
MAX_READ_CHARS: Final = 30_000
_ID_PREFIX: Final = "mcp:"


def skill_id(server: str, uri: str) -> str:
    """The model-facing id of a skill: ``mcp:<server>:<uri>`` (its identity, spelled out)."""
    return f"{_ID_PREFIX}{server}:{uri}"


@attrs.frozen(kw_only=True)
class SkillCatalogEntry:
    """One skill as the model sees it: ``id`` (``mcp:<server>:<uri>``), ``label`` (its name,
    with its server and URI when another skill has the same name), ``description``, the origin
    ``server``, and how many files it has (None for a dynamic skill)."""

    id: str
    name: str
    label: str
    description: str
    server: str
    uri: str
    files: int | None


@attrs.frozen(kw_only=True)
class SkillGate:
    """What asks the user, call by call, while an MCP skill is active (its ``SKILL.md`` was
    given to the model and :meth:`SkillShelf.deactivate` was not called since), even where a
    rule, the trust level or an earlier approval would allow it; a denial stays a denial.

    - ``tools``: globs over tool names (``fnmatch``, case-sensitive) of the host's
      shell-like tools: its own (``run_shell_command``, a sub-agent that can run commands:
      the host asks :meth:`~trio_mcp.actors.AgentSurface.authorize_host_tool`) or registered
      MCP tools (``mcp_box_exec``).
    - ``min_risk``: MCP tools of this risk or more are shell-like too (default ``exec``:
      every tool not known to be read-only; ``dangerous`` for the destructive ones only;
      None: by name only).
    - ``cross_server_reads``: a resource read or prompt get from another server than the
      active skills' asks (default True)."""

    tools: tuple[str, ...] = ()
    min_risk: RiskLevel | None = RiskLevel.EXEC
    cross_server_reads: bool = True


@attrs.define(eq=False)
class SkillShelf:
    """The skills the model can use, and their approvals. Built by the agent surface
    (``agent.skills``); the host calls :meth:`refresh` and gives the model
    :meth:`prompt_text`."""

    runtime: Runtime
    catalog: Catalog
    approve: Callable[[], ApprovalCallback | None]
    gate: SkillGate = attrs.field(factory=SkillGate)
    _held: dict[tuple[str, str], McpSkill] = attrs.field(factory=dict, init=False)
    _approved: dict[tuple[str, str], frozenset[tuple[str, str]]] = attrs.field(
        factory=dict, init=False
    )
    _activated: set[tuple[str, str]] = attrs.field(factory=set, init=False)
    #: Skills approved at some time (an approval asked again says what changed).
    _ever_approved: set[tuple[str, str]] = attrs.field(factory=set, init=False)
    #: The entries the last refresh skipped, and the servers whose listing failed (with why).
    skipped: tuple[SkippedSkill, ...] = attrs.field(default=(), init=False)
    unavailable: Mapping[str, str] = attrs.field(factory=dict, init=False)
    #: The runtime's listings version last followed, and the ticket of each server's held
    #: listing (a newer listing of the runtime's replaces it at the next use).
    _seen: int = attrs.field(default=0, init=False)
    _tickets: dict[str, int] = attrs.field(factory=dict, init=False)
    #: Skills whose SKILL.md was given to the model and not deactivated since: the gate.
    _loaded: dict[tuple[str, str], McpSkill] = attrs.field(factory=dict, init=False)

    # ------------------------------------------------------------------ the catalogue

    async def refresh(self) -> tuple[SkillCatalogEntry, ...]:
        """List the skills of every server whose skills can be used now (one ``skills/list``
        per server, all pages; no file is fetched) and hold their entries: the catalogue.
        A server whose listing fails keeps nothing and is named in :attr:`unavailable`; an
        approval whose skill's ``{uri, digest}`` set changed is revoked."""
        listings: dict[str, tuple[tuple[McpSkill, ...], int]] = {}
        skipped: list[SkippedSkill] = []
        failed: dict[str, str] = {}

        async def one(server: str) -> None:
            try:
                listing = await self.runtime.list_skills(server)
            except McpCatalogError as exc:
                failed[server] = str(exc)
                return
            listings[server] = (listing.skills, listing.ticket)
            skipped.extend(listing.skipped)

        async with trio.open_nursery() as nursery:
            for server in self.runtime.skill_servers():
                nursery.start_soon(one, server)
        self._held = {
            skill.key: skill for server in sorted(listings) for skill in listings[server][0]
        }
        self._tickets = {server: listings[server][1] for server in listings}
        for key in list(self._approved):
            if key in self._held:
                self._check_approval(self._held[key])
        self.skipped = tuple(sorted(skipped, key=lambda s: (s.server, s.uri)))
        self.unavailable = dict(sorted(failed.items()))
        return self.catalogue()

    def _sync(self) -> None:
        """Follow the runtime (synchronously, at each use): hold each server's listing that is
        newer than the one held (the runtime lists a server's skills again when it says its
        resources changed, or after a reconnect), revoking every approval whose ``{uri,
        digest}`` set changed; lift the gate once the runtime is closed."""
        if self.runtime.state is not RuntimeState.OPEN:
            self._loaded.clear()
        view = self.runtime.skill_listings()
        if view.version == self._seen:
            return
        self._seen = view.version
        for server, listing in view.listings.items():
            if server not in self._tickets or listing.ticket <= self._tickets[server]:
                continue
            self._tickets[server] = listing.ticket
            self._held = {key: skill for key, skill in self._held.items() if key[0] != server}
            self._held.update((skill.key, skill) for skill in listing.skills)
            for key in [key for key in self._approved if key[0] == server]:
                if key in self._held:
                    self._check_approval(self._held[key])
            others = [s for s in self.skipped if s.server != server]
            self.skipped = tuple(
                sorted([*others, *listing.skipped], key=lambda s: (s.server, s.uri))
            )

    def catalogue(self) -> tuple[SkillCatalogEntry, ...]:
        """The skills held now, by server and URI, each labelled so that none hides
        another."""
        self._sync()
        names: dict[str, int] = {}
        for skill in self._held.values():
            names[skill.name] = names.get(skill.name, 0) + 1
        out = []
        for key in sorted(self._held):
            skill = self._held[key]
            label = skill.name
            if names[skill.name] > 1:
                label = f"{skill.name} (from {skill.server!r}, {skill.uri})"
            out.append(_entry(skill, label))
        return tuple(out)

    def held(self, server: str, uri: str) -> McpSkill | None:
        """The entry held for the skill ``(server, uri)``, if any."""
        self._sync()
        return self._held.get((server, uri))

    def prompt_text(self) -> str:
        """The catalogue for the system prompt: one section per server, each saying that the
        server wrote it; empty when there are no skills."""
        entries = self.catalogue()
        if not entries:
            return ""
        lines = [
            "MCP skills (activate one with activate_mcp_skill before following it; each was "
            "written by the MCP server named, not by the user):"
        ]
        for server in sorted({entry.server for entry in entries}):
            lines.append(f"## Skills of the MCP server {server!r}")
            for entry in entries:
                if entry.server == server:
                    description = entry.description.replace("\n", " ")[:300]
                    lines.append(f"- {entry.label} [id: {entry.id}]: {description}")
        return "\n".join(lines)

    def tool_definitions(self) -> tuple[Tool, ...]:
        """The two skill tools, while the catalogue holds a skill."""
        self._sync()
        if not self._held:
            return ()
        skill = {
            "type": "string",
            "description": "The skill's id (mcp:<server>:<uri>) from the skills list, or its "
            "name when no other skill has that name.",
        }
        return (
            _tool(
                ACTIVATE_SKILL_TOOL,
                "Activate an MCP skill from the skills list: asks the user once, then returns "
                "its SKILL.md instructions (written by that MCP server) and the files it has.",
                _schema({"skill": skill}, ["skill"]),
            ),
            _tool(
                READ_SKILL_FILE_TOOL,
                "Read one file of an activated MCP skill, by its path in the skill's directory "
                f"(as activate_mcp_skill listed it). Text comes in pages of at most "
                f"{MAX_READ_CHARS:,} characters: offset and limit choose the page.",
                _schema(
                    {
                        "skill": skill,
                        "path": {"type": "string", "description": "The file's path, as listed."},
                        "offset": {"type": "integer", "minimum": 0},
                        "limit": {"type": "integer", "minimum": 1, "maximum": MAX_READ_CHARS},
                    },
                    ["skill", "path"],
                ),
            ),
        )

    # ------------------------------------------------------------------ the gate

    def active(self) -> tuple[SkillCatalogEntry, ...]:
        """The skills active now (their ``SKILL.md`` was given to the model and they were not
        deactivated since; none once the runtime is closed), by server and URI."""
        self._sync()
        return tuple(
            _entry(self._loaded[key], self._loaded[key].name) for key in sorted(self._loaded)
        )

    def deactivate(self, skill: str | None = None) -> tuple[str, ...]:
        """The skill's text has left the model's context (the conversation was cleared):
        deactivate the skill with the id ``skill`` (``mcp:<server>:<uri>``), or every skill
        (None); returns the ids deactivated. The gate lifts once no skill is active; reading
        the skill's files needs :data:`ACTIVATE_SKILL_TOOL` again (its approval holds while
        its ``{uri, digest}`` set does)."""
        keys = [key for key in sorted(self._loaded) if skill is None or skill_id(*key) == skill]
        for key in keys:
            del self._loaded[key]
            self._activated.discard(key)
        if keys:
            logger.info("MCP skills deactivated: %s", ", ".join(skill_id(*key) for key in keys))
        return tuple(skill_id(*key) for key in keys)

    def gate_reason(
        self,
        name: str,
        *,
        risk: RiskLevel | None = None,
        read_from: str | None = None,
        reads: bool = False,
    ) -> str | None:
        """Why the call of the tool ``name`` must be asked about because a skill is active,
        or None. ``risk``: the tool's risk level (MCP tools; a host tool may give its own);
        ``reads``: the call reads a resource or gets a prompt, from the server ``read_from``
        (None: not known yet)."""
        self._sync()
        if not self._loaded:
            return None
        skills = [self._loaded[key] for key in sorted(self._loaded)]
        named = ", ".join(f"{s.name!r} of the MCP server {s.server!r}" for s in skills)
        several = len(skills) > 1
        active = (
            f"the MCP skill{'s' if several else ''} {named} {'are' if several else 'is'} active"
        )
        if reads:
            others = sorted({s.server for s in skills if s.server != read_from})
            if not self.gate.cross_server_reads or not others:
                return None
            source = "an unnamed server" if read_from is None else f"the MCP server {read_from!r}"
            return (
                f"{active}, and this reads from {source}, not from "
                f"{', '.join(map(repr, others))}: a skill's text may not reach other servers "
                "without the user"
            )
        shell = any(fnmatch.fnmatchcase(name, pattern) for pattern in self.gate.tools)
        if not shell and (risk is None or self.gate.min_risk is None or risk < self.gate.min_risk):
            return None
        what = f"a shell-like tool ({risk} risk)" if risk is not None else "a shell-like tool"
        return f"{active}, and {name!r} is {what}: asked call by call while a skill is active"

    def active_ids(self) -> tuple[str, ...]:
        """The ids of the active skills (what an approval request's ``skills`` names)."""
        self._sync()
        return tuple(skill_id(*key) for key in sorted(self._loaded))

    # ------------------------------------------------------------------ approvals

    def approved(self, server: str, uri: str) -> bool:
        """Whether the skill ``(server, uri)`` is approved for its current ``{uri, digest}``
        set."""
        self._sync()
        skill = self._held.get((server, uri))
        return skill is not None and self._approved.get(skill.key) == skill.digests

    def revoke(self, server: str, uri: str | None = None) -> None:
        """Forget the approval of one skill, or of every skill of ``server``."""
        for key in list(self._approved):
            if key[0] == server and (uri is None or key[1] == uri):
                del self._approved[key]
                self._activated.discard(key)

    def _check_approval(self, skill: McpSkill) -> bool:
        """Revoke the approval of ``skill`` when it was given for another ``{uri, digest}``
        set; whether it was revoked."""
        given = self._approved.get(skill.key)
        if given is not None and given != skill.digests:
            logger.info(
                "the skill %r of %r changed its files; its approval is revoked",
                skill.uri,
                skill.server,
            )
            del self._approved[skill.key]
            self._activated.discard(skill.key)
            return True
        return False

    async def _ask(self, skill: McpSkill, changed: bool) -> Decision:
        files = "a dynamic set of" if skill.dynamic else str(len(skill.files))
        reason = (
            f"activate the skill {skill.name!r} of the MCP server {skill.server!r} ({files} "
            "files): its instructions, written by that server, go to the model"
        )
        approve = self.approve()
        if approve is None:
            return Decision(outcome="deny", reason=f"{reason}; the host has no approval callback")
        request = ApprovalRequest(
            server=skill.server,
            tool=ACTIVATE_SKILL_TOOL,
            registered_name=ACTIVATE_SKILL_TOOL,
            risk=RiskLevel.EXEC,
            arguments={
                "skill": skill_id(*skill.key),
                "name": skill.name,
                "uri": skill.uri,
                "files": None if skill.dynamic else len(skill.files),
            },
            changed=("resources",) if changed else (),
            reason=reason,
        )
        try:
            answer = await approve(request)
        except Exception:  # the host's callback: a failure is a no
            logger.exception("the approval callback failed for %s; refused", request)
            return Decision(outcome="deny", reason=f"{reason}; the approval callback failed")
        if answer is not True:
            return Decision(outcome="deny", reason=f"the user did not approve: {reason}")
        if not skill.dynamic:
            self._approved[skill.key] = skill.digests
            self._ever_approved.add(skill.key)
        return Decision(outcome="allow", reason=f"approved by the user: {reason}")

    # ------------------------------------------------------------------ the tools

    async def run_tool(self, name: str, arguments: Mapping[str, Any]) -> ModelToolResult:
        """Run ``activate_mcp_skill`` or ``read_mcp_skill_file`` with the model's
        ``arguments``; every failure is a result with ``is_error``, never an exception."""
        self._sync()
        decision = decide(
            name,
            self.runtime.config.permission_rules,
            profile=self.runtime.config.profile,
            risk=RiskLevel.READ_ONLY,
            allowed_capabilities=self.runtime.config.allowed_capabilities,
        )
        if decision.outcome == "deny":
            return _error(name, "refused", f"refused: {decision.reason}", None, decision)
        try:
            skill = await self._find(arguments.get("skill"))
            if name == ACTIVATE_SKILL_TOOL:
                return await self._activate(skill)
            return await self._read(skill, arguments)
        except McpCatalogError as exc:
            return _error(name, exc.kind, str(exc), exc.server)

    async def _find(self, value: Any) -> McpSkill:
        """The skill the model named: by id (a skill that is not listed is fetched with
        ``skills/get``), or by a name no other skill has."""
        if not isinstance(value, str) or not value:
            raise McpCatalogError("'skill' must be a skill's id or name", kind="invalid")
        if value.startswith(_ID_PREFIX):
            server, sep, uri = value[len(_ID_PREFIX) :].partition(":")
            if not sep or self.runtime.server_config(server) is None:
                raise McpCatalogError(
                    f"{value[:120]!r} is not the id of a skill of a configured server "
                    "(mcp:<server>:<uri>)",
                    kind="invalid",
                )
            held = self._held.get((server, uri))
            if held is not None:
                return held
            skill = await self.runtime.get_skill(server, uri)
            self._held[skill.key] = skill
            return skill
        matches = [skill for skill in self._held.values() if skill.name == value]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise McpCatalogError(
                f"no MCP skill is named {value[:80]!r}; use an id from the skills list",
                kind="not_found",
            )
        ids = ", ".join(skill_id(*skill.key) for skill in sorted(matches, key=lambda s: s.key))
        raise McpCatalogError(
            f"several MCP skills are named {value[:80]!r}: say which by its id ({ids})",
            kind="invalid",
        )

    async def _activate(self, skill: McpSkill) -> ModelToolResult:
        name = ACTIVATE_SKILL_TOOL
        if skill.dynamic or self._approved.get(skill.key) != skill.digests:
            changed = skill.key in self._ever_approved and not skill.dynamic
            decision = await self._ask(skill, changed)
            if decision.outcome != "allow":
                return _error(name, "refused", decision.reason, skill.server, decision)
        if skill.dynamic:
            read = await self.runtime.read_resource(skill.server, skill.uri)
            text = read.text
        else:
            ref = next(ref for ref in skill.files if ref.uri == skill.uri)
            got = await self._verified(skill, ref)
            if isinstance(got, ModelToolResult):
                return got
            text = got.text or ""
            problem = check_frontmatter(text, skill.entry.frontmatter)
            if problem is not None:
                return await self._mismatch(name, skill, skill.uri, problem)
        self._activated.add(skill.key)
        self._loaded[skill.key] = skill
        lines = [
            f"[MCP skill {skill.name!r}, written by the MCP server {skill.server!r} (not by the "
            "user); its allowed-tools, if any, grant nothing: every tool keeps its own "
            "permissions]",
            f'<mcp-skill server="{skill.server}" uri="{skill.uri}">',
            text,
            "</mcp-skill>",
        ]
        others = [ref for ref in skill.files if ref.uri != skill.uri]
        if others:
            lines.append(
                f"Files of this skill (read one with {READ_SKILL_FILE_TOOL}, skill "
                f"{skill_id(*skill.key)!r}):"
            )
            lines += [
                f"- {ref.uri[len(skill.directory) + 1 :]} ({ref.size:,} bytes)" for ref in others
            ]
        elif skill.dynamic:
            lines.append("[this skill is dynamic: it has no manifest of files that can be read]")
        return await self._render(name, skill.server, "\n".join(lines))

    async def _read(self, skill: McpSkill, arguments: Mapping[str, Any]) -> ModelToolResult:
        name = READ_SKILL_FILE_TOOL
        if skill.key not in self._activated or not self.approved(*skill.key):
            raise McpCatalogError(
                f"activate the skill {skill_id(*skill.key)!r} with {ACTIVATE_SKILL_TOOL} "
                "first (it needs the user's approval)",
                kind="invalid",
                server=skill.server,
            )
        path = arguments.get("path")
        if not isinstance(path, str) or not path:
            raise McpCatalogError("'path' must be the file's path in the skill", kind="invalid")
        offset = _count(arguments, "offset", 0, minimum=0)
        limit = min(_count(arguments, "limit", MAX_READ_CHARS, minimum=1), MAX_READ_CHARS)
        ref = resolve_skill_file(skill.entry, path)
        if isinstance(ref, str):
            raise McpCatalogError(
                f"{path[:120]!r} cannot be read: {ref} (only the files activate_mcp_skill "
                "listed can be read)",
                kind="not_found",
                server=skill.server,
            )
        got = await self._verified(skill, ref)
        if isinstance(got, ModelToolResult):
            return got
        relative = ref.uri[len(skill.directory) + 1 :]
        head = f"[file {relative!r} of the MCP skill {skill.name!r} of the server {skill.server!r}"
        text = got.text
        if text is None:
            body = f"{head}: {ref.size:,} bytes of binary content, verified; not shown as text]"
        else:
            page = text[offset : offset + limit]
            end = offset + len(page)
            body = f"{head}, characters {offset:,}-{end:,} of {len(text):,}]\n{page}"
            if end < len(text):
                body += f"\n[more follows: call again with offset {end}]"
        return await self._render(name, skill.server, body)

    async def _verified(
        self, skill: McpSkill, ref: SkillResourceRef
    ) -> SkillFile | ModelToolResult:
        """The file ``ref`` of ``skill``, verified; or, when it did not match, the result that
        tells the model (the entry refreshed first)."""
        name = ACTIVATE_SKILL_TOOL if ref.uri == skill.uri else READ_SKILL_FILE_TOOL
        try:
            return await self.runtime.read_skill_file(skill, ref)
        except SkillIntegrityError as exc:
            return await self._mismatch(name, skill, ref.uri, exc.reason)

    async def _mismatch(
        self, name: str, skill: McpSkill, uri: str, problem: str
    ) -> ModelToolResult:
        """A file of ``skill`` did not match its entry: fetch the entry again (``skills/get``),
        hold the new one (revoking the approval when its files changed), and say so."""
        logger.warning(
            "skill %r of %r: the file %r does not match its entry (%s); fetching the entry again",
            skill.uri,
            skill.server,
            uri,
            problem,
        )
        text = (
            f"The file {uri!r} of the MCP skill {skill.name!r} (server {skill.server!r}) was not "
            f"used: {problem}."
        )
        try:
            fresh = await self.runtime.get_skill(skill.server, skill.uri)
        except McpCatalogError as exc:
            self._held.pop(skill.key, None)
            self._activated.discard(skill.key)
            text += f" Fetching the skill's entry again failed ({exc}); it is no longer offered."
            return _error(name, "server_error", text, skill.server)
        self._held[fresh.key] = fresh
        if fresh.digests != skill.digests:
            self._check_approval(fresh)
            text += (
                " The server's entry for the skill has changed since it was listed: the new "
                f"entry is held and the skill needs approval again ({ACTIVATE_SKILL_TOOL})."
            )
        else:
            text += (
                " The server's entry is unchanged, so the server serves content that does not "
                "match what it lists; do not rely on this file."
            )
        return _error(name, "server_error", text, skill.server)

    async def _render(self, name: str, server: str, text: str) -> ModelToolResult:
        rendered = await self.catalog.render(
            CallToolResult(content=(TextContent(text=text),)), server
        )
        return ModelToolResult(
            name=name,
            text=rendered.text,
            parts=rendered.parts,
            is_error=False,
            status="ok",
            server=server,
            rendered=rendered,
        )


def _entry(skill: McpSkill, label: str) -> SkillCatalogEntry:
    return SkillCatalogEntry(
        id=skill_id(*skill.key),
        name=skill.name,
        label=label,
        description=skill.description,
        server=skill.server,
        uri=skill.uri,
        files=None if skill.dynamic else len(skill.files),
    )


def _count(arguments: Mapping[str, Any], key: str, default: int, *, minimum: int) -> int:
    value = arguments.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise McpCatalogError(f"'{key}' must be an integer >= {minimum}", kind="invalid")
    return value


def _error(
    name: str,
    status: Any,
    message: str,
    server: str | None,
    decision: Decision | None = None,
) -> ModelToolResult:
    text = f"{name} failed ({status}): {message}"
    return ModelToolResult(
        name=name,
        text=text,
        parts=(TextPart(text=text),),
        is_error=True,
        status=status,
        decision=decision,
        server=server,
    )
