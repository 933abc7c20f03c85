"""trio_mcp.transports.stdio: one MCP server as a child process in its own process group,
newline-delimited JSON over its stdin and stdout."""

from __future__ import annotations

from ._stdio import (
    DEFAULT_ENV_ALLOWLIST,
    StdioParameters,
    StdioStatistics,
    StdioTransport,
    child_environment,
    open_stdio_transport,
)

__all__ = [
    "DEFAULT_ENV_ALLOWLIST",
    "StdioParameters",
    "StdioStatistics",
    "StdioTransport",
    "child_environment",
    "open_stdio_transport",
]
