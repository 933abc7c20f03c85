"""trio_mcp.actors.cli: the ``trio-mcp`` command line and the demo."""

from __future__ import annotations

from ._cli import (
    ExitCode,
    main,
)
from ._demo import (
    run_demo,
)

__all__ = [
    "ExitCode",
    "main",
    "run_demo",
]
