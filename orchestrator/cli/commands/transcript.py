"""``mnemon transcript index|read|grep DIR …`` — the transcript door, from outside.

Reading from outside, the CLI may read an agent's unclosed turn. Files are never modified: a torn
tail is reported on stderr and what is complete is read.

A grep for a plain literal that no file of the lineage holds is answered by ``lineage.nohit``
(the door's own answer, reached without the fold or a decoder); everything else by the door
(``orchestrator.transcripts``), imported only then, for its import cost.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ....lineage.nohit import NO_HITS, quick_miss
from ....session.constants import GREP_TIMEOUT_S

from .. import COMMANDS
from ....errors import UserError


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


def run(args) -> int:
    if args.door == "grep":
        if not args.timeout > 0:
            raise UserError("--timeout must be a positive number of seconds")
        if args.turns is None and quick_miss(Path(args.path), args.pattern):
            print(json.dumps(NO_HITS) if args.json else "0 matching lines")
            return 0
    from ... import transcripts  # the door, the fold and msgspec: only when they answer

    return transcripts.answer(args)
