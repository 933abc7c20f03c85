"""The MRTR loop alone (2026-07-28 multi round-trip requests): a call answered with
``input_required`` is retried with the host's answers and the server's ``requestState``.

The session's ``send`` is played by :class:`ScriptedServer`: every request gets a new id, as the
session allocates them, goes through the real JSON-RPC serializer (what is recorded is what the
wire carries), and is answered with the next scripted result, in a frame of the server's own
JSON, parsed and decoded as the session does it. The host is :class:`RecordingHost`, whose
callbacks answer a legacy server's requests through the dispatcher just as well (checked here
too).
"""

from __future__ import annotations

import copy
import functools
import itertools
import json
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from tests.conformance.client import CALLBACKS as CONFORMANCE_CALLBACKS
from trio_mcp.actors.config import RuntimeConfig
from trio_mcp.actors.runtime._callbacks import HostCallbacks
from trio_mcp.actors.runtime._inputs import InvalidInputParams, answer_input
from trio_mcp.actors.runtime._mrtr import MAX_INPUT_REQUESTS, with_input_rounds
from trio_mcp.protocol import (
    CallError,
    CallTimeout,
    CallToolResult,
    ConfigError,
    InputRequestFailed,
    InputRoundsExceeded,
    InvalidMessage,
    McpError,
    RpcError,
)
from trio_mcp.protocol._jsonrpc import Request, Response, parse_message, serialize
from trio_mcp.protocol._methods import decode_result

from .host_callbacks import RecordingHost
from .test_dispatcher import Outbox, errors, results, start

Clock = trio.testing.MockClock

SERVER = "s"
PARAMS: dict[str, Any] = {"name": "deploy", "arguments": {"env": "prod", "dry": False}}
ELICIT: dict[str, Any] = {
    "method": "elicitation/create",
    "params": {
        "message": "Which region?",
        "requestedSchema": {"type": "object", "properties": {"region": {"type": "string"}}},
    },
}
URL_ELICIT: dict[str, Any] = {
    "method": "elicitation/create",
    "params": {"mode": "url", "message": "Sign in", "url": "https://example.com/login"},
}
SAMPLE: dict[str, Any] = {
    "method": "sampling/createMessage",
    "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": "Sum up"}}],
        "maxTokens": 50,
    },
}
ROOTS: dict[str, Any] = {"method": "roots/list"}
DONE: dict[str, Any] = {"resultType": "complete", "content": [{"type": "text", "text": "done"}]}

Reply = Mapping[str, Any] | Callable[[dict[str, Any]], Mapping[str, Any]]


def needs(requests: Mapping[str, Any] | None = None, state: str | None = None) -> dict[str, Any]:
    """An ``input_required`` result."""
    result: dict[str, Any] = {"resultType": "input_required"}
    if requests is not None:
        result["inputRequests"] = dict(requests)
    if state is not None:
        result["requestState"] = state
    return result


@attrs.define(eq=False)
class ScriptedServer:
    """The session's ``send`` for one server: answers with the scripted results in order, then
    with ``repeat`` (if given). ``delay``: seconds the server takes per answer."""

    script: list[Reply]
    method: str = "tools/call"
    repeat: Reply | None = None
    delay: float = 0.0
    sent: list[dict[str, Any]] = attrs.Factory(list)
    ids: list[int] = attrs.Factory(list)
    timeouts: list[float | None] = attrs.Factory(list)
    frames: list[bytes] = attrs.Factory(list)
    _counter: itertools.count[int] = attrs.field(init=False, factory=lambda: itertools.count(1))

    async def send(self, params: Mapping[str, Any], timeout: float | None) -> Any:
        request_id = next(self._counter)
        frame = serialize(Request(id=request_id, method=self.method, params=params))
        self.frames.append(frame)
        wire = json.loads(frame)
        self.ids.append(wire["id"])
        self.sent.append(wire["params"])
        self.timeouts.append(timeout)
        if self.delay:
            await trio.sleep(self.delay)
        else:
            await trio.lowlevel.checkpoint()
        if self.script:
            reply = self.script.pop(0)
        else:
            assert self.repeat is not None, "the loop sent more requests than scripted"
            reply = self.repeat
        result = reply(wire["params"]) if callable(reply) else reply
        # the server's own JSON (ASCII, with \u escapes), parsed as the session parses it
        reply_frame = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result})
        answer = parse_message(reply_frame.encode())
        assert isinstance(answer, Response)
        return decode_result(self.method, answer.result)


async def run(
    server: ScriptedServer,
    callbacks: HostCallbacks | RecordingHost,
    params: Mapping[str, Any] = PARAMS,
    *,
    max_rounds: int = 8,
    deadline: float | None = None,
) -> Any:
    if isinstance(callbacks, RecordingHost):
        callbacks = callbacks.callbacks()
    return await with_input_rounds(
        server.send,
        server.method,
        params,
        answer=functools.partial(answer_input, callbacks, SERVER),
        max_rounds=max_rounds,
        server=SERVER,
        deadline=deadline,
    )


def without(params: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    return {key: value for key, value in params.items() if key not in keys}


# --------------------------------------------------------------------------- the rounds


async def test_a_complete_result_is_returned_after_one_request() -> None:
    server = ScriptedServer([DONE])
    result = await run(server, RecordingHost())
    assert isinstance(result, CallToolResult)
    assert result.text == "done"
    assert server.sent == [PARAMS]


async def test_a_result_without_result_type_is_complete() -> None:
    # A 2026-07-28 result may leave resultType out: that means complete, never a retry.
    server = ScriptedServer([{"content": [{"type": "text", "text": "plain"}]}])
    result = await run(server, RecordingHost())
    assert result.text == "plain"
    assert len(server.sent) == 1


async def test_the_retry_carries_the_original_params_the_answers_and_the_state() -> None:
    host = RecordingHost()
    server = ScriptedServer([needs({"region": ELICIT}, state="opaque-1"), DONE])
    result = await run(server, host)
    assert result.text == "done"
    assert server.sent == [
        PARAMS,
        {
            **PARAMS,
            "inputResponses": {
                "region": {"action": "accept", "content": {"message": "Which region?"}}
            },
            "requestState": "opaque-1",
        },
    ]
    assert server.ids == [1, 2]  # a new request, with an id of its own
    assert [(name, server_name) for name, server_name, _ in host.asked] == [("elicitation", "s")]


@pytest.mark.parametrize(
    "state",
    [
        "",
        " ",
        "  padded both sides  ",
        "\t\r\n",
        "é",
        "e\u0301",  # decomposed: never normalized to "é"
        "😀 \U0001f3f3\ufe0f\u200d\U0001f308",
        "\u2028\u2029\u00a0\ufeff\u200b",
        "\x00\x01\x1f\x7f",
        '{"b": 1, "a": [1, 2]}',  # JSON inside: never parsed, never re-serialized
        "\\u0041 is not A",
        "\u202eright to left\u202c",
        "x" * 100_000,
    ],
)
async def test_request_state_is_echoed_exactly(state: str) -> None:
    server = ScriptedServer([needs({"k": ROOTS}, state=state), DONE])
    await run(server, RecordingHost())
    assert server.sent[1]["requestState"] == state
    # on the wire: the JSON string the serializer writes for exactly that value
    assert json.dumps(state, ensure_ascii=False).encode() in server.frames[1]


async def test_without_request_state_the_retry_has_none() -> None:
    server = ScriptedServer([needs({"k": ROOTS}), DONE])
    await run(server, RecordingHost())
    assert "requestState" not in server.sent[1]
    assert server.sent[1] == {
        **PARAMS,
        "inputResponses": {"k": {"roots": [{"uri": "file:///work", "name": "s"}]}},
    }


async def test_each_round_carries_only_its_own_answers_and_state() -> None:
    host = RecordingHost()
    server = ScriptedServer(
        [
            needs({"a": ROOTS}, state="round-1"),
            needs({"b": SAMPLE}),  # no state this time: none is sent
            needs(state="round-3"),  # state only: no answers are sent
            DONE,
        ]
    )
    await run(server, host)
    first, second, third, fourth = server.sent
    assert first == PARAMS
    assert second == {
        **PARAMS,
        "inputResponses": {"a": {"roots": [{"uri": "file:///work", "name": "s"}]}},
        "requestState": "round-1",
    }
    assert third == {
        **PARAMS,
        "inputResponses": {
            "b": {
                "role": "assistant",
                "content": {"type": "text", "text": "echo: Sum up"},
                "model": "host-model",
                "stopReason": "endTurn",
            }
        },
    }
    assert fourth == {**PARAMS, "requestState": "round-3"}
    assert server.ids == [1, 2, 3, 4]


async def test_input_responses_have_exactly_the_keys_of_the_input_requests() -> None:
    keys = ["z-first", "", "clé ✓", 'with "quotes" and \\', "a"]
    requests = {key: (ROOTS, SAMPLE, ELICIT)[index % 3] for index, key in enumerate(keys)}
    host = RecordingHost()
    server = ScriptedServer([needs(requests), DONE])
    await run(server, host)
    assert list(server.sent[1]["inputResponses"]) == keys
    # answered one at a time, in the server's order
    assert [name for name, _, _ in host.asked] == [
        "roots",
        "sampling",
        "elicitation",
        "roots",
        "sampling",
    ]


async def test_an_empty_round_with_a_state_sends_empty_answers_and_the_state() -> None:
    server = ScriptedServer([needs({}, state="nothing yet"), DONE])
    await run(server, RecordingHost())
    assert server.sent[1] == {**PARAMS, "inputResponses": {}, "requestState": "nothing yet"}


async def test_the_original_params_are_never_changed_and_the_loop_owns_its_keys() -> None:
    params = {**PARAMS, "inputResponses": {"stale": {}}, "requestState": "stale", "_meta": {"x": 1}}
    before = copy.deepcopy(params)
    server = ScriptedServer([needs({"k": ROOTS}), needs(state="fresh"), DONE])
    await run(server, RecordingHost(), params)
    assert params == before
    assert server.sent[0] == before  # the first request is the caller's, as given
    assert "stale" not in json.dumps(server.sent[1:])
    assert server.sent[2] == {**PARAMS, "_meta": {"x": 1}, "requestState": "fresh"}


async def test_load_shedding_is_retried_at_once_and_counts_as_a_round(
    autojump_clock: Clock,
) -> None:
    start_time = trio.current_time()
    server = ScriptedServer([needs(state="busy-1"), needs(state="busy-2"), DONE])
    assert (await run(server, RecordingHost(), max_rounds=2)).text == "done"
    assert trio.current_time() == start_time  # no wait between the retries
    assert [p.get("requestState") for p in server.sent] == [None, "busy-1", "busy-2"]
    assert all("inputResponses" not in p for p in server.sent)

    shedding = ScriptedServer([], repeat=needs(state="busy"))
    with pytest.raises(InputRoundsExceeded) as info:
        await run(shedding, RecordingHost(), max_rounds=2)
    assert info.value.rounds == 2
    assert len(shedding.sent) == 3


@pytest.mark.parametrize("limit", [0, 1, 3, 8])
async def test_the_rounds_are_capped_exactly(limit: int) -> None:
    counter = itertools.count(1)
    host = RecordingHost()
    server = ScriptedServer([], repeat=lambda _: needs({"k": ROOTS}, state=f"{next(counter)}"))
    with pytest.raises(InputRoundsExceeded) as info:
        await run(server, host, max_rounds=limit)
    error = info.value
    assert len(server.sent) == limit + 1
    assert len(host.asked) == limit  # the last input_required is not answered
    assert error.rounds == limit
    assert (error.server, error.method) == (SERVER, "tools/call")
    assert isinstance(error, CallError)
    message = str(error)
    assert "server 's'" in message
    assert "tools/call" in message
    assert f"after {limit} round" in message
    assert "max_input_rounds" in message


async def test_the_last_allowed_round_may_finish() -> None:
    server = ScriptedServer([needs({"k": ROOTS}), needs({"k": ROOTS}), DONE])
    assert (await run(server, RecordingHost(), max_rounds=2)).text == "done"


def test_the_rounds_option_is_checked() -> None:
    assert RuntimeConfig().max_input_rounds == 8
    assert RuntimeConfig(max_input_rounds=0).max_input_rounds == 0
    for bad in (-1, 1.5, True, "8"):
        with pytest.raises(ConfigError, match="max_input_rounds must be an integer >= 0"):
            RuntimeConfig(max_input_rounds=bad)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- what the host says


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_a_declined_or_cancelled_elicitation_is_sent_and_the_server_decides(
    action: str,
) -> None:
    host = RecordingHost(elicit_action=action)  # type: ignore[arg-type]
    server = ScriptedServer(
        [
            needs({"region": ELICIT}, state="st"),
            # the server asks again (it may), then gives up with a tool error of its own
            needs({"region": ELICIT}, state="st2"),
            {"content": [{"type": "text", "text": "no region"}], "isError": True},
        ]
    )
    result = await run(server, host)
    assert result.is_error
    assert server.sent[1]["inputResponses"] == {"region": {"action": action}}
    assert server.sent[2]["inputResponses"] == {"region": {"action": action}}
    assert server.sent[2]["requestState"] == "st2"


async def _refuse(*args: Any) -> Any:
    await trio.lowlevel.checkpoint()
    raise RpcError.from_error(-1, "the user rejected it")


async def _crash(*args: Any) -> Any:
    await trio.lowlevel.checkpoint()
    raise KeyError("model")


@pytest.mark.parametrize(
    ("request_", "callbacks"),
    [
        (SAMPLE, HostCallbacks(sampling=_refuse)),
        (ROOTS, HostCallbacks(list_roots=_refuse)),
        (ELICIT, HostCallbacks(elicitation=_refuse)),
    ],
)
async def test_a_refusal_of_the_host_abandons_the_call(
    request_: dict[str, Any], callbacks: HostCallbacks
) -> None:
    server = ScriptedServer([needs({"k": request_}, state="st"), DONE])
    with pytest.raises(InputRequestFailed) as info:
        await run(server, callbacks)
    error = info.value
    assert len(server.sent) == 1  # not retried: the specification lets the client drop it
    assert (error.input_method, error.key, error.capability) == (request_["method"], "k", None)
    assert (error.server, error.method) == (SERVER, "tools/call")
    assert isinstance(error.__cause__, RpcError)
    assert "the host refused it" in str(error)
    assert "the user rejected it" in str(error)


async def test_a_failing_callback_abandons_the_call_with_its_error_as_the_cause() -> None:
    server = ScriptedServer([needs({"k": SAMPLE}), DONE])
    with pytest.raises(InputRequestFailed) as info:
        await run(server, HostCallbacks(sampling=_crash))
    assert isinstance(info.value.__cause__, KeyError)
    assert "the host's callback failed (KeyError: 'model')" in str(info.value)
    assert len(server.sent) == 1


async def test_an_answer_that_is_not_an_object_abandons_the_call() -> None:
    async def roots(server: str) -> Any:
        await trio.lowlevel.checkpoint()
        return "not roots"

    async def sampling(server: str, params: Any) -> Any:
        await trio.lowlevel.checkpoint()
        return ["not", "an", "object"]

    server = ScriptedServer([needs({"k": SAMPLE}), DONE])
    with pytest.raises(InputRequestFailed, match="gave no object"):
        await run(server, HostCallbacks(list_roots=roots, sampling=sampling))
    assert len(server.sent) == 1


@pytest.mark.parametrize(
    ("request_", "callbacks", "capability", "hint"),
    [
        (SAMPLE, {"sampling": False}, "sampling", "HostCallbacks(sampling=...)"),
        (ROOTS, {"roots": False}, "roots", "HostCallbacks(list_roots=...)"),
        (ELICIT, {"elicitation": False}, "elicitation", "HostCallbacks(elicitation=...)"),
        (URL_ELICIT, {}, "elicitation.url", "add 'url' to HostCallbacks(elicitation_modes=...)"),
        (ELICIT, {"modes": ("url",)}, "elicitation.form", "add 'form'"),
    ],
)
async def test_an_input_request_for_an_undeclared_capability_abandons_the_call(
    request_: dict[str, Any], callbacks: dict[str, Any], capability: str, hint: str
) -> None:
    host = RecordingHost()
    server = ScriptedServer([needs({"k": request_}), DONE])
    with pytest.raises(InputRequestFailed) as info:
        await run(server, host.callbacks(**callbacks))
    error = info.value
    assert error.capability == capability
    assert f"did not declare the {capability} capability" in str(error)
    assert hint in str(error)
    assert error.__cause__ is None
    assert host.asked == []
    assert len(server.sent) == 1


async def test_the_first_request_that_cannot_be_answered_stops_the_round() -> None:
    host = RecordingHost()
    server = ScriptedServer([needs({"first": ROOTS, "second": SAMPLE, "third": ELICIT}), DONE])
    with pytest.raises(InputRequestFailed) as info:
        await run(server, host.callbacks(sampling=False))
    assert info.value.key == "second"
    assert [name for name, _, _ in host.asked] == ["roots"]  # the user was never asked


# --------------------------------------------------------------------------- bad shapes


@pytest.mark.parametrize(
    ("result", "path", "words"),
    [
        (
            needs({"k": {"method": "tasks/get", "params": {}}}),
            '$.result.inputRequests["k"].method',
            "unknown kind",
        ),
        (needs({}), "$.result.inputRequests", "asked for nothing"),
        (
            needs({f"k{n}": ROOTS for n in range(MAX_INPUT_REQUESTS + 1)}),
            "$.result.inputRequests",
            f"at most {MAX_INPUT_REQUESTS} per round",
        ),
    ],
)
async def test_an_input_required_result_the_client_cannot_act_on_fails_that_call(
    result: dict[str, Any], path: str, words: str
) -> None:
    host = RecordingHost()
    server = ScriptedServer([result, DONE])
    with pytest.raises(InvalidMessage) as info:
        await run(server, host)
    assert info.value.path == path
    assert words in str(info.value)
    assert "server 's'" in str(info.value)
    assert host.asked == []
    assert len(server.sent) == 1


async def test_the_most_input_requests_a_round_may_hold_are_answered() -> None:
    server = ScriptedServer([needs({f"k{n}": ROOTS for n in range(MAX_INPUT_REQUESTS)}), DONE])
    await run(server, RecordingHost())
    assert len(server.sent[1]["inputResponses"]) == MAX_INPUT_REQUESTS


@pytest.mark.parametrize(
    "request_",
    [
        {"method": "elicitation/create", "params": {"message": 5, "requestedSchema": {}}},
        {"method": "sampling/createMessage", "params": {"messages": []}},  # no maxTokens
        {"method": "elicitation/create", "params": {"mode": "carrier-pigeon", "message": "x"}},
        {"params": {}},  # no method
        "not an object",
    ],
)
async def test_an_input_request_of_the_wrong_shape_fails_that_call(request_: Any) -> None:
    # The session decodes the answer (decode_result); the loop never sees such a round.
    host = RecordingHost()
    server = ScriptedServer([needs({"k": request_}), DONE])
    with pytest.raises(InvalidMessage) as info:
        await run(server, host)
    assert info.value.path is not None
    assert info.value.path.startswith("$.result.inputRequests")
    assert host.asked == []


async def test_params_the_host_side_refuses_are_an_invalid_answer() -> None:
    async def answer(method: str, params: Mapping[str, Any] | None) -> Mapping[str, Any]:
        await trio.lowlevel.checkpoint()
        cause = InvalidMessage("bad @ $.params.x", path="$.params.x")
        raise InvalidInputParams(f"invalid {method} params: {cause}", code=-32602) from cause

    server = ScriptedServer([needs({"k": SAMPLE}), DONE])
    with pytest.raises(InvalidMessage) as info:
        await with_input_rounds(
            server.send, "tools/call", PARAMS, answer=answer, max_rounds=8, server=SERVER
        )
    assert info.value.path == '$.result.inputRequests["k"].params'
    assert "with invalid params: bad @ $.params.x" in str(info.value)


async def test_a_request_state_that_cannot_be_sent_back_exactly_fails_that_call() -> None:
    # JSON can carry a lone surrogate ("\ud800"); UTF-8 cannot, so it could not be echoed.
    server = ScriptedServer([needs({"k": ROOTS}, state="ok\ud800"), DONE])
    with pytest.raises(InvalidMessage) as info:
        await run(server, RecordingHost())
    assert info.value.path == "$.result.requestState"
    assert "lone surrogate at character 2" in str(info.value)
    assert len(server.sent) == 1


async def test_a_bad_round_fails_its_own_call_alone() -> None:
    bad = ScriptedServer([needs({"k": {"method": "nope"}}), DONE])
    good = ScriptedServer([needs({"k": ROOTS}, state="good"), DONE])
    outcomes: dict[str, Any] = {}

    async def call(name: str, server: ScriptedServer) -> None:
        try:
            outcomes[name] = await run(server, RecordingHost())
        except McpError as exc:
            outcomes[name] = exc

    async with trio.open_nursery() as nursery:
        nursery.start_soon(call, "bad", bad)
        nursery.start_soon(call, "good", good)
    assert isinstance(outcomes["bad"], InvalidMessage)
    assert outcomes["good"].text == "done"


# --------------------------------------------------------------------------- time


async def test_each_request_is_given_the_time_left(autojump_clock: Clock) -> None:
    deadline = trio.current_time() + 10
    host = RecordingHost(delay=4)
    server = ScriptedServer([needs({"k": ELICIT}), DONE], delay=3)
    await run(server, host, deadline=deadline)
    assert server.timeouts == [10, 3]  # 3 s for the first answer, 4 s for the user


async def test_without_a_deadline_no_request_has_a_timeout() -> None:
    server = ScriptedServer([needs({"k": ROOTS}), DONE])
    await run(server, RecordingHost())
    assert server.timeouts == [None, None]


async def test_the_deadline_cancels_a_host_that_answers_too_late(autojump_clock: Clock) -> None:
    begin = trio.current_time()
    host = RecordingHost(delay=60)
    server = ScriptedServer([needs({"k": ELICIT}), DONE], delay=1)
    with pytest.raises(CallTimeout) as info:
        await run(server, host, deadline=begin + 10)
    assert trio.current_time() - begin == 10
    assert host.answered == 0  # the question was taken back
    assert len(server.sent) == 1
    error = info.value
    assert error.timeout == 10
    assert (error.server, error.method) == (SERVER, "tools/call")
    assert "while the host answered its input (input round 1)" in str(error)


async def test_no_retry_is_sent_once_the_time_is_up(autojump_clock: Clock) -> None:
    begin = trio.current_time()
    server = ScriptedServer([needs(state="busy"), DONE], delay=10)
    with pytest.raises(CallTimeout, match="before it was sent again"):
        await run(server, RecordingHost(), deadline=begin + 10)
    assert len(server.sent) == 1


async def test_a_timeout_of_a_request_is_passed_through() -> None:
    async def send(params: Mapping[str, Any], timeout: float | None) -> Any:
        await trio.lowlevel.checkpoint()
        raise CallTimeout("no answer", timeout=1.0, server=SERVER, method="tools/call")

    with pytest.raises(CallTimeout, match="no answer"):
        await with_input_rounds(
            send,
            "tools/call",
            PARAMS,
            answer=functools.partial(answer_input, HostCallbacks(), SERVER),
            max_rounds=8,
            server=SERVER,
        )


# --------------------------------------------------------------------------- one host, two eras


@pytest.mark.parametrize("request_", [ROOTS, SAMPLE, ELICIT, URL_ELICIT])
async def test_one_callback_answers_a_legacy_request_and_a_modern_input_request_alike(
    request_: dict[str, Any],
) -> None:
    host = RecordingHost()
    callbacks = host.callbacks(modes=("form", "url"))
    outbox = Outbox()
    async with trio.open_nursery() as nursery:
        dispatcher = await start(nursery, outbox, callbacks)
        await dispatcher.inbox.send(
            Request(id=1, method=request_["method"], params=request_.get("params"))
        )
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    legacy = results(outbox.frames)[1]

    server = ScriptedServer([needs({"k": request_}), DONE])
    await run(server, callbacks)
    assert server.sent[1]["inputResponses"] == {"k": legacy}
    (legacy_question, modern_question) = host.asked
    assert legacy_question == modern_question  # the same callback, the same decoded params


@pytest.mark.parametrize("request_", [ROOTS, SAMPLE, ELICIT])
async def test_an_undeclared_capability_is_refused_in_both_eras(request_: dict[str, Any]) -> None:
    outbox = Outbox()
    async with trio.open_nursery() as nursery:
        dispatcher = await start(nursery, outbox, HostCallbacks())
        await dispatcher.inbox.send(
            Request(id=1, method=request_["method"], params=request_.get("params"))
        )
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    assert errors(outbox.frames) == [(1, -32601)]

    server = ScriptedServer([needs({"k": request_}), DONE])
    with pytest.raises(InputRequestFailed) as info:
        await run(server, HostCallbacks())
    assert info.value.capability == request_["method"].partition("/")[0]


# --------------------------------------------------------------------------- hypothesis


@given(
    state=st.text(max_size=300)
    | st.text(alphabet=st.sampled_from(' \t\r\n\x00\x7f\u00a0\u2028\ufeff\u200b"\\/é😀'))
)
def test_any_request_state_is_echoed_exactly(state: str) -> None:
    async def scenario() -> ScriptedServer:
        server = ScriptedServer([needs({"k": ROOTS}, state=state), needs(state=state), DONE])
        await run(server, RecordingHost())
        return server

    server = trio.run(scenario)
    assert [p.get("requestState") for p in server.sent] == [None, state, state]
    assert "inputResponses" not in server.sent[2]


# --------------------------------------------------------------------------- conformance


@attrs.define(eq=False)
class MrtrConformanceServer:
    """What the official suite's ``sep-2322-client-request-state`` mock server does with
    ``tools/call``, on JSON-RPC frames, with its checks (id -> ``"SUCCESS"`` or the failure)."""

    checks: dict[str, str] = attrs.Factory(dict)
    original_ids: dict[str, Any] = attrs.Factory(dict)
    sent_states: dict[str, str] = attrs.Factory(dict)

    def handle(self, frame: bytes) -> bytes:
        request = parse_message(frame)
        assert isinstance(request, Request)
        assert request.method == "tools/call"
        params = dict(request.params or {})
        name = params["name"]
        responses = params.get("inputResponses")
        state = params.get("requestState")
        result = getattr(self, name)(request.id, responses, state)
        return serialize(Response(id=request.id, result=result))

    def _check(self, check: str, problems: list[str]) -> None:
        self.checks[check] = "; ".join(problems) if problems else "SUCCESS"

    def _new_state(self, tool: str, request_id: Any) -> str:
        # spaces after the separators: a client that re-serializes it would change it
        state = json.dumps({"nonce": str(uuid.uuid4()), "originalId": request_id, "n": "é 😀"})
        self.sent_states[tool] = state
        return state

    def test_mrtr_echo_state(self, request_id: Any, responses: Any, state: Any) -> Any:
        if not responses:
            self.original_ids["echo"] = request_id
            return needs({"confirm": CONFIRM}, state=self._new_state("echo", request_id))
        sent = self.sent_states["echo"]
        self._check(
            "sep-2322-client-request-state-echoed",
            [] if state == sent else [f"requestState {state!r} is not {sent!r}"],
        )
        self._check(
            "sep-2322-client-jsonrpc-id-different",
            [] if request_id != self.original_ids["echo"] else ["the retry reused the id"],
        )
        return {"resultType": "complete", "content": [{"type": "text", "text": "echo-state-ok"}]}

    def test_mrtr_no_state(self, request_id: Any, responses: Any, state: Any) -> Any:
        if not responses:
            return needs({"confirm": CONFIRM})
        self._check(
            "sep-2322-client-no-state-omitted",
            [] if state is None else [f"the retry has requestState {state!r}"],
        )
        return {"resultType": "complete", "content": [{"type": "text", "text": "no-state-ok"}]}

    def test_mrtr_state_only(self, request_id: Any, responses: Any, state: Any) -> Any:
        if "state_only" not in self.original_ids:
            self.original_ids["state_only"] = request_id
            return needs(state=self._new_state("state_only", request_id))
        sent = self.sent_states["state_only"]
        self._check(
            "sep-2322-client-request-state-only-echoed",
            [] if state == sent else [f"requestState {state!r} is not {sent!r}"],
        )
        return {"resultType": "complete", "content": [{"type": "text", "text": "state-only-ok"}]}

    def test_mrtr_unrelated(self, request_id: Any, responses: Any, state: Any) -> Any:
        problems = []
        if responses is not None:
            problems.append("inputResponses from another call")
        if state is not None:
            problems.append("requestState from another call")
        self._check("sep-2322-client-parallel-isolation", problems)
        return {"resultType": "complete", "content": [{"type": "text", "text": "unrelated-ok"}]}

    def test_mrtr_no_result_type(self, request_id: Any, responses: Any, state: Any) -> Any:
        if responses:
            self._check("sep-2322-default-result-type-complete", ["retried a complete result"])
            return {"resultType": "complete", "content": [{"type": "text", "text": "unexpected"}]}
        self._check("sep-2322-default-result-type-complete", [])
        return {"content": [{"type": "text", "text": "no-result-type-test-ok"}]}


CONFIRM: dict[str, Any] = {
    "method": "elicitation/create",
    "params": {
        "message": "Please confirm to continue",
        "requestedSchema": {
            "type": "object",
            "properties": {"confirmed": {"type": "boolean", "description": "Confirm?"}},
        },
    },
}


async def test_the_conformance_scenario_sep_2322_client_request_state() -> None:
    """The suite's MRTR scenario, with the conformance client's own callbacks (it accepts a form
    with its defaults): every check passes, including a call made between two rounds of
    another one."""
    mock = MrtrConformanceServer()
    ids = itertools.count(1)  # one session: its ids are never reused

    async def send(params: Mapping[str, Any], timeout: float | None) -> Any:
        await trio.lowlevel.checkpoint()
        frame = serialize(Request(id=next(ids), method="tools/call", params=params))
        answer = parse_message(mock.handle(frame))
        assert isinstance(answer, Response)
        return decode_result("tools/call", answer.result)

    async def call(tool: str, *, between: str | None = None) -> str:
        async def answer(method: str, params: Mapping[str, Any] | None) -> Mapping[str, Any]:
            if between is not None:  # another call, while this one waits for its input
                assert await call(between) == "unrelated-ok"
            return await answer_input(CONFORMANCE_CALLBACKS, "conformance", method, params)

        result = await with_input_rounds(
            send,
            "tools/call",
            {"name": tool, "arguments": {}},
            answer=answer,
            max_rounds=RuntimeConfig().max_input_rounds,
            server="conformance",
        )
        assert isinstance(result, CallToolResult)
        return result.text

    assert await call("test_mrtr_echo_state", between="test_mrtr_unrelated") == "echo-state-ok"
    assert await call("test_mrtr_no_state") == "no-state-ok"
    assert await call("test_mrtr_state_only") == "state-only-ok"
    assert await call("test_mrtr_no_result_type") == "no-result-type-test-ok"
    assert mock.checks == {
        "sep-2322-client-parallel-isolation": "SUCCESS",
        "sep-2322-client-request-state-echoed": "SUCCESS",
        "sep-2322-client-jsonrpc-id-different": "SUCCESS",
        "sep-2322-client-no-state-omitted": "SUCCESS",
        "sep-2322-client-request-state-only-echoed": "SUCCESS",
        "sep-2322-default-result-type-complete": "SUCCESS",
    }
