"""The end (and a little of the start) of a Dask run (decision 0471): the fork server ended and
reaped with its run, the optional imports deferred, a results line read as ``json.loads`` reads
it, the run root's agents listed as before."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from mnemon.orchestrator.jobs.results import decode_line, read_results


@pytest.mark.parametrize("raw", [
    b'{"task": "t1", "status": "done", "usage": {"output_tokens": 3}, "cost_usd": 0.014414}',
    b'{"task": "t1", "score": NaN}',  # msgspec refuses it; json.loads reads it
    b'{"task": "t1", "big": 1e400, "n": 123456789012345678901234567890}',
    b'{"task": "t1", "a": 1, "a": 2}',
    b'  {"task": "t1"}\r',
])
def test_decode_line_reads_what_json_loads_reads(raw):
    got, want = decode_line(raw), json.loads(raw)
    assert json.dumps(got) == json.dumps(want)  # NaN == NaN as text


@pytest.mark.parametrize("raw", [b'{"task": "t1", "sta', b"not json", b""])
def test_decode_line_refuses_what_json_loads_refuses(raw):
    with pytest.raises(ValueError):
        decode_line(raw)


def test_read_results_keeps_the_last_whole_line_per_task(tmp_path):
    f = tmp_path / "r.jsonl"
    f.write_bytes(b'{"task": "a", "status": "failed"}\n{"task": "b", "x": NaN}\n'
                  b'garbage\n{"task": "a", "status": "done"}\n{"task": "c", "sta')
    got = read_results(f)
    assert sorted(got) == ["a", "b"] and got["a"]["status"] == "done"


def test_list_agents_counts_a_directory_only_with_its_log(tmp_path):
    from mnemon.lineage.runroot import list_agents

    assert list_agents(tmp_path) == []  # no agents/ at all
    (tmp_path / "agents").mkdir()
    for name in ("t10", "t2", "t1"):
        (tmp_path / "agents" / name).mkdir()
        (tmp_path / "agents" / name / "record.jsonl").write_text("")
    (tmp_path / "agents" / "ahead").mkdir()  # made ahead of its task: no agent yet
    (tmp_path / "agents" / "odd").mkdir()
    (tmp_path / "agents" / "odd" / "record.jsonl").mkdir()  # not a file
    (tmp_path / "agents" / "file").write_text("")
    assert list_agents(tmp_path) == ["t1", "t10", "t2"]
    (tmp_path / "agents2").write_text("")
    assert list_agents(tmp_path / "agents2") == []  # not a directory: nothing in it


def _run(code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_numpy_deferred_refuses_the_names_in_the_block_only():
    out = _run(
        "import sys\n"
        "from mnemon.orchestrator.jobs.forks import numpy_deferred\n"
        "import json  # already imported: left alone\n"
        "with numpy_deferred('json', 'mnemon_no_such_optional'):\n"
        "    import json as j\n"
        "    try:\n"
        "        import mnemon_no_such_optional\n"
        "    except ImportError:\n"
        "        print('refused')\n"
        "print('mnemon_no_such_optional' in sys.modules, j is sys.modules['json'])\n")
    assert out.split() == ["refused", "False", "True"]


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_serving_ends_and_reaps_the_fork_server_and_a_new_one_starts():
    """``serving`` (a LocalCluster run's fork server): ended and reaped after its block — not
    a zombie, nothing left forked from it — and the next run gets a new one."""
    pytest.importorskip("distributed")
    out = _run(
        "import os\n"
        "from multiprocessing import forkserver\n"
        "from mnemon.orchestrator.jobs import forks\n"
        "pids = []\n"
        "for _ in range(2):\n"
        "    with forks.serving():\n"
        "        with forks.serving():  # a second run at once: the server is kept for it\n"
        "            pass\n"
        "        pid = forkserver._forkserver._forkserver_pid\n"
        "        os.kill(pid, 0)  # running\n"
        "        forks.end_early()\n"
        "    pids.append(pid)\n"
        "    assert forkserver._forkserver._forkserver_pid is None\n"
        "    assert not os.path.exists(f'/proc/{pid}'), 'reaped, not a zombie'\n"
        "print(pids[0] != pids[1])\n")
    assert out.split() == ["True"]


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_a_fork_server_the_host_started_is_the_hosts():
    """A program that embeds mnemon and started the fork server itself (for pools of its own)
    keeps it and what it forked: a Dask run ends only a server it started."""
    pytest.importorskip("distributed")
    out = _run(
        "import os, multiprocessing\n"
        "from multiprocessing import forkserver\n"
        "from mnemon.orchestrator.jobs import forks\n"
        "ctx = multiprocessing.get_context('forkserver')\n"
        "child = ctx.Process(target=__import__('time').sleep, args=(30,))\n"
        "child.start()  # the host's own process, forked from the server it started\n"
        "pid = forkserver._forkserver._forkserver_pid\n"
        "with forks.serving():\n"
        "    forks.end_early()\n"
        "os.kill(pid, 0)  # the host's server still runs\n"
        "print(forkserver._forkserver._forkserver_pid == pid, child.is_alive())\n"
        "child.kill(); child.join()\n")
    assert out.split() == ["True", "True"]


def test_the_driver_of_a_local_cluster_imports_no_numpy(tmp_path):
    """Starting its workers, Dask asks for its multiprocessing context, which imports NumPy
    (and pandas, lz4) for a fork server Dask would start; mnemon's runs already: the driver
    asks first with them deferred (decision 0472). ~0.07 s of the driver's before its first
    worker was forked, the time the nannies waited for it."""
    pytest.importorskip("distributed")
    pytest.importorskip("numpy")
    (tmp_path / "job.toml").write_text(
        'concurrency = 2\n\n[provider]\nname = "scripted"\nlatency_s = 0.01\n\n'
        + "".join(f'[[tasks]]\nid = "q{i}"\nprompt = "q {i}"\n\n' for i in range(4)))
    (tmp_path / "drive.py").write_text(
        "import sys\n"
        "from mnemon.orchestrator.jobs.spread import run_job\n"
        "if __name__ == '__main__':\n"
        f"    s = run_job({str(tmp_path / 'job.toml')!r}, run_root=None, output=None,\n"
        "                scheduler=None, workers=2)\n"
        "    print(s['done'], sorted(m for m in ('numpy', 'pandas', 'lz4') if m in sys.modules))\n")
    proc = subprocess.run([sys.executable, str(tmp_path / "drive.py")], capture_output=True,
                          text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines()[-1] == "4 []"
