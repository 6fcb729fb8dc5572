"""The CLI's start, whole process, side by side in one run: ``mnemon --version`` and ``--help``
against ``python -c pass`` (the floor), and the door on a long log — one turn read, the index, a
no-hit grep of a literal — with the grep paired against ``rg -c`` on the same file.

Every figure is a whole process timed from outside (start to exit), the median of ``--runs``
runs, the commands taken in turn (A B A B …) so a ratio is taken pair by pair on the same
moment of a shared machine; ``python -c pass`` (the floor: the same interpreter starting and
ending) is taken in both rounds, and each figure is also given as a ratio to it — issue 51's
goals are ratios (``--version`` ≤ 2 floors, a read ≤ 2.5 floors, the grep ≤ 2× ``rg -c``), so
a reader on another machine can compare. The page cache is warmed first (each file read once), and so is the
checkpoint beside the log (one call before the timed ones).

    python bench/start.py --mnemon .venv/bin/mnemon [AGENT_DIR] --runs 5

``--mnemon`` names the installed console script to time (default: the one beside this
interpreter); the figures in docs/performance.md come from a wheel install, as users have it.
Without AGENT_DIR only the start is timed. A long log: ``python bench/_corpus.py DIR --mb 300
--children 0 --no-evict`` (nothing evicted) or ``--mb 200`` (hundreds of evictions).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

MISS = "QUOKKA-7f3a-ZEBRA-never-written"  # a literal no log holds


FLOOR = "python -c pass"

#: per command: the median of its ratio to the floor taken round by round, and its CPU (user +
#: system, from the kernel's rusage of the child), filled by ``paired``
PAIRED: dict[str, dict[str, float]] = {}
ROUNDS: dict[str, list[float]] = {}  # every command's wall seconds, round by round


def wall(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one whole process."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, use = os.wait4(p.pid, 0)
    took = time.perf_counter() - t0
    p.returncode = 0  # reaped here
    return took, use.ru_utime + use.ru_stime


def paired(cmds: dict[str, list[str]], runs: int) -> dict[str, float]:
    """Median wall seconds of each command, the commands taken in turn each round; in
    ``PAIRED``, each command's median ratio to the floor of the same round (when the floor is
    among ``cmds``) and its median CPU seconds."""
    for argv in cmds.values():  # warm-up: bytecode, page cache, checkpoint
        wall(argv)
    times: dict[str, list[float]] = {k: [] for k in cmds}
    cpus: dict[str, list[float]] = {k: [] for k in cmds}
    ratios: dict[str, list[float]] = {k: [] for k in cmds}
    for _ in range(runs):
        for k, argv in cmds.items():
            took, cpu = wall(argv)
            times[k].append(took)
            cpus[k].append(cpu)
        if FLOOR in cmds:
            for k in cmds:
                ratios[k].append(times[k][-1] / times[FLOOR][-1])
    ROUNDS.update(times)
    for k in cmds:
        PAIRED[k] = {"cpu_s": statistics.median(cpus[k])}
        if ratios[k]:
            PAIRED[k]["floors_paired"] = statistics.median(ratios[k])
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description="the CLI's start and the door, whole process")
    ap.add_argument("agent", nargs="?", type=Path, help="an agent directory with a long log")
    ap.add_argument("--mnemon", default=str(Path(sys.executable).with_name("mnemon")),
                    help="the console script to time (default: beside this interpreter)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    exe = a.mnemon
    python = str(Path(exe).with_name("python"))
    out: dict = {"mnemon": exe, "runs": a.runs}
    start = paired({"python -c pass": [python, "-c", "pass"],
                    "mnemon --version": [exe, "--version"],
                    "mnemon --help": [exe, "--help"]}, a.runs)
    out["start"] = start
    if a.agent:
        log = a.agent / "record.jsonl"
        with open(log, "rb") as f:
            while f.read(1 << 24):
                pass
        rg = shutil.which("rg")
        rows = json.loads(subprocess.run([exe, "transcript", "index", str(a.agent), "--json"],
                                         capture_output=True, check=True).stdout)
        turn = rows[len(rows) // 2]["id"]
        door = {"python -c pass": [python, "-c", "pass"],
                "read one turn": [exe, "transcript", "read", str(a.agent), "--turns", str(turn),
                                  "--json"],
                "index": [exe, "transcript", "index", str(a.agent), "--json"],
                "grep, no hit": [exe, "transcript", "grep", str(a.agent), MISS, "--json"]}
        if rg:
            door["rg -c, same file"] = [rg, "-c", MISS, str(log)]
        out["door"] = paired(door, a.runs)
        out["log"] = {"bytes": log.stat().st_size, "turns": len(rows),
                      "evicted": sum(r["held"] != "resident" for r in rows)}
        if rg:
            out["grep_over_rg"] = out["door"]["grep, no hit"] / out["door"]["rg -c, same file"]
            out["grep_over_rg_paired"] = statistics.median(
                g / r for g, r in zip(ROUNDS["grep, no hit"], ROUNDS["rg -c, same file"]))
        out["door_floors"] = {k: v / out["door"]["python -c pass"] for k, v in out["door"].items()}
    out["start_floors"] = {k: v / start["python -c pass"] for k, v in start.items()}
    out["paired"] = PAIRED  # per command: median ratio to the same round's floor, median CPU
    if a.json:
        print(json.dumps(out, indent=1))
        return
    for group in ("start", "door"):
        floors = out.get(f"{group}_floors", {})
        for k, v in out.get(group, {}).items():
            pair = PAIRED.get(k, {})
            print(f"{k:>22}: {v * 1000:7.1f} ms  {floors.get(k, 0):5.2f} floors  "
                  f"({pair.get('floors_paired', 0):5.2f} pair by pair; "
                  f"CPU {pair.get('cpu_s', 0) * 1000:6.1f} ms)")
    if "grep_over_rg" in out:
        print(f"{'grep ÷ rg -c':>22}: {out['grep_over_rg']:7.2f}×   "
              f"({out['grep_over_rg_paired']:.2f}× pair by pair) "
              f"({out['log']['bytes'] / 1e6:.0f} MB, {out['log']['turns']} turns, "
              f"{out['log']['evicted']} evicted)")


if __name__ == "__main__":
    main()
