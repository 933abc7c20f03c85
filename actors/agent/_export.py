"""The registered tools, exported in the shapes model providers take.

:func:`to_openai_tools` gives OpenAI function tools (Chat Completions shape
``{"type": "function", "function": {...}}`` or the flat Responses shape), and
:func:`to_anthropic_tools` gives Anthropic tools (``{"name", "description", "input_schema"}``).

Each provider's limits (:class:`ProviderLimits`) are applied to each tool alone: a tool the
provider would reject is left out and reported with the reason in :attr:`ExportResult.refused`,
so one bad tool never fails a whole request. What was changed to fit is reported in
:attr:`ExportResult.adjusted`.

- the name must match ``^[a-zA-Z0-9_-]{1,64}$`` (both providers);
- the input schema must be a valid object schema (the registration rules of
  :func:`~._toolcheck.check_input_schema`), and may not have ``oneOf`` / ``anyOf`` / ``allOf`` at
  the top (OpenAI also refuses ``enum`` and ``not`` there). A missing top-level ``type`` is set to
  ``"object"``; OpenAI also gets ``"properties": {}`` when there are none; ``$schema`` is dropped;
- a description longer than the provider takes (OpenAI: 1,024 characters) is cut (or, with
  ``description_overflow="refuse"``, the tool is refused); a tool without a description uses its
  title;
- OpenAI takes at most 128 tools per request: the tools past that (in name order) are refused;
- ``strict=True`` (OpenAI) sends each tool's schema rewritten for strict mode
  (:func:`~._strict.to_strict_schema`: every object closed, optional properties required and
  nullable, the keywords strict mode does not take moved into descriptions), reported as an
  adjustment; a tool whose schema strict mode cannot express (:class:`StrictRules`) is sent
  without strict mode, with the reason. The model then sends ``null`` for a property it leaves
  out: :func:`~._strict.drop_omitted_nulls` (and the round-trip helpers of
  :mod:`~._providers`) remove those before the call.

Tools come out sorted by name, so the same tool set always gives the same request (prompt
caches stay warm). The schemas are deep copies: the host may change them freely.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any, Final, Literal, TypeAlias

import attrs

from ..runtime._registry import RegisteredTool
from ..runtime._toolcheck import check_input_schema
from ._catalog import ModelTool
from ._strict import DEFAULT_STRICT_RULES, StrictRules, to_strict_schema

__all__ = [
    "ANTHROPIC_LIMITS",
    "DEFAULT_STRICT_RULES",
    "OPENAI_LIMITS",
    "ExportAdjustment",
    "ExportRefusal",
    "ExportResult",
    "Exportable",
    "ProviderLimits",
    "StrictRules",
    "to_anthropic_tools",
    "to_openai_tools",
]


#: What the exporters take: registered MCP tools (``rt.tools()``) or model tools
#: (``AgentSurface.model_tools()``: MCP tools plus the resource and prompt tools).
Exportable: TypeAlias = RegisteredTool | ModelTool


@attrs.frozen(kw_only=True)
class ProviderLimits:
    """What one provider accepts in a tool definition.

    ``max_description`` and ``max_tools`` are None when the provider states no limit;
    ``root_keywords_refused`` are keywords not allowed at the top of the input schema;
    ``needs_properties`` adds ``"properties": {}`` to an object schema without it.
    """

    provider: str
    name_pattern: re.Pattern[str] = re.compile(r"[a-zA-Z0-9_-]{1,64}")
    max_description: int | None = None
    max_tools: int | None = None
    root_keywords_refused: frozenset[str] = frozenset({"oneOf", "anyOf", "allOf"})
    needs_properties: bool = False


#: OpenAI function calling (Chat Completions and Responses).
OPENAI_LIMITS: Final = ProviderLimits(
    provider="OpenAI",
    max_description=1024,
    max_tools=128,
    root_keywords_refused=frozenset({"oneOf", "anyOf", "allOf", "enum", "not"}),
    needs_properties=True,
)
#: Anthropic tool use (Messages API).
ANTHROPIC_LIMITS: Final = ProviderLimits(provider="Anthropic")


@attrs.frozen(kw_only=True)
class ExportRefusal:
    """A tool that was not exported: its registered ``name``, where it comes from (``server``
    is None for the runtime's resource and prompt tools), and why."""

    name: str
    server: str | None
    tool: str
    reason: str


@attrs.frozen(kw_only=True)
class ExportAdjustment:
    """Something changed in a tool's exported definition so that the provider takes it."""

    name: str
    change: str


@attrs.frozen(kw_only=True)
class ExportResult:
    """The provider's tool list (``tools``, plain JSON-ready dicts, sorted by name), the tools
    left out with reasons (``refused``) and what was changed to fit (``adjusted``)."""

    provider: str
    tools: tuple[dict[str, Any], ...] = ()
    refused: tuple[ExportRefusal, ...] = ()
    adjusted: tuple[ExportAdjustment, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        """The names of the exported tools, in order."""
        return tuple(_tool_name(tool) for tool in self.tools)


def _tool_name(tool: Mapping[str, Any]) -> str:
    function = tool.get("function")
    name = function["name"] if isinstance(function, Mapping) else tool["name"]
    return str(name)


class _Refused(Exception):
    """One tool cannot be exported; the message says why (it becomes an ExportRefusal)."""


@attrs.define
class _Exporter:
    limits: ProviderLimits
    description_overflow: Literal["cut", "refuse"]
    adjusted: list[ExportAdjustment] = attrs.field(factory=list)

    def name(self, name: str) -> None:
        if not self.limits.name_pattern.fullmatch(name):
            raise _Refused(
                f"the name {name[:100]!r} does not match {self.limits.provider}'s rule "
                f"^{self.limits.name_pattern.pattern}$"
            )

    def description(self, name: str, registered: Exportable) -> str | None:
        tool = registered.tool
        text = (
            tool.description
            or tool.title
            or (tool.annotations.title if tool.annotations is not None else None)
        )
        limit = self.limits.max_description
        if text is None or limit is None or len(text) <= limit:
            return text
        if self.description_overflow == "refuse":
            raise _Refused(
                f"the description has {len(text):,} characters; {self.limits.provider} takes "
                f"at most {limit:,}"
            )
        self.adjusted.append(
            ExportAdjustment(
                name=name,
                change=f"description cut from {len(text):,} to {limit:,} characters "
                f"({self.limits.provider}'s limit)",
            )
        )
        return text[: limit - 1] + "\u2026"

    def schema(self, name: str, registered: Exportable) -> dict[str, Any]:
        raw = registered.tool.input_schema
        problems = check_input_schema(raw)
        if problems:
            raise _Refused(f"invalid input schema: {'; '.join(problems)}")
        schema: dict[str, Any] = json.loads(json.dumps(raw)) if raw else {}
        schema.pop("$schema", None)
        for keyword in sorted(self.limits.root_keywords_refused):
            if keyword in schema:
                raise _Refused(
                    f"{self.limits.provider} does not accept {keyword!r} at the top of an input "
                    f"schema (it must be a plain object schema)"
                )
        if "type" not in schema:
            if schema:
                self.adjusted.append(
                    ExportAdjustment(name=name, change="top-level type set to object")
                )
            schema = {"type": "object", **schema}
        if self.limits.needs_properties and "properties" not in schema:
            schema["properties"] = {}
        return schema


_Builder = Callable[[str, str | None, dict[str, Any], "_Exporter"], dict[str, Any]]


def _export(
    tools: Mapping[str, Exportable],
    limits: ProviderLimits,
    description_overflow: Literal["cut", "refuse"],
    build: _Builder,
) -> ExportResult:
    exporter = _Exporter(limits=limits, description_overflow=description_overflow)
    exported: list[dict[str, Any]] = []
    refused: list[ExportRefusal] = []
    for name in sorted(tools):
        registered = tools[name]
        try:
            exporter.name(name)
            description = exporter.description(name, registered)
            schema = exporter.schema(name, registered)
        except _Refused as exc:
            refused.append(
                ExportRefusal(
                    name=name, server=registered.server, tool=registered.wire_name, reason=str(exc)
                )
            )
            continue
        if limits.max_tools is not None and len(exported) >= limits.max_tools:
            refused.append(
                ExportRefusal(
                    name=name,
                    server=registered.server,
                    tool=registered.wire_name,
                    reason=f"{limits.provider} takes at most {limits.max_tools} tools per "
                    f"request; this one is past the limit (in name order)",
                )
            )
            continue
        exported.append(build(name, description, schema, exporter))
    return ExportResult(
        provider=limits.provider,
        tools=tuple(exported),
        refused=tuple(refused),
        adjusted=tuple(exporter.adjusted),
    )


def to_openai_tools(
    tools: Mapping[str, Exportable],
    *,
    api: Literal["chat", "responses"] = "chat",
    strict: bool = False,
    strict_rules: StrictRules = DEFAULT_STRICT_RULES,
    limits: ProviderLimits = OPENAI_LIMITS,
    description_overflow: Literal["cut", "refuse"] = "cut",
) -> ExportResult:
    """The tools (registered name -> tool, as ``rt.tools()`` or ``AgentSurface.model_tools()``
    give them) as OpenAI function tools.

    ``api="chat"`` gives ``{"type": "function", "function": {"name", "description",
    "parameters"}}``; ``api="responses"`` gives the flat ``{"type": "function", "name", ...}``
    with ``strict`` always present (that API assumes strict when it is absent). With
    ``strict=True`` each tool whose schema strict mode can express (within ``strict_rules``)
    gets its schema rewritten for it and ``strict: true``; the others get ``strict: false``;
    both are reported in ``adjusted``. Never raises for any tool.
    """
    if api not in ("chat", "responses"):
        raise ValueError(f"unknown OpenAI API {api!r}: use 'chat' or 'responses'")

    def build(
        name: str, description: str | None, schema: dict[str, Any], exporter: _Exporter
    ) -> dict[str, Any]:
        function: dict[str, Any] = {"name": name}
        if description is not None:
            function["description"] = description
        function["parameters"] = schema
        is_strict: bool | None = None
        if strict:
            conversion = to_strict_schema(schema, strict_rules)
            is_strict = conversion.schema is not None
            if conversion.schema is None:
                exporter.adjusted.append(
                    ExportAdjustment(
                        name=name, change=f"sent without strict mode: {conversion.problem}"
                    )
                )
            else:
                function["parameters"] = conversion.schema
                if conversion.changes:
                    exporter.adjusted.append(
                        ExportAdjustment(name=name, change=f"strict mode: {conversion.summary}")
                    )
        if api == "responses":
            return {"type": "function", **function, "strict": bool(is_strict)}
        if is_strict is not None:
            function["strict"] = is_strict
        return {"type": "function", "function": function}

    return _export(tools, limits, description_overflow, build)


def to_anthropic_tools(
    tools: Mapping[str, Exportable],
    *,
    limits: ProviderLimits = ANTHROPIC_LIMITS,
    description_overflow: Literal["cut", "refuse"] = "cut",
) -> ExportResult:
    """The tools (registered name -> tool) as Anthropic tools:
    ``{"name", "description", "input_schema"}``. Never raises for any tool."""

    def build(
        name: str, description: str | None, schema: dict[str, Any], exporter: _Exporter
    ) -> dict[str, Any]:
        tool: dict[str, Any] = {"name": name}
        if description is not None:
            tool["description"] = description
        tool["input_schema"] = schema
        return tool

    return _export(tools, limits, description_overflow, build)
