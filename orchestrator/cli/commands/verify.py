"""``mnemon verify DIR|RUN_ROOT`` — refold every log and check every pointer's digest."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from ....lineage.runroot import (
    agent_source,
    confine,
    make_loader,
    read_pointer,
    read_run_json,
)
from ....lineage.view import agents_in
from ....session.errors import LogRefused, SessionError
from ....session.log import iter_lines
from ....session.records import Inherited, decode
from ....session.resume import fold_file

from ...workspace.view import check_log
from .. import COMMANDS
from ...terminal import shown


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


def _line_of(path: Path, offset: int) -> int:
    """The 1-based line that starts at ``offset``."""
    for n, (off, _) in enumerate(iter_lines(path), 1):
        if off >= offset:
            return n
    return 0


def lineage_problems(full: Path, ctx, line: int, link: Inherited | None) -> list[tuple[int, int | None, str]]:
    """What a log that folds may still say about its lineage that the protocol forbids, found
    from its table: ``(line, offset, error)``.

    * a mnemon child (``SessionStarted.kind`` ``mnemon``) opens with its ``Inherited`` link —
      one without it has lost the turns it was forked with (a log cut back to its opening by a
      rotation with copytruncate or a ``> file``, then written on);
    * the first turn of a lineage is a user turn — an assistant turn with no user turn before
      it answers nothing (turns withdrawn by a clear or a rewind still count: they were there).

    Each rule holds for every log mnemon writes, forks, rewinds, clears and imports included
    (an import opening with an assistant turn gets a user line first); neither is part of the
    fold, so a log that breaks one still reopens and reads — ``verify`` names it."""
    out: list[tuple[int, int | None, str]] = []
    st = ctx.started
    if st is not None and st.kind == "mnemon" and link is None:
        out.append((1, 0, "a mnemon child's log with no Inherited link: the turns it was forked "
                       "with are gone (was the file cut back or rewritten?)"))
    first = ctx.turns[0] if len(ctx.turns) else None
    if first is not None and first.role == "assistant":
        own = first.origin == "own" and bool(first.loci)
        off = first.loci[0][0] if own else None
        at = _line_of(full, off) if off is not None else line
        out.append((at, off, f"assistant turn {first.id} has no user turn before it: a turn order "
                        "the protocol forbids (was the file cut back or edited?)"))
    return out


def verify(path: Path) -> dict:
    root, agents = agents_in(path)
    read_run_json(root)
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
        for at, off, why in lineage_problems(full, ctx, line, link):
            problems.append({"path": src, "line": at, "offset": off, "error": why})
        if ctx.workspace is not None:  # its snapshots are in the run's store (docs/workspace.md)
            for at, why in check_log(root, full):
                problems.append({"path": src, "line": at, "offset": None, "error": why})
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
