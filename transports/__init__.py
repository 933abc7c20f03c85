"""trio_mcp.transports: byte and message I/O.

stdio, Streamable HTTP, HTTP+SSE, WebSocket and in-memory transports.
"""

from __future__ import annotations

__all__: list[str] = []
