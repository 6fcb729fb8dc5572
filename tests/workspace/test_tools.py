"""The file tools on a real supervisor, real logs and the real store (docs/workspace.md)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from mnemon.orchestrator.workspace.spec import WorkspaceSpec

from .helpers import ask, records, results, snapshots

pytestmark = pytest.mark.trio


def tree(d: Path) -> dict[str, bytes]:
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*"))
            if p.is_file() and ".git" not in p.parts}


async def test_an_agent_without_a_workspace_has_no_file_tools(tmp_path):
    _, node = await ask(tmp_path / "run", [[("fs_list", {})]], workspace=None)
    start = records(tmp_path / "run")[0]
    assert not any(t["name"].startswith("fs_") for t in start["tools"])
    assert results(tmp_path / "run")[0]["is_error"]


async def test_read_write_edit_list_search_in_place(tmp_path):
    work = tmp_path / "work"
    (work / "src").mkdir(parents=True)
    (work / "src" / "app.py").write_text("def main():\n    return 1\n")
    (work / "README").write_text("hello\n")
    script = [
        [("fs_read", {"path": "src/app.py"}), ("fs_list", {"glob": "*.py"})],
        [("fs_edit", {"path": "src/app.py", "old": "return 1", "new": "return 2"}),
         ("fs_write", {"path": "docs/new.md", "content": "# new\n"})],
        [("fs_search", {"pattern": r"return \d", "glob": "*.py"}),
         ("fs_read", {"path": "src/app.py", "offset": 2, "limit": 1})],
    ]
    root = tmp_path / "run"
    _, node = await ask(root, script, workspace=WorkspaceSpec(dir=str(work)))
    assert node.state == "ended", node.reason
    start = records(root)[0]
    assert {"fs_read", "fs_write", "fs_edit", "fs_list", "fs_search"} <= {
        t["name"] for t in start["tools"]}
    r = [x["content"] for x in results(root)]
    assert r[0].startswith("file src/app.py @ ") and "lines 1–2 of 2" in r[0]
    assert "     1\tdef main():" in r[0]
    assert r[1].startswith("1 file(s) matching *.py") and "src/app.py\t25 B" in r[1]
    assert r[2] == "edited src/app.py: 1 replacement(s)"
    assert r[3] == "wrote docs/new.md (6 bytes, 1 lines)"
    assert "src/app.py:2:     return 2" in r[4]
    assert "lines 2–2 of 2" in r[5] and "     2\t    return 2" in r[5]
    # in place: the user's directory holds the agent's change
    assert (work / "src" / "app.py").read_text() == "def main():\n    return 2\n"
    assert (work / "docs" / "new.md").read_text() == "# new\n"
    snaps = snapshots(root)
    assert [s.get("why") for s in snaps] == ["start", None]
    assert snaps[0]["dir"] == str(work.resolve())
    assert snaps[1]["turn"] == 3  # the second response (ids: the prompt 1, then 2, 3)
    # a read-only turn (the first, the third) records nothing


async def test_edit_refusals_name_the_count(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("x x x\n")
    (work / "bin").write_bytes(b"\x00\x01" * 100)
    script = [[("fs_edit", {"path": "a.txt", "old": "x", "new": "y"}),
               ("fs_edit", {"path": "a.txt", "old": "zzz", "new": "y"}),
               ("fs_read", {"path": "bin"}),
               ("fs_edit", {"path": "a.txt", "old": "x", "new": "y", "all": True})]]
    root = tmp_path / "run"
    await ask(root, script, workspace=WorkspaceSpec(dir=str(work)))
    r = results(root)
    assert r[0]["is_error"] and "occurs 3 times" in r[0]["content"]
    assert r[1]["is_error"] and "0 matches" in r[1]["content"]
    assert r[2]["is_error"] and "binary file (200 bytes)" in r[2]["content"]
    assert r[3]["content"] == "edited a.txt: 3 replacement(s)"
    assert (work / "a.txt").read_text() == "y y y\n"


@pytest.mark.parametrize("path,why", [
    ("../outside.txt", "climbs out"),
    ("/etc/passwd", "is absolute"),
    ("link/secret.txt", "leads outside"),
    ("linkfile", "leads outside"),
    (".git/hooks/pre-commit", "inside .git"),
    ("run/agents/a1/record.jsonl", "run's own directory"),
])
async def test_paths_outside_are_refused_by_name(tmp_path, path, why):
    work = tmp_path / "work"
    work.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    (work / "link").symlink_to(outside)
    (work / "linkfile").symlink_to(outside / "secret.txt")
    root = work / "run"  # the run root inside the workspace (``--workspace .``)
    await ask(root, [[("fs_read", {"path": path}),
                      ("fs_write", {"path": path, "content": "pwned"})]],
              workspace=WorkspaceSpec(dir=str(work)))
    r = results(root)
    for x in r:
        assert x["is_error"] and why in x["content"], x
    assert (outside / "secret.txt").read_text() == "secret"
    assert not (tmp_path / "outside.txt").exists()
    # the run root itself is not part of any snapshot
    store = root / "workspace" / "store.git"
    snap = snapshots(root)[-1]["snapshot"]
    listed = subprocess.run(["git", "--git-dir", str(store), "ls-tree", "-r", "--name-only",
                             snap], capture_output=True, text=True, check=True).stdout
    assert "run/" not in listed


async def test_a_symlink_inside_is_followed_inside(tmp_path):
    work = tmp_path / "work"
    (work / "real").mkdir(parents=True)
    (work / "real" / "f.txt").write_text("inside\n")
    (work / "alias").symlink_to("real")
    root = tmp_path / "run"
    await ask(root, [[("fs_read", {"path": "alias/f.txt"})],
                     [("fs_write", {"path": "alias/g.txt", "content": "via link\n"})]],
              workspace=WorkspaceSpec(dir=str(work)))
    r = results(root)
    assert r[0]["content"].startswith("file real/f.txt @ ")
    assert (work / "real" / "g.txt").read_text() == "via link\n"


async def test_a_second_agent_cannot_take_a_directory_in_use(tmp_path):
    from mnemon.orchestrator.workspace.handle import WorkspaceBusy
    from mnemon.orchestrator.workspace.life import open_root

    work = tmp_path / "work"
    work.mkdir()
    ws, _ = open_root(tmp_path / "r1", "a1", WorkspaceSpec(dir=str(work)))
    with pytest.raises(WorkspaceBusy, match="in use by another agent"):
        open_root(tmp_path / "r2", "a1", WorkspaceSpec(dir=str(work)))
    ws.release()
    ws2, _ = open_root(tmp_path / "r2", "a1", WorkspaceSpec(dir=str(work)))
    ws2.release()


async def test_the_view_reads_turns_diffs_and_exports(tmp_path):
    from mnemon.orchestrator.workspace.view import NoWorkspace, view_of

    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("one\n")
    root = tmp_path / "run"
    await ask(root, [[("fs_write", {"path": "a.txt", "content": "two\n"})],
                     [("fs_write", {"path": "b.txt", "content": "bee\n"})]],
              workspace=WorkspaceSpec(dir=str(work)))
    v = view_of(root / "agents" / "a1")
    assert [r["why"] for r in v.turns()] == ["start", "tools", "tools"]
    assert v.show("a.txt", turn=1) == b"one\n"
    assert v.show("a.txt", turn=2) == b"two\n"
    assert [e.path for e in v.ls(2)] == ["a.txt"]
    assert [e.path for e in v.ls()] == ["a.txt", "b.txt"]
    d = v.diff(2, 3)
    assert "+++ b/b.txt" in d and "a.txt" not in d
    p = v.patch()
    assert "-one" in p and "+two" in p and "+bee" in p
    n = v.export(tmp_path / "out", turn=2)
    assert n == 1 and (tmp_path / "out" / "a.txt").read_text() == "two\n"
    assert [c["files"] for c in v.changes()] == [[{"status": "M", "path": "a.txt"}],
                                                 [{"status": "A", "path": "b.txt"}]]
    with pytest.raises(NoWorkspace):
        v.show("zzz")
