"""trio-mcp's pytest plugin: fixtures for testing an agent host against a fake MCP server.

Registered through the ``pytest11`` entry point ``trio_mcp``, so pytest loads it wherever
trio-mcp is installed; ``-p no:trio_mcp`` turns it off. It is inert until a test asks for one of
its fixtures: it has no hooks, no options, no autouse fixtures, and loading it imports nothing of
trio-mcp but this module (each fixture imports what it needs when it runs).

The fixtures build on each other; override any of them (a fixture of the same name in a test
module or a ``conftest.py``) to script the server, the chaos or the configuration:

- ``mcp_fake_server``: the :class:`~trio_mcp.actors.testing.FakeServer` (named ``fake``, one
  tool ``echo``);
- ``mcp_chaos_policy``: ``None`` (no chaos), a :class:`~trio_mcp.actors.testing.ChaosPolicy`
  for every connection, or a list of them, one per connection (``None``: no chaos for it);
- ``mcp_chaos``: the :class:`~trio_mcp.actors.testing.ChaosTransportFactory` every connection
  to the fake goes through (its ``connections`` and ``transports`` to assert on);
- ``mcp_server_config``, ``mcp_runtime_config``, ``mcp_host_callbacks``: what the runtime is
  opened with;
- ``mcp_runtime``: a :class:`~trio_mcp.actors.Runtime` over all of it, its servers settled
  (``await rt.wait_ready()``), closed when the test ends. A trio fixture: the test must run under
  pytest-trio (``trio_mode = true``, or ``@pytest.mark.trio``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .actors import HostCallbacks, Runtime, RuntimeConfig, ServerConfig
    from .actors.testing import ChaosPolicy, ChaosTransportFactory, FakeServer

    ChaosPolicies = ChaosPolicy | Sequence[ChaosPolicy | None] | None

__all__ = [
    "mcp_chaos",
    "mcp_chaos_policy",
    "mcp_fake_server",
    "mcp_host_callbacks",
    "mcp_runtime",
    "mcp_runtime_config",
    "mcp_server_config",
]


@pytest.fixture
def mcp_fake_server() -> FakeServer:
    """The fake MCP server the runtime connects to: named ``fake``, with one tool ``echo``
    (registered as ``mcp_fake_echo``; it answers its arguments as JSON). Script it in the test
    through its attributes (``mcp_fake_server.hang.add("tools/call")``,
    ``crash_after_calls``...) or override the fixture to build another."""
    from .actors.testing import FakeServer, FakeTool

    return FakeServer(name="fake", tools=[FakeTool("echo", "Echo the arguments")])


@pytest.fixture
def mcp_chaos_policy() -> ChaosPolicies:
    """The chaos between the runtime and the fake: none. Override it to return a
    ``ChaosPolicy`` (every connection, seed ``seed + n`` for connection ``n``) or a list of
    them, one per connection in turn (``None``: no chaos; the connections past the list get
    none)."""
    return None


@pytest.fixture
def mcp_chaos(
    mcp_fake_server: FakeServer, mcp_chaos_policy: ChaosPolicies
) -> ChaosTransportFactory:
    """The transport factory of the fake's connections, through the chaos transport as
    ``mcp_chaos_policy`` says: ``mcp_chaos.connections`` counts the connections the runtime
    opened, ``mcp_chaos.transports`` holds the chaos wrappers (their ``actions``)."""
    from .actors.testing import chaos_transport_factory

    policy = () if mcp_chaos_policy is None else mcp_chaos_policy
    return chaos_transport_factory(mcp_fake_server.transport_factory(), policy)


@pytest.fixture
def mcp_server_config(
    mcp_fake_server: FakeServer, mcp_chaos: ChaosTransportFactory
) -> ServerConfig:
    """The fake's ``ServerConfig``: named as the fake, reached in memory through ``mcp_chaos``,
    with the default timeouts and retry policy."""
    from .actors import ServerConfig, TransportKind

    return ServerConfig(
        name=mcp_fake_server.name, type=TransportKind.CUSTOM, transport_factory=mcp_chaos
    )


@pytest.fixture
def mcp_runtime_config(mcp_server_config: ServerConfig) -> RuntimeConfig:
    """The runtime's configuration: ``mcp_server_config`` alone, the defaults otherwise."""
    from .actors import RuntimeConfig

    return RuntimeConfig(servers=(mcp_server_config,))


@pytest.fixture
def mcp_host_callbacks() -> HostCallbacks:
    """The host callbacks the runtime is opened with: none (roots, sampling and elicitation
    refused). Override it to test your host's own."""
    from .actors import HostCallbacks

    return HostCallbacks()


@pytest.fixture
async def mcp_runtime(
    mcp_runtime_config: RuntimeConfig, mcp_host_callbacks: HostCallbacks
) -> AsyncIterator[Runtime]:
    """A runtime over ``mcp_runtime_config``, its servers settled (READY, or failed: see
    ``rt.status()``) before the test starts, closed when it ends. Ask for ``autojump_clock``
    too and it runs in virtual time."""
    from .actors import open_runtime

    async with open_runtime(mcp_runtime_config, callbacks=mcp_host_callbacks) as rt:
        await rt.wait_ready()
        yield rt
