"""How much an eviction keeps, chosen from the cache arithmetic (``keep = "auto"``).

The sweep gate's reasoning (decisions 0100, 0202, 0205), applied to the cut. A cut that keeps K
tokens costs, over the requests until the next eviction (n = (due − fixed − K) ÷ growth):

- once, the kept suffix written again after the new residue: w·K;
- on every request, the context read from the cache: r·(fixed + K + growth·(n − 1)/2);
- for each turn the cut takes that the ceiling cut would have kept, the chance p it is read back
  through the door times what that costs: one more request (r·context + the call's output) and
  the turn written and read again (w·b + r·b·n/2).

Divided by n this is a cost per request, so a cut that lasts longer is credited for it. Keeping
more always costs more here unless the turns it keeps are likely to be read again; so the plan
keeps the least that holds the verbatim floor, unless a turn still referred to is worth keeping.
Every figure is a plain number from the caller: ``session`` knows no price table.
"""

from __future__ import annotations

from dataclasses import dataclass

from .records import PlanFigures

REREAD_REFERRED = 0.5  # p for a turn whose file is named again by a later call (decision 0221)
REREAD_BASE = 0.02  # p for any other turn
CALL_OUTPUT_TOKENS = 60  # the output of one transcript_read call
MAX_REQUESTS = 1000.0  # a cycle is never weighed past this many requests (a guard: no growth)


@dataclass(frozen=True)
class Economy:
    """The figures a cost-aware plan weighs, in input-token equivalents, given by its caller."""

    tokens_per_byte: float
    write_mult: float  # cache write ÷ input price
    read_mult: float  # cache read ÷ input price
    output_mult: float  # output ÷ input price
    growth_tokens: float  # tokens the context grows per request (the growth meter)
    due_tokens: float  # the eviction line, in used tokens
    fixed_tokens: float  # what every request carries besides the history (system, tools)
    floor_tokens: float  # the verbatim floor: tokens of recorded turns a cut must keep


@dataclass(frozen=True)
class Cut:
    """One candidate: the frontier index of the first kept item and what it keeps."""

    index: int
    kept_bytes: int  # frontier bytes kept
    verbatim_bytes: int  # bytes of recorded turns kept
    message_bytes: int = 0  # the residue message the cut leaves, written and read with the rest
    reread_p: float = 0.0  # Σ p over the turns taken beyond the ceiling cut
    reread_bytes: float = 0.0  # Σ p·bytes over the same turns


def requests_left(e: Economy, kept_tokens: float) -> float:
    """Requests until the next eviction after a cut that keeps ``kept_tokens``: at least 1, at
    most MAX_REQUESTS; 1 when the context is not growing (nothing to amortise over)."""
    room = e.due_tokens - e.fixed_tokens - kept_tokens
    if e.growth_tokens <= 0:
        return 1.0
    return min(MAX_REQUESTS, max(1.0, room / e.growth_tokens))


def cost_per_request(e: Economy, cut: Cut) -> tuple[float, float]:
    """(cost per request in input-token equivalents, requests it lasts) for one cut."""
    k = (cut.kept_bytes + cut.message_bytes) * e.tokens_per_byte
    n = requests_left(e, k)
    once = e.write_mult * k
    context = e.fixed_tokens + k
    reads = e.read_mult * (context + e.growth_tokens * (n - 1) / 2)
    reread = (cut.reread_p * (e.read_mult * context + e.output_mult * CALL_OUTPUT_TOKENS)
              + cut.reread_bytes * e.tokens_per_byte * (e.write_mult + e.read_mult * n / 2))
    return (once + reread) / n + reads, n


def eligible(e: Economy, cuts: list[Cut]) -> tuple[list[Cut], float]:
    """The cuts that keep the verbatim floor, and the floor applied.

    The floor is capped at what the ceiling cut (``cuts[0]``) keeps, so the ceiling is always
    eligible. Cuts come in turn-sized steps: where one step drops more than the floor by itself
    (a turn larger than the floor, say a long tool output), the cut just past it is eligible too
    — the floor protects the recent work, not one bulk result (decision 0220). Keeping such a
    turn to hold the floor was measured and refused (decision 0268: a 32 000-token result kept
    at a 64k window cost 1.095× compaction on ``chain0``).
    """
    tpb = e.tokens_per_byte
    floor = min(e.floor_tokens, cuts[0].verbatim_bytes * tpb)
    out = [cuts[0]]
    for prev, cut in zip(cuts, cuts[1:]):
        verbatim = cut.verbatim_bytes * tpb
        if verbatim >= floor:
            out.append(cut)
            continue
        if (prev.verbatim_bytes - cut.verbatim_bytes) * tpb > floor:
            out.append(cut)
        break
    return out, floor


def choose(e: Economy, cuts: list[Cut], total_bytes: int) -> tuple[Cut, PlanFigures]:
    """The cheapest eligible cut (``eligible``); ``cuts[0]`` is the ceiling cut, the others keep
    less and less. The choice never costs more, by this arithmetic, than the ceiling. Ties go to
    the cut that keeps more.
    """
    ceiling = cuts[0]
    allowed, floor = eligible(e, cuts)
    best, best_cost, best_n = ceiling, *cost_per_request(e, ceiling)
    ceiling_cost = best_cost
    for cut in allowed[1:]:
        c, n = cost_per_request(e, cut)
        if c < best_cost:
            best, best_cost, best_n = cut, c, n
    weighed = len(allowed)
    tpb = e.tokens_per_byte
    figures = PlanFigures(
        keep=round(best.kept_bytes / total_bytes, 4) if total_bytes else 0.0,
        kept_tokens=round((best.kept_bytes + best.message_bytes) * tpb),
        verbatim_tokens=round(best.verbatim_bytes * tpb),
        floor_tokens=round(floor),
        ceiling_keep=round(ceiling.kept_bytes / total_bytes, 4) if total_bytes else 0.0,
        requests=round(best_n, 1), cost=round(best_cost, 1), ceiling_cost=round(ceiling_cost, 1),
        candidates=weighed)
    return best, figures
