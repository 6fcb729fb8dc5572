"""A Vertex run of Claude is priced at its location: a regional one pays Anthropic's 10 %
premium (decision 0403), the global endpoint does not — read from ``GOOGLE_CLOUD_LOCATION`` when
the settings are made, recorded as the name its calls are priced as."""

from __future__ import annotations

import pytest

from mnemon.orchestrator.configure import settings_from
from mnemon.providers.prices import cloud_model, cost_usd, price_for, vertex_price_name
from mnemon.session.records import Usage

MODEL = "claude-sonnet-4-5@20250929"


def test_the_location_is_part_of_the_priced_name(monkeypatch):
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "us-east5")
    s = settings_from({"provider": "vertex", "model": MODEL})
    assert s.price_model == f"{MODEL}/us-east5" and s.model == MODEL
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "global")
    assert settings_from({"provider": "vertex", "model": MODEL}).price_model == f"{MODEL}/global"
    monkeypatch.delenv("GOOGLE_CLOUD_LOCATION")
    assert settings_from({"provider": "vertex", "model": MODEL}).price_model is None
    # a price the user names wins; a Gemini model on vertex is not Claude's
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "europe-west1")
    assert settings_from({"provider": "vertex", "model": MODEL,
                          "price_model": "claude-opus-4-5"}).price_model == "claude-opus-4-5"
    assert settings_from({"provider": "vertex", "model": "gemini-2.5-pro"}).price_model is None


def test_a_regional_endpoint_pays_the_premium():
    usage = Usage(input_tokens=1_000_000, output_tokens=100_000, cache_read_tokens=2_000_000,
                  cache_write_tokens=500_000)
    regional = cost_usd(usage, vertex_price_name(MODEL, "us-east5"))
    global_ = cost_usd(usage, vertex_price_name(MODEL, "global"))
    assert global_ == pytest.approx(cost_usd(usage, "claude-sonnet-4-5"))
    assert regional == pytest.approx(global_ * 1.10)
    assert cloud_model(f"{MODEL}/us-east5") == ("claude-sonnet-4-5", True)
    assert price_for(f"{MODEL}/global") == price_for("claude-sonnet-4-5")
    # older models have no regional pricing
    old = "claude-opus-4-1@20250805"
    assert cost_usd(usage, vertex_price_name(old, "us-east5")) == \
        pytest.approx(cost_usd(usage, "claude-opus-4-1"))
