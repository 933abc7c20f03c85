"""The provider export and round trips against the real reference servers: server-everything
(npm, stdio, with the host callbacks declared so that all its tools are listed) and the Python
SDK server. The shapes are checked with the openai and anthropic SDKs' types; nothing is sent
to a provider."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from anthropic.types import MessageParam
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolParam
from openai.types.responses import ResponseInputItemParam

from tests.actors.test_providers import accepted
from tests.actors.test_strict import assert_strict
from tests.interop.support import CONNECT_BOUND, everything_server, interop_runtime, python_server
from trio_mcp.actors import (
    AgentSurface,
    HostCallbacks,
    run_anthropic_tool_calls,
    run_openai_chat_tool_calls,
    run_openai_responses_tool_calls,
)
from trio_mcp.protocol import (
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    ElicitResult,
    Root,
    TextContent,
)

pytestmark = pytest.mark.interop

#: server-everything's tools once the host declares roots, sampling and elicitation (and the
#: runtime the tasks capability for them: its two ``-async`` tools are listed too).
EVERYTHING_TOOLS = 19


async def list_roots(server: str) -> list[Root]:
    return [Root(uri=Path.cwd().as_uri(), name="here")]


async def sampling(server: str, params: CreateMessageRequestParams) -> CreateMessageResult:
    return CreateMessageResult(role="assistant", content=TextContent(text="fine"), model="stand-in")


async def elicitation(
    server: str, params: ElicitRequestFormParams | ElicitRequestURLParams
) -> ElicitResult:
    return ElicitResult(action="decline")


CALLBACKS = HostCallbacks(
    list_roots=list_roots,
    sampling=sampling,
    elicitation=elicitation,
    elicitation_modes=("form", "url"),
)


async def test_the_reference_catalogue_exports_strict_and_round_trips(tmp_path: Path) -> None:
    async with interop_runtime(
        everything_server(trust_level="trusted"),
        python_server(trust_level="trusted"),
        callbacks=CALLBACKS,
        working_dir=tmp_path,
    ) as (rt, _):
        with trio.fail_after(CONNECT_BOUND):
            version = rt.tools_version
            while sum(tool.server == "everything" for tool in rt.tools().values()) < (
                EVERYTHING_TOOLS
            ):
                version = await rt.wait_tools_changed(version)
        agent = AgentSurface(rt)
        export = agent.export_tools("openai", strict=True, shape="agentao")
        assert len(export.tools) == EVERYTHING_TOOLS + 7 + 5  # + the SDK server's + ours
        loose = [t["function"]["name"] for t in export.tools if not t["function"]["strict"]]
        assert loose == ["get_mcp_prompt"]  # its arguments are a map of strings
        for tool in export.tools:
            accepted(ChatCompletionToolParam, tool)
            if tool["function"]["strict"]:
                assert_strict(tool["function"]["parameters"])

        # The model leaves the optional "count" out the strict way, with null: were the null sent,
        # the server would refuse it (zod: a number expected).
        chat = await run_openai_chat_tool_calls(
            agent,
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {
                            "name": "mcp_everything_get_sum",
                            "arguments": '{"a": 2, "b": 3}',
                        },
                    },
                    {
                        "id": "call_2",
                        "type": "function",
                        "function": {
                            "name": "mcp_everything_get_resource_links",
                            "arguments": '{"count": null}',
                        },
                    },
                ],
            },
        )
        assert [r.status for r in chat.results] == ["ok", "ok"]
        assert "5" in chat.messages[0]["content"]
        for message in chat.messages:
            accepted(ChatCompletionMessageParam, message)
        kept = await run_openai_chat_tool_calls(
            agent,
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": "call_2",
                        "type": "function",
                        "function": {
                            "name": "mcp_everything_get_resource_links",
                            "arguments": '{"count": null}',
                        },
                    }
                ],
            },
            drop_nulls=False,
        )
        assert kept.results[0].is_error

        responses = await run_openai_responses_tool_calls(
            agent,
            [
                {
                    "type": "function_call",
                    "call_id": "call_3",
                    "name": "mcp_everything_get_tiny_image",
                    "arguments": "{}",
                }
            ],
        )
        (item,) = responses.messages
        kinds = [part["type"] for part in item["output"]]
        assert "input_image" in kinds
        accepted(ResponseInputItemParam, item)

        claude = await run_anthropic_tool_calls(
            agent,
            [
                {
                    "type": "tool_use",
                    "id": "t1",
                    "name": "mcp_everything_get_tiny_image",
                    "input": {},
                },
                {"type": "tool_use", "id": "t2", "name": "mcp_py_fail", "input": {"message": "no"}},
            ],
        )
        (message,) = claude.messages
        image, failed = message["content"]
        assert "image" in [block["type"] for block in image["content"]]
        assert "is_error" not in image
        assert failed["is_error"] is True
        assert [r.status for r in claude.results] == ["ok", "tool_error"]
        accepted(MessageParam, message)
