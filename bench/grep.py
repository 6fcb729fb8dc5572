"""Benchmark: the transcript door's grep against ripgrep, its memory, and a read of a departed turn.

Builds (once, cached under ``bench/out/``) a run root of about ``--gb`` GB with ``bench/_corpus.py``:
a parent whose log holds most of the bytes and mnemon children whose ``Inherited`` records point
into it. The door greps child ``c1``'s whole lineage (every inherited turn, in the parent's file,
and its own); ripgrep counts matching lines (``rg -c``) in the same two files. Three patterns:

  (a) a rare literal   (b) a common literal   (c) a regex with no literal

Side by side in one run, median of ``--runs``: the door in-process (the folded table at hand, as
a live agent has it), ``mnemon transcript grep --json`` as a subprocess (which folds the logs
first), and ``rg -c``. Then the peak RSS growth of a grep over the transcript (measured in a
subprocess after the fold, with the kernel's high-water mark reset), and the median time of a
``read`` of one departed ~100 KB turn.

    python bench/grep.py [--gb 1.0] [--runs 3] [--children 2] [--rebuild]

Goals (docs/performance.md, "Transcript door"): (a) ≤ 2× rg, (b) ≤ 4×, (c) ≤ 10×; memory growth
≤ 64 MB; read of a 100 KB departed turn ≤ 5 ms. A benchmark, not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _corpus import RARE_TOKEN, build_corpus  # noqa: E402

PATTERNS = {
    "a_rare_literal": RARE_TOKEN,
    "b_common_literal": "return",
    "c_regex_no_literal": r"\d+\.\d+\.\d+",
}
GOALS = {"a_rare_literal": 2.0, "b_common_literal": 4.0, "c_regex_no_literal": 10.0}

MEMORY_PROBE = r"""
import gc, json, sys, time
sys.path.insert(0, {root!r})
from pathlib import Path
from mnemon.lineage.view import open_door

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
door = open_door(Path({agent!r}))
gc.collect()
before = status("VmRSS")
try:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset the peak RSS (VmHWM) to the current RSS
    reset = True
except OSError:
    reset = False
out = {{"rss_before": before, "hwm_reset": reset}}
for name, pattern in {patterns!r}.items():
    t = time.perf_counter()
    ans = door.grep(pattern, timeout_s=1e9)
    out[name] = {{"total": ans["total"], "s": time.perf_counter() - t,
                  "hwm_growth": status("VmHWM") - before}}
import tracemalloc
tracemalloc.start()
for name in ("a_rare_literal", "b_common_literal"):
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    door.grep({patterns!r}[name], timeout_s=1e9)
    out[name]["traced_peak"] = tracemalloc.get_traced_memory()[1] - base
print(json.dumps(out))
"""


def machine() -> dict:
    cpu = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    rg = subprocess.run(["rg", "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
            "platform": platform.platform(), "ripgrep": rg}


def median_time(fn, runs: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(runs):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def corpus(out: Path, gb: float, children: int, rebuild: bool) -> dict:
    d = out / f"corpus-{gb:g}g-{children}c"
    info_path = d / "corpus.json"
    if info_path.is_file() and not rebuild:
        return json.loads(info_path.read_text())
    if d.exists():
        shutil.rmtree(d)
    print(f"building a {gb:g} GB corpus under {d} …", file=sys.stderr)
    return build_corpus(d, int(gb * 1e9), children=children, verbose=True)


def main() -> None:
    ap = argparse.ArgumentParser(description="the door's grep against ripgrep")
    ap.add_argument("--gb", type=float, default=1.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--children", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "bench" / "out"))
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--skip-cli", action="store_true")
    a = ap.parse_args()
    if shutil.which("rg") is None:
        raise SystemExit("ripgrep (rg) is not installed: apt-get install -y ripgrep")

    info = corpus(Path(a.out), a.gb, a.children, a.rebuild)
    root = Path(info["root"])
    agent = root / "agents" / "c1"
    files = [str(root / "agents" / "p" / "record.jsonl"), str(agent / "record.jsonl")]
    lineage_bytes = sum(os.path.getsize(f) for f in files)
    for f in files:  # warm the page cache for everyone alike
        with open(f, "rb") as fh:
            while fh.read(1 << 24):
                pass

    from mnemon.lineage.view import open_door

    t = time.perf_counter()
    door = open_door(agent)
    fold_s = time.perf_counter() - t
    results: dict = {"machine": machine(), "lineage_bytes": lineage_bytes,
                     "turns": len(door.ctx.turns), "fold_s": round(fold_s, 2), "grep": {}}
    print(f"lineage of c1: {lineage_bytes / 1e9:.2f} GB, {len(door.ctx.turns)} turns, "
          f"fold {fold_s:.1f} s", file=sys.stderr)

    mnemon = [sys.executable, "-m", "mnemon"]
    for name, pattern in PATTERNS.items():
        rg_s, rg_out = median_time(lambda: subprocess.run(
            ["rg", "-c", "--no-filename", pattern, *files], capture_output=True, text=True).stdout,
            a.runs)
        door_s, ans = median_time(lambda: door.grep(pattern, timeout_s=1e9), a.runs)
        row = {"pattern": pattern, "total": ans["total"],  # type: ignore[index]
               "rg_lines": sum(int(x) for x in str(rg_out).split()),
               "rg_s": round(rg_s, 3), "door_s": round(door_s, 3),
               "door_x_rg": round(door_s / rg_s, 1), "goal_x": GOALS[name]}
        if not a.skip_cli:
            cli_s, _ = median_time(lambda: subprocess.run(
                [*mnemon, "transcript", "grep", str(agent), pattern, "--json",
                 "--timeout", "1e9"], capture_output=True, cwd=ROOT, check=True), a.runs)
            row["cli_s"] = round(cli_s, 3)
            row["cli_x_rg"] = round(cli_s / rg_s, 1)
        results["grep"][name] = row
        print(json.dumps({name: row}), file=sys.stderr)

    probe = MEMORY_PROBE.format(root=str(ROOT), agent=str(agent), patterns=PATTERNS)
    mem = json.loads(subprocess.run([sys.executable, "-c", probe], capture_output=True,
                                    text=True, check=True).stdout)
    results["memory"] = {"rss_before_mb": round(mem["rss_before"] / 2**20, 1),
                         "hwm_reset": mem["hwm_reset"],
                         "rss_growth_mb": {k: round(v["hwm_growth"] / 2**20, 1)
                                           for k, v in mem.items() if isinstance(v, dict)},
                         "traced_peak_mb": {k: round(v["traced_peak"] / 2**20, 1)
                                            for k, v in mem.items()
                                            if isinstance(v, dict) and "traced_peak" in v}}
    print(json.dumps({"memory": results["memory"]}), file=sys.stderr)

    big = [t for t in info["big_turns"] if door.ctx.turn(t) is not None]
    if big:
        tid = big[len(big) // 2]
        turn = door.ctx.turn(tid)
        times = []
        for _ in range(50):
            t = time.perf_counter()
            door.read([tid])
            times.append(time.perf_counter() - t)
        results["read"] = {"turn": tid, "held": turn.held, "bytes": turn.bytes,
                           "median_ms": round(statistics.median(times) * 1000, 2)}
        print(json.dumps({"read": results["read"]}), file=sys.stderr)

    results["command"] = " ".join(["python", "bench/grep.py", f"--gb {a.gb:g}",
                                   f"--runs {a.runs}", f"--children {a.children}"])
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / "grep-results.json").write_text(json.dumps(results, indent=1) + "\n")
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
