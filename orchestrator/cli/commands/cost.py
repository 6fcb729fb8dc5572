"""``mnemon cost DIR|RUN_ROOT`` — tokens, cache reads/writes and price, per agent and in total,
and the split: each capped agent's caps beside what its tree spent.

Read-only: a torn tail is reported on stderr and what is complete is counted.
"""

from __future__ import annotations

import json
from pathlib import Path

from ....lineage.view import report_torn

from .. import COMMANDS


def add_parser(sub) -> None:
    p = sub.add_parser("cost", help=COMMANDS["cost"])
    p.add_argument("path", help="a run root or an agent directory")
    p.add_argument("--price-as", default=None, metavar="MODEL",
                   help="price every usage as this model (default: each record's own model; "
                        "an unknown model such as 'scripted' prices at the default tier)")
    p.add_argument("--cache-ttl", default="5m", choices=["5m", "1h"],
                   help="price cache writes at the 5-minute or the 1-hour TTL")
    p.add_argument("--by", choices=["agent", "role"], default="agent",
                   help="one row per agent (default), or per named role (docs/roles.md)")
    p.add_argument("--json", action="store_true", help="machine output: {\"agents\": [...], "
                   "\"total\": {...}} (--by role: {\"roles\": [...], \"total\": {...}})")


def run(args) -> int:
    from ...costs import as_json, by_role, reports_reasoning, run_cost, splits, total
    from ...report import table

    path = Path(args.path)
    rows = run_cost(path, price_as=args.price_as, ttl=args.cache_ttl)
    for r in rows:
        report_torn(f"agents/{r.agent}/record.jsonl", r.torn)
    roles = args.by == "role"
    if args.json:
        print(json.dumps({"roles": by_role(rows), "total": total(rows)} if roles else
                         as_json(rows)))
        return 0
    first = "role" if roles else "agent"
    cols = [first, "input_tokens", "cache_read_tokens", "cache_write_tokens",
            "output_tokens", "cost_usd"]
    heads = [first, "input", "cache read", "cache write", "output", "cost"]
    reasoning = reports_reasoning(rows)
    if reasoning:  # shown apart; already counted (and priced) in output
        cols.insert(5, "reasoning_tokens")
        heads.insert(5, "(reasoning)")
    if roles:
        cols.insert(1, "agents")
        heads.insert(1, "agents")
    elif any(r.provider not in (None, "scripted") for r in rows):  # which one it paid
        cols.insert(1, "provider")
        heads.insert(1, "provider")
    body = by_role(rows) if roles else [r.as_json(reasoning) for r in rows]
    if roles and reasoning:
        for line in body:
            line.setdefault("reasoning_tokens", 0)
    lines = body + [{first: "total", **({"agents": len(rows)} if roles else {}),
                     **total(rows)}]
    for line in lines:
        line["cost_usd"] = f"${line['cost_usd']:.4f}"
        if "provider" in cols:
            line["provider"] = line.get("provider") or ""
    print(table(lines, cols, heads))
    t = lines[-1]
    if "batch_cost_usd" in t:  # batch engine spend (at the batch price) and live spend apart
        print(f"batch ${t['batch_cost_usd']:.4f} · live ${t['live_cost_usd']:.4f}")
    priced = (f"priced as {args.price_as}" if args.price_as else
              "priced on each record's model")
    fallback = [r.agent for r in rows if r.counted == "assistant_messages"]
    note = (f"; {', '.join(fallback)} from AssistantMessage usage (no ProviderCall usage)"
            if fallback else "")
    print(f"({priced}, cache writes at the {args.cache_ttl} TTL{note})")
    split = splits(rows)
    if split:  # the split: what each capped agent was given beside what its tree spent
        print()
        print(table([_split_row(a, b) for a, b in split.items()],
                    ["agent", "usd", "spent_usd", "tokens", "spent_tokens", "max_turns"],
                    ["capped agent", "cap", "its tree spent", "token cap",
                     "its tree's tokens", "max turns"]))
    return 0


def _split_row(agent: str, b: dict) -> dict:
    """One capped agent's line: each cap beside its tree's spend and the share of it used."""
    def share(spent: float, cap: float) -> str:
        return f" ({100 * spent / cap:.0f}%)" if cap else ""

    row = {"agent": agent, "usd": "-", "spent_usd": "-", "tokens": "-", "spent_tokens": "-",
           "max_turns": b.get("max_turns", "-")}
    if "usd" in b:
        row["usd"] = f"${b['usd']:.4f}"
        row["spent_usd"] = f"${b['spent_usd']:.4f}{share(b['spent_usd'], b['usd'])}"
    if "tokens" in b:
        row["tokens"] = str(b["tokens"])
        row["spent_tokens"] = f"{b['spent_tokens']}{share(b['spent_tokens'], b['tokens'])}"
    return row
