"""Replay a recorded trajectory through the harness, under one strategy, into one run root.

The real agent loop (``orchestrator.loop``) runs each trajectory: a replay provider — the
scripted provider with a policy that plays the trajectory's assistant turns — answers each
request, and replay tools answer each call with its recorded result, so every harness mechanism
runs for real: weighing at every boundary, residues, the pressure reminder, marks and sweeps,
``ProviderCall`` records, the log. Usage comes from the cache model over the request the loop
actually built. A strategy is the loop's ``policy``: ours is the live weighing itself
(``orchestrator.weighing``); a peer's edits are written with our records.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import trio

from ...lineage.runroot import agent_source, create_run_root
from ...providers.base import Provider, Request
from ...providers.cache import CacheModel
from ...providers.prices import cost_usd
from ...providers.scripted import ScriptedProvider
from ...session.log import iter_lines
from ...session.records import Text, ToolResult, ToolUse, compact, decode
from ..env import AgentEnv
from ..importers import NO_RESULT, AssistantStep, Trajectory
from ..loop import AgentDone
from ..node import AgentNode
from ..settings import Settings
from ..supervisor import Supervisor
from . import strategies as S
from .cursor import Cursor
from .handle import Handle
from .result import Result, TurnRow
from .wire import WireReplay


class ReplayPolicy:
    """The loop's policy during a replay: the trajectory's next prompts first, then the
    strategy's edit; at a turn with no call, go on while the recording has more."""

    def __init__(self, replay: "Replay"):
        self.replay = replay

    async def before_request(self, env: AgentEnv, node: AgentNode) -> None:
        if not self.replay.cursors[node.id].advance(node):
            raise AgentDone()  # nothing is weighed after the last recorded message
        await self.replay.strategy.before_request(self.replay.handle(node))

    def after_tools(self, env: AgentEnv, node: AgentNode) -> None:
        self.replay.strategy.after_tools(self.replay.handle(node))

    async def on_idle(self, env: AgentEnv, node: AgentNode) -> bool:
        return self.replay.cursors[node.id].has_more()

    def shape_request(self, env: AgentEnv, node: AgentNode, request: Request) -> Request:
        return self.replay.strategy.shape_request(self.replay.handle(node), request)


class Replay:
    """One strategy's replay of one trajectory (and its sidechains) into one run root."""

    def __init__(self, traj: Trajectory, root: Path, strategy: S.Strategy, *,
                 window: int | None, model: str, ttl: str, seconds_per_request: float,
                 keep: float | str, sweep_horizon: float, price_model: str | None = None,
                 keep_floor_tokens: int | None = None, wire: Provider | None = None,
                 max_tokens: int | None = None):
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
        self.provider: Provider = ScriptedProvider(policy=self._play, cache_model=self.cache,
                                                   clock=lambda: self.calls * self.dt)
        if wire is not None:  # every request also goes to a real provider (replay/wire.py)
            self.provider = WireReplay(self.provider, wire)
        floor = {} if keep_floor_tokens is None else {"keep_floor_tokens": keep_floor_tokens}
        if max_tokens is not None:
            floor["max_tokens"] = max_tokens
        settings = Settings(system=traj.system, model=model, context_window=window, keep=keep,
                            **floor,
                            max_turns=steps + 10, builtin_tools=False, cache_ttl=ttl,
                            price_model=self.price_model, sweep_horizon=sweep_horizon,
                            concurrency=1, max_depth=64, max_agents=10_000)
        self.sup = Supervisor(root, self.provider, settings,
                              provider_name="replay" if wire is None else wire.name,
                              policy=ReplayPolicy(self), tool_fallback=self._answer,
                              on_edit=self._on_edit)

    def handle(self, node: AgentNode) -> Handle:
        h = self._handles.get(node.id)
        if h is None:
            h = self._handles[node.id] = Handle(self.sup.env, node, self.result,
                                                self.cache.tokens_per_byte)
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
            if isinstance(self.provider, WireReplay):
                await self.provider.aclose()
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


def replay(traj: Trajectory, out: Path, strategy: str, *, window: int | None = 200_000,
           model: str = "claude-sonnet-4-5", ttl: str = "5m", keep: float | str = "auto",
           seconds_per_request: float = 15.0, opts: S.Options | None = None,
           price_model: str | None = None, on_root=None,
           keep_floor_tokens: int | None = None,
           wire: Callable[[], Provider] | None = None, max_tokens: int | None = None) -> Result:
    """Replay one trajectory (and its sidechains, as fresh children) under one strategy into
    the run root ``out``, through the real agent loop — or, for a strategy that cannot be
    configured at ``window`` (``Strategy.not_applicable``), nothing: a Result that says why, with
    no run root and no rows. ``on_root(root)`` is called once the run
    root exists (the CLI points its logs there). ``wire()`` makes a provider every request is
    also sent to, whose reported usage is recorded (``replay/wire.py``); one per replay, made
    inside its Trio run, which closes it."""
    opts = opts or S.Options(keep=keep)
    opts.keep = keep
    why = S.make(strategy, opts).not_applicable(window)
    if why is not None:  # a provider's minimum that does not fit: said, not bent; no run root
        return Result(strategy, not_applicable=why)
    root = create_run_root(Path(out), f"mnemon replay --strategy {strategy}")
    if on_root is not None:
        on_root(root)

    async def main() -> Result:
        run = Replay(traj, root, S.make(strategy, opts), window=window, model=model, ttl=ttl,
                     seconds_per_request=seconds_per_request, keep=keep,
                     sweep_horizon=opts.sweep_horizon, price_model=price_model,
                     keep_floor_tokens=keep_floor_tokens,
                     wire=wire() if wire is not None else None, max_tokens=max_tokens)
        return await run.run()

    return trio.run(main)
