"""Golden transcripts: a realistic session per protocol revision, replayed through the protocol.

``golden/<revision>.jsonl`` holds one JSON object per line::

    {"dir": "c2s" | "s2c", "note": "...", "expect": "CallToolResult", "msg": <JSON-RPC message>}

``msg`` is the message exactly as it travels (an array for a 2025-03-26 batch, and then
``expect`` is a list with one name per item). ``expect`` names the class the params or result
decode into, or for an error response the :class:`RpcError` subclass it maps to; an optional
``expect_data`` names the wire type of the error's ``data``. The transcripts are written for this
project, in the shapes of the specification's examples and ``schema.ts`` of each revision; the
specification's own files are not copied here.

Every line is replayed with a fresh :class:`JsonRpcConnection` playing the client, after the lines
before it, and then checked: framing (compact serialisation, ``parse_message``, byte-exact
``serialize``), the correlation events, decoding into the expected class, byte-exact re-encoding
(unknown keys and ``_meta`` included), and for 2026-07-28 requests the ``_meta`` envelope against
:func:`build_request_meta`. Whole-transcript tests keep the data honest: methods and fields only
where the revision has them, coverage of what each revision adds, and the MRTR retry rules.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import attrs
import pytest

from trio_mcp.protocol import _types as t
from trio_mcp.protocol._codec import structure
from trio_mcp.protocol._errors import InvalidMessage, RpcError
from trio_mcp.protocol._jsonrpc import (
    CANCELLED_NOTIFICATION,
    ErrorReceived,
    ErrorResponse,
    Event,
    JsonRpcConnection,
    Message,
    Notification,
    NotificationReceived,
    Request,
    RequestId,
    RequestReceived,
    Response,
    ResponseReceived,
    UnexpectedResponse,
    parse_message,
    serialize,
)
from trio_mcp.protocol._methods import (
    CLIENT_NOTIFICATIONS,
    CLIENT_REQUESTS,
    REVISIONS,
    SERVER_NOTIFICATIONS,
    SERVER_REQUESTS,
    TASKS_EXTENSION,
    WIRE_TYPES,
    MethodSpec,
    decode_notification,
    decode_params,
    decode_result,
    encode,
)
from trio_mcp.protocol._versions import (
    LATEST_MODERN,
    META_LOG_LEVEL,
    META_PROGRESS_TOKEN,
    META_PROTOCOL_VERSION,
    META_SUBSCRIPTION_ID,
    RESERVED_REQUEST_META_KEYS,
    Era,
    build_request_meta,
    check_initialize_answer,
    features,
    with_request_meta,
)

GOLDEN = Path(__file__).parent / "golden"

#: What the client declares in every 2026-07-28 request (and in the dual-era probe of the legacy
#: transcripts): the inputs of :func:`build_request_meta`.
MODERN_CLIENT_CAPABILITIES: Mapping[str, Any] = {
    "roots": {},
    "sampling": {"tools": {}},
    "elicitation": {"form": {}, "url": {}},
}
MODERN_CLIENT_INFO: Mapping[str, Any] = {
    "name": "trio-mcp",
    "title": "trio-mcp agent host",
    "version": "0.1.0",
}

#: The probe a dual-era client sends before ``initialize``; legacy servers refuse it.
PROBE_METHOD = "server/discover"

_LINE_KEYS = frozenset({"dir", "note", "expect", "expect_data", "msg"})


# --------------------------------------------------------------------------- loading


@attrs.frozen(kw_only=True)
class Line:
    """One line of a transcript. ``number`` counts from 1, as an editor shows it."""

    revision: str
    number: int
    direction: str
    note: str
    expect: tuple[str, ...]
    expect_data: str | None
    msg: Any

    @property
    def is_batch(self) -> bool:
        """Whether the line is a JSON-RPC batch (an array)."""
        return isinstance(self.msg, list)

    @property
    def items(self) -> list[dict[str, Any]]:
        """The JSON-RPC messages of the line (one, or the items of a batch)."""
        return list(self.msg) if isinstance(self.msg, list) else [self.msg]


def _parse_line(revision: str, number: int, text: str) -> Line:
    where = f"golden/{revision}.jsonl:{number}"
    raw = json.loads(text)
    if not isinstance(raw, dict) or not {"dir", "note", "expect", "msg"} <= raw.keys():
        raise ValueError(f"{where}: a line needs the keys dir, note, expect and msg")
    if not raw.keys() <= _LINE_KEYS:
        raise ValueError(f"{where}: unknown keys {sorted(raw.keys() - _LINE_KEYS)}")
    if raw["dir"] not in ("c2s", "s2c") or not raw["note"]:
        raise ValueError(f"{where}: dir must be c2s or s2c and note must not be empty")
    expect = raw["expect"]
    msg = raw["msg"]
    if isinstance(msg, list):
        if not isinstance(expect, list) or len(expect) != len(msg):
            raise ValueError(f"{where}: a batch needs a list of expected names, one per item")
        names = tuple(expect)
    else:
        names = (expect,)
    if not all(isinstance(name, str) and name for name in names):
        raise ValueError(f"{where}: expected names must be non-empty strings")
    return Line(
        revision=revision,
        number=number,
        direction=raw["dir"],
        note=raw["note"],
        expect=names,
        expect_data=raw.get("expect_data"),
        msg=msg,
    )


@cache
def load(revision: str) -> tuple[Line, ...]:
    """Every line of the transcript of ``revision``. Raises ``ValueError`` for a malformed line."""
    text = (GOLDEN / f"{revision}.jsonl").read_text(encoding="utf-8")
    return tuple(
        _parse_line(revision, number, row)
        for number, row in enumerate(text.splitlines(), start=1)
        if row.strip()
    )


#: Lines that are spec-conformant but do not decode yet: (revision, line number) -> (the line's
#: note, the bug). Each is a strict xfail, so the test fails loudly once the bug is fixed.
KNOWN_BUGS: Mapping[tuple[str, int], tuple[str, str]] = {}


def _line_params() -> Iterator[Any]:
    for revision in REVISIONS:
        for line in load(revision):
            known = KNOWN_BUGS.get((revision, line.number))
            marks = []
            if known is not None:
                assert line.note == known[0], f"KNOWN_BUGS is out of date for {revision}"
                marks.append(pytest.mark.xfail(raises=InvalidMessage, strict=True, reason=known[1]))
            yield pytest.param(
                revision, line.number, id=f"{revision}:L{line.number:03d}", marks=marks
            )


# --------------------------------------------------------------------------- replay


def _wire(line: Line) -> bytes:
    """The line's message as it travels: compact UTF-8 JSON."""
    return json.dumps(line.msg, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _parse(line: Line) -> list[Message]:
    parsed = parse_message(_wire(line), allow_batch=features(line.revision).batches)
    return list(parsed) if isinstance(parsed, tuple) else [parsed]


class Replay:
    """The client's connection and an independent model of what it should say.

    ``sent`` maps each of our request ids to its method (kept after the answer, to decode late
    answers); ``waiting`` holds the ids we still wait for; ``server_requests`` maps the server's
    request ids to their methods.
    """

    def __init__(self) -> None:
        self.conn = JsonRpcConnection()
        self.sent: dict[RequestId, str] = {}
        self.sent_params: dict[RequestId, Mapping[str, Any] | None] = {}
        self.waiting: set[RequestId] = set()
        self.server_requests: dict[RequestId, str] = {}

    def step(self, line: Line) -> list[tuple[Message, Message | Event, Message | Event]]:
        """Play one line. Returns, per message, (message, what the connection produced, what it
        should have produced)."""
        return [self._one(line.direction, msg) for msg in _parse(line)]

    def _one(
        self, direction: str, msg: Message
    ) -> tuple[Message, Message | Event, Message | Event]:
        if direction == "c2s":
            return msg, self._send(msg), msg
        got = self.conn.receive(msg)
        expected: Event
        if isinstance(msg, Request):
            self.server_requests[msg.id] = msg.method
            expected = RequestReceived(request=msg)
        elif isinstance(msg, Notification):
            expected = NotificationReceived(notification=msg)
        elif msg.id not in self.waiting:
            expected = UnexpectedResponse(message=msg)
        else:
            self.waiting.discard(msg.id)
            method = self.sent[msg.id]
            if isinstance(msg, Response):
                expected = ResponseReceived(id=msg.id, method=method, result=msg.result)
            else:
                expected = ErrorReceived(id=msg.id, method=method, error=msg.error)
        return msg, got, expected

    def _send(self, msg: Message) -> Message:
        if isinstance(msg, Request):
            self.sent[msg.id] = msg.method
            self.sent_params[msg.id] = msg.params
            self.waiting.add(msg.id)
            return self.conn.start_request(msg.method, msg.params, id=msg.id)
        if isinstance(msg, Notification):
            if msg.method == CANCELLED_NOTIFICATION and msg.params is not None:
                request_id = msg.params["requestId"]
                self.waiting.discard(request_id)
                cancelled = self.conn.cancel(request_id, msg.params.get("reason"))
                assert cancelled is not None, f"request {request_id!r} was not in flight"
                return cancelled
            return self.conn.notification(msg.method, msg.params)
        if isinstance(msg, Response):
            return self.conn.respond(msg.id, msg.result)
        assert msg.id is not None, "our error answers always name the server's request"
        error = msg.error
        return self.conn.respond_error(msg.id, error.code, error.message, error.data)

    def method_of(self, direction: str, msg: Response | ErrorResponse) -> str:
        """The method of the request that ``msg`` answers."""
        assert msg.id is not None
        return self.server_requests[msg.id] if direction == "c2s" else self.sent[msg.id]


def _replay_until(revision: str, number: int) -> tuple[Replay, Line]:
    replay = Replay()
    lines = load(revision)
    for line in lines[: number - 1]:
        replay.step(line)
    return replay, lines[number - 1]


# --------------------------------------------------------------------------- checks


def _canonical(value: Any) -> str:
    """JSON text that differs whenever two values differ as JSON (``1`` vs ``1.0`` included)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, allow_nan=False)


def _decode(replay: Replay, direction: str, msg: Message) -> tuple[Any, Mapping[str, Any]]:
    """The decoded params or result of ``msg`` and the raw JSON it came from."""
    if isinstance(msg, Request):
        return decode_params(msg.method, msg.params), msg.params or {}
    if isinstance(msg, Notification):
        return decode_notification(msg.method, msg.params), msg.params or {}
    assert isinstance(msg, Response)
    return decode_result(replay.method_of(direction, msg), msg.result), msg.result


def _check_error(replay: Replay, line: Line, msg: ErrorResponse, expect: str) -> None:
    error = msg.error
    method = replay.method_of(line.direction, msg)
    mapped = RpcError.from_error(error.code, error.message, error.data, method=method)
    assert type(mapped).__name__ == expect
    assert (mapped.code, mapped.data, mapped.method) == (error.code, error.data, method)
    if line.expect_data is None:
        return
    data = structure(error.data, WIRE_TYPES[line.expect_data], path="$.error.data")
    assert type(data).__name__ == line.expect_data
    assert _canonical(encode(data)) == _canonical(error.data)
    assert [key for key in _unknown_keys(data) if not _is_vendor_key(key)] == []
    if isinstance(data, t.UnsupportedProtocolVersionData):
        sent = replay.sent_params[msg.id] if msg.id is not None else None
        assert sent is not None
        assert data.requested == sent["_meta"][META_PROTOCOL_VERSION]


def _check_envelope(params: Mapping[str, Any] | None) -> None:
    """A modern request's ``_meta`` is what ``build_request_meta`` builds from the session's
    capabilities and identity plus this request's log level, progress token and extra keys."""
    assert params is not None and "_meta" in params, "a 2026-07-28 request always has _meta"
    meta = params["_meta"]
    extra = {k: v for k, v in meta.items() if k not in RESERVED_REQUEST_META_KEYS}
    built = build_request_meta(
        LATEST_MODERN,
        client_capabilities=MODERN_CLIENT_CAPABILITIES,
        client_info=MODERN_CLIENT_INFO,
        log_level=meta.get(META_LOG_LEVEL),
        progress_token=meta.get(META_PROGRESS_TOKEN),
        extra=extra or None,
    )
    assert built == meta
    bare = {k: v for k, v in params.items() if k != "_meta"}
    assert with_request_meta(bare, built) == params


#: Classes whose ``extra`` holds data by design, not unknown keys.
_RAW_CARRIERS = (t.GetTaskPayloadResult, t.UnknownContent, t.UnknownInputRequest)


def _unknown_keys(value: Any) -> Iterator[str]:
    """The keys that decoding kept in an ``extra`` field, anywhere in ``value``."""
    if attrs.has(type(value)):
        for field in attrs.fields(type(value)):
            inner = getattr(value, field.name)
            if field.name == "extra":
                if not isinstance(value, _RAW_CARRIERS):
                    yield from inner
            else:
                yield from _unknown_keys(inner)
    elif isinstance(value, tuple):
        for inner in value:
            yield from _unknown_keys(inner)
    elif isinstance(value, Mapping):
        for inner in value.values():
            yield from _unknown_keys(inner)


def _is_vendor_key(key: str) -> bool:
    """A key a vendor may add: prefixed like a ``_meta`` key (``com.example/x``) or ``x-...``."""
    prefix, slash, name = key.partition("/")
    return (bool(slash) and "." in prefix and bool(name)) or key.startswith("x-")


def _check_decoded(replay: Replay, line: Line, msg: Message, obj: Any) -> None:
    """Checks that depend on what a message means, beyond its shape."""
    # Every field is known to the wire types, except the vendor keys put in on purpose (so a
    # misspelt field in a transcript cannot hide in ``extra``).
    unknown = [key for key in _unknown_keys(obj) if not _is_vendor_key(key)]
    assert unknown == [], f"{line.note}: keys the wire types do not know: {unknown}"
    if isinstance(msg, Response) and line.direction == "s2c":
        method = replay.sent[msg.id]
        if method == "initialize":
            requested = replay.sent_params[msg.id]
            assert requested is not None
            answered = check_initialize_answer(requested["protocolVersion"], obj.protocol_version)
            assert answered == line.revision
        if isinstance(obj, t.SubscriptionsListenResult):
            assert obj.subscription_id == msg.id
    if isinstance(msg, Notification) and msg.params is not None:
        subscription = (msg.params.get("_meta") or {}).get(META_SUBSCRIPTION_ID)
        if subscription is not None:
            assert replay.sent.get(subscription) == "subscriptions/listen"
            assert subscription in replay.waiting, "a notification on a closed subscription"


@pytest.mark.parametrize(("revision", "number"), list(_line_params()))
def test_line(revision: str, number: int) -> None:
    replay, line = _replay_until(revision, number)

    # Framing: compact JSON parses back, and serialising the envelopes gives the same bytes.
    messages = _parse(line)
    assert len(messages) == len(line.expect)
    assert serialize(messages if line.is_batch else messages[0]) == _wire(line)

    # Correlation: what the client's connection builds or reports for each message.
    for msg, got, expected in replay.step(line):
        assert got == expected, f"{line.note}: {msg!r}"

    modern = line.revision == LATEST_MODERN
    for msg, expect in zip(messages, line.expect, strict=True):
        if (
            line.direction == "c2s"
            and isinstance(msg, Request)
            and (modern or msg.method == PROBE_METHOD)
        ):
            _check_envelope(msg.params)
        if isinstance(msg, ErrorResponse):
            _check_error(replay, line, msg, expect)
            continue
        obj, raw = _decode(replay, line.direction, msg)
        assert type(obj).__name__ == expect, line.note
        assert _canonical(encode(obj)) == _canonical(raw), line.note
        _check_decoded(replay, line, msg, obj)


# --------------------------------------------------------------------------- whole transcripts


def _messages(revision: str) -> Iterator[tuple[Line, dict[str, Any]]]:
    for line in load(revision):
        for item in line.items:
            yield line, item


def _spec_for(line: Line, item: Mapping[str, Any]) -> MethodSpec | None:
    method = item["method"]
    if "id" in item:
        table = CLIENT_REQUESTS if line.direction == "c2s" else SERVER_REQUESTS
    else:
        table = CLIENT_NOTIFICATIONS if line.direction == "c2s" else SERVER_NOTIFICATIONS
    return table.get(method)


@pytest.mark.parametrize("revision", REVISIONS)
def test_methods_exist_in_their_revision(revision: str) -> None:
    """Every request and notification exists in that revision, in that direction; the only
    exception is the dual-era probe that opens a legacy transcript."""
    era = features(revision).era
    for line, item in _messages(revision):
        if "method" not in item:
            continue
        if era is Era.LEGACY and line.number == 1 and item["method"] == PROBE_METHOD:
            continue
        spec = _spec_for(line, item)
        where = f"{revision}:L{line.number:03d} {item['method']} ({line.direction})"
        assert spec is not None, f"{where}: no such method in this direction"
        assert spec.available_in(revision), f"{where}: not in {revision}"
        # The tasks methods are core in 2025-11-25 and need the extension only from 2026-07-28.
        if spec.extension is not None:
            assert era is Era.LEGACY and spec.extension == TASKS_EXTENSION, where


def _walk(value: Any) -> Iterator[tuple[str, Any]]:
    """Every (key, value) pair of every object nested in ``value``."""
    if isinstance(value, dict):
        for key, inner in value.items():
            yield key, inner
            yield from _walk(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _walk(inner)


@pytest.mark.parametrize("revision", REVISIONS)
def test_fields_exist_in_their_revision(revision: str) -> None:
    """Content types and fields appear only from the revision that introduced them."""
    flags = features(revision)
    allowed_types = {"text", "image", "resource"}
    if flags.audio:
        allowed_types.add("audio")
    if flags.resource_links:
        allowed_types.add("resource_link")
    if revision >= "2025-11-25":
        allowed_types |= {"tool_use", "tool_result"}
    gated_keys = {
        "structuredContent": flags.structured_content,
        "outputSchema": flags.structured_content,
        "resultType": flags.result_type,
        "ttlMs": flags.result_type,
        "elicitationId": flags.url_elicitation and flags.era is Era.LEGACY,
        "icons": revision >= "2025-11-25",
        "execution": flags.tasks,
        "inputRequests": flags.input_required,
        "requestState": flags.input_required,
    }
    content_types = {"text", "image", "audio", "resource", "resource_link", "tool_use"}
    for line, item in _messages(revision):
        if flags.era is Era.LEGACY and line.number == 1 and item.get("method") == PROBE_METHOD:
            continue
        for key, value in _walk(item):
            where = f"{revision}:L{line.number:03d}"
            if key == "type" and value in content_types | {"tool_result"}:
                assert value in allowed_types, f"{where}: content type {value!r}"
            assert gated_keys.get(key, True), f"{where}: {key!r} does not exist in {revision}"
        if line.direction == "s2c" and "result" in item and flags.result_type:
            assert "resultType" in item["result"], f"{revision}:L{line.number:03d}"
    assert any(line.is_batch for line in load(revision)) == flags.batches


def _cacheable(method: str) -> bool:
    result = CLIENT_REQUESTS[method].result
    return isinstance(result, type) and issubclass(result, t.CacheableResult)


def test_modern_complete_results_are_cacheable_where_the_schema_says() -> None:
    replay = Replay()
    seen = 0
    for line in load(LATEST_MODERN):
        replay.step(line)
        for item in line.items:
            result = item.get("result")
            if line.direction != "s2c" or result is None:
                continue
            method = replay.sent[item["id"]]
            if result.get("resultType") == "complete" and _cacheable(method):
                assert isinstance(result.get("ttlMs"), int), f"L{line.number:03d}"
                assert result.get("cacheScope") in ("public", "private"), f"L{line.number:03d}"
                seen += 1
    assert seen >= 6


def test_mrtr_retries_follow_the_rules() -> None:
    """After an ``input_required`` answer the next request of the same method is its retry: a new
    id, the same params plus one input response per input request and the exact request state."""
    lines = load(LATEST_MODERN)
    replay = Replay()
    pending: list[tuple[str, Mapping[str, Any], Mapping[str, Any], RequestId]] = []
    retries = 0
    for line in lines:
        replay.step(line)
        item = line.msg
        if line.direction == "s2c" and isinstance(item, dict) and "result" in item:
            result = item["result"]
            if result.get("resultType") == "input_required":
                method = replay.sent[item["id"]]
                params = replay.sent_params[item["id"]]
                assert params is not None
                pending.append((method, params, result, item["id"]))
        elif line.direction == "c2s" and isinstance(item, dict) and "method" in item and pending:
            method, original, asked, old_id = pending[0]
            if item["method"] != method:
                continue
            pending.pop(0)
            retry = item["params"]
            assert item["id"] != old_id
            assert set(retry.get("inputResponses", {})) == set(asked.get("inputRequests", {}))
            assert retry.get("requestState") == asked.get("requestState")
            strip = {"inputResponses", "requestState"}
            assert {k: v for k, v in retry.items() if k not in strip} == {
                k: v for k, v in original.items() if k not in strip
            }
            retries += 1
    assert not pending
    assert retries == 4


#: Methods each transcript must use (requests and notifications, either direction).
_COMMON_METHODS = {
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "notifications/progress",
    "notifications/cancelled",
    "notifications/message",
    "notifications/resources/updated",
}
_LEGACY_METHODS = _COMMON_METHODS | {
    PROBE_METHOD,
    "initialize",
    "notifications/initialized",
    "ping",
    "resources/subscribe",
    "logging/setLevel",
    "roots/list",
    "sampling/createMessage",
}
REQUIRED_METHODS: Mapping[str, set[str]] = {
    "2024-11-05": _LEGACY_METHODS | {"resources/unsubscribe", "notifications/roots/list_changed"},
    "2025-03-26": _LEGACY_METHODS | {"notifications/roots/list_changed"},
    "2025-06-18": _LEGACY_METHODS | {"elicitation/create"},
    "2025-11-25": _LEGACY_METHODS
    | {
        "elicitation/create",
        "notifications/elicitation/complete",
        "tasks/get",
        "tasks/result",
        "tasks/list",
        "tasks/cancel",
        "notifications/tasks/status",
    },
    "2026-07-28": _COMMON_METHODS
    | {
        "server/discover",
        "subscriptions/listen",
        "notifications/subscriptions/acknowledged",
        "notifications/tools/list_changed",
    },
}

#: Expected names each transcript must use: results, content and the errors of the revision.
_LEGACY_EXPECTS = {
    "InitializeResult",
    "EmptyResult",
    "CallToolResult",
    "ListRootsResult",
    "CreateMessageResult",
    "MethodNotFound",
    "InvalidParams",
    "ResourceNotFound",
}
REQUIRED_EXPECTS: Mapping[str, set[str]] = {
    "2024-11-05": _LEGACY_EXPECTS | {"RpcError"},
    "2025-03-26": _LEGACY_EXPECTS,
    "2025-06-18": _LEGACY_EXPECTS | {"ElicitResult", "ElicitRequestFormParams"},
    "2025-11-25": _LEGACY_EXPECTS
    | {
        "ElicitRequestURLParams",
        "UrlElicitationRequired",
        "CreateTaskResult",
        "GetTaskResult",
        "CancelTaskResult",
        "ListTasksResult",
        "GetTaskPayloadResult",
    },
    "2026-07-28": {
        "DiscoverResult",
        "CallToolResult",
        "InputRequiredResult",
        "SubscriptionsAcknowledgedNotificationParams",
        "SubscriptionsListenResult",
        "InvalidParams",
        "ResourceNotFound",
        "UnsupportedProtocolVersion",
    },
}

#: Content types each transcript's tool results must show.
REQUIRED_CONTENT: Mapping[str, set[str]] = {
    "2024-11-05": {"text", "image", "resource"},
    "2025-03-26": {"text", "image", "audio"},
    "2025-06-18": {"text", "resource_link"},
    "2025-11-25": {"text", "resource_link", "resource"},
    "2026-07-28": {"text", "image", "audio", "resource_link", "resource"},
}


def _tool_result_content_types(lines: Sequence[Line]) -> set[str]:
    found: set[str] = set()
    for line in lines:
        for item, expect in zip(line.items, line.expect, strict=True):
            if expect == "CallToolResult":
                found |= {block["type"] for block in item["result"]["content"]}
    return found


@pytest.mark.parametrize("revision", REVISIONS)
def test_transcript_covers_its_revision(revision: str) -> None:
    lines = load(revision)
    methods = {item["method"] for _, item in _messages(revision) if "method" in item}
    assert REQUIRED_METHODS[revision] - methods == set()
    expects = {name for line in lines for name in line.expect}
    assert REQUIRED_EXPECTS[revision] - expects == set()
    assert REQUIRED_CONTENT[revision] - _tool_result_content_types(lines) == set()
    # A late answer to a cancelled request, and a tool error, in every revision.
    assert any(isinstance(event, UnexpectedResponse) for event in _all_events(lines))
    assert any(item.get("result", {}).get("isError") is True for _, item in _messages(revision))


def _all_events(lines: Sequence[Line]) -> Iterator[Message | Event]:
    replay = Replay()
    for line in lines:
        for _, got, _ in replay.step(line):
            yield got


@pytest.mark.parametrize("revision", REVISIONS)
def test_replay_leaves_nothing_in_flight(revision: str) -> None:
    """At the end of every session each request has been answered or cancelled, both ways."""
    replay = Replay()
    for line in load(revision):
        replay.step(line)
    assert dict(replay.conn.outstanding) == {}
    assert dict(replay.conn.inbound) == {}
    assert replay.waiting == set()
