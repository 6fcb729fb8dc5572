"""``--sandbox KIND`` from the real command line (a subprocess, the scripted provider, the real
bubblewrap): ``mnemon ask`` runs the shell as the flag says, says so on stderr when the shell is
unsandboxed and not otherwise, and records it where ``mnemon tree`` reads it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from .conftest import needs_bwrap

NOTE = ("mnemon: ⚠ unsandboxed shell (--sandbox none): commands run directly on this machine, "
        "trusting the model with it (docs/sandbox.md)\n")


def mnemon(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mnemon", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


@needs_bwrap
def test_ask_runs_the_shell_as_the_flag_says_and_warns_of_kind_none(tmp_path):
    script = tmp_path / "s.jsonl"
    script.write_text("".join(json.dumps(t) + "\n" for t in (
        {"blocks": [{"type": "tool_use", "id": "c1", "name": "shell",
                     "input": {"command": "pwd"}}], "stop_reason": "tool_use"},
        {"blocks": [{"type": "text", "text": "over"}], "stop_reason": "end_turn"})))
    (tmp_path / "work").mkdir()
    got = {}
    for kind in ("none", "bwrap", None):
        root = tmp_path / f"run-{kind}"
        p = mnemon("ask", "go", "--script", str(script), "--workspace", "work", "--run-root",
                   str(root), *(["--sandbox", kind] if kind else []), cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        opening = json.loads((root / "agents" / "a1" / "record.jsonl").read_text()
                             .splitlines()[0])
        results = [json.loads(line) for line in (root / "agents" / "a1" / "record.jsonl")
                   .read_text().splitlines() if '"ToolResults"' in line]
        tree = mnemon("tree", str(root), cwd=tmp_path).stdout
        got[kind] = (p.stderr, opening["sandbox"]["kind"],
                     results[0]["results"][0]["content"], tree)
    err, kind, out, tree = got["none"]
    assert err.startswith(NOTE) and kind == "none"
    assert "unsandboxed (kind none)" in out and str((tmp_path / "work").resolve()) in out
    assert tree.rstrip().endswith('⚠ unsandboxed shell (sandbox kind = "none")')
    for k in ("bwrap", None):  # the default is bubblewrap, and quiet
        err, kind, out, tree = got[k]
        assert "unsandboxed" not in err and kind == "bwrap"
        assert out.splitlines()[1] == "/workspace" and tree.rstrip().endswith("· shell: bwrap")
