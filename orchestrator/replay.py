"""Replay a recorded trajectory through the harness, under one or more context strategies.

The replay provider answers each request with the trajectory's next assistant turn and the
replay tools answer each call with its recorded result, so every harness mechanism runs for
real — weighing at every boundary, residues, the pressure reminder, marks and sweeps, the log —
while usage comes from the cache model over the request the harness actually built.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lineage.runroot import agent_source, create_run_root, now_iso
from providers.base import Request
from providers.cache import CacheModel
from providers.prices import cost_usd
from session.agentlog import AgentLog
from session.context import Context, Turn
from session.eviction import PressureLatch, pressure_reminder
from session.records import (
    AssistantMessage,
    ProviderCall,
    Record,
    Rewound,
    SessionEnded,
    SessionStarted,
    Steering,
    ToolResults,
    Usage,
    UserPrompt,
    compact,
)
from session.render import render
from session.sweep import WRITE_MULT, Growth

from . import strategies as S
from .importers import AssistantStep, RewindStep, ToolStep, Trajectory, UserStep


@dataclass
class TurnRow:
    strategy: str
    request: int
    kind: str  # "turn" | "summary"
    context_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    edited: bool
    cumulative_usd: float = 0.0


@dataclass
class Result:
    strategy: str
    rows: list[TurnRow] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    edits: int = 0
    edit_kinds: dict = field(default_factory=dict)
    overflow_requests: int = 0
    left_bytes: int = 0
    recoverable_bytes: int = 0
    verbatim_after_edits: list[float] = field(default_factory=list)
    run_root: str = ""

    def summary(self) -> dict[str, Any]:
        u = self.usage
        total_in = u.input_tokens + u.cache_read_tokens + u.cache_write_tokens
        steady = [r for r in self.rows if not r.edited and r.kind == "turn"]
        s_in = sum(r.input_tokens + r.cache_read_tokens + r.cache_write_tokens for r in steady)
        s_read = sum(r.cache_read_tokens for r in steady)
        return {
            "cost_usd": round(self.cost_usd, 6),
            "cache_read_share": round(u.cache_read_tokens / total_in, 4) if total_in else None,
            "steady_cache_read_share": round(s_read / s_in, 4) if s_in else None,
            "recoverability": (round(self.recoverable_bytes / self.left_bytes, 4)
                               if self.left_bytes else 1.0),
            "verbatim_kept": (round(sum(self.verbatim_after_edits) / len(self.verbatim_after_edits))
                              if self.verbatim_after_edits else None),
            "edits": self.edits,
            "harness_evictions": self.edit_kinds.get("evict", 0),
            "sweeps": self.edit_kinds.get("sweep", 0),
            "requests": len(self.rows),
            "overflow_requests": self.overflow_requests,
            "left_bytes": self.left_bytes,
            "recoverable_bytes": self.recoverable_bytes,
            "input_tokens": u.input_tokens,
            "cache_read_tokens": u.cache_read_tokens,
            "cache_write_tokens": u.cache_write_tokens,
            "output_tokens": u.output_tokens,
        }


class Driver:
    """One strategy's replay of one trajectory into one agent log."""

    def __init__(self, traj: Trajectory, root: Path, strategy: S.Strategy, *, agent: str,
                 window: int | None, model: str, cache: CacheModel, ttl: str,
                 seconds_per_request: float, result: Result, parent: str | None = None,
                 price_model: str | None = None):
        self.traj = traj
        self.strategy = strategy
        self.window = window
        self.model = model
        self.price_model = price_model or model
        self.cache = cache
        self.ttl = ttl
        self.dt = seconds_per_request
        self.result = result
        self.write_mult = WRITE_MULT.get(ttl, 1.25)
        self.latch = PressureLatch()
        self.synthetic: set[int] = set()  # harness-written prompts (summaries)
        self.tpb: float | None = None
        self.left_bytes = 0
        self.recoverable_bytes = 0
        self.edits = 0
        self.edit_kinds: dict[str, int] = {}
        self._edited = False
        self.growth = Growth()
        src = agent_source(agent)
        started = SessionStarted(agent=agent, at=now_iso(), system=traj.system, tools=[],
                                 provider="replay", model=model, context_window=window,
                                 parent=parent, kind="fresh" if parent else None)
        self.log = AgentLog.create(root / src, src, started)
        self.step_turn: dict[int, int] = {}  # step index -> the turn it opened (or extended)

    @property
    def ctx(self) -> Context:
        return self.log.ctx

    # ------------------------------------------------------------------ helpers for strategies

    def append(self, record: Record) -> None:
        self.log.append(record)

    def tokens_per_byte(self) -> float:
        return self.tpb or self.cache.tokens_per_byte

    def used_tokens(self) -> int:
        return self.ctx.used_tokens(self.tpb)

    def edit(self, kind: str, before_bytes: int) -> None:
        self.edits += 1
        self.edit_kinds[kind] = self.edit_kinds.get(kind, 0) + 1
        self._edited = True
        self.result.verbatim_after_edits.append(self.verbatim_tokens())

    def verbatim_tokens(self) -> float:
        """Tokens of original material in the context now: resident turns, less harness
        steering, summaries and replacement text."""
        ctx = self.ctx
        total = 0
        for item in ctx.frontier():
            if not isinstance(item, Turn) or item.id in self.synthetic or item.records is None:
                continue
            for b in ctx.blocks(item.id):
                if b.index in item.swept:
                    continue
                if b.kind == "steering" and getattr(b.value, "by", None) == "harness":
                    continue
                total += b.length
        return total * self.tokens_per_byte()

    def pressure(self) -> None:
        used = self.used_tokens()
        if self.latch.update(used, self.window, self.ctx.history_bytes()):
            self.append(Steering(text=pressure_reminder(self.ctx, used, self.window), by="harness"))

    def request(self, extra: list[dict] | None = None) -> Request:
        messages = render(self.ctx)
        if isinstance(self.strategy, S.ClearToolUses):
            messages = _bare_placeholders(self.ctx, messages)
        if extra:
            messages = messages + extra
        return Request(system=self.traj.system, messages=messages, tools=[],
                       model=self.model, meta={"agent": self.log.source})

    def _request_bytes(self, req: Request) -> int:
        return len(compact(req.messages)) + len((req.system or "").encode())

    def _call(self, req: Request, output_tokens: int, kind: str) -> Usage:
        now = len(self.result.rows) * self.dt
        usage = self.cache.usage_for(req, output_tokens, now, model=self.model)
        total = usage.total_input
        if total:
            self.tpb = total / max(1, self._request_bytes(req))
        if kind == "turn":
            self.growth.observe(total, self._edited)
        if self.window and total > self.window:
            self.result.overflow_requests += 1
        cost = cost_usd(usage, self.price_model, self.ttl)
        self.append(ProviderCall(attempt=1, latency_s=0.0, usage=usage, model=self.model,
                                 at=now_iso()))
        r = self.result
        r.usage = r.usage + usage
        r.cost_usd += cost
        r.rows.append(TurnRow(r.strategy, len(r.rows) + 1, kind, total, usage.cache_read_tokens,
                              usage.cache_write_tokens, usage.input_tokens, usage.output_tokens,
                              round(cost, 6), self._edited, round(r.cost_usd, 6)))
        self._edited = False
        return usage

    def summary_request(self, instruction_tokens: int, summary_tokens: int) -> None:
        """A summarisation call: the context as it stands plus an instruction; its cost counts."""
        n = int(instruction_tokens / self.tokens_per_byte())
        text = ("Summarise the conversation so far for a continuation: the task, the state of "
                "the work, files and commands that matter, and what remains. ")
        instruction = (text * (n // len(text) + 1))[:n]
        req = self.request([{"role": "user", "content": [{"type": "text", "text": instruction}]}])
        self._call(req, summary_tokens, "summary")

    # ------------------------------------------------------------------ the replay

    def run(self) -> None:
        for i, step in enumerate(self.traj.steps):
            if isinstance(step, UserStep):
                tid = self.ctx.next_id()
                self.append(UserPrompt(turn=tid, text=step.text))
                self.step_turn[i] = tid
            elif isinstance(step, AssistantStep):
                self.strategy.before_request(self)
                req = self.request()
                out = math.ceil(sum(len(compact(b)) for b in step.blocks) * self.cache.tokens_per_byte)
                usage = self._call(req, out, "turn")
                tid = self.ctx.next_id()
                self.append(AssistantMessage(turn=tid, blocks=list(step.blocks),
                                             stop_reason=step.stop_reason,
                                             model=step.model or self.model, usage=usage,
                                             recorded_usage=step.usage))
                self.step_turn[i] = tid
            elif isinstance(step, ToolStep):
                pending = set(self.ctx.pending)
                results = [r for r in step.results if r.tool_use_id in pending]
                if results:
                    self.append(ToolResults(results=results))
                self.strategy.after_tools(self)
            elif isinstance(step, RewindStep):
                to = max([t for s, t in self.step_turn.items() if s <= step.to_step], default=0)
                self.append(Rewound(to=to))
        self.append(SessionEnded(reason="done", at=now_iso()))
        self.log.close()
        self.result.edits += self.edits
        for k, v in self.edit_kinds.items():
            self.result.edit_kinds[k] = self.result.edit_kinds.get(k, 0) + v
        self.result.left_bytes += self.left_bytes
        self.result.recoverable_bytes += self.recoverable_bytes


def _bare_placeholders(ctx: Context, messages: list[dict]) -> list[dict]:
    """Anthropic's context editing sends only its placeholder where a result was cleared; our
    renderer labels replacements, so the clear-tool-uses model strips that label again."""
    out = []
    for m in messages:
        content = []
        for b in m["content"]:
            if b.get("type") == "tool_result" and b["content"].endswith(S.CLEAR_PLACEHOLDER) and \
                    b["content"].startswith("[replacement for block "):
                b = {**b, "content": S.CLEAR_PLACEHOLDER}
            content.append(b)
        out.append({"role": m["role"], "content": content})
    return out


def replay(traj: Trajectory, out: Path, strategy: str, *, window: int | None = 200_000,
           model: str = "claude-sonnet-4-5", ttl: str = "5m", keep: float = 0.5,
           seconds_per_request: float = 15.0, opts: S.Options | None = None,
           price_model: str | None = None) -> Result:
    """Replay one trajectory (and its sidechains, as fresh children) under one strategy into
    the run root ``out``."""
    opts = opts or S.Options(keep=keep)
    opts.keep = keep
    root = create_run_root(Path(out), f"mnemon replay --strategy {strategy}")
    result = Result(strategy, run_root=str(root))
    cache = CacheModel(ttl=ttl)
    agents = [(traj, "a1", None)]
    n = 1
    while agents:
        t, aid, parent = agents.pop(0)
        Driver(t, root, S.make(strategy, opts), agent=aid, window=window, model=model,
               cache=cache, ttl=ttl, seconds_per_request=seconds_per_request, result=result,
               parent=parent, price_model=price_model).run()
        for child in t.children:
            n += 1
            agents.append((child, f"a{n}", aid))
    return result


def write_reports(results: list[Result], out: Path, *, plot: bool = True) -> dict:
    out = Path(out)
    with open(out / "per_turn.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["strategy", "request", "kind", "context_tokens", "cache_read_tokens",
                    "cache_write_tokens", "input_tokens", "output_tokens", "cost_usd",
                    "cumulative_usd", "edited"])
        for r in results:
            for row in r.rows:
                w.writerow([row.strategy, row.request, row.kind, row.context_tokens,
                            row.cache_read_tokens, row.cache_write_tokens, row.input_tokens,
                            row.output_tokens, row.cost_usd, row.cumulative_usd, int(row.edited)])
    summary = {"strategies": {r.strategy: r.summary() for r in results}}
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    if plot:
        plot_results(results, out / "plot.png")
    return summary


def plot_results(results: list[Result], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, (a, b) = plt.subplots(2, 1, figsize=(9, 7), sharex=True)
    for r in results:
        turns = [row for row in r.rows]
        xs = [row.request for row in turns]
        a.plot(xs, [row.context_tokens for row in turns], label=r.strategy, linewidth=1.2)
        b.plot(xs, [row.cumulative_usd for row in turns], label=r.strategy, linewidth=1.2)
    a.set_ylabel("context (input tokens)")
    b.set_ylabel("cumulative cost (USD)")
    b.set_xlabel("request")
    a.legend(loc="upper left", fontsize=8)
    a.grid(alpha=0.3)
    b.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def summary_table(summary: dict) -> str:
    from .report import table

    rows = []
    strategies = summary["strategies"]
    base = strategies.get("compact", {}).get("cost_usd")
    for name, s in strategies.items():
        rows.append({
            "strategy": name, "cost": f"${s['cost_usd']:.4f}",
            "vs_compact": f"{s['cost_usd'] / base:.3f}" if base else "-",
            "cache_read": f"{s['cache_read_share']:.1%}" if s["cache_read_share"] is not None else "-",
            "recover": f"{s['recoverability']:.0%}",
            "verbatim": str(s["verbatim_kept"]) if s["verbatim_kept"] is not None else "-",
            "edits": str(s["edits"]), "overflow": str(s["overflow_requests"])})
    return table(rows, ["strategy", "cost", "vs_compact", "cache_read", "recover", "verbatim",
                        "edits", "overflow"],
                 ["strategy", "cost", "vs compact", "cache read", "recoverable",
                  "verbatim kept (tok)", "edits", "overflow"])


