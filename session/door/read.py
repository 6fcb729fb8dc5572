"""``transcript read``: each wanted turn's records, digest-checked, from whichever file holds them.

Files are opened through the caller's ``sources`` — a callable ``source → binary file`` (see
``session.paths.Sources``): the door never finds an ancestor file on its own. A file that cannot
be opened refuses only the turns that need it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, BinaryIO

import msgspec

from ..errors import AncestorUnreadable, LogCorrupt, Refusal, SessionError
from ..log import digest
from ..records import DECODE_ERRORS, Record, decode
from .turns import Want

Opener = Callable[[str], BinaryIO]
"""What the door reads through: a pointer's source (relative to the run root) → an open file."""


def refuse(tid: int | None, e: SessionError) -> Refusal:
    """A pointer or file problem as one line naming the path."""
    who = f"turn {tid}: " if tid is not None else ""
    if isinstance(e, AncestorUnreadable):
        return Refusal(f"{who}cannot read {e.path}: {e.why}")
    if isinstance(e, LogCorrupt):
        return Refusal(f"{who}cannot read {e.path} at offset {e.offset}: {e.why}")
    return Refusal(f"{who}{e}")


def open_source(sources: Opener, source: str, tid: int | None = None):
    """Open one source through the caller's opener; any failure is a refusal naming it."""
    try:
        return sources(source)
    except SessionError as e:
        raise refuse(tid, e) from None
    except OSError as e:
        who = f"turn {tid}: " if tid is not None else ""
        raise Refusal(f"{who}cannot read {source}: {e.strerror or e}") from None


def _by_source(wants: Sequence[Want]) -> list[tuple[str, list[tuple[int, int, str, int, int]]]]:
    """Loci grouped by file, each group sorted by offset, the groups in turn order.

    An entry is ``(offset, length, digest, want index, record index)``.
    """
    groups: dict[str, list[tuple[int, int, str, int, int]]] = {}
    first: dict[str, int] = {}
    for wi, (_, source, loci) in enumerate(wants):
        g = groups.get(source)
        if g is None:
            g = groups[source] = []
            first[source] = wi
        for ri, (off, length, dig) in enumerate(loci):
            g.append((off, length, dig, wi, ri))
    for g in groups.values():
        g.sort()
    return [(s, groups[s]) for s in sorted(groups, key=first.__getitem__)]


def check(source: str, off: int, length: int, want: str, raw) -> None:
    if len(raw) != length:
        raise Refusal(f"cannot read {source} at offset {off}: the file ends before this record "
                      f"({length} bytes)")
    got = digest(raw)
    if got != want:
        raise Refusal(f"cannot read {source} at offset {off}: digest mismatch (expected {want}, "
                      f"found {got}): the file was edited, rotated or copied over")


def read_wants(sources: Opener, wants: Sequence[Want]) -> list[dict]:
    """Each wanted turn's records, as objects exactly as in the file (no lock needed)."""
    out: list[list[Any]] = [[None] * len(w[2]) for w in wants]
    for source, entries in _by_source(wants):
        with open_source(sources, source) as f:
            size = os.fstat(f.fileno()).st_size
            for off, length, want, wi, ri in entries:
                f.seek(off)
                raw = f.read(length) if off + length <= size else b""  # a claimed length is not trusted
                check(source, off, length, want, raw)
                try:
                    rec = msgspec.json.decode(raw)
                    if type(rec) is dict:  # the chain's keys are the log's, not the record's
                        rec.pop("c", None)
                        rec.pop("chain", None)
                    out[wi][ri] = rec
                except DECODE_ERRORS as e:
                    raise Refusal(f"cannot read {source} at offset {off}: not a record ({e})"
                                  ) from None
    return [{"turn": w[0], "source": w[1], "records": recs} for w, recs in zip(wants, out)]




def load_records(sources: Opener, want: Want) -> list[Record]:
    """One turn's records as typed records (digest-checked before each is parsed)."""
    _, source, loci = want
    out: list[Record] = []
    with open_source(sources, source) as f:
        size = os.fstat(f.fileno()).st_size
        for off, length, dig in loci:
            f.seek(off)
            raw = f.read(length) if off + length <= size else b""  # a claimed length is not trusted
            check(source, off, length, dig, raw)
            try:
                out.append(decode(raw))
            except DECODE_ERRORS as e:
                raise Refusal(f"cannot read {source} at offset {off}: not a record ({e})"
                              ) from None
    return out
