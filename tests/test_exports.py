"""Each layer's public API: a sorted ``__all__`` that matches what the package offers."""

from __future__ import annotations

import importlib
import types

import pytest

LAYERS = ("trio_mcp.protocol", "trio_mcp.transports", "trio_mcp.actors")


@pytest.mark.parametrize("name", LAYERS)
def test_all_is_sorted_and_complete(name: str) -> None:
    module = importlib.import_module(name)
    exported = list(module.__all__)
    assert exported == sorted(exported, key=str.casefold) or exported == sorted(exported)
    public = {
        key
        for key, value in vars(module).items()
        if not key.startswith("_")
        and not isinstance(value, types.ModuleType)
        and key != "annotations"
    }
    assert set(exported) == public


@pytest.mark.parametrize("name", LAYERS)
def test_public_names_claim_the_layer_as_their_module(name: str) -> None:
    module = importlib.import_module(name)
    for key in module.__all__:
        value = getattr(module, key)
        if isinstance(value, type) or callable(value):
            assert value.__module__ == name, f"{name}.{key} says it is from {value.__module__}"
