"""The provider contract: one async method, ``complete(request) -> Response``.

A request is provider-neutral: the system prompt, the rendered messages (see ``session.render``),
tool definitions and where cache breakpoints go. Streaming, wire formats and retries live inside
each adapter.

Every adapter's ``complete`` also takes an optional keyword ``on_attempt(attempt, latency_s,
usage, error)`` (sync or async), called once per attempt so the caller can record one
``ProviderCall`` per attempt (see ``providers.retry``).

Neutral messages are plain dicts, byte-deterministic when encoded::

    {"role": "user" | "assistant", "content": [block, ...]}

with blocks::

    {"type": "text", "text": str}
    {"type": "thinking", "text": str, "signature": str | None}
    {"type": "tool_use", "id": str, "name": str, "input": dict}
    {"type": "tool_result", "tool_use_id": str, "content": str, "is_error": bool}
    {"type": "opaque", "provider": str, "block": dict}
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from msgspec import Struct, field

from ..session.records import Block, Usage


class ToolDef(Struct, frozen=True):
    """A tool the model may call: ``{name, description, input_schema}`` (JSON Schema)."""

    name: str
    description: str
    input_schema: dict[str, Any]


class Request(Struct, kw_only=True):
    system: str | None
    messages: list[dict[str, Any]]
    tools: list[ToolDef] = field(default_factory=list)
    max_tokens: int = 8192
    model: str | None = None
    # Cache breakpoints: indices into the flattened block sequence of providers.cache.flatten —
    # each tool definition, then the system prompt (one block), then every content block of
    # every message, in order; a breakpoint at i marks the end of block i (Anthropic puts
    # cache_control on it). At most 4 are used. None lets the adapter place them itself
    # (providers.cache.place_breakpoints: end of tools+system, end of the previous request's
    # messages = all but the last two messages, the last block).
    breakpoints: list[int] | None = None
    # Who is asking (agent id, kind, depth, parent, lineage); never sent over the wire.
    meta: dict[str, Any] = field(default_factory=dict)
    # The agent's output type (``providers.typed.OutputType``) or None: each adapter asks for
    # it its own way (OpenAI: ``response_format``; Anthropic: the final-answer tool).
    output: Any = None
    # Whether and which tool the model must call: None (the API's default, "auto"), "auto",
    # "none", "required" (some tool), or a tool's name (that tool).
    tool_choice: str | None = None


class Response(Struct, kw_only=True):
    blocks: list[Block]
    stop_reason: str | None
    usage: Usage
    model: str | None = None
    # what a recording said this turn cost (replay); kept beside ``usage``, never priced
    recorded_usage: Usage | None = None
    # the provider's id for this response (the Responses API's ``resp_…``), which a stored
    # conversation continues from; never recorded
    id: str | None = None


@runtime_checkable
class Provider(Protocol):
    """Intentionally small: everything else is the adapter's business."""

    name: str

    async def complete(self, request: Request) -> Response:
        """One model response. Like every Trio async function it checkpoints (a real provider
        waits on its connection; the scripted one on its simulated latency, a checkpoint even
        at 0): the loop takes the provider slot without one (decision 0262), so this is where
        an agent's turn yields to the others and sees a cancel."""
        ...

    async def aclose(self) -> None: ...
