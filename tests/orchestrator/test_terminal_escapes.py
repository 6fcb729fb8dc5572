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
NAME = "tool\x1b[2J\x1b]0;pwned\x07\x9b31m\u202eevil"  # a model's tool name: no space, no \r


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


def test_verify_escapes_the_damage_and_the_path_it_names(tmp_path, capsys):
    """What ``verify`` prints of a problem is the log's own text (msgspec quotes the bad value
    of a damaged line) and a directory's name: both escaped, the problem still named."""
    script = tmp_path / "s.jsonl"
    script.write_text(json.dumps({"blocks": [{"type": "text", "text": "hi"}]}) + "\n")
    root = tmp_path / "run"
    assert cli.main(["ask", "hi", "--script", str(script), "--run-root", str(root)]) == 0
    logs.quiet()
    with (root / "agents" / "a1" / "record.jsonl").open("a") as f:
        f.write(json.dumps({"t": HOSTILE}) + "\n")  # damage: a record of no known type
    odd = root / "agents" / f"b{HOSTILE}"
    odd.mkdir()
    (odd / "record.jsonl").symlink_to(tmp_path / "nowhere")  # not a regular file
    out = _out(capsys, ["verify", str(root)])
    _clean(out)
    lines = out.splitlines()
    assert len(lines) == 3, out  # the damage is also a line the log's chain did not write
    assert any(x.startswith("agents/a1/record.jsonl:7: the chain breaks here (inserted)")
               for x in lines)
    assert any(f"agents/b{shown(HOSTILE)}/record.jsonl:0: not a regular file" in x for x in lines)
    assert any(x.startswith("agents/a1/record.jsonl:") and "not a record" in x
               and shown(HOSTILE) in x for x in lines)
    report = json.loads(_out(capsys, ["verify", str(root), "--json"]))
    assert any(HOSTILE in p["error"] for p in report["problems"])  # --json: the text, whole


def _on_a_pty(argv: list[str]) -> str:
    """What ``python -m mnemon ARGV`` writes to stdout when stdout is a terminal (a pty, in raw
    mode: no ``\\n`` to ``\\r\\n``, so what is read is what the command wrote)."""
    import os
    import pty
    import subprocess
    import sys
    import tty

    master, slave = pty.openpty()
    tty.setraw(slave)
    proc = subprocess.Popen([sys.executable, "-m", "mnemon", *argv], stdout=slave,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the writer is gone
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert proc.wait(timeout=60) == 0, proc.stderr.read()
    proc.stderr.close()
    return out.decode("utf-8")


@pytest.mark.skipif(__import__("sys").platform == "win32", reason="a POSIX pseudo-terminal")
def test_results_csv_is_escaped_on_a_terminal_and_raw_into_a_pipe(tmp_path):
    import subprocess
    import sys

    (tmp_path / "s.jsonl").write_text(json.dumps({"blocks": [{"type": "text",
                                                              "text": HOSTILE}]}) + "\n")
    job = tmp_path / "job.toml"
    job.write_text('[provider]\nname = "scripted"\nscript = "s.jsonl"\n\n'
                   '[[tasks]]\nid = "t"\nprompt = "say it"\n')
    root = tmp_path / "run"
    assert cli.main(["run", str(job), "--run-root", str(root), "--json"]) == 0
    logs.quiet()
    argv = ["results", str(root), "--format", "csv"]
    seen = _on_a_pty(argv)
    _clean(seen)
    assert seen.startswith("task,status,agent,answer\n") and shown(HOSTILE) in seen
    piped = subprocess.run([sys.executable, "-m", "mnemon", *argv], capture_output=True,
                           timeout=60)
    assert piped.returncode == 0, piped.stderr
    assert HOSTILE.encode() in piped.stdout  # a program reading the CSV gets the model's bytes


def _damaged(tmp_path: Path) -> Path:
    """An ``ask`` run whose log ends in a line of no known record type, the type the hostile
    text (msgspec's message for it quotes the value)."""
    script = tmp_path / "s.jsonl"
    script.write_text(json.dumps({"blocks": [{"type": "text", "text": "hi"}]}) + "\n")
    root = tmp_path / "run"
    assert cli.main(["ask", "hi", "--script", str(script), "--run-root", str(root)]) == 0
    logs.quiet()
    with (root / "agents" / "a1" / "record.jsonl").open("a") as f:
        f.write(json.dumps({"t": HOSTILE}) + "\n")
    return root


@pytest.mark.parametrize("argv,code", [
    (["context", "{a}"], 1),  # a Failure
    (["transcript", "read", "{a}", "--turns", "0-3"], 1),
    (["chat", "--resume", "{a}"], 2),  # a SessionError (the log refused before the chat opens)
    (["trace", "{r}", "--json"], 2),  # a UserError
], ids=lambda a: " ".join(a[:2]) if isinstance(a, list) else str(a))
def test_a_diagnostic_quoting_a_log_is_escaped_wherever_stderr_goes(tmp_path, capsys, argv,
                                                                     code):
    """``mnemon: …`` lines are for a person: escaped always, a pipe's too."""
    root = _damaged(tmp_path)
    capsys.readouterr()
    argv = [x.format(a=root / "agents" / "a1", r=root) for x in argv]
    assert cli.main(argv) == code
    logs.quiet()
    err = capsys.readouterr().err
    assert err.startswith("mnemon: ") and "agents/a1/record.jsonl:" in err
    _clean(err)
    assert shown(HOSTILE) in err and err.count("\n") == 1


def test_verbose_log_lines_on_a_terminal_are_escaped(tmp_path, monkeypatch):
    """``-v`` on a terminal renders each event for a person (``mnemon serve``'s, ``run``'s):
    a field holding a model's text is escaped; the log file keeps it whole."""
    import structlog

    tty = Tty()
    monkeypatch.setattr("sys.stderr", tty)
    logs.configure(tmp_path, verbose=True)
    try:
        # structlog's renderer quotes a value with a space or a ``\r`` (repr): not this one
        structlog.get_logger().warning("unknown tool", tool=NAME)
        logs.flush()
    finally:
        logs.quiet()
    _clean(tty.getvalue())
    assert "unknown tool" in tty.getvalue() and shown(NAME) in tty.getvalue()
    line = json.loads((tmp_path / "mnemon.log").read_text().splitlines()[-1])
    assert line["tool"] == NAME
