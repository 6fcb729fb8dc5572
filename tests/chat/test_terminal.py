"""``mnemon chat`` driven through a pseudo-terminal (pexpect) on the scripted provider: a prompt,
``/context``, ``/fork``, ``/rewind``, ``/transcript grep``, ``/cost``, ``/quit``; then a resume
with Ctrl-C in the middle of a turn and a prompt after it. Every log verifies afterwards."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

from mnemon.session.log import iter_lines
from mnemon.session.records import SessionEnded, SessionResumed, UserPrompt, decode

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="a POSIX pseudo-terminal")


def spawn(*argv: str) -> pexpect.spawn:
    env = dict(os.environ, PROMPT_TOOLKIT_NO_CPR="1", TERM="xterm", COLUMNS="120")
    child = pexpect.spawn(sys.executable, ["-m", "mnemon", "chat", *argv], encoding="utf-8",
                          timeout=60, dimensions=(40, 120), env=env)
    child.expect("mnemon chat")
    child.expect("›")
    return child


def records(root: Path, agent: str = "a1") -> list:
    return [decode(line) for _, line in iter_lines(root / "agents" / agent / "record.jsonl")]


def verify(root: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "mnemon", "verify", str(root)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_chat_session_then_resume_with_ctrl_c(tmp_path):
    root = tmp_path / "run"
    c = spawn("--run-root", str(root))
    try:
        c.sendline("hello there")
        c.expect(r"You said: hello there")
        c.expect("so far")
        c.sendline("/context")
        c.expect("context of a1")
        c.expect("used ~")
        c.sendline("/fork find the greeting")
        c.expect("fork a2 started")
        c.expect(r"fork a2\S* \(done\): \(scripted\) You said: find the greeting")
        c.sendline("/rewind 1")
        c.expect("rewound to turn 1")
        c.sendline("/rewind 99")
        c.expect("cannot rewind to turn 99")  # refused, nothing written, the session goes on
        c.sendline("/transcript grep hello")
        c.expect("2 matching lines")
        c.sendline("/cost")
        c.expect("cache read")
        c.sendline("/nonesuch")
        c.expect("unknown command")
        c.sendline("/quit")
        c.expect("bye")
        c.expect(pexpect.EOF)
    finally:
        c.close(force=True)
    verify(root)
    a1 = records(root)
    assert [type(r).__name__ for r in a1].count("Rewound") == 1
    assert [r.reason for r in a1 if isinstance(r, SessionEnded)] == ["done"]

    # resume: Ctrl-C cancels the turn in flight, not the session; the next prompt answers
    c = spawn("--resume", str(root / "agents" / "a1"), "--latency", "3")
    try:
        c.sendline("slow one")
        c.expect("Ctrl-C cancels this turn")  # in flight: the terminal is back in cooked mode
        c.sendintr()
        c.expect("turn cancelled")
        c.sendline("after the cancel")
        c.expect(r"You said: after the cancel", timeout=60)
        c.sendline("/quit")
        c.expect(pexpect.EOF)
    finally:
        c.close(force=True)
    verify(root)
    a1 = records(root)
    ends = [r.reason for r in a1 if isinstance(r, SessionEnded)]
    assert ends[-2:] == ["cancelled", "done"]
    assert sum(isinstance(r, SessionResumed) for r in a1) == 2  # the reopening, the re-prompt
    assert [r.text for r in a1 if isinstance(r, UserPrompt)][-2:] == ["slow one",
                                                                     "after the cancel"]


def test_chat_reads_plain_lines_when_not_a_terminal(tmp_path):
    """Piped input: the same commands, no prompt_toolkit; tool calls are listed as they run."""
    script = tmp_path / "script.jsonl"
    script.write_text(
        '{"blocks": [{"type": "text", "text": "Let me look."}, {"type": "tool_use", "id": "t1", '
        '"name": "transcript_grep", "input": {"pattern": "hello"}}, {"type": "tool_use", '
        '"id": "t2", "name": "nonesuch", "input": {}}], "stop_reason": "tool_use"}\n'
        '{"blocks": [{"type": "text", "text": "Found it."}], "stop_reason": "end_turn"}\n')
    root = tmp_path / "run"
    r = subprocess.run([sys.executable, "-m", "mnemon", "chat", "--run-root", str(root),
                        "--script", str(script)], input="hello\n/context\n/quit\n",
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "Let me look." in out and "Found it." in out
    assert "↳ transcript_grep ✓" in out and "↳ nonesuch ✗" in out
    assert "context of a1" in out
    verify(root)
