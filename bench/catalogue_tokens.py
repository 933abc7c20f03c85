"""``python -m bench.catalogue_tokens``: the tokens a model sees for a 300-tool catalogue, with
every tool offered on every turn and with deferred loading (``ToolSearch``).

Ten in-memory fake servers of 30 tools each (seeded, so every run builds the same catalogue:
descriptions of one to three sentences, two to six arguments with types, descriptions, enums
and defaults, about what real servers list) go through the runtime as usual; the tool list is
then exported for Anthropic and for OpenAI Chat Completions, and its compact JSON counted
(OpenAI's ``full`` counts all 300 tools, though it takes 128 per request):

- ``full``: every tool, every turn;
- ``names index``: ``ToolSearch()``, first turn (the search tool, its description listing each
  deferred tool's name and first sentence);
- ``server index``: ``ToolSearch(index="none")``, first turn (the search tool alone);
- ``index in prompt``: the same, plus ``agent.tool_index()`` (the names index) in the system
  prompt: what to do with OpenAI, which cuts a description at 1,024 characters (so its
  ``names index`` row is the search tool with the index cut there);
- ``after a search``: the next turn of ``names index`` once a search has loaded 5 tools (their
  definitions are then in the tool list), plus the search's answer, which the model read once.

Tokens: with ``tiktoken`` installed (an optional tool, not a dependency), the ``o200k_base``
encoding; without it an approximation, one token per run of letters, run of digits or other
non-space character of the JSON (BPE tokenizers split JSON about so: on a sample of these tool
lists it lands within 10 % of ``o200k_base``), and characters / 4 for comparison. ``--json FILE``
writes the figures.
"""

from __future__ import annotations

import argparse
import json
import random
import re
from typing import Any

import attrs
import trio

from trio_mcp.actors import AgentSurface, RuntimeConfig, ToolSearch, open_runtime, to_openai_tools
from trio_mcp.actors.agent import SEARCH_TOOL_NAME
from trio_mcp.actors.agent._export import OPENAI_LIMITS
from trio_mcp.actors.testing import FakeServer, FakeTool

SERVERS = 10
TOOLS_PER_SERVER = 30
SEED = 17

_NOUNS = [
    "issue",
    "pull_request",
    "branch",
    "commit",
    "repository",
    "file",
    "directory",
    "record",
    "invoice",
    "customer",
    "order",
    "ticket",
    "message",
    "channel",
    "user",
    "group",
    "calendar",
    "event",
    "document",
    "page",
    "table",
    "row",
    "column",
    "job",
    "pipeline",
    "deployment",
    "secret",
    "metric",
    "alert",
    "dashboard",
    "report",
]
_VERBS = [
    "get",
    "list",
    "create",
    "update",
    "delete",
    "search",
    "archive",
    "restore",
    "export",
    "import",
    "sync",
]
_TYPES = ("string", "integer", "boolean", "number")
_WORDS = re.compile(r"[A-Za-z]+|\d+|[^\sA-Za-z\d]")


def _catalogue() -> list[FakeServer]:
    rng = random.Random(SEED)
    servers = []
    for s in range(SERVERS):
        tools = []
        seen: set[str] = set()
        while len(tools) < TOOLS_PER_SERVER:
            verb, noun = rng.choice(_VERBS), rng.choice(_NOUNS)
            name = f"{verb}_{noun}"
            if name in seen:
                name = f"{name}_{len(tools)}"
            seen.add(name)
            sentences = [
                f"{verb.capitalize()} a {noun.replace('_', ' ')} in the workspace.",
                f"Use it when the user asks about a {noun.replace('_', ' ')} by its id or name.",
                "Results are paginated; pass the cursor of the previous page to continue.",
            ]
            description = " ".join(sentences[: rng.randint(1, 3)])
            properties: dict[str, Any] = {}
            for a in range(rng.randint(2, 6)):
                kind = rng.choice(_TYPES)
                prop: dict[str, Any] = {
                    "type": kind,
                    "description": f"The {rng.choice(_NOUNS).replace('_', ' ')} to use.",
                }
                if kind == "string" and rng.random() < 0.3:
                    prop["enum"] = ["asc", "desc", "relevance"]
                if kind == "integer" and rng.random() < 0.5:
                    prop["default"] = 20
                properties[f"{rng.choice(_NOUNS)}_{a}"] = prop
            schema = {
                "type": "object",
                "properties": properties,
                "required": list(properties)[: rng.randint(1, 2)],
            }
            tools.append(FakeTool(name, description=description, input_schema=schema))
        servers.append(FakeServer(name=f"srv{s}", tools=tools))
    return servers


def _encoder() -> tuple[str, Any]:
    try:
        import tiktoken  # type: ignore[import-not-found]
    except ImportError:
        return "approximation (runs of letters, runs of digits, other characters)", None
    return "tiktoken o200k_base", tiktoken.get_encoding("o200k_base")


def _count(text: str, encoder: Any) -> int:
    if encoder is not None:
        return len(encoder.encode(text))
    return len(_WORDS.findall(text))


def _measure(payload: Any, encoder: Any) -> dict[str, int]:
    text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    return {"chars": len(text), "tokens": _count(text, encoder), "chars/4": len(text) // 4}


async def _run() -> dict[str, Any]:
    servers = _catalogue()
    config = RuntimeConfig(servers=tuple(server.server_config() for server in servers))
    method, encoder = _encoder()
    figures: dict[str, Any] = {"tokenizer": method, "tools": SERVERS * TOOLS_PER_SERVER}
    async with open_runtime(config) as rt:
        await rt.wait_ready(timeout=60)
        assert len(rt.tools()) == SERVERS * TOOLS_PER_SERVER, len(rt.tools())
        for provider in ("anthropic", "openai"):
            full = AgentSurface(rt).export_tools(provider, shape=None)
            if provider == "openai":  # it takes 128 tools: count all 300 as they would be
                every = AgentSurface(rt).model_tools(shape=None)
                full = to_openai_tools(every, limits=attrs.evolve(OPENAI_LIMITS, max_tools=None))
            names = AgentSurface(rt, tool_search=ToolSearch())
            index = names.export_tools(provider, shape=None)
            servers_only = AgentSurface(rt, tool_search=ToolSearch(index="none"))
            small = servers_only.export_tools(provider, shape=None)
            answer = await names.call_for_model(
                SEARCH_TOOL_NAME, {"query": "list the open issues of a repository", "limit": 5}
            )
            after = names.export_tools(provider, shape=None)
            prompt_index = servers_only.tool_index()
            figures[provider] = {
                "full": {"tools": len(full.tools), **_measure(full.tools, encoder)},
                "names index": {"tools": len(index.tools), **_measure(index.tools, encoder)},
                "server index": {"tools": len(small.tools), **_measure(small.tools, encoder)},
                "index in prompt": {
                    "tools": len(small.tools),
                    "chars": len(prompt_index) + _measure(small.tools, encoder)["chars"],
                    "tokens": _count(prompt_index, encoder)
                    + _measure(small.tools, encoder)["tokens"],
                },
                "after a search": {
                    "tools": len(after.tools),
                    **_measure(after.tools, encoder),
                    "search answer tokens": _count(answer.text, encoder),
                },
            }
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args()
    figures = trio.run(_run)
    print(f"{figures['tools']} tools; tokens: {figures['tokenizer']}")
    for provider in ("anthropic", "openai"):
        print(f"\n{provider}: tool list per request")
        full = figures[provider]["full"]["tokens"]
        for label, row in figures[provider].items():
            share = f"{100 * row['tokens'] / full:5.1f} %"
            extra = ""
            if "search answer tokens" in row:
                extra = f"  (+ {row['search answer tokens']:,} tokens of the search's answer, once)"
            print(
                f"  {label:<15} {row['tools']:>4} tools  {row['tokens']:>7,} tokens  {share}  "
                f"{row['chars']:>8,} chars{extra}"
            )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(figures, out, indent=2)


if __name__ == "__main__":
    main()
