"""Benchmark: ``session._scan.count_literal`` against decode + ``_texts`` + ``_Matcher.count``.

Takes the first ``--mb`` MB of whole records of a parent log built by ``bench/_corpus.py`` (the
grep bench's ``bench/out/corpus-1g-2c`` when present, else a corpus of that size is built under
``bench/out/corpus-scan-<mb>m``), and counts a common literal and a rare one both ways over every
record: median of ``--runs``, MB/s and µs per record, and how many records the scanner left to
Python (-1). Checks that both ways give the same total.

    python bench/scan.py [--mb 200] [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from array import array
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _corpus import RARE_TOKEN, build_corpus  # noqa: E402

from mnemon.session import _scan  # noqa: E402
from mnemon.session.door import _Matcher, _texts  # noqa: E402
from mnemon.session.records import decode  # noqa: E402

LITERALS = {"common": "the", "rare": RARE_TOKEN}


def load(mb: float) -> tuple[bytes, array, array]:
    want = int(mb * 1e6)
    src = ROOT / "bench" / "out" / "corpus-1g-2c" / "agents" / "p" / "record.jsonl"
    if not src.exists() or src.stat().st_size < want:
        d = ROOT / "bench" / "out" / f"corpus-scan-{mb:g}m"
        src = d / "agents" / "p" / "record.jsonl"
        if not src.exists():
            print(f"building a {mb:g} MB corpus under {d} …", file=sys.stderr)
            build_corpus(d, int(want * 1.05), children=0, verbose=True)
    with open(src, "rb") as f:
        buf = f.read(want)
    buf = buf[:buf.rfind(b"\n") + 1]
    offs, lens = array("q"), array("q")
    o = 0
    while o < len(buf):
        e = buf.index(b"\n", o)
        offs.append(o)
        lens.append(e - o)
        o = e + 1
    return buf, offs, lens


def timed(fn, runs: int):
    times, out = [], None
    for _ in range(runs):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def python_way(buf: bytes, offs, lens, lit: str) -> int:
    m = _Matcher(lit, 5.0, True)
    mv = memoryview(buf)
    n = 0
    for o, ln in zip(offs, lens):
        n += sum(m.count(t) for t in _texts(decode(mv[o:o + ln])))
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=200)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    buf, offs, lens = load(a.mb)
    n, mb = len(offs), len(buf) / 1e6
    print(f"{mb:.0f} MB, {n} records ({len(buf) / n:.0f} B average); median of {a.runs}")
    for name, lit in LITERALS.items():
        tc, res = timed(lambda: _scan.count_literal(buf, offs, lens, lit.encode()), a.runs)
        unsure = sum(1 for r in res if r < 0)
        m = _Matcher(lit, 5.0, True)
        mv = memoryview(buf)
        total = sum(r if r >= 0 else sum(m.count(t) for t in _texts(decode(mv[o:o + ln])))
                    for r, o, ln in zip(res, offs, lens))
        tp, want = timed(lambda: python_way(buf, offs, lens, lit), max(1, min(a.runs, 3)))
        assert total == want, (name, total, want)
        print(f"{name:6} {lit!r}: {want} matching lines, {unsure} records uncertain (-1)")
        print(f"  count_literal      {tc:7.3f} s  {mb / tc:8.0f} MB/s  {tc / n * 1e6:6.3f} µs/record")
        print(f"  decode+_texts+count{tp:7.3f} s  {mb / tp:8.0f} MB/s  {tp / n * 1e6:6.3f} µs/record"
              f"  ({tp / tc:.0f}x)")


if __name__ == "__main__":
    main()
