"""Tamper and confinement: each broken pointer is refused naming the path, by verify and the fold."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mnemon.lineage.fork import fork
from mnemon.lineage.runroot import confine, make_loader, read_pointer
from mnemon.orchestrator.cli import main
from mnemon.session.errors import AncestorUnreadable, DigestMismatch, LogRefused, SessionError
from mnemon.session.records import Pointer, decode
from mnemon.session.resume import fold_file

from .util import STARTED, answer, evict, new_agent, prompt, rewrite_inherited, start_call, tool_turn

PARENT = "agents/p/record.jsonl"
CHILD = "agents/c1/record.jsonl"


@pytest.fixture
def family(run_root):
    """A parent with evicted and resident turns and a mnemon child pointing into it."""
    p = new_agent(run_root, "p", **STARTED)
    prompt(p, "alpha prompt")
    tool_turn(p, "beta", "ls", "gamma output")
    answer(p, "delta answer")
    answer(p, "epsilon answer")
    evict(p, 1, 2, "alpha and beta")
    start_call(p)
    fork(run_root, p, "c1", task="zeta task").close()
    p.close()
    return run_root


def link_of(root: Path):
    return decode((root / CHILD).read_bytes().splitlines()[1])


def verify_json(root: Path, capsys) -> tuple[int, dict]:
    capsys.readouterr()
    code = main(["verify", str(root), "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out)


def child_problem(report: dict) -> dict:
    probs = [p for p in report["problems"] if p["path"] == CHILD]
    assert probs, report
    assert probs[0]["line"] == 2  # the line of the Inherited record
    return probs[0]


def fold_child(root: Path) -> LogRefused:
    with pytest.raises(LogRefused) as e:
        fold_file(root / CHILD, CHILD, loader=make_loader(root))
    assert e.value.line == 2
    return e.value


def test_intact_family_verifies(family, capsys):
    code, rep = verify_json(family, capsys)
    assert code == 0 and rep["ok"] and rep["problems"] == []


def test_missing_ancestor_file(family, capsys):
    (family / PARENT).unlink()
    code, rep = verify_json(family, capsys)
    assert code == 1 and rep["ok"] is False
    prob = child_problem(rep)
    assert PARENT in prob["error"] and "missing" in prob["error"]
    err = fold_child(family)
    assert PARENT in str(err)


def resident_offset(root: Path) -> int:
    x = next(x for x in link_of(root).turns if x.row.held == "resident")
    return x.at.loci[0][0]


def evicted_offset(root: Path) -> int:
    x = next(x for x in link_of(root).turns if x.row.held == "evicted")
    return x.at.loci[0][0]


def flip(path: Path, at: int, old: bytes, new: bytes) -> None:
    data = bytearray(path.read_bytes())
    i = data.index(old, at)
    data[i:i + len(old)] = new
    path.write_bytes(bytes(data))


def test_altered_byte_in_a_resident_row(family, capsys):
    off = resident_offset(family)
    flip(family / PARENT, off, b"gamma", b"gamme") if False else None
    # alter one letter of a resident turn's text, keeping the parent's own log foldable
    data = (family / PARENT).read_bytes()
    i = data.index(b"delta", off)
    flip(family / PARENT, i, b"delta", b"delte")
    code, rep = verify_json(family, capsys)
    assert code == 1
    # the parent itself still folds; its chain names the edited line, the child its pointer
    assert [(p["path"], p.get("kind")) for p in rep["problems"]] == \
        [(PARENT, "edited"), (CHILD, None)]
    assert rep["problems"][0]["line"] == data[:i].count(b"\n") + 1
    prob = child_problem(rep)
    assert PARENT in prob["error"] and "digest mismatch" in prob["error"]
    assert f"offset {off}" in prob["error"]
    err = fold_child(family)
    assert PARENT in err.why and "digest mismatch" in err.why


def test_altered_byte_in_an_evicted_row(family, capsys):
    """Departed rows are not loaded by the fold; verify still checks their pointers."""
    off = evicted_offset(family)
    data = (family / PARENT).read_bytes()
    flip(family / PARENT, data.index(b"alpha", off), b"alpha", b"alphb")
    code, rep = verify_json(family, capsys)
    assert code == 1
    prob = child_problem(rep)
    assert PARENT in prob["error"] and "digest mismatch" in prob["error"]
    # the fold itself does not read departed rows (the door reads them lazily)
    fold_file(family / CHILD, CHILD, loader=make_loader(family))
    x = next(x for x in link_of(family).turns if x.row.held == "evicted")
    with pytest.raises(DigestMismatch) as e:
        read_pointer(family, x.at)
    assert e.value.path == PARENT and e.value.offset == off


def outside_copy(root: Path) -> Path:
    out = root.parent / "outside"
    out.mkdir(exist_ok=True)
    (out / "record.jsonl").write_bytes((root / PARENT).read_bytes())
    return out / "record.jsonl"


def retarget(root: Path, source: str) -> None:
    def edit(obj):
        for x in obj["turns"]:
            x["at"]["source"] = source
    rewrite_inherited(root / CHILD, edit)


@pytest.mark.parametrize("source", ["agents/../../outside/record.jsonl",
                                    "../outside/record.jsonl",
                                    "agents/p/../../../outside/record.jsonl"])
def test_pointer_with_dotdot(family, capsys, source):
    outside_copy(family)  # the bytes are right: only confinement refuses them
    retarget(family, source)
    code, rep = verify_json(family, capsys)
    assert code == 1
    prob = child_problem(rep)
    assert source in prob["error"] and "'..'" in prob["error"]
    assert source in fold_child(family).why


def test_absolute_pointer(family, capsys):
    target = outside_copy(family)
    retarget(family, str(target))
    code, rep = verify_json(family, capsys)
    assert code == 1
    prob = child_problem(rep)
    assert str(target) in prob["error"] and "relative to the run root" in prob["error"]
    assert str(target) in fold_child(family).why
    # the same absolute path to a file *inside* the run root is refused too
    retarget(family, str((family / PARENT).resolve()))
    assert "relative" in fold_child(family).why


def test_symlink_leading_out(family, capsys):
    target = outside_copy(family)
    (family / "links").mkdir()
    os.symlink(target, family / "links" / "p.jsonl")
    retarget(family, "links/p.jsonl")
    code, rep = verify_json(family, capsys)
    assert code == 1
    prob = child_problem(rep)
    assert "links/p.jsonl" in prob["error"] and "outside the run root" in prob["error"]
    assert "links/p.jsonl" in fold_child(family).why


def test_symlinked_directory_leading_out(family, capsys):
    target = outside_copy(family)
    os.symlink(target.parent, family / "agents" / "elsewhere")
    retarget(family, "agents/elsewhere/record.jsonl")
    err = fold_child(family)
    assert "agents/elsewhere/record.jsonl" in err.why and "outside" in err.why


def test_symlink_inside_the_run_root_is_followed(family, capsys):
    (family / "links").mkdir()
    os.symlink(family / PARENT, family / "links" / "p.jsonl")
    retarget(family, "links/p.jsonl")
    fold_file(family / CHILD, CHILD, loader=make_loader(family))  # confined: accepted


def test_run_root_moved_still_reads(family, tmp_path):
    moved = tmp_path / "moved-run"
    family.rename(moved)
    ctx, _ = fold_file(moved / CHILD, CHILD, loader=make_loader(moved))
    assert ctx.turn(4).source == PARENT


def test_confine_directly(run_root):
    (run_root / PARENT).parent.mkdir(parents=True)
    (run_root / PARENT).write_text("x\n")
    assert confine(run_root, PARENT) == (run_root / PARENT).resolve()
    assert confine(run_root, "agents/p/./record.jsonl") == (run_root / PARENT).resolve()
    for bad, why in [("", "relative"), ("/etc/passwd", "relative"), ("\\\\server\\x", "relative"),
                     ("C:/x", "relative"), ("..", "'..'"), ("agents/../run.json", "'..'"),
                     ("agents/q/record.jsonl", "missing")]:
        with pytest.raises(AncestorUnreadable, match=why) as e:
            confine(run_root, bad)
        assert e.value.path == bad


@pytest.fixture(scope="module")
def maze(tmp_path_factory):
    """A run root with every kind of thing a pointer's path can meet on its way."""
    base = tmp_path_factory.mktemp("maze")
    root, out = base / "run", base / "outside"
    (root / "d" / "e").mkdir(parents=True)
    out.mkdir()
    for f in (root / "f", root / "d" / "f", root / "d" / "e" / "f", out / "f"):
        f.write_text("x\n")
    os.mkfifo(root / "d" / "fifo")
    (root / "in").symlink_to(root / "d" / "f")  # a symlink that stays inside
    (root / "d" / "up").symlink_to("..")  # a directory symlink inside
    (root / "out").symlink_to(out)  # a directory symlink out
    (root / "outf").symlink_to(out / "f")
    (root / "dangling").symlink_to(root / "nothing")
    (root / "loop").symlink_to("loop2")
    (root / "loop2").symlink_to("loop")
    (base / "via").symlink_to(root)  # the run root itself named through a symlink
    return base


@given(st.lists(st.sampled_from(["f", "d", "e", "fifo", "in", "up", "out", "outf", "dangling",
                                 "loop", ".", "", "nothing", "..", "f/x"]),
                min_size=1, max_size=4))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_the_quick_walk_answers_as_resolve_does(maze, parts):
    """``confine`` with its quick walk (``paths._beneath``) against ``confine`` resolving every
    path the long way (``Path.resolve``, as before the walk): the same path or the same
    refusal."""
    from mnemon.session import paths

    source = "/".join(parts)

    def answer(root: Path) -> object:
        try:
            return paths.confine(root, source)
        except AncestorUnreadable as e:
            return ("refused", str(e))

    quick = paths._beneath
    for root in (maze / "run", maze / "via"):
        got = answer(root)
        paths._beneath = lambda *a: None  # type: ignore[assignment]
        try:
            want = answer(root)
        finally:
            paths._beneath = quick  # type: ignore[assignment]
        assert got == want, source


def test_the_quick_walk_takes_no_symlink(maze, monkeypatch):
    """The quick walk answers only a path without a symlink below the root: one through a
    symlink inside is resolved the long way (and followed), one out is refused."""
    from mnemon.session import paths

    root = (maze / "run").resolve()
    long_way = []
    resolve = Path.resolve
    monkeypatch.setattr(Path, "resolve", lambda self, *a, **kw: (long_way.append(self),
                                                                  resolve(self, *a, **kw))[1])
    assert paths.confine(root, "d/e/f", resolved_root=root) == root / "d" / "e" / "f"
    assert long_way == []
    assert paths.confine(root, "in", resolved_root=root) == root / "d" / "f"
    assert long_way == [root / "in"]
    with pytest.raises(AncestorUnreadable, match="outside the run root"):
        paths.confine(root, "out/f", resolved_root=root)


def test_a_symlink_loop_is_refused_by_name(family):
    """A pointer into a symlink loop: named, never a traceback (``Path.resolve`` raises
    ``RuntimeError`` for a loop before Python 3.13)."""
    loop = family / "agents" / "loop"
    loop.mkdir()
    (loop / "x").symlink_to(loop / "record.jsonl")
    (loop / "record.jsonl").symlink_to("x")
    with pytest.raises(AncestorUnreadable, match="symlink loop|missing"):
        confine(family, "agents/loop/record.jsonl")
    with pytest.raises(SessionError):
        read_pointer(family, Pointer("agents/loop/record.jsonl", [(0, 10, "0" * 16)]))


def test_verify_from_a_fresh_process(family):
    """The real console script: exit 1 and the problem on stdout, never a traceback."""
    (family / PARENT).unlink()
    proc = subprocess.run([sys.executable, "-m", "mnemon", "verify", str(family),
                           "--json"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 1, proc.stderr
    rep = json.loads(proc.stdout)
    assert rep["problems"][0]["path"] == CHILD and rep["problems"][0]["line"] == 2
    assert "Traceback" not in proc.stderr


# ----------------------------------------------------------------------------- odd pointers
# Directories, NUL bytes, negative offsets and logs symlinked out are refused naming the path.


@pytest.mark.parametrize("source", [".", "agents", "agents/p"])
def test_pointer_to_a_directory(family, source):
    with pytest.raises(SessionError):
        read_pointer(family, Pointer(source, [(0, 10, "0" * 16)]))


def test_pointer_with_a_nul_byte(family):
    with pytest.raises(SessionError):
        read_pointer(family, Pointer("agents/p/record.jsonl\x00", [(0, 10, "0" * 16)]))


def test_negative_offset(family):
    with pytest.raises(SessionError):
        read_pointer(family, Pointer(PARENT, [(-5, 10, "0" * 16)]))


def test_verify_reports_a_directory_pointer(family, capsys):
    retarget(family, "agents")
    code, rep = verify_json(family, capsys)
    assert code == 1 and child_problem(rep)


def test_agent_log_symlinked_out(family, capsys):
    target = outside_copy(family)
    (family / "agents" / "evil").mkdir()
    os.symlink(target, family / "agents" / "evil" / "record.jsonl")
    code, rep = verify_json(family, capsys)
    assert code == 1


@pytest.mark.parametrize("source", ["../outside/record.jsonl", "/etc/hostname", "links/p.jsonl",
                                    "agents/nobody/record.jsonl"])
def test_opening_loader_refuses_like_make_loader(family, source):
    from mnemon.lineage.fork import opening_loader

    outside_copy(family)
    (family / "links").mkdir()
    os.symlink(family.parent / "outside" / "record.jsonl", family / "links" / "p.jsonl")
    x = next(x for x in link_of(family).turns if x.row.held == "resident")
    ptr = Pointer(source, x.at.loci)
    errs = []
    for loader in (make_loader(family), opening_loader(family)):
        with pytest.raises(AncestorUnreadable) as e:
            loader(ptr)
        errs.append(str(e.value))
    assert errs[0] == errs[1] and source in errs[0]
    assert opening_loader(family)(x.at) == make_loader(family)(x.at)


def test_resuming_a_child_whose_ancestor_was_tampered(family):
    from mnemon.lineage.fork import resume_child

    data = (family / PARENT).read_bytes()
    i = data.index(b"delta")
    (family / PARENT).write_bytes(data[:i] + b"DELTA" + data[i + 5:])
    with pytest.raises(LogRefused) as e:
        resume_child(family, "c1")
    assert e.value.line == 2 and PARENT in e.value.why and "digest mismatch" in e.value.why
