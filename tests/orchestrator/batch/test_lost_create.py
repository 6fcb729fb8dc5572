"""A batch create whose answer is lost is never sent again blind (decision 0313).

The loopback server accepts each create (and each OpenAI upload), then loses its answer once —
the connection reset, or a proxy's 502 — or holds it while the test SIGKILLs the job. Each wave
must still make exactly one batch, every custom id go out once, and the run cost what an
undisturbed run costs: a batch made twice would leave one never collected and never counted.
"""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path

import pytest

from mnemon.orchestrator.costs import run_cost

from .kit import check_once, popen_cli, results, run_cli, turns, write_job
from .server import Server

TASKS = 6


def _cost(root: Path) -> float:
    return sum(c.cost_usd for c in run_cost(root))


def _reference(tmp_path: Path, provider: str) -> tuple[dict, dict, float]:
    """The same job, its answers never lost: its answers, turns and cost."""
    with Server() as s:
        job = write_job(tmp_path / "ref", provider=provider, url=s.url, tasks=TASKS)
        r = run_cli("run", str(job), "--engine", "batch", cwd=job.parent)
        assert r.returncode == 0, r.stderr
    root = job.parent / "job.run"
    answers = {k: v["answer"] for k, v in results(root / "results.jsonl").items()}
    return answers, turns(root), _cost(root)


def _one_batch_per_wave(s: Server, root: Path, out: dict | None = None) -> None:
    """Every custom id sent once, one batch made per wave (every one in the ledger), and — on
    OpenAI — one input file kept per batch."""
    st = s.state
    assert len(st.submitted) == len(set(st.submitted)), "a custom id was submitted twice"
    ledgered = {json.loads(p.read_text())["batch"] for p in (root / "batches").glob("*.json")}
    assert ledgered == set(st.batches)
    waves = {json.loads(p.read_text())["wave"] for p in (root / "batches").glob("*.json")}
    assert len(st.batches) == len(waves)
    if out is not None:
        assert out["waves"] == len(st.batches)
    if any(b.provider == "openai" for b in st.batches.values()):
        assert len(st.file_meta) == len(st.batches)
    assert not list((root / "batches").glob("*.create"))


@pytest.mark.parametrize("drop", ["reset", "502"])
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_create_whose_answer_is_lost_is_found_not_sent_again(tmp_path, provider, drop):
    ref_answers, ref_turns, ref_cost = _reference(tmp_path, provider)
    with Server() as s:
        s.state.control.drop = drop
        job = write_job(tmp_path / "job", provider=provider, url=s.url, tasks=TASKS)
        r = run_cli("run", str(job), "--engine", "batch", "--json", cwd=job.parent)
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        root = job.parent / "job.run"
        made = [d for d in s.state.dropped if not d.startswith("file-")]
        assert sorted(made) == sorted(s.state.batches)  # every create's answer lost once
        if provider == "openai":  # and every upload's
            assert len(s.state.dropped) == 2 * len(s.state.batches)
            assert s.state.uploads == len(s.state.batches)
        _one_batch_per_wave(s, root, out)
    assert out["done"] == TASKS
    assert {k: v["answer"] for k, v in results(root / "results.jsonl").items()} == ref_answers
    assert turns(root) == ref_turns
    assert _cost(root) == pytest.approx(ref_cost, abs=1e-9)
    assert out["cost_usd"] == pytest.approx(ref_cost, abs=1e-5)
    check_once(root)


class _Hold:
    """A server hook that holds the answer to the n-th thing made (a batch, or an OpenAI
    input file) until released, and says when it is holding."""

    def __init__(self, kind: str, nth: int = 2):
        self.kind, self.nth, self.seen = kind, nth, 0
        self.holding = threading.Event()
        self.release = threading.Event()
        self.made: str | None = None

    def __call__(self, made: str) -> None:
        if made.startswith("file-") != (self.kind == "file"):
            return
        self.seen += 1
        if self.seen == self.nth:
            self.made = made
            self.holding.set()
            self.release.wait(60)


@pytest.mark.parametrize("provider, kind", [("anthropic", "batch"), ("openai", "batch"),
                                            ("openai", "file")])
def test_sigkill_while_a_create_is_answered_a_re_run_finds_the_batch(tmp_path, provider, kind):
    """The job is SIGKILLed after the server accepted its second wave's create (or, on OpenAI,
    its input file) and before the answer reached it. The re-run looks for the create by the
    marker the run root recorded before it was sent: it adopts the accepted batch (no request
    sent again), or — the upload accepted, the batch never created — deletes the orphan file
    and creates the batch once."""
    ref_answers, ref_turns, ref_cost = _reference(tmp_path, provider)
    with Server() as s:
        hold = s.state.control.after_create = _Hold(kind)
        job = write_job(tmp_path / "job", provider=provider, url=s.url, tasks=TASKS)
        root = job.parent / "job.run"
        proc = popen_cli("run", str(job), "--engine", "batch", cwd=job.parent)
        try:
            assert hold.holding.wait(60), "the second create never came"
            proc.kill()
            proc.communicate(timeout=30)
        finally:
            hold.release.set()
        assert proc.returncode == -signal.SIGKILL
        pending = [json.loads(p.read_text()) for p in (root / "batches").glob("*.create")]
        if kind == "batch":  # accepted, and its answer never recorded
            assert hold.made in s.state.batches and not (root / "batches" /
                                                         f"{hold.made}.json").exists()
        s.state.control.after_create = None
        r = run_cli("run", str(job), "--engine", "batch", "--json", cwd=job.parent)
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        _one_batch_per_wave(s, root, out)
        assert len(pending) == 1  # the marker, recorded before the create was sent
        entry = pending[0]
        if kind == "batch":  # adopted: its file names the marker, its requests the create's
            kept = json.loads((root / "batches" / f"{hold.made}.json").read_text())
            assert kept["marker"] == entry["marker"] and kept["requests"] == entry["requests"]
        else:  # no batch was made: the orphan input file deleted, the batch made once
            assert hold.made not in s.state.file_meta
            assert ("DELETE", f"/v1/files/{hold.made}") in s.state.log
    assert out["done"] == TASKS
    assert {k: v["answer"] for k, v in results(root / "results.jsonl").items()} == ref_answers
    assert turns(root) == ref_turns
    assert _cost(root) == pytest.approx(ref_cost, abs=1e-9)
    check_once(root)


def test_a_lost_answer_that_cannot_be_looked_for_ends_the_run_and_sends_nothing_again(tmp_path):
    """The create's answer is lost and the server cannot list its batches (404): the run ends
    on one line (exit 2) naming the marker, having sent nothing again; its marker stays in the
    run root. Re-run once the listing answers, it adopts the batch: one batch, every custom id
    sent once."""
    with Server() as s:
        s.state.control.drop = "reset"
        s.state.control.no_list = True
        job = write_job(tmp_path, provider="anthropic", url=s.url, tasks=3, synod=0)
        root = tmp_path / "job.run"
        r = run_cli("run", str(job), "--engine", "batch", cwd=tmp_path)
        assert r.returncode == 2, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
        assert "answer was lost" in r.stderr and "nothing was sent again" in r.stderr
        assert len(s.state.batches) == 1
        [pending] = [json.loads(p.read_text()) for p in (root / "batches").glob("*.create")]
        assert pending["marker"] in r.stderr
        s.state.control.no_list = False
        r = run_cli("run", str(job), "--engine", "batch", "--json", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["done"] == 3
        _one_batch_per_wave(s, root)
    check_once(root)
