"""Where the benchmarks find their trajectories: the repository's own (``tests/data/trajectories``:
13 real sessions and 5 generated ones), or a larger corpus of the same neutral JSONL format named
by ``MNEMON_BENCH_CORPUS=DIR`` (or a bench's own ``--trajectories`` flag). One place, so no bench
names a path of one particular machine."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT / "tests" / "data" / "trajectories"
TRAJECTORIES = Path(os.environ.get("MNEMON_BENCH_CORPUS") or DEFAULT)


def announce(path: Path = TRAJECTORIES) -> None:
    """One line on stderr: which corpus this run reads, and what a larger one would add."""
    n = len(list(path.glob("*.jsonl")))
    if path.resolve() == DEFAULT.resolve():
        sys.stderr.write(f"corpus: the repository's {n} trajectories (tests/data/trajectories); "
                         "MNEMON_BENCH_CORPUS=DIR runs on a larger set, nothing is skipped without it\n")
    else:
        sys.stderr.write(f"corpus: {n} trajectories in {path}\n")
