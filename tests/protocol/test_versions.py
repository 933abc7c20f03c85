"""The protocol version table: eras, initialize answers, modern negotiation, feature flags and
the 2026-07-28 request ``_meta``."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_mcp.protocol._errors import LocalProtocolError, UnsupportedVersion
from trio_mcp.protocol._versions import (
    ALL_VERSIONS,
    LATEST_LEGACY,
    LATEST_MODERN,
    LEGACY_VERSIONS,
    LOG_LEVELS,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROGRESS_TOKEN,
    META_PROTOCOL_VERSION,
    MODERN_ERROR_CODES,
    MODERN_VERSIONS,
    RESERVED_REQUEST_META_KEYS,
    Era,
    VersionFeatures,
    build_request_meta,
    check_initialize_answer,
    choose_modern_version,
    era_of,
    features,
    is_modern_error,
    with_request_meta,
)

ACCEPTED = "trio-mcp speaks 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05 through initialize"


# --------------------------------------------------------------------------- constants


def test_version_constants() -> None:
    assert LEGACY_VERSIONS == ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
    assert MODERN_VERSIONS == ("2026-07-28",)
    assert LATEST_LEGACY == "2025-11-25"
    assert LATEST_MODERN == "2026-07-28"
    assert ALL_VERSIONS == (
        "2026-07-28",
        "2025-11-25",
        "2025-06-18",
        "2025-03-26",
        "2024-11-05",
    )
    # newest first: the date strings sort
    assert list(ALL_VERSIONS) == sorted(ALL_VERSIONS, reverse=True)


def test_log_levels_are_rfc5424_in_order() -> None:
    assert LOG_LEVELS == (
        "debug",
        "info",
        "notice",
        "warning",
        "error",
        "critical",
        "alert",
        "emergency",
    )


def test_meta_key_constants() -> None:
    assert META_PROTOCOL_VERSION == "io.modelcontextprotocol/protocolVersion"
    assert META_CLIENT_CAPABILITIES == "io.modelcontextprotocol/clientCapabilities"
    assert META_CLIENT_INFO == "io.modelcontextprotocol/clientInfo"
    assert META_LOG_LEVEL == "io.modelcontextprotocol/logLevel"
    assert META_PROGRESS_TOKEN == "progressToken"
    assert {
        META_PROTOCOL_VERSION,
        META_CLIENT_CAPABILITIES,
        META_CLIENT_INFO,
        META_LOG_LEVEL,
        META_PROGRESS_TOKEN,
    } == RESERVED_REQUEST_META_KEYS


# --------------------------------------------------------------------------- eras


@pytest.mark.parametrize("version", LEGACY_VERSIONS)
def test_era_of_legacy(version: str) -> None:
    assert era_of(version) is Era.LEGACY


def test_era_of_modern() -> None:
    assert era_of("2026-07-28") is Era.MODERN


@pytest.mark.parametrize("version", ["2024-10-07", "draft", "", "2026-07-28 "])
def test_era_of_unknown(version: str) -> None:
    with pytest.raises(LocalProtocolError) as info:
        era_of(version)
    assert str(info.value) == (
        f"unknown protocol version {version!r}; trio-mcp speaks "
        "2026-07-28, 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05"
    )


# --------------------------------------------------------------------------- initialize


@pytest.mark.parametrize("answered", LEGACY_VERSIONS)
def test_initialize_accepts_any_legacy_answer(answered: str) -> None:
    assert check_initialize_answer("2025-11-25", answered) == answered


def test_initialize_refuses_unknown_answer() -> None:
    with pytest.raises(UnsupportedVersion) as info:
        check_initialize_answer("2025-11-25", "2027-01-01")
    assert str(info.value) == (
        f"server answered protocol version '2027-01-01' to our '2025-11-25'; {ACCEPTED}"
    )
    assert info.value.requested == "2025-11-25"
    assert info.value.answered == "2027-01-01"
    assert info.value.path is None


def test_initialize_refuses_modern_answer() -> None:
    with pytest.raises(UnsupportedVersion) as info:
        check_initialize_answer("2025-06-18", "2026-07-28")
    assert str(info.value) == (
        f"server answered protocol version '2026-07-28' to our '2025-06-18'; {ACCEPTED} "
        "(2026-07-28 has no initialize handshake: connect to this server with the modern "
        "protocol instead)"
    )
    assert (info.value.requested, info.value.answered) == ("2025-06-18", "2026-07-28")


@pytest.mark.parametrize("requested", ["2026-07-28", "1999-01-01"])
def test_initialize_cannot_request_a_non_legacy_version(requested: str) -> None:
    with pytest.raises(LocalProtocolError) as info:
        check_initialize_answer(requested, "2025-11-25")
    assert str(info.value) == (
        f"cannot ask for protocol version {requested!r} in initialize; initialize negotiates "
        "one of 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05"
    )


@given(st.text(max_size=12))
def test_initialize_answer_property(answered: str) -> None:
    if answered in LEGACY_VERSIONS:
        assert check_initialize_answer(LATEST_LEGACY, answered) == answered
    else:
        with pytest.raises(UnsupportedVersion):
            check_initialize_answer(LATEST_LEGACY, answered)


# --------------------------------------------------------------------------- modern choice


@pytest.mark.parametrize(
    ("supported", "expected"),
    [
        (["2026-07-28"], "2026-07-28"),
        (["2027-01-01", "2026-07-28", "2025-11-25"], "2026-07-28"),
        (["2025-11-25", "2025-06-18"], None),
        ([], None),
        (["2027-01-01"], None),
        ([None, 5, {"v": "2026-07-28"}, "2026-07-28"], "2026-07-28"),
        ([None, 5], None),
        (("2026-07-28",), "2026-07-28"),
    ],
)
def test_choose_modern_version(supported: list[Any], expected: str | None) -> None:
    assert choose_modern_version(supported) == expected


# --------------------------------------------------------------------------- features


def test_features_2024_11_05() -> None:
    assert features("2024-11-05") == VersionFeatures(
        version="2024-11-05",
        era=Era.LEGACY,
        handshake=True,
        batches=False,
        protocol_version_header=False,
        ping=True,
        elicitation=False,
        url_elicitation=False,
        tasks=False,
        structured_content=False,
        audio=False,
        resource_links=False,
        logging_set_level=True,
        resource_subscribe_requests=True,
        subscriptions_listen=False,
        server_requests=True,
        input_required=False,
        resource_not_found_codes=(-32002,),
        result_type=False,
        http_transport="sse",
        roots_list_changed=True,
    )


def test_features_2025_03_26() -> None:
    f = features("2025-03-26")
    assert attrs.asdict(f, recurse=False) == {
        **attrs.asdict(features("2024-11-05"), recurse=False),
        "version": "2025-03-26",
        "batches": True,
        "audio": True,
        "http_transport": "streamable",
    }


def test_features_2025_06_18() -> None:
    f = features("2025-06-18")
    assert attrs.asdict(f, recurse=False) == {
        **attrs.asdict(features("2025-03-26"), recurse=False),
        "version": "2025-06-18",
        "batches": False,
        "protocol_version_header": True,
        "elicitation": True,
        "structured_content": True,
        "resource_links": True,
    }


def test_features_2025_11_25() -> None:
    f = features("2025-11-25")
    assert attrs.asdict(f, recurse=False) == {
        **attrs.asdict(features("2025-06-18"), recurse=False),
        "version": "2025-11-25",
        "url_elicitation": True,
        "tasks": True,
    }


def test_features_2026_07_28() -> None:
    assert features("2026-07-28") == VersionFeatures(
        version="2026-07-28",
        era=Era.MODERN,
        handshake=False,
        batches=False,
        protocol_version_header=True,
        ping=False,
        elicitation=True,
        url_elicitation=True,
        tasks=False,
        structured_content=True,
        audio=True,
        resource_links=True,
        logging_set_level=False,
        resource_subscribe_requests=False,
        subscriptions_listen=True,
        server_requests=False,
        input_required=True,
        resource_not_found_codes=(-32602, -32002),
        result_type=True,
        http_transport="streamable",
        roots_list_changed=False,
    )


@pytest.mark.parametrize("version", ALL_VERSIONS)
def test_features_agree_with_era(version: str) -> None:
    f = features(version)
    assert f.version == version
    assert f.era is era_of(version)
    legacy = f.era is Era.LEGACY
    assert f.handshake is legacy
    assert f.server_requests is legacy
    assert f.logging_set_level is legacy
    assert f.subscriptions_listen is not legacy
    assert f.result_type is not legacy
    assert f.input_required is not legacy


def test_features_unknown_version() -> None:
    with pytest.raises(LocalProtocolError, match=r"^unknown protocol version '2027-01-01'; "):
        features("2027-01-01")


def test_features_are_frozen() -> None:
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        features("2025-11-25").ping = False  # type: ignore[misc]


# --------------------------------------------------------------------------- request _meta


CAPS: dict[str, Any] = {"sampling": {}, "elicitation": {"form": {}}}


def test_build_request_meta_minimal() -> None:
    assert build_request_meta("2026-07-28", client_capabilities={}) == {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }


def test_build_request_meta_full() -> None:
    meta = build_request_meta(
        "2026-07-28",
        client_capabilities=CAPS,
        client_info={"name": "trio-mcp", "version": "0.1"},
        log_level="warning",
        progress_token=7,
        extra={"traceparent": "00-abc-def-01", "com.example/x": 1},
    )
    assert meta == {
        "traceparent": "00-abc-def-01",
        "com.example/x": 1,
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": CAPS,
        "io.modelcontextprotocol/clientInfo": {"name": "trio-mcp", "version": "0.1"},
        "io.modelcontextprotocol/logLevel": "warning",
        "progressToken": 7,
    }
    # a copy: changing the result leaves the caller's capabilities alone
    meta[META_CLIENT_CAPABILITIES]["roots"] = {}
    assert "roots" not in CAPS


def test_build_request_meta_string_progress_token() -> None:
    meta = build_request_meta("2026-07-28", client_capabilities={}, progress_token="tok")
    assert meta["progressToken"] == "tok"


@pytest.mark.parametrize("version", LEGACY_VERSIONS)
def test_build_request_meta_refuses_legacy(version: str) -> None:
    with pytest.raises(LocalProtocolError) as info:
        build_request_meta(version, client_capabilities={})
    assert str(info.value) == (
        f"protocol version {version!r} negotiates once through initialize and has no "
        "per-request _meta envelope; it exists in 2026-07-28"
    )


def test_build_request_meta_refuses_unknown_version() -> None:
    with pytest.raises(LocalProtocolError, match=r"^unknown protocol version '2030-01-01'"):
        build_request_meta("2030-01-01", client_capabilities={})


@pytest.mark.parametrize("key", sorted(RESERVED_REQUEST_META_KEYS))
def test_build_request_meta_extra_cannot_set_envelope_keys(key: str) -> None:
    with pytest.raises(LocalProtocolError) as info:
        build_request_meta("2026-07-28", client_capabilities={}, extra={key: "x", "baggage": "b"})
    assert str(info.value) == (
        f"extra _meta may not set the envelope keys [{key!r}]; pass them as the named "
        "arguments of build_request_meta"
    )


def test_build_request_meta_bad_log_level() -> None:
    with pytest.raises(LocalProtocolError) as info:
        build_request_meta("2026-07-28", client_capabilities={}, log_level="verbose")
    assert str(info.value) == (
        "unknown log level 'verbose'; use one of "
        "debug, info, notice, warning, error, critical, alert, emergency"
    )


@pytest.mark.parametrize("token", [True, 1.5, b"x"])
def test_build_request_meta_bad_progress_token(token: Any) -> None:
    with pytest.raises(LocalProtocolError) as info:
        build_request_meta("2026-07-28", client_capabilities={}, progress_token=token)
    assert str(info.value) == f"a progress token is a string or an integer, not {token!r}"


def test_with_request_meta_no_params() -> None:
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
    out = with_request_meta(None, meta)
    assert out == {"_meta": meta}
    assert out["_meta"] is not meta


def test_with_request_meta_merges_and_envelope_wins() -> None:
    params = {
        "name": "echo",
        "arguments": {"x": 1},
        "_meta": {"progressToken": 1, "com.example/k": "v"},
    }
    meta = {"progressToken": 9, META_PROTOCOL_VERSION: "2026-07-28"}
    out = with_request_meta(params, meta)
    assert out == {
        "name": "echo",
        "arguments": {"x": 1},
        "_meta": {
            "progressToken": 9,
            "com.example/k": "v",
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        },
    }
    # inputs untouched
    assert params["_meta"] == {"progressToken": 1, "com.example/k": "v"}
    assert meta == {"progressToken": 9, META_PROTOCOL_VERSION: "2026-07-28"}


def test_with_request_meta_null_meta_is_replaced() -> None:
    assert with_request_meta({"_meta": None, "a": 1}, {"k": 1}) == {"_meta": {"k": 1}, "a": 1}


def test_with_request_meta_refuses_non_object_meta() -> None:
    with pytest.raises(LocalProtocolError) as info:
        with_request_meta({"_meta": [1]}, {"k": 1})
    assert str(info.value) == (
        "params._meta must be an object to carry the request envelope, not [1]"
    )


@given(
    params=st.dictionaries(st.text(max_size=5), st.integers(), max_size=4),
    old=st.dictionaries(st.sampled_from("abcd"), st.integers(), max_size=4),
    new=st.dictionaries(st.sampled_from("cdef"), st.integers(), max_size=4),
)
def test_with_request_meta_property(
    params: dict[str, Any], old: dict[str, int], new: dict[str, int]
) -> None:
    params = {**params, "_meta": old}
    out = with_request_meta(params, new)
    assert {k: v for k, v in out.items() if k != "_meta"} == {
        k: v for k, v in params.items() if k != "_meta"
    }
    assert out["_meta"] == {**old, **new}
    for key, value in new.items():
        assert out["_meta"][key] == value


# --------------------------------------------------------------------------- era detection


@pytest.mark.parametrize("code", [-32020, -32021, -32022, -32050, -32099])
def test_modern_error_codes_prove_a_modern_server(code: int) -> None:
    assert is_modern_error(code)
    assert code in MODERN_ERROR_CODES


@pytest.mark.parametrize(
    "code", [-32019, -32000, -32100, -32601, -32602, -32600, -32603, -32002, 0, True, "-32022"]
)
def test_other_codes_do_not(code: Any) -> None:
    assert not is_modern_error(code)
