"""Text from models never reaches a terminal raw: every command that prints transcript text
escapes the characters that drive a terminal (ESC and the CSI/OSC sequences it opens, C1's CSI,
BEL, ``\\r``, bidirectional overrides), as ``transcript index`` does; ``--json`` is untouched;
``ask``'s answer is escaped on a terminal and written as it came into a pipe."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from mnemon.orchestrator import cli, logs
from mnemon.orchestrator.terminal import for_stream, shown

# clear screen (CSI), set the title (OSC … BEL), overwrite the line, C1 CSI, a bidi override
HOSTILE = "before\x1b[2J\x1b]0;pwned\x07\rover\x9b31mend\u202eevil"
RAW = ("\x1b", "\x07", "\r", "\x9b", "\u202e")


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def _clean(out: str) -> None:
    for ch in RAW:
        assert ch not in out, (ch, out)


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """A run whose one agent answered the hostile text, and called a tool with it."""
    tmp = tmp_path_factory.mktemp("hostile")
    script = tmp / "script.jsonl"
    script.write_text("\n".join(json.dumps(t) for t in [
        {"blocks": [{"type": "tool_use", "id": "c1", "name": "transcript_index",
                     "input": {"turns": HOSTILE}}]},
        {"blocks": [{"type": "text", "text": HOSTILE}]}]) + "\n")
    root = tmp / "run"
    assert cli.main(["ask", f"say {HOSTILE}", "--script", str(script), "--run-root",
                     str(root)]) == 0
    logs.quiet()
    log = root / "agents" / "a1" / "record.jsonl"
    lines = log.read_text().splitlines()
    first = json.loads(lines[0])
    first["role"] = HOSTILE  # what the tree shows of an agent's opening record
    log.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    return root


def _out(capsys, argv: list[str]) -> str:
    capsys.readouterr()
    code = cli.main(argv)
    logs.quiet()
    assert code in (0, 1)
    return capsys.readouterr().out


@pytest.mark.parametrize("argv", [
    ["transcript", "read", "{a}", "--turns", "0-9"],
    ["transcript", "grep", "{a}", "before"],
    ["transcript", "index", "{a}"],
    ["context", "{a}", "--rendered"],
    ["tree", "{r}"],
], ids=lambda a: " ".join(a[:2]))
def test_a_view_of_the_transcript_escapes_what_drives_a_terminal(run, capsys, argv):
    argv = [x.format(a=run / "agents" / "a1", r=run) for x in argv]
    out = _out(capsys, argv)
    _clean(out)
    assert ("\\x1b[2J" in out or "\\u001b[2J" in out) and "\\x9b" in out  # shown, not dropped


@pytest.mark.parametrize("argv", [
    ["transcript", "read", "{a}", "--turns", "0-9", "--json"],
    ["transcript", "grep", "{a}", "before", "--json"],
    ["context", "{a}", "--rendered", "--json"],
], ids=lambda a: " ".join(a[:2]))
def test_json_is_left_as_it_was(run, capsys, argv):
    argv = [x.format(a=run / "agents" / "a1", r=run) for x in argv]
    out = _out(capsys, argv)
    assert json.dumps(HOSTILE)[1:-1] in json.dumps(json.loads(out))  # the text, whole


def test_ask_escapes_its_answer_on_a_terminal_and_not_into_a_pipe(tmp_path, monkeypatch,
                                                                  capsys):
    script = tmp_path / "s.jsonl"
    script.write_text(json.dumps({"blocks": [{"type": "text", "text": HOSTILE}]}) + "\n")
    tty = Tty()
    monkeypatch.setattr("sys.stdout", tty)
    assert cli.main(["ask", "hi", "--script", str(script), "--run-root",
                     str(tmp_path / "r1")]) == 0
    logs.quiet()
    _clean(tty.getvalue())
    assert shown(HOSTILE) in tty.getvalue()
    monkeypatch.undo()
    capsys.readouterr()
    assert cli.main(["ask", "hi", "--script", str(script), "--run-root",
                     str(tmp_path / "r2")]) == 0
    logs.quiet()
    assert HOSTILE in capsys.readouterr().out  # piped: the model's own bytes


def test_a_failure_quoting_the_model_is_escaped_on_stderr(tmp_path, capsys):
    script = tmp_path / "s.jsonl"
    script.write_text(json.dumps({"blocks": [{"type": "text",
                                              "text": json.dumps({"code": HOSTILE})}]}) + "\n")
    schema = tmp_path / "out.json"
    schema.write_text(json.dumps({"type": "object", "properties": {"code": {"type": "integer"}},
                                  "required": ["code"]}))
    code = cli.main(["ask", "hi", "--script", str(script), "--run-root", str(tmp_path / "r"),
                     "--output", str(schema), "--output-retries", "0"])
    logs.quiet()
    err = capsys.readouterr().err
    assert code == 1 and "failed: output" in err
    _clean(err)


@given(st.text())
def test_shown_leaves_no_terminal_control_and_keeps_printable_text(text):
    out = shown(text)
    assert not any(ch in out for ch in RAW) and "\x1b" not in out
    assert all(c.isprintable() or c in "\n\t" or ord(c) > 0xffff or
               not (ord(c) < 0xa0 or 0x2000 <= ord(c) < 0x2070) for c in out)
    if text.isprintable():
        assert out == text  # the common case untouched
    assert for_stream(text, io.StringIO()) == text and for_stream(text, Tty()) == out
