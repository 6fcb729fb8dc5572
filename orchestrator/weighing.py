"""Weighing an agent's context: the harness eviction, the sweep gate, the pressure reminder, and
the economy (prices, cache multipliers, growth) they are weighed with.

The loop calls ``weigh`` at every turn boundary and ``pressure`` at every tool boundary (through
``loop.HarnessPolicy``); the tools read the same figures (``context_survey``, ``context_mark``);
replay's ``evict`` and ``sweep`` strategies run exactly these functions. They are one module
because they are one policy: the sweep gate's horizon is cut by the eviction line, an eviction
sweeps pending marks first, the pressure reminder quotes the plan the eviction would make, and
all of them price an agent the same way — with that agent's own settings (``env.settings_for``;
decision 0274), never the run's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog

from ..providers.prices import NO_WRITE_SURCHARGE, price_for
from ..providers.select import is_gemini
from ..session.constants import EVICT_THRESHOLD_BYTES, NOTE_MAX_BYTES
from ..session.eviction import (AUTO, Plan, due_line, eviction_due, falls_short, held_off,
                                 overflow_near, plan_eviction, pressure_reminder, short_of_target)
from ..session.keep import Economy
from ..session.records import Evicted, Residue, Steering, Swept
from ..session.revisit import REVISIT_MIN_REQUESTS, may_pay, weigh_revisit
from ..session.sweep import (READ_MULT, WRITE_MULT, Gate, candidates, effective_horizon,
                             file_pointers, gate, pointer_note)

if TYPE_CHECKING:
    from .env import AgentEnv
    from .node import AgentNode
    from .settings import Settings

log = structlog.get_logger("mnemon.agent")

DEFAULT_TOKENS_PER_BYTE = 0.25  # before any response has measured it: 1 token per 4 bytes


def used_tokens(node: "AgentNode") -> int:
    """The last response's input usage plus what was added since, at the measured ratio."""
    return node.ctx.used_tokens(node.tokens_per_byte)


def tokens_per_byte(node: "AgentNode") -> float:
    return node.tokens_per_byte or DEFAULT_TOKENS_PER_BYTE


def priced_model(env: "AgentEnv", node: "AgentNode | None",
                 response_model: str | None = None) -> str | None:
    """The model an agent's usage is priced (and recorded) as: the same for the live total, for
    the economy and for ``mnemon cost`` reading the log afterwards."""
    return priced_as(env.settings_for(node), response_model)


def priced_as(s: Settings, response_model: str | None = None) -> str | None:
    """``priced_model`` from the agent's settings already in hand (the loop resolves them once
    per agent, not once per request)."""
    return s.price_model or s.model or response_model


def cache_mults(env: "AgentEnv", node: "AgentNode | None") -> tuple[float, float]:
    """The cache write and read multipliers (÷ the input price) an agent's requests pay: its
    own cache TTL's write price; no write surcharge on OpenAI."""
    name = (env.provider_name_for(node) or "").lower()
    w = 1.0 if name in NO_WRITE_SURCHARGE or (name == "vertex" and is_gemini(
        env.settings_for(node).model)) else WRITE_MULT.get(env.settings_for(node).cache_ttl, 1.25)
    return w, READ_MULT


def economy(env: "AgentEnv", node: "AgentNode", used: int) -> Economy | None:
    """The figures the plan weighs under ``keep = "auto"``: cache multipliers and the output
    price from the provider and the price table, growth from the growth meter (or the mean growth
    so far), the eviction line, and the verbatim floor (decision 0220). None for a fixed keep."""
    s = env.settings_for(node)
    if s.keep != AUTO:
        return None
    ctx = node.ctx
    tpb = tokens_per_byte(node)
    w, r = cache_mults(env, node)
    price = price_for(priced_model(env, node))
    fixed = max(0.0, used - ctx.history_bytes() * tpb)
    due = (due_line(s.context_window) if s.context_window else
           EVICT_THRESHOLD_BYTES * tpb + fixed)
    growth = node.growth.per_request or used / max(1, node.turns_taken)
    return Economy(tokens_per_byte=tpb, write_mult=w, read_mult=r,
                   output_mult=price.output / price.input if price.input else 5.0,
                   growth_tokens=growth, due_tokens=due, fixed_tokens=fixed,
                   floor_tokens=s.keep_floor_tokens)


# --------------------------------------------------------------------------- the sweep gate


def sweep_gate(env: "AgentEnv", node: "AgentNode") -> Gate:
    """The gate for the agent's pending marks, at its own multipliers and measured ratio."""
    w, r = cache_mults(env, node)
    return gate(node.ctx, tokens_per_byte(node), write_mult=w, read_mult=r)


def sweep_horizon(env: "AgentEnv", node: "AgentNode") -> float:
    """The configured horizon, cut to the requests left before the next eviction."""
    s = env.settings_for(node)
    due = due_line(s.context_window) if s.context_window else None
    return effective_horizon(s.sweep_horizon, used_tokens(node), due, node.growth.per_request)


def sweep_pending(node: "AgentNode") -> bool:
    """Apply every pending mark in one Swept record."""
    ctx = node.ctx
    if not ctx.marks:
        return False
    before = ctx.history_bytes()
    node.log.append(Swept(blocks=sorted(ctx.marks)))
    node.sweeps += 1
    node.edited = True
    node.on_edit("sweep", before)
    log.info("sweep", blocks=len(ctx.marks))
    return True


def sweep_if_pays(env: "AgentEnv", node: "AgentNode") -> bool:
    if not node.ctx.marks:
        return False
    if sweep_gate(env, node).pays(sweep_horizon(env, node)):
        return sweep_pending(node)
    return False


def candidates_line(node: "AgentNode") -> str:
    """The blocks proposed for marking, as the pressure reminder lists them."""
    c = candidates(node.ctx, limit=5)
    if not c:
        return ""
    listed = ", ".join(f"{x.block[0]}.{x.block[1]} ({x.bytes} bytes: {x.reason})" for x in c)
    return ("Blocks you could mark with context_mark(block, replacement): " + listed + ".")


# --------------------------------------------------------------------------- the boundaries


def weigh(env: "AgentEnv", node: "AgentNode") -> None:
    """At a turn boundary: harness eviction when due (no provider call), pending marks swept
    first since that region is rewritten anyway; otherwise a sweep when the gate says it pays."""
    ctx = node.ctx
    s = env.settings_for(node)
    used = used_tokens(node)
    since = None if node.short_at is None else node.turns_taken - node.short_at
    if eviction_due(used, s.context_window, ctx.history_bytes()) and \
            not held_off(used, s.context_window, node.growth.per_request, since):
        plan = plan_eviction(ctx, s.keep, economy(env, node, used))
        if plan is not None and falls_short(plan, used, ctx.history_bytes(), tokens_per_byte(node),
                                            s.context_window) and \
                not overflow_near(used, s.context_window, node.growth.per_request):
            plan = None  # it could not make room yet: the next turn can (decision 0268)
        if plan is not None:
            cut(env, node, plan)
            # a cut that left the context above the line holds the next one off (decision 0268)
            short = short_of_target(used_tokens(node), s.context_window, ctx.history_bytes())
            node.short_at = node.turns_taken if short else None
            log.info("harness eviction", span=list(plan.span), bytes_out=plan.bytes_out,
                     used_tokens=used, keep=plan.figures.keep if plan.figures else s.keep,
                     short=short, since_short=since, growth=node.growth.per_request,
                     turn=node.turns_taken)
            return
    if revisit(env, node, used):
        return
    if ctx.marks:
        sweep_if_pays(env, node)


def cut(env: "AgentEnv", node: "AgentNode", plan: Plan) -> None:
    """Make a harness cut: pending marks swept first (that region is rewritten anyway), the
    Evicted record with the plan's figures, and where the cut stood for a later revisit."""
    sweep_pending(node)
    before = node.ctx.history_bytes()
    # the file reads it takes keep their recovery pointers in the residue (docs/workspace.md)
    note = (pointer_note(file_pointers(node.ctx, plan.span), NOTE_MAX_BYTES)
            if node.workspace is not None else None)
    node.log.append(Evicted(residue=Residue(span=plan.span, note=note, by="harness"),
                            plan=plan.figures))
    node.evictions += 1
    node.edited = True
    env.on_edit(node, "evict", before)
    node.cut_at, node.cut_reach = node.turns_taken, node.ctx.reach


def revisit(env: "AgentEnv", node: "AgentNode", used: int) -> bool:
    """Between evictions: cut again what the last harness cut kept, when the tail estimated from
    the session so far makes that cheaper than carrying it to the eviction line
    (``session.revisit``, decision 0303). Only under ``keep = "auto"``, only items already in
    the frontier at that cut, never within ``REVISIT_MIN_REQUESTS`` of it."""
    if node.cut_at is None:
        return False
    since = node.turns_taken - node.cut_at
    if since < REVISIT_MIN_REQUESTS:  # before the economy is even read
        return False
    e = economy(env, node, used)
    if e is None or not may_pay(e, used, since, node.turns_taken):
        return False
    plan = plan_eviction(node.ctx, AUTO, e)
    if plan is None or plan.figures is None or plan.span[1] > node.cut_reach:
        return False
    weighed = weigh_revisit(e, used, plan.figures.kept_tokens, plan.figures.verbatim_tokens, since,
                            node.turns_taken)
    if not weighed.pays:
        return False
    reach = node.cut_reach
    cut(env, node, plan)
    log.info("harness revisit", span=list(plan.span), bytes_out=plan.bytes_out, used_tokens=used,
             taken=round(weighed.taken_tokens), gain=round(weighed.gain), cost=round(weighed.cost),
             verbatim=plan.figures.verbatim_tokens, floor=e.floor_tokens, last_cut_reach=reach,
             since_cut=since, turn=node.turns_taken)
    return True


def pressure(env: "AgentEnv", node: "AgentNode") -> None:
    """At a tool boundary: one reminder per excursion above the pressure line."""
    s = env.settings_for(node)
    used = used_tokens(node)
    ctx = node.ctx
    if node.latch.update(used, s.context_window, ctx.history_bytes(), node.growth.per_request):
        text = pressure_reminder(ctx, used, s.context_window, s.keep, economy(env, node, used))
        extra = candidates_line(node)
        node.log.append(Steering(text=text + (" " + extra if extra else ""), by="harness"))
