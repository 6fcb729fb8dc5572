"""The statistics of a summary and a comparison: a mean, its standard error, a 95 % interval.

Decision 0390 says which interval and why: **Wilson's score interval** when every score is 0
or 1 (a proportion: it keeps its coverage at small n and near 0 or 1, where the normal
interval's collapses to a point), **Student's t** otherwise (a mean of scores in [0, 1]),
clipped to the range the mean can take; a **paired t** on the per-task differences for a
comparison. All closed form: the same results give the same interval on every run and machine,
which a bootstrap's draws would not, and a bootstrap's percentile interval undercovers at the
n of a typical evaluation (tens to hundreds of tasks).

Standard library only: the t quantile from the regularised incomplete beta function
(Numerical Recipes' continued fraction), inverted by bisection.
"""

from __future__ import annotations

import math
from functools import lru_cache

from msgspec import Struct

__all__ = ["Estimate", "Z95", "estimate", "paired", "t_quantile", "wilson"]

Z95 = 1.959963984540054
"""The standard normal's 0.975 quantile."""


class Estimate(Struct, kw_only=True):
    """A mean with its uncertainty: ``n`` values, ``se`` the sample standard error (``sd /
    √n``, ``sd`` with n − 1; None for n < 2), ``lo``/``hi`` the 95 % interval and ``method``
    the interval's (``wilson``, ``t``, ``paired-t``; ``none`` for n = 0)."""

    n: int
    mean: float | None
    se: float | None
    lo: float | None
    hi: float | None
    method: str


def _betacf(a: float, b: float, x: float) -> float:
    tiny, eps = 1e-300, 3e-16
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < eps:
            break
    return h


def _betai(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T ≤ t) for Student's t with ``df`` degrees of freedom."""
    tail = 0.5 * _betai(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


@lru_cache(maxsize=512)
def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile (p > 0.5) of Student's t, by bisection on ``t_cdf`` to 1e-12."""
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12:
            break
    return (lo + hi) / 2.0


def _mean_sd(values: list[float]) -> tuple[float, float | None]:
    n = len(values)
    mean = math.fsum(values) / n
    if n < 2:
        return mean, None
    return mean, math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))


def wilson(successes: float, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson's score interval for a proportion ``successes / n``."""
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def estimate(values: list[float]) -> Estimate:
    """The mean of scores in [0, 1] with its 95 % interval (the module's docstring)."""
    n = len(values)
    if n == 0:
        return Estimate(n=0, mean=None, se=None, lo=None, hi=None, method="none")
    mean, sd = _mean_sd(values)
    se = sd / math.sqrt(n) if sd is not None else None
    if all(v in (0.0, 1.0) for v in values):
        lo, hi = wilson(math.fsum(values), n)
        return Estimate(n=n, mean=mean, se=se, lo=lo, hi=hi, method="wilson")
    if se is None:  # one fractional score: nothing is known of its spread
        return Estimate(n=n, mean=mean, se=None, lo=0.0, hi=1.0, method="t")
    half = t_quantile(0.975, n - 1) * se
    return Estimate(n=n, mean=mean, se=se, lo=max(0.0, mean - half), hi=min(1.0, mean + half),
                    method="t")


def paired(a: list[float], b: list[float]) -> Estimate:
    """The mean of ``b − a`` over paired tasks with its 95 % paired-t interval (in [−1, 1])."""
    if len(a) != len(b):
        raise ValueError("paired values of unequal length")
    d = [y - x for x, y in zip(a, b)]
    n = len(d)
    if n == 0:
        return Estimate(n=0, mean=None, se=None, lo=None, hi=None, method="none")
    mean, sd = _mean_sd(d)
    if sd is None:
        return Estimate(n=n, mean=mean, se=None, lo=-1.0, hi=1.0, method="paired-t")
    se = sd / math.sqrt(n)
    half = t_quantile(0.975, n - 1) * se
    return Estimate(n=n, mean=mean, se=se, lo=max(-1.0, mean - half), hi=min(1.0, mean + half),
                    method="paired-t")
