"""Context strategies for replay: ours (``evict``, ``sweep``) and the peers', modelled from their
documented behaviour. Each peer's edits are written with our own records (``Cleared`` then
prompts, or ``Marked`` + ``Swept``), so its run root verifies too.

Parameters and their sources (see docs/replay.md for the citations):

- ``compact`` (Claude Code auto-compact): triggers at window − 13 000 tokens; one summarisation
  request with the same system prompt (the cached prefix is read), a ~1 000-token instruction and
  a 2 000-token summary out; then the most recent single-file reads are re-injected — up to 5,
  each at most 5 000 tokens, in total at most half of what the trigger leaves.
- ``rollover`` (Codex CLI auto-compact): triggers at 90 % of the window; the compacted history is
  the recent user messages (at most 20 000 tokens) plus the summary.
- ``clear-tool-uses`` (Anthropic context editing, ``clear_tool_uses_20250919`` defaults): triggers
  at 100 000 input tokens (or window − 13 000 when that is lower); keeps the last 3 tool uses;
  older tool results are replaced by a placeholder. ``clear_at_least`` (``--clear-at-least``,
  the API's parameter of that name; none by default): a clear is made only when it takes at least
  that many tokens at once.
- ``anthropic-compaction`` (the Messages API's server-side compaction, ``compact_20260112``,
  beta ``compact-2026-01-12``): triggers when a request's input passes the trigger — 150 000
  tokens by default, at least 50 000 — and at a smaller window at window − 13 000 (the room the
  other Anthropic feature here keeps); where even the minimum does not fit the window, the
  strategy does not apply and the replay says so (``not_applicable``) instead of bending it.
  The summary is an extra sampling step of the same request over the whole conversation plus
  the documented default summarisation prompt (~100 tokens), billed in ``usage.iterations``:
  modelled as one ``summary`` call whose prefix is read from the cache as any request's is
  (the iteration's usage has cache-read and cache-write fields); the request then goes on from
  the summary alone, and so does every later one (everything before the compaction block is
  dropped).
- ``openai-compaction`` (the Responses API's ``context_management`` ``compaction`` with a
  ``compact_threshold``; the opaque encrypted compaction item): the same flow; the docs give
  no default threshold and no minimum, so the threshold is the same per window as Anthropic's
  and applies at every window. The item's size is not documented: ``summary_tokens``.
- ``none``: unbounded, for reference.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...providers.base import Request
from ...session.context import Context
from ...session.records import Cleared, Marked, Swept, UserPrompt
from ...session.sweep import call_target, candidates, default_replacement
from ..weighing import pressure, weigh
from .handle import Handle

COMPACT_BUFFER_TOKENS = 13_000
SUMMARY_TOKENS = 2_000
INSTRUCTION_TOKENS = 1_000
REINJECT_FILES = 5
REINJECT_FILE_TOKENS = 5_000
ROLLOVER_SHARE = 0.9
ROLLOVER_USER_TOKENS = 20_000
CLEAR_TRIGGER_TOKENS = 100_000
CLEAR_KEEP_TOOL_USES = 3
CLEAR_PLACEHOLDER = "[tool result cleared]"
SERVER_COMPACT_TRIGGER_TOKENS = 150_000  # compact_20260112's default trigger
SERVER_COMPACT_MIN_TRIGGER_TOKENS = 50_000  # and the least it accepts
SERVER_COMPACT_INSTRUCTION_TOKENS = 100  # its documented default prompt: ~90 words

STRATEGIES = ("evict", "sweep", "compact", "rollover", "clear-tool-uses",
              "anthropic-compaction", "openai-compaction", "none")
SERVER_COMPACTIONS = ("anthropic-compaction", "openai-compaction")


@dataclass
class Options:
    keep: float | str = "auto"
    summary_tokens: int = SUMMARY_TOKENS
    reinject_files: int = REINJECT_FILES
    reinject_file_tokens: int = REINJECT_FILE_TOKENS
    sweep_horizon: float = 10.0
    clear_at_least: int = 0


class Strategy:
    name = "none"

    def __init__(self, opts: Options):
        self.opts = opts

    async def before_request(self, d: "Handle") -> None:
        """At the turn boundary before a request: apply this strategy's edit, if due."""

    def after_tools(self, d: "Handle") -> None:
        """At a tool boundary."""

    def shape_request(self, d: "Handle", request: Request) -> Request:
        """The request as this strategy's peer would send it (ours: as the loop built it)."""
        return request

    def not_applicable(self, window: int | None) -> str | None:
        """Why this strategy cannot be configured at ``window`` (a provider's minimum that does
        not fit), or None: a replay reports the reason rather than run a bent version."""
        return None


class Evict(Strategy):
    """Ours, exactly as the live loop runs it: ``orchestrator.weighing.weigh`` at every turn
    boundary (a harness eviction by plan when due) and ``pressure`` at every tool boundary."""

    name = "evict"

    async def before_request(self, d: "Handle") -> None:
        weigh(d.env, d.node)

    def after_tools(self, d: "Handle") -> None:
        pressure(d.env, d.node)


class Sweep(Evict):
    """Ours with mark-and-sweep: the rule-proposed candidates are marked (the model's approval
    stood in for) with a deterministic replacement — first line, size, read-back address — and
    the loop's own weighing sweeps just before an eviction, or when the gate says it pays."""

    name = "sweep"

    async def before_request(self, d: "Handle") -> None:
        ctx = d.ctx
        for c in candidates(ctx, limit=50):
            if c.block not in ctx.marks:
                repl = default_replacement(ctx, c.block)
                if len(repl.encode()) < c.bytes:
                    d.append(Marked(block=c.block, replacement=repl))
        await super().before_request(d)


class _Summarising(Strategy):
    """Shared by the summarisers: one summarisation request, then a rebuilt context."""

    instruction_tokens = INSTRUCTION_TOKENS

    async def summarise(self, d: "Handle") -> None:
        before = d.ctx.history_bytes()
        await d.summary_request(self.instruction_tokens, self.opts.summary_tokens)
        kept = self.kept_material(d)
        d.left_bytes += before
        d.recoverable_bytes += sum(len(t.encode()) for t in kept)
        summary = _summary_text(self.opts.summary_tokens, d)
        d.append(Cleared())
        for text in self.layout(kept, summary):
            tid = d.ctx.next_id()
            d.append(UserPrompt(turn=tid, text=text))
            if text is summary:
                d.synthetic.add(tid)
        d.edit(self.name, before)

    def kept_material(self, d: "Handle") -> list[str]:
        return []

    def layout(self, kept: list[str], summary: str) -> list[str]:
        return [summary, *kept]


def _summary_text(tokens: int, d: "Handle") -> str:
    """A stand-in summary of the right size; its words do not matter to the cost model."""
    n = int(tokens / d.tokens_per_byte())
    head = f"[summary {d.edits + 1} of the conversation so far, written by the summariser] "
    body = "The task, the files read, the commands run and what they showed are summarised here. "
    out = head + body * (max(0, n - len(head)) // len(body) + 1)
    return out[:max(len(head), n)]


class Compact(_Summarising):
    name = "compact"

    def trigger(self, d: "Handle") -> float:
        return d.window - COMPACT_BUFFER_TOKENS

    async def before_request(self, d: "Handle") -> None:
        if d.window and d.used_tokens() >= self.trigger(d):
            await self.summarise(d)

    def kept_material(self, d: "Handle") -> list[str]:
        """The most recent single-file reads, newest first, within the re-injection caps."""
        budget = (d.window - self.trigger(d)) / 2 if d.window else 0
        tpb = d.tokens_per_byte()
        out: list[str] = []
        seen: set[str] = set()
        spent = 0.0
        for t in reversed(d.ctx.turns):
            if t.state != "resident" or t.records is None or t.role != "assistant":
                continue
            blocks = d.ctx.blocks(t.id)
            results = {b.value.tool_use_id: b.text for b in blocks if b.kind == "tool_result"}
            for b in reversed([b for b in blocks if b.kind == "tool_use"]):
                kind, path = call_target(b.value)
                if kind != "read" or path in seen or b.value.id not in results:
                    continue
                text = results[b.value.id]
                cost = len(text.encode()) * tpb
                if cost > self.opts.reinject_file_tokens or spent + cost > budget:
                    continue
                seen.add(path)
                spent += cost
                out.append(text)
                if len(out) >= self.opts.reinject_files:
                    return out
        return out

    def layout(self, kept: list[str], summary: str) -> list[str]:
        return [summary, *reversed(kept)]


class Rollover(_Summarising):
    name = "rollover"

    async def before_request(self, d: "Handle") -> None:
        if d.window and d.used_tokens() >= ROLLOVER_SHARE * d.window:
            await self.summarise(d)

    def kept_material(self, d: "Handle") -> list[str]:
        """Recent user messages (the model's own prompts, not summaries), ≤ 20 000 tokens."""
        tpb = d.tokens_per_byte()
        out: list[str] = []
        spent = 0.0
        for t in reversed(d.ctx.turns):
            if t.role != "user" or t.state != "resident" or t.records is None or t.id in d.synthetic:
                continue
            text = t.records[0].text  # type: ignore[union-attr]
            cost = len(text.encode()) * tpb
            if spent + cost > ROLLOVER_USER_TOKENS:
                break
            spent += cost
            out.append(text)
        return list(reversed(out))

    def layout(self, kept: list[str], summary: str) -> list[str]:
        return [*kept, summary]


class ClearToolUses(Strategy):
    name = "clear-tool-uses"

    async def before_request(self, d: "Handle") -> None:
        trigger = CLEAR_TRIGGER_TOKENS
        if d.window:
            trigger = min(trigger, d.window - COMPACT_BUFFER_TOKENS)
        if d.used_tokens() < trigger:
            return
        ctx = d.ctx
        uses: list[tuple[int, int]] = []  # (turn, result block) in order
        for t in ctx.turns:
            if t.state != "resident" or t.records is None or t.role != "assistant":
                continue
            for b in ctx.blocks(t.id):
                if b.kind == "tool_result":
                    uses.append((t.id, b.index))
        old = uses[:-CLEAR_KEEP_TOOL_USES] if len(uses) > CLEAR_KEEP_TOOL_USES else []
        todo: list[tuple[int, int]] = []
        cleared_bytes = 0
        for tid, idx in old:
            t = ctx.turn(tid)
            if t is None or idx in t.swept or tid == ctx.in_hand:
                continue
            size = ctx.blocks(tid)[idx].length
            if size <= len(CLEAR_PLACEHOLDER):
                continue
            todo.append((tid, idx))
            cleared_bytes += size
        if cleared_bytes * d.tokens_per_byte() < self.opts.clear_at_least:
            return  # the API does not apply a clear that takes less than clear_at_least
        for block in todo:
            d.append(Marked(block=block, replacement=CLEAR_PLACEHOLDER))
        if todo:
            before = ctx.history_bytes()
            d.append(Swept(blocks=sorted(ctx.marks)))
            d.left_bytes += cleared_bytes  # gone for good: no door in this system
            d.edit(self.name, before)

    def shape_request(self, d: "Handle", request: Request) -> Request:
        return Request(system=request.system, tools=request.tools, model=request.model,
                       max_tokens=request.max_tokens, meta=request.meta,
                       messages=_bare_placeholders(d.ctx, request.messages))


def _bare_placeholders(ctx: Context, messages: list[dict]) -> list[dict]:
    """Anthropic's context editing sends only its placeholder where a result was cleared; our
    renderer labels replacements, so the clear-tool-uses model strips that label again."""
    out = []
    for m in messages:
        content = []
        for b in m["content"]:
            if b.get("type") == "tool_result" and b["content"].endswith(CLEAR_PLACEHOLDER) and \
                    b["content"].startswith("[replacement for block "):
                b = {**b, "content": CLEAR_PLACEHOLDER}
            content.append(b)
        out.append({"role": m["role"], "content": content})
    return out


class _ServerCompaction(_Summarising):
    """A provider's compaction inside the request: when the request's input passes the
    trigger, an extra sampling step of that same request reads the whole conversation and
    writes the summary (our ``summary`` call: the same prefix, so the same cache reads, plus
    the provider's prompt), and the model answers from the summary alone. The next request
    carries the system prompt, the summary and what came after it — nothing is re-injected
    and nothing that left reads back (recoverability 0)."""

    minimum = 0

    def trigger(self, window: int | None) -> int:
        """The default trigger, or window − 13 000 where the default does not fit."""
        if not window:
            return SERVER_COMPACT_TRIGGER_TOKENS
        return min(SERVER_COMPACT_TRIGGER_TOKENS, window - COMPACT_BUFFER_TOKENS)

    def not_applicable(self, window: int | None) -> str | None:
        t = self.trigger(window)
        if t < max(self.minimum, 1):
            return (f"the least trigger, {max(self.minimum, 1):,} tokens, does not fit a "
                    f"{window:,}-token window")
        return None

    async def before_request(self, d: "Handle") -> None:
        if d.used_tokens() > self.trigger(d.window):  # "input tokens exceed the trigger"
            await self.summarise(d)


class AnthropicCompaction(_ServerCompaction):
    """``compact_20260112``: default trigger 150 000 input tokens, at least 50 000."""

    name = "anthropic-compaction"
    minimum = SERVER_COMPACT_MIN_TRIGGER_TOKENS
    instruction_tokens = SERVER_COMPACT_INSTRUCTION_TOKENS


class OpenAICompaction(_ServerCompaction):
    """Responses ``context_management`` compaction: no documented default threshold or minimum
    (the threshold is assumed to be Anthropic's rule per window), an opaque encrypted item of
    undocumented size (``summary_tokens``), its prompt assumed as long as Anthropic's."""

    name = "openai-compaction"
    instruction_tokens = SERVER_COMPACT_INSTRUCTION_TOKENS


class Unbounded(Strategy):
    name = "none"


def make(name: str, opts: Options) -> Strategy:
    table = {"evict": Evict, "sweep": Sweep, "compact": Compact, "rollover": Rollover,
             "clear-tool-uses": ClearToolUses, "anthropic-compaction": AnthropicCompaction,
             "openai-compaction": OpenAICompaction, "none": Unbounded}
    if name not in table:
        raise ValueError(f"unknown strategy {name!r}: choose from {', '.join(STRATEGIES)}")
    return table[name](opts)
