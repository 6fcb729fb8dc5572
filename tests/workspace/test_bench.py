"""bench/workspace.py runs, on a small tree, so that it cannot rot: every figure is produced and
the bench's own checks hold (the store's trees are git's, a rewind gives git's files back)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "workspace.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_workspace", BENCH)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _digest(d: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(d.rglob("*")):
        if p.is_file():
            h.update(p.relative_to(d).as_posix().encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def test_the_tree_is_the_same_for_the_same_arguments(tmp_path):
    bench = _bench()
    a = bench.make_tree(tmp_path / "a", 250, 300_000)
    b = bench.make_tree(tmp_path / "b", 250, 300_000)
    assert a == b and len(a["paths"]) == 250
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")
    size = sum(p.stat().st_size for p in (tmp_path / "a").rglob("*.py"))
    assert abs(size - 300_000) < 300_000 * 0.02  # the bytes asked, near enough
    bench.make_tree(tmp_path / "c", 250, 300_000, seed=1)
    assert _digest(tmp_path / "a") != _digest(tmp_path / "c")  # the seed is what varies it


def test_the_bench_runs_on_a_small_tree(tmp_path):
    p = subprocess.run([sys.executable, str(BENCH), "--files", "300", "--mb", "0.5", "--runs",
                        "2", "--dir", str(tmp_path), "--no-tmpfs", "--json"],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads(p.stdout)
    assert set(res["floor"]) == {"python_c_pass_ms", "git_version_ms"}
    assert "tmpfs" not in res
    disk = res["disk"]
    for key, base in (("import", "git_init_add_write_tree_ms"),
                      ("snapshot_10", "git_add_write_tree_ms"), ("fork_read", "git_cat_file_ms"),
                      ("fork_write", "cp_a_ms"), ("restore", "git_add_read_tree_ms")):
        fig = disk[key]
        assert fig["ms"] > 0 and fig[base] > 0 and fig["runs"] >= 2, (key, fig)
    assert disk["import"]["same_tree_as_git"] and disk["import"]["ignored_left_out"]
    assert disk["snapshot_10"]["same_tree_as_git"]
    assert disk["restore"]["same_files_as_git"] and disk["restore"]["changed_files"] == 10
    assert disk["fork_read"]["copied_bytes"] == 0  # a child that only reads costs no copy
    assert disk["fork_write"]["files_checked_out"] == 300
    assert disk["snapshot_untouched"]["us"] > 0
    syn = disk["synod_disk"]
    assert syn["members"] == 8 and syn["total_disk"] == syn["store_disk"] + syn["trees_disk"]
    assert syn["changes_in_store_disk"] > 0
    assert not list(tmp_path.iterdir())  # the bench leaves nothing behind
