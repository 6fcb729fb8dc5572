"""A run's scores summarised, and runs compared task by task. Pure: rows in, figures and text
out (``mnemon results --summary``, ``mnemon compare``, ``GET /v1/jobs/{id}/scores``).

A row is a ``results.jsonl`` line (``task``, ``status``, ``cost_usd``, ``usage``, ``scores``,
and ``variant`` for a job with ``[variants]``). Only final rows count (``done``, ``failed``): a
task stopped by a budget or a cancel has no answer yet, and is neither right nor wrong.

**Cost per correct answer** is the tasks' whole cost (failed tasks' too: they were paid for)
divided by the sum of the scores — the number of correct answers when scores are 0 or 1,
partial credit counted as its share otherwise. A judge's cost is counted apart (``judge_usd``):
it is the price of grading, not of answering.
"""

from __future__ import annotations

import math
from typing import Any

from msgspec import Struct

from ..report import table
from .stats import Estimate, estimate, paired

__all__ = ["Comparison", "ScorerSummary", "compare", "compare_text", "scorer_names",
           "summarise", "summary_text"]

FINAL = ("done", "failed")


class ScorerSummary(Struct, kw_only=True):
    variant: str | None
    scorer: str
    n: int
    """Tasks with a score."""
    mean: float | None
    se: float | None
    lo: float | None
    hi: float | None
    method: str
    failures: int
    """Tasks whose scorer failed (an error, not a score)."""
    correct: float
    """The sum of the scores."""
    cost_usd: float
    """The tasks' cost (every final task of the run or variant)."""
    cost_per_correct: float | None
    judge_usd: float


def _final(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r.get("status") in FINAL]


def scorer_names(rows: list[dict[str, Any]]) -> list[str]:
    names: list[str] = []
    for r in rows:
        sc = r.get("scores")
        if isinstance(sc, dict):
            names += [k for k in sc if k not in names]
    return names


def _value(row: dict[str, Any], name: str) -> float | None:
    s = (row.get("scores") or {}).get(name)
    v = s.get("value") if isinstance(s, dict) else None
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _variants(rows: list[dict[str, Any]]) -> list[str | None]:
    out: list[str | None] = []
    for r in rows:
        v = r.get("variant")
        if v not in out:
            out.append(v)
    return out


def summarise(rows: list[dict[str, Any]]) -> list[ScorerSummary]:
    """One summary per variant (None: a job without variants) and scorer."""
    out = []
    for variant in _variants(rows):
        mine = _final([r for r in rows if r.get("variant") == variant])
        cost = math.fsum(float(r.get("cost_usd") or 0.0) for r in mine)
        for name in scorer_names(mine):
            values = [v for r in mine if (v := _value(r, name)) is not None]
            failures = sum(1 for r in mine if isinstance((r.get("scores") or {}).get(name), dict)
                           and _value(r, name) is None)
            judge = math.fsum(float(((r.get("scores") or {}).get(name) or {}).get("cost_usd")
                                    or 0.0) for r in mine)
            e = estimate(values)
            correct = math.fsum(values)
            out.append(ScorerSummary(
                variant=variant, scorer=name, n=e.n, mean=e.mean, se=e.se, lo=e.lo, hi=e.hi,
                method=e.method, failures=failures, correct=correct, cost_usd=round(cost, 6),
                cost_per_correct=round(cost / correct, 6) if correct > 0 else None,
                judge_usd=round(judge, 6)))
    return out


def _f(x: float | None, digits: int = 3) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def _usd(x: float | None) -> str:
    return "—" if x is None else f"${x:.4f}"


def summary_text(rows: list[dict[str, Any]], shown=str) -> str:
    """The ``--summary`` table; ``shown`` escapes text a user or model chose (a variant's
    name comes from the job file, a scorer's too)."""
    sums = summarise(rows)
    if not sums:
        return "no scores: the job has no [[score]] tables, or `mnemon score` has not run"
    variants = any(s.variant is not None for s in sums)
    cols = (["variant"] if variants else []) + ["scorer", "n", "mean", "se", "95% CI",
                                                 "failures", "cost", "cost/correct"]
    judged = any(s.judge_usd for s in sums)
    if judged:
        cols.append("judge")
    lines = []
    for s in sums:
        row = {"variant": shown(s.variant or ""), "scorer": shown(s.scorer), "n": s.n,
               "mean": _f(s.mean), "se": _f(s.se),
               "95% CI": "—" if s.lo is None else f"[{_f(s.lo)}, {_f(s.hi)}]",
               "failures": s.failures, "cost": _usd(s.cost_usd),
               "cost/correct": _usd(s.cost_per_correct), "judge": _usd(s.judge_usd)}
        lines.append(row)
    methods = sorted({s.method for s in sums} - {"none"})
    note = ("95% CI: " + ", ".join({"wilson": "Wilson score interval (scores 0 or 1)",
                                    "t": "Student t (fractional scores)"}[m] for m in methods)
            if methods else "")
    return table(lines, cols, cols) + ("\n" + note if note else "")


# ------------------------------------------------------------------ comparisons

class Comparison(Struct, kw_only=True):
    """Run ``other`` against the ``base`` run on the tasks both finished."""

    base: str
    other: str
    scorer: str
    paired: int
    base_mean: float | None
    other_mean: float | None
    diff: Estimate
    """``other − base``, per task, with its paired-t interval."""
    cost_ratio: float | None
    token_ratio: float | None
    gained: list[str]
    """Tasks wrong (< 0.5) in ``base`` and right (≥ 0.5) in ``other``."""
    lost: list[str]


def _tokens(row: dict[str, Any]) -> int:
    u = row.get("usage") or {}
    return sum(int(u.get(k) or 0) for k in ("input_tokens", "cache_read_tokens",
                                             "cache_write_tokens", "output_tokens"))


def _ratio(a: float, b: float) -> float | None:
    return round(b / a, 4) if a > 0 else None


def compare(runs: list[tuple[str, list[dict[str, Any]]]]) -> list[Comparison]:
    """Every run after the first against the first, per scorer both have: tasks paired by id."""
    if len(runs) < 2:
        raise ValueError("a comparison needs two runs")
    base_name, base_rows = runs[0]
    base = {r["task"]: r for r in _final(base_rows)}
    out = []
    for name, rows in runs[1:]:
        other = {r["task"]: r for r in _final(rows)}
        common = [t for t in base if t in other]
        cost_a = math.fsum(float(base[t].get("cost_usd") or 0) for t in common)
        cost_b = math.fsum(float(other[t].get("cost_usd") or 0) for t in common)
        tok_a = sum(_tokens(base[t]) for t in common)
        tok_b = sum(_tokens(other[t]) for t in common)
        names = [n for n in scorer_names([base[t] for t in common])
                 if n in scorer_names([other[t] for t in common])]
        for scorer in names:
            pairs = [(t, a, b) for t in common
                     if (a := _value(base[t], scorer)) is not None
                     and (b := _value(other[t], scorer)) is not None]
            xs, ys = [p[1] for p in pairs], [p[2] for p in pairs]
            out.append(Comparison(
                base=base_name, other=name, scorer=scorer, paired=len(pairs),
                base_mean=math.fsum(xs) / len(xs) if xs else None,
                other_mean=math.fsum(ys) / len(ys) if ys else None,
                diff=paired(xs, ys), cost_ratio=_ratio(cost_a, cost_b),
                token_ratio=_ratio(tok_a, tok_b),
                gained=[t for t, a, b in pairs if a < 0.5 <= b],
                lost=[t for t, a, b in pairs if b < 0.5 <= a]))
    return out


def _ids(ids: list[str], shown, most: int = 12) -> str:
    head = ", ".join(shown(i) for i in ids[:most])
    return head + (f", … ({len(ids) - most} more)" if len(ids) > most else "") if ids else "—"


def compare_text(comparisons: list[Comparison], shown=str) -> str:
    cols = ["run", "scorer", "n", "base", "run mean", "diff", "95% CI", "cost ×", "tokens ×",
            "gained", "lost"]
    rows = []
    for c in comparisons:
        d = c.diff
        rows.append({"run": shown(c.other), "scorer": shown(c.scorer), "n": c.paired,
                     "base": _f(c.base_mean), "run mean": _f(c.other_mean),
                     "diff": "—" if d.mean is None else f"{d.mean:+.3f}",
                     "95% CI": "—" if d.lo is None else f"[{d.lo:+.3f}, {d.hi:+.3f}]",
                     "cost ×": _f(c.cost_ratio, 2), "tokens ×": _f(c.token_ratio, 2),
                     "gained": len(c.gained), "lost": len(c.lost)})
    text = f"base: {shown(comparisons[0].base)}\n" if comparisons else ""
    text += table(rows, cols, cols)
    flips = [f"{shown(c.other)} · {shown(c.scorer)}: gained {_ids(c.gained, shown)}; lost "
             f"{_ids(c.lost, shown)}" for c in comparisons if c.gained or c.lost]
    if flips:
        text += "\n\nflipped tasks (right ≥ 0.5):\n" + "\n".join(flips)
    return text + "\n\ndiff: run − base per task, paired t interval"
