"""The rules of the skills extension (``io.modelcontextprotocol/skills``) that need no I/O.

A server's ``skills/list`` and ``skills/get`` entries are checked one by one with
:func:`check_skill_entry`: an entry that breaks a rule gives the reason, and the client skips
that entry alone. The rules (the extension's ``specification/stable/skills.mdx``):

- ``uri`` is the URI of the skill's ``SKILL.md``: ``<scheme>://<skill-path>/SKILL.md``, no
  query or fragment, no empty, ``.`` or ``..`` segment; the final segment of ``<skill-path>``
  is the skill's name (``frontmatter.name``). The authority is never resolved.
- ``frontmatter`` has ``name`` and ``description``, both non-empty strings.
- ``resources`` is the complete manifest of the skill's files (``SKILL.md`` among them) or the
  string ``"dynamic"``; anything else (absent, another string) is invalid. Each file has a URI
  inside the skill's directory, a ``digest`` of the form ``sha256:<64 lowercase hex>`` and a
  ``size`` in bytes; a URI listed twice is invalid.
- Limits a client must accept and may enforce: at most :data:`MAX_SKILL_FILES` (512) files and
  :data:`MAX_SKILL_BYTES` (16 MiB) in all, checked from the entry before anything is fetched;
  and a ``SKILL.md`` of at most :data:`MAX_SKILL_MD_BYTES` (100,000 bytes), since the model
  reads it whole.

A fetched file is used only after :func:`verify_skill_file` found its size and SHA-256 digest
to be the ones its manifest entry gives; a fetched ``SKILL.md``'s YAML frontmatter is compared
with the entry's ``frontmatter`` field by field by :func:`check_frontmatter` (every field that
differs, is missing or is extra is named). :func:`resolve_skill_file` turns what the model
names (a path relative to the skill's directory, or a full URI) into the URI of a file of the
held manifest, or says why not.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any, Final

from ._frontmatter import (
    FrontmatterError,
    field_differences,
    frontmatter_block,
    read_frontmatter,
)
from ._types import SkillEntry, SkillResourceRef

__all__ = [
    "MAX_SKILL_BYTES",
    "MAX_SKILL_FILES",
    "MAX_SKILL_MD_BYTES",
    "check_frontmatter",
    "check_skill_entry",
    "resolve_skill_file",
    "skill_digest",
    "skill_directory",
    "verify_skill_file",
]

#: Files per skill a client must accept (and the most this client accepts).
MAX_SKILL_FILES: Final = 512
#: Total ``size`` of a skill's files a client must accept (and the most this client accepts).
MAX_SKILL_BYTES: Final = 16 * 1024 * 1024
#: The largest ``SKILL.md`` this client activates: the model reads it whole.
MAX_SKILL_MD_BYTES: Final = 100_000

_DIGEST: Final = re.compile(r"sha256:[0-9a-f]{64}")
_SCHEME: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_SKILL_MD: Final = "SKILL.md"


def skill_digest(data: bytes) -> str:
    """The manifest digest of ``data``: ``sha256:`` and 64 lowercase hex digits."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _split(uri: str) -> tuple[str, list[str]] | str:
    """``uri`` as its scheme prefix (``skill://``) and its path segments, or why it cannot be
    a skill file's URI."""
    match = _SCHEME.match(uri)
    if match is None:
        return f"the URI {uri[:80]!r} has no scheme (such as skill://)"
    if "?" in uri or "#" in uri:
        return f"the URI {uri[:80]!r} has a query or a fragment"
    segments = uri[match.end() :].split("/")
    if any(segment in ("", ".", "..") for segment in segments):
        return f"the URI {uri[:80]!r} has an empty, '.' or '..' segment"
    return match.group(0), segments


def skill_directory(uri: str) -> str | None:
    """The directory of the skill whose ``SKILL.md`` is ``uri`` (``uri`` without
    ``/SKILL.md``), or None when ``uri`` is not the URI of a ``SKILL.md`` under a skill path."""
    split = _split(uri)
    if isinstance(split, str) or len(split[1]) < 2 or split[1][-1] != _SKILL_MD:
        return None
    return uri[: -len(_SKILL_MD) - 1]


def check_skill_entry(entry: SkillEntry) -> str | None:
    """Why the skill ``entry`` cannot be used (the client skips it, and only it), or None when
    it follows every rule of the module docstring."""
    name = entry.frontmatter.get("name")
    description = entry.frontmatter.get("description")
    if not isinstance(name, str) or not name:
        return "its frontmatter has no name (a non-empty string)"
    if not isinstance(description, str) or not description:
        return "its frontmatter has no description (a non-empty string)"
    directory = skill_directory(entry.uri)
    if directory is None:
        return (
            f"its URI {entry.uri[:80]!r} is not <scheme>://<skill-path>/SKILL.md with clean "
            "segments"
        )
    last = directory.rsplit("/", 1)[-1]
    if last != name:
        return (
            f"the last segment of its skill path ({last[:80]!r}) is not its frontmatter name "
            f"({name[:80]!r})"
        )
    if entry.is_dynamic:
        return None
    if not isinstance(entry.resources, tuple):
        got = "nothing" if entry.resources is None else repr(str(entry.resources)[:40])
        return f'its resources must be the list of its files or "dynamic", got {got}'
    return _check_manifest(entry.uri, directory, entry.resources)


def _check_manifest(uri: str, directory: str, files: tuple[SkillResourceRef, ...]) -> str | None:
    if len(files) > MAX_SKILL_FILES:
        return f"it has {len(files)} files, over the limit of {MAX_SKILL_FILES}"
    total = 0
    seen: set[str] = set()
    for ref in files:
        if not ref.uri.startswith(directory + "/") or isinstance(_split(ref.uri), str):
            return f"its file {ref.uri[:80]!r} is not inside the skill's directory {directory!r}"
        if ref.uri in seen:
            return f"its file {ref.uri[:80]!r} is listed twice"
        seen.add(ref.uri)
        if _DIGEST.fullmatch(ref.digest) is None:
            return (
                f"its file {ref.uri[:80]!r} has the digest {ref.digest[:80]!r}, not "
                "sha256:<64 lowercase hex digits>"
            )
        if isinstance(ref.size, bool) or ref.size < 0:
            return f"its file {ref.uri[:80]!r} has a negative size"
        if ref.uri == uri and ref.size > MAX_SKILL_MD_BYTES:
            return (
                f"its SKILL.md has {ref.size:,} bytes, over the limit of "
                f"{MAX_SKILL_MD_BYTES:,} (the model reads it whole)"
            )
        total += ref.size
    if uri not in seen:
        return "its resources do not list its own SKILL.md"
    if total > MAX_SKILL_BYTES:
        return f"its files have {total:,} bytes in all, over the limit of {MAX_SKILL_BYTES:,}"
    return None


def verify_skill_file(data: bytes, ref: SkillResourceRef) -> str | None:
    """Why the fetched ``data`` of the file ``ref`` must not be used (its size or its SHA-256
    digest is not the manifest's), or None when both match."""
    if len(data) != ref.size:
        return f"it has {len(data):,} bytes where the manifest says {ref.size:,}"
    digest = skill_digest(data)
    if digest != ref.digest:
        return f"its digest is {digest} where the manifest says {ref.digest}"
    return None


def check_frontmatter(text: str, frontmatter: Mapping[str, Any]) -> str | None:
    """Why the fetched ``SKILL.md`` ``text`` does not match the entry's ``frontmatter``: no
    frontmatter block, YAML that cannot be read, or the fields that differ, each one named
    (see :mod:`trio_mcp.protocol._frontmatter`); None when every field matches."""
    block = frontmatter_block(text)
    if block is None:
        return "it does not start with a YAML frontmatter block (---)"
    try:
        found = read_frontmatter(block)
    except FrontmatterError as exc:
        return f"its frontmatter cannot be read: {exc}"
    differences = field_differences(found, frontmatter)
    if not differences:
        return None
    return "its frontmatter differs from the entry's: " + "; ".join(differences)


def resolve_skill_file(entry: SkillEntry, path: str) -> SkillResourceRef | str:
    """The file of ``entry``'s manifest that ``path`` names (a path relative to the skill's
    directory, such as ``references/FORMS.md``, or the file's full URI), or why there is none:
    a dynamic skill has no manifest, a path that leaves the directory or names a file the
    manifest does not list is refused."""
    if not isinstance(entry.resources, tuple):
        return "the skill is dynamic: it has no manifest of files that can be checked"
    directory = skill_directory(entry.uri)
    if directory is None:
        return "the skill's URI is not a SKILL.md URI"
    if _SCHEME.match(path):
        uri = path
    else:
        parts = [part for part in path.split("/") if part not in ("", ".")]
        if not parts or ".." in parts:
            return f"the path {path[:80]!r} is not a file inside the skill's directory"
        uri = directory + "/" + "/".join(parts)
    for ref in entry.resources:
        if ref.uri == uri:
            return ref
    return f"the skill's manifest does not list {uri[:120]!r}"
