"""trio_mcp.transports: byte and message I/O.

Every transport implements the message-level :class:`Transport` contract (one serialized
JSON-RPC message per ``send``/``receive``). stdio runs each server in its own process group and
ends the whole group on close or when the host dies; the in-memory pair serves tests and
in-process servers.
"""

from __future__ import annotations

from ._base import Transport, TransportInfo, collapse_exception_group, map_transport_errors
from ._memory import MemoryTransport, MemoryTransportStatistics, memory_transport_pair
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
    "MCP_SUBPROTOCOL",
    "HttpParameters",
    "HttpStatistics",
    "HttpTransport",
    "MemoryTransport",
    "MemoryTransportStatistics",
    "SseTransport",
    "StdioParameters",
    "StdioStatistics",
    "StdioTransport",
    "Transport",
    "TransportInfo",
    "WebSocketParameters",
    "WebSocketStatistics",
    "WebSocketTransport",
    "accept_websocket_transport",
    "child_environment",
    "collapse_exception_group",
    "map_transport_errors",
    "memory_transport_pair",
    "open_http_transport",
    "open_sse_transport",
    "open_stdio_transport",
    "open_websocket_transport",
]
