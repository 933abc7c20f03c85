"""trio_mcp.protocol: the sans-IO core of trio-mcp. It never imports trio.

Wire types, the one cattrs converter, JSON-RPC envelopes and correlation, the protocol version
table, framing (newline-delimited JSON and server-sent events) and the error tree.
"""

from __future__ import annotations

from ._codec import structure, unstructure
from ._errors import (
    CallError,
    CallTimeout,
    ConfigError,
    ConnectError,
    ConnectTimeout,
    FrameTooLarge,
    HeaderMismatch,
    InternalError,
    InvalidMessage,
    InvalidParams,
    InvalidRequest,
    LocalProtocolError,
    McpError,
    McpTransportConfigError,
    MethodNotFound,
    MissingClientCapability,
    ParseError,
    ProtocolError,
    RemoteProtocolError,
    ResourceNotFound,
    RpcError,
    RuntimeClosed,
    ServerDisconnected,
    ServerUnavailable,
    ToolExecutionError,
    ToolNotFound,
    TransportClosed,
    TransportError,
    UnsupportedProtocolVersion,
    UnsupportedVersion,
    UrlElicitationRequired,
)

__all__ = [
    "CallError",
    "CallTimeout",
    "ConfigError",
    "ConnectError",
    "ConnectTimeout",
    "FrameTooLarge",
    "HeaderMismatch",
    "InternalError",
    "InvalidMessage",
    "InvalidParams",
    "InvalidRequest",
    "LocalProtocolError",
    "McpError",
    "McpTransportConfigError",
    "MethodNotFound",
    "MissingClientCapability",
    "ParseError",
    "ProtocolError",
    "RemoteProtocolError",
    "ResourceNotFound",
    "RpcError",
    "RuntimeClosed",
    "ServerDisconnected",
    "ServerUnavailable",
    "ToolExecutionError",
    "ToolNotFound",
    "TransportClosed",
    "TransportError",
    "UnsupportedProtocolVersion",
    "UnsupportedVersion",
    "UrlElicitationRequired",
    "structure",
    "unstructure",
]

for _name in __all__:
    _obj = globals()[_name]
    if getattr(_obj, "__module__", "").startswith(__name__ + "."):
        _obj.__module__ = __name__
del _name, _obj
