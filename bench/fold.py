"""Benchmark: resume (refold) of a large synthetic log against the bare msgspec decode, and the
append rate of ``AgentLog.append``.

The log is made of realistic records: the turn shapes and texts of the real trajectories in
``tests/data/trajectories/*.jsonl`` (or ``MNEMON_BENCH_CORPUS``) (``user`` → UserPrompt, ``assistant`` → AssistantMessage with a
text block and tool_use blocks, ``tool`` → ToolResults), cycled until the file reaches the target
size, with harness evictions wherever the 500 KiB trigger says they are due (keep half) — the
shape a long-running agent without a known context window leaves behind.

    python bench/fold.py [--mb 200] [--runs 5] [--dir /tmp/mnemon-bench] [--profile]

Goals (docs/performance.md, "Foundation"): resume ≤ 2× the bare decode; append ≥ 50 000
records/s with fsync off. This is a benchmark, not a test: it prints figures and exits 0.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mnemon.session.agentlog import AgentLog  # noqa: E402
from mnemon.session.eviction import eviction_due, plan_eviction  # noqa: E402
from mnemon.session.log import iter_lines  # noqa: E402
from mnemon.session.records import (  # noqa: E402
    AssistantMessage,
    Evicted,
    Residue,
    SessionStarted,
    Text,
    ToolResult,
    ToolResults,
    ToolUse,
    Usage,
    UserPrompt,
    decode,
)
from mnemon.session.resume import fold_file  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
import _corpus  # noqa: E402

from _data import TRAJECTORIES as TRAJ, announce  # noqa: E402  (the repository's, or MNEMON_BENCH_CORPUS)
SOURCE = "agents/a1/record.jsonl"


def load_trajectories() -> list[list[dict]]:
    return _corpus.load_trajectories(TRAJ)


def records_of(traj: list[dict], log: AgentLog):
    """Yield the records one trajectory's lines map to, minting ids from the live log."""
    for line in traj:
        role = line["role"]
        if role == "user":
            yield "open", UserPrompt(turn=log.next_id(), text=line["text"])
        elif role == "assistant":
            blocks: list = [Text(line["text"])] if line["text"] else []
            seen = set()
            for c in line.get("tool_calls") or []:
                if c["id"] in seen:
                    continue
                seen.add(c["id"])
                blocks.append(ToolUse(c["id"], c["name"], c["arguments"]))
            if not blocks:
                blocks = [Text("")]
            n = len(line["text"]) // 4
            yield "open", AssistantMessage(
                turn=log.next_id(), blocks=blocks,
                stop_reason="tool_use" if seen else "end_turn", model="gpt-5-mini",
                usage=Usage(input_tokens=n + 40, output_tokens=n // 8 + 10,
                            cache_read_tokens=n * 3, cache_write_tokens=0))
        elif role == "tool":
            yield "result", ToolResults(results=[ToolResult(tool_use_id=line["tool_call_id"],
                                                            content=line["text"])])


def write_log(path: Path, target_bytes: int) -> dict:
    """Write the synthetic log through AgentLog.append; time the appends alone."""
    if path.exists():
        shutil.rmtree(path.parent.parent.parent)
    path.parent.mkdir(parents=True)
    trajs = load_trajectories()
    log = AgentLog.create(path, SOURCE, SessionStarted(agent="a1", at="2026-11-30T00:00:00Z",
                                                       system=trajs[0][0]["text"]))
    appended, evictions, spent = 1, 0, 0.0
    clock = time.perf_counter
    k = 0
    while log.log.size < target_bytes:
        traj = trajs[k % len(trajs)]
        k += 1
        for kind, rec in records_of(traj[1:], log):
            if kind == "result":
                pending = {c.id for c in log.ctx.pending_calls()}
                if rec.results[0].tool_use_id not in pending:
                    continue
            elif eviction_due(0, None, log.ctx.history_bytes()):
                plan = plan_eviction(log.ctx)
                if plan is not None:
                    t0 = clock()
                    log.append(Evicted(residue=Residue(span=plan.span, by="harness")))
                    spent += clock() - t0
                    appended += 1
                    evictions += 1
            t0 = clock()
            log.append(rec)
            spent += clock() - t0
            appended += 1
    log.close()
    return {"records": appended, "evictions": evictions, "append_s": spent,
            "append_rate": appended / spent, "bytes": path.stat().st_size}


def time_append_only(path: Path, n: int = 200_000) -> float:
    """Append rate on realistic records alone (no eviction planning), records/s, fsync off."""
    trajs = load_trajectories()
    if path.exists():
        path.unlink()
    log = AgentLog.create(path, SOURCE, SessionStarted(agent="a1"))
    k = 0
    spent = 0.0
    done = 0
    clock = time.perf_counter
    while done < n:
        for kind, rec in records_of(trajs[k % len(trajs)][1:], log):
            if kind == "result":
                if rec.results[0].tool_use_id not in log.ctx.pending:
                    continue
            t0 = clock()
            log.append(rec)
            spent += clock() - t0
            done += 1
        k += 1
    log.close()
    path.unlink()
    return done / spent


def bare_decode(lines: list[bytes]) -> float:
    t0 = time.perf_counter()
    for line in lines:
        decode(line)
    return time.perf_counter() - t0


def bare_read_decode(path: Path) -> float:
    t0 = time.perf_counter()
    for _, line in iter_lines(path):
        decode(line)
    return time.perf_counter() - t0


def resume(path: Path) -> float:
    t0 = time.perf_counter()
    agent, torn = AgentLog.resume(path, SOURCE)
    dt = time.perf_counter() - t0
    agent.close()
    return dt


def fold_only(path: Path) -> float:
    t0 = time.perf_counter()
    folded = fold_file(path, SOURCE)
    dt = time.perf_counter() - t0
    del folded  # freeing the table is not part of the fold (resume() keeps its table too)
    return dt


def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=200)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dir", default="/tmp/mnemon-bench")
    ap.add_argument("--profile", action="store_true", help="cProfile one fold and print the top")
    args = ap.parse_args()
    announce()
    path = Path(args.dir) / "run" / "agents" / "a1" / "record.jsonl"
    print(f"machine: {os.cpu_count()} CPUs, {cpu_model()}; Python {platform.python_version()}")
    w = write_log(path, int(args.mb * 1024 * 1024))
    print(f"log: {w['bytes'] / 1e6:.1f} MB, {w['records']} records, {w['evictions']} evictions")
    print(f"append (while writing, with eviction weighing): {w['append_rate']:,.0f} records/s")
    rate = time_append_only(path.with_name("append.jsonl"))
    print(f"append (realistic records, fsync off): {rate:,.0f} records/s")
    if args.profile:
        import cProfile
        import pstats

        cProfile.runctx("fold_file(path, SOURCE)", globals(), {"path": path})
        pstats.Stats().sort_stats("cumulative")  # noqa
        prof = cProfile.Profile()
        prof.enable()
        fold_file(path, SOURCE)
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(15)
    lines = [bytes(line) for _, line in iter_lines(path)]
    bare, bare_io, res, fold = [], [], [], []
    for _ in range(args.runs):
        bare.append(bare_decode(lines))
        bare_io.append(bare_read_decode(path))
        fold.append(fold_only(path))
        res.append(resume(path))
    del lines
    mb, mr, mf, mi = (statistics.median(x) for x in (bare, res, fold, bare_io))
    print(f"bare decode (lines in memory), median of {args.runs}: {mb:.3f} s")
    print(f"bare read+decode (iter_lines + decode):     {mi:.3f} s")
    print(f"fold_file (read-only fold):                 {mf:.3f} s  = {mf / mb:.2f}x bare")
    print(f"AgentLog.resume:                            {mr:.3f} s  = {mr / mb:.2f}x bare "
          f"({'meets' if mr <= 2 * mb else 'misses'} the 2x goal)")
    print(f"append goal 50 000/s: {'met' if rate >= 50_000 else 'missed'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
