"""Running a job: its tasks under one supervisor and one run root, ``concurrency`` in flight.

Task ``i`` (0-based) is the root agent ``t<i+1>``; its synod children are forked from it. What a
task has done is read from its logs, so a re-run of the same job resumes:

* a task whose line in ``results.jsonl`` says ``done`` or ``failed`` is skipped;
* a task with a log and no final line is reopened: a log that ended ``done`` gives its answer
  without a request; one cut by a crash, a cancel or a budget is resumed (``resume_agent``: the
  torn tail aside, the file refolded), so a recorded turn is never requested again;
* a task whose agent failed is resumed from its log up to ``retries`` more times (the failures
  are counted from its ``SessionEnded`` records, so across runs too).

Budgets: the job's (``Settings.budget_*``, across every task and every earlier run of the job —
the run root's spend is read back first) and the task's (``Settings.task_budget_*``, its agent
and its synod children) both stop work at a turn boundary with reason ``budget``; a task not yet
started when the job's budget is spent is not started and gets status ``budget``.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog
import trio
from msgspec import Struct

from ...lineage.runroot import agent_source, list_agents
from ...session.errors import AncestorUnreadable, LogChanged, LogCorrupt, LogRefused
from ...session.records import Usage, compact
from ..costs import CostError
from ..engines.base import Engine
from ..engines.local import LocalEngine
from ..approvals import reject_every_ask
from ..node import AgentNode
from ..supervisor import _open_mcp, Supervisor
from ..synod import fork_synod, vote as tally, wait_synod
from ...providers.typed import problems
from .outputs import outputs_for
from .results import DAMAGED, Result, ResultsFile, is_final, read_results, rewrite
from .scoring import scoring_for
from .spec import Job
from .state import children_of, complete, prepare, session_state, tidy
from .tasks import Task
from .claims import Claims, walk

log = structlog.get_logger("mnemon.jobs")


class Counts(Struct, kw_only=True):
    """Live figures for the progress display."""

    total: int = 0
    skipped: int = 0
    done: int = 0
    failed: int = 0
    budget: int = 0
    cancelled: int = 0
    running: int = 0
    finished_this_run: int = 0
    started_at: float = 0.0
    cost_usd: float = 0.0

    def eta_s(self, now: float) -> float | None:
        left = self.total - self.skipped - self.finished_this_run
        if self.finished_this_run == 0:
            return None
        return (now - self.started_at) / self.finished_this_run * left


class JobSummary(Struct, kw_only=True):
    run_root: str
    output: str
    tasks: int
    done: int
    failed: int
    budget: int
    cancelled: int
    pending: int
    skipped: int
    """Tasks already final before this run."""
    usage: dict[str, int]
    cost_usd: float
    """The whole job, every run of it so far."""
    elapsed_s: float
    interrupted: bool
    denied: int = 0
    """Tool calls the job's policy denied, this run."""
    asked: int = 0
    """Tool calls the policy asked about (``on_ask``), this run: approved + rejected (+ any
    still waiting when the run stopped)."""
    approved: int = 0
    rejected: int = 0


def status_of(reason: str | None) -> str:
    if reason == "done":
        return "done"
    if reason in ("budget", "cancelled"):
        return reason
    return "failed"


class JobRunner:
    """One run of a job. ``run()`` returns the summary; the caller owns the provider."""

    def __init__(self, job: Job, tasks: list[Task], *, root: Path, output: Path, provider: Any,
                 settings: Any, user_tools: list | None = None, provider_name: str | None = None,
                 on_change: Callable[["JobRunner"], None] | None = None,
                 watch_sigint: bool = True, supervisor: Callable[..., Supervisor] = Supervisor):
        self.job = job
        self.spec = job.spec
        self.tasks = list(tasks)
        self.root = root
        self.output = output
        existing = list_agents(root)  # one listing, not a stat per task, shared
        self.sup = supervisor(root, provider, settings, user_tools=user_tools,
                              provider_name=provider_name, existing=existing)
        pol = job.spec.policy
        if pol is None or pol.on_ask == "deny":  # a batch job has nobody to ask
            self.sup.approvals.decider = reject_every_ask(
                'nobody to ask in a batch job (its [policy] on_ask is "deny")')
        self.lines: dict[str, dict[str, Any]] = {}
        self.counts = Counts(total=len(tasks))
        self.on_change = on_change or (lambda runner: None)
        self.interrupted = False
        self.watch_sigint = watch_sigint  # off when a host (the service) owns the signals
        # read what earlier runs spent (every log of the run root) for the job's budget and
        # total; a Dask chunk is handed it by the driver instead (``ledger.SharedSpendSupervisor``)
        self.count_prior = True
        self._file: ResultsFile | None = None
        self._existing = set(existing)
        self._prepared: set[Path] = set()  # directories made ahead of their tasks
        self._unborn: dict[Path, int] = {}  # and their logs' files, not yet named
        self._created: set[Path] = set()  # logs this run created
        self._kids: dict[str, list[str]] | None = None  # read on the first reopen
        self.held: int | None = None  # the run root's lock for this run (``state.hold``)
        # the engine that runs it: ``build.prepare`` sets the one it chose; a runner made
        # by hand runs here, as the local engine does
        self.engine: Engine = LocalEngine()
        # the output types of the task's agent and of its synod's children (None: untyped)
        self.output_type, self.synod_output = outputs_for(job)
        self.typed = self.output_type is not None or self.synod_output is not None
        #: ``(task, file:line: why)`` of each task failed this run on a log that does not read
        self.damaged: list[tuple[str, str]] = []
        #: the job's ``[[score]]`` tables: every final line is scored once its tasks have run
        self.scoring = scoring_for(job)
        #: A Dask chunk's claims (decision 0472): each task claimed as it is taken
        #: (``claims.walk``) — its own, then ``others()``, other chunks' tasks — instead of
        #: running every pending one.
        self.claims: Claims | None = None
        self.others: Callable[[], list[tuple[str, list[Task]]]] = list
        self._mine: set[Path] = set()  # the logs of the tasks the walk claimed for this runner
        self._prior: dict[str, dict[str, Any]] = {}
        self._pending: set[str] = set()  # the ids of the tasks ``run`` found to run

    # ------------------------------------------------------------------ the run

    async def run(self) -> JobSummary:
        """Run every task that is not final; Ctrl-C (SIGINT) stops cleanly: running agents end
        ``cancelled`` at once, every log folds, the results file is rewritten.

        Cancellation: cancelling the caller cancels every task; their logs end ``cancelled``.
        """
        from ..costs import run_cost

        prior = self._prior = read_results(self.output)
        if self.count_prior:
            seen: list[str] = []  # lines that are not records: counted around, named
            spent = run_cost(self.root, damaged=seen) if self._existing else []
            for why in seen:
                log.warning("a damaged log: a line that is not a record is not counted",
                            error=why)
            self.sup.usage = sum((Usage(input_tokens=c.input_tokens,
                                        output_tokens=c.output_tokens,
                                        cache_read_tokens=c.cache_read_tokens,
                                        cache_write_tokens=c.cache_write_tokens) for c in spent),
                                 Usage())
            self.sup.cost_usd = sum(c.cost_usd for c in spent)
        pending: list[Task] = []
        for t in self.tasks:
            line = prior.get(t.id)
            if line is not None and is_final(line):
                self.lines[t.id] = line
                self.counts.skipped += 1
                self._count(line["status"])
            else:
                if line is not None:
                    self.lines[t.id] = line
                pending.append(t)
        self._pending = {t.id for t in pending}
        self.counts.started_at = time.monotonic()
        self.counts.cost_usd = self.sup.cost_usd
        self._file = ResultsFile(self.output)
        try:
            async with _open_mcp(self.root, self.sup.settings) as mcp_tools, \
                    trio.open_nursery() as outer:
                # the job's MCP servers live as long as its run, then stop with it
                self.sup.user_tools.update({t.name: t for t in mcp_tools})
                if self.watch_sigint:
                    outer.start_soon(self._watch_sigint, outer.cancel_scope)
                await self._feed(pending)
                self._settle()
                if self.scoring is not None:  # every final line without scores (this run's,
                    # and an earlier run's cut off while it scored); judges resume from logs
                    await self.scoring.score_lines(self.sup, self.tasks, self.lines,
                                                   limit=self.spec.concurrency)
                outer.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                try:
                    self._file.close()
                    self._settle()
                    tidy(self._untouched(), self._unborn)
                    rewrite(self.output, self._out_lines())
                    self.sup.close()
                finally:  # (a full disk refusing the rewrite still lets go of the run root)
                    self.release()
                    if self.sup.env.roles is not None:  # the roles' own providers
                        await self.sup.env.roles.aclose()
        return self.summary()

    def release(self) -> None:
        """Let go of the run root (``state.hold``), once its results file is written."""
        if self.held is not None:
            fd, self.held = self.held, None
            os.close(fd)

    async def _watch_sigint(self, scope: trio.CancelScope) -> None:
        import signal
        import threading

        if threading.current_thread() is not threading.main_thread():
            return
        with trio.open_signal_receiver(signal.SIGINT) as signals:
            async for _ in signals:
                self.interrupted = True
                log.info("job interrupted")
                scope.cancel()
                return

    async def _feed(self, pending: list[Task]) -> None:
        """``concurrency`` workers, each taking the next task the moment its last one ends.

        A task that ends starts the next in the same Trio step: no limiter to wake a feeder,
        no task to spawn (with 64 tasks in flight, each such hand-off waits for a pass over all
        of them, and the waves of a job drift apart by that much; decision 0262)."""
        if self.claims is not None:
            return await self._feed_claimed(pending)
        batch = max(8, self.spec.concurrency)
        todo = enumerate(pending)  # shared by the workers: ``next`` runs between steps
        async with trio.open_nursery() as nursery:
            # two batches made ahead, in a thread, while the first tasks start: the first
            # ones, not waiting for it, create their own logs (127 directories and files
            # awaited here held the first request back 27–67 ms on this VM's disk)
            nursery.start_soon(self._prepare, pending[:2 * batch])
            for _ in range(min(self.spec.concurrency, len(pending))):
                nursery.start_soon(self._worker, todo, pending, batch, nursery)

    async def _worker(self, todo, pending: list[Task], batch: int,
                      nursery: trio.Nursery) -> None:
        for i, t in todo:
            if i and i % batch == 0 and i + batch < len(pending):
                # the directories and log files of the batch after next, in one hand-off to
                # a thread: on a slow file system they are much of what starting a task costs
                nursery.start_soon(self._prepare, pending[i + batch:i + 2 * batch])
            await self._one(t)

    async def _one(self, t: Task) -> None:
        if (why := self.sup.over_budget()) is not None and t.agent not in self._existing:
            self._finish(t, Result(task=t.id, status="budget", answer=None, agent=None,
                                   reason=f"not started: {why}", usage=_usage(Usage()),
                                   cost_usd=0.0, input=t.row, attempts=0, typed=self.typed))
            return
        await self._task(t)

    async def _feed_claimed(self, pending: list[Task]) -> None:
        """A Dask chunk's feed (decision 0472): a claimer walks the claims (``claims.walk``:
        this chunk's own tasks, then other chunks') in a thread, a few tasks ahead of the
        workers, and makes each new task's directory and log file there too.

        A claim is a file-system entry: ~5 µs on tmpfs, but 0.1–0.6 ms of kernel time on this
        VM's ext4 and a round trip on NFS — on the Trio thread, once per task, that was 16 %
        of a Dask run on disk. Claimed ahead, a task is held by this chunk before it starts:
        at most two batches of ``concurrency / 8`` (8 of 64 in flight), which another chunk
        can no longer take — a few tasks' worth of imbalance at the end, and at the start no
        chunk takes what a worker still starting would have run."""
        assert self.claims is not None
        k = max(1, self.spec.concurrency // 8)
        steps = walk(self.claims, pending, self.others)
        send, recv = trio.open_memory_channel[Task](k)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._claimer, steps, send, k)
            # a chunk may find other chunks' tasks when it has none of its own left
            for _ in range(self.spec.concurrency):
                nursery.start_soon(self._claimed_worker, recv)

    async def _claimer(self, steps, send, k: int) -> None:
        async with send:
            while True:
                batch = await trio.to_thread.run_sync(self._claim_some, steps, k)
                for _, path, fd in batch:
                    self._mine.add(path)
                    if fd is not None:
                        self._prepared.add(path)
                        self._unborn[path] = fd
                for t, _, _ in batch:
                    await send.send(t)
                if len(batch) < k:
                    return  # every task of the run is claimed

    def _claim_some(self, steps, k: int) -> list[tuple[Task, Path, int | None]]:
        """In a thread: the next ``k`` tasks of the walk, each claimed, with the log file made
        ahead (``state.prepare``) for those with no log yet."""
        out = []
        for t in itertools.islice(steps, k):
            path = self.root / agent_source(t.agent)
            made = prepare([path]) if t.agent not in self._existing else {}
            out.append((t, path, made.get(path)))
        return out

    async def _claimed_worker(self, recv) -> None:
        async for t in recv:
            if not self._taken(t):
                await self._one(t)

    def _taken(self, t: Task) -> bool:
        """A claimed walk's task, now this runner's: True when it needs no run (an earlier
        attempt of this chunk finished it: its final line is in the chunk's results file)."""
        if t.id in self._pending:
            return False
        self.tasks.append(t)  # another chunk's, stolen: its line belongs in this file
        self.counts.total += 1
        line = self._prior.get(t.id)
        if line is None:
            return False
        self.lines[t.id] = line
        if is_final(line):
            self.counts.skipped += 1
            self._count(line["status"])
            return True
        return False

    def _settle(self) -> None:
        """After a claimed walk: ``tasks`` are the ones this runner ran or read, in task order
        (the rest of its own were claimed by other chunks), for its results file and summary."""
        if self.claims is not None:
            kept: dict[str, Task] = {}
            for t in self.tasks:
                if t.id in self.lines:
                    kept.setdefault(t.id, t)
            self.tasks = sorted(kept.values(), key=lambda t: t.index)

    def _untouched(self) -> set[Path]:
        """The logs made ahead whose tasks did not start: their directories are removed if
        empty. A claimed walk made them only for tasks its chunk holds (``_claim_some``), and
        removes those of the tasks it claimed and did not start (a run stopped): no other chunk
        can be starting one of them."""
        if self.claims is None:
            return self._prepared - self._created
        return self._mine - self._created

    def _out_lines(self) -> list[dict[str, Any]]:
        """The results file's lines, one per task, in task order; a claimed walk's file keeps
        every line it had too (another chunk's task finished by an earlier attempt of this one,
        which this attempt's walk did not reach: cut short, say)."""
        out = [self.lines[t.id] for t in self.tasks if t.id in self.lines]
        if self.claims is not None:
            ids = {t.id for t in self.tasks}
            out += [line for task, line in self._prior.items() if task not in ids]
        return out

    async def _prepare(self, tasks: list[Task]) -> None:
        fresh = [self.root / agent_source(x.agent) for x in tasks
                 if x.agent not in self._existing]
        if fresh:
            self._prepared.update(fresh)  # (before: a cancel in the thread still tidies them)
            self._unborn.update(await trio.to_thread.run_sync(prepare, fresh))

    async def _task(self, t: Task) -> None:
        self.counts.running += 1
        self.on_change(self)
        nodes: list[AgentNode] = []
        result: Result | None = None
        try:
            try:
                result = await self._run_task(t, nodes)
            except DAMAGE as e:  # this task's logs do not read: it fails alone (0319)
                result = self._damaged(t, nodes, e)
        finally:  # nothing here awaits: a cancel cannot cut it short
            self.counts.running -= 1
            if result is None and nodes:  # cut off (Ctrl-C) before the task ended: even
                # if its agent had answered, a synod may be unfinished — never final
                result = self._result(t, nodes[0], nodes, "cancelled", "cancelled",
                                      attempts=0)
            if result is not None:
                self._finish(t, result)
            for n in _with_descendants(nodes):
                if n.log is not None:  # None: cancelled before its own servers started
                    n.log.close()
                self.sup.agents.pop(n.id, None)

    def _damaged(self, t: Task, nodes: list[AgentNode], e: Exception) -> Result:
        """The result of a task whose log (or an ancestor's) does not read: failed, with one
        line naming the file and the line; the other tasks run on."""
        why = damage_line(self.root, e)
        log.error("task failed: a damaged log", task=t.id, error=why)
        self.damaged.append((t.id, why))
        every = _with_descendants(nodes)
        return Result(task=t.id, status="failed", answer=None, agent=t.agent,
                      reason=DAMAGED + why, usage=_usage(sum((n.usage for n in every), Usage())),
                      cost_usd=sum(n.cost_usd for n in every), input=t.row, attempts=1,
                      typed=self.typed)

    def _finish(self, t: Task, result: Result) -> None:
        line = result.as_dict()
        if t.target is not None:
            line["target"] = t.target
        self.lines[t.id] = line
        assert self._file is not None
        self._file.append(line)
        self._count(line["status"])
        self.counts.finished_this_run += 1
        self.counts.cost_usd = self.sup.cost_usd  # (results.jsonl is the task's log line)
        self.on_change(self)

    def _count(self, status: str) -> None:
        setattr(self.counts, status, getattr(self.counts, status) + 1)

    # ------------------------------------------------------------------ one task

    async def _open(self, agent: str, prompt: str) -> AgentNode:
        """The agent's node: created with its prompt, or reopened from its log."""
        path = self.root / agent_source(agent)
        if agent in self._existing and complete(path):
            node = self.sup.resume_agent(agent, spend=True)
            self._resume_descendants(node)
            return node
        self._created.add(path)
        return self.sup.new_root(prompt, agent_id=agent, unborn=self._unborn.pop(path, None),
                                 output=self.output_type)

    async def _run_task(self, t: Task, nodes: list[AgentNode]) -> Result:
        path = self.root / agent_source(t.agent)
        ended, failures = (session_state(path, agent_source(t.agent)) if t.agent in self._existing
                           else (None, 0))
        retries = self.spec.retries
        if ended is not None and ended.startswith("failed") and failures > retries:
            return self._from_log(t, ended, failures)  # failed for good in an earlier run
        top = await self._open(t.agent, t.prompt)
        nodes.append(top)
        while True:
            await self.sup.run(top)  # a reopened agent whose last turn ended it: no request
            if not (top.reason or "").startswith("failed") or top.log is None:
                break  # (no log: it failed before its log opened, nothing to resume)
            failures += 1
            if failures > retries:
                break
            log.info("task retried", task=t.id, attempt=failures + 1, reason=top.reason)
            top = self._reopen(top, nodes)
        attempts = min(failures, retries) + 1
        if top.reason != "done" or self.spec.synod is None:
            return self._result(t, top, nodes, status_of(top.reason), top.reason,
                                attempts=attempts)
        return await self._synod(t, top, nodes, attempts)

    def _from_log(self, t: Task, reason: str, failures: int) -> Result:
        from ..costs import agent_cost

        s = self.sup.settings
        spent = agent_cost(self.root / agent_source(t.agent), t.agent,
                           price_as=s.price_model or s.model, ttl=s.cache_ttl)
        usage = {f: getattr(spent, f) for f in ("input_tokens", "cache_read_tokens",
                                                 "cache_write_tokens", "output_tokens")}
        return Result(task=t.id, status="failed", answer=None, agent=t.agent, reason=reason,
                      usage=usage, cost_usd=spent.cost_usd, input=t.row,
                      attempts=min(failures, self.spec.retries + 1), typed=self.typed,
                      workspace=self._logged_snapshot(t.agent))

    def _logged_snapshot(self, agent: str) -> str | None:
        """The last snapshot an agent's log names (a task's row read from its log)."""
        if self.sup.settings.workspace is None:
            return None
        from ..workspace.history import read_history

        try:
            return read_history(self.root / agent_source(agent)).latest
        except OSError:
            return None

    def _resume_descendants(self, node: AgentNode) -> None:
        """Reopen the open children an agent started itself (``agents_start``, ``agents_synod``)
        and theirs, attached to it: they go on inside its nursery when its loop begins, as in
        ``Supervisor.resume_run``. A job's own synod children (``t<i>.s<k>``) are left to
        ``_synod``; ended children stay ended."""
        from ..supervisor import _has_ended

        if self._kids is None:
            self._kids = children_of(self.root, self._existing)
        for aid in self._kids.get(node.id, []):
            if aid.startswith(f"{node.tree_root().id}.s") or \
                    _has_ended(self.root / agent_source(aid)):
                continue
            child = self.sup.resume_agent(aid, parent=node, spend=True)
            self._resume_descendants(child)

    def _reopen(self, node: AgentNode, nodes: list[AgentNode]) -> AgentNode:
        """A fresh node for an agent whose loop ended, reopened from its log (its children
        move to it, so its tree's budget still counts them)."""
        node.log.close()
        self.sup.agents.pop(node.id, None)
        new = self.sup.resume_agent(node.id, parent=node.parent, spend=True)
        new.children = node.children
        for c in new.children.values():
            c.parent = new
        nodes[nodes.index(node)] = new
        return new

    async def _synod(self, t: Task, top: AgentNode, nodes: list[AgentNode],
                     attempts: int) -> Result:
        syn = self.spec.synod
        assert syn is not None
        question = t.question or t.prompt
        kids: list[AgentNode] = []
        missing: list[tuple[str, str]] = []  # (id, stance)
        for k in range(syn.n):
            aid = f"{t.agent}.s{k + 1}"
            stance = syn.stances[k] if k < len(syn.stances) else ""
            if complete(self.root / agent_source(aid)):
                kids.append(self.sup.resume_agent(aid, parent=top, spend=True))
            else:
                missing.append((aid, stance))
        if missing:  # all from the same table: every link is the same
            kids += fork_synod(self.sup.env, top, question, n=len(missing),
                               stances=[m[1] for m in missing], ids=[m[0] for m in missing],
                               output=self.synod_output)
        kids.sort(key=lambda c: int(c.id.rsplit(".s", 1)[1]))
        nodes += kids
        outcome = await wait_synod(self.sup.env, top, kids, syn.reduce)
        info: dict[str, Any] = {"n": syn.n, "reduce": syn.reduce,
                                "children": [c["agent"] for c in outcome.children]}
        if syn.reduce == "vote" and outcome.fields is not None:  # typed: field by field
            return self._typed_vote(t, top, nodes, outcome.fields, info, attempts)
        if syn.reduce == "vote":
            v = outcome.vote or tally([])
            info["vote"] = v.as_dict()
            reason = "done" if not v.tie else (
                "tie: " + " | ".join(repr(x) for x in v.tied))
            if v.voters == 0:
                reason = "no child answered"
            status = "done" if v.voters else "failed"
            return self._result(t, top, nodes, status, reason, attempts=attempts,
                                answer=v.winner, synod=info)
        # merge: the parent's next turn reads every answer (once: a re-run finds it recorded)
        top = self._reopen(top, nodes)
        text = syn.merge_prompt + "\n\n" + "\n\n".join(
            f"{c['agent']} ({c['state']}): {c['answer'] or '(no answer)'}"
            for c in outcome.children)
        if not any(tt.origin == "own" and tt.role == "user" and tt.label == _label(text)
                   and (tt.records is None or getattr(tt.records[0], "text", None) == text)
                   for tt in top.ctx.turns[1:]):
            top.log.prompt(text)
        await self.sup.run(top)
        return self._result(t, top, nodes, status_of(top.reason), top.reason,
                            attempts=attempts, synod=info)

    def _typed_vote(self, t: Task, top: AgentNode, nodes: list[AgentNode], fields: Any,
                    info: dict[str, Any], attempts: int) -> Result:
        """A typed synod's row: the field-wise vote's object as ``output`` (and, as JSON, as
        ``answer``), its ties named in ``reason`` and listed under ``synod.vote.ties``."""
        info["vote"] = fields.as_dict()
        output = fields.output
        if not fields.voters:
            return self._result(t, top, nodes, "failed", "no child answered",
                                attempts=attempts, answer=None, synod=info, output=None)
        reason = "done" if not fields.ties else "tie: " + ", ".join(fields.ties)
        status = "done"
        kind = self.synod_output
        found = problems(output, kind.schema) if kind is not None else []
        if found:  # the fields' winners together miss the type (a field no child gave)
            status, reason = "failed", "failed: output: " + "; ".join(map(str, found))
        return self._result(t, top, nodes, status, reason, attempts=attempts,
                            answer=_compact(output), synod=info, output=output)

    def _result(self, t: Task, top: AgentNode, nodes: list[AgentNode], status: str,
                reason: str | None, *, attempts: int, answer: Any = ...,
                synod: dict | None = None, output: Any = ...) -> Result:
        every = _with_descendants(nodes)
        usage = sum((n.usage for n in every), Usage())
        return Result(task=t.id, status=status, answer=top.answer if answer is ... else answer,
                      agent=top.id, reason=reason, usage=_usage(usage),
                      cost_usd=sum(n.cost_usd for n in every), input=t.row, attempts=attempts,
                      synod=synod, output=top.output if output is ... else output,
                      typed=self.typed, workspace=_final_snapshot(top))

    # ------------------------------------------------------------------ summary

    def summary(self) -> JobSummary:
        statuses = [self.lines[t.id]["status"] for t in self.tasks if t.id in self.lines]
        u = self.sup.usage
        return JobSummary(
            run_root=str(self.root), output=str(self.output), tasks=len(self.tasks),
            done=statuses.count("done"), failed=statuses.count("failed"),
            budget=statuses.count("budget"), cancelled=statuses.count("cancelled"),
            pending=len(self.tasks) - len(statuses), skipped=self.counts.skipped,
            usage=_usage(u), cost_usd=round(self.sup.cost_usd, 6),
            elapsed_s=round(time.monotonic() - self.counts.started_at, 3),
            interrupted=self.interrupted, denied=self.sup.approvals.denied,
            asked=self.sup.approvals.asked, approved=self.sup.approvals.approved,
            rejected=self.sup.approvals.rejected)


DAMAGE = (LogRefused, LogCorrupt, AncestorUnreadable, LogChanged, CostError)
"""What a task's logs that do not read raise: the task fails with it, alone."""


def damage_line(root: Path, e: Exception) -> str:
    """One line naming the file and the line of the damage: a refusal at an offset (a digest
    that does not match) is given the line that starts there."""
    text = str(e)
    if isinstance(e, LogCorrupt) and not isinstance(e, LogRefused):
        line = _line_at(root / e.path, e.offset)
        if line:
            text = f"{e.path}:{line}: {e.why} (offset {e.offset})"
    return text.replace("\r", "\\r").replace("\n", "\\n")


def _line_at(path: Path, offset: int) -> int:
    """The 1-based line of ``path`` that starts at ``offset``; 0 when none does."""
    from ...session.log import iter_lines

    try:
        for n, (off, _) in enumerate(iter_lines(path), 1):
            if off == offset:
                return n
            if off > offset:
                break
    except OSError:
        pass
    return 0


def _final_snapshot(node: AgentNode) -> str | None:
    """The last snapshot the task root's log names (``Workspace.recorded``): the files its
    row points to — what ``mnemon results --patch`` diffs against its start."""
    ws = node.workspace
    snap = getattr(ws, "recorded", None) if ws is not None else None
    return snap if isinstance(snap, str) else None


def _with_descendants(nodes: list[AgentNode]) -> list[AgentNode]:
    """The nodes and every agent below them, each once (a task's whole tree)."""
    seen: dict[str, AgentNode] = {}
    for n in nodes:
        seen.setdefault(n.id, n)
        for d in n.descendants().values():
            seen.setdefault(d.id, d)
    return list(seen.values())


def _label(text: str) -> str:
    from ...session.context import clip_label

    return clip_label(text)


def _compact(value: Any) -> str | None:
    return None if value is None else compact(value).decode()


def _usage(u: Usage) -> dict[str, int]:
    return {"input_tokens": u.input_tokens, "cache_read_tokens": u.cache_read_tokens,
            "cache_write_tokens": u.cache_write_tokens, "output_tokens": u.output_tokens}
