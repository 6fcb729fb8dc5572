"""The revisit: a later cut of what the last harness cut kept, when the tail is expected to be long.

A harness cut chooses its keep when the rest of the session is unknown (``session.keep``), and
what it keeps is carried on every request until the next eviction. Where the context then grows
slowly that is a long time: the issue-35 sessions at 64k carried 9–20k kept tokens over tails of
72 and 169 requests and cost 1.04–1.07× compaction. Between evictions, at every turn boundary,
the revisit weighs cutting again now — the plan's own cut, at the plan's own figures
(``Economy``) — against waiting for the eviction line, over the requests still to come.

The tail is unknown; it is estimated from the session so far. A length of unknown scale that
has run T requests is still running t requests later with chance T ÷ (T + t) (its median
remainder is T: the rule of thumb for lengths with no natural scale). Without the revisit the
context grows from U to the line in H requests and the due cut then keeps about what the
revisit keeps (both hold the floor); with it, the context follows the same saw-tooth earlier:
X = U − A' lower until H, then g·H higher until its own next cut X ÷ g requests after H. So the
revisit is a bet on the tail: it gains when the session ends before that later cut, and costs
one rewrite for nothing when the session outlives both (``weigh_revisit``).

Its bounds make it a correction of the last cut, not a second trigger: it takes only items that
were already in the frontier at that cut (the work since is never in it), it keeps at least the
verbatim floor with no oversize exception (that exception serves the cut that must make room; a
revisit never must), it waits ``REVISIT_MIN_REQUESTS`` after the cut (no churn, decision 0268),
and the expected gain must be ``REVISIT_MARGIN`` times the expected cost. Pure numbers: the loop
passes the plan's figures (decision 0303).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .keep import MAX_REQUESTS, Economy

REVISIT_MIN_REQUESTS = 4
"""A revisit is weighed only once the kept material has been carried this many requests: one
request says nothing about the tail, and a cut right after a cut is the churn of decision 0268."""


REVISIT_MARGIN = 1.5
"""The expected gain must be this many times the expected cost. The tail's law is a rule of
thumb, not a fit, and a revisit the session outlives costs one whole rewrite for nothing
(decision 0303: at 1.0 one long session at 64k paid 0.9 % more; 1.25 to 1.5 measure the same;
at 2.0 a long session at 128k keeps 0.6 % it could have saved)."""


@dataclass(frozen=True)
class Revisit:
    """The figures one revisit was weighed with (token equivalents), for the log and the tests."""

    taken_tokens: float  # X: what the cut takes out of every later request
    rewrite_tokens: float  # A': what it writes again: fixed, residue message and kept suffix
    horizon: float  # H: requests before the context reaches the eviction line without it
    gain: float  # the expected reads saved, less the expected reads it adds after H
    cost: float  # the expected extra writes
    pays: bool


def outlasts(scale: float, t: float) -> float:
    """The chance the session is still running ``t`` requests from now, having run ``scale``:
    a length of unknown scale (the rule of thumb: its median remainder is what has passed)."""
    return scale / (scale + t) if scale + t > 0 else 0.0


def within(scale: float, a: float, b: float) -> float:
    """E[requests of the tail that fall between ``a`` and ``b`` from now] = ∫ₐᵇ outlasts."""
    if b <= a or scale <= 0:
        return 0.0
    return scale * math.log1p((b - a) / (scale + a))


def may_pay(e: Economy, used_tokens: float, since_cut: int, requests_so_far: int) -> bool:
    """Whether any revisit could pay now, before a plan is made: the best a cut could do keeps
    the floor alone — more taken (X) gains more and spares more (``weigh_revisit`` is
    monotone in what it keeps) — so if even that one does not pay, none does. The loop asks
    this at every turn after a harness cut; planning a cut costs ~0.1 ms, this a microsecond."""
    if since_cut < REVISIT_MIN_REQUESTS or used_tokens >= e.due_tokens:
        return False
    return weigh_revisit(e, used_tokens, e.floor_tokens, e.floor_tokens, since_cut,
                         requests_so_far).pays


def weigh_revisit(e: Economy, used_tokens: float, kept_tokens: float, verbatim_tokens: float,
                  since_cut: int, requests_so_far: int) -> Revisit:
    """Whether a cut now that keeps ``kept_tokens`` (its residue message and the kept suffix;
    ``verbatim_tokens`` of recorded turns among them) is expected to cost less than waiting for
    the eviction line.

    Without it the context grows from U (``used_tokens``) to the line in H = (due − U) ÷ growth
    requests, and the due cut then keeps about what this one keeps (the floor): so with it, the
    context follows the same saw-tooth, X = U − A' lower until H, then g·H higher until that
    cut comes X ÷ g requests later. Over a tail of unknown scale (``requests_so_far``):

    - gain = r·X·E[tail within (0, H)] − r·g·H·E[tail within (H, H + X÷g)];
    - cost = w·A'·(1 − P(the tail ends between H and H + X÷g)): the revisit's rewrite, less the
      due cut it spares when the session ends after H but before the later cut.

    A session that runs on past both pays one rewrite more for nothing: the revisit is a bet on
    the tail, made only when the expectation is for it.
    """
    x = max(0.0, used_tokens - e.fixed_tokens - kept_tokens)
    rewrite = e.fixed_tokens + kept_tokens
    scale = float(requests_so_far)
    if e.growth_tokens <= 0:  # the line is never reached: the guard's horizon, no later cut
        horizon = later = MAX_REQUESTS
    else:
        horizon = max(0.0, (e.due_tokens - used_tokens) / e.growth_tokens)
        later = horizon + x / e.growth_tokens
    gain = e.read_mult * (x * within(scale, 0.0, horizon)
                          - e.growth_tokens * horizon * within(scale, horizon, later))
    spared = outlasts(scale, horizon) - outlasts(scale, later)
    cost = e.write_mult * rewrite * (1.0 - spared)
    pays = (since_cut >= REVISIT_MIN_REQUESTS and verbatim_tokens >= e.floor_tokens
            and gain > REVISIT_MARGIN * cost)
    return Revisit(x, rewrite, horizon, gain, cost, pays)
