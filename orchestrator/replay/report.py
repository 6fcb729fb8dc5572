"""What a replay writes when its strategies have run: ``per_turn.csv`` (one row per request),
``summary.json`` (each strategy's totals), ``plot.png`` (context, cumulative cost and verbatim
after each edit, per strategy) and the table ``mnemon replay`` prints.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path

from ..importers import SkippedLine
from ..report import table
from .result import Result

COMPACTIONS = ("compact", "rollover", "anthropic-compaction", "openai-compaction")


def write_reports(results: list[Result], out: Path, *, plot: bool = True,
                  skipped: Sequence[SkippedLine] = ()) -> dict:
    """Write ``per_turn.csv``, ``summary.json`` and (``plot``, matplotlib permitting)
    ``plot.png`` into ``out``; return the summary. ``skipped`` — the lines of a damaged
    recording its importer could not read (``every_skipped_line``) — is listed in the summary
    as ``skipped_lines`` (path, 1-based line, reason), so a figure says what it was made without."""
    out = Path(out)
    with open(out / "per_turn.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["strategy", "request", "kind", "context_tokens", "cache_read_tokens",
                    "cache_write_tokens", "input_tokens", "output_tokens", "cost_usd",
                    "cumulative_usd", "edited", "keep", "verbatim_tokens"])
        for r in results:
            for row in r.rows:
                w.writerow([row.strategy, row.request, row.kind, row.context_tokens,
                            row.cache_read_tokens, row.cache_write_tokens, row.input_tokens,
                            row.output_tokens, row.cost_usd, row.cumulative_usd, int(row.edited),
                            "" if row.keep is None else row.keep,
                            "" if row.verbatim_tokens is None else row.verbatim_tokens])
    summary = {"strategies": {r.strategy: r.summary() for r in results},
               "skipped_lines": [{"path": s.path, "line": s.line, "reason": s.reason}
                                 for s in skipped]}
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    if plot:
        plot_results(results, out / "plot.png")
    return summary


def plot_results(results: list[Result], path: Path) -> bool:
    """The three panels, to ``path``; False when matplotlib (the ``plot`` extra) is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, (a, b, c) = plt.subplots(3, 1, figsize=(9, 9), sharex=True,
                                  gridspec_kw={"height_ratios": [3, 3, 2]})
    for r in results:
        turns = [row for row in r.rows]
        xs = [row.request for row in turns]
        a.plot(xs, [row.context_tokens for row in turns], label=r.strategy, linewidth=1.2)
        b.plot(xs, [row.cumulative_usd for row in turns], label=r.strategy, linewidth=1.2)
        edits = [row for row in turns if row.verbatim_tokens is not None]
        if edits:
            c.plot([row.request for row in edits], [row.verbatim_tokens for row in edits], "o",
                   label=r.strategy, markersize=4)
        for row in turns:
            if row.keep is not None:
                c.annotate(f"keep {row.keep:.2f}", (row.request, row.verbatim_tokens or 0),
                           fontsize=6, xytext=(3, 3), textcoords="offset points")
    a.set_ylabel("context (input tokens)")
    b.set_ylabel("cumulative cost (USD)")
    c.set_ylabel("verbatim after edit")
    c.set_xlabel("request")
    a.legend(loc="upper left", fontsize=8)
    for ax in (a, b, c):
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def summary_table(summary: dict) -> str:
    """The strategies side by side, as ``mnemon replay`` prints them: each one's cost against
    ``compact`` and against the cheapest compaction that ran (``compact``, ``rollover`` and the
    providers' server-side compactions); a strategy that cannot be configured at this window
    says why in place of its figures."""
    rows: list[dict] = []
    notes: list[str] = []
    strategies = summary["strategies"]
    base = strategies.get("compact", {}).get("cost_usd")
    ran = [s["cost_usd"] for n, s in strategies.items()
           if n in COMPACTIONS and not s.get("not_applicable")]
    cheapest = min(ran) if ran else None
    for name, s in strategies.items():
        if s.get("not_applicable"):
            rows.append({"strategy": name, "cost": "n/a"})
            notes.append(f"{name}: not applicable here — {s['not_applicable']}")
            continue
        rows.append({
            "strategy": name, "cost": f"${s['cost_usd']:.4f}",
            "vs_compact": f"{s['cost_usd'] / base:.3f}" if base else "-",
            "vs_cheapest": f"{s['cost_usd'] / cheapest:.3f}" if cheapest else "-",
            "cache_read": f"{s['cache_read_share']:.1%}" if s["cache_read_share"] is not None else "-",
            "recover": f"{s['recoverability']:.0%}",
            "verbatim": str(s["verbatim_kept"]) if s["verbatim_kept"] is not None else "-",
            "steady": (f"{s['steady_cache_read_share']:.1%}"
                       if s["steady_cache_read_share"] is not None else "-"),
            "keep": _keeps(s.get("chosen_keep") or []),
            "edits": str(s["edits"]), "overflow": str(s["overflow_requests"])})
    cols = ["strategy", "cost", "vs_compact", "vs_cheapest", "cache_read", "steady", "recover",
            "verbatim", "keep", "edits", "overflow"]
    for r in rows:
        for c in cols:
            r.setdefault(c, "")
    out = table(rows, cols,
                ["strategy", "cost", "vs compact", "vs cheapest compaction", "cache read",
                 "steady read", "recoverable", "verbatim kept (tok)", "chosen keep", "edits",
                 "overflow"])
    return "\n".join([out, *notes])


def _keeps(keeps: list[float]) -> str:
    """The shares the evictions kept: every one when few, else the range."""
    if not keeps:
        return "-"
    if len(keeps) <= 4:
        return " ".join(f"{k:.2f}" for k in keeps)
    return f"{min(keeps):.2f}–{max(keeps):.2f} ({len(keeps)})"
