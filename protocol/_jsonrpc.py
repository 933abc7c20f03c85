"""JSON-RPC 2.0 for MCP: envelopes, parsing, serialising, ids and request correlation.

This is the per-message hot path, so it is written by hand (no cattrs): :func:`classify` turns a
decoded JSON value into one of four envelope classes with plain ``dict`` checks, and
:func:`serialize` writes compact UTF-8 JSON. Params and results stay plain JSON objects here;
``_methods`` decodes them into wire types.

:class:`JsonRpcConnection` is the client side's correlation machine in the h11 manner: it does no
I/O and knows no clock. Feed it the messages that arrive (:meth:`~JsonRpcConnection.receive`)
and it says what they mean as events; ask it for the messages to send and it keeps track of what
is in flight. Losing the connection is an event too (:meth:`~JsonRpcConnection.connection_lost`,
or :meth:`~JsonRpcConnection.close` when the caller fails the waiting requests itself), after
which the machine refuses to be used again.

Hostile input
-------------
Whatever bytes a server sends, :func:`parse_message` raises nothing but
:class:`InvalidMessage`. A message nested more than :data:`MAX_JSON_DEPTH` (256) arrays and
objects deep is refused like invalid JSON, so no later code meets server JSON deeper than that:
code that recurses once per level (``repr``, ``==``, ``json.dumps``) has room to walk it under
the interpreter's recursion limit (1,000 frames) even from a stack 700 frames deep. The JSON
decoder recurses too, against the same limit: a frame nested deeper than the caller's stack has
room for (100,000 ``[`` on one line) is refused as "nested too deeply to parse". So the answer
for a given frame is the same from any caller less than about 700 frames deep.

:func:`salvage_response_ids` reads the ids of the answers in a frame that :func:`parse_message`
refused, so that the calls they answer can fail at once instead of waiting for their timeout.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final, TypeAlias, cast

import attrs

from ._codec import json_kind
from ._errors import InvalidMessage, LocalProtocolError, RemoteProtocolError

__all__ = [
    "CANCELLED_NOTIFICATION",
    "MAX_JSON_DEPTH",
    "ConnectionStatistics",
    "ErrorObject",
    "ErrorReceived",
    "ErrorResponse",
    "Event",
    "IdAllocator",
    "JsonRpcConnection",
    "Message",
    "Notification",
    "NotificationReceived",
    "Request",
    "RequestFailed",
    "RequestId",
    "RequestReceived",
    "Response",
    "ResponseReceived",
    "UnexpectedResponse",
    "cancel_notification",
    "classify",
    "decode_frame",
    "encode_json",
    "encode_message",
    "frame_messages",
    "parse_message",
    "salvage_response_ids",
    "serialize",
    "serialize_request",
]

RequestId: TypeAlias = int | str

#: The method of the notification that cancels a request.
CANCELLED_NOTIFICATION: Final = "notifications/cancelled"

_EXCERPT_CHARS: Final = 80

#: The deepest nesting of arrays and objects that :func:`parse_message` accepts: ``{}`` and
#: ``[1]`` are 1 deep, ``{"a": [1]}`` is 2 deep. JSON-RPC envelopes of MCP need about 10 levels
#: and the deepest real tool schemas a few dozen; the official Python SDK (pydantic's parser)
#: refuses messages deeper than 201, serde_json (the Rust SDK) deeper than 128. A deeper message
#: is refused with :class:`InvalidMessage`.
MAX_JSON_DEPTH: Final = 256


# --------------------------------------------------------------------------- envelopes


@attrs.frozen(kw_only=True)
class Request:
    """A JSON-RPC request: a call that expects exactly one response with the same ``id``."""

    id: RequestId
    method: str
    params: Mapping[str, Any] | None = None


@attrs.frozen(kw_only=True)
class Notification:
    """A JSON-RPC notification: a one-way message, never answered."""

    method: str
    params: Mapping[str, Any] | None = None


@attrs.frozen(kw_only=True)
class ErrorObject:
    """The ``error`` member of an error response.

    ``has_data`` tells an absent ``data`` member from ``"data": null``; it defaults to
    ``data is not None``, so pass ``has_data=True`` only to send an explicit ``null``.
    """

    code: int
    message: str
    data: Any = None
    has_data: bool = attrs.field()

    @has_data.default
    def _has_data_default(self) -> bool:
        return self.data is not None


@attrs.frozen(kw_only=True)
class Response:
    """A successful JSON-RPC response. MCP results are always JSON objects."""

    id: RequestId
    result: Mapping[str, Any]


@attrs.frozen(kw_only=True)
class ErrorResponse:
    """A JSON-RPC error response. ``id`` is ``None`` when the peer could not read the request's
    id (a parse error, for example)."""

    id: RequestId | None
    error: ErrorObject


Message: TypeAlias = Request | Notification | Response | ErrorResponse


# --------------------------------------------------------------------------- classification


def _short(value: Any) -> str:
    try:
        text = repr(value)
    except RecursionError:  # a value nested deeper than the stack has room for
        return json_kind(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _invalid(problem: str, path: str) -> InvalidMessage:
    return InvalidMessage(
        f"invalid JSON-RPC message: {problem} @ {path}", path=path, errors=(f"{problem} @ {path}",)
    )


def _request_id(obj: dict[str, Any], path: str) -> RequestId:
    value = obj["id"]
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise _invalid(f"an id must be a string or an integer, got {json_kind(value)}", f"{path}.id")


def classify(obj: Any, *, path: str = "$") -> Message:
    """Turn one decoded JSON value into the JSON-RPC envelope it is.

    The kind is decided by which of ``method``, ``id``, ``result`` and ``error`` are present:
    ``method`` with ``id`` is a :class:`Request`, ``method`` alone a :class:`Notification`,
    ``result`` a :class:`Response` and ``error`` an :class:`ErrorResponse`. Unknown top-level keys
    are ignored. ``path`` is the JSON path of ``obj`` (``$[2]`` inside a batch).

    Raises :class:`InvalidMessage` whose ``path`` names the offending member when ``obj`` is not a
    JSON-RPC 2.0 message as MCP uses them: not an object, ``jsonrpc`` other than ``"2.0"``, an id
    that is not a string or an integer (only an error response may have a null or absent id),
    ``params`` or ``result`` that is not an object, an error without an integer ``code`` and a
    string ``message``, or a mix of request and response members.
    """
    if type(obj) is not dict:
        raise _invalid(f"expected a JSON-RPC message object, got {json_kind(obj)}", path)
    if obj.get("jsonrpc") != "2.0":
        if "jsonrpc" not in obj:
            raise _invalid('"jsonrpc": "2.0" is missing', f"{path}.jsonrpc")
        raise _invalid(f'"jsonrpc" must be "2.0", got {_short(obj["jsonrpc"])}', f"{path}.jsonrpc")

    if "method" in obj:
        method = obj["method"]
        if type(method) is not str:
            raise _invalid(f"method must be a string, got {json_kind(method)}", f"{path}.method")
        if "result" in obj or "error" in obj:
            member = "result" if "result" in obj else "error"
            raise _invalid(
                f"a message with a method cannot also carry {member!r}", f"{path}.{member}"
            )
        if "params" in obj:
            params = obj["params"]
            if type(params) is not dict:
                raise _invalid(
                    f"params must be an object (MCP never passes params by position), "
                    f"got {json_kind(params)}",
                    f"{path}.params",
                )
        else:
            params = None
        if "id" in obj:
            return Request(id=_request_id(obj, path), method=method, params=params)
        return Notification(method=method, params=params)

    if "result" in obj:
        if "error" in obj:
            raise _invalid("a response cannot carry both 'result' and 'error'", path)
        if "id" not in obj:
            raise _invalid("a response must carry the id of its request", f"{path}.id")
        result = obj["result"]
        if type(result) is not dict:
            raise _invalid(f"result must be an object, got {json_kind(result)}", f"{path}.result")
        return Response(id=_request_id(obj, path), result=result)

    if "error" in obj:
        error = obj["error"]
        if type(error) is not dict:
            raise _invalid(f"error must be an object, got {json_kind(error)}", f"{path}.error")
        code = error.get("code")
        if type(code) is not int:
            got = json_kind(code) if "code" in error else "nothing"
            raise _invalid(f"error.code must be an integer, got {got}", f"{path}.error.code")
        message = error.get("message")
        if type(message) is not str:
            got = json_kind(message) if "message" in error else "nothing"
            raise _invalid(f"error.message must be a string, got {got}", f"{path}.error.message")
        rid = obj.get("id")
        if rid is not None:
            rid = _request_id(obj, path)
        if "data" in error:
            err = ErrorObject(code=code, message=message, data=error["data"], has_data=True)
        else:
            err = ErrorObject(code=code, message=message, has_data=False)
        return ErrorResponse(id=rid, error=err)

    raise _invalid("not a JSON-RPC message: it has no method, result or error", path)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


#: One decoder for every frame: ``json.loads(text, parse_constant=...)`` builds a new decoder on
#: each call, which costs more than parsing a small message.
_DECODER: Final = json.JSONDecoder(parse_constant=_reject_constant)
#: The decoder's own scanner (set by JSONDecoder.__init__; typeshed does not declare it).
_scan_once: Callable[[str, int], tuple[Any, int]] = cast(Any, _DECODER).scan_once
_decode_with_whitespace = _DECODER.decode


def _decode_json(text: str) -> Any:
    """``_DECODER.decode(text)``: the decoder's scanner called directly for a text that starts
    with its value and ends with it (a frame as servers write it), the decoder's own ``decode``
    for anything else (whitespace around the value, no value, extra data: its errors)."""
    try:
        obj, end = _scan_once(text, 0)
    except StopIteration:
        return _decode_with_whitespace(text)
    if end != len(text):
        return _decode_with_whitespace(text)
    return obj


def _excerpt(data: bytes | str) -> str:
    text = data if isinstance(data, str) else data[: _EXCERPT_CHARS * 4].decode("utf-8", "replace")
    if len(text) > _EXCERPT_CHARS:
        return repr(text[:_EXCERPT_CHARS]) + "..."
    return repr(text)


#: How many levels of the path a refusal for deep nesting names.
_PATH_LEVELS: Final = 8


#: Texts up to this many characters are walked depth first (cheapest for the few containers of
#: a common message), longer ones a level at a time (cheapest for many containers).
_WALK_BY_LEVEL_CHARS: Final = 4096

_CONTAINERS: Final = frozenset((dict, list))


def _deeper_than(value: Any, limit: int, size: int) -> bool:
    """Whether ``value`` (JSON of ``size`` characters, decoded) nests arrays and objects more
    than ``limit`` deep.

    Iterative, and it visits only arrays and objects: about half a microsecond for a common
    message, and for a listing of many schemas about half the time of decoding it.
    """
    if type(value) not in _CONTAINERS:
        return False
    if size > _WALK_BY_LEVEL_CHARS:
        level = [value]
        for _ in range(limit):
            level = [
                item
                for node in level
                for item in (node.values() if type(node) is dict else node)
                if type(item) in _CONTAINERS
            ]
            if not level:
                return False
        return True
    stack: list[tuple[Any, int]] = [(value, 1)]
    pop = stack.pop
    push = stack.append
    while stack:
        node, depth = pop()
        if depth > limit:
            return True
        depth += 1
        for item in node.values() if type(node) is dict else node:
            if type(item) in _CONTAINERS:
                push((item, depth))
    return False


def _member_path(path: str, key: str) -> str:
    return f"{path}.{key}" if key.isidentifier() else f"{path}[{json.dumps(key)}]"


def _deep_path(value: Any, limit: int) -> str:
    """The JSON path of the first array or object nested more than ``limit`` deep in ``value``,
    cut to its ancestor :data:`_PATH_LEVELS` levels down (so a refusal names where the deep part
    starts in a few dozen characters, not in thousands)."""
    stack: list[tuple[Any, int, str]] = [(value, 1, "$")]
    while stack:
        node, depth, path = stack.pop()
        if depth > limit:
            return path
        if type(node) is dict:
            items = [(key, item) for key, item in node.items() if type(item) in _CONTAINERS]
        else:
            items = [(index, item) for index, item in enumerate(node) if type(item) in _CONTAINERS]
        for key, item in reversed(items):
            if depth >= _PATH_LEVELS:
                child = path
            elif isinstance(key, str):
                child = _member_path(path, key)
            else:
                child = f"{path}[{key}]"
            stack.append((item, depth + 1, child))
    return "$"  # pragma: no cover - only called for a value deeper than limit


def parse_message(
    data: bytes | str, *, allow_batch: bool = False, max_depth: int | None = MAX_JSON_DEPTH
) -> Message | tuple[Message, ...]:
    """Parse one frame (a stdio line, an SSE event's data, an HTTP body) into envelopes.

    Returns one message, or a tuple of them for a batch. Batches (JSON arrays) exist only in
    protocol revision 2025-03-26; pass ``allow_batch=True`` on such connections.

    Raises :class:`InvalidMessage` with path ``$`` and an excerpt of the input when the bytes are
    not UTF-8 or not JSON (``NaN`` and ``Infinity`` are not JSON), or nested too deeply for the
    decoder; for a batch when batches are not allowed, and for an empty batch; when arrays and
    objects nest more than ``max_depth`` deep (:data:`MAX_JSON_DEPTH` by default; ``None``: no
    limit but the decoder's, for frames we wrote ourselves), with the path of where the deep
    part starts; and whatever :func:`classify` raises for a message that is not JSON-RPC (inside
    a batch the path names the item: ``$[2].method``). Nothing else, whatever the input.
    """
    return frame_messages(decode_frame(data, max_depth=max_depth), data, allow_batch=allow_batch)


def decode_frame(data: bytes | str, *, max_depth: int | None = MAX_JSON_DEPTH) -> Any:
    """The first half of :func:`parse_message`: the frame's JSON value, or
    :class:`InvalidMessage` as it raises for bytes that are not UTF-8, not JSON or nested too
    deeply. :func:`frame_messages` is the second half (a pending-call table looks at the value
    in between: :meth:`JsonRpcConnection.take_answer`)."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError as exc:
        raise InvalidMessage(
            f"message is not valid UTF-8 (byte {exc.start}): {_excerpt(data)}",
            path="$",
            errors=(f"invalid UTF-8 at byte {exc.start} @ $",),
        ) from None
    try:
        if text.startswith("\ufeff"):  # as json.loads says it
            raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
        obj = _decode_json(text)
    except ValueError as exc:  # json.JSONDecodeError, NaN/Infinity, huge integers
        raise InvalidMessage(
            f"message is not valid JSON ({exc}): {_excerpt(text)}",
            path="$",
            errors=(f"{exc} @ $",),
        ) from None
    except RecursionError:
        raise InvalidMessage(
            f"message is nested too deeply to parse: {_excerpt(text)}",
            path="$",
            errors=("nested too deeply @ $",),
        ) from None
    # JSON nested d deep has at least 2 * d characters: a shorter text is never walked.
    size = len(text)
    if max_depth is not None and size > 2 * max_depth and _deeper_than(obj, max_depth, size):
        path = _deep_path(obj, max_depth)
        raise InvalidMessage(
            f"message is nested more than {max_depth} levels deep (arrays and objects, under "
            f"{path}); MCP messages never need that: {_excerpt(text)}",
            path=path,
            errors=(f"nested more than {max_depth} levels deep @ {path}",),
        )
    return obj


def frame_messages(
    obj: Any, data: bytes | str, *, allow_batch: bool = False
) -> Message | tuple[Message, ...]:
    """The second half of :func:`parse_message`: the envelopes of ``obj``, the value
    :func:`decode_frame` gave for the frame ``data`` (quoted in errors). Raises
    :class:`InvalidMessage` as :func:`parse_message` does for a batch where none is allowed, an
    empty batch, and what :func:`classify` raises."""
    if type(obj) is list:
        if not allow_batch:
            raise InvalidMessage(
                "got a JSON array (a batch): batches are only valid in protocol version "
                f"2025-03-26: {_excerpt(data)}",
                path="$",
                errors=("unexpected batch @ $",),
            )
        if not obj:
            raise InvalidMessage(
                "got an empty batch: a batch must hold at least one message",
                path="$",
                errors=("empty batch @ $",),
            )
        return tuple(classify(item, path=f"$[{index}]") for index, item in enumerate(obj))
    return classify(obj)


# --------------------------------------------------------------------------- salvaging ids

_WHITESPACE = re.compile(r"[ \t\n\r]*")

#: The decoder of :func:`salvage_response_ids`: it reads ``NaN`` and ``Infinity`` (they make a
#: frame invalid, not unreadable).
_read_value = json.JSONDecoder().raw_decode

#: :func:`salvage_response_ids` reads at most this many messages of one frame (values glued on
#: one line, items of a batch) and this many top-level members of one object, so that a hostile
#: frame of 16 MiB of ``{}{}{}...`` costs milliseconds, not seconds.
_SALVAGE_LIMIT: Final = 1000


#: What may follow a whole number in JSON (an empty string is no delimiter: in a cut frame, the
#: number may go on).
_AFTER_NUMBER: Final = frozenset(" \t\n\r,}")


def _skip(text: str, pos: int) -> int:
    """The position of the first character at or after ``pos`` that is not JSON whitespace."""
    match = _WHITESPACE.match(text, pos)
    return pos if match is None else match.end()


def _as_id(value: Any) -> RequestId | None:
    """``value`` if it is a request id (a string or an integer), else None."""
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    return None


def _response_id(value: Any) -> RequestId | None:
    """The id of a complete response: an object with ``result`` or ``error``, a string or
    integer ``id``, and no ``method``."""
    if type(value) is not dict or "method" in value:
        return None
    if "result" not in value and "error" not in value:
        return None
    return _as_id(value.get("id"))


def _cut_object_id(text: str, pos: int) -> RequestId | None:
    """The top-level ``id`` of the object that starts at ``text[pos]`` (``{``) and cannot be
    decoded whole (cut short, or invalid further on).

    Its members are read one by one, in order, up to the first one that cannot be read. The id
    counts when it was read whole (a number only when whitespace, ``,`` or ``}`` follows it, else
    it may have been cut in the middle) and no ``method`` or ``params`` member was read (those
    make it a request or a notification). Reading stops early once the id and the key ``result`` or
    ``error`` were read.
    """
    end = len(text)
    pos = _skip(text, pos + 1)
    rid: RequestId | None = None
    answer = False
    for _ in range(_SALVAGE_LIMIT):
        if pos >= end or text[pos] != '"':
            break
        try:
            key, pos = _read_value(text, pos)
        except ValueError:
            break
        if key == "method" or key == "params":
            return None
        if key == "result" or key == "error":
            if rid is not None:
                return rid
            answer = True
        pos = _skip(text, pos)
        if text[pos : pos + 1] != ":":
            break
        start = _skip(text, pos + 1)
        try:
            value, stop = _read_value(text, start)
        except (ValueError, RecursionError):
            break
        if key == "id":
            # A number is whole only if what follows cannot continue it (12 may be 123, 12.5).
            whole = text[start] == '"' or text[stop : stop + 1] in _AFTER_NUMBER
            rid = _as_id(value) if whole else None
            if rid is not None and answer:
                return rid
        pos = _skip(text, stop)
        if text[pos : pos + 1] != ",":
            break
        pos = _skip(text, pos + 1)
    return rid


def _cut_array_ids(text: str, pos: int) -> list[RequestId]:
    """The ids of the responses in the array that starts at ``text[pos]`` (``[``) and cannot
    be decoded whole: each item that decodes, then the top-level id of the first one that does
    not. Reading stops at an item that is not an object."""
    found: list[RequestId] = []
    pos = _skip(text, pos + 1)
    for _ in range(_SALVAGE_LIMIT):
        if text[pos : pos + 1] != "{":
            break
        try:
            item, stop = _read_value(text, pos)
        except (ValueError, RecursionError):
            rid = _cut_object_id(text, pos)
            if rid is not None:
                found.append(rid)
            break
        rid = _response_id(item)
        if rid is not None:
            found.append(rid)
        pos = _skip(text, stop)
        if text[pos : pos + 1] != ",":
            break
        pos = _skip(text, pos + 1)
    return found


def salvage_response_ids(data: bytes | str) -> tuple[RequestId, ...]:
    """The ids of the responses that can be read from a frame :func:`parse_message` refused.

    A response here is an object with a string or integer ``id``, ``result`` or ``error``, and
    no ``method``: the answer to one of our requests. What is read, in order:

    - each JSON value of the frame, from the first one on, as long as they decode whole: a
      response gives its id; an array (a batch, allowed or not) gives the ids of the responses
      among its items; a value that is neither an object nor an array ends the reading. So an
      answer glued to the start of another message (``{...,"id":3,"result":{}}{"jsonrp``)
      gives ``3``;
    - then the first value that does not decode whole (cut short, or invalid further on): of an
      object, its top-level ``id`` if it was read before the cut and no ``method`` or ``params``
      member was (``{"jsonrpc":"2.0","id":3,"res`` gives ``3``); of an array, the ids of its
      items read so far and of the item that is cut.

    Only the top level of a message is read (an ``id`` inside ``params`` or ``result`` is never
    taken); bytes that are not UTF-8 are read as U+FFFD. A request or a notification never gives
    its id. At most 1,000 messages (glued values, batch items) of a frame and 1,000 members of
    one object are read. Never raises; the work is linear in the size of ``data`` (the JSON
    decoder's, in C), and a value nested deeper than the decoder can go (``[`` 100,000 times)
    stops the reading at once.

    For the session: when :func:`parse_message` raises :class:`InvalidMessage` for a frame,
    the calls waiting for these ids will get no other answer from it.
    """
    text = data if isinstance(data, str) else bytes(data).decode("utf-8", "replace")
    end = len(text)
    pos = _skip(text, 1 if text.startswith("\ufeff") else 0)
    found: list[RequestId] = []
    for _ in range(_SALVAGE_LIMIT):
        if pos >= end:
            break
        try:
            value, stop = _read_value(text, pos)
        except (ValueError, RecursionError):
            if text[pos] == "{":
                rid = _cut_object_id(text, pos)
                if rid is not None:
                    found.append(rid)
            elif text[pos] == "[":
                found.extend(_cut_array_ids(text, pos))
            break
        if type(value) is dict:
            rid = _response_id(value)
            if rid is not None:
                found.append(rid)
        elif type(value) is list:
            for item in value[:_SALVAGE_LIMIT]:
                rid = _response_id(item)
                if rid is not None:
                    found.append(rid)
        else:
            break
        pos = _skip(text, stop)
    return tuple(found)


# --------------------------------------------------------------------------- serialising


def _plain(value: Mapping[str, Any]) -> dict[str, Any]:
    return value if type(value) is dict else dict(value)


def encode_message(msg: Message) -> dict[str, Any]:
    """The JSON-ready ``dict`` of one message, with ``"jsonrpc": "2.0"`` first.

    Raises :class:`LocalProtocolError` if ``msg`` is not one of the four envelope classes.
    """
    if isinstance(msg, Request):
        out: dict[str, Any] = {"jsonrpc": "2.0", "id": msg.id, "method": msg.method}
        if msg.params is not None:
            out["params"] = _plain(msg.params)
        return out
    if isinstance(msg, Notification):
        out = {"jsonrpc": "2.0", "method": msg.method}
        if msg.params is not None:
            out["params"] = _plain(msg.params)
        return out
    if isinstance(msg, Response):
        return {"jsonrpc": "2.0", "id": msg.id, "result": _plain(msg.result)}
    if isinstance(msg, ErrorResponse):
        error = msg.error
        err: dict[str, Any] = {"code": error.code, "message": error.message}
        if error.has_data:
            err["data"] = error.data
        return {"jsonrpc": "2.0", "id": msg.id, "error": err}
    raise LocalProtocolError(f"cannot encode {msg!r}: not a JSON-RPC message")


def _json_default(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, tuple | frozenset | set):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _make_dumps() -> Callable[[Any], str]:
    """The compact JSON encoder ``serialize`` uses.

    ``JSONEncoder.encode`` builds a new C encoder on every call; this one is built once. It keeps
    no record of the containers it is inside (``markers=None``), so it is shared safely by every
    thread, and a value that contains itself ends in :class:`RecursionError` (as a value nested
    too deeply does) instead of ``ValueError("Circular reference detected")``. Where the C
    encoder is missing or does not behave as expected, ``JSONEncoder.encode`` is used.
    """
    encoder = json.JSONEncoder(
        ensure_ascii=False, allow_nan=False, separators=(",", ":"), default=_json_default
    )
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - CPython always has it
        return encoder.encode
    probe = {"a": [1, -2.5, "é\n\u2028", None, True, False], "b": {}, "c": ()}
    try:
        iterencode = make(
            None, _json_default, json.encoder.encode_basestring, None, ":", ",", False, False, False
        )
        if "".join(iterencode(probe, 0)) != encoder.encode(probe):  # pragma: no cover
            return encoder.encode
    except Exception:  # pragma: no cover - a future C encoder with another signature
        return encoder.encode

    def dumps(value: Any) -> str:
        return "".join(iterencode(value, 0))

    return dumps


_dumps = _make_dumps()


def serialize(msg: Message | Sequence[Message]) -> bytes:
    """Compact UTF-8 JSON for one message, or a JSON array for a sequence (a batch).

    There is no trailing newline (framing adds it) and no other whitespace; non-ASCII text is
    written as UTF-8, not as ``\\u`` escapes.

    Raises :class:`LocalProtocolError` when a value is not JSON (NaN, a set of objects, an
    arbitrary Python object...), contains itself or is nested too deeply, or for an empty batch.
    """
    if isinstance(msg, Request | Notification | Response | ErrorResponse):
        value: Any = encode_message(msg)
    else:
        if not msg:
            raise LocalProtocolError("cannot send an empty batch")
        value = [encode_message(m) for m in msg]
    return _encode(value)


def serialize_request(
    id: RequestId, method: str, params: Mapping[str, Any] | None, *, meta: bytes | None = None
) -> bytes:
    """``serialize(Request(id=id, method=method, params=params))`` without building the
    :class:`Request` (a session's way, once per call). Raises like :func:`serialize`.

    ``meta``: a ``_meta`` object already encoded (by :func:`encode_json`), put into the params
    as their last member, as if ``params`` held it: a 2026-07-28 session encodes its request
    envelope once, not once per request. ``params`` must not hold a ``_meta`` of its own then
    (:class:`LocalProtocolError`)."""
    value: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
    if meta is None:
        if params is not None:
            value["params"] = params if type(params) is dict else dict(params)
        return _encode(value)
    if params and "_meta" in params:
        raise LocalProtocolError("params hold a _meta of their own: merge it, then serialize")
    value["params"] = params if type(params) is dict else dict(params or {})
    encoded = _encode(value)  # ends with the params' closing brace and the message's: b"}}"
    return b"".join((encoded[:-2], b',"_meta":' if params else b'"_meta":', meta, b"}}"))


def encode_json(value: Any) -> bytes:
    """Compact UTF-8 JSON of ``value``, as :func:`serialize` writes values (for
    :func:`serialize_request`'s ``meta``). Raises :class:`LocalProtocolError` when ``value`` is
    not JSON."""
    return _encode(value)


def _encode(value: Any) -> bytes:
    """Compact UTF-8 JSON of a message's value, or :class:`LocalProtocolError` saying why not."""
    try:
        return _dumps(value).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise LocalProtocolError(f"cannot serialise the message to JSON: {exc}") from exc
    except RecursionError:
        raise LocalProtocolError(
            "cannot serialise the message to JSON: a value in it contains itself, or it is "
            "nested too deeply"
        ) from None


# --------------------------------------------------------------------------- ids


class IdAllocator:
    """Request ids for one connection: increasing integers from 1, never reused."""

    __slots__ = ("_next",)

    def __init__(self) -> None:
        self._next = 1

    def next(self) -> int:
        """The next id. Never raises."""
        value = self._next
        self._next = value + 1
        return value

    def advance_past(self, used: RequestId) -> None:
        """Make sure :meth:`next` never returns ``used`` (an id chosen by hand). Never raises."""
        if type(used) is int and used >= self._next:
            self._next = used + 1

    def __repr__(self) -> str:
        return f"<IdAllocator next={self._next}>"


# --------------------------------------------------------------------------- events


@attrs.frozen(kw_only=True)
class ResponseReceived:
    """The server answered our request ``id`` (of ``method``) with ``result``."""

    id: RequestId
    method: str
    result: Mapping[str, Any]


@attrs.frozen(kw_only=True)
class ErrorReceived:
    """The server answered our request ``id`` (of ``method``) with a JSON-RPC error.

    ``id`` and ``method`` are ``None`` when the server could not tell which request it answers
    (an error response with ``"id": null``, such as a parse error report).
    """

    id: RequestId | None
    method: str | None
    error: ErrorObject


@attrs.frozen(kw_only=True)
class UnexpectedResponse:
    """A response for an id we are not waiting for: a late answer to a request we cancelled or
    timed out (normal), or a bogus id from the server."""

    message: Response | ErrorResponse


@attrs.frozen(kw_only=True)
class RequestReceived:
    """The server sent us a request; answer it with :meth:`JsonRpcConnection.respond` or
    :meth:`JsonRpcConnection.respond_error`."""

    request: Request


@attrs.frozen(kw_only=True)
class NotificationReceived:
    """The server sent us a notification."""

    notification: Notification


@attrs.frozen(kw_only=True)
class RequestFailed:
    """The connection was lost while our request ``id`` (of ``method``) was unanswered."""

    id: RequestId
    method: str


Event: TypeAlias = (
    ResponseReceived
    | ErrorReceived
    | UnexpectedResponse
    | RequestReceived
    | NotificationReceived
    | RequestFailed
)


@attrs.frozen(kw_only=True)
class ConnectionStatistics:
    """A snapshot of a :class:`JsonRpcConnection`.

    ``outstanding``: our requests awaiting an answer; ``inbound_in_flight``: server requests we
    have not answered yet; ``sent_total``: messages built for sending (requests, notifications,
    responses); ``received_total``: messages passed to ``receive``.
    """

    outstanding: int
    inbound_in_flight: int
    sent_total: int
    received_total: int


# --------------------------------------------------------------------------- correlation


def cancel_notification(
    request_id: RequestId, method: str, reason: str | None = None
) -> Notification | None:
    """The ``notifications/cancelled`` that tells the server we no longer wait for the answer to
    our request ``request_id`` (``method``), with ``reason`` when given; ``None`` (nothing to
    send) for ``initialize``, which the protocol forbids cancelling. Pure: records nothing (see
    :meth:`JsonRpcConnection.cancel`)."""
    if method == "initialize":
        return None
    params: dict[str, Any] = {"requestId": request_id}
    if reason is not None:
        params["reason"] = reason
    return Notification(method=CANCELLED_NOTIFICATION, params=params)


class JsonRpcConnection:
    """The client's sans-IO JSON-RPC correlation machine for one connection.

    It allocates request ids, remembers which of our requests are unanswered and which server
    requests we owe an answer, and turns every received message into an :data:`Event`. It never
    sends or waits for anything: the caller writes the messages it returns and feeds it the
    messages that arrive.

    ``track_inbound=False``: server requests are not recorded. :meth:`receive` still turns each
    one into :class:`RequestReceived`, but without the duplicate-id check, and :meth:`respond`
    and :meth:`respond_error` refuse: whoever answers the server's requests keeps track of them
    (refuses a reused id, drops a cancelled one) and builds the answers itself. The runtime's
    pending-call table works this way, since its dispatcher answers the server.

    After :meth:`close` or :meth:`connection_lost` the machine is closed for good:
    :meth:`start_request`, :meth:`expect`, :meth:`notification`, :meth:`respond`,
    :meth:`respond_error` and :meth:`receive` raise :class:`LocalProtocolError`. Use a new
    machine for a new connection.
    """

    __slots__ = (
        "_closed",
        "_ids",
        "_inbound",
        "_outstanding",
        "_received_total",
        "_sent_total",
        "_track_inbound",
    )

    def __init__(self, *, track_inbound: bool = True) -> None:
        self._ids = IdAllocator()
        self._outstanding: dict[RequestId, str] = {}
        self._inbound: dict[RequestId, str] = {}
        self._track_inbound = track_inbound
        self._closed = False
        self._sent_total = 0
        self._received_total = 0

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return (
            f"<JsonRpcConnection {state} outstanding={len(self._outstanding)} "
            f"inbound={len(self._inbound)}>"
        )

    # ------------------------------------------------------------------ views

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` or :meth:`connection_lost` was called."""
        return self._closed

    @property
    def outstanding(self) -> Mapping[RequestId, str]:
        """Our unanswered requests, id -> method, in the order they were started (a live,
        read-only view)."""
        return MappingProxyType(self._outstanding)

    @property
    def inbound(self) -> Mapping[RequestId, str]:
        """Server requests we have not answered, id -> method (a live, read-only view; always
        empty with ``track_inbound=False``)."""
        return MappingProxyType(self._inbound)

    def statistics(self) -> ConnectionStatistics:
        """A snapshot of the counters. Never raises."""
        return ConnectionStatistics(
            outstanding=len(self._outstanding),
            inbound_in_flight=len(self._inbound),
            sent_total=self._sent_total,
            received_total=self._received_total,
        )

    def _check_open(self, action: str) -> None:
        if self._closed:
            raise LocalProtocolError(
                f"cannot {action}: the connection was lost; open a new connection"
            )

    # ------------------------------------------------------------------ our requests

    def start_request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        id: RequestId | None = None,
    ) -> Request:
        """Build a request and record it as outstanding until its answer arrives.

        The id is allocated (1, 2, 3...) unless ``id`` is given. Raises
        :class:`LocalProtocolError` when the connection was lost, when ``id`` is not a string or
        an integer, or when ``id`` is still outstanding (ids of requests in flight must differ).
        """
        if id is None:
            id = self._ids.next()
            while id in self._outstanding:  # a hand-picked id took it
                id = self._ids.next()
        self._record(id, method, starting=True)
        self._ids.advance_past(id)
        return Request(id=id, method=method, params=params)

    def expect(self, id: RequestId, method: str) -> None:
        """Record request ``id`` (``method``), built and sent by someone else, as outstanding
        until its answer arrives: :meth:`start_request` without building the envelope (the
        pending-call table's way, once per call: nothing is allocated here).

        Raises :class:`LocalProtocolError` when the connection was lost, when ``id`` is not a
        string or an integer, or when ``id`` is still outstanding."""
        self._record(id, method, starting=False)

    def _record(self, id: RequestId, method: str, *, starting: bool) -> None:
        """Record request ``id`` as outstanding, for :meth:`start_request` (``starting``) and
        :meth:`expect`, after their checks. The error messages are built only when raised."""
        if self._closed:
            action = f"start a {method} request" if starting else f"expect an answer to {method}"
            self._check_open(action)
        if isinstance(id, bool) or not isinstance(id, int | str):
            raise LocalProtocolError(f"a request id is a string or an integer, not {id!r}")
        if id in self._outstanding:
            advice = (
                "choose another id or let the connection allocate one"
                if starting
                else "ids of requests in flight must differ"
            )
            raise LocalProtocolError(
                f"request id {id!r} is still in flight ({self._outstanding[id]}); {advice}"
            )
        self._outstanding[id] = method
        self._sent_total += 1

    def notification(self, method: str, params: Mapping[str, Any] | None = None) -> Notification:
        """Build a notification to send. Raises :class:`LocalProtocolError` when the connection
        was lost."""
        self._check_open(f"send a {method} notification")
        self._sent_total += 1
        return Notification(method=method, params=params)

    def cancel(self, id: RequestId, reason: str | None = None) -> Notification | None:
        """Stop waiting for request ``id`` and build the ``notifications/cancelled`` to send.

        Returns ``None`` (nothing to send) when ``id`` is not outstanding: already answered,
        already cancelled, or the connection was lost. An ``initialize`` request is forgotten
        but never cancelled on the wire (the protocol forbids it), so that also returns ``None``.
        A late answer to a cancelled request comes out of :meth:`receive` as
        :class:`UnexpectedResponse`. Never raises.
        """
        method = self._outstanding.pop(id, None)
        if method is None:
            return None
        notice = cancel_notification(id, method, reason)
        if notice is not None:
            self._sent_total += 1
        return notice

    def take_answer(self, obj: Any) -> tuple[RequestId, dict[str, Any]] | None:
        """What :meth:`receive` of ``classify(obj)`` says for the commonest message, in one
        step: when ``obj`` (a value from :func:`decode_frame`) is a success response to an
        outstanding request (a ``dict`` with ``"jsonrpc": "2.0"``, a string or integer ``id``
        that is outstanding, an object ``result``, no ``method`` or ``error``), that request is
        no longer outstanding and this returns its id and result, as
        :class:`ResponseReceived` would carry them. For anything else it returns None and
        changes nothing: classify and receive ``obj`` as usual. Never raises."""
        if (
            type(obj) is dict
            and "result" in obj
            and obj.get("jsonrpc") == "2.0"
            and "method" not in obj
            and "error" not in obj
            and not self._closed
        ):
            rid = obj.get("id")
            result = obj["result"]
            if (
                type(result) is dict
                and (type(rid) is int or type(rid) is str)
                and self._outstanding.pop(rid, None) is not None
            ):
                self._received_total += 1
                return rid, result
        return None

    def forget(self, id: RequestId) -> bool:
        """Stop waiting for request ``id`` without telling the server (2026-07-28 HTTP cancels by
        closing the response stream). Returns whether it was outstanding. Never raises."""
        return self._outstanding.pop(id, None) is not None

    # ------------------------------------------------------------------ incoming

    def receive(self, msg: Message) -> Event:
        """Say what one received message means.

        - a response or error for an outstanding id: :class:`ResponseReceived` /
          :class:`ErrorReceived`, and the id is no longer outstanding;
        - a response or error for any other id: :class:`UnexpectedResponse`;
        - an error response with a null id: :class:`ErrorReceived` with ``id`` and ``method``
          ``None``;
        - a server request: :class:`RequestReceived`, owed an answer from then on;
        - a notification: :class:`NotificationReceived`.

        Raises :class:`LocalProtocolError` when the connection was lost, and
        :class:`RemoteProtocolError` (path ``$.id``) when the server sends a request whose id is
        the id of another of its requests we have not answered yet; that request is dropped.
        With ``track_inbound=False`` a server request is not recorded (nor checked).
        """
        self._check_open("receive messages")
        self._received_total += 1
        if isinstance(msg, Response):
            method = self._outstanding.pop(msg.id, None)
            if method is None:
                return UnexpectedResponse(message=msg)
            return ResponseReceived(id=msg.id, method=method, result=msg.result)
        if isinstance(msg, ErrorResponse):
            if msg.id is None:
                return ErrorReceived(id=None, method=None, error=msg.error)
            method = self._outstanding.pop(msg.id, None)
            if method is None:
                return UnexpectedResponse(message=msg)
            return ErrorReceived(id=msg.id, method=method, error=msg.error)
        if isinstance(msg, Notification):
            return NotificationReceived(notification=msg)
        if isinstance(msg, Request):
            if not self._track_inbound:
                return RequestReceived(request=msg)
            if msg.id in self._inbound:
                raise RemoteProtocolError(
                    f"the server sent request {msg.id!r} ({msg.method}) while its request with "
                    f"the same id ({self._inbound[msg.id]}) is still unanswered",
                    path="$.id",
                )
            self._inbound[msg.id] = msg.method
            return RequestReceived(request=msg)
        raise LocalProtocolError(f"cannot receive {msg!r}: not a JSON-RPC message")

    # ------------------------------------------------------------------ answering the server

    def _take_inbound(self, request_id: RequestId) -> None:
        self._check_open(f"answer request {request_id!r}")
        if not self._track_inbound:
            raise LocalProtocolError(
                f"cannot answer request {request_id!r}: this connection does not track server "
                "requests (track_inbound=False); build the Response or ErrorResponse directly"
            )
        if request_id not in self._inbound:
            raise LocalProtocolError(
                f"cannot answer request {request_id!r}: the server has no such request in "
                "flight (never received, already answered, or cancelled by the server)"
            )
        del self._inbound[request_id]
        self._sent_total += 1

    def respond(self, request_id: RequestId, result: Mapping[str, Any]) -> Response:
        """Build the answer to the server's request ``request_id``.

        Raises :class:`LocalProtocolError` when that request is not in flight (never received,
        already answered, cancelled by the server), when the machine does not track server
        requests (``track_inbound=False``), or when the connection was lost.
        """
        self._take_inbound(request_id)
        return Response(id=request_id, result=result)

    def respond_error(
        self, request_id: RequestId, code: int, message: str, data: Any = None
    ) -> ErrorResponse:
        """Build an error answer to the server's request ``request_id`` (``data`` is sent when it
        is not ``None``).

        Raises :class:`LocalProtocolError` like :meth:`respond`.
        """
        self._take_inbound(request_id)
        return ErrorResponse(
            id=request_id, error=ErrorObject(code=code, message=message, data=data)
        )

    def inbound_cancelled(self, request_id: RequestId) -> bool:
        """The server cancelled its request ``request_id``: drop it, we must not answer it.

        Returns whether it was in flight (unknown ids are to be ignored). Never raises.
        """
        return self._inbound.pop(request_id, None) is not None

    # ------------------------------------------------------------------ the end

    def close(self) -> None:
        """The connection ended, and whoever waited for its requests is told otherwise: close
        the machine without listing them (:meth:`connection_lost` lists them). Idempotent."""
        self._outstanding.clear()
        self._inbound.clear()
        self._closed = True

    def connection_lost(self) -> list[RequestFailed]:
        """The connection ended: fail every outstanding request and close the machine.

        Returns one :class:`RequestFailed` per outstanding request, in the order they were
        started; server requests we owed an answer are dropped. Calling it again returns an
        empty list. Never raises.
        """
        failed = [RequestFailed(id=rid, method=method) for rid, method in self._outstanding.items()]
        self._outstanding.clear()
        self._inbound.clear()
        self._closed = True
        return failed
