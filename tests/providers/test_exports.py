"""Pins the public surface of ``providers``."""

from mnemon import providers
def test_all_is_importable_and_pinned():
    assert all(hasattr(providers, name) for name in providers.__all__)
    assert sorted(providers.__all__) == sorted([
        "Provider", "Request", "Response", "ToolDef", "OnAttempt", "make_provider",
        "AnthropicProvider", "OpenAIProvider", "ResponsesProvider", "ScriptedProvider",
        "RetryPolicy",
        "call_with_retry", "CacheModel", "FlatBlock", "flatten", "place_breakpoints",
        "previous_request_len", "PRICES", "PRICES_DATE", "Price", "price_for", "prices_from",
        "load_prices", "cost_usd", "SweepGate", "sweep_gate", "KNOWN_WINDOWS", "window_for",
        "ProviderError",
        "ProviderConfigError", "ProviderHTTPError", "RateLimited", "Overloaded", "ServerError",
        "AuthError", "InvalidRequest", "ContextTooLong", "ProviderTimeout",
        "ProviderConnectionError", "StreamInterrupted",
    ])
