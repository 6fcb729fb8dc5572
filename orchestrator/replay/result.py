"""What a replay measures: one row per request (``TurnRow``) and one strategy's totals
(``Result``, whose ``summary`` is what ``summary.json`` and the report's table hold).

Plain figures, below everything else in the package: the handle adds to them while the run
goes, the run reads the per-request rows back from the logs, the report writes them out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


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
    not_applicable: str | None = None  # why the strategy cannot run at this window (not run)

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
            "not_applicable": self.not_applicable,
        }
