"""The fake MCP server, driven with raw JSON-RPC over the memory transport (not the runtime),
and once as a real stdio subprocess."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from trio_mcp.actors.config._config import ServerConfig, TransportKind
from trio_mcp.actors.testing._fakes import (
    FakePrompt,
    FakeResource,
    FakeResourceTemplate,
    FakeServer,
    FakeTool,
    ToolContext,
)
from trio_mcp.protocol._errors import (
    ConfigError,
    ConnectError,
    InvalidParams,
    RpcError,
    TransportClosed,
)
from trio_mcp.protocol._types import CallToolResult, TextContent, ToolAnnotations
from trio_mcp.transports._base import InboxReader, Transport, open_inbox


@attrs.define
class RawClient:
    """A minimal JSON-RPC client for driving the fake by hand."""

    transport: Transport
    #: Where the transport's frames go when it was opened with a sink (else its receive()).
    inbox: InboxReader | None = None
    #: Every message received that was not the answer being waited for.
    other: list[dict[str, Any]] = attrs.Factory(list)
    next_id: int = 1

    async def send(self, message: Mapping[str, Any]) -> None:
        await self.transport.send(json.dumps({"jsonrpc": "2.0", **message}).encode())

    async def start(self, method: str, params: Mapping[str, Any] | None = None) -> int:
        request_id = self.next_id
        self.next_id += 1
        message: dict[str, Any] = {"id": request_id, "method": method}
        if params is not None:
            message["params"] = dict(params)
        await self.send(message)
        return request_id

    async def receive(self) -> dict[str, Any]:
        reader = self.inbox if self.inbox is not None else self.transport
        value: dict[str, Any] = json.loads(await reader.receive())
        return value

    async def answer(self, request_id: int) -> dict[str, Any]:
        """The response to ``request_id``; everything received before it goes to ``other``."""
        while True:
            message = await self.receive()
            if message.get("id") == request_id and "method" not in message:
                return message
            self.other.append(message)

    async def call(self, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The ``result`` of a request; fails the test on an error response."""
        message = await self.answer(await self.start(method, params))
        assert "result" in message, message
        result: dict[str, Any] = message["result"]
        return result

    async def error(self, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The ``error`` of a request; fails the test on a result."""
        message = await self.answer(await self.start(method, params))
        assert "error" in message, message
        error: dict[str, Any] = message["error"]
        return error

    async def initialize(self, version: str = "2025-11-25") -> dict[str, Any]:
        result = await self.call(
            "initialize",
            {
                "protocolVersion": version,
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"},
            },
        )
        await self.send({"method": "notifications/initialized"})
        return result

    async def tool(
        self, name: str, arguments: Mapping[str, Any] | None = None, **meta: Any
    ) -> dict[str, Any]:
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = dict(arguments)
        if meta:
            params["_meta"] = meta
        return await self.call("tools/call", params)


@asynccontextmanager
async def connected(fake: FakeServer, *, initialize: bool = True) -> AsyncIterator[RawClient]:
    async with fake.connect() as transport:
        client = RawClient(transport)
        if initialize:
            await client.initialize()
        yield client


def text_of(result: Mapping[str, Any]) -> str:
    content = result["content"]
    assert len(content) == 1 and content[0]["type"] == "text", result
    text: str = content[0]["text"]
    return text


# --------------------------------------------------------------------------- handshake


@pytest.mark.parametrize(
    ("requested", "answered"),
    [
        ("2024-11-05", "2024-11-05"),
        ("2025-03-26", "2025-03-26"),
        ("2025-06-18", "2025-06-18"),
        ("2025-11-25", "2025-11-25"),
        ("2026-07-28", "2025-11-25"),
        ("1999-01-01", "2025-11-25"),
    ],
)
async def test_initialize_answers_the_clients_legacy_version(requested: str, answered: str) -> None:
    fake = FakeServer(name="demo", version="2.1.0", instructions="be nice")
    async with connected(fake, initialize=False) as client:
        result = await client.initialize(requested)
    assert result == {
        "protocolVersion": answered,
        "capabilities": {"tools": {"listChanged": True}, "logging": {}},
        "serverInfo": {"name": "demo", "version": "2.1.0"},
        "instructions": "be nice",
    }
    assert [method for method, _ in fake.requests] == ["initialize"]
    assert fake.notifications == [("notifications/initialized", None)]


async def test_capabilities_follow_the_catalog_or_the_override() -> None:
    fake = FakeServer(
        resources=[FakeResource("file:///a", "a")],
        prompts=[FakePrompt("p")],
        completions={"x": ["y"]},
    )
    async with connected(fake, initialize=False) as client:
        caps = (await client.initialize())["capabilities"]
    assert caps == {
        "tools": {"listChanged": True},
        "logging": {},
        "resources": {"subscribe": True, "listChanged": True},
        "prompts": {"listChanged": True},
        "completions": {},
    }
    fake = FakeServer(capabilities={"tools": {}})
    async with connected(fake, initialize=False) as client:
        assert (await client.initialize())["capabilities"] == {"tools": {}}


async def test_forced_version_and_initialize_error() -> None:
    fake = FakeServer(initialize_version="2026-07-28")
    async with connected(fake, initialize=False) as client:
        assert (await client.initialize("2025-06-18"))["protocolVersion"] == "2026-07-28"
    fake = FakeServer(initialize_error=(-32603, "not today"))
    async with connected(fake, initialize=False) as client:
        assert await client.error("initialize", {"protocolVersion": "2025-11-25"}) == {
            "code": -32603,
            "message": "not today",
        }


async def test_ping_discover_and_unknown_methods() -> None:
    async with connected(FakeServer()) as client:
        assert await client.call("ping") == {}
        assert await client.error("server/discover") == {
            "code": -32601,
            "message": "Method not found: server/discover",
        }
        assert await client.error("nope/nothing", {}) == {
            "code": -32601,
            "message": "Method not found: nope/nothing",
        }


# --------------------------------------------------------------------------- 2026-07-28

ENVELOPE: dict[str, Any] = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def modern(
    params: Mapping[str, Any] | None = None, meta: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """``params`` with the 2026-07-28 envelope (and ``meta``) in its ``_meta``."""
    return {**(params or {}), "_meta": {**ENVELOPE, **(meta or {})}}


async def test_a_modern_fake_answers_discover_and_checks_every_envelope() -> None:
    fake = FakeServer(
        name="m", version="2.1", era="modern", instructions="hi", tools=[FakeTool("t")]
    )
    async with connected(fake, initialize=False) as client:
        discovered = await client.call("server/discover", modern())
        assert discovered == {
            "resultType": "complete",
            "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {"listChanged": True}, "logging": {}},
            "instructions": "hi",
            "ttlMs": 0,
            "cacheScope": "private",
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "m", "version": "2.1"}},
        }
        listed = await client.call("tools/list", modern())
        assert listed["resultType"] == "complete"
        assert [t["name"] for t in listed["tools"]] == ["t"]
        called = await client.call("tools/call", modern({"name": "t", "arguments": {"a": 1}}))
        assert called == {
            "content": [{"type": "text", "text": '{"a":1}'}],
            "resultType": "complete",
        }
        # a request without the envelope (or part of it)
        missing = await client.error("tools/list")
        assert missing["code"] == -32602
        assert "protocolVersion" in missing["message"]
        partial = await client.error(
            "tools/list", {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}
        )
        assert partial["code"] == -32602 and "clientCapabilities" in partial["message"]
        # a version it does not speak
        other = {"io.modelcontextprotocol/protocolVersion": "2099-01-01"}
        refused = await client.error("tools/list", modern(meta=other))
        assert refused["code"] == -32022
        assert refused["data"] == {"supported": ["2026-07-28"], "requested": "2099-01-01"}
        # methods 2026-07-28 removed, and initialize
        assert (await client.error("ping", modern()))["code"] == -32601
        assert (await client.error("logging/setLevel", modern({"level": "info"})))["code"] == -32601
        init = await client.error("initialize", {"protocolVersion": "2025-11-25"})
        assert init["code"] == -32022
        assert init["data"] == {"supported": ["2026-07-28"], "requested": "2025-11-25"}


async def test_a_modern_fake_refuses_initialize_first_and_a_dual_one_speaks_either() -> None:
    async with connected(FakeServer(era="modern"), initialize=False) as client:
        error = await client.error("initialize", {"protocolVersion": "2025-11-25"})
        assert error["code"] == -32022
    dual = FakeServer(era="dual")
    async with connected(dual) as legacy:  # initialize first: the handshake revisions
        assert await legacy.call("ping") == {}
        assert "resultType" not in await legacy.call("tools/list")
    async with connected(dual, initialize=False) as client:  # anything else first: modern
        assert (await client.call("server/discover", modern()))["resultType"] == "complete"
        assert (await client.error("initialize", {"protocolVersion": "2025-11-25"}))[
            "code"
        ] == -32022


async def test_a_modern_fake_refuses_the_first_n_requests_with_32022() -> None:
    fake = FakeServer(era="modern", unsupported_version_answers=2)
    async with connected(fake, initialize=False) as client:
        for _ in range(2):
            error = await client.error("server/discover", modern())
            assert error["code"] == -32022
            assert error["data"]["requested"] == "2026-07-28"
        assert (await client.call("server/discover", modern()))["resultType"] == "complete"
    assert fake.unsupported_version_answers == 0


async def test_a_modern_fake_serves_subscriptions_listen() -> None:
    sub = "io.modelcontextprotocol/subscriptionId"
    fake = FakeServer(
        era="modern",
        resources=[FakeResource("doc://a", "a"), FakeResource("doc://b", "b")],
        listen_ignores={"doc://b"},
    )
    async with connected(fake, initialize=False) as client:
        asked = {"toolsListChanged": True, "resourceSubscriptions": ["doc://a", "doc://b"]}
        listen = await client.start("subscriptions/listen", modern({"notifications": asked}))
        acknowledged = await client.receive()
        assert acknowledged == {
            "jsonrpc": "2.0",
            "method": "notifications/subscriptions/acknowledged",
            "params": {
                "_meta": {sub: listen},
                "notifications": {"toolsListChanged": True, "resourceSubscriptions": ["doc://a"]},
            },
        }
        (seen,) = fake.listens
        assert (seen.connection, seen.request_id, seen.notifications) == (1, listen, asked)
        assert fake.open_listens == {1: (listen,)}
        assert fake.subscriptions == {"doc://a"}
        # list changes and resource updates go on the listens that honour them, tagged
        assert await fake.emit_list_changed("tools") == 1
        assert await fake.emit_list_changed("prompts") == 0
        assert await fake.notify_resource_updated("doc://a") == 1
        assert await fake.notify_resource_updated("doc://b") == 0
        assert [await client.receive() for _ in range(2)] == [
            {
                "jsonrpc": "2.0",
                "method": "notifications/tools/list_changed",
                "params": {"_meta": {sub: listen}},
            },
            {
                "jsonrpc": "2.0",
                "method": "notifications/resources/updated",
                "params": {"uri": "doc://a", "_meta": {sub: listen}},
            },
        ]
        # the graceful end: its answer
        assert await fake.end_listens() == 1
        assert (await client.answer(listen))["result"] == {
            "_meta": {sub: listen},
            "resultType": "complete",
        }
        assert fake.open_listens == {}
        # the other end: notifications/cancelled naming it, and no answer
        second = await client.start("subscriptions/listen", modern({"notifications": asked}))
        await client.receive()  # its acknowledgement
        assert await fake.end_listens("cancelled") == 1
        assert await client.receive() == {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": second, "reason": "the server ended the subscription"},
        }
        # a client's cancel ends it too
        third = await client.start("subscriptions/listen", modern({"notifications": asked}))
        await client.receive()
        await client.send({"method": "notifications/cancelled", "params": {"requestId": third}})
        await trio.testing.wait_all_tasks_blocked()
        assert fake.open_listens == {}
        assert (await client.error("subscriptions/listen", modern()))["code"] == -32602
    with pytest.raises(ValueError, match="how must be"):
        await fake.end_listens("later")


async def test_a_modern_fake_logs_only_at_the_requests_own_level_and_sends_no_requests() -> None:
    async def talk(arguments: dict[str, Any], ctx: ToolContext) -> str:
        sent = [await ctx.log("info", "i"), await ctx.log("error", "e")]
        try:
            await ctx.request("roots/list")
        except RuntimeError as exc:
            return f"{sent} {exc}"
        return "sent a request"

    fake = FakeServer(era="modern", tools=[FakeTool("talk", handler=talk)])
    async with connected(fake, initialize=False) as client:
        quiet = await client.call("tools/call", modern({"name": "talk"}))
        assert text_of(quiet).startswith("[False, False] fake server 'fake' cannot send")
        loud = await client.call(
            "tools/call",
            modern({"name": "talk"}, {"io.modelcontextprotocol/logLevel": "warning"}),
        )
        assert text_of(loud).startswith("[False, True]")
        assert [m["params"]["data"] for m in client.other] == ["e"]


async def test_results_map_answers_a_method_as_it_is() -> None:
    asking = {"resultType": "input_required", "requestState": "x"}
    fake = FakeServer(era="modern", results={"resources/read": asking})
    async with connected(fake, initialize=False) as client:
        assert await client.call("resources/read", modern({"uri": "a://b"})) == asking


async def test_errors_map_answers_a_method_with_an_error() -> None:
    fake = FakeServer(errors={"tools/list": (-32603, "listing is broken")})
    async with connected(fake) as client:
        assert await client.error("tools/list") == {"code": -32603, "message": "listing is broken"}


async def test_invalid_frames_are_answered_and_recorded() -> None:
    fake = FakeServer()
    async with connected(fake) as client:
        await client.transport.send(b"{not json")
        assert await client.receive() == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32700, "message": "Parse error: the message is not JSON"},
        }
        await client.transport.send(b'{"jsonrpc":"2.0","id":5}')
        answer = await client.receive()
        assert answer["id"] == 5
        assert answer["error"]["code"] == -32600
        assert answer["error"]["message"].startswith("Invalid Request: invalid JSON-RPC message")
        assert await client.call("ping") == {}  # the connection goes on
    assert fake.invalid_frames == [b"{not json", b'{"jsonrpc":"2.0","id":5}']


async def test_a_request_id_already_in_flight_is_refused(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeServer(respond_after={"ping": 10})
    async with connected(fake) as client:
        await client.send({"id": 77, "method": "ping"})
        await client.send({"id": 77, "method": "ping"})
        assert await client.receive() == {
            "jsonrpc": "2.0",
            "id": 77,
            "error": {"code": -32600, "message": "request id 77 is already in flight"},
        }
        assert await client.receive() == {"jsonrpc": "2.0", "id": 77, "result": {}}
        assert trio.current_time() == 10


# --------------------------------------------------------------------------- tools/list


def numbered_tools(count: int) -> list[FakeTool]:
    return [FakeTool(f"t{i}") for i in range(count)]


async def test_tools_list_lists_fake_tools_and_raw_entries_verbatim() -> None:
    raw = {"name": "broken", "inputSchema": "not an object", "x-extra": [1]}
    fake = FakeServer(
        tools=[
            FakeTool(
                "search",
                "Search things",
                {"type": "object", "properties": {"q": {"type": "string"}}},
                annotations=ToolAnnotations(read_only_hint=True),
                title="Search",
                output_schema={"type": "object"},
            ),
            raw,
        ]
    )
    async with connected(fake) as client:
        result = await client.call("tools/list")
    assert result == {
        "tools": [
            {
                "name": "search",
                "title": "Search",
                "description": "Search things",
                "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
                "outputSchema": {"type": "object"},
                "annotations": {"readOnlyHint": True},
            },
            raw,
        ]
    }


async def test_tools_list_pages() -> None:
    fake = FakeServer(tools=numbered_tools(5), page_size=2)
    names: list[list[str]] = []
    cursors: list[str] = []
    async with connected(fake) as client:
        params: dict[str, Any] | None = None
        while True:
            page = await client.call("tools/list", params)
            names.append([tool["name"] for tool in page["tools"]])
            if "nextCursor" not in page:
                break
            cursors.append(page["nextCursor"])
            params = {"cursor": page["nextCursor"]}
        assert (await client.error("tools/list", {"cursor": "garbage"}))["code"] == -32602
    assert names == [["t0", "t1"], ["t2", "t3"], ["t4"]]
    assert len(set(cursors)) == 2
    assert [p for m, p in fake.requests if m == "tools/list"][1:3] == [
        {"cursor": cursors[0]},
        {"cursor": cursors[1]},
    ]


async def test_cursor_cycle_points_the_last_page_back_to_the_first() -> None:
    fake = FakeServer(tools=numbered_tools(3), page_size=2, cursor_cycle=True)
    async with connected(fake) as client:
        first = await client.call("tools/list")
        second = await client.call("tools/list", {"cursor": first["nextCursor"]})
        again = await client.call("tools/list", {"cursor": second["nextCursor"]})
    assert [t["name"] for t in second["tools"]] == ["t2"]
    assert again == first


async def test_cursor_cycle_without_pages_loops_on_one_page() -> None:
    fake = FakeServer(tools=numbered_tools(1), cursor_cycle=True)
    async with connected(fake) as client:
        first = await client.call("tools/list")
        again = await client.call("tools/list", {"cursor": first["nextCursor"]})
    assert again == first


async def test_set_tools_and_emit_list_changed_reach_every_connection() -> None:
    fake = FakeServer(tools=numbered_tools(1))
    async with connected(fake) as one, connected(fake) as two:
        assert fake.connections == 2
        fake.set_tools([FakeTool("fresh")])
        assert await fake.emit_list_changed() == 2
        assert await fake.emit_list_changed("prompts") == 2
        for client in (one, two):
            assert await client.receive() == {
                "jsonrpc": "2.0",
                "method": "notifications/tools/list_changed",
            }
            assert (await client.receive())["method"] == "notifications/prompts/list_changed"
            assert [t["name"] for t in (await client.call("tools/list"))["tools"]] == ["fresh"]
    with pytest.raises(ValueError, match="kind must be one of tools, resources, prompts"):
        await fake.emit_list_changed("skills")


# --------------------------------------------------------------------------- tools/call


async def test_tool_results_from_handlers_and_canned_results() -> None:
    async def async_handler(arguments: dict[str, Any], ctx: ToolContext) -> CallToolResult:
        return CallToolResult(content=(TextContent(text=f"hi {arguments['who']}"),), is_error=False)

    fake = FakeServer(
        tools=[
            FakeTool("sync", handler=lambda args, ctx: f"{ctx.tool}:{args['n'] * 2}"),
            FakeTool("async", handler=async_handler),
            FakeTool("canned", result={"content": [], "structuredContent": {"ok": True}}),
            FakeTool("echo"),
            {"name": "raw-echo", "inputSchema": {"type": "object"}},
        ]
    )
    async with connected(fake) as client:
        assert text_of(await client.tool("sync", {"n": 21})) == "sync:42"
        assert await client.tool("async", {"who": "you"}) == {
            "content": [{"type": "text", "text": "hi you"}],
            "isError": False,
        }
        assert await client.tool("canned") == {"content": [], "structuredContent": {"ok": True}}
        assert text_of(await client.tool("echo", {"b": 1, "a": [True]})) == '{"a":[true],"b":1}'
        assert text_of(await client.tool("raw-echo")) == "{}"
        assert await client.error("tools/call", {"name": "missing"}) == {
            "code": -32602,
            "message": "Unknown tool: missing",
        }
        assert (await client.error("tools/call", {"arguments": {}}))["code"] == -32602


async def test_handler_failures() -> None:
    def raises_value_error(arguments: dict[str, Any], ctx: ToolContext) -> str:
        raise ValueError("bad input")

    def raises_rpc_error(arguments: dict[str, Any], ctx: ToolContext) -> str:
        raise RpcError.from_error(-32042, "needs a URL", {"elicitations": []})

    fake = FakeServer(
        tools=[
            FakeTool("value", handler=raises_value_error),
            FakeTool("rpc", handler=raises_rpc_error),
            FakeTool("wrong", handler=lambda args, ctx: 42),  # type: ignore[arg-type,return-value]
        ]
    )
    async with connected(fake) as client:
        assert await client.tool("value") == {
            "content": [{"type": "text", "text": "ValueError: bad input"}],
            "isError": True,
        }
        assert await client.error("tools/call", {"name": "rpc"}) == {
            "code": -32042,
            "message": "needs a URL",
            "data": {"elicitations": []},
        }
        error = await client.error("tools/call", {"name": "wrong"})
        assert error == {
            "code": -32603,
            "message": "the fake tool's handler returned int; return a CallToolResult, a result "
            "dict or a str",
        }


async def test_progress_and_log_notifications_come_before_the_result() -> None:
    async def handler(arguments: dict[str, Any], ctx: ToolContext) -> str:
        sent = [await ctx.progress(1, total=2), await ctx.progress(2, total=2, message="done")]
        sent.append(await ctx.log("info", {"step": "end"}, logger="fake"))
        return f"sent {sent}"

    fake = FakeServer(tools=[FakeTool("work", handler=handler)])
    async with connected(fake) as client:
        result = await client.tool("work", progressToken="tok-1")
        assert text_of(result) == "sent [True, True, True]"
        assert client.other == [
            {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progressToken": "tok-1", "progress": 1, "total": 2},
            },
            {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progressToken": "tok-1", "progress": 2, "total": 2, "message": "done"},
            },
            {
                "jsonrpc": "2.0",
                "method": "notifications/message",
                "params": {"level": "info", "data": {"step": "end"}, "logger": "fake"},
            },
        ]
        client.other.clear()
        # Without a progress token nothing is sent; below the level set, no log either.
        assert await client.call("logging/setLevel", {"level": "warning"}) == {}
        assert text_of(await client.tool("work")) == "sent [False, False, False]"
        assert client.other == []
        assert (await client.error("logging/setLevel", {"level": "loud"}))["code"] == -32602
    assert fake.log_levels == ["warning"]


async def test_log_refuses_unknown_levels() -> None:
    async def handler(arguments: dict[str, Any], ctx: ToolContext) -> str:
        with pytest.raises(ValueError, match="unknown log level 'loud'"):
            await ctx.log("loud", "x")
        return "checked"

    async with connected(FakeServer(tools=[FakeTool("t", handler=handler)])) as client:
        assert text_of(await client.tool("t")) == "checked"


async def test_server_to_client_request_round_trip() -> None:
    async def handler(arguments: dict[str, Any], ctx: ToolContext) -> str:
        roots = await ctx.request("roots/list")
        try:
            await ctx.request("sampling/createMessage", {"messages": [], "maxTokens": 5})
        except InvalidParams as exc:
            refusal = f"{exc.code} {exc.args[0]}"
        return f"{[r['uri'] for r in roots['roots']]} / {refusal}"

    fake = FakeServer(tools=[FakeTool("ask", handler=handler)])
    async with connected(fake) as client:
        call_id = await client.start("tools/call", {"name": "ask"})
        roots_request = await client.receive()
        assert roots_request == {"jsonrpc": "2.0", "id": 1, "method": "roots/list"}
        await client.send({"id": 1, "result": {"roots": [{"uri": "file:///w"}]}})
        sampling = await client.receive()
        assert sampling["method"] == "sampling/createMessage"
        assert sampling["params"] == {"messages": [], "maxTokens": 5}
        await client.send({"id": sampling["id"], "error": {"code": -32602, "message": "no model"}})
        assert (
            text_of((await client.answer(call_id))["result"]) == "['file:///w'] / -32602 no model"
        )


async def test_cancellation_reaches_the_handler(autojump_clock: trio.testing.MockClock) -> None:
    seen: list[tuple[bool, float]] = []

    async def handler(arguments: dict[str, Any], ctx: ToolContext) -> str:
        try:
            await trio.sleep_forever()
        finally:
            seen.append((ctx.cancelled, trio.current_time()))

    fake = FakeServer(tools=[FakeTool("forever", handler=handler)])
    async with connected(fake) as client:
        call_id = await client.start("tools/call", {"name": "forever"})
        await trio.sleep(3)
        await client.send(
            {
                "method": "notifications/cancelled",
                "params": {"requestId": call_id, "reason": "bored"},
            }
        )
        # The cancelled request is never answered: the next message is the ping's answer.
        assert await client.call("ping") == {}
        assert client.other == []
    assert seen == [(True, 3.0)]
    assert fake.cancellations == [call_id]
    assert fake.notifications[-1] == (
        "notifications/cancelled",
        {"requestId": call_id, "reason": "bored"},
    )


async def test_a_cancelled_handler_cancels_its_server_request() -> None:
    async def handler(arguments: dict[str, Any], ctx: ToolContext) -> str:
        await ctx.request("elicitation/create", {"message": "name?", "requestedSchema": {}})
        return "never"  # pragma: no cover

    fake = FakeServer(tools=[FakeTool("ask", handler=handler)])
    async with connected(fake) as client:
        call_id = await client.start("tools/call", {"name": "ask"})
        elicitation = await client.receive()
        assert elicitation["method"] == "elicitation/create"
        await client.send({"method": "notifications/cancelled", "params": {"requestId": call_id}})
        assert await client.receive() == {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": elicitation["id"], "reason": "the tool call was cancelled"},
        }


async def test_crash_after_calls_drops_the_connection_unanswered() -> None:
    fake = FakeServer(tools=[FakeTool("t", result="ok")], crash_after_calls=1)
    async with connected(fake) as client:
        assert text_of(await client.tool("t")) == "ok"
        await client.start("tools/call", {"name": "t"})
        with pytest.raises(TransportClosed, match="the peer closed the connection"):
            await client.receive()
    assert [m for m, _ in fake.requests].count("tools/call") == 2
    async with connected(fake) as client:  # a new connection counts from zero again
        assert text_of(await client.tool("t")) == "ok"


async def test_list_changed_after_calls() -> None:
    fake = FakeServer(tools=[FakeTool("t", result="ok")], list_changed_after_calls=2)
    async with connected(fake) as client:
        await client.tool("t")
        assert client.other == []
        await client.tool("t")
        assert await client.receive() == {
            "jsonrpc": "2.0",
            "method": "notifications/tools/list_changed",
        }


async def test_crash_in_memory_drops_the_connection() -> None:
    async def handler(arguments: dict[str, Any], ctx: ToolContext) -> str:
        await ctx.crash(3)
        return "never"  # pragma: no cover

    fake = FakeServer(tools=[FakeTool("die", handler=handler)])
    async with connected(fake) as client:
        await client.start("tools/call", {"name": "die"})
        with pytest.raises(TransportClosed):
            await client.receive()


# --------------------------------------------------------------------------- scripted timing


async def test_refused_connects_are_recorded_with_exact_times(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeServer(refuse_connects=2)
    factory = fake.transport_factory()
    errors: list[str] = []
    for wait in (0.0, 1.5, 2.5):
        await trio.sleep(wait)
        try:
            sink = open_inbox()  # the factory takes the connection's sink, as a session's
            async with factory(sink) as transport:
                client = RawClient(transport, InboxReader(sink))
                assert (await client.initialize())["serverInfo"]["name"] == "fake"
        except ConnectError as exc:
            errors.append(str(exc))
    assert fake.connect_times == [0.0, 1.5, 4.0]
    assert errors == [
        "fake server 'fake' refused connection attempt 1 (refuse_connects=2)",
        "fake server 'fake' refused connection attempt 2 (refuse_connects=2)",
    ]
    assert fake.served == 1


async def test_respond_after_and_hang(autojump_clock: trio.testing.MockClock) -> None:
    fake = FakeServer(respond_after={"tools/list": 2.5, "ping": 0.5}, hang={"prompts/list"})
    async with connected(fake) as client:
        assert trio.current_time() == 0.0
        await client.call("tools/list")
        assert trio.current_time() == 2.5
        await client.call("ping")
        assert trio.current_time() == 3.0
        hung = await client.start("prompts/list")
        with trio.move_on_after(1000):
            await client.answer(hung)
        assert trio.current_time() == 1003.0
        fake.hang.clear()  # scripting can change at any time
        assert await client.call("prompts/list") == {"prompts": []}


async def test_tool_delay(autojump_clock: trio.testing.MockClock) -> None:
    fake = FakeServer(tools=[FakeTool("slow", result="done", delay=7.0)])
    async with connected(fake) as client:
        assert text_of(await client.tool("slow")) == "done"
    assert trio.current_time() == 7.0


# --------------------------------------------------------------------------- connections


async def test_disconnect_closes_every_live_connection_after_delivering_what_was_sent() -> None:
    fake = FakeServer()
    async with connected(fake) as one, connected(fake) as two:
        assert fake.connections == 2
        await fake.notify("notifications/message", {"level": "info", "data": "bye"})
        assert await fake.disconnect() == 2
        assert fake.connections == 0
        for client in (one, two):
            assert (await client.receive())["params"]["data"] == "bye"
            with pytest.raises(TransportClosed):
                await client.receive()
            with pytest.raises(TransportClosed):
                await client.send({"method": "notifications/initialized"})
    async with connected(fake) as three:  # the fake keeps accepting connections
        assert await three.call("ping") == {}
    assert fake.served == 3


async def test_the_server_task_ends_when_the_client_closes() -> None:
    fake = FakeServer(hang={"tools/list"})
    async with fake.connect() as transport:
        client = RawClient(transport)
        await client.initialize()
        await client.start("tools/list")  # a handler that never finishes
        await trio.testing.wait_all_tasks_blocked()
        await transport.aclose()
        await trio.testing.wait_all_tasks_blocked()
        assert fake.connections == 0
    assert fake.connections == 0


async def test_an_error_in_the_block_comes_out_unwrapped() -> None:
    fake = FakeServer()
    with pytest.raises(KeyError, match="boom"):
        async with fake.connect():
            raise KeyError("boom")


def test_server_config_uses_the_in_memory_factory() -> None:
    fake = FakeServer(name="files")
    config = fake.server_config(timeout=5.0)
    assert isinstance(config, ServerConfig)
    assert config.name == "files"
    assert config.transport_kind is TransportKind.CUSTOM
    assert config.timeout == 5.0
    assert config.transport_factory is not None
    assert fake.server_config("other").name == "other"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"refuse_connects": -1}, "FakeServer.refuse_connects must be an integer >= 0, got -1"),
        # a memory connection needs a budget of at least one byte
        ({"max_bytes": 0}, "FakeServer.max_bytes must be an integer >= 1, got 0"),
        ({"page_size": 0}, "FakeServer.page_size must be an integer >= 1 or None, got 0"),
        ({"crash_after_calls": True}, "FakeServer.crash_after_calls must be an integer >= 1"),
        ({"era": "future"}, "FakeServer.era must be one of legacy, modern, dual, got 'future'"),
        (
            {"unsupported_version_answers": -1},
            "FakeServer.unsupported_version_answers must be an integer >= 0, got -1",
        ),
    ],
)
def test_constructor_checks(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FakeServer(**options)


# --------------------------------------------------------------------------- resources, prompts


async def test_resources_templates_read_and_subscriptions() -> None:
    fake = FakeServer(
        resources=[
            FakeResource("file:///a.txt", "a", text="alpha", mime_type="text/plain"),
            FakeResource("file:///b.bin", "b", blob=b"\x00\x01", description="binary"),
        ],
        resource_templates=[
            FakeResourceTemplate("file:///{path}", "files", mime_type="text/plain")
        ],
    )
    async with connected(fake) as one, connected(fake) as two:
        assert await one.call("resources/list") == {
            "resources": [
                {"uri": "file:///a.txt", "name": "a", "mimeType": "text/plain"},
                {"uri": "file:///b.bin", "name": "b", "description": "binary"},
            ]
        }
        assert await one.call("resources/templates/list") == {
            "resourceTemplates": [
                {"uriTemplate": "file:///{path}", "name": "files", "mimeType": "text/plain"}
            ]
        }
        assert await one.call("resources/read", {"uri": "file:///a.txt"}) == {
            "contents": [{"uri": "file:///a.txt", "mimeType": "text/plain", "text": "alpha"}]
        }
        assert await one.call("resources/read", {"uri": "file:///b.bin"}) == {
            "contents": [{"uri": "file:///b.bin", "blob": "AAE="}]
        }
        assert await one.error("resources/read", {"uri": "file:///nope"}) == {
            "code": -32002,
            "message": "Resource not found: file:///nope",
            "data": {"uri": "file:///nope"},
        }
        assert await one.call("resources/subscribe", {"uri": "file:///a.txt"}) == {}
        assert fake.subscriptions == {"file:///a.txt"}
        assert await fake.notify_resource_updated("file:///a.txt") == 1
        assert await one.receive() == {
            "jsonrpc": "2.0",
            "method": "notifications/resources/updated",
            "params": {"uri": "file:///a.txt"},
        }
        assert await one.call("resources/unsubscribe", {"uri": "file:///a.txt"}) == {}
        assert await fake.notify_resource_updated("file:///a.txt") == 0
        assert await two.call("ping") == {}
        assert two.other == []


async def test_prompts_list_get_and_completion() -> None:
    fake = FakeServer(
        prompts=[
            FakePrompt(
                "explain",
                arguments=["topic", {"name": "depth", "required": False}],
                messages=[
                    ("user", "Explain ${topic} at depth ${depth}."),
                    {"role": "assistant", "content": {"type": "text", "text": "Sure."}},
                ],
                description="Explain something",
            )
        ],
        completions={"topic": ["trio", "triangles", "asyncio"]},
    )
    async with connected(fake) as client:
        assert await client.call("prompts/list") == {
            "prompts": [
                {
                    "name": "explain",
                    "description": "Explain something",
                    "arguments": [
                        {"name": "topic", "required": True},
                        {"name": "depth", "required": False},
                    ],
                }
            ]
        }
        assert await client.call(
            "prompts/get", {"name": "explain", "arguments": {"topic": "trio"}}
        ) == {
            "description": "Explain something",
            "messages": [
                {
                    "role": "user",
                    "content": {"type": "text", "text": "Explain trio at depth ${depth}."},
                },
                {"role": "assistant", "content": {"type": "text", "text": "Sure."}},
            ],
        }
        assert await client.error("prompts/get", {"name": "explain"}) == {
            "code": -32602,
            "message": "Missing required argument: topic",
        }
        assert await client.error("prompts/get", {"name": "other"}) == {
            "code": -32602,
            "message": "Unknown prompt: other",
        }
        completion = await client.call(
            "completion/complete",
            {
                "ref": {"type": "ref/prompt", "name": "explain"},
                "argument": {"name": "topic", "value": "tri"},
            },
        )
        assert completion == {
            "completion": {"values": ["trio", "triangles"], "total": 2, "hasMore": False}
        }


# --------------------------------------------------------------------------- the JSON spec


SPEC: dict[str, Any] = {
    "name": "spec-demo",
    "version": "0.3.0",
    "stderr_banner": "spec-demo ready",
    "tools": [
        {"name": "echo", "kind": "echo", "description": "Echo the arguments"},
        {"name": "hello", "text": "Hello!", "delay": 0.2, "progress": 2},
        {"name": "fail", "text": "it broke", "is_error": True, "structured": {"code": 7}},
        {"name": "die", "kind": "crash", "exit_code": 3},
        {"name": "noisy", "kind": "stderr", "bytes": 200},
        {"raw": {"name": "bad", "inputSchema": []}},
    ],
    "resources": [{"uri": "mem://r", "name": "r", "text": "R"}],
    "prompts": [{"name": "p", "arguments": ["x"], "messages": [["user", "x=${x}"]]}],
    "respond_after": {"resources/list": 1.0},
    "hang": ["prompts/list"],
    "list_changed_after_calls": 100,
}


async def test_from_spec_builds_a_working_fake(autojump_clock: trio.testing.MockClock) -> None:
    fake = FakeServer.from_spec(SPEC)
    assert (fake.name, fake.version, fake.hang, fake.respond_after) == (
        "spec-demo",
        "0.3.0",
        {"prompts/list"},
        {"resources/list": 1.0},
    )
    async with connected(fake) as client:
        listed = (await client.call("tools/list"))["tools"]
        assert [t["name"] for t in listed] == ["echo", "hello", "fail", "die", "noisy", "bad"]
        assert listed[0] == {
            "name": "echo",
            "description": "Echo the arguments",
            "inputSchema": {"type": "object"},
        }
        assert text_of(await client.tool("echo", {"q": 1})) == '{"q":1}'
        start = trio.current_time()
        assert text_of(await client.tool("hello", progressToken=9)) == "Hello!"
        assert trio.current_time() - start == pytest.approx(0.2)
        assert [m["params"]["message"] for m in client.other] == ["step 1 of 2", "step 2 of 2"]
        assert await client.tool("fail") == {
            "content": [{"type": "text", "text": "it broke"}],
            "isError": True,
            "structuredContent": {"code": 7},
        }
        assert await client.call("prompts/get", {"name": "p", "arguments": {"x": "1"}}) == {
            "messages": [{"role": "user", "content": {"type": "text", "text": "x=1"}}]
        }


def test_from_spec_reports_every_problem_with_its_path() -> None:
    spec = {
        "name": 5,
        "colour": "red",
        "page_size": 0,
        "initialize_error": [1],
        "tools": [{"name": "a", "kind": "weird"}, {"description": "no name"}, {"raw": 3}],
        "resources": [{"name": "no uri"}],
    }
    with pytest.raises(ConfigError) as info:
        FakeServer.from_spec(spec)
    assert info.value.problems == (
        ("$.colour", info.value.problems[0][1]),
        ("$.name", "must be a string, got 5"),
        ("$.page_size", "must be >= 1"),
        ("$.initialize_error", "must be [code, message], got [1]"),
        (
            "$.tools[0].kind",
            "unknown tool kind 'weird' (use one of ('text', 'echo', 'crash', 'stderr'))",
        ),
        ("$.tools[1].name", "must be a string, got None"),
        ("$.tools[2].raw", "must be an object, got 3"),
        ("$.resources[0].uri", "is required"),
    )
    assert info.value.problems[0][1].startswith("unknown key (allowed: capabilities, completions")
    assert str(info.value).startswith("invalid fake server spec: $.colour: unknown key")
    with pytest.raises(ConfigError, match=r"\$: a spec must be a JSON object, got \[\]"):
        FakeServer.from_spec([])  # type: ignore[arg-type]


def test_from_spec_takes_the_era() -> None:
    assert FakeServer.from_spec({"era": "dual"}).era == "dual"
    assert FakeServer.from_spec({}).era == "legacy"
    with pytest.raises(ConfigError) as info:
        FakeServer.from_spec({"era": "future"})
    assert info.value.problems == (("$.era", "must be one of legacy, modern, dual, got 'future'"),)


# --------------------------------------------------------------------------- stdio subprocess


def spawn_args(spec: Mapping[str, Any]) -> list[str]:
    return [sys.executable, "-m", "trio_mcp.actors.testing", "--spec-json", json.dumps(spec)]


@asynccontextmanager
async def spawned(spec: Mapping[str, Any]) -> AsyncIterator[trio.Process]:
    """The fake as a subprocess with its three standard streams piped; killed if the test
    leaves while it still runs."""
    async with trio.open_nursery() as nursery:
        process: trio.Process = await nursery.start(
            functools.partial(
                trio.run_process,
                spawn_args(spec),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                check=False,
            )
        )
        try:
            yield process
        finally:
            with trio.CancelScope(shield=True):  # never replace an exception leaving the block
                for stream in (process.stdin, process.stdout, process.stderr):
                    if stream is not None:
                        await stream.aclose()
            if process.returncode is None:
                nursery.cancel_scope.cancel()


@attrs.define
class LineReader:
    """Newline-delimited JSON messages from a byte stream."""

    stream: trio.abc.ReceiveStream
    buffer: bytes = b""

    async def next(self) -> dict[str, Any]:
        while b"\n" not in self.buffer:
            chunk = await self.stream.receive_some(65536)
            assert chunk, "the fake server closed stdout"
            self.buffer += chunk
        raw, self.buffer = self.buffer.split(b"\n", 1)
        value: dict[str, Any] = json.loads(raw)
        return value


async def send_line(stream: trio.abc.SendStream, message: Mapping[str, Any]) -> None:
    await stream.send_all(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")


async def read_all(stream: trio.abc.ReceiveStream) -> bytes:
    data = b""
    while chunk := await stream.receive_some(65536):
        data += chunk
    return data


async def test_stdio_subprocess_serves_the_spec_and_exits_on_eof() -> None:
    with trio.fail_after(60):
        async with spawned(SPEC) as process:
            assert process.stdin is not None
            assert process.stdout is not None
            assert process.stderr is not None
            lines = LineReader(process.stdout)
            await send_line(
                process.stdin,
                {
                    "id": 1,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-06-18",
                        "capabilities": {},
                        "clientInfo": {"name": "t", "version": "0"},
                    },
                },
            )
            answer = await lines.next()
            assert answer["result"]["protocolVersion"] == "2025-06-18"
            assert answer["result"]["serverInfo"] == {"name": "spec-demo", "version": "0.3.0"}
            await send_line(process.stdin, {"method": "notifications/initialized"})
            call = {"name": "echo", "arguments": {"a": "é"}}
            await send_line(process.stdin, {"id": 2, "method": "tools/call", "params": call})
            assert await lines.next() == {
                "jsonrpc": "2.0",
                "id": 2,
                "result": {"content": [{"type": "text", "text": '{"a":"é"}'}]},
            }
            await send_line(
                process.stdin, {"id": 3, "method": "tools/call", "params": {"name": "noisy"}}
            )
            assert await lines.next() == {
                "jsonrpc": "2.0",
                "id": 3,
                "result": {"content": [{"type": "text", "text": "wrote 200 bytes to stderr"}]},
            }
            # A request that is never answered must not keep the process alive after EOF.
            await send_line(process.stdin, {"id": 4, "method": "prompts/list"})
            await process.stdin.aclose()
            assert await process.wait() == 0
            stderr = await read_all(process.stderr)
    assert stderr == b"spec-demo ready\n" + (b"x" * 79 + b"\n") * 2 + b"x" * 40


async def test_stdio_crash_tool_exits_the_process() -> None:
    with trio.fail_after(60):
        async with spawned(SPEC) as process:
            assert process.stdin is not None
            await send_line(
                process.stdin, {"id": 1, "method": "tools/call", "params": {"name": "die"}}
            )
            assert await process.wait() == 3


def test_stdio_refuses_a_bad_spec() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "trio_mcp.actors.testing", "--spec-json", '{"tools": 3}'],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr == (
        "fake server: cannot use the spec: invalid fake server spec: $.tools: must be an array, "
        "got 3\n"
    )
