"""The fake MCP server as a stdio subprocess.

``python -m trio_mcp.actors.testing --spec FILE`` (or ``--spec-json TEXT``): see
:meth:`trio_mcp.actors.testing.FakeServer.from_spec` for the spec.
"""

from __future__ import annotations

from ._fakes import main

if __name__ == "__main__":
    raise SystemExit(main())
