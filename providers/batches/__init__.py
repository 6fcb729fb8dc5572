"""The providers' batch APIs: the wire of Anthropic's Message Batches and OpenAI's Batch API.

Each adapter wraps the live adapter of its provider (``providers.anthropic.AnthropicProvider``,
``providers.openai.OpenAIProvider``, built with ``stream=False``): a batched request's body is
exactly what a live one would send, and a result row decodes through the same ``decode``. The
engine that gathers agent turns into waves is ``orchestrator.batch``; this package only submits
(never twice: a lost answer is reconciled, decision 0313), polls, fetches and cancels
(docs/jobs.md, "The batch engine"; decision 0295).
"""

from __future__ import annotations

from .base import (
    BatchAPI,
    BatchEnds,
    BatchFailed,
    BatchRouteMissing,
    CreateUndecided,
    BatchRow,
    BatchStatus,
    Limits,
    split,
)

__all__ = ["BatchAPI", "BatchEnds", "BatchFailed", "BatchRouteMissing", "BatchRow", "BatchStatus",
           "CreateUndecided", "Limits", "split", "batch_api"]


def batch_api(provider):
    """The batch adapter for a live adapter (``anthropic``, ``openai``, ``openai-responses``);
    None for any other (the scripted provider has no batch API)."""
    name = getattr(provider, "name", None)
    if name == "anthropic":
        from .anthropic import AnthropicBatches

        return AnthropicBatches(provider)
    if name in ("openai", "openai-responses"):
        from .openai import RESPONSES, OpenAIBatches

        return OpenAIBatches(provider) if name == "openai" else OpenAIBatches(provider, RESPONSES)
    return None
