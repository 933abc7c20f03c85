"""The protocol revisions trio-mcp speaks, what each one allows, and the 2026-07-28 ``_meta``.

MCP has two eras. The *legacy* revisions (2024-11-05 to 2025-11-25) open a session with an
``initialize`` handshake that fixes the revision for the whole connection. The *modern* revision
2026-07-28 has no handshake: every request names its revision and the client's capabilities in
``params._meta`` (see :func:`build_request_meta`).

This module is a table and a few pure functions over it: no state, no I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

from ._errors import LocalProtocolError, UnsupportedVersion

__all__ = [
    "ALL_VERSIONS",
    "LATEST_LEGACY",
    "LATEST_MODERN",
    "LEGACY_VERSIONS",
    "LOG_LEVELS",
    "META_CLIENT_CAPABILITIES",
    "META_CLIENT_INFO",
    "META_LOG_LEVEL",
    "META_PROGRESS_TOKEN",
    "META_PROTOCOL_VERSION",
    "META_SERVER_INFO",
    "META_SUBSCRIPTION_ID",
    "MODERN_ERROR_CODES",
    "MODERN_VERSIONS",
    "RESERVED_REQUEST_META_KEYS",
    "Era",
    "VersionFeatures",
    "build_request_meta",
    "check_initialize_answer",
    "choose_modern_version",
    "era_of",
    "features",
    "is_modern_error",
    "with_request_meta",
]

#: The revisions negotiated through ``initialize``, newest first.
LEGACY_VERSIONS: Final = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
#: The stateless revisions (no handshake, per-request ``_meta``), newest first.
MODERN_VERSIONS: Final = ("2026-07-28",)
#: The legacy revision a client asks for in ``initialize``.
LATEST_LEGACY: Final = LEGACY_VERSIONS[0]
#: The modern revision a client puts in ``_meta`` and in ``server/discover``.
LATEST_MODERN: Final = MODERN_VERSIONS[0]
#: Every revision trio-mcp speaks, newest first.
ALL_VERSIONS: Final = MODERN_VERSIONS + LEGACY_VERSIONS

#: The RFC 5424 severities MCP logging uses, from least to most severe.
LOG_LEVELS: Final = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)

#: ``_meta`` key of a 2026-07-28 request: the revision of this request (required).
META_PROTOCOL_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
#: ``_meta`` key of a 2026-07-28 request: the client's capabilities for it (required).
META_CLIENT_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
#: ``_meta`` key of a 2026-07-28 request: the client's ``Implementation`` (optional).
META_CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
#: ``_meta`` key of a 2026-07-28 request: the log level it opts in to (optional).
META_LOG_LEVEL: Final = "io.modelcontextprotocol/logLevel"
#: ``_meta`` key of any request: the token that opts in to progress notifications.
META_PROGRESS_TOKEN: Final = "progressToken"
#: ``_meta`` key of a 2026-07-28 result: the server's ``Implementation``.
META_SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"
#: ``_meta`` key of a notification on a ``subscriptions/listen`` stream: the listen request's id.
META_SUBSCRIPTION_ID: Final = "io.modelcontextprotocol/subscriptionId"

#: The envelope keys :func:`build_request_meta` owns; ``extra`` may not set them.
RESERVED_REQUEST_META_KEYS: Final = frozenset(
    {
        META_PROTOCOL_VERSION,
        META_CLIENT_CAPABILITIES,
        META_CLIENT_INFO,
        META_LOG_LEVEL,
        META_PROGRESS_TOKEN,
    }
)


#: The JSON-RPC error codes 2026-07-28 reserves for the specification (-32020 header mismatch,
#: -32021 missing client capability, -32022 unsupported protocol version, and the rest of the
#: range for later ones). An answer with one of them proves that the server speaks the modern
#: protocol; every other code (-32601, -32602...) is what legacy servers answer too.
MODERN_ERROR_CODES: Final = range(-32099, -32019)


def is_modern_error(code: object) -> bool:
    """Whether ``code`` (a JSON-RPC error code) is one of :data:`MODERN_ERROR_CODES`: the mark
    of a server that speaks 2026-07-28, for era detection (checklist section 6). A legacy
    server's "method not found" (-32601), "invalid params" (-32602) or implementation-defined
    code (-32000 to -32019) is not; nor is anything that is not an integer."""
    return isinstance(code, int) and not isinstance(code, bool) and code in MODERN_ERROR_CODES


class Era(enum.Enum):
    """The two families of revisions: with an ``initialize`` handshake, or stateless."""

    LEGACY = "legacy"
    MODERN = "modern"


def era_of(version: str) -> Era:
    """The era of the revision ``version``.

    Raises :class:`LocalProtocolError` if trio-mcp does not know ``version``: the revision a
    connection uses is our choice, so an unknown one is a bug on our side.
    """
    if version in LEGACY_VERSIONS:
        return Era.LEGACY
    if version in MODERN_VERSIONS:
        return Era.MODERN
    raise LocalProtocolError(_unknown_version(version))


def _unknown_version(version: str) -> str:
    return f"unknown protocol version {version!r}; trio-mcp speaks {', '.join(ALL_VERSIONS)}"


def check_initialize_answer(requested: str, answered: str) -> str:
    """Accept or refuse the ``protocolVersion`` a server answered to our ``initialize``.

    A server may answer with any legacy revision, not only the one we asked for; any legacy
    revision is accepted and returned (it is the revision of the connection from then on).

    Raises :class:`UnsupportedVersion` when ``answered`` is not a legacy revision, including the
    modern 2026-07-28, which has no handshake: the client must then disconnect. Raises
    :class:`LocalProtocolError` when ``requested`` is not a legacy revision (we may only ask for
    one of those in ``initialize``).
    """
    if requested not in LEGACY_VERSIONS:
        raise LocalProtocolError(
            f"cannot ask for protocol version {requested!r} in initialize; "
            f"initialize negotiates one of {', '.join(LEGACY_VERSIONS)}"
        )
    if answered in LEGACY_VERSIONS:
        return answered
    message = (
        f"server answered protocol version {answered!r} to our {requested!r}; "
        f"trio-mcp speaks {', '.join(LEGACY_VERSIONS)} through initialize"
    )
    if answered in MODERN_VERSIONS:
        message += (
            f" ({answered} has no initialize handshake: connect to this server "
            "with the modern protocol instead)"
        )
    raise UnsupportedVersion(message, requested=requested, answered=answered)


def choose_modern_version(supported: Sequence[Any]) -> str | None:
    """The newest modern revision trio-mcp speaks that the server lists in ``supported``.

    ``supported`` is a server's ``supportedVersions`` (``server/discover``) or the
    ``data.supported`` of a -32022 error. Entries that are not strings (a misbehaving server)
    are ignored. Returns ``None`` when there is no common modern revision; it never raises.
    """
    offered = {v for v in supported if isinstance(v, str)}
    for version in MODERN_VERSIONS:
        if version in offered:
            return version
    return None


@attrs.frozen(kw_only=True)
class VersionFeatures:
    """What one protocol revision allows, as flags the runtime checks before acting.

    Obtain it with :func:`features`; do not build it yourself.
    """

    #: The revision these flags describe.
    version: str
    #: Its era.
    era: Era
    #: The connection opens with ``initialize`` + ``notifications/initialized``.
    handshake: bool
    #: JSON-RPC batches (arrays) may be sent and received (2025-03-26 only).
    batches: bool
    #: HTTP requests carry the ``MCP-Protocol-Version`` header (after initialize when legacy).
    protocol_version_header: bool
    #: ``ping`` exists (both directions).
    ping: bool
    #: The server may ask the user for input (``elicitation/create``, or MRTR when modern).
    elicitation: bool
    #: Elicitation in URL mode exists.
    url_elicitation: bool
    #: The experimental core tasks (``tasks/get|result|list|cancel``, 2025-11-25 only).
    tasks: bool
    #: Tool results may carry ``structuredContent`` and tools an ``outputSchema``.
    structured_content: bool
    #: The ``audio`` content type exists.
    audio: bool
    #: The ``resource_link`` content type exists.
    resource_links: bool
    #: The log level is set with ``logging/setLevel`` (not per request in ``_meta``).
    logging_set_level: bool
    #: ``resources/subscribe`` / ``resources/unsubscribe`` exist.
    resource_subscribe_requests: bool
    #: ``subscriptions/listen`` exists.
    subscriptions_listen: bool
    #: The server may send requests to the client (``roots/list``, ``sampling/createMessage``...).
    server_requests: bool
    #: Results may be ``input_required`` (multi round-trip requests).
    input_required: bool
    #: The error codes that mean "resource not found" for ``resources/read``.
    resource_not_found_codes: tuple[int, ...]
    #: Every result carries ``resultType``.
    result_type: bool
    #: The HTTP transport: ``"sse"`` (HTTP+SSE) or ``"streamable"`` (Streamable HTTP).
    http_transport: str
    #: The client sends ``notifications/roots/list_changed``.
    roots_list_changed: bool


def _legacy(version: str, *, rank: int) -> VersionFeatures:
    # rank: 0 = 2024-11-05, 1 = 2025-03-26, 2 = 2025-06-18, 3 = 2025-11-25
    return VersionFeatures(
        version=version,
        era=Era.LEGACY,
        handshake=True,
        batches=rank == 1,
        protocol_version_header=rank >= 2,
        ping=True,
        elicitation=rank >= 2,
        url_elicitation=rank >= 3,
        tasks=rank >= 3,
        structured_content=rank >= 2,
        audio=rank >= 1,
        resource_links=rank >= 2,
        logging_set_level=True,
        resource_subscribe_requests=True,
        subscriptions_listen=False,
        server_requests=True,
        input_required=False,
        resource_not_found_codes=(-32002,),
        result_type=False,
        http_transport="sse" if rank == 0 else "streamable",
        roots_list_changed=True,
    )


_FEATURES: Final[Mapping[str, VersionFeatures]] = {
    "2024-11-05": _legacy("2024-11-05", rank=0),
    "2025-03-26": _legacy("2025-03-26", rank=1),
    "2025-06-18": _legacy("2025-06-18", rank=2),
    "2025-11-25": _legacy("2025-11-25", rank=3),
    "2026-07-28": VersionFeatures(
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
    ),
}


def features(version: str) -> VersionFeatures:
    """The feature flags of the revision ``version``.

    Raises :class:`LocalProtocolError` for a revision trio-mcp does not know.
    """
    found = _FEATURES.get(version)
    if found is None:
        raise LocalProtocolError(_unknown_version(version))
    return found


def build_request_meta(
    version: str,
    *,
    client_capabilities: Mapping[str, Any],
    client_info: Mapping[str, Any] | None = None,
    log_level: str | None = None,
    progress_token: int | str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``_meta`` object every 2026-07-28 request carries.

    It always holds the revision and the client's capabilities for this request; the client's
    ``Implementation``, the log level and the progress token only when given. ``extra`` adds
    other keys (W3C ``traceparent``/``tracestate``/``baggage``, extension keys...).

    Raises :class:`LocalProtocolError` when ``version`` is not a modern revision (legacy
    revisions negotiate once in ``initialize``), when ``log_level`` is not one of
    :data:`LOG_LEVELS`, when ``progress_token`` is neither a string nor an integer, or when
    ``extra`` tries to set one of the envelope keys (:data:`RESERVED_REQUEST_META_KEYS`): pass
    those through the named arguments instead.
    """
    if era_of(version) is not Era.MODERN:
        raise LocalProtocolError(
            f"protocol version {version!r} negotiates once through initialize and has no "
            f"per-request _meta envelope; it exists in {', '.join(MODERN_VERSIONS)}"
        )
    meta: dict[str, Any] = {}
    if extra:
        clashes = RESERVED_REQUEST_META_KEYS.intersection(extra)
        if clashes:
            raise LocalProtocolError(
                f"extra _meta may not set the envelope keys {sorted(clashes)}; pass them as "
                "the named arguments of build_request_meta"
            )
        meta.update(extra)
    meta[META_PROTOCOL_VERSION] = version
    meta[META_CLIENT_CAPABILITIES] = dict(client_capabilities)
    if client_info is not None:
        meta[META_CLIENT_INFO] = dict(client_info)
    if log_level is not None:
        if log_level not in LOG_LEVELS:
            raise LocalProtocolError(
                f"unknown log level {log_level!r}; use one of {', '.join(LOG_LEVELS)}"
            )
        meta[META_LOG_LEVEL] = log_level
    if progress_token is not None:
        if isinstance(progress_token, bool) or not isinstance(progress_token, int | str):
            raise LocalProtocolError(
                f"a progress token is a string or an integer, not {progress_token!r}"
            )
        meta[META_PROGRESS_TOKEN] = progress_token
    return meta


def with_request_meta(params: Mapping[str, Any] | None, meta: Mapping[str, Any]) -> dict[str, Any]:
    """New request params: ``params`` with ``meta`` merged into its ``_meta``.

    Keys already in ``params["_meta"]`` are kept unless ``meta`` sets them too, in which case
    ``meta`` wins. Neither argument is modified.

    Raises :class:`LocalProtocolError` when ``params["_meta"]`` exists but is not an object.
    """
    out: dict[str, Any] = dict(params) if params is not None else {}
    existing = out.get("_meta")
    if existing is None:
        out["_meta"] = dict(meta)
    elif isinstance(existing, Mapping):
        out["_meta"] = {**existing, **meta}
    else:
        raise LocalProtocolError(
            f"params._meta must be an object to carry the request envelope, not {existing!r}"
        )
    return out
