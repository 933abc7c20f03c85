"""The one error tree of trio-mcp.

Every error that trio-mcp raises on purpose is an :class:`McpError`. The tree::

    McpError
    ├── ConfigError                      the configuration is wrong (names the file and key path)
    │   └── McpTransportConfigError      a server's transport settings are wrong or unknown
    ├── TransportError                   bytes could not be moved
    │   ├── ConnectError                 spawn or connect failed
    │   │   └── ConnectTimeout           ... within connect_timeout (also a TimeoutError)
    │   ├── HttpStatusError              an HTTP server answered 3xx/4xx/5xx (status, body excerpt)
    │   └── TransportClosed              the peer went away
    │       ├── ServerDisconnected       what a waiting call sees when its connection ends
    │       │                            (also a CallError: it says whether it was ``sent``)
    │       └── SessionExpired           the HTTP server ended our session (404, or 400 "no valid
    │                                    session"); the session re-initializes
    ├── ProtocolError                    abstract: never raised as such
    │   ├── LocalProtocolError           we tried something illegal in this state
    │   └── RemoteProtocolError          the peer sent something invalid
    │       ├── InvalidMessage           a message did not decode; names the JSON path at fault
    │       ├── FrameTooLarge            a frame exceeded the configured maximum
    │       ├── ListingTooLarge          a paginated listing passed its caps, or its cursors loop
    │       ├── SchemaTooLarge           a tool's JSON Schema is too big or deep to check safely
    │       └── UnsupportedVersion       the server answered a protocol revision we refuse
    ├── CallError                        one call failed; carries server, method, request_id
    │   ├── ServerDisconnected           (see above) its connection ended before its answer
    │   ├── RpcError                     the server answered with a JSON-RPC error
    │   │   ├── ParseError               -32700
    │   │   ├── InvalidRequest           -32600
    │   │   ├── MethodNotFound           -32601
    │   │   ├── InvalidParams            -32602
    │   │   ├── InternalError            -32603
    │   │   ├── ResourceNotFound         -32002 (and -32602 for resources/read from 2026-07-28)
    │   │   ├── HeaderMismatch           -32020
    │   │   ├── MissingClientCapability  -32021
    │   │   ├── UnsupportedProtocolVersion  -32022
    │   │   └── UrlElicitationRequired   -32042
    │   ├── CallTimeout                  no answer within the call's timeout (also a TimeoutError)
    │   ├── InputRequestFailed           a server's input request (2026-07-28 MRTR) could not be
    │   │                                answered (capability not declared, host refused or failed)
    │   ├── InputRoundsExceeded          the server still asked for input after max_input_rounds
    │   ├── ToolNotFound                 no registered tool has that name
    │   ├── ToolExecutionError           the tool ran and reported isError (raise_for_error())
    │   ├── InvalidToolOutput            its structuredContent breaks its outputSchema (.result)
    │   ├── CallHookFailed               a host's call hook raised or answered wrongly (.hook)
    │   ├── CredentialsNotCarried        a tenant's call cannot go as that tenant (stdio, ...)
    │   └── McpCatalogError              a resource or prompt operation failed; ``kind`` says how
    ├── AuthorizationError               OAuth 2.1 sign-in to an HTTP server failed; ``server``
    │   ├── AuthorizationRequired        nobody is signed in, or the sign-in ran out: the server is
    │   │   │                            NEEDS_AUTH; ``hint`` is the exact command that fixes it
    │   │   ├── CredentialsRefused       a 401 without a Bearer challenge: the configured
    │   │   │                            credentials (``headers``) were refused
    │   │   └── InsufficientScope        a 403 insufficient_scope that step-up could not satisfy
    │   ├── OAuthMetadataError           a metadata document (PRM, AS, registration) is unusable or
    │   │                                hostile; names the URL and the field
    │   └── OAuthFlowError               the authorization server refused or broke a step (state,
    │                                    iss, token or registration errors); ``error`` is its code
    ├── ServerUnavailable                the server is not READY (says its state and next attempt)
    └── RuntimeClosed                    the runtime handle was used after it closed

Rules: errors are raised with a message that says what to do; foreign exceptions (OSError,
httpx, cattrs) are mapped at one place per boundary with ``raise ... from exc``; a tool error
reported by the server in its result (``isError: true``) is data, not an exception.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

__all__ = [
    "AuthorizationError",
    "AuthorizationRequired",
    "CallError",
    "CallHookFailed",
    "CallTimeout",
    "ConfigError",
    "ConnectError",
    "ConnectTimeout",
    "CredentialsNotCarried",
    "CredentialsRefused",
    "FrameTooLarge",
    "HeaderMismatch",
    "HttpStatusError",
    "InputRequestFailed",
    "InputRoundsExceeded",
    "InsufficientScope",
    "InternalError",
    "InvalidMessage",
    "InvalidParams",
    "InvalidRequest",
    "InvalidToolOutput",
    "ListingTooLarge",
    "LocalProtocolError",
    "McpCatalogError",
    "McpError",
    "McpTransportConfigError",
    "MethodNotFound",
    "MissingClientCapability",
    "OAuthFlowError",
    "OAuthMetadataError",
    "ParseError",
    "ProtocolError",
    "RemoteProtocolError",
    "ResourceNotFound",
    "RpcError",
    "RuntimeClosed",
    "SchemaTooLarge",
    "ServerDisconnected",
    "ServerUnavailable",
    "SessionExpired",
    "TaskFailed",
    "ToolExecutionError",
    "ToolNotFound",
    "TransportClosed",
    "TransportError",
    "UnsupportedProtocolVersion",
    "UnsupportedVersion",
    "UrlElicitationRequired",
]


class McpError(Exception):
    """Base class of every error trio-mcp raises on purpose."""


# --------------------------------------------------------------------------- configuration


class ConfigError(McpError):
    """The configuration is invalid.

    ``problems`` lists every problem found (a file with several problems reports all of them at
    once); each is a ``(location, message)`` pair where the location names the file and key path.
    """

    def __init__(self, message: str, *, problems: tuple[tuple[str, str], ...] = ()) -> None:
        super().__init__(message)
        self.problems = problems


class McpTransportConfigError(ConfigError):
    """A server's transport settings are wrong: both or neither of url and command, or an unknown
    transport type."""


# --------------------------------------------------------------------------- calls (the base)


class CallError(McpError):
    """One call failed. ``server``, ``method`` and ``request_id`` say which, when known."""

    def __init__(
        self,
        message: str,
        *,
        server: str | None = None,
        method: str | None = None,
        request_id: int | str | None = None,
    ) -> None:
        super().__init__(message)
        self.server = server
        self.method = method
        self.request_id = request_id


# --------------------------------------------------------------------------- transport


class TransportError(McpError):
    """Bytes or messages could not be moved to or from the server."""


class ConnectError(TransportError):
    """The server could not be started or connected to."""


class ConnectTimeout(ConnectError, TimeoutError):
    """Starting or connecting to the server (spawn or TCP, plus the handshake) took too long."""


class HttpStatusError(TransportError):
    """An HTTP server answered one of our requests with a status that is not a success (a 4xx or
    5xx, or a redirect, which trio-mcp does not follow).

    ``status`` is the HTTP status code and ``body`` an excerpt of the answer's body (at most a few
    hundred characters, ``""`` when there was none). The request was received by the server, so a
    call failed this way was sent; whether its effect happened depends on the server.
    """

    def __init__(self, message: str, *, status: int, body: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.body = body


class TransportClosed(TransportError):
    """The connection ended: the peer closed it, crashed, or we closed it."""


class ServerDisconnected(CallError, TransportClosed):
    """The connection of a call ended before its answer arrived.

    ``sent`` says whether the request had been written before the connection ended. A call that
    was never sent is safe to retry; one that was sent has an unknown outcome and trio-mcp never
    re-sends it on its own. It is a :class:`CallError` too, with ``server``, ``method`` and
    ``request_id``.
    """

    def __init__(
        self,
        message: str,
        *,
        server: str | None = None,
        sent: bool = False,
        method: str | None = None,
        request_id: int | str | None = None,
    ) -> None:
        super().__init__(message, server=server, method=method, request_id=request_id)
        self.sent = sent


class SessionExpired(TransportClosed):
    """The HTTP server ended our session: it answered 404 to a request carrying our session id
    (or 400 saying the session is not valid, as some servers do).

    A Streamable HTTP transport raises it once per expired session from ``receive()``; the
    session then initializes a new one and asks the transport to re-send the requests the server
    refused (they were never processed). ``lost`` holds the ids of requests whose response streams
    were lost with the old session: their outcome is unknown. A user of the transport that does not
    re-initialize sees an ordinary :class:`TransportClosed`.
    """

    def __init__(self, message: str, *, lost: tuple[int | str, ...] = ()) -> None:
        super().__init__(message)
        self.lost = lost


# --------------------------------------------------------------------------- protocol


class ProtocolError(McpError):
    """A protocol rule was broken. Abstract: raise one of its two subclasses."""

    def __new__(cls, *args: Any, **kwargs: Any) -> ProtocolError:
        if cls is ProtocolError:
            raise TypeError(
                "ProtocolError is abstract: raise LocalProtocolError or RemoteProtocolError"
            )
        return super().__new__(cls, *args, **kwargs)


class LocalProtocolError(ProtocolError):
    """We tried to do something the protocol does not allow in the current state (a bug on our side
    or in the host's use of the API)."""


class RemoteProtocolError(ProtocolError):
    """The peer sent something the protocol does not allow.

    ``path`` names the JSON path at fault when it is known, such as
    ``$.result.tools[3].inputSchema``.
    """

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class InvalidMessage(RemoteProtocolError):
    """A message did not decode into the shape the protocol requires.

    ``errors`` holds one line per problem, each ending in ``@ <json path>``.
    """

    def __init__(
        self, message: str, *, path: str | None = None, errors: tuple[str, ...] = ()
    ) -> None:
        super().__init__(message, path=path)
        self.errors = errors


class FrameTooLarge(RemoteProtocolError):
    """A frame (a stdio line, an SSE event) grew past the configured maximum.

    The reader stops buffering at the limit, so memory stays bounded. Raise the limit in the
    server's configuration (``max_frame_bytes``) if the server legitimately sends bigger messages.
    """

    def __init__(self, message: str, *, limit: int) -> None:
        super().__init__(message)
        self.limit = limit
        #: Frames that were complete before the oversized one in the same chunk (NDJSON).
        self.frames_before: list[bytes] = []
        #: Events that were complete before the oversized one in the same chunk (SSE).
        self.events_before: list[Any] = []


class ListingTooLarge(RemoteProtocolError):
    """A paginated listing went past the configured caps (pages or entries), sent a cursor over
    64 KiB, or its cursors went round in a circle. The server is failed alone; raise the caps in
    the runtime config (``max_list_pages``, ``max_list_entries``) if the server is legitimately
    that large."""


class SchemaTooLarge(RemoteProtocolError):
    """A tool's JSON Schema went past the work budget of the checks (nesting depth, number of
    properties, number of nodes, total text), so it could not be checked in bounded time.

    ``limit`` names the budget that was exceeded (``"max_depth"``, ``"max_properties"``,
    ``"max_nodes"``, ``"max_string_chars"``); ``path`` is where in the schema it happened. The
    tool is refused, never its server; raise the budget only for servers you control.
    """

    def __init__(self, message: str, *, limit: str, path: str | None = None) -> None:
        super().__init__(message, path=path)
        self.limit = limit


class UnsupportedVersion(RemoteProtocolError):
    """The server answered with a protocol revision this client does not speak."""

    def __init__(self, message: str, *, requested: str, answered: str) -> None:
        super().__init__(message)
        self.requested = requested
        self.answered = answered


# --------------------------------------------------------------------------- calls


class RpcError(CallError):
    """The server answered a request with a JSON-RPC error object.

    :meth:`from_error` picks the most specific subclass for the code.
    """

    #: The JSON-RPC code this subclass stands for (``None`` on the generic class).
    code_value: ClassVar[int | None] = None

    def __init__(
        self,
        message: str,
        *,
        code: int,
        data: Any = None,
        server: str | None = None,
        method: str | None = None,
        request_id: int | str | None = None,
    ) -> None:
        super().__init__(message, server=server, method=method, request_id=request_id)
        self.code = code
        self.data = data

    def __str__(self) -> str:
        where = f" from {self.server!r}" if self.server else ""
        what = f" to {self.method}" if self.method else ""
        return f"JSON-RPC error {self.code}{where}{what}: {self.args[0] if self.args else ''}"

    @classmethod
    def from_error(
        cls,
        code: int,
        message: str,
        data: Any = None,
        *,
        server: str | None = None,
        method: str | None = None,
        request_id: int | str | None = None,
    ) -> RpcError:
        """Build the most specific :class:`RpcError` for a JSON-RPC error object."""
        klass: type[RpcError] = _BY_CODE.get(code, RpcError)
        if (
            code == -32602
            and method == "resources/read"
            and klass is InvalidParams
            and isinstance(data, Mapping)
            and "uri" in data
        ):
            # From 2026-07-28 a missing resource is -32602 with data.uri.
            klass = ResourceNotFound
        if klass is MissingClientCapability:
            message = _missing_capability_message(message, data)
        return klass(
            message, code=code, data=data, server=server, method=method, request_id=request_id
        )


class ParseError(RpcError):
    """-32700: the server could not parse what we sent."""

    code_value = -32700


class InvalidRequest(RpcError):
    """-32600: the server says our message was not a valid request."""

    code_value = -32600


class MethodNotFound(RpcError):
    """-32601: the server does not implement the method (or did not declare the capability)."""

    code_value = -32601


class InvalidParams(RpcError):
    """-32602: the server rejected the parameters (unknown tool, bad arguments, bad cursor...)."""

    code_value = -32602


class InternalError(RpcError):
    """-32603: the server failed internally."""

    code_value = -32603


class ResourceNotFound(RpcError):
    """The resource does not exist (-32002 before 2026-07-28; -32602 with ``data.uri`` after)."""

    code_value = -32002


class HeaderMismatch(RpcError):
    """-32020: an HTTP header did not match the request body (2026-07-28)."""

    code_value = -32020


class MissingClientCapability(RpcError):
    """-32021: the server needs a client capability the request did not declare (2026-07-28).

    ``data["requiredCapabilities"]`` says which; :attr:`required_capabilities` lists their
    names, and the message names them with what the host can do about it.
    """

    code_value = -32021

    @property
    def required_capabilities(self) -> tuple[str, ...]:
        """The names of the capabilities the server needs (``"sampling"``,
        ``"elicitation"``...), from ``data.requiredCapabilities``; empty when the server did
        not say (or said it in another shape)."""
        return _required_capabilities(self.data)


#: What a host gives the runtime for each client capability a server may require.
_CAPABILITY_HINTS: Mapping[str, str] = {
    "roots": "a list_roots callback",
    "sampling": "a sampling callback",
    "elicitation": "an elicitation callback",
}


def _required_capabilities(data: Any) -> tuple[str, ...]:
    required = data.get("requiredCapabilities") if isinstance(data, Mapping) else None
    if isinstance(required, Mapping):
        return tuple(str(name) for name in required)
    return ()


def _missing_capability_message(message: str, data: Any) -> str:
    names = _required_capabilities(data)
    if not names:
        return (
            f"{message} (the server needs a client capability the request did not declare, "
            "and did not say which in data.requiredCapabilities)"
        )
    hints = [_CAPABILITY_HINTS[name] for name in names if name in _CAPABILITY_HINTS]
    advice = (
        f": give the runtime {' and '.join(hints)} (HostCallbacks) to declare it" if hints else ""
    )
    return (
        f"{message} (the server needs the client capabilities {', '.join(names)}, which this "
        f"client did not declare{advice})"
    )


class UnsupportedProtocolVersion(RpcError):
    """-32022: the server does not support the protocol revision of the request.

    ``data["supported"]`` lists the revisions it does support.
    """

    code_value = -32022


class UrlElicitationRequired(RpcError):
    """-32042: the server needs the user to complete URL elicitations first (2025-11-25 only).

    ``data["elicitations"]`` lists them.
    """

    code_value = -32042


_BY_CODE: dict[int, type[RpcError]] = {
    klass.code_value: klass
    for klass in (
        ParseError,
        InvalidRequest,
        MethodNotFound,
        InvalidParams,
        InternalError,
        ResourceNotFound,
        HeaderMismatch,
        MissingClientCapability,
        UnsupportedProtocolVersion,
        UrlElicitationRequired,
    )
    if klass.code_value is not None
}


class CallTimeout(CallError, TimeoutError):
    """No answer arrived within the call's timeout. The server was told to cancel the request."""

    def __init__(
        self,
        message: str,
        *,
        timeout: float,
        server: str | None = None,
        method: str | None = None,
        request_id: int | str | None = None,
    ) -> None:
        super().__init__(message, server=server, method=method, request_id=request_id)
        self.timeout = timeout


class InputRequestFailed(CallError):
    """A 2026-07-28 server asked for input during a call (an ``input_required`` result: an
    elicitation, a sampling request or the roots) that this client could not give, so the call
    was abandoned: the server is not asked again.

    ``input_method`` is the input request's method (``"sampling/createMessage"``...) and
    ``key`` the server's key for it. ``capability`` names the client capability the host did
    not declare (``"sampling"``, ``"roots"``, ``"elicitation"``, ``"elicitation.url"``...) when
    that is why: give the callback in ``HostCallbacks`` (or the elicitation mode) to answer it.
    Otherwise the host's callback refused (raised :class:`RpcError`) or failed, and that
    exception is the ``__cause__``. An elicitation the user declines or cancels is not this
    error: the answer is sent to the server, which decides.
    """

    def __init__(
        self,
        message: str,
        *,
        input_method: str,
        key: str,
        capability: str | None = None,
        server: str | None = None,
        method: str | None = None,
        request_id: int | str | None = None,
    ) -> None:
        super().__init__(message, server=server, method=method, request_id=request_id)
        self.input_method = input_method
        self.key = key
        self.capability = capability


class InputRoundsExceeded(CallError):
    """A 2026-07-28 server answered a call with ``input_required`` again and again: after
    ``rounds`` rounds of input (the limit, ``RuntimeConfig.max_input_rounds``) it still had not
    finished, so the call was abandoned. Raise the limit if the server legitimately asks for
    more rounds."""

    def __init__(
        self,
        message: str,
        *,
        rounds: int,
        server: str | None = None,
        method: str | None = None,
        request_id: int | str | None = None,
    ) -> None:
        super().__init__(message, server=server, method=method, request_id=request_id)
        self.rounds = rounds


class TaskFailed(CallError):
    """A tool call that ran as a task (2025-11-25 tasks, or the 2026-07-28 tasks extension)
    ended without a result: ``status`` is ``"failed"`` (the server's JSON-RPC error is the
    ``__cause__``, an :class:`RpcError`, when it gave one) or ``"cancelled"`` (by the server,
    or by ``tasks/cancel`` from elsewhere). ``task_id`` names the task on its server."""

    def __init__(
        self,
        message: str,
        *,
        task_id: str,
        status: str,
        server: str | None = None,
        method: str | None = None,
        request_id: int | str | None = None,
    ) -> None:
        super().__init__(message, server=server, method=method, request_id=request_id)
        self.task_id = task_id
        self.status = status


class ToolNotFound(CallError):
    """No registered tool has that name (it may have been withdrawn, or never registered)."""


class ToolExecutionError(CallError):
    """The tool ran and reported a failure in its result (``isError: true``).

    Raised only by ``result.raise_for_error()``; a call returns such results as data.
    """


class CallHookFailed(CallError):
    """A call hook the host gave (``open_runtime(hooks=...)``, ``AgentSurface(hooks=...)``)
    raised an exception that is not an :class:`McpError`, or returned something other than a
    ``CallToolResult``, so the call failed. ``hook`` names the hook; the hook's own exception is
    the ``__cause__``. The runtime and the other calls go on."""

    def __init__(
        self,
        message: str,
        *,
        hook: str,
        server: str | None = None,
        method: str | None = None,
        request_id: int | str | None = None,
    ) -> None:
        super().__init__(message, server=server, method=method, request_id=request_id)
        self.hook = hook


class CredentialsNotCarried(CallError):
    """A call (or a read) made for a tenant cannot be sent as that tenant: its server's
    transport has no headers per request (stdio, WebSocket, the legacy HTTP+SSE transport), or
    the call would go on as a task, whose later requests cannot carry them. Nothing was sent;
    the call fails alone. ``tenant`` is the tenant's id."""

    def __init__(
        self,
        message: str,
        *,
        tenant: str,
        server: str | None = None,
        method: str | None = None,
        request_id: int | str | None = None,
    ) -> None:
        super().__init__(message, server=server, method=method, request_id=request_id)
        self.tenant = tenant


class InvalidToolOutput(CallError):
    """The tool declares an ``outputSchema`` and its result breaks it: ``structuredContent`` is
    missing or does not match, or the schema itself cannot be used (too large to check, not a
    valid JSON Schema). ``result`` is the result as the server sent it and ``problems`` the
    reasons (each a JSON path and a message, cut short). The tool ran: do not call it again
    blindly."""

    def __init__(
        self,
        message: str,
        *,
        result: Any,
        problems: tuple[str, ...],
        server: str | None = None,
        method: str | None = None,
        request_id: int | str | None = None,
    ) -> None:
        super().__init__(message, server=server, method=method, request_id=request_id)
        #: The ``CallToolResult`` as received.
        self.result = result
        self.problems = problems


class McpCatalogError(CallError):
    """A resource or prompt operation (``rt.list_resources``, ``rt.read_resource``,
    ``rt.get_prompt``...) failed, and no partial data was returned.

    ``kind`` says what kind of failure it was, one of :attr:`KINDS`:

    - ``"unknown_server"``: no configured server has that name;
    - ``"hidden"``: the server is configured with ``resources: false``;
    - ``"not_found"``: the server has no such resource;
    - ``"too_large"``: the answer is bigger than the runtime takes (a blob over the limit);
    - ``"server_error"``: the server answered with an error, an invalid answer, or none in time;
    - ``"unavailable"``: the server is not connected now, or the connection dropped;
    - ``"invalid"``: the request cannot be made as asked (no server named while several
      could answer, a cursor without a server, a server that does not offer the capability,
      arguments the server refused).
    """

    KINDS: ClassVar[tuple[str, ...]] = (
        "unknown_server",
        "hidden",
        "not_found",
        "too_large",
        "server_error",
        "unavailable",
        "invalid",
    )

    def __init__(
        self,
        message: str,
        *,
        kind: str,
        server: str | None = None,
        method: str | None = None,
        request_id: int | str | None = None,
    ) -> None:
        if kind not in self.KINDS:
            raise ValueError(
                f"unknown McpCatalogError kind {kind!r} (expected one of: {', '.join(self.KINDS)})"
            )
        super().__init__(message, server=server, method=method, request_id=request_id)
        self.kind = kind


# --------------------------------------------------------------------------- authorization


class AuthorizationError(McpError):
    """Signing in to an HTTP server with OAuth 2.1 failed. ``server`` names it when known.

    Messages never hold a secret (token, client secret, authorization code, PKCE verifier)."""

    def __init__(self, message: str, *, server: str | None = None) -> None:
        super().__init__(message)
        self.server = server


class AuthorizationRequired(AuthorizationError):
    """The server needs a sign-in that cannot happen without the user: no credential is stored,
    the refresh token was refused (``invalid_grant``; the record is kept), or the sign-in needs
    a browser and the host gave no way to show one. The supervisor puts the server in
    ``NEEDS_AUTH`` and calls fail at once with this. ``hint`` is the exact command that fixes it
    (``trio-mcp login NAME``); the message ends with it."""

    def __init__(self, message: str, *, server: str | None = None, hint: str = "") -> None:
        super().__init__(message, server=server)
        self.hint = hint


class CredentialsRefused(AuthorizationRequired):
    """The server answered 401 without a ``Bearer`` challenge: it refused the credentials it was
    given (the ``headers`` of the server's configuration, or user information in its URL), and
    OAuth cannot help. Fix the credentials; retrying does not."""


class InsufficientScope(AuthorizationRequired):
    """The server answered ``403 insufficient_scope`` and asking for the wider ``scopes`` did not
    satisfy it (the step-up limit was reached, or no interactive sign-in was possible)."""

    def __init__(
        self,
        message: str,
        *,
        server: str | None = None,
        hint: str = "",
        scopes: tuple[str, ...] = (),
    ) -> None:
        super().__init__(message, server=server, hint=hint)
        self.scopes = scopes


class OAuthMetadataError(AuthorizationError):
    """A document of the discovery or registration steps could not be used: unreachable, not
    JSON, a field missing or of the wrong type, an ``issuer`` that is not the one asked for, an
    endpoint on another origin than its issuer, a plain ``http://`` URL off loopback, no PKCE
    ``S256``. ``url`` is the document's address."""

    def __init__(self, message: str, *, server: str | None = None, url: str | None = None) -> None:
        super().__init__(message, server=server)
        self.url = url


class OAuthFlowError(AuthorizationError):
    """The authorization server refused a step, or its answer broke the rules: an error
    redirect, a ``state`` or ``iss`` that does not match, a token or registration endpoint
    answering with an error. ``error`` is the OAuth error code when there was one (it is the
    server's word, shown as data)."""

    def __init__(
        self, message: str, *, server: str | None = None, error: str | None = None
    ) -> None:
        super().__init__(message, server=server)
        self.error = error


# --------------------------------------------------------------------------- runtime


class ServerUnavailable(McpError):
    """The server cannot take calls now. ``state`` names its state; ``next_attempt_at`` (trio
    clock) says when the next connection attempt is due, if one is scheduled; ``hint`` is the
    exact command that fixes it when there is one (``trio-mcp login NAME`` for a server that
    needs a sign-in: the message then ends with it)."""

    def __init__(
        self,
        message: str,
        *,
        server: str | None = None,
        state: str | None = None,
        next_attempt_at: float | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message)
        self.server = server
        self.state = state
        self.next_attempt_at = next_attempt_at
        self.hint = hint


class RuntimeClosed(McpError):
    """The runtime was closed; open a new one to make calls."""
