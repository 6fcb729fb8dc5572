"""Eviction's pure functions on hand-computed values; plans as properties of random tables."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mnemon.session.constants import EVICT_THRESHOLD_BYTES
from mnemon.session.context import Context, Turn
from mnemon.session.eviction import (
    HOLD_REQUESTS,
    REMIND_REQUESTS,
    REMINDER_TOKENS,
    PressureLatch,
    due_line,
    eviction_due,
    item_bytes,
    plan_eviction,
    pressure_line,
    pressure_reminder,
    held_off,
    remind_line,
    reserve,
)
from mnemon.session.records import AssistantMessage, Evicted, Residue, SessionStarted, Text, UserPrompt
from tests.strategies import fold_records, sessions


@pytest.mark.parametrize("window,res,due,pressure", [
    (200_000, 30_000, 170_000, 140_000),
    (1_000_000, 150_000, 850_000, 700_000),
    (128_000, 19_200, 108_800, 89_600),
    (100_000, 16_384, 83_616, 67_232),
    (32_768, 16_384, 16_384, 8_192),
    (8_000, 4_000, 4_000, 2_000),
])
def test_reserve_due_and_pressure_lines(window, res, due, pressure):
    assert reserve(window) == pytest.approx(res)
    assert due_line(window) == pytest.approx(due)
    assert pressure_line(window) == pytest.approx(pressure)


def test_eviction_due_with_a_window():
    assert not eviction_due(169_999, 200_000, 10**9)
    assert eviction_due(170_000, 200_000, 0)
    assert not eviction_due(3_999, 8_000, 0)
    assert eviction_due(4_000, 8_000, 0)


def test_eviction_due_without_a_window_falls_back_to_500_kib():
    assert EVICT_THRESHOLD_BYTES == 512_000
    assert not eviction_due(10**9, None, 512_000 - 1)
    assert eviction_due(0, None, 512_000)


def test_pressure_latch_fires_once_per_excursion_and_rearms_below():
    latch = PressureLatch()
    seq = [100_000, 139_999, 140_000, 150_000, 160_000, 139_000, 145_000, 145_000, 10, 140_000]
    fired = [latch.update(u, 200_000) for u in seq]
    assert fired == [False, False, True, False, False, False, True, False, False, True]


def test_pressure_latch_without_a_window_uses_history_bytes():
    latch = PressureLatch()
    half = EVICT_THRESHOLD_BYTES // 2
    assert [latch.update(0, None, h) for h in (half - 1, half, half + 9, 0, half)] == \
        [False, True, False, False, True]


def _table(sizes: list[int]) -> Context:
    recs = [SessionStarted(agent="a1")]
    for i, n in enumerate(sizes, 1):
        recs.append(UserPrompt(turn=i, text="x" * n) if i % 2 else
                    AssistantMessage(turn=i, blocks=[Text("y" * n)], stop_reason="end_turn",
                                     model=None, usage=None))
    return fold_records(recs)


def test_plan_by_hand():
    ctx = _table([1000] * 10)
    sizes = [t.bytes for t in ctx.turns]
    total = sum(sizes)
    plan = plan_eviction(ctx, 0.5)
    # walking back from turn 10: turns 10…6 fit in half (≈5 turns); the first that does not fit
    # ends the cut, so the cut is 1…5 and what is kept stays within the budget
    kept = sum(sizes[plan.span[1]:])
    assert plan.span[0] == 1 and kept <= 0.5 * total < kept + sizes[plan.span[1] - 1]
    assert plan.bytes_out + plan.bytes_kept == total


def test_no_plan_when_everything_fits_or_one_item():
    assert plan_eviction(_table([100]), 0.5) is None
    assert plan_eviction(_table([]), 0.5) is None
    assert plan_eviction(_table([10, 10]), 1.0) is None


def test_huge_newest_item_leaves_it_alone_and_cuts_the_rest():
    ctx = _table([1000, 1000, 1000, 100_000])
    plan = plan_eviction(ctx, 0.5)
    assert plan.span == (1, 3)


def test_no_plan_whose_residue_outweighs_what_it_takes():
    ctx = _table([0, 100_000])
    assert plan_eviction(ctx, 0.5) is None


def test_a_plan_that_takes_only_residues_is_no_plan():
    ctx = _table([1000, 1000, 10])
    ctx.step(Evicted(residue=Residue(span=(1, 2), by="harness")))
    assert plan_eviction(ctx, 0.0) is None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=sessions(max_records=50), keep=st.sampled_from([0.0, 0.3, 0.5, 0.7, 1.0]))
def test_plan_properties(records, keep):
    ctx = fold_records(records)
    plan = plan_eviction(ctx, keep)
    frontier = ctx.frontier()
    if plan is None:
        return
    a, b = plan.span
    first = lambda it: it.id if isinstance(it, Turn) else it.first  # noqa: E731
    last = lambda it: it.id if isinstance(it, Turn) else it.last  # noqa: E731
    # one prefix of the frontier, valid by check_span, never the newest item or the turn in hand
    assert first(frontier[0]) == a
    cut = next(i for i, it in enumerate(frontier) if last(it) == b) + 1
    assert cut < len(frontier)
    assert ctx.in_hand is None or not a <= ctx.in_hand <= b
    ctx.check_span(plan.span)
    assert any(isinstance(it, Turn) for it in frontier[:cut])
    # the kept suffix spends the keep budget: it fits (unless it is the newest item alone), and
    # the item that ends the cut did not fit
    sizes = [item_bytes(ctx, it) for it in frontier]
    total, kept = sum(sizes), sum(sizes[cut:])
    assert kept == plan.bytes_kept and total - kept == plan.bytes_out
    assert kept <= keep * total or cut == len(frontier) - 1
    assert kept + sizes[cut - 1] > keep * total
    # applying it as a harness eviction takes the plan's bytes out of the history
    before = ctx.history_bytes()
    ctx.step(Evicted(residue=Residue(span=plan.span, by="harness")))
    assert ctx.history_bytes() < before
    assert ctx.history_bytes() == ctx.history_bytes_projection()


def test_pressure_reminder_names_the_cut_the_door_and_the_tool():
    ctx = _table([1000] * 10)
    text = pressure_reminder(ctx, 150_000, 200_000)
    assert "turns 1-" in text and "transcript_read" in text and "context_evict" in text
    assert pressure_reminder(_table([10]), 150_000, 200_000).startswith("[Context pressure")


def test_the_reminder_comes_when_the_eviction_is_a_few_requests_away():
    """Decision 0268: at a 32k window (eviction line 16 000) the reminder waits until
    REMIND_REQUESTS (8) requests of growth (and its own tokens) before the line; unmeasured
    growth keeps the old pressure line; large growth never moves it before the pressure line."""
    assert REMIND_REQUESTS == 8
    assert remind_line(32_000, None) == pressure_line(32_000) == 8_000
    assert remind_line(32_000, 500.0) == 16_000 - 8 * 500 - REMINDER_TOKENS
    assert remind_line(32_000, 5_000.0) == pressure_line(32_000)
    latch = PressureLatch()
    assert not latch.update(9_000, 32_000, growth_tokens=500.0)  # 14 requests away: not yet
    assert latch.update(12_000, 32_000, growth_tokens=500.0)
    assert not latch.update(12_500, 32_000, growth_tokens=500.0)  # once per excursion


@given(used=st.integers(0, 200_000), window=st.sampled_from([None, 32_000, 64_000, 128_000]),
       growth=st.one_of(st.none(), st.floats(0, 50_000)), since=st.one_of(st.none(),
                                                                          st.integers(0, 10)))
def test_a_short_cut_holds_the_next_one_off_unless_the_window_would_overflow(used, window,
                                                                             growth, since):
    held = held_off(used, window, growth, since)
    if since is None or since >= HOLD_REQUESTS:
        assert not held
    elif window is not None and used + (growth or 0) >= window:
        assert not held, "the next request would not fit: evict now"
    else:
        assert held
