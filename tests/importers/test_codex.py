"""Codex CLI rollouts: response_item only, event_msg for usage and response boundaries."""

from __future__ import annotations

import json

from mnemon.orchestrator.importers import (
    NO_RESULT,
    AssistantStep,
    ToolStep,
    UserStep,
    check_invariants,
    load,
    load_codex,
)
from mnemon.session.records import Opaque, Text, Thinking, ToolResult, ToolUse, Usage

from .texts import CODEX, CODEX_BARE, CODEX_OLD, texts, write_jsonl


def kinds(t):
    return [type(s).__name__.removesuffix("Step") for s in t.steps]


def test_shape_of_a_0_135_rollout():
    t = load(CODEX)
    assert (t.source_format, t.name) == ("codex", "0199a5e4-7c1b-7d20-8f3a-5b6c7d8e9f01")
    assert t.system.startswith("You are Codex, a coding agent based on GPT-5.")  # base_instructions.text
    assert kinds(t) == ["User", "User", "User", "Assistant", "Tool", "Assistant", "Tool", "Assistant", "Tool",
                        "Assistant"]
    # the developer message is not the system prompt here (base_instructions is): it stays a user text
    assert t.steps[0].text.startswith("<permissions instructions>")
    assert t.steps[2] == UserStep(text="Why does test_parse_twice fail? Fix it.")
    assert check_invariants(t) == []
    assert (t.dropped, t.unanswered) == (0, 0)
    assert t.skipped["ghost_snapshot"] == 1 and t.skipped["event_msg:agent_message"] == 2


def test_one_model_response_is_one_assistant_step():
    t = load(CODEX)
    first = t.steps[3]
    assert first.blocks[0] == Thinking("**Running the failing test**\n\nReproduce first.", None)
    assert isinstance(first.blocks[1], Opaque) and first.blocks[1].provider == "openai"
    assert first.blocks[1].block["encrypted_content"] == "gAAAAABpXh3kQ2VuY3J5cHRlZC1yZWFzb25pbmctb25l"
    assert first.blocks[2] == ToolUse("call_Q1pT8x", "exec_command", {
        "command": "python -m pytest -x tests/test_parser.py", "workdir": "/home/dev/parsekit", "yield_time_ms": 10000})
    assert (first.stop_reason, first.model) == ("tool_use", "gpt-5.2-codex")
    # last_token_usage: input 6120 of which 4864 cached
    assert first.usage == Usage(input_tokens=1256, output_tokens=180, cache_read_tokens=4864, cache_write_tokens=0)
    second = t.steps[5]
    assert [type(b) for b in second.blocks] == [Text, ToolUse, ToolUse]
    assert second.blocks[2].input == {"command": ["bash", "-lc", "rg -n '_BUF' src"]}
    last = t.steps[9]
    assert last.stop_reason == "end_turn"
    assert last.usage == Usage(input_tokens=148, output_tokens=60, cache_read_tokens=7552, cache_write_tokens=0)


def test_outputs_are_kept_as_recorded():
    t = load(CODEX)
    raw = [json.loads(line)["payload"] for line in CODEX.read_text().splitlines()]
    out1 = next(p["output"] for p in raw if p.get("call_id") == "call_Q1pT8x" and "output" in p)
    assert t.steps[4].results == [ToolResult(tool_use_id="call_Q1pT8x", content=out1)]  # JSON in a string, untouched
    assert t.steps[6].results[1].content == "failed in sandbox: rg: src: Permission denied (os error 13)"
    patch = t.steps[7].blocks[-1]
    assert patch.name == "apply_patch" and patch.input.startswith("*** Begin Patch\n")  # raw text kept as a string
    assert t.steps[8].results[0].content == "Success. Updated the following files:\nM src/lexer.py\n"


def test_text_is_taken_once_from_response_items():
    """Each text appears once although event_msg repeats it; an independent walk over response_item."""
    t = load(CODEX)
    got = texts(t)
    raw = {"user": [], "assistant": [], "thinking": [], "arguments": [], "output": []}
    for line in CODEX.read_text().splitlines():
        d = json.loads(line)
        if d["type"] != "response_item":
            continue
        p = d["payload"]
        if p["type"] == "message":
            raw["assistant" if p["role"] == "assistant" else "user"] += [c["text"] for c in p["content"]]
        elif p["type"] == "reasoning":
            raw["thinking"] += [s["text"] for s in p["summary"]]
        elif p["type"] == "function_call":
            raw["arguments"].append(json.dumps(json.loads(p["arguments"])))
        elif p["type"] == "custom_tool_call":
            raw["arguments"].append(json.dumps(p["input"]))
        elif p["type"] == "function_call_output":
            raw["output"].append(p["output"])
        elif p["type"] == "custom_tool_call_output":
            raw["output"] += [c["text"] for c in p["output"]]
    assert got == raw


def test_a_0_40_rollout_takes_the_first_developer_message_as_system():
    t = load(CODEX_OLD)
    assert t.system == "You are a careful reviewer. Answer in one sentence."
    assert kinds(t) == ["User", "User", "Assistant"]
    assert t.steps[1].text == "Is a module-level list a good token buffer?\n[input_image block not imported]"
    a = t.steps[2]
    assert a.blocks == [Text("No: it survives between calls, so every parse after the first sees stale tokens.")]
    assert (a.model, a.usage) == ("gpt-5", Usage(input_tokens=2100, output_tokens=40))


def L(kind, payload):
    return {"timestamp": "2026-01-01T00:00:00.000Z", "type": kind, "payload": payload}


def item(**payload):
    return L("response_item", payload)


def msg(role, text):
    kind = "output_text" if role == "assistant" else "input_text"
    return item(type="message", role=role, content=[{"type": kind, "text": text}])


def test_unanswered_orphaned_failed_and_compacted(tmp_path):
    t = load_codex(write_jsonl(tmp_path / "r.jsonl", [
        L("session_meta", {"id": "x", "cwd": "/w", "instructions": None}),
        msg("user", "go"),
        item(type="function_call", name="shell", arguments="{\"command\": [\"ls\"", call_id="c1"),
        msg("user", "never mind"),  # waits for c1's output, which never comes before the next response
        msg("assistant", "ok"),
        item(type="function_call", name="shell", arguments="{}", call_id="c2"),
        item(type="function_call_output", call_id="c1", output="late"),  # the turn has moved on: dropped
        item(type="function_call_output", call_id="c9", output="orphan"),
        item(type="function_call_output", call_id="c2", output={"content": "denied", "success": False}),
        L("compacted", {"message": "summary of the above"}),
        item(type="local_shell_call", call_id="c3", status="completed",
             action={"type": "exec", "command": ["echo", "hi"]}),
        item(type="function_call_output", call_id="c3", output="hi\n"),
        item(type="future_item", data=1),
        L("mystery", {"a": 1}),
    ]))
    assert kinds(t) == ["User", "Assistant", "Tool", "User", "Assistant", "Tool", "User", "Assistant", "Tool"]
    assert t.system is None
    assert t.steps[1].blocks == [ToolUse("c1", "shell", "{\"command\": [\"ls\"")]  # not JSON: kept as the string
    assert t.steps[2].results == [ToolResult(tool_use_id="c1", content=NO_RESULT, is_error=True)]
    # the late output found its call already closed: it is dropped with the orphan
    assert t.dropped == 2 and t.unanswered == 1
    assert t.steps[5].results == [ToolResult(tool_use_id="c2", content="denied", is_error=True)]
    assert t.steps[6].text == "summary of the above"
    assert t.steps[7].blocks == [ToolUse("c3", "local_shell", {"type": "exec", "command": ["echo", "hi"]})]
    assert t.skipped == {"response_item:future_item": 1, "mystery": 1}
    assert check_invariants(t) == []


def test_two_responses_split_by_a_token_count(tmp_path):
    """With no output or user item between them, the token_count event marks where a response ends."""
    t = load_codex(write_jsonl(tmp_path / "r.jsonl", [
        msg("user", "go"),
        msg("assistant", "one"),
        L("event_msg", {"type": "token_count", "info": {"last_token_usage": {"input_tokens": 10, "output_tokens": 2}}}),
        msg("assistant", "two"),
    ]))
    assert kinds(t) == ["User", "Assistant", "Assistant"]
    assert t.steps[1].usage == Usage(input_tokens=10, output_tokens=2) and t.steps[2].usage is None
    assert all(isinstance(s, (UserStep, AssistantStep, ToolStep)) for s in t.steps)


# --------------------------------------------------------------------------- the older layout (CLI <= 0.3x)


def _enveloped(rows):
    """The same rollout as the envelope layout would have written it: the header as ``session_meta``,
    each bare item as a ``response_item``, and the recorder's ``record_type`` lines left out."""
    out = []
    for r in rows:
        if "record_type" in r:
            continue
        kind = "response_item" if "type" in r else "session_meta"
        out.append({"timestamp": "2025-08-18T10:12:31.406Z", "type": kind, "payload": r})
    return out


def test_shape_of_a_rollout_from_before_the_envelope():
    t = load(CODEX_BARE)
    assert (t.source_format, t.name, t.system) == ("codex", "3b0c9a52-6f1e-4d2a-9c7b-2e8f4a1d5c60", None)
    assert kinds(t) == ["User", "User", "User", "Assistant", "Tool", "Assistant", "User", "Assistant", "Tool",
                        "Assistant", "Tool", "Assistant"]
    assert t.steps[0].text.startswith("<user_instructions>") and t.steps[1].text.startswith("<environment_context>")
    assert t.steps[2] == UserStep(text="Why does parse() return stale tokens on the second call?")
    first = t.steps[3]
    assert first.blocks[0] == Thinking("**Looking for module-level state**\n\nGrep the lexer first.", None)
    assert isinstance(first.blocks[1], Opaque) and first.blocks[1].block["id"] == "rs_68a2fc1e5b0c8190a1b2c3d4e5f60718"
    assert first.blocks[2] == ToolUse("call_7Hq2LmN4pR8sT1vX", "shell", {
        "command": ["bash", "-lc", "rg -n '^_[A-Z]+ = ' src"], "workdir": "/home/dev/parsekit", "timeout_ms": 120000})
    # nothing in this layout names the model or reports usage
    assert all((s.model, s.usage) == (None, None) for s in t.steps if isinstance(s, AssistantStep))
    raw = [json.loads(line) for line in CODEX_BARE.read_text().splitlines()]
    assert t.steps[4].results == [ToolResult(tool_use_id="call_7Hq2LmN4pR8sT1vX", content=raw[8]["output"])]
    assert t.steps[11].blocks == [Text("Done: `_BUF` is now created inside `parse()`, and the four parser tests pass.")]
    assert t.skipped == {"record_type:state": 5} and t.skipped_lines == []
    assert (t.dropped, t.unanswered) == (0, 0) and check_invariants(t) == []


def test_the_older_layout_gives_the_steps_of_its_enveloped_equivalent(tmp_path):
    rows = [json.loads(line) for line in CODEX_BARE.read_text().splitlines()]
    bare = load(CODEX_BARE)
    wrapped = load(write_jsonl(tmp_path / "rollout-wrapped.jsonl", _enveloped(rows)))
    assert (wrapped.system, wrapped.name, wrapped.steps) == (bare.system, bare.name, bare.steps)
    assert wrapped.skipped == {}


def test_the_older_header_gives_name_and_instructions(tmp_path):
    t = load(write_jsonl(tmp_path / "r.jsonl", [
        {"id": "abc", "timestamp": "2025-08-10T12:50:53.445Z", "instructions": "Be brief."},
        {"record_type": "state"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hello"}]},
        {"record_type": "snapshot", "x": 1},
        {"type": "ghost_snapshot", "ghost_commit": {"id": "g1"}},
    ]))
    assert (t.name, t.system) == ("abc", "Be brief.")
    assert kinds(t) == ["User", "Assistant"]
    assert t.skipped == {"record_type:state": 1, "record_type:snapshot": 1, "response_item:ghost_snapshot": 1}


def test_an_older_rollout_without_its_header_is_still_detected(tmp_path):
    path = write_jsonl(tmp_path / "r.jsonl", [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
    ])
    t = load(path)
    assert t.source_format == "codex" and kinds(t) == ["User", "Assistant", "Tool"]
    assert write_jsonl(tmp_path / "s.jsonl", [{"record_type": "state"}]) and load(tmp_path / "s.jsonl").steps == []
