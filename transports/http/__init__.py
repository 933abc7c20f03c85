"""trio_mcp.transports.http: Streamable HTTP (with session expiry and resumption) and the legacy
HTTP+SSE transport, over httpx."""

from __future__ import annotations

from ._http import HttpTransport, open_http_transport
from ._http_base import HttpParameters, HttpStatistics
from ._sse_client import SseTransport, open_sse_transport

__all__ = [
    "HttpParameters",
    "HttpStatistics",
    "HttpTransport",
    "SseTransport",
    "open_http_transport",
    "open_sse_transport",
]
