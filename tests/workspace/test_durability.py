"""What a crash, a race or any sequence of edits cannot do to a workspace: real processes
killed with SIGKILL, a real symlink swapped under a writer, generated edit sequences rewound."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mnemon.orchestrator.workspace import confine
from mnemon.orchestrator.workspace.life import open_root
from mnemon.orchestrator.workspace.spec import WorkspaceSpec

from .helpers import records, snapshots

REPO = Path(__file__).resolve().parents[2]


def tree(d: Path) -> dict[str, bytes]:
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*"))
            if p.is_file()}


def test_an_atomic_write_killed_leaves_the_old_file_or_the_new(tmp_path):
    """SIGKILL a process rewriting one 4 MiB file over and over: the file is always wholly
    one version, never a mix or a stub."""
    work = tmp_path / "w"
    work.mkdir()
    (work / "f").write_bytes(b"a" * (4 << 20))
    code = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from mnemon.orchestrator.workspace.confine import write_atomic
        i = 0
        print("go", flush=True)
        while True:
            i += 1
            write_atomic(Path({str(work)!r}), "f", (b"ab"[i % 2:i % 2 + 1]) * (4 << 20))
    """)
    for delay in (0.05, 0.11, 0.23, 0.31, 0.47):
        p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
        assert p.stdout.readline() == b"go\n"
        time.sleep(delay)
        p.send_signal(signal.SIGKILL)
        p.wait()
        data = (work / "f").read_bytes()
        assert len(data) == 4 << 20 and data in (b"a" * (4 << 20), b"b" * (4 << 20))
    # what a killed writer leaves is its own temporary file at most, never the file half-made
    assert all(p.name == "f" or ".mnemon-" in p.name for p in work.iterdir())


def test_a_symlink_swapped_in_during_writes_never_lets_one_out(tmp_path):
    """A thread swaps ``sub`` between a real directory and a symlink pointing out while the
    tool writes ``sub/x`` and reads ``sub/secret``; nothing lands outside, nothing is read
    from outside."""
    work = tmp_path / "w"
    outside = tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    (outside / "secret").write_text("outside secret")
    stop = threading.Event()

    def swapper():
        import shutil

        real = work / "sub"
        while not stop.is_set():
            try:
                if real.is_symlink():
                    real.unlink()
                    real.mkdir()
                    (real / "secret").write_text("inside")
                else:
                    shutil.rmtree(real, ignore_errors=True)
                    real.symlink_to(outside)
            except OSError:
                pass
            time.sleep(0.0003)

    t = threading.Thread(target=swapper)
    t.start()
    wrote = refused = read_inside = 0
    try:
        for i in range(3000):
            try:
                confine.write_atomic(work, "sub/x", b"payload", fsync=False)
                wrote += 1
            except (confine.OutsideWorkspace, confine.Confined, OSError):
                refused += 1
            try:
                data, _, _ = confine.read_bytes(work, "sub/secret")
                assert data in (b"", b"inside"), data  # never the outside file
                read_inside += 1
            except (confine.OutsideWorkspace, confine.Confined, OSError):
                pass
    finally:
        stop.set()
        t.join()
    assert not (outside / "x").exists()
    assert sorted(p.name for p in outside.iterdir()) == ["secret"]
    assert wrote > 0 and refused > 0  # both sides of the race were reached


def test_resume_after_sigkill_mid_turn_keeps_the_crashed_turns_writes_aside(tmp_path):
    """A run killed while its turn's tools run: reopened, the directory is brought back to the
    last recorded snapshot and what the crashed turn wrote is kept in the store, named."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("v0\n")
    root = tmp_path / "run"
    code = textwrap.dedent(f"""
        import trio
        from pathlib import Path
        from mnemon.orchestrator.settings import Settings
        from mnemon.orchestrator.supervisor import open_supervisor
        from mnemon.orchestrator.workspace.spec import WorkspaceSpec
        from mnemon.orchestrator.tools import tool
        from mnemon.providers.cache import CacheModel
        from mnemon.providers.scripted import ScriptedProvider
        from mnemon.session.records import Text, ToolUse

        @tool(mode="serial")
        async def hang() -> str:
            \"\"\"Wait forever.\"\"\"
            print("hanging", flush=True)
            await trio.sleep_forever()

        def policy(request, state):
            i = state["i"] = state.get("i", 0) + 1
            if i == 1:
                return [ToolUse("c1", "fs_write", {{"path": "a.txt", "content": "v1\\n"}})], "tool_use"
            if i == 2:
                return [ToolUse("c2", "fs_write", {{"path": "b.txt", "content": "crashed\\n"}}),
                        ToolUse("c3", "hang", {{}})], "tool_use"
            return [Text("done")], "end_turn"

        async def main():
            async with open_supervisor(Path({str(root)!r}),
                                       ScriptedProvider(policy=policy, cache_model=CacheModel()),
                                       Settings(model="scripted",
                                                workspace=WorkspaceSpec(dir={str(work)!r})),
                                       user_tools=[hang]) as sup:
                await sup.ask("go")
        trio.run(main)
    """)
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, cwd=REPO)
    assert p.stdout.readline() == b"hanging\n"
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert (work / "b.txt").read_text() == "crashed\n"  # the crashed turn wrote it
    recorded = snapshots(root)[-1]["snapshot"]

    async def resume():
        from mnemon.orchestrator.settings import Settings
        from mnemon.orchestrator.supervisor import open_supervisor

        from .helpers import provider

        async with open_supervisor(root, provider([]),
                                   Settings(model="scripted",
                                            workspace=WorkspaceSpec(dir=str(work)))) as sup:
            for node in sup.resume_run():
                await sup.run(node)

    trio.run(resume)
    assert not (work / "b.txt").exists()
    assert (work / "a.txt").read_text() == "v1\n"
    back = [s for s in snapshots(root) if s.get("why") == "resume"]
    assert len(back) == 1 and back[0]["snapshot"] == recorded
    aside = back[0]["aside"]
    shown = subprocess.run(["git", "--git-dir", str(root / "workspace" / "store.git"), "show",
                            f"{aside}:b.txt"], capture_output=True, check=True).stdout
    assert shown == b"crashed\n"  # kept, and named
    from mnemon.orchestrator.cli.commands.verify import verify

    assert verify(root)["ok"], verify(root)


def test_verify_names_a_snapshot_missing_from_the_store(tmp_path):
    from mnemon.orchestrator.cli.commands.verify import verify

    from .helpers import ask

    work = tmp_path / "work"
    work.mkdir()
    root = tmp_path / "run"
    trio.run(lambda: ask(root, [[("fs_write", {"path": "a", "content": "x"})]],
                         workspace=WorkspaceSpec(dir=str(work))))
    assert verify(root)["ok"]
    snap = snapshots(root)[-1]["snapshot"]
    obj = root / "workspace" / "store.git" / "objects" / snap[:2] / snap[2:]
    obj.unlink()
    report = verify(root)
    assert not report["ok"]
    assert any(f"workspace snapshot {snap} is not in the run's store" in p["error"]
               for p in report["problems"])


paths = st.sampled_from(["a.txt", "d/b.txt", "d/e/c.txt", "z"])
ops = st.lists(st.tuples(paths, st.binary(max_size=40)), min_size=0, max_size=4)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(turns=st.lists(ops, min_size=1, max_size=6), data=st.data())
def test_any_turns_snapshot_is_the_tree_replayed_to_that_turn(tmp_path_factory, turns, data):
    """Write sequences generated turn by turn; restoring any turn's snapshot gives exactly
    the files a replay of the writes up to that turn gives, byte for byte — in place, and
    read back from the store by a child that never made a directory."""
    base = tmp_path_factory.mktemp("ws")
    work = base / "work"
    work.mkdir()

    async def main():
        ws, start = open_root(base / "run", "a1", WorkspaceSpec(dir=str(work)))
        model: dict[str, bytes] = {}
        expected = [(start.snapshot, dict(model))]
        for turn in turns:
            for path, content in turn:
                await ws.write(path, content)
                model[path] = content
            snap = await ws.turn_snapshot()
            expected.append((snap or expected[-1][0], dict(model)))
        for k in data.draw(st.permutations(range(len(expected)))):
            snap, files = expected[k]
            ws.restore_now(snap)
            assert tree(work) == files
            child, _ = (await ws.fork("c%d" % k)), None
            for path, content in files.items():
                assert (await child.read(path)).data == content
        ws.release()

    trio.run(main)


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(turns=st.lists(ops, min_size=1, max_size=5), data=st.data())
def test_a_writing_child_keeps_only_its_files_and_rewinds_exactly(tmp_path_factory, turns, data):
    """A child that writes through the file tools holds only what it wrote (the rest is read
    from the store); any turn's snapshot restored reads back exactly the replayed files, and
    the whole checkout a command needs keeps what it wrote."""
    base = tmp_path_factory.mktemp("sp")
    work = base / "work"
    (work / "d").mkdir(parents=True)
    (work / "a.txt").write_bytes(b"from the root\n")
    (work / "d" / "keep.txt").write_bytes(b"kept\n")

    async def main():
        root, _ = open_root(base / "run", "a1", WorkspaceSpec(dir=str(work)))
        child = await root.fork("c1")
        model = tree(work)
        expected = [(child.tree, dict(model))]
        for turn in turns:
            for path, content in turn:
                await child.write(path, content)
                model[path] = content
            snap = await child.turn_snapshot()
            expected.append((snap or expected[-1][0], dict(model)))
        if child.dir is not None:
            assert child.sparse
            on_disk = set(tree(child.dir))
            assert on_disk <= {p for t in turns for p, _ in t}  # only what it wrote
        for k in data.draw(st.permutations(range(len(expected)))):
            snap, files = expected[k]
            child.restore_now(snap)
            for path, content in files.items():
                assert (await child.read(path)).data == content
        snap, files = expected[-1]
        child.restore_now(snap)
        for path, content in turns[0]:
            await child.write(path, files.get(path, content))
        d = await child.directory()  # every file, for a command
        assert not child.sparse
        assert tree(d) == files | {p: files.get(p, c) for p, c in turns[0]}
        root.release()
        child.release()

    trio.run(main)
