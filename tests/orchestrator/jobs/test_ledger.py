"""The ledger files that carry a Dask job's spend between workers (decision 0251): one record
per attempt, read whole or not at all, and a supervisor whose budget weighs every worker's."""

from __future__ import annotations

from mnemon.lineage.runroot import create_run_root
from mnemon.orchestrator.jobs.ledger import (RECORD, Ledger, Reader, SharedSpend, decode,
                                             encode)
from mnemon.session.records import Usage

from ..conftest import call, fetch_tool, provider, settings


def test_a_record_reads_back_and_a_torn_one_does_not():
    u = Usage(input_tokens=1, output_tokens=2, cache_read_tokens=3, cache_write_tokens=40)
    data = encode(u, 0.125, 7)
    assert len(data) == RECORD and data.endswith(b"\n")
    e = decode(data)
    assert (e.usage, e.usd, e.running, e.ended) == (u, 0.125, 7, False)
    assert decode(encode(u, 0.125, 0, ended=True)).ended
    torn = encode(Usage(input_tokens=999), 9.5, 1)[:20] + data[20:]  # a write caught halfway
    assert decode(torn) is None and decode(b"\0" * RECORD) is None


def test_a_reader_sums_the_other_attempts_and_keeps_a_good_record_over_a_torn_one(tmp_path):
    a, b = Ledger(tmp_path, "c0.1.1"), Ledger(tmp_path, "c1.1.2")
    a.publish(Usage(input_tokens=10), 0.5)
    b.publish(Usage(output_tokens=5), 0.25)
    assert a.others.total() == (Usage(output_tokens=5), 0.25), "not its own"
    everyone = Reader(tmp_path)
    assert everyone.total() == (Usage(input_tokens=10, output_tokens=5), 0.75)
    (tmp_path / "c1.1.2").write_bytes(b"v1 12 garbage")
    assert everyone.total() == (Usage(input_tokens=10, output_tokens=5), 0.75)
    a.publish(Usage(input_tokens=20), 1.0, ended=True)
    assert everyone.total() == (Usage(input_tokens=20, output_tokens=5), 1.25)
    (tmp_path / "c0.1.1").write_bytes(encode(Usage(input_tokens=99), 9.0, 0))
    assert everyone.total()[0].input_tokens == 20, "an ended attempt is not read again"
    a.close()
    b.close()


async def test_the_budget_counts_what_the_other_workers_spent(tmp_path):
    """The loop's own accounting publishes each turn; another worker's ledger stops the agent
    at its next turn boundary, with reason ``budget``."""
    root = create_run_root(tmp_path / "run", "test")
    folder = root / "ledger" / "r"
    mine, other = Ledger(folder, "c0.1.1"), Ledger(folder, "c1.1.2")
    turns = {"n": 0}

    def policy(request, state):
        turns["n"] += 1
        if turns["n"] == 3:  # meanwhile, on another worker
            other.publish(Usage(input_tokens=1_000_000), 0.0)
        return call(state, "fetch", i=turns["n"])

    sup = SharedSpend(root, provider(policy), settings(budget_tokens=500_000),
                      user_tools=[fetch_tool()], ledger=mine,
                      base=(Usage(output_tokens=100), 0.0))
    node = sup.new_root("work")
    await sup.run(node)
    assert node.reason == "budget" and node.turns_taken == 3
    own, _ = sup.own
    assert own == node.usage, "the own part is this process's turns, not the base or others"
    assert sup.usage == Usage(output_tokens=100) + Usage(input_tokens=1_000_000) + own
    published = Reader(folder, skip="c1.1.2").total()[0]
    assert published == own, "every turn published"
    sup.close()
    mine.close()
    other.close()


def test_the_driver_counts_each_task_as_its_line_lands(tmp_path):
    """``Watch`` reads only whole new lines of this run's results files (again from the start
    of a file its chunk rewrote), ignores another run's, and takes the running tasks of each
    chunk's newest attempt until the chunk has ended."""
    import json
    from types import SimpleNamespace

    from mnemon.orchestrator.jobs.spread import Watch

    tasks = [SimpleNamespace(id=f"k{i}") for i in range(1, 6)]
    prior = {"k1": {"task": "k1", "status": "done"}, "k2": {"task": "k2", "status": "budget"}}
    res = tmp_path / "results.d"
    res.mkdir()
    line = lambda t, s: json.dumps({"task": t, "status": s}) + "\n"  # noqa: E731
    (res / "old-0.jsonl").write_text(line("k3", "done"))  # another run's chunk
    chunk = res / "r1-0.jsonl"
    chunk.write_text(line("k2", "done") + '{"task": "k3", "sta')  # a line half written
    dead = Ledger(tmp_path / "ledger" / "r1", "r1-0.0001.7")
    dead.running = 2
    dead.publish(Usage(output_tokens=1), 0.5)
    watch = Watch(tmp_path, "r1", tasks, prior, base_usd=1.0)
    c = watch.counts
    assert (c.total, c.skipped, c.done, c.budget, c.finished_this_run) == (5, 1, 2, 0, 1)
    assert (c.running, watch.cost_usd) == (2, 1.5)
    live = Ledger(tmp_path / "ledger" / "r1", "r1-0.0002.8")  # the chunk, retried
    live.running = 1
    live.publish(Usage(output_tokens=1), 0.25)
    with open(chunk, "a") as f:
        f.write('tus": "failed"}\n')
    watch.poll()
    assert (c.done, c.failed, c.finished_this_run, c.running) == (2, 1, 2, 1)
    assert watch.cost_usd == 1.75, "a dead attempt's spend still counts"
    chunk.with_name("tmp").write_text(line("k2", "done") + line("k3", "failed")
                                      + line("k4", "cancelled"))
    chunk.with_name("tmp").replace(chunk)  # the chunk's end rewrites its file
    watch.ended.add("r1-0")
    watch.poll()
    assert (c.done, c.failed, c.cancelled, c.finished_this_run, c.running) == (2, 1, 1, 3, 0)
    dead.close()
    live.close()


def test_a_chunk_runs_the_job_its_driver_checked(tmp_path):
    """A Dask chunk is sent the job and its own tasks as the driver read and checked them: it
    does not read the job file again (once per chunk and worker, that was ~0.1 s of TOML on the
    way to the first turn), nor write the run root's manifest (the driver is its one writer)."""
    import os
    import subprocess
    import sys

    from mnemon.lineage.runroot import create_run_root
    from mnemon.orchestrator.jobs.build import load

    folder = tmp_path / "job"
    folder.mkdir()
    (folder / "in.jsonl").write_text('{"q": "one"}\n{"q": "two"}\n{"q": "three"}\n')
    path = folder / "job.toml"
    path.write_text('[provider]\nname = "scripted"\n\n[input]\npath = "in.jsonl"\n'
                    'prompt = "{q}"\n')
    job, tasks = load(path)
    root = create_run_root(tmp_path / "run", "the driver")
    code = (
        "import pickle, sys\n"
        "from mnemon.orchestrator.jobs.spread import run_chunk\n"
        "job, tasks, root = pickle.loads(sys.stdin.buffer.read())\n"
        "print(run_chunk(job, tasks, root, 'r-0', 'r', {'usage': {}, 'cost_usd': 0.0})['done'])\n")
    import pickle

    path.unlink()  # the chunk needs neither file: the driver read them
    (folder / "in.jsonl").unlink()
    done = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(
        (job, tasks[1:], str(root))), capture_output=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert done.stdout.decode().split() == ["2"]
    lines = (root / "results.d" / "r-0.jsonl").read_text().splitlines()
    assert sorted(__import__("json").loads(x)["task"] for x in lines) == \
        sorted(t.id for t in tasks[1:])
    assert not (root / "job.json").exists(), "the manifest is the driver's to write"
    assert sorted(os.listdir(root / "agents")) == ["t2", "t3"]
