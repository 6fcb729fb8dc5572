"""Benchmark: what the log's hash chain costs (issue #49; decision 0420).

    python bench/chain.py [--mb 300] [--runs 5] [--dir /tmp/mnemon-bench-chain] [--base DIR]

Three figures:

(a) **The writer**: µs per ``RecordLog.append`` of realistic records (the trajectories of
    ``tests/data/trajectories``), unchained, chained on every record (the format), and chained on
    every 64th record (the alternative weighed in decision 0420: a running BLAKE3 state updated
    on every record, a key spliced into one record in 64), best of ``--runs``; and the bytes
    each adds per record.
(b) **Verifying a log of ``--mb`` MB** (written chained through ``AgentLog``): BLAKE3 of its
    bytes in Python (the bare cost: 4 MiB reads, BLAKE3's own threads), ``session.chain.check``
    (one pass, the chain whole), ``mnemon verify --head`` in a process and the floor of a
    process (``python -c pass``), best of ``--runs``.
(c) With ``--base DIR`` (an export of the commit before the chain, importable as ``mnemon``
    from ``DIR/pkg``): ``mnemon verify`` of the same-sized log before and after, in one run;
    and with ``--fold-mb M`` the refold of an M MB log (``bench/fold.py``'s, written by each
    version) before and after: ``AgentLog.resume`` (the chain hashed and checked, then the
    fold) and the read-only ``fold_file``, each in a fresh process, alternating, best and
    median of ``--runs``.

States the file system the log is on (``df``). A benchmark, not a test: it prints and exits 0.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import blake3  # noqa: E402

from mnemon.session import chain  # noqa: E402
from mnemon.session.log import RecordLog, digest as log_digest  # noqa: E402
from mnemon.session.records import encode  # noqa: E402

import fold as foldbench  # noqa: E402  (its realistic records and its log writer)


def records(n: int) -> list:
    """``n`` realistic records (prompts, messages, tool results), as the fold bench makes them."""
    from mnemon.session.agentlog import AgentLog
    from mnemon.session.records import SessionStarted

    trajs = foldbench.load_trajectories()
    tmp = Path("/tmp/mnemon-bench-chain-recs/agents/a1/record.jsonl")
    shutil.rmtree(tmp.parents[2], ignore_errors=True)
    log = AgentLog.create(tmp, "agents/a1/record.jsonl", SessionStarted(agent="a1"))
    out: list = []
    k = 0
    while len(out) < n:
        for kind, rec in foldbench.records_of(trajs[k % len(trajs)][1:], log):
            if kind == "result" and rec.results[0].tool_use_id not in log.ctx.pending:
                continue
            log.append(rec)
            out.append(rec)
        k += 1
    log.close()
    shutil.rmtree(tmp.parents[2], ignore_errors=True)
    return out[:n]


class EveryN(chain.Running):
    """The alternative: the state updated on every record, a key on one record in ``N``."""

    N = 64

    def sealed(self, line: bytes) -> tuple[bytes, str]:
        self.n += 1
        if self.n % self.N:
            data = line + b"\n"
            self.h.update(data)
            return data, log_digest(line)
        self.n -= 1
        return super().sealed(line)


def time_writer(recs: list, folder: Path, runs: int) -> dict:
    lines = [encode(r) for r in recs]
    out = {}
    for name, make in (("unchained", None), ("every record", chain.Running),
                       ("every 64th", EveryN)):
        best = float("inf")
        size = 0
        for _ in range(runs):
            path = folder / f"w-{name.replace(' ', '-')}.jsonl"
            if path.exists():
                path.unlink()
            log = RecordLog(path, new=True, chain=make is not None)
            if make is EveryN:
                log._chain = EveryN()
            t0 = time.process_time()  # CPU: the figure that load on the machine moves least
            for line in lines:
                log.append_line(line)
            dt = time.process_time() - t0
            size = log.size
            log.close()
            path.unlink()
            best = min(best, dt)
        out[name] = (best / len(lines) * 1e6, size)
    base = out["unchained"][1]
    for name, (us, size) in out.items():
        print(f"  append, {name:>12}: {us:6.2f} µs CPU/record  (+{(size - base) / len(lines):5.1f} "
              "bytes/record)")
    return out


def bare_blake3(path: Path) -> tuple[float, float]:
    """BLAKE3 of the file's bytes, mapped, in one call (as ``b3sum`` does): (wall, CPU) s."""
    import mmap

    t0, c0 = time.perf_counter(), time.process_time()
    h = blake3.blake3(max_threads=blake3.blake3.AUTO)
    with open(path, "rb", buffering=0) as f, \
            mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as mm:
        h.update(mm)
    h.digest()
    return time.perf_counter() - t0, time.process_time() - c0


def timed(fn) -> tuple[float, float]:
    t0, c0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t0, time.process_time() - c0


def best(fn, runs: int) -> tuple[float, float]:
    """The best wall time and the best CPU time (user + system, every thread) of ``runs``."""
    got = [fn() for _ in range(runs)]
    return min(g[0] for g in got), min(g[1] for g in got)


def proc(argv: list[str], env: dict | None = None) -> tuple[float, float]:
    """A process's wall time and its CPU time (its children's rusage)."""
    r0 = os.times()
    t0 = time.perf_counter()
    subprocess.run(argv, check=False, stdout=subprocess.DEVNULL, env=env)
    r1 = os.times()
    return (time.perf_counter() - t0,
            (r1.children_user - r0.children_user) + (r1.children_system - r0.children_system))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=300)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--records", type=int, default=20000)
    ap.add_argument("--dir", default="/tmp/mnemon-bench-chain")
    ap.add_argument("--base", help="an export of the commit before the chain (DIR/pkg/mnemon)")
    ap.add_argument("--parts", default="abcd", help="which figures (letters) to measure")
    ap.add_argument("--fold-mb", type=float, default=0,
                    help="with --base: the refold of a log of this size before and after")
    args = ap.parse_args()
    folder = Path(args.dir)
    folder.mkdir(parents=True, exist_ok=True)
    fs = subprocess.run(["df", "-T", str(folder)], capture_output=True, text=True).stdout
    print("file system:", " ".join(fs.splitlines()[-1].split()[:2]))
    if "a" in args.parts:
        print(f"(a) the writer, {args.records} realistic records, best of {args.runs}")
        time_writer(records(args.records), folder, args.runs)
    if "b" in args.parts or "c" in args.parts:
        verify_figures(args, folder)
    if args.base and args.fold_mb and "d" in args.parts:
        fold_before_after(Path(args.base), folder, args.fold_mb, args.runs)
    return 0


def verify_figures(args, folder: Path) -> None:
    log = folder / "run" / "agents" / "a1" / "record.jsonl"
    foldbench.write_log(log, int(args.mb * 1024 * 1024))
    (folder / "run" / "run.json").write_text('{"format": 1}')
    size = log.stat().st_size
    print(f"(b) a chained log of {size / 1e6:.1f} MB, best of {args.runs}")
    bare = best(lambda: bare_blake3(log), args.runs)
    chk = best(lambda: timed(lambda: chain.check(log, "a1")), args.runs)
    floor = best(lambda: proc([sys.executable, "-c", "pass"]), args.runs)
    mn = str(Path(sys.executable).with_name("mnemon"))  # this environment's console script
    if not os.path.exists(mn):
        mn = shutil.which("mnemon") or "mnemon"
    head = best(lambda: proc([mn, "verify", str(folder / "run"), "--head"]), args.runs)
    print("  (wall s / CPU s, each the best of the runs)")
    print(f"  BLAKE3 of its bytes (bare):        {bare[0]:.3f} / {bare[1]:.3f}")
    print(f"  session.chain.check:               {chk[0]:.3f} / {chk[1]:.3f}  = "
          f"{chk[0] / bare[0]:.2f}x / {chk[1] / bare[1]:.2f}x bare")
    print(f"  mnemon verify --head (a process):  {head[0]:.3f} / {head[1]:.3f}; floor (python -c "
          f"pass) {floor[0]:.3f} / {floor[1]:.3f}; less the floor = "
          f"{(head[0] - floor[0]) / bare[0]:.2f}x / {(head[1] - floor[1]) / bare[1]:.2f}x bare")
    if args.base and "c" in args.parts:
        env = {**os.environ, "PYTHONPATH": str(Path(args.base) / "pkg")}
        runs = max(1, min(args.runs, 3))
        code = "import sys; from mnemon.orchestrator.cli import main; sys.exit(main(sys.argv[1:]))"
        argv = [sys.executable, "-c", code, "verify", str(folder / "run")]
        got: dict[str, list] = {"before": [], "after": []}
        for _ in range(runs):
            got["before"].append(proc(argv, env))
            got["after"].append(proc(argv))
        b = (min(x[0] for x in got["before"]), min(x[1] for x in got["before"]))
        a = (min(x[0] for x in got["after"]), min(x[1] for x in got["after"]))
        print(f"(c) mnemon verify (refold + chain) of the same log, best of {runs} alternating, "
              f"wall / CPU: before {b[0]:.3f} / {b[1]:.3f} s, after {a[0]:.3f} / {a[1]:.3f} s = "
              f"{a[0] / b[0]:.3f}x / {a[1] / b[1]:.3f}x")
    shutil.rmtree(folder / "run", ignore_errors=True)


WRITE = """
import sys; sys.path.insert(0, {bench!r})
from pathlib import Path
import fold
fold.write_log(Path({path!r}), int({mb} * 1024 * 1024))
"""
TIME = """
import gc, sys, time
from pathlib import Path
from mnemon.session.agentlog import AgentLog
from mnemon.session.resume import fold_file
path = Path({path!r})
t0, c0 = time.perf_counter(), time.process_time()
if {resume}:
    a, _ = AgentLog.resume(path, "agents/a1/record.jsonl")
else:
    a = fold_file(path, "agents/a1/record.jsonl")
print(time.perf_counter() - t0, time.process_time() - c0)
"""


def fold_before_after(base: Path, folder: Path, mb: float, runs: int) -> None:
    import statistics

    envs = {"before": {**os.environ, "PYTHONPATH": str(base / "pkg")}, "after": dict(os.environ)}
    paths = {}
    for name, env in envs.items():
        path = folder / name / "run" / "agents" / "a1" / "record.jsonl"
        subprocess.run([sys.executable, "-c", WRITE.format(bench=str(ROOT / "bench"),
                                                           path=str(path), mb=mb)],
                       check=True, env=env, stdout=subprocess.DEVNULL)
        paths[name] = path
    print(f"(d) refold of a {mb:.0f} MB log (before: {paths['before'].stat().st_size / 1e6:.1f} "
          f"MB unchained; after: {paths['after'].stat().st_size / 1e6:.1f} MB chained), "
          f"{runs} alternating runs")
    for what in ("resume", "fold_file"):
        got: dict[str, list[tuple[float, float]]] = {"before": [], "after": []}
        for _ in range(runs):
            for name, env in envs.items():
                out = subprocess.run([sys.executable, "-c", TIME.format(
                    path=str(paths[name]), resume=what == "resume")], check=True, env=env,
                    capture_output=True, text=True).stdout.split()
                got[name].append((float(out[-2]), float(out[-1])))
        for i, unit in ((0, "wall"), (1, "CPU")):
            b = [x[i] for x in got["before"]]
            a = [x[i] for x in got["after"]]
            print(f"  {what:>9} {unit:>4}: best {min(b):.3f} → {min(a):.3f} s = "
                  f"{min(a) / min(b):.3f}x; median {statistics.median(b):.3f} → "
                  f"{statistics.median(a):.3f} s = {statistics.median(a) / statistics.median(b):.3f}x")
    for name in envs:
        shutil.rmtree(folder / name, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
