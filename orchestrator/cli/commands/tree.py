"""``mnemon tree RUN_ROOT`` — the lineage tree of a run (read-only)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ....lineage.runroot import find_run_root, read_run_json
from ....lineage.tree import build_tree, format_node, walk

from .. import COMMANDS
from ....errors import UserError
from ...terminal import shown


def add_parser(sub) -> None:
    p = sub.add_parser("tree", help=COMMANDS["tree"])
    p.add_argument("path", help="a run root (or any directory inside one)")
    p.add_argument("--json", action="store_true", help="machine output: a list of {agent, "
                   "parent, kind, turns, resident, evicted, state} (and sandbox, for an agent "
                   "with a workspace; budget, for a capped agent; messages, for one that "
                   "was sent some)")


def run(args) -> int:
    path = Path(args.path)
    if not path.exists():
        raise UserError(f"{path} does not exist")
    root = find_run_root(path)
    read_run_json(root)
    nodes = walk(build_tree(root))
    for n, _ in nodes:
        if n.torn is not None:
            sys.stderr.write(f"mnemon: agents/{n.agent}/record.jsonl: torn tail of "
                             f"{n.torn.length} bytes at offset {n.torn.offset} (a crash "
                             "mid-append); folded what is complete\n")
    if args.json:
        print(json.dumps([n.as_json() for n, _ in nodes]))
        return 0
    if not nodes:
        print(f"{root}: no agents")
        return 0
    for n, prefix in nodes:
        print(shown(format_node(n, prefix)))
    return 0
