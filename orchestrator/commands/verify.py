"""``mnemon verify DIR|RUN_ROOT`` — refold every log and check every pointer's digest."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from ...lineage.runroot import (
    RunRootError,
    agent_source,
    confine,
    make_loader,
    read_pointer,
    read_run_json,
)
from ...lineage.view import agents_in
from ...session.errors import LogRefused, SessionError
from ...session.log import iter_lines
from ...session.records import Inherited, decode
from ...session.resume import fold_file

from ..cli import COMMANDS, UserError
from ..terminal import shown


def add_parser(sub) -> None:
    p = sub.add_parser("verify", help=COMMANDS["verify"])
    p.add_argument("path", help="an agent directory or a run root")
    p.add_argument("--json", action="store_true", help="machine output")


def _inherited_line(path: Path) -> tuple[int, Inherited | None]:
    for n, (_, line) in enumerate(iter_lines(path), 1):
        try:
            rec = decode(line)
        except Exception:
            return n, None
        if isinstance(rec, Inherited):
            return n, rec
        if n > 2 and type(rec).__name__ in ("UserPrompt", "AssistantMessage"):
            break
    return 0, None


def verify(path: Path) -> dict:
    try:
        root, agents = agents_in(path)
        read_run_json(root)
    except RunRootError as e:
        raise UserError(str(e)) from None
    problems: list[dict] = []
    torn_list: list[dict] = []
    if (root / "run.json").is_file() and Path(path).resolve() == root:
        for d in sorted((root / "agents").iterdir()) if (root / "agents").is_dir() else ():
            log = d / "record.jsonl"
            if os.path.lexists(log) and not log.is_file():  # a FIFO, a device, a dangling link
                problems.append({"path": f"agents/{d.name}/record.jsonl", "line": 0,
                                 "offset": None, "error": "not a regular file: not a log"})
    for agent in agents:
        src = agent_source(agent)
        try:
            full = confine(root, src)
        except SessionError as e:
            problems.append({"path": src, "line": 0, "offset": None, "error": str(e)})
            continue
        try:
            ctx, torn = fold_file(full, src, loader=make_loader(root))
        except LogRefused as e:
            problems.append({"path": src, "line": e.line, "offset": e.offset, "error": e.why})
            continue
        if torn is not None:
            torn_list.append({"path": src, "offset": torn.offset, "length": torn.length})
        # pointers the fold did not load (departed rows) are checked here
        line, link = _inherited_line(full)
        if link is not None:
            for item in link.turns:
                if item.row.held in ("resident", "swept"):
                    continue
                try:
                    read_pointer(root, item.at)
                except SessionError as e:
                    problems.append({"path": src, "line": line, "offset": None,
                                     "error": f"row {item.row.id}: {e}"})
    return {"ok": not problems, "agents": len(agents), "problems": problems, "torn": torn_list}


def run(args) -> int:
    report = verify(Path(args.path))
    for t in report["torn"]:
        sys.stderr.write(f"mnemon: {t['path']}: torn tail of {t['length']} bytes at offset "
                         f"{t['offset']} (a crash mid-append)\n")
    if args.json:
        print(json.dumps(report))
    else:
        if report["ok"]:
            print(f"ok: {report['agents']} log(s) fold and every pointer matches")
        for p in report["problems"]:
            print(shown(f"{p['path']}:{p['line']}: {p['error']}"))
    return 0 if report["ok"] else 1
