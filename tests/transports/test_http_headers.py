"""One frame's own HTTP headers on Streamable HTTP (``HeaderTransport.send_with_headers``): the
2026-07-28 request headers arrive on that frame's POST and on no other, are checked before
anything is queued, replace configured headers of the same name, go again with a re-sent POST,
and are logged redacted like every header. In-process HTTP servers on 127.0.0.1, real sockets,
every wait bounded."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from tests.protocol.test_headers import CUSTOM_ARGUMENTS, CUSTOM_TOOL
from tests.transports.http_fake import HttpRequest, Reply, serve_http
from tests.transports.test_http import (
    BOUND,
    SECRET,
    call,
    fake_server,
    notification,
    opened,
    params,
    take_json,
)
from trio_mcp.protocol import (
    LocalProtocolError,
    McpTransportConfigError,
    TransportClosed,
    decode_header_value,
    encode_header_value,
    param_headers,
    request_headers,
)
from trio_mcp.transports import HeaderTransport, memory_transport_pair
from trio_mcp.transports.http._http_base import (
    HttpParameters,
    checked_request_headers,
    describe_outgoing,
)

VERSION = "2026-07-28"
OWN = {"Mcp-Method": "tools/call", "Mcp-Name": "echo", "Mcp-Param-Region": "eu-west1"}


def posted(requests: list[HttpRequest]) -> dict[Any, HttpRequest]:
    """The POSTs the server received, by the id of their message (a notification by method)."""
    by_key: dict[Any, HttpRequest] = {}
    for r in requests:
        if r.method == "POST":
            message = r.json()
            by_key[message.get("id", message.get("method"))] = r
    return by_key


async def test_the_headers_go_on_that_frames_post_and_no_other() -> None:
    async with (
        fake_server(sessions=False, json_response=True) as (fake, server),
        opened(params(server)) as (t, inbox),
    ):
        assert isinstance(t, HeaderTransport)
        t.send_with_headers_nowait(call(1, "echo", text="a"), 1, OWN)
        await t.send(call(2, "echo", text="b"), 2)
        await t.send_with_headers(
            notification("notifications/roots/list_changed"),
            None,
            {"Mcp-Method": "notifications/roots/list_changed"},
        )
        await t.send(notification("notifications/initialized"))
        answers = {(await take_json(inbox))["id"] for _ in range(2)}
        assert answers == {1, 2}
        with trio.fail_after(BOUND):
            await fake.wait_until(lambda: len(fake.messages) == 4)
    by_key = posted(server.requests)
    first = by_key[1]
    assert (first.header("mcp-method"), first.header("mcp-name")) == ("tools/call", "echo")
    assert first.header("mcp-param-region") == "eu-west1"
    assert first.header("accept") == "application/json, text/event-stream"
    assert first.header("content-type") == "application/json"
    assert by_key["notifications/roots/list_changed"].header("mcp-method") == (
        "notifications/roots/list_changed"
    )
    for plain in (by_key[2], by_key["notifications/initialized"]):
        assert not any(name.startswith("mcp-") for name in plain.headers), plain.headers


def test_a_frame_sent_without_headers_carries_none() -> None:
    """The legacy path allocates nothing for them."""
    assert describe_outgoing(call(1, "echo")).headers is None


async def test_the_headers_go_again_with_a_post_the_server_asked_to_repeat() -> None:
    async def handler(request: HttpRequest, reply: Reply) -> None:
        if len(server.requests) == 1:
            await reply.send(429, b"slow down", headers=[("retry-after", "0")])
            return
        answer = {"jsonrpc": "2.0", "id": request.json()["id"], "result": {"content": []}}
        await reply.json(answer)

    async with serve_http(handler) as server, opened(params(server)) as (t, inbox):
        t.send_with_headers_nowait(call(7, "echo"), 7, OWN)
        assert (await take_json(inbox))["id"] == 7
    first, second = server.requests
    for r in (first, second):
        assert (r.header("mcp-name"), r.header("mcp-param-region")) == ("echo", "eu-west1")


async def test_a_frames_headers_replace_configured_ones_of_the_same_name() -> None:
    async with (
        fake_server(sessions=False, json_response=True) as (_, server),
        opened(params(server, headers={"mcp-name": "configured", "X-Team": "blue"})) as (t, inbox),
    ):
        t.send_with_headers_nowait(call(1, "echo"), 1, {"Mcp-Name": "echo"})
        await take_json(inbox)
        await t.send(call(2, "echo"), 2)
        await take_json(inbox)
    by_key = posted(server.requests)
    assert by_key[1].header("mcp-name") == "echo"  # once: the fake joins repeated headers
    assert by_key[1].header("x-team") == "blue"
    assert by_key[2].header("mcp-name") == "configured"


@pytest.mark.parametrize(
    ("headers", "said"),
    [
        ({"Mcp-Name": "a\r\nX-Evil: 1"}, "no CR or LF"),
        ({"Mcp-Name": "a\nb"}, "no CR or LF"),
        ({"Mcp-Name": "caf\u00e9"}, "printable ASCII"),
        ({"Mcp-Name": " padded"}, "without whitespace at either end"),
        ({"Mcp-Name": "x\t"}, "without whitespace at either end"),
        ({"Mcp-Name": "x\x00"}, "printable ASCII"),
        ({"Mcp-Name": 3}, "printable ASCII"),
        ({"Bad Name": "x"}, "HTTP token"),
        ({"": "x"}, "HTTP token"),
        ({"X-\u00e9": "x"}, "HTTP token"),
        ({"Content-Type": "text/plain"}, "sets it itself"),
        ({"accept": "*/*"}, "sets it itself"),
        ({"Mcp-Session-Id": "forged"}, "sets it itself"),
        ({"Last-Event-ID": "1"}, "sets it itself"),
        ({"Mcp-Name": "a", "mcp-name": "b"}, "given twice"),
    ],
)
async def test_a_header_that_cannot_be_sent_fails_that_send_alone(
    headers: dict[str, Any], said: str
) -> None:
    async with (
        fake_server(sessions=False, json_response=True) as (_, server),
        opened(params(server)) as (t, inbox),
    ):
        with pytest.raises(LocalProtocolError, match=said) as caught:
            t.send_with_headers_nowait(call(1, "echo"), 1, headers)
        assert "X-Evil: 1" not in str(caught.value)  # a value is never quoted
        with pytest.raises(LocalProtocolError, match=said):
            await t.send_with_headers(call(1, "echo"), 1, headers)
        # Nothing was queued, and the transport goes on.
        await t.send(call(2, "echo", text="after"), 2)
        assert (await take_json(inbox))["id"] == 2
    assert [r.json()["id"] for r in server.requests] == [2]


async def test_secret_looking_headers_are_never_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="trio_mcp")
    own = {**OWN, "Mcp-Param-ApiKey": SECRET, "Mcp-Param-SessionToken": SECRET}
    async with (
        fake_server(sessions=False, json_response=True) as (_, server),
        opened(params(server)) as (t, inbox),
    ):
        t.send_with_headers_nowait(call(1, "echo"), 1, own)
        await take_json(inbox)
    [r] = server.requests
    assert r.header("mcp-param-apikey") == SECRET  # sent, as the tool asked
    assert caplog.records, "debug logging was on"
    assert SECRET not in caplog.text
    assert "eu-west1" in caplog.text  # mirrored arguments are not secrets by default


async def test_after_close_a_send_with_headers_says_the_transport_is_closed() -> None:
    async with fake_server(sessions=False, json_response=True) as (_, server):
        async with opened(params(server)) as (t, _inbox):
            pass
        with pytest.raises(TransportClosed):
            t.send_with_headers_nowait(call(1, "echo"), 1, OWN)
        with pytest.raises(TransportClosed):
            await t.send_with_headers(call(1, "echo"), 1, OWN)


def test_only_the_transports_that_can_are_header_transports() -> None:
    client, _ = memory_transport_pair()
    assert not isinstance(client, HeaderTransport)


async def test_the_mirrored_arguments_arrive_as_the_server_decodes_them() -> None:
    """request_headers and the transport together: what a modern session sends for the
    conformance suite's test_custom_headers tool (an empty value too)."""
    mirrored = param_headers(CUSTOM_TOOL)
    assert not isinstance(mirrored, str)
    body = {"name": "test_custom_headers", "arguments": CUSTOM_ARGUMENTS}
    own = request_headers("tools/call", body, version=VERSION, param_headers=mirrored)
    frame = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": body})

    async def tool(_: Any) -> Any:
        return {"content": []}

    async with (
        fake_server(sessions=False, json_response=True, tools={"test_custom_headers": tool}) as (
            _,
            server,
        ),
        opened(params(server)) as (t, inbox),
    ):
        t.send_with_headers_nowait(frame.encode(), 1, own)
        assert "result" in await take_json(inbox)
    [r] = server.requests
    assert r.header("mcp-protocol-version") == VERSION
    assert r.header("mcp-param-emptyval") == ""
    as_text = {True: "true", False: "false"}
    for header in mirrored:
        value = CUSTOM_ARGUMENTS[header.path[0]]
        expected = as_text[value] if isinstance(value, bool) else str(value)
        raw = r.header(header.header)
        assert raw is not None, header.header
        assert decode_header_value(raw) == expected, header.header


@given(st.text())
def test_every_encoded_value_can_be_sent(value: str) -> None:
    encoded = encode_header_value(value)
    assert encoded is not None
    assert checked_request_headers({"Mcp-Param-X": encoded}) == (("Mcp-Param-X", encoded),)


@given(st.text(), st.sampled_from(["\r", "\n", "\r\n"]), st.text())
def test_no_value_with_cr_or_lf_can_be_sent(before: str, cut: str, after: str) -> None:
    with pytest.raises(LocalProtocolError):
        checked_request_headers({"Mcp-Name": before + cut + after})


@pytest.mark.parametrize("name", ["X-Team\n", "X-Team\r\n", "X Team", ""])
def test_a_configured_header_name_is_a_whole_http_token(name: str) -> None:
    with pytest.raises(McpTransportConfigError, match="a header name must be an HTTP token"):
        HttpParameters(url="http://127.0.0.1/mcp", headers={name: "a"})
