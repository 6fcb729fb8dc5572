"""The transcript door from outside, answered: an agent directory's door opened (its torn tail
reported; a log that does not fold a ``Failure``, its refusals left as they are — each a
``mnemon.MnemonError`` the CLI prints in one line) and each answer printed, as
``mnemon transcript`` shows it.

Apart from the command (``cli.commands.transcript``: its arguments and the quick no-hit answer)
so that a grep ``lineage.nohit`` answers never imports the door, the fold or msgspec. It does
not import the CLI.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..errors import Failure
from ..lineage.view import open_door, report_torn
from ..session.constants import GREP_HITS
from ..session.door import Door
from ..session.errors import LogRefused
from .terminal import shown


def _open(path: str) -> Door:
    try:  # a run root or a refusal is the user's (exit 2), as it comes
        door = open_door(Path(path))
    except LogRefused as e:  # a log that does not verify: a failure, not the user's doing
        raise Failure(f"the log does not fold: {e} (run `mnemon verify` for every problem)") \
            from None
    report_torn(door.ctx.source, door.torn)
    return door


def answer(args) -> int:
    """Open the door of ``args.path`` and print the answer ``args`` asks for."""
    door = _open(args.path)
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
        _print_grep(door.grep(args.pattern, args.turns, timeout_s=args.timeout), args.json)
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
            print(shown(json.dumps(rec, ensure_ascii=False)))


def _print_grep(ans: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(ans))
        return
    for h in ans["hits"]:
        print(f"{h['turn']:>7}: {shown(h['line'])}")
    n, total = len(ans["hits"]), ans["total"]
    more = f" (showing the first {GREP_HITS} — narrow it)" if total > n else ""
    print(f"{total} matching line{'s' if total != 1 else ''}{more}")
