"""trio_mcp.actors.testing: for test authors, in the manner of ``trio.testing``: the scriptable
fake MCP server (in memory, or as a stdio subprocess: ``python -m trio_mcp.actors.testing``) and
the seeded chaos transport, and a fake OAuth world on 127.0.0.1 (:class:`FakeOAuthServer`: an
MCP endpoint behind OAuth with its authorization server) for tests of sign-in.
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
from ._oauth import FakeOAuthServer, McpEndpoint, headless_sign_in

__all__ = [
    "ChaosAction",
    "ChaosPolicy",
    "ChaosStatistics",
    "ChaosTransport",
    "ChaosTransportFactory",
    "FakeHeaderTransport",
    "FakeOAuthServer",
    "FakePrompt",
    "FakeResource",
    "FakeResourceTemplate",
    "FakeServer",
    "FakeSkill",
    "FakeTask",
    "FakeTool",
    "McpEndpoint",
    "ToolContext",
    "chaos_transport_factory",
    "headless_sign_in",
]
