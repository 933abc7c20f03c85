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
from ._catalog import (
    AGENTAO_CATALOG_TOOLS,
    CATALOG_TOOL_NAMES,
    ECHO_CATALOG_TOOLS,
    ModelTool,
    ModelToolResult,
    ModelToolStatus,
    PromptPage,
    PromptRead,
    ResourcePage,
    ResourceRead,
    ResourceTemplatePage,
    catalog_tool_definitions,
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
    CATALOG_SHAPES,
    DEFAULT_CALL_TIMEOUT,
    DEFAULT_CATALOG_LIST_CAP,
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_OFFLOAD_CHARS,
    CatalogShape,
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
from ._export import (
    Exportable,
    ExportResult,
    to_anthropic_tools,
    to_openai_tools,
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
from ._risk import (
    ApprovalCallback,
    ApprovalRequest,
    ApprovalStore,
    Decision,
    PermissionRule,
    RiskLevel,
    parse_rules,
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
    "AGENTAO_CATALOG_TOOLS",
    "CATALOG_SHAPES",
    "CATALOG_TOOL_NAMES",
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_CATALOG_LIST_CAP",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_OFFLOAD_CHARS",
    "ECHO_CATALOG_TOOLS",
    "USE_DEFAULT",
    "ApprovalCallback",
    "ApprovalRequest",
    "ApprovalStore",
    "CatalogShape",
    "ChaosAction",
    "ChaosPolicy",
    "ChaosStatistics",
    "ChaosTransport",
    "ChaosTransportFactory",
    "ConfigShape",
    "Decision",
    "ElicitationCallback",
    "Event",
    "EventSubscription",
    "ExportResult",
    "Exportable",
    "ExtraServers",
    "FakePrompt",
    "FakeResource",
    "FakeResourceTemplate",
    "FakeServer",
    "FakeTool",
    "HostCallbacks",
    "LoadedConfig",
    "ModelTool",
    "ModelToolResult",
    "ModelToolStatus",
    "NetworkPolicy",
    "PermissionRule",
    "ProgressCallback",
    "PromptPage",
    "PromptRead",
    "RegisteredTool",
    "ResourcePage",
    "ResourceRead",
    "ResourceTemplatePage",
    "ResourceUpdated",
    "RetryPolicy",
    "RiskLevel",
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
    "catalog_tool_definitions",
    "chaos_transport_factory",
    "expand_variables",
    "load_agentao_config",
    "load_config",
    "load_echo_config",
    "load_mcp_json",
    "open_runtime",
    "parse_rules",
    "project_config_path",
    "redacted_config",
    "registered_name",
    "serve_runtime",
    "to_anthropic_tools",
    "to_openai_tools",
    "user_config_path",
]
