"""trio_mcp.actors.agent: what the model sees and what gates its calls: the agent surface over a
runtime (model tools, provider export, the model's calls with permissions and approvals), risk,
rendering, and the resource, prompt and skill tools.
"""

from __future__ import annotations

from ._catalog import (
    AGENTAO_CATALOG_TOOLS,
    CATALOG_TOOL_NAMES,
    ECHO_CATALOG_TOOLS,
    ModelTool,
    ModelToolResult,
    ModelToolStatus,
    catalog_tool_definitions,
)
from ._export import (
    Exportable,
    ExportResult,
    to_anthropic_tools,
    to_openai_tools,
)
from ._hosted import (
    HostedMcpExport,
    HostedMcpNote,
    HostedMcpRefusal,
    to_anthropic_mcp_servers,
    to_openai_hosted_mcp,
)
from ._providers import (
    ProviderApi,
    ProviderToolCall,
    ToolRound,
    anthropic_tool_calls,
    anthropic_tool_result,
    call_provider_tool,
    openai_chat_image_message,
    openai_chat_tool_calls,
    openai_chat_tool_message,
    openai_responses_tool_calls,
    openai_responses_tool_output,
    run_anthropic_tool_calls,
    run_openai_chat_tool_calls,
    run_openai_responses_tool_calls,
)
from ._risk import (
    ApprovalCallback,
    ApprovalRequest,
    ApprovalStore,
    Decision,
    RiskLevel,
)
from ._sampling import (
    AnthropicSampler,
    OpenAISampler,
    SamplingApproval,
    SamplingBudget,
    SamplingModel,
    SamplingRefused,
    SamplingUsage,
    choose_model,
)
from ._search import (
    SEARCH_TOOL_NAME,
    ToolSearch,
)
from ._skills import (
    ACTIVATE_SKILL_TOOL,
    READ_SKILL_FILE_TOOL,
    SKILL_TOOL_NAMES,
    SkillCatalogEntry,
    SkillGate,
    SkillShelf,
)
from ._strict import (
    StrictConversion,
    StrictRules,
    drop_omitted_nulls,
    to_strict_schema,
)
from ._surface import (
    AgentSurface,
)

__all__ = [
    "ACTIVATE_SKILL_TOOL",
    "AGENTAO_CATALOG_TOOLS",
    "CATALOG_TOOL_NAMES",
    "ECHO_CATALOG_TOOLS",
    "READ_SKILL_FILE_TOOL",
    "SEARCH_TOOL_NAME",
    "SKILL_TOOL_NAMES",
    "AgentSurface",
    "AnthropicSampler",
    "ApprovalCallback",
    "ApprovalRequest",
    "ApprovalStore",
    "Decision",
    "ExportResult",
    "Exportable",
    "HostedMcpExport",
    "HostedMcpNote",
    "HostedMcpRefusal",
    "ModelTool",
    "ModelToolResult",
    "ModelToolStatus",
    "OpenAISampler",
    "ProviderApi",
    "ProviderToolCall",
    "RiskLevel",
    "SamplingApproval",
    "SamplingBudget",
    "SamplingModel",
    "SamplingRefused",
    "SamplingUsage",
    "SkillCatalogEntry",
    "SkillGate",
    "SkillShelf",
    "StrictConversion",
    "StrictRules",
    "ToolRound",
    "ToolSearch",
    "anthropic_tool_calls",
    "anthropic_tool_result",
    "call_provider_tool",
    "catalog_tool_definitions",
    "choose_model",
    "drop_omitted_nulls",
    "openai_chat_image_message",
    "openai_chat_tool_calls",
    "openai_chat_tool_message",
    "openai_responses_tool_calls",
    "openai_responses_tool_output",
    "run_anthropic_tool_calls",
    "run_openai_chat_tool_calls",
    "run_openai_responses_tool_calls",
    "to_anthropic_mcp_servers",
    "to_anthropic_tools",
    "to_openai_hosted_mcp",
    "to_openai_tools",
    "to_strict_schema",
]
