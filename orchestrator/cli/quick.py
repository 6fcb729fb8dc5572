"""The commands answered before the parser: ``mnemon --version``, ``mnemon transcript read DIR
--turns …``, a ``mnemon transcript grep DIR LITERAL`` with no hit and ``mnemon verify PATH
--head`` of whole chains (decision 0422) — each the same bytes and
exit code as the full command, from a process that imports no argparse, no msgspec, no record
Struct, no Trio, no structlog and no ``pathlib`` (decision 0460).

A user who types a door command waits mostly for imports: the door's answer itself costs a few
milliseconds on a checkpointed log, the imports of the full CLI tens of milliseconds on a slow
machine. So ``console`` asks here first. This module takes only the command lines whose meaning
it can read without argparse — exact words, no abbreviation, no option it does not know, no
word that starts with ``-`` where argparse might read an option — and answers only when the
answer is the door's: a read from a fold checkpoint that describes the whole log
(``session.door.quick``), a no-hit grep as ``lineage.nohit`` gives it. Everything else — a
refusal, a torn tail, no checkpoint, a record it would decode differently, an option it does not
know — returns None and the full CLI answers, with its own words. ``tests/door/test_quick.py``
runs both on every log the suite has and compares the bytes, and pins what this path imports.
"""

from __future__ import annotations

import os
import sys

LOG_LEVELS = ("debug", "info", "warning", "error")  # as the CLI's (and ``logs.LEVELS``)


def answered(argv: list[str]) -> int | None:
    """The exit code once the command on ``argv`` is answered here (its output written), or
    None when the full CLI must answer it (nothing written)."""
    if argv in (["--version"], ["-V"]):
        from ..._about import __version__

        sys.stdout.write(f"mnemon {__version__}\n")
        return 0
    if os.name != "posix":
        return None
    level = os.environ.get("MNEMON_LOG_LEVEL")
    if level is not None and level.strip().lower() not in LOG_LEVELS:
        return None  # the CLI names the bad setting
    if len(argv) >= 3 and argv[0] == "verify":
        return _heads(argv[1:])
    if len(argv) < 3 or argv[0] != "transcript":
        return None
    words = _words(argv[2:], {"--json": False, "--turns": True})
    if words is None:
        return None
    plain, opts = words
    as_json = "--json" in opts
    if argv[1] == "read" and len(plain) == 1 and "--turns" in opts:
        return _read(plain[0], opts["--turns"], as_json)
    if argv[1] == "grep" and len(plain) == 2 and "--turns" not in opts:
        return _grep(plain[0], plain[1], as_json)
    return None


def _words(argv: list[str], known: dict[str, bool]) -> tuple[list[str], dict[str, str]] | None:
    """``(positionals, options)`` of a door command's words, as argparse reads them — or None
    for anything argparse might read otherwise: an unknown or abbreviated option, ``--``, an
    option given twice, ``--opt=value``, or a value or positional that starts with ``-``."""
    plain: list[str] = []
    opts: dict[str, str] = {}
    i = 0
    while i < len(argv):
        w = argv[i]
        if w.startswith("-") or not w:
            if w not in known or w in opts:
                return None
            if known[w]:
                if i + 1 >= len(argv) or argv[i + 1].startswith("-") or not argv[i + 1]:
                    return None
                opts[w] = argv[i + 1]
                i += 2
                continue
            opts[w] = ""
        else:
            plain.append(w)
        i += 1
    return plain, opts


def _read(path: str, spec: str, as_json: bool) -> int | None:
    from ...lineage.outside import locate
    from ...session.door.quick import read_turns

    where = locate(path)
    if where is None:
        return None
    turns = read_turns(*where, spec)
    if turns is None:
        return None
    import json

    if as_json:
        sys.stdout.write(json.dumps(turns) + "\n")
        return 0
    from ..terminal import shown

    out = []
    for t in turns:
        out.append(f"== turn {t['turn']}  ({t['source']})\n")
        out.extend(shown(json.dumps(rec, ensure_ascii=False)) + "\n" for rec in t["records"])
    try:  # encoded whole before a byte is written: a stream that cannot take it gets nothing
        sys.stdout.write("".join(out))
    except UnicodeEncodeError:
        return None  # the CLI prints line by line and fails where it fails
    return 0


def _heads(argv: list[str]) -> int | None:
    """``mnemon verify PATH --head [--json]`` when every chain is whole: one pass of BLAKE3
    over each log, from ``lineage.heads`` (the full command for anything else)."""
    words = _words(argv, {"--json": False, "--head": False})
    if words is None:
        return None
    plain, opts = words
    if len(plain) != 1 or "--head" not in opts:
        return None
    from ...lineage.heads import quick_heads

    report = quick_heads(plain[0])
    if report is None:
        return None
    if "--json" in opts:
        import json

        sys.stdout.write(json.dumps(report) + "\n")
        return 0
    out = [f"{x['head']} {x['bytes']} {x['lines']} {x['chain']} {x['path']}\n"
           for x in report["logs"]]  # (paths of path-safe agent ids: nothing to escape)
    sys.stdout.write("".join(out) + f"{report['run']} run\n")
    return 0


def _grep(path: str, pattern: str, as_json: bool) -> int | None:
    from ...lineage.nohit import quick_miss

    if not quick_miss(path, pattern):
        return None
    sys.stdout.write('{"hits": [], "total": 0}\n' if as_json else "0 matching lines\n")
    return 0


__all__ = ["answered"]
