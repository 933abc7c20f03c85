"""OpenAI strict mode: an input schema rewritten into the subset ``strict: true`` takes, and the
model's arguments mapped back.

With ``strict: true`` OpenAI constrains the model's arguments to the tool's schema, but only
takes a subset of JSON Schema (the "Supported schemas" of its Structured Outputs guide):

- every object lists all its properties in ``required`` and sets ``additionalProperties:
  false``; a property that may be left out is written as required **and nullable**
  (``"type": ["string", "null"]``, or ``anyOf`` with ``{"type": "null"}``), and the model sends
  ``null`` for "left out";
- the types ``string``, ``number``, ``integer``, ``boolean``, ``object``, ``array``, ``null``;
  ``enum``, ``const``, ``anyOf``, ``$defs`` with ``$ref`` (also ``"#"`` for recursion), and no
  other keyword beside a ``$ref``;
- of the type-specific keywords only ``pattern`` and ``format`` (``date-time``, ``time``,
  ``date``, ``duration``, ``email``, ``hostname``, ``ipv4``, ``ipv6``, ``uuid``) for strings,
  ``multipleOf``, ``minimum``, ``maximum``, ``exclusiveMinimum``, ``exclusiveMaximum`` for
  numbers and ``minItems``, ``maxItems`` for arrays;
- at most 5,000 object properties, 10 levels of nesting, 1,000 enum values, 120,000 characters
  of property names, definition names, enum and const values, and 15,000 characters of values
  for an enum of more than 250.

:func:`to_strict_schema` makes that rewrite: optional properties required and nullable, every
object closed, ``oneOf`` read as ``anyOf``, an ``allOf`` of object schemas merged,
``definitions`` moved to ``$defs``, a ``$ref`` with other keywords inlined, the type of an
``enum`` or ``const`` without one filled in, and the keywords strict mode does not take
(``default``, ``minLength``, ``examples``, another ``format``...) moved into the
``description`` as a note, so the model still reads them (the server still checks them). What
it cannot express leaves the tool without strict mode, with the reason: a schema that accepts
any value (no type), an object of arbitrary keys (a map: ``additionalProperties`` with a
schema, or no ``properties``), ``not``, ``if``/``then``/``else``, ``patternProperties``,
tuple arrays, a reference outside the schema, or one of the limits above.

:func:`drop_omitted_nulls` maps the model's arguments back: a ``null`` for a property that was
optional in the original schema, and does not accept ``null`` there, is what "left out" looks
like in strict mode, and is removed before the call reaches the server.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import attrs

__all__ = [
    "DEFAULT_STRICT_RULES",
    "StrictConversion",
    "StrictRules",
    "drop_omitted_nulls",
    "to_strict_schema",
]

#: Keywords strict mode takes as they are.
_SUPPORTED: Final = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "const",
        "anyOf",
        "description",
        "title",
        "$ref",
        "$defs",
        "pattern",
        "format",
        "multipleOf",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minItems",
        "maxItems",
    }
)
#: The string formats strict mode takes.
_FORMATS: Final = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
#: Keywords with nothing in them for the model: dropped.
_DROPPED: Final = frozenset({"$schema", "$id", "$comment", "$anchor", "$vocabulary"})
#: Keywords that change which values are valid in a way strict mode cannot express.
_REFUSED: Final = frozenset(
    {
        "not",
        "if",
        "then",
        "else",
        "dependentRequired",
        "dependentSchemas",
        "dependencies",
        "patternProperties",
        "propertyNames",
        "unevaluatedProperties",
        "unevaluatedItems",
        "prefixItems",
        "additionalItems",
        "contains",
        "$dynamicRef",
        "$recursiveRef",
    }
)
#: Annotations and constraints strict mode does not take but the model should still read:
#: moved into the description. Any other keyword (not JSON Schema) is dropped.
_NOTED: Final = frozenset(
    {
        "default",
        "examples",
        "minLength",
        "maxLength",
        "minProperties",
        "maxProperties",
        "uniqueItems",
        "minContains",
        "maxContains",
        "contentMediaType",
        "contentEncoding",
        "contentSchema",
        "deprecated",
        "readOnly",
        "writeOnly",
        "format",
    }
)
_NOTE_CHARS: Final = 200


@attrs.frozen(kw_only=True)
class StrictRules:
    """The limits of OpenAI's strict mode (the documented ones by default)."""

    #: Keywords taken as they are (any other is converted, noted in the description, dropped,
    #: or keeps the tool out of strict mode).
    keywords: frozenset[str] = _SUPPORTED
    #: ``format`` values taken as they are (others are noted in the description).
    formats: frozenset[str] = _FORMATS
    max_depth: int = 10
    max_properties: int = 5000
    max_enum_values: int = 1000
    #: Characters of property names, definition names, enum values and const values.
    max_string_chars: int = 120_000
    #: An enum of more than ``large_enum`` values may have at most ``large_enum_chars``.
    large_enum: int = 250
    large_enum_chars: int = 15_000


#: The default strict-mode rules.
DEFAULT_STRICT_RULES: Final = StrictRules()


@attrs.frozen(kw_only=True)
class StrictConversion:
    """What :func:`to_strict_schema` made of a schema: the strict ``schema`` (None when it
    cannot be expressed, and then ``problem`` says why) and the ``changes`` made to fit."""

    schema: dict[str, Any] | None
    problem: str | None = None
    changes: tuple[str, ...] = ()

    @property
    def summary(self) -> str:
        """The changes (or the problem) in one line."""
        if self.problem is not None:
            return self.problem
        return "; ".join(self.changes)


class _NotStrict(Exception):
    """The schema cannot be expressed in strict mode; the message says why."""


def _json(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return text if len(text) <= _NOTE_CHARS else text[: _NOTE_CHARS - 1] + "\u2026"


def _chars(value: Any) -> int:
    """The characters an enum or const value counts for."""
    if isinstance(value, str):
        return len(value)
    return len(json.dumps(value, separators=(",", ":"), default=str))


def _types_of(values: Iterable[Any]) -> list[str]:
    """The JSON types of enum or const values, in a stable order."""
    found: list[str] = []
    for value in values:
        if value is None:
            kind = "null"
        elif isinstance(value, bool):
            kind = "boolean"
        elif isinstance(value, int):
            kind = "integer"
        elif isinstance(value, float):
            kind = "number"
        elif isinstance(value, str):
            kind = "string"
        elif isinstance(value, list):
            kind = "array"
        else:
            kind = "object"
        if kind not in found:
            found.append(kind)
    if "number" in found and "integer" in found:
        found.remove("integer")
    return found


def _type_list(node: Mapping[str, Any]) -> list[str]:
    types = node.get("type")
    if isinstance(types, str):
        return [types]
    if isinstance(types, list):
        return [t for t in types if isinstance(t, str)]
    return []


def _resolve(root: Mapping[str, Any], ref: str) -> Mapping[str, Any] | None:
    """The schema a local ``$ref`` points at, or None (not local, or not there)."""
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        return None
    node: Any = root
    for raw in ref[2:].split("/"):
        key = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            return None
    return node if isinstance(node, Mapping) else None


#: Keywords that keep some value out (without any, a schema takes every value).
_CONSTRAINING: Final = frozenset(
    {"type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "not"}
)


def _accepts_null(node: Any, root: Mapping[str, Any], seen: frozenset[int] = frozenset()) -> bool:
    """Whether ``null`` is a value the schema names (a null type, enum or const value, or an
    ``anyOf``/``oneOf`` branch or reference that does)."""
    if node is True:
        return True
    if not isinstance(node, Mapping) or id(node) in seen:
        return False
    if not (_CONSTRAINING & set(node)):
        return True  # no type or other constraint: any value, null included
    seen = seen | {id(node)}
    if "null" in _type_list(node):
        return True
    if "const" in node and node["const"] is None:
        return True
    enum = node.get("enum")
    if isinstance(enum, list) and None in enum:
        return True
    for keyword in ("anyOf", "oneOf"):
        branches = node.get(keyword)
        if isinstance(branches, list) and any(_accepts_null(b, root, seen) for b in branches):
            return True
    ref = node.get("$ref")
    if isinstance(ref, str):
        target = _resolve(root, ref)
        return target is not None and _accepts_null(target, root, seen)
    return False


_SCALARS: Final = frozenset({"string", "number", "integer", "boolean"})


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` that also takes ``null``: ``"type": [T, "null"]`` for a plain scalar (as
    OpenAI's own examples write it), otherwise ``anyOf`` with ``{"type": "null"}``."""
    types = _type_list(schema)
    simple = not ({"enum", "const", "anyOf", "$ref"} & set(schema))
    if simple and types and set(types) <= _SCALARS:
        return {**schema, "type": [*types, "null"]}
    outer: dict[str, Any] = {key: schema[key] for key in ("title", "description") if key in schema}
    inner = {key: value for key, value in schema.items() if key not in outer}
    return {"anyOf": [inner, {"type": "null"}], **outer}


@attrs.define
class _Converter:
    root: Mapping[str, Any]
    rules: StrictRules
    properties: int = 0
    enum_values: int = 0
    chars: int = 0
    nullable: int = 0
    noted: set[str] = attrs.field(factory=set)
    dropped: set[str] = attrs.field(factory=set)
    converted: set[str] = attrs.field(factory=set)
    inlining: list[str] = attrs.field(factory=list)

    def changes(self) -> tuple[str, ...]:
        out: list[str] = []
        if self.nullable:
            plural = "property" if self.nullable == 1 else "properties"
            out.append(
                f"{self.nullable} optional {plural} made required and nullable (null means "
                "left out)"
            )
        if self.noted:
            out.append(f"moved into descriptions: {', '.join(sorted(self.noted))}")
        if self.converted:
            out.extend(sorted(self.converted))
        if self.dropped:
            out.append(f"dropped: {', '.join(sorted(self.dropped))}")
        return tuple(out)

    def count_chars(self, size: int) -> None:
        self.chars += size
        if self.chars > self.rules.max_string_chars:
            raise _NotStrict(
                f"more than {self.rules.max_string_chars:,} characters of property names, "
                "definition names, enum and const values"
            )

    def enum(self, values: list[Any], path: str) -> None:
        self.enum_values += len(values)
        if self.enum_values > self.rules.max_enum_values:
            raise _NotStrict(f"more than {self.rules.max_enum_values:,} enum values")
        size = sum(_chars(v) for v in values)
        if len(values) > self.rules.large_enum and size > self.rules.large_enum_chars:
            raise _NotStrict(
                f"{path}: an enum of more than {self.rules.large_enum} values has "
                f"{size:,} characters (at most {self.rules.large_enum_chars:,})"
            )
        self.count_chars(size)

    def schema(self, node: Any, path: str, depth: int) -> dict[str, Any]:
        if isinstance(node, bool):
            if node:
                raise _NotStrict(f"{path} accepts any value, which strict mode cannot express")
            raise _NotStrict(f"{path} accepts no value (false)")
        if not isinstance(node, Mapping):
            raise _NotStrict(f"{path} is not a schema")
        if depth > self.rules.max_depth:
            raise _NotStrict(f"nested deeper than {self.rules.max_depth} levels")
        node = self.merge_all_of(node, path)
        refused = sorted(set(node) & _REFUSED)
        if refused:
            raise _NotStrict(
                f"{path} uses {', '.join(map(repr, refused))}, which strict mode cannot express"
            )
        ref = node.get("$ref")
        if ref is not None:
            return self.reference(node, ref, path, depth)
        out: dict[str, Any] = {}
        notes: list[str] = []
        types = _type_list(node)
        if not types:
            types = self.infer_types(node, path)
            if types:
                out["type"] = types[0] if len(types) == 1 else types
        for key, value in node.items():
            if key in ("properties", "required", "additionalProperties", "items"):
                continue  # the object and array parts below
            if key in ("anyOf", "oneOf"):
                if not isinstance(value, list) or not value:
                    raise _NotStrict(f"{path}.{key} is not a non-empty list of schemas")
                if key == "oneOf":
                    self.converted.add("oneOf read as anyOf")
                out["anyOf"] = [
                    self.schema(branch, f"{path}.{key}[{i}]", depth)
                    for i, branch in enumerate(value)
                ]
            elif key in ("$defs", "definitions"):
                continue  # converted at the root only
            elif key == "format" and value not in self.rules.formats:
                notes.append(f"format: {_json(value)}")
                self.noted.add("format")
            elif key in self.rules.keywords:
                out[key] = value
                if key == "enum" and isinstance(value, list):
                    self.enum(value, f"{path}.enum")
                elif key == "const":
                    self.count_chars(_chars(value))
            elif key in _DROPPED:
                continue
            elif key in _NOTED:
                notes.append(f"{key}: {_json(value)}")
                self.noted.add(key)
            else:
                self.dropped.add(repr(key))
        if "object" in types:
            self.object(node, out, path, depth)
        if "array" in types:
            self.array(node, out, path, depth)
        if not types and "anyOf" not in out:
            raise _NotStrict(
                f"{path} has no type, so it accepts any value, which strict mode cannot express"
            )
        if notes:
            described = out.get("description")
            note = "; ".join(notes)
            out["description"] = f"{described} ({note})" if described else f"({note})"
        return out

    def infer_types(self, node: Mapping[str, Any], path: str) -> list[str]:
        if "enum" in node and isinstance(node["enum"], list):
            return _types_of(node["enum"])
        if "const" in node:
            return _types_of([node["const"]])
        if "properties" in node or "additionalProperties" in node:
            return ["object"]
        if "items" in node:
            return ["array"]
        return []

    def merge_all_of(self, node: Mapping[str, Any], path: str) -> Mapping[str, Any]:
        """An ``allOf`` folded into its schema: one entry, or object schemas whose properties
        do not collide."""
        entries = node.get("allOf")
        if entries is None:
            return node
        if not isinstance(entries, list) or not entries:
            raise _NotStrict(f"{path}.allOf is not a non-empty list of schemas")
        merged: dict[str, Any] = {key: value for key, value in node.items() if key != "allOf"}
        for i, raw in enumerate(entries):
            entry = raw
            if isinstance(entry, Mapping) and isinstance(entry.get("$ref"), str):
                target = _resolve(self.root, entry["$ref"])
                entry = target if target is not None and target is not self.root else entry
            if not isinstance(entry, Mapping) or "$ref" in entry or "allOf" in entry:
                raise _NotStrict(f"{path}.allOf[{i}] cannot be merged into one schema")
            for key, value in entry.items():
                if key == "properties" and isinstance(value, Mapping):
                    props = dict(merged.get("properties") or {})
                    clash = sorted(set(props) & set(value))
                    if clash:
                        raise _NotStrict(
                            f"{path}.allOf: more than one entry constrains {clash[0]!r}"
                        )
                    merged["properties"] = {**props, **value}
                elif key == "required" and isinstance(value, list):
                    merged["required"] = [*merged.get("required", ()), *value]
                elif key in ("description", "title"):
                    merged.setdefault(key, value)
                elif key in merged and merged[key] != value:
                    raise _NotStrict(f"{path}.allOf: entries disagree on {key!r}")
                else:
                    merged[key] = value
        self.converted.add("allOf merged")
        return merged

    def reference(self, node: Mapping[str, Any], ref: Any, path: str, depth: int) -> dict[str, Any]:
        if not isinstance(ref, str):
            raise _NotStrict(f"{path}.$ref is not a string")
        if ref == "#" or ref.startswith(("#/$defs/", "#/definitions/")):
            target = _resolve(self.root, ref)
            if target is None:
                raise _NotStrict(f"{path}.$ref {ref!r} points at nothing")
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            if not siblings or ref == "#":
                if siblings:
                    self.dropped.update(repr(k) for k in siblings)
                local = ref.replace("#/definitions/", "#/$defs/", 1)
                if local != ref:
                    self.converted.add("definitions moved to $defs")
                return {"$ref": local}
        else:
            target = _resolve(self.root, ref)
            if target is None:
                raise _NotStrict(f"{path}.$ref {ref!r} is not a reference strict mode takes")
            siblings = {k: v for k, v in node.items() if k != "$ref"}
        if ref in self.inlining:
            raise _NotStrict(f"{path}.$ref {ref!r} refers to itself through keywords beside it")
        self.inlining.append(ref)
        try:
            self.converted.add("$ref with other keywords inlined")
            return self.schema({**target, **siblings}, path, depth)
        finally:
            self.inlining.pop()

    def object(self, node: Mapping[str, Any], out: dict[str, Any], path: str, depth: int) -> None:
        props = node.get("properties")
        extra = node.get("additionalProperties")
        if props is None:
            if extra is False:
                props = {}
            else:
                raise _NotStrict(
                    f"{path} is an object with arbitrary keys, which strict mode cannot express"
                )
        if not isinstance(props, Mapping):
            raise _NotStrict(f"{path}.properties is not an object")
        if isinstance(extra, Mapping) and extra:
            raise _NotStrict(
                f"{path} takes extra keys of a given schema (additionalProperties), which "
                "strict mode cannot express"
            )
        required_raw = node.get("required", ())
        required = set(required_raw) if isinstance(required_raw, list) else set()
        self.properties += len(props)
        if self.properties > self.rules.max_properties:
            raise _NotStrict(f"more than {self.rules.max_properties:,} properties")
        converted: dict[str, Any] = {}
        for key, sub in props.items():
            self.count_chars(len(key))
            schema = self.schema(sub, f"{path}.properties.{key}", depth + 1)
            if key not in required and not _accepts_null(sub, self.root):
                schema = _nullable(schema)
                self.nullable += 1
            converted[key] = schema
        out["properties"] = converted
        out["required"] = list(converted)
        out["additionalProperties"] = False

    def array(self, node: Mapping[str, Any], out: dict[str, Any], path: str, depth: int) -> None:
        items = node.get("items")
        if not isinstance(items, Mapping) or not items:
            raise _NotStrict(
                f"{path} is an array without an item schema, which strict mode cannot express"
            )
        out["items"] = self.schema(items, f"{path}.items", depth + 1)

    def definitions(self) -> dict[str, Any]:
        defs: dict[str, Any] = {}
        for keyword in ("$defs", "definitions"):
            group = self.root.get(keyword)
            if group is None:
                continue
            if not isinstance(group, Mapping):
                raise _NotStrict(f"$.{keyword} is not an object")
            if keyword == "definitions":
                self.converted.add("definitions moved to $defs")
            for name, sub in group.items():
                if name in defs:
                    raise _NotStrict(f"$.{keyword}.{name} is defined twice")
                self.count_chars(len(name))
                defs[name] = self.schema(sub, f"$.{keyword}.{name}", 1)
        return defs


def to_strict_schema(
    schema: Mapping[str, Any], rules: StrictRules = DEFAULT_STRICT_RULES
) -> StrictConversion:
    """``schema`` (a tool's input schema, an object schema) rewritten for OpenAI's
    ``strict: true`` (see the module's documentation), or the reason it cannot be. Never
    raises; ``schema`` is not changed."""
    converter = _Converter(root=schema, rules=rules)
    try:
        defs = converter.definitions()
        out = converter.schema(schema, "$", 1)
        if "object" not in _type_list(out):
            raise _NotStrict("$ is not an object schema")
    except _NotStrict as exc:
        return StrictConversion(schema=None, problem=str(exc))
    except RecursionError:
        return StrictConversion(schema=None, problem="the schema is nested too deeply")
    if defs:
        out["$defs"] = defs
    return StrictConversion(schema=out, changes=converter.changes())


# --------------------------------------------------------------------------- the way back


def _candidates(
    schemas: Iterable[Any], root: Mapping[str, Any], limit: int = 64
) -> list[Mapping[str, Any]]:
    """The object-or-array schemas a value may be checked against: the schemas themselves,
    their references resolved and their ``anyOf``/``oneOf``/``allOf`` branches."""
    out: list[Mapping[str, Any]] = []
    seen: set[int] = set()
    stack = list(schemas)
    while stack and len(seen) < limit:
        node = stack.pop()
        if not isinstance(node, Mapping) or id(node) in seen:
            continue
        seen.add(id(node))
        out.append(node)
        ref = node.get("$ref")
        if isinstance(ref, str):
            target = _resolve(root, ref)
            if target is not None:
                stack.append(target)
        for keyword in ("anyOf", "oneOf", "allOf"):
            branches = node.get(keyword)
            if isinstance(branches, list):
                stack.extend(branches)
    return out


def _strip(value: Any, schemas: Sequence[Any], root: Mapping[str, Any]) -> Any:
    if not schemas:
        return value
    candidates = _candidates(schemas, root)
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            subs: list[Any] = []
            required = False
            for candidate in candidates:
                props = candidate.get("properties")
                if isinstance(props, Mapping) and key in props:
                    subs.append(props[key])
                    names = candidate.get("required")
                    required = required or (isinstance(names, list) and key in names)
            if (
                item is None
                and subs
                and not required
                and not any(_accepts_null(sub, root) for sub in subs)
            ):
                continue  # strict mode's "left out"
            out[key] = _strip(item, subs, root)
        return out
    if isinstance(value, list):
        items = [c["items"] for c in candidates if isinstance(c.get("items"), Mapping)]
        return [_strip(item, items, root) for item in value] if items else value
    return value


def drop_omitted_nulls(schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> dict[str, Any]:
    """``arguments`` without the ``null`` values that stand for "left out": a property that is
    optional in ``schema`` (the tool's original input schema, not the strict one) and whose own
    schema does not take ``null``, at any depth. A new dict; ``arguments`` is not changed."""
    try:
        stripped = _strip(arguments, [schema], schema)
    except RecursionError:
        return dict(arguments)
    return dict(stripped)
