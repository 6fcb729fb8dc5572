"""The shared conformance suite, run on every adapter."""

from __future__ import annotations

import httpx

from mnemon.providers import AnthropicProvider, OpenAIProvider, ScriptedProvider, make_provider
from tests.providers.conformance import (
    anthropic_transport,
    check_provider,
    conformance_policy,
    openai_transport,
)


async def test_anthropic_conforms():
    """Anthropic Messages over MockTransport, streamed."""
    await check_provider(lambda: AnthropicProvider(
        httpx.AsyncClient(transport=anthropic_transport()), "sk-ant-test", "claude-sonnet-4-5"))


async def test_openai_conforms():
    """OpenAI Chat Completions over MockTransport, streamed."""
    await check_provider(lambda: OpenAIProvider(
        httpx.AsyncClient(transport=openai_transport()), "sk-test", "gpt-4.1"))


async def test_openai_compatible_base_url_conforms():
    """A compatible server named by base_url (the adapter adds /chat/completions)."""
    await check_provider(lambda: make_provider(
        "openai", model="qwen", base_url="http://localhost:8000/v1", api_key="local",
        http_client=httpx.AsyncClient(transport=openai_transport())))


async def test_scripted_conforms():
    """The scripted provider playing the same conversation through a policy."""
    await check_provider(lambda: ScriptedProvider(policy=conformance_policy))


async def test_scripted_via_make_provider_conforms():
    await check_provider(lambda: make_provider("scripted", policy=conformance_policy))
