"""One answer to a server's request for input, whichever protocol era asks.

A server asks the host for roots, a sampling completion or an elicitation in one of two ways:

- a legacy server (2024-11-05 to 2025-11-25) sends a JSON-RPC request of its own
  (``roots/list``, ``sampling/createMessage``, ``elicitation/create``), which the session's
  :class:`~trio_mcp.actors.runtime._dispatcher.Dispatcher` answers;
- a 2026-07-28 server answers one of our calls with an ``input_required`` result whose
  ``inputRequests`` hold the same requests, which the MRTR loop
  (:func:`~trio_mcp.actors.runtime._mrtr.with_input_rounds`) answers before it retries.

Both turn one such request into its result with :func:`answer_input`, from the same
:class:`HostCallbacks`: the host writes one callback per capability, for both eras.

:func:`answer_input` raises :class:`InputNotDeclared` for a request the host did not declare the
capability of (no callback, or an elicitation mode it cannot show) and :class:`InvalidInputParams`
for parameters of the wrong shape; both are :class:`RpcError`, with the code the dispatcher
answers the server with (``-32601`` or ``-32602``). What the host's callback raises goes through
as it is: an :class:`RpcError` is the host's refusal, anything else a failure of the host's code.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ...protocol._codec import unstructure
from ...protocol._errors import InvalidMessage, InvalidParams, RpcError
from ...protocol._methods import decode_params
from ._callbacks import HostCallbacks

__all__ = ["INPUT_METHODS", "InputNotDeclared", "InvalidInputParams", "answer_input"]

#: The requests the host answers, and the client capability each needs.
INPUT_METHODS: Final[Mapping[str, str]] = {
    "roots/list": "roots",
    "sampling/createMessage": "sampling",
    "elicitation/create": "elicitation",
}


class InputNotDeclared(RpcError):
    """The host did not declare what the request needs: ``capability`` names it (``"roots"``,
    ``"sampling"``, ``"elicitation"``, ``"elicitation.url"``...), or is None for a method that is
    no input request at all. ``code`` is what a legacy server is answered with: ``-32601`` for a
    method, ``-32602`` for an elicitation mode."""

    def __init__(self, message: str, *, code: int, capability: str | None) -> None:
        super().__init__(message, code=code)
        self.capability = capability


class InvalidInputParams(InvalidParams):
    """The request's parameters do not have the shape the protocol requires (``-32602``); the
    :class:`InvalidMessage` that says where is the ``__cause__``."""


async def answer_input(
    callbacks: HostCallbacks, server: str, method: str, params: Mapping[str, Any] | None
) -> Mapping[str, Any]:
    """The result of one request of ``server`` for input (``roots/list``,
    ``sampling/createMessage`` or ``elicitation/create`` with its raw ``params``), from the host's
    callback, as a mapping in wire shape.

    Raises :class:`InputNotDeclared` when the callback is missing, the elicitation mode is not
    one of ``callbacks.elicitation_modes`` or ``method`` is no input request;
    :class:`InvalidInputParams` for parameters of the wrong shape (checked only once the
    capability is known to be declared: an undeclared request is refused as such); ``RpcError``
    (``-32603``) when the callback's answer is not an object; and whatever the callback raises.
    """
    result: Any
    if method == "roots/list" and callbacks.list_roots is not None:
        result = {"roots": [_wire(root) for root in await callbacks.list_roots(server)]}
    elif method == "sampling/createMessage" and callbacks.sampling is not None:
        result = await callbacks.sampling(server, _params(method, params))
    elif method == "elicitation/create" and callbacks.elicitation is not None:
        decoded = _params(method, params)
        mode = getattr(decoded, "mode", None) or "form"
        if mode not in callbacks.elicitation_modes:
            raise InputNotDeclared(
                f"elicitation mode {mode!r} is not supported",
                code=-32602,
                capability=f"elicitation.{mode}",
            )
        result = await callbacks.elicitation(server, decoded)
    else:
        raise InputNotDeclared(
            f"method not found: {method}", code=-32601, capability=INPUT_METHODS.get(method)
        )
    answer = _wire(result)
    if not isinstance(answer, Mapping):
        raise RpcError.from_error(-32603, f"the client's {method} handler gave no object")
    return answer


def _params(method: str, params: Mapping[str, Any] | None) -> Any:
    """The decoded ``params``; params of the wrong shape are the server's error: -32602
    (invalid params), naming the path."""
    try:
        return decode_params(method, params)
    except InvalidMessage as exc:
        raise InvalidInputParams(f"invalid {method} params: {exc}", code=-32602) from exc


def _wire(value: Any) -> Any:
    return value if isinstance(value, Mapping) else unstructure(value)
