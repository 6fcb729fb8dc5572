"""The shell's sandbox, timed: what it adds to a command, and whether the harness stays
responsive while several agents run commands at once.

1. **Added time.** A sandboxed ``true`` (``run_command`` under bubblewrap, the whole command:
   cgroup made and removed, launcher, namespaces and mounts, output read, tree ended, reaped)
   against the floor, a bare ``bash -c true`` started and reaped from the same Trio loop;
   ``kind = "none"`` (the runner without bubblewrap) beside them. Taken in turn (floor, none,
   bwrap, floor, …) so each is measured on the same moments of a shared machine; the median of
   ``--runs`` (at least 50) each, and the added milliseconds pair by pair.
2. **A responsive harness.** ``--agents`` tasks (default 8) each run commands back to back for
   ``--seconds`` — each command spins the CPU and writes a megabyte of output — while a 10 ms
   Trio ticker in the same loop notes how late each tick wakes. The worst lateness is the
   figure: the longest the harness's own loop was kept from running. Beside it, its floor: the
   same ticker while as many plain busy loops, started outside the runner, hold the cores.

    python bench/sandbox.py --runs 200 --agents 8 --seconds 10 [--json]

docs/sandbox.md has the figures of the machine the project runs on, with this command.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio

from mnemon.orchestrator.sandbox import SandboxSettings, run_command
from mnemon.orchestrator.sandbox.bwrap import find_bwrap, probe

#: each agent's command in the load test: about 0.1 s of CPU, then a megabyte of output
LOAD = "i=0; while [ $i -lt 40000 ]; do i=$((i+1)); done; head -c 1000000 /dev/zero | tr '\\0' x"


async def bare(ws: Path) -> float:
    """A bare ``bash -c true``, started and reaped from the loop: the floor."""
    t0 = time.perf_counter()
    p = subprocess.Popen(["bash", "-c", "true"], cwd=ws, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    fd = os.pidfd_open(p.pid)
    try:
        await trio.lowlevel.wait_readable(fd)
    finally:
        trio.lowlevel.notify_closing(fd)
        os.close(fd)
    p.wait()
    return time.perf_counter() - t0


async def runner(ws: Path, kind: str) -> float:
    t0 = time.perf_counter()
    out = await run_command("true", ws, SandboxSettings(kind=kind), run_root=None)
    assert out.exit_code == 0, out
    return time.perf_counter() - t0


async def added(ws: Path, runs: int) -> dict:
    for _ in range(3):  # warm: the probe, the page cache, bash's first start
        await bare(ws), await runner(ws, "none"), await runner(ws, "bwrap")
    times: dict[str, list[float]] = {"bash -c true": [], "none": [], "bwrap": []}
    for _ in range(runs):
        times["bash -c true"].append(await bare(ws))
        times["none"].append(await runner(ws, "none"))
        times["bwrap"].append(await runner(ws, "bwrap"))
    ms = {k: round(statistics.median(v) * 1000, 2) for k, v in times.items()}
    pairs = [b - f for b, f in zip(times["bwrap"], times["bash -c true"])]
    return {"median_ms": ms,
            "added_ms": round(statistics.median(pairs) * 1000, 2),
            "added_ms_p90": round(statistics.quantiles(pairs, n=10)[-1] * 1000, 2)}


async def ticking(late: list[float]) -> None:
    """A 10 ms ticker: how late each tick wakes."""
    while True:
        t = trio.current_time()
        await trio.sleep(0.010)
        late.append(trio.current_time() - t - 0.010)


def lateness(late: list[float]) -> dict:
    late = sorted(late)
    return {"ticks": len(late), "worst_tick_late_ms": round(late[-1] * 1000, 2),
            "p99_tick_late_ms": round(late[int(len(late) * 0.99)] * 1000, 2),
            "median_tick_late_ms": round(statistics.median(late) * 1000, 2)}


async def contended(agents: int, seconds: float) -> dict:
    """The floor of responsiveness: the same ticker while ``agents`` plain busy loops, started
    outside the runner, hold the cores — what the machine's scheduler alone costs the loop."""
    late: list[float] = []
    spinners = [subprocess.Popen(["bash", "-c", "while :; do :; done"]) for _ in range(agents)]
    try:
        with trio.move_on_after(seconds):
            await ticking(late)
    finally:
        for p in spinners:
            p.kill()
            p.wait()
    return lateness(late)


async def responsive(ws: Path, agents: int, seconds: float) -> dict:
    late: list[float] = []
    done = [0]
    outputs = [0]

    async def agent(i: int) -> None:
        d = ws / f"a{i}"
        d.mkdir(exist_ok=True)
        end = trio.current_time() + seconds
        while trio.current_time() < end:
            out = await run_command(LOAD, d, SandboxSettings(), run_root=None)
            assert out.exit_code == 0 and out.total_bytes == 1_000_000, out
            done[0] += 1
            outputs[0] += out.total_bytes

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ticking, late)
        async with trio.open_nursery() as work:
            for i in range(agents):
                work.start_soon(agent, i)
        nursery.cancel_scope.cancel()
    return {"agents": agents, "cores": os.cpu_count(), "seconds": seconds,
            "commands": done[0], "output_mb": round(outputs[0] / 1e6, 1), **lateness(late),
            "floor": await contended(agents, seconds)}


def main() -> None:
    ap = argparse.ArgumentParser(description="the shell's sandbox, timed")
    ap.add_argument("--runs", type=int, default=200, help="commands per kind (at least 50)")
    ap.add_argument("--agents", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.runs < 50:
        ap.error("--runs must be at least 50: a median of fewer says little")
    why = probe(find_bwrap())
    if why is not None:
        sys.exit(f"bench/sandbox.py: {why}")
    with tempfile.TemporaryDirectory(prefix="mnemon-bench-") as tmp:
        ws = Path(tmp)
        out = {"runs": a.runs, "added": trio.run(added, ws, a.runs),
               "responsive": trio.run(responsive, ws, a.agents, a.seconds)}
    if a.json:
        print(json.dumps(out, indent=2))
        return
    m = out["added"]["median_ms"]
    print(f"whole command, median of {a.runs}: bash -c true {m['bash -c true']} ms (floor) · "
          f"runner, kind none {m['none']} ms · runner, bwrap {m['bwrap']} ms")
    print(f"added by the sandbox: {out['added']['added_ms']} ms median "
          f"(p90 {out['added']['added_ms_p90']} ms; goal ≤ 20)")
    r = out["responsive"]
    print(f"{r['agents']} agents on {r['cores']} cores for {r['seconds']:g} s: {r['commands']} "
          f"commands, {r['output_mb']} MB of output read; 10 ms ticker late by "
          f"{r['median_tick_late_ms']} ms median, {r['p99_tick_late_ms']} ms p99, "
          f"{r['worst_tick_late_ms']} ms worst")
    f = r["floor"]
    print(f"floor, {r['agents']} plain busy loops beside the ticker: late by "
          f"{f['median_tick_late_ms']} ms median, {f['p99_tick_late_ms']} ms p99, "
          f"{f['worst_tick_late_ms']} ms worst")


if __name__ == "__main__":
    main()
