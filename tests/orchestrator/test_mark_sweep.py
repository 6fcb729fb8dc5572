"""Mark-and-sweep: marks change nothing sent; a sweep changes exactly the marked blocks; the
transcript keeps the originals; the gate's arithmetic; candidate rules on real trajectories."""

from __future__ import annotations

import math

import msgspec
import pytest

from mnemon.orchestrator.importers import AssistantStep, ToolStep, UserStep, load
from mnemon.orchestrator.supervisor import open_supervisor
from mnemon.session.door import Door
from mnemon.session.errors import Refusal
from mnemon.session.records import AssistantMessage, Marked, Swept, ToolResults
from mnemon.session.render import render, replacement_label
from mnemon.session.sweep import Gate, candidates, default_replacement, gate

from ..conftest import TRAJECTORIES
from ..helpers import new_agent, prompt, tool_turn
from .conftest import call, fetch_tool, provider, records, say, settings


def _enc(x) -> bytes:
    return msgspec.json.encode(x)


def test_a_mark_changes_nothing_sent_and_a_sweep_exactly_the_marked_block(run_root):
    log = new_agent(run_root, "a1")
    prompt(log, "look at two files")
    t1 = tool_turn(log, "first", "cat a.py", "A" * 3000)
    t2 = tool_turn(log, "second", "cat b.py", "B" * 3000)
    prompt(log, "go on")
    before = _enc(render(log.ctx))
    log.append(Marked(block=(t1, 2), replacement="a.py: 3000 A's, nothing else"))
    assert _enc(render(log.ctx)) == before, "a mark changes nothing sent"
    log.append(Swept(blocks=[(t1, 2)]))
    after = render(log.ctx)
    old = msgspec.json.decode(before)
    diff = [(i, j) for i, (m, n) in enumerate(zip(old, after)) for j, (x, y) in
            enumerate(zip(m["content"], n["content"])) if x != y]
    assert len(old) == len(after) and len(diff) == 1
    i, j = diff[0]
    block = after[i]["content"][j]
    assert block["type"] == "tool_result"
    assert block["content"] == replacement_label(t1, 2, "a.py: 3000 A's, nothing else")
    assert f"{t1}.2" in block["content"] and "transcript_read" in block["content"]
    # the transcript still answers the original bytes
    door = Door(run_root, log.ctx)
    rec = door.read([t1])[0]["records"]
    assert rec[1]["results"][0]["content"] == "A" * 3000
    assert log.ctx.turn(t1).held == "swept" and log.ctx.turn(t2).held == "resident"


def test_mark_refusals_name_the_state(run_root):
    log = new_agent(run_root, "a1")
    prompt(log, "p")
    t1 = tool_turn(log, "x", "cat a.py", "A" * 100)
    t2 = tool_turn(log, "y", "cat a.py", "A" * 100)
    for block, repl, why in [((999, 0), "r", "not recorded"), ((t1, 7), "r", "has no block 7"),
                             ((t1, 2), "", "may not be empty"), ((t1, 2), "A" * 100, "shorter"),
                             ((t2, 2), "r", "turn in hand")]:
        with pytest.raises(Refusal, match=why):
            log.append(Marked(block=block, replacement=repl))
    log.append(Marked(block=(t1, 2), replacement="first"))
    log.append(Marked(block=(t1, 2), replacement="second"))  # a second mark replaces the first
    assert log.ctx.marks == {(t1, 2): "second"}
    log.append(Swept(blocks=[(t1, 2)]))
    with pytest.raises(Refusal, match="already swept"):
        log.append(Marked(block=(t1, 2), replacement="r"))
    with pytest.raises(Refusal, match="no pending mark"):
        log.append(Swept(blocks=[(t1, 1)]))


def test_gate_arithmetic_by_hand():
    g = Gate(reclaimed_tokens=1000, suffix_tokens=10_000, write_mult=1.25, read_mult=0.1,
             earliest=(5, 0))
    assert g.one_time == pytest.approx(10_000 * 1.15)
    assert g.saving_per_request == pytest.approx(100)
    assert g.payback_requests == pytest.approx(115)
    assert not g.pays(20) and g.pays(115)
    assert math.isinf(Gate(0, 5, 1.25, 0.1, None).payback_requests)


@pytest.mark.parametrize("w, turns", [(1.0, 22.5), (2.0, 47.5)])
def test_gate_reproduces_the_seed_worked_example(w, turns):
    """800k context, 200k reclaimed at position 100k, 1-hour TTL: the invalidated suffix is
    ~500k, one-time 450k–950k, saving 20k per turn, payback ~23–48 turns."""
    g = Gate(reclaimed_tokens=200_000, suffix_tokens=500_000, write_mult=w, read_mult=0.1,
             earliest=(1, 0))
    assert g.saving_per_request == pytest.approx(20_000)
    assert g.one_time == pytest.approx(500_000 * (w - 0.1))
    assert g.payback_requests == pytest.approx(turns)
    assert round(g.payback_requests) in (22, 23, 47, 48)


def test_gate_on_a_table(run_root):
    log = new_agent(run_root, "a1")
    prompt(log, "p")
    t1 = tool_turn(log, "x", "cat a.py", "A" * 8000)
    tool_turn(log, "y", "cat b.py", "B" * 100)
    log.append(Marked(block=(t1, 2), replacement="short"))
    g = gate(log.ctx, 0.25)
    label = len(replacement_label(t1, 2, "short").encode())
    assert g.reclaimed_tokens == pytest.approx((8000 - label) * 0.25)
    suffix = sum(t.bytes for t in log.ctx.turns if t.id >= t1) - (8000 - label)
    assert g.suffix_tokens == pytest.approx(suffix * 0.25)


def test_candidate_rules(run_root):
    log = new_agent(run_root, "a1")
    prompt(log, "p")
    t1 = tool_turn(log, "read", "cat src/a.py", "x = 1\n" * 50)
    t2 = tool_turn(log, "search", "grep -rn foo .", "".join(f"src/m{i}.py:1: foo\n" for i in
                                                             range(200)))
    t3 = tool_turn(log, "again", "cat src/a.py", "x = 2\n" * 50)
    t4 = tool_turn(log, "open a hit", "cat src/m7.py", "foo()\n")
    tool_turn(log, "in hand", "ls", "")
    got = {c.block: c.reason for c in candidates(log.ctx)}
    assert got[(t1, 2)] == "read again later"
    assert got[(t2, 2)].startswith("a search whose results were acted on")
    assert (t3, 2) not in got and (t4, 2) not in got
    repl = default_replacement(log.ctx, (t1, 2))
    assert "'x = 1'" in repl and f"turns=[{t1}]" in repl


def test_candidates_on_real_trajectories_find_files_read_twice(run_root):
    """In the dev trajectories the same file is cat-ed more than once: the rule finds it."""
    found = 0
    for path in sorted(TRAJECTORIES.glob("mini-gemini3pro__*.jsonl"))[:4]:
        traj = load(path)
        log = new_agent(run_root, path.stem.replace("_", "-")[:60])
        for s in traj.steps:
            if isinstance(s, UserStep):
                prompt(log, s.text)
            elif isinstance(s, AssistantStep):
                log.append(AssistantMessage(turn=log.next_id(), blocks=list(s.blocks),
                                            stop_reason=s.stop_reason, model=None, usage=None))
            elif isinstance(s, ToolStep):
                pend = set(log.ctx.pending)
                res = [r for r in s.results if r.tool_use_id in pend]
                if res:
                    log.append(ToolResults(results=res))
        cs = candidates(log.ctx, limit=1000)
        for c in cs:
            ref = log.ctx.blocks(c.block[0])[c.block[1]]
            assert ref.kind == "tool_result"
        found += sum(1 for c in cs if c.reason == "read again later")
    assert found > 0


async def test_the_model_marks_and_the_harness_sweeps_before_an_eviction(tmp_path):
    """Through the loop: a mark changes nothing; the sweep lands just before the harness
    eviction that the small window forces."""

    def policy(request, state):
        state["k"] = state.get("k", 0) + 1
        k = state["k"]
        if k <= 2:
            return call(state, "fetch", i=k)
        if k == 3:
            return call(state, "context_mark", block="2.1", replacement="page 1: filler lines")
        if k <= 14:
            return call(state, "fetch", i=k)
        return say("done")

    root = tmp_path / "run"
    st = settings(context_window=8000, sweep_horizon=0.0)  # only an eviction forces the sweep
    async with open_supervisor(root, provider(policy), st, user_tools=[fetch_tool()]) as sup:
        node = await sup.ask("read")
    recs = records(root, node.id)
    kinds = [r["t"] for r in recs]
    assert "Marked" in kinds and "Swept" in kinds
    i = kinds.index("Swept")
    assert kinds[i + 1] == "Evicted", "the sweep lands just before the eviction"
    res = [r for r in recs if r["t"] == "ToolResults"]
    assert '"marked":"2.1"' in res[2]["results"][0]["content"]


def test_the_horizon_is_cut_to_the_requests_before_the_next_eviction():
    from mnemon.session.sweep import Growth, effective_horizon

    g = Growth()
    for used, edited in [(1000, False), (1500, False), (2100, False), (900, True), (1400, False)]:
        g.observe(used, edited)
    assert g.deltas == [500, 600, 500]  # the drop after an edit is not growth
    assert g.per_request == 500
    assert effective_horizon(20, 10_000, 12_000, g.per_request) == 4  # 2 000 tokens left
    assert effective_horizon(20, 1_000, 100_000, g.per_request) == 20
    assert effective_horizon(20, 1_000, None, g.per_request) == 20
    assert effective_horizon(20, 1_000, 12_000, None) == 20
