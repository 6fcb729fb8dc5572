"""The agent loop end to end on the scripted provider."""

from __future__ import annotations


from mnemon.orchestrator.supervisor import open_supervisor
from mnemon.session.eviction import due_line

from .conftest import fetch_tool, provider, reader_policy, records, refold, settings, say, call


async def test_reader_evicts_when_due_and_never_the_turn_in_hand(tmp_path):
    root = tmp_path / "run"
    st = settings(context_window=6000)
    async with open_supervisor(root, provider(reader_policy(12)), st,
                               user_tools=[fetch_tool()]) as sup:
        node = await sup.ask("read twelve pages")
    assert node.reason == "done"
    recs = records(root, node.id)
    evicted = [(n, r) for n, r in enumerate(recs) if r["t"] == "Evicted"]
    assert evicted, "a 6000-token window must force harness evictions"
    for n, r in evicted:
        assert r["residue"]["by"] == "harness" and r["residue"]["note"] is None
        in_hand = max(x["turn"] for x in recs[:n] if "turn" in x and x["t"] in
                      ("UserPrompt", "AssistantMessage"))
        assert r["residue"]["span"][1] < in_hand
    # the log folds to the live table (the fold law, end to end)
    assert refold(root, node.id) == node.ctx
    # every request stayed under the window: evictions happened before it filled
    for r in recs:
        if r["t"] == "AssistantMessage" and r["usage"]:
            u = r["usage"]
            total = u["input_tokens"] + u["cache_read_tokens"] + u["cache_write_tokens"]
            assert total < 6000
    assert recs[-1]["t"] == "SessionEnded" and recs[-1]["reason"] == "done"


async def test_pressure_reminder_fires_once_per_excursion(tmp_path):
    root = tmp_path / "run"
    st = settings(context_window=6000)
    async with open_supervisor(root, provider(reader_policy(12)), st,
                               user_tools=[fetch_tool()]) as sup:
        node = await sup.ask("read")
    recs = records(root, node.id)
    reminders = [n for n, r in enumerate(recs) if r["t"] == "Steering" and r.get("by") == "harness"]
    assert reminders
    # between two reminders there is an eviction (usage fell back below the line)
    for a, b in zip(reminders, reminders[1:]):
        assert any(r["t"] == "Evicted" for r in recs[a:b])
    assert "context_evict" in recs[reminders[0]]["text"]


async def test_no_window_uses_the_byte_threshold(tmp_path):
    root = tmp_path / "run"
    async with open_supervisor(root, provider(reader_policy(3)), settings(),
                               user_tools=[fetch_tool()]) as sup:
        node = await sup.ask("read")
    assert node.reason == "done"
    assert not any(r["t"] == "Evicted" for r in records(root, node.id))


async def test_max_turns_and_unknown_tool_and_cut_off_call(tmp_path):
    root = tmp_path / "run"

    def policy(request, state):
        state["k"] = state.get("k", 0) + 1
        if state["k"] == 1:
            return call(state, "no_such_tool", x=1)
        if state["k"] == 2:
            from mnemon.session.records import ToolUse
            return [ToolUse("cut", "fetch", '{"i": 1')], "max_tokens"
        return call(state, "fetch", i=1)

    async with open_supervisor(root, provider(policy), settings(max_turns=4),
                               user_tools=[fetch_tool()]) as sup:
        node = await sup.ask("go")
    assert node.reason == "max_turns"
    recs = records(root, node.id)
    results = [r["results"][0] for r in recs if r["t"] == "ToolResults"]
    assert results[0]["is_error"] and "known tools are" in results[0]["content"]
    assert "fetch" in results[0]["content"]
    assert results[1]["is_error"] and "cut off by max_tokens" in results[1]["content"]
    assert recs[-1] == {**recs[-1], "t": "SessionEnded", "reason": "max_turns"}


async def test_model_eviction_refusal_names_the_state(tmp_path):
    root = tmp_path / "run"

    def policy(request, state):
        state["k"] = state.get("k", 0) + 1
        if state["k"] == 1:
            return call(state, "context_evict", **{"from": 1, "to": 999})
        if state["k"] == 2:
            return call(state, "context_evict", **{"from": 1, "to": 1, "note": "two\nlines"})
        if state["k"] == 3:
            return call(state, "context_evict", **{"from": 1, "to": 1, "note": "the ask"})
        return say("ok")

    async with open_supervisor(root, provider(policy), settings()) as sup:
        node = await sup.ask("go")
    res = [r["results"][0] for r in records(root, node.id) if r["t"] == "ToolResults"]
    assert res[0]["is_error"] and "turn 999 is not recorded — the latest is" in res[0]["content"]
    assert res[1]["is_error"] and "one line" in res[1]["content"]
    assert not res[2]["is_error"] and "left the context" in res[2]["content"]
    assert node.ctx.residues[0].note == "the ask"


async def test_budget_stop_is_recorded(tmp_path):
    root = tmp_path / "run"
    async with open_supervisor(root, provider(reader_policy(50)), settings(budget_tokens=5000),
                               user_tools=[fetch_tool()]) as sup:
        node = await sup.ask("read")
    assert node.reason == "budget"
    assert records(root, node.id)[-1]["reason"] == "budget"


async def test_user_tool_errors_are_isolated(tmp_path):
    from mnemon.orchestrator.usertools import UserTool

    def explode(x: int) -> str:
        """Always fails."""
        raise RuntimeError(f"boom {x}")

    def policy(request, state):
        state["k"] = state.get("k", 0) + 1
        if state["k"] == 1:
            return call(state, "explode", x=3)
        if state["k"] == 2:
            return call(state, "explode", x="not an int")
        return say("survived")

    root = tmp_path / "run"
    async with open_supervisor(root, provider(policy), settings(),
                               user_tools=[UserTool(explode)]) as sup:
        node = await sup.ask("go")
    assert node.reason == "done" and node.answer == "survived"
    res = [r["results"][0] for r in records(root, node.id) if r["t"] == "ToolResults"]
    assert res[0]["is_error"] and "RuntimeError: boom 3" in res[0]["content"]
    assert res[1]["is_error"] and "invalid input" in res[1]["content"]


def test_due_line_used_in_tests_is_small():
    assert due_line(6000) == 3000


async def test_fsync_turn_syncs_once_per_turn_boundary(tmp_path, monkeypatch):
    import os

    import stat

    calls, dirs = [], []
    real = os.fsync

    def spy(fd):
        (dirs if stat.S_ISDIR(os.fstat(fd).st_mode) else calls).append(fd)
        return real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    root = tmp_path / "run"
    async with open_supervisor(root, provider(reader_policy(3)), settings(fsync="turn"),
                               user_tools=[fetch_tool()]) as sup:
        node = await sup.ask("read")
    turns = sum(1 for r in records(root, node.id) if r["t"] == "AssistantMessage")
    assert turns == 4 and turns <= len(calls) <= turns + 2  # boundaries, plus the close
    assert len(dirs) == 2, "the new log's directory and agents/, once, with its first fsync"
    calls.clear()
    async with open_supervisor(tmp_path / "run2", provider(reader_policy(3)),
                               settings(fsync="none"), user_tools=[fetch_tool()]) as sup:
        await sup.ask("read")
    assert calls == []


async def test_keep_auto_records_its_figures_and_the_log_still_folds(tmp_path):
    """The default plan (keep "auto") writes its decision into each Evicted record; a fixed
    keep writes none; either way the log folds to the live table."""
    for keep in ("auto", 0.5):
        root = tmp_path / f"run-{keep}"
        st = settings(context_window=6000, keep=keep, keep_floor_tokens=300)
        async with open_supervisor(root, provider(reader_policy(14)), st,
                                   user_tools=[fetch_tool()]) as sup:
            node = await sup.ask("read fourteen pages")
        assert node.reason == "done"
        evicted = [r for r in records(root, node.id) if r["t"] == "Evicted"]
        assert evicted
        for r in evicted:
            if keep == "auto":
                p = r["plan"]
                assert 0 < p["keep"] <= p["ceiling_keep"] <= 0.5
                assert p["cost"] <= p["ceiling_cost"] and p["candidates"] >= 1
                assert p["floor_tokens"] <= 300
            else:
                assert "plan" not in r
        assert refold(root, node.id) == node.ctx


async def test_transcript_calls_confine_each_log_once_per_run(tmp_path, monkeypatch):
    """The transcript tools open logs through the supervisor's one ``Sources``: a log is
    confined to the run root (two ``realpath`` walks) once per run, not once per call; every
    call still answers."""
    from mnemon.session import paths

    root = tmp_path / "run"
    seen: list[str] = []
    real = paths.confine

    def counting(root_, source, **kw):
        seen.append(source)
        return real(root_, source, **kw)

    monkeypatch.setattr(paths, "confine", counting)

    def policy(request, state):
        state["k"] = state.get("k", 0) + 1
        if state["k"] <= 3:
            return call(state, "transcript_grep", pattern="go")
        return say("ok")

    async with open_supervisor(root, provider(policy), settings()) as sup:
        node = await sup.ask("go and grep")
    res = [r["results"][0] for r in records(root, node.id) if r["t"] == "ToolResults"]
    assert len(res) == 3 and not any(r["is_error"] for r in res)
    assert res[0]["content"] == '{"hits":[{"turn":1,"line":"go and grep"}],"total":1}'
    assert seen.count(f"agents/{node.id}/record.jsonl") == 1


async def test_arguments_not_json_in_a_turn_not_cut_off_are_named_as_such(tmp_path):
    """Only a response stopped by max_tokens was cut off; otherwise the model is told its
    arguments are not valid JSON, where the parser stopped, and a bounded excerpt."""
    root = tmp_path / "run"
    from mnemon.session.records import ToolUse
    bad = '{"i": 1,, "note": "\x1b[2J' + "x" * 5000 + '"}'

    def policy(request, state):
        state["k"] = state.get("k", 0) + 1
        if state["k"] == 1:
            return [ToolUse("bad", "fetch", bad), ToolUse("arr", "fetch", [1, 2])], "tool_use"
        if state["k"] == 2:
            return [ToolUse("cut", "fetch", '{"i": 1')], "max_tokens"
        return say("done")

    async with open_supervisor(root, provider(policy), settings(),
                               user_tools=[fetch_tool()]) as sup:
        node = await sup.ask("go")
    assert node.reason == "done"
    results = [r["results"] for r in records(root, node.id) if r["t"] == "ToolResults"]
    not_json, array = results[0]
    assert not_json["is_error"] and "max_tokens" not in not_json["content"]
    assert ("not valid JSON (Expecting property name enclosed in double quotes at line 1 "
            "column 9, near ") in not_json["content"]
    assert '1,, \\"note\\": \\"\\u001b[2Jxxx' in not_json["content"]  # the excerpt, escaped
    assert len(not_json["content"]) < 300 and "\x1b" not in not_json["content"]
    assert array["is_error"] and "an array, not a JSON object" in array["content"]
    assert "cut off by max_tokens" in results[1][0]["content"]
