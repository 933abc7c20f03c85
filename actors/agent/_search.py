"""Large catalogues: deferred loading and a search tool.

With hundreds of tools, sending every schema on every turn costs tokens (and the model picks
worse among many). ``AgentSurface(rt, tool_search=ToolSearch(...))`` turns the surface's tool
list into a small one: the tools named in ``always`` (globs), the tools found so far, and one
tool, ``search_mcp_tools``, whose description lists the other tools by name with a one-line
description (``index="names"``) or only says how many there are per server (``index="none"``).
The model calls ``search_mcp_tools`` with a few words; the answer holds the matching tools' full
definitions (name, description, input schema), and those tools are *loaded*: from then on
``agent.model_tools()`` and ``agent.export_tools(...)`` include them, so the host's next request
offers them as ordinary tools. A deferred tool that the model calls by name without a search
(it read the name in the index) is called all the same, and loaded.

This is done on the client, so it works with every provider and model. The providers' own tool
search (Anthropic's ``defer_loading`` with a tool-search tool, OpenAI's Responses ``tool_search``)
does the same inside the provider: a host that uses one of them exports the full list instead and
marks the tools to defer itself; the search tool here is for the rest, and for hosts that want
the index and the ranking under their control.

The state (which tools are loaded) belongs to one conversation: give each conversation its own
surface (or call :meth:`ToolSearch.reset` when one starts). The search is a plain ranking over
the registered tools' names and descriptions: every word of the query (a plural ``s`` taken off)
that appears in a tool's name counts three, in its description one, and a query that is a tool's
exact name finds it first.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, Final, Literal

import attrs

from ...protocol._types import Tool
from ._catalog import ModelTool, ModelToolResult
from ._render import TextPart
from ._risk import RiskLevel

__all__ = ["SEARCH_TOOL_NAME", "ToolSearch"]

#: The name of the search tool the model calls.
SEARCH_TOOL_NAME: Final = "search_mcp_tools"
#: The most tools one search returns.
MAX_SEARCH_RESULTS: Final = 20
_WORDS = re.compile(r"[a-z0-9]+")
_LINE_CHARS: Final = 100


def _words(text: str) -> set[str]:
    """The words of ``text``, lower case, a plural ``s`` taken off (``issues`` finds ``issue``)."""
    return {
        word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word
        for word in _WORDS.findall(text.lower())
    }


def _one_line(text: str, limit: int = _LINE_CHARS) -> str:
    line = " ".join(text.split())
    first = re.split(r"(?<=[.!?])\s", line, maxsplit=1)[0]
    return first if len(first) <= limit else first[: limit - 3].rstrip() + "..."


def _patterns(value: Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, str):  # one glob, not its characters
        return (value,)
    return tuple(value)


@attrs.define(eq=False)
class ToolSearch:
    """Deferred loading of a surface's tools behind ``search_mcp_tools`` (see the module).

    ``always``: globs of tool names the model always gets (default: none; the resource, prompt
    and skill tools are always offered). ``index``: what the search tool's description lists,
    ``"names"`` (each deferred tool's name and one-line description) or ``"none"`` (per server,
    how many tools it has). ``max_results``: the most tools one search returns (at most 20)."""

    always: tuple[str, ...] = attrs.field(default=(), converter=_patterns)
    index: Literal["names", "none"] = "names"
    max_results: int = 5
    _loaded: set[str] = attrs.field(factory=set, init=False)

    def __attrs_post_init__(self) -> None:
        if self.index not in ("names", "none"):
            raise ValueError(f"unknown index {self.index!r}: use 'names' or 'none'")
        if not 1 <= self.max_results <= MAX_SEARCH_RESULTS:
            raise ValueError(f"max_results must be from 1 to {MAX_SEARCH_RESULTS}")

    @property
    def loaded(self) -> frozenset[str]:
        """The tools found (or called) so far in this conversation."""
        return frozenset(self._loaded)

    def load(self, names: Iterable[str]) -> None:
        """Offer these tools from now on (as if a search had found them)."""
        self._loaded.update(names)

    def reset(self) -> None:
        """Forget the loaded tools (a new conversation)."""
        self._loaded.clear()

    def deferred(self, name: str, tool: ModelTool) -> bool:
        """Whether ``tool`` waits behind the search (not always offered, not loaded)."""
        if tool.kind != "mcp" or name in self._loaded:
            return False
        return not any(fnmatch.fnmatchcase(name, pattern) for pattern in self.always)

    def visible(self, tools: Mapping[str, ModelTool]) -> Mapping[str, ModelTool]:
        """What the model is offered of ``tools`` (every tool of the surface): the ones not
        deferred, plus the search tool while any is deferred. In name order."""
        shown = {name: tool for name, tool in tools.items() if not self.deferred(name, tool)}
        hidden = [tool for name, tool in tools.items() if self.deferred(name, tool)]
        if hidden:
            search = self.definition(hidden)
            shown[SEARCH_TOOL_NAME] = ModelTool(
                name=SEARCH_TOOL_NAME, tool=search, risk=RiskLevel.READ_ONLY, kind="catalog"
            )
        return MappingProxyType(dict(sorted(shown.items())))

    def definition(self, hidden: Iterable[ModelTool]) -> Tool:
        """The search tool, its description indexing the ``hidden`` tools."""
        hidden = sorted(hidden, key=lambda tool: tool.name)
        head = (
            f"Find tools by what they do. {len(hidden)} more tools are available but not loaded; "
            "call this with a few words (or a tool's exact name) to get the matching tools' "
            "full definitions, and they can be called from then on."
        )
        if self.index == "names":
            description = head + " Not loaded yet:\n" + _lines(hidden)
        else:
            servers: dict[str, int] = {}
            for tool in hidden:
                servers[tool.server or ""] = servers.get(tool.server or "", 0) + 1
            counts = ", ".join(f"{server} ({count})" for server, count in sorted(servers.items()))
            description = f"{head} Servers: {counts}."
        return Tool(
            name=SEARCH_TOOL_NAME,
            description=description,
            input_schema={
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What the tool should do."},
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": self.max_results,
                        "description": f"How many tools to return (at most {self.max_results}).",
                    },
                },
                "required": ["query"],
            },
        )

    def index_text(self, tools: Mapping[str, ModelTool]) -> str:
        """The deferred tools of ``tools``, one line each (name and first sentence), for a host
        that puts the index into the system prompt (OpenAI cuts a tool's description at 1,024
        characters, which the index of a large catalogue passes: use ``index="none"`` there,
        and this text in the prompt). ``""`` when nothing is deferred."""
        hidden = sorted(
            (tool for name, tool in tools.items() if self.deferred(name, tool)),
            key=lambda tool: tool.name,
        )
        return _lines(hidden)

    def search(
        self, tools: Mapping[str, ModelTool], query: str, *, limit: int | None = None
    ) -> tuple[ModelTool, ...]:
        """The MCP tools of ``tools`` that best match ``query``, best first (at most ``limit``,
        default ``max_results``); ties in name order. Does not load them."""
        limit = self.max_results if limit is None else max(1, min(limit, self.max_results))
        wanted = _words(query)
        exact = query.strip()
        scored: list[tuple[int, str, ModelTool]] = []
        for name, tool in tools.items():
            if tool.kind != "mcp":
                continue
            if name == exact:
                scored.append((-(10**6), name, tool))
                continue
            name_words = _words(name.replace("_", " "))
            text_words = _words(tool.description)
            score = sum(3 for w in wanted if w in name_words) + sum(
                1 for w in wanted if w in text_words
            )
            if score:
                scored.append((-score, name, tool))
        scored.sort(key=lambda item: (item[0], item[1]))
        return tuple(tool for _, _, tool in scored[:limit])

    def run(self, tools: Mapping[str, ModelTool], arguments: Mapping[str, Any]) -> ModelToolResult:
        """The model's call of the search tool: the matching tools' full definitions, as JSON
        text, and those tools loaded."""
        query = arguments.get("query")
        limit = arguments.get("limit")
        if not isinstance(query, str) or not query.strip():
            return _result("the search needs a 'query': a few words about the tool", error=True)
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
            return _result("'limit' must be an integer", error=True)
        found = self.search(tools, query, limit=limit)
        self.load(tool.name for tool in found)
        body = {
            "tools": [
                {
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": dict(tool.input_schema),
                }
                for tool in found
            ],
        }
        if found:
            note = f"{len(found)} tools found; they can be called now."
        else:
            note = "No tool matches; try other words, or a tool's name from the list."
        return _result(f"{note}\n{json.dumps(body, ensure_ascii=False)}")


def _lines(tools: Iterable[ModelTool]) -> str:
    return "\n".join(f"- {tool.name}: {_one_line(tool.description)}" for tool in tools)


def _result(text: str, *, error: bool = False) -> ModelToolResult:
    return ModelToolResult(
        name=SEARCH_TOOL_NAME,
        text=text,
        parts=(TextPart(text=text),),
        is_error=error,
        status="invalid" if error else "ok",
    )
