"""The cost-aware plan (keep "auto"): properties over random tables and economies, by-hand
arithmetic, and the Evicted record's optional figures on disk."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mnemon.session.constants import KEEP_FLOOR_TOKENS
from mnemon.session.context import Context, Turn
from mnemon.session.eviction import AUTO, item_span, plan_eviction
from mnemon.session.keep import Cut, Economy, choose, cost_per_request, eligible
from mnemon.session.records import (
    AssistantMessage,
    Evicted,
    PlanFigures,
    Residue,
    SessionStarted,
    Text,
    ToolResult,
    ToolResults,
    ToolUse,
    UserPrompt,
    decode,
    encode,
)
from tests.strategies import fold_records, sessions

economies = st.builds(
    Economy, tokens_per_byte=st.floats(0.1, 0.5), write_mult=st.sampled_from([1.0, 1.25, 2.0]),
    read_mult=st.sampled_from([0.1, 0.25, 0.5]), output_mult=st.floats(1.0, 8.0),
    growth_tokens=st.floats(0.0, 5000.0), due_tokens=st.floats(100.0, 200_000.0),
    fixed_tokens=st.floats(0.0, 5000.0), floor_tokens=st.floats(0.0, 20_000.0))


def _table(sizes: list[int]) -> Context:
    recs = [SessionStarted(agent="a1")]
    for i, n in enumerate(sizes, 1):
        recs.append(UserPrompt(turn=i, text="x" * n) if i % 2 else
                    AssistantMessage(turn=i, blocks=[Text("y" * n)], stop_reason="end_turn",
                                     model=None, usage=None))
    return fold_records(recs)


@st.composite
def tables(draw) -> Context:
    """Random valid logs (residues, sweeps, rewinds included) or long plain tables."""
    if draw(st.booleans()):
        return fold_records(draw(sessions(max_records=60)))
    return _table(draw(st.lists(st.integers(0, 4000), min_size=0, max_size=40)))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables(), economies)
def test_auto_plan_properties(ctx, e):
    ceiling = plan_eviction(ctx, 0.5)
    plan = plan_eviction(ctx, AUTO, e)
    # the same plans exist: auto only moves the cut, never makes or removes one
    assert (plan is None) == (ceiling is None)
    if plan is None:
        return
    frontier = ctx.frontier()
    firsts = [item_span(it)[0] for it in frontier]
    lasts = [item_span(it)[1] for it in frontier]
    # a valid boundary: one prefix of the frontier, never the newest item, accepted by the fold
    assert plan.span[0] == firsts[0] and plan.span[1] in lasts[:-1]
    ctx.check_span(plan.span)  # raises a Refusal for a span the fold would refuse
    # a nested prefix of the ceiling cut's: auto takes at least what KEEP = 0.5 takes
    assert plan.span[1] >= ceiling.span[1]
    assert plan.bytes_out + plan.bytes_kept == ctx.history_bytes()
    f = plan.figures
    if f is None:  # the ceiling cannot carry the figures' bytes: it is planned bare
        assert plan == ceiling
    else:
        assert f.cost <= f.ceiling_cost and f.keep <= f.ceiling_keep + 1e-9
    # deterministic
    assert plan_eviction(ctx, AUTO, e) == plan
    # an eviction always lowers history bytes, its figures included (decision 0100)
    before = ctx.history_bytes()
    ctx.step(Evicted(residue=Residue(span=plan.span, note=None, by="harness"), plan=f))
    assert ctx.history_bytes() < before


cuts = st.lists(st.tuples(st.integers(0, 20_000), st.integers(0, 20_000)), min_size=1,
                max_size=30)


def _cuts(pairs) -> list[Cut]:
    """Candidates as the plan makes them: each later one keeps no more than the one before."""
    kept = sorted((a for a, _ in pairs), reverse=True)
    verbatim = sorted((min(a, b) for (a, b), _ in zip(pairs, kept)), reverse=True)
    return [Cut(i + 1, k, min(v, k)) for i, (k, v) in enumerate(zip(kept, verbatim))]


@given(cuts, economies)
def test_choice_keeps_the_floor_and_never_costs_more_than_the_ceiling(pairs, e):
    cs = _cuts(pairs)
    allowed, floor = eligible(e, cs)
    assert allowed[0] is cs[0]
    tpb = e.tokens_per_byte
    for cut in allowed:
        n = cs.index(cut)
        meets = cut.verbatim_bytes * tpb >= floor
        oversize_step = n > 0 and (cs[n - 1].verbatim_bytes - cut.verbatim_bytes) * tpb > floor
        assert meets or (oversize_step and cut is allowed[-1])
    best, figures = choose(e, cs, total_bytes=max(1, cs[0].kept_bytes))
    assert best in allowed
    assert cost_per_request(e, best)[0] <= cost_per_request(e, cs[0])[0]
    assert figures.candidates == len(allowed)
    assert choose(e, cs, max(1, cs[0].kept_bytes)) == (best, figures)


def test_by_hand_keeps_the_least_that_holds_the_floor():
    ctx = _table([4000] * 20)  # 80 000 bytes, 20 000 tokens at 0.25
    e = Economy(tokens_per_byte=0.25, write_mult=1.25, read_mult=0.1, output_mult=5.0,
                growth_tokens=500.0, due_tokens=20_000.0, fixed_tokens=0.0, floor_tokens=3000.0)
    plan = plan_eviction(ctx, AUTO, e)
    ceiling = plan_eviction(ctx, 0.5)
    assert ceiling.span == (1, 11)
    # 3 000 tokens of floor = three turns of 1 000 tokens each (plus the newest's own bytes)
    assert plan.span == (1, 17)
    f = plan.figures
    assert f.verbatim_tokens >= 3000 and f.floor_tokens == 3000 and f.cost < f.ceiling_cost
    # by the formula: K tokens kept, n = (due − K) ÷ growth, cost = w·K/n + r·(K + g(n−1)/2),
    # plus for each turn taken beyond the ceiling (12…17) the base chance of a read-back
    k = f.kept_tokens
    n = (20_000 - k) / 500
    assert f.requests == round(n, 1)
    t = ctx.turns[11].bytes * 0.25
    reread = 6 * 0.02 * (0.1 * k + 5.0 * 60 + 1.25 * t + 0.1 * t * n / 2)
    assert abs(f.cost - (1.25 * k / n + 0.1 * (k + 500 * (n - 1) / 2) + reread / n)) < 1


def test_an_oversize_turn_does_not_hold_the_cut():
    # the turn before the newest is five floors large: the cut may take it
    ctx = _table([1000] * 10 + [80_000, 400])
    e = Economy(tokens_per_byte=0.25, write_mult=1.25, read_mult=0.1, output_mult=5.0,
                growth_tokens=500.0, due_tokens=30_000.0, fixed_tokens=0.0, floor_tokens=4000.0)
    plan = plan_eviction(ctx, AUTO, e)
    assert plan.span == (1, 11)


def _default_economy(**kw) -> Economy:
    """A 32k context at 1 token per 4 bytes, the floor left at its default."""
    args = dict(tokens_per_byte=0.25, write_mult=1.25, read_mult=0.1, output_mult=5.0,
                growth_tokens=1000.0, due_tokens=16_000.0, fixed_tokens=150.0)
    return Economy(**{**args, **kw}, floor_tokens=KEEP_FLOOR_TOKENS)


def test_the_default_floor_is_the_most_compaction_restores():
    """The floor is what the peer re-injects at most (up to 5 reads, in total half its
    13 000-token buffer), so a cut keeps at least what compaction can keep (decision 0222)."""
    from mnemon.orchestrator.replay.strategies import COMPACT_BUFFER_TOKENS, REINJECT_FILE_TOKENS

    assert KEEP_FLOOR_TOKENS == COMPACT_BUFFER_TOKENS // 2 > REINJECT_FILE_TOKENS


def test_a_turn_just_above_6144_tokens_is_recent_work_not_a_bulk_result():
    """chain0 at 32k (decision 0222): a read of about 6 250 tokens just before the turn in hand
    counted as one step larger than the floor of 6 144, so the cut took it and left 266 tokens
    in the context. Under the floor of 6 500 such a turn is kept, with what holds the floor."""
    ctx = _table([4000] * 12 + [25_000, 400])  # turn 13: 6 250 tokens; 14 is in hand
    plan = plan_eviction(ctx, AUTO, _default_economy())
    assert plan.span[1] < 13 and plan.figures.verbatim_tokens >= KEEP_FLOOR_TOKENS
    low = plan_eviction(ctx, AUTO, replace(_default_economy(), floor_tokens=6144.0))
    assert low.span == (1, 13) and low.figures.verbatim_tokens < 200
    # a turn larger than the floor itself still goes: the floor protects the work, not a bulk
    big = _table([4000] * 12 + [27_000, 400])  # 6 750 tokens
    assert plan_eviction(big, AUTO, _default_economy()).span == (1, 13)


@given(st.lists(st.integers(0, 30_000), min_size=2, max_size=40))
def test_the_default_floor_holds_on_every_cut_that_is_not_past_a_bulk_turn(sizes):
    """Under the defaults a chosen cut keeps 6 500 tokens of recorded turns, unless the ceiling
    keeps less, or the turn just before the cut alone outweighs the floor."""
    ctx = _table(sizes)
    plan = plan_eviction(ctx, AUTO, _default_economy())
    if plan is None or plan.figures is None:
        return
    f = plan.figures
    assert f.floor_tokens <= KEEP_FLOOR_TOKENS
    if f.floor_tokens < KEEP_FLOOR_TOKENS:  # capped: the ceiling keeps less than the floor
        assert f.keep == f.ceiling_keep
    if f.verbatim_tokens < f.floor_tokens:
        last = ctx.turn(plan.span[1])
        assert last.bytes * 0.25 > f.floor_tokens


def test_a_turn_named_again_later_is_worth_keeping():
    def table(named: bool) -> Context:
        recs = [SessionStarted(agent="a1"), UserPrompt(turn=1, text="task " * 200)]
        tid = 2
        for i in range(8):
            path = f"src/mod{i}.py"
            recs.append(AssistantMessage(
                turn=tid, blocks=[ToolUse(id=f"c{i}", name="bash", input={"command": f"cat {path}"})],
                stop_reason="tool_use", model=None, usage=None))
            recs.append(ToolResults(results=[ToolResult(tool_use_id=f"c{i}", content="z" * 100)]))
            tid += 1
        later = "edit src/mod5.py now" if named else "keep going"
        recs.append(AssistantMessage(turn=tid, blocks=[Text(later)], stop_reason="end_turn",
                                     model=None, usage=None))
        return fold_records(recs)

    e = Economy(tokens_per_byte=0.25, write_mult=1.25, read_mult=0.1, output_mult=5.0,
                growth_tokens=50.0, due_tokens=2000.0, fixed_tokens=3000.0, floor_tokens=0.0)
    plain, named = plan_eviction(table(False), AUTO, e), plan_eviction(table(True), AUTO, e)
    assert named.span[1] < plain.span[1]  # the read of src/mod5.py stays in the context
    assert named.span[1] < 7


def test_evicted_plan_is_optional_on_disk():
    old = b'{"t":"Evicted","residue":{"span":[1,4],"note":null,"by":"harness"}}'
    assert decode(old) == Evicted(residue=Residue(span=(1, 4), note=None, by="harness"))
    rec = Evicted(residue=Residue(span=(1, 4), note=None, by="harness"),
                  plan=PlanFigures(keep=0.18, kept_tokens=8000, verbatim_tokens=7900,
                                   floor_tokens=6144, ceiling_keep=0.5, requests=40.2,
                                   cost=3000.5, ceiling_cost=4100.0, candidates=12))
    line = encode(rec)
    assert line.startswith(old[:-1] + b',"plan":{"keep":0.18,')
    assert decode(line) == rec
    # other tools may write part of it, or more
    partial = b'{"t":"Evicted","residue":{"span":[1,4],"note":null,"by":"harness"},' \
              b'"plan":{"keep":0.3,"why":"theirs"}}'
    assert decode(partial).plan == PlanFigures(keep=0.3)
    ctx = fold_records([SessionStarted(agent="a1"), *[
        UserPrompt(turn=i, text="x" * 50) if i % 2 else
        AssistantMessage(turn=i, blocks=[Text("y")], stop_reason="end_turn", model=None, usage=None)
        for i in range(1, 7)], decode(partial)])
    assert [r.span for r in ctx.residues] == [(1, 4)]
    assert isinstance(ctx.frontier()[1], Turn)


def test_settings_take_auto_or_a_share():
    import pytest

    from mnemon.orchestrator.settings import Settings

    assert Settings().keep == "auto" and Settings().keep_floor_tokens == KEEP_FLOOR_TOKENS == 6500
    assert Settings(keep=0.3).keep == 0.3
    for bad in ("most", 0.0, 1.0, 2, True):
        with pytest.raises(ValueError, match="keep"):
            Settings(keep=bad)
    with pytest.raises(ValueError, match="keep_floor_tokens"):
        Settings(keep_floor_tokens=-1)


def test_candidate_reasons_do_not_depend_on_the_hash_seed():
    """The pressure reminder lists candidates with their reason; a reason picked from a set
    would change the bytes sent from one process to the next (a prompt-cache bug)."""
    from mnemon.session.sweep import candidates

    paths = [f"src/p{i}.py" for i in range(12)]
    listing = "\n".join(paths) + "\n" + "x" * 3000
    recs = [SessionStarted(agent="a1"), UserPrompt(turn=1, text="go"),
            AssistantMessage(turn=2, blocks=[ToolUse(id="s", name="bash",
                                                     input={"command": "grep -rl foo src"})],
                             stop_reason="tool_use", model=None, usage=None),
            ToolResults(results=[ToolResult(tool_use_id="s", content=listing)])]
    tid = 3
    for i, p in enumerate(reversed(paths)):
        recs.append(AssistantMessage(turn=tid, blocks=[ToolUse(id=f"r{i}", name="bash",
                                                              input={"command": f"cat {p}"})],
                                     stop_reason="tool_use", model=None, usage=None))
        recs.append(ToolResults(results=[ToolResult(tool_use_id=f"r{i}", content="ok")]))
        tid += 1
    recs.append(AssistantMessage(turn=tid, blocks=[Text("done")], stop_reason="end_turn",
                                 model=None, usage=None))
    found = [c for c in candidates(fold_records(recs)) if c.block[0] == 2]
    assert found and found[0].reason.endswith(f"(later read {sorted(paths)[0]})")
