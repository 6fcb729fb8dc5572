"""bench/agents.py --budget (decision 0476) runs on a small swarm, so that it cannot rot: every
record the swarm's logs hold went through the timed append, and the budget's arithmetic is what
decision 0476 says it is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench" / "agents.py"


def test_the_budget_counts_every_record_and_adds_up(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "MNEMON_BENCH_CORPUS"}  # the repo's own
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--only", "swarm", "--roots", "2", "--latency", "0.001",
         "--budget", "--keep", "--json", "--dir", str(tmp_path)],
        capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    swarm = json.loads(proc.stdout)["swarm"]
    assert swarm["reasons"] == {"done": 8}
    # every line of every agent's log was appended through the timed call, and nothing else was
    lines = sum(len(p.read_bytes().splitlines()) for p in tmp_path.rglob("swarm/agents/*/record.jsonl"))
    assert lines > 0 and swarm["appends"]["records"] == lines
    b = swarm["budget"]
    turns, floor = swarm["turns"], swarm["floor"]["cpu_ms_per_turn"]
    assert b["records_per_turn"] == round(lines / turns, 2)
    assert b["three_floors_ms"] == round(3 * floor, 4)
    records = swarm["appends"]["s"] / turns * 1e3
    assert abs(b["records_ms_per_turn"] - records) < 1e-4
    rest = swarm["harness_cpu_ms_per_turn"] - records - swarm["collector_ms_per_turn"]
    assert abs(b["rest_ms_per_turn"] - rest) < 1e-4
    allowed = 3 * floor - records - swarm["collector_ms_per_turn"]
    assert abs(b["rest_allowed_ms"] - allowed) < 1e-4
    assert abs(b["rest_must_lose"] - (1 - allowed / rest)) < 2e-3


def test_without_budget_the_append_is_not_wrapped(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "MNEMON_BENCH_CORPUS"}
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--only", "swarm", "--roots", "1", "--latency", "0.001",
         "--no-floor", "--json", "--dir", str(tmp_path)],
        capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    swarm = json.loads(proc.stdout)["swarm"]
    assert "appends" not in swarm and "budget" not in swarm
