"""Orchestrator benchmark: harness overhead per turn, a 1 000-agent swarm, memory per idle agent.

    python bench/agents.py [--roots 250] [--children 3] [--child-turns 8] [--latency 0.1]
                           [--context-tokens 150000] [--overhead-turns 40]
                           [--only overhead|swarm|memory|tracing] [--goal 1.2] [--idle-rss]
                           [--profile] [--split] [--fixed-usage] [--json] [--dir DIR]

Three figures (docs/performance.md, "Orchestrator"):

(a) **Harness overhead per turn** at a 150 000-token context: one root agent whose context holds
    ~600 KB of real records (the turn shapes and texts of ``data/trajectories/dev``, converted
    line by line), driven through the real loop (``orchestrator.loop.run_agent``) by a policy that
    reads one more realistic tool output per turn, context window 200 000 (so nothing is evicted
    while it is measured), logs as JSON lines to ``<run root>/mnemon.log`` as the CLI does.
    Overhead of a turn = the time between the end of one provider call and the end of the next,
    minus the provider call itself (the scripted provider's policy and its cache model), plus the
    ``ProviderCall`` append made inside it — i.e. everything the loop does except the call:
    weigh, render (``build_request``), every append, accounting, the tool calls, the pressure
    check, logging. Each step is timed by wrapping the loop's own functions. Goal: median ≤ 5 ms.
(b) **Swarm wall time**: ``--roots`` root agents each fork ``--children`` mnemon children
    (1 000 agents with the defaults, all alive at once), on ``ScriptedProvider(latency_s=0.1)``
    with ``Settings(concurrency=<agents>)`` so the limiter is never the bottleneck. A root reads
    two documents, starts its children in one turn, waits for them, answers (5 turns); a child
    greps its inherited transcript, reads ``child-turns − 2`` documents, answers. Ideal wall time
    = the critical path of sequential provider calls × latency = (3 + child-turns + 1) × 0.1 s.
    Goal: within 1.2× of it.
    Issue #17's two swarms at scale are the same shape with other arguments:
    ``--only swarm --latency 1 --goal 1.1 --idle-rss`` (1 000 agents at 1 s, goal ≤ 1.1×) and
    ``--only swarm --roots 2500 --latency 5 --goal 1.3 --idle-rss`` (10 000 agents at 5 s in
    one process, goal ≤ 1.3×). ``--idle-rss`` adds memory per idle agent measured in the running
    swarm: the RSS when every agent is waiting (in a provider call, or a root waiting for its
    children) less the RSS before the supervisor opened, over the agents; and the growth from
    every root waiting to every agent waiting, over the children (``idle_figures``).
    ``--fixed-usage`` runs it with the provider's cache model answering one constant usage
    (no simulation), for counting the harness's instructions alone (``bench/instructions.py``).
    The swarm's figures also give the cyclic collector's CPU while it runs (``collector_s``,
    ``collector_ms_per_turn``, ``collections`` by generation: ``_Collector``), which the
    harness figure holds. ``--budget`` also times every record's append (``appends``) and
    gives item 2's budget (``budget``, decision 0476): three floors less the records' appends
    and the collector is what the rest of a turn may cost, and ``rest_must_lose`` how much of
    the rest that is.
(c) **Memory per idle agent**: the same swarm shape with every child parked inside its first
    provider call (the roots parked in ``agents_wait``): ``tracemalloc`` current minus the
    baseline before the supervisor opened, and the RSS delta, divided by the number of agents.

(d) **Tracing off and on** (``--only tracing [--reps 3]``, issue #33): the swarm of (b), its
    harness CPU per turn measured side by side, in one process, alternating: ``before`` (the
    log's append as it was before the records' tap existed), ``off`` (the tap unset: tracing
    off) and ``on`` (live tracing as ``OTEL_EXPORTER_OTLP_ENDPOINT`` turns it on: every record
    through the span builder — the C one where it is built (``MNEMON_NO_NATIVE=1``: the
    Python one) — and the OTLP/HTTP protobuf sender (``tracing.ship``), sent to a receiver in
    another process on loopback; the tracer's and the sender's threads and the tracer's close
    counted in the process's CPU). Then the same off and on for one
    agent at ``--context-tokens`` (``--context-turns`` turns, the configuration of (a)): its
    process CPU per turn. Goals: off within noise of before; on at most 1.25× off.
    ``--dir /dev/shm`` puts the run roots on tmpfs.

The swarm is bracketed by the **floor** (``--only floor``, each time in its own process,
skipped with ``--no-floor``): issue 17's bare Trio program with as many tasks and turns, run
once before the swarm and twice after it, so the harness's CPU per turn can be read in floors
of the same moment of a shared machine — over their median (decision 0423: one floor moved
1.5–2× between consecutive runs on an idle machine). ``--split`` runs a second swarm with twice
the child turns and splits the harness's CPU into a cost per agent and a cost per turn
(``split_figures``; the turn alone in floors: ``split.turn_in_floors``). The process sets
the collector as the ``mnemon`` command does (decision 0261; ``--host-gc`` keeps CPython's).

This is a benchmark, not a test: it prints figures (``--json``: one object) and exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import io
import json
import os
import platform
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import trio  # noqa: E402
import trio.testing  # noqa: E402

from mnemon.orchestrator import logs, loop  # noqa: E402
from mnemon.orchestrator.settings import Settings  # noqa: E402
from mnemon.orchestrator.supervisor import open_supervisor  # noqa: E402
from mnemon.orchestrator.usertools import UserTool  # noqa: E402
from mnemon.providers.cache import TTL_S, CacheModel  # noqa: E402
from mnemon.providers.scripted import ScriptedProvider  # noqa: E402
from mnemon.session.agentlog import AgentLog  # noqa: E402
from mnemon.session.records import (  # noqa: E402
    AssistantMessage,
    Text,
    ToolResult,
    ToolResults,
    ToolUse,
    Usage,
    UserPrompt,
)

from _data import TRAJECTORIES as TRAJ, announce  # noqa: E402  (the repository's, or MNEMON_BENCH_CORPUS)


# --------------------------------------------------------------------------- realistic material


def load_trajectories() -> list[list[dict]]:
    out = []
    for path in sorted(TRAJ.glob("*.jsonl")):
        out.append([json.loads(x) for x in path.read_text().splitlines() if x.strip()])
    if not out:
        raise SystemExit(f"no trajectories in {TRAJ}")
    return out


def tool_outputs(trajs: list[list[dict]]) -> list[str]:
    """Real tool outputs (clipped to 1 500 characters), in file order."""
    outs = [o["text"][:1500] for t in trajs for o in t if o["role"] == "tool" and o.get("text")]
    return outs


def system_of(trajs: list[list[dict]]) -> str | None:
    first = trajs[0][0]
    return first["text"] if first["role"] == "system" else None


def fill(log: AgentLog, trajs: list[list[dict]], target_bytes: int) -> int:
    """Append real trajectory turns (user → UserPrompt, assistant → AssistantMessage with its text
    and tool calls, tool → ToolResults) until the history reaches ``target_bytes``."""
    n = 0
    while True:
        for t in trajs:
            n += 1
            for obj in t[1:] if t[0]["role"] == "system" else t:
                role = obj["role"]
                if role == "user":
                    log.append(UserPrompt(turn=log.next_id(), text=obj["text"]))
                elif role == "assistant":
                    blocks = [Text(obj["text"])] if obj.get("text") else []
                    for c in obj.get("tool_calls") or []:
                        blocks.append(ToolUse(f"r{n}_{c['id']}", c["name"], c["arguments"]))
                    if not blocks:
                        continue
                    log.append(AssistantMessage(turn=log.next_id(), blocks=blocks,
                                                stop_reason="tool_use", model="m", usage=None))
                elif role == "tool":
                    cid = f"r{n}_{obj['tool_call_id']}"
                    if any(c.id == cid for c in log.ctx.pending_calls()):
                        log.append(ToolResults(results=[ToolResult(tool_use_id=cid,
                                                                   content=obj["text"])]))
                if log.ctx.history_bytes() >= target_bytes:
                    # answer what is still pending, so the next turn is well-formed
                    pend = log.ctx.pending_calls()
                    if pend:
                        log.append(ToolResults(results=[
                            ToolResult(tool_use_id=c.id, content="(not run)", is_error=True)
                            for c in pend]))
                    return log.ctx.history_bytes()


# --------------------------------------------------------------------------- (a) overhead


class Clock:
    """Per-turn accumulators for the loop's steps, filled by wrappers."""

    def __init__(self) -> None:
        self.turn: dict[str, float] = {}
        self.turns: list[dict[str, float]] = []
        self.in_provider = False

    def add(self, key: str, dt: float) -> None:
        self.turn[key] = self.turn.get(key, 0.0) + dt


def instrument(clock: Clock):
    """Wrap the loop's own steps; returns an undo function."""
    saved = {}

    def wrap_fn(mod, name, key):
        fn = getattr(mod, name)
        saved[(mod, name)] = fn

        def wrapper(*a, **kw):
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                clock.add(key, time.perf_counter() - t0)

        setattr(mod, name, wrapper)

    def wrap_async(mod, name, key):
        fn = getattr(mod, name)
        saved[(mod, name)] = fn

        async def wrapper(*a, **kw):
            t0 = time.perf_counter()
            try:
                return await fn(*a, **kw)
            finally:
                clock.add(key, time.perf_counter() - t0)

        setattr(mod, name, wrapper)

    wrap_fn(loop, "weigh", "weigh")
    wrap_fn(loop, "build_request", "render")
    wrap_fn(loop, "account", "account")
    wrap_fn(loop, "pressure", "pressure")
    wrap_async(loop, "run_calls", "tools")
    append = AgentLog.append
    saved[(AgentLog, "append")] = append

    def timed_append(self, record):
        t0 = time.perf_counter()
        try:
            return append(self, record)
        finally:
            clock.add("appends", time.perf_counter() - t0)
            clock.add("appends_n", 1)

    AgentLog.append = timed_append  # type: ignore[method-assign]

    def undo():
        for (mod, name), fn in saved.items():
            setattr(mod, name, fn)

    return undo


class TimedProvider:
    """The scripted provider, timed: each call's duration without the ProviderCall append made
    in its ``on_attempt`` (that append is the harness's, and is counted as overhead)."""

    name = "scripted"

    def __init__(self, inner: ScriptedProvider, clock: Clock):
        self.inner = inner
        self.clock = clock
        self.last_end: float | None = None

    async def complete(self, request, *, on_attempt=None):
        c = self.clock
        inside = {"t": 0.0}

        def attempt(*a):
            t0 = time.perf_counter()
            try:
                return on_attempt(*a) if on_attempt else None
            finally:
                inside["t"] += time.perf_counter() - t0

        t0 = time.perf_counter()
        resp = await self.inner.complete(request, on_attempt=attempt)
        end = time.perf_counter()
        if self.last_end is not None:
            c.turn["provider"] = end - t0 - inside["t"]
            c.turn["gap"] = end - self.last_end
            c.turn["overhead"] = c.turn["gap"] - c.turn["provider"]
            c.turn["used_tokens"] = resp.usage.total_input
            c.turns.append(c.turn)
        c.turn = {}
        self.last_end = end
        return resp

    async def aclose(self):
        pass


def reading(trajs, turns: int):
    """(a)'s tool and policy: ``read_output`` answers one more real tool output; the policy
    asks for the next one ``turns + 1`` times, then answers."""
    outs = tool_outputs(trajs)

    async def read_output(i: int) -> str:
        """Read one more output of the task at hand (a real tool output)."""
        return outs[i % len(outs)]

    def policy(request, state):
        k = state["k"] = state.get("k", 0) + 1
        if k <= turns + 1:
            return [Text(f"Step {k}: reading the next output."),
                    ToolUse(f"o{k}", "read_output", {"i": k})], "tool_use"
        return [Text("done")], "end_turn"

    return read_output, policy


async def overhead_phase(base: Path, trajs, *, context_tokens: int, turns: int,
                         window: int) -> dict:
    root = base / "overhead"
    clock = Clock()
    logs.configure(root if root.exists() else _mkroot(root), verbose=False)
    read_output, policy = reading(trajs, turns)

    settings = Settings(system=system_of(trajs), model="claude-sonnet-4-5",
                        context_window=window, max_turns=turns + 10, concurrency=4)
    inner = ScriptedProvider(policy=policy, cache_model=CacheModel())
    prov = TimedProvider(inner, clock)
    async with open_supervisor(root, prov, settings, user_tools=[UserTool(read_output)],
                               provider_name="scripted", started_by="bench/agents.py") as sup:
        node = sup.new_root("Fix the failing test; the transcript so far follows.")
        # system + tools are sent too: fill the messages up to the rest
        tools_bytes = loop.request_bytes(loop.build_request(sup.env, node))
        # start a little below the figure so the measured turns straddle it (each adds ~1 KB)
        target = (context_tokens - turns * 160) * 4 - tools_bytes
        filled = fill(node.log, trajs, target)
        node.log.prompt("Continue with the next output.")
        undo = instrument(clock)
        gc.collect()
        try:
            await sup.run(node)
        finally:
            undo()
    logs.shutdown()
    rows = clock.turns[1:]  # the first measured turn carries the one pressure reminder
    keys = ["overhead", "weigh", "render", "appends", "account", "tools", "pressure",
            "provider"]
    for r in rows:
        r["other"] = r["overhead"] - sum(r.get(k, 0.0) for k in keys[1:-1])
    keys.append("other")
    med = {k: statistics.median(r.get(k, 0.0) for r in rows) * 1e3 for k in keys}
    p90 = sorted(r["overhead"] for r in rows)[int(0.9 * (len(rows) - 1))] * 1e3
    return {
        "turns_measured": len(rows),
        "history_bytes_filled": filled,
        "used_tokens_range": [min(r["used_tokens"] for r in rows),
                              max(r["used_tokens"] for r in rows)],
        "evictions": node.evictions,
        "reason": node.reason,
        "median_ms": {k: round(v, 3) for k, v in med.items()},
        "overhead_p90_ms": round(p90, 3),
        "appends_per_turn": statistics.median(r.get("appends_n", 0) for r in rows),
        "first_turn_overhead_ms": round(clock.turns[0]["overhead"] * 1e3, 3),
        "goal_ms": 5.0,
        "met": med["overhead"] <= 5.0,
    }


def _mkroot(path: Path) -> Path:
    from mnemon.lineage.runroot import create_run_root

    return create_run_root(path, "bench/agents.py")


# --------------------------------------------------------------------------- (b) swarm


def swarm_policy(children: int, child_turns: int, park: trio.Event | None = None,
                 parked: list | None = None):
    async def policy(request, state):
        k = state["k"] = state.get("k", 0) + 1
        if request.meta["depth"] == 0:
            if k <= 2:
                return [Text(f"Reading document {k}."),
                        ToolUse(f"d{k}", "read_output", {"i": k})], "tool_use"
            if k == 3:
                return [ToolUse(f"s{j}", "agents_start",
                                {"task": f"Check part {j} of the findings.", "kind": "mnemon"})
                        for j in range(children)], "tool_use"
            if k == 4:
                return [ToolUse("w", "agents_wait", {})], "tool_use"
            return [Text("All parts checked.")], "end_turn"
        if park is not None and k == 1:
            parked.append(1)  # type: ignore[union-attr]
            await park.wait()
            return [Text("released")], "end_turn"
        if k == 1:
            return [ToolUse("g", "transcript_grep", {"pattern": "Error|FAILED"})], "tool_use"
        if k < child_turns:
            return [Text(f"Reading document {k}."),
                    ToolUse(f"d{k}", "read_output", {"i": k})], "tool_use"
        return [Text("Part checked.")], "end_turn"

    return policy


class Waiting:
    """The provider, with the agents inside a call: an agent in a call is idle (nothing of it
    runs while its request waits out the latency)."""

    name = "scripted"

    def __init__(self, inner: ScriptedProvider):
        self.inner = inner
        self.inside: set[str] = set()

    async def complete(self, request, *, on_attempt=None):
        agent = request.meta.get("agent")
        self.inside.add(agent)
        try:
            return await self.inner.complete(request, on_attempt=on_attempt)
        finally:
            self.inside.discard(agent)

    async def aclose(self):
        await self.inner.aclose()


async def sample_idle(roots: list, waiting: Waiting, agents: int, rss0: int,
                      seen: dict) -> None:
    """Every 0.1 s until every agent is idle at once: the RSS and the agents idle — in a
    provider call, or a root waiting for its children. Two samples are kept: the first with
    every root in a provider call (no child yet) and the one with the most agents idle. It
    walks only the roots (a child has no children) and stops once it has seen all ``agents``
    idle, so that it costs the swarm next to nothing."""
    while seen.get("idle", 0) < agents:
        idle = len(waiting.inside | {r.id for r in roots if r.state == "running" and any(
            c.state == "running" for c in r.children.values())})
        rss = rss_bytes() - rss0
        if "roots_rss_delta" not in seen and len(waiting.inside) >= len(roots):
            seen["roots_rss_delta"] = rss
        if idle >= seen.get("idle", 0):
            seen.update(idle=idle, in_calls=len(waiting.inside), rss_delta=rss)
        await trio.sleep(0.1)


async def swarm(root: Path, trajs, *, roots: int, children: int, child_turns: int,
                latency: float, park: trio.Event | None = None, on_parked=None,
                goal: float = 1.2, idle_rss: bool = False, fixed_usage: bool = False,
                budget: bool = False) -> dict:
    """The swarm of (b); with ``idle_rss``, also the RSS delta per idle agent (``sample_idle``)
    measured while the agents wait out the latency — memory held by agents that are alive.

    ``fixed_usage``: the scripted provider's cache model answers every call with one constant
    usage instead of simulating the cache — the swarm as a provider without a simulation would
    run it, so that an instruction count (``bench/instructions.py``) is the harness's alone.
    The harness is unchanged: a child's projected cost still replays its parent's request on a
    cache model of its own (sharing the provider's memos, which only projections then fill)."""
    outs = tool_outputs(trajs)
    agents = roots * (1 + children)
    parked: list = []

    async def read_output(i: int) -> str:
        """Read one document (a real tool output)."""
        return outs[i % len(outs)]

    settings = Settings(system=system_of(trajs), model="claude-sonnet-4-5",
                        context_window=200_000, concurrency=agents, max_agents=agents,
                        max_turns=50)
    cache = CacheModel()
    sim = {"s": 0.0}
    usage_for = cache.usage_for

    def timed_usage_for(*a, **kw):  # the provider's simulation, not the harness's work
        t = time.thread_time()  # CPU of this thread: a busy machine must not inflate it
        try:
            return usage_for(*a, **kw)
        finally:
            sim["s"] += time.thread_time() - t

    def fixed(request, output_tokens, now, **kw):  # one answer: no simulation to count
        return Usage(input_tokens=2_000, output_tokens=output_tokens)

    cache.usage_for = fixed if fixed_usage else timed_usage_for  # type: ignore[method-assign]
    door = _time_door_bodies()
    prov = Waiting(ScriptedProvider(policy=swarm_policy(children, child_turns, park, parked),
                                    cache_model=cache, latency_s=latency))
    seen: dict = {}
    gc.collect()
    rss0 = rss_bytes()
    t0 = time.perf_counter()
    c0 = time.process_time()
    with _Collector() as collector, _timed_appends(budget) as records:
        async with open_supervisor(root, prov, settings, user_tools=[UserTool(read_output)],
                                   provider_name="scripted", started_by="bench/agents.py") as sup:
            nodes = [sup.new_root(f"Task {r}: audit the findings.") for r in range(roots)]
            for n in nodes:
                sup.start(n)
            if idle_rss:
                sup.nursery.start_soon(sample_idle, nodes, prov, agents, rss0, seen)
            if park is not None:
                while len(parked) < roots * children:
                    await trio.sleep(0.01)
                await trio.testing.wait_all_tasks_blocked(cushion=0.05)
                await on_parked(sup)
                park.set()
            if idle_rss:
                for n in nodes:
                    await n.done.wait()
                sup.nursery.cancel_scope.cancel()  # the sampler, if it never saw them all idle
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    turns = sum(a.turns_taken for a in sup.agents.values())
    ideal = (3 + child_turns + 1) * latency
    reasons: dict[str, int] = {}
    for a in sup.agents.values():
        reasons[a.reason or "?"] = reasons.get(a.reason or "?", 0) + 1
    return {"agents": len(sup.agents), "roots": roots, "children_per_root": children,
            "turns": turns, "provider_calls": sup.provider_calls, "wall_s": round(wall, 3),
            "cpu_s": round(cpu, 3), "ideal_s": round(ideal, 3),
            "ratio": round(wall / ideal, 2) if ideal else None,
            "cpu_ms_per_turn": round(cpu / max(1, turns) * 1e3, 3),
            "cache_model_s": round(sim["s"], 3),
            "harness_cpu_ms_per_turn": round((cpu - sim["s"]) / max(1, turns) * 1e3, 3),
            "door_bodies_s": round(door["s"], 3), "door_bodies_calls": door["n"],
            "collector_s": round(collector.s, 3), "collections": collector.by_gen,
            "collector_ms_per_turn": round(collector.s / max(1, turns) * 1e3, 4),
            "harness_cpu_ms_per_turn_without_door_bodies":
                round((cpu - sim["s"] - door["s"]) / max(1, turns) * 1e3, 3),
            "reasons": reasons, "goal_ratio": goal,
            "met": wall <= goal * ideal,
            **({"idle": idle_figures(seen, roots, agents)} if idle_rss else {}),
            **({"appends": {"s": round(records["s"], 4), "records": records["n"]}}
               if records is not None else {})}


def split_figures(short: dict, long: dict) -> dict:
    """The harness's CPU as a cost per agent and a cost per turn (decision 0473): two swarms of
    the same agents, the second with twice the child turns, their harness CPU ``H = A·agents +
    T·turns`` solved for ``A`` (making, forking, grepping, projecting and ending an agent) and
    ``T`` (one more turn of an agent already running). A turn of a longer-lived agent renders a
    longer context, so ``T`` is the turn at the longer swarm's mean context, an upper bound."""
    def harness_s(r: dict) -> float:
        return r["harness_cpu_ms_per_turn"] * r["turns"] / 1e3

    dt = long["turns"] - short["turns"]
    per_turn = (harness_s(long) - harness_s(short)) / dt if dt else 0.0
    per_agent = (harness_s(short) - per_turn * short["turns"]) / max(1, short["agents"])
    return {"turns": [short["turns"], long["turns"]],
            "harness_ms_per_turn": round(per_turn * 1e3, 4),
            "harness_ms_per_agent": round(per_agent * 1e3, 4),
            "agents_share": round(per_agent * short["agents"] / max(1e-9, harness_s(short)), 3),
            "long_harness_cpu_ms_per_turn": long["harness_cpu_ms_per_turn"]}


def idle_figures(seen: dict, roots: int, agents: int) -> dict:
    """Memory per idle agent, two ways: the RSS delta since before the supervisor opened over
    every agent (an upper bound: it holds what the run allocates once — the thread cache and its
    malloc arenas, caches), and the growth from the sample with only the roots alive and idle
    to the one with every agent idle, over the children (the marginal cost of one more idle
    agent, a mnemon child with its inherited link)."""
    out = {"agents_idle": seen.get("idle"), "in_provider_calls": seen.get("in_calls"),
           "rss_delta_bytes": seen.get("rss_delta"),
           "rss_bytes_per_idle_agent": round(seen["rss_delta"] / seen["idle"])
           if seen.get("idle") else None,
           "peak_rss_mb": round(_peak_rss() / 2**20)}
    if seen.get("idle") == agents and "roots_rss_delta" in seen and agents > roots:
        out["marginal_rss_bytes_per_idle_child"] = round(
            (seen["rss_delta"] - seen["roots_rss_delta"]) / (agents - roots))
    return out


def _peak_rss() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class _Collector:
    """CPU of CPython's cyclic collector while the swarm runs (``gc.callbacks``): its
    collections by generation and their time, reported beside the harness figure (which holds
    it). A collection's time is the thread's CPU between its start and stop callbacks."""

    def __init__(self):
        self.s = 0.0
        self.by_gen = [0, 0, 0]
        self._t = 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._t = time.thread_time()
        else:
            self.s += time.thread_time() - self._t
            self.by_gen[info["generation"]] += 1

    def __enter__(self):
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc):
        gc.callbacks.remove(self)


def _timing(fn, spent: dict):
    """``fn`` with the thread's CPU in each call added to ``spent["s"]`` and the calls counted
    in ``spent["n"]`` (a timed function is marked, its original kept as ``__wrapped__``)."""
    clock = time.thread_time

    def timed(*a, **kw):
        t = clock()
        try:
            return fn(*a, **kw)
        finally:
            spent["s"] += clock() - t
            spent["n"] += 1

    timed._timed = True  # type: ignore[attr-defined]
    timed.__wrapped__ = fn  # type: ignore[attr-defined]
    return timed


def _time_door_bodies() -> dict:
    """CPU of the door's grep and read bodies (they run in worker threads, off the Trio
    thread): the transcript tools' own work, reported beside the harness figure."""
    from mnemon.session.door import api

    spent = {"s": 0.0, "n": 0}
    for name in ("grep_wants", "read_wants"):
        fn = getattr(api, name)
        if getattr(fn, "_timed", False):
            fn = fn.__wrapped__
        setattr(api, name, _timing(fn, spent))
    return spent


@contextlib.contextmanager
def _timed_appends(on: bool):
    """CPU of every record's append (``RecordLog.append_line``: the writer's check, the seal
    into the chain, the write — one native call — and the Python around it) inside the block,
    for ``--budget``; None when not ``on``. Timing each call costs ~1 µs of its own, so the
    harness figure of a ``--budget`` run is a little above a plain run's."""
    if not on:
        yield None
        return
    from mnemon.session.log import RecordLog

    spent = {"s": 0.0, "n": 0}
    orig = RecordLog.append_line
    RecordLog.append_line = _timing(orig, spent)  # type: ignore[method-assign]
    try:
        yield spent
    finally:
        RecordLog.append_line = orig  # type: ignore[method-assign]


def budget_figures(swarm_res: dict, floor_ms: float) -> dict:
    """Item 2's budget (decision 0476): what three floors leave for the Python of a turn once
    the records' appends (fixed by the format and the writer's guarantee) and the collector
    are paid, and how much of the rest would have to go."""
    turns = max(1, swarm_res["turns"])
    harness = swarm_res["harness_cpu_ms_per_turn"]
    records = swarm_res["appends"]["s"] / turns * 1e3
    collector = swarm_res["collector_ms_per_turn"]
    rest = harness - records - collector
    allowed = 3 * floor_ms - records - collector
    return {"records_per_turn": round(swarm_res["appends"]["records"] / turns, 2),
            "records_ms_per_turn": round(records, 4),
            "collector_ms_per_turn": collector,
            "rest_ms_per_turn": round(rest, 4),
            "three_floors_ms": round(3 * floor_ms, 4),
            "rest_allowed_ms": round(allowed, 4),
            "rest_must_lose": round(1 - allowed / rest, 3) if rest > 0 else None}


def floor(folder: Path, *, agents: int, turns: int, latency: float) -> dict:
    """The floor of a turn on this machine, now: a bare Trio program with as many tasks and
    turns as the swarm, each turn a ``trio.sleep(latency)`` and four appends of a 2 KB msgspec
    record to the task's own file (one ``os.write`` each) — what any CPython+Trio harness pays
    (issue #17 measured 0.10 ms per turn). Measured in the same run as the swarm, so the
    harness's figure can be read in floors, which this shared machine's moment moves less."""
    import msgspec

    folder.mkdir(parents=True, exist_ok=True)
    per = max(1, round(turns / max(1, agents)))
    rec = {"t": "Filler", "text": "x" * 2000}
    enc = msgspec.json.Encoder().encode

    async def one(i: int) -> None:
        fd = os.open(folder / f"{i}.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            for k in range(per):
                await trio.sleep(latency)
                for _ in range(4):
                    os.write(fd, enc({**rec, "k": k}) + b"\n")
        finally:
            os.close(fd)

    async def main() -> None:
        async with trio.open_nursery() as n:
            for i in range(agents):
                n.start_soon(one, i)

    t0, c0 = time.perf_counter(), time.process_time()
    trio.run(main)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"agents": agents, "turns": agents * per, "wall_s": round(wall, 3),
            "cpu_s": round(cpu, 3),
            "cpu_ms_per_turn": round(cpu / (agents * per) * 1e3, 4),
            "ratio": round(wall / (per * latency), 2) if latency else None}


def run_floor(base: Path, agents: int, turns: int, latency: float) -> dict:
    """``floor`` in a process of its own (``--only floor``), as many tasks and turns."""
    proc = subprocess.run(
        [sys.executable, __file__, "--only", "floor", "--json", "--dir", str(base),
         "--roots", str(agents), "--child-turns", str(turns), "--latency", str(latency)],
        capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)["floor"]


def amortised_expire() -> None:
    """What-if (--what-if-expire): ``CacheModel._expire`` scans only once the earliest expiry
    can have passed (a lower bound kept beside the entries), instead of every request."""

    def _expire(self, now: float) -> None:
        nxt = getattr(self, "_next_expiry", None)
        if nxt is not None and now < nxt:
            return
        for key in [k for k, e in self.entries.items() if e.expires_at <= now]:
            del self.entries[key]
        self._next_expiry = min((e.expires_at for e in self.entries.values()),
                                default=now + min(TTL_S.values()))

    CacheModel._expire = _expire  # type: ignore[method-assign]


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def memory_phase(base: Path, trajs, *, roots: int, children: int) -> dict:
    """Two parked swarms: the first measures the RSS delta (tracemalloc off), the second the
    traced Python allocations. Run it in a fresh process (the full run does) for a clean RSS."""
    out: dict = {}
    for mode in ("rss", "traced"):
        root = _mkroot(base / f"memory-{mode}")
        logs.configure(root)
        gc.collect()
        rss0 = rss_bytes()
        if mode == "traced":
            tracemalloc.start()
        traced0 = tracemalloc.get_traced_memory()[0] if mode == "traced" else 0
        seen: dict = {}

        async def on_parked(sup, mode=mode, rss0=rss0, traced0=traced0, seen=seen):
            gc.collect()
            if mode == "traced":
                seen["delta"] = tracemalloc.get_traced_memory()[0] - traced0
            else:
                seen["delta"] = rss_bytes() - rss0
            seen["agents"] = len(sup.agents)
            seen["running"] = sum(a.state == "running" for a in sup.agents.values())

        res = await swarm(root, trajs, roots=roots, children=children, child_turns=3,
                          latency=0.0, park=trio.Event(), on_parked=on_parked)
        if mode == "traced":
            tracemalloc.stop()
        logs.shutdown()
        out["agents_idle"] = seen["agents"]
        out["running_when_measured"] = seen["running"]
        out[f"{mode}_bytes_per_agent"] = round(seen["delta"] / seen["agents"])
        out[f"ended_{mode}"] = res["reasons"]
    return out


# --------------------------------------------------------------------------- main


# --------------------------------------------------------------------------- (d) tracing

_SINK = """
import http.server
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keeps the connection, as an OpenTelemetry collector does
    rbufsize = 1 << 20  # reads a body in few calls, as a collector does, not 8 KiB at a time
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *a):
        pass
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(srv.server_address[1], flush=True)
srv.serve_forever()
"""


def _untapped_append(self, record):
    """``AgentLog.append`` as it was before the records' tap (the ``before`` figure)."""
    self.ctx.check(record)
    locus = self.log.append(record)
    self.ctx.apply(record, locus)
    if self._first is None:
        self._first = locus
    self._last = locus
    self._lines += 1
    return locus


@contextlib.contextmanager
def _receiver():
    """The receiver of (d) in a process of its own, ``OTEL_EXPORTER_OTLP_ENDPOINT`` pointing at
    it while the block runs."""
    sink = subprocess.Popen([sys.executable, "-c", _SINK], stdout=subprocess.PIPE, text=True)
    try:
        os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = \
            f"http://127.0.0.1:{sink.stdout.readline().strip()}"
        yield
    finally:
        os.environ.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
        sink.terminate()
        sink.wait()


def context_tracing_at(base: Path, trajs, args) -> dict:
    with _receiver():
        return context_tracing_phase(base, trajs, context_tokens=args.context_tokens,
                                     turns=args.context_turns, window=args.window,
                                     reps=args.reps)


def tracing_phase(base: Path, trajs, *, roots: int, children: int, child_turns: int,
                  latency: float, reps: int) -> dict:
    """(d): harness CPU per turn of the swarm, before / off / on, ``reps`` rounds."""
    from mnemon.orchestrator.tracing.ship import Shipper
    from mnemon.orchestrator.tracing.switch import traced_by
    from mnemon.orchestrator.tracing.tap import LiveTracer

    with _receiver():
        per: dict[str, list[float]] = {"before": [], "off": [], "on": []}
        spans = dropped = 0
        real_append = AgentLog.append
        for rep in range(reps + 1):  # the first round warms up (imports, caches): not counted
            for mode in ("before", "off", "on"):
                root = _mkroot(base / f"tracing-{mode}-{rep}")
                logs.configure(root)
                tracer = LiveTracer(Shipper.from_env()) if mode == "on" else None
                if mode == "before":
                    AgentLog.append = _untapped_append  # type: ignore[method-assign]
                try:
                    if tracer is not None:
                        with traced_by(tracer):
                            r = trio.run(lambda: swarm(root, trajs, roots=roots,
                                                       children=children,
                                                       child_turns=child_turns,
                                                       latency=latency))
                        c0 = time.process_time()
                        tracer.close()  # the last batches: the tracer's cost too
                        closing = time.process_time() - c0
                    else:
                        r = trio.run(lambda: swarm(root, trajs, roots=roots, children=children,
                                                   child_turns=child_turns, latency=latency))
                        closing = 0.0
                finally:
                    AgentLog.append = real_append  # type: ignore[method-assign]
                    logs.shutdown()
                if rep:
                    per[mode].append(r["harness_cpu_ms_per_turn"]
                                     + closing / max(1, r["turns"]) * 1e3)
                    if tracer is not None:
                        spans += tracer.sink.exported
                        dropped += tracer.sink.dropped
    med = {k: round(statistics.median(v), 4) for k, v in per.items()}
    return {"agents": roots * (1 + children), "turns_per_run": r["turns"], "reps": reps,
            "harness_cpu_ms_per_turn": per, "median_ms_per_turn": med,
            "off_over_before": round(med["off"] / med["before"], 3),
            "off_over_before_paired": paired(per["off"], per["before"]),
            "on_over_off": round(med["on"] / med["off"], 3),
            "on_over_off_paired": paired(per["on"], per["off"]),
            "spans_exported": spans, "spans_dropped": dropped,
            "goal_on_over_off": 1.25, "met": med["on"] <= 1.25 * med["off"],
            "met_paired": paired(per["on"], per["off"]) <= 1.25}


def paired(a: list[float], b: list[float]) -> float:
    """The median of the rounds' own ratios ``a[i] / b[i]``: the modes alternate within a
    round, so a round's ratio leaves out what drifts from round to round (the page cache
    filling, the heap growing) that a ratio of the medians keeps."""
    return round(statistics.median(x / y for x, y in zip(a, b)), 3)


async def _context_run(root: Path, trajs, *, context_tokens: int, turns: int,
                       window: int) -> dict:
    """One agent at a ``context_tokens`` context taking ``turns`` turns (the configuration of
    (a)); its process CPU per turn, less the scripted provider's cache model."""
    read_output, policy = reading(trajs, turns)

    settings = Settings(system=system_of(trajs), model="claude-sonnet-4-5",
                        context_window=window, max_turns=turns + 10, concurrency=4)
    cache = CacheModel()
    sim = {"s": 0.0}
    usage_for = cache.usage_for

    def timed_usage_for(*a, **kw):
        t = time.thread_time()
        try:
            return usage_for(*a, **kw)
        finally:
            sim["s"] += time.thread_time() - t

    cache.usage_for = timed_usage_for  # type: ignore[method-assign]
    prov = ScriptedProvider(policy=policy, cache_model=cache)
    async with open_supervisor(root, prov, settings, user_tools=[UserTool(read_output)],
                               provider_name="scripted", started_by="bench/agents.py") as sup:
        node = sup.new_root("Fix the failing test; the transcript so far follows.")
        tools_bytes = loop.request_bytes(loop.build_request(sup.env, node))
        fill(node.log, trajs, (context_tokens - turns * 160) * 4 - tools_bytes)
        node.log.prompt("Continue with the next output.")
        gc.collect()
        sim["s"] = 0.0
        c0 = time.process_time()
        await sup.run(node)
        cpu = time.process_time() - c0
    return {"turns": node.turns_taken, "cpu_s": cpu, "cache_model_s": sim["s"]}


def context_tracing_phase(base: Path, trajs, *, context_tokens: int, turns: int, window: int,
                          reps: int) -> dict:
    """(d), the same three ways at a real context: one agent at ``context_tokens`` tokens, as
    in (a), its harness CPU per turn (the process's, the tracer's threads and close included)."""
    from mnemon.orchestrator.tracing.ship import Shipper
    from mnemon.orchestrator.tracing.switch import traced_by
    from mnemon.orchestrator.tracing.tap import LiveTracer

    per: dict[str, list[float]] = {"off": [], "on": []}
    closes: list[float] = []
    for rep in range(reps + 1):  # the first round warms up
        for mode in ("off", "on"):
            root = _mkroot(base / f"context-tracing-{mode}-{rep}")
            logs.configure(root, verbose=False)
            tracer = LiveTracer(Shipper.from_env()) if mode == "on" else None
            try:
                if tracer is not None:
                    with traced_by(tracer):
                        r = trio.run(lambda: _context_run(root, trajs,
                                                          context_tokens=context_tokens,
                                                          turns=turns, window=window))
                    c0 = time.process_time()
                    tracer.close()
                    closing = time.process_time() - c0
                    r["cpu_s"] += closing
                    if rep:
                        closes.append(closing * 1e3)
                else:
                    r = trio.run(lambda: _context_run(root, trajs, context_tokens=context_tokens,
                                                      turns=turns, window=window))
            finally:
                logs.shutdown()
            if rep:
                per[mode].append((r["cpu_s"] - r["cache_model_s"]) / max(1, r["turns"]) * 1e3)
    med = {k: round(statistics.median(v), 4) for k, v in per.items()}
    # the tracer's close: in a run this short (tens of milliseconds), most of the building, the
    # one batch sent and the connection opened for it — counted in ``on`` above, shown apart
    close_ms = statistics.median(closes)
    return {"context_tokens": context_tokens, "turns_per_run": r["turns"], "reps": reps,
            "harness_cpu_ms_per_turn": per, "median_ms_per_turn": med,
            "close_ms_per_run": round(close_ms, 3),

            "on_over_off": round(med["on"] / med["off"], 3),
            "on_over_off_paired": paired(per["on"], per["off"]),
            "goal_on_over_off": 1.25, "met": med["on"] <= 1.25 * med["off"],
            "met_paired": paired(per["on"], per["off"]) <= 1.25}


def machine() -> dict:
    cpu = platform.processor() or ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"python": platform.python_version(), "platform": platform.platform(),
            "cpu": cpu, "cores": os.cpu_count(), "trio": trio.__version__,
            "load_average_at_start": [round(x, 2) for x in os.getloadavg()]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--roots", type=int, default=250)
    ap.add_argument("--children", type=int, default=3)
    ap.add_argument("--child-turns", type=int, default=8)
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--context-tokens", type=int, default=150_000)
    ap.add_argument("--window", type=int, default=200_000)
    ap.add_argument("--overhead-turns", type=int, default=40)
    ap.add_argument("--context-turns", type=int, default=150,
                    help="--only tracing: the turns of the run at --context-tokens")
    ap.add_argument("--only", choices=["overhead", "swarm", "memory", "floor", "tracing"])
    ap.add_argument("--reps", type=int, default=3, help="--only tracing: measured rounds")
    ap.add_argument("--no-floor", action="store_true",
                    help="skip the bare Trio program measured after the swarm (the floor)")
    ap.add_argument("--goal", type=float, default=1.2,
                    help="the swarm's goal as a multiple of its ideal wall time (issue #17: "
                         "1.1 for 1 000 agents at 1 s, 1.3 for 10 000 at 5 s)")
    ap.add_argument("--idle-rss", action="store_true",
                    help="also sample the RSS while the swarm's agents wait out the latency: "
                         "memory per idle agent, alive agents in a running swarm")
    ap.add_argument("--profile", action="store_true", help="cProfile the swarm; print the top")
    ap.add_argument("--split", action="store_true",
                    help="also run the swarm with twice the child turns, and split the harness's "
                         "CPU into a cost per agent and a cost per turn (split.turn_in_floors)")
    ap.add_argument("--what-if-expire", action="store_true",
                    help="patch CacheModel._expire to an amortised scan (a proposed fix)")
    ap.add_argument("--budget", action="store_true",
                    help="time every record's append and report item 2's budget "
                         "(swarm.appends, swarm.budget; decision 0476)")
    ap.add_argument("--fixed-usage", action="store_true",
                    help="--only swarm: the provider's cache model answers one constant usage "
                         "(no simulation): the harness alone, for bench/instructions.py")
    ap.add_argument("--host-gc", action="store_true",
                    help="keep CPython's collector settings instead of the mnemon command's (gctune)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--no-chain", action="store_true",
                    help="agents' logs written unchained (the log's hash chain off), to weigh "
                         "the chain's cost against the same commit (issue 49)")
    ap.add_argument("--dir", default=None,
                    help="where the run's fresh directory of run roots goes (default: the "
                         "system's temp dir); removed at the end unless --keep")
    ap.add_argument("--keep", action="store_true", help="keep the run roots")
    args = ap.parse_args()
    announce()
    if args.only == "floor":  # (--roots agents, --child-turns turns in all): the bare program
        print(json.dumps({"floor": floor(Path(tempfile.mkdtemp(dir=args.dir)) / "floor",
                                         agents=args.roots, turns=args.child_turns,
                                         latency=args.latency)}))
        return 0
    if args.no_chain:  # every new log unchained: what the writer did before the chain
        from mnemon.session import agentlog as _agentlog
        from mnemon.session.log import RecordLog as _RecordLog

        class _Unchained(_RecordLog):
            def __init__(self, *a, **kw):
                kw["chain"] = False
                super().__init__(*a, **kw)

        _agentlog.RecordLog = _Unchained  # type: ignore[misc]
    if not args.host_gc:  # as the mnemon command sets it (decision 0261)
        from mnemon.orchestrator.gctune import for_process

        for_process()

    if args.what_if_expire:
        amortised_expire()
    trajs = load_trajectories()
    if args.dir:
        Path(args.dir).mkdir(parents=True, exist_ok=True)
    # a fresh directory each run, also under --dir: a run root left by an earlier run would be
    # reopened, and listing its thousands of agents counted in this run's CPU
    base = Path(tempfile.mkdtemp(prefix="mnemon-bench-agents-", dir=args.dir))
    res: dict = {"machine": machine(), "command": "python " + " ".join(sys.argv)}

    if args.only in (None, "overhead"):
        res["overhead"] = trio.run(lambda: overhead_phase(
            base, trajs, context_tokens=args.context_tokens, turns=args.overhead_turns,
            window=args.window))
    if args.only in (None, "swarm"):
        agents = args.roots * (1 + args.children)
        floor_before = None if args.no_floor else run_floor(
            base, agents, args.roots * 5 + args.roots * args.children * args.child_turns,
            args.latency)
        root = _mkroot(base / "swarm")
        logs.configure(root)
        if args.idle_rss:  # warm up first (imports, first-use caches), on a swarm too small
            # to leave much freed memory for the measured one to reuse
            trio.run(lambda: swarm(_mkroot(base / "warm-up"), trajs, roots=2,
                                   children=args.children, child_turns=args.child_turns,
                                   latency=0.0))
        prof = cProfile.Profile() if args.profile else None
        if prof:
            prof.enable()
        res["swarm"] = trio.run(lambda: swarm(
            root, trajs, roots=args.roots, children=args.children,
            child_turns=args.child_turns, latency=args.latency, goal=args.goal,
            idle_rss=args.idle_rss, fixed_usage=args.fixed_usage, budget=args.budget))
        if prof:
            prof.disable()
            s = io.StringIO()
            pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(25)
            res["profile_tottime"] = s.getvalue()
            s = io.StringIO()
            pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(40)
            res["profile_cumulative"] = s.getvalue()
        if args.split:  # the same swarm with its children's turns doubled: per agent, per turn
            res["swarm"]["split"] = split_figures(
                res["swarm"], trio.run(lambda: swarm(
                    _mkroot(base / "swarm-long"), trajs, roots=args.roots,
                    children=args.children, child_turns=2 * args.child_turns,
                    latency=args.latency, goal=args.goal)))
        logs.shutdown()
        if not args.no_floor:
            # three floors, each in its own process (CPython's collector, no swarm's heap):
            # one before the swarm and two after it, so that the floor brackets the swarm in
            # time; the ratio is to their median (a single floor moved 2x between consecutive
            # runs on an idle machine, and the ratio with it)
            floors = [floor_before] + [run_floor(base, res["swarm"]["agents"],
                                                 res["swarm"]["turns"], args.latency)
                                       for _ in range(2)]
            per = sorted(f["cpu_ms_per_turn"] for f in floors)
            res["swarm"]["floor"] = {**floors[1], "cpu_ms_per_turn": per[1],
                                     "cpu_ms_per_turn_each": [f["cpu_ms_per_turn"]
                                                              for f in floors]}
            res["swarm"]["harness_per_turn_in_floors"] = round(
                res["swarm"]["harness_cpu_ms_per_turn"]
                / max(1e-9, res["swarm"]["floor"]["cpu_ms_per_turn"]), 2)
            if "appends" in res["swarm"]:
                res["swarm"]["budget"] = budget_figures(res["swarm"],
                                                        res["swarm"]["floor"]["cpu_ms_per_turn"])
            if "split" in res["swarm"]:
                res["swarm"]["split"]["turn_in_floors"] = round(
                    res["swarm"]["split"]["harness_ms_per_turn"]
                    / max(1e-9, res["swarm"]["floor"]["cpu_ms_per_turn"]), 2)
    if args.only == "tracing":
        res["tracing"] = tracing_phase(base, trajs, roots=args.roots, children=args.children,
                                       child_turns=args.child_turns, latency=args.latency,
                                       reps=args.reps)
        # the same at a real context, the receiver started again for it
        res["tracing_at_context"] = context_tracing_at(base, trajs, args)
    if args.only == "memory":
        res["memory"] = trio.run(lambda: memory_phase(base, trajs, roots=args.roots,
                                                      children=args.children))
    elif args.only is None:  # a fresh process, so that the RSS delta is not hidden by reuse
        import subprocess

        proc = subprocess.run([sys.executable, __file__, "--only", "memory", "--json",
                               "--roots", str(args.roots), "--children", str(args.children),
                               "--dir", str(base)], capture_output=True, text=True, check=True)
        res["memory"] = json.loads(proc.stdout)["memory"]
    if not args.keep:
        import shutil

        shutil.rmtree(base, ignore_errors=True)
    if args.json:
        print(json.dumps(res))
        return 0
    for key in ("profile_tottime", "profile_cumulative"):
        if key in res:
            print(res.pop(key))
    print(json.dumps(res, indent=2))
    print(f"run roots under {base}" if args.keep else "run roots removed (--keep keeps them)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
