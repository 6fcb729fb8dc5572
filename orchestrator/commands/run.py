"""``mnemon run JOB.toml`` — a batch job; re-running the same command resumes it."""

from __future__ import annotations

import sys

from ..cli import COMMANDS, Failure, UserError


def add_parser(sub) -> None:
    p = sub.add_parser("run", help=COMMANDS["run"])
    p.add_argument("job", help="the job file (TOML; see docs/jobs.md)")
    p.add_argument("--run-root", default=None,
                   help="where logs go (default: the job's run_root, else <job stem>.run beside "
                        "the job file)")
    p.add_argument("--output", default=None,
                   help="results.jsonl path (default: the job's output, else in the run root)")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")


def run(args) -> int:
    import json
    import msgspec
    import trio

    from .. import logs
    from ..jobs.build import prepare
    from ..jobs.display import JobProgress, final_table
    from ..jobs.spec import JobError

    try:  # every check before anything is written or any agent starts
        runner, provider = prepare(args.job, run_root=args.run_root, output=args.output)
    except JobError as e:
        raise UserError(str(e)) from None
    root, output = runner.root, runner.output
    logs.configure(root, verbose=args.verbose)

    async def main():
        try:
            async with trio.open_nursery() as n:
                n.start_soon(JobProgress(runner, enabled=sys.stderr.isatty()
                                         and not args.verbose).run)
                summary = await runner.run()
                n.cancel_scope.cancel()
            return summary
        finally:
            with trio.CancelScope(shield=True):
                await provider.aclose()

    summary = trio.run(main)
    logs.shutdown()
    if args.json:
        print(json.dumps(msgspec.to_builtins(summary)))
    else:
        print(final_table(summary))
    if summary.interrupted:
        return 130
    if summary.failed and not (summary.done or summary.budget):
        raise Failure(f"every task failed (results in {output}, logs in {root})")
    return 0
