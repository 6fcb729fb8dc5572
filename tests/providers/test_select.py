"""make_provider: names, keys, one-line errors, no secret shown."""

from __future__ import annotations

import pytest

from mnemon.providers import (
    AnthropicProvider,
    OpenAIProvider,
    ProviderConfigError,
    ScriptedProvider,
    make_provider,
)


async def test_scripted_needs_nothing():
    p = make_provider("scripted", env={})
    assert isinstance(p, ScriptedProvider) and p.name == "scripted"
    assert make_provider("scripted", cache_ttl="1h").cache_model.ttl == "1h"
    assert make_provider("scripted", cache_ttl=None).cache_model.ttl == "5m"


async def test_keys_from_the_environment():
    a = make_provider("anthropic", model="claude-opus-4-6", env={"ANTHROPIC_API_KEY": "sk-ant-x"})
    assert isinstance(a, AnthropicProvider) and a.model == "claude-opus-4-6"
    assert a.url == "https://api.anthropic.com/v1/messages"
    assert "sk-ant-x" not in repr(a)
    await a.aclose()
    o = make_provider("openai", env={"OPENAI_API_KEY": "sk-y"}, max_tokens=1000)
    assert isinstance(o, OpenAIProvider) and o.url == "https://api.openai.com/v1/chat/completions"
    assert o.max_tokens == 1000
    await o.aclose()


@pytest.mark.parametrize("name,variable", [("anthropic", "ANTHROPIC_API_KEY"),
                                           ("openai", "OPENAI_API_KEY")])
def test_missing_key_is_one_line(name, variable):
    with pytest.raises(ProviderConfigError) as info:
        make_provider(name, env={})
    message = str(info.value)
    assert variable in message and "\n" not in message
    assert not info.value.retryable


def test_unknown_provider():
    with pytest.raises(ProviderConfigError, match="unknown provider 'mistral'.*scripted"):
        make_provider("mistral")


async def test_local_compatible_server_needs_no_key():
    p = make_provider("openai", model="llama3", base_url="http://localhost:11434/v1", env={})
    assert p.url == "http://localhost:11434/v1/chat/completions"
    await p.aclose()
