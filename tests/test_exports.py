"""Each layer's public API: a sorted ``__all__`` that matches what the package offers."""

from __future__ import annotations

import importlib
import inspect
import types

import pytest

LAYERS = (
    "trio_mcp.protocol",
    "trio_mcp.transports",
    "trio_mcp.transports.stdio",
    "trio_mcp.transports.http",
    "trio_mcp.transports.oauth",
    "trio_mcp.actors",
    "trio_mcp.actors.runtime",
    "trio_mcp.actors.config",
    "trio_mcp.actors.agent",
    "trio_mcp.actors.cli",
    "trio_mcp.actors.testing",
)


def _isort_key(name: str) -> tuple[int, str]:
    if name.isupper():
        return (0, name)
    return (1 if name[:1].isupper() else 2, name)


@pytest.mark.parametrize("name", LAYERS)
def test_all_is_sorted_and_complete(name: str) -> None:
    module = importlib.import_module(name)
    exported = list(module.__all__)
    # isort style, as ruff's RUF022 keeps it: CONSTANTS, then Classes, then functions.
    assert exported == sorted(exported, key=_isort_key)
    public = {
        key
        for key, value in vars(module).items()
        if not key.startswith("_")
        and not isinstance(value, types.ModuleType)
        and key != "annotations"
    }
    assert set(exported) == public


@pytest.mark.parametrize("name", LAYERS)
def test_public_names_come_from_the_layers_private_modules(name: str) -> None:
    # __module__ is deliberately not rewritten: the wire types' string annotations are resolved
    # lazily (by cattrs) in the namespace of the module that defines them.
    module = importlib.import_module(name)
    for key in module.__all__:
        value = getattr(module, key)
        if isinstance(value, type) or inspect.isfunction(value):
            # Defined in a private module of this package or of one of its subpackages.
            where = value.__module__
            assert where.startswith(f"{name}."), f"{name}.{key}: {where}"
            assert where.rsplit(".", 1)[1].startswith("_"), f"{name}.{key}: {where}"
