"""The neutral JSONL of data/trajectories: every dev trajectory imports, text kept line for line."""

from __future__ import annotations

import json
import re

import pytest

from mnemon.orchestrator.importers import (
    AssistantStep,
    ToolStep,
    UserStep,
    check_invariants,
    detect_format,
    load,
    load_neutral,
)
from mnemon.session.records import Text, ToolUse

from .texts import DEV, texts, write_jsonl

DEV_FILES = sorted(DEV.glob("*.jsonl"))


def test_the_trajectories_are_there():
    """The data is the repository's own (tests/data/trajectories): 13 real recordings and 5
    generated ones; nothing here is skipped when one is missing."""
    assert len(DEV_FILES) == 18
    assert sum(p.name.startswith("gen-native__") for p in DEV_FILES) == 5


def _raw(path):
    """An independent reading of the raw file, by kind of text, in file order."""
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    raw = {"user": [], "assistant": [], "thinking": [], "arguments": [], "output": []}
    for i, d in enumerate(lines):
        if d["role"] == "user" or (d["role"] == "system" and i > 0):
            raw["user"].append(d["text"])
        elif d["role"] == "assistant":
            if d["text"]:
                raw["assistant"].append(d["text"])
            raw["arguments"] += [json.dumps(c["arguments"], ensure_ascii=False) for c in d.get("tool_calls") or []]
        elif d["role"] == "tool":
            raw["output"].append(d["text"])
    return lines, raw


@pytest.mark.parametrize("path", DEV_FILES, ids=lambda p: p.stem)
def test_dev_trajectory_keeps_every_text(path):
    """User, assistant, argument and tool-output text: the same items, the same concatenation."""
    lines, raw = _raw(path)
    t = load(path)
    assert t.source_format == "neutral"
    assert check_invariants(t) == []
    assert t.system == lines[0]["text"]
    assert (t.dropped, t.unanswered) == (0, 0)
    got = texts(t)
    for kind in raw:
        assert got[kind] == raw[kind], kind
        assert "".join(got[kind]) == "".join(raw[kind]), kind
    # line for line: one step per line after the system prompt, same role order — but the tool
    # lines answering one message (several calls at once) are one step
    roles = [{"user": UserStep, "assistant": AssistantStep, "tool": ToolStep}[d["role"]]
             for i, d in enumerate(lines) if i > 0 and not (d["role"] == "tool" == lines[i - 1]["role"])]
    assert [type(s) for s in t.steps] == roles


def _readme_table():
    rows = {}
    for line in (DEV / "README.md").read_text(encoding="utf-8").splitlines():
        m = re.match(r"\| (\S+\.jsonl) \| `[^`]+` \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \|", line)
        if m:
            rows[m.group(1)] = tuple(int(x) for x in m.groups()[1:])
    return rows


def test_dev_trajectories_match_the_readme_counts():
    """The README's own counts (turns, assistant, calls, tool-output bytes, largest) hold on the import."""
    table = _readme_table()
    assert sorted(table) == [p.name for p in DEV_FILES]
    for path in DEV_FILES:
        turns, assistant, calls, size, out_bytes, largest = table[path.name]
        t = load_neutral(path)
        outputs = [len(r.content.encode()) for s in t.steps if isinstance(s, ToolStep) for r in s.results]
        assert path.stat().st_size == size
        rows = [json.loads(line)["role"] for line in path.read_text(encoding="utf-8").splitlines()]
        answered_together = sum(r == "tool" == q for q, r in zip(rows, rows[1:]))
        assert len(t.steps) + 1 + answered_together == turns == len(rows)
        assert sum(isinstance(s, AssistantStep) for s in t.steps) == assistant
        assert sum(isinstance(b, ToolUse) for s in t.steps if isinstance(s, AssistantStep) for b in s.blocks) == calls
        assert (sum(outputs), max(outputs)) == (out_bytes, largest)


def test_dev_detects_as_neutral():
    assert {detect_format(p) for p in DEV_FILES} == {"neutral"}


def test_assistant_blocks_and_stop_reasons(tmp_path):
    """Text first (kept verbatim, even blank-looking), then one call per tool_call; a raw argument stays a string."""
    path = write_jsonl(tmp_path / "t.jsonl", [
        {"role": "system", "text": "sys"},
        {"role": "user", "text": "task"},
        {"role": "assistant", "text": "  look\n", "tool_calls": [
            {"id": "c1", "name": "bash", "arguments": {"command": "ls"}},
            {"id": "c2", "name": "bash", "arguments": "{\"command\": \"ls"}]},
        {"role": "tool", "text": "a\nb", "tool_call_id": "c1"},
        {"role": "tool", "text": "", "tool_call_id": "c2"},
        {"role": "assistant", "text": "done"},
    ])
    t = load_neutral(path)
    a = t.steps[1]
    assert a.blocks == [Text("  look\n"), ToolUse("c1", "bash", {"command": "ls"}),
                        ToolUse("c2", "bash", "{\"command\": \"ls")]
    assert a.stop_reason == "tool_use"
    assert [r.content for r in t.steps[2].results] == ["a\nb", ""]  # consecutive tool lines: one ToolStep
    assert t.steps[3].stop_reason == "end_turn"
    assert len(t.steps) == 4


def test_a_user_line_before_the_results_waits_for_them(tmp_path):
    """Results follow their assistant turn directly; a user text recorded in between comes after them."""
    path = write_jsonl(tmp_path / "t.jsonl", [
        {"role": "user", "text": "task"},
        {"role": "assistant", "text": "", "tool_calls": [{"id": "c1", "name": "bash", "arguments": {}}]},
        {"role": "user", "text": "nudge"},
        {"role": "tool", "text": "out", "tool_call_id": "c1"},
        {"role": "system", "text": "a later system line"},
    ])
    t = load_neutral(path)
    assert t.system is None
    assert [type(s).__name__ for s in t.steps] == ["UserStep", "AssistantStep", "ToolStep", "UserStep", "UserStep"]
    assert [t.steps[3].text, t.steps[4].text] == ["nudge", "a later system line"]
    assert check_invariants(t) == []
