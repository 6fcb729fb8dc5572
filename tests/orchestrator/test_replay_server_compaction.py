"""The providers' server-side compactions as replay strategies (issue 50, decision 0430): the
trigger and its defaults, the extra sampling step inside the triggering request, what the next
request carries, the figures — and a minimum trigger that does not fit a window said, not bent."""

from __future__ import annotations

import json

import pytest

from mnemon.orchestrator.cli import main
from mnemon.orchestrator.importers import AssistantStep, ToolStep, Trajectory, UserStep, load
from mnemon.orchestrator.replay import replay
from mnemon.orchestrator.replay import strategies as S
from mnemon.providers.prices import price_for
from mnemon.session.records import Text, ToolResult, ToolUse

from ..conftest import TRAJECTORIES
from .test_replay import SAMPLES

SERVER = ("anthropic-compaction", "openai-compaction")


def _reading_traj(n: int, size: int) -> Trajectory:
    steps = [UserStep(text="read the files")]
    for i in range(n):
        steps.append(AssistantStep(blocks=[ToolUse(f"c{i}", "bash", {"command": f"cat f{i}.py"})],
                                   stop_reason="tool_use"))
        steps.append(ToolStep(results=[ToolResult(tool_use_id=f"c{i}",
                                                  content=(f"# f{i}\n" + "x" * size))]))
    steps.append(AssistantStep(blocks=[Text("done")], stop_reason="end_turn"))
    return Trajectory(system="sys", steps=steps, source_format="neutral")


def test_the_triggers_and_their_defaults():
    a = S.make("anthropic-compaction", S.Options())
    o = S.make("openai-compaction", S.Options())
    assert isinstance(a, S.AnthropicCompaction) and isinstance(o, S.OpenAICompaction)
    # the default where it fits (200k: 187 000 of room), window − 13 000 where it does not
    assert a.trigger(200_000) == a.trigger(None) == S.SERVER_COMPACT_TRIGGER_TOKENS == 150_000
    assert a.trigger(128_000) == 115_000 and a.trigger(64_000) == 51_000
    assert a.not_applicable(64_000) is None and a.not_applicable(200_000) is None
    # Anthropic's least trigger (50 000) does not fit 32k; the OpenAI threshold has no minimum
    why = a.not_applicable(32_000)
    assert why is not None and "50,000" in why and "32,000" in why
    assert a.not_applicable(62_000) is not None  # 49 000 of room: below the minimum
    assert o.not_applicable(32_000) is None and o.trigger(32_000) == 19_000
    assert a.instruction_tokens == o.instruction_tokens == S.SERVER_COMPACT_INSTRUCTION_TOKENS
    for name in SERVER:
        assert name in S.STRATEGIES


@pytest.mark.parametrize("name", SERVER)
def test_a_compaction_inside_the_request_then_the_summary_alone(tmp_path, name):
    window = 70_000  # trigger at 57 000 input tokens
    traj = _reading_traj(70, 4_000)  # ~1 000 tokens a read: passes the trigger once
    res = replay(traj, tmp_path / "r", name, window=window)
    rows = res.rows
    at = [i for i, r in enumerate(rows) if r.kind == "summary"]
    assert len(at) == 1
    i = at[0]
    step, before, after = rows[i], rows[i - 1], rows[i + 1]
    # the extra sampling step reads the whole conversation — the request the trigger stopped,
    # its prefix from the cache — plus the provider's prompt, and writes the summary
    assert before.context_tokens <= 57_000 < step.context_tokens
    assert step.cache_read_tokens >= before.context_tokens - 1_100
    prompt = step.context_tokens - step.cache_read_tokens - before.output_tokens
    assert 0 < prompt < 2_000  # the new turn and the ~100-token prompt, no 1 000-token one
    assert step.output_tokens == S.SUMMARY_TOKENS
    p = price_for("claude-sonnet-4-5")
    want = (step.cache_read_tokens * p.cache_read + step.cache_write_tokens * p.cache_write_5m
            + step.input_tokens * p.input + step.output_tokens * p.output) / 1e6
    assert abs(step.cost_usd - round(want, 6)) < 1e-6
    # then the request goes on from the summary alone: nothing re-injected, nothing kept
    assert after.kind == "turn" and after.edited
    assert after.context_tokens < S.SUMMARY_TOKENS + 600
    s = res.summary()
    assert s["recoverability"] == 0.0 and s["verbatim_kept"] == 0 and s["edits"] == 1
    assert s["not_applicable"] is None
    recs = [json.loads(line) for line in (tmp_path / "r" / "agents" / "a1" / "record.jsonl").open()]
    c = next(k for k, r in enumerate(recs) if r["t"] == "Cleared")
    nxt = [r for r in recs[c + 1:] if r["t"] in ("UserPrompt", "AssistantMessage")]
    assert nxt[0]["t"] == "UserPrompt" and nxt[0]["text"].startswith("[summary 1")
    assert nxt[1]["t"] == "AssistantMessage"  # the summary and what came after it: nothing else
    assert main(["verify", str(tmp_path / "r")]) == 0


def test_below_the_trigger_nothing_happens(tmp_path):
    traj = _reading_traj(10, 4_000)
    for name in SERVER:
        res = replay(traj, tmp_path / name, name, window=70_000)
        assert res.summary()["edits"] == 0
        assert all(r.kind == "turn" for r in res.rows)


def test_a_minimum_that_does_not_fit_is_said_not_bent(tmp_path, capsys):
    path = TRAJECTORIES / "mini-gemini3pro__django__django-15280.jsonl"
    res = replay(load(path), tmp_path / "a", "anthropic-compaction", window=32_000)
    assert res.not_applicable and "50,000" in res.not_applicable
    assert res.rows == [] and not (tmp_path / "a").exists(), "not run at all"
    # the OpenAI threshold fits: it compacts at 19 000 input tokens
    o = replay(load(path), tmp_path / "o", "openai-compaction", window=32_000)
    assert o.summary()["edits"] >= 1 and o.not_applicable is None
    out = tmp_path / "out"
    assert main(["replay", str(path), "--out", str(out), "--strategy",
                 "evict,compact,anthropic-compaction,openai-compaction", "--context-window",
                 "32000", "--no-plot"]) == 0
    printed = capsys.readouterr().out
    row = next(line for line in printed.splitlines() if line.startswith("anthropic-compaction"))
    assert row.split()[1] == "n/a"
    assert "anthropic-compaction: not applicable here — the least trigger, 50,000 tokens" in printed
    summary = json.loads((out / "summary.json").read_text())["strategies"]
    assert summary["anthropic-compaction"]["not_applicable"]
    assert summary["openai-compaction"]["not_applicable"] is None
    evict = next(line for line in printed.splitlines() if line.startswith("evict"))
    cheapest = min(summary[s]["cost_usd"] for s in ("compact", "openai-compaction"))
    assert evict.split()[3] == f"{summary['evict']['cost_usd'] / cheapest:.3f}"
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == [
        "compact", "evict", "openai-compaction"]


@pytest.mark.parametrize("name", SERVER)
def test_every_recorded_message_still_passes_through(tmp_path, name):
    path = TRAJECTORIES / "mini-gemini3pro__django__django-16560.jsonl"
    traj = load(path)
    res = replay(traj, tmp_path / name, name, window=64_000)
    assert res.summary()["edits"] >= 1
    turns = sum(r.kind == "turn" for r in res.rows)
    assert turns == sum(isinstance(s, AssistantStep) for s in traj.steps)
    assert main(["verify", str(tmp_path / name)]) == 0


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.parent.name + "/" + p.name[:20])
def test_every_format_replays_under_both(tmp_path, path):
    """Every importer's sample, under each (at a window each can be configured at)."""
    traj = load(path)
    for name, window in (("openai-compaction", 20_000), ("anthropic-compaction", 64_000)):
        res = replay(traj, tmp_path / name, name, window=window)
        assert res.not_applicable is None and res.summary()["requests"] >= 1
        assert main(["verify", str(tmp_path / name)]) == 0


def test_the_old_import_path_names_them_too():
    from mnemon.orchestrator import strategies as old

    assert old.AnthropicCompaction is S.AnthropicCompaction
    assert old.OpenAICompaction is S.OpenAICompaction
    assert old.SERVER_COMPACTIONS == SERVER
