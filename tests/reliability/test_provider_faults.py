"""Provider faults through the real Anthropic adapter, over HTTP on loopback, at a 15 % rate over
1 000 turns: every session completes or ends with a named reason, no record is duplicated,
every retry is in the forensic records, and cost is counted once."""

from __future__ import annotations

import json

import pytest

from mnemon.lineage.runroot import agent_source
from mnemon.lineage.view import open_agent
from mnemon.orchestrator import logs
from mnemon.providers.prices import cost_usd
from mnemon.session.records import Usage

from .faultserver import FAULTS, FaultServer, run_agents

AGENTS, TURNS = 50, 20  # 1 000 turns


@pytest.fixture(autouse=True)
def _quiet():
    logs.quiet()


async def test_a_thousand_turns_through_a_faulty_provider(tmp_path):
    server = FaultServer(rate=0.15, seed=7, turns=TURNS, stall_s=3.0)
    root = tmp_path / "run"
    nodes = await run_agents(root, server, AGENTS)
    assert set(FAULTS) <= set(server.stats), server.stats
    done = failed = 0
    attempts_recorded = 0
    for node in nodes:
        assert node.reason, node.id
        if node.reason == "done":
            done += 1
        else:
            failed += 1
            assert node.reason.startswith("failed: provider:"), node.reason
        recs = [json.loads(line) for line in (root / agent_source(node.id)).read_text().splitlines()]
        open_agent(root / "agents" / node.id)
        turns = [r["turn"] for r in recs if r["t"] in ("UserPrompt", "AssistantMessage")]
        assert turns == sorted(set(turns)), "no turn recorded twice"
        assert sum(r["t"] == "SessionEnded" for r in recs) == 1
        calls = [r for r in recs if r["t"] == "ProviderCall"]
        attempts_recorded += len(calls)
        ok = [c for c in calls if c.get("error") is None]
        messages = [r for r in recs if r["t"] == "AssistantMessage"]
        assert len(ok) == len(messages), "one successful call per recorded turn"
        assert all(c.get("usage") is None for c in calls if c.get("error")), "a failed attempt costs 0"
        counted = sum((Usage(**c["usage"]) for c in ok), Usage())
        assert node.usage == counted, "usage counted once"
        price = sum(cost_usd(Usage(**c["usage"]), "claude-sonnet-4-5", "5m") for c in ok)
        assert node.cost_usd == pytest.approx(price), "cost counted once"
        if node.reason == "done":
            assert len(messages) == TURNS
    assert attempts_recorded == server.stats["requests"], "every attempt is in the records"
    assert done >= AGENTS * 0.9, f"{done} of {AGENTS} completed"
