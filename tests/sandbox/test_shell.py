"""The ``shell`` tool: its input, its answer, its workspace (a fake standing for the
workspace's interface: ``directory()``, ``touched_all()``, ``run_root``), and its refusals as the
model reads them through a real agent's tool table."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mnemon.orchestrator.sandbox import SandboxSettings
from mnemon.orchestrator.settings import Settings
from mnemon.orchestrator.supervisor import open_supervisor
from mnemon.orchestrator.tools.base import ToolError, ToolInputError, is_tool
from mnemon.orchestrator.tools.shell import Shell
from mnemon.providers.scripted import ScriptedProvider
from mnemon.session.records import Text, ToolUse

from .conftest import needs_bwrap


class FakeWorkspace:
    """The workspace as the shell sees it: a directory made on demand, told after each
    command that anything may have changed."""

    def __init__(self, path: Path, run_root: Path):
        self.path, self.run_root = path, run_root
        self.touched = 0

    async def directory(self) -> Path:
        self.path.mkdir(parents=True, exist_ok=True)
        return self.path

    def touched_all(self) -> None:
        self.touched += 1


class FakeContext:
    def __init__(self, workspace: FakeWorkspace | None, sandbox: SandboxSettings | None = None):
        self.workspace = workspace
        self.settings = Settings(sandbox=sandbox)


@pytest.fixture
def ws(tmp_path) -> FakeWorkspace:
    return FakeWorkspace(tmp_path / "run" / "agents" / "a1" / "workspace", tmp_path / "run")


def test_the_tool_says_what_it_is():
    t = Shell()
    assert is_tool(t) and t.name == "shell" and t.mode == "exclusive"
    d = t.definition
    assert d.name == "shell" and d.input_schema["required"] == ["command"]
    assert set(d.input_schema["properties"]) == {"command", "timeout_s"}


@needs_bwrap
async def test_a_command_answers_status_time_and_output(ws):
    text = await Shell().call(FakeContext(ws), {"command": "echo out; echo err >&2; exit 3"})
    assert re.fullmatch(r"exit 3 · \d+\.\d\d s\nout\nerr\n", text), text
    assert ws.touched == 1
    text = await Shell().call(FakeContext(ws), {"command": "printf 'x' > made.txt"})
    assert text.endswith("\n(no output)") and (ws.path / "made.txt").read_text() == "x"
    assert ws.touched == 2


@needs_bwrap
async def test_a_timeout_is_said_and_the_cap_holds(ws):
    ctx = FakeContext(ws, SandboxSettings(timeout_s=0.5, max_timeout_s=1))
    text = await Shell().call(ctx, {"command": "echo begun; sleep 30"})
    assert re.match(r"killed by signal 9 · 0\.\d\d s · stopped by: timeout \(0\.5 s\)\nbegun\n$",
                    text), text
    text = await Shell().call(ctx, {"command": "true", "timeout_s": 600})
    assert "note: timeout_s 600 is above this sandbox's cap; 1 s used" in text
    assert ws.touched == 2


@needs_bwrap
async def test_long_output_says_its_total(ws):
    ctx = FakeContext(ws, SandboxSettings(output_bytes=1024))
    text = await Shell().call(ctx, {"command": "seq 1 100000"})
    lines = text.splitlines()
    assert lines[1] == "output: 588895 bytes in all; its head and tail follow"
    assert lines[2] == "1" and lines[-1] == "100000" and "bytes omitted of 588895" in text


async def test_unsandboxed_is_said_in_every_answer(ws):
    text = await Shell().call(FakeContext(ws, SandboxSettings(kind="none")), {"command": "pwd"})
    assert text.splitlines()[0].endswith(" · unsandboxed (kind none)")
    assert text.splitlines()[-1] == str(ws.path)


async def test_without_a_workspace_the_tool_refuses(ws):
    with pytest.raises(ToolError) as e:
        await Shell().call(FakeContext(None), {"command": "ls"})
    assert str(e.value) == "this agent has no workspace (start it with --workspace DIR)"


async def test_without_bubblewrap_nothing_runs_and_the_workspace_is_still_told(ws, monkeypatch):
    monkeypatch.setenv("MNEMON_BWRAP", "/no/such/bwrap")
    with pytest.raises(ToolError, match="^MNEMON_BWRAP='/no/such/bwrap' is not an executable"):
        await Shell().call(FakeContext(ws), {"command": "touch ran"})
    assert not (ws.path / "ran").exists() and ws.touched == 1


@pytest.mark.parametrize("input, said", [
    ({}, "shell needs 'command', a non-empty string"),
    ({"command": "  "}, "shell needs 'command', a non-empty string"),
    ({"command": ["ls"]}, "shell needs 'command', a non-empty string"),
    ({"command": "ls", "cwd": "/"}, "shell: unknown argument 'cwd'"),
    ({"command": "ls\x00rm"}, "shell: 'command' cannot hold a NUL character"),
    ({"command": "x" * 100_001}, "shell: 'command' is 100001 characters; at most 100000"),
    ({"command": "ls", "timeout_s": 0}, "shell: 'timeout_s' must be a positive number"),
    ({"command": "ls", "timeout_s": True}, "shell: 'timeout_s' must be a positive number"),
    ({"command": "ls", "timeout_s": "9"}, "shell: 'timeout_s' must be a positive number"),
    ("ls", "shell takes a JSON object"),
])
async def test_input_that_does_not_fit_is_refused_before_anything_runs(ws, input, said):
    with pytest.raises(ToolInputError) as e:
        await Shell().call(FakeContext(ws), input)
    assert str(e.value).startswith(said) and ws.touched == 0


async def test_through_an_agents_table_the_refusal_is_the_models_answer(tmp_path):
    """Offered to an agent that has no workspace, the call answers an error result with the
    refusal's words; the agent goes on."""
    def policy(request, state):
        if not state.get("called"):
            state["called"] = True
            return [ToolUse("c1", "shell", {"command": "ls"})], "tool_use"
        return [Text("done")], "end_turn"

    root = tmp_path / "run"
    async with open_supervisor(root, ScriptedProvider(policy=policy), Settings(model="scripted"),
                               user_tools=[Shell()]) as sup:
        node = await sup.ask("list the files")
    assert node.answer == "done"
    lines = (root / "agents" / "a1" / "record.jsonl").read_text().splitlines()
    results = [x for r in map(json.loads, lines) if r["t"] == "ToolResults" for x in r["results"]]
    assert len(results) == 1 and results[0]["is_error"]
    assert "this agent has no workspace (start it with --workspace DIR)" in json.dumps(results[0])


def test_a_bound_the_machine_cannot_hold_is_said():
    """No cgroup (a machine where none can be made): every answer says what is not held."""
    from mnemon.orchestrator.sandbox import ShellOutcome
    from mnemon.orchestrator.tools.shell import answer

    o = ShellOutcome(kind="bwrap", exit_code=0, signal=None, output="hi\n", total_bytes=3,
                     truncated=False, seconds=0.02, timed_out=False, timeout_s=120.0,
                     unbounded=("processes", "memory"))
    assert answer(o) == ("exit 0 · 0.02 s\nnote: no cgroup on this machine (docs/sandbox.md): "
                         "processes not bounded, memory bounded per process only\nhi\n")
