"""Replay a recorded trajectory through the harness, under one or more context strategies.

The real agent loop (``orchestrator.loop``) runs each trajectory: a replay provider — the
scripted provider with a policy that plays the trajectory's assistant turns — answers each
request, and replay tools answer each call with its recorded result, so every harness mechanism
runs for real: weighing at every boundary, residues, the pressure reminder, marks and sweeps,
``ProviderCall`` records, the log. Usage comes from the cache model over the request the loop
actually built. A strategy is the loop's ``policy``: ours is the live ``HarnessPolicy`` itself;
a peer's edits are written with our records.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from ..lineage.runroot import agent_source, create_run_root, now_iso
from ..providers.base import Request
from ..providers.cache import CacheModel
from ..providers.prices import cost_usd
from ..providers.scripted import ScriptedProvider
from ..session.context import Context, Turn
from ..session.log import iter_lines
from ..session.records import (
    ProviderCall,
    Rewound,
    Text,
    ToolResult,
    ToolUse,
    UserPrompt,
    compact,
    decode,
)
from ..session.sweep import WRITE_MULT

from . import strategies as S
from .importers import NO_RESULT, AssistantStep, RewindStep, ToolStep, Trajectory, UserStep
from .loop import AgentDone, build_request
from .settings import Settings
from .supervisor import AgentNode, Supervisor


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
    keep: float | None = None  # the share the eviction before this request kept
    verbatim_tokens: float | None = None  # verbatim tokens in the context after that edit


@dataclass
class Result:
    strategy: str
    rows: list[TurnRow] = field(default_factory=list)
    cost_usd: float = 0.0
    edits: int = 0
    edit_kinds: dict = field(default_factory=dict)
    overflow_requests: int = 0
    left_bytes: int = 0
    recoverable_bytes: int = 0
    verbatim_after_edits: list[float] = field(default_factory=list)
    keeps: list[float] = field(default_factory=list)  # the share each harness eviction kept
    run_root: str = ""

    def summary(self) -> dict[str, Any]:
        inp = sum(r.input_tokens for r in self.rows)
        read = sum(r.cache_read_tokens for r in self.rows)
        write = sum(r.cache_write_tokens for r in self.rows)
        out = sum(r.output_tokens for r in self.rows)
        total_in = inp + read + write
        steady = [r for r in self.rows if not r.edited and r.kind == "turn"]
        s_in = sum(r.input_tokens + r.cache_read_tokens + r.cache_write_tokens for r in steady)
        s_read = sum(r.cache_read_tokens for r in steady)
        return {
            "cost_usd": round(self.cost_usd, 6),
            "cache_read_share": round(read / total_in, 4) if total_in else None,
            "steady_cache_read_share": round(s_read / s_in, 4) if s_in else None,
            "recoverability": (round(self.recoverable_bytes / self.left_bytes, 4)
                               if self.left_bytes else 1.0),
            "verbatim_kept": (round(sum(self.verbatim_after_edits) / len(self.verbatim_after_edits))
                              if self.verbatim_after_edits else None),
            "verbatim_after_edits": [round(v) for v in self.verbatim_after_edits],
            "chosen_keep": list(self.keeps),
            "edits": self.edits,
            "harness_evictions": self.edit_kinds.get("evict", 0),
            "sweeps": self.edit_kinds.get("sweep", 0),
            "requests": len(self.rows),
            "overflow_requests": self.overflow_requests,
            "left_bytes": self.left_bytes,
            "recoverable_bytes": self.recoverable_bytes,
            "input_tokens": inp,
            "cache_read_tokens": read,
            "cache_write_tokens": write,
            "output_tokens": out,
        }


class Cursor:
    """One agent's place in its trajectory, shared by the replay provider, the replay tools and
    the policy: user steps and rewinds are appended at the boundary before the next recorded
    assistant turn, which the provider then plays."""

    def __init__(self, traj: Trajectory):
        self.traj = traj
        self.steps = traj.steps
        self.i = 1  # steps[0] is the task, the agent's first prompt
        self.step_turn: dict[int, int] = {}
        self.served: int | None = None  # the step the provider played last
        self.results: dict[str, ToolResult] = {
            r.tool_use_id: r for s in traj.steps if isinstance(s, ToolStep) for r in s.results}

    @property
    def task(self) -> str:
        first = self.steps[0]
        return first.text if isinstance(first, UserStep) else ""

    def has_more(self) -> bool:
        return any(isinstance(s, AssistantStep) for s in self.steps[self.i:])

    def advance(self, node: AgentNode) -> bool:
        """Append what the recording has before its next assistant turn; False at its end."""
        ctx = node.ctx
        if not self.step_turn and ctx.turns:
            self.step_turn[0] = ctx.turns[-1].id
        if self.served is not None:
            self.step_turn[self.served] = ctx.in_hand  # type: ignore[assignment]
            self.served = None
        while self.i < len(self.steps):
            step = self.steps[self.i]
            if isinstance(step, AssistantStep):
                return True
            if isinstance(step, UserStep):
                tid = ctx.next_id()
                node.log.append(UserPrompt(turn=tid, text=step.text))
                self.step_turn[self.i] = tid
            elif isinstance(step, RewindStep):
                to = max([t for s, t in self.step_turn.items() if s <= step.to_step], default=0)
                node.log.append(Rewound(to=to))
            self.i += 1  # a ToolStep was answered by the replay tools when its calls ran
        return False

    def play(self) -> AssistantStep:
        step = self.steps[self.i]
        assert isinstance(step, AssistantStep)
        self.served = self.i
        self.i += 1
        return step


class Handle:
    """What a strategy works with: one agent of one replay, over the live supervisor."""

    def __init__(self, replay: "Replay", node: AgentNode):
        self.replay = replay
        self.sup = replay.sup
        self.node = node
        self.synthetic: set[int] = set()  # harness-written prompts (summaries)
        self.left_bytes = 0
        self.recoverable_bytes = 0
        self.edits = 0
        self.verbatim: list[float] = []  # after each of this agent's edits, in order

    @property
    def ctx(self) -> Context:
        return self.node.ctx

    @property
    def window(self) -> int | None:
        return self.sup.settings.context_window

    @property
    def growth(self):
        return self.node.growth

    @property
    def write_mult(self) -> float:
        return WRITE_MULT.get(self.sup.settings.cache_ttl, 1.25)

    def append(self, record) -> None:
        self.node.log.append(record)

    def tokens_per_byte(self) -> float:
        return self.node.tokens_per_byte or self.replay.cache.tokens_per_byte

    def used_tokens(self) -> int:
        return self.ctx.used_tokens(self.node.tokens_per_byte)

    def edit(self, kind: str, before_bytes: int) -> None:
        """Account one cache-invalidating edit (ours are told through ``Supervisor.on_edit``)."""
        self.edits += 1
        self.node.edited = True
        r = self.replay.result
        r.edits += 1
        r.edit_kinds[kind] = r.edit_kinds.get(kind, 0) + 1
        v = self.verbatim_tokens()
        self.verbatim.append(v)
        r.verbatim_after_edits.append(v)

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

    async def summary_request(self, instruction_tokens: int, summary_tokens: int) -> None:
        """A summarisation call: the context as it stands plus an instruction; its cost counts
        (one ``ProviderCall`` with ``purpose: summary``, no turn)."""
        n = int(instruction_tokens / self.tokens_per_byte())
        text = ("Summarise the conversation so far for a continuation: the task, the state of "
                "the work, files and commands that matter, and what remains. ")
        instruction = (text * (n // len(text) + 1))[:n]
        req = build_request(self.sup, self.node)
        req = Request(system=req.system, tools=req.tools, max_tokens=req.max_tokens,
                      model=req.model, messages=req.messages + [
                          {"role": "user", "content": [{"type": "text", "text": instruction}]}],
                      meta={**req.meta, "purpose": "summary", "summary_tokens": summary_tokens})
        resp = await self.sup.provider.complete(req)
        self.node.log.append(ProviderCall(attempt=1, latency_s=0.0, usage=resp.usage,
                                          model=self.sup.settings.model, at=now_iso(),
                                          purpose="summary"))
        from .loop import _account

        _account(self.sup, self.node, req, resp.usage, resp.model)


class ReplayPolicy:
    """The loop's policy during a replay: the trajectory's next prompts first, then the
    strategy's edit; at a turn with no call, go on while the recording has more."""

    def __init__(self, replay: "Replay"):
        self.replay = replay

    async def before_request(self, sup: Supervisor, node: AgentNode) -> None:
        if not self.replay.cursors[node.id].advance(node):
            raise AgentDone()  # nothing is weighed after the last recorded message
        await self.replay.strategy.before_request(self.replay.handle(node))

    def after_tools(self, sup: Supervisor, node: AgentNode) -> None:
        self.replay.strategy.after_tools(self.replay.handle(node))

    async def on_idle(self, sup: Supervisor, node: AgentNode) -> bool:
        return self.replay.cursors[node.id].has_more()

    def shape_request(self, sup: Supervisor, node: AgentNode, request: Request) -> Request:
        if isinstance(self.replay.strategy, S.ClearToolUses):
            return Request(system=request.system, tools=request.tools, model=request.model,
                           max_tokens=request.max_tokens, meta=request.meta,
                           messages=_bare_placeholders(node.ctx, request.messages))
        return request


class Replay:
    """One strategy's replay of one trajectory (and its sidechains) into one run root."""

    def __init__(self, traj: Trajectory, root: Path, strategy: S.Strategy, *,
                 window: int | None, model: str, ttl: str, seconds_per_request: float,
                 keep: float | str, sweep_horizon: float, price_model: str | None = None,
                 keep_floor_tokens: int | None = None):
        self.traj = traj
        self.root = root
        self.strategy = strategy
        self.model = model
        self.price_model = price_model or model
        self.ttl = ttl
        self.dt = seconds_per_request
        self.result = Result(strategy.name, run_root=str(root))
        self.cache = CacheModel(ttl=ttl)
        self.calls = 0
        self.cursors: dict[str, Cursor] = {}
        self._handles: dict[str, Handle] = {}
        steps = _count_assistant(traj)
        self.provider = ScriptedProvider(policy=self._play, cache_model=self.cache,
                                         clock=lambda: self.calls * self.dt)
        floor = {} if keep_floor_tokens is None else {"keep_floor_tokens": keep_floor_tokens}
        settings = Settings(system=traj.system, model=model, context_window=window, keep=keep,
                            **floor,
                            max_turns=steps + 10, builtin_tools=False, cache_ttl=ttl,
                            price_model=self.price_model, sweep_horizon=sweep_horizon,
                            concurrency=1, max_depth=64, max_agents=10_000)
        self.sup = Supervisor(root, self.provider, settings, provider_name="replay",
                              policy=ReplayPolicy(self), tool_fallback=self._answer,
                              on_edit=self._on_edit)

    def handle(self, node: AgentNode) -> Handle:
        h = self._handles.get(node.id)
        if h is None:
            h = self._handles[node.id] = Handle(self, node)
        return h

    # ------------------------------------------------------------------ the replay provider

    def _play(self, request: Request, state: dict) -> tuple:
        self.calls += 1
        if request.meta.get("purpose") == "summary":
            # a stand-in of exactly the summary's size (its words do not enter the cost model)
            n = int(request.meta["summary_tokens"] / self.cache.tokens_per_byte)
            n -= len(compact(Text("")))
            return [Text(("[summary] " + "the work so far, summarised. " * (n // 28 + 1))[:n])], \
                "end_turn"
        step = self.cursors[request.meta["agent"]].play()
        return list(step.blocks), step.stop_reason, {"model": step.model,
                                                      "recorded_usage": step.usage}

    async def _answer(self, node: AgentNode, call: ToolUse) -> ToolResult:
        """The replay tools: every call answered with its recorded result."""
        rec = self.cursors[node.id].results.get(call.id)
        if rec is None:
            return ToolResult(tool_use_id=call.id, content=NO_RESULT, is_error=True)
        return ToolResult(tool_use_id=call.id, content=rec.content, is_error=rec.is_error)

    def _on_edit(self, node: AgentNode, kind: str, before: int) -> None:
        h = self.handle(node)
        left = max(0, before - node.ctx.history_bytes())
        h.left_bytes += left
        h.recoverable_bytes += left  # ours: everything that left reads back through the door
        h.edit(kind, before)

    # ------------------------------------------------------------------ running

    async def run(self) -> Result:
        try:
            queue: list[tuple[Trajectory, AgentNode | None]] = [(self.traj, None)]
            while queue:
                traj, parent = queue.pop(0)
                cursor = Cursor(traj)
                if parent is None:
                    node = self.sup.new_root(cursor.task, "a1")
                else:
                    node = self.sup.new_child(parent, cursor.task, "fresh")
                self.cursors[node.id] = cursor
                await self.sup.run(node)
                queue.extend((child, node) for child in traj.children)
        finally:
            self.sup.close()
        for h in self._handles.values():
            self.result.left_bytes += h.left_bytes
            self.result.recoverable_bytes += h.recoverable_bytes
        self._rows()
        return self.result

    def _rows(self) -> None:
        """Per request, from the logs: every ProviderCall with a usage, in order; a request after
        an edit carries the verbatim tokens that edit left and, after an eviction, the share of
        the history it kept (``Evicted.plan.keep``, or the fixed KEEP setting)."""
        r = self.result
        window = self.sup.settings.context_window
        fixed = self.sup.settings.keep
        for aid in self.cursors:
            edited = False
            keep: float | None = None
            verbatim: float | None = None
            edits = 0
            after = self._handles[aid].verbatim if aid in self._handles else []
            for _, line in iter_lines(self.root / agent_source(aid)):
                rec = decode(line)
                kind = type(rec).__name__
                if kind in ("Evicted", "Swept", "Cleared"):
                    edited = True
                    if edits < len(after):
                        verbatim = after[edits]
                    edits += 1
                    if kind == "Evicted" and rec.residue.by == "harness":  # type: ignore[union-attr]
                        plan = rec.plan  # type: ignore[union-attr]
                        keep = plan.keep if plan is not None and plan.keep is not None else (
                            fixed if isinstance(fixed, float) else None)
                        if keep is not None:
                            r.keeps.append(keep)
                elif kind == "ProviderCall" and rec.usage is not None:  # type: ignore[union-attr]
                    u = rec.usage  # type: ignore[union-attr]
                    total = u.total_input
                    if window and total > window:
                        r.overflow_requests += 1
                    cost = cost_usd(u, self.price_model, self.ttl)
                    r.cost_usd += cost
                    r.rows.append(TurnRow(r.strategy, len(r.rows) + 1,
                                          "summary" if rec.purpose == "summary" else "turn",  # type: ignore[union-attr]
                                          total, u.cache_read_tokens, u.cache_write_tokens,
                                          u.input_tokens, u.output_tokens, round(cost, 6),
                                          edited, round(r.cost_usd, 6), keep,
                                          None if verbatim is None else round(verbatim)))
                    edited = False
                    keep = verbatim = None


def _count_assistant(traj: Trajectory) -> int:
    return sum(isinstance(s, AssistantStep) for s in traj.steps) + sum(
        _count_assistant(c) for c in traj.children)


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
           model: str = "claude-sonnet-4-5", ttl: str = "5m", keep: float | str = "auto",
           seconds_per_request: float = 15.0, opts: S.Options | None = None,
           price_model: str | None = None, on_root=None,
           keep_floor_tokens: int | None = None) -> Result:
    """Replay one trajectory (and its sidechains, as fresh children) under one strategy into
    the run root ``out``, through the real agent loop. ``on_root(root)`` is called once the run
    root exists (the CLI points its logs there)."""
    opts = opts or S.Options(keep=keep)
    opts.keep = keep
    root = create_run_root(Path(out), f"mnemon replay --strategy {strategy}")
    if on_root is not None:
        on_root(root)
    run = Replay(traj, root, S.make(strategy, opts), window=window, model=model, ttl=ttl,
                 seconds_per_request=seconds_per_request, keep=keep,
                 sweep_horizon=opts.sweep_horizon, price_model=price_model,
                 keep_floor_tokens=keep_floor_tokens)
    return trio.run(run.run)


def write_reports(results: list[Result], out: Path, *, plot: bool = True) -> dict:
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
            "steady": (f"{s['steady_cache_read_share']:.1%}"
                       if s["steady_cache_read_share"] is not None else "-"),
            "keep": _keeps(s.get("chosen_keep") or []),
            "edits": str(s["edits"]), "overflow": str(s["overflow_requests"])})
    return table(rows, ["strategy", "cost", "vs_compact", "cache_read", "steady", "recover",
                        "verbatim", "keep", "edits", "overflow"],
                 ["strategy", "cost", "vs compact", "cache read", "steady read", "recoverable",
                  "verbatim kept (tok)", "chosen keep", "edits", "overflow"])


def _keeps(keeps: list[float]) -> str:
    """The shares the evictions kept: every one when few, else the range."""
    if not keeps:
        return "-"
    if len(keeps) <= 4:
        return " ".join(f"{k:.2f}" for k in keeps)
    return f"{min(keeps):.2f}–{max(keeps):.2f} ({len(keeps)})"


