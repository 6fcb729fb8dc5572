"""Jobs the service runs: each a ``JobRunner`` in the service's nursery, over its own run root
(a job's agents are not the served run's: two supervisors never share a run root)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import trio

from ..jobs.results import read_results
from ..jobs.table import columns, table_rows
from .schema import JobIn, JobOut, JobResults, JobScores
from ...errors import UserError


class JobError(UserError):
    """A job file or run root the service cannot run (422), named by its key and line."""


class ServiceJob:
    def __init__(self, jid: str, path: Path, root: Path, output: Path, runner: Any, provider: Any):
        self.id, self.path, self.root, self.output = jid, path, root, output
        self.runner, self.provider = runner, provider
        self.state = "running"
        self.error: str | None = None
        self.scope = trio.CancelScope()

    def out(self) -> JobOut:
        c = self.runner.counts
        return JobOut(id=self.id, path=str(self.path), run_root=str(self.root),
                      output=str(self.output), state=self.state, error=self.error,
                      total=c.total, skipped=c.skipped, done=c.done, failed=c.failed,
                      budget=c.budget, cancelled=c.cancelled, running=c.running,
                      cost_usd=round(c.cost_usd, 6),
                      eta_s=(round(e, 1) if (e := c.eta_s(time.monotonic())) is not None
                             else None))


def job_results(sj: ServiceJob) -> JobResults:
    """The job's results file as the page's table: ``mnemon results``' columns (the typed
    output's top-level fields, else the answer), then each task's reason and cost; and the
    tasks that did not end done, with their reasons. Lines are read as the runner appends
    them, so the table fills while the job runs."""
    rows = list(read_results(sj.output).values())
    cols = [*columns(rows), "reason", "cost_usd"]
    table = table_rows(rows)
    for flat, row in zip(table, rows):
        flat["reason"], flat["cost_usd"] = row.get("reason"), row.get("cost_usd")
    failed = [{"task": r.get("task"), "agent": r.get("agent"), "status": r.get("status"),
               "reason": r.get("reason")} for r in rows if r.get("status") != "done"]
    return JobResults(job=sj.id, columns=cols, rows=table, failed=failed)


def job_scores(sj: ServiceJob) -> JobScores:
    """The job's scores: the summary per scorer and each scored task's scores (empty until
    the job's tasks have run and been scored, or for a job without ``[[score]]``)."""
    import msgspec

    from ..scores.summary import summarise

    rows = list(read_results(sj.output).values())
    summary = [msgspec.to_builtins(s) for s in summarise(rows)]
    for s in summary:
        s.pop("variant", None)
    tasks = [{"task": r.get("task"), "status": r.get("status"), "scores": r["scores"]}
             for r in rows if isinstance(r.get("scores"), dict)]
    return JobScores(job=sj.id, summary=summary, tasks=tasks)


def _check_path(key: str, value: str | None) -> None:
    """A path of the request the system could not use, refused (422) naming it before anything
    is written: a NUL in it, or (``output``) a directory, or a file where a directory must be."""
    if value is None:
        return
    if "\0" in value:
        raise JobError(f"{key} {value!r} has a NUL byte in it")
    if key != "output":
        return  # (the job file is read, the run root made, each refusing by name)
    path = Path(value)
    if path.is_dir():
        raise JobError(f"output {value!r} is a directory, not a results file")
    for up in path.parents:
        if up.exists():
            if not up.is_dir():
                raise JobError(f"output {value!r}: {str(up)!r} is not a directory")
            if not os.access(up, os.W_OK | os.X_OK):
                raise JobError(f"output {value!r}: {str(up)!r} is not writable")
            return


class Jobs:
    def __init__(self) -> None:
        self.jobs: dict[str, ServiceJob] = {}
        self.nursery: trio.Nursery | None = None

    def start(self, body: JobIn) -> ServiceJob:
        """Validate everything before anything is written, then run the job in the background."""
        from ..jobs.build import prepare
        from ..jobs.spec import JobError as SpecError

        if self.nursery is None:
            raise JobError("the service is not running jobs")
        for key in ("path", "run_root", "output"):
            _check_path(key, getattr(body, key))
        wanted = Path(body.run_root).resolve() if body.run_root else None
        for other in self.jobs.values():
            if other.state == "running" and wanted is not None and other.root.resolve() == wanted:
                raise JobError(f"job {other.id} is already running in {other.root}")
        try:
            runner, provider = prepare(body.path, run_root=body.run_root, output=body.output,
                                       started_by="mnemon serve: job", watch_sigint=False,
                                       engine=None)  # the job's own (``engines.engine_for``)
        except SpecError as e:
            raise JobError(str(e)) from None
        for other in self.jobs.values():  # the job's own run root, once it is known
            if other.state == "running" and other.root.resolve() == runner.root.resolve():
                runner.release()  # (its run root's lock refuses this first, ``state.hold``)
                raise JobError(f"job {other.id} is already running in {runner.root}")
        sj = ServiceJob(f"j{len(self.jobs) + 1}", runner.job.path, runner.root, runner.output,
                        runner, provider)
        self.jobs[sj.id] = sj
        self.nursery.start_soon(self._run, sj, name=f"job {sj.id}")
        return sj

    async def _run(self, sj: ServiceJob) -> None:
        try:
            with sj.scope:
                # the engine ``prepare`` chose from the job (``[provider] batch = true``: batch)
                summary = await sj.runner.engine.run(sj.runner, sj.provider)
                sj.state = "cancelled" if summary.interrupted else "ended"
            if sj.scope.cancelled_caught:
                sj.state = "cancelled"
        except Exception as e:  # noqa: BLE001 - a job's failure is its state, not the service's
            sj.state, sj.error = "failed", " ".join(f"{type(e).__name__}: {e}".split())[:500]
        finally:
            with trio.CancelScope(shield=True):
                await sj.provider.aclose()

    async def stop_all(self) -> None:
        for sj in self.jobs.values():
            sj.scope.cancel()
