"""trio_mcp.actors.runtime: the runtime core: ``open_runtime`` / ``serve_runtime``, the
``Runtime`` handle, its supervisors, sessions, pending-call tables and registry, and the events and
statuses it reports.
"""

from __future__ import annotations

from ._callbacks import (
    ElicitationCallback,
    HostCallbacks,
    RootsCallback,
    SamplingCallback,
)
from ._events import (
    Event,
    EventSubscription,
    ListChanged,
    ResourceUpdated,
    ServerLogged,
    ServerState,
    ServerStateChanged,
    SkillsChanged,
    SkillSkipped,
    TaskStatusChanged,
    ToolRefusal,
    ToolsChanged,
)
from ._hooks import (
    CallHook,
    CallNext,
    ToolCallRequest,
)
from ._instructions import (
    ServerInstructions,
)
from ._naming import (
    registered_name,
)
from ._registry import (
    RegisteredTool,
)
from ._resources import (
    PromptPage,
    PromptRead,
    ResourcePage,
    ResourceRead,
    ResourceTemplatePage,
)
from ._runtime import (
    USE_DEFAULT,
    ReadyReport,
    Runtime,
    RuntimeState,
    TransportOpener,
    TransportWrapper,
    open_runtime,
    serve_runtime,
)
from ._session import (
    ProgressCallback,
)
from ._shaping import (
    AppliedShape,
)
from ._signin import (
    DEFAULT_OAUTH,
    OAuthFactories,
    SignInFactory,
    StoreFactory,
    open_sign_in,
)
from ._skills import (
    McpSkill,
    SkillDirectoryPage,
    SkillFile,
    SkillIntegrityError,
    SkillListing,
    SkippedSkill,
)
from ._skillwatch import (
    SkillsView,
)
from ._supervisor import (
    ServerStatus,
)
from ._tasks import (
    TaskHandle,
    TaskInfo,
)
from ._taskstore import (
    TaskRecord,
)
from ._tenants import (
    Tenant,
)

__all__ = [
    "DEFAULT_OAUTH",
    "USE_DEFAULT",
    "AppliedShape",
    "CallHook",
    "CallNext",
    "ElicitationCallback",
    "Event",
    "EventSubscription",
    "HostCallbacks",
    "ListChanged",
    "McpSkill",
    "OAuthFactories",
    "ProgressCallback",
    "PromptPage",
    "PromptRead",
    "ReadyReport",
    "RegisteredTool",
    "ResourcePage",
    "ResourceRead",
    "ResourceTemplatePage",
    "ResourceUpdated",
    "RootsCallback",
    "Runtime",
    "RuntimeState",
    "SamplingCallback",
    "ServerInstructions",
    "ServerLogged",
    "ServerState",
    "ServerStateChanged",
    "ServerStatus",
    "SignInFactory",
    "SkillDirectoryPage",
    "SkillFile",
    "SkillIntegrityError",
    "SkillListing",
    "SkillSkipped",
    "SkillsChanged",
    "SkillsView",
    "SkippedSkill",
    "StoreFactory",
    "TaskHandle",
    "TaskInfo",
    "TaskRecord",
    "TaskStatusChanged",
    "Tenant",
    "ToolCallRequest",
    "ToolRefusal",
    "ToolsChanged",
    "TransportOpener",
    "TransportWrapper",
    "open_runtime",
    "open_sign_in",
    "registered_name",
    "serve_runtime",
]
