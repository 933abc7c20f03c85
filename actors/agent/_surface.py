"""The model-facing surface over a runtime: what the model sees and what gates its calls.

``agent = AgentSurface(rt, approve=...)`` gives the tools to hand to the model
(:meth:`AgentSurface.model_tools`, :meth:`AgentSurface.export_tools`: the registered MCP tools
and the resource and prompt tools of the configured catalog shape) and makes the model's calls
(:meth:`AgentSurface.call_for_model`): the permission decision (rules, profile, trust and risk,
the host's ``approve`` callback, trust on first use), the call through ``rt.call``, and the result
rendered for the model (text, media, resource links, structured content, the size budget, the
injection banner), never an exception.

The runtime handle keeps only the core (connections, calls, events); this surface is built over
its public methods and owns the approvals it was given.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, Literal

import attrs

from ...protocol._errors import (
    CallHookFailed,
    CallTimeout,
    InvalidToolOutput,
    McpError,
    RpcError,
    RuntimeClosed,
    ServerDisconnected,
    ServerUnavailable,
    ToolNotFound,
)
from ...protocol._types import CallToolResult
from ..config._callpolicy import failure_kind
from ..config._config import CatalogShape
from ..runtime._hooks import CallHook, ToolCallRequest, as_hooks, run_hooks
from ..runtime._registry import RegisteredTool
from ..runtime._runtime import USE_DEFAULT, Runtime, RuntimeState, _UseDefault
from ..runtime._session import ProgressCallback
from ..runtime._tenants import Tenant, as_tenant
from ._catalog import CATALOG_TOOL_NAMES, Catalog, ModelTool, ModelToolResult, ModelToolStatus
from ._export import ExportResult, to_anthropic_tools, to_openai_tools
from ._instructions import (
    DEFAULT_INSTRUCTIONS_CHARS,
    DEFAULT_SERVER_INSTRUCTIONS_CHARS,
    format_instructions,
)
from ._render import TextPart, output_base_for, output_dir_for
from ._risk import (
    ApprovalCallback,
    ApprovalRequest,
    ApprovalStore,
    CallGate,
    Decision,
    RiskLevel,
    assess,
    decide,
    gate_call,
    refusal_result,
    without_callback,
)
from ._search import SEARCH_TOOL_NAME, ToolSearch
from ._skills import SKILL_TOOL_NAMES, SkillGate, SkillShelf

__all__ = ["AgentSurface"]

logger = logging.getLogger("trio_mcp.agent")


@attrs.define(eq=False)
class AgentSurface:
    """The model's view of a :class:`~trio_mcp.actors.Runtime`.

    ``approve`` is asked when a call needs approval (the permission rules, the trust level and
    the tool's risk decide); it gets an :class:`ApprovalRequest` and returns True to allow the
    call. Without it every call that needs approval is refused; an exception it raises counts as
    a no (logged). ``output_dir`` is where binary results are saved (default
    ``<working_dir>/.trio-mcp/tool-outputs``, the working directory of the runtime's
    configuration or the current one). Every directory from the working directory down to it
    (for an ``output_dir`` elsewhere: the ``output_dir`` itself) must be a real directory: a
    symbolic link there, which a checked-in project could ship, is refused and the result says
    the output was not saved."""

    runtime: Runtime
    approve: ApprovalCallback | None = attrs.field(default=None, kw_only=True)
    output_dir: Path = attrs.field(kw_only=True)
    #: What asks while an MCP skill is active (see :class:`SkillGate`).
    skill_gate: SkillGate = attrs.field(factory=SkillGate, kw_only=True)
    #: Deferred loading for a large catalogue (see :class:`ToolSearch`); None: every tool is
    #: offered on every turn.
    tool_search: ToolSearch | None = attrs.field(default=None, kw_only=True)
    #: Call hooks around this surface's calls of MCP tools (after the permission decision,
    #: outside the runtime's own hooks), the first outermost: see :class:`CallHook`.
    hooks: tuple[CallHook, ...] = attrs.field(default=(), kw_only=True, converter=as_hooks)
    #: Who this surface's calls are for (a :class:`Tenant` or a tenant id; None: the
    #: operator): every MCP tool call (``rt.call(..., tenant=...)``, its hooks seeing it) and
    #: every resource and prompt read goes as that tenant. One surface per user.
    tenant: Tenant | None = attrs.field(default=None, kw_only=True, converter=as_tenant)
    _approvals: ApprovalStore = attrs.field(factory=ApprovalStore, init=False)
    _catalog: Catalog = attrs.field(init=False)
    _skills: SkillShelf = attrs.field(init=False)

    @output_dir.default
    def _default_output_dir(self) -> Path:
        return output_dir_for(self._working_dir())

    def _working_dir(self) -> Path:
        working_dir = self.runtime.config.working_dir
        return working_dir if working_dir is not None else Path.cwd()

    def __attrs_post_init__(self) -> None:
        self._catalog = Catalog(
            runtime=self.runtime,
            output_dir=self.output_dir,
            output_base=output_base_for(self.output_dir, self._working_dir()),
            tenant=self.tenant,
        )
        self._skills = SkillShelf(
            runtime=self.runtime,
            catalog=self._catalog,
            approve=self._approver,
            gate=self.skill_gate,
        )

    def _approver(self) -> ApprovalCallback | None:
        return self.approve

    @property
    def skills(self) -> SkillShelf:
        """The MCP skills the model can use (see :mod:`trio_mcp.actors.agent._skills`):
        ``await agent.skills.refresh()`` lists them, ``agent.skills.prompt_text()`` is the
        catalogue for the system prompt; while it holds a skill, :meth:`model_tools` offers
        ``activate_mcp_skill`` and ``read_mcp_skill_file``."""
        return self._skills

    @property
    def approvals(self) -> ApprovalStore:
        """The approvals given through the host's ``approve`` callback (trust on first use):
        ``agent.approvals.revoke(server)`` forgets them."""
        return self._approvals

    def instructions_prompt(
        self,
        *,
        servers: Collection[str] | None = None,
        max_chars: int = DEFAULT_INSTRUCTIONS_CHARS,
        per_server_chars: int = DEFAULT_SERVER_INSTRUCTIONS_CHARS,
    ) -> str:
        """The instructions of the ready servers (``servers``: only those), screened by the
        injection scan, as a block to append to the model's system prompt (the host's opt-in;
        nothing adds them otherwise): each server's text in an ``<mcp_server_instructions
        server="NAME">`` tag, marked as untrusted data unless the server is ``trusted``, cut at
        ``per_server_chars``, the whole at most ``max_chars`` (servers left out are named);
        ``""`` when no server gave any. Rebuild it when a server connects again."""
        found = self.runtime.instructions()
        if servers is not None:
            found = {name: value for name, value in found.items() if name in servers}
        trusted = {
            name
            for name in found
            if (config := self.runtime.server_config(name)) is not None
            and config.trust_level == "trusted"
        }
        return format_instructions(
            found, trusted=trusted, max_chars=max_chars, per_server_chars=per_server_chars
        )

    def _shape(self, shape: CatalogShape | _UseDefault | None) -> CatalogShape | None:
        return self.runtime.config.catalog_shape if isinstance(shape, _UseDefault) else shape

    def model_tools(
        self,
        *,
        shape: CatalogShape | _UseDefault | None = USE_DEFAULT,
        ready_only: bool = False,
    ) -> Mapping[str, ModelTool]:
        """The tools to hand to the model, name -> :class:`ModelTool` (name, description, input
        schema, risk), in name order: the registered MCP tools (as ``rt.tools()`` gives them)
        plus the resource and prompt tools of ``shape`` (default ``config.catalog_shape``; None
        for none), offered only while a connected server declares resources (and is not hidden
        by ``resources: false``) or prompts. Route the model's calls of all of them to
        :meth:`call_for_model`. Raises ``ValueError`` for an unknown shape.

        With :attr:`tool_search`, the MCP tools that are deferred are left out and the search
        tool ``search_mcp_tools`` is offered instead (:class:`ToolSearch`)."""
        tools = self._all_model_tools(shape, ready_only)
        if self.tool_search is not None:
            return self.tool_search.visible(tools)
        return tools

    def tool_index(self) -> str:
        """With :attr:`tool_search`, the index of the deferred tools (one line each: name and
        first sentence) for the system prompt (:meth:`ToolSearch.index_text`); ``""`` without
        it or when nothing is deferred."""
        if self.tool_search is None:
            return ""
        return self.tool_search.index_text(self._all_model_tools(USE_DEFAULT, False))

    def _all_model_tools(
        self, shape: CatalogShape | _UseDefault | None, ready_only: bool
    ) -> Mapping[str, ModelTool]:
        out: dict[str, ModelTool] = {}
        for name, registered in self.runtime.tools(ready_only=ready_only).items():
            trusted = self._catalog.trusted(registered.server)
            out[name] = ModelTool.of(registered, risk=assess(registered.tool, trusted=trusted))
        for tool in self._catalog.tool_definitions(self._shape(shape)):
            out[tool.name] = ModelTool(
                name=tool.name, tool=tool, risk=RiskLevel.READ_ONLY, kind="catalog"
            )
        for tool in self._skills.tool_definitions():
            out[tool.name] = ModelTool(
                name=tool.name, tool=tool, risk=RiskLevel.READ_ONLY, kind="catalog"
            )
        return MappingProxyType(dict(sorted(out.items())))

    def export_tools(
        self,
        provider: Literal["openai", "anthropic"],
        *,
        shape: CatalogShape | _UseDefault | None = USE_DEFAULT,
        ready_only: bool = False,
        api: Literal["chat", "responses"] = "chat",
        strict: bool = False,
    ) -> ExportResult:
        """:meth:`model_tools` in a model provider's shape (``"openai"``: function tools, with
        ``api`` and ``strict`` as :func:`to_openai_tools` takes them; ``"anthropic"``). A tool
        the provider would reject is left out and named in ``refused``. Raises ``ValueError``
        for an unknown provider."""
        tools = self.model_tools(shape=shape, ready_only=ready_only)
        if provider == "openai":
            return to_openai_tools(tools, api=api, strict=strict)
        if provider == "anthropic":
            return to_anthropic_tools(tools)
        raise ValueError(f"unknown provider {provider!r}: use 'openai' or 'anthropic'")

    async def call_for_model(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | _UseDefault | None = USE_DEFAULT,
        progress: ProgressCallback | None = None,
        wait_ready: float | None = None,
    ) -> ModelToolResult:
        """Make the model's call of ``name`` (an MCP tool or a resource or prompt tool of
        :meth:`model_tools`) and return what the model should read. Does not raise for a failure
        of the call (every outcome is a :class:`ModelToolResult` with a ``status``) unless the
        error policy says ``raise`` (``RuntimeConfig.error_policy_for``): then a tool error
        raises :class:`ToolExecutionError`, and a timeout, an unknown outcome or a call not
        sent raises its own error.

        First the permission decision: the rules (``config.permission_rules``, first match
        wins), the profile (``public_gateway`` and ``daemon`` deny the ``mcp.call`` capability
        unless allowed) and the tool's risk (trust level and annotations). ``ask`` asks the
        host's ``approve`` callback (none: refused); an approval holds for that definition of
        the tool until a re-listing changes it (then the host is asked again and told what
        changed). A refused call is not sent: the model reads the decision and its reason. Then
        the call, through the surface's ``hooks`` (then as ``rt.call``, with ``timeout``,
        ``progress`` and ``wait_ready``, the runtime's own hooks and retries), and the
        result rendered (text, media, resource links, structured content, the size budget,
        binary payloads saved under :attr:`output_dir`; the injection banner for servers that
        are not trusted). A result whose structured content breaks the tool's ``outputSchema``
        is a tool error (status ``invalid_output``) that gives the reasons before the result.
        ToolNotFound, ServerUnavailable, CallTimeout, ServerDisconnected,
        RpcError, CallHookFailed and RuntimeClosed become results too."""
        if self.runtime.state is not RuntimeState.OPEN:
            return _failure(name, "closed", "the MCP runtime is closed; the call was not made")
        if arguments is None:
            arguments = {}
        given: object = arguments  # hosts pass what the model sent, which may be anything
        if not isinstance(given, Mapping):
            return _failure(
                name,
                "invalid",
                f"the arguments must be a JSON object, got {type(arguments).__name__}",
            )
        if name in CATALOG_TOOL_NAMES:
            return await self._catalog_for_model(name, arguments)
        if name in SKILL_TOOL_NAMES:
            return await self._skills.run_tool(name, arguments)
        search = self.tool_search
        if search is not None and name == SEARCH_TOOL_NAME:
            return search.run(self._all_model_tools(USE_DEFAULT, False), arguments)
        try:
            registered = await self.runtime.lookup(name, wait_ready=wait_ready)
        except ServerUnavailable as exc:
            self._raise_if_policy_says(name, exc)
            return _failure(name, "unavailable", str(exc))
        except ToolNotFound:
            return _failure(
                name, "not_found", f"there is no tool named {name!r}; use one of the tools offered"
            )
        if search is not None:  # a deferred tool called by name: offered from now on
            search.load((name,))
        decision = await self.authorize(registered, arguments)
        if decision.outcome != "allow":
            return await self._refused(name, decision, registered.server)

        async def send(call: ToolCallRequest) -> CallToolResult:
            return await self.runtime.call(
                name,
                call.arguments,
                timeout=timeout,
                progress=progress,
                wait_ready=wait_ready,
                meta=call.meta or None,
                tenant=call.tenant,
            )

        request = ToolCallRequest(
            name=name,
            server=registered.server,
            tool=registered.wire_name,
            arguments=arguments,
            via="agent",
            tenant=self.tenant,
        )
        try:
            result = await run_hooks(self.hooks, request, send)
        except InvalidToolOutput as exc:
            return await self._invalid_output(name, exc, decision, registered.server)
        except McpError as exc:
            self._raise_if_policy_says(name, exc)
            return _failure(name, _status_of(exc), str(exc), decision, registered.server)
        if result.is_error:
            policy = self.runtime.config.error_policy_for(name, registered.server)
            if policy.tool_error == "raise":
                result.raise_for_error(server=registered.server)
        rendered = await self._catalog.render(result, registered.server)
        return ModelToolResult(
            name=name,
            text=rendered.text,
            parts=rendered.parts,
            is_error=rendered.is_error,
            status="tool_error" if rendered.is_error else "ok",
            decision=decision,
            server=registered.server,
            rendered=rendered,
        )

    def _raise_if_policy_says(self, name: str, exc: McpError) -> None:
        """Raise ``exc`` to the host when the error policy of ``name`` says ``raise`` for its
        kind of failure (a timeout, an unknown outcome, a call not sent)."""
        kind = failure_kind(exc)
        if kind is None:
            return
        server = getattr(exc, "server", None)
        policy = self.runtime.config.error_policy_for(name, server)
        if getattr(policy, kind) == "raise":
            raise exc

    async def authorize(
        self, tool: RegisteredTool, arguments: Mapping[str, Any] | None = None
    ) -> Decision:
        """The permission decision on a call of the registered ``tool`` with ``arguments``, made
        as :meth:`call_for_model` makes it (the rules, the profile, trust and risk, the
        ``approve`` callback when the decision is ``ask``, approvals remembered per definition):
        ``allow`` or ``deny``, never ``ask``. For hosts (and ``trio-mcp call``) that make the
        call themselves with ``rt.call`` once it is allowed. An ``allow`` turns into a ``deny``
        when the tool's definition changed while the approval was pending."""
        server = self.runtime.server_config(tool.server)
        assert server is not None  # a registered tool's server is configured
        gate = gate_call(
            server=tool.server,
            registered_name=tool.name,
            tool=tool.tool,
            trusted=server.trust_level == "trusted",
            rules=self.runtime.config.permission_rules,
            profile=self.runtime.config.profile,
            allowed_capabilities=self.runtime.config.allowed_capabilities,
            store=self._approvals,
        )
        gated = self._skills.gate_reason(tool.name, risk=gate.risk)
        if gated is not None and gate.decision.outcome != "deny":
            decision = await self._gated(gated, gate.decision, gate.approval_request(arguments))
        else:
            decision = await self._settle(gate.decision, gate.approval_request(arguments), gate)
        current = self.runtime.tools().get(tool.name)
        if decision.outcome == "allow" and (current is None or current.tool != tool.tool):
            decision = Decision(
                outcome="deny",
                reason="the tool's definition changed while its approval was pending; call it "
                "again to have the new definition approved",
                rule=decision.rule,
            )
        return decision

    async def authorize_host_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        risk: RiskLevel | None = None,
    ) -> Decision | None:
        """The skill gate on one of the host's own tools (its shell, a sub-agent that can run
        commands), for a call the host's own permissions already allow: None when the gate does
        not apply (no MCP skill is active, or ``name`` is not in ``skill_gate.tools`` and
        ``risk`` is under ``skill_gate.min_risk``); otherwise the host's ``approve`` callback is
        asked (an :class:`ApprovalRequest` with ``server`` ``""``, the active skills in
        ``skills`` and the reason), and the answer is ``allow`` or ``deny`` (deny without a
        callback). Nothing is remembered: the next call asks again."""
        reason = self._skills.gate_reason(name, risk=risk)
        if reason is None:
            return None
        request = ApprovalRequest(
            server="",
            tool=name,
            registered_name=name,
            risk=risk if risk is not None else RiskLevel.EXEC,
            arguments=dict(arguments or {}),
        )
        return await self._gated(
            reason, Decision(outcome="allow", reason="the host's tool"), request
        )

    async def _gated(self, reason: str, decision: Decision, request: ApprovalRequest) -> Decision:
        """Ask about a call the skill gate holds (``reason``), whatever ``decision`` (not a
        denial) said; the answer is not remembered."""
        asked = Decision(outcome="ask", reason=f"{reason} ({decision.reason})", rule=decision.rule)
        request = attrs.evolve(request, reason=asked.reason, skills=self._skills.active_ids())
        return await self._settle(asked, request, None)

    async def _catalog_for_model(self, name: str, arguments: Mapping[str, Any]) -> ModelToolResult:
        """A resource or prompt tool: read-only, but still under the rules and the profile's
        ``mcp.call`` denial."""
        decision = decide(
            name,
            self.runtime.config.permission_rules,
            profile=self.runtime.config.profile,
            risk=RiskLevel.READ_ONLY,
            allowed_capabilities=self.runtime.config.allowed_capabilities,
        )
        server = arguments.get("server")
        server_name = server if isinstance(server, str) else ""
        action = arguments.get("action")
        reads = name in ("read_mcp_resource", "get_mcp_prompt") or (
            name in ("mcp_resources", "mcp_prompts") and action in ("read", "get")
        )
        gated = self._skills.gate_reason(name, reads=True, read_from=server_name or None)
        if reads and gated is not None and decision.outcome != "deny":
            request = ApprovalRequest(
                server=server_name,
                tool=name,
                registered_name=name,
                risk=RiskLevel.READ_ONLY,
                arguments=dict(arguments),
            )
            decision = await self._gated(gated, decision, request)
        elif decision.outcome == "ask":
            definition = next(
                (
                    tool
                    for shape in ("echo", "agentao")
                    for tool in self._catalog.tool_definitions(shape)
                    if tool.name == name
                ),
                None,
            )
            request = ApprovalRequest(
                server=server_name,
                tool=name,
                registered_name=name,
                risk=RiskLevel.READ_ONLY,
                arguments=dict(arguments),
                reason=decision.reason,
                definition=definition,
                rule=decision.rule,
            )
            decision = await self._settle(decision, request, None)
        if decision.outcome != "allow":
            return await self._refused(name, decision, server_name or None)
        result = await self._catalog.run_tool(name, arguments)
        return attrs.evolve(result, decision=decision)

    async def _settle(
        self, decision: Decision, request: ApprovalRequest, gate: CallGate | None
    ) -> Decision:
        """An ``ask`` answered by the host's approval callback (allow or deny); other decisions
        as they are. A yes is remembered for the tool's definition when ``gate`` is given."""
        if decision.outcome != "ask":
            return decision
        approve = self.approve
        if approve is None:
            return without_callback(decision)
        try:
            answer = await approve(request)
        except Exception:  # the host's callback: a failure is a no
            logger.exception("the approval callback failed for %s; the call is refused", request)
            return Decision(
                outcome="deny",
                reason=f"approval needed ({decision.reason}) but the host's approval callback "
                "failed",
                rule=decision.rule,
            )
        if answer is not True:
            return Decision(
                outcome="deny",
                reason=f"the user did not approve the call ({decision.reason})",
                rule=decision.rule,
            )
        if gate is not None:
            self._approvals.approve(gate.server, gate.tool)
        return Decision(
            outcome="allow", reason=f"approved by the user ({decision.reason})", rule=decision.rule
        )

    async def _invalid_output(
        self, name: str, exc: InvalidToolOutput, decision: Decision, server: str
    ) -> ModelToolResult:
        """A result whose structured content breaks the tool's ``outputSchema``: a tool error,
        first the reasons, then the result as the server sent it."""
        note = (
            f"[the tool's result does not match its outputSchema, so it is an error: "
            f"{'; '.join(exc.problems)}]"
        )
        result: CallToolResult = exc.result
        rendered = await self._catalog.render(result, server)
        return ModelToolResult(
            name=name,
            text=f"{note}\n{rendered.text}",
            parts=(TextPart(text=note), *rendered.parts),
            is_error=True,
            status="invalid_output",
            decision=decision,
            server=server,
            rendered=rendered,
        )

    async def _refused(self, name: str, decision: Decision, server: str | None) -> ModelToolResult:
        result = refusal_result(name, decision)
        logger.info("call %s refused (%s): %s", name, decision.outcome, decision.reason)
        text = result.text
        return ModelToolResult(
            name=name,
            text=text,
            parts=(TextPart(text=text),),
            is_error=True,
            status="refused",
            decision=decision,
            server=server,
        )


def _status_of(exc: McpError) -> ModelToolStatus:
    """The status of a model's call that failed with ``exc``."""
    if isinstance(exc, ToolNotFound):
        return "not_found"
    if isinstance(exc, ServerUnavailable):
        return "unavailable"
    if isinstance(exc, CallTimeout):
        return "timeout"
    if isinstance(exc, ServerDisconnected):
        return "disconnected"
    if isinstance(exc, RpcError):
        return "rpc_error"
    if isinstance(exc, RuntimeClosed):
        return "closed"
    if isinstance(exc, CallHookFailed):
        return "hook_error"
    return "error"


_FAILURE_TEXT: Final[Mapping[str, str]] = {
    "not_found": "the tool was not found",
    "unavailable": "its MCP server is not available now",
    "timeout": "the MCP server did not answer in time",
    "disconnected": "the MCP server disconnected",
    "rpc_error": "the MCP server answered with an error",
    "hook_error": "a call hook of the host failed",
    "closed": "the MCP runtime is closed",
    "invalid": "the call was not valid",
    "error": "the MCP server could not be used",
}


def _failure(
    name: str,
    status: ModelToolStatus,
    message: str,
    decision: Decision | None = None,
    server: str | None = None,
) -> ModelToolResult:
    """A model-readable result for a call that failed before or while it was made."""
    what = _FAILURE_TEXT.get(status, status)
    text = f"The call to {name} failed ({status}: {what}): {message}"
    return ModelToolResult(
        name=name,
        text=text,
        parts=(TextPart(text=text),),
        is_error=True,
        status=status,
        decision=decision,
        server=server,
    )
