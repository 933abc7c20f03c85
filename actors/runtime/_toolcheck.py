"""Checks applied to every tool a server lists, before it is registered.

A bad tool is refused alone, with a reason; its server and the server's other tools are not
affected. The checks are pure and synchronous, and run again on every re-listing
(``list_changed``, reconnect), so a tool that turns bad later is withdrawn then.

Entry points:

- :func:`check_listing` takes the raw ``tools`` array of a complete ``tools/list`` and returns the
  tools to register, the refusals (server, tool, reason) and the warnings. It applies the
  ``tools_include`` / ``tools_exclude`` filters, skips malformed entries (not an object, no name),
  treats an absent or ``{}`` ``inputSchema`` as an empty object schema, ignores annotation hints
  that are not booleans, decodes each tool alone and calls :func:`check_tool` on it.
- :func:`check_tool` checks one decoded tool: the input schema (:func:`inspect_schema`) and the
  injection scan of its name, title, description and every string of its schema. The security
  policy decides what an injection finding does: ``"block"`` (the default) refuses the tool,
  ``"warn"`` only reports it. Schema problems and schemas too large to check refuse the tool under
  both policies.
- :func:`check_input_schema`, :func:`scan_schema` and :func:`scan_text` are the parts, for hosts
  that check other text (resource bodies, prompt messages) the same way.

Input schema rules: the top level is an object schema (``type`` absent or ``"object"``); every
subschema is an object or a boolean; every array schema says what its items are (``items`` or
``prefixItems``); ``type``, ``properties``, ``required`` and ``enum`` have their JSON Schema
shapes; a ``$ref`` is local (``#...``) and resolves inside the schema: a network ``$ref`` is never
fetched, it is a problem. The dialect is 2020-12 when ``$schema`` is absent; draft-07 is accepted
too; any other ``$schema`` is accepted with a warning that names it (checked as 2020-12).

Work budgets (:class:`SchemaBudget`): by default at most 200 levels of nested schemas, 3,000
properties, 100,000 JSON nodes and 1,000,000 characters of text per schema. A schema past any of
them is refused as "too large to check" instead of being scanned slowly. The walk is iterative, so
a hostile depth never exhausts the Python stack.

Injection patterns (:data:`PATTERNS`): each has a rule name and the reason it is there. They
target text whose only purpose is to steer the model (instruction overrides, forged chat-template
tokens, concealment from the user, exfiltration to a URL) and characters that hide text from a
human reviewer, and leave ordinary tool descriptions alone ("IMPORTANT: you must call X first",
"Ignore whitespace", "Send a message to a channel" are not findings).
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, Literal
from urllib.parse import unquote

import attrs

from ...protocol._codec import json_kind, structure
from ...protocol._errors import InvalidMessage, SchemaTooLarge
from ...protocol._types import Tool
from ._registry import ToolRefusal

__all__ = [
    "DEFAULT_BUDGET",
    "DEFAULT_MAX_LISTING_CHARS",
    "PATTERNS",
    "Finding",
    "InjectionPattern",
    "ListingCheck",
    "SchemaBudget",
    "SchemaReport",
    "SecurityPolicy",
    "ToolVerdict",
    "ToolWarning",
    "check_input_schema",
    "check_listing",
    "check_tool",
    "inspect_schema",
    "json_size",
    "scan_schema",
    "scan_text",
]

#: What an injection finding does: ``"block"`` refuses the tool, ``"warn"`` only reports it.
SecurityPolicy = Literal["block", "warn"]


# --------------------------------------------------------------------------- injection patterns


@attrs.frozen(kw_only=True)
class InjectionPattern:
    """One injection pattern: its ``rule`` name, the compiled ``regex``, and the ``reason`` it
    exists (shown in refusals and logs)."""

    rule: str
    regex: re.Pattern[str]
    reason: str


def _pattern(rule: str, regex: str, reason: str, *, flags: int = re.IGNORECASE) -> InjectionPattern:
    return InjectionPattern(rule=rule, regex=re.compile(regex, flags), reason=reason)


_W: Final = r"(?:[\w'-]+\W+)"  # one word and what follows it

#: The injection patterns, in the order they are reported.
PATTERNS: Final[tuple[InjectionPattern, ...]] = (
    _pattern(
        "instruction_override",
        rf"\b(?:ignore|disregard|forget)\W+{_W}{{0,3}}?"
        r"(?:instructions?|prompts?|directives?|guidelines|guardrails|system\s+messages?)\b"
        rf"|\b(?:ignore|disregard|forget)\W+{_W}{{0,2}}?"
        r"(?:previous|prior|above|earlier|preceding)\W+(?:\w+\W+)?rules\b"
        r"|\b(?:ignore|disregard|forget)\s+(?:everything|anything|all)\s+"
        r"(?:above|before|else|previously|you\s+(?:were|have\s+been)\s+told)\b"
        r"|\b(?:ignore|disregard)\s+the\s+above\b",
        "tells the model to drop the instructions it was given (an instruction override); "
        "no tool needs to say that to do its job",
    ),
    _pattern(
        "new_instructions",
        r"\byou\s+must\s+now\b|\bfrom\s+now\s+on,?\s+(?:you|always|never)\b"
        r"|\byour\s+new\s+(?:instructions?|task|role|goal|objective|purpose)\b"
        r"|\byou\s+are\s+now\s+(?:a|an|the|in|acting|operating|free|no\s+longer|DAN)\b",
        "hands the model a new role or new standing orders, which is the job of the host's "
        "system prompt, not of a tool definition",
    ),
    _pattern(
        "system_prompt",
        r"\b(?:your|reveal|print|repeat|output|leak|disclose|dump)\W+(?:\w+\W+){0,2}?"
        r"(?:system|developer|hidden)\s+(?:prompt|message|instructions)\b",
        "refers to the model's own system prompt (to reveal or replace it); a tool has no "
        "business with the prompt of the agent that calls it",
    ),
    _pattern(
        "role_tag",
        r"<\|\s*(?:im_start|im_end|im_sep|endoftext|eot_id|start_header_id|end_header_id)\s*\|>"
        r"|\[/?\s*(?:INST|SYS)\s*\]|<<\s*/?\s*SYS\s*>>"
        r"|<\s*/?\s*(?:system|assistant|developer|important|instructions?)\s*>",
        "forges chat-template or role markers (<|im_start|>, [INST], <system>, <IMPORTANT>) so "
        "that tool text reads as a message from the system, the assistant or the developer",
    ),
    _pattern(
        "concealment",
        r"\b(?:do\s*n[o']?t|never)\s+(?:tell|inform|notify|alert)\s+the\s+user\b"
        r"|\bwithout\s+(?:telling|informing)\s+the\s+user\b"
        r"|\b(?:do\s*n[o']?t|never|without)\s+(?:mention|reveal|show|disclos)(?:e|ing)?\s+"
        r"(?:this|it|that|anything)\s+to\s+the\s+user\b"
        r"|\b(?:do\s*n[o']?t|never|without)\s+let(?:ting)?\s+the\s+user\s+know\b"
        r"|\b(?:keep|hide)\s+(?:this|it|that)\s+(?:secret\s+|hidden\s+)?from\s+the\s+user\b"
        r"|\bthe\s+user\s+(?:must|should)\s+(?:not|never)\s+(?:know|see|find\s+out|be\s+told)\b",
        "asks the model to hide what it does from the user; a legitimate tool never needs "
        "its use concealed from the person it works for",
    ),
    _pattern(
        "exfiltration",
        r"\b(?:send|post|upload|forward|transmit|exfiltrate|leak|copy|pass)\b[^\n]{0,80}?"
        r"\bto\s+<?(?:https?|ftp)://",
        "tells the model to ship data to a literal URL written into the tool's text, the shape "
        "of a data-exfiltration instruction",
    ),
    _pattern(
        "secret_files",
        r"\b(?:read|cat|open|include|send|upload|pass|attach|copy)\b[^\n]{0,60}?"
        r"(?:~/\.ssh/|\bid_(?:rsa|dsa|ecdsa|ed25519)\b|\.aws/credentials|~/\.netrc|~/\.gnupg/)",
        "asks the model to read or send well-known secret files (SSH keys, cloud credentials), "
        "as published tool-poisoning attacks do",
    ),
    _pattern(
        "hidden_characters",
        "[\u200b\u2060-\u2064\u180e\u202a-\u202e\u2066-\u2069\u061c"
        "\u115f\u1160\u3164\uffa0\U000e0000-\U000e007f]"
        "|(?<!^)\ufeff"
        "|[\u200c\u200d]{2,}"
        "|[\ufe00-\ufe0f\U000e0100-\U000e01ef]{2,}"
        "|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]",
        "contains characters that a human reviewer does not see (zero-width and bidirectional "
        "controls, Unicode tag characters, invisible fillers, runs of joiners or variation "
        "selectors, terminal control codes) but the model reads: text can hide behind them",
        flags=0,
    ),
)

_EXCERPT_RADIUS: Final = 40
#: One character that must be shown as an escape in excerpts (besides non-printable ones).
_INVISIBLE = re.compile("[\u115f\u1160\u3164\uffa0\u2800]")


@attrs.frozen(kw_only=True)
class Finding:
    """A suspected injection: which ``rule`` matched, ``where`` (``"description"``, ``"name"``,
    or a JSON path into the input schema such as ``$.properties.mode.enum[2]``), a short
    ``excerpt`` around the match with invisible characters written as escapes, and the
    ``reason`` of the rule."""

    rule: str
    where: str
    excerpt: str
    reason: str

    def describe(self) -> str:
        """One line for refusals and logs."""
        return f'possible prompt injection in {self.where} ({self.rule}): "{self.excerpt}"'


def _visible(text: str) -> str:
    """``text`` with every character that is not plainly printable written as an escape."""
    out: list[str] = []
    for char in text:
        if char in "\n\t":
            out.append(" ")
        elif char.isprintable() and not _INVISIBLE.match(char):
            out.append(char)
        else:
            code = ord(char)
            out.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
    return "".join(out)


def scan_text(text: str, *, where: str = "text") -> Finding | None:
    """The first injection pattern (in :data:`PATTERNS` order) that matches ``text``, or None.

    ``where`` names the text in the finding. Never raises; the time taken is linear in the length
    of ``text`` (bound the length before calling on text from an untrusted source).
    """
    hit = _first_match(text)
    return None if hit is None else _finding(text, hit, where)


#: Short texts known to match no pattern (schema keywords, type names and property names come
#: back in every tool of a listing). Only a clean result is remembered, for the exact text, so
#: the answer is the one the patterns give; the set is emptied when full.
_CLEAN: Final[set[str]] = set()
_CLEAN_MAX_CHARS: Final = 64
_CLEAN_MAX_SIZE: Final = 8192
#: The one pattern that looks for characters, not words: it cannot match printable ASCII.
_HIDDEN: Final = next(p for p in PATTERNS if p.rule == "hidden_characters")


def _first_match(text: str) -> tuple[InjectionPattern, re.Match[str]] | None:
    """The first pattern that matches ``text`` and its match, or None. The same answer as
    trying every pattern in order, with two shortcuts: a short text found clean before is not
    scanned again, and :data:`_HIDDEN` is not tried on printable ASCII text (every character it
    looks for is a control character or outside ASCII)."""
    if text in _CLEAN:
        return None
    plain = text.isascii() and text.isprintable()
    for pattern in PATTERNS:
        if pattern is _HIDDEN and plain:
            continue
        match = pattern.regex.search(text)
        if match is not None:
            return pattern, match
    if len(text) <= _CLEAN_MAX_CHARS:
        if len(_CLEAN) >= _CLEAN_MAX_SIZE:
            _CLEAN.clear()
        _CLEAN.add(text)
    return None


def _finding(text: str, hit: tuple[InjectionPattern, re.Match[str]], where: str) -> Finding:
    """The finding for ``hit`` (from :func:`_first_match`) in ``text``, found at ``where``."""
    pattern, match = hit
    start = max(0, match.start() - _EXCERPT_RADIUS)
    end = min(len(text), match.end() + _EXCERPT_RADIUS)
    excerpt = _visible(text[start:end])
    excerpt = ("..." if start else "") + excerpt + ("..." if end < len(text) else "")
    return Finding(rule=pattern.rule, where=where, excerpt=excerpt, reason=pattern.reason)


# --------------------------------------------------------------------------- schema walk


@attrs.frozen(kw_only=True)
class SchemaBudget:
    """How much work checking one schema may take. A schema past any bound is refused as too
    large to check. Every bound must be a positive integer (``ValueError`` otherwise)."""

    #: Levels of nested schemas (the top level is level 1; ``properties``, ``anyOf``... entries
    #: are one level below their parent).
    max_depth: int = 200
    #: Entries of all ``properties`` and ``patternProperties`` objects together.
    max_properties: int = 3_000
    #: JSON values visited (objects, arrays, strings, numbers...).
    max_nodes: int = 100_000
    #: Characters of all strings (keys and values) together.
    max_string_chars: int = 1_000_000

    def __attrs_post_init__(self) -> None:
        for field in attrs.fields(SchemaBudget):
            value = getattr(self, field.name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(
                    f"SchemaBudget.{field.name} must be a positive integer, got {value!r}"
                )


#: The default budget: 200 levels, 3,000 properties, 100,000 nodes, 1,000,000 characters.
DEFAULT_BUDGET: Final = SchemaBudget()
#: Characters of text checked per listing (all tools together) by default.
DEFAULT_MAX_LISTING_CHARS: Final = 4_000_000

_TYPES: Final = frozenset({"string", "number", "integer", "boolean", "object", "array", "null"})
#: Keywords whose value maps names to schemas.
_SCHEMA_MAPS: Final = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
)
#: Keywords whose value is one schema (``items`` may also be a draft-07 array of schemas).
_SCHEMA_ONE: Final = frozenset(
    {
        "items",
        "additionalProperties",
        "additionalItems",
        "unevaluatedProperties",
        "unevaluatedItems",
        "contains",
        "propertyNames",
        "not",
        "if",
        "then",
        "else",
    }
)
#: Keywords whose value is an array of schemas.
_SCHEMA_LISTS: Final = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})
_PROPERTY_MAPS: Final = frozenset({"properties", "patternProperties"})

_DIALECTS: Final = {
    "https://json-schema.org/draft/2020-12/schema": "2020-12",
    "http://json-schema.org/draft-07/schema": "draft-07",
    "https://json-schema.org/draft-07/schema": "draft-07",
}

_PLAIN_KEY = re.compile(r"[A-Za-z_$][\w$-]{0,39}")
_MAX_FINDINGS: Final = 50
_PATH_SHOWN: Final = 120


def _child(path: str, key: str) -> str:
    if _PLAIN_KEY.fullmatch(key):
        return f"{path}.{key}"
    shown = key if len(key) <= 40 else key[:40] + "..."
    return f"{path}[{json.dumps(shown)}]"


def _short(path: str) -> str:
    if len(path) <= _PATH_SHOWN:
        return path
    half = _PATH_SHOWN // 2
    return f"{path[:half]}...{path[-half:]}"


@attrs.frozen(kw_only=True)
class SchemaReport:
    """What :func:`inspect_schema` found in one schema.

    ``problems`` refuse the tool (each starts with the JSON path at fault); ``findings`` are
    suspected injections; ``warnings`` do not refuse anything; ``too_large`` is set (to the
    reason) when a budget was exceeded, in which case the other fields hold what was found before
    the walk stopped. ``dialect`` is ``"2020-12"``, ``"draft-07"`` or the ``$schema`` value given.
    """

    problems: tuple[str, ...] = ()
    findings: tuple[Finding, ...] = ()
    warnings: tuple[str, ...] = ()
    too_large: SchemaTooLarge | None = None
    dialect: str = "2020-12"
    #: Characters of text that were scanned (the work done).
    chars: int = 0

    @property
    def ok(self) -> bool:
        """True when the schema has no problem and was checked completely."""
        return not self.problems and self.too_large is None


class _Exceeded(Exception):
    def __init__(self, limit: str, message: str, path: str) -> None:
        super().__init__(message)
        self.limit = limit
        self.path = path


_Ctx = Literal["schema", "map", "list", "data"]


@attrs.define
class _Walk:
    budget: SchemaBudget
    root: Any
    problems: list[str] = attrs.field(factory=list)
    findings: list[Finding] = attrs.field(factory=list)
    warnings: list[str] = attrs.field(factory=list)
    refs: list[tuple[str, str]] = attrs.field(factory=list)
    anchors: set[str] = attrs.field(factory=set)
    nested_id: bool = False
    nodes: int = 0
    properties: int = 0
    chars: int = 0

    def run(self) -> None:
        stack: list[tuple[Any, str, int, _Ctx]] = [(self.root, "$", 1, "schema")]
        while stack:
            value, path, level, ctx = stack.pop()
            self.nodes += 1
            if self.nodes > self.budget.max_nodes:
                raise _Exceeded(
                    "max_nodes", f"more than {self.budget.max_nodes:,} JSON values", path
                )
            if level > self.budget.max_depth and isinstance(value, dict | list):
                raise _Exceeded(
                    "max_depth", f"nested deeper than {self.budget.max_depth:,} levels", path
                )
            children: list[tuple[Any, str, int, _Ctx]] = []
            if ctx == "schema":
                if isinstance(value, str):
                    self._text(value, path)
                self._schema(value, path, level, children)
            elif isinstance(value, str):
                self._text(value, path)
            elif ctx == "map" and isinstance(value, dict):
                for key, sub in value.items():
                    child = _child(path, key)
                    self._text(key, child, " (the name)")
                    children.append((sub, child, level + 1, "schema"))
            elif ctx == "list" and isinstance(value, list):
                children.extend(
                    (sub, f"{path}[{index}]", level + 1, "schema")
                    for index, sub in enumerate(value)
                )
            elif isinstance(value, dict):
                for key, sub in value.items():
                    self._text(key, path, " (a key)")
                    children.append((sub, _child(path, key), level + 1, "data"))
            elif isinstance(value, list):
                children.extend(
                    (sub, f"{path}[{index}]", level + 1, "data") for index, sub in enumerate(value)
                )
            stack.extend(reversed(children))

    def _text(self, text: str, path: str, suffix: str = "") -> None:
        """Count and scan ``text``, found at ``path + suffix`` (joined only when needed)."""
        self.chars += len(text)
        if self.chars > self.budget.max_string_chars:
            raise _Exceeded(
                "max_string_chars",
                f"more than {self.budget.max_string_chars:,} characters of text",
                path + suffix,
            )
        if len(self.findings) < _MAX_FINDINGS:
            hit = _first_match(text)
            if hit is not None:
                self.findings.append(_finding(text, hit, _short(path + suffix)))

    def _schema(
        self, value: Any, path: str, level: int, children: list[tuple[Any, str, int, _Ctx]]
    ) -> None:
        if isinstance(value, bool):
            return
        if not isinstance(value, dict):
            self.problems.append(
                f"{_short(path)}: a schema must be an object or a boolean, got {json_kind(value)}"
            )
            return
        types = self._types(value, path)
        if "array" in types and "items" not in value and "prefixItems" not in value:
            self.problems.append(
                f"{_short(path)}: an array schema must say what its items are ('items')"
            )
        required = value.get("required")
        if required is not None and not (
            isinstance(required, list) and all(isinstance(item, str) for item in required)
        ):
            self.problems.append(
                f"{_short(path)}.required: must be an array of property names, "
                f"got {json_kind(required)}"
            )
        enum = value.get("enum")
        if enum is not None and not isinstance(enum, list):
            self.problems.append(f"{_short(path)}.enum: must be an array, got {json_kind(enum)}")
        for keyword in ("$ref", "$dynamicRef"):
            if keyword in value:
                self._ref(value[keyword], _child(path, keyword))
        anchor = value.get("$anchor")
        if isinstance(anchor, str):
            self.anchors.add(anchor)
        if path != "$" and "$id" in value:
            self.nested_id = True
        for key, sub in value.items():
            where = _child(path, key)
            self._text(key, where, " (a key)")
            if key in _SCHEMA_MAPS:
                if isinstance(sub, dict):
                    if key in _PROPERTY_MAPS:
                        self.properties += len(sub)
                        if self.properties > self.budget.max_properties:
                            raise _Exceeded(
                                "max_properties",
                                f"more than {self.budget.max_properties:,} properties",
                                where,
                            )
                    children.append((sub, where, level, "map"))
                    continue
                self.problems.append(
                    f"{_short(where)}: must be an object mapping names to schemas, "
                    f"got {json_kind(sub)}"
                )
            elif key in _SCHEMA_LISTS or (key == "items" and isinstance(sub, list)):
                if isinstance(sub, list):
                    children.append((sub, where, level, "list"))
                    continue
                self.problems.append(
                    f"{_short(where)}: must be an array of schemas, got {json_kind(sub)}"
                )
            elif key in _SCHEMA_ONE:
                children.append((sub, where, level + 1, "schema"))
                continue
            children.append((sub, where, level + 1, "data"))

    def _types(self, schema: Mapping[str, Any], path: str) -> frozenset[str]:
        if "type" not in schema:
            return frozenset()
        raw = schema["type"]
        names = raw if isinstance(raw, list) else [raw]
        bad = [name for name in names if not (isinstance(name, str) and name in _TYPES)]
        if bad or not names:
            shown = ", ".join(json.dumps(name) for name in bad) or "an empty array"
            self.problems.append(
                f"{_short(path)}.type: {shown} is not a JSON Schema type "
                f"(expected one of {', '.join(sorted(_TYPES))})"
            )
        return frozenset(name for name in names if isinstance(name, str))

    def _ref(self, ref: Any, path: str) -> None:
        if not isinstance(ref, str):
            self.problems.append(f"{_short(path)}: must be a string, got {json_kind(ref)}")
        elif not ref.startswith("#"):
            self.problems.append(
                f"{_short(path)}: {ref[:200]!r} is not a local reference (it must start with "
                f"'#'); referenced schemas are never fetched"
            )
        else:
            self.refs.append((ref, path))

    def resolve_refs(self) -> None:
        if self.nested_id:
            return  # '#...' is relative to the nearest $id: leave resolution to a validator
        for ref, path in self.refs:
            fragment = unquote(ref[1:])
            if fragment == "" or (not fragment.startswith("/") and fragment in self.anchors):
                continue
            if not fragment.startswith("/") or not _resolves(self.root, fragment):
                self.problems.append(
                    f"{_short(path)}: {ref[:200]!r} does not point at anything in this schema"
                )


def _resolves(root: Any, pointer: str) -> bool:
    node = root
    for token in pointer[1:].split("/"):
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return False
    return True


def inspect_schema(schema: Any, *, budget: SchemaBudget = DEFAULT_BUDGET) -> SchemaReport:
    """Check an ``inputSchema`` and scan its strings, in one bounded walk.

    ``schema`` is the raw JSON value (``None`` and ``{}`` mean a tool without arguments). Never
    raises for any JSON value: every issue is in the report. The work is bounded by ``budget``.
    """
    if schema is None or schema == {}:
        return SchemaReport()
    if not isinstance(schema, dict):
        return SchemaReport(
            problems=(f"$: the input schema must be a JSON object, got {json_kind(schema)}",)
        )
    walk = _Walk(budget=budget, root=schema)
    dialect = "2020-12"
    declared = schema.get("$schema")
    if declared is not None:
        if not isinstance(declared, str):
            walk.problems.append(f"$.$schema: must be a string, got {json_kind(declared)}")
        else:
            dialect = _DIALECTS.get(declared.rstrip("#"), declared[:200])
            if declared.rstrip("#") not in _DIALECTS:
                walk.warnings.append(
                    f"$.$schema: dialect {declared[:200]!r} is not one trio-mcp knows "
                    f"(2020-12, draft-07); the schema was checked as 2020-12"
                )
    kind = schema.get("type")
    if kind is None:
        if "properties" in schema:
            walk.warnings.append("$: no top-level 'type'; treated as an object schema")
    elif kind != "object":
        walk.problems.append(
            f"$.type: the top level of an input schema must be of type 'object', "
            f"got {json.dumps(kind)[:200]}"
        )
    too_large: SchemaTooLarge | None = None
    try:
        walk.run()
    except _Exceeded as exc:
        too_large = SchemaTooLarge(
            f"schema too large to check: {exc} (at {_short(exc.path)})",
            limit=exc.limit,
            path=exc.path,
        )
    else:
        walk.resolve_refs()
    return SchemaReport(
        problems=tuple(walk.problems),
        findings=tuple(walk.findings),
        warnings=tuple(walk.warnings),
        too_large=too_large,
        dialect=dialect,
        chars=walk.chars,
    )


def check_input_schema(schema: Any, *, budget: SchemaBudget = DEFAULT_BUDGET) -> list[str]:
    """The problems of an ``inputSchema``, each starting with the JSON path at fault (such as
    ``$.properties.tags: an array schema must say what its items are ('items')``); empty when
    the schema is fine. A schema past ``budget`` gives the problem "schema too large to check".
    Never raises."""
    report = inspect_schema(schema, budget=budget)
    problems = list(report.problems)
    if report.too_large is not None:
        problems.append(str(report.too_large))
    return problems


def scan_schema(schema: Any, *, budget: SchemaBudget = DEFAULT_BUDGET) -> list[Finding]:
    """The suspected injections in every string of a schema (``title``, ``description``,
    ``enum`` values, property names, nested ``anyOf`` / ``items`` / ``properties``...), in
    document order, at most 50.

    Raises :class:`SchemaTooLarge` when the schema is past ``budget``: refuse it rather than
    trust a partial scan.
    """
    report = inspect_schema(schema, budget=budget)
    if report.too_large is not None:
        raise report.too_large
    return list(report.findings)


# --------------------------------------------------------------------------- one tool


@attrs.frozen(kw_only=True)
class ToolVerdict:
    """The outcome of :func:`check_tool` for the tool named ``tool``.

    ``accepted`` is False when ``reasons`` is not empty. ``findings`` holds every suspected
    injection (under ``"warn"`` they are reported in ``warnings`` too, and do not refuse).
    """

    tool: str
    accepted: bool
    reasons: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    findings: tuple[Finding, ...] = ()
    dialect: str = "2020-12"
    #: Characters of text that were scanned (name, titles, description, schema).
    checked_chars: int = 0

    def refusal(self, server: str) -> ToolRefusal | None:
        """The refusal to put into status and events, or None when the tool was accepted."""
        if self.accepted:
            return None
        return ToolRefusal(server=server, tool=self.tool, reason="; ".join(self.reasons))


_SEP986 = re.compile(r"[A-Za-z0-9_.-]{1,128}")
_NAME_SEPARATORS = re.compile(r"[_.\-]+")


def check_tool(
    tool: Tool,
    *,
    policy: SecurityPolicy = "block",
    budget: SchemaBudget = DEFAULT_BUDGET,
) -> ToolVerdict:
    """Check one decoded tool: its input schema, and the injection scan of its name, title(s),
    description and schema strings.

    Schema problems, a schema too large to check, an empty name and (under ``"block"``) any
    injection finding refuse the tool; the verdict says why. Never raises for any tool.
    """
    if policy not in ("block", "warn"):
        raise ValueError(f"unknown security policy {policy!r}: use 'block' or 'warn'")
    reasons: list[str] = []
    warnings: list[str] = []
    findings: list[Finding] = []
    if not tool.name:
        reasons.append("the tool has an empty name")
    elif not _SEP986.fullmatch(tool.name):
        warnings.append(
            "the name does not follow the MCP naming rule (1 to 128 of A-Z a-z 0-9 _ - .); "
            "it is registered under a sanitized name"
        )
    texts: list[tuple[str, str]] = [(_NAME_SEPARATORS.sub(" ", tool.name), "name")]
    if tool.title:
        texts.append((tool.title, "title"))
    if tool.annotations is not None and tool.annotations.title:
        texts.append((tool.annotations.title, "annotations.title"))
    if tool.description:
        texts.append((tool.description, "description"))
    checked = 0
    for text, where in texts:
        checked += len(text)
        if len(text) > budget.max_string_chars:
            reasons.append(
                f"{where} too large to check ({len(text):,} characters; "
                f"the limit is {budget.max_string_chars:,})"
            )
            continue
        finding = scan_text(text, where=where)
        if finding is not None:
            findings.append(finding)
    report = inspect_schema(tool.input_schema, budget=budget)
    reasons.extend(f"invalid inputSchema: {problem}" for problem in report.problems)
    if report.too_large is not None:
        reasons.append(f"inputSchema {report.too_large}")
    warnings.extend(f"inputSchema {warning}" for warning in report.warnings)
    findings.extend(report.findings)
    described = [finding.describe() for finding in findings]
    if policy == "block":
        reasons.extend(described)
    else:
        warnings.extend(described)
    return ToolVerdict(
        tool=tool.name,
        accepted=not reasons,
        reasons=tuple(reasons),
        warnings=tuple(warnings),
        findings=tuple(findings),
        dialect=report.dialect,
        checked_chars=checked + report.chars,
    )


# --------------------------------------------------------------------------- a whole listing


def json_size(value: Any, *, limit: int) -> int:
    """An estimate of the work a JSON value takes to check or render: the characters of all its
    strings (keys and values) plus one per node. The walk is iterative and stops as soon as the
    count passes ``limit``, so the cost is bounded by ``limit`` whatever the value (the count
    returned is then some number above ``limit``). Never raises."""
    total = 0
    stack: list[Any] = [value]
    while stack:
        node = stack.pop()
        total += 1
        if isinstance(node, str):
            total += len(node)
        elif isinstance(node, dict):
            for key, item in node.items():
                total += len(key) if isinstance(key, str) else 1
                stack.append(item)
        elif isinstance(node, list | tuple):
            stack.extend(node)
        if total > limit:
            break
    return total


@attrs.frozen(kw_only=True)
class ToolWarning:
    """Something worth logging about an accepted tool (or an entry of the listing)."""

    server: str
    tool: str | None
    message: str


@attrs.frozen(kw_only=True)
class ListingCheck:
    """The outcome of :func:`check_listing`: the ``tools`` to register (in listing order), the
    ``refused`` entries with reasons, the ``warnings``, and the names the configuration's
    include/exclude filters left out (``excluded``, not refusals)."""

    tools: tuple[Tool, ...] = ()
    refused: tuple[ToolRefusal, ...] = ()
    warnings: tuple[ToolWarning, ...] = ()
    excluded: tuple[str, ...] = ()


_HINTS: Final = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")


def _included(name: str, include: Sequence[str] | None, exclude: Sequence[str]) -> bool:
    if include is not None and not any(fnmatch.fnmatchcase(name, p) for p in include):
        return False
    return not any(fnmatch.fnmatchcase(name, p) for p in exclude)


def _clean_annotations(entry: dict[str, Any], warn: list[str]) -> dict[str, Any]:
    annotations = entry.get("annotations")
    if annotations is None:
        return entry
    if not isinstance(annotations, dict):
        warn.append(f"annotations ignored: expected an object, got {json_kind(annotations)}")
        return {key: value for key, value in entry.items() if key != "annotations"}
    bad = [key for key in _HINTS if key in annotations and not isinstance(annotations[key], bool)]
    title = annotations.get("title")
    if title is not None and not isinstance(title, str):
        bad.append("title")
    if not bad:
        return entry
    for key in bad:
        expected = "a string" if key == "title" else "true or false"
        warn.append(
            f"annotations.{key} ignored: expected {expected}, got {json_kind(annotations[key])}"
        )
    kept = {key: value for key, value in annotations.items() if key not in bad}
    return {**entry, "annotations": kept}


def check_listing(
    raw_tools: Iterable[Any],
    *,
    server: str,
    include: Sequence[str] | None = None,
    exclude: Sequence[str] = (),
    policy: SecurityPolicy = "block",
    budget: SchemaBudget = DEFAULT_BUDGET,
    max_listing_chars: int = DEFAULT_MAX_LISTING_CHARS,
) -> ListingCheck:
    """Filter, decode and check every entry of a server's complete ``tools`` listing.

    ``raw_tools`` is the JSON array as received (all pages). ``include`` / ``exclude`` are
    ``fnmatch`` globs over the server's own tool names (case-sensitive; ``include=None`` means
    every tool, exclusion wins). An entry that is not an object or has no string name is refused
    (its position is named); an absent or ``{}`` ``inputSchema`` becomes ``{"type": "object"}``;
    annotation hints that are not booleans are dropped with a warning; an entry that does not
    decode as a Tool is refused with the decoder's message; then :func:`check_tool` decides.
    The whole listing checks at most ``max_listing_chars`` characters of text (about a second
    of work at the default); the tools past it are refused as not checked. The work is CPU
    bound: the runtime runs this in a worker thread (``trio.to_thread.run_sync``) so that a
    hostile listing cannot stall the event loop. Never raises for any JSON input.
    """
    tools: list[Tool] = []
    used = 0
    refused: list[ToolRefusal] = []
    warnings: list[ToolWarning] = []
    excluded: list[str] = []
    for index, entry in enumerate(raw_tools):
        if not isinstance(entry, dict):
            refused.append(
                ToolRefusal(
                    server=server,
                    tool=None,
                    reason=f"tools[{index}] is not a tool: expected an object, "
                    f"got {json_kind(entry)}",
                )
            )
            continue
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            got = "an empty string" if name == "" else json_kind(name)
            refused.append(
                ToolRefusal(
                    server=server,
                    tool=None,
                    reason=f"tools[{index}] has no name (expected a non-empty string, got {got})",
                )
            )
            continue
        if not _included(name, include, exclude):
            excluded.append(name)
            continue
        notes: list[str] = []
        entry = _clean_annotations(entry, notes)
        if entry.get("inputSchema") in (None, {}):
            entry = {**entry, "inputSchema": {"type": "object"}}
        try:
            tool = structure(entry, Tool, path=f"$.tools[{index}]")
        except InvalidMessage as exc:
            refused.append(
                ToolRefusal(server=server, tool=name, reason=f"malformed tool entry: {exc}")
            )
            continue
        remaining = max_listing_chars - used
        if remaining <= 0:
            refused.append(
                ToolRefusal(
                    server=server,
                    tool=name,
                    reason=f"not checked: the listing passed the {max_listing_chars:,} "
                    f"characters of text checked per listing (max_listing_chars)",
                )
            )
            continue
        tool_budget = budget
        if remaining < budget.max_string_chars:
            tool_budget = attrs.evolve(budget, max_string_chars=remaining)
        verdict = check_tool(tool, policy=policy, budget=tool_budget)
        used += verdict.checked_chars
        warnings.extend(ToolWarning(server=server, tool=name, message=m) for m in notes)
        warnings.extend(ToolWarning(server=server, tool=name, message=m) for m in verdict.warnings)
        refusal = verdict.refusal(server)
        if refusal is not None:
            refused.append(refusal)
        else:
            tools.append(tool)
    return ListingCheck(
        tools=tuple(tools),
        refused=tuple(refused),
        warnings=tuple(warnings),
        excluded=tuple(excluded),
    )
