"""Mark-and-sweep, the pure half: the cost gate and the candidate rules.

The gate is computed, never guessed (seed 004): tokens reclaimed R, tokens after the earliest
touched position S (after the sweep), cache write and read multipliers w and r. A sweep costs
once S·(w − r) — the suffix is written again instead of read — and saves R·r on every later
request. Sweep when the payback, in requests, is within the horizon.

``Gate`` is the one place this arithmetic is written: the harness (``orchestrator/weighing.py``),
the model's tools and replay read it through ``gate``; ``Gate(R, S, w, r)`` prices any figures
directly (seed 004's worked example is ``tests/session/test_sweep_gate.py``).
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass

from .context import Context
from .records import AssistantMessage, ToolUse, compact
from .render import replacement_label
from .turn import Turn

WRITE_MULT = {"5m": 1.25, "1h": 2.0}
READ_MULT = 0.1


@dataclass(frozen=True)
class Gate:
    """Is a sweep worth it? Reclaiming R tokens whose removal invalidates a suffix of S tokens
    (what survives after the earliest touched position) moves the suffix from read price to
    write price once, S·(w − r), and saves R·r on every later request. All figures are in
    input-token equivalents (multiples of the input price)."""

    reclaimed_tokens: float  # R
    suffix_tokens: float  # S, after the sweep
    write_mult: float
    read_mult: float
    earliest: tuple[int, int] | None = None  # the earliest touched block, when from a context

    @property
    def one_time(self) -> float:
        return self.suffix_tokens * (self.write_mult - self.read_mult)

    @property
    def saving_per_request(self) -> float:
        return self.reclaimed_tokens * self.read_mult

    @property
    def payback_requests(self) -> float:
        if self.saving_per_request <= 0:
            return math.inf
        return self.one_time / self.saving_per_request

    @property
    def payback_turns(self) -> int:
        """The payback in whole requests, rounded up; -1 when nothing is reclaimed."""
        pb = self.payback_requests
        return math.ceil(pb) if math.isfinite(pb) else -1

    def usd(self, input_price_per_mtok: float) -> tuple[float, float]:
        """(one-time cost, saving per request) in USD at an input price per 1M tokens."""
        return (self.one_time * input_price_per_mtok / 1e6,
                self.saving_per_request * input_price_per_mtok / 1e6)

    def pays(self, horizon: float) -> bool:
        return self.reclaimed_tokens > 0 and self.payback_requests <= horizon

    def as_dict(self) -> dict:
        pb = self.payback_requests
        return {"reclaimed_tokens": round(self.reclaimed_tokens), "suffix_tokens":
                round(self.suffix_tokens), "one_time_tokens": round(self.one_time),
                "saving_per_request_tokens": round(self.saving_per_request, 1),
                "payback_requests": None if math.isinf(pb) else round(pb, 1)}


def gate(ctx: Context, tokens_per_byte: float, *, write_mult: float = WRITE_MULT["5m"],
         read_mult: float = READ_MULT, marks: dict[tuple[int, int], str] | None = None) -> Gate:
    """The gate for the pending marks (or the ``marks`` given)."""
    marks = ctx.marks if marks is None else marks
    if not marks:
        return Gate(0.0, 0.0, write_mult, read_mult, None)
    reclaimed = 0
    for (tid, idx), repl in marks.items():
        blocks = ctx.blocks(tid)
        if idx < len(blocks):
            label = replacement_label(tid, idx, repl)
            reclaimed += max(0, blocks[idx].length - len(label.encode("utf-8")))
    earliest = min(marks)
    suffix = 0
    for item in ctx.frontier():
        first = item.id if isinstance(item, Turn) else item.first
        if first >= earliest[0]:
            suffix += item.bytes if isinstance(item, Turn) else 0
    suffix = max(0, suffix - reclaimed)
    return Gate(reclaimed * tokens_per_byte, suffix * tokens_per_byte, write_mult, read_mult,
                earliest)


class Growth:
    """How many tokens the context grows per request, from recent requests with no edit.

    The gate's horizon is cut to the requests left before the next eviction: that eviction
    rewrites the region anyway, and pending marks ride along with it for free, so a sweep must
    pay back before it.
    """

    def __init__(self, keep: int = 8):
        self.deltas: list[int] = []
        self.keep = keep
        self.last: int | None = None

    def observe(self, used_tokens: int, edited: bool) -> None:
        if self.last is not None and not edited and used_tokens > self.last:
            self.deltas.append(used_tokens - self.last)
            del self.deltas[:-self.keep]
        self.last = used_tokens

    @property
    def per_request(self) -> float | None:
        if not self.deltas:
            return None
        ordered = sorted(self.deltas)
        return float(ordered[len(ordered) // 2])


def effective_horizon(horizon: float, used_tokens: int, due_tokens: float | None,
                      growth: float | None) -> float:
    """The horizon, cut to the requests expected before the context reaches the eviction line."""
    if due_tokens is None or not growth or growth <= 0:
        return horizon
    return min(horizon, max(0.0, (due_tokens - used_tokens) / growth))


# --------------------------------------------------------------------------- candidates

READERS = {"cat", "head", "tail", "nl", "less", "more", "sed", "awk", "bat", "view", "open"}
SEARCHERS = {"grep", "rg", "find", "ls", "ag", "git", "fd", "tree"}
LARGE_SEARCH = 2048


@dataclass(frozen=True)
class Candidate:
    block: tuple[int, int]
    bytes: int
    reason: str

    def as_dict(self) -> dict:
        return {"block": f"{self.block[0]}.{self.block[1]}", "bytes": self.bytes,
                "reason": self.reason}


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command, comments=False)
    except ValueError:
        return command.split()


def call_target(call: ToolUse) -> tuple[str, str]:
    """(kind, target): 'read' with a file path, 'search' with the command, or 'call' with the
    whole input — what a later call must repeat to supersede this one."""
    inp = call.input if isinstance(call.input, dict) else {}
    path = inp.get("path") or inp.get("file_path") or inp.get("file")
    if isinstance(path, str) and call.name.lower() in ("read", "read_file", "view", "open",
                                                       "str_replace_editor", "cat", "fs_read"):
        if call.name == "fs_read" and inp.get("at") is not None:
            return "call", f"{call.name}:{compact(inp).decode()}"  # a pointer's past bytes
        return "read", path
    if isinstance(path, str) and call.name in ("fs_write", "fs_edit", "write", "edit",
                                               "write_file"):
        return "write", path
    cmd = inp.get("command") or inp.get("cmd")
    if isinstance(cmd, list):
        cmd = " ".join(str(c) for c in cmd)
    if isinstance(cmd, str) and "&&" not in cmd and "|" not in cmd and ";" not in cmd:
        words = _words(cmd)
        if words:
            head = words[0].rsplit("/", 1)[-1]
            files = [w for w in words[1:] if not w.startswith("-") and ("." in w or "/" in w)]
            if head in READERS and files:
                return "read", files[-1]
            if head in SEARCHERS:
                return "search", cmd
    return "call", f"{call.name}:{compact(inp).decode()}"


def candidates(ctx: Context, *, limit: int = 20) -> list[Candidate]:
    """Blocks the harness proposes for marking, by rule, oldest first.

    - a tool result superseded by a later call with the same tool and the same target;
    - a file read again later;
    - a large search result followed by reads of what it found.
    """
    calls: list[tuple[int, int, ToolUse, int | None, int]] = []  # turn, call index, call, block, size
    for t in ctx.resident():
        if t.records is None or t.role != "assistant":
            continue
        if t.id == ctx.in_hand:
            continue
        blocks = ctx.blocks(t.id)
        result_at = {b.value.tool_use_id: b for b in blocks if b.kind == "tool_result"}
        msg = t.records[0]
        if not isinstance(msg, AssistantMessage):
            continue
        for i, b in enumerate(msg.blocks):
            if isinstance(b, ToolUse):
                ref = result_at.get(b.id)
                calls.append((t.id, i, b, ref.index if ref else None, ref.length if ref else 0))
    out: list[Candidate] = []
    seen: set[tuple[int, int]] = set()
    targets = [call_target(c[2]) for c in calls]
    later_reads: dict[int, frozenset[str]] = {len(calls): frozenset()}
    for n in range(len(calls) - 1, -1, -1):  # read targets among calls[n:]
        kind, target = targets[n]
        later_reads[n] = later_reads[n + 1] | {target} if kind == "read" else later_reads[n + 1]
    for n, (tid, _i, call, bidx, size) in enumerate(calls):
        if bidx is None or size == 0:
            continue
        key = (tid, bidx)
        turn = ctx.turn(tid)
        if turn is None or bidx in turn.swept or key in ctx.marks:
            continue
        kind, target = targets[n]
        reason = None
        for m in range(n + 1, len(calls)):
            k2, t2 = targets[m]
            if k2 == kind and t2 == target and calls[m][2].name == call.name:
                reason = ("read again later" if kind == "read" else
                          "superseded by a later call with the same tool and target")
                break
        if reason is None and kind == "read":
            for m in range(n + 1, len(calls)):
                if targets[m] == ("write", target):
                    reason = "the file was written after this read (its pointer reads it back)"
                    break
        if reason is None and kind == "search" and size >= LARGE_SEARCH:
            result_text = ctx.blocks(tid)[bidx].text
            found = sorted(p for p in later_reads[n + 1] if p and p in result_text)
            if found:
                reason = f"a search whose results were acted on (later read {found[0]})"
        if reason is not None and key not in seen:
            seen.add(key)
            out.append(Candidate(key, size, reason))
    out.sort(key=lambda c: c.block)
    return out[:limit]


def default_replacement(ctx: Context, block: tuple[int, int]) -> str:
    """A deterministic replacement: the block's first line, its size and its read-back address."""
    ref = ctx.blocks(block[0])[block[1]]
    text = ref.text
    first = text.split("\n", 1)[0][:120]
    return f"{first!r}… ({ref.length} bytes; transcript_read(turns=[{block[0]}]) has it all)"


# a file read's recovery pointer, as the file tools open their answer (docs/workspace.md):
# ``file <path> @ <snapshot> · …``
FILE_POINTER = re.compile(r"file (\S[^\n]{0,300}?) @ ([0-9a-f]{12}) · ")


def file_pointers(ctx: Context, span: tuple[int, int]) -> list[str]:
    """The recovery pointers (``path @ snapshot``) of the file reads among the resident turns
    of ``span``, oldest first, each once: what a harness residue names so that the files read
    come back as they were with ``fs_read {path, at}``."""
    out: list[str] = []
    for t in ctx.resident():
        if not span[0] <= t.id <= span[1] or t.records is None:
            continue
        for b in ctx.blocks(t.id):
            if b.kind == "tool_result":
                m = FILE_POINTER.match(b.text[:400])
                if m is not None:
                    p = f"{m.group(1)} @ {m.group(2)}"
                    if p not in out:
                        out.append(p)
    return out


def pointer_note(pointers: list[str], limit: int) -> str | None:
    """A residue note naming file pointers, as many as fit in ``limit`` bytes, or None."""
    if not pointers:
        return None
    head, tail = "files read (fs_read {path, at} reads each as it was): ", ""
    shown: list[str] = []
    for p in pointers:
        cand = head + "; ".join(shown + [p])
        if len(cand.encode()) > limit - 12:
            tail = f"; +{len(pointers) - len(shown)} more"
            break
        shown.append(p)
    if not shown:
        return None
    return head + "; ".join(shown) + tail
