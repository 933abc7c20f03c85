"""Trust, risk levels and permission decisions for tool calls.

Trust is decided per server (its configuration's ``trust_level``), never by what the server says
about itself: MCP tool annotations are hints, and a server that is not trusted could lie.

- :func:`assess` gives a tool's :class:`RiskLevel`, ``read_only`` < ``exec`` < ``dangerous``.
  Every tool starts at ``exec``. ``destructiveHint: true`` raises it to ``dangerous`` (on any
  server: a hint can always add caution). ``readOnlyHint: true`` lowers it to ``read_only`` only
  on a trusted server, and only when the tool is not also marked destructive. A hint that is not
  a boolean is ignored.
- :func:`decide` turns a registered name, the host's :class:`PermissionRule` list, the profile
  and the risk into a :class:`Decision`: ``allow``, ``deny`` or ``ask``. Rules are globs over
  registered names (``mcp_github_get_*``), first match wins. The ``public_gateway`` and ``daemon``
  profiles deny the ``mcp.call`` capability unless the host allows it (a rule whose ``allow``
  matches the tool, or ``"mcp.call"`` among the allowed capabilities).
- Trust on first use: :class:`ToolFingerprint` is a sha256 over the canonical JSON of the parts
  of a definition a model sees or a decision uses (name, title, description, input schema,
  annotations). :class:`ApprovalStore` remembers which definition was approved for each
  ``(server, tool)``; after a re-listing changes it, the tool needs a new approval and
  :func:`diff_definitions` says what changed.
- :func:`gate_call` puts it together for one call (approvals are remembered for the default
  ``ask`` of untrusted servers; an explicit ``ask`` rule and ``dangerous`` tools ask each call).
  The runtime asks the host's :data:`ApprovalCallback` when the gate says ``ask`` (no callback
  means deny: :func:`without_callback`), and returns :func:`refusal_result` to the model for a
  refused call.

Everything here is pure and synchronous except the callback type, which the runtime awaits.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from enum import StrEnum
from typing import Any, Final

import attrs

from ...protocol._codec import unstructure
from ...protocol._types import CallToolResult, TextContent, Tool
from ..config._policy import (
    CAPABILITY_MCP_CALL,
    DENYING_PROFILES,
    PROFILES,
    Outcome,
    PermissionRule,
    Profile,
)

__all__ = [
    "DEFINITION_PARTS",
    "ApprovalCallback",
    "ApprovalNeed",
    "ApprovalRequest",
    "ApprovalStore",
    "CallGate",
    "Decision",
    "RiskLevel",
    "ToolFingerprint",
    "assess",
    "decide",
    "diff_definitions",
    "gate_call",
    "refusal_result",
    "without_callback",
]


class RiskLevel(StrEnum):
    """How much harm a tool call can do, in order: ``READ_ONLY < EXEC < DANGEROUS``.

    Each level *is* its configuration spelling (``"read_only"``, ``"exec"``, ``"dangerous"``):
    it compares equal to that string and hashes like it, so a host can write
    ``request.risk == "dangerous"`` or use it as a JSON value. Ordering goes by risk, not by
    alphabet, with levels and their spellings alike (``request.risk >= "exec"``); ordering
    against any other value raises ``TypeError``.
    """

    READ_ONLY = "read_only"
    EXEC = "exec"
    DANGEROUS = "dangerous"

    @property
    def rank(self) -> int:
        """0, 1 or 2: the position of the level in ``READ_ONLY < EXEC < DANGEROUS``."""
        return _RANKS[self.value]

    @classmethod
    def parse(cls, text: str) -> RiskLevel:
        """The level spelled ``text`` (any case); raises ``ValueError`` naming the allowed
        spellings."""
        try:
            return cls(text.lower())
        except (AttributeError, ValueError):
            allowed = ", ".join(str(level) for level in cls)
            raise ValueError(f"unknown risk level {text!r} (expected one of: {allowed})") from None

    def _other_rank(self, other: object) -> int:
        rank = _RANKS.get(other) if isinstance(other, str) else None
        if rank is None:
            allowed = ", ".join(repr(name) for name in _RANKS)
            raise TypeError(
                f"a risk level is ordered only against another RiskLevel or one of {allowed}, "
                f"not {other!r}"
            )
        return rank

    def __lt__(self, other: object) -> bool:
        return self.rank < self._other_rank(other)

    def __le__(self, other: object) -> bool:
        return self.rank <= self._other_rank(other)

    def __gt__(self, other: object) -> bool:
        return self.rank > self._other_rank(other)

    def __ge__(self, other: object) -> bool:
        return self.rank >= self._other_rank(other)


#: Each risk level's spelling -> its position in the order.
_RANKS: Final[Mapping[str, int]] = {"read_only": 0, "exec": 1, "dangerous": 2}


def _hint(tool: Tool, name: str) -> bool:
    """True only for a hint that is the boolean ``true`` (anything else is ignored)."""
    annotations = tool.annotations
    value = getattr(annotations, name, None) if annotations is not None else None
    return value is True


def assess(tool: Tool, *, trusted: bool) -> RiskLevel:
    """The risk level of ``tool`` on a server that is ``trusted`` or not.

    ``exec`` by default; ``dangerous`` when ``destructiveHint`` is true; ``read_only`` when the
    server is trusted and ``readOnlyHint`` is true (and ``destructiveHint`` is not). Never raises.
    """
    if _hint(tool, "destructive_hint"):
        return RiskLevel.DANGEROUS
    if trusted and _hint(tool, "read_only_hint"):
        return RiskLevel.READ_ONLY
    return RiskLevel.EXEC


@attrs.frozen(kw_only=True)
class Decision:
    """The answer for one call: ``outcome``, the ``reason`` (said to the host and, for a refusal,
    to the model), and the rule that decided it, if one did."""

    outcome: Outcome
    reason: str
    rule: PermissionRule | None = None


def decide(
    name: str,
    rules: Iterable[PermissionRule],
    *,
    profile: Profile = "default",
    risk: RiskLevel = RiskLevel.EXEC,
    trusted: bool = False,
    allowed_capabilities: Iterable[str] = (),
) -> Decision:
    """Decide a call of the registered tool ``name``.

    In order: the first rule that matches wins (``deny`` denies; ``allow`` allows, which also
    lifts the profile's capability denial for this tool; ``ask`` asks, if the profile lets the
    capability through). With no ``allow`` rule, the ``public_gateway`` and ``daemon`` profiles
    deny unless ``"mcp.call"`` is in ``allowed_capabilities``. Without a matching rule: a
    ``read_only`` tool is allowed, an ``exec`` tool is allowed on a trusted server and asked
    otherwise, a ``dangerous`` tool is asked. Raises ``ValueError`` for an unknown profile.
    """
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r} (expected one of: {', '.join(PROFILES)})")
    rule = next((r for r in rules if r.matches(name)), None)
    if rule is not None and rule.decision == "deny":
        return Decision(outcome="deny", reason=f"denied by the rule {rule.pattern!r}", rule=rule)
    if rule is not None and rule.decision == "allow":
        return Decision(outcome="allow", reason=f"allowed by the rule {rule.pattern!r}", rule=rule)
    if profile in DENYING_PROFILES and CAPABILITY_MCP_CALL not in set(allowed_capabilities):
        return Decision(
            outcome="deny",
            reason=f"the {profile!r} profile denies the {CAPABILITY_MCP_CALL!r} capability; "
            f"allow it explicitly (the capability, or an 'allow' rule matching {name!r})",
            rule=rule,
        )
    if rule is not None:
        return Decision(outcome="ask", reason=f"the rule {rule.pattern!r} asks", rule=rule)
    if risk == RiskLevel.READ_ONLY:
        return Decision(outcome="allow", reason="a read-only tool")
    if risk == RiskLevel.EXEC and trusted:
        return Decision(outcome="allow", reason="a tool of a trusted server")
    if risk == RiskLevel.DANGEROUS:
        return Decision(outcome="ask", reason="the tool is marked destructive (dangerous)")
    return Decision(outcome="ask", reason="tools of servers that are not trusted need approval")


# --------------------------------------------------------------------------- fingerprints


#: The parts of a definition that fingerprints cover and diffs name, in this order.
DEFINITION_PARTS: Final = ("name", "title", "description", "input_schema", "annotations")


def _parts(tool: Tool) -> dict[str, Any]:
    return {
        "name": tool.name,
        "title": tool.title,
        "description": tool.description,
        "input_schema": tool.input_schema,
        "annotations": None if tool.annotations is None else unstructure(tool.annotations),
    }


def _canonical(value: Any) -> str:
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


@attrs.frozen
class ToolFingerprint:
    """A stable digest (64 hex digits of sha256) of a definition's model-visible parts.

    Independent of key order in the schema and of fields no model sees (icons, ``_meta``,
    output schema). Made with :meth:`of`.
    """

    digest: str

    @classmethod
    def of(cls, tool: Tool) -> ToolFingerprint:
        """The fingerprint of ``tool``. Raises ``ValueError`` if its schema holds a value JSON
        cannot express (NaN, infinity) or is nested too deep to serialize; tools that passed
        the registration checks never do."""
        try:
            text = _canonical(_parts(tool))
        except RecursionError:
            raise ValueError(f"tool {tool.name!r}: schema nested too deep to fingerprint") from None
        return cls(hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest())

    def __str__(self) -> str:
        return self.digest


def diff_definitions(old: Tool, new: Tool) -> tuple[str, ...]:
    """Which parts of the definition changed from ``old`` to ``new``, in the order of
    :data:`DEFINITION_PARTS` (``"description"``, ``"input_schema"``, ``"annotations"``...);
    empty when the two fingerprint alike."""
    before, after = _parts(old), _parts(new)
    return tuple(
        part for part in DEFINITION_PARTS if _canonical(before[part]) != _canonical(after[part])
    )


# --------------------------------------------------------------------------- approvals


@attrs.frozen(kw_only=True)
class ApprovalNeed:
    """Why a tool needs (new) approval; ``changed`` names what changed since it was approved
    (empty for a tool never approved)."""

    reason: str
    changed: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class _Approval:
    fingerprint: ToolFingerprint
    tool: Tool


@attrs.define(eq=False)
class ApprovalStore:
    """Approved tool definitions, in memory, per ``(server, tool name)``.

    An approval holds for the definition that was approved: once a re-listing changes the
    tool's description, schema, annotations, title or name, :meth:`needs_approval` says so and
    what changed. ``dangerous`` tools are approved call by call unless ``remember_dangerous``.
    """

    remember_dangerous: bool = False
    _approved: dict[tuple[str, str], _Approval] = attrs.field(factory=dict, init=False)

    def needs_approval(
        self, server: str, tool: Tool, *, risk: RiskLevel = RiskLevel.EXEC
    ) -> ApprovalNeed | None:
        """None when this exact definition is approved; otherwise why approval is needed."""
        if risk == RiskLevel.DANGEROUS and not self.remember_dangerous:
            return ApprovalNeed(reason="dangerous tools are approved call by call")
        approval = self._approved.get((server, tool.name))
        if approval is None:
            return ApprovalNeed(reason="the tool has not been approved yet")
        if approval.fingerprint == ToolFingerprint.of(tool):
            return None
        changed = diff_definitions(approval.tool, tool)
        return ApprovalNeed(
            reason=f"the tool's definition changed since it was approved ({', '.join(changed)})",
            changed=changed,
        )

    def approve(self, server: str, tool: Tool) -> ToolFingerprint:
        """Remember ``tool``'s current definition as approved; returns its fingerprint."""
        fingerprint = ToolFingerprint.of(tool)
        self._approved[(server, tool.name)] = _Approval(fingerprint=fingerprint, tool=tool)
        return fingerprint

    def approved(self, server: str, tool_name: str) -> ToolFingerprint | None:
        """The fingerprint approved for the tool, or None."""
        approval = self._approved.get((server, tool_name))
        return None if approval is None else approval.fingerprint

    def revoke(self, server: str, tool_name: str | None = None) -> None:
        """Forget the approval of one tool, or of every tool of ``server``."""
        for key in [k for k in self._approved if k[0] == server]:
            if tool_name is None or key[1] == tool_name:
                del self._approved[key]


@attrs.frozen(kw_only=True)
class ApprovalRequest:
    """What the host's approval callback is asked: the ``server``, its own ``tool`` name, the
    ``registered_name`` the model used, the ``risk``, the ``arguments`` of the call, ``changed``
    (the parts of the definition that changed since an earlier approval, empty otherwise),
    ``reason`` (why it is asked), the ``definition`` itself (to show the user), the ``rule``
    that asks (None when the trust level or the risk does), and ``skills``: the ids of the MCP
    skills whose activity makes this call ask (the skill gate; empty otherwise: the reason
    then says which skills and why)."""

    server: str
    tool: str
    registered_name: str
    risk: RiskLevel
    arguments: Mapping[str, Any]
    changed: tuple[str, ...] = ()
    reason: str = ""
    definition: Tool | None = None
    rule: PermissionRule | None = None
    skills: tuple[str, ...] = ()


#: The host's answer to an approval request: True approves the call (and, through the store,
#: this definition of the tool), False refuses it. Exceptions count as a refusal.
ApprovalCallback = Callable[[ApprovalRequest], Awaitable[bool]]


@attrs.frozen(kw_only=True)
class CallGate:
    """The verdict on one call before it is sent: the ``decision``, the tool's ``risk`` and
    ``changed`` (parts changed since an earlier approval)."""

    server: str
    registered_name: str
    tool: Tool
    risk: RiskLevel
    decision: Decision
    changed: tuple[str, ...] = ()

    def approval_request(self, arguments: Mapping[str, Any] | None) -> ApprovalRequest:
        """The request to pass to the host's callback when the decision is ``ask``."""
        return ApprovalRequest(
            server=self.server,
            tool=self.tool.name,
            registered_name=self.registered_name,
            risk=self.risk,
            arguments=dict(arguments or {}),
            changed=self.changed,
            reason=self.decision.reason,
            definition=self.tool,
            rule=self.decision.rule,
        )


def gate_call(
    *,
    server: str,
    registered_name: str,
    tool: Tool,
    trusted: bool,
    rules: Iterable[PermissionRule] = (),
    profile: Profile = "default",
    allowed_capabilities: Iterable[str] = (),
    store: ApprovalStore | None = None,
) -> CallGate:
    """Assess the risk, decide, and apply trust on first use, for one call.

    The default ``ask`` (a tool of a server that is not trusted) becomes ``allow`` when ``store``
    holds an approval of this exact definition (and the tool is not dangerous); it stays ``ask``
    with ``changed`` filled when the definition changed after approval. An ``ask`` that comes
    from an explicit rule asks on every call. The runtime then calls the host's callback with
    :meth:`CallGate.approval_request`, records a yes with ``store.approve``, and answers a no
    (or a missing callback: :func:`without_callback`) with :func:`refusal_result`.
    Raises ``ValueError`` for an unknown profile.
    """
    risk = assess(tool, trusted=trusted)
    decision = decide(
        registered_name,
        rules,
        profile=profile,
        risk=risk,
        trusted=trusted,
        allowed_capabilities=allowed_capabilities,
    )
    changed: tuple[str, ...] = ()
    if decision.outcome == "ask" and decision.rule is None and store is not None:
        need = store.needs_approval(server, tool, risk=risk)
        if need is None:
            decision = Decision(
                outcome="allow",
                reason="approved earlier, and the definition has not changed since",
                rule=decision.rule,
            )
        else:
            changed = need.changed
            decision = Decision(
                outcome="ask", reason=f"{decision.reason}; {need.reason}", rule=decision.rule
            )
    return CallGate(
        server=server,
        registered_name=registered_name,
        tool=tool,
        risk=risk,
        decision=decision,
        changed=changed,
    )


def without_callback(decision: Decision) -> Decision:
    """What an ``ask`` becomes when the host gave no approval callback: a denial (other
    decisions are returned unchanged)."""
    if decision.outcome != "ask":
        return decision
    return Decision(
        outcome="deny",
        reason=f"approval needed ({decision.reason}) but the host has no approval callback",
        rule=decision.rule,
    )


def refusal_result(registered_name: str, decision: Decision) -> CallToolResult:
    """The tool result the model gets for a call that was not made: ``isError`` true, and a
    text that gives the decision and its reason (so the model can tell the user or move on).
    Raises ``ValueError`` for an ``allow`` decision (that call is made)."""
    if decision.outcome == "allow":
        raise ValueError("refusal_result() is for calls that were not allowed")
    text = (
        f"The call to {registered_name} was refused (decision: {decision.outcome}) and was not "
        f"sent to the server: {decision.reason}."
    )
    return CallToolResult(content=(TextContent(text=text),), is_error=True)
