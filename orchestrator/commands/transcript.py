"""``mnemon transcript index|read|grep DIR …`` — the transcript door, from outside.

Reading from outside, the CLI may read an agent's unclosed turn. Files are never modified: a torn
tail is reported on stderr and what is complete is read.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ...lineage.runroot import RunRootError
from ...lineage.view import open_door, report_torn
from ...session.constants import GREP_HITS, GREP_TIMEOUT_S
from ...session.door import Door
from ...session.errors import LogRefused, Refusal

from ..cli import COMMANDS, Failure, UserError


def _one_line_error(message: str) -> None:
    sys.stderr.write(f"mnemon: {message}\n")
    sys.exit(2)


def add_parser(sub) -> None:
    p = sub.add_parser("transcript", help=COMMANDS["transcript"])
    ts = p.add_subparsers(dest="door", metavar="index|read|grep")
    ts.required = True
    pi = ts.add_parser("index", help="every turn, oldest first")
    pi.add_argument("path", help="an agent directory")
    pi.add_argument("--turns", help="ids and ranges, e.g. 3,5-9")
    pi.add_argument("--json", action="store_true", help="machine output")
    pr = ts.add_parser("read", help="each named turn's own records, as in the file")
    pr.add_argument("path", help="an agent directory")
    pr.add_argument("--turns", required=True, help="ids and ranges, e.g. 3,5-9")
    pr.add_argument("--json", action="store_true", help="machine output")
    pg = ts.add_parser("grep", help="a regex over the transcript's text, per line")
    pg.add_argument("path", help="an agent directory")
    pg.add_argument("pattern", help="a regex (the Python regex module's dialect)")
    pg.add_argument("--turns", help="ids and ranges, e.g. 3,5-9")
    pg.add_argument("--timeout", type=float, default=GREP_TIMEOUT_S,
                    help=f"cap on regex time in seconds (default {GREP_TIMEOUT_S:g})")
    pg.add_argument("--json", action="store_true", help="machine output")
    for sp in (p, pi, pr, pg):
        sp.error = _one_line_error  # type: ignore[method-assign]


def _open(path: str) -> Door:
    try:
        door = open_door(Path(path))
    except RunRootError as e:
        raise UserError(str(e)) from None
    except LogRefused as e:  # a log that does not verify: a failure, not the user's doing
        raise Failure(f"the log does not fold: {e} (run `mnemon verify` for every problem)") \
            from None
    except Refusal as e:
        raise UserError(str(e)) from None
    report_torn(door.ctx.source, door.torn)
    return door


def run(args) -> int:
    door = _open(args.path)
    try:
        if args.door == "index":
            raw = door.index_json(args.turns) if args.json else None
            if raw is not None:  # the checkpoint's printed rows, copied
                sys.stdout.flush()
                out = sys.stdout.buffer
                for piece in raw:
                    out.write(piece)
                out.flush()
            else:
                _print_index(door.index_chunks(args.turns), args.json)
        elif args.door == "read":
            _print_read(door.read(args.turns), args.json)
        else:
            if not args.timeout > 0:
                raise UserError("--timeout must be a positive number of seconds")
            _print_grep(door.grep(args.pattern, args.turns, timeout_s=args.timeout), args.json)
    except Refusal as e:
        raise UserError(str(e)) from None
    return 0


def _print_index(chunks, as_json: bool) -> None:
    """Rows as they come, chunk by chunk (a long index is never held whole)."""
    out = sys.stdout
    if as_json:
        import msgspec

        out.write("[")
        sep = ""
        for chunk in chunks:
            body = msgspec.json.encode(chunk)[1:-1].decode("utf-8")
            if body:
                out.write(sep + body)
                sep = ","
        out.write("]\n")
        return
    for r in (r for chunk in chunks for r in chunk):
        where = "" if r["origin"] == "own" else f"  from {r['source']}"
        held = r["held"] if r["residue"] is None else f"{r['held']} [{r['residue'][0]}, " \
                                                      f"{r['residue'][1]}]"
        print(f"{r['id']:>7}  {r['role']:<9} {r['bytes']:>9} B  {held:<20} "
              f"{r['label']!r}{where}")


def _print_read(turns: list[dict], as_json: bool) -> None:
    if as_json:
        print(json.dumps(turns))
        return
    for t in turns:
        print(f"== turn {t['turn']}  ({t['source']})")
        for rec in t["records"]:
            print(json.dumps(rec, ensure_ascii=False))


def _print_grep(ans: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(ans))
        return
    for h in ans["hits"]:
        print(f"{h['turn']:>7}: {h['line']}")
    n, total = len(ans["hits"]), ans["total"]
    more = f" (showing the first {GREP_HITS} — narrow it)" if total > n else ""
    print(f"{total} matching line{'s' if total != 1 else ''}{more}")
