"""The scripted provider is deterministic across restarts: a resumed agent continues its script
at the answers its log records, never from the top (which repeated calls it had made)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import trio

from mnemon.orchestrator import logs
from mnemon.orchestrator.settings import Settings
from mnemon.orchestrator.supervisor import open_supervisor
from mnemon.orchestrator.usertools import UserTool
from mnemon.providers.base import Request
from mnemon.providers.scripted import ScriptedProvider
from mnemon.session.records import Text

REPO = Path(__file__).resolve().parents[2]


def _note(n: int, text: str) -> dict:
    return {"blocks": [{"type": "tool_use", "id": f"n{n}", "name": "note",
                        "input": {"text": text}}], "stop_reason": "tool_use"}


SCRIPT = [_note(1, "one"), _note(2, "two"), _note(3, "three"),
          {"blocks": [{"type": "text", "text": "done"}], "stop_reason": "end_turn"}]

# the first process: its note tool kills the process (SIGKILL) while it takes note "two"
FIRST = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    import trio
    from mnemon.orchestrator.settings import Settings
    from mnemon.orchestrator.supervisor import open_supervisor
    from mnemon.orchestrator.usertools import UserTool
    from mnemon.providers.scripted import ScriptedProvider

    root, calls, script = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]

    def note(text: str) -> str:
        \"\"\"Take a note.\"\"\"
        with calls.open("a") as f:
            f.write(text + "\\n")
        if text == "two":
            os.kill(os.getpid(), signal.SIGKILL)
        return "noted"

    async def main():
        async with open_supervisor(root, ScriptedProvider(script), Settings(model="scripted"),
                                   user_tools=[UserTool(note)]) as sup:
            await sup.ask("take notes")

    trio.run(main)
""")


def test_a_script_resumed_after_a_kill_goes_on_where_its_log_stands(tmp_path):
    root, calls, script = tmp_path / "run", tmp_path / "calls.txt", tmp_path / "script.jsonl"
    script.write_text("".join(json.dumps(x) + "\n" for x in SCRIPT))
    proc = subprocess.run([sys.executable, "-c", FIRST, str(root), str(calls), str(script)],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == -9, proc.stderr
    assert calls.read_text().split() == ["one", "two"]

    def note(text: str) -> str:
        """Take a note."""
        with calls.open("a") as f:
            f.write(text + "\n")
        return "noted"

    async def again():
        logs.quiet()
        async with open_supervisor(root, ScriptedProvider(str(script)),
                                   Settings(model="scripted"),
                                   user_tools=[UserTool(note)]) as sup:
            (node,) = sup.resume_run()
            assert node.requests == 2  # two answers recorded before the kill
            await sup.run(node)
        return node

    node = trio.run(again)
    logs.quiet()
    # "two" was cut by the kill (it may have run: not run again); the script goes on at
    # its third line — not "one" and "two" again
    assert calls.read_text().split() == ["one", "two", "three"]
    assert (node.reason, node.answer) == ("done", "done")
    recs = [json.loads(x) for x in (root / "agents" / "a1" / "record.jsonl").read_text()
            .splitlines()]
    ids = [b["id"] for r in recs if r["t"] == "AssistantMessage" for b in r["blocks"]
           if b["type"] == "tool_use"]
    assert ids == ["n1", "n2", "n3"]
    check = subprocess.run([sys.executable, "-m", "mnemon", "verify", str(root)],
                           capture_output=True, text=True, timeout=120, cwd=REPO)
    assert check.returncode == 0, check.stdout + check.stderr


async def test_the_cursor_follows_the_recorded_count_per_agent():
    """Lines for one agent are skipped by another; a count from the log places the cursor
    after that many of the agent's own lines, in a provider that has played nothing."""
    script = [{"agent": "a1", "blocks": [{"type": "text", "text": "a1 first"}]},
              {"agent": "a2", "blocks": [{"type": "text", "text": "a2 first"}]},
              {"blocks": [{"type": "text", "text": "anyone's"}]},
              {"agent": "a2", "blocks": [{"type": "text", "text": "a2 last"}]}]

    def req(agent: str, done: int | None) -> Request:
        meta = {"agent": agent} if done is None else {"agent": agent, "requests": done}
        return Request(system="s", messages=[{"role": "user", "content": [
            {"type": "text", "text": "go"}]}], meta=meta)

    p = ScriptedProvider(script)
    assert (await p.complete(req("a2", 2))).blocks == [Text("a2 last")]
    q = ScriptedProvider(script)
    assert (await q.complete(req("a2", 1))).blocks == [Text("anyone's")]
    assert (await q.complete(req("a2", 2))).blocks == [Text("a2 last")]
    r = ScriptedProvider(script)  # no count: this process's own cursor, as before
    assert [(await r.complete(req("a1", None))).blocks for _ in range(2)] == [
        [Text("a1 first")], [Text("anyone's")]]
