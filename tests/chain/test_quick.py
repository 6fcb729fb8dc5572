"""``mnemon verify PATH --head`` answered before the parser (``lineage.heads``, decision 0422):
the same bytes and exit code as the full command on every run these tests make — whole chains,
lineages, unchained logs, torn tails, example run roots — and no answer at all (the full
command's turn) wherever a chain breaks, a kept head disagrees, a signature lies beside a log or
the command line is one it does not read. What the process imports is pinned."""

from __future__ import annotations

import json
import os
import shutil

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mnemon.lineage.heads import quick_heads
from mnemon.lineage.runroot import create_run_root
from mnemon.orchestrator.cli import main
from mnemon.session import chain
from tests.conftest import EXAMPLES
from tests.quickpath import both, imported

from .test_verify import lineage as two_generations

SETTINGS = settings(max_examples=int(os.environ.get("MNEMON_HYPOTHESIS_EXAMPLES", 60)),
                    deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                          HealthCheck.too_slow])


def every_form(capsys, path) -> int:
    """The command lines the quick path reads, on one path; how many it answered."""
    p = str(path)
    return sum(both(capsys, argv) for argv in (["verify", p, "--head"],
                                               ["verify", p, "--head", "--json"],
                                               ["verify", "--head", p],
                                               ["verify", "--json", "--head", p]))


def lineage(root):
    return two_generations(root, deep=True)


def test_a_lineage_is_answered_as_the_full_command_answers(run_root, capsys):
    lineage(run_root)
    assert every_form(capsys, run_root) == 4
    for d in ("p", "c1", "g1"):  # one agent's directory, and its log named directly
        assert every_form(capsys, run_root / "agents" / d) == 4
        assert both(capsys, ["verify", str(run_root / "agents" / d / "record.jsonl"), "--head"])
    rep = quick_heads(str(run_root))
    assert rep is not None and [x["path"] for x in rep["logs"]] == [
        "agents/c1/record.jsonl", "agents/g1/record.jsonl", "agents/p/record.jsonl"]


def test_the_example_run_roots(capsys, tmp_path):
    answered_ = 0
    for run in sorted({p.parent.parent.parent for p in EXAMPLES.rglob("agents/*/record.jsonl")}):
        copy = tmp_path / run.relative_to(EXAMPLES)
        shutil.copytree(run, copy)
        answered_ += every_form(capsys, copy)
        for here in sorted((copy / "agents").iterdir()):
            answered_ += every_form(capsys, here)
    assert answered_ > 20, "the quick path answered next to nothing"


def test_an_unchained_log_and_a_torn_tail(tmp_path, capsys):
    old = tmp_path / "old"
    shutil.copytree(EXAMPLES / "plain", old)
    log = next(old.rglob("record.jsonl"))
    log.write_bytes(b"".join(chain.strip(x) + b"\n" for x in log.read_bytes().splitlines()))
    assert every_form(capsys, old) == 4
    assert quick_heads(str(old))["logs"][0]["chain"] == "unchained"
    with open(log, "ab") as f:
        f.write(b'{"t":"Steering","te')  # a crash mid-append: not counted, not tampering
    assert every_form(capsys, old) == 4


def test_what_it_leaves_to_the_full_command(run_root, capsys, tmp_path):
    ppath, cpath = lineage(run_root)
    r = str(run_root)
    for argv in (["verify", r], ["verify", r, "--head", "--against", str(tmp_path / "h")],
                 ["verify", r, "--head", "--key", str(tmp_path / "k")],
                 ["verify", r, "--hea"], ["verify", r, "--head", "--head"],
                 ["verify", r, "--head", "--json=1"], ["verify", r, r, "--head"],
                 ["verify", str(tmp_path / "nowhere"), "--head"],
                 ["verify", str(tmp_path), "--head"]):
        assert not both(capsys, argv), argv
    # a signature beside a log: the full command checks it
    (run_root / "agents/c1/record.jsonl.sig").write_text("{}")
    assert not both(capsys, ["verify", r, "--head"])
    os.unlink(run_root / "agents/c1/record.jsonl.sig")
    # records after the fork cut off: still what the child's link holds
    data = ppath.read_bytes()
    ppath.write_bytes(data[:data.rindex(b"\n", 0, len(data) - 1) + 1])
    assert both(capsys, ["verify", r, "--head"])
    # the parent cut back to three records: whole on its own, short of its child's link
    ppath.write_bytes(b"".join(x + b"\n" for x in data.splitlines()[:3]))
    assert chain.check(ppath, "agents/p/record.jsonl").broken is None
    assert not both(capsys, ["verify", r, "--head"])
    assert both(capsys, ["verify", str(run_root / "agents/p"), "--head"])  # alone, it is whole
    ppath.write_bytes(data)
    assert both(capsys, ["verify", r, "--head"])
    # a run.json of another format, a FIFO where a log should be
    (run_root / "run.json").write_text('{"format": 2}')
    assert not both(capsys, ["verify", r, "--head"])
    (run_root / "run.json").write_text('{"format": 1}')
    (run_root / "agents/zz").mkdir()
    os.mkfifo(run_root / "agents/zz/record.jsonl")
    assert not both(capsys, ["verify", r, "--head"])


def test_a_log_escaping_its_run_root_is_left_to_the_full_command(run_root, tmp_path, capsys):
    lineage(run_root)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    shutil.move(run_root / "agents/g1/record.jsonl", outside / "record.jsonl")
    os.symlink(outside / "record.jsonl", run_root / "agents/g1/record.jsonl")
    assert quick_heads(str(run_root)) is None
    assert not both(capsys, ["verify", str(run_root), "--head"])


LINES = st.integers(1, 40)


@SETTINGS
@given(which=st.sampled_from(["p", "c1", "g1"]), kind=st.sampled_from(
    ["flip", "delete", "duplicate", "swap", "rechain"]), at=LINES, data=st.data())
def test_generated_tampering_is_never_answered(tmp_path_factory, capsys, which, kind, at, data):
    """Whatever is done to a log of a lineage, the quick path answers only where the full
    command says ``ok`` — and then with the same bytes."""
    root = create_run_root(tmp_path_factory.mktemp("qv") / "run", "tests")
    lineage(root)
    path = root / "agents" / which / "record.jsonl"
    lines = path.read_bytes().splitlines()
    i = at % len(lines)
    if kind == "flip":
        line = bytearray(lines[i])
        k = data.draw(st.integers(0, len(line) - 1))
        line[k] = ord("Q") if line[k] != ord("Q") else ord("R")
        lines[i] = bytes(line)
    elif kind == "delete":
        del lines[i]
    elif kind == "duplicate":
        lines.insert(i, lines[(i + 1) % len(lines)])
    elif kind == "swap" and len(lines) > 1:
        j = (i + 1) % len(lines)
        lines[i], lines[j] = lines[j], lines[i]
    elif kind == "rechain":  # rewritten with the chain recomputed: only a kept head tells
        redo = chain.Running()
        lines = [redo.seal(chain.strip(x).replace(b"hello", b"HELLO")
                           .replace(b"README", b"READ-ME"))[:-1] for x in lines]
    path.write_bytes(b"".join(x + b"\n" for x in lines))
    capsys.readouterr()
    full = main(["verify", str(root), "--head", "--json"])
    ok = json.loads(capsys.readouterr().out)["ok"]
    quick = both(capsys, ["verify", str(root), "--head", "--json"])
    assert quick == (full == 0 and ok), (kind, which, i)


# ------------------------------------------------------------------ what the process imports

QUICK = {"mnemon", "mnemon._lazy", "mnemon.errors", "mnemon.orchestrator",
         "mnemon.orchestrator.cli", "mnemon.orchestrator.cli.quick", "mnemon.lineage",
         "mnemon.lineage.outside", "mnemon.lineage.heads", "mnemon.session",
         "mnemon.session.chainhead"}
NEVER_IMPORTED = {"msgspec", "trio", "structlog", "argparse", "pathlib", "typing", "regex",
                  "httpx", "importlib.metadata", "threading", "mnemon.session.records",
                  "mnemon.session.chain", "mnemon.session.log"}


def test_the_quick_path_imports_what_it_uses_and_nothing_else(run_root, capsys):
    lineage(run_root)
    argv = ["verify", str(run_root), "--head", "--json"]
    got, out, code = imported(argv)
    capsys.readouterr()
    assert main(argv) == code == 0
    assert out == capsys.readouterr().out
    ours = {m for m in got if m.startswith("mnemon")}
    assert ours == QUICK, ours ^ QUICK
    assert not got & NEVER_IMPORTED, got & NEVER_IMPORTED
    assert "blake3" in got and {m for m in got - ours if not m.startswith(("json", "_json"))} \
        <= {"blake3", "blake3.blake3", "mmap", "atexit"}, got - ours


def test_the_record_names_it_reads_are_the_decoders():
    """``lineage.heads`` names the record kinds without importing them: the same sets."""
    from mnemon.lineage import heads
    from mnemon.session.records import FORENSIC, PROTOCOL, Inherited

    assert heads.PROTOCOL == {c.__name__ for c in PROTOCOL if c is not Inherited}
    assert heads.FORENSIC == {c.__name__ for c in FORENSIC}


def test_a_line_nested_past_what_json_reads_is_left_to_the_full_command(run_root, capsys):
    lineage(run_root)
    log = run_root / "agents/g1/record.jsonl"
    lines = log.read_bytes().splitlines()
    lines.insert(1, b"[" * 100_000 + b"]" * 100_000)
    log.write_bytes(b"".join(x + b"\n" for x in lines))
    assert quick_heads(str(run_root)) is None
    assert not both(capsys, ["verify", str(run_root), "--head"])
