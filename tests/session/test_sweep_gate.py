"""The sweep gate's arithmetic (``session/sweep.py``'s ``Gate``, the one copy the harness runs)
with seed 004's worked example."""

from __future__ import annotations

import math

import pytest

from mnemon.providers.prices import price_for
from mnemon.session.sweep import Gate


def test_seed_worked_example():
    """seeds/004: 800k context, sweep reclaims 200k at earliest position 100k, 1-hour TTL."""
    context, earliest, reclaimed = 800_000, 100_000, 200_000
    read = 0.1
    suffix = context - earliest - reclaimed  # what survives after the earliest touched position
    assert suffix == 500_000
    low = Gate(reclaimed, suffix, write_mult=1.0, read_mult=read)
    high = Gate(reclaimed, suffix, write_mult=2.0, read_mult=read)
    assert (low.one_time, high.one_time) == pytest.approx((450_000, 950_000))
    assert low.saving_per_request == pytest.approx(20_000)
    assert context * read == pytest.approx(80_000)  # standing cost before
    assert (context - reclaimed) * read == pytest.approx(60_000)  # and after
    assert (low.payback_turns, high.payback_turns) == (23, 48)
    assert low.payback_requests == pytest.approx(22.5)
    assert high.payback_requests == pytest.approx(47.5)
    assert low.pays(23) and not low.pays(22) and not high.pays(47)
    # At $5 / 1M input (the Opus tier):
    input_price = price_for("claude-opus-4-6").input
    assert input_price == 5.0
    assert context * read * input_price / 1e6 == pytest.approx(0.40)
    assert (context - reclaimed) * read * input_price / 1e6 == pytest.approx(0.30)
    assert low.usd(input_price) == pytest.approx((2.25, 0.10))
    assert high.usd(input_price)[0] == pytest.approx(4.75)


def test_gate_with_nothing_reclaimed():
    gate = Gate(0, 1000, 1.25, 0.1)
    assert math.isinf(gate.payback_requests) and gate.payback_turns == -1
    assert not gate.pays(math.inf) and gate.as_dict()["payback_requests"] is None
