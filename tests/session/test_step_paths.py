"""``step``'s written-out paths judge and apply exactly as ``check`` then ``apply`` do.

Random logs, valid and mangled (records dropped, repeated, moved, ids and tool ids changed), are
folded twice: through ``step`` with a locus (the path a resume takes) and through ``check`` then
``apply``. After every record both tables are equal, and a refused record is refused by both with
the same message and leaves both tables unchanged.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mnemon.session.context import Context
from mnemon.session.errors import Refusal
from mnemon.session.records import (
    AssistantMessage,
    Record,
    SessionStarted,
    Steering,
    ToolResult,
    ToolResults,
    UserPrompt,
    encode,
)
from tests.strategies import sessions

SETTINGS = settings(max_examples=int(os.environ.get("MNEMON_HYPOTHESIS_EXAMPLES", 120)),
                    deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def mangled(draw) -> list[Record]:
    recs = list(draw(sessions()))
    for _ in range(draw(st.integers(0, 4))):
        op = draw(st.sampled_from(["drop", "repeat", "move", "retag", "stray", "steer", "open"]))
        i = draw(st.integers(0, len(recs) - 1))
        r = recs[i]
        if op == "drop" and len(recs) > 1:
            del recs[i]
        elif op == "repeat":
            recs.insert(draw(st.integers(0, len(recs))), r)
        elif op == "move":
            recs.insert(draw(st.integers(0, len(recs))), recs.pop(i))
        elif op == "retag" and isinstance(r, (UserPrompt, AssistantMessage)):
            recs[i] = type(r)(**{**{f: getattr(r, f) for f in r.__struct_fields__},
                                 "turn": max(0, r.turn + draw(st.integers(-3, 3)))})
        elif op == "stray":
            ids = draw(st.lists(st.sampled_from(["tu_0", "tu_1", "tu_2", "nope"]), min_size=1,
                                max_size=3))
            recs.insert(i, ToolResults(results=[ToolResult(tool_use_id=x, content="c")
                                                for x in ids]))
        elif op == "steer":
            recs.insert(i, Steering(text="nudge"))
        elif op == "open":
            recs.insert(i, SessionStarted(agent="a1"))
    return recs


def _fold_both(records: list[Record]) -> None:
    fused, split = Context("agents/a1/record.jsonl"), Context("agents/a1/record.jsonl")
    off = 0
    for r in records:
        n = len(encode(r))
        locus = (off, n, format(off, "016x"))
        off += n + 1
        errs = []
        for ctx, run in ((fused, lambda c: c.step(r, locus)),
                         (split, lambda c: (c.check(r), c.apply(r, locus)))):
            try:
                run(ctx)
                errs.append(None)
            except Refusal as e:
                errs.append(str(e))
        assert errs[0] == errs[1], r
        assert fused == split, r
        assert fused.records_folded == split.records_folded
        assert fused.protocol_seen == split.protocol_seen
        assert fused.history_bytes() == split.history_bytes()
        if errs[0] is not None:
            return


@SETTINGS
@given(records=mangled())
def test_step_equals_check_then_apply(records):
    _fold_both(records)


def test_each_written_out_refusal():
    start = SessionStarted(agent="a1")
    cases = [
        [UserPrompt(turn=1, text="x")],  # before SessionStarted
        [start, ToolResults(results=[ToolResult(tool_use_id="a", content="")])],  # no turn
        [start, Steering(text="s")],  # no turn in hand
        [start, UserPrompt(turn=2, text="x"), UserPrompt(turn=2, text="y")],  # ids increase
        [start, UserPrompt(turn=2, text="x"),
         ToolResults(results=[ToolResult(tool_use_id="a", content="")])],  # no pending call
    ]
    for recs in cases:
        _fold_both(recs)
