"""The layering rules of DESIGN.md, checked.

- ``trio_mcp.protocol`` is sans-IO: it imports with trio (and every I/O library) blocked.
- Dependencies point one way: actors -> transports -> protocol.
- Inside ``actors``: cli -> agent -> runtime -> config; ``testing`` uses only ``config``,
  ``transports`` and ``protocol``.
- Imports across layers and subpackages are relative; no generic top-level ``protocol`` /
  ``transports`` / ``actors`` module ever gets imported.
- The modules of the ``trio_mcp`` package itself (the folder ``actors/_face``): the public face
  (``__init__.py``) re-exports the public API of ``trio_mcp.actors`` and ``trio_mcp.protocol``
  only, and the pytest plugin uses ``trio_mcp.actors`` and ``trio_mcp.actors.testing`` only; both
  lazily, so ``import trio_mcp``, ``import trio_mcp.protocol`` and loading the plugin import no
  I/O library and no layer. (The plugin sits there, not in a part of ``actors``: importing any
  module under ``trio_mcp.actors`` runs its ``__init__``, the whole runtime, at every pytest
  start; and ``testing`` may not use ``runtime``, which its runtime fixture needs.)
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("protocol", "transports", "actors")
ORDER = {layer: rank for rank, layer in enumerate(LAYERS)}
#: The folder that is the ``trio_mcp`` package itself (pyproject.toml's package-dir).
FACE = ROOT / "actors" / "_face"
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
        import trio_mcp
        import trio_mcp.protocol as protocol
        for info in pkgutil.iter_modules(protocol.__path__):
            __import__(f"trio_mcp.protocol.{info.name}")
        # The face's names from the protocol load without trio too.
        assert trio_mcp.McpError is protocol.McpError
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
    """The layer's modules; the face (``trio_mcp`` itself, not a part of ``actors``) aside."""
    return sorted(path for path in (ROOT / layer).rglob("*.py") if not path.is_relative_to(FACE))


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


#: What each module of the ``trio_mcp`` package itself may import: public packages only.
FACE_ALLOWED = {
    "__init__.py": {"actors", "protocol"},
    "pytest_plugin.py": {"actors", "actors.testing"},
}


def _absolute_imports(tree: ast.Module) -> list[str]:
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names.append(node.module or "")
    return names


def test_the_face_imports_only_public_packages_and_only_when_used() -> None:
    assert {path.name for path in FACE.glob("*.py")} == set(FACE_ALLOWED)
    for name, allowed in FACE_ALLOWED.items():
        tree = ast.parse((FACE / name).read_text(encoding="utf-8"))
        relative = [
            node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level
        ]
        assert {node.level for node in relative} == {1}, f"{name}: imports outside trio_mcp"
        assert {node.module for node in relative} == allowed, f"{name}: imports another module"
        absolute = [
            target
            for target in _absolute_imports(tree)
            if target.split(".")[0] in {"trio_mcp", *LAYERS}
        ]
        assert not absolute, f"{name}: absolute imports of {absolute}"
        # Nothing of trio-mcp at import time: under ``if TYPE_CHECKING:`` or in a function.
        eager = [
            node.lineno
            for node in tree.body
            if isinstance(node, ast.ImportFrom) and (node.level or node.module == "trio_mcp")
        ]
        assert not eager, f"{name}:{eager}: imports trio-mcp code when it is imported"


def test_the_face_reexports_public_names() -> None:
    import trio_mcp

    sources = trio_mcp._SOURCE
    assert set(sources.values()) == {".actors", ".protocol"}
    for name, source in sources.items():
        package = importlib.import_module(source, "trio_mcp")
        assert name in package.__all__, f"trio_mcp.{name}: not public in trio_mcp{source}"


def test_importing_the_face_imports_no_layer() -> None:
    script = textwrap.dedent(
        """
        import sys
        import trio_mcp
        import trio_mcp.pytest_plugin
        print(" ".join(sorted(m for m in sys.modules if m.split(".")[0] in ("trio_mcp", "trio"))))
        trio_mcp.open_runtime
        print("trio" in sys.modules, "trio_mcp.actors" in sys.modules)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()
    assert first == "trio_mcp trio_mcp.pytest_plugin"
    assert second == "True True"  # the first use loads the runtime
