"""Eviction weighing and planning: pure functions of numbers and the frontier.

The trigger is weighed at every turn boundary; the plan is one prefix span of the frontier that
leaves at least the keep budget; the pressure latch fires one reminder per excursion.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .constants import EVICT_THRESHOLD_BYTES, KEEP, RESERVE_FLOOR_TOKENS, RESERVE_SHARE
from .context import Context
from .keep import REREAD_BASE, REREAD_REFERRED, Cut, Economy, choose
from .records import (AssistantMessage, Evicted, PlanFigures, Residue, Text, ToolUse, UserPrompt,
                      compact, encode)
from .render import residue_message
from .sweep import call_target
from .turn import LABELS_LISTED, ResidueEntry, Turn, newest_labels

AUTO = "auto"  # the keep setting that lets the plan choose from the cache arithmetic
# what ``Evicted.plan`` adds to the Evicted line at most (figures as large as they come)
PLAN_LINE_BYTES = len(b',"plan":') + len(encode(PlanFigures(
    keep=0.12345, kept_tokens=10**8, verbatim_tokens=10**8, floor_tokens=10**8,
    ceiling_keep=0.12345, requests=1000.5, cost=10**8 + 0.5, ceiling_cost=10**8 + 0.5,
    candidates=10**6)))


def reserve(window: int) -> float:
    """max(15 % of the window, min(16 384 tokens, half the window))."""
    return max(RESERVE_SHARE * window, min(RESERVE_FLOOR_TOKENS, window / 2))


def due_line(window: int) -> float:
    return window - reserve(window)


def pressure_line(window: int) -> float:
    due = due_line(window)
    return max(due - reserve(window), due / 2)


def eviction_due(used_tokens: int, window: int | None, history_bytes: int) -> bool:
    """Used input tokens reach window − reserve; with no known window, history ≥ 500 KiB."""
    if window is None:
        return history_bytes >= EVICT_THRESHOLD_BYTES
    return used_tokens >= due_line(window)


@dataclass(frozen=True)
class Plan:
    span: tuple[int, int]
    bytes_out: int  # frontier bytes the cut takes
    bytes_kept: int
    figures: PlanFigures | None = None  # the cost-aware choice, when ``keep`` is "auto"
    added_bytes: int = 0  # what the cut writes: its residue message and its Evicted line

    @property
    def first(self) -> int:
        return self.span[0]


def item_span(item: Turn | ResidueEntry) -> tuple[int, int]:
    return (item.id, item.id) if isinstance(item, Turn) else item.span


def item_bytes(ctx: Context, item: Turn | ResidueEntry) -> int:
    return item.bytes if isinstance(item, Turn) else len(residue_message(ctx, item).encode())


def ceiling_share(keep: float | str) -> float:
    """The share of the history a cut may keep at most: KEEP itself, or KEEP under "auto"."""
    return KEEP if keep == AUTO else float(keep)


def plan_eviction(ctx: Context, keep: float | str = KEEP,
                  economy: Economy | None = None) -> Plan | None:
    """One prefix span of the frontier, leaving at most ``keep`` of the history bytes.

    Walk back from the newest item spending the keep budget; the first item that does not fit
    ends the cut (it is the newest item cut). The newest item (the turn in hand) is never in a
    plan; a plan that takes no resident turn is no plan, and neither is one whose residue message
    would weigh as much as what it takes out (docs/decisions/0100-plan-net-gain.md).

    With ``keep = "auto"`` and an ``economy``, that cut is the ceiling: every later frontier
    boundary is a candidate too, and the cheapest that keeps the verbatim floor wins
    (``session.keep``, decision 0220). Without an economy "auto" plans at the ceiling.
    """
    frontier = ctx.frontier()
    if len(frontier) < 2:
        return None
    sizes = [item_bytes(ctx, it) for it in frontier]
    total = sum(sizes)
    budget = ceiling_share(keep) * total
    spent = 0
    cut = len(frontier) - 1  # index of the first kept item
    spent += sizes[cut]
    while cut > 0 and spent + sizes[cut - 1] <= budget:
        cut -= 1
        spent += sizes[cut]
    sums = _Sums(frontier, sizes)
    kept, verbatim = sums.kept, sums.verbatim
    first = _valid_cut(ctx, frontier, sums, cut)
    if first is None:
        return None
    bare = Plan(first[0], total - spent, spent,
                 added_bytes=_added(first[0], first[1].message_bytes, 0))
    if keep != AUTO or economy is None:
        return bare
    # the figures lengthen the Evicted line: a ceiling that cannot carry them is planned bare
    ceiling = _valid_cut(ctx, frontier, sums, cut, PLAN_LINE_BYTES)
    if ceiling is None:
        return bare
    # candidates from the ceiling on, until the first that keeps less than the floor
    floor = min(economy.floor_tokens, verbatim[cut] * economy.tokens_per_byte)
    cuts = [ceiling[1]]
    for c in range(cut + 1, len(frontier)):
        found = _valid_cut(ctx, frontier, sums, c, PLAN_LINE_BYTES)
        if found is not None:
            cuts.append(found[1])
            if verbatim[c] * economy.tokens_per_byte < floor:
                break
    cuts = _with_reread_chances(ctx, frontier, sizes, cuts)
    best, figures = choose(economy, cuts, total)
    span = (item_span(frontier[0])[0], item_span(frontier[best.index - 1])[1])
    return Plan(span, total - kept[best.index], kept[best.index], figures,
                _added(span, best.message_bytes, PLAN_LINE_BYTES))


class _Sums:
    """Running sums over the frontier, so that weighing every cut stays linear: from each index
    on, the bytes and the turns' bytes; before it, the weight a residue would name."""

    def __init__(self, frontier: list, sizes: list[int]):
        n = len(sizes)
        self.kept = [0] * (n + 1)
        self.verbatim = [0] * (n + 1)
        for i in range(n - 1, -1, -1):
            self.kept[i] = self.kept[i + 1] + sizes[i]
            turn = isinstance(frontier[i], Turn)
            self.verbatim[i] = self.verbatim[i + 1] + (sizes[i] if turn else 0)
        self.weight = [0] * (n + 1)
        self.turns = [0] * (n + 1)
        for i, it in enumerate(frontier):
            turn = isinstance(it, Turn)
            self.weight[i + 1] = self.weight[i] + (it.bytes if turn else it.weight)
            self.turns[i + 1] = self.turns[i] + turn


def _valid_cut(ctx: Context, frontier: list, sums: _Sums, cut: int,
               figures_bytes: int = 0) -> tuple[tuple[int, int], Cut] | None:
    """The span taking ``frontier[:cut]`` and its candidate, or None when that is no plan
    (``figures_bytes``: what the recorded figures add to the Evicted line)."""
    if cut <= 0 or cut >= len(frontier) or sums.turns[cut] == 0:
        return None
    span = (item_span(frontier[0])[0], item_span(frontier[cut - 1])[1])
    if ctx.in_hand is not None and span[0] <= ctx.in_hand <= span[1]:
        return None
    # what the edit adds: the residue message, and the Evicted line the turn in hand grows by
    labels = newest_labels(frontier[max(0, cut - 16):cut])  # the newest few items name them
    if len(labels) < LABELS_LISTED and cut > 16:
        labels = newest_labels(frontier[:cut])
    entry = ResidueEntry(span, None, "harness", sums.weight[cut], labels=labels)
    message = len(residue_message(ctx, entry).encode("utf-8"))
    if sums.kept[0] - sums.kept[cut] <= _added(span, message, figures_bytes):
        return None
    return span, Cut(cut, sums.kept[cut], sums.verbatim[cut], message)


def _added(span: tuple[int, int], message_bytes: int, figures_bytes: int) -> int:
    """What a cut writes into the history: its residue message, and the Evicted line (with its
    figures) that the turn in hand grows by."""
    return message_bytes + figures_bytes + len(
        encode(Evicted(residue=Residue(span=span, note=None, by="harness"))))


def _with_reread_chances(ctx: Context, frontier: list, sizes: list[int],
                         cuts: list[Cut]) -> list[Cut]:
    """Each candidate with the chances of read-back of the turns it takes beyond the ceiling cut:
    a turn whose file a later call or message names again is likely to be read back (decision
    0221); Σ p and Σ p·bytes are all the arithmetic needs."""
    lo = cuts[0].index
    hi = cuts[-1].index
    mentions = [_mentions(ctx, it) for it in frontier]
    starts = [0] * (len(frontier) + 1)  # where each item's mentions start in the joined text
    for i, m in enumerate(mentions):
        starts[i + 1] = starts[i] + len(m) + 1
    joined = "\n".join(mentions)
    p_sum = [0.0] * (hi - lo + 1)
    pb_sum = [0.0] * (hi - lo + 1)
    for i in range(lo, hi):
        p = 0.0
        item = frontier[i]
        if isinstance(item, Turn):
            after = starts[i + 1]
            referred = any(joined.find(path, after) != -1 for path in _read_paths(ctx, item))
            p = REREAD_REFERRED if referred else REREAD_BASE
        p_sum[i - lo + 1] = p_sum[i - lo] + p
        pb_sum[i - lo + 1] = pb_sum[i - lo] + p * sizes[i]
    return [replace(cut, reread_p=p_sum[cut.index - lo], reread_bytes=pb_sum[cut.index - lo])
            for cut in cuts]


def _read_paths(ctx: Context, turn: Turn) -> list[str]:
    msg = turn.records[0] if turn.records else None
    if not isinstance(msg, AssistantMessage):
        return []
    out = []
    for b in msg.blocks:
        if isinstance(b, ToolUse):
            kind, target = call_target(b)
            if kind == "read" and target:
                out.append(target)
    return out


def _mentions(ctx: Context, item: Turn | ResidueEntry) -> str:
    """What a turn names: its calls' inputs and its text (not tool results, which name much)."""
    if not isinstance(item, Turn) or not item.records:
        return ""
    msg = item.records[0]
    if isinstance(msg, UserPrompt):
        return msg.text
    if not isinstance(msg, AssistantMessage):
        return ""
    parts = []
    for b in msg.blocks:
        if isinstance(b, ToolUse):
            parts.append(compact(b.input).decode("utf-8", "replace"))
        elif isinstance(b, Text):
            parts.append(b.text)
    return "\n".join(parts)


def residue_bytes(ctx: Context, span: tuple[int, int], items: list, by: str,
                  note: str | None) -> int:
    """The length of the residue message an eviction of these frontier items would leave."""
    weight = sum(it.bytes if isinstance(it, Turn) else it.weight for it in items)
    entry = ResidueEntry(span, note, by, weight, labels=newest_labels(items))
    return len(residue_message(ctx, entry).encode("utf-8"))


HOLD_REQUESTS = 3
"""After an eviction that left the context above the eviction line (a cut that could not reach
its target), the next waits this many requests, unless the window would overflow first
(decision 0268): evicting again at once frees little and rewrites the cache again."""

REMIND_REQUESTS = 8
"""The pressure reminder comes when the eviction is this many requests away at the measured
growth (decision 0268), not at a fixed share of the window: a reminder sent where nothing will
be evicted is paid on every later request."""

REMINDER_TOKENS = 150
"""What the reminder itself adds to every later request (its text, about 600 bytes): counted
when weighing whether the eviction is near."""


def held_off(used_tokens: int, window: int | None, growth_tokens: float | None,
             since_short: int | None) -> bool:
    """Whether a due eviction waits: a cut that could not reach its target came fewer than
    ``HOLD_REQUESTS`` requests ago (``since_short``), and the next request still fits."""
    if since_short is None or since_short >= HOLD_REQUESTS:
        return False
    return not overflow_near(used_tokens, window, growth_tokens)


def short_of_target(used_tokens: int, window: int | None, history_bytes: int) -> bool:
    """Whether the context an eviction left still stands at or above the eviction line."""
    return eviction_due(used_tokens, window, history_bytes)


def falls_short(plan: Plan, used_tokens: int, history_bytes: int, tokens_per_byte: float,
                window: int | None) -> bool:
    """Whether ``plan`` would leave the context at or above the eviction line (what it keeps,
    what the cut writes — its residue message and Evicted line — and what every request carries
    besides the history): usually the turn in hand is too large to leave yet, and the turn
    after it can take it."""
    fixed = max(0.0, used_tokens - history_bytes * tokens_per_byte)
    after = plan.bytes_kept + plan.added_bytes
    return short_of_target(int(fixed + after * tokens_per_byte), window, after)


def overflow_near(used_tokens: int, window: int | None, growth_tokens: float | None) -> bool:
    """Whether the next request would not fit the window (used + one request's growth)."""
    return window is not None and used_tokens + max(0.0, growth_tokens or 0.0) >= window


def remind_line(window: int, growth_tokens: float | None) -> float:
    """Used tokens from which the reminder is due: ``REMIND_REQUESTS`` requests of growth (and
    the reminder's own tokens) before the eviction line, never before ``pressure_line``."""
    line = pressure_line(window)
    if growth_tokens and growth_tokens > 0:
        line = max(line, due_line(window) - REMIND_REQUESTS * growth_tokens - REMINDER_TOKENS)
    return line


class PressureLatch:
    """Edge-triggered: fires once per excursion above the reminder line, re-armed below it."""

    def __init__(self) -> None:
        self.armed = True

    def update(self, used_tokens: int, window: int | None, history_bytes: int = 0,
               growth_tokens: float | None = None) -> bool:
        if window is None:
            above = history_bytes >= EVICT_THRESHOLD_BYTES / 2
        else:
            above = used_tokens >= remind_line(window, growth_tokens)
        if above and self.armed:
            self.armed = False
            return True
        if not above:
            self.armed = True
        return False


def pressure_reminder(ctx: Context, used_tokens: int, window: int | None,
                      keep: float | str = KEEP, economy: Economy | None = None) -> str:
    """The Steering text: what the plan would cut, that it stays readable, how to leave a note."""
    plan = plan_eviction(ctx, keep, economy)
    where = f"of a {window}-token context window" if window else "of history"
    if plan is None:
        cut = "no cut is possible yet (the newest turn holds most of the context)"
    else:
        cut = (f"the harness would evict turns {plan.span[0]}-{plan.span[1]} "
               f"({plan.bytes_out} bytes) when the context reaches the eviction line")
    return (f"[Context pressure: about {used_tokens} tokens used {where}; {cut}. Evicted turns "
            "stay readable with transcript_index, transcript_read and transcript_grep. To choose "
            "what leaves and leave a one-line note for yourself, call "
            "context_evict(from, to, note) now.]")
