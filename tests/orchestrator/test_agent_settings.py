"""One settings rule per agent (decision 0274): an agent started with settings of its own is
weighed, priced and recorded by them alone — its economy, its cache-write multiplier and its
cost — whatever the run's settings are."""

from __future__ import annotations

import msgspec

from mnemon.orchestrator.supervisor import open_supervisor
from mnemon.orchestrator.weighing import cache_mults, economy, priced_model, used_tokens
from mnemon.providers.prices import cost_usd, price_for
from mnemon.session.records import Usage

from .conftest import call, fetch_tool, provider, records, say, settings

# the agent's own: another model (output at 4× input, not the run model's 5×) and the 1-hour
# cache (writes at 2×, not 1.25×); the run's differ in both
OWN = dict(model="gpt-4.1", cache_ttl="1h", context_window=8000)
RUN = dict(model="claude-haiku-4-5", cache_ttl="5m", context_window=8000)


def _policy(request, state):
    """Read pages until the small context window forces harness evictions (its plan weighed by
    the economy), marking one block and surveying on the way (the gate's figures)."""
    k = state["k"] = state.get("k", 0) + 1
    if k <= 2:
        return call(state, "fetch", i=k)
    if k == 3:
        return call(state, "context_mark", block="2.1", replacement="page 1: filler lines")
    if k == 4:
        return call(state, "context_survey")
    if k <= 14:
        return call(state, "fetch", i=k)
    return say("done")


def _timeless(recs: list[dict]) -> list[dict]:
    """The records without their clocks (``at``, a provider call's latency) and the log's
    chain key (whose digests cover the clocks)."""
    return [{k: v for k, v in r.items() if k not in ("at", "latency_s", "c")} for r in recs]


async def _run(root, run_settings, own_settings):
    async with open_supervisor(root, provider(_policy), run_settings,
                               user_tools=[fetch_tool()]) as sup:
        node = sup.new_root("read", settings=own_settings)
        await sup.run(node)
    return sup, node


async def test_an_agent_is_weighed_and_priced_by_its_own_settings(tmp_path):
    own = settings(**OWN)
    # the same agent twice: once where its settings are the run's, once where the run's differ
    _, alone = await _run(tmp_path / "alone", own, None)
    sup, node = await _run(tmp_path / "inside", settings(**RUN), own)
    got, want = records(tmp_path / "inside", node.id), records(tmp_path / "alone", alone.id)
    assert any(r["t"] == "Evicted" and r.get("plan") for r in got), "the economy was weighed"
    survey = next(r["results"][0]["content"] for r in got if r["t"] == "ToolResults"
                  and '"sweep_gate"' in r["results"][0]["content"])
    assert msgspec.json.decode(survey)["sweep_gate"]["payback_requests"] is not None
    assert _timeless(got) == _timeless(want), "its records do not depend on the run's settings"
    assert node.cost_usd == alone.cost_usd > 0

    # each of the three, read directly: the economy, the cache-write multiplier, the cost
    env = sup.env
    assert priced_model(env, node) == "gpt-4.1"
    assert cache_mults(env, node) == (2.0, 0.1)
    e = economy(env, node, used_tokens(node))
    p = price_for("gpt-4.1")
    assert (e.write_mult, e.output_mult) == (2.0, p.output / p.input) != (1.25, 5.0)
    spent = [Usage(**r["usage"]) for r in got if r["t"] == "ProviderCall" and r["usage"]]
    assert node.cost_usd == sum(cost_usd(u, "gpt-4.1", "1h") for u in spent)
    assert node.cost_usd != sum(cost_usd(u, "claude-haiku-4-5", "5m") for u in spent)
