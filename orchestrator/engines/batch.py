"""``mnemon run JOB.toml --engine batch``: a job's runner given the batch engine, and its run.

``BatchEngine`` is the engine's face (``engines.base.Engine``); the functions below are its
steps. ``check`` refuses a job that cannot run in batches (an ``anthropic`` or ``openai``
provider — the scripted one has none); ``adjust_job`` and ``adjust`` turn the job and its
settings into the engine's: every pending task in flight at once (a wave is the unit of
concurrency, so ``concurrency`` no longer bounds it), calls priced at the batch price
(``prices.batch_model``); ``attach`` wraps the provider in a ``BatchProvider`` whose waves the
run drives (``run_job``). The waves themselves are ``orchestrator/batch/`` (decision 0295); this
module was ``orchestrator/batch/job.py``, which still re-exports it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import trio

from ...lineage.runroot import read_run_json
from ...providers.batches import BatchEnds, batch_api
from ...providers.prices import batch_model
from ..batch.ids import run_tag
from ..batch.journal import BatchJournal, BatchJournalError
from ..batch.waves import BatchProvider, Waves
from ..costs import run_cost
from ..jobs.spec import Job, JobError
from .base import Engine

__all__ = ["BatchEngine", "check_job", "check_roles", "batch_settings",
           "batch_job", "attach", "bind", "run_job", "summary_extra", "progress_extra",
           "route_missing", "BATCH_PROVIDERS", "UNBOUNDED"]

BATCH_PROVIDERS = ("anthropic", "openai", "openai-responses")


def check_job(job: Job) -> None:
    """Refuse a job the batch engine cannot run, before anything is written."""
    name = job.spec.provider.name
    if name in ("bedrock", "vertex"):  # their batch jobs read and write cloud storage
        raise JobError(f"{job.path}: --engine batch does not support the {name} provider "
                       "here (its batch inference works through cloud storage); use --engine "
                       "local")
    if name not in BATCH_PROVIDERS:
        raise JobError(f"{job.path}: --engine batch needs [provider] name = \"anthropic\", "
                       f"\"openai\" or \"openai-responses\"; the {name} provider has no batch "
                       "API (use --engine local)")


def check_roles(job: Job, roles: Any) -> None:
    """Refuse roles the batch engine cannot serve: its waves go through the job's [provider],
    so a role with a provider of its own (another provider, or a base URL) would run live,
    outside the waves and the batch price."""
    name = job.spec.provider.name
    for role in roles.roles.values():
        if role.base_url is not None or (role.provider is not None and role.provider != name):
            raise JobError(f"{job.path}: --engine batch sends every turn through the job's "
                           f"[provider] ({name}); role {role.name} names a provider of its own "
                           "(use --engine local)")


def batch_job(job: Job, tasks: list) -> Job:
    """Every task in flight at once: the engine's waves, not ``concurrency``, pace the job."""
    spec = msgspec.structs.replace(job.spec, concurrency=max(1, len(tasks)))
    return msgspec.structs.replace(job, spec=spec)


UNBOUNDED = 1 << 30
"""The provider-call limiter under the batch engine: a call waiting for its wave holds a slot,
so any bound would keep the agents past it (children an agent starts itself, say) out of the
wave; the wave is what bounds the requests."""


def batch_settings(settings: Any, job: Job, tasks: list) -> Any:
    """The job's settings with every call priced at the batch price, no bound on the calls in
    flight, and room for every task's agents at once (its own, its synod's, and as many again
    for children its agents start themselves, plus the usual 64)."""
    width = job.spec.synod.n + 1 if job.spec.synod is not None else 1
    n = max(1, len(tasks)) * width
    return msgspec.structs.replace(
        settings, price_model=batch_model(settings.price_model or settings.model),
        concurrency=UNBOUNDED, max_agents=max(settings.max_agents, 2 * n + 64))


def attach(live: Any, root: Path, *, poll_s: float = 5.0, poll_max_s: float = 60.0,
           hold_s: float = 30.0) -> BatchProvider:
    """The batch provider over ``live`` for the run root ``root``; ``BatchProvider.waves`` still
    needs the supervisor (``bind``) before it runs."""
    api = batch_api(live)
    try:
        ledger = BatchJournal(root)
    except BatchJournalError as e:
        raise JobError(str(e)) from None
    waves = Waves(api, ledger, lambda: {}, None, run=run_tag(read_run_json(root).get(
        "created_at", str(root))), price=lambda node: (None, "5m"), poll_s=poll_s,
        poll_max_s=poll_max_s, max_attempts=live.retry.max_attempts, hold_s=hold_s)
    return BatchProvider(waves, live)


def bind(provider: BatchProvider, sup: Any) -> None:
    """Point the waves at the run's supervisor: its agents, its spend, its pricing."""
    waves = provider.waves
    waves.agents = lambda: sup.agents
    waves.spend = sup.env.spend

    def price(node: Any) -> tuple[str | None, str]:
        s = sup.settings_for(node)
        return s.price_model or s.model, s.cache_ttl

    waves.price = price


async def run_job(runner: Any, provider: BatchProvider) -> Any:
    """The runner's run with the waves driven beside it. Ctrl-C cancels the batches in flight
    (recorded in the ledger) before the run ends. A server with no batch routes ends the job:
    ``BatchRouteMissing`` is raised once every agent has stopped (nothing recorded done); so
    does a create whose batch cannot be looked for (``CreateUndecided``)."""
    waves = provider.waves
    async with trio.open_nursery() as nursery:
        await nursery.start(waves.drive)
        summary = await runner.run()
        if runner.interrupted and waves.in_flight:
            await waves.cancel_in_flight()
        nursery.cancel_scope.cancel()
    return summary


def route_missing(exc: BaseException) -> BatchEnds | None:
    """The ``BatchEnds`` (a server without batch routes, a create that cannot be reconciled)
    that ended a run, however deep in exception groups."""
    if isinstance(exc, BatchEnds):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = route_missing(inner)
            if found is not None:
                return found
    return None


def summary_extra(provider: BatchProvider, root: Path) -> dict[str, Any]:
    """What ``--json`` adds under the batch engine, and the batch and live spend apart."""
    st = provider.waves.stats()
    rows = run_cost(root)
    batch = round(sum(r.batch_cost_usd for r in rows), 6)
    live = round(sum(max(0.0, r.cost_usd - r.batch_cost_usd) for r in rows), 6)
    return {"engine": "batch", "waves": st.wave, "waves_this_run": st.waves_this_run,
            "batches": st.batches, "batch_cost_usd": batch, "live_cost_usd": live}


def progress_extra(provider: BatchProvider) -> str:
    """The progress line's batch part: the wave, batches in flight, requests pending/done and
    the oldest batch's age."""
    st = provider.waves.stats()
    age = "-" if st.oldest_s is None else _clock(st.oldest_s)
    return (f" · wave {st.wave} · {st.in_flight} batch(es) in flight · requests "
            f"{st.pending} pending / {st.done} done · oldest {age}")


def _clock(s: float) -> str:
    s = int(s)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


class BatchEngine(Engine):
    """Every turn through the provider's batch API, in waves, at the batch price."""

    name = "batch"

    def check(self, job: Job) -> None:
        check_job(job)

    def adjust_job(self, job: Job, tasks: list) -> Job:
        return batch_job(job, tasks)

    def adjust(self, settings: Any, job: Job, tasks: list) -> Any:
        if settings.roles is not None:  # the job's [roles], or --roles: refused before the run
            check_roles(job, settings.roles)
        return batch_settings(settings, job, tasks)

    def attach(self, provider: Any, root: Path, job: Job) -> BatchProvider:
        return attach(provider, root, poll_s=job.spec.provider.batch_poll_s)

    def bind(self, provider: BatchProvider, runner: Any) -> None:
        bind(provider, runner.sup)

    async def run(self, runner: Any, provider: BatchProvider) -> Any:
        return await run_job(runner, provider)

    def progress(self, provider: BatchProvider) -> str:
        return progress_extra(provider)

    def ended_by(self, exc: BaseException) -> BaseException | None:
        return route_missing(exc)

    def summary_extra(self, provider: BatchProvider, root: Path) -> dict[str, Any]:
        return summary_extra(provider, root)

    def summary_line(self, extra: dict[str, Any]) -> str | None:
        return (f"engine: batch, {extra['waves']} waves, {extra['batches']} batches this run; "
                f"spend: batch ${extra['batch_cost_usd']:.4f}, live "
                f"${extra['live_cost_usd']:.4f}")
