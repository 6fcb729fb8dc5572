"""A Dask run's chunks claim each task as they start it (``claims``, decision 0472): whatever
the interleaving of the chunks' walks and however often a chunk's attempt dies and runs again,
every task is run by exactly one chunk, and a chunk run again finds every task it had taken."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

from hypothesis import given, settings, strategies as st

from mnemon.orchestrator.jobs.claims import (SLOT, Claims, all_taken, create, steal_order, stop,
                                             walk)


def _held(path: Path) -> dict[int, str]:
    """The claims file's task slots that are taken: task index -> chunk."""
    raw = path.read_bytes()
    slots = [raw[i:i + SLOT].rstrip(b"\0").decode() for i in range(0, len(raw), SLOT)]
    return {i - 2: name for i, name in enumerate(slots) if i >= 2 and name}


def _ranges(sizes: list[int]) -> list[list[SimpleNamespace]]:
    out, at = [], 0
    for n in sizes:
        out.append([SimpleNamespace(index=at + k) for k in range(n)])
        at += n
    return out


class _Chunk:
    """One chunk of a run: its attempts, each a walk over the claims folder."""

    def __init__(self, folder: Path, names: list[str], ranges, me: int):
        self.folder, self.names, self.ranges, self.me = folder, names, ranges, me
        self.ran: list[int] = []  # every task any attempt of this chunk was given
        self.attempt = None
        self.done = False
        self.restart()

    def restart(self) -> None:
        """The attempt dies (its worker killed); Dask runs the chunk again."""
        if self.attempt is not None:
            self.claims.close()
        self.claims = Claims(self.folder, self.names[self.me])
        others = [(self.names[j], self.ranges[j])
                  for j in steal_order(len(self.names), self.me)]
        self.attempt = walk(self.claims, self.ranges[self.me], lambda: others)
        self.given: list[int] = []  # this attempt's
        self.done = False

    def step(self) -> None:
        if self.done:
            return
        t = next(self.attempt, None)
        if t is None:
            self.done = True
        else:
            self.given.append(t.index)
            self.ran.append(t.index)


@settings(max_examples=150, deadline=None)
@given(sizes=st.lists(st.integers(0, 12), min_size=1, max_size=5),
       schedule=st.lists(st.tuples(st.integers(0, 4), st.sampled_from("nnnnr")), max_size=120))
def test_every_task_is_run_by_one_chunk_whatever_the_interleaving(tmp_path_factory, sizes,
                                                                   schedule):
    folder = tmp_path_factory.mktemp("claims") / "r.claims"
    create(folder, sum(sizes))
    names = [f"r-{i}" for i in range(len(sizes))]
    ranges = _ranges(sizes)
    chunks = [_Chunk(folder, names, ranges, i) for i in range(len(sizes))]
    for who, what in schedule:
        c = chunks[who % len(chunks)]
        c.restart() if what == "r" else c.step()
    holders: dict[int, str] = {}
    for c in chunks:  # each chunk's last attempt, run to its end (Dask's retries)
        kept = set(c.ran)
        c.restart()
        while not c.done:
            c.step()
        assert kept <= set(c.given), "a chunk run again is given every task it had taken"
        for i in c.given:
            assert holders.setdefault(i, c.names[c.me]) == c.names[c.me], \
                f"task {i} given to two chunks"
        c.claims.close()
    every = {t.index for r in ranges for t in r}
    assert set(holders) == every, "every task run"
    for c in chunks:
        assert set(c.ran) <= {i for i, h in holders.items() if h == c.names[c.me]}, \
            "no attempt of a chunk was ever given another chunk's task"
    # on disk: one claim per task, naming its chunk, and the mark that every task is taken
    assert _held(folder) == holders
    assert all_taken(folder)


def test_a_thief_takes_the_tail_and_the_owner_stops_at_it(tmp_path):
    ranges = _ranges([6, 6])
    path = tmp_path / "r.claims"
    create(path, 12)
    owner = Claims(path, "r-0")
    thief = Claims(path, "r-1")
    mine = walk(owner, ranges[0], lambda: [("r-1", ranges[1])])
    first = [next(mine).index for _ in range(2)]  # the owner starts 0 and 1
    assert not all_taken(path)
    stolen = list(walk(thief, ranges[1], lambda: [("r-0", ranges[0])]))
    assert all_taken(path), "the thief's walk went through every range"
    # the thief ran its own six, then the owner's range from its end down to the owner's claims
    assert [t.index for t in stolen] == [6, 7, 8, 9, 10, 11, 5, 4, 3, 2]
    assert first + [t.index for t in mine] == [0, 1], \
        "the owner met the thief's claims and its range, and the thief's, were taken"
    assert owner.take(3) == "r-1" and owner.take(0) is None and thief.take(0) == "r-0"
    owner.close()
    thief.close()


def test_a_claim_is_one_slot_naming_its_chunk(tmp_path):
    """No file-system entry per claim (0.1–0.6 ms of kernel time each on this VM's ext4): a
    slot of one file, written under its lock, holding the chunk's name."""
    path = tmp_path / "r.claims"
    create(path, 10)
    a, b = Claims(path, "run1234-0"), Claims(path, "run1234-1")
    assert a.take(7) is None
    assert os.listdir(tmp_path) == ["r.claims"] and path.stat().st_size == 12 * SLOT
    assert _held(path) == {7: "run1234-0"}
    assert b.take(7) == "run1234-0" and a.take(7) is None and b.take(9) is None
    assert _held(path) == {7: "run1234-0", 9: "run1234-1"}
    a.close()
    b.close()


def test_a_stopped_run_ends_every_walk(tmp_path):
    """Ctrl-C: the driver marks the claims stopped; a chunk still walking takes nothing more,
    nor does one that starts after, nor one whose claims file is gone."""
    path = tmp_path / "r.claims"
    create(path, 6)
    c = Claims(path, "r-0")
    ranges = _ranges([3, 3])
    w = walk(c, ranges[0], lambda: [("r-1", ranges[1])])
    assert next(w).index == 0
    stop(path)
    assert not all_taken(path)
    path.unlink()  # as the driver does next: the open file still says stopped
    assert list(w) == []
    c.close()
    late = Claims(path, "r-1")
    assert list(walk(late, ranges[1], lambda: [("r-0", ranges[0])])) == []
    late.close()


def test_steal_order_starts_with_the_next_chunk():
    assert steal_order(4, 0) == [1, 2, 3]
    assert steal_order(4, 2) == [3, 0, 1]
    assert steal_order(1, 0) == []


def test_a_chunk_run_again_keeps_the_lines_of_what_it_took_and_did_not_reach(tmp_path):
    """A chunk's earlier attempt finished another chunk's task; run again, its walk does not
    reach that task (the run was stopped: the tasks file is gone). The rewritten results file
    keeps its line: the merge finds the task done, not lost."""
    import json
    import pickle
    import subprocess
    import sys

    from mnemon.lineage.runroot import create_run_root
    from mnemon.orchestrator.jobs.build import load

    folder = tmp_path / "job"
    folder.mkdir()
    path = folder / "job.toml"
    path.write_text('[provider]\nname = "scripted"\n\n[[tasks]]\nid = "a"\nprompt = "one"\n\n'
                    '[[tasks]]\nid = "b"\nprompt = "two"\n')
    job, tasks = load(path)
    root = create_run_root(tmp_path / "run", "the driver")
    (root / "results.d").mkdir()
    create(root / "results.d" / "r.claims", len(tasks))
    earlier = Claims(root / "results.d" / "r.claims", "r-0")
    assert earlier.take(tasks[1].index) is None  # b, taken by r-0 from r-1
    earlier.close()
    done_b = {"task": "b", "status": "done", "answer": "earlier", "agent": "b", "reason": None,
              "usage": {}, "cost_usd": 0.0, "attempts": 1}
    (root / "results.d" / "r-0.jsonl").write_text(json.dumps(done_b) + "\n")
    share = {"file": "r.tasks", "others": [("r-1", 1, 2)]}  # no such file: nothing reached
    code = (
        "import pickle, sys\n"
        "from mnemon.orchestrator.jobs.spread import run_chunk\n"
        "job, tasks, root, share = pickle.loads(sys.stdin.buffer.read())\n"
        "print(run_chunk(job, tasks, root, 'r-0', 'r', {'usage': {}, 'cost_usd': 0.0},"
        " share=share)['done'])\n")
    proc = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(
        (job, tasks[:1], str(root), share)), capture_output=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    lines = [json.loads(x) for x in (root / "results.d" / "r-0.jsonl").read_text().splitlines()]
    assert [(x["task"], x["status"]) for x in lines] == [("a", "done"), ("b", "done")]
    assert lines[1]["answer"] == "earlier"
