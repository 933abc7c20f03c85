"""Sampling through a real model: ready ``HostCallbacks.sampling`` callbacks that forward a
server's ``sampling/createMessage`` (a legacy server's request, or a 2026-07-28 server's input
request: the runtime calls the same callback for both) to a model provider's client the host
passes in.

- :class:`OpenAISampler` takes an OpenAI-compatible client (``openai.AsyncOpenAI``, or anything
  with ``await client.chat.completions.create(**request)``: Chat Completions);
- :class:`AnthropicSampler` takes an Anthropic-compatible client (``anthropic.AsyncAnthropic``,
  or anything with ``await client.messages.create(**request)``: Messages).

Both SDKs' async clients run under trio: they reach HTTP through httpx2, whose connection layer
has a trio backend, and sleep through anyio, which runs on trio (checked with openai 3.57 and
anthropic 2.15, over a socket on 127.0.0.1 and over a fake transport). trio-mcp imports neither
SDK: it writes their request as plain dicts and reads their answer with ``model_dump()``.

Each request goes through, in order: the **budget** of its server (:class:`SamplingBudget`:
requests and tokens per server, for the sampler's life: give each runtime its own sampler); the
**model choice** (:func:`choose_model`: the server's hints against the host's allowed models,
its priorities as the tie-break); the host's **approval** (an optional async ``approve``
callback that sees a :class:`SamplingApproval`); then the provider. A refusal (budget, the
user's no, something the provider cannot take) raises :class:`SamplingRefused`, an
:class:`RpcError` the runtime answers the server with (a legacy server gets the error; a
2026-07-28 call fails with ``InputRequestFailed`` whose cause it is). A failure of the provider
(its SDK's exception) goes through as it is: the server gets ``-32603``.

``includeContext``: the specification lets a client ignore it, and the sampler does (it
declares no ``sampling.context``), unless the host gives ``context``: an async callback of the
server's name and the ``includeContext`` value whose text is added to the system prompt (then
``sampling.context`` is declared). ``metadata`` is provider-specific and never sent; the host's
``extra`` keywords are added to every request (``{"timeout": 30}``, ``{"service_tier": ...}``).

The sampler is host code: it runs in the task that answers the server's request, never inside
an actor. Its counts change only between awaits, so concurrent requests of one server cannot
together go past its budget's request count, and reserve their ``maxTokens`` while they run.
"""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, ClassVar, Final, Literal

import attrs

from ...protocol._errors import RpcError
from ...protocol._types import CreateMessageRequestParams, CreateMessageResult, ModelPreferences
from ._sampling_wire import (
    SamplingTokens,
    SamplingUnsupported,
    anthropic_messages_request,
    anthropic_messages_result,
    openai_chat_request,
    openai_chat_result,
    provider_tool_names,
)

__all__ = [
    "AnthropicSampler",
    "OpenAISampler",
    "SamplingApproval",
    "SamplingBudget",
    "SamplingModel",
    "SamplingRefused",
    "SamplingUsage",
    "choose_model",
]

#: The code of a sampling request the client refuses (the specification's "user rejected").
REFUSED_CODE: Final = -1

SamplingRefusal = Literal["budget", "declined", "unsupported"]


class SamplingRefused(RpcError):
    """The host's sampler refused a server's sampling request, and says why: ``reason`` is
    ``"budget"`` (the server's :class:`SamplingBudget` is used up), ``"declined"`` (the host's
    ``approve`` said no) or ``"unsupported"`` (the provider cannot take what the request holds).
    ``code`` is what the server is answered with: ``-1`` for the first two (the specification's
    code for a refused request), ``-32602`` for the third."""

    def __init__(self, message: str, *, code: int, reason: SamplingRefusal, server: str) -> None:
        super().__init__(message, code=code, server=server, method="sampling/createMessage")
        self.reason: SamplingRefusal = reason


def _score(value: float) -> float:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"a model's cost, speed and intelligence are between 0 and 1, got {value}")
    return value


@attrs.frozen(kw_only=True)
class SamplingModel:
    """A model the host allows servers to sample from, with how it rates it (0 to 1, higher is
    better: ``cost`` 1 is the cheapest) for the servers' priorities."""

    name: str
    cost: float = attrs.field(default=0.5, converter=_score)
    speed: float = attrs.field(default=0.5, converter=_score)
    intelligence: float = attrs.field(default=0.5, converter=_score)


def _models(models: Iterable[SamplingModel | str]) -> tuple[SamplingModel, ...]:
    out = tuple(
        model if isinstance(model, SamplingModel) else SamplingModel(name=model) for model in models
    )
    if not out:
        raise ValueError("a sampler needs at least one model (the first is the default)")
    names = [model.name for model in out]
    if len(set(names)) != len(names):
        raise ValueError(f"a sampler's models must have different names, got {names}")
    return out


def choose_model(
    preferences: ModelPreferences | None, models: Iterable[SamplingModel | str]
) -> SamplingModel:
    """The model for a request with the server's ``preferences``, among the host's ``models``.

    The hints are tried in the server's order: the first that is part of an allowed model's name
    (case-insensitive, as the specification describes hints) picks the models it matches. No
    hint matching (or none given) leaves all of them. Among those, the one with the highest
    ``cost_priority * cost + speed_priority * speed + intelligence_priority * intelligence``
    wins; a tie, or no priorities, goes to the first in the host's order. Never a model the
    host did not list."""
    allowed = _models(models)
    candidates = allowed
    for hint in (preferences.hints or ()) if preferences is not None else ():
        text = (hint.name or "").strip().lower()
        if not text:
            continue
        matched = tuple(model for model in allowed if text in model.name.lower())
        if matched:
            candidates = matched
            break
    if preferences is None:
        return candidates[0]
    weights = (
        _priority(preferences.cost_priority),
        _priority(preferences.speed_priority),
        _priority(preferences.intelligence_priority),
    )

    def score(model: SamplingModel) -> float:
        return weights[0] * model.cost + weights[1] * model.speed + weights[2] * model.intelligence

    best = candidates[0]
    for model in candidates[1:]:
        if score(model) > score(best):
            best = model
    return best


def _priority(value: float | None) -> float:
    """A server's priority, clamped to 0..1 (a bad value counts as none)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    return min(max(float(value), 0.0), 1.0)


def _limit(value: int | None) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise ValueError(f"a sampling budget is a count of 0 or more, or None, got {value!r}")
    return value


@attrs.frozen(kw_only=True)
class SamplingBudget:
    """What one server may sample, for the sampler's life: ``max_requests`` requests sent to the
    provider and ``max_tokens`` tokens (input and output, as the provider reports them; a
    request's ``maxTokens`` is reserved while it runs). None: no limit."""

    max_requests: int | None = attrs.field(default=None, converter=_limit)
    max_tokens: int | None = attrs.field(default=None, converter=_limit)


@attrs.frozen(kw_only=True)
class SamplingUsage:
    """What one server has sampled: requests sent to the provider, the tokens they cost, and
    the requests refused (budget, the user, the provider's limits)."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    refused: int = 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@attrs.frozen(kw_only=True)
class SamplingApproval:
    """What the host's ``approve`` callback is shown: the ``server`` asking, its request
    (``params``: the messages, system prompt, tools...), the ``model`` chosen for it, and what
    the server has used so far and may use (``usage``, ``budget``)."""

    server: str
    params: CreateMessageRequestParams
    model: str
    usage: SamplingUsage
    budget: SamplingBudget


#: The host's approval of one sampling request: True lets it go to the provider.
SamplingApprove = Callable[[SamplingApproval], Awaitable[bool]]
#: The host's context for ``includeContext``: text added to the system prompt, or None.
SamplingContext = Callable[[str, str], Awaitable[str | None]]


@attrs.define(eq=False)
class _Account:
    """One server's counts (changed only between awaits)."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    refused: int = 0
    in_flight: int = 0
    reserved: int = 0

    def view(self) -> SamplingUsage:
        return SamplingUsage(
            requests=self.requests,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            refused=self.refused,
        )


@attrs.define(eq=False, kw_only=True)
class _Sampler(abc.ABC):
    """What both samplers share: models, budgets, approval, context, the counts; a subclass
    writes its provider's request and reads its answer."""

    #: The provider's name in refusals.
    provider: ClassVar[str]

    client: Any
    models: tuple[SamplingModel, ...] = attrs.field(converter=_models)
    budget: SamplingBudget = attrs.field(factory=SamplingBudget)
    server_budgets: Mapping[str, SamplingBudget] = attrs.field(factory=dict)
    approve: SamplingApprove | None = None
    context: SamplingContext | None = None
    tools: bool = True
    extra: Mapping[str, Any] = attrs.field(factory=dict)
    _accounts: dict[str, _Account] = attrs.field(init=False, factory=dict)

    @property
    def sampling_capabilities(self) -> dict[str, Any]:
        """What ``sampling`` declares to the servers (``HostCallbacks`` reads it): ``tools``
        when the sampler takes tool use, ``context`` when the host gives ``context``."""
        caps: dict[str, Any] = {}
        if self.context is not None:
            caps["context"] = {}
        if self.tools:
            caps["tools"] = {}
        return caps

    def budget_for(self, server: str) -> SamplingBudget:
        """The budget of ``server``: its own in ``server_budgets``, else ``budget``."""
        return self.server_budgets.get(server, self.budget)

    def usage(self) -> dict[str, SamplingUsage]:
        """What each server that asked has used, by server name."""
        return {server: account.view() for server, account in sorted(self._accounts.items())}

    def reset_usage(self, server: str | None = None) -> None:
        """Forget what ``server`` (or every server) has used: its budget starts again. Requests
        under way keep their reservations."""
        for name, account in self._accounts.items():
            if server is None or name == server:
                account.requests = account.input_tokens = account.output_tokens = 0
                account.refused = 0

    async def __call__(
        self, server: str, params: CreateMessageRequestParams
    ) -> CreateMessageResult:
        """Answer one ``sampling/createMessage`` of ``server`` (the ``HostCallbacks.sampling``
        signature)."""
        account = self._accounts.setdefault(server, _Account())
        budget = self.budget_for(server)
        over = _over_budget(server, account, budget, params.max_tokens)
        if over is not None:
            account.refused += 1
            raise SamplingRefused(over, code=REFUSED_CODE, reason="budget", server=server)
        if params.tools and not self.tools:
            account.refused += 1
            raise SamplingRefused(
                f"the request of {server!r} offers tools, and this sampler was made with "
                "tools=False (it does not declare sampling.tools)",
                code=-32602,
                reason="unsupported",
                server=server,
            )
        model = choose_model(params.model_preferences, self.models).name
        account.in_flight += 1
        account.reserved += params.max_tokens
        try:
            try:
                names = provider_tool_names(params.tools)
                system = await self._system(server, params)
                request = self._request(params, model=model, system=system, names=names)
            except SamplingUnsupported as exc:
                account.refused += 1
                raise SamplingRefused(
                    f"{self.provider} cannot take the sampling request of {server!r}: {exc}",
                    code=-32602,
                    reason="unsupported",
                    server=server,
                ) from exc
            if self.approve is not None:
                approval = SamplingApproval(
                    server=server, params=params, model=model, usage=account.view(), budget=budget
                )
                if await self.approve(approval) is not True:
                    account.refused += 1
                    raise SamplingRefused(
                        f"the user declined the sampling request of {server!r}",
                        code=REFUSED_CODE,
                        reason="declined",
                        server=server,
                    )
            account.requests += 1
            answer = await self._send(request)
            result, tokens = self._result(answer, model=model, names=names)
            _charge(account, tokens)
            return result
        finally:
            account.in_flight -= 1
            account.reserved -= params.max_tokens

    async def _system(self, server: str, params: CreateMessageRequestParams) -> str | None:
        system = params.system_prompt
        wanted = params.include_context
        if self.context is not None and wanted in ("thisServer", "allServers"):
            added = await self.context(server, wanted)
            if added:
                system = f"{system}\n\n{added}" if system else added
        return system

    @abc.abstractmethod
    def _request(
        self,
        params: CreateMessageRequestParams,
        *,
        model: str,
        system: str | None,
        names: Mapping[str, str],
    ) -> dict[str, Any]:
        """The provider's request for ``params`` (raises :class:`SamplingUnsupported`)."""

    @abc.abstractmethod
    async def _send(self, request: dict[str, Any]) -> Any:
        """The provider's answer to ``request``, from the host's client."""

    @abc.abstractmethod
    def _result(
        self, answer: Any, *, model: str, names: Mapping[str, str]
    ) -> tuple[CreateMessageResult, SamplingTokens]:
        """The result for the server, and the tokens the answer cost."""


def _over_budget(
    server: str, account: _Account, budget: SamplingBudget, max_tokens: int
) -> str | None:
    """Why a request of ``max_tokens`` would go past ``budget``, or None."""
    if (
        budget.max_requests is not None
        and account.requests + account.in_flight >= budget.max_requests
    ):
        return (
            f"the sampling budget of server {server!r} is used up: {budget.max_requests} "
            f"request(s) allowed, {account.requests} made, {account.in_flight} under way "
            "(the host sets it with SamplingBudget and resets it with reset_usage)"
        )
    if budget.max_tokens is not None:
        used = account.input_tokens + account.output_tokens
        if used + account.reserved + max_tokens > budget.max_tokens:
            return (
                f"the sampling budget of server {server!r} cannot take this request: "
                f"{budget.max_tokens} tokens allowed, {used} used, {account.reserved} reserved "
                f"by requests under way, and this one may take {max_tokens} (ask for fewer "
                "maxTokens; the host sets the budget with SamplingBudget)"
            )
    return None


def _charge(account: _Account, tokens: SamplingTokens) -> None:
    account.input_tokens += tokens.input
    account.output_tokens += tokens.output


@attrs.define(eq=False, kw_only=True)
class OpenAISampler(_Sampler):
    """Sampling through an OpenAI-compatible client, with Chat Completions:
    ``OpenAISampler(client=AsyncOpenAI(...), models=["gpt-4.1-mini", "gpt-4.1"])``, then
    ``HostCallbacks(sampling=sampler)``.

    ``models``: the models servers may get (names, or :class:`SamplingModel` with ratings); the
    first is the default. ``budget`` (every server) and ``server_budgets`` (by name): what each
    server may use. ``approve``: the host's OK for each request (``async (SamplingApproval) ->
    bool``). ``context``: text for ``includeContext``. ``tools=False`` declares no tool use.
    ``extra``: keywords added to every ``create`` call. ``max_tokens_key``: the request's
    ``maxTokens`` goes as ``max_completion_tokens`` (OpenAI's current name) or ``max_tokens``
    (for compatible servers that know only that one)."""

    max_tokens_key: Literal["max_completion_tokens", "max_tokens"] = "max_completion_tokens"
    provider: ClassVar[str] = "OpenAI Chat Completions"

    def _request(
        self,
        params: CreateMessageRequestParams,
        *,
        model: str,
        system: str | None,
        names: Mapping[str, str],
    ) -> dict[str, Any]:
        return openai_chat_request(
            params, model=model, system=system, max_tokens_key=self.max_tokens_key, names=names
        )

    async def _send(self, request: dict[str, Any]) -> Any:
        return await self.client.chat.completions.create(**request, **self.extra)

    def _result(
        self, answer: Any, *, model: str, names: Mapping[str, str]
    ) -> tuple[CreateMessageResult, SamplingTokens]:
        return openai_chat_result(answer, model=model, names=names)


@attrs.define(eq=False, kw_only=True)
class AnthropicSampler(_Sampler):
    """Sampling through an Anthropic-compatible client, with Messages:
    ``AnthropicSampler(client=AsyncAnthropic(...), models=["claude-haiku-4-5",
    "claude-sonnet-4-5"])``, then ``HostCallbacks(sampling=sampler)``. The options are
    :class:`OpenAISampler`'s. Anthropic takes no audio: a request with audio is refused.
    ``send_temperature``: the current Messages API has no ``temperature`` (the SDK's ``create``
    refuses it), so the request's is not sent; True sends it, for compatible servers that take
    it."""

    send_temperature: bool = False
    provider: ClassVar[str] = "Anthropic Messages"

    def _request(
        self,
        params: CreateMessageRequestParams,
        *,
        model: str,
        system: str | None,
        names: Mapping[str, str],
    ) -> dict[str, Any]:
        return anthropic_messages_request(
            params, model=model, system=system, names=names, temperature=self.send_temperature
        )

    async def _send(self, request: dict[str, Any]) -> Any:
        return await self.client.messages.create(**request, **self.extra)

    def _result(
        self, answer: Any, *, model: str, names: Mapping[str, str]
    ) -> tuple[CreateMessageResult, SamplingTokens]:
        return anthropic_messages_result(answer, model=model, names=names)
