"""The live survey of an agent's context: what ``context_survey`` answers (and ``mnemon chat``'s
``/context`` shows) — the frontier, used tokens against the lines, what a harness eviction would
cut, large blocks, pending marks and the sweep gate's figures, the blocks proposed for marking.

The figures come from ``weighing``, the module the loop weighs with, so the survey quotes what
the harness will do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...session.eviction import due_line, plan_eviction, pressure_line
from ...session.survey import survey as survey_table
from ...session.sweep import candidates
from ..weighing import economy, sweep_gate, sweep_horizon, used_tokens

if TYPE_CHECKING:
    from ..env import AgentEnv
    from ..node import AgentNode

__all__ = ["survey"]


def survey(env: "AgentEnv", node: "AgentNode") -> dict:
    """The survey of ``node``'s context, as the model reads it: the table every surface shows
    (``session/survey.py``, decision 0341) with the live agent's figures on top."""
    ctx = node.ctx
    s = env.settings_for(node)
    used = used_tokens(node)
    table = survey_table(ctx, node.tokens_per_byte)  # what the log says, as every surface shows it
    plan = plan_eviction(ctx, s.keep, economy(env, node, used))
    large = []
    for t in ctx.resident():
        if t.records is not None and t.id != ctx.in_hand:
            for b in ctx.blocks(t.id):
                if b.length >= 2048 and b.index not in t.swept:
                    large.append({"block": b.address, "kind": b.kind, "bytes": b.length})
    large.sort(key=lambda x: -x["bytes"])
    g = sweep_gate(env, node)
    horizon = sweep_horizon(env, node)
    return {
        "context_window": s.context_window,
        "used_tokens": used,
        "eviction_at": round(due_line(s.context_window)) if s.context_window else None,
        "pressure_at": round(pressure_line(s.context_window)) if s.context_window else None,
        "history_bytes": table["history_bytes"],
        "frontier": table["frontier"],
        "plan": ({"span": list(plan.span), "bytes_out": plan.bytes_out,
                  "keep": (plan.figures.keep if plan.figures else
                           round(plan.bytes_kept / max(1, ctx.history_bytes()), 4))}
                 if plan else None),
        "large_blocks": large[:20],
        "marks": table["marks"],
        "sweep_gate": {**g.as_dict(), "horizon_requests": round(horizon, 1),
                       "would_sweep": g.pays(horizon)},
        "candidates": [c.as_dict() for c in candidates(ctx)],
    }
