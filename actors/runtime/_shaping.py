"""Tool shaping: the host's rules applied to a server's listing, and calls mapped back.

:func:`shape_listing` takes the raw ``tools`` array of a complete listing and the server's
:class:`~trio_mcp.actors.config.ToolShape` rules (by the server's tool name) and gives the
entries as the model is to see them: renamed, descriptions rewritten, arguments renamed,
hidden or given defaults. It runs *before* the registration checks
(:func:`~trio_mcp.actors.runtime._toolcheck.check_listing`) and the naming (the registry), so
the injection scan, the schema checks and the name rules see the shaped tool: a description the
host wrote is scanned like the server's, and a new name is sanitised and checked for clashes like
any other.

The include/exclude filters match the server's own names, before shaping. A rule that does not
fit its tool (an argument the schema does not have, a rename that collides with another tool or
argument, a required argument hidden without a value, an input schema without ``properties``)
refuses that tool, with the reason, never its server; its other tools are not affected. The
tool is refused rather than offered unshaped: a rule says how the host wants the tool called (a
hidden argument's fixed value is often the point), so offering it without the rule would hand
the model what the host meant to keep. A rule for a tool the server does not list does nothing.

Each shaped tool that registers carries an :class:`AppliedShape`, which maps a call back to the
server: its own tool name, its own argument names, the hidden fixed values added and the
defaults filled (:meth:`AppliedShape.to_wire`).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final

import attrs

from ..config._shaping import ArgumentShape, ToolShape
from ._registry import ToolRefusal

__all__ = [
    "AppliedShape",
    "ShapedListing",
    "shape_listing",
]

_EMPTY: Final[Mapping[str, Any]] = MappingProxyType({})


@attrs.frozen(kw_only=True)
class AppliedShape:
    """How a call of a shaped tool goes to its server.

    ``wire_name`` is the server's name of the tool; ``renamed`` maps each argument the model
    names differently to the server's name; ``fixed`` holds the hidden arguments' values (sent
    on every call); ``defaults`` the values sent when the model leaves an argument out;
    ``owned`` the server's argument names the model does not see (hidden, or renamed away): a
    value the model sends under one of them is dropped, so the model cannot set what the host
    fixed."""

    wire_name: str
    renamed: Mapping[str, str] = _EMPTY
    fixed: Mapping[str, Any] = _EMPTY
    defaults: Mapping[str, Any] = _EMPTY
    owned: frozenset[str] = frozenset()

    def to_wire(self, arguments: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """The arguments as the server takes them: names mapped back, the model's values under
        a name it was not offered dropped, defaults filled where the model left an argument
        out, fixed values set. None stays None when nothing is to be added."""
        if arguments is None and not self.fixed and not self.defaults:
            return None
        out: dict[str, Any] = {}
        renamed, owned = self.renamed, self.owned
        for key, value in (arguments or {}).items():
            wire = renamed.get(key)
            if wire is not None:
                out[wire] = value
            elif key not in owned:
                out[key] = value
        for key, value in self.defaults.items():
            out.setdefault(key, value)
        out.update(self.fixed)
        return out


@attrs.frozen(kw_only=True)
class ShapedListing:
    """What :func:`shape_listing` gives: the ``entries`` to check (shaped, in listing order,
    the filters applied), the ``shapes`` of the shaped ones (by their shaped name), the names
    the filters left out (``excluded``) and the tools whose rule did not fit (``refused``)."""

    entries: tuple[Any, ...]
    shapes: Mapping[str, AppliedShape]
    excluded: tuple[str, ...] = ()
    refused: tuple[ToolRefusal, ...] = ()


class _Misfit(Exception):
    """A rule that does not fit its tool (the message says why)."""


def _included(name: str, include: Sequence[str] | None, exclude: Sequence[str]) -> bool:
    if include is not None and not any(fnmatch.fnmatchcase(name, p) for p in include):
        return False
    return not any(fnmatch.fnmatchcase(name, p) for p in exclude)


def shape_listing(
    raw_tools: Sequence[Any],
    rules: Mapping[str, ToolShape],
    *,
    server: str,
    include: Sequence[str] | None = None,
    exclude: Sequence[str] = (),
) -> ShapedListing:
    """Apply the filters (over the server's names) and then ``rules`` to a complete listing.
    Entries that are not tools (not an object, no name) pass through unchanged, for the checks
    to refuse. Never raises for any JSON input."""
    filtering = include is not None or bool(exclude)
    kept: list[Any] = []
    excluded: list[str] = []
    for entry in raw_tools:
        name = entry.get("name") if isinstance(entry, dict) else None
        if filtering and isinstance(name, str) and name and not _included(name, include, exclude):
            excluded.append(name)
            continue
        kept.append(entry)
    # The names the listing's tools will have: a rename must not take one of them.
    final: dict[str, list[str]] = {}
    for entry in kept:
        name = entry.get("name") if isinstance(entry, dict) else None
        if isinstance(name, str) and name:
            rule = rules.get(name)
            new = rule.name if rule is not None and rule.name else name
            final.setdefault(new, []).append(name)
    entries: list[Any] = []
    shapes: dict[str, AppliedShape] = {}
    refused: list[ToolRefusal] = []
    for entry in kept:
        name = entry.get("name") if isinstance(entry, dict) else None
        rule = rules.get(name) if isinstance(name, str) else None
        if rule is None:
            entries.append(entry)
            continue
        assert isinstance(name, str)
        try:
            if rule.name and rule.name != name and len(final[rule.name]) > 1:
                others = ", ".join(repr(n) for n in final[rule.name] if n != name)
                raise _Misfit(f"the new name {rule.name!r} is also the name of tool {others}")
            shaped, applied = _shape(entry, name, rule)
        except _Misfit as exc:
            refused.append(
                ToolRefusal(
                    server=server,
                    tool=name,
                    reason=f"its shaping rule does not fit the tool: {exc}; the tool is not "
                    f"offered (fix or remove tools.{name} in the server's configuration)",
                )
            )
            continue
        entries.append(shaped)
        shapes[shaped["name"]] = applied
    return ShapedListing(
        entries=tuple(entries),
        shapes=MappingProxyType(shapes) if shapes else _EMPTY,
        excluded=tuple(excluded),
        refused=tuple(refused),
    )


def _shape(
    entry: dict[str, Any], name: str, rule: ToolShape
) -> tuple[dict[str, Any], AppliedShape]:
    shaped = dict(entry)
    if rule.name:
        shaped["name"] = rule.name
    if rule.description is not None:
        shaped["description"] = rule.description
    renamed: dict[str, str] = {}
    fixed: dict[str, Any] = {}
    defaults: dict[str, Any] = {}
    owned: set[str] = set()
    if rule.arguments:
        schema = entry.get("inputSchema")
        if schema is None:
            schema = {"type": "object"}
        properties = schema.get("properties", {}) if isinstance(schema, dict) else None
        if not isinstance(schema, dict) or not isinstance(properties, dict):
            raise _Misfit(
                "it shapes arguments, but the tool's inputSchema has no 'properties' object"
            )
        required = schema.get("required", [])
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise _Misfit("the tool's inputSchema 'required' is not a list of argument names")
        new_properties: dict[str, Any] = {}
        new_required: list[str] = []
        model_names: dict[str, str] = {}  # the model's name -> the server's
        for key, value in properties.items():
            argument = rule.arguments.get(key)
            if argument is None:
                _claim(model_names, key, key)
                new_properties[key] = value
                if key in required:
                    new_required.append(key)
                continue
            _apply_argument(
                key,
                value,
                argument,
                required=key in required,
                model_names=model_names,
                new_properties=new_properties,
                new_required=new_required,
                renamed=renamed,
                fixed=fixed,
                defaults=defaults,
                owned=owned,
            )
        unknown = sorted(set(rule.arguments) - set(properties))
        if unknown:
            names = ", ".join(repr(u) for u in unknown)
            plural = "s" if len(unknown) > 1 else ""
            raise _Misfit(f"the tool has no argument{plural} {names}")
        new_schema = dict(schema)
        new_schema["properties"] = new_properties
        if new_required:
            new_schema["required"] = new_required
        else:
            new_schema.pop("required", None)
        shaped["inputSchema"] = new_schema
        owned -= set(model_names)
    applied = AppliedShape(
        wire_name=name,
        renamed=MappingProxyType(renamed) if renamed else _EMPTY,
        fixed=MappingProxyType(fixed) if fixed else _EMPTY,
        defaults=MappingProxyType(defaults) if defaults else _EMPTY,
        owned=frozenset(owned),
    )
    return shaped, applied


def _claim(model_names: dict[str, str], model: str, wire: str) -> None:
    """Give the model's name ``model`` to the server's argument ``wire``, or say it is taken."""
    other = model_names.get(model)
    if other is not None:
        raise _Misfit(
            f"arguments {other!r} and {wire!r} would both be called {model!r} for the model"
        )
    model_names[model] = wire


def _apply_argument(
    key: str,
    value: Any,
    argument: ArgumentShape,
    *,
    required: bool,
    model_names: dict[str, str],
    new_properties: dict[str, Any],
    new_required: list[str],
    renamed: dict[str, str],
    fixed: dict[str, Any],
    defaults: dict[str, Any],
    owned: set[str],
) -> None:
    if argument.hide:
        if argument.has_default:
            fixed[key] = argument.default
        elif required:
            raise _Misfit(
                f"the tool requires {key!r}, so hiding it needs a fixed value ('default')"
            )
        owned.add(key)
        return
    model = argument.name or key
    _claim(model_names, model, key)
    if model != key:
        renamed[model] = key
        owned.add(key)
    prop = dict(value) if isinstance(value, dict) else value
    if isinstance(prop, dict):
        if argument.description is not None:
            prop["description"] = argument.description
        if argument.has_default:
            prop["default"] = argument.default
    elif argument.description is not None or argument.has_default:
        raise _Misfit(
            f"argument {key!r} has a boolean schema, which takes no description or default"
        )
    new_properties[model] = prop
    if argument.has_default:
        defaults[key] = argument.default
    elif required:
        new_required.append(model)
