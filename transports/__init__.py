"""trio_mcp.transports: byte and message I/O.

Every transport implements the message-level :class:`Transport` contract (one serialized
JSON-RPC message per ``send``/``receive``). stdio runs each server in its own process group and
ends the whole group on close or when the host dies; the in-memory pair serves tests and
in-process servers.
"""

from __future__ import annotations

from ._base import Transport, TransportInfo, collapse_exception_group, map_transport_errors
from ._memory import MemoryTransport, MemoryTransportStatistics, memory_transport_pair
from ._stdio import (
    DEFAULT_ENV_ALLOWLIST,
    StdioParameters,
    StdioStatistics,
    StdioTransport,
    child_environment,
    open_stdio_transport,
)
from ._websocket import (
    MCP_SUBPROTOCOL,
    WebSocketParameters,
    WebSocketStatistics,
    WebSocketTransport,
    accept_websocket_transport,
    open_websocket_transport,
)

__all__ = [
    "DEFAULT_ENV_ALLOWLIST",
    "MCP_SUBPROTOCOL",
    "MemoryTransport",
    "MemoryTransportStatistics",
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
    "open_stdio_transport",
    "open_websocket_transport",
]
