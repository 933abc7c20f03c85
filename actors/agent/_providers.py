"""Provider round trips: a model provider's tool calls in, its tool-result messages out.

The tools go to the provider with :meth:`AgentSurface.export_tools` (or
:func:`~._export.to_openai_tools`, :func:`~._export.to_anthropic_tools`); the model answers with
tool calls in that provider's shape; these helpers read them, make each call with
:meth:`AgentSurface.call_for_model`, and write each :class:`ModelToolResult` back in the shape
that provider takes next:

=====================  =======================================  ===================================
provider               the model's calls                        what goes back
=====================  =======================================  ===================================
OpenAI Chat            ``message.tool_calls`` (``function``     one ``{"role": "tool"}`` message per
Completions            entries, arguments as a JSON string)     call, then one ``user`` message with
                                                                the images, if any
OpenAI Responses       ``response.output`` items of type        one ``function_call_output`` item
                       ``function_call``                        per call, images inside it
Anthropic Messages     ``message.content`` blocks of type       one ``user`` message of
                       ``tool_use`` (``input`` an object)       ``tool_result`` blocks, images
                                                                inside them, ``is_error`` set
=====================  =======================================  ===================================

Images: Anthropic takes image blocks in a ``tool_result``, and the Responses API takes
``input_image`` parts in a ``function_call_output``. A Chat Completions ``tool`` message takes
text only, so the images of a round come after the tool messages in one ``user`` message
(``image_url`` parts with ``data:`` URLs, each introduced by the call it belongs to): the API
wants the tool messages right after the assistant's message, so they cannot go in between. All
three take PNG, JPEG, GIF and WebP; another image type, audio, and an image over the
provider's size limit stay a note in the text (the rendered result says where the file was
saved). ``images=False`` sends text only.

Errors: an Anthropic ``tool_result`` of a failed call has ``is_error: true``; OpenAI's results
have no such flag, and the text says it (as ``call_for_model`` renders every failure).

Arguments that are not a JSON object (OpenAI sends a string the model wrote) are never sent
to a server: the call becomes an error result that says what was wrong, so the model can try
again. With ``drop_nulls`` (the default), a ``null`` for a property that the tool's schema has
as optional, and that does not take ``null``, is removed first
(:func:`~._strict.drop_omitted_nulls`): that is how a model in OpenAI's strict mode leaves a
property out.

The provider's SDK objects (``ChatCompletionMessage``, ``Response``, ``Message``...) and plain
dicts are both accepted; what comes back is plain JSON-ready dicts, the SDKs' request types.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, Literal, TypeAlias

import attrs

from ..runtime._runtime import USE_DEFAULT, RuntimeState, _UseDefault
from ..runtime._session import ProgressCallback
from ._catalog import ModelToolResult
from ._render import MediaPart, TextPart
from ._strict import drop_omitted_nulls
from ._surface import AgentSurface, _failure

__all__ = [
    "ANTHROPIC_MAX_IMAGE_CHARS",
    "OPENAI_MAX_IMAGE_CHARS",
    "ProviderApi",
    "ProviderToolCall",
    "ToolRound",
    "anthropic_tool_calls",
    "anthropic_tool_result",
    "call_provider_tool",
    "openai_chat_image_message",
    "openai_chat_tool_calls",
    "openai_chat_tool_message",
    "openai_responses_tool_calls",
    "openai_responses_tool_output",
    "run_anthropic_tool_calls",
    "run_openai_chat_tool_calls",
    "run_openai_responses_tool_calls",
]

#: The provider APIs whose tool calls these helpers read.
ProviderApi: TypeAlias = Literal["openai-chat", "openai-responses", "anthropic"]

#: The image types both providers take as input.
_IMAGE_TYPES: Final = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
#: Anthropic's limit on one image (5 MB), on its base64 text.
ANTHROPIC_MAX_IMAGE_CHARS: Final = 5 * 1024 * 1024
#: OpenAI's limit on one image (20 MB), on its base64 text.
OPENAI_MAX_IMAGE_CHARS: Final = 20 * 1024 * 1024


@attrs.frozen(kw_only=True)
class ProviderToolCall:
    """One tool call of the model, read from a provider's answer.

    ``id`` is what the result must name (``tool_call_id``, ``call_id``, ``tool_use_id``);
    ``name`` is the tool's exported name (the registered name); ``arguments`` is the JSON
    object the model sent, or None when it sent something else, and then ``problem`` says what
    (the call is answered with that error, never sent to a server)."""

    api: ProviderApi
    id: str
    name: str
    arguments: dict[str, Any] | None
    problem: str | None = None


@attrs.frozen(kw_only=True)
class ToolRound:
    """One round of the model's tool calls, answered: the ``calls`` as read, their ``results``
    (in the same order), and the ``messages`` to append to the conversation before asking the
    model again (OpenAI Chat: the ``tool`` messages and, when a result has images, one ``user``
    message; Responses: the ``function_call_output`` items; Anthropic: one ``user`` message).
    Empty when the model made no tool call."""

    calls: tuple[ProviderToolCall, ...] = ()
    results: tuple[ModelToolResult, ...] = ()
    messages: tuple[dict[str, Any], ...] = ()


# --------------------------------------------------------------------------- reading calls


def _plain(value: Any, what: str) -> Any:
    """A dict or list as it is; an SDK (pydantic) object as its JSON dump."""
    if isinstance(value, Mapping | list | tuple):
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json", by_alias=True)
    raise TypeError(
        f"{what}: expected the provider SDK's object or a dict, got {type(value).__name__}"
    )


def _items(value: Any, key: str, what: str) -> list[Any]:
    """``value[key]`` (``value`` a message or response, as a dict or an SDK object), or
    ``value`` itself when it is already the list."""
    plain = _plain(value, what)
    if isinstance(plain, Mapping):
        plain = plain.get(key) or []
    if not isinstance(plain, list | tuple):
        raise TypeError(f"{what}: {key!r} is not a list")
    return [_plain(item, what) for item in plain]


def _arguments(raw: Any) -> tuple[dict[str, Any] | None, str | None]:
    """The model's arguments as a JSON object, or the problem with them."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}, None
    value = raw
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            return None, f"the arguments are not valid JSON ({exc.msg} at character {exc.pos})"
        except RecursionError:
            return None, "the arguments are nested too deeply"
    if not isinstance(value, Mapping):
        kind = "null" if value is None else type(value).__name__
        return None, f"the arguments must be a JSON object, got {kind}"
    return dict(value), None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def openai_chat_tool_calls(message: Any) -> tuple[ProviderToolCall, ...]:
    """The tool calls of an OpenAI Chat Completions assistant message (the SDK's
    ``ChatCompletionMessage``, ``completion.choices[0].message``, or its dict), in order. A
    ``custom`` tool call is read with a problem (these helpers export function tools only)."""
    calls: list[ProviderToolCall] = []
    for entry in _items(message, "tool_calls", "an OpenAI chat message"):
        kind = entry.get("type", "function")
        call_id = _text(entry.get("id"))
        if kind != "function":
            custom = entry.get(kind) if isinstance(entry.get(kind), Mapping) else {}
            calls.append(
                ProviderToolCall(
                    api="openai-chat",
                    id=call_id,
                    name=_text(custom.get("name")),
                    arguments=None,
                    problem=f"a {kind!r} tool call; only function tools are offered",
                )
            )
            continue
        function = entry.get("function") if isinstance(entry.get("function"), Mapping) else {}
        arguments, problem = _arguments(function.get("arguments"))
        calls.append(
            ProviderToolCall(
                api="openai-chat",
                id=call_id,
                name=_text(function.get("name")),
                arguments=arguments,
                problem=problem,
            )
        )
    return tuple(calls)


def openai_responses_tool_calls(output: Any) -> tuple[ProviderToolCall, ...]:
    """The ``function_call`` items of an OpenAI Responses answer (the SDK's ``Response``,
    ``response.output``, or their dicts), in order; other items are not calls."""
    calls: list[ProviderToolCall] = []
    for item in _items(output, "output", "an OpenAI response"):
        if not isinstance(item, Mapping) or item.get("type") != "function_call":
            continue
        arguments, problem = _arguments(item.get("arguments"))
        calls.append(
            ProviderToolCall(
                api="openai-responses",
                id=_text(item.get("call_id")),
                name=_text(item.get("name")),
                arguments=arguments,
                problem=problem,
            )
        )
    return tuple(calls)


def anthropic_tool_calls(message: Any) -> tuple[ProviderToolCall, ...]:
    """The ``tool_use`` blocks of an Anthropic assistant message (the SDK's ``Message``,
    ``message.content``, or their dicts), in order; other blocks are not calls."""
    calls: list[ProviderToolCall] = []
    for block in _items(message, "content", "an Anthropic message"):
        if not isinstance(block, Mapping) or block.get("type") != "tool_use":
            continue
        arguments, problem = _arguments(block.get("input"))
        calls.append(
            ProviderToolCall(
                api="anthropic",
                id=_text(block.get("id")),
                name=_text(block.get("name")),
                arguments=arguments,
                problem=problem,
            )
        )
    return tuple(calls)


# --------------------------------------------------------------------------- making calls


async def call_provider_tool(
    agent: AgentSurface,
    call: ProviderToolCall,
    *,
    drop_nulls: bool = True,
    timeout: float | _UseDefault | None = USE_DEFAULT,
    progress: ProgressCallback | None = None,
    wait_ready: float | None = None,
) -> ModelToolResult:
    """Make the model's ``call`` with ``agent.call_for_model`` (permissions, approvals, the
    call, the rendering; never raises for a failure of the call). A call whose arguments are
    not a JSON object is not made: its result is that error (status ``invalid``). With
    ``drop_nulls``, the ``null`` values that stand for a property left out are removed first."""
    if call.arguments is None:
        return _failure(call.name, "invalid", call.problem or "the call has no arguments")
    arguments = call.arguments
    if drop_nulls and agent.runtime.state is RuntimeState.OPEN:
        tool = agent.model_tools().get(call.name)
        if tool is not None:
            arguments = drop_omitted_nulls(tool.input_schema, arguments)
    return await agent.call_for_model(
        call.name, arguments, timeout=timeout, progress=progress, wait_ready=wait_ready
    )


# --------------------------------------------------------------------------- writing results


def _call_id(call: ProviderToolCall | str) -> str:
    return call if isinstance(call, str) else call.id


def _mime(media: MediaPart) -> str:
    mime = media.mime_type.split(";", 1)[0].strip().lower()
    return "image/jpeg" if mime == "image/jpg" else mime


def _sendable(media: MediaPart, max_chars: int) -> str | None:
    """Why ``media`` cannot go to the provider as an image, or None when it can."""
    if media.kind != "image":
        return f"{media.kind} is not taken in a tool result"
    if _mime(media) not in _IMAGE_TYPES:
        return f"{_mime(media)} is not an image type the model takes"
    if len("".join(media.data.split())) > max_chars:
        return f"over the provider's limit of {max_chars:,} base64 characters per image"
    return None


def _media_note(media: MediaPart, why: str) -> str:
    where = f"saved to {media.path}" if media.path is not None else "not saved"
    return f"[{media.kind}: {media.mime_type}, {where}; not shown to the model: {why}]"


def _pieces(result: ModelToolResult, images: bool, max_chars: int) -> list[str | MediaPart]:
    """The result as texts and the images to send, adjacent texts joined (as ``result.text``
    joins them); an image that is not sent becomes a note."""
    pieces: list[str | MediaPart] = []
    texts: list[str] = []

    def flush() -> None:
        joined = "\n".join(texts)
        if joined:
            pieces.append(joined)
        texts.clear()

    for part in result.parts:
        if isinstance(part, TextPart):
            texts.append(part.text)
            continue
        why = _sendable(part, max_chars) if images else "images are not sent"
        if why is None:
            flush()
            pieces.append(part)
        else:
            texts.append(_media_note(part, why))
    flush()
    return pieces


def _has_images(pieces: Sequence[str | MediaPart]) -> bool:
    return any(isinstance(piece, MediaPart) for piece in pieces)


def _data_url(media: MediaPart) -> str:
    return f"data:{_mime(media)};base64,{''.join(media.data.split())}"


def _plain_text(result: ModelToolResult) -> str:
    """The result's text (with the renderer's note, type, size and file, for each media part)."""
    return result.text or "(no output)"


def openai_chat_tool_message(
    call: ProviderToolCall | str, result: ModelToolResult
) -> dict[str, Any]:
    """The Chat Completions ``tool`` message answering ``call`` (or a ``tool_call_id``): the
    result's text (a tool message takes text only; see :func:`openai_chat_image_message`)."""
    return {"role": "tool", "tool_call_id": _call_id(call), "content": _plain_text(result)}


def openai_chat_image_message(
    answers: Iterable[tuple[ProviderToolCall | str, ModelToolResult]],
    *,
    max_image_chars: int = OPENAI_MAX_IMAGE_CHARS,
) -> dict[str, Any] | None:
    """One ``user`` message with the images of these results (``image_url`` parts with
    ``data:`` URLs, each group introduced by the call it came from), to append after all the
    round's ``tool`` messages; None when no result has an image the model takes."""
    content: list[dict[str, Any]] = []
    for call, result in answers:
        shown = [
            part
            for part in result.parts
            if isinstance(part, MediaPart) and _sendable(part, max_image_chars) is None
        ]
        if not shown:
            continue
        plural = "image" if len(shown) == 1 else f"{len(shown)} images"
        content.append(
            {
                "type": "text",
                "text": f"The {plural} of the result of {result.name} "
                f"(tool call {_call_id(call)}):",
            }
        )
        content.extend(
            {"type": "image_url", "image_url": {"url": _data_url(part)}} for part in shown
        )
    if not content:
        return None
    return {"role": "user", "content": content}


def openai_responses_tool_output(
    call: ProviderToolCall | str,
    result: ModelToolResult,
    *,
    images: bool = True,
    max_image_chars: int = OPENAI_MAX_IMAGE_CHARS,
) -> dict[str, Any]:
    """The Responses ``function_call_output`` item answering ``call`` (or a ``call_id``): the
    text as a string, or, when the result has images the model takes, a list of
    ``input_text`` and ``input_image`` parts."""
    pieces = _pieces(result, images, max_image_chars)
    output: str | list[dict[str, Any]]
    if _has_images(pieces):
        output = [
            {"type": "input_text", "text": piece}
            if isinstance(piece, str)
            else {"type": "input_image", "image_url": _data_url(piece), "detail": "auto"}
            for piece in pieces
        ]
    else:
        output = _plain_text(result)
    return {"type": "function_call_output", "call_id": _call_id(call), "output": output}


def anthropic_tool_result(
    call: ProviderToolCall | str,
    result: ModelToolResult,
    *,
    images: bool = True,
    max_image_chars: int = ANTHROPIC_MAX_IMAGE_CHARS,
) -> dict[str, Any]:
    """The Anthropic ``tool_result`` block answering ``call`` (or a ``tool_use_id``): the text
    as a string, or, when the result has images the model takes, ``text`` and base64 ``image``
    blocks; ``is_error: true`` when the call failed, was refused, or the tool reported an
    error."""
    pieces = _pieces(result, images, max_image_chars)
    content: str | list[dict[str, Any]]
    if _has_images(pieces):
        content = [
            {"type": "text", "text": piece}
            if isinstance(piece, str)
            else {
                "type": "image",
                "source": {
                    "type": "base64",
                    "media_type": _mime(piece),
                    "data": "".join(piece.data.split()),
                },
            }
            for piece in pieces
        ]
    else:
        content = _plain_text(result)
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": _call_id(call),
        "content": content,
    }
    if result.is_error:
        block["is_error"] = True
    return block


# --------------------------------------------------------------------------- whole rounds


async def _answer(
    agent: AgentSurface,
    calls: tuple[ProviderToolCall, ...],
    drop_nulls: bool,
    timeout: float | _UseDefault | None,
    wait_ready: float | None,
) -> tuple[ModelToolResult, ...]:
    """Each call made in turn, in the model's order (approval dialogs come one at a time)."""
    return tuple(
        [
            await call_provider_tool(
                agent, call, drop_nulls=drop_nulls, timeout=timeout, wait_ready=wait_ready
            )
            for call in calls
        ]
    )


async def run_openai_chat_tool_calls(
    agent: AgentSurface,
    message: Any,
    *,
    images: bool = True,
    drop_nulls: bool = True,
    timeout: float | _UseDefault | None = USE_DEFAULT,
    wait_ready: float | None = None,
) -> ToolRound:
    """Answer the tool calls of a Chat Completions assistant ``message``: each call made with
    ``agent.call_for_model`` in turn; ``messages`` holds a ``tool`` message per call and, when
    a result has images (and ``images``), one ``user`` message with them."""
    calls = openai_chat_tool_calls(message)
    results = await _answer(agent, calls, drop_nulls, timeout, wait_ready)
    messages = [
        openai_chat_tool_message(call, result) for call, result in zip(calls, results, strict=True)
    ]
    if images:
        extra = openai_chat_image_message(zip(calls, results, strict=True))
        if extra is not None:
            messages.append(extra)
    return ToolRound(calls=calls, results=results, messages=tuple(messages))


async def run_openai_responses_tool_calls(
    agent: AgentSurface,
    output: Any,
    *,
    images: bool = True,
    drop_nulls: bool = True,
    timeout: float | _UseDefault | None = USE_DEFAULT,
    wait_ready: float | None = None,
) -> ToolRound:
    """Answer the ``function_call`` items of a Responses answer (``response`` or
    ``response.output``): ``messages`` holds a ``function_call_output`` item per call, to add
    to the next request's ``input``."""
    calls = openai_responses_tool_calls(output)
    results = await _answer(agent, calls, drop_nulls, timeout, wait_ready)
    messages = tuple(
        openai_responses_tool_output(call, result, images=images)
        for call, result in zip(calls, results, strict=True)
    )
    return ToolRound(calls=calls, results=results, messages=messages)


async def run_anthropic_tool_calls(
    agent: AgentSurface,
    message: Any,
    *,
    images: bool = True,
    drop_nulls: bool = True,
    timeout: float | _UseDefault | None = USE_DEFAULT,
    wait_ready: float | None = None,
) -> ToolRound:
    """Answer the ``tool_use`` blocks of an Anthropic assistant ``message``: ``messages`` holds
    the one ``user`` message with a ``tool_result`` block per call (Anthropic wants every
    result of a turn in the next user message)."""
    calls = anthropic_tool_calls(message)
    results = await _answer(agent, calls, drop_nulls, timeout, wait_ready)
    if not calls:
        return ToolRound()
    content = [
        anthropic_tool_result(call, result, images=images)
        for call, result in zip(calls, results, strict=True)
    ]
    return ToolRound(calls=calls, results=results, messages=({"role": "user", "content": content},))
