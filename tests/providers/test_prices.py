"""The price table and the cost of a usage."""

from __future__ import annotations

import json

import pytest

from mnemon.providers.prices import (
    DEFAULT_PRICE,
    PRICES,
    PRICES_DATE,
    cost_usd,
    load_prices,
    price_for,
    prices_from,
)
from mnemon.session.records import Usage


def test_the_sweep_gate_names_are_kept_one_release():
    """The gate's arithmetic moved to ``session/sweep.py`` (tests/session/test_sweep_gate.py);
    the old names still answer, with the same arguments."""
    from mnemon.providers import prices
    from mnemon.session.sweep import Gate

    assert prices.SweepGate is Gate and prices.sweep_gate is Gate
    assert prices.sweep_gate(200, 500, write_mult=1.0, read_mult=0.1).payback_requests == 22.5


def test_anthropic_multipliers_and_openai_cached_price():
    p = PRICES["claude-sonnet-4-5"]
    assert (p.input, p.output, p.cache_read, p.cache_write_5m, p.cache_write_1h) == (
        3.0, 15.0, 0.3, 3.75, 6.0)
    o = PRICES["gpt-4.1"]
    assert (o.input, o.cache_read, o.output, o.cache_write_5m, o.cache_write_1h) == (
        2.0, 0.5, 8.0, 2.0, 2.0)
    assert PRICES_DATE == "2026-11-30"


def test_price_lookup():
    assert price_for("claude-sonnet-4-5-20250929") == PRICES["claude-sonnet-4-5"]
    assert price_for("claude-opus-4-1-20250805") == PRICES["claude-opus-4-1"]
    assert price_for("gpt-4.1-mini-2025-04-14") == PRICES["gpt-4.1-mini"]
    assert price_for("gpt-4.1-2025-04-14") == PRICES["gpt-4.1"]
    assert price_for("openai/gpt-5-mini") == PRICES["gpt-5-mini"]
    assert price_for("claude-opus-4-9") == PRICES["claude-opus-4-6"]  # family fallback
    assert price_for("scripted") == DEFAULT_PRICE
    assert price_for(None) == DEFAULT_PRICE


def test_cost_usd():
    usage = Usage(input_tokens=1_000_000, output_tokens=100_000, cache_read_tokens=2_000_000,
                  cache_write_tokens=400_000)
    # Sonnet: 3 + 1.5 + 0.6 + 0.4·3.75 = 6.6; with 1-hour writes 0.4·6 = 2.4 → 7.5
    assert cost_usd(usage, "claude-sonnet-4-5") == pytest.approx(6.6)
    assert cost_usd(usage, "claude-sonnet-4-5", ttl="1h") == pytest.approx(7.5)
    assert cost_usd(Usage(input_tokens=1_000_000, cache_read_tokens=1_000_000), "gpt-4o") \
        == pytest.approx(2.5 + 1.25)


def test_override_from_toml_json_and_dict(tmp_path):
    toml = tmp_path / "prices.toml"
    toml.write_text('[models."my-model"]\ninput = 2.0\noutput = 8.0\ncache_read = 0.5\n')
    table = load_prices(toml)
    p = price_for("my-model", table)
    assert (p.input, p.cache_read, p.cache_write_5m, p.cache_write_1h) == (2.0, 0.5, 2.5, 4.0)
    assert price_for("claude-haiku-4-5", table) == PRICES["claude-haiku-4-5"]  # rest kept
    js = tmp_path / "prices.json"
    js.write_text(json.dumps({"gpt-4.1": {"input": 1.0, "output": 4.0}}))
    assert price_for("gpt-4.1", load_prices(js)).input == 1.0
    table = prices_from({"x": {"input": 1, "output": 2}})
    assert cost_usd(Usage(output_tokens=1_000_000), "x", table=table) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="'bad'"):
        prices_from({"bad": {"input": "cheap"}})


def test_a_remembered_price_follows_the_table(monkeypatch):
    """``price_for`` remembers its answers on ``PRICES``; a price replaced, a longer matching
    name added or removed (``replay --prices`` updates the table) is seen at the next call."""
    from mnemon.providers import prices

    monkeypatch.setattr(prices, "PRICES", dict(prices.PRICES))
    monkeypatch.setattr(prices, "_PRICED", {})
    dated = "claude-sonnet-4-5-20250929"
    first = price_for(dated)
    assert price_for(dated) is first  # remembered
    cheaper = prices.Price(input=1.0, output=2.0, cache_read=0.1, cache_write_5m=1.25, cache_write_1h=2.0)
    prices.PRICES["claude-sonnet-4-5"] = cheaper  # the key it came from, replaced
    assert price_for(dated) is cheaper
    exact = prices.Price(input=5.0, output=6.0, cache_read=0.5, cache_write_5m=6.25, cache_write_1h=10.0)
    prices.PRICES[dated] = exact  # a longer name that matches better, added
    assert price_for(dated) is exact
    del prices.PRICES[dated]
    assert price_for(dated) is cheaper
    assert price_for("some-unknown-model") is prices.DEFAULT_PRICE
    prices.PRICES["some-unknown"] = exact  # a prefix of a name that fell to the default
    assert price_for("some-unknown-model") is exact
