"""``mnemon workspace AGENT_DIR [--turn N] ls|show|diff|export|patch|log`` — an agent's files
at a turn, read from its log and the run's store (``workspace.view.WorkspaceView``), never from
a live agent: a finished run, a crashed one, or one another process is writing.

What it prints is data as much as a view (decision 0370): ``show``, ``diff`` and ``patch``
write git's own bytes into a pipe or file — a patch that ``git apply`` takes, a file byte for
byte — and on a terminal the same text with every character that drives a terminal escaped
(``terminal.shown``), since the files are what a model wrote. ``show`` refuses to put a binary
file on a terminal (one line naming its size) rather than print an escaped screenful of it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .. import COMMANDS
from ....errors import UserError
from ...terminal import for_stream, on_terminal, shown

ACTIONS = ("ls", "show", "diff", "export", "patch", "log")

#: how many leading bytes ``show`` looks at for a NUL to call a file binary (git's own rule)
_SNIFF = 8000


def _one_line_error(message: str) -> None:
    sys.stderr.write(f"mnemon: {message}\n")
    sys.exit(2)


def _turn(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise UserError(f"--turn is a turn number, not {text!r}") from None
    if n < 0:
        raise UserError(f"--turn is a turn number (0 or more), not {n}")
    return n


def add_parser(sub) -> None:
    p = sub.add_parser("workspace", help=COMMANDS["workspace"])
    p.add_argument("path", help="an agent directory (RUN_ROOT/agents/ID)")
    p.add_argument("--turn", metavar="N", default=None,
                   help="the files as they stood after turn N's tools (default: the latest)")
    ws = p.add_subparsers(dest="action", metavar="|".join(ACTIONS))
    ws.required = True
    subs = [p]

    def action(name: str, help: str):
        sp = ws.add_parser(name, help=help)
        sp.add_argument("--turn", metavar="N", dest="turn_here", default=None,
                        help="as the --turn before the action")
        subs.append(sp)
        return sp

    pl = action("ls", "every file: its path and size in bytes, tab-separated")
    pl.add_argument("--json", action="store_true", help="machine output")
    ps = action("show", "one file's bytes (escaped on a terminal)")
    ps.add_argument("file", metavar="PATH", help="the file's path inside the workspace")
    pd = action("diff", "a unified diff from turn --from (default: the start) to --turn")
    pd.add_argument("--from", dest="frm", metavar="N", default=None,
                    help="the turn the diff starts after (default: the agent's starting files)")
    pe = action("export", "write the files into a new or empty directory")
    pe.add_argument("--to", dest="to", metavar="DIR", required=True,
                    help="where the files go (a new or empty directory)")
    pp = action("patch", "the agent's change as a patch git apply takes")
    pp.add_argument("--against", choices=("source", "parent"), default="source",
                    help="source (default): from the files it started with; parent: from its "
                         "parent's files now")
    pg = action("log", "each workspace record of the log: turn, why, snapshot")
    pg.add_argument("--json", action="store_true", help="machine output")
    for sp in subs:
        sp.error = _one_line_error


def run(args) -> int:
    from ...workspace.view import NoWorkspace, view_of

    if args.turn is not None and args.turn_here is not None and args.turn != args.turn_here:
        raise UserError(f"--turn given twice ({args.turn} and {args.turn_here})")
    raw_turn = args.turn_here if args.turn_here is not None else args.turn
    turn = _turn(raw_turn) if raw_turn is not None else None
    view = view_of(Path(args.path))
    for n in (turn, _turn(args.frm) if getattr(args, "frm", None) is not None else None):
        last = view.last_turn()
        if n is not None and (last is None or n > last):
            raise NoWorkspace(f"agent {view.agent} has no turn {n} yet (its last is "
                              f"{last if last is not None else 'none'})")
    out = sys.stdout
    if args.action == "ls":
        entries = [e for e in view.ls(turn) if e.kind != "dir"]
        if args.json:
            print(json.dumps([{"path": e.path, "size": e.size, "kind": e.kind, "mode": e.mode}
                              for e in entries]))
        else:
            out.write(for_stream("".join(f"{e.path}\t{e.size}\n" for e in entries), out))
        return 0
    if args.action == "show":
        _write(view.show(args.file, turn), name=args.file)
        return 0
    if args.action == "diff":
        frm = _turn(args.frm) if args.frm is not None else None
        _write(view.diff_bytes(frm, turn))
        return 0
    if args.action == "patch":
        _write(view.patch_bytes(against=args.against, turn=turn))
        return 0
    if args.action == "export":
        n = view.export(Path(args.to), turn)
        sys.stderr.write(f"mnemon: wrote {n} files to {shown(str(args.to))}\n")
        return 0
    rows = view.turns()  # log
    if args.json:
        print(json.dumps(rows))
        return 0
    lines = []
    for r in rows:
        extra = "".join(f"\t{k} {r[k]}" for k in ("source", "dir", "aside") if k in r)
        lines.append(f"{r['turn'] if r['turn'] is not None else '-'}\t{r['why']}\t"
                     f"{r['snapshot']}{extra}\n")
    out.write(for_stream("".join(lines), out))
    return 0


def _write(data: bytes, *, name: str | None = None) -> None:
    """Bytes to stdout: as they are into a pipe or file; on a terminal, decoded and escaped —
    and a binary file (a NUL in its first 8000 bytes, as git decides) refused."""
    out = sys.stdout
    if not on_terminal(out):
        out.flush()
        out.buffer.write(data)
        out.buffer.flush()
        return
    if name is not None and b"\0" in data[:_SNIFF]:
        raise UserError(f"{shown(name)} is binary ({len(data)} bytes): redirect stdout to a "
                        "file or a pipe for its bytes")
    out.write(shown(data.decode("utf-8", "backslashreplace")))
    out.flush()
