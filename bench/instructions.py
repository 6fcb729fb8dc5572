"""The swarm's and the floor's work in instructions: user-space instructions per agent-turn,
counted by valgrind's callgrind (issue 51, item 2).

    python bench/instructions.py [--small 10] [--large 50] [--latency 0.02] [--json]

CPU seconds on a shared machine move by a tenth between two runs of the same program (the swarm
of ``bench/agents.py`` measured 0.215-0.294 ms a turn in one hour here), so a change worth 1-2 %
takes ten alternating pairs to see. An instruction count does not move with the machine's
moment: two runs of the same commit agree to 1e-5. So this is the measure to compare two commits
by, a change at a time; the figures in floors of CPU time stay ``bench/agents.py``'s (they include
what instructions do not: system calls' time in the kernel, cache misses).

Each figure is the difference of two whole processes, the same program at ``--large`` and at
``--small`` roots, over the difference of their turns, so that the interpreter's start, the
imports and the trajectories' loading cancel out:

- **swarm**: ``bench/agents.py --only swarm --no-floor --roots N --latency L`` (children and their
  turns as its defaults), its turns read from its own JSON;
- **harness** (``harness_ir_per_turn``, ``harness_in_floors``): the same swarm with
  ``--fixed-usage`` — the scripted provider's cache model answering one constant usage, no
  simulation — so the count is the harness's alone, as a provider without a simulation runs it
  (the figure issue 51's "harness at ≤ 3 floors" reads in instructions; same turns as ``swarm``);
- **floor**: ``bench/agents.py --only floor`` with as many agents and turns (issue 17's bare Trio
  program, ``agents.floor``).

``PYTHONHASHSEED=0`` in all. The swarm's figure holds the provider's simulation too (the
scripted provider's cache model, which ``bench/agents.py`` subtracts from CPU time by timing it):
callgrind cannot tell it apart, and it is the same in the two commits compared, so a difference
is the harness's; its ratio to the floor (``in_floors_with_simulation``) is an upper bound of the
harness's alone, which ``harness_in_floors`` gives (in CPU time the simulation is a fifth of the
swarm's). ``--latency`` only shortens the run (the latency is waited, not computed).
The two processes of a figure run side by side (one per core). Needs ``valgrind`` on PATH.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

AGENTS = Path(__file__).resolve().parent / "agents.py"


def counted(args: list[str], work: Path) -> tuple[int, dict]:
    """``agents.py args`` under callgrind: (instructions executed, its JSON answer)."""
    log = Path(tempfile.mkstemp(dir=work, suffix=".vg")[1])
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    proc = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", f"--log-file={log}",
         sys.executable, str(AGENTS), *args, "--json", "--dir", str(work)],
        capture_output=True, text=True, env=env, check=True)
    m = re.search(r"Collected : (\d+)", log.read_text())
    if m is None:
        raise SystemExit(f"callgrind reported no count (see {log})")
    return int(m.group(1)), json.loads(proc.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--small", type=int, default=10, help="roots of the smaller swarm")
    ap.add_argument("--large", type=int, default=50, help="roots of the larger swarm")
    ap.add_argument("--children", type=int, default=3)
    ap.add_argument("--child-turns", type=int, default=8)
    ap.add_argument("--latency", type=float, default=0.02)
    ap.add_argument("--dir", default=None, help="where the runs' files go (default: temp dir)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        print("instructions: valgrind is not on PATH (apt install valgrind)", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="mnemon-bench-ir-", dir=args.dir))
    shape = ["--children", str(args.children), "--child-turns", str(args.child_turns),
             "--latency", str(args.latency)]
    try:
        with ThreadPoolExecutor(2) as pool:
            runs = list(pool.map(lambda r: counted(
                ["--only", "swarm", "--no-floor", "--roots", str(r), *shape], work),
                (args.small, args.large)))
            (ir_s, small), (ir_l, large) = runs
            turns = (small["swarm"]["turns"], large["swarm"]["turns"])
            agents = (small["swarm"]["agents"], large["swarm"]["agents"])
            alone = list(pool.map(lambda r: counted(
                ["--only", "swarm", "--no-floor", "--fixed-usage", "--roots", str(r), *shape],
                work), (args.small, args.large)))
            (hir_s, hsmall), (hir_l, hlarge) = alone
            hturns = (hsmall["swarm"]["turns"], hlarge["swarm"]["turns"])
            floors = list(pool.map(lambda k: counted(
                ["--only", "floor", "--roots", str(agents[k]), "--child-turns", str(turns[k]),
                 "--latency", str(args.latency)], work), (0, 1)))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    (fir_s, fsmall), (fir_l, flarge) = floors
    fturns = (fsmall["floor"]["turns"], flarge["floor"]["turns"])
    swarm = (ir_l - ir_s) / (turns[1] - turns[0])
    harness = (hir_l - hir_s) / (hturns[1] - hturns[0])
    floor = (fir_l - fir_s) / (fturns[1] - fturns[0])
    res = {"swarm_ir_per_turn": round(swarm), "harness_ir_per_turn": round(harness),
           "floor_ir_per_turn": round(floor),
           "in_floors_with_simulation": round(swarm / floor, 3),
           "harness_in_floors": round(harness / floor, 3),
           "turns": list(turns), "harness_turns": list(hturns), "floor_turns": list(fturns),
           "agents": list(agents),
           "command": "python " + " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])}
    said = (f"swarm {res['swarm_ir_per_turn']:,} instructions per agent-turn "
            f"({res['in_floors_with_simulation']} floors with the provider's simulation), "
            f"the harness alone {res['harness_ir_per_turn']:,} ({res['harness_in_floors']} "
            f"floors); floor {res['floor_ir_per_turn']:,} (turns {turns[0]} -> {turns[1]})")
    print(json.dumps(res) if args.json else said)
    return 0


if __name__ == "__main__":
    sys.exit(main())
