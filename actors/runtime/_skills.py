"""Skills (``io.modelcontextprotocol/skills``) for the host: listings, entries, verified files.

A server's skills are used only when its configuration turns them on (``skills: true``) and
its current connection declared both the extension (``capabilities.extensions`` holds
``io.modelcontextprotocol/skills``) and ``resources``; a session of such a server advertises
the extension too (in ``initialize`` on the handshake revisions, in every request's
``_meta`` in 2026-07-28). Both eras are served the same way; a legacy server's results may
lack ``ttlMs`` and ``cacheScope``.

- ``rt.list_skills(server)``: every page of ``skills/list`` (bounded like the tool listing:
  ``max_list_entries``, ``max_list_pages``, cursors of at most 64 KiB, no cycles), each entry
  checked alone (:func:`~trio_mcp.protocol.check_skill_entry`): an invalid one is skipped
  with its reason, reported in the listing's ``skipped``, as a :class:`SkillSkipped` event and
  a warning under ``trio_mcp.server.<name>``, and the others are used.
- ``rt.get_skill(server, uri)``: ``skills/get`` (for a skill that was not listed, or to
  refresh one), checked the same way (an invalid entry raises :class:`McpCatalogError`).
- ``rt.read_skill_directory(server, uri)``: ``resources/directory/read``, only when the
  server declared ``directoryRead: true``.
- ``rt.read_skill_file(skill, uri)``: one file of the skill's held manifest, from the
  skill's own server, with ``resources/read``; its bytes are returned only after their size
  and SHA-256 digest matched the manifest (:class:`SkillIntegrityError` otherwise).

Nothing is fetched unless the host asks: no listing at connect, no file before it is read.
A skill's identity is its server's name and its ``uri`` together (:attr:`McpSkill.key`).
Nothing here executes anything a skill contains.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import logging
from collections.abc import Mapping
from typing import Any, Final

import attrs

from ...protocol._codec import structure
from ...protocol._errors import (
    InvalidMessage,
    McpCatalogError,
    McpError,
    ServerUnavailable,
)
from ...protocol._methods import SKILLS_EXTENSION, decode_result
from ...protocol._skills import check_skill_entry, skill_directory, verify_skill_file
from ...protocol._types import (
    BlobResourceContents,
    ReadDirectoryResult,
    ReadResourceResult,
    Resource,
    SkillEntry,
    SkillResourceRef,
    SkillsGetResult,
    TextResourceContents,
)
from ..config._config import RuntimeConfig
from ._events import EventBus, SkillSkipped
from ._resources import _FAILING, _failure
from ._session import MAX_CURSOR_BYTES, Session, cursor_too_long
from ._skillwatch import SkillWatcher
from ._supervisor import ServerSupervisor

__all__ = [
    "McpSkill",
    "SkillDirectoryPage",
    "SkillFile",
    "SkillIntegrityError",
    "SkillListing",
    "Skills",
    "SkippedSkill",
]

_LIST: Final = "skills/list"
_GET: Final = "skills/get"
_DIRECTORY: Final = "resources/directory/read"


@attrs.frozen(kw_only=True)
class McpSkill:
    """A checked skill entry of ``server``: identity ``(server, uri)`` (:attr:`key`), the
    frontmatter's ``name`` and ``description``, and the ``entry`` as the server sent it
    (``entry.resources``: the manifest, or ``"dynamic"``)."""

    server: str
    entry: SkillEntry

    @property
    def uri(self) -> str:
        """The URI of the skill's ``SKILL.md``."""
        return self.entry.uri

    @property
    def key(self) -> tuple[str, str]:
        """The skill's identity: its server's name and its URI."""
        return (self.server, self.entry.uri)

    @property
    def name(self) -> str:
        return str(self.entry.frontmatter["name"])

    @property
    def description(self) -> str:
        return str(self.entry.frontmatter["description"])

    @property
    def directory(self) -> str:
        """The skill's directory: its URI without ``/SKILL.md``."""
        directory = skill_directory(self.entry.uri)
        assert directory is not None  # checked when the skill was built
        return directory

    @property
    def dynamic(self) -> bool:
        """Whether the server marked the skill ``"dynamic"``: no manifest, nothing to verify
        its content against, so an approval cannot be bound to it."""
        return self.entry.is_dynamic

    @property
    def files(self) -> tuple[SkillResourceRef, ...]:
        """The manifest (empty for a dynamic skill)."""
        resources = self.entry.resources
        return resources if isinstance(resources, tuple) else ()

    @property
    def digests(self) -> frozenset[tuple[str, str]]:
        """The ``{uri, digest}`` set an approval is bound to (empty for a dynamic skill)."""
        return frozenset((ref.uri, ref.digest) for ref in self.files)

    @property
    def allowed_tools(self) -> str | None:
        """The frontmatter's ``allowed-tools`` as written, for a host that asks its user about
        it. trio-mcp never acts on it: tools keep their own permissions."""
        value = self.entry.frontmatter.get("allowed-tools")
        return None if value is None else str(value)


@attrs.frozen(kw_only=True)
class SkippedSkill:
    """An entry of ``server`` that was not used, and why."""

    server: str
    uri: str
    reason: str


@attrs.frozen(kw_only=True)
class SkillListing:
    """Every skill ``server`` listed that can be used, and the entries skipped."""

    server: str
    skills: tuple[McpSkill, ...]
    skipped: tuple[SkippedSkill, ...] = ()
    #: Orders the listings of one server by when their request started (0: not numbered).
    ticket: int = 0


@attrs.frozen(kw_only=True)
class SkillDirectoryPage:
    """One page of ``resources/directory/read``: the direct children of a directory
    (subdirectories have ``mimeType`` ``"inode/directory"``)."""

    server: str
    uri: str
    resources: tuple[Resource, ...]
    next_cursor: str | None = None


@attrs.frozen(kw_only=True)
class SkillFile:
    """A file of a skill whose size and SHA-256 digest matched the skill's manifest."""

    server: str
    skill_uri: str
    uri: str
    data: bytes
    digest: str
    mime_type: str | None = None

    @property
    def text(self) -> str | None:
        """The file as UTF-8 text, or None when it is not."""
        try:
            return self.data.decode("utf-8")
        except UnicodeDecodeError:
            return None


class SkillIntegrityError(McpCatalogError):
    """A file of a skill did not match its manifest (size or digest), or a ``SKILL.md`` did
    not match its entry; its content was not used. ``skill_uri`` and ``uri`` name them,
    ``reason`` says what differed. Fetch the entry again (``rt.get_skill``) before trusting
    the skill again."""

    def __init__(self, message: str, *, server: str, skill_uri: str, uri: str, reason: str):
        super().__init__(message, kind="server_error", server=server, method="resources/read")
        self.skill_uri = skill_uri
        self.uri = uri
        self.reason = reason


def _skill_of(server: str, raw: Any, path: str) -> McpSkill | SkippedSkill:
    uri = raw.get("uri") if isinstance(raw, Mapping) else None
    label = uri if isinstance(uri, str) else "(no uri)"
    try:
        entry = structure(raw, SkillEntry, path=path)
    except InvalidMessage as exc:
        return SkippedSkill(server=server, uri=label, reason=f"the entry is malformed: {exc}")
    reason = check_skill_entry(entry)
    if reason is not None:
        return SkippedSkill(server=server, uri=entry.uri, reason=reason)
    return McpSkill(server=server, entry=entry)


@attrs.define(eq=False)
class Skills:
    """The skill operations over a runtime's servers, for the host. Built by the runtime; the
    host uses it through ``rt``. Holds no state: what a host keeps (the catalogue, approvals)
    is the host's, or the agent surface's."""

    config: RuntimeConfig
    supervisors: Mapping[str, ServerSupervisor]
    events: EventBus
    #: The actor that holds each server's newest listing and lists again after changes.
    watcher: SkillWatcher = attrs.field(init=False)
    _tickets: itertools.count[int] = attrs.field(factory=lambda: itertools.count(1), init=False)

    def __attrs_post_init__(self) -> None:
        self.watcher = SkillWatcher(
            events=self.events,
            servers=tuple(name for name, s in self.supervisors.items() if s.config.skills),
            debounce=self.config.list_changed_debounce,
            relist=self.list_skills,
        )

    def servers(self) -> tuple[str, ...]:
        """The servers whose skills can be used now: ``skills: true``, READY, and declaring
        the extension and ``resources``; in name order."""
        return tuple(name for name in sorted(self.supervisors) if self._why_not(name) is None)

    def _why_not(self, server: str) -> str | None:
        supervisor = self.supervisors[server]
        if not supervisor.config.skills:
            return (
                f"skills are off for the MCP server {server!r} (turn them on with skills: true "
                "in its configuration)"
            )
        if not supervisor.accepts_calls:
            return f"the MCP server {server!r} is not connected now"
        caps = supervisor.status().capabilities
        if caps is None or SKILLS_EXTENSION not in (caps.extensions or {}):
            return (
                f"the MCP server {server!r} does not offer skills (it did not declare "
                f"{SKILLS_EXTENSION})"
            )
        if caps.resources is None:
            return (
                f"the MCP server {server!r} declared {SKILLS_EXTENSION} without resources, "
                "which the extension requires; its skills are not used"
            )
        return None

    def _resolve(self, server: str, method: str) -> tuple[ServerSupervisor, Session]:
        supervisor = self.supervisors.get(server)
        if supervisor is None:
            known = ", ".join(map(repr, self.servers())) or "none"
            raise McpCatalogError(
                f"there is no MCP server named {server!r} (servers that offer skills: {known})",
                kind="unknown_server",
                server=server,
                method=method,
            )
        try:
            session = supervisor.ready_session()
        except ServerUnavailable as exc:
            raise McpCatalogError(
                str(exc), kind="unavailable", server=server, method=method
            ) from exc
        why = self._why_not(server)
        if why is not None:
            raise McpCatalogError(why, kind="invalid", server=server, method=method)
        if method == _DIRECTORY:
            caps = session.info.capabilities if session.info is not None else None
            settings = (caps.extensions or {}).get(SKILLS_EXTENSION) if caps else None
            if not isinstance(settings, Mapping) or settings.get("directoryRead") is not True:
                raise McpCatalogError(
                    f"the MCP server {server!r} does not offer {_DIRECTORY} (it did not declare "
                    "directoryRead: true); read the files the skill's manifest lists instead",
                    kind="invalid",
                    server=server,
                    method=method,
                )
        return supervisor, session

    async def _request(
        self, server: str, method: str, params: Mapping[str, Any] | None
    ) -> Mapping[str, Any]:
        supervisor, session = self._resolve(server, method)
        try:
            return await session.request(method, params, timeout=supervisor.config.timeout)
        except _FAILING as exc:
            raise _failure(server, method, exc) from exc

    async def list_skills(self, server: str) -> SkillListing:
        """Every skill of ``server``'s ``skills/list`` (all pages), invalid entries skipped
        with their reasons; the listing is handed to the :attr:`watcher` too (the newest one
        of each server is what the agent surface follows). Raises :class:`McpCatalogError`."""
        ticket = next(self._tickets)
        listing = attrs.evolve(await self._list(server), ticket=ticket)
        await self.watcher.record(server, listing)
        return listing

    async def _list(self, server: str) -> SkillListing:
        supervisor, session = self._resolve(server, _LIST)
        try:
            raw = await session.list_all(_LIST, "skills")
        except _FAILING as exc:
            raise _failure(server, _LIST, exc) from exc
        except McpError as exc:  # ListingTooLarge, a cursor that is not a string...
            raise McpCatalogError(
                f"the MCP server {server!r} answered {_LIST} in a way this client does not "
                f"follow: {exc}",
                kind="server_error",
                server=server,
                method=_LIST,
            ) from exc
        skills: list[McpSkill] = []
        skipped: list[SkippedSkill] = []
        seen: set[str] = set()
        for index, item in enumerate(raw):
            got = _skill_of(server, item, f"$.result.skills[{index}]")
            if isinstance(got, McpSkill) and got.uri in seen:
                got = SkippedSkill(server=server, uri=got.uri, reason="its URI is listed twice")
            if isinstance(got, SkippedSkill):
                skipped.append(got)
                self._report(supervisor, got)
            else:
                seen.add(got.uri)
                skills.append(got)
        return SkillListing(server=server, skills=tuple(skills), skipped=tuple(skipped))

    def _report(self, supervisor: ServerSupervisor, skipped: SkippedSkill) -> None:
        logging.getLogger(f"trio_mcp.server.{supervisor.name}").warning(
            "skill %r skipped: %s", skipped.uri, skipped.reason
        )
        self.events.publish(
            SkillSkipped(server=skipped.server, uri=skipped.uri, reason=skipped.reason)
        )

    async def get_skill(self, server: str, uri: str) -> McpSkill:
        """The entry of the skill ``uri`` (its ``SKILL.md`` URI) of ``server``, from
        ``skills/get``, checked. Raises :class:`McpCatalogError` (``invalid`` when the server
        does not know the skill or its entry breaks a rule: the reason is in the message)."""
        raw = await self._request(server, _GET, {"uri": uri})
        try:
            result = decode_result(_GET, raw)
        except InvalidMessage as exc:
            raise _failure(server, _GET, exc) from exc
        assert isinstance(result, SkillsGetResult)
        entry = result.skill
        reason = check_skill_entry(entry)
        if reason is None and entry.uri != uri:
            reason = f"the server answered with the entry of another skill ({entry.uri[:80]!r})"
        if reason is not None:
            supervisor = self.supervisors[server]
            self._report(supervisor, SkippedSkill(server=server, uri=uri, reason=reason))
            raise McpCatalogError(
                f"the skill {uri!r} of the MCP server {server!r} cannot be used: {reason}",
                kind="invalid",
                server=server,
                method=_GET,
            )
        return McpSkill(server=server, entry=entry)

    async def read_directory(
        self, server: str, uri: str, cursor: str | None = None
    ) -> SkillDirectoryPage:
        """One page of ``resources/directory/read`` of the directory ``uri``; only for a
        server that declared ``directoryRead: true``. Raises :class:`McpCatalogError`."""
        params: dict[str, Any] = {"uri": uri}
        if cursor is not None:
            params["cursor"] = cursor
        raw = await self._request(server, _DIRECTORY, params)
        try:
            result = decode_result(_DIRECTORY, raw)
        except InvalidMessage as exc:
            raise _failure(server, _DIRECTORY, exc) from exc
        assert isinstance(result, ReadDirectoryResult)
        if result.next_cursor is not None and cursor_too_long(result.next_cursor):
            raise McpCatalogError(
                f"the MCP server {server!r} answered {_DIRECTORY} with a nextCursor of more "
                f"than {MAX_CURSOR_BYTES:,} bytes, which this client does not follow",
                kind="server_error",
                server=server,
                method=_DIRECTORY,
            )
        return SkillDirectoryPage(
            server=server, uri=uri, resources=result.resources, next_cursor=result.next_cursor
        )

    async def read_file(self, skill: McpSkill, ref: SkillResourceRef) -> SkillFile:
        """The file ``ref`` of ``skill``'s manifest, read from the skill's own server, once
        its size and digest matched. Raises :class:`SkillIntegrityError` when they do not
        (nothing of it is returned), :class:`McpCatalogError` for the other failures, and
        ``ValueError`` for a ``ref`` that is not in the manifest."""
        if ref not in skill.files:
            raise ValueError(f"{ref.uri!r} is not a file of the skill {skill.uri!r}")
        server = skill.server
        method = "resources/read"
        supervisor, session = self._resolve(server, method)

        def check(raw: Mapping[str, Any]) -> ReadResourceResult:
            result = decode_result(method, raw)
            assert isinstance(result, ReadResourceResult)
            return result

        try:
            result, _ = await session.through_cache(
                method, {"uri": ref.uri}, timeout=supervisor.config.timeout, check=check
            )
        except _FAILING as exc:
            raise _failure(server, method, exc) from exc
        data, mime_type, problem = _bytes_of(result, ref)
        if problem is None:
            problem = verify_skill_file(data, ref)
        if problem is not None:
            raise SkillIntegrityError(
                f"the file {ref.uri!r} of the skill {skill.uri!r} (MCP server {server!r}) was "
                f"not used: {problem}; fetch the skill's entry again",
                server=server,
                skill_uri=skill.uri,
                uri=ref.uri,
                reason=problem,
            )
        return SkillFile(
            server=server,
            skill_uri=skill.uri,
            uri=ref.uri,
            data=data,
            digest=ref.digest,
            mime_type=mime_type,
        )


def _bytes_of(
    result: ReadResourceResult, ref: SkillResourceRef
) -> tuple[bytes, str | None, str | None]:
    """The raw bytes of the part of ``result`` for ``ref.uri`` (text as UTF-8, a blob decoded,
    never more than the manifest's size allows), its MIME type, and what was wrong."""
    parts = [part for part in result.contents if part.uri == ref.uri] or list(result.contents)
    if len(parts) != 1:
        return b"", None, f"the server sent {len(parts)} parts for it, not one"
    part = parts[0]
    if isinstance(part, TextResourceContents):
        data = part.text.encode("utf-8", "surrogatepass")
        return data, part.mime_type, None
    assert isinstance(part, BlobResourceContents)
    if len(part.blob) * 3 // 4 > ref.size + 3:
        return b"", part.mime_type, f"it is larger than the manifest's {ref.size:,} bytes"
    try:
        data = base64.b64decode(part.blob, validate=True)
    except (binascii.Error, ValueError):
        return b"", part.mime_type, "its blob is not valid base64"
    return data, part.mime_type, None
