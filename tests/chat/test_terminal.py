"""``mnemon chat`` driven through a pseudo-terminal (pexpect) on the scripted provider: a prompt,
``/context``, ``/fork``, ``/rewind``, ``/transcript grep``, ``/cost``, ``/quit``; then a resume
with Ctrl-C in the middle of a turn and a prompt after it; answers rendered as Markdown, checked
on the screen a terminal emulator (pyte) draws from the bytes. Every log verifies afterwards."""

from __future__ import annotations

import io
import json
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
        c.expect(r"fork a2\S* \(done\):")  # the answer below, rendered as Markdown
        c.expect(r"\(scripted\) You said: find the greeting")
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
        '{"blocks": [{"type": "text", "text": "Let me **look**."}, {"type": "tool_use", "id": "t1", '
        '"name": "transcript_grep", "input": {"pattern": "hello"}}, {"type": "tool_use", '
        '"id": "t2", "name": "nonesuch", "input": {}}], "stop_reason": "tool_use"}\n'
        '{"blocks": [{"type": "text", "text": "Found it."}], "stop_reason": "end_turn"}\n')
    root = tmp_path / "run"
    r = subprocess.run([sys.executable, "-m", "mnemon", "chat", "--run-root", str(root),
                        "--script", str(script)], input="hello\n/context\n/quit\n",
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "Let me **look**." in out and "Found it." in out  # piped: plain, as written
    assert "↳ transcript_grep ✓" in out and "↳ nonesuch ✗" in out
    assert "context of a1" in out
    verify(root)


ITEMS = "".join(f"{i}. item number {i}\n" for i in range(1, 51))
# streamed in two pieces: the first is taller than the screen (its live frame is cropped) and
# ends inside a bold span, so the frame drawn first shows raw ``**`` that the last must replace
MARKDOWN = ["# Harbour report\n\n" + ITEMS + "\nAnd **la",
            "st** words:\n\n- a `tick` here\n\n```python\nprint('hi')\n```\n"]


def screen_lines(raw: str, rows: int = 40, cols: int = 120) -> list[str]:
    """What a terminal shows after ``raw``: its scrollback, then its screen."""
    import pyte

    screen = pyte.HistoryScreen(cols, rows, history=5000)
    pyte.Stream(screen).feed(raw)
    top = ["".join(line[x].data for x in range(cols)) for line in screen.history.top]
    return [line.rstrip() for line in [*top, *screen.display]]


def markdown_script(tmp_path: Path) -> Path:
    script = tmp_path / "md.jsonl"
    script.write_text(json.dumps({"blocks": [{"type": "text", "text": t} for t in MARKDOWN],
                                  "stop_reason": "end_turn"}) + "\n")
    return script


def report_screen(tmp_path: Path, root: Path, then: str | None, *args: str) -> str:
    """The raw terminal output of a chat asked for the Markdown report (``markdown_script``)
    up to its "so far" line (and then ``then``, when given), the chat quit afterwards."""
    c = spawn("--run-root", str(root), "--script", str(markdown_script(tmp_path)), *args)
    out = io.StringIO()
    c.logfile_read = out
    try:
        c.sendline("report please")
        c.expect("so far")
        if then is not None:
            c.expect(then)
        raw = out.getvalue()
        c.sendline("/quit")
        c.expect(pexpect.EOF)
    finally:
        c.close(force=True)
    return raw


def test_chat_renders_markdown_answers_on_a_terminal(tmp_path):
    """The streamed answer is redrawn as Markdown in place: on the emulated screen the heading,
    list, inline code and code block are rendered, no raw ``#``, ``**``, backticks or cropped
    frame is left, and every line of an answer taller than the screen is there once, in order."""
    root = tmp_path / "run"
    raw = report_screen(tmp_path, root, "›")
    lines = screen_lines(raw)
    start = next(i for i, line in enumerate(lines) if "Ctrl-C cancels this turn" in line) + 1
    end = next(i for i, line in enumerate(lines) if "so far" in line)
    answer = [line for line in lines[start:end] if line.strip()]
    assert answer[0].strip() == "Harbour report"  # a heading, not "# Harbour report"
    assert [line.strip() for line in answer[1:51]] == [f"{i} item number {i}"
                                                      for i in range(1, 51)]
    text = "\n".join(answer)
    assert "And last words:" in text and "• a tick here" in text
    assert "print('hi')" in text
    for raw_mark in ("#", "**", "`", "...", "…"):
        assert raw_mark not in text, (raw_mark, text)
    assert "\x1b[1;4mHarbour report" in raw  # styled by rich: bold and underlined
    verify(root)


def test_chat_plain_keeps_the_text_as_written(tmp_path):
    """``--plain`` on a terminal (as when piped): the answer exactly as the model wrote it."""
    root = tmp_path / "run"
    raw = report_screen(tmp_path, root, None, "--plain")
    text = "\n".join(screen_lines(raw))
    assert "# Harbour report" in text and "And **last** words:" in text
    assert "```python" in text


def test_steer_a_running_fork_from_the_chat(tmp_path):
    """``/steer ID TEXT`` to a fork still thinking: recorded in its log as a person's message;
    to the chat's own agent between prompts (it has ended): refused naming its state."""
    root = tmp_path / "run"
    r = subprocess.run([sys.executable, "-m", "mnemon", "chat", "--run-root", str(root),
                        "--latency", "2"],
                       input="hello\n/fork think slowly\n/steer a2 look NORTH-4\n"
                             "/steer a1 too late\n/steer a2\n/quit\n",
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "message to a2 recorded: its next request carries it (1 message so far)" in out
    assert "agent a1 has ended (done)" in out
    assert "/steer needs an agent and a message" in out
    steer = [x for x in records(root, "a2") if type(x).__name__ == "Steering"]
    assert [(x.by, x.text) for x in steer] == [("user", "[message from a person] look NORTH-4")]
    verify(root)
