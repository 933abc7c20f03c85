"""The MCP wire types of every protocol revision from 2024-11-05 to 2026-07-28.

One class per concept, covering the union of the fields of all revisions: a field that a later
revision added is optional (default ``None``), so the same class decodes what an old server and
what a new server sends. The converter in :mod:`._codec` maps the snake_case attributes to the
camelCase wire keys, ``meta`` to ``_meta``, keeps unknown keys in ``extra`` and writes them back.

Rules that hold for every class here:

- A field with default ``None`` is optional on the wire and is left out when it is ``None``. A
  field that the spec requires but allows to be ``null`` (a task's ``ttl``) has no default, so
  ``null`` is written.
- Closed string enumerations are ``Literal`` only where an unknown value must be refused
  (content ``type`` tags, message ``role``, elicitation ``action``). Open-ended strings (stop
  reasons, log levels, task status, cache scope, result type) are ``str`` so that a newer server
  does not break an older client.
- JSON Schemas (``inputSchema``, ``outputSchema``, ``requestedSchema``) and other free-form
  objects are kept raw as ``Mapping[str, Any]``: later code validates and scans them.
- Decoding (``structure`` in :mod:`._codec`) fails with :class:`InvalidMessage` whose ``path``
  names the wire location at fault, such as ``$.result.tools[3].inputSchema``.

Unions: content blocks are tagged on ``type``; an unknown content type decodes as
:class:`UnknownContent` (nothing is lost). Resource contents are told apart by the presence of
``text`` or ``blob``; elicitation parameters by ``mode`` (absent means form); completion
references by ``type``; MRTR input requests by ``method`` and input responses by their keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum
from typing import Any, Literal

import attrs

from ._codec import converter, json_kind, register_tagged_union
from ._errors import ToolExecutionError

__all__ = [
    "Annotations",
    "AnyCancelTaskResult",
    "AnyGetTaskResult",
    "AudioContent",
    "BlobResourceContents",
    "CacheableResult",
    "CallToolRequestParams",
    "CallToolResult",
    "CancelTaskResult",
    "CancelledNotificationParams",
    "ClientCapabilities",
    "CompleteRequestParams",
    "CompleteResult",
    "Completion",
    "CompletionArgument",
    "CompletionContext",
    "CompletionReference",
    "ContentBlock",
    "CreateMessageRequest",
    "CreateMessageRequestParams",
    "CreateMessageResult",
    "CreateTaskResult",
    "DetailedTask",
    "DiscoverResult",
    "ElicitRequest",
    "ElicitRequestFormParams",
    "ElicitRequestParams",
    "ElicitRequestURLParams",
    "ElicitResult",
    "ElicitationCapability",
    "ElicitationCompleteNotificationParams",
    "EmbeddedResource",
    "EmptyResult",
    "ErrorCode",
    "ExtCreateTaskResult",
    "GetPromptRequestParams",
    "GetPromptResult",
    "GetTaskPayloadResult",
    "GetTaskResult",
    "Icon",
    "ImageContent",
    "Implementation",
    "InitializeRequestParams",
    "InitializeResult",
    "InputRequest",
    "InputRequiredResult",
    "InputResponse",
    "ListPromptsResult",
    "ListResourceTemplatesResult",
    "ListResourcesResult",
    "ListRootsRequest",
    "ListRootsResult",
    "ListTasksResult",
    "ListToolsResult",
    "LoggingMessageNotificationParams",
    "MissingRequiredClientCapabilityData",
    "ModelHint",
    "ModelPreferences",
    "NotificationParams",
    "PaginatedRequestParams",
    "ProgressNotificationParams",
    "Prompt",
    "PromptArgument",
    "PromptMessage",
    "PromptReference",
    "PromptsCapability",
    "ReadDirectoryRequestParams",
    "ReadDirectoryResult",
    "ReadResourceRequestParams",
    "ReadResourceResult",
    "RelatedTaskMetadata",
    "RequestParams",
    "Resource",
    "ResourceContents",
    "ResourceLink",
    "ResourceTemplate",
    "ResourceTemplateReference",
    "ResourceUpdatedNotificationParams",
    "ResourcesCapability",
    "Result",
    "Role",
    "Root",
    "RootsCapability",
    "SamplingCapability",
    "SamplingContent",
    "SamplingMessage",
    "ServerCapabilities",
    "SetLevelRequestParams",
    "SkillEntry",
    "SkillResourceRef",
    "SkillsGetRequestParams",
    "SkillsGetResult",
    "SkillsListResult",
    "SubscribeRequestParams",
    "SubscriptionFilter",
    "SubscriptionsAcknowledgedNotificationParams",
    "SubscriptionsListenRequestParams",
    "SubscriptionsListenResult",
    "Task",
    "TaskMetadata",
    "TaskRequestParams",
    "TaskStatusNotificationParams",
    "TasksCapability",
    "TextContent",
    "TextResourceContents",
    "Tool",
    "ToolAnnotations",
    "ToolChoice",
    "ToolExecution",
    "ToolResultContent",
    "ToolUseContent",
    "ToolsCapability",
    "UnknownContent",
    "UnknownInputRequest",
    "UnsubscribeRequestParams",
    "UnsupportedProtocolVersionData",
    "UpdateTaskRequestParams",
    "UrlElicitationRequiredData",
]

#: The role of a message's author. Any other value is refused.
Role = Literal["user", "assistant"]


class ErrorCode(IntEnum):
    """The JSON-RPC error codes that MCP defines (all revisions).

    ``RESOURCE_NOT_FOUND`` (-32002) is used up to 2025-11-25; from 2026-07-28 a missing resource
    is ``INVALID_PARAMS`` with ``data.uri``. ``URL_ELICITATION_REQUIRED`` exists in 2025-11-25
    only. ``HEADER_MISMATCH``, ``MISSING_REQUIRED_CLIENT_CAPABILITY`` and
    ``UNSUPPORTED_PROTOCOL_VERSION`` are new in 2026-07-28.
    """

    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    RESOURCE_NOT_FOUND = -32002
    HEADER_MISMATCH = -32020
    MISSING_REQUIRED_CLIENT_CAPABILITY = -32021
    UNSUPPORTED_PROTOCOL_VERSION = -32022
    URL_ELICITATION_REQUIRED = -32042


# --------------------------------------------------------------------------- bases


@attrs.frozen(kw_only=True)
class RequestParams:
    """Parameters of a request that has nothing but ``_meta`` (``ping``, ``server/discover``,
    ``roots/list``). In 2026-07-28 ``_meta`` carries the per-request protocol version and client
    capabilities; it is kept raw here."""

    meta: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class NotificationParams:
    """Parameters of a notification that has nothing but ``_meta`` (the ``list_changed``
    notifications, ``notifications/initialized``)."""

    meta: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class PaginatedRequestParams:
    """Parameters of a paginated list request: an opaque ``cursor`` from the previous page's
    ``nextCursor`` (absent for the first page; an empty string is a valid cursor)."""

    cursor: str | None = None
    meta: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class Result:
    """Base of every result. ``result_type`` is the 2026-07-28 discriminator (``"complete"``,
    ``"input_required"``, or an extension's value such as ``"task"``); absent from older servers,
    which means ``"complete"``. It is an open string here: ``decode_result`` in ``_methods``
    checks it."""

    meta: Mapping[str, Any] | None = None
    result_type: str | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class CacheableResult(Result):
    """A result that may be cached (2026-07-28): fresh for ``ttl_ms`` milliseconds after it was
    received, and shareable across authorization contexts only if ``cache_scope`` is
    ``"public"``. Both are absent from older servers (treat as not cacheable)."""

    ttl_ms: int | None = None
    cache_scope: str | None = None


@attrs.frozen(kw_only=True)
class EmptyResult(Result):
    """The answer ``{}`` (plus ``_meta``/``resultType``) to ``ping``, ``resources/subscribe``,
    ``logging/setLevel``, ``tasks/update`` and the like."""


# --------------------------------------------------------------------------- metadata


@attrs.frozen(kw_only=True)
class Icon:
    """An icon for display (2025-11-25+). ``src`` is an ``https:`` or ``data:`` URI; clients that
    fetch it must apply the spec's safety rules. ``theme`` is ``"light"`` or ``"dark"``."""

    src: str
    mime_type: str | None = None
    sizes: tuple[str, ...] | None = None
    theme: str | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class Implementation:
    """Name and version of a client or server (``clientInfo`` / ``serverInfo``). ``title``
    (2025-06-18+) is for display; ``description``, ``icons`` and ``website_url`` are 2025-11-25+.
    Self-reported: never base security decisions on it."""

    name: str
    title: str | None = None
    version: str
    description: str | None = None
    icons: tuple[Icon, ...] | None = None
    website_url: str | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class Annotations:
    """Hints about a content block or resource: its intended ``audience`` (roles), its
    ``priority`` (0 to 1) and when it was last modified (ISO 8601, 2025-06-18+)."""

    audience: tuple[str, ...] | None = None
    priority: float | None = None
    last_modified: str | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


# --------------------------------------------------------------------------- capabilities


@attrs.frozen(kw_only=True)
class RootsCapability:
    """The client can answer ``roots/list``; ``list_changed``: it sends
    ``notifications/roots/list_changed`` (up to 2025-11-25)."""

    list_changed: bool | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class SamplingCapability:
    """The client can answer ``sampling/createMessage``; ``context``: it honours
    ``includeContext``; ``tools``: it accepts ``tools``/``toolChoice`` (2025-11-25+)."""

    context: Mapping[str, Any] | None = None
    tools: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ElicitationCapability:
    """The client can answer ``elicitation/create``. ``{}`` means form mode only; from
    2025-11-25 ``form`` and ``url`` name the supported modes."""

    form: Mapping[str, Any] | None = None
    url: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class TasksCapability:
    """Task support in 2025-11-25 (client or server side): ``list`` / ``cancel`` say whether
    ``tasks/list`` / ``tasks/cancel`` work; ``requests`` says which requests may be task-augmented,
    such as ``{"tools": {"call": {}}}`` (server) or ``{"sampling": {"createMessage": {}}}``
    (client). Kept raw; :meth:`supports_request` reads it."""

    list: Mapping[str, Any] | None = None
    cancel: Mapping[str, Any] | None = None
    requests: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)

    def supports_request(self, method: str) -> bool:
        """Whether requests of ``method`` (such as ``"tools/call"``) may be task-augmented."""
        group, _, name = method.partition("/")
        entry = (self.requests or {}).get(group)
        return isinstance(entry, Mapping) and isinstance(entry.get(name), Mapping)


@attrs.frozen(kw_only=True)
class ClientCapabilities:
    """What the client supports. Sent in ``initialize`` (up to 2025-11-25) or, from 2026-07-28, in
    every request's ``_meta["io.modelcontextprotocol/clientCapabilities"]``. ``extensions`` maps
    an extension identifier to its settings object; ``tasks`` is 2025-11-25 only."""

    experimental: Mapping[str, Any] | None = None
    roots: RootsCapability | None = None
    sampling: SamplingCapability | None = None
    elicitation: ElicitationCapability | None = None
    tasks: TasksCapability | None = None
    extensions: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class PromptsCapability:
    """The server offers prompts; ``list_changed``: it announces changes."""

    list_changed: bool | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ResourcesCapability:
    """The server offers resources; ``subscribe``: per-resource update notifications;
    ``list_changed``: it announces list changes."""

    subscribe: bool | None = None
    list_changed: bool | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ToolsCapability:
    """The server offers tools; ``list_changed``: it announces changes."""

    list_changed: bool | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ServerCapabilities:
    """What the server supports, from the ``initialize`` result or ``server/discover``.
    ``completions`` is 2025-03-26+; ``tasks`` is 2025-11-25 only; ``extensions`` maps an extension
    identifier (such as ``io.modelcontextprotocol/skills``) to its settings."""

    experimental: Mapping[str, Any] | None = None
    logging: Mapping[str, Any] | None = None
    completions: Mapping[str, Any] | None = None
    prompts: PromptsCapability | None = None
    resources: ResourcesCapability | None = None
    tools: ToolsCapability | None = None
    tasks: TasksCapability | None = None
    extensions: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


# --------------------------------------------------------------------------- lifecycle


@attrs.frozen(kw_only=True)
class InitializeRequestParams:
    """Parameters of ``initialize`` (2024-11-05 to 2025-11-25): the revision the client asks
    for, its capabilities and its identity."""

    protocol_version: str
    capabilities: ClientCapabilities
    client_info: Implementation
    meta: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class InitializeResult(Result):
    """The server's answer to ``initialize``: the revision it chose (the client must refuse one
    it does not speak), its capabilities, identity and optional ``instructions`` for the model."""

    protocol_version: str
    capabilities: ServerCapabilities
    server_info: Implementation
    instructions: str | None = None


@attrs.frozen(kw_only=True)
class DiscoverResult(CacheableResult):
    """The answer to ``server/discover`` (2026-07-28): every revision the server supports, its
    capabilities and optional instructions. The server's identity is in
    ``_meta["io.modelcontextprotocol/serverInfo"]``."""

    supported_versions: tuple[str, ...]
    capabilities: ServerCapabilities
    instructions: str | None = None


# --------------------------------------------------------------------------- content blocks


@attrs.frozen(kw_only=True)
class TextContent:
    """A text content block."""

    type: Literal["text"] = "text"
    text: str
    annotations: Annotations | None = None
    meta: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ImageContent:
    """An image: base64 ``data`` of type ``mime_type``."""

    type: Literal["image"] = "image"
    data: str
    mime_type: str
    annotations: Annotations | None = None
    meta: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class AudioContent:
    """An audio clip: base64 ``data`` of type ``mime_type`` (2025-03-26+)."""

    type: Literal["audio"] = "audio"
    data: str
    mime_type: str
    annotations: Annotations | None = None
    meta: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class Resource:
    """A resource the server can read (``resources/list``). ``size`` is in bytes; ``title`` is
    2025-06-18+, ``icons`` 2025-11-25+."""

    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    annotations: Annotations | None = None
    size: int | None = None
    icons: tuple[Icon, ...] | None = None
    meta: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)

    @property
    def display_name(self) -> str:
        """``title`` if given, else ``name``."""
        return self.title or self.name


@attrs.frozen(kw_only=True)
class ResourceLink(Resource):
    """A content block that points at a resource by URI (2025-06-18+). The resource need not
    appear in ``resources/list``."""

    type: Literal["resource_link"] = "resource_link"


@attrs.frozen(kw_only=True)
class TextResourceContents:
    """The text of a resource."""

    uri: str
    mime_type: str | None = None
    text: str
    meta: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class BlobResourceContents:
    """The binary contents of a resource, base64 in ``blob``."""

    uri: str
    mime_type: str | None = None
    blob: str
    meta: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


#: Resource contents: text or blob, told apart by which key is present.
ResourceContents = TextResourceContents | BlobResourceContents


@attrs.frozen(kw_only=True)
class EmbeddedResource:
    """A content block that carries a resource's contents inline."""

    type: Literal["resource"] = "resource"
    resource: ResourceContents
    annotations: Annotations | None = None
    meta: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class UnknownContent:
    """A content block of a type this library does not know (from a newer revision or an
    extension). Everything but ``type`` is kept in ``extra`` and written back unchanged."""

    type: str
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ToolUseContent:
    """In sampling (2025-11-25+): the model asks to call tool ``name`` with ``input``; ``id``
    links the answer (a :class:`ToolResultContent`)."""

    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: Mapping[str, Any]
    meta: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ToolResultContent:
    """In sampling (2025-11-25+): the result of the tool use ``tool_use_id``."""

    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    content: tuple[ContentBlock, ...]
    structured_content: Any = None
    is_error: bool | None = None
    meta: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


#: A content block of a tool result, prompt message or resource link list. Unknown types decode
#: as :class:`UnknownContent`.
ContentBlock = (
    TextContent | ImageContent | AudioContent | ResourceLink | EmbeddedResource | UnknownContent
)

#: A content block of a sampling message. Unknown types decode as :class:`UnknownContent`.
SamplingContent = (
    TextContent | ImageContent | AudioContent | ToolUseContent | ToolResultContent | UnknownContent
)


# --------------------------------------------------------------------------- tools


@attrs.frozen(kw_only=True)
class ToolAnnotations:
    """Untrusted hints about a tool's behaviour (2025-03-26+). Absent hints take the spec's
    defaults: not read-only, destructive, not idempotent, open world."""

    title: str | None = None
    read_only_hint: bool | None = None
    destructive_hint: bool | None = None
    idempotent_hint: bool | None = None
    open_world_hint: bool | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ToolExecution:
    """How a tool may run (2025-11-25): ``task_support`` is ``"forbidden"`` (also when absent),
    ``"optional"`` or ``"required"``."""

    task_support: str | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class Tool:
    """A tool the server offers. ``input_schema`` and ``output_schema`` are JSON Schemas, kept
    raw (the decoder only checks that they are objects)."""

    name: str
    title: str | None = None
    description: str | None = None
    input_schema: Mapping[str, Any]
    output_schema: Mapping[str, Any] | None = None
    annotations: ToolAnnotations | None = None
    execution: ToolExecution | None = None
    icons: tuple[Icon, ...] | None = None
    meta: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)

    @property
    def display_name(self) -> str:
        """``title``, else ``annotations.title``, else ``name`` (the spec's display order)."""
        if self.title:
            return self.title
        if self.annotations is not None and self.annotations.title:
            return self.annotations.title
        return self.name


@attrs.frozen(kw_only=True)
class ListToolsResult(CacheableResult):
    """One page of ``tools/list``; ``next_cursor`` is absent on the last page."""

    tools: tuple[Tool, ...]
    next_cursor: str | None = None


@attrs.frozen(kw_only=True)
class TaskMetadata:
    """Asks for task-augmented execution (2025-11-25): ``ttl`` is the requested retention time
    in milliseconds."""

    ttl: int | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class CallToolRequestParams:
    """Parameters of ``tools/call``. ``task`` (2025-11-25) asks for a task; ``input_responses``
    and ``request_state`` (2026-07-28) carry the answers to an :class:`InputRequiredResult` when
    the call is retried."""

    name: str
    arguments: Mapping[str, Any] | None = None
    task: TaskMetadata | None = None
    input_responses: Mapping[str, InputResponse] | None = None
    request_state: str | None = None
    meta: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class CallToolResult(Result):
    """The result of a tool call. ``is_error`` true means the tool ran and failed: that is data
    for the model, not an exception (see :meth:`raise_for_error`). ``structured_content``
    (2025-06-18+) is a JSON object up to 2025-11-25 and any JSON value from 2026-07-28; a JSON
    ``null`` reads as absent."""

    content: tuple[ContentBlock, ...]
    structured_content: Any = None
    is_error: bool | None = None

    @property
    def text(self) -> str:
        """The text of all text content blocks, joined by newlines."""
        return "\n".join(block.text for block in self.content if isinstance(block, TextContent))

    def raise_for_error(
        self, *, server: str | None = None, request_id: int | str | None = None
    ) -> CallToolResult:
        """Return this result unchanged, or raise :class:`ToolExecutionError` if the tool reported
        a failure (``isError: true``). The error's message is the text content of the result."""
        if not self.is_error:
            return self
        text = self.text or "the tool reported an error (isError) without any text content"
        raise ToolExecutionError(text, server=server, method="tools/call", request_id=request_id)


# --------------------------------------------------------------------------- resources


@attrs.frozen(kw_only=True)
class ResourceTemplate:
    """A family of resources described by an RFC 6570 ``uri_template``."""

    uri_template: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    annotations: Annotations | None = None
    icons: tuple[Icon, ...] | None = None
    meta: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)

    @property
    def display_name(self) -> str:
        """``title`` if given, else ``name``."""
        return self.title or self.name


@attrs.frozen(kw_only=True)
class ListResourcesResult(CacheableResult):
    """One page of ``resources/list``."""

    resources: tuple[Resource, ...]
    next_cursor: str | None = None


@attrs.frozen(kw_only=True)
class ListResourceTemplatesResult(CacheableResult):
    """One page of ``resources/templates/list``."""

    resource_templates: tuple[ResourceTemplate, ...]
    next_cursor: str | None = None


@attrs.frozen(kw_only=True)
class ReadResourceRequestParams:
    """Parameters of ``resources/read``; ``input_responses`` / ``request_state`` as in
    :class:`CallToolRequestParams` (2026-07-28)."""

    uri: str
    input_responses: Mapping[str, InputResponse] | None = None
    request_state: str | None = None
    meta: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ReadResourceResult(CacheableResult):
    """The contents of a resource (several parts are allowed)."""

    contents: tuple[ResourceContents, ...]


@attrs.frozen(kw_only=True)
class SubscribeRequestParams:
    """Parameters of ``resources/subscribe`` (up to 2025-11-25)."""

    uri: str
    meta: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class UnsubscribeRequestParams:
    """Parameters of ``resources/unsubscribe`` (up to 2025-11-25)."""

    uri: str
    meta: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ResourceUpdatedNotificationParams:
    """``notifications/resources/updated``: the resource at ``uri`` (or under it) changed."""

    uri: str
    meta: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


# --------------------------------------------------------------------------- prompts


@attrs.frozen(kw_only=True)
class PromptArgument:
    """An argument a prompt accepts."""

    name: str
    title: str | None = None
    description: str | None = None
    required: bool | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class Prompt:
    """A prompt template the server offers."""

    name: str
    title: str | None = None
    description: str | None = None
    arguments: tuple[PromptArgument, ...] | None = None
    icons: tuple[Icon, ...] | None = None
    meta: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)

    @property
    def display_name(self) -> str:
        """``title`` if given, else ``name``."""
        return self.title or self.name


@attrs.frozen(kw_only=True)
class ListPromptsResult(CacheableResult):
    """One page of ``prompts/list``."""

    prompts: tuple[Prompt, ...]
    next_cursor: str | None = None


@attrs.frozen(kw_only=True)
class GetPromptRequestParams:
    """Parameters of ``prompts/get``; argument values are strings. ``input_responses`` /
    ``request_state`` as in :class:`CallToolRequestParams` (2026-07-28)."""

    name: str
    arguments: Mapping[str, str] | None = None
    input_responses: Mapping[str, InputResponse] | None = None
    request_state: str | None = None
    meta: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class PromptMessage:
    """One message of a prompt, with its role (``"user"`` or ``"assistant"``; anything else is
    refused)."""

    role: Role
    content: ContentBlock
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class GetPromptResult(Result):
    """The messages of a prompt."""

    description: str | None = None
    messages: tuple[PromptMessage, ...]


# --------------------------------------------------------------------------- utilities


@attrs.frozen(kw_only=True)
class ProgressNotificationParams:
    """``notifications/progress`` for the request that carried ``progress_token`` in its
    ``_meta``. ``progress`` grows; ``total`` may be unknown; ``message`` is 2025-03-26+."""

    progress_token: int | str
    progress: float
    total: float | None = None
    message: str | None = None
    meta: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class CancelledNotificationParams:
    """``notifications/cancelled``: the sender no longer wants the answer to ``request_id``.
    ``request_id`` is required in every revision except 2025-11-25, hence optional here."""

    request_id: int | str | None = None
    reason: str | None = None
    meta: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class SetLevelRequestParams:
    """Parameters of ``logging/setLevel`` (up to 2025-11-25): an RFC 5424 level name such as
    ``"info"`` or ``"error"`` (kept as an open string)."""

    level: str
    meta: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class LoggingMessageNotificationParams:
    """``notifications/message``: a log entry from the server. ``data`` is any JSON value
    (required, may be ``null``)."""

    level: str
    logger: str | None = None
    data: Any
    meta: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class PromptReference:
    """A completion reference to a prompt argument (``ref/prompt``)."""

    type: Literal["ref/prompt"] = "ref/prompt"
    name: str
    title: str | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ResourceTemplateReference:
    """A completion reference to a resource template variable (``ref/resource``; called
    ``ResourceReference`` up to 2025-03-26)."""

    type: Literal["ref/resource"] = "ref/resource"
    uri: str
    extra: Mapping[str, Any] = attrs.field(factory=dict)


#: What a completion request completes; an unknown ``type`` is refused.
CompletionReference = PromptReference | ResourceTemplateReference


@attrs.frozen(kw_only=True)
class CompletionArgument:
    """The argument being completed and its current value."""

    name: str
    value: str
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class CompletionContext:
    """Values of the other, already resolved arguments (2025-06-18+)."""

    arguments: Mapping[str, str] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class CompleteRequestParams:
    """Parameters of ``completion/complete``."""

    ref: CompletionReference
    argument: CompletionArgument
    context: CompletionContext | None = None
    meta: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class Completion:
    """Completion values (at most 100), the total number if known, and whether there are more."""

    values: tuple[str, ...]
    total: int | None = None
    has_more: bool | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class CompleteResult(Result):
    """The answer to ``completion/complete``."""

    completion: Completion


# --------------------------------------------------------------------------- roots


@attrs.frozen(kw_only=True)
class Root:
    """A directory or file the client lets the server work in (a ``file://`` URI)."""

    uri: str
    name: str | None = None
    meta: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ListRootsResult(Result):
    """The client's answer to ``roots/list``."""

    roots: tuple[Root, ...]


# --------------------------------------------------------------------------- sampling


@attrs.frozen(kw_only=True)
class ModelHint:
    """A model name hint, matched as a substring by the client."""

    name: str | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ModelPreferences:
    """The server's model preferences; the priorities are between 0 and 1."""

    hints: tuple[ModelHint, ...] | None = None
    cost_priority: float | None = None
    speed_priority: float | None = None
    intelligence_priority: float | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ToolChoice:
    """How the model should use the offered tools: ``"auto"``, ``"required"`` or ``"none"``
    (2025-11-25+)."""

    mode: str | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class SamplingMessage:
    """A message in a sampling conversation. ``content`` is one block, or (2025-11-25+) a tuple
    of blocks."""

    role: Role
    content: SamplingContent | tuple[SamplingContent, ...]
    meta: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class CreateMessageRequestParams:
    """Parameters of ``sampling/createMessage``. ``include_context`` is ``"none"``,
    ``"thisServer"`` or ``"allServers"``; ``tools`` / ``tool_choice`` are 2025-11-25+ and only
    allowed if the client declared ``sampling.tools``; ``task`` is 2025-11-25 only."""

    messages: tuple[SamplingMessage, ...]
    model_preferences: ModelPreferences | None = None
    system_prompt: str | None = None
    include_context: str | None = None
    temperature: float | None = None
    max_tokens: int
    stop_sequences: tuple[str, ...] | None = None
    metadata: Mapping[str, Any] | None = None
    tools: tuple[Tool, ...] | None = None
    tool_choice: ToolChoice | None = None
    task: TaskMetadata | None = None
    meta: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class CreateMessageResult(Result):
    """The client's answer to a sampling request: the generated message, the model that made it
    and why it stopped (``"endTurn"``, ``"stopSequence"``, ``"maxTokens"``, ``"toolUse"`` or
    another string)."""

    role: Role
    content: SamplingContent | tuple[SamplingContent, ...]
    model: str
    stop_reason: str | None = None


# --------------------------------------------------------------------------- elicitation


@attrs.frozen(kw_only=True)
class ElicitRequestFormParams:
    """Form-mode elicitation: ask the user for data matching ``requested_schema`` (a flat object
    schema of primitive properties, kept raw). ``mode`` is absent before 2025-11-25 and may be
    absent later (absent means form)."""

    mode: Literal["form"] | None = None
    message: str
    requested_schema: Mapping[str, Any]
    task: TaskMetadata | None = None
    meta: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ElicitRequestURLParams:
    """URL-mode elicitation (2025-11-25+): ask the user to open ``url`` (never prefetched, only
    with consent). ``elicitation_id`` is required in 2025-11-25 and absent in 2026-07-28."""

    mode: Literal["url"] = "url"
    message: str
    url: str
    elicitation_id: str | None = None
    task: TaskMetadata | None = None
    meta: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


#: Elicitation parameters, told apart by ``mode`` (absent means form; an unknown mode is refused
#: with the path of ``mode``).
ElicitRequestParams = ElicitRequestFormParams | ElicitRequestURLParams


@attrs.frozen(kw_only=True)
class ElicitResult(Result):
    """The client's answer to an elicitation: ``"accept"`` (with ``content`` for forms),
    ``"decline"`` or ``"cancel"``. Any other action is refused."""

    action: Literal["accept", "decline", "cancel"]
    content: Mapping[str, Any] | None = None


@attrs.frozen(kw_only=True)
class ElicitationCompleteNotificationParams:
    """``notifications/elicitation/complete`` (2025-11-25): the URL elicitation
    ``elicitation_id`` is done. Unknown or already completed ids must be ignored."""

    elicitation_id: str
    meta: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class UrlElicitationRequiredData:
    """The ``data`` of a -32042 error (2025-11-25): the URL elicitations to complete first."""

    elicitations: tuple[ElicitRequestURLParams, ...]
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class UnsupportedProtocolVersionData:
    """The ``data`` of a -32022 error (2026-07-28): the revisions the server supports and the one
    that was requested."""

    supported: tuple[str, ...]
    requested: str | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class MissingRequiredClientCapabilityData:
    """The ``data`` of a -32021 error (2026-07-28): the client capabilities the server needs."""

    required_capabilities: ClientCapabilities
    extra: Mapping[str, Any] = attrs.field(factory=dict)


# --------------------------------------------------------------------------- MRTR (2026-07-28)


@attrs.frozen(kw_only=True)
class CreateMessageRequest:
    """An input request (in :class:`InputRequiredResult`) for a sampling completion."""

    method: Literal["sampling/createMessage"] = "sampling/createMessage"
    params: CreateMessageRequestParams
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ElicitRequest:
    """An input request (in :class:`InputRequiredResult`) for an elicitation."""

    method: Literal["elicitation/create"] = "elicitation/create"
    params: ElicitRequestParams
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ListRootsRequest:
    """An input request (in :class:`InputRequiredResult`) for the client's roots."""

    method: Literal["roots/list"] = "roots/list"
    params: RequestParams | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class UnknownInputRequest:
    """An input request for a method this library does not know; its ``params`` and everything
    else are kept in ``extra``. A client cannot fulfil it: the session decides what to do."""

    method: str
    extra: Mapping[str, Any] = attrs.field(factory=dict)


#: A request the server needs answered before it can finish (MRTR), told apart by ``method``.
InputRequest = CreateMessageRequest | ElicitRequest | ListRootsRequest | UnknownInputRequest

#: The client's answer to one :data:`InputRequest`, told apart by its keys (``action``, ``roots``
#: or ``role``/``content``/``model``).
InputResponse = ElicitResult | ListRootsResult | CreateMessageResult


@attrs.frozen(kw_only=True)
class InputRequiredResult(Result):
    """``resultType: "input_required"`` (2026-07-28; only for ``tools/call``, ``resources/read``
    and ``prompts/get``): answer every request in ``input_requests`` under the same key, then
    retry the original request with ``inputResponses`` and ``request_state`` (echoed exactly)
    and a new request id. At least one of the two is present (checked by ``decode_result``)."""

    input_requests: Mapping[str, InputRequest] | None = None
    request_state: str | None = None


# --------------------------------------------------------------------------- subscriptions


@attrs.frozen(kw_only=True)
class SubscriptionFilter:
    """Which notifications a ``subscriptions/listen`` stream should carry (2026-07-28).
    ``task_ids`` is the tasks extension's addition."""

    tools_list_changed: bool | None = None
    prompts_list_changed: bool | None = None
    resources_list_changed: bool | None = None
    resource_subscriptions: tuple[str, ...] | None = None
    task_ids: tuple[str, ...] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class SubscriptionsListenRequestParams:
    """Parameters of ``subscriptions/listen`` (2026-07-28)."""

    notifications: SubscriptionFilter
    meta: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class SubscriptionsAcknowledgedNotificationParams:
    """``notifications/subscriptions/acknowledged``: the subset of the requested notifications
    the server will send on this stream; ``_meta`` names the subscription."""

    notifications: SubscriptionFilter
    meta: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class SubscriptionsListenResult(Result):
    """The server ended a ``subscriptions/listen`` stream gracefully."""

    @property
    def subscription_id(self) -> int | str | None:
        """``_meta["io.modelcontextprotocol/subscriptionId"]``, if present."""
        value = (self.meta or {}).get("io.modelcontextprotocol/subscriptionId")
        return value if isinstance(value, int | str) and not isinstance(value, bool) else None


# --------------------------------------------------------------------------- tasks (2025-11-25)


@attrs.frozen(kw_only=True)
class RelatedTaskMetadata:
    """``_meta["io.modelcontextprotocol/related-task"]``: the task a message belongs to."""

    task_id: str
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class Task:
    """A task in the 2025-11-25 core (experimental). ``status`` is ``"working"``,
    ``"input_required"``, ``"completed"``, ``"failed"`` or ``"cancelled"`` (open string);
    ``ttl`` (milliseconds) is required and ``null`` means unlimited; ``poll_interval`` is in
    milliseconds."""

    task_id: str
    status: str
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl: int | None
    poll_interval: int | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class CreateTaskResult(Result):
    """The answer to a task-augmented request in 2025-11-25: ``{"task": {...}}`` instead of the
    request's ordinary result."""

    task: Task


@attrs.frozen(kw_only=True)
class GetTaskResult(Result):
    """The answer to ``tasks/get`` in 2025-11-25: the task's fields, flat."""

    task_id: str
    status: str
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl: int | None
    poll_interval: int | None = None


@attrs.frozen(kw_only=True)
class CancelTaskResult(Result):
    """The answer to ``tasks/cancel`` in 2025-11-25: the task's fields, flat."""

    task_id: str
    status: str
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl: int | None
    poll_interval: int | None = None


@attrs.frozen(kw_only=True)
class ListTasksResult(Result):
    """One page of ``tasks/list`` (2025-11-25)."""

    tasks: tuple[Task, ...]
    next_cursor: str | None = None


@attrs.frozen(kw_only=True)
class GetTaskPayloadResult(Result):
    """The answer to ``tasks/result`` (2025-11-25): exactly the original request's result, kept
    in ``extra`` (decode it with the original method's result type)."""


@attrs.frozen(kw_only=True)
class TaskStatusNotificationParams:
    """``notifications/tasks/status`` (2025-11-25): a task's fields, flat."""

    task_id: str
    status: str
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl: int | None
    poll_interval: int | None = None
    meta: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class TaskRequestParams:
    """Parameters of ``tasks/get``, ``tasks/result`` and ``tasks/cancel``: the task's id."""

    task_id: str
    meta: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


# --------------------------------------------------------------------------- tasks extension


@attrs.frozen(kw_only=True)
class ExtCreateTaskResult(Result):
    """The tasks extension's (``io.modelcontextprotocol/tasks``, 2026-07-28) answer to
    ``tools/call``: ``resultType: "task"`` and the task's fields, flat. ``ttl_ms`` is required
    (``null``: unlimited); ``poll_interval_ms`` is the suggested polling interval."""

    task_id: str
    status: str
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    poll_interval_ms: int | None = None


@attrs.frozen(kw_only=True)
class DetailedTask(Result):
    """A task of the tasks extension with its status-specific fields: the answer to
    ``tasks/get`` and the parameters of ``notifications/tasks``. ``input_requests`` comes with
    ``"input_required"``, ``result`` (the original request's result, raw) with ``"completed"``,
    ``error`` (the JSON-RPC error object, raw) with ``"failed"``."""

    task_id: str
    status: str
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    poll_interval_ms: int | None = None
    input_requests: Mapping[str, InputRequest] | None = None
    result: Mapping[str, Any] | None = None
    error: Mapping[str, Any] | None = None


@attrs.frozen(kw_only=True)
class UpdateTaskRequestParams:
    """Parameters of ``tasks/update`` (tasks extension): answers to a task's outstanding input
    requests, under their keys."""

    task_id: str
    input_responses: Mapping[str, InputResponse]
    meta: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


#: ``tasks/get`` answers: the 2025-11-25 flat task (``ttl``) or the extension's detailed task
#: (``ttlMs``), told apart by which of the two keys is present.
AnyGetTaskResult = GetTaskResult | DetailedTask

#: ``tasks/cancel`` answers: the 2025-11-25 flat task (has ``taskId``) or the extension's empty
#: acknowledgement.
AnyCancelTaskResult = CancelTaskResult | EmptyResult


# --------------------------------------------------------------------------- skills extension


@attrs.frozen(kw_only=True)
class SkillResourceRef:
    """One file of a skill: its URI, ``digest`` (``"sha256:<64 hex>"`` over the raw bytes) and
    ``size`` in bytes. The host must verify both on every fetched file."""

    uri: str
    digest: str
    size: int
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class SkillEntry:
    """A skill (``io.modelcontextprotocol/skills``): the URI of its ``SKILL.md``, its frontmatter
    (verbatim, raw) and ``resources``: the complete file manifest, or the string ``"dynamic"``.
    An entry with ``resources`` absent or any other string is decoded but invalid: check
    :attr:`has_valid_resources` before loading it."""

    uri: str
    frontmatter: Mapping[str, Any]
    resources: tuple[SkillResourceRef, ...] | str | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)

    @property
    def is_dynamic(self) -> bool:
        """Whether the server marked the skill ``"dynamic"`` (no stable digests)."""
        return self.resources == "dynamic"

    @property
    def has_valid_resources(self) -> bool:
        """Whether ``resources`` is a manifest or ``"dynamic"`` (the only loadable forms)."""
        return isinstance(self.resources, tuple) or self.is_dynamic


@attrs.frozen(kw_only=True)
class SkillsListResult(CacheableResult):
    """One page of ``skills/list``. Possibly empty or partial: not proof of "no skills"."""

    skills: tuple[SkillEntry, ...]
    next_cursor: str | None = None


@attrs.frozen(kw_only=True)
class SkillsGetRequestParams:
    """Parameters of ``skills/get``: the URI of the skill's ``SKILL.md``."""

    uri: str
    meta: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class SkillsGetResult(CacheableResult):
    """The answer to ``skills/get``."""

    skill: SkillEntry


@attrs.frozen(kw_only=True)
class ReadDirectoryRequestParams:
    """Parameters of ``resources/directory/read`` (skills extension, only when the server
    declared ``directoryRead: true``)."""

    uri: str
    cursor: str | None = None
    meta: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ReadDirectoryResult(Result):
    """The direct children of a directory resource; subdirectories have ``mimeType``
    ``"inode/directory"``."""

    resources: tuple[Resource, ...]
    next_cursor: str | None = None


# --------------------------------------------------------------------------- decoding hooks


def _structure_as(value: Any, form: Any) -> Any:
    """``converter.structure`` for a type form (a union, a tuple type) that mypy cannot check."""
    return converter.structure(value, form)


def _structure_resource_contents(value: Any, _: Any) -> ResourceContents:
    if not isinstance(value, dict):
        raise TypeError(f"expected an object, got {json_kind(value)}")
    if "text" in value:
        return converter.structure(value, TextResourceContents)
    if "blob" in value:
        return converter.structure(value, BlobResourceContents)
    raise ValueError("resource contents need a 'text' or a 'blob' field")


def _structure_sampling_content(value: Any, _: Any) -> Any:
    if isinstance(value, list):
        return _structure_as(value, tuple[SamplingContent, ...])
    return _structure_as(value, SamplingContent)


def _structure_input_response(value: Any, _: Any) -> InputResponse:
    if not isinstance(value, dict):
        raise TypeError(f"expected an object, got {json_kind(value)}")
    if "action" in value:
        return converter.structure(value, ElicitResult)
    if "roots" in value:
        return converter.structure(value, ListRootsResult)
    if "role" in value or "model" in value or "content" in value:
        return converter.structure(value, CreateMessageResult)
    raise ValueError(
        "an input response must be an elicitation result (action), a roots list (roots) or a"
        " sampling result (role, content, model)"
    )


def _structure_any_get_task(value: Any, _: Any) -> AnyGetTaskResult:
    if isinstance(value, dict) and "ttl" in value and "ttlMs" not in value:
        return converter.structure(value, GetTaskResult)
    return converter.structure(value, DetailedTask)


def _structure_any_cancel_task(value: Any, _: Any) -> AnyCancelTaskResult:
    if isinstance(value, dict) and "taskId" in value:
        return converter.structure(value, CancelTaskResult)
    return converter.structure(value, EmptyResult)


def _structure_skill_resources(value: Any, _: Any) -> tuple[SkillResourceRef, ...] | str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return _structure_as(value, tuple[SkillResourceRef, ...])  # type: ignore[no-any-return]
    raise TypeError(f'expected an array of resources or "dynamic", got {json_kind(value)}')


_CONTENT_MEMBERS: dict[str, type] = {
    "text": TextContent,
    "image": ImageContent,
    "audio": AudioContent,
    "resource_link": ResourceLink,
    "resource": EmbeddedResource,
}
register_tagged_union(ContentBlock, tag="type", members=_CONTENT_MEMBERS, fallback=UnknownContent)
register_tagged_union(
    SamplingContent,
    tag="type",
    members={
        "text": TextContent,
        "image": ImageContent,
        "audio": AudioContent,
        "tool_use": ToolUseContent,
        "tool_result": ToolResultContent,
    },
    fallback=UnknownContent,
)
converter.register_structure_hook(
    SamplingContent | tuple[SamplingContent, ...], _structure_sampling_content
)
converter.register_structure_hook(ResourceContents, _structure_resource_contents)
# Absent mode and unknown modes go to the form class, whose Literal refuses an unknown mode with
# the path of the "mode" key.
register_tagged_union(
    ElicitRequestParams,
    tag="mode",
    members={"form": ElicitRequestFormParams, "url": ElicitRequestURLParams},
    fallback=ElicitRequestFormParams,
)
register_tagged_union(
    CompletionReference,
    tag="type",
    members={"ref/prompt": PromptReference, "ref/resource": ResourceTemplateReference},
)
register_tagged_union(
    InputRequest,
    tag="method",
    members={
        "sampling/createMessage": CreateMessageRequest,
        "elicitation/create": ElicitRequest,
        "roots/list": ListRootsRequest,
    },
    fallback=UnknownInputRequest,
)
converter.register_structure_hook(InputResponse, _structure_input_response)
converter.register_structure_hook(AnyGetTaskResult, _structure_any_get_task)
converter.register_structure_hook(AnyCancelTaskResult, _structure_any_cancel_task)
converter.register_structure_hook(
    tuple[SkillResourceRef, ...] | str | None,
    lambda value, _: None if value is None else _structure_skill_resources(value, _),
)
converter.register_structure_hook(
    int | str | None, lambda value, _: None if value is None else _structure_as(value, int | str)
)
