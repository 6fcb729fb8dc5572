"""A job re-run over a damaged log: the task whose log (or an ancestor's) does not read fails
with one line naming the file and the line; the other tasks run. Through the real CLI, in a
subprocess, on the example job of docs/ (decision 0319)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "docs" / "examples" / "capitals"


def mnemon(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mnemon", *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd)


def results(root: Path) -> dict[str, dict]:
    return {r["task"]: r for r in map(json.loads, (root / "results.jsonl").read_text()
                                      .splitlines())}


@pytest.fixture(scope="module")
def first_run(tmp_path_factory) -> Path:
    """The example job run once: five tasks (t1…t5), each with three synod children."""
    here = tmp_path_factory.mktemp("damaged")
    shutil.copytree(EXAMPLE, here / "job")
    done = mnemon("run", "job/capitals.toml", "--run-root", "run", cwd=here)
    assert done.returncode == 0, done.stderr
    assert {r["status"] for r in results(here / "run").values()} == {"done"}
    return here


def _rerun_over(first: Path, tmp: Path, damage, *, keep_results: bool = False):
    """Copy the first run, damage t1's log, forget the results (the tasks resume from their
    logs, as after a run that was cut short) unless ``keep_results``, and run the job again."""
    shutil.copytree(first / "job", tmp / "job")
    shutil.copytree(first / "run", tmp / "run")
    if not keep_results:
        (tmp / "run" / "results.jsonl").unlink()
    log = tmp / "run" / "agents" / "t1" / "record.jsonl"
    lines = log.read_bytes().split(b"\n")
    damage(lines)
    log.write_bytes(b"\n".join(lines))
    return mnemon("run", "job/capitals.toml", "--run-root", "run", "--json", cwd=tmp)


def _flip_a_key(lines):  # a flipped byte in the tag of line 2's first field after "t"
    i = lines[1].index(b'"turn"') + 2
    lines[1] = lines[1][:i] + bytes([lines[1][i] ^ 0x01]) + lines[1][i + 1:]


def _flip_the_text(lines):  # a flipped byte in line 2's text: the line still parses
    i = lines[1].index(b"capital")
    lines[1] = lines[1][:i] + bytes([lines[1][i] ^ 0x20]) + lines[1][i + 1:]


def _garbage(lines):  # garbage in place of line 6
    lines[5] = b"garbage \x00 here"


@pytest.mark.parametrize("damage, where", [
    (_flip_a_key, "agents/t1/record.jsonl:2: the chain breaks here (edited)"),
    (_flip_the_text, "agents/t1/record.jsonl:2: the chain breaks here (edited)"),
    (_garbage, "agents/t1/record.jsonl:6: the chain breaks here (edited)"),
])
def test_the_damaged_task_fails_in_one_line_and_the_others_run(first_run, tmp_path, damage,
                                                               where):
    done = _rerun_over(first_run, tmp_path, damage)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    err = [line for line in done.stderr.splitlines() if line]
    assert len(err) == 1 and err[0].startswith("mnemon: task fr failed on a damaged log: ")
    assert where in err[0]
    summary = json.loads(done.stdout)
    assert (summary["done"], summary["failed"], summary["cancelled"]) == (4, 1, 0)
    rows = results(tmp_path / "run")
    assert rows["fr"]["status"] == "failed"
    assert rows["fr"]["reason"].startswith("failed: damaged log: ")
    assert where in rows["fr"]["reason"]
    assert {k: r["status"] for k, r in rows.items() if k != "fr"} == {
        "jp": "done", "ke": "done", "pe": "done", "nz": "done"}
    assert rows["jp"]["answer"] == "Tokyo."


def test_a_repaired_log_is_tried_again(first_run, tmp_path):
    """A task failed on a damaged log is not final: once the log is repaired, the next run
    resumes it (and skips the others, done)."""
    done = _rerun_over(first_run, tmp_path, _garbage)
    assert results(tmp_path / "run")["fr"]["status"] == "failed"
    shutil.copy(first_run / "run" / "agents" / "t1" / "record.jsonl",
                tmp_path / "run" / "agents" / "t1" / "record.jsonl")
    again = mnemon("run", "job/capitals.toml", "--run-root", "run", "--json", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)
    assert (summary["done"], summary["failed"], summary["skipped"]) == (5, 0, 4)
    assert results(tmp_path / "run")["fr"]["answer"] == "Paris."
    assert done.returncode == 0


def test_finished_tasks_over_a_damaged_log_are_skipped_not_refused(first_run, tmp_path):
    """Every task final: the re-run requests nothing; the spend it reads back counts around
    the line that is not a record instead of dying on it."""
    done = _rerun_over(first_run, tmp_path, _garbage, keep_results=True)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    summary = json.loads(done.stdout)
    assert (summary["done"], summary["skipped"]) == (5, 5)
