"""The command's cgroup, on a cgroupfs laid out in a temporary directory (v1 and v2): where it
is made, what it bounds, what it reports, and the leftovers of a mnemon that is gone."""

from __future__ import annotations

import os
from pathlib import Path

from mnemon.orchestrator.sandbox.cgroup import Cgroup, open_cgroup, own_paths

V1_SELF = "8:pids:/\n4:memory:/jobs/j1\n2:cpu,cpuacct:/\n0::/\n"


def v1_tree(root: Path) -> None:
    for d in (root / "pids", root / "memory" / "jobs" / "j1", root / "cpu"):
        d.mkdir(parents=True)
        (d / "cgroup.procs").write_text("")


def test_own_paths_reads_proc_self_cgroup():
    assert own_paths(V1_SELF) == {"pids": "/", "memory": "/jobs/j1", "cpu": "/", "cpuacct": "/",
                                  "": "/"}


def test_v1_under_each_hierarchy_own_path(tmp_path):
    v1_tree(tmp_path)
    cg = open_cgroup(64 << 20, 32, root=tmp_path, self_cgroup=V1_SELF, environ={})
    assert cg is not None and cg.version == 1 and cg.bounded == ("processes", "memory")
    pids, mem = cg.dirs["pids"], cg.dirs["memory"]
    assert pids.parent == tmp_path / "pids" and mem.parent == tmp_path / "memory" / "jobs" / "j1"
    assert pids.name.startswith(f"mnemon-{os.getpid()}-") and pids.name == mem.name
    assert (pids / "pids.max").read_text() == "32"
    assert (mem / "memory.limit_in_bytes").read_text() == str(64 << 20)
    assert (cg.dirs["cpu"] / "cpu.shares").read_text() == "256"  # a quarter of the default
    assert cg.procs_files == [pids / "cgroup.procs", mem / "cgroup.procs",
                              cg.dirs["cpu"] / "cgroup.procs"]
    (pids / "pids.events").write_text("max 3\n")
    (mem / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 1\n")
    assert cg.hits() == ("processes", "memory")


def test_v1_without_a_memory_hierarchy_bounds_processes_only(tmp_path):
    (tmp_path / "pids").mkdir()
    (tmp_path / "pids" / "cgroup.procs").write_text("")
    cg = open_cgroup(1 << 30, 10, root=tmp_path, self_cgroup=V1_SELF, environ={})
    assert cg is not None and cg.bounded == ("processes",) and list(cg.dirs) == ["pids"]


def test_v2_under_mnemon_cgroup_or_its_own(tmp_path):
    (tmp_path / "cgroup.controllers").write_text("cpu memory pids\n")
    own = tmp_path / "user.slice" / "app.scope"
    own.mkdir(parents=True)
    cg = open_cgroup(1 << 30, 100, root=tmp_path, self_cgroup="0::/user.slice/app.scope\n",
                     environ={})
    assert cg is not None and cg.version == 2 and cg.dirs["unified"].parent == own
    assert (own / "cgroup.subtree_control").read_text() == "+pids +memory"
    d = cg.dirs["unified"]
    assert (d / "pids.max").read_text() == "100" and (d / "memory.max").read_text() == str(1 << 30)
    (d / "memory.events").write_text("low 0\nhigh 0\nmax 9\noom 1\noom_kill 1\n")
    assert cg.hits() == ("memory",)
    delegated = tmp_path / "delegated"
    delegated.mkdir()
    cg2 = open_cgroup(1 << 30, 100, root=tmp_path, self_cgroup="0::/user.slice/app.scope\n",
                      environ={"MNEMON_CGROUP": str(delegated)})
    assert cg2 is not None and cg2.dirs["unified"].parent == delegated


def test_none_where_nothing_can_be_made(tmp_path):
    assert open_cgroup(1 << 30, 10, root=tmp_path, self_cgroup=V1_SELF, environ={}) is None
    (tmp_path / "cgroup.controllers").write_text("")
    assert open_cgroup(1 << 30, 10, root=tmp_path, self_cgroup="0::/not/there\n",
                       environ={}) is None


def test_a_gone_mnemons_leftovers_are_swept(tmp_path):
    v1_tree(tmp_path)
    dead = 2 ** 22 + 17  # above pid_max: no process has it
    (tmp_path / "pids" / f"mnemon-{dead}-3").mkdir()
    (tmp_path / "pids" / f"mnemon-{os.getppid()}-1").mkdir()  # alive: kept
    (tmp_path / "pids" / "someone-else").mkdir()
    cg = open_cgroup(1 << 30, 10, root=tmp_path, self_cgroup=V1_SELF, environ={})
    assert cg is not None
    left = sorted(p.name for p in (tmp_path / "pids").iterdir() if p.is_dir())
    assert f"mnemon-{dead}-3" not in left
    assert f"mnemon-{os.getppid()}-1" in left and "someone-else" in left


def test_remove_says_whether_all_went(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    (b / "busy").write_text("")  # a directory that is not empty cannot go, as a busy cgroup
    cg = Cgroup(1, {"pids": a, "memory": b}, ())
    assert cg.remove() is False and not a.exists() and b.exists()
