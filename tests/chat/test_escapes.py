"""The chat on a terminal never passes a model's terminal controls through: its answers
(streamed, as Markdown or ``--plain``), a fork's answer, the names of the tools it called and an
end reason quoting the model are shown escaped (``terminal.shown``), checked in the bytes the
chat wrote to a pseudo-terminal and on the screen a terminal emulator (pyte) draws from them."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pexpect
import pytest

from mnemon.orchestrator.terminal import shown

from .test_terminal import screen_lines, spawn, verify

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="a POSIX pseudo-terminal")

# clear screen (CSI), set the title (OSC … BEL), overwrite the line, C1 CSI, a bidi override
HOSTILE = "before\x1b[2J\x1b]0;pwned\x07\rover\x9b31mend\u202eevil"
# what a terminal would act on, were it written raw (rich drops a bare BEL and CR itself)
RAW = ("\x1b[2J", "\x1b]0;pwned", "\x9b", "\u202e", "\rover")


def script(tmp_path: Path) -> Path:
    """Each agent (the chat's and its fork) says the hostile text, calls a tool named with it
    (not offered: it fails), then answers the hostile text."""
    path = tmp_path / "hostile.jsonl"
    path.write_text("\n".join(json.dumps(t) for t in [
        {"blocks": [{"type": "text", "text": f"looking {HOSTILE}"},
                    {"type": "tool_use", "id": "c1", "name": f"tool{HOSTILE}", "input": {}}]},
        {"blocks": [{"type": "text", "text": f"answer {HOSTILE}"}]}]) + "\n")
    return path


def chat_output(tmp_path: Path, root: Path, *args: str) -> str:
    c = spawn("--run-root", str(root), "--script", str(script(tmp_path)), *args)
    out = io.StringIO()
    c.logfile_read = out
    try:
        c.sendline("go")
        c.expect("so far")
        c.sendline("/fork again")
        c.expect(r"fork a2\S* \(done\):")
        c.expect("evil")
        c.sendline("/transcript grep evil")  # the chat's own views of the transcript
        c.expect("matching line")
        c.sendline("/transcript read 0-9")
        c.expect("== turn 1")
        c.sendline("/quit")
        c.expect(pexpect.EOF)
    finally:
        c.close(force=True)
    return out.getvalue()


@pytest.mark.parametrize("plain", [False, True], ids=["markdown", "plain"])
def test_the_chat_escapes_answers_tool_names_and_forks_on_a_terminal(tmp_path, plain):
    root = tmp_path / "run"
    raw = chat_output(tmp_path, root, *(["--plain"] if plain else []))
    for seq in RAW:
        assert seq not in raw, (seq, raw)
    screen = "\n".join(screen_lines(raw, rows=40, cols=120))
    escaped = shown(HOSTILE)
    assert escaped.count("\\") == 6  # \x1b twice, \x07, \r, \x9b, \u202e
    for part in ("\\x1b[2J", "\\x1b]0;pwned\\x07\\rover", "\\x9b31mend\\u202eevil"):
        assert screen.count(part) >= 4, (part, screen)  # said, answered, the tool, the fork
    assert f"↳ tool{escaped}" in screen.replace("\n", "")  # the tool's name, escaped
    verify(root)


@pytest.mark.parametrize("markdown", [True, False], ids=["markdown", "plain"])
async def test_an_answer_printed_whole_and_an_end_reason_are_escaped(tmp_path, markdown):
    """A provider that does not stream: the answer is printed whole when the turn ends; a turn
    that fails with the model's text in its error ends with a reason quoting it."""
    import trio
    from rich.console import Console

    from mnemon import ScriptedProvider, Settings, open_supervisor
    from mnemon.orchestrator.chat.commands import parse_line
    from mnemon.orchestrator.chat.session import ChatSession
    from mnemon.orchestrator.chat.terminal import Terminal, _Prompt

    def policy(request, state):
        state["n"] = state.get("n", 0) + 1
        if state["n"] == 1:
            return [{"type": "text", "text": f"answer {HOSTILE}"}], "end_turn"
        raise RuntimeError(f"the model said {HOSTILE}")

    provider = ScriptedProvider(policy=policy)
    provider.streams_text = False  # as a provider without streaming: no text as it comes
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=200, highlight=False)
    with trio.fail_after(60):
        async with open_supervisor(tmp_path / "run", provider, Settings()) as sup:
            async with trio.open_nursery() as forks:
                term = Terminal(ChatSession(sup, forks), console, _Prompt(None),
                                markdown=markdown)
                await term.dispatch(parse_line("first"))
                await term.dispatch(parse_line("second"))
    raw = out.getvalue()
    for seq in RAW:
        assert seq not in raw, (seq, raw)
    text = "\n".join(screen_lines(raw.replace("\n", "\r\n"), rows=40, cols=200))  # a tty's ONLCR
    assert "answer before\\x1b[2J\\x1b]0;pwned\\x07\\rover\\x9b31mend\\u202eevil" in text
    ended = next(line for line in text.splitlines() if "ended:" in line)
    assert "RuntimeError" in ended and "\\x1b]0;pwned\\x07" in ended, text


def test_the_approval_question_escapes_the_models_input(tmp_path):
    """The question quotes the call's input (JSON escapes C0 itself; C1 and the bidirectional
    controls it leaves) and the policy's reason: escaped, the call still decided."""
    call = {"blocks": [{"type": "tool_use", "id": "g1", "name": "transcript_grep",
                        "input": {"pattern": f"x{HOSTILE}"}}], "stop_reason": "tool_use"}
    done = {"blocks": [{"type": "text", "text": "All done."}], "stop_reason": "end_turn"}
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps(call) + "\n" + json.dumps(done) + "\n")
    policy = tmp_path / "policy.toml"
    policy.write_text('[[rule]]\ntool = "transcript_*"\naction = "ask"\n')
    root = tmp_path / "run"
    c = spawn("--run-root", str(root), "--script", str(path), "--policy", str(policy))
    out = io.StringIO()
    c.logfile_read = out
    try:
        c.sendline("go")
        c.expect("wants to call")
        c.expect(r"\[e\]dit")
        c.sendline("y")
        c.expect("All done.")
        c.sendline("/quit")
        c.expect(pexpect.EOF)
    finally:
        c.close(force=True)
    raw = out.getvalue()
    for seq in RAW:
        assert seq not in raw, (seq, raw)
    assert "\\u202eevil" in "\n".join(screen_lines(raw))
    verify(root)
