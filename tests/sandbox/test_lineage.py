"""The shell in the run's lineage, through a real supervisor on the scripted model, each command
under the real bubblewrap (docs/sandbox.md, docs/workspace.md):

- what a command changes is the turn's snapshot: the view lists it, rewind takes it away, a
  child forked after it sees it in its own shell, and ``workspace_apply`` merges a child's
  commands' changes into its parent's files — the user's own directory, worked in place and
  mounted at ``/workspace``;
- children only narrow: a role's ``sandbox = {network = true}`` under a parent without the
  network runs with it off; a resumed agent whose log says ``network = false`` does not get
  it from the new settings;
- ``mnemon tree`` marks ``kind = "none"`` and names the sandbox of every agent with a
  workspace."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from mnemon.orchestrator.sandbox import SandboxSettings
from mnemon.orchestrator.settings import Settings
from mnemon.orchestrator.supervisor import open_supervisor
from mnemon.orchestrator.workspace.spec import WorkspaceSpec
from mnemon.orchestrator.workspace.view import view_of_agent
from mnemon.providers.cache import CacheModel
from mnemon.providers.scripted import ScriptedProvider

from ..workspace.helpers import by_task, records, results, snapshots
from .conftest import needs_bwrap

pytestmark = [pytest.mark.trio, needs_bwrap]

WRITE = "pwd; echo hi > a.txt; mkdir d; touch d/x"


def provider(scripts) -> ScriptedProvider:
    return ScriptedProvider(policy=by_task(scripts), cache_model=CacheModel())


def shell(command: str) -> list[tuple[str, dict]]:
    return [("shell", {"command": command})]


def outputs(root: Path, agent: str) -> list[str]:
    """Each shell answer of the agent, in order."""
    return [r["content"] for r in results(root, agent)
            if isinstance(r["content"], str) and r["content"].startswith(("exit ", "killed "))]


def paths(root: Path, agent: str, turn: int | None = None) -> set[str]:
    return {e.path for e in view_of_agent(root, agent).ls(turn) if e.kind != "dir"}


async def test_a_commands_changes_are_the_turns_snapshot_and_rewind_takes_them_away(tmp_path):
    work = tmp_path / "work"  # the user's own directory, worked in place
    work.mkdir()
    (work / "kept.txt").write_text("mine\n")
    root = tmp_path / "run"
    scripts = {"a1": [shell(WRITE), shell("echo two > b.txt; rm kept.txt"), shell("ls")]}
    async with open_supervisor(root, provider(scripts),
                               Settings(model="scripted",
                                        workspace=WorkspaceSpec(dir=str(work)))) as sup:
        node = await sup.ask("go")
        assert node.reason == "done"
        out = outputs(root, "a1")
        assert out[0].startswith("exit 0") and "unsandboxed" not in out[0]
        assert out[0].split("\n")[1] == "/workspace"  # under bubblewrap, in the user's dir
        assert (work / "a.txt").read_text() == "hi\n" and (work / "d" / "x").exists()
        assert out[2].splitlines()[1:] == ["a.txt", "b.txt", "d"]

        changed = [s for s in snapshots(root) if s.get("why") is None]
        assert len(changed) == 2  # the two commands that changed files; `ls` changed none
        t1, t2 = changed[0]["turn"], changed[1]["turn"]
        assert paths(root, "a1", 0) == {"kept.txt"}
        assert paths(root, "a1", t1) == {"kept.txt", "a.txt", "d/x"}
        assert paths(root, "a1", t2) == {"a.txt", "b.txt", "d/x"}
        view = view_of_agent(root, "a1")
        assert view.show("a.txt", t1) == b"hi\n"
        assert view.changes()[0]["files"] == [
            {"status": "A", "path": "a.txt"}, {"status": "A", "path": "d/x"}]

        sup.rewind(node.id, t1)
        assert (work / "kept.txt").read_text() == "mine\n" and not (work / "b.txt").exists()
        assert (work / "a.txt").read_text() == "hi\n"
        sup.rewind(node.id, 0)  # before any command: what the user's directory held
        assert sorted(p.name for p in work.iterdir()) == ["kept.txt"]
    assert [(s.get("why"), s.get("turn")) for s in snapshots(root)][-2:] == [
        ("rewind", t1), ("rewind", 0)]


async def test_a_fork_sees_a_commands_files_and_a_childs_commands_merge_into_the_parent(
        tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    root = tmp_path / "run"
    scripts = {
        "a1": [shell(WRITE),
               [("agents_start", {"task": "builder: build on it", "kind": "mnemon"})],
               [("agents_wait", {})],
               lambda request: [("workspace_apply", {"agents": [sorted(sup.agents)[1]]})]],
        "builder": [shell("cat a.txt; ls d; echo built > d/out.txt; rm a.txt")],
    }
    async with open_supervisor(root, provider(scripts),
                               Settings(model="scripted",
                                        workspace=WorkspaceSpec(dir=str(work)))) as sup:
        node = await sup.ask("go")
    assert node.reason == "done"
    child = sorted(sup.agents)[1]
    seen = outputs(root, child)[0]
    assert seen.splitlines()[1:] == ["hi", "x"], seen  # the parent's files as of the fork
    assert paths(root, child) == {"d/x", "d/out.txt"}  # its own snapshot: its command's change
    applied = results(root)[-1]["content"]
    assert applied.startswith(f"applied {child}: 2 file(s) changed"), applied
    assert snapshots(root)[-1]["why"] == "merge"
    # merged into the parent's — the user's directory itself
    assert (work / "d" / "out.txt").read_text() == "built\n" and not (work / "a.txt").exists()
    assert paths(root, "a1") == {"d/x", "d/out.txt"}


# ------------------------------------------------------------------ children only narrow


class Loopback:
    """A TCP server on 127.0.0.1 that keeps what each connection sends."""

    def __init__(self) -> None:
        self.heard: list[bytes] = []

    async def serve(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        listener = trio.socket.socket()
        await listener.bind(("127.0.0.1", 0))
        listener.listen()
        self.port = listener.getsockname()[1]
        task_status.started()
        with listener:
            while True:
                conn, _ = await listener.accept()
                with conn:
                    self.heard.append(await conn.recv(100))

    def reach(self, word: str) -> str:
        return (f"exec 3<>/dev/tcp/127.0.0.1/{self.port} 2>/dev/null && echo {word} >&3 && "
                "echo CONNECTED || echo UNREACHABLE")


ROLES = {"lead": {"description": "leads", "may_start": ["fetcher"]},
         "fetcher": {"description": "fetches", "sandbox": {"network": True}}}


async def test_a_role_cannot_turn_on_the_network_its_parent_runs_without(tmp_path):
    server = Loopback()
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        got = {}
        for parent_net in (False, True):
            work = tmp_path / f"work-{parent_net}"
            work.mkdir()
            root = tmp_path / f"run-{parent_net}"
            word = f"parent-net-{parent_net}"
            scripts = {"a1": [[("agents_start", {"task": "fetcher: fetch it", "role": "fetcher",
                                                 "kind": "fresh"})], [("agents_wait", {})]],
                       "fetcher": [shell(server.reach(word))]}
            settings = Settings(model="scripted", workspace=WorkspaceSpec(dir=str(work)),
                                sandbox=SandboxSettings(network=parent_net))
            async with open_supervisor(root, provider(scripts), settings, roles=ROLES,
                                       role="lead") as sup:
                await sup.ask("go")
            child = sorted(sup.agents)[1]
            assert records(root, child)[0]["role"] == "fetcher"
            got[parent_net] = (records(root, child)[0]["sandbox"]["network"],
                               outputs(root, child)[0])
        nursery.cancel_scope.cancel()
    # the same role: with the network where its parent has it, without it where not
    assert got[True][0] is True and "CONNECTED" in got[True][1]
    assert got[False][0] is False and "UNREACHABLE" in got[False][1], got[False]
    assert server.heard == [b"parent-net-True\n"]


async def test_a_resumed_agent_keeps_the_network_off_its_log_names(tmp_path):
    server = Loopback()
    work = tmp_path / "work"
    work.mkdir()
    root = tmp_path / "run"
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        first = {"a1": [shell("echo one > one.txt")]}
        async with open_supervisor(root, provider(first), Settings(
                model="scripted", workspace=WorkspaceSpec(dir=str(work)))) as sup:
            await sup.ask("go")
        assert records(root)[0]["sandbox"]["network"] is False
        # the run reopened with the network on: the old agent keeps it off, a new one has it
        again = {"a1": [shell(server.reach("resumed"))], "a2": [shell(server.reach("new"))]}
        async with open_supervisor(root, provider(again), Settings(
                model="scripted", workspace=WorkspaceSpec(dir=str(work)),
                sandbox=SandboxSettings(network=True))) as sup:
            node = sup.resume_agent("a1")
            assert node.settings.sandbox.network is False
            node.log.prompt("once more")
            await sup.run(node)
            other = tmp_path / "other"
            other.mkdir()
            await sup.run(sup.new_root("go", "a2", settings=Settings(
                model="scripted", workspace=WorkspaceSpec(dir=str(other)),
                sandbox=SandboxSettings(network=True))))
        nursery.cancel_scope.cancel()
    assert "UNREACHABLE" in outputs(root, "a1")[-1]
    assert "CONNECTED" in outputs(root, "a2")[0]
    assert server.heard == [b"new\n"]


# ------------------------------------------------------------------ the tree


ROLES_NONE = {"lead": {"description": "leads", "may_start": ["careful"]},
              "careful": {"description": "confined", "sandbox": {"kind": "bwrap"}}}


async def test_the_tree_marks_an_unsandboxed_shell_and_names_every_agents_sandbox(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    root = tmp_path / "run"
    scripts = {"a1": [shell("pwd"),
                      [("agents_start", {"task": "careful: look", "role": "careful",
                                         "kind": "fresh"})],
                      [("agents_wait", {})]],
               "careful": [shell("pwd")]}
    settings = Settings(model="scripted", workspace=WorkspaceSpec(dir=str(work)),
                        sandbox=SandboxSettings(kind="none"))
    async with open_supervisor(root, provider(scripts), settings, roles=ROLES_NONE,
                               role="lead") as sup:
        await sup.ask("go")
    # a bare agent beside them: no workspace, no shell, nothing said of a sandbox
    async with open_supervisor(root, provider({}), Settings(model="scripted")) as sup:
        await sup.ask("hello", agent_id="a9")
    loose, tight = outputs(root, "a1")[0], outputs(root, "a2")[0]
    assert "unsandboxed (kind none)" in loose and str(work.resolve()) in loose
    assert "unsandboxed" not in tight and tight.split("\n")[1] == "/workspace"

    text = subprocess.run([sys.executable, "-m", "mnemon", "tree", str(root)],
                          capture_output=True, text=True, timeout=120)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0].startswith("a1 [root, lead") and lines[0].endswith(
        ' - ended · ⚠ unsandboxed shell (sandbox kind = "none")'), lines
    assert lines[1].startswith("`-- a2 [fresh, careful") and lines[1].endswith(
        " - ended · shell: bwrap"), lines
    assert lines[2].startswith("a9 [root") and lines[2].endswith(" - ended"), lines
    js = subprocess.run([sys.executable, "-m", "mnemon", "tree", str(root), "--json"],
                        capture_output=True, text=True, timeout=120)
    got = {n["agent"]: n for n in json.loads(js.stdout)}
    assert got["a1"]["sandbox"]["kind"] == "none" and got["a2"]["sandbox"]["kind"] == "bwrap"
    assert "sandbox" not in got["a9"]


async def test_a_resumed_agent_of_a_role_keeps_the_network_off_its_log_names(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    root = tmp_path / "run"
    roles = {"lead": {"description": "leads"}}
    async with open_supervisor(root, provider({"a1": [shell("true")]}), Settings(
            model="scripted", workspace=WorkspaceSpec(dir=str(work))),
            roles=roles, role="lead") as sup:
        await sup.ask("go")
    assert records(root)[0]["sandbox"]["network"] is False
    async with open_supervisor(root, provider({}), Settings(
            model="scripted", workspace=WorkspaceSpec(dir=str(work)),
            sandbox=SandboxSettings(network=True)), roles=roles, role="lead") as sup:
        node = sup.resume_agent("a1")
        assert node.settings.sandbox.network is False
