"""The WebSocket receive path hands a hostile server's messages up byte for byte, without
reading them: deep nesting, truncated answers and binary garbage become frames that
``parse_message`` refuses (and whose answer ids ``salvage_response_ids`` reads), and the
connection goes on. Real sockets on 127.0.0.1, under a ``trio.fail_after`` guard.

The server is a bare trio-websocket handler, not :func:`accept_websocket_transport`: that one
sends text frames only (and refuses what is not UTF-8), and this test needs a binary frame."""

from __future__ import annotations

import contextlib

import trio
import trio_websocket

from tests.protocol.hostile_json import nest
from tests.transports.test_websocket import GUARD, serve_ws
from trio_mcp.protocol import InvalidMessage, parse_message, salvage_response_ids
from trio_mcp.transports._websocket import WebSocketParameters, open_websocket_transport

HOSTILE: list[str | bytes] = [
    nest("arrays", 100_000),
    '{"jsonrpc":"2.0","id":1,"result":' + nest("objects", 100_000) + "}",
    '{"jsonrpc":"2.0","id":2,"result":' + nest("mixed", 990) + "}",
    '{"jsonrpc":"2.0","id":3,"res',
    '{"jsonrpc":"2.0","id":4,"result":{}}{"jsonrp',
    b'\xff{"jsonrpc":"2.0","id":5,"result":{}}',
    '{"jsonrpc":"2.0","id":6,"result":{"t":"\\ud800"},"x":NaN}',
]
SALVAGED = [(), (1,), (2,), (3,), (4,), (), (6,)]


async def test_hostile_messages_arrive_whole_and_the_connection_goes_on(
    nursery: trio.Nursery,
) -> None:
    async def handler(request: trio_websocket.WebSocketRequest) -> None:
        connection = await request.accept(subprotocol="mcp")
        for message in HOSTILE:
            await connection.send_message(message)
        await connection.send_message('{"jsonrpc":"2.0","id":7,"result":{}}')
        # Stay until the client closes (its close handshake ends the wait): the server must
        # still be there while the client reads, and a client's close is no failure here.
        with contextlib.suppress(trio_websocket.ConnectionClosed):
            await connection.get_message()

    port = await serve_ws(nursery, handler)
    params = WebSocketParameters(url=f"ws://127.0.0.1:{port}/", max_frame_bytes=1 << 20)
    with trio.fail_after(GUARD):
        async with open_websocket_transport(params) as transport:
            for message, salvaged in zip(HOSTILE, SALVAGED, strict=True):
                frame = await transport.receive()
                expected = message if isinstance(message, bytes) else message.encode()
                assert frame == expected
                refused = False
                try:
                    parse_message(frame)
                except InvalidMessage:
                    refused = True
                assert refused
                assert salvage_response_ids(frame) == salvaged
            assert parse_message(await transport.receive()) is not None
            assert transport.statistics().frames_received == len(HOSTILE) + 1
