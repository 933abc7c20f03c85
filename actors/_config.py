"""The typed configuration of a runtime and of each server.

These classes are what the runtime runs on. They validate themselves when built (fail closed, with
:class:`McpTransportConfigError` naming the server and the key); loading them from the Echo and
Agentao configuration shapes is ``trio_mcp.actors`` configuration loading's job.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Final, Literal

import attrs

from ..protocol._errors import McpTransportConfigError
from ..protocol._framing import DEFAULT_MAX_FRAME_BYTES
from ._backoff import RetryPolicy
from ._naming import valid_server_name

if TYPE_CHECKING:
    from ..transports._base import Transport

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_CONNECT_TIMEOUT",
    "RuntimeConfig",
    "ServerConfig",
    "TransportKind",
]

DEFAULT_CONNECT_TIMEOUT: Final = 60.0
DEFAULT_CALL_TIMEOUT: Final = 120.0

TransportFactory = Callable[[], AbstractAsyncContextManager["Transport"]]


class TransportKind(StrEnum):
    """How the runtime reaches a server."""

    STDIO = "stdio"
    HTTP = "http"
    SSE = "sse"
    WS = "ws"
    #: A transport the host builds itself (in-memory servers, tests): ``transport_factory``.
    CUSTOM = "custom"


def _timeout(server: str, key: str, value: Any, *, allow_none: bool) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise McpTransportConfigError(
            f"server {server!r}: {key} must be a number of seconds, got {value!r}"
        )
    if not math.isfinite(value) or value <= 0:
        raise McpTransportConfigError(
            f"server {server!r}: {key} must be a finite number of seconds > 0, got {value!r}"
        )


@attrs.frozen(kw_only=True)
class ServerConfig:
    """One MCP server: how to reach it and how to treat it."""

    name: str
    type: TransportKind | None = None
    # stdio
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = attrs.field(factory=dict)
    cwd: str | None = None
    # URL transports
    url: str | None = None
    headers: Mapping[str, str] = attrs.field(factory=dict)
    # a transport the host builds (type CUSTOM)
    transport_factory: TransportFactory | None = attrs.field(default=None, eq=False, repr=False)

    enabled: bool = True
    #: Spawn or connect plus the handshake and the first tool listing.
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    #: Each call; None for no limit.
    timeout: float | None = DEFAULT_CALL_TIMEOUT
    #: A progress notification restarts the call's timer, up to ``max_call_time`` in all.
    progress_resets_timeout: bool = False
    max_call_time: float | None = None
    trust_level: Literal["untrusted", "trusted"] = "untrusted"
    tools_include: tuple[str, ...] | None = None
    tools_exclude: tuple[str, ...] = ()
    #: Sent with logging/setLevel after the handshake when the server declares logging.
    log_level: str | None = None
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    resources: bool = True
    skills: bool = False

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.name, str) or not valid_server_name(self.name):
            raise McpTransportConfigError(
                f"server name {self.name!r} is not allowed: use only letters, digits, '.', '-', '_'"
            )
        kind = self.transport_kind
        if kind is TransportKind.CUSTOM:
            if self.transport_factory is None:
                raise McpTransportConfigError(
                    f"server {self.name!r}: type 'custom' needs a transport_factory"
                )
        elif (self.url is None) == (self.command is None):
            raise McpTransportConfigError(
                f"server {self.name!r}: give exactly one of 'command' (stdio) and 'url' "
                f"(HTTP, SSE or WebSocket)"
                + ("; it has both" if self.url is not None else "; it has neither")
            )
        elif kind is TransportKind.STDIO and self.command is None:
            raise McpTransportConfigError(f"server {self.name!r}: type 'stdio' needs 'command'")
        elif kind is not TransportKind.STDIO and self.url is None:
            raise McpTransportConfigError(f"server {self.name!r}: type {kind.value!r} needs 'url'")
        _timeout(self.name, "connect_timeout", self.connect_timeout, allow_none=False)
        _timeout(self.name, "timeout", self.timeout, allow_none=True)
        _timeout(self.name, "max_call_time", self.max_call_time, allow_none=True)
        if self.max_frame_bytes <= 0:
            raise McpTransportConfigError(f"server {self.name!r}: max_frame_bytes must be > 0")

    @property
    def transport_kind(self) -> TransportKind:
        """The transport: given, or inferred (``command`` -> stdio, bare ``url`` -> HTTP)."""
        if self.type is not None:
            return self.type
        if self.transport_factory is not None:
            return TransportKind.CUSTOM
        return TransportKind.STDIO if self.command is not None else TransportKind.HTTP


@attrs.frozen(kw_only=True)
class RuntimeConfig:
    """Everything a runtime needs: the servers and the policies that apply to all of them."""

    servers: tuple[ServerConfig, ...] = ()
    #: The master switch: False connects nothing.
    enabled: bool = True
    retry: RetryPolicy = attrs.field(factory=RetryPolicy)
    #: Quiet time after a list_changed notification before re-listing.
    list_changed_debounce: float = 0.25
    #: Caps on a paginated listing: a server over them fails alone, with a clear error.
    max_list_pages: int = 100
    max_list_entries: int = 10_000
    #: Names of the host's own tools: an MCP tool mapping to one of them is refused.
    builtin_tool_names: frozenset[str] = frozenset()
    client_name: str = "trio-mcp"
    client_version: str | None = None

    def __attrs_post_init__(self) -> None:
        seen: set[str] = set()
        for server in self.servers:
            if server.name in seen:
                raise McpTransportConfigError(f"server {server.name!r} is configured twice")
            seen.add(server.name)

    def server(self, name: str) -> ServerConfig:
        for server in self.servers:
            if server.name == name:
                return server
        raise KeyError(name)

    @classmethod
    def from_servers(
        cls, servers: Mapping[str, ServerConfig] | Iterable[ServerConfig], **options: Any
    ) -> RuntimeConfig:
        """Build from a mapping ``name -> ServerConfig`` (or an iterable of them)."""
        items = servers.values() if isinstance(servers, Mapping) else servers
        return cls(servers=tuple(items), **options)
