"""trio_mcp.actors.config: the typed configuration (both products' shapes), its loaders and
redaction, the approvals of project servers, and the policy value types (permission rules,
profiles, budgets).
"""

from __future__ import annotations

from ._approvals import (
    ProjectApprovals,
    ProjectOrigin,
    ProjectServerApprover,
    ProjectServerRequest,
    StoredApproval,
)
from ._backoff import (
    RetryPolicy,
)
from ._callpolicy import (
    ErrorAction,
    ErrorPolicy,
    ErrorRule,
    parse_error_policy,
    parse_error_rules,
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
    approvals_path,
    credentials_path,
    expand_variables,
    load_agentao_config,
    load_config,
    load_echo_config,
    load_mcp_json,
    project_config_path,
    redacted_config,
    user_config_path,
)
from ._oauth import (
    OAUTH_KEYS,
    login_hint,
)
from ._policy import (
    DEFAULT_RENDER_BUDGET,
    MAX_BLOB_BYTES,
    PROFILES,
    PermissionRule,
    Profile,
    parse_rules,
)
from ._shaping import (
    NO_DEFAULT,
    ArgumentShape,
    ToolShape,
)

__all__ = [
    "CATALOG_SHAPES",
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_CATALOG_LIST_CAP",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_OFFLOAD_CHARS",
    "DEFAULT_RENDER_BUDGET",
    "MAX_BLOB_BYTES",
    "NO_DEFAULT",
    "OAUTH_KEYS",
    "PROFILES",
    "ArgumentShape",
    "CatalogShape",
    "ConfigShape",
    "ErrorAction",
    "ErrorPolicy",
    "ErrorRule",
    "ExtraServers",
    "LoadedConfig",
    "NetworkPolicy",
    "PermissionRule",
    "Profile",
    "ProjectApprovals",
    "ProjectOrigin",
    "ProjectServerApprover",
    "ProjectServerRequest",
    "RetryPolicy",
    "RuntimeConfig",
    "SecurityPolicy",
    "ServerConfig",
    "StoredApproval",
    "ToolShape",
    "TransportKind",
    "approvals_path",
    "credentials_path",
    "expand_variables",
    "load_agentao_config",
    "load_config",
    "load_echo_config",
    "load_mcp_json",
    "login_hint",
    "parse_error_policy",
    "parse_error_rules",
    "parse_rules",
    "project_config_path",
    "redacted_config",
    "user_config_path",
]
