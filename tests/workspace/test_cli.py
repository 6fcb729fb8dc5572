"""The workspace from the command line: ``--workspace DIR`` for ``ask``, ``chat`` and ``serve``,
and ``mnemon workspace AGENT_DIR ls|show|diff|export|patch|log`` over a real run (the real CLI
in a subprocess, the real store, the real ``git apply``)."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mnemon.orchestrator import cli
from mnemon.orchestrator.cli.options import settings_from_args
from mnemon.orchestrator.workspace.spec import WorkspaceSpec

HOSTILE = "red \x1b[31m\x1b]0;pwned\x07 \u202eevil\n"
BINARY = b"\x00\x01\xff\xfe bytes \x1b[2J\n\x00"


def mnemon(*args: str, cwd: Path, input: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mnemon", *args], cwd=cwd, capture_output=True,
                          timeout=120, input=input)


def call(cid: str, name: str, **inp) -> dict:
    return {"blocks": [{"type": "tool_use", "id": cid, "name": name, "input": inp}],
            "stop_reason": "tool_use"}


END = {"blocks": [{"type": "text", "text": "over"}], "stop_reason": "end_turn"}


def one_line(p: subprocess.CompletedProcess) -> str:
    err = p.stderr.decode()
    assert p.returncode == 2, (p.returncode, err)
    assert err.startswith("mnemon: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict:
    """``mnemon ask --workspace work``: turn 2 writes b.txt (hostile bytes), turn 3 edits
    a.txt; work/ also holds a binary file from the start."""
    tmp = tmp_path_factory.mktemp("wscli")
    work = tmp / "work"
    (work / "src").mkdir(parents=True)
    (work / "src" / "a.txt").write_text("hello\nworld\n")
    (work / "blob.bin").write_bytes(BINARY)
    original = tmp / "original"
    shutil.copytree(work, original)
    script = tmp / "s.jsonl"
    script.write_text("".join(json.dumps(t) + "\n" for t in (
        call("w1", "fs_write", path="b.txt", content=HOSTILE),
        call("e1", "fs_edit", path="src/a.txt", old="world", new="there"),
        END)))
    root = tmp / "run"
    p = mnemon("ask", "go", "--script", str(script), "--workspace", "work", "--run-root",
               str(root), "--json", cwd=tmp)
    assert p.returncode == 0, p.stderr.decode()
    assert json.loads(p.stdout)["answer"] == "over"
    return {"tmp": tmp, "work": work, "original": original, "root": root,
            "agent": root / "agents" / "a1"}


def test_ask_works_in_place_and_log_names_each_snapshot(run):
    assert (run["work"] / "b.txt").read_text() == HOSTILE
    assert (run["work"] / "src" / "a.txt").read_text() == "hello\nthere\n"
    p = mnemon("workspace", str(run["agent"]), "log", "--json", cwd=run["tmp"])
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)
    assert [(r["turn"], r["why"]) for r in rows] == [(None, "start"), (2, "tools"),
                                                     (3, "tools")]
    assert rows[0]["dir"] == str(run["work"].resolve())
    assert all(len(r["snapshot"]) == 40 for r in rows) and len({r["snapshot"] for r in rows}) == 3
    text = mnemon("workspace", str(run["agent"]), "log", cwd=run["tmp"]).stdout.decode()
    lines = text.splitlines()
    assert lines[0].startswith(f"-\tstart\t{rows[0]['snapshot']}\tsource dir:")
    assert lines[1:] == [f"2\ttools\t{rows[1]['snapshot']}", f"3\ttools\t{rows[2]['snapshot']}"]


def test_ls_at_each_turn(run):
    def ls(*turn: str) -> list[str]:
        p = mnemon("workspace", str(run["agent"]), *turn, "ls", cwd=run["tmp"])
        assert p.returncode == 0, p.stderr
        return p.stdout.decode().splitlines()

    assert ls("--turn", "1") == [f"blob.bin\t{len(BINARY)}", "src/a.txt\t12"]
    every = [f"b.txt\t{len(HOSTILE.encode())}", f"blob.bin\t{len(BINARY)}", "src/a.txt\t12"]
    assert ls("--turn", "2") == every  # git's order: byte by byte
    assert ls() == ls("--turn", "3") == every
    # --turn after the action means the same
    p = mnemon("workspace", str(run["agent"]), "ls", "--turn", "1", "--json", cwd=run["tmp"])
    assert [(e["path"], e["size"], e["kind"]) for e in json.loads(p.stdout)] == [
        ("blob.bin", len(BINARY), "file"), ("src/a.txt", 12, "file")]


def test_show_is_byte_exact_into_a_pipe(run):
    a = run["agent"]
    assert mnemon("workspace", str(a), "show", "blob.bin", cwd=run["tmp"]).stdout == BINARY
    assert mnemon("workspace", str(a), "show", "b.txt", cwd=run["tmp"]).stdout == \
        HOSTILE.encode()
    assert mnemon("workspace", str(a), "--turn", "2", "show", "src/a.txt",
                  cwd=run["tmp"]).stdout == b"hello\nworld\n"


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_show_and_diff_on_a_terminal_escape_and_refuse_binary(run, monkeypatch, capsys):
    out = Tty()
    monkeypatch.setattr(sys, "stdout", out)
    assert cli.main(["workspace", str(run["agent"]), "show", "b.txt"]) == 0
    text = out.getvalue()
    assert "\\x1b[31m" in text and "\\x07" in text and "\\u202e" in text
    assert not any(c in text for c in ("\x1b", "\x07", "\u202e"))
    out.seek(0)
    out.truncate()
    assert cli.main(["workspace", str(run["agent"]), "diff"]) == 0
    assert "+red \\x1b[31m" in out.getvalue() and "\x1b" not in out.getvalue()
    out.seek(0)
    out.truncate()
    assert cli.main(["workspace", str(run["agent"]), "show", "blob.bin"]) == 2
    assert out.getvalue() == ""
    err = capsys.readouterr().err
    assert err == f"mnemon: blob.bin is binary ({len(BINARY)} bytes): redirect stdout to a " \
                  "file or a pipe for its bytes\n"


def test_patch_and_diff_apply_with_git(run):
    tmp = run["tmp"]
    patch = mnemon("workspace", str(run["agent"]), "patch", cwd=tmp)
    assert patch.returncode == 0, patch.stderr
    assert patch.stdout.startswith(b"diff --git a/b.txt b/b.txt\nnew file mode 100644\n")
    assert b"-world\n+there\n" in patch.stdout and b"blob.bin" not in patch.stdout
    target = tmp / "apply-patch"
    shutil.copytree(run["original"], target)
    subprocess.run(["git", "apply", "-"], cwd=target, input=patch.stdout, check=True)
    assert (target / "b.txt").read_bytes() == HOSTILE.encode()
    assert (target / "src" / "a.txt").read_text() == "hello\nthere\n"
    # diff --from 2 --turn 3: only the edit; applied to the files after turn 2
    d = mnemon("workspace", str(run["agent"]), "--turn", "3", "diff", "--from", "2", cwd=tmp)
    assert d.returncode == 0, d.stderr
    assert b"b.txt" not in d.stdout and b"+there" in d.stdout
    after2 = tmp / "after2"
    assert mnemon("workspace", str(run["agent"]), "--turn", "2", "export", "--to", str(after2),
                  cwd=tmp).returncode == 0
    subprocess.run(["git", "apply", "-"], cwd=after2, input=d.stdout, check=True)
    assert (after2 / "src" / "a.txt").read_text() == "hello\nthere\n"
    # no change between a turn and itself: nothing printed
    same = mnemon("workspace", str(run["agent"]), "diff", "--from", "3", cwd=tmp)
    assert same.returncode == 0 and same.stdout == b""


def test_export_writes_the_files_at_a_turn(run):
    tmp = run["tmp"]
    p = mnemon("workspace", str(run["agent"]), "export", "--to", "exported", cwd=tmp)
    assert p.returncode == 0, p.stderr
    assert p.stderr.decode() == "mnemon: wrote 3 files to exported\n"
    got = {q.relative_to(tmp / "exported").as_posix(): q.read_bytes()
           for q in (tmp / "exported").rglob("*") if q.is_file()}
    assert got == {"blob.bin": BINARY, "b.txt": HOSTILE.encode(), "src/a.txt": b"hello\nthere\n"}
    first = tmp / "first"
    assert mnemon("workspace", str(run["agent"]), "--turn", "1", "export", "--to", str(first),
                  cwd=tmp).returncode == 0
    assert sorted(q.name for q in first.rglob("*") if q.is_file()) == ["a.txt", "blob.bin"]


def test_errors_are_one_line_exit_2(run, tmp_path):
    tmp, a = run["tmp"], str(run["agent"])
    assert "has no turn 9 yet (its last is 4)" in one_line(
        mnemon("workspace", a, "--turn", "9", "ls", cwd=tmp))
    assert "--turn is a turn number" in one_line(
        mnemon("workspace", a, "--turn", "x", "ls", cwd=tmp))
    assert "--turn given twice" in one_line(
        mnemon("workspace", a, "--turn", "1", "ls", "--turn", "2", cwd=tmp))
    assert "nope.txt is not in the workspace" in one_line(
        mnemon("workspace", a, "show", "nope.txt", cwd=tmp))
    assert "is a directory" in one_line(mnemon("workspace", a, "show", "src", cwd=tmp))
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    assert "exists and is not an empty directory" in one_line(
        mnemon("workspace", a, "export", "--to", str(tmp_path / "full"), cwd=tmp))
    assert (tmp_path / "full" / "x").read_text() == "x"
    assert "did not start from a parent's files" in one_line(
        mnemon("workspace", a, "patch", "--against", "parent", cwd=tmp))
    assert "not an agent directory" in one_line(
        mnemon("workspace", str(tmp_path), "ls", cwd=tmp))
    one_line(mnemon("workspace", a, "frobnicate", cwd=tmp))
    # an agent started without a workspace
    root = tmp_path / "plain"
    p = mnemon("ask", "hi", "--run-root", str(root), cwd=tmp)
    assert p.returncode == 0, p.stderr
    assert "has no workspace (it was started without one)" in one_line(
        mnemon("workspace", str(root / "agents" / "a1"), "ls", cwd=tmp))


def test_show_refuses_a_path_outside(run):
    p = mnemon("workspace", str(run["agent"]), "show", "../../etc/passwd", cwd=run["tmp"])
    one_line(p)
    assert p.stdout == b""


def test_a_workspace_that_is_not_a_directory_is_refused_before_anything_is_written(tmp_path):
    (tmp_path / "file").write_text("x")
    for bad, why in (("missing", "does not exist"), ("file", "is not a directory")):
        for cmd in (["ask", "hi"], ["chat"], ["serve", "--port", "0"]):
            root = tmp_path / f"run-{cmd[0]}"
            err = one_line(mnemon(*cmd, "--workspace", bad, "--run-root", str(root),
                                  cwd=tmp_path))
            if "needs the" in err:  # an extra this install lacks: refused before the flag
                continue
            assert err == f"mnemon: --workspace {bad} {why}\n"
            assert not root.exists()


def test_the_flag_is_the_settings_workspace_in_place(tmp_path):
    parser, _ = cli.build_parser(None)
    for words in (["ask", "hi"], ["chat"], ["serve"]):
        args = parser.parse_args([*words, "--workspace", str(tmp_path)])
        assert settings_from_args(args).workspace == WorkspaceSpec(dir=str(tmp_path.resolve()))
        assert settings_from_args(parser.parse_args(words)).workspace is None
