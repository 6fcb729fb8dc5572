"""``mnemon compare RUN_ROOT [RUN_ROOT …]`` — runs compared task by task against the first:
per scorer the paired difference of the scores with its 95 % interval, the cost and token
ratios, and the tasks that flipped; ``--plot FILE`` draws score against cost, one point per
run (the ``plot`` extra). A run root holding a job's ``[variants]`` counts as one run per
variant, so ``mnemon compare RUN_ROOT`` alone compares a job's variants (docs/scores.md).

Read-only: the rows are the run roots' ``results.jsonl`` as ``mnemon score`` or the job left
them.
"""

from __future__ import annotations

import sys
from pathlib import Path

from .. import COMMANDS
from ....errors import UserError


def add_parser(sub) -> None:
    p = sub.add_parser("compare", help=COMMANDS["compare"])
    p.add_argument("paths", nargs="+", metavar="RUN_ROOT",
                   help="run roots (the first is the base); one holding [variants] is one run "
                        "per variant")
    p.add_argument("--json", action="store_true",
                   help="print the comparisons as JSON (one object per run and scorer)")
    p.add_argument("--plot", default=None, metavar="FILE",
                   help="also draw each run's mean score against its cost to FILE (.png, .svg "
                        "or .pdf; needs mnemon[plot])")
    p.add_argument("--scorer", default=None,
                   help="the scorer --plot draws (default: the first)")


def runs_of(paths: list[str]) -> list[tuple[str, list[dict]]]:
    """``(label, rows)`` per run: a run root's, or each of its variants'."""
    from ...jobs.variants import read_rows, variant_roots

    runs: list[tuple[str, list[dict]]] = []
    for p in paths:
        path = Path(p)
        if path.is_file():
            from ...jobs.results import read_results

            runs.append((str(path), list(read_results(path).values())))
            continue
        if not path.is_dir():
            raise UserError(f"{path} is not a run root")
        roots = variant_roots(path)
        if roots is not None:
            rows = read_rows(path)
            for name, _ in roots:
                label = name if len(paths) == 1 else f"{path}:{name}"
                runs.append((label, [r for r in rows if r.get("variant") == name]))
            continue
        file = path / "results.jsonl"
        if not file.is_file():
            raise UserError(f"{path} has no results.jsonl")
        runs.append((str(path), list(read_rows(path))))
    return runs


def run(args) -> int:
    import json

    import msgspec

    from ...scores.summary import compare, compare_text, summarise
    from ...terminal import for_stream

    runs = runs_of(args.paths)
    if len(runs) < 2:
        raise UserError("compare needs two runs: two run roots, or one holding [variants]")
    if args.plot is not None:
        from ...extras import require

        require("plot", "mnemon compare --plot")
    comparisons = compare(runs)
    if not comparisons:
        raise UserError("the runs share no scored task: score them first (mnemon score)")
    if args.json:
        print(json.dumps([msgspec.to_builtins(c) for c in comparisons]))
    else:
        print(for_stream(compare_text(comparisons), sys.stdout))
    if args.plot is not None:
        points = []
        for label, rows in runs:
            sums = [s for s in summarise(rows)
                    if args.scorer is None or s.scorer == args.scorer]
            if sums:
                points.append((label, sums[0].scorer, sums[0].cost_usd, sums[0].mean,
                               sums[0].lo, sums[0].hi))
        if not points:
            raise UserError(f"no run has a scorer {args.scorer!r}")
        plot(points, Path(args.plot))
        print(f"plot: {args.plot}")
    return 0


def plot(points: list[tuple], path: Path) -> None:
    """Score against cost, one point per run, its 95 % interval as an error bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for label, _scorer, cost, mean, lo, hi in points:
        if mean is None:
            continue
        ax.errorbar([cost], [mean], yerr=[[mean - lo], [hi - mean]], fmt="o", capsize=4,
                    label=label[-40:])
    ax.set_xlabel("cost of the run's tasks (USD)")
    ax.set_ylabel(f"mean score: {points[0][1]}")
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize="small")
    fig.tight_layout()
    try:
        fig.savefig(path)
    except (OSError, ValueError) as e:
        raise UserError(f"--plot {path}: {e}") from None
    finally:
        plt.close(fig)
