"""What the host answers for the servers (roots, sampling, elicitation) and for the model's calls
(approvals).

A capability is declared to a server only when the host gives its callback; a server request for a
capability that was not declared is answered with ``-32601`` (method not found).

``approve`` is asked by ``rt.call_for_model`` when a call needs approval (the permission rules,
the trust level and the tool's risk decide: see :mod:`trio_mcp.actors._risk`). It gets an
:class:`ApprovalRequest` (server, tool, registered name, risk, arguments, what changed since an
earlier approval, why it is asked, the definition) and returns True to allow the call. Without
it, every call that needs approval is refused; an exception it raises counts as a no (logged).

Each callback gets the server's name and the decoded request parameters, and returns the result
as a wire object (or a plain mapping in wire shape). Raising :class:`RpcError` answers the server
with that error; any other exception is logged and answered with ``-32603``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import attrs

from ..protocol._types import (
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    ElicitResult,
    Root,
)
from ._risk import ApprovalCallback

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
    """The host's answers to server requests (leave one out to not declare that capability)
    and to approval requests for the model's calls (leave ``approve`` out to refuse every call
    that needs approval)."""

    list_roots: RootsCallback | None = None
    sampling: SamplingCallback | None = None
    elicitation: ElicitationCallback | None = None
    #: Elicitation modes the host can show: "form", and "url" (opens a URL for the user).
    elicitation_modes: tuple[str, ...] = ("form",)
    #: Asked before a model's call that needs approval; True allows it.
    approve: ApprovalCallback | None = None

    def client_capabilities(self) -> dict[str, Any]:
        """The capabilities to declare, from the callbacks that are present."""
        caps: dict[str, Any] = {}
        if self.list_roots is not None:
            caps["roots"] = {"listChanged": False}
        if self.sampling is not None:
            caps["sampling"] = {}
        if self.elicitation is not None:
            caps["elicitation"] = {mode: {} for mode in self.elicitation_modes}
        return caps
