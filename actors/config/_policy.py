"""Policy value types of the configuration: permission rules, profiles and budgets.

These are plain values that a configuration holds; what they mean for a call (risk levels,
decisions, approvals) is decided by :mod:`trio_mcp.actors.agent`.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from typing import Any, Final, Literal, get_args

import attrs

from ...protocol._codec import json_kind
from ...protocol._errors import ConfigError

__all__ = [
    "CAPABILITY_MCP_CALL",
    "DEFAULT_RENDER_BUDGET",
    "DENYING_PROFILES",
    "MAX_BLOB_BYTES",
    "PROFILES",
    "Outcome",
    "PermissionRule",
    "Profile",
    "parse_rules",
]

#: Characters of text the model gets from one result by default.
DEFAULT_RENDER_BUDGET: Final = 20_000
#: Blobs bigger than this (judged from their base64 length) are reported, never decoded.
MAX_BLOB_BYTES: Final = 10 * 1024 * 1024

#: The capability every MCP tool call (and the resource and prompt tools) carries.
CAPABILITY_MCP_CALL: Final = "mcp.call"

#: What a permission rule or a decision says.
Outcome = Literal["allow", "deny", "ask"]
_OUTCOMES: Final = frozenset(get_args(Outcome))

#: The host's profile. ``public_gateway`` and ``daemon`` deny ``mcp.call`` unless allowed.
Profile = Literal["default", "public_gateway", "daemon"]
PROFILES: Final[tuple[str, ...]] = get_args(Profile)
#: The profiles that deny ``mcp.call`` unless it is allowed explicitly.
DENYING_PROFILES: Final = frozenset({"public_gateway", "daemon"})


# --------------------------------------------------------------------------- permission rules


@attrs.frozen(kw_only=True)
class PermissionRule:
    """``pattern`` is an ``fnmatch`` glob over registered names (case-sensitive, such as
    ``mcp_github_get_*``); ``decision`` is ``allow``, ``deny`` or ``ask``. Raises ``ValueError``
    for an empty pattern or an unknown decision."""

    pattern: str
    decision: Outcome

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.pattern, str) or not self.pattern:
            raise ValueError(f"a permission rule needs a non-empty pattern, got {self.pattern!r}")
        if self.decision not in _OUTCOMES:
            raise ValueError(
                f"permission rule {self.pattern!r}: unknown decision {self.decision!r} "
                f"(expected allow, deny or ask)"
            )

    def matches(self, name: str) -> bool:
        """Whether the rule applies to the registered name ``name``."""
        return fnmatch.fnmatchcase(name, self.pattern)


def parse_rules(
    items: Iterable[Any], *, source: str = "permissions.rules"
) -> tuple[PermissionRule, ...]:
    """Rules from configuration entries ``{"tool": "<glob>", "action": "allow|deny|ask"}``.

    Raises :class:`ConfigError` listing every bad entry (with its position under ``source``).
    """
    rules: list[PermissionRule] = []
    problems: list[tuple[str, str]] = []
    for index, item in enumerate(items):
        where = f"{source}[{index}]"
        if not isinstance(item, Mapping):
            problems.append((where, f"expected an object, got {json_kind(item)}"))
            continue
        pattern, action = item.get("tool"), item.get("action")
        if not isinstance(pattern, str) or not pattern:
            problems.append((f"{where}.tool", "expected a non-empty glob such as 'mcp_github_*'"))
        elif action == "allow" or action == "deny" or action == "ask":
            rules.append(PermissionRule(pattern=pattern, decision=action))
        else:
            problems.append((f"{where}.action", f"expected allow, deny or ask, got {action!r}"))
    if problems:
        detail = "; ".join(f"{where}: {message}" for where, message in problems)
        raise ConfigError(f"invalid permission rules: {detail}", problems=tuple(problems))
    return tuple(rules)
