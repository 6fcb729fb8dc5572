"""Forks of random parents: the child's log folds back to the live child (the fold law through an
``Inherited`` link), the link is well formed, and the child's context begins byte-for-byte with
its parent's — whatever evictions, clears, rewinds, marks and sweeps the parent made."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from mnemon.lineage.fork import fork
from mnemon.lineage.runroot import agent_source, create_run_root, make_loader
from mnemon.session.agentlog import AgentLog
from mnemon.session.records import AssistantMessage, Inherited, SessionStarted, ToolUse, decode
from mnemon.session.render import render

from ..strategies import sessions
from .util import assert_prefix, parent_prefix, refold


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(records=sessions(max_records=30, agent="p"))
def test_random_parents_fork_cleanly(tmp_path_factory, records):
    root = create_run_root(tmp_path_factory.mktemp("run") / "r", "tests")
    src = agent_source("p")
    started = records[0]
    assert isinstance(started, SessionStarted)
    parent = AgentLog.create(root / src, src, started, loader=make_loader(root))
    for rec in records[1:]:
        parent.append(rec)
    tid = parent.next_id()  # the fork happens in a fresh turn that calls agents_start
    parent.append(AssistantMessage(turn=tid, blocks=[ToolUse("fork", "agents_start",
                                                             {"task": "go"})],
                                   stop_reason="tool_use", model=None, usage=None))
    child = fork(root, parent, "c1", task="the child's task")
    line = (root / agent_source("c1")).read_bytes().splitlines()[1]
    link = decode(line)
    assert isinstance(link, Inherited) and link.id_floor == tid + 1
    ids = [x.row.id for x in link.turns]
    assert ids == sorted(set(ids)) and all(i < tid for i in ids)
    assert refold(root, "c1") == child.ctx
    assert refold(root, "p") == parent.ctx
    assert child.ctx.turns[-1].id >= tid + 1
    shared = parent_prefix(parent.ctx)
    opening_only = all(b"The context opens at turn" in block for _, block in shared)
    if shared and not opening_only:  # else nothing below the turn in hand renders at all
        assert_prefix(parent.ctx, child.ctx, "the child's task")
    msgs = render(child.ctx)
    assert msgs[0]["role"] == "user" and msgs[-1]["role"] == "user"
