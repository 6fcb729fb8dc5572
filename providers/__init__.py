"""LLM adapters over httpx (Anthropic, OpenAI and compatibles), the scripted provider, the
prompt-cache model and the price table. See docs/providers.md."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import attach

__getattr__, __dir__, __all__ = attach(__name__, {
    "Provider": ".base",
    "Request": ".base",
    "Response": ".base",
    "ToolDef": ".base",
    "OnAttempt": ".retry",
    "make_provider": ".select",
    "AnthropicProvider": ".anthropic",
    "OpenAIProvider": ".openai",
    "ResponsesProvider": ".openai_responses",
    "ScriptedProvider": ".scripted",
    "RetryPolicy": ".retry",
    "call_with_retry": ".retry",
    "CacheModel": ".cache",
    "FlatBlock": ".cache",
    "flatten": ".cache",
    "place_breakpoints": ".cache",
    "previous_request_len": ".cache",
    "PRICES": ".prices",
    "PRICES_DATE": ".prices",
    "Price": ".prices",
    "price_for": ".prices",
    "prices_from": ".prices",
    "load_prices": ".prices",
    "cost_usd": ".prices",
    "SweepGate": ".prices",
    "sweep_gate": ".prices",
    "KNOWN_WINDOWS": ".windows",
    "window_for": ".windows",
    "ProviderError": ".errors",
    "ProviderConfigError": ".errors",
    "ProviderHTTPError": ".errors",
    "RateLimited": ".errors",
    "Overloaded": ".errors",
    "ServerError": ".errors",
    "AuthError": ".errors",
    "InvalidRequest": ".errors",
    "ContextTooLong": ".errors",
    "ProviderTimeout": ".errors",
    "ProviderConnectionError": ".errors",
    "StreamInterrupted": ".errors",
})

if TYPE_CHECKING:
    from .anthropic import AnthropicProvider
    from .base import Provider, Request, Response, ToolDef
    from .cache import CacheModel, FlatBlock, flatten, place_breakpoints, previous_request_len
    from .errors import (
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
    from .openai import OpenAIProvider
    from .openai_responses import ResponsesProvider
    from .windows import KNOWN_WINDOWS, window_for
    from .prices import (
        PRICES,
        PRICES_DATE,
        Price,
        cost_usd,
        load_prices,
        price_for,
        prices_from,
    )
    from .retry import OnAttempt, RetryPolicy, call_with_retry
    from .scripted import ScriptedProvider
    from ..session.sweep import Gate as SweepGate, Gate as sweep_gate  # kept one release
    from .select import make_provider
