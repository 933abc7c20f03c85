"""What goes with each MCP method: parameter and result types, direction and revisions.

The four tables map a method name to its :class:`MethodSpec`. The ``decode_*`` functions turn
the ``params`` or ``result`` of a JSON-RPC message into the wire types of :mod:`._types`, and
:func:`encode` turns a wire object back into JSON-ready values. Decoding failures raise
:class:`InvalidMessage` naming the wire path at fault (``$.result.tools[3].inputSchema``).

``decode_result`` dispatches on the 2026-07-28 ``resultType``: absent or ``"complete"`` gives the
method's result type, ``"input_required"`` an :class:`InputRequiredResult` (only for
``tools/call``, ``resources/read`` and ``prompts/get``), ``"task"`` the tasks extension's
:class:`ExtCreateTaskResult` (only for ``tools/call``); any other value is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Any

import attrs

from . import _types as t
from ._codec import structure, unstructure
from ._errors import InvalidMessage, LocalProtocolError

__all__ = [
    "CACHEABLE_METHODS",
    "CLIENT_NOTIFICATIONS",
    "CLIENT_REQUESTS",
    "INPUT_REQUIRED_METHODS",
    "LEGACY_TASK_METHODS",
    "REVISIONS",
    "SERVER_NOTIFICATIONS",
    "SERVER_REQUESTS",
    "SKILLS_EXTENSION",
    "TASKS_EXTENSION",
    "TASK_RESULT_METHODS",
    "WIRE_TYPES",
    "Direction",
    "MethodSpec",
    "decode_notification",
    "decode_params",
    "decode_result",
    "encode",
    "fast_tool",
    "request_spec",
]

#: Every protocol revision, oldest first. Revision strings are dates, so they compare in order.
REVISIONS: tuple[str, ...] = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28")

#: The identifier of the tasks extension (2026-07-28: ``tasks/get|update|cancel``).
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"

#: The identifier of the skills extension (``skills/list``, ``skills/get``,
#: ``resources/directory/read``).
SKILLS_EXTENSION = "io.modelcontextprotocol/skills"

#: The methods whose result may be ``resultType: "input_required"`` (MRTR, 2026-07-28).
INPUT_REQUIRED_METHODS: frozenset[str] = frozenset({"tools/call", "resources/read", "prompts/get"})

#: The methods whose complete 2026-07-28 result is cacheable (``ttlMs``, ``cacheScope``).
CACHEABLE_METHODS: frozenset[str] = frozenset(
    {
        "server/discover",
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
    }
)

#: The methods whose result may be ``resultType: "task"`` (tasks extension).
TASK_RESULT_METHODS: frozenset[str] = frozenset({"tools/call"})
#: Methods whose 2025-11-25 answer may be a task (``CreateTaskResult``) when the request was
#: task-augmented: tools/call from the client, sampling and elicitation from the server.
LEGACY_TASK_METHODS: frozenset[str] = frozenset(
    {"tools/call", "sampling/createMessage", "elicitation/create"}
)

_LEGACY_LAST = "2025-11-25"
_MODERN = "2026-07-28"


class Direction(StrEnum):
    """Who sends a request or notification."""

    CLIENT_TO_SERVER = "client->server"
    SERVER_TO_CLIENT = "server->client"


def _check_revision(instance: MethodSpec, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and value not in REVISIONS:
        raise ValueError(f"{attribute.name}={value!r} is not a known revision: {REVISIONS}")


@attrs.frozen(kw_only=True)
class MethodSpec:
    """What goes with one method in one direction.

    ``params`` is the parameter type and ``result`` the result type (``None`` for a
    notification); each is a class or, where the wire shape has variants, a union that
    ``structure`` accepts. ``since`` and ``until`` are the first and last revision (inclusive)
    with the method, ``until`` ``None`` meaning "still current". ``extension`` names the
    extension that must be negotiated to use the method (from 2026-07-28 for tasks; always for
    skills). Construction fails with ``ValueError`` for an unknown revision string.
    """

    method: str
    params: Any
    result: Any
    direction: Direction
    since: str = attrs.field(validator=_check_revision)
    until: str | None = attrs.field(default=None, validator=_check_revision)
    extension: str | None = None

    def available_in(self, version: str) -> bool:
        """Whether the method exists in protocol revision ``version`` (extension negotiation
        aside)."""
        return self.since <= version and (self.until is None or version <= self.until)


def _table(direction: Direction, *rows: tuple[Any, ...]) -> Mapping[str, MethodSpec]:
    specs: dict[str, MethodSpec] = {}
    for method, params, result, since, until, *rest in rows:
        specs[method] = MethodSpec(
            method=method,
            params=params,
            result=result,
            direction=direction,
            since=since,
            until=until,
            extension=rest[0] if rest else None,
        )
    return MappingProxyType(specs)


_C2S = Direction.CLIENT_TO_SERVER
_S2C = Direction.SERVER_TO_CLIENT
_FIRST = REVISIONS[0]

#: Requests the client sends to the server.
CLIENT_REQUESTS: Mapping[str, MethodSpec] = _table(
    _C2S,
    ("initialize", t.InitializeRequestParams, t.InitializeResult, _FIRST, _LEGACY_LAST),
    ("ping", t.RequestParams, t.EmptyResult, _FIRST, _LEGACY_LAST),
    ("server/discover", t.RequestParams, t.DiscoverResult, _MODERN, None),
    ("tools/list", t.PaginatedRequestParams, t.ListToolsResult, _FIRST, None),
    ("tools/call", t.CallToolRequestParams, t.CallToolResult, _FIRST, None),
    ("resources/list", t.PaginatedRequestParams, t.ListResourcesResult, _FIRST, None),
    (
        "resources/templates/list",
        t.PaginatedRequestParams,
        t.ListResourceTemplatesResult,
        _FIRST,
        None,
    ),
    ("resources/read", t.ReadResourceRequestParams, t.ReadResourceResult, _FIRST, None),
    ("resources/subscribe", t.SubscribeRequestParams, t.EmptyResult, _FIRST, _LEGACY_LAST),
    ("resources/unsubscribe", t.UnsubscribeRequestParams, t.EmptyResult, _FIRST, _LEGACY_LAST),
    ("prompts/list", t.PaginatedRequestParams, t.ListPromptsResult, _FIRST, None),
    ("prompts/get", t.GetPromptRequestParams, t.GetPromptResult, _FIRST, None),
    ("completion/complete", t.CompleteRequestParams, t.CompleteResult, _FIRST, None),
    ("logging/setLevel", t.SetLevelRequestParams, t.EmptyResult, _FIRST, _LEGACY_LAST),
    ("tasks/get", t.TaskRequestParams, t.AnyGetTaskResult, _LEGACY_LAST, None, TASKS_EXTENSION),
    ("tasks/result", t.TaskRequestParams, t.GetTaskPayloadResult, _LEGACY_LAST, _LEGACY_LAST),
    ("tasks/list", t.PaginatedRequestParams, t.ListTasksResult, _LEGACY_LAST, _LEGACY_LAST),
    (
        "tasks/cancel",
        t.TaskRequestParams,
        t.AnyCancelTaskResult,
        _LEGACY_LAST,
        None,
        TASKS_EXTENSION,
    ),
    ("tasks/update", t.UpdateTaskRequestParams, t.EmptyResult, _MODERN, None, TASKS_EXTENSION),
    (
        "subscriptions/listen",
        t.SubscriptionsListenRequestParams,
        t.SubscriptionsListenResult,
        _MODERN,
        None,
    ),
    ("skills/list", t.PaginatedRequestParams, t.SkillsListResult, _FIRST, None, SKILLS_EXTENSION),
    ("skills/get", t.SkillsGetRequestParams, t.SkillsGetResult, _FIRST, None, SKILLS_EXTENSION),
    (
        "resources/directory/read",
        t.ReadDirectoryRequestParams,
        t.ReadDirectoryResult,
        _FIRST,
        None,
        SKILLS_EXTENSION,
    ),
)

#: Requests the server sends to the client (up to 2025-11-25; from 2026-07-28 the server asks
#: through :class:`InputRequiredResult` instead).
SERVER_REQUESTS: Mapping[str, MethodSpec] = _table(
    _S2C,
    ("ping", t.RequestParams, t.EmptyResult, _FIRST, _LEGACY_LAST),
    ("roots/list", t.RequestParams, t.ListRootsResult, _FIRST, _LEGACY_LAST),
    (
        "sampling/createMessage",
        t.CreateMessageRequestParams,
        t.CreateMessageResult,
        _FIRST,
        _LEGACY_LAST,
    ),
    ("elicitation/create", t.ElicitRequestParams, t.ElicitResult, "2025-06-18", _LEGACY_LAST),
    ("tasks/get", t.TaskRequestParams, t.GetTaskResult, _LEGACY_LAST, _LEGACY_LAST),
    ("tasks/result", t.TaskRequestParams, t.GetTaskPayloadResult, _LEGACY_LAST, _LEGACY_LAST),
    ("tasks/list", t.PaginatedRequestParams, t.ListTasksResult, _LEGACY_LAST, _LEGACY_LAST),
    ("tasks/cancel", t.TaskRequestParams, t.CancelTaskResult, _LEGACY_LAST, _LEGACY_LAST),
)

#: Notifications the server sends to the client.
SERVER_NOTIFICATIONS: Mapping[str, MethodSpec] = _table(
    _S2C,
    ("notifications/cancelled", t.CancelledNotificationParams, None, _FIRST, None),
    ("notifications/progress", t.ProgressNotificationParams, None, _FIRST, None),
    ("notifications/message", t.LoggingMessageNotificationParams, None, _FIRST, None),
    ("notifications/resources/updated", t.ResourceUpdatedNotificationParams, None, _FIRST, None),
    ("notifications/resources/list_changed", t.NotificationParams, None, _FIRST, None),
    ("notifications/tools/list_changed", t.NotificationParams, None, _FIRST, None),
    ("notifications/prompts/list_changed", t.NotificationParams, None, _FIRST, None),
    (
        "notifications/elicitation/complete",
        t.ElicitationCompleteNotificationParams,
        None,
        _LEGACY_LAST,
        _LEGACY_LAST,
    ),
    (
        "notifications/tasks/status",
        t.TaskStatusNotificationParams,
        None,
        _LEGACY_LAST,
        _LEGACY_LAST,
    ),
    ("notifications/tasks", t.DetailedTask, None, _MODERN, None, TASKS_EXTENSION),
    (
        "notifications/subscriptions/acknowledged",
        t.SubscriptionsAcknowledgedNotificationParams,
        None,
        _MODERN,
        None,
    ),
)

#: Notifications the client sends to the server.
CLIENT_NOTIFICATIONS: Mapping[str, MethodSpec] = _table(
    _C2S,
    ("notifications/initialized", t.NotificationParams, None, _FIRST, _LEGACY_LAST),
    ("notifications/cancelled", t.CancelledNotificationParams, None, _FIRST, None),
    ("notifications/progress", t.ProgressNotificationParams, None, _FIRST, _LEGACY_LAST),
    ("notifications/roots/list_changed", t.NotificationParams, None, _FIRST, _LEGACY_LAST),
    (
        "notifications/tasks/status",
        t.TaskStatusNotificationParams,
        None,
        _LEGACY_LAST,
        _LEGACY_LAST,
    ),
)


def request_spec(method: str) -> MethodSpec:
    """The :class:`MethodSpec` of request ``method``, from :data:`CLIENT_REQUESTS` or else
    :data:`SERVER_REQUESTS`. Raises :class:`LocalProtocolError` for an unknown method."""
    spec = CLIENT_REQUESTS.get(method) or SERVER_REQUESTS.get(method)
    if spec is None:
        raise LocalProtocolError(f"no wire type for method {method!r}")
    return spec


def decode_params(method: str, params: Mapping[str, Any] | None, *, path: str = "$.params") -> Any:
    """Decode the ``params`` of a request (either direction) into its wire type.

    Absent params decode like ``{}`` (so a method whose parameters are all optional gets an
    instance with defaults, and one with required parameters names the missing field). Raises
    :class:`LocalProtocolError` for a method with no wire type (the session answers such a
    request with "method not found") and :class:`InvalidMessage` for params of the wrong shape.
    """
    spec = request_spec(method)
    return structure({} if params is None else params, spec.params, path=path)


def decode_notification(
    method: str, params: Mapping[str, Any] | None, *, path: str = "$.params"
) -> Any:
    """Decode the ``params`` of a notification (either direction) into its wire type.

    An unknown notification is not an error (a newer peer may send new ones): its raw params
    are returned as they are (``{}`` if absent). Raises :class:`InvalidMessage` for params of a
    known notification that have the wrong shape.
    """
    spec = SERVER_NOTIFICATIONS.get(method) or CLIENT_NOTIFICATIONS.get(method)
    if spec is None:
        return {} if params is None else params
    return structure({} if params is None else params, spec.params, path=path)


def _invalid(method: str, problem: str, path: str) -> InvalidMessage:
    return InvalidMessage(
        f"invalid {method} result: {problem} @ {path}", path=path, errors=(f"{problem} @ {path}",)
    )


# --------------------------------------------------------------------------- tools/call fast path
#
# Nearly every tools/call result is ``{"content": [{"type": "text", "text": ...}, ...]}`` with an
# optional boolean ``isError``. Going through the converter costs several microseconds per call
# (the hot path of a tool-calling host), so ``decode_result`` first tries
# :func:`_fast_call_tool_result`, which accepts only that exact shape and builds the very objects
# the converter would build. Anything else declines to the converter, which keeps every error
# message and wire path as it is.


def _fast_call_tool_result(result: Any) -> t.CallToolResult | None:
    """Decode the common ``tools/call`` result without the converter, or return ``None``.

    Accepted, and nothing else: a ``dict`` whose keys are ``content`` and optionally
    ``isError``, ``resultType`` and ``_meta``; ``content`` a ``list`` of ``dict`` blocks with
    exactly the keys ``type`` and ``text``, ``type`` the string ``"text"`` and ``text`` a ``str``
    (not a subclass); ``isError`` ``True`` or ``False``; ``resultType`` the string
    ``"complete"`` (what every 2026-07-28 result says); ``_meta`` a ``dict``. The answer equals
    what ``structure(result, CallToolResult)`` gives (``None`` for what is absent, empty
    ``extra``). Any other shape, valid or not, returns ``None`` so that the converter decodes it
    or reports what is wrong; this function never raises.
    """
    if type(result) is not dict:
        return None
    content = result.get("content")
    if type(content) is not list:
        return None
    is_error = result_type = meta = None
    if len(result) > 1:
        for key, value in result.items():
            if key == "content":
                continue
            if key == "isError" and type(value) is bool:
                is_error = value
            elif key == "resultType" and value == "complete" and type(value) is str:
                result_type = value
            elif key == "_meta" and type(value) is dict:
                meta = value
            else:
                return None
    blocks: list[t.TextContent] = []
    for block in content:
        if type(block) is not dict or len(block) != 2:
            return None
        kind = block.get("type")
        text = block.get("text")
        if type(kind) is not str or kind != "text" or type(text) is not str:
            return None
        blocks.append(_make_text(text))
    return _make_call_result(tuple(blocks), is_error, result_type, meta)


# --------------------------------------------------------------------------- tools/list fast path
#
# A tools/list listing is decoded one tool at a time (``check_listing`` refuses a bad tool alone),
# and a server may list thousands. :func:`fast_tool` builds the :class:`Tool` of the common entry
# without the converter: known keys with values of exactly the JSON types the converter accepts,
# unknown keys kept in ``extra`` as the converter keeps them. Anything else (a wrong type, a
# ``str`` or ``dict`` subclass, a missing field) declines to the converter, which keeps every
# error message and wire path as it is.

_TOOL_KEYS = frozenset(
    {
        "name",
        "title",
        "description",
        "inputSchema",
        "outputSchema",
        "annotations",
        "execution",
        "icons",
        "_meta",
    }
)
_ANNOTATION_KEYS = frozenset(
    {"title", "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"}
)
_EXECUTION_KEYS = frozenset({"taskSupport"})
_ICON_KEYS = frozenset({"src", "mimeType", "sizes", "theme"})


def _fast_annotations(value: Any) -> t.ToolAnnotations | None:
    """:class:`ToolAnnotations` from a ``dict`` whose title is a ``str`` and whose hints are
    ``True`` or ``False`` (each may be absent or ``null``), or ``None`` for anything else."""
    if type(value) is not dict:
        return None
    get = value.get
    title = get("title")
    read_only = get("readOnlyHint")
    destructive = get("destructiveHint")
    idempotent = get("idempotentHint")
    open_world = get("openWorldHint")
    if (
        (title is not None and type(title) is not str)
        or (read_only is not None and type(read_only) is not bool)
        or (destructive is not None and type(destructive) is not bool)
        or (idempotent is not None and type(idempotent) is not bool)
        or (open_world is not None and type(open_world) is not bool)
    ):
        return None
    if value.keys() <= _ANNOTATION_KEYS:
        extra = {}
    else:
        extra = {k: v for k, v in value.items() if k not in _ANNOTATION_KEYS}
    return t.ToolAnnotations(
        title=title,
        read_only_hint=read_only,
        destructive_hint=destructive,
        idempotent_hint=idempotent,
        open_world_hint=open_world,
        extra=extra,
    )


def _fast_execution(value: Any) -> t.ToolExecution | None:
    """:class:`ToolExecution` from a ``dict`` whose ``taskSupport`` is a ``str`` (or absent or
    ``null``), or ``None`` for anything else."""
    if type(value) is not dict:
        return None
    task_support = value.get("taskSupport")
    if task_support is not None and type(task_support) is not str:
        return None
    if value.keys() <= _EXECUTION_KEYS:
        extra = {}
    else:
        extra = {k: v for k, v in value.items() if k not in _EXECUTION_KEYS}
    return t.ToolExecution(task_support=task_support, extra=extra)


def _fast_icons(value: Any) -> tuple[t.Icon, ...] | None:
    """The icons of a ``list`` of ``dict`` icons with a ``str`` ``src``, ``str`` (or absent or
    ``null``) ``mimeType`` and ``theme``, and a ``list`` of ``str`` (or absent or ``null``)
    ``sizes``; ``None`` for anything else."""
    if type(value) is not list:
        return None
    icons: list[t.Icon] = []
    for icon in value:
        if type(icon) is not dict:
            return None
        get = icon.get
        src = get("src")
        mime_type = get("mimeType")
        sizes = get("sizes")
        theme = get("theme")
        if (
            type(src) is not str
            or (mime_type is not None and type(mime_type) is not str)
            or (theme is not None and type(theme) is not str)
        ):
            return None
        if sizes is not None:
            if type(sizes) is not list or any(type(size) is not str for size in sizes):
                return None
            sizes = tuple(sizes)
        if icon.keys() <= _ICON_KEYS:
            extra = {}
        else:
            extra = {k: v for k, v in icon.items() if k not in _ICON_KEYS}
        icons.append(t.Icon(src=src, mime_type=mime_type, sizes=sizes, theme=theme, extra=extra))
    return tuple(icons)


_TOOL_FIELDS = (
    "name",
    "title",
    "description",
    "input_schema",
    "output_schema",
    "annotations",
    "execution",
    "icons",
    "meta",
    "extra",
)


def _stores_only(cls: type, fields: tuple[str, ...]) -> bool:
    """Whether attrs' ``__init__`` of ``cls`` does nothing but store ``fields`` (all of its
    fields, in that order) into slots of the same names: no validator, converter, alias, pre- or
    post-init hook, and no slot but those and ``__weakref__`` along its bases (a cached hash
    would add one; a base without ``__slots__`` would add a ``__dict__``)."""
    bases = [base for base in cls.__mro__ if base is not object]
    if not all("__slots__" in vars(base) for base in bases):
        return False
    slots = [name for base in bases for name in vars(base)["__slots__"]]
    return (
        tuple(field.name for field in attrs.fields(cls)) == fields
        and all(
            field.init
            and field.validator is None
            and field.converter is None
            and field.alias == field.name
            for field in attrs.fields(cls)
        )
        and sorted(slots) == sorted((*fields, "__weakref__"))
        and not hasattr(cls, "__attrs_pre_init__")
        and not hasattr(cls, "__attrs_post_init__")
    )


def _slot_setters(cls: type, fields: tuple[str, ...]) -> tuple[Callable[[Any, Any], None], ...]:
    """The ``__set__`` of each slot of ``fields``, found along the bases of ``cls``: storing a
    field that way is what attrs' ``__init__`` does, without its bound ``object.__setattr__``
    (only for classes that :func:`_stores_only` accepts)."""
    setters = []
    for name in fields:
        owner = next(base for base in cls.__mro__ if name in vars(base))
        setters.append(vars(owner)[name].__set__)
    return tuple(setters)


def _make_tool_with_init(*values: Any) -> t.Tool:
    """``Tool(...)`` from every field in order, through attrs' ``__init__``."""
    return t.Tool(**dict(zip(_TOOL_FIELDS, values, strict=True)))


def _tool_maker() -> Callable[..., t.Tool]:
    """``Tool(name=..., ..., extra=...)``, given every field in order, made faster: attrs'
    ``__init__`` of a frozen class stores each field through a bound ``object.__setattr__``,
    about half the cost of decoding a common entry; this stores them with the slots' own
    descriptors, which is all that ``__init__`` does for :class:`Tool` (:func:`_stores_only`
    checks it when the module loads; if it ever does more, this is ``Tool`` itself)."""
    if not _stores_only(t.Tool, _TOOL_FIELDS):  # pragma: no cover - Tool is plain today
        return _make_tool_with_init
    new = object.__new__
    cls = t.Tool
    setters = _slot_setters(cls, _TOOL_FIELDS)
    s_name, s_title, s_description, s_input, s_output, s_annotations = setters[:6]
    s_execution, s_icons, s_meta, s_extra = setters[6:]

    def make_tool(
        name: str,
        title: str | None,
        description: str | None,
        input_schema: Mapping[str, Any],
        output_schema: Mapping[str, Any] | None,
        annotations: t.ToolAnnotations | None,
        execution: t.ToolExecution | None,
        icons: tuple[t.Icon, ...] | None,
        meta: Mapping[str, Any] | None,
        extra: Mapping[str, Any],
    ) -> t.Tool:
        tool: t.Tool = new(cls)
        s_name(tool, name)
        s_title(tool, title)
        s_description(tool, description)
        s_input(tool, input_schema)
        s_output(tool, output_schema)
        s_annotations(tool, annotations)
        s_execution(tool, execution)
        s_icons(tool, icons)
        s_meta(tool, meta)
        s_extra(tool, extra)
        return tool

    return make_tool


_make_tool = _tool_maker()


_TEXT_FIELDS = ("type", "text", "annotations", "meta", "extra")
_CALL_RESULT_FIELDS = ("meta", "result_type", "extra", "content", "structured_content", "is_error")


def _make_text_with_init(text: str) -> t.TextContent:
    return t.TextContent(text=text)


def _make_call_result_with_init(
    content: tuple[t.ContentBlock, ...],
    is_error: bool | None,
    result_type: str | None,
    meta: Mapping[str, Any] | None,
) -> t.CallToolResult:
    return t.CallToolResult(content=content, is_error=is_error, result_type=result_type, meta=meta)


def _text_maker() -> Callable[[str], t.TextContent]:
    """``TextContent(text=...)``, stored through the slots as :func:`_tool_maker` does (a
    block of every tools/call result on the fast path; attrs' ``__init__`` costs about twice)."""
    if not _stores_only(t.TextContent, _TEXT_FIELDS):  # pragma: no cover - plain today
        return _make_text_with_init
    new = object.__new__
    cls = t.TextContent
    s_type, s_text, s_annotations, s_meta, s_extra = _slot_setters(cls, _TEXT_FIELDS)

    def make_text(text: str) -> t.TextContent:
        block: t.TextContent = new(cls)
        s_type(block, "text")
        s_text(block, text)
        s_annotations(block, None)
        s_meta(block, None)
        s_extra(block, {})
        return block

    return make_text


def _call_result_maker() -> Callable[..., t.CallToolResult]:
    """``CallToolResult(content=..., is_error=..., result_type=..., meta=...)`` (no
    ``structuredContent``, empty ``extra``), stored through the slots as :func:`_tool_maker`
    does."""
    if not _stores_only(t.CallToolResult, _CALL_RESULT_FIELDS):  # pragma: no cover
        return _make_call_result_with_init
    new = object.__new__
    cls = t.CallToolResult
    s_meta, s_type, s_extra, s_content, s_structured, s_error = _slot_setters(
        cls, _CALL_RESULT_FIELDS
    )

    def make_call_result(
        content: tuple[t.ContentBlock, ...],
        is_error: bool | None,
        result_type: str | None,
        meta: Mapping[str, Any] | None,
    ) -> t.CallToolResult:
        result: t.CallToolResult = new(cls)
        s_meta(result, meta)
        s_type(result, result_type)
        s_extra(result, {})
        s_content(result, content)
        s_structured(result, None)
        s_error(result, is_error)
        return result

    return make_call_result


_make_text = _text_maker()
_make_call_result = _call_result_maker()


def fast_tool(value: Any) -> t.Tool | None:
    """Decode one ``tools/list`` entry without the converter, or return ``None``.

    Accepted, and nothing else: a ``dict`` with a ``str`` ``name`` and a ``dict``
    ``inputSchema``; ``title`` and ``description`` ``str``; ``outputSchema`` and ``_meta``
    ``dict``; ``annotations``, ``execution`` and ``icons`` as the helpers above take them; each
    optional key may be absent or ``null`` (which the converter reads as absent too). Values
    are exactly of those types (a subclass declines). Unknown keys go into ``extra``, in the
    entry's order. The answer equals what ``structure(value, Tool)`` gives, and shares the same
    ``inputSchema``, ``outputSchema`` and ``_meta`` objects with the entry as the converter's
    does. Any other input, valid or not, returns ``None``; this function never raises.
    """
    if type(value) is not dict:
        return None
    get = value.get
    name = get("name")
    input_schema = get("inputSchema")
    if type(name) is not str or type(input_schema) is not dict:
        return None
    title = get("title")
    description = get("description")
    output_schema = get("outputSchema")
    meta = get("_meta")
    if (
        (title is not None and type(title) is not str)
        or (description is not None and type(description) is not str)
        or (output_schema is not None and type(output_schema) is not dict)
        or (meta is not None and type(meta) is not dict)
    ):
        return None
    annotations = get("annotations")
    if annotations is not None:
        annotations = _fast_annotations(annotations)
        if annotations is None:
            return None
    execution = get("execution")
    if execution is not None:
        execution = _fast_execution(execution)
        if execution is None:
            return None
    icons = get("icons")
    if icons is not None:
        icons = _fast_icons(icons)
        if icons is None:
            return None
    if value.keys() <= _TOOL_KEYS:
        extra = {}
    else:
        extra = {k: v for k, v in value.items() if k not in _TOOL_KEYS}
    return _make_tool(
        name,
        title,
        description,
        input_schema,
        output_schema,
        annotations,
        execution,
        icons,
        meta,
        extra,
    )


def _fast_list_tools_result(result: Any) -> t.ListToolsResult | None:
    """A ``tools/list`` page whose keys are ``tools`` (a ``list`` of entries that
    :func:`fast_tool` takes) and optionally ``nextCursor`` (a ``str`` or ``null``), decoded
    without the converter; ``None`` for anything else."""
    if type(result) is not dict:
        return None
    entries = result.get("tools")
    if type(entries) is not list:
        return None
    cursor = result.get("nextCursor")
    size = len(result)
    if size != 1 and not (size == 2 and "nextCursor" in result):
        return None
    if cursor is not None and type(cursor) is not str:
        return None
    tools: list[t.Tool] = []
    for entry in entries:
        tool = fast_tool(entry)
        if tool is None:
            return None
        tools.append(tool)
    return t.ListToolsResult(tools=tuple(tools), next_cursor=cursor)


def decode_result(method: str, result: Mapping[str, Any], *, path: str = "$.result") -> Any:
    """Decode the ``result`` of a request ``method`` into its wire type, by ``resultType``.

    - absent or ``"complete"``: the method's result type. A 2025-11-25 task-augmented
      ``tools/call``, ``sampling/createMessage`` or ``elicitation/create`` answer (``task``
      and no ``content`` or ``action``, no ``resultType``) gives a
      :class:`CreateTaskResult`.
    - ``"input_required"``: an :class:`InputRequiredResult`, for ``tools/call``,
      ``resources/read`` and ``prompts/get`` only, and only with ``inputRequests`` or
      ``requestState``.
    - ``"task"``: the tasks extension's :class:`ExtCreateTaskResult`, for ``tools/call`` only
      (whether the extension was negotiated is the session's check).

    Anything else raises :class:`InvalidMessage` naming ``<path>.resultType``; a result of the
    wrong shape raises :class:`InvalidMessage` naming the field at fault. An unknown method
    raises :class:`LocalProtocolError` (we never send a request we cannot decode).

    The common ``tools/call`` result (text blocks only, optional boolean ``isError``, nothing
    else) and the common ``tools/list`` page (see :func:`fast_tool`) take a fast path that skips
    the converter and builds an equal object.
    """
    if method == "tools/call":
        fast = _fast_call_tool_result(result)
        if fast is not None:
            return fast
    elif method == "tools/list":
        listing = _fast_list_tools_result(result)
        if listing is not None:
            return listing
    spec = request_spec(method)
    if not isinstance(result, dict):
        raise _invalid(method, "expected an object", path)
    result_type = result.get("resultType")
    type_path = f"{path}.resultType"
    if result_type is None or result_type == "complete":
        if (
            result_type is None
            and method in LEGACY_TASK_METHODS
            and "task" in result
            and "content" not in result
            and "action" not in result
        ):
            return structure(result, t.CreateTaskResult, path=path)
        return structure(result, spec.result, path=path)
    if not isinstance(result_type, str):
        raise _invalid(method, "resultType must be a string", type_path)
    if result_type == "input_required":
        if method not in INPUT_REQUIRED_METHODS:
            raise _invalid(
                method,
                "resultType 'input_required' is only allowed for tools/call, resources/read"
                " and prompts/get",
                type_path,
            )
        answer = structure(result, t.InputRequiredResult, path=path)
        if answer.input_requests is None and answer.request_state is None:
            raise _invalid(
                method, "an input_required result needs inputRequests or requestState", path
            )
        return answer
    if result_type == "task":
        if method not in TASK_RESULT_METHODS:
            raise _invalid(
                method,
                "resultType 'task' is only allowed for tools/call (tasks extension)",
                type_path,
            )
        return structure(result, t.ExtCreateTaskResult, path=path)
    raise _invalid(
        method,
        f"unknown resultType {result_type!r} (expected 'complete', 'input_required' or 'task')",
        type_path,
    )


def encode(obj: Any) -> dict[str, Any]:
    """Encode a wire object (params, result, content...) as a JSON-ready ``dict``.

    Optional fields that are ``None`` are left out; unknown keys kept in ``extra`` are written
    back. Raises ``TypeError`` if ``obj`` does not encode to a JSON object, and
    :class:`LocalProtocolError` if a value in it is nested too deeply to encode.
    """
    out = unstructure(obj)
    if not isinstance(out, dict):
        raise TypeError(f"{type(obj).__name__} does not encode to a JSON object")
    return out


def _wire_types() -> Mapping[str, Any]:
    table: dict[str, Any] = {
        name: value
        for name in t.__all__
        if attrs.has(value := getattr(t, name)) and isinstance(value, type)
    }
    table.update(
        {
            # Unions, under their schema names.
            "ContentBlock": t.ContentBlock,
            "SamplingMessageContentBlock": t.SamplingContent,
            "ResourceContents": t.ResourceContents,
            "ElicitRequestParams": t.ElicitRequestParams,
            "InputRequest": t.InputRequest,
            "InputResponse": t.InputResponse,
            "InputRequests": Mapping[str, t.InputRequest],
            "InputResponses": Mapping[str, t.InputResponse],
            # The name of ResourceTemplateReference up to 2025-03-26.
            "ResourceReference": t.ResourceTemplateReference,
        }
    )
    return MappingProxyType(dict(sorted(table.items())))


#: Schema type name (as in ``schema.ts``, such as ``"CallToolResult"`` or
#: ``"ElicitRequestURLParams"``) -> the class, or for a union name the union form, to pass to
#: ``structure``. Every wire class of ``_types`` is listed under its own name.
WIRE_TYPES: Mapping[str, Any] = _wire_types()
