"""What ``trio-mcp call`` adds around a call: ``--arg`` values, a progress bar on a terminal,
elicitation forms asked on the terminal, and ``--save DIR`` for binary content.

- :func:`call_arguments`: ``--args JSON`` first, then each ``--arg KEY=VALUE`` over it (the
  value parsed as JSON when it parses, else kept as a string; the key taken literally).
- :class:`ProgressBar`: one line on stdout, redrawn in place, for each progress notification
  of the call (and an elapsed-time spinner once the call has taken half a second); only when
  stdout is a terminal and the output is not ``--json``. Erased before the result is printed.
- :class:`TerminalElicitation`: the ``elicitation`` callback. It asks each field of a form on
  the terminal (stderr; answers read from stdin), with its type, default and choices, and
  validates the answer; answers given with ``--answer KEY=VALUE`` are used without asking.
  Without a terminal, a form that ``--answer`` does not fill is answered ``cancel`` and the
  refusal is recorded, to be reported naming ``--answer``.
- :func:`save_contents`: images, audio and binary resources of a result written to files in
  a directory, under safe names, never over an existing file.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import json
import math
import mimetypes
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

import attrs
import trio

from ...protocol._types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    EmbeddedResource,
    ImageContent,
    ProgressNotificationParams,
)

__all__ = [
    "ElicitationRefusal",
    "ProgressBar",
    "SavedContent",
    "TerminalElicitation",
    "call_arguments",
    "parse_assignments",
    "save_contents",
]

_CLEAR_LINE = "\r\x1b[2K"
_SPINNER = "|/-\\"
_BAR_WIDTH = 24
#: How long a call runs before the bar shows the elapsed time without any progress.
_QUIET_START = 0.5
_TICK = 0.2
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")
_MAX_NAME = 100


class ArgumentProblem(ValueError):
    """A ``--arg`` / ``--answer`` / ``--args`` value the command line cannot use."""


# --------------------------------------------------------------------------- arguments


def _value(text: str) -> Any:
    """``text`` as JSON when it parses (``5``, ``true``, ``null``, ``[1]``, ``{"a": 1}``,
    ``"5"``), else the string itself."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


def parse_assignments(items: Iterable[str], option: str) -> dict[str, Any]:
    """``KEY=VALUE`` items as a dict (later ones win); the value parsed by :func:`_value`."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise ArgumentProblem(f"{option} takes KEY=VALUE, got {item!r}")
        out[key] = _value(text)
    return out


def call_arguments(args_json: str, assignments: Sequence[str]) -> dict[str, Any]:
    """The arguments of a call: the ``--args`` object, then the ``--arg`` values over it."""
    try:
        value = json.loads(args_json)
    except ValueError as exc:
        raise ArgumentProblem(f"--args is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ArgumentProblem(f"--args must be a JSON object, got {type(value).__name__}")
    return {**value, **parse_assignments(assignments, "--arg")}


# --------------------------------------------------------------------------- progress


@attrs.define
class ProgressBar:
    """The call's progress on one terminal line (see the module docstring)."""

    stdout: TextIO
    label: str
    started: float = attrs.field(factory=trio.current_time)
    last: ProgressNotificationParams | None = None
    drawn: bool = False
    #: While an elicitation is asked, the bar stays erased.
    paused: bool = False
    ticks: int = 0

    def update(self, params: ProgressNotificationParams) -> None:
        """The progress callback of ``rt.call``."""
        self.last = params
        self.draw()

    def line(self) -> str:
        elapsed = f"{trio.current_time() - self.started:.1f} s"
        last = self.last
        if last is None:
            return f"{_SPINNER[self.ticks % len(_SPINNER)]} {self.label}  {elapsed}"
        message = f"  {last.message}" if last.message else ""
        total = last.total
        if total is not None and math.isfinite(total) and total > 0:
            share = min(max(last.progress / total, 0.0), 1.0)
            filled = round(share * _BAR_WIDTH)
            bar = "#" * filled + "-" * (_BAR_WIDTH - filled)
            return f"[{bar}] {share * 100:3.0f}%{message}  {elapsed}"
        spinner = _SPINNER[self.ticks % len(_SPINNER)]
        return f"{spinner} {self.label}: {last.progress:g}{message}  {elapsed}"

    def draw(self) -> None:
        if self.paused:
            return
        self.stdout.write(_CLEAR_LINE + self.line())
        self.stdout.flush()
        self.drawn = True

    def erase(self) -> None:
        if self.drawn:
            self.stdout.write(_CLEAR_LINE)
            self.stdout.flush()
            self.drawn = False

    async def run(self) -> None:
        """Redraw while the call runs (the elapsed time moves); cancelled when it ends."""
        await trio.sleep(_QUIET_START)
        for self.ticks in itertools.count(1):
            self.draw()
            await trio.sleep(_TICK)


# --------------------------------------------------------------------------- elicitation


@attrs.frozen
class ElicitationRefusal:
    """A form the command line could not ask (no terminal) and answered ``cancel``."""

    server: str
    message: str
    missing: tuple[str, ...]


def _kind(schema: Mapping[str, Any]) -> str:
    kind = schema.get("type")
    return kind if isinstance(kind, str) else "string"


def _choices(schema: Mapping[str, Any]) -> list[tuple[Any, str]]:
    """The allowed values of an enum field with their titles (``enum`` + ``enumNames``, or
    ``oneOf``/``anyOf`` of ``const``); for an array, those of its ``items``."""
    if _kind(schema) == "array" and isinstance(schema.get("items"), Mapping):
        return _choices(schema["items"])
    options = schema.get("oneOf") or schema.get("anyOf")
    if isinstance(options, list):
        return [
            (item["const"], str(item.get("title", item["const"])))
            for item in options
            if isinstance(item, Mapping) and "const" in item
        ]
    values = schema.get("enum")
    if isinstance(values, list):
        names = schema.get("enumNames")
        titles = names if isinstance(names, list) and len(names) == len(values) else values
        return [(value, str(title)) for value, title in zip(values, titles, strict=True)]
    return []


def describe_field(name: str, schema: Mapping[str, Any], required: bool) -> str:
    """``title (integer 1..5, required) [default: 3]``: what the prompt of one field says."""
    kind = _kind(schema)
    facts = [kind]
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is not None or high is not None:
        facts[0] += f" {'' if low is None else low}..{'' if high is None else high}"
    if isinstance(schema.get("format"), str):
        facts.append(schema["format"])
    if kind == "boolean":
        facts.append("y/n")
    if kind == "array":
        facts.append("comma-separated")
    if required:
        facts.append("required")
    title = schema.get("title")
    text = f"{name}{f' ({title})' if isinstance(title, str) and title != name else ''}"
    text += f" [{', '.join(facts)}]"
    choices = _choices(schema)
    if choices:
        shown = ", ".join(
            f"{index}) {title}" + (f" = {json.dumps(value)}" if str(value) != title else "")
            for index, (value, title) in enumerate(choices, 1)
        )
        text += f" one of: {shown}"
    if "default" in schema:
        text += f" (default: {json.dumps(schema['default'], ensure_ascii=False)})"
    description = schema.get("description")
    if isinstance(description, str) and description:
        text += f" - {' '.join(description.split())}"
    return text


def _one(text: str, schema: Mapping[str, Any]) -> Any:
    """One typed value from an answer's text, or :class:`ArgumentProblem` saying why not."""
    kind = _kind(schema)
    choices = _choices(schema)
    if choices:
        for index, (value, title) in enumerate(choices, 1):
            if text in (str(index), str(value), title):
                return value
        allowed = ", ".join(str(value) for value, _ in choices)
        raise ArgumentProblem(f"not one of the choices ({allowed})")
    if kind == "boolean":
        lowered = text.strip().lower()
        if lowered in ("y", "yes", "true", "1"):
            return True
        if lowered in ("n", "no", "false", "0"):
            return False
        raise ArgumentProblem("answer yes or no")
    if kind in ("integer", "number"):
        try:
            number: float = int(text) if kind == "integer" else float(text)
        except ValueError:
            what = "an integer" if kind == "integer" else "a number"
            raise ArgumentProblem(f"not {what}") from None
        if not math.isfinite(number):
            raise ArgumentProblem("not a finite number")
        return check_value(number, schema)
    return check_value(text, schema)


def check_value(value: Any, schema: Mapping[str, Any]) -> Any:
    """``value`` when it fits the field's ``schema`` (type, choices, bounds, lengths), else
    :class:`ArgumentProblem`."""
    kind = _kind(schema)
    choices = _choices(schema)
    if kind == "array":
        if not isinstance(value, list):
            raise ArgumentProblem("must be a list")
        if choices:
            allowed = [v for v, _ in choices]
            wrong = [item for item in value if item not in allowed]
            if wrong:
                raise ArgumentProblem(f"not among the choices: {', '.join(map(str, wrong))}")
        return value
    if choices and value not in [v for v, _ in choices]:
        raise ArgumentProblem(f"not one of the choices ({', '.join(str(v) for v, _ in choices)})")
    expected = {
        "string": (str,),
        "boolean": (bool,),
        "integer": (int,),
        "number": (int, float),
    }.get(kind, (object,))
    if not isinstance(value, expected) or (kind != "boolean" and isinstance(value, bool)):
        raise ArgumentProblem(f"must be a {kind}")
    if isinstance(value, int | float) and not isinstance(value, bool):
        low, high = schema.get("minimum"), schema.get("maximum")
        if isinstance(low, int | float) and value < low:
            raise ArgumentProblem(f"must be at least {low}")
        if isinstance(high, int | float) and value > high:
            raise ArgumentProblem(f"must be at most {high}")
    if isinstance(value, str):
        shortest, longest = schema.get("minLength"), schema.get("maxLength")
        if isinstance(shortest, int) and len(value) < shortest:
            raise ArgumentProblem(f"must be at least {shortest} characters")
        if isinstance(longest, int) and len(value) > longest:
            raise ArgumentProblem(f"must be at most {longest} characters")
    return value


def parse_answer(text: str, schema: Mapping[str, Any]) -> Any:
    """The typed value of one answer typed on the terminal."""
    if _kind(schema) == "array":
        return check_value([_one(part.strip(), schema) for part in text.split(",")], schema)
    return _one(text, schema)


@attrs.define
class TerminalElicitation:
    """The ``elicitation`` callback of ``trio-mcp call`` (see the module docstring)."""

    stdin: TextIO
    stderr: TextIO
    answers: Mapping[str, Any] = attrs.field(factory=dict)
    progress: ProgressBar | None = None
    refusals: list[ElicitationRefusal] = attrs.field(factory=list)
    #: Every form asked, with the action answered (for ``--json``).
    asked: list[dict[str, Any]] = attrs.field(factory=list)

    @property
    def terminal(self) -> bool:
        isatty = getattr(self.stdin, "isatty", None)
        return bool(isatty and isatty())

    async def __call__(
        self, server: str, params: ElicitRequestFormParams | ElicitRequestURLParams
    ) -> Mapping[str, Any]:
        if isinstance(params, ElicitRequestURLParams):  # not declared: never asked
            return self._record(server, params.message, {"action": "decline"})
        schema = params.requested_schema
        fields = schema.get("properties")
        fields = fields if isinstance(fields, Mapping) else {}
        required = [name for name in schema.get("required") or () if name in fields]
        content: dict[str, Any] = {}
        missing: list[str] = []
        for name, field in fields.items():
            field = field if isinstance(field, Mapping) else {}
            if name in self.answers:
                try:
                    content[name] = check_value(self.answers[name], field)
                    continue
                except ArgumentProblem as exc:
                    if not self.terminal:
                        self._say(f"--answer {name}: {exc}")
            if name in required or not self.terminal:
                missing.append(name)
        unanswerable = [name for name in missing if name in required]
        if not self.terminal:
            if unanswerable:
                self.refusals.append(ElicitationRefusal(server, params.message, tuple(missing)))
                return self._record(server, params.message, {"action": "cancel"})
            for name, field in fields.items():
                if name not in content and isinstance(field, Mapping) and "default" in field:
                    content[name] = field["default"]
            return self._record(server, params.message, {"action": "accept", "content": content})
        if all(name in content for name in required) and self.answers:
            return self._record(server, params.message, {"action": "accept", "content": content})
        return await self._ask(server, params.message, fields, required, content)

    async def _ask(
        self,
        server: str,
        message: str,
        fields: Mapping[str, Any],
        required: Sequence[str],
        content: dict[str, Any],
    ) -> Mapping[str, Any]:
        if self.progress is not None:
            self.progress.erase()
            self.progress.paused = True
        try:
            self._say(f"the server {server!r} asks: {message}")
            for name, field in fields.items():
                if name in content:
                    continue
                field = field if isinstance(field, Mapping) else {}
                while True:
                    text = await self._read(f"  {describe_field(name, field, name in required)}: ")
                    if text is None:  # end of input (Ctrl-D): cancelled
                        return self._record(server, message, {"action": "cancel"})
                    text = text.strip()
                    if not text:
                        if "default" in field:
                            content[name] = field["default"]
                        elif name in required:
                            self._say(f"{name} is required")
                            continue
                        break
                    try:
                        content[name] = parse_answer(text, field)
                    except ArgumentProblem as exc:
                        self._say(f"{name}: {exc}; try again")
                        continue
                    break
            answer = await self._read("Send these answers? [Y/n] ")
            if answer is None:
                return self._record(server, message, {"action": "cancel"})
            if answer.strip().lower() in ("n", "no"):
                return self._record(server, message, {"action": "decline"})
            return self._record(server, message, {"action": "accept", "content": content})
        finally:
            if self.progress is not None:
                self.progress.paused = False

    def _record(self, server: str, message: str, result: dict[str, Any]) -> dict[str, Any]:
        self.asked.append({"server": server, "message": message, "action": result["action"]})
        return result

    def _say(self, text: str) -> None:
        print(f"trio-mcp: {text}", file=self.stderr, flush=True)

    async def _read(self, prompt: str) -> str | None:
        self.stderr.write(prompt)
        self.stderr.flush()
        line = await trio.to_thread.run_sync(self.stdin.readline, abandon_on_cancel=True)
        return line if line else None


# --------------------------------------------------------------------------- --save


@attrs.frozen
class SavedContent:
    """One content block written to a file."""

    index: int
    path: str
    mime_type: str | None
    size: int


def _safe_name(text: str) -> str:
    name = _SAFE.sub("_", text).strip("._")
    return name[:_MAX_NAME] or "content"


#: Media types whose extension the system's table may not know (or guesses oddly).
_EXTENSIONS = {
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/gif": ".gif",
    "image/webp": ".webp",
    "image/svg+xml": ".svg",
    "audio/wav": ".wav",
    "audio/x-wav": ".wav",
    "audio/mpeg": ".mp3",
    "audio/ogg": ".ogg",
    "audio/webm": ".webm",
    "application/pdf": ".pdf",
}


def _extension(mime_type: str | None) -> str:
    if not mime_type:
        return ".bin"
    kind = mime_type.partition(";")[0].strip().lower()
    return _EXTENSIONS.get(kind) or mimetypes.guess_extension(kind) or ".bin"


def _create(directory: Path, stem: str, suffix: str, data: bytes) -> Path:
    """Write ``data`` to ``directory/stem+suffix``, or ``stem-1+suffix``... : the first name
    that does not exist (``O_EXCL``: an existing file is never replaced)."""
    for attempt in itertools.count():
        path = directory / (f"{stem}{suffix}" if attempt == 0 else f"{stem}-{attempt}{suffix}")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        return path
    raise AssertionError("unreachable")


def save_contents(
    result: CallToolResult, directory: Path, stem: str
) -> tuple[dict[int, SavedContent], list[str]]:
    """Write each image, audio clip and binary resource of ``result`` into ``directory``
    (created if missing). Names: the resource's own file name when its URI has one, else
    ``<stem>-<index>.<extension of its type>``, made safe; a name that exists gets ``-1``,
    ``-2``... Returns what was saved, by block index, and a problem per block that could not
    be (its base64 is broken)."""
    directory.mkdir(parents=True, exist_ok=True)
    saved: dict[int, SavedContent] = {}
    problems: list[str] = []
    for index, block in enumerate(result.content):
        mime: str | None
        if isinstance(block, ImageContent | AudioContent):
            data, mime, name = block.data, block.mime_type, ""
        elif isinstance(block, EmbeddedResource) and isinstance(
            block.resource, BlobResourceContents
        ):
            data, mime = block.resource.blob, block.resource.mime_type
            name = block.resource.uri.rstrip("/").rpartition("/")[2].partition("?")[0]
        else:
            continue
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            problems.append(f"content block {index}: not valid base64, not saved")
            continue
        if name and "." in name.strip("."):
            base, dot, suffix = _safe_name(name).rpartition(".")
            stem_of, suffix_of = (base, dot + suffix) if base else (suffix, _extension(mime))
        else:
            stem_of, suffix_of = _safe_name(f"{stem}-{index}"), _extension(mime)
        path = _create(directory, stem_of, suffix_of, raw)
        saved[index] = SavedContent(index=index, path=str(path), mime_type=mime, size=len(raw))
    return saved, problems
