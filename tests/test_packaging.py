"""The wheel holds every module of the three layers under the one ``trio_mcp`` package.

setuptools silently drops a package that is not listed in ``[tool.setuptools] packages`` (a nested
folder, say), so this builds the real wheel and compares its file list with the source tree.
``trio_mcp`` itself (the public face, ``import trio_mcp``, and the pytest plugin) is the folder
``actors/_face``, mapped by ``package-dir``: its ``__init__.py`` is ``trio_mcp/__init__.py`` in
the wheel, and nothing of it is under ``trio_mcp/actors``.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("protocol", "transports", "actors")
#: The folder that is the ``trio_mcp`` package itself (its ``__init__.py``: the public face).
FACE = ROOT / "actors" / "_face"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out)],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    (built,) = out.glob("trio_mcp-*.whl")
    return built


@pytest.fixture(scope="module")
def wheel_names(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as zf:
        return set(zf.namelist())


def wheel_name(path: Path) -> str:
    """Where a source file of the three folders is in the wheel."""
    if path.is_relative_to(FACE):
        return f"trio_mcp/{path.relative_to(FACE).as_posix()}"
    return f"trio_mcp/{path.relative_to(ROOT).as_posix()}"


def source_modules() -> set[str]:
    return {wheel_name(path) for layer in LAYERS for path in (ROOT / layer).rglob("*.py")}


def package_name(folder: Path) -> str:
    if folder == FACE:
        return "trio_mcp"
    return ".".join(("trio_mcp", *folder.relative_to(ROOT).parts))


def test_every_module_is_in_the_wheel(wheel_names: set[str]) -> None:
    missing = source_modules() - wheel_names
    assert not missing, f"modules missing from the wheel: {sorted(missing)}"


def test_every_package_folder_is_listed() -> None:
    # setuptools drops a package that pyproject.toml does not list: every folder of a layer that
    # holds Python code must be there, and nothing else.
    folders = {
        package_name(path.parent)
        for layer in LAYERS
        for path in (ROOT / layer).rglob("__init__.py")
    }
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert folders == set(setuptools["packages"])
    # The face is the one folder mapped to a package other than its own path's.
    assert setuptools["package-dir"] == {
        "trio_mcp": FACE.relative_to(ROOT).as_posix(),
        **{f"trio_mcp.{layer}": layer for layer in LAYERS},
    }
    code_folders = {path.parent for layer in LAYERS for path in (ROOT / layer).rglob("*.py")}
    assert all((folder / "__init__.py").exists() for folder in code_folders)


def test_the_face_is_the_package_itself(wheel_names: set[str]) -> None:
    assert "trio_mcp/__init__.py" in wheel_names
    assert not [name for name in wheel_names if name.startswith("trio_mcp/actors/_face")]


def test_wheel_is_typed_and_claims_no_generic_top_level(wheel_names: set[str]) -> None:
    assert "trio_mcp/py.typed" in wheel_names
    for layer in LAYERS:
        assert f"trio_mcp/{layer}/py.typed" in wheel_names
    top_level = {name.split("/", 1)[0] for name in wheel_names}
    assert top_level & set(LAYERS) == set()
    assert "trio_mcp" in top_level


def test_console_script_is_declared(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(".dist-info/entry_points.txt")]
        text = zf.read(name).decode()
    assert "[console_scripts]" in text
    assert "trio-mcp = trio_mcp.actors.cli:main" in text


def test_pytest_plugin_is_declared(wheel: Path, wheel_names: set[str]) -> None:
    # pytest loads it wherever trio-mcp is installed (docs/testing.md).
    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(".dist-info/entry_points.txt")]
        text = zf.read(name).decode()
    assert "[pytest11]\ntrio_mcp = trio_mcp.pytest_plugin\n" in text
    assert "trio_mcp/pytest_plugin.py" in wheel_names
