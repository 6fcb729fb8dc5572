"""``transcript read`` from outside without a decoder: the named turns' records, from the fold
checkpoint and the log's bytes, for a process that imports no msgspec, no record Struct and no
``pathlib`` (``orchestrator.cli.quick``; decision 0460).

The door from outside answers a read from the checkpoint when it describes the whole log
(``checkpoint.reopening.open_table``): the turn found among the table's ids, its loci read from
the per-record columns (each block digest-checked before it is believed), each record read from
the file its source names (confined to the run root), digest-checked, and decoded to plain
values. ``read_turns`` takes the same steps on the same bytes — the header and the key checked
as ``checkpoint.header`` checks them for ``table.load``, each column block it reads checked
against the header's digest — and decodes with ``json`` instead of msgspec. It answers only
where that cannot differ from the door's answer; anything else returns None and the door
answers (or refuses, in its own words): a checkpoint that does not describe the whole log, a
column or record that does not check out, a turn not recorded, a source that cannot be
confined, a record ``json`` reads where msgspec might read otherwise or not at all
(``NaN``, a number out of a float's range, a ``\\u`` escape of a surrogate, bytes that are not
UTF-8, a number of more digits than ``int`` takes).
"""

from __future__ import annotations

import bisect
import json
import os

from .. import native
from ..checkpoint.header import MAGIC, SUFFIX, Stale, check_key, read_frame

BLOCK = 1 << 20
"""``checkpoint.layout.CHECK_BLOCK`` (the file format's block size; layout imports msgspec, so
it is repeated here, and ``tests/door/test_quick.py`` holds the two equal)."""

COLUMNS = {"ids": 8, "srcs": 4, "lstart": 8, "loff": 8, "llen": 8, "ldig": 1}
"""The columns a read uses and their item sizes (int64, int32, int64, int64, int64, bytes)."""


class _Decline(Exception):
    """This path cannot be sure of the door's answer: the door gives it."""


def read_turns(root: str, agent: str, spec: str) -> list[dict] | None:
    """The door's ``read`` of the turns ``spec`` names (``"3,5-9"``) in the log of ``agent``
    under the resolved run root ``root``, as ``mnemon transcript read`` prints it; None when
    the door must answer."""
    if not native.AVAILABLE:
        return None  # without the batch hasher the digests need the blake3 package: the door
    want = _parse(spec)
    if want is None:
        return None
    src = f"agents/{agent}/record.jsonl"
    log = os.path.join(root, src)
    try:
        with open(log + SUFFIX, "rb", buffering=0) as f:
            cols = _Columns(f, *_frame(log, src))
            ids = cols.view("ids", 0, cols.n)
            positions = _select(ids, want)
            out = []
            reads: list[tuple[str, int, int, str, list, int]] = []
            for i in positions:
                s = cols.ints("srcs", i, i + 1)[0]
                if not 0 <= s < len(cols.sources):
                    return None
                a, b = cols.ints("lstart", i, i + 2)
                if not 0 <= a <= b <= cols.records:
                    return None
                recs: list = [None] * (b - a)
                source = cols.sources[s]
                out.append({"turn": ids[i], "source": source, "records": recs})
                offs, lens = cols.ints("loff", a, b), cols.ints("llen", a, b)
                digs = cols.raw("ldig", 8 * a, 8 * b)
                for r in range(b - a):
                    reads.append((source, offs[r], lens[r], digs[8 * r:8 * r + 8].hex(), recs, r))
        _read(root, reads)
        return out
    except (_Decline, Stale, OSError, ValueError, TypeError, KeyError, IndexError,
            RecursionError, OverflowError):
        return None


def _frame(log: str, src: str) -> tuple[dict, int, dict]:
    """``(arrays, where the header starts, the header)`` of the log's checkpoint, checked as
    ``table.load`` checks it, and only while it covers the whole log (nothing appended since,
    no torn tail: the door would catch up by folding)."""
    head, h0 = read_frame(log + SUFFIX)
    key = head["key"]
    if head["source"] != src or not isinstance(key, list) or len(key) != 4:
        raise _Decline
    first, last, end, lines = key
    for k in (first, last):
        if not isinstance(k, list) or len(k) != 3 or not _ints(k[:2]) or type(k[2]) is not str:
            raise _Decline
    if not _ints([end, lines]) or os.stat(log).st_size != end:
        raise _Decline
    arrays = head["arrays"]
    if not isinstance(arrays, dict):
        raise _Decline
    for v in arrays.values():
        if not isinstance(v, list) or len(v) != 3 or not _ints(v[:2]) or \
                not isinstance(v[2], list) or not all(type(d) is str for d in v[2]):
            raise _Decline
        off, n, _ = v
        if off < len(MAGIC) or n < 0 or off + n > h0:
            raise _Decline  # the door's load: Stale, then a fold
    check_key(log, first, last, end)
    return arrays, h0, head


def _ints(xs) -> bool:
    return all(type(x) is int for x in xs)


class _Columns:
    """The checkpoint's columns a read uses, read block by block with ``pread``, each block
    checked against its digest in the header before any of it is used (as ``Table.need``)."""

    def __init__(self, f, arrays: dict, h0: int, head: dict):
        self.fd = f.fileno()
        self.arrays = arrays
        self.blocks: dict[tuple[str, int], bytes] = {}
        for name, size in COLUMNS.items():
            off, n, digs = arrays[name]
            if (size > 1 and (off % 8 or n % size)) or len(digs) != max(1, -(-n // BLOCK)):
                raise _Decline
        sources = head["state"]["sources"]
        if not isinstance(sources, list) or not all(type(s) is str for s in sources):
            raise _Decline
        self.sources: list[str] = sources
        self.n = arrays["ids"][1] // 8
        self.records = arrays["loff"][1] // 8
        if arrays["srcs"][1] != 4 * self.n or arrays["lstart"][1] != 8 * (self.n + 1) or \
                arrays["llen"][1] != 8 * self.records or arrays["ldig"][1] != 8 * self.records:
            raise _Decline
        if self.ints("lstart", self.n, self.n + 1)[0] != self.records:
            raise _Decline

    def _block(self, name: str, x: int) -> bytes:
        got = self.blocks.get((name, x))
        if got is None:
            off, n, digs = self.arrays[name]
            size = min(BLOCK, n - x * BLOCK)
            got = os.pread(self.fd, size, off + x * BLOCK) if size > 0 else b""
            if len(got) != max(size, 0) or \
                    native.digest_many(got, (0,), (len(got),))[0] != digs[x]:
                raise Stale(f"a damaged column ({name})")
            self.blocks[(name, x)] = got
        return got

    def raw(self, name: str, a: int, b: int) -> bytes:
        """Bytes ``[a, b)`` of a column, every block they touch checked."""
        if a >= b:
            return b""
        return b"".join(self._block(name, x)[max(a - x * BLOCK, 0):b - x * BLOCK]
                        for x in range(a // BLOCK, (b - 1) // BLOCK + 1))

    def view(self, name: str, a: int, b: int) -> memoryview:
        """Items ``[a, b)`` of an integer column (native byte order, as the writer's arrays)."""
        size = COLUMNS[name]
        return memoryview(self.raw(name, a * size, b * size)).cast("q" if size == 8 else "i")

    def ints(self, name: str, a: int, b: int) -> list[int]:
        return self.view(name, a, b).tolist()


def _parse(spec: str) -> list[tuple[int, int]] | None:
    """``"3,5-9"`` as inclusive ranges (an id as a range of one), for the spellings whose
    meaning is plain — ASCII digits, one dash, commas, spaces around — else None (the door
    parses, and refuses in its words)."""
    out = []
    for item in spec.split(","):
        s = item.strip()
        if not s:
            continue
        a, dash, b = s.partition("-")
        if not (a.isascii() and a.isdigit()) or (dash and not (b.isascii() and b.isdigit())):
            return None
        lo, hi = int(a), int(b) if dash else int(a)
        if lo > hi:
            return None
        out.append((lo, hi) if dash else (lo, -1))
    return out or None


def _select(ids, want: list[tuple[int, int]]) -> list[int]:
    """Positions of the named turns in id order, as ``door.turns.select`` chooses them for the
    door from outside (no turn in hand), by the same bisections over the same checked column;
    an id not recorded is the door's to refuse."""
    chosen: set[int] = set()
    for lo, hi in want:
        if hi < 0:
            i = bisect.bisect_left(ids, lo)
            if i >= len(ids) or ids[i] != lo:
                raise _Decline
            chosen.add(i)
        else:
            chosen.update(range(bisect.bisect_left(ids, lo), bisect.bisect_right(ids, hi)))
    return sorted(chosen)


def confined(root: str, source: str, real_root: str) -> str | None:
    """The file a pointer's ``source`` names, as ``session.paths.confine`` resolves it inside
    the run root (``real_root``: the root, resolved); None wherever ``confine`` would refuse."""
    if not source or source.startswith(("/", "\\")) or "\x00" in source or \
            (len(source) > 1 and source[1] == ":" and source[0].isascii() and source[0].isalpha()):
        return None
    if ".." in source.split("/"):
        return None
    try:
        real = os.path.realpath(os.path.join(real_root, source), strict=True)
    except (OSError, ValueError):
        return None
    inside = real_root if real_root.endswith("/") else real_root + "/"
    if real != real_root and not real.startswith(inside):
        return None
    return real if os.path.isfile(real) else None


def _read(root: str, reads: list[tuple[str, int, int, str, list, int]]) -> None:
    """Each record read, digest-checked and decoded into its place, file by file."""
    real_root = os.path.realpath(root)
    by_source: dict[str, list] = {}
    for r in reads:
        by_source.setdefault(r[0], []).append(r)
    for source, group in by_source.items():
        path = confined(root, source, real_root)
        if path is None:
            raise _Decline
        with open(path, "rb", buffering=0) as f:
            size = os.fstat(f.fileno()).st_size
            for _, off, length, dig, recs, at in sorted(group, key=lambda r: r[1]):
                if off < 0 or length < 0 or off + length > size:
                    raise _Decline
                raw = os.pread(f.fileno(), length, off)
                if len(raw) != length or native.digest_many(raw, (0,), (length,))[0] != dig:
                    raise _Decline
                recs[at] = _decode(raw)


def _decode(raw: bytes):
    """A record's JSON as msgspec decodes it (plain values) — or ``_Decline`` where ``json``
    might read it otherwise."""
    text = raw.decode("utf-8")  # strict, as msgspec: else ValueError, and the door answers
    if "\\ud" in text or "\\uD" in text:
        raise _Decline  # a surrogate escape: msgspec refuses a lone one, json takes it
    rec = json.loads(text, parse_constant=_constant, parse_float=_float)
    if type(rec) is dict:  # the chain's keys are the log's, not the record's (as door/read.py)
        rec.pop("c", None)
        rec.pop("chain", None)
    return rec


def _constant(name: str):
    raise _Decline  # NaN, Infinity: not JSON to msgspec


def _float(s: str) -> float:
    x = float(s)
    if x in (float("inf"), float("-inf")):
        raise _Decline  # msgspec: "number out of range"
    return x


__all__ = ["read_turns", "confined", "BLOCK"]
