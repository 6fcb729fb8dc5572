"""The door from outside, whole process: ``mnemon transcript …`` and ``mnemon context`` against
``rg -c`` on the same files, and the resume of a long log.

Every figure is a whole process timed from outside (start to exit, interpreter start-up and
imports included), the median of ``--runs`` runs, with its peak RSS (the kernel's ``ru_maxrss``
of the finished child, from ``os.wait4``). ``rg -c PATTERN FILE…`` runs in turn with each
mnemon command (A B A B …) on the files the command reads, so the ratio is taken pair by pair.
The page cache is warmed first (every file read once), and so is the checkpoint (one call
before the timed ones; ``--cold`` times the call that builds it instead). The floor — ``python
-c pass``, the same interpreter started and ended the same way — is timed before and after the
commands, and each figure is also given in floors (issue 51: a figure as a ratio to a floor of
the same run holds on another machine).

    python bench/door.py /tmp/door-bench/flat300/agents/p --runs 5
    python bench/door.py /tmp/door-bench/one1g/agents/p --runs 5 --resume

Corpora come from ``bench/_corpus.py`` (``--no-evict`` for a log where nothing is evicted).
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

RARE = "QUOKKA-7f3a-ZEBRA"
MISS = "QUOKKA-7f3a-ZEBRA-never-written"  # a literal no log holds: the no-hit grep


TIME = "/usr/bin/time"  # GNU time: the child's peak RSS, from a small parent (a child forked
# from this process would count this process's pages until it execs)


def run_once(argv: list[str], env: dict | None = None) -> tuple[float, int, int, float]:
    """(wall seconds, peak RSS in bytes, exit code, CPU seconds: user + system) of one whole
    process."""
    import tempfile

    with tempfile.NamedTemporaryFile("r") as out:
        t0 = time.perf_counter()
        p = subprocess.run([TIME, "-o", out.name, "-f", "%U %S %M %x", *argv], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
        user, system, kb, code = out.read().split()[-4:]
    return wall, int(kb) * 1024, int(code), float(user) + float(system)


def paired(a: list[str], b: list[str] | None, runs: int, env=None) -> dict:
    ta, ma, tb, ratios, ca_ = [], [], [], [], []
    codes = set()
    run_once(a, env)  # warm-up
    if b:
        run_once(b)
    for _ in range(runs):
        wa, ra, ca, cpu = run_once(a, env)
        ta.append(wa)
        ca_.append(cpu)
        ma.append(ra)
        codes.add(ca)
        if b:
            wb, _, _, _ = run_once(b)
            tb.append(wb)
            ratios.append(wa / wb)
    out = {"median_s": round(statistics.median(ta), 3), "min_s": round(min(ta), 3),
           "max_s": round(max(ta), 3), "cpu_median_s": round(statistics.median(ca_), 3),
           "peak_rss_mb": round(max(ma) / 2 ** 20, 1),
           "exit": sorted(codes)}
    if b:
        out["rg_median_s"] = round(statistics.median(tb), 3)
        out["ratio_median"] = round(statistics.median(ratios), 2)
    return out


def lineage_files(agent: Path) -> list[Path]:
    """The agent's log and every file its Inherited record points into."""
    log = agent / "record.jsonl"
    files = [log]
    with open(log, "rb") as f:
        f.readline()
        second = f.readline()
    if second.startswith(b'{"t":"Inherited"'):
        sources = {s.decode() for s in _sources(second)}
        root = agent.parent.parent
        files += [root / s for s in sorted(sources)]
    return files


def _sources(line: bytes):
    at = 0
    key = b'"source":"'
    seen = set()
    while (at := line.find(key, at)) >= 0:
        end = line.index(b'"', at + len(key))
        s = line[at + len(key):end]
        if s not in seen:
            seen.add(s)
            yield s
        at = end


def main() -> None:
    ap = argparse.ArgumentParser(description="the door from outside, whole process, vs rg -c")
    ap.add_argument("agent", help="an agent directory")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--turn", type=int, default=None, help="the turn to read (default: a "
                    "departed turn in the middle, else the middle turn)")
    ap.add_argument("--resume", action="store_true",
                    help="also time AgentLog.resume of the agent's log (appends to it)")
    ap.add_argument("--cold", action="store_true", help="remove the checkpoint before each run")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    agent = Path(a.agent).resolve()
    files = lineage_files(agent)
    for f in files:  # warm the page cache for everyone alike
        with open(f, "rb") as fh:
            while fh.read(1 << 24):
                pass
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: bytecode cached
    mnemon = [sys.executable, "-m", "mnemon"]
    rg = shutil.which("rg")
    subprocess.run([*mnemon, "transcript", "read", str(agent), "--turns", "1", "--json"],
                   env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    survey = ("import json, sys\n"
              "rows = json.load(sys.stdin)\n"
              "gone = [r['id'] for r in rows if r['held'] != 'resident']\n"
              "pick = gone or [r['id'] for r in rows]\n"
              "print(json.dumps([len(rows), len(gone), pick[len(pick) // 2]]))\n")
    index = subprocess.run([*mnemon, "transcript", "index", str(agent), "--json"], env=env,
                           capture_output=True, check=True).stdout
    n, gone, middle = json.loads(subprocess.run([sys.executable, "-c", survey], input=index,
                                                capture_output=True, check=True).stdout)
    del index
    turn = a.turn if a.turn is not None else middle
    info = {"agent": str(agent), "files": {str(f): f.stat().st_size for f in files},
            "turns": n, "evicted": gone, "read_turn": turn, "runs": a.runs}
    cmds = {
        "grep, no hit": ([*mnemon, "transcript", "grep", str(agent), MISS, "--json"],
                         [rg, "-c", MISS, *map(str, files)] if rg else None),
        "grep rare literal": ([*mnemon, "transcript", "grep", str(agent), RARE, "--json"],
                              [rg, "-c", RARE, *map(str, files)] if rg else None),
        "read one turn": ([*mnemon, "transcript", "read", str(agent), "--turns", str(turn),
                           "--json"], None),
        "index": ([*mnemon, "transcript", "index", str(agent), "--json"], None),
        "context": ([*mnemon, "context", str(agent), "--json"], None),
    }
    results = {}
    floor = [sys.executable, "-c", "pass"]
    floors = [paired(floor, None, a.runs, env)["median_s"]]
    for name, (cmd, base) in cmds.items():
        if a.cold:
            cmd = ["sh", "-c", f"rm -f {agent}/record.jsonl.fold; exec " +
                   " ".join(map(str, cmd))]
        results[name] = paired(cmd, base, a.runs, env)
        print(f"{name:>20}: {results[name]}", file=sys.stderr)
    floors.append(paired(floor, None, a.runs, env)["median_s"])
    info["floor_s"] = floors  # before and after the commands
    for r in results.values():
        r["floors"] = round(r["median_s"] / statistics.mean(floors), 2)
    if a.resume:
        probe = ("import sys, time; from pathlib import Path\n"
                 "from mnemon.lineage.runroot import make_loader\n"
                 "from mnemon.session.agentlog import AgentLog\n"
                 f"agent = Path({str(agent)!r}); root = agent.parent.parent\n"
                 "src = 'agents/' + agent.name + '/record.jsonl'\n"
                 "t, c = time.perf_counter(), time.process_time()\n"
                 "log, _ = AgentLog.resume(root / src, src, loader=make_loader(root))\n"
                 "took, cpu = time.perf_counter() - t, time.process_time() - c\n"
                 "log.close()\n"
                 "print(took, cpu)\n")
        times = []
        cpus = []
        whole = []
        for _ in range(a.runs):
            t0 = time.perf_counter()
            out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                                 text=True, check=True).stdout
            whole.append(time.perf_counter() - t0)
            took, cpu = out.strip().splitlines()[-1].split()
            times.append(float(took))
            cpus.append(float(cpu))
        results["resume"] = {"median_s": round(statistics.median(times), 3),
                             "cpu_median_s": round(statistics.median(cpus), 3),
                             "whole_process_median_s": round(statistics.median(whole), 3)}
        print(f"{'resume':>20}: {results['resume']}", file=sys.stderr)
    info["results"] = results
    print(json.dumps(info, indent=1))


if __name__ == "__main__":
    main()
