"""Replay: every message kept, and each strategy's arithmetic on small hand-computed cases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import door_open, harness_events
from mnemon.lineage.view import open_agent
from mnemon.orchestrator.replay import strategies as S
from mnemon.orchestrator.cli import main
from mnemon.orchestrator.importers import AssistantStep, ToolStep, Trajectory, UserStep, load
from mnemon.orchestrator.replay import replay
from mnemon.providers.prices import price_for
from mnemon.session.door import Door
from mnemon.session.eviction import HOLD_REQUESTS
from mnemon.session.records import Text, ToolResult, ToolUse

from ..conftest import TRAJECTORIES


def _traj_texts(traj: Trajectory) -> list[str]:
    out = []
    for s in traj.steps:
        if isinstance(s, UserStep):
            out.append(s.text)
        elif isinstance(s, AssistantStep):
            for b in s.blocks:
                if isinstance(b, Text) and b.text:
                    out.append(b.text)
        elif isinstance(s, ToolStep):
            out += [r.content for r in s.results]
    return out


def _log_texts(run_root, agent="a1") -> list[str]:
    door, _ = door_open(run_root / "agents" / agent)
    out = []
    for turn in door.read("1-1000000"):
        for rec in turn["records"]:
            if rec["t"] == "UserPrompt":
                out.append(rec["text"])
            elif rec["t"] == "AssistantMessage":
                out += [b["text"] for b in rec["blocks"] if b["type"] == "text" and b["text"]]
            elif rec["t"] == "ToolResults":
                out += [r["content"] for r in rec["results"]]
    return out


@pytest.mark.parametrize("strategy", ["evict", "compact"])
def test_replay_keeps_every_message(tmp_path, strategy):
    path = sorted(TRAJECTORIES.glob("mini-gemini3pro__django__django-15280.jsonl"))[0]
    traj = load(path)
    res = replay(traj, tmp_path / strategy, strategy, window=32_000)
    texts = _log_texts(tmp_path / strategy)
    if strategy == "compact":  # the harness's summaries and re-injected reads come on top
        texts = [t for t in texts if not t.startswith("[summary ")]
        original = _traj_texts(traj)
        it = iter(texts)
        assert all(any(x == y for y in it) for x in original), "every message, in order"
    else:
        assert texts == _traj_texts(traj)
    assert res.summary()["requests"] >= sum(isinstance(s, AssistantStep) for s in traj.steps)


def _reading_traj(n: int, size: int) -> Trajectory:
    """A task, then n turns each reading a different file of ``size`` bytes, then an answer."""
    return _sized_traj([size] * n)


def _sized_traj(sizes: list[int]) -> Trajectory:
    """A task, then a turn reading a different file of each size in ``sizes``, then an answer."""
    steps = [UserStep(text="read the files")]
    for i, size in enumerate(sizes):
        steps.append(AssistantStep(blocks=[ToolUse(f"c{i}", "bash", {"command": f"cat f{i}.py"})],
                                   stop_reason="tool_use"))
        steps.append(ToolStep(results=[ToolResult(tool_use_id=f"c{i}",
                                                  content=(f"# f{i}\n" + "x" * size))]))
    steps.append(AssistantStep(blocks=[Text("done")], stop_reason="end_turn"))
    return Trajectory(system="sys", steps=steps, source_format="neutral")


def test_none_is_unbounded_and_prices_by_the_table(tmp_path):
    traj = _reading_traj(3, 400)
    res = replay(traj, tmp_path / "none", "none", window=None)
    s = res.summary()
    assert s["edits"] == 0 and s["recoverability"] == 1.0 and s["verbatim_kept"] is None
    p = price_for("claude-sonnet-4-5")
    want = sum(r.cache_read_tokens * p.cache_read + r.cache_write_tokens * p.cache_write_5m +
               r.input_tokens * p.input + r.output_tokens * p.output for r in res.rows) / 1e6
    assert abs(res.cost_usd - want) < 1e-9
    assert s["requests"] == 4


def test_compact_triggers_at_window_minus_13000_and_reinjects_reads(tmp_path):
    window = 20_000  # trigger at 7 000 tokens; re-injection budget (20 000 − 7 000) / 2
    traj = _reading_traj(12, 3_000)  # ~750 tokens per read
    res = replay(traj, tmp_path / "c", "compact", window=window)
    summaries = [r for r in res.rows if r.kind == "summary"]
    assert summaries, "the context passed 7 000 tokens"
    for r in summaries:
        assert r.output_tokens == S.SUMMARY_TOKENS
    turn_before = [res.rows[i - 1] for i, r in enumerate(res.rows) if r.kind == "summary"]
    assert all(r.context_tokens < window - S.COMPACT_BUFFER_TOKENS + 1200 for r in turn_before)
    _root, _a, ctx, _ = open_agent(tmp_path / "c" / "agents" / "a1")
    recs = [json.loads(l) for l in (tmp_path / "c" / "agents" / "a1" / "record.jsonl").open()]
    cleared = [i for i, r in enumerate(recs) if r["t"] == "Cleared"]
    assert len(cleared) == len(summaries)
    after = []
    for r in recs[cleared[0] + 1:]:
        if r["t"] == "AssistantMessage":
            break
        if r["t"] == "UserPrompt":
            after.append(r)
    assert after[0]["text"].startswith("[summary 1")
    reinjected = [r["text"] for r in after[1:] if r["text"].startswith("# f")]
    assert 1 <= len(reinjected) <= S.REINJECT_FILES
    assert sum(len(t) for t in reinjected) / 4 <= (window - 7_000) / 2
    s = res.summary()
    assert 0 < s["recoverability"] < 1  # only the re-injected reads are kept verbatim


def test_rollover_keeps_recent_user_messages_then_the_summary(tmp_path):
    traj = _reading_traj(30, 3_000)
    res = replay(traj, tmp_path / "r", "rollover", window=16_000)  # trigger at 14 400
    recs = [json.loads(l) for l in (tmp_path / "r" / "agents" / "a1" / "record.jsonl").open()]
    i = next(i for i, r in enumerate(recs) if r["t"] == "Cleared")
    prompts = [r["text"] for r in recs[i + 1:i + 3] if r["t"] == "UserPrompt"]
    assert prompts[0] == "read the files" and prompts[1].startswith("[summary 1")
    assert res.summary()["edits"] >= 1


def test_clear_tool_uses_keeps_the_last_three_results(tmp_path):
    traj = _reading_traj(10, 4_000)
    res = replay(traj, tmp_path / "k", "clear-tool-uses", window=20_000)  # trigger 7 000
    _root, _a, ctx, _ = open_agent(tmp_path / "k" / "agents" / "a1")
    swept_turns = [t.id for t in ctx.turns if t.swept]
    results = [t.id for t in ctx.turns if t.role == "assistant" and ctx.blocks(t.id) and
               any(b.kind == "tool_result" for b in ctx.blocks(t.id))]
    assert results[-3:] and not set(results[-3:]) & set(swept_turns)
    assert swept_turns
    s = res.summary()
    assert s["recoverability"] == 0.0 and s["edits"] >= 1


def test_evict_is_fully_recoverable(tmp_path):
    traj = _reading_traj(12, 3_000)
    res = replay(traj, tmp_path / "e", "evict", window=12_000)
    s = res.summary()
    assert s["edits"] >= 1 and s["recoverability"] == 1.0
    assert s["verbatim_kept"] > 0


def test_cli_replay_writes_every_report(tmp_path, capsys):
    path = TRAJECTORIES / "gen-native__long-output-late.jsonl"
    out = tmp_path / "out"
    rc = main(["replay", str(path), "--out", str(out), "--strategy", "evict,compact,none",
               "--context-window", "32000", "--json"])
    assert rc == 0
    summary = json.loads(capsys.readouterr().out)
    assert set(summary["strategies"]) == {"evict", "compact", "none"}
    for k in ("cost_usd", "cache_read_share", "recoverability", "verbatim_kept", "edits",
              "input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens"):
        assert k in summary["strategies"]["evict"]
    assert (out / "per_turn.csv").read_text().startswith("strategy,request,")
    assert (out / "plot.png").read_bytes()[:4] == b"\x89PNG"
    for s in ("evict", "compact", "none"):
        assert main(["verify", str(out / s)]) == 0
    # the chosen keep at each eviction and the verbatim tokens after each edit
    ev = summary["strategies"]["evict"]
    assert len(ev["chosen_keep"]) == ev["harness_evictions"] > 0
    assert all(0 < k <= 0.5 for k in ev["chosen_keep"])
    assert len(ev["verbatim_after_edits"]) == ev["edits"]
    assert summary["strategies"]["none"]["chosen_keep"] == []
    import csv

    rows = list(csv.DictReader((out / "per_turn.csv").open()))
    keeps = [float(r["keep"]) for r in rows if r["strategy"] == "evict" and r["keep"]]
    assert keeps == ev["chosen_keep"]
    assert all(r["verbatim_tokens"] for r in rows if r["strategy"] == "evict" and r["keep"])


def test_cli_replay_takes_keep_auto_or_a_share(tmp_path, capsys):
    path = TRAJECTORIES / "gen-native__long-output-late.jsonl"
    for keep, out in (("auto", "a"), ("0.3", "b")):
        assert main(["replay", str(path), "--out", str(tmp_path / out), "--strategy", "evict",
                     "--context-window", "32000", "--keep", keep, "--json", "--no-plot"]) == 0
        ev = json.loads(capsys.readouterr().out)["strategies"]["evict"]
        if keep == "0.3":
            assert set(ev["chosen_keep"]) == {0.3}
    for bad in (["--keep", "2"], ["--keep", "most"], ["--keep-floor", "-1"]):
        assert main(["replay", str(path), "--out", str(tmp_path / "c"), *bad]) == 2
        err = capsys.readouterr().err
        assert bad[0] in err and "Traceback" not in err
    # a higher floor keeps more verbatim material
    assert main(["replay", str(path), "--out", str(tmp_path / "d"), "--strategy", "evict",
                 "--context-window", "32000", "--keep-floor", "0", "--json", "--no-plot"]) == 0
    low = json.loads(capsys.readouterr().out)["strategies"]["evict"]
    assert main(["replay", str(path), "--out", str(tmp_path / "e"), "--strategy", "evict",
                 "--context-window", "32000", "--keep-floor", "100000", "--json",
                 "--no-plot"]) == 0
    high = json.loads(capsys.readouterr().out)["strategies"]["evict"]
    assert sum(low["chosen_keep"]) / len(low["chosen_keep"]) < \
        sum(high["chosen_keep"]) / len(high["chosen_keep"])


def test_cli_replay_refuses_bad_input(tmp_path, capsys):
    assert main(["replay", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "o")]) == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    assert main(["replay", str(bad), "--out", str(tmp_path / "o")]) == 2
    assert main(["replay", str(bad), "--out", str(tmp_path / "o"), "--strategy", "magic"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 3


SAMPLES = sorted(p for p in (Path(__file__).resolve().parents[1] / "importers" / "samples").rglob("*")
                 if p.is_file() and "subagents" not in p.parts)


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.parent.name + "/" + p.name[:20])
def test_every_format_replays_and_verifies(tmp_path, path):
    traj = load(path)
    res = replay(traj, tmp_path / "r", "evict", window=20_000)
    assert main(["verify", str(tmp_path / "r")]) == 0
    kids = len(traj.children)
    assert len(list((tmp_path / "r" / "agents").iterdir())) == 1 + kids
    assert res.summary()["requests"] >= 1


def test_cli_replay_compares_against_compaction_by_default(tmp_path, capsys):
    path = TRAJECTORIES / "gen-native__long-output-late.jsonl"
    out = tmp_path / "out"
    assert main(["replay", str(path), "--out", str(out), "--context-window", "32000",
                 "--no-plot"]) == 0
    printed = capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["compact", "evict"]
    evict_row = next(line for line in printed.splitlines() if line.startswith("evict"))
    assert "-" not in evict_row.split()[2], "the vs-compact column is filled in"
    assert "plot.png" not in printed


def test_cli_replay_without_matplotlib_says_so_in_one_line(tmp_path, capsys, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError("no matplotlib here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    path = TRAJECTORIES / "gen-native__long-output-late.jsonl"
    out = tmp_path / "out"
    assert main(["replay", str(path), "--out", str(out), "--strategy", "evict",
                 "--context-window", "32000"]) == 0
    captured = capsys.readouterr()
    assert "plot.png" not in captured.out and not (out / "plot.png").exists()
    assert captured.err == "mnemon: no plot: it needs matplotlib (pip install 'mnemon[plot]')\n"


def test_the_first_four_trajectories_at_32k_read_90_percent_on_steady_requests(tmp_path):
    """Issue 20's goal on `chain0` of bench/strategies.py (the first four trajectories of
    tests/data in one agent) at 32k: steady requests read ≥ 90 % from the cache, for less than
    compaction, all recoverable, and every cut keeps the verbatim floor. (On the team's earlier
    corpus this chain was the hardest, 90.2 % against compaction's 89.95 %; on the repository's
    own data compaction reads 94 % too, so only evict's figures are pinned.) A change that moves
    these is re-measured with bench/strategies.py."""
    steps = []
    system = None
    for p in sorted(TRAJECTORIES.glob("*.jsonl"))[:4]:
        t = load(p)
        system = system or t.system
        steps += [UserStep(text=f"Next task ({p.stem}):"), *t.steps]
    traj = Trajectory(system=system, steps=steps, source_format="neutral", name="chain")
    ev = replay(traj, tmp_path / "e", "evict", window=32_000).summary()
    co = replay(traj, tmp_path / "c", "compact", window=32_000).summary()
    assert ev["steady_cache_read_share"] >= 0.90
    assert ev["cost_usd"] < co["cost_usd"] and ev["recoverability"] == 1.0
    # every cut keeps the floor (or all the ceiling keeps): none goes past the 6 250-token read
    # of recent work just before the turn in hand, as the floor of 6 144 did
    plans = [json.loads(line)["plan"] for line in
             (tmp_path / "e" / "agents" / "a1" / "record.jsonl").read_text().splitlines()
             if line.startswith('{"t":"Evicted"')]
    assert len(plans) == ev["harness_evictions"] == 7
    assert all(p["verbatim_tokens"] >= p["floor_tokens"] for p in plans)


def test_the_paths_from_before_the_package_still_import():
    """Replay became a package (``orchestrator/replay/``); the paths docs, bench and users
    import keep working: the package's face and the old ``orchestrator.strategies`` module,
    which re-exports the package's own objects."""
    from mnemon.orchestrator import strategies as old
    from mnemon.orchestrator.replay import replay as fn, summary_table, write_reports
    from mnemon.orchestrator.replay import run, report

    assert (fn, summary_table, write_reports) == (run.replay, report.summary_table,
                                                   report.write_reports)
    for name in old.__all__:
        assert getattr(old, name) is getattr(S, name), name
    assert old.make("evict", old.Options()).name == "evict"


def test_a_damaged_recording_replays_and_the_report_names_what_it_lost(tmp_path, capsys):
    """A Claude Code transcript with a summary glued onto one line and a line cut short in the
    middle: the glued records are both replayed, the broken line is skipped, and summary.json
    and one line on stderr name it (path, line, why)."""
    path = Path(__file__).resolve().parents[1] / "importers" / "samples" / "claude" / \
        "4e8a0b17-5c2d-4f63-8a9e-1b7c3d5f2e90.jsonl"
    out = tmp_path / "out"
    assert main(["replay", str(path), "--out", str(out), "--strategy", "evict",
                 "--context-window", "32000", "--no-plot", "--json"]) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert summary["skipped_lines"] == [{"path": str(path), "line": 6, "reason": "not JSON"}]
    assert json.loads((out / "summary.json").read_text())["skipped_lines"] == \
        summary["skipped_lines"]
    assert captured.err == (f"mnemon: replayed without 1 unreadable line of the recording "
                            f"({path}:6: not JSON; all in summary.json)\n")
    assert main(["verify", str(out / "evict")]) == 0
    capsys.readouterr()
    clean = TRAJECTORIES / "gen-native__short-fix.jsonl"
    assert main(["replay", str(clean), "--out", str(tmp_path / "c"), "--strategy", "none",
                 "--no-plot", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["skipped_lines"] == []


def test_clear_at_least_clears_in_bulk_or_not_at_all(tmp_path):
    """Without ``clear_at_least`` every request past the trigger clears the one result that just
    left the last three (a cache rewrite each time, as the API documents a clear); with it, a clear
    is made only when it takes at least that many tokens at once, so fewer, larger clears."""
    traj = _reading_traj(16, 4_000)  # ~1 000 tokens a result
    every = replay(traj, tmp_path / "every", "clear-tool-uses", window=20_000).summary()
    opts = S.Options(clear_at_least=5_000)
    bulk = replay(traj, tmp_path / "bulk", "clear-tool-uses", window=20_000, opts=opts)
    _root, _a, ctx, _ = open_agent(tmp_path / "bulk" / "agents" / "a1")
    door, _ = door_open(tmp_path / "bulk" / "agents" / "a1")
    sweeps = [r for t in door.read([t.id for t in ctx.turns]) for r in t["records"]
              if r["t"] == "Swept"]
    assert sweeps, "some clear was big enough"
    assert all(len(s["blocks"]) >= 5 for s in sweeps), sweeps  # ≥ 5 000 tokens: ≥ 5 results
    assert 0 < bulk.summary()["edits"] < every["edits"]
    assert bulk.cost_usd < replay(traj, tmp_path / "again", "clear-tool-uses",
                                  window=20_000).cost_usd


def test_cli_clear_at_least_is_a_number_of_tokens(tmp_path, capsys):
    path = TRAJECTORIES / "gen-native__long-output-late.jsonl"
    assert main(["replay", str(path), "--out", str(tmp_path / "o"), "--strategy",
                 "clear-tool-uses", "--clear-at-least", "-1"]) == 2
    assert "--clear-at-least must be a number of tokens" in capsys.readouterr().err


def test_a_cut_that_cannot_make_room_waits_for_the_next_turn(tmp_path):
    """A 17 500-token result in hand at a 32k window: the plan cannot take it yet, and evicting
    the rest would leave the context above the line. Before decision 0268 that eviction was made
    and the next turn evicted again; now one eviction, on the next turn, takes both."""
    res = replay(_sized_traj([2000] * 20 + [70_000] + [500] * 8), tmp_path / "d", "evict",
                 window=32_000)
    assert res.summary()["edits"] == 1


def test_what_a_cut_writes_counts_when_it_is_weighed(tmp_path):
    """A cut's residue message and Evicted line stay in the context: a cut that takes less than
    they add back to a context just over the line cannot bring it under, so it waits (found by
    the property below: a 70 KB result in hand, the cut of the 310-byte one before it)."""
    with harness_events() as events:
        replay(_sized_traj([310, 70_741, 100, 100, 100]), tmp_path / "r", "evict",
               window=32_000)
    cuts = [e for e in events if e["event"] == "harness eviction"]
    assert cuts and not any(e["short"] for e in cuts), cuts


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sizes=st.lists(st.one_of(st.integers(100, 4_000), st.integers(20_000, 120_000)),
                      min_size=5, max_size=40),
       window=st.sampled_from([20_000, 32_000, 64_000]))
def test_no_churn_on_sessions_with_very_large_tool_results(tmp_path_factory, sizes, window):
    """Decision 0268 over generated sessions: a harness eviction that leaves the context above
    the eviction line is made only when the next request would not fit the window otherwise, and
    the one after it waits HOLD_REQUESTS requests unless the window would overflow."""
    with harness_events() as events:
        replay(_sized_traj(sizes), tmp_path_factory.mktemp("churn") / "r", "evict",
               window=window)
    cuts = [e for e in events if e["event"] == "harness eviction"]
    for e in cuts:
        room = e["used_tokens"] + (e["growth"] or 0)
        if e["short"]:
            assert room >= window, e  # forced: the next request would not have fitted
        if e["since_short"] is not None and e["since_short"] < HOLD_REQUESTS:
            assert room >= window, e  # held off unless the window would overflow
