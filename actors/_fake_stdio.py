"""Entry point of the fake MCP server as a stdio subprocess.

``python -m trio_mcp.actors._fake_stdio --spec FILE`` (or ``--spec-json TEXT``): see
:meth:`trio_mcp.actors.FakeServer.from_spec` for the spec. A module of its own, so that running
it does not re-import a module that ``trio_mcp.actors`` has already imported.
"""

from __future__ import annotations

from ._fakes import main

if __name__ == "__main__":
    raise SystemExit(main())
