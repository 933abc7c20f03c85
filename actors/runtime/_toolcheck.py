"""Checks applied to every tool a server lists, before it is registered.

A bad tool is refused alone, with a reason; its server and the server's other tools are not
affected. The checks are pure and synchronous, and run again on every re-listing
(``list_changed``, reconnect), so a tool that turns bad later is withdrawn then.

Entry points:

- :func:`check_listing` takes the raw ``tools`` array of a complete ``tools/list`` and returns the
  tools to register, the refusals (server, tool, reason) and the warnings. It applies the
  ``tools_include`` / ``tools_exclude`` filters, skips malformed entries (not an object, no name),
  treats an absent or ``{}`` ``inputSchema`` as an empty object schema, ignores annotation hints
  that are not booleans, decodes each tool alone, refuses a tool with a value nested too deeply
  outside its input schema, and gives each tool :func:`check_tool`'s verdict (found faster: see
  "Speed" below). For a 2026-07-28 session over Streamable HTTP (``check_param_headers``) it
  also refuses a tool whose ``x-mcp-header`` annotations are invalid, and says which arguments
  each accepted tool mirrors into ``Mcp-Param-*`` headers.
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
them is refused as "too large to check" instead of being scanned slowly. Outside the input schema
(``outputSchema``, ``_meta``, unknown keys...) a tool's values may nest at most twice
``max_depth`` levels of arrays and objects (400 by default); a deeper tool is refused as "too
deeply nested to accept", so that nothing that handles it later (comparing, rendering,
serialising) recurses without bound. Every walk here is iterative, and no message recurses into
the value it shows, so a hostile depth never exhausts the Python stack: it refuses one tool.

Speed: :func:`check_listing` takes about a quarter of the time that decoding each tool with the
converter and checking it with :func:`check_tool` takes. Entries of the common shape are decoded
without the converter (``fast_tool``); each input schema is first walked by
:func:`_quick_schema`, which clears an ordinary schema without building paths; the injection
scan runs once over the texts of every cleared tool together (:func:`_suspects`), looking for
the words each pattern needs before running the pattern. A tool that a shortcut cannot clear (a
problem, a budget passed, a text a pattern may match) is checked by :func:`check_tool` itself,
so the outcome is the one :func:`check_tool` gives, tool by tool.

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
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import accumulate
from types import MappingProxyType
from typing import Any, Final, Literal
from urllib.parse import unquote

import attrs

from ...protocol._codec import json_kind, structure
from ...protocol._errors import InvalidMessage, SchemaTooLarge
from ...protocol._headers import ParamHeaders, param_headers
from ...protocol._jsonrpc import MAX_JSON_DEPTH, _deep_path, _deeper_than
from ...protocol._methods import fast_tool
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

#: What each word pattern needs in a text before it can match: for every group, at least one of
#: its strings in the folded text (:func:`_fold`). Each group is read off the pattern: every
#: alternative of the pattern contains one of the group's strings (a test checks this with texts
#: generated from each pattern). A text that lacks a group cannot match the pattern, so the
#: pattern is not run on it; a text that has them all is searched with the pattern itself. The
#: hidden-characters pattern has no entry: it is only run on text that is not all printable ASCII
#: (tab, newline and carriage return aside).
_NEEDS: Final[dict[str, tuple[tuple[str, ...], ...]]] = {
    "instruction_override": (
        ("ignore", "disregard", "forget"),
        (
            "instruction",
            "prompt",
            "directive",
            "guideline",
            "guardrail",
            "system",
            "rules",
            "everything",
            "anything",
            "all",
            "above",
        ),
    ),
    "new_instructions": (("now", "new"), ("you", "from")),
    "system_prompt": (("system", "developer", "hidden"), ("prompt", "message", "instructions")),
    "role_tag": (("<", "["), ("|", "inst", "sys", "assistant", "developer", "important")),
    "concealment": (("user",),),
    "exfiltration": (
        ("://",),
        ("send", "post", "upload", "forward", "transmit", "exfiltrate", "leak", "copy", "pass"),
    ),
    "secret_files": (
        ("~/.", "id_", ".aws/credentials"),
        ("read", "cat", "open", "include", "send", "upload", "pass", "attach", "copy"),
    ),
}
#: Every pattern with what it needs (None: the hidden-characters pattern), in :data:`PATTERNS`
#: order.
_SCAN_ORDER: Final = tuple((p, None if p is _HIDDEN else _NEEDS[p.rule]) for p in PATTERNS)
#: Characters that IGNORECASE matches to an ASCII letter but that ``str.lower`` does not turn
#: into that letter (a test goes through every code point): they are replaced first.
_FOLDS: Final = (("\u0130", "i"), ("\u0131", "i"), ("\u017f", "s"))
#: A character the hidden-characters pattern may be after: anything but printable ASCII, tab,
#: newline and carriage return.
_ODD_CHAR = re.compile(r"[^\t\n\r\x20-\x7e]")


def _fold(text: str) -> str:
    """``text`` lowercased so that every string of :data:`_NEEDS` that the patterns would match
    (case-insensitively) in ``text`` appears in the result; the same length as ``text`` (the
    only character whose lowercase is longer, U+0130, is replaced first)."""
    if text.isascii():
        return text.lower()
    for char, plain in _FOLDS:
        if char in text:
            text = text.replace(char, plain)
    return text.lower()


def _has_all(folded: str, needs: tuple[tuple[str, ...], ...]) -> bool:
    """Whether ``folded`` has a string of every group of ``needs``."""
    return all(any(word in folded for word in group) for group in needs)


def _first_match(text: str) -> tuple[InjectionPattern, re.Match[str]] | None:
    """The first pattern that matches ``text`` and its match, or None. The same answer as
    trying every pattern in order, with shortcuts: a short text found clean before is not
    scanned again; a word pattern is only tried when the text has the words it needs
    (:data:`_NEEDS`); :data:`_HIDDEN` is only tried on text with a character other than
    printable ASCII, tab, newline and carriage return (every character it looks for is a control
    character or outside ASCII)."""
    if text in _CLEAN:
        return None
    folded = _fold(text)
    for pattern, needs in _SCAN_ORDER:
        if needs is None:
            if (text.isascii() and text.isprintable()) or _ODD_CHAR.search(text) is None:
                continue
        elif not _has_all(folded, needs):
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


class _Piece(str):
    """Text of the JSON being written by :func:`_json_excerpt` (not a value to encode)."""


def _json_excerpt(value: Any, limit: int = 200) -> str:
    """``json.dumps(value)[:limit]``, built without recursion and without encoding more than
    ``limit`` characters: a value nested 100,000 deep, or a huge one, gives its beginning."""
    out: list[str] = []
    size = 0
    stack: list[Iterator[Any]] = [iter((value,))]
    while stack and size < limit:
        item = next(stack[-1], stack)
        if item is stack:  # this array or object is done
            stack.pop()
            continue
        if isinstance(item, _Piece):
            piece = str(item)
        elif isinstance(item, dict):
            piece = "{"
            stack.append(_object_pieces(item))
        elif isinstance(item, list | tuple):
            piece = "["
            stack.append(_array_pieces(item))
        else:
            piece = json.dumps(item)
        out.append(piece)
        size += len(piece)
    return "".join(out)[:limit]


def _object_pieces(value: dict[Any, Any]) -> Iterator[Any]:
    separator = ""
    for key, item in value.items():
        yield _Piece(f"{separator}{json.dumps(key if isinstance(key, str) else str(key))}: ")
        yield item
        separator = ", "
    yield _Piece("}")


def _array_pieces(value: list[Any] | tuple[Any, ...]) -> Iterator[Any]:
    separator = ""
    for item in value:
        if separator:
            yield _Piece(separator)
        yield item
        separator = ", "
    yield _Piece("]")


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
            shown = ", ".join(_json_excerpt(name) for name in bad) or "an empty array"
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


def _top_level_warnings(schema: Mapping[str, Any], warnings: list[str]) -> None:
    """Append to ``warnings`` what an input schema's top level is warned about: a ``$schema``
    string that names a dialect trio-mcp does not know, and ``properties`` without a
    ``type``."""
    declared = schema.get("$schema")
    if isinstance(declared, str) and declared.rstrip("#") not in _DIALECTS:
        warnings.append(
            f"$.$schema: dialect {declared[:200]!r} is not one trio-mcp knows "
            f"(2020-12, draft-07); the schema was checked as 2020-12"
        )
    if schema.get("type") is None and "properties" in schema:
        warnings.append("$: no top-level 'type'; treated as an object schema")


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
    kind = schema.get("type")
    if kind is not None and kind != "object":
        walk.problems.append(
            f"$.type: the top level of an input schema must be of type 'object', "
            f"got {_json_excerpt(kind)}"
        )
    _top_level_warnings(schema, walk.warnings)
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


# --------------------------------------------------------------------------- the quick walk
#
# Most schemas a server lists are fine. :func:`_quick_schema` proves that in one pass that builds
# no paths and scans nothing: it checks every rule :class:`_Walk` checks and every budget, and
# hands back the schema's strings for the listing's batch scan (:func:`_suspects`). It declines
# (returns None) at the first thing :class:`_Walk` would report, and the tool is then checked by
# :func:`check_tool`, which names every problem with its path. When it accepts, what
# :func:`inspect_schema` would give is known without running it: no problems, no budget exceeded,
# the top-level warnings it computes the same way, and as many characters as the strings it
# handed back (the walk counts every key and every string, as :class:`_Walk` does).

#: What a key of a schema object holds, for the quick walk: data (walked as plain JSON), a map of
#: names to schemas (one that counts as properties), one schema (or, for ``items``, also an array
#: of schemas), an array of schemas, and the keywords with rules of their own. ``_FREE`` is a key
#: the walk does not know: data, and the key itself is scanned (a known key is not: see
#: :data:`_KEY_KINDS`).
(
    _FREE,
    _DATA,
    _DIALECT,
    _PROPS,
    _MAP,
    _ONE,
    _ITEMS,
    _LIST,
    _TYPE,
    _REQUIRED,
    _ENUM,
    _REF,
    _ANCHOR,
    _ID,
) = range(14)
#: Keywords whose value is plain data, with nothing to check (their names are scanned once,
#: here, instead of in every schema).
_DATA_KEYWORDS: Final = (
    "$comment",
    "$vocabulary",
    "$dynamicAnchor",
    "title",
    "description",
    "default",
    "examples",
    "example",
    "const",
    "format",
    "pattern",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "minContains",
    "maxContains",
    "dependentRequired",
    "contentEncoding",
    "contentMediaType",
    "contentSchema",
    "deprecated",
    "readOnly",
    "writeOnly",
    "nullable",
    "discriminator",
)


def _clean(words: Iterable[str]) -> tuple[str, ...]:
    """``words``, which the quick walk counts without scanning them: each is checked here, with
    every pattern, when the module loads (a pattern that matched one would be a bug to fix)."""
    words = tuple(words)
    dirty = [word for word in words if _first_match(word) is not None]
    if dirty:
        raise RuntimeError(f"injection patterns match {dirty!r}: the quick walk would skip them")
    return words


#: Key of a schema object -> what it holds, for every key the quick walk knows (and does not
#: scan: each is a JSON Schema keyword that no pattern matches).
_KEY_KINDS: Final[dict[str, int]] = dict.fromkeys(_clean(_DATA_KEYWORDS), _DATA)
_KEY_KINDS.update(dict.fromkeys(_clean(("$schema",)), _DIALECT))
_KEY_KINDS.update(dict.fromkeys(_clean(_SCHEMA_MAPS), _MAP))
_KEY_KINDS.update(dict.fromkeys(_clean(_PROPERTY_MAPS), _PROPS))
_KEY_KINDS.update(dict.fromkeys(_clean(_SCHEMA_ONE), _ONE))
_KEY_KINDS.update(dict.fromkeys(_clean(_SCHEMA_LISTS), _LIST))
_KEY_KINDS.update(
    zip(
        _clean(("items", "type", "required", "enum", "$ref", "$dynamicRef", "$anchor", "$id")),
        (_ITEMS, _TYPE, _REQUIRED, _ENUM, _REF, _REF, _ANCHOR, _ID),
        strict=True,
    )
)
#: Strings that need no scan where the quick walk meets them as a type name or the value of
#: ``$schema``: the type names, and the known dialects (which hold ``://``, a word the
#: exfiltration pattern needs).
_CLEAN_WORDS: Final = frozenset(
    _clean((*_TYPES, *_DIALECTS, *(f"{dialect}#" for dialect in _DIALECTS)))
)
#: Scalars of JSON other than strings (``bool`` before ``int``: checked by exact type).
_SCALARS: Final = frozenset({bool, int, float, type(None)})


def _quick_schema(
    schema: Any, budget: SchemaBudget, texts: list[str], warnings: list[str]
) -> int | None:
    """Whether :func:`inspect_schema` would find an ``inputSchema`` without problems, findings
    aside, within ``budget``, told without building a path.

    The keys and strings of the schema that may need a scan are appended to ``texts``, and the
    number of characters of the others (known keywords, type names, known dialects) is returned:
    together they are the report's ``chars`` (the caller scans the texts and compares the
    characters with ``budget.max_string_chars``). The report's warnings are appended to
    ``warnings``. None when the schema has a problem, passes a budget of nodes, properties or
    depth, or holds a value that is not plain JSON (``dict``, ``list``, ``str``, ``int``,
    ``float``, ``bool``, ``None``, exactly): then :func:`inspect_schema` must say what. The walk
    is iterative and stops at the first budget passed."""
    if schema is None:
        return 0
    if type(schema) is not dict:
        return None
    if not schema:
        return 0
    declared = schema.get("$schema")
    if declared is not None and type(declared) is not str:
        return None
    kind = schema.get("type")
    if kind is not None:
        if kind != "object":
            return None
        if len(schema) == 1 and type(kind) is str and budget.max_nodes >= 2:
            return 10  # {"type": "object"}, a tool without arguments: "type" and "object"
    _top_level_warnings(schema, warnings)

    max_depth = budget.max_depth
    max_nodes = budget.max_nodes
    max_properties = budget.max_properties
    kinds = _KEY_KINDS.get
    scalars = _SCALARS
    types = _TYPES
    clean = _CLEAN_WORDS
    append = texts.append
    extend = texts.extend
    skipped = 0  # characters of the strings not handed back
    nodes = 1
    properties = 0
    refs: list[str] | None = None
    anchors: set[str] | None = None
    nested_id = False
    #: schema objects to walk, with their level; then JSON values in data position, with theirs
    schemas: list[tuple[dict[str, Any], int]] = [(schema, 1)]
    data: list[tuple[Any, int]] = []
    while schemas:
        node, level = schemas.pop()
        nodes += len(node)
        if nodes > max_nodes:
            return None
        deeper = level + 1
        for key, sub in node.items():
            what = kinds(key, _FREE)
            sort = type(sub)
            if what <= _DIALECT:  # data
                if what == _FREE:
                    append(key)
                else:
                    skipped += len(key)
                if sort is str:
                    if what == _DIALECT and sub in clean:
                        skipped += len(sub)
                    else:
                        append(sub)
                elif sort is dict or sort is list:
                    if deeper > max_depth:
                        return None
                    data.append((sub, deeper))
                elif sort not in scalars:
                    return None
                continue
            skipped += len(key)
            if what == _TYPE:
                if sort is str:
                    if sub not in types:
                        return None
                    skipped += len(sub)
                    named_array = sub == "array"
                elif sort is list:
                    nodes += len(sub)
                    if not sub or deeper > max_depth or nodes > max_nodes:
                        return None
                    for name in sub:
                        if type(name) is not str or name not in types:
                            return None
                        skipped += len(name)
                    named_array = "array" in sub
                else:
                    return None
                if named_array and "items" not in node and "prefixItems" not in node:
                    return None
            elif what in (_PROPS, _MAP):
                if sort is not dict:
                    return None
                if what == _PROPS:
                    properties += len(sub)
                    if properties > max_properties:
                        return None
                nodes += len(sub)
                if nodes > max_nodes:
                    return None
                extend(sub)
                for child in sub.values():
                    if type(child) is dict:
                        if deeper > max_depth:
                            return None
                        schemas.append((child, deeper))
                    elif type(child) is not bool:
                        return None
            elif what == _ONE or (what == _ITEMS and sort is not list):
                if sort is dict:
                    if deeper > max_depth:
                        return None
                    schemas.append((sub, deeper))
                elif sort is not bool:
                    return None
            elif what in (_LIST, _ITEMS):
                if sort is not list:
                    return None
                nodes += len(sub)
                if nodes > max_nodes:
                    return None
                for child in sub:
                    if type(child) is dict:
                        if deeper > max_depth:
                            return None
                        schemas.append((child, deeper))
                    elif type(child) is not bool:
                        return None
            elif what == _REQUIRED:
                if sort is list:
                    nodes += len(sub)
                    if deeper > max_depth or nodes > max_nodes:
                        return None
                    for name in sub:
                        if type(name) is not str:
                            return None
                    extend(sub)
                elif sub is not None:
                    return None
            elif what == _ENUM:
                if sort is list:
                    if deeper > max_depth:
                        return None
                    data.append((sub, deeper))
                elif sub is not None:
                    return None
            elif what == _REF:
                if sort is not str or not sub.startswith("#"):
                    return None
                append(sub)
                if refs is None:
                    refs = []
                refs.append(sub)
            else:  # $anchor, $id: data with a meaning
                if what == _ANCHOR and sort is str:
                    if anchors is None:
                        anchors = set()
                    anchors.add(sub)
                elif what == _ID and level > 1:
                    nested_id = True
                if sort is str:
                    append(sub)
                elif sort is dict or sort is list:
                    if deeper > max_depth:
                        return None
                    data.append((sub, deeper))
                elif sort not in scalars:
                    return None
    while data:
        value, level = data.pop()
        nodes += len(value)
        if nodes > max_nodes:
            return None
        if type(value) is dict:
            extend(value)
            value = value.values()
        deeper = level + 1
        for sub in value:
            sort = type(sub)
            if sort is str:
                append(sub)
            elif sort is dict or sort is list:
                if deeper > max_depth:
                    return None
                data.append((sub, deeper))
            elif sort not in scalars:
                return None
    if nodes > max_nodes:
        return None
    if refs and not nested_id:
        for ref in refs:
            fragment = unquote(ref[1:])
            if fragment == "" or (
                not fragment.startswith("/") and anchors is not None and fragment in anchors
            ):
                continue
            if not fragment.startswith("/") or not _resolves(schema, fragment):
                return None
    return skipped


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
_NAME_RULE_WARNING: Final = (
    "the name does not follow the MCP naming rule (1 to 128 of A-Z a-z 0-9 _ - .); "
    "it is registered under a sanitized name"
)
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
        warnings.append(_NAME_RULE_WARNING)
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


#: No tool mirrors an argument into a header (shared: most listings).
_NO_PARAM_HEADERS: Final[Mapping[str, ParamHeaders]] = MappingProxyType({})


@attrs.frozen(kw_only=True)
class ListingCheck:
    """The outcome of :func:`check_listing`: the ``tools`` to register (in listing order), the
    ``refused`` entries with reasons, the ``warnings``, and the names the configuration's
    include/exclude filters left out (``excluded``, not refusals).

    ``param_headers``: with ``check_param_headers``, the server's name of each accepted tool
    that mirrors arguments into ``Mcp-Param-*`` headers, with those arguments (what
    :func:`~trio_mcp.protocol.request_headers` needs for its ``tools/call``); tools that mirror
    nothing are not in it. Read-only."""

    tools: tuple[Tool, ...] = ()
    refused: tuple[ToolRefusal, ...] = ()
    warnings: tuple[ToolWarning, ...] = ()
    excluded: tuple[str, ...] = ()
    param_headers: Mapping[str, ParamHeaders] = _NO_PARAM_HEADERS


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


def _too_deep(entry: Mapping[str, Any], limit: int, path: str) -> str | None:
    """Where a value of ``entry`` other than its ``inputSchema`` (which :func:`inspect_schema`
    bounds) nests more than ``limit`` levels of arrays and objects (the value of an entry's key
    is level 1), as a path that starts with ``path``, cut to its part eight levels down; None
    when nothing does. The walks are :func:`parse_message`'s (iterative, each array or object
    looked at once), so a hostile depth costs no stack and bounded time."""
    for key, value in entry.items():
        if key != "inputSchema" and _deeper_than(value, limit, 0):
            return _child(path, key) + _deep_path(value, limit)[1:]
    return None


#: ASCII characters the hidden-characters pattern may match (the C0 controls but tab, newline
#: and carriage return, and DEL).
_ASCII_CONTROLS: Final = tuple(
    chr(code) for code in (*range(0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F)
)


#: Per pattern, in :data:`PATTERNS` order: the groups of needed words after the first, each as
#: one search for any of its words (in folded text).
_SCAN_LATER: Final = tuple(
    (pattern, tuple(re.compile("|".join(map(re.escape, group))) for group in (needs or ())[1:]))
    for pattern, needs in _SCAN_ORDER
)


def _suspects(texts: list[str], starts: list[int], ends: list[int]) -> set[int]:
    """The tools, by their index in ``starts`` and ``ends``, that some pattern may match, of a
    batch of tools whose texts are among ``texts``: tool ``k``'s texts are the part
    ``starts[k]:ends[k]`` of ``"\n".join(texts) + "\n"`` (each followed by its newline); the parts
    come in order and do not overlap (texts between them belong to no tool of the batch).

    A tool left out matches no pattern with any of its texts, so :func:`check_tool` would find
    nothing in it. Each word pattern is looked for through the words it needs (:data:`_NEEDS`)
    in the whole batch at once, the hidden-characters pattern through the characters it may be
    after (fast substring and character searches); only a tool that has what a pattern needs is
    searched with the pattern, over its own part of the batch. That search finds a match when
    one of the tool's texts has one: the texts are separated by newlines, and a newline, like the
    start or the end of a text, is no word character and in no needed word, so a match in a text
    is a match in the batch too. (It may also find a match across two texts of the tool, which
    only sends that tool to the exact check.)"""
    joined = "\n".join(texts)
    folded = _fold(joined)
    if len(folded) != len(joined):  # no character known to Python 3.11 does this (tested)
        return set(range(len(ends)))
    find = folded.find
    last = len(ends)
    marks = [0] * last  # per tool: a bit per pattern whose first group it has
    for bit, (_, needs) in enumerate(_SCAN_ORDER):
        flag = 1 << bit
        if needs is None:  # the hidden characters
            if joined.isascii() and not any(char in joined for char in _ASCII_CONTROLS):
                continue
            search = _ODD_CHAR.search
            odd = search(joined)
            while odd is not None:
                at = odd.start()
                tool = bisect_right(ends, at)
                if tool == last:
                    break
                if at >= starts[tool]:
                    marks[tool] |= flag
                    odd = search(joined, ends[tool])
                else:  # between two tools of the batch
                    odd = search(joined, starts[tool])
            continue
        for word in needs[0]:
            at = find(word)
            while at >= 0:
                tool = bisect_right(ends, at)
                if tool == last:
                    break
                if at >= starts[tool]:
                    marks[tool] |= flag
                    at = find(word, ends[tool])
                else:  # between two tools of the batch
                    at = find(word, starts[tool])
    suspects: set[int] = set()
    for tool, flags in enumerate(marks):
        if not flags:
            continue
        start = starts[tool]
        end = ends[tool]
        for bit, (pattern, later) in enumerate(_SCAN_LATER):
            if not flags >> bit & 1:
                continue
            if any(group.search(folded, start, end) is None for group in later):
                continue
            if pattern.regex.search(joined, start, end) is not None:
                suspects.add(tool)
                break
    return suspects


#: Keys of an entry whose values cannot nest (after decoding).
_FLAT_KEYS: Final = frozenset({"name", "title", "description", "inputSchema"})


def check_listing(
    raw_tools: Iterable[Any],
    *,
    server: str,
    include: Sequence[str] | None = None,
    exclude: Sequence[str] = (),
    policy: SecurityPolicy = "block",
    budget: SchemaBudget = DEFAULT_BUDGET,
    max_listing_chars: int = DEFAULT_MAX_LISTING_CHARS,
    nesting_bounded: bool = False,
    check_param_headers: bool = False,
) -> ListingCheck:
    """Filter, decode and check every entry of a server's complete ``tools`` listing.

    ``raw_tools`` is the JSON array as received (all pages). ``include`` / ``exclude`` are
    ``fnmatch`` globs over the server's own tool names (case-sensitive; ``include=None`` means
    every tool, exclusion wins). An entry that is not an object or has no string name is refused
    (its position is named); an absent or ``{}`` ``inputSchema`` becomes ``{"type": "object"}``;
    annotation hints that are not booleans are dropped with a warning; an entry that does not
    decode as a Tool is refused with the decoder's message; an entry with a value nested more
    than ``2 * budget.max_depth`` levels deep outside its ``inputSchema`` (``outputSchema``,
    ``_meta``, unknown keys...) is refused as too deeply nested; then :func:`check_tool`
    decides. The whole listing checks at most ``max_listing_chars`` characters of text (about a
    second of work at the default); the tools past it are refused as not checked. The work is
    CPU bound: the runtime runs this in a worker thread (``trio.to_thread.run_sync``) so that a
    hostile listing cannot stall the event loop. Never raises for any JSON input.

    ``nesting_bounded=True`` is the caller's word that ``raw_tools`` comes from frames that
    :func:`parse_message` accepted with its default ``max_depth`` (:data:`MAX_JSON_DEPTH`), as
    the runtime's do: a value of an entry then nests at most ``MAX_JSON_DEPTH - 4`` levels, so
    with a ``budget.max_depth`` of at least 126 (the default is 200) no entry can be too deeply
    nested and the walk that looks for one is skipped.

    The outcome is the one :func:`check_tool` gives tool by tool, found faster: each tool's
    schema is first walked by :func:`_quick_schema` and the injection scan of all tools is done
    in one batch (:func:`_suspects`); a tool that either of them cannot clear is checked by
    :func:`check_tool` itself.

    ``check_param_headers=True`` is for a 2026-07-28 session over Streamable HTTP: the
    ``x-mcp-header`` annotations of every tool that passed the other checks are read
    (:func:`~trio_mcp.protocol.param_headers`); a tool whose annotations are invalid is refused
    alone, with the reason (the specification makes a client leave it out of its listing), and
    the arguments each accepted tool mirrors into headers are in ``param_headers``. Off (the
    default, and what stdio and the handshake revisions use) the annotations are ignored.
    """
    filtering = include is not None or bool(exclude)
    quick = policy in ("block", "warn")  # else check_tool says what is wrong with it
    depth_limit = 2 * budget.max_depth
    # In a frame parse_message accepted, an entry's values start at level 5 of the message.
    walk_nesting = not nesting_bounded or depth_limit < MAX_JSON_DEPTH - 4
    flat_keys = _FLAT_KEYS
    # First pass: decode each entry; walk each schema the quick way, gathering the texts to
    # scan. records: per entry, in order, a refusal, an excluded name, (tool, name, notes) for a
    # tool for check_tool, or (tool, name, notes, warnings, start, heads, stop, skipped) for a
    # tool the quick walk cleared: its texts are texts[start:stop] (the name, titles and
    # description up to heads), plus skipped characters of known words.
    records: list[Any] = []
    texts: list[str] = []
    for index, entry in enumerate(raw_tools):
        if not isinstance(entry, dict):
            records.append(
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
            records.append(
                ToolRefusal(
                    server=server,
                    tool=None,
                    reason=f"tools[{index}] has no name (expected a non-empty string, got {got})",
                )
            )
            continue
        if filtering and not _included(name, include, exclude):
            records.append(name)
            continue
        notes: list[str] = []
        if "annotations" in entry:
            entry = _clean_annotations(entry, notes)
        schema = entry.get("inputSchema")
        if schema is None or schema == {}:
            entry = {**entry, "inputSchema": {"type": "object"}}
        tool = fast_tool(entry)
        if tool is None:
            try:
                tool = structure(entry, Tool, path=f"$.tools[{index}]")
            except InvalidMessage as exc:
                records.append(
                    ToolRefusal(server=server, tool=name, reason=f"malformed tool entry: {exc}")
                )
                continue
        if walk_nesting and not entry.keys() <= flat_keys:
            deep = _too_deep(entry, depth_limit, f"$.tools[{index}]")
            if deep is not None:
                records.append(
                    ToolRefusal(
                        server=server,
                        tool=name,
                        reason=f"too deeply nested to accept: more than {depth_limit:,} levels "
                        f"of arrays and objects (at {_short(deep)})",
                    )
                )
                continue
        if quick:
            # What check_tool scans: the name (separators as spaces), titles, description.
            if len(name) <= 128 and name.isascii() and name.isidentifier():
                warnings: list[str] = []
                if "__" in name:
                    texts.append(_NAME_SEPARATORS.sub(" ", name))
                else:
                    texts.append(name.replace("_", " "))
            else:
                warnings = [] if _SEP986.fullmatch(name) else [_NAME_RULE_WARNING]
                texts.append(_NAME_SEPARATORS.sub(" ", name))
            start = len(texts) - 1
            if tool.title:
                texts.append(tool.title)
            if tool.annotations is not None and tool.annotations.title:
                texts.append(tool.annotations.title)
            if tool.description:
                texts.append(tool.description)
            heads = len(texts)
            schema_warnings: list[str] = []
            skipped = _quick_schema(tool.input_schema, budget, texts, schema_warnings)
            if skipped is not None:
                if schema_warnings:
                    warnings += [f"inputSchema {warning}" for warning in schema_warnings]
                records.append((tool, name, notes, warnings, start, heads, len(texts), skipped))
                continue
            del texts[start:]
        records.append((tool, name, notes))

    # Second pass, in listing order: the listing's budget of text, and check_tool for the
    # tools the quick walk did not clear. The batch: the records of the cleared tools, and
    # where their texts start and end in "\n".join(texts).
    prefix = [0, *accumulate(map(len, texts))]
    batch: list[tuple[int, int]] = []  # (place in records, chars limit)
    starts: list[int] = []
    ends: list[int] = []
    max_string_chars = budget.max_string_chars
    used = 0
    for place, record in enumerate(records):
        if type(record) is not tuple:
            continue
        remaining = max_listing_chars - used
        if remaining <= 0:
            records[place] = ToolRefusal(
                server=server,
                tool=record[1],
                reason=f"not checked: the listing passed the {max_listing_chars:,} "
                f"characters of text checked per listing (max_listing_chars)",
            )
            continue
        limit = max_string_chars if remaining >= max_string_chars else remaining
        if len(record) == 8:
            start, heads, stop, skipped = record[4:]
            first = prefix[start]
            head = prefix[heads] - first
            chars = prefix[stop] - first + skipped
            if chars - head <= limit and head <= limit:  # else check_tool says "too large"
                used += chars
                batch.append((place, limit))
                starts.append(first + start)
                ends.append(prefix[stop] + stop)
                continue
        tool, name, notes = record[:3]
        verdict = check_tool(tool, policy=policy, budget=_budget_for(budget, limit))
        used += verdict.checked_chars
        records[place] = (tool, name, notes, verdict.warnings, verdict.refusal(server))

    # Third pass: the scan of the batch; check_tool for the tools it cannot clear.
    if batch:
        for suspect in _suspects(texts, starts, ends):
            place, limit = batch[suspect]
            tool, name, notes = records[place][:3]
            verdict = check_tool(tool, policy=policy, budget=_budget_for(budget, limit))
            records[place] = (tool, name, notes, verdict.warnings, verdict.refusal(server))
    return _assemble(server, records, check_param_headers=check_param_headers)


def _budget_for(budget: SchemaBudget, max_string_chars: int) -> SchemaBudget:
    """``budget`` with at most ``max_string_chars`` characters of text."""
    if max_string_chars == budget.max_string_chars:
        return budget
    return attrs.evolve(budget, max_string_chars=max_string_chars)


def _assemble(server: str, records: list[Any], *, check_param_headers: bool) -> ListingCheck:
    """The :class:`ListingCheck` of :func:`check_listing`'s records, in listing order; with
    ``check_param_headers``, the ``x-mcp-header`` annotations of each accepted tool too."""
    mirrored: dict[str, ParamHeaders] = {}
    tools: list[Tool] = []
    refused: list[ToolRefusal] = []
    warnings: list[ToolWarning] = []
    excluded: list[str] = []
    for record in records:
        if type(record) is ToolRefusal:
            refused.append(record)
        elif isinstance(record, str):  # excluded by the filters
            excluded.append(record)
        else:
            if len(record) == 8:  # cleared by the quick walk and the batch scan
                tool, name, notes, messages = record[:4]
                refusal = None
            else:  # checked by check_tool
                tool, name, notes, messages, refusal = record
            if notes:
                warnings.extend(ToolWarning(server=server, tool=name, message=m) for m in notes)
            if messages:
                warnings.extend(ToolWarning(server=server, tool=name, message=m) for m in messages)
            if refusal is None and check_param_headers:
                found = param_headers(tool.input_schema)
                if isinstance(found, str):
                    refusal = ToolRefusal(server=server, tool=name, reason=found)
                elif found:
                    mirrored[name] = found
            if refusal is None:
                tools.append(tool)
            else:
                refused.append(refusal)
    return ListingCheck(
        tools=tuple(tools),
        refused=tuple(refused),
        warnings=tuple(warnings),
        excluded=tuple(excluded),
        param_headers=MappingProxyType(mirrored) if mirrored else _NO_PARAM_HEADERS,
    )
