"""The tool-error policy: what becomes of a call that did not succeed.

A call can end four ways short of success, and each says something different about what the
server did:

- ``tool_error``: the tool ran and reported a failure (``isError: true``);
- ``timeout``: no answer in time (the request went out; the server was told to cancel it);
- ``unknown_outcome``: the connection ended after the request went out
  (``ServerDisconnected`` with ``sent=True``): the tool may or may not have run;
- ``not_sent``: the request never reached the server (``ServerDisconnected`` with
  ``sent=False``, or ``ServerUnavailable`` while the server is connecting or reconnecting).

For each, an :class:`ErrorPolicy` says whether the model reads it as text (``"model"``) or the
host gets the exception (``"raise"``): what ``AgentSurface.call_for_model`` does. Only a call that
was not sent may be tried again (``retries``, with a bounded backoff: ``rt.call`` does it); a call
whose outcome is unknown, that timed out, or whose tool reported an error is never sent again by
trio-mcp.

Policies are chosen per call by the registered name: the first :class:`ErrorRule` of
``RuntimeConfig.error_rules`` whose glob matches, else the server's ``ServerConfig.error_policy``,
else ``RuntimeConfig.error_policy``.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Iterable, Mapping
from typing import Any, Final, Literal, get_args

import attrs

from ...protocol._codec import json_kind
from ...protocol._errors import (
    CallTimeout,
    ConfigError,
    ServerDisconnected,
    ServerUnavailable,
)

__all__ = [
    "ERROR_ACTIONS",
    "ERROR_POLICY_KEYS",
    "MAX_RETRIES",
    "ErrorAction",
    "ErrorPolicy",
    "ErrorRule",
    "FailureKind",
    "as_error_rules",
    "failure_kind",
    "parse_error_policy",
    "parse_error_rules",
    "retryable",
]

#: What becomes of one kind of failure: the model reads it as text, or the host gets the error.
ErrorAction = Literal["model", "raise"]
ERROR_ACTIONS: Final[tuple[str, ...]] = get_args(ErrorAction)
#: The most retries a policy may ask for.
MAX_RETRIES: Final = 10
_OUTCOME_KEYS: Final = ("tool_error", "timeout", "unknown_outcome", "not_sent")
_NUMBER_KEYS: Final = ("retry_delay", "retry_max_delay", "retry_wait_ready")
#: The keys of an error policy in a configuration file (a rule adds ``tool``).
ERROR_POLICY_KEYS: Final = frozenset({*_OUTCOME_KEYS, "retries", *_NUMBER_KEYS})


def _policy_problems(policy: ErrorPolicy) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for key in _OUTCOME_KEYS:
        value = getattr(policy, key)
        if value not in ERROR_ACTIONS:
            hint = " (only a call that was not sent is retried: use retries)"
            found.append(
                (
                    key,
                    f"must be 'model' or 'raise', got {value!r}"
                    + (hint if value == "retry" else ""),
                )
            )
    retries: object = policy.retries
    if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= MAX_RETRIES:
        found.append(("retries", f"must be an integer from 0 to {MAX_RETRIES}, got {retries!r}"))
    for key in _NUMBER_KEYS:
        value = getattr(policy, key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            found.append((key, f"must be a number of seconds, got {value!r}"))
        elif not math.isfinite(value) or value < 0:
            found.append((key, f"must be a finite number of seconds >= 0, got {value!r}"))
    return found


@attrs.frozen(kw_only=True)
class ErrorPolicy:
    """What becomes of a call that did not succeed (see the module's docstring).

    ``tool_error``, ``timeout``, ``unknown_outcome`` and ``not_sent``: ``"model"`` (the default:
    ``call_for_model`` gives the model a text saying what happened) or ``"raise"`` (it raises
    the error to the host: :class:`ToolExecutionError` for a tool error, else the call's own
    error). ``not_sent`` applies once the retries are spent.

    ``retries``: how many times a call that was **not sent** is made again (0 to 10; default
    0). Before retry ``n`` (from 0) the caller waits ``min(retry_delay * 2**n,
    retry_max_delay)`` seconds, then up to ``retry_wait_ready`` seconds more for a server that
    is still reconnecting. A server that is not on its way back (``PARKED``, ``FAILED``,
    ``NEEDS_AUTH``, ``DISABLED``) is not tried again. Each attempt has the call's whole
    ``timeout``. Raises :class:`ConfigError` naming every bad field."""

    tool_error: ErrorAction = "model"
    timeout: ErrorAction = "model"
    unknown_outcome: ErrorAction = "model"
    not_sent: ErrorAction = "model"
    retries: int = 0
    retry_delay: float = 0.5
    retry_max_delay: float = 8.0
    retry_wait_ready: float = 10.0

    def __attrs_post_init__(self) -> None:
        problems = _policy_problems(self)
        if problems:
            detail = "; ".join(f"{key} {message}" for key, message in problems)
            raise ConfigError(f"invalid error policy: {detail}", problems=tuple(problems))

    def retry_wait(self, retry: int) -> float:
        """Seconds to wait before retry ``retry`` (0 for the first)."""
        return float(min(self.retry_delay * 2.0**retry, self.retry_max_delay))


@attrs.frozen(kw_only=True)
class ErrorRule:
    """``policy`` for the calls whose registered name matches ``pattern`` (an ``fnmatch`` glob,
    case-sensitive, as the permission rules: ``mcp_github_*``). Raises ``ValueError`` for an
    empty pattern."""

    pattern: str
    policy: ErrorPolicy = attrs.field(factory=ErrorPolicy)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.pattern, str) or not self.pattern:
            raise ValueError(f"an error rule needs a non-empty pattern, got {self.pattern!r}")
        if not isinstance(self.policy, ErrorPolicy):
            raise ValueError(
                f"error rule {self.pattern!r}: policy must be an ErrorPolicy, got "
                f"{type(self.policy).__name__}"
            )

    def matches(self, name: str) -> bool:
        """Whether the rule applies to the registered name ``name``."""
        return fnmatch.fnmatchcase(name, self.pattern)


def as_error_rules(rules: Iterable[ErrorRule]) -> tuple[ErrorRule, ...]:
    """The rules as a tuple, in order (what ``RuntimeConfig.error_rules`` keeps)."""
    return tuple(rules)


def parse_error_policy(
    value: Any, *, source: str = "error_policy"
) -> tuple[ErrorPolicy | None, list[tuple[str, str]]]:
    """An error policy from a configuration object (``{"timeout": "raise", "retries": 2,
    ...}``; keys left out keep their defaults) and the problems found, each ``(key path,
    message)`` under ``source``. None when there are problems."""
    if not isinstance(value, Mapping):
        return None, [(source, f"expected an object, got {json_kind(value)}")]
    problems: list[tuple[str, str]] = []
    options: dict[str, Any] = {}
    for key, item in value.items():
        if key not in ERROR_POLICY_KEYS:
            known = ", ".join(sorted(ERROR_POLICY_KEYS))
            problems.append((f"{source}.{key}", f"unknown key (known keys: {known})"))
        else:
            options[key] = float(item) if key in _NUMBER_KEYS and _is_number(item) else item
    try:
        policy = ErrorPolicy(**options)
    except ConfigError as exc:
        problems.extend((f"{source}.{key}", message) for key, message in exc.problems)
    if problems:
        return None, problems
    return policy, []


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def parse_error_rules(
    items: Iterable[Any], *, source: str = "error_rules"
) -> tuple[ErrorRule, ...]:
    """Rules from configuration entries ``{"tool": "<glob>", "timeout": "raise", ...}`` (the
    policy's keys beside ``tool``). Raises :class:`ConfigError` listing every bad entry (with
    its position under ``source``)."""
    rules: list[ErrorRule] = []
    problems: list[tuple[str, str]] = []
    for index, item in enumerate(items):
        where = f"{source}[{index}]"
        if not isinstance(item, Mapping):
            problems.append((where, f"expected an object, got {json_kind(item)}"))
            continue
        pattern = item.get("tool")
        if not isinstance(pattern, str) or not pattern:
            problems.append((f"{where}.tool", "expected a non-empty glob such as 'mcp_github_*'"))
        policy, found = parse_error_policy(
            {key: value for key, value in item.items() if key != "tool"}, source=where
        )
        problems.extend(found)
        if policy is not None and isinstance(pattern, str) and pattern:
            rules.append(ErrorRule(pattern=pattern, policy=policy))
    if problems:
        detail = "; ".join(f"{where}: {message}" for where, message in problems)
        raise ConfigError(f"invalid error rules: {detail}", problems=tuple(problems))
    return tuple(rules)


#: The states of a server that is on its way (back) to READY: a call refused in them was not
#: sent and may be tried again.
_RETRYABLE_STATES: Final = frozenset({"connecting", "reconnecting"})

#: The kinds of failure an :class:`ErrorPolicy` decides about (beside ``tool_error``).
FailureKind = Literal["timeout", "unknown_outcome", "not_sent"]


def failure_kind(exc: BaseException) -> FailureKind | None:
    """Which field of an :class:`ErrorPolicy` decides about the failure ``exc``: a
    :class:`CallTimeout` is ``timeout``, a :class:`ServerDisconnected` is ``unknown_outcome``
    when its request was sent and ``not_sent`` when not, a :class:`ServerUnavailable` is
    ``not_sent``; None for anything else (the model reads it)."""
    if isinstance(exc, CallTimeout):
        return "timeout"
    if isinstance(exc, ServerDisconnected):
        return "unknown_outcome" if exc.sent else "not_sent"
    if isinstance(exc, ServerUnavailable):
        return "not_sent"
    return None


def retryable(exc: BaseException) -> bool:
    """Whether the call that failed with ``exc`` may be made again: it was not sent, and its
    server is connected or on its way back (``ServerDisconnected`` with ``sent=False``, or
    ``ServerUnavailable`` while the server is connecting or reconnecting)."""
    if isinstance(exc, ServerDisconnected):
        return not exc.sent
    if isinstance(exc, ServerUnavailable):
        return exc.state in _RETRYABLE_STATES
    return False
