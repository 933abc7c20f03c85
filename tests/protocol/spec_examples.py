"""Decode every example message of the MCP specification with trio-mcp's wire types.

The specification is not part of this repository: this checker reads it at run time from a
checkout given on the command line (a git worktree or plain directory, or a bare git directory,
read through ``git``)::

    python tests/protocol/spec_examples.py <path to the spec repository> [--rev HEAD] [-v]

For each of the five revisions it collects

(a) every JSON file under ``schema/<rev>/examples/<TypeName>/`` and decodes it as the wire type of
    that name: ``...Request`` / ``...Notification`` files are whole JSON-RPC messages whose params
    are decoded by method, ``...ResultResponse`` files whole responses whose result is decoded as
    the named result type, ``...Error`` files error responses or bare error objects (their code
    must be the one the type stands for), anything else through ``WIRE_TYPES``;
(b) every ```json / ```jsonc block of ``docs/specification/<rev>/**/*.mdx``: requests and
    notifications are decoded by method, a response by the method of the request with the same id
    earlier in the same file (or, when that request is not in the file, by the method its result's
    keys name), error responses are classified; 2026-07-28 multi round-trip input requests
    (``{"method", "params"}`` without ``jsonrpc``) are decoded as the request params they carry.
    Fragments that are not messages are decoded when their keys say unambiguously what they are
    (a content block by its ``type``, a tool by ``inputSchema``, capabilities by their
    client-only or server-only keys...); the table counts those as "by shape". ``//`` and
    ``/* */`` comments and trailing commas are removed before parsing.

Anything else is *left out* with a reason (a JSON Schema, a fragment of unknown type, JSON with an
ellipsis, a placeholder method, a mistake in the text...). A genuine message that does not decode
is a *failure*: a bug in the wire types. It prints a table per revision and exits with status 1
when anything failed.
"""

from __future__ import annotations

import argparse
import enum
import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cache, partial
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

import attrs

from trio_mcp.protocol import _methods
from trio_mcp.protocol._codec import structure
from trio_mcp.protocol._errors import RpcError
from trio_mcp.protocol._jsonrpc import (
    ErrorResponse,
    Notification,
    Request,
    RequestId,
    Response,
    classify,
)

__all__ = [
    "ERROR_CODES",
    "REVISIONS",
    "CodeBlock",
    "DirectorySource",
    "Example",
    "GitSource",
    "LeftOut",
    "Outcome",
    "RevisionReport",
    "SpecSource",
    "Status",
    "check_all",
    "check_doc_file",
    "check_revision",
    "check_schema_example",
    "extract_code_blocks",
    "format_report",
    "main",
    "open_source",
    "strip_json_comments",
]

#: The revisions checked, oldest first.
REVISIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28")

#: Schema error type name -> the JSON-RPC code its examples must carry.
ERROR_CODES: Mapping[str, int] = {
    "ParseError": -32700,
    "InvalidRequestError": -32600,
    "MethodNotFoundError": -32601,
    "InvalidParamsError": -32602,
    "InternalError": -32603,
    "ResourceNotFoundError": -32002,
    "HeaderMismatchError": -32020,
    "MissingRequiredClientCapabilityError": -32021,
    "UnsupportedProtocolVersionError": -32022,
    "URLElicitationRequiredError": -32042,
}

_JSON_LANGS = frozenset({"json", "jsonc"})


# --------------------------------------------------------------------------- reading the spec


class SpecSource(Protocol):
    """Read access to one snapshot of the specification repository."""

    def list_files(self, prefix: str) -> list[str]:
        """Every file path (relative, ``/``-separated, sorted) under the folder ``prefix``."""
        ...

    def read_many(self, paths: Sequence[str]) -> dict[str, bytes]:
        """The contents of ``paths``."""
        ...


@attrs.frozen
class DirectorySource:
    """A specification checkout on disk (a git worktree or any copy of the files)."""

    root: Path

    def list_files(self, prefix: str) -> list[str]:
        base = self.root / prefix
        if not base.is_dir():
            return []
        return sorted(
            PurePosixPath(p.relative_to(self.root)).as_posix()
            for p in base.rglob("*")
            if p.is_file()
        )

    def read_many(self, paths: Sequence[str]) -> dict[str, bytes]:
        return {p: (self.root / p).read_bytes() for p in paths}


@attrs.frozen
class GitSource:
    """A specification repository read through ``git`` at ``rev`` (works on a bare git dir)."""

    git_dir: Path
    rev: str = "HEAD"

    def _git(self, *args: str, stdin: bytes | None = None) -> bytes:
        done = subprocess.run(
            ["git", f"--git-dir={self.git_dir}", *args],
            input=stdin,
            capture_output=True,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"git {' '.join(args)} failed in {self.git_dir}: "
                f"{done.stderr.decode(errors='replace').strip()}"
            )
        return done.stdout

    def list_files(self, prefix: str) -> list[str]:
        out = self._git("ls-tree", "-r", "-z", "--name-only", self.rev, "--", prefix + "/")
        return sorted(name for name in out.decode().split("\0") if name)

    def read_many(self, paths: Sequence[str]) -> dict[str, bytes]:
        if not paths:
            return {}
        request = "".join(f"{self.rev}:{p}\n" for p in paths).encode()
        out = self._git("cat-file", "--batch", stdin=request)
        contents: dict[str, bytes] = {}
        pos = 0
        for path in paths:
            end = out.index(b"\n", pos)
            header = out[pos:end].split()
            if len(header) != 3:
                raise RuntimeError(f"cannot read {path} at {self.rev}: {out[pos:end]!r}")
            size = int(header[2])
            contents[path] = out[end + 1 : end + 1 + size]
            pos = end + 1 + size + 1
        return contents


def open_source(path: Path, *, rev: str = "HEAD") -> SpecSource:
    """A reader for the specification repository at ``path``.

    A bare git directory (``HEAD`` and ``objects/`` inside) is read through ``git`` at ``rev``;
    any other directory is read from disk (``rev`` is then ignored). Raises ``FileNotFoundError``
    when ``path`` is not a directory.
    """
    if (path / "HEAD").is_file() and (path / "objects").is_dir():
        return GitSource(path, rev)
    if path.is_dir():
        return DirectorySource(path)
    raise FileNotFoundError(f"{path} is not a directory: give a spec checkout or a bare git dir")


# --------------------------------------------------------------------------- text helpers


@attrs.frozen(kw_only=True)
class CodeBlock:
    """A fenced code block of a Markdown/MDX file: its language, first body line, body text."""

    lang: str
    line: int
    body: str


_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>.*)$")


def extract_code_blocks(text: str) -> list[CodeBlock]:
    """Every fenced code block in ``text``, in order (indented fences included).

    ``line`` is the 1-based number of the block's first body line. An unclosed fence runs to the
    end of the text, as in CommonMark.
    """
    lines = text.splitlines()
    blocks: list[CodeBlock] = []
    index = 0
    while index < len(lines):
        match = _FENCE.match(lines[index])
        if match is None:
            index += 1
            continue
        fence = match["fence"]
        lang = match["info"].split(maxsplit=1)[0] if match["info"].strip() else ""
        body: list[str] = []
        end = index + 1
        while end < len(lines):
            stripped = lines[end].strip()
            if stripped.startswith(fence[0] * len(fence)) and not stripped.strip(fence[0]):
                break
            body.append(lines[end])
            end += 1
        blocks.append(CodeBlock(lang=lang, line=index + 2, body="\n".join(body)))
        index = end + 1
    return blocks


def strip_json_comments(text: str) -> str:
    """``text`` without ``//`` and ``/* */`` comments and without trailing commas (outside
    strings), so JSON-with-comments can be parsed by ``json.loads``."""
    out: list[str] = []
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        else:
            out.append(ch)
            i += 1
    return re.sub(r",(\s*[}\]])", r"\1", "".join(out))


# --------------------------------------------------------------------------- outcomes


class Status(enum.Enum):
    """What happened to one example."""

    DECODED = "decoded"
    LEFT_OUT = "left out"
    FAILED = "failed"


@attrs.frozen(kw_only=True)
class Outcome:
    """One example's fate: where it is, what happened, and what it decoded as / why not.

    ``by_shape`` marks a decoded example whose type was told by its keys (a fragment without
    envelope, or a response whose request is not in the file) rather than by a type name or a
    method.
    """

    location: str
    source: str  # "schema example" or "doc block"
    status: Status
    detail: str
    by_shape: bool = False


class LeftOut(Exception):
    """Raised by the checks: this example is not something to decode (the message says why)."""


@attrs.frozen(kw_only=True)
class Example:
    """One JSON value to check, with its location."""

    location: str
    value: Any


@attrs.frozen(kw_only=True)
class RevisionReport:
    """The outcomes of one revision."""

    revision: str
    outcomes: tuple[Outcome, ...]

    def count(self, status: Status, source: str | None = None) -> int:
        """How many outcomes have ``status`` (of ``source`` only, when given)."""
        return sum(
            1
            for o in self.outcomes
            if o.status is status and (source is None or o.source == source)
        )

    def found(self, source: str | None = None) -> int:
        """How many examples were found (of ``source`` only, when given)."""
        return sum(1 for o in self.outcomes if source is None or o.source == source)

    @property
    def failures(self) -> tuple[Outcome, ...]:
        """The examples that should have decoded and did not."""
        return tuple(o for o in self.outcomes if o.status is Status.FAILED)


# --------------------------------------------------------------------------- decoding


def _type_name(obj: Any) -> str:
    if isinstance(obj, dict) and obj:
        return f"dict of {', '.join(sorted({type(v).__name__ for v in obj.values()}))}"
    return type(obj).__name__


def _describe_error(exc: BaseException) -> str:
    path = getattr(exc, "path", None)
    where = f" @ {path}" if path and f"@ {path}" not in str(exc) else ""
    text = f"{type(exc).__name__}: {exc}{where}"
    errors = getattr(exc, "errors", ())
    if isinstance(errors, tuple) and len(errors) > 1:
        text += "".join(f"\n      {line}" for line in errors)
    return text


def _decode_request(msg: Request) -> str:
    params = _methods.decode_params(msg.method, msg.params)
    return f"{msg.method} request params -> {_type_name(params)}"


def _decode_notification(msg: Notification) -> str:
    known = (
        msg.method in _methods.SERVER_NOTIFICATIONS or msg.method in _methods.CLIENT_NOTIFICATIONS
    )
    if not known:
        if msg.method in _methods.CLIENT_REQUESTS or msg.method in _methods.SERVER_REQUESTS:
            raise LeftOut(
                f"a mistake in the text: a {msg.method} request without an id (so a notification)"
            )
        raise LookupError(f"no wire type for notification {msg.method!r}")
    params = _methods.decode_notification(msg.method, msg.params)
    return f"{msg.method} notification params -> {_type_name(params)}"


def _decode_result(method: str, msg: Response) -> str:
    result = _methods.decode_result(method, msg.result)
    return f"{method} result -> {_type_name(result)}"


def _decode_error(msg: ErrorResponse, *, expected: int | None = None) -> str:
    error = msg.error
    if expected is not None and error.code != expected:
        raise ValueError(f"error code {error.code}, expected {expected}")
    rpc = RpcError.from_error(error.code, error.message, error.data)
    return f"error {error.code} -> {type(rpc).__name__}"


@cache
def _result_methods() -> dict[str, str]:
    """Result type name -> a method answered with it, from the method tables."""
    out: dict[str, str] = {}
    for table in (_methods.CLIENT_REQUESTS, _methods.SERVER_REQUESTS):
        for spec in table.values():
            name = getattr(spec.result, "__name__", None)
            if isinstance(name, str):
                out.setdefault(name, spec.method)
    return out


def check_schema_example(type_name: str, value: Any) -> str:
    """Decode one ``schema/<rev>/examples/<type_name>/*.json`` value; say what it became.

    Raises :class:`LeftOut` when the example is not decodable by design, and the decoding error
    (``InvalidMessage``, ``LocalProtocolError``, ``ValueError``...) when it should decode and did
    not.
    """
    if type_name in ERROR_CODES:
        envelope = value if isinstance(value, dict) and "jsonrpc" in value else None
        msg = classify(
            envelope if envelope is not None else {"jsonrpc": "2.0", "id": None, "error": value}
        )
        if not isinstance(msg, ErrorResponse):
            raise ValueError(f"expected an error response, got a {_type_name(msg)}")
        return _decode_error(msg, expected=ERROR_CODES[type_name])
    if type_name.endswith("Request") and isinstance(value, dict) and "jsonrpc" in value:
        msg = classify(value)
        if not isinstance(msg, Request):
            raise ValueError(f"expected a request, got a {_type_name(msg)}")
        return _decode_request(msg)
    if type_name.endswith("Notification") and isinstance(value, dict) and "jsonrpc" in value:
        msg = classify(value)
        if not isinstance(msg, Notification):
            raise ValueError(f"expected a notification, got a {_type_name(msg)}")
        return _decode_notification(msg)
    if type_name.endswith("Response") and isinstance(value, dict) and "jsonrpc" in value:
        msg = classify(value)
        if not isinstance(msg, Response):
            raise ValueError(f"expected a response, got a {_type_name(msg)}")
        result_name = type_name.removesuffix("Response")
        method = _result_methods().get(result_name)
        if method is None:
            cls = _methods.WIRE_TYPES.get(result_name)
            if cls is None:
                raise LookupError(f"no method or wire type answers with {result_name}")
            return f"result -> {_type_name(structure(msg.result, cls, path='$.result'))}"
        return _decode_result(method, msg)
    cls = _methods.WIRE_TYPES.get(type_name)
    if cls is None:
        if type_name.endswith("Schema"):
            raise LeftOut(
                f"{type_name} is a JSON Schema fragment: trio-mcp keeps schemas as raw JSON"
            )
        raise LookupError(f"no wire type named {type_name} in WIRE_TYPES")
    return f"{type_name} -> {_type_name(structure(value, cls))}"


def _is_input_request(value: dict[str, Any]) -> bool:
    return isinstance(value.get("method"), str) and set(value) <= {"method", "params"}


#: Result keys that tell which method a result answers, for a response whose request is not in
#: the file. Checked in order; the first key present wins.
_RESULT_KEYS: tuple[tuple[str, str], ...] = (
    ("protocolVersion", "initialize"),
    ("supportedVersions", "server/discover"),
    ("tools", "tools/list"),
    ("resourceTemplates", "resources/templates/list"),
    ("resources", "resources/list"),
    ("contents", "resources/read"),
    ("prompts", "prompts/list"),
    ("completion", "completion/complete"),
    ("roots", "roots/list"),
    ("model", "sampling/createMessage"),
    ("action", "elicitation/create"),
    ("messages", "prompts/get"),
    ("content", "tools/call"),
    ("structuredContent", "tools/call"),
    ("inputRequests", "tools/call"),
    ("requestState", "tools/call"),
)

_BY_KEYS = "typed by its keys"
_INFERRED = "inferred from the result's keys"
_CONTENT_TAGS = frozenset({"text", "image", "audio", "resource", "resource_link"})
_SAMPLING_TAGS = frozenset({"tool_use", "tool_result"})
_CLIENT_ONLY_CAPABILITIES = frozenset({"roots", "sampling", "elicitation"})
_SERVER_ONLY_CAPABILITIES = frozenset({"logging", "prompts", "resources", "tools", "completions"})
_SCHEMA_KEYS = frozenset({"$schema", "properties", "enum", "oneOf", "anyOf", "items"})
_SCHEMA_TYPES = frozenset({"string", "number", "integer", "boolean", "object", "array", "null"})


def _guess_result_method(result: Mapping[str, Any]) -> str | None:
    for key, method in _RESULT_KEYS:
        if key in result:
            return method
    return None


def _capabilities_type(value: Any) -> str | None:
    if not isinstance(value, dict):
        return None
    keys = set(value)
    client, server = keys & _CLIENT_ONLY_CAPABILITIES, keys & _SERVER_ONLY_CAPABILITIES
    if client and not server:
        return "ClientCapabilities"
    if server and not client:
        return "ServerCapabilities"
    return None


def _fragment_type(value: dict[str, Any], where: str) -> str | None:
    """The schema type name of a fragment whose keys say unambiguously what it is (``where``,
    the file's path, tells sampling messages from prompt messages)."""
    keys = set(value)
    tag = value.get("type")
    if tag in _CONTENT_TAGS and "inputSchema" not in keys:
        return "ContentBlock"
    if tag in _SAMPLING_TAGS:
        return "SamplingMessageContentBlock"
    if {"name", "inputSchema"} <= keys:
        return "Tool"
    if "uri" in keys and ("text" in keys or "blob" in keys) and "type" not in keys:
        return "ResourceContents"
    if keys <= {"uri", "name", "_meta"} and str(value.get("uri", "")).startswith("file://"):
        return "Root"
    if {"uri", "name"} <= keys and "type" not in keys:
        return "Resource"
    if "hints" in keys and any(k.endswith("Priority") for k in keys):
        return "ModelPreferences"
    if {"action"} <= keys <= {"action", "content", "_meta"}:
        return "ElicitResult"
    if {"model", "role", "content"} <= keys:
        return "CreateMessageResult"
    if keys == {"role", "content"} and "/sampling" in where:
        return "SamplingMessage"
    if keys == {"role", "content"} and "/prompts" in where:
        return "PromptMessage"
    if keys == {"roots"}:
        return "ListRootsResult"
    if keys == {"capabilities"}:
        return _capabilities_type(value["capabilities"])
    if value and all(isinstance(v, dict) and _is_input_request(v) for v in value.values()):
        return "InputRequests"
    if value and all(
        isinstance(v, dict) and _fragment_type(v, where) in {"ElicitResult", "CreateMessageResult"}
        for v in value.values()
    ):
        return "InputResponses"
    return None


def _left_out_fragment(value: dict[str, Any]) -> LeftOut:
    keys = set(value)
    if keys == {"capabilities"}:
        return LeftOut("a capabilities fragment that does not say whether client or server")
    if keys & _SCHEMA_KEYS or value.get("type") in _SCHEMA_TYPES:
        return LeftOut("a JSON Schema fragment: trio-mcp keeps schemas as raw JSON")
    names = ", ".join(sorted(keys)[:6]) + (", ..." if len(keys) > 6 else "")
    return LeftOut(f"not a JSON-RPC message: a fragment with keys [{names}]")


def _check_fragment(value: Any, where: str) -> str:
    if isinstance(value, list):
        if value and all(isinstance(v, dict) for v in value):
            types = {_fragment_type(v, where) for v in value}
            if len(types) == 1 and None not in types:
                parts = [_check_fragment(v, where) for v in value]
                return f"array of {len(parts)}: {parts[0]}"
        raise LeftOut("not a JSON-RPC message: a fragment (an array)")
    if not isinstance(value, dict):
        raise LeftOut(f"not a JSON-RPC message: a fragment ({_type_name(value)})")
    type_name = _fragment_type(value, where)
    if type_name is None:
        raise _left_out_fragment(value)
    target = value
    if type_name.endswith("Capabilities") and set(value) == {"capabilities"}:
        target = value["capabilities"]
    decoded = structure(target, _methods.WIRE_TYPES[type_name])
    return f"fragment {_BY_KEYS} as {type_name} -> {_type_name(decoded)}"


def _check_doc_value(value: Any, requests: dict[RequestId, str], where: str) -> str:
    if (
        isinstance(value, list)
        and value
        and all(isinstance(v, dict) and "jsonrpc" in v for v in value)
    ):
        parts = [_check_doc_value(v, requests, where) for v in value]
        return f"batch of {len(parts)}: " + "; ".join(parts)
    if not isinstance(value, dict) or "jsonrpc" not in value:
        if isinstance(value, dict) and _is_input_request(value):
            params = _methods.decode_params(value["method"], value.get("params"))
            return f"{value['method']} input request params -> {_type_name(params)}"
        return _check_fragment(value, where)
    msg = classify(value)
    if isinstance(msg, Request):
        requests[msg.id] = msg.method
        if "/" not in msg.method and msg.method not in _methods.CLIENT_REQUESTS:
            raise LeftOut(f"a request for the placeholder method {msg.method!r}")
        return _decode_request(msg)
    if isinstance(msg, Notification):
        return _decode_notification(msg)
    if isinstance(msg, Response):
        method = requests.get(msg.id)
        if method is not None and "/" not in method and method not in _methods.CLIENT_REQUESTS:
            raise LeftOut(f"the answer to a request for the placeholder method {method!r}")
        if method is None:
            method = _guess_result_method(msg.result)
            if method is None:
                raise LeftOut(
                    f"unpairable response: no request with id {msg.id!r} earlier in the file, "
                    "and its result keys do not say which method it answers"
                )
            return f"{_decode_result(method, msg)} (method {_INFERRED})"
        return _decode_result(method, msg)
    return _decode_error(msg)


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_ELLIPSIS = re.compile(r"\.\.\.|…")
_DECODER = json.JSONDecoder()


def _values(text: str) -> list[Any] | None:
    """Every JSON value in ``text`` one after the other, or None if it is not such a sequence."""
    out: list[Any] = []
    pos = 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos == len(text):
            return out
        try:
            value, pos = _DECODER.raw_decode(text, pos)
        except ValueError:
            return None
        out.append(value)


def _parse_block(block: CodeBlock) -> tuple[Any, bool]:
    """The block's JSON value, and whether comments had to be removed first."""
    try:
        return json.loads(block.body), False
    except ValueError:
        pass
    stripped = strip_json_comments(block.body)
    try:
        return json.loads(stripped), True
    except ValueError as exc:
        if _ELLIPSIS.search(_STRING.sub('""', stripped)):
            raise LeftOut("JSON with an ellipsis placeholder (...)") from None
        values = _values(stripped)
        if values is not None and len(values) > 1:
            raise LeftOut(f"not one JSON value: {len(values)} values in one block") from None
        raise LeftOut(f"not valid JSON ({exc})") from None


def check_doc_file(path: str, text: str) -> list[Outcome]:
    """Check every JSON code block of one MDX file, in order (responses are paired with the
    latest request with the same id before them in the file)."""
    requests: dict[RequestId, str] = {}
    outcomes: list[Outcome] = []
    for block in extract_code_blocks(text):
        if block.lang not in _JSON_LANGS:
            continue
        location = f"{path}:{block.line}"
        outcomes.append(_run(location, "doc block", partial(_check_block, block, requests, path)))
    return outcomes


def _check_block(block: CodeBlock, requests: dict[RequestId, str], where: str) -> str:
    value, stripped = _parse_block(block)
    detail = _check_doc_value(value, requests, where)
    return f"{detail} (comments removed)" if stripped else detail


def _run(location: str, source: str, check: Callable[[], str]) -> Outcome:
    try:
        detail = check()
    except LeftOut as exc:
        return Outcome(location=location, source=source, status=Status.LEFT_OUT, detail=str(exc))
    except Exception as exc:  # a decoding failure of any kind is reported, never raised
        return Outcome(
            location=location, source=source, status=Status.FAILED, detail=_describe_error(exc)
        )
    by_shape = _BY_KEYS in detail or _INFERRED in detail
    return Outcome(
        location=location, source=source, status=Status.DECODED, detail=detail, by_shape=by_shape
    )


def _schema_examples(source: SpecSource, revision: str) -> Iterable[Outcome]:
    paths = [
        p
        for p in source.list_files(f"schema/{revision}/examples")
        if p.endswith(".json") and len(PurePosixPath(p).parts) == 5
    ]
    contents = source.read_many(paths)
    for path in paths:
        type_name = PurePosixPath(path).parts[3]

        def check(path: str = path, type_name: str = type_name) -> str:
            try:
                value = json.loads(contents[path])
            except ValueError as exc:
                raise LeftOut(f"not valid JSON ({exc})") from None
            return check_schema_example(type_name, value)

        yield _run(path, "schema example", check)


def check_revision(source: SpecSource, revision: str) -> RevisionReport:
    """Check the schema examples and the documentation code blocks of one revision."""
    outcomes = list(_schema_examples(source, revision))
    docs = [p for p in source.list_files(f"docs/specification/{revision}") if p.endswith(".mdx")]
    for path, data in source.read_many(docs).items():
        outcomes.extend(check_doc_file(path, data.decode("utf-8")))
    return RevisionReport(revision=revision, outcomes=tuple(outcomes))


def check_all(source: SpecSource, revisions: Sequence[str] = REVISIONS) -> list[RevisionReport]:
    """Check every revision in ``revisions``."""
    return [check_revision(source, rev) for rev in revisions]


# --------------------------------------------------------------------------- report


def format_report(reports: Sequence[RevisionReport], *, verbose: bool = False) -> str:
    """The human-readable table: per revision and source, found / decoded (and how many of those
    were typed by their keys) / left out / failed; then every left-out example with its reason
    and every failure with its error (with ``verbose``, what each decoded example became)."""
    header = ("revision", "source", "found", "decoded", "by shape", "left out", "failed")
    rows: list[tuple[str, ...]] = [header]
    totals = [0, 0, 0, 0, 0]
    for report in reports:
        for source in ("schema example", "doc block"):
            numbers = [
                report.found(source),
                report.count(Status.DECODED, source),
                sum(1 for o in report.outcomes if o.by_shape and o.source == source),
                report.count(Status.LEFT_OUT, source),
                report.count(Status.FAILED, source),
            ]
            totals = [a + b for a, b in zip(totals, numbers, strict=True)]
            rows.append((report.revision, source + "s", *map(str, numbers)))
    rows.append(("total", "", *map(str, totals)))
    lines = [
        f"{r[0]:<12} {r[1]:<15} {r[2]:>6} {r[3]:>8} {r[4]:>9} {r[5]:>9} {r[6]:>7}" for r in rows
    ]
    for report in reports:
        shown = [o for o in report.outcomes if verbose or o.status is not Status.DECODED]
        if not shown:
            continue
        lines.append("")
        lines.append(f"== {report.revision}")
        for outcome in shown:
            lines.append(f"  [{outcome.status.value}] {outcome.location}: {outcome.detail}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point: 0 when nothing failed, 1 otherwise, 2 for a bad argument."""
    parser = argparse.ArgumentParser(
        description="Decode every example message of the MCP specification with trio-mcp."
    )
    parser.add_argument("spec", type=Path, help="spec repository: a checkout or a bare git dir")
    parser.add_argument("--rev", default="HEAD", help="git revision to read (bare git dirs)")
    parser.add_argument(
        "--revision",
        action="append",
        choices=REVISIONS,
        help="check only this protocol revision (repeatable)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="show decoded examples too")
    args = parser.parse_args(argv)
    try:
        source = open_source(args.spec, rev=args.rev)
    except FileNotFoundError as exc:
        print(exc, file=sys.stderr)
        return 2
    reports = check_all(source, tuple(args.revision or REVISIONS))
    print(format_report(reports, verbose=args.verbose))
    return 1 if any(r.failures for r in reports) else 0


if __name__ == "__main__":
    sys.exit(main())
