"""Cancellation, crashes in children, and resume."""

from __future__ import annotations

import json
import shutil

import trio
import trio.testing

from mnemon.lineage.runroot import agent_source
from mnemon.orchestrator.supervisor import Supervisor, open_supervisor
from mnemon.providers import latency
from mnemon.providers.errors import ServerError
from mnemon.session.records import ToolUse

from .conftest import call, fetch_tool, provider, records, refold, say, settings


def tree_policy(fanout_depth: int = 2):
    """Every agent starts one mnemon child until depth ``fanout_depth``, then each keeps
    fetching pages forever (so only cancellation ends them)."""

    def policy(request, state):
        depth = request.meta["depth"]
        state["k"] = state.get("k", 0) + 1
        if depth < fanout_depth and state["k"] == 1:
            return call(state, "agents_start", task=f"child of depth {depth + 1}")
        return call(state, "fetch", i=state["k"])

    return policy


class CountingProvider:
    """Wraps a provider and records when each call started."""

    name = "scripted"

    def __init__(self, inner):
        self.inner = inner
        self.calls: list[float] = []

    async def complete(self, request, *, on_attempt=None):
        self.calls.append(trio.current_time())
        return await self.inner.complete(request, on_attempt=on_attempt)

    async def aclose(self):
        pass


async def test_cancelling_a_parent_ends_every_descendant(tmp_path, autojump_clock):
    root = tmp_path / "run"
    prov = CountingProvider(provider(tree_policy(2), latency_s=0.1))
    async with open_supervisor(root, prov, settings(), user_tools=[fetch_tool()]) as sup:
        await latency.wait(0.001)  # the scripted provider's timer: one task for the whole run
        baseline = trio.lowlevel.current_statistics().tasks_living
        node = sup.new_root("root")
        sup.start(node)
        await trio.sleep(5.05)  # mid-turn: every agent is waiting on its provider
        assert len(sup.agents) == 3
        assert all(a.state == "running" for a in sup.agents.values())
        cancelled_at = trio.current_time()
        sup.cancel(node.id)
        with trio.fail_after(1):
            for a in sup.agents.values():
                await a.done.wait()
        done_at = trio.current_time()
        await trio.testing.wait_all_tasks_blocked()
        assert trio.lowlevel.current_statistics().tasks_living == baseline, "no orphaned task"
    assert done_at - cancelled_at < 0.01
    assert all(t <= cancelled_at for t in prov.calls), "no provider call after the cancel"
    for aid, a in sup.agents.items():
        assert a.state == "cancelled"
        recs = records(root, aid)
        assert recs[-1]["t"] == "SessionEnded" and recs[-1]["reason"] == "cancelled"
        assert refold(root, aid) == a.ctx


async def test_parent_loop_end_cancels_children_it_did_not_wait_for(tmp_path, autojump_clock):
    def policy(request, state):
        state["k"] = state.get("k", 0) + 1
        if request.meta["depth"] == 0:
            if state["k"] == 1:
                return call(state, "agents_start", task="work forever", kind="fresh")
            return say("leaving without waiting")
        return call(state, "fetch", i=1)

    root = tmp_path / "run"
    async with open_supervisor(root, provider(policy, latency_s=0.1), settings(),
                               user_tools=[fetch_tool()]) as sup:
        node = await sup.ask("go")
    child = [a for a in sup.agents.values() if a is not node][0]
    assert node.reason == "done"
    assert child.state == "cancelled" and child.kind == "fresh"
    assert records(root, child.id)[-1]["reason"] == "cancelled"


async def test_a_failing_child_reaches_the_parent_as_a_result(tmp_path, autojump_clock):
    class Flaky:
        """The root's calls succeed; every call for a child fails with a 500."""

        name = "scripted"

        def __init__(self):
            self.inner = provider(self.policy)

        @staticmethod
        def policy(request, state):
            state["k"] = state.get("k", 0) + 1
            if state["k"] == 1:
                return call(state, "agents_start", task="doomed")
            if state["k"] == 2:
                child = json.loads(request.messages[-1]["content"][0]["content"])["agent"]
                return call(state, "agents_wait", agents=[child])
            return say("parent went on: " + request.messages[-1]["content"][0]["content"])

        async def complete(self, request, *, on_attempt=None):
            if request.meta["depth"] > 0:
                from mnemon.providers.retry import RetryPolicy, call_with_retry

                async def attempt():
                    raise ServerError(500, {"error": {"message": "down"}}, {})

                return await call_with_retry(attempt, policy=RetryPolicy(max_attempts=3),
                                             on_attempt=on_attempt)
            return await self.inner.complete(request, on_attempt=on_attempt)

        async def aclose(self):
            pass

    root = tmp_path / "run"
    async with open_supervisor(root, Flaky(), settings()) as sup:
        node = await sup.ask("go")
    assert node.reason == "done"
    assert '"state":"failed"' in node.answer
    child = [a for a in sup.agents.values() if a is not node][0]
    recs = records(root, child.id)
    calls = [r for r in recs if r["t"] == "ProviderCall"]
    assert [c["attempt"] for c in calls] == [1, 2, 3] and all(c["error"] for c in calls)
    assert recs[-1]["reason"].startswith("failed: provider")


async def test_a_user_tool_crash_in_a_child_does_not_fail_it(tmp_path):
    from mnemon.orchestrator.usertools import UserTool

    def boom() -> str:
        """Fails."""
        raise OSError("disk on fire")

    def policy(request, state):
        state["k"] = state.get("k", 0) + 1
        if request.meta["depth"] == 0:
            if state["k"] == 1:
                return call(state, "agents_start", task="use the tool")
            if state["k"] == 2:
                return call(state, "agents_wait")
            return say(request.messages[-1]["content"][0]["content"])
        if state["k"] == 1:
            return call(state, "boom")
        return say("child saw: " + request.messages[-1]["content"][0]["content"])

    root = tmp_path / "run"
    async with open_supervisor(root, provider(policy), settings(),
                               user_tools=[UserTool(boom)]) as sup:
        node = await sup.ask("go")
    out = json.loads(node.answer)
    assert out[0]["state"] == "ended"
    assert "OSError: disk on fire" in out[0]["answer"]


async def test_resume_after_a_crash_equals_the_replay(tmp_path):
    """Kill a run part-way (a snapshot of its log mid-run plus a torn line), restart it, and
    every agent's table equals the replay of its file."""
    from .conftest import reader_policy

    root = tmp_path / "run"
    snap = tmp_path / "snap"

    def snapshotting(request, state):
        i = state.get("i", 0)
        if i == 5 and not snap.exists():
            shutil.copytree(root, snap)
        return reader_policy(9)(request, state)

    async with open_supervisor(root, provider(snapshotting), settings(context_window=6000),
                               user_tools=[fetch_tool()]) as sup:
        await sup.ask("read nine pages", agent_id="a1")
    # the crash: the snapshot has no SessionEnded, and a half-written line at its end
    path = snap / agent_source("a1")
    with open(path, "ab") as f:
        f.write(b'{"t":"AssistantMessage","turn":99,"blo')
    sup2 = Supervisor(snap, provider(reader_policy(9)), settings(context_window=6000),
                      user_tools=[fetch_tool()])
    node = sup2.resume_agent("a1")
    assert list(snap.glob("agents/a1/record.jsonl.torn-*")), "the torn tail is moved aside"
    assert refold(snap, "a1") == node.ctx
    await sup2.run(node)
    assert node.reason == "done"
    assert refold(snap, "a1") == node.ctx
    recs = records(snap, "a1")
    assert any(r["t"] == "SessionResumed" for r in recs)
    fetched = [r["blocks"][0]["input"]["i"] for r in recs if r["t"] == "AssistantMessage"
               and r["blocks"][0]["type"] == "tool_use"]
    assert fetched[-1] == 9
    sup2.close()


async def test_clear_withdraws_everything_and_cancels_descendants(tmp_path, autojump_clock):
    root = tmp_path / "run"
    async with open_supervisor(root, provider(tree_policy(2), latency_s=0.1), settings(),
                               user_tools=[fetch_tool()]) as sup:
        node = sup.new_root("root")
        sup.start(node)
        await trio.sleep(3.05)
        children = list(node.descendants().values())
        assert children and all(c.state == "running" for c in children)
        sup.clear(node.id)
        assert node.ctx.frontier() == [], "a clear withdraws every turn from the context"
        with trio.fail_after(1):
            for c in children:
                await c.done.wait()
        assert all(c.state == "cancelled" for c in children)
        assert node.state == "running", "the cleared agent itself goes on"
        await trio.sleep(1)
        assert node.ctx.frontier(), "it keeps working in a fresh context"
        sup.cancel(node.id)
    recs = records(root, node.id)
    assert any(r["t"] == "Cleared" for r in recs)
    assert refold(root, node.id) == node.ctx


async def test_rewind_withdraws_later_turns_and_refuses_a_split(tmp_path):
    from mnemon.session.errors import Refusal
    from mnemon.session.records import Evicted, Residue

    from .conftest import reader_policy

    root = tmp_path / "run"
    async with open_supervisor(root, provider(reader_policy(4)), settings(),
                               user_tools=[fetch_tool()]) as sup:
        node = await sup.ask("read")
        node.log.append(Evicted(residue=Residue(span=(1, 3), note="first pages", by="model")))
        try:
            sup.rewind(node.id, 2)
        except Refusal as e:
            assert "would split the residue [1, 3]" in str(e)
        else:
            raise AssertionError("a rewind into a residue is refused")
        sup.rewind(node.id, 4)
    held = {t.id: t.held for t in node.ctx.turns}
    assert all(h == "withdrawn" for tid, h in held.items() if tid > 4)
    assert held[4] == "resident" and held[1] == "evicted"
    assert refold(root, node.id) == node.ctx


async def test_resume_a_whole_tree_killed_mid_run(tmp_path):
    """A root waiting on two mnemon children is killed while they work (a snapshot of the run
    root); resumed, the children go on inside their parent, the interrupted wait is answered as
    interrupted and made again, and every table equals the replay of its file."""
    root = tmp_path / "run"
    snap = tmp_path / "snap"

    def policy(request, state):
        state["k"] = state.get("k", 0) + 1
        k = state["k"]
        if request.meta["depth"] == 0:  # decides from what it sees, as a model would
            said = [b for m in request.messages if m["role"] == "assistant" for b in m["content"]]
            if not any(b.get("name") == "agents_start" for b in said):
                return ([ToolUse("s1", "agents_start", {"task": "read pages"}),
                         ToolUse("s2", "agents_start", {"task": "read pages"})], "tool_use")
            last = [b for b in request.messages[-1]["content"] if b.get("type") == "tool_result"]
            if any(r["is_error"] for r in last) or said[-1].get("name") == "agents_start":
                return call(state, "agents_wait")
            return say("children: " + last[0]["content"])
        if request.meta["agent"] == "a2" and k == 3 and not snap.exists():
            shutil.copytree(root, snap)  # the crash: whatever was on disk at this moment
        if k <= 5:
            return call(state, "fetch", i=k)
        return say(f"{request.meta['agent']} read 5 pages")

    async with open_supervisor(root, provider(policy), settings(),
                               user_tools=[fetch_tool()]) as sup:
        await sup.ask("delegate", agent_id="a1")
    assert snap.exists()
    sup2 = Supervisor(snap, provider(policy), settings(), user_tools=[fetch_tool()])
    roots = sup2.resume_run()
    assert [r.id for r in roots] == ["a1"]
    assert set(sup2.agents) == {"a1", "a2", "a3"}
    for aid, node in sup2.agents.items():
        assert refold(snap, aid) == node.ctx
    await sup2.run(roots[0])
    for aid, node in sup2.agents.items():
        assert node.reason == "done", (aid, node.reason)
        assert refold(snap, aid) == node.ctx
    assert set(sup2.agents) == {"a1", "a2", "a3"}, "no child started twice"
    answer = sup2.agents["a1"].answer
    assert "a2 read 5 pages" in answer and "a3 read 5 pages" in answer
    recs = records(snap, "a1")
    waits = [r for r in recs if r["t"] == "AssistantMessage" and
             r["blocks"][0].get("name") == "agents_wait"]
    assert len(waits) == 2, "the interrupted wait is made again after the resume"
    sup2.close()


async def test_a_retried_request_records_one_turn_and_every_attempt(tmp_path, autojump_clock):
    from mnemon.providers.errors import Overloaded
    from mnemon.providers.retry import RetryPolicy, call_with_retry

    class FlakyTwice:
        name = "scripted"

        def __init__(self):
            self.inner = provider(lambda request, state: say("finally"))
            self.failures = 0

        async def complete(self, request, *, on_attempt=None):
            async def attempt():
                if self.failures < 2:
                    self.failures += 1
                    raise Overloaded(529, {"error": {"type": "overloaded_error"}}, {})
                return await self.inner.complete(request)

            return await call_with_retry(attempt, policy=RetryPolicy(), on_attempt=on_attempt)

        async def aclose(self):
            pass

    root = tmp_path / "run"
    async with open_supervisor(root, FlakyTwice(), settings()) as sup:
        node = await sup.ask("go")
    recs = records(root, node.id)
    calls = [r for r in recs if r["t"] == "ProviderCall"]
    assert [c["attempt"] for c in calls] == [1, 2, 3]
    assert [bool(c.get("error")) for c in calls] == [True, True, False]
    assert calls[2]["usage"] is not None
    assert sum(r["t"] == "AssistantMessage" for r in recs) == 1 and node.answer == "finally"


async def test_a_length_refusal_ends_the_agent_with_failed_context(tmp_path):
    from mnemon.providers.errors import ContextTooLong

    class TooLong:
        name = "scripted"

        async def complete(self, request, *, on_attempt=None):
            raise ContextTooLong(400, {"error": {"message": "prompt is too long"}}, {})

        async def aclose(self):
            pass

    root = tmp_path / "run"
    async with open_supervisor(root, TooLong(), settings()) as sup:
        node = await sup.ask("go")
    assert node.reason == "failed: context" and node.state == "failed"
    assert records(root, node.id)[-1] == {**records(root, node.id)[-1], "reason": "failed: context"}


async def test_depth_and_agent_limits_refuse_agents_start(tmp_path):
    def policy(request, state):
        state["k"] = state.get("k", 0) + 1
        if state["k"] == 1:
            return call(state, "agents_start", task="go deeper")
        if state["k"] == 2:
            return call(state, "agents_wait")
        return say(request.messages[-1]["content"][0]["content"])

    root = tmp_path / "run"
    async with open_supervisor(root, provider(policy), settings(max_depth=2)) as sup:
        await sup.ask("start a chain")
    depths = sorted(a.depth for a in sup.agents.values())
    assert depths == [0, 1, 2]
    deepest = max(sup.agents.values(), key=lambda a: a.depth)
    res = [r for r in records(root, deepest.id) if r["t"] == "ToolResults"][0]["results"][0]
    assert res["is_error"] and "depth 3" in res["content"] and "allows depth 2" in res["content"]

    root2 = tmp_path / "run2"
    async with open_supervisor(root2, provider(policy), settings(max_agents=2)) as sup2:
        await sup2.ask("start a chain")
    assert len(sup2.agents) == 2
    second = [a for a in sup2.agents.values() if a.depth == 1][0]
    res = [r for r in records(root2, second.id) if r["t"] == "ToolResults"][0]["results"][0]
    assert res["is_error"] and "2 agents running" in res["content"]
    assert "(max_agents 2)" in res["content"]


async def test_the_progress_line_counts_agents_turns_tokens_and_cost(tmp_path, autojump_clock):
    import io

    from mnemon.orchestrator.progress import Progress

    root = tmp_path / "run"
    stream = io.StringIO()
    async with open_supervisor(root, provider(tree_policy(1), latency_s=0.1), settings(),
                               user_tools=[fetch_tool()]) as sup:
        node = sup.new_root("root")
        sup.start(node)
        progress = Progress(sup, enabled=True, interval_s=0.25, stream=stream)
        sup.nursery.start_soon(progress.run)
        await trio.sleep(1.05)
        line = progress.line()
        assert line.startswith("agents 2 running / 0 done · turns ")
        assert "tokens" in line and "$" in line
        sup.cancel(node.id)
        sup.nursery.cancel_scope.cancel()
    assert "\r\x1b[K" in stream.getvalue()
    disabled = io.StringIO()
    await Progress(sup, enabled=False, stream=disabled).run()
    assert disabled.getvalue() == ""


async def test_resume_run_leaves_ended_agents_alone_and_finds_reopened_ones(tmp_path):
    """An agent whose log ends with SessionEnded is not run again (no provider call); one
    reopened after its end (SessionResumed, a new prompt) is."""
    from mnemon.orchestrator.supervisor import _has_ended
    from mnemon.session.records import SessionResumed

    root = tmp_path / "run"
    async with open_supervisor(root, provider(lambda r, s: say("ok")), settings()) as sup:
        await sup.ask("one", agent_id="a1")
        await sup.ask("two", agent_id="a2")
        sup.agents["a2"].log.append(SessionResumed())
        sup.agents["a2"].log.prompt("three")
    assert _has_ended(root / "agents" / "a1" / "record.jsonl")
    assert not _has_ended(root / "agents" / "a2" / "record.jsonl")
    sup2 = Supervisor(root, provider(lambda r, s: say("again")), settings())
    assert [n.id for n in sup2.resume_run()] == ["a2"]
    sup2.close()


def test_a_new_root_owns_the_log_file_made_ahead_for_it(tmp_path):
    """``new_root(unborn=fd)`` names the file at the birth; it closes it when the agent is
    refused, or when the birth waits for the agent's own MCP servers."""
    import os

    import pytest

    from mnemon.orchestrator.mcp.config import McpServerSpec
    from mnemon.session import log as L
    from mnemon.session.errors import Refusal

    if not L._TMPFILE:
        pytest.skip("no unnamed files on this system")
    root = tmp_path / "run"
    sup = Supervisor(root, provider(lambda r, s: say("ok")), settings(max_agents=2))
    fds = len(os.listdir("/proc/self/fd"))
    node = sup.new_root("go", agent_id="t1", unborn=L.unborn(root / "agents/t1/record.jsonl"))
    assert [r["t"] for r in records(root, "t1")] == ["SessionStarted", "UserPrompt"]
    spec = McpServerSpec(name="m", transport="stdio", command="true")
    later = sup.new_root("wait", agent_id="t2", mcp_servers=(spec,),
                         unborn=L.unborn(root / "agents/t2/record.jsonl"))
    assert later.log is None and not (root / "agents/t2/record.jsonl").exists()
    with pytest.raises(Refusal):
        sup.new_root("no room", agent_id="t3", unborn=L.unborn(root / "agents/t3/record.jsonl"))
    node.log.close()
    assert len(os.listdir("/proc/self/fd")) == fds, "every file made ahead is named or closed"
    sup.close()


def test_an_agent_set_aside_on_resume_keeps_its_id(tmp_path):
    """A resume moves aside an agent whose creation was cut before its task prompt; an id
    minted afterwards is a new one, never the set-aside agent's (found by crash injection)."""
    root = tmp_path / "run"
    sup = Supervisor(root, provider(lambda r, s: say("ok")), settings())
    first, second = sup.new_root("one"), sup.new_root("two")
    for n in (first, second):
        n.log.close()
    path = root / agent_source(second.id)
    path.write_bytes(path.read_bytes().split(b"\n")[0] + b"\n")  # cut before its task prompt
    sup.close()
    again = Supervisor(root, provider(lambda r, s: say("ok")), settings())
    again.resume_run()
    assert not path.exists() and list((root / "incomplete").iterdir())
    assert again.mint_agent_id() not in (first.id, second.id)
    again.close()
