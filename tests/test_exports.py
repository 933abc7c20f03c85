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


# --------------------------------------------------------------------------- the public face


def test_the_face_all_is_sorted_and_every_name_resolves() -> None:
    import trio_mcp
    import trio_mcp.actors
    import trio_mcp.protocol

    exported = list(trio_mcp.__all__)
    assert exported == sorted(exported, key=_isort_key)
    assert len(set(exported)) == len(exported)
    assert set(exported) == set(trio_mcp._SOURCE)
    for key in exported:
        value = getattr(trio_mcp, key)
        origin = trio_mcp.actors if trio_mcp._SOURCE[key] == ".actors" else trio_mcp.protocol
        assert value is getattr(origin, key)
    assert set(exported) <= set(dir(trio_mcp))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        trio_mcp.nope  # noqa: B018


def test_the_face_gives_what_a_host_starts_with() -> None:
    import trio_mcp

    assert trio_mcp.open_runtime.__module__ == "trio_mcp.actors.runtime._runtime"
    assert trio_mcp.serve_runtime.__name__ == "serve_runtime"
    server = trio_mcp.ServerConfig(name="fs", command="server-fs")
    config = trio_mcp.RuntimeConfig(servers=(server,))
    assert config.servers[0].transport_kind is trio_mcp.TransportKind.STDIO
    namespace: dict[str, object] = {}
    exec("from trio_mcp import *", namespace)
    assert set(trio_mcp.__all__) <= set(namespace)


def test_the_face_holds_the_whole_error_tree() -> None:
    # Every error the runtime can raise is catchable as trio_mcp.<Name>: each McpError subclass
    # that a layer exports (an error added to a layer must be added to the face).
    import trio_mcp
    from trio_mcp.protocol import McpError

    for name in ("trio_mcp.protocol", "trio_mcp.transports", "trio_mcp.actors"):
        module = importlib.import_module(name)
        for key in module.__all__:
            value = getattr(module, key)
            if isinstance(value, type) and issubclass(value, McpError):
                assert key in trio_mcp.__all__, f"{name}.{key} is not in trio_mcp.__all__"
