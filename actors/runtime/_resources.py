"""Resources and prompts for the host: typed pages, reads and prompts, one server at a time.

``rt.list_resources``, ``rt.list_resource_templates``, ``rt.read_resource``, ``rt.list_prompts``
and ``rt.get_prompt`` return typed results and raise :class:`McpCatalogError` with a ``kind``
instead of partial data. Which server answers: the one named, or, when none is named, the one
connected server that offers the capability (with several, the call fails and lists them: an
implicit pick would make one call mean different things at different times). A cursor always
needs its server. The model-facing resource and prompt tools of :mod:`trio_mcp.actors.agent` are
built on these operations.

A 2026-07-28 server's listings and reads come from its result cache while they are fresh
(``ttlMs``; see :mod:`~trio_mcp.actors.runtime._cache`), through the session
(:meth:`~trio_mcp.actors.runtime._session.Session.through_cache`): what the server says stays
fresh is not asked for again, and a change notification makes it stale. A cursor the server
refuses (-32602) drops every cached page of that listing; the error says to list again from
the start.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from operator import attrgetter
from typing import Any, Final, Literal, TypeAlias, TypeVar

import attrs

from ...protocol._errors import (
    AuthorizationError,
    CallTimeout,
    CredentialsNotCarried,
    InputRequestFailed,
    InputRoundsExceeded,
    InvalidParams,
    McpCatalogError,
    McpError,
    RemoteProtocolError,
    ResourceNotFound,
    RpcError,
    ServerUnavailable,
    TransportError,
)
from ...protocol._methods import decode_result
from ...protocol._types import (
    BlobResourceContents,
    GetPromptResult,
    ListPromptsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    Prompt,
    PromptMessage,
    ReadResourceResult,
    Resource,
    ResourceContents,
    ResourceTemplate,
    TextResourceContents,
)
from ...transports._base import RequestCredentials
from ..config._config import RuntimeConfig
from ._cache import authorization_context
from ._session import MAX_CURSOR_BYTES, Session, cursor_too_long
from ._supervisor import ServerSupervisor
from ._tenants import Tenant, TenantSignIns, credentials_for, tenant_context

__all__ = [
    "PROMPTS",
    "RESOURCES",
    "TEMPLATES",
    "Capability",
    "Listing",
    "Page",
    "PromptPage",
    "PromptRead",
    "ResourcePage",
    "ResourceRead",
    "ResourceTemplatePage",
    "Resources",
]

Capability: TypeAlias = Literal["resources", "prompts"]
_R = TypeVar("_R")


@attrs.frozen(kw_only=True)
class ResourcePage:
    """One page of a server's resources; ``next_cursor`` asks for the next page."""

    server: str
    resources: tuple[Resource, ...]
    next_cursor: str | None = None


@attrs.frozen(kw_only=True)
class ResourceTemplatePage:
    """One page of a server's resource templates."""

    server: str
    resource_templates: tuple[ResourceTemplate, ...]
    next_cursor: str | None = None


@attrs.frozen(kw_only=True)
class PromptPage:
    """One page of a server's prompts."""

    server: str
    prompts: tuple[Prompt, ...]
    next_cursor: str | None = None


@attrs.frozen(kw_only=True)
class ResourceRead:
    """A resource's contents: text parts (``TextResourceContents``) and blob parts (base64
    ``BlobResourceContents``), as the server sent them."""

    server: str
    uri: str
    contents: tuple[ResourceContents, ...]

    @property
    def text(self) -> str:
        """The text of all text parts, joined by newlines."""
        return "\n".join(
            part.text for part in self.contents if isinstance(part, TextResourceContents)
        )


@attrs.frozen(kw_only=True)
class PromptRead:
    """A prompt filled in: its messages, each with its role."""

    server: str
    name: str
    messages: tuple[PromptMessage, ...]
    description: str | None = None


# --------------------------------------------------------------------------- listings


@attrs.frozen(kw_only=True)
class Listing:
    """One kind of listing: its method, its result key, what it lists (for messages), its
    capability, the type of its decoded result, and how to take the entries out of that."""

    method: str
    key: str
    what: str
    capability: Capability
    result_type: type[Any]
    entries: Callable[[Any], tuple[Any, ...]]


RESOURCES: Final = Listing(
    method="resources/list",
    key="resources",
    what="resources",
    capability="resources",
    result_type=ListResourcesResult,
    entries=attrgetter("resources"),
)
TEMPLATES: Final = Listing(
    method="resources/templates/list",
    key="resourceTemplates",
    what="resource templates",
    capability="resources",
    result_type=ListResourceTemplatesResult,
    entries=attrgetter("resource_templates"),
)
PROMPTS: Final = Listing(
    method="prompts/list",
    key="prompts",
    what="prompts",
    capability="prompts",
    result_type=ListPromptsResult,
    entries=attrgetter("prompts"),
)

#: How a failed request is reported, the first class that matches deciding: its kind, and its
#: message (``{server}``, ``{method}``, ``{error}``; ``{detail}`` is the error's first argument).
_FAILURES: Final[tuple[tuple[type[McpError], str, str], ...]] = (
    (ResourceNotFound, "not_found", "the MCP server {server!r} has no such resource: {detail}"),
    (CredentialsNotCarried, "invalid", "{error}"),
    (
        AuthorizationError,
        "unavailable",
        "the MCP server {server!r} needs a sign-in for this request: {error}",
    ),
    (InputRequestFailed, "invalid", "{error}"),
    (InputRoundsExceeded, "server_error", "{error}"),
    (InvalidParams, "invalid", "the MCP server {server!r} refused the request: {error}"),
    (RpcError, "server_error", "the MCP server {server!r} answered with an error: {error}"),
    (CallTimeout, "server_error", "{error}"),
    (TransportError, "unavailable", "the MCP server {server!r} is not reachable: {error}"),
    (
        RemoteProtocolError,
        "server_error",
        "the MCP server {server!r} sent an invalid answer to {method}: {error}",
    ),
)
_FAILING: Final = tuple(cls for cls, _, _ in _FAILURES)


def _failure(server: str, method: str, error: McpError) -> McpCatalogError:
    """The :class:`McpCatalogError` that says how ``method`` failed (one of :data:`_FAILING`)."""
    kind, template = next((k, t) for cls, k, t in _FAILURES if isinstance(error, cls))
    detail = str(error.args[0]) if error.args else str(error)
    message = template.format(server=server, method=method, error=error, detail=detail)
    return McpCatalogError(message, kind=kind, server=server, method=method)


@attrs.frozen(kw_only=True)
class Page:
    """One page of a :class:`Listing`, whatever it lists (``entries``)."""

    server: str
    entries: tuple[Any, ...]
    next_cursor: str | None


@attrs.define(eq=False)
class Resources:
    """The resource and prompt operations over a runtime's servers, for the host. Built by the
    runtime; the host uses it through ``rt``."""

    config: RuntimeConfig
    supervisors: Mapping[str, ServerSupervisor]
    #: The tenants' sign-ins, for a request made for a tenant (``tenant=``; None: none).
    tenant_sign_ins: TenantSignIns | None = None

    # ------------------------------------------------------------------ servers

    def offering(self, capability: Capability) -> tuple[str, ...]:
        """The servers that are connected now, declare ``capability`` and (for resources) are
        not hidden, in name order."""
        return tuple(
            name
            for name in sorted(self.supervisors)
            if self._offers(self.supervisors[name], capability)
        )

    @staticmethod
    def _declares(session: Session | None, capability: Capability) -> bool:
        info = session.info if session is not None else None
        if info is None:
            return False
        return getattr(info.capabilities, capability) is not None

    def _offers(self, supervisor: ServerSupervisor, capability: Capability) -> bool:
        if capability == "resources" and not supervisor.config.resources:
            return False
        if not supervisor.accepts_calls:
            return False
        return supervisor.status().declares(capability)

    def _resolve(
        self, server: str | None, capability: Capability, method: str
    ) -> tuple[ServerSupervisor, Session]:
        """The server that answers ``method`` and its live session. Raises
        :class:`McpCatalogError` saying why there is none."""
        if server is None:
            offering = self.offering(capability)
            if len(offering) == 1:
                server = offering[0]
            elif not offering:
                raise McpCatalogError(
                    f"no connected MCP server offers {capability} now", kind="unavailable"
                )
            else:
                raise McpCatalogError(
                    f"several connected MCP servers offer {capability} "
                    f"({', '.join(map(repr, offering))}): say which one with 'server'",
                    kind="invalid",
                )
        supervisor = self.supervisors.get(server)
        if supervisor is None:
            offering = self.offering(capability)
            known = ", ".join(map(repr, offering)) if offering else "none"
            raise McpCatalogError(
                f"there is no MCP server named {server!r} (servers that offer {capability}: "
                f"{known})",
                kind="unknown_server",
                server=server,
                method=method,
            )
        if capability == "resources" and not supervisor.config.resources:
            raise McpCatalogError(
                f"the MCP server {server!r} is hidden from the resource tools (its "
                "configuration says resources: false)",
                kind="hidden",
                server=server,
                method=method,
            )
        try:
            session = supervisor.ready_session()
        except ServerUnavailable as exc:
            raise McpCatalogError(
                str(exc), kind="unavailable", server=server, method=method
            ) from exc
        if not self._declares(session, capability):
            raise McpCatalogError(
                f"the MCP server {server!r} does not offer {capability} (it did not declare "
                "the capability)",
                kind="invalid",
                server=server,
                method=method,
            )
        return supervisor, session

    async def _ask(
        self,
        server: str | None,
        capability: Capability,
        method: str,
        params: Mapping[str, Any] | None,
        result_type: type[_R],
        tenant: Tenant | None = None,
    ) -> tuple[str, _R]:
        """Send ``method`` to the server that answers it (see :meth:`_resolve`) and decode its
        answer, a ``result_type``; returns the server's name with it. A result the server's
        cache holds fresh answers without a request (2026-07-28). Raises
        :class:`McpCatalogError` for every failure. ``tenant``: made for that tenant (its
        credentials, and its private results cached apart: :mod:`._tenants`)."""
        supervisor, session = self._resolve(server, capability, method)
        name = supervisor.name
        credentials: RequestCredentials | None = None
        context: str | None = None
        if tenant is not None:
            assert self.tenant_sign_ins is not None
            context = tenant_context(authorization_context(supervisor.config), tenant)
            try:
                credentials = await credentials_for(self.tenant_sign_ins, supervisor.config, tenant)
            except AuthorizationError as exc:
                raise _failure(name, method, exc) from exc

        def check(raw: Mapping[str, Any]) -> _R:
            result = decode_result(method, raw)
            if not isinstance(result, result_type):
                raise McpCatalogError(
                    f"the MCP server {name!r} answered {method} with a "
                    f"{type(result).__name__}, which this client cannot use here",
                    kind="server_error",
                    server=name,
                    method=method,
                )
            return result

        try:
            result, _ = await session.through_cache(
                method,
                params,
                timeout=supervisor.config.timeout,
                check=check,
                credentials=credentials,
                context=context,
            )
        except _FAILING as exc:
            if isinstance(exc, InvalidParams) and params is not None and "cursor" in params:
                session.forget_listing(method)
                raise McpCatalogError(
                    f"the MCP server {name!r} refused the cursor of {method} ({exc}): list "
                    "again from the first page, without a cursor",
                    kind="invalid",
                    server=name,
                    method=method,
                ) from exc
            raise _failure(name, method, exc) from exc
        return name, result

    # ------------------------------------------------------------------ for the host

    @staticmethod
    def _cursor_needs_server(server: str | None, cursor: str | None) -> None:
        if cursor is not None and server is None:
            raise McpCatalogError(
                "a cursor belongs to one server's listing: give 'server' with it",
                kind="invalid",
            )

    async def list_resources(
        self,
        server: str | None = None,
        cursor: str | None = None,
        *,
        tenant: Tenant | None = None,
    ) -> ResourcePage:
        """One page of ``server``'s resources (``cursor``: the ``next_cursor`` of the page
        before). ``server`` may be None when exactly one connected server offers resources.
        Raises :class:`McpCatalogError`."""
        page = await self.list_page(RESOURCES, server, cursor, tenant=tenant)
        return ResourcePage(
            server=page.server, resources=page.entries, next_cursor=page.next_cursor
        )

    async def list_resource_templates(
        self,
        server: str | None = None,
        cursor: str | None = None,
        *,
        tenant: Tenant | None = None,
    ) -> ResourceTemplatePage:
        """One page of ``server``'s resource templates; like :meth:`list_resources`."""
        page = await self.list_page(TEMPLATES, server, cursor, tenant=tenant)
        return ResourceTemplatePage(
            server=page.server, resource_templates=page.entries, next_cursor=page.next_cursor
        )

    async def list_prompts(
        self,
        server: str | None = None,
        cursor: str | None = None,
        *,
        tenant: Tenant | None = None,
    ) -> PromptPage:
        """One page of ``server``'s prompts; like :meth:`list_resources` (``resources: false``
        does not hide prompts)."""
        page = await self.list_page(PROMPTS, server, cursor, tenant=tenant)
        return PromptPage(server=page.server, prompts=page.entries, next_cursor=page.next_cursor)

    async def list_page(
        self,
        listing: Listing,
        server: str | None,
        cursor: str | None,
        *,
        tenant: Tenant | None = None,
    ) -> Page:
        """One page of ``listing`` (resources, templates or prompts) of ``server``."""
        self._cursor_needs_server(server, cursor)
        params = None if cursor is None else {"cursor": cursor}
        name, result = await self._ask(
            server, listing.capability, listing.method, params, listing.result_type, tenant
        )
        if result.next_cursor is not None and cursor_too_long(result.next_cursor):
            raise McpCatalogError(
                f"the MCP server {name!r} answered {listing.method} with a nextCursor of more "
                f"than {MAX_CURSOR_BYTES:,} bytes, which this client does not follow",
                kind="server_error",
                server=name,
                method=listing.method,
            )
        return Page(server=name, entries=listing.entries(result), next_cursor=result.next_cursor)

    async def read_resource(
        self,
        server: str | None,
        uri: str,
        *,
        limit_blobs: bool = True,
        tenant: Tenant | None = None,
    ) -> ResourceRead:
        """The contents of the resource ``uri`` of ``server``. Raises :class:`McpCatalogError`:
        ``too_large`` when a blob is bigger than ``max_blob_bytes`` (judged from its base64
        length; it is never decoded) unless ``limit_blobs`` is False, and the kinds of the other
        operations."""
        name, result = await self._ask(
            server, "resources", "resources/read", {"uri": uri}, ReadResourceResult, tenant
        )
        limit = self.config.max_blob_bytes
        for part in result.contents if limit_blobs else ():
            if isinstance(part, BlobResourceContents):
                size = len(part.blob) * 3 // 4
                if size > limit:
                    raise McpCatalogError(
                        f"the resource {uri!r} of server {name!r} has a blob of about "
                        f"{size / (1024 * 1024):.1f} MiB, over the {limit:,}-byte limit "
                        "(max_blob_bytes)",
                        kind="too_large",
                        server=name,
                        method="resources/read",
                    )
        return ResourceRead(server=name, uri=uri, contents=result.contents)

    async def get_prompt(
        self,
        server: str | None,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        tenant: Tenant | None = None,
    ) -> PromptRead:
        """The prompt ``name`` of ``server`` filled in with ``arguments`` (strings). Raises
        :class:`McpCatalogError` (``invalid`` when the server refused the name or the
        arguments)."""
        for key, value in (arguments or {}).items():
            if not isinstance(value, str):
                raise McpCatalogError(
                    f"prompt argument {key!r} must be a string, got {type(value).__name__}",
                    kind="invalid",
                    server=server,
                    method="prompts/get",
                )
        params: dict[str, Any] = {"name": name}
        if arguments:
            params["arguments"] = dict(arguments)
        served, result = await self._ask(
            server, "prompts", "prompts/get", params, GetPromptResult, tenant
        )
        return PromptRead(
            server=served, name=name, messages=result.messages, description=result.description
        )
