"""The intervals of ``mnemon results --summary`` and ``mnemon compare`` against references:
the t quantiles against published table values; Wilson's interval's simulated coverage over
many seeds against its exact coverage (summed over the binomial distribution) and the nominal
95 %; the t and paired-t intervals' simulated coverage on fractional scores."""

from __future__ import annotations

import math
import random

import pytest

from mnemon.orchestrator.scores.stats import estimate, paired, t_quantile, wilson


@pytest.mark.parametrize(("df", "table"), [(1, 12.7062), (2, 4.3027), (3, 3.1824),
                                           (5, 2.5706), (10, 2.2281), (20, 2.0860),
                                           (30, 2.0423), (60, 2.0003), (120, 1.9799)])
def test_t_quantiles_match_the_tables(df, table):
    assert t_quantile(0.975, df) == pytest.approx(table, abs=5e-5)


def test_t_tends_to_the_normal():
    assert t_quantile(0.975, 100_000) == pytest.approx(1.95996, abs=1e-4)


def exact_wilson_coverage(n: int, p: float) -> float:
    """The reference: the probability, summed over every outcome k of Binomial(n, p), that
    Wilson's interval for k / n holds p."""
    total = 0.0
    for k in range(n + 1):
        lo, hi = wilson(k, n)
        if lo <= p <= hi:
            total += math.comb(n, k) * p ** k * (1 - p) ** (n - k)
    return total


@pytest.mark.parametrize(("n", "p"), [(20, 0.5), (40, 0.15), (100, 0.9), (60, 0.7)])
def test_wilson_coverage_over_many_seeds(n, p):
    seeds = 3000
    covered = 0
    for seed in range(seeds):
        rng = random.Random(seed)
        values = [1.0 if rng.random() < p else 0.0 for _ in range(n)]
        e = estimate(values)
        assert e.method == "wilson" and e.n == n
        covered += e.lo <= p <= e.hi
    simulated = covered / seeds
    reference = exact_wilson_coverage(n, p)
    # the simulation's own standard error at 3000 seeds is about 0.004
    assert simulated == pytest.approx(reference, abs=0.015)
    assert 0.92 <= reference <= 0.98 and 0.92 <= simulated <= 0.98


def test_t_coverage_on_fractional_scores_over_many_seeds():
    a, b, n, seeds = 2.0, 5.0, 30, 3000
    mean = a / (a + b)
    covered = 0
    for seed in range(seeds):
        rng = random.Random(10_000 + seed)
        e = estimate([rng.betavariate(a, b) for _ in range(n)])
        assert e.method == "t"
        covered += e.lo <= mean <= e.hi
    assert covered / seeds == pytest.approx(0.95, abs=0.015)


def test_paired_coverage_over_many_seeds():
    """Two strategies on the same 50 tasks: task difficulty shared, the second better by a
    known 0.1 on average; the paired interval holds 0.1 about 95 % of the time."""
    n, seeds, covered = 50, 2000, 0
    for seed in range(seeds):
        rng = random.Random(50_000 + seed)
        base, other = [], []
        for _ in range(n):
            hard = rng.random()
            base.append(min(1.0, max(0.0, 0.5 - 0.3 * hard + rng.gauss(0, 0.1))))
            other.append(min(1.0, max(0.0, base[-1] + 0.1 + rng.gauss(0, 0.1))))
        e = paired(base, other)
        covered += e.lo <= TRUE_DIFF <= e.hi
    assert covered / seeds == pytest.approx(0.95, abs=0.02)


def _true_diff() -> float:
    rng = random.Random(1)
    total, m = 0.0, 400_000
    for _ in range(m):
        hard = rng.random()
        x = min(1.0, max(0.0, 0.5 - 0.3 * hard + rng.gauss(0, 0.1)))
        y = min(1.0, max(0.0, x + 0.1 + rng.gauss(0, 0.1)))
        total += y - x
    return total / m


TRUE_DIFF = _true_diff()


def test_edges():
    assert estimate([]).mean is None and estimate([]).method == "none"
    one = estimate([1.0])
    assert one.mean == 1.0 and one.se is None and one.lo > 0.2 and one.hi == pytest.approx(1)
    assert estimate([0.5]).lo == 0.0 and estimate([0.5]).hi == 1.0
    all_right = estimate([1.0] * 9)
    assert all_right.lo == pytest.approx(0.7009, abs=1e-4) and all_right.se == 0.0
    d = paired([0.0, 1.0, 1.0], [1.0, 1.0, 1.0])
    assert d.mean == pytest.approx(1 / 3) and d.method == "paired-t"
    with pytest.raises(ValueError):
        paired([1.0], [])
