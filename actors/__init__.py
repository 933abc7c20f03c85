"""trio_mcp.actors: the runtime (supervisors, sessions, registry), the CLI and test fakes."""

from __future__ import annotations

__all__: list[str] = []
