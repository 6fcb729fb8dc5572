"""The commands answered before the parser (``orchestrator.cli.quick``) answer byte for byte as
the full CLI does: ``--version``, ``transcript read`` of named turns and a no-hit ``transcript
grep``, over every log the suite has — the example run roots, logs replayed from the real
trajectories, logs made here (random, written by other writers' escapes, damaged behind the
checkpoint's back, forked). Each command is run both ways, the quick one where it answers and
``main`` (the parser and the door) always, and their stdout and exit codes compared. And the
quick path's imports are pinned, so a later import cannot creep in unnoticed."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import hypothesis.strategies as st
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings

import mnemon.session.checkpoint.layout as layout
from mnemon.lineage.fork import fork
from mnemon.lineage.runroot import create_run_root
from mnemon.orchestrator.cli import main
from mnemon.orchestrator.cli.quick import answered
from mnemon.session import native
from mnemon.session.door import quick
from tests.conftest import EXAMPLES, TRAJECTORIES
from tests.helpers import door_open, new_agent, prompt, tool_turn
from tests.quickpath import both, imported

from ._build import replay
from .test_checkpoint import DAMAGE, OPS, apply_damage, play
from .test_props import logs, write_log

SETTINGS = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])
NEVER = "QUOKKA-7f3a-ZEBRA"  # a literal no log of these tests holds
needs_native = pytest.mark.skipif(not native.AVAILABLE, reason="the quick read needs the "
                                  "native hasher (without it the door answers every read)")


@pytest.fixture(autouse=True)
def always(monkeypatch):
    """Every log gets its checkpoint (the CLI's threshold is 1 MiB): the quick path reads it."""
    monkeypatch.setattr(layout, "MIN_BYTES", 0)


def ids_of(capsys, here) -> list[int]:
    door, _ = door_open(here)  # (writes the checkpoint)
    return [r["id"] for r in door.index()]


def every_command(capsys, here, ids: list[int], words=("needle", "out")) -> int:
    """Both ways for the commands of one agent directory; how many the quick way answered."""
    d = str(here)
    n = 0
    cases = [["transcript", "grep", d, NEVER], ["transcript", "grep", d, NEVER, "--json"],
             ["transcript", "grep", "--json", d, NEVER + "-2"]]
    cases += [["transcript", "grep", d, w, "--json"] for w in words]
    for tid in ids[:40]:
        cases.append(["transcript", "read", d, "--turns", str(tid), "--json"])
        cases.append(["transcript", "read", "--turns", str(tid), d])
    if ids:
        top = ids[-1]
        cases += [["transcript", "read", d, "--turns", f"1-{top}", "--json"],
                  ["transcript", "read", d, "--turns", f"{ids[0]}, {top}", "--json"],
                  ["transcript", "read", d, "--json", "--turns", f"0-{top + 5}"],
                  ["transcript", "read", d, "--turns", f"{top + 1}", "--json"],  # refused
                  ["transcript", "read", d, "--turns", f"{top}-1", "--json"]]  # refused
    for argv in cases:
        n += both(capsys, argv)
    return n


def test_the_block_size_is_the_formats():
    assert quick.BLOCK == layout.CHECK_BLOCK


def test_version(capsys):
    assert both(capsys, ["--version"]) and both(capsys, ["-V"])
    assert not both(capsys, ["--vers"])  # argparse's abbreviation: the parser's to read


@needs_native
def test_the_example_run_roots(capsys, tmp_path):
    answered_ = 0
    for run in sorted({p.parent.parent.parent for p in EXAMPLES.rglob("agents/*/record.jsonl")}):
        copy = tmp_path / run.relative_to(EXAMPLES)
        shutil.copytree(run, copy)
        for here in sorted((copy / "agents").iterdir()):
            try:
                ids = ids_of(capsys, here)
            except Exception:  # a refused log: no checkpoint, both ways answer the door's way
                ids = [1, 2]
            answered_ += every_command(capsys, here, ids)
    assert answered_ > 50, "the quick path answered next to nothing"


@needs_native
def test_logs_of_the_real_trajectories(capsys, tmp_path):
    root = create_run_root(tmp_path / "run", "tests")
    for i, f in enumerate(sorted(TRAJECTORIES.glob("*.jsonl"))[:3]):
        replay(root, f"a{i + 1}", f, evict_every=5)
        here = root / "agents" / f"a{i + 1}"
        ids = ids_of(capsys, here)
        assert every_command(capsys, here, ids, words=("django", "Error")) > len(ids[:40])


@needs_native
@SETTINGS
@given(ops=OPS, more=OPS, damage=DAMAGE, at=st.integers(0, 10 ** 9), forked=st.booleans())
def test_damaged_checkpoints_and_lineages(tmp_path_factory, capsys, ops, more, damage, at,
                                          forked):
    root = create_run_root(tmp_path_factory.mktemp("qk") / "run", "tests")
    agent = "a1"
    log = new_agent(root, "a1")
    play(log, ops)
    if forked:  # the child's inherited turns lie in the parent's file
        prompt(log, "delegate")
        log = fork(root, log, "c1", task="child task")
        agent = "c1"
    play(log, ops[::2])
    b = new_agent(root, "b1")
    play(b, more)
    b.close()
    here = root / "agents" / agent
    ids = ids_of(capsys, here)
    ids_of(capsys, root / "agents" / "b1")
    log = apply_damage(root, log, agent, damage, at, forked, more,
                       appended=f"appended needle {NEVER}-2")
    log.close()
    assert every_command(capsys, here, ids or [1]) > 0  # (the full path rewrites a checkpoint)


@needs_native
@SETTINGS
@given(recs=logs(), data=st.data())
def test_every_writers_escapes(tmp_path_factory, capsys, recs, data):
    """Logs of other writers (``\\u``-escaped, ``/``-escaped, HTML-safe): json reads what
    msgspec reads, or the quick path leaves the record to the door."""
    root = create_run_root(tmp_path_factory.mktemp("qw") / "run", "tests")
    escape = data.draw(st.lists(st.integers(0, 3), min_size=len(recs), max_size=len(recs)))
    write_log(root / "agents" / "a1" / "record.jsonl", recs, escape)
    here = root / "agents" / "a1"
    assert every_command(capsys, here, ids_of(capsys, here)) > 0


ODD = [b'{"n":NaN}', b'{"n":-Infinity}', b'{"s":"\\ud800"}', b'{"s":"\\uDC00x"}',
       b'{"n":1e400}', b'{"n":-1E999}', b'{"s":"\\ud83d\\ude00"}', b'{"s":"\xff"}',
       b'\xef\xbb\xbf{}', b'{"n":01}', b'{"a":1,"a":2}', b'{"n":' + b"9" * 5000 + b'}',
       b'{"n":1e-400,"m":-0.0,"k":-0}', b'{"s":"\\u0000\\/"}', b'[' * 3000 + b']' * 3000,
       b'{"s":"a\tb"}', b' {"n":1} ', b'{"n":1} x', b'']


def agrees(raw: bytes) -> None:
    """``quick._decode`` gives msgspec's plain values, or declines (the door then decodes)."""
    try:
        want = ("ok", msgspec.json.decode(raw))
    except (msgspec.DecodeError, RecursionError):
        want = ("refused", None)
    try:
        got = ("ok", quick._decode(raw))
    except (quick._Decline, ValueError, RecursionError):
        return
    assert got == want and repr(got) == repr(want), raw


@pytest.mark.parametrize("raw", ODD)
def test_records_json_would_read_otherwise_are_declined(raw):
    agrees(raw)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) |
    st.text(st.characters(codec="utf-8")),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=5), kids,
                                                               max_size=4), max_leaves=12)


@SETTINGS
@given(value=JSON, ensure_ascii=st.booleans(), spaced=st.booleans())
def test_json_reads_what_msgspec_reads(value, ensure_ascii, spaced):
    raw = json.dumps(value, ensure_ascii=ensure_ascii,
                     separators=(", ", ": ") if spaced else (",", ":")).encode("utf-8",
                                                                              "surrogatepass")
    agrees(raw)
    agrees(msgspec.json.encode(value))


def test_command_lines_left_to_the_parser(capsys, run_root):
    log = new_agent(run_root, "a1")
    tool_turn(log, "t", "ls", "out")
    log.close()
    d = str(run_root / "agents" / "a1")
    door_open(d)
    assert answered(["transcript", "read", d, "--turns", "1"]) is not None or not native.AVAILABLE
    for argv in (["transcript", "read", d, "--turn", "1"],  # an abbreviation
                 ["transcript", "read", d, "--turns=1"],
                 ["transcript", "read", d, "--turns", "-1"],
                 ["transcript", "read", d, "--turns", "1", "--turns", "1"],
                 ["transcript", "read", d, "--turns", "+1"],
                 ["transcript", "read", d, "--turns", "1", "-h"],
                 ["transcript", "read", d, "--turns", "1", "--", "x"],
                 ["transcript", "read", d],
                 ["-v", "transcript", "read", d, "--turns", "1"],
                 ["transcript", "grep", d, NEVER, "--turns", "1"],
                 ["transcript", "grep", d, NEVER, "--timeout", "5"],
                 ["transcript", "grep", d, "-x"],
                 ["transcript", "grep", d, ""],
                 ["transcript", "index", d, "--json"]):
        assert answered(argv) is None, argv
        both(capsys, argv)


def test_a_bad_log_level_is_the_clis_to_name(capsys, monkeypatch, run_root):
    monkeypatch.setenv("MNEMON_LOG_LEVEL", "loud")
    assert answered(["transcript", "grep", str(run_root), NEVER]) is None


# ------------------------------------------------------------------ what the process imports

QUICK_MODULES = {
    "--version": {"mnemon", "mnemon._lazy", "mnemon._about", "mnemon._version", "mnemon.errors",
                  "mnemon.orchestrator", "mnemon.orchestrator.cli",
                  "mnemon.orchestrator.cli.quick"},
}
QUICK_MODULES["read"] = QUICK_MODULES["--version"] - {"mnemon._about", "mnemon._version"} | {
    "mnemon.lineage", "mnemon.lineage.outside", "mnemon.session", "mnemon.session.native",
    "mnemon.session._b3many", "mnemon.session._scan", "mnemon.session.checkpoint",
    "mnemon.session.checkpoint.header", "mnemon.session.door", "mnemon.session.door.quick"}
QUICK_MODULES["grep"] = QUICK_MODULES["read"] | {"mnemon.lineage.nohit",
                                                 "mnemon.session.door.literal"}
#: what else the quick path may import beyond the console script's own ``re`` and ``sys``
#: (and what the interpreter's start already loaded): the standard library it uses, no more
STDLIB = {"json", "json.decoder", "json.scanner", "json.encoder", "_json", "bisect", "_bisect",
          "array", "struct", "_struct", "collections.abc", "_collections_abc", "atexit"}
#: (``threading`` too, but for a log of ``lineage.nohit.SPLIT`` bytes or more: two halves)
NEVER_IMPORTED = {"msgspec", "trio", "structlog", "argparse", "pathlib", "typing", "blake3",
                  "regex", "httpx", "importlib.metadata", "threading", "mnemon.session.records"}


@needs_native
def test_the_quick_path_imports_what_it_uses_and_nothing_else(capsys, run_root):
    log = new_agent(run_root, "a1")
    for i in range(6):
        tool_turn(log, f"t{i}", "ls", f"out {i}")
    log.close()
    d = str(run_root / "agents" / "a1")
    door_open(d)  # the checkpoint (MIN_BYTES is 0 here; the quick path reads any checkpoint)
    for argv, which in ((["--version"], "--version"),
                        (["transcript", "read", d, "--turns", "3", "--json"], "read"),
                        (["transcript", "grep", d, NEVER, "--json"], "grep")):
        mods, out, code = imported(argv)
        full = capsys.readouterr() and main(argv)
        assert (out, code) == (capsys.readouterr().out, full), argv
        ours = {m for m in mods if m.startswith("mnemon")}
        assert ours == QUICK_MODULES[which], (argv, ours ^ QUICK_MODULES[which])
        assert not mods & NEVER_IMPORTED, (argv, mods & NEVER_IMPORTED)
        assert mods - ours <= STDLIB, (argv, mods - ours - STDLIB)


def test_a_quick_answer_ends_the_process_as_the_cli_does():
    """Exit functions run and the streams are flushed (``cli.leave_quick``), as every command's
    end does (``cli.leave``), and the exit code is the answer's."""
    probe = ("import atexit, sys\n"
             "from mnemon.orchestrator.cli import console\n"
             "atexit.register(lambda: print('exit functions ran'))\n"
             "sys.argv = ['mnemon', '--version']\n"
             "console()\n")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert proc.returncode == 0
    assert proc.stdout.startswith("mnemon ") and proc.stdout.endswith("exit functions ran\n")


@SETTINGS
@given(size=st.integers(0, 3000), near=st.one_of(st.none(), st.integers(-12, 12)),
       chunk=st.integers(1, 64), split=st.integers(0, 3000))
def test_a_long_file_searched_in_two_halves_finds_what_one_pass_finds(tmp_path_factory, size,
                                                                      near, chunk, split):
    """``lineage.nohit`` searches a long file as two halves in two threads (each through its
    own buffer, a form across the middle or across two reads found whole): the same answer as
    a search of the whole bytes, wherever the form lies."""
    import mnemon.lineage.nohit as nohit

    lit = b"QUOKKA-7f3a"
    data = bytearray(b"x" * size)
    if near is not None and size >= len(lit):  # about the middle, where the halves meet
        at = max(0, min(size // 2 + near, size - len(lit)))
        data[at:at + len(lit)] = lit
    path = tmp_path_factory.mktemp("half") / "f"
    path.write_bytes(bytes(data))
    found, anchors = [lit, b"QUOKKA\\u002d7f3a"], [0, 3]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(nohit, "CHUNK", chunk)
        mp.setattr(nohit, "SPLIT", split)
        mp.setattr(nohit, "_cpus", lambda: 2)
        got = nohit._holds(str(path), found, anchors)
    assert got == (lit in data)


@needs_native
def test_paths_as_the_parser_takes_them(capsys, tmp_path, monkeypatch):
    """The agent named by its ``record.jsonl``, by a relative path, through a symlink to the
    run root, with a trailing slash, or by a folder that is not an agent's: the same answers."""
    root = create_run_root(tmp_path / "run", "tests")
    log = new_agent(root, "a1")
    for i in range(5):
        tool_turn(log, f"t{i}", "ls", f"out {i}")
    log.close()
    door_open(root / "agents" / "a1")
    (tmp_path / "link").symlink_to(root)
    monkeypatch.chdir(tmp_path)
    n = 0
    for d in ("run/agents/a1", "run/agents/a1/", "run/agents/a1/record.jsonl", "link/agents/a1",
              "./link/agents/../agents/a1", "run/agents", "run", "nowhere", "run/run.json"):
        n += both(capsys, ["transcript", "read", d, "--turns", "2", "--json"])
        n += both(capsys, ["transcript", "grep", d, NEVER])
    assert n >= 10
