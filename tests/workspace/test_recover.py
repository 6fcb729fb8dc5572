"""Recoverable reads (docs/workspace.md): a file read names the snapshot holding exactly the
bytes it read; a mark's replacement and a harness residue carry that pointer, and
``fs_read {path, at}`` reads the file back as it was — after it changed."""

from __future__ import annotations

import json

import pytest

from mnemon.orchestrator.settings import Settings
from mnemon.orchestrator.supervisor import open_supervisor
from mnemon.orchestrator.workspace.spec import WorkspaceSpec
from mnemon.session.sweep import file_pointers, pointer_note

from .helpers import provider, records, results


@pytest.mark.trio
async def test_a_marked_read_carries_its_pointer_and_reads_back_the_old_bytes(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("the old text\n" + "padding line\n" * 20)
    root = tmp_path / "run"
    seen = {}

    def step3():
        ptr = results(root)[0]["content"].split(" · ")[0].removeprefix("file ")
        seen["ptr"] = ptr
        return [("context_mark", {"block": "2.1", "replacement": "read a.txt: old text"}),
                ("fs_read", {"path": "a.txt", "at": ptr.split(" @ ")[1]}),
                ("fs_read", {"path": "a.txt"})]

    script = [[("fs_read", {"path": "a.txt"})],
              [("fs_write", {"path": "a.txt", "content": "the new text\n"})],
              [("context_survey", {})],
              step3]

    def policy(request, state):
        from mnemon.session.records import Text, ToolUse

        i = state["i"] = state.get("i", 0) + 1
        if i <= len(script):
            step = script[i - 1]
            step = step() if callable(step) else step
            return [ToolUse(f"c{i}_{k}", n, a) for k, (n, a) in enumerate(step)], "tool_use"
        return [Text("done")], "end_turn"

    from mnemon.providers.cache import CacheModel
    from mnemon.providers.scripted import ScriptedProvider

    async with open_supervisor(root, ScriptedProvider(policy=policy, cache_model=CacheModel()),
                               Settings(model="scripted",
                                        workspace=WorkspaceSpec(dir=str(work)))) as sup:
        node = await sup.ask("go")
        pointers = file_pointers(node.ctx, (1, 10))
    r = results(root)
    survey = json.loads(r[2]["content"])
    cands = {c["block"]: c["reason"] for c in survey["candidates"]}
    assert "written after this read" in cands["2.1"]
    marked = [x for x in records(root) if x["t"] == "Marked"][0]
    assert marked["replacement"].startswith("read a.txt: old text [file a.txt @ ")
    assert seen["ptr"] in marked["replacement"]
    assert "     1\tthe old text" in r[4]["content"]  # the pointer: the bytes as they were
    assert "     1\tthe new text" in r[5]["content"]  # now
    assert pointers[0] == seen["ptr"] and len(pointers) == 2  # the old read, the new one
    note = pointer_note(pointers, 240)
    assert note is not None and seen["ptr"] in note and len(note.encode()) <= 240


def test_a_pointer_note_says_how_many_it_left_out():
    ptrs = [f"src/module_{i:03d}/file.py @ {i:012x}" for i in range(20)]
    note = pointer_note(ptrs, 240)
    assert note is not None and len(note.encode()) <= 240 and note.endswith("more")
    assert pointer_note([], 240) is None


@pytest.mark.trio
async def test_a_harness_eviction_of_file_reads_names_their_pointers(tmp_path):
    """A small window: the harness evicts turns that read files; the residue's note names each
    read's pointer, and reading at that pointer after the files changed gives the old bytes."""
    work = tmp_path / "work"
    work.mkdir()
    for i in range(6):
        (work / f"f{i}.txt").write_text(f"old content {i}\n" + "x" * 6000 + "\n")
    script = [[("fs_read", {"path": f"f{i}.txt"})] for i in range(6)]
    script += [[("fs_write", {"path": f"f{i}.txt", "content": "new\n"}) for i in range(6)]]
    script += [[("context_survey", {})]] * 4
    root = tmp_path / "run"
    async with open_supervisor(root, provider(script),
                               Settings(model="scripted", context_window=12_000,
                                        workspace=WorkspaceSpec(dir=str(work)))) as sup:
        node = await sup.ask("go")
        ws = node.workspace
        evicted = [r for r in records(root) if r["t"] == "Evicted"]
        assert evicted, "the window should have forced a harness eviction"
        note = evicted[0]["residue"].get("note") or ""
        assert note.startswith("files read (fs_read {path, at} reads each as it was): ")
        ptr = note.split(": ", 1)[1].split("; ")[0]
        path, snap = ptr.split(" @ ")
        old = await ws.read(path, at=snap)
        assert old.data.startswith(b"old content")
        assert (work / path).read_text() == "new\n"
