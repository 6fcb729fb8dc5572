"""``mnemon verify DIR|RUN_ROOT`` — refold every log, check every pointer's digest and every
log's chain (``session.chain``): the first line where one breaks and the kind of change, against
the heads its children's links, its signature and heads kept earlier (``--against``) hold.
``--head`` checks the chains only and prints each log's head and the run's."""

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
from ....session import chain as chains
from ....session.errors import LogRefused, SessionError
from ....session.log import iter_lines
from ....session.records import PROTOCOL, Inherited, decode
from ....session.resume import fold_file

from ...workspace.view import check_log
from .. import COMMANDS
from ...terminal import shown


def add_parser(sub) -> None:
    p = sub.add_parser("verify", help=COMMANDS["verify"])
    p.add_argument("path", help="an agent directory or a run root")
    p.add_argument("--json", action="store_true", help="machine output")
    p.add_argument("--head", action="store_true",
                   help="check the chains only (no refold) and print each log's head and the "
                        "run's, to keep elsewhere")
    p.add_argument("--against", metavar="HEADS",
                   help="check the run against heads kept earlier (what --head printed)")
    p.add_argument("--key", metavar="PUBKEY",
                   help="every log must carry a signed head that verifies with this Ed25519 "
                        "public key (PEM; the 'sign' extra)")


def _inherited_line(path: Path) -> tuple[int, Inherited | None]:
    for n, (_, line) in enumerate(iter_lines(path), 1):
        try:
            rec = decode(line)
        except Exception:
            return n, None
        if isinstance(rec, Inherited):
            return n, rec
        if isinstance(rec, PROTOCOL):  # a link comes before every other protocol record
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


class _Anchor:
    """A head of a log kept outside it: in a child's link, in its signature, in a heads file."""

    __slots__ = ("size", "lines", "head", "who")

    def __init__(self, size: int, lines: int, head: str, who: str):
        self.size, self.lines, self.head, self.who = size, lines, head, who


def _chain_problems(src: str, rep: "chains.Report", anchors: list[_Anchor]) -> list[dict]:
    """The chain's break and what each kept head says of the log, as problems."""
    out: list[dict] = []
    b = rep.broken
    if b is not None:
        out.append({"path": src, "line": b.line, "offset": b.offset, "kind": b.kind,
                    "error": f"the chain breaks here ({b.kind}): {b.why}"})
    for a in sorted(anchors, key=lambda a: -a.size):  # the longest kept head first
        if a.size > rep.bytes:
            if any(p.get("kind") == "truncated" for p in out):
                continue  # one cut, named once
            out.append({"path": src, "line": rep.lines + 1, "offset": rep.bytes,
                        "kind": "truncated",
                        "error": f"the chain breaks here (truncated): the log ends after line "
                                 f"{rep.lines} ({rep.bytes} bytes) but {a.who} holds its head at "
                                 f"{a.lines} records ({a.size} bytes) — records were cut off "
                                 "at a record boundary"})
        elif rep.at.get(a.size) != a.head and (b is None or b.offset >= a.size):
            out.append({"path": src, "line": 1, "offset": 0, "kind": "rewritten",
                        "error": f"its first {a.size} bytes do not hash to the head {a.who} "
                                 "holds: the log was rewritten (its chain recomputed)"})
    return out


def _signature(root: Path, src: str, full: Path, key: str | None,
               anchors: list[_Anchor]) -> list[dict]:
    try:
        sig = chains.read_signature(full)
    except ValueError as e:
        return [{"path": src + chains.SIG_SUFFIX, "line": 0, "offset": None, "error": str(e)}]
    if sig is None:
        return [] if key is None else [{"path": src, "line": 0, "offset": None,
                                        "error": "not signed (no record.jsonl.sig beside it)"}]
    where = src + chains.SIG_SUFFIX
    if sig.source != src:
        return [{"path": where, "line": 0, "offset": None,
                 "error": f"the signature names another log ({sig.source})"}]
    if not chains.signature_valid(sig):
        return [{"path": where, "line": 0, "offset": None,
                 "error": "the signature does not verify: the signed head was changed"}]
    if key is not None and sig.key != key:
        return [{"path": where, "line": 0, "offset": None,
                 "error": f"signed with another key ({sig.key[:16]}…, not {key[:16]}…)"}]
    anchors.append(_Anchor(sig.bytes, sig.lines, sig.head, "its signature"))
    return []


def verify(path: Path, *, fold: bool = True, against: Path | None = None,
           key: str | None = None) -> dict:
    """Everything ``mnemon verify`` checks, as a report; ``fold=False`` checks the chains
    (and the heads kept of them) only. ``key``: the raw Ed25519 public key (hex) every log must
    be signed with."""
    root, agents = agents_in(path)
    read_run_json(root)
    kept = chains.read_kept(against) if against is not None else None
    problems: list[dict] = []
    torn_list: list[dict] = []
    logs: list[dict] = []
    whole_run = (root / "run.json").is_file() and Path(path).resolve() == root
    if whole_run:
        for d in sorted((root / "agents").iterdir()) if (root / "agents").is_dir() else ():
            log = d / "record.jsonl"
            if os.path.lexists(log) and not log.is_file():  # a FIFO, a device, a dangling link
                problems.append({"path": f"agents/{d.name}/record.jsonl", "line": 0,
                                 "offset": None, "error": "not a regular file: not a log"})
    found: list[tuple[str, Path]] = []
    for agent in agents:
        src = agent_source(agent)
        try:
            found.append((src, confine(root, src)))
        except SessionError as e:
            problems.append({"path": src, "line": 0, "offset": None, "error": str(e)})
    # heads kept of each log: its children's links, its signature, the heads file
    anchors: dict[str, list[_Anchor]] = {src: [] for src, _ in found}
    links: dict[str, tuple[int, Inherited | None]] = {}
    for src, full in found:
        line, link = _inherited_line(full)
        links[src] = (line, link)
        at = link.parent_head if link is not None else None
        if at is not None and at.source in anchors:
            anchors[at.source].append(_Anchor(at.bytes, at.lines, at.head,
                                              f"{src}:{line} (the link of a child)"))
    if kept is not None:
        for src, (size, lines, head) in sorted(kept.logs.items()):
            if src in anchors:
                anchors[src].append(_Anchor(size, lines, head, f"the heads in {against}"))
            elif whole_run:  # (one agent's directory: the others are not looked at)
                problems.append({"path": src, "line": 0, "offset": None, "kind": "deleted",
                                 "error": f"the heads in {against} name this log, and it is "
                                          "gone"})
    for src, full in found:
        problems += _signature(root, src, full, key, anchors[src])
        rep = chains.check(full, src, [a.size for a in anchors[src]])
        logs.append({"path": src, "chain": f"v{rep.version}" if rep.chained else "unchained",
                     "bytes": rep.bytes, "lines": rep.lines, "head": rep.head})
        problems += _chain_problems(src, rep, anchors[src])
    run_head = chains.run_head((x["path"], x["bytes"], x["head"]) for x in logs)
    if kept is not None and kept.run is not None:
        if kept.logs and chains.run_head((p, s, h) for p, (s, _, h) in kept.logs.items()) \
                != kept.run:
            problems.append({"path": str(against), "line": 0, "offset": None,
                             "error": "its log heads do not give its run head: the heads file "
                                      "was edited"})
        elif not kept.logs and kept.run != run_head:
            problems.append({"path": ".", "line": 0, "offset": None,
                             "error": f"the run's head is not the one kept in {against}: a log "
                                      "changed, grew, or was added or removed since"})
    if fold:
        for src, full in found:
            problems += _fold_problems(root, src, full, links[src], torn_list)
    return {"ok": not problems, "agents": len(agents), "problems": problems,
            "torn": torn_list, "logs": logs, "run": run_head}


def _fold_problems(root: Path, src: str, full: Path, found: tuple[int, Inherited | None],
                   torn_list: list[dict]) -> list[dict]:
    problems: list[dict] = []
    try:
        ctx, torn = fold_file(full, src, loader=make_loader(root))
    except LogRefused as e:
        return [{"path": src, "line": e.line, "offset": e.offset, "error": e.why}]
    if torn is not None:
        torn_list.append({"path": src, "offset": torn.offset, "length": torn.length})
    # pointers the fold did not load (departed rows) are checked here
    line, link = found
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
    return problems


def run(args) -> int:
    key = chains.public_hex(Path(args.key)) if args.key else None
    against = Path(args.against) if args.against else None
    report = verify(Path(args.path), fold=not args.head, against=against, key=key)
    for t in report["torn"]:
        sys.stderr.write(f"mnemon: {t['path']}: torn tail of {t['length']} bytes at offset "
                         f"{t['offset']} (a crash mid-append)\n")
    if args.json:
        print(json.dumps(report))
    elif args.head:
        for x in report["logs"]:
            print(shown(f"{x['head']} {x['bytes']} {x['lines']} {x['chain']} {x['path']}"))
        print(f"{report['run']} run")
        for p in report["problems"]:
            sys.stderr.write(shown(f"mnemon: {p['path']}:{p['line']}: {p['error']}") + "\n")
    else:
        if report["ok"]:
            loose = sum(1 for x in report["logs"] if x["chain"] == "unchained")
            print(f"ok: {report['agents']} log(s) fold and every pointer matches; "
                  f"{len(report['logs']) - loose} chained, {loose} unchained")
        for p in report["problems"]:
            print(shown(f"{p['path']}:{p['line']}: {p['error']}"))
    return 0 if report["ok"] else 1
