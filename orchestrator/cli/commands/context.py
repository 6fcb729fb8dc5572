"""``mnemon context DIR [--rendered]`` — the survey of an agent's context."""

from __future__ import annotations

import json
from pathlib import Path

from ....lineage.runroot import find_run_root, read_run_json
from ....lineage.view import open_agent, report_torn
from ....session.errors import LogRefused
from ....session.render import render
from ....session.survey import survey

from .. import COMMANDS
from ....errors import Failure
from ...terminal import shown


def add_parser(sub) -> None:
    p = sub.add_parser("context", help=COMMANDS["context"])
    p.add_argument("path", help="an agent directory")
    p.add_argument("--rendered", action="store_true",
                   help="print the provider-neutral messages it would send now")
    p.add_argument("--json", action="store_true", help="machine output")


def run(args) -> int:
    try:
        read_run_json(find_run_root(Path(args.path)))
        root, agent, ctx, torn = open_agent(Path(args.path))
    except LogRefused as e:  # a log that does not fold: not the user's doing
        raise Failure(f"{e} (run `mnemon verify` for every problem)") from None
    report_torn(f"agents/{agent}/record.jsonl", torn)
    if args.rendered:
        msgs = render(ctx)
        started = ctx.started
        out = {"system": started.system if started else None, "messages": msgs}
        if args.json:
            print(json.dumps(out))
        else:
            print(shown(json.dumps(out, indent=2, ensure_ascii=False)))
        return 0
    s = survey(ctx)
    if args.json:
        print(json.dumps(s))
        return 0
    print(f"agent {agent}: {len(s['frontier'])} frontier items, {s['history_bytes']} history "
          f"bytes, ~{s['used_tokens']} tokens used")
    for it in s["frontier"]:
        if it["kind"] == "turn":
            print(f"  turn {it['id']:>6}  {it['role']:<9} {it['bytes']:>9} B")
        else:
            a, b = it["span"]
            note = f"  note {it['note']!r}" if it["note"] else ""
            print(f"  residue [{a}, {b}] by {it['by']}, {it['bytes']} B{note}")
    return 0
