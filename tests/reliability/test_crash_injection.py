"""Crash injection under load (see ``crashkit``): 200 SIGKILLs at random moments of a multi-agent
run with evictions and a mnemon child; every acknowledged record survives, every log folds,
``resume_run`` finishes with no turn recorded twice and no provider call repeated."""

from __future__ import annotations

import os

import pytest

from .crashkit import Zygote, one_case

CASES = int(os.environ.get("MNEMON_CRASH_CASES", "200"))


@pytest.fixture(scope="module")
def zygote():
    z = Zygote()
    yield z
    z.close()


def test_the_workload_runs_to_its_end_uncrashed(zygote, tmp_path):
    from .crashkit import check

    root, acks = tmp_path / "run", tmp_path / "acks"
    assert zygote.run(root, acks, 1, 0, "none", None) == 0
    seen = check(root, acks)
    assert seen["agents"] == 2 and seen["resumed"] == 0 and seen["acks"] > 60
    text = (root / "agents" / "a1" / "record.jsonl").read_text()
    assert '"t":"Evicted"' in text, "the workload evicts"
    assert "MARK-7" in (root / "agents" / "a2" / "record.jsonl").read_text()


def test_hundreds_of_kills(zygote, tmp_path):
    seen = [one_case(zygote, tmp_path, seed) for seed in range(CASES)]
    killed = sum(s["killed"] for s in seen)
    assert killed >= CASES * 0.6, f"only {killed} of {CASES} cases were killed"
    assert sum(s["torn"] for s in seen) > 0, "some kills tore a line"
    assert sum(s["resumed"] for s in seen) > CASES * 0.3, "resumes were exercised"
    assert {s["mode"] for s in seen} == {"before", "partial", "unacked", "acked", "timed"}


@pytest.mark.parametrize("tail", [b"", b'{"t":"SessionStarted","agent":"a2","par'])
def test_an_agent_whose_creation_was_interrupted_is_set_aside_on_resume(zygote, tmp_path, tail):
    """Killed inside a child's first append: its log holds no whole record. Nothing of it was
    acknowledged; resume sets it aside (moved to incomplete/, kept) and finishes the run."""
    from .crashkit import _settings, _tools, _provider

    from mnemon.orchestrator.supervisor import Supervisor
    import trio

    root, acks = tmp_path / "run", tmp_path / "acks"
    assert zygote.run(root, acks, 3, 0, "none", None) == 0
    a1 = root / "agents" / "a1" / "record.jsonl"
    lines = a1.read_bytes().split(b"\n")
    a1.write_bytes(b"\n".join(lines[:-2]) + b"\n")  # a1 had not ended
    (root / "agents" / "a9").mkdir()
    (root / "agents" / "a9" / "record.jsonl").write_bytes(tail)
    sup = Supervisor(root, _provider(), _settings(), user_tools=_tools())
    roots = sup.resume_run()
    assert [n.id for n in roots] == ["a1"]
    (aside,) = (root / "incomplete").iterdir()
    assert aside.name.startswith("a9-") and aside.read_bytes() == tail
    assert not (root / "agents" / "a9" / "record.jsonl").exists()
    trio.run(sup.run, roots[0])
    sup.close()
    assert roots[0].reason == "done"
