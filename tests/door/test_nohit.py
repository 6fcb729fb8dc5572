"""The quick no-hit answer from outside (``lineage.nohit``) never differs from the door's: when
it says "no hit", the door on a full fold of the log finds none; it says so only while the
checkpoint describes the whole log; and it answers without importing a decoder."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

import mnemon.session.checkpoint.layout as layout
from mnemon.lineage.fork import fork
from mnemon.lineage.nohit import quick_miss
from mnemon.lineage.runroot import create_run_root, make_loader
from mnemon.orchestrator.cli import main
from mnemon.session.door import Door
from mnemon.session.resume import fold_file
from tests.helpers import door_open, new_agent, prompt, tool_turn

from .test_checkpoint import DAMAGE, OPS, apply_damage, play
from .test_props import _reference, logs, patterns, write_log

SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])

NEVER = "QUOKKA-7f3a-ZEBRA"  # a literal no log of these tests holds
LITERALS = ["needle", "p1", "out", "more", "child task", "delegate", "appended", "tu_",
            "bash", "record", NEVER, NEVER + "-2", "a1", "x" * 40]


@pytest.fixture(autouse=True)
def always(monkeypatch):
    monkeypatch.setattr(layout, "MIN_BYTES", 0)


def _door_total(root, agent: str, pattern: str) -> int:
    """The door's answer on a full fold of the log (no checkpoint read)."""
    src = f"agents/{agent}/record.jsonl"
    ctx, _ = fold_file(root / src, src, loader=make_loader(root))
    return Door(root, ctx).grep(pattern)["total"]


@SETTINGS
@given(ops=OPS, more=OPS, damage=DAMAGE, at=st.integers(0, 10 ** 9), forked=st.booleans())
def test_no_hit_only_when_the_door_finds_none(tmp_path_factory, ops, more, damage, at, forked):
    root = create_run_root(tmp_path_factory.mktemp("nh") / "run", "tests")
    agent = "a1"
    log = new_agent(root, "a1")
    play(log, ops)
    if forked:  # the child's turns lie in the parent's file too
        prompt(log, "delegate")
        log = fork(root, log, "c1", task="child task")
        agent = "c1"
    play(log, ops[::2])
    b = new_agent(root, "b1")
    play(b, more)
    b.close()
    here = root / "agents" / agent
    door_open(here)  # writes the checkpoint
    door_open(root / "agents" / "b1")
    assert quick_miss(here, NEVER), "a current checkpoint and a literal no file holds"
    log = apply_damage(root, log, agent, damage, at, forked, more,
                       appended=f"appended needle {NEVER}-2")
    for lit in LITERALS:
        if quick_miss(here, lit):
            assert _door_total(root, agent, lit) == 0, (lit, damage)
    if damage in ("missing", "appended", "foreign"):  # (a rewrite may write the same bytes)
        assert not quick_miss(here, NEVER), f"the checkpoint no longer describes the log ({damage})"


@SETTINGS
@given(recs=logs(), data=st.data())
def test_every_writers_forms_and_every_pattern(tmp_path_factory, recs, data):
    """Logs written by msgspec, ``\\u``-escaping, ``/``-escaping and HTML-safe writers; random
    patterns: a quick "no hit" is always the door's (and the straight count's) zero."""
    root = create_run_root(tmp_path_factory.mktemp("nw") / "run", "tests")
    escape = data.draw(st.lists(st.integers(0, 3), min_size=len(recs), max_size=len(recs)))
    write_log(root / "agents" / "a1" / "record.jsonl", recs, escape)
    here = root / "agents" / "a1"
    door, _ = door_open(here)
    assert quick_miss(here, NEVER)
    for _ in range(8):
        pattern = data.draw(patterns())
        if quick_miss(here, pattern):
            assert door.grep(pattern)["total"] == 0 == _reference(recs, pattern), pattern


def test_what_the_quick_answer_leaves_to_the_door(run_root):
    log = new_agent(run_root, "a1")
    for i in range(4):
        tool_turn(log, f"t{i}", "ls", f"out {i} src/a.py")
    here = run_root / "agents" / "a1"
    assert not quick_miss(here, NEVER), "no checkpoint yet"
    log.close()
    door_open(here)
    assert quick_miss(here, NEVER)
    assert quick_miss(here, r"QUOKKA\.py")  # an escaped metacharacter: still a plain literal
    assert not quick_miss(here, "src/a")  # held
    assert not quick_miss(here, "src\\/a")  # a form of it is held
    assert not quick_miss(here, NEVER + ".*x")  # not just a literal: the regex decides
    assert not quick_miss(here, "QUOKKA(")  # not a valid regex: the door refuses it
    assert not quick_miss(here, 'say "QUOKKA"')  # JSON escapes the quote: the door decodes
    assert not quick_miss(here / "nowhere", NEVER)
    path = here / "record.jsonl"
    with open(path, "ab") as f:
        f.write(b'{"t":"UserPr')  # a torn tail: the door reports it
    assert not quick_miss(here, NEVER)


def test_the_cli_answers_a_miss_without_a_decoder(tmp_path):
    """``mnemon transcript grep`` of a literal no file holds, over a log with its checkpoint
    (over 1 MiB: logs under it get none), as a whole process: the door's answer, in text and
    JSON, and msgspec is never imported; a hit still goes through the door."""
    root = create_run_root(tmp_path / "run", "tests")
    log = new_agent(root, "a1")
    for i in range(40):
        tool_turn(log, f"t{i}", "cat big", f"line {i}\n" + "y" * 40_000)
    log.close()
    here = root / "agents" / "a1"
    assert (here / "record.jsonl").stat().st_size > 1 << 20
    assert main(["transcript", "index", str(here), "--json"]) == 0  # writes the checkpoint
    script = textwrap.dedent(f"""
        import io, json, sys, contextlib
        from mnemon.orchestrator.cli import main
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            codes = [main(["transcript", "grep", {str(here)!r}, {NEVER!r}]),
                     main(["transcript", "grep", {str(here)!r}, {NEVER!r}, "--json"])]
        print(json.dumps([codes, out.getvalue(), "msgspec" in sys.modules]))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    codes, printed, decoded = json.loads(done.stdout.splitlines()[-1])
    assert codes == [0, 0]
    assert printed == '0 matching lines\n{"hits": [], "total": 0}\n'
    assert not decoded
    assert main(["transcript", "grep", str(here), "line 3"]) == 0
