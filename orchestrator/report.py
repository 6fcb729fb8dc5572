"""What a finished run prints: the lineage tree, the evictions, tokens, cache and price."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .supervisor import Supervisor


def cost_rows(sup: "Supervisor") -> list[dict]:
    rows = []
    for aid, node in sorted(sup.agents.items(), key=lambda kv: _order(kv[0])):
        u = node.usage
        rows.append({"agent": aid, "input_tokens": u.input_tokens,
                     "cache_read_tokens": u.cache_read_tokens,
                     "cache_write_tokens": u.cache_write_tokens,
                     "output_tokens": u.output_tokens, "cost_usd": round(node.cost_usd, 6)})
    return rows


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
    for k in ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens"):
        total[k] = sum(r[k] for r in rows)
    total["cost_usd"] = round(sum(r["cost_usd"] for r in rows), 6)
    rows.append(total)
    for r in rows:
        r["cost_usd"] = f"${r['cost_usd']:.4f}"
    return table(rows, ["agent", "input_tokens", "cache_read_tokens", "cache_write_tokens",
                        "output_tokens", "cost_usd"],
                 ["agent", "input", "cache read", "cache write", "output", "cost"])


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
