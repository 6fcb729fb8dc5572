"""What a run cost: tokens, cache reads and writes, and price, per agent and in total.

Read-only and free of printing; ``mnemon cost`` (``orchestrator/commands/cost.py``) is the front.

Per agent, from its own ``record.jsonl`` only (an inherited turn was paid for by the agent that
recorded it, so nothing is counted twice):

* the ``usage`` of every ``ProviderCall`` that carries one — each successful attempt, including
  calls that open no turn (a summarisation request, a peer's extra call);
* if the log has no ``ProviderCall`` with a usage (a hand-written or foreign log), the ``usage``
  of its ``AssistantMessage`` records instead.

Each usage is priced with ``providers.prices.cost_usd`` on the record's own model
(``ProviderCall.model`` / ``AssistantMessage.model``, else ``SessionStarted.model``), unless a
``price_as`` model overrides them all. Cache writes are priced at the 5-minute or 1-hour TTL.
A call the batch engine made is recorded under a ``…@batch`` model and priced at the batch price
(``price_as`` too keeps the discount of such a call); its cost is also summed apart, as
``batch_cost_usd``, so that batch and live spend can be shown apart.

The reader decodes one line at a time into a lenient probe (only ``t``, ``usage`` and ``model``;
every other field is skipped), so it is fast on large logs and indifferent to record types it
does not price. A torn tail is not read, only reported; nothing is ever written.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgspec
from msgspec import Struct

from ..lineage.runroot import agent_source
from .caps import Caps
from ..lineage.view import agents_in
from ..providers.prices import BATCH_SUFFIX, batch_model, cost_usd, is_batch
from ..session.log import TornTail, find_torn_tail, iter_lines
from ..session.records import DECODE_ERRORS, Usage
from ..errors import UserError

__all__ = ["FIELDS", "NO_ROLE", "AgentCost", "CostError", "agent_cost", "by_role", "run_cost",
           "as_json", "total", "reports_reasoning", "splits"]

FIELDS = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens")
TTLS = ("5m", "1h")


class CostError(UserError):
    """A log that cannot be read for costing (a line that is not a JSON record), or bad input."""


class _Probe(Struct):
    """The fields of a record that pricing needs; everything else in the line is skipped."""

    t: str
    usage: Usage | None = None
    model: str | None = None
    role: str | None = None
    parent: str | None = None
    budget: Any = None
    provider: str | None = None


_probe = msgspec.json.Decoder(_Probe)


class AgentCost(Struct, kw_only=True):
    agent: str
    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    reasoning_tokens: int | None = None
    """Of ``output_tokens``, the reasoning a provider reported apart (the Responses API); None
    when no usage of the log reported any, and then left out of the machine shape."""
    counted: str = "none"
    """Which records were summed: ``provider_calls``, ``assistant_messages`` or ``none``."""
    records: int = 0
    """How many usages were summed."""
    torn: TornTail | None = None
    batch_cost_usd: float = 0.0
    """The part of ``cost_usd`` spent in batches (calls priced ``…@batch``)."""
    role: str | None = None
    """Its named role (``SessionStarted.role``; docs/roles.md), if any."""
    parent: str | None = None
    """Its parent (``SessionStarted.parent``): whose tree its spend counts in."""
    provider: str | None = None
    """The provider it called (``SessionStarted.provider``: ``anthropic``, ``bedrock``,
    ``vertex``, ``gemini``, ``azure-openai``…), shown beside its cost."""
    caps: dict[str, Any] | None = None
    """The caps its parent gave it (``SessionStarted.budget``; docs/orchestrator.md,
    "Delegation"): ``usd``, ``tokens``, ``max_turns``, each optional; None: not capped."""

    def as_json(self, reasoning: bool = False) -> dict:
        """The fixed row; ``reasoning_tokens`` after ``output_tokens`` when ``reasoning`` (some
        agent of the run reported reasoning tokens)."""
        row = {"agent": self.agent, **{f: getattr(self, f) for f in FIELDS}}
        if self.provider is not None:
            row["provider"] = self.provider
        if reasoning:
            row["reasoning_tokens"] = self.reasoning_tokens or 0
        row["cost_usd"] = round(self.cost_usd, 6)
        return row


class _Sum:
    __slots__ = ("usage", "cost", "n", "reasoning", "batch")

    def __init__(self) -> None:
        self.usage = Usage()
        self.cost = 0.0
        self.n = 0
        self.reasoning: int | None = None
        self.batch = 0.0

    def add(self, usage: Usage, model: str | None, ttl: str) -> None:
        self.usage = self.usage + usage
        if usage.reasoning_tokens is not msgspec.UNSET:
            self.reasoning = (self.reasoning or 0) + usage.reasoning
        cost = cost_usd(usage, model, ttl)
        self.cost += cost
        self.n += 1
        if is_batch(model):
            self.batch += cost


def agent_cost(path: Path, agent: str, *, display: str | None = None,
               price_as: str | None = None, ttl: str = "5m",
               damaged: list[str] | None = None) -> AgentCost:
    """The cost of one agent's log at ``path`` (only its complete lines are read).

    ``damaged``: a line that is not a record is named there (``path:line: …``) and the rest
    counted, instead of ``CostError`` — a job's re-run counts what a damaged log still shows
    was spent, and fails only that log's task (decision 0319)."""
    if ttl not in TTLS:
        raise CostError(f"the cache TTL is 5m or 1h, not {ttl!r}")
    shown = display or str(path)
    torn = find_torn_tail(path)
    calls, messages = _Sum(), _Sum()
    started_model: str | None = None
    role: str | None = None
    parent: str | None = None
    caps: dict[str, Any] | None = None
    provider: str | None = None
    for lineno, (off, line) in enumerate(iter_lines(path), 1):
        try:
            rec = _probe.decode(line)
        except DECODE_ERRORS as e:
            why = f"{shown}:{lineno}: not a record at offset {off} ({e})"
            if damaged is None:
                raise CostError(why) from None
            damaged.append(why)
            continue
        if rec.t == "SessionStarted":
            started_model, role, parent = rec.model, rec.role, rec.parent
            provider = rec.provider
            caps = Caps.from_record(rec.budget).record()
        elif rec.t == "ProviderCall" and rec.usage is not None:
            model = rec.model or started_model
            if price_as:  # the override's model, at the price of the call's kind
                base = price_as[:-len(BATCH_SUFFIX)] if is_batch(price_as) else price_as
                model = batch_model(base) if is_batch(model) else base
            calls.add(rec.usage, model, ttl)
        elif rec.t == "AssistantMessage" and rec.usage is not None:
            messages.add(rec.usage, price_as or rec.model or started_model, ttl)
    chosen, counted = ((calls, "provider_calls") if calls.n else
                       (messages, "assistant_messages") if messages.n else (calls, "none"))
    u = chosen.usage
    return AgentCost(agent=agent, input_tokens=u.input_tokens,
                     cache_read_tokens=u.cache_read_tokens,
                     cache_write_tokens=u.cache_write_tokens, output_tokens=u.output_tokens,
                     cost_usd=chosen.cost, reasoning_tokens=chosen.reasoning, counted=counted,
                     records=chosen.n, torn=torn, batch_cost_usd=chosen.batch, role=role,
                     parent=parent, caps=caps, provider=provider)


def _natural(agent: str) -> list:
    """a2 before a10."""
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", agent)]


def run_cost(path: Path, *, price_as: str | None = None, ttl: str = "5m",
             damaged: list[str] | None = None) -> list[AgentCost]:
    """Every agent of a run root (or the one agent an agent directory names), in id order.

    Raises ``lineage.runroot.RunRootError`` for a path that is neither, ``CostError`` for a log
    that cannot be read (unless ``damaged`` collects its lines: ``agent_cost``).
    """
    root, agents = agents_in(Path(path))
    out = []
    for agent in sorted(agents, key=_natural):
        src = agent_source(agent)
        out.append(agent_cost(root / src, agent, display=src, price_as=price_as, ttl=ttl,
                              damaged=damaged))
    return out


def reports_reasoning(rows: Iterable[AgentCost]) -> bool:
    """Whether any agent's provider reported reasoning tokens apart (the Responses API)."""
    return any(r.reasoning_tokens is not None for r in rows)


def total(rows: Iterable[AgentCost]) -> dict:
    rows = list(rows)
    t: dict = {f: sum(getattr(r, f) for r in rows) for f in FIELDS}
    if reports_reasoning(rows):
        t["reasoning_tokens"] = sum(r.reasoning_tokens or 0 for r in rows)
    t["cost_usd"] = round(sum(r.cost_usd for r in rows), 6)
    batch = sum(r.batch_cost_usd for r in rows)
    if batch:  # a run with batch spend: it and the live spend apart (optional fields)
        t["batch_cost_usd"] = round(batch, 6)
        t["live_cost_usd"] = round(sum(max(0.0, r.cost_usd - r.batch_cost_usd) for r in rows), 6)
    return t


NO_ROLE = "(no role)"


def by_role(rows: Iterable[AgentCost]) -> list[dict]:
    """``mnemon cost --by role``: one row per role — ``{"role", "agents", <FIELDS>,
    "cost_usd"}`` — summing its agents (a child started without a role is of its parent's);
    agents without one under ``(no role)``, last. The rows sum to ``total``."""
    groups: dict[str, list[AgentCost]] = {}
    for r in rows:
        groups.setdefault(r.role if r.role is not None else NO_ROLE, []).append(r)
    order = sorted(groups, key=lambda k: (k == NO_ROLE, k))
    return [{"role": k, "agents": len(groups[k]), **total(groups[k])} for k in order]


def splits(rows: Iterable[AgentCost]) -> dict[str, dict[str, Any]]:
    """The split of a run's budget (docs/orchestrator.md, "Delegation"): for each capped
    agent, its caps beside what its tree — it and every descendant, by the recorded parents —
    spent, in ``caps.status``'s shape (``usd`` and ``spent_usd``, ``tokens`` and
    ``spent_tokens``, ``max_turns``). Agents without a cap are not in it."""
    rows = list(rows)
    kids: dict[str, list[AgentCost]] = {}
    for r in rows:
        if r.parent is not None and r.parent != r.agent:
            kids.setdefault(r.parent, []).append(r)
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        if not r.caps:
            continue
        used, usd, todo, seen = 0, 0.0, [r], set()
        while todo:  # (a parent cycle in damaged logs is walked once)
            n = todo.pop()
            if n.agent in seen:
                continue
            seen.add(n.agent)
            used += sum(getattr(n, f) for f in FIELDS)
            usd += n.cost_usd
            todo.extend(kids.get(n.agent, ()))
        c = Caps.from_record(r.caps)
        split: dict[str, Any] = {}
        if c.usd is not None:
            split.update(usd=c.usd, spent_usd=round(usd, 6))
        if c.tokens is not None:
            split.update(tokens=c.tokens, spent_tokens=used)
        if c.turns is not None:
            split["max_turns"] = c.turns
        out[r.agent] = split
    return out


def as_json(rows: list[AgentCost]) -> dict:
    """The fixed machine shape: ``{"agents": [...], "total": {...}}``; each row and the total
    gain ``reasoning_tokens`` (already inside ``output_tokens``) when some provider of the run
    reported reasoning apart; a capped agent's row gains ``budget``, its caps beside its
    tree's spend (``splits``)."""
    reasoning = reports_reasoning(rows)
    split = splits(rows)
    out = []
    for r in rows:
        row = r.as_json(reasoning)
        if r.agent in split:
            row["budget"] = split[r.agent]
        out.append(row)
    return {"agents": out, "total": total(rows)}
