"""The fake server's skills (``io.modelcontextprotocol/skills``): :class:`FakeSkill` and the
answers to ``skills/list``, ``skills/get``, ``resources/directory/read`` and the
``resources/read`` of a skill's files.

A :class:`FakeSkill` is a skill directory in memory: its ``SKILL.md`` (frontmatter written from
``name``, ``description`` and ``frontmatter``, then ``body``) and its other ``files`` (path
relative to the skill's directory -> text or bytes). Its entry carries the manifest computed
from that content (``sha256`` digests and sizes), or ``"dynamic"``. A test that wants a server
whose files do not match what it listed gives :attr:`FakeServer.skill_file_overrides` (URI ->
what ``resources/read`` serves instead), or replaces the skills with
:meth:`FakeServer.set_skills` after the client took the entries.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, TypeAlias

import attrs

from ...protocol._errors import RpcError

__all__ = ["FakeSkill", "SkillEntryLike", "spec_file_map", "spec_skill"]

_DIRECTORY_MIME: Final = "inode/directory"


def _bytes_map(values: Mapping[str, str | bytes]) -> dict[str, bytes]:
    return {
        path: value.encode("utf-8") if isinstance(value, str) else bytes(value)
        for path, value in values.items()
    }


def _any_map(values: Mapping[str, Any]) -> dict[str, Any]:
    return dict(values)


def _yaml_scalar(value: Any) -> str:
    """``value`` as a one-line YAML scalar (JSON strings are valid YAML)."""
    return json.dumps(value, ensure_ascii=False)


@attrs.frozen
class FakeSkill:
    """A skill the fake server serves.

    Its URI is ``<scheme>://<prefix>/<name>/SKILL.md`` (``prefix`` may be empty or several
    segments, such as ``acme/billing``). ``files`` are its other files, by path relative to its
    directory (``"references/FORMS.md"``), as text or bytes. ``frontmatter`` adds fields to the
    ones written from ``name`` and ``description`` (``{"allowed-tools": "Bash"}``...).
    ``skill_md`` replaces the whole ``SKILL.md`` text (to test one that does not match its
    entry). ``dynamic`` lists ``resources: "dynamic"`` instead of the manifest."""

    name: str
    description: str
    body: str = "Follow these steps."
    files: Mapping[str, bytes] = attrs.field(factory=dict, converter=_bytes_map)
    prefix: str = ""
    scheme: str = "skill"
    frontmatter: Mapping[str, Any] = attrs.field(factory=dict, converter=_any_map)
    skill_md: str | None = None
    dynamic: bool = False

    @property
    def directory(self) -> str:
        """The skill's directory URI (no trailing slash)."""
        path = f"{self.prefix.strip('/')}/{self.name}" if self.prefix.strip("/") else self.name
        return f"{self.scheme}://{path}"

    @property
    def uri(self) -> str:
        """The URI of its ``SKILL.md``."""
        return f"{self.directory}/SKILL.md"

    def all_frontmatter(self) -> dict[str, Any]:
        """The frontmatter, as the entry gives it."""
        return {"name": self.name, "description": self.description, **self.frontmatter}

    def skill_md_text(self) -> str:
        """The text of its ``SKILL.md``."""
        if self.skill_md is not None:
            return self.skill_md
        lines = ["---"]
        lines += [f"{key}: {_yaml_scalar(value)}" for key, value in self.all_frontmatter().items()]
        lines += ["---", "", self.body, ""]
        return "\n".join(lines)

    def contents(self) -> dict[str, bytes]:
        """Every file, by URI: ``SKILL.md`` first."""
        out = {self.uri: self.skill_md_text().encode("utf-8")}
        for path, data in self.files.items():
            out[f"{self.directory}/{path.strip('/')}"] = data
        return out

    def to_wire(self) -> dict[str, Any]:
        """The skill's entry, as ``skills/list`` and ``skills/get`` give it."""
        resources: Any = "dynamic"
        if not self.dynamic:
            resources = [
                {
                    "uri": uri,
                    "digest": "sha256:" + hashlib.sha256(data).hexdigest(),
                    "size": len(data),
                }
                for uri, data in self.contents().items()
            ]
        return {"uri": self.uri, "frontmatter": self.all_frontmatter(), "resources": resources}


#: A skill of the fake: a :class:`FakeSkill`, or a raw entry (listed verbatim, serving no files),
#: which lets a test list malformed entries.
SkillEntryLike: TypeAlias = FakeSkill | Mapping[str, Any]


def skill_entries(skills: Sequence[SkillEntryLike]) -> list[dict[str, Any]]:
    """Every entry, in order, as ``skills/list`` lists them."""
    return [dict(s) if isinstance(s, Mapping) else s.to_wire() for s in skills]


def get_skill(skills: Sequence[SkillEntryLike], params: Mapping[str, Any]) -> dict[str, Any]:
    """The answer to ``skills/get``; -32602 for a skill the fake does not serve."""
    uri = params.get("uri")
    for skill in skills:
        entry = dict(skill) if isinstance(skill, Mapping) else skill.to_wire()
        if entry.get("uri") == uri:
            return {"skill": entry}
    raise RpcError.from_error(-32602, f"Unknown skill: {uri!r}")


def skill_file(
    skills: Sequence[SkillEntryLike], overrides: Mapping[str, bytes], uri: str
) -> dict[str, Any] | None:
    """The ``resources/read`` contents of the skill file ``uri`` (the override first), or
    None when no skill has that file. Text when the bytes are UTF-8, else a base64 blob."""
    data = overrides.get(uri)
    mime: str | None = "text/markdown" if uri.endswith("/SKILL.md") else None
    if data is None:
        for skill in skills:
            if isinstance(skill, FakeSkill):
                data = skill.contents().get(uri)
                if data is not None:
                    break
    if data is None:
        return None
    out: dict[str, Any] = {"uri": uri}
    if mime is not None:
        out["mimeType"] = mime
    try:
        out["text"] = data.decode("utf-8")
    except UnicodeDecodeError:
        out["blob"] = base64.b64encode(data).decode("ascii")
    return out


def read_directory(skills: Sequence[SkillEntryLike], params: Mapping[str, Any]) -> dict[str, Any]:
    """The answer to ``resources/directory/read``: the direct children of the directory
    ``uri`` among the skills' files (subdirectories as ``inode/directory``); -32602 for a URI
    that is not a directory."""
    uri = params.get("uri")
    if not isinstance(uri, str):
        raise RpcError.from_error(-32602, "resources/directory/read needs a string 'uri'")
    children: dict[str, dict[str, Any]] = {}
    for skill in skills:
        if not isinstance(skill, FakeSkill):
            continue
        for file_uri in skill.contents():
            if not file_uri.startswith(uri + "/"):
                continue
            rest = file_uri[len(uri) + 1 :]
            head, _, tail = rest.partition("/")
            child = f"{uri}/{head}"
            if tail:
                children[child] = {"uri": child, "name": head, "mimeType": _DIRECTORY_MIME}
            else:
                children.setdefault(child, {"uri": child, "name": head})
    if not children:
        raise RpcError.from_error(-32602, f"Not a directory: {uri!r}")
    return {"resources": [children[key] for key in sorted(children)]}


_SKILL_KEYS: Final = frozenset(
    {
        "name",
        "description",
        "body",
        "files",
        "prefix",
        "scheme",
        "frontmatter",
        "skill_md",
        "dynamic",
    }
)

#: Where a spec problem goes: ``(path, message)``.
ProblemSink: TypeAlias = Callable[[str, str], None]


def _spec_bytes(value: Any, path: str, problem: ProblemSink) -> bytes | None:
    """A file's content in a spec: a string (UTF-8 text) or ``{"base64": "..."}`` (bytes)."""
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, Mapping) and set(value) == {"base64"} and isinstance(value["base64"], str):
        try:
            return base64.b64decode(value["base64"], validate=True)
        except (binascii.Error, ValueError):
            problem(f"{path}.base64", "is not valid base64")
            return None
    problem(path, f'must be a string or {{"base64": "..."}}, got {value!r}')
    return None


def spec_file_map(value: Any, path: str, problem: ProblemSink) -> dict[str, bytes]:
    """``{key: content}`` of a spec (a skill's ``files``, the ``skill_file_overrides``)."""
    if not isinstance(value, Mapping):
        problem(path, f"must be an object, got {value!r}")
        return {}
    out: dict[str, bytes] = {}
    for key, content in value.items():
        data = _spec_bytes(content, f"{path}.{key}", problem)
        if data is not None:
            out[str(key)] = data
    return out


def spec_skill(item: Any, path: str, problem: ProblemSink) -> SkillEntryLike | None:
    """A skill of a JSON spec (``FakeServer.from_spec``'s ``skills``): ``{"raw": {...}}`` (an
    entry listed verbatim) or an object with ``name``, ``description`` and optional ``body``,
    ``files`` (path -> text, or ``{"base64": "..."}`` for bytes), ``prefix``, ``scheme``,
    ``frontmatter`` (an object), ``skill_md`` (the whole ``SKILL.md``) and ``dynamic``, as
    :class:`FakeSkill` takes them. Each problem goes to ``problem`` with its path."""
    if not isinstance(item, Mapping):
        problem(path, f"must be an object, got {item!r}")
        return None
    if "raw" in item:
        raw = item["raw"]
        if set(item) != {"raw"} or not isinstance(raw, Mapping):
            problem(path, "a 'raw' entry has no other keys, and its value is an object")
            return None
        return dict(raw)
    before: list[str] = []

    def local(where: str, message: str) -> None:
        before.append(where)
        problem(where, message)

    for key in sorted(set(item) - _SKILL_KEYS):
        local(f"{path}.{key}", f"unknown key (allowed: {', '.join(sorted(_SKILL_KEYS))})")
    options: dict[str, Any] = {}
    for key in ("name", "description", "body", "prefix", "scheme", "skill_md"):
        value = item.get(key)
        if value is None:
            if key in ("name", "description"):
                local(f"{path}.{key}", "is required (a string)")
            continue
        if not isinstance(value, str):
            local(f"{path}.{key}", f"must be a string, got {value!r}")
            continue
        options[key] = value
    dynamic = item.get("dynamic", False)
    if not isinstance(dynamic, bool):
        local(f"{path}.dynamic", f"must be true or false, got {dynamic!r}")
    else:
        options["dynamic"] = dynamic
    frontmatter = item.get("frontmatter", {})
    if not isinstance(frontmatter, Mapping):
        local(f"{path}.frontmatter", f"must be an object, got {frontmatter!r}")
    else:
        options["frontmatter"] = frontmatter
    if "files" in item:
        options["files"] = spec_file_map(item["files"], f"{path}.files", local)
    if before:
        return None
    return FakeSkill(**options)
