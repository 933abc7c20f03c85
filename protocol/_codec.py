"""The one cattrs converter of trio-mcp, and the only module that touches cattrs.

Wire types are ``@attrs.frozen(kw_only=True)`` classes with snake_case fields. This module
decides how they look on the wire:

- every field is renamed to camelCase (``input_schema`` <-> ``inputSchema``); a field named
  ``meta`` is ``_meta``; ``attrs.field(metadata={"wire": "x"})`` names a field explicitly;
- a field whose default is ``None`` (optional on the wire) is left out when it is ``None``;
- keys the class does not know are kept in its ``extra`` field and written back unchanged, so a
  server's own fields survive a round trip;
- scalars are checked strictly: ``"5"`` is not an integer and ``5`` is not a string;
- a structuring failure becomes :class:`InvalidMessage` whose lines name the wire path at fault,
  such as ``$.result.tools[3].inputSchema``. cattrs' own errors never leave this module.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from typing import Any, TypeVar, get_args, get_origin

import attrs
import cattrs
from cattrs.errors import (
    ClassValidationError,
    ForbiddenExtraKeysError,
    IterableValidationError,
    IterableValidationNote,
    StructureHandlerNotFoundError,
)
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from ._errors import InvalidMessage, LocalProtocolError

__all__ = [
    "converter",
    "json_kind",
    "register_tagged_union",
    "structure",
    "unstructure",
    "wire_name",
]

T = TypeVar("T")

#: The converter. Hooks for every attrs class are generated on first use and cached.
converter = cattrs.Converter(detailed_validation=True)

EXTRA_FIELD = "extra"


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def wire_name(field: attrs.Attribute[Any]) -> str:
    """The key under which ``field`` appears on the wire."""
    explicit = field.metadata.get("wire")
    if explicit is not None:
        return str(explicit)
    if field.name == "meta":
        return "_meta"
    return _camel(field.name)


@cache
def _wire_names(cls: type) -> Mapping[str, str]:
    """Python attribute name -> wire key, for one attrs class (without ``extra``)."""
    return {a.name: wire_name(a) for a in attrs.fields(cls) if a.name != EXTRA_FIELD and a.init}


# --------------------------------------------------------------------------- strict scalars


def _structure_str(value: Any, _: type) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {json_kind(value)}")
    return value


def _structure_int(value: Any, _: type) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise TypeError(f"expected an integer, got {json_kind(value)}")
    return value


def _structure_float(value: Any, _: type) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected a number, got {json_kind(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("expected a finite number")
    return value


def _structure_bool(value: Any, _: type) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"expected true or false, got {json_kind(value)}")
    return value


def _structure_id(value: Any, _: type) -> int | str:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise TypeError(f"expected a string or an integer, got {json_kind(value)}")
    return value


def _structure_json_object(value: Any, _: type) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise TypeError(f"expected an object, got {json_kind(value)}")
    return value


def _structure_any(value: Any, _: type) -> Any:
    return value


def json_kind(value: Any) -> str:
    """How a JSON value is called in error messages ("a string", "an array", "null"...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


converter.register_structure_hook(str, _structure_str)
converter.register_structure_hook(int, _structure_int)
converter.register_structure_hook(float, _structure_float)
converter.register_structure_hook(bool, _structure_bool)
converter.register_structure_hook(int | str, _structure_id)
converter.register_structure_hook(str | int, _structure_id)
converter.register_structure_hook(Any, _structure_any)


def _is_json_object(t: Any) -> bool:
    origin = get_origin(t)
    if origin not in (dict, Mapping):
        return False
    args = get_args(t)
    return not args or (args[0] is str and args[1] is Any)


converter.register_structure_hook_func(_is_json_object, _structure_json_object)
converter.register_unstructure_hook_func(_is_json_object, lambda value: value)


def _is_sequence(t: Any) -> bool:
    return get_origin(t) in (tuple, Sequence) and (
        get_origin(t) is Sequence or (len(get_args(t)) == 2 and get_args(t)[1] is Ellipsis)
    )


def _structure_sequence_factory(t: Any) -> Callable[[Any, Any], tuple[Any, ...]]:
    (item_type, *_) = get_args(t) or (Any,)
    item_hook = converter.get_structure_hook(item_type)

    def structure_sequence(value: Any, _: Any) -> tuple[Any, ...]:
        if not isinstance(value, list | tuple):
            raise TypeError(f"expected an array, got {json_kind(value)}")
        out: list[Any] = []
        errors: list[Exception] = []
        for index, item in enumerate(value):
            try:
                out.append(item_hook(item, item_type))
            except Exception as exc:
                exc.__notes__ = [
                    *getattr(exc, "__notes__", ()),
                    IterableValidationNote(f"Structuring item @ index {index}", index, item_type),
                ]
                errors.append(exc)
        if errors:
            raise IterableValidationError("while structuring an array", errors, t)
        return tuple(out)

    return structure_sequence


converter.register_structure_hook_factory(_is_sequence, _structure_sequence_factory)
converter.register_unstructure_hook_func(
    _is_sequence, lambda value: [converter.unstructure(v) for v in value]
)


# --------------------------------------------------------------------------- attrs classes


def _structure_attrs_factory(cls: type) -> Callable[[Any, Any], Any]:
    names = _wire_names(cls)
    has_extra = any(a.name == EXTRA_FIELD for a in attrs.fields(cls))
    overrides: dict[str, Any] = {name: override(rename=key) for name, key in names.items()}
    if has_extra:
        overrides[EXTRA_FIELD] = override(omit=True)
    generated: Callable[[Any, Any], Any] = make_dict_structure_fn(cls, converter, **overrides)
    known = frozenset(names.values())

    def structure_attrs(value: Any, _: Any) -> Any:
        if not isinstance(value, dict):
            raise TypeError(f"expected an object, got {json_kind(value)}")
        obj = generated(value, cls)
        if has_extra and len(value) > len(known.intersection(value)):
            obj = attrs.evolve(
                obj, **{EXTRA_FIELD: {k: v for k, v in value.items() if k not in known}}
            )
        return obj

    return structure_attrs


def _unstructure_attrs_factory(cls: type) -> Callable[[Any], dict[str, Any]]:
    names = _wire_names(cls)
    has_extra = any(a.name == EXTRA_FIELD for a in attrs.fields(cls))
    overrides: dict[str, Any] = {
        a.name: override(rename=names[a.name], omit_if_default=a.default is None)
        for a in attrs.fields(cls)
        if a.name in names
    }
    if has_extra:
        overrides[EXTRA_FIELD] = override(omit=True)
    generated: Callable[[Any], dict[str, Any]] = make_dict_unstructure_fn(
        cls, converter, **overrides
    )

    if not has_extra:
        return generated

    def unstructure_attrs(obj: Any) -> dict[str, Any]:
        out = generated(obj)
        extra = getattr(obj, EXTRA_FIELD)
        if extra:
            for key, value in extra.items():
                out.setdefault(key, value)
        return out

    return unstructure_attrs


converter.register_structure_hook_factory(attrs.has, _structure_attrs_factory)
converter.register_unstructure_hook_factory(attrs.has, _unstructure_attrs_factory)


# --------------------------------------------------------------------------- tagged unions


def register_tagged_union(
    union: Any,
    *,
    tag: str,
    members: Mapping[str, type],
    fallback: type | None = None,
) -> None:
    """Structure ``union`` by the string in its ``tag`` key.

    An unknown tag structures as ``fallback`` when one is given (which keeps the whole object in
    its ``extra`` field), and is an error otherwise.
    """

    def structure_union(value: Any, _: Any) -> Any:
        if not isinstance(value, dict):
            raise TypeError(f"expected an object, got {json_kind(value)}")
        kind = value.get(tag)
        member = members.get(kind) if isinstance(kind, str) else None
        if member is None:
            if fallback is None:
                allowed = ", ".join(sorted(members))
                raise ValueError(f"unknown {tag} {kind!r} (expected one of: {allowed})")
            member = fallback
        return converter.structure(value, member)

    converter.register_structure_hook(union, structure_union)


# --------------------------------------------------------------------------- entry points


def structure(value: Any, cls: type[T], *, path: str = "$") -> T:
    """Decode the JSON value ``value`` into ``cls``.

    Raises :class:`InvalidMessage` naming every wire path at fault (relative to ``path``).
    """
    try:
        return converter.structure(value, cls)
    except (ClassValidationError, IterableValidationError) as exc:
        lines = tuple(_describe_group(exc, path))
    except ForbiddenExtraKeysError as exc:  # pragma: no cover - we never forbid extra keys
        lines = (f"unexpected keys {sorted(exc.extra_fields)} @ {path}",)
    except StructureHandlerNotFoundError as exc:  # a bug in our own types: fail loudly
        raise TypeError(f"no decoder for {cls!r}: {exc}") from exc
    except (TypeError, ValueError, KeyError) as exc:
        lines = (f"{_describe(exc)} @ {path}",)
    except RecursionError:  # only from a caller's deep stack: the wire types nest a few levels
        lines = (f"nested too deeply to decode here @ {path}",)
    first_path = lines[0].rpartition(" @ ")[2] if lines else path
    summary = lines[0] if len(lines) == 1 else f"{lines[0]} (and {len(lines) - 1} more)"
    raise InvalidMessage(
        f"invalid {getattr(cls, '__name__', cls)}: {summary}", path=first_path, errors=lines
    ) from None


def unstructure(obj: Any) -> Any:
    """Encode a wire object (or a sequence or mapping of them) as JSON-ready Python values.

    Raises :class:`LocalProtocolError` when a raw JSON value in it (``structuredContent``, log
    ``data``...) is nested too deeply to encode from the caller's stack: cattrs walks such
    values by recursion, a few frames per level.
    """
    try:
        return converter.unstructure(obj)
    except RecursionError:
        raise LocalProtocolError(
            f"cannot encode {type(obj).__name__}: a value in it is nested too deeply"
        ) from None


def _describe(exc: BaseException) -> str:
    if isinstance(exc, KeyError):
        return "required field missing"
    text = str(exc)
    return text or type(exc).__name__


def _describe_group(exc: BaseException, path: str) -> list[str]:
    out: list[str] = []
    if isinstance(exc, ClassValidationError):
        names = _wire_names(exc.cl) if attrs.has(exc.cl) else {}
        with_notes, without = exc.group_exceptions()
        for sub, note in with_notes:
            out.extend(_describe_group(sub, f"{path}.{names.get(note.name, note.name)}"))
        for sub in without:
            out.extend(_describe_group(sub, path))
    elif isinstance(exc, IterableValidationError):
        with_index, without_index = exc.group_exceptions()
        for sub, item_note in with_index:
            key = item_note.index
            out.extend(
                _describe_group(
                    sub, f"{path}[{key!r}]" if isinstance(key, str) else f"{path}[{key}]"
                )
            )
        for sub in without_index:
            out.extend(_describe_group(sub, path))
    elif isinstance(exc, ExceptionGroup):
        for sub in exc.exceptions:
            out.extend(_describe_group(sub, path))
    else:
        out.append(f"{_describe(exc)} @ {path}")
    return out
