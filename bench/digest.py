"""Benchmark: BLAKE3 digests of many JSONL lines, per-record binding vs ``session.native``.

Builds ~``--mb`` MB of lines in memory: the dev trajectories' lines
(``tests/data/trajectories/*.jsonl``, or ``MNEMON_BENCH_CORPUS``) repeated, or, with ``--random`` or when they are
missing, random records of 300 B - 5 KB. Prints side by side, median of ``--runs``, in GB/s and
µs per record:

  * ``blake3(line).digest(length=8)`` per record from Python (what the fold did before)
  * ``digest_many`` (one native call; the hex strings included)
  * ``verify_many`` (hashing and comparing, no strings built)
  * ``split_lines`` (finding the lines: the other half of the fold's native work)
  * one ``blake3(whole buffer)``: the single-input ceiling, all lanes busy on one input

    python bench/digest.py [--mb 200] [--runs 5] [--random] [--kernel avx512|avx2|portable]

Goal: digest_many ≥ 3 GB/s single-threaded on ~1.4 KB records. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import sys
import time
from pathlib import Path

import blake3

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mnemon.session import native  # noqa: E402

from _data import TRAJECTORIES as DEV, announce  # noqa: E402  (the repository's, or MNEMON_BENCH_CORPUS)


def build(mb: int, use_random: bool) -> tuple[bytes, str]:
    target = mb << 20
    files = sorted(DEV.glob("*.jsonl")) if not use_random else []
    if files:
        lines = [ln for f in files for ln in f.read_bytes().splitlines() if ln]
        what = f"dev trajectories ({len(files)} files, {len(lines)} lines) repeated"
    else:
        rnd = random.Random(7)
        lines = [b'{"x":"' + rnd.randbytes(n // 2).hex().encode()[:n] + b'"}'
                 for n in (rnd.randrange(300, 5000) for _ in range(20_000))]
        what = "random records of 300 B - 5 KB"
    block = b"\n".join(lines) + b"\n"
    return block * max(1, target // len(block)), what


def timed(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--random", action="store_true", help="random 300 B - 5 KB records")
    ap.add_argument("--kernel", help="force one of the extension's kernels")
    args = ap.parse_args()
    announce()

    buf, what = build(args.mb, args.random)
    offs, lens = native.split_lines(buf)
    n, total = len(offs), sum(lens)
    print(f"{what}: {len(buf) / 1e6:.0f} MB, {n} lines, mean {total / n:.0f} B, "
          f"median {statistics.median(lens):.0f} B")
    print(f"python {platform.python_version()}, blake3 binding {blake3.__version__}, "
          f"native: {native.AVAILABLE}", end="")
    if native.AVAILABLE:
        from mnemon.session import _b3many
        if args.kernel:
            _b3many._set_kernel(args.kernel)
        kernel = _b3many._set_kernel("portable")
        _b3many._set_kernel(kernel)
        print(f", kernel {kernel}", end="")
    print(f"; median of {args.runs}")

    want = native.digest_many(buf, offs, lens)
    assert want == [blake3.blake3(buf[o:o + k]).digest(length=8).hex()
                    for o, k in zip(offs[:2000], lens[:2000])] + want[2000:]
    assert native.verify_many(buf, offs, lens, want) == -1

    mv = memoryview(buf)
    b3 = blake3.blake3

    def per_record():
        for o, k in zip(offs, lens):
            b3(mv[o:o + k]).digest(length=8).hex()

    rows = [
        ("per-record blake3 binding", lambda: per_record(), total),
        ("digest_many", lambda: native.digest_many(buf, offs, lens), total),
        ("verify_many", lambda: native.verify_many(buf, offs, lens, want), total),
        ("split_lines", lambda: native.split_lines(buf), len(buf)),
        ("blake3(whole buffer) ceiling", lambda: b3(buf).digest(), len(buf)),
    ]
    print(f"{'':32}{'GB/s':>8}{'µs/record':>12}{'s':>9}")
    for name, fn, nbytes in rows:
        t = timed(fn, args.runs)
        print(f"{name:32}{nbytes / t / 1e9:8.2f}{t / n * 1e6:12.3f}{t:9.3f}")


if __name__ == "__main__":
    main()
