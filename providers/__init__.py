"""LLM adapters over httpx (Anthropic, OpenAI and compatibles), the scripted provider, the
prompt-cache model and the price table. See docs/providers.md."""

from providers.anthropic import AnthropicProvider
from providers.base import Provider, Request, Response, ToolDef
from providers.cache import CacheModel, FlatBlock, flatten, place_breakpoints, previous_request_len
from providers.errors import (
    AuthError,
    ContextTooLong,
    InvalidRequest,
    Overloaded,
    ProviderConfigError,
    ProviderConnectionError,
    ProviderError,
    ProviderHTTPError,
    ProviderTimeout,
    RateLimited,
    ServerError,
    StreamInterrupted,
)
from providers.openai import OpenAIProvider
from providers.prices import (
    PRICES,
    PRICES_DATE,
    Price,
    SweepGate,
    cost_usd,
    load_prices,
    price_for,
    prices_from,
    sweep_gate,
)
from providers.retry import OnAttempt, RetryPolicy, call_with_retry
from providers.scripted import ScriptedProvider
from providers.select import make_provider

__all__ = [
    "Provider",
    "Request",
    "Response",
    "ToolDef",
    "OnAttempt",
    "make_provider",
    "AnthropicProvider",
    "OpenAIProvider",
    "ScriptedProvider",
    "RetryPolicy",
    "call_with_retry",
    "CacheModel",
    "FlatBlock",
    "flatten",
    "place_breakpoints",
    "previous_request_len",
    "PRICES",
    "PRICES_DATE",
    "Price",
    "price_for",
    "prices_from",
    "load_prices",
    "cost_usd",
    "SweepGate",
    "sweep_gate",
    "ProviderError",
    "ProviderConfigError",
    "ProviderHTTPError",
    "RateLimited",
    "Overloaded",
    "ServerError",
    "AuthError",
    "InvalidRequest",
    "ContextTooLong",
    "ProviderTimeout",
    "ProviderConnectionError",
    "StreamInterrupted",
]
