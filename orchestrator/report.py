"""What a finished run prints: the lineage tree, the evictions, tokens, cache and price."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .supervisor import Supervisor


def cost_rows(sup: "Supervisor") -> list[dict]:
    rows = []
    for aid, node in sorted(sup.agents.items(), key=lambda kv: _order(kv[0])):
        u = node.usage
        row = {"agent": aid, "input_tokens": u.input_tokens,
               "cache_read_tokens": u.cache_read_tokens,
               "cache_write_tokens": u.cache_write_tokens,
               "output_tokens": u.output_tokens, "cost_usd": round(node.cost_usd, 6)}
        if u.reasoning:  # of output, what a provider reported apart (the Responses API)
            row["reasoning_tokens"] = u.reasoning
        rows.append(row)
    if any("reasoning_tokens" in r for r in rows):
        for r in rows:
            r.setdefault("reasoning_tokens", 0)
    return rows


def cost_columns(rows: list[dict]) -> list[tuple[str, str]]:
    """``(key, heading)`` of a cost table: reasoning tokens apart only where some were reported
    (they are part of, and priced in, the output)."""
    cols = [("agent", "agent"), ("input_tokens", "input"), ("cache_read_tokens", "cache read"),
            ("cache_write_tokens", "cache write"), ("output_tokens", "output")]
    if rows and "reasoning_tokens" in rows[0]:
        cols.append(("reasoning_tokens", "(reasoning)"))
    return cols + [("cost_usd", "cost")]


def _order(aid: str) -> tuple:
    return (len(aid), aid)


def table(rows: list[dict], cols: list[str], headers: list[str]) -> str:
    cells = [[str(r[c]) for c in cols] for r in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) if cells else len(h)
              for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in
                     enumerate(zip(headers, widths)))
    out = [line, "  ".join("-" * w for w in widths)]
    for c in cells:
        out.append("  ".join(v.ljust(w) if i == 0 else v.rjust(w)
                             for i, (v, w) in enumerate(zip(c, widths))))
    return "\n".join(out)


def cost_table(sup: "Supervisor") -> str:
    rows = cost_rows(sup)
    total = {"agent": "total"}
    cols = cost_columns(rows)
    for k, _ in cols[1:-1]:
        total[k] = sum(r[k] for r in rows)
    total["cost_usd"] = round(sum(r["cost_usd"] for r in rows), 6)
    rows.append(total)
    for r in rows:
        r["cost_usd"] = f"${r['cost_usd']:.4f}"
    return table(rows, [k for k, _ in cols], [h for _, h in cols])


def evictions(sup: "Supervisor") -> str:
    lines = []
    for aid, node in sorted(sup.agents.items(), key=lambda kv: _order(kv[0])):
        parent = set()
        if node.parent is not None:
            parent = {(r.span, r.note, r.by) for r in node.parent.ctx.residues}
        for r in node.ctx.residues:
            where = " (inherited)" if (r.span, r.note, r.by) in parent else ""
            note = f" note {r.note!r}" if r.note else ""
            lines.append(f"  {aid}: turns [{r.span[0]}, {r.span[1]}] by {r.by}, "
                         f"{r.weight} bytes{where}{note}")
    return "\n".join(lines) if lines else "  (none)"
