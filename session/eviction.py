"""Eviction weighing and planning: pure functions of numbers and the frontier.

The trigger is weighed at every turn boundary; the plan is one prefix span of the frontier that
leaves at least the keep budget; the pressure latch fires one reminder per excursion.
"""

from __future__ import annotations

from dataclasses import dataclass

from .constants import EVICT_THRESHOLD_BYTES, KEEP, RESERVE_FLOOR_TOKENS, RESERVE_SHARE
from .context import Context, ResidueEntry, Turn, newest_labels
from .records import Evicted, Residue, encode


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

    @property
    def first(self) -> int:
        return self.span[0]


def item_span(item: Turn | ResidueEntry) -> tuple[int, int]:
    return (item.id, item.id) if isinstance(item, Turn) else item.span


def item_bytes(ctx: Context, item: Turn | ResidueEntry) -> int:
    from .render import residue_message

    return item.bytes if isinstance(item, Turn) else len(residue_message(ctx, item).encode())


def plan_eviction(ctx: Context, keep: float = KEEP) -> Plan | None:
    """One prefix span of the frontier, leaving at least ``keep`` of the history bytes.

    Walk back from the newest item spending the keep budget; the first item that does not fit
    ends the cut (it is the newest item cut). The newest item (the turn in hand) is never in a
    plan; a plan that takes no resident turn is no plan, and neither is one whose residue message
    would weigh as much as what it takes out (docs/decisions/0100-plan-net-gain.md).
    """
    frontier = ctx.frontier()
    if len(frontier) < 2:
        return None
    sizes = [item_bytes(ctx, it) for it in frontier]
    total = sum(sizes)
    budget = keep * total
    spent = 0
    cut = len(frontier) - 1  # index of the first kept item
    spent += sizes[cut]
    while cut > 0 and spent + sizes[cut - 1] <= budget:
        cut -= 1
        spent += sizes[cut]
    if cut == 0:
        return None
    taken = frontier[:cut]
    if not any(isinstance(it, Turn) for it in taken):
        return None
    span = (item_span(taken[0])[0], item_span(taken[-1])[1])
    if ctx.in_hand is not None and span[0] <= ctx.in_hand <= span[1]:
        return None
    # what the edit adds: the residue message, and the Evicted line the turn in hand grows by
    added = residue_bytes(ctx, span, taken, "harness", None) + len(
        encode(Evicted(residue=Residue(span=span, note=None, by="harness"))))
    if total - spent <= added:
        return None
    return Plan(span, total - spent, spent)


def residue_bytes(ctx: Context, span: tuple[int, int], items: list, by: str,
                  note: str | None) -> int:
    """The length of the residue message an eviction of these frontier items would leave."""
    from .render import residue_message

    weight = sum(it.bytes if isinstance(it, Turn) else it.weight for it in items)
    entry = ResidueEntry(span, note, by, weight, labels=newest_labels(items))
    return len(residue_message(ctx, entry).encode("utf-8"))


class PressureLatch:
    """Edge-triggered: fires once per excursion above the pressure line, re-armed below it."""

    def __init__(self) -> None:
        self.armed = True

    def update(self, used_tokens: int, window: int | None, history_bytes: int = 0) -> bool:
        if window is None:
            above = history_bytes >= EVICT_THRESHOLD_BYTES / 2
        else:
            above = used_tokens >= pressure_line(window)
        if above and self.armed:
            self.armed = False
            return True
        if not above:
            self.armed = True
        return False


def pressure_reminder(ctx: Context, used_tokens: int, window: int | None, keep: float = KEEP) -> str:
    """The Steering text: what the plan would cut, that it stays readable, how to leave a note."""
    plan = plan_eviction(ctx, keep)
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
