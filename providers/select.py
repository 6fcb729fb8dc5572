"""
``make_provider``: one way to build a provider from ``--provider``, ``--model``, ``--base-url``
and the environment. A missing key or an unknown name is a ``ProviderConfigError`` with one line
naming what is missing; a key is read here and handed to the adapter, never logged or recorded.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .base import Provider
from .cache import CacheModel
from .errors import ProviderConfigError
from .retry import RetryPolicy
from .scripted import Policy, ScriptedProvider

if TYPE_CHECKING:
    import httpx

__all__ = ["PROVIDERS", "CLOUD_PROVIDERS", "DEFAULT_MODELS", "KEY_VARIABLES", "make_provider"]

# Claude on the clouds (decision 0400): credentials by each cloud's own chain, not one key
CLOUD_PROVIDERS = ("bedrock", "vertex")
PROVIDERS = ("scripted", "anthropic", "openai", "openai-responses", *CLOUD_PROVIDERS,
             # Gemini and Azure OpenAI (issue #48; providers/gemini.py, providers/azure.py)
             "gemini", "azure-openai", "azure-openai-responses")
DEFAULT_MODELS = {"scripted": "scripted", "anthropic": "claude-sonnet-4-5", "openai": "gpt-4.1",
                  "openai-responses": "gpt-5.1",
                  "gemini": "gemini-2.5-pro"}
KEY_VARIABLES = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY",
                 "openai-responses": "OPENAI_API_KEY"}
DEFAULT_MODELS.update({"bedrock": "global.anthropic.claude-sonnet-4-5-20250929-v1:0",
                       "vertex": "claude-sonnet-4-5@20250929"})


def make_provider(
    name: str,
    *,
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    env: Mapping[str, str] = os.environ,
    script: str | Path | list[dict[str, Any]] | None = None,
    policy: Policy | None = None,
    cache_model: CacheModel | None = None,
    max_tokens: int = 8192,
    http_client: httpx.AsyncClient | None = None,
    stream: bool = True,
    cache_ttl: str | None = "5m",
    retry: RetryPolicy | None = None,
    store: bool = False,
) -> Provider:
    """
    Build the named provider. ``store`` is the Responses API's opt-in to server-side storage
    (``openai-responses`` only: responses are stored and an agent's turns chained with
    ``previous_response_id``); the other providers ignore it.

    ``bedrock`` and ``vertex`` (Claude on the clouds) take their credentials and places from
    each cloud's own variables (docs/providers.md); ``api_key`` is then a Bedrock API key or a
    Vertex access token.

    Raises:
        ProviderConfigError: unknown ``name``, or no key for a hosted provider (an OpenAI
            ``base_url`` other than OpenAI's own may go without one: local servers need none).
    """
    cache_ttl = cache_ttl or "5m"
    if name == "scripted":
        return ScriptedProvider(script, policy=policy,
                                cache_model=cache_model or CacheModel(ttl=cache_ttl))
    # --- Gemini and Azure OpenAI (decisions 0410, 0411) -------------------------------
    google = _google(name, model, base_url, api_key, env, http_client, stream, max_tokens,
                     retry)
    if google is not None:
        return google
    if name in ("azure-openai", "azure-openai-responses"):
        return _azure(name, model, base_url, api_key, env, http_client, stream, max_tokens,
                      retry, store)
    # ---------------------------------------------------------------------------------------
    if name in CLOUD_PROVIDERS:
        return _cloud(name, model=model or DEFAULT_MODELS[name], base_url=base_url,
                      api_key=api_key, env=env, http_client=http_client, stream=stream,
                      max_tokens=max_tokens, cache_ttl=cache_ttl, retry=retry)
    if name not in KEY_VARIABLES:
        raise ProviderConfigError(
            f"unknown provider {name!r}: choose one of {', '.join(PROVIDERS)}")
    variable = KEY_VARIABLES[name]
    key = api_key if api_key is not None else env.get(variable)
    model = model or DEFAULT_MODELS[name]
    # each adapter (and httpx) is imported only when it is the one chosen: a scripted run, the
    # demo and the tests' default pay for no HTTP client (decision 0265)
    if name == "anthropic":
        if not key:
            raise ProviderConfigError(f"{variable} is not set (needed by --provider anthropic)")
        from .anthropic import DEFAULT_BASE_URL as ANTHROPIC_URL, AnthropicProvider

        return AnthropicProvider(http_client, key, model, base_url=base_url or ANTHROPIC_URL,
                                 stream=stream, max_tokens=max_tokens, cache_ttl=cache_ttl,
                                 retry=retry)
    from .openai import DEFAULT_BASE_URL as OPENAI_URL, OpenAIProvider

    url = base_url or OPENAI_URL
    if not key and "api.openai.com" in url:
        raise ProviderConfigError(f"{variable} is not set (needed by --provider {name})")
    if name == "openai-responses":
        from .openai_responses import ResponsesProvider

        return ResponsesProvider(http_client, key or "", model, base_url=url, stream=stream,
                                 max_tokens=max_tokens, store=store, retry=retry)
    return OpenAIProvider(http_client, key or "", model, base_url=url, stream=stream,
                          max_tokens=max_tokens, retry=retry)


def _claude_on(name: str, model: str) -> bool:
    """Whether ``model`` names Claude on the cloud: a Bedrock id or profile of Anthropic's (an
    ARN, which names no family, is let through), a Vertex name beginning ``claude``."""
    m = model.strip().lower()
    if name == "bedrock":
        return m.startswith("arn:") or m.startswith("anthropic.") or ".anthropic." in m
    return m.startswith("claude")


def _cloud(name: str, *, model: str, base_url: str | None, api_key: str | None,
           env: Mapping[str, str], http_client: httpx.AsyncClient | None, stream: bool,
           max_tokens: int, cache_ttl: str, retry: RetryPolicy | None) -> Provider:
    """Bedrock or Vertex, with what each cloud's own variables name (``api_key``: a Bedrock
    API key, or a Vertex access token)."""
    common: dict[str, Any] = dict(base_url=base_url, stream=stream, max_tokens=max_tokens,
                                  cache_ttl=cache_ttl, retry=retry)
    if not _claude_on(name, model):
        shown = model[:80].encode("unicode_escape").decode()
        raise ProviderConfigError(
            f"--provider {name} serves Claude models only, not {shown!r}: other "
            f"{'Bedrock models (the Converse API)' if name == 'bedrock' else 'Vertex models'} "
            "are not supported")
    if name == "bedrock":
        from .bedrock import BedrockProvider
        from .sigv4 import botocore_session, resolve_credentials, resolve_region

        bearer = api_key or env.get("AWS_BEARER_TOKEN_BEDROCK") or None
        session = None if env.get("AWS_REGION") and (bearer or env.get("AWS_ACCESS_KEY_ID")) \
            else botocore_session(env)
        region = resolve_region(env, session)
        if not region:
            raise ProviderConfigError("AWS_REGION is not set (needed by --provider bedrock)")
        creds = None if bearer else resolve_credentials(env, session)
        if creds is None and not bearer:
            extra = "" if session is not None else (
                "; profiles, SSO and roles need the bedrock extra: pip install 'mnemon[bedrock]'")
            raise ProviderConfigError(
                "no AWS credentials found (needed by --provider bedrock): set "
                "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or "
                f"AWS_BEARER_TOKEN_BEDROCK{extra}")
        return BedrockProvider(http_client, model, region=region, credentials=creds,
                               bearer_token=bearer, **common)
    from .vertex import DEFAULT_LOCATION, VertexProvider, load_adc

    token = api_key or env.get("GOOGLE_OAUTH_ACCESS_TOKEN") or None
    project = env.get("GOOGLE_CLOUD_PROJECT") or None
    credentials = None
    if not token:
        credentials, found = load_adc()
        project = project or found
    if not project:
        raise ProviderConfigError("GOOGLE_CLOUD_PROJECT is not set (needed by --provider vertex)")
    return VertexProvider(http_client, model, project=project,
                          location=env.get("GOOGLE_CLOUD_LOCATION") or DEFAULT_LOCATION,
                          token=token, credentials=credentials, **common)


# --------------------------------------------------------------------------- Gemini, Azure


def is_gemini(model: str | None) -> bool:
    """Whether ``--provider vertex`` with this model goes to the Gemini adapter: Google's own
    models (``gemini-…``, ``publishers/google/models/gemini-…``). Every other Vertex model is
    Claude's adapter's (the routing hook of decision 0410)."""
    return model is not None and model.rsplit("/", 1)[-1].lower().startswith("gemini")


def _google(name: str, model: str | None, base_url: str | None, api_key: str | None,
            env: Mapping[str, str], http_client: Any, stream: bool, max_tokens: int,
            retry: RetryPolicy | None) -> Provider | None:
    """``--provider gemini``, and ``--provider vertex`` with a Gemini model; None otherwise."""
    if name == "gemini":
        key = api_key if api_key is not None else (env.get("GEMINI_API_KEY")
                                                   or env.get("GOOGLE_API_KEY"))
        from .gemini import DEFAULT_BASE_URL as GEMINI_URL, GeminiProvider

        if not key and base_url is None:
            raise ProviderConfigError(
                "GEMINI_API_KEY (or GOOGLE_API_KEY) is not set (needed by --provider gemini)")
        return GeminiProvider(http_client, key or "", model or DEFAULT_MODELS["gemini"],
                              base_url=base_url or GEMINI_URL, stream=stream,
                              max_tokens=max_tokens, retry=retry)
    if name != "vertex" or not is_gemini(model):
        return None
    from .gemini import VertexGeminiProvider, adc_token, vertex_base_url

    project = env.get("GOOGLE_CLOUD_PROJECT")
    location = env.get("GOOGLE_CLOUD_LOCATION") or "global"
    if not project:
        raise ProviderConfigError("GOOGLE_CLOUD_PROJECT is not set (needed by --provider vertex)")
    token = api_key if api_key is not None else env.get("GOOGLE_OAUTH_ACCESS_TOKEN")
    return VertexGeminiProvider(http_client, token or adc_token(), model or "",
                                base_url=vertex_base_url(project, location, base_url),
                                stream=stream, max_tokens=max_tokens, retry=retry)


def _azure(name: str, model: str | None, base_url: str | None, api_key: str | None,
           env: Mapping[str, str], http_client: Any, stream: bool, max_tokens: int,
           retry: RetryPolicy | None, store: bool) -> Provider:
    """``--provider azure-openai`` (Chat Completions) and ``azure-openai-responses``."""
    from .azure import API_VERSION, AzureOpenAIProvider, AzureResponsesProvider

    endpoint = base_url or env.get("AZURE_OPENAI_ENDPOINT")
    if not endpoint:
        raise ProviderConfigError(f"AZURE_OPENAI_ENDPOINT is not set (needed by --provider {name})")
    key = api_key if api_key is not None else env.get("AZURE_OPENAI_API_KEY")
    token = env.get("AZURE_OPENAI_AD_TOKEN")
    if not key and not token:
        raise ProviderConfigError(f"AZURE_OPENAI_API_KEY or AZURE_OPENAI_AD_TOKEN is not set "
                                  f"(needed by --provider {name})")
    if not model:
        raise ProviderConfigError(f"--provider {name} needs --model: the deployment's name")
    if name == "azure-openai-responses":
        return AzureResponsesProvider(http_client, key or "", model, endpoint=endpoint,
                                      ad_token=token, stream=stream, max_tokens=max_tokens,
                                      store=store, retry=retry)
    return AzureOpenAIProvider(http_client, key or "", model, endpoint=endpoint,
                               api_version=env.get("OPENAI_API_VERSION") or API_VERSION,
                               ad_token=token, stream=stream, max_tokens=max_tokens,
                               retry=retry)
