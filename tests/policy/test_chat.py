"""``mnemon chat --policy``: the inline approval prompt through a pseudo-terminal — approve,
reject with a reason, edit the input — on a built-in tool (built-ins pass the same gate)."""

from __future__ import annotations

import json
import sys

import pexpect
import pytest

from ..chat.test_terminal import spawn, verify
from .conftest import records

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="a POSIX pseudo-terminal")


def grep(cid: str, pattern: str) -> str:
    return json.dumps({"blocks": [{"type": "tool_use", "id": cid, "name": "transcript_grep",
                                   "input": {"pattern": pattern}}], "stop_reason": "tool_use"})


def test_the_chat_asks_inline(tmp_path):
    script = tmp_path / "script.jsonl"
    script.write_text("\n".join([
        grep("g1", "hello"), grep("g2", "secret"), grep("g3", "draft"),
        json.dumps({"blocks": [{"type": "text", "text": "All done."}],
                    "stop_reason": "end_turn"})]) + "\n")
    policy = tmp_path / "policy.toml"
    policy.write_text('[[rule]]\ntool = "transcript_*"\naction = "ask"\n'
                      'reason = "reading the transcript"\n')
    root = tmp_path / "run"
    c = spawn("--run-root", str(root), "--script", str(script), "--policy", str(policy))
    try:
        c.sendline("hello there")
        c.expect("wants to call")
        c.expect("reading the transcript")
        c.expect('"pattern": "hello"')
        c.expect(r"\[e\]dit")
        c.sendline("y")
        c.expect('"pattern": "secret"')
        c.expect(r"\[e\]dit")
        c.sendline("maybe")
        c.expect("answer y, n or e")
        c.sendline("n")
        c.expect("reason")
        c.sendline("not that one")
        c.expect('"pattern": "draft"')
        c.expect(r"\[e\]dit")
        c.sendline("e")
        c.expect("JSON object")
        c.sendline('{"pattern": "there"}')
        c.expect("All done.")
        c.expect("so far")
        c.sendline("/quit")
        c.expect(pexpect.EOF)
    finally:
        c.close(force=True)
    verify(root)
    recs = records(root)
    dec = [(r["call_id"], r["decision"], r.get("reason"), r.get("input"), r["by"])
           for r in recs if r["t"] == "ApprovalDecided"]
    assert dec == [("g1", "approve", None, None, "chat"),
                   ("g2", "reject", "not that one", None, "chat"),
                   ("g3", "approve", None, {"pattern": "there"}, "chat")]
    res = {r["tool_use_id"]: r for rec in recs if rec["t"] == "ToolResults"
           for r in rec["results"]}
    assert not res["g1"]["is_error"] and '"total":1' in res["g1"]["content"]
    assert res["g2"]["is_error"] and "not that one" in res["g2"]["content"]
    assert not res["g3"]["is_error"] and '"total":' in res["g3"]["content"]


def test_a_chat_killed_while_it_asks_asks_again_when_resumed(tmp_path):
    """SIGKILL while the question is on the screen; ``chat --resume`` asks it again before the
    next prompt; approved, the call runs once and the agent goes on."""
    import signal

    first = tmp_path / "first.jsonl"
    first.write_text(grep("g1", "hello") + "\n")
    then = tmp_path / "then.jsonl"  # the whole script: the resumed agent goes on at line 2
    then.write_text(grep("g1", "hello") + "\n" + json.dumps(
        {"blocks": [{"type": "text", "text": "Carried on."}], "stop_reason": "end_turn"}) + "\n")
    policy = tmp_path / "policy.toml"
    policy.write_text('[[rule]]\ntool = "transcript_grep"\naction = "ask"\n')
    root = tmp_path / "run"
    c = spawn("--run-root", str(root), "--script", str(first), "--policy", str(policy))
    try:
        c.sendline("hello there")
        c.expect(r"\[e\]dit")
        c.kill(signal.SIGKILL)
    finally:
        c.close(force=True)
    c = spawn("--resume", str(root / "agents" / "a1"), "--script", str(then), "--policy",
              str(policy))
    try:
        c.sendline("go on")
        c.expect('"pattern": "hello"')
        c.expect(r"\[e\]dit")
        c.sendline("y")
        c.expect("Carried on.")
        c.sendline("/quit")
        c.expect(pexpect.EOF)
    finally:
        c.close(force=True)
    verify(root)
    recs = records(root)
    assert [r["t"] for r in recs if r["t"].startswith("Approval")] == [
        "ApprovalRequested", "ApprovalDecided"]
    res = [x for r in recs if r["t"] == "ToolResults" for x in r["results"]]
    assert [(x["tool_use_id"], x["is_error"]) for x in res] == [("g1", False)]
    prompts = [r["text"] for r in recs if r["t"] == "UserPrompt"]
    assert prompts == ["hello there", "go on"]
    at = [r["t"] for r in recs]
    assert at.index("ToolResults") < len(at) - 1 - at[::-1].index("UserPrompt")
