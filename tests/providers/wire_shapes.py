"""The request bodies each API accepts, as strict msgspec Structs: an unknown field anywhere, a
missing required one or a wrong type fails ``check_*``. Written from the APIs' request
references (Anthropic Messages ``POST /v1/messages``; OpenAI Chat Completions
``POST /chat/completions``) for the parts our adapters send."""

from __future__ import annotations

from typing import Any, Literal, Union

import msgspec
from msgspec import Struct


class _S(Struct, forbid_unknown_fields=True, omit_defaults=True):
    pass


# --------------------------------------------------------------------------- Anthropic Messages

class CacheControl(_S):
    type: Literal["ephemeral"]
    ttl: Literal["5m", "1h"] | None = None


class AText(_S, tag="text", tag_field="type"):
    text: str
    cache_control: CacheControl | None = None
    citations: list[dict[str, Any]] | None = None


class AImage(_S, tag="image", tag_field="type"):
    source: dict[str, Any]
    cache_control: CacheControl | None = None


class ADocument(_S, tag="document", tag_field="type"):
    source: dict[str, Any]
    title: str | None = None
    context: str | None = None
    citations: dict[str, Any] | None = None
    cache_control: CacheControl | None = None


class AToolUse(_S, tag="tool_use", tag_field="type"):
    id: str
    name: str
    input: dict[str, Any]
    cache_control: CacheControl | None = None


class AToolResult(_S, tag="tool_result", tag_field="type"):
    tool_use_id: str
    content: Union[str, list[Union[AText, AImage, ADocument]]] = ""
    is_error: bool | None = None
    cache_control: CacheControl | None = None


class AThinking(_S, tag="thinking", tag_field="type"):
    thinking: str
    signature: str


class ARedactedThinking(_S, tag="redacted_thinking", tag_field="type"):
    data: str


class AServerToolUse(_S, tag="server_tool_use", tag_field="type"):
    id: str
    name: str
    input: dict[str, Any]
    cache_control: CacheControl | None = None


class AWebSearchResult(_S, tag="web_search_tool_result", tag_field="type"):
    tool_use_id: str
    content: Any
    cache_control: CacheControl | None = None


ABlock = Union[AText, AImage, ADocument, AToolUse, AToolResult, AThinking, ARedactedThinking,
               AServerToolUse, AWebSearchResult]


class AMessage(_S):
    role: Literal["user", "assistant"]
    content: Union[str, list[ABlock]]


class ATool(_S):
    name: str
    input_schema: dict[str, Any]
    description: str | None = None
    cache_control: CacheControl | None = None


class ASystem(_S, tag="text", tag_field="type"):
    text: str
    cache_control: CacheControl | None = None


class AnthropicRequest(_S):
    model: str
    max_tokens: int
    messages: list[AMessage]
    system: Union[str, list[ASystem], None] = None
    tools: list[ATool] | None = None
    stream: bool | None = None
    temperature: float | None = None
    metadata: dict[str, Any] | None = None
    stop_sequences: list[str] | None = None
    thinking: dict[str, Any] | None = None
    tool_choice: dict[str, Any] | None = None


def check_anthropic(body: dict) -> AnthropicRequest:
    req = msgspec.convert(body, AnthropicRequest)
    assert req.messages, "at least one message"
    assert req.messages[0].role == "user", "the first message is the user's"
    for a, b in zip(req.messages, req.messages[1:]):
        assert a.role != b.role, "roles alternate"
    marks = sum(1 for m in body["messages"] for blk in m["content"] if "cache_control" in blk)
    marks += sum(1 for t in body.get("tools", []) if "cache_control" in t)
    marks += sum(1 for s in body.get("system", []) if isinstance(s, dict) and "cache_control" in s)
    assert marks <= 4, "at most 4 cache breakpoints"
    return req


# --------------------------------------------------------------------------- OpenAI Chat Completions

class OFunctionCall(_S):
    name: str
    arguments: str


class OToolCall(_S):
    id: str
    type: Literal["function"]
    function: OFunctionCall


class OTextPart(_S, tag="text", tag_field="type"):
    text: str


class OImagePart(_S, tag="image_url", tag_field="type"):
    image_url: dict[str, Any]


class OAudioRef(_S):
    id: str


class OSystem(_S, tag="system", tag_field="role"):
    content: Union[str, list[OTextPart]]
    name: str | None = None


class ODeveloper(_S, tag="developer", tag_field="role"):
    content: Union[str, list[OTextPart]]
    name: str | None = None


class OUser(_S, tag="user", tag_field="role"):
    content: Union[str, list[Union[OTextPart, OImagePart]]]
    name: str | None = None


class OAssistant(_S, tag="assistant", tag_field="role"):
    content: Union[str, list[OTextPart], None] = None
    refusal: str | None = None
    name: str | None = None
    audio: OAudioRef | None = None
    tool_calls: list[OToolCall] | None = None


class OTool(_S, tag="tool", tag_field="role"):
    tool_call_id: str
    content: Union[str, list[OTextPart]]


OMessage = Union[OSystem, ODeveloper, OUser, OAssistant, OTool]


class OFunction(_S):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class OToolDef(_S):
    type: Literal["function"]
    function: OFunction


class OStreamOptions(_S):
    include_usage: bool | None = None


class OpenAIRequest(_S):
    model: str
    messages: list[OMessage]
    max_completion_tokens: int | None = None
    max_tokens: int | None = None
    tools: list[OToolDef] | None = None
    stream: bool | None = None
    stream_options: OStreamOptions | None = None
    temperature: float | None = None
    tool_choice: Any = None


def check_openai(body: dict) -> OpenAIRequest:
    req = msgspec.convert(body, OpenAIRequest)
    called: set[str] = set()
    for m in req.messages:
        if isinstance(m, OAssistant):
            assert m.content is not None or m.tool_calls or m.refusal or m.audio, \
                "an assistant message carries something"
            called |= {c.id for c in m.tool_calls or ()}
        elif isinstance(m, OTool):
            assert m.tool_call_id in called, "a tool message answers an earlier call"
    return req


# --------------------------------------------------------------------------- OpenAI Responses
# ``POST /responses`` (openai/openai-openapi ``CreateResponse``, the ``InputItem`` union): the
# parts ``providers/openai_responses.py`` sends.

class RInputText(_S, tag="input_text", tag_field="type"):
    text: str


class ROutputText(_S, tag="output_text", tag_field="type"):
    text: str
    annotations: list[Any] | None = None
    logprobs: list[Any] | None = None


class RMessage(_S, tag="message", tag_field="type"):
    role: Literal["user", "assistant", "system", "developer"]
    content: Union[str, list[Union[RInputText, ROutputText]]]
    id: str | None = None
    status: str | None = None
    phase: str | None = None


class RFunctionCall(_S, tag="function_call", tag_field="type"):
    call_id: str
    name: str
    arguments: str
    id: str | None = None
    status: str | None = None


class RFunctionCallOutput(_S, tag="function_call_output", tag_field="type"):
    call_id: str
    output: str
    id: str | None = None
    status: str | None = None


class RSummaryText(_S, tag="summary_text", tag_field="type"):
    text: str


class RReasoningText(_S, tag="reasoning_text", tag_field="type"):
    text: str


class RReasoning(_S, tag="reasoning", tag_field="type"):
    summary: list[RSummaryText]
    # the reference marks ``id`` required on output; Codex sends its items back without one
    id: str | None = None
    encrypted_content: str | None = None
    content: list[RReasoningText] | None = None
    status: Literal["in_progress", "completed", "incomplete"] | None = None


RItem = Union[RMessage, RFunctionCall, RFunctionCallOutput, RReasoning]


class RTool(_S, tag="function", tag_field="type"):
    name: str
    parameters: dict[str, Any] | None
    strict: bool | None
    description: str | None = None


class ResponsesRequest(_S):
    model: str
    input: list[RItem]
    store: bool
    include: list[Literal["reasoning.encrypted_content"]]
    instructions: str | None = None
    tools: list[RTool] | None = None
    tool_choice: Any = None
    max_output_tokens: int | None = None
    prompt_cache_key: str | None = None
    previous_response_id: str | None = None
    stream: bool | None = None


def check_responses(body: dict) -> ResponsesRequest:
    req = msgspec.convert(body, ResponsesRequest)
    called: set[str] = set()
    for item in req.input:
        if isinstance(item, RFunctionCall):
            called.add(item.call_id)
        elif isinstance(item, RFunctionCallOutput):
            assert item.call_id in called, "an output answers an earlier call"
        elif isinstance(item, RReasoning):
            assert item.encrypted_content, "stateless: a reasoning item carries its content"
    return req
