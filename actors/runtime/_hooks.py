"""Call hooks: the host's ordered chain of async interceptors around each tool call.

A hook is ``async def hook(call, call_next) -> CallToolResult``: it gets the call as a
:class:`ToolCallRequest` (the registered name, the server, the server's own tool name, the
arguments and the ``_meta``) and either passes it on, changed or not, with ``await
call_next(call.replace(...))`` and returns (or changes) what comes back, or returns a
``CallToolResult`` of its own without calling ``call_next`` (a short circuit: nothing is sent).
Wrapping ``call_next`` in ``try``/``except`` sees every failure of the call as its exception
(``ServerDisconnected.sent`` says whether the request went out). The first hook is the outermost.
This is the shape of LangChain's MCP tool interceptors, Pydantic AI's ``process_tool_call`` and
mcp-use's middleware.

Hooks run in the caller's task (the task awaiting ``rt.call`` or ``call_for_model``), never in
an actor: a slow hook holds up its own call only, and a cancellation of the caller reaches the
hook as it reaches any code of that task. A hook that raises an :class:`McpError` fails the call
with it (on purpose, or passing on what ``call_next`` raised); any other exception, and a
result that is not a ``CallToolResult``, fails the call with :class:`CallHookFailed` naming the
hook, its exception as the ``__cause__``. The runtime and the other calls go on.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from enum import Enum
from types import MappingProxyType
from typing import Any, Final, Protocol, TypeAlias

import attrs

from ...protocol._errors import CallHookFailed, McpError
from ...protocol._types import CallToolResult
from ._tenants import Tenant, as_tenant

__all__ = ["CallHook", "CallNext", "ToolCallRequest", "as_hooks", "hook_name", "run_hooks"]


def _frozen_mapping(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(value or {}))


class _Keep(Enum):
    KEEP = "KEEP"


_KEEP: Final = _Keep.KEEP


@attrs.frozen(kw_only=True)
class ToolCallRequest:
    """One tool call as the hooks see it.

    ``name`` is the registered name (``mcp_github_create_issue``), ``server`` the server's name
    and ``tool`` the server's own name for the tool (what goes on the wire). ``arguments`` and
    ``meta`` (the request's ``_meta``) are read-only mappings: a hook changes them with
    :meth:`replace`. ``attempt`` counts the attempts of this call (2 and up when a call that was
    not sent is tried again under the error policy); ``via`` says which chain runs:
    ``"runtime"`` (``rt.call``) or ``"agent"`` (``AgentSurface.call_for_model``). ``tenant``:
    who the call is for (:class:`Tenant`, whose headers go on its HTTP request; None: the
    operator), which a hook may set or change with :meth:`replace` (a host's function that
    gives each call its user's token)."""

    name: str
    server: str
    tool: str
    arguments: Mapping[str, Any] = attrs.field(converter=_frozen_mapping)
    meta: Mapping[str, Any] = attrs.field(factory=dict, converter=_frozen_mapping)
    attempt: int = 1
    via: str = "runtime"
    tenant: Tenant | None = attrs.field(default=None, converter=as_tenant)

    def replace(
        self,
        *,
        arguments: Mapping[str, Any] | None = None,
        meta: Mapping[str, Any] | None = None,
        tenant: Tenant | str | _Keep | None = _KEEP,
    ) -> ToolCallRequest:
        """This call with other ``arguments``, ``_meta`` and/or ``tenant`` (a :class:`Tenant`,
        a tenant id, or None for the operator); the ones not given are kept."""
        return attrs.evolve(
            self,
            arguments=self.arguments if arguments is None else arguments,
            meta=self.meta if meta is None else meta,
            tenant=self.tenant if isinstance(tenant, _Keep) else tenant,
        )


#: What a hook calls to go on: the next hook, or the call itself after the last one.
CallNext: TypeAlias = Callable[[ToolCallRequest], Awaitable[CallToolResult]]


class CallHook(Protocol):
    """A call hook: ``async def hook(call, call_next) -> CallToolResult`` (see the module's
    docstring). A plain ``async def`` function or an object with such an ``async __call__``;
    its name in errors is its ``__qualname__`` (or its class's)."""

    def __call__(self, call: ToolCallRequest, call_next: CallNext, /) -> Awaitable[CallToolResult]:
        """Return the call's result: from ``await call_next(call)``, or one of its own."""
        ...


def as_hooks(hooks: Iterable[CallHook]) -> tuple[CallHook, ...]:
    """The hooks as a tuple, in order (what the ``hooks=`` options keep)."""
    return tuple(hooks)


def hook_name(hook: object) -> str:
    """How errors name ``hook``: a function's ``__qualname__``, else its class's."""
    name = getattr(hook, "__qualname__", None)
    if isinstance(name, str):
        return name
    return type(hook).__qualname__


async def run_hooks(
    hooks: Sequence[CallHook], call: ToolCallRequest, last: CallNext
) -> CallToolResult:
    """Run ``call`` through ``hooks`` (the first outermost) and then ``last``, in this task."""
    if not hooks:
        return await last(call)
    return await _step(tuple(hooks), 0, call, last)


async def _step(
    hooks: tuple[CallHook, ...], index: int, call: ToolCallRequest, last: CallNext
) -> CallToolResult:
    if index == len(hooks):
        return await last(call)
    hook = hooks[index]
    passed_on: list[BaseException] = []  # what call_next raised, to tell it from the hook's own

    async def call_next(next_call: ToolCallRequest) -> CallToolResult:
        given: object = next_call
        if not isinstance(given, ToolCallRequest):
            raise _failed(
                hook,
                call,
                f"passed {type(given).__name__} to call_next, not a ToolCallRequest "
                "(use call.replace(arguments=..., meta=...))",
            )
        try:
            return await _step(hooks, index + 1, next_call, last)
        except Exception as exc:
            passed_on.append(exc)
            raise

    try:
        result: object = await hook(call, call_next)
    except McpError:
        raise
    except Exception as exc:
        if any(exc is seen for seen in passed_on):
            raise
        raise _failed(hook, call, f"raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(result, CallToolResult):
        raise _failed(hook, call, f"returned {type(result).__name__}, not a CallToolResult")
    return result


def _failed(hook: CallHook, call: ToolCallRequest, what: str) -> CallHookFailed:
    name = hook_name(hook)
    return CallHookFailed(
        f"the call hook {name} {what}, so the call of {call.name} ({call.server}/{call.tool}) "
        "failed; fix the hook",
        hook=name,
        server=call.server,
        method="tools/call",
    )
