"""A job's ``[workspace]``: each task a copy of a directory or of a git repository's last commit,
its row naming the snapshot it ended on, ``mnemon results --patch DIR`` writing one patch per
changed task — under ``--engine local`` and ``--engine dask`` (the real CLI, the real store,
the real ``git apply``)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mnemon.orchestrator.cli.commands.results import patch_name

POLICY = '''
import re


def edit(request, state):
    """Task ``same``: no change; any other: writes out/<task>.txt and edits base.txt."""
    first = request.messages[0]["content"]
    text = first if isinstance(first, str) else first[0].get("text", "")
    task = re.search(r"task (\\S+)", text).group(1)
    k = sum(1 for m in request.messages if m["role"] == "assistant")
    if k == 0 and task != "same":
        return [{"type": "tool_use", "id": "w1", "name": "fs_write",
                 "input": {"path": f"out/{task}.txt", "content": f"made by {task}\\n"}},
                {"type": "tool_use", "id": "e1", "name": "fs_edit",
                 "input": {"path": "base.txt", "old": "base", "new": f"base of {task}"}}], \\
            "tool_use"
    return [{"type": "text", "text": f"done {task}"}], "end_turn"
'''


def mnemon(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mnemon", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


def job(folder: Path, workspace: str, tasks: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "edit_policy.py").write_text(POLICY)
    body = ('concurrency = 2\n\n[provider]\nname = "scripted"\npolicy = "edit_policy:edit"\n\n'
            f'{workspace}\n')
    body += "".join(f'\n[[tasks]]\nid = "{t}"\nprompt = "task {t}"\n' for t in tasks)
    (folder / "job.toml").write_text(body)
    return folder / "job.toml"


def rows(root: Path) -> dict[str, dict]:
    return {r["task"]: r for r in map(json.loads, (root / "results.jsonl").read_text()
                                      .splitlines())}


def source_dir(folder: Path) -> Path:
    src = folder / "src"
    src.mkdir(parents=True)
    (src / "base.txt").write_text("base\n")
    return src


def applied(source: Path, patch: Path, to: Path) -> dict[str, str]:
    shutil.copytree(source, to, ignore=shutil.ignore_patterns(".git"))
    subprocess.run(["git", "apply", str(patch)], cwd=to, check=True)
    return {p.relative_to(to).as_posix(): p.read_text() for p in to.rglob("*") if p.is_file()}


def test_each_task_its_own_copy_and_patch(tmp_path):
    folder = tmp_path / "jobs"
    src = source_dir(folder)
    path = job(folder, '[workspace]\nsource = "src"', ["k1", "k/2", "same"])
    root = tmp_path / "run"
    p = mnemon("run", str(path), "--run-root", str(root), cwd=tmp_path)  # not the job's folder
    assert p.returncode == 0, p.stderr
    r = rows(root)
    assert {t: x["status"] for t, x in r.items()} == {"k1": "done", "k/2": "done",
                                                       "same": "done"}
    assert all(len(x["workspace"]) == 40 for x in r.values())
    assert r["k1"]["workspace"] != r["k/2"]["workspace"]
    # the source is a copy: never written
    assert sorted(q.name for q in src.rglob("*")) == ["base.txt"]
    assert (src / "base.txt").read_text() == "base\n"
    # each row's snapshot is what its root's log names last
    for t, x in r.items():
        log = mnemon("workspace", str(root / "agents" / x["agent"]), "log", "--json",
                     cwd=tmp_path)
        assert json.loads(log.stdout)[-1]["snapshot"] == x["workspace"], t
    out = tmp_path / "patches"
    p = mnemon("results", str(root), "--patch", str(out), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout == (f"wrote 2 patches to {out} (1 task(s) without a change, 0 without a "
                        "workspace)\n")
    names = sorted(q.name for q in out.iterdir())
    assert names == sorted(["k1.patch", patch_name("k/2")]) and "k_2-" in patch_name("k/2")
    assert applied(src, out / "k1.patch", tmp_path / "a1") == {
        "base.txt": "base of k1\n", "out/k1.txt": "made by k1\n"}
    assert applied(src, out / patch_name("k/2"), tmp_path / "a2") == {
        "base.txt": "base of k/2\n", "out/k/2.txt": "made by k/2\n"}
    # a second --patch into the same folder rewrites the same files
    assert mnemon("results", str(root), "--patch", str(out), cwd=tmp_path).returncode == 0
    assert sorted(q.name for q in out.iterdir()) == names


def test_a_git_source_is_its_last_commit(tmp_path):
    folder = tmp_path / "jobs"
    repo = folder / "repo"
    repo.mkdir(parents=True)
    (repo / "base.txt").write_text("base\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run([*git, "add", "."], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "one"], cwd=repo, check=True)
    (repo / "base.txt").write_text("edited, not committed\n")
    (repo / "loose.txt").write_text("untracked\n")
    path = job(folder, '[workspace]\nsource = "repo"\ninherit = "empty"', ["k1"])
    root = tmp_path / "run"
    p = mnemon("run", str(path), "--run-root", str(root), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    ls = mnemon("workspace", str(root / "agents" / "t1"), "--turn", "0", "ls", cwd=tmp_path)
    assert ls.stdout == "base.txt\t5\n", ls.stderr
    assert (repo / "base.txt").read_text() == "edited, not committed\n"
    show = mnemon("workspace", str(root / "agents" / "t1"), "show", "base.txt", cwd=tmp_path)
    assert show.stdout == "base of k1\n"


def test_a_job_without_a_workspace(tmp_path):
    path = job(tmp_path / "jobs", "", ["same"])
    root = tmp_path / "run"
    assert mnemon("run", str(path), "--run-root", str(root), cwd=tmp_path).returncode == 0
    assert rows(root)["same"]["workspace"] is None
    p = mnemon("results", str(root), "--patch", str(tmp_path / "p"), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("wrote 0 patches") and "1 without a workspace" in p.stdout
    assert list((tmp_path / "p").iterdir()) == []


@pytest.mark.parametrize("table, says", [
    ('[workspace]\nsource = "nowhere"', ":8: [workspace] source nowhere does not exist"),
    ('[workspace]\nsource = "job.toml"', ":8: [workspace] source job.toml is not a directory"),
    ('[workspace]\nsource = ""', ":8: [workspace] source needs a path"),
    ('[workspace]\ndir = "src"', ":8: unknown key 'dir' in [workspace]"),
    ('[workspace]\ninherit = "all"', "workspace.inherit"),
])
def test_a_bad_workspace_table_is_refused_naming_its_line(tmp_path, table, says):
    path = job(tmp_path / "jobs", table, ["k1"])
    root = tmp_path / "run"
    p = mnemon("run", str(path), "--run-root", str(root), cwd=tmp_path)
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert says in p.stderr, p.stderr
    assert not root.exists()


def test_patch_names_are_file_names():
    assert patch_name("k1") == "k1.patch" and patch_name("a.b-c_d") == "a.b-c_d.patch"
    for hostile in ("../x", "/etc/passwd", ".hidden", "a\x1b[2Jb", "x.", "", "é"):
        name = patch_name(hostile)
        assert "/" not in name and not name.startswith(".") and name.endswith(".patch")
        assert name.isascii() and name.isprintable()
    assert patch_name("a/b") != patch_name("a_b") != patch_name("a:b")


def test_a_dask_tasks_patch_on_the_client(tmp_path):
    pytest.importorskip("distributed")
    folder = tmp_path / "jobs"
    src = source_dir(folder)
    tasks = ["d1", "d2", "d3", "same"]
    path = job(folder, '[workspace]\nsource = "src"', tasks)
    root = tmp_path / "dask.run"
    p = mnemon("run", str(path), "--engine", "dask", "--workers", "2", "--run-root", str(root),
               "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    assert json.loads(p.stdout)["done"] == len(tasks)
    r = rows(root)
    assert all(len(x["workspace"]) == 40 for x in r.values())
    out = tmp_path / "patches"
    p = mnemon("results", str(root), "--patch", str(out), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("wrote 3 patches")
    for t in ("d1", "d2", "d3"):
        assert applied(src, out / f"{t}.patch", tmp_path / f"apply-{t}") == {
            "base.txt": f"base of {t}\n", f"out/{t}.txt": f"made by {t}\n"}
    assert mnemon("verify", str(root), cwd=tmp_path).returncode == 0
