"""What the host answers for the servers: roots, sampling, elicitation; and how it shows an
OAuth sign-in (``authorize``).

A capability is declared to a server only when the host gives its callback; a server request for a
capability that was not declared is answered with ``-32601`` (method not found).

Each callback gets the server's name and the decoded request parameters, and returns the result
as a wire object (or a plain mapping in wire shape). Raising :class:`RpcError` answers the server
with that error; any other exception is logged and answered with ``-32603``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import attrs

from ...protocol._types import (
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    ElicitResult,
    Root,
)
from ...transports.oauth._types import AuthorizationPrompt

__all__ = [
    "ElicitationCallback",
    "HostCallbacks",
    "RootsCallback",
    "SamplingCallback",
]

RootsCallback = Callable[[str], Awaitable[Sequence[Root | Mapping[str, Any]]]]
SamplingCallback = Callable[
    [str, CreateMessageRequestParams], Awaitable[CreateMessageResult | Mapping[str, Any]]
]
ElicitationCallback = Callable[
    [str, ElicitRequestFormParams | ElicitRequestURLParams],
    Awaitable[ElicitResult | Mapping[str, Any]],
]


@attrs.frozen(kw_only=True)
class HostCallbacks:
    """The host's answers to server requests (leave one out to not declare that capability).
    Approvals of the model's calls are the agent surface's (``AgentSurface(rt, approve=...)``)."""

    list_roots: RootsCallback | None = None
    sampling: SamplingCallback | None = None
    #: What ``sampling`` declares besides plain messages: ``{"tools": {}}`` (the callback answers
    #: with tool use, 2025-11-25), ``{"context": {}}`` (it honours ``includeContext``). None:
    #: the callback's own ``sampling_capabilities`` attribute (the ready samplers of
    #: ``trio_mcp.actors.agent`` have one), else ``{}``.
    sampling_capabilities: Mapping[str, Any] | None = None
    elicitation: ElicitationCallback | None = None
    #: Elicitation modes the host can show: "form", and "url" (opens a URL for the user).
    elicitation_modes: tuple[str, ...] = ("form",)
    #: Shows an OAuth sign-in to the user (a chat UI showing the link) and returns the URL the
    #: browser was redirected to. Given, it is the host's opt-in to being asked: a server's
    #: sign-in may call it while connecting, and ``rt.login(server)`` uses it when given no
    #: prompt. None: the runtime never starts a sign-in on its own (the server is NEEDS_AUTH
    #: until ``trio-mcp login NAME`` or ``rt.login``).
    authorize: AuthorizationPrompt | None = None

    def client_capabilities(self) -> dict[str, Any]:
        """The capabilities to declare in ``initialize`` (the handshake revisions), from the
        callbacks that are present."""
        caps = self.modern_capabilities()
        if "roots" in caps:
            caps["roots"] = {"listChanged": False}
        return caps

    def modern_capabilities(self) -> dict[str, Any]:
        """The capabilities every 2026-07-28 request declares in its ``_meta``, from the
        callbacks that are present: that revision's shape (``roots`` has no ``listChanged``, and
        there is no ``tasks``)."""
        caps: dict[str, Any] = {}
        if self.list_roots is not None:
            caps["roots"] = {}
        if self.sampling is not None:
            caps["sampling"] = self._sampling_capabilities()
        if self.elicitation is not None:
            caps["elicitation"] = {mode: {} for mode in self.elicitation_modes}
        return caps

    def _sampling_capabilities(self) -> dict[str, Any]:
        declared = self.sampling_capabilities
        if declared is None:
            declared = getattr(self.sampling, "sampling_capabilities", None)
        if not isinstance(declared, Mapping):
            return {}
        return {
            str(key): dict(value) if isinstance(value, Mapping) else {}
            for key, value in declared.items()
        }
