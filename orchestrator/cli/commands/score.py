"""``mnemon score RUN_ROOT [--job JOB.toml]`` — a run's answers scored again from its results,
without running a task: the job's ``[[score]]`` tables (or another job file's, naming the same
tasks) applied to every final row; then the summary (docs/scores.md).

A ``model`` scorer's judges are agents of the run root: each is created, or reopened from its
log — a judge killed mid-run goes on from its last recorded turn, and a verdict recorded is
read back, never asked again. The results file is rewritten atomically once every row is
scored; the run root is held for the while, as ``mnemon run`` holds it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from .. import COMMANDS
from ....errors import UserError


def add_parser(sub) -> None:
    p = sub.add_parser("score", help=COMMANDS["score"])
    p.add_argument("path", help="a job's run root")
    p.add_argument("--job", default=None, metavar="JOB.toml",
                   help="score with this job file's [[score]] tables (default: the job the run "
                        "root was run from); its tasks must be the run root's")
    p.add_argument("--json", action="store_true",
                   help="print the summary as JSON (one object per variant and scorer)")


def run(args) -> int:
    import json

    import msgspec
    import trio

    from ... import logs
    from ...jobs.build import load, provider_for, settings_for
    from ...jobs.results import read_results, rewrite
    from ...jobs.scoring import job_of, same_tasks, scoring_for
    from ...jobs.state import hold
    from ...jobs.tasks import load_tasks
    from ...jobs.variants import read_rows, variant_roots, variants_of
    from ...scores.summary import summarise, summary_text
    from ...supervisor import Supervisor
    from ...terminal import for_stream

    top = Path(args.path)
    if not top.is_dir():
        raise UserError(f"{top} is not a run root")
    roots = variant_roots(top)
    first = roots[0][1] if roots else top
    job, tasks = load(job_of(first, args.job))
    if roots is None:
        pairs = [(top, job, tasks)]
    else:
        by_name = {v.name: v.job for v in variants_of(job)}
        pairs = []
        for name, root in roots:
            if name not in by_name:
                raise UserError(f"{job.path} has no variant {name!r} (the run root's)")
            vjob = by_name[name]
            pairs.append((root, vjob, load_tasks(vjob)))
    checked = []
    for root, j, ts in pairs:  # every check before anything is written or asked
        if not (root / "results.jsonl").is_file():
            raise UserError(f"{root} has no results.jsonl: run the job first")
        same_tasks(root, j, ts)
        scoring = scoring_for(j)
        if scoring is None:
            raise UserError(f"{j.path} has no [[score]] tables")
        checked.append((root, j, ts, scoring))
    scored = 0
    for root, j, ts, scoring in checked:
        held = hold(root)
        logs.configure(root, verbose=args.verbose)
        try:
            file = root / "results.jsonl"
            lines = read_results(file)
            settings = settings_for(j)
            provider = provider_for(j) if scoring.judged else None

            async def main() -> int:
                sup = Supervisor(root, provider, settings,
                                 provider_name=j.spec.provider.name) if provider else None
                try:
                    return await scoring.score_lines(sup, ts, lines, again=True,
                                                     limit=j.spec.concurrency)
                finally:
                    if sup is not None:
                        sup.close()
                    if provider is not None:
                        with trio.CancelScope(shield=True):
                            await provider.aclose()

            scored += trio.run(main)
            order = {t.id: i for i, t in enumerate(ts)}
            rewrite(file, sorted(lines.values(), key=lambda r: order.get(r["task"], len(order))))
        finally:
            import os

            os.close(held)
            logs.shutdown()
    rows = read_rows(top)
    if args.json:
        print(json.dumps([msgspec.to_builtins(s) for s in summarise(rows)]))
    else:
        print(for_stream(summary_text(rows), sys.stdout))
        print(f"scored {scored} task(s) in {top}")
    return 0
