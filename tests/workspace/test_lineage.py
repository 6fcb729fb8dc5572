"""A workspace forks, merges and rewinds with its agent (docs/workspace.md): real supervisor,
real logs, the real store."""

from __future__ import annotations

import pytest
import trio

from mnemon.orchestrator.settings import Settings
from mnemon.orchestrator.supervisor import open_supervisor
from mnemon.orchestrator.workspace.spec import WorkspaceSpec
from mnemon.providers.cache import CacheModel
from mnemon.providers.scripted import ScriptedProvider
from mnemon.session.records import Text, ToolUse

from .helpers import by_task as by_agent
from .helpers import records, results, snapshots

pytestmark = pytest.mark.trio


async def test_a_child_sees_the_files_as_of_the_fork_and_only_reads_from_the_store(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("before\n")
    root = tmp_path / "run"
    scripts = {
        "a1": [[("fs_write", {"path": "a.txt", "content": "at fork\n"})],
               [("agents_start", {"task": "reader: read a.txt", "kind": "mnemon"})],
               [("fs_write", {"path": "a.txt", "content": "after fork\n"})],
               [("agents_wait", {})]],
        "reader": [[("fs_read", {"path": "a.txt"}), ("fs_list", {})]],
    }
    async with open_supervisor(root, ScriptedProvider(policy=by_agent(scripts),
                                                      cache_model=CacheModel()),
                               Settings(model="scripted",
                                        workspace=WorkspaceSpec(dir=str(work)))) as sup:
        node = await sup.ask("go")
    assert node.state == "ended"
    child = next(iter(node.children))
    got = results(root, child)
    assert "at fork" in got[0]["content"] or "after fork" in got[0]["content"]
    # the fork happened before the third turn's write: the child saw "at fork"
    assert "     1\tat fork" in got[0]["content"], got[0]
    # it never wrote: no directory was made for it
    assert not (root / "workspace" / "trees" / child).exists()
    st = snapshots(root, child)
    assert st[0]["why"] == "start" and st[0]["source"] == "inherit:a1"
    assert (work / "a.txt").read_text() == "after fork\n"


async def test_a_writing_child_gets_its_own_directory_and_the_parent_applies_it(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("line one\n\nkeep\n\nline two\n")  # apart: no overlap
    root = tmp_path / "run"
    scripts = {
        "a1": [[("agents_start", {"task": "writer: change line two", "kind": "mnemon"})],
               [("agents_wait", {})],
               [("fs_edit", {"path": "a.txt", "old": "line one", "new": "LINE ONE"})],
               lambda request: [("workspace_apply", {"agents": [sorted(sup.agents)[1]]})]],
        "writer": [[("fs_edit", {"path": "a.txt", "old": "line two", "new": "LINE TWO"}),
                    ("fs_write", {"path": "new.txt", "content": "from the child\n"})]],
    }
    async with open_supervisor(root, ScriptedProvider(policy=by_agent(scripts),
                                                      cache_model=CacheModel()),
                               Settings(model="scripted",
                                        workspace=WorkspaceSpec(dir=str(work)))) as sup:
        node = await sup.ask("go")
    child = sorted(sup.agents)[1]
    assert (root / "workspace" / "trees" / child / "a.txt").read_text() == \
        "line one\n\nkeep\n\nLINE TWO\n"
    # the parent's edit and the child's change, merged
    assert (work / "a.txt").read_text() == "LINE ONE\n\nkeep\n\nLINE TWO\n"
    assert (work / "new.txt").read_text() == "from the child\n"
    r = results(root)
    assert r[-1]["content"].startswith(f"applied {child}: 2 file(s) changed")
    assert snapshots(root)[-1].get("why") == "merge"


async def test_a_conflicting_change_is_refused_and_the_parent_untouched(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("x\n")
    root = tmp_path / "run"
    scripts = {
        "a1": [[("agents_start", {"task": "writer: set y", "kind": "fresh"})],
               [("agents_wait", {})],
               [("fs_write", {"path": "a.txt", "content": "z\n"})],
               lambda request: [("workspace_apply", {"agents": [sorted(sup.agents)[1]]})]],
        "writer": [[("fs_write", {"path": "a.txt", "content": "y\n"})]],
    }
    async with open_supervisor(root, ScriptedProvider(policy=by_agent(scripts),
                                                      cache_model=CacheModel()),
                               Settings(model="scripted",
                                        workspace=WorkspaceSpec(dir=str(work)))) as sup:
        await sup.ask("go")
    r = results(root)[-1]
    assert r["is_error"] and "conflicts with the workspace in a.txt" in r["content"]
    assert (work / "a.txt").read_text() == "z\n"
    assert not any(s.get("why") == "merge" for s in snapshots(root))


async def test_a_synod_applies_the_winners_change(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "f.txt").write_text("0\n")
    root = tmp_path / "run"
    calls = {"n": 0}

    def member():
        calls["n"] += 1
        k = calls["n"]
        return [("fs_write", {"path": "f.txt", "content": f"{k}\n"}),
                ("fs_write", {"path": f"m{k}.txt", "content": "mine\n"})]

    answers = iter(["alpha", "beta", "beta"])

    def policy(request, state):
        agent = request.meta["agent"]
        i = state["i"] = state.get("i", 0) + 1
        if agent == "a1":
            return [Text("root")], "end_turn"
        if i == 1:
            return [ToolUse(f"{agent}_w{j}", n, a) for j, (n, a) in enumerate(member())], \
                "tool_use"
        state["answer"] = state.get("answer") or next(answers)
        return [Text(state["answer"])], "end_turn"

    async with open_supervisor(root, ScriptedProvider(policy=policy, cache_model=CacheModel()),
                               Settings(model="scripted",
                                        workspace=WorkspaceSpec(dir=str(work)))) as sup:
        node = await sup.ask("go")
        result = await sup.synod(node, "which?", n=3, apply="winner")
    assert result.answer == "beta"
    winner = result.applied["agent"]
    wrote = (root / "workspace" / "trees" / winner / "f.txt").read_text()
    assert (work / "f.txt").read_text() == wrote
    k = wrote.strip()
    assert (work / f"m{k}.txt").exists()
    assert sum(1 for p in work.glob("m*.txt")) == 1  # only the winner's
    assert snapshots(root)[-1]["why"] == "merge" and snapshots(root)[-1]["source"] == winner


async def test_rewind_restores_the_files_after_that_turn(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    root = tmp_path / "run"
    script = [[("fs_write", {"path": "a.txt", "content": "v1\n"})],
              [("fs_write", {"path": "a.txt", "content": "v2\n"}),
               ("fs_write", {"path": "b.txt", "content": "b\n"})],
              [("fs_read", {"path": "a.txt"})]]
    from .helpers import provider

    async with open_supervisor(root, provider(script),
                               Settings(model="scripted",
                                        workspace=WorkspaceSpec(dir=str(work)))) as sup:
        node = await sup.ask("go")
        turns = [t for t, _ in []]
        assert (work / "a.txt").read_text() == "v2\n"
        sup.rewind(node.id, 2)  # after the first response's tools
        assert (work / "a.txt").read_text() == "v1\n"
        assert not (work / "b.txt").exists()
        sup.rewind(node.id, 1)  # before any tool: the files the agent started with
        assert not (work / "a.txt").exists()
    kinds = [(s.get("why"), s.get("turn")) for s in snapshots(root)]
    assert kinds[-2:] == [("rewind", 2), ("rewind", 1)]
    assert any(r["t"] == "Rewound" for r in records(root))
    del turns
