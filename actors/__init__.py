"""trio_mcp.actors: the runtime of trio-mcp.

``open_runtime`` / ``serve_runtime`` and the ``Runtime`` handle; the configuration it runs on;
the events and statuses it reports; and, for test authors, the scriptable fake MCP server and the
seeded chaos transport.
"""

from __future__ import annotations

from ._backoff import (
    RetryPolicy,
)
from ._callbacks import (
    ElicitationCallback,
    HostCallbacks,
    RootsCallback,
    SamplingCallback,
)
from ._chaos import (
    ChaosAction,
    ChaosPolicy,
    ChaosStatistics,
    ChaosTransport,
    ChaosTransportFactory,
    chaos_transport_factory,
)
from ._config import (
    DEFAULT_CALL_TIMEOUT,
    DEFAULT_CONNECT_TIMEOUT,
    NetworkPolicy,
    RuntimeConfig,
    SecurityPolicy,
    ServerConfig,
    TransportKind,
)
from ._events import (
    Event,
    EventSubscription,
    ResourceUpdated,
    ServerLogged,
    ServerState,
    ServerStateChanged,
)
from ._fakes import (
    FakePrompt,
    FakeResource,
    FakeResourceTemplate,
    FakeServer,
    FakeTool,
    ToolContext,
)
from ._loader import (
    ConfigShape,
    ExtraServers,
    LoadedConfig,
    expand_variables,
    load_agentao_config,
    load_config,
    load_echo_config,
    load_mcp_json,
    project_config_path,
    redacted_config,
    user_config_path,
)
from ._naming import (
    registered_name,
)
from ._registry import (
    RegisteredTool,
    ToolRefusal,
    ToolsChanged,
)
from ._runtime import (
    USE_DEFAULT,
    Runtime,
    RuntimeState,
    open_runtime,
    serve_runtime,
)
from ._session import (
    ProgressCallback,
)
from ._supervisor import (
    ServerStatus,
)

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_CONNECT_TIMEOUT",
    "USE_DEFAULT",
    "ChaosAction",
    "ChaosPolicy",
    "ChaosStatistics",
    "ChaosTransport",
    "ChaosTransportFactory",
    "ConfigShape",
    "ElicitationCallback",
    "Event",
    "EventSubscription",
    "ExtraServers",
    "FakePrompt",
    "FakeResource",
    "FakeResourceTemplate",
    "FakeServer",
    "FakeTool",
    "HostCallbacks",
    "LoadedConfig",
    "NetworkPolicy",
    "ProgressCallback",
    "RegisteredTool",
    "ResourceUpdated",
    "RetryPolicy",
    "RootsCallback",
    "Runtime",
    "RuntimeConfig",
    "RuntimeState",
    "SamplingCallback",
    "SecurityPolicy",
    "ServerConfig",
    "ServerLogged",
    "ServerState",
    "ServerStateChanged",
    "ServerStatus",
    "ToolContext",
    "ToolRefusal",
    "ToolsChanged",
    "TransportKind",
    "chaos_transport_factory",
    "expand_variables",
    "load_agentao_config",
    "load_config",
    "load_echo_config",
    "load_mcp_json",
    "open_runtime",
    "project_config_path",
    "redacted_config",
    "registered_name",
    "serve_runtime",
    "user_config_path",
]
