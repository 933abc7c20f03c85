"""Tool shaping rules: how the host wants a server's tool to look to the model.

A :class:`ToolShape` renames a tool, rewrites its description, and shapes its arguments
(:class:`ArgumentShape`): rename one, rewrite its description, give it a default, or hide it
(with a fixed value that is sent on every call, or, for an optional argument, never sent). The
rules live on :attr:`ServerConfig.tool_shapes <trio_mcp.actors.config.ServerConfig.tool_shapes>`,
keyed by the server's own tool name, in code or under ``tools`` in either configuration file
shape (:func:`parse_tool_shapes` reads that table).

These are plain values; applying them to a listing, and mapping a call back to what the server
expects, is :mod:`trio_mcp.actors.runtime._shaping`'s job.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

import attrs

from ._redact import REDACTED

__all__ = [
    "NO_DEFAULT",
    "ArgumentShape",
    "ToolShape",
    "parse_tool_shapes",
    "shape_view",
    "tool_shape_problems",
]


class _NoDefault:
    """The type of :data:`NO_DEFAULT`."""

    _instance: _NoDefault | None = None

    def __new__(cls) -> _NoDefault:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NO_DEFAULT"

    def __bool__(self) -> bool:
        return False


#: An argument without a default given by the host (``None`` is a default: JSON ``null``).
NO_DEFAULT: Final = _NoDefault()


@attrs.frozen(kw_only=True)
class ArgumentShape:
    """How one argument of a tool looks to the model.

    ``name``: the name the model uses (the server still gets its own). ``description``: replaces
    the argument's description. ``default``: a JSON value; the argument becomes optional for the
    model and the value is sent when the model leaves it out. ``hide``: the model does not see
    the argument at all; with a ``default`` that value is sent on every call (a fixed value the
    model cannot change), without one the argument is never sent (only for an argument the tool
    does not require)."""

    name: str | None = None
    description: str | None = None
    default: Any = NO_DEFAULT
    hide: bool = False

    @property
    def has_default(self) -> bool:
        """Whether the host gave a default (or, with ``hide``, a fixed value)."""
        return self.default is not NO_DEFAULT


def _arguments(value: Mapping[str, ArgumentShape]) -> Mapping[str, ArgumentShape]:
    return MappingProxyType(dict(value))


@attrs.frozen(kw_only=True)
class ToolShape:
    """How one tool of a server looks to the model: ``name`` (the tool's new name, which the
    registered name ``mcp_<server>_<name>`` is made of), ``description`` (replaces the server's)
    and ``arguments`` (the server's argument name -> :class:`ArgumentShape`)."""

    name: str | None = None
    description: str | None = None
    arguments: Mapping[str, ArgumentShape] = attrs.field(factory=dict, converter=_arguments)


_TOOL_KEYS: Final = ("name", "description", "arguments")
_ARGUMENT_KEYS: Final = ("name", "description", "default", "hide")


Path = tuple[str, ...]


def tool_shape_problems(shapes: Any) -> list[tuple[str, str]]:
    """What is wrong with shaping rules as values (names must be non-empty strings, defaults
    JSON values, ``hide`` a boolean, a hidden argument has no name or description), as
    ``(key, message)`` pairs, the key as the file shapes spell it
    (``tools.<tool>.arguments.<argument>.default``). Whether a rule fits a tool is only known
    once the server lists it (a rule that does not fit refuses that tool, with the reason).
    Never fails."""
    return [(".".join(path), message) for path, message in _problems(shapes)]


def _problems(shapes: Any) -> list[tuple[Path, str]]:
    found: list[tuple[Path, str]] = []
    if not isinstance(shapes, Mapping):
        return [(("tools",), f"tool shapes must map tool names to ToolShape, got {_kind(shapes)}")]
    for tool, shape in shapes.items():
        if not isinstance(tool, str) or not tool:
            found.append((("tools",), f"a key of tools must be a tool name, got {tool!r}"))
            continue
        at = ("tools", tool)
        where = f"tools.{tool}"
        if not isinstance(shape, ToolShape):
            found.append((at, f"{where}: expected a ToolShape, got {_kind(shape)}"))
            continue
        for key in ("name", "description"):
            value = getattr(shape, key)
            if value is not None and (not isinstance(value, str) or not value):
                found.append(((*at, key), f"{where}.{key} must be a non-empty string"))
        arguments: Mapping[Any, Any] = shape.arguments
        for argument, rule in arguments.items():
            if not isinstance(argument, str) or not argument:
                found.append(
                    ((*at, "arguments"), f"{where}.arguments: a key must be an argument name")
                )
                continue
            here = (*at, "arguments", argument)
            named = f"{where}.arguments.{argument}"
            if not isinstance(rule, ArgumentShape):
                found.append((here, f"{named}: expected an ArgumentShape, got {_kind(rule)}"))
                continue
            for key in ("name", "description"):
                value = getattr(rule, key)
                if value is not None and (not isinstance(value, str) or not value):
                    found.append(((*here, key), f"{named}.{key} must be a non-empty string"))
            hide: object = rule.hide
            if not isinstance(hide, bool):
                found.append(((*here, "hide"), f"{named}.hide must be true or false"))
            elif rule.hide and (rule.name is not None or rule.description is not None):
                found.append((here, f"{named}: a hidden argument takes no name or description"))
            if rule.has_default:
                try:
                    json.dumps(rule.default, allow_nan=False)
                except (TypeError, ValueError) as exc:
                    found.append(
                        ((*here, "default"), f"{named}.default is not a JSON value ({exc})")
                    )
    return found


def parse_tool_shapes(data: Any) -> tuple[dict[str, ToolShape], list[tuple[Path, str]]]:
    """The ``tools`` table of a server entry of a configuration file: tool name ->
    ``{"name", "description", "arguments": {argument: {"name", "description", "default",
    "hide"}}}``. Returns the rules and the problems as ``(key path under the entry, message)``
    pairs; a tool's rule with a problem is left out. Never fails."""
    problems: list[tuple[Path, str]] = []
    shapes: dict[str, ToolShape] = {}
    if not isinstance(data, Mapping):
        return shapes, [(("tools",), f"tools must be a table of tool names, got {_kind(data)}")]
    for tool, entry in data.items():
        at = ("tools", str(tool))
        where = f"tools.{tool}"
        if not isinstance(entry, Mapping):
            problems.append((at, f"{where} must be a table, got {_kind(entry)}"))
            continue
        before = len(problems)
        problems.extend(_unknown(entry, _TOOL_KEYS, at))
        raw_arguments = entry.get("arguments", {})
        if not isinstance(raw_arguments, Mapping):
            problems.append(
                (
                    (*at, "arguments"),
                    f"{where}.arguments must be a table, got {_kind(raw_arguments)}",
                )
            )
            continue
        arguments: dict[str, ArgumentShape] = {}
        for argument, rule in raw_arguments.items():
            here = (*at, "arguments", str(argument))
            if not isinstance(rule, Mapping):
                problems.append((here, f"{'.'.join(here)} must be a table, got {_kind(rule)}"))
                continue
            problems.extend(_unknown(rule, _ARGUMENT_KEYS, here))
            arguments[str(argument)] = ArgumentShape(
                name=rule.get("name"),
                description=rule.get("description"),
                default=rule.get("default", NO_DEFAULT),
                hide=rule.get("hide", False),
            )
        shape = ToolShape(
            name=entry.get("name"), description=entry.get("description"), arguments=arguments
        )
        problems.extend(_problems({str(tool): shape}))
        if len(problems) == before:
            shapes[str(tool)] = shape
    return shapes, problems


def _unknown(entry: Mapping[Any, Any], known: tuple[str, ...], at: Path) -> list[tuple[Path, str]]:
    return [
        ((*at, str(key)), f"unknown key {key!r} in {'.'.join(at)} (use {', '.join(known)})")
        for key in entry
        if key not in known
    ]


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, Mapping):
        return "a table"
    return type(value).__name__


def shape_view(shapes: Mapping[str, ToolShape]) -> dict[str, Any]:
    """The rules as the ``tools`` table of a configuration file spells them (for the printable
    configuration): only the keys that were given, a hidden argument's fixed value redacted."""
    view: dict[str, Any] = {}
    for tool, shape in shapes.items():
        entry: dict[str, Any] = {}
        if shape.name is not None:
            entry["name"] = shape.name
        if shape.description is not None:
            entry["description"] = shape.description
        arguments: dict[str, Any] = {}
        for argument, rule in shape.arguments.items():
            shown: dict[str, Any] = {}
            if rule.name is not None:
                shown["name"] = rule.name
            if rule.description is not None:
                shown["description"] = rule.description
            if rule.has_default:  # a fixed value is not printed (it may be an account or a key)
                shown["default"] = REDACTED if rule.hide else rule.default
            if rule.hide:
                shown["hide"] = True
            arguments[argument] = shown
        if arguments:
            entry["arguments"] = arguments
        view[tool] = entry
    return view
