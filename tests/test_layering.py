"""The layering rules of DESIGN.md, checked.

- ``trio_mcp.protocol`` is sans-IO: it imports with trio (and every I/O library) blocked.
- Dependencies point one way: actors -> transports -> protocol.
- No generic top-level ``protocol`` / ``transports`` / ``actors`` module ever gets imported.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("protocol", "transports", "actors")
ORDER = {layer: rank for rank, layer in enumerate(LAYERS)}


def test_protocol_imports_with_trio_blocked() -> None:
    script = textwrap.dedent(
        """
        import pkgutil, sys
        for name in ("trio", "httpx", "trio_websocket", "anyio", "outcome"):
            sys.modules[name] = None  # any import of it now raises ImportError
        import trio_mcp.protocol as protocol
        for info in pkgutil.iter_modules(protocol.__path__):
            __import__(f"trio_mcp.protocol.{info.name}")
        loaded = sorted(m for m in sys.modules if m.startswith("trio_mcp."))
        print(" ".join(loaded))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    loaded = done.stdout.split()
    assert "trio_mcp.protocol._codec" in loaded
    assert all(name.startswith("trio_mcp.protocol") for name in loaded)


def _imports(path: Path) -> list[tuple[int, str]]:
    """(relative level, module) for every ``from ... import`` in a file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            found.append((node.level, node.module or ""))
        elif isinstance(node, ast.Import):
            found.extend((0, alias.name) for alias in node.names)
    return found


@pytest.mark.parametrize("layer", LAYERS)
def test_dependencies_point_one_way(layer: str) -> None:
    for path in sorted((ROOT / layer).glob("*.py")):
        for level, module in _imports(path):
            if level == 0:
                top = module.split(".")[0]
                assert top not in LAYERS, f"{path.name}: absolute import of {module!r}"
                if module.startswith("trio_mcp."):
                    target = module.split(".")[1]
                    assert ORDER[target] <= ORDER[layer], f"{path.name} imports {module}"
                if layer == "protocol":
                    assert top not in {"trio", "httpx", "trio_websocket"}, (
                        f"protocol/{path.name} imports {module}: protocol/ must stay sans-IO"
                    )
            elif level == 2:
                target = module.split(".")[0]
                assert ORDER[target] < ORDER[layer], (
                    f"{layer}/{path.name} imports ..{module}: dependencies point "
                    "actors -> transports -> protocol"
                )


def test_no_generic_top_level_modules_loaded() -> None:
    import trio_mcp.actors
    import trio_mcp.protocol
    import trio_mcp.transports

    del trio_mcp
    assert not set(LAYERS) & set(sys.modules)
