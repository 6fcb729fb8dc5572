"""OpenAI-style chat messages: a JSON array, or {"messages": [...]}."""

from __future__ import annotations

import json

from mnemon.orchestrator.importers import NO_RESULT, check_invariants, load, load_openai_messages
from mnemon.session.records import Text, Thinking, ToolResult, ToolUse

from .texts import OPENAI


def kinds(t):
    return [type(s).__name__.removesuffix("Step") for s in t.steps]


def test_sample():
    t = load(OPENAI)
    assert (t.source_format, t.name, t.system) == ("openai-messages", "messages", "You are a coding assistant with a shell.")
    assert kinds(t) == ["User", "Assistant", "Tool", "Assistant", "User", "Assistant"]
    a = t.steps[1]
    assert a.blocks == [ToolUse("call_ab12", "bash", {"command": "find src -name '*.py' | wc -l"}),
                        ToolUse("call_cd34", "bash", {"command": "ls -S src/*.py | head -1"})]
    assert (a.stop_reason, a.model, a.usage) == ("tool_use", "gpt-4o-2024-08-06", None)
    assert t.steps[2].results == [ToolResult(tool_use_id="call_ab12", content="3\n"),
                                  ToolResult(tool_use_id="call_cd34", content="src/lexer.py")]
    assert t.steps[3].blocks == [Text("There are 3 Python files; the biggest is `src/lexer.py`.")]
    assert t.steps[4].text == "And this screenshot?\n[image_url block not imported]"
    assert t.steps[5].stop_reason == "end_turn"
    assert check_invariants(t) == []


def test_bare_array_with_odd_messages(tmp_path):
    path = tmp_path / "chat.json"
    path.write_text(json.dumps([
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "reasoning_content": "think",
         "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f", "arguments": "not json"}},
                        {"id": "b", "type": "function", "function": {"name": "f", "arguments": "[1]"}}]},
        {"role": "tool", "tool_call_id": "a", "content": "A"},
        {"role": "tool", "tool_call_id": "zzz", "content": "orphan"},
        {"role": "function", "name": "f", "content": "legacy"},
        {"role": "system", "content": "a late system message"},
    ]))
    t = load_openai_messages(path)
    assert t.system is None
    assert kinds(t) == ["User", "Assistant", "Tool", "User"]
    assert t.steps[1].blocks == [Thinking("think", None), ToolUse("a", "f", "not json"), ToolUse("b", "f", "[1]")]
    assert t.steps[2].results[1] == ToolResult(tool_use_id="b", content=NO_RESULT, is_error=True)
    assert t.steps[3].text == "a late system message"
    assert (t.dropped, t.unanswered, t.skipped) == (1, 1, {"role:function": 1})
