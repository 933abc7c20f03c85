"""trio_mcp.actors.config: the typed configuration (both products' shapes), its loaders and
redaction, and the policy value types (permission rules, profiles, budgets).
"""

from __future__ import annotations

from ._backoff import (
    RetryPolicy,
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
from ._policy import (
    DEFAULT_RENDER_BUDGET,
    MAX_BLOB_BYTES,
    PROFILES,
    PermissionRule,
    Profile,
    parse_rules,
)

__all__ = [
    "CATALOG_SHAPES",
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_CATALOG_LIST_CAP",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_OFFLOAD_CHARS",
    "DEFAULT_RENDER_BUDGET",
    "MAX_BLOB_BYTES",
    "PROFILES",
    "CatalogShape",
    "ConfigShape",
    "ExtraServers",
    "LoadedConfig",
    "NetworkPolicy",
    "PermissionRule",
    "Profile",
    "RetryPolicy",
    "RuntimeConfig",
    "SecurityPolicy",
    "ServerConfig",
    "TransportKind",
    "expand_variables",
    "load_agentao_config",
    "load_config",
    "load_echo_config",
    "load_mcp_json",
    "parse_rules",
    "project_config_path",
    "redacted_config",
    "user_config_path",
]
