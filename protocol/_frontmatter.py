"""A ``SKILL.md``'s YAML frontmatter, read and compared field by field with a skill's entry.

The skills extension has a host parse the frontmatter of every ``SKILL.md`` it fetches and
compare it, field by field, with the ``frontmatter`` object of the skill's entry (which the
server renders from the same YAML as JSON); any difference is a verification failure.
:func:`frontmatter_differences` does that and names every field that differs.

Reading: with PyYAML installed (the ``trio-mcp[yaml]`` extra) the frontmatter is *composed*
(``yaml.compose`` with the safe loader: a tree of nodes, nothing constructed, no tag
executed; aliases are followed within :data:`MAX_NODES` nodes and :data:`MAX_DEPTH` levels).
Without it a small reader of the YAML that frontmatter uses is used: block mappings and
sequences by indentation, ``key: value`` pairs, plain scalars (continued on more indented
lines), single- and double-quoted scalars, literal (``|``) and folded (``>``) blocks, flow
sequences and mappings (``[a, b]``, ``{k: v}``) and comments; anchors, aliases, tags and
complex keys are refused with a reason. Neither imports anything at module level.

Comparing: a quoted or block scalar is a string and must equal the entry's string. A plain
scalar is compared by what it can mean: the entry's value matches when it is the same
string, or the null, boolean or number the plain text spells (YAML 1.1 and 1.2 spellings
alike: ``yes``, ``True``, ``0x1F``...), so that a server rendering with another YAML schema
is not refused; anything else differs. Mappings must have the same keys, sequences the same
length, each item compared the same way.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, Final

__all__ = [
    "MAX_DEPTH",
    "MAX_NODES",
    "FrontmatterError",
    "Plain",
    "field_differences",
    "frontmatter_block",
    "frontmatter_differences",
    "read_frontmatter",
    "same",
]

#: The most nodes (scalars, sequences, mappings, aliases followed) a frontmatter may have.
MAX_NODES: Final = 10_000
#: The deepest nesting of a frontmatter.
MAX_DEPTH: Final = 64


class Plain(str):
    """A plain (unquoted) YAML scalar: its meaning depends on the schema (see the module)."""

    __slots__ = ()


class FrontmatterError(ValueError):
    """The frontmatter cannot be read; the message says why."""


def frontmatter_block(text: str) -> str | None:
    """The YAML between the opening ``---`` line of ``text`` and the next ``---`` (or
    ``...``) line, or None when ``text`` does not start with such a block."""
    lines = text.removeprefix("\ufeff").splitlines()
    if not lines or lines[0].rstrip() != "---":
        return None
    for index in range(1, len(lines)):
        if lines[index].rstrip() in ("---", "..."):
            return "\n".join(lines[1:index])
    return None


def read_frontmatter(yaml_text: str, *, use_pyyaml: bool | None = None) -> dict[str, Any]:
    """The frontmatter ``yaml_text`` as nested dicts, lists, strings and :class:`Plain`
    scalars. ``use_pyyaml``: None uses PyYAML when it is installed, True requires it (raises
    ``ImportError`` without it), False uses the small reader. Raises
    :class:`FrontmatterError` for what cannot be read, or is not a mapping."""
    if use_pyyaml is None or use_pyyaml:
        try:
            import yaml
        except ImportError:
            if use_pyyaml:
                raise
        else:
            return _via_pyyaml(yaml, yaml_text)
    value = _Reader(yaml_text).document()
    if not isinstance(value, dict):
        raise FrontmatterError("it is not a mapping of fields")
    return value


def field_differences(found: Mapping[str, Any], frontmatter: Mapping[str, Any]) -> tuple[str, ...]:
    """One line per field in which the read frontmatter ``found`` (from
    :func:`read_frontmatter`) and the entry's ``frontmatter`` differ: a field that differs
    (``"description: the SKILL.md says 'x' where the entry says 'y'"``), is missing from one
    of them, or is extra; in key order. Empty when they match."""
    out = []
    for key in sorted(set(found) | set(frontmatter)):
        if key not in found:
            out.append(
                f"{key}: the SKILL.md does not have it; the entry says {_show(frontmatter[key])}"
            )
        elif key not in frontmatter:
            out.append(f"{key}: the SKILL.md says {_show(found[key])}; the entry does not have it")
        elif not same(found[key], frontmatter[key]):
            out.append(
                f"{key}: the SKILL.md says {_show(found[key])} where the entry says "
                f"{_show(frontmatter[key])}"
            )
    return tuple(out)


def frontmatter_differences(
    text: str, frontmatter: Mapping[str, Any], *, use_pyyaml: bool | None = None
) -> tuple[str, ...]:
    """Every way the frontmatter of the fetched ``SKILL.md`` ``text`` differs from the entry's
    ``frontmatter`` (:func:`field_differences`), or the one reason it cannot be read (no
    ``---`` block, YAML that cannot be read). Empty when they match."""
    block = frontmatter_block(text)
    if block is None:
        return ("it does not start with a YAML frontmatter block (---)",)
    try:
        found = read_frontmatter(block, use_pyyaml=use_pyyaml)
    except FrontmatterError as exc:
        return (f"its frontmatter cannot be read: {exc}",)
    return field_differences(found, frontmatter)


def _show(value: Any) -> str:
    text = repr(str(value) if isinstance(value, Plain) else value)
    return text if len(text) <= 80 else text[:77] + "..."


# --------------------------------------------------------------------------- comparing

_NULLS: Final = frozenset({"", "~", "null", "Null", "NULL"})
_TRUE: Final = frozenset({"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"})
_FALSE: Final = frozenset({"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"})
_INT: Final = re.compile(r"[-+]?(0|[1-9][0-9_]*)")
_FLOAT: Final = re.compile(r"[-+]?(\.[0-9]+|[0-9][0-9_]*(\.[0-9_]*)?)([eE][-+]?[0-9]+)?")
_INF: Final = frozenset({".inf", ".Inf", ".INF"})
_NAN: Final = frozenset({".nan", ".NaN", ".NAN"})


def _number(text: str) -> int | float | None:
    """The number a plain scalar spells, or None."""
    if _INT.fullmatch(text):
        return int(text.replace("_", ""))
    for prefix, base in (("0x", 16), ("0o", 8), ("0b", 2)):
        body = text.lstrip("+-")
        if body.lower().startswith(prefix):
            try:
                value = int(body[2:].replace("_", ""), base)
            except ValueError:
                return None
            return -value if text.startswith("-") else value
    if _FLOAT.fullmatch(text):
        return float(text.replace("_", ""))
    sign = -1.0 if text.startswith("-") else 1.0
    if text.lstrip("+-") in _INF:
        return sign * math.inf
    if text in _NAN:
        return math.nan
    return None


def _plain_matches(text: str, value: Any) -> bool:
    if isinstance(value, str):
        return value == text
    if value is None:
        return text in _NULLS
    if isinstance(value, bool):
        return text in (_TRUE if value else _FALSE)
    if isinstance(value, int | float):
        number = _number(text)
        if number is None:
            return False
        if isinstance(number, float) and math.isnan(number):
            return isinstance(value, float) and math.isnan(value)
        return number == value
    return False


def same(found: Any, value: Any) -> bool:
    """Whether the frontmatter's ``found`` (from :func:`read_frontmatter`) and the entry's
    JSON ``value`` are the same field (see the module docstring)."""
    if isinstance(found, Plain):
        return _plain_matches(str(found), value)
    if isinstance(found, str):
        return isinstance(value, str) and value == found
    if isinstance(found, list):
        return (
            isinstance(value, list | tuple)
            and len(value) == len(found)
            and all(same(a, b) for a, b in zip(found, value, strict=True))
        )
    if isinstance(found, dict):
        return (
            isinstance(value, Mapping)
            and set(found) == set(value)
            and all(same(found[key], value[key]) for key in found)
        )
    return False


# --------------------------------------------------------------------------- PyYAML


def _via_pyyaml(yaml: Any, text: str) -> dict[str, Any]:
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        raise FrontmatterError(f"it is not valid YAML ({str(exc).splitlines()[0]})") from None
    if node is None:
        return {}
    budget = [MAX_NODES]
    value = _from_node(yaml, node, budget, 0)
    if not isinstance(value, dict):
        raise FrontmatterError("it is not a mapping of fields")
    return value


def _from_node(yaml: Any, node: Any, budget: list[int], depth: int) -> Any:
    budget[0] -= 1
    if budget[0] < 0:
        raise FrontmatterError(f"it has more than {MAX_NODES:,} nodes")
    if depth > MAX_DEPTH:
        raise FrontmatterError(f"it is nested deeper than {MAX_DEPTH} levels")
    if isinstance(node, yaml.ScalarNode):
        return Plain(node.value) if node.style is None else str(node.value)
    if isinstance(node, yaml.SequenceNode):
        return [_from_node(yaml, item, budget, depth + 1) for item in node.value]
    out: dict[str, Any] = {}
    for key_node, value_node in node.value:
        key = _from_node(yaml, key_node, budget, depth + 1)
        if not isinstance(key, str):
            raise FrontmatterError("it has a key that is not a scalar")
        if str(key) in out:
            raise FrontmatterError(f"it has the key {str(key)[:40]!r} twice")
        out[str(key)] = _from_node(yaml, value_node, budget, depth + 1)
    return out


# --------------------------------------------------------------------------- the small reader

_BLOCK: Final = re.compile(r"([|>])([-+]?)([1-9]?)([-+]?)\s*(#.*)?")
_ESCAPES: Final = {
    "0": "\0",
    "a": "\a",
    "b": "\b",
    "t": "\t",
    "\t": "\t",
    "n": "\n",
    "v": "\v",
    "f": "\f",
    "r": "\r",
    "e": "\x1b",
    " ": " ",
    '"': '"',
    "/": "/",
    "\\": "\\",
    "N": "\x85",
    "_": "\xa0",
    "L": "\u2028",
    "P": "\u2029",
}


def _split_key(content: str) -> tuple[str, str] | None:
    """``content`` as the key of a ``key: value`` line and what follows the colon, or None
    when it is not such a line."""
    if content[:1] in ("'", '"'):
        try:
            key, after = _quoted(content)
        except FrontmatterError:
            return None
        after = after.lstrip(" ")
        if after[:1] == ":" and after[1:2] in ("", " "):
            return key, after[1:]
        return None
    if not content or content[0] in "#,[]{}&*!|>%@`" or content.startswith(("- ", "? ")):
        return None
    if content == "-":
        return None
    match = re.search(r":( |$)", content)
    if match is None or " #" in content[: match.start()]:
        return None
    return content[: match.start()].strip(), content[match.end() :]


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _blank(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped.startswith("#")


def _uncomment(text: str) -> str:
    """A plain scalar's text without a trailing `` #`` comment."""
    match = re.search(r"\s#", text)
    return (text[: match.start()] if match else text).strip()


def _double(body: str) -> str:
    out: list[str] = []
    index = 0
    while index < len(body):
        char = body[index]
        if char != "\\":
            out.append(char)
            index += 1
            continue
        code = body[index + 1 : index + 2]
        if code in _ESCAPES:
            out.append(_ESCAPES[code])
            index += 2
            continue
        width = {"x": 2, "u": 4, "U": 8}.get(code)
        digits = body[index + 2 : index + 2 + width] if width else ""
        if (
            width is None
            or len(digits) != width
            or not all(c in "0123456789abcdefABCDEF" for c in digits)
        ):
            raise FrontmatterError(f"it has an unknown escape \\{code} in a double-quoted string")
        out.append(chr(int(digits, 16)))
        index += 2 + width
    return "".join(out)


def _quoted(text: str) -> tuple[str, str]:
    """The quoted scalar at the start of ``text``, and what follows it."""
    quote = text[0]
    index = 1
    while index < len(text):
        char = text[index]
        if quote == "'" and char == "'":
            if text[index + 1 : index + 2] == "'":
                index += 2
                continue
            return text[1:index].replace("''", "'"), text[index + 1 :]
        if quote == '"' and char == "\\":
            index += 2
            continue
        if quote == '"' and char == '"':
            return _double(text[1:index]), text[index + 1 :]
        index += 1
    raise FrontmatterError("it has a quoted string that does not end on its line")


class _Reader:
    """The small reader (see the module docstring): one pass over the lines."""

    def __init__(self, text: str) -> None:
        self.lines = text.replace("\t", "    ").splitlines()
        self.index = 0
        self.nodes = 0

    def _count(self, depth: int) -> None:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise FrontmatterError(f"it has more than {MAX_NODES:,} nodes")
        if depth > MAX_DEPTH:
            raise FrontmatterError(f"it is nested deeper than {MAX_DEPTH} levels")

    def _skip_blank(self) -> None:
        while self.index < len(self.lines) and _blank(self.lines[self.index]):
            self.index += 1

    def document(self) -> Any:
        self._skip_blank()
        if self.index >= len(self.lines):
            return {}
        value = self._block(_indent(self.lines[self.index]), 0)
        self._skip_blank()
        if self.index < len(self.lines):
            raise FrontmatterError(
                f"its line {self.index + 1} ({self.lines[self.index].strip()[:40]!r}) is not "
                "where the indentation allows"
            )
        return value

    def _block(self, indent: int, depth: int) -> Any:
        """The block node whose lines start at column ``indent``."""
        self._count(depth)
        line = self.lines[self.index]
        content = line[indent:]
        if content.startswith(("&", "*", "!", "? ", "%")):
            raise FrontmatterError(
                f"its line {self.index + 1} uses anchors, aliases, tags or complex keys, which "
                "this client reads only with PyYAML installed (trio-mcp[yaml])"
            )
        if content == "-" or content.startswith("- "):
            return self._sequence(indent, depth)
        if _split_key(content) is not None:
            return self._mapping(indent, depth)
        raise FrontmatterError(f"its line {self.index + 1} is neither 'key: value' nor '- item'")

    def _mapping(self, indent: int, depth: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        while True:
            self._skip_blank()
            if self.index >= len(self.lines):
                return out
            line = self.lines[self.index]
            if _indent(line) < indent:
                return out
            if _indent(line) > indent:
                raise FrontmatterError(f"its line {self.index + 1} is indented more than its field")
            split = _split_key(line[indent:])
            if split is None:
                if line[indent:].startswith("- "):
                    return out
                raise FrontmatterError(f"its line {self.index + 1} is not 'key: value'")
            key, rest = split
            if key in out:
                raise FrontmatterError(f"it has the key {key[:40]!r} twice")
            self.index += 1
            out[key] = self._value(rest, indent, depth + 1, in_mapping=True)

    def _sequence(self, indent: int, depth: int) -> list[Any]:
        out: list[Any] = []
        while True:
            self._skip_blank()
            if self.index >= len(self.lines):
                return out
            line = self.lines[self.index]
            content = line[indent:]
            if _indent(line) != indent or not (content == "-" or content.startswith("- ")):
                if _indent(line) > indent:
                    raise FrontmatterError(f"its line {self.index + 1} is indented oddly")
                return out
            rest = content[2:] if content.startswith("- ") else ""
            stripped = rest.lstrip(" ")
            if _split_key(stripped) is not None:
                # "- key: value": a mapping whose first line starts after the dash
                column = indent + 2 + (len(rest) - len(stripped))
                self.lines[self.index] = " " * column + stripped
                out.append(self._block(column, depth + 1))
                continue
            self.index += 1
            out.append(self._value(rest, indent, depth + 1, in_mapping=False))

    def _value(self, rest: str, indent: int, depth: int, *, in_mapping: bool) -> Any:
        """The value after ``key:`` or ``-`` (``rest``), the node's own column ``indent``."""
        self._count(depth)
        text = rest.strip()
        if text.startswith(("&", "*", "!")):
            raise FrontmatterError(
                f"its line {self.index} uses anchors, aliases or tags, which this client reads "
                "only with PyYAML installed (trio-mcp[yaml])"
            )
        if not text or text.startswith("#"):
            self._skip_blank()
            if self.index < len(self.lines):
                line = self.lines[self.index]
                nested = _indent(line)
                is_item = line[nested:] == "-" or line[nested:].startswith("- ")
                if nested > indent or (in_mapping and nested == indent and is_item):
                    return self._block(nested, depth)
            return Plain("")
        block = _BLOCK.fullmatch(text)
        if block is not None:
            return self._block_scalar(block, indent)
        if text[0] in "'\"":
            value, after = _quoted(text)
            if _uncomment(after):
                raise FrontmatterError(f"its line {self.index} has text after a quoted string")
            return value
        if text[0] in "[{":
            return self._flow(text, indent, depth)
        return self._plain(text, indent)

    def _plain(self, text: str, indent: int) -> Plain:
        """A plain scalar, with its continuation lines (more indented) folded in."""
        parts = [_uncomment(text)]
        while self.index < len(self.lines):
            line = self.lines[self.index]
            if _blank(line) or _indent(line) <= indent:
                break
            if _split_key(line.strip()) is not None:
                raise FrontmatterError(f"its line {self.index + 1} is indented more than its field")
            parts.append(_uncomment(line))
            self.index += 1
        return Plain(" ".join(parts))

    def _block_scalar(self, header: re.Match[str], indent: int) -> str:
        style = header.group(1)
        chomp = header.group(2) or header.group(4)
        explicit = header.group(3)
        body: list[str] = []
        column: int | None = indent + int(explicit) if explicit else None
        while self.index < len(self.lines):
            line = self.lines[self.index]
            if line.strip() and _indent(line) <= indent:
                break
            if line.strip() and column is None:
                column = _indent(line)
            body.append(line[column:] if column is not None and line.strip() else "")
            self.index += 1
        trailing = 0
        while body and not body[-1]:
            body.pop()
            trailing += 1
        if style == "|":
            text = "\n".join(body)
        else:
            text = _fold(body)
        if body and chomp != "-":
            text += "\n" * (1 + (trailing if chomp == "+" else 0))
        return text

    def _flow(self, text: str, indent: int, depth: int) -> Any:
        """A flow sequence or mapping, on one or more lines."""
        source = _uncomment_flow(text)
        while _open_brackets(source) > 0 and self.index < len(self.lines):
            line = self.lines[self.index]
            if _indent(line) <= indent and line.strip():
                break
            source += " " + _uncomment_flow(line.strip())
            self.index += 1
        value, after = _Flow(source, self, depth).parse()
        if after.strip():
            raise FrontmatterError(f"its line {self.index} has text after a flow collection")
        return value


def _fold(lines: list[str]) -> str:
    """The lines of a folded (``>``) block joined: a single break between two lines of text
    becomes a space, each empty line a newline; breaks around more-indented lines stay."""
    text = ""
    empty = 0
    previous: str | None = None
    for part in lines:
        if not part:
            empty += 1
            continue
        if previous is None:
            text = "\n" * empty + part
        elif not previous.startswith(" ") and not part.startswith(" "):
            text += (" " if empty == 0 else "\n" * empty) + part
        else:
            text += "\n" * (empty + 1) + part
        previous, empty = part, 0
    return text


def _uncomment_flow(text: str) -> str:
    """``text`` without a trailing comment (a ``#`` after a space, outside quotes)."""
    quote: str | None = None
    for index, char in enumerate(text):
        if quote:
            if char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or text[index - 1] in " \t"):
            return text[:index].rstrip()
    return text


def _open_brackets(text: str) -> int:
    depth = 0
    quote: str | None = None
    for char in text:
        if quote:
            if char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
    return depth


class _Flow:
    """A flow collection (``[a, "b", {k: v}]``) from one string."""

    def __init__(self, text: str, reader: _Reader, depth: int) -> None:
        self.text = text
        self.pos = 0
        self.reader = reader
        self.depth = depth

    def parse(self) -> tuple[Any, str]:
        value = self._node(self.depth)
        return value, self.text[self.pos :]

    def _space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in " \t":
            self.pos += 1

    def _node(self, depth: int) -> Any:
        self.reader._count(depth)
        self._space()
        char = self.text[self.pos : self.pos + 1]
        if char == "[":
            self.pos += 1
            items: list[Any] = []
            while True:
                self._space()
                if self.text[self.pos : self.pos + 1] == "]":
                    self.pos += 1
                    return items
                items.append(self._node(depth + 1))
                if not self._separator("]"):
                    return items
        if char == "{":
            self.pos += 1
            out: dict[str, Any] = {}
            while True:
                self._space()
                if self.text[self.pos : self.pos + 1] == "}":
                    self.pos += 1
                    return out
                key = self._node(depth + 1)
                if not isinstance(key, str):
                    raise FrontmatterError("it has a flow mapping key that is not a scalar")
                self._space()
                value: Any = Plain("")
                if self.text[self.pos : self.pos + 1] == ":":
                    self.pos += 1
                    value = self._node(depth + 1)
                if str(key) in out:
                    raise FrontmatterError(f"it has the key {str(key)[:40]!r} twice")
                out[str(key)] = value
                if not self._separator("}"):
                    return out
        if char in ("'", '"'):
            value, after = _quoted(self.text[self.pos :])
            self.pos = len(self.text) - len(after)
            return value
        if char in ("&", "*", "!"):
            raise FrontmatterError(
                "it uses anchors, aliases or tags, which this client reads only with PyYAML "
                "installed (trio-mcp[yaml])"
            )
        match = re.compile(r"[^,\[\]{}:]*(?::(?![\s,\]}])[^,\[\]{}:]*)*").match(self.text, self.pos)
        assert match is not None  # the pattern matches the empty string
        self.pos = match.end()
        return Plain(match.group(0).strip())

    def _separator(self, close: str) -> bool:
        """Past a ``,`` (True) or the closing bracket (False); anything else is an error."""
        self._space()
        char = self.text[self.pos : self.pos + 1]
        if char == ",":
            self.pos += 1
            return True
        if char == close:
            self.pos += 1
            return False
        raise FrontmatterError(f"it has a flow collection that is not closed with {close!r}")
