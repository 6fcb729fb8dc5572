"""``mnemon run JOB.toml`` — a batch job; re-running the same command resumes it."""

from __future__ import annotations

import sys

from .. import COMMANDS
from ....errors import Failure, UserError
from ..options import add_roles_args, policy_from, roles_from_args


def add_parser(sub) -> None:
    p = sub.add_parser("run", help=COMMANDS["run"])
    p.add_argument("job", help="the job file (TOML; see docs/jobs.md)")
    p.add_argument("--run-root", default=None,
                   help="where logs go (default: the job's run_root, else <job stem>.run beside "
                        "the job file)")
    p.add_argument("--output", default=None,
                   help="results.jsonl path (default: the job's output, else in the run root)")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    p.add_argument("--policy", metavar="FILE", default=None,
                   help="a tool policy every task's agents run under, narrowed by the job's own "
                        "[policy] (docs/policy.md)")
    add_roles_args(p)
    p.add_argument("--engine", choices=["local", "dask", "batch"], default=None,
                   help="local: one process (default); dask: root tasks spread over Dask worker "
                        "processes (needs mnemon[dask]; docs/scale.md); batch: every turn "
                        "through the provider's batch API, in waves, at the batch price "
                        "(anthropic, openai, openai-responses; or [provider] batch = true; "
                        "docs/jobs.md)")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="--engine dask: a running scheduler (default: start a LocalCluster)")
    p.add_argument("--workers", type=int, default=2,
                   help="--engine dask without --scheduler: worker processes to start")
    p.add_argument("--trace-content", action="store_true",
                   help="traces (OTEL_EXPORTER_OTLP_ENDPOINT set): record message content")


def run(args) -> int:
    from ...engines import engine_for

    # the engine chosen once: the one named here, else (no --engine) the job's own, which
    # ``prepare`` reads with the job; from then on it is asked, never named
    named = engine_for(args.engine) if args.engine else None
    if named is not None:
        why = named.refuses_options(policy=bool(args.policy), roles=bool(args.roles or args.role))
        if why is not None:
            raise UserError(why)
        if not named.in_process:
            return _run_dask(args, named)
    from ...jobs.build import load
    from ...jobs.variants import variants_of

    loaded = load(args.job)
    variants = variants_of(loaded[0])
    if variants:
        return _run_variants(args, named, variants)
    return _run_one(args, named, loaded)


def _run_one(args, named, loaded, *, run_root=None, output=None, quiet: bool = False) -> int:
    """One job (or one variant of it) from its checks to its final table."""
    import json
    import msgspec
    import trio

    from ... import logs
    from ...jobs.build import prepare
    from ...jobs.display import JobProgress, final_table
    from ...tracing.switch import live_tracing

    # every check before anything is written or any agent starts (a JobError: exit 2)
    runner, provider = prepare(args.job, run_root=run_root or args.run_root,
                               output=output or args.output, loaded=loaded,
                               policy=policy_from(args.policy) if args.policy else None,
                               engine=named,
                               roles=roles_from_args(args, None) if args.roles else None,
                               role=args.role)
    root, output = runner.root, runner.output
    engine = runner.engine
    logs.configure(root, verbose=args.verbose)

    async def main():
        try:
            async with trio.open_nursery() as n:
                n.start_soon(JobProgress(lambda: (runner.counts, runner.sup.cost_usd),
                                         enabled=sys.stderr.isatty() and not args.verbose,
                                         extra=lambda: engine.progress(provider)).run)
                summary = await engine.run(runner, provider)
                n.cancel_scope.cancel()
            return summary
        finally:
            with trio.CancelScope(shield=True):
                await provider.aclose()

    try:
        with live_tracing(args.trace_content):
            summary = trio.run(main)
    except BaseException as e:  # the engine's own end (batch: no batch routes, a create undecided)
        ended = engine.ended_by(e)
        if ended is None:
            raise
        logs.shutdown()
        raise UserError(f"{ended} (results in {output}, logs in {root})") from None
    logs.shutdown()
    for task, why in runner.damaged:  # one line each: the task failed, the others ran (0319)
        shown = "".join(c if c.isprintable() else repr(c)[1:-1] for c in why)
        sys.stderr.write(f"mnemon: task {task} failed on a damaged log: {shown}\n")
    extra = engine.summary_extra(provider, root)
    if args.json:
        print(json.dumps({**msgspec.to_builtins(summary), **extra}))
    elif not quiet:
        print(final_table(summary))
        line = engine.summary_line(extra)
        if line is not None:
            print(line)
        if runner.scoring is not None:  # the job's [[score]] tables: its summary too
            from ...scores.summary import summary_text
            from ...terminal import for_stream

            rows = [runner.lines[t.id] for t in runner.tasks if t.id in runner.lines]
            print("\n" + for_stream(summary_text(rows), sys.stdout))
    else:
        print(final_table(summary).split("\n\nresults:")[0])
    if summary.interrupted:
        return 130
    if summary.failed and not (summary.done or summary.budget):
        raise Failure(f"every task failed (results in {output}, logs in {root})")
    return 0


def _run_variants(args, named, variants) -> int:
    """``[variants]``: each variant run in turn, on the same tasks, into its own folder of the
    one run root (``jobs/variants.py``); then the scores of all of them, side by side."""
    from pathlib import Path

    from ...jobs.tasks import load_tasks
    from ...jobs.variants import read_rows, write_manifest
    from ...scores.summary import summary_text
    from ...terminal import for_stream

    if args.output:
        raise UserError("--output: a job with [variants] writes one results file per variant, "
                        "in the run root")
    if named is not None and not named.in_process:
        raise UserError(f"a job with [variants] runs on the local or batch engine, not "
                        f"{named.name}")
    job = variants[0].job
    top = Path(args.run_root) if args.run_root else job.run_root
    loaded = [(v, (v.job, load_tasks(v.job))) for v in variants]  # every variant checked first
    write_manifest(top, variants)
    code = 0
    for v, pair in loaded:
        if not args.json:
            print(f"variant {v.name}:")
        code = _run_one(args, named, pair, run_root=top / v.folder,
                        output=top / v.folder / "results.jsonl", quiet=True) or code
        if not args.json:
            print()
        if code == 130:
            return code
    if not args.json:
        print(for_stream(summary_text(read_rows(top)), sys.stdout))
        print(f"results: {top} (mnemon results {top} --summary; mnemon compare {top})")
    return code


def _run_dask(args, engine) -> int:
    """An engine that is not ``in_process`` (Dask): its driver, ``jobs.spread.run_job``, runs
    the job over worker processes, each chunk prepared as a local runner."""
    import json

    # found, not imported: the driver imports it while a LocalCluster's fork server does too
    engine.ready("mnemon run --engine dask")
    if args.workers < 1:
        raise UserError(f"--workers must be at least 1, not {args.workers}")
    if not args.scheduler:  # first, before the job machinery is imported: the fork server
        # imports Dask and the chunk's modules while this process imports and checks (0252,
        # 0470); a job refused below leaves it unused, and it ends with this process
        from ...jobs.forks import start_fork_server

        start_fork_server()
    from ...gctune import warming

    with warming():  # the job modules and the job's rows, kept for the run: out of collections
        from ...jobs.build import load

        loaded = load(args.job)  # parsed once: what the driver checks and sends (0470)
    if loaded[0].spec.variants:
        raise UserError("a job with [variants] runs on the local or batch engine, not dask")

    from ...jobs.forks import import_distributed

    with warming():  # this process's imports: none of them in a collection (decision 0264)
        import_distributed()  # while the fork server imports it too

        from ... import logs
        from ...jobs.display import JobProgress, final_table
        from ...jobs.runner import JobSummary
        from ...jobs.spread import run_job
        from ...tracing.switch import carried

    shown: list = []  # the driver's Watch, once it exists
    display = JobProgress(lambda: (shown[0].counts, shown[0].cost_usd),
                          enabled=sys.stderr.isatty() and not args.verbose)

    def on_progress(watch) -> None:
        shown[:] = [watch]
        display.draw()

    try:
        summary = run_job(args.job, run_root=args.run_root, output=args.output,
                          scheduler=args.scheduler, workers=args.workers, loaded=loaded,
                          on_progress=on_progress,
                          # no line to redraw: look at the run root less often (a chunk's
                          # end still wakes the driver at once)
                          interval_s=0.25 if display.enabled else 1.0,
                          # the driver's lines to mnemon.log, each chunk's to mnemon.log.d
                          on_root=lambda root: logs.configure(root, verbose=args.verbose),
                          log_level=logs.level_from_env(),
                          trace=carried(args.trace_content))
    except OSError as e:  # (a JobError goes on as it is: exit 2)
        raise Failure(f"the Dask cluster failed: {e}") from None
    finally:
        display.clear()
        logs.shutdown()
    if args.json:
        print(json.dumps(summary))
    else:
        print(final_table(JobSummary(**{k: v for k, v in summary.items()
                                        if k in JobSummary.__struct_fields__})))
        print(engine.summary_line(summary))
    if summary["interrupted"]:
        return 130
    if summary["failed"] and not (summary["done"] or summary["budget"]):
        raise Failure(f"every task failed (results in {summary['output']})")
    return 0
