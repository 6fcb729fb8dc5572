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
