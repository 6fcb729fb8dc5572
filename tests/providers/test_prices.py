"""The price table, cost of a usage, and the sweep gate with the seed's worked example."""

from __future__ import annotations

import json
import math

import pytest

from mnemon.providers.prices import (
    DEFAULT_PRICE,
    PRICES,
    PRICES_DATE,
    cost_usd,
    load_prices,
    price_for,
    prices_from,
    sweep_gate,
)
from mnemon.session.records import Usage


def test_seed_worked_example():
    """seeds/004: 800k context, sweep reclaims 200k at earliest position 100k, 1-hour TTL."""
    context, earliest, reclaimed = 800_000, 100_000, 200_000
    read = 0.1
    suffix = context - earliest - reclaimed  # what survives after the earliest touched position
    assert suffix == 500_000
    low = sweep_gate(reclaimed, suffix, write_mult=1.0, read_mult=read)
    high = sweep_gate(reclaimed, suffix, write_mult=2.0, read_mult=read)
    assert (low.one_time, high.one_time) == pytest.approx((450_000, 950_000))
    assert low.saving_per_request == pytest.approx(20_000)
    assert context * read == pytest.approx(80_000)  # standing cost before
    assert (context - reclaimed) * read == pytest.approx(60_000)  # and after
    assert (low.payback_turns, high.payback_turns) == (23, 48)
    assert low.payback_requests == pytest.approx(22.5)
    assert high.payback_requests == pytest.approx(47.5)
    # At $5 / 1M input (the Opus tier):
    input_price = price_for("claude-opus-4-6").input
    assert input_price == 5.0
    assert context * read * input_price / 1e6 == pytest.approx(0.40)
    assert (context - reclaimed) * read * input_price / 1e6 == pytest.approx(0.30)
    assert low.usd(input_price) == pytest.approx((2.25, 0.10))
    assert high.usd(input_price)[0] == pytest.approx(4.75)


def test_gate_with_nothing_reclaimed():
    gate = sweep_gate(0, 1000, 1.25, 0.1)
    assert math.isinf(gate.payback_requests) and gate.payback_turns == -1


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
