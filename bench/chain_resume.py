"""Benchmark: ``AgentLog.resume`` of a chained 200 MB log with the chain's check and with it
stubbed out (issue 49's refold goal, decision 0420), alternating, each run in a fresh process,
the log cut back to its size after each.

    python bench/chain_resume.py DIR RUNS      (DIR on disk or on tmpfs: /dev/shm/x)

Prints wall and CPU medians of each and the ratio pair by pair. A benchmark, not a test."""
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
folder = Path(sys.argv[1])
runs = int(sys.argv[2])
log = folder / "run" / "agents" / "a1" / "record.jsonl"
if not log.exists():
    import fold  # its realistic records and its log writer
    fold.write_log(log, 200 * 1024 * 1024)
    (folder / "run" / "run.json").write_text('{"format": 1}')
size = log.stat().st_size
code = r'''
import sys, time
from pathlib import Path
import mnemon.session.agentlog as al
from mnemon.session.agentlog import AgentLog
if sys.argv[2] == "off":
    class Off:
        def __init__(self, *a): pass
        def result(self): return None
    al.Beside = Off
    al.resume_state = lambda *a, **k: None
t0, c0 = time.perf_counter(), time.process_time()
a, _ = AgentLog.resume(Path(sys.argv[1]), "agents/a1/record.jsonl")
print(time.perf_counter() - t0, time.process_time() - c0)
'''
got = {"on": [], "off": []}
for _ in range(runs):
    for m in ("on", "off"):
        out = subprocess.run([sys.executable, "-c", code, str(log), m], capture_output=True,
                             text=True, check=True).stdout.split()
        got[m].append((float(out[0]), float(out[1])))
        with open(log, "r+b") as f:
            f.truncate(size)
        for p in log.parent.glob("record.jsonl.*"):
            if p.name.endswith((".fold",)) or "torn" in p.name:
                p.unlink()
for m, xs in got.items():
    w = [x[0] for x in xs]
    c = [x[1] for x in xs]
    print(m, "wall med %.3f (%.3f-%.3f) cpu med %.3f (%.3f-%.3f)" % (
        statistics.median(w), min(w), max(w), statistics.median(c), min(c), max(c)))
r = [a[0] / b[0] for a, b in zip(got["on"], got["off"])]
rc = [a[1] / b[1] for a, b in zip(got["on"], got["off"])]
print("on/off wall pairwise median %.3f (%.3f-%.3f); cpu %.3f" % (statistics.median(r), min(r), max(r), statistics.median(rc)))
