"""trio_mcp.transports: byte and message I/O.

Every transport implements the message-level :class:`Transport` contract: an actor that owns its
I/O tasks, takes frames (one serialized JSON-RPC message each) through its outbox, and hands
everything it receives up into one :class:`FrameSink`, a :class:`ByteChannel` bounded in bytes
(frames, then :class:`ConnectionEnded`). stdio runs each server in its own process group and ends
the whole group on close or when the host dies; the in-memory pair serves tests and in-process
servers.
"""

from __future__ import annotations

from ._base import (
    ConnectionEnded,
    CredentialTransport,
    FrameSink,
    HeaderTransport,
    Inbound,
    InboxReader,
    ProcessTransport,
    RequestCredentials,
    RequestFailed,
    ResumableTransport,
    SessionExpiredNotice,
    StatelessTransport,
    StderrLine,
    Transport,
    TransportEvent,
    TransportInfo,
    VersionedTransport,
    collapse_exception_group,
    item_size,
    map_transport_errors,
    open_inbox,
)
from ._channel import DEFAULT_MAILBOX_BYTES, ByteChannel, ByteChannelStatistics
from ._memory import MemoryTransport, MemoryTransportStatistics, memory_transport_pair
from ._redact import install_log_redaction
from ._websocket import (
    MCP_SUBPROTOCOL,
    WebSocketParameters,
    WebSocketStatistics,
    WebSocketTransport,
    accept_websocket_transport,
    open_websocket_transport,
)
from .http._http import HttpTransport, open_http_transport
from .http._http_base import HttpParameters, HttpStatistics
from .http._sse_client import SseTransport, open_sse_transport
from .stdio._stdio import (
    DEFAULT_ENV_ALLOWLIST,
    StdioParameters,
    StdioStatistics,
    StdioTransport,
    child_environment,
    open_stdio_transport,
)

__all__ = [
    "DEFAULT_ENV_ALLOWLIST",
    "DEFAULT_MAILBOX_BYTES",
    "MCP_SUBPROTOCOL",
    "ByteChannel",
    "ByteChannelStatistics",
    "ConnectionEnded",
    "CredentialTransport",
    "FrameSink",
    "HeaderTransport",
    "HttpParameters",
    "HttpStatistics",
    "HttpTransport",
    "Inbound",
    "InboxReader",
    "MemoryTransport",
    "MemoryTransportStatistics",
    "ProcessTransport",
    "RequestCredentials",
    "RequestFailed",
    "ResumableTransport",
    "SessionExpiredNotice",
    "SseTransport",
    "StatelessTransport",
    "StderrLine",
    "StdioParameters",
    "StdioStatistics",
    "StdioTransport",
    "Transport",
    "TransportEvent",
    "TransportInfo",
    "VersionedTransport",
    "WebSocketParameters",
    "WebSocketStatistics",
    "WebSocketTransport",
    "accept_websocket_transport",
    "child_environment",
    "collapse_exception_group",
    "install_log_redaction",
    "item_size",
    "map_transport_errors",
    "memory_transport_pair",
    "open_http_transport",
    "open_inbox",
    "open_sse_transport",
    "open_stdio_transport",
    "open_websocket_transport",
]
