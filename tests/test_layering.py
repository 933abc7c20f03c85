"""The layering rules of DESIGN.md, checked.

- ``trio_mcp.protocol`` is sans-IO: it imports with trio (and every I/O library) blocked.
- Dependencies point one way: actors -> transports -> protocol.
- Inside ``actors``: cli -> agent -> runtime -> config; ``testing`` uses only ``config``,
  ``transports`` and ``protocol``.
- Imports across layers and subpackages are relative; no generic top-level ``protocol`` /
  ``transports`` / ``actors`` module ever gets imported.
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
#: What each part of ``actors`` may import (besides itself, ``transports`` and ``protocol``).
ACTORS_ALLOWED = {
    "config": set(),
    "runtime": {"config"},
    "agent": {"runtime", "config"},
    "cli": {"agent", "runtime", "config"},
    "testing": {"config"},
}


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


def _module_of(path: Path) -> tuple[str, ...]:
    """``("actors", "runtime", "_session")`` for ``actors/runtime/_session.py``."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return parts[:-1] if parts[-1] == "__init__" else parts


def _imports(path: Path) -> list[tuple[tuple[str, ...], int]]:
    """The modules a file imports from the three layers, as absolute part tuples (without
    ``trio_mcp``), with the line; absolute imports of a layer are returned as they are."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = _module_of(path)
    if path.name != "__init__.py":
        package = package[:-1]
    found: list[tuple[tuple[str, ...], int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = tuple((node.module or "").split(".")) if node.module else ()
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                target = base + module
                found.append((target or tuple(alias.name for alias in node.names)[:1], node.lineno))
            elif module[:1] == ("trio_mcp",):
                found.append((module[1:], node.lineno))
            elif module[:1] and module[0] in LAYERS:
                found.append((("<absolute>", *module), node.lineno))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = tuple(alias.name.split("."))
                if parts[0] == "trio_mcp":
                    found.append((parts[1:], node.lineno))
                elif parts[0] in LAYERS:
                    found.append((("<absolute>", *parts), node.lineno))
    return found


def _files(layer: str) -> list[Path]:
    return sorted((ROOT / layer).rglob("*.py"))


@pytest.mark.parametrize("layer", LAYERS)
def test_dependencies_point_one_way(layer: str) -> None:
    for path in _files(layer):
        where = path.relative_to(ROOT)
        for target, line in _imports(path):
            assert target[0] != "<absolute>", f"{where}:{line}: absolute import of {target[1:]}"
            assert target[0] in LAYERS, f"{where}:{line}: imports {target}"
            assert ORDER[target[0]] <= ORDER[layer], (
                f"{where}:{line} imports {'.'.join(target)}: dependencies point "
                "actors -> transports -> protocol"
            )


def test_protocol_stays_sans_io() -> None:
    for path in _files("protocol"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            for name in names:
                assert name.split(".")[0] not in {"trio", "httpx", "trio_websocket"}, (
                    f"protocol/{path.name} imports {name}: protocol/ must stay sans-IO"
                )


def test_actors_parts_point_one_way() -> None:
    for path in _files("actors"):
        module = _module_of(path)
        if len(module) < 2 or module[1] not in ACTORS_ALLOWED:
            continue  # actors/__init__.py re-exports every part
        part = module[1]
        where = path.relative_to(ROOT)
        for target, line in _imports(path):
            if target[0] != "actors":
                if part == "testing":
                    assert target[0] in ("transports", "protocol"), f"{where}:{line}"
                continue
            assert len(target) >= 2, f"{where}:{line}: imports the actors package itself"
            other = target[1]
            assert other == part or other in ACTORS_ALLOWED[part], (
                f"{where}:{line}: actors/{part} imports actors/{other}; the parts point "
                "cli -> agent -> runtime -> config, and testing uses only config, transports "
                "and protocol"
            )


def test_no_generic_top_level_modules_loaded() -> None:
    import trio_mcp.actors
    import trio_mcp.protocol
    import trio_mcp.transports

    del trio_mcp
    assert not set(LAYERS) & set(sys.modules)
