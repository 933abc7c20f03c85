"""trio_mcp.actors.testing: for test authors, in the manner of ``trio.testing``: the scriptable
fake MCP server (in memory, or as a stdio subprocess: ``python -m trio_mcp.actors.testing``) and
the seeded chaos transport.
"""

from __future__ import annotations

from ._chaos import (
    ChaosAction,
    ChaosPolicy,
    ChaosStatistics,
    ChaosTransport,
    ChaosTransportFactory,
    chaos_transport_factory,
)
from ._fakes import (
    FakeHeaderTransport,
    FakePrompt,
    FakeResource,
    FakeResourceTemplate,
    FakeServer,
    FakeSkill,
    FakeTask,
    FakeTool,
    ToolContext,
)

__all__ = [
    "ChaosAction",
    "ChaosPolicy",
    "ChaosStatistics",
    "ChaosTransport",
    "ChaosTransportFactory",
    "FakeHeaderTransport",
    "FakePrompt",
    "FakeResource",
    "FakeResourceTemplate",
    "FakeServer",
    "FakeSkill",
    "FakeTask",
    "FakeTool",
    "ToolContext",
    "chaos_transport_factory",
]
