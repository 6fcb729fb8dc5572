"""The cost table a finished run prints (``mnemon demo``, chat's ``/cost``): reasoning tokens
shown apart only where a provider reported them."""

from __future__ import annotations

from types import SimpleNamespace

from mnemon.orchestrator.report import cost_columns, cost_rows, cost_table
from mnemon.session.records import Usage


def _sup(**usages: Usage) -> SimpleNamespace:
    return SimpleNamespace(agents={aid: SimpleNamespace(usage=u, cost_usd=0.01)
                                   for aid, u in usages.items()})


def test_reasoning_tokens_appear_only_where_reported():
    plain = _sup(a1=Usage(input_tokens=10, output_tokens=5))
    assert "(reasoning)" not in cost_table(plain)
    assert [k for k, _ in cost_columns(cost_rows(plain))] == [
        "agent", "input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens",
        "cost_usd"]
    mixed = _sup(a1=Usage(input_tokens=10, output_tokens=50, reasoning_tokens=40),
                 a2=Usage(input_tokens=3, output_tokens=2))
    rows = cost_rows(mixed)
    assert [r["reasoning_tokens"] for r in rows] == [40, 0]
    text = cost_table(mixed)
    head, _rule, *lines = text.splitlines()
    assert "(reasoning)" in head
    assert lines[-1].split()[:6] == ["total", "13", "0", "0", "52", "40"]
