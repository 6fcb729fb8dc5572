"""``mnemon ask`` on the scripted provider, and its user errors."""

from __future__ import annotations

import json

from mnemon.orchestrator.cli import main


def test_ask_plays_a_script(tmp_path, capsys):
    script = tmp_path / "s.jsonl"
    script.write_text(
        json.dumps({"blocks": [{"type": "tool_use", "id": "t1", "name": "context_survey",
                                "input": {}}]}) + "\n" +
        json.dumps({"blocks": [{"type": "text", "text": "All good."}]}) + "\n")
    rc = main(["ask", "how is my context?", "--script", str(script), "--run-root",
               str(tmp_path / "run"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["answer"] == "All good." and out["reason"] == "done"
    assert main(["verify", str(tmp_path / "run")]) == 0
    recs = [json.loads(l) for l in (tmp_path / "run/agents/a1/record.jsonl").open()]
    survey = json.loads(recs[[r["t"] for r in recs].index("ToolResults")]["results"][0]["content"])
    assert survey["frontier"][0]["kind"] == "turn" and survey["frontier"][0]["id"] == 1
    assert "sweep_gate" in survey


def test_ask_user_errors_are_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert main(["ask", "hi", "--provider", "anthropic", "--run-root", str(tmp_path / "a")]) == 2
    assert main(["ask", "hi", "--script", str(tmp_path / "nope.jsonl"), "--run-root",
                 str(tmp_path / "b")]) == 2
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    assert main(["ask", "hi", "--run-root", str(tmp_path / "full")]) == 2
    assert main(["ask", "hi", "--keep", "2", "--run-root", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 4
    assert "ANTHROPIC_API_KEY" in err


def test_live_cost_equals_mnemon_cost(tmp_path, capsys):
    """The loop prices and records the same model, so the two totals agree."""
    rc = main(["ask", "hello there", "--model", "claude-haiku-4-5", "--run-root",
               str(tmp_path / "run"), "--json"])
    live = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert main(["cost", str(tmp_path / "run"), "--json"]) == 0
    after = json.loads(capsys.readouterr().out)
    assert after["total"]["cost_usd"] == sum(r["cost_usd"] for r in live["cost"]) > 0


def test_logs_are_json_lines_with_the_agent_bound(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("MNEMON_LOG_LEVEL", "debug")
    assert main(["ask", "hi", "--run-root", str(tmp_path / "run")]) == 0
    lines = [json.loads(l) for l in (tmp_path / "run" / "mnemon.log").read_text().splitlines()]
    events = [l["event"] for l in lines]
    assert "provider call" in events and "turn" in events and "agent ended" in events
    assert all(l["agent"] == "a1" for l in lines if l["event"] in ("turn", "provider call"))
    err = capsys.readouterr().err
    assert "provider call" not in err, "without -v, stderr carries only the one-line outcome"


def test_per_turn_lines_are_debug_and_left_out_at_the_default_level(tmp_path, monkeypatch):
    monkeypatch.delenv("MNEMON_LOG_LEVEL", raising=False)
    assert main(["ask", "hi", "--run-root", str(tmp_path / "run")]) == 0
    lines = [json.loads(l) for l in (tmp_path / "run" / "mnemon.log").read_text().splitlines()]
    events = [l["event"] for l in lines]
    assert "agent ended" in events
    assert "turn" not in events and "provider call" not in events
    assert {l["level"] for l in lines} <= {"info", "warning", "error"}


def test_a_bad_log_level_is_refused_in_one_line(tmp_path, capsys, monkeypatch):
    from mnemon.orchestrator import logs
    from mnemon.orchestrator.cli import LOG_LEVELS

    assert tuple(logs.LEVELS) == LOG_LEVELS
    monkeypatch.setenv("MNEMON_LOG_LEVEL", "chatty")
    assert main(["ask", "hi", "--run-root", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "MNEMON_LOG_LEVEL='chatty'" in err
    assert not (tmp_path / "run").exists()


def test_bad_input_writes_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert main(["ask", "hi", "--keep", "1.5"]) == 2
    assert main(["ask", "hi", "--provider", "anthropic"]) == 2
    assert main(["demo", "--context-window", "10"]) == 2
    assert not (tmp_path / "mnemon-runs").exists()
