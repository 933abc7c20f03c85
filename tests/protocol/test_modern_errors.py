"""The errors a 2026-07-28 server answers with, as the client raises them."""

from __future__ import annotations

from trio_mcp.protocol import (
    MissingClientCapability,
    RpcError,
    UnsupportedProtocolVersion,
)


def test_missing_client_capability_names_what_the_server_needs_and_what_to_do() -> None:
    error = RpcError.from_error(
        -32021,
        "sampling and roots required",
        {"requiredCapabilities": {"sampling": {}, "roots": {}}},
        server="s",
        method="tools/call",
    )
    assert isinstance(error, MissingClientCapability)
    assert error.required_capabilities == ("sampling", "roots")
    assert str(error) == (
        "JSON-RPC error -32021 from 's' to tools/call: sampling and roots required (the server "
        "needs the client capabilities sampling, roots, which this client did not declare: give "
        "the runtime a sampling callback and a list_roots callback (HostCallbacks) to declare it)"
    )


def test_missing_client_capability_without_data_or_with_an_unknown_capability() -> None:
    bare = RpcError.from_error(-32021, "nope")
    assert isinstance(bare, MissingClientCapability)
    assert bare.required_capabilities == ()
    assert "did not say which in data.requiredCapabilities" in str(bare)
    odd = RpcError.from_error(-32021, "x", {"requiredCapabilities": {"extensions": {}}})
    assert isinstance(odd, MissingClientCapability)
    assert "needs the client capabilities extensions, which this client did not declare)" in str(
        odd
    )
    assert RpcError.from_error(-32021, "x", {"requiredCapabilities": "all"}).data == {
        "requiredCapabilities": "all"
    }


def test_unsupported_protocol_version_is_its_own_class() -> None:
    error = RpcError.from_error(-32022, "no", {"supported": ["2026-07-28"]})
    assert isinstance(error, UnsupportedProtocolVersion)
