"""Multi round-trip requests (MRTR, 2026-07-28): a call the server answers with
``resultType: "input_required"``.

A 2026-07-28 server never sends requests of its own. When it needs something from the client to
finish a ``tools/call``, ``resources/read`` or ``prompts/get`` (an elicitation, a sampling
completion, the roots), it answers the call with an :class:`InputRequiredResult`: the requests
under keys of its choosing (``inputRequests``) and/or an opaque ``requestState``. The client
answers every request from the host's callbacks (the same ones a legacy server's requests reach,
through :func:`~trio_mcp.actors.runtime._inputs.answer_input`) and sends the original request
again, as a new request (a new JSON-RPC id), with ``inputResponses`` (the answers under the
same keys) and ``requestState`` echoed exactly. The server may ask again; each answer of this
kind is one **round**, and :func:`with_input_rounds` gives up after ``max_rounds`` of them.

What the loop decides:

- The input requests of one round are answered **in order**, one at a time (a user sees one
  question at a time; a refusal stops the round before anything else is asked), and all of them
  before the retry. Their shapes are checked before any is answered: an unknown method, more
  than :data:`MAX_INPUT_REQUESTS`, an empty round with nothing to echo, or a ``requestState``
  that cannot be sent back exactly fail that call with :class:`InvalidMessage`.
- An elicitation the user declines or cancels is an answer like any other (``{"action":
  "decline"}``): it is sent, and the server decides. A request the host did not declare the
  capability of, a refusal of the host (its callback raises :class:`RpcError`) or a failure of
  its callback abandons the call with :class:`InputRequestFailed`: the specification lets a
  client drop a call whose input it cannot give.
- No ``inputRequests`` but a ``requestState`` (the server shedding load) is retried at once,
  and counts as a round.
- ``inputResponses`` and ``requestState`` belong to the retry of this one call: the loop builds
  each retry from the caller's original params and never changes them, so nothing leaks into
  another request. On a retry the loop owns both keys (a value the caller put there is
  replaced, or left out when the round has none).
- Time: ``deadline`` (trio clock; None: none) covers the whole call, every round and the host's
  answers included, as the same call's time does on a legacy server, where the server's
  requests arrive while the call waits. Each ``send`` is given the seconds left; the host's
  callbacks are cancelled when the deadline passes (:class:`CallTimeout`).

Interim results are never cached: an ``input_required`` result, and the result of a retry that
carries ``inputResponses`` or ``requestState``, must not be (specification, caching); a cache of
``resources/read`` must key on the original request and store only what a call without either
returned.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import trio

from ...protocol._errors import (
    CallTimeout,
    InputRequestFailed,
    InputRoundsExceeded,
    InvalidMessage,
    RpcError,
)
from ...protocol._methods import encode
from ...protocol._types import InputRequest, InputRequiredResult, UnknownInputRequest
from ._inputs import INPUT_METHODS, InputNotDeclared, InvalidInputParams

__all__ = [
    "MAX_INPUT_REQUESTS",
    "AnswerInput",
    "SendRound",
    "answer_input_requests",
    "with_input_rounds",
]

#: Input requests one round may hold; a server that asks for more fails that call (a legacy
#: server's requests are bounded alike: the dispatcher handles 32 at once).
MAX_INPUT_REQUESTS: Final = 32

#: The keys of a retry that belong to the loop.
_OWNED: Final = ("inputResponses", "requestState")

#: ``send(params, timeout)``: send one request with these params (a new request, with its own
#: id, each time) and return its decoded result (``decode_result``: an
#: :class:`InputRequiredResult` for ``resultType: "input_required"``); ``timeout`` is the time
#: left before the loop's deadline, in seconds (None: no deadline).
SendRound = Callable[[Mapping[str, Any], float | None], Awaitable[Any]]
#: ``answer(method, params)``: the host's answer to one input request, as a wire mapping
#: (``functools.partial(answer_input, callbacks, server)``).
AnswerInput = Callable[[str, Mapping[str, Any] | None], Awaitable[Mapping[str, Any]]]

_WHAT: Final = {
    "roots/list": "the roots",
    "sampling/createMessage": "a sampling completion",
    "elicitation/create": "an elicitation",
}


async def with_input_rounds(
    send: SendRound,
    method: str,
    params: Mapping[str, Any],
    *,
    answer: AnswerInput,
    max_rounds: int,
    server: str,
    deadline: float | None = None,
    first: InputRequiredResult | None = None,
    start: float | None = None,
) -> Any:
    """Send ``method`` with ``params`` through ``send`` and return its final result, answering
    the server's ``input_required`` results on the way (at most ``max_rounds`` of them).

    ``first``: the answer to ``params``, when the caller sent them itself (a session sends a
    call's first round directly, so that a call the server answers at once pays nothing for
    the rounds), with ``start`` the time it was sent.

    Raises what ``send`` raises; :class:`InputRoundsExceeded` when the server asks for input a
    ``max_rounds + 1``-th time; :class:`InputRequestFailed` when an input request cannot be
    answered (capability not declared, the host refused, its callback failed);
    :class:`InvalidMessage` for an ``input_required`` result the client cannot act on; and
    :class:`CallTimeout` when ``deadline`` passes outside ``send`` (while the host answers, or
    before a retry is sent).
    """
    log = logging.getLogger(f"trio_mcp.server.{server}")
    if start is None:
        start = trio.current_time()
    request: Mapping[str, Any] = params
    rounds = 0
    result: Any = first
    while True:
        if result is None:
            remaining: float | None = None
            if deadline is not None:
                remaining = deadline - trio.current_time()
                if remaining <= 0:
                    await trio.lowlevel.checkpoint()
                    when = "before it was sent again" if rounds else "before it was sent"
                    raise _timed_out(method, server, start, deadline, rounds, when)
            result = await send(request, remaining)
        if not isinstance(result, InputRequiredResult):
            return result
        if rounds >= max_rounds:
            raise InputRoundsExceeded(
                f"server {server!r} still asked for input to finish {method} after "
                f"{rounds} round{'s' * (rounds != 1)} (max_input_rounds is {max_rounds}), so the "
                "call was abandoned; raise RuntimeConfig(max_input_rounds=...) if the server "
                "legitimately needs more rounds",
                rounds=rounds,
                server=server,
                method=method,
            )
        rounds += 1
        requests = _checked(result, method, server)
        responses: dict[str, Mapping[str, Any]] | None = None
        if requests is not None:
            log.debug(
                "%s: input round %d: %s",
                method,
                rounds,
                ", ".join(f"{key!r} {item.method}" for key, item in requests.items()) or "none",
            )
            with trio.move_on_at(math.inf if deadline is None else deadline) as scope:
                responses = await _fulfil(requests, answer, method, server)
            if scope.cancelled_caught:
                raise _timed_out(
                    method, server, start, deadline, rounds, "while the host answered its input"
                )
        else:
            log.debug("%s: input round %d: the server asked to be called again", method, rounds)
        request = _retry(params, responses, result.request_state)
        result = None


async def answer_input_requests(
    requests: Mapping[str, InputRequest],
    *,
    answer: AnswerInput,
    method: str,
    server: str,
    path: str,
) -> dict[str, Mapping[str, Any]]:
    """The host's answers to input requests that do not come in an ``input_required`` result
    (the outstanding ``inputRequests`` of a task of the 2026-07-28 tasks extension, at
    ``path``): checked and answered exactly as one round of :func:`with_input_rounds` is (in
    order; the same errors)."""
    if len(requests) > MAX_INPUT_REQUESTS:
        raise _invalid(
            f"server {server!r} asked for {len(requests)} inputs at once to finish {method}; "
            f"this client answers at most {MAX_INPUT_REQUESTS} per round",
            path,
        )
    for key, item in requests.items():
        if isinstance(item, UnknownInputRequest):
            known = ", ".join(INPUT_METHODS)
            raise _invalid(
                f"server {server!r} asked for input of an unknown kind to finish {method}: "
                f"{item.method!r} (input {key!r}); an input request is one of {known}",
                f"{path}[{_quote(key)}].method",
            )
    return await _fulfil(requests, answer, method, server)


def _checked(
    result: InputRequiredResult, method: str, server: str
) -> Mapping[str, InputRequest] | None:
    """The round's input requests, once every one of them is known to be answerable in shape
    (None when the round has none); raises :class:`InvalidMessage` naming what is wrong."""
    state = result.request_state
    if state is not None and not state.isascii():
        try:
            state.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise _invalid(
                f"server {server!r} answered {method} with a requestState that is not valid "
                f"Unicode (a lone surrogate at character {exc.start}), which cannot be sent back "
                "exactly",
                "$.result.requestState",
            ) from None
    requests = result.input_requests
    if requests is None:
        return None
    if not requests and state is None:
        raise _invalid(
            f"server {server!r} answered {method} with input_required but asked for nothing "
            "(empty inputRequests, no requestState)",
            "$.result.inputRequests",
        )
    if len(requests) > MAX_INPUT_REQUESTS:
        raise _invalid(
            f"server {server!r} asked for {len(requests)} inputs at once to finish {method}; "
            f"this client answers at most {MAX_INPUT_REQUESTS} per round",
            "$.result.inputRequests",
        )
    for key, item in requests.items():
        if isinstance(item, UnknownInputRequest):
            known = ", ".join(INPUT_METHODS)
            raise _invalid(
                f"server {server!r} asked for input of an unknown kind to finish {method}: "
                f"{item.method!r} (input {key!r}); an input request is one of {known}",
                f"$.result.inputRequests[{_quote(key)}].method",
            )
    return requests


async def _fulfil(
    requests: Mapping[str, InputRequest], answer: AnswerInput, method: str, server: str
) -> dict[str, Mapping[str, Any]]:
    """The host's answers to one round's input requests, in order, under the server's keys."""
    responses: dict[str, Mapping[str, Any]] = {}
    for key, item in requests.items():
        wanted = item.method
        asked = (
            f"server {server!r} asked for {_WHAT.get(wanted, wanted)} (input {key!r}) to "
            f"finish {method}"
        )
        params = getattr(item, "params", None)
        try:
            responses[key] = await answer(wanted, None if params is None else encode(params))
        except InputNotDeclared as exc:
            capability = exc.capability or wanted
            raise InputRequestFailed(
                f"{asked}, but this client did not declare the {capability} capability, so the "
                f"call was abandoned; {_hint(capability)}",
                input_method=wanted,
                key=key,
                capability=capability,
                server=server,
                method=method,
            ) from None
        except InvalidInputParams as exc:
            raise _invalid(
                f"{asked} with invalid params: {exc.__cause__ or exc}",
                f"$.result.inputRequests[{_quote(key)}].params",
            ) from exc
        except RpcError as exc:  # the host's refusal
            raise InputRequestFailed(
                f"{asked}, and the host refused it ({exc.args[0] if exc.args else exc}), so the "
                "call was abandoned",
                input_method=wanted,
                key=key,
                server=server,
                method=method,
            ) from exc
        except Exception as exc:  # the host's callback failed: the error is its __cause__
            raise InputRequestFailed(
                f"{asked}, and the host's callback failed ({type(exc).__name__}: {exc}), so the "
                "call was abandoned",
                input_method=wanted,
                key=key,
                server=server,
                method=method,
            ) from exc
    return responses


def _retry(
    original: Mapping[str, Any],
    responses: Mapping[str, Mapping[str, Any]] | None,
    state: str | None,
) -> dict[str, Any]:
    """The params of the retry: the original ones, with this round's answers and its
    ``requestState`` exactly as the server sent it (each left out when the round has none)."""
    params = {key: value for key, value in original.items() if key not in _OWNED}
    if responses is not None:
        params["inputResponses"] = responses
    if state is not None:
        params["requestState"] = state
    return params


def _timed_out(
    method: str, server: str, start: float, deadline: float | None, rounds: int, when: str
) -> CallTimeout:
    assert deadline is not None
    return CallTimeout(
        f"{method} to server {server!r} did not finish in {deadline - start:g} s: the time ran "
        f"out {when} (input round {rounds}); the call's timeout covers every round",
        timeout=deadline - start,
        server=server,
        method=method,
    )


def _invalid(message: str, path: str) -> InvalidMessage:
    return InvalidMessage(message, path=path, errors=(f"{message} @ {path}",))


def _hint(capability: str) -> str:
    if capability.startswith("elicitation."):
        mode = capability.partition(".")[2]
        return f"add {mode!r} to HostCallbacks(elicitation_modes=...) to answer it"
    callback = {"roots": "list_roots"}.get(capability, capability)
    return f"give HostCallbacks({callback}=...) to answer it"


def _quote(key: str) -> str:
    return json.dumps(key)
