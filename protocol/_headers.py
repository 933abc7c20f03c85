"""The HTTP request headers of 2026-07-28 Streamable HTTP, decided without I/O.

A modern POST mirrors parts of its JSON-RPC body into headers, so that load balancers and
gateways can route without reading the body (``basic/transports/streamable-http.mdx``,
"Request Metadata"; SEP-2243):

- ``MCP-Protocol-Version``: the revision of the request (equal to its
  ``_meta["io.modelcontextprotocol/protocolVersion"]``), on every POST;
- ``Mcp-Method``: the JSON-RPC ``method``, on every request, and on notifications too (the
  revision leaves notification headers undefined; SEP-2243 asked for ``Mcp-Method`` there, and
  sending it costs nothing);
- ``Mcp-Name``: ``params.name`` of ``tools/call`` and ``prompts/get``, ``params.uri`` of
  ``resources/read``, ``params.taskId`` of the Tasks extension's ``tasks/get``,
  ``tasks/update`` and ``tasks/cancel``;
- ``Mcp-Param-{Name}``: on ``tools/call``, the value of each argument whose property in the
  tool's ``inputSchema`` carries ``"x-mcp-header": "{Name}"``, omitted when the argument is
  absent or ``null``.

:func:`param_headers` reads a tool's annotations once, when the tool is listed: it gives the
tool's :data:`ParamHeaders`, or the reason the tool is invalid (a client on Streamable HTTP must
then leave the tool out of its listing). :func:`request_headers` builds the headers of one
message; :func:`encode_header_value` is the value encoding shared by ``Mcp-Name`` and
``Mcp-Param-*``, and :func:`decode_header_value` its inverse (for servers and tests).

Choices where the specification leaves room, each on the safe side:

- A value the encoding cannot carry as plain text goes as ``=?base64?{Base64(UTF-8)}?=``: one
  that is not printable ASCII, starts or ends with a space, or looks like the sentinel itself.
  A tab anywhere is encoded too (the specification allows one inside a value; the conformance
  suite expects it encoded, and a server must decode either way).
- An annotated property declares its ``type`` itself: ``string``, ``integer`` or ``boolean``,
  or a list of those, possibly with ``null`` (a ``null`` value is omitted). A property without
  a ``type`` of its own (one that takes it through ``$ref``, say) cannot be mirrored safely, so
  its annotation is invalid.
- An argument whose value does not fit the annotated property (an object for a ``string``, a
  number for a ``boolean``, an integer beyond +-(2**53 - 1)) refuses the call locally with a
  :class:`LocalProtocolError` that names the argument and the header, instead of omitting the
  header: a server must reject a body value without its header (``HeaderMismatch``), which
  would only hide the real mistake.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from typing import Any, Final, TypeAlias

import attrs

from ._errors import LocalProtocolError

__all__ = [
    "HEADER_METHOD",
    "HEADER_NAME",
    "HEADER_PARAM_PREFIX",
    "HEADER_PROTOCOL_VERSION",
    "MAX_SAFE_INTEGER",
    "ParamHeader",
    "ParamHeaders",
    "decode_header_value",
    "encode_header_value",
    "param_headers",
    "request_headers",
]

#: The header of every POST: the revision of its request.
HEADER_PROTOCOL_VERSION: Final = "MCP-Protocol-Version"
#: The header of every message: its JSON-RPC method.
HEADER_METHOD: Final = "Mcp-Method"
#: The header that names what a request acts on (tool, prompt, resource URI, task id).
HEADER_NAME: Final = "Mcp-Name"
#: The start of the header that mirrors one annotated tool argument.
HEADER_PARAM_PREFIX: Final = "Mcp-Param-"
#: The largest integer a header may carry (JavaScript's safe integers: 2**53 - 1, and its
#: negative).
MAX_SAFE_INTEGER: Final = 2**53 - 1

#: The schema keyword that asks for an argument to be mirrored into a header.
_ANNOTATION: Final = "x-mcp-header"
#: An HTTP token (RFC 9110 ``1*tchar``), ASCII only.
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", re.ASCII)
#: What a header value may hold as plain text: printable ASCII (a tab is encoded).
_PLAIN = re.compile(r"[\x20-\x7e]*", re.ASCII)
_SENTINEL_START: Final = "=?base64?"
_SENTINEL_END: Final = "?="
_SENTINEL = re.compile(r"=\?base64\?(.*)\?=", re.DOTALL)
#: The JSON Schema types an annotated property may declare (``null`` only beside another).
_MIRRORED_TYPES: Final = frozenset({"string", "integer", "boolean"})
#: Keywords whose values are data, not schemas: an ``x-mcp-header`` key inside them is no
#: annotation.
_DATA_KEYWORDS: Final = frozenset({"const", "enum", "default", "examples"})
#: Where ``Mcp-Name`` comes from, per method.
_NAME_SOURCES: Final = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}
#: The default bound on the JSON objects and arrays :func:`param_headers` looks at (the
#: registration checks' node budget).
_MAX_NODES: Final = 100_000


@attrs.frozen(kw_only=True)
class ParamHeader:
    """One argument a tool mirrors into a header: ``header`` (``Mcp-Param-{name}``) carries the
    argument at ``path`` (the chain of ``properties`` keys from the root of the input schema),
    whose property declares the JSON Schema types ``kinds`` (a subset of string, integer and
    boolean)."""

    name: str
    header: str
    path: tuple[str, ...]
    kinds: frozenset[str]


#: The arguments a tool mirrors into headers, in the order of its input schema (empty for most
#: tools).
ParamHeaders: TypeAlias = tuple[ParamHeader, ...]


# --------------------------------------------------------------------------- values


def encode_header_value(value: str | int | bool | None) -> str | None:
    """The header value of an argument (or of ``Mcp-Name``): a string as it is, an integer in
    decimal, a boolean as ``true`` / ``false``; None for ``None`` (the header is omitted).

    A string that is not printable ASCII (non-ASCII, a control character, a tab), starts or
    ends with a space, or itself looks like ``=?base64?...?=`` is sent as
    ``=?base64?{Base64(UTF-8)}?=``.

    Raises :class:`LocalProtocolError` for an integer beyond +-(2**53 - 1), a string that is not
    valid Unicode text (a lone surrogate), or any other type of value.
    """
    if value is None:
        return None
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return str(value)
        raise LocalProtocolError(
            f"the integer {value} cannot go into an HTTP header: header values are limited to "
            f"+-{MAX_SAFE_INTEGER} (2**53 - 1)"
        )
    if isinstance(value, str):
        if (
            _PLAIN.fullmatch(value) is not None
            and not value.startswith(" ")
            and not value.endswith(" ")
            and not (value.startswith(_SENTINEL_START) and value.endswith(_SENTINEL_END))
        ):
            return value
        try:
            data = value.encode("utf-8")
        except UnicodeEncodeError:
            raise LocalProtocolError(
                "a value with a lone surrogate (not valid Unicode text) cannot go into an HTTP "
                "header, nor into the JSON body"
            ) from None
        return _SENTINEL_START + base64.b64encode(data).decode("ascii") + _SENTINEL_END
    raise LocalProtocolError(
        f"{_a(_kind(value))} cannot go into an HTTP header: only strings, integers and booleans can"
    )


def decode_header_value(text: str) -> str | None:
    """The value :func:`encode_header_value` encoded as ``text``: the Base64 sentinel decoded,
    anything else as it is. None when the sentinel holds no valid Base64 of UTF-8 text."""
    match = _SENTINEL.fullmatch(text)
    if match is None:
        return text
    try:
        return base64.b64decode(match.group(1), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


# --------------------------------------------------------------------------- annotations


@attrs.frozen
class _Trail:
    """A path in the schema, as a linked list (one cell per step: no copying while walking)."""

    parent: _Trail | None
    step: str | int


def _render(trail: _Trail | None) -> str:
    steps: list[str | int] = []
    while trail is not None:
        steps.append(trail.step)
        trail = trail.parent
    text = "$"
    for step in reversed(steps):
        if isinstance(step, int):
            text += f"[{step}]"
        elif re.fullmatch(r"[A-Za-z_$][\w$-]*", step, re.ASCII):
            text += f".{step}"
        else:
            text += f"[{json.dumps(step[:60])}]"
    return text


def _steps(trail: _Trail | None) -> tuple[str, ...]:
    steps: list[str] = []
    while trail is not None:
        assert isinstance(trail.step, str)
        steps.append(trail.step)
        trail = trail.parent
    return tuple(reversed(steps))


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def _a(kind: str) -> str:
    """``kind`` with its indefinite article."""
    return ("an " if kind[:1] in ("a", "e", "i", "o", "u") else "a ") + kind


def _name_problem(name: Any) -> str | None:
    """Why ``name`` is not a valid ``x-mcp-header`` value, or None."""
    if not isinstance(name, str):
        return f"must be a string, got {_kind(name)}"
    if not name:
        return "must not be empty"
    if _TOKEN.fullmatch(name) is not None:
        return None
    bad = next(char for char in name if _TOKEN.fullmatch(char) is None)
    what = "a control character" if ord(bad) < 0x20 or ord(bad) == 0x7F else "the character"
    return (
        f"{json.dumps(name[:60])} holds {what} {bad!r}: a header name is an HTTP token "
        "(ASCII letters, digits and !#$%&'*+-.^_`|~)"
    )


def _declared_kinds(schema: Mapping[str, Any]) -> frozenset[str] | str:
    """The mirrored types the property ``schema`` declares, or why it may not be mirrored."""
    declared = schema.get("type")
    names = declared if isinstance(declared, list) else [declared]
    if declared is None or not names:
        return (
            "the property declares no 'type' of its own; only a string, integer or boolean "
            "property may be mirrored into a header"
        )
    texts = [name for name in names if isinstance(name, str)]
    if len(texts) != len(names):
        return "the property's 'type' is not a type name or a list of type names"
    kinds = frozenset(texts) - {"null"}
    if not kinds or not kinds <= _MIRRORED_TYPES:
        shown = " or ".join(sorted(set(texts)))
        return (
            f"the property is of type {shown}; only string, integer and boolean properties "
            "may be mirrored into a header (not number, object, array or null)"
        )
    return kinds


#: The types of plain JSON values that hold no others.
_SCALARS: Final = frozenset({str, int, float, bool, type(None)})


def _may_annotate(schema: Any, max_nodes: int) -> bool:
    """False when no object in ``schema`` (plain JSON: ``dict``, ``list`` and scalars, exactly)
    has an ``x-mcp-header`` key: most schemas, told in about a third of the time of the walk
    of :func:`param_headers`. True when one may have, or the value is not plain JSON, or it
    holds more than ``max_nodes`` objects and arrays (the walk then says what)."""
    if type(schema) is not dict:
        return type(schema) not in _SCALARS
    stack: list[Any] = [schema]
    pop = stack.pop
    push = stack.append
    scalars = _SCALARS
    nodes = 0
    while stack:
        node = pop()
        nodes += 1
        if nodes > max_nodes:
            return True
        if type(node) is dict:
            if _ANNOTATION in node:
                return True
            values = node.values()
        else:
            values = node
        for value in values:
            kind = type(value)
            if kind is dict or kind is list:
                push(value)
            elif kind not in scalars:
                return True
    return False


def param_headers(input_schema: Any, *, max_nodes: int = _MAX_NODES) -> ParamHeaders | str:
    """The arguments a tool mirrors into ``Mcp-Param-*`` headers, read off the ``x-mcp-header``
    annotations of its ``input_schema``; or, as a string, the reason the annotations make the
    tool invalid (a client on Streamable HTTP must leave it out of its listing).

    An annotation is valid when its value is a non-empty HTTP token (``1*tchar``, so no
    controls, CR or LF), unique in the schema ignoring case, on a property of type string,
    integer or boolean (see :func:`_declared_kinds`), and reachable from the root of the schema
    through ``properties`` keys alone: one under ``items``, ``oneOf`` / ``anyOf`` / ``allOf``,
    ``not``, ``if`` / ``then`` / ``else``, ``$defs``, ``additionalProperties``... (any other
    keyword whose value may hold schemas) is invalid. An ``x-mcp-header`` key inside data
    (``const``, ``enum``, ``default``, ``examples``) is no annotation.

    The walk is iterative and looks at most ``max_nodes`` JSON objects and arrays (a schema
    past that is invalid too, as too large to check); it never raises.
    """
    if not _may_annotate(input_schema, max_nodes):
        return ()
    found: list[ParamHeader] = []
    seen: dict[str, str] = {}  # lower-case name -> where it was
    # (node, its place in the chain of 'properties' keys from the root or None, its place)
    stack: list[tuple[Any, _Trail | None, bool, _Trail | None]] = [(input_schema, None, True, None)]
    nodes = 0
    while stack:
        node, chain, reachable, trail = stack.pop()
        nodes += 1
        if nodes > max_nodes:
            return (
                "inputSchema too large to check its x-mcp-header annotations (more than "
                f"{max_nodes:,} objects and arrays)"
            )
        if isinstance(node, list | tuple):
            stack.extend(
                (item, None, False, _Trail(trail, index))
                for index, item in reversed(list(enumerate(node)))
                if isinstance(item, Mapping | list | tuple)
            )
            continue
        if not isinstance(node, Mapping):
            continue
        if _ANNOTATION in node:
            where = _render(_Trail(trail, _ANNOTATION))
            name = node[_ANNOTATION]
            problem = _name_problem(name)
            if problem is not None:
                return f"invalid x-mcp-header at {where}: the value {problem}"
            if trail is None:
                return (
                    f"invalid x-mcp-header {name!r} at {where}: it is on the root of the "
                    "inputSchema, not on a property"
                )
            if not reachable or chain is None:
                return (
                    f"invalid x-mcp-header {name!r} at {where}: an annotated property must be "
                    "reachable from the root of the inputSchema through 'properties' keys alone "
                    "(not through items, oneOf/anyOf/allOf, not, if/then/else, $ref or $defs)"
                )
            kinds = _declared_kinds(node)
            if isinstance(kinds, str):
                return f"invalid x-mcp-header {name!r} at {where}: {kinds}"
            folded = name.lower()
            if folded in seen:
                return (
                    f"invalid x-mcp-header {name!r} at {where}: {seen[folded]} has the same "
                    "header name (names are compared ignoring case)"
                )
            seen[folded] = where
            found.append(
                ParamHeader(
                    name=name, header=HEADER_PARAM_PREFIX + name, path=_steps(chain), kinds=kinds
                )
            )
        children: list[tuple[Any, _Trail | None, bool, _Trail | None]] = []
        for key, sub in node.items():
            if (
                not isinstance(key, str)
                or key in _DATA_KEYWORDS
                or key == _ANNOTATION
                or not isinstance(sub, Mapping | list | tuple)
            ):
                continue
            place = _Trail(trail, key)
            if key == "properties" and isinstance(sub, Mapping):
                for prop_name, prop in sub.items():
                    if isinstance(prop_name, str) and isinstance(prop, Mapping):
                        link = _Trail(chain, prop_name) if reachable else None
                        children.append((prop, link, reachable, _Trail(place, prop_name)))
                continue
            # Any other keyword that may hold schemas: what is under it is not reachable.
            children.append((sub, None, False, place))
        stack.extend(reversed(children))
    return tuple(found)


# --------------------------------------------------------------------------- one message


def _argument(arguments: Any, path: tuple[str, ...]) -> Any:
    """The value at ``path`` in ``arguments``; None when it is absent."""
    value = arguments
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
        if value is None:
            return None
    return value


def _mirrored(header: ParamHeader, value: Any, tool: str) -> str | None:
    """The header value of argument ``value`` for ``header``; LocalProtocolError when it does
    not fit the property's declared types."""
    if value is None:
        return None
    kinds = header.kinds
    if isinstance(value, bool):
        fits = "boolean" in kinds
    elif isinstance(value, int):
        fits = "integer" in kinds
    elif isinstance(value, float):
        # JSON Schema: 3.0 is an integer. The body says 3.0, the header 3 (compared as numbers).
        fits = "integer" in kinds and value.is_integer() and abs(value) <= MAX_SAFE_INTEGER
        if fits:
            value = int(value)
    elif isinstance(value, str):
        fits = "string" in kinds
    else:
        fits = False
    where = ".".join(header.path)
    if not fits:
        expected = " or ".join(sorted(kinds))
        raise LocalProtocolError(
            f"tools/call {tool!r}: argument {where!r} must be {expected} (the tool mirrors it "
            f"into the header {header.header}), got {_kind(value)}; fix the argument"
        )
    try:
        return encode_header_value(value)
    except LocalProtocolError as exc:
        raise LocalProtocolError(
            f"tools/call {tool!r}: argument {where!r} (mirrored into the header "
            f"{header.header}): {exc}"
        ) from None


def request_headers(
    method: str,
    params: Mapping[str, Any] | None,
    *,
    version: str,
    param_headers: ParamHeaders | None = None,
) -> dict[str, str]:
    """The headers of one 2026-07-28 Streamable HTTP POST carrying ``method`` with ``params``
    (a request or a notification): ``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name`` where
    the method has one, and for ``tools/call`` one ``Mcp-Param-{Name}`` per entry of the tool's
    ``param_headers`` (from :func:`param_headers`) whose argument is present and not null.

    Raises :class:`LocalProtocolError` when ``version`` differs from the revision in
    ``params._meta``, when the source of ``Mcp-Name`` is missing or not a string, or when an
    argument does not fit its annotated property (see the module docstring).
    """
    headers = {HEADER_PROTOCOL_VERSION: version, HEADER_METHOD: method}
    if params is not None:
        meta = params.get("_meta")
        if isinstance(meta, Mapping):
            stated = meta.get("io.modelcontextprotocol/protocolVersion", version)
            if stated != version:
                raise LocalProtocolError(
                    f"{method}: the header {HEADER_PROTOCOL_VERSION} would say {version!r} but "
                    f"_meta says {stated!r}; they must be equal"
                )
    source = _NAME_SOURCES.get(method)
    if source is not None:
        value = params.get(source) if params is not None else None
        if not isinstance(value, str):
            raise LocalProtocolError(
                f"{method} needs params.{source} (a string) for its {HEADER_NAME} header, got "
                f"{_kind(value)}"
            )
        encoded = encode_header_value(value)
        assert encoded is not None
        headers[HEADER_NAME] = encoded
    if param_headers and method == "tools/call" and params is not None:
        arguments = params.get("arguments")
        tool = params.get("name")
        for header in param_headers:
            mirrored = _mirrored(header, _argument(arguments, header.path), str(tool))
            if mirrored is not None:
                headers[header.header] = mirrored
    return headers
