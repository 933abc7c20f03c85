"""A server's ``sampling/createMessage`` as a model provider's request, and the provider's answer
as a ``CreateMessageResult``: OpenAI Chat Completions and Anthropic Messages.

Pure functions over plain dicts (the SDKs' request types; their response objects are read with
``model_dump()``, so trio-mcp needs neither SDK). What a provider cannot take raises
:class:`SamplingUnsupported`, naming the block and what to do; the sampler turns it into its
refusal to the server.

================  ==========================================  ====================================
MCP               OpenAI Chat Completions                     Anthropic Messages
================  ==========================================  ====================================
``systemPrompt``  a first ``system`` message                  ``system``
text              ``text`` part                               ``text`` block
image             ``image_url`` part, ``data:`` URL           ``image`` block, base64 source
                  (PNG, JPEG, GIF, WebP)                      (PNG, JPEG, GIF, WebP)
audio             ``input_audio`` part (WAV, MP3)             refused: Messages takes no audio
``tool_use``      the assistant's ``tool_calls``              ``tool_use`` block
``tool_result``   a ``tool`` message per result (text; its    ``tool_result`` block (text and
                  images in a ``user`` message after them)    images, ``is_error``)
``tools``         ``function`` tools                          tools with ``input_schema``
``toolChoice``    ``auto`` / ``required`` / ``none``          ``auto`` / ``any`` / ``none``
``maxTokens``     ``max_completion_tokens`` (or               ``max_tokens``
                  ``max_tokens``)
``temperature``   ``temperature``                             not sent (the current API has none;
                                                              ``temperature=True`` sends it)
``stopSequences`` ``stop``                                    ``stop_sequences``
================  ==========================================  ====================================

Tool names: both providers take ``[a-zA-Z0-9_-]{1,64}``. An MCP tool name with other characters
(``.``, ``/``) is sent with ``_`` in their place and mapped back in the answer; two names that
would become one, or a name longer than 64 characters, refuse the request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

import attrs

from ...protocol._errors import InternalError
from ...protocol._types import (
    AudioContent,
    CreateMessageRequestParams,
    CreateMessageResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    SamplingContent,
    SamplingMessage,
    TextContent,
    TextResourceContents,
    Tool,
    ToolResultContent,
    ToolUseContent,
)

__all__ = [
    "SamplingTokens",
    "SamplingUnsupported",
    "anthropic_messages_request",
    "anthropic_messages_result",
    "openai_chat_request",
    "openai_chat_result",
    "provider_tool_names",
]

#: The image types both providers take.
_IMAGE_TYPES: Final = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
#: Audio types of OpenAI's ``input_audio`` part, by MIME type.
_AUDIO_FORMATS: Final[Mapping[str, str]] = {
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/wave": "wav",
    "audio/vnd.wave": "wav",
    "audio/mpeg": "mp3",
    "audio/mp3": "mp3",
}
_TOOL_NAME: Final = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_NAME_CHAR: Final = re.compile(r"[^a-zA-Z0-9_-]")

_OPENAI_STOP: Final[Mapping[str, str]] = {
    "stop": "endTurn",
    "length": "maxTokens",
    "tool_calls": "toolUse",
    "function_call": "toolUse",
    "content_filter": "contentFilter",
}
_ANTHROPIC_STOP: Final[Mapping[str, str]] = {
    "end_turn": "endTurn",
    "max_tokens": "maxTokens",
    "stop_sequence": "stopSequence",
    "tool_use": "toolUse",
    "refusal": "refusal",
    "pause_turn": "pauseTurn",
    "model_context_window_exceeded": "maxTokens",
}
_OPENAI_CHOICE: Final[Mapping[str, str]] = {"auto": "auto", "required": "required", "none": "none"}
_ANTHROPIC_CHOICE: Final[Mapping[str, str]] = {"auto": "auto", "required": "any", "none": "none"}


class SamplingUnsupported(ValueError):
    """The request holds something the provider cannot take (audio for Anthropic, an image type
    it does not read, a tool name it cannot carry...)."""


@attrs.frozen(kw_only=True)
class SamplingTokens:
    """The tokens one answer cost, as the provider reports them (0 when it does not)."""

    input: int = 0
    output: int = 0

    @property
    def total(self) -> int:
        return self.input + self.output


# --------------------------------------------------------------------------- common


def provider_tool_names(tools: Sequence[Tool] | None) -> dict[str, str]:
    """MCP tool name -> the name the provider gets: the same when it fits
    ``[a-zA-Z0-9_-]{1,64}``, else with ``_`` for each other character. Raises
    :class:`SamplingUnsupported` when two tools would get one name or a name is too long."""
    names: dict[str, str] = {}
    taken: dict[str, str] = {}
    for tool in tools or ():
        sent = _provider_name(tool.name)
        if not _TOOL_NAME.fullmatch(sent):
            raise SamplingUnsupported(
                f"the tool name {tool.name!r} does not fit the provider's names "
                "([a-zA-Z0-9_-], 1 to 64 characters)"
            )
        if sent in taken and taken[sent] != tool.name:
            raise SamplingUnsupported(
                f"the tools {taken[sent]!r} and {tool.name!r} would both be sent as {sent!r}"
            )
        taken[sent] = tool.name
        names[tool.name] = sent
    return names


def _provider_name(name: str) -> str:
    return _NAME_CHAR.sub("_", name)


def _blocks(content: SamplingContent | tuple[SamplingContent, ...]) -> tuple[SamplingContent, ...]:
    return content if isinstance(content, tuple) else (content,)


def _schema(tool: Tool) -> dict[str, Any]:
    """The tool's input schema as the providers take it: an object schema, ``$schema`` dropped."""
    schema = {key: value for key, value in tool.input_schema.items() if key != "$schema"}
    schema.setdefault("type", "object")
    if schema["type"] == "object":
        schema.setdefault("properties", {})
    copied: dict[str, Any] = json.loads(json.dumps(schema))  # a deep copy of plain JSON
    return copied


def _description(tool: Tool) -> str:
    return tool.description or tool.title or tool.name


def _result_text(block: ToolResultContent, *, error_prefix: bool) -> str:
    """The text of a tool result: its text blocks, embedded text resources and links; its
    ``structuredContent`` as JSON when it has no text."""
    parts: list[str] = []
    for item in block.content:
        if isinstance(item, TextContent):
            parts.append(item.text)
        elif isinstance(item, EmbeddedResource) and isinstance(item.resource, TextResourceContents):
            parts.append(item.resource.text)
        elif isinstance(item, ResourceLink):
            parts.append(f"[resource {item.uri}]")
        elif isinstance(item, EmbeddedResource):
            parts.append(f"[binary resource {item.resource.uri}, not shown]")
        elif isinstance(item, AudioContent):
            parts.append(f"[audio of type {item.mime_type}, not shown]")
    if not parts and block.structured_content is not None:
        parts.append(json.dumps(block.structured_content, ensure_ascii=False))
    text = "\n".join(parts)
    if error_prefix and block.is_error:
        return f"Error: {text}" if text else "Error"
    return text


def _image(block: ImageContent, provider: str) -> None:
    if block.mime_type not in _IMAGE_TYPES:
        raise SamplingUnsupported(
            f"{provider} takes PNG, JPEG, GIF and WebP images, not {block.mime_type}"
        )


def _plain(value: Any, what: str) -> dict[str, Any]:
    """A provider's answer as a plain dict: the SDK's object (``model_dump()``) or a mapping."""
    if isinstance(value, Mapping):
        return dict(value)
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        dumped = dump()
        if isinstance(dumped, Mapping):
            return dict(dumped)
    raise InternalError(f"the {what} answer is no object (got {type(value).__name__})", code=-32603)


def _content(blocks: list[SamplingContent]) -> SamplingContent | tuple[SamplingContent, ...]:
    """One text block alone (what every revision takes), else the list (2025-11-25)."""
    if len(blocks) == 1 and isinstance(blocks[0], TextContent):
        return blocks[0]
    if not blocks:
        return TextContent(text="")
    return tuple(blocks)


def _tokens(usage: Any, *keys: str) -> int:
    if not isinstance(usage, Mapping):
        return 0
    total = 0
    for key in keys:
        value = usage.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            total += value
    return total


# --------------------------------------------------------------------------- OpenAI


def openai_chat_request(
    params: CreateMessageRequestParams,
    *,
    model: str,
    system: str | None,
    max_tokens_key: Literal["max_completion_tokens", "max_tokens"] = "max_completion_tokens",
    names: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The Chat Completions request (``client.chat.completions.create(**request)``) for
    ``params``, with ``model`` and the ``system`` prompt (the server's, with the host's context
    if any). ``names`` is :func:`provider_tool_names` of the request's tools."""
    names = provider_tool_names(params.tools) if names is None else names
    messages: list[dict[str, Any]] = []
    if system:
        messages.append({"role": "system", "content": system})
    for message in params.messages:
        messages.extend(_openai_messages(message, names))
    request: dict[str, Any] = {"model": model, "messages": messages}
    request[max_tokens_key] = params.max_tokens
    if params.temperature is not None:
        request["temperature"] = params.temperature
    if params.stop_sequences:
        request["stop"] = list(params.stop_sequences)
    if params.tools:
        request["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": names[tool.name],
                    "description": _description(tool),
                    "parameters": _schema(tool),
                },
            }
            for tool in params.tools
        ]
        mode = params.tool_choice.mode if params.tool_choice is not None else None
        if mode is not None and mode in _OPENAI_CHOICE:
            request["tool_choice"] = _OPENAI_CHOICE[mode]
    return request


def _openai_messages(message: SamplingMessage, names: Mapping[str, str]) -> list[dict[str, Any]]:
    blocks = _blocks(message.content)
    if message.role == "assistant":
        texts: list[str] = []
        calls: list[dict[str, Any]] = []
        for block in blocks:
            if isinstance(block, TextContent):
                texts.append(block.text)
            elif isinstance(block, ToolUseContent):
                calls.append(
                    {
                        "id": block.id,
                        "type": "function",
                        "function": {
                            "name": names.get(block.name, _provider_name(block.name)),
                            "arguments": json.dumps(dict(block.input), ensure_ascii=False),
                        },
                    }
                )
            else:
                raise SamplingUnsupported(
                    f"OpenAI Chat Completions takes text and tool calls in an assistant "
                    f"message, not {block.type!r}"
                )
        assistant: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts) or None}
        if calls:
            assistant["tool_calls"] = calls
        return [assistant]
    out: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, ToolResultContent):
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": block.tool_use_id,
                    "content": _result_text(block, error_prefix=True),
                }
            )
            # A tool message takes text only: the result's images follow in a user message.
            for item in block.content:
                if isinstance(item, ImageContent):
                    parts.append(_openai_image(item))
        else:
            parts.append(_openai_part(block))
    if parts:
        if all(part["type"] == "text" for part in parts):
            out.append({"role": "user", "content": "\n".join(part["text"] for part in parts)})
        else:
            out.append({"role": "user", "content": parts})
    return out


def _openai_part(block: SamplingContent) -> dict[str, Any]:
    if isinstance(block, TextContent):
        return {"type": "text", "text": block.text}
    if isinstance(block, ImageContent):
        return _openai_image(block)
    if isinstance(block, AudioContent):
        audio_format = _AUDIO_FORMATS.get(block.mime_type)
        if audio_format is None:
            raise SamplingUnsupported(
                f"OpenAI Chat Completions takes WAV and MP3 audio, not {block.mime_type}"
            )
        return {"type": "input_audio", "input_audio": {"data": block.data, "format": audio_format}}
    raise SamplingUnsupported(
        f"OpenAI Chat Completions takes no {block.type!r} block in a user message"
    )


def _openai_image(block: ImageContent) -> dict[str, Any]:
    _image(block, "OpenAI")
    return {
        "type": "image_url",
        "image_url": {"url": f"data:{block.mime_type};base64,{block.data}"},
    }


def openai_chat_result(
    completion: Any, *, model: str, names: Mapping[str, str]
) -> tuple[CreateMessageResult, SamplingTokens]:
    """The ``CreateMessageResult`` for a ``ChatCompletion`` (the SDK's object or its dict), and
    the tokens it cost. Raises :class:`InternalError` (-32603) for an answer without a choice
    or with tool arguments that are not a JSON object."""
    answer = _plain(completion, "OpenAI")
    choices = answer.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise InternalError("the OpenAI answer has no choice", code=-32603)
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, Mapping):
        raise InternalError("the OpenAI answer has no message", code=-32603)
    back = {sent: name for name, sent in names.items()}
    blocks: list[SamplingContent] = []
    text = message.get("content")
    refusal = message.get("refusal")
    if isinstance(text, str) and text:
        blocks.append(TextContent(text=text))
    elif isinstance(refusal, str) and refusal:
        blocks.append(TextContent(text=refusal))
    for call in message.get("tool_calls") or ():
        blocks.append(_openai_tool_use(call, back))
    reason = choice.get("finish_reason")
    stop = _OPENAI_STOP.get(reason, reason) if isinstance(reason, str) else None
    if isinstance(refusal, str) and refusal and not text:
        stop = "refusal"
    result = CreateMessageResult(
        role="assistant",
        content=_content(blocks),
        model=str(answer.get("model") or model),
        stop_reason=stop,
    )
    usage = answer.get("usage")
    tokens = SamplingTokens(
        input=_tokens(usage, "prompt_tokens"), output=_tokens(usage, "completion_tokens")
    )
    return result, tokens


def _openai_tool_use(call: Any, back: Mapping[str, str]) -> ToolUseContent:
    function = call.get("function") if isinstance(call, Mapping) else None
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
        raise InternalError("the OpenAI answer has a tool call without a function", code=-32603)
    name = function["name"]
    try:
        arguments = json.loads(function.get("arguments") or "{}")
    except (TypeError, ValueError):
        arguments = None
    if not isinstance(arguments, dict):
        raise InternalError(
            f"the model called {name!r} with arguments that are not a JSON object", code=-32603
        )
    return ToolUseContent(id=str(call.get("id") or ""), name=back.get(name, name), input=arguments)


# --------------------------------------------------------------------------- Anthropic


def anthropic_messages_request(
    params: CreateMessageRequestParams,
    *,
    model: str,
    system: str | None,
    names: Mapping[str, str] | None = None,
    temperature: bool = False,
) -> dict[str, Any]:
    """The Messages request (``client.messages.create(**request)``) for ``params``, with
    ``model`` and the ``system`` prompt. ``names`` is :func:`provider_tool_names` of the
    request's tools. The request's ``temperature`` is sent only with ``temperature=True``: the
    current Messages API has none (the SDK's ``create`` refuses the keyword)."""
    names = provider_tool_names(params.tools) if names is None else names
    request: dict[str, Any] = {
        "model": model,
        "max_tokens": params.max_tokens,
        "messages": [
            {
                "role": message.role,
                "content": [_anthropic_block(block, names) for block in _blocks(message.content)],
            }
            for message in params.messages
        ],
    }
    if system:
        request["system"] = system
    if temperature and params.temperature is not None:
        request["temperature"] = params.temperature
    if params.stop_sequences:
        request["stop_sequences"] = list(params.stop_sequences)
    if params.tools:
        request["tools"] = [
            {
                "name": names[tool.name],
                "description": _description(tool),
                "input_schema": _schema(tool),
            }
            for tool in params.tools
        ]
        mode = params.tool_choice.mode if params.tool_choice is not None else None
        if mode is not None and mode in _ANTHROPIC_CHOICE:
            request["tool_choice"] = {"type": _ANTHROPIC_CHOICE[mode]}
    return request


def _anthropic_block(block: SamplingContent, names: Mapping[str, str]) -> dict[str, Any]:
    if isinstance(block, TextContent):
        return {"type": "text", "text": block.text}
    if isinstance(block, ImageContent):
        return _anthropic_image(block)
    if isinstance(block, ToolUseContent):
        return {
            "type": "tool_use",
            "id": block.id,
            "name": names.get(block.name, _provider_name(block.name)),
            "input": dict(block.input),
        }
    if isinstance(block, ToolResultContent):
        content: list[dict[str, Any]] = []
        text = _result_text(block, error_prefix=False)
        if text:
            content.append({"type": "text", "text": text})
        for item in block.content:
            if isinstance(item, ImageContent):
                content.append(_anthropic_image(item))
        result: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": block.tool_use_id,
            "content": content,
        }
        if block.is_error:
            result["is_error"] = True
        return result
    if isinstance(block, AudioContent):
        raise SamplingUnsupported("Anthropic's Messages API takes no audio")
    raise SamplingUnsupported(f"Anthropic's Messages API takes no {block.type!r} block")


def _anthropic_image(block: ImageContent) -> dict[str, Any]:
    _image(block, "Anthropic")
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": block.mime_type, "data": block.data},
    }


def anthropic_messages_result(
    message: Any, *, model: str, names: Mapping[str, str]
) -> tuple[CreateMessageResult, SamplingTokens]:
    """The ``CreateMessageResult`` for a Messages answer (the SDK's ``Message`` or its dict), and
    the tokens it cost. Its text and ``tool_use`` blocks are kept; other blocks (thinking...)
    are the provider's own and left out."""
    answer = _plain(message, "Anthropic")
    content = answer.get("content")
    if not isinstance(content, list):
        raise InternalError("the Anthropic answer has no content", code=-32603)
    back = {sent: name for name, sent in names.items()}
    blocks: list[SamplingContent] = []
    for block in content:
        if not isinstance(block, Mapping):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            blocks.append(TextContent(text=block["text"]))
        elif block.get("type") == "tool_use":
            name = block.get("name")
            arguments = block.get("input")
            if not isinstance(name, str) or not isinstance(arguments, Mapping):
                raise InternalError(
                    "the Anthropic answer has a tool_use block without a name or input",
                    code=-32603,
                )
            blocks.append(
                ToolUseContent(
                    id=str(block.get("id") or ""), name=back.get(name, name), input=dict(arguments)
                )
            )
    reason = answer.get("stop_reason")
    result = CreateMessageResult(
        role="assistant",
        content=_content(blocks),
        model=str(answer.get("model") or model),
        stop_reason=_ANTHROPIC_STOP.get(reason, reason) if isinstance(reason, str) else None,
    )
    usage = answer.get("usage")
    tokens = SamplingTokens(
        input=_tokens(
            usage, "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"
        ),
        output=_tokens(usage, "output_tokens"),
    )
    return result, tokens
