"""Bedrock and Vertex end to end outside the adapters: prices and the cache model (published
figures), the traces' ``gen_ai.provider.name``, jobs and roles selecting them, the batch engine's
one-line refusal."""

from __future__ import annotations

import json

import pytest

from mnemon.orchestrator.cli import main
from mnemon.orchestrator.jobs import load_job
from mnemon.orchestrator.roles.spec import parse_role
from mnemon.orchestrator.tracing.semconv import provider_name
from mnemon.providers.prices import PRICES, cloud_model, cost_usd, price_for
from mnemon.session.records import Usage


@pytest.mark.parametrize("model, base, regional", [
    ("global.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5-20250929", False),
    ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5-20250929", True),
    ("eu.anthropic.claude-haiku-4-5-20251001-v1:0", "claude-haiku-4-5-20251001", True),
    ("apac.anthropic.claude-sonnet-4-20250514-v1:0", "claude-sonnet-4-20250514", True),
    ("us-gov.anthropic.claude-3-haiku-20240307-v1:0", "claude-3-haiku-20240307", True),
    ("anthropic.claude-opus-4-1-20250805-v1:0", "claude-opus-4-1-20250805", True),
    ("claude-opus-4-5@20251101", "claude-opus-4-5", False),
    ("claude-haiku-4-5@latest", "claude-haiku-4-5", False),
])
def test_cloud_ids_name_their_claude_model(model, base, regional):
    assert cloud_model(model) == (base, regional)


def test_names_of_other_providers_are_not_cloud_ids():
    for name in ("claude-sonnet-4-5", "gpt-4.1", "anthropic/claude-sonnet-4-5", "scripted",
                 "claude-sonnet-4-5@batch"):
        assert cloud_model(name) is None


def test_published_prices():
    """Anthropic's list prices on both clouds; from the 4.5 generation a regional endpoint
    costs 10% more (Sonnet 4.5 in a us. profile: $3.30 / $16.50), older models do not."""
    glob = price_for("global.anthropic.claude-sonnet-4-5-20250929-v1:0")
    assert glob == PRICES["claude-sonnet-4-5"]
    us = price_for("us.anthropic.claude-sonnet-4-5-20250929-v1:0")
    assert (us.input, us.output, us.cache_read, us.cache_write_5m, us.cache_write_1h) == \
        pytest.approx((3.3, 16.5, 0.33, 4.125, 6.6))
    haiku = price_for("eu.anthropic.claude-haiku-4-5-20251001-v1:0")
    assert (haiku.input, haiku.output) == pytest.approx((1.1, 5.5))
    opus41 = price_for("us.anthropic.claude-opus-4-1-20250805-v1:0")
    assert (opus41.input, opus41.output) == (15.0, 75.0)
    old = price_for("anthropic.claude-3-5-haiku-20241022-v1:0")
    assert (old.input, old.output) == (0.8, 4.0)
    assert price_for("claude-opus-4-5@20251101") == PRICES["claude-opus-4-5"]
    assert (price_for("claude-sonnet-4@20250514").input,
            price_for("claude-sonnet-4@20250514").output) == (3.0, 15.0)


def test_cache_model_on_the_clouds():
    """Reads at 0.1× input, writes at 1.25× (5 minutes) or 2× (1 hour), as on Anthropic's API."""
    u = Usage(input_tokens=0, output_tokens=0, cache_read_tokens=1_000_000,
              cache_write_tokens=1_000_000)
    assert cost_usd(u, "claude-sonnet-4-5@20250929") == pytest.approx(0.3 + 3.75)
    assert cost_usd(u, "claude-sonnet-4-5@20250929", "1h") == pytest.approx(0.3 + 6.0)
    assert cost_usd(u, "us.anthropic.claude-sonnet-4-5-20250929-v1:0") == \
        pytest.approx(0.33 + 4.125)


def test_traces_name_the_cloud():
    assert provider_name("bedrock") == "aws.bedrock"
    assert provider_name("vertex") == "gcp.vertex_ai"


def test_a_role_may_name_either():
    for p in ("bedrock", "vertex"):
        assert parse_role("r", {"provider": p}, "roles.toml").provider == p


JOB = """\
[provider]
name = "{name}"
{extra}
[agent]
system = "You answer."

[[tasks]]
id = "k1"
prompt = "hello"
"""


@pytest.mark.parametrize("name", ["bedrock", "vertex"])
def test_a_job_may_name_either(tmp_path, name):
    path = tmp_path / "job.toml"
    path.write_text(JOB.format(name=name, extra=""))
    assert load_job(path).spec.provider.name == name


@pytest.mark.parametrize("name", ["bedrock", "vertex"])
def test_the_batch_engine_refuses_them_in_one_line(tmp_path, capsys, name):
    path = tmp_path / "job.toml"
    path.write_text(JOB.format(name=name, extra="batch = true"))
    rc = main(["run", str(path), "--run-root", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.count("\n") == 0
    assert f"does not support the {name} provider" in err
    assert not (tmp_path / "run").exists()


def test_context_windows_of_cloud_ids():
    from mnemon.providers.windows import window_for

    assert window_for("global.anthropic.claude-sonnet-4-5-20250929-v1:0") == 200_000
    assert window_for("anthropic.claude-3-5-haiku-20241022-v1:0") == 200_000
    assert window_for("claude-opus-4-5@20251101") == 200_000
