"""The revisit's arithmetic (``session.revisit``): its closed forms against the cost model they
stand for, computed the long way; its bounds; and its direction (more taken never pays less)."""

from __future__ import annotations

import math
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from mnemon.session.keep import Economy
from mnemon.session.revisit import (REVISIT_MARGIN, REVISIT_MIN_REQUESTS, may_pay, outlasts,
                                    weigh_revisit, within)

economies = st.builds(
    Economy, tokens_per_byte=st.just(0.25), write_mult=st.sampled_from([1.0, 1.25, 2.0]),
    read_mult=st.sampled_from([0.1, 0.25]), output_mult=st.just(5.0),
    growth_tokens=st.floats(50.0, 3000.0), due_tokens=st.floats(20_000.0, 110_000.0),
    fixed_tokens=st.floats(0.0, 3000.0), floor_tokens=st.floats(1000.0, 8000.0))


def _expected_by_steps(e: Economy, used: float, kept: float, scale: float) -> float:
    """E[reads saved − writes added] of a revisit, request by request: the chance the session
    is still running at each request times what the two paths pay on it (reads), and the
    rewrites each path makes, weighted by the chance it lives to make them."""
    x = used - e.fixed_tokens - kept
    horizon = (e.due_tokens - used) / e.growth_tokens
    later = horizon + x / e.growth_tokens
    reads = 0.0
    # before the line the revisit saves x a request; after it, until its own later cut, the
    # due cut would have left the context g·H lower (midpoints, each piece on its own)
    for lo, hi, saved in ((0.0, horizon, x), (horizon, later, -e.growth_tokens * horizon)):
        steps = 10_000
        dt = (hi - lo) / steps
        for i in range(steps):
            t = lo + (i + 0.5) * dt
            reads += e.read_mult * saved * scale / (scale + t) * dt
    rewrite = e.fixed_tokens + kept
    # with: now, and at `later` if the session is still running; without: at `horizon`
    writes = e.write_mult * rewrite * (1 + outlasts(scale, later) - outlasts(scale, horizon))
    return reads - writes


@settings(max_examples=60, deadline=None)
@given(economies, st.floats(0.05, 0.95), st.floats(0.05, 0.95), st.integers(1, 400))
def test_the_closed_forms_are_the_expectation_of_the_cost_model(e, at, keep_share, scale):
    used = e.fixed_tokens + at * (e.due_tokens - e.fixed_tokens)
    kept = keep_share * (used - e.fixed_tokens)
    r = weigh_revisit(e, used, kept, e.floor_tokens, REVISIT_MIN_REQUESTS, scale)
    want = _expected_by_steps(e, used, kept, scale)
    assert math.isclose(r.gain - r.cost, want, rel_tol=2e-3, abs_tol=2.0 + 1e-3 * r.cost)


@given(st.integers(0, 1000), st.floats(0.0, 500.0), st.floats(0.0, 500.0),
       st.floats(0.0, 500.0))
def test_the_tail_law(scale, a, b, c):
    lo, mid, hi = sorted((a, b, c))
    assert 0.0 <= outlasts(scale, hi) <= outlasts(scale, lo) <= 1.0
    # additive, never more requests than the interval holds, never negative
    assert math.isclose(within(scale, lo, hi), within(scale, lo, mid) + within(scale, mid, hi),
                        rel_tol=1e-9, abs_tol=1e-6)
    assert -1e-9 <= within(scale, lo, hi) <= hi - lo + 1e-6
    if scale > 0 and hi > 0:
        assert math.isclose(outlasts(scale, scale), 0.5)  # the median remainder is the age


@settings(max_examples=200, deadline=None)
@given(economies, st.floats(0.05, 0.95), st.floats(0.05, 0.9), st.floats(0.01, 0.99),
       st.integers(0, 30), st.integers(1, 400))
def test_bounds_and_direction(e, at, keep_share, more, since, scale):
    used = e.fixed_tokens + at * (e.due_tokens - e.fixed_tokens)
    kept = keep_share * (used - e.fixed_tokens)
    r = weigh_revisit(e, used, kept, e.floor_tokens, since, scale)
    if r.pays:
        assert since >= REVISIT_MIN_REQUESTS  # never right after a cut: no churn
        assert r.gain > REVISIT_MARGIN * r.cost > 0  # the expectation is for it, with margin
    # never under the floor, whatever the figures
    assert not weigh_revisit(e, used, kept, e.floor_tokens - 1, since, scale).pays
    # never at or past the eviction line: that is the due cut's (or a held one's) place
    past = weigh_revisit(e, e.due_tokens * (1 + at), kept, e.floor_tokens, since, scale)
    assert past.gain <= 0 and not past.pays
    # taking more (keeping less) never turns a revisit that pays into one that does not
    r2 = weigh_revisit(e, used, kept * (1 - more), e.floor_tokens, since, scale)
    assert r2.gain >= r.gain - 1e-6 and r2.cost <= r.cost + 1e-6
    assert r2.pays or not r.pays


def test_a_long_tail_pays_and_a_short_one_does_not():
    """By hand, at a 64k window's line: 13 000 tokens carried, a cut keeping 7 000, growth 160
    a request. Early in a session (10 requests) the tail is expected short; after 80 it pays."""
    e = Economy(tokens_per_byte=0.25, write_mult=1.25, read_mult=0.1, output_mult=5.0,
                growth_tokens=160.0, due_tokens=47_616.0, fixed_tokens=0.0, floor_tokens=6500.0)
    late = weigh_revisit(e, 20_000, 7000, 6800, 30, 80)
    assert late.horizon == (47_616 - 20_000) / 160 and late.taken_tokens == 13_000
    gain = 0.1 * (13_000 * 80 * math.log1p(late.horizon / 80)
                  - (47_616 - 20_000) * 80 * math.log((80 + late.horizon + 13_000 / 160)
                                                      / (80 + late.horizon)))
    assert math.isclose(late.gain, gain)
    assert late.pays
    assert not weigh_revisit(e, 20_000, 7000, 6800, 30, 3).pays
    # the same revisit, one request after the cut: not weighed at all
    assert not weigh_revisit(e, 20_000, 7000, 6800, 1, 80).pays
    # without growth the line is never reached: the horizon is the guard's
    flat = weigh_revisit(replace(e, growth_tokens=0.0), 20_000, 7000, 6800, 30, 80)
    assert flat.gain > 0


@settings(max_examples=500, deadline=None)
@given(economies, st.floats(0.0, 120_000.0), st.floats(0.0, 60_000.0), st.floats(0.0, 20_000.0),
       st.integers(0, 40), st.integers(1, 600))
def test_the_quick_bound_never_refuses_a_revisit_that_pays(e, used, extra, more_verbatim,
                                                           since, so_far):
    """``may_pay`` answers before any plan is made; whatever cut the plan would bring (it
    keeps at least the floor), if that cut pays, the bound said it might."""
    verbatim = e.floor_tokens + more_verbatim
    kept = verbatim + extra
    if weigh_revisit(e, used, kept, verbatim, since, so_far).pays:
        assert may_pay(e, used, since, so_far)
